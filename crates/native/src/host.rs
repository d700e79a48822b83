//! What the planner may ask about the host: file kinds, owners, directory listings. A trait so
//! plans can be built (and tested) against a fake host; [`RealHost`] asks the kernel.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

/// Metadata of an existing path (after following symlinks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    /// Device and inode: which file this is, whatever its name.
    pub dev: u64,
    pub ino: u64,
    /// Names the file has (hard links).
    pub links: u64,
}

pub trait HostView {
    /// Metadata following symlinks; `None` if the path does not exist or cannot be reached.
    fn stat(&self, path: &Path) -> Option<Entry>;
    /// The kind of the path itself, not following a final symlink.
    fn lstat_kind(&self, path: &Path) -> Option<Kind>;
    /// Absolute path with every symlink resolved.
    fn canonicalize(&self, path: &Path) -> Option<PathBuf>;
    /// Entries of a directory with their own kinds (symlinks not followed), sorted by name.
    fn list_dir(&self, path: &Path) -> Vec<(OsString, Kind)>;
    /// The first KiB of a small text file (used for `.git` files).
    fn read_small(&self, path: &Path) -> Option<String>;
    /// What this process may do with cgroups (none by default: a fake host has none).
    fn cgroups(&self) -> crate::cgroup::CgroupFacts {
        crate::cgroup::CgroupFacts::default()
    }
}

fn kind_of(ft: std::fs::FileType) -> Kind {
    if ft.is_dir() {
        Kind::Dir
    } else if ft.is_file() {
        Kind::File
    } else if ft.is_symlink() {
        Kind::Symlink
    } else {
        Kind::Other
    }
}

/// The real machine.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealHost;

impl HostView for RealHost {
    fn stat(&self, path: &Path) -> Option<Entry> {
        let m = std::fs::metadata(path).ok()?;
        Some(Entry {
            kind: kind_of(m.file_type()),
            uid: m.uid(),
            gid: m.gid(),
            mode: m.mode(),
            dev: m.dev(),
            ino: m.ino(),
            links: m.nlink(),
        })
    }

    fn lstat_kind(&self, path: &Path) -> Option<Kind> {
        std::fs::symlink_metadata(path)
            .ok()
            .map(|m| kind_of(m.file_type()))
    }

    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        std::fs::canonicalize(path).ok()
    }

    fn list_dir(&self, path: &Path) -> Vec<(OsString, Kind)> {
        let mut out: Vec<(OsString, Kind)> = match std::fs::read_dir(path) {
            Ok(rd) => rd
                .filter_map(Result::ok)
                .filter_map(|e| Some((e.file_name(), kind_of(e.file_type().ok()?))))
                .collect(),
            Err(_) => Vec::new(),
        };
        out.sort();
        out
    }

    fn read_small(&self, path: &Path) -> Option<String> {
        use std::io::Read;
        let mut buf = Vec::new();
        std::fs::File::open(path)
            .ok()?
            .take(1024)
            .read_to_end(&mut buf)
            .ok()?;
        String::from_utf8(buf).ok()
    }

    fn cgroups(&self) -> crate::cgroup::CgroupFacts {
        crate::cgroup::CgroupFacts::probe()
    }
}
