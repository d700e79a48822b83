//! Why a backend did not run a spec, or could not finish it: one type for every backend
//! (issue 33, item 1), each failure with its registry [`Code`] and a fix.

use std::path::PathBuf;

use crate::Code;

/// A backend's failure, in terms no backend owns: the pipeline reads its code, kind and hint
/// without knowing which backend ran.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The spec does not fit this workspace or machine: the backend's lowering refused it
    /// (a writable root gone since the spec was made, no program to run, ...).
    #[error("{message}")]
    Plan {
        /// `PolicyInvalid`, or the narrower code the refusal has (`WorkspaceChanged`,
        /// `ProtectionUnavailable`).
        code: Code,
        message: String,
        hint: Option<String>,
    },
    /// A protection the policy needs cannot be enforced on this machine.
    #[error("{what} is not available: {cause}")]
    Unavailable {
        what: &'static str,
        cause: String,
        fix: String,
    },
    /// Setting up the sandbox failed at a given step: the command never started.
    #[error("failed to {stage}{}: {cause}", .path.as_ref().map(|p| format!(" ({})", p.display())).unwrap_or_default())]
    Setup {
        stage: &'static str,
        path: Option<PathBuf>,
        cause: std::io::Error,
        /// The reason and the fix, when host facts tell them.
        explained: Option<String>,
    },
    /// An unexpected failure of the system in one of the backend's steps.
    #[error("failed to {what}: {cause}")]
    Io { what: String, cause: std::io::Error },
}

impl RunError {
    /// An [`RunError::Io`] of the step `what`.
    pub fn io(what: impl Into<String>, cause: std::io::Error) -> RunError {
        RunError::Io {
            what: what.into(),
            cause,
        }
    }

    /// A run in network mode proxy given no proxy to serve it ([`crate::Launch::proxy`]): a
    /// caller of the library that did not start one.
    pub fn no_proxy() -> RunError {
        RunError::Unavailable {
            what: "the egress proxy",
            cause: "network mode proxy needs a proxy to serve it".into(),
            fix: "run through `stockade run`, which starts the proxy".into(),
        }
    }

    /// The registry's code.
    pub fn code(&self) -> Code {
        match self {
            RunError::Plan { code, .. } => *code,
            RunError::Unavailable { .. } => Code::ProtectionUnavailable,
            RunError::Setup { .. } => Code::SandboxSetup,
            RunError::Io { .. } => Code::Internal,
        }
    }

    /// Coarse class for audit events and `--json`.
    pub fn kind(&self) -> &'static str {
        match self {
            RunError::Plan { code, .. } => match code {
                Code::WorkspaceChanged => "workspace_changed",
                Code::ProtectionUnavailable => "protection_unavailable",
                _ => "policy",
            },
            RunError::Unavailable { .. } => "protection_unavailable",
            RunError::Setup { .. } | RunError::Io { .. } => "setup",
        }
    }

    /// Whether a step of setting the sandbox up refused the run: the command never started
    /// (each backend reports such a refusal before it execs the command), so nothing of the
    /// run's is left to sweep.
    pub fn refused_at_setup(&self) -> bool {
        matches!(self, RunError::Setup { .. })
    }

    /// How to get past this, when the failure says it itself.
    pub fn hint(&self) -> Option<String> {
        let errno = |cause: &std::io::Error| cause.raw_os_error();
        match self {
            RunError::Plan { hint, .. } => hint.clone(),
            RunError::Unavailable { fix, .. } => Some(fix.clone()),
            RunError::Setup {
                explained: Some(why),
                ..
            } => Some(why.clone()),
            RunError::Setup { cause, .. } if errno(cause) == Some(libc::EPERM) => Some(
                "run `stockade doctor` to see which kernel feature is blocked on this machine"
                    .into(),
            ),
            // The mount steps look their planned (canonical) paths up through no link.
            RunError::Setup { cause, .. } if errno(cause) == Some(libc::ELOOP) => Some(
                "a directory on the way to this path became a symbolic link after the run was planned (another run writing the same directories?); nothing was mounted through it: check the path and run again".into(),
            ),
            RunError::Setup { cause, .. } if errno(cause) == Some(libc::ESTALE) => Some(
                "this path is no longer the file the run was planned with (renamed after planning: another run writing the same directories?); nothing was mounted over it: check the path and run again".into(),
            ),
            RunError::Setup { .. } => Some("run `stockade doctor` to check this machine".into()),
            RunError::Io { cause, .. } if errno(cause) == Some(libc::EAGAIN) => Some(
                "the process or thread limit was reached (ulimit -u, or a pids cgroup); free some or raise it".into(),
            ),
            RunError::Io { .. } => Some(
                "an unexpected system error in the step named above; `stockade doctor` checks what this machine can enforce".into(),
            ),
        }
    }
}

/// Why the command does not start in the caller's current directory (it starts in the
/// workspace instead; recorded and audited).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CwdFallback {
    /// The caller's current directory.
    pub cwd: PathBuf,
    /// Why the sandbox cannot use it.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_has_a_registry_code_a_kind_and_a_hint() {
        let io = || std::io::Error::from_raw_os_error(libc::EPERM);
        let all = [
            RunError::Plan {
                code: Code::WorkspaceChanged,
                message: "m".into(),
                hint: Some("h".into()),
            },
            RunError::Unavailable {
                what: "w",
                cause: "c".into(),
                fix: "f".into(),
            },
            RunError::Setup {
                stage: "mount",
                path: None,
                cause: io(),
                explained: None,
            },
            RunError::io("write", io()),
        ];
        let kinds: Vec<_> = all.iter().map(RunError::kind).collect();
        assert_eq!(
            kinds,
            [
                "workspace_changed",
                "protection_unavailable",
                "setup",
                "setup"
            ]
        );
        for e in &all {
            assert!(Code::ALL.contains(&e.code()), "{e}");
            assert!(e.hint().is_some_and(|h| !h.is_empty()), "{e}");
        }
        assert!(all[2].refused_at_setup() && !all[3].refused_at_setup());
    }
}
