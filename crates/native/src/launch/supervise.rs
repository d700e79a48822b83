//! The supervisor's wait: from the sandbox's start to the init's end of the report pipe.
//! It passes on signals and cancels, ends the run at its deadline (SIGTERM, then SIGKILL
//! after a grace period), samples what rlimits bound, and reads the init's reports (its
//! set-up failures, the command's status, the creation guard's refusals, refused
//! allocations).

use std::os::raw::c_int;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sys::mediate;
use sys::postfork::{self, Stage};

use super::{
    blocked_violation, BLOCKED, CONTROL_TICK, PIDS_FIRST_SAMPLE, PIDS_SAMPLE, TIMEOUT_GRACE,
};
use crate::error::RunError;
use crate::plan::Plan;
use sandbox::Violation;

/// What the wait saw by the time the init's end of the report pipe closed.
pub(super) struct Ended {
    /// The first set-up step that failed in the init.
    pub failure: Option<postfork::Report>,
    /// The command's `execve` failed.
    pub exec_failure: Option<postfork::Report>,
    /// The command's wait status.
    pub status: Option<c_int>,
    /// Calls the creation guard refused.
    pub blocked: Vec<Violation>,
    pub timed_out: bool,
    /// The ending signal this process or the run's handle passed on.
    pub interrupted: Option<c_int>,
    /// The peaks of what rlimits bound, sampled.
    pub sampled: crate::cgroup::TreeSample,
    /// Allocations the allocation watch saw RLIMIT_DATA refuse: how many, and the first
    /// (size asked for, data held, limit).
    pub refused_allocations: (u64, Option<(u64, u64, u64)>),
    /// Shared memory the sampler saw over an rlimit-bounded memory limit (the run was ended).
    pub shared_over: Option<u64>,
}

/// Whether a limit is enforced by an rlimit (the kernel does not count it for the run).
pub(super) fn by_rlimit(l: Option<(u64, crate::cgroup::Mechanism)>) -> bool {
    l.is_some_and(|(_, m)| m == crate::cgroup::Mechanism::Rlimit)
}

/// Waits for the run of `child`, started at `started`, to end. `attached`: the run has a
/// terminal of its own, whose `~.` ends it through `control`.
pub(super) fn supervise(
    plan: &Plan,
    child: &sys::parent::Spawned,
    started: Instant,
    control: &sandbox::Cancel,
    process_signals: bool,
    attached: bool,
) -> Result<Ended, RunError> {
    let mut wait = Wait::new(plan, started);
    loop {
        wait.pass_on(child, control, process_signals);
        let ready = child
            .report_ready(wait.left(process_signals, attached))
            .map_err(|e| RunError::io("wait for the sandbox", e))?;
        if !ready {
            wait.on_time(plan, child);
            continue;
        }
        let (report, path) = match child.next_report() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                child.kill();
                let _ = child.wait();
                return Err(RunError::io("read the sandbox's reports", e));
            }
        };
        wait.ended.record(report, path);
    }
    Ok(wait.ended)
}

/// The wait's state: what it has seen so far, and when it must next act without a report.
struct Wait {
    ended: Ended,
    deadline: Option<Instant>,
    interrupt_end: Option<Instant>,
    next_sample: Option<Instant>,
}

impl Wait {
    fn new(plan: &Plan, started: Instant) -> Wait {
        // The deadline: at it, SIGTERM to the command (through the init); after a grace period,
        // SIGKILL to the init, which takes every process of the pid namespace with it.
        // A limit past what the clock can hold (`--timeout 18446744073709551615`) is none.
        let deadline = plan
            .timeout_secs
            .and_then(|t| started.checked_add(Duration::from_secs(t)));
        // Limits enforced by RLIMIT_NPROC and RLIMIT_DATA are not counted for the run by the
        // kernel: the run's processes and their data are sampled every PIDS_SAMPLE instead, for
        // the report's peak and the limit events.
        let next_sample = (by_rlimit(plan.resources.pids) || by_rlimit(plan.resources.memory))
            .then_some(started + PIDS_FIRST_SAMPLE);
        Wait {
            ended: Ended {
                failure: None,
                exec_failure: None,
                status: None,
                blocked: Vec::new(),
                timed_out: false,
                // Ctrl-C (or SIGTERM, SIGHUP) to stockade: forwarded to the command by the
                // handler; the whole sandbox ends after the same grace period (`interrupt_end`)
                // if the command is still there.
                interrupted: None,
                sampled: crate::cgroup::TreeSample::default(),
                // Allocations the allocation watch saw RLIMIT_DATA refuse: how many, and the
                // first (size asked for, data held, limit).
                refused_allocations: (0, None),
                // Shared memory the sampler saw over the rlimit-bounded memory limit (the run
                // was ended).
                shared_over: None,
            },
            deadline,
            interrupt_end: None,
            next_sample,
        }
    }

