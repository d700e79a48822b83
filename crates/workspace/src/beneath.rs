//! File operations of the supervisor inside a writable root, relative to a descriptor of the
//! root and never through a symbolic link.
//!
//! The sweep moves and rewrites files the sandbox made. The run's own sandbox is dead by then
//! (its pid namespace is gone), but another run in the same workspace may be alive and could
//! swap a directory on the way for a link to elsewhere between the walk and the move. So
//! every path below a root is opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`
//! (a link anywhere fails with `ELOOP`, a `..` out of the root with `EXDEV`), directories are
//! created one component at a time with `mkdirat` + such an open, and moves are `renameat`
//! between those descriptors with `RENAME_NOREPLACE`.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::{Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

fn errno_io(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

fn resolve() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// A writable root, held open.
pub(crate) struct Root(OwnedFd);

impl Root {
    pub(crate) fn open(path: &Path) -> io::Result<Root> {
        rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map(Root)
        .map_err(errno_io)
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }

    /// Opens `rel` (relative to the root) with `flags`, through no link.
    pub(crate) fn open_beneath(&self, rel: &Path, flags: OFlags) -> io::Result<OwnedFd> {
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        rustix::fs::openat2(
            &self.0,
            rel,
            flags | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
            resolve(),
        )
        .map_err(errno_io)
    }

    /// The directory `rel`, for use as the base of `*at` calls.
    pub(crate) fn dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        self.open_beneath(rel, OFlags::PATH | OFlags::DIRECTORY)
    }

    /// Creates the directories of `rel` that are missing (mode 0777 less the umask, as
    /// `create_dir_all`) and opens the last.
    pub(crate) fn create_dirs(&self, rel: &Path) -> io::Result<OwnedFd> {
        let mut cur = self.dir(Path::new("."))?;
        for c in rel.components() {
            let Component::Normal(name) = c else {
                return Err(io::Error::other(format!(
                    "{} is not a plain relative path",
                    rel.display()
                )));
            };
            match rustix::fs::mkdirat(&cur, name, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(errno_io(e)),
            }
            cur = rustix::fs::openat2(
                &cur,
                name,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
                resolve(),
            )
            .map_err(errno_io)?;
        }
        Ok(cur)
    }
}

/// Moves `from_dir/from` to `to_dir/to`, failing if `to` exists (never replacing anything).
pub(crate) fn move_no_replace(
    from_dir: BorrowedFd<'_>,
    from: &OsStr,
    to_dir: BorrowedFd<'_>,
    to: &OsStr,
) -> io::Result<()> {
    rustix::fs::renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE).map_err(errno_io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_on_the_way_fail_and_nothing_is_created_beyond_them() {
        let t = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(d.join("ws/.stockade")).unwrap();
        std::fs::create_dir_all(d.join("outside")).unwrap();
        std::os::unix::fs::symlink(d.join("outside"), d.join("ws/.stockade/quarantine")).unwrap();
        let root = Root::open(&d.join("ws")).unwrap();
        let err = root
            .create_dirs(Path::new(".stockade/quarantine/run/x"))
            .unwrap_err();
        assert!(
            matches!(err.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)),
            "{err}"
        );
        assert!(std::fs::read_dir(d.join("outside"))
            .unwrap()
            .next()
            .is_none());
        assert!(root.dir(Path::new(".stockade/quarantine")).is_err());
        assert!(root.dir(Path::new("../outside")).is_err());
        root.create_dirs(Path::new("a/b")).unwrap();
        assert!(d.join("ws/a/b").is_dir());
    }
}
