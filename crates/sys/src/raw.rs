//! Raw syscall wrappers. Every function is allocation-free and returns `Result<_, Errno>`.
//!
//! Constants missing from the `libc` crate (new mount API, Landlock) are defined here from the
//! kernel UAPI headers (`linux/mount.h`, `linux/landlock.h`), x86_64 numbering where it matters.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_long, c_uint, c_ulong};

/// An OS error number, `Copy` so the child can report it over a pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    pub fn last() -> Errno {
        // SAFETY: __errno_location returns a valid thread-local pointer in every libc thread.
        Errno(unsafe { *libc::__errno_location() })
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl std::error::Error for Errno {}

impl From<Errno> for std::io::Error {
    fn from(e: Errno) -> Self {
        std::io::Error::from_raw_os_error(e.0)
    }
}

pub type Result<T> = std::result::Result<T, Errno>;

fn check(ret: c_long) -> Result<c_long> {
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret)
    }
}

fn check_int(ret: c_int) -> Result<c_int> {
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret)
    }
}

// ---- new mount API (linux/mount.h) ----
pub const OPEN_TREE_CLONE: c_uint = 1;
pub const OPEN_TREE_CLOEXEC: c_uint = libc::O_CLOEXEC as c_uint;
pub const MOVE_MOUNT_F_EMPTY_PATH: c_uint = 0x0000_0004;
pub const MOVE_MOUNT_T_EMPTY_PATH: c_uint = 0x0000_0040;
pub const FSOPEN_CLOEXEC: c_uint = 1;
pub const FSMOUNT_CLOEXEC: c_uint = 1;
pub const FSCONFIG_SET_STRING: c_uint = 1;
pub const FSCONFIG_CMD_CREATE: c_uint = 6;
pub const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;
pub const MOUNT_ATTR_NOSUID: u64 = 0x0000_0002;
pub const MOUNT_ATTR_NODEV: u64 = 0x0000_0004;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x0000_0008;
pub const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// `struct mount_attr` from linux/mount.h.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MountAttr {
    pub attr_set: u64,
    pub attr_clr: u64,
    pub propagation: u64,
    pub userns_fd: u64,
}

/// A detached copy of the entry `name` of the mount `sources` to cover a path with (a mask):
/// read-only, nosuid, nodev, noexec. Allocation-free (the init and runsc's child call it
/// between fork and exec).
pub fn cover_clone(sources: c_int, name: &CStr) -> Result<c_int> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        ..MountAttr::default()
    };
    let fd = open_tree(sources, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)?;
    match mount_setattr_fd(fd, false, &attr) {
        Ok(()) => Ok(fd),
        Err(e) => {
            close(fd);
            Err(e)
        }
    }
}

// ---- Landlock (linux/landlock.h) ----
pub const LANDLOCK_RULE_PATH_BENEATH: c_int = 1;
pub const LANDLOCK_CREATE_RULESET_VERSION: c_uint = 1;

#[repr(C, packed)]
struct LandlockPathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

// ---- capabilities ----
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `setns(2)`: join the namespace `fd` refers to (`nstype`: `CLONE_NEWUSER`, ...).
pub fn setns(fd: c_int, nstype: c_int) -> Result<()> {
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::setns(fd, nstype) }).map(drop)
}

/// Close every descriptor from 3 up except those in `keep` (`close_range(2)` over the gaps).
pub fn close_all_but(keep: &[c_int]) -> Result<()> {
    let mut sorted = [c_int::MAX; 8];
    for (slot, fd) in sorted.iter_mut().zip(keep) {
        *slot = *fd;
    }
    sorted.sort_unstable();
    let mut from: c_uint = 3;
    for fd in sorted {
        let upto = if fd == c_int::MAX {
            c_uint::MAX
        } else {
            fd as c_uint
        };
        if upto > from {
            // SAFETY: integer arguments only.
            check(unsafe { libc::syscall(libc::SYS_close_range, from, upto - 1, 0) })?;
        }
        if fd == c_int::MAX {
            break;
        }
        from = from.max(fd as c_uint + 1);
    }
    Ok(())
}

/// `unshare(2)`.
pub fn unshare(flags: c_int) -> Result<()> {
    // SAFETY: unshare takes flags only and touches no memory of ours.
    check_int(unsafe { libc::unshare(flags) }).map(drop)
}

/// Fork-like raw `clone(2)` (no new stack: the child continues on a copy of ours) with extra
/// `flags`, e.g. namespace flags. Returns 0 in the child and the child's pid in the parent.
///
/// Raw rather than glibc's `fork`: glibc's takes its internal locks (malloc arenas, stdio)
/// around the fork, which can deadlock in a child of a multi-threaded parent; and with
/// `CLONE_NEWPID` the child itself becomes pid 1 of the new namespace, which `fork` + `unshare`
/// cannot do. The child must only use this module's allocation-free calls: glibc's cached
/// thread id in the child is stale, so `raise`/`abort`/pthread calls are off limits there.
pub(crate) fn clone_fork(flags: c_int) -> Result<libc::pid_t> {
    // SAFETY: with a null stack, clone behaves like fork (the child runs on a copy-on-write
    // copy of this stack); the remaining pointer arguments are unused without the matching
    // CLONE_*TID / CLONE_SETTLS flags.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    check(ret).map(|pid| pid as libc::pid_t)
}

/// A helper process that shares this one's memory: glibc's `clone(2)` wrapper with
/// `CLONE_VM | flags | SIGCHLD`, running `entry(arg)` on `stack` and exiting with what it
/// returns. Returns the helper's pid.
///
/// Used for the small helpers the supervisor needs beside the sandbox (the cgroup reaper, the
/// process that holds an idmapping user namespace), and by the init to start the command
/// (with `CLONE_VFORK`, until its `execve`): a fork copies and later tears down the page
/// tables, about 130 µs each way here; a process on shared memory costs a tenth. The init
/// itself is never started this way: the sandbox must not share the supervisor's memory.
///
/// # Safety
///
/// `entry` runs on the same memory and the same thread-local storage as the caller (no
/// `CLONE_SETTLS`), concurrently unless `flags` has `CLONE_VFORK`: it must not allocate,
/// must only read `arg`'s data, and, run concurrently, must make only syscalls that never
/// write `errno` (rustix's raw ones; libc calls that cannot fail). `stack` and whatever
/// `arg` points to must stay alive and unchanged until the process has been waited for (or,
/// with `CLONE_VFORK`, until this call returns).
pub(crate) unsafe fn clone_vm(
    flags: c_int,
    entry: extern "C" fn(*mut libc::c_void) -> c_int,
    arg: *mut libc::c_void,
    stack: &mut [u8],
) -> Result<libc::pid_t> {
    // The stack grows down from its end, 16-byte aligned as the x86_64 ABI wants.
    let top = stack.as_mut_ptr_range().end as usize & !15;
    // SAFETY: per this function's contract; `top` is inside (at the end of) `stack`.
    let pid = unsafe {
        libc::clone(
            entry,
            top as *mut libc::c_void,
            libc::CLONE_VM | flags | libc::SIGCHLD,
            arg,
        )
    };
    check_int(pid)
}

