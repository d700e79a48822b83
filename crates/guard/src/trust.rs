//! Content-addressed trust for a workspace's configuration (`stockade trust`).
//!
//! Some files in a repository make programs run code: stockade's own policy, agents' MCP
//! server lists, hooks and settings, editor tasks, `.envrc`, git hooks. A `git pull`, a
//! checked-out branch or an agent's file-editing tool (which stockade does not sandbox) can
//! change them. `approve` pins them by content: the SHA-256 of every trust-relevant file
//! ([`TRUST_PATHS`]), with an explicit marker for each path that is absent. `stockade run`
//! in a workspace that was approved once, or with a policy file inside the workspace,
//! refuses to start when the files differ from the approved ones ([`check_run`]).
//!
//! The digest is the SHA-256 of `stockade-trust-v1\0` followed by, for every entry sorted by
//! its relative path, `path\0token\0` where the token is `missing`, `file:<sha256>` or
//! `exec:<sha256>` (a file with an execute bit). A trust path that is a directory counts
//! through the files below it (recursively); a directory holding no file counts as missing.
//!
//! Files are opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to the
//! workspace: a symbolic link that leads out of the workspace (absolute, or `..` past the
//! root) is refused with [`TrustError::Escapes`], atomically, without a check-then-open race.
//! A link that stays inside the workspace is followed (`.git/hooks/pre-commit ->
//! ../../scripts/pre-commit` is common) and the content it leads to is what is pinned.
//!
//! ```no_run
//! use guard::trust::{Snapshot, TrustStore};
//! let ws = std::fs::canonicalize(".")?;
//! let dir = guard::trust::default_store_dir(
//!     std::env::var_os("XDG_STATE_HOME").as_deref(),
//!     std::env::var_os("HOME").as_deref(),
//! )
//! .ok_or("no HOME")?;
//! let store = TrustStore::open(&dir, &ws)?;
//! let record = store.approve(&Snapshot::take(&ws)?)?;
//! println!("approved {}", record.digest);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod store;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use store::{default_store_dir, resolve_dir, Record, TrustStore, FORMAT};

/// Code of a refusal because the workspace's configuration is not approved (or cannot be).
pub const E_UNTRUSTED_CONFIG: &str = sandbox::Code::UntrustedConfig.as_str();
const E_PROTECTION_UNAVAILABLE: &str = sandbox::Code::ProtectionUnavailable.as_str();
/// Code of a trust store that cannot be located, read, written or believed.
pub const E_TRUST_STORE: &str = sandbox::Code::TrustStore.as_str();

/// One trust-relevant path, relative to the workspace, and why it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustPath {
    pub path: &'static str,
    pub why: &'static str,
}

const fn tp(path: &'static str, why: &'static str) -> TrustPath {
    TrustPath { path, why }
}

/// The files that make programs run code from a workspace, pinned by `stockade trust`.
/// A directory counts through every file below it.
///
/// Deliberately left out: `AGENTS.md`, `CLAUDE.md`, `.github/copilot-instructions.md`,
/// `.cursor/rules` (instructions to a model: prompt-injection carriers, but nothing runs
/// them, and they are edited routinely, so pinning them would refuse runs after every
/// legitimate edit; hidden text in them is the sanitizer's job); `.git/config` (git rewrites
/// it during ordinary work such as `push -u`; it stays read-only inside the sandbox); `.idea`
/// (rewritten by the IDE all the time); `.env` files (data, masked inside the sandbox).
/// Changing this list changes every digest: bump [`FORMAT`] with it.
pub const TRUST_PATHS: &[TrustPath] = &[
    tp("stockade.toml", "stockade's workspace policy"),
    tp(".stockade", "stockade's workspace directory (policies)"),
    tp(".mcp.json", "Claude Code: MCP servers it starts"),
    tp(
        ".claude/settings.json",
        "Claude Code: hooks, permissions, environment, MCP servers",
    ),
    tp(
        ".claude/settings.local.json",
        "Claude Code: local hooks and permissions",
    ),
    tp(
        ".claude/commands",
        "Claude Code: slash commands (may run shell commands)",
    ),
    tp(".claude/agents", "Claude Code: subagents and their tools"),
    tp(".claude/skills", "Claude Code: skills (may ship scripts)"),
    tp(".claude/hooks", "Claude Code: hook scripts by convention"),
    tp(
        ".codex/config.toml",
        "Codex: MCP servers, sandbox and approval settings",
    ),
    tp(".cursor/mcp.json", "Cursor: MCP servers"),
    tp(".gemini/settings.json", "Gemini CLI: MCP servers and tools"),
    tp(".vscode/tasks.json", "VS Code: tasks (runOn: folderOpen)"),
    tp(
        ".vscode/settings.json",
        "VS Code: settings naming executables and terminal environment",
    ),
    tp(".vscode/launch.json", "VS Code: launch configurations"),
    tp(".vscode/mcp.json", "VS Code: MCP servers"),
    tp(
        ".devcontainer/devcontainer.json",
        "dev containers: lifecycle commands",
    ),
    tp(".envrc", "direnv: runs on entering the directory"),
    tp(".git/hooks", "git: hooks run on commit, checkout, push"),
    tp(".husky", "husky: git hooks through core.hooksPath"),
];

