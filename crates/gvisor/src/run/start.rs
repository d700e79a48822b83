//! runsc's start: `runsc run` of the bundle in its own mount namespace with the command's
//! streams, and, for a run with a terminal of its own, that terminal received from runsc and
//! relayed.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use sandbox::Cancel;
use sys::mountns::Failed;

use super::control::Control;
use super::mounts::{cover_failed, idmapped_trees, prepared_covers, view_failed, Trees};
use super::{io_err, OwnTerminal};
use crate::console::{ConsoleError, ConsoleSocket, CONSOLE_WAIT};
use crate::{Error, Plan};

/// `runsc run` of the bundle in `bundle`, with runsc's own mount namespace prepared (a root
/// caller's idmapped views, then the masks' covers, each only on the file planned), dying
/// with this process, and the command's streams.
pub(super) fn spawn_runsc(
    plan: &Plan,
    ctl: &Control,
    bundle: &Path,
    console: Option<&ConsoleSocket>,
    streams: [OwnedFd; 3],
) -> Result<(std::process::Child, std::io::Result<Option<OwnedFd>>), Error> {
    let [stdin, stdout, stderr] = streams;
    // In the run's held network (`Control::command`), so its control socket is bound there.
    let mut command = ctl.command();
    // runsc (and with it the sandbox) ends should this process be killed.
    sys::mountns::die_with_parent_on_exec(&mut command);
    // runsc's own mount namespace (its file server works there): a root caller's idmapped
    // views, then the masks' covers, each only on the file planned (after the trees: a cover
    // inside one goes onto the view); kept open until runsc has started. An unprivileged
    // caller's covers are made by runsc's child in a user namespace of its own, after it
    // joined the held network (the join in `Control::command` runs first).
    let Trees {
        trees,
        bounded_upper,
    } = idmapped_trees(plan)?;
    let mut covers = prepared_covers(plan)?;
    if plan.caller.rootless {
        if !covers.is_empty() {
            sys::mountns::user_private_mounts_on_exec(&mut command, &covers);
        }
    } else if !trees.is_empty() || !covers.is_empty() {
        sys::mountns::private_mounts_on_exec(&mut command, &trees, &covers);
    }
    command
        .arg("run")
        .arg(format!("--bundle={}", bundle.display()));
    if let Some(c) = console {
        let mut arg = std::ffi::OsString::from("--console-socket=");
        arg.push(c.path());
        command.arg(arg);
    }
    let spawned = command
        .arg(&plan.caller.run_id)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .spawn();
    // A cover that found another file at its path: refused, naming it (runsc never started).
    let spawned = match spawned {
        Err(e) => match covers.failed() {
            Some((Failed::Cover(index), errno)) => return Err(cover_failed(plan, index, errno)),
            Some((Failed::View, errno)) => return Err(view_failed(plan, errno)),
            Some((Failed::SetUp, errno)) => return Err(Error::Unavailable {
                cause: format!("could not make a user and mount namespace of runsc's own to cover the masks in: {errno}"),
                fix: "run with --backend native".into(),
            }),
            None => Err(e),
        },
        Ok(child) => {
            // An unprivileged caller's view under a disk bound: the upper's tmpfs, which
            // runsc's child sent before it ran runsc.
            let sent = covers.bounded_upper();
            drop(covers);
            Ok((child, sent.map(|sent| bounded_upper.or(sent))))
        }
    };
    drop(trees);
    spawned.map_err(|e| match e.raw_os_error() {
        // The caller's process limit, not a missing runsc.
        Some(libc::EAGAIN) => Error::Io {
            what: format!("start {}", plan.runsc.display()),
            cause: e,
        },
        _ => Error::Unavailable {
            cause: format!("could not start {}: {e}", plan.runsc.display()),
            fix: crate::RUNSC_FIX.into(),
        },
    })
}

/// The run's own terminal from runsc's console socket, given the caller's settings and
/// window size and relayed: `None` when runsc ended (or the run was cancelled) before sending
/// it (runsc's exit says why). Refused when runsc sends anything but one pseudo-terminal's
/// master side, or nothing within [`CONSOLE_WAIT`].
pub(super) fn attach_console(
    console: ConsoleSocket,
    own: OwnTerminal,
    child: &mut std::process::Child,
    cancel: &Cancel,
    watch_size: bool,
) -> Result<Option<stream::terminal::Attached>, Error> {
    let deadline = Instant::now() + CONSOLE_WAIT;
    // Whether runsc ended, without reaping it (`WNOWAIT`): the waiter reaps it, with its usage.
    let pid = rustix::process::Pid::from_raw(child.id() as i32);
    let ended = || {
        let options = rustix::process::WaitIdOptions::EXITED
            | rustix::process::WaitIdOptions::NOHANG
            | rustix::process::WaitIdOptions::NOWAIT;
        pid.is_none_or(|p| {
            !matches!(
                rustix::process::waitid(rustix::process::WaitId::Pid(p), options),
                Ok(None)
            )
        })
    };
    let gone = || cancel.is_cancelled() || ended();
    let master = match console.receive(deadline, gone) {
        Ok(Some(m)) => m,
        Ok(None) => return Ok(None),
        Err(ConsoleError::Io(cause)) => {
            return Err(Error::Io {
                what: "receive the run's terminal from runsc".into(),
                cause,
            })
        }
        Err(e) => {
            return Err(Error::Unavailable {
                cause: format!("a terminal of the run's own: {e}"),
                fix: "run with --no-tty (no terminal of the run's own), or with --backend native"
                    .into(),
            })
        }
    };
    // runsc made the terminal with the system's defaults; the run's starts as the caller's
    // (before the command does: runsc sends it while it creates the sandbox).
    let attached = own.caller.apply_to(master.as_fd()).and_then(|()| {
        stream::terminal::attach(
            master,
            &own.caller,
            own.limit,
            own.sanitize,
            watch_size,
            cancel.clone(),
        )
    });
    attached
        .map(Some)
        .map_err(io_err("attach the command's terminal"))
}
