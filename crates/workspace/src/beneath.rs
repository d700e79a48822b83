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
//!
//! The helpers below do the same one component at a time from a directory descriptor (the
//! change sets of review mode use them): open, `lstat`, list, and remove a tree without
//! following a link.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

pub(crate) fn errno_io(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

pub(crate) fn resolve() -> ResolveFlags {
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

    /// [`Root::open`] through no symbolic link on the whole of `path` (absolute), as a
    /// writable root is planned (canonical): a directory above the root that the run swapped
    /// for a link (it lay in another writable root) is `ELOOP`, not the directory it leads to.
    pub(crate) fn open_exact(path: &Path) -> io::Result<Root> {
        let Ok(rel) = path.strip_prefix("/") else {
            return Root::open(path);
        };
        let top = Root::open(Path::new("/"))?;
        top.open_beneath(rel, OFlags::PATH | OFlags::DIRECTORY)
            .map(Root)
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
        open_no_links(self.0.as_fd(), rel, flags).map_err(errno_io)
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
            cur = open_no_links(
                cur.as_fd(),
                Path::new(name),
                OFlags::PATH | OFlags::DIRECTORY,
            )
            .map_err(errno_io)?;
        }
        Ok(cur)
    }
}

/// Makes the directories of `dir` (absolute, its existing part canonical) that are missing,
/// each with `mode` (less the umask), and checks it is one: the existing part is opened from
/// `/` through no symbolic link and each new directory is made with `mkdirat` below the
/// descriptor of its parent. A directory on the way exchanged for a link by a concurrent
/// program (a run whose writable root holds it) fails with `ELOOP`, where a path-based
/// `create_dir_all` made the rest wherever the link led, as root (red team, issue 33).
pub fn create_dir_all_no_links(dir: &Path, mode: u32) -> io::Result<()> {
    if !dir.is_absolute() {
        return Err(io::Error::other(format!(
            "{} is not an absolute path",
            dir.display()
        )));
    }
    let existing = dir
        .ancestors()
        .find(|a| std::fs::symlink_metadata(a).is_ok())
        .unwrap_or(Path::new("/"));
    let rest = dir.strip_prefix(existing).unwrap_or(Path::new(""));
    let top = Root::open(Path::new("/"))?;
    let mut cur = top.dir(existing.strip_prefix("/").unwrap_or(existing))?;
    for c in rest.components() {
        let Component::Normal(name) = c else {
            return Err(io::Error::other(format!(
                "{} is not a plain path",
                dir.display()
            )));
        };
        match rustix::fs::mkdirat(&cur, name, Mode::from_raw_mode(mode)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(errno_io(e)),
        }
        cur = open_child(cur.as_fd(), name, OFlags::PATH | OFlags::DIRECTORY)?;
    }
    Ok(())
}

/// The device and inode of `path` (absolute, as a run's spec plans it) reached through no
/// symbolic link anywhere on it, the last component included (`ELOOP`), as
/// `Root::open_exact` opens a root: a directory above a writable root that a run swapped
/// for a link has no identity, never that of where the link leads. A file works as well as
/// a directory.
pub fn identity_no_links(path: &Path) -> io::Result<(u64, u64)> {
    let rel = path
        .strip_prefix("/")
        .map_err(|_| io::Error::other(format!("{} is not an absolute path", path.display())))?;
    let fd = Root::open(Path::new("/"))?.open_beneath(rel, OFlags::PATH)?;
    let st = rustix::fs::fstat(&fd).map_err(errno_io)?;
    // O_PATH | O_NOFOLLOW opens a link as the last component itself.
    if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
        return Err(errno_io(Errno::LOOP));
    }
    Ok((st.st_dev, st.st_ino))
}

/// Opens `name`, one component in `dir`, with `flags`: never through a link (a link as
/// `name` fails with `ELOOP`).
pub(crate) fn open_child(dir: BorrowedFd<'_>, name: &OsStr, flags: OFlags) -> io::Result<OwnedFd> {
    open_no_links(dir, Path::new(name), flags).map_err(errno_io)
}

