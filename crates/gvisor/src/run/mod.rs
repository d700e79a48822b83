//! Runs a [`Plan`]: writes the bundle (a private directory), checks the mount destinations
//! once more, starts `runsc run` (in a mount namespace of its own holding the idmapped trees
//! and the masks' covers, each only on the file planned) with the caller's sinks (and, for a
//! run attached to a terminal, relays the terminal of its own that runsc makes:
//! [`crate::console`]), enforces the timeout and the caller's cancel handle, and removes what
//! the run left.
//!
//! One file per stage: [`prepare`](mod@prepare) (the bundle, runsc's control, the git dirs'
//! copies, the last check of the mount destinations, the cgroup), [`start`] (runsc in its own
//! mount namespace, whose trees and covers [`mounts`] makes, and the run's own terminal),
//! [`supervise`] (the wait, with the caller's signals, cancel and deadline) and
//! [`collect`](mod@collect) (what the run used and left, and how it ended); [`control`] is how
//! runsc is reached about the run.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sandbox::{Cancel, Kind};

use crate::{Error, Plan};

mod collect;
mod control;
mod mounts;
mod prepare;
mod start;
mod supervise;

use collect::{collect, fail_closed, Ended};
use prepare::{check_io, prepare, Prepared};
use start::{attach_console, spawn_runsc};
use supervise::{wait, Waiter};

/// Stands for the bundle directory in a plan's config until [`run`] knows it.
pub(crate) const BUNDLE_PLACEHOLDER: &str = "/@bundle@";

/// What a run takes from its caller: the command's stdin, stdout and stderr, and a handle
/// that ends the run early.
///
/// Each stream must be a pipe (the caller relays it): `runsc` started as root changes the
/// owner of its standard streams to `nobody`, which would give the caller's terminal, or
/// `/dev/null`, away. [`Gvisor::run`](crate::Gvisor::run) refuses anything else.
pub struct Io {
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub cancel: Cancel,
    /// The network namespace held for the run, which runsc and every runsc asked about the
    /// run start in (see [`Plan::control_held`]); in mode proxy it holds the proxy's listener.
    pub network: Option<sys::netns::HeldNetwork>,
    /// Also end the run on SIGINT, SIGTERM or SIGHUP to this process (the `stockade` binary);
    /// otherwise only `cancel` ends it early. With a terminal, this process's SIGWINCH also
    /// resizes the run's.
    pub process_signals: bool,
    /// A terminal of the run's own: the command's stdin, stdout and stderr are a new
    /// pseudo-terminal runsc makes, relayed to and from the caller's (the pipes above then
    /// carry only what runsc itself says). `None`: the pipes are the command's.
    pub terminal: Option<OwnTerminal>,
}

/// What a run's own terminal starts from and how its output is relayed.
#[derive(Debug, Clone, Copy)]
pub struct OwnTerminal {
    /// The caller's terminal (see [`stream::terminal::caller_terminal`]).
    pub caller: stream::terminal::CallerTerminal,
    /// The output limit on what the terminal shows (`None`: everything passes).
    pub limit: Option<u64>,
    /// Pass what the terminal shows through the sanitizer.
    pub sanitize: bool,
}

fn is_pipe(fd: &OwnedFd) -> bool {
    rustix::fs::fstat(fd)
        .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Fifo)
        .unwrap_or(false)
}

/// How a gVisor run ended.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The exit code a shell would show (the command's, or 128+N for signal N).
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub duration: Duration,
    /// `limits.timeout` ended the run (exit code 124).
    pub timed_out: bool,
    /// The caller's cancel handle ended it.
    pub cancelled: bool,
    /// The first SIGINT, SIGTERM or SIGHUP this process received during the run (passed on
    /// to the command as it is).
    pub interrupted: Option<i32>,
    /// The run's own terminal: where its output was accounted (0 stdout, 1 stderr) and what
    /// was relayed.
    pub terminal: Option<(usize, stream::relay::Relayed)>,
    /// What the run changed at the top of an existing git dir that did not come back (a live
    /// config, a conflict with the host), see [`crate::gitstage`].
    pub blocked: Vec<sandbox::Violation>,
    /// What the run used ([`crate::usage`]).
    pub usage: sandbox::Usage,
    /// The memory and process limits it reached.
    pub limit_hits: Vec<sandbox::LimitHit>,
    /// The memory limit ended it (the OOM killer killed the sandbox).
    pub ended_by_memory: bool,
    /// A review run under a disk bound: the tmpfs its view's upper lived on, for the change
    /// set.
    pub review_upper: Option<std::sync::Arc<OwnedFd>>,
}

