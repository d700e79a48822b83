//! Why a run's spec cannot be made: the policy does not fit this workspace or machine.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    #[error("no program to run")]
    NoProgram,
    #[error("writable path does not exist: {}", .0.display())]
    WritableRootMissing(PathBuf),
    #[error("writable paths must be exact paths, not globs: {0}")]
    WritableRootGlob(String),
    #[error("refusing to make {} writable", .0.display())]
    WritableRootForbidden(PathBuf),
    #[error("readable path does not exist: {}", .0.display())]
    ReadGrantMissing(PathBuf),
    #[error("cannot grant {}: the sandbox has its own empty /tmp and /dev/shm, discarded after the run", .0.display())]
    PrivateTmpGrant(PathBuf),
    #[error("the workspace cannot be {}: the sandbox has its own empty /tmp and /dev/shm, discarded after the run", .0.display())]
    PrivateTmpWorkspace(PathBuf),
    #[error("{} passes through the symbolic link {} -> {}, which a sandboxed run could have made (it lies in a directory you can write); it leads to {}", .given.display(), .link.display(), .target.display(), .real.display())]
    GrantThroughLink {
        /// The path as granted (or given as the workspace).
        given: PathBuf,
        /// The link on the way.
        link: PathBuf,
        /// What the link holds, as written.
        target: PathBuf,
        /// Where the path really leads.
        real: PathBuf,
    },
    #[error("{} is a symbolic link: the run's own empty directory cannot go over it", .0.display())]
    PrivateDirLink(PathBuf),
    /// A grant at or beneath the caller's stockade state directory ([`crate::state_grants`]).
    #[error("refusing {} {}: it lies in {}, where stockade keeps its run journals, walk cache, trust store and change sets; stockade's own state cannot be granted to a run", .kind.spelled(), .grant.display(), .state.display())]
    StateGrant {
        /// Which kind of grant.
        kind: crate::state_grants::GrantKind,
        /// The grant, resolved.
        grant: PathBuf,
        /// The state directory it lies in.
        state: PathBuf,
    },
}

impl ScanError {
    /// How to get past it.
    pub fn hint(&self) -> Option<String> {
        match self {
            ScanError::Policy(e) => e.hint(),
            ScanError::NoProgram => {
                Some("give a program after `--`, or use --shell 'COMMAND'".into())
            }
            ScanError::WritableRootMissing(_) => {
                Some("create it first or remove it from allow_write / --allow-write".into())
            }
            ScanError::WritableRootGlob(_) => {
                Some("list each writable directory explicitly".into())
            }
            ScanError::WritableRootForbidden(_) => Some(
                "allow a narrower directory; /, /dev, /proc and /sys cannot be made writable"
                    .into(),
            ),
            ScanError::GrantThroughLink { real, link, .. } => Some(format!(
                "if {real} is what you mean, name it by its own path instead (or besides): --allow-write {real} / --allow-read {real} as the grant was, or --workspace {real}; otherwise remove the link {link}",
                real = real.display(),
                link = link.display(),
            )),
            ScanError::PrivateDirLink(_) => Some(
                "replace the link by a plain directory (or remove it: a preset makes it), then run again".into(),
            ),
            ScanError::ReadGrantMissing(_) => {
                Some("create it first or remove it from allow_read / --allow-read".into())
            }
            ScanError::PrivateTmpGrant(_) => Some(
                "grant a directory below /tmp instead (`mktemp -d`): it is attached at the same path inside; the private /tmp itself is always writable".into(),
            ),
            ScanError::StateGrant { state, .. } => Some(format!(
                "grant (or run in) a directory outside {state} instead; an agent's own directory below it is granted by --agent NAME (claude-code, codex, opencode); to look at stockade's state, do it on the host (`stockade changes`, `stockade trust`), not from inside a run",
                state = state.display(),
            )),
            ScanError::PrivateTmpWorkspace(_) => Some(
                "run from a directory below /tmp (`mktemp -d`), or pass --workspace DIR: a workspace below /tmp is attached at the same path inside".into(),
            ),
        }
    }
}
