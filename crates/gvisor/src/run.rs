//! Runs a [`Plan`]: writes the bundle (a private directory), checks the mount destinations
//! once more, starts `runsc run` (in a mount namespace of its own holding the idmapped trees
//! and the masks' covers, each only on the file planned) with the caller's sinks (and, for a
//! run attached to a terminal, relays the terminal of its own that runsc makes:
//! [`crate::console`]), enforces the timeout and the caller's cancel handle, and removes what
//! the run left.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sandbox::{Cancel, Kind, REVIEW_FIX};
use sys::mountns::Failed;

use crate::bundle::{EMPTY_FILE, UNREADABLE_FILE};
use crate::console::{ConsoleError, ConsoleSocket, CONSOLE_WAIT};
use crate::{Error, Plan};

/// Stands for the bundle directory in a plan's config until [`run`] knows it.
pub(crate) const BUNDLE_PLACEHOLDER: &str = "/@bundle@";

/// After the deadline or a cancel: how long the command has after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(1);
/// How often the wait looks at this process's signals.
const TICK: Duration = Duration::from_millis(50);

/// What a run takes from its caller: the command's stdin, stdout and stderr, and a handle
/// that ends the run early.
///
/// Each stream must be a pipe (the caller relays it): `runsc` started as root changes the
/// owner of its standard streams to `nobody`, which would give the caller's terminal, or
/// `/dev/null`, away. [`run`] refuses anything else.
pub struct Io {
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub cancel: Cancel,
    /// The network namespace held for the run, which runsc and every runsc asked about the
    /// run start in (see [`Plan::control_held`]); in mode proxy it holds the proxy's listener.
    pub network: Option<sys::netns::HeldNetwork>,
    /// Also end the run on SIGINT, SIGTERM or SIGHUP to this process (the `stockade` binary);
    /// otherwise only `cancel` ends it early. With a terminal, this process's SIGWINCH also
    /// resizes the run's.
    pub process_signals: bool,
    /// A terminal of the run's own: the command's stdin, stdout and stderr are a new
    /// pseudo-terminal runsc makes, relayed to and from the caller's (the pipes above then
    /// carry only what runsc itself says). `None`: the pipes are the command's.
    pub terminal: Option<OwnTerminal>,
}

/// What a run's own terminal starts from and how its output is relayed.
#[derive(Debug, Clone, Copy)]
pub struct OwnTerminal {
    /// The caller's terminal (see [`stream::terminal::caller_terminal`]).
    pub caller: stream::terminal::CallerTerminal,
    /// The output limit on what the terminal shows (`None`: everything passes).
    pub limit: Option<u64>,
    /// Pass what the terminal shows through the sanitizer.
    pub sanitize: bool,
}

fn is_pipe(fd: &OwnedFd) -> bool {
    rustix::fs::fstat(fd)
        .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Fifo)
        .unwrap_or(false)
}

/// How a gVisor run ended.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The exit code a shell would show (the command's, or 128+N for signal N).
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub duration: Duration,
    /// `limits.timeout` ended the run (exit code 124).
    pub timed_out: bool,
    /// The caller's cancel handle ended it.
    pub cancelled: bool,
    /// The first SIGINT, SIGTERM or SIGHUP this process received during the run (passed on
    /// to the command as it is).
    pub interrupted: Option<i32>,
    /// The run's own terminal: where its output was accounted (0 stdout, 1 stderr) and what
    /// was relayed.
    pub terminal: Option<(usize, stream::relay::Relayed)>,
    /// What the run changed at the top of an existing git dir that did not come back (a live
    /// config, a conflict with the host), see [`crate::gitstage`].
    pub blocked: Vec<sandbox::Violation>,
    /// What the run used ([`crate::usage`]).
    pub usage: sandbox::Usage,
    /// The memory and process limits it reached.
    pub limit_hits: Vec<sandbox::LimitHit>,
    /// The memory limit ended it (the OOM killer killed the sandbox).
    pub ended_by_memory: bool,
    /// A review run under a disk bound: the tmpfs its view's upper lived on, for the change
    /// set.
    pub review_upper: Option<std::sync::Arc<OwnedFd>>,
}

/// What planning needs of `path` on the host (its kind, owner and mode), not following a
/// last symbolic link.
pub fn host_owned(path: &Path) -> Option<crate::Owned> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some(crate::Owned {
        kind: kind_of(&m)?,
        uid: m.uid(),
        gid: m.gid(),
        mode: m.mode(),
    })
}

/// The kind of `path` on the host, not following a last symbolic link.
pub(crate) fn host_kind(path: &Path) -> Option<Kind> {
    kind_of(&std::fs::symlink_metadata(path).ok()?)
}

/// A directory or anything else; `None` for a symbolic link.
fn kind_of(m: &std::fs::Metadata) -> Option<Kind> {
    if m.file_type().is_dir() {
        Some(Kind::Dir)
    } else if m.file_type().is_symlink() {
        None
    } else {
        Some(Kind::File)
    }
}

fn io_err(what: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |cause| Error::Io {
        what: what.to_string(),
        cause,
    }
}

