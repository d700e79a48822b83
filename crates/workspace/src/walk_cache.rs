//! The walk cache: what the planner's walk listed in an earlier run, so that an unchanged
//! workspace costs a `stat` per directory instead of a listing (issue 32, item 1).
//!
//! Only NAME LISTINGS are remembered: per settled directory (see [`crate::DirStamps`]) its
//! stamp (device, inode, ctime), the subdirectories the walk goes into and the entries that
//! may concern the walk (`DenyGlobs::may_concern`) with their kinds. A directory is
//! taken from the cache only if its stamp is the same now: creating, removing or renaming an
//! entry moves the directory's ctime, nobody without `CAP_SYS_TIME` can set a ctime back, and a
//! mount placed on it (or a directory put in its place) changes its device and inode. Every
//! check that depends on a file's content, links or owner (git configs and HEADs,
//! `accepted_by_git`, link targets, masked files' link counts) runs again on the remembered
//! entries every run: such changes move the file's ctime, not its directory's.
//!
//! A cache is keyed (`key`) by everything the listing was filtered with: the binary, the
//! caller's uid, the writable roots, the walk's bases and the deny globs. A file holds the
//! sections of up to [`KEPT`] keys (presets differ), the newest first.
//!
//! It lives in the caller's run journal directory (`<state>/stockade/journal`), which every
//! run masks or keeps read-only and whose ancestors it pins, and is not used at all when that
//! directory lies in one of this run's writable roots (see `stockade`'s `resolve`). It is read
//! as untrusted data: a regular file of the caller's, bounded in size, a versioned format,
//! and any error in it means the run walks. It is written as a new file renamed into place
//! beneath the directory's descriptor, so concurrent runs never see half of one.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::fd::OwnedFd;
use sha2::{Digest, Sha256};

use crate::host::{DirStamp, Kind};
use crate::walk::{DirStamps, Prior, SettledDir};

/// The format's magic and version: any other is not read.
const MAGIC: &[u8; 8] = b"STKWALK\x01";
const END: &[u8; 8] = b"STKWEND\x01";
/// A larger file is not one of ours.
const MAX_FILE: u64 = 256 << 20;
/// How many keys (presets, policies) one workspace's file remembers.
pub const KEPT: usize = 4;

/// One key's listings.
#[derive(Debug, Clone)]
struct Section {
    key: [u8; 32],
    prior: Prior,
}

/// The walk cache of one workspace and caller, as loaded (empty when there is none or it
/// cannot be trusted).
#[derive(Debug, Default)]
pub struct WalkCache {
    /// What identifies this binary (a cache written by another is not read).
    binary: String,
    uid: u32,
    sections: Vec<Section>,
}

/// The cache key of a walk: everything its listing was filtered with.
pub(crate) fn key(
    binary: &str,
    uid: u32,
    roots: &[PathBuf],
    bases: &[PathBuf],
    read_globs: &[&policy::Glob],
    write_globs: &[&policy::Glob],
) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut put = |tag: &[u8], b: &[u8]| {
        h.update(tag);
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    put(b"format", MAGIC);
    put(b"binary", binary.as_bytes());
    put(b"uid", &uid.to_le_bytes());
    for r in roots {
        put(b"root", r.as_os_str().as_bytes());
    }
    for b in bases {
        put(b"base", b.as_os_str().as_bytes());
    }
    for g in read_globs {
        put(b"read", g.pattern().as_bytes());
    }
    for g in write_globs {
        put(b"write", g.pattern().as_bytes());
    }
    h.finalize().into()
}

/// The directory of the walk caches, in the journal directory. Apart from the journals: every
/// run lists the journal directory for journals to recover (`stockade::journal::recover`),
/// and a cache there for every workspace ever run in made that listing grow with them (384
/// caches cost about 0.2 ms of every run, mostly the kernel's hashing of the names).
pub const DIR: &str = "walk";

