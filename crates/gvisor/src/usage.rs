//! What a gVisor run used, and which of its limits it reached.
//!
//! - **A root caller's run has a cgroup (v1) stockade makes** before runsc starts:
//!   `/stockade/<run id>` in the `memory` and `cpu`/`cpuacct` hierarchies, with the run's
//!   limits written by stockade. runsc joins a group it finds made and leaves its settings and
//!   the group itself alone (a group runsc makes, it removes with its counters when the run
//!   ends), so once runsc has ended the group's counters are read (the most memory, the OOM
//!   killer's kills, the CPU time, the throttled periods) and the group removed. The whole
//!   sandbox (the Sentry, its gofer, the command's memory, which is the Sentry's) is in it.
//! - **Every run is looked at while it lasts** through `runsc events` (the Sentry's own
//!   accounting: its tasks, the memory it gave the command, the CPU time), every
//!   [`SAMPLE_EVERY`]: the most tasks at once, and for an unprivileged caller (no cgroup) the
//!   most memory. The Sentry's `RLIMIT_NPROC` refuses a fork without a trace outside: a peak
//!   at the limit is the event, as for native's `RLIMIT_NPROC` (counted, not reported).
//!
//! Not seen: an unprivileged caller's allocation the Sentry's `RLIMIT_AS` refused (per
//! process, inside the Sentry; nothing outside records it); threads, which the Sentry's
//! `RLIMIT_NPROC` counts but its stats do not (a limit filled by threads has no event);
//! a burst between two looks. The CPU time comes from the group, or else from the kernel's
//! accounting of reaped processes (runsc's own figure is the whole machine's under
//! `--rootless`).
//!
//! Hand-written: no crate reads cgroup v1 counters or runsc's stats (the native backend's
//! cgroup module is the native backend's own).

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandbox::{LimitHit, LimitMechanism, Usage};

/// How often a run is looked at (`runsc events --interval`, whole seconds: one runsc for the
/// whole run, ~1 ms of CPU a look; a fresh `runsc events --stats` for each look would cost
/// ~25 ms). A run shorter than this may not be looked at: its CPU time then comes from the
/// kernel's accounting of reaped processes.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);

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
}

/// The limits a run's events are judged against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Judged {
    /// Bytes, and how the limit is enforced.
    pub memory: Option<(u64, LimitMechanism)>,
    /// Processes (`RLIMIT_NPROC` in the Sentry).
    pub pids: Option<u64>,
}

/// A run's cgroup, made: each hierarchy's directory (a hierarchy holding two controllers,
/// `cpu,cpuacct`, once).
#[derive(Debug)]
pub struct Group {
    dirs: Vec<PathBuf>,
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
        for (controller, needed) in [
            ("memory", plan.memory.is_some()),
            ("cpu", plan.cpu.is_some()),
            ("cpuacct", false),
        ] {
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
        let mut group = Group { dirs: Vec::new() };
        let relative = plan.path.trim_start_matches('/');
        for (real, controllers) in hierarchies {
            let dir = real.join(relative);
            let made = dir
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::create_dir(&dir));
            if let Err(e) = made {
                group.remove(Duration::ZERO);
                return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display())));
            }
            group.dirs.push(dir.clone());
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
    pub fn usage(&self) -> Usage {
        let mut u = Usage::default();
        for dir in &self.dirs {
            let num = |f: &str| read_num(&dir.join(f));
            let key = |f: &str, k: &str| read_key(&dir.join(f), k);
            if let Some(peak) = num("memory.max_usage_in_bytes") {
                u.memory_peak = Some(peak);
                u.oom_kills = key("memory.oom_control", "oom_kill").unwrap_or(0);
                u.memory_limit_hits = num("memory.failcnt").unwrap_or(0);
            }
            if let Some(ns) = num("cpuacct.usage") {
                u.cpu_usec = Some(ns / 1000);
            }
            if let Some(n) = key("cpu.stat", "nr_throttled") {
                u.cpu_throttled = n;
            }
        }
        u
    }

    /// Removes the group, waiting up to `patience` for the sandbox's last processes to leave
    /// it (runsc has ended; its sandbox may take a moment longer).
    pub fn remove(&mut self, patience: Duration) {
        let until = Instant::now() + patience;
        for dir in self.dirs.drain(..).rev() {
            loop {
                match std::fs::remove_dir(&dir) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound && Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    _ => break,
                }
            }
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

/// What the looks at a running sandbox saw. (Not its CPU time: runsc scales that by the
/// cgroup of the sandbox's process, which for `--rootless` is the whole machine's.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sampled {
    /// The most processes at once (the Sentry's count: its threads are not in it).
    pub tasks_peak: Option<u64>,
    /// The most memory the Sentry gave the command at once, bytes.
    pub memory_peak: Option<u64>,
}

impl Sampled {
    fn add(&mut self, (tasks, memory): (Option<u64>, Option<u64>)) {
        self.tasks_peak = self.tasks_peak.max(tasks);
        self.memory_peak = self.memory_peak.max(memory);
    }
}

