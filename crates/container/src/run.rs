//! A planned container run, run: the default image made if the engine lacks it, the engine's
//! client started with the command's streams relayed (under an output limit or
//! `--sanitize-output`, as for every backend), the run's time limit, cancel and signals
//! passed to the container, and its end put in the contract's terms.

use std::io::IsTerminal;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sandbox::{ContainerRun, Enforcement, Launch, Outcome, Planned, RunError};

use crate::{flags, image, Engine};

/// How long a command told to end (SIGTERM) has before the container is killed.
const GRACE: Duration = Duration::from_secs(2);
const TICK: Duration = Duration::from_millis(200);

pub(crate) struct ContainerPlanned {
    pub(crate) engine: Engine,
    pub(crate) binary: PathBuf,
    pub(crate) target: flags::Target,
    pub(crate) lowered: flags::Lowered,
    /// The mask files bound into the container: kept until it ends.
    pub(crate) files: tempfile::TempDir,
    pub(crate) enforcement: Enforcement,
    /// The engine's `PATH` (system directories only).
    pub(crate) engine_path: String,
    pub(crate) cwd_fallback: Option<sandbox::CwdFallback>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) output_limit: Option<u64>,
    pub(crate) linked_secrets: Vec<sandbox::LinkedSecret>,
    /// Rootless Podman's memory limit: a per-process `RLIMIT_DATA`, which memfd and shared
    /// memory escape: run only under `--allow-degraded` (and recorded as skipped).
    pub(crate) partial_memory: Option<u64>,
    /// `--net none` and `--net proxy`: the gate's directory (see [`flags::GATE`]) and, under
    /// the proxy, where it listens inside.
    pub(crate) gate: Option<(PathBuf, Option<std::net::SocketAddrV4>)>,
    /// Who the staged git dirs' copies belong to (a root caller's command's id; `None`: the
    /// caller, rootless Podman's uid 0 inside).
    pub(crate) copy_owner: Option<(u32, u32)>,
}

/// How long the check inside may take to reach the gate (the engine's start of the
/// container included; a first run imports the image before, not counted here).
const GATE_WAIT: Duration = Duration::from_secs(60);

/// What the engine's client waiter or a cancel sent: the client's end, or `None` to cancel.
type Ended = Option<std::io::Result<ExitStatus>>;

/// The gate's two FIFOs, opened before the container starts (read and write, so neither side
/// blocks on the other's open).
struct Gate {
    ready: OwnedFd,
    go: OwnedFd,
    /// `--net proxy`: where the proxy listens inside.
    addr: Option<std::net::SocketAddrV4>,
}

impl Gate {
    fn open(dir: &std::path::Path, addr: Option<std::net::SocketAddrV4>) -> Result<Gate, RunError> {
        use rustix::fs::{Mode, OFlags};
        let open = |name: &str, more: OFlags| {
            rustix::fs::open(
                dir.join(name),
                OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW | more,
                Mode::empty(),
            )
            .map_err(|e| RunError::io("open the run's gate", e.into()))
        };
        Ok(Gate {
            ready: open("ready", OFlags::NONBLOCK)?,
            go: open("go", OFlags::NONBLOCK)?,
            addr,
        })
    }

    /// Tells the check inside to go on (`go`) or to refuse the run (anything else). Never
    /// blocks: a FIFO someone else filled (the command's id can reach it) fails the gate.
    fn answer(&self, word: &str) -> Result<(), RunError> {
        let line = format!("{word}\n");
        match rustix::io::write(&self.go, line.as_bytes()) {
            Ok(n) if n == line.len() => Ok(()),
            Ok(_) | Err(rustix::io::Errno::AGAIN) => Err(RunError::Unavailable {
                what: "the proxy's listener in the container",
                cause: "the gate's FIFO was full: something else wrote to it".into(),
                fix: "run again; --net none, or --backend native or gvisor for --net proxy".into(),
            }),
            Err(e) => Err(RunError::io("answer the check at the run's gate", e.into())),
        }
    }
}

/// How the wait at the gate ended.
enum GateEnd {
    /// The container's network namespace was found (under the proxy, its listener opened
    /// there): its counters, when they could be opened (see `sys::net_tries`).
    Open(Option<sys::net_tries::Watch>),
    /// The engine's client ended (or the run was cancelled) first.
    Ended(Ended),
    /// The run's time limit came first.
    Deadline,
    /// The caller was interrupted (this signal).
    Interrupted(i32),
}

