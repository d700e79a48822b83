//! Existing git dirs, staged, for a backend whose protected paths are read-only mounts (gVisor,
//! the container engines): git writes its `config` by renaming `config.lock` over it, and the
//! kernel (or gVisor's Sentry) refuses to rename anything over a mount point (`EBUSY`), which
//! the read-only bind keeping the host's config from the command is. So `git config`,
//! `git remote add` and `git push -u` failed there. The native backend rewrites an inert config
//! through a descriptor its init holds; these backends have no such hook. Instead:
//!
//! - **Before the run** the top level of each existing git dir whose `config` is protected is
//!   copied into the run's bundle directory (outside every writable root), and that copy is
//!   what the command sees at the git dir's place: its files (`config`, `HEAD`, `index`,
//!   `packed-refs`, ...) are the copy's, each subdirectory (`objects`, `refs`, `logs`, ...)
//!   is the host's own, bound over its place (protected ones, `hooks`, read-only as before).
//!   The host's top-level files are not touched during the run.
//! - **After the run** (the sandbox gone, so nothing of the command is left), what the command
//!   changed there comes back, through a descriptor of the git dir checked to be the one
//!   planned and names only (never a path the command could have redirected):
//!   - `config` only when every key it gained, changed or lost is inert (the native rule,
//!     [`protect::git_config::git_config_rewrite_is_inert`]), written in place; otherwise it
//!     is refused whole, reported, and the run's version kept beside it as
//!     `config.stockade-refused` (nothing reads that name); another protected file
//!     (`commondir`) never changes;
//!   - other files, links and new directories are copied in (each file through a new name
//!     renamed over the old), removed ones removed; the sweep after the run then judges the
//!     git dir as it does every write of a run without a creation guard (planted redirects,
//!     hooks);
//!   - a name the host changed too during the run keeps the host's version, and the run's is
//!     kept beside it as `NAME.stockade-conflict`, reported.
//!
//! Differences from native: a live key is refused after the run rather than at `git config`
//! (the command saw its change inside, and the whole config change is refused, its inert keys
//! too); and the top-level files reach the host when the run ends, not as written.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use sandbox::{Spec, Violation};

/// Subdirectories git makes for an operation that stops for the user (a rebase, a
/// cherry-pick or revert sequence) and removes when it ends: small, and copied whole.
pub const COPIED: &[&str] = &["rebase-merge", "rebase-apply", "sequencer"];

/// The top-level files of a git dir that come back from the run as written: git's everyday
/// state, none of which names code or another directory for git to go to. An allow-list
/// (red team: new names were copied in live and only the sweep after took them out, a window
/// the command could stretch, in which a host `git status` followed a planted `commondir`):
/// anything else the run made at the top is kept aside as `NAME.stockade-refused`, reported.
pub const BROUGHT_BACK: &[&str] = &[
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "MERGE_MSG",
    "MERGE_MODE",
    "MERGE_RR",
    "AUTO_MERGE",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "REBASE_HEAD",
    "BISECT_LOG",
    "BISECT_START",
    "BISECT_TERMS",
    "BISECT_NAMES",
    "BISECT_EXPECTED_REV",
    "BISECT_ANCESTORS_OK",
    "BISECT_HEAD",
    "COMMIT_EDITMSG",
    "TAG_EDITMSG",
    "SQUASH_MSG",
    "NOTES_MERGE_PARTIAL",
    "NOTES_MERGE_REF",
    "index",
    "packed-refs",
    "description",
    "shallow",
    "gitk.cache",
];

/// New top-level directories that come back whole: reflogs (a repository's first commit
/// makes `logs`) and a stopped operation's state ([`COPIED`], which the sweep then judges).
const NEW_DIRS: &[&str] = &["logs", "rebase-merge", "rebase-apply", "sequencer"];

/// The most bytes brought back from one run's staged copies (a sparse file is copied dense).
const BUDGET: u64 = 2 << 30;

/// Top-level files of a git dir that are git configs (judged by the inert rule).
const CONFIGS: &[&str] = &["config", "config.worktree"];

/// The largest config judged (as the native init's).
const CONFIG_MAX: usize = 64 * 1024;
/// How deep a new directory of the run's is copied back.
const MAX_DEPTH: usize = 32;

/// Violation kind: a change of the run's to a protected git file, not applied after it.
pub const REFUSED: &str = "protected_path_refused";
/// Violation kind: a top-level git file both the run and the host changed.
pub const CONFLICT: &str = "git_dir_conflict";

/// An existing git dir whose top level the command sees as a staged copy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Staged {
    pub gitdir: PathBuf,
    /// The uid the git dir must belong to (a root caller's: the workspace's owner, whose
    /// command gets the copy); `None`: the caller's own copy, made with its own rights.
    pub owner: Option<u32>,
    /// `(st_dev, st_ino)` of the git dir and of its config when planned.
    pub identity: (u64, u64),
    pub config_identity: Option<(u64, u64)>,
    /// Its subdirectories when planned: the host's own, each bound over its place.
    pub subdirs: Vec<OsString>,
    /// Its subdirectories of a stopped operation's state ([`COPIED`]): copied whole, as its
    /// files are (git removes them when the operation ends, and a mount point cannot go).
    pub copied: Vec<OsString>,
    /// Its top-level protected files (`config`, `commondir`): judged, never copied back as is.
    pub protected: Vec<OsString>,
}

