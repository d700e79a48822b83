//! The run's end: what runsc left removed, what the command changed at the top of existing
//! git dirs brought back, what the run used, and how it ended; or, for a run that cannot go
//! on, runsc and its container ended and their state removed.

use std::os::fd::OwnedFd;
use std::process::ExitStatus;
use std::time::Duration;

use super::control::{kill, runsc_about_container, Control};
use super::supervise::Waited;
use super::Finished;
use crate::{Error, Plan};

/// What the run has once runsc ended and the wait is over.
pub(super) struct Ended {
    pub(super) waited: Waited,
    /// What the usage sampler saw while the run lasted.
    pub(super) sampled: crate::usage::Sampled,
    /// The run's own terminal: where its output was accounted and what was relayed.
    pub(super) terminal: Option<(usize, stream::relay::Relayed)>,
    pub(super) duration: Duration,
    /// A review run under a disk bound: the tmpfs of its view's upper.
    pub(super) review_upper: Option<OwnedFd>,
}

/// How the run ended, once runsc has: its leftovers removed (the container's state when it
/// ended abnormally, the bundle `dir`, the cgroups), the git dirs' top levels reconciled, and
/// its usage, limits reached and exit put together.
pub(super) fn collect(
    plan: &Plan,
    ctl: &Control,
    dir: tempfile::TempDir,
    snapshots: &[crate::gitstage::Snapshot],
    group: Option<crate::usage::Group>,
    ended: Ended,
) -> Finished {
    let Ended {
        waited:
            Waited {
                status,
                reaped,
                timed_out,
                cancelled,
                interrupted,
                killed_at,
                killed_hard,
            },
        sampled,
        terminal,
        duration,
        review_upper,
    } = ended;
    // A run that ended abnormally may leave the container's state behind (one that ended on
    // its own removed it: another runsc start would cost ~15 ms for nothing).
    let ended_abnormally = killed_at.is_some() || status.is_none();
    if ended_abnormally {
        runsc_about_container(ctl, &["delete", "--force", &plan.caller.run_id]);
    }
    // Nothing of the command is left: what it changed at the top of existing git dirs comes
    // back, judged (see `gitstage`).
    let blocked = crate::gitstage::reconcile_all(
        &plan.staged,
        snapshots,
        dir.path(),
        &plan.writable_roots,
        // The gofer makes the command's files under an id of its own: no owner to hold
        // them to (the bundle is root's alone, 0700).
        (!plan.caller.rootless, None),
    );
    drop(dir);
    // runsc has ended: its group's counters are final.
    let counted = group.as_ref().map(|g| crate::usage::counted(g.usage()));
    drop(group);
    remove_cgroups(plan);
    let usage = crate::usage::usage(counted, sampled, reaped);
    let limit_hits = crate::usage::hits(&plan.judged, &usage);
    let (exit_code, signal) = exit_code(status, timed_out, interrupted, killed_hard);
    Finished {
        ended_by_memory: crate::usage::ended_by_memory(&usage, exit_code),
        exit_code,
        signal,
        interrupted,
        duration,
        timed_out,
        cancelled,
        terminal,
        blocked,
        usage,
        limit_hits,
        review_upper: review_upper.map(std::sync::Arc::new),
    }
}

/// The exit code a shell would show, and the signal: runsc's (see [`exit_of`]; 125 when its
/// waiter ended without a status), 124 for the deadline, and the caller's signal when the run
/// was ended after it.
fn exit_code(
    status: Option<ExitStatus>,
    timed_out: bool,
    interrupted: Option<i32>,
    killed_hard: bool,
) -> (i32, Option<i32>) {
    let (exit_code, signal) = match status {
        Some(s) => exit_of(s),
        None => (125, None),
    };
    match (timed_out, interrupted) {
        (true, _) => (124, None),
        // Ended by us after the signal: as if the signal had killed it.
        (false, Some(sig)) if killed_hard => (128 + sig, Some(sig)),
        _ => (exit_code, signal),
    }
}

/// A run that cannot go on after runsc started, failed closed with `error`: runsc and its
/// container are ended ([`abandon`]), the bundle `dir` removed, then the run's cgroups.
pub(super) fn fail_closed(
    plan: &Plan,
    ctl: &Control,
    child: &mut std::process::Child,
    dir: tempfile::TempDir,
    error: Error,
) -> Error {
    abandon(plan, ctl, child);
    drop(dir);
    remove_cgroups(plan);
    error
}

/// Ends a run that cannot go on: runsc and its container are killed and its state removed.
fn abandon(plan: &Plan, ctl: &Control, child: &mut std::process::Child) {
    kill(plan, ctl, "KILL");
    let _ = child.kill();
    let _ = child.wait();
    runsc_about_container(ctl, &["delete", "--force", &plan.caller.run_id]);
}

/// The run's cgroup directories (`cgroupsPath` `/stockade/<run id>` in every hierarchy), which
/// runsc leaves behind when its container was killed: removed once empty, best effort.
fn remove_cgroups(plan: &Plan) {
    if plan.caller.rootless {
        return;
    }
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for h in hierarchies.flatten() {
        let dir = h.path().join("stockade").join(&plan.caller.run_id);
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

/// `runsc run` exits with the command's code, and 128+N when the command was killed by
/// signal N, which a command's own `exit 130` looks like too: the signal is named only when
/// runsc itself was killed by one.
fn exit_of(status: ExitStatus) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => (c, None),
        (None, Some(s)) => (128 + s, Some(s)),
        (None, None) => (125, None),
    }
}
