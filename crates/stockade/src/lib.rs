//! Stockade runs an agent's command inside layered containment and records what happened.
//!
//! A run is a fixed order of stages, each a `tracing` span (`STOCKADE_LOG=debug` prints
//! them with their times):
//!
//! 1. **trust**: a workspace approved with `stockade trust` must still match its approval;
//! 2. **spec**: the policy, the request and one scan of the workspace become the resolved
//!    [`Spec`] (`workspace::Resolved`), which every later stage reads;
//! 3. **plan**: the backend, chosen once at the start (`backend::choose`; every stage reads
//!    its [`sandbox::Traits`], none its name), lowers the spec to its own plan
//!    ([`Backend::plan`]; the native one: mounts, ids, Landlock, seccomp, cgroups; gVisor: an
//!    OCI bundle), which says what enforces each layer ([`sandbox::Enforcement`]);
//! 4. **proxy**: under `--net proxy`, the egress proxy serves the sandbox's network;
//! 5. **launch**: the backend runs its plan with the run's own I/O ([`RunIo`]), the same
//!    [`sandbox::Launch`] for every backend, and ends with the one [`sandbox::Outcome`]; its
//!    failures are [`sandbox::RunError`]s, the same for every backend;
//! 6. **sweep**: what the run left that host tools would act on is quarantined and reported;
//! 7. **record**: the run record (`--report`) and the audit log (`--audit`, JSON lines), written
//!    through nothing the sandbox could have planted.
//!
//! Every refusal is an [`Error`] with a stable code ([`Error::code`]) and a fix
//! ([`Error::hint`]). The crate never prints: the CLI does.
//!
//! ```no_run
//! use stockade::{run, RunRequest};
//! let request = RunRequest::new(vec!["true".into()], None)?;
//! let policy = policy::resolve(None, &policy::Overrides::default())?;
//! let result = run(&policy, &request)?;
//! assert_eq!(result.exit_code, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`run`] uses this process's streams and signals, as the `stockade` binary does.
//! [`run_with_io`] gives a run its own ([`RunIo`]): output into descriptors of the caller's,
//! and a [`Cancel`] handle that ends the run or passes its command signals, so that several
//! runs can go on at once in one process. `examples/capture.rs` captures a run's output and
//! reads its violations and usage (CI runs it).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod audit_event;
mod backend;
mod claude_login;
mod command_rules;
mod created_roots;
mod credentials;
mod error;
mod journal;
mod live_policy;
mod proxy_stage;
mod record;
mod record_path;
mod review_stage;
mod run;
pub mod why;
mod workspace_lock;

use std::path::PathBuf;

use audit_event::AuditEvent;
pub use command_rules::{match_command, run_excluded, CommandMatch};
pub use credentials::SourceCache;
pub use error::Error;
pub use journal::RecoveredSweep;
pub use live_policy::{Applied, Change, LivePolicy};
pub use net::proxy::{
    Event as NetworkEvent, DENIED as NETWORK_DENIED, UPSTREAM_FAILED as NETWORK_UPSTREAM_FAILED,
};
pub use proxy_stage::{audit_policy_change, serve_proxy};
use record::AuditLog;
pub use record_path::E_UNSAFE_RECORD_PATH;
use record_path::{RecordPath, Which};
pub use review_stage::{
    not_copyable, resolve_existing_part, store_dir as change_store_dir, ReviewFailure,
    ReviewSummary,
};
pub use run::{run, run_with_io};
pub use sandbox::{Backend, Cancel, Input, Options, RunIo, Sink, Spec};
pub use sandbox::{Check, Violation};

// What the front ends use besides a run, so that they reach everything through this crate
// (issue 33, item 1): the cli and the MCP server depend on no backend or mechanism crate.
/// The command layer (`stockade guard`, `run --guard`).
pub use guard::command;
/// Workspace approvals (`stockade trust`).
pub use guard::trust;
/// The native backend's plan as `stockade policy show` prints it, the mechanisms of its
/// limits, and the AppArmor profile that lets it make user namespaces on Ubuntu.
pub mod native_plan {
    pub use native::cgroup::Mechanism;
    pub use native::userns::apparmor_profile;
    pub use native::Plan;
}
/// Take ownership of a descriptor this process inherited (`--control-fd N`).
pub use sys::parent::adopt_inherited_fd;
/// A review run's change sets (`stockade review`, `diff`, `apply`).
pub use workspace::changes;
/// Workspace snapshots (`stockade snapshot`).
pub use workspace::snapshot;
/// The host as the planner sees it (snapshots filter through it).
pub use workspace::RealHost;

