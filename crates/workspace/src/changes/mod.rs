//! Review mode's change sets: what a run wrote into its copy-on-write view of the workspace,
//! kept apart until the user applies it.
//!
//! A review run sees the workspace through overlayfs: the real workspace is the lower layer,
//! and every write lands in the run's upper layer, `<store>/<run-id>/upper` (the store is
//! `$XDG_STATE_HOME/stockade/changes`, see [`default_store_dir`]). Nothing reaches the
//! workspace until [`RunDir::apply`].
//!
//! The life of a change set:
//! 1. [`Store::create_run`] makes `<run-id>/` with `upper/`, `work/` and `meta.json`
//!    ([`RunMeta`]) before the run.
//! 2. [`RunDir::finish`], right after the run, reads the upper against the workspace
//!    ([`ChangeSet`]: added, modified, deleted, replaced directories, mode and type changes),
//!    records the state each touched workspace path had (its base: a file's SHA-256, a link's
//!    target, a directory's listing) and whether the host changed it while the run went on,
//!    and seals the upper with a digest. All of it goes into `meta.json`.
//! 3. [`RunDir::changes`] and [`RunDir::diff`] show it; each entry carries [`Flag`]s for what
//!    a reviewer cannot judge from `diff`, by allow-list: only deletions, directories and
//!    plain text files (valid UTF-8 `diff` shows as it is, no execute bit, no `#!`, not
//!    large) outside the places host tools run code from (the catalogues, protected paths,
//!    git directories, bytecode, caches, installed packages) go unflagged.
//! 4. [`RunDir::apply`] writes it (all of it, or what [`ApplyOptions`] selects: the rest
//!    stays pending, and `changes` and `diff` leave the applied entries out), or
//!    [`RunDir::discard`] throws it away. A change set applied whole is removed.
//!
//! A replaced (opaque) directory is listed as itself and, for each thing the workspace has
//! below it that the upper does not, a [`ChangeKind::Deleted`] entry; what the upper holds
//! below it is compared with the workspace as anywhere else. Fifos, sockets and device nodes
//! are always flagged and never applied (accepted, they are dropped: [`ApplyReport::skipped`]).
//! The workspace's own directory keeps its mode.
//!
//! What holds, because the upper is what the sandbox wrote and the workspace is what the host
//! runs:
//! - Reading never follows a link: both trees are walked with `openat2(RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` and `O_NOFOLLOW` from a directory
//!   descriptor. Whiteouts (character devices 0/0) are deletions; a directory overlayfs marked
//!   opaque is a replaced directory. Which xattr namespace carries overlayfs's marks depends on
//!   the mount: `trusted.overlay.*` for a root caller's privileged overlay, `user.overlay.*`
//!   for the `userxattr` overlay of an unprivileged caller. Only that namespace is read: in a
//!   privileged overlay the command can set `user.overlay.opaque` itself, as a plain xattr.
//!   An upper entry with a redirect, metacopy or xattr-whiteout mark (never made with the
//!   options stockade mounts with) makes the change set unreadable ([`ChangesError::Unsupported`]).
//! - [`RunDir::changes`], [`RunDir::diff`] and [`RunDir::apply`] first check the upper against
//!   the digest `finish` recorded ([`ChangesError::Tampered`]).
//! - `apply` refuses, before writing anything, flagged entries not accepted
//!   ([`ChangesError::Flagged`]; with [`ApplyOptions::hold_flagged`] they, and what lies
//!   below them, stay pending instead and only the rest is planned and written) and entries whose workspace path is no longer in its base
//!   state ([`ChangesError::Conflict`]). It writes each file atomically (a temporary file in
//!   the destination directory, renamed over the destination), never follows a link in the
//!   workspace, never sets setuid or setgid bits (a directory keeps the run's sticky bit; one the
//!   run closed to its owner, `chmod 000`, gets its bits after what it holds), and logs each path it wrote or
//!   removed to `<run-id>/applied.log` as it goes ([`RunDir::applied_log`]). What it did is
//!   recorded in `meta.applied` once it is on disk (`syncfs`); an entry an interrupted apply
//!   wrote but did not record is found in its target state next time (`already`).
//! - `apply` also flags (`git-internals`) an entry that, with what the workspace holds now
//!   (another change set applied earlier, a direct run), would assemble a git dir whose config
//!   or hooks run code, or write a config, hook or `commondir` into one (`assembly`): each
//!   change set's own check at `finish` saw only its upper and the workspace of then.
//! - The workspace is the directory the run had (its inode number is recorded): a path that
//!   names another directory later is refused.
//!
//! ```no_run
//! use std::path::Path;
//! use workspace::changes::{default_store_dir, ApplyOptions, FlagRules, RunMeta, Store};
//!
//! let dir = default_store_dir(None, Some("/home/me".as_ref())).unwrap();
//! let store = Store::open(&dir)?;
//! let meta = RunMeta::new("run-1", Path::new("/home/me/project"), &["make".into()], false,
//!     (1000, 1000), (1000, 1000), &[], &[]);
//! let mut run = store.create_run(&meta, None, 0o755)?;
//! // ... the run, its workspace an overlay with `run.upper()` and `run.work()` ...
//! let rules = FlagRules::new(meta.protected.clone(), meta.masked.clone());
//! let set = run.finish(&rules)?;
//! println!("{} changes", set.entries.len());
//! print!("{}", run.diff(&[])?);
//! let report = run.apply(&ApplyOptions::default(), &rules)?;
//! println!("{} written", report.written.len());
//! # Ok::<(), workspace::changes::ChangesError>(())
//! ```

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

