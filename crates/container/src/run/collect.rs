//! Stage 6, once the engine's client has ended: the container gone where it must be, the
//! streams' ends, what the run changed in the staged git dirs brought back judged, and the
//! run's end in the contract's terms.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use sandbox::{ContainerRun, Enforcement, Outcome, RunError};

use super::prepare::Prepared;
use super::start::Client;
use super::streams::Relays;
use super::supervise::Ending;
use super::ContainerPlanned;

impl ContainerPlanned {
    /// The run's outcome, from what the stages before handed on; `status` is the client's
    /// (`None`: it could not be waited for) and `args` its arguments, for the run record.
    #[allow(clippy::too_many_arguments, reason = "the stages' values, each named")]
    pub(super) fn collect(
        self: Box<Self>,
        prepared: Prepared,
        relays: Relays,
        client: Client,
        ending: Ending,
        status: Option<ExitStatus>,
        args: Vec<String>,
        options: sandbox::Options,
    ) -> Result<Outcome, RunError> {
        let keep = options.keep;
        let limit = self.output_limit;
        let sanitize = options.sanitize_output;
        let _ = client.waiter.join();
        let duration = client.started.elapsed();
        // A client killed before the engine removed its container (Podman's `--rm` is the
        // client's) leaves it behind; one that died of a signal of its own (an OOM kill, a
        // crash) leaves it running: it goes (under `--keep`, is killed) before the relays are
        // waited for, which its processes could hold open.
        let client_died = status.as_ref().is_some_and(|s| s.signal().is_some());
        if ending.killed_at.is_some() || status.is_none() || client_died {
            if keep {
                if client_died {
                    self.signal("KILL");
                }
            } else {
                self.remove();
            }
        }
        // The client and its container have ended: the redirected outputs' relays read what
        // their FIFOs hold and end, and a redirected stdin's copy that still waits for the
        // check is let go.
        drop(client.out_hold);
        drop(relays.stop);
        if let Some(r) = relays.redirected.as_ref().filter(|r| r.has(0)) {
            r.release_input();
        }
        let [out, err] = relays.threads;
        let mut relayed_out = [out.join().ok(), err.join().ok()];
        // The terminal is the command's stream there (its pipe carried the client's words).
        if let Some(attached) = client.attached {
            attached.finish_into(&mut relayed_out);
        }
        // The run has ended here: the watchdog goes.
        drop(client.watchdog);
        // Nothing of the command is left (under `--keep` the container is stopped): what it
        // changed at the top of existing git dirs comes back, judged.
        let blocked = workspace::gitstage::reconcile_all(
            &self.target.staged,
            &prepared.snapshots,
            &self.target.stage_dir,
            &self.enforcement.writable_roots,
            (
                self.copy_owner.is_some(),
                self.copy_owner.map(|(uid, _)| uid),
            ),
        );
        let (exit_code, signal) = match status.map(exit_of) {
            Some(e) => e,
            None => (125, None),
        };
        if exit_code == 125 && prepared.cached_image && self.image_gone() {
            return Err(RunError::Unavailable {
                what: "the container backend's default image",
                cause: format!(
                    "{} was removed from {}'s store since stockade made it; the command did not run",
                    self.target.image,
                    self.engine.name()
                ),
                fix: "run the command again: stockade makes the image anew".into(),
            });
        }
        let (exit_code, signal) = match (ending.timed_out, ending.interrupted) {
            (true, _) => (124, None),
            (false, Some(sig)) if ending.killed_hard => (128 + sig, Some(sig)),
            _ => (exit_code, signal),
        };
        // The run's group: what it counted is the run's usage and its limit events.
        let usage =
            (client.group.as_ref()).map_or_else(sandbox::Usage::default, |g| usage_of(g.usage()));
        if let Some(plan) = &self.target.group {
            // The group's own directories, and the engine's copies of its path in every other
            // hierarchy it uses (dropping `group` then finds nothing left to remove).
            sys::cgroup1::remove_everywhere(
                std::path::Path::new(sys::cgroup1::CGROUP_ROOT),
                &plan.path,
                Duration::from_secs(1),
            );
        }
        // A redirected stdin that could not be fed: the check waited at its open, so the
        // command never started, and the container was ended.
        if let Some((path, cause)) = relays.input_failed.lock().ok().and_then(|mut s| s.take()) {
            return Err(RunError::Setup {
                stage: "feed the command's redirected stdin through its FIFO",
                path: Some(path),
                cause,
                explained: None,
            });
        }
        let mut limit_hits = hits(&self.enforcement, &usage);
        let ended_by_memory =
            usage.oom_kills > 0 && exit_code == 128 + rustix::process::Signal::KILL.as_raw();
        let output = stream::relay::output_summary(limit, sanitize, relayed_out, &mut limit_hits);
        let name = self.target.name.clone();
        drop(self.files);
        Ok(Outcome {
            exit_code,
            signal,
            exec_errno: None,
            duration,
            skipped: prepared.skipped,
            landlock_abi: None,
            blocked,
            timed_out: ending.timed_out,
            usage,
            limit_hits,
            output,
            ended_by: if ending.timed_out {
                Some("timeout")
            } else if ending.interrupted.is_some() {
                Some("interrupt")
            } else if ended_by_memory {
                Some("memory")
            } else {
                None
            },
            review_upper: None,
            network_tries: ending
                .net_watch
                .and_then(sys::net_tries::Watch::tries)
                .map(|t| sandbox::NetworkTries {
                    no_route: t.no_route,
                    lookups: t.lookups,
                    proxy: t.proxy,
                }),
            staged: workspace::gitstage::protected_paths(&self.target.staged),
            container: Some(ContainerRun {
                engine: self.engine.name(),
                engine_binary: self.binary.clone(),
                image: self.target.image.clone(),
                image_id: prepared.image_id,
                kept: keep.then(|| format!("{} rm --force --volumes {name}", self.engine.name())),
                container: name,
                args,
            }),
        })
    }
}