/// Below the trust paths but never hashed: the sweep's quarantine, where stockade itself moves
/// (disarmed) protected paths a run created.
pub const EXCLUDED: &[&str] = &[".stockade/quarantine"];

/// At most this many entries: a deeper or larger tree is refused, not truncated.
const MAX_ENTRIES: usize = 10_000;
/// At most this many directory levels below a trust path.
const MAX_DEPTH: usize = 32;

/// What a trust-relevant path holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// The path does not exist (or is a directory without files).
    Missing,
    /// A regular file (reached directly or through a link inside the workspace).
    File,
}

/// One entry of a snapshot or record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    pub state: State,
    /// Hex SHA-256 of the content (files only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Any execute bit set (files only): `chmod +x` on a hook makes it run.
    #[serde(default, skip_serializing_if = "is_false")]
    pub executable: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Entry {
    fn missing(path: &str) -> Entry {
        Entry {
            path: path.to_string(),
            state: State::Missing,
            sha256: None,
            executable: false,
        }
    }

    /// The token hashed into the digest: `missing`, `file:<sha256>` or `exec:<sha256>`.
    pub fn token(&self) -> String {
        match (self.state, &self.sha256) {
            (State::File, Some(h)) if self.executable => format!("exec:{h}"),
            (State::File, Some(h)) => format!("file:{h}"),
            // Not produced by `Snapshot::take`; `Record` validation refuses it on load.
            (State::File, None) => "file:?".to_string(),
            (State::Missing, _) => "missing".to_string(),
        }
    }

    fn present(&self) -> bool {
        self.state != State::Missing
    }
}

/// The overall digest of sorted entries (see the module documentation).
pub fn digest(entries: &[Entry]) -> String {
    let mut h = Sha256::new();
    h.update(b"stockade-trust-v1\0");
    for e in entries {
        h.update(e.path.as_bytes());
        h.update(b"\0");
        h.update(e.token().as_bytes());
        h.update(b"\0");
    }
    format!("sha256:{}", hex(&h.finalize()))
}

/// The SHA-256 of `bytes` as a trust record spells a file's (`Entry::sha256`): lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Everything trust-relevant in a workspace, as it is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    /// Canonical path of the workspace.
    pub workspace: PathBuf,
    pub digest: String,
    /// Sorted by path, unique.
    pub entries: Vec<Entry>,
}

impl Snapshot {
    /// Hashes the trust-relevant files of `workspace` (a canonical path).
    pub fn take(workspace: &Path) -> Result<Snapshot, TrustError> {
        let ws = rustix::fs::open(
            workspace,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| TrustError::Read {
            workspace: workspace.to_path_buf(),
            path: ".".into(),
            cause: e.into(),
        })?;
        let mut found: BTreeMap<String, Entry> = BTreeMap::new();
        let mut walk = Walk {
            workspace,
            ws: &ws,
            found: &mut found,
        };
        for t in TRUST_PATHS {
            let before = walk.found.len();
            walk.collect(t.path, 0)?;
            if walk.found.len() == before {
                walk.found
                    .insert(t.path.to_string(), Entry::missing(t.path));
            }
        }
        let entries: Vec<Entry> = found.into_values().collect();
        Ok(Snapshot {
            workspace: workspace.to_path_buf(),
            digest: digest(&entries),
            entries,
        })
    }
}