mod apply;
mod assembly;
mod copyable;
mod diff;
mod error;
mod flags;
mod import;
pub use import::bound_reached;
mod pathser;
mod read;
mod recorded;
mod remove;
mod run;
mod select;
mod store;
#[cfg(test)]
mod tests;

pub use copyable::{not_copyable, not_copyable_cached};
pub use diff::FileStat;
pub use error::ChangesError;
pub use flags::{FlagRules, DEFAULT_SIZE_THRESHOLD};
pub use recorded::{leads_to, link_targets, LinkTarget, RecordedChecks};
pub use run::RunDir;
pub use store::{RunSummary, Store};

/// The version of `meta.json` this code writes. Format 2 names every file's content by
/// its block identity (`read::BlockHasher`: the same bytes, the same identity, whatever the
/// filesystem reports as holes); format 1 named a file without holes by the SHA-256 of its
/// bytes, which the same bytes did not keep when their layout changed.
pub const FORMAT: u32 = 2;

/// The oldest format read: a change set of an older format than [`FORMAT`] is listed and
/// can be discarded, but not shown or applied (its identities are not computed any more:
/// [`ChangesError::Unsupported`], saying so).
pub const OLDEST_FORMAT: u32 = 1;

/// Prefix of the temporary files `apply` writes beside their destination.
pub const APPLY_TEMP_PREFIX: &str = ".stockade-apply-";

/// `$XDG_STATE_HOME/stockade/changes` when that is set to an absolute path (the XDG spec says
/// to ignore a relative one), else `$HOME/.local/state/stockade/changes`; `None` without
/// either.
pub fn default_store_dir(xdg_state_home: Option<&OsStr>, home: Option<&OsStr>) -> Option<PathBuf> {
    sandbox::state_dir(xdg_state_home, home).map(|d| d.join("changes"))
}

/// Nanoseconds since the Unix epoch, now.
pub(crate) fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// What a run's `meta.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunMeta {
    /// [`FORMAT`].
    pub format: u32,
    pub run_id: String,
    /// The workspace (canonical) the run's view was made of.
    #[serde(with = "pathser::one")]
    pub workspace: PathBuf,
    /// When the run started (the change directory was made), in nanoseconds since the epoch:
    /// a workspace path whose ctime is later was changed on the host during the run.
    pub started_unix_ns: u128,
    pub argv: Vec<String>,
    /// An ephemeral run's change set is removed after the run.
    pub ephemeral: bool,
    /// Uid and gid of the caller. Uid 0: the overlay was privileged (`trusted.overlay.*`
    /// xattrs), else mounted in a user namespace (`user.overlay.*`).
    pub caller: (u32, u32),
    /// Uid and gid of the workspace's top directory: the owner `apply` gives new files when
    /// running as root.
    pub workspace_owner: (u32, u32),
    /// The run's protected paths (absolute).
    #[serde(with = "pathser::many")]
    pub protected: Vec<PathBuf>,
    /// The run's masked paths (absolute).
    #[serde(with = "pathser::many")]
    pub masked: Vec<PathBuf>,
    /// The creation guard's patterns (the policy's protected paths, existing or not): an
    /// entry one of them refuses is flagged `protected`. A view whose run mediated no
    /// creation (issue 32) relies on this for what the guard would have refused during it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guard: Vec<GuardRule>,
    /// What a direct run's sweep checks that a view's upper is flagged by instead (issue 32):
    /// sweep-only `deny_write` globs, protected links' targets. `None` in a change set made
    /// before they were recorded: everything it would write is flagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<RecordedChecks>,
    /// Set by [`RunDir::finish`].
    pub finished: Option<Finished>,
    /// Entries applied (or, for entries never applied such as fifos, dismissed), relative
    /// to the workspace.
    #[serde(with = "pathser::many")]
    pub applied: Vec<PathBuf>,
    /// Inode number of the workspace's directory, taken by [`Store::create_run`]: a workspace
    /// path that names another directory later is refused, never read or written.
    #[serde(default)]
    pub workspace_ino: Option<u64>,
    /// Device of the workspace's directory, with [`RunMeta::workspace_ino`].
    #[serde(default)]
    pub workspace_dev: Option<u64>,
    /// Why the change set could not be read and sealed after the run (then `finished` is
    /// `None`): set by [`RunDir::record_finish_error`], shown by `stockade runs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_error: Option<String>,
}