/// The bundle: `config.json` (it holds the command's environment: the directory is 0700) and
/// the files masks are bound from. Removed when dropped.
fn write_bundle(
    plan: &Plan,
    netns: Option<&str>,
    terminal: Option<libc::winsize>,
) -> Result<tempfile::TempDir, Error> {
    let parent = bundle_parent(plan)?;
    let dir = tempfile::Builder::new()
        .prefix("stockade-gvisor-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(&parent)
        .map_err(io_err("create the gVisor bundle directory"))?;
    let bundle = dir.path();
    let mut config = plan.config.clone();
    if let Some(size) = terminal {
        crate::bundle::with_terminal(&mut config, size.ws_row, size.ws_col);
    }
    let bundle_text = bundle
        .to_str()
        .ok_or_else(|| io_err("name the bundle")(std::io::Error::other("not UTF-8")))?;
    fill_in(&mut config, bundle_text, netns);
    let text = serde_json::to_string(&config)
        .map_err(|e| io_err("write the OCI config")(std::io::Error::other(e)))?;
    let create = |name: &str, mode: u32, bytes: &[u8]| -> Result<(), Error> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(bundle.join(name))
            .map_err(io_err("write the gVisor bundle"))?;
        f.write_all(bytes)
            .map_err(io_err("write the gVisor bundle"))?;
        // The mode is exact, whatever the umask.
        f.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io_err("write the gVisor bundle"))
    };
    create("config.json", 0o600, text.as_bytes())?;
    create(EMPTY_FILE, 0o444, b"")?;
    create(UNREADABLE_FILE, 0o000, b"")?;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(bundle.join("state"))
        .map_err(io_err("write the gVisor bundle"))?;
    Ok(dir)
}

/// Puts the run's own paths into `config` where the plan left placeholders, in those fields
/// only: the bundle directory at the start of a mount's source, and the network namespaces'
/// paths (the held one, `netns`, and the caller's own). A command's argument or variable that
/// holds a placeholder's text stays as it is.
fn fill_in(config: &mut serde_json::Value, bundle: &str, netns: Option<&str>) {
    use serde_json::Value;
    if let Some(mounts) = config["mounts"].as_array_mut() {
        for m in mounts {
            let filled = (m["source"].as_str())
                .and_then(|s| s.strip_prefix(BUNDLE_PLACEHOLDER))
                .map(|rest| format!("{bundle}{rest}"));
            if let Some(source) = filled {
                m["source"] = Value::String(source);
            }
        }
    }
    if let Some(namespaces) = config["linux"]["namespaces"].as_array_mut() {
        for ns in namespaces {
            let path = match ns["path"].as_str() {
                Some(crate::bundle::NETNS_PLACEHOLDER) => netns.map(str::to_owned),
                Some(crate::bundle::CALLER_NETNS_PLACEHOLDER) => {
                    Some(format!("/proc/{}/ns/net", std::process::id()))
                }
                _ => None,
            };
            if let Some(path) = path {
                ns["path"] = Value::String(path);
            }
        }
    }
}

/// Where the bundle goes: a temporary directory outside every writable root. The command
/// must not reach the bundle (the mask sources) or runsc's state in it (which `runsc kill`
/// and `runsc delete` act on, as root for a root caller); `TMPDIR` could name one inside the
/// workspace.
fn bundle_parent(plan: &Plan) -> Result<std::path::PathBuf, Error> {
    let candidates = [
        std::env::temp_dir(),
        std::path::PathBuf::from("/tmp"),
        std::path::PathBuf::from("/var/tmp"),
    ];
    candidates
        .into_iter()
        .filter_map(|c| std::fs::canonicalize(c).ok())
        .find(|c| !plan.writable_roots.iter().any(|w| c.starts_with(w)))
        .ok_or_else(|| Error::Io {
            what: "find a directory for the gVisor bundle outside the writable paths".into(),
            cause: std::io::Error::other("TMPDIR, /tmp and /var/tmp all lie in a writable path"),
        })
}

