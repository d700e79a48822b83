//! `[[commands]]` (issue 18, item 7): a policy file's entry gives one program more than the
//! rest of the policy, or runs it outside the sandbox, matched by its resolved path; each use is
//! in the audit log and the report. The controls are the same commands without the entry (or
//! with a command string that is not plain), which the sandbox refuses as usual; entries the
//! sandbox could have planted or whose program it could have replaced are refused.
//!
//! An excluded program runs on the host, so its arguments and environment are code (issue 30,
//! item 5): `git -c core.fsmonitor=<a script in the workspace> status`, `GIT_CONFIG_*` in the
//! environment, and git run in a repository the sandbox made are refused; each control runs
//! the same attack straight on the host (the planted script leaves its mark outside the
//! workspace), or with the entry's `allowed_args` line that the refusal names. A program
//! without a model (`make`, `npm`) is refused a Makefile the sandbox wrote (by its directory,
//! its path, or `~/../ws/Makefile`) and a `~/.npmrc` a `--allow-write ~/.npmrc` run wrote;
//! controls through `runs_workspace_files = true`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use attacks::*;

/// A policy file outside the workspace with `body`.
fn policy(fx: &Fixture, body: &str) -> String {
    let path = fx.out_file("commands-policy.toml");
    write_file(&path, body, 0o644);
    path.display().to_string()
}

#[test]
fn an_entry_grants_its_program_a_write_outside_the_workspace() {
    let fx = Fixture::new();
    let target = fx.outside.join("granted.txt");
    let p = policy(
        &fx,
        &format!(
            "[[commands]]\nprogram = \"touch\"\nreason = \"the test's grant\"\nallow_write = [\"{}\"]\n",
            fx.outside.display()
        ),
    );
    let audit = fx.out_file("audit.jsonl");
    let report = fx.out_file("report.json");
    let (a, r) = (audit.display().to_string(), report.display().to_string());
    let t = target.display().to_string();
    fx.sandbox_argv(
        &["--policy", &p, "--audit", &a, "--report", &r],
        &["touch", &t],
    )
    .run()
    .assert_success()
    .assert_stderr_contains("gets the grants of [[commands]] entry 0");
    assert!(target.exists());
    let events = read_jsonl(&audit);
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "command_rule" && e["index"] == 0),
        "{events:?}"
    );
    assert_eq!(
        read_json(&report)["command_rule"]["rule"]["program"],
        "touch"
    );
    std::fs::remove_file(&target).expect("remove");
    // The same program in a plain command string matches too.
    fx.sandbox(&["--policy", &p], &format!("touch {t}"))
        .run()
        .assert_success();
    assert!(target.exists());
    std::fs::remove_file(&target).expect("remove");
    // Controls: not a plain command (a list), another program, or no entry: refused.
    fx.sandbox(&["--policy", &p], &format!("touch {t}; true"))
        .run();
    assert!(!target.exists(), "a list took the grant");
    fx.sandbox(&["--policy", &p], &format!("cp /dev/null {t}"))
        .run();
    assert!(!target.exists(), "another program took the grant");
    fx.sandbox_argv(&[], &["touch", &t]).run().assert_failure();
    assert!(!target.exists());
}

#[test]
fn an_excluded_program_runs_outside_the_sandbox_and_says_so() {
    let fx = Fixture::new();
    let key = fx.home.join(".ssh/id_rsa").display().to_string();
    let p = policy(
        &fx,
        &format!("[[commands]]\nprogram = \"cat\"\nexcluded = true\nreason = \"the test's exclusion\"\nallowed_args = [\"{key}\"]\n"),
    );
    let audit = fx.out_file("audit.jsonl");
    let report = fx.out_file("report.json");
    let (a, r) = (audit.display().to_string(), report.display().to_string());
    // From a directory outside every writable root (from the workspace, a program stockade
    // has no model of is refused: see below).
    fx.sandbox_argv(
        &["--policy", &p, "--audit", &a, "--report", &r],
        &["cat", &key],
    )
    .cwd(&fx.outside)
    .run()
    .assert_success()
    .assert_stdout_contains(&fx.marker("ssh"))
    .assert_stderr_contains("OUTSIDE the sandbox");
    let events = read_jsonl(&audit);
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "command_rule" && e["rule"]["excluded"] == true),
        "{events:?}"
    );
    assert_eq!(read_json(&report)["sandboxed"], false);
    // Control: without the entry the key stays hidden.
    let run = fx.sandbox_argv(&[], &["cat", &key]).run();
    run.assert_lacks(&fx.marker("ssh"));
}

