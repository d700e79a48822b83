//! Limits of a whole run (memory, processes, CPU) and what it used, through the best mechanism
//! this machine gives the caller:
//!
//! - **cgroup v2**, where a delegated subtree is writable (a systemd desktop session): a group
//!   made beside the caller's own, with `memory.max` (+ `memory.swap.max = 0`), `pids.max`,
//!   `cpu.max`;
//! - **cgroup v1**, per controller, where the caller can create groups in the hierarchy (root
//!   here): `memory.limit_in_bytes` (+ `memsw`, so no swap beyond it), `pids.max`,
//!   `cpu.cfs_quota_us`;
//! - **rlimits**, where neither is available: `RLIMIT_NPROC` for processes (counted per user
//!   namespace since Linux 5.14, so only the run's own processes count) and `RLIMIT_DATA` for
//!   memory (per process, not per run). CPU has no rlimit equivalent: a CPU limit without a
//!   cgroup is refused.
//!
//! [`choose`] is pure (tested against made-up facts); [`CgroupFacts::probe`] reads the facts
//! from `/proc/self/cgroup` and `/proc/self/mountinfo`; [`Group`] is one run's cgroup.

use crate::host::read_text;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

/// How one limit is enforced: the contract's type, which the run record and every backend
/// share.
pub use sandbox::LimitMechanism as Mechanism;

/// The limits asked for, in kernel units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Wanted {
    pub memory: Option<u64>,
    pub pids: Option<u64>,
    /// Thousandths of a core.
    pub cpu_millis: Option<u64>,
}

/// cgroup v2 facts: the caller's own group and the directory a run's group would be made in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V2Facts {
    /// Where the run's group is made: the parent of the caller's group (a group with
    /// processes cannot give controllers to children), or the root of the hierarchy.
    pub base: PathBuf,
    /// Controllers the base gives its children (`cgroup.subtree_control`), or, for the root
    /// of the hierarchy, that it could give (`cgroup.controllers`).
    pub controllers: Vec<String>,
    /// Whether the caller may make groups there and move processes into them.
    pub writable: bool,
    /// The base is the hierarchy's root: controllers must be enabled first.
    pub is_root: bool,
}

/// What this process may do with cgroups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupFacts {
    pub v2: Option<V2Facts>,
    /// cgroup v1: each mounted controller of interest (`memory`, `pids`, `cpu`) and
    /// the caller's own group in it, when the caller may create groups there.
    pub v1: Vec<(String, PathBuf)>,
}

/// Where the run's group is made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "version", rename_all = "snake_case")]
pub enum CgroupSpec {
    V2 {
        base: PathBuf,
        /// Controllers to enable in the base first (only at the hierarchy's root).
        enable: Vec<String>,
    },
    /// One group per controller hierarchy.
    V1 { bases: Vec<(String, PathBuf)> },
}

/// How the run's limits are enforced: the plan's part for resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct ResourcePlan {
    pub memory: Option<(u64, Mechanism)>,
    pub pids: Option<(u64, Mechanism)>,
    pub cpu_millis: Option<(u64, Mechanism)>,
    pub cgroup: Option<CgroupSpec>,
    /// Rlimits of the command, by name (`RLIMIT_DATA`, `RLIMIT_NPROC`).
    pub rlimits: Vec<(String, u64)>,
    /// With memory limited by `RLIMIT_DATA`: the size from which the init sees allocations
    /// (`mmap`, `mremap`) and reports those the limit refuses, which the kernel does not.
    pub allocation_watch: Option<u64>,
}

/// The allocation watch's threshold for a memory limit of `bytes` under `RLIMIT_DATA`: an
/// eighth of it, at least 1 MiB. Allocations that size are rare (glibc maps 64 MiB arenas
/// without write access, which the filter skips), so the notification's ~50 µs is paid
/// seldom; an allocation that crosses the limit in one step of this size is reported.
pub fn allocation_watch(bytes: u64) -> u64 {
    (bytes / 8).max(1 << 20)
}

/// A limit that no mechanism here can enforce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Missing {
    pub limit: &'static str,
    pub cause: String,
    pub fix: String,
}

