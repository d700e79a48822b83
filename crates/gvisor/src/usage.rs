//! What a gVisor run used, and which of its limits it reached.
//!
//! - **A root caller's run has a cgroup (v1) stockade makes** before runsc starts:
//!   `/stockade/<run id>` in the `memory` and `cpu`/`cpuacct` hierarchies, with the run's
//!   limits written by stockade. runsc joins a group it finds made and leaves its settings and
//!   the group itself alone (a group runsc makes, it removes with its counters when the run
//!   ends), so once runsc has ended the group's counters are read (the most memory, the OOM
//!   killer's kills, the CPU time, the throttled periods) and the group removed. The whole
//!   sandbox (the Sentry, its gofer, the command's memory, which is the Sentry's) is in it.
//! - **Every run is looked at while it lasts** through `runsc events` (the Sentry's own
//!   accounting: its tasks, the memory it gave the command, the CPU time), every
//!   [`SAMPLE_EVERY`]: the most tasks at once, and for an unprivileged caller (no cgroup) the
//!   most memory. The Sentry's `RLIMIT_NPROC` refuses a fork without a trace outside: a peak
//!   at the limit is the event, as for native's `RLIMIT_NPROC` (counted, not reported).
//!
//! Not seen: an unprivileged caller's allocation the Sentry's `RLIMIT_AS` refused (per
//! process, inside the Sentry; nothing outside records it); threads, which the Sentry's
//! `RLIMIT_NPROC` counts but its stats do not (a limit filled by threads has no event);
//! a burst between two looks. The CPU time comes from the group, or else from the kernel's
//! accounting of reaped processes (runsc's own figure is the whole machine's under
//! `--rootless`).
//!
//! The group itself is `sys::cgroup1`'s (the container backends' is made the same way).
//! Hand-written: no crate reads runsc's stats.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandbox::{LimitHit, LimitMechanism, Usage};
pub use sys::cgroup1::{
    is_v1, machine_has_swap, process_alive, sweep_stale, Group, GroupPlan, CGROUP_ROOT,
};

/// The run's usage as its group counted it.
pub fn counted(c: sys::cgroup1::Counters) -> Usage {
    Usage {
        memory_peak: c.memory_peak,
        cpu_usec: c.cpu_usec,
        pids_peak: c.pids_peak,
        oom_kills: c.oom_kills,
        memory_limit_hits: c.memory_limit_hits,
        pids_limit_hits: 0,
        cpu_throttled: c.cpu_throttled,
    }
}

/// How often a run is looked at (`runsc events --interval`, whole seconds: one runsc for the
/// whole run, ~1 ms of CPU a look; a fresh `runsc events --stats` for each look would cost
/// ~25 ms). A run shorter than this may not be looked at: its CPU time then comes from the
/// kernel's accounting of reaped processes.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// The limits a run's events are judged against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Judged {
    /// Bytes, and how the limit is enforced.
    pub memory: Option<(u64, LimitMechanism)>,
    /// Processes (`RLIMIT_NPROC` in the Sentry).
    pub pids: Option<u64>,
}

/// What the looks at a running sandbox saw. (Not its CPU time: runsc scales that by the
/// cgroup of the sandbox's process, which for `--rootless` is the whole machine's.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sampled {
    /// The most processes at once (the Sentry's count: its threads are not in it).
    pub tasks_peak: Option<u64>,
    /// The most memory the Sentry gave the command at once, bytes.
    pub memory_peak: Option<u64>,
}

impl Sampled {
    fn add(&mut self, (tasks, memory): (Option<u64>, Option<u64>)) {
        self.tasks_peak = self.tasks_peak.max(tasks);
        self.memory_peak = self.memory_peak.max(memory);
    }
}

/// The processes and memory in one line of `runsc events`
/// (`{"type":"stats","data":{"memory":{"usage":{"usage":B}},"pids":{"current":N}}}`).
pub fn parse_stats(line: &[u8]) -> Option<(Option<u64>, Option<u64>)> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    if v["type"] != "stats" {
        return None;
    }
    let d = &v["data"];
    Some((
        d["pids"]["current"].as_u64(),
        d["memory"]["usage"]["usage"].as_u64(),
    ))
}

