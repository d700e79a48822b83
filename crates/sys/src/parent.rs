//! Supervisor-side helpers: cloning the sandbox init, writing id maps, making idmapped mounts and
//! forwarding signals into the sandbox. These run in the supervisor, where allocation is fine.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::postfork::{self, ChildSpec, Report};
use crate::raw::{self, MountAttr};

/// A spawned sandbox init and the supervisor's ends of its pipes.
#[derive(Debug)]
pub struct Spawned {
    /// Host pid of the sandbox's init.
    pub pid: libc::pid_t,
    report: OwnedFd,
    /// Kept open for the whole run: the init treats a hang-up as the supervisor's death.
    sync: OwnedFd,
    released: bool,
}

/// Clone the sandbox init into new namespaces (`spec.namespaces`); the child runs
/// [`postfork::init`] with `spec` and never returns.
///
/// `spec.report_fd` and `spec.sync_fd` are filled in here; the caller leaves them as -1.
pub fn spawn(spec: &ChildSpec<'_>, slots: &mut [c_int]) -> io::Result<Spawned> {
    let (report_r, report_w) = raw::pipe()?;
    let (sync_r, sync_w) = match raw::pipe() {
        Ok(p) => p,
        Err(e) => {
            raw::close(report_r);
            raw::close(report_w);
            return Err(e.into());
        }
    };
    let mut spec = *spec;
    spec.report_fd = report_w;
    spec.sync_fd = sync_r;
    // The init starts with the forwarded signals blocked, so one sent before it has a handler
    // waits instead of being dropped (a namespace's init ignores signals it has no handler
    // for); it unblocks them once it forwards to the command. Our own mask comes back below.
    let mask = raw::block_signals(&postfork::FORWARDED_SIGNALS).ok();
    let cloned = raw::clone_fork(spec.namespaces);
    if let (false, Some(mask)) = (matches!(cloned, Ok(0)), &mask) {
        let _ = raw::set_signal_mask(mask);
    }
    match cloned {
        Ok(0) => {
            raw::close(report_r);
            raw::close(sync_w);
            postfork::init(&spec, slots)
        }
        Ok(pid) => {
            raw::close(report_w);
            raw::close(sync_r);
            // SAFETY: both descriptors were just created by pipe2 and are owned by nobody else.
            let (report, sync) =
                unsafe { (OwnedFd::from_raw_fd(report_r), OwnedFd::from_raw_fd(sync_w)) };
            Ok(Spawned {
                pid,
                report,
                sync,
                released: false,
            })
        }
        Err(e) => {
            for fd in [report_r, report_w, sync_r, sync_w] {
                raw::close(fd);
            }
            Err(e.into())
        }
    }
}

impl Spawned {
    /// The next record from the sandbox, or `None` at end of stream (every writer gone).
    /// Records of kind [`crate::mediate::REPORT_BLOCKED`] carry a path, returned alongside.
    pub fn next_report(&self) -> io::Result<Option<(Report, Vec<u8>)>> {
        let mut buf = [0u8; Report::SIZE];
        if !self.read_exact(&mut buf)? {
            return Ok(None);
        }
        let report = Report::from_bytes(&buf);
        let mut path = Vec::new();
        let trailing = match report.kind {
            crate::mediate::REPORT_BLOCKED => {
                (report.index as usize).min(crate::mediate::REPORT_PATH_MAX)
            }
            crate::mediate::REPORT_MEMORY => crate::mediate::REPORT_MEMORY_LEN,
            _ => 0,
        };
        if trailing > 0 {
            path.resize(trailing, 0);
            if !self.read_exact(&mut path)? {
                return Ok(None);
            }
        }
        Ok(Some((report, path)))
    }

