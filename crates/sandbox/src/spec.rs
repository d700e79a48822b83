//! The resolved spec of one run: what the sandbox must look like, in terms every backend
//! can lower (bind mounts, masks, an environment, limits as numbers), with no mechanism in
//! it. The native backend lowers it to namespaces, Landlock and seccomp; the gVisor backend to
//! an OCI bundle.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::{Options, RunError};

/// What a run's sandbox must hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Spec {
    /// The command and its arguments (`argv[0]` is looked up in `PATH` of [`Spec::env`]).
    pub argv: Vec<String>,
    /// Where the command asks to start: the caller's directory. A backend whose sandbox cannot
    /// reach it starts in [`Spec::workspace`] and says why.
    pub cwd: PathBuf,
    /// The workspace (canonical).
    pub workspace: PathBuf,
    /// The caller's home (canonical or as given).
    pub home: PathBuf,
    /// The command's whole environment: nothing is added by the backend.
    pub env: Vec<(String, String)>,
    pub hostname: String,
    /// The host's directory tree is readable except for [`Spec::masks`].
    pub read_scope: ReadScope,
    /// Paths granted for reading (`allow_read`, canonical): under [`ReadScope::AllowList`] the
    /// only ones besides the system's; under either, exceptions inside the masks.
    pub read_grants: Vec<PathBuf>,
    /// Directories (or files) the command can write; everything else is read-only.
    pub writable_roots: Vec<PathBuf>,
    /// Paths inside the writable roots kept read-only (git hooks and config, host-executed
    /// project files, the trust store).
    pub protected: Vec<PathBuf>,
    /// Directories inside the writable roots that must not be renamed during the run (git
    /// dirs holding protected paths, the trust store's ancestors): a rename would carry the
    /// read-only paths inside away whole.
    pub pins: Vec<PathBuf>,
    /// What the command must not create inside its writable roots. A backend with a creation
    /// guard refuses it as it happens; the others leave it to the checks after the run.
    pub guard: Vec<GuardPattern>,
    /// `deny_write` globs no [`GuardPattern`] expresses: checked after the run only.
    pub guard_sweep_only: Vec<String>,
    /// Paths the command must not read: replaced by something empty.
    pub masks: Vec<Mask>,
    /// Directories inside the writable roots that the run sees as an empty directory of its
    /// own (a private tmpfs, gone with the run): nothing written there reaches the host.
    pub private_dirs: Vec<PathBuf>,
    /// Masked files with another name (hard link) outside every mask, readable through it by
    /// any backend: the run is refused (or the masking recorded as skipped when degrading is
    /// allowed).
    pub linked_secrets: Vec<LinkedSecret>,
    pub network: Network,
    /// The proxy serves credential routes for this run (`--credential`): whoever can act as
    /// the command can have the proxy put the real secrets on requests.
    pub credential_routes: bool,
    pub limits: Limits,
    /// Who runs the sandbox (on the host).
    pub caller: Ids,
    /// Review and ephemeral runs: the workspace is a copy-on-write view, see [`Review`].
    /// `None`: the command writes the real workspace (direct mode).
    pub review: Option<Review>,
    /// `(st_dev, st_ino)` of every masked, protected and pinned path when the spec was made:
    /// a backend mounts over a path only if it is still that file (another run could have
    /// renamed a directory into its place since).
    #[serde(skip)]
    pub identities: BTreeMap<PathBuf, (u64, u64)>,
}

impl Spec {
    /// The pins that need a mount of their own where pins are binds (gVisor, the container
    /// engines): the others are a writable root or a protected path (bound already), or lie at
    /// or below a mask or a private directory (a tmpfs or file over them, itself a mount
    /// point, hides them).
    pub fn pins_bound_alone(&self) -> Vec<&PathBuf> {
        (self.pins.iter())
            .filter(|p| !self.writable_roots.contains(p) && !self.protected.contains(p))
            .filter(|p| !self.masks.iter().any(|m| p.starts_with(&m.path)))
            .filter(|p| !self.private_dirs.iter().any(|d| p.starts_with(d)))
            .collect()
    }

    /// The read grants below the host's `/tmp` that no writable root or other such grant
    /// holds: every backend's `/tmp` is private, so each is shown in it on its own (bound
    /// read-only at its own path).
    pub fn tmp_read_grants(&self) -> Vec<&PathBuf> {
        let tmp = std::path::Path::new("/tmp");
        let under: Vec<&PathBuf> = (self.read_grants.iter())
            .filter(|g| g.starts_with(tmp) && g.as_path() != tmp)
            .filter(|g| !self.writable_roots.iter().any(|w| g.starts_with(w)))
            .collect();
        (under.iter())
            .filter(|g| !under.iter().any(|o| o != *g && g.starts_with(o)))
            .copied()
            .collect()
    }
}

/// A review (or ephemeral) run's workspace: the command reads the real workspace through a
/// copy-on-write view, and every write lands in `changes/upper` (the run's change directory,
/// with the view's scratch directory `changes/work` beside it). The real workspace is never
/// written during the run. A backend that cannot make such a view refuses the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Review {
    /// The run's change directory (canonical, made by the orchestrator, only the caller can
    /// write it).
    pub changes: PathBuf,
    /// Whether the change directory and the workspace are on one filesystem: a view over one
    /// filesystem keeps the workspace's inode numbers, so a path's identity
    /// ([`Spec::identities`]) can still be checked by inode inside it.
    pub same_filesystem: bool,
}

