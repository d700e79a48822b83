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
    /// A directory the planner cannot list (or that holds a path longer than `PATH_MAX`), which
    /// is or holds a writable root: it cannot be masked, and nothing in it was checked.
    #[error("cannot check {}: {}; it holds the writable path {}, so it cannot be masked, and the secrets and protected files in it cannot be found", .dir.display(), if *.deep { "a path in it is longer than PATH_MAX (4095 bytes), which no mount can name" } else { "the planner may not list it (its mode lets the caller search but not read it, or it belongs to another user)" }, .root.display())]
    Unlistable {
        /// The directory that could not be checked.
        dir: PathBuf,
        /// The writable root it is or holds.
        root: PathBuf,
        /// Whether a path in it is too long (else the listing was refused).
        deep: bool,
    },
    /// A directory of the workspace kept changing while the planner walked it: walked again
    /// at least 5 times and for 2 s, it had changed again each time, so what the command
    /// would start beside cannot be known (a secret moved past the walk would not be masked).
    #[error("{} kept changing while stockade looked for the secrets and protected files in it (entries created, removed or renamed there each time it looked again, {rewalks} times): a secret moved past the walk would not be masked, so the run was refused before anything ran", .dir.display())]
    WorkspaceChanged {
        /// The directory that changed the last time it was checked.
        dir: PathBuf,
        /// How many times it was walked again.
        rewalks: usize,
    },
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
    /// Whether the run is refused because a protection cannot be put in place here (its code
    /// is `E_PROTECTION_UNAVAILABLE`, not `E_POLICY_INVALID`).
    pub fn protection_unavailable(&self) -> bool {
        matches!(self, ScanError::Unlistable { .. })
    }

    /// Whether the run is refused because the workspace kept changing during the planner's
    /// walk (its code is `E_WORKSPACE_CHANGED`).
    pub fn workspace_changed(&self) -> bool {
        matches!(self, ScanError::WorkspaceChanged { .. })
    }

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
            ScanError::Unlistable { dir, deep: false, .. } => Some(format!(
                "make it listable and run again: `chmod u+rx {dir}` (an earlier run may have closed it); stockade refuses rather than run in a directory it cannot check",
                dir = dir.display(),
            )),
            ScanError::Unlistable { dir, deep: true, .. } => Some(format!(
                "move or rename what lies deeper than PATH_MAX below {dir} to a shorter path (an earlier run may have buried it there), or run in a shorter workspace path; stockade refuses rather than run beside what it cannot mask",
                dir = dir.display(),
            )),
            ScanError::WorkspaceChanged { dir, .. } => Some(format!(
                "stop what keeps creating, removing or renaming entries in {dir} (another run's command, a build or a script still running there), or run again; stockade refuses rather than start a run beside a secret its walk may not have seen",
                dir = dir.display(),
            )),
            ScanError::PrivateTmpWorkspace(_) => Some(
                "run from a directory below /tmp (`mktemp -d`), or pass --workspace DIR: a workspace below /tmp is attached at the same path inside".into(),
            ),
        }
    }
}