impl Staged {
    /// Where the copy is, below the bundle directory `bundle`.
    pub fn source(bundle: &Path, index: usize) -> PathBuf {
        Self::copies(bundle).join(index.to_string())
    }

    /// The directory of every copy below `bundle`.
    pub fn copies(bundle: &Path) -> PathBuf {
        bundle.join("git")
    }
}

/// The git dirs of `spec` to stage: pinned directories holding a protected `config` that is a
/// regular file, with their own mount ([`Spec::pins_bound_alone`]), and their subdirectories
/// as the host has them.
/// `owner`: for a root caller, the workspace's owner, whose command gets the copy: a git dir
/// of anyone else (root's, in a workspace given to a user) is not staged (red team: the copy
/// gave the command root's 0600 config, and root's remote URL came back as an inert change);
/// it keeps its read-only binds.
pub fn plan(spec: &Spec, owner: Option<u32>) -> Vec<Staged> {
    let mut out = Vec::new();
    for g in spec.pins_bound_alone() {
        let config = g.join("config");
        if !spec.protected.contains(&config) {
            continue;
        }
        // Inside a path protected whole (a clone in the home, `~/.pyenv`), the git dir is
        // read-only as the rest: a staged copy there would be a writable mount in it.
        if spec.protected.iter().any(|p| g.starts_with(p)) {
            continue;
        }
        let Some(identity) = spec.identities.get(g).copied() else {
            continue;
        };
        if !std::fs::symlink_metadata(&config).is_ok_and(|m| m.is_file()) {
            continue;
        }
        if let Some(o) = owner {
            use std::os::unix::fs::MetadataExt;
            if !std::fs::symlink_metadata(g).is_ok_and(|m| m.is_dir() && m.uid() == o) {
                continue;
            }
        }
        let Ok(entries) = std::fs::read_dir(g) else {
            continue;
        };
        let mut subdirs = Vec::new();
        let mut copied = Vec::new();
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let n = e.file_name();
                if COPIED.iter().any(|c| n == *c) {
                    copied.push(n);
                } else {
                    subdirs.push(n);
                }
            }
        }
        subdirs.sort();
        copied.sort();
        let protected = (spec.protected.iter())
            .filter(|p| p.parent() == Some(g.as_path()))
            .filter_map(|p| p.file_name().map(OsStr::to_os_string))
            .filter(|n| !subdirs.contains(n) && !copied.contains(n))
            .collect();
        out.push(Staged {
            gitdir: g.clone(),
            owner,
            identity,
            config_identity: spec.identities.get(&config).copied(),
            subdirs,
            copied,
            protected,
        });
    }
    out
}

/// What an entry was, to tell whether it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    kind: u32,
    ino: u64,
    size: i64,
    mtime: (i64, u64),
    ctime: (i64, u64),
}

fn seen(dir: impl AsFd, name: &OsStr) -> Option<Seen> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    Some(Seen {
        kind: st.st_mode & libc::S_IFMT,
        ino: st.st_ino,
        size: st.st_size,
        mtime: (st.st_mtime, st.st_mtime_nsec as u64),
        ctime: (st.st_ctime, st.st_ctime_nsec as u64),
    })
}

/// One staged git dir as it was made: its entries and the host's, at that moment.
#[derive(Debug)]
pub struct Snapshot {
    copy: BTreeMap<OsString, Seen>,
    host: BTreeMap<OsString, Seen>,
    /// The copied subdirectories' trees: the copy's and the host's.
    copy_trees: BTreeMap<OsString, Tree>,
    host_trees: BTreeMap<OsString, Tree>,
    /// Top-level files of another owner's, not copied, never written back.
    withheld: Vec<OsString>,
}

/// Every entry of a tree (relative path and what it was), to tell whether any changed.
type Tree = Option<Vec<(Vec<u8>, Seen)>>;

fn tree(dir: impl AsFd, name: &OsStr) -> Tree {
    fn walk(
        dir: &OwnedFd,
        prefix: &[u8],
        out: &mut Vec<(Vec<u8>, Seen)>,
        depth: usize,
    ) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut all = names(dir).ok()?;
        all.sort();
        for n in all {
            let s = seen(dir, &n)?;
            let mut rel = prefix.to_vec();
            rel.push(b'/');
            rel.extend_from_slice(n.as_bytes());
            out.push((rel.clone(), s));
            if s.kind == libc::S_IFDIR {
                let sub = open_dir(dir, &n).ok()?;
                walk(&sub, &rel, out, depth + 1)?;
            }
        }
        Some(())
    }
    let top = seen(&dir, name)?;
    let fd = open_dir(&dir, name).ok()?;
    let mut out = vec![(Vec::new(), top)];
    walk(&fd, b"", &mut out, 0)?;
    Some(out)
}

