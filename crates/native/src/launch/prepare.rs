//! What the supervisor prepares before the clone, each step its own function: the refusals
//! no set-up can change, the seccomp program, the idmapped mounts and the review view a root
//! caller's supervisor makes, the caller's streams, and the run's groups.

use std::ffi::CStr;
use std::io::IsTerminal;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::raw::c_int;
use std::path::{Path, PathBuf};

use super::start::Channel;
use super::{aimable_socket, cgroup_unavailable, dev_null, output_pipe, review_view, REVIEW_FIX};
use crate::cgroup::Group;
use crate::error::RunError;
use crate::plan::Plan;
use crate::Options;

/// What no set-up can change: a stdin socket the command could aim elsewhere, and limits
/// nothing here enforces (refused, or recorded as skipped under `--allow-degraded`).
pub(super) fn refusals(
    plan: &Plan,
    options: Options,
    io: &sandbox::RunIo,
) -> Result<Vec<String>, RunError> {
    // A masked or protected file with another name outside its mask: refused (or recorded)
    // here too, so a caller of this backend other than stockade's pipeline fails closed.
    let mut skipped = sandbox::refuse_linked_secrets(&plan.linked_secrets, options)?;
    // stdout and stderr are relayed when they are such sockets (below); stdin cannot be.
    let aimable_stdin = match &io.stdin {
        sandbox::Input::Fd(fd) => aimable_socket(fd.as_fd()),
        sandbox::Input::Process => aimable_socket(std::io::stdin().as_fd()),
        sandbox::Input::Null => false,
    };
    if aimable_stdin {
        return Err(RunError::Unavailable {
            what: "keeping the caller's sockets out of the sandbox",
            cause: "stdin is a socket the command could aim at other addresses (a datagram, unconnected or listening socket): host Unix sockets, or the network past --net".into(),
            fix: "give `stockade run` a pipe, a file, a terminal or /dev/null as stdin (`< /dev/null`, `cat | stockade run ...`)".into(),
        });
    }
    if let Some(m) = &plan.resources_missing {
        if options.allow_degraded {
            skipped.push(format!("{} limit: {}", m.limit, m.cause));
        } else {
            return Err(RunError::Unavailable {
                what: match m.limit {
                    "cpu" => "a CPU limit (--cpu)",
                    "memory" => "a memory limit (--memory)",
                    _ => "a process limit (--pids)",
                },
                cause: m.cause.clone(),
                fix: m.fix.clone(),
            });
        }
    }
    Ok(skipped)
}

/// The deny-list and mediated creation, one seccomp program: the command installs it with a
/// listener and hands that to the init. seccompiler's sock_filter and libc's have the same C
/// layout but are distinct types. None when it cannot be built and `--allow-degraded` lets
/// the run go without it (recorded in `skipped`).
pub(super) fn seccomp_filter(
    plan: &Plan,
    options: Options,
    skipped: &mut Vec<String>,
) -> Result<Option<Vec<libc::sock_filter>>, RunError> {
    Ok(match seccomp::build_with_mediation_for(
            plan.resources.allocation_watch,
            plan.creation_guard.creations,
        ) {
            Ok(p) => Some(
                p.instructions()
                    .iter()
                    .map(|i| libc::sock_filter {
                        code: i.code,
                        jt: i.jt,
                        jf: i.jf,
                        k: i.k,
                    })
                    .collect(),
            ),
            Err(e) if options.allow_degraded => {
                skipped.push(format!("seccomp: {e}"));
                skipped.push(format!("mediated creation (protected paths created during the run are only swept afterwards): {e}"));
                None
            }
            Err(e) => {
                return Err(RunError::Unavailable {
                    what: "seccomp",
                    cause: e.to_string(),
                    fix: "stockade's seccomp filter supports x86_64 only; pass --allow-degraded to run without it".into(),
                })
            }
        })
}

/// The idmapping user namespaces (one per distinct map) and the idmapped mounts of a root
/// caller's writable paths, each put in its slot.
#[allow(clippy::type_complexity)]
pub(super) fn idmapped(
    plan: &Plan,
    slots: &mut [c_int],
) -> Result<
    (
        Vec<OwnedFd>,
        Vec<((String, String), sys::parent::IdmapNamespace)>,
    ),
    RunError,