/// Pick the mechanism for each wanted limit: cgroup v2 for all when it has every controller
/// needed, else cgroup v1 per controller, else rlimits (memory, pids). `Err` names the first
/// limit nothing can enforce (only CPU can be in that case).
pub fn choose(facts: &CgroupFacts, wanted: &Wanted) -> Result<ResourcePlan, Missing> {
    let mut need: Vec<&str> = Vec::new();
    if wanted.memory.is_some() {
        need.push("memory");
    }
    if wanted.pids.is_some() {
        need.push("pids");
    }
    if wanted.cpu_millis.is_some() {
        need.push("cpu");
    }
    let mut plan = ResourcePlan::default();
    if need.is_empty() {
        return Ok(plan);
    }
    if let Some(v2) = facts.v2.as_ref().filter(|v| v.writable) {
        if need.iter().all(|c| v2.controllers.iter().any(|h| h == c)) {
            let m = Mechanism::Cgroup2;
            plan.memory = wanted.memory.map(|v| (v, m));
            plan.pids = wanted.pids.map(|v| (v, m));
            plan.cpu_millis = wanted.cpu_millis.map(|v| (v, m));
            plan.cgroup = Some(CgroupSpec::V2 {
                base: v2.base.clone(),
                enable: if v2.is_root {
                    need.iter().map(|c| c.to_string()).collect()
                } else {
                    Vec::new()
                },
            });
            return Ok(plan);
        }
    }
    let v1 = |c: &str| {
        facts
            .v1
            .iter()
            .find(|(n, _)| n == c)
            .map(|(_, p)| p.clone())
    };
    let mut bases: Vec<(String, PathBuf)> = Vec::new();
    let mut rlimits: Vec<(String, u64)> = Vec::new();
    // The v1 hierarchy of `controller` when there is one, else the rlimit fallback.
    let mut v1_or_rlimit = |controller: &str, value: u64, rlimit: &str| match v1(controller) {
        Some(p) => {
            bases.push((controller.into(), p));
            (value, Mechanism::Cgroup1)
        }
        None => {
            rlimits.push((rlimit.into(), value));
            (value, Mechanism::Rlimit)
        }
    };
    plan.memory = wanted
        .memory
        .map(|b| v1_or_rlimit("memory", b, "RLIMIT_DATA"));
    plan.pids = wanted.pids.map(|n| v1_or_rlimit("pids", n, "RLIMIT_NPROC"));
    plan.rlimits = rlimits;
    plan.allocation_watch = plan
        .memory
        .filter(|(_, m)| *m == Mechanism::Rlimit)
        .map(|(b, _)| allocation_watch(b));
    if let Some(millis) = wanted.cpu_millis {
        match v1("cpu") {
            Some(p) => {
                bases.push(("cpu".into(), p));
                plan.cpu_millis = Some((millis, Mechanism::Cgroup1));
            }
            None => {
                return Err(Missing {
                    limit: "cpu",
                    cause: match &facts.v2 {
                        Some(v) if v.writable => format!(
                            "the cgroup v2 subtree at {} does not delegate the `cpu` controller, and no cgroup v1 `cpu` hierarchy is writable",
                            v.base.display()
                        ),
                        _ => "no writable cgroup (v2 delegated subtree or v1 `cpu` hierarchy) for this user, and CPU time has no rlimit equivalent".into(),
                    },
                    fix: "run from a systemd session with cgroup delegation (e.g. `systemd-run --user --scope -p Delegate=yes stockade run ...`), run as root where cgroup v1 is mounted, or drop --cpu".into(),
                });
            }
        }
    }
    if !bases.is_empty() {
        // CPU time comes from the kernel's accounting of reaped processes (`getrusage`), not
        // from a `cpuacct` group: one more hierarchy to join and remove on every run.
        plan.cgroup = Some(CgroupSpec::V1 { bases });
    }
    Ok(plan)
}

impl CgroupFacts {
    /// Read this process's cgroups and the mounted hierarchies.
    pub fn probe() -> CgroupFacts {
        let (Some(cgroup), Some(mountinfo)) = (
            read_text(Path::new("/proc/self/cgroup"), TEXT_LIMIT),
            read_text(Path::new("/proc/self/mountinfo"), TEXT_LIMIT),
        ) else {
            return CgroupFacts::default();
        };
        parse_facts(&cgroup, &mountinfo, &|p| may_write(p), &|p| {
            read_text(p, TEXT_LIMIT)
        })
    }
}

