//! The gVisor backend as a [`sandbox::Backend`]: the spec lowered by [`Gvisor::plan_with`],
//! run with the caller's streams (relayed under an output limit or `--sanitize-output`, as
//! for the native backend; the caller's terminal becomes a terminal of the run's own, as for
//! the native backend), and its end put in the contract's terms.

use std::io::IsTerminal;
use std::os::fd::{AsFd, OwnedFd};

use sandbox::{
    Enforced, Enforcement, Launch, Layer, LimitMechanism, Outcome, Planned, RunError, Spec, Traits,
};

use crate::{Gvisor, Plan};

/// What enforces each layer under gVisor, for the report and `doctor` (nothing is claimed
/// that is not enforced).
pub const ENFORCEMENT: &[Layer] = &[
    Layer {
        what: "read-only host, masks, writable roots, protected paths, private /tmp",
        by: "gVisor Sentry mounts (runsc bundle)",
    },
    Layer {
        what: "protected paths created during the run",
        by: "the sweep after the run (no creation guard: the Sentry has no seccomp user notification)",
    },
    Layer {
        what: "system calls",
        by: "gVisor Sentry (the command never reaches the host kernel); no Landlock (the Sentry has none)",
    },
    Layer {
        what: "network",
        by: "--net none: runsc --network=none (the Sentry's own loopback only); --net proxy: runsc --network=host inside a network namespace holding only loopback and stockade's proxy (the same proxy and rules as native); --net host: the host's network; runsc itself in a network namespace of the run's own, so that its control socket is out of other processes' reach (an unprivileged caller's --net host, which cannot be so, is refused without --allow-degraded)",
    },
    Layer {
        what: "memory, processes, CPU",
        by: "the run's cgroup made by stockade and joined by runsc (root callers: memory, CPU; its counters are the usage and the OOM kill the event); RLIMIT_NPROC in the Sentry (processes); RLIMIT_AS per process (memory, unprivileged callers); CPU is refused for unprivileged callers",
    },
    Layer {
        what: "uid",
        by: "root callers: an unprivileged id inside the Sentry, owning its writable roots (and a home only root can enter, read-only) through idmapped mounts in runsc's own mount namespace; others: runsc --rootless, uid 0 inside mapped to the caller, without capabilities",
    },
    Layer {
        what: "environment",
        by: "the same scrubbed environment as the native backend",
    },
    Layer {
        what: "set-user-ID and set-group-ID bits",
        by: "refused (EPERM) by a seccomp filter the Sentry applies (runsc --oci-seccomp); not recorded as violations",
    },
];

/// runsc's Sentry, chosen by `--backend gvisor`: `runsc` is found when a run is planned
/// (a runsc in one of the run's writable roots is refused).
#[derive(Debug, Default, Clone, Copy)]
pub struct GvisorBackend;

impl sandbox::Backend for GvisorBackend {
    fn name(&self) -> &'static str {
        "gvisor"
    }

    fn probe(&self) -> Vec<sandbox::Check> {
        Gvisor::checks()
    }

    /// No creation guard (the Sentry has no seccomp user notification for stockade to
    /// answer) and no pins (it lets a directory holding read-only binds be renamed); a root
    /// caller's runsc creates missing mount points as root.
    fn traits(&self) -> Traits {
        Traits {
            creation_guard: false,
            pins: false,
            exclusive_workspace: true,
            views: sandbox::Views::UnassignedId,
            exec_errors: false,
            layers: ENFORCEMENT,
        }
    }

    fn plan(&self, spec: &Spec, run_id: &str) -> Result<Box<dyn Planned>, RunError> {
        let backend = Gvisor::locate(&spec.writable_roots)?;
        let lowered = backend.plan_with(spec, run_id, &crate::host_owned)?;
        let cwd_fallback = (lowered.cwd_fallback.clone()).map(|reason| sandbox::CwdFallback {
            cwd: spec.cwd.clone(),
            reason,
        });
        Ok(Box::new(GvisorPlanned {
            enforcement: enforcement(spec),
            network: spec.network,
            output_limit: spec.limits.output_bytes,
            cwd_fallback,
            linked_secrets: spec.linked_secrets.clone(),
            backend,
            lowered,
        }))
    }
}