/// `_exit(2)`: ends the process without running destructors or atexit handlers.
pub fn exit(code: c_int) -> ! {
    // SAFETY: _exit never returns and has no preconditions.
    unsafe { libc::_exit(code) }
}

/// `read(2)` into a buffer.
pub fn read(fd: c_int, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: the pointer and length describe a live, writable buffer.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    check(n as c_long).map(|n| n as usize)
}

/// `write(2)` of a whole buffer, retrying on EINTR and short writes.
pub fn write_all(fd: c_int, buf: &[u8]) -> Result<()> {
    // SAFETY: the pointer and length describe a live buffer.
    write_fully(buf, |b, _| unsafe {
        libc::write(fd, b.as_ptr().cast(), b.len())
    })
}

/// Calls `write(rest, written so far)` until all of `buf` is written, retrying on EINTR and
/// short writes.
fn write_fully(mut buf: &[u8], mut write: impl FnMut(&[u8], u64) -> isize) -> Result<()> {
    let mut done = 0u64;
    while !buf.is_empty() {
        let n = write(buf, done);
        if n < 0 {
            let e = Errno::last();
            if e.0 == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        buf = &buf[n as usize..];
        done += n as u64;
    }
    Ok(())
}

/// `close(2)`, ignoring errors (the descriptor is gone either way).
pub fn close(fd: c_int) {
    // SAFETY: closing a descriptor we own; a stale number yields EBADF and no harm.
    unsafe { libc::close(fd) };
}

/// `pipe2(O_CLOEXEC)`: returns (read end, write end).
pub fn pipe() -> Result<(c_int, c_int)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds is a valid array of two ints.
    check_int(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((fds[0], fds[1]))
}

/// Grow a pipe's buffer (`F_SETPIPE_SZ`); the kernel rounds up to a power of two of pages and
/// refuses sizes above `/proc/sys/fs/pipe-max-size` for unprivileged callers. Returns the size.
pub fn set_pipe_size(fd: c_int, size: usize) -> Result<usize> {
    // SAFETY: F_SETPIPE_SZ takes an integer argument and no memory.
    check_int(unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, size as c_int) }).map(|n| n as usize)
}

/// `waitpid(2)`, retrying on EINTR. Returns (pid, raw status).
pub fn waitpid(pid: libc::pid_t, flags: c_int) -> Result<(libc::pid_t, c_int)> {
    loop {
        let mut status: c_int = 0;
        // SAFETY: status is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, flags) };
        if r < 0 {
            let e = Errno::last();
            if e.0 == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        return Ok((r, status));
    }
}

/// Whether every write end of the pipe `fd` is closed (its writer is gone), without blocking.
pub fn pipe_writers_gone(fd: c_int) -> Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: pfd is a valid single-element pollfd array.
    check_int(unsafe { libc::poll(&mut pfd, 1, 0) })?;
    Ok(pfd.revents & libc::POLLHUP != 0)
}

/// `kill(2)`.
pub fn kill(pid: libc::pid_t, sig: c_int) -> Result<()> {
    // SAFETY: kill has no memory arguments.
    check_int(unsafe { libc::kill(pid, sig) }).map(drop)
}

/// `prctl(2)` with integer arguments.
pub fn prctl(option: c_int, arg2: c_ulong, arg3: c_ulong) -> Result<c_int> {
    // SAFETY: the prctl options used by stockade take integer arguments only.
    check_int(unsafe { libc::prctl(option, arg2, arg3, 0 as c_ulong, 0 as c_ulong) })
}

/// `getppid(2)`.
pub fn getppid() -> libc::pid_t {
    // SAFETY: no arguments.
    unsafe { libc::getppid() }
}

/// `setsid(2)`.
pub fn setsid() -> Result<()> {
    // SAFETY: no arguments.
    check_int(unsafe { libc::setsid() }).map(drop)
}

/// Leave the caller's process group and give up the caller's controlling terminal, without
/// starting a session (a new session also makes a new scheduler autogroup where
/// `sched_autogroup_enabled` is set: 0.5-1 ms measured here, against about 15 µs for this).
///
/// For a process that is not a session leader (a fresh child never is), `TIOCNOTTY` on its
/// controlling terminal only clears that terminal from the process (`no_tty`: the session
/// and its other members keep it; `disassociate_ctty` returns at once for a non-leader).
/// From then on `/dev/tty` fails with `ENXIO`, and the process can never take a terminal
/// again: only a session leader acquires one (`TIOCSCTTY` and an open without `O_NOCTTY`
/// both require it). Its own process group keeps the terminal's signals (sent to the
/// foreground group) and a kill of the caller's group from reaching it; a hangup signals only
/// session leaders. Checked, not assumed: `/dev/tty` must then fail with `ENXIO`; anything
/// else (no `/dev/tty`, a refused open or ioctl, a terminal still reachable) falls back to
/// `setsid`, which gives the same guarantees at the autogroup's price. Async-signal-safe
/// (no allocation): for the init after the clone.
pub fn leave_caller_terminal() -> Result<()> {
    let tty = c"/dev/tty";
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    let open = || {
        // SAFETY: `tty` is a valid NUL-terminated string.
        check_int(unsafe { libc::open(tty.as_ptr(), flags) })
    };
    let released = match open() {
        // No controlling terminal: nothing to give up.
        Err(Errno(libc::ENXIO)) => true,
        Err(_) => false,
        Ok(fd) => {
            // SAFETY: TIOCNOTTY takes no argument; `fd` is open.
            let dropped = check_int(unsafe { libc::ioctl(fd, libc::TIOCNOTTY) }).is_ok();
            close(fd);
            dropped
                && match open() {
                    Err(Errno(libc::ENXIO)) => true,
                    Err(_) => false,
                    Ok(again) => {
                        close(again);
                        false
                    }
                }
        }
    };
    // The fallback comes before `setpgid`: a process group leader cannot start a session.
    if !released {
        return setsid();
    }
    // SAFETY: integer arguments only.
    match check_int(unsafe { libc::setpgid(0, 0) }) {
        Ok(_) => Ok(()),
        Err(_) => setsid(),
    }
}

/// `chdir(2)`.
pub fn chdir(path: &CStr) -> Result<()> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::chdir(path.as_ptr()) }).map(drop)
}

/// `sethostname(2)`.
pub fn sethostname(name: &[u8]) -> Result<()> {
    // SAFETY: pointer and length describe a live buffer.
    check_int(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }).map(drop)
}

/// Raw `setresuid(2)`: the syscall affects only the calling thread, which is what a
/// single-threaded child wants (glibc's wrapper would broadcast to other threads).
pub fn setresuid(uid: u32) -> Result<()> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_setresuid, uid, uid, uid) }).map(drop)
}

/// Raw `setresgid(2)`.
pub fn setresgid(gid: u32) -> Result<()> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_setresgid, gid, gid, gid) }).map(drop)
}

/// Raw `setgroups(0, NULL)`: drops every supplementary group.
pub fn clear_groups() -> Result<()> {
    // SAFETY: a zero-length list with a null pointer is valid.
    check(unsafe { libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) })
        .map(drop)
}

