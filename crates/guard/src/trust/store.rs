//! The trust store: one JSON record per workspace under `$XDG_STATE_HOME/stockade/trust/`
//! (default `~/.local/state/stockade/trust/`), named by the SHA-256 of the canonical
//! workspace path.
//!
//! Writes are atomic (a temporary file created with `O_EXCL` in the store, fsynced, renamed
//! over the record, the directory fsynced) and serialized by an exclusive `flock` on
//! `.lock`, so concurrent approvals leave one whole record. Reading is strict: unknown or
//! duplicate keys, a record for another workspace, unsorted or duplicate paths, malformed
//! digests, or a digest that does not match the entries make the record corrupt, and a
//! corrupt record is an error, never "approved".

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{digest, hex, Entry, Snapshot, State, TrustError};

/// Version of the record format and of the trust rules ([`super::TRUST_PATHS`]).
pub const FORMAT: u32 = 1;

/// A record larger than this is corrupt (a real one is a few KiB).
const MAX_RECORD: u64 = 64 * 1024 * 1024;

/// `$XDG_STATE_HOME/stockade/trust` when that is set to an absolute path (the XDG spec says
/// to ignore a relative one), else `$HOME/.local/state/stockade/trust`; `None` without
/// either.
pub fn default_store_dir(xdg_state_home: Option<&OsStr>, home: Option<&OsStr>) -> Option<PathBuf> {
    sandbox::state_dir(xdg_state_home, home).map(|d| d.join("trust"))
}

/// The approval of one workspace, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// [`FORMAT`].
    pub format: u32,
    /// Canonical path of the workspace.
    pub workspace: String,
    /// Seconds since the Unix epoch.
    pub approved_at: u64,
    /// `sha256:<hex>` over `files` (see [`super::digest`]).
    pub digest: String,
    /// Sorted by path, unique. A list, not a map: a map would silently keep the last of two
    /// duplicate keys.
    pub files: Vec<Entry>,
}

impl Record {
    fn validate(&self, workspace: &str) -> Result<(), String> {
        if self.format != FORMAT {
            return Err(format!(
                "format {} (this stockade reads format {FORMAT})",
                self.format
            ));
        }
        if self.workspace != workspace {
            return Err(format!(
                "it is the record of workspace {:?}, not {workspace:?}",
                self.workspace
            ));
        }
        for pair in self.files.windows(2) {
            if let [a, b] = pair {
                if a.path >= b.path {
                    return Err(format!(
                        "paths out of order or duplicated: {:?} then {:?}",
                        a.path, b.path
                    ));
                }
            }
        }
        for e in &self.files {
            validate_path(&e.path).map_err(|why| format!("path {:?}: {why}", e.path))?;
            match (e.state, &e.sha256) {
                (State::File, Some(h)) if is_hex64(h) => {}
                (State::File, _) => return Err(format!("{:?}: a file needs a sha256", e.path)),
                (State::Missing, None) if !e.executable => {}
                (State::Missing, _) => {
                    return Err(format!("{:?}: a missing path has no content", e.path))
                }
            }
        }
        let expected = digest(&self.files);
        if self.digest != expected {
            return Err(format!(
                "its digest {} does not match its entries ({expected})",
                self.digest
            ));
        }
        Ok(())
    }
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn validate_path(p: &str) -> Result<(), &'static str> {
    if p.is_empty() || p.starts_with('/') || p.contains('\0') {
        return Err("not a relative path");
    }
    if p.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err("not a canonical relative path");
    }
    Ok(())
}

/// The store, opened for one workspace.
#[derive(Debug, Clone)]
pub struct TrustStore {
    dir: PathBuf,
    workspace: PathBuf,
    workspace_str: String,
    record: PathBuf,
}