/// What enforces each layer of a run of `spec` under gVisor.
fn enforcement(spec: &Spec) -> Enforcement {
    let root = root_caller();
    let masks = |readable: bool| -> Vec<std::path::PathBuf> {
        (spec.masks.iter())
            .filter(|m| m.readable == readable)
            .map(|m| m.path.clone())
            .collect()
    };
    let limit = |value: Option<u64>, mechanism| value.map(|value| Enforced { value, mechanism });
    let limits = &spec.limits;
    Enforcement {
        inside_uid: 0,
        host_uid: if root { 0 } else { spec.caller.uid },
        writable_roots: spec.writable_roots.clone(),
        masked: masks(false),
        emptied: masks(true),
        protected: spec.protected.clone(),
        mounts: spec.writable_roots.len() + spec.masks.len() + spec.protected.len(),
        landlock_rules: 0,
        seccomp_rules: 0,
        env_names: spec.env.iter().map(|(k, _)| k.clone()).collect(),
        memory: limit(
            limits.memory_bytes,
            if root {
                LimitMechanism::GvisorCgroup
            } else {
                LimitMechanism::GvisorRlimitAs
            },
        ),
        pids: limit(limits.pids, LimitMechanism::GvisorRlimitNproc),
        cpu_millicores: limit(limits.cpu_millis, LimitMechanism::GvisorCgroup),
    }
}

/// runsc's control socket (`@runsc-sandbox.ID`) is abstract: any process in the network
/// namespace it was bound in can connect to it, whoever runs it, and have the sandbox run a
/// command, with the run's access to the workspace. It is bound in a namespace of the run's own
/// (`Plan::control_held`), but for an unprivileged caller's `--net host` (its sandbox needs the
/// host's namespace, which such a caller cannot name to runsc nor leave for it): refused, or
/// recorded as skipped under `--allow-degraded`.
fn refuse_shared_control(
    plan: &Plan,
    options: sandbox::Options,
) -> Result<Option<String>, RunError> {
    if plan.control_held {
        return Ok(None);
    }
    let cause = "under gVisor, an unprivileged caller's --net host leaves runsc's control socket (@runsc-sandbox.ID) in the host's network namespace, where any local user can connect to it and run commands in the sandbox, with the run's access to the workspace";
    if options.allow_degraded {
        return Ok(Some(format!(
            "a control socket only stockade can reach: {cause}"
        )));
    }
    Err(RunError::Unavailable {
        what: "a control socket only stockade can reach",
        cause: cause.into(),
        fix: "run with --net proxy (the network through stockade's proxy) or --net none, or as root, or with --backend native; or pass --allow-degraded to run anyway".into(),
    })
}

/// A run lowered for runsc, with what its run needs of the spec.
struct GvisorPlanned {
    backend: Gvisor,
    lowered: Plan,
    enforcement: Enforcement,
    network: sandbox::Network,
    output_limit: Option<u64>,
    cwd_fallback: Option<sandbox::CwdFallback>,
    linked_secrets: Vec<sandbox::LinkedSecret>,
}

fn relay_pipe() -> Result<(OwnedFd, OwnedFd), RunError> {
    let (r, w) =
        std::io::pipe().map_err(|e| RunError::io("create a pipe for the command's streams", e))?;
    Ok((r.into(), w.into()))
}

impl Planned for GvisorPlanned {
    fn cwd_fallback(&self) -> Option<sandbox::CwdFallback> {
        self.cwd_fallback.clone()
    }

    fn enforcement(&self) -> Enforcement {
        self.enforcement.clone()
    }

    /// Runs the plan with the caller's streams: refused first where it must be, the command's
    /// streams relayed ([`relay_streams`]), runsc's network held
    /// ([`GvisorPlanned::hold_network`]), then runsc run to its end, the relays joined, and the
    /// end put in the contract's terms ([`GvisorPlanned::outcome`]).
    fn run(self: Box<Self>, launch: Launch) -> Result<Outcome, RunError> {
        let Launch {
            io,
            options,
            mut proxy,
            before_command,
        } = launch;
        // A masked file's other name is readable through the gofer as through the host
        // kernel: refused (or recorded) by every backend's run.
        let mut skipped = sandbox::refuse_linked_secrets(&self.linked_secrets, options)?;
        skipped.extend(refuse_shared_control(&self.lowered, options)?);
        let sanitize = options.sanitize_output;
        let limit = self.output_limit;
        let caller_terminal = own_terminal(&io, options);
        let keys_to_terminal = caller_terminal.is_some();
        let Relays {
            out_w,
            err_w,
            in_r,
            relays,
        } = relay_streams(
            io.stdin,
            io.stdout,
            io.stderr,
            limit,
            sanitize,
            keys_to_terminal,
        )?;
        let network = self.hold_network(&mut proxy)?;
        let io = crate::Io {
            stdin: in_r,
            stdout: out_w,
            stderr: err_w,
            cancel: io.control,
            network,
            process_signals: io.process_signals,
            terminal: caller_terminal.map(|caller| crate::OwnTerminal {
                caller,
                limit: limit.filter(|_| options.limit_terminal),
                sanitize,
            }),
        };
        // What the command's start waits for (the run journal, durable): before runsc starts.
        sandbox::wait_before_command(before_command)?;
        // The write ends live in `io` only: they close when runsc's child has them and `io` is
        // consumed, so the relays see the end of the output when the command ends.
        let finished = self.backend.run(&self.lowered, io);
        let [out, err] = relays;
        let relayed_out = [out.join().ok(), err.join().ok()];
        let finished = finished.map_err(RunError::from)?;
        Ok(self.outcome(finished, relayed_out, skipped, limit, sanitize))
    }
}

