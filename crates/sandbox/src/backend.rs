//! The one trait every isolation backend implements, object-safe: the pipeline chooses a
//! backend once and holds it as `Box<dyn Backend>`, with no arm per backend after that
//! (issue 33, item 1).

use std::path::PathBuf;

use crate::{
    BeforeCommand, Check, CwdFallback, Options, Outcome, RunError, RunIo, Spec, StartProxy,
};

/// A sandbox implementation: finds what this machine can enforce, says what it holds during
/// a run, and lowers a [`Spec`] to a [`Planned`] run of its own.
pub trait Backend: Send + Sync {
    /// The name in reports, audit events and `--backend`.
    fn name(&self) -> &'static str;
    /// What this machine can enforce, found by trying.
    fn probe(&self) -> Vec<Check>;
    /// What the backend holds during a run, which the stages around it adapt to.
    fn traits(&self) -> Traits;
    /// The spec lowered to this backend's mechanisms for the run `run_id` (inspectable
    /// before it runs), or why it cannot be.
    fn plan(&self, spec: &Spec, run_id: &str) -> Result<Box<dyn Planned>, RunError>;
}

/// A spec lowered by a backend, ready to run once.
pub trait Planned: Send {
    /// Why the command will not start in the caller's current directory, if it will not.
    fn cwd_fallback(&self) -> Option<CwdFallback>;
    /// What enforces each layer of this run, as planned (the run record).
    fn enforcement(&self) -> Enforcement;
    /// Runs the plan to its end.
    fn run(self: Box<Self>, launch: Launch) -> Result<Outcome, RunError>;
}

/// Whether a backend gives review and ephemeral runs a copy-on-write view of the workspace
/// ([`crate::Review`]), and, for a root caller, who owns the view's top directory (the change
/// directory's `upper/`, whose owner and mode the merged workspace shows): the id the
/// command runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Views {
    /// No view: review and ephemeral runs are refused.
    None,
    /// A root caller's command runs as an id no account has (native, gVisor): the top
    /// directory is that id's.
    UnassignedId,
    /// A root caller's command runs as the workspace's owner (the container backends): the
    /// top directory is the workspace's owner's and group's, as the workspace is.
    WorkspaceOwner,
}

/// What a run takes from its caller besides the plan: the same for every backend.
pub struct Launch {
    /// The command's streams and the run's cancel handle.
    pub io: RunIo,
    pub options: Options,
    /// Mode proxy: what serves the proxy's listener, once the backend has opened it in the
    /// sandbox's network.
    pub proxy: Option<StartProxy>,
    /// Waited for before the command starts (see [`BeforeCommand`]).
    pub before_command: Option<BeforeCommand>,
}

/// What a backend holds during a run, typed: the pipeline reads these instead of the
/// backend's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traits {
    /// Protected names created during the run are refused as they are made (mediated
    /// creation). Without it, only the sweep after the run finds them, so stockade's own
    /// state directories that are missing in a writable root are made before the run (then
    /// they exist, and are protected like any other path).
    pub creation_guard: bool,
    /// A directory holding read-only binds cannot be renamed during the run.
    pub pins: bool,
    /// A root caller's run holds the workspace's lock exclusively, from before its last check
    /// of the mount points to its end (the backend's file server, root, would create a
    /// missing mount point on the host and follow what it finds on the way).
    pub exclusive_workspace: bool,
    /// Review and ephemeral runs: whether the command can be given a copy-on-write view of
    /// the workspace, and whose the view's top directory is for a root caller.
    pub views: Views,
    /// A command that cannot be executed (not found, not executable) is reported as
    /// [`crate::Outcome::exec_errno`] with exit 127 or 126. Without it, the pipeline looks the
    /// command up itself before the run (among the host's files as every backend's sandbox
    /// sees them), so the answer is the same under every backend.
    pub exec_errors: bool,
    /// Where a backend's mechanisms are not the host kernel's namespaces, Landlock and
    /// seccomp: what enforces each layer, said in words (`doctor`, the run record).
    pub layers: &'static [Layer],
}

/// What enforced each layer of a run: the run record's `plan`, `limits` and `enforced_by`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Enforcement {
    /// The command's uid inside the sandbox, and the host uid that is.
    pub inside_uid: u32,
    pub host_uid: u32,
    pub writable_roots: Vec<PathBuf>,
    /// Masked paths: unreadable, and emptied (readable, nothing in them).
    pub masked: Vec<PathBuf>,
    pub emptied: Vec<PathBuf>,
    pub protected: Vec<PathBuf>,
    /// Mounts made, Landlock rules and seccomp rules installed.
    pub mounts: usize,
    pub landlock_rules: usize,
    pub seccomp_rules: usize,
    /// The names of the command's environment.
    pub env_names: Vec<String>,
    /// Each limit and the mechanism that enforces it.
    pub memory: Option<Enforced>,
    pub pids: Option<Enforced>,
    pub cpu_millicores: Option<Enforced>,
}

/// One limit and what enforces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enforced {
    pub value: u64,
    pub mechanism: LimitMechanism,
}

/// What enforces a limit (serialized as its [`LimitMechanism::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum LimitMechanism {
    #[serde(rename = "cgroup_v1")]
    Cgroup1,
    #[serde(rename = "cgroup_v2")]
    Cgroup2,
    /// A per-process (memory) or per-user-namespace (pids) rlimit.
    #[serde(rename = "rlimit")]
    Rlimit,
    /// The run's cgroup (root callers), made by stockade and joined by runsc.
    #[serde(rename = "gvisor_cgroup")]
    GvisorCgroup,
    /// `RLIMIT_NPROC` in the Sentry (it counts only the run's processes).
    #[serde(rename = "gvisor_rlimit_nproc")]
    GvisorRlimitNproc,
    /// A per-process `RLIMIT_AS` (unprivileged callers).
    #[serde(rename = "gvisor_rlimit_as")]
    GvisorRlimitAs,
    /// The container's cgroup, made by its engine (`--memory`, `--pids-limit`, `--cpus`).
    #[serde(rename = "container_cgroup")]
    ContainerCgroup,
}

impl LimitMechanism {
    /// The name in reports and audit events.
    pub fn code(self) -> &'static str {
        match self {
            LimitMechanism::Cgroup1 => "cgroup_v1",
            LimitMechanism::Cgroup2 => "cgroup_v2",
            LimitMechanism::Rlimit => "rlimit",
            LimitMechanism::GvisorCgroup => "gvisor_cgroup",
            LimitMechanism::GvisorRlimitNproc => "gvisor_rlimit_nproc",
            LimitMechanism::GvisorRlimitAs => "gvisor_rlimit_as",
            LimitMechanism::ContainerCgroup => "container_cgroup",
        }
    }

    /// The name in words (`stockade policy show`, `doctor`).
    pub fn describe(self) -> &'static str {
        match self {
            LimitMechanism::Cgroup1 => "cgroup v1",
            LimitMechanism::Cgroup2 => "cgroup v2",
            LimitMechanism::Rlimit => "rlimit",
            LimitMechanism::GvisorCgroup => "runsc's cgroup",
            LimitMechanism::GvisorRlimitNproc => "RLIMIT_NPROC in the Sentry",
            LimitMechanism::GvisorRlimitAs => "RLIMIT_AS per process",
            LimitMechanism::ContainerCgroup => "the container's cgroup",
        }
    }
}

/// One layer of a run and what enforces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Layer {
    pub what: &'static str,
    pub by: &'static str,
}