/// The processes and memory in one line of `runsc events`
/// (`{"type":"stats","data":{"memory":{"usage":{"usage":B}},"pids":{"current":N}}}`).
pub fn parse_stats(line: &[u8]) -> Option<(Option<u64>, Option<u64>)> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    if v["type"] != "stats" {
        return None;
    }
    let d = &v["data"];
    Some((
        d["pids"]["current"].as_u64(),
        d["memory"]["usage"]["usage"].as_u64(),
    ))
}

/// Looks at a running sandbox while it lasts: `runsc events --interval N ID`, one runsc that
/// prints the sandbox's stats every [`SAMPLE_EVERY`] (started again should it end early, as
/// it does when asked before the container exists), read on a thread of its own until
/// [`Sampler::finish`] (or the sampler is dropped). The runsc dies with that thread, and so
/// with this process: it never outlives the run.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    /// The runsc printing the stats now. Only the thread waits for (reaps) it, after taking
    /// it out of here: a kill through this slot never reaches a reused pid.
    child: Arc<Mutex<Option<std::process::Child>>>,
    /// Wakes the thread between two runscs.
    wake: std::sync::mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<Sampled>>,
}

impl Sampler {
    /// `runsc` (`make` gives it with its global arguments, ready to start where it must)
    /// asked about container `id`.
    /// `None` when no thread can be made (the caller at its thread limit): the run goes on,
    /// unlooked at.
    pub fn start(make: impl Fn() -> Command + Send + 'static, id: String) -> Option<Sampler> {
        use std::io::BufRead;
        let stop = Arc::new(AtomicBool::new(false));
        let child: Arc<Mutex<Option<std::process::Child>>> = Arc::new(Mutex::new(None));
        let (wake, woken) = std::sync::mpsc::channel::<()>();
        let (stopped, slot) = (stop.clone(), child.clone());
        let interval = SAMPLE_EVERY.as_secs().max(1).to_string();
        let thread = std::thread::Builder::new()
            .name("gvisor-usage".into())
            .spawn(move || {
                let mut seen = Sampled::default();
                // The first look after one interval (a run shorter than that is never looked
                // at: its start pays nothing), then again soon after a runsc that ended.
                let mut pause = SAMPLE_EVERY;
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    woken.recv_timeout(pause)
                {
                    pause = Duration::from_millis(250);
                    let mut command = make();
                    command
                        .args(["events", "--interval", &interval, &id])
                        // Pipes, never /dev/null: runsc as root gives its streams to `nobody`.
                        .stdin(Stdio::piped())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped());
                    sys::mountns::die_with_parent_on_exec(&mut command);
                    let Ok(mut running) = command.spawn() else {
                        break;
                    };
                    let out = running.stdout.take();
                    {
                        let mut held = lock(&slot);
                        // Stopped meanwhile: `finish` looked before this one was there.
                        if stopped.load(Ordering::SeqCst) {
                            let _ = running.kill();
                        }
                        *held = Some(running);
                    }
                    if let Some(out) = out {
                        let lines = std::io::BufReader::new(out).split(b'\n');
                        for line in lines.map_while(Result::ok) {
                            if let Some(s) = parse_stats(line.trim_ascii()) {
                                seen.add(s);
                            }
                        }
                    }
                    let ended = lock(&slot).take();
                    if let Some(mut ended) = ended {
                        let _ = ended.kill();
                        let _ = ended.wait();
                    }
                }
                seen
            })
            .ok()?;
        Some(Sampler {
            stop,
            child,
            wake,
            thread: Some(thread),
        })
    }

    /// Stops looking (ends the runsc printing the stats); what was seen.
    pub fn finish(mut self) -> Sampled {
        self.end()
    }

    fn end(&mut self) -> Sampled {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.wake.send(());
        if let Some(running) = lock(&self.child).as_mut() {
            let _ = running.kill();
        }
        (self.thread.take())
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// The slot's lock, whatever a panicking holder left (it holds a process, or none).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The run's usage: its group's counters where it had one, what the looks saw, and the
/// kernel's accounting of reaped processes (`children`: CPU µs, largest resident bytes) for
/// what neither has.
pub fn usage(group: Option<Usage>, sampled: Sampled, children: Option<(u64, u64)>) -> Usage {
    let mut u = group.unwrap_or_default();
    u.pids_peak = u.pids_peak.or(sampled.tasks_peak);
    u.memory_peak = u
        .memory_peak
        .or(sampled.memory_peak)
        .or(children.map(|c| c.1));
    u.cpu_usec = u.cpu_usec.or(children.map(|c| c.0));
    u
}

/// The limits `usage` shows the run reached.
pub fn hits(limits: &Judged, usage: &Usage) -> Vec<LimitHit> {
    let mut out = Vec::new();
    if let Some((bytes, mechanism)) = limits.memory {
        if usage.oom_kills > 0 {
            out.push(LimitHit {
                code: sandbox::Code::LimitReached,
                limit: "memory",
                value: bytes,
                mechanism: mechanism.code(),
                detail: format!(
                    "the kernel killed the run's sandbox at the memory limit ({} OOM kill(s) in its cgroup)",
                    usage.oom_kills
                ),
            });
        }
    }
    if let Some(n) = limits.pids {
        if usage.pids_peak.is_some_and(|p| p >= n) {
            out.push(LimitHit {
                code: sandbox::Code::LimitReached,
                limit: "pids",
                value: n,
                mechanism: LimitMechanism::GvisorRlimitNproc.code(),
                detail: format!(
                    "the run had {n} processes at once, its limit (counted every {} s, threads not seen: the limit counts them too); forks beyond it failed",
                    SAMPLE_EVERY.as_secs()
                ),
            });
        }
    }
    out
}

/// Whether the memory limit ended the run: the OOM killer killed in its group and the run
/// ended by SIGKILL (the Sentry, killed, takes the command with it).
pub fn ended_by_memory(usage: &Usage, exit_code: i32) -> bool {
    usage.oom_kills > 0 && exit_code == 128 + libc::SIGKILL
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stats_line_gives_processes_and_memory() {
        let line = br#"{"type":"stats","id":"x","data":{"cpu":{"usage":{"total":2677553295}},"memory":{"usage":{"limit":0,"usage":69287936,"failcnt":0}},"pids":{"current":7}}}"#;
        assert_eq!(parse_stats(line), Some((Some(7), Some(69287936))));
        assert_eq!(parse_stats(br#"{"type":"oom"}"#), None);
        assert_eq!(parse_stats(b"container not found"), None);
    }

    #[test]
    fn the_peaks_are_kept_across_looks() {
        let mut s = Sampled::default();
        s.add((Some(5), Some(10)));
        s.add((Some(3), Some(20)));
        s.add((None, None));
        assert_eq!(
            s,
            Sampled {
                tasks_peak: Some(5),
                memory_peak: Some(20),
            }
        );
    }

    /// The group's counters first, then the looks, then the reaped processes; never runsc's
    /// CPU figure (the whole machine's under `--rootless`).
    #[test]
    fn usage_prefers_the_group_then_the_looks_then_the_reaped_processes() {
        let group = Usage {
            memory_peak: Some(100),
            cpu_usec: Some(7),
            oom_kills: 1,
            ..Usage::default()
        };
        let seen = Sampled {
            tasks_peak: Some(4),
            memory_peak: Some(50),
        };
        let u = usage(Some(group), seen, Some((1, 2)));
        assert_eq!(
            (u.memory_peak, u.cpu_usec, u.pids_peak, u.oom_kills),
            (Some(100), Some(7), Some(4), 1)
        );
        let u = usage(None, seen, Some((1, 2)));
        assert_eq!((u.memory_peak, u.cpu_usec), (Some(50), Some(1)));
        let u = usage(None, Sampled::default(), Some((1, 2)));
        assert_eq!(
            (u.memory_peak, u.cpu_usec, u.pids_peak),
            (Some(2), Some(1), None)
        );
    }

    #[test]
    fn hits_are_an_oom_kill_and_a_peak_at_the_process_limit() {
        let limits = Judged {
            memory: Some((128 << 20, LimitMechanism::GvisorCgroup)),
            pids: Some(64),
        };
        assert!(hits(&limits, &Usage::default()).is_empty());
        let u = Usage {
            oom_kills: 1,
            pids_peak: Some(64),
            ..Usage::default()
        };
        let h = hits(&limits, &u);
        assert_eq!(
            h.iter()
                .map(|h| (h.limit, h.value, h.mechanism))
                .collect::<Vec<_>>(),
            [
                ("memory", 128 << 20, "gvisor_cgroup"),
                ("pids", 64, "gvisor_rlimit_nproc")
            ]
        );
        let below = Usage {
            pids_peak: Some(63),
            ..Usage::default()
        };
        assert!(hits(&limits, &below).is_empty());
        assert!(ended_by_memory(&u, 137));
        assert!(!ended_by_memory(&u, 1));
    }

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
        let plan = GroupPlan {
            path: "/stockade/run-1".into(),
            memory: Some(1 << 20),
            cpu: Some((50_000, 100_000)),
        };
        let mut g = Group::create(&plan, root.path(), false).unwrap();
        let mem = root.path().join("memory/stockade/run-1");
        let cpu = root.path().join("cpu,cpuacct/stockade/run-1");
        assert_eq!(g.dirs, [mem.clone(), cpu.clone()]);
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
        let u = g.usage();
        assert_eq!(
            (u.memory_peak, u.oom_kills, u.cpu_usec, u.cpu_throttled),
            (Some(4096), 2, Some(5000), 3)
        );
        // Regular files here (a real group's files are the kernel's): cleared for removal.
        for d in [&mem, &cpu] {
            for f in std::fs::read_dir(d).unwrap() {
                std::fs::remove_file(f.unwrap().path()).unwrap();
            }
        }
        g.remove(Duration::ZERO);
        assert!(!mem.exists() && !cpu.exists());
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
