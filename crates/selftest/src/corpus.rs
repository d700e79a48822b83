//! The attack corpus: TOML files under `corpus/`, one per category, embedded in the binary and
//! parsed strictly (unknown keys are errors).
//!
//! A case is an attack (a `/bin/sh` snippet run inside `stockade run`), the flags of the run,
//! and the *escape signals*: what the attack achieves when nothing contains it (a marker in
//! its output, a host file changed, a loopback listener reached, a host process killed, ...).
//! The runner first runs the control (by default the same snippet, directly with `/bin/sh` in
//! the same kind of throw-away fixture), which must show **every** signal, so no case is
//! vacuous; then the attack, which must show **none**.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Version of the corpus format and contents; bump it when cases change meaning.
pub const CORPUS_VERSION: u32 = 1;

/// The embedded corpus files, in the order they are run.
const FILES: &[(&str, &str)] = &[
    ("secrets.toml", include_str!("../corpus/secrets.toml")),
    (
        "credentials.toml",
        include_str!("../corpus/credentials.toml"),
    ),
    ("host-exec.toml", include_str!("../corpus/host-exec.toml")),
    (
        "indirection.toml",
        include_str!("../corpus/indirection.toml"),
    ),
    (
        "persistence.toml",
        include_str!("../corpus/persistence.toml"),
    ),
    ("writes.toml", include_str!("../corpus/writes.toml")),
    ("host-later.toml", include_str!("../corpus/host-later.toml")),
    ("proc-sys.toml", include_str!("../corpus/proc-sys.toml")),
    ("privilege.toml", include_str!("../corpus/privilege.toml")),
    ("kernel.toml", include_str!("../corpus/kernel.toml")),
    ("ipc.toml", include_str!("../corpus/ipc.toml")),
    ("network.toml", include_str!("../corpus/network.toml")),
    ("ssrf.toml", include_str!("../corpus/ssrf.toml")),
    ("resources.toml", include_str!("../corpus/resources.toml")),
    ("env.toml", include_str!("../corpus/env.toml")),
    ("terminal.toml", include_str!("../corpus/terminal.toml")),
    (
        "config-trust.toml",
        include_str!("../corpus/config-trust.toml"),
    ),
    (
        "command-layer.toml",
        include_str!("../corpus/command-layer.toml"),
    ),
    (
        "privileged-side.toml",
        include_str!("../corpus/privileged-side.toml"),
    ),
];

/// Placeholders the runner substitutes in scripts, arguments, setup, redirections and
/// signals (`{{NAME}}`). Shell variables such as `$HOME` are left to the shell.
pub const PLACEHOLDERS: &[&str] = &[
    "ROOT",
    "HOME",
    "WORKSPACE",
    "MARKER",
    "STOCKADE",
    "TCP_PORT",
    "TCP2_PORT",
    "TCP6_PORT",
    "UDP_PORT",
    "UNIX_SOCK",
    "UNIX_DGRAM",
    "ABSTRACT",
    "HOST_PID",
    "SHM_ID",
    "MSG_ID",
    "SEM_ID",
    "HOST_TMP",
];

/// Loopback listeners a case can name in `listener_hit`.
pub const LISTENERS: &[&str] = &[
    "tcp",
    "tcp2",
    "tcp6",
    "udp",
    "unix",
    "unix-dgram",
    "abstract",
];

/// The prefix of the line the `escaped NAME` shell function prints (defined for every
/// snippet), so that an escape signal is text the snippet *prints*, never text it contains.
pub const ESCAPED_PREFIX: &str = "ESCAPED:";

