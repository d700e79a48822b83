//! The container backends (`--backend podman`, `--backend docker`): a run's
//! [`sandbox::Spec`] lowered to the arguments of one hardened `ENGINE run` ([`flags`]) and
//! run by the engine's own command-line client, the same way for both engines.
//!
//! What enforces what, compared with the native backend:
//! - the read-only host, masks, writable roots, protected paths and the private `/tmp`: the
//!   container's mounts over a read-only image that holds only the host's layout
//!   ([`image`]): the host's top-level directories bound read-only and non-recursively,
//!   the writable roots bound writable, protected paths read-only over them, masks as
//!   read-only tmpfs or empty files; not Landlock;
//! - the uid: never root on the host. An unprivileged caller's command runs as the caller
//!   (rootless Podman: uid 0 of Podman's user namespace, which is the caller, without
//!   capabilities); a root caller's as the workspace's owner, and a workspace only root owns
//!   is refused;
//! - capabilities, `no-new-privileges`, the system calls: `--cap-drop ALL`,
//!   `--security-opt no-new-privileges`, the engine's default seccomp profile;
//! - the network: `--network none` (the container's own loopback only);
//! - memory, processes, CPU: the container's cgroup (`--memory`, `--pids-limit`, `--cpus`),
//!   or rlimits under rootless Podman, which has no cgroup of its own on cgroup v1;
//! - what was applied is read back inside the container before the command starts (the
//!   script [`flags::CHECK`]): an engine that ignored a hardening flag gets the run refused
//!   (exit 125, naming the flag), never a weaker run.
//!
//! ```no_run
//! use sandbox::Backend;
//! # fn spec() -> sandbox::Spec { unimplemented!() }
//! let planned = container::ContainerBackend::new(container::Engine::Docker).plan(&spec(), "a-run")?;
//! println!("{:?}", planned.enforcement());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod client;
pub mod flags;
pub mod image;
mod probe;
mod run;

use std::path::{Path, PathBuf};

use sandbox::{Enforced, Enforcement, Layer, LimitMechanism, Planned, RunError, Spec, Traits};

/// A container engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    Podman,
    Docker,
}

impl Engine {
    /// The name in reports, `--backend` and the engine's binary.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Podman => "podman",
            Engine::Docker => "docker",
        }
    }

    /// Whether this caller's runs of the engine are rootless (an unprivileged caller's
    /// Podman). An unprivileged caller's Docker is the daemon's (root's).
    pub fn rootless(self) -> bool {
        self == Engine::Podman && !rustix::process::geteuid().is_root()
    }
}

/// What enforces each layer under a container engine (nothing is claimed that is not).
pub const ENFORCEMENT: &[Layer] = &[
    Layer {
        what: "read-only host, masks, writable roots, protected paths, private /tmp",
        by: "the container's mounts: a read-only image holding only the host's layout, the host's top-level directories bound read-only (non-recursive), writable roots bound writable, protected paths read-only, masks as read-only tmpfs or empty files; the host's /run, /tmp, /proc, /sys and /dev are not bound",
    },
    Layer {
        what: "protected paths created during the run",
        by: "the sweep after the run (no creation guard)",
    },
    Layer {
        what: "review and ephemeral runs",
        by: "an overlay the engine mounts at the workspace, its upper layer the run's change directory (rootless Podman's :O volume in its user namespace; Docker's local volume driver, root callers only), checked inside to be over the workspace planned; --disk refused",
    },
    Layer {
        what: "system calls, capabilities",
        by: "--cap-drop ALL, --security-opt no-new-privileges and the engine's default seccomp profile (read back inside before the command starts); no Landlock",
    },
    Layer {
        what: "network",
        by: "--net none: --network none (the container's own loopback only); --net host: the host's network; --net proxy: --network none, and stockade's proxy listening on the container's loopback (its socket opened in the container's network namespace by stockade while the check holds the command back; an unprivileged caller's Docker is refused)",
    },
    Layer {
        what: "memory, processes, CPU",
        by: "the container's cgroup made by the engine (--memory, --pids-limit, --cpus); rootless Podman on cgroup v1: RLIMIT_NPROC for processes, a memory limit only under --allow-degraded (RLIMIT_DATA per process, which memfd and shared memory escape), CPU refused",
    },
    Layer {
        what: "uid",
        by: "never root on the host: an unprivileged caller's own id (rootless Podman: uid 0 of its user namespace, which is the caller, without capabilities); a root caller's command runs as the workspace's owner (a workspace only root owns is refused)",
    },
    Layer {
        what: "environment",
        by: "the same scrubbed environment as the native backend, given by name (--env NAME) so no value is on the engine's command line; the engine adds HOSTNAME (and Podman container=podman)",
    },
];

/// `--backend podman` or `--backend docker`.
#[derive(Debug, Clone, Copy)]
pub struct ContainerBackend {
    engine: Engine,
}

