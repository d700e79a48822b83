//! The gVisor backend's stage of a run: the plan's spec lowered by [`gvisor`], run with this
//! process's streams (relayed under an output limit or `--sanitize-output`, as for the native
//! backend; the caller's terminal becomes a terminal of the run's own, as for the native
//! backend), and its end put in the terms of the run record.

use std::io::IsTerminal;
use std::os::fd::{AsFd, OwnedFd};

use sandbox::Backend;

use crate::Error;

/// What enforces each layer under gVisor, for the report and `doctor` (nothing is claimed
/// that is not enforced).
pub const ENFORCEMENT: &[(&str, &str)] = &[
    ("read-only host, masks, writable roots, protected paths, private /tmp", "gVisor Sentry mounts (runsc bundle)"),
    ("protected paths created during the run", "the sweep after the run (no creation guard: the Sentry has no seccomp user notification)"),
    ("system calls", "gVisor Sentry (the command never reaches the host kernel); no Landlock (the Sentry has none)"),
    ("network", "--net none: runsc --network=none (the Sentry's own loopback only); --net proxy: runsc --network=host inside a network namespace holding only loopback and stockade's proxy (the same proxy and rules as native); --net host: the host's network"),
    ("memory, processes, CPU", "the run's cgroup made by runsc (root callers: memory, CPU); RLIMIT_NPROC in the Sentry (processes); RLIMIT_AS per process (memory, unprivileged callers); CPU is refused for unprivileged callers"),
    ("uid", "root callers: an unprivileged id inside the Sentry, owning its writable roots (and a home only root can enter, read-only) through idmapped mounts in runsc's own mount namespace; others: runsc --rootless, uid 0 inside mapped to the caller, without capabilities"),
    ("environment", "the same scrubbed environment as the native backend"),
    ("set-user-ID and set-group-ID bits", "refused (EPERM) by a seccomp filter the Sentry applies (runsc --oci-seccomp); not recorded as violations"),
];

impl From<gvisor::Error> for Error {
    fn from(e: gvisor::Error) -> Error {
        Error::Run(e.into())
    }
}

fn relay_pipe() -> Result<(OwnedFd, OwnedFd), Error> {
    let (r, w) = std::io::pipe().map_err(|e| Error::Io {
        what: "create a pipe for the command's streams".into(),
        cause: e,
    })?;
    Ok((r.into(), w.into()))
}