#[test]
fn entries_the_sandbox_could_have_written_or_replaced_are_refused() {
    let fx = Fixture::new();
    // A program in the workspace: the sandbox could have replaced it.
    let tool = fx.ws.join("tool.sh");
    write_file(&tool, "#!/bin/sh\necho ran-tool\n", 0o755);
    let p = policy(
        &fx,
        &format!(
            "[[commands]]\nprogram = \"{}\"\nexcluded = true\n",
            tool.display()
        ),
    );
    let t = tool.display().to_string();
    fx.sandbox_argv(&["--policy", &p], &[&t])
        .run()
        .assert_code(125)
        .assert_stderr_contains("lies in the writable root")
        .assert_lacks("ran-tool");
    // Control: the same script, no entry: it runs (in the sandbox).
    fx.sandbox_argv(&[], &[&t])
        .run()
        .assert_success()
        .assert_stdout_contains("ran-tool");
    // An entry in a policy file inside the workspace is refused (the sandbox could write it).
    let inside = fx.ws.join("stockade.toml");
    write_file(
        &inside,
        "[[commands]]\nprogram = \"cat\"\nexcluded = true\n",
        0o644,
    );
    let key = fx.home.join(".ssh/id_rsa").display().to_string();
    let run = fx
        .sandbox_argv(&["--policy", &inside.display().to_string()], &["cat", &key])
        .run();
    run.assert_code(125).assert_lacks(&fx.marker("ssh"));
    // Bad entries are refused when the file is read.
    let bad = policy(
        &fx,
        "[[commands]]\nprogram = \"bin/cat\"\nexcluded = true\n",
    );
    fx.sandbox_argv(&["--policy", &bad], &["true"])
        .run()
        .assert_code(125)
        .assert_stderr_contains("commands[0].program");
}

/// A policy file excluding git, with `extra` lines in its entry.
fn git_excluded(fx: &Fixture, extra: &str) -> String {
    policy(
        fx,
        &format!("[[commands]]\nprogram = \"git\"\nexcluded = true\nreason = \"push with the host's keys\"\n{extra}"),
    )
}

/// A script in the workspace that leaves `mark` (outside the workspace) when anything runs
/// it: what the sandbox would plant for the host to run.
fn planted(fx: &Fixture) -> (String, std::path::PathBuf) {
    let mark = fx.outside.join("fsmonitor-ran");
    let script = fx.ws.join("fsmon.sh");
    write_file(
        &script,
        format!("#!/bin/sh\ntouch {}\n", sh_quote(&mark)),
        0o755,
    );
    (script.display().to_string(), mark)
}

#[test]
fn an_excluded_git_refuses_code_running_arguments() {
    let fx = Fixture::new();
    let (script, mark) = planted(&fx);
    let monitor = format!("core.fsmonitor={script}");
    // Control: the attack is real. git on the host runs the planted fsmonitor.
    fx.host(&format!("git -c {} status", sh_quote(&monitor)))
        .run()
        .assert_success();
    assert!(mark.exists(), "control: host git did not run the fsmonitor");
    std::fs::remove_file(&mark).expect("remove mark");

    let p = git_excluded(&fx, "");
    let audit = fx.out_file("audit.jsonl");
    let a = audit.display().to_string();
    // As an argv and as a plain command string (the hook's `bash -c` form).
    let refused = fx
        .sandbox_argv(
            &["--policy", &p, "--audit", &a],
            &["git", "-c", &monitor, "status"],
        )
        .run();
    refused
        .assert_code(125)
        .assert_stderr_contains("E_SANDBOX_VIOLATION")
        .assert_stderr_contains(&format!("-c {monitor}"))
        .assert_stderr_contains("allowed_args = [\"-c\"")
        .assert_lacks("OUTSIDE the sandbox");
    assert!(!mark.exists(), "the excluded git ran the planted fsmonitor");
    let events = read_jsonl(&audit);
    assert!(
        events
            .iter()
            .any(|e| e.to_string().contains("excluded_argument")),
        "{events:?}"
    );
    fx.sandbox(&["--policy", &p], &format!("git -c {monitor} status"))
        .run()
        .assert_code(125);
    assert!(!mark.exists(), "the excluded git ran the planted fsmonitor");
    // The other ways git takes config, programs or another repository.
    for argv in [
        vec!["git", "--config-env=core.fsmonitor=HOME", "status"],
        vec!["git", "--exec-path=/tmp", "status"],
        vec!["git", "-C", "app", "status"],
        vec!["git", "--git-dir=.git", "status"],
        vec!["git", "log", "--output=/tmp/x"],
        vec!["git", "grep", "-O/bin/true", "x"],
        vec!["git", "rebase", "--exec", "true", "HEAD"],
        vec!["git", "fetch", "--upload-pack=/bin/true", "origin"],
        vec!["git", "fetch", "ext::sh -c true"],
        vec!["git", "config", "--global", "core.pager", "/bin/true"],
        vec!["git", "difftool", "-x", "/bin/true"],
    ] {
        fx.sandbox_argv(&["--policy", &p], &argv)
            .run()
            .assert_code(125)
            .assert_stderr_contains("excluded");
    }
    // Everyday git still runs outside.
    fx.sandbox_argv(&["--policy", &p], &["git", "log", "--oneline", "-n", "1"])
        .run()
        .assert_success()
        .assert_stdout_contains("initial")
        .assert_stderr_contains("OUTSIDE the sandbox");
    // Control: the line the refusal names lets the same words through, and the planted
    // fsmonitor runs on the host.
    let allowed = git_excluded(&fx, "allowed_args = [\"-c\", \"core.fsmonitor=*\"]\n");
    fx.sandbox_argv(&["--policy", &allowed], &["git", "-c", &monitor, "status"])
        .run()
        .assert_success();
    assert!(
        mark.exists(),
        "control: allowed_args did not let the words through"
    );
    std::fs::remove_file(&mark).expect("remove mark");
    // Without the entry git runs in the sandbox, where the script cannot write the host.
    fx.sandbox_argv(&[], &["git", "-c", &monitor, "status"])
        .run();
    assert!(!mark.exists(), "the sandboxed fsmonitor wrote the host");
}

