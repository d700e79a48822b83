//! Stage 4, for `--net none` and `--net proxy`: the gate. The check inside names its network
//! and user namespaces on a FIFO and waits; stockade finds the container's process in them,
//! opens the proxy's listener there (`--net proxy`) and the counters of what the command tried
//! on the network, then tells it to go on.

use std::os::fd::{AsFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sandbox::RunError;

use super::start::Client;
use super::supervise::Ending;
use super::{ContainerPlanned, Ended};
use crate::flags;

/// How long the check inside may take to reach the gate (the engine's start of the
/// container included; a first run imports the image before, not counted here).
const GATE_WAIT: Duration = Duration::from_secs(60);

/// The gate's two FIFOs, opened before the container starts (read and write, so neither side
/// blocks on the other's open).
pub(super) struct Gate {
    ready: OwnedFd,
    go: OwnedFd,
    /// `--net proxy`: where the proxy listens inside.
    addr: Option<std::net::SocketAddrV4>,
}

impl Gate {
    pub(super) fn open(
        dir: &std::path::Path,
        addr: Option<std::net::SocketAddrV4>,
    ) -> Result<Gate, RunError> {
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
    pub(super) fn answer(&self, word: &str) -> Result<(), RunError> {
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

impl ContainerPlanned {
    /// Waits at the gate ([`ContainerPlanned::open_gate`]) and answers the check: `go` once
    /// the namespaces are found (and, `--net proxy`, the proxy serves inside). An end that
    /// came first is handed on to the supervision (the client's end through `ended`; the time
    /// limit or the caller's signal as what it started). An error refuses the run: the
    /// caller abandons the client and answers `no`.
    pub(super) fn pass_gate(
        &self,
        gate: &Gate,
        proxy: Option<&mut sandbox::StartProxy>,
        client: &Client,
        ended: &mpsc::Sender<Ended>,
        ending: &mut Ending,
        process_signals: bool,
    ) -> Result<(), RunError> {
        let opened = self
            .open_gate(gate, proxy, &client.rx, ending.deadline, process_signals)
            .and_then(|end| match end {
                GateEnd::Open(watch) => gate.answer("go").map(|()| GateEnd::Open(watch)),
                other => Ok(other),
            })?;
        match opened {
            GateEnd::Open(watch) => ending.net_watch = watch,
            // Its end came during the gate: the supervision takes it.
            GateEnd::Ended(end) => {
                let _ = ended.send(end);
            }
            GateEnd::Deadline => {
                ending.timed_out = true;
                self.signal("TERM");
                ending.killed_at = Some(Instant::now());
            }
            GateEnd::Interrupted(sig) => {
                ending.interrupted = Some(sig);
                self.signal("TERM");
                ending.killed_at = Some(Instant::now());
            }
        }
        Ok(())
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
}
