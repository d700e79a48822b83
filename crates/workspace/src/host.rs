//! What the planner may ask about the host: file kinds, owners, directory listings. A trait so
//! plans can be built (and tested) against a fake host; [`RealHost`] asks the kernel.

#[cfg(test)]
pub(crate) mod fake;

use std::cell::RefCell;
use std::collections::HashMap;
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

/// When a directory last changed, to tell after a run whether its entries can have changed.
/// Creating, removing or renaming an entry sets the directory's ctime to the current time, and
/// nothing without `CAP_SYS_TIME` can set a ctime back (`utimensat` moves ctime forward too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirStamp {
    pub dev: u64,
    pub ino: u64,
    pub ctime: i64,
    pub ctime_nsec: i64,
}

pub trait HostView {
    /// Metadata following symlinks; `None` if the path does not exist or cannot be reached.
    fn stat(&self, path: &Path) -> Option<Entry>;
    /// The kind of the path itself, not following a final symlink.
    /// [`HostView::stat`] asked now: a view that remembers answers ([`Remembering`]) asks
    /// its host again and remembers this answer instead (the walk's matches: a walk again
    /// comes to the same name holding another file).
    fn stat_now(&self, path: &Path) -> Option<Entry> {
        self.stat(path)
    }
    fn lstat_kind(&self, path: &Path) -> Option<Kind>;
    /// Absolute path with every symlink resolved.
    fn canonicalize(&self, path: &Path) -> Option<PathBuf>;
    /// Entries of a directory with their own kinds (symlinks not followed), sorted by name.
    fn list_dir(&self, path: &Path) -> Vec<(OsString, Kind)>;
    /// [`HostView::list_dir`], saying why a directory could not be listed whole (the sweep
    /// must not take an unreadable directory for an empty one); by default (a fake host) every
    /// listing succeeds.
    fn try_list_dir(&self, path: &Path) -> std::io::Result<Vec<(OsString, Kind)>> {
        Ok(self.list_dir(path))
    }
    /// The first KiB of a small text file (used for `.git` files).
    fn read_small(&self, path: &Path) -> Option<String>;
    /// Up to `limit` bytes of a file, invalid UTF-8 replaced (git configs); by default (a fake
    /// host) [`HostView::read_small`].
    fn read_lossy(&self, path: &Path, _limit: usize) -> Option<String> {
        self.read_small(path)
    }
    /// Up to `limit` bytes of a regular file (a git index); none by default (a fake host).
    fn read_bytes(&self, _path: &Path, _limit: usize) -> Option<Vec<u8>> {
        None
    }
    /// The directory's stamp (not following a final symlink); `None` if it is not a directory,
    /// or by default (a fake host: every directory is listed).
    fn dir_stamp(&self, _path: &Path) -> Option<DirStamp> {
        None
    }
    /// [`HostView::dir_stamp`] of `path`, looked up as its last component in `parent` when
    /// given: one lookup, not one per component of the whole path (the walk cache's
    /// per-directory cost, issue 32). `parent` must be the handle of `path`'s parent that this
    /// same walk opened, and took that parent's own stamp from (never one kept from an earlier
    /// run). With `open`, also a handle of `path` itself (opened without following a link,
    /// only a directory) whose stamp is the one returned; `None` when it cannot be opened
    /// (too many open files): its entries are then looked up by their whole paths. By
    /// default (a fake host) [`HostView::dir_stamp`] and no handle.
    fn dir_stamp_at(
        &self,
        _parent: Option<&DirHandle>,
        path: &Path,
        _open: bool,
    ) -> (Option<DirStamp>, Option<DirHandle>) {
        (self.dir_stamp(path), None)
    }
    /// [`HostView::list_dir`] with the directory's stamp taken first, from the same open
    /// directory (so a change after the stamp shows in the ctime, and both describe one
    /// directory).
    fn list_dir_stamped(&self, path: &Path) -> (Option<DirStamp>, Vec<(OsString, Kind)>) {
        (self.dir_stamp(path), self.list_dir(path))
    }
    /// Whether the filesystem holding `path` is a local one that sets ctime from this
    /// machine's clock on every change (ext2/3/4, xfs, btrfs, tmpfs, overlayfs, f2fs,
    /// bcachefs). Others (FUSE, network filesystems) report what their server says, possibly
    /// nothing useful: their directories are always listed.
    fn local_ctime(&self, _path: &Path) -> bool {
        false
    }
    /// Whether a change of a directory on the filesystem holding `path`, made after a `stat`
    /// of it, always gets a later ctime than that `stat` read, even within one tick of the
    /// coarse clock: multigrain timestamps (Linux >= 6.13 on ext4, xfs, btrfs and tmpfs; a
    /// `stat` marks the ctime as seen, the next change takes a fine-grained time, and no
    /// coarse time handed out later falls behind it). By default (a fake host, or not known)
    /// `false`: only a ctime well before the listing is trusted then.
    fn fine_ctime(&self, _path: &Path) -> bool {
        false
    }
    /// When the path itself (not following a final symlink) last changed; `None` by default
    /// (a fake host: every symlink counts as new).
    fn lstat_ctime(&self, _path: &Path) -> Option<std::time::SystemTime> {
        None
    }
    /// What the symbolic link `path` holds (its target as written, not resolved); `None` if
    /// it is not a link, or by default (a fake host).
    fn read_link(&self, _path: &Path) -> Option<PathBuf> {
        None
    }
}

