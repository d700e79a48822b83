//! A private mount namespace for a helper program (gVisor's `runsc`) with detached mount
//! trees attached over their targets: an idmapped view of a root caller's workspace, so the
//! helper's file server sees it owned by the unprivileged id the command runs as, as the
//! native backend's sandbox does (see `parent::idmapped_clone`); and [`Covers`]: an empty
//! file or directory over every masked path, each placed only on the file the planner saw
//! (its `(st_dev, st_ino)`), as the native backend's init places its masks.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use crate::postfork::Identity;
use crate::raw::{self, Errno};

/// A path to cover in the helper's mount namespace with something empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cover {
    /// Absolute and canonical when planned: looked up through no symbolic link.
    pub target: CString,
    /// An empty directory (else an empty file).
    pub dir: bool,
    /// Read as empty (mode 0555 / 0444); else mode 0, unreadable.
    pub readable: bool,
    /// `(st_dev, st_ino)` the target must still have when it is covered: a file moved there
    /// since (a directory exchanged by a concurrent process) fails the start with `ESTALE`.
    /// `None`: covered unchecked.
    pub expect: Option<Identity>,
}

/// What a cover's lookup found at its target, compared with what was planned: `Ok` to cover
/// it, `ESTALE` when it is another file.
/// A planned device of [`crate::postfork::ANY_DEVICE`] compares the inode only (a path inside
/// a review run's view: the overlay keeps the workspace's inode numbers, not its device).
pub fn same_file(expect: Option<Identity>, found: (u64, u64)) -> Result<(), Errno> {
    match expect {
        Some((dev, ino))
            if ino != found.1 || (dev != crate::postfork::ANY_DEVICE && dev != found.0) =>
        {
            Err(Errno(libc::ESTALE))
        }
        _ => Ok(()),
    }
}

/// A review run's copy-on-write view of the workspace for a caller who is not root, made by
/// the helper's child in its own user and mount namespace (see
/// [`user_private_mounts_on_exec`]) before the covers (which then go onto the view): an
/// overlay of `lower` (the workspace, canonical) with `changes/upper` and `changes/work`,
/// attached over `lower`. As the native backend's init makes it (`postfork::MountOp::Overlay`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub lower: CString,
    pub changes: CString,
    /// Under a disk bound: the upper is a tmpfs of this size (`size=` option, bytes) holding
    /// `upper/` with the mode given; its mount descriptor is handed back
    /// ([`Covers::bounded_upper`]).
    pub disk: Option<(CString, u32)>,
}

/// What failed in the helper's child, as [`Covers::failed`] tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    /// The namespaces that hold the mounts could not be made.
    SetUp,
    /// The review view ([`View`]).
    View,
    /// The cover at this index.
    Cover(usize),
}

/// One detached, read-only, empty mount per [`Cover`], made before the helper starts (nothing
/// is allocated between fork and exec), or, for a caller who is not root, what the helper's
/// child makes in a user and mount namespace of its own ([`Covers::unprivileged`]); and a
/// pipe on which the child says which cover failed, if one did ([`Covers::failed`]).
pub struct Covers {
    mounts: Vec<(OwnedFd, CString, Option<Identity>)>,
    /// Unprivileged: the source in [`cover_sources`] each cover is cloned from, in the child.
    pending: Vec<(&'static std::ffi::CStr, CString, Option<Identity>)>,
    /// Unprivileged: a review run's view, made by the child first.
    view: Option<View>,
    /// Under the view's disk bound: (this process's end, the child's end) of the channel the
    /// child hands the bounded upper's mount descriptor over.
    disk_channel: Option<(OwnedFd, OwnedFd)>,
    report: Option<(OwnedFd, OwnedFd)>,
}

/// The index a child reports when the namespace itself could not be set up.
const SET_UP: u32 = u32::MAX;
/// The index a child reports when the review view could not be made.
const VIEW: u32 = u32::MAX - 1;

/// A detached tmpfs holding what covers are cloned from: `d` and `f` (mode 0), `ed` (0555)
/// and `ef` (0444), as the native init's masks. Allocation-free (the unprivileged child makes
/// it after fork).
fn cover_sources() -> Result<i32, Errno> {
    let at = raw::detached_tmpfs(c"0755")?;
    let made = (|| {
        raw::mkdirat(at, c"d", 0)?;
        raw::mkdirat(at, c"ed", 0o555)?;
        for name in [c"f", c"ef"] {
            raw::close(raw::openat(at, name, libc::O_CREAT | libc::O_RDONLY, 0)?);
        }
        // Exact modes, whatever the umask.
        for (name, mode) in [(c"d", 0), (c"f", 0), (c"ed", 0o555), (c"ef", 0o444)] {
            raw::fchmodat(at, name, mode)?;
        }
        Ok(())
    })();
    match made {
        Ok(()) => Ok(at),
        Err(e) => {
            raw::close(at);
            Err(e)
        }
    }
}

/// The source of a cover in [`cover_sources`].
fn source_of(c: &Cover) -> &'static std::ffi::CStr {
    match (c.dir, c.readable) {
        (true, false) => c"d",
        (true, true) => c"ed",
        (false, false) => c"f",
        (false, true) => c"ef",
    }
}