/// `mount(2)`.
pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: c_ulong,
    data: Option<&CStr>,
) -> Result<()> {
    let p = |s: Option<&CStr>| s.map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: every pointer is null or a valid NUL-terminated string.
    check_int(unsafe { libc::mount(p(source), target.as_ptr(), p(fstype), flags, p(data).cast()) })
        .map(drop)
}

/// `open_tree(2)`: with `OPEN_TREE_CLONE` returns a detached copy of the mount at `path`.
pub fn open_tree(dirfd: c_int, path: &CStr, flags: c_uint) -> Result<c_int> {
    // SAFETY: path is a valid NUL-terminated string.
    check(unsafe { libc::syscall(libc::SYS_open_tree, dirfd, path.as_ptr(), flags) })
        .map(|fd| fd as c_int)
}

/// `move_mount(2)` of a detached mount fd onto `target`.
pub fn move_mount_fd(fd: c_int, target: &CStr) -> Result<()> {
    let empty = c"";
    // SAFETY: both paths are valid NUL-terminated strings.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd,
            empty.as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// `move_mount(2)` of a detached mount fd onto the place an `O_PATH` descriptor refers to.
pub fn move_mount_fd_to_fd(fd: c_int, target_fd: c_int) -> Result<()> {
    let empty = c"";
    // SAFETY: both paths are valid NUL-terminated (empty) strings; the fds are integers.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd,
            empty.as_ptr(),
            target_fd,
            empty.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// `open_tree(2)` of the place `path` names, looked up through no symbolic link
/// (`openat2(RESOLVE_NO_SYMLINKS)`, `ELOOP` at the first): the mount steps' paths are
/// canonical when planned, so a link on the way was put there afterwards (a concurrent run
/// that can write a parent).
pub fn open_tree_no_symlinks(path: &CStr, flags: c_uint) -> Result<c_int> {
    let at = openat_no_symlinks(libc::AT_FDCWD, path, libc::O_PATH)?;
    let res = open_tree(at, c"", flags | libc::AT_EMPTY_PATH as c_uint);
    close(at);
    res
}

/// [`move_mount_fd`] onto `target` looked up through no symbolic link (see
/// [`open_tree_no_symlinks`]).
pub fn move_mount_fd_no_symlinks(fd: c_int, target: &CStr) -> Result<()> {
    let at = openat_no_symlinks(libc::AT_FDCWD, target, libc::O_PATH)?;
    let res = move_mount_fd_to_fd(fd, at);
    close(at);
    res
}

/// `mount_setattr(2)`.
pub fn mount_setattr(dirfd: c_int, path: &CStr, flags: c_uint, attr: &MountAttr) -> Result<()> {
    // SAFETY: path is valid; attr points to a live struct whose size we pass.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Set attributes on a detached mount fd (`AT_EMPTY_PATH`).
pub fn mount_setattr_fd(fd: c_int, recursive: bool, attr: &MountAttr) -> Result<()> {
    let mut flags = libc::AT_EMPTY_PATH as c_uint;
    if recursive {
        flags |= libc::AT_RECURSIVE as c_uint;
    }
    mount_setattr(fd, c"", flags, attr)
}

/// A new, detached tmpfs (`fsopen` + `fsconfig` + `fsmount`); returns the mount fd.
pub fn detached_tmpfs(mode: &CStr) -> Result<c_int> {
    // SAFETY: the fs name is a valid string; flags are integers.
    let fsfd = check(unsafe { libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC) })?
        as c_int;
    // SAFETY: key and value are valid strings; aux is unused for SET_STRING.
    let set = check(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fsfd,
            FSCONFIG_SET_STRING,
            c"mode".as_ptr(),
            mode.as_ptr(),
            0,
        )
    });
    let created = set.and_then(|_| {
        // SAFETY: CMD_CREATE takes no pointers.
        check(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fsfd,
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<c_char>(),
                std::ptr::null::<c_char>(),
                0,
            )
        })
    });
    let mnt = created.and_then(|_| {
        // SAFETY: integer arguments only.
        check(unsafe { libc::syscall(libc::SYS_fsmount, fsfd, FSMOUNT_CLOEXEC, 0) })
    });
    close(fsfd);
    mnt.map(|fd| fd as c_int)
}

/// `openat(2)`.
pub fn openat(dirfd: c_int, path: &CStr, flags: c_int, mode: libc::mode_t) -> Result<c_int> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::openat(dirfd, path.as_ptr(), flags | libc::O_CLOEXEC, mode) })
}

/// `mkdirat(2)`; an existing directory is not an error.
pub fn mkdirat(dirfd: c_int, path: &CStr, mode: libc::mode_t) -> Result<()> {
    // SAFETY: path is a valid NUL-terminated string.
    match check_int(unsafe { libc::mkdirat(dirfd, path.as_ptr(), mode) }) {
        Err(Errno(libc::EEXIST)) => Ok(()),
        r => r.map(drop),
    }
}

/// `fchmodat(2)`, to set modes exactly (mkdir/open are filtered by the umask).
pub fn chmod(path: &CStr, mode: libc::mode_t) -> Result<()> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::fchmodat(libc::AT_FDCWD, path.as_ptr(), mode, 0) }).map(drop)
}

/// `symlinkat(2)`.
pub fn symlink(target: &CStr, linkpath: &CStr) -> Result<()> {
    // SAFETY: both are valid NUL-terminated strings.
    check_int(unsafe { libc::symlinkat(target.as_ptr(), libc::AT_FDCWD, linkpath.as_ptr()) })
        .map(drop)
}

/// `umask(2)`.
pub fn umask(mask: libc::mode_t) -> libc::mode_t {
    // SAFETY: integer argument only.
    unsafe { libc::umask(mask) }
}

/// `sched_yield(2)`.
pub fn sched_yield() {
    // SAFETY: no arguments.
    unsafe { libc::sched_yield() };
}

/// Bring the loopback interface up (a new network namespace starts with it down).
pub fn loopback_up() -> Result<()> {
    // SAFETY: integer arguments only.
    let fd = check_int(unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
    })?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as c_char;
    }
    // SAFETY: req is a valid ifreq for SIOCGIFFLAGS.
    let got = check_int(unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) });
    let set = got.and_then(|_| {
        // SAFETY: reading the union member SIOCGIFFLAGS just filled.
        unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as i16 };
        // SAFETY: req is a valid ifreq for SIOCSIFFLAGS.
        check_int(unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) })
    });
    close(fd);
    set.map(drop)
}

/// Empty the capability bounding set: no `execve` can grant a capability again. Done once by
/// the init before it starts the command, which inherits the empty set.
pub fn drop_bounding_set() -> Result<()> {
    // CAP_LAST_CAP on this kernel family is 40; dropping unknown numbers yields EINVAL, which
    // ends the loop.
    for cap in 0..64 {
        match prctl(libc::PR_CAPBSET_DROP, cap, 0) {
            Ok(_) => {}
            Err(Errno(libc::EINVAL)) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Drop every capability but `keep` (effective and permitted only; the ambient and
/// inheritable sets are emptied). The bounding set is [`drop_bounding_set`]'s.
pub fn drop_capabilities_except(keep: Option<u32>) -> Result<()> {
    prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as c_ulong,
        0,
    )?;
    let header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    if let Some(cap) = keep {
        let (word, bit) = ((cap / 32) as usize, 1u32 << (cap % 32));
        if let Some(d) = data.get_mut(word) {
            d.effective = bit;
            d.permitted = bit;
        }
    }
    // SAFETY: header and the two-element data array match the v3 capset ABI.
    check(unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) })
        .map(drop)
}

/// Set `no_new_privs`: exec can no longer grant privileges (setuid bits, file caps).
pub fn set_no_new_privs() -> Result<()> {
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0).map(drop)
}

