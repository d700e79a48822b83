//! A host for unit tests: regular files with their text, and the directories above them (no
//! links, every entry root's and readable).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{DirStamp, Entry, HostView, Kind};

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

/// A tree of directories and files in which every change moves the ctime of the directory
/// changed, as the kernel's do, and that exchanges two directories (`RENAME_EXCHANGE`) right
/// after the walk lists a given one: another run's command racing the planner's walk, at
/// exactly the worst moment.
#[derive(Debug)]
pub(crate) struct Swapping {
    /// Path to (kind, inode, ctime in nanoseconds).
    nodes: RefCell<BTreeMap<PathBuf, (Kind, u64, i64)>>,
    next_ino: Cell<u64>,
    clock: Cell<i64>,
    /// After a listing of the first path, the other two are exchanged, as many more times as
    /// the count says.
    pub(crate) swaps: RefCell<Vec<(PathBuf, PathBuf, PathBuf, usize)>>,
    /// After a listing of the first path, the second is renamed to the third, once.
    pub(crate) moves: RefCell<Vec<(PathBuf, PathBuf, PathBuf)>>,
    /// When the first path is resolved (`canonicalize`), the other two are exchanged first, as
    /// many more times as the count says: a match moved after the walk, before the scan
    /// masks it.
    pub(crate) on_resolve: RefCell<Vec<(PathBuf, PathBuf, PathBuf, usize)>>,
    /// After a stamp of the first path (a walk taking it from the walk cache, or a re-check),
    /// the other two are exchanged, as many more times as the count says.
    pub(crate) after_stamp: RefCell<Vec<(PathBuf, PathBuf, PathBuf, usize)>>,
    /// After a stamp of the first path, the file at the second is made (before any exchange
    /// due then), once.
    pub(crate) add_after_stamp: RefCell<Vec<(PathBuf, PathBuf)>>,
    /// How many directory stamps were asked for.
    pub(crate) stamped: Cell<usize>,
    /// Exchanges leave the ctimes as they were (a change in the same tick of a coarse clock
    /// as the stamp: what a kernel without multigrain ctimes can do).
    pub(crate) keep_ctime: bool,
    /// What [`HostView::fine_ctime`] answers.
    pub(crate) fine: bool,
}

impl Swapping {
    /// A tree holding `dirs` and `files` (and the directories above them), its ctimes from
    /// `ctime_ns` on (one microsecond apart).
    pub(crate) fn new(dirs: &[&str], files: &[&str], ctime_ns: i64) -> Swapping {
        let host = Swapping {
            nodes: RefCell::new(BTreeMap::new()),
            next_ino: Cell::new(2),
            clock: Cell::new(ctime_ns),
            swaps: RefCell::new(Vec::new()),
            moves: RefCell::new(Vec::new()),
            on_resolve: RefCell::new(Vec::new()),
            after_stamp: RefCell::new(Vec::new()),
            add_after_stamp: RefCell::new(Vec::new()),
            stamped: Cell::new(0),
            keep_ctime: false,
            fine: true,
        };
        for (list, kind) in [(dirs, Kind::Dir), (files, Kind::File)] {
            for p in list {
                let p = Path::new(p);
                for a in p.ancestors().skip(1) {
                    host.add(a, Kind::Dir);
                }
                host.add(p, kind);
            }
        }
        host
    }

    fn tick(&self) -> i64 {
        self.clock.set(self.clock.get() + 1_000);
        self.clock.get()
    }

    pub(crate) fn add(&self, path: &Path, kind: Kind) {
        if self.nodes.borrow().contains_key(path) {
            return;
        }
        let ino = self.next_ino.get();
        self.next_ino.set(ino + 1);
        let now = self.tick();
        self.nodes
            .borrow_mut()
            .insert(path.to_path_buf(), (kind, ino, now));
        if let Some(parent) = path.parent() {
            self.touch(parent);
        }
    }

    fn touch(&self, dir: &Path) {
        if self.keep_ctime {
            return;
        }
        let now = self.tick();
        if let Some(n) = self.nodes.borrow_mut().get_mut(dir) {
            n.2 = now;
        }
    }

