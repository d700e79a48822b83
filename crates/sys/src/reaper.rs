//! The reaper: a small process the supervisor starts before the sandbox, which
//! removes the run's cgroup directories if the supervisor dies without doing it (`kill -9`).
//!
//! It holds the read end of a pipe whose only write end the supervisor holds (close-on-exec,
//! so the command never has it; the sandbox's init, a fork without exec, may hold a copy until
//! it dies too). End of file means every holder is gone: the reaper then kills what is still
//! listed in each group's `cgroup.procs`, removes the directories and exits. When the
//! supervisor finishes normally it removes the groups itself and then closes its end; the
//! reaper finds nothing left to do.
//!
//! Hand-written rather than a helper binary: an `exec` would cost about a millisecond per
//! run. It is not even a fork: it shares the supervisor's memory ([`raw::clone_vm`]), which
//! saves copying the page tables at the start and tearing them down at the end (about
//! 250 µs of every run with limits). After the clone it only reads the paths prepared for it
//! and makes rustix's raw syscalls, which never write `errno` (it shares the supervisor's
//! thread-local storage); nothing allocates.
//!
//! Sharing memory has one cost: when the OOM killer picks the supervisor, it kills every
//! process of that address space, the reaper too, and the run's empty group directories stay
//! behind (unlikely: the run's memory is in its own group, and the supervisor's is small). A
//! core dump does not (since Linux 5.16 it stops only the dumping thread group; checked on
//! 6.18 with a `CLONE_VM` child that outlives its parent's `abort()` and core file).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libc::c_int;
use rustix::fs::{AtFlags, Mode, OFlags, CWD};
use rustix::io::Errno;

use crate::raw;

/// Directories the reaper removes at most.
pub const MAX_DIRS: usize = 8;

/// The reaper's stack: its deepest call is [`kill_listed`] with a 4 KiB buffer.
const STACK_SIZE: usize = 64 * 1024;

/// What the reaper reads: its end of the pipe and the directories with their `cgroup.procs`.
struct Task {
    pipe: c_int,
    dirs: Vec<(CString, CString)>,
}

/// The supervisor's handle: dropping it (or dying) lets the reaper go.
#[derive(Debug)]
pub struct Reaper {
    pid: libc::pid_t,
    pipe: Option<OwnedFd>,
    // Shared with the reaper: freed only once it has been waited for (never, should the
    // supervisor die first, which is when the reaper still needs them).
    _task: Box<Task>,
    _stack: Vec<u8>,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("dirs", &self.dirs.len())
            .finish()
    }
}

impl Reaper {
    /// Start the reaper for `dirs` (absolute paths of cgroup directories).
    pub fn spawn(dirs: &[&std::path::Path]) -> io::Result<Reaper> {
        use std::os::unix::ffi::OsStrExt;
        if dirs.len() > MAX_DIRS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "too many groups",
            ));
        }
        let c = |p: &std::path::Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a path"))
        };
        let dirs = dirs
            .iter()
            .map(|d| Ok((c(d)?, c(&d.join("cgroup.procs"))?)))
            .collect::<io::Result<Vec<_>>>()?;
        let (r, w) = raw::pipe()?;
        // SAFETY: both fds were just created and are owned here.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(r), OwnedFd::from_raw_fd(w)) };
        let mut task = Box::new(Task {
            pipe: r.as_raw_fd(),
            dirs,
        });
        let mut stack = vec![0u8; STACK_SIZE];
        let arg: *mut Task = &mut *task;
        // SAFETY: `reap_entry` only reads the task (not changed until the reaper has been
        // waited for: `Drop` waits before the fields go) and makes rustix's raw syscalls or
        // libc calls that cannot fail; it allocates nothing. The task and the stack live in
        // the returned `Reaper` until then.
        let pid = unsafe { raw::clone_vm(0, reap_entry, arg.cast(), &mut stack) }?;
        // The reaper has its own copy of the descriptor table: ours of the read end can go.
        drop(r);
        Ok(Reaper {
            pid,
            pipe: Some(w),
            _task: task,
            _stack: stack,
        })
    }

    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Let the reaper go without waiting for it (dropping the handle then collects it).
    pub fn release(&mut self) {
        drop(self.pipe.take());
    }
}