/// Removes the directory `name` of `dir` and all it holds, not following links.
fn remove_tree(dir: impl AsFd, name: &OsStr, depth: usize) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(std::io::Error::other("too deep"));
    }
    let sub = open_dir(&dir, name).map_err(io)?;
    for n in names(&sub)? {
        if seen(&sub, &n).is_some_and(|s| s.kind == libc::S_IFDIR) {
            remove_tree(&sub, &n, depth + 1)?;
        } else {
            rustix::fs::unlinkat(&sub, &n, AtFlags::empty()).map_err(io)?;
        }
    }
    rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR).map_err(io)
}

fn io(e: rustix::io::Errno) -> std::io::Error {
    e.into()
}

/// The directory `name` of `dir` (or `rustix::fs::CWD` and a path), never through a last link.
fn open_dir(dir: impl AsFd, name: impl rustix::path::Arg) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Gives the file of `fd` to `(uid, gid)`.
fn give(fd: impl AsFd, (uid, gid): (u32, u32)) -> rustix::io::Result<()> {
    rustix::fs::fchown(
        fd,
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
    )
}

/// Opens `path` as a directory, not following a last link, and checks it is `identity`.
fn open_checked(path: &Path, identity: (u64, u64)) -> std::io::Result<OwnedFd> {
    let fd = open_dir(rustix::fs::CWD, path).map_err(io)?;
    let st = rustix::fs::fstat(&fd).map_err(io)?;
    if (st.st_dev, st.st_ino) != identity {
        return Err(std::io::Error::other(format!(
            "{} is not the directory planned",
            path.display()
        )));
    }
    Ok(fd)
}

fn names(dir: impl AsFd) -> std::io::Result<Vec<OsString>> {
    let d = rustix::fs::Dir::read_from(dir).map_err(io)?;
    let mut out = Vec::new();
    for e in d {
        let e = e.map_err(io)?;
        let n = e.file_name().to_bytes();
        if n != b"." && n != b".." {
            out.push(OsStr::from_bytes(n).to_os_string());
        }
    }
    Ok(out)
}

/// A regular file of `dir`, opened for reading without following a link or blocking on a
/// FIFO, with its mode and owner; anything else is `None`.
fn open_file(dir: impl AsFd, name: &OsStr) -> Option<(std::fs::File, u32, u32)> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    (FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
        .then(|| (std::fs::File::from(fd), st.st_mode & 0o777, st.st_uid))
}

/// Copies `from`'s `name` (a regular file or a link) into `to` under `name` through a new
/// name renamed over it, owned by `owner` when given. `from_owner`: the entry must belong to
/// this uid (as it is opened), else the copy fails.
fn copy_entry(
    from: impl AsFd,
    to: impl AsFd,
    name: &OsStr,
    owner: Option<(u32, u32)>,
    from_owner: Option<u32>,
    budget: &Cell<u64>,
) -> std::io::Result<()> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = OsString::from(format!(
        ".stockade-staged.{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = rustix::fs::unlinkat(&to, &tmp, AtFlags::empty());
    let done = copy_to_tmp(&from, &to, name, &tmp, (owner, from_owner), budget)
        .and_then(|_| rustix::fs::renameat(&to, &tmp, &to, name).map_err(io));
    if done.is_err() {
        let _ = rustix::fs::unlinkat(&to, &tmp, AtFlags::empty());
    }
    done
}

fn copy_to_tmp(
    from: impl AsFd,
    to: impl AsFd,
    name: &OsStr,
    tmp: &OsStr,
    (owner, from_owner): (Option<(u32, u32)>, Option<u32>),
    budget: &Cell<u64>,
) -> std::io::Result<()> {
    let foreign = |uid: u32| {
        std::io::Error::other(format!(
            "{} belongs to uid {uid}, not to the git dir's owner",
            Path::new(name).display()
        ))
    };
    let st = rustix::fs::statat(&from, name, AtFlags::SYMLINK_NOFOLLOW).map_err(io)?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Symlink if from_owner.is_some_and(|o| o != st.st_uid) => {
            return Err(foreign(st.st_uid))
        }
        FileType::Symlink => {
            let target = rustix::fs::readlinkat(&from, name, Vec::new()).map_err(io)?;
            rustix::fs::symlinkat(target.as_c_str(), &to, tmp).map_err(io)?;
            if let Some((u, g)) = owner {
                let _ = rustix::fs::chownat(
                    &to,
                    tmp,
                    Some(rustix::fs::Uid::from_raw(u)),
                    Some(rustix::fs::Gid::from_raw(g)),
                    AtFlags::SYMLINK_NOFOLLOW,
                );
            }
        }
        FileType::RegularFile => {
            let (src, mode, uid) = open_file(&from, name)
                .ok_or_else(|| std::io::Error::other("not a regular file"))?;
            if from_owner.is_some_and(|o| o != uid) {
                return Err(foreign(uid));
            }
            let size = src.metadata()?.len();
            if size > budget.get() {
                return Err(std::io::Error::other(format!(
                    "{size} bytes, more than the {} left to bring back from the run",
                    budget.get()
                )));
            }
            budget.set(budget.get() - size);
            let fd = rustix::fs::openat(
                &to,
                tmp,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(mode),
            )
            .map_err(io)?;
            if let Some((u, g)) = owner {
                give(&fd, (u, g)).map_err(io)?;
            }
            // The mode exactly, whatever the umask (no set-ID bits: `mode` has none).
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(io)?;
            let mut dst = std::fs::File::from(fd);
            // No more than was measured (the file could be growing).
            std::io::copy(&mut src.take(size), &mut dst)?;
        }
        _ => return Err(std::io::Error::other("neither a file nor a link")),
    }
    Ok(())
}