/// A process of this run's container in the network and user namespaces the check named at
/// the gate: one that sees the gate's own `ready` (this FIFO, by device and inode, at
/// [`flags::GATE`] below its root, never followed through a link) and, for a root caller's
/// engine (no user namespace of its own), in this process's user namespace. The workspace's
/// owner reaches the container's processes (same uid: `/proc/PID/root`) and could write
/// another namespace's identities to the gate first, one of a process of its own (red team of
/// issue 33: root's report then counted a decoy namespace's tries); that process neither sees
/// this FIFO at that path nor, unprivileged, makes a network namespace in root's user
/// namespace.
fn container_process(net: u64, user: u64, ready: &OwnedFd, root_engine: bool) -> Option<i32> {
    let ino = |pid: &str, kind: &str| -> Option<u64> {
        rustix::fs::stat(format!("/proc/{pid}/ns/{kind}").as_str())
            .ok()
            .map(|st| st.st_ino)
    };
    if root_engine && ino("self", "user") != Some(user) {
        return None;
    }
    let fifo = rustix::fs::fstat(ready).ok()?;
    let sees_gate = |pid: &str| {
        let at = format!("/proc/{pid}/root{}/ready", flags::GATE);
        rustix::fs::statat(
            rustix::fs::CWD,
            at.as_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .is_ok_and(|st| (st.st_dev, st.st_ino) == (fifo.st_dev, fifo.st_ino))
    };
    std::fs::read_dir("/proc").ok()?.find_map(|e| {
        let name = e.ok()?.file_name();
        let pid = name.to_str()?;
        let n: i32 = pid.parse().ok()?;
        (ino(pid, "net") == Some(net) && ino(pid, "user") == Some(user) && sees_gate(pid))
            .then_some(n)
    })
}

fn libc_pid(pid: u32) -> Option<i32> {
    i32::try_from(pid).ok()
}

fn relay_pipe() -> Result<(OwnedFd, OwnedFd), RunError> {
    let (r, w) =
        std::io::pipe().map_err(|e| RunError::io("create a pipe for the command's streams", e))?;
    Ok((r.into(), w.into()))
}

/// Ends the container should this process die before the run's end (SIGKILL, a crash): the
/// engine keeps a container running when its client dies (Docker's daemon, Podman's conmon),
/// and the command would run on unsupervised, past its time limit and never swept. A shell
/// reads a pipe only this process writes: `done` (when dropped, on every way out of the run)
/// lets it go; end of file without it makes it end the container (`ENGINE rm --force`, Podman
/// without its ten-second stop timeout; under `--keep`, `ENGINE kill`, which keeps it), again
/// two seconds later for a creation that was under way, then remove the run's private files
/// (its environment file, seccomp profile, staged git dirs and stream FIFOs, which this
/// process's end would have removed: `rm -rf` as GNU rm does it, not following links and not
/// crossing into another filesystem). It is not this process's child nor in
/// its process group (the shell started here leaves it running in the background and exits),
/// and it ignores the terminal's signals: a kill of the group, of the process tree (by parent
/// pid, as agent hosts' tree-kill does) or Ctrl-C leaves it to do its work. A kill of the whole
/// cgroup (`systemctl stop`) ends it too (README: "Backends").
struct Watchdog {
    tell: Option<std::io::PipeWriter>,
}

/// The watchdog's shell: `$1` is the run's private files, the rest the engine's command that
/// ends the container. The background
/// subshell gets the pipe through fd 3 (a non-interactive shell gives a background list
/// /dev/null as its stdin otherwise); the shell itself exits at once.
const WATCHDOG: &str = "exec 3<&0; files=$1; shift; (trap '' INT TERM HUP; IFS= read -r said; [ \"$said\" = done ] && exit 0; \"$@\" >/dev/null 2>&1; sleep 2; \"$@\" >/dev/null 2>&1; exec rm -rf --one-file-system -- \"$files\" >/dev/null 2>&1) <&3 3<&- & exit 0";

impl Watchdog {
    fn start(planned: &ContainerPlanned, keep: bool) -> Result<Watchdog, RunError> {
        use std::os::unix::process::CommandExt;
        let refused = |e: std::io::Error| RunError::io("start the container's watchdog", e);
        // Both ends close on exec: only the shell's stdin (a duplicate) reaches it.
        let (read, tell) = std::io::pipe().map_err(refused)?;
        let end: &[&str] = match (keep, planned.engine) {
            (true, _) => &["kill"],
            // Podman's `rm --force` waits for the stop timeout (SIGTERM first) by default.
            // `--volumes`: with it its anonymous volume, a review run's view (see
            // `flags::View`), which Docker keeps otherwise.
            (false, Engine::Podman) => &["rm", "--force", "--volumes", "--time", "0"],
            (false, Engine::Docker) => &["rm", "--force", "--volumes"],
        };
        // stockade's own environment (the engine's store and daemon address), with the
        // engine's PATH; none of the command's variables.
        let mut shell = Command::new("/bin/sh")
            .args(["-c", WATCHDOG, "stockade-watchdog"])
            .arg(planned.files.path())
            .arg(&planned.binary)
            .args(end)
            .arg(&planned.target.name)
            .env("PATH", &planned.engine_path)
            .stdin(Stdio::from(read))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Out of the caller's process group.
            .process_group(0)
            .spawn()
            .map_err(refused)?;
        // It exits at once, leaving the watchdog to init (or the nearest subreaper).
        shell.wait().map_err(refused)?;
        Ok(Watchdog { tell: Some(tell) })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(mut tell) = self.tell.take() {
            let _ = std::io::Write::write_all(&mut tell, b"done\n");
        }
    }
}

/// The caller's streams that are not its terminal when others are, under a run's own terminal
/// (see [`flags::STREAMS`]): a FIFO each, in a directory of the run's only this process's user
/// may reach (below the run's private files; under a root caller, the directory and FIFOs are
/// the command's id's, which alone may open them inside).
struct Redirected {
    /// 0 stdin, 1 stdout, 2 stderr.
    which: Vec<usize>,
    dir: PathBuf,
    /// The directory's `--mount`.
    mount: String,
}

impl Redirected {
    fn has(&self, i: usize) -> bool {
        self.which.contains(&i)
    }

    /// A redirected output's FIFO: its read end (relayed to the caller's stream, without
    /// blocking: see `stream::relay::relay_to_sink_until`) and a write end (held for the
    /// client's time, so the relay sees no end before the command has opened its own). The
    /// read end is opened first, so that the write end's open does not wait.
    fn open_output(&self, i: usize) -> Result<(OwnedFd, OwnedFd), RunError> {
        use rustix::fs::{Mode, OFlags};
        let refused = |e: rustix::io::Errno| RunError::io("open the run's stream FIFO", e.into());
        let path = self.dir.join(i.to_string());
        let base = OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let read = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::NONBLOCK | base,
            Mode::empty(),
        )
        .map_err(refused)?;
        let write =
            rustix::fs::open(&path, OFlags::WRONLY | base, Mode::empty()).map_err(refused)?;
        Ok((read, write))
    }

    /// A redirected stdin's copy waiting for the check to open its FIFO (a run that ended
    /// before the command started) is let go: a reader's open completes its open, and it ends
    /// at the first write or at once.
    fn release_input(&self) {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        drop(rustix::fs::open(self.dir.join("0"), flags, Mode::empty()));
    }
}

