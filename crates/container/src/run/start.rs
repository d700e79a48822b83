//! Stage 3: the engine's client started on the command's streams, in the run's group (a root
//! caller's) and with its [`Watchdog`], the run's terminal attached to the caller's, and a
//! thread waiting for the client's end.

use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use sandbox::RunError;

use super::streams::ClientStreams;
use super::watchdog::Watchdog;
use super::{ContainerPlanned, Ended};

/// The engine's client, started, and what the run holds for as long as it runs.
pub(super) struct Client {
    pub(super) pid: u32,
    pub(super) started: Instant,
    /// The client's end (from the waiter), or a cancel (`None`).
    pub(super) rx: mpsc::Receiver<Ended>,
    pub(super) waiter: std::thread::JoinHandle<()>,
    pub(super) watchdog: Watchdog,
    /// A root caller's group for the run (its usage and limit events).
    pub(super) group: Option<sys::cgroup1::Group>,
    /// The run's terminal, relayed to and from the caller's.
    pub(super) attached: Option<stream::terminal::Attached>,
    /// A redirected stdout's FIFO, held open for writing until the client has ended.
    pub(super) out_hold: Option<OwnedFd>,
}

impl Client {
    /// A run refused once its client has started: the client and its container end, the
    /// waiter is joined, the watchdog let go.
    pub(super) fn abandon(self, planned: &ContainerPlanned) {
        if let Some(p) = rustix::process::Pid::from_raw(self.pid as i32) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
        planned.remove();
        let _ = self.waiter.join();
        drop(self.watchdog);
    }
}

impl ContainerPlanned {
    /// Starts the engine's client with `args` on `streams` (see [`ContainerPlanned::streams`]);
    /// also returns a sender of its end for the gate, which may take it first.
    pub(super) fn start(
        &self,
        args: &[String],
        streams: ClientStreams,
        own_terminal: Option<&stream::terminal::CallerTerminal>,
        control: &sandbox::Cancel,
        process_signals: bool,
        options: sandbox::Options,
    ) -> Result<(Client, mpsc::Sender<Ended>), RunError> {
        let limit = self.output_limit;
        let sanitize = options.sanitize_output;
        let group = self.target.group.as_ref().map(make_group).transpose()?;
        let watchdog = Watchdog::start(self, options.keep)?;
        let mut cmd = Command::new(&self.binary);
        // The client dies with this process (the watchdog ends its container then).
        sys::mountns::die_with_parent_on_exec(&mut cmd);
        cmd.args(args)
            .env("PATH", &self.engine_path)
            .envs(self.lowered.env.iter().map(|(k, v)| (k, v)))
            .stdin(streams.stdin);
        let mut out_hold = None;
        let terminal = streams.terminal;
        let err_w = streams.err_w;
        match &terminal {
            // The client's own words (the engine's errors) go through the pipes still; the
            // command's streams are the container's terminal, which the client relays to its
            // stdin's, of which it is the session leader (it follows the window's size).
            Some((_, slave)) => {
                let out = slave
                    .try_clone()
                    .map_err(|e| RunError::io("hand the run's terminal to the engine", e))?;
                cmd.stdout(Stdio::from(out)).stderr(Stdio::from(err_w));
                if streams.hold_out {
                    out_hold = Some(streams.out_w);
                } else {
                    drop(streams.out_w);
                }
                sys::parent::session_on_terminal(&mut cmd, 0);
            }
            None => {
                cmd.stdout(Stdio::from(streams.out_w))
                    .stderr(Stdio::from(err_w));
            }
        }
        if process_signals {
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
        let attached = match (terminal, own_terminal) {
            (Some((master, slave)), Some(caller)) => {
                drop(slave);
                let attached = stream::terminal::attach(
                    master,
                    caller,
                    limit.filter(|_| options.limit_terminal),
                    sanitize,
                    process_signals,
                    control.clone(),
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
        control.on_cancel(Box::new(move || {
            let _ = cancel_tx.send(None);
        }));
        Ok((
            Client {
                pid,
                started,
                rx,
                waiter,
                watchdog,
                group,
                attached,
                out_hold,
            },
            gate_tx,
        ))
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
