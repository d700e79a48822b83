//! The wait for runsc: a thread of its own reaps it (with its usage), while this one passes
//! the caller's signals and cancel on and ends the run at its deadline.

use std::process::ExitStatus;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sandbox::Cancel;

use super::control::{kill, Control};
use super::io_err;
use crate::{Error, Plan};

/// After the deadline or a cancel: how long the command has after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(1);
/// How often the wait looks at this process's signals.
const TICK: Duration = Duration::from_millis(50);

/// runsc's exit status, and the CPU time (µs) and largest resident size (bytes) of it and its
/// waited-for descendants (none when runsc had been reaped already).
pub(super) type Reaped = (ExitStatus, Option<(u64, u64)>);

/// Waits for runsc (the waiter thread's one child) to end: its usage is this run's alone
/// (`sys::raw::wait_with_rusage`; `RUSAGE_CHILDREN` would sum every run of this process).
/// Nothing else reaps it (`attach_console` looks with `WNOWAIT`).
fn reap(child: &mut std::process::Child) -> std::io::Result<Reaped> {
    use std::os::unix::process::ExitStatusExt;
    match sys::raw::wait_with_rusage(child.id() as libc::pid_t) {
        Ok((status, usage)) => Ok((ExitStatus::from_raw(status), Some(usage))),
        // Reaped already through `child` (none of this module's waits do: a safety net), its
        // status kept there.
        Err(e) if e.0 == libc::ECHILD => child.wait().map(|status| (status, None)),
        Err(e) => Err(e.into()),
    }
}

/// The thread that reaps runsc and reports its exit, and the channel it reports on (the
/// caller's cancel handle wakes the wait through it too).
pub(super) struct Waiter {
    pub(super) tx: mpsc::Sender<Option<std::io::Result<Reaped>>>,
    pub(super) rx: mpsc::Receiver<Option<std::io::Result<Reaped>>>,
    /// runsc, once started, goes to the thread through this.
    pub(super) child_tx: mpsc::Sender<std::process::Child>,
    pub(super) thread: std::thread::JoinHandle<()>,
}

impl Waiter {
    /// Starts the thread, which waits for runsc to be handed to it.
    pub(super) fn start() -> Result<Waiter, Error> {
        // The waiter thread reports runsc's exit (the cancel handle wakes this thread too). It is
        // made before runsc starts: a caller at its process or thread limit is refused here, with
        // the limit named, before anything runs.
        let (tx, rx) = mpsc::channel::<Option<std::io::Result<Reaped>>>();
        let (child_tx, child_rx) = mpsc::channel::<std::process::Child>();
        let exit_tx = tx.clone();
        let thread = std::thread::Builder::new()
            .spawn(move || {
                // No child comes when the start fails (the sender is dropped).
                if let Ok(mut child) = child_rx.recv() {
                    let _ = exit_tx.send(Some(reap(&mut child)));
                }
            })
            .map_err(io_err("start a thread waiting for runsc"))?;
        Ok(Waiter {
            tx,
            rx,
            child_tx,
            thread,
        })
    }
}

/// How the wait for runsc ended.
pub(super) struct Waited {
    /// runsc's exit status (none: its waiter ended without one).
    pub(super) status: Option<ExitStatus>,
    /// runsc's usage with its waited-for descendants' (see [`reap`]).
    pub(super) reaped: Option<(u64, u64)>,
    pub(super) timed_out: bool,
    pub(super) cancelled: bool,
    /// The ending signal this process received (passed on as it is).
    pub(super) interrupted: Option<i32>,
    /// When the command was told to end, and whether the sandbox was then killed.
    pub(super) killed_at: Option<Instant>,
    pub(super) killed_hard: bool,
}

/// Waits for runsc (`pid`, its exit reported on `rx`) to end: passes signals and the
/// caller's cancel on, ends the run at its deadline (SIGTERM, then SIGKILL after GRACE).
pub(super) fn wait(
    plan: &Plan,
    ctl: &Control,
    pid: u32,
    rx: &mpsc::Receiver<Option<std::io::Result<Reaped>>>,
    cancel: &Cancel,
    process_signals: bool,
    started: Instant,
) -> Result<Waited, Error> {
    // A limit past what the clock can hold is none.
    let deadline = plan.timeout.and_then(|t| started.checked_add(t));
    let mut timed_out = false;
    let mut cancelled = false;
    let mut interrupted: Option<i32> = None;
    // When the command was told to end (the caller's signal or SIGTERM, through runsc):
    // SIGKILL after GRACE.
    let mut killed_at: Option<Instant> = None;
    let mut killed_hard = false;
    let ended = loop {
        let now = Instant::now();
        // Ctrl-C, SIGTERM or SIGHUP to this process (caught since before the start): the
        // command is told, then the whole sandbox ends after the grace period, and the run
        // goes on to the sweep and the record.
        // Signals asked for through the run's handle: to the container's processes.
        for sig in cancel.take_signals() {
            kill(plan, ctl, &sig.to_string());
        }
        if killed_at.is_none() {
            if let Some(sig) = process_signals.then(sys::parent::interrupted).flatten() {
                // The caller's signal as it is (Ctrl-C is SIGINT, which a shell may trap), as
                // natively; the whole sandbox ends after GRACE.
                interrupted = Some(sig);
                kill(plan, ctl, &sig.to_string());
                killed_at = Some(now);
            }
        }
        let wake = match (deadline, killed_at) {
            (_, Some(k)) if !killed_hard => k + GRACE,
            (_, Some(_)) => now + Duration::from_secs(3600),
            (Some(d), None) => d.min(now + TICK),
            (None, None) => now + TICK,
        };
        let got = match rx.recv_timeout(wake.saturating_duration_since(now)) {
            Ok(v) => Some(v),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => break None,
        };
        match got {
            Some(Some(reaped)) => break Some(reaped.map_err(io_err("wait for runsc"))?),
            Some(None) => {
                // Cancelled by the caller.
                if killed_at.is_none() {
                    cancelled = true;
                    kill(plan, ctl, "TERM");
                    killed_at = Some(Instant::now());
                }
            }
            None => {
                let now = Instant::now();
                match killed_at {
                    Some(k) if !killed_hard && now >= k + GRACE => {
                        kill(plan, ctl, "KILL");
                        // runsc itself, should it not end with its container.
                        if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                            let _ =
                                rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                        }
                        killed_hard = true;
                    }
                    Some(_) => {}
                    None if deadline.is_some_and(|d| now >= d) => {
                        timed_out = true;
                        kill(plan, ctl, "TERM");
                        killed_at = Some(now);
                    }
                    None => {}
                }
            }
        }
    };
    Ok(Waited {
        status: ended.map(|(s, _)| s),
        reaped: ended.and_then(|(_, r)| r),
        timed_out,
        cancelled,
        interrupted,
        killed_at,
        killed_hard,
    })
}
