//! Every failure of stockade itself, with a stable code, a kind and a fix.

use std::path::PathBuf;

/// Why stockade did not run a command, or could not finish one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The policy (file, profile or flags) is not valid.
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    /// The policy does not fit this workspace or machine (a missing writable path, a
    /// workspace that kept changing while it was scanned, ...).
    #[error(transparent)]
    Scan(#[from] workspace::ScanError),
    /// The backend refused or failed: a protection cannot be enforced here, setting the
    /// sandbox up failed, or the spec does not lower (the same type for every backend).
    #[error(transparent)]
    Run(#[from] sandbox::RunError),
    /// The workspace cannot be opened.
    #[error("failed to open workspace {}: {cause}", .path.display())]
    Workspace {
        /// The workspace as given.
        path: PathBuf,
        /// What the system said.
        cause: std::io::Error,
    },
    /// An unexpected failure of the system in one of stockade's own steps.
    #[error("failed to {what}: {cause}")]
    Io {
        /// The step, as in "failed to WHAT".
        what: String,
        /// What the system said.
        cause: std::io::Error,
    },
    /// A request stockade refuses as given (with how to ask instead).
    #[error("{message}")]
    Usage {
        /// What is refused.
        message: String,
        /// How to ask instead.
        hint: String,
    },
    /// The workspace's trust-relevant configuration is not the approved one
    /// (`stockade trust`).
    #[error("refusing to run in {}: {reason}", .workspace.display())]
    Untrusted {
        /// The workspace refused.
        workspace: PathBuf,
        /// Which file differs from the approved one, and how.
        reason: guard::trust::Refusal,
    },
    /// The trust check could not be made (a link out of the workspace, a corrupt store).
    #[error(transparent)]
    Trust(#[from] guard::trust::TrustError),
    /// A command string the command layer refuses (`stockade guard`, `run --guard`).
    #[error(transparent)]
    Command(#[from] guard::command::Refusal),
    /// A `--report`/`--audit` path the sandbox could redirect (a link, a directory it can
    /// write): see `record_path`.
    #[error("refusing {flag} {}: {reason}", .path.display())]
    UnsafeRecordPath {
        /// `--report` or `--audit`.
        flag: &'static str,
        /// The path as given.
        path: PathBuf,
        /// Why the sandbox could redirect it.
        reason: String,
        /// Where to write it instead.
        hint: String,
    },
    /// A credential's source gave no usable value (`E_CREDENTIAL_UNAVAILABLE`).
    #[error("credential `{name}` ({source_text}): {reason}")]
    Credential {
        /// The route.
        name: String,
        /// The source, as written (`env:ANTHROPIC_API_KEY`).
        source_text: String,
        /// What went wrong.
        reason: String,
        /// How to fix it.
        hint: String,
    },
    /// A change set of a review run: the store, the change set, or an apply refused
    /// (flagged entries, conflicts, a change set that no longer matches its digest).
    #[error(transparent)]
    Changes(#[from] workspace::changes::ChangesError),
}

impl Error {
    /// Whether a step of setting the sandbox up refused the run (`E_SANDBOX_SETUP`): the
    /// command never started (each backend reports such a refusal before it execs the
    /// command: native's init before its `execve`, gVisor's checks of the mount points
    /// before runsc starts), so nothing of the run's is left to sweep.
    pub fn refused_at_setup(&self) -> bool {
        matches!(self, Error::Run(e) if e.refused_at_setup())
    }

    /// Stable code, e.g. `E_POLICY_INVALID`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Policy(e) => e.code(),
            Error::Scan(e) if e.workspace_changed() => sandbox::Code::WorkspaceChanged.as_str(),
            Error::Scan(e) if e.protection_unavailable() => {
                sandbox::Code::ProtectionUnavailable.as_str()
            }
            Error::Scan(_) | Error::Workspace { .. } | Error::Usage { .. } => {
                sandbox::Code::PolicyInvalid.as_str()
            }
            Error::Run(e) => e.code().as_str(),
            Error::Io { .. } => sandbox::Code::Internal.as_str(),
            Error::Untrusted { .. } => guard::trust::E_UNTRUSTED_CONFIG,
            Error::Trust(e) => e.code(),
            Error::Command(e) => e.code(),
            Error::UnsafeRecordPath { .. } => crate::record_path::E_UNSAFE_RECORD_PATH,
            Error::Credential { .. } => sandbox::Code::CredentialUnavailable.as_str(),
            Error::Changes(e) => e.code(),
        }
    }

    /// Coarse class for audit events and `--json`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Scan(e) if e.protection_unavailable() => "protection_unavailable",
            Error::Scan(e) if e.workspace_changed() => "workspace_changed",
            Error::Policy(_) | Error::Scan(_) | Error::Workspace { .. } | Error::Usage { .. } => {
                "policy"
            }
            Error::Run(e) => e.kind(),
            Error::Io { .. } => "internal",
            Error::Untrusted { .. } => "untrusted_config",
            Error::Trust(e) => e.kind(),
            Error::Command(_) => "command",
            Error::UnsafeRecordPath { .. } => "policy",
            Error::Credential { .. } => "credential",
            Error::Changes(_) => "changes",
        }
    }

    /// How to get past this: the flag, policy line or fix that would allow it; where the
    /// failure has no hint of its own, its code's ([`sandbox::Code::hint`]). Never empty.
    pub fn hint(&self) -> String {
        self.own_hint()
            .filter(|h| !h.trim().is_empty())
            .unwrap_or_else(|| self.registry_code().hint().to_owned())
    }

    /// The hint this failure says itself, if any.
    fn own_hint(&self) -> Option<String> {
        match self {
            Error::Policy(e) => e.hint(),
            Error::Scan(e) => e.hint(),
            Error::Run(e) => e.hint(),
            Error::Workspace { .. } => Some("pass an existing directory with --workspace".into()),
            Error::Io { .. } => None,
            Error::Usage { hint, .. } => Some(hint.clone()),
            Error::Untrusted { workspace, reason } => Some(reason.hint(workspace)),
            Error::Trust(e) => e.hint(),
            Error::Command(e) => Some(e.hint().to_string()),
            Error::UnsafeRecordPath { hint, .. } => Some(hint.clone()),
            Error::Credential { hint, .. } => Some(hint.clone()),
            Error::Changes(e) => e.hint(),
        }
    }

    /// The registry's code of this failure.
    pub fn registry_code(&self) -> sandbox::Code {
        sandbox::Code::parse(self.code()).unwrap_or(sandbox::Code::Internal)
    }

    /// For a refused command: the construct refused (`pipeline`, `path_outside_workspace`, ...).
    pub fn construct(&self) -> Option<&'static str> {
        match self {
            Error::Command(e) => Some(e.construct.as_str()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every failure names a code of the registry and a hint, its own or its code's.
    #[test]
    fn every_error_has_a_registry_code_and_a_hint() {
        let io = || std::io::Error::other("disk on fire");
        let errors = [
            Error::Io {
                what: "write x".into(),
                cause: io(),
            },
            Error::Workspace {
                path: "/nonexistent".into(),
                cause: io(),
            },
            Error::Usage {
                message: "m".into(),
                hint: String::new(),
            },
            Error::Trust(guard::trust::TrustError::StoreIo {
                what: "read",
                path: "/x".into(),
                cause: io(),
            }),
            Error::Credential {
                name: "n".into(),
                source_text: "env:X".into(),
                reason: "unset".into(),
                hint: "set X".into(),
            },
        ];
        for e in errors {
            assert_eq!(
                sandbox::Code::parse(e.code()),
                Some(e.registry_code()),
                "{e}"
            );
            assert!(!e.hint().trim().is_empty(), "{e} has no hint");
        }
        let io_error = Error::Io {
            what: "write x".into(),
            cause: io(),
        };
        assert_eq!(io_error.hint(), sandbox::Code::Internal.hint());
        // The planner's walk refused because the workspace kept changing: its own code, kind
        // and hint, naming the directory.
        let changed = Error::from(workspace::ScanError::WorkspaceChanged {
            dir: "/ws/P".into(),
            rewalks: 3,
        });
        assert_eq!(changed.code(), "E_WORKSPACE_CHANGED");
        assert_eq!(changed.kind(), "workspace_changed");
        assert!(changed.hint().contains("/ws/P"), "{}", changed.hint());
    }
}