/// A corpus problem: the corpus is compiled in, so this is a build defect, caught by the
/// crate's unit tests.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error("corpus file {file}: {cause}")]
    Parse {
        file: &'static str,
        cause: toml::de::Error,
    },
    #[error("corpus file {file} has version {found}, the runner knows {CORPUS_VERSION}")]
    Version { file: &'static str, found: u32 },
    #[error("corpus case {id}: {reason}")]
    Invalid { id: String, reason: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CorpusFile {
    version: u32,
    category: String,
    #[serde(default, rename = "case")]
    cases: Vec<Case>,
}

/// One attack of the corpus.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Stable identifier, `<category>.<name>`.
    pub id: String,
    /// Set from the file the case is in.
    #[serde(skip_deserializing)]
    pub category: String,
    /// One line: what the attack tries.
    pub title: String,
    /// Where it comes from: the catalogue section, a CVE, a Mindgard pattern (§x.y).
    pub why: String,
    /// Extra `stockade run` flags (the policy the attack runs under).
    #[serde(default)]
    pub args: Vec<String>,
    /// The run's `--workspace`, and the directory the setup, the control and the attack run
    /// in, when not the fixture's `workspace/`: `{{HOME}}` (a home as the workspace) or a
    /// directory below `{{HOST_TMP}}` (made when missing).
    #[serde(default)]
    pub workspace: Option<String>,
    /// The attack: a `/bin/sh` snippet, run with the workspace as its directory.
    pub script: String,
    /// The control, when it differs from `script` (run directly with `/bin/sh`).
    #[serde(default)]
    pub control: Option<String>,
    /// Run on the host with `/bin/sh` in each fresh fixture before the control and the
    /// attack (planting a symlink, a setuid copy, an approval, ...).
    #[serde(default)]
    pub setup: Option<String>,
    /// Environment given to both the control and `stockade run` (secrets in variables).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Shell redirections applied around both runs, e.g. `3<"$HOME/.ssh/id_rsa"` (a
    /// descriptor inherited from the caller).
    #[serde(default)]
    pub redirect: Option<String>,
    /// What the case needs: `root`, `unprivileged`, `tool:NAME`, `ipv6`, `path:/abs`.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Pass the script to `--shell` as it is, without the wrapper (for `--guard`, which
    /// refuses the wrapper's subshell); the snippet's status is then unknown.
    #[serde(default)]
    pub raw: bool,
    /// The attack runs on the host, not in a sandbox (filters such as `stockade sanitize`
    /// that stand between a command's output and a terminal or model).
    #[serde(default)]
    pub on_host: bool,
    /// The run may end without the snippet finishing (timeouts, the run killed).
    #[serde(default)]
    pub may_not_finish: bool,
    /// Both runs happen in a new session whose controlling terminal is a fresh
    /// pseudo-terminal (util-linux `setsid --ctty`, so `tool:setsid` is required), while
    /// stdin is `/dev/null` and stdout and stderr stay the runner's pipes: the caller's
    /// terminal is present but not the command's output. `escape.terminal_has` reads what
    /// reached it.
    #[serde(default)]
    pub terminal: bool,
    /// A refusal of `stockade run` (exit 125) whose output contains this code contains the
    /// attack (e.g. `E_UNTRUSTED_CONFIG`).
    #[serde(default)]
    pub refusal: Option<String>,
    /// A refusal whose output contains this code means the protection cannot be set up on
    /// this machine (e.g. a CPU limit without a cgroup): not applicable.
    #[serde(default)]
    pub unavailable: Option<String>,
    /// When the control does not escape for an unprivileged caller, the host kernel refuses
    /// the attack to that user already (e.g. unprivileged bpf): not applicable, with this
    /// reason. A root caller's control must always escape.
    #[serde(default)]
    pub refused_unprivileged: Option<String>,
    /// Backends the case does not apply to, each with why (`gvisor = "..."`): the attack
    /// reaches something that backend does not have (a host kernel feature the Sentry
    /// implements on its own, inside the sandbox).
    #[serde(default)]
    pub not_under: BTreeMap<String, String>,
    /// When the control does not escape for any caller, the host kernel lacks the feature
    /// (e.g. 32-bit entry points compiled out): not applicable, with this reason.
    #[serde(default)]
    pub host_may_refuse: Option<String>,
    /// Seconds each run may take (default 30).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Milliseconds to wait after a run before looking at the host (late writes of daemons).
    #[serde(default)]
    pub settle_ms: Option<u64>,
    /// What the attack achieves when nothing contains it.
    pub escape: Escape,
}

/// Escape signals: the control must show every one, the attack none.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Escape {
    /// Each string appears in the snippet's output (stdout or stderr).
    #[serde(default)]
    pub output_has: Vec<String>,
    /// The snippet's exit status is this (usually 0: the attack's command succeeded).
    #[serde(default)]
    pub rc: Option<i32>,
    /// Each path (relative to the fixture root: `home/.bashrc`, `workspace/.git/hooks/x`; or
    /// absolute, below `{{HOST_TMP}}`) was
    /// created, removed or changed.
    #[serde(default)]
    pub host_changed: Vec<String>,
    /// Each named loopback listener was reached (a connection or a datagram).
    #[serde(default)]
    pub listener_hit: Vec<String>,
    /// Each string arrived at one of the loopback listeners.
    #[serde(default)]
    pub listener_saw: Vec<String>,
    /// The host process `{{HOST_PID}}` was killed.
    #[serde(default)]
    pub host_process_killed: bool,
    /// More than this many bytes of output arrived (stdout and stderr together).
    #[serde(default)]
    pub output_over: Option<u64>,
    /// Each string reached the caller's terminal (a case with `terminal = true`).
    #[serde(default)]
    pub terminal_has: Vec<String>,
}