fn report_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = raw::pipe()?;
    // SAFETY: both ends were just returned by pipe2 and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(r), OwnedFd::from_raw_fd(w)) })
}

impl Covers {
    /// Prepares `covers` (each gets its own detached copy of an empty file or directory,
    /// read-only, nosuid, nodev, noexec). Needs CAP_SYS_ADMIN (a root caller). Nothing to
    /// cover makes no mount at all.
    pub fn prepare(covers: &[Cover]) -> io::Result<Covers> {
        let mut out = Covers {
            mounts: Vec::with_capacity(covers.len()),
            pending: Vec::new(),
            view: None,
            disk_channel: None,
            report: None,
        };
        if covers.is_empty() {
            return Ok(out);
        }
        // SAFETY: the descriptor was just returned by fsmount and is owned by nobody else.
        let sources = unsafe { OwnedFd::from_raw_fd(cover_sources()?) };
        for c in covers {
            let fd = raw::cover_clone(sources.as_raw_fd(), source_of(c))?;
            // SAFETY: fd was just returned by open_tree and is owned by nobody else.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            out.mounts.push((fd, c.target.clone(), c.expect));
        }
        out.report = Some(report_pipe()?);
        Ok(out)
    }

    /// `covers` for a caller who is not root: made by the helper's child in a user namespace
    /// of its own (its ids mapped to themselves, so the helper runs as before, without
    /// capabilities once it has started) and a mount namespace that namespace owns (see
    /// [`user_private_mounts_on_exec`]), after a review run's `view` when there is one.
    /// Nothing is mounted here.
    pub fn unprivileged(covers: &[Cover], view: Option<View>) -> io::Result<Covers> {
        let disk_channel = match view.as_ref().and_then(|v| v.disk.as_ref()) {
            Some(_) => Some(crate::parent::fd_channel()?),
            None => None,
        };
        Ok(Covers {
            mounts: Vec::new(),
            pending: (covers.iter())
                .map(|c| (source_of(c), c.target.clone(), c.expect))
                .collect(),
            report: (!covers.is_empty() || view.is_some())
                .then(report_pipe)
                .transpose()?,
            view,
            disk_channel,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.mounts.is_empty() && self.pending.is_empty() && self.view.is_none()
    }

    /// After the helper started: the mount descriptor of the view's bounded upper (the tmpfs
    /// under a disk bound, for reading the change set), which its child sent before it ran
    /// the helper. `None` without a disk bound.
    pub fn bounded_upper(&mut self) -> io::Result<Option<OwnedFd>> {
        let Some((ours, childs)) = self.disk_channel.take() else {
            return Ok(None);
        };
        // The child is past its exec (or gone): with its end closed here, the read ends at
        // what it sent.
        drop(childs);
        crate::parent::recv_fd(&ours)
    }

    /// After the helper failed to start: what failed (a cover by its index in what
    /// [`Covers::prepare`] or [`Covers::unprivileged`] was given, the review view, or the
    /// namespaces that hold them) and why (`ESTALE`: another file is at its path now;
    /// `ENOENT`: nothing is; `ELOOP`: a symbolic link is on its way). `None` when the start
    /// failed for another reason.
    pub fn failed(self) -> Option<(Failed, Errno)> {
        let (r, w) = self.report?;
        // The child is gone (std waits for it before reporting a failed start): with our
        // write end closed, the read ends at what it wrote.
        drop(w);
        let mut b = [0u8; 8];
        let mut got = 0;
        while got < b.len() {
            match raw::read(r.as_raw_fd(), &mut b[got..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        (got == b.len()).then(|| {
            let index = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
            let errno = Errno(i32::from_ne_bytes([b[4], b[5], b[6], b[7]]));
            let failed = match index {
                SET_UP => Failed::SetUp,
                VIEW => Failed::View,
                i => Failed::Cover(i as usize),
            };
            (failed, errno)
        })
    }
}

/// Writes `(index, errno)` to the report pipe `w` (in the child: allocation-free).
fn report(w: Option<i32>, index: u32, e: Errno) -> Errno {
    if let Some(w) = w {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&index.to_ne_bytes());
        b[4..].copy_from_slice(&e.0.to_ne_bytes());
        let _ = raw::write_all(w, &b);
    }
    e
}

/// Covers `target` with the detached mount `fd` if it is still the file `expect` names: looked
/// up through no symbolic link, its identity compared on the descriptor the mount then goes
/// onto (no second lookup for a concurrent rename to race).
fn cover(fd: i32, target: &std::ffi::CStr, expect: Option<Identity>) -> Result<(), Errno> {
    let at = raw::openat_no_symlinks(libc::AT_FDCWD, target, libc::O_PATH)?;
    // st_dev's and st_ino's widths differ between architectures.
    #[allow(clippy::unnecessary_cast)]
    let res = raw::fstat(at)
        .and_then(|st| same_file(expect, (st.st_dev as u64, st.st_ino as u64)))
        .and_then(|()| raw::move_mount_fd_to_fd(fd, at));
    raw::close(at);
    res
}

/// Makes `cmd` start in a new, private mount namespace with each `(tree, target)` attached
/// over `target` (looked up through no symbolic link), then every cover of `covers` over its
/// target (through the trees just attached), in order: a cover whose target is no longer the
/// file planned fails the start (its index and errno are written to `covers`' pipe first, see
/// [`Covers::failed`]). The trees and covers must live until `cmd` is spawned: the caller
/// keeps them.
pub fn private_mounts_on_exec(
    cmd: &mut std::process::Command,
    trees: &[(OwnedFd, CString)],
    covers: &Covers,
) {
    let mounts: Vec<(i32, CString)> = trees
        .iter()
        .map(|(fd, target)| (fd.as_raw_fd(), target.clone()))
        .collect();
    let covered: Vec<(i32, CString, Option<Identity>)> = (covers.mounts.iter())
        .map(|(fd, target, expect)| (fd.as_raw_fd(), target.clone(), *expect))
        .collect();
    let report_fd = covers.report.as_ref().map(|(_, w)| w.as_raw_fd());
    let root = c"/".to_owned();
    // SAFETY: the closure runs in the child between fork and exec; it only makes system
    // calls on descriptors and strings prepared here (no allocation: `mounts`, `covered` and
    // `root` are moved in whole, the report is a fixed array, and the trees, covers and
    // report pipe stay open in the parent until the spawn).
    unsafe {
        cmd.pre_exec(move || {
            raw::unshare(libc::CLONE_NEWNS)?;
            raw::mount(None, &root, None, libc::MS_REC | libc::MS_PRIVATE, None)?;
            for (fd, target) in &mounts {
                raw::move_mount_fd_no_symlinks(*fd, target)?;
            }
            for (i, (fd, target, expect)) in covered.iter().enumerate() {
                cover(*fd, target, *expect).map_err(|e| report(report_fd, i as u32, e))?;
            }
            Ok(())
        });
    }
}

/// `"<id> <id> 1"`: an id map line mapping `id` to itself, in `buf` (allocation-free).
fn self_map(id: u32, buf: &mut [u8; 32]) -> &[u8] {
    let mut digits = [0u8; 10];
    let (mut n, mut len) = (id, 0);
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut at = 0;
    for _ in 0..2 {
        for d in digits[..len].iter().rev() {
            buf[at] = *d;
            at += 1;
        }
        buf[at] = b' ';
        at += 1;
    }
    buf[at] = b'1';
    &buf[..=at]
}

fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> Result<(), Errno> {
    let fd = raw::openat(libc::AT_FDCWD, path, libc::O_WRONLY, 0)?;
    let res = raw::write_all(fd, bytes);
    raw::close(fd);
    res
}

/// The child's part of [`user_private_mounts_on_exec`] up to the covers: a user namespace
/// mapping its ids to themselves and a private mount namespace it owns, and the covers'
/// sources there. Allocation-free.
fn user_private_namespace() -> Result<i32, Errno> {
    own_user_and_mount_namespace()?;
    raw::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    cover_sources()
}

/// A new user namespace mapping the caller's ids to themselves, and a copy of its mount
/// namespace that the new one owns (whose mounts, made in a more privileged one, are then
/// locked: they cannot be unmounted or moved to show what they cover). Allocation-free.
fn own_user_and_mount_namespace() -> Result<(), Errno> {
    let (uid, gid) = (raw::euid(), raw::egid());
    raw::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS)?;
    // A process that joined a user namespace before (the held network's) is not dumpable:
    // its /proc/self files belong to root, and it could not open its own maps.
    raw::prctl(libc::PR_SET_DUMPABLE, 1, 0)?;
    let mut buf = [0u8; 32];
    write_file(c"/proc/self/uid_map", self_map(uid, &mut buf))?;
    write_file(c"/proc/self/setgroups", b"deny")?;
    write_file(c"/proc/self/gid_map", self_map(gid, &mut buf))
}

/// Makes `cmd` (a caller who is not root) start in a user namespace of its own, its ids
/// mapped to themselves (after exec it has no capabilities there: the helper runs as it did
/// without), and a private mount namespace that namespace owns, with every cover of `covers`
/// ([`Covers::unprivileged`]) made there and put over its target as [`private_mounts_on_exec`]
/// does: only on the file planned. Then the helper starts in one more user and mount
/// namespace, less privileged, where the covers are locked (they cannot be unmounted to show
/// what they cover), even when it runs as 0 there with every capability (a caller mapped to 0
/// in the held network's user namespace: runsc then makes no user namespace of its own). A
/// failure is reported as [`Covers::failed`] says.
pub fn user_private_mounts_on_exec(cmd: &mut std::process::Command, covers: &Covers) {
    user_mounts_on_exec(cmd, covers, true);
}

/// [`user_private_mounts_on_exec`], the covers locked or (tests' controls only) not.
fn user_mounts_on_exec(cmd: &mut std::process::Command, covers: &Covers, lock: bool) {
    let pending = covers.pending.clone();
    let view = covers.view.clone();
    let disk_sock = covers.disk_channel.as_ref().map(|(_, c)| c.as_raw_fd());
    let report_fd = covers.report.as_ref().map(|(_, w)| w.as_raw_fd());
    // SAFETY: the closure runs in the child between fork and exec (one thread: unshare of a
    // user namespace needs it); it only makes system calls on descriptors, fixed arrays and
    // strings prepared here (no allocation: `pending` and `view` are moved in whole, the
    // disk bound's options are a fixed array of borrowed strings, and the report pipe and
    // the disk channel stay open in the parent until the spawn).
    unsafe {
        cmd.pre_exec(move || {
            let sources = user_private_namespace().map_err(|e| report(report_fd, SET_UP, e))?;
            if let Some(v) = &view {
                if let Err(e) = make_view(v, disk_sock) {
                    raw::close(sources);
                    return Err(report(report_fd, VIEW, e).into());
                }
            }
            for (i, (name, target, expect)) in pending.iter().enumerate() {
                let made = raw::cover_clone(sources, name).and_then(|fd| {
                    let res = cover(fd, target, *expect);
                    raw::close(fd);
                    res
                });
                if let Err(e) = made {
                    raw::close(sources);
                    return Err(report(report_fd, i as u32, e).into());
                }
            }
            raw::close(sources);
            if lock {
                own_user_and_mount_namespace().map_err(|e| report(report_fd, SET_UP, e))?;
            }
            Ok(())
        });
    }
}

/// The child's review view ([`View`]): the overlay made in its user namespace and attached
/// over the workspace, looked up through no symbolic link. Under a disk bound its upper is a
/// tmpfs whose mount descriptor goes to `disk_sock` first. Allocation-free.
fn make_view(v: &View, disk_sock: Option<i32>) -> Result<(), Errno> {
    let layers = match (&v.disk, disk_sock) {
        (Some((size, mode)), Some(sock)) => {
            let options = [(c"size", size.as_c_str()), (c"mode", c"0700")];
            crate::postfork::bounded_layers(
                &v.lower,
                crate::postfork::DiskBound {
                    options: &options,
                    mode: *mode,
                    sock,
                },
            )?
        }
        (Some(_), None) => return Err(Errno(libc::EINVAL)),
        (None, _) => crate::overlay::open_layers(&v.lower, &v.changes)?,
    };
    let fd = crate::overlay::detached_overlay(layers, true);
    crate::overlay::close_layers(layers);
    let fd = fd?;
    let res = raw::move_mount_fd_no_symlinks(fd, &v.lower);
    raw::close(fd);
    res
}

/// Makes `cmd` receive SIGKILL when the thread that spawned it ends (`PR_SET_PDEATHSIG`): a
/// helper that holds a sandbox must not outlive its supervisor.
pub fn die_with_parent_on_exec(cmd: &mut std::process::Command) {
    // SAFETY: the closure runs in the child between fork and exec and makes one prctl call
    // with integer arguments.
    unsafe {
        cmd.pre_exec(|| {
            raw::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0)?;
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};

    /// Covers prepared by a root caller, or made by the child in a user namespace of its own
    /// (any caller).
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Mode {
        Root,
        User,
    }

    /// `D/S/C/.env` (the secret) and `D/P/C` (with a decoy `.env` when asked); `None` (and
    /// why, printed) for [`Mode::Root`] when the caller is not root (CAP_SYS_ADMIN).
    fn fixture(name: &str, decoy: bool, mode: Mode) -> Option<PathBuf> {
        if mode == Mode::Root && raw::euid() != 0 {
            println!("n/a: prepared covers are a root caller's (CAP_SYS_ADMIN)");
            return None;
        }
        let d =
            Path::new("/var/tmp").join(format!("sys-cover-{name}-{mode:?}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("S/C")).unwrap();
        std::fs::create_dir_all(d.join("P/C")).unwrap();
        std::fs::write(d.join("S/C/.env"), "SECRET=1\n").unwrap();
        if decoy {
            std::fs::write(d.join("P/C/.env"), "decoy\n").unwrap();
        }
        Some(d)
    }

    fn exchange(d: &Path) {
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            d.join("P"),
            rustix::fs::CWD,
            d.join("S"),
            rustix::fs::RenameFlags::EXCHANGE,
        )
        .unwrap();
    }

    fn id(p: &Path) -> (u64, u64) {
        let m = std::fs::symlink_metadata(p).unwrap();
        (m.dev(), m.ino())
    }

    fn cover_of(p: &Path, expect: Option<Identity>) -> Cover {
        Cover {
            target: CString::new(p.as_os_str().as_encoded_bytes()).unwrap(),
            dir: false,
            readable: false,
            expect,
        }
    }

    fn covers(mode: Mode, covers: &[Cover]) -> Covers {
        match mode {
            Mode::Root => Covers::prepare(covers).unwrap(),
            Mode::User => Covers::unprivileged(covers, None).unwrap(),
        }
    }

    fn on_exec(mode: Mode, cmd: &mut Command, trees: &[(OwnedFd, CString)], covers: &Covers) {
        match mode {
            Mode::Root => private_mounts_on_exec(cmd, trees, covers),
            Mode::User => user_private_mounts_on_exec(cmd, covers),
        }
    }

    /// `cat` of both places of the secret in a private namespace with `trees` and `covers`,
    /// after `between` ran (the helper started, before it reads): what it printed, or the
    /// failed cover.
    fn read_both(
        d: &Path,
        mode: Mode,
        trees: &[(OwnedFd, CString)],
        covers: Covers,
        between: impl FnOnce(),
    ) -> Result<String, Option<(Failed, Errno)>> {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg("read x; cat \"$0/P/C/.env\" \"$0/S/C/.env\" 2>/dev/null; echo end")
            .arg(d)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        on_exec(mode, &mut cmd, trees, &covers);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(_) => return Err(covers.failed()),
        };
        between();
        child.stdin.take().unwrap().write_all(b"\n").unwrap();
        let out = child.wait_with_output().unwrap();
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A cover placed on the secret stays on it when the directories holding it are exchanged
    /// afterwards (as another run's command can): the helper reads nothing of it at either
    /// place. Control: without the cover it reads it at its new place. Prepared by a root
    /// caller, and made in a user namespace of the helper's own (any caller).
    #[test]
    fn a_cover_follows_the_file_it_covers_through_an_exchange() {
        for mode in [Mode::Root, Mode::User] {
            let Some(d) = fixture("follows", false, mode) else {
                continue;
            };
            let secret = id(&d.join("S/C/.env"));
            let c = covers(mode, &[cover_of(&d.join("S/C/.env"), Some(secret))]);
            let out = read_both(&d, mode, &[], c, || exchange(&d)).unwrap();
            assert!(
                out.ends_with("end\n") && !out.contains("SECRET"),
                "{mode:?}: {out:?}"
            );
            // The secret is at the other place now, on the host (the exchange happened).
            let moved = std::fs::read_to_string(d.join("P/C/.env")).unwrap();
            assert!(moved.contains("SECRET"));
            // Control: uncovered, the helper reads it there.
            exchange(&d);
            let out = read_both(&d, mode, &[], covers(mode, &[]), || exchange(&d)).unwrap();
            assert!(out.contains("SECRET"), "{mode:?}: {out:?}");
            std::fs::remove_dir_all(&d).unwrap();
        }
    }

    /// A cover whose path holds another file when the helper starts (the directories were
    /// exchanged after planning: a decoy is there, the secret at the other place) is refused,
    /// naming the cover, with `ESTALE`; nothing at the path is `ENOENT`. Control: the same
    /// cover placed by path (no identity, as runsc places its own masks) covers the decoy,
    /// and the helper reads the secret.
    #[test]
    fn a_cover_goes_only_on_the_file_planned() {
        for mode in [Mode::Root, Mode::User] {
            let Some(d) = fixture("planned", true, mode) else {
                continue;
            };
            let env = d.join("S/C/.env");
            let secret = id(&env);
            exchange(&d);
            let c = covers(mode, &[cover_of(&env, Some(secret))]);
            assert_eq!(
                read_both(&d, mode, &[], c, || ()),
                Err(Some((Failed::Cover(0), Errno(libc::ESTALE)))),
                "{mode:?}"
            );
            // The cover that failed is the one named (the first, by path, went on).
            let other = cover_of(&d.join("P/C/nothing-planned"), None);
            let c = covers(mode, &[cover_of(&env, None), other]);
            assert_eq!(
                read_both(&d, mode, &[], c, || ()),
                Err(Some((Failed::Cover(1), Errno(libc::ENOENT)))),
                "{mode:?}"
            );
            // A start that fails after the covers (no such program) names none.
            let c = covers(mode, &[cover_of(&env, None)]);
            let mut cmd = Command::new(d.join("no-such-program"));
            on_exec(mode, &mut cmd, &[], &c);
            assert!(cmd.spawn().is_err());
            assert_eq!(c.failed(), None, "{mode:?}");
            // Control: by path, the decoy is covered and the secret read.
            let c = covers(mode, &[cover_of(&env, None)]);
            let out = read_both(&d, mode, &[], c, || ()).unwrap();
            assert!(
                out.contains("SECRET") && !out.contains("decoy"),
                "{mode:?}: {out:?}"
            );
            std::fs::remove_dir_all(&d).unwrap();
        }
    }

    /// Through an idmapped view of the tree holding it (a root caller's workspace under
    /// gVisor), a file has the identity the host gives it (same superblock: same `st_dev`),
    /// so its cover goes on; control: another identity is refused there too.
    #[test]
    fn a_cover_through_an_idmapped_view_compares_the_hosts_identity() {
        let Some(d) = fixture("idmapped", false, Mode::Root) else {
            return;
        };
        let env = d.join("S/C/.env");
        let secret = id(&env);
        let target = CString::new(d.as_os_str().as_encoded_bytes()).unwrap();
        let view = || {
            let ns = crate::parent::idmap_userns("0 2146435072 1\n", "0 2146435072 1\n").unwrap();
            vec![(
                crate::parent::idmapped_clone(&d, ns.fd(), false).unwrap(),
                target.clone(),
            )]
        };
        let c = covers(Mode::Root, &[cover_of(&env, Some(secret))]);
        let out = read_both(&d, Mode::Root, &view(), c, || exchange(&d)).unwrap();
        assert!(out.ends_with("end\n") && !out.contains("SECRET"), "{out:?}");
        exchange(&d);
        let c = covers(
            Mode::Root,
            &[cover_of(&env, Some((secret.0, secret.1 + 1)))],
        );
        assert_eq!(
            read_both(&d, Mode::Root, &view(), c, || ()),
            Err(Some((Failed::Cover(0), Errno(libc::ESTALE))))
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// The helper runs as 0 with every capability in its user namespace (as runsc does in the
    /// held network's, the caller mapped to 0 there) and unmounts the cover to read what it
    /// covers: the covers are locked where it starts, so the umount fails and nothing is read.
    /// Control: not locked (its namespace owns the covers), the same helper reads the secret.
    #[test]
    fn an_unprivileged_callers_covers_are_locked_for_a_helper_with_capabilities() {
        use std::os::unix::process::CommandExt;
        let Some(d) = fixture("locked", false, Mode::User) else {
            return;
        };
        let env = d.join("S/C/.env");
        let secret = id(&env);
        let attack = |lock: bool| -> String {
            let mut cmd = Command::new("/bin/sh");
            cmd.arg("-c")
                .arg(
                    "umount \"$0/S/C/.env\" 2>/dev/null; cat \"$0/S/C/.env\" 2>/dev/null; echo end",
                )
                .arg(&d)
                .stdout(Stdio::piped());
            // A caller who is not root: mapped to 0 first, as in the held network's namespace.
            let (uid, gid) = (raw::euid(), raw::egid());
            if uid != 0 {
                let (u, g) = (format!("0 {uid} 1\n"), format!("0 {gid} 1\n"));
                // SAFETY: between fork and exec: unshare and writes of buffers made before.
                unsafe {
                    cmd.pre_exec(move || {
                        raw::unshare(libc::CLONE_NEWUSER)?;
                        write_file(c"/proc/self/uid_map", u.as_bytes())?;
                        write_file(c"/proc/self/setgroups", b"deny")?;
                        write_file(c"/proc/self/gid_map", g.as_bytes())?;
                        Ok(())
                    });
                }
            }
            let c = covers(Mode::User, &[cover_of(&env, Some(secret))]);
            user_mounts_on_exec(&mut cmd, &c, lock);
            let out = cmd.output().unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let locked = attack(true);
        assert!(
            locked.ends_with("end\n") && !locked.contains("SECRET"),
            "{locked:?}"
        );
        let control = attack(false);
        assert!(control.contains("SECRET"), "control: {control:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A review run's view made by the helper's child (any caller: in a user namespace of its
    /// own): the helper's write to the workspace lands in the change directory's upper (or,
    /// under a disk bound, on the tmpfs whose mount comes back after the start), the
    /// workspace keeps its file; a cover planned with the workspace's inode and any device
    /// goes onto that file in the view. Control: without the view the same write reaches the
    /// workspace.
    #[test]
    fn an_unprivileged_view_takes_the_helpers_writes_and_its_covers_go_onto_it() {
        let d = Path::new("/var/tmp").join(format!("sys-view-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let (ws, changes) = (d.join("ws"), d.join("changes"));
        for dir in [&ws, &changes.join("upper"), &changes.join("work")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(ws.join("a.txt"), "orig\n").unwrap();
        std::fs::write(ws.join(".env"), "SECRET=1\n").unwrap();
        let env = ws.join(".env");
        let in_view = Some((crate::postfork::ANY_DEVICE, id(&env).1));
        let c = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let run = |view: Option<View>| -> (String, Option<OwnedFd>) {
            let mut covers = Covers::unprivileged(&[cover_of(&env, in_view)], view).unwrap();
            let mut cmd = Command::new("/bin/sh");
            cmd.arg("-c")
                .arg("echo run > \"$0/a.txt\"; cat \"$0/.env\" 2>/dev/null; echo end")
                .arg(&ws)
                .stdout(Stdio::piped());
            user_private_mounts_on_exec(&mut cmd, &covers);
            let child = cmd.spawn().unwrap();
            let bounded = covers.bounded_upper().unwrap();
            let out = child.wait_with_output().unwrap();
            (String::from_utf8_lossy(&out.stdout).into_owned(), bounded)
        };
        let view = |disk: Option<(CString, u32)>| View {
            lower: c(&ws),
            changes: c(&changes),
            disk,
        };
        let (out, bounded) = run(Some(view(None)));
        assert!(out.ends_with("end\n") && !out.contains("SECRET"), "{out:?}");
        assert!(bounded.is_none());
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "orig\n");
        let upper = std::fs::read_to_string(changes.join("upper/a.txt")).unwrap();
        assert_eq!(upper, "run\n");
        // Under a disk bound: the upper is the tmpfs's, handed back.
        std::fs::remove_file(changes.join("upper/a.txt")).unwrap();
        let (out, bounded) = run(Some(view(Some((c"1048576".to_owned(), 0o755)))));
        assert!(out.ends_with("end\n") && !out.contains("SECRET"), "{out:?}");
        let bounded = bounded.expect("the bounded upper's mount");
        let on_tmpfs = rustix::fs::openat(
            &bounded,
            "upper/a.txt",
            rustix::fs::OFlags::RDONLY,
            rustix::fs::Mode::empty(),
        );
        assert!(on_tmpfs.is_ok(), "{on_tmpfs:?}");
        assert!(!changes.join("upper/a.txt").exists());
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "orig\n");
        // Control: no view, the write reaches the workspace (the cover, by inode, still on).
        let (out, _) = run(None);
        assert!(!out.contains("SECRET"), "{out:?}");
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "run\n");
        // The overlay's work directory (mode 0, made in the user namespace) opened to go.
        use std::os::unix::fs::PermissionsExt;
        let work = changes.join("work/work");
        let _ = std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o700));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn same_file_compares_device_and_inode() {
        assert_eq!(same_file(None, (1, 2)), Ok(()));
        assert_eq!(same_file(Some((1, 2)), (1, 2)), Ok(()));
        assert_eq!(same_file(Some((1, 2)), (1, 3)), Err(Errno(libc::ESTALE)));
        assert_eq!(same_file(Some((1, 2)), (9, 2)), Err(Errno(libc::ESTALE)));
        // Inside a review run's view: the inode alone.
        let any = crate::postfork::ANY_DEVICE;
        assert_eq!(same_file(Some((any, 2)), (9, 2)), Ok(()));
        assert_eq!(same_file(Some((any, 2)), (9, 3)), Err(Errno(libc::ESTALE)));
    }

    #[test]
    fn an_id_map_line_maps_an_id_to_itself() {
        let mut buf = [0u8; 32];
        assert_eq!(self_map(0, &mut buf), b"0 0 1");
        assert_eq!(self_map(1000, &mut buf), b"1000 1000 1");
        assert_eq!(self_map(u32::MAX, &mut buf), b"4294967295 4294967295 1");
    }
}
