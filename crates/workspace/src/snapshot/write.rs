//! Writing a snapshot out: a directory, or a tar archive.
//!
//! Files are read from the workspace through no link (`openat2` beneath the workspace, as
//! the walk) and must still be the file the walk found. The output must lie outside the
//! workspace and hold nothing yet: nothing is overwritten, and a write that fails removes
//! what it wrote.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use policy::is_within;
use rustix::fs::{AtFlags, Mode, OFlags, Timespec, Timestamps};

use super::{Content, Entry, Snapshot, SnapshotError};
use crate::beneath::Root;

/// Mode bits written out: permissions only (no setuid, setgid or sticky bit).
const PERMISSIONS: u32 = 0o777;

impl Snapshot {
    /// Writes the snapshot into the directory `out`, which must not exist (its parent must)
    /// or be empty, and must lie outside the workspace. Modes are kept without setuid,
    /// setgid and sticky bits, and modification times are kept; owners are the caller's.
    ///
    /// # Errors
    ///
    /// A refusal ([`SnapshotError::OutputInsideWorkspace`], [`SnapshotError::OutputNotEmpty`])
    /// writes nothing; a failure on the way ([`SnapshotError::Io`],
    /// [`SnapshotError::Changed`]) removes what was written.
    pub fn write_dir(&self, out: &Path) -> Result<(), SnapshotError> {
        let abs = self.checked_out(out)?;
        let created = match std::fs::symlink_metadata(&abs) {
            Ok(m) if m.is_dir() => {
                let mut listing =
                    std::fs::read_dir(&abs).map_err(SnapshotError::io("list", &abs))?;
                if listing.next().is_some() {
                    return Err(SnapshotError::OutputNotEmpty(abs));
                }
                false
            }
            Ok(_) => return Err(SnapshotError::OutputNotEmpty(abs)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&abs)
                    .map_err(SnapshotError::io("create", &abs))?;
                true
            }
            Err(e) => return Err(SnapshotError::io("inspect", &abs)(e)),
        };
        let result = Root::open(&abs)
            .map_err(SnapshotError::io("open", &abs))
            .and_then(|dest| self.fill_dir(&dest, &abs));
        if result.is_err() {
            remove_written(&abs, created);
        }
        result
    }

    fn fill_dir(&self, dest: &Root, out: &Path) -> Result<(), SnapshotError> {
        let src =
            Root::open(&self.workspace).map_err(SnapshotError::io("open", &self.workspace))?;
        let target = |e: &Entry| out.join(&e.path);
        for e in &self.entries {
            let (parent, name) = split(&e.path);
            let dir = dest
                .dir(parent)
                .map_err(SnapshotError::io("open", out.join(parent)))?;
            let failed = |what| SnapshotError::io(what, target(e));
            match &e.content {
                Content::Dir => rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o700))
                    .map_err(|x| failed("create")(errno(x)))?,
                Content::File => {
                    let mut from = self.open_source(&src, e)?;
                    let mut to = create(&dir, name).map_err(failed("create"))?;
                    io::copy(&mut from, &mut to).map_err(failed("write"))?;
                    finish_file(&to, e).map_err(failed("set the mode of"))?;
                }
                Content::GitConfig(bytes) => {
                    let mut to = create(&dir, name).map_err(failed("create"))?;
                    to.write_all(bytes).map_err(failed("write"))?;
                    finish_file(&to, e).map_err(failed("set the mode of"))?;
                }
                Content::Symlink(link) => {
                    rustix::fs::symlinkat(link.as_path(), &dir, name)
                        .map_err(|x| failed("create the link")(errno(x)))?;
                    let _ = rustix::fs::utimensat(
                        &dir,
                        name,
                        &times(e.mtime),
                        AtFlags::SYMLINK_NOFOLLOW,
                    );
                }
            }
        }
        // Directories last, deepest first: a read-only one must not stop its contents.
        for e in self.entries.iter().rev() {
            if e.content == Content::Dir {
                let fd = dest
                    .open_beneath(&e.path, OFlags::RDONLY | OFlags::DIRECTORY)
                    .map_err(SnapshotError::io("open", target(e)))?;
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(e.mode & PERMISSIONS))
                    .and_then(|()| rustix::fs::futimens(&fd, &times(e.mtime)))
                    .map_err(|x| SnapshotError::io("set the mode of", target(e))(errno(x)))?;
            }
        }
        Ok(())
    }

    /// Writes the snapshot as a tar archive at `out`, which must not exist and must lie
    /// outside the workspace. Entries in path order, parents first; modes without setuid,
    /// setgid and sticky bits; owner and group 0 without names; modification times kept:
    /// the same workspace gives the same archive.
    ///
    /// # Errors
    ///
    /// As [`Snapshot::write_dir`]; [`SnapshotError::OutputExists`] when `out` exists.
    pub fn write_tar(&self, out: &Path) -> Result<(), SnapshotError> {
        let abs = self.checked_out(out)?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&abs)
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => SnapshotError::OutputExists(abs.clone()),
                _ => SnapshotError::io("create", &abs)(e),
            })?;
        let result = self.fill_tar(io::BufWriter::new(file));
        if result.is_err() {
            let _ = std::fs::remove_file(&abs);
        }
        result
    }

    fn fill_tar(&self, out: io::BufWriter<File>) -> Result<(), SnapshotError> {
        let src =
            Root::open(&self.workspace).map_err(SnapshotError::io("open", &self.workspace))?;
        let mut tar = tar::Builder::new(out);
        for e in &self.entries {
            let failed = |what| SnapshotError::io(what, self.workspace.join(&e.path));
            let mut h = tar::Header::new_gnu();
            h.set_mode(e.mode & PERMISSIONS);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(u64::try_from(e.mtime).unwrap_or(0));
            match &e.content {
                Content::Dir => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_size(0);
                    tar.append_data(&mut h, &e.path, io::empty())
                        .map_err(failed("archive"))?;
                }
                Content::File => {
                    let from = self.open_source(&src, e)?;
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(e.size);
                    let exact = Exact {
                        inner: from.take(e.size),
                        left: e.size,
                    };
                    tar.append_data(&mut h, &e.path, exact)
                        .map_err(failed("archive"))?;
                }
                Content::GitConfig(bytes) => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(bytes.len() as u64);
                    tar.append_data(&mut h, &e.path, bytes.as_slice())
                        .map_err(failed("archive"))?;
                }
                Content::Symlink(link) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_size(0);
                    tar.append_link(&mut h, &e.path, link)
                        .map_err(failed("archive"))?;
                }
            }
        }
        let out = tar
            .into_inner()
            .map_err(SnapshotError::io("finish", PathBuf::from("the archive")))?;
        out.into_inner()
            .map_err(|e| SnapshotError::io("write", PathBuf::from("the archive"))(e.into_error()))?
            .sync_all()
            .map_err(SnapshotError::io("write", PathBuf::from("the archive")))
    }

    /// `out` made absolute (its parent canonical), refused inside the workspace.
    fn checked_out(&self, out: &Path) -> Result<PathBuf, SnapshotError> {
        let name = out.file_name().ok_or_else(|| SnapshotError::Io {
            what: "write to",
            path: out.to_path_buf(),
            cause: io::Error::other("the path names no file"),
        })?;
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let parent = std::fs::canonicalize(parent).map_err(SnapshotError::io("find", parent))?;
        let abs = parent.join(name);
        if is_within(&abs, &self.workspace) {
            return Err(SnapshotError::OutputInsideWorkspace {
                out: abs,
                workspace: self.workspace.clone(),
            });
        }
        Ok(abs)
    }

    /// The workspace file of `e`, opened through no link, still the file the walk found.
    fn open_source(&self, src: &Root, e: &Entry) -> Result<File, SnapshotError> {
        let path = self.workspace.join(&e.path);
        let fd = src
            .open_beneath(&e.path, OFlags::RDONLY | OFlags::NONBLOCK)
            .map_err(SnapshotError::io("open", &path))?;
        let st = rustix::fs::fstat(&fd).map_err(|x| SnapshotError::io("stat", &path)(errno(x)))?;
        #[allow(clippy::unnecessary_cast)]
        let same = (st.st_dev as u64, st.st_ino as u64) == e.id
            && rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile;
        if !same {
            return Err(SnapshotError::Changed(path));
        }
        Ok(File::from(fd))
    }
}