/// `openat2(dir, path, flags | O_CLOEXEC | O_NOFOLLOW, `[`resolve`]`())`. Where `openat2` is
/// refused (`ENOSYS`: an old kernel, a seccomp filter of a sandbox around stockade; `EPERM`:
/// an older container runtime's profile) the same lookup by hand ([`walk_no_links`]), so that
/// the sweep still moves what the run planted instead of leaving it in place.
fn open_no_links(dir: BorrowedFd<'_>, path: &Path, flags: OFlags) -> Result<OwnedFd, Errno> {
    let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    match rustix::fs::openat2(dir, path, flags, Mode::empty(), resolve()) {
        Err(Errno::NOSYS | Errno::PERM) => walk_no_links(dir, path, flags),
        other => other,
    }
}

/// [`open_no_links`] without `openat2`, for paths below `dir`: every component but the last
/// opened `O_PATH | O_NOFOLLOW` from the one before and refused when it is a link (`ELOOP`)
/// or no directory (`ENOTDIR`); the last opened with `flags`, which hold `O_NOFOLLOW`, so
/// that it answers for the last component exactly as `openat2` does. An absolute
/// path or any `..` is `EXDEV` (`RESOLVE_BENEATH` allows a `..` that stays below; nothing
/// here makes one). Each step starts from a descriptor already held, so a directory swapped
/// for a link after it was passed changes nothing. Not for creation (`EINVAL`).
fn walk_no_links(dir: BorrowedFd<'_>, path: &Path, flags: OFlags) -> Result<OwnedFd, Errno> {
    if flags.contains(OFlags::CREATE) || flags.contains(OFlags::TMPFILE) {
        return Err(Errno::INVAL);
    }
    if path.as_os_str().is_empty() {
        return Err(Errno::NOENT);
    }
    // "a/" and "a/." name a directory (the components below drop the slash and the ".":
    // "file/." is `ENOTDIR` for the kernel, not the file; "a/.." is `EXDEV` below).
    let bytes = path.as_os_str().as_bytes();
    let flags = if bytes.ends_with(b"/") || bytes.ends_with(b"/.") {
        flags | OFlags::DIRECTORY
    } else {
        flags
    };
    let mut names = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(name) => names.push(name),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) | Component::ParentDir => {
                return Err(Errno::XDEV)
            }
        }
    }
    let Some((last, way)) = names.split_last() else {
        return rustix::fs::openat(dir, ".", flags, Mode::empty());
    };
    let kind = |fd: &OwnedFd| rustix::fs::fstat(fd).map(|st| FileType::from_raw_mode(st.st_mode));
    let mut cur: Option<OwnedFd> = None;
    for name in way {
        let at = cur.as_ref().map_or(dir, |f| f.as_fd());
        let fd = rustix::fs::openat(
            at,
            *name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        match kind(&fd)? {
            FileType::Directory => cur = Some(fd),
            FileType::Symlink => return Err(Errno::LOOP),
            _ => return Err(Errno::NOTDIR),
        }
    }
    // The last with `flags`, which hold `O_NOFOLLOW`: a link there is not followed, as with
    // `openat2` (`ELOOP`, or with `O_PATH` a descriptor of the link itself).
    let at = cur.as_ref().map_or(dir, |f| f.as_fd());
    rustix::fs::openat(at, *last, flags, Mode::empty())
}

/// `lstat` of `name` in `dir`; `None` when it does not exist.
pub(crate) fn stat_child(
    dir: BorrowedFd<'_>,
    name: &OsStr,
) -> io::Result<Option<rustix::fs::Stat>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(errno_io(e)),
    }
}

