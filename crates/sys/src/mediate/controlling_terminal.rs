//! `/dev/tty` opened with `O_CREAT` (a shell's `echo hi >/dev/tty` is
//! `O_WRONLY|O_CREAT|O_TRUNC`): the call is mediated, so the init performs the open, and
//! `/dev/tty` means the controlling terminal of whoever opens it. The init leads a session
//! without one (it must never hold a terminal), so its own open would fail with `ENXIO`
//! where the command's would have succeeded.
//!
//! The init opens the calling task's controlling terminal instead, by its number
//! (`tty_nr` in `/proc/<tid>/stat`), and only a terminal of the sandbox's own devpts
//! instance at `/dev/pts/<n>`: the run's terminal, or one the command made inside. Any other
//! (none, a console, the caller's terminal, which no process inside can make its controlling
//! terminal) is `ENXIO`, as for a process without a terminal. The node is checked to be a
//! devpts character device with that number before it is reopened, so nothing planted at
//! the path is opened, and never with `O_CREAT` or `O_TRUNC`.

use std::os::raw::c_int;

use super::{open_path, self_fd_path, Fd, Reply, ShortPath, Target};
use crate::raw::{self, Errno};

/// `DEVPTS_SUPER_MAGIC` (linux/magic.h).
const DEVPTS_SUPER_MAGIC: i64 = 0x1cd1;
/// The majors of UNIX 98 pty slaves: `/dev/pts/<n>` is major `136 + n / 256`, minor `n % 256`.
const PTS_MAJORS: std::ops::RangeInclusive<u32> = 136..=143;

/// Whether `st` is `/dev/tty` (character device 5:0).
pub(super) fn is_dev_tty(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == libc::makedev(5, 0)
}

/// Open the calling task's controlling terminal with `flags` (an `open` of `/dev/tty`).
pub(super) fn open(t: &mut Target, flags: c_int) -> Result<Reply, Errno> {
    let cloexec = flags & libc::O_CLOEXEC != 0;
    let (major, minor) = tty_of(t)?.ok_or(Errno(libc::ENXIO))?;
    if !PTS_MAJORS.contains(&major) {
        return Err(Errno(libc::ENXIO));
    }
    let index = (major - PTS_MAJORS.start()) * 256 + minor;
    let mut p = ShortPath::new();
    p.push(b"/dev/pts/")?;
    p.push_num(u64::from(index))?;
    let node = open_path(p.bytes(), libc::O_PATH | libc::O_NOFOLLOW)?;
    let st = raw::fstatat(node.0, c"", libc::AT_EMPTY_PATH)?;
    let same = st.st_mode & libc::S_IFMT == libc::S_IFCHR
        && st.st_rdev == libc::makedev(major, minor)
        && raw::fs_magic(node.0)? == DEVPTS_SUPER_MAGIC;
    if !same {
        return Err(Errno(libc::ENXIO));
    }
    let reopen = (flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC)) | libc::O_NOCTTY;
    let path = self_fd_path(node.0)?;
    raw::openat_exact(libc::AT_FDCWD, path.cstr()?, reopen | libc::O_CLOEXEC, 0).map(|fd| {
        Reply::Fd {
            fd: Fd(fd),
            cloexec,
        }
    })
}

/// The task's controlling terminal as (major, minor), from field 7 of `/proc/<tid>/stat`;
/// `None` when it has none.
fn tty_of(t: &mut Target) -> Result<Option<(u32, u32)>, Errno> {
    let f = t.open_in_proc(b"stat", libc::O_RDONLY)?;
    let mut buf = [0u8; 1024];
    let n = raw::read(f.0, &mut buf)?;
    // Read by tid: go on only if the call that notified still waits (the tid is its task's).
    if !raw::notif_id_valid(t.listener, t.id) {
        return Err(Errno(libc::ESRCH));
    }
    let tty_nr = tty_nr(&buf[..n]).ok_or(Errno(libc::EIO))?;
    if tty_nr == 0 {
        return Ok(None);
    }
    let major = (tty_nr >> 8) & 0xfff;
    let minor = (tty_nr & 0xff) | ((tty_nr >> 12) & 0xfff00);
    Ok(Some((major, minor)))
}

/// `tty_nr` from the text of a `/proc/<pid>/stat`: the fifth field after the command name,
/// which ends at the last `)` (the name itself may hold spaces and parentheses).
fn tty_nr(stat: &[u8]) -> Option<u32> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let field = stat[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty())
        .nth(4)?;
    std::str::from_utf8(field)
        .ok()?
        .parse::<i64>()
        .ok()
        .map(|v| v as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tty_nr_is_the_seventh_field() {
        let stat = b"4242 (bash) S 1 4242 4242 34816 4242 4194560 1 0 0 0";
        assert_eq!(tty_nr(stat), Some(34816));
        let odd = b"7 (a) b) (c ) R 1 7 7 0 -1 0";
        assert_eq!(tty_nr(odd), Some(0));
        assert_eq!(tty_nr(b"garbage"), None);
    }
}
