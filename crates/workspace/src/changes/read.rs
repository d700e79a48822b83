//! Reading a change set: the upper layer walked against the workspace (the lower layer),
//! both through directory descriptors, never following a link.
//!
//! The walk visits the upper depth first, names sorted by their bytes. Every upper entry
//! feeds the digest (relative path, type, permission bits, size, and the content's identity
//! ([`BlockHasher`]), a link's target, a whiteout or an opaque mark); compared with the lower
//! it becomes a change, an unchanged copy, or (a directory present in both with the same mode)
//! nothing but a container. A file with several names (hard links) is read once.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType as Ft, OFlags, Stat};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use super::{Base, BaseState, ChangeKind, ChangesError, Content, FileType, Recorded};
use crate::beneath::{errno_io, list, open_child, stat_child};

/// Deeper upper trees are refused (the walk holds two descriptors per level).
pub(crate) const MAX_DEPTH: usize = 256;

/// Larger upper files without holes make the change set unreadable
/// ([`ChangesError::Unsupported`]): every read of the change set hashes each file whole. A
/// file with holes costs nothing to make (`truncate -s 16T`): it is read through its data
/// extents only ([`nonzero_blocks`]), and it is more than this many bytes of data that is
/// refused.
pub(crate) const MAX_FILE_BYTES: u64 = 64 << 30;

/// The kernel stamps ctimes from a clock that lags the one the run's start is read from by up
/// to a tick: a ctime this close before the start may be of a change made after it.
pub(crate) const CTIME_SLACK_NS: u128 = 20_000_000;

/// How coarse the filesystem that stamped the ctime `changed` may be: the coarsest of 2 s
/// (FAT), 1 s, 100 ms, 10 ms, 1 ms and 1 µs that divides it. A filesystem stamping whole
/// seconds makes every ctime a multiple of one; a finer one rarely does, and taking it for
/// coarser only widens the window that counts as a conflict.
pub(crate) fn granularity_ns(changed: u128) -> u128 {
    [
        2_000_000_000,
        1_000_000_000,
        100_000_000,
        10_000_000,
        1_000_000,
        1_000,
    ]
    .into_iter()
    .find(|g| changed.is_multiple_of(*g))
    .unwrap_or(1)
}

/// Whether the host may have changed a workspace path (its ctime `changed`, 0: absent) after
/// the run started (`started`): its ctime is not clearly before the start, by more than the
/// clock's lag and the filesystem's granularity.
///
/// Whether the change came before or after the run first *wrote* the path does not matter:
/// the run may have read the path at any moment after it started (a command reads a file,
/// then writes its edited version by a rename, or much later), so a host change made after
/// the start is not known to be in the run's version, however its time compares with the
/// upper entry's. No timestamp is compared with another at a tick's precision: a host edit
/// in the same tick as the run's first write is a conflict like any other.
fn changed_since_start(changed: u128, started: u128) -> bool {
    changed > 0 && changed + CTIME_SLACK_NS + granularity_ns(changed) > started
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
    /// The permission bits the run gave entries the supervisor had to open up to read them
    /// (`run::open_up_tree`), by path relative to the upper: the changes record these (and
    /// `apply` writes them); the digests, what the upper holds.
    pub(crate) run_modes: &'a RunModes,
}

/// See [`Layers::run_modes`].
pub(crate) type RunModes = std::collections::BTreeMap<PathBuf, u32>;

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

/// What [`hash_file`] found.
#[derive(Clone)]
pub(crate) struct Hashed {
    pub(crate) sha256: String,
    /// The file has a hole: its content is [`Content::Binary`] whatever its size.
    pub(crate) sparse: bool,
    /// It starts with `#!`.
    pub(crate) script: bool,
    /// `None` when not asked for.
    pub(crate) content: Option<Content>,
}

/// The blocks a sparse file is read, hashed and copied in: aligned on this many bytes.
pub(crate) const BLOCK: u64 = 4096;

/// Whether `file` (of `size` bytes) has a hole: `SEEK_HOLE` from its start stops before its
/// end. A filesystem that does not report holes reports none.
pub(crate) fn has_hole(file: &std::fs::File, size: u64) -> io::Result<bool> {
    if size == 0 {
        return Ok(false);
    }
    let hole = match rustix::fs::seek(file, rustix::fs::SeekFrom::Hole(0)) {
        Ok(hole) => hole < size,
        Err(Errno::NXIO | Errno::INVAL) => false,
        Err(e) => return Err(errno_io(e)),
    };
    rustix::fs::seek(file, rustix::fs::SeekFrom::Start(0)).map_err(errno_io)?;
    Ok(hole)
}