/// What the symbolic link `name` in `dir` holds, as written (`readlinkat`: the link itself,
/// never followed); `EINVAL` when it is not a link.
pub(crate) fn read_link_child(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OsString> {
    let target = rustix::fs::readlinkat(dir, name, Vec::new()).map_err(errno_io)?;
    Ok(OsStr::from_bytes(target.as_bytes()).to_os_string())
}

/// Makes the symbolic link `name` in `dir` holding `target` (`symlinkat`: replacing nothing,
/// `EEXIST` when the name is taken).
pub(crate) fn symlink_child(target: &OsStr, dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    rustix::fs::symlinkat(target, dir, name).map_err(errno_io)
}

/// The names in the directory `dir` (opened readable), `.` and `..` left out, sorted by
/// their bytes.
pub(crate) fn list(dir: BorrowedFd<'_>) -> io::Result<Vec<OsString>> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir).map_err(errno_io)? {
        let entry = entry.map_err(errno_io)?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_os_string());
        }
    }
    names.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    Ok(names)
}

/// A name nobody else uses: `prefix` and 16 random hex digits.
pub(crate) fn random_name(prefix: &str) -> io::Result<OsString> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
    let mut name = String::from(prefix);
    for b in bytes {
        name.push_str(&format!("{b:02x}"));
    }
    Ok(name.into())
}

/// Sets the permission bits of what `fd` refers to, also for an `O_PATH` descriptor (through
/// its `/proc/self/fd` entry, which names this very file: no path is looked up again).
pub(crate) fn chmod_fd(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    let mode = Mode::from_raw_mode(mode);
    match rustix::fs::fchmod(fd, mode) {
        Err(Errno::BADF) => {
            let proc = format!("/proc/self/fd/{}", fd.as_raw_fd());
            rustix::fs::chmodat(rustix::fs::CWD, proc.as_str(), mode, AtFlags::empty())
                .map_err(errno_io)
        }
        r => r.map_err(errno_io),
    }
}

/// Directories the sweep gave their owner's read, write and search bits so as to look into
/// them or move something out of them, each with the mode it had: the run may leave a
/// directory it made at any mode (`chmod 000`, `111`, `311`, `555`), and an unreadable
/// directory must never pass for an empty one. The modes are put back exactly when this is
/// dropped (or by [`Opened::restore`]), the last opened first.
///
/// Only directories are changed (opened `O_PATH | O_DIRECTORY`, one component at a time from
/// the root's descriptor, through no link, never beneath a `..`), only their owner's bits, and
/// only when the caller cannot already read and search them. The caller must own them (an
/// unprivileged caller owns what its sandbox made) or be root (`CAP_FOWNER`).
///
/// The first [`HELD`] directories are held by their descriptors (their mode goes back
/// wherever they were moved since); past that, so that a run that closes thousands of
/// directories cannot exhaust the supervisor's descriptors (and with them the quarantine's),
/// a directory is found again at its path, beneath the root through no link, and changed
/// only if it is still the same directory (device and inode). One moved away meanwhile keeps
/// its owner's bits: more open than the run left it, never less.
#[derive(Default)]
pub(crate) struct Opened(Vec<(Handle, u32)>);

/// How an opened directory is found again.
enum Handle {
    Held(OwnedFd),
    At {
        root: std::path::PathBuf,
        rel: std::path::PathBuf,
        id: (u64, u64),
    },
}

/// Directories held by descriptor per [`Opened`].
const HELD: usize = 64;

impl Opened {
    /// Opens up every directory from `root` (at `root_path`) down to `rel`, as far as it
    /// exists: those on the way so they can be searched, `rel` itself so it can be listed and
    /// changed.
    pub(crate) fn open_up(&mut self, root_path: &Path, root: &Root, rel: &Path) -> io::Result<()> {
        // The root's own descriptor: opening `.` from it would need the search bit the run
        // may have taken from the root itself.
        let mut cur = root.fd().try_clone_to_owned()?;
        let mut at = std::path::PathBuf::new();
        let mut comps = rel
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .peekable();
        self.grant(cur.as_fd(), comps.peek().is_none(), (root_path, &at))?;
        while let Some(c) = comps.next() {
            let Component::Normal(name) = c else {
                return Err(io::Error::other(format!(
                    "{} is not a plain relative path",
                    rel.display()
                )));
            };
            cur = match open_child(cur.as_fd(), name, OFlags::PATH | OFlags::DIRECTORY) {
                Ok(fd) => fd,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
                Err(e) => return Err(e),
            };
            at.push(name);
            self.grant(cur.as_fd(), comps.peek().is_none(), (root_path, &at))?;
        }
        Ok(())
    }