impl ContainerPlanned {
    /// The FIFOs of the caller's streams `which` (see [`Redirected`]).
    fn redirect(&self, which: &[usize]) -> Result<Redirected, RunError> {
        use rustix::fs::{FileType, Mode, CWD};
        let made = || -> std::io::Result<PathBuf> {
            let hidden = self.files.path().join("io");
            rustix::fs::mkdir(&hidden, Mode::from_raw_mode(0o700))?;
            let dir = hidden.join("streams");
            rustix::fs::mkdir(&dir, Mode::from_raw_mode(0o700))?;
            let mut owned = vec![dir.clone()];
            for i in which {
                let fifo = dir.join(i.to_string());
                rustix::fs::mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0)?;
                owned.push(fifo);
            }
            if let Some((uid, gid)) = self.copy_owner {
                let (uid, gid) = (
                    rustix::process::Uid::from_raw(uid),
                    rustix::process::Gid::from_raw(gid),
                );
                for p in owned {
                    rustix::fs::chown(&p, Some(uid), Some(gid))?;
                }
            }
            Ok(dir)
        };
        let dir = made().map_err(|e| RunError::io("make the run's stream FIFOs", e))?;
        let mount = flags::streams_mount(&dir, &self.target).map_err(|e| RunError::Plan {
            code: sandbox::Code::ProtectionUnavailable,
            message: format!("the run's streams cannot be bound: {e}"),
            hint: Some(
                "run with --no-tty, or with all of stdin, stdout and stderr the terminal or none"
                    .into(),
            ),
        })?;
        Ok(Redirected {
            which: which.to_vec(),
            dir,
            mount,
        })
    }

    fn engine_command(&self) -> Command {
        let mut c = Command::new(&self.binary);
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    /// `ENGINE kill --signal SIG NAME` (errors ignored: the container may be gone).
    fn signal(&self, sig: &str) {
        let _ = self
            .engine_command()
            .args(["kill", "--signal", sig, &self.target.name])
            .status();
    }

    fn remove(&self) {
        let _ = self
            .engine_command()
            .args(["rm", "--force", "--volumes", &self.target.name])
            .status();
    }

    /// What the cached image id is valid for: the engine's build, the store the environment
    /// names, the image's name.
    fn image_key(&self) -> String {
        let env = |n: &str| std::env::var(n).unwrap_or_default().replace('\n', " ");
        format!(
            "{} uid={} home={} data={} storage={} host={}{} context={} image={}",
            crate::client::build_key(&self.binary).unwrap_or_default(),
            rustix::process::geteuid().as_raw(),
            env("HOME"),
            env("XDG_DATA_HOME"),
            env("CONTAINERS_STORAGE_CONF"),
            env("CONTAINER_HOST"),
            env("DOCKER_HOST"),
            env("DOCKER_CONTEXT"),
            self.target.image,
        )
    }

    /// The default image's id, made first when the engine lacks it, and whether it came from
    /// the cache (unchecked).
    fn ensure_image(&self) -> Result<(String, bool), RunError> {
        let key = self.image_key();
        if let Some(id) = crate::client::cached_image(self.engine, &key) {
            return Ok((id, true));
        }
        let rt = self.target.runtime.as_deref();
        if let Some(id) = image::id(
            self.engine,
            &self.binary,
            rt,
            &self.target.image,
            &self.engine_path,
        ) {
            crate::client::remember_image(self.engine, &key, Some(&id));
            return Ok((id, false));
        }
        let unavailable = |cause: String| RunError::Unavailable {
            what: "the container engine's image",
            cause,
            fix: format!(
                "see the cause; `{} info` shows whether the engine works{}",
                self.engine.name(),
                if self.engine == Engine::Docker {
                    " (is `dockerd` running?)"
                } else {
                    ""
                }
            ),
        };
        let tarball = image::tarball(&self.target.host_root)
            .map_err(|e| unavailable(format!("cannot make the image's tarball: {e}")))?;
        image::import(
            &self.binary,
            &self.target.image,
            &tarball,
            &self.engine_path,
        )
        .map_err(|failed| match failed {
            // At the caller's process limit: that is the error, not the engine's.
            image::ImportFailed::Start(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                RunError::io("start the container engine", e)
            }
            image::ImportFailed::Start(e) => {
                unavailable(format!("cannot start {}: {e}", self.binary.display()))
            }
            image::ImportFailed::Failed(cause) => unavailable(format!(
                "`{} import` of {} failed: {cause}",
                self.engine.name(),
                self.target.image
            )),
        })?;
        let id = image::id(
            self.engine,
            &self.binary,
            rt,
            &self.target.image,
            &self.engine_path,
        )
        .ok_or_else(|| {
            unavailable(format!(
                "{} has no {} after importing it",
                self.engine.name(),
                self.target.image
            ))
        })?;
        crate::client::remember_image(self.engine, &key, Some(&id));
        Ok((id, false))
    }

    /// Waits for the check inside to reach the gate (its namespaces' identities on `ready`).
    /// `--net none`: opens the counters of its network namespace (`sys::net_tries`) through a
    /// process found in it. `--net proxy`: finds the container's first process through the
    /// engine, checks that its namespaces are the ones the check named, opens the proxy's
    /// listener in its network namespace (entering rootless Podman's user namespace first)
    /// and starts the proxy on it; the counters too (what went around the proxy).
    /// Ends early ([`GateEnd`]) when the client ends, the run is cancelled or interrupted, or
    /// its time limit comes first.
    fn open_gate(
        &self,
        gate: &Gate,
        proxy: Option<&mut sandbox::StartProxy>,
        rx: &mpsc::Receiver<Ended>,
        deadline: Option<Instant>,
        process_signals: bool,
    ) -> Result<GateEnd, RunError> {
        let failed = |cause: String| RunError::Unavailable {
            what: if gate.addr.is_some() {
                "the proxy's listener in the container"
            } else {
                "the run's gate in the container"
            },
            cause,
            fix: "see the cause; run again, or --backend native or gvisor".into(),
        };
        let until = Instant::now() + GATE_WAIT;
        let mut said = Vec::new();
        while !said.contains(&b'\n') {
            match rx.try_recv() {
                Ok(ended) => return Ok(GateEnd::Ended(ended)),
                Err(mpsc::TryRecvError::Disconnected) => return Ok(GateEnd::Ended(None)),
                Err(mpsc::TryRecvError::Empty) => {}
            }
            if let Some(sig) = process_signals.then(sys::parent::interrupted).flatten() {
                return Ok(GateEnd::Interrupted(sig));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(GateEnd::Deadline);
            }
            if Instant::now() >= until || said.len() > 4096 {
                return Err(failed(format!(
                    "the check inside did not reach the gate within {} s",
                    GATE_WAIT.as_secs()
                )));
            }
            let mut fds = [rustix::event::PollFd::new(
                &gate.ready,
                rustix::event::PollFlags::IN,
            )];
            let tick = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 50_000_000,
            };
            let _ = rustix::event::poll(&mut fds, Some(&tick));
            let mut buf = [0u8; 512];
            match rustix::io::read(&gate.ready, &mut buf) {
                Ok(n) => said.extend_from_slice(&buf[..n]),
                Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(failed(format!("reading the gate: {e}"))),
            }
        }
        let said = String::from_utf8_lossy(&said).into_owned();
        let ns_id = |word: Option<&str>, kind: &str| -> Option<u64> {
            word?
                .strip_prefix(kind)?
                .strip_prefix(":[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        };
        let mut words = said.split_whitespace();
        let (Some(net_id), Some(user_id)) =
            (ns_id(words.next(), "net"), ns_id(words.next(), "user"))
        else {
            return Err(failed(format!(
                "the check said {:?} at the gate",
                said.trim()
            )));
        };
        let Some(addr) = gate.addr else {
            // `--net none`: only the counters, which say no more than what the command tried
            // on the network it does not have; a process of the container in the namespaces
            // named is found among /proc's (no round trip to the engine: about 35 ms for
            // Docker's inspect, 63 ms for Podman's, here). None: something else wrote to the
            // gate, and the run is refused (as under the proxy).
            let Some(pid) =
                container_process(net_id, user_id, &gate.ready, !self.engine.rootless())
            else {
                return Err(failed(format!(
                    "no process of the container is in the namespaces named at the gate (net {net_id}, user {user_id}): something other than the check inside wrote to it (a process of the workspace's owner?)"
                )));
            };
            return Ok(GateEnd::Open(sys::net_tries::Watch::open(pid, false)));
        };
        let out = Command::new(&self.binary)
            .args(["inspect", "--format", "{{.State.Pid}}", &self.target.name])
            .env("PATH", &self.engine_path)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|e| RunError::io("ask the engine for the container's process", e))?;
        let pid: u32 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| failed(format!("{} inspect gave no process", self.engine.name())))?;
        // The namespaces of that process, checked to be the ones the check inside is in (a
        // process id the engine gave could have been reused since).
        let open_ns = |kind: &str| -> Result<(OwnedFd, u64), RunError> {
            let f = std::fs::File::open(format!("/proc/{pid}/ns/{kind}"))
                .map_err(|e| RunError::io(format!("open the container's {kind} namespace"), e))?;
            let ino = rustix::fs::fstat(&f)
                .map_err(|e| RunError::io("read a namespace's identity", e.into()))?
                .st_ino;
            Ok((OwnedFd::from(f), ino))
        };
        let (netns, net_ino) = open_ns("net")?;
        let (userns, user_ino) = open_ns("user")?;
        if net_ino != net_id || user_ino != user_id {
            return Err(failed(format!(
                "the process {pid} the engine named is in other namespaces than the check inside (net {net_ino}, user {user_ino}; the check: {net_id}, {user_id})"
            )));
        }
        let listener = sys::netns::listen_in(
            self.engine.rootless().then_some(userns.as_fd()),
            netns.as_fd(),
            (addr.ip().octets(), addr.port()),
        )
        .map_err(|e| failed(format!("opening {addr} inside: {e}")))?;
        match proxy {
            Some(start) => start(listener).map_err(failed)?,
            None => return Err(failed("no proxy to serve it".into())),
        }
        let watch = libc_pid(pid).and_then(|p| sys::net_tries::Watch::open(p, true));
        Ok(GateEnd::Open(watch))
    }

    /// After the engine's own failure (exit 125) on a cached image id: whether the image is
    /// gone from the engine's store (removed since it was cached). The entry is dropped then,
    /// so the next run makes the image anew.
    fn image_gone(&self) -> bool {
        let rt = self.target.runtime.as_deref();
        let gone = image::id(
            self.engine,
            &self.binary,
            rt,
            &self.target.image,
            &self.engine_path,
        )
        .is_none();
        if gone {
            crate::client::remember_image(self.engine, &self.image_key(), None);
        }
        gone
    }
}