    /// Renames `a` (and everything below it) to `b`, which does not exist.
    fn rename(&self, a: &Path, b: &Path) {
        let old = std::mem::take(&mut *self.nodes.borrow_mut());
        let moved = old.into_iter().map(|(p, n)| match p.strip_prefix(a) {
            Ok(rest) if rest.as_os_str().is_empty() => (b.to_path_buf(), n),
            Ok(rest) => (b.join(rest), n),
            Err(_) => (p, n),
        });
        *self.nodes.borrow_mut() = moved.collect();
        for p in [a, b] {
            if let Some(parent) = p.parent() {
                self.touch(parent);
            }
        }
    }

    /// The exchanges of `list` due at `path` (each counted down), made.
    fn exchange_due(&self, list: &RefCell<Vec<(PathBuf, PathBuf, PathBuf, usize)>>, path: &Path) {
        let due: Vec<(PathBuf, PathBuf)> = (list.borrow_mut().iter_mut())
            .filter(|(at, _, _, left)| at == path && *left > 0)
            .map(|(_, a, b, left)| {
                *left -= 1;
                (a.clone(), b.clone())
            })
            .collect();
        for (a, b) in due {
            self.exchange(&a, &b);
        }
    }

    /// Exchanges `a` and `b` and everything below them.
    pub(crate) fn exchange(&self, a: &Path, b: &Path) {
        let old = std::mem::take(&mut *self.nodes.borrow_mut());
        let moved = old.into_iter().map(|(p, n)| {
            let p = match (p.strip_prefix(a), p.strip_prefix(b)) {
                (Ok(rest), _) => b.join(rest),
                (_, Ok(rest)) => a.join(rest),
                _ => p,
            };
            (p, n)
        });
        *self.nodes.borrow_mut() = moved.collect();
        // The kernel's rename sets the ctime of what it moves, and of the directories it
        // moved in and out of.
        for p in [a, b] {
            self.touch(p);
            if let Some(parent) = p.parent() {
                self.touch(parent);
            }
        }
    }
}

impl HostView for Swapping {
    fn stat(&self, path: &Path) -> Option<Entry> {
        let (kind, ino, _) = *self.nodes.borrow().get(path)?;
        Some(Entry {
            kind,
            uid: 0,
            gid: 0,
            mode: 0o644,
            dev: 1,
            ino,
            links: 1,
        })
    }
    fn lstat_kind(&self, path: &Path) -> Option<Kind> {
        self.nodes.borrow().get(path).map(|n| n.0)
    }
    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        self.exchange_due(&self.on_resolve, path);
        self.lstat_kind(path).map(|_| path.to_path_buf())
    }
    fn list_dir(&self, path: &Path) -> Vec<(OsString, Kind)> {
        let entries = (self.nodes.borrow().iter())
            .filter(|(p, _)| p.parent() == Some(path))
            .filter_map(|(p, n)| Some((p.file_name()?.to_os_string(), n.0)))
            .collect();
        self.exchange_due(&self.swaps, path);
        let moves: Vec<(PathBuf, PathBuf, PathBuf)> = std::mem::take(&mut *self.moves.borrow_mut());
        for (after, a, b) in moves {
            if after == path {
                self.rename(&a, &b);
            } else {
                self.moves.borrow_mut().push((after, a, b));
            }
        }
        entries
    }
    fn read_small(&self, _path: &Path) -> Option<String> {
        None
    }
    fn dir_stamp(&self, path: &Path) -> Option<DirStamp> {
        self.stamped.set(self.stamped.get() + 1);
        let stamp = (self.nodes.borrow().get(path).copied()).and_then(|(kind, ino, ctime)| {
            (kind == Kind::Dir).then_some(DirStamp {
                dev: 1,
                ino,
                ctime: ctime.div_euclid(1_000_000_000),
                ctime_nsec: ctime.rem_euclid(1_000_000_000),
            })
        });
        let adds: Vec<(PathBuf, PathBuf)> = std::mem::take(&mut *self.add_after_stamp.borrow_mut());
        for (at, file) in adds {
            if at == path {
                self.add(&file, Kind::File);
            } else {
                self.add_after_stamp.borrow_mut().push((at, file));
            }
        }
        self.exchange_due(&self.after_stamp, path);
        stamp
    }
    fn local_ctime(&self, _path: &Path) -> bool {
        true
    }
    fn fine_ctime(&self, _path: &Path) -> bool {
        self.fine
    }
}
