//! `Plan::new`: policy + request + host facts → everything the sandbox will do, as data.
//!
//! The plan is pure given a [`HostView`]: it lists the mount steps in the order the init runs
//! them, the uid/gid maps, the Landlock rules, the seccomp rules, the environment and the exec
//! candidates. Unit tests compare whole plans built against a fake host.

use std::path::{Path, PathBuf};

use policy::{is_within, Policy};
use sandbox::Spec;
use serde::Serialize;

use crate::cgroup::{Missing, ResourcePlan};
use crate::error::PlanError;
use crate::host::{Host, HostView, Kind};
use workspace::{GuardPattern, LinkedSecret};

mod landlock;
mod limits;
mod mounts;
mod reach;
pub use reach::CwdFallback;

pub use workspace::SANDBOX_HOSTNAME;
/// Uid and gid the command has inside the sandbox when the caller is root: never 0.
pub const ROOT_CALLER_INSIDE_ID: u32 = 1000;
/// Host-side uid and gid the sandbox runs as when the caller is root. An id no account uses,
/// so the sandbox passes no owner or group check on host files (`/proc/sys`, `/etc/shadow`);
/// the writable roots (and a private home) reach it through idmapped mounts instead.
pub const ROOT_CALLER_HOST_ID: u32 = 0x7ff0_0000;

/// Device nodes bound from the host into the sandbox's private `/dev`.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];
/// The size of each private directory's tmpfs (`filesystem.private`: shell snapshots).
const PRIVATE_DIR_BYTES: u64 = 64 << 20;
/// Paths of the sandbox's own procfs that are re-bound read-only.
const PROC_READ_ONLY: &[&str] = &["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"];
/// Readable roots under `read_scope = "allow-list"` besides the listed paths.
const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

pub use workspace::Request;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ids {
    pub inside_uid: u32,
    pub inside_gid: u32,
    pub host_uid: u32,
    pub host_gid: u32,
    /// Contents written to `/proc/PID/uid_map` and `gid_map`.
    pub uid_map: String,
    pub gid_map: String,
    /// Unprivileged callers must write `deny` to `setgroups` before `gid_map`.
    pub deny_setgroups: bool,
    /// Root callers drop supplementary groups (root's group 0) inside.
    pub clear_groups: bool,
}

/// An idmapped detached mount the supervisor makes before the fork (root callers only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Idmapped {
    pub slot: usize,
    pub path: PathBuf,
    pub readonly: bool,
    pub uid_map: String,
    pub gid_map: String,
}

/// A review run's workspace view (see [`sandbox::Review`]): a detached overlay in `slot`,
/// attached at `workspace` like a writable root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewView {
    pub slot: usize,
    pub workspace: PathBuf,
    /// The run's change directory (`upper/` and `work/` inside).
    pub changes: PathBuf,
    /// Root callers: the supervisor makes a privileged overlay over an idmapped clone of the
    /// workspace with these maps (see [`review_lower_map`]). Others: the init makes it in the
    /// sandbox's user namespace ([`Mount::Overlay`]).
    pub by_supervisor: Option<(String, String)>,
    /// `limits.disk`: the upper is a tmpfs of this many bytes (see `sys::overlay::bounded_upper`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
    /// Mode of the upper's top directory: the workspace's.
    pub upper_mode: u32,
}