/// Copies `src` to `out` (a new, empty file), returning the content identity of what was
/// copied ([`hash_file`]'s). A file with a hole is copied as one: only its non-zero blocks
/// are written, at their offsets, and `out` is given `src`'s size, so what was a hole (or a
/// block of zeros) stays a hole where the filesystem has them, and copying a
/// `truncate -s 60G` file writes nothing. A file without holes is copied byte for byte.
/// Either way the identity is the [`BlockHasher`]'s of the bytes: the same whatever the
/// layout.
pub(crate) fn copy_file(src: &std::fs::File, out: &std::fs::File) -> io::Result<String> {
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    let size = rustix::fs::fstat(src).map_err(errno_io)?.st_size as u64;
    let mut h = BlockHasher::new();
    if has_hole(src, size)? {
        nonzero_blocks(src, size, |offset, bytes| {
            h.block(offset, bytes);
            out.write_all_at(bytes, offset)
        })?;
        out.set_len(size)?;
        return Ok(h.finish(size));
    }
    let mut to = out;
    let copied = dense_chunks(src, |offset, chunk| {
        h.data(offset, chunk);
        to.write_all(chunk)
    })?;
    Ok(h.finish(copied))
}

#[cfg(test)]
thread_local! {
    /// Bytes of files' contents this thread read ([`dense_chunks`], [`nonzero_blocks`]).
    pub(crate) static BYTES_READ: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Reads `file` from where it stands to its end in chunks of a whole number of [`BLOCK`]s
/// (but the last), calling `each(offset, chunk)` for each; returns the bytes read.
fn dense_chunks(
    mut file: &std::fs::File,
    mut each: impl FnMut(u64, &[u8]) -> io::Result<()>,
) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * BLOCK as usize];
    let mut total = 0u64;
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            match file.read(buf.get_mut(filled..).unwrap_or_default()) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        if filled == 0 {
            return Ok(total);
        }
        each(total, buf.get(..filled).unwrap_or_default())?;
        total += filled as u64;
        #[cfg(test)]
        BYTES_READ.with(|c| c.set(c.get() + filled as u64));
        if filled < buf.len() {
            return Ok(total);
        }
    }
}

/// Calls `each(offset, bytes)` for every [`BLOCK`]-aligned block of `file` (the last one cut
/// at `size`) that holds a byte other than zero, in order, reading only the file's data
/// extents (`SEEK_DATA`/`SEEK_HOLE`): what lies in a hole reads as zeros, so no such block
/// lies there. The cost is the data the file holds, not its apparent size: a
/// `truncate -s 60G` file is a few system calls. Which blocks are passed depends only on the
/// bytes, not on where the filesystem put its holes. Returns the bytes read; more than
/// [`MAX_FILE_BYTES`] is refused.
pub(crate) fn nonzero_blocks(
    file: &std::fs::File,
    size: u64,
    mut each: impl FnMut(u64, &[u8]) -> io::Result<()>,
) -> io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 64 * BLOCK as usize];
    let (mut pos, mut read) = (0u64, 0u64);
    while pos < size {
        let data = match rustix::fs::seek(file, rustix::fs::SeekFrom::Data(pos)) {
            Ok(d) => d,
            Err(Errno::NXIO) => break,
            Err(e) => return Err(errno_io(e)),
        };
        let start = (data / BLOCK * BLOCK).max(pos);
        if start >= size {
            break;
        }
        let hole = match rustix::fs::seek(file, rustix::fs::SeekFrom::Hole(data)) {
            Ok(h) => h,
            Err(Errno::NXIO) => size,
            Err(e) => return Err(errno_io(e)),
        };
        let end = hole
            .div_ceil(BLOCK)
            .saturating_mul(BLOCK)
            .max(start + BLOCK)
            .min(size);
        let mut off = start;
        while off < end {
            let want = usize::try_from((end - off).min(buf.len() as u64)).unwrap_or(buf.len());
            let chunk = buf.get_mut(..want).unwrap_or_default();
            file.read_exact_at(chunk, off).map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => {
                    io::Error::other("the file shrank while it was read")
                }
                _ => e,
            })?;
            read += want as u64;
            #[cfg(test)]
            BYTES_READ.with(|c| c.set(c.get() + want as u64));
            if read > MAX_FILE_BYTES {
                return Err(io::Error::new(
                    io::ErrorKind::FileTooLarge,
                    format!("over {MAX_FILE_BYTES} bytes of data, more than a change set may hold"),
                ));
            }
            for (i, block) in chunk.chunks(BLOCK as usize).enumerate() {
                if block.iter().any(|&b| b != 0) {
                    each(off + i as u64 * BLOCK, block)?;
                }
            }
            off += want as u64;
        }
        pos = end;
    }
    Ok(read)
}

/// What opens a file's identity (see [`BlockHasher`]). Change sets of format 1 named files
/// without holes by the SHA-256 of their bytes and files with holes by a hash opened with
/// another tag (`stockade sparse file v1`): this tag is not that one, and no identity of this
/// format is a plain SHA-256.
const BLOCK_TAG: &[u8] = b"stockade file blocks v2\0";

