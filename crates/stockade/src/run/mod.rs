//! The stages of `stockade run`, in their one order, a file per stage (issue 33, item 2):
//!
//! 1. **open** (here): the audit log and the report's place, the host's Claude Code login
//!    for `--agent claude-code` without a key, the policy's digest, and the one choice of a
//!    backend (`crate::backend::choose`);
//! 2. **recover** (here): the workspace's lock, and an earlier run's sweep completed from its
//!    journal;
//! 3. [`spec`]: trust, the spec (one scan), credentials, stores, the review view;
//! 4. [`start`]: the records refused where the command could write them, the start audited,
//!    masked files with other names refused;
//! 5. [`launch`]: the proxy, the journal beside the plan, the backend's run;
//! 6. [`finish`]: the proxy stopped, the review sealed, the sweep;
//! 7. [`close`]: the audit events and the record.
//!
//! A [`Context`] carries what every stage reads; each stage hands its successor a value of
//! its own (`Prepared`, `Launched`, `Ran`).

mod close;
mod exec;
mod finish;
mod launch;
pub(crate) mod spec;
mod start;

use std::time::{SystemTime, UNIX_EPOCH};

use crate::backend;
use crate::record::AuditLog;
use crate::record_path::{RecordPath, Which};
use crate::{claude_login, journal, workspace_lock, Error, RecoveredSweep, RunRequest, RunResult};

/// What every stage of one run reads.
pub(super) struct Context<'a> {
    pub policy: &'a policy::Policy,
    pub request: &'a RunRequest,
    pub id: &'a str,
    /// The policy's digest, in the start event and the record.
    pub digest: String,
    /// The backend, chosen once; every stage reads its traits, none its name.
    pub backend: &'static dyn sandbox::Backend,
    pub traits: sandbox::Traits,
}

/// A run id unique on this machine: the time in milliseconds and the process id, and, for
/// the second and later runs this process starts (`stockade mcp` runs calls concurrently, so
/// two may start in the same millisecond), a sequence number. The id names the gVisor
/// container and the quarantine directory, so a repeat would make one run fail or mix two.
pub(crate) fn run_id() -> String {
    static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if n == 0 {
        format!("{}-{}", now.as_millis(), std::process::id())
    } else {
        format!("{}-{}-{n}", now.as_millis(), std::process::id())
    }
}

/// Run a request under a policy: plan, launch, sweep, record. Refusals are audited too.
pub fn run(policy: &policy::Policy, request: &RunRequest) -> Result<RunResult, Error> {
    run_with_io(policy, request, sandbox::RunIo::process())
}

/// [`run`] with the run's own I/O: where the command's output goes, and the handle that
/// cancels it or passes it signals. Several runs can go on at once in one process, each with
/// its own (the process's signals are left alone unless `io.process_signals`).
pub fn run_with_io(
    policy: &policy::Policy,
    request: &RunRequest,
    io: sandbox::RunIo,
) -> Result<RunResult, Error> {
    let id = run_id();
    // Each stage is a span (`STOCKADE_LOG=debug` prints them with their timings); all on
    // this side of the fork: nothing in the sandbox's processes logs or allocates for it.
    let _run = tracing::debug_span!("run", id = %id).entered();
    let open = tracing::debug_span!("open").entered();
    // The directories of the report and the audit log are resolved and held before anything
    // runs, and refused when the command could write them (after planning, below).
    let mut audit = AuditLog::open(request.audit.as_deref(), &id)?;
    let report = match &request.report {
        Some(path) => Some(RecordPath::locate(path, Which::Report)?),
        None => None,
    };
    // `--agent claude-code` without a key: the host's Claude Code login, if there is one.
    let chosen = claude_login::choose(policy, &request.invocation.env, &request.invocation.home)?;
    let policy = chosen.as_ref().unwrap_or(policy);
    // The one choice of a backend: every stage after it reads its traits, none its name.
    let backend = backend::choose(policy.backend);
    let cx = Context {
        policy,
        request,
        id: &id,
        digest: policy::digest(policy),
        backend,
        traits: backend.traits(),
    };
    drop(open);
    let mut recovered: Vec<RecoveredSweep> = Vec::new();
    let mut recovered_audited = false;
    let result = (|| {
        // A root caller's gVisor run keeps other runs of the workspace from changing its mount
        // points until it has ended (see `workspace_lock`); held until after the sweep.
        let _workspace =
            workspace_lock::take(&request.invocation.workspace, cx.traits.exclusive_workspace)?;
        // An earlier run on this workspace whose supervisor died before its sweep (SIGKILL):
        // its sweep is completed first, from its journal.
        recovered = tracing::debug_span!("recover").in_scope(|| {
            let writable = workspace::writable_roots(
                policy,
                &request.invocation.place(),
                &workspace::RealHost,
            )?;
            journal::recover(request, &writable)
        })?;
        let prepared = spec::prepare(&cx)?;
        start::start(
            &cx,
            &prepared.resolved.spec,
            &mut audit,
            report.as_ref(),
            &recovered,
            &mut recovered_audited,
        )?;
        let launched = launch::launch(&cx, &prepared.resolved, prepared.credentials, io)?;
        let ran = finish::finish(&cx, &prepared.resolved, launched, prepared.review)?;
        Ok((prepared.resolved.spec, ran))
    })();
    let _record = tracing::debug_span!("record").entered();
    match result {
        Ok((spec, ran)) => close::record(
            &cx,
            &mut audit,
            report.as_ref(),
            &spec,
            ran,
            std::mem::take(&mut recovered),
        ),
        Err(e) => {
            close::refused(&mut audit, &e, &recovered, recovered_audited)?;
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn runs_started_in_the_same_millisecond_get_different_ids() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| super::run_id()).collect();
        assert_eq!(ids.len(), 1000);
    }
}