impl GvisorPlanned {
    /// A network namespace of the run's own for runsc (`None` when runsc stays in the
    /// caller's: [`Plan::control_held`]), with the proxy's listener in it in mode proxy, served
    /// by `proxy`.
    fn hold_network(
        &self,
        proxy: &mut Option<sandbox::StartProxy>,
    ) -> Result<Option<sys::netns::HeldNetwork>, RunError> {
        // A network namespace of the run's own, with only loopback, which runsc starts in
        // (its control socket is bound there: `Plan::control_held`); in mode proxy with the
        // proxy's listener in it, which runsc's sandbox uses (`--network=host` there) and the
        // proxy serves from here.
        if !self.lowered.control_held {
            return Ok(None);
        }
        let (listen, fix) = match self.network {
            sandbox::Network::Proxy { addr } => (
                Some((addr.ip().octets(), addr.port())),
                "see the cause; `--net none` runs without network",
            ),
            _ => (
                None,
                "see the cause; the gVisor backend needs a network namespace for runsc's control socket, or run with --backend native",
            ),
        };
        let (held, listener) =
            crate::network::hold(listen).map_err(|e| match e.raw_os_error() {
                // The caller's process limit (the holder is a process), named as such.
                Some(libc::EAGAIN) => {
                    RunError::io("start the holder of runsc's network namespace", e)
                }
                _ => RunError::Unavailable {
                    what: "a network namespace of the run's own for runsc",
                    cause: e.to_string(),
                    fix: fix.into(),
                },
            })?;
        let started = match (listener, proxy.take()) {
            (Some(listener), Some(mut start)) => start(listener),
            (Some(_), None) => Err("mode proxy, but no proxy to serve it".into()),
            (None, _) => Ok(()),
        };
        started.map_err(|cause| RunError::Unavailable {
            what: "the egress proxy",
            cause,
            fix: "see the cause; `--net none` runs without network".into(),
        })?;
        Ok(Some(held))
    }

    /// The run's end in the contract's terms: `relayed_out` is what the stdout and stderr relays
    /// passed on (the terminal's instead, for the stream it was accounted to), `skipped` what
    /// was recorded as not enforced.
    fn outcome(
        &self,
        mut finished: crate::Finished,
        mut relayed_out: [Option<stream::relay::Relayed>; 2],
        skipped: Vec<String>,
        limit: Option<u64>,
        sanitize: bool,
    ) -> Outcome {
        // The terminal is the command's stream there (its pipe carried runsc's own words only).
        if let Some((slot, relayed)) = finished.terminal.clone() {
            if let Some(r) = relayed_out.get_mut(slot) {
                *r = Some(relayed);
            }
        }
        let mut limit_hits = finished.limit_hits.clone();
        let output = stream::relay::output_summary(limit, sanitize, relayed_out, &mut limit_hits);
        sandbox::Outcome {
            exit_code: finished.exit_code,
            signal: finished.signal,
            exec_errno: None,
            duration: finished.duration,
            skipped,
            landlock_abi: None,
            blocked: finished.blocked.clone(),
            timed_out: finished.timed_out,
            usage: finished.usage,
            limit_hits,
            output,
            ended_by: if finished.timed_out {
                Some("timeout")
            } else if finished.interrupted.is_some() {
                Some("interrupt")
            } else if finished.ended_by_memory {
                Some("memory")
            } else {
                None
            },
            review_upper: finished.review_upper.take(),
            // Not watched: the Sentry's network stack is its own, not the host kernel's, and its
            // counters are seen only inside the sandbox (README: "network is off").
            network_tries: None,
            container: None,
            staged: crate::gitstage::protected_paths(&self.lowered.staged),
        }
    }
}