/// One mount step; mirrors `sys::postfork::MountOp` with owned paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Mount {
    MakeRootPrivate,
    Clone {
        source: PathBuf,
        slot: usize,
        recursive: bool,
    },
    ReadOnlyRoot,
    Tmpfs {
        target: PathBuf,
        data: String,
        flags: u64,
    },
    Mkdir {
        path: PathBuf,
        mode: u32,
    },
    File {
        path: PathBuf,
        mode: u32,
    },
    Symlink {
        target: PathBuf,
        path: PathBuf,
    },
    Attach {
        slot: usize,
        target: PathBuf,
        readonly: bool,
        device: bool,
    },
    Proc {
        target: PathBuf,
    },
    Devpts {
        target: PathBuf,
    },
    ReadOnly {
        path: PathBuf,
    },
    Pin {
        path: PathBuf,
    },
    Hold {
        path: PathBuf,
        slot: usize,
    },
    MaskDir {
        target: PathBuf,
    },
    MaskFile {
        target: PathBuf,
    },
    /// An empty, readable, read-only directory over `target`.
    EmptyDir {
        target: PathBuf,
    },
    /// An empty, readable, read-only file over `target`.
    EmptyFile {
        target: PathBuf,
    },
    /// A detached overlay of `lower` with `changes/upper` into `slot` (unprivileged callers'
    /// review runs; made before the tree becomes read-only).
    Overlay {
        lower: PathBuf,
        changes: PathBuf,
        slot: usize,
        /// `limits.disk` in bytes, with the upper's mode: the upper is a tmpfs of that size.
        #[serde(skip_serializing_if = "Option::is_none")]
        disk: Option<(u64, u32)>,
    },
}

impl Mount {
    /// The path this step acts on, for error messages.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Mount::MakeRootPrivate | Mount::ReadOnlyRoot => Some(Path::new("/")),
            Mount::Clone { source, .. } | Mount::Overlay { lower: source, .. } => Some(source),
            Mount::Tmpfs { target, .. }
            | Mount::Attach { target, .. }
            | Mount::Proc { target }
            | Mount::Devpts { target }
            | Mount::MaskDir { target }
            | Mount::MaskFile { target }
            | Mount::EmptyDir { target }
            | Mount::EmptyFile { target } => Some(target),
            Mount::Mkdir { path, .. }
            | Mount::File { path, .. }
            | Mount::Symlink { path, .. }
            | Mount::ReadOnly { path }
            | Mount::Hold { path, .. }
            | Mount::Pin { path } => Some(path),
        }
    }
}

/// Landlock access classes; `prepare` turns them into bits for the kernel's ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Read files, list directories, execute.
    Read,
    /// List a directory (and, as Landlock rights are inherited, directories beneath it) without
    /// reading files: given to directories split around a masked path, so `ls ~` still works.
    List,
    /// Everything (writable roots, private `/tmp`).
    Full,
    /// Read, write, truncate and ioctl on device files.
    Device,
    /// Read plus writing existing files (the sandbox's own `/proc`).
    ReadWriteFiles,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub path: PathBuf,
    pub access: Access,
    /// Whether `path` is a directory (file rules may carry only file rights).
    pub dir: bool,
    /// `(st_dev, st_ino)` of what `path` led to when the run was planned (host rules): the
    /// builder opens the path again and refuses the run when it leads anywhere else, so a
    /// directory swapped for a symbolic link (or another directory) between planning and
    /// the build never moves a grant. `None` for the init's rules (mounts it makes itself:
    /// it checks their kind, and that a `read_empty` cover is its own empty file).
    #[serde(skip)]
    pub id: Option<(u64, u64)>,
    /// Whether the path may pass through symbolic links when opened again: only when the
    /// planner saw one on the way on a fixed system start (`/bin -> usr/bin` in `/`, where no
    /// run can make a link), the identity check then holding the link to its planned target;
    /// a link listed beside a mask gets no rule at all. Otherwise (writable
    /// roots, `allow_read` paths and everything below them: canonical when planned) it is
    /// looked up through no link at all.
    #[serde(skip)]
    pub links: bool,
}