/// The Landlock ABI version, or the error (ENOSYS / EOPNOTSUPP when unavailable).
pub fn landlock_abi() -> Result<i32> {
    // SAFETY: a null attr with size 0 and the VERSION flag is the documented query form.
    check(unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    })
    .map(|v| v as i32)
}

/// `landlock_add_rule(2)` for a path-beneath rule.
pub fn landlock_add_path_rule(ruleset_fd: c_int, parent_fd: c_int, access: u64) -> Result<()> {
    let attr = LandlockPathBeneathAttr {
        allowed_access: access,
        parent_fd,
    };
    // SAFETY: attr is a live packed struct of the layout the kernel expects.
    check(unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset_fd,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const LandlockPathBeneathAttr,
            0u32,
        )
    })
    .map(drop)
}

/// `landlock_restrict_self(2)`.
pub fn landlock_restrict_self(ruleset_fd: c_int) -> Result<()> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset_fd, 0u32) }).map(drop)
}

/// Install a seccomp BPF program (requires `no_new_privs`).
pub fn seccomp_install(filter: &[libc::sock_filter]) -> Result<()> {
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prog points to a live program; the kernel copies it before returning.
    check(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0u32,
            &prog as *const libc::sock_fprog,
        )
    })
    .map(drop)
}

/// Close every descriptor from 3 up except those in `keep` and `also` (any order; negative
/// entries ignored): `close_range(2)` over the gaps. Allocates nothing (after a fork).
pub fn close_all_except(keep: &[c_int], also: &[c_int]) -> Result<()> {
    close_all_except_each(|| keep.iter().chain(also).copied())
}

/// Close every descriptor from 3 up except those `kept()` yields (any order, repeats and
/// negative entries ignored): `close_range(2)` over the gaps. `kept` is called once per gap,
/// so the keep-list can be gathered from several places without building it anywhere.
/// Allocates nothing (after a fork).
pub fn close_all_except_each<I: Iterator<Item = c_int>>(kept: impl Fn() -> I) -> Result<()> {
    let mut from: c_uint = 3;
    loop {
        // The smallest kept descriptor at or above `from`.
        let next = kept()
            .filter(|f| *f >= 0 && (*f as c_uint) >= from)
            .map(|f| f as c_uint)
            .min();
        let upto = next.unwrap_or(c_uint::MAX);
        if upto > from {
            let last = if next.is_some() { upto - 1 } else { upto };
            // SAFETY: integer arguments only.
            check(unsafe { libc::syscall(libc::SYS_close_range, from, last, 0) })?;
        }
        match next {
            Some(n) if n < c_uint::MAX => from = n + 1,
            _ => return Ok(()),
        }
    }
}

/// Mark every descriptor from `first` up close-on-exec.
pub fn cloexec_from(first: c_uint) -> Result<()> {
    // SAFETY: integer arguments only.
    check(unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    })
    .map(drop)
}

/// `execve(2)`; returns only on failure.
pub fn execve(path: &CStr, argv: &[*const c_char], envp: &[*const c_char]) -> Errno {
    // SAFETY: argv and envp are NULL-terminated arrays of valid strings (built by the caller).
    unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    Errno::last()
}

/// Install `handler` for `sig` (with SA_RESTART), or reset it to the default when `None`.
pub fn set_signal_handler(sig: c_int, handler: Option<extern "C" fn(c_int)>) -> Result<()> {
    // SAFETY: sigaction is plain old data; zeroed is a valid "no flags, empty mask" value.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = match handler {
        Some(h) => h as usize,
        None => libc::SIG_DFL,
    };
    act.sa_flags = libc::SA_RESTART;
    // SAFETY: act is a valid sigaction; the old action is not requested.
    check_int(unsafe { libc::sigaction(sig, &act, std::ptr::null_mut()) }).map(drop)
}

/// Whether `sig` is ignored now (`SIG_IGN`).
pub fn signal_ignored(sig: c_int) -> Result<bool> {
    // SAFETY: plain old data; zeroed is a valid value, and the kernel overwrites it.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `old`, a valid sigaction.
    check_int(unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) })?;
    Ok(old.sa_sigaction == libc::SIG_IGN)
}

/// [`set_signal_handler`], unless `sig` is ignored now (`SIG_IGN`): an ignored signal stays
/// ignored. A caller that ignores a signal
/// (`nohup` ignores SIGHUP) passes that on across `execve`, and a wrapper that is transparent
/// keeps it: it neither catches the signal nor un-ignores it for its child.
pub fn set_signal_handler_unless_ignored(
    sig: c_int,
    handler: Option<extern "C" fn(c_int)>,
) -> Result<()> {
    if signal_ignored(sig)? {
        return Ok(());
    }
    set_signal_handler(sig, handler)
}

/// Block `sigs` in the calling thread; returns the mask before, for [`set_signal_mask`].
pub fn block_signals(sigs: &[c_int]) -> Result<libc::sigset_t> {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid sigset_t.
    unsafe { libc::sigemptyset(&mut set) };
    for &sig in sigs {
        // SAFETY: set is initialised; an invalid signal number only makes this fail.
        unsafe { libc::sigaddset(&mut set, sig) };
    }
    // SAFETY: both sets are valid; the old mask is written to `old`.
    check_int(unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old) })?;
    Ok(old)
}

/// Set the calling thread's signal mask to `mask` (as returned by [`block_signals`]).
pub fn set_signal_mask(mask: &libc::sigset_t) -> Result<()> {
    // SAFETY: mask is a valid sigset_t; the old mask is not requested.
    check_int(unsafe { libc::sigprocmask(libc::SIG_SETMASK, mask, std::ptr::null_mut()) }).map(drop)
}

/// Unblock every signal in the calling thread.
pub fn unblock_all_signals() -> Result<()> {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid sigset_t.
    unsafe { libc::sigemptyset(&mut set) };
    // SAFETY: set is initialised; old mask not requested.
    check_int(unsafe { libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()) }).map(drop)
}

/// `geteuid(2)` / `getegid(2)`.
pub fn euid() -> u32 {
    // SAFETY: no arguments.
    unsafe { libc::geteuid() }
}

pub fn egid() -> u32 {
    // SAFETY: no arguments.
    unsafe { libc::getegid() }
}

/// A minimal ruleset (handles READ_FILE, no rules) for the doctor's enforcement probe.
pub fn landlock_ruleset_for_probe() -> Result<c_int> {
    #[repr(C)]
    struct Attr {
        handled_access_fs: u64,
    }
    let attr = Attr {
        handled_access_fs: 1 << 2,
    };
    // SAFETY: attr is a live struct whose size we pass (the kernel accepts a prefix of the
    // full ruleset attr).
    check(unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const Attr,
            std::mem::size_of::<Attr>(),
            0u32,
        )
    })
    .map(|fd| fd as c_int)
}