/// Test builds only: with `STOCKADE_TEST_GVISOR_PAUSE=FILE`, make `FILE` once the run is
/// planned and its bundle written, and wait (at most 30 s) until it is removed before the
/// mount destinations are checked and runsc starts, so that an attack test can change the
/// workspace between planning and the start at a known moment;
/// `STOCKADE_TEST_GVISOR_PAUSE_LATE` does the same after the destinations were checked,
/// right before runsc's mount namespace is prepared. Compiled out of release builds
/// (`debug_assertions`).
#[cfg(debug_assertions)]
fn test_pause(variable: &str) {
    let Some(flag) = std::env::var_os(variable) else {
        return;
    };
    let flag = std::path::PathBuf::from(flag);
    if std::fs::write(&flag, b"").is_err() {
        return;
    }
    let until = Instant::now() + Duration::from_secs(30);
    while flag.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Each mount destination is still what the plan saw: `runsc`'s gofer would create a missing
/// one on the host (as root for a root caller) and follow a symbolic link put in its place.
fn check_destinations(plan: &Plan) -> Result<(), Error> {
    for (path, kind) in &plan.destinations {
        match host_kind(path) {
            Some(k) if k == *kind => {}
            Some(_) => {
                return Err(Error::Changed {
                    path: path.clone(),
                    what: "its kind changed".into(),
                })
            }
            None => {
                return Err(Error::Changed {
                    path: path.clone(),
                    what: "it is gone or a symbolic link".into(),
                })
            }
        }
        // No symbolic link on the way either.
        if std::fs::canonicalize(path).ok().as_deref() != Some(path.as_path()) {
            return Err(Error::Changed {
                path: path.clone(),
                what: "a directory on its way is a symbolic link".into(),
            });
        }
    }
    Ok(())
}

/// How the run's runsc is reached: the program with its global arguments (its state
/// directory among them), and the network namespace it runs in (its control socket is there:
/// every runsc asked about the run must start there too). A clone serves the usage sampler's
/// thread.
#[derive(Clone)]
struct Control {
    program: std::path::PathBuf,
    args: Vec<String>,
    join: Option<sys::netns::Join>,
}

impl Control {
    fn new(plan: &Plan, state: &Path, join: Option<sys::netns::Join>) -> Control {
        let mut args = vec![
            format!("--root={}", state.display()),
            format!("--platform={}", plan.platform.name()),
            format!("--network={}", plan.network),
            // The config's seccomp filter (set-ID bits, see `bundle`).
            "--oci-seccomp".to_owned(),
        ];
        if plan.caller.rootless {
            args.push("--rootless".to_owned());
        }
        Control {
            program: plan.runsc.clone(),
            args,
            join,
        }
    }

    /// `runsc` with its global arguments, starting in the run's network namespace.
    fn command(&self) -> Command {
        let mut c = Command::new(&self.program);
        if let Some(join) = &self.join {
            join.on_exec(&mut c);
        }
        c.args(&self.args);
        c
    }
}

/// A root caller's detached trees for runsc's mount namespace, each with where it goes.
struct Trees {
    trees: Vec<(OwnedFd, std::ffi::CString)>,
    /// A review run under a disk bound: the tmpfs of its view's upper.
    bounded_upper: Option<OwnedFd>,
}

/// The detached, idmapped trees of [`Plan::idmapped`], each with where it goes; a review
/// run's workspace is its copy-on-write view ([`review_view`]).
fn idmapped_trees(plan: &Plan) -> Result<Trees, Error> {
    let id = crate::ROOT_CALLER_ID;
    let mut out = Vec::new();
    let mut bounded_upper = None;
    for i in &plan.idmapped {
        if let Some(view) = plan
            .review
            .as_ref()
            .filter(|r| r.workspace == i.path && !i.readonly)
        {
            let (tree, bounded) = review_view(view)?;
            bounded_upper = bounded;
            out.push((tree, path_cstring(&view.workspace)?));
            continue;
        }
        let fail = |cause: std::io::Error| {
            Error::Unavailable {
            cause: format!(
                "could not make an idmapped view of {} for the command's unprivileged id: {cause}",
                i.path.display()
            ),
            fix: "idmapped mounts need Linux 5.12 or later and a filesystem that supports them; run with --backend native".into(),
        }
        };
        // The owner's files appear as the command's id; and the other way round, so that
        // what runsc's file server (root) creates before giving it to the command's id has an
        // owner on disk at all (it ends up the owner's).
        // runsc's file server makes a file as root first (its fsuid is 0, and it has no
        // CAP_SETUID): root needs a mapping too, or every creation in a tree another user owns
        // fails with EOVERFLOW (found making a commit in a user's checkout as root). Root's
        // files there show as root's, which the command is not either.
        let map = |owner: u32| {
            if owner == id {
                format!("{owner} {id} 1\n")
            } else if owner == 0 {
                format!("{owner} {id} 1\n{id} {owner} 1\n")
            } else {
                format!("{owner} {id} 1\n{id} {owner} 1\n0 0 1\n")
            }
        };
        let userns = sys::parent::idmap_userns(&map(i.owner.0), &map(i.owner.1)).map_err(fail)?;
        // A tree that changed since it was planned (a symbolic link put in its place, or it is
        // gone) is refused as a changed path, never followed.
        let tree = sys::parent::idmapped_clone(&i.path, userns.fd(), i.readonly).map_err(|e| {
            match e.raw_os_error().and_then(changed_since_planned) {
                Some(what) => Error::Changed {
                    path: i.path.clone(),
                    what: what.into(),
                },
                None => fail(e),
            }
        })?;
        let target = std::ffi::CString::new(i.path.as_os_str().as_encoded_bytes())
            .map_err(|e| fail(std::io::Error::other(e)))?;
        out.push((tree, target));
    }
    Ok(Trees {
        trees: out,
        bounded_upper,
    })
}

fn path_cstring(path: &Path) -> Result<std::ffi::CString, Error> {
    std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| Error::Changed {
        path: path.to_path_buf(),
        what: "its name holds a NUL byte".into(),
    })
}

