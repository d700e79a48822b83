//! A run's cgroup (v1), made by stockade before the run starts, its limits written and read
//! back; the runtime (runsc, a container engine) joins it or makes its own group below it, and
//! once the run has ended the group's counters are read and the group removed. Used by the
//! gVisor backend (runsc joins the group) and the container backends (the engine's container
//! group below it, `--cgroup-parent`).
//!
//! Hand-written: no crate reads and writes cgroup v1 groups (the native backend's cgroup
//! module is the native backend's own).

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the cgroup v1 hierarchies are mounted.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The cgroup of a root caller's run, as planned.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupPlan {
    /// The config's `cgroupsPath`, `/stockade/<run id>`: the same path below each hierarchy's
    /// root.
    pub path: String,
    /// `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`, so no swap beyond it).
    pub memory: Option<u64>,
    /// `cpu.cfs_quota_us` and `cpu.cfs_period_us`.
    pub cpu: Option<(u64, u64)>,
    /// A group in the `pids` hierarchy too, with no limit of its own, for its count of the
    /// most processes at once (`pids.peak`, of the groups below it as well).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub count_pids: bool,
}

/// What a group counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// `memory.max_usage_in_bytes`: the most memory at once, bytes.
    pub memory_peak: Option<u64>,
    /// `oom_kill` of `memory.oom_control`: processes the OOM killer ended at the group's limit.
    pub oom_kills: u64,
    /// `memory.failcnt`: times the group's memory limit was reached.
    pub memory_limit_hits: u64,
    /// `cpuacct.usage`, microseconds.
    pub cpu_usec: Option<u64>,
    /// `nr_throttled` of `cpu.stat`.
    pub cpu_throttled: u64,
    /// `pids.peak`: the most processes at once (with [`GroupPlan::count_pids`]).
    pub pids_peak: Option<u64>,
}

/// A run's cgroup, made: each hierarchy's directory (a hierarchy holding two controllers,
/// `cpu,cpuacct`, once).
#[derive(Debug)]
pub struct Group {
    dirs: Vec<PathBuf>,
    /// An eventfd the kernel signals when the group's memory limit puts it under OOM
    /// (`cgroup.event_control` on `memory.oom_control`). The OOM killer counts its kill in the
    /// group of the process it kills (`oom_kill`), which for a runtime's group below this one
    /// (a container engine's, removed with the container) is not this group: the event is
    /// this group's own.
    oom_events: Option<std::os::fd::OwnedFd>,
}