impl RunMeta {
    /// A run starting now.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        run_id: &str,
        workspace: &Path,
        argv: &[String],
        ephemeral: bool,
        caller: (u32, u32),
        workspace_owner: (u32, u32),
        protected: &[PathBuf],
        masked: &[PathBuf],
    ) -> RunMeta {
        RunMeta {
            format: FORMAT,
            run_id: run_id.to_owned(),
            workspace: workspace.to_path_buf(),
            started_unix_ns: now_ns(),
            argv: argv.to_vec(),
            ephemeral,
            caller,
            workspace_owner,
            protected: protected.to_vec(),
            masked: masked.to_vec(),
            guard: Vec::new(),
            checks: Some(RecordedChecks::default()),
            finished: None,
            applied: Vec::new(),
            workspace_ino: None,
            workspace_dev: None,
            finish_error: None,
        }
    }
}

/// A creation-guard pattern: `base/**/tail` (an empty tail: `base` and below), matched as
/// `protect` matches it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardRule {
    #[serde(with = "pathser::one")]
    pub base: PathBuf,
    pub tail: Vec<String>,
}

/// What [`RunDir::finish`] recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finished {
    /// `sha256:<hex>` over every entry of the upper (see [`RunDir::finish`]).
    pub digest: String,
    /// The same without files' contents (see `read::Scan::shape_digest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape_digest: Option<String>,
    pub ended_unix_ns: u128,
    /// Files copied up unchanged (not changes).
    pub unchanged_copies: usize,
    /// The changes, sorted by path, each with its base.
    pub entries: Vec<Recorded>,
}

/// One change as recorded: the facts its flags are computed from, and the base state of its
/// workspace path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recorded {
    #[serde(with = "pathser::one")]
    pub path: PathBuf,
    pub kind: ChangeKind,
    pub file_type: FileType,
    /// Permission bits (`0o7777`) the entry has in the upper; `None` for a deletion.
    pub mode: Option<u32>,
    /// Bytes (files; a link's target length); 0 for directories and deletions.
    pub size: u64,
    /// A file's content identity in the upper (hex): the SHA-256 of its block encoding
    /// (`read::BlockHasher`), a function of its bytes alone.
    pub sha256: Option<String>,
    #[serde(with = "pathser::option")]
    pub symlink_target: Option<PathBuf>,
    /// The file starts with `#!`.
    pub script: bool,
    /// What a file's content (the upper's) is to a reviewer; `None`: not a file, or recorded
    /// by an older stockade (then flagged `unchecked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// The same for the workspace's file the entry replaces (`None`: no file there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_content: Option<Content>,
    /// It lies in a directory git accepts as a git dir (`HEAD` beside `refs`, `objects` or
    /// `commondir`), at any level above.
    pub in_git_dir: bool,
    pub base: Base,
    /// A file with more than one name in the change set (hard links): how many (read once;
    /// `apply` writes each name as a copy of its own). 0: one name.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hard_links: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What a file's content is to a reviewer: whether `stockade diff` shows it as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "class")]
pub enum Content {
    /// Valid UTF-8 that `stockade diff` shows whole: no NUL byte, nothing the terminal
    /// sanitizer strips, no carriage return but at a line's end.
    Text,
    /// A NUL byte, or not UTF-8: `stockade diff` names the file without showing it.
    Binary { why: String },
    /// Text holding what a reader of `stockade diff` does not see (escape sequences and other
    /// control characters, bidi controls, invisible or Tag characters, a carriage return
    /// inside a line).
    Hidden { why: String },
    /// Over `MAX_DIFF_BYTES`: named, not shown.
    Large,
}

/// The state a workspace path had when the run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Base {
    pub state: BaseState,
    /// Its ctime (for a file read after its content; for a directory dropped whole, the
    /// latest of anything below it) is not clearly before the run's start (by more than the
    /// ctime clock's lag, 20 ms, and the filesystem's timestamp granularity): the host may
    /// have changed it while the run went on, and the run's version need not hold that
    /// change (the run may have read the path at any moment after it started). Never
    /// compared with when the run first wrote the path: a host edit in the same clock tick
    /// as that write is a conflict like any other.
    pub changed_during_run: bool,
}

