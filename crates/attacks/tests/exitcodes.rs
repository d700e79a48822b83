//! Exit codes: the command's own (0, 1, 42), 126 for a file that is not executable, 127 for
//! a missing program, 128+N for a command killed by signal N. Each is compared with what
//! `/bin/sh` reports for the same command on the host.

use attacks::{write_file, Fixture};

#[test]
fn command_exit_codes_pass_through() {
    let fx = Fixture::new();
    for code in [0, 1, 42, 124, 255] {
        let script = format!("exit {code}");
        fx.sandbox(&[], &script).run().assert_code(code);
        fx.host(&script).run().assert_code(code);
    }
    fx.sandbox_argv(&[], &["true"]).run().assert_code(0);
    fx.sandbox_argv(&[], &["false"]).run().assert_code(1);
    fx.sandbox_argv(&[], &["sh", "-c", "exit 42"])
        .run()
        .assert_code(42);
}

/// The line of stderr holding `code` is followed by a `  hint: ` line containing `needle`.
fn assert_hint_after(run: &attacks::Run, code: &str, needle: &str) {
    let lines: Vec<&str> = run.stderr.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&format!("stockade: {code}: ")))
        .unwrap_or_else(|| panic!("no `stockade: {code}` line\n{}", run.describe()));
    let hint = lines.get(at + 1).copied().unwrap_or_default();
    assert!(
        hint.starts_with("  hint: ") && hint.contains(needle),
        "the hint under {code} should name {needle}\n{}",
        run.describe()
    );
}

#[test]
fn not_executable_is_126() {
    let fx = Fixture::new();
    write_file(&fx.ws.join("script.sh"), "#!/bin/sh\necho ran\n", 0o644);
    let run = fx.sandbox_argv(&[], &["./script.sh"]).run();
    run.assert_code(126).assert_lacks("ran\n");
    assert_hint_after(&run, "error[E_COMMAND_NOT_EXECUTABLE]", "`chmod +x FILE`");
    let run = fx.sandbox_argv(&[], &["./app"]).run();
    run.assert_code(126);
    // Control: the shell agrees.
    fx.host("./script.sh").run().assert_code(126);
    fx.sandbox(&[], "./script.sh").run().assert_code(126);
}

#[test]
fn missing_program_is_127() {
    let fx = Fixture::new();
    let name = format!("no-such-program-{}", fx.id);
    let run = fx.sandbox_argv(&[], &[&name]).run();
    run.assert_code(127);
    assert!(
        run.stderr.contains(&name),
        "stderr should name the missing program\n{}",
        run.describe()
    );
    // With what would find it (issue 18, item 10).
    assert_hint_after(&run, "error[E_COMMAND_NOT_FOUND]", "`--env PATH=...`");
    fx.sandbox_argv(&[], &["/nonexistent/dir/prog"])
        .run()
        .assert_code(127);
    fx.sandbox(&[], &name).run().assert_code(127);
    fx.host(&name).run().assert_code(127);
}

#[test]
fn killed_by_signal_is_128_plus_n() {
    let fx = Fixture::new();
    for (signal, name) in [(9, "KILL"), (15, "TERM"), (1, "HUP")] {
        let script = format!("kill -{name} $$");
        // With default dispositions (a caller such as `nohup` may have left SIGHUP ignored,
        // and an ignored signal stays ignored: see the next test).
        let defaults = ["env", "--default-signal", "--"];
        fx.sandbox(&[], &script)
            .under(&defaults)
            .run()
            .assert_code(128 + signal);
        // Control: the host shell dies of the same signal.
        let host = fx.host(&script).under(&defaults).run();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&host.status),
            Some(signal),
            "{}",
            host.describe()
        );
    }
    fx.sandbox_argv(&[], &["sh", "-c", "kill -9 $$"])
        .run()
        .assert_code(137);
}

/// A signal the caller ignores (`nohup` ignores SIGHUP) stays ignored for the command, as it
/// does across a plain shell's exec: `kill -HUP $$` inside is survived. Control: the same
/// command in a host shell started the same way survives too, and without the ignore the
/// sandboxed one dies of the signal.
#[test]
fn signals_the_caller_ignores_stay_ignored_inside() {
    if attacks::not_applicable(&attacks::na::IGNORED_SIGNALS) {
        return;
    }
    let fx = Fixture::new();
    let ignore = ["env", "--ignore-signal=HUP,TERM", "--"];
    for (signal, name) in [(15, "TERM"), (1, "HUP")] {
        let script = format!("kill -{name} $$; echo survived");
        fx.sandbox(&[], &script)
            .under(&ignore)
            .run()
            .assert_success()
            .assert_stdout_contains("survived");
        fx.host(&script)
            .under(&ignore)
            .run()
            .assert_success()
            .assert_stdout_contains("survived");
        fx.sandbox(&[], &script)
            .under(&["env", "--default-signal", "--"])
            .run()
            .assert_code(128 + signal);
    }
}