// ---- seccomp user notification and the calls the init makes on the command's behalf ----

/// Install a seccomp program that returns `SECCOMP_RET_USER_NOTIF` for some calls; returns the
/// listener descriptor (close-on-exec). Signals other than fatal ones cannot interrupt a call
/// the listener has received (`WAIT_KILLABLE_RECV`, Linux 5.19), so a call the init performed
/// is never restarted; on older kernels the flag is left out.
pub fn seccomp_install_listener(filter: &[libc::sock_filter]) -> Result<c_int> {
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    let install = |flags: c_ulong| {
        // SAFETY: prog points to a live program; the kernel copies it before returning.
        check(unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &prog as *const libc::sock_fprog,
            )
        })
    };
    let listener = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    match install(listener | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV) {
        Err(Errno(libc::EINVAL)) => install(listener),
        r => r,
    }
    .map(|fd| fd as c_int)
}

/// `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC)`.
pub fn socketpair() -> Result<(c_int, c_int)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds is a valid array of two ints.
    check_int(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    Ok((fds[0], fds[1]))
}

/// Room for one descriptor in a control message (`CMSG_SPACE(sizeof(int))` on x86_64).
#[repr(C, align(8))]
struct FdCmsg([u8; 24]);

/// Send `fd` over the Unix socket `sock` (`SCM_RIGHTS`), with one data byte.
pub fn send_fd(sock: c_int, fd: c_int) -> Result<()> {
    let mut byte = [1u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = FdCmsg([0; 24]);
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE only computes a size.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(4) } as usize;
    // SAFETY: msg_control points at a buffer of msg_controllen bytes, so CMSG_FIRSTHDR is
    // non-null and CMSG_DATA points inside it with room for one int.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(4) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<c_int>(), fd);
    }
    // SAFETY: msg and everything it points to are live for the call.
    check(unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) } as c_long).map(drop)
}

/// Receive one descriptor sent by [`send_fd`]; `None` when the peer closed without sending.
pub fn recv_fd(sock: c_int) -> Result<Option<c_int>> {
    let mut byte = [0u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = FdCmsg([0; 24]);
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len();
    let n = loop {
        // SAFETY: msg and its buffers are live for the call.
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 && Errno::last().0 == libc::EINTR {
            continue;
        }
        break check(n as c_long)?;
    };
    if n == 0 {
        return Ok(None);
    }
    // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_FIRSTHDR checks the length.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Ok(None);
        }
        Ok(Some(std::ptr::read_unaligned(
            libc::CMSG_DATA(cmsg).cast::<c_int>(),
        )))
    }
}

/// `pidfd_open(2)`.
pub fn pidfd_open(pid: libc::pid_t) -> Result<c_int> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) }).map(|fd| fd as c_int)
}

/// `pidfd_open(2)` with `PIDFD_THREAD` (Linux 6.9): a pidfd for the one task `tid`, bound to
/// that task and not to its number. `EINVAL` on older kernels.
pub fn pidfd_open_thread(tid: libc::pid_t) -> Result<c_int> {
    const PIDFD_THREAD: u32 = libc::O_EXCL as u32;
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) }).map(|fd| fd as c_int)
}

/// `pidfd_getfd(2)`: a copy of descriptor `fd` of the task behind `pidfd` (the same open file,
/// close-on-exec in this process). Needs the rights `ptrace` attach would need.
pub fn pidfd_getfd(pidfd: c_int, fd: c_int) -> Result<c_int> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0u32) }).map(|fd| fd as c_int)
}

/// `fchdir(2)`.
pub fn fchdir(fd: c_int) -> Result<()> {
    // SAFETY: integer argument only.
    check_int(unsafe { libc::fchdir(fd) }).map(drop)
}

/// The `getcwd` system call into `buf`: the length of the path, without its NUL.
pub fn getcwd(buf: &mut [u8]) -> Result<usize> {
    // SAFETY: the pointer and length describe a live, writable buffer.
    let n = check(unsafe { libc::syscall(libc::SYS_getcwd, buf.as_mut_ptr(), buf.len()) })?;
    // The kernel's length counts the NUL.
    Ok((n as usize).saturating_sub(1))
}

/// `poll(2)` (EINTR is returned to the caller).
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: c_int) -> Result<c_int> {
    // SAFETY: the slice is a valid pollfd array of the given length.
    check_int(unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) })
}

/// `SECCOMP_IOCTL_NOTIF_RECV`.
pub fn notif_recv(listener: c_int) -> Result<libc::seccomp_notif> {
    // SAFETY: seccomp_notif is plain data and must be zeroed before the call.
    let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: req is a live, correctly sized struct for this ioctl.
    check_int(unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) })?;
    Ok(req)
}

/// `SECCOMP_IOCTL_NOTIF_SEND`: the call returns `val`, or fails with `errno` when non-zero.
pub fn notif_send(listener: c_int, id: u64, val: i64, errno: c_int) -> Result<()> {
    let resp = libc::seccomp_notif_resp {
        id,
        val,
        error: -errno,
        flags: 0,
    };
    // SAFETY: resp is a live, correctly sized struct for this ioctl.
    check_int(unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) }).map(drop)
}

/// `SECCOMP_IOCTL_NOTIF_SEND` with `SECCOMP_USER_NOTIF_FLAG_CONTINUE`: the kernel performs
/// the call as made. Only for calls whose arguments are values the listener merely observes
/// (never for decisions about memory the caller can change meanwhile).
pub fn notif_continue(listener: c_int, id: u64) -> Result<()> {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: resp is a live, correctly sized struct for this ioctl.
    check_int(unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) }).map(drop)
}

/// `SECCOMP_IOCTL_NOTIF_ADDFD` with `SECCOMP_ADDFD_FLAG_SEND`: installs a copy of `fd` in the
/// target and makes the call return its number, atomically.
pub fn notif_addfd_send(listener: c_int, id: u64, fd: c_int, cloexec: bool) -> Result<c_int> {
    let addfd = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: fd as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: addfd is a live, correctly sized struct for this ioctl.
    check_int(unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &addfd) })
}

/// `SECCOMP_IOCTL_NOTIF_SET_FLAGS` with `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6): the
/// listener is woken on the notifying task's CPU and the task on the listener's when the
/// answer comes, as one synchronous hand-off (the task sleeps while its call is served anyway),
/// which saves a cross-CPU wake-up each way. Only a scheduling hint: `EINVAL` on older kernels.
pub fn notif_sync_wake_up(listener: c_int) -> Result<()> {
    // The flag is passed by value (the kernel reads the ioctl argument as the flags).
    let flags: c_ulong = 1; // SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
                            // SAFETY: integer arguments only.
    check_int(unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags) })
        .map(drop)
}

/// `SECCOMP_IOCTL_NOTIF_ID_VALID`: whether the notifying call is still waiting.
pub fn notif_id_valid(listener: c_int, id: u64) -> bool {
    // SAFETY: id is a live u64 for this ioctl.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0 }
}

