//! Stage 5: the run until its client ends. The time limit, a cancel and the caller's signals
//! reach the container (SIGTERM, or the caller's signal as it is, then SIGKILL after
//! [`GRACE`]); a redirected stdin that cannot be fed ends it.

use std::process::ExitStatus;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::start::Client;
use super::streams::InputFailed;
use super::{ContainerPlanned, GRACE, TICK};

/// How the run is ending, as the gate and the supervision find it (for
/// [`ContainerPlanned::collect`]).
pub(super) struct Ending {
    /// When the run's time limit comes.
    pub(super) deadline: Option<Instant>,
    pub(super) timed_out: bool,
    /// The caller's signal that ended the run.
    pub(super) interrupted: Option<i32>,
    /// When the container was told to end (SIGTERM or the caller's signal).
    pub(super) killed_at: Option<Instant>,
    /// SIGKILL was sent, [`GRACE`] after.
    pub(super) killed_hard: bool,
    /// The counters of what the command tried on the network (the gate's).
    pub(super) net_watch: Option<sys::net_tries::Watch>,
}

impl Ending {
    /// A run started at `started`, ending at its time limit `timeout`.
    pub(super) fn new(timeout: Option<Duration>, started: Instant) -> Ending {
        Ending {
            deadline: timeout.and_then(|t| started.checked_add(t)),
            timed_out: false,
            interrupted: None,
            killed_at: None,
            killed_hard: false,
            net_watch: None,
        }
    }
}

impl ContainerPlanned {
    /// Passes the caller's signals (`control`'s, and this process's own under
    /// `process_signals`) to the container until the client ends: its exit status, or `None`
    /// when it could not be waited for.
    pub(super) fn supervise(
        &self,
        client: &Client,
        control: &sandbox::Cancel,
        ending: &mut Ending,
        input_failed: &InputFailed,
        process_signals: bool,
    ) -> Option<ExitStatus> {
        loop {
            let now = Instant::now();
            for sig in control.take_signals() {
                self.signal(&sig.to_string());
            }
            // A redirected stdin that cannot be fed: the container is killed (again at each
            // tick, as it may not exist yet when the copy fails).
            if !ending.killed_hard && input_failed.lock().is_ok_and(|s| s.is_some()) {
                self.signal("KILL");
            }
            if ending.killed_at.is_none() {
                if let Some(sig) = process_signals.then(sys::parent::interrupted).flatten() {
                    // The caller's signal reaches the command as it would natively (Ctrl-C is
                    // SIGINT, which a shell may trap); the whole container ends after GRACE.
                    ending.interrupted = Some(sig);
                    self.signal(&sig.to_string());
                    ending.killed_at = Some(now);
                }
            }
            let wake = match (ending.deadline, ending.killed_at) {
                (_, Some(k)) if !ending.killed_hard => k + GRACE,
                (_, Some(_)) => now + TICK,
                (Some(d), None) => d.min(now + TICK),
                (None, None) => now + TICK,
            };
            match client.rx.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(Some(status)) => break status.ok(),
                Ok(None) => {
                    if ending.killed_at.is_none() {
                        self.signal("TERM");
                        ending.killed_at = Some(Instant::now());
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let now = Instant::now();
                    match ending.killed_at {
                        Some(k) if !ending.killed_hard && now >= k + GRACE => {
                            self.signal("KILL");
                            if let Some(p) = rustix::process::Pid::from_raw(client.pid as i32) {
                                let _ =
                                    rustix::process::kill_process(p, rustix::process::Signal::KILL);
                            }
                            ending.killed_hard = true;
                        }
                        Some(_) => {}
                        None if ending.deadline.is_some_and(|d| now >= d) => {
                            ending.timed_out = true;
                            self.signal("TERM");
                            ending.killed_at = Some(now);
                        }
                        None => {}
                    }
                }
            }
        }
    }
}
