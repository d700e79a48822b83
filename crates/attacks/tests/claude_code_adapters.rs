//! Claude Code on the host, each of its Bash commands in the sandbox (issue 18, items 3a and
//! 3b): through `CLAUDE_CODE_SHELL_PREFIX` (a script running `stockade shell-prefix
//! --workspace WS`) and through a PreToolUse hook (`stockade hook claude-code`). The real
//! Claude Code CLI runs against a local test double of the Messages API that scripts three
//! Bash calls:
//!
//! 1. `mkdir -p sub && cd sub`, then an attempt to read the fixture's SSH key;
//! 2. `pwd` (Claude Code's tracking of `cd`: it starts the next command in `sub`), `rg` (the
//!    snapshot's shim, which needs `CLAUDE_CODE_EXECPATH`), a file written there;
//! 3. a hook planted in `~/.claude/settings.json`.
//!
//! Through the prefix the key stays unreadable, `cd` is tracked, `rg` works, the file lands in
//! `WS/sub`, and the plant fails; exit codes and output reach the model. Through the hook the
//! key and the plant are refused alike; a `cd` inside a command does not carry to the next
//! (the hook's command ends in the sandbox, Claude Code's tracking runs outside), nor do the
//! snapshot's functions. The control runs the same session with neither: the key is read and
//! the plant is written.

use std::sync::Arc;
use std::time::Duration;

use attacks::messages::{claude, reply, reply_as};
use attacks::upstream::{Seen, Upstream};
use attacks::*;
use serde_json::{json, Value};

const CALLS: [&str; 3] = [
    "mkdir -p sub && cd sub && echo moved-into-sub && cat ~/.ssh/id_rsa; echo read-key-exit=$?",
    "echo now-in=$(pwd); rg --version | head -1; echo written > from-claude.txt; echo exit-check; (exit 7)",
    "echo '{\"hooks\":{}}' > ~/.claude/settings.json; echo plant-exit=$?",
];

fn script() -> attacks::upstream::Script {
    Arc::new(move |seen: &Seen| {
        let body = String::from_utf8_lossy(&seen.body);
        let stream = body.contains("\"stream\":true");
        if !body.contains("PREFIX-NOW") {
            return reply(stream, None, "ok");
        }
        match body.matches("\"tool_result\"").count() {
            n @ 0..=2 => reply_as(stream, Some(CALLS[n]), "", &format!("toolu_0{n}")),
            _ => reply(stream, None, "ALL-DONE"),
        }
    })
}

/// Claude Code on the host (`prefix`: its CLAUDE_CODE_SHELL_PREFIX, if any; its settings
/// already in `~/.claude`), with the double as its model.
fn session(fx: &Fixture, up: &Upstream, prefix: Option<String>) -> (Run, String) {
    let state = fx.home.join(".claude");
    if !state.exists() {
        mkdir(&state);
    }
    let mut cmd = Cmd::new(claude(), &fx.ws)
        .env("HOME", &fx.home)
        .env("ANTHROPIC_API_KEY", "sk-ant-api03-test")
        .env("ANTHROPIC_BASE_URL", up.url())
        .env("NODE_EXTRA_CA_CERTS", &up.ca_file)
        .env("CLAUDE_CONFIG_DIR", &state)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .args(["-p", "PREFIX-NOW please", "--allowedTools", "Bash"])
        .timeout(Duration::from_secs(180));
    if let Some(p) = prefix {
        cmd = cmd.env("CLAUDE_CODE_SHELL_PREFIX", p);
    }
    let run = cmd.run();
    let results: Vec<String> = up
        .seen()
        .iter()
        .map(|s| String::from_utf8_lossy(&s.body).replace("\\n", "\n"))
        .filter(|b| b.contains("tool_result"))
        .collect();
    (run, results.last().cloned().unwrap_or_default())
}

#[test]
fn claude_code_through_the_shell_prefix() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    user_backend(&fx);
    let up = Upstream::start_with(Some(script()));
    // Claude Code runs the prefix as one program: a script gives it stockade's options.
    let prefix = fx.script(
        "claude-prefix.sh",
        &format!(
            "#!/bin/sh\nexec {} shell-prefix --workspace {} \"$@\"\n",
            sh_quote(stockade_bin()),
            sh_quote(&fx.ws)
        ),
    );
    let (run, results) = session(&fx, &up, Some(prefix.display().to_string()));
    run.assert_success().assert_stdout_contains("ALL-DONE");
    let key = fx.marker("ssh");
    assert!(!results.contains(&key), "the key was read: {results}");
    assert!(results.contains("moved-into-sub"), "{results}");
    let sub = fx.ws.join("sub");
    assert!(
        results.contains(&format!("now-in={}", sub.display())),
        "cd was not tracked: {results}"
    );
    assert!(results.contains("ripgrep"), "rg did not run: {results}");
    // Output and exit codes reach the model as the command left them.
    assert!(results.contains("Exit code 7\nnow-in="), "{results}");
    assert_eq!(
        read_text(&sub.join("from-claude.txt")).as_deref(),
        Some("written\n")
    );
    assert!(
        !results.contains("plant-exit=0"),
        "the plant was written: {results}"
    );
    assert!(!fx.home.join(".claude/settings.json").exists());
}