#[test]
fn an_excluded_git_gets_no_code_running_environment() {
    let fx = Fixture::new();
    let (script, mark) = planted(&fx);
    let with_env = |cmd: Cmd| {
        cmd.env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "core.fsmonitor")
            .env("GIT_CONFIG_VALUE_0", &script)
    };
    // Control: host git with that environment runs the planted fsmonitor.
    with_env(fx.host("git status")).run().assert_success();
    assert!(mark.exists(), "control: host git did not run the fsmonitor");
    std::fs::remove_file(&mark).expect("remove mark");
    let p = git_excluded(&fx, "");
    let report = fx.out_file("report.json");
    let r = report.display().to_string();
    with_env(fx.sandbox_argv(&["--policy", &p, "--report", &r], &["git", "status"]))
        .env("LD_PRELOAD", "/nonexistent/x.so")
        .env("GIT_AUTHOR_NAME", "kept")
        .run()
        .assert_success()
        .assert_stderr_contains("OUTSIDE the sandbox");
    assert!(
        !mark.exists(),
        "the excluded git took GIT_CONFIG_* from the caller"
    );
    let removed = read_json(&report)["env_removed"].to_string();
    for name in ["GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "LD_PRELOAD"] {
        assert!(removed.contains(name), "{name} not removed: {removed}");
    }
    assert!(!removed.contains("GIT_AUTHOR_NAME"), "{removed}");
}

#[test]
fn an_excluded_git_refuses_a_repository_the_sandbox_could_have_made() {
    let fx = Fixture::new();
    let (script, mark) = planted(&fx);
    // A nested repository whose config runs the planted script (what a run under gVisor,
    // or one still going in the background, could leave before the sweep).
    let sub = fx.ws.join("vendor/planted");
    mkdir(&sub);
    fx.host(&format!(
        "git -C {0} init -q && git -C {0} config core.fsmonitor {1}",
        sh_quote(&sub),
        sh_quote(&script)
    ))
    .run()
    .assert_success();
    // Control: host git there runs it.
    Cmd::new("git", &sub)
        .env("HOME", &fx.home)
        .args(["-c", "safe.directory=*", "status"])
        .run()
        .assert_success();
    assert!(
        mark.exists(),
        "control: host git did not run the nested fsmonitor"
    );
    std::fs::remove_file(&mark).expect("remove mark");
    let p = git_excluded(&fx, "");
    fx.stockade([
        "run",
        "--workspace",
        &fx.ws.display().to_string(),
        "--policy",
        &p,
        "--",
        "git",
        "status",
    ])
    .cwd(&sub)
    .run()
    .assert_code(125)
    .assert_stderr_contains("nested in a writable root");
    assert!(
        !mark.exists(),
        "the excluded git ran the nested repository's fsmonitor"
    );
    // The workspace's own repository (top of the workspace) is the one git may use.
    fx.stockade([
        "run",
        "--workspace",
        &fx.ws.display().to_string(),
        "--policy",
        &p,
        "--",
        "git",
        "status",
        "--short",
    ])
    .cwd(&fx.ws.join("app"))
    .run()
    .assert_success();
}

#[test]
fn an_excluded_program_stockade_has_no_model_of_needs_allowed_args() {
    let fx = Fixture::new();
    let (script, mark) = planted(&fx);
    // `env` would run any program it is given: the planted script, on the host.
    let p = policy(&fx, "[[commands]]\nprogram = \"env\"\nexcluded = true\n");
    fx.sandbox_argv(&["--policy", &p], &["env", &script])
        .run()
        .assert_code(125)
        .assert_stderr_contains("allowed_args = [");
    assert!(!mark.exists(), "the excluded env ran the planted script");
    let narrow = policy(
        &fx,
        "[[commands]]\nprogram = \"env\"\nexcluded = true\nallowed_args = [\"-0\"]\n",
    );
    fx.sandbox_argv(&["--policy", &narrow], &["env", &script])
        .run()
        .assert_code(125)
        .assert_stderr_contains("is not among the entry's allowed_args");
    assert!(!mark.exists(), "the excluded env ran the planted script");
    fx.sandbox_argv(&["--policy", &narrow], &["env", "-0"])
        .cwd(&fx.outside)
        .run()
        .assert_success();
    // The entry allows the word, but it names a file in the workspace: refused too (from
    // outside the workspace, and from it).
    let wide = policy(
        &fx,
        &format!(
            "[[commands]]\nprogram = \"env\"\nexcluded = true\nallowed_args = [\"{script}\"]\n"
        ),
    );
    for cwd in [&fx.outside, &fx.ws] {
        fx.sandbox_argv(&["--policy", &wide], &["env", &script])
            .cwd(cwd)
            .run()
            .assert_code(125)
            .assert_stderr_contains("excluded_workspace_files")
            .assert_stderr_contains("runs_workspace_files = true");
        assert!(!mark.exists(), "the excluded env ran the planted script");
    }
    // Control: the entry that allows the word and accepts the workspace's files runs the
    // planted script on the host.
    let accepted = policy(
        &fx,
        &format!(
            "[[commands]]\nprogram = \"env\"\nexcluded = true\nallowed_args = [\"{script}\"]\nruns_workspace_files = true\n"
        ),
    );
    fx.sandbox_argv(&["--policy", &accepted], &["env", &script])
        .run()
        .assert_success();
    assert!(mark.exists(), "control: the allowed word did not run");
}

