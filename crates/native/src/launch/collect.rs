//! The run's end put together: the usage the group counted (or the children's), the init's
//! exit status, the groups' removal, the relays' ends, the exit code a shell would show, the
//! limits reached, and the outcome.

use std::os::fd::OwnedFd;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sys::postfork;

use super::supervise::{self, Ended};
use super::{setup_error, EXIT_TIMEOUT};
use crate::cgroup::{Group, LimitHit, Usage};
use crate::error::RunError;
use crate::plan::Plan;
use crate::Outcome;

/// What the supervisor holds of a run that is ending.
pub(super) struct Running {
    pub child: sys::parent::Spawned,
    pub group: Option<Group>,
    /// Removes the run's groups should this process die; exits once they are gone.
    pub reaper: Option<sys::reaper::Reaper>,
    pub relays: [Option<JoinHandle<stream::relay::Relayed>>; 2],
    pub attached: Option<stream::terminal::Attached>,
    /// A review run's bounded upper, for the change set.
    pub review_upper: Option<OwnedFd>,
    pub net_watch: Option<sys::net_tries::Watch>,
}

/// The outcome of the run of `plan` started at `started`.
pub(super) fn collect(
    plan: &Plan,
    started: Instant,
    running: Running,
    ended: Ended,
    landlock_abi: Option<i32>,
    skipped: Vec<String>,
    sanitize: bool,
) -> Result<Outcome, RunError> {
    let Running {
        child,
        group,
        mut reaper,
        relays,
        attached,
        review_upper,
        net_watch,
    } = running;
    let counted = group.as_ref().map(Group::usage);
    // The init's own usage with its descendants': this run's alone.
    let (init_status, reaped) = child
        .wait_with_usage()
        .map_err(|e| RunError::io("wait for the sandbox", e))?;
    let duration = started.elapsed();
    let usage = match (group, counted) {
        (Some(g), Some(mut u)) => {
            // Stragglers die with the pid namespace; the group is gone before we return.
            let _ = g.remove(Duration::from_secs(2));
            if u.cpu_usec.is_none() {
                u.cpu_usec = Some(reaped.0);
            }
            u
        }
        _ => Usage {
            cpu_usec: Some(reaped.0),
            memory_peak: Some(reaped.1),
            pids_peak: (supervise::by_rlimit(plan.resources.pids) && ended.sampled.tasks > 0)
                .then_some(ended.sampled.tasks),
            ..Usage::default()
        },
    };
    // The groups are gone: the reaper may exit now, while the rest is put together; it is
    // collected when `reaper` goes out of scope.
    if let Some(r) = reaper.as_mut() {
        r.release();
    }
    let [out_relay, err_relay] = relays;
    let joined = |r: Option<std::thread::JoinHandle<stream::relay::Relayed>>| {
        r.map(|h| h.join().unwrap_or_default())
    };
    let mut relayed = [joined(out_relay), joined(err_relay)];
    if let Some(a) = attached {
        a.finish_into(&mut relayed);
    }
    if let Some(f) = ended.failure {
        return Err(setup_error(plan, f));
    }
    let exec_errno = ended.exec_failure.map(|f| f.value);
    let (exit_code, signal) = match (ended.status, ended.interrupted) {
        _ if ended.timed_out => (EXIT_TIMEOUT, None),
        // Ended by us after the grace period: as if the signal had killed it.
        (None, Some(sig)) => (128 + sig, Some(sig)),
        (Some(s), _) if libc::WIFSIGNALED(s) => (128 + libc::WTERMSIG(s), Some(libc::WTERMSIG(s))),
        (Some(s), _) => (postfork::exit_code(s), None),
        (None, None) => (postfork::exit_code(init_status), None),
    };
    let mut limit_hits = crate::cgroup::hits(&plan.resources, &usage);
    limit_hits.extend(memory_hit(plan, exit_code, &ended));
    let output =
        stream::relay::output_summary(plan.output_limit, sanitize, relayed, &mut limit_hits);
    let ended_by = if ended.shared_over.is_some() {
        Some("memory")
    } else if ended.timed_out {
        Some("timeout")
    } else if ended.interrupted.is_some() {
        Some("interrupt")
    } else if usage.oom_kills > 0
        && (signal == Some(libc::SIGKILL) || exit_code == 128 + libc::SIGKILL)
    {
        // The command, or the process whose status a shell passed on, died of the OOM kill.
        Some("memory")
    } else {
        None
    };
    Ok(Outcome {
        output,
        limit_hits,
        ended_by,
        exit_code,
        signal,
        exec_errno,
        duration,
        skipped,
        landlock_abi,
        blocked: ended.blocked,
        timed_out: ended.timed_out,
        usage,
        review_upper: review_upper.map(std::sync::Arc::new),
        network_tries: net_watch.and_then(sys::net_tries::Watch::tries).map(|t| {
            sandbox::NetworkTries {
                no_route: t.no_route,
                lookups: t.lookups,
                proxy: t.proxy,
            }
        }),
        container: None,
        staged: Vec::new(),
    })
}

/// A memory limit enforced by RLIMIT_DATA that the run reached, by what the wait saw.
fn memory_hit(plan: &Plan, exit_code: i32, ended: &Ended) -> Option<LimitHit> {
    let size = sandbox::human_size;
    let (refused_allocations, shared_over, sampled) =
        (ended.refused_allocations, ended.shared_over, &ended.sampled);
    match (plan.resources.memory, refused_allocations) {
        (Some((bytes, m)), _) if shared_over.is_some() => Some(LimitHit {
            code: sandbox::Code::LimitReached,
            limit: "memory",
            value: bytes,
            mechanism: m.code(),
            detail: format!(
                "the run's processes held {} of shared memory (RssShmem, sampled every 50 ms), which RLIMIT_DATA does not count, over the limit of {}: the run was ended",
                size(shared_over.unwrap_or(0)),
                size(bytes)
            ),
        }),
        // An allocation larger than the whole limit (the first refused; allocators try again
        // a way or two), in a run that then succeeded: an address
        // space reservation the program probes for and does without (Bun asks for 128 GiB at
        // every start), not memory the run needed. Reported, it was a line on every run of
        // Claude Code or OpenCode under an rlimit.
        (Some(_), (_, Some((asked, _, limit)))) if asked > limit && exit_code == 0 => None,
        (Some((bytes, m)), (n, Some((asked, held, limit)))) => Some(LimitHit {
            code: sandbox::Code::LimitReached,
            limit: "memory",
            value: bytes,
            mechanism: m.code(),
            detail: format!(
                "{n} allocation(s) refused at the limit (RLIMIT_DATA, per process): the first asked for {} while the process held {} of its {}",
                size(asked),
                size(held),
                size(limit)
            ),
        }),
        // Smaller allocations than the watch sees: in a run that failed, a process that came
        // within one watch step of the limit (sampled) has most likely had one refused.
        (Some((bytes, m)), _)
            if m == crate::cgroup::Mechanism::Rlimit
                && exit_code != 0
                && sampled.data_peak.saturating_add(plan.resources.allocation_watch.unwrap_or(0))
                    > bytes =>
        {
            Some(LimitHit {
                code: sandbox::Code::LimitReached,
                limit: "memory",
                value: bytes,
                mechanism: m.code(),
                detail: format!(
                    "a process reached {} of data, near its limit of {} (RLIMIT_DATA, per process; sampled every 50 ms): allocations beyond it fail",
                    size(sampled.data_peak),
                    size(bytes)
                ),
            })
        }
        _ => None,
    }
}
