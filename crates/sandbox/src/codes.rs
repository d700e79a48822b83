//! The registry of stable error codes.

use std::fmt;

/// A stable code: what kind of refusal or error happened. The text ([`Code::as_str`]) never
/// changes once released; scripts and audit pipelines match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    PolicyInvalid,
    ProtectionUnavailable,
    WorkspaceChanged,
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
    ChangesFlagged,
    ChangesConflict,
    ChangesTampered,
    SnapshotRefused,
    Internal,
}

impl Code {
    /// Every code, in the order README's table lists them.
    pub const ALL: &'static [Code] = &[
        Code::PolicyInvalid,
        Code::ProtectionUnavailable,
        Code::WorkspaceChanged,
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
        Code::ChangesFlagged,
        Code::ChangesConflict,
        Code::ChangesTampered,
        Code::SnapshotRefused,
        Code::Internal,
    ];

    /// The code as printed: `stockade: error[E_...]`, `"code": "E_..."`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::PolicyInvalid => "E_POLICY_INVALID",
            Code::ProtectionUnavailable => "E_PROTECTION_UNAVAILABLE",
            Code::WorkspaceChanged => "E_WORKSPACE_CHANGED",
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
            Code::ChangesFlagged => "E_CHANGES_FLAGGED",
            Code::ChangesConflict => "E_CHANGES_CONFLICT",
            Code::ChangesTampered => "E_CHANGES_TAMPERED",
            Code::SnapshotRefused => "E_SNAPSHOT_REFUSED",
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
            Code::WorkspaceChanged => {
                "a directory of the workspace kept changing (entries created, removed or renamed) each time the planner looked again after its walk, so a secret could have been moved past it; nothing ran; exit 125"
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
            Code::ChangesFlagged => {
                "`stockade apply --all-or-nothing` (or an apply that selected only flagged entries) refused entries of a change set that carry a flag (a file host tools execute, a protected path, an executable, a link, ...) and were not accepted; nothing was written; exit 125 (without `--all-or-nothing` the rest is applied and they stay pending: exit 3)"
            }
            Code::ChangesConflict => {
                "`stockade apply` refused entries whose workspace path changed on the host during or after the run; nothing was written; exit 125"
            }
            Code::ChangesTampered => {
                "a change set no longer matches the digest recorded when its run ended (or holds what the run's overlay never makes); nothing was written; exit 125"
            }
            Code::SnapshotRefused => {
                "`stockade snapshot` refused to export the workspace: symbolic links resolve outside it (listed), or `--out` lies inside it or is not new; nothing was written; exit 125"
            }
            Code::Internal => "stockade itself failed (an I/O error of its own, or a bug); exit 125",
        }
    }

    /// What to do about it, in one line naming the flag or policy line that would change the
    /// outcome: the `hint:` printed under a refusal whose message has no hint of its own
    /// (`tests/registry.rs` checks every code has one).
    pub const fn hint(self) -> &'static str {
        match self {
            Code::PolicyInvalid => {
                "`stockade policy check FILE` checks a policy file line by line; `stockade run --help` lists the flags and their values"
            }
            Code::ProtectionUnavailable => {
                "run `stockade doctor`: it names what this machine lacks and how to enable it"
            }
            Code::WorkspaceChanged => {
                "stop what keeps creating, removing or renaming entries in the directory named (another run's command, a build, a script left running), or run the command again (`stockade run` walks what changed again up to 5 times before it refuses); `STOCKADE_LOG=debug` shows what the walk listed"
            }
            Code::SandboxSetup => {
                "run `stockade doctor` to check this machine; the message names the step and the path that failed"
            }
            Code::CommandNotFound => {
                "the program is looked up in the PATH the command gets, among the host's files as the sandbox sees them: check its name, give its full path or set `--env PATH=...`; a program under a masked path needs `--allow-read DIR` (or `allow_read` under [filesystem] in the policy file)"
            }
            Code::CommandNotExecutable => {
                "make the file executable (`chmod +x FILE`) and check that its `#!` interpreter exists inside the sandbox; a masked file needs `--allow-read PATH`"
            }
            Code::SandboxViolation => {
                "the sandbox refused it on purpose: make that change on the host; a catalogue entry can be dropped with `unprotect = [\"NAME\"]` under [filesystem] in the policy file (`stockade policy show` lists the protected paths)"
            }
            Code::NetworkDenied => {
                "with `--net proxy`, `--allow-domain HOST` (or `allow_domains = [\"HOST\"]` under [network] in the policy file) allows a name; IP addresses and loopback or private hosts need `--allow-host HOST:PORT`"
            }
            Code::Timeout => {
                "give the run more time with `--timeout SECONDS` (0: no limit), or `timeout = SECONDS` under [limits] in the policy file"
            }
            Code::LimitReached => {
                "raise the limit: `--memory SIZE`, `--pids N` or `--output-limit SIZE` (0: no limit), or `memory`, `pids`, `output_limit` under [limits] in the policy file"
            }
            Code::UntrustedConfig => {
                "review the files named, then `stockade trust approve --workspace DIR` (`stockade trust status` lists what changed)"
            }
            Code::TrustStore => {
                "the store is `$XDG_STATE_HOME/stockade/trust` (default `~/.local/state/stockade/trust`): a directory only its owner can write; remove a corrupt record and approve the workspace again"
            }
            Code::UnsafeRecordPath => {
                "write `--report` and `--audit` outside the workspace and every `--allow-write` directory"
            }
            Code::CredentialUnavailable => {
                "give the credential a source that holds its value: `--credential NAME=env:VAR`, `=file:PATH` or `=keyring:SERVICE/ACCOUNT` (or `source` in its [credentials.NAME] table)"
            }
            Code::CredentialRefused => {
                "send requests on a credential route with the stand-in the run put in the route's key variable (e.g. `ANTHROPIC_API_KEY`), unchanged"
            }
            Code::ChangesFlagged => {
                "review the entries named (`stockade diff RUN PATH`), then `stockade apply --accept PATH` for each, or `--accept-flagged`; without `--all-or-nothing`, `stockade apply` applies the rest and leaves them pending"
            }
            Code::ChangesConflict => {
                "leave the entries named out (`stockade apply --exclude PATH`), or bring their paths back to the state they had when the run ended; `stockade diff RUN PATH` shows the change"
            }
            Code::ChangesTampered => {
                "do not apply it: remove it with `stockade discard RUN` and run the command again"
            }
            Code::SnapshotRefused => {
                "replace or remove the links listed (`--allow-outside-links` leaves them out of the snapshot instead), and give `--out` a new path outside the workspace"
            }
            Code::Internal => {
                "stockade failed in a step of its own, named above; `STOCKADE_LOG=debug` shows the stages of a run; if it persists, report it with that output"
            }
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

/// A refusal or a limit as stockade prints it on stderr: `stockade: LABEL[CODE]: MESSAGE`,
/// then `  hint: ...` with the hint given, else the code's own ([`Code::hint`]). Every line of
/// stockade that carries a code is one of these, so none goes out without a hint.
///
/// ```
/// use sandbox::{Code, Notice};
/// let n = Notice::new("error", Code::Timeout, "the run exceeded its time limit (600 s)");
/// assert_eq!(
///     n.to_string().lines().nth(1),
///     Some(format!("  hint: {}", Code::Timeout.hint()).as_str())
/// );
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Notice<'a> {
    /// `error`, `violation`, `network`, `limit`.
    pub label: &'a str,
    pub code: Code,
    pub message: &'a str,
    /// A hint that fits this case better than the code's own.
    pub hint: Option<&'a str>,
}

impl<'a> Notice<'a> {
    /// A notice with the code's own hint.
    pub fn new(label: &'a str, code: Code, message: &'a str) -> Self {
        Notice {
            label,
            code,
            message,
            hint: None,
        }
    }

    /// The same notice with `hint` instead of the code's own (an empty one is ignored).
    pub fn with_hint(self, hint: Option<&'a str>) -> Self {
        Notice {
            hint: hint.filter(|h| !h.trim().is_empty()),
            ..self
        }
    }

    /// The hint printed: the one given, else the code's own.
    pub fn hint(&self) -> &'a str {
        self.hint.unwrap_or(self.code.hint())
    }
}

impl fmt::Display for Notice<'_> {
    /// Two lines, without a final newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stockade: {}[{}]: {}\n  hint: {}",
            self.label,
            self.code,
            self.message,
            self.hint()
        )
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// As its string (`"E_TIMEOUT"`): the form in reports, `--json` and the audit log.
impl serde::Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}
