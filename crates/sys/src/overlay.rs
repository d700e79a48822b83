//! The copy-on-write view of a review run's workspace: a detached overlayfs mount whose lower
//! layer is the workspace and whose upper layer is the run's change directory.
//!
//! Raw syscalls only (the init calls [`detached_overlay`] after the fork, in the sandbox's
//! user namespace, for an unprivileged caller; the supervisor calls it for a root caller).
//! Every layer is given as a descriptor (`fsconfig(FSCONFIG_SET_FD)`, Linux ≥ 6.13), opened
//! through no symbolic link: a path string would be looked up again by the kernel, following
//! links.
//!
//! Options, and why:
//! - `redirect_dir=nofollow`: a renamed lower directory is refused with `EXDEV` (tools fall
//!   back to copying) instead of leaving a redirect xattr the change set would have to trust;
//! - `metacopy=off`: a copied-up file holds its whole content, so the upper alone is the
//!   change set;
//! - `index=off`: no inode index shared between runs;
//! - `userxattr` (unprivileged callers): overlay's own attributes live in `user.overlay.*`,
//!   which is what an overlay mounted in a user namespace may use.

use std::ffi::CStr;

use libc::{c_char, c_int, c_uint};

use crate::raw::{self, Errno, Result};

const FSCONFIG_SET_FLAG: c_uint = 0;
const FSCONFIG_SET_FD: c_uint = 5;

/// The overlay's layers, as `O_PATH` directory descriptors.
#[derive(Debug, Clone, Copy)]
pub struct Layers {
    pub lower: c_int,
    pub upper: c_int,
    pub work: c_int,
}

/// A new, detached overlay mount of `layers` (nosuid, nodev); returns its mount fd.
/// `userxattr`: mounted in a user namespace (unprivileged caller).
pub fn detached_overlay(layers: Layers, userxattr: bool) -> Result<c_int> {
    // SAFETY: the fs name is a valid string; flags are integers.
    let fsfd = raw_check(unsafe {
        libc::syscall(libc::SYS_fsopen, c"overlay".as_ptr(), raw::FSOPEN_CLOEXEC)
    })?;
    let res = configure(fsfd, layers, userxattr).and_then(|_| create_and_mount(fsfd));
    raw::close(fsfd);
    res
}

/// Creates the filesystem configured on `fsfd` and returns a detached mount of it (nosuid,
/// nodev).
fn create_and_mount(fsfd: c_int) -> Result<c_int> {
    // SAFETY: CMD_CREATE takes no pointers.
    raw_check(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fsfd,
            raw::FSCONFIG_CMD_CREATE,
            std::ptr::null::<c_char>(),
            std::ptr::null::<c_char>(),
            0,
        )
    })?;
    // SAFETY: integer arguments only.
    raw_check(unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            fsfd,
            raw::FSMOUNT_CLOEXEC,
            raw::MOUNT_ATTR_NOSUID | raw::MOUNT_ATTR_NODEV,
        )
    })
}

fn configure(fsfd: c_int, layers: Layers, userxattr: bool) -> Result<()> {
    set_fd(fsfd, c"lowerdir+", layers.lower)?;
    set_fd(fsfd, c"upperdir", layers.upper)?;
    set_fd(fsfd, c"workdir", layers.work)?;
    for (key, value) in [
        (c"redirect_dir", c"nofollow"),
        (c"metacopy", c"off"),
        (c"index", c"off"),
    ] {
        set_string(fsfd, key, value)?;
    }
    if userxattr {
        // SAFETY: the key is a valid string; value and aux are unused for SET_FLAG.
        raw_check(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fsfd,
                FSCONFIG_SET_FLAG,
                c"userxattr".as_ptr(),
                std::ptr::null::<c_char>(),
                0,
            )
        })?;
    }
    Ok(())
}

fn set_fd(fsfd: c_int, key: &CStr, fd: c_int) -> Result<()> {
    // SAFETY: the key is a valid string; the value pointer is unused for SET_FD (aux is the fd).
    raw_check(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fsfd,
            FSCONFIG_SET_FD,
            key.as_ptr(),
            std::ptr::null::<c_char>(),
            fd,
        )
    })
    .map(drop)
}