/// The directories `policy` lets a run at `place` write, resolved as a run resolves them.
pub fn writable_roots(
    policy: &policy::Policy,
    place: &workspace::Place,
) -> Result<Vec<PathBuf>, Error> {
    Ok(workspace::writable_roots(
        policy,
        place,
        &workspace::RealHost,
    )?)
}

/// The name of `backend`, what this machine can enforce with it, found by trying (`stockade
/// doctor`, `stockade selftest`), and, where its mechanisms are not the host kernel's own,
/// what enforces each layer.
pub fn backend_checks(
    backend: policy::BackendName,
) -> (&'static str, Vec<Check>, &'static [sandbox::Layer]) {
    let chosen = backend::choose(backend);
    (chosen.name(), chosen.probe(), chosen.traits().layers)
}

/// One `stockade run`.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// What runs, where, by whom, with which environment.
    pub invocation: workspace::Request,
    /// What may be skipped when it cannot be enforced, and whether output is sanitized.
    pub options: sandbox::Options,
    /// Write the JSON run record here.
    pub report: Option<PathBuf>,
    /// Append JSON-line audit events here.
    pub audit: Option<PathBuf>,
    /// The policy file the policy came from (`--policy`): one inside the workspace must be
    /// approved (`stockade trust`).
    pub policy_file: Option<PathBuf>,
    /// The trust store (`$XDG_STATE_HOME/stockade/trust`); `None` when it cannot be located.
    pub trust_store: Option<PathBuf>,
    /// The user's policy file (`$XDG_CONFIG_HOME/stockade/policy.toml`), read or ignored by
    /// this command: its directory is kept out of the run's reach like the trust store's
    /// (read-only, its ancestors pinned, created before a gVisor run), so that no run makes
    /// or changes the next run's policy. `None` when it cannot be located.
    pub user_policy: Option<PathBuf>,
    /// Outputs of credentials' `command` sources, reused within their TTL by the runs that
    /// share this cache.
    pub credential_cache: std::sync::Arc<SourceCache>,
    /// Network rules that may change while the run goes on (`--control-fd`): its proxy asks
    /// them per decision instead of the policy's own.
    pub live: Option<LivePolicy>,
    /// The `[[commands]]` entry whose grants the policy carries ([`match_command`]): audited
    /// at the start and named in the report.
    pub command_rule: Option<CommandMatch>,
}

impl RunRequest {
    /// A request for `argv` in `workspace` (default: the current directory), as the calling user
    /// with the caller's environment.
    pub fn new(argv: Vec<String>, workspace: Option<PathBuf>) -> Result<RunRequest, Error> {
        let cwd = std::env::current_dir().map_err(|e| Error::Io {
            what: "read the current directory".into(),
            cause: e,
        })?;
        let (uid, gid) = native::caller_ids();
        // A workspace given by name is a grant: through a link a run could have planted
        // (`/tmp/g/ws -> /etc`) it would hand the run the link's target (`workspace::links`);
        // the check and the resolution are one walk. The current directory needs no check:
        // the system gives it with every link resolved.
        let ws = workspace.unwrap_or_else(|| cwd.clone());
        let given = cwd.join(&ws);
        let workspace = match workspace::links::resolve(&workspace::RealHost, &given, uid) {
            Some(r) if r.exists => match r.planted {
                Some(link) => {
                    return Err(workspace::ScanError::GrantThroughLink {
                        given,
                        link: link.link,
                        target: link.target,
                        real: r.real,
                    }
                    .into())
                }
                None => r.real,
            },
            // Missing (ENOENT), or too many links on the way (ELOOP).
            missing => {
                return Err(Error::Workspace {
                    path: ws,
                    cause: std::io::Error::from_raw_os_error(if missing.is_some() {
                        libc::ENOENT
                    } else {
                        libc::ELOOP
                    }),
                })
            }
        };
        if !workspace.is_dir() {
            return Err(Error::Workspace {
                path: ws,
                cause: std::io::Error::from_raw_os_error(20),
            });
        }
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"));
        Ok(RunRequest {
            invocation: workspace::Request {
                argv,
                workspace,
                cwd: std::fs::canonicalize(&cwd).unwrap_or(cwd),
                home,
                uid,
                gid,
                env: std::env::vars_os().collect(),
            },
            options: sandbox::Options::default(),
            report: None,
            audit: None,
            policy_file: None,
            trust_store: guard::trust::default_store_dir(
                std::env::var_os("XDG_STATE_HOME").as_deref(),
                std::env::var_os("HOME").as_deref(),
            ),
            user_policy: policy::file::user_policy_path(
                std::env::var_os("XDG_CONFIG_HOME").as_deref(),
                std::env::var_os("HOME").as_deref(),
            ),
            credential_cache: Default::default(),
            live: None,
            command_rule: None,
        })
    }
}