/// `make` excluded with `allowed_args = ["test"]`: its words are fine, but make reads the
/// Makefile of the directory it runs in, which the sandbox writes (red team of issue 30, item
/// 5). A sandboxed run plants a Makefile whose `test` recipe leaves a mark outside the
/// workspace; the next `stockade run -- make test` from the workspace would run it on the
/// host. Refused (`excluded_workspace_files`), also from a directory below, as a command
/// string, and with the Makefile named as a path from outside. Controls: the line the
/// refusal names (`runs_workspace_files = true`) runs the planted recipe on the host, and
/// the entry still runs make from a directory outside every writable root.
#[test]
fn an_excluded_make_does_not_run_the_makefile_the_sandbox_wrote() {
    let fx = Fixture::new();
    let Some(make) = which("make") else {
        println!("skipped: no make on this host");
        return;
    };
    let mark = fx.outside.join("makefile-ran");
    // Inside: the planted Makefile (direct mode leaves the workspace's build files writable).
    fx.sandbox(
        &[],
        &format!(
            "printf 'test:\\n\\ttouch %s\\n' {} > Makefile && mkdir -p app && cp Makefile app/ && echo planted",
            sh_quote(sh_quote(&mark))
        ),
    )
    .run()
    .assert_success()
    .assert_stdout_contains("planted");
    assert!(fx.ws.join("Makefile").exists());
    assert!(
        !mark.exists(),
        "the sandboxed run wrote outside the workspace"
    );
    let p = policy(
        &fx,
        &format!(
            "[[commands]]\nprogram = \"{}\"\nexcluded = true\nreason = \"run the tests on the host\"\nallowed_args = [\"test\"]\n",
            make.display()
        ),
    );
    let audit = fx.out_file("audit.jsonl");
    let a = audit.display().to_string();
    let refused = fx
        .sandbox_argv(&["--policy", &p, "--audit", &a], &["make", "test"])
        .run();
    refused
        .assert_code(125)
        .assert_stderr_contains("E_SANDBOX_VIOLATION")
        .assert_stderr_contains("excluded_workspace_files")
        .assert_stderr_contains(&format!("the writable root {}", fx.ws.display()))
        .assert_stderr_contains("reads files from its working directory")
        .assert_stderr_contains(&format!(
            "`runs_workspace_files = true` in [[commands]] entry 0 in {p}"
        ))
        .assert_lacks("OUTSIDE the sandbox");
    assert!(
        !mark.exists(),
        "the excluded make ran the sandbox's Makefile on the host"
    );
    let events = read_jsonl(&audit);
    assert!(
        events
            .iter()
            .any(|e| e.to_string().contains("excluded_workspace_files")),
        "{events:?}"
    );
    // From a directory below the top of the workspace, and as the hook's command string.
    fx.sandbox_argv(&["--policy", &p], &["make", "test"])
        .cwd(&fx.ws.join("app"))
        .run()
        .assert_code(125)
        .assert_stderr_contains("excluded_workspace_files");
    fx.sandbox(&["--policy", &p], "make test")
        .run()
        .assert_code(125)
        .assert_stderr_contains("excluded_workspace_files");
    assert!(
        !mark.exists(),
        "the excluded make ran the sandbox's Makefile on the host"
    );
    // Control (b): the normal workflow: the same entry runs make on the host from a directory
    // outside every writable root (the user's own Makefile).
    let own = fx.outside.join("own");
    mkdir(&own);
    write_file(&own.join("Makefile"), "test:\n\techo host-make-ok\n", 0o644);
    fx.sandbox_argv(&["--policy", &p], &["make", "test"])
        .cwd(&own)
        .run()
        .assert_success()
        .assert_stdout_contains("host-make-ok")
        .assert_stderr_contains("OUTSIDE the sandbox");
    assert!(!mark.exists());
    // Also when the run can write a plain project directory below the home (`~/proj`, the
    // normal workspace: no per-user configuration there).
    let proj = fx.home.join("proj");
    mkdir(&proj);
    let proj_grant = proj.display().to_string();
    fx.sandbox_argv(
        &["--policy", &p, "--allow-write", &proj_grant],
        &["make", "test"],
    )
    .cwd(&own)
    .run()
    .assert_success()
    .assert_stdout_contains("host-make-ok")
    .assert_stderr_contains("OUTSIDE the sandbox");
    assert!(!mark.exists());
    // From there too, when the run can write where programs read their per-user
    // configuration (~/.config: `--allow-write`), which the sandbox could have written.
    let config = fx.home.join(".config");
    mkdir(&config);
    let grant = config.display().to_string();
    fx.sandbox_argv(
        &["--policy", &p, "--allow-write", &grant],
        &["make", "test"],
    )
    .cwd(&own)
    .run()
    .assert_code(125)
    .assert_stderr_contains("excluded_workspace_files")
    .assert_stderr_contains("per-user configuration")
    .assert_lacks("host-make-ok");
    // Or in one of the other XDG base directories the caller set (outside the home): where
    // programs read their data and plugins.
    let data = fx.outside.join("xdg-data");
    mkdir(&data.join("plugins"));
    let plugins = data.join("plugins").display().to_string();
    fx.sandbox_argv(
        &["--policy", &p, "--allow-write", &plugins],
        &["make", "test"],
    )
    .env("XDG_DATA_HOME", &data)
    .cwd(&own)
    .run()
    .assert_code(125)
    .assert_stderr_contains("excluded_workspace_files")
    .assert_stderr_contains(&format!("the writable root {plugins} lies in"))
    .assert_lacks("host-make-ok");
    fx.sandbox_argv(
        &["--policy", &p, "--allow-write", &plugins],
        &["make", "test"],
    )
    .cwd(&own)
    .run()
    .assert_success()
    .assert_stdout_contains("host-make-ok");
    // From outside, pointed at the workspace's Makefile or directory by its words (all of
    // them allowed by the entry): the words name paths in a writable root.
    let any = policy(
        &fx,
        &format!(
            "[[commands]]\nprogram = \"{}\"\nexcluded = true\nallowed_args = [\"*\"]\n",
            make.display()
        ),
    );
    let makefile = fx.ws.join("Makefile").display().to_string();
    let ws = fx.ws.display().to_string();
    let dir_flag = format!("--directory={ws}");
    // make expands a leading `~` itself, with the HOME it gets (the fixture's, beside the
    // workspace): `~/../ws/Makefile` is the planted Makefile (issue 30 red team, F3).
    for argv in [
        vec!["make", "-f", makefile.as_str(), "test"],
        vec!["make", "-C", ws.as_str(), "test"],
        vec!["make", dir_flag.as_str(), "test"],
        vec!["make", "-f", "~/../ws/Makefile", "test"],
        vec!["make", "--file=~/../ws/Makefile", "test"],
        vec!["make", "-f~/../ws/Makefile", "test"],
        vec!["make", "test", "MAKEFILES=~/../ws/Makefile"],
        vec!["make", "-C", "~/../ws", "test"],
        vec!["make", "-f", "~root/../../../../../../..", "test"],
    ] {
        fx.sandbox_argv(&["--policy", &any], &argv)
            .cwd(&fx.outside)
            .run()
            .assert_code(125)
            .assert_stderr_contains("excluded_workspace_files");
        assert!(
            !mark.exists(),
            "{argv:?} ran the sandbox's Makefile on the host"
        );
    }
    // Control (a): the line the refusal names lets it through, and the planted recipe runs on
    // the host: the attack is real.
    let accepted = policy(
        &fx,
        &format!(
            "[[commands]]\nprogram = \"{}\"\nexcluded = true\nallowed_args = [\"test\"]\nruns_workspace_files = true\n",
            make.display()
        ),
    );
    let ws = fx.ws.display().to_string();
    fx.stockade(["policy", "show", "--workspace", &ws, "--policy", &accepted])
        .run()
        .assert_success()
        .assert_stdout_contains("runs_workspace_files");
    fx.sandbox_argv(&["--policy", &accepted], &["make", "test"])
        .run()
        .assert_success()
        .assert_stderr_contains("OUTSIDE the sandbox");
    assert!(
        mark.exists(),
        "control: the accepted entry did not run the planted Makefile on the host"
    );
    // Control (c): make does expand `~`: with the line the refusal names, `-f
    // ~/../ws/Makefile` from outside runs the planted recipe on the host; without it, a `~`
    // form leading outside every root still runs (the user's own Makefile).
    std::fs::remove_file(&mark).unwrap();
    // (`policy` rewrites the one policy file.)
    let any = policy(
        &fx,
        &format!(
            "[[commands]]\nprogram = \"{}\"\nexcluded = true\nallowed_args = [\"*\"]\n",
            make.display()
        ),
    );
    fx.sandbox_argv(
        &["--policy", &any],
        &["make", "-f", "~/../outside/own/Makefile", "test"],
    )
    .cwd(&fx.outside)
    .run()
    .assert_success()
    .assert_stdout_contains("host-make-ok");
    assert!(!mark.exists());
    let any_accepted = policy(
        &fx,
        &format!(
            "[[commands]]\nprogram = \"{}\"\nexcluded = true\nallowed_args = [\"*\"]\nruns_workspace_files = true\n",
            make.display()
        ),
    );
    fx.sandbox_argv(
        &["--policy", &any_accepted],
        &["make", "-f", "~/../ws/Makefile", "test"],
    )
    .cwd(&fx.outside)
    .run()
    .assert_success()
    .assert_stderr_contains("OUTSIDE the sandbox");
    assert!(
        mark.exists(),
        "control: make -f ~/../ws/Makefile did not run the planted Makefile on the host"
    );
}