/// Reads exactly `left` bytes from `inner`: a file that shrank since the walk is an error,
/// not a short entry that would corrupt the archive.
struct Exact<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && self.left > 0 && !buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file shrank while the snapshot was written",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

fn split(rel: &Path) -> (&Path, &std::ffi::OsStr) {
    let parent = rel.parent().unwrap_or(Path::new(""));
    (parent, rel.file_name().unwrap_or_default())
}

fn errno(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

fn times(mtime: i64) -> Timestamps {
    let t = Timespec {
        tv_sec: mtime,
        tv_nsec: 0,
    };
    Timestamps {
        last_access: t,
        last_modification: t,
    }
}

/// A new file `name` in `dir` (never an existing one, never through a link).
fn create(dir: &OwnedFd, name: &std::ffi::OsStr) -> io::Result<File> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map(File::from)
    .map_err(errno)
}

fn finish_file(file: &File, e: &Entry) -> io::Result<()> {
    rustix::fs::fchmod(file.as_fd(), Mode::from_raw_mode(e.mode & PERMISSIONS))
        .and_then(|()| rustix::fs::futimens(file.as_fd(), &times(e.mtime)))
        .map_err(errno)
}

/// Removes what a failed write left: the directory it made, or what it put in the empty
/// one it was given.
fn remove_written(out: &Path, created: bool) {
    // Read-only directories written so far must not stop the removal.
    fn writable(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    writable(&e.path());
                }
            }
        }
    }
    writable(out);
    if created {
        let _ = std::fs::remove_dir_all(out);
    } else if let Ok(entries) = std::fs::read_dir(out) {
        for e in entries.flatten() {
            let p = e.path();
            let _ = if e.file_type().is_ok_and(|t| t.is_dir()) {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
        }
    }
}
