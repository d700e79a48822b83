//! Runs corpus cases: for each, the control in one fresh fixture (it must escape), then the
//! attack through `stockade run` in another (it must not), a few cases at a time.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::corpus::{Case, ESCAPED_PREFIX};
use crate::fixture::{Fixture, Needs, PathState, PATH};

/// Set by the Ctrl-C handler: no new case starts and running commands are killed.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Installs a SIGINT/SIGTERM/SIGHUP handler that sets [`INTERRUPTED`], so the runner stops,
/// kills what it started and removes its fixtures before exiting.
pub fn install_interrupt_handler() {
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
}

/// The line the wrapper prints after the snippet, followed by ` rc=<status>`.
const DONE: &str = "__STOCKADE_SELFTEST_DONE__";

/// Captured output kept per stream; beyond it only the byte count grows.
const OUTPUT_KEEP: usize = 4 << 20;

/// Default seconds per run.
const DEFAULT_TIMEOUT: u64 = 30;

/// What a case came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The control escaped and the attack did not.
    Contained,
    /// The attack showed an escape signal inside stockade.
    Escaped,
    /// The case cannot run on this machine or for this caller (the detail says why).
    NotApplicable,
    /// The control did not escape either: the case proves nothing (a corpus defect).
    Vacuous,
    /// The attack did not run (stockade refused unexpectedly, or the snippet never finished).
    Error,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Self::Contained => "contained",
            Self::Escaped => "ESCAPED",
            Self::NotApplicable => "n/a",
            Self::Vacuous => "VACUOUS",
            Self::Error => "ERROR",
        }
    }
}

/// The result of one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub id: String,
    pub category: String,
    pub title: String,
    pub verdict: Verdict,
    pub detail: String,
    pub millis: u64,
}

/// Counts of a whole selftest.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub total: usize,
    pub contained: usize,
    pub escaped: usize,
    pub not_applicable: usize,
    pub vacuous: usize,
    pub error: usize,
}

impl Counts {
    pub fn of(results: &[CaseResult]) -> Self {
        let n = |v: Verdict| results.iter().filter(|r| r.verdict == v).count();
        Self {
            total: results.len(),
            contained: n(Verdict::Contained),
            escaped: n(Verdict::Escaped),
            not_applicable: n(Verdict::NotApplicable),
            vacuous: n(Verdict::Vacuous),
            error: n(Verdict::Error),
        }
    }

    /// Nothing escaped, nothing vacuous, nothing failed to run.
    pub fn passed(&self) -> bool {
        self.escaped == 0 && self.vacuous == 0 && self.error == 0
    }
}

/// How to run the corpus.
#[derive(Debug, Clone)]
pub struct Config {
    /// The stockade binary (the selftest runs itself).
    pub stockade: PathBuf,
    /// Cases at once.
    pub parallel: usize,
    /// `stockade run --backend NAME` (`None`: the default, native).
    pub backend: Option<String>,
}