/// The caller's terminal when the run gets a terminal of its own: only when the command's
/// stdin, stdout and stderr are all that terminal (the caller is told when its keys cannot
/// reach the command).
fn own_terminal(
    io: &sandbox::RunIo,
    options: sandbox::Options,
) -> Option<stream::terminal::CallerTerminal> {
    // A run attached to a terminal gets its own (see stream::terminal): runsc makes it, and
    // the command's stdin, stdout and stderr are all that terminal (runsc's `terminal`
    // has no per-stream choice). So only when all three are the caller's terminal: with
    // one redirected (`> file`, `2>log`, `< input`, a pipe) the terminal would take that
    // stream's output, or read the keyboard for its input (it did: a redirected stdout
    // showed on the terminal and the file stayed empty). The streams are pipes then, a
    // terminal is never read, and the caller is told.
    let caller_terminal = stream::terminal::caller_terminal(io, options);
    if caller_terminal.is_some_and(|t| t.streams[0] && t.streams != [true; 3]) {
        let why = stream::terminal::NoKeys::NoTerminal("gvisor");
        stream::terminal::say_no_keys(&mut false, &why);
    }
    caller_terminal.filter(|t| t.streams == [true; 3])
}

/// The command's streams as pipes this process relays: the ends runsc is given, and the
/// stdout and stderr relays (joined once the run is over).
struct Relays {
    out_w: OwnedFd,
    err_w: OwnedFd,
    in_r: OwnedFd,
    relays: [std::thread::JoinHandle<stream::relay::Relayed>; 2],
}

/// Pipes for the command's streams, with a thread relaying stdout and stderr to the caller's
/// sinks and one copying the caller's input to stdin (none when there is nothing to copy, or
/// the keys go to the run's own terminal: `keys_to_terminal`).
fn relay_streams(
    stdin: sandbox::Input,
    stdout: sandbox::Sink,
    stderr: sandbox::Sink,
    limit: Option<u64>,
    sanitize: bool,
    keys_to_terminal: bool,
) -> Result<Relays, RunError> {
    // Every stream is a pipe this process relays: runsc as root gives its own standard
    // streams to `nobody`, which would take over the caller's terminal or /dev/null.
    let (out_r, out_w) = relay_pipe()?;
    let (err_r, err_w) = relay_pipe()?;
    let (in_r, in_w) = relay_pipe()?;
    // No thread for a relay (the caller's process or thread limit reached: `ulimit -u`, a
    // pids cgroup): the run is refused before runsc starts, naming the limit (E_INTERNAL and
    // its hint, as the native backend's), never a panic. A relay already made ends with its
    // pipe's write end, dropped with the error.
    let thread_refused =
        |e: std::io::Error| RunError::io("start a thread relaying the command's streams", e);
    let relay = |from: OwnedFd, sink: sandbox::Sink, name: &'static str| {
        std::thread::Builder::new()
            .spawn(move || stream::relay::relay_to_sink(from, sink, limit, name, sanitize))
            .map_err(thread_refused)
    };
    let relays = [
        relay(out_r, stdout, "stdout")?,
        relay(err_r, stderr, "stderr")?,
    ];
    // Stdin is copied as it comes (the thread ends with the input, or when the run is over
    // though the input stays open: a socket Claude Code holds, see relay_input); nothing at
    // all when it is /dev/null or closed. A terminal is never read here: its keys go to the
    // run's own terminal, or, when there is none (`--no-tty`, a library run), the command
    // reads end of file, as from the native backend's /dev/null.
    let input = match stdin {
        sandbox::Input::Process if keys_to_terminal || std::io::stdin().is_terminal() => None,
        sandbox::Input::Fd(from) if from.as_fd().is_terminal() => None,
        sandbox::Input::Process if stream::relay::stdin_is_live() => {
            std::io::stdin().as_fd().try_clone_to_owned().ok()
        }
        sandbox::Input::Fd(from) => Some(from),
        sandbox::Input::Process | sandbox::Input::Null => None,
    };
    match input {
        Some(from) => {
            std::thread::Builder::new()
                .spawn(move || stream::relay::relay_input(from, in_w))
                .map_err(thread_refused)?;
        }
        None => drop(in_w),
    }
    Ok(Relays {
        out_w,
        err_w,
        in_r,
        relays,
    })
}

/// Whether runsc runs as root (with the run's cgroup) rather than `--rootless`.
pub(crate) fn root_caller() -> bool {
    rustix::process::geteuid().is_root()
}