> {
    let mut held: Vec<OwnedFd> = Vec::new();
    let mut namespaces: Vec<((String, String), sys::parent::IdmapNamespace)> = Vec::new();
    for m in &plan.idmapped {
        let key = (m.uid_map.clone(), m.gid_map.clone());
        let idx = match namespaces.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                let ns = sys::parent::idmap_userns(&m.uid_map, &m.gid_map).map_err(|e| {
                    // Its helper process could not be made: the caller's process limit (a
                    // pids cgroup binds root too), not a missing feature.
                    if e.raw_os_error() == Some(libc::EAGAIN) {
                        return RunError::io("create an idmapping user namespace", e);
                    }
                    let cause = format!("failed to create an idmapping user namespace: {e}");
                    crate::userns::refusal(&cause, true).unwrap_or(RunError::Unavailable {
                        what: "an idmapping user namespace",
                        cause,
                        fix: "enable user namespaces (sysctl user.max_user_namespaces > 0)".into(),
                    })
                })?;
                namespaces.push((key, ns));
                namespaces.len() - 1
            }
        };
        let fd = sys::parent::idmapped_clone(&m.path, namespaces[idx].1.fd(), m.readonly).map_err(|e| {
            // The path is looked up through no link: a link or a missing component is a path
            // changed since planning (another process swapped it), not a missing feature.
            let changed = matches!(
                e.raw_os_error(),
                Some(libc::ELOOP | libc::ENOENT | libc::ENOTDIR)
            );
            if changed {
                return RunError::Setup {
                    stage: "open a writable path for its idmapped mount",
                    path: Some(m.path.clone()),
                    cause: e,
                    explained: Some(
                        "a directory on the way was replaced (by a symbolic link) or removed after the run was planned: another process changed it; look for what did, then run again".into(),
                    ),
                };
            }
            RunError::Unavailable {
                what: "an idmapped mount",
                cause: format!("{}: {e}", m.path.display()),
                fix: "as root, stockade runs the command as an unprivileged uid and needs idmapped mounts (Linux ≥ 5.12; ext4, xfs, btrfs or tmpfs ≥ 6.3) for the writable paths; or run stockade as a regular user".into(),
            }
        })?;
        if let Some(s) = slots.get_mut(m.slot) {
            *s = fd.as_raw_fd();
        }
        held.push(fd);
    }
    Ok((held, namespaces))
}

/// A root caller's review view, made by the supervisor (in its slot, held in `held`), and
/// the tmpfs of its upper under a disk bound (for the change set).
pub(super) fn review_by_supervisor(
    plan: &Plan,
    slots: &mut [c_int],
    held: &mut Vec<OwnedFd>,
    disk_options: &[(&CStr, &CStr)],
) -> Result<Option<OwnedFd>, RunError> {
    if let Some(view) = &plan.review {
        if let Some((uid_map, gid_map)) = &view.by_supervisor {
            let bounded = match view.disk_bytes {
                Some(_) => {
                    let host_id = crate::plan::ROOT_CALLER_HOST_ID;
                    let owned = sys::parent::bounded_upper(
                        disk_options,
                        view.upper_mode,
                        Some((host_id, host_id)),
                    )
                    .map_err(|e| RunError::Unavailable {
                        what: "a disk bound for the review run (a tmpfs for its writes)",
                        cause: format!("failed to make it: {e}"),
                        fix: REVIEW_FIX.into(),
                    })?;
                    Some(owned)
                }
                None => None,
            };
            let fd = review_view(
                view,
                uid_map,
                gid_map,
                bounded.as_ref().map(|(_, u, w)| (u.as_fd(), w.as_fd())),
            )?;
            if let Some(s) = slots.get_mut(view.slot) {
                *s = fd.as_raw_fd();
            }
            held.push(fd);
            return Ok(bounded.map(|(mnt, _, _)| mnt));
        }
    }
    Ok(None)
}

/// Mode proxy: a channel for the init to hand over the listening socket it opens inside
/// (`proxy`: there is a proxy to serve it).
pub(super) fn proxy_channel(plan: &Plan, proxy: bool) -> Result<Option<Channel>, RunError> {
    Ok(match (plan.network.proxy, proxy) {
        (Some(_), true) => Some(
            sys::parent::fd_channel().map_err(|e| RunError::io("create the proxy channel", e))?,
        ),
        (Some(_), false) => return Err(RunError::no_proxy()),
        _ => None,
    })
}

/// The caller's streams as the command gets them.
pub(super) struct Streams {
    /// The caller's terminal, when the run gets a terminal of its own.
    pub terminal: Option<stream::terminal::CallerTerminal>,
    /// stdout and stderr, when relayed: (read end, the command's write end).
    pub output_pipes: [Option<(OwnedFd, OwnedFd)>; 2],
    /// The command's stdin, when not the caller's own fd 0.
    pub stdin_given: Option<OwnedFd>,
    /// A channel for the init to hand over the master side of the terminal it opens inside.
    pub terminal_channel: Option<Channel>,
}

