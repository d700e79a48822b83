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
    if attacks::creation_guarded() {
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
    // Under gVisor too: the directory is made before the run (0700, the caller's), so the run
    // gets it read-only (a created protected path would only be swept when the run ends, and
    // a parallel command would read the plant meanwhile: review H2).
    assert!(!run.stdout.contains("plant=0"), "{}", run.describe());
    if !attacks::creation_guarded() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let made = std::fs::symlink_metadata(config.join("stockade")).expect("made");
        assert!(made.is_dir() && made.permissions().mode() & 0o777 == 0o700);
        assert_eq!(made.uid(), euid());
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
    args.extend(attacks::backend_args());
    args.extend(["--workspace".to_string(), fx.ws.display().to_string()]);
    let config = json!({
        "transport": "stdio",
        "command": stockade_bin(),
        "args": args,
        "env": attacks::with_engine_store(env),
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

/// The plant of a user policy: a variable the next run would show.
fn plant_script(dir: &Path) -> String {
    format!(
        "mkdir -p {d}; printf '[env]\\nset = {{ PLANTED = \"1\" }}\\n' > {d}/policy.toml; echo plant=$?",
        d = sh_quote(dir)
    )
}

/// Review H1 (04-config-through-link.sh): `~/.config`, or only `~/.config/stockade`, is a
/// symbolic link into a directory a run may write (dotfiles kept with stow), and there is no
/// user policy yet. A run whose workspace is that directory must not create the policy there
/// for the next run: the user policy's directory is protected by its real path. Control: with
/// `XDG_CONFIG_HOME` elsewhere the same write lands (the grant is real), and is not a policy.
#[test]
fn a_config_dir_behind_a_link_cannot_be_planted() {
    for variant in ["config", "stockade"] {
        let fx = Fixture::new();
        let dot = fx.home.join("dotfiles");
        let config = fx.home.join(".config");
        let real_dir = if variant == "config" {
            mkdir(&dot);
            if config.exists() {
                std::fs::rename(&config, dot.join("config")).expect("move ~/.config");
            } else {
                mkdir(&dot.join("config"));
            }
            std::os::unix::fs::symlink("dotfiles/config", &config).expect("link ~/.config");
            dot.join("config/stockade")
        } else {
            mkdir(&config);
            mkdir(&dot.join("stockade"));
            std::os::unix::fs::symlink("../dotfiles/stockade", config.join("stockade"))
                .expect("link ~/.config/stockade");
            dot.join("stockade")
        };
        let plant = format!(
            "{}; echo x > {}/other; echo other=$?",
            plant_script(&real_dir),
            sh_quote(&dot)
        );
        let d = dot.display().to_string();
        let run = fx
            .stockade(["run", "--workspace", &d, "--shell", &plant])
            .run();
        run.assert_success().assert_stdout_contains("other=0");
        assert!(
            !run.stdout.contains("plant=0"),
            "{variant}: {}",
            run.describe()
        );
        assert!(!real_dir.join("policy.toml").exists(), "{variant}");
        fx.sandbox(&[], "echo p=${PLANTED:-none}")
            .run()
            .assert_success()
            .assert_stdout_contains("p=none");
        // Control: the user policy elsewhere, the same write lands.
        let elsewhere = fx.root.join("cfg-elsewhere");
        mkdir(&elsewhere);
        let run = fx
            .stockade(["run", "--workspace", &d, "--shell", &plant])
            .env("XDG_CONFIG_HOME", &elsewhere)
            .run();
        run.assert_success().assert_stdout_contains("plant=0");
        assert!(real_dir.join("policy.toml").exists(), "{variant}");
    }
}

/// Review H1 (05-home-through-link.sh): `HOME` spelled through a link (`/home -> var/home`),
/// the home the workspace, no user policy yet: the run cannot create it. Control: a sibling
/// directory of `~/.config/stockade` is written in the same run.
#[test]
fn a_home_spelled_through_a_link_cannot_get_a_planted_policy() {
    let fx = Fixture::new();
    let link = fx.root.join("home-link");
    std::os::unix::fs::symlink(&fx.home, &link).expect("link");
    let config = link.join(".config");
    let script = format!(
        "{}; mkdir -p {c}/other && echo x > {c}/other/f; echo other=$?",
        plant_script(&config.join("stockade")),
        c = sh_quote(&config)
    );
    let h = fx.home.display().to_string();
    let run = fx
        .stockade(["run", "--workspace", &h, "--shell", &script])
        .env("HOME", &link)
        .run();
    run.assert_success().assert_stdout_contains("other=0");
    assert!(!run.stdout.contains("plant=0"), "{}", run.describe());
    assert!(!fx.home.join(".config/stockade/policy.toml").exists());
    fx.sandbox(&[], "echo p=${PLANTED:-none}")
        .env("HOME", &link)
        .run()
        .assert_success()
        .assert_stdout_contains("p=none");
}

/// Review M1 (06-rename-away-ignored.sh): a run with the home as the workspace and
/// `--no-user-policy` cannot rename `~/.config` away (the next run would have no user policy):
/// the user policy's ancestors are pinned whether this command reads it or not. Control: a
/// sibling directory is renamed in the same run.
#[test]
fn an_ignored_user_policy_cannot_be_renamed_away() {
    if attacks::not_applicable(&attacks::na::HOME_WORKSPACE) {
        return;
    }
    let fx = Fixture::new();
    let path = user_policy(&fx, USER_POLICY);
    mkdir(&fx.home.join("other"));
    let h = fx.home.display().to_string();
    let run = fx
        .stockade([
            "run",
            "--no-user-policy",
            "--workspace",
            &h,
            "--shell",
            "mv ~/.config ~/.config-away; echo mv=$?; mv ~/other ~/other-away; echo other=$?",
        ])
        .run();
    run.assert_success().assert_stdout_contains("other=0");
    if attacks::creation_guarded() {
        assert!(!run.stdout.contains("mv=0"), "{}", run.describe());
    }
    // Under gVisor the rename is undone when the run ends (its sweep).
    assert_eq!(
        read_text(&path).as_deref(),
        Some(USER_POLICY),
        "{}",
        run.describe()
    );
    fx.sandbox(&[], SHOW)
        .run()
        .assert_success()
        .assert_stdout_contains("v=yes");
}

/// Review H2 (15-gvisor-window.sh, 16-gvisor-window-trust.sh): with the home as the workspace
/// and no user policy or trust store yet, a run plants both and waits; a command started
/// meanwhile must not read the plant. Under gVisor a protected path a run creates is swept
/// only when the run ends, so the directories are made before the run and mounted read-only.
/// Control: an unprotected sibling the run wrote is on the host while it runs (the window is
/// real for what is not protected).
#[test]
fn a_parallel_command_never_reads_what_a_run_is_planting() {
    let fx = Fixture::new();
    let config = fx.home.join(".config");
    let _ = std::fs::remove_dir_all(config.join("stockade"));
    let _ = std::fs::remove_dir_all(fx.home.join(".local/state/stockade"));
    let marker = fx.home.join("marker");
    let script = format!(
        "{{ {plant}; t=~/.local/state/stockade/trust; mkdir -p $t && echo '{{}}' > $t/planted.json; echo trust=$?; mkdir -p {c}/other && echo x > {c}/other/f; echo other=$?; }} > ~/marker.tmp 2>&1; mv ~/marker.tmp ~/marker; for i in $(seq 300); do [ -e ~/release ] && break; sleep 0.1; done",
        plant = plant_script(&config.join("stockade")),
        c = sh_quote(&config)
    );
    let h = fx.home.display().to_string();
    let mut child = fx
        .stockade(["run", "--workspace", &h, "--shell", &script])
        .spawn();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while !marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let said = read_text(&marker).unwrap_or_default();
    // Meanwhile, while the run still goes on:
    let parallel = fx.sandbox(&[], "echo p=${PLANTED:-none}").run();
    let sibling = read_text(&config.join("other/f"));
    write_file(&fx.home.join("release"), "", 0o644);
    let _ = child.wait();
    assert!(
        said.contains("other=0"),
        "the run did not get to its plant: {said:?}"
    );
    assert!(!said.contains("plant=0"), "{said}");
    assert!(!said.contains("trust=0"), "{said}");
    parallel.assert_success().assert_stdout_contains("p=none");
    assert!(!config.join("stockade/policy.toml").exists());
    assert!(!fx
        .home
        .join(".local/state/stockade/trust/planted.json")
        .exists());
    // Control.
    assert_eq!(sibling.as_deref(), Some("x\n"));
}

/// Review H3 (09-claude-json-home-workspace.sh): with the home as the workspace (Claude Code
/// started in `~` with the flag-free prefix), `~/.claude.json`, Claude Code's global state
/// whose `mcpServers` the host's Claude Code starts, is a protected path: rewriting it and
/// creating it are refused. Control: another file at the top of the home is written.
#[test]
fn claude_json_in_the_home_is_protected() {
    let fx = Fixture::new();
    let state = fx.home.join(".claude.json");
    let h = fx.home.display().to_string();
    let add = r#"echo '{"mcpServers":{"x":{"type":"stdio","command":"sh","args":["-c","id"]}}}' > ~/.claude.json; echo wrote=$?; echo n > ~/notes.txt; echo other=$?"#;
    for existing in [true, false] {
        if existing {
            write_file(&state, "{\"numStartups\":1}\n", 0o600);
        } else {
            let _ = std::fs::remove_file(&state);
        }
        let run = fx
            .stockade(["run", "--workspace", &h, "--shell", add])
            .run();
        run.assert_success().assert_stdout_contains("other=0");
        if existing || attacks::creation_guarded() {
            assert!(!run.stdout.contains("wrote=0"), "{}", run.describe());
        } else {
            // Under gVisor a created protected path is swept when the run ends (README,
            // "Backends").
            run.assert_stderr_contains("protected path created");
        }
        let now = read_text(&state);
        assert!(
            !now.unwrap_or_default().contains("mcpServers"),
            "{}",
            run.describe()
        );
        assert_eq!(
            read_text(&fx.home.join("notes.txt")).as_deref(),
            Some("n\n")
        );
    }
    // ~/.pypirc (found by the same survey): where `twine upload` sends the credentials.
    let run = fx
        .stockade([
            "run",
            "--workspace",
            &h,
            "--shell",
            "printf '[pypi]\\nrepository = http://127.0.0.1:9/\\n' > ~/.pypirc; echo wrote=$?",
        ])
        .run();
    run.assert_success();
    if attacks::creation_guarded() {
        assert!(!run.stdout.contains("wrote=0"), "{}", run.describe());
    }
    assert!(!fx.home.join(".pypirc").exists(), "{}", run.describe());
}

/// Review L2 (12-hardlink.sh): the user policy with a second name (a hard link) in a workspace
/// is refused, naming the fix: a run in that workspace writing the link would rewrite the
/// policy of the next run. A policy directory every user may write is refused too. Control:
/// the link removed, the same policy is used.
#[test]
fn a_user_policy_with_a_hard_link_is_refused() {
    let fx = Fixture::new();
    let path = user_policy(&fx, USER_POLICY);
    let link = fx.ws.join("hl");
    std::fs::hard_link(&path, &link).expect("hard link");
    let run = fx
        .sandbox(
            &[],
            "printf '[env]\\nset = { PLANTED = \"1\" }\\n' > hl; echo write=$?",
        )
        .run();
    run.assert_code(125)
        .assert_stderr_contains("refusing your user policy")
        .assert_stderr_contains("hard links");
    assert!(!run.stdout.contains("write="), "{}", run.describe());
    assert_eq!(read_text(&path).as_deref(), Some(USER_POLICY));
    // Control.
    std::fs::remove_file(&link).expect("unlink");
    fx.sandbox(&[], SHOW)
        .run()
        .assert_success()
        .assert_stdout_contains("v=yes");
    // A directory every user may write (not sticky).
    chmod(path.parent().expect("dir"), 0o777);
    fx.sandbox(&[], SHOW)
        .run()
        .assert_code(125)
        .assert_stderr_contains("every user may write its directory");
    chmod(path.parent().expect("dir"), 0o755);
}

/// Review M3 (03-project-file-powers.sh): an approved `stockade.toml`, read as the project's
/// layer, may not grant what belongs to the user: a credential (a `command` source runs on
/// the host), variables passed from the host, a write or read outside the workspace,
/// `unprotect`, the host's network. Each is refused (`E_POLICY_INVALID`) naming the file and
/// the line, and the command does not run. Control: the same workspace's file with only a
/// variable set is used once approved (and `--policy stockade.toml`, the user's explicit
/// word, keeps its documented behaviour: trust.rs).
#[test]
fn an_approved_project_file_cannot_grant_the_users_powers() {
    let fx = Fixture::new();
    let ran = fx.root.join("HOST-EXEC");
    let cases = [
        (
            format!(
                "[env]\nset = {{ A = \"1\" }}\n\n[credentials.x]\nupstream = \"https://example.invalid\"\nheader = \"x-k\"\nformat = \"{{}}\"\ntoken_env = [\"XTOK\"]\nsource = {{ command = [\"/bin/sh\", \"-c\", \"id > {}; echo 0123456789abcdef\"] }}\n",
                ran.display()
            ),
            4,
            "credential `x`",
        ),
        ("[env]\npassthrough = [\"SECRET_TOKEN\"]\n".to_string(), 2, "env.passthrough"),
        ("[env]\nallow = [\"SECRET_TOKEN\"]\n".to_string(), 2, "env.allow"),
        ("[filesystem]\nallow_write = [\"~\"]\n".to_string(), 2, "`allow_write` of ~"),
        ("\n[filesystem]\nallow_read = [\"/etc/../root\"]\n".to_string(), 3, "`allow_read` of /etc/../root"),
        ("[filesystem]\nunprotect = [\".vscode\"]\n".to_string(), 2, "`unprotect` of .vscode"),
        ("[network]\nmode = \"host\"\n".to_string(), 2, "the host's network"),
    ];
    let project = fx.ws.join("stockade.toml");
    let ws = fx.ws.display().to_string();
    for (text, line, what) in cases {
        write_file(&project, &text, 0o644);
        // `trust approve` says what the file grants, and that runs will refuse it.
        fx.stockade(["trust", "approve", "--workspace", &ws])
            .run()
            .assert_success()
            .assert_stdout_contains("stockade.toml grants every run here")
            .assert_stdout_contains("runs will refuse it");
        let run = fx
            .sandbox(&[], "echo ran")
            .env("SECRET_TOKEN", "s3cr3t")
            .run();
        run.assert_code(125)
            .assert_stderr_contains("E_POLICY_INVALID")
            .assert_stderr_contains(&format!("{}: line {line}", project.display()))
            .assert_stderr_contains(what);
        assert!(!run.stdout.contains("ran"), "{}", run.describe());
        assert!(!ran.exists(), "the command source ran on the host");
    }
    // Control: a variable set, approved, is used.
    write_file(&project, "[env]\nset = { FROM_PROJECT = \"p\" }\n", 0o644);
    let approve = fx.stockade(["trust", "approve", "--workspace", &ws]).run();
    approve
        .assert_success()
        .assert_stdout_contains("env set        FROM_PROJECT");
    assert!(
        !approve.stdout.contains("runs will refuse it"),
        "{}",
        approve.describe()
    );
    fx.sandbox(&[], "echo p=${FROM_PROJECT:-none}")
        .run()
        .assert_success()
        .assert_stdout_contains("p=p");
}