    /// Fill `buf` from the report pipe; false at end of stream.
    fn read_exact(&self, buf: &mut [u8]) -> io::Result<bool> {
        let mut got = 0;
        while got < buf.len() {
            match raw::read(self.report.as_raw_fd(), &mut buf[got..]) {
                Ok(0) => return Ok(false),
                Ok(n) => got += n,
                Err(e) if e.0 == libc::EINTR => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    }

    /// Let the init continue (after the id maps are written).
    pub fn release(&mut self) -> io::Result<()> {
        if self.released {
            return Ok(());
        }
        self.released = true;
        raw::write_all(self.sync.as_raw_fd(), &[1]).map_err(Into::into)
    }

    /// Let the init start the command (it has been moved into the run's cgroup); see
    /// `ChildSpec::wait_group`.
    pub fn release_command(&mut self) -> io::Result<()> {
        raw::write_all(self.sync.as_raw_fd(), &[2]).map_err(Into::into)
    }

    /// Wait for the init to exit; returns its raw wait status.
    pub fn wait(&self) -> io::Result<c_int> {
        raw::waitpid(self.pid, 0)
            .map(|(_, s)| s)
            .map_err(Into::into)
    }

    /// Wait for the init to exit; returns its raw wait status, and the CPU time (µs) and
    /// largest resident size (bytes) of the init and its waited-for descendants, this run's
    /// alone ([`raw::wait_with_rusage`]).
    pub fn wait_with_usage(&self) -> io::Result<(c_int, (u64, u64))> {
        raw::wait_with_rusage(self.pid).map_err(Into::into)
    }

    /// Kill the init, and with it every process in the sandbox's pid namespace.
    pub fn kill(&self) {
        let _ = raw::kill(self.pid, libc::SIGKILL);
    }

    /// Send `sig` to the init, which forwards SIGTERM and friends to the command.
    pub fn signal(&self, sig: c_int) {
        let _ = raw::kill(self.pid, sig);
    }

    /// Wait until a report can be read (or the stream ended), at most `timeout`; `Ok(false)`
    /// when the time ran out first.
    pub fn report_ready(&self, timeout: std::time::Duration) -> io::Result<bool> {
        let mut fds = [libc::pollfd {
            fd: self.report.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let ms = timeout.as_millis().min(c_int::MAX as u128) as c_int;
        loop {
            match raw::poll(&mut fds, ms) {
                Ok(n) => return Ok(n > 0),
                // An ending signal wakes the caller early, to start its grace period.
                Err(e) if e.0 == libc::EINTR && interrupted().is_some() => return Ok(false),
                Err(e) if e.0 == libc::EINTR => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Write `/proc/PID/{setgroups,uid_map,gid_map}` for a child that unshared its user namespace.
pub fn write_id_maps(
    pid: libc::pid_t,
    uid_map: &str,
    gid_map: &str,
    deny_setgroups: bool,
) -> io::Result<()> {
    if deny_setgroups {
        fs::write(format!("/proc/{pid}/setgroups"), "deny")?;
    }
    fs::write(format!("/proc/{pid}/uid_map"), uid_map)?;
    fs::write(format!("/proc/{pid}/gid_map"), gid_map)?;
    Ok(())
}

/// A user namespace whose only mappings are `uid_map` and `gid_map`, held by a descriptor,
/// for use as the idmapping of an idmapped mount.
#[derive(Debug)]
pub struct IdmapNamespace {
    fd: OwnedFd,
    helper: libc::pid_t,
    // The helper's stack and pipe end: it shares our memory (`raw::clone_vm`), so they live
    // until it has been waited for.
    _stack: Vec<u8>,
    _go: Box<[c_int; 2]>,
}

impl IdmapNamespace {
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }
}

impl Drop for IdmapNamespace {
    /// Reap the helper that created the namespace. It was told to exit as soon as the
    /// namespace was opened, so by now this does not wait.
    fn drop(&mut self) {
        let _ = raw::waitpid(self.helper, 0);
    }
}

/// The idmap helper's life, already in its own user namespace: wait until the parent has
/// opened it (end of file on the pipe whose two ends `arg` points to).
extern "C" fn idmap_helper(arg: *mut libc::c_void) -> c_int {
    // SAFETY: `arg` is the boxed pair `idmap_userns` keeps alive until the helper has been
    // waited for; both descriptors are open in the helper's own table (a copy of ours).
    // rustix's raw calls never write `errno`, which the helper shares with us.
    let [go_r, go_w] = unsafe { *(arg as *const [c_int; 2]) };
    // SAFETY: the helper's copy of the write end is its own to close.
    unsafe { rustix::io::close(go_w) };
    // SAFETY: the read end stays open in the helper's table until it exits.
    let go = unsafe { BorrowedFd::borrow_raw(go_r) };
    let mut b = [0u8; 1];
    let _ = rustix::io::read(go, &mut b);
    0
}

/// Create an [`IdmapNamespace`]: a helper cloned into a new user namespace gets its maps
/// written, the namespace is opened, and the helper is let go (it is reaped on drop). The
/// helper shares our memory ([`raw::clone_vm`]): a fork would cost more than everything else
/// here.
pub fn idmap_userns(uid_map: &str, gid_map: &str) -> io::Result<IdmapNamespace> {
    let (go_r, go_w) = raw::pipe()?;
    let mut go = Box::new([go_r, go_w]);
    let mut stack = vec![0u8; 16 * 1024];
    let arg: *mut [c_int; 2] = &mut *go;
    // SAFETY: `idmap_helper` only reads `go` and makes two rustix syscalls; `go` and `stack`
    // move into the returned value (or are dropped after the wait below).
    let cloned =
        unsafe { raw::clone_vm(libc::CLONE_NEWUSER, idmap_helper, arg.cast(), &mut stack) };
    raw::close(go_r);
    let pid = match cloned {
        Ok(pid) => pid,
        Err(e) => {
            raw::close(go_w);
            return Err(e.into());
        }
    };
    let result = write_id_maps(pid, uid_map, gid_map, false).and_then(|_| {
        let f = fs::File::open(format!("/proc/{pid}/ns/user"))?;
        Ok(OwnedFd::from(f))
    });
    raw::close(go_w);
    match result {
        Ok(fd) => Ok(IdmapNamespace {
            fd,
            helper: pid,
            _stack: stack,
            _go: go,
        }),
        Err(e) => {
            let _ = raw::waitpid(pid, 0);
            Err(e)
        }
    }
}

/// A detached, recursive copy of the mount tree at `path` with the idmapping of `userns`,
/// optionally read-only. Needs CAP_SYS_ADMIN over the filesystem (a root caller).
pub fn idmapped_clone(
    path: &std::path::Path,
    userns: &OwnedFd,
    readonly: bool,
) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    let flags = raw::OPEN_TREE_CLONE | raw::OPEN_TREE_CLOEXEC | libc::AT_RECURSIVE as u32;
    // Through no symbolic link: the path is canonical when planned (see
    // `raw::open_tree_no_symlinks`).
    let fd = raw::open_tree_no_symlinks(&c, flags)?;
    // SAFETY: fd was just returned by open_tree and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut attr = MountAttr {
        attr_set: raw::MOUNT_ATTR_IDMAP | raw::MOUNT_ATTR_NOSUID | raw::MOUNT_ATTR_NODEV,
        userns_fd: userns.as_raw_fd() as u64,
        ..MountAttr::default()
    };
    if readonly {
        attr.attr_set |= raw::MOUNT_ATTR_RDONLY;
    }
    // Idmapping must be set on the tree's own mount; submounts would need their own (kernel
    // rule), so apply non-recursively first and only then the other flags recursively.
    raw::mount_setattr_fd(fd.as_raw_fd(), false, &attr)?;
    Ok(fd)
}

/// A review run's workspace for a root caller: a detached, privileged overlay whose lower
/// layer is an idmapped, read-only clone of `workspace` (the idmapping of `userns`, so that the
/// sandbox's id owns what the workspace's owner owns) and whose upper layer is
/// `changes/upper`. Privileged: copy-up runs with the supervisor's credentials, so files of
/// any owner can be modified (an overlay in the sandbox's user namespace fails with
/// `EOVERFLOW` on files whose owner it does not map).
/// `bounded`: the upper and work directories of a disk bound's tmpfs
/// ([`crate::overlay::bounded_upper`]) instead of `changes/upper` and `changes/work`.
pub fn overlay_clone(
    workspace: &std::path::Path,
    userns: &OwnedFd,
    changes: &std::path::Path,
    bounded: Option<(BorrowedFd<'_>, BorrowedFd<'_>)>,
) -> io::Result<OwnedFd> {
    let lower = idmapped_clone(workspace, userns, true)?;
    if let Some((upper, work)) = bounded {
        let layers = crate::overlay::Layers {
            lower: lower.as_raw_fd(),
            upper: upper.as_raw_fd(),
            work: work.as_raw_fd(),
        };
        let fd = crate::overlay::detached_overlay(layers, false)?;
        // SAFETY: just returned by fsmount and owned by nobody else.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let c = CString::new(changes.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    let dir = libc::O_PATH | libc::O_DIRECTORY;
    let run = raw::openat_no_symlinks(libc::AT_FDCWD, &c, dir)?;
    // SAFETY: just returned by openat2 and owned by nobody else.
    let run = unsafe { OwnedFd::from_raw_fd(run) };
    let open = |name: &std::ffi::CStr| -> io::Result<OwnedFd> {
        let fd = raw::openat_no_symlinks(run.as_raw_fd(), name, dir)?;
        // SAFETY: as above.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let (upper, work) = (open(c"upper")?, open(c"work")?);
    let layers = crate::overlay::Layers {
        lower: lower.as_raw_fd(),
        upper: upper.as_raw_fd(),
        work: work.as_raw_fd(),
    };
    let fd = crate::overlay::detached_overlay(layers, false)?;
    // SAFETY: just returned by fsmount and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The idmapping of a root caller's review view's lower layer, as `/proc/PID/uid_map` text
/// (one of ids or groups): `owner` appears as `sandbox_id` (the unprivileged id a root
/// caller's command runs as, owning its writable roots), and every other id as itself, so
/// the privileged overlay can copy up a file of any owner (an unmapped owner would fail with
/// `EOVERFLOW`). `sandbox_id` itself stays unmapped. Used by both backends that make the view.
pub fn review_lower_map(owner: u32, sandbox_id: u32) -> String {
    let h = sandbox_id;
    let mut extents: Vec<(u32, u32, u32)> = Vec::new();
    // Identity on [from, to) minus `h` and `owner`.
    let push_identity = |from: u32, to: u32, out: &mut Vec<(u32, u32, u32)>| {
        if to > from {
            out.push((from, from, to - from));
        }
    };
    if owner == h {
        push_identity(0, u32::MAX, &mut extents);
    } else {
        let (a, b) = (owner.min(h), owner.max(h));
        push_identity(0, a, &mut extents);
        push_identity(a + 1, b, &mut extents);
        push_identity(b + 1, u32::MAX, &mut extents);
        extents.push((owner, h, 1));
    }
    extents.sort();
    extents
        .iter()
        .map(|(inside, outside, n)| format!("{inside} {outside} {n}\n"))
        .collect()
}

/// Held by a run from the first descriptor it makes for its sandbox's first process until
/// it has closed its own copies of them: a process cloned meanwhile by another run of this
/// process (a sandbox init, which does not `exec`) would inherit them and keep this run's
/// pipes open. Several runs in one process take turns here; the rest of their lives overlap.
pub fn spawn_lock() -> std::sync::MutexGuard<'static, ()> {
    static SPAWN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SPAWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

static FORWARD_TO: AtomicI32 = AtomicI32::new(0);
/// The first SIGINT, SIGTERM or SIGHUP the supervisor received (0: none).
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: c_int) {
    let pid = FORWARD_TO.load(Ordering::Relaxed);
    if pid > 0 {
        let _ = raw::preserving_errno(|| raw::kill(pid, sig));
    }
    if matches!(sig, libc::SIGINT | libc::SIGTERM | libc::SIGHUP) {
        let _ = INTERRUPTED.compare_exchange(0, sig, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// The first ending signal (SIGINT, SIGTERM, SIGHUP) forwarded to the sandbox, if any: the
/// run then ends after a grace period even if the command ignores it.
pub fn interrupted() -> Option<c_int> {
    match INTERRUPTED.load(Ordering::Relaxed) {
        0 => None,
        sig => Some(sig),
    }
}

/// Catch SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 from now on: recorded (see
/// [`interrupted`]) and, once [`forward_signals_to`] names the sandbox, passed on. Called
/// before the sandbox is spawned, so a Ctrl-C during set-up is not lost.
///
/// A signal the caller ignores is left ignored (`nohup stockade run ...` survives the
/// hangup): not caught, so never forwarded and never a reason to end the run, and the command
/// inherits the ignore as it would from a plain shell.
pub fn catch_signals() -> io::Result<()> {
    for sig in postfork::FORWARDED_SIGNALS {
        raw::set_signal_handler_unless_ignored(sig, Some(forward))?;
    }
    Ok(())
}

/// Forward the signals [`catch_signals`] catches to `pid` (the sandbox init, which passes
/// them to the command), starting with an ending signal caught before this call.
pub fn forward_signals_to(pid: libc::pid_t) {
    FORWARD_TO.store(pid, Ordering::Relaxed);
    if let Some(sig) = interrupted() {
        let _ = raw::kill(pid, sig);
    }
}

/// Receive the proxy's listening socket sent by the init ([`crate::postfork::ProxySpec`]);
/// `None` when the init ended without sending one (it reported why).
pub fn recv_listener(sock: &OwnedFd) -> io::Result<Option<std::net::TcpListener>> {
    match raw::recv_fd(sock.as_raw_fd())? {
        // SAFETY: the kernel just installed this descriptor for us (SCM_RIGHTS); we own it
        // and nothing else refers to it.
        Some(fd) => Ok(Some(unsafe { std::net::TcpListener::from_raw_fd(fd) })),
        None => Ok(None),
    }
}

/// [`crate::overlay::bounded_upper`] for the supervisor (a root caller's review run under a
/// disk bound): the tmpfs's mount descriptor, then its `upper` and `work`, owned.
pub fn bounded_upper(
    options: &[(&std::ffi::CStr, &std::ffi::CStr)],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> io::Result<(OwnedFd, OwnedFd, OwnedFd)> {
    let (mnt, layers) = crate::overlay::bounded_upper(options, mode, owner)?;
    // SAFETY: just returned by bounded_upper and owned by nobody else.
    Ok(unsafe {
        (
            OwnedFd::from_raw_fd(mnt),
            OwnedFd::from_raw_fd(layers.upper),
            OwnedFd::from_raw_fd(layers.work),
        )
    })
}

/// Receive a descriptor the init sent (a review run's bounded upper); `None` when the init
/// ended without sending one (it reported why).
pub fn recv_fd(sock: &OwnedFd) -> io::Result<Option<OwnedFd>> {
    match raw::recv_fd(sock.as_raw_fd())? {
        // SAFETY: the kernel just installed this descriptor for us (SCM_RIGHTS); we own it
        // and nothing else refers to it.
        Some(fd) => Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) })),
        None => Ok(None),
    }
}

/// A socketpair for handing descriptors from the init to the supervisor: (supervisor's end,
/// init's end). Both close-on-exec.
pub fn fd_channel() -> io::Result<(OwnedFd, OwnedFd)> {
    let (a, b) = raw::socketpair()?;
    // SAFETY: socketpair just returned these two descriptors, owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(a), OwnedFd::from_raw_fd(b)) })
}

/// Where SIGWINCH, SIGCONT and SIGTSTP are announced (-1: nowhere): the write end of a
/// terminal relay's wake pipe.
static TERMINAL_WAKE: AtomicI32 = AtomicI32::new(-1);

/// The signals [`watch_terminal_signals`] announces, and the byte each writes.
const TERMINAL_SIGNALS: [(c_int, u8); 3] = [
    (libc::SIGWINCH, b'w'),
    (libc::SIGCONT, b'c'),
    (libc::SIGTSTP, b't'),
];

extern "C" fn terminal_signal(signal: c_int) {
    let fd = TERMINAL_WAKE.load(Ordering::Relaxed);
    let byte = TERMINAL_SIGNALS
        .iter()
        .find(|(s, _)| *s == signal)
        .map(|(_, b)| *b);
    if let (true, Some(byte)) = (fd >= 0, byte) {
        // A full pipe already holds a wake-up: dropping this one loses nothing.
        let _ = raw::preserving_errno(|| raw::write_all(fd, &[byte]));
    }
}

/// From now on these signals to this process each write one byte to `wake` (a non-blocking
/// pipe's write end, which the caller keeps open until [`unwatch_terminal_signals`]):
/// SIGWINCH `w` (the caller's terminal changed size: the run's own should follow), SIGCONT
/// `c` (this process went on after a stop, perhaps in the other of foreground and
/// background), SIGTSTP `t` (a request to stop: the relay gives the caller's terminal its
/// settings back, then stops this process itself).
/// A signal the caller ignores (a shell without job control ignores SIGTSTP for its jobs)
/// stays ignored.
/// On an error, whatever was set up is undone (no handler is left writing to `wake` after
/// its owner closed it).
pub fn watch_terminal_signals(wake: BorrowedFd<'_>) -> io::Result<()> {
    TERMINAL_WAKE.store(wake.as_raw_fd(), Ordering::Relaxed);
    for (k, (signal, _)) in TERMINAL_SIGNALS.iter().enumerate() {
        let caught = raw::signal_ignored(*signal).and_then(|ignored| {
            if ignored {
                Ok(false)
            } else {
                raw::set_signal_handler(*signal, Some(terminal_signal)).map(|()| true)
            }
        });
        match caught {
            Ok(true) => {
                TERMINAL_WATCHED.fetch_or(1 << k, Ordering::Relaxed);
            }
            Ok(false) => {}
            Err(e) => {
                unwatch_terminal_signals();
                return Err(e.into());
            }
        }
    }
    Ok(())
}

/// Which of [`TERMINAL_SIGNALS`] [`watch_terminal_signals`] caught (bit k for entry k).
static TERMINAL_WATCHED: AtomicI32 = AtomicI32::new(0);

/// Undo [`watch_terminal_signals`]: the signals it caught have their default actions again.
pub fn unwatch_terminal_signals() {
    let watched = TERMINAL_WATCHED.swap(0, Ordering::Relaxed);
    for (k, (signal, _)) in TERMINAL_SIGNALS.iter().enumerate() {
        if watched & (1 << k) != 0 {
            let _ = raw::set_signal_handler(*signal, None);
        }
    }
    TERMINAL_WAKE.store(-1, Ordering::Relaxed);
}

/// Receive the run's terminal (the master side of the pseudo-terminal the init opened inside
/// the sandbox, [`crate::postfork::TerminalSpec`]); `None` when the init ended without
/// sending it (it reported why).
pub fn recv_terminal(sock: &OwnedFd) -> io::Result<Option<OwnedFd>> {
    match raw::recv_fd(sock.as_raw_fd())? {
        // SAFETY: the kernel just installed this descriptor for us (SCM_RIGHTS); we own it
        // and nothing else refers to it.
        Some(fd) => Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) })),
        None => Ok(None),
    }
}

/// A new pseudo-terminal from `/dev/ptmx`, with `settings` and `size`: (master, slave), both
/// close-on-exec, neither this process's controlling terminal (see [`raw::open_pty`]). For a
/// program this process starts on the slave ([`session_on_terminal`]) and relays through the
/// master: a container engine's client given a terminal of the run's own.
pub fn new_pty(settings: &libc::termios, size: &libc::winsize) -> io::Result<(OwnedFd, OwnedFd)> {
    let (master, slave) = raw::open_pty(c"/dev/ptmx", settings, size)?;
    // SAFETY: open_pty returned two new descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) })
}

/// Start `cmd` as the leader of a session of its own whose controlling terminal is its
/// standard stream `fd` (a terminal [`new_pty`] made): the terminal's window changes reach it
/// (SIGWINCH), and it is that terminal's foreground.
pub fn session_on_terminal(cmd: &mut std::process::Command, fd: c_int) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and makes two system calls
    // with integer arguments (setsid, TIOCSCTTY on a descriptor the child holds).
    unsafe {
        cmd.pre_exec(move || {
            raw::setsid()?;
            raw::set_controlling_terminal(fd)?;
            Ok(())
        });
    }
}

/// Take ownership of descriptor `fd`, which the caller of this process handed over (a
/// `--control-fd N`): checked to be open, and made close-on-exec so no program this process
/// starts inherits it. Refused for 0, 1 and 2 (the process's own streams).
pub fn adopt_inherited_fd(fd: i32) -> std::io::Result<OwnedFd> {
    if fd < 3 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "descriptors 0, 1 and 2 are the process's own streams; pass another (e.g. 3)",
        ));
    }
    // SAFETY: F_GETFD on any integer only reads the descriptor table (EBADF when not open).
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above; setting FD_CLOEXEC changes only this descriptor's flag.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the descriptor is open (F_GETFD succeeded) and, by the contract of the flag
    // that named it, nothing else in this process owns it: from here this OwnedFd does.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