/// A directory opened only to look names up in it (`O_PATH|O_DIRECTORY|O_NOFOLLOW`), by a walk
/// that took the directory's stamp from this same descriptor and found it unchanged
/// ([`HostView::dir_stamp_at`]). Made and dropped within one walk: a handle never outlives the
/// walk that checked it (the command may run between the planner's walk and the sweep's).
#[derive(Debug)]
pub struct DirHandle(rustix::fd::OwnedFd);

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
        read_dir(path)
            .map(|(_, entries)| entries)
            .unwrap_or_default()
    }

    fn try_list_dir(&self, path: &Path) -> std::io::Result<Vec<(OsString, Kind)>> {
        read_dir(path).map(|(_, entries)| entries)
    }

    fn list_dir_stamped(&self, path: &Path) -> (Option<DirStamp>, Vec<(OsString, Kind)>) {
        match read_dir(path) {
            Ok((stamp, entries)) => (Some(stamp), entries),
            Err(_) => (None, Vec::new()),
        }
    }

    fn read_small(&self, path: &Path) -> Option<String> {
        read_text(path, 1024)
    }

    fn read_lossy(&self, path: &Path, limit: usize) -> Option<String> {
        read_regular(path, limit).map(|buf| String::from_utf8_lossy(&buf).into_owned())
    }

    fn read_bytes(&self, path: &Path, limit: usize) -> Option<Vec<u8>> {
        read_regular(path, limit)
    }

    fn dir_stamp(&self, path: &Path) -> Option<DirStamp> {
        // rustix's stat, as `read_dir`'s: one encoding of the device number for both.
        let st = rustix::fs::lstat(path).ok()?;
        if kind_of_raw(rustix::fs::FileType::from_raw_mode(st.st_mode)) != Kind::Dir {
            return None;
        }
        Some(stamp_of(&st))
    }

    fn dir_stamp_at(
        &self,
        parent: Option<&DirHandle>,
        path: &Path,
        open: bool,
    ) -> (Option<DirStamp>, Option<DirHandle>) {
        use rustix::fs::{AtFlags, Mode, OFlags};
        let at = parent.zip(path.file_name());
        if open {
            // The handle's stamp is the stamp of the very directory its entries are looked up
            // in: not a link (`O_NOFOLLOW`; `O_PATH` would open the link itself, `O_DIRECTORY`
            // refuses it, and `fstat` checks the kind again), not what is at the path later.
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = match at {
                Some((p, name)) => rustix::fs::openat(&p.0, name, flags, Mode::empty()),
                None => rustix::fs::open(path, flags, Mode::empty()),
            };
            if let Ok(fd) = fd {
                return match rustix::fs::fstat(&fd) {
                    Ok(st)
                        if kind_of_raw(rustix::fs::FileType::from_raw_mode(st.st_mode))
                            == Kind::Dir =>
                    {
                        (Some(stamp_of(&st)), Some(DirHandle(fd)))
                    }
                    _ => (None, None),
                };
            }
            // Not a directory, gone, or no descriptor left: the stat below says which.
        }
        let st = match at {
            Some((p, name)) => rustix::fs::statat(&p.0, name, AtFlags::SYMLINK_NOFOLLOW),
            None => rustix::fs::lstat(path),
        };
        let stamp = st.ok().and_then(|st| {
            (kind_of_raw(rustix::fs::FileType::from_raw_mode(st.st_mode)) == Kind::Dir)
                .then(|| stamp_of(&st))
        });
        (stamp, None)
    }

    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        std::fs::read_link(path).ok()
    }

    fn lstat_ctime(&self, path: &Path) -> Option<std::time::SystemTime> {
        let m = std::fs::symlink_metadata(path).ok()?;
        let secs = u64::try_from(m.ctime()).ok()?;
        let nanos = u32::try_from(m.ctime_nsec()).ok()?;
        std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
    }

    fn fine_ctime(&self, path: &Path) -> bool {
        static RELEASE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let release = RELEASE.get_or_init(|| {
            read_text(Path::new("/proc/sys/kernel/osrelease"), 256).unwrap_or_default()
        });
        // Decided by the mount's filesystem type name, not statfs's f_type: ext2 and ext3
        // mounted by the ext4 driver report ext4's 0xEF53 but their types lack multigrain
        // ctimes (red team issue 32: 1927 of 2000 changes right after a stat kept the ctime).
        release_at_least(release, (6, 13))
            && mount_fstype(path).is_some_and(|t| multigrain(&t, release))
    }

    fn local_ctime(&self, path: &Path) -> bool {
        // Magic numbers of statfs(2)'s f_type. Their timestamps' granularity (1 ns to 1 s) is
        // below the sweep's settling window (see `crate::SETTLED`). Only filesystems where a
        // directory's ctime moves with every change of its entries: not overlayfs (a merged
        // directory's stamp is its upper directory's, while an entry added to a lower layer
        // out of band shows through it unchanged), nor network or FUSE filesystems.
        const LOCAL: &[u64] = &[
            0xEF53,      // ext2/3/4
            0x5846_5342, // xfs
            0x9123_683E, // btrfs
            0x0102_1994, // tmpfs
            0xF2F5_2010, // f2fs
            0xCA45_1A4E, // bcachefs
        ];
        match rustix::fs::statfs(path) {
            // f_type's width differs between architectures.
            #[allow(clippy::unnecessary_cast)]
            Ok(fs) => LOCAL.contains(&(fs.f_type as u64)),
            Err(_) => false,
        }
    }
}

