//! The gVisor backend: a run's [`sandbox::Spec`] lowered to an OCI bundle ([`bundle`]) and
//! run by `runsc` (Debian package `runsc`), whose Sentry is the command's kernel.
//!
//! What enforces what, compared with the native backend:
//! - the read-only host, masks, writable roots, protected paths and the private `/tmp`: the
//!   Sentry's mounts (bind mounts through its gofer), not Landlock (the Sentry has no Landlock
//!   syscalls) and not a mount namespace of the host kernel; every mask is also covered in
//!   runsc's own mount namespace, where its file server works, only on the file planned
//!   ([`Cover`]; an unprivileged caller's in a user namespace of runsc's own): a concurrent
//!   process exchanging the directories that hold a secret after planning cannot move it out
//!   from under its mask (runsc's masks go by path);
//! - pinned directories (git dirs holding protected paths, the ancestors of stockade's state
//!   inside a writable root): a writable bind of each over itself, as natively: the Sentry
//!   refuses to rename a mount point or to rename anything over one (`EBUSY`);
//! - protected paths *created* during a run: not refused at the call (the Sentry has no
//!   seccomp user notification for stockade to answer); the sweep after the run neutralises
//!   them, as it does for the native backend;
//! - the network: `--network=none` (the Sentry's own loopback only);
//! - memory, processes and CPU: the run's cgroup (root callers; stockade makes it and reads
//!   its counters after the run, [`usage`]), or
//!   `RLIMIT_NPROC` (the Sentry counts only the run's processes) and a per-process
//!   `RLIMIT_AS` for an unprivileged caller (`runsc --rootless` has no cgroup);
//! - the uid: a root caller's command runs as [`ROOT_CALLER_ID`], unprivileged, and sees its
//!   writable roots (and a home only root can enter, read-only) through idmapped mounts in
//!   runsc's own mount namespace, so it owns them and files it makes belong to their owner
//!   on disk, as with the native backend; an unprivileged caller's is uid 0 of
//!   `runsc --rootless`'s user namespace, mapped to the caller;
//! - review and ephemeral runs: the native backend's copy-on-write view ([`ReviewView`]),
//!   attached at the workspace in runsc's own mount namespace before the covers.
//!
//! ```no_run
//! use gvisor::{Gvisor, Io};
//! # fn spec() -> sandbox::Spec { unimplemented!() }
//! let backend = Gvisor::locate(&[])?;
//! let plan = backend.plan_with(&spec(), "a-run", &gvisor::host_owned)?;
//! let (stdin, _feed) = std::io::pipe()?;
//! let (_out, stdout) = std::io::pipe()?;
//! let (_err, stderr) = std::io::pipe()?;
//! let io = Io {
//!     stdin: stdin.into(),
//!     stdout: stdout.into(),
//!     stderr: stderr.into(),
//!     cancel: sandbox::Cancel::new(),
//!     network: None,
//!     process_signals: false,
//!     terminal: None,
//! };
//! let finished = backend.run(&plan, io)?;
//! println!("exit {}", finished.exit_code);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod backend;
pub mod bundle;
mod console;
pub use workspace::gitstage;
mod network;
mod plan;
mod platform;
mod run;
pub mod usage;

use std::path::{Path, PathBuf};

use sandbox::{Check, Spec};
use serde::Serialize;

use backend::root_caller;
pub use backend::{GvisorBackend, ENFORCEMENT};
pub use platform::Platform;
pub use run::{host_owned, Finished, Io, OwnTerminal};

/// The most masked, protected and pinned paths a gVisor run takes (runsc failed to start
/// above about 240 here).
pub const MAX_MOUNTS: usize = 230;

/// Why the gVisor backend cannot plan or run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `runsc` is missing or does not work here: the probe that failed and how to fix it.
    #[error("gVisor is unavailable: {cause}")]
    Unavailable { cause: String, fix: String },
    #[error(transparent)]
    Lower(#[from] bundle::LowerError),
    /// A path the policy masks that `runsc --rootless` cannot mask, and that would be within
    /// the command's reach unmasked.
    #[error("{cause}")]
    CannotMask { cause: String, fix: String },
    /// A mount destination changed between planning and the start (refused: `runsc` would
    /// create or follow it on the host).
    #[error("{path} changed since the run was planned ({what}); refusing to start")]
    Changed { path: PathBuf, what: String },
    #[error("could not {what}: {cause}")]
    Io {
        what: String,
        #[source]
        cause: std::io::Error,
    },
}

