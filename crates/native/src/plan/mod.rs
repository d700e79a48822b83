//! `Plan::new`: policy + request + host facts → everything the sandbox will do, as data.
//!
//! The plan is pure given a [`HostView`]: it lists the mount steps in the order the init runs
//! them, the uid/gid maps, the Landlock rules, the seccomp rules, the environment and the exec
//! candidates. Unit tests compare whole plans built against a fake host.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use policy::{is_within, PathContext, PathPattern, Policy, ReadScope};
use serde::Serialize;

use crate::cgroup::{Missing, ResourcePlan, Wanted};
use crate::error::PlanError;
use crate::host::{DirStamp, Entry, HostView, Kind};

mod git;
mod reach;
mod spec;
pub use reach::CwdFallback;
use reach::Granted;

/// Hostname inside the sandbox.
pub const SANDBOX_HOSTNAME: &str = "stockade";
/// Uid and gid the command has inside the sandbox when the caller is root: never 0.
pub const ROOT_CALLER_INSIDE_ID: u32 = 1000;
/// Host-side uid and gid the sandbox runs as when the caller is root. An id no account uses,
/// so the sandbox passes no owner or group check on host files (`/proc/sys`, `/etc/shadow`);
/// the writable roots (and a private home) reach it through idmapped mounts instead.
pub const ROOT_CALLER_HOST_ID: u32 = 0x7ff0_0000;

/// The largest git index the planner reads (about half a million entries).
pub(crate) const GIT_INDEX_LIMIT: usize = 64 << 20;

/// Device nodes bound from the host into the sandbox's private `/dev`.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];
/// Paths of the sandbox's own procfs that are re-bound read-only.
const PROC_READ_ONLY: &[&str] = &["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"];
/// Readable roots under `read_scope = "allow-list"` besides the listed paths.
const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];
/// Places the sandbox replaces wholesale; host paths below them are not visible inside.
const REPLACED: &[&str] = &["/tmp", "/dev", "/proc"];

/// What the caller asked to run, and where.
#[derive(Debug, Clone)]
pub struct Request {
    /// Program and arguments (`--shell S` is `["/bin/sh", "-c", S]`).
    pub argv: Vec<String>,
    /// Canonical workspace directory.
    pub workspace: PathBuf,
    /// Canonical current directory of the caller.
    pub cwd: PathBuf,
    pub home: PathBuf,
    pub uid: u32,
    pub gid: u32,
    /// The caller's environment.
    pub env: Vec<(OsString, OsString)>,
}

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
}

impl Mount {
    /// The path this step acts on, for error messages.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Mount::MakeRootPrivate | Mount::ReadOnlyRoot => Some(Path::new("/")),
            Mount::Clone { source, .. } => Some(source),
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

/// Where the proxy listens inside the sandbox's own network namespace (which has nothing else).
pub const PROXY_ADDR: std::net::SocketAddrV4 =
    std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 3128);

fn net_plan(policy: &Policy) -> NetPlan {
    let mode = policy.network.mode;
    NetPlan {
        mode,
        new_namespace: mode != policy::NetworkMode::Host,
        proxy: (mode == policy::NetworkMode::Proxy).then_some(PROXY_ADDR),
    }
}

/// Variables that point clients at the proxy: curl, wget, git, pip, npm, cargo, Python,
/// Node and Go all read some of them. `NO_PROXY` is cleared so nothing goes direct (direct
/// connections fail anyway: the namespace has only loopback).
fn proxy_env(addr: std::net::SocketAddrV4) -> Vec<(String, String)> {
    let http = format!("http://{addr}");
    let socks = format!("socks5h://{addr}");
    let mut env = Vec::new();
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        env.push((name.to_string(), http.clone()));
    }
    for name in ["ALL_PROXY", "all_proxy"] {
        env.push((name.to_string(), socks.clone()));
    }
    for name in [
        "npm_config_proxy",
        "npm_config_https_proxy",
        "CARGO_HTTP_PROXY",
        "PIP_PROXY",
    ] {
        env.push((name.to_string(), http.clone()));
    }
    for name in ["NO_PROXY", "no_proxy"] {
        env.push((name.to_string(), String::new()));
    }
    env
}

/// A protected pattern as the creation guard matches it: `base/**/tail[0]/tail[1]/..` (`*` and
/// `?` allowed in the tail), or `base` and everything below it when the tail is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuardPattern {
    pub base: PathBuf,
    pub tail: Vec<String>,
}

/// Mediated creation (`sys::mediate`): during the run, every call that creates a name in a
/// writable root is performed by the init, which refuses protected paths (and git's built-in
/// rules: hooks, config, commondir, `.git` redirects; see `sys::protect`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct CreationGuard {
    pub roots: Vec<PathBuf>,
    pub protected: Vec<GuardPattern>,
    /// `deny_write` globs of other shapes: only the post-run sweep checks them.
    pub sweep_only: Vec<String>,
    pub calls: Vec<seccomp::Mediated>,
    /// Existing git configs (read-only during the run) and the slot of the descriptor the
    /// init holds to rewrite one when only inert keys change (`git remote add`, `git push -u`).
    pub held_configs: Vec<(PathBuf, usize)>,
}

/// What the supervisor checks after the run: protected paths that did not exist at the start.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct SweepPlan {
    pub roots: Vec<PathBuf>,
    /// Protected paths present at the start, with their kind: a path whose kind changed (a
    /// symlinked `.git/hooks` replaced by a real directory) counts as created.
    pub existing: BTreeMap<PathBuf, Kind>,
    /// Directories git accepted as git dirs at the start (see [`crate::planted_git`]): one
    /// that appears during the run is a planted git dir.
    pub git_dirs: BTreeSet<PathBuf>,
    /// Directories the planner listed, with their stamps: the sweep lists again only those
    /// that changed (and new ones).
    #[serde(skip)]
    pub dirs: DirStamps,
    /// The git indexes of the repositories in the writable roots, with the entries whose
    /// changes git already did not show ([`crate::git_index`]) and the object name length.
    pub git_indexes: Vec<GitIndex>,
}

/// A git index as the run found it (see [`SweepPlan::git_indexes`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GitIndex {
    pub path: PathBuf,
    pub hidden: BTreeSet<String>,
    pub hash_len: usize,
}

/// How long before the planner's walk a directory's ctime must lie for its stamp to be
/// trusted. A change during the run then gives a later ctime even on a filesystem that keeps
/// whole seconds (ext3) or a coarse clock; a directory changed more recently is listed again.
pub const SETTLED: std::time::Duration = std::time::Duration::from_secs(3);

/// A directory the planner listed whose ctime had settled: its subdirectories (those the walk
/// goes into), so an unchanged directory is passed through without listing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettledDir {
    pub stamp: DirStamp,
    pub subdirs: Vec<OsString>,
}

/// The settled directories of the planner's walk, and when it began.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirStamps {
    pub taken_at: Option<std::time::SystemTime>,
    /// [`SETTLED`], but for tests.
    settle: std::time::Duration,
    /// A hash map: thousands of paths, and comparing paths (component by component) is what
    /// a tree would do on every insert.
    pub dirs: std::collections::HashMap<PathBuf, SettledDir>,
    /// Per device: whether its filesystem sets ctime locally ([`HostView::local_ctime`]).
    local: BTreeMap<u64, bool>,
}

