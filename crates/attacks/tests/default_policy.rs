//! A default policy (issue 31, item 6): the user's own file
//! (`$XDG_CONFIG_HOME/stockade/policy.toml`, default `~/.config/stockade/policy.toml`) and,
//! once approved with `stockade trust approve`, the workspace's `stockade.toml`, layered under
//! `--policy` and the flags, for `run`, `shell-prefix`, the runs `hook claude-code` wraps and
//! `mcp`; `policy show` names the files. Fail closed: a malformed user file refuses naming it;
//! one the run could write (it lies in a writable root) is refused; where the run could create
//! one, its directory is protected (refused during the run; under gVisor swept after it).
//! Each with its control (`--no-user-policy`, the file outside the roots, a sibling directory
//! written, the project file before approval). Root and unprivileged, native and gVisor.
//!
//! The fixture's environment is cleared and its `HOME` is the fixture's home: the real home's
//! `~/.config/stockade/policy.toml` never reaches these tests (nor the rest of the suite).

// Test helpers outside #[test] functions expect too.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use attacks::*;
use serde_json::{json, Value};

/// A user policy giving a preset, a domain and a variable the command can show.
const USER_POLICY: &str = r#"presets = ["npm"]
[env]
set = { FROM_USER_POLICY = "yes" }
[network]
allow_domains = ["user-allowed.example"]
"#;

/// What the command prints: the variable and npm's cache (the preset's is under
/// `~/.cache/stockade/npm`; the profile's own is `/tmp/.npm`).
const SHOW: &str = "echo v=${FROM_USER_POLICY:-none} c=${npm_config_cache:-none}";

fn user_policy(fx: &Fixture, text: &str) -> PathBuf {
    let path = fx.home.join(".config/stockade/policy.toml");
    write_file(&path, text, 0o644);
    path
}

#[test]
fn run_honours_the_user_policy_and_policy_show_names_it() {
    let fx = Fixture::new();
    let path = user_policy(&fx, USER_POLICY);
    let run = fx.sandbox(&[], SHOW).run();
    run.assert_success()
        .assert_stdout_contains("v=yes")
        .assert_stdout_contains("/stockade/npm");
    // Control: ignored for one command, by the flag or the variable.
    for cmd in [
        fx.sandbox(&["--no-user-policy"], SHOW),
        fx.sandbox(&[], SHOW).env("STOCKADE_NO_USER_POLICY", "1"),
    ] {
        let run = cmd.run();
        run.assert_success().assert_stdout_contains("v=none");
        assert!(!run.stdout.contains("/stockade/npm"), "{}", run.describe());
    }
    let show = fx
        .stockade(["policy", "show", "--workspace"])
        .arg(&fx.ws)
        .run();
    show.assert_success()
        .assert_stdout_contains(&format!("user policy {}", path.display()))
        .assert_stdout_contains("user-allowed.example [user policy]")
        .assert_stdout_contains("preset       npm");
    let json = fx
        .stockade(["policy", "show", "--json", "--workspace"])
        .arg(&fx.ws)
        .run();
    json.assert_success();
    let doc: Value = serde_json::from_str(&json.stdout).expect("policy show --json");
    assert_eq!(
        doc["policy_files"],
        json!([{ "kind": "user", "path": path }]),
        "{doc}"
    );
    // Flags still win: the user file is the lowest layer.
    fx.sandbox(&["--env", "FROM_USER_POLICY=flag"], SHOW)
        .run()
        .assert_success()
        .assert_stdout_contains("v=flag");
}

#[test]
fn xdg_config_home_places_the_user_policy() {
    let fx = Fixture::new();
    let cfg = fx.root.join("cfg");
    write_file(&cfg.join("stockade/policy.toml"), USER_POLICY, 0o644);
    fx.sandbox(&[], SHOW)
        .env("XDG_CONFIG_HOME", &cfg)
        .run()
        .assert_success()
        .assert_stdout_contains("v=yes");
    // Control: the home's default place holds nothing.
    fx.sandbox(&[], SHOW)
        .run()
        .assert_success()
        .assert_stdout_contains("v=none");
}