/// `npm` excluded with `allowed_args = ["test"]`, run from a directory outside every writable
/// root, with `--allow-write ~/.npmrc` (a root inside the home: the home itself is in no root).
/// A sandboxed run sets npm's `script-shell` in `~/.npmrc` to a script in the workspace; the
/// host's `npm test` would run it (issue 30 red team, F4; `~/.docker/cli-plugins` the same).
/// Refused (`excluded_workspace_files`), naming the root and the per-user configuration.
/// Controls: the line the refusal names (`runs_workspace_files = true`) runs the planted
/// script on the host, and the same entry runs from there without the grant.
#[test]
fn an_excluded_npm_does_not_read_the_npmrc_the_sandbox_wrote() {
    let fx = Fixture::new();
    let Some(npm) = which("npm") else {
        println!("skipped: no npm on this host");
        return;
    };
    let mark = fx.outside.join("script-shell-ran");
    let npmrc = fx.home.join(".npmrc");
    write_file(&npmrc, "", 0o666);
    let grant = npmrc.display().to_string();
    let shell = fx.ws.join("sh.sh");
    fx.sandbox(
        &["--allow-write", &grant],
        &format!(
            "printf '#!/bin/sh\\ntouch %s\\nexec /bin/sh \"$@\"\\n' {} > {} && chmod +x {} && echo script-shell={} > ~/.npmrc && echo planted",
            sh_quote(sh_quote(&mark)),
            sh_quote(&shell),
            sh_quote(&shell),
            sh_quote(&shell)
        ),
    )
    .run()
    .assert_success()
    .assert_stdout_contains("planted");
    assert!(std::fs::read_to_string(&npmrc)
        .unwrap()
        .contains("script-shell="));
    assert!(
        !mark.exists(),
        "the sandboxed run wrote outside the workspace"
    );
    let own = fx.outside.join("own");
    mkdir(&own);
    write_file(
        &own.join("package.json"),
        r#"{"name":"own","version":"1.0.0","scripts":{"test":"echo host-npm-ok"}}"#,
        0o644,
    );
    let entry = |extra: &str| {
        policy(
            &fx,
            &format!(
                "[[commands]]\nprogram = \"{}\"\nexcluded = true\nallowed_args = [\"test\"]\n{extra}",
                npm.display()
            ),
        )
    };
    let p = entry("");
    fx.sandbox_argv(&["--policy", &p, "--allow-write", &grant], &["npm", "test"])
        .cwd(&own)
        .run()
        .assert_code(125)
        .assert_stderr_contains("excluded_workspace_files")
        .assert_stderr_contains(&format!("the writable root {grant}"))
        .assert_stderr_contains("per-user configuration and plugins there (~/.npmrc")
        .assert_stderr_contains(&format!(
            "`runs_workspace_files = true` in [[commands]] entry 0 in {p}"
        ))
        .assert_lacks("host-npm-ok");
    assert!(
        !mark.exists(),
        "the excluded npm ran the sandbox's script-shell on the host"
    );
    // Control (a): the same attack with the line the refusal names runs the planted script.
    let accepted = entry("runs_workspace_files = true\n");
    fx.sandbox_argv(
        &["--policy", &accepted, "--allow-write", &grant],
        &["npm", "test"],
    )
    .cwd(&own)
    .run()
    .assert_success()
    .assert_stderr_contains("OUTSIDE the sandbox");
    assert!(
        mark.exists(),
        "control: the accepted entry's npm did not run the planted script-shell"
    );
}