/// The content identity of every file (format 2): SHA-256 over [`BLOCK_TAG`], each
/// [`BLOCK`]-aligned block holding a byte other than zero as its offset (8 bytes, little
/// endian) and its bytes (the last block cut at the file's end), in order, and the file's
/// size (8 bytes). A function of the bytes alone: a block of zeros is left out whether it
/// lies in a hole, in an unwritten extent, or is written as data, so no layout of the same
/// bytes (which ext4 reports differently as pages enter and leave the cache) gives another
/// identity. The encoding is injective: all blocks but a cut last one are [`BLOCK`] bytes,
/// so the input's length tells where each field lies.
pub(crate) struct BlockHasher(Sha256);

impl BlockHasher {
    pub(crate) fn new() -> BlockHasher {
        let mut h = Sha256::new();
        h.update(BLOCK_TAG);
        BlockHasher(h)
    }

    /// One block at `offset` (a multiple of [`BLOCK`]); a block of zeros counts for nothing.
    pub(crate) fn block(&mut self, offset: u64, bytes: &[u8]) {
        if bytes.iter().all(|&b| b == 0) {
            return;
        }
        self.0.update(offset.to_le_bytes());
        self.0.update(bytes);
    }

    /// Consecutive bytes from `offset` (a multiple of [`BLOCK`]), cut into blocks.
    pub(crate) fn data(&mut self, offset: u64, bytes: &[u8]) {
        for (i, block) in bytes.chunks(BLOCK as usize).enumerate() {
            self.block(offset + i as u64 * BLOCK, block);
        }
    }

    pub(crate) fn finish(mut self, size: u64) -> String {
        self.0.update(size.to_le_bytes());
        hex(&self.0.finalize())
    }
}

/// Why a sparse file is no text a reviewer can judge.
fn sparse_why(size: u64, data: u64) -> String {
    format!("a sparse file of {size} bytes, {data} of them in data extents, the rest holes that read as NUL bytes")
}

/// Reads `file`: its content identity ([`BlockHasher`]), whether it starts with `#!`, and
/// (`classify`) what its content is to a reviewer ([`TextCheck`]).
///
/// A file with a hole ([`has_hole`]) is read through its data extents only, and its content
/// is [`Content::Binary`] (its holes read as NUL bytes); a file without one is read whole.
/// The identity does not depend on which way it was read: the same bytes have the same
/// identity whatever the filesystem reports as holes now (ext4 reports an unwritten extent,
/// `fallocate`'s, as data while its pages are cached and as a hole after), and other bytes
/// another. A run's sparse file (`truncate -s 60G f`) costs what it wrote, not its apparent
/// size.
pub(crate) fn hash_file(file: &mut std::fs::File, classify: bool) -> io::Result<Hashed> {
    let size = rustix::fs::fstat(&*file).map_err(errno_io)?.st_size as u64;
    let mut h = BlockHasher::new();
    if has_hole(file, size)? {
        let mut script = false;
        let data = nonzero_blocks(file, size, |offset, bytes| {
            if offset == 0 {
                script = bytes.starts_with(b"#!");
            }
            h.block(offset, bytes);
            Ok(())
        })?;
        return Ok(Hashed {
            sha256: h.finish(size),
            sparse: true,
            script,
            content: Some(Content::Binary {
                why: sparse_why(size, data),
            }),
        });
    }
    let mut head: Vec<u8> = Vec::with_capacity(2);
    let mut check = classify.then(TextCheck::default);
    let read = dense_chunks(file, |offset, chunk| {
        if head.len() < 2 {
            head.extend(chunk.iter().take(2 - head.len()));
        }
        h.data(offset, chunk);
        if let Some(c) = &mut check {
            c.push(chunk);
        }
        Ok(())
    })?;
    Ok(Hashed {
        sha256: h.finish(read),
        sparse: false,
        script: head == b"#!",
        content: check.map(TextCheck::finish),
    })
}

/// Whether a file's bytes are text `stockade diff` shows as they are, read in chunks: valid
/// UTF-8 without a NUL byte (else `diff` names the file as binary), and without anything
/// the terminal sanitizer removes from what `diff` prints (escape sequences, other control
/// characters, bidi controls, invisible and Tag characters: see [`sanitize::classify`]) or a
/// carriage return that does not end a line (it makes a terminal overwrite the line), and
/// without what a reader may not see the end of: a run of [`MAX_BLANK_RUN`] blanks with more
/// after it on the line (`x = 1<3000 spaces>; os.system(...)`: a pager that chops lines, or
/// a window narrower than the run, shows `x = 1`), or a line over [`MAX_LINE_CHARS`]
/// characters (agents' file tools cut lines there; a minified file is no reviewable text
/// either). A byte-order mark opening the file is text.
#[derive(Default)]
pub(crate) struct TextCheck {
    /// Characters of the current line so far.
    line: u64,
    /// Blanks (spaces, tabs) just before the current character.
    blanks: u64,
    /// Bytes of a UTF-8 sequence the last chunk cut.
    pending: Vec<u8>,
    /// Offset of the next byte (after `pending`).
    offset: u64,
    /// The last character was a carriage return (at this offset).
    cr_at: Option<u64>,
    verdict: Option<Content>,
}

