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

/// Whether this process is the host's root: uid 0 in the initial user namespace, whose
/// `uid_map` maps every id to itself. The root of another user namespace has no more rights
/// than the user who made it (and root's `/run` is not its own): its runsc needs no lock.
fn host_root() -> bool {
    if !rustix::process::geteuid().is_root() {
        return false;
    }
    let map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
    let fields: Vec<&str> = map.split_whitespace().collect();
    fields == ["0", "0", "4294967295"]
}

/// Takes the workspace's lock (waiting for it): `exclusive` for a gVisor run. Nothing for a
/// caller that is not the host's root.
pub(crate) fn take(workspace: &Path, exclusive: bool) -> Result<WorkspaceLock, Error> {
    if !host_root() {
        return Ok(WorkspaceLock { _file: None });
    }
    let io = |what: &str| {
        let what = what.to_string();
        move |cause: std::io::Error| {
            match cause.raw_os_error() {
            // uid 0 that may not use root's /run: the root of a sandbox (a nested run), or a
            // root without root's rights. Nothing can be enforced from here as root's.
            Some(libc::EACCES | libc::EPERM | libc::EROFS) => {
                Error::Run(sandbox::RunError::Unavailable {
                    what: "a root caller's workspace lock",
                    cause: format!("failed to {what}: {cause} (uid 0 without root's rights: inside another sandbox?)"),
                    fix: "run stockade on the host, outside any sandbox".into(),
                })
            }
            _ => Error::Io { what, cause },
        }
        }
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(DIR)
        .map_err(io("create /run/stockade/locks"))?;
    let digest = Sha256::digest(workspace.as_os_str().as_encoded_bytes());
    let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(Path::new(DIR).join(name))
        .map_err(io("open the workspace's lock"))?;
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
