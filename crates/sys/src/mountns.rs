//! A private mount namespace for a helper program (gVisor's `runsc`) with detached mount
//! trees attached over their targets: an idmapped view of a root caller's workspace, so the
//! helper's file server sees it owned by the unprivileged id the command runs as, as the
//! native backend's sandbox does (see `parent::idmapped_clone`).

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use crate::raw;

/// Makes `cmd` start in a new, private mount namespace with each `(tree, target)` attached
/// over `target` (looked up through no symbolic link). The trees must live until `cmd` is
/// spawned: the caller keeps them.
pub fn private_mounts_on_exec(cmd: &mut std::process::Command, trees: &[(OwnedFd, CString)]) {
    let mounts: Vec<(i32, CString)> = trees
        .iter()
        .map(|(fd, target)| (fd.as_raw_fd(), target.clone()))
        .collect();
    let root = c"/".to_owned();
    // SAFETY: the closure runs in the child between fork and exec; it only makes system
    // calls on descriptors and strings prepared here (no allocation: `mounts` and `root`
    // are moved in whole, and the trees stay open in the parent until the spawn).
    unsafe {
        cmd.pre_exec(move || {
            raw::unshare(libc::CLONE_NEWNS)?;
            raw::mount(None, &root, None, libc::MS_REC | libc::MS_PRIVATE, None)?;
            for (fd, target) in &mounts {
                raw::move_mount_fd_no_symlinks(*fd, target)?;
            }
            Ok(())
        });
    }
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