/// A gVisor failure in the contract's terms (the pipeline knows no backend's own errors).
impl From<Error> for sandbox::RunError {
    fn from(e: Error) -> sandbox::RunError {
        let cause = e.to_string();
        match e {
            Error::Unavailable { cause, fix } => sandbox::RunError::Unavailable {
                what: "gVisor (runsc)",
                cause,
                fix,
            },
            Error::CannotMask { cause, fix } => sandbox::RunError::Unavailable {
                what: "masking under runsc --rootless",
                cause,
                fix,
            },
            Error::Lower(_) => sandbox::RunError::Unavailable {
                what: "this policy under the gvisor backend",
                cause,
                fix: "run with --backend native".into(),
            },
            Error::Changed { path, what } => sandbox::RunError::Setup {
                stage: "check the mount points",
                path: Some(path),
                cause: std::io::Error::other(what),
                explained: Some("a path the run mounts over changed between planning and the start (another run or program changed it); run again".into()),
            },
            Error::Io { what, cause: io } => sandbox::RunError::Io { what, cause: io },
        }
    }
}

/// Who runs `runsc`, and as whom the command runs inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Caller {
    /// `runsc --rootless`: the caller is not root.
    pub rootless: bool,
    /// The command's uid and gid inside the Sentry.
    pub uid: u32,
    pub gid: u32,
    /// Names the container and its cgroup.
    pub run_id: String,
}

/// The id a root caller's command runs as inside the Sentry (the native backend's host id for
/// it): files of the idmapped views are its own, root's elsewhere are not.
pub const ROOT_CALLER_ID: u32 = 0x7ff0_0000;

/// What planning needs to know of a host path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owned {
    pub kind: sandbox::Kind,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

/// A tree a root caller's command sees through an idmapped mount: its owner's files belong to
/// [`ROOT_CALLER_ID`] there (and what the command makes belongs to the owner on disk).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Idmapped {
    pub path: PathBuf,
    pub owner: (u32, u32),
    pub readonly: bool,
}

/// A review run's copy-on-write view of the workspace (see [`sandbox::Review`]): an overlay of
/// the workspace whose writes land in the run's change directory, attached at the workspace in
/// runsc's own mount namespace (where its file server works) before the covers, which then go
/// onto it. A root caller's is made by this process over an idmapped view of the workspace
/// (its owner's files the command's id's, as in direct mode); an unprivileged caller's by
/// runsc's child in the user namespace that holds its covers (`sys::mountns::View`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewView {
    pub workspace: PathBuf,
    /// The run's change directory (`upper/` and `work/` inside).
    pub changes: PathBuf,
    /// The workspace's owner (uid, gid): its files are the command's id's in a root caller's
    /// view.
    pub owner: (u32, u32),
    /// `limits.disk`: the upper is a tmpfs of this many bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
    /// Mode of the upper's top directory: the workspace's.
    pub upper_mode: u32,
}

/// A masked path (or one read as empty) that `runsc` finds covered already in its own mount
/// namespace, where its file server works (for a caller who is not root, in a user namespace
/// of its own around `runsc --rootless`): an empty file or directory mounted
/// there only if the path still holds the file the planner saw ([`Cover::identity`]), before
/// runsc starts. A mount follows its file when directories are exchanged afterwards (another
/// run's command renaming what holds it), so the file server never serves the secret, whatever
/// path runsc's own mask (by path, at its start) lands on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cover {
    pub path: PathBuf,
    pub kind: sandbox::Kind,
    pub readable: bool,
    /// `(st_dev, st_ino)` when planned ([`Spec::identities`]); `None`: covered unchecked.
    pub identity: Option<(u64, u64)>,
}