impl ContainerBackend {
    pub const fn new(engine: Engine) -> ContainerBackend {
        ContainerBackend { engine }
    }
}

/// The engine's binary on `PATH`, refused inside a writable root (the command could replace
/// it for the next run).
pub fn locate(engine: Engine, writable_roots: &[PathBuf]) -> Result<PathBuf, RunError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .map(|d| d.join(engine.name()))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        });
    let Some(binary) = found else {
        return Err(RunError::Unavailable {
            what: "the container engine",
            cause: format!("no `{}` on PATH", engine.name()),
            fix: match engine {
                Engine::Podman => "install Podman (`apt install podman`), or choose another backend".into(),
                Engine::Docker => "install Docker (`apt install docker.io`) and start its daemon (`dockerd`), or choose another backend".into(),
            },
        });
    };
    let canonical = std::fs::canonicalize(&binary).unwrap_or_else(|_| binary.clone());
    if (writable_roots.iter()).any(|w| binary.starts_with(w) || canonical.starts_with(w)) {
        return Err(RunError::Unavailable {
            what: "the container engine",
            cause: format!(
                "{} lies in a writable root of the run (the command could replace it)",
                binary.display()
            ),
            fix: "put the engine's directory first on PATH outside the writable roots".into(),
        });
    }
    Ok(binary)
}

/// The system's directories for programs: the engine's `PATH` (it finds its helpers, conmon,
/// the runtime and `newuidmap`, there), never the caller's, which may name a directory the
/// command can write (`.venv/bin`, `node_modules/.bin`); and none inside a writable root.
const SYSTEM_PATH: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

fn engine_path(writable_roots: &[PathBuf]) -> String {
    let inside = |d: &Path| {
        let c = std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf());
        writable_roots
            .iter()
            .any(|w| c.starts_with(w) || d.starts_with(w))
    };
    (SYSTEM_PATH.iter())
        .filter(|d| !inside(Path::new(d)))
        .copied()
        .collect::<Vec<_>>()
        .join(":")
}

/// The container's init (see [`flags::Target::init`]): catatonit or tini from the host's
/// system directories (never from a writable root), statically linked ones first.
fn container_init(writable_roots: &[PathBuf]) -> Option<PathBuf> {
    [
        "/usr/libexec/podman/catatonit",
        "/usr/bin/catatonit",
        "/usr/bin/tini-static",
        "/usr/bin/docker-init",
        "/usr/bin/tini",
    ]
    .iter()
    .filter_map(|p| std::fs::canonicalize(p).ok())
    .filter(|p| p.is_file())
    .find(|p| !writable_roots.iter().any(|w| p.starts_with(w)))
}

/// runc by its absolute path, for Podman (its default crun fails on this kind of machine's
/// hybrid cgroups); root Podman runs it as root, so never one the command could have
/// written.
fn podman_runtime(engine: Engine, writable_roots: &[PathBuf]) -> Option<String> {
    if engine != Engine::Podman {
        return None;
    }
    ["/usr/sbin/runc", "/usr/bin/runc"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .find(|p| {
            let c = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            !writable_roots.iter().any(|w| c.starts_with(w))
        })
        .map(|p| p.display().to_string())
}

/// The protected and pinned directories that `caller`'s command can neither search nor make
/// searchable (see [`flags::Target::closed`]).
fn closed_dirs(spec: &Spec, caller: &flags::Caller) -> Vec<PathBuf> {
    // Rootless Podman's command is the caller (uid 0 of Podman's namespace, mapped to it).
    if caller.rootless {
        return Vec::new();
    }
    (spec.protected.iter().chain(&spec.pins))
        .filter(|p| closed_to(p, caller))
        .cloned()
        .collect()
}

/// Whether `dir` is a directory the command's id (`caller`'s) can neither search nor change
/// the mode of: not its owner, no access list, and no search bit for it.
fn closed_to(dir: &Path, caller: &flags::Caller) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir).is_ok_and(|m| {
        m.is_dir()
            && m.uid() != caller.uid
            // An access list can give the command's id what the mode bits do not (found by
            // review: one the command set by default ACL on the workspace carried over to a
            // directory root made there).
            && !has_acl(dir)
            && !sandbox::unassigned_id_enters(
                m.mode(),
                (m.uid(), m.gid()),
                Some((caller.uid, caller.gid)),
            )
    })
}