/// Facts from the texts of `/proc/self/cgroup` and `/proc/self/mountinfo`; `writable` and
/// `read` ask the filesystem (made-up in tests).
pub fn parse_facts(
    cgroup: &str,
    mountinfo: &str,
    writable: &dyn Fn(&Path) -> bool,
    read: &dyn Fn(&Path) -> Option<String>,
) -> CgroupFacts {
    // (fstype, mount point, root of the mount, super options)
    let mounts: Vec<(&str, PathBuf, &str, &str)> = mountinfo
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let f: Vec<&str> = pre.split(' ').collect();
            let g: Vec<&str> = post.split(' ').collect();
            let fstype = *g.first()?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some((
                fstype,
                PathBuf::from(sys::mountinfo::unescape(f.get(4)?)),
                *f.get(3)?,
                *g.get(2)?,
            ))
        })
        .collect();
    let mut facts = CgroupFacts::default();
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if id == "0" && ctrls.is_empty() {
            let Some((_, mnt, root, _)) = mounts.iter().find(|m| m.0 == "cgroup2") else {
                continue;
            };
            let Some(own) = under_mount(mnt, root, path) else {
                continue;
            };
            let is_root = own == *mnt;
            let base = if is_root {
                own.clone()
            } else {
                own.parent().map_or(own.clone(), Path::to_path_buf)
            };
            let list = if is_root {
                "cgroup.controllers"
            } else {
                "cgroup.subtree_control"
            };
            let controllers = read(&base.join(list))
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect();
            let writable = writable(&base)
                && writable(&base.join("cgroup.procs"))
                && (!is_root || writable(&base.join("cgroup.subtree_control")));
            facts.v2 = Some(V2Facts {
                base,
                controllers,
                writable,
                is_root,
            });
            continue;
        }
        for c in ctrls.split(',') {
            if !["memory", "pids", "cpu"].contains(&c) {
                continue;
            }
            let Some((_, mnt, root, _)) = mounts
                .iter()
                .find(|m| m.0 == "cgroup" && m.3.split(',').any(|o| o == c))
            else {
                continue;
            };
            if let Some(own) = under_mount(mnt, root, path) {
                if writable(&own) && writable(&own.join("cgroup.procs")) {
                    facts.v1.push((c.to_string(), own));
                }
            }
        }
    }
    facts
}

/// The directory of cgroup `path` in a hierarchy mounted at `mnt` whose mount shows `root`.
fn under_mount(mnt: &Path, root: &str, path: &str) -> Option<PathBuf> {
    let rel = if root == "/" {
        path
    } else {
        path.strip_prefix(root)?
    };
    let rel = rel.trim_start_matches('/');
    if rel.split('/').any(|c| c == "..") {
        return None;
    }
    Some(if rel.is_empty() {
        mnt.to_path_buf()
    } else {
        mnt.join(rel)
    })
}

/// Whether this process may write `path` (owner, group or other write bit; root may write
/// anything on a read-write mount, which cgroup mounts are when they are usable at all).
fn may_write(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(path) else {
        return false;
    };
    let (uid, gid) = (sys::raw::euid(), sys::raw::egid());
    if uid == 0 {
        return true;
    }
    let mode = m.mode();
    (m.uid() == uid && mode & 0o200 != 0)
        || (m.gid() == gid && mode & 0o020 != 0)
        || mode & 0o002 != 0
}

/// The directories [`Group::create`] makes for `plan` under `name`, child before parent.
pub fn planned_dirs(plan: &ResourcePlan, name: &str) -> Vec<PathBuf> {
    match &plan.cgroup {
        None => Vec::new(),
        Some(CgroupSpec::V2 { base, .. }) => vec![base.join(name)],
        Some(CgroupSpec::V1 { bases }) => bases.iter().map(|(_, b)| b.join(name)).collect(),
    }
}

pub use sandbox::{LimitHit, Usage};