impl Rule {
    /// A rule on a mount the init makes after the fork (checked by the init).
    pub fn child(path: impl Into<PathBuf>, access: Access, dir: bool) -> Rule {
        Rule {
            path: path.into(),
            access,
            dir,
            id: None,
            links: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct LandlockPlan {
    /// Rules on host inodes, added by the supervisor before the fork.
    pub host_rules: Vec<Rule>,
    /// Rules on mounts the init creates, added by the command after the fork.
    pub child_rules: Vec<Rule>,
}

/// Where the sandbox's traffic may go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetPlan {
    pub mode: policy::NetworkMode,
    /// A new network namespace (modes `none` and `proxy`): only loopback inside.
    pub new_namespace: bool,
    /// Mode `proxy`: the address inside the sandbox where the proxy listens (the init opens
    /// it in the sandbox's namespace; the supervisor serves it from the host side).
    pub proxy: Option<std::net::SocketAddrV4>,
}

pub use sandbox::PROXY_ADDR;

fn net_plan(network: sandbox::Network) -> NetPlan {
    let (mode, proxy) = match network {
        sandbox::Network::None => (policy::NetworkMode::None, None),
        sandbox::Network::Proxy { addr } => (policy::NetworkMode::Proxy, Some(addr)),
        sandbox::Network::Host => (policy::NetworkMode::Host, None),
    };
    NetPlan {
        mode,
        new_namespace: mode != policy::NetworkMode::Host,
        proxy,
    }
}

/// Mediated creation (`sys::mediate`): during the run, every call that creates a name in a
/// writable root is performed by the init, which refuses protected paths (and git's built-in
/// rules: hooks, config, commondir, `.git` redirects; see `protect`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct CreationGuard {
    pub roots: Vec<PathBuf>,
    pub protected: Vec<GuardPattern>,
    /// `deny_write` globs of other shapes: only the post-run sweep checks them.
    pub sweep_only: Vec<String>,
    /// Which name-creating calls stop for the init ([`creations`]).
    pub creations: seccomp::Creations,
    pub calls: Vec<seccomp::Mediated>,
    /// Existing git configs (read-only during the run) and the slot of the descriptor the
    /// init holds to rewrite one when only inert keys change (`git remote add`, `git push -u`).
    pub held_configs: Vec<(PathBuf, usize)>,
    /// A review run's workspace: git's built-in rules do not apply below it (its writes are
    /// reviewed), the protected patterns do (see `protect::Rules::reviewed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reviewed: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub ids: Ids,
    pub idmapped: Vec<Idmapped>,
    /// Review and ephemeral runs: how the workspace's copy-on-write view is made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewView>,
    pub slots: usize,
    pub mounts: Vec<Mount>,
    pub landlock: LandlockPlan,
    pub seccomp: Vec<seccomp::Rule>,
    pub env: Vec<(String, String)>,
    pub argv: Vec<String>,
    pub candidates: Vec<PathBuf>,
    pub cwd: PathBuf,
    /// The caller's current directory when the command cannot start there, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd_fallback: Option<CwdFallback>,
    pub hostname: String,
    pub writable_roots: Vec<PathBuf>,
    pub masked: Vec<PathBuf>,
    /// Paths read as empty (`filesystem.read_empty`): covered by an empty, readable file or
    /// directory. Landlock keeps its read rules on them (they are readable; the mount decides
    /// what is read).
    pub emptied: Vec<PathBuf>,
    pub protected: Vec<PathBuf>,
    /// What the init checks while the run lasts, on every name-creating call.
    pub creation_guard: CreationGuard,
    /// Masked files with a hard link outside every mask: the sandbox could read them through
    /// that other name, so the run is refused (see [`linked_secrets`]).
    pub linked_secrets: Vec<LinkedSecret>,
    pub network: NetPlan,
    /// Wall-clock limit of the run in seconds (`limits.timeout`; none when 0).
    pub timeout_secs: Option<u64>,
    /// Resource limits set on the command before `execve` (name, value), e.g.
    /// `("RLIMIT_NOFILE", 256)`: the mechanism is the rlimit itself.
    pub rlimits: Vec<(String, u64)>,
    /// Memory, processes and CPU of the whole run, and how each is enforced.
    pub resources: ResourcePlan,
    /// A limit the policy asks for that nothing on this machine can enforce (the run is
    /// refused, or the limit skipped under `--allow-degraded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources_missing: Option<Missing>,
    /// Output passed on per stream (`limits.output_limit`); none: everything.
    pub output_limit: Option<u64>,
    /// `(st_dev, st_ino)` of every masked, protected and pinned path when the spec was made:
    /// the init mounts over a path only if it is still that file (a concurrent run could have
    /// renamed another directory into its place).
    #[serde(skip)]
    pub identities: std::collections::BTreeMap<PathBuf, (u64, u64)>,
}

impl Plan {
    /// The plan of running `req` under `policy`: its spec resolved (the workspace scanned),
    /// then lowered. What `stockade policy show --json` prints, and the unit tests' way in.
    pub fn new(policy: &Policy, req: &Request, host: &dyn Host) -> Result<Plan, PlanError> {
        let resolved = workspace::Resolved::new(policy, req, host)?;
        Plan::lower(&resolved.spec, host)
    }

