//! Errors of planning and running a sandbox, each with a stable code and a fix.

use std::path::PathBuf;

use sandbox::Code;

/// Stable error codes shown in messages, `--json` output and audit events (from the one
/// registry, [`sandbox::Code`]).
pub const E_POLICY_INVALID: &str = Code::PolicyInvalid.as_str();
pub const E_PROTECTION_UNAVAILABLE: &str = Code::ProtectionUnavailable.as_str();
pub const E_SANDBOX_SETUP: &str = Code::SandboxSetup.as_str();
pub const E_COMMAND_NOT_FOUND: &str = Code::CommandNotFound.as_str();
pub const E_COMMAND_NOT_EXECUTABLE: &str = Code::CommandNotExecutable.as_str();
pub const E_INTERNAL: &str = Code::Internal.as_str();

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

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A protection the policy needs cannot be enforced on this machine.
    #[error("{what} is not available: {cause}")]
    Unavailable {
        what: &'static str,
        cause: String,
        fix: String,
    },
    /// Setting up the sandbox failed at a given step.
    #[error("failed to {stage}{}: {cause}", .path.as_ref().map(|p| format!(" ({})", p.display())).unwrap_or_default())]
    Setup {
        stage: &'static str,
        path: Option<PathBuf>,
        cause: std::io::Error,
        /// The reason and the fix, when host facts tell them (see `crate::explain`).
        explained: Option<String>,
    },
    #[error("failed to {what}: {cause}")]
    Io { what: String, cause: std::io::Error },
}

impl RunError {
    pub fn code(&self) -> &'static str {
        match self {
            RunError::Plan(_) => E_POLICY_INVALID,
            RunError::Unavailable { .. } => E_PROTECTION_UNAVAILABLE,
            RunError::Setup { .. } => E_SANDBOX_SETUP,
            RunError::Io { .. } => E_INTERNAL,
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            RunError::Plan(e) => e.hint(),
            RunError::Unavailable { fix, .. } => Some(fix.clone()),
            RunError::Setup {
                explained: Some(why),
                ..
            } => Some(why.clone()),
            RunError::Setup { cause, .. } if cause.raw_os_error() == Some(libc::EPERM) => Some(
                "run `stockade doctor` to see which kernel feature is blocked on this machine"
                    .into(),
            ),
            // The mount steps look their planned (canonical) paths up through no link.
            RunError::Setup { cause, .. } if cause.raw_os_error() == Some(libc::ELOOP) => Some(
                "a directory on the way to this path became a symbolic link after the run was planned (another run writing the same directories?); nothing was mounted through it: check the path and run again".into(),
            ),
            RunError::Setup { cause, .. } if cause.raw_os_error() == Some(libc::ESTALE) => Some(
                "this path is no longer the file the run was planned with (renamed after planning: another run writing the same directories?); nothing was mounted over it: check the path and run again".into(),
            ),
            RunError::Setup { .. } => Some("run `stockade doctor` to check this machine".into()),
            RunError::Io { cause, .. } if cause.raw_os_error() == Some(libc::EAGAIN) => Some(
                "the process or thread limit was reached (ulimit -u, or a pids cgroup); free some or raise it".into(),
            ),
            RunError::Io { .. } => Some(
                "an unexpected system error in the step named above; `stockade doctor` checks what this machine can enforce".into(),
            ),
        }
    }

    pub(crate) fn io(what: impl Into<String>, cause: std::io::Error) -> RunError {
        RunError::Io {
            what: what.into(),
            cause,
        }
    }
}
