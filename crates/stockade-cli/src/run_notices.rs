//! What `stockade run` says on stderr once the run has ended: the program that could not be
//! executed, the violations, the blocked destinations, the time limit, the limits reached, the
//! layers skipped and where the command started. Every line that carries a code is a
//! [`sandbox::Notice`], so each comes with its `hint:` (the flag or policy line that would
//! change the outcome).

use sandbox::{Code, Notice};
use stockade::{RunRequest, RunResult};

use crate::output::errln;

/// Before a review run of a caller who is not root: the files its view cannot modify.
pub fn before_review(policy: &policy::Policy, request: &RunRequest) {
    const SHOWN: usize = 5;
    let Some((count, examples)) = stockade::not_copyable(policy, request, SHOWN) else {
        return;
    };
    errln!(
        "stockade: note: {count} file{} in the workspace belong{} to another user or group; in review mode the command cannot modify {} (\"Value too large for defined data type\"): a user namespace maps only your own ids",
        if count == 1 { "" } else { "s" },
        if count == 1 { "s" } else { "" },
        if count == 1 { "it" } else { "them" },
    );
    for p in &examples {
        errln!("  {}", crate::output::shown(&p.display().to_string()));
    }
    if count > examples.len() {
        errln!("  ... and {} more", count - examples.len());
    }
    errln!("  hint: give them your group and user (chown), run stockade as root, or run without --review");
}

/// What would allow `violations`, each answer once (most share the general one; a rule no
/// policy line lifts, such as set-ID bits, has its own).
fn violation_hints(violations: &[sandbox::Violation]) {
    let mut said: Vec<&str> = Vec::new();
    for v in violations {
        let hint = v.allow.unwrap_or(Code::SandboxViolation.hint());
        if !said.contains(&hint) {
            errln!("  hint: {hint}");
            said.push(hint);
        }
    }
}

/// One line a violation: its code, kind, path and action.
fn violation(v: &sandbox::Violation) {
    errln!(
        "stockade: violation[{}]: {} {}: {}",
        v.code,
        v.kind.replace('_', " "),
        // Names the sandbox chose: on one line, so none can forge a line of stockade's.
        crate::output::shown_line(&v.path.display().to_string()),
        crate::output::shown_line(&v.action)
    );
}

