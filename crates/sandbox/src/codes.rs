//! The registry of stable error codes.

use std::fmt;

/// A stable code: what kind of refusal or error happened. The text ([`Code::as_str`]) never
/// changes once released; scripts and audit pipelines match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    PolicyInvalid,
    ProtectionUnavailable,
    SandboxSetup,
    CommandNotFound,
    CommandNotExecutable,
    SandboxViolation,
    NetworkDenied,
    Timeout,
    LimitReached,
    UntrustedConfig,
    TrustStore,
    UnsafeRecordPath,
    CredentialUnavailable,
    CredentialRefused,
    Internal,
}

impl Code {
    /// Every code, in the order README's table lists them.
    pub const ALL: &'static [Code] = &[
        Code::PolicyInvalid,
        Code::ProtectionUnavailable,
        Code::SandboxSetup,
        Code::CommandNotFound,
        Code::CommandNotExecutable,
        Code::SandboxViolation,
        Code::NetworkDenied,
        Code::Timeout,
        Code::LimitReached,
        Code::UntrustedConfig,
        Code::TrustStore,
        Code::UnsafeRecordPath,
        Code::CredentialUnavailable,
        Code::CredentialRefused,
        Code::Internal,
    ];

    /// The code as printed: `stockade: error[E_...]`, `"code": "E_..."`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::PolicyInvalid => "E_POLICY_INVALID",
            Code::ProtectionUnavailable => "E_PROTECTION_UNAVAILABLE",
            Code::SandboxSetup => "E_SANDBOX_SETUP",
            Code::CommandNotFound => "E_COMMAND_NOT_FOUND",
            Code::CommandNotExecutable => "E_COMMAND_NOT_EXECUTABLE",
            Code::SandboxViolation => "E_SANDBOX_VIOLATION",
            Code::NetworkDenied => "E_NETWORK_DENIED",
            Code::Timeout => "E_TIMEOUT",
            Code::LimitReached => "E_LIMIT_REACHED",
            Code::UntrustedConfig => "E_UNTRUSTED_CONFIG",
            Code::TrustStore => "E_TRUST_STORE",
            Code::UnsafeRecordPath => "E_UNSAFE_RECORD_PATH",
            Code::CredentialUnavailable => "E_CREDENTIAL_UNAVAILABLE",
            Code::CredentialRefused => "E_CREDENTIAL_REFUSED",
            Code::Internal => "E_INTERNAL",
        }
    }

    /// When the code is given, in one line (README's table is made from these).
    pub const fn meaning(self) -> &'static str {
        match self {
            Code::PolicyInvalid => {
                "a policy file, profile or flag is invalid (the message names the key and the fix); exit 125"
            }
            Code::ProtectionUnavailable => {
                "a protection the run asks for cannot be enforced on this machine (fail closed; the message names what is missing); exit 125"
            }
            Code::SandboxSetup => {
                "setting the sandbox up failed on this host (the message names the path, the reason and the fix); exit 125"
            }
            Code::CommandNotFound => "the program does not exist inside the sandbox; exit 127",
            Code::CommandNotExecutable => "the program exists but cannot be executed; exit 126",
            Code::SandboxViolation => {
                "the command tried something the sandbox refused: a protected path (reported; the command goes on) or, in the command layer, a construct (exit 125)"
            }
            Code::NetworkDenied => {
                "the egress proxy refused a destination (rule, SSRF or fronting check)"
            }
            Code::Timeout => "the run hit its time limit (`--timeout`); exit 124",
            Code::LimitReached => "the run reached a limit: memory, pids or output",
            Code::UntrustedConfig => {
                "the workspace's trust-relevant configuration differs from what was approved (`stockade trust`); exit 125"
            }
            Code::TrustStore => "the trust store cannot be read or written safely; exit 125",
            Code::UnsafeRecordPath => {
                "a `--report`/`--audit` path the command could redirect (inside a writable root or through a link there); exit 125"
            }
            Code::CredentialUnavailable => {
                "a credential's source gave no value (variable unset, file unreadable or empty, keyring or command failed); nothing ran; exit 125"
            }
            Code::CredentialRefused => {
                "a request on a credential route carried no valid stand-in (answered 401; the real value was not sent)"
            }
            Code::Internal => "stockade itself failed (an I/O error of its own, or a bug); exit 125",
        }
    }

    /// The code whose text is `text`.
    pub fn parse(text: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.as_str() == text)
    }

    /// README's table of codes (`tests/registry.rs` checks README holds exactly this).
    pub fn markdown_table() -> String {
        let mut out = String::from("| code | when |\n|---|---|\n");
        for c in Code::ALL {
            out.push_str(&format!("| `{}` | {} |\n", c.as_str(), c.meaning()));
        }
        out
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