/// `pread(2)`.
pub fn pread(fd: c_int, buf: &mut [u8], offset: u64) -> Result<usize> {
    // SAFETY: the pointer and length describe a live, writable buffer.
    let n = unsafe {
        libc::pread(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            offset as libc::off_t,
        )
    };
    check(n as c_long).map(|n| n as usize)
}

/// `readlinkat(2)` into `buf`; returns the length (not NUL-terminated).
pub fn readlinkat(dirfd: c_int, path: &CStr, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: path is NUL-terminated; buf is live and writable for its length.
    let n = unsafe { libc::readlinkat(dirfd, path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    check(n as c_long).map(|n| n as usize)
}

/// `fstatat(2)`.
pub fn fstatat(dirfd: c_int, path: &CStr, flags: c_int) -> Result<libc::stat> {
    // SAFETY: stat is plain data; the kernel fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated; st is a valid out-pointer.
    check_int(unsafe { libc::fstatat(dirfd, path.as_ptr(), &mut st, flags) })?;
    Ok(st)
}

/// `pwrite(2)` until all of `buf` is written at `offset`.
pub fn pwrite_all(fd: c_int, buf: &[u8], offset: u64) -> Result<()> {
    write_fully(buf, |b, done| {
        let at = (offset + done) as libc::off_t;
        // SAFETY: the pointer and length describe a live buffer.
        unsafe { libc::pwrite(fd, b.as_ptr().cast(), b.len(), at) }
    })
}

/// `ftruncate(2)`.
pub fn ftruncate(fd: c_int, len: u64) -> Result<()> {
    // SAFETY: no pointers; the kernel checks the descriptor.
    check_int(unsafe { libc::ftruncate(fd, len as libc::off_t) }).map(drop)
}

/// `fstat(2)`.
pub fn fstat(fd: c_int) -> Result<libc::stat> {
    // SAFETY: stat is plain data; the kernel fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    check_int(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(st)
}

/// `fstatfs(2)`: the filesystem's magic number.
pub fn fs_magic(fd: c_int) -> Result<i64> {
    // SAFETY: statfs is plain data; the kernel fills it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    check_int(unsafe { libc::fstatfs(fd, &mut st) })?;
    Ok(st.f_type)
}

/// `mkdirat(2)`, reporting every error (unlike [`mkdirat`]).
pub fn mkdirat_strict(dirfd: c_int, path: &CStr, mode: libc::mode_t) -> Result<()> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::mkdirat(dirfd, path.as_ptr(), mode) }).map(drop)
}

/// `openat(2)` with exactly these flags (the caller decides about close-on-exec).
pub fn openat_exact(dirfd: c_int, path: &CStr, flags: c_int, mode: libc::mode_t) -> Result<c_int> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::openat(dirfd, path.as_ptr(), flags, mode) })
}

/// `mknodat(2)`.
pub fn mknodat(dirfd: c_int, path: &CStr, mode: libc::mode_t, dev: libc::dev_t) -> Result<()> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::mknodat(dirfd, path.as_ptr(), mode, dev) }).map(drop)
}

/// `symlinkat(2)`.
pub fn symlinkat(target: &CStr, dirfd: c_int, path: &CStr) -> Result<()> {
    // SAFETY: both are valid NUL-terminated strings.
    check_int(unsafe { libc::symlinkat(target.as_ptr(), dirfd, path.as_ptr()) }).map(drop)
}

/// `linkat(2)`.
pub fn linkat(olddir: c_int, old: &CStr, newdir: c_int, new: &CStr, flags: c_int) -> Result<()> {
    // SAFETY: both are valid NUL-terminated strings.
    check_int(unsafe { libc::linkat(olddir, old.as_ptr(), newdir, new.as_ptr(), flags) }).map(drop)
}

/// `renameat2(2)`.
pub fn renameat2(
    olddir: c_int,
    old: &CStr,
    newdir: c_int,
    new: &CStr,
    flags: c_uint,
) -> Result<()> {
    // SAFETY: both are valid NUL-terminated strings.
    check_int(unsafe { libc::renameat2(olddir, old.as_ptr(), newdir, new.as_ptr(), flags) })
        .map(drop)
}

/// `unlinkat(2)`.
pub fn unlinkat(dirfd: c_int, path: &CStr, flags: c_int) -> Result<()> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::unlinkat(dirfd, path.as_ptr(), flags) }).map(drop)
}

/// `fchmodat(2)` (follows a final symlink).
pub fn fchmodat(dirfd: c_int, path: &CStr, mode: libc::mode_t) -> Result<()> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::fchmodat(dirfd, path.as_ptr(), mode, 0) }).map(drop)
}

/// `fchmodat2(fd, "", mode, AT_EMPTY_PATH)` (Linux 6.6): the mode of the object `fd` holds
/// (an `O_PATH` descriptor too), with no path looked up and no link followed. `ENOSYS` on
/// older kernels.
pub fn fchmod_handle(fd: c_int, mode: libc::mode_t) -> Result<()> {
    const SYS_FCHMODAT2: libc::c_long = 452;
    // SAFETY: integer arguments and a valid NUL-terminated (empty) string.
    check_int(unsafe {
        libc::syscall(
            SYS_FCHMODAT2,
            fd,
            c"".as_ptr(),
            mode as c_ulong,
            libc::AT_EMPTY_PATH,
        )
    } as c_int)
    .map(drop)
}

/// `dup2(2)`: make `new` a copy of `old`, without close-on-exec. When `old == new` (where
/// `dup2` would change nothing) the close-on-exec flag is cleared instead, so the result is the
/// same either way: `new` survives `execve`.
pub fn dup2(old: c_int, new: c_int) -> Result<()> {
    if old == new {
        // SAFETY: integer arguments only.
        return check_int(unsafe { libc::fcntl(new, libc::F_SETFD, 0) }).map(drop);
    }
    loop {
        // SAFETY: integer arguments only; `new` is replaced atomically.
        match check_int(unsafe { libc::dup2(old, new) }) {
            Err(e) if e.0 == libc::EINTR => continue,
            r => return r.map(drop),
        }
    }
}

/// `fcntl(F_DUPFD_CLOEXEC)`: a second descriptor for the same open file, closed on exec.
pub fn dup_cloexec(fd: c_int) -> Result<c_int> {
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) })
}

/// `fcntl(F_SETFL)`.
pub fn set_status_flags(fd: c_int, flags: c_int) -> Result<()> {
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) }).map(drop)
}

/// `process_vm_readv(2)` of one range of another process's memory into `buf`.
pub fn process_vm_read(pid: libc::pid_t, buf: &mut [u8], addr: u64) -> Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes our live, writable buffer; `remote` is only an address in the
    // other process, which the kernel checks (EFAULT) and never dereferences in ours.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    check(n as c_long).map(|n| n as usize)
}

