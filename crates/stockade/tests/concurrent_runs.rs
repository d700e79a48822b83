//! Two runs at once in one process, each with its own output and its own handle (issue 16,
//! item 2): outputs stay apart, a signal sent through one handle reaches only that run's
//! command, and cancelling one run ends it while the other finishes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use stockade::{Cancel, RunIo, RunRequest};

/// A run of `script` in `ws` on its own thread; its stdout lines arrive on the returned
/// channel as they are written.
fn start(
    ws: &std::path::Path,
    script: &str,
    control: Cancel,
) -> (
    std::thread::JoinHandle<stockade::RunResult>,
    mpsc::Receiver<String>,
) {
    let (out_r, out_w) = std::io::pipe().expect("a pipe");
    let (_err_r, err_w) = std::io::pipe().expect("a pipe");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out_r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let argv = vec!["/bin/sh".to_string(), "-c".to_string(), script.to_string()];
    let request = RunRequest::new(argv, Some(ws.to_path_buf())).expect("a request");
    let policy = policy::resolve(None, &policy::Overrides::default()).expect("the default policy");
    let io = RunIo::captured(out_w.into(), err_w.into(), control);
    let run = std::thread::spawn(move || {
        stockade::run_with_io(&policy, &request, io).expect("the run starts")
    });
    (run, rx)
}