struct Walk<'a> {
    workspace: &'a Path,
    ws: &'a OwnedFd,
    found: &'a mut BTreeMap<String, Entry>,
}

impl Walk<'_> {
    fn unsupported(&self, path: &str, reason: impl Into<String>) -> TrustError {
        TrustError::Unsupported {
            workspace: self.workspace.to_path_buf(),
            path: path.to_string(),
            reason: reason.into(),
        }
    }

    fn read_error(&self, path: &str, cause: std::io::Error) -> TrustError {
        TrustError::Read {
            workspace: self.workspace.to_path_buf(),
            path: path.to_string(),
            cause,
        }
    }

    /// Opens `rel` beneath the workspace; `None` when it does not exist.
    fn open(&self, rel: &str) -> Result<Option<OwnedFd>, TrustError> {
        // O_NONBLOCK: a FIFO planted under a trust path must not block the open (it is
        // refused after fstat); regular files ignore the flag.
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(self.ws, rel, flags, Mode::empty(), resolve) {
                Ok(fd) => return Ok(Some(fd)),
                // A component is missing, or is a file where a directory was expected.
                Err(Errno::NOENT) | Err(Errno::NOTDIR) => return Ok(None),
                Err(Errno::XDEV) => {
                    return Err(TrustError::Escapes {
                        workspace: self.workspace.to_path_buf(),
                        path: rel.to_string(),
                    })
                }
                Err(Errno::LOOP) => {
                    return Err(self.unsupported(rel, "too many levels of symbolic links"))
                }
                // No openat2 here (an old kernel, or a seccomp profile around stockade that
                // answers ENOSYS or EPERM): it cannot be opened safely, and no lookup by hand
                // could follow links the way RESOLVE_BENEATH confines them. Said as what it
                // is (EPERM only when openat2 itself is refused, not this file).
                Err(e @ (Errno::NOSYS | Errno::PERM)) if openat2_refused() => {
                    return Err(TrustError::NoOpenat2 {
                        workspace: self.workspace.to_path_buf(),
                        path: rel.to_string(),
                        cause: std::io::Error::from(e),
                    })
                }
                // The kernel saw a concurrent rename while resolving beneath the root.
                Err(Errno::AGAIN) if tries < 8 => tries += 1,
                Err(e) => return Err(self.read_error(rel, e.into())),
            }
        }
    }

    fn collect(&mut self, rel: &str, depth: usize) -> Result<(), TrustError> {
        if EXCLUDED.contains(&rel) {
            return Ok(());
        }
        let Some(fd) = self.open(rel)? else {
            return Ok(());
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| self.read_error(rel, e.into()))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {
                let mut file = std::fs::File::from(fd);
                let mut h = Sha256::new();
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match file.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => h.update(&buf[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(self.read_error(rel, e)),
                    }
                }
                self.found.insert(
                    rel.to_string(),
                    Entry {
                        path: rel.to_string(),
                        state: State::File,
                        sha256: Some(hex(&h.finalize())),
                        executable: stat.st_mode & 0o111 != 0,
                    },
                );
                if self.found.len() > MAX_ENTRIES {
                    return Err(self.unsupported(
                        rel,
                        format!("more than {MAX_ENTRIES} trust-relevant files"),
                    ));
                }
                Ok(())
            }
            FileType::Directory => {
                if depth >= MAX_DEPTH {
                    return Err(self.unsupported(
                        rel,
                        format!("more than {MAX_DEPTH} directory levels (a symbolic link loop?)"),
                    ));
                }
                let dir =
                    rustix::fs::Dir::read_from(&fd).map_err(|e| self.read_error(rel, e.into()))?;
                let mut names = Vec::new();
                for entry in dir {
                    let entry = entry.map_err(|e| self.read_error(rel, e.into()))?;
                    let name = entry.file_name().to_bytes();
                    if name == b"." || name == b".." {
                        continue;
                    }
                    let Ok(name) = std::str::from_utf8(name) else {
                        return Err(self.unsupported(
                            rel,
                            format!(
                                "it holds a name that is not UTF-8: {:?}",
                                String::from_utf8_lossy(name)
                            ),
                        ));
                    };
                    names.push(name.to_string());
                }
                names.sort();
                for name in names {
                    self.collect(&format!("{rel}/{name}"), depth + 1)?;
                }
                Ok(())
            }
            other => Err(self.unsupported(
                rel,
                format!("it is a {other:?}, not a regular file or a directory"),
            )),
        }
    }
}