impl DirStamps {
    /// Start recording (the clock is read before anything is listed).
    pub fn start() -> DirStamps {
        DirStamps::start_settled(SETTLED)
    }

    pub(crate) fn start_settled(settle: std::time::Duration) -> DirStamps {
        DirStamps {
            taken_at: Some(std::time::SystemTime::now()),
            settle,
            dirs: std::collections::HashMap::new(),
            local: BTreeMap::new(),
        }
    }

    fn record(
        &mut self,
        host: &dyn HostView,
        dir: PathBuf,
        stamp: DirStamp,
        subdirs: Vec<OsString>,
    ) {
        let local = *self
            .local
            .entry(stamp.dev)
            .or_insert_with(|| host.local_ctime(&dir));
        let Some(settled_before) = self.taken_at.and_then(|t| t.checked_sub(self.settle)) else {
            return;
        };
        let changed = std::time::UNIX_EPOCH
            + std::time::Duration::new(
                u64::try_from(stamp.ctime).unwrap_or(u64::MAX / 2),
                u32::try_from(stamp.ctime_nsec).unwrap_or(0),
            );
        if local && changed < settled_before {
            self.dirs.insert(dir, SettledDir { stamp, subdirs });
        }
    }

    /// The record of `dir` if its stamp is the same now, and the clock has not gone back since
    /// the walk (a ctime compared across a clock step proves nothing). Only a recorded
    /// directory is stat'ed.
    fn unchanged(&self, host: &dyn HostView, dir: &Path) -> Option<&SettledDir> {
        let rec = self.dirs.get(dir)?;
        let clock_ok = self
            .taken_at
            .is_some_and(|t| std::time::SystemTime::now() >= t);
        (clock_ok && host.dir_stamp(dir) == Some(rec.stamp)).then_some(rec)
    }
}

