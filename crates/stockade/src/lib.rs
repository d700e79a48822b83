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
mod linked_secrets;
mod live_policy;
mod proxy_stage;
mod record;
mod record_path;
mod review_stage;
pub mod why;
mod workspace_lock;

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use audit_event::AuditEvent;
pub use command_rules::{match_command, run_excluded, CommandMatch};
pub use credentials::SourceCache;
pub use error::Error;
pub use journal::RecoveredSweep;
pub use live_policy::{Applied, Change, LivePolicy};
pub use net::proxy::{
    Event as NetworkEvent, DENIED as NETWORK_DENIED, UPSTREAM_FAILED as NETWORK_UPSTREAM_FAILED,
};
use proxy_stage::proxy_starter;
pub use proxy_stage::{audit_policy_change, serve_proxy};
use record::{AuditLog, RunRecord};
pub use record_path::E_UNSAFE_RECORD_PATH;
use record_path::{RecordPath, Which};
pub use review_stage::{
    not_copyable, resolve_existing_part, store_dir as change_store_dir, ReviewFailure,
    ReviewSummary,
};
pub use sandbox::{Backend, Cancel, Input, Options, RunIo, Sink, Spec};
pub use sandbox::{Check, Violation};

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

/// A run id unique on this machine: the time in milliseconds and the process id, and, for
/// the second and later runs this process starts (`stockade mcp` runs calls concurrently, so
/// two may start in the same millisecond), a sequence number. The id names the gVisor
/// container and the quarantine directory, so a repeat would make one run fail or mix two.
fn run_id() -> String {
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

/// The native plan of a policy (without running it), for `stockade policy show`. A preset's
/// state directories are made as for a run: the plan binds them.
pub fn plan(policy: &policy::Policy, request: &RunRequest) -> Result<native::Plan, Error> {
    created_roots::make(policy, &request.invocation.home)?;
    let resolved = resolve(policy, request, native::Native.traits())?;
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

/// The credentials stage: the real values read from their sources (refused when the command
/// could have written them), stand-ins and route URLs put in the spec's environment, and the
/// routes for the proxy, with the per-run CA's directory (removed when dropped). `None`
/// without credentials.
fn credential_stage(
    policy: &policy::Policy,
    request: &RunRequest,
    spec: &mut sandbox::Spec,
) -> Result<Option<(net::credential::Routes, Option<credentials::CaDir>)>, Error> {
    if policy.credentials.is_empty() {
        return Ok(None);
    }
    let ctx = credentials::Context {
        caller_env: &request.invocation.env,
        home: &request.invocation.home,
        writable_roots: &spec.writable_roots,
        cache: &request.credential_cache,
    };
    let loaded = credentials::load(&policy.credentials, &ctx)?;
    for (k, v) in loaded.env {
        spec.env.retain(|(name, _)| *name != k);
        spec.env.push((k, v));
    }
    spec.env.sort();
    credentials::refuse_real_values_inside(&spec.env, &spec.argv, &loaded.routes)?;
    claude_login::refuse_inside(&spec.env, &spec.argv, &loaded.routes)?;
    for inside in &loaded.login_files {
        claude_login::place(inside, &spec.env, &spec.writable_roots)?;
    }
    if let Some(ca) = &loaded.ca_dir {
        spec.read_grants.push(ca.dir.clone());
    }
    Ok(Some((loaded.routes, loaded.ca_dir)))
}

/// The run's spec, computed once (the workspace scanned once), with the trust store kept
/// read-only when it lies in a writable root (a workspace or `--allow-write` that holds
/// `$HOME`): otherwise the sandbox could forge approvals for other workspaces.
fn resolve(
    policy: &policy::Policy,
    request: &RunRequest,
    traits: sandbox::Traits,
) -> Result<workspace::Resolved, Error> {
    let host = &workspace::RealHost;
    let invocation = &request.invocation;
    // The writable roots alone (no walk) tell whether the scan must protect stockade's state.
    let roots = workspace::writable_roots(policy, &invocation.place(), host)?;
    refuse_state_grants(policy, request, &roots)?;
    let mut state: Vec<PathBuf> = Vec::new();
    let made_before = !traits.creation_guard;
    if let Some(spelled) = request.trust_store.as_deref() {
        let dir = guard::trust::resolve_dir(spelled)?;
        refuse_replaceable_link_to_store(spelled, &dir, &roots, StateKind::TrustStore)?;
        state.push(make_before_run(made_before, dir, &roots)?);
    }
    // The user's policy directory, by its real path (`~/.config` may be a link into a
    // writable root, dotfiles kept with stow): whether this command reads the file or not,
    // no run may make or change it for the next one, nor rename an ancestor away.
    if let Some(spelled) = request
        .user_policy
        .as_deref()
        .and_then(std::path::Path::parent)
        .filter(|p| p.is_absolute())
    {
        let spelled = policy::normalize_lexically(spelled);
        let dir = review_stage::resolve_existing_part(&spelled);
        refuse_replaceable_link_to_store(&spelled, &dir, &roots, StateKind::UserPolicy)?;
        state.push(make_before_run(made_before, dir, &roots)?);
    }
    // The change stores: a command that could make one could plant change sets in it (one
    // that exists is masked, see `review_stage::mask_store`).
    // The run journals likewise: a command that could write one could steer the sweep a
    // later run completes from it (see `journal`).
    for spelled in review_stage::store_dirs(request)
        .into_iter()
        .chain(journal::dir(request))
    {
        let dir = review_stage::resolve_existing_part(&spelled);
        refuse_replaceable_link_to_store(&spelled, &dir, &roots, StateKind::ChangeStore)?;
        state.push(dir);
    }
    // The journal directory exists before the scan (see `journal::make`).
    let journals = journal::make(request);
    let mut cache = walk_cache(journals.as_deref(), invocation, &roots);
    state.retain(|d| roots.iter().any(|w| d.starts_with(w)));
    if state.is_empty() {
        let resolved = workspace::Resolved::new_cached(policy, invocation, host, cache.as_mut())?;
        log_walk(&resolved);
        store_walk_cache(cache, journals.as_deref(), invocation, &resolved);
        return Ok(resolved);
    }
    let mut guarded = policy.clone();
    for dir in &state {
        let pattern = dir
            .to_str()
            .filter(|p| !p.contains(['*', '?', '[', ']', '{', '}']));
        let Some(pattern) = pattern else {
            return Err(Error::Usage {
                message: format!(
                    "stockade's state {} lies in a writable path and cannot be protected (its name is not UTF-8 or holds glob characters)",
                    dir.display()
                ),
                hint: "point XDG_STATE_HOME (or XDG_CONFIG_HOME, for the user policy) at a plain path outside the writable paths".into(),
            });
        };
        guarded.filesystem.deny_write.push(pattern.to_string());
    }
    let mut resolved = workspace::Resolved::new_cached(&guarded, invocation, host, cache.as_mut())?;
    // Read-only is not enough: renaming a parent would move the approvals away whole.
    for dir in &state {
        resolved.pin_ancestors(dir, host);
    }
    // The supervisor writes the run's journal there during the run (see `journal`).
    if let Some(spelled) = journal::dir(request) {
        resolved.own_dir(&review_stage::resolve_existing_part(&spelled), host);
    }
    log_walk(&resolved);
    store_walk_cache(cache, journals.as_deref(), invocation, &resolved);
    Ok(resolved)
}

/// Refuses a grant at or beneath the caller's stockade state directory
/// ([`workspace::state_grants`]): the writable roots, the exact read grants (a glob's literal
/// base), and the workspace. The state directories are those the journal, trust and change
/// store code finds (`$XDG_STATE_HOME/stockade`, else `$HOME/.local/state/stockade`), the
/// default below `$HOME` besides (`stockade` run without `XDG_STATE_HOME` uses it), and the
/// default below the caller's home in `/etc/passwd` (a caller whose `HOME` points elsewhere),
/// each with its existing part canonical, as the grants are compared.
fn refuse_state_grants(
    policy: &policy::Policy,
    request: &RunRequest,
    roots: &[PathBuf],
) -> Result<(), Error> {
    // Without the trailing separator `resolve_existing_part` leaves on an existing path.
    let real = |p: &std::path::Path| -> PathBuf {
        review_stage::resolve_existing_part(p)
            .components()
            .collect()
    };
    use workspace::state_grants::GrantKind;
    let invocation = &request.invocation;
    let env = |name: &str| {
        (invocation.env.iter())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let home = env("HOME");
    let passwd_home = std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|t| workspace::state_grants::passwd_home(&t, invocation.uid));
    let mut state_dirs: Vec<PathBuf> = [
        sandbox::state_dir(env("XDG_STATE_HOME").as_deref(), home.as_deref()),
        sandbox::state_dir(None, home.as_deref()),
        sandbox::state_dir(None, passwd_home.as_deref().map(std::path::Path::as_os_str)),
    ]
    .into_iter()
    .flatten()
    .map(|d| real(&d))
    .collect();
    state_dirs.sort();
    state_dirs.dedup();
    // The agents' own state the presets keep below the default state directory: named
    // below its real path as spelled (a link there leads nowhere it exempts).
    let default = sandbox::state_dir(None, Some(invocation.home.as_os_str())).map(|d| real(&d));
    let agent_dirs: Vec<PathBuf> = (policy::PRESETS.iter())
        .flat_map(|p| p.state.iter())
        .filter_map(|s| s.strip_prefix("~/.local/state/stockade/"))
        .filter_map(|rest| default.as_ref().map(|d| d.join(rest)))
        .collect();
    let ctx = policy::PathContext {
        home: invocation.home.clone(),
        workspace: invocation.workspace.clone(),
        writable_roots: Vec::new(),
    };
    let mut grants: Vec<(GrantKind, PathBuf)> =
        vec![(GrantKind::Workspace, real(&invocation.workspace))];
    grants.extend(roots.iter().map(|r| (GrantKind::Write, real(r))));
    for entry in &policy.filesystem.allow_read {
        for pattern in policy::expand(entry, &ctx)? {
            let path = match &pattern {
                policy::PathPattern::Exact(p) => p.as_path(),
                policy::PathPattern::Glob(g) => g.base(),
            };
            grants.push((GrantKind::Read, real(path)));
        }
    }
    workspace::state_grants::refuse_state_grants(&grants, &state_dirs, &agent_dirs)?;
    Ok(())
}

/// The walk cache of this workspace ([`workspace::walk_cache`]), in the journal directory:
/// none when there is no journal directory, when it lies in one of this run's writable roots
/// (a command there, or an earlier one, could have written it: the run walks), or when the
/// caller is not the process's user (the file's owner is checked against the latter).
fn walk_cache(
    journals: Option<&std::path::Path>,
    invocation: &workspace::Request,
    roots: &[PathBuf],
) -> Option<workspace::WalkCache> {
    let dir = journals?;
    let euid = rustix::process::geteuid().as_raw();
    if invocation.uid != euid {
        return None;
    }
    let real = std::fs::canonicalize(dir).ok()?;
    if roots.iter().any(|w| policy::is_within(&real, w)) {
        tracing::debug!("walk: no cache: {} lies in a writable path", real.display());
        return None;
    }
    Some(workspace::WalkCache::load(
        dir,
        &invocation.workspace,
        euid,
        &binary_id(),
    ))
}

/// What identifies this binary for the walk cache: a cache another build wrote (with other
/// walk rules) is not read.
fn binary_id() -> String {
    use std::os::unix::fs::MetadataExt;
    let exe = std::fs::metadata("/proc/self/exe")
        .map(|m| {
            format!(
                "{}:{}:{}:{}.{}",
                m.dev(),
                m.ino(),
                m.size(),
                m.mtime(),
                m.mtime_nsec()
            )
        })
        .unwrap_or_default();
    format!("{} {exe}", env!("CARGO_PKG_VERSION"))
}

/// Writes what the planner's walk recorded for the next run, when it listed something new.
fn store_walk_cache(
    cache: Option<workspace::WalkCache>,
    journals: Option<&std::path::Path>,
    invocation: &workspace::Request,
    resolved: &workspace::Resolved,
) {
    let (Some(cache), Some(dir)) = (cache, journals) else {
        return;
    };
    let dirs = &resolved.watch.sweep.dirs;
    if !workspace::WalkCache::worth_storing(dirs) {
        return;
    }
    if let Err(e) = cache.store(dir, &invocation.workspace, dirs) {
        tracing::debug!("walk: cache not written in {}: {e}", dir.display());
    }
}

/// The planner's walk, for tests that must know the walk cache was used (or not).
fn log_walk(resolved: &workspace::Resolved) {
    let dirs = &resolved.watch.sweep.dirs;
    tracing::debug!(
        "walk: {} dirs from cache, {} listed, walked again {} times (changed during the walk)",
        dirs.from_cache,
        dirs.listed,
        dirs.rewalks
    );
}

/// Which of stockade's state a directory on the state list is (for the messages).
#[derive(Clone, Copy)]
enum StateKind {
    TrustStore,
    UserPolicy,
    ChangeStore,
}

impl StateKind {
    fn name(self) -> &'static str {
        match self {
            StateKind::TrustStore => "the trust store",
            StateKind::UserPolicy => "your user policy's directory",
            StateKind::ChangeStore => "stockade's state",
        }
    }
    fn variable(self) -> &'static str {
        match self {
            StateKind::UserPolicy => "XDG_CONFIG_HOME",
            StateKind::TrustStore | StateKind::ChangeStore => "XDG_STATE_HOME",
        }
    }
}

