//! Root callers' runs on one workspace and the gVisor backend: runsc's file server (root, for a
//! root caller) creates a missing mount point on the host and follows what it finds on the
//! way, so between stockade's last check of the mount points and the container's start no
//! other run may change them. A gVisor run holds the workspace's lock exclusively for its
//! whole life; native runs hold it shared (they may run together, not beside a starting or
//! running gVisor run). Unprivileged callers need none: their runsc has only their rights.
//!
//! The lock files live in `/run/stockade/locks` (root's, outside every workspace), one per
//! workspace, named by the SHA-256 of its path.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::Error;

const DIR: &str = "/run/stockade/locks";

/// Held for as long as it lives.
#[derive(Debug)]
pub(crate) struct WorkspaceLock {
    _file: Option<std::fs::File>,
}

/// Takes the workspace's lock (waiting for it): `exclusive` for a gVisor run. Nothing for an
/// unprivileged caller.
pub(crate) fn take(workspace: &Path, exclusive: bool) -> Result<WorkspaceLock, Error> {
    if !rustix::process::geteuid().is_root() {
        return Ok(WorkspaceLock { _file: None });
    }
    let io = |what: &str| {
        let what = what.to_string();
        move |cause| Error::Io { what, cause }
    };
    // Root of a user namespace only (uid 0 without the host's root rights: root's /run is not
    // its own): its runsc has no more rights than it, the lock is not needed and cannot be
    // made.
    let not_ours = |e: &std::io::Error| {
        matches!(
            e.raw_os_error(),
            Some(libc::EACCES | libc::EPERM | libc::EROFS)
        )
    };
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(DIR)
    {
        Err(e) if not_ours(&e) => return Ok(WorkspaceLock { _file: None }),
        r => r.map_err(io("create /run/stockade/locks"))?,
    }
    let digest = Sha256::digest(workspace.as_os_str().as_encoded_bytes());
    let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(Path::new(DIR).join(name));
    let file = match file {
        Err(e) if not_ours(&e) => return Ok(WorkspaceLock { _file: None }),
        r => r.map_err(io("open the workspace's lock"))?,
    };
    let how = if exclusive {
        rustix::fs::FlockOperation::LockExclusive
    } else {
        rustix::fs::FlockOperation::LockShared
    };
    rustix::fs::flock(&file, how).map_err(|e| Error::Io {
        what: "lock the workspace".into(),
        cause: e.into(),
    })?;
    Ok(WorkspaceLock { _file: Some(file) })
}
