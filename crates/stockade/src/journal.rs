//! The run journal: what the sweep after a run needs, written before the command starts and
//! removed once that sweep has completed, so that a run whose supervisor was killed (SIGKILL,
//! the machine's power) is swept by the next run on its workspace (issue 30, item 8).
//!
//! Without it, a supervisor killed mid-run takes its sandbox with it (the init dies with it)
//! but skips the sweep: a git hook, an `.envrc` or a link into a mask the command made stays
//! in the workspace for the host to act on, and under gVisor a protected path the command
//! renamed away stays renamed.
//!
//! A journal is `<state>/stockade/journal/<workspace digest>-<run id>.json` (the caller's state
//! directory, `$XDG_STATE_HOME` or `~/.local/state`): the run's policy and invocation (the
//! spec is made again from them) and what the plan found before the run (protected paths that
//! existed and their identities, git dirs, git indexes, masks, the creation guard's patterns,
//! when the planner's walk began, when the command started). The directory is masked in every
//! run like the change store (a command that could rewrite a journal could steer the host's
//! quarantine), and made before the run, so that it exists to be masked.
//!
//! The supervisor holds an exclusive `flock` on its journal for its whole life: the kernel
//! drops it when the process dies, however it dies. The next run on the workspace takes each
//! journal's lock without waiting: one it gets belongs to a dead run, whose sweep it completes
//! (reported on stderr and in the audit log as `sweep_recovered`, code
//! [`SWEEP_RECOVERED`], with each violation) before removing the journal.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{Error, RunRequest};

/// The audit event code of a sweep completed for a run whose supervisor died.
pub(crate) const SWEEP_RECOVERED: &str = "SWEEP_RECOVERED";

const FORMAT: u32 = 1;

/// A journal larger than this is not one of ours.
const MAX_JOURNAL: u64 = 256 << 20;

/// A path or string as its bytes (lossless for names that are not UTF-8).
type Bytes = OsString;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Journal {
    format: u32,
    run_id: String,
    backend: String,
    /// The supervisor, for a person reading the file (the lock is what tells it is alive).
    pid: u32,
    policy: policy::Policy,
    invocation: Invocation,
    /// When the command started and when the planner's walk began (ns since the epoch).
    started_ns: u64,
    taken_at_ns: Option<u64>,
    held_creation_guard: bool,
    held_pinned: bool,
    roots: Vec<Bytes>,
    existing: Vec<(Bytes, String)>,
    /// The protected links of `existing`: (path, target as written, where it led). A spec
    /// made again would read what the dead run left (a link it swapped).
    #[serde(default)]
    links: Vec<(Bytes, Bytes, Option<Bytes>)>,
    git_dirs: Vec<Bytes>,
    git_indexes: Vec<(Bytes, Vec<String>, usize)>,
    protected: Vec<Bytes>,
    pins: Vec<Bytes>,
    guard: Vec<(Bytes, Vec<String>)>,
    guard_sweep_only: Vec<String>,
    /// (path, is a directory, readable)
    masks: Vec<(Bytes, bool, bool)>,
    identities: Vec<(Bytes, u64, u64)>,
    /// stockade's own directories the supervisor writes into (the journals'), with their
    /// identities ([`workspace::SweepPlan::own`]).
    #[serde(default)]
    own: Vec<(Bytes, u64, u64)>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Invocation {
    argv: Vec<String>,
    workspace: Bytes,
    cwd: Bytes,
    home: Bytes,
    uid: u32,
    gid: u32,
    env: Vec<(Bytes, Bytes)>,
}

fn ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

fn os(p: &Path) -> Bytes {
    p.as_os_str().to_owned()
}

fn kind_name(k: workspace::Kind) -> &'static str {
    match k {
        workspace::Kind::Dir => "dir",
        workspace::Kind::File => "file",
        workspace::Kind::Symlink => "symlink",
        workspace::Kind::Other => "other",
    }
}