impl TrustStore {
    /// The store in `dir` (need not exist yet) for `workspace` (canonical). Refuses a
    /// relative `dir`, a store inside the workspace (the sandbox writes the workspace), and
    /// an existing store directory that others can write.
    pub fn open(dir: &Path, workspace: &Path) -> Result<TrustStore, TrustError> {
        let dir = resolve_dir(dir)?;
        if dir.starts_with(workspace) {
            return Err(TrustError::StoreUnsafe {
                reason: format!("it lies inside the workspace {}", workspace.display()),
                dir,
                inside_workspace: true,
            });
        }
        check_dir(&dir)?;
        let workspace_str = workspace
            .to_str()
            .ok_or_else(|| TrustError::Unsupported {
                workspace: workspace.to_path_buf(),
                path: ".".into(),
                reason: "the workspace path is not UTF-8".into(),
            })?
            .to_string();
        let name = hex(&Sha256::digest(workspace_str.as_bytes()));
        Ok(TrustStore {
            record: dir.join(format!("{name}.json")),
            dir,
            workspace: workspace.to_path_buf(),
            workspace_str,
        })
    }

    /// The store directory, resolved (the nearest existing ancestor canonicalized).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The workspace's record file.
    pub fn record_path(&self) -> &Path {
        &self.record
    }

    /// The workspace's record; `None` when it was never approved (or was revoked).
    pub fn load(&self) -> Result<Option<Record>, TrustError> {
        let corrupt = |reason: String| TrustError::Corrupt {
            path: self.record.clone(),
            reason,
        };
        let fd = match rustix::fs::open(
            &self.record,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) => return Err(corrupt("it is a symbolic link".into())),
            Err(e) => return Err(self.io("read", &self.record, e.into())),
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| self.io("read", &self.record, e.into()))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(corrupt("it is not a regular file".into()));
        }
        if let Some(owner) = foreign_owner(stat.st_uid) {
            return Err(TrustError::StoreUnsafe {
                dir: self.dir.clone(),
                reason: format!(
                    "the record {} belongs to uid {owner}, neither you nor root",
                    self.record.display()
                ),
                inside_workspace: false,
            });
        }
        let mut text = String::new();
        std::fs::File::from(fd)
            .take(MAX_RECORD + 1)
            .read_to_string(&mut text)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => corrupt("it is not UTF-8".into()),
                _ => self.io("read", &self.record, e),
            })?;
        if text.len() as u64 > MAX_RECORD {
            return Err(corrupt(format!("it is larger than {MAX_RECORD} bytes")));
        }
        let record: Record = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        record.validate(&self.workspace_str).map_err(corrupt)?;
        Ok(Some(record))
    }

    /// Records `snapshot` as the approved state of the workspace (replacing any earlier
    /// approval), atomically.
    pub fn approve(&self, snapshot: &Snapshot) -> Result<Record, TrustError> {
        if snapshot.workspace != self.workspace {
            return Err(TrustError::Unsupported {
                workspace: self.workspace.clone(),
                path: ".".into(),
                reason: format!(
                    "the snapshot is of another workspace ({})",
                    snapshot.workspace.display()
                ),
            });
        }
        let record = Record {
            format: FORMAT,
            workspace: self.workspace_str.clone(),
            approved_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            digest: snapshot.digest.clone(),
            files: snapshot.entries.clone(),
        };
        let mut json = serde_json::to_vec_pretty(&record).map_err(|e| {
            self.io(
                "serialize the record for",
                &self.record,
                std::io::Error::other(e),
            )
        })?;
        json.push(b'\n');
        self.create_dir()?;
        let _lock = self.lock()?;
        // tempfile: O_EXCL with a random name in the store itself (same filesystem, so the
        // rename is atomic), mode 0600, removed again if anything below fails.
        let mut tmp = tempfile::Builder::new()
            .prefix(".record-")
            .suffix(".tmp")
            .tempfile_in(&self.dir)
            .map_err(|e| self.io("create a temporary file in", &self.dir, e))?;
        tmp.write_all(&json)
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| self.io("write", tmp.path(), e))?;
        tmp.persist(&self.record)
            .map_err(|e| self.io("replace", &self.record, e.error))?;
        self.sync_dir()?;
        Ok(record)
    }

    /// Removes the workspace's record; `false` when there was none.
    pub fn revoke(&self) -> Result<bool, TrustError> {
        if !self.dir.is_dir() {
            return Ok(false);
        }
        let _lock = self.lock()?;
        match std::fs::remove_file(&self.record) {
            Ok(()) => {
                self.sync_dir()?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(self.io("remove", &self.record, e)),
        }
    }

    fn io(&self, what: &'static str, path: &Path, cause: std::io::Error) -> TrustError {
        TrustError::StoreIo {
            what,
            path: path.to_path_buf(),
            cause,
        }
    }

    fn create_dir(&self) -> Result<(), TrustError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| self.io("create", &self.dir, e))?;
        check_dir(&self.dir)
    }

    /// An exclusive `flock` on `<store>/.lock`, released when the descriptor closes.
    fn lock(&self) -> Result<std::os::fd::OwnedFd, TrustError> {
        let path = self.dir.join(".lock");
        let fd = rustix::fs::open(
            &path,
            OFlags::CREATE | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| self.io("open the lock", &path, e.into()))?;
        rustix::fs::flock(&fd, FlockOperation::LockExclusive)
            .map_err(|e| self.io("lock", &path, e.into()))?;
        Ok(fd)
    }

    fn sync_dir(&self) -> Result<(), TrustError> {
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.io("sync", &self.dir, e))
    }
}