/// Blanks in a row, with more of the line after them, past which a reader may not see the
/// rest ([`TextCheck`]).
pub(crate) const MAX_BLANK_RUN: u64 = 64;

/// Characters of a line past which a reader may not see its end ([`TextCheck`]): Claude
/// Code's Read tool cuts lines at 2000.
pub(crate) const MAX_LINE_CHARS: u64 = 2000;

impl TextCheck {
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        if self.verdict.is_some() {
            return;
        }
        let joined;
        let data: &[u8] = if self.pending.is_empty() {
            chunk
        } else {
            joined = [self.pending.as_slice(), chunk].concat();
            &joined
        };
        let start = self.offset - self.pending.len() as u64;
        let (valid, rest) = match std::str::from_utf8(data) {
            Ok(s) => (s, &[][..]),
            Err(e) => {
                let (ok, rest) = data.split_at(e.valid_up_to());
                if e.error_len().is_some() {
                    self.verdict = Some(Content::Binary {
                        why: format!("not UTF-8 at byte {}", start + ok.len() as u64),
                    });
                }
                (std::str::from_utf8(ok).unwrap_or_default(), rest)
            }
        };
        if self.verdict.is_none() {
            self.check(valid, start);
        }
        if self.verdict.is_none() {
            self.pending = rest.to_vec();
            self.offset = start + data.len() as u64;
        }
    }

    fn check(&mut self, text: &str, start: u64) {
        for (i, c) in text.char_indices() {
            let at = start + i as u64;
            match c {
                '\n' => (self.line, self.blanks) = (0, 0),
                ' ' | '\t' => (self.line, self.blanks) = (self.line + 1, self.blanks + 1),
                '\r' => self.line += 1,
                _ => {
                    if self.blanks >= MAX_BLANK_RUN {
                        self.verdict = Some(Content::Hidden {
                            why: format!("{} blanks before more of the line at byte {at}: a pager that chops lines, or a narrower window, does not show what follows them", self.blanks),
                        });
                        return;
                    }
                    (self.line, self.blanks) = (self.line + 1, 0);
                }
            }
            if self.line > MAX_LINE_CHARS {
                self.verdict = Some(Content::Hidden {
                    why: format!("a line longer than {MAX_LINE_CHARS} characters (at byte {at}): terminals that chop lines and agents' file tools do not show its end"),
                });
                return;
            }
            if let Some(cr) = self.cr_at.take() {
                if c != '\n' {
                    self.verdict = Some(Content::Hidden {
                        why: format!("a carriage return that does not end a line at byte {cr} (a terminal overwrites the line with what follows)"),
                    });
                    return;
                }
            }
            let why = match c {
                '\0' => {
                    self.verdict = Some(Content::Binary {
                        why: format!("a NUL byte at byte {at}"),
                    });
                    return;
                }
                '\r' => {
                    self.cr_at = Some(at);
                    continue;
                }
                '\u{feff}' if at == 0 => continue,
                c => match sanitize::classify(c) {
                    Some(class) => format!("U+{:04X} ({class:?}) at byte {at}", c as u32),
                    None => continue,
                },
            };
            self.verdict = Some(Content::Hidden {
                why: format!("{why}: `stockade diff` does not show it"),
            });
            return;
        }
    }

    pub(crate) fn finish(self) -> Content {
        match self.verdict {
            Some(v) => v,
            None if !self.pending.is_empty() => Content::Binary {
                why: format!("it ends inside a UTF-8 sequence at byte {}", self.offset),
            },
            None => Content::Text,
        }
    }
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

/// A workspace path's state, as a base records it.
pub(crate) struct LowerState {
    pub(crate) state: BaseState,
    /// The latest ctime seen: for a file, taken after its content was read (a change made
    /// while it was read is not missed); for a directory dropped whole, of anything below it.
    pub(crate) ctime: u128,
    /// A file's content, to a reviewer (when asked for).
    pub(crate) content: Option<Content>,
}

impl LowerState {
    pub(crate) fn absent() -> LowerState {
        LowerState {
            state: BaseState::Absent,
            ctime: 0,
            content: None,
        }
    }
}