fn wait_for(rx: &mpsc::Receiver<String>, line: &str, seen: &mut Vec<String>) {
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => {
                let found = l == line;
                seen.push(l);
                if found {
                    return;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    panic!("no line {line:?}; saw {seen:?}");
}

#[test]
fn two_runs_keep_their_outputs_signals_and_lifetimes_apart() {
    let tmp = tempfile::Builder::new()
        .prefix("stockade-concurrent.")
        .tempdir_in("/var/tmp")
        .expect("a directory");
    let (ws_a, ws_b) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir_all(&ws_a).unwrap();
    std::fs::create_dir_all(&ws_b).unwrap();
    let script = |name: &str, rounds: u32| {
        format!(
            "trap 'echo {name}-got-USR1' USR1; echo {name}-start; i=0; \
             while [ $i -lt {rounds} ]; do sleep 0.1; i=$((i+1)); done; echo {name}-end"
        )
    };
    let (control_a, control_b) = (Cancel::new(), Cancel::new());
    let began = Instant::now();
    let (run_a, out_a) = start(&ws_a, &script("A", 300), control_a.clone());
    let (run_b, out_b) = start(&ws_b, &script("B", 30), control_b.clone());
    let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
    wait_for(&out_a, "A-start", &mut seen_a);
    wait_for(&out_b, "B-start", &mut seen_b);

    // A signal through A's handle reaches A's command only.
    control_a.signal(libc::SIGUSR1);
    wait_for(&out_a, "A-got-USR1", &mut seen_a);

    // Cancelling A ends it; B runs to its end.
    control_a.cancel();
    let a = run_a.join().expect("run A");
    let b = run_b.join().expect("run B");
    seen_a.extend(out_a.try_iter());
    seen_b.extend(out_b.try_iter());
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "A was not ended by its cancel"
    );
    assert_eq!(seen_b, ["B-start", "B-end"], "B's output");
    assert_eq!(b.exit_code, 0);
    assert!(!control_b.is_cancelled());
    assert!(
        !seen_a.iter().any(|l| l == "A-end"),
        "A ran to its end: {seen_a:?}"
    );
    assert!(seen_a.iter().all(|l| l.starts_with('A')), "{seen_a:?}");
    assert_eq!(a.outcome.ended_by, Some("interrupt"));
    assert_ne!(a.exit_code, 0);
}

/// A run's init gives up what it inherited from the supervisor: another run's input pipe
/// (whose write end this process held when the first run started) reaches its end for the
/// second run's command as soon as the writer closes it, not when the first run ends.
/// (Before: every init kept all of the supervisor's descriptors for its whole run, so a
/// command reading a pipe of a later run waited for the earlier run to end.)
#[test]
fn a_run_holds_nothing_of_another_runs_pipes() {
    let tmp = tempfile::Builder::new()
        .prefix("stockade-concurrent.")
        .tempdir_in("/var/tmp")
        .expect("a directory");
    let ws = tmp.path().to_path_buf();
    // Run B's input, made before run A starts (so A's init is cloned while both ends exist).
    let (in_r, mut in_w) = std::io::pipe().expect("a pipe");
    let (run_a, rx_a) = start(&ws, "echo a-start; sleep 8; echo a-end", Cancel::new());
    let mut seen = Vec::new();
    wait_for(&rx_a, "a-start", &mut seen);
    std::io::Write::write_all(&mut in_w, b"input-of-b\n").expect("write B's input");
    drop(in_w);
    let (out_r, out_w) = std::io::pipe().expect("a pipe");
    let (_err_r, err_w) = std::io::pipe().expect("a pipe");
    let argv = vec!["/bin/sh".into(), "-c".into(), "cat; echo b-done".into()];
    let request = RunRequest::new(argv, Some(ws.clone())).expect("a request");
    let policy = policy::resolve(None, &policy::Overrides::default()).expect("the default policy");
    let io = RunIo::captured(out_w.into(), err_w.into(), Cancel::new())
        .with_stdin(stockade::Input::Fd(in_r.into()));
    let run_b = std::thread::spawn(move || stockade::run_with_io(&policy, &request, io));
    let mut out = String::new();
    std::io::Read::read_to_string(&mut { out_r }, &mut out).expect("B's output");
    let b = run_b.join().expect("run B's thread").expect("run B starts");
    assert_eq!(out, "input-of-b\nb-done\n");
    assert_eq!(b.exit_code, 0);
    // B saw the end of its input while A was still running.
    assert!(!run_a.is_finished(), "run B ended only after run A");
    let a = run_a.join().expect("run A's thread");
    assert_eq!(a.exit_code, 0);
}

/// One run of `script` in `ws` under `backend`, to its end.
fn run_to_end(
    ws: &std::path::Path,
    backend: policy::BackendName,
    script: &str,
) -> stockade::RunResult {
    let (_out_r, out_w) = std::io::pipe().expect("a pipe");
    let (_err_r, err_w) = std::io::pipe().expect("a pipe");
    let argv = vec!["/bin/sh".to_string(), "-c".to_string(), script.to_string()];
    let request = RunRequest::new(argv, Some(ws.to_path_buf())).expect("a request");
    let mut policy =
        policy::resolve(None, &policy::Overrides::default()).expect("the default policy");
    policy.backend = backend;
    let io = RunIo::captured(out_w.into(), err_w.into(), Cancel::new());
    stockade::run_with_io(&policy, &request, io).expect("the run starts")
}

/// Each run's usage is its own: in a process that runs many sandboxes (`stockade mcp`, a
/// library caller) every run was given the CPU time of the runs before it too (the backends
/// read `RUSAGE_CHILDREN`, which sums every child the process ever waited for; now each waits
/// for its own with `wait4`). A run that burns about a second of CPU, then a run of `true`: the
/// second counts far less. Control: the first counts what it burned. Native, and gVisor where
/// runsc is installed (its own start costs CPU too: the busy run burns more than that).
#[test]
fn each_runs_usage_is_its_own() {
    let tmp = tempfile::Builder::new()
        .prefix("stockade-usage.")
        .tempdir_in("/var/tmp")
        .expect("a directory");
    let mut backends = vec![policy::BackendName::Native];
    if std::path::Path::new("/usr/bin/runsc").exists() {
        backends.push(policy::BackendName::Gvisor);
    } else {
        println!("gVisor: skipped (no /usr/bin/runsc)");
    }
    let busy = "i=0; while [ $i -lt 1500000 ]; do i=$((i+1)); done";
    for backend in backends {
        let cpu = |r: &stockade::RunResult| r.outcome.usage.cpu_usec.expect("CPU time counted");
        let burned = cpu(&run_to_end(tmp.path(), backend, busy));
        let idle = cpu(&run_to_end(tmp.path(), backend, "true"));
        assert!(
            burned >= 500_000,
            "{backend:?}: control: the busy run counted {burned} µs"
        );
        assert!(
            idle < burned / 2,
            "{backend:?}: the run of `true` counted {idle} µs, the busy run before it {burned} µs"
        );
    }
}