    /// The spec lowered to this backend's mechanisms: mounts in the order the init makes them,
    /// uid and gid maps, Landlock rules, seccomp rules, cgroup limits, exec candidates. Pure
    /// given the host: it stats and lists what it mounts over, and decides nothing the spec
    /// does not say.
    pub fn lower(spec: &Spec, host: &dyn Host) -> Result<Plan, PlanError> {
        let program = spec.argv.first().ok_or(workspace::ScanError::NoProgram)?;
        let writable_roots = spec.writable_roots.clone();
        let allows = &spec.read_grants;
        let tmp_grants = &workspace::tmp_read_grants(host, allows, &writable_roots);
        let tmp_attached = tmp_attached(&writable_roots, tmp_grants);
        let mut masks = masks_where(spec, false);
        let emptied = &masks_where(spec, true);
        let masked_paths = paths(&masks);
        let emptied_paths = paths(emptied);
        let protected = &spec.protected;
        let ids = ids(spec.caller);
        // 1. Detached copies of everything that later steps cover (devices live under /dev,
        //    writable roots may live under /tmp), taken while the host tree is still intact,
        //    and the steps over the system's mounts (applied in 3.).
        let mut m = mounts::Mounts::new(spec, host);
        m.devices();
        m.home(&writable_roots);
        m.writable_roots(&writable_roots, &tmp_attached)?;
        m.grants_and_covers(allows);
        m.attached_grants(allows, tmp_grants, &tmp_attached);
        m.reachable(&mut masks);
        m.protections(&masks, emptied);

        // 2. The host tree becomes read-only; private /tmp, /dev and /proc replace the host's
        // (the memory ones sized by `limits::tmp_data`).
        let (resources, resources_missing, output_limit) = limits::resources(&spec.limits, host);
        let tmp_data = limits::tmp_data(spec.limits.tmp_bytes, &resources);
        // 2. (`Mounts::system`) then 3.: home, writable roots, pins, protected paths and masks
        // over them, parents before children.
        let mounts::Mounts {
            slots,
            mounts,
            idmapped,
            granted,
            devices,
            review,
            covers,
            held_configs,
            ..
        } = m.system(tmp_data);

        let landlock = landlock::plan(
            spec,
            host,
            &masked_paths,
            emptied,
            &devices,
            review.as_ref(),
        );
        let identities = match &review {
            Some(r) => {
                review_identities(spec.identities.clone(), &r.workspace, spec.review.as_ref())
            }
            None => spec.identities.clone(),
        };
        let network = net_plan(spec.network);
        let env = spec.env.clone();
        let (cwd, cwd_fallback) = start_dir(spec, host, &granted, &covers, &paths(&masks));
        let candidates = candidates(host, program, &env);
        let creation_guard = creation_guard(
            spec,
            review.as_ref(),
            held_configs,
            resources.allocation_watch,
        );
        Ok(Plan {
            ids,
            idmapped,
            review,
            slots,
            mounts,
            landlock,
            seccomp: seccomp::default_rules(),
            env,
            argv: spec.argv.clone(),
            candidates,
            cwd,
            cwd_fallback,
            hostname: spec.hostname.clone(),
            writable_roots,
            masked: masked_paths,
            emptied: emptied_paths,
            protected: protected.to_vec(),
            creation_guard,
            linked_secrets: spec.linked_secrets.clone(),
            network,
            timeout_secs: spec.limits.timeout.map(|t| t.as_secs()),
            rlimits: limits::rlimits(&spec.limits, &resources),
            resources,
            resources_missing,
            output_limit,
            identities,
        })
    }
}

/// Everything attached below the private /tmp: a grant inside another needs no mount
/// point of its own (see `reach::tmp_mount_points`).
fn tmp_attached(writable_roots: &[PathBuf], tmp_grants: &[(PathBuf, Kind)]) -> Vec<PathBuf> {
    (writable_roots.iter())
        .chain(tmp_grants.iter().map(|(g, _)| g))
        .filter(|p| is_within(p, Path::new("/tmp")))
        .cloned()
        .collect()
}

/// The spec's masks read as empty (`readable`) or hidden, with their kinds.
fn masks_where(spec: &Spec, readable: bool) -> Vec<(PathBuf, Kind)> {
    let as_host_kind = |k: sandbox::Kind| match k {
        sandbox::Kind::Dir => Kind::Dir,
        sandbox::Kind::File => Kind::File,
    };
    (spec.masks.iter())
        .filter(|m| m.readable == readable)
        .map(|m| (m.path.clone(), as_host_kind(m.kind)))
        .collect()
}

/// The paths of `entries` (masks or emptied paths), without their kinds.
fn paths(entries: &[(PathBuf, Kind)]) -> Vec<PathBuf> {
    entries.iter().map(|(p, _)| p.clone()).collect()
}

/// Where the command starts (see [`reach::start_dir`]): `masks`, those left after
/// `Mounts::reachable`.
fn start_dir(
    spec: &Spec,
    host: &dyn HostView,
    granted: &[reach::Granted],
    covers: &[reach::Cover],
    masks: &[PathBuf],
) -> (PathBuf, Option<CwdFallback>) {
    let readable: Option<Vec<PathBuf>> = match spec.read_scope {
        sandbox::ReadScope::Host => None,
        sandbox::ReadScope::AllowList => Some(
            SYSTEM_READ
                .iter()
                .map(PathBuf::from)
                .chain(spec.read_grants.iter().cloned())
                .collect(),
        ),
    };
    reach::start_dir(
        &spec.cwd,
        &reach::View {
            host,
            workspace: &spec.workspace,
            root_caller: spec.caller.uid == 0,
            granted,
            covers,
            masks,
            readable: readable.as_deref(),
        },
    )
}

/// What the init checks on every name-creating call (see [`CreationGuard`]).
fn creation_guard(
    spec: &Spec,
    review: Option<&ReviewView>,
    held_configs: Vec<(PathBuf, usize)>,
    allocation_watch: Option<u64>,
) -> CreationGuard {
    let creations = creations(&spec.writable_roots, review, &held_configs);
    CreationGuard {
        roots: spec.writable_roots.clone(),
        protected: spec.guard.clone(),
        sweep_only: spec.guard_sweep_only.clone(),
        creations,
        calls: seccomp::mediated_calls_for(allocation_watch, creations),
        held_configs,
        reviewed: review.map(|r| r.workspace.clone()),
    }
}

/// Which name-creating calls the init performs (issue 32, item 2). All of them, unless every
/// writable root is the review run's copy-on-write view: the host then sees nothing the
/// command creates until `stockade apply`, which flags (and holds until accepted) every entry
/// the creation guard would have refused there (the policy's protected patterns: `protected`;
/// set-id bits: `setuid`, never written; git's built-in rules already give way below a view),
/// and nothing host-side runs or parses the upper before that. What the command creates in
/// the view is seen inside the run only, by the command itself. Then only calls whose mode
/// carries a set-id bit notify (a plain value the filter can test: the init refuses or drops
/// the bits as in direct mode) and `umask` is observed. Any other writable root (`--allow-write`,
/// a preset's cache) is the host's own directory: the filter cannot tell paths apart, so
/// every creation is mediated. So is a run whose init holds a git config to rewrite (only
/// mediation can rename onto it).
pub fn creations(
    writable_roots: &[PathBuf],
    review: Option<&ReviewView>,
    held_configs: &[(PathBuf, usize)],
) -> seccomp::Creations {
    let all_in_view = review.is_some_and(|r| writable_roots.iter().all(|w| *w == r.workspace));
    if all_in_view && held_configs.is_empty() {
        seccomp::Creations::SetIdModes
    } else {
        seccomp::Creations::All
    }
}

/// The idmapping of a root caller's review view's lower layer (see
/// [`sys::parent::review_lower_map`]): `owner` appears as the sandbox's host id
/// ([`ROOT_CALLER_HOST_ID`]), as in direct mode, and every other id as itself.
pub fn review_lower_map(owner: u32) -> String {
    sys::parent::review_lower_map(owner, ROOT_CALLER_HOST_ID)
}

/// The identities of paths inside a reviewed workspace, as the init finds them in the view:
/// the view keeps the workspace's inode numbers when the change directory is on the same
/// filesystem (its device is the overlay's, so only the inode is compared:
/// [`sys::postfork::ANY_DEVICE`]); across filesystems it does not, and those paths are mounted
/// over unchecked.
fn review_identities(
    mut identities: std::collections::BTreeMap<PathBuf, (u64, u64)>,
    workspace: &Path,
    review: Option<&sandbox::Review>,
) -> std::collections::BTreeMap<PathBuf, (u64, u64)> {
    let same = review.is_some_and(|r| r.same_filesystem);
    identities.retain(|p, _| same || !is_within(p, workspace));
    for (p, id) in identities.iter_mut() {
        if is_within(p, workspace) {
            id.0 = sys::postfork::ANY_DEVICE;
        }
    }
    identities
}

fn ids(req: sandbox::Ids) -> Ids {
    if req.uid == 0 {
        let (i, h) = (ROOT_CALLER_INSIDE_ID, ROOT_CALLER_HOST_ID);
        Ids {
            inside_uid: i,
            inside_gid: i,
            host_uid: h,
            host_gid: h,
            uid_map: format!("{i} {h} 1\n"),
            gid_map: format!("{i} {h} 1\n"),
            deny_setgroups: false,
            clear_groups: true,
        }
    } else {
        Ids {
            inside_uid: req.uid,
            inside_gid: req.gid,
            host_uid: req.uid,
            host_gid: req.gid,
            uid_map: format!("{0} {0} 1\n", req.uid),
            gid_map: format!("{0} {0} 1\n", req.gid),
            deny_setgroups: true,
            clear_groups: false,
        }
    }
}

/// execvp's search, done ahead of time over the sandbox's PATH.
/// Where `execve` looks for the program, in the sandbox's `PATH` order. A name without `/`
/// keeps only the places where the host has something by that name: the sandbox sees the
/// host's files or fewer (masks, empty tmpfs), never more before the command runs, and each
/// failed `execve` costs a path walk on the run's critical path.
fn candidates(host: &dyn HostView, program: &str, env: &[(String, String)]) -> Vec<PathBuf> {
    if program.contains('/') {
        return vec![PathBuf::from(program)];
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or("/usr/local/bin:/usr/bin:/bin");
    path.split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| Path::new(d).join(program))
        .filter(|p| host.lstat_kind(p).is_some())
        .collect()
}

#[cfg(test)]
mod tests;

/// For unit tests elsewhere in the crate: the default profile's plan for workspace `ws` on
/// this machine, for a caller with `uid` (and the same gid), running `true`.
#[cfg(test)]
pub(crate) fn plan_on_this_machine(ws: &Path, uid: u32) -> Plan {
    let req = Request {
        argv: vec!["true".into()],
        workspace: ws.to_path_buf(),
        cwd: ws.to_path_buf(),
        home: ws.join("home"),
        uid,
        gid: uid,
        env: Vec::new(),
    };
    Plan::new(
        &policy::profile("workspace-write").unwrap(),
        &req,
        &crate::host::RealHost,
    )
    .unwrap()
}