#[test]
fn control_without_the_prefix_the_same_session_reads_the_key_and_plants() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let up = Upstream::start_with(Some(script()));
    let (run, results) = session(&fx, &up, None);
    run.assert_success();
    let all: String = up
        .seen()
        .iter()
        .map(|s| String::from_utf8_lossy(&s.body).into_owned())
        .collect();
    assert!(
        all.contains(&fx.marker("ssh")),
        "control: the key was not read: {all}"
    );
    assert!(results.contains("plant-exit=0"), "{results}");
    assert!(fx.home.join(".claude/settings.json").exists());
}

#[test]
fn claude_code_through_the_pre_tool_use_hook() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    user_backend(&fx);
    let up = Upstream::start_with(Some(script()));
    let state = fx.home.join(".claude");
    mkdir(&state);
    let settings = serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": format!("{} hook claude-code", sh_quote(stockade_bin()))}
    ]}]}})
    .to_string();
    write_file(&state.join("settings.json"), &settings, 0o644);
    let (run, results) = session(&fx, &up, None);
    run.assert_success().assert_stdout_contains("ALL-DONE");
    assert!(
        !results.contains(&fx.marker("ssh")),
        "the key was read: {results}"
    );
    assert!(results.contains("moved-into-sub"), "{results}");
    assert!(
        results.contains(&format!("now-in={}\n", fx.ws.display())),
        "{results}"
    );
    assert!(results.contains("Exit code 7\n"), "{results}");
    assert_eq!(
        read_text(&fx.ws.join("from-claude.txt")).as_deref(),
        Some("written\n")
    );
    assert!(
        !results.contains("plant-exit=0"),
        "the plant was written: {results}"
    );
    assert_eq!(read_text(&state.join("settings.json")), Some(settings));
}

/// `stockade shell-prefix --workspace WS STRING` as Claude Code runs it, `tmp` its temporary
/// directory (`TMPDIR`): the command touches `WS/ran`, then writes its directory to
/// `target` as Claude Code's string ends.
fn prefix_writing(fx: &Fixture, tmp: &std::path::Path, target: &str) -> Run {
    let string = format!(
        "touch {} && pwd -P >| {target}",
        sh_quote(fx.ws.join("ran"))
    );
    fx.stockade([
        "shell-prefix",
        "--workspace",
        &fx.ws.display().to_string(),
        &string,
    ])
    .env("TMPDIR", tmp)
    .run()
}

/// Issue 30, item 6: the working-directory file is granted only where Claude Code makes it,
/// `$TMPDIR/claude-<4 hex>-cwd`, never through `..`, a link or another directory; anything
/// else refuses the run with the reason, and nothing is made writable or created. The
/// control is the real shape, which works; and a granted file is written from inside (what a
/// wrongly accepted path would have given the command).
#[test]
fn the_cwd_file_is_accepted_only_where_claude_code_makes_it() {
    let fx = Fixture::new();
    let tmp = fx.root.join("tmp");
    mkdir(&tmp);
    chmod(&tmp, 0o700);
    let bashrc = fx.home.join(".bashrc");
    let rc = read_text(&bashrc);
    let ran = fx.ws.join("ran");
    // A link named like the file, to a start-up file.
    std::os::unix::fs::symlink(&bashrc, tmp.join("claude-1a2b-cwd")).expect("symlink");
    let tmp_s = tmp.display().to_string();
    let home_s = fx.home.display().to_string();
    for (target, why) in [
        (format!("{home_s}/.bashrc/../claude-1a2b-cwd"), "elsewhere"),
        (format!("{tmp_s}/../home/claude-1a2b-cwd"), "elsewhere"),
        (format!("{home_s}/claude-1a2b-cwd"), "elsewhere"),
        ("/etc/claude-1a2b-cwd".to_string(), "elsewhere"),
        (format!("{tmp_s}/claude-1-cwd"), "not the name"),
        (format!("{tmp_s}/claude-1a2b-cwd"), "link"),
    ] {
        let run = prefix_writing(&fx, &tmp, &target);
        run.assert_code(125)
            .assert_stderr_contains("working-directory file")
            .assert_stderr_contains(why);
        assert!(!ran.exists(), "{target}: the command ran");
        assert_eq!(read_text(&bashrc), rc, "{target}: ~/.bashrc changed");
        assert!(!fx.home.join("claude-1a2b-cwd").exists(), "{target}");
        assert!(
            !std::path::Path::new("/etc/claude-1a2b-cwd").exists(),
            "{target}"
        );
    }
    // Control: the real shape in the caller's temporary directory works, and carries the
    // directory out.
    std::fs::remove_file(tmp.join("claude-1a2b-cwd")).expect("remove link");
    let real = format!("{tmp_s}/claude-c3d4-cwd");
    prefix_writing(&fx, &tmp, &real).assert_success();
    assert!(ran.exists(), "control: the command did not run");
    assert_eq!(
        read_text(&tmp.join("claude-c3d4-cwd")).as_deref(),
        Some(format!("{}\n", fx.ws.display()).as_str())
    );
    // Control: a file the run is granted is written from inside (what accepting any of the
    // places above would have given the command).
    let granted = fx.home.join("claude-1a2b-cwd");
    write_file(&granted, "", 0o600);
    let g = granted.display().to_string();
    fx.sandbox(&["--allow-write", &g], &format!("pwd -P >| {g}"))
        .run()
        .assert_success();
    assert_eq!(
        read_text(&granted).as_deref(),
        Some(format!("{}\n", fx.ws.display()).as_str())
    );
}