/// The directories above the run's roots that a root caller's command cannot search
/// ([`flags::Target::covers`]), outermost only; none for a rootless caller (its command is
/// the caller, who reached the roots) or a command that is root.
fn covers(spec: &Spec, caller: &flags::Caller, owner_home: Option<&Path>) -> Vec<PathBuf> {
    if caller.rootless || caller.uid == 0 {
        return Vec::new();
    }
    let roots: Vec<&PathBuf> = spec
        .writable_roots
        .iter()
        .chain(&spec.read_grants)
        .collect();
    let mut out: Vec<PathBuf> = Vec::new();
    for dir in roots.iter().flat_map(|r| r.ancestors().skip(1)) {
        if dir == Path::new("/")
            || out.iter().any(|o| o == dir)
            // In a writable root: the owner's to open (a cover there would stop none of its
            // renames). In a read grant it is not: the grant gives no way through it.
            || spec.writable_roots.iter().any(|w| dir.starts_with(w))
            || owner_home == Some(dir)
        {
            continue;
        }
        if closed_to(dir, caller) {
            out.push(dir.to_path_buf());
        }
    }
    out.sort();
    let outer = out.clone();
    out.retain(|c| !outer.iter().any(|o| o != c && c.starts_with(o)));
    out
}

/// Whether `path` carries a POSIX access list (or it cannot be told).
fn has_acl(path: &Path) -> bool {
    match rustix::fs::lgetxattr(path, "system.posix_acl_access", &mut [0u8; 0][..]) {
        Ok(_) => true,
        Err(e) => e != rustix::io::Errno::NODATA && e != rustix::io::Errno::OPNOTSUPP,
    }
}

/// Field `index` of `uid`'s line in `/etc/passwd` (3: the primary group, 5: the home).
fn passwd_field(uid: u32, index: usize) -> Option<String> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > index && f[2].parse() == Ok(uid)).then(|| f[index].to_owned())
    })
}

/// The primary group of `uid` in `/etc/passwd`.
fn primary_gid(uid: u32) -> Option<u32> {
    passwd_field(uid, 3)?.parse().ok()
}

/// The home of `uid` in `/etc/passwd`.
fn home_of(uid: u32) -> Option<PathBuf> {
    passwd_field(uid, 5).map(PathBuf::from)
}

/// Rootless Podman's store (`$XDG_DATA_HOME/containers`, else `~/.local/share/containers`):
/// masked, so the command cannot change the images and containers of the engine that runs
/// it.
fn rootless_store() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    let store = data.join("containers");
    // Made now when missing (Podman makes it as it imports the first image, after the plan):
    // the mask needs it there.
    let _ = std::fs::create_dir_all(&store);
    let c = std::fs::canonicalize(&store).ok()?;
    c.is_dir().then_some(c)
}

/// The mount points of this process's mount namespace (`/proc/self/mountinfo`).
fn mount_points() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_octal(p)))
        // Only those this caller can reach: Podman stats each bind's source, and one below a
        // directory the caller cannot search (a Docker container's root under
        // /var/lib/docker, mode 0710) failed every rootless run while it was mounted. The
        // command, which is the caller, cannot reach such a mount either.
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `\040` and the like in mountinfo's paths.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let digits = std::str::from_utf8(&b[i + 1..i + 4]).ok();
            if let Some(v) = digits.and_then(|d| u8::from_str_radix(d, 8).ok()) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn owner(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.uid(), m.gid()))
}

/// The id the command runs as (see the crate's notes).
fn caller_ids(engine: Engine, spec: &Spec) -> Result<flags::Caller, RunError> {
    if engine.rootless() {
        return Ok(flags::Caller {
            uid: 0,
            gid: 0,
            rootless: true,
        });
    }
    if !rustix::process::geteuid().is_root() {
        return Ok(flags::Caller {
            uid: spec.caller.uid,
            gid: spec.caller.gid,
            rootless: false,
        });
    }
    match owner(&spec.workspace) {
        // A workspace of the root group (made by root, given to a user with `chown USER`):
        // the command's group is the owner's own, never root's.
        Some((uid, 0)) if uid != 0 => match primary_gid(uid).filter(|g| *g != 0) {
            Some(gid) => Ok(flags::Caller {
                uid,
                gid,
                rootless: false,
            }),
            None => Err(RunError::Plan {
                code: sandbox::Code::ProtectionUnavailable,
                message: format!(
                    "the workspace {} belongs to the root group, and its owner (uid {uid}) has no group of its own in /etc/passwd: a root caller's command runs with the workspace's ids, never root's",
                    spec.workspace.display()
                ),
                hint: Some(format!(
                    "give the workspace a group (`chown -R USER:GROUP {}`), or use --backend native or gvisor",
                    spec.workspace.display()
                )),
            }),
        },
        Some((uid, gid)) if uid != 0 => Ok(flags::Caller {
            uid,
            gid,
            rootless: false,
        }),
        _ => Err(lower_error(flags::LowerError::RootOwnedWorkspace(
            spec.workspace.clone(),
        ))),
    }
}

