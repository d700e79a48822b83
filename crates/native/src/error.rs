//! Errors of planning and running a sandbox, each with a stable code and a fix.

use std::path::PathBuf;

use sandbox::Code;
pub use sandbox::RunError;

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    #[error(transparent)]
    Scan(#[from] workspace::ScanError),
    #[error("workspace is not a directory: {}", .0.display())]
    Workspace(PathBuf),
}

impl PlanError {
    pub fn hint(&self) -> Option<String> {
        match self {
            PlanError::Policy(e) => e.hint(),
            PlanError::Scan(e) => e.hint(),
            PlanError::Workspace(_) => Some("pass an existing directory with --workspace".into()),
        }
    }
}

/// A planning failure in the contract's terms: its message and hint, and the code the
/// workspace's scan gives it (a workspace that kept changing, a protection the scan cannot
/// give) or `E_POLICY_INVALID`.
impl From<PlanError> for RunError {
    fn from(e: PlanError) -> RunError {
        let code = match &e {
            PlanError::Scan(s) if s.workspace_changed() => Code::WorkspaceChanged,
            PlanError::Scan(s) if s.protection_unavailable() => Code::ProtectionUnavailable,
            _ => Code::PolicyInvalid,
        };
        RunError::Plan {
            code,
            message: e.to_string(),
            hint: e.hint(),
        }
    }
}