impl Group {
    /// Makes the group below `root` (each hierarchy a directory there), writes its limits and
    /// reads them back. A hierarchy a limit needs that is missing, a group already there
    /// (runsc would join it and never set the limits), a limit that did not take, or a memory
    /// limit that cannot bound swap on a machine that has swap (`swap`: no
    /// `memory.memsw.limit_in_bytes` without swap accounting) is refused; what was made is
    /// removed again.
    pub fn create(plan: &GroupPlan, root: &Path, swap: bool) -> io::Result<Group> {
        // The hierarchies first, each with the controllers it holds (`cpu` and `cpuacct`, or
        // any others, may share one): nothing is made when one a limit needs is missing.
        let mut hierarchies: Vec<(PathBuf, Vec<&str>)> = Vec::new();
        let pids = [("pids", false)];
        let counted = if plan.count_pids { &pids[..] } else { &[] };
        for &(controller, needed) in [
            ("memory", plan.memory.is_some()),
            ("cpu", plan.cpu.is_some()),
            ("cpuacct", false),
        ]
        .iter()
        .chain(counted)
        {
            let base = root.join(controller);
            match base.canonicalize() {
                Ok(real) => match hierarchies.iter_mut().find(|(r, _)| *r == real) {
                    Some((_, held)) => held.push(controller),
                    None => hierarchies.push((real, vec![controller])),
                },
                Err(_) if needed => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!(
                            "no cgroup v1 `{controller}` hierarchy at {}",
                            base.display()
                        ),
                    ))
                }
                Err(_) => {}
            }
        }
        let mut group = Group {
            dirs: Vec::new(),
            oom_events: None,
        };
        let relative = plan.path.trim_start_matches('/');
        for (real, controllers) in hierarchies {
            let dir = real.join(relative);
            let made = dir
                .parent()
                .map_or(Ok(()), parent_of_groups)
                .and_then(|()| {
                    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o755)
                        .create(&dir)
                });
            if let Err(e) = made {
                group.remove(Duration::ZERO);
                return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display())));
            }
            group.dirs.push(dir.clone());
            if controllers.contains(&"memory") {
                // Best effort: without it an OOM below this group goes unreported, never
                // unbounded.
                group.oom_events = watch_oom(&dir).ok();
            }
            let written = (|| -> io::Result<()> {
                if let (true, Some(b)) = (controllers.contains(&"memory"), plan.memory) {
                    set(&dir.join("memory.limit_in_bytes"), b, PAGE_SLACK)?;
                    let memsw = dir.join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        set(&memsw, b, PAGE_SLACK)?;
                    } else if swap {
                        return Err(io::Error::new(
                            io::ErrorKind::Unsupported,
                            "this machine has swap but its kernel does not account it per cgroup (no memory.memsw.limit_in_bytes): the memory limit would not bound swap (boot with swapaccount=1, or turn swap off)",
                        ));
                    }
                }
                if let (true, Some((quota, period))) = (controllers.contains(&"cpu"), plan.cpu) {
                    set(&dir.join("cpu.cfs_period_us"), period, 0)?;
                    set(&dir.join("cpu.cfs_quota_us"), quota, 0)?;
                }
                Ok(())
            })();
            if let Err(e) = written {
                group.remove(Duration::ZERO);
                return Err(e);
            }
        }
        Ok(group)
    }

    /// What the group counted (read once the run has ended: the counters outlive the
    /// processes, not the group).
    pub fn usage(&self) -> Counters {
        let mut u = Counters::default();
        for dir in &self.dirs {
            let num = |f: &str| read_num(&dir.join(f));
            let key = |f: &str, k: &str| read_key(&dir.join(f), k);
            if let Some(peak) = num("memory.max_usage_in_bytes") {
                u.memory_peak = Some(peak);
                // The group's own count of kills, or at least one when it was under OOM (the
                // event counts the OOM killer's runs, not its kills: one run can take several
                // tries); a kill in a group below is counted there only.
                let under_oom = self.oom_events.as_ref().map_or(0, ooms).min(1);
                u.oom_kills = key("memory.oom_control", "oom_kill")
                    .unwrap_or(0)
                    .max(under_oom);
                u.memory_limit_hits = num("memory.failcnt").unwrap_or(0);
            }
            if let Some(ns) = num("cpuacct.usage") {
                u.cpu_usec = Some(ns / 1000);
            }
            if let Some(n) = key("cpu.stat", "nr_throttled") {
                u.cpu_throttled = n;
            }
            if let Some(n) = num("pids.peak") {
                u.pids_peak = Some(n);
            }
        }
        u
    }

    /// Removes the group, waiting up to `patience` for the sandbox's last processes to leave
    /// it (runsc has ended; its sandbox may take a moment longer).
    pub fn remove(&mut self, patience: Duration) {
        let until = Instant::now() + patience;
        for dir in self.dirs.drain(..).rev() {
            remove_group(&dir, until);
        }
    }
}

/// Makes `dir` (`<hierarchy>/stockade`), the parent of the runs' groups, mode 0755 whatever
/// the caller's umask, and makes an existing one so: a group directory's mode is who may make
/// groups in it and move processes into them (cgroup v1 checks only the files' modes and
/// owners), and one made under `umask 000` let another user plant a group in a run's, move
/// its processes there and have the run's command killed at the limit (red team of issue 33).
/// Refused when it is not this process's own.
fn parent_of_groups(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a directory of uid {me}'s (uid {}): another user could plant groups in the run's",
                dir.display(),
                meta.uid()
            ),
        ));
    }
    if meta.mode() & 0o022 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// Removes the group `path` (`/stockade/<run id>`) from every hierarchy below `root`, with the
/// empty groups below it, waiting up to `patience` for the last processes to leave: a runtime
/// that makes its own group below a parent it is given (`--cgroup-parent`) makes the parent's
/// path in each hierarchy it uses, not only in those stockade made it in.
pub fn remove_everywhere(root: &Path, path: &str, patience: Duration) {
    let until = Instant::now() + patience;
    let relative = path.trim_start_matches('/');
    for h in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let dir = h.path().join(relative);
        if !h.file_type().is_ok_and(|t| t.is_dir()) || !dir.is_dir() {
            continue;
        }
        remove_group(&dir, until);
    }
}

/// Removes the group `dir` with the empty groups a runtime left below it (deepest first),
/// trying again until `until` while the kernel refuses (its last processes leaving).
fn remove_group(dir: &Path, until: Instant) {
    loop {
        remove_below(dir, 4);
        match std::fs::remove_dir(dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => break,
        }
    }
}