impl Escape {
    fn count(&self) -> usize {
        self.output_has.len()
            + usize::from(self.rc.is_some())
            + self.host_changed.len()
            + self.listener_hit.len()
            + self.listener_saw.len()
            + usize::from(self.host_process_killed)
            + usize::from(self.output_over.is_some())
            + self.terminal_has.len()
    }
}

impl Case {
    /// The control snippet.
    pub fn control_script(&self) -> &str {
        self.control.as_deref().unwrap_or(&self.script)
    }

    /// Every text of the case the runner substitutes placeholders in.
    fn texts(&self) -> Vec<&str> {
        let mut t: Vec<&str> = vec![self.script.as_str()];
        t.extend(self.control.as_deref());
        t.extend(self.setup.as_deref());
        t.extend(self.redirect.as_deref());
        t.extend(self.args.iter().map(String::as_str));
        t.extend(self.workspace.as_deref());
        t.extend(self.env.values().map(String::as_str));
        t.extend(self.escape.output_has.iter().map(String::as_str));
        t.extend(self.escape.host_changed.iter().map(String::as_str));
        t.extend(self.escape.listener_saw.iter().map(String::as_str));
        t.extend(self.escape.terminal_has.iter().map(String::as_str));
        t
    }

    /// Placeholders (`{{NAME}}`) used anywhere in the case.
    pub fn placeholders(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for text in self.texts() {
            let mut rest = text;
            while let Some(start) = rest.find("{{") {
                let after = &rest[start + 2..];
                let Some(end) = after.find("}}") else {
                    break;
                };
                out.insert(after[..end].to_string());
                rest = &after[end + 2..];
            }
        }
        out
    }

