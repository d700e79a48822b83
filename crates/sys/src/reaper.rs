//! The reaper: a small process forked by the supervisor before the sandbox starts, which
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
//! run; a fork of the supervisor costs a tenth of that. After the fork the child only makes
//! raw syscalls on data prepared before it (no allocation), like the sandbox's own children.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use libc::c_int;

use crate::raw;

/// Directories the reaper removes at most.
pub const MAX_DIRS: usize = 8;

/// The supervisor's handle: dropping it (or dying) lets the reaper go.
#[derive(Debug)]
pub struct Reaper {
    pid: libc::pid_t,
    pipe: Option<OwnedFd>,
}

impl Reaper {
    /// Fork the reaper for `dirs` (absolute paths of cgroup directories).
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
        let dirs_c: Vec<CString> = dirs.iter().map(|d| c(d)).collect::<io::Result<_>>()?;
        let procs_c: Vec<CString> = dirs
            .iter()
            .map(|d| c(&d.join("cgroup.procs")))
            .collect::<io::Result<_>>()?;
        let pairs: Vec<(&CStr, &CStr)> = dirs_c
            .iter()
            .zip(&procs_c)
            .map(|(d, p)| (d.as_c_str(), p.as_c_str()))
            .collect();
        let (r, w) = raw::pipe()?;
        // SAFETY: both fds were just created and are owned here.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(r), OwnedFd::from_raw_fd(w)) };
        // SAFETY: the child runs only `reap`, which makes raw syscalls on memory prepared above
        // (the pairs and their strings stay alive in the child's copy of the address space)
        // and ends with `_exit`; nothing in it allocates or takes a lock.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            reap(r.as_raw_fd(), &pairs);
        }
        drop(r);
        Ok(Reaper { pid, pipe: Some(w) })
    }

    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }
}

impl Drop for Reaper {
    /// Let the reaper go (the groups are gone or it removes them) and collect it.
    fn drop(&mut self) {
        drop(self.pipe.take());
        let _ = raw::waitpid(self.pid, 0);
    }
}

/// The reaper's life after the fork.
fn reap(pipe: c_int, dirs: &[(&CStr, &CStr)]) -> ! {
    // Out of the caller's process group and session: Ctrl-C or a closed terminal must not end
    // it before its work. Standard streams closed: a caller reading our output must not wait
    // for the reaper.
    // SAFETY: plain syscalls with integer arguments.
    unsafe {
        libc::setsid();
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        libc::prctl(libc::PR_SET_NAME, c"stockade-reaper".as_ptr());
        if pipe > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (pipe - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (pipe + 1) as u32, u32::MAX, 0u32);
    }
    let mut byte = [0u8; 1];
    loop {
        match raw::read(pipe, &mut byte) {
            Err(raw::Errno(libc::EINTR)) => continue,
            Ok(n) if n > 0 => continue,
            _ => break,
        }
    }
    // Children before parents (the list is in creation order; v1 groups are siblings).
    for (dir, procs) in dirs.iter().rev() {
        for _ in 0..2000 {
            // SAFETY: dir is a valid NUL-terminated path.
            if unsafe { libc::rmdir(dir.as_ptr()) } == 0 {
                break;
            }
            let e = raw::Errno::last();
            if e.0 == libc::ENOENT {
                break;
            }
            kill_listed(procs);
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 1_000_000,
            };
            // SAFETY: pause is a valid timespec; no remainder wanted.
            unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
        }
    }
    // SAFETY: ends the process without running anything of the parent's.
    unsafe { libc::_exit(0) }
}

/// SIGKILL every pid listed in a `cgroup.procs` file. Raw syscalls only, no allocation: safe
/// after a fork, and what the supervisor uses too.
pub fn kill_listed(procs: &CStr) {
    let Ok(fd) = raw::openat(libc::AT_FDCWD, procs, libc::O_RDONLY | libc::O_CLOEXEC, 0) else {
        return;
    };
    let mut buf = [0u8; 4096];
    let mut pid: i64 = 0;
    let mut digits = false;
    loop {
        let n = match raw::read(fd, &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b.is_ascii_digit() {
                pid = pid.saturating_mul(10).saturating_add(i64::from(b - b'0'));
                digits = true;
            } else {
                if digits && pid > 1 && pid <= i64::from(i32::MAX) {
                    let _ = raw::kill(pid as libc::pid_t, libc::SIGKILL);
                }
                pid = 0;
                digits = false;
            }
        }
    }
    if digits && pid > 1 && pid <= i64::from(i32::MAX) {
        let _ = raw::kill(pid as libc::pid_t, libc::SIGKILL);
    }
    raw::close(fd);
}