impl Planned for ContainerPlanned {
    fn cwd_fallback(&self) -> Option<sandbox::CwdFallback> {
        self.cwd_fallback.clone()
    }

    fn enforcement(&self) -> Enforcement {
        self.enforcement.clone()
    }

    fn run(self: Box<Self>, launch: Launch) -> Result<Outcome, RunError> {
        let Launch {
            io,
            options,
            mut proxy,
            before_command,
        } = launch;
        let gate = match &self.gate {
            Some((_, Some(_))) if proxy.is_none() => return Err(RunError::no_proxy()),
            Some((dir, addr)) => Some(Gate::open(dir, *addr)?),
            None => None,
        };
        let mut net_watch: Option<sys::net_tries::Watch> = None;
        // A masked file's other name is readable through a bind of its directory as through
        // the host kernel: refused (or recorded) by every backend's run.
        let mut skipped = sandbox::refuse_linked_secrets(&self.linked_secrets, options)?;
        if let Some(bytes) = self.partial_memory {
            let what = format!(
                "the memory limit ({} MiB): rootless Podman on cgroup v1 has no cgroup of its own, and the per-process RLIMIT_DATA it gives instead does not count memfd or shared memory",
                bytes >> 20
            );
            if !options.allow_degraded {
                return Err(RunError::Plan {
                    code: sandbox::Code::ProtectionUnavailable,
                    message: format!("{what} cannot be enforced"),
                    hint: Some("--memory 0 (no limit), --allow-degraded (the per-process bound, recorded as skipped), run as root (the container's cgroup), or use --backend native".into()),
                });
            }
            skipped.push(what);
        }
        let (image_id, cached_image) = self.ensure_image()?;
        // The copies of existing git dirs' top levels (`workspace::gitstage`), made as late as
        // can be: what the host's git does meanwhile is in them.
        if !self.target.staged.is_empty() {
            // Only this process's user lists the copies' directory.
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o711)
                .create(workspace::gitstage::Staged::copies(&self.target.stage_dir))
                .map_err(|e| RunError::io("make the staged git dirs' directory", e))?;
        }
        let snapshots = workspace::gitstage::stage_all(
            &self.target.staged,
            &self.target.stage_dir,
            self.copy_owner,
        )
        .map_err(|(gitdir, e)| RunError::Plan {
            code: sandbox::Code::WorkspaceChanged,
            message: format!(
                "{}: its top level could not be staged for the run: {e}",
                gitdir.display()
            ),
            hint: Some("run again".into()),
        })?;
        // A caller whose streams are its terminal (an interactive shell, an agent's TUI) gives
        // the run a terminal of its own: a pseudo-terminal of stockade's, which the engine's
        // client has for its streams and relays into the container's (`--tty`), and stockade
        // relays to and from the caller's as the other backends do (sanitized, bounded,
        // resized, `~.`). The engine's terminal is all three of the container's streams: one
        // of the caller's that is not its terminal (`> file`, `2>log`, `< input`, a pipe) is a
        // FIFO of the run's instead, which the check inside makes the command's (see
        // [`flags::STREAMS`]).
        let own_terminal = stream::terminal::caller_terminal(&io, options);
        let redirected = match &own_terminal {
            Some(t) if t.streams != [true; 3] => {
                let which: Vec<usize> = (0..3).filter(|&i| !t.streams[i]).collect();
                Some(self.redirect(&which)?)
            }
            _ => None,
        };
        let fifo = |i: usize| redirected.as_ref().filter(|r| r.has(i));
        let sanitize = options.sanitize_output;
        let limit = self.output_limit;
        // A redirected stdout's FIFO is held open for writing here until the client has
        // ended (the command's open may come later: its reader must not see an end before);
        // a redirected stderr's is the client's own stderr (its words go where the command's
        // errors go), which holds it so.
        let (out_r, out_w) = match fifo(1) {
            Some(r) => r.open_output(1)?,
            None => relay_pipe()?,
        };
        let (err_r, err_w) = match fifo(2) {
            Some(r) => r.open_output(2)?,
            None => relay_pipe()?,
        };
        let thread_refused =
            |e: std::io::Error| RunError::io("start a thread relaying the command's streams", e);
        // A redirected output's relay ends at the FIFO's end, or once the container has gone
        // and what it holds has been read (`stop_w` dropped): a process of the command's id
        // outside the container could hold a write end open for ever (red team).
        let (stop_r, stop_w) = relay_pipe()?;
        // Why a redirected stdin's copy could not open its FIFO, when it could not.
        let input_failed: std::sync::Arc<std::sync::Mutex<Option<(PathBuf, std::io::Error)>>> =
            Default::default();
        let relay = |from: OwnedFd, sink: sandbox::Sink, name: &'static str, fifo: bool| {
            let stop = (fifo.then(|| stop_r.try_clone()).transpose())
                .map_err(|e| RunError::io("create a pipe for the command's streams", e))?;
            std::thread::Builder::new()
                .spawn(move || match stop {
                    Some(stop) => {
                        stream::relay::relay_to_sink_until(from, sink, limit, name, sanitize, stop)
                    }
                    None => stream::relay::relay_to_sink(from, sink, limit, name, sanitize),
                })
                .map_err(thread_refused)
        };
        let relays = [
            relay(out_r, io.stdout, "stdout", fifo(1).is_some())?,
            relay(err_r, io.stderr, "stderr", fifo(2).is_some())?,
        ];
        drop(stop_r);
        let terminal = match &own_terminal {
            Some(t) => Some(
                sys::parent::new_pty(&t.settings, &t.size)
                    .map_err(|e| RunError::io("make the run's terminal", e))?,
            ),
            None => None,
        };
        // Else stdin is copied as it comes; a terminal is never read here (the command reads
        // end of file: `--no-tty`, as natively).
        let keyboard = match &io.stdin {
            sandbox::Input::Process => std::io::stdin().is_terminal(),
            sandbox::Input::Fd(from) => from.as_fd().is_terminal(),
            sandbox::Input::Null => false,
        };
        let input = match io.stdin {
            _ if keyboard || (terminal.is_some() && fifo(0).is_none()) => None,
            sandbox::Input::Process if stream::relay::stdin_is_live() => {
                std::io::stdin().as_fd().try_clone_to_owned().ok()
            }
            sandbox::Input::Fd(from) => Some(from),
            sandbox::Input::Process | sandbox::Input::Null => None,
        };
        let mut args = self.lowered.args.clone();
        let keep = options.keep;
        let run_at = args.iter().position(|a| a == "run").unwrap_or(0);
        if keep {
            args.retain(|a| a != "--rm");
        }
        let stdin = match (&terminal, input) {
            (Some((_, slave)), input) => {
                args.insert(run_at + 1, "--tty".into());
                args.insert(run_at + 1, "--interactive".into());
                if let Some(r) = &redirected {
                    let paths: Vec<String> = (r.which.iter())
                        .map(|i| format!("{}/{i}", flags::STREAMS))
                        .collect();
                    args.insert(run_at + 1, r.mount.clone());
                    args.insert(run_at + 1, "--mount".into());
                    args.insert(
                        run_at + 1,
                        format!("--env=STOCKADE_CHECK_STREAMS={}", paths.join(" ")),
                    );
                }
                // A redirected stdin: copied into its FIFO once the check has opened it (the
                // thread's open waits for that; nothing to copy gives the command an end of
                // file). An open that fails leaves the check waiting at its own open, before
                // the command: the supervision below ends the container, and the run says why.
                if let Some(r) = fifo(0) {
                    let path = r.dir.join("0");
                    let failed = std::sync::Arc::clone(&input_failed);
                    std::thread::Builder::new()
                        .spawn(move || {
                            use rustix::fs::{Mode, OFlags};
                            let flags = OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
                            let opened = loop {
                                match rustix::fs::open(&path, flags, Mode::empty()) {
                                    Err(rustix::io::Errno::INTR) => continue,
                                    other => break other,
                                }
                            };
                            match opened {
                                Ok(to) => {
                                    if let Some(from) = input {
                                        stream::relay::relay_input(from, to);
                                    }
                                }
                                Err(e) => {
                                    if let Ok(mut slot) = failed.lock() {
                                        *slot = Some((path, e.into()));
                                    }
                                }
                            }
                        })
                        .map_err(thread_refused)?;
                }
                // Docker's client sizes the container's terminal only once it has started
                // (Podman's gives the size at its creation): the check inside waits for it,
                // up to a second, so the command's first look sees the caller's window (a
                // loaded CI saw `stty size` answer "0 0"). Not for a window of no size.
                if own_terminal
                    .as_ref()
                    .is_some_and(|t| t.size.ws_row > 0 && t.size.ws_col > 0)
                {
                    args.insert(run_at + 1, "--env=STOCKADE_CHECK_TTY=1".into());
                }
                Stdio::from(
                    slave
                        .try_clone()
                        .map_err(|e| RunError::io("hand the run's terminal to the engine", e))?,
                )
            }
            (None, Some(from)) => {
                args.insert(run_at + 1, "--interactive".into());
                let (in_r, in_w) = relay_pipe()?;
                std::thread::Builder::new()
                    .spawn(move || stream::relay::relay_input(from, in_w))
                    .map_err(thread_refused)?;
                Stdio::from(in_r)
            }
            (None, None) => Stdio::null(),
        };
        sandbox::wait_before_command(before_command)?;
        #[cfg(debug_assertions)]
        test_pause("STOCKADE_TEST_CONTAINER_PAUSE");
        let group = self.target.group.as_ref().map(make_group).transpose()?;
        let watchdog = Watchdog::start(&self, keep)?;
        let mut cmd = Command::new(&self.binary);
        // The client dies with this process (the watchdog ends its container then).
        sys::mountns::die_with_parent_on_exec(&mut cmd);
        cmd.args(&args)
            .env("PATH", &self.engine_path)
            .envs(self.lowered.env.iter().map(|(k, v)| (k, v)))
            .stdin(stdin);
        let mut out_hold = None;
        match &terminal {
            // The client's own words (the engine's errors) go through the pipes still; the
            // command's streams are the container's terminal, which the client relays to its
            // stdin's, of which it is the session leader (it follows the window's size).
            Some((_, slave)) => {
                let out = slave
                    .try_clone()
                    .map_err(|e| RunError::io("hand the run's terminal to the engine", e))?;
                cmd.stdout(Stdio::from(out)).stderr(Stdio::from(err_w));
                if fifo(1).is_some() {
                    out_hold = Some(out_w);
                } else {
                    drop(out_w);
                }
                sys::parent::session_on_terminal(&mut cmd, 0);
            }
            None => {
                cmd.stdout(Stdio::from(out_w)).stderr(Stdio::from(err_w));
            }
        }
        if io.process_signals {
            let _ = sys::parent::catch_signals();
        }
        let started = Instant::now();
        let (tx, rx) = mpsc::channel::<Ended>();
        let mut child = cmd.spawn().map_err(|e| RunError::Setup {
            stage: "start the container engine",
            path: Some(self.binary.clone()),
            cause: e,
            explained: None,
        })?;
        // The engine's client holds the write ends now: the relays end with it.
        drop(cmd);
        // The run's terminal: the client holds its slave side (ours goes, so that the relay
        // sees the terminal's end when the client has gone); the caller's is relayed to and
        // from its master side.
        let attached = match (terminal, &own_terminal) {
            (Some((master, slave)), Some(caller)) => {
                drop(slave);
                let attached = stream::terminal::attach(
                    master,
                    caller,
                    limit.filter(|_| options.limit_terminal),
                    sanitize,
                    io.process_signals,
                    io.control.clone(),
                );
                match attached {
                    Ok(a) => Some(a),
                    Err(e) => {
                        // Fail closed: the command never runs without the terminal it was given.
                        let _ = child.kill();
                        let _ = child.wait();
                        self.remove();
                        return Err(RunError::io("attach the command's terminal", e));
                    }
                }
            }
            _ => None,
        };
        let pid = child.id();
        let exit_tx = tx.clone();
        let waiter = std::thread::Builder::new()
            .spawn(move || {
                let _ = exit_tx.send(Some(child.wait()));
            })
            .map_err(|e| {
                // Nothing waits for the client: it and its container end here.
                if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
                self.remove();
                RunError::io("start a thread waiting for the engine", e)
            })?;
        let gate_tx = tx.clone();
        let cancel_tx = tx;
        io.control.on_cancel(Box::new(move || {
            let _ = cancel_tx.send(None);
        }));
        let deadline = self.timeout.and_then(|t| started.checked_add(t));
        let mut timed_out = false;
        let mut interrupted: Option<i32> = None;
        let mut killed_at: Option<Instant> = None;
        if let Some(gate) = &gate {
            let opened = self
                .open_gate(gate, proxy.as_mut(), &rx, deadline, io.process_signals)
                .and_then(|end| match end {
                    GateEnd::Open(watch) => gate.answer("go").map(|()| GateEnd::Open(watch)),
                    other => Ok(other),
                });
            match opened {
                Ok(GateEnd::Open(watch)) => net_watch = watch,
                // Its end came during the gate: the loop below takes it.
                Ok(GateEnd::Ended(ended)) => {
                    let _ = gate_tx.send(ended);
                }
                Ok(GateEnd::Deadline) => {
                    timed_out = true;
                    self.signal("TERM");
                    killed_at = Some(Instant::now());
                }
                Ok(GateEnd::Interrupted(sig)) => {
                    interrupted = Some(sig);
                    self.signal("TERM");
                    killed_at = Some(Instant::now());
                }
                Err(e) => {
                    // The container and its client go first; the check inside, if it is still
                    // waiting, is told last (and never waited for).
                    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
                        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                    }
                    self.remove();
                    let _ = waiter.join();
                    drop(watchdog);
                    let _ = gate.answer("no");
                    return Err(e);
                }
            }
        }
        drop(gate_tx);
        let mut killed_hard = false;
        let status = loop {
            let now = Instant::now();
            for sig in io.control.take_signals() {
                self.signal(&sig.to_string());
            }
            // A redirected stdin that cannot be fed: the container is killed (again at each
            // tick, as it may not exist yet when the copy fails).
            if !killed_hard && input_failed.lock().is_ok_and(|s| s.is_some()) {
                self.signal("KILL");
            }
            if killed_at.is_none() {
                if let Some(sig) = io.process_signals.then(sys::parent::interrupted).flatten() {
                    // The caller's signal reaches the command as it would natively (Ctrl-C is
                    // SIGINT, which a shell may trap); the whole container ends after GRACE.
                    interrupted = Some(sig);
                    self.signal(&sig.to_string());
                    killed_at = Some(now);
                }
            }
            let wake = match (deadline, killed_at) {
                (_, Some(k)) if !killed_hard => k + GRACE,
                (_, Some(_)) => now + TICK,
                (Some(d), None) => d.min(now + TICK),
                (None, None) => now + TICK,
            };
            match rx.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(Some(status)) => break status.ok(),
                Ok(None) => {
                    if killed_at.is_none() {
                        self.signal("TERM");
                        killed_at = Some(Instant::now());
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let now = Instant::now();
                    match killed_at {
                        Some(k) if !killed_hard && now >= k + GRACE => {
                            self.signal("KILL");
                            if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
                                let _ =
                                    rustix::process::kill_process(p, rustix::process::Signal::KILL);
                            }
                            killed_hard = true;
                        }
                        Some(_) => {}
                        None if deadline.is_some_and(|d| now >= d) => {
                            timed_out = true;
                            self.signal("TERM");
                            killed_at = Some(now);
                        }
                        None => {}
                    }
                }
            }
        };
        let _ = waiter.join();
        let duration = started.elapsed();
        // A client killed before the engine removed its container (Podman's `--rm` is the
        // client's) leaves it behind; one that died of a signal of its own (an OOM kill, a
        // crash) leaves it running: it goes (under `--keep`, is killed) before the relays are
        // waited for, which its processes could hold open.
        let client_died = status.as_ref().is_some_and(|s| s.signal().is_some());
        if killed_at.is_some() || status.is_none() || client_died {
            if keep {
                if client_died {
                    self.signal("KILL");
                }
            } else {
                self.remove();
            }
        }
        // The client and its container have ended: the redirected outputs' relays read what
        // their FIFOs hold and end, and a redirected stdin's copy that still waits for the
        // check is let go.
        drop(out_hold);
        drop(stop_w);
        if let Some(r) = fifo(0) {
            r.release_input();
        }
        let [out, err] = relays;
        let mut relayed_out = [out.join().ok(), err.join().ok()];
        // The terminal is the command's stream there (its pipe carried the client's words).
        if let Some(attached) = attached {
            attached.finish_into(&mut relayed_out);
        }
        // The run has ended here: the watchdog goes.
        drop(watchdog);
        // Nothing of the command is left (under `--keep` the container is stopped): what it
        // changed at the top of existing git dirs comes back, judged.
        let blocked = workspace::gitstage::reconcile_all(
            &self.target.staged,
            &snapshots,
            &self.target.stage_dir,
            &self.enforcement.writable_roots,
            self.copy_owner.is_some(),
        );
        let (exit_code, signal) = match status.map(exit_of) {
            Some(e) => e,
            None => (125, None),
        };
        if exit_code == 125 && cached_image && self.image_gone() {
            return Err(RunError::Unavailable {
                what: "the container backend's default image",
                cause: format!(
                    "{} was removed from {}'s store since stockade made it; the command did not run",
                    self.target.image,
                    self.engine.name()
                ),
                fix: "run the command again: stockade makes the image anew".into(),
            });
        }
        let (exit_code, signal) = match (timed_out, interrupted) {
            (true, _) => (124, None),
            (false, Some(sig)) if killed_hard => (128 + sig, Some(sig)),
            _ => (exit_code, signal),
        };
        // The run's group: what it counted is the run's usage and its limit events.
        let usage = group
            .as_ref()
            .map_or_else(sandbox::Usage::default, |g| usage_of(g.usage()));
        if let Some(plan) = &self.target.group {
            // The group's own directories, and the engine's copies of its path in every other
            // hierarchy it uses (dropping `group` then finds nothing left to remove).
            sys::cgroup1::remove_everywhere(
                std::path::Path::new(sys::cgroup1::CGROUP_ROOT),
                &plan.path,
                Duration::from_secs(1),
            );
        }
        // A redirected stdin that could not be fed: the check waited at its open, so the
        // command never started, and the container was ended.
        if let Some((path, cause)) = input_failed.lock().ok().and_then(|mut s| s.take()) {
            return Err(RunError::Setup {
                stage: "feed the command's redirected stdin through its FIFO",
                path: Some(path),
                cause,
                explained: None,
            });
        }
        let mut limit_hits = hits(&self.enforcement, &usage);
        let ended_by_memory =
            usage.oom_kills > 0 && exit_code == 128 + rustix::process::Signal::KILL.as_raw();
        let output = stream::relay::output_summary(limit, sanitize, relayed_out, &mut limit_hits);
        let name = self.target.name.clone();
        drop(self.files);
        Ok(Outcome {
            exit_code,
            signal,
            exec_errno: None,
            duration,
            skipped,
            landlock_abi: None,
            blocked,
            timed_out,
            usage,
            limit_hits,
            output,
            ended_by: if timed_out {
                Some("timeout")
            } else if interrupted.is_some() {
                Some("interrupt")
            } else if ended_by_memory {
                Some("memory")
            } else {
                None
            },
            review_upper: None,
            network_tries: net_watch.and_then(sys::net_tries::Watch::tries).map(|t| {
                sandbox::NetworkTries {
                    no_route: t.no_route,
                    lookups: t.lookups,
                    proxy: t.proxy,
                }
            }),
            staged: workspace::gitstage::protected_paths(&self.target.staged),
            container: Some(ContainerRun {
                engine: self.engine.name(),
                engine_binary: self.binary.clone(),
                image: self.target.image.clone(),
                image_id,
                kept: keep.then(|| format!("{} rm --force --volumes {name}", self.engine.name())),
                container: name,
                args,
            }),
        })
    }
}