/// The gate of a `--net proxy` run (see [`flags::GATE`]): a directory of two FIFOs, `ready`
/// (the check writes its namespaces' identities) and `go` (stockade answers once the proxy's
/// listener is open), the directory and both only the command's id may open (a root caller's
/// command runs as the workspace's owner), below one only this process's user may enter.
fn make_gate(files: &Path, caller: &flags::Caller, root: bool) -> std::io::Result<PathBuf> {
    use rustix::fs::{FileType, Mode, CWD};
    // Below a directory only this process's user may enter: the command's id reaches the
    // FIFOs only through the bind inside the container, not by their path on the host.
    let hidden = files.join("proxy");
    rustix::fs::mkdir(&hidden, Mode::from_raw_mode(0o700))?;
    let gate = hidden.join("gate");
    rustix::fs::mkdir(&gate, Mode::from_raw_mode(0o700))?;
    for name in ["ready", "go"] {
        rustix::fs::mknodat(
            CWD,
            gate.join(name),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )?;
    }
    if root {
        let (uid, gid) = (
            rustix::process::Uid::from_raw(caller.uid),
            rustix::process::Gid::from_raw(caller.gid),
        );
        for p in [gate.join("ready"), gate.join("go"), gate.clone()] {
            rustix::fs::chown(&p, Some(uid), Some(gid))?;
        }
    }
    Ok(gate)
}

fn lower_error(e: flags::LowerError) -> RunError {
    use flags::LowerError as L;
    let hint = match &e {
        L::NotUtf8(_) | L::Comma(_) => "rename the path, or use --backend native".to_owned(),
        L::TooLong(_) => "use --backend native or gvisor (they mask the deepest directory they can name), or move the file to a shorter path".into(),
        L::AllowList => "use read_scope = \"host\", or --backend native or gvisor".into(),
        L::Changed(_) => "run again: a path changed between the plan and the run".into(),
        L::ProxyDaemon(_) => "run stockade as root, use rootless Podman (--backend podman), or --backend native or gvisor for --net proxy".into(),
        L::CpuRootless(_) => "drop --cpu, run as root, or use --backend native".into(),
        L::MemoryRootless => "give --memory 96M or more, run as root (the container's cgroup), or use --backend native".into(),
        L::OwnerHomeWritable(p) => format!(
            "narrow the writable root {} so that it does not hold the home, or use --backend native or gvisor",
            p.display()
        ),
        L::EngineVariable(n) => format!("do not pass {n} to the command, or use --backend native or gvisor"),
        L::EnvName(_) => "name environment variables with letters, digits and `_`".into(),
        L::ViewPath(p) => format!("rename {} (or the change store's directory), or use --backend native or gvisor for --review", p.display()),
        L::ViewDaemon => "run stockade as root, use rootless Podman (--backend podman), or --backend native or gvisor for --review and --ephemeral".into(),
        L::ViewFilesystems(store, _) => format!(
            "keep the change store on the workspace's filesystem (it is $XDG_STATE_HOME/stockade/changes, ~/.local/state/stockade/changes by default; now {}), or use --backend native or gvisor for --review and --ephemeral",
            store.parent().unwrap_or(store).display()
        ),
        L::ViewUnwitnessed(_) => "add a file or a directory to the workspace's top directory (a README, a src/), or use --backend native or gvisor for --review and --ephemeral".into(),
        L::ViewDisk => "leave out --disk, or use --backend native or gvisor (they bound the view with a tmpfs)".into(),
        L::RootOwnedWorkspace(p) => format!(
            "give the workspace to the user the command should run as (`chown -R USER {}`), run stockade as that user, or use --backend native or gvisor (they give a root caller's command an unassigned id)",
            p.display()
        ),
    };
    let code = match e {
        L::NotUtf8(_) | L::Comma(_) => sandbox::Code::PolicyInvalid,
        _ => sandbox::Code::ProtectionUnavailable,
    };
    RunError::Plan {
        code,
        message: e.to_string(),
        hint: Some(hint),
    }
}

/// A new file only this user can read (the engine's client reads it as this user).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

/// Seccomp rules refusing set-user-ID and set-group-ID bits in `chmod` and in the mode of new
/// files, directories and nodes (EPERM), as the native backend refuses them: on the host such
/// a file of the workspace would run with its owner's rights for anyone who executes it.
fn set_id_rules() -> Vec<serde_json::Value> {
    // (call, index of its mode argument)
    const MODE_ARG: &[(&str, u32)] = &[
        ("chmod", 1),
        ("fchmod", 1),
        ("fchmodat", 2),
        ("fchmodat2", 2),
        ("creat", 1),
        ("open", 2),
        ("openat", 3),
        ("mkdir", 1),
        ("mkdirat", 2),
        ("mknod", 1),
        ("mknodat", 2),
    ];
    let mut rules = Vec::new();
    for (call, index) in MODE_ARG {
        for bit in [0o4000u64, 0o2000] {
            rules.push(serde_json::json!({
                "names": [call],
                "action": "SCMP_ACT_ERRNO",
                "errnoRet": 1,
                "args": [{ "index": index, "value": bit, "valueTwo": bit, "op": "SCMP_CMP_MASKED_EQ" }],
            }));
        }
    }
    rules
}

