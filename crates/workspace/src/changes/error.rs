//! Why a change set cannot be made, read, shown or applied.

use std::io;
use std::path::PathBuf;

use sandbox::Code;

use super::Flag;

/// One variant per failing operation (`failed to <verb> <object>: <cause>`), and the
/// refusals, which carry what was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChangesError {
    #[error("failed to locate the change store: {reason}")]
    Locate { reason: String },
    #[error("refusing the change store {}: {reason}", .dir.display())]
    StoreUnsafe { dir: PathBuf, reason: String },
    #[error("refusing run id {id:?}: {reason}")]
    BadRunId { id: String, reason: String },
    #[error("refusing the path {}: {reason}", .path.display())]
    BadPath { path: PathBuf, reason: String },
    #[error("failed to create {}: {cause}", .path.display())]
    Create { path: PathBuf, cause: io::Error },
    #[error("failed to open {}: {cause}", .path.display())]
    Open { path: PathBuf, cause: io::Error },
    #[error("failed to read {}: {cause}", .path.display())]
    Read { path: PathBuf, cause: io::Error },
    #[error("failed to write {}: {cause}", .path.display())]
    Write { path: PathBuf, cause: io::Error },
    #[error("failed to remove {}: {cause}", .path.display())]
    Remove { path: PathBuf, cause: io::Error },
    #[error("failed to lock {}: {cause}", .path.display())]
    Lock { path: PathBuf, cause: io::Error },
    /// Writing one entry into the workspace failed (entries before it were written: see
    /// `applied.log`).
    #[error("failed to apply {}: {cause}", .path.display())]
    Apply { path: PathBuf, cause: io::Error },
    #[error("the change set's record {} is corrupt: {reason}", .path.display())]
    Corrupt { path: PathBuf, reason: String },
    /// The upper holds something stockade's overlay never makes (a redirect or metacopy mark,
    /// an opaque mark with another value, a tree too deep).
    #[error("refusing the change set's entry {}: {reason}", .path.display())]
    Unsupported { path: PathBuf, reason: String },
    #[error("no pending change set {what}")]
    NotFound { what: String },
    #[error("the change set {run_id} was not finished (its run ended before its changes were read and sealed)")]
    NotFinished { run_id: String },
    #[error("no pending change at {}", join(.0))]
    NoSuchChange(Vec<PathBuf>),
    #[error("the change set differs from what was recorded when its run ended: digest {found}, recorded {expected}")]
    Tampered { expected: String, found: String },
    #[error("refusing to apply {} flagged entr{}: {}", .0.len(), if .0.len() == 1 { "y" } else { "ies" }, flagged(.0))]
    Flagged(Vec<(PathBuf, Vec<Flag>)>),
    #[error("refusing to apply: {} entr{} changed in the workspace: {}", .0.len(), if .0.len() == 1 { "y" } else { "ies" }, conflicts(.0))]
    Conflict(Vec<(PathBuf, String)>),
}

/// The message names this many entries at most (the variant carries them all).
const SHOWN: usize = 20;

fn shown(items: Vec<String>, sep: &str) -> String {
    let n = items.len();
    let mut text = items.into_iter().take(SHOWN).collect::<Vec<_>>().join(sep);
    if n > SHOWN {
        text.push_str(&format!("{sep}and {} more", n - SHOWN));
    }
    text
}

fn join(paths: &[PathBuf]) -> String {
    shown(
        paths.iter().map(|p| p.display().to_string()).collect(),
        ", ",
    )
}

fn flagged(list: &[(PathBuf, Vec<Flag>)]) -> String {
    let items = list
        .iter()
        .map(|(p, flags)| {
            let codes: Vec<&str> = flags.iter().map(|f| f.code).collect();
            format!("{} ({})", p.display(), codes.join(", "))
        })
        .collect();
    shown(items, "; ")
}

fn conflicts(list: &[(PathBuf, String)]) -> String {
    let items = list
        .iter()
        .map(|(p, why)| format!("{}: {why}", p.display()))
        .collect();
    shown(items, "; ")
}

impl ChangesError {
    /// The registry's code.
    pub fn registry_code(&self) -> Code {
        match self {
            ChangesError::Flagged(_) => Code::ChangesFlagged,
            ChangesError::Conflict(_) => Code::ChangesConflict,
            ChangesError::Tampered { .. }
            | ChangesError::Unsupported { .. }
            | ChangesError::Corrupt { .. } => Code::ChangesTampered,
            ChangesError::BadRunId { .. }
            | ChangesError::BadPath { .. }
            | ChangesError::NotFound { .. }
            | ChangesError::NoSuchChange(_) => Code::PolicyInvalid,
            _ => Code::Internal,
        }
    }

    /// The code as printed (`E_CHANGES_FLAGGED`, ...).
    pub fn code(&self) -> &'static str {
        self.registry_code().as_str()
    }

    /// How to get past it; `None` where the code's own hint says it.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            ChangesError::Locate { .. } => "set HOME, or XDG_STATE_HOME to an absolute path".into(),
            ChangesError::StoreUnsafe { .. } => "the change store must be a directory of yours that only you can write (chmod 700), outside the workspace".into(),
            ChangesError::BadRunId { .. } => "`stockade runs` lists the pending change sets by run id".into(),
            ChangesError::BadPath { .. } => "name paths relative to the workspace, without `..`".into(),
            ChangesError::NotFound { .. } => "`stockade runs` lists the pending change sets".into(),
            ChangesError::NotFinished { run_id } => format!("nothing of it can be applied safely; remove it with `stockade discard {run_id}`"),
            ChangesError::NoSuchChange(_) => "`stockade changes` lists the pending entries".into(),
            ChangesError::Apply { .. } => "the entries written before it are listed in the change set's applied.log; fix the cause and run `stockade apply` again: what was written is skipped".into(),
            ChangesError::Flagged(_) => "review them (`stockade diff PATH`), then apply with `--accept PATH` for each, or `--accept-flagged`; without `--all-or-nothing`, `stockade apply` applies the rest and leaves them pending".into(),
            ChangesError::Conflict(_) => "the workspace changed where the run did: leave those entries out (`--exclude PATH`), or bring the paths back to their state at the run's end".into(),
            ChangesError::Tampered { .. } | ChangesError::Corrupt { .. } => "something other than the run changed the change set: do not apply it; remove it with `stockade discard RUN`".into(),
            ChangesError::Unsupported { .. } => "stockade does not apply a change set holding this; remove it with `stockade discard RUN` (and make that change on the host)".into(),
            _ => return None,
        })
    }
}