/// A listening TCP socket on `addr:port` (IPv4), close-on-exec, `SO_REUSEADDR`.
pub fn tcp_listen(addr: [u8; 4], port: u16, backlog: c_int) -> Result<c_int> {
    // SAFETY: integer arguments only.
    let fd = check_int(unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)
    })?;
    let one: c_int = 1;
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(addr),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: `one` and `sin` are live values of the sizes passed.
    let r = check_int(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const c_int).cast(),
            std::mem::size_of::<c_int>() as libc::socklen_t,
        )
    })
    .and_then(|_| {
        // SAFETY: as above.
        check_int(unsafe {
            libc::bind(
                fd,
                (&sin as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        })
    })
    // SAFETY: integer arguments only.
    .and_then(|_| check_int(unsafe { libc::listen(fd, backlog) }));
    match r {
        Ok(_) => Ok(fd),
        Err(e) => {
            close(fd);
            Err(e)
        }
    }
}

/// `openat2(2)` with `RESOLVE_NO_SYMLINKS`: fails with `ELOOP` at the first symlink of any kind.
/// Where `openat2` is missing (`ENOSYS`: a kernel before 5.6, a seccomp filter of a sandbox
/// around ours or of an older container runtime; `EPERM`: such a filter's default answer) the
/// same lookup is made component by component ([`openat_no_symlinks_by_component`]).
pub fn openat_no_symlinks(dirfd: c_int, path: &CStr, flags: c_int) -> Result<c_int> {
    match openat2(dirfd, path, flags, RESOLVE_NO_SYMLINKS) {
        Err(Errno(libc::ENOSYS | libc::EPERM)) if !creates(flags) => {
            openat_no_symlinks_by_component(dirfd, path, flags)
        }
        other => other,
    }
}

/// `openat2(2)`'s `RESOLVE_NO_MAGICLINKS`: no `/proc/PID/fd/N`-style link on the way.
pub const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
/// `openat2(2)`'s `RESOLVE_NO_SYMLINKS`: no symbolic link of any kind on the way (`ELOOP`).
pub const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// `openat2(2)` with the `resolve` flags given (`RESOLVE_*`), close-on-exec.
pub fn openat2(dirfd: c_int, path: &CStr, flags: c_int, resolve: u64) -> Result<c_int> {
    openat2_mode(dirfd, path, flags, 0, resolve)
}

/// [`openat2`] with a creation mode (for `O_CREAT`/`O_TMPFILE`; it must be 0 otherwise, or
/// the kernel answers `EINVAL`). Unlike `openat`, unknown flag bits fail with `EINVAL` too.
pub fn openat2_mode(
    dirfd: c_int,
    path: &CStr,
    flags: c_int,
    mode: u32,
    resolve: u64,
) -> Result<c_int> {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    const SYS_OPENAT2: c_long = 437;
    let how = OpenHow {
        // Through u32: a flag word is never sign-extended into bits the kernel refuses.
        flags: (flags | libc::O_CLOEXEC) as u32 as u64,
        mode: mode as u64,
        resolve,
    };
    // SAFETY: path is NUL-terminated and `how` is a live open_how of the size passed; the
    // kernel only reads both.
    check(unsafe {
        libc::syscall(
            SYS_OPENAT2,
            dirfd,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    })
    .map(|fd| fd as c_int)
}

/// `splice(2)` between a descriptor and a pipe, moving pages instead of copying them.
pub fn splice(fd_in: c_int, fd_out: c_int, len: usize) -> Result<usize> {
    // SAFETY: null offsets (both ends are a socket or a pipe); integer arguments otherwise.
    let n = unsafe {
        libc::splice(
            fd_in,
            std::ptr::null_mut(),
            fd_out,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE,
        )
    };
    check(n as c_long).map(|n| n as usize)
}

/// CPU time (user + system, microseconds) and the largest resident size (bytes) in `ru`.
fn cpu_and_peak(ru: &libc::rusage) -> (u64, u64) {
    let usec = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (
        usec(ru.ru_utime) + usec(ru.ru_stime),
        ru.ru_maxrss as u64 * 1024,
    )
}

/// `wait4(2)` for the child `pid`, retrying on EINTR: its raw wait status, and the CPU time
/// (user + system, microseconds) and largest resident size (bytes) of that child and its
/// waited-for descendants only. `getrusage(RUSAGE_CHILDREN)` sums every child this process
/// ever waited for: in a process that runs many sandboxes (`stockade mcp`, a library caller),
/// it gave each run the ones before it too.
pub fn wait_with_rusage(pid: libc::pid_t) -> Result<(c_int, (u64, u64))> {
    loop {
        let mut status: c_int = 0;
        // SAFETY: rusage is plain data; all-zero is a valid value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: status and ru are valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r < 0 {
            let e = Errno::last();
            if e.0 == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        return Ok((status, cpu_and_peak(&ru)));
    }
}

/// The hard limit of `resource` (`getrlimit(2)`); `u64::MAX` for unlimited.
pub fn hard_rlimit(resource: c_int) -> Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a valid out-pointer.
    check_int(unsafe { libc::getrlimit(resource as _, &mut lim) })?;
    Ok(lim.rlim_max)
}

/// The soft limit of `resource` of process `pid` (`prlimit(2)` without setting);
/// `u64::MAX` for unlimited.
pub fn soft_rlimit_of(pid: libc::pid_t, resource: c_int) -> Result<u64> {
    let mut lim = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a null new limit only reads; lim is a valid out-pointer.
    check_int(unsafe { libc::prlimit64(pid, resource as _, std::ptr::null(), &mut lim) })?;
    Ok(lim.rlim_cur)
}

/// `setrlimit(2)` of both the soft and the hard limit (lowering needs no privilege).
pub fn set_rlimit(resource: c_int, value: u64) -> Result<()> {
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: lim is a live rlimit struct.
    check_int(unsafe { libc::setrlimit(resource as _, &lim) }).map(drop)
}

/// The terminal settings of `fd` (`tcgetattr(3)`).
pub fn terminal_settings(fd: c_int) -> Result<libc::termios> {
    // SAFETY: termios is plain data; zeroed is a valid value the kernel overwrites.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a valid out-pointer for the call.
    check_int(unsafe { libc::tcgetattr(fd, &mut t) })?;
    Ok(t)
}

/// The window size of the terminal `fd` (`TIOCGWINSZ`).
pub fn window_size(fd: c_int) -> Result<libc::winsize> {
    let mut w = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into `w`, a valid out-pointer.
    check_int(unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut w) })?;
    Ok(w)
}

/// A new pseudo-terminal from the `/dev/ptmx` at that path in the caller's mount namespace,
/// with `settings` and `size`: (master, slave), both close-on-exec, neither the caller's
/// controlling terminal. The slave is reached through the master (`TIOCGPTPEER`), never by a
/// path. Makes no allocation (the sandbox init calls it after the fork).
pub fn open_pty(
    ptmx: &CStr,
    settings: &libc::termios,
    size: &libc::winsize,
) -> Result<(c_int, c_int)> {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    let master = openat(libc::AT_FDCWD, ptmx, flags, 0)?;
    let slave = (|| {
        let unlock: c_int = 0;
        // SAFETY: TIOCSPTLCK reads one int from a valid pointer.
        check_int(unsafe { libc::ioctl(master, libc::TIOCSPTLCK, &unlock) })?;
        // SAFETY: TIOCGPTPEER takes open flags as an integer and returns a new descriptor.
        let slave = check_int(unsafe { libc::ioctl(master, libc::TIOCGPTPEER, flags) })?;
        // SAFETY: TCSETS reads one termios from a valid pointer that outlives the call.
        let set = check_int(unsafe { libc::ioctl(slave, libc::TCSETS, settings) });
        // SAFETY: TIOCSWINSZ reads one winsize from a valid pointer that outlives the call.
        let set =
            set.and_then(|_| check_int(unsafe { libc::ioctl(slave, libc::TIOCSWINSZ, size) }));
        match set {
            Ok(_) => Ok(slave),
            Err(e) => {
                close(slave);
                Err(e)
            }
        }
    })();
    match slave {
        Ok(slave) => Ok((master, slave)),
        Err(e) => {
            close(master);
            Err(e)
        }
    }
}