/// The file name of a workspace's cache in [`DIR`] (and, before it, in the journal directory
/// itself).
pub fn file_name(workspace: &Path, uid: u32) -> String {
    let digest = Sha256::digest(workspace.as_os_str().as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("walk-{hex}-{uid}.cache")
}

impl WalkCache {
    /// No cache: every directory is listed (and what is listed can be stored).
    pub fn empty(binary: &str, uid: u32) -> WalkCache {
        WalkCache {
            binary: binary.to_string(),
            uid,
            sections: Vec::new(),
        }
    }

    /// The cache of `workspace` in `dir` (the journal directory): read only if it is a
    /// regular file owned by `uid`, not a link, within the size bound, and parses whole.
    /// Anything else gives an empty cache (the run walks).
    pub fn load(dir: &Path, workspace: &Path, uid: u32, binary: &str) -> WalkCache {
        let mut cache = WalkCache::empty(binary, uid);
        let data = open_dir(dir)
            .and_then(|journal| cache_dir(&journal, uid, false))
            .and_then(|caches| read_file(&caches, &file_name(workspace, uid), uid));
        if let Some(data) = data {
            if let Some(sections) = decode(&data) {
                cache.sections = sections;
            }
        }
        cache
    }

    pub(crate) fn binary(&self) -> &str {
        &self.binary
    }

    pub(crate) fn uid(&self) -> u32 {
        self.uid
    }

    /// The listings stored under `key`, taken out (the walk consumes them).
    pub(crate) fn take(&mut self, key: &[u8; 32]) -> Option<Prior> {
        let i = self.sections.iter().position(|s| &s.key == key)?;
        Some(self.sections.remove(i).prior)
    }

    /// Whether a walk recorded in `stamps` has anything worth writing: it listed and
    /// recorded a directory, or found no section for its key.
    pub fn worth_storing(stamps: &DirStamps) -> bool {
        stamps.key.is_some() && (stamps.recorded_listed > 0 || !stamps.had_prior)
    }

    /// Writes the listings `stamps` recorded (their section first, then up to [`KEPT`] - 1
    /// others this cache held) to `dir` as a new file renamed over the old one. Best effort:
    /// a cache that cannot be written only costs the next run a walk.
    pub fn store(&self, dir: &Path, workspace: &Path, stamps: &DirStamps) -> std::io::Result<()> {
        let Some(key) = stamps.key else {
            return Ok(());
        };
        let Some(taken_at) = stamps.taken_at else {
            return Ok(());
        };
        let mut out = Vec::with_capacity(64 + stamps.dirs.len() * 64);
        out.extend_from_slice(MAGIC);
        let others: Vec<&Section> = (self.sections.iter())
            .filter(|s| s.key != key)
            .take(KEPT - 1)
            .collect();
        put_u32(&mut out, 1 + others.len() as u32);
        encode_section(&mut out, &key, taken_at, stamps.dirs.iter());
        for s in others {
            encode_section(&mut out, &s.key, s.prior.taken_at, s.prior.dirs.iter());
        }
        out.extend_from_slice(END);
        let name = file_name(workspace, self.uid);
        let journal =
            open_dir(dir).ok_or_else(|| std::io::Error::other("cannot open the directory"))?;
        let caches = cache_dir(&journal, self.uid, true)
            .ok_or_else(|| std::io::Error::other(format!("no directory {DIR} of the caller's")))?;
        write_file(&caches, &name, &out)?;
        // The cache this workspace had where caches were kept before.
        let _ = rustix::fs::unlinkat(&journal, name.as_str(), rustix::fs::AtFlags::empty());
        Ok(())
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len() as u32);
    out.extend_from_slice(b);
}

fn ns_of(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn kind_byte(k: Kind) -> u8 {
    match k {
        Kind::Dir => 0,
        Kind::File => 1,
        Kind::Symlink => 2,
        Kind::Other => 3,
    }
}

fn encode_section<'a>(
    out: &mut Vec<u8>,
    key: &[u8; 32],
    taken_at: std::time::SystemTime,
    dirs: impl ExactSizeIterator<Item = (&'a OsString, &'a SettledDir)>,
) {
    out.extend_from_slice(key);
    out.extend_from_slice(&ns_of(taken_at).to_le_bytes());
    put_u32(out, dirs.len() as u32);
    for (path, d) in dirs {
        put_bytes(out, path.as_bytes());
        out.extend_from_slice(&d.stamp.dev.to_le_bytes());
        out.extend_from_slice(&d.stamp.ino.to_le_bytes());
        out.extend_from_slice(&d.stamp.ctime.to_le_bytes());
        out.extend_from_slice(&d.stamp.ctime_nsec.to_le_bytes());
        put_u32(out, d.subdirs.len() as u32);
        for s in &d.subdirs {
            put_bytes(out, s.as_bytes());
        }
        put_u32(out, d.found.len() as u32);
        for (name, kind) in &d.found {
            out.push(kind_byte(*kind));
            put_bytes(out, name.as_bytes());
        }
    }
}

/// Reads what [`encode_section`] wrote; `None` at the first thing out of place.
struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.data.len() {
            return None;
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }
    /// A count of items each at least `min` bytes long: never more than the data left holds
    /// (a forged count cannot make the reader allocate more than the file's size).
    fn count(&mut self, min: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n.checked_mul(min)? <= self.data.len()).then_some(n)
    }
    fn name(&mut self) -> Option<OsString> {
        let n = self.u32()? as usize;
        let b = self.bytes(n)?;
        // A name is one path component: no separator, not empty, not `.` or `..`.
        let ok = !b.is_empty() && b != b"." && b != b".." && !b.contains(&b'/') && !b.contains(&0);
        ok.then(|| OsString::from_vec(b.to_vec()))
    }
    fn path(&mut self) -> Option<PathBuf> {
        let n = self.u32()? as usize;
        let b = self.bytes(n)?;
        (b.first() == Some(&b'/') && !b.contains(&0))
            .then(|| PathBuf::from(OsString::from_vec(b.to_vec())))
    }
}

