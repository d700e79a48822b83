//! Reading a change set: the upper layer walked against the workspace (the lower layer),
//! both through directory descriptors, never following a link.
//!
//! The walk visits the upper depth first, names sorted by their bytes. Every upper entry
//! feeds the digest (relative path, type, permission bits, size, and the content's SHA-256,
//! a link's target, a whiteout or an opaque mark); compared with the lower it becomes a
//! change, an unchanged copy, or (a directory present in both with the same mode) nothing but
//! a container.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType as Ft, OFlags, Stat};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use super::{Base, BaseState, ChangeKind, ChangesError, FileType, Recorded};
use crate::beneath::{errno_io, list, open_child, stat_child};

/// Deeper upper trees are refused (the walk holds two descriptors per level).
pub(crate) const MAX_DEPTH: usize = 256;

/// Larger upper files make the change set unreadable ([`ChangesError::Unsupported`]): every
/// read of the change set hashes each file whole, and a sparse file costs nothing to make
/// (`truncate -s 16T`) but hours to hash, and as much disk to apply.
pub(crate) const MAX_FILE_BYTES: u64 = 64 << 30;

/// Where the upper cannot tell when the run first wrote an entry (no birth time), a ctime
/// this close before the run's start counts as during the run: the kernel stamps ctimes from
/// a clock that lags the one `started` is read from by up to a tick.
pub(crate) const CTIME_SLACK_NS: u128 = 20_000_000;

/// When the upper entry `name` of `dir` was made (statx birth time, in nanoseconds since the
/// epoch): the moment the run first wrote that path (overlayfs copies a file up, or makes a
/// whiteout, when the command first changes it). `None` where the filesystem keeps none.
pub(crate) fn birth_ns(dir: BorrowedFd<'_>, name: &OsStr) -> Option<u128> {
    let flags = rustix::fs::AtFlags::SYMLINK_NOFOLLOW | rustix::fs::AtFlags::STATX_DONT_SYNC;
    let flags = if name.is_empty() {
        flags | rustix::fs::AtFlags::EMPTY_PATH
    } else {
        flags
    };
    let st = rustix::fs::statx(dir, name, flags, rustix::fs::StatxFlags::BTIME).ok()?;
    if st.stx_mask & rustix::fs::StatxFlags::BTIME.bits() == 0 {
        return None;
    }
    let secs = u128::try_from(st.stx_btime.tv_sec).ok()?;
    Some(secs * 1_000_000_000 + u128::from(st.stx_btime.tv_nsec))
}

/// Whether the host changed a workspace path (its ctime `changed`, 0: absent) after the run
/// read it: after the run first wrote the path (`written`: the upper entry's birth time),
/// else, where that is unknown, after the run started. A change made before the run wrote
/// the path is what the run saw and built on: not a conflict.
fn changed_after_the_run_read_it(changed: u128, written: Option<u128>, started: u128) -> bool {
    changed > 0
        && match written {
            Some(w) => changed > w,
            None => changed + CTIME_SLACK_NS > started,
        }
}

/// Which xattr namespace carries overlayfs's own marks in the upper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marks {
    /// A privileged overlay (root caller): `trusted.overlay.*`.
    Trusted,
    /// A `userxattr` overlay in a user namespace: `user.overlay.*`.
    User,
}

impl Marks {
    pub(crate) fn for_caller(uid: u32) -> Marks {
        if uid == 0 {
            Marks::Trusted
        } else {
            Marks::User
        }
    }

    fn prefix(self) -> &'static [u8] {
        match self {
            Marks::Trusted => b"trusted.overlay.",
            Marks::User => b"user.overlay.",
        }
    }

    /// The name of the opaque-directory mark in this namespace.
    pub(crate) fn opaque_name(self) -> Vec<u8> {
        [self.prefix(), b"opaque"].concat()
    }
}