/// A root caller's cgroup for the run ([`flags::Target::group`]): when it has a limit, on a
/// cgroup v1 (or hybrid) host whose memory hierarchy stockade may write, without systemd (the
/// engines' cgroup manager is then cgroupfs, which takes a path for `--cgroup-parent`; under
/// systemd they want a slice: not done yet, and such a run has no usage or limit events).
fn group_plan(spec: &Spec, rootless: bool, run_id: &str) -> Option<sys::cgroup1::GroupPlan> {
    let limits = &spec.limits;
    let root = Path::new(sys::cgroup1::CGROUP_ROOT);
    let limited =
        limits.memory_bytes.is_some() || limits.pids.is_some() || limits.cpu_millis.is_some();
    let writable = rustix::fs::access(
        root.join("memory"),
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    )
    .is_ok();
    (!rootless
        && limited
        && writable
        && sys::cgroup1::is_v1(root)
        && !Path::new("/run/systemd/system").exists())
    .then(|| sys::cgroup1::GroupPlan {
        path: format!("/stockade/{run_id}"),
        memory: limits.memory_bytes,
        cpu: None,
        count_pids: true,
    })
}

fn limit_of(value: Option<u64>, rootless: bool) -> Option<Enforced> {
    value.map(|value| Enforced {
        value,
        mechanism: if rootless {
            LimitMechanism::Rlimit
        } else {
            LimitMechanism::ContainerCgroup
        },
    })
}

fn hard_limit(resource: rustix::process::Resource) -> u64 {
    rustix::process::getrlimit(resource)
        .maximum
        .unwrap_or(1 << 20)
}

impl sandbox::Backend for ContainerBackend {
    fn name(&self) -> &'static str {
        self.engine.name()
    }

    fn probe(&self) -> Vec<sandbox::Check> {
        probe::checks(self.engine)
    }

    /// No creation guard and no pins; the engine (root) makes missing mount points below
    /// the writable roots as it sets up the container.
    fn traits(&self) -> Traits {
        Traits {
            creation_guard: false,
            pins: false,
            exclusive_workspace: true,
            views: sandbox::Views::WorkspaceOwner,
            exec_errors: false,
            layers: ENFORCEMENT,
        }
    }

    fn plan(&self, spec: &Spec, run_id: &str) -> Result<Box<dyn Planned>, RunError> {
        let engine = self.engine;
        let binary = locate(engine, &spec.writable_roots)?;
        let caller = caller_ids(engine, spec)?;
        let files = mask_files()?;
        let empty_file = files.path().join("empty");
        let unreadable_file = files.path().join("unreadable");
        let proxy_addr = match spec.network {
            sandbox::Network::Proxy { addr } => Some(addr),
            _ => None,
        };
        // A root caller (never rootless Podman) runs the command as the workspace's owner.
        let root = rustix::process::geteuid().is_root();
        refuse_unsupported(engine, spec, &caller, root, proxy_addr.is_some())?;
        let view = review_view(engine, spec, root)?;
        // The gate (see [`flags::GATE`]): under the proxy, where its listener is opened;
        // under `--net none`, where the counters of what the command tries on the network it
        // lacks are opened (the run's "network is off" explanation).
        let gated = proxy_addr.is_some() || spec.network == sandbox::Network::None;
        let gate = match gated {
            true => Some(
                make_gate(files.path(), &caller, root)
                    .map_err(|e| RunError::io("make the run's gate", e))?,
            ),
            false => None,
        };
        let staged = staged_git_dirs(spec, &caller, root, view.is_some());
        let seccomp_profile = files.path().join("seccomp.json");
        let env_file = files.path().join("env");
        let host_root = image::host_root().map_err(|e| RunError::io("read the host's /", e))?;
        let owner_home = (root && caller.uid != 0)
            .then(|| home_of(caller.uid))
            .flatten()
            .and_then(|h| std::fs::canonicalize(h).ok())
            .filter(|h| h.is_dir() && h.as_path() != Path::new("/"));
        let extra_masks: Vec<PathBuf> = if caller.rootless {
            rootless_store().into_iter().collect()
        } else {
            Vec::new()
        };
        let (owner_home, covers) = make_covers(files.path(), spec, &caller, root, owner_home)?;
        let image = image::tag(&host_root);
        // Before the backend reads the roots' identities: a test can change the workspace from
        // what was planned here.
        #[cfg(debug_assertions)]
        sys::test_pause::at("STOCKADE_TEST_CONTAINER_PAUSE_PLANNED");
        let target = flags::Target {
            engine,
            runtime: podman_runtime(engine, &spec.writable_roots),
            image,
            name: format!("stockade-{run_id}"),
            empty_file,
            unreadable_file,
            host_root,
            nproc_hard: hard_limit(rustix::process::Resource::Nproc),
            nofile_hard: hard_limit(rustix::process::Resource::Nofile),
            ignored_signals: ignored_signals(),
            nonrecursive: if caller.rootless {
                flags::NonRecursive::Recursive
            } else {
                client::nonrecursive(engine, &binary)
            },
            mount_points: if caller.rootless {
                mount_points()
            } else {
                Vec::new()
            },
            group: group_plan(spec, caller.rootless, run_id),
            seccomp_profile,
            env_file,
            extra_masks,
            owner_home,
            root_identities: (spec.writable_roots.iter().chain(&spec.read_grants))
                .filter_map(|w| Some((w.clone(), workspace::identity_no_links(w).ok()?)))
                .collect(),
            mask_dirs: mask_dirs(spec),
            closed: closed_dirs(spec, &caller),
            covers,
            init: container_init(&spec.writable_roots),
            gate: gate.clone(),
            subdir_ids: staged_subdir_ids(&staged),
            staged,
            stage_dir: files.path().to_path_buf(),
            view,
        };
        let lowered = flags::lower(spec, &caller, &target).map_err(lower_error)?;
        write_run_files(&target, &lowered)?;
        let cwd_fallback = (lowered.cwd_fallback.clone()).map(|reason| sandbox::CwdFallback {
            cwd: spec.cwd.clone(),
            reason,
        });
        let rootless = caller.rootless;
        let limits = &spec.limits;
        let enforcement = enforcement(spec, &caller, &lowered);
        Ok(Box::new(run::ContainerPlanned {
            engine,
            binary,
            target,
            lowered,
            files,
            enforcement,
            cwd_fallback,
            engine_path: engine_path(&spec.writable_roots),
            timeout: limits.timeout,
            output_limit: limits.output_bytes,
            linked_secrets: spec.linked_secrets.clone(),
            partial_memory: limits.memory_bytes.filter(|_| rootless),
            gate: gate.map(|g| (g, proxy_addr)),
            copy_owner: root.then_some((caller.uid, caller.gid)),
        }))
    }
}