#[test]
fn an_excluded_git_does_not_check_out_what_the_sandbox_committed() {
    let fx = Fixture::new();
    // Inside: a commit holding `.envrc` (direnv runs it on the host), made without the file
    // ever being in the working tree (the sandbox refuses to create it there).
    let mark = fx.outside.join("envrc-ran");
    fx.sandbox(
        &[],
        &format!(
            "set -e; sha=$(printf 'touch %s\\n' {} | git hash-object -w --stdin); \
             git update-index --add --cacheinfo 100644,$sha,.envrc; git commit -qm evil; \
             git branch evil; git reset -q HEAD~1; echo committed",
            sh_quote(&mark)
        ),
    )
    .run()
    .assert_success()
    .assert_stdout_contains("committed");
    let envrc = fx.ws.join(".envrc");
    assert!(!envrc.exists());
    let p = git_excluded(&fx, "");
    for argv in [
        vec!["git", "checkout", "evil"],
        vec!["git", "checkout", "evil", "--", ".envrc"],
        vec!["git", "switch", "evil"],
        vec!["git", "restore", "--source=evil", ".envrc"],
        vec!["git", "reset", "--hard", "evil"],
        vec!["git", "merge", "evil"],
        vec!["git", "cherry-pick", "evil"],
        vec!["git", "stash", "pop"],
    ] {
        fx.sandbox_argv(&["--policy", &p], &argv)
            .run()
            .assert_code(125)
            .assert_stderr_contains("excluded_argument");
        assert!(!envrc.exists(), "{argv:?} wrote .envrc on the host");
    }
    // Inside the sandbox the same checkout meets the protected path.
    fx.sandbox_argv(&[], &["git", "checkout", "-q", "evil"])
        .run();
    assert!(!envrc.exists(), "the sandboxed checkout created .envrc");
    // Control: git on the host writes it.
    // (`-f`: the sandboxed checkout above may have moved HEAD without the file.)
    fx.git_host(&["checkout", "-q", "-f", "evil"])
        .assert_success();
    assert!(
        envrc.exists(),
        "control: host checkout did not write .envrc"
    );
}