/// How to get review mode where a backend cannot make its view ([`Review`]): the fix of
/// every such refusal, whichever backend makes the overlay.
pub const REVIEW_FIX: &str = "review mode needs overlayfs with layers given as descriptors (Linux ≥ 6.13) and, for a caller who is not root, overlay mounts in user namespaces (Linux ≥ 5.11); the workspace and the change directory ($XDG_STATE_HOME/stockade/changes) must be on filesystems overlayfs accepts (ext4, xfs, btrfs, tmpfs); or run without --review";

/// A path the command must not create, as a creation guard matches it:
/// `base/**/tail[0]/tail[1]/..` (`*` and `?` allowed in the tail), or `base` and everything
/// below it when the tail is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuardPattern {
    pub base: PathBuf,
    pub tail: Vec<String>,
}

/// A masked file that has more names than the masks cover, or a protected (read-only) file
/// that has more names than the protected paths cover (`protected`): through another name
/// the first would be read, the second written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkedSecret {
    pub path: PathBuf,
    /// Names the file has (hard links).
    pub links: u64,
    /// Names of it found under the masks (under the protected paths when `protected`).
    pub masked: u64,
    /// A protected file rather than a masked one.
    pub protected: bool,
}

/// Whether paths outside the listed ones are readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadScope {
    /// The whole host tree, minus the masks.
    Host,
    /// Only the granted paths and the system's runtime paths.
    AllowList,
}

/// A path replaced by an empty file or directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mask {
    pub path: PathBuf,
    pub kind: Kind,
    /// `true`: readable and empty (`read_empty`); `false`: unreadable (`deny_read`).
    pub readable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    File,
    Dir,
}

/// Where the proxy listens inside the sandbox's own network namespace (which has nothing else).
pub const PROXY_ADDR: std::net::SocketAddrV4 =
    std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 3128);

/// The network the command gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum Network {
    /// Loopback only.
    None,
    /// Loopback only, with stockade's egress proxy listening at `addr` inside.
    Proxy { addr: std::net::SocketAddrV4 },
    /// The host's network.
    Host,
}

/// The run's limits, as numbers: `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Limits {
    pub timeout: Option<Duration>,
    /// Size of the private `/tmp`, in bytes.
    pub tmp_bytes: Option<u64>,
    /// Open files per process.
    pub files: Option<u64>,
    /// Memory of the whole run, in bytes.
    pub memory_bytes: Option<u64>,
    /// Processes and threads of the whole run.
    pub pids: Option<u64>,
    /// CPU of the whole run, in thousandths of a core.
    pub cpu_millis: Option<u64>,
    /// Output passed on per stream, in bytes.
    pub output_bytes: Option<u64>,
    /// What a review or ephemeral run may write into its view of the workspace, in bytes
    /// (writes beyond it fail with ENOSPC inside).
    pub disk_bytes: Option<u64>,
}

/// A user and group id on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
}

/// Whether a root caller's command, which every backend runs as an id no account has, may
/// search a directory of `mode` owned by `owner` (uid, gid): by its "others" bits, or by the
/// owner's or group's bits where an idmapped mount gives the owner `mapped` to the command.
pub fn unassigned_id_enters(mode: u32, owner: (u32, u32), mapped: Option<(u32, u32)>) -> bool {
    match mapped {
        Some((uid, _)) if owner.0 == uid => mode & 0o100 != 0,
        Some((_, gid)) if owner.1 == gid => mode & 0o010 != 0,
        _ => mode & 0o001 != 0,
    }
}

/// A masked file with another name (hard link) outside every mask could be read through that
/// name by any backend, and a protected file with another name outside the protected paths
/// written through it (`ln .git/config keep`: `core.fsmonitor` for the host's next `git
/// status`): the run is refused, or the protection recorded as skipped under
/// `--allow-degraded` (the entries to record are returned). The same for every backend (a
/// masked file's other name is readable through gVisor's gofer as through the host kernel):
/// every backend's run calls it, so a library caller of a backend fails closed too, and the
/// pipeline calls it before anything of the run happens.
pub fn refuse_linked_secrets(
    linked: &[LinkedSecret],
    options: Options,
) -> Result<Vec<String>, RunError> {
    let mut skipped = Vec::new();
    // A protected file first: its refusal names what a write through the other name does.
    let first = (linked.iter().find(|l| l.protected)).or_else(|| linked.first());
    if let Some(l) = first {
        let others = linked.len() - 1;
        let more = if others > 0 {
            format!(" (and {others} more such files)")
        } else {
            String::new()
        };
        let (what, cause, fix) = if l.protected {
            (
                "protection of a file host tools run",
                format!(
                    "{} is protected (read-only during the run) but has {} names (hard links) and only {} of them is protected: another name of this protected file would be writable{more}",
                    l.path.display(),
                    l.links,
                    l.masked,
                ),
                format!(
                    "break the link with a copy: `cp --preserve=all {f} {f}.new && mv {f}.new {f}` (find its other names with `find / -xdev -samefile {f}`), or pass --allow-degraded to run anyway",
                    f = l.path.display()
                ),
            )
        } else {
            (
                "masking of a credential file",
                format!(
                    "{} has {} names (hard links) and only {} of them lies under a mask: the sandbox could read it through another{more}",
                    l.path.display(),
                    l.links,
                    l.masked,
                ),
                format!(
                    "find its other names with `find / -xdev -samefile {}` and remove the ones you did not make on purpose (a copy does not share the file), or pass --allow-degraded to run anyway",
                    l.path.display()
                ),
            )
        };
        if options.allow_degraded {
            let kind = if l.protected {
                "protection of linked protected files"
            } else {
                "masking of linked credential files"
            };
            skipped.push(format!("{kind}: {cause}"));
        } else {
            return Err(RunError::Unavailable { what, cause, fix });
        }
    }
    Ok(skipped)
}
