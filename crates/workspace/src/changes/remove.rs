//! Removing a run directory from the store, whatever modes the run left in its upper.
//!
//! The upper holds what the command made, modes included: a `chmod 555 d` with a file in `d`
//! cannot be emptied by its owner (unlinking in `d` wants its write bit), and overlayfs leaves
//! `work/work` at mode 000. Everything here lies in stockade's own store, so a directory whose
//! owner bits are not `rwx` is given 0700 before it is emptied: each one reached beneath the
//! store's descriptor (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, `O_NOFOLLOW`,
//! `O_DIRECTORY`), never through a link, and changed through that descriptor. `meta.json` goes
//! last: a removal cut short leaves a change set `stockade runs` still names and `discard`
//! can finish.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType as Ft, OFlags, Stat};
use rustix::io::Errno;

use crate::beneath::{
    chmod_fd, errno_io, list, move_no_replace, open_child, random_name, stat_child,
};

/// Below this depth, directories are moved up into the run directory before being emptied:
/// removal holds one descriptor per level.
const REMOVE_DEPTH: usize = 32;

/// The record, removed last.
const META: &str = "meta.json";

/// Removes the run directory `id` of the store `store` and everything in it (see the
/// module's docs). Already gone: done.
pub(super) fn remove_run(store: BorrowedFd<'_>, id: &OsStr) -> io::Result<()> {
    let Some(st) = stat_child(store, id)? else {
        return Ok(());
    };
    if Ft::from_raw_mode(st.st_mode) != Ft::Directory {
        return unlink(store, id, AtFlags::empty());
    }
    let top = open_emptiable(store, id, &st)?;
    // Deeper directories are moved up into `top` by a pass; the next pass takes them.
    loop {
        let rest: Vec<_> = list(top.as_fd())?
            .into_iter()
            .filter(|n| n != META)
            .collect();
        if rest.is_empty() {
            break;
        }
        for name in rest {
            remove_entry(top.as_fd(), top.as_fd(), &name, 0)?;
        }
    }
    unlink(top.as_fd(), OsStr::new(META), AtFlags::empty())?;
    drop(top);
    unlink(store, id, AtFlags::REMOVEDIR)
}

fn remove_entry(
    top: BorrowedFd<'_>,
    dir: BorrowedFd<'_>,
    name: &OsStr,
    depth: usize,
) -> io::Result<()> {
    let Some(st) = stat_child(dir, name)? else {
        return Ok(());
    };
    if Ft::from_raw_mode(st.st_mode) != Ft::Directory {
        return unlink(dir, name, AtFlags::empty());
    }
    if depth >= REMOVE_DEPTH {
        // Moving a directory to another parent rewrites its `..`: it needs its write bit.
        let d = open_child(dir, name, OFlags::PATH | OFlags::DIRECTORY)?;
        open_up(d.as_fd(), &st);
        let up = random_name(".stockade-rm-")?;
        return move_no_replace(dir, name, top, &up);
    }
    let child = open_emptiable(dir, name, &st)?;
    for n in list(child.as_fd())? {
        remove_entry(top, child.as_fd(), &n, depth + 1)?;
    }
    drop(child);
    unlink(dir, name, AtFlags::REMOVEDIR)
}

/// The directory `name` in `dir` (its `lstat` is `st`), opened readable to be emptied, given
/// 0700 first when its owner could not read, write or search it.
fn open_emptiable(dir: BorrowedFd<'_>, name: &OsStr, st: &Stat) -> io::Result<OwnedFd> {
    if st.st_mode & 0o700 != 0o700 {
        let d = open_child(dir, name, OFlags::PATH | OFlags::DIRECTORY)?;
        open_up(d.as_fd(), st);
    }
    open_child(dir, name, OFlags::RDONLY | OFlags::DIRECTORY)
}

/// Gives the directory `d` (an `O_PATH` descriptor reached beneath the store) 0700 when its
/// owner bits are not `rwx`. A failure is left to the removal that follows to report.
fn open_up(d: BorrowedFd<'_>, st: &Stat) {
    if st.st_mode & 0o700 != 0o700 {
        let _ = chmod_fd(d, 0o700);
    }
}

fn unlink(dir: BorrowedFd<'_>, name: &OsStr, flags: AtFlags) -> io::Result<()> {
    match rustix::fs::unlinkat(dir, name, flags) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(errno_io(e)),
    }
}