/// A root caller's review view: a privileged overlay (this process's) over an idmapped,
/// read-only view of the workspace in which its owner's files are the command's id's and
/// every other id is itself (so a file of any owner can be copied up), its writes landing in
/// the change directory's `upper/` (or, under a disk bound, a tmpfs's, whose mount comes back
/// too), as the native backend makes it for its supervisor. runsc's file server creates as
/// root and then gives the file to the command's id: the upper is not idmapped, so both
/// owners are the disk's.
fn review_view(view: &crate::ReviewView) -> Result<(OwnedFd, Option<OwnedFd>), Error> {
    let id = crate::ROOT_CALLER_ID;
    let fail = |cause: std::io::Error| Error::Unavailable {
        cause: format!(
            "could not make a copy-on-write view of {} (review mode): {cause}",
            view.workspace.display()
        ),
        fix: REVIEW_FIX.into(),
    };
    let bounded = match view.disk_bytes {
        Some(bytes) => {
            let size = std::ffi::CString::new(bytes.to_string()).map_err(std::io::Error::other);
            let size = size.map_err(fail)?;
            let options = [(c"size", size.as_c_str()), (c"mode", c"0700")];
            Some(
                sys::parent::bounded_upper(&options, view.upper_mode, Some((id, id)))
                    .map_err(fail)?,
            )
        }
        None => None,
    };
    let userns = sys::parent::idmap_userns(
        &sys::parent::review_lower_map(view.owner.0, id),
        &sys::parent::review_lower_map(view.owner.1, id),
    )
    .map_err(fail)?;
    let layers = bounded.as_ref().map(|(_, u, w)| (u.as_fd(), w.as_fd()));
    let tree = sys::parent::overlay_clone(&view.workspace, userns.fd(), &view.changes, layers)
        .map_err(|e| match e.raw_os_error().and_then(changed_since_planned) {
            Some(what) => view_changed(view, what),
            None => fail(e),
        })?;
    Ok((tree, bounded.map(|(mnt, _, _)| mnt)))
}

/// The detached covers of [`Plan::covers`], ready for runsc's own mount namespace.
fn prepared_covers(plan: &Plan) -> Result<sys::mountns::Covers, Error> {
    let mut covers = Vec::with_capacity(plan.covers.len());
    for c in &plan.covers {
        covers.push(sys::mountns::Cover {
            target: std::ffi::CString::new(c.path.as_os_str().as_encoded_bytes())
                .map_err(|e| io_err("cover a masked path")(std::io::Error::other(e)))?,
            dir: c.kind == Kind::Dir,
            readable: c.readable,
            expect: c.identity,
        });
    }
    if plan.caller.rootless {
        let view = match &plan.review {
            Some(r) => Some(sys::mountns::View {
                lower: path_cstring(&r.workspace)?,
                changes: path_cstring(&r.changes)?,
                disk: r.disk_bytes.map(|b| {
                    (
                        std::ffi::CString::new(b.to_string()).unwrap_or_default(),
                        r.upper_mode,
                    )
                }),
            }),
            None => None,
        };
        sys::mountns::Covers::unprivileged(&covers, view)
    } else {
        sys::mountns::Covers::prepare(&covers)
    }
    .map_err(io_err("prepare the masks' covers"))
}

/// Why cover `index` of `plan` failed at runsc's start (see [`sys::mountns::Covers::failed`]).
fn cover_failed(plan: &Plan, index: usize, errno: sys::raw::Errno) -> Error {
    let path = plan
        .covers
        .get(index)
        .map(|c| c.path.clone())
        .unwrap_or_default();
    let what = match errno.0 {
        libc::ESTALE => "it is another file than the one planned: moved since (a directory on its way exchanged or renamed by another program); a mask goes only on the file the run planned".to_string(),
        e => changed_since_planned(e).map_or_else(
            || format!("it could not be covered: {errno}"),
            str::to_owned,
        ),
    };
    Error::Changed { path, what }
}

/// A layer of the view changed since it was planned: the workspace or the run's change
/// directory (its `upper` or `work`), which of them the lookup does not say.
fn view_changed(view: &crate::ReviewView, what: &str) -> Error {
    Error::Changed {
        path: view.workspace.clone(),
        what: format!(
            "it, or the run's change directory {} (its upper or work), changed: {what}",
            view.changes.display()
        ),
    }
}

/// Why an unprivileged caller's review view could not be made by runsc's child.
fn view_failed(plan: &Plan, errno: sys::raw::Errno) -> Error {
    let path = plan
        .review
        .as_ref()
        .map(|r| r.workspace.clone())
        .unwrap_or_default();
    match (changed_since_planned(errno.0), &plan.review) {
        (Some(what), Some(view)) => view_changed(view, what),
        _ => Error::Unavailable {
            cause: format!(
                "could not make a copy-on-write view of {} (review mode): {errno}",
                path.display()
            ),
            fix: REVIEW_FIX.into(),
        },
    }
}

/// What an errno of opening a planned path says changed since it was planned: it is gone,
/// or a symbolic link is on its way (never followed).
fn changed_since_planned(errno: i32) -> Option<&'static str> {
    match errno {
        libc::ENOENT | libc::ENOTDIR => Some("it is gone (moved away since it was planned)"),
        libc::ELOOP => Some("a symbolic link is on its way"),
        _ => None,
    }
}

/// How to run where the run's cgroup cannot be made.
const GROUP_FIX: &str = "stockade as root makes the run's cgroup at /stockade/<run id> in the cgroup v1 memory and cpu hierarchies below /sys/fs/cgroup: mount them writable; or run with --memory 0 and no --cpu (no such limits), or with --backend native";