/// Which of the caller's streams become the run's own terminal, which are relayed through
/// pipes, and what the command reads.
pub(super) fn streams(
    plan: &Plan,
    options: Options,
    io: &sandbox::RunIo,
) -> Result<Streams, RunError> {
    // Under an output limit the command's stdout and stderr are pipes the supervisor relays
    // (see stream::relay); without one the command writes to the caller's streams directly.
    // A terminal is left to the command (colors, progress bars): a person reads it, not a
    // model's context window.
    // Under --sanitize-output terminals are relayed too: escape sequences are what it removes.
    // `/dev/null` is passed as it is: nothing written there can flood anything, and the
    // relay's pipes and thread would be pure cost. A socket the command could aim elsewhere
    // is always relayed: the command gets a pipe, the supervisor writes to the socket.
    let sanitize = options.sanitize_output;
    // A run attached to a terminal gets its own (see stream::terminal): the streams that are
    // the caller's terminal become it, and are neither relayed by pipe nor handed over.
    let terminal = stream::terminal::caller_terminal(io, options);
    let pty = terminal.map_or([false; 3], |t| t.streams);
    let relayed = |stream: std::os::fd::BorrowedFd<'_>, terminal: bool| {
        sanitize
            || (options.no_terminal && terminal)
            || aimable_socket(stream)
            || (plan.output_limit.is_some() && !terminal && !stream::relay::is_dev_null(stream))
    };
    let (stdout, stderr) = (std::io::stdout(), std::io::stderr());
    // A sink of the caller's own (a descriptor) always goes through the relay: the command
    // never holds it.
    let sink_relayed = |sink: &sandbox::Sink, stream: std::os::fd::BorrowedFd<'_>, terminal| {
        matches!(sink, sandbox::Sink::Fd(_)) || relayed(stream, terminal)
    };
    let output_pipes: [Option<(OwnedFd, OwnedFd)>; 2] = [
        (!pty[1] && sink_relayed(&io.stdout, stdout.as_fd(), stdout.is_terminal()))
            .then(|| output_pipe(plan))
            .transpose()?,
        (!pty[2] && sink_relayed(&io.stderr, stderr.as_fd(), stderr.is_terminal()))
            .then(|| output_pipe(plan))
            .transpose()?,
    ];
    // A terminal on stdin that does not become the run's own (--no-tty, a library run) is
    // never handed over, not even read-only: any descriptor of it lets the command change its
    // settings, lock it (TIOCEXCL), or make it a controlling terminal and reopen it for
    // writing. The command reads /dev/null instead.
    // A library's own input descriptor is handed over as it is (unless it is a terminal).
    let stdin_given = match &io.stdin {
        sandbox::Input::Process if !pty[0] && std::io::stdin().is_terminal() => Some(dev_null()?),
        sandbox::Input::Process => None,
        sandbox::Input::Null => Some(dev_null()?),
        sandbox::Input::Fd(fd) if fd.as_fd().is_terminal() => Some(dev_null()?),
        sandbox::Input::Fd(fd) => Some(
            fd.try_clone()
                .map_err(|e| RunError::io("pass on the command's stdin", e))?,
        ),
    };
    // A channel for the init to hand over the master side of the terminal it opens inside.
    let terminal_channel = terminal
        .map(|_| sys::parent::fd_channel())
        .transpose()
        .map_err(|e| RunError::io("create the terminal channel", e))?;
    Ok(Streams {
        terminal,
        output_pipes,
        stdin_given,
        terminal_channel,
    })
}

/// The run's groups, as planned.
pub(super) struct Groups {
    /// Names the groups.
    pub name: String,
    /// Removes the groups should this process die.
    pub reaper: Option<sys::reaper::Reaper>,
    /// cgroup v1: the groups are made after the clone, while the init sets up the sandbox;
    /// the init gets their `tasks` files over this channel.
    pub join_channel: Option<Channel>,
    /// The group made now (v2; none with the channel).
    pub group: Option<Group>,
    /// Its `tasks` files, for the init to join by itself (v1 made now).
    pub join_tasks: Vec<OwnedFd>,
    /// How many groups the init joins.
    pub count: usize,
}

/// The run's cgroup, with a reaper that removes it should this process be killed.
pub(super) fn groups(plan: &Plan) -> Result<Groups, RunError> {
    let name = format!("stockade-{}-{}", std::process::id(), super::started_nanos());
    let reaper_dirs = crate::cgroup::planned_dirs(&plan.resources, &name);
    let reaper = if reaper_dirs.is_empty() {
        None
    } else {
        let dirs: Vec<&Path> = reaper_dirs.iter().map(PathBuf::as_path).collect();
        Some(
            sys::reaper::Reaper::spawn(&dirs)
                .map_err(|e| RunError::io("start the cgroup reaper", e))?,
        )
    };
    let join_channel = matches!(
        plan.resources.cgroup,
        Some(crate::cgroup::CgroupSpec::V1 { .. })
    )
    .then(sys::parent::fd_channel)
    .transpose()
    .map_err(|e| RunError::io("create the cgroup channel", e))?;
    let group = match join_channel {
        Some(_) => None,
        None => Group::create(&plan.resources, &name).map_err(|e| cgroup_unavailable(plan, e))?,
    };
    let join_tasks: Vec<OwnedFd> = match &group {
        Some(g) => g.tasks_files().map_err(|e| cgroup_unavailable(plan, e))?,
        None => Vec::new(),
    };
    Ok(Groups {
        name,
        reaper,
        join_channel,
        group,
        join_tasks,
        count: reaper_dirs.len(),
    })
}