/// The result of a run that started.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The exit code a shell would show (124 after a timeout, 128+N after signal N).
    pub exit_code: i32,
    /// How the run ended: signal, duration, usage, limits reached, output passed and dropped,
    /// layers skipped under `allow_degraded`.
    pub outcome: sandbox::Outcome,
    /// What the run tried that was refused (during the run) or undone (after it), each with
    /// its code, kind, path and what was done.
    pub violations: Vec<Violation>,
    /// The egress proxy's decisions (mode proxy).
    pub network: Vec<net::proxy::Event>,
    /// The run's id, as in the report, the audit log and the quarantine's directory.
    pub run_id: String,
    /// The caller's current directory, when the command could not start there (it started
    /// in the workspace), and why.
    pub cwd_fallback: Option<sandbox::CwdFallback>,
    /// Review and ephemeral runs: what the run changed in its view of the workspace.
    pub review: Option<ReviewSummary>,
    /// Review and ephemeral runs: why the change set could not be read and sealed after the
    /// command ended (then `review` is `None`; the change directory stays in the store,
    /// listed as not finished).
    pub review_error: Option<ReviewFailure>,
    /// Earlier runs on the workspace whose supervisor died before their sweep (SIGKILL): their
    /// sweeps, completed before this run started (see `journal`).
    pub recovered: Vec<RecoveredSweep>,
}

/// The native plan of a policy (without running it), for `stockade policy show`. A preset's
/// state directories are made as for a run: the plan binds them.
pub fn plan(policy: &policy::Policy, request: &RunRequest) -> Result<native::Plan, Error> {
    created_roots::make(policy, &request.invocation.home)?;
    let resolved = run::spec::resolve(policy, request, native::Native.traits())?;
    native::Plan::lower(&resolved.spec, &native::RealHost).map_err(|e| Error::Run(e.into()))
}

/// The trust check of a run (see [`guard::trust::check_run`]): a workspace approved once, or
/// a policy file inside the workspace, must match the approved files.
pub fn check_trust(request: &RunRequest) -> Result<guard::trust::Gate, Error> {
    let workspace = &request.invocation.workspace;
    let gate = guard::trust::check_run(
        workspace,
        request.policy_file.as_deref(),
        request.trust_store.as_deref(),
    )?;
    match gate {
        guard::trust::Gate::Refused(reason) => Err(Error::Untrusted {
            workspace: workspace.clone(),
            reason,
        }),
        gate => Ok(gate),
    }
}

/// Writes a report file (`stockade sanitize --report`) the way a run's `--report` is written:
/// a new file renamed over the name, so a link planted there is replaced, never followed.
pub fn write_report_file(path: &std::path::Path, bytes: &[u8]) -> Result<(), Error> {
    RecordPath::locate(path, Which::Report)?.replace(bytes)
}

/// Record a refusal that happened before a run could start (bad policy file, bad workspace)
/// in the audit log at `path`.
pub fn audit_refusal(path: &std::path::Path, error: &Error) -> Result<(), Error> {
    let mut audit = AuditLog::open(Some(path), &run::run_id())?;
    audit.event(&AuditEvent::Refused {
        code: error.code(),
        kind: error.kind(),
        message: error.to_string(),
    })
}