/// Copies the directory `name` of `from` to `to_name` in `to`, whole, given to `owner`; refuses
/// one that `to` has already. `from_owner`: every entry copied must belong to this uid (staging
/// a git dir's stopped operation: another owner's file there would become the command's), else
/// the copy fails.
#[allow(
    clippy::too_many_arguments,
    reason = "one recursive copy, its state passed down"
)]
fn copy_tree(
    from: impl AsFd,
    to: impl AsFd,
    name: &OsStr,
    to_name: &OsStr,
    owner: Option<(u32, u32)>,
    from_owner: Option<u32>,
    depth: usize,
    budget: &Cell<u64>,
) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(std::io::Error::other("too deep"));
    }
    let src = open_dir(&from, name).map_err(io)?;
    let src_stat = rustix::fs::fstat(&src).map_err(io)?;
    let foreign = |uid: u32, n: &OsStr| {
        std::io::Error::other(format!(
            "{} belongs to uid {uid}, not to the git dir's owner",
            Path::new(n).display()
        ))
    };
    if from_owner.is_some_and(|o| o != src_stat.st_uid) {
        return Err(foreign(src_stat.st_uid, name));
    }
    let mode = src_stat.st_mode & 0o777;
    rustix::fs::mkdirat(&to, to_name, Mode::from_raw_mode(mode | 0o700)).map_err(io)?;
    let dst = open_dir(&to, to_name).map_err(io)?;
    if let Some((u, g)) = owner {
        give(&dst, (u, g)).map_err(io)?;
    }
    for n in names(&src)? {
        let Ok(st) = rustix::fs::statat(&src, &n, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        if from_owner.is_some_and(|o| o != st.st_uid) {
            return Err(foreign(st.st_uid, &n));
        }
        match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => copy_tree(&src, &dst, &n, &n, owner, from_owner, depth + 1, budget)?,
            libc::S_IFREG | libc::S_IFLNK => copy_entry(&src, &dst, &n, owner, from_owner, budget)?,
            // FIFOs, sockets and devices are not a git dir's.
            _ => {}
        }
    }
    rustix::fs::fchmod(&dst, Mode::from_raw_mode(mode)).map_err(io)
}