fn decode(data: &[u8]) -> Option<Vec<Section>> {
    let mut r = Reader { data };
    if r.bytes(MAGIC.len())? != MAGIC {
        return None;
    }
    let n = r.count(44)?;
    if n > KEPT {
        return None;
    }
    let mut sections = Vec::with_capacity(n);
    for _ in 0..n {
        let key: [u8; 32] = r.bytes(32)?.try_into().ok()?;
        let taken_at = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(r.u64()?);
        let ndirs = r.count(44)?;
        let mut dirs = HashMap::with_capacity(ndirs);
        for _ in 0..ndirs {
            let path = r.path()?;
            let stamp = DirStamp {
                dev: r.u64()?,
                ino: r.u64()?,
                ctime: r.i64()?,
                ctime_nsec: r.i64()?,
            };
            let nsub = r.count(5)?;
            let mut subdirs = Vec::with_capacity(nsub);
            for _ in 0..nsub {
                subdirs.push(r.name()?);
            }
            let nfound = r.count(6)?;
            let mut found = Vec::with_capacity(nfound);
            for _ in 0..nfound {
                let kind = match r.bytes(1)?[0] {
                    0 => Kind::Dir,
                    1 => Kind::File,
                    2 => Kind::Symlink,
                    3 => Kind::Other,
                    _ => return None,
                };
                found.push((r.name()?, kind));
            }
            let d = SettledDir {
                stamp,
                subdirs,
                found,
            };
            if dirs.insert(path.into_os_string(), d).is_some() {
                return None;
            }
        }
        sections.push(Section {
            key,
            prior: Prior { taken_at, dirs },
        });
    }
    (r.bytes(END.len())? == END && r.data.is_empty()).then_some(sections)
}

