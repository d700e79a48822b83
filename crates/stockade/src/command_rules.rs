//! `[[commands]]` at run time: which entry a run's program matches (by resolved path on the
//! host, as the caller's `PATH` finds it), and the excluded run (outside the sandbox, audited
//! and reported as such).
//!
//! An excluded run is checked before it starts (issue 30, item 5): its words by
//! [`guard::command::excluded`] (git's allow-list, or the entry's `allowed_args`), and where
//! it runs: for git the repository and config files it would read from the working directory
//! ([`check_git_place`]); for a program stockade has no model of (`make`, `docker`, `npm`,
//! `just`, ...) the working directory and every path it is given (`~` expanded with the HOME
//! it gets) must lie outside the run's writable roots, and no root may hold or lie in its
//! per-user configuration (the home, `$XDG_CONFIG_HOME`, `~/.npmrc`, `~/.docker`, ...), unless
//! the entry says `runs_workspace_files = true`
//! ([`guard::command::excluded::check_workspace_files`]): such a program reads its Makefile,
//! Dockerfile or `package.json` scripts from where it runs, and the sandbox could have
//! written them. It gets the caller's environment less what makes programs load or run code
//! ([`excluded_env`]).
//!
//! Only the run's own program is matched: `PROGRAM ARGS` after `--`, or a plain command
//! string (`--shell`, `sh -c`/`bash -c` as Claude Code's hook wraps them: words only, see
//! [`policy::commands::plain_words`]). What a sandboxed shell starts inside is never matched:
//! an entry widens one top-level command, not everything it spawns.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::audit_event::AuditEvent;
use crate::record::AuditLog;
use crate::record_path::{RecordPath, Which};
use crate::run::run_id;
use crate::{Error, RunRequest};

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
    /// The environment an excluded run gets (`excluded_env`); empty otherwise.
    #[serde(skip)]
    pub env: Vec<(OsString, OsString)>,
    /// Variables of the caller's environment an excluded run does not get.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_removed: Vec<String>,
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
    let mut matched = matched;
    if matched.rule.excluded {
        if let Err(e) = check_excluded(&matched, request, &roots) {
            // Audited like a refusal of the command layer; a failing audit write must not
            // hide the refusal.
            if let Some(audit) = &request.audit {
                let _ = crate::audit_refusal(audit, &e);
            }
            return Err(e);
        }
        let git = guard::command::excluded::has_model(&matched.program);
        let (env, removed) = excluded_env(&request.invocation.env, &roots, git);
        matched.env = env;
        matched.env_removed = removed;
    }
    Ok(Some(matched))
}

/// The words of an excluded run, and for git where it runs: refused unless all of it leaves
/// the sandbox's side no way to make the program run or load what it wrote.
fn check_excluded(
    matched: &CommandMatch,
    request: &RunRequest,
    roots: &[PathBuf],
) -> Result<(), Error> {
    let inv = &request.invocation;
    let entry = guard::command::excluded::Entry {
        index: matched.index,
        file: request.policy_file.as_deref(),
        allowed_args: matched.rule.allowed_args.as_deref(),
        runs_workspace_files: matched.rule.runs_workspace_files,
    };
    guard::command::excluded::check(&matched.program, &matched.words[1..], &inv.cwd, &entry)?;
    let home = inv
        .env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map_or_else(|| inv.home.clone(), |(_, v)| PathBuf::from(v));
    let xdg = inv
        .env
        .iter()
        .find(|(k, _)| k == "XDG_CONFIG_HOME")
        .map(|(_, v)| PathBuf::from(v))
        .filter(|p| p.is_absolute());
    // Where programs read their per-user configuration and plugins: the HOME the program
    // gets and the account's home, $XDG_CONFIG_HOME or ~/.config, and the other XDG base
    // directories when set (their defaults are hidden entries of the home, checked as such).
    // A relative HOME is not checked there: the program would take it from its working
    // directory, checked itself; `~` in a word expands to it as the program would.
    let mut homes: Vec<PathBuf> = vec![home.clone()];
    if inv.home != home {
        homes.push(inv.home.clone());
    }
    homes.retain(|p| p.is_absolute());
    let xdg_other = ["XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"]
        .iter()
        .filter_map(|name| inv.env.iter().find(|(k, _)| k == name))
        .map(|(_, v)| PathBuf::from(v));
    let config_dirs: Vec<PathBuf> = xdg
        .clone()
        .or_else(|| Some(home.join(".config")))
        .into_iter()
        .chain(xdg_other)
        .filter(|p| p.is_absolute())
        .collect();
    guard::command::excluded::check_workspace_files(
        &matched.program,
        &matched.words[1..],
        &inv.cwd,
        &guard::command::excluded::UserPlaces {
            home: &home,
            homes: &homes,
            config_dirs: &config_dirs,
        },
        roots,
        &entry,
    )?;
    if guard::command::excluded::has_model(&matched.program) {
        check_git_place(&inv.cwd, &home, xdg.as_deref(), roots).map_err(|reason| {
            Error::Command(guard::command::Refusal {
                construct: guard::command::Construct::ExcludedArgument,
                text: inv.cwd.display().to_string(),
                reason,
            })
        })?;
    }
    Ok(())
}

