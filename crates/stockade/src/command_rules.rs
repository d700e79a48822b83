//! `[[commands]]` at run time: which entry a run's program matches (by resolved path on the
//! host, as the caller's `PATH` finds it), and the excluded run (outside the sandbox, audited
//! and reported as such).
//!
//! Only the run's own program is matched: `PROGRAM ARGS` after `--`, or a plain command
//! string (`--shell`, `sh -c`/`bash -c` as Claude Code's hook wraps them: words only, see
//! [`policy::commands::plain_words`]). What a sandboxed shell starts inside is never matched:
//! an entry widens one top-level command, not everything it spawns.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::audit_event::AuditEvent;
use crate::record::AuditLog;
use crate::record_path::{RecordPath, Which};
use crate::{run_id, Error, RunRequest};

/// The entry a run matched, as the audit log and the report name it.
#[derive(Debug, Clone, Serialize)]
pub struct CommandMatch {
    /// Its index among the policy's `[[commands]]`.
    pub index: usize,
    /// The program as resolved on the host.
    pub program: PathBuf,
    /// The entry, as written.
    pub rule: policy::CommandRule,
    /// The words run when excluded.
    #[serde(skip)]
    pub words: Vec<String>,
}

/// `name` on `path` (a `PATH` value): the first executable regular file, canonical.
fn on_path(name: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .and_then(|p| std::fs::canonicalize(p).ok())
}

fn resolve_program(word: &str, cwd: &Path, path: Option<&OsStr>) -> Option<PathBuf> {
    if word.contains('/') {
        std::fs::canonicalize(cwd.join(word)).ok()
    } else {
        on_path(word, path)
    }
}

/// The words of the run's own command: its argv, or a plain string under `sh -c`.
fn command_words(argv: &[String]) -> Option<Vec<String>> {
    let shell = argv
        .first()
        .and_then(|p| Path::new(p).file_name()?.to_str());
    match (shell, argv.get(1).map(String::as_str), argv.get(2)) {
        (Some("sh" | "bash" | "dash"), Some("-c"), Some(s)) if argv.len() == 3 => {
            policy::commands::plain_words(s)
        }
        _ => (!argv.is_empty()).then(|| argv.to_vec()),
    }
}

/// The first `[[commands]]` entry whose program is the run's, if any. Refused when that
/// program lies in one of the run's writable roots: the sandbox could have replaced it, and
/// the entry would hand its grants (or the host itself, when excluded) to what the sandbox
/// wrote.
pub fn match_command(
    policy: &policy::Policy,
    request: &RunRequest,
) -> Result<Option<CommandMatch>, Error> {
    let Some(matched) = find(policy, request) else {
        return Ok(None);
    };
    let roots =
        workspace::writable_roots(policy, &request.invocation.place(), &workspace::RealHost)?;
    // The entry is the user's only when its file is out of the sandbox's reach (a file in a
    // writable root is refused for every run anyway; this names the reason here).
    if let Some(file) = request
        .policy_file
        .as_deref()
        .and_then(|f| std::fs::canonicalize(f).ok())
    {
        if let Some(root) = roots.iter().find(|r| file.starts_with(r)) {
            return Err(Error::Usage {
                message: format!(
                    "[[commands]] in {}, which lies in the writable root {}: the sandbox could have written the entry",
                    file.display(),
                    root.display()
                ),
                hint: "keep a policy file with [[commands]] outside every writable root (e.g. ~/.config/stockade/)".into(),
            });
        }
    }
    if let Some(root) = roots.iter().find(|r| matched.program.starts_with(r)) {
        return Err(Error::Usage {
            message: format!(
                "[[commands]] entry {} matches {}, which lies in the writable root {}: the sandbox could have replaced it",
                matched.index,
                matched.program.display(),
                root.display()
            ),
            hint: "name a program outside every writable root (installed on the host), or drop the entry".into(),
        });
    }
    Ok(Some(matched))
}

fn find(policy: &policy::Policy, request: &RunRequest) -> Option<CommandMatch> {
    if policy.commands.is_empty() {
        return None;
    }
    let inv = &request.invocation;
    let path = inv
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_os_str());
    let words = command_words(&inv.argv)?;
    let program = resolve_program(words.first()?, &inv.cwd, path)?;
    policy
        .commands
        .iter()
        .enumerate()
        .find_map(|(index, rule)| {
            let theirs = if rule.program.starts_with('/') {
                std::fs::canonicalize(&rule.program).ok()
            } else {
                on_path(&rule.program, path)
            }?;
            (theirs == program).then(|| CommandMatch {
                index,
                program: program.clone(),
                rule: rule.clone(),
                words: words.clone(),
            })
        })
}

/// Run an excluded program outside the sandbox: as the caller, with the caller's environment,
/// in the caller's directory, its streams the caller's. Audited before it starts and when it
/// ends; a report says it ran unsandboxed. Returns its exit code (128+N after signal N).
pub fn run_excluded(request: &RunRequest, matched: &CommandMatch) -> Result<i32, Error> {
    let id = run_id();
    let mut audit = AuditLog::open(request.audit.as_deref(), &id)?;
    let report = match &request.report {
        Some(path) => Some(RecordPath::locate(path, Which::Report)?),
        None => None,
    };
    audit.event(&AuditEvent::CommandRule(matched))?;
    let started = std::time::Instant::now();
    let inv = &request.invocation;
    let status = std::process::Command::new(&matched.program)
        .args(matched.words.iter().skip(1))
        .env_clear()
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&inv.cwd)
        .status()
        .map_err(|e| Error::Io {
            what: format!("run {} (excluded)", matched.program.display()),
            cause: e,
        })?;
    use std::os::unix::process::ExitStatusExt;
    let exit_code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    audit.event(&AuditEvent::RunEnd {
        exit_code,
        signal: status.signal(),
        duration_ms: started.elapsed().as_millis() as u64,
        violations: 0,
    })?;
    if let Some(report) = report {
        let record = serde_json::json!({
            "run_id": id,
            "sandboxed": false,
            "command_rule": matched,
            "argv": matched.words,
            "exit_code": exit_code,
        });
        report.replace(record.to_string().as_bytes())?;
    }
    Ok(exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_strings_under_a_shell_are_matched_by_their_words() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            command_words(&v(&["git", "push"])),
            Some(v(&["git", "push"]))
        );
        assert_eq!(
            command_words(&v(&["/bin/sh", "-c", "git push"])),
            Some(v(&["git", "push"]))
        );
        assert_eq!(
            command_words(&v(&["bash", "-c", "git push; curl x | sh"])),
            None
        );
        assert_eq!(
            command_words(&v(&["bash", "-c", "git status", "extra"])),
            Some(v(&["bash", "-c", "git status", "extra"]))
        );
        assert_eq!(command_words(&[]), None);
    }
}