/// The run's cgroup directories (`cgroupsPath` `/stockade/<run id>` in every hierarchy), which
/// runsc leaves behind when its container was killed: removed once empty, best effort.
fn remove_cgroups(plan: &Plan) {
    if plan.caller.rootless {
        return;
    }
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for h in hierarchies.flatten() {
        let dir = h.path().join("stockade").join(&plan.caller.run_id);
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

/// `runsc ARGS...` about the container, to its end, best effort.
fn runsc_about_container(ctl: &Control, args: &[&str]) {
    let _ = ctl
        .command()
        .args(args)
        // Pipes, never /dev/null: runsc as root gives its standard streams to `nobody`.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .status();
}

/// Signals the container (`runsc kill`), best effort.
fn kill(plan: &Plan, ctl: &Control, signal: &str) {
    runsc_about_container(ctl, &["kill", "--all", &plan.caller.run_id, signal]);
}

pub(crate) fn run(plan: &Plan, io: Io) -> Result<Finished, Error> {
    check_io(plan, &io)?;
    let netns_path = io.network.as_ref().map(sys::netns::HeldNetwork::netns_path);
    let dir = write_bundle(
        plan,
        netns_path.as_deref(),
        io.terminal.map(|t| t.caller.size),
    )?;
    let ctl = Control::new(
        plan,
        &dir.path().join("state"),
        io.network.as_ref().map(sys::netns::HeldNetwork::join),
    );
    // The run's own terminal comes from runsc through a socket in the bundle directory.
    let console = io
        .terminal
        .map(|_| ConsoleSocket::listen(dir.path()))
        .transpose()
        .map_err(io_err("listen for the run's terminal"))?;
    #[cfg(debug_assertions)]
    test_pause("STOCKADE_TEST_GVISOR_PAUSE");
    // The copies of existing git dirs' top levels (`gitstage`): a root caller's command owns
    // them (it writes them through runsc's file server, which checks as the Sentry does).
    let copy_owner = (!plan.caller.rootless).then_some((plan.caller.uid, plan.caller.gid));
    let snapshots =
        crate::gitstage::stage_all(&plan.staged, dir.path(), copy_owner).map_err(|(path, e)| {
            Error::Changed {
                path,
                what: format!("its top level could not be staged for the run: {e}"),
            }
        })?;
    check_destinations(plan)?;
    // A root caller's cgroup, with the run's limits: made here, so its counters outlive
    // runsc (see `usage`). Removed when dropped; those of runs killed outright go first.
    // On a pure cgroup v2 machine runsc makes the group, from the config's resources, as
    // before (and removes it with its counters).
    let cgroups = Path::new(crate::usage::CGROUP_ROOT);
    let group_plan = plan.group.as_ref().filter(|_| crate::usage::is_v1(cgroups));
    if group_plan.is_some() {
        crate::usage::sweep_stale(cgroups, &crate::usage::process_alive);
    }
    let group = group_plan
        .map(|g| crate::usage::Group::create(g, cgroups, crate::usage::machine_has_swap()))
        .transpose()
        .map_err(|e| Error::Unavailable {
            cause: format!("could not make the run's cgroup for its memory and CPU limits: {e}"),
            fix: GROUP_FIX.into(),
        })?;
    let started = Instant::now();
    // Ctrl-C from here on is caught (and passed on to the command), not fatal, so the run is
    // swept and recorded (see `sys::parent::catch_signals`).
    if io.process_signals {
        let _ = sys::parent::catch_signals();
    }
    // The waiter thread reports runsc's exit (the cancel handle wakes this thread too). It is
    // made before runsc starts: a caller at its process or thread limit is refused here, with
    // the limit named, before anything runs.
    let (tx, rx) = mpsc::channel::<Option<std::io::Result<Reaped>>>();
    let (child_tx, child_rx) = mpsc::channel::<std::process::Child>();
    let exit_tx = tx.clone();
    let waiter = std::thread::Builder::new()
        .spawn(move || {
            // No child comes when the start fails (the sender is dropped).
            if let Ok(mut child) = child_rx.recv() {
                let _ = exit_tx.send(Some(reap(&mut child)));
            }
        })
        .map_err(io_err("start a thread waiting for runsc"))?;
    #[cfg(debug_assertions)]
    test_pause("STOCKADE_TEST_GVISOR_PAUSE_LATE");
    let (mut child, review_upper) = spawn_runsc(
        plan,
        &ctl,
        dir.path(),
        console.as_ref(),
        [io.stdin, io.stdout, io.stderr],
    )?;
    let review_upper = match review_upper {
        Ok(upper) => upper,
        Err(e) => {
            // Fail closed: without it the change set (on that tmpfs) could not be read.
            abandon(plan, &ctl, &mut child);
            drop(dir);
            remove_cgroups(plan);
            return Err(io_err("receive the review view's bounded upper")(e));
        }
    };
    let attached = match (console, io.terminal) {
        (Some(console), Some(own)) => {
            match attach_console(console, own, &mut child, &io.cancel, io.process_signals) {
                Ok(a) => a,
                Err(e) => {
                    // Fail closed: the command never runs without the terminal it was given.
                    abandon(plan, &ctl, &mut child);
                    drop(dir);
                    remove_cgroups(plan);
                    return Err(e);
                }
            }
        }
        _ => None,
    };
    // The run is looked at while it lasts (its processes and memory: `usage`).
    let sampler = {
        let ctl = ctl.clone();
        crate::usage::Sampler::start(move || ctl.command(), plan.caller.run_id.clone())
    };
    let cancel_tx = tx;
    io.cancel.on_cancel(Box::new(move || {
        let _ = cancel_tx.send(None);
    }));
    let pid = child.id();
    if let Err(mpsc::SendError(mut child)) = child_tx.send(child) {
        // The waiter is gone (it cannot be: it only waits for this): end the sandbox.
        abandon(plan, &ctl, &mut child);
        drop(dir);
        remove_cgroups(plan);
        return Err(Error::Io {
            what: "wait for runsc".into(),
            cause: std::io::Error::other("the waiting thread ended"),
        });
    }
    let Waited {
        status,
        reaped,
        timed_out,
        cancelled,
        interrupted,
        killed_at,
        killed_hard,
    } = wait(
        plan,
        &ctl,
        pid,
        &rx,
        &io.cancel,
        io.process_signals,
        started,
    )?;
    let _ = waiter.join();
    let sampled = sampler
        .map(crate::usage::Sampler::finish)
        .unwrap_or_default();
    // runsc is gone: what the terminal still holds is passed on, and the caller's terminal
    // gets its settings back.
    let terminal = attached.map(stream::terminal::Attached::finish);
    let duration = started.elapsed();
    // A run that ended abnormally may leave the container's state behind (one that ended on
    // its own removed it: another runsc start would cost ~15 ms for nothing).
    let ended_abnormally = killed_at.is_some() || status.is_none();
    if ended_abnormally {
        runsc_about_container(&ctl, &["delete", "--force", &plan.caller.run_id]);
    }
    // Nothing of the command is left: what it changed at the top of existing git dirs comes
    // back, judged (see `gitstage`).
    let blocked = crate::gitstage::reconcile_all(
        &plan.staged,
        &snapshots,
        dir.path(),
        &plan.writable_roots,
        !plan.caller.rootless,
    );
    drop(dir);
    // runsc has ended: its group's counters are final.
    let counted = group.as_ref().map(|g| crate::usage::counted(g.usage()));
    drop(group);
    remove_cgroups(plan);
    let usage = crate::usage::usage(counted, sampled, reaped);
    let limit_hits = crate::usage::hits(&plan.judged, &usage);
    let (exit_code, signal) = match status {
        Some(s) => exit_of(s),
        None => (125, None),
    };
    let (exit_code, signal) = match (timed_out, interrupted) {
        (true, _) => (124, None),
        // Ended by us after the signal: as if the signal had killed it.
        (false, Some(sig)) if killed_hard => (128 + sig, Some(sig)),
        _ => (exit_code, signal),
    };
    Ok(Finished {
        ended_by_memory: crate::usage::ended_by_memory(&usage, exit_code),
        exit_code,
        signal,
        interrupted,
        duration,
        timed_out,
        cancelled,
        terminal,
        blocked,
        usage,
        limit_hits,
        review_upper: review_upper.map(std::sync::Arc::new),
    })
}

/// Each of the command's streams must be a pipe (runsc as root would take over the owner of
/// anything else), and the run needs the held network (see [`Plan::control_held`]).
fn check_io(plan: &Plan, io: &Io) -> Result<(), Error> {
    for (name, fd) in [
        ("stdin", &io.stdin),
        ("stdout", &io.stdout),
        ("stderr", &io.stderr),
    ] {
        if !is_pipe(fd) {
            return Err(Error::Io {
                what: format!("hand the command its {name}"),
                cause: std::io::Error::other(
                    "not a pipe (runsc as root would take over its owner)",
                ),
            });
        }
    }
    if plan.control_held && io.network.is_none() {
        return Err(Error::Io {
            what: "give runsc a network namespace of the run's own".into(),
            cause: std::io::Error::other(
                "none held (runsc's control socket would be in the caller's network namespace)",
            ),
        });
    }
    Ok(())
}

/// `runsc run` of the bundle in `bundle`, with runsc's own mount namespace prepared (a root
/// caller's idmapped views, then the masks' covers, each only on the file planned), dying
/// with this process, and the command's streams.
fn spawn_runsc(
    plan: &Plan,
    ctl: &Control,
    bundle: &Path,
    console: Option<&ConsoleSocket>,
    streams: [OwnedFd; 3],
) -> Result<(std::process::Child, std::io::Result<Option<OwnedFd>>), Error> {
    let [stdin, stdout, stderr] = streams;
    // In the run's held network (`Control::command`), so its control socket is bound there.
    let mut command = ctl.command();
    // runsc (and with it the sandbox) ends should this process be killed.
    sys::mountns::die_with_parent_on_exec(&mut command);
    // runsc's own mount namespace (its file server works there): a root caller's idmapped
    // views, then the masks' covers, each only on the file planned (after the trees: a cover
    // inside one goes onto the view); kept open until runsc has started. An unprivileged
    // caller's covers are made by runsc's child in a user namespace of its own, after it
    // joined the held network (the join in `Control::command` runs first).
    let Trees {
        trees,
        bounded_upper,
    } = idmapped_trees(plan)?;
    let mut covers = prepared_covers(plan)?;
    if plan.caller.rootless {
        if !covers.is_empty() {
            sys::mountns::user_private_mounts_on_exec(&mut command, &covers);
        }
    } else if !trees.is_empty() || !covers.is_empty() {
        sys::mountns::private_mounts_on_exec(&mut command, &trees, &covers);
    }
    command
        .arg("run")
        .arg(format!("--bundle={}", bundle.display()));
    if let Some(c) = console {
        let mut arg = std::ffi::OsString::from("--console-socket=");
        arg.push(c.path());
        command.arg(arg);
    }
    let spawned = command
        .arg(&plan.caller.run_id)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .spawn();
    // A cover that found another file at its path: refused, naming it (runsc never started).
    let spawned = match spawned {
        Err(e) => match covers.failed() {
            Some((Failed::Cover(index), errno)) => return Err(cover_failed(plan, index, errno)),
            Some((Failed::View, errno)) => return Err(view_failed(plan, errno)),
            Some((Failed::SetUp, errno)) => return Err(Error::Unavailable {
                cause: format!("could not make a user and mount namespace of runsc's own to cover the masks in: {errno}"),
                fix: "run with --backend native".into(),
            }),
            None => Err(e),
        },
        Ok(child) => {
            // An unprivileged caller's view under a disk bound: the upper's tmpfs, which
            // runsc's child sent before it ran runsc.
            let sent = covers.bounded_upper();
            drop(covers);
            Ok((child, sent.map(|sent| bounded_upper.or(sent))))
        }
    };
    drop(trees);
    spawned.map_err(|e| match e.raw_os_error() {
        // The caller's process limit, not a missing runsc.
        Some(libc::EAGAIN) => Error::Io {
            what: format!("start {}", plan.runsc.display()),
            cause: e,
        },
        _ => Error::Unavailable {
            cause: format!("could not start {}: {e}", plan.runsc.display()),
            fix: crate::RUNSC_FIX.into(),
        },
    })
}

/// runsc's exit status, and the CPU time (µs) and largest resident size (bytes) of it and its
/// waited-for descendants (none when runsc had been reaped already).
type Reaped = (ExitStatus, Option<(u64, u64)>);

/// Waits for runsc (the waiter thread's one child) to end: its usage is this run's alone
/// (`sys::raw::wait_with_rusage`; `RUSAGE_CHILDREN` would sum every run of this process).
/// Nothing else reaps it (`attach_console` looks with `WNOWAIT`).
fn reap(child: &mut std::process::Child) -> std::io::Result<Reaped> {
    use std::os::unix::process::ExitStatusExt;
    match sys::raw::wait_with_rusage(child.id() as libc::pid_t) {
        Ok((status, usage)) => Ok((ExitStatus::from_raw(status), Some(usage))),
        // Reaped already through `child` (none of this module's waits do: a safety net), its
        // status kept there.
        Err(e) if e.0 == libc::ECHILD => child.wait().map(|status| (status, None)),
        Err(e) => Err(e.into()),
    }
}

/// How the wait for runsc ended.
struct Waited {
    /// runsc's exit status (none: its waiter ended without one).
    status: Option<ExitStatus>,
    /// runsc's usage with its waited-for descendants' (see [`reap`]).
    reaped: Option<(u64, u64)>,
    timed_out: bool,
    cancelled: bool,
    /// The ending signal this process received (passed on as it is).
    interrupted: Option<i32>,
    /// When the command was told to end, and whether the sandbox was then killed.
    killed_at: Option<Instant>,
    killed_hard: bool,
}

/// Waits for runsc (`pid`, its exit reported on `rx`) to end: passes signals and the
/// caller's cancel on, ends the run at its deadline (SIGTERM, then SIGKILL after GRACE).
fn wait(
    plan: &Plan,
    ctl: &Control,
    pid: u32,
    rx: &mpsc::Receiver<Option<std::io::Result<Reaped>>>,
    cancel: &Cancel,
    process_signals: bool,
    started: Instant,
) -> Result<Waited, Error> {
    // A limit past what the clock can hold is none.
    let deadline = plan.timeout.and_then(|t| started.checked_add(t));
    let mut timed_out = false;
    let mut cancelled = false;
    let mut interrupted: Option<i32> = None;
    // When the command was told to end (the caller's signal or SIGTERM, through runsc):
    // SIGKILL after GRACE.
    let mut killed_at: Option<Instant> = None;
    let mut killed_hard = false;
    let ended = loop {
        let now = Instant::now();
        // Ctrl-C, SIGTERM or SIGHUP to this process (caught since before the start): the
        // command is told, then the whole sandbox ends after the grace period, and the run
        // goes on to the sweep and the record.
        // Signals asked for through the run's handle: to the container's processes.
        for sig in cancel.take_signals() {
            kill(plan, ctl, &sig.to_string());
        }
        if killed_at.is_none() {
            if let Some(sig) = process_signals.then(sys::parent::interrupted).flatten() {
                // The caller's signal as it is (Ctrl-C is SIGINT, which a shell may trap), as
                // natively; the whole sandbox ends after GRACE.
                interrupted = Some(sig);
                kill(plan, ctl, &sig.to_string());
                killed_at = Some(now);
            }
        }
        let wake = match (deadline, killed_at) {
            (_, Some(k)) if !killed_hard => k + GRACE,
            (_, Some(_)) => now + Duration::from_secs(3600),
            (Some(d), None) => d.min(now + TICK),
            (None, None) => now + TICK,
        };
        let got = match rx.recv_timeout(wake.saturating_duration_since(now)) {
            Ok(v) => Some(v),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => break None,
        };
        match got {
            Some(Some(reaped)) => break Some(reaped.map_err(io_err("wait for runsc"))?),
            Some(None) => {
                // Cancelled by the caller.
                if killed_at.is_none() {
                    cancelled = true;
                    kill(plan, ctl, "TERM");
                    killed_at = Some(Instant::now());
                }
            }
            None => {
                let now = Instant::now();
                match killed_at {
                    Some(k) if !killed_hard && now >= k + GRACE => {
                        kill(plan, ctl, "KILL");
                        // runsc itself, should it not end with its container.
                        if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                            let _ =
                                rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                        }
                        killed_hard = true;
                    }
                    Some(_) => {}
                    None if deadline.is_some_and(|d| now >= d) => {
                        timed_out = true;
                        kill(plan, ctl, "TERM");
                        killed_at = Some(now);
                    }
                    None => {}
                }
            }
        }
    };
    Ok(Waited {
        status: ended.map(|(s, _)| s),
        reaped: ended.and_then(|(_, r)| r),
        timed_out,
        cancelled,
        interrupted,
        killed_at,
        killed_hard,
    })
}

/// The run's own terminal from runsc's console socket, given the caller's settings and
/// window size and relayed: `None` when runsc ended (or the run was cancelled) before sending
/// it (runsc's exit says why). Refused when runsc sends anything but one pseudo-terminal's
/// master side, or nothing within [`CONSOLE_WAIT`].
fn attach_console(
    console: ConsoleSocket,
    own: OwnTerminal,
    child: &mut std::process::Child,
    cancel: &Cancel,
    watch_size: bool,
) -> Result<Option<stream::terminal::Attached>, Error> {
    let deadline = Instant::now() + CONSOLE_WAIT;
    // Whether runsc ended, without reaping it (`WNOWAIT`): the waiter reaps it, with its usage.
    let pid = rustix::process::Pid::from_raw(child.id() as i32);
    let ended = || {
        let options = rustix::process::WaitIdOptions::EXITED
            | rustix::process::WaitIdOptions::NOHANG
            | rustix::process::WaitIdOptions::NOWAIT;
        pid.is_none_or(|p| {
            !matches!(
                rustix::process::waitid(rustix::process::WaitId::Pid(p), options),
                Ok(None)
            )
        })
    };
    let gone = || cancel.is_cancelled() || ended();
    let master = match console.receive(deadline, gone) {
        Ok(Some(m)) => m,
        Ok(None) => return Ok(None),
        Err(ConsoleError::Io(cause)) => {
            return Err(Error::Io {
                what: "receive the run's terminal from runsc".into(),
                cause,
            })
        }
        Err(e) => {
            return Err(Error::Unavailable {
                cause: format!("a terminal of the run's own: {e}"),
                fix: "run with --no-tty (no terminal of the run's own), or with --backend native"
                    .into(),
            })
        }
    };
    // runsc made the terminal with the system's defaults; the run's starts as the caller's
    // (before the command does: runsc sends it while it creates the sandbox).
    let attached = own.caller.apply_to(master.as_fd()).and_then(|()| {
        stream::terminal::attach(
            master,
            &own.caller,
            own.limit,
            own.sanitize,
            watch_size,
            cancel.clone(),
        )
    });
    attached
        .map(Some)
        .map_err(io_err("attach the command's terminal"))
}

/// Ends a run that cannot go on: runsc and its container are killed and its state removed.
fn abandon(plan: &Plan, ctl: &Control, child: &mut std::process::Child) {
    kill(plan, ctl, "KILL");
    let _ = child.kill();
    let _ = child.wait();
    runsc_about_container(ctl, &["delete", "--force", &plan.caller.run_id]);
}

/// `runsc run` exits with the command's code, and 128+N when the command was killed by
/// signal N, which a command's own `exit 130` looks like too: the signal is named only when
/// runsc itself was killed by one.
fn exit_of(status: ExitStatus) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => (c, None),
        (None, Some(s)) => (128 + s, Some(s)),
        (None, None) => (125, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Only a mount's source and a namespace's path are filled in: a command's argument and
    /// variable holding a placeholder's text keep it (they were rewritten when the config's
    /// text was searched).
    #[test]
    fn placeholders_are_filled_in_their_fields_only() {
        let caller_netns = crate::bundle::CALLER_NETNS_PLACEHOLDER;
        let netns = crate::bundle::NETNS_PLACEHOLDER;
        let mut config = json!({
            "process": {
                "args": ["echo", BUNDLE_PLACEHOLDER, netns, caller_netns],
                "env": [format!("X={netns}")],
            },
            "mounts": [
                { "destination": "/w/.env", "source": format!("{BUNDLE_PLACEHOLDER}/unreadable") },
                { "destination": BUNDLE_PLACEHOLDER, "source": "/w" },
            ],
            "linux": { "namespaces": [
                { "type": "network", "path": netns },
                { "type": "network", "path": caller_netns },
                { "type": "pid" },
            ] },
        });
        let before = config.clone();
        fill_in(&mut config, "/tmp/b", Some("/proc/7/ns/net"));
        assert_eq!(config["process"], before["process"]);
        assert_eq!(config["mounts"][0]["source"], "/tmp/b/unreadable");
        assert_eq!(config["mounts"][1], before["mounts"][1]);
        let ns = &config["linux"]["namespaces"];
        assert_eq!(ns[0]["path"], "/proc/7/ns/net");
        assert_eq!(
            ns[1]["path"],
            format!("/proc/{}/ns/net", std::process::id())
        );
        assert_eq!(ns[2], json!({ "type": "pid" }));
    }
}
