//! A planned container run, run: the default image made if the engine lacks it, the engine's
//! client started with the command's streams relayed (under an output limit or
//! `--sanitize-output`, as for every backend), the run's time limit, cancel and signals
//! passed to the container, and its end put in the contract's terms.
//!
//! A stage a file, in the order [`ContainerPlanned::run`] calls them: [`prepare`] (what must
//! hold before anything starts, the image, the staged git dirs), [`streams`] (the command's
//! streams: their relays, a terminal of the run's own, the FIFOs of redirected ones), [`start`]
//! (the engine's client, with the run's group and a [`watchdog`]), [`gate`] (`--net none` and
//! `--net proxy`: the container's network namespace found, the proxy's listener opened in it),
//! [`supervise`] (the time limit, cancel and signals, until the client ends) and [`collect`]
//! (the container gone, the streams' ends, the staged git dirs back, the outcome).

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use sandbox::{Enforcement, Launch, Outcome, Planned, RunError};

use crate::{flags, Engine};

mod collect;
mod gate;
mod prepare;
mod start;
mod streams;
mod supervise;
#[cfg(test)]
mod tests;
mod watchdog;

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

/// What the engine's client waiter or a cancel sent: the client's end, or `None` to cancel.
type Ended = Option<std::io::Result<ExitStatus>>;

fn relay_pipe() -> Result<(OwnedFd, OwnedFd), RunError> {
    let (r, w) =
        std::io::pipe().map_err(|e| RunError::io("create a pipe for the command's streams", e))?;
    Ok((r.into(), w.into()))
}

impl ContainerPlanned {
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
            Some((dir, addr)) => Some(gate::Gate::open(dir, *addr)?),
            None => None,
        };
        let prepared = self.prepare(options)?;
        // A caller whose streams are its terminal (an interactive shell, an agent's TUI) gives
        // the run a terminal of its own (see `streams`).
        let own_terminal = stream::terminal::caller_terminal(&io, options);
        let sandbox::RunIo {
            stdin,
            stdout,
            stderr,
            control,
            process_signals,
        } = io;
        let mut args = self.lowered.args.clone();
        let run_at = args.iter().position(|a| a == "run").unwrap_or(0);
        if options.keep {
            args.retain(|a| a != "--rm");
        }
        let (relays, client_streams) = self.streams(
            own_terminal.as_ref(),
            [stdout, stderr],
            stdin,
            options,
            (&mut args, run_at),
        )?;
        sandbox::wait_before_command(before_command)?;
        // Tests only: just before the engine starts (between the plan and the engine's binds,
        // after the git dirs are staged).
        #[cfg(debug_assertions)]
        sys::test_pause::at("STOCKADE_TEST_CONTAINER_PAUSE");
        let (client, gate_tx) = self.start(
            &args,
            client_streams,
            own_terminal.as_ref(),
            &control,
            process_signals,
            options,
        )?;
        let mut ending = supervise::Ending::new(self.timeout, client.started);
        if let Some(gate) = &gate {
            let passed = self.pass_gate(
                gate,
                proxy.as_mut(),
                &client,
                &gate_tx,
                &mut ending,
                process_signals,
            );
            if let Err(e) = passed {
                // The container and its client go first; the check inside, if it is still
                // waiting, is told last (and never waited for).
                client.abandon(&self);
                let _ = gate.answer("no");
                return Err(e);
            }
        }
        drop(gate_tx);
        let status = self.supervise(
            &client,
            &control,
            &mut ending,
            &relays.input_failed,
            process_signals,
        );
        self.collect(prepared, relays, client, ending, status, args, options)
    }
}