/// The covers of a root caller's masks: one per mask, but none below a masked directory (its
/// cover hides what it held, and the path is not there any more to look up).
fn covers(spec: &Spec) -> Vec<Cover> {
    let under_dir_mask = |p: &Path| {
        (spec.masks.iter())
            .any(|m| m.kind == sandbox::Kind::Dir && m.path != p && p.starts_with(&m.path))
    };
    let mut out: Vec<Cover> = Vec::new();
    for m in &spec.masks {
        if under_dir_mask(&m.path) || out.iter().any(|c| c.path == m.path) {
            continue;
        }
        out.push(Cover {
            path: m.path.clone(),
            kind: m.kind,
            readable: m.readable,
            identity: spec.identities.get(&m.path).copied(),
        });
    }
    out
}

/// The identities the covers inside a reviewed workspace find there: the view keeps the
/// workspace's inode numbers when the change directory is on its filesystem, under the
/// overlay's device (so the inode alone is compared: [`sys::postfork::ANY_DEVICE`]); across
/// filesystems it does not, and those are covered unchecked (as the native init does).
fn view_identities(covers: &mut [Cover], workspace: &Path, same_filesystem: bool) {
    for c in covers.iter_mut().filter(|c| c.path.starts_with(workspace)) {
        c.identity = c
            .identity
            .filter(|_| same_filesystem)
            .map(|(_, ino)| (sys::postfork::ANY_DEVICE, ino));
    }
}

/// Whether `path` is still the file `spec` planned (its identity; no identity: nothing to
/// compare, so yes), not following a last symbolic link.
fn still_planned(spec: &Spec, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let now = std::fs::symlink_metadata(path).map(|m| (m.dev(), m.ino()));
    match (spec.identities.get(path), now) {
        (None, _) => true,
        (Some(planned), Ok(now)) => *planned == now,
        (Some(_), Err(_)) => false,
    }
}

/// The gVisor backend, bound to one `runsc` executable and the platform that works with it.
#[derive(Debug, Clone)]
pub struct Gvisor {
    pub runsc: PathBuf,
    pub platform: Platform,
}

/// A lowered spec: the OCI config and the `runsc` command line that runs it.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub runsc: PathBuf,
    pub platform: Platform,
    pub caller: Caller,
    /// `runsc --network=…`.
    pub network: &'static str,
    /// Mode proxy: where the proxy listens inside; the run needs [`Io::network`].
    pub proxy: Option<std::net::SocketAddrV4>,
    /// runsc, and every runsc asked about the run, runs in a network namespace held for the
    /// run ([`Io::network`]): runsc binds its control socket (`@runsc-sandbox.ID`, abstract,
    /// which any process in the namespace can connect to, whoever it is, and ask to run
    /// commands in the sandbox) in the namespace it starts in. False only for an
    /// unprivileged caller's `--net host`: its sandbox must be in the host's namespace, which
    /// it can neither leave for runsc nor name to runsc by path (README: "gVisor").
    pub control_held: bool,
    /// The OCI runtime config (`config.json`; its schema checked by the tests with `oci-spec`).
    pub config: serde_json::Value,
    /// Paths the config mounts over, with what they were when planned (checked again right
    /// before the start).
    pub destinations: Vec<(PathBuf, sandbox::Kind)>,
    /// Root callers: trees seen through an idmapped mount in runsc's own mount namespace.
    pub idmapped: Vec<Idmapped>,
    /// The masks, covered in runsc's own mount namespace too (a root caller's: after the
    /// idmapped trees; an unprivileged caller's: in a user namespace of runsc's own), each only
    /// on the file planned.
    pub covers: Vec<Cover>,
    /// Existing git dirs whose top level the command sees as a staged copy ([`gitstage`]).
    pub staged: Vec<gitstage::Staged>,
    /// Review and ephemeral runs: the workspace's copy-on-write view.
    pub review: Option<ReviewView>,
    /// The bundle is never put inside one of these.
    pub writable_roots: Vec<PathBuf>,
    pub timeout: Option<std::time::Duration>,
    /// A root caller's cgroup, made before runsc starts ([`usage::Group`]).
    pub group: Option<usage::GroupPlan>,
    /// The limits the run's events are judged against.
    pub judged: usage::Judged,
    /// Why the command starts in the workspace rather than in the caller's directory (the
    /// spec's `cwd`), when it does.
    pub cwd_fallback: Option<String>,
}