/// What planning needs of `path` on the host (its kind, owner and mode), not following a
/// last symbolic link.
pub fn host_owned(path: &Path) -> Option<crate::Owned> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some(crate::Owned {
        kind: kind_of(&m)?,
        uid: m.uid(),
        gid: m.gid(),
        mode: m.mode(),
    })
}

/// The kind of `path` on the host, not following a last symbolic link.
pub(crate) fn host_kind(path: &Path) -> Option<Kind> {
    kind_of(&std::fs::symlink_metadata(path).ok()?)
}

/// A directory or anything else; `None` for a symbolic link.
fn kind_of(m: &std::fs::Metadata) -> Option<Kind> {
    if m.file_type().is_dir() {
        Some(Kind::Dir)
    } else if m.file_type().is_symlink() {
        None
    } else {
        Some(Kind::File)
    }
}

fn io_err(what: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |cause| Error::Io {
        what: what.to_string(),
        cause,
    }
}

/// Runs `plan` to its end: prepared ([`prepare()`]), runsc started ([`spawn_runsc`]) with the
/// run's own terminal attached ([`attach_console`]), waited for ([`wait`]) and its end
/// collected ([`collect()`]); a run that cannot go on once runsc started is ended
/// ([`fail_closed`]).
pub(crate) fn run(plan: &Plan, io: Io) -> Result<Finished, Error> {
    check_io(plan, &io)?;
    let Prepared {
        dir,
        ctl,
        console,
        snapshots,
        group,
    } = prepare(plan, &io)?;
    let started = Instant::now();
    // Ctrl-C from here on is caught (and passed on to the command), not fatal, so the run is
    // swept and recorded (see `sys::parent::catch_signals`).
    if io.process_signals {
        let _ = sys::parent::catch_signals();
    }
    let Waiter {
        tx,
        rx,
        child_tx,
        thread: waiter,
    } = Waiter::start()?;
    // Tests only: after the destinations were checked, right before runsc's mount namespace
    // is prepared.
    #[cfg(debug_assertions)]
    sys::test_pause::at("STOCKADE_TEST_GVISOR_PAUSE_LATE");
    let (mut child, review_upper) = spawn_runsc(
        plan,
        &ctl,
        dir.path(),
        console.as_ref(),
        [io.stdin, io.stdout, io.stderr],
    )?;
    let review_upper = match review_upper {
        Ok(upper) => upper,
        Err(e) => {
            // Fail closed: without it the change set (on that tmpfs) could not be read.
            let e = io_err("receive the review view's bounded upper")(e);
            return Err(fail_closed(plan, &ctl, &mut child, dir, e));
        }
    };
    let attached = match (console, io.terminal) {
        (Some(console), Some(own)) => {
            match attach_console(console, own, &mut child, &io.cancel, io.process_signals) {
                Ok(a) => a,
                // Fail closed: the command never runs without the terminal it was given.
                Err(e) => return Err(fail_closed(plan, &ctl, &mut child, dir, e)),
            }
        }
        _ => None,
    };
    // The run is looked at while it lasts (its processes and memory: `usage`).
    let sampler = {
        let ctl = ctl.clone();
        crate::usage::Sampler::start(move || ctl.command(), plan.caller.run_id.clone())
    };
    let cancel_tx = tx;
    io.cancel.on_cancel(Box::new(move || {
        let _ = cancel_tx.send(None);
    }));
    let pid = child.id();
    if let Err(mpsc::SendError(mut child)) = child_tx.send(child) {
        // The waiter is gone (it cannot be: it only waits for this): end the sandbox.
        let e = Error::Io {
            what: "wait for runsc".into(),
            cause: std::io::Error::other("the waiting thread ended"),
        };
        return Err(fail_closed(plan, &ctl, &mut child, dir, e));
    }
    let waited = wait(
        plan,
        &ctl,
        pid,
        &rx,
        &io.cancel,
        io.process_signals,
        started,
    )?;
    let _ = waiter.join();
    let sampled = sampler
        .map(crate::usage::Sampler::finish)
        .unwrap_or_default();
    // runsc is gone: what the terminal still holds is passed on, and the caller's terminal
    // gets its settings back.
    let terminal = attached.map(stream::terminal::Attached::finish);
    let duration = started.elapsed();
    let ended = Ended {
        waited,
        sampled,
        terminal,
        duration,
        review_upper,
    };
    Ok(collect(plan, &ctl, dir, &snapshots, group, ended))
}