/// Looks at a running sandbox while it lasts: `runsc events --interval N ID`, one runsc that
/// prints the sandbox's stats every [`SAMPLE_EVERY`] (started again should it end early, as
/// it does when asked before the container exists), read on a thread of its own until
/// [`Sampler::finish`] (or the sampler is dropped). The runsc dies with that thread, and so
/// with this process: it never outlives the run.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    /// The runsc printing the stats now. Only the thread waits for (reaps) it, after taking
    /// it out of here: a kill through this slot never reaches a reused pid.
    child: Arc<Mutex<Option<std::process::Child>>>,
    /// Wakes the thread between two runscs.
    wake: std::sync::mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<Sampled>>,
}

impl Sampler {
    /// `runsc` (`make` gives it with its global arguments, ready to start where it must)
    /// asked about container `id`.
    /// `None` when no thread can be made (the caller at its thread limit): the run goes on,
    /// unlooked at.
    pub fn start(make: impl Fn() -> Command + Send + 'static, id: String) -> Option<Sampler> {
        use std::io::BufRead;
        let stop = Arc::new(AtomicBool::new(false));
        let child: Arc<Mutex<Option<std::process::Child>>> = Arc::new(Mutex::new(None));
        let (wake, woken) = std::sync::mpsc::channel::<()>();
        let (stopped, slot) = (stop.clone(), child.clone());
        let interval = SAMPLE_EVERY.as_secs().max(1).to_string();
        let thread = std::thread::Builder::new()
            .name("gvisor-usage".into())
            .spawn(move || {
                let mut seen = Sampled::default();
                // The first look after one interval (a run shorter than that is never looked
                // at: its start pays nothing), then again soon after a runsc that ended.
                let mut pause = SAMPLE_EVERY;
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    woken.recv_timeout(pause)
                {
                    pause = Duration::from_millis(250);
                    let mut command = make();
                    command
                        .args(["events", "--interval", &interval, &id])
                        // Pipes, never /dev/null: runsc as root gives its streams to `nobody`.
                        .stdin(Stdio::piped())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped());
                    sys::mountns::die_with_parent_on_exec(&mut command);
                    let Ok(mut running) = command.spawn() else {
                        break;
                    };
                    let out = running.stdout.take();
                    {
                        let mut held = lock(&slot);
                        // Stopped meanwhile: `finish` looked before this one was there.
                        if stopped.load(Ordering::SeqCst) {
                            let _ = running.kill();
                        }
                        *held = Some(running);
                    }
                    if let Some(out) = out {
                        let lines = std::io::BufReader::new(out).split(b'\n');
                        for line in lines.map_while(Result::ok) {
                            if let Some(s) = parse_stats(line.trim_ascii()) {
                                seen.add(s);
                            }
                        }
                    }
                    let ended = lock(&slot).take();
                    if let Some(mut ended) = ended {
                        let _ = ended.kill();
                        let _ = ended.wait();
                    }
                }
                seen
            })
            .ok()?;
        Some(Sampler {
            stop,
            child,
            wake,
            thread: Some(thread),
        })
    }

    /// Stops looking (ends the runsc printing the stats); what was seen.
    pub fn finish(mut self) -> Sampled {
        self.end()
    }

    fn end(&mut self) -> Sampled {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.wake.send(());
        if let Some(running) = lock(&self.child).as_mut() {
            let _ = running.kill();
        }
        (self.thread.take())
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// The slot's lock, whatever a panicking holder left (it holds a process, or none).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The run's usage: its group's counters where it had one, what the looks saw, and the
/// kernel's accounting of reaped processes (`children`: CPU µs, largest resident bytes) for
/// what neither has.
pub fn usage(group: Option<Usage>, sampled: Sampled, children: Option<(u64, u64)>) -> Usage {
    let mut u = group.unwrap_or_default();
    u.pids_peak = u.pids_peak.or(sampled.tasks_peak);
    u.memory_peak = u
        .memory_peak
        .or(sampled.memory_peak)
        .or(children.map(|c| c.1));
    u.cpu_usec = u.cpu_usec.or(children.map(|c| c.0));
    u
}

/// The limits `usage` shows the run reached.
pub fn hits(limits: &Judged, usage: &Usage) -> Vec<LimitHit> {
    let mut out = Vec::new();
    if let Some((bytes, mechanism)) = limits.memory {
        if usage.oom_kills > 0 {
            out.push(LimitHit {
                code: sandbox::Code::LimitReached,
                limit: "memory",
                value: bytes,
                mechanism: mechanism.code(),
                detail: format!(
                    "the kernel killed the run's sandbox at the memory limit ({} OOM kill(s) in its cgroup)",
                    usage.oom_kills
                ),
            });
        }
    }
    if let Some(n) = limits.pids {
        if usage.pids_peak.is_some_and(|p| p >= n) {
            out.push(LimitHit {
                code: sandbox::Code::LimitReached,
                limit: "pids",
                value: n,
                mechanism: LimitMechanism::GvisorRlimitNproc.code(),
                detail: format!(
                    "the run had {n} processes at once, its limit (counted every {} s, threads not seen: the limit counts them too); forks beyond it failed",
                    SAMPLE_EVERY.as_secs()
                ),
            });
        }
    }
    out
}

/// Whether the memory limit ended the run: the OOM killer killed in its group and the run
/// ended by SIGKILL (the Sentry, killed, takes the command with it).
pub fn ended_by_memory(usage: &Usage, exit_code: i32) -> bool {
    usage.oom_kills > 0 && exit_code == 128 + libc::SIGKILL
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stats_line_gives_processes_and_memory() {
        let line = br#"{"type":"stats","id":"x","data":{"cpu":{"usage":{"total":2677553295}},"memory":{"usage":{"limit":0,"usage":69287936,"failcnt":0}},"pids":{"current":7}}}"#;
        assert_eq!(parse_stats(line), Some((Some(7), Some(69287936))));
        assert_eq!(parse_stats(br#"{"type":"oom"}"#), None);
        assert_eq!(parse_stats(b"container not found"), None);
    }

    #[test]
    fn the_peaks_are_kept_across_looks() {
        let mut s = Sampled::default();
        s.add((Some(5), Some(10)));
        s.add((Some(3), Some(20)));
        s.add((None, None));
        assert_eq!(
            s,
            Sampled {
                tasks_peak: Some(5),
                memory_peak: Some(20),
            }
        );
    }

    /// The group's counters first, then the looks, then the reaped processes; never runsc's
    /// CPU figure (the whole machine's under `--rootless`).
    #[test]
    fn usage_prefers_the_group_then_the_looks_then_the_reaped_processes() {
        let group = Usage {
            memory_peak: Some(100),
            cpu_usec: Some(7),
            oom_kills: 1,
            ..Usage::default()
        };
        let seen = Sampled {
            tasks_peak: Some(4),
            memory_peak: Some(50),
        };
        let u = usage(Some(group), seen, Some((1, 2)));
        assert_eq!(
            (u.memory_peak, u.cpu_usec, u.pids_peak, u.oom_kills),
            (Some(100), Some(7), Some(4), 1)
        );
        let u = usage(None, seen, Some((1, 2)));
        assert_eq!((u.memory_peak, u.cpu_usec), (Some(50), Some(1)));
        let u = usage(None, Sampled::default(), Some((1, 2)));
        assert_eq!(
            (u.memory_peak, u.cpu_usec, u.pids_peak),
            (Some(2), Some(1), None)
        );
    }

    #[test]
    fn hits_are_an_oom_kill_and_a_peak_at_the_process_limit() {
        let limits = Judged {
            memory: Some((128 << 20, LimitMechanism::GvisorCgroup)),
            pids: Some(64),
        };
        assert!(hits(&limits, &Usage::default()).is_empty());
        let u = Usage {
            oom_kills: 1,
            pids_peak: Some(64),
            ..Usage::default()
        };
        let h = hits(&limits, &u);
        assert_eq!(
            h.iter()
                .map(|h| (h.limit, h.value, h.mechanism))
                .collect::<Vec<_>>(),
            [
                ("memory", 128 << 20, "gvisor_cgroup"),
                ("pids", 64, "gvisor_rlimit_nproc")
            ]
        );
        let below = Usage {
            pids_peak: Some(63),
            ..Usage::default()
        };
        assert!(hits(&limits, &below).is_empty());
        assert!(ended_by_memory(&u, 137));
        assert!(!ended_by_memory(&u, 1));
    }
}