/// What [`walk`] does with directory stamps.
pub(crate) enum Stamps<'a> {
    /// List every directory and record the settled ones (the planner).
    Record(&'a mut DirStamps),
    /// Pass through the recorded directories whose stamp is unchanged (the sweep).
    SkipUnchanged(&'a DirStamps),
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub ids: Ids,
    pub idmapped: Vec<Idmapped>,
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
    #[serde(skip)]
    pub sweep: SweepPlan,
    #[serde(skip)]
    pub deny_globs: DenyGlobs,
    /// `(st_dev, st_ino)` of every masked, protected and pinned path when planned: the init
    /// mounts over a path only if it is still that file (a concurrent run could have renamed
    /// another directory into its place).
    #[serde(skip)]
    pub identities: BTreeMap<PathBuf, (u64, u64)>,
}

fn depth(p: &Path) -> usize {
    p.components().count()
}

fn under_replaced(p: &Path) -> bool {
    REPLACED.iter().any(|r| is_within(p, Path::new(r)))
}

impl Plan {
    /// Pins every directory between a writable root and `path` (re-bound onto itself, so it
    /// cannot be renamed): `path` itself may be kept read-only, but renaming one of its
    /// parents would move it away whole (the trust store: its approvals would vanish and
    /// the workspaces they gate would run un-gated). Steps go last: a pin's recursive
    /// re-bind carries the mounts already below it.
    pub fn pin_ancestors(&mut self, path: &Path, host: &dyn HostView) {
        let mut pins: Vec<PathBuf> = path
            .ancestors()
            .skip(1)
            .filter(|a| {
                self.writable_roots
                    .iter()
                    .any(|w| is_within(a, w) && *a != w.as_path())
            })
            .filter(|a| host.lstat_kind(a) == Some(Kind::Dir))
            .map(Path::to_path_buf)
            .collect();
        pins.reverse();
        for p in pins {
            if let Some(e) = host.stat(&p) {
                self.identities.insert(p.clone(), (e.dev, e.ino));
            }
            self.mounts.push(Mount::Pin { path: p });
        }
    }

    pub fn new(policy: &Policy, req: &Request, host: &dyn HostView) -> Result<Plan, PlanError> {
        let program = req.argv.first().ok_or(PlanError::NoProgram)?;
        if program.is_empty() {
            return Err(PlanError::NoProgram);
        }
        let writable_roots = writable_roots(policy, req, host)?;
        let ctx = PathContext {
            home: req.home.clone(),
            workspace: req.workspace.clone(),
            writable_roots: writable_roots.clone(),
        };
        let expand_all = |list: &[String]| -> Result<Vec<PathPattern>, PlanError> {
            let mut out = Vec::new();
            for p in list {
                out.extend(policy::expand(p, &ctx)?);
            }
            Ok(out)
        };
        let deny_read = expand_all(&policy.filesystem.deny_read)?;
        let read_empty = expand_all(&policy.filesystem.read_empty)?;
        let allow_read = expand_all(&policy.filesystem.allow_read)?;
        let deny_write = expand_all(&policy.filesystem.deny_write)?;

        let mut dirs = DirStamps::start();
        let found = Matches::collect(host, &writable_roots, &deny_read, &deny_write, &mut dirs)?;
        let allows: Vec<PathBuf> = allow_read
            .iter()
            .filter_map(|p| match p {
                PathPattern::Exact(p) => Some(host.canonicalize(p).unwrap_or_else(|| p.clone())),
                PathPattern::Glob(_) => None,
            })
            .collect();
        if allows.iter().any(|a| a == Path::new("/tmp")) {
            return Err(PlanError::PrivateTmpGrant(PathBuf::from("/tmp")));
        }
        // Read grants below the host's /tmp are attached in the private one.
        let tmp_grants = reach::tmp_read_grants(host, &allows, &writable_roots);

        // Masks: every denied path that exists, minus allow exceptions, minus paths that
        // hold a writable root (writing implies reading), minus paths the sandbox replaces.
        let mut masks: Vec<(PathBuf, Kind)> = Vec::new();
        for d in &found.deny_read {
            let Some(canon) = host.canonicalize(d) else {
                continue;
            };
            if writable_roots.iter().any(|w| is_within(w, &canon)) {
                continue;
            }
            let visible = !under_replaced(&canon)
                || writable_roots.iter().any(|w| is_within(&canon, w))
                || tmp_grants.iter().any(|(g, _)| is_within(&canon, g));
            if !visible {
                continue;
            }
            mask_targets(host, &canon, &allows, &mut masks);
        }
        masks.sort();
        masks.dedup();
        // Paths read as empty: exact paths (the policy allows no other form), covered by an
        // empty readable file or directory unless an unreadable mask covers them already.
        let mut emptied: Vec<(PathBuf, Kind)> = Vec::new();
        for d in &read_empty {
            let PathPattern::Exact(d) = d else { continue };
            let Some(canon) = host.canonicalize(d) else {
                continue;
            };
            let covered = masks.iter().any(|(m, _)| is_within(&canon, m))
                || writable_roots
                    .iter()
                    .any(|w| is_within(w, &canon) || is_within(&canon, w));
            if covered || (under_replaced(&canon)) {
                continue;
            }
            mask_targets(host, &canon, &allows, &mut emptied);
        }
        emptied.sort();
        emptied.dedup();
        let all_masks: Vec<(PathBuf, Kind)> = masks.iter().chain(&emptied).cloned().collect();
        let linked_secrets = linked_secrets(host, &all_masks);

        // Protected paths inside writable roots (outside them everything is read-only).
        let mut protected: BTreeSet<PathBuf> = BTreeSet::new();
        let mut pins: BTreeSet<PathBuf> = BTreeSet::new();
        for p in &found.deny_write {
            // A mount cannot cover a symlink: protect its target when that is writable (the
            // link itself can still be replaced; the sweep notices the change of kind).
            let Some(target) = mount_target(host, p) else {
                continue;
            };
            if writable_roots.iter().any(|w| is_within(&target, w)) && target != req.workspace {
                protected.insert(target);
            }
        }
        let mut redirect_gitdirs: BTreeSet<PathBuf> = BTreeSet::new();
        let mut git_dirs: Vec<git::GitDir> = Vec::new();
        for gitfile in &found.git_files {
            protect_git_file(
                host,
                gitfile,
                &writable_roots,
                &mut protected,
                &mut redirect_gitdirs,
                &mut git_dirs,
            );
        }
        // Everything else in those git dirs that makes git run code or look elsewhere.
        for d in &found.git_dirs {
            let top = (d.file_name().is_some_and(|n| n == ".git"))
                .then(|| d.parent().map(Path::to_path_buf))
                .flatten();
            git_dirs.push(git::GitDir {
                dir: d.clone(),
                top,
            });
        }
        // Git dirs under other names (a bare repository in the workspace): git runs their
        // config and hooks as it does `.git`'s.
        let bare: Vec<PathBuf> = found
            .accepted_git_dirs
            .iter()
            .filter(|d| {
                !d.iter().any(|c| c == ".git")
                    && writable_roots.iter().any(|w| is_within(d, w) && *d != w)
            })
            .cloned()
            .collect();
        git_dirs.extend(bare.iter().map(|d| git::GitDir {
            dir: d.clone(),
            top: None,
        }));
        git_dirs.extend(
            writable_roots
                .iter()
                .filter_map(|r| git::enclosing(host, r)),
        );
        git_dirs.sort();
        git_dirs.dedup();
        // Their indexes: which entries git does not check for changes, before the run.
        let git_indexes: Vec<GitIndex> = git_dirs
            .iter()
            .filter(|d| writable_roots.iter().any(|w| is_within(&d.dir, w)))
            .filter_map(|d| {
                let path = d.dir.join("index");
                let hash_len = git::hash_len(host, &d.dir);
                let data = host.read_bytes(&path, GIT_INDEX_LIMIT)?;
                let hidden = crate::git_index::hidden_entries(&data, hash_len)?;
                Some(GitIndex {
                    path,
                    hidden,
                    hash_len,
                })
            })
            .collect();
        let xdg_config_home = req
            .env
            .iter()
            .find(|(k, _)| k == "XDG_CONFIG_HOME")
            .map(|(_, v)| PathBuf::from(v));
        let mut git_paths = git::protected_paths(
            host,
            &git_dirs,
            &writable_roots,
            &req.home,
            &git::global_configs(&req.home, xdg_config_home.as_deref()),
        );
        for d in &bare {
            for name in ["config", "hooks", "commondir"] {
                git_paths.insert(d.join(name));
            }
        }
        for p in &git_paths {
            if let Some(target) = mount_target(host, p) {
                if writable_roots.iter().any(|w| is_within(&target, w)) && target != req.workspace {
                    protected.insert(target);
                }
            }
        }
        let mut creation_guard = creation_guard(&writable_roots, &deny_write, &redirect_gitdirs);
        creation_guard
            .protected
            .extend(git_paths.iter().map(|p| GuardPattern {
                base: p.clone(),
                tail: Vec::new(),
            }));
        for d in &git_dirs {
            if writable_roots.iter().any(|w| is_within(&d.dir, w)) {
                for name in git::WORKTREE_FILES {
                    creation_guard.protected.push(GuardPattern {
                        base: d.dir.join("worktrees"),
                        tail: vec![name.to_string()],
                    });
                }
            }
        }
        for p in &protected {
            if let Some(parent) = p.parent() {
                let is_gitdir = parent.file_name().is_some_and(|n| n == ".git")
                    || host.stat(&parent.join("HEAD")).is_some();
                if is_gitdir && !writable_roots.iter().any(|w| w == parent) {
                    pins.insert(parent.to_path_buf());
                }
            }
        }
        // A mask inside a protected path or a protected path inside a mask: the mask wins.
        let masked_paths: Vec<PathBuf> = masks.iter().map(|(p, _)| p.clone()).collect();
        let emptied_paths: Vec<PathBuf> = emptied.iter().map(|(p, _)| p.clone()).collect();
        protected.retain(|p| !masked_paths.iter().any(|m| is_within(p, m)));

        let ids = ids(req);
        let mut slots = 0usize;
        let mut idmapped = Vec::new();
        let mut mounts = vec![Mount::MakeRootPrivate];

        // 1. Detached copies of everything that later steps cover (devices live under /dev,
        //    writable roots may live under /tmp), taken while the host tree is still intact.
        let mut devices = Vec::new();
        for dev in DEVICES {
            let path = PathBuf::from(dev);
            if host.stat(&path).is_some() {
                mounts.push(Mount::Clone {
                    source: path.clone(),
                    slot: slots,
                    recursive: false,
                });
                devices.push((path, slots));
                slots += 1;
            }
        }
        let mut overlay: Vec<(usize, u8, Vec<Mount>)> = Vec::new();
        // Every path the sandbox is granted, to find the directories on the way to them that
        // it could not traverse (root callers, see `reach`).
        let mut granted: Vec<Granted> = Vec::new();
        if req.uid == 0 {
            // Canonical: the mount steps look their paths up through no symbolic link.
            let home_path = host
                .canonicalize(&req.home)
                .unwrap_or_else(|| req.home.clone());
            if let Some(home) = host.stat(&home_path) {
                let covered = writable_roots.iter().any(|w| is_within(&home_path, w));
                if home.kind == Kind::Dir && home.mode & 0o001 == 0 && !covered {
                    granted.push(Granted {
                        path: req.home.clone(),
                        kind: Kind::Dir,
                        mapped_owner: Some((home.uid, home.gid)),
                    });
                    idmapped.push(Idmapped {
                        slot: slots,
                        path: home_path.clone(),
                        readonly: true,
                        uid_map: format!("{} {} 1\n", home.uid, ROOT_CALLER_HOST_ID),
                        gid_map: format!("{} {} 1\n", home.gid, ROOT_CALLER_HOST_ID),
                    });
                    overlay.push((
                        depth(&home_path),
                        0,
                        vec![Mount::Attach {
                            slot: slots,
                            target: home_path.clone(),
                            readonly: true,
                            device: false,
                        }],
                    ));
                    slots += 1;
                }
            }
        }
        for root in &writable_roots {
            let entry = host
                .stat(root)
                .ok_or_else(|| PlanError::WritableRootMissing(root.clone()))?;
            granted.push(Granted {
                path: root.clone(),
                kind: entry.kind,
                mapped_owner: (req.uid == 0).then_some((entry.uid, entry.gid)),
            });
            if req.uid == 0 {
                idmapped.push(Idmapped {
                    slot: slots,
                    path: root.clone(),
                    readonly: false,
                    uid_map: format!("{} {} 1\n", entry.uid, ROOT_CALLER_HOST_ID),
                    gid_map: format!("{} {} 1\n", entry.gid, ROOT_CALLER_HOST_ID),
                });
            } else {
                mounts.push(Mount::Clone {
                    source: root.clone(),
                    slot: slots,
                    recursive: true,
                });
            }
            let mut steps = Vec::new();
            if is_within(root, Path::new("/tmp")) {
                // Mount points inside the private /tmp: create each missing component.
                steps = reach::tmp_mount_points(root, entry.kind);
            }
            steps.push(Mount::Attach {
                slot: slots,
                target: root.clone(),
                readonly: false,
                device: false,
            });
            overlay.push((depth(root), 1, steps));
            slots += 1;
        }
        for a in &allows {
            if let Some(entry) = host.stat(a) {
                if !granted.iter().any(|g| g.path == *a) {
                    granted.push(Granted {
                        path: a.clone(),
                        kind: entry.kind,
                        mapped_owner: None,
                    });
                }
            }
        }
        let covers = reach::covers(host, req.uid == 0, &granted);
        for c in &covers {
            overlay.push((depth(&c.dir), 0, c.steps.clone()));
        }
        // Read grants the sandbox's own view does not hold (below the private /tmp, or below
        // a cover) are cloned before it is built: by the supervisor for a root caller, whose
        // init could not traverse the way there either, mapping the grant's owner to the
        // sandbox as for the home (read-only); by the init for anyone else.
        let mut attached: Vec<(PathBuf, Kind)> = tmp_grants.clone();
        for g in &granted {
            let below_cover = covers.iter().any(|c| is_within(&g.path, &c.dir));
            let outermost = !granted
                .iter()
                .any(|o| o.path != g.path && is_within(&g.path, &o.path));
            if below_cover && outermost && allows.contains(&g.path) && g.mapped_owner.is_none() {
                attached.push((g.path.clone(), g.kind));
            }
        }
        for (grant, kind) in &attached {
            if req.uid == 0 {
                let Some(entry) = host.stat(grant) else {
                    continue;
                };
                idmapped.push(Idmapped {
                    slot: slots,
                    path: grant.clone(),
                    readonly: true,
                    uid_map: format!("{} {} 1\n", entry.uid, ROOT_CALLER_HOST_ID),
                    gid_map: format!("{} {} 1\n", entry.gid, ROOT_CALLER_HOST_ID),
                });
            } else {
                mounts.push(Mount::Clone {
                    source: grant.clone(),
                    slot: slots,
                    recursive: true,
                });
            }
            let mut steps = if is_within(grant, Path::new("/tmp")) {
                reach::tmp_mount_points(grant, *kind)
            } else {
                Vec::new() // the cover made its mount point
            };
            steps.push(Mount::Attach {
                slot: slots,
                target: grant.clone(),
                readonly: true,
                device: false,
            });
            overlay.push((depth(grant), 1, steps));
            slots += 1;
        }
        // Masks below a cover and outside every grant are out of the sandbox's reach already
        // (and their mount points do not exist in the cover).
        masks.retain(|(p, _)| !reach::hidden_by_cover(p, &covers, &granted));
        for p in &pins {
            overlay.push((depth(p), 2, vec![Mount::Pin { path: p.clone() }]));
        }
        let mut held_configs = Vec::new();
        for p in &protected {
            let mut steps = Vec::new();
            if git::is_existing_config(host, p) {
                steps.push(Mount::Hold {
                    path: p.clone(),
                    slot: slots,
                });
                held_configs.push((p.clone(), slots));
                slots += 1;
            }
            steps.push(Mount::ReadOnly { path: p.clone() });
            overlay.push((depth(p), 3, steps));
        }
        for (p, kind) in &masks {
            let m = if *kind == Kind::Dir {
                Mount::MaskDir { target: p.clone() }
            } else {
                Mount::MaskFile { target: p.clone() }
            };
            overlay.push((depth(p), 4, vec![m]));
        }
        for (p, kind) in &emptied {
            let m = if *kind == Kind::Dir {
                Mount::EmptyDir { target: p.clone() }
            } else {
                Mount::EmptyFile { target: p.clone() }
            };
            overlay.push((depth(p), 4, vec![m]));
        }

        // 2. The host tree becomes read-only; private /tmp, /dev and /proc replace the host's.
        let nosuid_nodev = libc::MS_NOSUID | libc::MS_NODEV;
        // The private /tmp and /dev/shm are memory: bounded by `limits.tmp_size` each. A memory
        // cgroup counts their pages with the rest of the run's; `RLIMIT_DATA` does not, so
        // under it neither may hold more than the memory limit.
        let (resources, resources_missing, output_limit) = resources(policy, host)?;
        let uncounted = match resources.memory {
            Some((bytes, crate::cgroup::Mechanism::Rlimit)) => Some(bytes),
            _ => None,
        };
        let tmp_bytes = match &policy.limits.tmp_size {
            Some(size) => Some(policy::parse_size(size)?),
            None => None,
        };
        let tmp_data = match (tmp_bytes, uncounted) {
            (Some(t), Some(m)) => format!("mode=1777,size={}", t.min(m)),
            (None, Some(m)) | (Some(m), None) => format!("mode=1777,size={m}"),
            (None, None) => "mode=1777".to_string(),
        };
        mounts.push(Mount::ReadOnlyRoot);
        mounts.push(Mount::Tmpfs {
            target: "/tmp".into(),
            data: tmp_data.clone(),
            flags: nosuid_nodev,
        });
        mounts.push(Mount::Tmpfs {
            target: "/dev".into(),
            data: "mode=0755,size=1m".into(),
            flags: libc::MS_NOSUID | libc::MS_NOEXEC,
        });
        for (path, slot) in &devices {
            mounts.push(Mount::File {
                path: path.clone(),
                mode: 0o666,
            });
            mounts.push(Mount::Attach {
                slot: *slot,
                target: path.clone(),
                readonly: false,
                device: true,
            });
        }
        mounts.push(Mount::Mkdir {
            path: "/dev/pts".into(),
            mode: 0o755,
        });
        mounts.push(Mount::Devpts {
            target: "/dev/pts".into(),
        });
        mounts.push(Mount::Symlink {
            target: "pts/ptmx".into(),
            path: "/dev/ptmx".into(),
        });
        mounts.push(Mount::Mkdir {
            path: "/dev/shm".into(),
            mode: 0o1777,
        });
        mounts.push(Mount::Tmpfs {
            target: "/dev/shm".into(),
            data: tmp_data,
            flags: nosuid_nodev,
        });
        for (target, path) in [
            ("/proc/self/fd", "/dev/fd"),
            ("/proc/self/fd/0", "/dev/stdin"),
            ("/proc/self/fd/1", "/dev/stdout"),
            ("/proc/self/fd/2", "/dev/stderr"),
        ] {
            mounts.push(Mount::Symlink {
                target: target.into(),
                path: path.into(),
            });
        }
        mounts.push(Mount::Proc {
            target: "/proc".into(),
        });
        for p in PROC_READ_ONLY {
            if host.lstat_kind(Path::new(p)).is_some() {
                mounts.push(Mount::ReadOnly { path: p.into() });
            }
        }
        // 3. Home, writable roots, pins, protected paths and masks: parents before children.
        overlay.sort_by_key(|(d, class, _)| (*d, *class));
        for (_, _, steps) in overlay {
            mounts.extend(steps);
        }

        let landlock = landlock_plan(
            policy,
            host,
            &writable_roots,
            &allows,
            &masked_paths,
            &emptied,
            &devices,
        );
        let network = net_plan(policy);
        let mut env = environment(policy, req);
        if let Some(addr) = network.proxy {
            for (k, v) in proxy_env(addr) {
                env.retain(|(name, _)| *name != k);
                env.push((k, v));
            }
            env.sort();
        }
        let readable: Option<Vec<PathBuf>> = match policy.filesystem.read_scope {
            ReadScope::Host => None,
            ReadScope::AllowList => Some(
                SYSTEM_READ
                    .iter()
                    .map(PathBuf::from)
                    .chain(allows.iter().cloned())
                    .collect(),
            ),
        };
        let (cwd, cwd_fallback) = reach::start_dir(
            &req.cwd,
            &reach::View {
                host,
                workspace: &req.workspace,
                root_caller: req.uid == 0,
                granted: &granted,
                covers: &covers,
                masks: &masks.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(),
                readable: readable.as_deref(),
            },
        );
        let candidates = candidates(host, program, &env);
        creation_guard.calls = seccomp::mediated_calls(resources.allocation_watch);
        let identities = masked_paths
            .iter()
            .chain(&protected)
            .chain(&pins)
            .filter_map(|p| host.stat(p).map(|e| (p.clone(), (e.dev, e.ino))))
            .collect();
        creation_guard.held_configs = held_configs;
        Ok(Plan {
            ids,
            idmapped,
            slots,
            mounts,
            landlock,
            seccomp: seccomp::default_rules(),
            env,
            argv: req.argv.clone(),
            candidates,
            cwd,
            cwd_fallback,
            hostname: SANDBOX_HOSTNAME.into(),
            writable_roots: writable_roots.clone(),
            masked: masked_paths,
            emptied: emptied_paths,
            protected: protected.iter().cloned().collect(),
            creation_guard,
            linked_secrets,
            network,
            timeout_secs: policy.limits.timeout.filter(|t| *t > 0),
            rlimits: policy
                .limits
                .files
                .map(|n| ("RLIMIT_NOFILE".to_string(), n))
                .into_iter()
                .chain(resources.rlimits.iter().cloned())
                .collect(),
            resources,
            resources_missing,
            output_limit,
            sweep: SweepPlan {
                roots: writable_roots,
                existing: found
                    .deny_write
                    .iter()
                    .chain(&found.git_files)
                    .filter_map(|p| Some((p.clone(), host.lstat_kind(p)?)))
                    .collect(),
                git_dirs: found
                    .accepted_git_dirs
                    .iter()
                    .chain(&found.git_dirs)
                    .cloned()
                    .collect(),
                dirs,
                git_indexes,
            },
            deny_globs: found.globs,
            identities,
        })
    }
}

/// The limits of the whole run and how this machine enforces them (see [`crate::cgroup`]).
fn resources(
    policy: &Policy,
    host: &dyn HostView,
) -> Result<(ResourcePlan, Option<Missing>, Option<u64>), PlanError> {
    let limits = &policy.limits;
    let memory = match limits
        .memory
        .as_deref()
        .map(policy::parse_memory)
        .transpose()?
    {
        Some(Some(policy::MemoryLimit::Bytes(b))) => Some(b),
        // A share of an unknown total is no limit rather than a limit of nothing.
        Some(Some(policy::MemoryLimit::Percent(p))) => {
            Some(mem_total(host) / 100 * u64::from(p)).filter(|b| *b > 0)
        }
        _ => None,
    };
    let wanted = Wanted {
        memory,
        pids: limits.pids.filter(|n| *n > 0),
        cpu_millis: limits.cpu.map(|c| c.millis()),
    };
    let output = limits
        .output_limit
        .as_deref()
        .map(policy::parse_output_limit)
        .transpose()?
        .flatten();
    let facts = host.cgroups();
    Ok(match crate::cgroup::choose(&facts, &wanted) {
        Ok(plan) => (plan, None, output),
        Err(missing) => {
            // Everything else still planned; the CPU limit is what is missing.
            let rest = Wanted {
                cpu_millis: None,
                ..wanted
            };
            let plan = crate::cgroup::choose(&facts, &rest).unwrap_or_default();
            (plan, Some(missing), output)
        }
    })
}

/// Physical memory in bytes (`MemTotal` of `/proc/meminfo`); 0 when unknown.
fn mem_total(host: &dyn HostView) -> u64 {
    host.read_small(Path::new("/proc/meminfo"))
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn ids(req: &Request) -> Ids {
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

fn writable_roots(
    policy: &Policy,
    req: &Request,
    host: &dyn HostView,
) -> Result<Vec<PathBuf>, PlanError> {
    let ctx = PathContext {
        home: req.home.clone(),
        workspace: req.workspace.clone(),
        writable_roots: Vec::new(),
    };
    let mut roots: Vec<PathBuf> = Vec::new();
    for entry in &policy.filesystem.allow_write {
        for pat in policy::expand(entry, &ctx)? {
            let PathPattern::Exact(p) = pat else {
                return Err(PlanError::WritableRootGlob(entry.clone()));
            };
            let canon = host
                .canonicalize(&p)
                .ok_or_else(|| PlanError::WritableRootMissing(p.clone()))?;
            for forbidden in ["/", "/dev", "/proc", "/sys"] {
                if canon == Path::new(forbidden)
                    || (forbidden != "/" && is_within(&canon, Path::new(forbidden)))
                {
                    return Err(PlanError::WritableRootForbidden(canon));
                }
            }
            if canon == Path::new("/tmp") {
                continue; // the private /tmp is always writable
            }
            if !roots.contains(&canon) {
                roots.push(canon);
            }
        }
    }
    roots.sort_by_key(|p| (depth(p), p.clone()));
    Ok(roots)
}

/// Existing paths that match deny patterns, found by stat (exact) and by walking (globs).
/// The deny globs of a policy, compiled once: the planner's walk and the sweep's both use it.
#[derive(Debug, Clone)]
pub struct DenyGlobs {
    set: policy::GlobList,
    /// Per glob: from `deny_read` (true) or `deny_write` (false).
    read: Vec<bool>,
}

impl DenyGlobs {
    fn new<'a>(
        read: impl IntoIterator<Item = &'a policy::Glob>,
        write: impl IntoIterator<Item = &'a policy::Glob>,
    ) -> Result<DenyGlobs, PlanError> {
        let globs: Vec<(&policy::Glob, bool)> = read
            .into_iter()
            .map(|g| (g, true))
            .chain(write.into_iter().map(|g| (g, false)))
            .collect();
        Ok(DenyGlobs {
            set: policy::GlobList::new(globs.iter().map(|(g, _)| *g))?,
            read: globs.iter().map(|(_, r)| *r).collect(),
        })
    }

    /// Whether `path` matches a `deny_read` glob, and whether it matches a `deny_write` one.
    fn matches(&self, path: &Path) -> (bool, bool) {
        self.set
            .matches(path)
            .into_iter()
            .fold((false, false), |(r, w), i| {
                let is_read = self.read.get(i).copied().unwrap_or(false);
                (r || is_read, w || !is_read)
            })
    }

    /// Whether an entry named `name` can be anything the walks look for (a glob's match, or
    /// a name [`is_submodule_code_path`] or [`is_git_redirect`] looks at): the others are
    /// passed over without building their paths.
    pub(crate) fn may_concern(&self, name: &std::ffi::OsStr) -> bool {
        self.set.may_match_name(name)
            || name == ".git"
            || name == "hooks"
            || name == "config"
            || name == "config.worktree"
            || name == "commondir"
    }

    /// A path whose appearance the sweep must handle: a protected glob's match, code of a
    /// submodule's git dir, or a `.git` that redirects git elsewhere.
    pub(crate) fn is_protected(&self, path: &Path, kind: Kind) -> bool {
        self.matches(path).1 || is_submodule_code_path(path) || is_git_redirect(path, kind)
    }
}

#[derive(Debug)]
struct Matches {
    deny_read: Vec<PathBuf>,
    deny_write: Vec<PathBuf>,
    git_files: Vec<PathBuf>,
    /// `.git` directories and submodule git dirs found in the walk.
    git_dirs: Vec<PathBuf>,
    /// Directories git accepts as git dirs that hold a config, hooks or a commondir.
    accepted_git_dirs: Vec<PathBuf>,
    globs: DenyGlobs,
}

impl Matches {
    fn collect(
        host: &dyn HostView,
        roots: &[PathBuf],
        deny_read: &[PathPattern],
        deny_write: &[PathPattern],
        stamps: &mut DirStamps,
    ) -> Result<Matches, PlanError> {
        let (mut deny_read_found, mut deny_write_found) = (Vec::new(), Vec::new());
        let mut read_globs = Vec::new();
        let mut write_globs = Vec::new();
        for (list, found, globs) in [
            (deny_read, &mut deny_read_found, &mut read_globs),
            (deny_write, &mut deny_write_found, &mut write_globs),
        ] {
            for pat in list {
                match pat {
                    PathPattern::Exact(p) => {
                        if host.lstat_kind(p).is_some() {
                            found.push(p.clone());
                        }
                    }
                    PathPattern::Glob(g) => globs.push(g),
                }
            }
        }
        // A read glob with wildcards in its last component only (`~/.env*`) needs one listing
        // of its base, not a walk of everything beneath (the whole home), nor a place in the
        // compiled matcher (its shape would cost a regex set on every run).
        let (one_level, read_globs): (Vec<&policy::Glob>, Vec<&policy::Glob>) =
            read_globs.into_iter().partition(|g| g.is_one_level());
        for g in &one_level {
            for (name, _) in host.list_dir(g.base()) {
                if g.matches_name(&name) {
                    deny_read_found.push(g.base().join(name));
                }
            }
        }
        let mut m = Matches {
            deny_read: deny_read_found,
            deny_write: deny_write_found,
            git_files: Vec::new(),
            git_dirs: Vec::new(),
            accepted_git_dirs: Vec::new(),
            globs: DenyGlobs::new(read_globs.iter().copied(), write_globs.iter().copied())?,
        };
        // Walk every distinct glob base once (writable roots are the bases of the relative
        // patterns); a base inside another base is covered by the outer walk.
        let mut bases: Vec<PathBuf> = read_globs
            .iter()
            .chain(&write_globs)
            .map(|g| g.base().to_path_buf())
            .collect();
        bases.extend(roots.iter().cloned());
        bases.sort_by_key(|p| (depth(p), p.clone()));
        bases.dedup();
        let mut walked: Vec<PathBuf> = Vec::new();
        let mut count = 0usize;
        for base in bases {
            if walked.iter().any(|w| is_within(&base, w)) || host.lstat_kind(&base).is_none() {
                continue;
            }
            walk(
                host,
                &base,
                &mut count,
                Stamps::Record(stamps),
                &|name, _| m.globs.may_concern(name),
                &mut |path, kind| {
                    let (read, write) = m.globs.matches(path);
                    if read {
                        m.deny_read.push(path.to_path_buf());
                    }
                    if write || is_submodule_code_path(path) {
                        m.deny_write.push(path.to_path_buf());
                    }
                    if kind == Kind::Dir && path.file_name().is_some_and(|n| n == ".git") {
                        m.git_dirs.push(path.to_path_buf());
                    } else if is_submodule_code_path(path) {
                        if let Some(parent) = path.parent() {
                            m.git_dirs.push(parent.to_path_buf());
                        }
                    }
                    if is_git_redirect(path, kind) {
                        m.git_files.push(path.to_path_buf());
                    }
                    if let (Some(name), Some(parent)) = (path.file_name(), path.parent()) {
                        if crate::planted_git::is_code_name(name)
                            && crate::planted_git::accepted_by_git(host, parent)
                        {
                            m.accepted_git_dirs.push(parent.to_path_buf());
                        }
                    }
                },
            )?;
            walked.push(base);
        }
        for v in [
            &mut m.deny_read,
            &mut m.deny_write,
            &mut m.git_files,
            &mut m.git_dirs,
            &mut m.accepted_git_dirs,
        ] {
            v.sort();
            v.dedup();
        }
        Ok(m)
    }
}

/// Depth-first walk that does not follow symlinks. Inside a `.git` directory it only goes into
/// `modules` (submodule git dirs), and inside those it skips object stores, refs and logs:
/// hooks and config are what can run code.
pub(crate) fn walk(
    host: &dyn HostView,
    root: &Path,
    count: &mut usize,
    mut stamps: Stamps<'_>,
    concern: &dyn Fn(&std::ffi::OsStr, Kind) -> bool,
    visit: &mut dyn FnMut(&Path, Kind),
) -> Result<(), PlanError> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if let Stamps::SkipUnchanged(known) = &stamps {
            if let Some(rec) = known.unchanged(host, &dir) {
                // Same entries as when the planner listed it (every create, remove or rename
                // in it would have moved its ctime): visited then, nothing new to see.
                stack.extend(rec.subdirs.iter().map(|n| dir.join(n)));
                continue;
            }
        }
        // The stamp is taken before the listing: a change after it shows in the ctime.
        let (stamp, entries) = match stamps {
            Stamps::Record(_) => host.list_dir_stamped(&dir),
            Stamps::SkipUnchanged(_) => (None, host.list_dir(&dir)),
        };
        let dir_is_git = dir.file_name().is_some_and(|n| n == ".git");
        let dir_in_modules = in_git_modules(&dir);
        // `.git/modules` (or a nested `modules`) holds submodule git dirs, whatever their names.
        let dir_is_modules = dir_in_modules && dir.file_name().is_some_and(|n| n == "modules");
        let mut subdirs = Vec::new();
        for (name, kind) in entries {
            // No limit: what one run creates must never make a later run fail. The walk is
            // linear in the entries (about 1 s per million here, docs/benchmarks.md).
            *count += 1;
            let interesting = concern(&name, kind);
            let descend = if dir_is_git {
                name == "modules"
            } else if dir_is_modules {
                true
            } else if dir_in_modules {
                !matches!(
                    name.to_str(),
                    Some("objects" | "refs" | "logs" | "info" | "branches" | "lfs" | "hooks")
                )
            } else {
                true
            };
            let descend = kind == Kind::Dir && descend;
            if interesting || descend {
                let path = dir.join(&name);
                if interesting {
                    visit(&path, kind);
                }
                if descend {
                    stack.push(path);
                    subdirs.push(name);
                }
            }
        }
        if let (Stamps::Record(rec), Some(stamp)) = (&mut stamps, stamp) {
            rec.record(host, dir, stamp, subdirs);
        }
    }
    Ok(())
}