/// `dir` with its nearest existing ancestor canonicalized (symbolic links resolved), the
/// rest appended.
pub fn resolve_dir(dir: &Path) -> Result<PathBuf, TrustError> {
    if !dir.is_absolute() || dir.components().any(|c| c == Component::ParentDir) {
        return Err(TrustError::Locate {
            reason: format!("{} is not an absolute path without `..`", dir.display()),
        });
    }
    let mut rest: Vec<&OsStr> = Vec::new();
    let mut base = dir;
    loop {
        match std::fs::canonicalize(base) {
            Ok(canon) => {
                let mut out = canon;
                for c in rest.iter().rev() {
                    out.push(c);
                }
                return Ok(out);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (Some(parent), Some(name)) = (base.parent(), base.file_name()) else {
                    return Err(TrustError::StoreIo {
                        what: "resolve",
                        path: dir.to_path_buf(),
                        cause: e,
                    });
                };
                rest.push(name);
                base = parent;
            }
            Err(e) => {
                return Err(TrustError::StoreIo {
                    what: "resolve",
                    path: dir.to_path_buf(),
                    cause: e,
                })
            }
        }
    }
}

/// An existing store must be a directory that only its owner can write.
fn check_dir(dir: &Path) -> Result<(), TrustError> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(TrustError::StoreIo {
                what: "inspect",
                path: dir.to_path_buf(),
                cause: e,
            })
        }
    };
    let unsafe_dir = |reason: &str| TrustError::StoreUnsafe {
        dir: dir.to_path_buf(),
        reason: reason.into(),
        inside_workspace: false,
    };
    if !meta.is_dir() {
        return Err(unsafe_dir("it is not a directory"));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(unsafe_dir("others can write it"));
    }
    // Root with another user's HOME (`sudo` keeping it, `su` without `-`) must not believe
    // that user's approvals: they would make root's runs read a project file that user
    // approved (a credential `command` source runs as root; found by review).
    if let Some(owner) = foreign_owner(std::os::unix::fs::MetadataExt::uid(&meta)) {
        return Err(unsafe_dir(&format!(
            "it belongs to uid {owner}, neither you nor root"
        )));
    }
    Ok(())
}

/// `uid` when it is neither this process's effective user nor root.
fn foreign_owner(uid: u32) -> Option<u32> {
    let me = rustix::process::geteuid().as_raw();
    (uid != me && uid != 0).then_some(uid)
}