/// The first directory on the way to `dir` (itself included) that a root caller's command
/// cannot enter, with its mode.
fn first_untraversable(
    dir: &Path,
    idmapped: &[Idmapped],
    stat: &dyn Fn(&Path) -> Option<Owned>,
) -> Option<(PathBuf, u32)> {
    let mut chain: Vec<&Path> = dir.ancestors().collect();
    chain.reverse();
    for d in chain {
        let o = stat(d)?;
        let mapped = idmapped
            .iter()
            .filter(|i| d.starts_with(&i.path))
            .max_by_key(|i| i.path.components().count());
        if !sandbox::unassigned_id_enters(o.mode, (o.uid, o.gid), mapped.map(|i| i.owner)) {
            return Some((d.to_path_buf(), o.mode & 0o7777));
        }
    }
    None
}

/// The first directory on the way to `dir` (itself included) that a root caller's command
/// cannot enter, with why.
fn untraversable(
    dir: &Path,
    idmapped: &[Idmapped],
    stat: &dyn Fn(&Path) -> Option<Owned>,
) -> Option<String> {
    first_untraversable(dir, idmapped, stat).map(|(d, mode)| {
        format!(
            "the sandbox's user cannot enter {} (mode {mode:o})",
            d.display()
        )
    })
}

/// How a root caller's command reaches granted paths that lie below directories it cannot
/// enter (`mktemp -d` makes 0700 directories; a workspace cloned below one), as the native
/// backend's reach covers do: the first such directory on the way to each granted path is
/// covered with a small tmpfs of the Sentry's (root's, mode 0755: the command cannot write
/// it) that holds only the way to the granted paths below it, each bound over it. Nothing
/// else below a cover was reachable before either, so it shows nothing the command could not
/// already see. Unprivileged callers run as themselves (uid 0 of runsc's user namespace,
/// mapped to them) and need none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// The covered directories, none inside another.
    pub covers: Vec<PathBuf>,
    /// Granted paths below a cover that have no mount of their own otherwise (read grants,
    /// the idmapped home): bound read-only over themselves.
    pub binds: Vec<PathBuf>,
}

impl Reach {
    /// `granted`: every path the command is granted (writable roots, read grants outside
    /// `/tmp`, the home), and which of them are mounted already (`bound`).
    fn plan(
        granted: &[PathBuf],
        bound: &[PathBuf],
        idmapped: &[Idmapped],
        stat: &dyn Fn(&Path) -> Option<Owned>,
    ) -> Reach {
        let mut blocked: Vec<PathBuf> = granted
            .iter()
            .filter_map(|g| g.parent())
            .filter_map(|parent| first_untraversable(parent, idmapped, stat))
            .map(|(d, _)| d)
            .collect();
        blocked.sort();
        blocked.dedup();
        let covers: Vec<PathBuf> = (blocked.iter())
            .filter(|b| !blocked.iter().any(|o| o != *b && b.starts_with(o)))
            .cloned()
            .collect();
        let mut binds: Vec<PathBuf> = (granted.iter())
            .filter(|g| covers.iter().any(|c| g.starts_with(c) && *g != c))
            .filter(|g| !bound.iter().any(|b| g.starts_with(b)))
            .cloned()
            .collect();
        binds.sort();
        binds.dedup();
        Reach { covers, binds }
    }

    /// Whether the Sentry shows `path` below a cover: it is on the way to a granted path or
    /// inside one (`granted`); elsewhere below a cover there is nothing.
    fn hides(&self, path: &Path, granted: &[PathBuf]) -> Option<&PathBuf> {
        let cover = self.covers.iter().find(|c| path.starts_with(c))?;
        let shown = granted
            .iter()
            .any(|g| path.starts_with(g) || (g.starts_with(path) && g.starts_with(cover)));
        (!shown).then_some(cover)
    }
}

