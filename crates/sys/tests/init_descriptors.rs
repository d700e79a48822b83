//! The sandbox init holds nothing of the supervisor's but what its own run needs, from the
//! moment it exists (issue 30, item 8): several runs go on in one process (the MCP server, a
//! library caller), and an init that kept another run's pipes, pidfds or channels open while
//! it sets up would hold that run's input, output or report open.
//!
//! The init is caught where it waits for its id maps (the supervisor never sends them here),
//! i.e. before any of its set-up, and its descriptor table is read from the host side.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::raw::{c_char, c_int};
use std::time::{Duration, Instant};

use sys::postfork::{ChildSpec, CommandSpec};

fn pipe() -> (OwnedFd, OwnedFd) {
    let (r, w) = sys::raw::pipe().expect("a pipe");
    // SAFETY: both were just made by pipe2 and are owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(r), OwnedFd::from_raw_fd(w)) }
}

/// A pipe end without close-on-exec (as a careless library in the same process makes them).
fn inheritable(fd: &OwnedFd) -> OwnedFd {
    // SAFETY: F_DUPFD on a descriptor we own; the copy is owned by the returned OwnedFd.
    let dup = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD, 3) };
    assert!(dup >= 0, "dup: {}", std::io::Error::last_os_error());
    // SAFETY: just made, owned by nothing else.
    unsafe { OwnedFd::from_raw_fd(dup) }
}

fn fds_of(pid: libc::pid_t) -> BTreeSet<c_int> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the init's descriptor table (its parent may read it before it changes ids)")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_str()
                .and_then(|n| n.parse().ok())
                .expect("a number")
        })
        .collect()
}

/// Whether `pid` is blocked in `read(2)` (`/proc/PID/syscall`: the number of the call it is
/// blocked in, or `running`).
fn blocked_in_read(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/syscall"))
        .is_ok_and(|s| s.split(' ').next() == Some(&libc::SYS_read.to_string()))
}

#[test]
fn init_closes_what_another_run_holds_before_its_set_up() {
    // Another run's descriptors, open in this process when this run's init is cloned: a pipe
    // made the Rust way (close-on-exec, which an init that never execs ignores) and one
    // without close-on-exec.
    let (other_r, other_w) = pipe();
    let other_plain = inheritable(&other_r);
    let foreign: BTreeSet<c_int> = [&other_r, &other_w, &other_plain]
        .iter()
        .map(|f| f.as_raw_fd())
        .collect();
    // This run's own output pipe, which the init keeps (it is the command's fd 1): the same
    // kind of descriptor, seen in the init's table, shows the check sees what it holds.
    let (_out_r, out_w) = pipe();
    let argv: [*const c_char; 2] = [c"/bin/true".as_ptr(), std::ptr::null()];
    let envp: [*const c_char; 1] = [std::ptr::null()];
    let candidates = [c"/bin/true"];
    let spec = ChildSpec {
        report_fd: -1,
        sync_fd: -1,
        namespaces: sys::probe::ALL_NAMESPACES,
        uid: 0,
        gid: 0,
        clear_groups: false,
        hostname: b"stockade",
        mounts: &[],
        command: CommandSpec {
            cwd: c"/",
            argv: &argv,
            envp: &envp,
            candidates: &candidates,
            landlock: None,
            rlimits: &[],
        },
        mediate: None,
        new_network: true,
        proxy: None,
        terminal: None,
        stdin: -1,
        stdout: out_w.as_raw_fd(),
        stderr: -1,
        output_readers: [-1, -1],
        wait_group: false,
        join_tasks: &[],
        join_sock: -1,
        join_count: 0,
    };
    let mut slots: [c_int; 0] = [];
    let child = match sys::parent::spawn(&spec, &mut slots) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipped: this host cannot create the sandbox's namespaces ({e})");
            return;
        }
    };
    // The init is about to wait for its id maps, which never come. Its table is read once it
    // is blocked in that `read` (the only one before the maps), not as soon as the foreign
    // descriptors are gone: it closes the gaps between the kept ones one `close_range` at a
    // time, and a table read between two of them still holds what the last one closes.
    let until = Instant::now() + Duration::from_secs(20);
    while !blocked_in_read(child.pid) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let held = fds_of(child.pid);
    child.kill();
    let _ = child.wait();
    assert!(
        held.is_disjoint(&foreign),
        "the init holds another run's descriptors {:?} (its table: {held:?})",
        foreign.intersection(&held).collect::<Vec<_>>()
    );
    // Control: the kept pipe of the same kind is there.
    assert!(
        held.contains(&out_w.as_raw_fd()),
        "the init's own output pipe is missing from {held:?}: the check cannot see what it holds"
    );
    // And nothing else: 0, 1, 2, the report and sync pipes, the output pipe.
    assert_eq!(held.len(), 6, "the init's table: {held:?}");
}