/// Issue 31, item 7: the README's flag-free prefix (`exec stockade shell-prefix "$@"`, no
/// `--workspace`): the calls of a session that moves into `sub`, writes at the top of the
/// project from there, then moves to `/` and writes outside.
const START_CALLS: [&str; 3] = [
    "mkdir -p sub && cd sub && echo moved-into-sub",
    "echo now-in=$(pwd); echo top > ../at-top.txt; echo top-exit=$?",
    "cd / && echo out > OUTSIDE/escaped.txt; echo outside-exit=$?",
];

fn start_script(outside: &std::path::Path) -> attacks::upstream::Script {
    let calls: Vec<String> = START_CALLS
        .iter()
        .map(|c| c.replace("OUTSIDE", &outside.display().to_string()))
        .collect();
    Arc::new(move |seen: &Seen| {
        let body = String::from_utf8_lossy(&seen.body);
        let stream = body.contains("\"stream\":true");
        if !body.contains("PREFIX-NOW") {
            return reply(stream, None, "ok");
        }
        match body.matches("\"tool_result\"").count() {
            n @ 0..=2 => reply_as(stream, Some(&calls[n]), "", &format!("toolu_0{n}")),
            _ => reply(stream, None, "ALL-DONE"),
        }
    })
}

/// `backend = "<the backend under test>"` in the fixture's user policy (nothing for native, the
/// default), and `policy show` says it is the backend.
fn user_backend(fx: &Fixture) {
    if backend() == "native" {
        return;
    }
    let dir = fx.home.join(".config/stockade");
    mkdir(&dir);
    write_file(
        &dir.join("policy.toml"),
        // Rootless Podman refuses a memory limit it cannot bound whole (attacks::backend_args).
        format!(
            "backend = \"{}\"\n{}",
            backend(),
            if attacks::rootless_podman() {
                "[limits]\nmemory = \"0\"\n"
            } else {
                ""
            }
        ),
        0o644,
    );
    fx.stockade(["policy", "show"])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("backend      {}", backend()));
}

/// Without `--workspace` the prefix takes the directory Claude Code started in (its process,
/// `CLAUDE_PID`, an ancestor of the prefix), not the directory a command moved to: after `cd
/// sub` the top of the project is still writable, and after `cd /` a write outside is still
/// refused. Control: the same prefix with `CLAUDE_PID` removed refuses every command, naming
/// `--workspace` (what every such command got before).
#[test]
fn the_prefix_without_workspace_takes_the_directory_claude_code_started_in() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let outside = fx.outside.clone();
    mkdir(&outside);
    // The recipe is flag-free: the backend under test comes from the user's policy, as a
    // user would choose one. (Claude Code gives its commands a socket as stdin, left open:
    // the gVisor backend's runs end all the same, see stdin_kinds.rs.)
    user_backend(&fx);
    let up = Upstream::start_with(Some(start_script(&outside)));
    // README "Shell prefix": `exec stockade shell-prefix "$@"`.
    let prefix = fx.script(
        "claude-prefix.sh",
        &format!(
            "#!/bin/sh\nexec {} shell-prefix \"$@\"\n",
            sh_quote(stockade_bin())
        ),
    );
    let (run, results) = session(&fx, &up, Some(prefix.display().to_string()));
    run.assert_success().assert_stdout_contains("ALL-DONE");
    // (The calls' own text is in the conversation too: markers are checked with their value.)
    let sub = fx.ws.join("sub");
    assert!(sub.is_dir(), "the first command did not run: {results}");
    assert!(
        results.contains(&format!("now-in={}", sub.display())),
        "cd was not tracked: {results}"
    );
    assert!(results.contains("top-exit=0"), "{results}");
    assert_eq!(
        read_text(&fx.ws.join("at-top.txt")).as_deref(),
        Some("top\n")
    );
    assert!(!results.contains("outside-exit=0"), "{results}");
    assert!(!outside.join("escaped.txt").exists());

    // Control: without Claude Code's word for its process, nothing runs.
    let fx2 = Fixture::new();
    mkdir(&fx2.outside);
    user_backend(&fx2);
    let up2 = Upstream::start_with(Some(start_script(&fx2.outside)));
    let prefix = fx2.script(
        "claude-prefix.sh",
        &format!(
            "#!/bin/sh\nexec env -u CLAUDE_PID {} shell-prefix \"$@\"\n",
            sh_quote(stockade_bin())
        ),
    );
    let (_, results) = session(&fx2, &up2, Some(prefix.display().to_string()));
    assert_eq!(
        results
            .matches("stockade shell-prefix needs the project's root")
            .count(),
        3,
        "{results}"
    );
    assert!(
        results.contains("--workspace /path/to/project"),
        "{results}"
    );
    assert!(!fx2.ws.join("sub").exists());
}