/// Whether a filesystem of type `fstype` (its name in `/proc/self/mountinfo`) on a kernel of
/// release `release` gives a change made after a `stat` a later ctime, even within one tick:
/// multigrain timestamps, Linux >= 6.13, on the types that set `FS_MGTIME` (ext4, xfs,
/// btrfs, tmpfs). Not ext2 or ext3 even when the ext4 driver mounts them (their types are
/// registered without it), nor anything unknown: those take the walk's
/// `GRAIN` path (an equal stamp proves its listing only once it has settled).
pub(crate) fn multigrain(fstype: &str, release: &str) -> bool {
    release_at_least(release, (6, 13)) && matches!(fstype, "ext4" | "xfs" | "btrfs" | "tmpfs")
}

/// The filesystem type name of the mount holding `path` (not following a last link): its
/// mount ID (`statx`'s `STATX_MNT_ID`) looked up in `/proc/self/mountinfo`. `None` when
/// either is unavailable.
fn mount_fstype(path: &Path) -> Option<String> {
    use rustix::fs::{AtFlags, StatxFlags};
    let st = rustix::fs::statx(
        rustix::fs::CWD,
        path,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::MNT_ID,
    )
    .ok()?;
    if st.stx_mask & StatxFlags::MNT_ID.bits() == 0 {
        return None;
    }
    let info = read_text(Path::new("/proc/self/mountinfo"), 4 << 20)?;
    fstype_of_mount(&info, st.stx_mnt_id).map(str::to_owned)
}