/// The sweeps of earlier runs on the workspace whose supervisor was killed, completed before
/// this run: what they took out, as a run's own violations are shown.
fn recovered(result: &RunResult) {
    for r in result.recovered.iter().filter(|r| !r.not_swept.is_empty()) {
        errln!(
            "stockade: the run {} on this workspace ended without its sweep; it was completed only where this run may write, not in: {}",
            r.run_id,
            (r.not_swept.iter())
                .map(|p| crate::output::shown_line(&p.display().to_string()).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        );
        errln!("  hint: look through those for what that run may have left (git hooks, .envrc, start-up files, links)");
    }
    for r in result.recovered.iter().filter(|r| !r.violations.is_empty()) {
        errln!(
            "stockade: the run {} on this workspace ended without its sweep (its supervisor was killed, or failed before it); completed before this run:",
            r.run_id
        );
        r.violations.iter().for_each(violation);
        violation_hints(&r.violations);
    }
}

/// A review or ephemeral run whose change set could not be read and sealed: said as the error
/// it is, with the command's exit code (which the record and the audit log keep too).
fn review_failed(result: &RunResult, json: bool) {
    let Some(f) = &result.review_error else {
        return;
    };
    let message = format!(
        "the command ended (exit code {}) but its {} run's change set {} could not be read and sealed: {}",
        result.exit_code, f.mode, result.run_id, f.message
    );
    if json {
        errln!(
            "{}",
            serde_json::json!({"error": {
                "code": f.code,
                "kind": f.kind,
                "message": message,
                "exit_code": result.exit_code,
            }})
        );
    } else {
        errln!(
            "stockade: error[{}]: {}",
            f.code,
            crate::output::shown(&message)
        );
        errln!(
            "  hint: the change set stays in the store as not finished (stockade runs); stockade discard {} removes it",
            result.run_id
        );
    }
}

/// What a review or ephemeral run changed, and what to do next.
fn review(result: &RunResult) {
    let Some(r) = &result.review else {
        return;
    };
    let total = r.added + r.modified + r.deleted + r.replaced_dirs + r.mode_changes;
    let counts = format!(
        "{total} change{} ({} added, {} modified, {} deleted{}{}{})",
        if total == 1 { "" } else { "s" },
        r.added,
        r.modified,
        r.deleted,
        if r.replaced_dirs > 0 {
            format!(", {} directories replaced", r.replaced_dirs)
        } else {
            String::new()
        },
        if r.mode_changes > 0 {
            format!(", {} mode changes", r.mode_changes)
        } else {
            String::new()
        },
        if r.flagged > 0 {
            format!(", {} flagged", r.flagged)
        } else {
            String::new()
        },
    );
    if total == 0 && r.mode == "review" {
        errln!(
            "stockade: review run {}: no changes; the workspace is unchanged",
            r.run_id
        );
    } else if r.discarded {
        errln!("stockade: ephemeral run: {counts} thrown away; the workspace is unchanged");
    } else {
        errln!(
            "stockade: review run {}: {counts} wait in {}; the workspace is unchanged",
            r.run_id,
            crate::output::shown(&r.dir.display().to_string())
        );
        errln!(
            "  next: stockade changes {0} · stockade diff {0} · stockade apply {0} · stockade discard {0}",
            r.run_id
        );
        // Change sets do not pile up unseen: from many on, how many wait and how to clear.
        crate::review_command::note_waiting_after_run(&r.run_id);
    }
}

/// Prints the notices of `result` (`json`: the exec error as one JSON object, as
/// `--json` prints stockade's own errors). `policy` is the run's (its time limit, its grants).
pub fn print(result: &RunResult, request: &RunRequest, policy: &policy::Policy, json: bool) {
    let timeout = policy.limits.timeout;
    recovered(result);
    if let Some(errno) = result.outcome.exec_errno {
        exec_error(result, request, policy, errno, json);
    }
    review(result);
    review_failed(result, json);
    result.violations.iter().for_each(violation);
    violation_hints(&result.violations);
    network(result);
    if result.outcome.timed_out {
        let message = format!(
            "the run exceeded its time limit ({} s) and was ended; every process in it was killed",
            timeout.unwrap_or(0)
        );
        errln!("{}", Notice::new("error", Code::Timeout, &message));
    }
    if result.outcome.ended_by == Some("interrupt") {
        errln!(
            "stockade: interrupted: the signal was passed to the command; whatever was left of the run was ended"
        );
    }
    if let Some(o) = &result.outcome.output {
        for (name, r) in [
            ("stdout", &o.sanitized_stdout),
            ("stderr", &o.sanitized_stderr),
        ] {
            if let Some(r) = r.as_ref().filter(|r| !r.is_clean()) {
                crate::report_sanitized(&format!("sanitized {name}"), r);
            }
        }
    }
    for h in &result.outcome.limit_hits {
        let message = format!("{} ({}): {}", h.limit, h.mechanism, h.detail);
        let hint = h.hint();
        let code = h.code;
        errln!(
            "{}",
            Notice::new("limit", code, &message).with_hint(Some(&hint))
        );
    }
    for s in &result.outcome.skipped {
        errln!("stockade: warning: degraded run, skipped {s}");
    }
    if let Some(f) = &result.cwd_fallback {
        errln!(
            "stockade: note: the command ran in the workspace {}, not in the current directory {}: {}",
            request.invocation.workspace.display(),
            f.cwd.display(),
            f.reason
        );
    }
}

/// The program could not be executed (127: not found, 126: not executable).
fn exec_error(
    result: &RunResult,
    request: &RunRequest,
    policy: &policy::Policy,
    errno: i32,
    json: bool,
) {
    let program = request.invocation.argv.first().cloned().unwrap_or_default();
    let (code, what) = if result.exit_code == 127 {
        (Code::CommandNotFound, "not found")
    } else {
        (Code::CommandNotExecutable, "cannot be executed")
    };
    let cause = std::io::Error::from_raw_os_error(errno);
    // A program the host has below its /tmp, where the run has a /tmp of its own.
    let private_tmp = (code == Code::CommandNotFound && errno == libc::ENOENT)
        .then(|| below_private_tmp(&program, request, policy))
        .flatten();
    let (why, hint) = match &private_tmp {
        // `/tmp` itself cannot be granted (the run's own would be the host's).
        Some(dir) if dir == std::path::Path::new("/tmp") => (
            "; the sandbox's /tmp is private: the host's /tmp is not in it".to_owned(),
            "put the program in a directory of its own (`/tmp/DIR`) and grant that with `--allow-read /tmp/DIR`, or run it from the workspace".to_owned(),
        ),
        Some(dir) => {
            let dir = dir.display().to_string();
            let why = format!(
                "; the sandbox's /tmp is private: the host's {} is not in it",
                crate::output::shown_line(&dir)
            );
            // The directory goes into a shell line and a TOML line only as it is: a name
            // that would need quoting in either (another user may have chosen it) gets the
            // grant's shape instead.
            let plain = dir
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-+@%,:=".contains(&b));
            let hint = if plain {
                format!(
                    "`--allow-read {dir}` shows it read-only at the same path (`allow_read = [\"{dir}\"]` under [filesystem] in the policy file), or run from there (`cd {dir}`: the workspace is in the sandbox)"
                )
            } else {
                "`--allow-read DIR` (that directory, quoted for the shell) shows it read-only at the same path (`allow_read = [\"DIR\"]` under [filesystem] in the policy file), or run from there (the workspace is in the sandbox)".to_owned()
            };
            (why, hint)
        }
        None => (String::new(), code.hint().to_owned()),
    };
    if json {
        errln!(
            "{}",
            serde_json::json!({"error": {
                "code": code.as_str(),
                "kind": "exec",
                "message": format!("{program}: {what}: {cause}{why}"),
                "hint": hint,
            }})
        );
    } else {
        let message = format!("{program}: {what} inside the sandbox: {cause}{why}");
        errln!(
            "{}",
            Notice::new("error", code, &message).with_hint(Some(&hint))
        );
    }
}

/// The host's directory below `/tmp` that holds `program` (named by a path), when neither the
/// workspace nor a grant of `policy` is there: the run's `/tmp` is private and shows of the
/// host's only those, so the program is not found inside.
fn below_private_tmp(
    program: &str,
    request: &RunRequest,
    policy: &policy::Policy,
) -> Option<std::path::PathBuf> {
    use std::path::Path;
    if !program.contains('/') {
        return None;
    }
    let host = std::fs::canonicalize(request.invocation.cwd.join(program)).ok()?;
    if !host.starts_with("/tmp") {
        return None;
    }
    let covered =
        |root: &Path| std::fs::canonicalize(root).is_ok_and(|root| host.starts_with(root));
    let fs = &policy.filesystem;
    let granted = fs
        .allow_read
        .iter()
        .chain(&fs.allow_write)
        .filter(|g| g.starts_with('/'))
        .any(|g| covered(Path::new(g)));
    if granted || covered(&request.invocation.workspace) {
        return None;
    }
    host.parent().map(Path::to_path_buf)
}

/// Blocked destinations, once each, with the reason and what would allow them.
fn network(result: &RunResult) {
    let mut seen: Vec<(&str, u16, &str)> = Vec::new();
    for e in result
        .network
        .iter()
        .filter(|e| e.code == stockade::NETWORK_DENIED)
    {
        let key = (e.host.as_str(), e.port, e.rule.as_str());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        errln!("{}", network_notice(e));
    }
}

/// A refused destination, as `stockade run` and `stockade proxy` print it: the reason, and
/// what would allow it (the event's own hint, else the code's).
pub fn network_notice(e: &stockade::NetworkEvent) -> String {
    let message = format!(
        "{}:{} ({}): {}",
        e.host,
        e.port,
        e.protocol,
        e.reason.as_deref().unwrap_or(&e.rule)
    );
    Notice::new("network", Code::NetworkDenied, &message)
        .with_hint(e.hint.as_deref())
        .to_string()
}