/// The limits `usage` shows the run reached.
pub fn hits(plan: &ResourcePlan, usage: &Usage) -> Vec<LimitHit> {
    let mut out = Vec::new();
    let mech = Mechanism::code;
    if let Some((bytes, m)) = plan.memory {
        if usage.oom_kills > 0 {
            out.push(LimitHit {
                code: sandbox::Code::LimitReached,
                limit: "memory",
                value: bytes,
                mechanism: mech(m),
                detail: format!(
                    "the kernel killed {} process(es) of the run at the memory limit",
                    usage.oom_kills
                ),
            });
        }
    }
    if let Some((n, m)) = plan.pids {
        if m == Mechanism::Rlimit && usage.pids_peak.is_some_and(|p| p >= n) {
            out.push(LimitHit {
                code: sandbox::Code::LimitReached,
                limit: "pids",
                value: n,
                mechanism: mech(m),
                detail: format!(
                    "the run reached its limit of {n} processes (counted every 50 ms); forks beyond it failed"
                ),
            });
        } else if usage.pids_limit_hits > 0 {
            out.push(LimitHit {
                code: sandbox::Code::LimitReached,
                limit: "pids",
                value: n,
                mechanism: mech(m),
                detail: format!(
                    "{} fork(s) refused at the limit of {n} processes",
                    usage.pids_limit_hits
                ),
            });
        }
    }
    out
}

/// A look at a run's process tree when no cgroup counts for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeSample {
    /// Tasks (processes and threads): what `RLIMIT_NPROC` counts for a run (every task of
    /// the run has its uid in its own user namespace).
    pub tasks: u64,
    /// The largest data size (`VmData`, what `RLIMIT_DATA` counts) of one process, in bytes.
    pub data_peak: u64,
    /// Shared memory resident in the run's processes (`RssShmem` summed, in bytes: pages of
    /// shared anonymous mappings, memfds, SysV segments and tmpfs files they map), which
    /// `RLIMIT_DATA` does not count. A page mapped by two processes counts twice.
    pub shared: u64,
}

/// `RssShmem` of a `/proc/PID/status` text, in bytes.
fn rss_shmem(status: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(status).ok()?;
    let line = text.lines().find(|l| l.starts_with("RssShmem:"))?;
    let kb: u64 = line["RssShmem:".len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// Samples the process tree of `root` now. Walks `/proc/PID/task/TID/children` and reads each
/// process's `VmData`; tasks that exit meanwhile are skipped.
pub fn sample_tree(root: i32) -> TreeSample {
    let mut sample = TreeSample::default();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        if let Ok(status) = std::fs::read(format!("/proc/{pid}/status")) {
            let data = sys::mediate::vm_data(&status).unwrap_or(0);
            sample.data_peak = sample.data_peak.max(data);
            sample.shared = sample
                .shared
                .saturating_add(rss_shmem(&status).unwrap_or(0));
        }
        for task in tasks.flatten() {
            sample.tasks += 1;
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            todo.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            );
        }
        if sample.tasks > 1_000_000 {
            break;
        }
    }
    sample
}

/// One run's cgroup (one directory per hierarchy under v1). Removed on drop.
#[derive(Debug)]
pub struct Group {
    version: u8,
    /// (controller, directory); v2 has one entry named "".
    dirs: Vec<(String, PathBuf)>,
}

/// CFS period for CPU limits.
const CPU_PERIOD_US: u64 = 100_000;

/// CPU time per [`CPU_PERIOD_US`] for `millis` thousandths of a core (at least the kernel's
/// minimum of 1 ms).
fn cpu_quota_us(millis: u64) -> u64 {
    (millis * CPU_PERIOD_US / 1000).max(1000)
}

