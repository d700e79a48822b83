//! A filtered snapshot of a workspace, for a backend that cannot bind-mount it (a container,
//! a microVM, a remote machine): what the command may see of the workspace, without git's
//! code paths, stockade's state, dependency caches, or secrets.
//!
//! Three steps, each its own piece:
//! 1. a [`Filter`], made from the resolved policy, decides per relative path: include, or
//!    exclude with a [`Reason`] (the policy's masks, the same patterns a run masks; git's
//!    rules; `.stockade/`; the [`CACHES`]). It is a function of the path alone, so the same
//!    filter judges the changes that come back from such a backend;
//! 2. [`Snapshot::take`] walks the workspace without following any symbolic link (every
//!    open is `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the workspace), keeps
//!    links that resolve inside the workspace as links, and refuses the whole snapshot when
//!    one resolves outside it ([`SnapshotError::OutsideLinks`], listing them), unless
//!    [`Options::allow_outside_links`] leaves them out instead (listed in
//!    [`Snapshot::outside_links`]);
//! 3. [`Snapshot::write_dir`] or [`Snapshot::write_tar`] writes it (modes kept without
//!    setuid, setgid and sticky bits; owners not kept; a tar in a fixed order, owned by 0).
//!
//! ```no_run
//! use workspace::snapshot::{Filter, Options, Snapshot};
//! use workspace::RealHost;
//! let policy = policy::profile("workspace-write")?;
//! let ws = std::env::current_dir()?.canonicalize()?;
//! let filter = Filter::new(&policy, &ws, "/home/me".as_ref(), &RealHost)?;
//! let snapshot = Snapshot::take(&filter, Options::default())?;
//! snapshot.write_tar("/var/tmp/ws.tar".as_ref())?;
//! println!("{} files, {} left out", snapshot.summary().files, snapshot.excluded.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use sandbox::Code;
use serde::Serialize;

mod filter;
pub mod git_config;
mod walk;
mod write;

pub use filter::{Cache, Decision, Filter, CACHES, STOCKADE_STATE};

/// Why a path is not in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Masked by the policy (`deny_read`, `read_empty`): credentials, dotenv files.
    Secret,
    /// A hard link of a masked file under another name.
    LinkedSecret,
    /// Inside a git dir, and not needed to commit: hooks, logs, info, modules, ...
    GitInternal,
    /// A `.git` file or link: it points git at a git dir elsewhere.
    GitRedirect,
    /// `.stockade/`: the quarantine and the workspace's policy files.
    StockadeState,
    /// A dependency cache or build output ([`CACHES`]).
    DependencyCache,
    /// Not a regular file, directory or symbolic link (a socket, a FIFO, a device).
    SpecialFile,
    /// A path given to [`Filter::decide`] that is not a plain relative path.
    NotInWorkspace,
}

impl Reason {
    /// The reason as printed and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Secret => "secret",
            Reason::LinkedSecret => "linked_secret",
            Reason::GitInternal => "git_internal",
            Reason::GitRedirect => "git_redirect",
            Reason::StockadeState => "stockade_state",
            Reason::DependencyCache => "dependency_cache",
            Reason::SpecialFile => "special_file",
            Reason::NotInWorkspace => "not_in_workspace",
        }
    }
}

/// A path left out, relative to the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excluded {
    pub path: PathBuf,
    pub reason: Reason,
    /// The rule: the policy pattern and why it masks, the cache, the git entry.
    pub detail: String,
}

/// A symbolic link that resolves outside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutsideLink {
    /// The link, relative to the workspace.
    pub path: PathBuf,
    /// Its target, as written.
    pub target: PathBuf,
}

/// What an entry of a snapshot is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    Dir,
    /// A regular file, read from the workspace when written out.
    File,
    /// A git dir's config, reduced ([`git_config::reduce`]).
    GitConfig(Vec<u8>),
    /// A symbolic link resolving inside the workspace, with its target as written.
    Symlink(PathBuf),
}

/// One path of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative to the workspace.
    pub path: PathBuf,
    pub content: Content,
    /// Permission bits as written out: setuid, setgid and sticky removed.
    pub mode: u32,
    /// Bytes (files: as found; a reduced git config: its new size).
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
    /// Device and inode when walked: the file written out must still be this one.
    pub(crate) id: (u64, u64),
}

/// What [`Snapshot::take`] may do besides refusing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Leave symbolic links that resolve outside the workspace out (listed in
    /// [`Snapshot::outside_links`]) instead of refusing the snapshot.
    pub allow_outside_links: bool,
}