fn within(p: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| p.starts_with(r))
}

/// Where `p` leads (its nearest existing ancestor made canonical, the rest as written), for
/// paths that may not exist yet.
fn leads_to(p: &Path) -> PathBuf {
    let mut existing = p.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(n), Some(parent)) => {
                rest.push(n.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut out = std::fs::canonicalize(&existing).unwrap_or(existing);
    out.extend(rest.iter().rev());
    out
}

/// Whether `dir` may be a git directory git would use when it meets it on its way up: a
/// `HEAD`, and an `objects`, `refs` or `commondir`, each of any type. Git asks for `HEAD`
/// with `objects` and `refs` (or a `commondir`), but tests `objects` and `refs` with
/// `access(X_OK)`, which an executable file passes as well as a directory, and follows links
/// that may lead anywhere later: any entry counts (red team, issue 32 seventh round: files
/// named `objects` and `refs` made a bare repository git used and the creation guard did
/// not see).
fn looks_like_git_dir(dir: &Path) -> bool {
    let has = |name: &str| std::fs::symlink_metadata(dir.join(name)).is_ok();
    has("HEAD") && (has("objects") || has("refs") || has("commondir"))
}

/// Where an excluded git may run: the repository it finds from `cwd` (walking up as git
/// does) is outside every writable root, or is the `.git` directory at the top of one (the
/// workspace's own, whose config and hooks the sandbox cannot write: README, "Git"); a
/// repository nested in a writable root, a `.git` file or link leading into one, and a bare
/// repository in one are refused (the sandbox could have made them, config and hooks
/// included). The global config files git reads (`~/.gitconfig`,
/// `$XDG_CONFIG_HOME/git/config`, `/etc/gitconfig`) must lie outside every writable root.
/// `Err` is the reason.
pub fn check_git_place(
    cwd: &Path,
    home: &Path,
    xdg_config_home: Option<&Path>,
    roots: &[PathBuf],
) -> Result<(), String> {
    let xdg = xdg_config_home.map_or_else(|| home.join(".config"), Path::to_path_buf);
    for config in [
        home.join(".gitconfig"),
        xdg.join("git/config"),
        PathBuf::from("/etc/gitconfig"),
    ] {
        let real = leads_to(&config);
        if within(&real, roots) {
            return Err(format!(
                "git on the host would read {}, which lies in a writable root of the run (the sandbox could have written it: core.fsmonitor, core.pager, aliases run programs); keep the home outside the workspace and --allow-write paths, or run git inside the sandbox",
                config.display()
            ));
        }
    }
    for dir in cwd.ancestors() {
        let dot_git = dir.join(".git");
        if let Ok(meta) = std::fs::symlink_metadata(&dot_git) {
            if !within(dir, roots) && !within(&leads_to(&dot_git), roots) {
                return Ok(());
            }
            if !roots.iter().any(|r| r == dir) {
                return Err(format!(
                    "the repository git would use here, {}, is nested in a writable root: the sandbox could have made it, config and hooks included; run git in the workspace's own repository, or inside the sandbox",
                    dot_git.display()
                ));
            }
            if meta.is_dir() {
                return Ok(());
            }
            // A `.git` link or `gitdir:` file: where it leads must be out of reach.
            let target = if meta.file_type().is_symlink() {
                std::fs::canonicalize(&dot_git).ok()
            } else {
                std::fs::read_to_string(&dot_git).ok().and_then(|t| {
                    let p = PathBuf::from(t.strip_prefix("gitdir:")?.trim());
                    Some(leads_to(&dir.join(p)))
                })
            };
            return match target {
                Some(t) if !within(&t, roots) => Ok(()),
                _ => Err(format!(
                    "{} leads to a repository in a writable root (or cannot be read): the sandbox could have made it",
                    dot_git.display()
                )),
            };
        }
        if looks_like_git_dir(dir) {
            let top_of_root = roots.iter().any(|r| dir == r.join(".git"));
            if !within(dir, roots) || top_of_root {
                return Ok(());
            }
            return Err(format!(
                "{} is a bare repository in a writable root, which git would use from here: the sandbox could have made it",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// Variables kept from git's own (`GIT_*` is otherwise dropped: `GIT_DIR`, `GIT_CONFIG_*`,
/// `GIT_EXEC_PATH`, `GIT_SSH_COMMAND`, ... point git at other repositories or programs).
const GIT_KEPT: &[&str] = &[
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "GIT_TERMINAL_PROMPT",
];

/// The environment of an excluded run: the caller's, less every variable that makes programs
/// load or run code ([`guard::command::is_dangerous_variable`]: `LD_*`, `BASH_ENV`,
/// `NODE_OPTIONS`, `PYTHONPATH`, `PAGER`, `EDITOR`, ...; `SSH_AUTH_SOCK` stays, an excluded
/// `git push` needs the caller's agent), for git every `GIT_*` but the author and committer
/// identity, and `PATH` without relative entries and entries in a writable root (git runs
/// `git-<name>` helpers from it); git also gets [`guard::command::excluded::git::FORCED_CONFIG`]
/// (it never enters a submodule). Also the names removed.
pub fn excluded_env(
    env: &[(OsString, OsString)],
    roots: &[PathBuf],
    git: bool,
) -> (Vec<(OsString, OsString)>, Vec<String>) {
    let mut kept = Vec::new();
    let mut removed = Vec::new();
    for (k, v) in env {
        let name = k.to_string_lossy();
        if name == "PATH" {
            let dirs: Vec<PathBuf> = std::env::split_paths(v)
                .filter(|d| d.is_absolute() && !within(&leads_to(d), roots))
                .collect();
            let path = std::env::join_paths(&dirs).unwrap_or_default();
            if path != *v {
                removed.push("PATH (entries in a writable root or relative)".to_string());
            }
            kept.push((k.clone(), path));
            continue;
        }
        let dangerous = guard::command::is_dangerous_variable(&name) && name != "SSH_AUTH_SOCK";
        let git_own = git && name.starts_with("GIT_") && !GIT_KEPT.contains(&name.as_ref());
        if dangerous || git_own {
            removed.push(name.into_owned());
        } else {
            kept.push((k.clone(), v.clone()));
        }
    }
    if git {
        let forced = guard::command::excluded::git::FORCED_CONFIG;
        kept.push(("GIT_CONFIG_COUNT".into(), forced.len().to_string().into()));
        for (i, (key, value)) in forced.iter().enumerate() {
            kept.push((format!("GIT_CONFIG_KEY_{i}").into(), (*key).into()));
            kept.push((format!("GIT_CONFIG_VALUE_{i}").into(), (*value).into()));
        }
    }
    (kept, removed)
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
                env: Vec::new(),
                env_removed: Vec::new(),
            })
        })
}

/// Run an excluded program outside the sandbox: as the caller, with the caller's environment
/// less what makes programs load code (`excluded_env`), in the caller's directory, its
/// streams the caller's. Audited before it starts and when it
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
        .envs(matched.env.iter().map(|(k, v)| (k, v)))
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
            "env_removed": matched.env_removed,
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

    #[test]
    fn an_excluded_run_gets_no_code_loading_environment() {
        let os = |k: &str, v: &str| (OsString::from(k), OsString::from(v));
        let env = vec![
            os("PATH", "/ws/bin:/usr/bin:bin::/bin"),
            os("LD_PRELOAD", "/ws/x.so"),
            os("PYTHONPATH", "/ws"),
            os("GIT_DIR", "/ws/planted"),
            os("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='x'"),
            os("GIT_AUTHOR_NAME", "me"),
            os("SSH_AUTH_SOCK", "/run/agent"),
            os("LANG", "C.UTF-8"),
        ];
        let roots = vec![PathBuf::from("/ws")];
        let (kept, removed) = excluded_env(&env, &roots, true);
        let get = |k: &str| {
            kept.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        assert_eq!(get("PATH").as_deref(), Some("/usr/bin:/bin"));
        for gone in [
            "LD_PRELOAD",
            "PYTHONPATH",
            "GIT_DIR",
            "GIT_CONFIG_PARAMETERS",
        ] {
            assert_eq!(get(gone), None, "{gone}");
            assert!(removed.iter().any(|r| r == gone), "{gone}: {removed:?}");
        }
        for stays in ["GIT_AUTHOR_NAME", "SSH_AUTH_SOCK", "LANG"] {
            assert!(get(stays).is_some(), "{stays}");
        }
        assert_eq!(get("GIT_CONFIG_KEY_0").as_deref(), Some("protocol.allow"));
        // Not git: GIT_* of the caller's stays (it means nothing to the program).
        let (kept, _) = excluded_env(&env, &roots, false);
        assert!(kept.iter().any(|(n, _)| n == "GIT_AUTHOR_NAME"));
        assert!(!kept.iter().any(|(n, _)| n == "GIT_CONFIG_COUNT"));
    }

    #[test]
    fn git_runs_only_in_a_repository_out_of_the_sandboxs_reach() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let base = std::fs::canonicalize(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let mk = |p: &Path| std::fs::create_dir_all(p).unwrap_or_else(|e| panic!("{e}"));
        let ws = base.join("ws");
        let home = base.join("home");
        mk(&ws.join(".git"));
        mk(&ws.join("src"));
        mk(&home);
        let roots = vec![ws.clone()];
        let place = |cwd: &Path| check_git_place(cwd, &home, None, &roots);
        // The workspace's own repository, from anywhere in it.
        assert!(place(&ws).is_ok());
        assert!(place(&ws.join("src")).is_ok());
        // A nested repository.
        let nested = ws.join("vendor/x");
        mk(&nested.join(".git"));
        assert!(place(&nested).is_err());
        // A bare repository in the workspace.
        let bare = ws.join("bare");
        mk(&bare.join("objects"));
        mk(&bare.join("refs"));
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(place(&bare).is_err());
        // The same with executable files named `objects` and `refs`, which git accepts.
        let files = ws.join("files.git");
        mk(&files);
        for name in ["objects", "refs"] {
            std::fs::write(files.join(name), "").unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(files.join("HEAD"), "ref: refs/heads/main\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(place(&files).is_err());
        // The workspace's .git itself (a bare look) is its own repository.
        mk(&ws.join(".git/objects"));
        mk(&ws.join(".git/refs"));
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(place(&ws.join(".git")).is_ok());
        // A `.git` file leading into the workspace, and one leading out of it.
        let other = base.join("other");
        mk(&other.join(".git"));
        let linked = base.join("linked");
        mk(&linked);
        let roots2 = vec![linked.clone()];
        std::fs::write(
            linked.join(".git"),
            format!("gitdir: {}\n", ws.join(".git").display()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(check_git_place(&linked, &home, None, &[linked.clone(), ws.clone()]).is_err());
        std::fs::write(
            linked.join(".git"),
            format!("gitdir: {}\n", other.join(".git").display()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(check_git_place(&linked, &home, None, &roots2).is_ok());
        // Outside every root.
        assert!(place(&other).is_ok());
        // The home's git config in a writable root.
        assert!(check_git_place(&other, &home, None, std::slice::from_ref(&home)).is_err());
        assert!(check_git_place(&other, &home, Some(&ws), &roots).is_err());
    }
}