/// An eventfd signalled on each OOM of the memory group `dir` (and of the groups below it).
fn watch_oom(dir: &Path) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsRawFd;
    let events = rustix::event::eventfd(
        0,
        rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
    )?;
    let control = std::fs::File::open(dir.join("memory.oom_control"))?;
    std::fs::write(
        dir.join("cgroup.event_control"),
        format!("{} {}", events.as_raw_fd(), control.as_raw_fd()),
    )?;
    Ok(events)
}

/// How many times `events` ([`watch_oom`]) was signalled (0 when never).
fn ooms(events: &std::os::fd::OwnedFd) -> u64 {
    let mut count = [0u8; 8];
    match rustix::io::read(events, &mut count) {
        Ok(8) => u64::from_ne_bytes(count),
        _ => 0,
    }
}

/// Removes the groups below `dir`, empty ones only (the kernel refuses the others), `depth`
/// levels at most: never through a symbolic link (a group's directory has none).
fn remove_below(dir: &Path, depth: usize) {
    if depth == 0 {
        return;
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_below(&entry.path(), depth - 1);
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.remove(Duration::from_secs(2));
    }
}

/// The groups below `<hierarchy>/stockade` of runs whose process is gone (`alive` says no for
/// the pid in the run id, `<ms>-<pid>[-<n>]`): a `stockade` killed outright leaves its run's
/// group, and runsc its own, behind. Removed when empty (the kernel refuses to remove a group
/// with processes or groups in it), best effort; a live process's groups are never touched.
pub fn sweep_stale(root: &Path, alive: &dyn Fn(u32) -> bool) {
    let Ok(hierarchies) = std::fs::read_dir(root) else {
        return;
    };
    for h in hierarchies.flatten() {
        let Ok(groups) = std::fs::read_dir(h.path().join("stockade")) else {
            continue;
        };
        for g in groups.flatten() {
            let name = g.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.split('-').nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(|p| !alive(p)) && g.file_type().is_ok_and(|t| t.is_dir()) {
                remove_below(&g.path(), 4);
                let _ = std::fs::remove_dir(g.path());
            }
        }
    }
}

/// Whether process `pid` exists (on this machine's `/proc`).
pub fn process_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// How far below the value written the kernel may round a memory limit (to its page size).
const PAGE_SLACK: u64 = 1 << 16;

/// Writes `value` to a group's file and reads it back: what took must be `value`, or at most
/// `slack` below it.
fn set(path: &Path, value: u64, slack: u64) -> io::Result<()> {
    let fail = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    std::fs::write(path, value.to_string()).map_err(fail)?;
    match read_num(path) {
        Some(took) if took <= value && value - took <= slack => Ok(()),
        took => Err(io::Error::other(format!(
            "{}: wrote {value}, the group holds {took:?}",
            path.display()
        ))),
    }
}

/// Whether this machine has swap (`SwapTotal` in `/proc/meminfo` above 0).
pub fn machine_has_swap() -> bool {
    std::fs::read_to_string("/proc/meminfo").is_ok_and(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("SwapTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .is_some_and(|kb| kb > 0)
    })
}

/// Whether `root` is a cgroup v1 (or hybrid) tree, where stockade makes the run's group: a
/// pure cgroup v2 root (`cgroup.controllers` there) is left to runsc, as before.
pub fn is_v1(root: &Path) -> bool {
    !root.join("cgroup.controllers").exists()
}