/// A state directory that is missing and lies in a writable root, before the run of a
/// backend without a creation guard (gVisor): made (0700, the caller's) so that the run gets
/// it read-only. Without the guard a protected path the command creates is only swept when
/// the run ends, and meanwhile a parallel command would read a user policy or a trust record
/// planted there (found by review). The directory is made before the command starts, and
/// resolved again after: what it resolves to is what is protected.
fn make_before_run(made_before: bool, dir: PathBuf, roots: &[PathBuf]) -> Result<PathBuf, Error> {
    if !made_before || dir.exists() || !roots.iter().any(|w| dir.starts_with(w)) {
        return Ok(dir);
    }
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| Error::Io {
            what: format!(
                "make {} before the run (a path the run must not create)",
                dir.display()
            ),
            cause: e,
        })?;
    let again = review_stage::resolve_existing_part(&dir);
    if again != dir || !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Err(Error::Usage {
            message: format!(
                "{} changed while it was made before the run (now {})",
                dir.display(),
                again.display()
            ),
            hint: "run again; if it persists, make the directory yourself (`mkdir -p`)".into(),
        });
    }
    Ok(dir)
}

/// The trust store (or another state directory) reached through a symbolic link in a
/// writable root (`~/.local/state -> elsewhere` with `--allow-write ~`): the store itself can
/// be kept read-only, but the command could replace the link, and the next runs would read
/// and write approvals (or the policy) where it points (found by review). Refused, with the
/// real path to use instead.
fn refuse_replaceable_link_to_store(
    spelled: &std::path::Path,
    store: &std::path::Path,
    roots: &[PathBuf],
    kind: StateKind,
) -> Result<(), Error> {
    for a in spelled.ancestors() {
        // Only a link is looked into further: this runs before every run.
        if !std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()) {
            continue;
        }
        let Some(parent) = a.parent().and_then(|p| std::fs::canonicalize(p).ok()) else {
            continue;
        };
        if let Some(root) = roots.iter().find(|r| policy::is_within(&parent, r)) {
            return Err(Error::Usage {
                message: format!(
                    "{} {} is reached through the symbolic link {}, which the command could replace (it lies in {}, which it can write)",
                    kind.name(),
                    spelled.display(),
                    a.display(),
                    root.display()
                ),
                hint: format!(
                    "point {} at the real directory (it is {}), or leave {} out of the writable paths",
                    kind.variable(),
                    store.display(),
                    root.display()
                ),
            });
        }
    }
    Ok(())
}