/// Makes the copy of `staged` at `copy` (an empty directory of the bundle's) and says what it
/// and the host's git dir hold. `owner`: who the copy belongs to, uid and gid (a root caller's
/// command's ids; `None`: the caller, who makes it). A git dir that no longer belongs to the
/// owner planned ([`Staged::owner`]) is refused.
pub fn stage(staged: &Staged, copy: &Path, owner: Option<(u32, u32)>) -> std::io::Result<Snapshot> {
    let g = open_checked(&staged.gitdir, staged.identity)?;
    let g_stat = rustix::fs::fstat(&g).map_err(io)?;
    let (mode, g_uid) = (g_stat.st_mode & 0o777, g_stat.st_uid);
    if staged.owner.is_some_and(|o| o != g_uid) {
        return Err(std::io::Error::other(format!(
            "it belongs to uid {g_uid}, not to the workspace's owner"
        )));
    }
    std::fs::create_dir_all(copy)?;
    let c = open_dir(rustix::fs::CWD, copy).map_err(io)?;
    let unlimited = Cell::new(u64::MAX);
    let mut host = BTreeMap::new();
    let mut withheld = Vec::new();
    for n in names(&g)? {
        let Some(s) = seen(&g, &n) else { continue };
        let uid = rustix::fs::statat(&g, &n, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(io)?
            .st_uid;
        if s.kind != libc::S_IFDIR && uid != g_uid {
            // Another owner's file (root's `.git/credentials`): a root caller's copy would be
            // the command's own (red team: a 0600 file of root's was read), and an
            // unprivileged caller may not read it. Left out of the copy, and never written
            // back.
            withheld.push(n.clone());
            host.insert(n, s);
            continue;
        }
        if s.kind == libc::S_IFDIR && staged.copied.contains(&n) {
            copy_tree(&g, &c, &n, &n, owner, Some(g_uid), 0, &unlimited)?;
        } else if s.kind == libc::S_IFDIR {
            // A subdirectory made since the plan would be the copy's, empty: refused.
            if !staged.subdirs.contains(&n) {
                return Err(std::io::Error::other(format!(
                    "{} appeared in {} after the run was planned",
                    n.to_string_lossy(),
                    staged.gitdir.display()
                )));
            }
            // Its mount point: the host's own is bound over it.
            rustix::fs::mkdirat(&c, &n, Mode::from_raw_mode(0o755)).map_err(io)?;
            if let Some((u, gid)) = owner {
                rustix::fs::chownat(
                    &c,
                    &n,
                    Some(rustix::fs::Uid::from_raw(u)),
                    Some(rustix::fs::Gid::from_raw(gid)),
                    AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(io)?;
            }
        } else if s.kind == libc::S_IFREG || s.kind == libc::S_IFLNK {
            copy_entry(&g, &c, &n, owner, None, &unlimited)?;
        }
        host.insert(n, s);
    }
    if let Some(u) = owner {
        give(&c, u).map_err(io)?;
    }
    rustix::fs::fchmod(&c, Mode::from_raw_mode(mode)).map_err(io)?;
    let mut copied = BTreeMap::new();
    for n in names(&c)? {
        if let Some(s) = seen(&c, &n) {
            copied.insert(n, s);
        }
    }
    let mut copy_trees = BTreeMap::new();
    let mut host_trees = BTreeMap::new();
    for d in &staged.copied {
        copy_trees.insert(d.clone(), tree(&c, d));
        host_trees.insert(d.clone(), tree(&g, d));
    }
    Ok(Snapshot {
        copy: copied,
        host,
        copy_trees,
        host_trees,
        withheld,
    })
}

fn violation(
    kind: &'static str,
    path: PathBuf,
    action: String,
    allow: Option<&'static str>,
) -> Violation {
    Violation {
        code: sandbox::Code::SandboxViolation,
        kind,
        path,
        action,
        allow,
    }
}

fn read_bounded(mut f: std::fs::File) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::new();
    (&mut f).take(CONFIG_MAX as u64 + 1).read_to_end(&mut buf)?;
    Ok((buf.len() <= CONFIG_MAX).then_some(buf))
}

/// Makes the copy of each of `staged` below the run's directory `bundle` ([`stage`],
/// [`Staged::source`]); the first that cannot be made, with its git dir.
pub fn stage_all(
    staged: &[Staged],
    bundle: &Path,
    owner: Option<(u32, u32)>,
) -> Result<Vec<Snapshot>, (PathBuf, std::io::Error)> {
    (staged.iter().enumerate())
        .map(|(i, s)| {
            stage(s, &Staged::source(bundle, i), owner).map_err(|e| (s.gitdir.clone(), e))
        })
        .collect()
}

/// Brings back what the run changed in each copy [`stage_all`] made ([`reconcile`]), once
/// nothing of the command is left.
pub fn reconcile_all(
    staged: &[Staged],
    snapshots: &[Snapshot],
    bundle: &Path,
    writable_roots: &[PathBuf],
    (root_caller, only_from): (bool, Option<u32>),
) -> Vec<Violation> {
    (staged.iter().enumerate().zip(snapshots))
        .flat_map(|((i, s), snapshot)| {
            reconcile(
                s,
                snapshot,
                &Staged::source(bundle, i),
                writable_roots,
                (root_caller, only_from),
            )
        })
        .collect()
}

/// The protected files of `staged` git dirs, which the command saw only a copy of (the run's
/// outcome names them: the backend judged what the command did to them).
pub fn protected_paths(staged: &[Staged]) -> Vec<PathBuf> {
    (staged.iter())
        .flat_map(|s| s.protected.iter().map(|n| s.gitdir.join(n)))
        .collect()
}

/// Brings back what the run changed in the copy `copy` of `staged` (see the module docs);
/// returns what was refused or kept aside, and an error for what could not be done at all.
/// `root_caller`: what comes back is given to the git dir's owner. `only_from`: only entries
/// of this uid come back (a container run's copy is its command's alone: another owner's
/// entry there was put in by something else; gVisor's file server makes the command's files
/// under an id of its own, in a bundle only root reaches).
pub fn reconcile(
    staged: &Staged,
    snapshot: &Snapshot,
    copy: &Path,
    writable_roots: &[PathBuf],
    (root_caller, only_from): (bool, Option<u32>),
) -> Vec<Violation> {
    let (mut violations, errors) = reconcile_inner(
        staged,
        snapshot,
        copy,
        writable_roots,
        (root_caller, only_from),
    );
    violations.extend(
        errors
            .into_iter()
            .map(|e| violation(NOT_BROUGHT_BACK, staged.gitdir.clone(), e, None)),
    );
    violations
}

/// Violation kind: a change of the run's to a git dir's top level that could not be brought
/// back (the git dir was replaced, a copy failed).
pub const NOT_BROUGHT_BACK: &str = "git_dir_not_brought_back";

fn reconcile_inner(
    staged: &Staged,
    snapshot: &Snapshot,
    copy: &Path,
    writable_roots: &[PathBuf],
    (root_caller, from): (bool, Option<u32>),
) -> (Vec<Violation>, Vec<String>) {
    let violations = Vec::new();
    let mut errors = Vec::new();
    let g = match open_checked(&staged.gitdir, staged.identity) {
        Ok(g) => g,
        Err(e) => {
            errors.push(format!(
                "the run's changes to the top of {} were not brought back: {e}",
                staged.gitdir.display()
            ));
            return (violations, errors);
        }
    };
    let c = match open_dir(rustix::fs::CWD, copy) {
        Ok(c) => c,
        Err(e) => {
            errors.push(format!(
                "the staged copy of {}: {e}",
                staged.gitdir.display()
            ));
            return (violations, errors);
        }
    };
    // What a root caller's files here belong to: the git dir's owner.
    let owner = root_caller
        .then(|| rustix::fs::fstat(&g).ok())
        .flatten()
        .map(|st| (st.st_uid, st.st_gid));
    let mut all: Vec<OsString> = snapshot.copy.keys().cloned().collect();
    all.extend(names(&c).unwrap_or_default());
    all.sort();
    all.dedup();
    let mut r = Reconciling {
        staged,
        snapshot,
        g: &g,
        c: &c,
        owner,
        from,
        budget: Cell::new(BUDGET),
        violations,
        errors,
    };
    r.copied_dirs();
    for n in all {
        r.entry(n, writable_roots);
    }
    (r.violations, r.errors)
}

/// [`reconcile_inner`] under way: the git dir `g` and its copy `c` (open), whom what comes
/// back belongs to (`owner`) and whose entries may come back (`from`), and what it refused
/// (`violations`) or could not do (`errors`) so far.
struct Reconciling<'a> {
    staged: &'a Staged,
    snapshot: &'a Snapshot,
    g: &'a OwnedFd,
    c: &'a OwnedFd,
    owner: Option<(u32, u32)>,
    from: Option<u32>,
    budget: Cell<u64>,
    violations: Vec<Violation>,
    errors: Vec<String>,
}