#[test]
fn a_malformed_user_policy_refuses_naming_it() {
    let fx = Fixture::new();
    let path = user_policy(&fx, "presets = [\"npm\"]\nnope = 1\n");
    let run = fx.sandbox(&[], "echo ran").run();
    run.assert_code(125)
        .assert_stderr_contains("E_POLICY_INVALID")
        .assert_stderr_contains(&format!("{}: line 2, column 1", path.display()))
        .assert_stderr_contains("--no-user-policy");
    assert!(!run.stdout.contains("ran"), "{}", run.describe());
    fx.stockade(["policy", "show", "--workspace"])
        .arg(&fx.ws)
        .run()
        .assert_code(125)
        .assert_stderr_contains(&path.display().to_string());
    // An unreadable one too (a directory in its place).
    std::fs::remove_file(&path).expect("remove");
    mkdir(&path);
    fx.sandbox(&[], "echo ran")
        .run()
        .assert_code(125)
        .assert_stderr_contains(&path.display().to_string());
    // Control: ignored, the command runs.
    fx.sandbox(&["--no-user-policy"], "echo ran")
        .run()
        .assert_success()
        .assert_stdout_contains("ran");
}

#[test]
fn a_user_policy_the_run_could_write_is_refused() {
    let fx = Fixture::new();
    // In the workspace (XDG_CONFIG_HOME inside it): the run could rewrite the next run's policy.
    let cfg = fx.ws.join("cfg");
    let inside = cfg.join("stockade/policy.toml");
    write_file(&inside, USER_POLICY, 0o644);
    let run = fx
        .sandbox(&[], "echo ran")
        .env("XDG_CONFIG_HOME", &cfg)
        .run();
    run.assert_code(125)
        .assert_stderr_contains(&format!("refusing your user policy {}", inside.display()))
        .assert_stderr_contains("which this run can write");
    assert!(!run.stdout.contains("ran"), "{}", run.describe());
    // At its default place, with ~/.config made writable.
    user_policy(&fx, USER_POLICY);
    let config = fx.home.join(".config").display().to_string();
    fx.sandbox(&["--allow-write", &config], "echo ran")
        .run()
        .assert_code(125)
        .assert_stderr_contains("refusing your user policy");
    // Ignored for the run, it is still out of the run's reach (protected for it).
    let user = fx.home.join(".config/stockade/policy.toml");
    let rewrite = format!("echo 'hints = true' > {}; echo rewrite=$?", sh_quote(&user));
    let run = fx
        .sandbox(&["--no-user-policy", "--allow-write", &config], &rewrite)
        .run();
    run.assert_success();
    if backend() != "gvisor" {
        assert!(!run.stdout.contains("rewrite=0"), "{}", run.describe());
    }
    assert_eq!(read_text(&user).as_deref(), Some(USER_POLICY));
    // Control: the same file outside every writable root is used.
    fx.sandbox(&[], SHOW)
        .run()
        .assert_success()
        .assert_stdout_contains("v=yes");
}

#[test]
fn a_run_cannot_create_the_user_policy_for_the_next_run() {
    let fx = Fixture::new();
    let config = fx.home.join(".config");
    mkdir(&config);
    let grant = config.display().to_string();
    let plant = format!(
        "mkdir -p {c}/stockade; printf '[env]\\nset = {{ PLANTED = \"1\" }}\\n' > {c}/stockade/policy.toml; echo plant=$?; mkdir -p {c}/other && echo x > {c}/other/f; echo other=$?",
        c = sh_quote(&config)
    );
    let run = fx.sandbox(&["--allow-write", &grant], &plant).run();
    run.assert_success().assert_stdout_contains("other=0");
    if backend() == "gvisor" {
        // Under gVisor a protected path is not refused while the run goes on: the sweep
        // takes it away when the run ends (README, "Backends").
        run.assert_stderr_contains("protected path created");
    } else {
        assert!(!run.stdout.contains("plant=0"), "{}", run.describe());
    }
    assert!(!config.join("stockade/policy.toml").exists());
    // Control: the grant is real (the sibling was written), and the next run has no PLANTED.
    assert_eq!(read_text(&config.join("other/f")).as_deref(), Some("x\n"));
    fx.sandbox(&[], "echo p=${PLANTED:-none}")
        .run()
        .assert_success()
        .assert_stdout_contains("p=none");
}