    /// Passes on this process's ending signal or the run's cancel (once), and the signals
    /// asked for through the run's handle.
    fn pass_on(
        &mut self,
        child: &sys::parent::Spawned,
        control: &sandbox::Cancel,
        process_signals: bool,
    ) {
        if self.ended.interrupted.is_none() {
            let from_process = process_signals.then(sys::parent::interrupted).flatten();
            if let Some(sig) = from_process {
                self.ended.interrupted = Some(sig);
                self.interrupt_end = Some(Instant::now() + TIMEOUT_GRACE);
            } else if control.is_cancelled() {
                // This run's own cancel: the command is told as by Ctrl-C's SIGTERM.
                let _ = sys::raw::kill(child.pid, libc::SIGTERM);
                self.ended.interrupted = Some(libc::SIGTERM);
                self.interrupt_end = Some(Instant::now() + TIMEOUT_GRACE);
            }
        }
        // Signals asked for through this run's handle go to its init, which passes them on.
        for sig in control.take_signals() {
            let _ = sys::raw::kill(child.pid, sig);
        }
    }

    /// How long to wait for a report: until the next deadline, grace period's end or sample.
    fn left(&self, process_signals: bool, attached: bool) -> Duration {
        let wake = [self.deadline, self.interrupt_end, self.next_sample]
            .into_iter()
            .flatten()
            .min();
        let left = wake.map_or(Duration::from_secs(86_400), |at| {
            at.saturating_duration_since(Instant::now())
        });
        // A handle the caller may use (or the terminal's `~.`): looked at every 50 ms.
        if process_signals && !attached {
            left
        } else {
            left.min(CONTROL_TICK)
        }
    }

    /// No report came in time: samples when due, then ends the run at the end of an
    /// interrupt's grace period, or at its deadline (SIGTERM, then SIGKILL after the grace).
    fn on_time(&mut self, plan: &Plan, child: &sys::parent::Spawned) {
        let now = Instant::now();
        if self.next_sample.is_some_and(|t| now >= t) {
            self.sample(plan, child, now);
        }
        if self.interrupt_end.is_some_and(|t| now >= t) {
            child.kill();
            self.interrupt_end = None;
            self.deadline = None;
        } else if self.deadline.is_some_and(|t| now >= t) {
            if self.ended.timed_out {
                child.kill();
                self.deadline = None;
            } else {
                self.ended.timed_out = true;
                child.signal(libc::SIGTERM);
                self.deadline = Some(Instant::now() + TIMEOUT_GRACE);
            }
        }
    }

    /// One sample of what rlimits bound, into the peaks; the run ends when its shared memory
    /// passes an rlimit-bounded memory limit.
    fn sample(&mut self, plan: &Plan, child: &sys::parent::Spawned, now: Instant) {
        let now_sample = crate::cgroup::sample_tree(child.pid);
        let sampled = &mut self.ended.sampled;
        sampled.tasks = sampled.tasks.max(now_sample.tasks);
        sampled.data_peak = sampled.data_peak.max(now_sample.data_peak);
        sampled.shared = sampled.shared.max(now_sample.shared);
        self.next_sample = Some(now + PIDS_SAMPLE);
        // RLIMIT_DATA does not count shared memory (shared anonymous mappings above
        // all; memfd, SysV and /dev/shm are refused or bounded on their own): the run
        // ends when what its processes hold of it passes the limit.
        if let Some((bytes, crate::cgroup::Mechanism::Rlimit)) = plan.resources.memory {
            if now_sample.shared > bytes && self.ended.shared_over.is_none() {
                self.ended.shared_over = Some(now_sample.shared);
                child.kill();
            }
        }
    }
}

impl Ended {
    /// One report of the init's: `path` is its trailing bytes (a path, or a refused
    /// allocation's words).
    fn record(&mut self, report: postfork::Report, path: Vec<u8>) {
        match report.kind {
            postfork::REPORT_STATUS => self.status = Some(report.value),
            postfork::REPORT_FAILURE if report.stage == Stage::Exec as u32 => {
                self.exec_failure = Some(report)
            }
            postfork::REPORT_FAILURE if self.failure.is_none() => self.failure = Some(report),
            mediate::REPORT_BLOCKED => self.blocked.push(blocked_violation(&report, path)),
            mediate::REPORT_MEMORY => {
                let word = |i: usize| {
                    path.get(8 * i..8 * i + 8)
                        .and_then(|b| b.try_into().ok())
                        .map_or(0, u64::from_ne_bytes)
                };
                self.refused_allocations.0 += 1;
                self.refused_allocations
                    .1
                    .get_or_insert((word(0), word(1), word(2)));
            }
            mediate::REPORT_BLOCKED_MORE => self.blocked.push(Violation {
                code: sandbox::Code::SandboxViolation,
                kind: BLOCKED,
                path: PathBuf::new(),
                action: format!(
                    "and {} more refused calls, not listed one by one",
                    report.value
                ),
                allow: None,
            }),
            _ => {}
        }
    }
}