/// The state of `name` in `dir` (whose stat is `st`), as a base records it; `whole`: a
/// directory is dropped whole (its tree signature is taken); `classify`: a file's content is
/// classified ([`TextCheck`]).
pub(crate) fn state_of(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    st: &Stat,
    whole: bool,
    classify: bool,
) -> io::Result<LowerState> {
    let mode = perm(st);
    let plain = |state| LowerState {
        state,
        ctime: ctime_ns(st),
        content: None,
    };
    Ok(match Ft::from_raw_mode(st.st_mode) {
        Ft::RegularFile => {
            let mut file = std::fs::File::from(open_regular(dir, name)?);
            let small = st.st_size as u64 <= super::diff::MAX_DIFF_BYTES;
            let hashed = hash_file(&mut file, classify && small)?;
            // After the read: a write that landed while it went on shows in this ctime.
            let after = rustix::fs::fstat(&file).map_err(errno_io)?;
            LowerState {
                state: BaseState::File {
                    sha256: hashed.sha256,
                    mode,
                },
                ctime: ctime_ns(st).max(ctime_ns(&after)),
                content: match (classify, small) {
                    (false, _) => None,
                    (true, _) if hashed.sparse => hashed.content,
                    (true, false) => Some(Content::Large),
                    (true, true) => hashed.content,
                },
            }
        }
        Ft::Symlink => plain(BaseState::Symlink {
            target: read_link(dir, name)?,
        }),
        Ft::Directory if whole => {
            let (tree, latest) = tree_signature(dir, name)?;
            LowerState {
                state: BaseState::Dir {
                    mode,
                    tree: Some(tree),
                },
                ctime: latest,
                content: None,
            }
        }
        Ft::Directory => plain(BaseState::Dir { mode, tree: None }),
        _ => plain(BaseState::Other {
            mode,
            rdev: st.st_rdev,
        }),
    })
}

/// Reads the change set (or, without a lower, only the digest).
pub(crate) fn read(layers: &Layers<'_>) -> Result<Scan, ChangesError> {
    let mut w = Walker {
        l: layers,
        hasher: Sha256::new(),
        shape: Sha256::new(),
        scan: Scan::default(),
        read_files: std::collections::HashMap::new(),
        links: std::collections::HashMap::new(),
    };
    let root_st = rustix::fs::fstat(layers.upper).map_err(|e| w.upper_err(Path::new(""), e))?;
    if w.opaque(layers.upper, Path::new(""), true)?.0 {
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
    // The names of one file (hard links) the change holds: each says how many there are.
    for (names, at) in w.links.values() {
        if *names > 1 {
            for i in at {
                if let Some(e) = scan.entries.get_mut(*i) {
                    e.hard_links = *names;
                }
            }
        }
    }
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
    /// What reading each upper file with more than one name found, so that its other names
    /// are not read again.
    read_files: std::collections::HashMap<LinkKey, Hashed>,
    /// For each upper file with more than one name: the names the walk met, and which of
    /// them are recorded changes (indices into `scan.entries`).
    links: std::collections::HashMap<(u64, u64), (u64, Vec<usize>)>,
}

/// An upper file with more than one name: its device and inode number, with its ctime and
/// size, so that an inode number freed and taken again during the walk is not taken for the
/// same file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct LinkKey {
    dev: u64,
    ino: u64,
    ctime: u128,
    size: u64,
}

impl LinkKey {
    fn of(st: &Stat) -> LinkKey {
        LinkKey {
            dev: st.st_dev,
            ino: st.st_ino,
            ctime: ctime_ns(st),
            size: st.st_size as u64,
        }
    }

    fn file(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }
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

