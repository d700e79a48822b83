//! `stockade why TARGET`: what the policy does to a path or a destination, and why. Computed
//! from the same plan a run would get ([`crate::plan`]: the workspace scan, the masks, the
//! writable roots, the creation guard's patterns) and the same network rules the proxy
//! asks ([`policy::NetRules`]), so that the answer cannot drift from enforcement. Each
//! verdict names the rule that decided (with where it came from: profile, preset, policy
//! file and line, flag), who enforces it and whether stockade sees a refusal (the kernel
//! refuses reads of masked files and writes to read-only mounts without stockade knowing),
//! and what would allow it.

mod host;
mod path;
mod rule;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use host::explain as explain_host;
pub use path::{explain as explain_path, resolve_target, PathFacts};
pub use rule::{protected_rule, RuleFinder};

use crate::{Error, RunRequest};

/// The rule that decided a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// What decided, for a person: ``~/.ssh` in filesystem.deny_read`.
    pub text: String,
    /// The policy entry that decided (as the resolved policy holds it), if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// The list or setting of the policy: `filesystem.deny_read`, `network.mode`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<&'static str>,
    /// Where it came from: `profile`, `preset NAME`, `policy file`, `flag`, `credential`,
    /// `built-in` (stockade's own rules, in no list).
    pub origin: String,
    /// The policy file, when the entry came from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// The entry's line in the policy file (TOML files only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

impl Rule {
    /// A rule of stockade's own, in no list of the policy.
    pub fn built_in(text: impl Into<String>) -> Rule {
        Rule {
            text: text.into(),
            entry: None,
            key: None,
            origin: "built-in".into(),
            file: None,
            line: None,
        }
    }

    /// `text [origin, FILE line N]`, as one line.
    pub fn described(&self) -> String {
        let mut from = self.origin.clone();
        if let Some(file) = &self.file {
            from.push_str(&format!(" {}", file.display()));
            if let Some(line) = self.line {
                from.push_str(&format!(" line {line}"));
            }
        }
        format!("{} [{from}]", self.text)
    }
}

/// Who enforces a verdict, and whether stockade sees a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Enforcement {
    /// The mechanism: `kernel: ...` or `stockade: ...`.
    pub by: &'static str,
    /// Whether a refusal is reported (a violation, a network refusal); `false`: the kernel
    /// refuses it and the command only sees the error.
    pub observed: bool,
    /// What the command sees when refused (`EACCES`, `EROFS`, `EPERM`, an empty file, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sees: Option<&'static str>,
}

impl Enforcement {
    /// What `stockade why` says about it: observed or not.
    pub fn described(&self) -> String {
        let sees = self.sees.unwrap_or("an error");
        if self.observed {
            format!(
                "{}; observed: the command sees {sees} and stockade reports it",
                self.by
            )
        } else {
            format!(
                "{}; not observed by stockade: the command sees {sees}, no violation is reported",
                self.by
            )
        }
    }
}

/// One access (read, write, connect) and what the policy does to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Whether a run under this policy can do it.
    pub allowed: bool,
    /// Stable name of the case: `readable`, `masked`, `read_empty`, `not_granted`,
    /// `private`, `writable`, `read_only`, `protected`, `creation_refused`, `allowed`,
    /// `denied`.
    pub state: &'static str,
    /// The rule that decided.
    pub rule: Rule,
    /// Who enforces it, and whether stockade sees a refusal.
    pub enforcement: Enforcement,
    /// The flag or policy line that would allow it (`None`: allowed already, or nothing can).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow: Option<String>,
}

/// What the policy does to a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathAnswer {
    /// The target as given.
    pub target: String,
    /// The path as the sandbox resolves it (relative to the workspace, links resolved).
    pub path: PathBuf,
    /// Whether it exists on the host now.
    pub exists: bool,
    /// Reading it.
    pub read: Verdict,
    /// Writing it (or creating it).
    pub write: Verdict,
}

/// What the policy does to a destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostAnswer {
    /// The target as given.
    pub target: String,
    /// The host as the proxy reads it (lower case, no trailing dot).
    pub host: String,
    /// The port (443 when none was given).
    pub port: u16,
    /// The network mode: `none`, `proxy` or `host`.
    pub mode: &'static str,
    /// Connecting to it.
    pub connect: Verdict,
    /// Notes: the address class of an IP literal, the SSRF check on names, a credential
    /// route to this host.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The answer of `stockade why`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// A path.
    Path(PathAnswer),
    /// A destination.
    Host(HostAnswer),
}

/// Whether `target` names a path (it has a `/`, starts with `.` or `~`, or exists in the
/// workspace) rather than a destination (`HOST[:PORT]`).
pub fn is_path(target: &str, workspace: &Path) -> bool {
    target.contains('/')
        || target.starts_with('.')
        || target.starts_with('~')
        || std::fs::symlink_metadata(workspace.join(target)).is_ok()
}

/// What the policy does to `target` (a path or `HOST[:PORT]`), as `stockade why` answers:
/// `origins` are the inputs the policy was resolved from, `file` the policy file's path.
pub fn why(
    policy: &policy::Policy,
    request: &RunRequest,
    origins: &policy::origin::Origins<'_>,
    file: Option<&Path>,
    target: &str,
) -> Result<Answer, Error> {
    let finder = RuleFinder::new(origins, file);
    let invocation = &request.invocation;
    if !is_path(target, &invocation.workspace) {
        return Ok(Answer::Host(explain_host(policy, &finder, target)?));
    }
    let plan = crate::plan(policy, request)?;
    let path = resolve_target(target, &invocation.workspace, &invocation.home);
    let ctx = policy::PathContext {
        home: invocation.home.clone(),
        workspace: invocation.workspace.clone(),
        writable_roots: plan.writable_roots.clone(),
    };
    let facts = PathFacts {
        policy,
        plan: &plan,
        ctx: &ctx,
    };
    Ok(Answer::Path(explain_path(&facts, &finder, target, path)))
}

/// The rule and the allowing flag for a path the run was refused to create or change (a
/// violation), by the protected-path entry that covers it; `None` when no entry does.
pub fn violation_rule(
    policy: &policy::Policy,
    request: &RunRequest,
    origins: &policy::origin::Origins<'_>,
    file: Option<&Path>,
    path: &Path,
) -> Option<(Rule, Option<String>)> {
    let invocation = &request.invocation;
    let roots =
        workspace::writable_roots(policy, &invocation.place(), &workspace::RealHost).ok()?;
    let ctx = policy::PathContext {
        home: invocation.home.clone(),
        workspace: invocation.workspace.clone(),
        writable_roots: roots,
    };
    let finder = RuleFinder::new(origins, file);
    protected_rule(policy, &finder, &ctx, path)
}