impl Group {
    /// Make the run's group(s) named `name` and set the limits. Nothing is left behind on
    /// failure.
    pub fn create(plan: &ResourcePlan, name: &str) -> io::Result<Option<Group>> {
        let Some(spec) = &plan.cgroup else {
            return Ok(None);
        };
        let mut group = Group {
            version: 0,
            dirs: Vec::new(),
        };
        match spec {
            CgroupSpec::V2 { base, enable } => {
                group.version = 2;
                if !enable.is_empty() {
                    let line: Vec<String> = enable.iter().map(|c| format!("+{c}")).collect();
                    write(&base.join("cgroup.subtree_control"), &line.join(" "))?;
                }
                let dir = base.join(name);
                std::fs::create_dir(&dir)?;
                group.dirs.push((String::new(), dir.clone()));
                if let Some((bytes, _)) = plan.memory {
                    write(&dir.join("memory.max"), &bytes.to_string())?;
                    // No swap beyond the limit; absent when swap accounting is off.
                    let swap = dir.join("memory.swap.max");
                    if swap.exists() {
                        write(&swap, "0")?;
                    }
                    let _ = write(&dir.join("memory.oom.group"), "1");
                }
                if let Some((n, _)) = plan.pids {
                    write(&dir.join("pids.max"), &n.to_string())?;
                }
                if let Some((millis, _)) = plan.cpu_millis {
                    let quota = cpu_quota_us(millis);
                    write(&dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
                }
            }
            CgroupSpec::V1 { bases } => {
                group.version = 1;
                for (controller, base) in bases {
                    let dir = base.join(name);
                    std::fs::create_dir(&dir)?;
                    group.dirs.push((controller.clone(), dir.clone()));
                    match controller.as_str() {
                        "memory" => {
                            if let Some((bytes, _)) = plan.memory {
                                write(&dir.join("memory.limit_in_bytes"), &bytes.to_string())?;
                                // memory+swap equal to memory: no swap beyond the limit.
                                let memsw = dir.join("memory.memsw.limit_in_bytes");
                                if memsw.exists() {
                                    write(&memsw, &bytes.to_string())?;
                                }
                            }
                        }
                        "pids" => {
                            if let Some((n, _)) = plan.pids {
                                write(&dir.join("pids.max"), &n.to_string())?;
                            }
                        }
                        "cpu" => {
                            if let Some((millis, _)) = plan.cpu_millis {
                                let quota = cpu_quota_us(millis);
                                write(&dir.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
                                write(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(Some(group))
    }

    /// The directories, for the reaper that removes them if the supervisor dies.
    pub fn dirs(&self) -> impl Iterator<Item = &Path> {
        self.dirs.iter().map(|(_, d)| d.as_path())
    }

    /// cgroup v1: each group's `tasks` file, open for writing, for the init to join by writing
    /// `0` (itself); empty under v2 (the supervisor moves the init with [`Group::add`]).
    pub fn tasks_files(&self) -> io::Result<Vec<std::os::fd::OwnedFd>> {
        if self.version != 1 {
            return Ok(Vec::new());
        }
        self.dirs
            .iter()
            .map(|(_, dir)| {
                let path = dir.join("tasks");
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map(std::os::fd::OwnedFd::from)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
            })
            .collect()
    }

    /// Move process `pid` (and so everything it will start) into the group.
    pub fn add(&self, pid: i32) -> io::Result<()> {
        for (_, dir) in &self.dirs {
            write(&dir.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// What the run used so far.
    pub fn usage(&self) -> Usage {
        let mut u = Usage::default();
        for (controller, dir) in &self.dirs {
            let num = |f: &str| read_num(&dir.join(f));
            let key = |f: &str, k: &str| read_key(&dir.join(f), k);
            if self.version == 2 {
                u.memory_peak = num("memory.peak");
                u.pids_peak = num("pids.peak");
                u.cpu_usec = key("cpu.stat", "usage_usec");
                u.oom_kills = key("memory.events", "oom_kill").unwrap_or(0);
                u.memory_limit_hits = key("memory.events", "max").unwrap_or(0);
                u.pids_limit_hits = key("pids.events", "max").unwrap_or(0);
                u.cpu_throttled = key("cpu.stat", "nr_throttled").unwrap_or(0);
                continue;
            }
            match controller.as_str() {
                "memory" => {
                    u.memory_peak = num("memory.max_usage_in_bytes");
                    u.oom_kills = key("memory.oom_control", "oom_kill").unwrap_or(0);
                    u.memory_limit_hits = num("memory.failcnt").unwrap_or(0);
                }
                "pids" => {
                    u.pids_peak = num("pids.peak");
                    u.pids_limit_hits = key("pids.events", "max").unwrap_or(0);
                }
                "cpu" => {
                    u.cpu_throttled = key("cpu.stat", "nr_throttled").unwrap_or(0);
                    // Where `cpu` and `cpuacct` share a hierarchy (`cpu,cpuacct`).
                    u.cpu_usec = num("cpuacct.usage").map(|ns| ns / 1000);
                }
                _ => {}
            }
        }
        u
    }

    /// Kill whatever is left in the group and remove it, waiting up to `patience` for the
    /// processes to be gone.
    pub fn remove(mut self, patience: Duration) -> io::Result<()> {
        self.remove_dirs(patience)
    }

    fn remove_dirs(&mut self, patience: Duration) -> io::Result<()> {
        let until = Instant::now() + patience;
        let mut last = Ok(());
        for (_, dir) in self.dirs.drain(..).rev() {
            loop {
                match std::fs::remove_dir(&dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(e) if Instant::now() >= until => {
                        last = Err(e);
                        break;
                    }
                    Err(_) => {
                        kill_listed(&dir.join("cgroup.procs"));
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
            }
        }
        last
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = self.remove_dirs(Duration::from_secs(1));
    }
}

/// SIGKILL every pid `procs` (a `cgroup.procs` file) lists: the reaper's own routine.
fn kill_listed(procs: &Path) {
    use std::os::unix::ffi::OsStrExt;
    if let Ok(path) = std::ffi::CString::new(procs.as_os_str().as_bytes()) {
        sys::reaper::kill_listed(&path);
    }
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// The most read of a `/proc` or cgroup file (a mount table of many thousand mounts fits).
const TEXT_LIMIT: usize = 16 << 20;

fn read_num(path: &Path) -> Option<u64> {
    read_text(path, TEXT_LIMIT)?.trim().parse().ok()
}

/// The value of `key` in a flat-keyed file (`key value` per line).
fn read_key(path: &Path, key: &str) -> Option<u64> {
    read_text(path, TEXT_LIMIT)?
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

#[cfg(test)]
mod shared_tests {
    #[test]
    fn rss_shmem_is_read_in_bytes() {
        let status = b"Name:\tpython3\nVmData:\t  1000 kB\nRssShmem:\t  262144 kB\nThreads:\t1\n";
        assert_eq!(super::rss_shmem(status), Some(256 << 20));
        assert_eq!(super::rss_shmem(b"Name:\tx\n"), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const CGROUP: &str = "\
9:name=systemd:/
8:pids:/
4:memory:/process_api/bb9b
2:cpuacct:/
1:cpu:/
0::/
";

    fn facts(writable: bool, v2_controllers: &str) -> CgroupFacts {
        let ctl = v2_controllers.to_string();
        parse_facts(CGROUP, MOUNTINFO, &|_| writable, &move |_| {
            Some(ctl.clone())
        })
    }

    #[test]
    fn this_machine_as_root_gets_v1_per_controller() {
        let f = facts(true, "");
        assert_eq!(
            f.v1,
            vec![
                ("pids".to_string(), PathBuf::from("/sys/fs/cgroup/pids")),
                (
                    "memory".to_string(),
                    PathBuf::from("/sys/fs/cgroup/memory/process_api/bb9b")
                ),
                ("cpu".to_string(), PathBuf::from("/sys/fs/cgroup/cpu")),
            ]
        );
        let v2 = f.v2.clone().unwrap();
        assert!(v2.is_root && v2.controllers.is_empty());
        let plan = choose(
            &f,
            &Wanted {
                memory: Some(128 << 20),
                pids: Some(64),
                cpu_millis: Some(500),
            },
        )
        .unwrap();
        assert_eq!(plan.memory, Some((128 << 20, Mechanism::Cgroup1)));
        assert_eq!(plan.pids, Some((64, Mechanism::Cgroup1)));
        assert_eq!(plan.cpu_millis, Some((500, Mechanism::Cgroup1)));
        assert!(plan.rlimits.is_empty());
        let Some(CgroupSpec::V1 { bases }) = plan.cgroup else {
            panic!("v1 expected");
        };
        let names: Vec<&str> = bases.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(names, ["memory", "pids", "cpu"]);
    }

    #[test]
    fn unprivileged_without_delegation_falls_back_to_rlimits_and_refuses_cpu() {
        let f = facts(false, "");
        assert!(f.v1.is_empty());
        let plan = choose(
            &f,
            &Wanted {
                memory: Some(1 << 30),
                pids: Some(1024),
                cpu_millis: None,
            },
        )
        .unwrap();
        assert_eq!(plan.memory, Some((1 << 30, Mechanism::Rlimit)));
        assert_eq!(plan.pids, Some((1024, Mechanism::Rlimit)));
        assert_eq!(plan.cgroup, None);
        assert_eq!(
            plan.rlimits,
            vec![
                ("RLIMIT_DATA".to_string(), 1 << 30),
                ("RLIMIT_NPROC".to_string(), 1024)
            ]
        );
        // The allocation watch: an eighth of the limit, at least 1 MiB.
        assert_eq!(plan.allocation_watch, Some(128 << 20));
        assert_eq!(allocation_watch(4 << 20), 1 << 20);
        let e = choose(
            &f,
            &Wanted {
                cpu_millis: Some(500),
                ..Wanted::default()
            },
        )
        .unwrap_err();
        assert_eq!(e.limit, "cpu");
        assert!(e.fix.contains("Delegate"), "{}", e.fix);
    }

    #[test]
    fn delegated_v2_subtree_is_preferred() {
        let cgroup = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope\n";
        let mountinfo = "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let f = parse_facts(cgroup, mountinfo, &|_| true, &|p| {
            assert!(
                p.ends_with("app.slice/cgroup.subtree_control"),
                "{}",
                p.display()
            );
            Some("cpu memory pids\n".into())
        });
        let v2 = f.v2.clone().unwrap();
        assert_eq!(
            v2.base,
            PathBuf::from("/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice")
        );
        assert!(!v2.is_root);
        let plan = choose(
            &f,
            &Wanted {
                memory: Some(1 << 30),
                pids: Some(64),
                cpu_millis: Some(1500),
            },
        )
        .unwrap();
        assert_eq!(plan.cpu_millis, Some((1500, Mechanism::Cgroup2)));
        assert_eq!(
            plan.cgroup,
            Some(CgroupSpec::V2 {
                base: v2.base,
                enable: Vec::new()
            })
        );
        assert!(plan.rlimits.is_empty());
        // Without `cpu` delegated, v2 is not used for anything and --cpu is refused.
        let f = parse_facts(cgroup, mountinfo, &|_| true, &|_| {
            Some("memory pids".into())
        });
        assert!(choose(
            &f,
            &Wanted {
                cpu_millis: Some(500),
                ..Wanted::default()
            }
        )
        .is_err());
        let plan = choose(
            &f,
            &Wanted {
                pids: Some(10),
                ..Wanted::default()
            },
        )
        .unwrap();
        assert_eq!(plan.pids, Some((10, Mechanism::Cgroup2)));
    }

    /// The files a group is made of, against a plain directory standing in for cgroupfs.
    #[test]
    fn group_writes_limits_and_reads_usage_v1_and_v2() {
        let tmp = tempfile::tempdir().unwrap();
        let base = |n: &str| {
            let p = tmp.path().join(n);
            std::fs::create_dir_all(&p).unwrap();
            p
        };
        let plan = ResourcePlan {
            memory: Some((128 << 20, Mechanism::Cgroup1)),
            pids: Some((64, Mechanism::Cgroup1)),
            cpu_millis: Some((500, Mechanism::Cgroup1)),
            cgroup: Some(CgroupSpec::V1 {
                bases: vec![
                    ("memory".into(), base("memory")),
                    ("pids".into(), base("pids")),
                    ("cpu".into(), base("cpu")),
                ],
            }),
            rlimits: Vec::new(),
            allocation_watch: None,
        };
        // memsw present: set like the limit.
        let memsw_dir = tmp.path().join("memory/run");
        let g = Group::create(&plan, "run").unwrap().unwrap();
        assert_eq!(planned_dirs(&plan, "run").len(), 3);
        let read = |p: &str| std::fs::read_to_string(tmp.path().join(p)).unwrap();
        assert_eq!(read("memory/run/memory.limit_in_bytes"), "134217728");
        assert!(!memsw_dir.join("memory.memsw.limit_in_bytes").exists());
        assert_eq!(read("pids/run/pids.max"), "64");
        assert_eq!(read("cpu/run/cpu.cfs_quota_us"), "50000");
        assert_eq!(read("cpu/run/cpu.cfs_period_us"), "100000");
        g.add(4242).unwrap();
        assert_eq!(read("pids/run/cgroup.procs"), "4242");
        let put = |p: &str, v: &str| std::fs::write(tmp.path().join(p), v).unwrap();
        put("memory/run/memory.max_usage_in_bytes", "1000\n");
        put(
            "memory/run/memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        );
        put("pids/run/pids.peak", "64\n");
        put("pids/run/pids.events", "max 7\n");
        put("cpu/run/cpu.stat", "nr_periods 10\nnr_throttled 3\n");
        // `cpu` and `cpuacct` mounted together.
        put("cpu/run/cpuacct.usage", "2500000000\n");
        let u = g.usage();
        assert_eq!(u.memory_peak, Some(1000));
        assert_eq!(u.oom_kills, 2);
        assert_eq!(u.pids_peak, Some(64));
        assert_eq!(u.pids_limit_hits, 7);
        assert_eq!(u.cpu_throttled, 3);
        assert_eq!(u.cpu_usec, Some(2_500_000));
        let hits = hits(&plan, &u);
        assert_eq!(
            hits.iter().map(|h| h.limit).collect::<Vec<_>>(),
            ["memory", "pids"]
        );
        // A plain directory with files cannot be removed as a cgroup can: reported, not hung.
        assert!(g.remove(Duration::ZERO).is_err());

        let v2 = base("v2");
        std::fs::write(v2.join("cgroup.subtree_control"), "").unwrap();
        let plan = ResourcePlan {
            memory: Some((1 << 30, Mechanism::Cgroup2)),
            pids: Some((10, Mechanism::Cgroup2)),
            cpu_millis: Some((1500, Mechanism::Cgroup2)),
            cgroup: Some(CgroupSpec::V2 {
                base: v2.clone(),
                enable: vec!["memory".into(), "pids".into(), "cpu".into()],
            }),
            rlimits: Vec::new(),
            allocation_watch: None,
        };
        let g = Group::create(&plan, "run").unwrap().unwrap();
        assert_eq!(read("v2/cgroup.subtree_control"), "+memory +pids +cpu");
        assert_eq!(read("v2/run/memory.max"), "1073741824");
        assert_eq!(read("v2/run/pids.max"), "10");
        assert_eq!(read("v2/run/cpu.max"), "150000 100000");
        put("v2/run/memory.peak", "77\n");
        put(
            "v2/run/memory.events",
            "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\n",
        );
        put("v2/run/pids.events", "max 0\n");
        put("v2/run/cpu.stat", "usage_usec 123\nnr_throttled 9\n");
        let u = g.usage();
        assert_eq!(
            (
                u.memory_peak,
                u.oom_kills,
                u.memory_limit_hits,
                u.cpu_usec,
                u.cpu_throttled
            ),
            (Some(77), 1, 5, Some(123), 9)
        );
        assert!(g.remove(Duration::ZERO).is_err());
    }

    #[test]
    fn nothing_wanted_makes_no_group() {
        let plan = choose(&facts(true, ""), &Wanted::default()).unwrap();
        assert_eq!(plan, ResourcePlan::default());
    }

    #[test]
    fn mount_roots_and_escapes() {
        assert_eq!(
            under_mount(
                Path::new("/sys/fs/cgroup/memory"),
                "/docker/abc",
                "/docker/abc/x"
            ),
            Some(PathBuf::from("/sys/fs/cgroup/memory/x"))
        );
        assert_eq!(under_mount(Path::new("/m"), "/a", "/b"), None);
        assert_eq!(under_mount(Path::new("/m"), "/", "/../x"), None);
    }

    #[test]
    fn vm_data_is_read_in_bytes() {
        let status = "Name:\tpython3\nVmPeak:\t  20000 kB\nVmData:\t    4812 kB\nVmStk:\t 132 kB\n";
        assert_eq!(sys::mediate::vm_data(status.as_bytes()), Some(4812 * 1024));
        assert_eq!(sys::mediate::vm_data(b"Name:\tkthreadd\n"), None);
    }
}