fn read_num(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The value of `key` in a `KEY VALUE` per line file (`memory.oom_control`, `cpu.stat`).
fn read_key(path: &Path, key: &str) -> Option<u64> {
    parse_key(&std::fs::read_to_string(path).ok()?, key)
}

fn parse_key(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The group is made below a root of made-up hierarchies (`cpu` and `cpuacct` one, as
    /// `cpu,cpuacct` here), with the limits written; a group already there is refused; the
    /// counters are read; removal leaves nothing.
    #[test]
    fn the_group_is_made_with_its_limits_read_and_removed() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("memory")).unwrap();
        std::fs::create_dir(root.path().join("cpu,cpuacct")).unwrap();
        std::os::unix::fs::symlink("cpu,cpuacct", root.path().join("cpu")).unwrap();
        std::os::unix::fs::symlink("cpu,cpuacct", root.path().join("cpuacct")).unwrap();
        std::fs::create_dir(root.path().join("pids")).unwrap();
        let plan = GroupPlan {
            path: "/stockade/run-1".into(),
            memory: Some(1 << 20),
            cpu: Some((50_000, 100_000)),
            count_pids: true,
        };
        let mut g = Group::create(&plan, root.path(), false).unwrap();
        let mem = root.path().join("memory/stockade/run-1");
        let cpu = root.path().join("cpu,cpuacct/stockade/run-1");
        let pids = root.path().join("pids/stockade/run-1");
        assert_eq!(g.dirs, [mem.clone(), cpu.clone(), pids.clone()]);
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(mem.join("memory.limit_in_bytes")), "1048576");
        assert_eq!(read(cpu.join("cpu.cfs_quota_us")), "50000");
        assert_eq!(read(cpu.join("cpu.cfs_period_us")), "100000");
        // Another run with the same path finds it there: refused, the first one untouched.
        let again = Group::create(&plan, root.path(), false).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists, "{again}");
        assert!(mem.is_dir());
        std::fs::write(mem.join("memory.max_usage_in_bytes"), "4096\n").unwrap();
        std::fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        std::fs::write(cpu.join("cpuacct.usage"), "5000000\n").unwrap();
        std::fs::write(cpu.join("cpu.stat"), "nr_periods 9\nnr_throttled 3\n").unwrap();
        std::fs::write(pids.join("pids.peak"), "7\n").unwrap();
        let u = g.usage();
        assert_eq!(
            (
                u.memory_peak,
                u.oom_kills,
                u.cpu_usec,
                u.cpu_throttled,
                u.pids_peak
            ),
            (Some(4096), 2, Some(5000), 3, Some(7))
        );
        // Regular files here (a real group's files are the kernel's): cleared for removal.
        for d in [&mem, &cpu, &pids] {
            for f in std::fs::read_dir(d).unwrap() {
                std::fs::remove_file(f.unwrap().path()).unwrap();
            }
        }
        g.remove(Duration::ZERO);
        assert!(!mem.exists() && !cpu.exists() && !pids.exists());
    }

    /// Memory and CPU in one hierarchy (`cpu,memory`): both limits are written there (they
    /// were merged under the first controller's name, and the CPU quota was never set: red
    /// team). Without a memsw file on a machine with swap the memory limit is refused.
    #[test]
    fn limits_of_controllers_sharing_a_hierarchy_are_all_written() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("cpu,memory")).unwrap();
        for c in ["cpu", "memory", "cpuacct"] {
            std::os::unix::fs::symlink("cpu,memory", root.path().join(c)).unwrap();
        }
        let plan = GroupPlan {
            path: "/stockade/run-3".into(),
            memory: Some(1 << 20),
            cpu: Some((50_000, 100_000)),
            count_pids: false,
        };
        let mut g = Group::create(&plan, root.path(), false).unwrap();
        let dir = root.path().join("cpu,memory/stockade/run-3");
        assert_eq!(g.dirs, std::slice::from_ref(&dir));
        assert_eq!(read_num(&dir.join("memory.limit_in_bytes")), Some(1 << 20));
        assert_eq!(read_num(&dir.join("cpu.cfs_quota_us")), Some(50_000));
        for f in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(f.unwrap().path()).unwrap();
        }
        g.remove(Duration::ZERO);
        let other = GroupPlan {
            path: "/stockade/run-4".into(),
            ..plan
        };
        let e = Group::create(&other, root.path(), true).unwrap_err();
        assert!(e.to_string().contains("swap"), "{e}");
    }

    /// Only the groups of runs whose process is gone are removed; a live one's, and anything
    /// not named as a run, stay.
    #[test]
    fn stale_groups_of_gone_processes_are_swept() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join("memory/stockade");
        for n in ["100-11", "100-22-2", "100-33", "not-a-run", "x"] {
            std::fs::create_dir_all(base.join(n)).unwrap();
        }
        sweep_stale(root.path(), &|pid| pid == 22);
        let mut left: Vec<String> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["100-22-2", "not-a-run", "x"]);
    }

    #[test]
    fn a_missing_hierarchy_a_limit_needs_is_refused() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("memory")).unwrap();
        let plan = GroupPlan {
            path: "/stockade/run-2".into(),
            memory: Some(1 << 20),
            cpu: Some((50_000, 100_000)),
            count_pids: false,
        };
        let e = Group::create(&plan, root.path(), false).unwrap_err();
        assert!(e.to_string().contains("`cpu` hierarchy"), "{e}");
        // Nothing was made for memory.
        assert!(!root.path().join("memory/stockade").exists());
        let memory_only = GroupPlan { cpu: None, ..plan };
        let mut g = Group::create(&memory_only, root.path(), false).unwrap();
        assert_eq!(g.dirs, [root.path().join("memory/stockade/run-2")]);
        std::fs::remove_file(
            root.path()
                .join("memory/stockade/run-2/memory.limit_in_bytes"),
        )
        .unwrap();
        g.remove(Duration::ZERO);
    }
}