    /// Gives the owner of the directory `fd` (at `rel` below `root`) search (on the way) or
    /// read, write and search (`last`) when the caller lacks them.
    fn grant(
        &mut self,
        fd: BorrowedFd<'_>,
        last: bool,
        (root, rel): (&Path, &Path),
    ) -> io::Result<()> {
        use rustix::fs::Access;
        let need = if last {
            Access::READ_OK | Access::WRITE_OK | Access::EXEC_OK
        } else {
            Access::EXEC_OK
        };
        if rustix::fs::accessat(fd, "", need, AtFlags::EMPTY_PATH | AtFlags::EACCESS).is_ok() {
            return Ok(());
        }
        let st = rustix::fs::fstat(fd).map_err(errno_io)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(errno_io(Errno::NOTDIR));
        }
        let euid = rustix::process::geteuid();
        if !euid.is_root() && st.st_uid != euid.as_raw() {
            return Err(io::Error::other(format!(
                "owned by uid {}, mode {:o}: the sweep cannot open it up",
                st.st_uid,
                st.st_mode & 0o7777
            )));
        }
        let mode = st.st_mode & 0o7777;
        let handle = if self.0.len() < HELD {
            Handle::Held(fd.try_clone_to_owned()?)
        } else {
            Handle::At {
                root: root.to_path_buf(),
                rel: rel.to_path_buf(),
                id: (st.st_dev, st.st_ino),
            }
        };
        chmod_fd(fd, mode | 0o700)?;
        self.0.push((handle, mode));
        Ok(())
    }

    /// Puts every mode back, the last opened first (a directory below another is given its
    /// mode while the way to it is still open); what could not be put back.
    pub(crate) fn restore(&mut self) -> Vec<io::Error> {
        let mut failed = Vec::new();
        while let Some((handle, mode)) = self.0.pop() {
            let done = match handle {
                Handle::Held(fd) => chmod_fd(fd.as_fd(), mode),
                Handle::At { root, rel, id } => {
                    Root::open(&root).and_then(|r| r.dir(&rel)).and_then(|fd| {
                        let st = rustix::fs::fstat(&fd).map_err(errno_io)?;
                        if (st.st_dev, st.st_ino) != id {
                            return Err(io::Error::other("another directory is at its path"));
                        }
                        chmod_fd(fd.as_fd(), mode)
                    })
                }
            };
            if let Err(e) = done {
                failed.push(e);
            }
        }
        failed
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

/// Whether `e` is a refusal by permission (what [`Opened::open_up`] can lift).
pub(crate) fn is_denied(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
}

/// The directory `name` in `dir`, opened readable to be emptied; one that does not let its
/// owner read or search it (overlayfs leaves its `work/work` at mode 000) is given 0700 first.
fn open_for_removal(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY;
    match open_child(dir, name, flags) {
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            let path = open_child(dir, name, OFlags::PATH | OFlags::DIRECTORY)?;
            chmod_fd(path.as_fd(), 0o700)?;
            open_child(dir, name, flags)
        }
        r => r,
    }
}

/// Below this depth, directories are moved up to the top before being emptied: removal holds
/// one descriptor per level, and a tree may be deeper than the process may open files.
const REMOVE_DEPTH: usize = 32;

