//! The creation of a new file in one call: `openat2(start, path, O_CREAT|O_EXCL,
//! RESOLVE_NO_SYMLINKS)` (issue 32, item 2). See [`super::Server::create_directly`] for when
//! it is used and why its path is the one the rules judged.

use std::ffi::CStr;
use std::os::raw::{c_int, c_long};

use crate::raw::Errno;

/// `openat2(dirfd, path, {flags, mode, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS})`: no
/// component of `path`, the last one included, may be a symlink or a procfs magic link
/// (`ELOOP`). `O_CLOEXEC` is added. Unlike `openat`, unknown flag bits and a mode without
/// `O_CREAT` fail (`EINVAL`): the caller falls back to the careful way on that too.
pub(super) fn create_no_symlinks(
    dirfd: c_int,
    path: &CStr,
    flags: c_int,
    mode: u32,
) -> Result<c_int, Errno> {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
    const RESOLVE_NO_SYMLINKS: u64 = 0x04;
    const SYS_OPENAT2: c_long = 437;
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u32 as u64,
        mode: mode as u64,
        resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: `path` is NUL-terminated and `how` is a live open_how of the size passed; the
    // kernel only reads both.
    let ret = unsafe {
        libc::syscall(
            SYS_OPENAT2,
            dirfd,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret as c_int)
    }
}