impl Reconciling<'_> {
    fn at(&self, n: &OsStr) -> PathBuf {
        self.staged.gitdir.join(n)
    }

    /// The directories copied whole ([`Staged::copied`]) the run changed: brought back
    /// whole, unless the host changed them too.
    fn copied_dirs(&mut self) {
        let (staged, snapshot, g, c) = (self.staged, self.snapshot, self.g, self.c);
        let (owner, from, budget) = (self.owner, self.from, &self.budget);
        for d in &staged.copied {
            let now = tree(c, d);
            if Some(&now) == snapshot.copy_trees.get(d) {
                continue;
            }
            if Some(&tree(g, d)) != snapshot.host_trees.get(d) {
                self.violations.push(violation(
                    CONFLICT,
                    self.at(d),
                    "not brought back from the run: changed on the host during it too".into(),
                    None,
                ));
                continue;
            }
            let mut done = Ok(());
            if seen(g, d).is_some() {
                done = remove_tree(g, d, 0);
            }
            if done.is_ok() && now.is_some() {
                done = copy_tree(c, g, d, d, owner, from, 0, budget);
            }
            if let Err(e) = done {
                self.errors.push(format!(
                    "the run's {} was not brought back: {e}",
                    self.at(d).display()
                ));
            }
        }
    }

    /// The top-level entry `n` of the git dir or its copy (neither a subdirectory staged on
    /// its own nor one copied whole).
    fn entry(&mut self, n: OsString, writable_roots: &[PathBuf]) {
        let (staged, snapshot, g, c) = (self.staged, self.snapshot, self.g, self.c);
        if staged.subdirs.contains(&n) || staged.copied.contains(&n) {
            return;
        }
        let now = seen(c, &n);
        if snapshot.withheld.contains(&n) {
            // Another owner's file, left out of the copy: the run's own file of that name
            // never replaces it.
            if now.is_some() {
                self.violations.push(violation(
                    REFUSED,
                    self.at(&n),
                    "not brought back from the run: the host's file of that name belongs to another user, and was not the run's to change".into(),
                    None,
                ));
            }
            return;
        }
        if now == snapshot.copy.get(&n).copied() {
            return;
        }
        if seen(g, &n) != snapshot.host.get(&n).copied() {
            self.conflict(&n, now);
            return;
        }
        if staged.protected.contains(&n) {
            if let Some(v) = judge_protected(
                staged,
                (g, c),
                &n,
                now,
                writable_roots,
                (self.owner, self.from),
                &self.budget,
            ) {
                self.violations.push(v);
            }
            return;
        }
        self.bring_back(&n, now);
    }

    /// `n` changed both on the host and in the copy.
    fn conflict(&mut self, n: &OsStr, now: Option<Seen>) {
        // Both changed it: the host's stays, the run's is kept beside it.
        let mut aside = n.to_os_string();
        aside.push(".stockade-conflict");
        let kept = match now.map(|s| s.kind) {
            Some(libc::S_IFREG) | Some(libc::S_IFLNK) => copy_entry_as(
                self.c,
                n,
                self.g,
                &aside,
                (self.owner, self.from),
                &self.budget,
            )
            .is_ok(),
            _ => false,
        };
        self.violations.push(violation(
            CONFLICT,
            self.at(n),
            if kept {
                format!(
                    "not brought back from the run: changed on the host during it too; the run's version was moved to {}",
                    self.at(&aside).display()
                )
            } else {
                "not brought back from the run: changed on the host during it too".into()
            },
            None,
        ));
    }

    /// `n`, changed by the run alone (now `now` in the copy, unprotected): removed, brought
    /// back, or kept aside and refused.
    fn bring_back(&mut self, n: &OsStr, now: Option<Seen>) {
        let (g, c) = (self.g, self.c);
        let (owner, from, budget) = (self.owner, self.from, &self.budget);
        let kind = now.map(|s| s.kind);
        let known_file = BROUGHT_BACK.iter().any(|b| n == *b);
        let known_dir = NEW_DIRS.iter().any(|b| n == *b) && !self.snapshot.host.contains_key(n);
        let done = match kind {
            // Removing a file names nothing for git to follow.
            None => rustix::fs::unlinkat(g, n, AtFlags::empty()).map_err(io),
            Some(libc::S_IFREG) if known_file => copy_entry(c, g, n, owner, from, budget),
            Some(libc::S_IFDIR) if known_dir => copy_tree(c, g, n, n, owner, from, 0, budget),
            Some(libc::S_IFREG) | Some(libc::S_IFLNK) | Some(libc::S_IFDIR) => {
                self.refuse(n, kind);
                Ok(())
            }
            Some(_) => Err(std::io::Error::other("not a file, link or directory")),
        };
        if let Err(e) = done {
            self.errors.push(format!(
                "the run's {} was not brought back: {e}",
                self.at(n).display()
            ));
        }
    }

    /// `n` (of `kind`) is not a name that comes back to the top of a git dir: refused.
    fn refuse(&mut self, n: &OsStr, kind: Option<u32>) {
        let (g, c) = (self.g, self.c);
        let (owner, from, budget) = (self.owner, self.from, &self.budget);
        // Any other name: kept aside under a name nothing reads, never live.
        let mut aside = n.to_os_string();
        aside.push(".stockade-refused");
        let kept = if kind == Some(libc::S_IFDIR) {
            let _ = remove_tree(g, &aside, 0);
            copy_tree(c, g, n, &aside, owner, from, 0, budget)
        } else {
            copy_entry_as(c, n, g, &aside, (owner, from), budget)
        };
        self.violations.push(violation(
            REFUSED,
            self.at(n),
            match kept {
                Ok(()) => format!(
                    "not brought back from the run: only git's everyday state files come back to the top of a git dir staged for the run (gVisor, Podman, Docker); the run's version was moved to {}",
                    self.at(&aside).display()
                ),
                Err(e) => format!(
                    "not brought back from the run: only git's everyday state files come back to the top of a git dir staged for the run (gVisor, Podman, Docker) (the run's version is lost: {e})"
                ),
            },
            Some("make that change on the host, or run with --backend native"),
        ));
    }
}

