//! The start: the init cloned, its id maps written, the output relays started, the run's
//! groups joined (cgroup v1: made now, beside the init's set-up; v2: the init moved), the
//! command released once what it waits for holds, and what the init hands over received
//! (the disk bound's filesystem, the proxy's listener, the master side of the run's own
//! terminal). Any failure after the clone ends the init before it is reported.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::raw::c_int;
use std::thread::JoinHandle;

use sys::parent::Spawned;
use sys::postfork::ChildSpec;

use super::{cgroup_unavailable, reported_failure, ProxyStarter, NAMESPACES_FIX};
use crate::cgroup::Group;
use crate::error::RunError;
use crate::plan::Plan;

/// One end of a channel the init hands a descriptor over, and the init's end.
pub(super) type Channel = (OwnedFd, OwnedFd);

/// `e`, after the init (and with it the sandbox) has been ended and reaped.
fn abandon(child: &Spawned, e: RunError) -> RunError {
    child.kill();
    let _ = child.wait();
    e
}

/// Clones the init (it waits for its id maps before anything else).
pub(super) fn spawn(spec: &ChildSpec<'_>, slots: &mut [c_int]) -> Result<Spawned, RunError> {
    sys::parent::spawn(spec, slots).map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM | libc::EINVAL | libc::ENOSPC | libc::EUSERS | libc::ENOSYS) => {
            let cause =
                format!("failed to create user/mount/pid/net/ipc/uts/cgroup namespaces: {e}");
            crate::userns::refusal(&cause, true).unwrap_or(RunError::Unavailable {
                what: "Linux namespaces",
                cause,
                fix: NAMESPACES_FIX.into(),
            })
        }
        _ => RunError::io("start the sandbox", e),
    })
}

/// A relay thread per output pipe: only the command holds the write ends from here on (the
/// relays see end of file when it is done). No thread for a relay (the caller's process or
/// thread limit reached): the sandbox is ended and the run refused (an error, not a panic).
pub(super) fn relay_outputs(
    child: &Spawned,
    pipes: [Option<(OwnedFd, OwnedFd)>; 2],
    sinks: [sandbox::Sink; 2],
    limit: Option<u64>,
    sanitize: bool,
) -> Result<[Option<JoinHandle<stream::relay::Relayed>>; 2], RunError> {
    let relay_to = |pipe: Option<(OwnedFd, OwnedFd)>, sink: sandbox::Sink, name: &'static str| {
        pipe.map(|(r, w)| {
            drop(w);
            std::thread::Builder::new()
                .spawn(move || stream::relay::relay_to_sink(r, sink, limit, name, sanitize))
        })
    };
    let [out_pipe, err_pipe] = pipes;
    let [out_sink, err_sink] = sinks;
    let relays = [
        relay_to(out_pipe, out_sink, "stdout").transpose(),
        relay_to(err_pipe, err_sink, "stderr").transpose(),
    ];
    match relays {
        [Ok(out), Ok(err)] => Ok([out, err]),
        [Err(e), _] | [_, Err(e)] => Err(abandon(
            child,
            RunError::io("start a thread relaying the command's output", e),
        )),
    }
}

/// cgroup v1: the run's groups are made now, while the init sets up the sandbox (about a
/// millisecond of CPU off the start's critical path), and each group's `tasks` file goes to
/// the init, which joins every group before it forks the command: the command never runs
/// outside its limits, and the init fails closed if a file does not come. The reaper,
/// started before the clone, removes the groups should this process die from here on.
/// Without the channel (v2, or no limits): `group` as it is.
pub(super) fn join_v1(
    plan: &Plan,
    child: &Spawned,
    channel: Option<Channel>,
    group: Option<Group>,
    group_name: &str,
    mapped: &std::io::Result<()>,
) -> Result<Option<Group>, RunError> {
    let (Some((ours, init_end)), Ok(())) = (channel, mapped) else {
        return Ok(group);
    };
    let _span = tracing::debug_span!("cgroup").entered();
    drop(init_end);
    let made = Group::create(&plan.resources, group_name).and_then(|g| {
        let g = g.ok_or_else(|| std::io::Error::other("no cgroup was made"))?;
        for tasks in g.tasks_files()? {
            sys::raw::send_fd(ours.as_raw_fd(), tasks.as_raw_fd()).map_err(std::io::Error::from)?;
        }
        Ok(g)
    });
    made.map(Some).map_err(|e| {
        let refused = reported_failure(plan, child);
        abandon(
            child,
            refused.unwrap_or_else(|| cgroup_unavailable(plan, e)),
        )
    })
}