#[test]
fn an_excluded_git_talks_to_no_local_repository() {
    let fx = Fixture::new();
    let mark = fx.outside.join("post-receive-ran");
    // A repository in the workspace whose hook runs when something is pushed to it (what a
    // run could leave for the host; the sandbox refuses the hook, the test plants it).
    let planted = fx.ws.join("planted.git");
    fx.host(&format!("git init -q --bare {}", sh_quote(&planted)))
        .run()
        .assert_success();
    write_file(
        &planted.join("hooks/post-receive"),
        format!("#!/bin/sh\ntouch {}\n", sh_quote(&mark)),
        0o755,
    );
    let p = git_excluded(&fx, "");
    fx.sandbox_argv(
        &["--policy", &p],
        &["git", "push", "./planted.git", "HEAD:refs/heads/x"],
    )
    .run()
    .assert_code(125)
    .assert_stderr_contains("local path");
    assert!(!mark.exists(), "the excluded push ran the planted hook");
    // Even with the words allowed by the entry, git itself refuses the local transport.
    let allowed = git_excluded(&fx, "allowed_args = [\"./planted.git\"]\n");
    fx.sandbox_argv(
        &["--policy", &allowed],
        &["git", "push", "./planted.git", "HEAD:refs/heads/x"],
    )
    .run()
    .assert_failure()
    .assert_stderr_contains("not allowed");
    assert!(!mark.exists(), "the excluded push ran the planted hook");
    // Control: git on the host pushes there and runs the hook.
    fx.host("git push -q ./planted.git HEAD:refs/heads/x")
        .run()
        .assert_success();
    assert!(mark.exists(), "control: the host push did not run the hook");
}

/// The assumption the excluded git rests on: the workspace's repository config is the
/// user's, because the sandbox cannot make it run code (README, "Git").
#[test]
fn the_repository_an_excluded_git_reads_keeps_the_sandboxs_config_out() {
    let fx = Fixture::new();
    let (script, mark) = planted(&fx);
    // Inside: every way to give the repository a code-running key.
    fx.sandbox(
        &[],
        &format!(
            "git config core.fsmonitor {0}; git config core.hooksPath .; \
             git config include.path ../inc; printf '[core]\\n\\tfsmonitor = {0}\\n' > inc; \
             printf '[core]\\n\\tfsmonitor = {0}\\n' >> .git/config; \
             cp .git/config c && printf '[core]\\n\\tfsmonitor = {0}\\n' >> c && mv c .git/config; \
             true",
            script
        ),
    )
    .run();
    let p = git_excluded(&fx, "");
    fx.sandbox_argv(&["--policy", &p], &["git", "status"])
        .run()
        .assert_success();
    assert!(
        !mark.exists(),
        "the sandbox gave the repository a key the excluded git ran"
    );
    // Control: the same key written on the host is run by the excluded git (the assumption
    // is what stands between them).
    fx.git_host(&["config", "core.fsmonitor", &script])
        .assert_success();
    fx.sandbox_argv(&["--policy", &p], &["git", "status"])
        .run()
        .assert_success();
    assert!(
        mark.exists(),
        "control: the excluded git did not read the repository config"
    );
}

/// The repository's hooks are the user's, but they run the workspace's code, which the
/// sandbox writes: a `pre-commit` hook running `./scripts/lint.sh` ran the sandbox's script on
/// the host at an excluded `git commit` (red team of issue 30, item 5). An excluded git runs
/// no hook.
#[test]
fn an_excluded_git_runs_no_hook_that_runs_the_workspaces_code() {
    let fx = Fixture::new();
    let mark = fx.outside.join("lint-ran");
    std::fs::create_dir_all(fx.ws.join("scripts")).unwrap();
    write_file(
        &fx.ws.join("scripts/lint.sh"),
        "#!/bin/sh\necho lint ok\n",
        0o755,
    );
    fx.git_host(&["add", "scripts"]).assert_success();
    fx.git_host(&["commit", "-qm", "lint"]).assert_success();
    // The user's hook, written on the host.
    write_file(
        &fx.ws.join(".git/hooks/pre-commit"),
        "#!/bin/sh\nexec ./scripts/lint.sh\n",
        0o755,
    );
    // Inside: the script the hook runs is the workspace's, and writable.
    fx.sandbox(
        &[],
        &format!(
            "printf '#!/bin/sh\\ntouch %s\\n' {} > scripts/lint.sh && echo more >> scripts/lint.sh.txt",
            sh_quote(&mark)
        ),
    )
    .run()
    .assert_success();
    let p = git_excluded(&fx, "");
    fx.sandbox_argv(&["--policy", &p], &["git", "add", "-A"])
        .run()
        .assert_success();
    fx.sandbox_argv(&["--policy", &p], &["git", "commit", "-qm", "wip"])
        .run()
        .assert_success()
        .assert_stderr_contains("OUTSIDE the sandbox");
    assert!(
        !mark.exists(),
        "the excluded git commit ran the hook, which ran the sandbox's script on the host"
    );
    // Control: git on the host runs the hook, and with it the sandbox's script.
    std::fs::write(fx.ws.join("scripts/lint.sh.txt"), "again\n").unwrap();
    fx.git_host(&["commit", "-qam", "host"]).assert_success();
    assert!(
        mark.exists(),
        "control: the host commit did not run the hook"
    );
}

