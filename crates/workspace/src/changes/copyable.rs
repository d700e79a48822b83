//! Files an unprivileged review run cannot modify.
//!
//! An overlay mounted in a user namespace copies a file up keeping its owner and group, and
//! fails (`EOVERFLOW`) for ids the namespace does not map; an unprivileged caller's namespace
//! maps only the caller's own. So every file and directory of the workspace whose uid or gid
//! is not the caller's cannot be changed by the run (nor anything created in such a
//! directory).

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use crate::beneath::{errno_io, list, open_child, stat_child};

/// Counts the files and directories below `workspace` (itself included) whose uid is not
/// `uid` or gid not `gid`, and returns up to `limit` of them (absolute paths). Links are not
/// followed (nor counted: a run replaces a link, it never modifies one), other filesystems
/// mounted below are not entered (the overlay does not see them), and directories the caller
/// cannot read are counted but not entered.
pub fn not_copyable(
    workspace: &Path,
    uid: u32,
    gid: u32,
    limit: usize,
) -> io::Result<(usize, Vec<PathBuf>)> {
    let root = rustix::fs::open(
        workspace,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno_io)?;
    let st = rustix::fs::fstat(&root).map_err(errno_io)?;
    let mut found = Found {
        uid,
        gid,
        dev: st.st_dev,
        limit,
        count: 0,
        paths: Vec::new(),
    };
    if st.st_uid != uid || st.st_gid != gid {
        found.note(workspace);
    }
    let mut rel = workspace.to_path_buf();
    found.visit(root.as_fd(), &mut rel, 0)?;
    Ok((found.count, found.paths))
}

struct Found {
    uid: u32,
    gid: u32,
    dev: u64,
    limit: usize,
    count: usize,
    paths: Vec<PathBuf>,
}

impl Found {
    fn note(&mut self, path: &Path) {
        self.count += 1;
        if self.paths.len() < self.limit {
            self.paths.push(path.to_path_buf());
        }
    }

    fn visit(&mut self, dir: BorrowedFd<'_>, path: &mut PathBuf, depth: usize) -> io::Result<()> {
        if depth > 4096 {
            return Ok(());
        }
        for name in list(dir)? {
            let Some(st) = stat_child(dir, &name)? else {
                continue;
            };
            let ty = FileType::from_raw_mode(st.st_mode);
            if ty == FileType::Symlink {
                continue;
            }
            path.push(&name);
            if st.st_uid != self.uid || st.st_gid != self.gid {
                self.note(path);
            }
            if ty == FileType::Directory && st.st_dev == self.dev {
                match open_child(dir, &name, OFlags::RDONLY | OFlags::DIRECTORY) {
                    Ok(fd) => self.visit(fd.as_fd(), path, depth + 1)?,
                    Err(e) if e.raw_os_error() == Some(libc::EACCES) => {}
                    Err(e) => {
                        path.pop();
                        return Err(e);
                    }
                }
            }
            path.pop();
        }
        Ok(())
    }
}