/// What the command's start waits for, besides its id maps: the init moved into the run's
/// group (cgroup v2, `move_group`), and `before_command` (the run journal, durable).
pub(super) struct Gate {
    pub move_group: bool,
    /// The init waits to be told before it forks the command.
    pub wait: bool,
    pub before_command: Option<crate::BeforeCommand>,
}

/// Into the run's cgroup while the init sets up the sandbox, then the command released
/// once what it waits for holds; an id-map failure is refused here, naming what blocks it.
pub(super) fn release(
    plan: &Plan,
    child: &mut Spawned,
    group: Option<&Group>,
    mapped: std::io::Result<()>,
    gate: Gate,
) -> Result<(), RunError> {
    if let (Some(g), Ok(()), true) = (group, &mapped, gate.move_group) {
        if let Err(e) = g.add(child.pid) {
            let refused = reported_failure(plan, child);
            return Err(abandon(
                child,
                refused.unwrap_or_else(|| cgroup_unavailable(plan, e)),
            ));
        }
    }
    if let (Ok(()), true) = (&mapped, gate.wait) {
        if let Err(e) = sandbox::wait_before_command(gate.before_command) {
            return Err(abandon(child, e));
        }
        if let Err(e) = child.release_command() {
            let refused = reported_failure(plan, child);
            return Err(abandon(
                child,
                refused.unwrap_or_else(|| match group {
                    Some(_) if gate.move_group => cgroup_unavailable(plan, e),
                    _ => RunError::io("start the command", e),
                }),
            ));
        }
    }
    if let Err(e) = mapped {
        let cause = format!("failed to write the id maps: {e}");
        return Err(abandon(
            child,
            crate::userns::refusal(&cause, true).unwrap_or(RunError::Unavailable {
                what: "user-namespace id mapping",
                cause,
                fix:
                    "allow writing /proc/PID/uid_map (unprivileged user namespaces must be enabled)"
                        .into(),
            }),
        ));
    }
    Ok(())
}

/// An unprivileged caller's review run under a disk bound: the tmpfs the init made for its
/// upper.
pub(super) fn receive_disk(child: &Spawned, channel: Channel) -> Result<Option<OwnedFd>, RunError> {
    let (ours, init_end) = channel;
    drop(init_end); // as for the proxy's channel below: the init's exit is end of stream
    sys::parent::recv_fd(&ours).map_err(|e| {
        abandon(
            child,
            RunError::io("receive the disk bound's filesystem", e),
        )
    })
}

/// Mode proxy: the listener the init opened in the sandbox's network, served from here.
pub(super) fn serve_proxy(
    child: &Spawned,
    channel: Channel,
    start: ProxyStarter<'_>,
) -> Result<(), RunError> {
    let (ours, init_end) = channel;
    drop(init_end); // only the init's copy may remain, so its exit means end of stream
    let started = match sys::parent::recv_listener(&ours) {
        Ok(Some(listener)) => start(listener),
        // The init failed before sending it; its report says why.
        Ok(None) => Ok(()),
        Err(e) => Err(e.to_string()),
    };
    started.map_err(|cause| {
        abandon(
            child,
            RunError::Unavailable {
                what: "the egress proxy",
                cause,
                fix: "see the cause; `--net none` runs without network".into(),
            },
        )
    })
}

/// A terminal of the run's own: its master side, from the init, relayed to and from the
/// caller's terminal.
pub(super) fn attach(
    plan: &Plan,
    child: &Spawned,
    channel: Channel,
    caller: &stream::terminal::CallerTerminal,
    options: sandbox::Options,
    process_signals: bool,
    control: &sandbox::Cancel,
) -> Result<Option<stream::terminal::Attached>, RunError> {
    let (ours, init_end) = channel;
    drop(init_end); // as for the proxy's channel: the init's exit is end of stream
    let attached = match sys::parent::recv_terminal(&ours) {
        Ok(Some(master)) => stream::terminal::attach(
            master,
            caller,
            plan.output_limit.filter(|_| options.limit_terminal),
            options.sanitize_output,
            process_signals,
            control.clone(),
        )
        .map(Some),
        // The init failed before sending it; its report says why.
        Ok(None) => Ok(None),
        Err(e) => Err(e),
    };
    attached.map_err(|e| abandon(child, RunError::io("attach the command's terminal", e)))
}