/// The two layers: the upper, and (to compare) the workspace.
pub(crate) struct Layers<'a> {
    pub(crate) upper: BorrowedFd<'a>,
    pub(crate) upper_path: &'a Path,
    /// `None`: the digest only.
    pub(crate) lower: Option<(BorrowedFd<'a>, &'a Path)>,
    pub(crate) marks: Marks,
    pub(crate) started_ns: u128,
    /// Whether files' contents are read (and hashed). Without them (and without a lower)
    /// only [`Scan::shape_digest`] means anything.
    pub(crate) content: bool,
}

/// What a walk found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub(crate) entries: Vec<Recorded>,
    pub(crate) unchanged_copies: usize,
    pub(crate) digest: String,
    /// The digest of everything but files' contents (names, types, modes, sizes, link
    /// targets, whiteouts, opaque marks): what `apply` checks before writing anything, each
    /// file's content then being checked against its recorded hash as it is copied.
    pub(crate) shape_digest: String,
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// SHA-256 (hex) of what `fd` reads, and whether it starts with `#!`.
pub(crate) fn hash_fd(fd: OwnedFd) -> io::Result<(String, bool)> {
    let mut file = std::fs::File::from(fd);
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut head: Vec<u8> = Vec::with_capacity(2);
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = buf.get(..n).unwrap_or_default();
        if head.len() < 2 {
            head.extend(chunk.iter().take(2 - head.len()));
        }
        h.update(chunk);
    }
    Ok((hex(&h.finalize()), head == b"#!"))
}

/// Opens the regular file `name` in `dir` for reading, checking it still is one.
pub(crate) fn open_regular(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    let fd = open_child(dir, name, OFlags::RDONLY | OFlags::NONBLOCK)?;
    let st = rustix::fs::fstat(&fd).map_err(errno_io)?;
    if Ft::from_raw_mode(st.st_mode) != Ft::RegularFile {
        return Err(io::Error::other("it is no longer a regular file"));
    }
    Ok(fd)
}

pub(crate) fn ctime_ns(st: &Stat) -> u128 {
    let secs = u128::try_from(st.st_ctime).unwrap_or(0);
    secs * 1_000_000_000 + st.st_ctime_nsec as u128
}

pub(crate) fn perm(st: &Stat) -> u32 {
    st.st_mode & 0o7777
}

pub(crate) fn file_type(st: &Stat) -> FileType {
    match Ft::from_raw_mode(st.st_mode) {
        Ft::RegularFile => FileType::File,
        Ft::Directory => FileType::Dir,
        Ft::Symlink => FileType::Symlink,
        _ => FileType::Other,
    }
}

pub(crate) fn is_whiteout(st: &Stat) -> bool {
    Ft::from_raw_mode(st.st_mode) == Ft::CharacterDevice && st.st_rdev == 0
}