/// The run's private directory (removed with the plan; 0700: only this process's user
/// reaches it on the host, the engine binds from it as root or as this user) and the files
/// bound over masked files in it: an empty one (mode 0444) and an unreadable one (mode 0).
fn mask_files() -> Result<tempfile::TempDir, RunError> {
    let files = tempfile::Builder::new()
        .prefix("stockade-container-")
        .tempdir()
        .map_err(|e| RunError::io("make the run's mask files", e))?;
    let empty_file = files.path().join("empty");
    let unreadable_file = files.path().join("unreadable");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(&empty_file, b"")
            .and_then(|_| {
                std::fs::set_permissions(&empty_file, std::fs::Permissions::from_mode(0o444))
            })
            .and_then(|_| std::fs::write(&unreadable_file, b""))
            .and_then(|_| {
                std::fs::set_permissions(&unreadable_file, std::fs::Permissions::from_mode(0o000))
            })
            .map_err(|e| RunError::io("make the run's mask files", e))?;
    }
    Ok(files)
}

/// What a container run cannot be given for this caller: the proxy under a daemon for an
/// unprivileged caller, credential routes for a root caller, and mounts below the roots that
/// a root caller's engine would bind without them.
fn refuse_unsupported(
    engine: Engine,
    spec: &Spec,
    caller: &flags::Caller,
    root: bool,
    proxied: bool,
) -> Result<(), RunError> {
    if proxied && !caller.rootless && !root {
        return Err(lower_error(flags::LowerError::ProxyDaemon(engine.name())));
    }
    // A root caller's command runs as the workspace's owner, an id that user's other
    // processes on the host share: they could act as the command (ptrace it, read its
    // environment) and have the proxy put the caller's real secrets on their requests.
    if spec.credential_routes && root {
        return Err(RunError::Plan {
            code: sandbox::Code::ProtectionUnavailable,
            message: format!(
                "credential routes under {} for a root caller: the command runs as the workspace's owner (uid {}), whose other processes on the host could act as it and use the caller's credentials through the proxy",
                engine.name(),
                caller.uid
            ),
            hint: Some("use --backend native or gvisor (the command gets an id no process shares), or run stockade as the workspace's owner with that user's own credentials".into()),
        });
    }
    // A root caller's engines bind each writable root and read grant without the mounts
    // below it: the command would see the directory a mount there hides, which the walk
    // never saw (it sees what is mounted) nor masked. Refused, naming it (rootless Podman
    // binds recursively: the mounts come along, as natively).
    if !caller.rootless {
        for root_dir in spec.writable_roots.iter().chain(&spec.read_grants) {
            let below = sys::mountinfo::mounts_below(root_dir).map_err(|e| {
                RunError::io(
                    "read /proc/self/mountinfo (mounts inside the run's roots)",
                    e,
                )
            })?;
            if let Some(mount) = below.first() {
                return Err(RunError::Unavailable {
                    what: "the container backend's binds of the run's roots",
                    cause: format!(
                        "{} is a mount point inside {} ({} in all): a root caller's {} binds {} without the mounts below it, so the command would see the directory the mount hides, which nothing checked for secrets",
                        mount.display(),
                        root_dir.display(),
                        below.len(),
                        engine.name(),
                        root_dir.display()
                    ),
                    fix: "unmount what is mounted there, or use --backend native or gvisor (they show what is mounted)".into(),
                });
            }
        }
    }
    Ok(())
}