fn open_dir(dir: &Path) -> Option<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// [`DIR`] beneath `journal` (made first, mode 0700, when `make`), if it is a directory of
/// `uid`'s that nobody else may write (not a link: `O_NOFOLLOW`).
fn cache_dir(journal: &OwnedFd, uid: u32, make: bool) -> Option<OwnedFd> {
    use rustix::fs::{FileType, Mode, OFlags};
    if make {
        match rustix::fs::mkdirat(journal, DIR, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(_) => return None,
        }
    }
    let fd = rustix::fs::openat(
        journal,
        DIR,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    (FileType::from_raw_mode(st.st_mode) == FileType::Directory
        && st.st_uid == uid
        && st.st_mode & 0o022 == 0)
        .then_some(fd)
}

/// The file `name` in `dirfd`, if it is a regular file of `uid`'s within [`MAX_FILE`].
fn read_file(dirfd: &OwnedFd, name: &str, uid: u32) -> Option<Vec<u8>> {
    use rustix::fs::{FileType, Mode, OFlags};
    use std::io::Read;
    let fd = rustix::fs::openat(
        dirfd,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    let size = u64::try_from(st.st_size).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
        || st.st_uid != uid
        || size > MAX_FILE
    {
        return None;
    }
    let mut buf = Vec::with_capacity(usize::try_from(size).ok()?);
    std::fs::File::from(fd)
        .take(MAX_FILE)
        .read_to_end(&mut buf)
        .ok()?;
    Some(buf)
}

/// Writes `data` as `name` in `dirfd`: a new file (exclusive, mode 0600) renamed over it,
/// both beneath the directory's descriptor.
fn write_file(dirfd: &OwnedFd, name: &str, data: &[u8]) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Write;
    let io = |e: rustix::io::Errno| std::io::Error::from_raw_os_error(e.raw_os_error());
    let mut rand = [0u8; 8];
    let _ = getrandom::fill(&mut rand);
    let tmp = format!(
        ".{name}.{}.{:016x}.tmp",
        std::process::id(),
        u64::from_le_bytes(rand)
    );
    let fd = rustix::fs::openat(
        dirfd,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(io)?;
    let mut file = std::fs::File::from(fd);
    let written = file.write_all(data);
    drop(file);
    let renamed =
        written.and_then(|()| rustix::fs::renameat(dirfd, tmp.as_str(), dirfd, name).map_err(io));
    if renamed.is_err() {
        let _ = rustix::fs::unlinkat(dirfd, tmp.as_str(), rustix::fs::AtFlags::empty());
    }
    renamed
}

#[cfg(test)]
mod tests {
    //! The cache as data: a tree host double that records what it was asked, random trees and
    //! random changes between runs; the cached walk's findings must be a full walk's.
    use super::*;
    use crate::host::{Entry, HostView, RealHost};
    use crate::walk::Matches;
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeMap;

    #[derive(Debug, Clone)]
    struct Node {
        kind: Kind,
        dev: u64,
        ino: u64,
        ctime: i64,
        /// Names of a directory's entries.
        children: BTreeMap<OsString, PathBuf>,
    }

    /// A tree whose every change moves its directory's ctime, as the kernel's do; it counts
    /// the listings and stamps asked of it.
    #[derive(Debug, Default)]
    struct Tree {
        nodes: BTreeMap<PathBuf, Node>,
        next_ino: u64,
        clock: i64,
        listed: RefCell<Vec<PathBuf>>,
        stamped: Cell<usize>,
        /// A filesystem that does not set ctimes locally (NFS, FUSE).
        remote: bool,
    }

    impl Tree {
        fn new(root: &str) -> Tree {
            let mut t = Tree {
                clock: 1_000_000,
                next_ino: 2,
                ..Tree::default()
            };
            let root_node = t.node(Kind::Dir, 1);
            t.nodes.insert(PathBuf::from(root), root_node);
            t
        }
        fn node(&mut self, kind: Kind, dev: u64) -> Node {
            self.next_ino += 1;
            Node {
                kind,
                dev,
                ino: self.next_ino,
                ctime: self.clock,
                children: BTreeMap::new(),
            }
        }
        /// Moves the clock and the ctime of `dir` (an entry of it changed).
        fn touch(&mut self, dir: &Path) {
            self.clock += 1;
            let now = self.clock;
            if let Some(n) = self.nodes.get_mut(dir) {
                n.ctime = now;
            }
        }
        fn add(&mut self, path: &Path, kind: Kind) {
            let parent = path.parent().unwrap().to_path_buf();
            assert_eq!(self.nodes[&parent].kind, Kind::Dir);
            let dev = self.nodes[&parent].dev;
            let node = self.node(kind, dev);
            self.nodes.insert(path.to_path_buf(), node);
            let name = path.file_name().unwrap().to_os_string();
            self.nodes
                .get_mut(&parent)
                .unwrap()
                .children
                .insert(name, path.to_path_buf());
            self.touch(&parent);
        }
        fn remove(&mut self, path: &Path) {
            let below: Vec<PathBuf> = self
                .nodes
                .keys()
                .filter(|p| p.starts_with(path))
                .cloned()
                .collect();
            for p in below {
                self.nodes.remove(&p);
            }
            let parent = path.parent().unwrap().to_path_buf();
            self.nodes
                .get_mut(&parent)
                .unwrap()
                .children
                .remove(path.file_name().unwrap());
            self.touch(&parent);
        }
        /// A filesystem mounted on `dir`: another device and inode there, the same ctime,
        /// and its parent's entries unchanged.
        fn mount_on(&mut self, dir: &Path) {
            let below: Vec<PathBuf> = self
                .nodes
                .keys()
                .filter(|p| p.starts_with(dir) && *p != dir)
                .cloned()
                .collect();
            for p in below {
                self.nodes.remove(&p);
            }
            self.next_ino += 1;
            let ino = self.next_ino;
            let n = self.nodes.get_mut(dir).unwrap();
            n.dev += 100;
            n.ino = ino;
            n.children.clear();
            let dot_git = dir.join(".git");
            self.add(&dot_git, Kind::File);
        }
        fn dirs(&self) -> Vec<PathBuf> {
            (self.nodes.iter())
                .filter(|(_, n)| n.kind == Kind::Dir)
                .map(|(p, _)| p.clone())
                .collect()
        }
    }

    impl HostView for Tree {
        fn stat(&self, path: &Path) -> Option<Entry> {
            let n = self.nodes.get(path)?;
            Some(Entry {
                kind: n.kind,
                uid: 1000,
                gid: 1000,
                mode: 0o644,
                dev: n.dev,
                ino: n.ino,
                links: 1,
            })
        }
        fn lstat_kind(&self, path: &Path) -> Option<Kind> {
            self.nodes.get(path).map(|n| n.kind)
        }
        fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
            self.nodes.get(path).map(|_| path.to_path_buf())
        }
        fn list_dir(&self, path: &Path) -> Vec<(OsString, Kind)> {
            self.listed.borrow_mut().push(path.to_path_buf());
            let Some(n) = self.nodes.get(path) else {
                return Vec::new();
            };
            (n.children.iter())
                .map(|(name, p)| (name.clone(), self.nodes[p].kind))
                .collect()
        }
        fn read_small(&self, _path: &Path) -> Option<String> {
            None
        }
        fn dir_stamp(&self, path: &Path) -> Option<DirStamp> {
            self.stamped.set(self.stamped.get() + 1);
            let n = self.nodes.get(path).filter(|n| n.kind == Kind::Dir)?;
            Some(DirStamp {
                dev: n.dev,
                ino: n.ino,
                ctime: n.ctime,
                ctime_nsec: 0,
            })
        }
        fn local_ctime(&self, _path: &Path) -> bool {
            !self.remote
        }
    }

    const WS: &str = "/ws";

    fn patterns(list: &[&str]) -> Vec<policy::PathPattern> {
        let ctx = policy::PathContext {
            home: "/home/u".into(),
            workspace: WS.into(),
            writable_roots: vec![WS.into()],
        };
        list.iter()
            .flat_map(|p| policy::expand(p, &ctx).unwrap())
            .collect()
    }

    /// What a walk found, every list of it, and the directories it recorded.
    type Found = (Vec<Vec<PathBuf>>, BTreeMap<PathBuf, SettledDir>);

    fn walk(tree: &Tree, cache: Option<&mut WalkCache>) -> (Found, DirStamps) {
        let read = patterns(&["**/.env", "**/*.pem"]);
        let write = patterns(&["**/.envrc", "**/.git/hooks", "**/.git/config", ".vscode"]);
        let mut stamps = DirStamps::start_settled(std::time::Duration::ZERO);
        let m = Matches::collect(tree, &[WS.into()], &read, &write, &mut stamps, cache).unwrap();
        let found = (
            vec![
                m.deny_read,
                m.deny_write,
                m.git_files,
                m.git_dirs,
                m.accepted_git_dirs,
            ],
            (stamps.dirs.clone().into_iter())
                .map(|(p, d)| (PathBuf::from(p), d))
                .collect(),
        );
        (found, stamps)
    }

    /// A full walk, then a cached one of the same tree, written and read back as a file.
    fn round_trip(cache: &WalkCache, stamps: &DirStamps) -> WalkCache {
        let tmp = tempfile::tempdir().unwrap();
        cache.store(tmp.path(), Path::new(WS), stamps).unwrap();
        let uid = rustix::process::geteuid().as_raw();
        let loaded = WalkCache::load(tmp.path(), Path::new(WS), uid, "test");
        assert!(!loaded.sections.is_empty(), "the cache did not load back");
        loaded
    }

    fn cache() -> WalkCache {
        WalkCache::empty("test", rustix::process::geteuid().as_raw())
    }

    fn sample() -> Tree {
        let mut t = Tree::new(WS);
        for (p, k) in [
            ("/ws/a", Kind::Dir),
            ("/ws/a/.env", Kind::File),
            ("/ws/a/b", Kind::Dir),
            ("/ws/a/b/f", Kind::File),
            ("/ws/.git", Kind::Dir),
            ("/ws/.git/hooks", Kind::Dir),
            ("/ws/.git/config", Kind::File),
            ("/ws/.git/objects", Kind::Dir),
            ("/ws/c", Kind::Dir),
        ] {
            t.add(Path::new(p), k);
        }
        t
    }

    #[test]
    fn an_unchanged_tree_is_stat_ed_not_listed_and_found_the_same() {
        let tree = sample();
        let (full, stamps) = walk(&tree, Some(&mut cache()));
        // All, .git/hooks and .git/objects too (the planner looks for secrets there).
        assert_eq!(stamps.listed, tree.dirs().len());
        let mut loaded = round_trip(&cache(), &stamps);
        tree.listed.borrow_mut().clear();
        let (cached, stamps) = walk(&tree, Some(&mut loaded));
        assert_eq!(cached, full);
        assert_eq!(*tree.listed.borrow(), Vec::<PathBuf>::new());
        assert_eq!((stamps.from_cache, stamps.listed), (7, 0));
        assert!(!WalkCache::worth_storing(&stamps), "nothing new to write");
    }

    #[test]
    fn a_changed_directory_alone_is_listed_again() {
        let mut tree = sample();
        let (_, stamps) = walk(&tree, Some(&mut cache()));
        let mut loaded = round_trip(&cache(), &stamps);
        tree.add(Path::new("/ws/a/b/.envrc"), Kind::File);
        tree.listed.borrow_mut().clear();
        let (cached, stamps) = walk(&tree, Some(&mut loaded));
        assert_eq!(*tree.listed.borrow(), vec![PathBuf::from("/ws/a/b")]);
        let (full, _) = walk(&tree, None);
        assert_eq!(cached, full);
        assert!(cached.0[1].contains(&PathBuf::from("/ws/a/b/.envrc")));
        assert_eq!((stamps.from_cache, stamps.listed), (6, 1));
        assert!(WalkCache::worth_storing(&stamps));
    }

    /// Control of the tests' power: a directory whose entries change but whose ctime does not
    /// (what no local filesystem allows) is taken from the cache, and its new entry missed.
    /// The same tree on a filesystem without local ctimes is listed whole.
    #[test]
    fn a_change_that_kept_the_ctime_is_missed_unless_ctimes_are_not_local() {
        let mut tree = sample();
        let (_, stamps) = walk(&tree, Some(&mut cache()));
        let saved = round_trip(&cache(), &stamps);
        let ctime = tree.nodes[Path::new("/ws/c")].ctime;
        tree.add(Path::new("/ws/c/.envrc"), Kind::File);
        tree.nodes.get_mut(Path::new("/ws/c")).unwrap().ctime = ctime;
        let mut loaded = round_trip(&saved, &stamps);
        let (cached, _) = walk(&tree, Some(&mut loaded));
        let (full, _) = walk(&tree, None);
        assert_ne!(
            cached, full,
            "the comparison cannot fail: the test proves nothing"
        );
        tree.remote = true;
        let mut loaded = round_trip(&saved, &stamps);
        let (cached, stamps) = walk(&tree, Some(&mut loaded));
        assert_eq!(cached.0, full.0);
        assert_eq!(stamps.from_cache, 0);
    }

    #[test]
    fn a_mount_on_a_cached_directory_is_listed() {
        let mut tree = sample();
        let (_, stamps) = walk(&tree, Some(&mut cache()));
        let mut loaded = round_trip(&cache(), &stamps);
        tree.mount_on(Path::new("/ws/a/b"));
        // Only its own (new) device's entry moved; the parent's ctime is as it was.
        let (cached, _) = walk(&tree, Some(&mut loaded));
        let (full, _) = walk(&tree, None);
        assert_eq!(cached, full);
        assert!(cached.0[2].contains(&PathBuf::from("/ws/a/b/.git")));
    }

    #[test]
    fn another_key_or_a_clock_gone_back_walks() {
        let tree = sample();
        let (_, stamps) = walk(&tree, Some(&mut cache()));
        let loaded = round_trip(&cache(), &stamps);
        // Other globs: another key.
        let mut other = round_trip(&loaded, &stamps);
        let mut s2 = DirStamps::start_settled(std::time::Duration::ZERO);
        let read = patterns(&["**/.secret"]);
        Matches::collect(&tree, &[WS.into()], &read, &[], &mut s2, Some(&mut other)).unwrap();
        assert_eq!((s2.from_cache, s2.had_prior), (0, false));
        // The clock before the cache's walk: nothing taken.
        let mut back = round_trip(&loaded, &stamps);
        let mut s3 = DirStamps::start_settled(std::time::Duration::ZERO);
        s3.taken_at = Some(std::time::UNIX_EPOCH);
        let read = patterns(&["**/.env", "**/*.pem"]);
        let write = patterns(&["**/.envrc", "**/.git/hooks", "**/.git/config", ".vscode"]);
        Matches::collect(&tree, &[WS.into()], &read, &write, &mut s3, Some(&mut back)).unwrap();
        assert_eq!((s3.from_cache, s3.had_prior), (0, true));
    }

    #[test]
    fn keeps_a_few_keys_newest_first() {
        let tree = sample();
        let mut c = cache();
        let (_, stamps) = walk(&tree, Some(&mut c));
        let mut loaded = round_trip(&c, &stamps);
        for i in 0..6 {
            let mut s = DirStamps::start_settled(std::time::Duration::ZERO);
            let read = patterns(&[&format!("**/.k{i}")]);
            Matches::collect(&tree, &[WS.into()], &read, &[], &mut s, Some(&mut loaded)).unwrap();
            loaded = round_trip(&loaded, &s);
            assert_eq!(loaded.sections[0].key, s.key.unwrap());
            assert!(loaded.sections.len() <= KEPT);
        }
    }

    /// A journal directory holding the sample tree's cache.
    fn stored() -> tempfile::TempDir {
        let (_, stamps) = walk(&sample(), Some(&mut cache()));
        let tmp = tempfile::tempdir().unwrap();
        cache().store(tmp.path(), Path::new(WS), &stamps).unwrap();
        tmp
    }

    /// Untrusted data: every truncation and any flipped byte gives either the same listings
    /// or none, never a panic; a file of another owner, a link, or one too large is not read,
    /// nor one in a [`DIR`] that is a link, of another owner, or writable by others. Control:
    /// the file stored is read back.
    #[test]
    fn a_damaged_or_foreign_file_is_not_read() {
        let tmp = stored();
        let file = tmp
            .path()
            .join(DIR)
            .join(file_name(Path::new(WS), cache().uid));
        let uid = cache().uid;
        let read = |dir: &Path| {
            !WalkCache::load(dir, Path::new(WS), uid, "test")
                .sections
                .is_empty()
        };
        assert!(read(tmp.path()), "control: the stored cache was not read");
        let data = std::fs::read(&file).unwrap();
        assert!(decode(&data).is_some());
        for n in 0..data.len() {
            assert!(decode(&data[..n]).is_none(), "a truncation at {n} was read");
        }
        for i in 0..data.len() {
            let mut d = data.clone();
            d[i] ^= 0xff;
            let _ = decode(&d);
        }
        let other = WalkCache::load(tmp.path(), Path::new(WS), uid + 1, "test");
        assert!(other.sections.is_empty(), "another owner's file was read");
        let link_dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(link_dir.path().join(DIR)).unwrap();
        std::os::unix::fs::symlink(
            &file,
            link_dir
                .path()
                .join(DIR)
                .join(file_name(Path::new(WS), uid)),
        )
        .unwrap();
        assert!(!read(link_dir.path()), "a link was followed");
        // `walk` itself a link to the directory holding the real file.
        let linked_dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(tmp.path().join(DIR), linked_dir.path().join(DIR)).unwrap();
        assert!(
            !read(linked_dir.path()),
            "a linked cache directory was followed"
        );
        // Writable by others.
        use std::os::unix::fs::PermissionsExt;
        let perms = |mode| std::fs::Permissions::from_mode(mode);
        std::fs::set_permissions(tmp.path().join(DIR), perms(0o777)).unwrap();
        assert!(
            !read(tmp.path()),
            "a cache directory others may write was read"
        );
        std::fs::set_permissions(tmp.path().join(DIR), perms(0o700)).unwrap();
        assert!(read(tmp.path()));
    }

    /// A cache written where caches were kept before (the journal directory itself) is
    /// removed when the workspace's cache is written to [`DIR`], and never read.
    #[test]
    fn the_cache_of_the_previous_place_is_removed_and_not_read() {
        let tmp = stored();
        let name = file_name(Path::new(WS), cache().uid);
        let uid = cache().uid;
        std::fs::rename(tmp.path().join(DIR).join(&name), tmp.path().join(&name)).unwrap();
        let loaded = WalkCache::load(tmp.path(), Path::new(WS), uid, "test");
        assert!(loaded.sections.is_empty(), "the old place was read");
        let (_, stamps) = walk(&sample(), Some(&mut cache()));
        cache().store(tmp.path(), Path::new(WS), &stamps).unwrap();
        assert!(!tmp.path().join(&name).exists());
        assert!(tmp.path().join(DIR).join(&name).is_file());
    }

    /// The real host, counting the stamps taken by name in a parent's handle; with `stale`,
    /// those answer what the directory's stamp was before the changes (the control).
    #[derive(Default)]
    struct ByHandle {
        at: Cell<usize>,
        stale: Option<BTreeMap<PathBuf, DirStamp>>,
    }

    impl HostView for ByHandle {
        fn stat(&self, p: &Path) -> Option<Entry> {
            RealHost.stat(p)
        }
        fn lstat_kind(&self, p: &Path) -> Option<Kind> {
            RealHost.lstat_kind(p)
        }
        fn canonicalize(&self, p: &Path) -> Option<PathBuf> {
            RealHost.canonicalize(p)
        }
        fn list_dir(&self, p: &Path) -> Vec<(OsString, Kind)> {
            RealHost.list_dir(p)
        }
        fn try_list_dir(&self, p: &Path) -> std::io::Result<Vec<(OsString, Kind)>> {
            RealHost.try_list_dir(p)
        }
        fn read_small(&self, p: &Path) -> Option<String> {
            RealHost.read_small(p)
        }
        fn dir_stamp(&self, p: &Path) -> Option<DirStamp> {
            RealHost.dir_stamp(p)
        }
        fn dir_stamp_at(
            &self,
            parent: Option<&crate::host::DirHandle>,
            p: &Path,
            open: bool,
        ) -> (Option<DirStamp>, Option<crate::host::DirHandle>) {
            if parent.is_some() {
                self.at.set(self.at.get() + 1);
            }
            let (stamp, handle) = RealHost.dir_stamp_at(parent, p, open);
            match (&self.stale, parent) {
                (Some(old), Some(_)) => (old.get(p).copied().or(stamp), handle),
                _ => (stamp, handle),
            }
        }
        fn list_dir_stamped(&self, p: &Path) -> (Option<DirStamp>, Vec<(OsString, Kind)>) {
            RealHost.list_dir_stamped(p)
        }
        fn local_ctime(&self, p: &Path) -> bool {
            RealHost.local_ctime(p)
        }
        fn fine_ctime(&self, p: &Path) -> bool {
            RealHost.fine_ctime(p)
        }
    }

    fn real_walk(
        host: &dyn HostView,
        ws: &Path,
        cache: Option<&mut WalkCache>,
        recheck: bool,
    ) -> (Found, DirStamps) {
        let ctx = policy::PathContext {
            home: "/home/u".into(),
            workspace: ws.into(),
            writable_roots: vec![ws.into()],
        };
        let pats = |list: &[&str]| -> Vec<policy::PathPattern> {
            (list.iter())
                .flat_map(|p| policy::expand(p, &ctx).unwrap())
                .collect()
        };
        let (read, write) = (pats(&["**/.env"]), pats(&["**/.envrc", "**/.git/hooks"]));
        let mut stamps = DirStamps::start_settled(std::time::Duration::ZERO);
        // The control's host answers stale stamps by handle, and the re-check after the walk
        // (which asks by handle too) would take them for changes: without it, the control
        // shows what the cache alone would miss.
        stamps.recheck = recheck;
        let m = Matches::collect(host, &[ws.into()], &read, &write, &mut stamps, cache).unwrap();
        let lists = vec![m.deny_read, m.deny_write, m.git_dirs];
        let dirs = (stamps.dirs.clone().into_iter()).map(|(p, d)| (PathBuf::from(p), d));
        ((lists, dirs.collect()), stamps)
    }

    /// On a real filesystem, the stamps of remembered directories are taken by name in their
    /// parent's handle (`fstatat`, issue 32): a directory changed under an unchanged parent,
    /// one made a link, and changes deeper than the handles the walk holds are all seen: the
    /// cached walk equals a full walk. Control: the same walk answered with the stamps of
    /// before the changes for those lookups misses them.
    #[test]
    fn a_real_tree_stat_ed_by_handles_finds_what_a_full_walk_finds() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap();
        if !RealHost.local_ctime(&ws) {
            eprintln!("n/a: {} does not set ctimes locally", ws.display());
            return;
        }
        let mut deep = ws.join("deep");
        for i in 0..70 {
            deep.push(format!("d{i}"));
        }
        for d in ["p/q/r", "p/l1", "p/l2", "p/l3/x", "g/.git/hooks"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir(ws.join("other")).unwrap();
        // Older than the re-check's `GRAIN` (50 ms) where ctimes are not multigrain.
        std::thread::sleep(std::time::Duration::from_millis(80));
        // The first run: every directory listed and recorded, the cache stored.
        let c = cache();
        let (_, recorded) = real_walk(&RealHost, &ws, Some(&mut cache()), true);
        let tmp_cache = tempfile::tempdir().unwrap();
        c.store(tmp_cache.path(), &ws, &recorded).unwrap();
        let before: BTreeMap<PathBuf, DirStamp> = (recorded.dirs.iter())
            .map(|(p, d)| (PathBuf::from(p), d.stamp))
            .collect();
        assert!(before.contains_key(&ws.join("p/q/r")) && before.contains_key(&deep));
        let load = || WalkCache::load(tmp_cache.path(), &ws, c.uid, "test");
        let full_walk = || real_walk(&RealHost, &ws, None, true).0;
        // An unchanged tree: taken whole from the cache, by handles.
        let host = ByHandle::default();
        let (full, (cached, s)) = (full_walk(), real_walk(&host, &ws, Some(&mut load()), true));
        assert_eq!(cached, full);
        assert_eq!((s.from_cache, s.listed), (before.len(), 0));
        assert!(host.at.get() > 60, "{} stamps by handle", host.at.get());
        // Changes below unchanged parents, and a directory made a link.
        std::thread::sleep(std::time::Duration::from_millis(30));
        std::fs::write(ws.join("p/q/r/.env"), "").unwrap();
        std::fs::write(deep.join(".envrc"), "").unwrap();
        std::fs::write(deep.parent().unwrap().join(".env"), "").unwrap();
        std::fs::create_dir(ws.join("p/l1/.envrc")).unwrap();
        std::fs::rename(ws.join("p/l3"), ws.join("other/l3")).unwrap();
        std::os::unix::fs::symlink(ws.join("other/l3"), ws.join("p/l3")).unwrap();
        std::fs::create_dir(ws.join("g/.git/hooks/.env")).unwrap();
        let host = ByHandle::default();
        let (full, (cached, _)) = (full_walk(), real_walk(&host, &ws, Some(&mut load()), true));
        assert_eq!(cached, full);
        for p in [ws.join("p/q/r/.env"), deep.parent().unwrap().join(".env")] {
            assert!(cached.0[0].contains(&p), "{} missed", p.display());
        }
        for p in [deep.join(".envrc"), ws.join("p/l1/.envrc")] {
            assert!(cached.0[1].contains(&p), "{} missed", p.display());
        }
        assert!(host.at.get() > 60, "{} stamps by handle", host.at.get());
        // Control: the lookups by handle answered with the stamps of before the changes.
        let stale = ByHandle {
            stale: Some(before),
            ..ByHandle::default()
        };
        let (missed, _) = real_walk(&stale, &ws, Some(&mut load()), false);
        assert_ne!(
            missed.0, full.0,
            "the comparison cannot fail: the test proves nothing"
        );
    }

    /// Random trees, random changes between runs (entries added, removed, replaced by
    /// another kind, mounts): the cached walk finds what a full walk finds, and records the
    /// same directories.
    #[test]
    fn cached_walks_of_random_changes_equal_full_walks() {
        let names = [
            ".git",
            "hooks",
            "config",
            "commondir",
            "modules",
            ".env",
            "x.pem",
            ".envrc",
            "a",
            "b",
            "src",
            "HEAD",
            ".vscode",
            "objects",
            "gitdir",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let (mut hits, mut lists) = (0, 0);
        for _round in 0..40 {
            let mut tree = Tree::new(WS);
            for _ in 0..60 {
                let dirs = tree.dirs();
                let parent = &dirs[rnd(dirs.len())];
                let p = parent.join(names[rnd(names.len())]);
                if !tree.nodes.contains_key(&p) {
                    let kind = [Kind::Dir, Kind::Dir, Kind::File, Kind::Symlink][rnd(4)];
                    tree.add(&p, kind);
                }
            }
            let mut c = cache();
            let (_, stamps) = walk(&tree, Some(&mut c));
            let mut saved = round_trip(&c, &stamps);
            for _run in 0..5 {
                for _ in 0..rnd(4) {
                    let all: Vec<PathBuf> = tree.nodes.keys().cloned().collect();
                    let p = all[rnd(all.len())].clone();
                    match rnd(4) {
                        0 if p != Path::new(WS) => tree.remove(&p),
                        1 if tree.nodes[&p].kind == Kind::Dir => {
                            let q = p.join(names[rnd(names.len())]);
                            if !tree.nodes.contains_key(&q) {
                                tree.add(&q, [Kind::Dir, Kind::File][rnd(2)]);
                            }
                        }
                        2 if p != Path::new(WS) => {
                            let kind = tree.nodes[&p].kind;
                            tree.remove(&p);
                            let other = if kind == Kind::Dir {
                                Kind::File
                            } else {
                                Kind::Dir
                            };
                            tree.add(&p, other);
                        }
                        3 if tree.nodes[&p].kind == Kind::Dir && p != Path::new(WS) => {
                            tree.mount_on(&p)
                        }
                        _ => {}
                    }
                }
                let (full, _) = walk(&tree, None);
                let (cached, stamps) = walk(&tree, Some(&mut saved));
                assert_eq!(cached, full);
                hits += stamps.from_cache;
                lists += stamps.listed;
                saved = round_trip(&saved, &stamps);
            }
        }
        // Both paths were taken, often: the comparisons above compared something.
        assert!(
            hits > 1000 && lists > 100,
            "{hits} from the cache, {lists} listed"
        );
    }
}