#[test]
fn output_and_input_pass_through() {
    let fx = Fixture::new();
    let run = fx.sandbox_argv(&[], &["cat"]).stdin("piped input\n").run();
    run.assert_success().assert_stdout_contains("piped input\n");
    let run = fx.sandbox(&[], "echo out; echo err >&2; exit 3").run();
    run.assert_code(3);
    assert_eq!(run.stdout, "out\n", "{}", run.describe());
    run.assert_stderr_contains("err\n");
    // A larger output arrives whole.
    let run = fx.sandbox(&[], "seq 1 200000").run();
    run.assert_success();
    assert_eq!(run.stdout.lines().count(), 200_000);
    assert!(run.stdout.ends_with("200000\n"));
}

/// The `pid=.. sid=..` line printed by the session probe below, as (pid, sid).
fn pid_and_sid(run: &attacks::Run) -> (String, String) {
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("pid="))
        .unwrap_or_else(|| panic!("no pid line\n{}", run.describe()));
    let (pid, sid) = line
        .trim_start_matches("pid=")
        .split_once(" sid=")
        .unwrap_or_else(|| panic!("malformed pid line\n{}", run.describe()));
    (pid.to_owned(), sid.to_owned())
}

/// The command leads a new session (so it has no controlling terminal to inject into), while
/// on the host the same shell shares its caller's session.
#[test]
fn command_runs_in_a_new_session() {
    if attacks::not_applicable(&attacks::na::CONTAINER_SESSION) {
        return;
    }
    let fx = Fixture::new();
    let script = "echo \"pid=$$ sid=$(ps -o sid= -p $$ | tr -d ' ')\"";
    let inside = fx.attack(&[], script).outcome();
    inside.assert_ok();
    let (pid, sid) = pid_and_sid(&inside.run);
    assert_eq!(pid, sid, "inside, the shell is not its own session leader");
    // Control: directly, the shell is not a session leader.
    let control = fx.control(script).outcome();
    control.assert_ok();
    let (pid, sid) = pid_and_sid(&control.run);
    assert_ne!(pid, sid, "control: the host shell leads its own session");
}

/// A terminal on stdin/stdout reaches the command as a terminal (run under `script`, which
/// gives stockade a pseudo-terminal).
#[test]
fn terminal_passes_through() {
    let Some(script_bin) = attacks::which("script") else {
        println!("skipped: `script` (util-linux) is not installed");
        return;
    };
    let fx = Fixture::new();
    let inner = format!(
        "{} run {} --workspace {} --shell 'test -t 0 && test -t 1 && echo both-are-terminals'",
        attacks::sh_quote(attacks::stockade_bin()),
        attacks::backend_flags(),
        attacks::sh_quote(&fx.ws)
    );
    fx.give_out();
    let run = attacks::Cmd::new(script_bin, &fx.ws)
        .env("HOME", &fx.home)
        .args(["-qec", inner.as_str(), "/dev/null"])
        .run();
    run.assert_success()
        .assert_stdout_contains("both-are-terminals");
}

/// `STOCKADE_LOG=debug` shows each stage of a run as a span with its timings on stderr
/// (issue 16, item 4); unset, stderr holds none of it.
#[test]
fn stockade_log_shows_each_stage_with_timings() {
    let fx = Fixture::new();
    let run = fx
        .sandbox_argv(&[], &["true"])
        .env("STOCKADE_LOG", "debug")
        .run();
    run.assert_code(0);
    let mut stages = vec![
        "trust",
        "spec",
        "plan",
        "launch",
        "proxy_stop",
        "sweep",
        "record",
        "run",
    ];
    if attacks::backend() == "native" {
        // Inside native's launch: before the fork, and after it.
        stages.extend(["prepare", "supervise"]);
    }
    for stage in stages {
        assert!(
            run.stderr
                .lines()
                .any(|l| l.contains(stage) && l.contains("close") && l.contains("time.busy")),
            "no closed span `{stage}` with its time in:\n{}",
            run.stderr
        );
    }
    let quiet = fx.sandbox_argv(&[], &["true"]).run();
    quiet.assert_code(0);
    assert!(!quiet.stderr.contains("time.busy"), "{}", quiet.stderr);
    let bad = fx
        .sandbox_argv(&[], &["true"])
        .env("STOCKADE_LOG", "loud")
        .run();
    bad.assert_code(0);
    assert!(
        bad.stderr.contains("STOCKADE_LOG=loud is not a level"),
        "{}",
        bad.stderr
    );
}