/// `copy_entry` to another name.
fn copy_entry_as(
    from: impl AsFd,
    name: &OsStr,
    to: impl AsFd,
    as_name: &OsStr,
    (owner, from_owner): (Option<(u32, u32)>, Option<u32>),
    budget: &Cell<u64>,
) -> std::io::Result<()> {
    // Through a name of `from`'s own (the bundle's copy): linked there first.
    let _ = rustix::fs::unlinkat(&from, as_name, AtFlags::empty());
    rustix::fs::linkat(&from, name, &from, as_name, AtFlags::empty()).map_err(io)?;
    copy_entry(&from, &to, as_name, owner, from_owner, budget)
}

/// A protected top-level file the run changed: `config` comes back if the change is inert,
/// anything else is refused (the run's version kept beside it).
fn judge_protected(
    staged: &Staged,
    (g, c): (&OwnedFd, &OwnedFd),
    name: &OsStr,
    now: Option<Seen>,
    writable_roots: &[PathBuf],
    (owner, from): (Option<(u32, u32)>, Option<u32>),
    budget: &Cell<u64>,
) -> Option<Violation> {
    let path = staged.gitdir.join(name);
    let is_config = CONFIGS.iter().any(|c| name == *c);
    if is_config {
        let new = now
            .filter(|s| s.kind == libc::S_IFREG)
            .and_then(|_| open_file(c, name))
            .filter(|(_, _, uid)| from.is_none_or(|o| o == *uid))
            .and_then(|(f, _, _)| read_bounded(f).ok().flatten());
        let old = open_file(g, name).and_then(|(f, _, _)| read_bounded(f).ok().flatten());
        let roots: Vec<&[u8]> = (writable_roots.iter())
            .map(|w| w.as_os_str().as_bytes())
            .collect();
        if let (Some(new), Some(old)) = (&new, &old) {
            if protect::git_config::git_config_rewrite_is_inert(old, new, &roots) {
                match rewrite_in_place(g, name, staged.config_identity, new) {
                    Ok(()) => return None,
                    Err(e) => {
                        return Some(violation(
                            REFUSED,
                            path,
                            format!("the run's inert change was not written: {e}"),
                            None,
                        ))
                    }
                }
            }
        }
    }
    let mut aside = name.to_os_string();
    aside.push(".stockade-refused");
    let kept = matches!(
        now.map(|s| s.kind),
        Some(libc::S_IFREG) | Some(libc::S_IFLNK)
    ) && copy_entry_as(c, name, g, &aside, (owner, from), budget).is_ok();
    let reason = if is_config {
        protect::Reason::GitConfig
    } else {
        protect::Reason::ProtectedFile
    };
    let mut action = format!(
        "the run's change was not applied after it ({}); the host's is unchanged",
        reason.describe()
    );
    if kept {
        action.push_str(&format!(
            "; the run's version was moved to {}",
            staged.gitdir.join(&aside).display()
        ));
    }
    Some(violation(REFUSED, path, action, reason.allow()))
}