/// Whether `path` lies inside a `.git/modules` tree (the git dirs of submodules).
pub(crate) fn in_git_modules(path: &Path) -> bool {
    let names: Vec<&std::ffi::OsStr> = path.iter().collect();
    names
        .windows(2)
        .any(|w| w[0] == ".git" && w[1] == "modules")
}

/// `hooks`, `config` or `commondir` of a submodule's git dir: what makes git run code there.
pub(crate) fn is_submodule_code_path(path: &Path) -> bool {
    // Called for every entry of every walk: the cheap test first.
    let named = path
        .file_name()
        .is_some_and(|n| n == "hooks" || n == "config" || n == "commondir");
    if !named {
        return false;
    }
    let parent_is_modules = path
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == "modules");
    !parent_is_modules && path.parent().is_some_and(in_git_modules)
}

/// A `.git` entry that is not a directory (a `gitdir:` file or a symlink) redirects git to
/// another git dir, with that dir's hooks and config.
pub(crate) fn is_git_redirect(path: &Path, kind: Kind) -> bool {
    kind != Kind::Dir && path.file_name().is_some_and(|n| n == ".git")
}

/// The paths to cover so that `deny` is unreadable except for `allows` inside it.
fn mask_targets(
    host: &dyn HostView,
    deny: &Path,
    allows: &[PathBuf],
    out: &mut Vec<(PathBuf, Kind)>,
) {
    if allows.iter().any(|a| a == deny) {
        return;
    }
    let Some(entry) = host.stat(deny) else {
        return;
    };
    let inner: Vec<&PathBuf> = allows.iter().filter(|a| is_within(a, deny)).collect();
    if inner.is_empty() || entry.kind != Kind::Dir {
        out.push((deny.to_path_buf(), entry.kind));
        return;
    }
    for (name, _) in host.list_dir(deny) {
        let child = deny.join(name);
        if inner.iter().any(|a| is_within(a, &child)) {
            mask_targets(host, &child, allows, out);
        } else if let Some(canon) = host.canonicalize(&child) {
            if let Some(e) = host.stat(&canon) {
                out.push((canon, e.kind));
            }
        }
    }
}