/// How a path differs between an approved record and now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Removed,
    Changed,
}

impl fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
            ChangeKind::Changed => "changed",
        })
    }
}

/// One path that differs, with its tokens before and after (`file:<sha256>`, `exec:...`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub path: String,
    pub change: ChangeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// The files that were added, removed or changed from `approved` to `now` (sorted by path;
/// missing markers count as absent).
pub fn diff(approved: &[Entry], now: &[Entry]) -> Vec<Change> {
    let present = |list: &[Entry]| -> BTreeMap<String, String> {
        list.iter()
            .filter(|e| e.present())
            .map(|e| (e.path.clone(), e.token()))
            .collect()
    };
    let (old, new) = (present(approved), present(now));
    let mut changes = Vec::new();
    for (path, before) in &old {
        match new.get(path) {
            None => changes.push(Change {
                path: path.clone(),
                change: ChangeKind::Removed,
                before: Some(before.clone()),
                after: None,
            }),
            Some(after) if after != before => changes.push(Change {
                path: path.clone(),
                change: ChangeKind::Changed,
                before: Some(before.clone()),
                after: Some(after.clone()),
            }),
            Some(_) => {}
        }
    }
    for (path, after) in &new {
        if !old.contains_key(path) {
            changes.push(Change {
                path: path.clone(),
                change: ChangeKind::Added,
                before: None,
                after: Some(after.clone()),
            });
        }
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    changes
}

/// Why `stockade run` refuses a workspace's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A policy file inside the workspace, which was never approved.
    NotApproved { policy: String },
    /// A policy file inside the workspace but outside the trust paths: it could never be
    /// pinned.
    NotCovered { policy: String },
    /// Trust-relevant files differ from the approved ones.
    Changed { changes: Vec<Change> },
    /// The digests differ but no file does: the record was made under other trust rules.
    RulesChanged,
}

impl Refusal {
    /// The fix, naming the workspace.
    pub fn hint(&self, workspace: &Path) -> String {
        let ws = workspace.display();
        match self {
            Refusal::NotCovered { .. } => format!(
                "a workspace policy must be a trust path to be approved (`stockade.toml`, a file in `.stockade/`, or an agent's settings such as `.claude/settings.json`): move it there, review it, then run `stockade trust approve --workspace {ws}`"
            ),
            _ => format!(
                "see what changed with `stockade trust status --workspace {ws}`; if you trust it, approve it with `stockade trust approve --workspace {ws}`"
            ),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotApproved { policy } => write!(
                f,
                "the policy file {policy} lies inside the workspace, which is not approved"
            ),
            Refusal::NotCovered { policy } => write!(
                f,
                "the policy file {policy} lies inside the workspace, outside the paths that can be approved"
            ),
            Refusal::Changed { changes } => {
                const SHOWN: usize = 10;
                let names: Vec<String> = changes
                    .iter()
                    .take(SHOWN)
                    .map(|c| format!("{} ({})", c.path, c.change))
                    .collect();
                write!(
                    f,
                    "trust-relevant files changed since the workspace was approved: {}",
                    names.join(", ")
                )?;
                if changes.len() > SHOWN {
                    write!(f, " and {} more", changes.len() - SHOWN)?;
                }
                Ok(())
            }
            Refusal::RulesChanged => f.write_str(
                "the approval was recorded under other trust rules (another stockade version)",
            ),
        }
    }
}