/// The filesystem type of mount `id` in a `mountinfo` text (proc(5): the ID first, the type
/// after the ` - ` separator).
fn fstype_of_mount(mountinfo: &str, id: u64) -> Option<&str> {
    mountinfo.lines().find_map(|line| {
        let mut fields = line.split(' ');
        if fields.next()?.parse::<u64>().ok()? != id {
            return None;
        }
        fields.by_ref().find(|f| *f == "-")?;
        fields.next()
    })
}

/// Whether a kernel release (`6.13.0-rc1`, `6.18.44-fc`) is at least `(major, minor)`; an
/// unreadable one is not.
fn release_at_least(release: &str, want: (u32, u32)) -> bool {
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    match (major, minor) {
        (Some(major), Some(minor)) => (major, minor) >= want,
        _ => false,
    }
}

/// A view of `host` that remembers, for one scan, the kinds, metadata and resolved paths it
/// asked for: the scan's passes look at the same paths more than once (the catalogues' exact
/// paths are looked up by the walk, then resolved again for the creation guard and the
/// protected paths: about 340 of a default run's 740 `statx` calls were repeats). Each answer
/// is the one the first lookup got, as if every later lookup of that path had been made at
/// that moment: the scan reads the host one path at a time in any case, and nothing the scan
/// itself does changes what it looks at. Listings, stamps, ctimes and file contents are asked
/// of `host` every time. (Answering a directory's names from one listing of it saved about
/// 0.1 ms a run and made answers older than the walk's stamps: red team issue 32, tenth
/// round, 1.) Made for one scan and dropped with it: nothing remembered outlives
/// the planning of one run (the sweep after the run asks the host again).
pub struct Remembering<'a> {
    host: &'a dyn HostView,
    // Keyed by the path's bytes: `Path`'s own equality takes `a/` for `a`, which `lstat`
    // does not (it follows a final link before a `/`), and its hash walks the components.
    stat: RefCell<HashMap<OsString, Option<Entry>>>,
    lstat: RefCell<HashMap<OsString, Option<Kind>>>,
    canonical: RefCell<HashMap<OsString, Option<PathBuf>>>,
}

impl<'a> Remembering<'a> {
    pub fn new(host: &'a dyn HostView) -> Remembering<'a> {
        Remembering {
            host,
            stat: RefCell::default(),
            lstat: RefCell::default(),
            canonical: RefCell::default(),
        }
    }
}

/// `map`'s answer for `path`, asked of `ask` the first time.
fn remembered<T: Clone>(
    map: &RefCell<HashMap<OsString, T>>,
    path: &Path,
    ask: impl FnOnce() -> T,
) -> T {
    if let Some(v) = map.borrow().get(path.as_os_str()) {
        return v.clone();
    }
    let v = ask();
    map.borrow_mut()
        .insert(path.as_os_str().to_os_string(), v.clone());
    v
}

impl HostView for Remembering<'_> {
    fn stat(&self, path: &Path) -> Option<Entry> {
        remembered(&self.stat, path, || self.host.stat(path))
    }
    fn stat_now(&self, path: &Path) -> Option<Entry> {
        let e = self.host.stat(path);
        // A failure is not remembered: the next `stat` asks again (red team issue 32d, 07).
        match e {
            Some(_) => self
                .stat
                .borrow_mut()
                .insert(path.as_os_str().to_os_string(), e),
            None => self.stat.borrow_mut().remove(path.as_os_str()),
        };
        e
    }
    fn lstat_kind(&self, path: &Path) -> Option<Kind> {
        remembered(&self.lstat, path, || self.host.lstat_kind(path))
    }
    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        remembered(&self.canonical, path, || self.host.canonicalize(path))
    }
    fn list_dir(&self, path: &Path) -> Vec<(OsString, Kind)> {
        self.host.list_dir(path)
    }
    fn try_list_dir(&self, path: &Path) -> std::io::Result<Vec<(OsString, Kind)>> {
        self.host.try_list_dir(path)
    }
    fn read_small(&self, path: &Path) -> Option<String> {
        self.host.read_small(path)
    }
    fn read_lossy(&self, path: &Path, limit: usize) -> Option<String> {
        self.host.read_lossy(path, limit)
    }
    fn read_bytes(&self, path: &Path, limit: usize) -> Option<Vec<u8>> {
        self.host.read_bytes(path, limit)
    }
    fn dir_stamp(&self, path: &Path) -> Option<DirStamp> {
        self.host.dir_stamp(path)
    }
    fn dir_stamp_at(
        &self,
        parent: Option<&DirHandle>,
        path: &Path,
        open: bool,
    ) -> (Option<DirStamp>, Option<DirHandle>) {
        self.host.dir_stamp_at(parent, path, open)
    }
    fn list_dir_stamped(&self, path: &Path) -> (Option<DirStamp>, Vec<(OsString, Kind)>) {
        self.host.list_dir_stamped(path)
    }
    fn local_ctime(&self, path: &Path) -> bool {
        self.host.local_ctime(path)
    }
    fn fine_ctime(&self, path: &Path) -> bool {
        self.host.fine_ctime(path)
    }
    fn lstat_ctime(&self, path: &Path) -> Option<std::time::SystemTime> {
        self.host.lstat_ctime(path)
    }
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        self.host.read_link(path)
    }
}