    fn validate(&self) -> Result<(), String> {
        let prefix = format!("{}.", self.category);
        let name = self.id.strip_prefix(&prefix).unwrap_or("");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(format!(
                "the id must be `{prefix}<name>` with a name of a-z, 0-9 and `-`"
            ));
        }
        if self.title.trim().is_empty() || self.why.trim().is_empty() {
            return Err("`title` and `why` must not be empty".into());
        }
        if self.escape.count() == 0 {
            return Err("`escape` names no signal: the case could never fail".into());
        }
        if !self.escape.terminal_has.is_empty() && !self.terminal {
            return Err("`escape.terminal_has` needs `terminal = true`".into());
        }
        if self.terminal && !self.requires.iter().any(|r| r == "tool:setsid") {
            return Err("`terminal = true` needs `requires = [\"tool:setsid\"]`".into());
        }
        for p in self.placeholders() {
            if !PLACEHOLDERS.contains(&p.as_str()) {
                return Err(format!("unknown placeholder {{{{{p}}}}}"));
            }
        }
        for l in &self.escape.listener_hit {
            if !LISTENERS.contains(&l.as_str()) {
                return Err(format!("unknown listener {l:?} (known: {LISTENERS:?})"));
            }
        }
        for r in &self.requires {
            let known = matches!(r.as_str(), "root" | "unprivileged" | "ipv6")
                || r.strip_prefix("tool:").is_some_and(|t| !t.is_empty())
                || r.strip_prefix("path:").is_some_and(|p| p.starts_with('/'));
            if !known {
                return Err(format!("unknown requirement {r:?}"));
            }
        }
        // A signal printed by the snippet must not be text the snippet (or the command line
        // of the run) contains: an error message that echoes the command would fake it.
        for needle in &self.escape.output_has {
            let bare = needle.replace("{{MARKER}}", "");
            for text in [self.script.as_str(), self.control_script()]
                .into_iter()
                .chain(self.args.iter().map(String::as_str))
            {
                if !bare.is_empty() && text.contains(needle.as_str()) {
                    return Err(format!(
                        "the signal {needle:?} is text of the script or its flags; print it \
                         with `escaped NAME` (→ {ESCAPED_PREFIX}NAME) or take it from a file"
                    ));
                }
            }
        }
        if self.raw && self.escape.rc.is_some() {
            return Err("a raw case has no snippet status: `escape.rc` cannot be used".into());
        }
        Ok(())
    }
}

/// The whole embedded corpus, validated.
pub fn load() -> Result<Vec<Case>, CorpusError> {
    let mut cases = Vec::new();
    let mut ids = BTreeSet::new();
    for (file, text) in FILES {
        let parsed: CorpusFile =
            toml::from_str(text).map_err(|cause| CorpusError::Parse { file, cause })?;
        if parsed.version != CORPUS_VERSION {
            return Err(CorpusError::Version {
                file,
                found: parsed.version,
            });
        }
        for mut case in parsed.cases {
            case.category = parsed.category.clone();
            case.validate().map_err(|reason| CorpusError::Invalid {
                id: case.id.clone(),
                reason,
            })?;
            if !ids.insert(case.id.clone()) {
                return Err(CorpusError::Invalid {
                    id: case.id.clone(),
                    reason: "duplicate id".into(),
                });
            }
            cases.push(case);
        }
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]
    use super::*;

    #[test]
    fn corpus_loads_and_is_large_enough() {
        let cases = load().unwrap();
        assert!(cases.len() >= 170, "only {} cases", cases.len());
        let categories: BTreeSet<&str> = cases.iter().map(|c| c.category.as_str()).collect();
        for c in [
            "secrets",
            "indirection",
            "persistence",
            "proc-sys",
            "privilege",
            "kernel",
            "ipc",
            "network",
            "ssrf",
            "resources",
            "env",
            "terminal",
            "config-trust",
            "command-layer",
            "privileged-side",
        ] {
            let n = cases.iter().filter(|k| k.category == c).count();
            assert!(n >= 3, "category {c} has only {n} cases");
            assert!(categories.contains(c));
        }
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let text = "version = 1\ncategory = \"x\"\n[[case]]\nid = \"x.a\"\ntitle = \"t\"\nwhy = \"w\"\nscript = \"true\"\nbogus = 1\n[case.escape]\nrc = 0\n";
        assert!(toml::from_str::<CorpusFile>(text).is_err());
    }

    #[test]
    fn a_signal_inside_the_script_is_rejected() {
        let mut case: Case = toml::from_str(
            "id = \"x.a\"\ntitle = \"t\"\nwhy = \"w\"\nscript = \"echo ESCAPED:x\"\n[escape]\noutput_has = [\"ESCAPED:x\"]\n",
        )
        .unwrap();
        case.category = "x".into();
        assert!(case.validate().unwrap_err().contains("text of the script"));
        case.script = "escaped x".into();
        case.validate().unwrap();
        case.escape = Escape::default();
        assert!(case.validate().unwrap_err().contains("no signal"));
    }
}