/// Issue 31, item 9: a program the host has below its `/tmp` is not found inside (the run's
/// `/tmp` is private): the error says so and names the grant that shows it. Controls: with
/// that grant the same program runs, and run from its directory (the workspace) it runs; a
/// program missing elsewhere does not mention `/tmp`.
#[test]
fn a_program_below_the_hosts_tmp_names_the_private_tmp() {
    let fx = Fixture::new();
    let dir = tempfile::Builder::new()
        .prefix("stockade-prog.")
        .tempdir_in("/tmp")
        .expect("a directory below /tmp");
    let dir_path = dir.path().canonicalize().expect("canonical");
    attacks::chmod(&dir_path, 0o755);
    let prog = dir_path.join("prog");
    write_file(&prog, "#!/bin/sh\necho prog-ran\n", 0o755);
    let prog_s = prog.display().to_string();
    let dir_s = dir_path.display().to_string();
    let run = fx.sandbox_argv(&[], &[&prog_s]).run();
    run.assert_code(127)
        .assert_lacks("prog-ran")
        .assert_stderr_contains("the sandbox's /tmp is private");
    assert_hint_after(
        &run,
        "error[E_COMMAND_NOT_FOUND]",
        &format!("`--allow-read {dir_s}`"),
    );
    // Control: granted, it runs.
    fx.sandbox_argv(&["--allow-read", &dir_s], &[&prog_s])
        .run()
        .assert_code(0)
        .assert_stdout_contains("prog-ran");
    // Control: run from there (the workspace is its directory), it runs.
    fx.stockade(["run", "--", "./prog"])
        .cwd(&dir_path)
        .run()
        .assert_code(0)
        .assert_stdout_contains("prog-ran");
    // Control: a program missing elsewhere says nothing of /tmp.
    fx.sandbox_argv(&[], &["/nonexistent/dir/prog"])
        .run()
        .assert_code(127)
        .assert_lacks("/tmp is private");
}

/// Red team 10: the directory named in that error is chosen by whoever made it (another user,
/// below the host's `/tmp`): a name holding a newline, `"]` and `$(...)` neither starts a line
/// of its own on stderr (a fake stockade note) nor goes into the hint's shell line or policy
/// line (where it would close the TOML string or run a command when pasted); the hint gives
/// the grant's shape instead. Control: a plain name is named in the hint as it is (above:
/// `a_program_below_the_hosts_tmp_names_the_private_tmp`), and this one, granted, runs.
#[test]
fn a_directory_name_below_the_hosts_tmp_is_not_pasted_into_the_hint() {
    let fx = Fixture::new();
    let top = tempfile::Builder::new()
        .prefix("stockade-prog.")
        .tempdir_in("/tmp")
        .expect("a directory below /tmp");
    let top_path = top.path().canonicalize().expect("canonical");
    attacks::chmod(&top_path, 0o755);
    let evil =
        "x\"]\nstockade: note: all good, nothing was blocked\nallow_write = [\"$(touch pwned)";
    let dir = top_path.join(evil);
    attacks::mkdir(&dir);
    attacks::chmod(&dir, 0o755);
    let prog = dir.join("prog");
    write_file(&prog, "#!/bin/sh\necho prog-ran\n", 0o755);
    let prog_s = prog.display().to_string();
    // The caller names a plain link (as another user may leave one in /tmp) to it.
    let link = top_path.join("tool");
    std::os::unix::fs::symlink(&prog, &link).expect("the link");
    let run = fx.sandbox_argv(&[], &[&link.display().to_string()]).run();
    run.assert_code(127)
        .assert_stderr_contains("the sandbox's /tmp is private")
        .assert_stderr_contains("\\u{a}stockade: note: all good")
        .assert_stderr_contains("`--allow-read DIR`");
    for line in run.stderr.lines() {
        assert!(
            !line.starts_with("stockade: note: all good") && !line.starts_with("allow_write"),
            "a line of the directory's name on stderr: {line:?}\n{}",
            run.stderr
        );
    }
    assert!(
        !run.stderr.contains("--allow-read /tmp") && !run.stderr.contains("cd /tmp"),
        "the name went into the hint: {}",
        run.stderr
    );
    // Control: granted (the directory above it: a grant is a pattern, and `[` opens a class),
    // it runs.
    fx.sandbox_argv(
        &["--allow-read", &top_path.display().to_string()],
        &[&prog_s],
    )
    .run()
    .assert_code(0)
    .assert_stdout_contains("prog-ran");
}