/// A masked file that has more names than the masks cover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkedSecret {
    pub path: PathBuf,
    /// Names the file has (hard links).
    pub links: u64,
    /// Names of it found under the masks.
    pub masked: u64,
}

/// How deep below a masked directory files are checked for hard links, and how many entries
/// per mask at most: credential files sit near the top (`~/.ssh/id_rsa`, `~/.aws/credentials`,
/// `~/.gnupg/private-keys-v1.d/X.key`), and a browser profile of thousands of files must not
/// cost every run a walk. Deeper or further files are not checked.
const LINK_CHECK_DEPTH: usize = 2;
const LINK_CHECK_ENTRIES: usize = 512;

/// Masked regular files with a name outside the masks. A mask covers a path, not a file: a
/// hard link to `~/.aws/credentials` planted in the workspace (or anywhere readable) would be
/// read through. A file whose every name lies under a mask (`id_rsa` and a backup link of it
/// in `~/.ssh`) is fine.
pub fn linked_secrets(host: &dyn HostView, masks: &[(PathBuf, Kind)]) -> Vec<LinkedSecret> {
    // (dev, ino) → (first path seen, links, names seen under masks)
    let mut seen: BTreeMap<(u64, u64), (PathBuf, u64, u64)> = BTreeMap::new();
    let mut note = |path: &Path, e: &Entry| {
        if e.kind == Kind::File && e.links > 1 {
            seen.entry((e.dev, e.ino))
                .or_insert_with(|| (path.to_path_buf(), e.links, 0))
                .2 += 1;
        }
    };
    for (mask, kind) in masks {
        match kind {
            // Mask paths are canonical: no symlink to tell apart from its target here.
            Kind::File => {
                if let Some(e) = host.stat(mask) {
                    note(mask, &e);
                }
            }
            Kind::Dir => {
                let mut budget = LINK_CHECK_ENTRIES;
                let mut todo = vec![(mask.clone(), 0usize)];
                while let Some((dir, depth)) = todo.pop() {
                    for (name, k) in host.list_dir(&dir) {
                        if budget == 0 {
                            break;
                        }
                        budget -= 1;
                        let child = dir.join(name);
                        match k {
                            Kind::File => {
                                if let Some(e) = host.stat(&child) {
                                    note(&child, &e);
                                }
                            }
                            Kind::Dir if depth + 1 < LINK_CHECK_DEPTH => {
                                todo.push((child, depth + 1))
                            }
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
    }
    seen.into_values()
        .filter(|(_, links, masked)| masked < links)
        .map(|(path, links, masked)| LinkedSecret {
            path,
            links,
            masked,
        })
        .collect()
}

/// Where a read-only bind for `path` can land: the path itself, or, since a mount cannot cover
/// a symlink, the symlink's target. `None` if it does not exist (or dangles).
fn mount_target(host: &dyn HostView, path: &Path) -> Option<PathBuf> {
    match host.lstat_kind(path)? {
        Kind::Symlink => host.canonicalize(path),
        _ => Some(path.to_path_buf()),
    }
}

/// For a `.git` that is not a directory (a `gitdir:` file of a worktree or submodule, or a
/// symlink), protect the real git dir's hooks, config and commondir.
fn protect_git_file(
    host: &dyn HostView,
    entry: &Path,
    roots: &[PathBuf],
    protected: &mut BTreeSet<PathBuf>,
    gitdirs: &mut BTreeSet<PathBuf>,
    found: &mut Vec<git::GitDir>,
) {
    let base = entry.parent().unwrap_or(Path::new("/"));
    let gitdir = match host.stat(entry).map(|e| e.kind) {
        // A symlink to the git dir itself.
        Some(Kind::Dir) => match host.canonicalize(entry) {
            Some(d) => d,
            None => return,
        },
        Some(Kind::File) => {
            let Some(text) = host.read_small(entry) else {
                return;
            };
            let Some(target) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) else {
                return;
            };
            policy::normalize_lexically(&base.join(target.trim()))
        }
        _ => return,
    };
    // A regular `.git` file can be bound read-only; a symlink cannot (the sweep watches it).
    if host.lstat_kind(entry) == Some(Kind::File) {
        protected.insert(entry.to_path_buf());
    }
    let mut dirs = vec![gitdir.clone()];
    if let Some(common) = host.read_small(&gitdir.join("commondir")) {
        dirs.push(policy::normalize_lexically(&gitdir.join(common.trim())));
    }
    for d in dirs {
        let Some(d) = host.canonicalize(&d) else {
            continue;
        };
        gitdirs.insert(d.clone());
        found.push(git::GitDir {
            dir: d.clone(),
            top: Some(base.to_path_buf()),
        });
        for name in ["hooks", "config", "commondir"] {
            let p = d.join(name);
            let Some(target) = mount_target(host, &p) else {
                continue;
            };
            if roots.iter().any(|w| is_within(&target, w)) {
                protected.insert(target);
            }
        }
    }
}

fn landlock_plan(
    policy: &Policy,
    host: &dyn HostView,
    writable_roots: &[PathBuf],
    allows: &[PathBuf],
    masked: &[PathBuf],
    emptied: &[(PathBuf, Kind)],
    devices: &[(PathBuf, usize)],
) -> LandlockPlan {
    let mut starts: Vec<PathBuf> = match policy.filesystem.read_scope {
        ReadScope::Host => vec![PathBuf::from("/")],
        ReadScope::AllowList => SYSTEM_READ
            .iter()
            .chain(REPLACED.iter())
            .map(PathBuf::from)
            .chain(allows.iter().cloned())
            .collect(),
    };
    starts.sort();
    starts.dedup();
    // Masks inside writable roots cannot be mirrored (a rule on the root grants everything
    // beneath it); the mount masks enforce those alone.
    // Paths read as empty are split out the same way: Landlock does not look at the inode a
    // mount hides, so the host file's rule would be lost; the empty file or directory that
    // covers it gets its own read rule once mounted (below, `child_rules`).
    let outside: Vec<&PathBuf> = masked
        .iter()
        .chain(emptied.iter().map(|(p, _)| p))
        .filter(|m| !writable_roots.iter().any(|w| is_within(m, w)))
        .collect();
    let mut rules = Vec::new();
    for s in &starts {
        read_rules(host, s, None, &outside, &mut rules);
    }
    for w in writable_roots {
        let dir = host.stat(w).is_some_and(|e| e.kind == Kind::Dir);
        rules.push(Rule {
            path: w.clone(),
            access: Access::Full,
            dir,
        });
    }
    for (d, _) in devices {
        rules.push(Rule {
            path: d.clone(),
            access: Access::Device,
            dir: false,
        });
    }
    let mut child_rules = vec![
        Rule {
            path: "/tmp".into(),
            access: Access::Full,
            dir: true,
        },
        Rule {
            path: "/dev/shm".into(),
            access: Access::Full,
            dir: true,
        },
        Rule {
            path: "/dev/pts".into(),
            access: Access::Device,
            dir: true,
        },
        Rule {
            path: "/proc".into(),
            access: Access::ReadWriteFiles,
            dir: true,
        },
    ];
    child_rules.extend(emptied.iter().map(|(p, kind)| Rule {
        path: p.clone(),
        access: Access::Read,
        dir: *kind == Kind::Dir,
    }));
    LandlockPlan {
        host_rules: rules,
        child_rules,
    }
}

/// Read rules covering `root` except the masked paths: a root holding a mask is replaced by
/// its children, recursively (Landlock can grant, never subtract). `listed` is the kind the
/// parent's listing gave (not following symlinks): a directory or a plain file needs no
/// `stat`, which is what following would find too.
fn read_rules(
    host: &dyn HostView,
    root: &Path,
    listed: Option<Kind>,
    masked: &[&PathBuf],
    out: &mut Vec<Rule>,
) {
    if masked.iter().any(|m| m.as_path() == root) {
        return;
    }
    let kind = match listed {
        Some(k @ (Kind::Dir | Kind::File)) => k,
        _ => match host.stat(root) {
            Some(entry) => entry.kind,
            None => return,
        },
    };
    let holds_mask = masked.iter().any(|m| is_within(m, root));
    if !holds_mask || kind != Kind::Dir {
        out.push(Rule {
            path: root.to_path_buf(),
            access: Access::Read,
            dir: kind == Kind::Dir,
        });
        return;
    }
    out.push(Rule {
        path: root.to_path_buf(),
        access: Access::List,
        dir: true,
    });
    for (name, kind) in host.list_dir(root) {
        read_rules(host, &root.join(name), Some(kind), masked, out);
    }
}

fn environment(policy: &Policy, req: &Request) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = policy::build_env(&policy.env, req.env.iter().cloned())
        .into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let cwd = if is_within(&req.cwd, &req.workspace) {
        &req.cwd
    } else {
        &req.workspace
    };
    for (k, v) in [
        ("TMPDIR", "/tmp".to_string()),
        ("PWD", cwd.display().to_string()),
    ] {
        env.retain(|(name, _)| name != k);
        env.push((k.to_string(), v));
    }
    if !env.iter().any(|(k, _)| k == "HOME") {
        env.push(("HOME".into(), req.home.display().to_string()));
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    env.sort();
    env
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

/// The creation guard's patterns: every `deny_write` pattern it can express, plus the hooks,
/// config and commondir of git dirs that existing `.git` files or symlinks point to.
fn creation_guard(
    roots: &[PathBuf],
    deny_write: &[PathPattern],
    redirect_gitdirs: &BTreeSet<PathBuf>,
) -> CreationGuard {
    let mut guard = CreationGuard {
        roots: roots.to_vec(),
        calls: seccomp::mediated_calls(None),
        ..CreationGuard::default()
    };
    for pat in deny_write {
        match pat {
            PathPattern::Exact(p) => guard.protected.push(GuardPattern {
                base: p.clone(),
                tail: Vec::new(),
            }),
            PathPattern::Glob(g) => match g.literal_base_and_tail() {
                Some((base, tail)) => guard.protected.push(GuardPattern {
                    base: base.to_path_buf(),
                    tail,
                }),
                None => guard.sweep_only.push(g.pattern().to_string()),
            },
        }
    }
    for d in redirect_gitdirs {
        for name in ["hooks", "config", "commondir"] {
            guard.protected.push(GuardPattern {
                base: d.join(name),
                tail: Vec::new(),
            });
        }
    }
    guard
}
