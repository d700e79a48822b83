//! Which gVisor platform runs commands here, found by trying each with the real command
//! surface (`runsc run` of a bundle that runs `true`), never from a version string.
//!
//! Trying costs a quarter of a second per platform that works and up to [`TRY_LIMIT`] for one
//! that hangs (KVM on a VM without nested virtualisation), so the answer is cached per runsc
//! build (its path, inode, size and modification time) in `/run/stockade/gvisor-platform`
//! for root, `$XDG_STATE_HOME/stockade/gvisor-platform` for other users. A cache entry only ever names one of the
//! platforms below, and a wrong one makes the run fail, never run weaker.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Serialize;

use crate::Error;

/// A gVisor platform: how the Sentry intercepts the command's system calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Platform {
    Systrap,
    Kvm,
    Ptrace,
}

impl Platform {
    /// In order of preference.
    pub const ALL: [Platform; 3] = [Platform::Systrap, Platform::Kvm, Platform::Ptrace];

    pub fn name(self) -> &'static str {
        match self {
            Platform::Systrap => "systrap",
            Platform::Kvm => "kvm",
            Platform::Ptrace => "ptrace",
        }
    }

    fn parse(s: &str) -> Option<Platform> {
        Platform::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// How long one platform may take to run `true`: a platform that hangs (KVM without nested
/// virtualisation) costs this once per runsc build, and a loaded machine needs headroom (3 s
/// was too little for ptrace beside a whole test suite: "fails on every platform").
const TRY_LIMIT: Duration = Duration::from_secs(10);

fn cache_file() -> Option<PathBuf> {
    // Test builds only: another file, so that a test sees the probe run (root's is
    // machine-wide). Compiled out of release builds (`debug_assertions`).
    #[cfg(debug_assertions)]
    if let Some(file) = std::env::var_os("STOCKADE_TEST_GVISOR_PLATFORM_CACHE") {
        return Some(PathBuf::from(file));
    }
    // Root: one machine-wide answer in root's own runtime directory (no user's HOME).
    if rustix::process::geteuid().is_root() {
        return Some(PathBuf::from("/run/stockade/gvisor-platform"));
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state"))
        })?;
    Some(state.join("stockade").join("gvisor-platform"))
}

/// What identifies a runsc build: the cache is valid for exactly this one.
fn build_key(runsc: &Path) -> Option<String> {
    let m = std::fs::metadata(runsc).ok()?;
    Some(format!(
        "{} {} {} {} {}",
        runsc.display(),
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime()
    ))
}

fn cached(key: &str) -> Option<Platform> {
    let file = cache_file()?;
    // Never through a symbolic link, and a small file only.
    let meta = std::fs::symlink_metadata(&file).ok()?;
    if !meta.file_type().is_file() || meta.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let (platform, rest) = text.trim_end().split_once(' ')?;
    (rest == key).then(|| Platform::parse(platform)).flatten()
}

fn remember(key: &str, platform: Platform) {
    let Some(file) = cache_file() else { return };
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    // A new file renamed over the name: a link planted there is replaced, never followed.
    if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) {
        use std::io::Write;
        if writeln!(tmp, "{} {key}", platform.name()).is_ok() {
            let _ = tmp.persist(&file);
        }
    }
}

/// Why a platform did not run `true`.
enum Failed {
    /// The caller's process or thread limit (`ulimit -u`, a pids cgroup): runsc could not be
    /// started, or could not start its own threads. Says nothing about the platform.
    Limit(std::io::Error),
    /// Anything else, as said to the user.
    Other(String),
}

impl From<String> for Failed {
    fn from(s: String) -> Failed {
        Failed::Other(s)
    }
}

/// Whether runsc's last words say it could not make a process or thread (Go's runtime:
/// "failed to create new OS thread", a fork's `EAGAIN`).
fn says_limit(err: &str) -> bool {
    let err = err.to_lowercase();
    err.contains("failed to create new os thread")
        || err.contains("resource temporarily unavailable")
}

/// Runs `true` under `platform`: `Ok` when it exits 0 in time.
fn try_platform(runsc: &Path, platform: Platform) -> Result<(), Failed> {
    let dir = tempfile::Builder::new()
        .prefix("stockade-gvisor-probe-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let rootless = !rustix::process::geteuid().is_root();
    // In a network namespace of the probe's own, as a run's runsc (`network`): the probe's
    // sandbox is `runsc do`'s, the caller's whole tree as root inside, and its control socket
    // would let any local user run a command in it. Dying with this process.
    let (held, _) = crate::network::hold(None).map_err(|e| match e.raw_os_error() {
        // The caller's process limit (the holder is a process).
        Some(libc::EAGAIN) => Failed::Limit(e),
        _ => Failed::Other(format!(
            "could not make a network namespace for the probe: {e}"
        )),
    })?;
    let mut c = Command::new(runsc);
    held.join_on_exec(&mut c);
    sys::mountns::die_with_parent_on_exec(&mut c);
    // `--ignore-cgroups`: the probe needs no limits, and `runsc do` names its cgroup after its
    // pid: a root run killed before cleaning up leaves `runsc-PID` behind, and an unprivileged
    // probe that draws the same pid later fails on it ("cgroup.procs: permission denied").
    c.arg(format!("--root={}", dir.path().join("state").display()))
        .arg(format!("--platform={}", platform.name()))
        .arg("--network=none")
        .arg("--ignore-cgroups");
    if rootless {
        c.arg("--rootless");
    }
    c.args(["do", "--", "true"])
        .current_dir(dir.path())
        // Pipes, never /dev/null: runsc as root gives its standard streams to `nobody`.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().map_err(|e| match e.raw_os_error() {
        Some(libc::EAGAIN) => Failed::Limit(e),
        _ => Failed::Other(e.to_string()),
    })?;
    let started = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                let err = err.trim();
                if says_limit(err) {
                    return Err(Failed::Limit(std::io::Error::from_raw_os_error(
                        libc::EAGAIN,
                    )));
                }
                let last = err.lines().last().unwrap_or(err);
                return Err(format!("{status}: {last}").into());
            }
            Ok(None) if started.elapsed() > TRY_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("did not finish within {} s", TRY_LIMIT.as_secs()).into());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string().into()),
        }
    }
}

/// The first platform that runs `true` with `runsc`, or why none does.
pub fn choose(runsc: &Path) -> Result<Platform, Error> {
    let key = build_key(runsc);
    if let Some(p) = key.as_deref().and_then(cached) {
        return Ok(p);
    }
    let mut failures = Vec::new();
    for p in Platform::ALL {
        if p == Platform::Kvm && !Path::new("/dev/kvm").exists() {
            failures.push("kvm: no /dev/kvm".to_string());
            continue;
        }
        match try_platform(runsc, p) {
            Ok(()) => {
                if let Some(key) = &key {
                    remember(key, p);
                }
                return Ok(p);
            }
            // Not a property of runsc or of the platform: said as what it is (the caller's
            // limit, with its fix), never as "gVisor is unavailable".
            Err(Failed::Limit(cause)) => {
                return Err(Error::Io {
                    what: format!(
                        "start `{} do true` (which platform runs commands here)",
                        runsc.display()
                    ),
                    cause,
                })
            }
            Err(Failed::Other(e)) => failures.push(format!("{}: {e}", p.name())),
        }
    }
    Err(Error::Unavailable {
        cause: format!(
            "`{} do true` fails on every platform ({})",
            runsc.display(),
            failures.join("; ")
        ),
        fix: crate::RUNSC_FIX.into(),
    })
}