/// A directory's stamp and entries, sorted by name, from one open directory: `fstat` then
/// `getdents64` (std's `read_dir` would `fstat` it too, and hand the result to nobody). An
/// error anywhere (the directory cannot be opened, a read fails, an entry's kind cannot be
/// found) fails the whole listing: a part of one is never passed off as all of it.
fn read_dir(path: &Path) -> std::io::Result<(DirStamp, Vec<(OsString, Kind)>)> {
    use rustix::fs::{FileType, OFlags};
    use std::os::unix::ffi::OsStrExt;
    let io = |e: rustix::io::Errno| std::io::Error::from_raw_os_error(e.raw_os_error());
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(io)?;
    let stamp = stamp_of(&rustix::fs::fstat(&fd).map_err(io)?);
    let mut dir = rustix::fs::Dir::new(fd).map_err(io)?;
    let mut out = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let kind = match entry.file_type() {
            // Filesystems that do not fill in d_type.
            FileType::Unknown => {
                let st = dir.fd().map_err(io).and_then(|d| {
                    rustix::fs::statat(d, entry.file_name(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                        .map_err(io)
                });
                match st {
                    Ok(st) => kind_of_raw(FileType::from_raw_mode(st.st_mode)),
                    // Removed since the listing.
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                    Err(e) => return Err(e),
                }
            }
            t => kind_of_raw(t),
        };
        out.push((std::ffi::OsStr::from_bytes(name).to_os_string(), kind));
    }
    out.sort();
    Ok((stamp, out))
}

fn kind_of_raw(t: rustix::fs::FileType) -> Kind {
    use rustix::fs::FileType;
    match t {
        FileType::Directory => Kind::Dir,
        FileType::RegularFile => Kind::File,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    }
}

fn stamp_of(st: &rustix::fs::Stat) -> DirStamp {
    DirStamp {
        dev: st.st_dev,
        ino: st.st_ino,
        ctime: st.st_ctime,
        ctime_nsec: i64::try_from(st.st_ctime_nsec).unwrap_or(0),
    }
}

/// Up to `limit` bytes of a text file, in as few reads as it takes. Files of `/proc` and of
/// cgroup hierarchies report a size of 0, so `std::fs::read_to_string` starts with a 32-byte
/// probe and doubles from there; the kernel generates the text again for each of those reads
/// (`/proc/self/mountinfo` eight times over, a tenth of a millisecond per run).
///
/// Only a regular file is read: the planner reads files an earlier run could have made (a
/// `.git` file's `commondir`), and a FIFO there would block every later run at its open
/// (`O_NONBLOCK` makes the open return; the type check refuses the rest).
pub fn read_text(path: &Path, limit: usize) -> Option<String> {
    String::from_utf8(read_regular(path, limit)?).ok()
}

/// Up to `limit` bytes of `path` if it is a regular file, opened without blocking (a FIFO
/// planted by an earlier run must not hang the planner).
fn read_regular(path: &Path, limit: usize) -> Option<Vec<u8>> {
    use rustix::fs::{FileType, Mode, OFlags};
    use std::io::Read;
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return None;
    }
    let file = std::fs::File::from(fd);
    // With spare capacity, `read_to_end` reads straight into it (no probe, no zeroing).
    let mut buf = Vec::with_capacity(limit.min(8 * 1024));
    file.take(limit as u64).read_to_end(&mut buf).ok()?;
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host that counts what it is asked.
    #[derive(Default)]
    struct Counting {
        asked: std::cell::Cell<usize>,
    }
    impl HostView for Counting {
        fn stat(&self, _: &Path) -> Option<Entry> {
            self.asked.set(self.asked.get() + 1);
            None
        }
        fn lstat_kind(&self, path: &Path) -> Option<Kind> {
            self.asked.set(self.asked.get() + 1);
            (path == Path::new("/a")).then_some(Kind::Symlink)
        }
        fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
            self.asked.set(self.asked.get() + 1);
            Some(path.join("x"))
        }
        fn list_dir(&self, _: &Path) -> Vec<(OsString, Kind)> {
            self.asked.set(self.asked.get() + 1);
            Vec::new()
        }
        fn read_small(&self, _: &Path) -> Option<String> {
            self.asked.set(self.asked.get() + 1);
            None
        }
    }

    /// Multigrain ctimes are decided by the mount's type name and the kernel: ext2 and ext3
    /// (the ext4 driver, statfs's 0xEF53 all the same) are not, nor anything unknown or a
    /// kernel before 6.13.
    #[test]
    fn multigrain_by_type_name_and_kernel() {
        for t in ["ext4", "xfs", "btrfs", "tmpfs"] {
            assert!(multigrain(t, "6.13.0"), "{t}");
            assert!(multigrain(t, "6.18.44-fc-v669"), "{t}");
            assert!(!multigrain(t, "6.12.9"), "{t}");
            assert!(!multigrain(t, ""), "{t}");
        }
        for t in [
            "ext2",
            "ext3",
            "overlay",
            "nfs4",
            "fuse.sshfs",
            "f2fs",
            "vfat",
            "",
            "EXT4",
        ] {
            assert!(!multigrain(t, "6.18.0"), "{t}");
        }
        let info = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                    95 22 7:0 / /mnt/e3 rw,relatime shared:50 - ext3 /dev/loop0 rw\n\
                    96 22 0:50 / /mnt/o rw master:3 propagation_from:2 - overlay overlay rw\n";
        assert_eq!(fstype_of_mount(info, 22), Some("ext4"));
        assert_eq!(fstype_of_mount(info, 95), Some("ext3"));
        assert_eq!(fstype_of_mount(info, 96), Some("overlay"));
        assert_eq!(fstype_of_mount(info, 9), None);
        // This machine's own mounts: the answer names a type (the lookup works at all).
        let tmp = tempfile::tempdir().unwrap();
        assert!(mount_fstype(tmp.path()).is_some_and(|t| !t.is_empty()));
    }

    /// The remembering view asks the host once per path and kind of question, answers as the
    /// host did, and passes listings through every time.
    #[test]
    fn remembering_asks_once_per_path_and_answers_as_the_host() {
        let host = Counting::default();
        let view = Remembering::new(&host);
        for _ in 0..3 {
            assert_eq!(view.lstat_kind(Path::new("/a")), Some(Kind::Symlink));
            assert_eq!(view.lstat_kind(Path::new("/b")), None);
            assert_eq!(view.stat(Path::new("/a")), None);
            assert_eq!(
                view.canonicalize(Path::new("/a")),
                Some(PathBuf::from("/a/x"))
            );
        }
        assert_eq!(host.asked.get(), 4);
        view.list_dir(Path::new("/a"));
        view.list_dir(Path::new("/a"));
        assert_eq!(
            host.asked.get(),
            6,
            "listings are asked of the host every time"
        );
    }

    /// The remembering view's kinds and resolutions are what the host says of every path,
    /// asked in any order: names present and missing, links to directories, files and
    /// nowhere, a link loop, a link on the way, a file taken for a directory, a trailing `/`
    /// (which `lstat` follows a final link through: remembered apart from the name without
    /// it), `.` and `..`.
    #[test]
    fn remembering_answers_as_the_host_in_any_order() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(home.join(".config/real")).unwrap();
        std::fs::create_dir_all(home.join("dotfiles/nvim")).unwrap();
        std::fs::write(home.join(".bashrc"), "").unwrap();
        std::fs::write(home.join("dotfiles/nvim/init.lua"), "").unwrap();
        let link = |to: &str, at: &str| std::os::unix::fs::symlink(to, home.join(at)).unwrap();
        link("dotfiles", ".dotfiles");
        link("../dotfiles/nvim", ".config/nvim");
        link(".bashrc", ".profile");
        link("nowhere", ".dangling");
        link(".loop-b", ".loop-a");
        link(".loop-a", ".loop-b");
        let mut paths: Vec<PathBuf> = Vec::new();
        for name in [
            ".bashrc",
            ".profile",
            ".dangling",
            ".loop-a",
            ".dotfiles",
            ".dotfiles/nvim",
            ".dotfiles/nvim/init.lua",
            ".dotfiles/missing",
            ".config",
            ".config/nvim",
            ".config/nvim/",
            ".config/nvim/init.lua",
            ".config/real",
            ".config/real/",
            ".config/missing",
            ".config/missing/deeper",
            ".bashrc/under-a-file",
            ".profile/",
            ".bashrc/",
            ".dotfiles/",
            ".config/../.bashrc",
            "./.bashrc",
            ".ssh",
            ".aws",
            ".loop-a/x",
        ] {
            paths.push(home.join(name));
        }
        paths.push(root.clone());
        paths.push(PathBuf::from("/"));
        let host = RealHost;
        let orders: [Vec<&PathBuf>; 3] = [
            paths.iter().collect(),
            paths.iter().rev().collect(),
            (paths.iter().step_by(2))
                .chain(paths.iter().skip(1).step_by(2))
                .collect(),
        ];
        let kind = |view: &Remembering, p: &PathBuf| {
            assert_eq!(
                view.lstat_kind(p),
                host.lstat_kind(p),
                "lstat {}",
                p.display()
            );
        };
        let resolved = |view: &Remembering, p: &PathBuf| {
            let (got, want) = (view.canonicalize(p), host.canonicalize(p));
            assert_eq!(got, want, "canonicalize {}", p.display());
        };
        for order in orders {
            let view = Remembering::new(&host);
            for p in &order {
                kind(&view, p);
                resolved(&view, p);
            }
            // Resolutions first, then kinds.
            let view = Remembering::new(&host);
            order.iter().for_each(|p| resolved(&view, p));
            order.iter().for_each(|p| kind(&view, p));
        }
        // Control: the trailing `/` is asked apart. `Path` takes `.profile/` for `.profile`,
        // a link `lstat` does not follow without the `/`.
        assert_eq!(home.join(".profile/"), home.join(".profile"));
        assert_ne!(
            host.lstat_kind(&home.join(".profile/")),
            host.lstat_kind(&home.join(".profile"))
        );
    }

    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        for (r, ok) in [
            ("6.13.0", true),
            ("6.18.44-fc-v669\n", true),
            ("7.0", true),
            ("6.12.9", false),
            ("5.15.0-91-generic", false),
            ("6.9.0", false),
            ("", false),
            ("x", false),
        ] {
            assert_eq!(release_at_least(r, (6, 13)), ok, "{r:?}");
        }
    }

    /// A FIFO where the planner reads a small file (planted by an earlier run) neither blocks
    /// it nor is read; regular files and `/proc` files are.
    #[test]
    fn read_text_skips_a_fifo_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("commondir");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(read_text(&fifo, 1024)));
        let got = rx.recv_timeout(std::time::Duration::from_secs(5));
        assert_eq!(got, Ok(None), "read_text blocked on a FIFO or read it");
        std::fs::write(tmp.path().join("f"), "../..\n").unwrap();
        assert_eq!(
            read_text(&tmp.path().join("f"), 1024).as_deref(),
            Some("../..\n")
        );
        assert!(read_text(Path::new("/proc/self/status"), 1 << 16).is_some());
    }
}