/// The caller's effective uid.
pub fn caller_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Is the caller root?
pub fn caller_is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Runs `cases`, calling `progress` as each finishes; results are in corpus order.
pub fn run_cases(
    cases: &[Case],
    config: &Config,
    progress: &(dyn Fn(&CaseResult) + Sync),
) -> Vec<CaseResult> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<CaseResult>>> = Mutex::new(vec![None; cases.len()]);
    thread::scope(|scope| {
        for _ in 0..config.parallel.clamp(1, 8) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(case) = cases.get(i) else { break };
                if INTERRUPTED.load(Ordering::SeqCst) {
                    break;
                }
                let result = run_case(case, config);
                progress(&result);
                if let Ok(mut r) = results.lock() {
                    if let Some(slot) = r.get_mut(i) {
                        *slot = Some(result);
                    }
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect()
}

/// Runs one case: requirements, control, attack.
pub fn run_case(case: &Case, config: &Config) -> CaseResult {
    let start = Instant::now();
    let (verdict, detail) = match judge(case, config) {
        Ok(v) => v,
        Err(e) => (Verdict::Error, e),
    };
    CaseResult {
        id: case.id.clone(),
        category: case.category.clone(),
        title: case.title.clone(),
        verdict,
        detail,
        millis: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

/// The first unmet requirement, if any.
fn unmet(case: &Case) -> Option<String> {
    let root = caller_is_root();
    for r in &case.requires {
        match r.as_str() {
            "root" if !root => return Some("needs a root caller".into()),
            "unprivileged" if root => return Some("needs an unprivileged caller".into()),
            "ipv6" if std::net::TcpListener::bind("[::1]:0").is_err() => {
                return Some("needs IPv6 loopback on the host".into())
            }
            _ => {}
        }
        if let Some(tool) = r.strip_prefix("tool:") {
            if find_tool(tool).is_none() {
                return Some(format!("needs {tool} (not installed)"));
            }
        }
        if let Some(path) = r.strip_prefix("path:") {
            if !Path::new(path).exists() {
                return Some(format!("needs {path} (not present)"));
            }
        }
    }
    None
}

fn find_tool(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    PATH.split(':').map(|d| Path::new(d).join(name)).find(|p| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// A finished command.
struct Ran {
    status: Option<ExitStatus>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// Bytes of output (both streams), including what was not kept.
    bytes: u64,
    timed_out: bool,
    /// What reached the pseudo-terminal of a `terminal` case.
    terminal: Vec<u8>,
}

impl Ran {
    fn code(&self) -> i32 {
        match self.status {
            Some(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
            None => -1,
        }
    }

    fn text(&self) -> String {
        format!(
            "{}{}",
            String::from_utf8_lossy(&self.stdout),
            String::from_utf8_lossy(&self.stderr)
        )
    }

    /// The snippet's status, when the wrapper printed it.
    fn snippet_rc(&self) -> Option<i32> {
        let out = String::from_utf8_lossy(&self.stdout);
        out.lines().rev().find_map(|l| {
            l.strip_prefix(DONE)
                .and_then(|r| r.trim().strip_prefix("rc="))
                .and_then(|n| n.trim().parse().ok())
        })
    }
}

/// Wraps a snippet: the `escaped` function, the snippet in a subshell, then [`DONE`] and its
/// status on a line of their own.
fn wrap(script: &str) -> String {
    format!(
        "escaped() {{ printf '{ESCAPED_PREFIX}%s\\n' \"$*\"; }}\n(\n{script}\n)\n__rc=$?\nprintf '\\n{DONE} rc=%s\\n' \"$__rc\"\n"
    )
}

/// `argv` under `/bin/sh -c 'exec "$@" REDIRECT'` when the case has redirections.
fn with_redirect(redirect: Option<&str>, argv: Vec<OsString>) -> Vec<OsString> {
    match redirect {
        Some(r) => {
            let mut v: Vec<OsString> = vec![
                "/bin/sh".into(),
                "-c".into(),
                format!("exec \"$@\" {r}").into(),
                "sh".into(),
            ];
            v.extend(argv);
            v
        }
        None => argv,
    }
}

/// A fresh pseudo-terminal: the master, and the terminal side opened without making it
/// anyone's controlling terminal yet.
fn open_terminal() -> Result<(std::fs::File, std::fs::File), String> {
    use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
    fn failed(what: &'static str) -> impl Fn(rustix::io::Errno) -> String {
        move |e| format!("cannot {what} a pseudo-terminal: {e}")
    }
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).map_err(failed("open"))?;
    grantpt(&master).map_err(failed("grant"))?;
    unlockpt(&master).map_err(failed("unlock"))?;
    let name = ptsname(&master, Vec::new()).map_err(failed("name"))?;
    let flags = rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC;
    let slave = rustix::fs::open(name.as_c_str(), flags, rustix::fs::Mode::empty())
        .map_err(failed("open the terminal side of"))?;
    Ok((std::fs::File::from(master), std::fs::File::from(slave)))
}

/// `argv` in a new session whose controlling terminal is the terminal on its stdin, with
/// stdin `/dev/null` again: `setsid --ctty --wait /bin/sh -c 'exec "$@" </dev/null' sh ARGV`.
fn under_terminal(argv: &[OsString]) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![
        "setsid".into(),
        "--ctty".into(),
        "--wait".into(),
        "/bin/sh".into(),
        "-c".into(),
        "exec \"$@\" </dev/null".into(),
        "sh".into(),
    ];
    v.extend(argv.iter().cloned());
    v
}

/// Runs `argv` in `cwd` (the case's workspace) with a clean environment (`PATH`, the fixture's `HOME`, the case's
/// variables), in its own process group, killed (the whole group) after `timeout` or on
/// Ctrl-C. A `terminal` case runs under a fresh pseudo-terminal ([`under_terminal`]).
fn execute(
    argv: &[OsString],
    fx: &Fixture,
    cwd: &Path,
    case: &Case,
    timeout: Duration,
) -> Result<Ran, String> {
    let terminal = if case.terminal {
        Some(open_terminal()?)
    } else {
        None
    };
    let argv = if case.terminal {
        under_terminal(argv)
    } else {
        argv.to_vec()
    };
    let Some((program, args)) = argv.split_first() else {
        return Err("empty command".into());
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &fx.home)
        .env("LANG", "C.UTF-8")
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for (k, v) in &case.env {
        cmd.env(k, fx.substitute(v));
    }
    let master = match terminal {
        Some((master, slave)) => {
            cmd.stdin(Stdio::from(slave));
            Some(master)
        }
        None => {
            cmd.stdin(Stdio::null());
            None
        }
    };
    let spawned = cmd.spawn();
    // The runner's copy of the terminal side goes now: the master reads end of file (EIO)
    // once the run's copies are gone.
    drop(cmd);
    let mut child =
        spawned.map_err(|e| format!("cannot start {}: {e}", program.to_string_lossy()))?;
    let total = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let out = reader(child.stdout.take(), total.clone());
    let err = reader(child.stderr.take(), total.clone());
    let term = reader(master, std::sync::Arc::default());
    let (status, timed_out) = wait(&mut child, timeout);
    let collect =
        |rx: mpsc::Receiver<Vec<u8>>| rx.recv_timeout(Duration::from_secs(3)).unwrap_or_default();
    let (stdout, stderr, terminal) = (collect(out), collect(err), collect(term));
    Ok(Ran {
        status,
        stdout,
        stderr,
        bytes: total.load(Ordering::SeqCst),
        timed_out,
        terminal,
    })
}

fn reader(
    pipe: Option<impl Read + Send + 'static>,
    total: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    if let Some(mut pipe) = pipe {
        thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = vec![0u8; 65536];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        total.fetch_add(n as u64, Ordering::SeqCst);
                        if kept.len() < OUTPUT_KEEP {
                            kept.extend_from_slice(&buf[..n]);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(kept);
        });
    } else {
        let _ = tx.send(Vec::new());
    }
    rx
}

fn kill_group(child: &Child) {
    if let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0)) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Waits for the child, killing its process group after `timeout` or on Ctrl-C; returns the
/// status and whether it timed out. What the command left behind in its group is killed too.
fn wait(child: &mut Child, timeout: Duration) -> (Option<ExitStatus>, bool) {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                kill_group(child);
                return (Some(status), false);
            }
            Ok(None) => {}
            Err(_) => return (None, false),
        }
        if start.elapsed() > timeout || INTERRUPTED.load(Ordering::SeqCst) {
            kill_group(child);
            let _ = child.kill();
            return (child.wait().ok(), true);
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// One run of a case (control or attack) in its own fresh fixture, and what it showed.
struct Observed {
    ran: Ran,
    /// The escape signals seen, described.
    shown: Vec<String>,
    /// The escape signals not seen, described.
    missing: Vec<String>,
}

fn observe(case: &Case, config: &Config, attack: bool) -> Result<Observed, String> {
    let placeholders = case.placeholders();
    let needs = Needs::from_placeholders(
        &placeholders,
        !case.escape.listener_hit.is_empty() || !case.escape.listener_saw.is_empty(),
    );
    let mut fx = Fixture::new(needs, &config.stockade).map_err(|e| e.to_string())?;
    if case.requires.iter().any(|r| r == "ipv6") && !fx.has_ipv6() {
        return Err("IPv6 loopback listener could not be started".into());
    }
    let timeout = Duration::from_secs(case.timeout.unwrap_or(DEFAULT_TIMEOUT));
    let ws = match &case.workspace {
        Some(w) => {
            let w = PathBuf::from(fx.substitute(w));
            std::fs::create_dir_all(&w)
                .map_err(|e| format!("cannot make the workspace {}: {e}", w.display()))?;
            w
        }
        None => fx.ws.clone(),
    };
    if let Some(setup) = &case.setup {
        let argv: Vec<OsString> = vec!["/bin/sh".into(), "-c".into(), fx.substitute(setup).into()];
        let ran = execute(&argv, &fx, &ws, case, timeout)?;
        if ran.code() != 0 {
            return Err(format!(
                "setup failed (exit {}): {}",
                ran.code(),
                excerpt(&ran.text())
            ));
        }
    }
    let before: Vec<(String, PathState)> = case
        .escape
        .host_changed
        .iter()
        .map(|p| {
            let p = fx.substitute(p);
            let s = fx.snapshot(&p);
            (p, s)
        })
        .collect();
    // A root caller's container run goes as the workspace's owner and refuses a workspace only
    // root owns: the case's workspace is given to an id no account has, as a user's checkout
    // is theirs, every file of it (so the workspace's files are kept by the policy, never by
    // root's permissions). The rest stays the root caller's own (its home, `outside`).
    if attack && !case.on_host && container_as_root(config) {
        crate::fixture::give_to(&ws, CONTAINER_OWNER);
    }
    let argv: Vec<OsString> = if attack && !case.on_host {
        let script = fx.substitute(&case.script);
        let mut v: Vec<OsString> = Vec::new();
        // A container engine's store is the caller's own for every case (rootless Podman keeps
        // it below the data home): a store per case's home would put each case's containers
        // in every other case's view, below the shared /var/tmp, and the run's check refuses
        // a writable mount it cannot account for.
        if let Some(data) = engine_data_home(config) {
            v.push("/usr/bin/env".into());
            v.push(format!("XDG_DATA_HOME={}", data.display()).into());
        }
        v.extend([
            config.stockade.clone().into(),
            "run".into(),
            "--workspace".into(),
            ws.clone().into(),
            "--timeout".into(),
            (timeout.as_secs() + 5).to_string().into(),
        ]);
        if let Some(b) = &config.backend {
            v.push("--backend".into());
            v.push(b.into());
            // Rootless Podman on cgroup v1 refuses a memory limit it cannot hold whole: the
            // cases run without the default one (the resources cases name theirs).
            let root = rustix::process::geteuid().is_root();
            if b == "podman" && !root && !case.args.iter().any(|a| a == "--memory") {
                v.push("--memory".into());
                v.push("0".into());
            }
        }
        v.extend(case.args.iter().map(|a| fx.substitute(a).into()));
        v.push("--shell".into());
        v.push(if case.raw { script } else { wrap(&script) }.into());
        v
    } else {
        let script = if attack {
            fx.substitute(&case.script)
        } else {
            fx.substitute(case.control_script())
        };
        vec!["/bin/sh".into(), "-c".into(), wrap(&script).into()]
    };
    let redirect = case.redirect.as_ref().map(|r| fx.substitute(r));
    let argv = with_redirect(redirect.as_deref(), argv);
    let ran = execute(&argv, &fx, &ws, case, timeout + Duration::from_secs(10))?;
    if let Some(ms) = case.settle_ms {
        thread::sleep(Duration::from_millis(ms));
    }
    let (mut shown, mut missing) = (Vec::new(), Vec::new());
    let mut note = |seen: bool, what: String| {
        if seen {
            shown.push(what);
        } else {
            missing.push(what);
        }
    };
    let text = ran.text();
    for needle in &case.escape.output_has {
        let needle = fx.substitute(needle);
        note(text.contains(&needle), format!("output has {needle:?}"));
    }
    if let Some(rc) = case.escape.rc {
        note(ran.snippet_rc() == Some(rc), format!("snippet status {rc}"));
    }
    for (path, state) in &before {
        note(
            fx.snapshot(path) != *state,
            format!("host path {path} changed"),
        );
    }
    // A datagram sent just before the snippet ended may not have been read yet by the
    // listener thread (a loaded machine): the datagram listeners are flushed (every datagram
    // sent before is read), then a stream's hit is waited for up to a second. (Datagram
    // cases, `listener_saw` of a DNS-style query among them, waited on `listener_hit` only,
    // and a control without one went vacuous in CI.)
    if !fx.flush_datagrams(Duration::from_secs(20)) {
        return Err(format!(
            "{}: the datagram listeners did not read a barrier within 20 s",
            case.id
        ));
    }
    let mut waited = Duration::ZERO;
    let (hits, seen) = loop {
        let (hits, seen) = fx.listener_log();
        let all = case.escape.listener_hit.iter().all(|l| hits.contains(l));
        if all || waited >= Duration::from_secs(1) {
            break (hits, seen);
        }
        thread::sleep(Duration::from_millis(50));
        waited += Duration::from_millis(50);
    };
    for l in &case.escape.listener_hit {
        note(hits.contains(l), format!("loopback listener {l} reached"));
    }
    let seen = String::from_utf8_lossy(&seen);
    for needle in &case.escape.listener_saw {
        let needle = fx.substitute(needle);
        note(
            seen.contains(&needle),
            format!("a listener received {needle:?}"),
        );
    }
    let on_terminal = String::from_utf8_lossy(&ran.terminal);
    for needle in &case.escape.terminal_has {
        let needle = fx.substitute(needle);
        note(
            on_terminal.contains(&needle),
            format!("the caller's terminal showed {needle:?}"),
        );
    }
    if case.escape.host_process_killed {
        note(fx.host_process_killed(), "host process killed".into());
    }
    if let Some(limit) = case.escape.output_over {
        note(
            ran.bytes > limit,
            format!("more than {limit} bytes of output ({} seen)", ran.bytes),
        );
    }
    drop(fx);
    Ok(Observed {
        ran,
        shown,
        missing,
    })
}

fn excerpt(text: &str) -> String {
    let t: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if t.chars().count() > 240 {
        format!("{}…", t.chars().take(240).collect::<String>())
    } else {
        t
    }
}

/// The first `stockade: error[...]` line of a run's output, if any.
fn stockade_error(text: &str) -> Option<&str> {
    text.lines()
        .find(|l| l.starts_with("stockade: error["))
        .or_else(|| text.lines().find(|l| l.contains("\"code\":\"E_")))
}

/// The owner of a root caller's fixtures under a container backend: an id no account has.
pub const CONTAINER_OWNER: u32 = 0x7ff0_0000;

/// Whether the runs are a root caller's under a container backend.
fn container_as_root(config: &Config) -> bool {
    matches!(config.backend.as_deref(), Some("podman" | "docker"))
        && rustix::process::geteuid().is_root()
}

/// The caller's data home (`$XDG_DATA_HOME`, else `~/.local/share`) under a container backend.
fn engine_data_home(config: &Config) -> Option<PathBuf> {
    if !matches!(config.backend.as_deref(), Some("podman" | "docker")) {
        return None;
    }
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
}

fn judge(case: &Case, config: &Config) -> Result<(Verdict, String), String> {
    if let Some(why) = unmet(case) {
        return Ok((Verdict::NotApplicable, why));
    }
    if let Some((backend, why)) = config
        .backend
        .as_ref()
        .and_then(|b| case.not_under.get(b).map(|why| (b, why)))
    {
        return Ok((
            Verdict::NotApplicable,
            format!("not under {backend}: {why}"),
        ));
    }
    let control = observe(case, config, false)?;
    if INTERRUPTED.load(Ordering::SeqCst) {
        return Ok((Verdict::Error, "interrupted".into()));
    }
    if !control.missing.is_empty() {
        let why = if !caller_is_root() && case.refused_unprivileged.is_some() {
            case.refused_unprivileged.clone()
        } else {
            case.host_may_refuse.clone()
        };
        let seen = format!(
            "control did not show: {}; control output: {}",
            control.missing.join(", "),
            excerpt(&control.ran.text())
        );
        return Ok(match why {
            Some(why) => (
                Verdict::NotApplicable,
                format!("the host already refuses this: {why} ({seen})"),
            ),
            None => (Verdict::Vacuous, seen),
        });
    }
    let attack = observe(case, config, true)?;
    if INTERRUPTED.load(Ordering::SeqCst) {
        return Ok((Verdict::Error, "interrupted".into()));
    }
    let ran = &attack.ran;
    let text = ran.text();
    if !attack.shown.is_empty() {
        return Ok((
            Verdict::Escaped,
            format!(
                "attack showed: {}; output: {}",
                attack.shown.join(", "),
                excerpt(&text)
            ),
        ));
    }
    let refused = !case.on_host && ran.code() == 125 && ran.snippet_rc().is_none();
    if refused {
        let line = stockade_error(&text).unwrap_or("").to_string();
        if let Some(code) = &case.refusal {
            if text.contains(code.as_str()) {
                return Ok((Verdict::Contained, format!("refused: {}", excerpt(&line))));
            }
        }
        if let Some(code) = &case.unavailable {
            if text.contains(code.as_str()) {
                return Ok((
                    Verdict::NotApplicable,
                    format!(
                        "this machine cannot set up the protection: {}",
                        excerpt(&line)
                    ),
                ));
            }
        }
        return Ok((
            Verdict::Error,
            format!("stockade refused to run the attack: {}", excerpt(&text)),
        ));
    }
    let rc = ran.snippet_rc();
    if rc.is_none() && !case.may_not_finish && !case.raw {
        return Ok((
            Verdict::Error,
            format!(
                "the snippet did not run to the end (exit {}{}): {}",
                ran.code(),
                if ran.timed_out { ", timed out" } else { "" },
                excerpt(&text)
            ),
        ));
    }
    let how = match rc {
        Some(rc) => format!("snippet status {rc}"),
        None => format!("run ended with exit {}", ran.code()),
    };
    let violation = text
        .lines()
        .find(|l| l.starts_with("stockade: violation[") || l.starts_with("stockade: error["))
        .map(|l| format!("; {}", excerpt(l)))
        .unwrap_or_default();
    Ok((Verdict::Contained, format!("{how}{violation}")))
}

/// The cases that match the filters (a category, and case ids when any are given).
pub fn select(cases: &[Case], category: Option<&str>, ids: &BTreeSet<String>) -> Vec<Case> {
    cases
        .iter()
        .filter(|c| category.is_none_or(|cat| c.category == cat))
        .filter(|c| ids.is_empty() || ids.contains(&c.id))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]
    use super::*;

    /// A stand-in for `stockade` that contains nothing: `run ... --shell S` runs `sh -c S`.
    fn fake_stockade(dir: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("fake-stockade");
        std::fs::write(
            &path,
            "#!/bin/sh\nwhile [ \"$1\" != --shell ]; do shift; done\nexec /bin/sh -c \"$2\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn case(toml_text: &str) -> Case {
        let mut c: Case = toml::from_str(toml_text).unwrap();
        c.category = "t".into();
        c
    }

    #[test]
    fn an_uncontained_attack_is_escaped_and_a_harmless_control_is_vacuous() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            stockade: fake_stockade(dir.path()),
            backend: None,
            parallel: 1,
        };
        let read = case(
            "id = \"t.read\"\ntitle = \"t\"\nwhy = \"w\"\nscript = 'cat \"$HOME/.ssh/id_rsa\"'\n[escape]\noutput_has = [\"ssh-{{MARKER}}\"]\n",
        );
        let r = run_case(&read, &config);
        assert_eq!(r.verdict, Verdict::Escaped, "{r:?}");
        let write = case(
            "id = \"t.write\"\ntitle = \"t\"\nwhy = \"w\"\nscript = 'echo x >> \"$HOME/.bashrc\"'\n[escape]\nhost_changed = [\"home/.bashrc\"]\n",
        );
        assert_eq!(run_case(&write, &config).verdict, Verdict::Escaped);
        let vacuous = case(
            "id = \"t.vacuous\"\ntitle = \"t\"\nwhy = \"w\"\nscript = 'true'\n[escape]\noutput_has = [\"ESCAPED:never\"]\n",
        );
        assert_eq!(run_case(&vacuous, &config).verdict, Verdict::Vacuous);
        let counts = Counts::of(&[run_case(&read, &config)]);
        assert!(!counts.passed());
    }

    /// A case's `workspace` is the directory of the setup, the control and the attack, and
    /// the run's `--workspace` (a fake stockade that runs the attack only when its
    /// `--workspace` is its directory and the setup ran there): a directory below
    /// `{{HOST_TMP}}` is made, and the host's `/tmp` directory goes with the fixture.
    #[test]
    fn a_case_workspace_below_host_tmp_is_where_the_runs_happen() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("fake-stockade");
        std::fs::write(
            &fake,
            "#!/bin/sh\nwhile [ \"$1\" != --workspace ]; do shift; done\n\
             [ \"$2\" = \"$PWD\" ] && [ -f ../by-setup ] || exit 7\n\
             while [ \"$1\" != --shell ]; do shift; done\nexec /bin/sh -c \"$2\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let config = Config {
            stockade: fake,
            backend: None,
            parallel: 1,
        };
        let c = case(
            "id = \"t.tmp\"\ntitle = \"t\"\nwhy = \"w\"\nworkspace = \"{{HOST_TMP}}/ws\"\nsetup = 'echo s > ../by-setup'\nscript = 'echo x > ../planted'\n[escape]\nhost_changed = [\"{{HOST_TMP}}/planted\"]\n",
        );
        let r = run_case(&c, &config);
        assert_eq!(r.verdict, Verdict::Escaped, "{r:?}");
        assert!(r.detail.contains("/planted changed"), "{r:?}");
        let left = std::fs::read_dir(crate::fixture::HOST_TMP_PARENT)
            .unwrap()
            .flatten()
            .filter(|e| {
                let n = e.file_name();
                n.to_string_lossy().starts_with("stockade-selftest-")
                    && e.path().join("planted").exists()
            })
            .count();
        assert_eq!(left, 0, "a HOST_TMP directory was left in /tmp");
    }

    /// A `terminal` case runs with a pseudo-terminal as the controlling terminal (stdin,
    /// stdout and stderr elsewhere): writing to `/dev/tty` reaches it, writing to stdout
    /// does not.
    #[test]
    fn a_terminal_case_sees_what_reached_the_terminal_only() {
        if find_tool("setsid").is_none() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            stockade: fake_stockade(dir.path()),
            backend: None,
            parallel: 1,
        };
        let head = "title = \"t\"\nwhy = \"w\"\nrequires = [\"tool:setsid\"]\nterminal = true\n";
        let tty = case(&format!(
            "id = \"t.tty\"\n{head}script = 'echo tty-$((6*7)) >/dev/tty; test ! -t 0'\n[escape]\nterminal_has = [\"tty-42\"]\nrc = 0\n"
        ));
        let r = run_case(&tty, &config);
        assert_eq!(r.verdict, Verdict::Escaped, "{r:?}");
        let stdout = case(&format!(
            "id = \"t.stdout\"\n{head}script = 'echo tty-$((6*7))'\n[escape]\nterminal_has = [\"tty-42\"]\n"
        ));
        let r = run_case(&stdout, &config);
        assert_eq!(r.verdict, Verdict::Vacuous, "{r:?}");
    }
}