/// Make the terminal `fd` the controlling terminal of the caller, a session leader without
/// one (`TIOCSCTTY`, never stealing it from another session).
pub fn set_controlling_terminal(fd: c_int) -> Result<()> {
    // SAFETY: TIOCSCTTY takes an integer argument (0: do not steal).
    check_int(unsafe { libc::ioctl(fd, libc::TIOCSCTTY, 0 as c_int) }).map(drop)
}

/// Run `f` and give errno back its value from before: for signal handlers, which may
/// interrupt code between a failing call and its reading of errno.
pub fn preserving_errno<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: __errno_location returns this thread's errno slot, valid while the thread lives.
    let slot = unsafe { libc::__errno_location() };
    // SAFETY: `slot` is valid and aligned (above).
    let saved = unsafe { *slot };
    let r = f();
    // SAFETY: as above.
    unsafe { *slot = saved };
    r
}

/// Why `openat2` itself cannot be used here (`ENOSYS`: an old kernel or a seccomp filter
/// answering so; `EPERM`: an older container profile's default answer), judged by a call that
/// cannot fail otherwise (`/`, `O_PATH`, no link on the way); `None` when it works. The one
/// probe for the creation guard and for review mode's refusal.
pub fn openat2_refused() -> Option<Errno> {
    match openat2(
        libc::AT_FDCWD,
        c"/",
        libc::O_PATH | libc::O_DIRECTORY,
        RESOLVE_NO_SYMLINKS,
    ) {
        Ok(fd) => {
            close(fd);
            None
        }
        Err(e @ Errno(libc::ENOSYS | libc::EPERM)) => Some(e),
        Err(_) => None,
    }
}

/// [`openat_no_symlinks`] without `openat2`: each component is opened `O_PATH | O_NOFOLLOW`
/// from the descriptor of the one before and refused with `ELOOP` when it is a symbolic link
/// (a magic link too: `O_NOFOLLOW` opens the link itself), the same answer `openat2` gives.
/// The last is then reopened with the caller's `flags` and `O_NOFOLLOW` (kept as it is for an
/// `O_PATH` open), so no link is followed anywhere, even one swapped in after it was looked
/// at: each step starts from a directory already held, never from a path looked up again.
/// A path ending in `/`, `/.` or `/..` wants a directory, as for the kernel (`file/.` is
/// `ENOTDIR`), and the reopening says so (`O_DIRECTORY`): a file swapped in since the check
/// is `ENOTDIR` too.
/// `..` is walked as the kernel walks it (`RESOLVE_NO_SYMLINKS` allows it too). An absolute
/// path starts at the caller's root. Not for creation (`O_CREAT`, `O_TMPFILE`: `EINVAL`). One
/// difference, stricter: a last component that is a link is `ELOOP` even for
/// `O_PATH | O_NOFOLLOW`, where `openat2` opens the link itself (no caller asks for that).
/// Allocates nothing (the sandbox's init calls it after the clone); a component longer than
/// `NAME_MAX` is `ENAMETOOLONG`.
pub fn openat_no_symlinks_by_component(dirfd: c_int, path: &CStr, flags: c_int) -> Result<c_int> {
    if creates(flags) {
        return Err(Errno(libc::EINVAL));
    }
    let bytes = path.to_bytes();
    if bytes.is_empty() {
        return Err(Errno(libc::ENOENT));
    }
    let absolute = bytes[0] == b'/';
    // "a/", "a/." and "a/.." name a directory, as for the kernel: the components below drop
    // the slash and the ".", so this is decided on the whole path first ("file/." is
    // `ENOTDIR`, not the file).
    let want_dir = flags & libc::O_DIRECTORY != 0
        || bytes.ends_with(b"/")
        || bytes.ends_with(b"/.")
        || bytes.ends_with(b"/..")
        || bytes == b".."
        || bytes == b".";
    let mut names = bytes
        .split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .peekable();
    if names.peek().is_none() {
        // "/", "." and the like: the start itself, which is no link.
        let (at, name) = if absolute {
            (libc::AT_FDCWD, c"/")
        } else {
            (dirfd, c".")
        };
        return openat(at, name, flags, 0);
    }
    // The directory the next name is looked up in; `owned` when this walk opened it.
    let (mut dir, mut owned) = if absolute {
        (
            openat(libc::AT_FDCWD, c"/", libc::O_PATH | libc::O_DIRECTORY, 0)?,
            true,
        )
    } else {
        (dirfd, false)
    };
    let mut buf = [0u8; 256];
    let result = loop {
        let Some(comp) = names.next() else {
            break Err(Errno(libc::ENOENT)); // not reached: the loop ends at the last name
        };
        let last = names.peek().is_none();
        let Some(slot) = buf.get_mut(..comp.len() + 1) else {
            break Err(Errno(libc::ENAMETOOLONG));
        };
        slot[..comp.len()].copy_from_slice(comp);
        slot[comp.len()] = 0;
        let Ok(name) = CStr::from_bytes_with_nul(slot) else {
            break Err(Errno(libc::EINVAL)); // a CStr has no inner NUL: not reached
        };
        let step = openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0).and_then(|fd| {
            let kind = fstat(fd).map(|st| st.st_mode & libc::S_IFMT);
            match kind {
                Ok(libc::S_IFLNK) => Err(Errno(libc::ELOOP)),
                Ok(libc::S_IFDIR) => Ok(fd),
                Ok(_) if !last || want_dir => Err(Errno(libc::ENOTDIR)),
                Ok(_) => Ok(fd),
                Err(e) => Err(e),
            }
            .inspect_err(|_| close(fd))
        });
        let final_fd = match step {
            Ok(fd) if last && flags & libc::O_PATH != 0 => Ok(fd),
            Ok(fd) if last => {
                close(fd);
                // Opened again by name: with `O_DIRECTORY` when a directory is wanted, so
                // that a file swapped in since the check above is `ENOTDIR` as it is for
                // `openat2` (the kernel checks the kind of what it opens, in one step).
                let dir_flag = if want_dir { libc::O_DIRECTORY } else { 0 };
                openat(dir, name, flags | libc::O_NOFOLLOW | dir_flag, 0)
            }
            Ok(fd) => {
                if owned {
                    close(dir);
                }
                dir = fd;
                owned = true;
                continue;
            }
            Err(e) => Err(e),
        };
        break final_fd;
    };
    if owned {
        close(dir);
    }
    result
}

/// Whether open `flags` create a file (`O_CREAT`, or `O_TMPFILE`, whose bits include
/// `O_DIRECTORY`'s).
fn creates(flags: c_int) -> bool {
    flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE
}
