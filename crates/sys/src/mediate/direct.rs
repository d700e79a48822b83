//! The creation of a new file in one call: `openat2(start, path, O_CREAT|O_EXCL,
//! RESOLVE_NO_SYMLINKS)` (issue 32, item 2). See [`super::Server::create_directly`] for when
//! it is used and why its path is the one the rules judged.

use std::ffi::CStr;
use std::os::raw::c_int;

use crate::raw::{self, Errno};

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
    raw::openat2_mode(
        dirfd,
        path,
        flags,
        mode,
        raw::RESOLVE_NO_SYMLINKS | raw::RESOLVE_NO_MAGICLINKS,
    )
}