fn kind_of(name: &str) -> Option<workspace::Kind> {
    Some(match name {
        "dir" => workspace::Kind::Dir,
        "file" => workspace::Kind::File,
        "symlink" => workspace::Kind::Symlink,
        "other" => workspace::Kind::Other,
        _ => return None,
    })
}

/// Whether the caller's variable `name` goes into the journal: only those the spec's
/// protected paths and grants are found from (the home, the XDG directories, the program's
/// search path), never the rest of the caller's environment (tokens, keys).
fn kept_variable(name: &std::ffi::OsStr) -> bool {
    let name = name.as_encoded_bytes();
    name.starts_with(b"XDG_") || [&b"HOME"[..], b"PATH", b"USER", b"LOGNAME"].contains(&name)
}

/// The journal directory of the caller of `request`: `<state>/stockade/journal`.
pub(crate) fn dir(request: &RunRequest) -> Option<PathBuf> {
    let env = |name: &str| {
        (request.invocation.env.iter())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    sandbox::state_dir(env("XDG_STATE_HOME").as_deref(), env("HOME").as_deref())
        .map(|d| d.join("journal"))
}

/// The name prefix of a workspace's journals.
fn prefix(workspace: &Path) -> String {
    let digest = Sha256::digest(workspace.as_os_str().as_encoded_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("{hex}-")
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |cause| Error::Io { what, cause }
}

/// Whether the caller's state directory has somewhere to be: `XDG_STATE_HOME`'s parent, or
/// the home, exists (a service account's home may not: nothing is made there for it).
fn has_a_place(request: &RunRequest) -> bool {
    let env = |name: &str| {
        (request.invocation.env.iter())
            .find(|(k, _)| k == name)
            .map(|(_, v)| PathBuf::from(v))
            .filter(|p| p.is_absolute())
    };
    match (env("XDG_STATE_HOME"), env("HOME")) {
        (Some(state), _) => state.parent().is_some_and(Path::is_dir),
        (None, Some(home)) => home.is_dir(),
        (None, None) => false,
    }
}

/// Makes the journal directory (private to the caller) when missing; `None` when the caller
/// has no place for it or it cannot be made. Called before the workspace is scanned (after
/// the check that no link the command could replace leads to it), so a journal directory in
/// a writable root is one that existed before the run: the checks after a gVisor run would
/// otherwise take the supervisor's own directory for a protected path the run created.
pub(crate) fn make(request: &RunRequest) -> Option<PathBuf> {
    let dir = dir(request).filter(|_| has_a_place(request))?;
    // Made by an earlier run (the common case, and the second call of a run): one `lstat`.
    if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Some(dir);
    }
    // The directories above it with the usual modes (`~/.local` made 0700 kept a nested
    // stockade, run inside a root caller's sandbox, from its state directory: it then failed
    // on the trust store instead of saying what the sandbox lacks); the journals' own 0700.
    // Through no link, from the existing part of the way canonical on: a concurrent run
    // whose writable root holds the way could exchange a directory on it for a link, and
    // the rest was made where it led, as root (red team, issue 33).
    let real = crate::review_stage::resolve_existing_part(&dir);
    let made = real
        .parent()
        .map_or(Ok(()), |p| workspace::create_dir_all_no_links(p, 0o777))
        .and_then(|()| workspace::create_dir_all_no_links(&real, 0o700));
    if let Err(e) = made {
        tracing::debug!("no run journal: cannot make {}: {e}", dir.display());
        return None;
    }
    Some(dir)
}

/// Makes the journal directory (private to the caller) when missing, and hides it from the
/// command like the change store: unreadable and unwritable. A caller whose state directory
/// cannot be made (no home, a read-only one) runs without a journal, as before journals: a
/// supervisor killed mid-run then leaves its sweep undone (README says so).
pub(crate) fn prepare(request: &RunRequest, spec: &mut sandbox::Spec) -> Result<(), Error> {
    let Some(dir) = make(request) else {
        return Ok(());
    };
    let Ok(dir) = std::fs::canonicalize(&dir) else {
        return Ok(());
    };
    let visible = !workspace::under_replaced(&dir)
        || spec
            .writable_roots
            .iter()
            .any(|w| policy::is_within(&dir, w));
    if visible && !spec.masks.iter().any(|m| m.path == dir) {
        spec.masks.push(sandbox::Mask {
            path: dir,
            kind: sandbox::Kind::Dir,
            readable: false,
        });
    }
    Ok(())
}

/// A run's journal, locked for as long as this lives; [`Held::done`] removes it.
#[derive(Debug)]
pub(crate) struct Held {
    path: PathBuf,
    _file: std::fs::File,
}

/// Writes the journal of the run `run_id` (about to start at `started`) and takes its lock.
/// `None` when the caller has no state directory.
pub(crate) fn begin(
    request: &RunRequest,
    policy: &policy::Policy,
    resolved: &workspace::Resolved,
    run_id: &str,
    started: SystemTime,
    held: workspace::sweep::Held,
) -> Result<Option<Held>, Error> {
    // No journal directory (see `prepare`): no journal.
    let Some(dir) = dir(request).filter(|d| has_a_place(request) && d.is_dir()) else {
        return Ok(None);
    };
    let inv = &request.invocation;
    let spec = &resolved.spec;
    let sweep = &resolved.watch.sweep;
    let journal = Journal {
        format: FORMAT,
        run_id: run_id.to_string(),
        backend: policy.backend.as_str().to_string(),
        pid: std::process::id(),
        policy: policy.clone(),
        invocation: Invocation {
            argv: inv.argv.clone(),
            workspace: os(&inv.workspace),
            cwd: os(&inv.cwd),
            home: os(&inv.home),
            uid: inv.uid,
            gid: inv.gid,
            env: (inv.env.iter())
                .filter(|(k, _)| kept_variable(k))
                .cloned()
                .collect(),
        },
        started_ns: ns(started),
        taken_at_ns: sweep.dirs.taken_at.map(ns),
        held_creation_guard: held.creation_guard,
        held_pinned: held.pinned,
        roots: sweep.roots.iter().map(|p| os(p)).collect(),
        existing: (sweep.existing.iter())
            .map(|(p, k)| (os(p), kind_name(*k).to_string()))
            .collect(),
        links: (sweep.links.iter())
            .map(|(p, l)| (os(p), os(&l.target), l.resolves.as_deref().map(os)))
            .collect(),
        git_dirs: sweep.git_dirs.iter().map(|p| os(p)).collect(),
        git_indexes: (sweep.git_indexes.iter())
            .map(|g| (os(&g.path), g.hidden.iter().cloned().collect(), g.hash_len))
            .collect(),
        protected: spec.protected.iter().map(|p| os(p)).collect(),
        pins: spec.pins.iter().map(|p| os(p)).collect(),
        guard: (spec.guard.iter())
            .map(|g| (os(&g.base), g.tail.clone()))
            .collect(),
        guard_sweep_only: spec.guard_sweep_only.clone(),
        masks: (spec.masks.iter())
            .map(|m| (os(&m.path), m.kind == sandbox::Kind::Dir, m.readable))
            .collect(),
        identities: (spec.identities.iter())
            .map(|(p, (dev, ino))| (os(p), *dev, *ino))
            .collect(),
        own: (resolved.watch.sweep.own.iter())
            .map(|(p, (dev, ino))| (os(p), *dev, *ino))
            .collect(),
    };
    let text = serde_json::to_vec(&journal).map_err(|e| Error::Io {
        what: "write the run journal".into(),
        cause: std::io::Error::other(e),
    })?;
    let path = dir.join(format!("{}{run_id}.json", prefix(&inv.workspace)));
    // Written under a temporary name, locked, then renamed into place: a journal found under
    // its name is whole, and locked from its first moment.
    let tmp = dir.join(format!(".{run_id}.tmp"));
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
    {
        Ok(f) => f,
        // Not the caller's to write (masked, or read-only as in a container run: this
        // stockade runs inside a sandbox, which refuses it later, naming what it lacks): no
        // journal, as without a state directory.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            tracing::debug!("no run journal: {}: {e}", tmp.display());
            return Ok(None);
        }
        Err(e) => return Err(io(format!("write the run journal {}", tmp.display()))(e)),
    };
    let written = rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(std::io::Error::from)
        .and_then(|()| file.write_all(&text))
        .and_then(|()| file.sync_data())
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(format!("write the run journal {}", path.display()))(e));
    }
    Ok(Some(Held { path, _file: file }))
}

