//! Files an unprivileged review run cannot modify.
//!
//! An overlay mounted in a user namespace copies a file up keeping its owner and group, and
//! fails (`EOVERFLOW`) for ids the namespace does not map; an unprivileged caller's namespace
//! maps only the caller's own. So every file and directory of the workspace whose uid or gid
//! is not the caller's cannot be changed by the run (nor anything created in such a
//! directory).

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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
    not_copyable_cached(workspace, uid, gid, limit, None)
}

/// [`not_copyable`] remembering, per directory, what it found in a cache file under
/// `cache_dir` (the change store): a directory whose inode and ctime are those it had, with
/// the ctime settled ([`crate::SETTLED`]) before it was seen, is not listed again (adding,
/// removing or renaming a name changes its ctime). So a check of an unchanged 100,000-file
/// workspace costs a `stat` per directory, not per file. What it cannot see: a file given to
/// another owner in place (`chown`, which changes only the file's ctime) is named once its
/// directory changes. The cache only spares work; a missing or unreadable one is rebuilt.
pub fn not_copyable_cached(
    workspace: &Path,
    uid: u32,
    gid: u32,
    limit: usize,
    cache_dir: Option<&Path>,
) -> io::Result<(usize, Vec<PathBuf>)> {
    check(workspace, (uid, gid), limit, cache_dir, crate::SETTLED)
}

/// [`not_copyable_cached`] with the settling time given (tests use none).
pub(crate) fn check(
    workspace: &Path,
    (uid, gid): (u32, u32),
    limit: usize,
    cache_dir: Option<&Path>,
    settle: std::time::Duration,
) -> io::Result<(usize, Vec<PathBuf>)> {
    let root = rustix::fs::open(
        workspace,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno_io)?;
    let st = rustix::fs::fstat(&root).map_err(errno_io)?;
    let cache_file = cache_dir.map(|d| {
        let mut h = Sha256::new();
        h.update(workspace.as_os_str().as_bytes());
        let name = format!("{}-{uid}-{gid}.json", super::read::hex(&h.finalize()));
        d.join(".owners").join(name)
    });
    let old = cache_file.as_deref().map(Cache::load).unwrap_or_default();
    let settled_before = std::time::SystemTime::now()
        .checked_sub(settle)
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let mut found = Found {
        uid,
        gid,
        dev: st.st_dev,
        limit,
        count: 0,
        paths: Vec::new(),
        old,
        new: Cache::default(),
        settled_before,
    };
    if st.st_uid != uid || st.st_gid != gid {
        found.note(workspace);
    }
    let mut rel = workspace.to_path_buf();
    found.visit(root.as_fd(), &mut rel, 0)?;
    if let Some(file) = &cache_file {
        found.new.store(file);
    }
    Ok((found.count, found.paths))
}

/// What one directory held when last listed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Seen {
    ino: u64,
    ctime_ns: u128,
    /// Subdirectories on this filesystem to go into (names as bytes).
    subdirs: Vec<Vec<u8>>,
    /// Entries (files and directories) whose owner or group is not the caller's.
    foreign: Vec<Vec<u8>>,
}

/// The directories of one workspace, by path (bytes).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Cache {
    dirs: Vec<(Vec<u8>, Seen)>,
    #[serde(skip)]
    by_path: HashMap<Vec<u8>, Seen>,
}

impl Cache {
    fn load(file: &Path) -> Cache {
        let Some(mut c) = std::fs::read(file)
            .ok()
            .and_then(|b| serde_json::from_slice::<Cache>(&b).ok())
        else {
            return Cache::default();
        };
        c.by_path = std::mem::take(&mut c.dirs).into_iter().collect();
        c
    }

    /// Written as a new file renamed into place (best effort: a cache).
    fn store(mut self, file: &Path) {
        self.dirs = self.by_path.drain().collect();
        let (Some(dir), Ok(json)) = (file.parent(), serde_json::to_vec(&self)) else {
            return;
        };
        let _ = std::fs::create_dir(dir);
        let tmp = dir.join(format!(".tmp-{}", std::process::id()));
        if std::fs::write(&tmp, json).is_ok() && std::fs::rename(&tmp, file).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

fn ctime_ns(st: &rustix::fs::Stat) -> u128 {
    u128::try_from(st.st_ctime).unwrap_or(0) * 1_000_000_000 + st.st_ctime_nsec as u128
}

struct Found {
    uid: u32,
    gid: u32,
    dev: u64,
    limit: usize,
    count: usize,
    paths: Vec<PathBuf>,
    old: Cache,
    new: Cache,
    settled_before: u128,
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
        let st = rustix::fs::fstat(dir).map_err(errno_io)?;
        let key = path.as_os_str().as_bytes().to_vec();
        let (ino, ctime) = (st.st_ino, ctime_ns(&st));
        let cached = self
            .old
            .by_path
            .get(&key)
            .filter(|s| s.ino == ino && s.ctime_ns == ctime)
            .cloned();
        if let Some(seen) = cached {
            for name in &seen.foreign {
                path.push(OsString::from_vec(name.clone()));
                self.note(path);
                path.pop();
            }
            for name in &seen.subdirs {
                let name = OsString::from_vec(name.clone());
                path.push(&name);
                if let Ok(fd) = open_child(dir, &name, OFlags::RDONLY | OFlags::DIRECTORY) {
                    self.visit(fd.as_fd(), path, depth + 1)?;
                }
                path.pop();
            }
            self.new.by_path.insert(key, seen);
            return Ok(());
        }
        let mut seen = Seen {
            ino,
            ctime_ns: ctime,
            ..Seen::default()
        };
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
                seen.foreign.push(name.as_bytes().to_vec());
            }
            if ty == FileType::Directory && st.st_dev == self.dev {
                seen.subdirs.push(name.as_bytes().to_vec());
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
        // Only a directory whose last change had settled before this look can be trusted
        // unchanged by its ctime next time.
        if ctime < self.settled_before {
            self.new.by_path.insert(key, seen);
        }
        Ok(())
    }
}