/// What [`check_run`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Never approved and no policy file inside the workspace: nothing to pin, run as usual.
    Ungated,
    /// Approved and unchanged.
    Approved {
        digest: String,
    },
    Refused(Refusal),
}

/// The trust check of `stockade run` in `workspace` (canonical) with `policy_file` (as given
/// on the command line) and the store in `store_dir` (`None`: it cannot be located).
///
/// Gated: a workspace with a trust record, and any run whose policy file lies inside the
/// workspace (by its path or by what it resolves to). A corrupt record is an error, never
/// "approved". A store inside the workspace cannot be believed (the sandbox writes the
/// workspace): with a workspace policy file that is an error, otherwise the run is ungated,
/// as with no record, because `approve` never writes a store inside its own workspace.
pub fn check_run(
    workspace: &Path,
    policy_file: Option<&Path>,
    store_dir: Option<&Path>,
) -> Result<Gate, TrustError> {
    let policy = match policy_file {
        Some(p) => inside_workspace(workspace, p)?,
        None => None,
    };
    if let Some(rel) = &policy {
        if !is_covered(rel) {
            return Ok(Gate::Refused(Refusal::NotCovered {
                policy: rel.clone(),
            }));
        }
    }
    let Some(store_dir) = store_dir else {
        return match policy {
            Some(_) => Err(TrustError::Locate {
                reason: "neither XDG_STATE_HOME nor HOME is set to an absolute path".into(),
            }),
            None => Ok(Gate::Ungated),
        };
    };
    let store = match TrustStore::open(store_dir, workspace) {
        Ok(s) => s,
        Err(TrustError::StoreUnsafe {
            inside_workspace: true,
            ..
        }) if policy.is_none() => return Ok(Gate::Ungated),
        Err(e) => return Err(e),
    };
    let record = store.load()?;
    let record = match (record, &policy) {
        (None, None) => return Ok(Gate::Ungated),
        (None, Some(rel)) => {
            // Still hash: a link leading out of the workspace is refused as such.
            Snapshot::take(workspace)?;
            return Ok(Gate::Refused(Refusal::NotApproved {
                policy: rel.clone(),
            }));
        }
        (Some(r), _) => r,
    };
    let now = Snapshot::take(workspace)?;
    if now.digest == record.digest {
        return Ok(Gate::Approved { digest: now.digest });
    }
    let changes = diff(&record.files, &now.entries);
    Ok(Gate::Refused(if changes.is_empty() {
        Refusal::RulesChanged
    } else {
        Refusal::Changed { changes }
    }))
}

/// Whether a workspace-relative path lies under one of the [`TRUST_PATHS`] (and not under
/// an [`EXCLUDED`] one).
pub fn is_covered(rel: &str) -> bool {
    let under =
        |base: &str| rel == base || rel.strip_prefix(base).is_some_and(|r| r.starts_with('/'));
    TRUST_PATHS.iter().any(|t| under(t.path)) && !EXCLUDED.iter().any(|x| under(x))
}

/// The policy file's path relative to the workspace when it lies inside it, either as
/// written (its directory resolved, the last component not followed) or as it resolves.
fn inside_workspace(workspace: &Path, file: &Path) -> Result<Option<String>, TrustError> {
    let read_error = |cause: std::io::Error| TrustError::Read {
        workspace: workspace.to_path_buf(),
        path: file.display().to_string(),
        cause,
    };
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = file.file_name().unwrap_or_else(|| OsStr::new("."));
    let as_written = std::fs::canonicalize(&parent)
        .map_err(read_error)?
        .join(name);
    let resolved = std::fs::canonicalize(file).map_err(read_error)?;
    for p in [as_written, resolved] {
        if let Ok(rel) = p.strip_prefix(workspace) {
            let rel = rel.to_str().ok_or_else(|| TrustError::Unsupported {
                workspace: workspace.to_path_buf(),
                path: rel.display().to_string(),
                reason: "the policy file's path is not UTF-8".into(),
            })?;
            return Ok(Some(rel.to_string()));
        }
    }
    Ok(None)
}