/// Why the Sentry cannot show the command the caller's directory, if it cannot: it has its own
/// `/tmp`, `/dev` and `/proc`, and a masked directory is empty there.
fn unreachable_cwd(spec: &Spec) -> Option<String> {
    let cwd = &spec.cwd;
    let granted = std::iter::once(&spec.workspace)
        .chain(&spec.writable_roots)
        .chain(&spec.read_grants);
    if granted.into_iter().any(|g| cwd.starts_with(g)) {
        return None;
    }
    if cwd.starts_with("/tmp") {
        return Some("the sandbox has its own /tmp (grant the directory with --allow-read or --allow-write to start there)".into());
    }
    if ["/tmp", "/dev", "/proc"].iter().any(|r| cwd.starts_with(r)) {
        return Some("the sandbox has its own /tmp, /dev and /proc".into());
    }
    let masked = spec
        .masks
        .iter()
        .find(|m| !m.readable && cwd.starts_with(&m.path));
    masked.map(|m| format!("{} is masked", m.path.display()))
}

/// Where `runsc` is looked for, in order. Never on `PATH`: a directory there may be one the
/// sandbox could write (an activated virtualenv, `~/.cargo/bin`), and runsc runs as the caller
/// (as root for a root caller) outside every sandbox. `STOCKADE_RUNSC` names another one.
const RUNSC_PATHS: &[&str] = &["/usr/bin/runsc", "/usr/local/bin/runsc", "/usr/sbin/runsc"];

/// The fix when runsc is missing or broken.
pub const RUNSC_FIX: &str = "install gVisor's runsc (Debian/Ubuntu: `apt-get install runsc`), or run with `--backend native`";

/// Whether `path` can be trusted to run outside the sandbox: a regular file whose every
/// ancestor, and itself, belong to root or the caller and are not writable by others (a
/// sticky directory like /tmp counts as safe for its entries' own owners).
pub fn trusted_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if !path.is_absolute() {
        return Err(format!("{} is not an absolute path", path.display()));
    }
    let me = rustix::process::geteuid().as_raw();
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", path.display()));
    }
    let real = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut owner_of_child = meta.uid();
    for (i, p) in real.ancestors().enumerate() {
        let m = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        if m.uid() != 0 && m.uid() != me {
            return Err(format!(
                "{} belongs to uid {}, neither root nor the caller",
                p.display(),
                m.uid()
            ));
        }
        let sticky = m.mode() & 0o1000 != 0;
        let others_write = m.mode() & 0o022 != 0;
        if others_write && !(i > 0 && sticky && (owner_of_child == me || owner_of_child == 0)) {
            return Err(format!("{} is writable by others", p.display()));
        }
        owner_of_child = m.uid();
    }
    Ok(())
}

fn find_runsc() -> Result<PathBuf, Error> {
    let chosen = match std::env::var_os("STOCKADE_RUNSC") {
        Some(p) => PathBuf::from(p),
        None => RUNSC_PATHS
            .iter()
            .map(PathBuf::from)
            .find(|c| c.is_file())
            .ok_or_else(|| Error::Unavailable {
                cause: format!("runsc was not found (looked at {})", RUNSC_PATHS.join(", ")),
                fix: RUNSC_FIX.into(),
            })?,
    };
    trusted_executable(&chosen).map_err(|why| Error::Unavailable {
        cause: format!("refusing to run {}: {why}", chosen.display()),
        fix: format!("{RUNSC_FIX}; runsc runs outside the sandbox, so it must belong to root (or you) in directories only root (or you) can write"),
    })?;
    // The path that was checked, not one through a link that could change after the check.
    std::fs::canonicalize(&chosen).map_err(|e| Error::Unavailable {
        cause: format!("{}: {e}", chosen.display()),
        fix: RUNSC_FIX.into(),
    })
}