/// A policy file (`--policy`) outside the workspace that the command could write (it lies in
/// an `--allow-write` directory, or is reached through one) would let it rewrite the policy
/// of the next run: refused. One inside the workspace is the trust gate's: it must lie under
/// a trust path, protected during every run and pinned by content (`stockade trust`).
fn refuse_policy_file_in_writable_root(
    request: &RunRequest,
    roots: &[PathBuf],
) -> Result<(), Error> {
    let Some(file) = &request.policy_file else {
        return Ok(());
    };
    let workspace = &request.invocation.workspace;
    let canonical = std::fs::canonicalize(file).map_err(|e| Error::Io {
        what: format!("resolve the policy file {}", file.display()),
        cause: e,
    })?;
    let spelled = policy::normalize_lexically(&request.invocation.cwd.join(file));
    let inside_workspace = policy::is_within(&canonical, workspace);
    let root = roots.iter().find(|r| {
        (!inside_workspace && policy::is_within(&canonical, r))
            || (!policy::is_within(&spelled, workspace) && policy::is_within(&spelled, r))
    });
    match root {
        None => Ok(()),
        Some(root) => Err(Error::Usage {
            message: format!(
                "refusing --policy {}: it lies in {}, which the command can write, so it could \
                 rewrite the policy of your next run",
                file.display(),
                root.display()
            ),
            hint: "keep the policy file outside every --allow-write directory (or in the \
                   workspace's .stockade/, approved with `stockade trust`)"
                .into(),
        }),
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
    let mut audit = AuditLog::open(Some(path), &run_id())?;
    audit.event(&AuditEvent::Refused {
        code: error.code(),
        kind: error.kind(),
        message: error.to_string(),
    })
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
    let mut io = Some(io);
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
    let digest = policy::digest(policy);
    drop(open);
    // The one choice of a backend: every stage after it reads its traits, none its name.
    let backend = backend::choose(policy.backend);
    let traits = backend.traits();
    let mut recovered: Vec<RecoveredSweep> = Vec::new();
    let mut recovered_audited = false;
    let result = (|| {
        // A root caller's gVisor run keeps other runs of the workspace from changing its mount
        // points until it has ended (see `workspace_lock`); held until after the sweep.
        let _workspace =
            workspace_lock::take(&request.invocation.workspace, traits.exclusive_workspace)?;
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
        // First: nothing of an unapproved workspace configuration is acted on.
        tracing::debug_span!("trust").in_scope(|| check_trust(request))?;
        // A preset's state directories, made when missing (the spec needs them to exist).
        let state = tracing::debug_span!("state").entered();
        created_roots::make(policy, &request.invocation.home)?;
        // The spec, once: every later stage reads it, none computes it again.
        // A credential's source file is hidden from the command, as any other secret.
        let hidden = credentials::file_source_masks(&policy.credentials, &request.invocation.home)?;
        drop(state);
        let with_hidden;
        let spec_policy = if hidden.is_empty() {
            policy
        } else {
            let mut p = policy.clone();
            p.filesystem.deny_read.extend(hidden);
            with_hidden = p;
            &with_hidden
        };
        let mut resolved =
            tracing::debug_span!("spec").in_scope(|| resolve(spec_policy, request, traits))?;
        // The real values, read on this side; the spec gets only stand-ins and the routes.
        let (credentials, _ca_dir) = match tracing::debug_span!("credentials")
            .in_scope(|| credential_stage(policy, request, &mut resolved.spec))?
        {
            Some((routes, dir)) => (Some(routes), dir),
            None => (None, None),
        };
        // The change store is never the command's; a review run gets its change directory
        // (removed again if the run does not start).
        tracing::debug_span!("stores").in_scope(|| {
            review_stage::mask_store(policy, request, &mut resolved.spec)?;
            journal::prepare(request, &mut resolved.spec)
        })?;
        let review = tracing::debug_span!("review").in_scope(|| {
            review_stage::prepare(
                policy,
                request,
                &mut resolved.spec,
                &resolved.watch.sweep.links,
                &id,
                backend,
            )
        })?;
        let spec = &resolved.spec;
        let audit_start = tracing::debug_span!("audit_start").entered();
        refuse_policy_file_in_writable_root(request, &spec.writable_roots)?;
        // Before the first audit event: a log in a writable root is never written.
        audit.refuse_inside(&spec.writable_roots)?;
        if let Some(report) = &report {
            report.refuse_inside(&spec.writable_roots)?;
        }
        recovered_audited = true;
        journal::audit(&mut audit, &recovered)?;
        audit.event(&AuditEvent::RunStart {
            argv: &spec.argv,
            workspace: &request.invocation.workspace,
            policy_digest: &digest,
            backend: policy.backend.as_str(),
        })?;
        if let Some(m) = &request.command_rule {
            audit.event(&AuditEvent::CommandRule(m))?;
        }
        drop(audit_start);
        // A masked or protected file with another name outside its mask: the same for every
        // backend, so checked here once (refused, or recorded as skipped).
        let mut linked_skipped = Vec::new();
        linked_secrets::refuse(&spec.linked_secrets, request.options, &mut linked_skipped)?;
        // Mode proxy: the backend hands over a listener in the sandbox's network, and the
        // proxy serves it from here under the policy's rules.
        let proxy = std::sync::Arc::new(std::sync::Mutex::new(None));
        let start = match spec.network {
            sandbox::Network::Proxy { .. } => Some(proxy_starter(
                policy,
                request.live.as_ref(),
                proxy.clone(),
                credentials,
            )?),
            _ => None,
        };
        let io = io.take().unwrap_or_else(sandbox::RunIo::process);
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
                .in_scope(|| journal::begin(request, policy, &resolved, &id, launched_at, held))
        };
        let journal;
        // The journal is written and synced on a thread of its own while the plan is lowered
        // and the sandbox set up (its `fdatasync` is the larger part of its cost): the
        // backend starts the command only once the journal is durable, as when the two ran
        // one after the other. A plan or launch that fails before the command starts removes
        // it (below, with the sweep of a failed launch).
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
            let planned = tracing::debug_span!("plan").in_scope(|| backend.plan(spec, &id));
            let planned = planned.map(|plan| {
                let enforcement = plan.enforcement();
                let fallback = plan.cwd_fallback();
                let launch = sandbox::Launch {
                    io,
                    options: request.options,
                    proxy: start,
                    before_command: Some(before_command),
                };
                let launched = tracing::debug_span!("launch", backend = backend.name())
                    .in_scope(|| plan.run(launch))
                    .map_err(Error::from);
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
        let (enforcement, fallback, launched) = match (planned, written) {
            (Ok(planned), Ok(j)) => {
                journal = j;
                planned
            }
            // The command did not start (its start waits for the journal).
            (_, Err(e)) => return Err(e),
            (Err(e), Ok(j)) => {
                if let Some(j) = j {
                    j.done();
                }
                return Err(e.into());
            }
        };
        let network = tracing::debug_span!("proxy_stop").in_scope(|| {
            let started = proxy.lock().ok().and_then(|mut p| p.take());
            started
                .map(|p: net::proxy::Proxy| p.stop())
                .unwrap_or_default()
        });
        let mut launched = launched;
        let bounded = launched.as_mut().ok().and_then(|o| o.review_upper.take());
        // A failed finish does not lose the run: its exit code, its end and the sweep after
        // it are recorded as for any run, with the error beside them.
        let (review, review_error) = match review {
            Some(stage) => match tracing::debug_span!("review_finish")
                .in_scope(|| stage.finish(launched.is_ok(), bounded))
            {
                Ok(r) => (r, None),
                Err(e) if launched.is_ok() => {
                    (None, Some(ReviewFailure::new(policy.workspace_mode, &e)))
                }
                Err(e) => return Err(e),
            },
            None => (None, None),
        };
        // A launch that failed (a setup step refused: a link swapped in after planning) is
        // swept at once, as its journal would make the next run do; its journal is then
        // done. Left behind, it made every later run on the workspace recover it, and the
        // recovery re-plans the spec, which the same swapped link refuses: the workspace
        // stayed blocked until the journal was removed by hand.
        let sweep = || {
            tracing::debug_span!("sweep").in_scope(|| {
                workspace::sweep::after_run(&resolved, &workspace::RealHost, &id, held, launched_at)
            })
        };
        let mut outcome = match launched {
            Ok(outcome) => outcome,
            // A setup step refused the run: the command never started, so there is nothing of
            // it to sweep, and a sweep would act on what another process did meanwhile (under
            // gVisor the restore of protected paths "moved back" what a concurrent exchange
            // had moved, the exchange that made the start fail: the repository was left
            // rearranged, red team issue 32d, third pass). Its journal goes.
            Err(e) if e.refused_at_setup() => {
                if let Some(j) = journal {
                    j.done();
                }
                return Err(e);
            }
            Err(e) => {
                for v in &sweep() {
                    tracing::warn!(
                        "after a failed launch: {} {}: {}",
                        v.kind,
                        v.path.display(),
                        v.action
                    );
                }
                if let Some(j) = journal {
                    j.done();
                }
                return Err(e);
            }
        };
        if let Some(r) = review.as_ref().filter(|r| r.disk_bound_reached) {
            outcome.limit_hits.push(sandbox::LimitHit {
                code: sandbox::Code::LimitReached.as_str(),
                limit: "disk",
                value: r.disk_bytes.unwrap_or(0),
                mechanism: "tmpfs",
                detail: "the run filled its view's disk bound: writes past it failed with ENOSPC"
                    .into(),
            });
        }
        outcome.skipped.splice(0..0, linked_skipped);
        let mut violations = outcome.blocked.clone();
        violations.extend(sweep());
        if let Some(j) = journal {
            j.done();
        }
        Ok((
            resolved.spec,
            enforcement,
            fallback,
            outcome,
            violations,
            network,
            review,
            review_error,
        ))
    })();
    let _record = tracing::debug_span!("record").entered();
    match result {
        Ok((
            spec,
            enforcement,
            cwd_fallback,
            outcome,
            violations,
            network,
            review,
            review_error,
        )) => {
            for e in &network.events {
                audit.event(&AuditEvent::Network(e))?;
            }
            if network.dropped > 0 {
                audit.event(&AuditEvent::NetworkEventsDropped {
                    code: audit_event::NET_EVENTS_DROPPED,
                    count: network.dropped,
                })?;
            }
            for s in &outcome.skipped {
                audit.event(&AuditEvent::Degraded { skipped: s })?;
            }
            if let Some(f) = &cwd_fallback {
                audit.event(&AuditEvent::CwdFallback {
                    cwd: &f.cwd,
                    reason: &f.reason,
                    started_in: &spec.workspace,
                })?;
            }
            if outcome.ended_by == Some("interrupt") {
                audit.event(&AuditEvent::Interrupt {
                    exit_code: outcome.exit_code,
                    signal: outcome.signal,
                })?;
            }
            for h in &outcome.limit_hits {
                audit.event(&AuditEvent::Limit(h))?;
            }
            if outcome.timed_out {
                audit.event(&AuditEvent::Timeout {
                    code: sandbox::Code::Timeout.as_str(),
                    limit_s: policy.limits.timeout,
                    exit_code: outcome.exit_code,
                })?;
            }
            for v in &violations {
                audit.event(&AuditEvent::Violation(v))?;
            }
            if let Some(r) = &review {
                audit.event(&AuditEvent::Review(r))?;
            }
            if let Some(f) = &review_error {
                audit.event(&AuditEvent::ReviewFailed(f))?;
            }
            audit.event(&AuditEvent::RunEnd {
                exit_code: outcome.exit_code,
                signal: outcome.signal,
                duration_ms: outcome.duration.as_millis() as u64,
                violations: violations.len(),
            })?;
            if let Some(report) = &report {
                RunRecord::new(
                    &id,
                    policy,
                    &digest,
                    &spec,
                    &enforcement,
                    traits.layers,
                    &outcome,
                    &violations,
                    &network.events,
                )
                .with_command_rule(request.command_rule.as_ref())
                .with_review(review.as_ref())
                .with_review_error(review_error.as_ref())
                .write(report)?;
            }
            Ok(RunResult {
                exit_code: outcome.exit_code,
                outcome,
                violations,
                network: network.events,
                run_id: id,
                cwd_fallback,
                review,
                review_error,
                recovered,
            })
        }
        Err(e) => {
            let e: Error = e;
            // What was completed for a dead run stays on record when this run is refused.
            if !recovered_audited {
                journal::audit(&mut audit, &recovered)?;
            }
            audit.event(&AuditEvent::Refused {
                code: e.code(),
                kind: e.kind(),
                message: e.to_string(),
            })?;
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

    /// The walk cache is not read (nor written) when the journal directory that holds it lies
    /// in a writable root of the run (the home as the workspace, `--allow-write` of it or a
    /// parent): a command could have written it. Control: outside them it is.
    #[test]
    fn no_walk_cache_from_a_journal_directory_the_run_can_write() {
        let tmp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(tmp.path()).unwrap();
        let journals = home.join(".local/state/stockade/journal");
        std::fs::create_dir_all(&journals).unwrap();
        let uid = rustix::process::geteuid().as_raw();
        let invocation = workspace::Request {
            argv: vec!["true".into()],
            workspace: home.join("ws"),
            cwd: home.join("ws"),
            home: home.clone(),
            uid,
            gid: 0,
            env: Vec::new(),
        };
        for root in [&home, &home.join(".local"), &journals] {
            let roots = [home.join("ws"), root.clone()];
            assert!(
                super::walk_cache(Some(&journals), &invocation, &roots).is_none(),
                "a cache in {} was used with {} writable",
                journals.display(),
                root.display()
            );
        }
        let roots = [home.join("ws"), home.join("other")];
        assert!(super::walk_cache(Some(&journals), &invocation, &roots).is_some());
        let other = workspace::Request {
            uid: uid + 1,
            ..invocation
        };
        assert!(super::walk_cache(Some(&journals), &other, &roots).is_none());
    }
}