impl Drop for Reaper {
    /// Let the reaper go (the groups are gone or it removes them) and collect it, before
    /// the task and stack it uses are freed.
    fn drop(&mut self) {
        drop(self.pipe.take());
        let _ = raw::waitpid(self.pid, 0);
    }
}

extern "C" fn reap_entry(arg: *mut libc::c_void) -> c_int {
    // SAFETY: `arg` is the `Task` that `Reaper::spawn` boxed; it outlives this process.
    let task = unsafe { &*(arg as *const Task) };
    reap(task)
}

/// The reaper's life: wait for end of file on the pipe, then remove the groups.
fn reap(task: &Task) -> c_int {
    // Out of the caller's process group: the terminal's signals (Ctrl-C, Ctrl-\, Ctrl-Z) go
    // to its foreground group only, and a kill of the caller's group (a shell's job control,
    // `timeout`, a harness's `kill -- -PGID`) must not end it before its work. A group, not a
    // session (`setsid`): a new session also makes a new scheduler autogroup where
    // `sched_autogroup_enabled` is set, 190-230 µs of every run against about 2 µs, and buys
    // nothing more: a terminal's hangup sends SIGHUP to its session's leader and (once that
    // leader exits) to its foreground group, and the reaper is neither; SIGHUP is ignored
    // below anyway, and it never touches the terminal (every descriptor is closed), so
    // SIGTTIN/SIGTTOU cannot stop it. Standard streams closed: a caller reading our output
    // must not wait for the reaper.
    let _ = rustix::process::setpgid(None, None);
    // SAFETY: setting a signal to SIG_IGN cannot fail for these signals (so leaves errno
    // alone) and touches no memory.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let _ = rustix::thread::set_name(c"stockade-reaper");
    let pipe = task.pipe;
    // Every descriptor but the pipe, in the reaper's own table (no CLONE_FILES).
    // SAFETY: close_range with a valid range cannot fail (so leaves errno alone).
    unsafe {
        if pipe > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (pipe - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (pipe + 1) as u32, u32::MAX, 0u32);
    }
    // SAFETY: the pipe is open in this process's table until it exits.
    let pipe = unsafe { BorrowedFd::borrow_raw(pipe) };
    let mut byte = [0u8; 1];
    loop {
        match rustix::io::read(pipe, &mut byte) {
            Err(Errno::INTR) => continue,
            Ok(n) if n > 0 => continue,
            _ => break,
        }
    }
    // Children before parents (the list is in creation order; v1 groups are siblings).
    for (dir, procs) in task.dirs.iter().rev() {
        for _ in 0..2000 {
            match rustix::fs::unlinkat(CWD, dir.as_c_str(), AtFlags::REMOVEDIR) {
                Ok(()) | Err(Errno::NOENT) => break,
                Err(_) => {}
            }
            kill_listed(procs);
            let _ = rustix::thread::nanosleep(&rustix::thread::Timespec {
                tv_sec: 0,
                tv_nsec: 1_000_000,
            });
        }
    }
    0
}

/// SIGKILL every pid listed in a `cgroup.procs` file. Raw syscalls only, no allocation: safe
/// after a fork, and what the supervisor uses too.
pub fn kill_listed(procs: &CStr) {
    let Ok(fd) = rustix::fs::openat(CWD, procs, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
    else {
        return;
    };
    let mut buf = [0u8; 4096];
    let mut pid: i64 = 0;
    let mut digits = false;
    let kill = |pid: i64| {
        if let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            if pid.as_raw_nonzero().get() > 1 {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    };
    loop {
        let n = match rustix::io::read(&fd, &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b.is_ascii_digit() {
                pid = pid.saturating_mul(10).saturating_add(i64::from(b - b'0'));
                digits = true;
            } else {
                if digits {
                    kill(pid);
                }
                pid = 0;
                digits = false;
            }
        }
    }
    if digits {
        kill(pid);
    }
}