#[test]
fn shell_prefix_and_the_hooks_wrapped_run_honour_the_user_policy() {
    let fx = Fixture::new();
    user_policy(&fx, USER_POLICY);
    let ws = fx.ws.display().to_string();
    fx.stockade(["shell-prefix", "--workspace", &ws, SHOW])
        .run()
        .assert_success()
        .assert_stdout_contains("v=yes");
    // The hook answers with a wrapped `stockade run`: run it as Claude Code would.
    let input = json!({"tool_name": "Bash", "tool_input": {"command": SHOW}, "cwd": ws});
    let hook = fx
        .stockade(["hook", "claude-code"])
        .env("CLAUDE_PROJECT_DIR", &fx.ws)
        .stdin(input.to_string())
        .run();
    hook.assert_success();
    let answer: Value = serde_json::from_str(hook.stdout.trim()).expect("hook output");
    let wrapped = answer["hookSpecificOutput"]["updatedInput"]["command"]
        .as_str()
        .unwrap_or_else(|| panic!("no command: {answer}"))
        .to_string();
    assert!(
        !wrapped.contains("--preset") && !wrapped.contains("--env"),
        "the hook needs no flags: {wrapped}"
    );
    fx.host(&wrapped)
        .run()
        .assert_success()
        .assert_stdout_contains("v=yes");
    // Control: the same wrapped command without the user policy.
    fx.host(&wrapped)
        .env("STOCKADE_NO_USER_POLICY", "1")
        .run()
        .assert_success()
        .assert_stdout_contains("v=none");
}

/// One `execute` call through `stockade mcp --workspace WS` (stdio), with the SDK's client:
/// the call's text.
fn mcp_execute(fx: &Fixture, env: Value, command: &str) -> String {
    let sdk = MCP_SDK.path();
    let node = which("node").expect("node (Node.js) is needed for the MCP client");
    let script = fx.root.join("client.mjs");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.mjs"),
        &script,
    )
    .expect("copy the client script");
    let mut args = vec!["mcp".to_string()];
    if backend() != "native" {
        args.extend(["--backend".to_string(), backend().to_string()]);
    }
    args.extend(["--workspace".to_string(), fx.ws.display().to_string()]);
    let config = json!({
        "transport": "stdio",
        "command": stockade_bin(),
        "args": args,
        "env": env,
        "calls": [{"name": "execute", "arguments": {"command": command}}],
    });
    let run = Cmd::new(node, &fx.root)
        .env("HOME", &fx.home)
        .arg(&script)
        .arg(sdk)
        .arg(config.to_string())
        .timeout(Duration::from_secs(120))
        .run();
    assert_eq!(run.code(), 0, "{}", run.describe());
    run.stdout.lines().last().unwrap_or_default().to_string()
}

#[test]
fn mcp_calls_honour_the_user_policy() {
    if attacks::MCP_SDK.skip() {
        return;
    }
    let fx = Fixture::new();
    user_policy(&fx, USER_POLICY);
    let out = mcp_execute(&fx, json!({ "PATH": PATH, "HOME": fx.home }), SHOW);
    assert!(out.contains("v=yes"), "{out}");
    // Control: ignored.
    let out = mcp_execute(
        &fx,
        json!({ "PATH": PATH, "HOME": fx.home, "STOCKADE_NO_USER_POLICY": "1" }),
        SHOW,
    );
    assert!(out.contains("v=none"), "{out}");
}

#[test]
fn the_project_policy_is_used_only_once_approved() {
    let fx = Fixture::new();
    let project = fx.ws.join("stockade.toml");
    write_file(&project, "[env]\nset = { FROM_PROJECT = \"p\" }\n", 0o644);
    let show = "echo p=${FROM_PROJECT:-none}";
    // Control: before approval it is not used, and the run says so.
    let run = fx.sandbox(&[], show).run();
    run.assert_success()
        .assert_stdout_contains("p=none")
        .assert_stderr_contains(&format!("{} is not used", project.display()));
    let ws = fx.ws.display().to_string();
    fx.stockade(["policy", "show", "--workspace", &ws])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("not used     {} is not used", project.display()));
    fx.stockade(["trust", "approve", "--workspace", &ws])
        .run()
        .assert_success();
    fx.sandbox(&[], show)
        .run()
        .assert_success()
        .assert_stdout_contains("p=p");
    fx.stockade(["policy", "show", "--workspace", &ws])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("project policy {}", project.display()));
    // Changed after approval: the existing trust refusal.
    write_file(
        &project,
        "[env]\nset = { FROM_PROJECT = \"changed\" }\n",
        0o644,
    );
    let run = fx.sandbox(&[], show).run();
    run.assert_code(125)
        .assert_stderr_contains("E_UNTRUSTED_CONFIG");
    assert!(!run.stdout.contains("p="), "{}", run.describe());
    // [[commands]] in it are refused even when approved: the sandbox writes the workspace.
    write_file(
        &project,
        "[[commands]]\nprogram = \"/bin/true\"\nexcluded = true\nallowed_args = []\n",
        0o644,
    );
    fx.stockade(["trust", "approve", "--workspace", &ws])
        .run()
        .assert_success();
    fx.sandbox(&[], "echo ran")
        .run()
        .assert_code(125)
        .assert_stderr_contains("[[commands]] in");
}