/// Runs `spec` under gVisor.
pub(crate) fn run(
    spec: &sandbox::Spec,
    options: sandbox::Options,
    run_id: &str,
    proxy: Option<sandbox::StartProxy>,
    run_io: sandbox::RunIo,
) -> Result<(sandbox::Outcome, Option<sandbox::CwdFallback>), Error> {
    let (backend, lowered) = tracing::debug_span!("plan").in_scope(|| {
        let backend = gvisor::Gvisor::locate(&spec.writable_roots)?;
        let lowered = backend.plan_with(spec, run_id, &gvisor::host_owned)?;
        Ok::<_, Error>((backend, lowered))
    })?;
    let cwd_fallback = lowered
        .cwd_fallback
        .clone()
        .map(|reason| sandbox::CwdFallback {
            cwd: spec.cwd.clone(),
            reason,
        });
    let sanitize = options.sanitize_output;
    let limit = spec.limits.output_bytes;
    // A run attached to a terminal gets its own (see stream::terminal): runsc makes it, and
    // the streams that are the caller's terminal become it.
    let caller_terminal = stream::terminal::caller_terminal(&run_io, options);
    let keys_to_terminal = caller_terminal.is_some_and(|t| t.streams[0]);
    // Every stream is a pipe this process relays: runsc as root gives its own standard
    // streams to `nobody`, which would take over the caller's terminal or /dev/null.
    let (out_r, out_w) = relay_pipe()?;
    let (err_r, err_w) = relay_pipe()?;
    let (in_r, in_w) = relay_pipe()?;
    // No thread for a relay (the caller's process or thread limit reached: `ulimit -u`, a
    // pids cgroup): the run is refused before runsc starts, naming the limit (E_INTERNAL and
    // its hint, as the native backend's), never a panic. A relay already made ends with its
    // pipe's write end, dropped with the error.
    let thread_refused = |e: std::io::Error| {
        Error::Run(sandbox::RunError::Io {
            what: "start a thread relaying the command's streams".into(),
            cause: e,
        })
    };
    let relay = |from: OwnedFd, sink: sandbox::Sink, name: &'static str| {
        std::thread::Builder::new()
            .spawn(move || stream::relay::relay_to_sink(from, sink, limit, name, sanitize))
            .map_err(thread_refused)
    };
    let relays = [
        relay(out_r, run_io.stdout, "stdout")?,
        relay(err_r, run_io.stderr, "stderr")?,
    ];
    // Stdin is copied as it comes (the thread ends with the input, or when the run is over
    // though the input stays open: a socket Claude Code holds, see relay_input); nothing at
    // all when it is /dev/null or closed. A terminal is never read here: its keys go to the
    // run's own terminal, or, when there is none (`--no-tty`, a library run), the command
    // reads end of file, as from the native backend's /dev/null.
    let input = match run_io.stdin {
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
    // Mode proxy: a network namespace with only loopback and the proxy's listener in it,
    // which runsc joins (`--network=host` there); the proxy serves the listener from here.
    let network = match (spec.network, proxy) {
        (sandbox::Network::Proxy { addr }, Some(mut start)) => {
            let (uid, gid) = (
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
            );
            let maps = (uid != 0).then(|| (format!("0 {uid} 1\n"), format!("0 {gid} 1\n")));
            let (held, listener) = sys::netns::hold_proxy_network(
                maps.as_ref().map(|(u, g)| (u.as_str(), g.as_str())),
                (addr.ip().octets(), addr.port()),
            )
            .map_err(|e| {
                Error::Run(sandbox::RunError::Unavailable {
                    what: "a network namespace for the proxy",
                    cause: e.to_string(),
                    fix: "see the cause; `--net none` runs without network".into(),
                })
            })?;
            start(listener).map_err(|cause| {
                Error::Run(sandbox::RunError::Unavailable {
                    what: "the egress proxy",
                    cause,
                    fix: "see the cause; `--net none` runs without network".into(),
                })
            })?;
            Some(held)
        }
        _ => None,
    };
    let io = gvisor::Io {
        stdin: in_r,
        stdout: out_w,
        stderr: err_w,
        cancel: run_io.control,
        network,
        process_signals: run_io.process_signals,
        terminal: caller_terminal.map(|caller| gvisor::OwnTerminal {
            caller,
            limit: limit.filter(|_| options.limit_terminal),
            sanitize,
        }),
    };
    // The write ends live in `io` only: they close when runsc's child has them and `io` is
    // consumed, so the relays see the end of the output when the command ends.
    let finished = backend.run(&lowered, io);
    let [out, err] = relays;
    let mut relayed_out = [out.join().ok(), err.join().ok()];
    let finished = finished?;
    // The terminal is the command's stream there (its pipe carried runsc's own words only).
    if let Some((slot, relayed)) = finished.terminal.clone() {
        if let Some(r) = relayed_out.get_mut(slot) {
            *r = Some(relayed);
        }
    }
    let mut limit_hits = Vec::new();
    let output = stream::relay::output_summary(limit, sanitize, relayed_out, &mut limit_hits);
    let outcome = sandbox::Outcome {
        exit_code: finished.exit_code,
        signal: finished.signal,
        exec_errno: None,
        duration: finished.duration,
        skipped: Vec::new(),
        landlock_abi: None,
        blocked: Vec::new(),
        timed_out: finished.timed_out,
        usage: sandbox::Usage::default(),
        limit_hits,
        output,
        ended_by: if finished.timed_out {
            Some("timeout")
        } else if finished.interrupted.is_some() {
            Some("interrupt")
        } else {
            None
        },
        review_upper: None,
        // Not watched: the Sentry's network stack is its own, not the host kernel's, and its
        // counters are seen only inside the sandbox (README: "network is off").
        network_tries: None,
    };
    Ok((outcome, cwd_fallback))
}

/// Whether runsc runs as root (with the run's cgroup) rather than `--rootless`.
pub fn root_caller() -> bool {
    rustix::process::geteuid().is_root()
}