/// A workspace path's state, as bases record it and `apply` compares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "type")]
pub enum BaseState {
    Absent,
    File {
        sha256: String,
        mode: u32,
    },
    Symlink {
        #[serde(with = "pathser::one")]
        target: PathBuf,
    },
    Dir {
        mode: u32,
        /// For a directory the change drops whole: SHA-256 over what lies below it (names,
        /// types, modes, sizes, inode numbers, ctimes).
        tree: Option<String>,
    },
    Other {
        mode: u32,
        rdev: u64,
    },
}

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
    /// An opaque directory: everything the workspace had below it is dropped (each dropped
    /// entry is listed as [`ChangeKind::Deleted`] too; what the upper holds below it is listed
    /// against the workspace as usual).
    ReplacedDir,
    /// Same type and content, other permission bits.
    ModeChanged {
        from: u32,
        to: u32,
    },
    /// A file became a directory, a directory a link, and so on.
    TypeChanged,
}

/// The type of an entry (for a deletion: of what is deleted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileType {
    File,
    Dir,
    Symlink,
    /// A fifo, socket or device node: always flagged, never applied.
    Other,
}

/// One change, as shown and applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Relative to the workspace.
    #[serde(serialize_with = "pathser::one::serialize")]
    pub path: PathBuf,
    pub kind: ChangeKind,
    pub file_type: FileType,
    /// Permission bits (`0o7777`) in the change set; `None` for a deletion.
    pub mode: Option<u32>,
    pub size: u64,
    #[serde(serialize_with = "pathser::option::serialize")]
    pub symlink_target: Option<PathBuf>,
    /// Empty: nothing to look at twice.
    pub flags: Vec<Flag>,
}

/// Why an entry deserves a look. `apply` refuses flagged entries not accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Flag {
    /// Stable: `host-executed`, `build-file`, `startup-file`, `tool-config`, `host-loaded`,
    /// `protected`, `executable`, `script`, `setuid`, `binary`, `hidden-text`,
    /// `replaces-binary`, `unchecked`, `symlink`, `symlink-outside`, `symlink-into-masked`,
    /// `unshown-name`, `git-internals`, `large`, `special-file`, `world-writable`,
    /// `hard-link`, `not-plain`, `opens-masked`. Review flags
    /// by allow-list: an entry without a flag is a deletion, a directory, or a plain text
    /// file (see `flags`).
    pub code: &'static str,
    /// A sentence naming the rule.
    pub reason: String,
}

/// A run's changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct ChangeSet {
    /// Sorted by path. Entries already applied are left out.
    pub entries: Vec<Change>,
    /// Files copied up whose content, mode and type equal the workspace's: not changes.
    pub unchanged_copies: usize,
}

/// What `apply` applies. Paths are relative to the workspace; a directory selects what lies
/// below it too.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApplyOptions {
    /// Only these (all when empty).
    pub only: Vec<PathBuf>,
    /// Not these.
    pub exclude: Vec<PathBuf>,
    /// Flagged entries to apply all the same.
    pub accept: Vec<PathBuf>,
    /// Apply every flagged entry selected.
    pub accept_flagged: bool,
    /// Flagged entries not accepted stay pending (with whatever lies below them) and the
    /// rest is applied ([`ApplyReport::held`]); without it they refuse the whole apply
    /// ([`ChangesError::Flagged`], nothing written). Either way, when nothing but held
    /// entries is selected, the apply is refused.
    pub hold_flagged: bool,
}

/// A selected entry a partial apply ([`ApplyOptions::hold_flagged`]) left pending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Held {
    /// Relative to the workspace.
    #[serde(serialize_with = "pathser::one::serialize")]
    pub path: PathBuf,
    /// Its own flags; empty when it is held for `below` alone.
    pub flags: Vec<Flag>,
    /// The held (flagged) entry above it: what lies below a flagged entry waits with it.
    #[serde(serialize_with = "pathser::option::serialize")]
    pub below: Option<PathBuf>,
}

/// What `apply` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct ApplyReport {
    /// Files, links and directories written (or whose mode was set).
    #[serde(serialize_with = "pathser::many::serialize")]
    pub written: Vec<PathBuf>,
    #[serde(serialize_with = "pathser::many::serialize")]
    pub deleted: Vec<PathBuf>,
    /// Already in the state the change set gives them (an earlier, interrupted apply).
    #[serde(serialize_with = "pathser::many::serialize")]
    pub already: Vec<PathBuf>,
    /// Accepted entries that are never applied (fifos, sockets, device nodes): dropped.
    #[serde(serialize_with = "pathser::many::serialize")]
    pub skipped: Vec<PathBuf>,
    /// Flagged entries (and what lies below them) left pending by a partial apply
    /// ([`ApplyOptions::hold_flagged`]), each with its flags.
    pub held: Vec<Held>,
    /// Entries left pending (not selected, excluded, or held); 0: the change set was
    /// applied whole and removed.
    pub remaining: usize,
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileType::File => "file",
            FileType::Dir => "directory",
            FileType::Symlink => "symbolic link",
            FileType::Other => "special file",
        })
    }
}