/// The view of a review run's workspace over the change directory's `upper/` and `work/`,
/// and what the check inside knows the workspace by.
/// A review run's view (see [`flags::View`]): mounted by Docker's daemon, as root, its
/// marks are `trusted.overlay.*`, which only a root caller can read back.
fn review_view(engine: Engine, spec: &Spec, root: bool) -> Result<Option<flags::View>, RunError> {
    Ok(match &spec.review {
        Some(_) if engine == Engine::Docker && !root => {
            return Err(lower_error(flags::LowerError::ViewDaemon));
        }
        Some(review) => {
            use std::os::unix::fs::MetadataExt;
            let upper = review.changes.join("upper");
            let meta = std::fs::symlink_metadata(&upper)
                .ok()
                .filter(|m| m.is_dir())
                .ok_or_else(|| lower_error(flags::LowerError::Changed(upper.clone())))?;
            Some(flags::View {
                upper,
                work: review.changes.join("work"),
                upper_ino: meta.ino(),
                same_filesystem: review.same_filesystem,
                witness: view_witness(spec, review.same_filesystem),
            })
        }
        None => None,
    })
}

/// Existing git dirs inside a writable root whose config git must be able to rewrite:
/// each top level is a staged copy during the run (see `workspace::gitstage`).
/// A root caller's command (the workspace's owner) gets the copies: only its own git
/// dirs are staged.
fn staged_git_dirs(
    spec: &Spec,
    caller: &flags::Caller,
    root: bool,
    in_view: bool,
) -> Vec<workspace::gitstage::Staged> {
    workspace::gitstage::plan(spec, root.then_some(caller.uid))
        .into_iter()
        .filter(|s| spec.writable_roots.iter().any(|w| s.gitdir.starts_with(w)))
        // In a review run's view git works whole, reviewed (nothing of the host's is
        // bound writable there).
        .filter(|s| !in_view || !s.gitdir.starts_with(&spec.workspace))
        .collect()
}

/// The owner's home and the covers of the closed directories above the roots (a root
/// caller's), each an empty directory of root's made in the run's directory `files`.
fn make_covers(
    files: &Path,
    spec: &Spec,
    caller: &flags::Caller,
    root: bool,
    owner_home: Option<PathBuf>,
) -> Result<(Option<flags::Cover>, Vec<flags::Cover>), RunError> {
    let covers = match root {
        true => covers(spec, caller, owner_home.as_deref()),
        false => Vec::new(),
    };
    // The empty directories shown there (see [`flags::Cover`]), one each: the engine makes
    // in each the mount points of what is bound below it.
    let cover = |dir: PathBuf, name: String, mode: u32| -> Result<flags::Cover, RunError> {
        use std::os::unix::fs::PermissionsExt;
        let source = files.join(name);
        std::fs::create_dir(&source)
            .and_then(|_| std::fs::set_permissions(&source, std::fs::Permissions::from_mode(mode)))
            .map_err(|e| RunError::io("make the run's covers", e))?;
        Ok(flags::Cover { dir, source })
    };
    let owner_home = match owner_home {
        Some(h) => Some(cover(h, "owner-home".into(), 0o711)?),
        None => None,
    };
    let covers = (covers.into_iter().enumerate())
        .map(|(i, dir)| cover(dir, format!("cover-{i}"), 0o755))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((owner_home, covers))
}

/// `(st_dev, st_ino)` of each staged git dir's subdirectories as they are now (`None`: not a
/// directory), in the order of [`Staged::subdirs`](workspace::gitstage::Staged).
fn staged_subdir_ids(staged: &[workspace::gitstage::Staged]) -> Vec<Vec<Option<(u64, u64)>>> {
    staged
        .iter()
        .map(|s| {
            (s.subdirs.iter())
                .map(|d| {
                    use std::os::unix::fs::MetadataExt;
                    std::fs::symlink_metadata(s.gitdir.join(d))
                        .ok()
                        .filter(|m| m.is_dir())
                        .map(|m| (m.dev(), m.ino()))
                })
                .collect()
        })
        .collect()
}

