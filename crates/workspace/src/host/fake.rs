//! A host for unit tests: regular files with their text, and the directories above them (no
//! links, every entry root's and readable).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{Entry, HostView, Kind};

/// Text files by path; a directory is any path above one.
#[derive(Debug, Default)]
pub(crate) struct TextFiles(pub(crate) BTreeMap<PathBuf, String>);

impl TextFiles {
    /// A host holding these files.
    pub(crate) fn new(files: impl IntoIterator<Item = (PathBuf, String)>) -> TextFiles {
        TextFiles(files.into_iter().collect())
    }
}

impl HostView for TextFiles {
    fn stat(&self, path: &Path) -> Option<Entry> {
        let kind = self.lstat_kind(path)?;
        Some(Entry {
            kind,
            uid: 0,
            gid: 0,
            mode: 0o644,
            dev: 1,
            ino: 1,
            links: 1,
        })
    }
    fn lstat_kind(&self, path: &Path) -> Option<Kind> {
        if self.0.contains_key(path) {
            Some(Kind::File)
        } else if self.0.keys().any(|p| p.starts_with(path)) {
            Some(Kind::Dir)
        } else {
            None
        }
    }
    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        self.lstat_kind(path).map(|_| path.to_path_buf())
    }
    fn list_dir(&self, _path: &Path) -> Vec<(OsString, Kind)> {
        Vec::new()
    }
    fn read_small(&self, path: &Path) -> Option<String> {
        self.0.get(path).cloned()
    }
}