fn set_string(fsfd: c_int, key: &CStr, value: &CStr) -> Result<()> {
    // SAFETY: key and value are valid NUL-terminated strings; aux is unused.
    raw_check(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fsfd,
            raw::FSCONFIG_SET_STRING,
            key.as_ptr(),
            value.as_ptr(),
            0,
        )
    })
    .map(drop)
}

fn raw_check(ret: libc::c_long) -> Result<c_int> {
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret as c_int)
    }
}

/// The layers of a review run's overlay opened through no symbolic link: `lower` (the
/// workspace, canonical) and `changes/upper`, `changes/work`; each an `O_PATH` directory fd
/// the caller closes (all of them, also on error: unopened ones are -1).
pub fn open_layers(lower: &CStr, changes: &CStr) -> Result<Layers> {
    let dir = libc::O_PATH | libc::O_DIRECTORY;
    let mut layers = Layers {
        lower: -1,
        upper: -1,
        work: -1,
    };
    let opened = (|| {
        layers.lower = raw::openat_no_symlinks(libc::AT_FDCWD, lower, dir)?;
        let run = raw::openat_no_symlinks(libc::AT_FDCWD, changes, dir)?;
        let inner = (|| {
            layers.upper = raw::openat_no_symlinks(run, c"upper", dir)?;
            layers.work = raw::openat_no_symlinks(run, c"work", dir)?;
            Ok(())
        })();
        raw::close(run);
        inner
    })();
    match opened {
        Ok(()) => Ok(layers),
        Err(e) => {
            close_layers(layers);
            Err(e)
        }
    }
}

/// Closes what [`open_layers`] opened.
pub fn close_layers(layers: Layers) {
    for fd in [layers.lower, layers.upper, layers.work] {
        if fd >= 0 {
            raw::close(fd);
        }
    }
}

/// A review run's upper under a disk bound (`--disk`): a detached tmpfs whose options are
/// `options` (`size=N`, `mode=0700`: prepared by the caller, so nothing here allocates),
/// holding `upper/` with exactly `mode` (owned by `owner` when given: a root caller's
/// sandbox id) and `work/`. Writes past the size fail with `ENOSPC` inside. Returns the
/// tmpfs's mount fd (the supervisor copies the change set out of it after the run) and the
/// layers' `upper` and `work` (`lower` left -1 for the caller to fill).
pub fn bounded_upper(
    options: &[(&CStr, &CStr)],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> Result<(c_int, Layers)> {
    // SAFETY: the fs name is a valid string; flags are integers.
    let fsfd = raw_check(unsafe {
        libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), raw::FSOPEN_CLOEXEC)
    })?;
    let mounted = (|| {
        for (k, v) in options {
            set_string(fsfd, k, v)?;
        }
        create_and_mount(fsfd)
    })();
    raw::close(fsfd);
    let mnt = mounted?;
    let made = (|| {
        raw::mkdirat_strict(mnt, c"upper", 0o700)?;
        raw::mkdirat_strict(mnt, c"work", 0o700)?;
        if let Some((uid, gid)) = owner {
            // SAFETY: the path is a valid string; integer arguments otherwise.
            raw_check(unsafe {
                libc::fchownat(mnt, c"upper".as_ptr(), uid, gid, libc::AT_SYMLINK_NOFOLLOW)
                    as libc::c_long
            })?;
        }
        raw::fchmodat(mnt, c"upper", mode & 0o7777)?;
        let dir = libc::O_PATH | libc::O_DIRECTORY;
        let upper = raw::openat_no_symlinks(mnt, c"upper", dir)?;
        let work = match raw::openat_no_symlinks(mnt, c"work", dir) {
            Ok(w) => w,
            Err(e) => {
                raw::close(upper);
                return Err(e);
            }
        };
        Ok(Layers {
            lower: -1,
            upper,
            work,
        })
    })();
    match made {
        Ok(layers) => Ok((mnt, layers)),
        Err(e) => {
            raw::close(mnt);
            Err(e)
        }
    }
}