/// The run's environment file and seccomp profile, written where the target names them.
fn write_run_files(target: &flags::Target, lowered: &flags::Lowered) -> Result<(), RunError> {
    write_private(&target.env_file, lowered.env_file.as_bytes())
        .and_then(|_| {
            let profile = seccomp::oci_profile(set_id_rules());
            write_private(&target.seccomp_profile, profile.to_string().as_bytes())
        })
        .map_err(|e| RunError::io("write the run's environment and seccomp profile", e))
}

/// What the run enforces and by what (the report's): the caller's ids, the spec's roots,
/// masks and protected paths, the lowered run's mounts, and the limits (rlimits under
/// rootless Podman).
fn enforcement(spec: &Spec, caller: &flags::Caller, lowered: &flags::Lowered) -> Enforcement {
    let rootless = caller.rootless;
    let limits = &spec.limits;
    let masks = |readable: bool| -> Vec<PathBuf> {
        (spec.masks.iter())
            .filter(|m| m.readable == readable)
            .map(|m| m.path.clone())
            .collect()
    };
    Enforcement {
        inside_uid: caller.uid,
        host_uid: if rootless {
            spec.caller.uid
        } else {
            caller.uid
        },
        writable_roots: spec.writable_roots.clone(),
        masked: masks(false),
        emptied: masks(true),
        protected: spec.protected.clone(),
        mounts: lowered.args.iter().filter(|a| *a == "--mount").count(),
        landlock_rules: 0,
        seccomp_rules: 0,
        env_names: spec.env.iter().map(|(k, _)| k.clone()).collect(),
        memory: limit_of(limits.memory_bytes, rootless),
        pids: limit_of(limits.pids, rootless),
        cpu_millicores: limit_of(limits.cpu_millis, rootless),
    }
}

/// [`flags::Witness`]: the first entry (by name) of the workspace's top directory that is
/// neither a symbolic link (the check follows links) nor where a mount goes (it would show the
/// mount's file), with its inode number; `Empty` for an empty workspace.
fn view_witness(spec: &Spec, same_filesystem: bool) -> flags::Witness {
    use std::os::unix::fs::MetadataExt;
    let Ok(dir) = std::fs::read_dir(&spec.workspace) else {
        return flags::Witness::None;
    };
    let mut names: Vec<std::ffi::OsString> =
        dir.filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    if names.is_empty() {
        return flags::Witness::Empty;
    }
    if !same_filesystem {
        return flags::Witness::None;
    }
    names.sort();
    let mounted = |p: &Path| {
        (spec.masks.iter().map(|m| &m.path))
            .chain(&spec.protected)
            .chain(&spec.pins)
            .chain(&spec.private_dirs)
            .chain(&spec.writable_roots)
            .chain(&spec.read_grants)
            .any(|m| m == p)
    };
    for name in names {
        let p = spec.workspace.join(&name);
        if mounted(&p) || p.to_str().is_none() {
            continue;
        }
        if let Ok(m) = std::fs::symlink_metadata(&p) {
            if !m.file_type().is_symlink() {
                return flags::Witness::Entry(p, m.ino());
            }
        }
    }
    flags::Witness::None
}

/// The signals stockade passes on to the command ([`sys::postfork::FORWARDED_SIGNALS`]) that
/// the caller ignores, which stockade therefore leaves ignored (`sys::parent::catch_signals`),
/// by number (SIGPIPE is not among them: stockade's runtime ignores it itself).
fn ignored_signals() -> Vec<i32> {
    (sys::postfork::FORWARDED_SIGNALS.into_iter())
        .filter(|&sig| sys::raw::signal_ignored(sig).unwrap_or(false))
        .collect()
}

/// [`flags::Target::mask_dirs`]: each mask in a writable root whose file the spec identified,
/// with the identity of the directory holding it, read through that directory (opened once)
/// with the file in it checked to be the one identified.
fn mask_dirs(spec: &Spec) -> Vec<(PathBuf, Option<(u64, u64)>)> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    (spec.masks.iter())
        .filter(|m| (spec.writable_roots.iter()).any(|w| m.path.starts_with(w) && m.path != *w))
        .filter_map(|m| {
            let planned = *spec.identities.get(&m.path)?;
            let held = (|| {
                let dir = rustix::fs::open(
                    m.path.parent()?,
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .ok()?;
                let file = rustix::fs::statat(&dir, m.path.file_name()?, AtFlags::SYMLINK_NOFOLLOW)
                    .ok()?;
                if (file.st_dev, file.st_ino) != planned {
                    return None;
                }
                let d = rustix::fs::fstat(&dir).ok()?;
                Some((d.st_dev, d.st_ino))
            })();
            Some((m.path.clone(), held))
        })
        .collect()
}