/// One Bash call, then the end.
fn one_call_script(call: String) -> attacks::upstream::Script {
    Arc::new(move |seen: &Seen| {
        let body = String::from_utf8_lossy(&seen.body);
        let stream = body.contains("\"stream\":true");
        if !body.contains("PREFIX-NOW") {
            return reply(stream, None, "ok");
        }
        match body.matches("\"tool_result\"").count() {
            0 => reply_as(stream, Some(&call), "", "toolu_00"),
            _ => reply(stream, None, "ALL-DONE"),
        }
    })
}

/// Review M2 (13-project-settings-env-steers-prefix.sh): a repository's own
/// `.claude/settings.json` sets `env` for Claude Code's commands, the prefix's included.
/// `CLAUDE_PROJECT_DIR=~` there is not believed over the directory Claude Code started in (the
/// commands are refused, naming it); `STOCKADE_NO_USER_POLICY=1` there does not turn the
/// user's policy off (its `deny_read` of `~/secret.txt` holds). Control: `--no-user-policy`
/// in the user's own prefix script does turn it off (the secret is read: the rule is what
/// blocked it).
#[test]
fn a_projects_settings_env_does_not_steer_the_prefix() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let call = "cat ~/secret.txt; echo x > ~/escaped.txt; echo esc=$?".to_string();
    let case = |env: Value, flags: &str| {
        let fx = Fixture::new();
        user_backend(&fx);
        let policy = fx.home.join(".config/stockade/policy.toml");
        let old = read_text(&policy).unwrap_or_default();
        write_file(
            &policy,
            format!("{old}[filesystem]\ndeny_read = [\"~/secret.txt\"]\n"),
            0o644,
        );
        write_file(&fx.home.join("secret.txt"), "TOP-SECRET-VALUE\n", 0o644);
        write_file(
            &fx.ws.join(".claude/settings.json"),
            json!({ "env": env }).to_string(),
            0o644,
        );
        let up = Upstream::start_with(Some(one_call_script(call.clone())));
        let prefix = fx.script(
            "claude-prefix.sh",
            &format!(
                "#!/bin/sh\nexec {} shell-prefix {flags}\"$@\"\n",
                sh_quote(stockade_bin())
            ),
        );
        let (_, results) = session(&fx, &up, Some(prefix.display().to_string()));
        let escaped = fx.home.join("escaped.txt").exists();
        (results, escaped)
    };
    // CLAUDE_PROJECT_DIR (`/`, wider than the project): refused, naming it.
    let (results, escaped) = case(
        json!({ "CLAUDE_PROJECT_DIR": "/", "STOCKADE_NO_USER_POLICY": "1" }),
        "",
    );
    assert!(
        results.contains("is not the directory Claude Code started in"),
        "{results}"
    );
    assert!(
        !results.contains("TOP-SECRET-VALUE") && !escaped,
        "{results}"
    );
    // STOCKADE_NO_USER_POLICY alone: the command runs, under the user's policy.
    let (results, escaped) = case(json!({ "STOCKADE_NO_USER_POLICY": "1" }), "");
    assert!(
        results.contains("esc="),
        "the command did not run: {results}"
    );
    assert!(!results.contains("TOP-SECRET-VALUE"), "{results}");
    assert!(!escaped, "{results}");
    // Control: the user's own flag.
    let (results, _) = case(json!({}), "--no-user-policy ");
    assert!(results.contains("TOP-SECRET-VALUE"), "{results}");
}