impl Held {
    /// The sweep completed: the journal goes (its lock with it).
    pub(crate) fn done(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The sweep of a run found dead (its supervisor killed before its sweep), completed from its
/// journal before the run that found it.
#[derive(Debug, Clone, Serialize)]
pub struct RecoveredSweep {
    /// The dead run's id (its quarantine directory's name).
    pub run_id: String,
    /// The journal it was completed from (removed since).
    pub journal: PathBuf,
    /// What that sweep took out or reported.
    pub violations: Vec<sandbox::Violation>,
    /// Writable roots of the dead run that this run cannot write: its sweep was not completed
    /// there (a journal names them, and under gVisor a command may have written the journal:
    /// it is acted on only where this run could act itself).
    pub not_swept: Vec<PathBuf>,
}

/// The audit log's record of completed sweeps: a `sweep_recovered` event each, then its
/// violations.
pub(crate) fn audit(
    log: &mut crate::record::AuditLog,
    recovered: &[RecoveredSweep],
) -> Result<(), Error> {
    for r in recovered {
        log.event(&crate::audit_event::AuditEvent::SweepRecovered {
            code: SWEEP_RECOVERED,
            recovered_run_id: &r.run_id,
            journal: &r.journal,
            violations: r.violations.len(),
            not_swept: &r.not_swept,
        })?;
        for v in &r.violations {
            log.event(&crate::audit_event::AuditEvent::Violation(v))?;
        }
    }
    Ok(())
}

/// Completes the sweep of every run on `request`'s workspace whose supervisor died before
/// its own (a journal nobody holds locked), then removes its journal. A journal that cannot
/// be read or acted on refuses this run: the workspace may hold what that run left.
///
/// `writable`: the writable roots of this run. A journal directory inside one is not trusted:
/// natively it is masked, guarded and its parents pinned during every run, but under gVisor a
/// command may rename it away (the Sentry allows renaming a directory holding mounts) and
/// plant a journal of its own, which only the sweep its killed supervisor skipped would have
/// found. Such a journal is not acted on: the run is refused, naming it.
pub(crate) fn recover(
    request: &RunRequest,
    writable: &[PathBuf],
) -> Result<Vec<RecoveredSweep>, Error> {
    let Some(dir) = dir(request) else {
        return Ok(Vec::new());
    };
    let exposed = std::fs::canonicalize(&dir)
        .ok()
        .and_then(|d| writable.iter().find(|w| policy::is_within(&d, w)).cloned());
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        // Masked: this stockade runs inside a sandbox (which refuses it later, naming what it
        // lacks), or the caller closed it. No journal here can be read or written.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            tracing::debug!("no run journals recovered: {}: {e}", dir.display());
            return Ok(Vec::new());
        }
        Err(e) => return Err(io(format!("list the run journals in {}", dir.display()))(e)),
    };
    let prefix = prefix(&request.invocation.workspace);
    let entries: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    fn name(p: &Path) -> Option<&str> {
        p.file_name()?.to_str()
    }
    // Walk caches of the place they had before their own directory (`workspace::walk_cache`):
    // removed, once, so this listing holds journals only. Not in a directory a run could
    // write (a cache is only a cache, but nothing is acted on there).
    if exposed.is_none() {
        for p in &entries {
            if name(p).is_some_and(|n| n.starts_with("walk-") && n.ends_with(".cache")) {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    let mut names: Vec<PathBuf> = entries
        .into_iter()
        .filter(|p| name(p).is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".json")))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for path in names {
        if let Some(r) = recover_one(request, &path, exposed.as_deref(), writable)? {
            out.push(r);
        }
    }
    Ok(out)
}

fn refused(path: &Path, cause: String) -> Error {
    Error::Run(sandbox::RunError::Unavailable {
        what: "the sweep of an earlier run on this workspace whose supervisor was killed",
        cause: format!("{}: {cause}", path.display()),
        fix: format!(
            "look through the workspace for what that run may have left (git hooks, .envrc, links), then remove {}",
            path.display()
        ),
    })
}

fn recover_one(
    request: &RunRequest,
    path: &Path,
    exposed: Option<&Path>,
    writable: &[PathBuf],
) -> Result<Option<RecoveredSweep>, Error> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        // Removed by its run (or another recovery) since it was listed.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(refused(path, format!("cannot open it: {e}"))),
    };
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        // Its run is alive (or another run is completing its sweep right now).
        Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
        Err(e) => return Err(refused(path, format!("cannot lock it: {e}"))),
    }
    // Removed after its sweep while this waited for nothing: gone now.
    if !path.exists() {
        return Ok(None);
    }
    if let Some(root) = exposed {
        return Err(refused(
            path,
            format!(
                "it lies in {}, which a run can write, so a command may have planted it (it is not acted on); point XDG_STATE_HOME outside the writable paths",
                root.display()
            ),
        ));
    }
    let meta = file
        .metadata()
        .map_err(|e| refused(path, format!("cannot read it: {e}")))?;
    if !meta.is_file() || meta.len() > MAX_JOURNAL {
        return Err(refused(path, "it is not a run journal".into()));
    }
    let journal: Journal = serde_json::from_reader(std::io::BufReader::new(&file))
        .map_err(|e| refused(path, format!("it is not a whole run journal ({e})")))?;
    if journal.format != FORMAT {
        return Err(refused(
            path,
            format!(
                "it has format {} (this stockade reads {FORMAT})",
                journal.format
            ),
        ));
    }
    if Path::new(&journal.invocation.workspace) != request.invocation.workspace {
        return Err(refused(
            path,
            "it is the journal of another workspace".into(),
        ));
    }
    let mut resolved = rebuild(&journal).map_err(|e| refused(path, e))?;
    // Acted on only within what this run may write: every action of the sweep (quarantine,
    // originals moved back, links made again) lies in one of its roots, and a journal a
    // command planted could name any root (`/` for a root caller). The rest is reported.
    let (roots, not_swept): (Vec<PathBuf>, Vec<PathBuf>) = (resolved.watch.sweep.roots)
        .drain(..)
        .partition(|r| writable.iter().any(|w| policy::is_within(r, w)));
    resolved.watch.sweep.roots = roots;
    let held = workspace::sweep::Held {
        creation_guard: journal.held_creation_guard,
        pinned: journal.held_pinned,
    };
    let violations = workspace::sweep::after_run(
        &resolved,
        &workspace::RealHost,
        &journal.run_id,
        held,
        time(journal.started_ns),
        &[],
    );
    std::fs::remove_file(path).map_err(|e| refused(path, format!("cannot remove it: {e}")))?;
    Ok(Some(RecoveredSweep {
        run_id: journal.run_id,
        journal: path.to_path_buf(),
        violations,
        not_swept,
    }))
}