/// Removes `name` in `dir` and everything below it, never following a link (a link is
/// removed, not what it points to). Already gone: done.
pub(crate) fn remove_tree(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let Some(st) = stat_child(dir, name)? else {
        return Ok(());
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(errno_io(e)),
        };
    }
    let top = open_for_removal(dir, name)?;
    // Each pass removes what lies at most REMOVE_DEPTH levels down and moves deeper
    // directories up into `top`; the next pass takes those.
    while !list(top.as_fd())?.is_empty() {
        empty_dir(top.as_fd(), top.as_fd(), 0)?;
    }
    drop(top);
    match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(errno_io(e)),
    }
}

fn empty_dir(top: BorrowedFd<'_>, dir: BorrowedFd<'_>, depth: usize) -> io::Result<()> {
    for name in list(dir)? {
        let Some(st) = stat_child(dir, &name)? else {
            continue;
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            match rustix::fs::unlinkat(dir, &name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(errno_io(e)),
            }
            continue;
        }
        if depth >= REMOVE_DEPTH {
            let up = random_name(".stockade-rm-")?;
            move_no_replace(dir, &name, top, &up)?;
            continue;
        }
        let child = open_for_removal(dir, &name)?;
        empty_dir(top, child.as_fd(), depth + 1)?;
        drop(child);
        match rustix::fs::unlinkat(dir, &name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(errno_io(e)),
        }
    }
    Ok(())
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

    /// A root's identity is read through no link on its whole path, with openat2 and
    /// without it (the walk a kernel or a seccomp filter without openat2 gets): a link as
    /// the root or above it gives none; the directory itself, or a file, gives its device
    /// and inode.
    #[test]
    fn a_roots_identity_is_read_through_no_link() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(base.join("p/root")).unwrap();
        std::fs::write(base.join("p/file"), "x").unwrap();
        std::os::unix::fs::symlink(base.join("p"), base.join("l")).unwrap();
        std::os::unix::fs::symlink(base.join("p/root"), base.join("p/lroot")).unwrap();
        let id = |p: &str| {
            let m = std::fs::metadata(base.join(p)).unwrap();
            (m.dev(), m.ino())
        };
        assert_eq!(
            identity_no_links(&base.join("p/root")).unwrap(),
            id("p/root")
        );
        assert_eq!(
            identity_no_links(&base.join("p/file")).unwrap(),
            id("p/file")
        );
        assert!(identity_no_links(&base.join("l/root")).is_err());
        assert!(identity_no_links(&base.join("p/lroot")).is_err());
        let top = Root::open(Path::new("/")).unwrap();
        let walk = |p: &str| {
            let rel = base.join(p);
            walk_no_links(
                top.fd(),
                rel.strip_prefix("/").unwrap(),
                OFlags::PATH | OFlags::NOFOLLOW,
            )
            .map(|fd| rustix::fs::fstat(&fd).unwrap())
            .map(|st| (FileType::from_raw_mode(st.st_mode), st.st_dev, st.st_ino))
        };
        let (_, dev, ino) = walk("p/root").unwrap();
        assert_eq!((dev, ino), id("p/root"));
        assert_eq!(walk("l/root").unwrap_err(), Errno::LOOP);
        // The walk, like openat2, opens a link as the last component itself: the caller
        // above refuses it by its type.
        assert_eq!(walk("p/lroot").unwrap().0, FileType::Symlink);
    }

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

    /// Where `openat2` is refused, the sweep's lookups are made by hand (`walk_no_links`):
    /// they open the same file or fail as `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`
    /// does, a link anywhere being refused (`ELOOP`, or `ENOTDIR` where the kernel says so
    /// for a link opened as a directory without `O_PATH`), never followed, and nothing above
    /// the root reached. Control: the shapes that are no link open.
    #[test]
    fn the_walk_without_openat2_refuses_what_openat2_refuses() {
        let t = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(d.join("ws/a/b")).unwrap();
        std::fs::write(d.join("ws/a/f"), b"").unwrap();
        std::fs::write(d.join("secret"), b"").unwrap();
        std::os::unix::fs::symlink(d.join("ws/a"), d.join("ws/link")).unwrap();
        std::os::unix::fs::symlink("f", d.join("ws/a/flink")).unwrap();
        std::os::unix::fs::symlink(&d, d.join("ws/a/up")).unwrap();
        let root = Root::open(&d.join("ws")).unwrap();
        let paths = [
            "",
            ".",
            "a",
            "a/",
            "a/b",
            "a/f",
            "a/f/",
            "a/f/x",
            "a/f/.",
            "a/b/.",
            "a/./f/",
            "a/f/..",
            "./a//b",
            "link",
            "link/f",
            "a/flink",
            "a/up",
            "a/up/secret",
            "missing",
            "a/missing/x",
            "..",
            "../secret",
            "a/../a/f",
            "/etc",
            "a/b/../../../secret",
        ];
        let flag_sets = [
            OFlags::PATH,
            OFlags::PATH | OFlags::DIRECTORY,
            OFlags::RDONLY,
            OFlags::RDONLY | OFlags::DIRECTORY,
            OFlags::RDONLY | OFlags::NONBLOCK,
        ];
        let ident = |fd: &OwnedFd| {
            let st = rustix::fs::fstat(fd).unwrap();
            (st.st_dev, st.st_ino)
        };
        for flags in flag_sets {
            for p in paths {
                let path = Path::new(p);
                let full = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW;
                let kernel = rustix::fs::openat2(root.fd(), path, full, Mode::empty(), resolve());
                let walked = walk_no_links(root.fd(), path, full);
                let shown = format!("{p:?} {flags:?}: {kernel:?} / {walked:?}");
                match (&kernel, &walked) {
                    (Ok(k), Ok(w)) => assert_eq!(ident(k), ident(w), "{shown}"),
                    (Err(k), Err(w)) if k == w => {}
                    // Any `..` is refused by the walk, even one that stays below (stricter).
                    (_, Err(Errno::XDEV)) if p.contains("..") => {}
                    _ => panic!("{shown}"),
                }
            }
        }
        // Controls: the plain shapes open; the links do not.
        assert!(walk_no_links(root.fd(), Path::new("a/b"), OFlags::PATH).is_ok());
        assert_eq!(
            walk_no_links(root.fd(), Path::new("link/f"), OFlags::PATH).err(),
            Some(Errno::LOOP)
        );
    }

    /// A link on the way to a state directory stockade makes (a directory a concurrent run
    /// exchanged for it): nothing is made where it leads, the call fails (`ELOOP`, or
    /// `ENOTDIR` for a link as the last existing component).
    /// Control: `create_dir_all` makes the rest there. A plain way is made, with the mode.
    #[test]
    fn directories_are_made_through_no_link() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().expect("a directory");
        let base = std::fs::canonicalize(tmp.path()).expect("canonical");
        let (target, st) = (base.join("target"), base.join("st"));
        std::fs::create_dir(&target).expect("mkdir");
        std::os::unix::fs::symlink(&target, &st).expect("symlink");
        let e = create_dir_all_no_links(&st.join("stockade/journal"), 0o700).expect_err("a link");
        // The link as the last existing component: not a directory to open, through no link.
        assert!(
            matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)),
            "{e}"
        );
        let deeper = create_dir_all_no_links(&target.join("x"), 0o700);
        assert!(deeper.is_ok(), "{deeper:?}");
        let through = create_dir_all_no_links(&st.join("x/y"), 0o700).expect_err("a link");
        assert!(matches!(
            through.raw_os_error(),
            Some(libc::ELOOP | libc::ENOTDIR)
        ));
        assert!(!target.join("stockade").exists());
        std::fs::create_dir_all(st.join("stockade/journal")).expect("control");
        assert!(target.join("stockade/journal").is_dir());
        let plain = base.join("plain/a/b");
        create_dir_all_no_links(&plain, 0o700).expect("made");
        create_dir_all_no_links(&plain, 0o700).expect("made again: nothing to do");
        let mode = std::fs::metadata(&plain)
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