/// `git diff A B` with a path outside the repository is git's implicit `--no-index`: it
/// printed any host file, on the host and unmasked (red team of issue 30, item 5). Refused,
/// by an absolute path, by `..`, and through a link the sandbox made; control: host git
/// prints the file.
#[test]
fn an_excluded_git_diff_prints_no_file_outside_the_repository() {
    let fx = Fixture::new();
    let secret = fx.outside.join("secret.txt");
    write_file(&secret, "NOINDEX-SECRET\n", 0o600);
    fx.sandbox(&[], &format!("ln -s {} out", sh_quote(&fx.outside)))
        .run()
        .assert_success();
    let p = git_excluded(&fx, "");
    let abs = secret.display().to_string();
    let dots = format!(
        "../{}/secret.txt",
        fx.outside.file_name().unwrap().to_string_lossy()
    );
    for argv in [
        vec!["git", "diff", abs.as_str(), "/dev/null"],
        vec!["git", "diff", "--stat", "--", abs.as_str(), "/dev/null"],
        vec!["git", "diff", "out/secret.txt", "/dev/null"],
        vec!["git", "diff", dots.as_str(), "/dev/null"],
    ] {
        fx.sandbox_argv(&["--policy", &p], &argv)
            .run()
            .assert_code(125)
            .assert_stderr_contains("excluded_argument")
            .assert_lacks("NOINDEX-SECRET");
    }
    // Everyday diffs still run outside.
    fx.sandbox_argv(&["--policy", &p], &["git", "diff", "HEAD", "--stat"])
        .run()
        .assert_success();
    // Control: the same words on the host print the file.
    fx.host(&format!("git diff {} /dev/null; true", sh_quote(&secret)))
        .run()
        .assert_stdout_contains("NOINDEX-SECRET");
}

/// `docker` excluded with `allowed_args = ["info", "--format*", "{{*"]`, run from a directory
/// outside every writable root, with `--allow-write ~/.docker` (a hidden entry at the top of
/// the home). A sandboxed run plants `~/.docker/cli-plugins/docker-evil`; the host's `docker
/// info` runs every CLI plugin to read its metadata (issue 30 red team, F4). Refused
/// (`excluded_workspace_files`). Control: the line the refusal names (`runs_workspace_files =
/// true`) runs the planted plugin on the host.
#[test]
fn an_excluded_docker_runs_no_cli_plugin_the_sandbox_planted() {
    let fx = Fixture::new();
    let Some(docker) = which("docker") else {
        println!("skipped: no docker on this host");
        return;
    };
    let mark = fx.outside.join("plugin-ran");
    let dot_docker = fx.home.join(".docker");
    mkdir(&dot_docker);
    chmod(&dot_docker, 0o777);
    let grant = dot_docker.display().to_string();
    fx.sandbox(
        &["--allow-write", &grant],
        &format!(
            "mkdir -p ~/.docker/cli-plugins && printf '#!/bin/sh\\ntouch %s\\n[ \"$1\" = docker-cli-plugin-metadata ] && echo %s\\n' {} {} > ~/.docker/cli-plugins/docker-evil && chmod 755 ~/.docker/cli-plugins/docker-evil && echo planted",
            sh_quote(sh_quote(&mark)),
            sh_quote(sh_quote(r#"{"SchemaVersion":"0.1.0","Vendor":"x"}"#)),
        ),
    )
    .run()
    .assert_success()
    .assert_stdout_contains("planted");
    assert!(dot_docker.join("cli-plugins/docker-evil").exists());
    assert!(
        !mark.exists(),
        "the sandboxed run wrote outside the workspace"
    );
    let entry = |extra: &str| {
        policy(
            &fx,
            &format!(
                "[[commands]]\nprogram = \"{}\"\nexcluded = true\nallowed_args = [\"info\", \"--format*\", \"{{{{*\"]\n{extra}",
                docker.display()
            ),
        )
    };
    let p = entry("");
    let argv = ["docker", "info", "--format", "{{.ClientInfo.Plugins}}"];
    fx.sandbox_argv(&["--policy", &p, "--allow-write", &grant], &argv)
        .cwd(&fx.outside)
        .run()
        .assert_code(125)
        .assert_stderr_contains("excluded_workspace_files")
        .assert_stderr_contains(&format!("the writable root {grant}"))
        .assert_stderr_contains("~/.docker/cli-plugins")
        .assert_lacks("OUTSIDE the sandbox");
    assert!(
        !mark.exists(),
        "the excluded docker ran the sandbox's CLI plugin on the host"
    );
    // Control: with the line the refusal names, the host's docker runs the planted plugin.
    let accepted = entry("runs_workspace_files = true\n");
    fx.sandbox_argv(&["--policy", &accepted, "--allow-write", &grant], &argv)
        .cwd(&fx.outside)
        .run()
        .assert_stderr_contains("OUTSIDE the sandbox");
    assert!(
        mark.exists(),
        "control: the accepted entry's docker did not run the planted CLI plugin"
    );
}