    /// Whether the upper entry `fd` carries an opaque mark, and an origin mark (overlayfs
    /// copied it up from the workspace: the workspace had it when the run first wrote it);
    /// refuses marks stockade's overlay never makes. Escaped xattrs (`*.overlay.overlay.*`,
    /// the command's own) are data.
    fn opaque(
        &self,
        fd: BorrowedFd<'_>,
        rel: &Path,
        is_dir: bool,
    ) -> Result<(bool, bool), ChangesError> {
        let mut buf = vec![0u8; 4096];
        let n = loop {
            match rustix::fs::flistxattr(fd, &mut buf[..]) {
                Ok(n) => break n,
                Err(Errno::RANGE) => {
                    let need =
                        rustix::fs::flistxattr_query(fd).map_err(|e| self.upper_err(rel, e))?;
                    buf.resize(need.max(buf.len() * 2), 0);
                }
                Err(Errno::NOTSUP) => return Ok((false, false)),
                Err(e) => return Err(self.upper_err(rel, e)),
            }
        };
        let prefix = self.l.marks.prefix();
        let (mut opaque, mut origin) = (false, false);
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
                b"origin" => origin = true,
                _ => {}
            }
        }
        Ok((opaque, origin))
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
        content: (Option<String>, Option<PathBuf>, bool, Option<Content>),
        in_git_dir: bool,
        base: LowerState,
    ) {
        let (sha256, symlink_target, script, content) = content;
        let size = match (file_type, up) {
            (FileType::File, Some(st)) => st.st_size as u64,
            _ => symlink_target
                .as_ref()
                .map_or(0, |t| t.as_os_str().len() as u64),
        };
        let run_mode = self.l.run_modes.get(rel).copied();
        self.scan.entries.push(Recorded {
            path: rel.to_path_buf(),
            kind,
            file_type,
            hard_links: 0,
            mode: up.map(|st| run_mode.unwrap_or_else(|| perm(st))),
            size,
            sha256,
            symlink_target,
            script,
            in_git_dir,
            content,
            base_content: base.content,
            base: Base {
                state: base.state,
                changed_during_run: changed_since_start(base.ctime, self.l.started_ns),
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
                let base = state_of(low, &name, &ls, true, false)
                    .map_err(|e| self.lower_err(&child, e))?;
                let ft = file_type(&ls);
                self.push(
                    &child,
                    ChangeKind::Deleted,
                    ft,
                    None,
                    (None, None, false, None),
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
        let compare = self.l.lower.is_some();
        let lower = match low {
            Some(l) => stat_child(l, name).map_err(|e| self.lower_err(&rel, e))?,
            None => None,
        };
        // What the upper holds goes into the digests; what the run set, into the changes.
        let up_mode = perm(&st);
        let mode = self.l.run_modes.get(&rel).copied().unwrap_or(up_mode);
        let m = Met {
            up,
            low,
            name,
            rel,
            st,
            lower,
            compare,
            up_mode,
            mode,
            hidden,
            in_git,
            depth,
        };
        match Ft::from_raw_mode(m.st.st_mode) {
            Ft::Directory => self.dir_entry(&m),
            Ft::RegularFile => self.file_entry(&m),
            Ft::Symlink => self.symlink_entry(&m),
            _ if is_whiteout(&m.st) => self.whiteout_entry(&m),
            _ => self.other_entry(&m),
        }
    }

    /// A directory of the upper: recorded, compared with the workspace's, then walked.
    fn dir_entry(&mut self, m: &Met<'_>) -> Result<(), ChangesError> {
        let fd = open_child(m.up, m.name, OFlags::RDONLY | OFlags::DIRECTORY)
            .map_err(|e| self.upper_err(&m.rel, e))?;
        let (opaque, _) = self.opaque(fd.as_fd(), &m.rel, true)?;
        self.record(
            &m.rel,
            b'd',
            m.up_mode,
            0,
            if opaque { b"opaque" } else { b"" },
        );
        let mut child_low = None;
        if m.compare {
            let none = (None, None, false, None);
            match &m.lower {
                None => {
                    let base = LowerState::absent();
                    self.push(
                        &m.rel,
                        ChangeKind::Added,
                        FileType::Dir,
                        Some(&m.st),
                        none,
                        m.in_git,
                        base,
                    );
                }
                Some(ls) if file_type(ls) == FileType::Dir => {
                    let from = perm(ls);
                    let base = m.lower_state(self.l, false)?;
                    if opaque && !m.hidden {
                        self.push(
                            &m.rel,
                            ChangeKind::ReplacedDir,
                            FileType::Dir,
                            Some(&m.st),
                            none,
                            m.in_git,
                            base,
                        );
                    } else if from != m.mode {
                        let kind = ChangeKind::ModeChanged { from, to: m.mode };
                        self.push(
                            &m.rel,
                            kind,
                            FileType::Dir,
                            Some(&m.st),
                            none,
                            m.in_git,
                            base,
                        );
                    }
                    if let Some(l) = m.low {
                        let fd = open_child(l, m.name, OFlags::RDONLY | OFlags::DIRECTORY)
                            .map_err(|e| self.lower_err(&m.rel, e))?;
                        child_low = Some(fd);
                    }
                }
                Some(_) => {
                    let base = m.lower_state(self.l, true)?;
                    self.push(
                        &m.rel,
                        ChangeKind::TypeChanged,
                        FileType::Dir,
                        Some(&m.st),
                        none,
                        m.in_git,
                        base,
                    );
                }
            }
        }
        let hidden = m.hidden || opaque;
        let cl = child_low.as_ref().map(|f| f.as_fd());
        let git = m.in_git || self.git_shaped(fd.as_fd(), cl, hidden, &m.rel)?;
        self.walk_dir(fd.as_fd(), cl, &m.rel, hidden, git, m.depth + 1)
    }

    /// A regular file of the upper: its size checked, read (once for all its names),
    /// recorded, then compared with the workspace's.
    fn file_entry(&mut self, m: &Met<'_>) -> Result<(), ChangesError> {
        let st = &m.st;
        let mut file =
            std::fs::File::from(open_regular(m.up, m.name).map_err(|e| self.upper_err(&m.rel, e))?);
        // A file with holes costs the data it holds (see `hash_file`), bounded there.
        if st.st_size as u64 > MAX_FILE_BYTES
            && !has_hole(&file, st.st_size as u64).map_err(|e| self.upper_err(&m.rel, e))?
        {
            return Err(ChangesError::Unsupported {
                path: self.l.upper_path.join(&m.rel),
                reason: format!(
                    "a file of {} bytes, over the {MAX_FILE_BYTES} a change set may hold",
                    st.st_size
                ),
            });
        }
        let (_, copied_up) = self.opaque(file.as_fd(), &m.rel, false)?;
        if !self.l.content && !m.compare {
            self.record(&m.rel, b'f', m.up_mode, st.st_size as u64, b"");
            return Ok(());
        }
        let small = st.st_size as u64 <= super::diff::MAX_DIFF_BYTES;
        let (link, hashed) = self.hash_once(m, &mut file, small)?;
        let (sha, script) = (hashed.sha256, hashed.script);
        let content = match (m.compare, small) {
            (false, _) => None,
            (true, _) if hashed.sparse => hashed.content,
            (true, false) => Some(Content::Large),
            (true, true) => hashed.content,
        };
        self.record(&m.rel, b'f', m.up_mode, st.st_size as u64, sha.as_bytes());
        if !m.compare {
            return Ok(());
        }
        let mut base = m.lower_state(self.l, true)?;
        if copied_up && m.lower.is_none() {
            // The run copied the workspace's file up, and the host has removed it
            // since: a change on the host during the run, whatever the times say.
            base.ctime = self.l.started_ns;
        }
        let kind = match (&m.lower, &base.state) {
            (None, _) => ChangeKind::Added,
            (Some(_), BaseState::File { sha256, mode: from }) if *sha256 == sha => {
                if *from == m.mode {
                    self.scan.unchanged_copies += 1;
                    return Ok(());
                }
                ChangeKind::ModeChanged {
                    from: *from,
                    to: m.mode,
                }
            }
            (Some(_), BaseState::File { .. }) => ChangeKind::Modified,
            (Some(_), _) => ChangeKind::TypeChanged,
        };
        self.push(
            &m.rel,
            kind,
            FileType::File,
            Some(st),
            (Some(sha), None, script, content),
            m.in_git,
            base,
        );
        if let Some(k) = link {
            let at = self.scan.entries.len() - 1;
            self.links.entry(k.file()).or_default().1.push(at);
        }
        Ok(())
    }

    /// What reading an upper file found, read only at its first name; with the key of a file
    /// of more than one name.
    fn hash_once(
        &mut self,
        m: &Met<'_>,
        file: &mut std::fs::File,
        small: bool,
    ) -> Result<(Option<LinkKey>, Hashed), ChangesError> {
        let st = &m.st;
        // Another name of a file already read (a hard link) is not read again: a
        // run's 1000 links to one file cost one read, not 1000.
        let link = (st.st_nlink > 1).then(|| LinkKey::of(st));
        if let Some(k) = &link {
            self.links.entry(k.file()).or_default().0 += 1;
        }
        let known = link.as_ref().and_then(|k| self.read_files.get(k)).cloned();
        let hashed = match known {
            Some(h) => h,
            None => {
                let h = hash_file(file, m.compare && small).map_err(|e| match e.kind() {
                    io::ErrorKind::FileTooLarge => ChangesError::Unsupported {
                        path: self.l.upper_path.join(&m.rel),
                        reason: format!("a sparse file of {} bytes: {e}", st.st_size),
                    },
                    _ => self.upper_err(&m.rel, e),
                })?;
                if let Some(k) = &link {
                    self.read_files.insert(*k, h.clone());
                }
                h
            }
        };
        Ok((link, hashed))
    }

    /// A symbolic link of the upper: its target recorded, then compared with the workspace's.
    fn symlink_entry(&mut self, m: &Met<'_>) -> Result<(), ChangesError> {
        let target = read_link(m.up, m.name).map_err(|e| self.upper_err(&m.rel, e))?;
        let t = target.as_os_str().as_bytes();
        self.record(&m.rel, b'l', m.up_mode, t.len() as u64, t);
        if !m.compare {
            return Ok(());
        }
        let base = m.lower_state(self.l, true)?;
        let kind = match (&m.lower, &base.state) {
            (None, _) => ChangeKind::Added,
            (Some(_), BaseState::Symlink { target: old }) if *old == target => {
                self.scan.unchanged_copies += 1;
                return Ok(());
            }
            (Some(_), BaseState::Symlink { .. }) => ChangeKind::Modified,
            (Some(_), _) => ChangeKind::TypeChanged,
        };
        let content = (None, Some(target), false, None);
        self.push(
            &m.rel,
            kind,
            FileType::Symlink,
            Some(&m.st),
            content,
            m.in_git,
            base,
        );
        Ok(())
    }

    /// A whiteout of the upper: recorded; the workspace's entry under its name is deleted.
    fn whiteout_entry(&mut self, m: &Met<'_>) -> Result<(), ChangesError> {
        self.record(&m.rel, b'w', 0, 0, b"");
        if let Some(ls) = &m.lower {
            let ft = file_type(ls);
            let base = m.lower_state(self.l, true)?;
            self.push(
                &m.rel,
                ChangeKind::Deleted,
                ft,
                None,
                (None, None, false, None),
                m.in_git,
                base,
            );
        }
        Ok(())
    }

    /// Any other entry of the upper (a device, a fifo, a socket): its type and device
    /// recorded, then compared with the workspace's.
    fn other_entry(&mut self, m: &Met<'_>) -> Result<(), ChangesError> {
        let st = &m.st;
        let mut detail = (st.st_mode & !0o7777).to_le_bytes().to_vec();
        detail.extend(st.st_rdev.to_le_bytes());
        self.record(&m.rel, b'o', m.up_mode, 0, &detail);
        if !m.compare {
            return Ok(());
        }
        let base = m.lower_state(self.l, true)?;
        let kind = match (&m.lower, &base.state) {
            (None, _) => ChangeKind::Added,
            (Some(ls), BaseState::Other { mode: from, rdev })
                if ls.st_mode == st.st_mode && *rdev == st.st_rdev && *from == m.mode =>
            {
                self.scan.unchanged_copies += 1;
                return Ok(());
            }
            (Some(ls), BaseState::Other { .. }) if ls.st_mode & !0o7777 == st.st_mode & !0o7777 => {
                ChangeKind::Modified
            }
            (Some(_), _) => ChangeKind::TypeChanged,
        };
        self.push(
            &m.rel,
            kind,
            FileType::Other,
            Some(st),
            (None, None, false, None),
            m.in_git,
            base,
        );
        Ok(())
    }
}

/// One entry of the upper the walk met: where it is, what the upper and the workspace have
/// under its name, and the walk's state there.
struct Met<'e> {
    up: BorrowedFd<'e>,
    low: Option<BorrowedFd<'e>>,
    name: &'e OsStr,
    rel: PathBuf,
    st: Stat,
    lower: Option<Stat>,
    /// Whether the run is compared with a workspace (`layers.lower`).
    compare: bool,
    /// The permissions the upper holds.
    up_mode: u32,
    /// The permissions the run set.
    mode: u32,
    hidden: bool,
    in_git: bool,
    depth: usize,
}

impl Met<'_> {
    /// What the workspace has under the entry's name, absent when it has nothing.
    fn lower_state(&self, layers: &Layers<'_>, whole: bool) -> Result<LowerState, ChangesError> {
        match (&self.lower, self.low) {
            (Some(ls), Some(l)) => {
                state_of(l, self.name, ls, whole, true).map_err(|e| layers.lower_err(&self.rel, e))
            }
            _ => Ok(LowerState::absent()),
        }
    }
}

#[cfg(test)]
mod conflict_time_tests {
    use super::*;

    #[test]
    fn any_change_not_clearly_before_the_start_is_a_conflict() {
        let started: u128 = 1_000_000_000_123_456_789;
        // After the start, however close to it, or to the run's first write: a conflict.
        assert!(changed_since_start(started + 1, started));
        assert!(changed_since_start(started, started));
        // Stamped by a lagging clock just before the start: still counted.
        assert!(changed_since_start(started - 5_000_001, started));
        // Clearly before the start (more than the lag on a nanosecond filesystem): not.
        assert!(!changed_since_start(started - 30_000_001, started));
        assert!(!changed_since_start(0, started));
    }

    #[test]
    fn a_coarse_filesystem_widens_the_window_by_its_granularity() {
        // A filesystem stamping whole seconds: a change 0.9 s after the start of second
        // 1000.1 reads 1000.0, 0.1 s "before" a start of 1000.1 s.
        let second = 1_000_000_000u128;
        let started = 1000 * second + 100_000_000;
        assert_eq!(granularity_ns(1000 * second), 2 * second);
        assert_eq!(granularity_ns(1001 * second), second);
        assert!(changed_since_start(1000 * second, started));
        // Control: the same ctime with nanoseconds (a fine filesystem) is 100 ms before the
        // start: not a change after it.
        assert!(!changed_since_start(1000 * second - 7, started));
        assert_eq!(granularity_ns(1000 * second - 7), 1);
        assert_eq!(granularity_ns(5_000_000), 1_000_000);
    }
}