impl Gvisor {
    /// Finds `runsc` and the platform that runs a command with it here (cached per runsc
    /// build, see `platform`), or says why there is none.
    /// `writable_roots`: the run's; a runsc inside one is refused (the command could replace
    /// it, and `runsc kill`/`delete` run after the command).
    pub fn locate(writable_roots: &[PathBuf]) -> Result<Gvisor, Error> {
        // Canonical already (see `find_runsc`).
        let runsc = find_runsc()?;
        if let Some(root) = writable_roots.iter().find(|w| runsc.starts_with(w)) {
            return Err(Error::Unavailable {
                cause: format!(
                    "refusing to run {}: it lies in {}, which the command can write",
                    runsc.display(),
                    root.display()
                ),
                fix: format!("{RUNSC_FIX}; point STOCKADE_RUNSC outside the writable paths"),
            });
        }
        let platform = platform::choose(&runsc)?;
        Ok(Gvisor { runsc, platform })
    }

    fn caller(&self, run_id: &str) -> Caller {
        // The effective uid decides between `runsc` as root and `runsc --rootless`. A root
        // caller's command runs as an unprivileged id (as under the native backend): it owns
        // only what the idmapped views give it ([`Plan::idmapped`]), never root's files.
        let root = root_caller();
        Caller {
            rootless: !root,
            uid: if root { ROOT_CALLER_ID } else { 0 },
            gid: if root { ROOT_CALLER_ID } else { 0 },
            run_id: run_id.to_string(),
        }
    }

    /// Checks that `runsc` runs a command here, with what it found.
    pub fn checks() -> Vec<Check> {
        let found = find_runsc();
        let mut checks = vec![Check {
            name: "runsc",
            ok: found.is_ok(),
            required: true,
            detail: match &found {
                Ok(p) => format!("found {}", p.display()),
                Err(e) => e.to_string(),
            },
            fix: found.is_err().then(|| RUNSC_FIX.to_string()),
        }];
        if let Ok(runsc) = found {
            checks.push(match platform::choose(&runsc) {
                Ok(p) => Check {
                    name: "runsc runs a command",
                    ok: true,
                    required: true,
                    detail: format!("`runsc --platform={} do true` works", p.name()),
                    fix: None,
                },
                Err(e) => Check {
                    name: "runsc runs a command",
                    ok: false,
                    required: true,
                    detail: e.to_string(),
                    fix: Some(RUNSC_FIX.into()),
                },
            });
        }
        checks
    }
}