/// Everything the trust layer refuses or fails at.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("refusing {path} in workspace {}: it is a symbolic link that leads out of the workspace", .workspace.display())]
    Escapes { workspace: PathBuf, path: String },
    #[error("refusing {path} in workspace {}: {reason}", .workspace.display())]
    Unsupported {
        workspace: PathBuf,
        path: String,
        reason: String,
    },
    /// `openat2` is refused here (an old kernel, or a seccomp profile around stockade).
    #[error("cannot read {path} in workspace {} safely: openat2 is refused here ({cause})", .workspace.display())]
    NoOpenat2 {
        workspace: PathBuf,
        path: String,
        cause: std::io::Error,
    },
    #[error("failed to read {path} in workspace {}: {cause}", .workspace.display())]
    Read {
        workspace: PathBuf,
        path: String,
        cause: std::io::Error,
    },
    #[error("failed to locate the trust store: {reason}")]
    Locate { reason: String },
    #[error("refusing the trust store {}: {reason}", .dir.display())]
    StoreUnsafe {
        dir: PathBuf,
        reason: String,
        /// The store lies inside the workspace it would vouch for.
        inside_workspace: bool,
    },
    #[error("failed to {what} {}: {cause}", .path.display())]
    StoreIo {
        what: &'static str,
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("the trust record {} is corrupt: {reason}", .path.display())]
    Corrupt { path: PathBuf, reason: String },
}

/// Whether `openat2` itself is refused here (`ENOSYS`, or `EPERM`: a seccomp profile's
/// answer), judged by a call that cannot fail otherwise.
fn openat2_refused() -> bool {
    matches!(
        rustix::fs::openat2(
            rustix::fs::CWD,
            "/",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS,
        ),
        Err(Errno::NOSYS | Errno::PERM)
    )
}

impl TrustError {
    /// `E_UNTRUSTED_CONFIG` for the workspace's files, `E_TRUST_STORE` for the store,
    /// `E_PROTECTION_UNAVAILABLE` where the files cannot be read safely at all.
    pub fn code(&self) -> &'static str {
        match self {
            TrustError::Escapes { .. }
            | TrustError::Unsupported { .. }
            | TrustError::Read { .. } => E_UNTRUSTED_CONFIG,
            TrustError::NoOpenat2 { .. } => E_PROTECTION_UNAVAILABLE,
            _ => E_TRUST_STORE,
        }
    }

    /// Coarse class for audit events and `--json`.
    pub fn kind(&self) -> &'static str {
        match self.code() {
            E_UNTRUSTED_CONFIG => "untrusted_config",
            E_PROTECTION_UNAVAILABLE => "protection_unavailable",
            _ => "trust_store",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            TrustError::Escapes { .. } => "configuration must live inside the workspace: replace the link with the file itself (links that stay inside the workspace are fine)".into(),
            TrustError::Unsupported { .. } => "keep only regular files and directories under the trust-relevant paths (`stockade trust status` lists them)".into(),
            TrustError::Read { .. } => "make the file readable by the caller; stockade will not vouch for what it cannot read".into(),
            TrustError::NoOpenat2 { .. } => "allow openat2 in the seccomp profile around stockade (older Docker and containerd default profiles refuse it), or use Linux 5.6 or later; the workspace's configuration is read through it only".into(),
            TrustError::Locate { .. } => "set HOME, or XDG_STATE_HOME to an absolute path".into(),
            TrustError::StoreUnsafe { inside_workspace: true, .. } => "the sandbox can write the workspace: point XDG_STATE_HOME outside it".into(),
            TrustError::StoreUnsafe { .. } => "the store must be a directory of yours (or root's) that only its owner can write (chmod 700); as root with another user's HOME, set HOME (or XDG_STATE_HOME) to your own".into(),
            TrustError::StoreIo { .. } => return None,
            TrustError::Corrupt { path, .. } => format!(
                "nothing is trusted while it is corrupt: remove {} and approve the workspace again",
                path.display()
            ),
        })
    }
}