/// A workspace, filtered: what goes out, and what was left out and why.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The canonical workspace.
    pub workspace: PathBuf,
    /// Every path that goes out, parents before children, in path order.
    pub entries: Vec<Entry>,
    /// What was left out (a directory left out stands for everything in it), in path order.
    pub excluded: Vec<Excluded>,
    /// Links resolving outside the workspace left out under
    /// [`Options::allow_outside_links`] (else the snapshot is refused).
    pub outside_links: Vec<OutsideLink>,
}

/// Counts of a snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    /// Bytes of the files (and reduced git configs).
    pub bytes: u64,
    /// Paths left out, per reason.
    pub excluded: BTreeMap<Reason, u64>,
    pub outside_links: u64,
}

impl Snapshot {
    /// Walks the filter's workspace (see the module docs).
    ///
    /// # Errors
    ///
    /// [`SnapshotError::OutsideLinks`] when links resolve outside the workspace (and
    /// `options` does not allow leaving them out); [`SnapshotError::Io`] when the workspace
    /// cannot be read.
    pub fn take(filter: &Filter, options: Options) -> Result<Snapshot, SnapshotError> {
        walk::take(filter, options)
    }

    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for e in &self.entries {
            match e.content {
                Content::Dir => s.dirs += 1,
                Content::File | Content::GitConfig(_) => {
                    s.files += 1;
                    s.bytes += e.size;
                }
                Content::Symlink(_) => s.symlinks += 1,
            }
        }
        for x in &self.excluded {
            *s.excluded.entry(x.reason).or_default() += 1;
        }
        s.outside_links = self.outside_links.len() as u64;
        s
    }
}

/// Why a snapshot was not taken or written. Nothing is left behind by a refusal; a failed
/// write removes what it wrote.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    #[error(
        "refusing to snapshot {}: {} symbolic link(s) resolve outside it: {}",
        workspace.display(),
        links.len(),
        links.iter().map(|l| format!("{} -> {}", l.path.display(), l.target.display())).collect::<Vec<_>>().join(", ")
    )]
    OutsideLinks {
        workspace: PathBuf,
        links: Vec<OutsideLink>,
    },
    #[error("refusing to write the snapshot to {}: it lies inside the workspace {}", out.display(), workspace.display())]
    OutputInsideWorkspace { out: PathBuf, workspace: PathBuf },
    #[error("refusing to write the snapshot to {}: it exists and is not an empty directory", .0.display())]
    OutputNotEmpty(PathBuf),
    #[error("refusing to write the snapshot to {}: it exists", .0.display())]
    OutputExists(PathBuf),
    #[error("failed to {what} {}: {cause}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        cause: io::Error,
    },
    #[error("{} changed while the snapshot was written", .0.display())]
    Changed(PathBuf),
}

impl SnapshotError {
    /// The registry code: a refusal is `E_SNAPSHOT_REFUSED`.
    pub fn code(&self) -> Code {
        match self {
            SnapshotError::Policy(_) => Code::PolicyInvalid,
            SnapshotError::OutsideLinks { .. }
            | SnapshotError::OutputInsideWorkspace { .. }
            | SnapshotError::OutputNotEmpty(_)
            | SnapshotError::OutputExists(_) => Code::SnapshotRefused,
            SnapshotError::Io { .. } | SnapshotError::Changed(_) => Code::Internal,
        }
    }

    /// How to get past it.
    pub fn hint(&self) -> Option<String> {
        match self {
            SnapshotError::Policy(e) => e.hint(),
            SnapshotError::OutsideLinks { .. } => Some(
                "replace each link by what it points to, or remove it; `--allow-outside-links` \
                 leaves them out of the snapshot instead (listed)"
                    .into(),
            ),
            SnapshotError::OutputInsideWorkspace { .. } => {
                Some("give `--out` a path outside the workspace".into())
            }
            SnapshotError::OutputNotEmpty(_) | SnapshotError::OutputExists(_) => Some(
                "give `--out` a new path (a directory may also exist empty); nothing is overwritten"
                    .into(),
            ),
            SnapshotError::Io { .. } => None,
            SnapshotError::Changed(_) => {
                Some("something changed the workspace meanwhile: take the snapshot again".into())
            }
        }
    }

    fn io(what: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |cause| SnapshotError::Io { what, path, cause }
    }
}

#[cfg(test)]
mod tests;