/// The dead run's spec and sweep plan: made again from its policy and invocation, with what
/// the plan found before that run (which the workspace no longer shows) put back.
fn rebuild(j: &Journal) -> Result<workspace::Resolved, String> {
    let inv = &j.invocation;
    let invocation = workspace::Request {
        argv: inv.argv.clone(),
        workspace: PathBuf::from(&inv.workspace),
        cwd: PathBuf::from(&inv.cwd),
        home: PathBuf::from(&inv.home),
        uid: inv.uid,
        gid: inv.gid,
        env: inv.env.clone(),
    };
    let mut r = workspace::Resolved::new(&j.policy, &invocation, &workspace::RealHost)
        .map_err(|e| format!("its run's spec cannot be made again: {e}"))?;
    let paths = |v: &[Bytes]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
    let sweep = &mut r.watch.sweep;
    sweep.roots = paths(&j.roots);
    sweep.existing = j
        .existing
        .iter()
        .map(|(p, k)| {
            kind_of(k)
                .map(|k| (PathBuf::from(p), k))
                .ok_or_else(|| format!("unknown kind {k:?}"))
        })
        .collect::<Result<_, _>>()?;
    sweep.links = (j.links.iter())
        .map(|(p, target, resolves)| {
            let link = workspace::ProtectedLink {
                target: PathBuf::from(target),
                resolves: resolves.as_ref().map(PathBuf::from),
            };
            (PathBuf::from(p), link)
        })
        .collect();
    sweep.git_dirs = paths(&j.git_dirs).into_iter().collect();
    sweep.git_indexes = j
        .git_indexes
        .iter()
        .map(|(p, hidden, hash_len)| workspace::GitIndex {
            path: PathBuf::from(p),
            hidden: hidden.iter().cloned().collect(),
            hash_len: *hash_len,
        })
        .collect();
    // No directory counts as unchanged since the plan: every one is listed again.
    // (The settling window the sweep judges "closed before the run" by is the planner's.)
    sweep.dirs = workspace::DirStamps::start();
    sweep.dirs.taken_at = j.taken_at_ns.map(time);
    // What the dead run's plan protected, guarded and masked, and the identities it saw: the
    // spec made again now would find what that run changed (a `.git` it renamed away is a
    // git dir under its new name, with the original's identity, which the restore would
    // then move back out of place).
    let spec = &mut r.spec;
    spec.protected = paths(&j.protected);
    spec.pins = paths(&j.pins);
    spec.guard = (j.guard.iter())
        .map(|(base, tail)| sandbox::GuardPattern {
            base: PathBuf::from(base),
            tail: tail.clone(),
        })
        .collect();
    spec.guard_sweep_only = j.guard_sweep_only.clone();
    spec.masks = (j.masks.iter())
        .map(|(p, is_dir, readable)| sandbox::Mask {
            path: PathBuf::from(p),
            kind: if *is_dir {
                sandbox::Kind::Dir
            } else {
                sandbox::Kind::File
            },
            readable: *readable,
        })
        .collect();
    spec.identities = (j.identities.iter())
        .map(|(p, dev, ino)| (PathBuf::from(p), (*dev, *ino)))
        .collect();
    r.watch.sweep.own = (j.own.iter())
        .map(|(p, dev, ino)| (PathBuf::from(p), (*dev, *ino)))
        .collect();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip() {
        for k in [
            workspace::Kind::Dir,
            workspace::Kind::File,
            workspace::Kind::Symlink,
            workspace::Kind::Other,
        ] {
            assert_eq!(kind_of(kind_name(k)), Some(k));
        }
        assert_eq!(kind_of("socket"), None);
    }

    #[test]
    fn only_the_variables_the_spec_needs_are_kept() {
        for kept in ["HOME", "PATH", "XDG_CONFIG_HOME", "XDG_STATE_HOME"] {
            assert!(kept_variable(std::ffi::OsStr::new(kept)), "{kept}");
        }
        for dropped in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "ANTHROPIC_API_KEY",
            "HOMEX",
        ] {
            assert!(!kept_variable(std::ffi::OsStr::new(dropped)), "{dropped}");
        }
    }

    #[test]
    fn journals_of_different_workspaces_have_different_prefixes() {
        assert_ne!(prefix(Path::new("/a/b")), prefix(Path::new("/a/c")));
        assert!(prefix(Path::new("/a")).ends_with('-'));
    }

    /// The policy goes into the journal and comes back the same (its format refuses
    /// unknown fields, so a field that did not round-trip would fail the recovery).
    #[test]
    fn the_policy_round_trips() {
        let policy = policy::resolve(None, &policy::Overrides::default()).expect("the default");
        let text = serde_json::to_string(&policy).expect("serialized");
        let back: policy::Policy = serde_json::from_str(&text).expect("read back");
        assert_eq!(back, policy);
    }
}
