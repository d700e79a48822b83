//! The launch stage: the proxy's starter, the run journal written on a thread of its own
//! while the backend plans and sets the sandbox up, and the backend's run of its plan. The
//! same for every backend: the stage reads the backend's [`sandbox::Traits`], not its name.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::Context;
use crate::proxy_stage::proxy_starter;
use crate::{journal, Error};

/// What the launch stage hands on.
pub(super) struct Launched {
    /// The proxy the run's network went through (mode proxy), to stop after the run.
    pub proxy: Arc<Mutex<Option<net::proxy::Proxy>>>,
    /// What enforced each layer, for the record (only when `--report` asks for one).
    pub enforcement: Option<sandbox::Enforcement>,
    pub fallback: Option<sandbox::CwdFallback>,
    /// The run's end, or why the backend failed.
    pub launched: Result<sandbox::Outcome, Error>,
    /// Removed once the run's sweep has completed.
    pub journal: Option<journal::Held>,
    /// For the checks after a run that judge by ctime.
    pub launched_at: SystemTime,
    /// What the backend held during the run (the sweep's reading of it).
    pub held: workspace::sweep::Held,
}

/// Plans and runs `resolved`'s spec with the chosen backend.
pub(super) fn launch(
    cx: &Context<'_>,
    resolved: &workspace::Resolved,
    credentials: Option<net::credential::Routes>,
    io: sandbox::RunIo,
) -> Result<Launched, Error> {
    let (policy, request, backend, traits) = (cx.policy, cx.request, cx.backend, cx.traits);
    let spec = &resolved.spec;
    // Mode proxy: the backend hands over a listener in the sandbox's network, and the
    // proxy serves it from here under the policy's rules.
    let proxy = Arc::new(Mutex::new(None));
    let start = match spec.network {
        sandbox::Network::Proxy { .. } => Some(proxy_starter(
            policy,
            request.live.as_ref(),
            proxy.clone(),
            credentials,
        )?),
        _ => None,
    };
    // For the checks after a run that judge by ctime (the gVisor backend's).
    let launched_at = SystemTime::now();
    // What the backend holds during the run (native: both; the Sentry has no creation
    // guard and lets a directory holding read-only binds be renamed).
    let held = workspace::sweep::Held {
        creation_guard: traits.creation_guard,
        pinned: traits.pins,
    };
    // Written before the command can start, removed once its sweep has completed: a
    // supervisor killed in between leaves it for the next run on the workspace.
    let run_span = tracing::Span::current();
    let begin_journal = || {
        tracing::debug_span!(parent: &run_span, "journal")
            .in_scope(|| journal::begin(request, policy, resolved, cx.id, launched_at, held))
    };
    // The journal is written and synced on a thread of its own while the plan is lowered
    // and the sandbox set up (its `fdatasync` is the larger part of its cost): the
    // backend starts the command only once the journal is durable, as when the two ran
    // one after the other. A plan or launch that fails before the command starts removes
    // it (the caller's sweep of a failed launch).
    let (ready, gate) = std::sync::mpsc::channel::<Result<(), String>>();
    let before_command: sandbox::BeforeCommand = Box::new(move || {
        gate.recv()
            .unwrap_or_else(|_| Err("the run journal's writer ended".into()))
    });
    let (planned, written) = std::thread::scope(|s| {
        // Captures only references: a copy is still here to run in line when no thread
        // can be made (the caller's process limit reached, say).
        let write = || {
            let written = begin_journal();
            let _ = ready.send(written.as_ref().map(|_| ()).map_err(|e| e.to_string()));
            written
        };
        let writer = std::thread::Builder::new()
            .name("stockade-journal".into())
            .spawn_scoped(s, write)
            .map_err(|_| write());
        let planned = tracing::debug_span!("plan").in_scope(|| backend.plan(spec, cx.id));
        let planned = planned.map(|plan| {
            let enforcement = request.report.is_some().then(|| plan.enforcement());
            let fallback = plan.cwd_fallback();
            let launch = sandbox::Launch {
                io,
                options: request.options,
                proxy: start,
                before_command: Some(before_command),
            };
            // A backend that does not report a failed `execve`: the command is looked up
            // here, as the native init would find it (see `exec`).
            let cwd = fallback.as_ref().map_or(&spec.cwd, |_| &spec.workspace);
            let not_found = (!traits.exec_errors)
                .then(|| super::exec::exec_errno(spec, cwd))
                .flatten();
            let launched = match not_found {
                Some(errno) => Ok(super::exec::not_run(errno)),
                None => tracing::debug_span!("launch", backend = backend.name())
                    .in_scope(|| plan.run(launch))
                    .map_err(Error::from),
            };
            (enforcement, fallback, launched)
        });
        let written = match writer {
            Ok(handle) => handle.join(),
            Err(in_line) => Ok(in_line),
        };
        (planned, written)
    });
    let written = written.unwrap_or_else(|_| {
        Err(Error::Io {
            what: "write the run journal".into(),
            cause: std::io::Error::other("the journal's writer panicked"),
        })
    });
    match (planned, written) {
        (Ok((enforcement, fallback, launched)), Ok(journal)) => Ok(Launched {
            proxy,
            enforcement,
            fallback,
            launched,
            journal,
            launched_at,
            held,
        }),
        // The command did not start (its start waits for the journal).
        (_, Err(e)) => Err(e),
        (Err(e), Ok(journal)) => {
            if let Some(j) = journal {
                j.done();
            }
            Err(e.into())
        }
    }
}
