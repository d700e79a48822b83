//! Time limit: at `--timeout` the whole run ends, including processes that trap SIGTERM and
//! daemons that left the session, and stockade exits 124 with an `E_TIMEOUT` event. (The
//! other limits of the resource-limits issue are not built yet.)

use std::time::{Duration, Instant};

use attacks::{json_str, kill_all, processes_with, read_json, read_jsonl, wait_until, Fixture};

#[test]
fn timeout_ends_a_sleeping_command_with_124() {
    let fx = Fixture::new();
    let records = fx.records();
    let mut opts = records.opts();
    opts.extend(["--timeout", "2"]);
    let started = Instant::now();
    let run = fx.sandbox(&opts, "sleep 100").run();
    let took = started.elapsed();
    run.assert_code(124);
    run.assert_stderr_contains("E_TIMEOUT");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_millis(4500),
        "returned after {took:?}"
    );
    let report = read_json(&records.report);
    assert_eq!(json_str(&report, "ended_by"), "timeout", "{report}");
    assert!(
        read_jsonl(&records.audit)
            .iter()
            .any(|e| json_str(e, "event") == "timeout" && json_str(e, "code") == "E_TIMEOUT"),
        "no timeout event in the audit log"
    );

    // Control: without a limit the same kind of command runs past the 2 s.
    let started = Instant::now();
    let run = fx.sandbox(&["--timeout", "0"], "sleep 3").run();
    run.assert_code(0);
    assert!(started.elapsed() >= Duration::from_secs(3));
}

#[test]
fn timeout_ends_term_trapping_and_daemonized_processes() {
    let fx = Fixture::new();
    let tag = fx.marker("timeout");
    let script = format!(
        "trap '' TERM; (trap '' TERM HUP; setsid sh -c 'trap \"\" TERM HUP; while :; do sleep 1; done; : {tag}' >/dev/null 2>&1 &); \
         sh -c 'trap \"\" TERM; while :; do sleep 1; done; : {tag}'"
    );
    let started = Instant::now();
    let run = fx.sandbox(&["--timeout", "2"], &script).run();
    let took = started.elapsed();
    let left = processes_with(&tag);
    kill_all(&tag);
    run.assert_code(124);
    assert!(
        took < Duration::from_millis(4500),
        "returned after {took:?}"
    );
    assert!(left.is_empty(), "processes outlived the timeout: {left:?}");

    // Control: the same tree under a shell killed after 2 s leaves its daemon running.
    let control = format!(
        "timeout -s KILL 2 sh -c {}; true",
        attacks::sh_quote(&script)
    );
    let run = fx.host(&control).run();
    run.assert_code(0);
    let survived = wait_until(|| !processes_with(&tag).is_empty(), Duration::from_secs(1));
    kill_all(&tag);
    assert!(
        survived,
        "control: the daemon should survive a plain timeout"
    );
}

#[test]
fn limits_timeout_in_a_policy_file_applies() {
    let fx = Fixture::new();
    let policy = fx.ws.join("limits.toml");
    attacks::write_file(&policy, "[limits]\ntimeout = 1\n", 0o644);
    let started = Instant::now();
    let run = fx
        .sandbox(&["--policy", &policy.display().to_string()], "sleep 30")
        .run();
    run.assert_code(124);
    assert!(started.elapsed() < Duration::from_millis(3500));
}

/// Filling the private `/tmp` (or `/dev/shm`) stops at `--tmp-size` with ENOSPC; the same
/// write fits under a larger limit (control).
#[test]
fn tmp_size_bounds_the_private_tmp_and_shm() {
    let fx = Fixture::new();
    for dir in ["/tmp", "/dev/shm"] {
        let script = format!("dd if=/dev/zero of={dir}/fill bs=1M count=24 2>&1; echo dd-rc=$?");
        let run = fx.sandbox(&["--tmp-size", "8M"], &script).run();
        run.assert_code(0);
        run.assert_stdout_contains("No space left on device");
        run.assert_stdout_contains("dd-rc=1");
        let run = fx.sandbox(&["--tmp-size", "64M"], &script).run();
        run.assert_code(0);
        run.assert_stdout_contains("dd-rc=0");
    }
}

#[test]
fn tmp_size_below_a_mebibyte_is_refused() {
    let fx = Fixture::new();
    let run = fx.sandbox(&["--tmp-size", "1k"], "true").run();
    run.assert_code(125);
    run.assert_stderr_contains("E_POLICY_INVALID");
}

/// `--files N` caps open files per process (soft and hard): opening more fails with EMFILE,
/// and the command cannot raise it again. Control: a larger limit lets the same opens succeed.
#[test]
fn files_limit_caps_open_descriptors() {
    let Some(py) = attacks::python3("open files") else {
        return;
    };
    let fx = Fixture::new();
    let script = format!(
        "ulimit -Hn; ulimit -n 100000 2>/dev/null && echo RAISED; {} -c 'import os\nn=0\ntry:\n    while n < 200:\n        os.open(\"/dev/null\", os.O_RDONLY); n += 1\nexcept OSError as e:\n    print(\"EMFILE\" if e.errno == 24 else e)\nprint(\"opened\", n)'",
        attacks::sh_quote(&py)
    );
    let run = fx.sandbox(&["--files", "64"], &script).run();
    run.assert_code(0);
    run.assert_stdout_contains("64\n");
    run.assert_stdout_contains("EMFILE");
    run.assert_lacks("RAISED");
    let run = fx.sandbox(&["--files", "1024"], &script).run();
    run.assert_code(0);
    run.assert_stdout_contains("opened 200");
}
