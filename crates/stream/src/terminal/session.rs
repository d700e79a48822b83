//! Whether a run is in the foreground of a terminal that is not its controlling terminal.
//!
//! `su -c` (and any tool that starts its command in a session of its own) leaves the command
//! a terminal on its stdio that is not its controlling terminal: `tcgetpgrp` answers `ENOTTY`
//! and job control says nothing of this process. The terminal may still be someone's
//! controlling terminal: `su stockade-test -c 'stockade run ...' &` in root's shell runs in
//! the background of root's terminal, and a run that took the keyboard there would read the
//! keys root types next (passwords) into the sandboxed command. So the answer is looked up:
//! the nearest ancestor of this process whose controlling terminal is this one (`su` itself,
//! in the session of the shell that started it) is in its foreground or not; with no such
//! ancestor, a terminal that no process of this pid namespace has as its controlling terminal
//! (a harness that gave the run a pty in a session of its own) is the run's alone. Anything
//! that cannot be read or does not fit answers "not in the foreground": such a run shows its
//! output and reads no keys (it says so).
//!
//! What is read is `/proc/PID/stat` of this process's ancestors (and, only when none has the
//! terminal, of every process): none of them is the sandbox's, which runs in a pid namespace
//! of its own (or in gVisor's kernel); a process inside can at most make a terminal of its
//! own look taken, which keeps the keys from this run, never gives them.

use std::os::fd::BorrowedFd;

/// How many ancestors are looked at, at most.
const MAX_ANCESTORS: usize = 64;

/// The fields of `/proc/PID/stat` this needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stat {
    pub ppid: i32,
    pub pgrp: i32,
    /// The controlling terminal's device, as the kernel encodes it (0: none).
    pub tty_nr: u64,
    /// The foreground process group of the controlling terminal (-1: none).
    pub tpgid: i32,
}

/// Parse `/proc/PID/stat`: the fields after the command's name, which ends at the last `)`
/// (the name itself may hold spaces and parentheses).
pub(super) fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace();
    let _state = f.next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    let _session: i32 = f.next()?.parse().ok()?;
    let tty_nr = f.next()?.parse().ok()?;
    let tpgid = f.next()?.parse().ok()?;
    Some(Stat {
        ppid,
        pgrp,
        tty_nr,
        tpgid,
    })
}

fn stat_of(pid: &str) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Whether `tty_nr` (the kernel's encoding: minor's low byte, major, then minor's high bits)
/// names the device `major:minor`.
pub(super) fn same_device(tty_nr: u64, major: u32, minor: u32) -> bool {
    let m = ((tty_nr >> 8) & 0xfff) as u32;
    let n = ((tty_nr & 0xff) | ((tty_nr >> 12) & 0xfff00)) as u32;
    tty_nr != 0 && m == major && n == minor
}

/// How deep in pid namespaces the process `pid` is (entries of `NSpid`).
fn pid_depth(pid: &str) -> Option<usize> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    Some(line.split_ascii_whitespace().count())
}

/// Whether this process may take the keyboard of `fd`, a terminal that is not its controlling
/// terminal (`tcgetpgrp` said `ENOTTY`); see the module's docs.
pub(super) fn foreground_elsewhere(fd: BorrowedFd<'_>) -> bool {
    let Ok(st) = rustix::fs::fstat(fd) else {
        return false;
    };
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::CharacterDevice {
        return false;
    }
    let (major, minor) = (rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev));
    let Some(me) = stat_of("self") else {
        return false;
    };
    // A controlling terminal with this device's number that is not this terminal (another
    // devpts instance): nothing here can tell them apart.
    if same_device(me.tty_nr, major, minor) {
        return false;
    }
    let mut ppid = me.ppid;
    for _ in 0..MAX_ANCESTORS {
        // 0: the top of this pid namespace.
        if ppid <= 0 {
            return nobody_controls(major, minor);
        }
        let Some(s) = stat_of(&ppid.to_string()) else {
            return false;
        };
        if same_device(s.tty_nr, major, minor) {
            return s.tpgid > 0 && s.pgrp == s.tpgid;
        }
        ppid = s.ppid;
    }
    false
}

/// No process of this pid namespace has `major:minor` as its controlling terminal, and every
/// process could be seen (`/proc` not mounted with `hidepid`). Processes in pid namespaces
/// below this one (a sandbox's, a container's) have terminals of their own devpts, whose
/// numbers may be the same and are not this one.
fn nobody_controls(major: u32, minor: u32) -> bool {
    let Some(depth) = pid_depth("self") else {
        return false;
    };
    // Another user's processes hidden: no answer.
    if stat_of("1").is_none() {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        // Gone meanwhile: it holds nothing.
        let Some(s) = stat_of(pid) else {
            continue;
        };
        if same_device(s.tty_nr, major, minor) {
            match pid_depth(pid) {
                Some(d) if d > depth => {}
                Some(_) => return false,
                // Gone meanwhile, or its status unreadable: taken to hold it.
                None => {
                    if std::path::Path::new("/proc").join(pid).exists() {
                        return false;
                    }
                }
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_read_after_the_name_whatever_it_holds() {
        let s = parse_stat("27610 (a) b) (c) S 27609 27605 27605 34816 27605 4194304 75 0")
            .expect("parsed");
        assert_eq!(
            s,
            Stat {
                ppid: 27609,
                pgrp: 27605,
                tty_nr: 34816,
                tpgid: 27605
            }
        );
        assert!(parse_stat("12 (x) S 1").is_none());
        assert!(parse_stat("no name").is_none());
    }

    #[test]
    fn the_kernels_device_numbers_are_compared_as_major_and_minor() {
        // /dev/pts/0 is 136:0 (34816); /dev/pts/300 is 136:300.
        assert!(same_device(34816, 136, 0));
        assert!(!same_device(34816, 136, 1));
        let pts300 = (300 & 0xff) | (136 << 8) | ((300 & !0xff) << 12);
        assert!(same_device(pts300, 136, 300));
        assert!(!same_device(pts300, 136, 44));
        // No controlling terminal.
        assert!(!same_device(0, 0, 0));
    }

    #[test]
    fn this_process_is_found_in_proc() {
        let me = stat_of("self").expect("own stat");
        assert_eq!(me.pgrp, rustix::process::getpgrp().as_raw_nonzero().get());
        assert!(pid_depth("self").is_some_and(|d| d >= 1));
    }
}