/// The run's usage as its group counted it.
fn usage_of(c: sys::cgroup1::Counters) -> sandbox::Usage {
    sandbox::Usage {
        memory_peak: c.memory_peak,
        cpu_usec: c.cpu_usec,
        pids_peak: c.pids_peak,
        oom_kills: c.oom_kills,
        memory_limit_hits: c.memory_limit_hits,
        pids_limit_hits: 0,
        cpu_throttled: c.cpu_throttled,
    }
}

/// The limits the run's group shows it reached: an OOM kill in the group (memory), the most
/// processes at once at the container's limit (pids: the container's own group, which counted
/// the refused forks, goes with the container).
fn hits(limits: &Enforcement, usage: &sandbox::Usage) -> Vec<sandbox::LimitHit> {
    let mut out = Vec::new();
    if let (Some(bytes), true) = (limits.memory.map(|m| m.value), usage.oom_kills > 0) {
        out.push(sandbox::LimitHit {
            code: sandbox::Code::LimitReached,
            limit: "memory",
            value: bytes,
            mechanism: sandbox::LimitMechanism::ContainerCgroup.code(),
            detail: format!(
                "the kernel killed a process of the run at the memory limit ({} OOM kill(s) in its cgroup)",
                usage.oom_kills
            ),
        });
    }
    if let Some(n) = limits.pids.map(|p| p.value) {
        if usage.pids_peak.is_some_and(|p| p >= n) {
            out.push(sandbox::LimitHit {
                code: sandbox::Code::LimitReached,
                limit: "pids",
                value: n,
                mechanism: sandbox::LimitMechanism::ContainerCgroup.code(),
                detail: format!(
                    "the run had {n} processes and threads at once, its limit: forks beyond it failed"
                ),
            });
        }
    }
    out
}

/// The client exits with the command's code (128+N for a signal), or 125 for the engine's own
/// failure.
fn exit_of(status: ExitStatus) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => (c, None),
        (None, Some(s)) => (128 + s, Some(s)),
        (None, None) => (125, None),
    }
}