/// Tests only (debug builds): waits while the file named by `variable` exists (made here), so
/// a test can change the workspace at a known moment: `STOCKADE_TEST_CONTAINER_PAUSE` just
/// before the engine starts (between the plan and the engine's binds, after the git dirs are
/// staged); `STOCKADE_TEST_CONTAINER_PAUSE_PLANNED` before the backend reads the roots'
/// identities again.
#[cfg(debug_assertions)]
pub(crate) fn test_pause(variable: &str) {
    let Some(flag) = std::env::var_os(variable) else {
        return;
    };
    let flag = PathBuf::from(flag);
    if std::fs::write(&flag, b"").is_err() {
        return;
    }
    let until = Instant::now() + Duration::from_secs(30);
    while flag.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Makes a root caller's group for the run ([`crate::flags::Target::group`]), the groups of
/// runs whose stockade is gone swept first; refused when it cannot be made (the run's memory
/// limit is the group's).
fn make_group(plan: &sys::cgroup1::GroupPlan) -> Result<sys::cgroup1::Group, RunError> {
    let root = std::path::Path::new(sys::cgroup1::CGROUP_ROOT);
    sys::cgroup1::sweep_stale(root, &sys::cgroup1::process_alive);
    sys::cgroup1::Group::create(plan, root, sys::cgroup1::machine_has_swap()).map_err(|e| {
        RunError::Unavailable {
            what: "the run's cgroup (a root caller's container runs below it)",
            cause: e.to_string(),
            fix: "see the cause (a group of the same run already there, a hierarchy missing); `--backend native` makes its own".into(),
        }
    })
}

/// The run's usage as its group counted it.
fn usage_of(c: sys::cgroup1::Counters) -> sandbox::Usage {
    sandbox::Usage {
        memory_peak: c.memory_peak,
        cpu_usec: c.cpu_usec,
        pids_peak: c.pids_peak,
        oom_kills: c.oom_kills,
        memory_limit_hits: c.memory_limit_hits,
        pids_limit_hits: 0,
        cpu_throttled: c.cpu_throttled,
    }
}

/// The limits the run's group shows it reached: an OOM kill in the group (memory), the most
/// processes at once at the container's limit (pids: the container's own group, which counted
/// the refused forks, goes with the container).
fn hits(limits: &Enforcement, usage: &sandbox::Usage) -> Vec<sandbox::LimitHit> {
    let mut out = Vec::new();
    if let (Some(bytes), true) = (limits.memory.map(|m| m.value), usage.oom_kills > 0) {
        out.push(sandbox::LimitHit {
            code: sandbox::Code::LimitReached,
            limit: "memory",
            value: bytes,
            mechanism: sandbox::LimitMechanism::ContainerCgroup.code(),
            detail: format!(
                "the kernel killed a process of the run at the memory limit ({} OOM kill(s) in its cgroup)",
                usage.oom_kills
            ),
        });
    }
    if let Some(n) = limits.pids.map(|p| p.value) {
        if usage.pids_peak.is_some_and(|p| p >= n) {
            out.push(sandbox::LimitHit {
                code: sandbox::Code::LimitReached,
                limit: "pids",
                value: n,
                mechanism: sandbox::LimitMechanism::ContainerCgroup.code(),
                detail: format!(
                    "the run had {n} processes and threads at once, its limit: forks beyond it failed"
                ),
            });
        }
    }
    out
}

/// The client exits with the command's code (128+N for a signal), or 125 for the engine's own
/// failure.
fn exit_of(status: ExitStatus) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => (c, None),
        (None, Some(s)) => (128 + s, Some(s)),
        (None, None) => (125, None),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test: panicking is how it fails")]
    use super::*;
    use std::io::{Read, Write};

    fn redirected(which: &[usize]) -> (tempfile::TempDir, Redirected) {
        use rustix::fs::{FileType, Mode, CWD};
        let dir = tempfile::tempdir().unwrap();
        for i in which {
            let p = dir.path().join(i.to_string());
            rustix::fs::mknodat(CWD, &p, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
        }
        let r = Redirected {
            which: which.to_vec(),
            dir: dir.path().to_path_buf(),
            mount: String::new(),
        };
        (dir, r)
    }

    /// An output FIFO's relay (as the run starts it: `relay_to_sink_until`) passes what the
    /// command wrote, sees no end while the write end is held though a writer came and went
    /// (a command that opens it late loses nothing), ends when every writer has gone, and
    /// ends at the stop, after what the FIFO holds, though a writer outside holds it open
    /// (red team: a process of the command's id kept the run going past its time limit).
    #[test]
    fn an_output_fifo_relay_ends_at_its_end_or_at_the_stop() {
        for outsider in [false, true] {
            let (_dir, r) = redirected(&[1]);
            let (read, hold) = r.open_output(1).unwrap();
            let (stop_r, stop_w) = relay_pipe().unwrap();
            let (mut sink_r, sink_w) = std::io::pipe().unwrap();
            let relay = std::thread::spawn(move || {
                let sink = sandbox::Sink::Fd(sink_w.into());
                stream::relay::relay_to_sink_until(read, sink, None, "stdout", false, stop_r)
            });
            let open = || {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(r.dir.join("1"))
                    .unwrap()
            };
            let mut command = open();
            command.write_all(b"first\n").unwrap();
            drop(command);
            std::thread::sleep(Duration::from_millis(200));
            assert!(!relay.is_finished(), "ended while the write end was held");
            let mut late = open();
            late.write_all(b"late\n").unwrap();
            drop(late);
            let kept = outsider.then(open);
            drop(hold);
            if outsider {
                std::thread::sleep(Duration::from_millis(200));
                assert!(!relay.is_finished(), "ended though a writer holds it");
                drop(stop_w);
            }
            let relayed = relay.join().unwrap();
            let mut got = Vec::new();
            sink_r.read_to_end(&mut got).unwrap();
            assert_eq!(got, b"first\nlate\n");
            assert_eq!(relayed.summary.total, 11);
            drop(kept);
        }
    }

    /// A stdin FIFO's copy waiting for a reader that never came (the run ended before the
    /// command) is let go.
    #[test]
    fn a_waiting_stdin_copy_is_let_go() {
        let (_dir, r) = redirected(&[0]);
        let path = r.dir.join("0");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let opened = std::fs::OpenOptions::new().write(true).open(path);
            tx.send(opened.is_ok()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        r.release_input();
        assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap());
    }
}