/// Writes `bytes` over the file `name` of `dir` in place (its inode, owner and mode kept),
/// after checking it is still the regular file planned.
fn rewrite_in_place(
    dir: &OwnedFd,
    name: &OsStr,
    identity: Option<(u64, u64)>,
    bytes: &[u8],
) -> std::io::Result<()> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io)?;
    let st = rustix::fs::fstat(&fd).map_err(io)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
        || identity.is_some_and(|id| id != (st.st_dev, st.st_ino))
    {
        return Err(std::io::Error::other("it is not the file planned"));
    }
    let mut f = std::fs::File::from(fd);
    f.write_all(bytes)?;
    f.set_len(bytes.len() as u64)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test: panicking is how it fails")]
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    const OWNER: u32 = 4242;

    fn write(path: &Path, text: &str, mode: u32, owner: Option<u32>) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        if let Some(o) = owner {
            std::os::unix::fs::chown(path, Some(o), Some(o)).unwrap();
        }
    }

    /// A root caller's copy back takes only the command's own entries (the git dir's owner's):
    /// another owner's file or tree in the copy was put there by something else (red team: a
    /// process of the owner's on the host moved root's 0600 file into the copy, which came back
    /// as `NAME.stockade-refused`, the owner's to read). Control: the owner's own new file comes
    /// back aside, and root's would with the check off (no `only_from`, the caller's own
    /// copy, as an unprivileged caller's is).
    #[test]
    fn a_root_callers_copy_back_takes_only_the_owners_entries() {
        if !rustix::process::geteuid().is_root() {
            println!("skipped: needs root (the test gives files to another uid)");
            return;
        }
        for root_caller in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let g = tmp.path().join(".git");
            std::fs::create_dir(&g).unwrap();
            std::os::unix::fs::chown(&g, Some(OWNER), Some(OWNER)).unwrap();
            write(&g.join("config"), "[core]\n", 0o644, Some(OWNER));
            write(
                &g.join("HEAD"),
                "ref: refs/heads/main\n",
                0o644,
                Some(OWNER),
            );
            let id = |p: &Path| {
                let m = std::fs::metadata(p).unwrap();
                (m.dev(), m.ino())
            };
            let staged = Staged {
                gitdir: g.clone(),
                owner: Some(OWNER),
                identity: id(&g),
                config_identity: Some(id(&g.join("config"))),
                subdirs: Vec::new(),
                copied: Vec::new(),
                protected: vec!["config".into()],
            };
            let copy = tmp.path().join("copy");
            let snapshot = stage(&staged, &copy, Some((OWNER, OWNER))).unwrap();
            write(&copy.join("rootsecret"), "root's secret\n", 0o600, None);
            std::fs::create_dir(copy.join("logs")).unwrap();
            write(&copy.join("logs/HEAD"), "root's log\n", 0o600, None);
            write(&copy.join("mine"), "the owner's\n", 0o644, Some(OWNER));
            let _ = reconcile(
                &staged,
                &snapshot,
                &copy,
                &[tmp.path().to_path_buf()],
                (root_caller, root_caller.then_some(OWNER)),
            );
            assert!(g.join("mine.stockade-refused").exists(), "control");
            assert_eq!(
                g.join("rootsecret.stockade-refused").exists(),
                !root_caller,
                "root's file came back (root caller: {root_caller})"
            );
            assert_eq!(g.join("logs").exists(), !root_caller);
        }
    }
}