pub(crate) fn read_link(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<PathBuf> {
    let target = rustix::fs::readlinkat(dir, name, Vec::new()).map_err(errno_io)?;
    Ok(PathBuf::from(OsString::from_vec(target.into_bytes())))
}

/// SHA-256 over what lies at and below the directory `name` in `dir` (names, types, modes,
/// sizes, inode numbers, ctimes), and the latest ctime there: any change below it changes
/// one of them.
pub(crate) fn tree_signature(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<(String, u128)> {
    fn visit(
        dir: BorrowedFd<'_>,
        rel: &Path,
        h: &mut Sha256,
        latest: &mut u128,
        depth: usize,
    ) -> io::Result<()> {
        if depth > MAX_DEPTH * 4 {
            return Err(io::Error::other("the directory tree is too deep"));
        }
        for name in list(dir)? {
            let Some(st) = stat_child(dir, &name)? else {
                continue;
            };
            let child = rel.join(&name);
            let p = child.as_os_str().as_bytes();
            h.update((p.len() as u64).to_le_bytes());
            h.update(p);
            h.update(st.st_mode.to_le_bytes());
            h.update((st.st_size as u64).to_le_bytes());
            h.update(st.st_ino.to_le_bytes());
            let c = ctime_ns(&st);
            h.update(c.to_le_bytes());
            *latest = (*latest).max(c);
            if Ft::from_raw_mode(st.st_mode) == Ft::Directory {
                let fd = open_child(dir, &name, OFlags::RDONLY | OFlags::DIRECTORY)?;
                visit(fd.as_fd(), &child, h, latest, depth + 1)?;
            }
        }
        Ok(())
    }
    let top = stat_child(dir, name)?.ok_or_else(|| errno_io(Errno::NOENT))?;
    let mut h = Sha256::new();
    let mut latest = ctime_ns(&top);
    h.update(top.st_mode.to_le_bytes());
    h.update(top.st_ino.to_le_bytes());
    h.update(latest.to_le_bytes());
    let fd = open_child(dir, name, OFlags::RDONLY | OFlags::DIRECTORY)?;
    visit(fd.as_fd(), Path::new(""), &mut h, &mut latest, 0)?;
    Ok((hex(&h.finalize()), latest))
}

/// The state of `name` in `dir` (whose stat is `st`), as a base records it; `whole`: a
/// directory is dropped whole (its tree signature is taken). Returns the latest ctime seen.
pub(crate) fn state_of(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    st: &Stat,
    whole: bool,
) -> io::Result<(BaseState, u128)> {
    let mode = perm(st);
    Ok(match Ft::from_raw_mode(st.st_mode) {
        Ft::RegularFile => {
            let (sha256, _) = hash_fd(open_regular(dir, name)?)?;
            (BaseState::File { sha256, mode }, ctime_ns(st))
        }
        Ft::Symlink => (
            BaseState::Symlink {
                target: read_link(dir, name)?,
            },
            ctime_ns(st),
        ),
        Ft::Directory if whole => {
            let (tree, latest) = tree_signature(dir, name)?;
            (
                BaseState::Dir {
                    mode,
                    tree: Some(tree),
                },
                latest,
            )
        }
        Ft::Directory => (BaseState::Dir { mode, tree: None }, ctime_ns(st)),
        _ => (
            BaseState::Other {
                mode,
                rdev: st.st_rdev,
            },
            ctime_ns(st),
        ),
    })
}

/// Reads the change set (or, without a lower, only the digest).
pub(crate) fn read(layers: &Layers<'_>) -> Result<Scan, ChangesError> {
    let mut w = Walker {
        l: layers,
        hasher: Sha256::new(),
        shape: Sha256::new(),
        scan: Scan::default(),
        written: None,
    };
    let root_st = rustix::fs::fstat(layers.upper).map_err(|e| w.upper_err(Path::new(""), e))?;
    if w.opaque(layers.upper, Path::new(""), true)? {
        return Err(ChangesError::Unsupported {
            path: layers.upper_path.to_path_buf(),
            reason: "the upper's top directory carries an opaque mark".into(),
        });
    }
    w.record(Path::new(""), b'd', perm(&root_st), 0, b"");
    let in_git = w.git_shaped(
        layers.upper,
        layers.lower.map(|l| l.0),
        false,
        Path::new(""),
    )?;
    w.walk_dir(
        layers.upper,
        layers.lower.map(|l| l.0),
        Path::new(""),
        false,
        in_git,
        0,
    )?;
    let mut scan = w.scan;
    // What an opaque directory drops is found after what the upper holds there.
    scan.entries.sort_by(|a, b| a.path.cmp(&b.path));
    scan.digest = format!("sha256:{}", hex(&w.hasher.finalize()));
    scan.shape_digest = format!("sha256:{}", hex(&w.shape.finalize()));
    Ok(scan)
}

struct Walker<'a, 'b> {
    l: &'a Layers<'b>,
    hasher: Sha256,
    shape: Sha256,
    scan: Scan,
    /// The birth time of the upper entry being recorded ([`birth_ns`]).
    written: Option<u128>,
}

impl Layers<'_> {
    fn upper_err(&self, rel: &Path, e: impl Into<io::Error>) -> ChangesError {
        ChangesError::Read {
            path: self.upper_path.join(rel),
            cause: e.into(),
        }
    }

    fn lower_err(&self, rel: &Path, e: impl Into<io::Error>) -> ChangesError {
        let base = self.lower.map(|l| l.1).unwrap_or(Path::new(""));
        ChangesError::Read {
            path: base.join(rel),
            cause: e.into(),
        }
    }
}

impl Walker<'_, '_> {
    fn upper_err(&self, rel: &Path, e: impl Into<io::Error>) -> ChangesError {
        self.l.upper_err(rel, e)
    }

    fn lower_err(&self, rel: &Path, e: impl Into<io::Error>) -> ChangesError {
        self.l.lower_err(rel, e)
    }

    fn record(&mut self, rel: &Path, kind: u8, mode: u32, size: u64, detail: &[u8]) {
        let p = rel.as_os_str().as_bytes();
        // A file's detail is its content's hash: left out of the shape.
        let shape_detail: &[u8] = if kind == b'f' { b"" } else { detail };
        for (h, detail) in [(&mut self.hasher, detail), (&mut self.shape, shape_detail)] {
            h.update((p.len() as u64).to_le_bytes());
            h.update(p);
            h.update([kind]);
            h.update(mode.to_le_bytes());
            h.update(size.to_le_bytes());
            h.update((detail.len() as u64).to_le_bytes());
            h.update(detail);
        }
    }

    /// Whether the upper entry `fd` carries an opaque mark; refuses marks stockade's overlay
    /// never makes. Escaped xattrs (`*.overlay.overlay.*`, the command's own) are data.
    fn opaque(&self, fd: BorrowedFd<'_>, rel: &Path, is_dir: bool) -> Result<bool, ChangesError> {
        let mut buf = vec![0u8; 4096];
        let n = loop {
            match rustix::fs::flistxattr(fd, &mut buf[..]) {
                Ok(n) => break n,
                Err(Errno::RANGE) => {
                    let need =
                        rustix::fs::flistxattr_query(fd).map_err(|e| self.upper_err(rel, e))?;
                    buf.resize(need.max(buf.len() * 2), 0);
                }
                Err(Errno::NOTSUP) => return Ok(false),
                Err(e) => return Err(self.upper_err(rel, e)),
            }
        };
        let prefix = self.l.marks.prefix();
        let mut opaque = false;
        for name in buf.get(..n).unwrap_or_default().split(|&b| b == 0) {
            let Some(mark) = name.strip_prefix(prefix) else {
                continue;
            };
            if mark.starts_with(b"overlay.") {
                continue;
            }
            let refuse = |what: &str| ChangesError::Unsupported {
                path: self.l.upper_path.join(rel),
                reason: format!(
                    "it carries the overlay mark {} ({what})",
                    String::from_utf8_lossy(name)
                ),
            };
            match mark {
                b"opaque" if is_dir => {
                    let mut v = [0u8; 16];
                    let len = rustix::fs::fgetxattr(fd, name, &mut v[..])
                        .map_err(|e| self.upper_err(rel, e))?;
                    if v.get(..len) != Some(b"y") {
                        return Err(refuse("an opaque mark other than \"y\""));
                    }
                    opaque = true;
                }
                b"redirect" | b"metacopy" | b"whiteout" | b"whiteouts" | b"opaque" => {
                    return Err(refuse("stockade's overlay never makes it"))
                }
                _ => {}
            }
        }
        Ok(opaque)
    }

    /// Whether the merged directory looks like a git dir to git: `HEAD`, and `refs`,
    /// `objects` or `commondir`.
    fn git_shaped(
        &self,
        up: BorrowedFd<'_>,
        low: Option<BorrowedFd<'_>>,
        hidden: bool,
        rel: &Path,
    ) -> Result<bool, ChangesError> {
        let has = |name: &str| -> Result<bool, ChangesError> {
            let name = OsStr::new(name);
            match stat_child(up, name).map_err(|e| self.upper_err(rel, e))? {
                Some(st) => return Ok(!is_whiteout(&st)),
                None if hidden => return Ok(false),
                None => {}
            }
            match low {
                Some(l) => Ok(stat_child(l, name)
                    .map_err(|e| self.lower_err(rel, e))?
                    .is_some()),
                None => Ok(false),
            }
        };
        Ok(has("HEAD")? && (has("refs")? || has("objects")? || has("commondir")?))
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        rel: &Path,
        kind: ChangeKind,
        file_type: FileType,
        up: Option<&Stat>,
        content: (Option<String>, Option<PathBuf>, bool),
        in_git_dir: bool,
        base: (BaseState, u128),
    ) {
        let (sha256, symlink_target, script) = content;
        let size = match (file_type, up) {
            (FileType::File, Some(st)) => st.st_size as u64,
            _ => symlink_target
                .as_ref()
                .map_or(0, |t| t.as_os_str().len() as u64),
        };
        self.scan.entries.push(Recorded {
            path: rel.to_path_buf(),
            kind,
            file_type,
            mode: up.map(perm),
            size,
            sha256,
            symlink_target,
            script,
            in_git_dir,
            base: Base {
                state: base.0,
                changed_during_run: changed_after_the_run_read_it(
                    base.1,
                    self.written,
                    self.l.started_ns,
                ),
            },
        });
    }

    fn walk_dir(
        &mut self,
        up: BorrowedFd<'_>,
        low: Option<BorrowedFd<'_>>,
        rel: &Path,
        hidden: bool,
        in_git: bool,
        depth: usize,
    ) -> Result<(), ChangesError> {
        if depth >= MAX_DEPTH {
            return Err(ChangesError::Unsupported {
                path: self.l.upper_path.join(rel),
                reason: format!("the change set is nested deeper than {MAX_DEPTH} directories"),
            });
        }
        let names = list(up).map_err(|e| self.upper_err(rel, e))?;
        for name in &names {
            self.entry(up, low, rel, name, hidden, in_git, depth)?;
        }
        // Below an opaque directory, what the workspace has and the upper does not is gone.
        if let (true, Some(low)) = (hidden, low) {
            // Gone with the directory the run replaced, when it replaced it.
            self.written = birth_ns(up, OsStr::new(""));
            for name in list(low).map_err(|e| self.lower_err(rel, e))? {
                if names
                    .binary_search_by(|n| n.as_bytes().cmp(name.as_bytes()))
                    .is_ok()
                {
                    continue;
                }
                let child = rel.join(&name);
                let Some(ls) = stat_child(low, &name).map_err(|e| self.lower_err(&child, e))?
                else {
                    continue;
                };
                let base =
                    state_of(low, &name, &ls, true).map_err(|e| self.lower_err(&child, e))?;
                let ft = file_type(&ls);
                self.push(
                    &child,
                    ChangeKind::Deleted,
                    ft,
                    None,
                    (None, None, false),
                    in_git,
                    base,
                );
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn entry(
        &mut self,
        up: BorrowedFd<'_>,
        low: Option<BorrowedFd<'_>>,
        dir_rel: &Path,
        name: &OsStr,
        hidden: bool,
        in_git: bool,
        depth: usize,
    ) -> Result<(), ChangesError> {
        let rel = dir_rel.join(name);
        let st = stat_child(up, name)
            .map_err(|e| self.upper_err(&rel, e))?
            .ok_or_else(|| self.upper_err(&rel, Errno::NOENT))?;
        self.written = birth_ns(up, name);
        let compare = self.l.lower.is_some();
        let lower = match low {
            Some(l) => stat_child(l, name).map_err(|e| self.lower_err(&rel, e))?,
            None => None,
        };
        let mode = perm(&st);
        let layers = self.l;
        let lower_state = |whole: bool| -> Result<(BaseState, u128), ChangesError> {
            match (&lower, low) {
                (Some(ls), Some(l)) => {
                    state_of(l, name, ls, whole).map_err(|e| layers.lower_err(&rel, e))
                }
                _ => Ok((BaseState::Absent, 0)),
            }
        };
        match Ft::from_raw_mode(st.st_mode) {
            Ft::Directory => {
                let fd = open_child(up, name, OFlags::RDONLY | OFlags::DIRECTORY)
                    .map_err(|e| self.upper_err(&rel, e))?;
                let opaque = self.opaque(fd.as_fd(), &rel, true)?;
                self.record(&rel, b'd', mode, 0, if opaque { b"opaque" } else { b"" });
                let mut child_low = None;
                if compare {
                    let none = (None, None, false);
                    match &lower {
                        None => {
                            let base = (BaseState::Absent, 0);
                            self.push(
                                &rel,
                                ChangeKind::Added,
                                FileType::Dir,
                                Some(&st),
                                none,
                                in_git,
                                base,
                            );
                        }
                        Some(ls) if file_type(ls) == FileType::Dir => {
                            let from = perm(ls);
                            let base = lower_state(false)?;
                            if opaque && !hidden {
                                self.push(
                                    &rel,
                                    ChangeKind::ReplacedDir,
                                    FileType::Dir,
                                    Some(&st),
                                    none,
                                    in_git,
                                    base,
                                );
                            } else if from != mode {
                                let kind = ChangeKind::ModeChanged { from, to: mode };
                                self.push(&rel, kind, FileType::Dir, Some(&st), none, in_git, base);
                            }
                            if let Some(l) = low {
                                let fd = open_child(l, name, OFlags::RDONLY | OFlags::DIRECTORY)
                                    .map_err(|e| self.lower_err(&rel, e))?;
                                child_low = Some(fd);
                            }
                        }
                        Some(_) => {
                            let base = lower_state(true)?;
                            self.push(
                                &rel,
                                ChangeKind::TypeChanged,
                                FileType::Dir,
                                Some(&st),
                                none,
                                in_git,
                                base,
                            );
                        }
                    }
                }
                let hidden = hidden || opaque;
                let cl = child_low.as_ref().map(|f| f.as_fd());
                let git = in_git || self.git_shaped(fd.as_fd(), cl, hidden, &rel)?;
                self.walk_dir(fd.as_fd(), cl, &rel, hidden, git, depth + 1)?;
            }
            Ft::RegularFile => {
                if st.st_size as u64 > MAX_FILE_BYTES {
                    return Err(ChangesError::Unsupported {
                        path: self.l.upper_path.join(&rel),
                        reason: format!(
                            "a file of {} bytes, over the {MAX_FILE_BYTES} a change set may hold",
                            st.st_size
                        ),
                    });
                }
                let fd = open_regular(up, name).map_err(|e| self.upper_err(&rel, e))?;
                self.opaque(fd.as_fd(), &rel, false)?;
                if !self.l.content && !compare {
                    self.record(&rel, b'f', mode, st.st_size as u64, b"");
                    return Ok(());
                }
                let (sha, script) = hash_fd(fd).map_err(|e| self.upper_err(&rel, e))?;
                self.record(&rel, b'f', mode, st.st_size as u64, sha.as_bytes());
                if !compare {
                    return Ok(());
                }
                let base = lower_state(true)?;
                let kind = match (&lower, &base.0) {
                    (None, _) => ChangeKind::Added,
                    (Some(_), BaseState::File { sha256, mode: from }) if *sha256 == sha => {
                        if *from == mode {
                            self.scan.unchanged_copies += 1;
                            return Ok(());
                        }
                        ChangeKind::ModeChanged {
                            from: *from,
                            to: mode,
                        }
                    }
                    (Some(_), BaseState::File { .. }) => ChangeKind::Modified,
                    (Some(_), _) => ChangeKind::TypeChanged,
                };
                self.push(
                    &rel,
                    kind,
                    FileType::File,
                    Some(&st),
                    (Some(sha), None, script),
                    in_git,
                    base,
                );
            }
            Ft::Symlink => {
                let target = read_link(up, name).map_err(|e| self.upper_err(&rel, e))?;
                let t = target.as_os_str().as_bytes();
                self.record(&rel, b'l', mode, t.len() as u64, t);
                if !compare {
                    return Ok(());
                }
                let base = lower_state(true)?;
                let kind = match (&lower, &base.0) {
                    (None, _) => ChangeKind::Added,
                    (Some(_), BaseState::Symlink { target: old }) if *old == target => {
                        self.scan.unchanged_copies += 1;
                        return Ok(());
                    }
                    (Some(_), BaseState::Symlink { .. }) => ChangeKind::Modified,
                    (Some(_), _) => ChangeKind::TypeChanged,
                };
                let content = (None, Some(target), false);
                self.push(
                    &rel,
                    kind,
                    FileType::Symlink,
                    Some(&st),
                    content,
                    in_git,
                    base,
                );
            }
            _ if is_whiteout(&st) => {
                self.record(&rel, b'w', 0, 0, b"");
                if let Some(ls) = &lower {
                    let ft = file_type(ls);
                    let base = lower_state(true)?;
                    self.push(
                        &rel,
                        ChangeKind::Deleted,
                        ft,
                        None,
                        (None, None, false),
                        in_git,
                        base,
                    );
                }
            }
            _ => {
                let mut detail = (st.st_mode & !0o7777).to_le_bytes().to_vec();
                detail.extend(st.st_rdev.to_le_bytes());
                self.record(&rel, b'o', mode, 0, &detail);
                if !compare {
                    return Ok(());
                }
                let base = lower_state(true)?;
                let kind = match (&lower, &base.0) {
                    (None, _) => ChangeKind::Added,
                    (Some(ls), BaseState::Other { mode: from, rdev })
                        if ls.st_mode == st.st_mode && *rdev == st.st_rdev && *from == mode =>
                    {
                        self.scan.unchanged_copies += 1;
                        return Ok(());
                    }
                    (Some(ls), BaseState::Other { .. })
                        if ls.st_mode & !0o7777 == st.st_mode & !0o7777 =>
                    {
                        ChangeKind::Modified
                    }
                    (Some(_), _) => ChangeKind::TypeChanged,
                };
                self.push(
                    &rel,
                    kind,
                    FileType::Other,
                    Some(&st),
                    (None, None, false),
                    in_git,
                    base,
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod conflict_time_tests {
    use super::*;

    #[test]
    fn a_change_counts_only_after_the_run_first_wrote_the_path() {
        let started = 1_000_000_000_000;
        let wrote = started + 5_000_000_000;
        // Changed by the host before the run wrote it: what the run saw. Not a conflict.
        assert!(!changed_after_the_run_read_it(
            started + 1,
            Some(wrote),
            started
        ));
        assert!(!changed_after_the_run_read_it(wrote, Some(wrote), started));
        // Changed after the run wrote it: the run never saw that version.
        assert!(changed_after_the_run_read_it(
            wrote + 1,
            Some(wrote),
            started
        ));
        // Edited just before the run started, with a birth time: fine (the old slack
        // refused this).
        assert!(!changed_after_the_run_read_it(
            started - 1_000_000,
            Some(wrote),
            started
        ));
        // No birth time: the start and its slack decide.
        assert!(changed_after_the_run_read_it(
            started - 1_000_000,
            None,
            started
        ));
        assert!(!changed_after_the_run_read_it(
            started - CTIME_SLACK_NS,
            None,
            started
        ));
        assert!(!changed_after_the_run_read_it(0, None, started));
    }
}