impl Gvisor {
    /// Runs a plan to its end with runsc, on the streams of `io`.
    pub fn run(&self, plan: &Plan, io: Io) -> Result<Finished, Error> {
        run::run(plan, io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(uid: u32, mode: u32) -> Option<Owned> {
        Some(Owned {
            kind: sandbox::Kind::Dir,
            uid,
            gid: uid,
            mode,
        })
    }

    /// Every mask is covered with the identity planned (the walk's), but what lies below a
    /// masked directory (hidden by its cover, and no longer there to look up); a mask the
    /// spec has no identity for is covered unchecked, as the native init does.
    #[test]
    fn covers_carry_the_planned_identity_and_skip_what_a_masked_directory_hides() {
        let mask = |p: &str, kind, readable| sandbox::Mask {
            path: p.into(),
            kind,
            readable,
        };
        let mut spec = crate::bundle::tests::spec();
        spec.masks = vec![
            mask("/h/.ssh", sandbox::Kind::Dir, false),
            mask("/h/.ssh/id_ed25519", sandbox::Kind::File, false),
            mask("/w/.env", sandbox::Kind::File, false),
            mask("/h/.sshx", sandbox::Kind::File, true),
            mask("/w/.env", sandbox::Kind::File, false),
        ];
        spec.identities = [("/w/.env".into(), (7, 70)), ("/h/.ssh".into(), (8, 80))]
            .into_iter()
            .collect();
        let cover = |p: &str, kind, readable, identity| Cover {
            path: p.into(),
            kind,
            readable,
            identity,
        };
        assert_eq!(
            covers(&spec),
            [
                cover("/h/.ssh", sandbox::Kind::Dir, false, Some((8, 80))),
                cover("/w/.env", sandbox::Kind::File, false, Some((7, 70))),
                cover("/h/.sshx", sandbox::Kind::File, true, None),
            ]
        );
    }

    /// A review run's plan holds its view (the workspace's owner and mode, the change
    /// directory, the disk bound), and the covers inside the workspace compare the inode
    /// alone there (the overlay's device is its own) when the change directory shares the
    /// workspace's filesystem, none across filesystems (the view's inodes are new); covers
    /// outside keep the identity planned. Control: a direct run's covers keep theirs.
    #[test]
    fn a_review_run_plans_its_view_and_what_its_covers_compare() {
        let g = Gvisor {
            runsc: "/usr/bin/runsc".into(),
            platform: Platform::Ptrace,
        };
        let mut spec = crate::bundle::tests::spec();
        spec.identities = [("/w/.env".into(), (7, 70)), ("/h/.ssh".into(), (8, 80))]
            .into_iter()
            .collect();
        let stat = |p: &Path| match p.to_str() {
            Some("/w") => Some(Owned {
                kind: sandbox::Kind::Dir,
                uid: 1000,
                gid: 1001,
                mode: 0o40750,
            }),
            _ => dir(0, 0o40755),
        };
        let identity = |plan: &Plan, p: &str| {
            (plan.covers.iter())
                .find(|c| c.path == Path::new(p))
                .map(|c| c.identity)
        };
        let direct = g.plan_with(&spec, "r1", &stat).expect("planned");
        assert_eq!(direct.review, None);
        assert_eq!(identity(&direct, "/w/.env"), Some(Some((7, 70))));
        spec.limits.disk_bytes = Some(1 << 20);
        for same_filesystem in [true, false] {
            spec.review = Some(sandbox::Review {
                changes: "/s/changes/r1".into(),
                same_filesystem,
            });
            let plan = g.plan_with(&spec, "r1", &stat).expect("planned");
            assert_eq!(
                plan.review,
                Some(ReviewView {
                    workspace: "/w".into(),
                    changes: "/s/changes/r1".into(),
                    owner: (1000, 1001),
                    disk_bytes: Some(1 << 20),
                    upper_mode: 0o750,
                })
            );
            let inside = same_filesystem.then_some((sys::postfork::ANY_DEVICE, 70));
            assert_eq!(identity(&plan, "/w/.env"), Some(inside));
            assert_eq!(identity(&plan, "/h/.ssh"), Some(Some((8, 80))));
        }
        // A workspace gone since the walk: refused as changed, never planned without a view.
        let gone = g.plan_with(&spec, "r1", &|p: &Path| {
            (p != Path::new("/w")).then(|| dir(0, 0o40755)).flatten()
        });
        assert!(matches!(gone, Err(Error::Changed { .. })), "{gone:?}");
    }

    /// The unprivileged plan leaves a mask out only while its path is still the file planned:
    /// one gone (exchanged away) or replaced since is not "unreadable", it is kept and refused
    /// at the start (found by the exchange test: dropped, the secret was read where it went).
    #[test]
    fn a_mask_is_left_out_only_while_it_is_the_file_planned() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("a directory");
        let env = dir.path().join(".env");
        std::fs::write(&env, "S=1").expect("write");
        let m = std::fs::metadata(&env).expect("stat");
        let mut spec = crate::bundle::tests::spec();
        assert!(
            still_planned(&spec, &env),
            "no identity: nothing to compare"
        );
        spec.identities.insert(env.clone(), (m.dev(), m.ino()));
        assert!(still_planned(&spec, &env));
        // Replaced (another inode at the path), then gone.
        let other = dir.path().join("other");
        std::fs::write(&other, "").expect("write");
        std::fs::rename(&env, dir.path().join("moved")).expect("move");
        std::fs::rename(&other, &env).expect("replace");
        assert!(!still_planned(&spec, &env));
        std::fs::remove_file(&env).expect("remove");
        assert!(!still_planned(&spec, &env));
    }

    /// A root caller's granted paths below directories its id cannot enter are reached through
    /// a cover of the outermost such directory on each way; what is bound already (a writable
    /// root) gets no second mount, a read grant below a cover gets one, and the cover hides
    /// everything else below it.
    #[test]
    fn a_cover_leads_a_root_callers_command_to_what_it_is_granted() {
        let stat = |p: &Path| match p.to_str()? {
            "/" | "/srv" | "/home" => dir(0, 0o755),
            "/home/u" => dir(1000, 0o700),
            "/home/u/tmp.x" => dir(1000, 0o700),
            "/home/u/tmp.x/clone" | "/home/u/docs" => dir(1000, 0o755),
            "/srv/open" => dir(0, 0o755),
            _ => None,
        };
        let ws = PathBuf::from("/home/u/tmp.x/clone");
        let docs = PathBuf::from("/home/u/docs");
        let granted = vec![ws.clone(), docs.clone(), "/srv/open".into()];
        let mapped = Idmapped {
            path: ws.clone(),
            owner: (1000, 1000),
            readonly: false,
        };
        let reach = Reach::plan(&granted, std::slice::from_ref(&ws), &[mapped], &stat);
        assert_eq!(reach.covers, [PathBuf::from("/home/u")]);
        assert_eq!(reach.binds, [docs]);
        assert_eq!(reach.hides(Path::new("/home/u/tmp.x"), &granted), None);
        assert_eq!(
            reach.hides(Path::new("/home/u/tmp.x/clone/src"), &granted),
            None
        );
        assert!(reach
            .hides(Path::new("/home/u/.bashrc"), &granted)
            .is_some());
        assert!(reach
            .hides(Path::new("/home/u/tmp.x/other"), &granted)
            .is_some());
        assert_eq!(reach.hides(Path::new("/srv"), &granted), None);
        // The cover and the bind in the config: the tmpfs before the binds below it.
        let mut spec = crate::bundle::tests::spec();
        spec.writable_roots = vec![ws.clone()];
        let caller = Caller {
            rootless: false,
            uid: ROOT_CALLER_ID,
            gid: ROOT_CALLER_ID,
            run_id: "r".into(),
        };
        let config = bundle::config(&spec, &caller, &reach, &[], Path::new("/b")).expect("lowers");
        let dests: Vec<&str> = (config["mounts"].as_array().expect("mounts").iter())
            .filter_map(|m| m["destination"].as_str())
            .collect();
        let at = |d: &str| dests.iter().position(|x| *x == d).expect(d);
        assert!(at("/home/u") < at("/home/u/docs"));
        assert!(at("/home/u") < at("/home/u/tmp.x/clone"));
        let cover = &config["mounts"][at("/home/u")];
        assert_eq!(cover["type"], "tmpfs");
        assert!(cover["options"].to_string().contains("mode=0755"));
        assert!(config["mounts"][at("/home/u/docs")]["options"]
            .to_string()
            .contains("\"ro\""));
        // Unprivileged callers enter what they own: no cover.
        let own = |p: &Path| {
            stat(p).map(|o| Owned {
                mode: o.mode | 0o001,
                ..o
            })
        };
        assert_eq!(Reach::plan(&granted, &[ws], &[], &own), Reach::default());
    }

    /// A root caller's command passes only the "others" bits outside its idmapped trees, and
    /// the owner's inside them: a start directory below `/root` (0700) is out of reach.
    #[test]
    fn a_root_callers_start_directory_must_be_enterable() {
        let stat = |p: &Path| match p.to_str()? {
            "/" | "/srv" | "/srv/p" => dir(0, 0o755),
            "/root" => dir(0, 0o700),
            "/root/x" => dir(0, 0o755),
            "/home/u" => dir(1000, 0o700),
            "/home" => dir(0, 0o755),
            _ => None,
        };
        assert_eq!(untraversable(Path::new("/srv/p"), &[], &stat), None);
        let why = untraversable(Path::new("/root/x"), &[], &stat).unwrap_or_default();
        assert!(why.contains("cannot enter /root (mode 700)"), "{why}");
        assert!(untraversable(Path::new("/home/u"), &[], &stat).is_some());
        let home = Idmapped {
            path: "/home/u".into(),
            owner: (1000, 1000),
            readonly: true,
        };
        assert_eq!(untraversable(Path::new("/home/u"), &[home], &stat), None);
    }
}
