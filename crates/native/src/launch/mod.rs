//! `launch`: prepare everything that allocates or may fail slowly (Landlock ruleset, seccomp
//! program, idmapped mounts, C strings), fork the sandbox, write its id maps, supervise it and
//! collect its status. The child side lives in `sys::postfork`.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::io::IsTerminal;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::raw::{c_char, c_int};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sys::mediate;
use sys::postfork::{self, ChildSpec, CommandSpec, LandlockSpec, MediateSpec, MountOp, Stage};

mod collect;
mod landlock;
mod supervise;

use landlock::{access_bits, changed_rule, Building, LandlockError};

use crate::cgroup::Group;
use crate::error::RunError;
use crate::plan::{Access, Mount, Plan};
use sandbox::Violation;

const E_SANDBOX_VIOLATION: &str = sandbox::Code::SandboxViolation.as_str();

const NAMESPACES_FIX: &str = "enable unprivileged user namespaces: `sysctl -w kernel.unprivileged_userns_clone=1` (Debian/Ubuntu), `sysctl -w user.max_user_namespaces=15000`, or on Ubuntu 23.10+ `stockade apparmor-profile` (see its help) or `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; inside a container, run it with --privileged or a seccomp profile that allows clone/unshare of namespaces";

pub use sandbox::Options;

pub use sandbox::{Outcome, Output};

fn cstring(p: impl AsRef<[u8]>) -> Result<CString, RunError> {
    CString::new(p.as_ref()).map_err(|_| {
        RunError::io(
            "prepare the sandbox",
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "string contains a NUL byte",
            ),
        )
    })
}

fn path_c(p: &Path) -> Result<CString, RunError> {
    cstring(p.as_os_str().as_encoded_bytes())
}

/// Whether `fd` is a socket the command could aim at another address: anything but a
/// connected stream or seqpacket socket (a datagram socket takes an address with every
/// `sendto` and can be `connect`ed again; an unconnected or listening one can `connect` or
/// `accept`). Sockets keep their network namespace and reach paths through the caller's
/// filesystem: such a socket on stdin, stdout or stderr would be a host Unix socket, or a
/// host UDP socket past `--net none`, in the command's hands.
fn aimable_socket(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use rustix::net::{getpeername, sockopt, SocketType};
    let Ok(ty) = sockopt::socket_type(fd) else {
        return false; // not a socket (ENOTSOCK), or no descriptor at all
    };
    if ty != SocketType::STREAM && ty != SocketType::SEQPACKET {
        return true;
    }
    // Connected when it has a peer (an unnamed one, for a socketpair, is `Ok(None)`).
    getpeername(fd).is_err()
}

/// `/dev/null` for reading (close-on-exec: only the command's fd 0 copy survives `execve`).
fn dev_null() -> Result<OwnedFd, RunError> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open("/dev/null", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| RunError::io("open /dev/null for the command's stdin", e.into()))
}

/// Run the plan. Blocks until the sandbox has ended.
/// Receives the proxy's listening socket (mode `proxy`) and starts serving it.
pub type ProxyStarter<'a> = &'a mut dyn FnMut(std::net::TcpListener) -> Result<(), String>;

pub fn launch(
    plan: &Plan,
    options: Options,
    proxy: Option<ProxyStarter<'_>>,
) -> Result<Outcome, RunError> {
    launch_with(plan, options, proxy, sandbox::RunIo::process())
}

/// [`launch`] with the run's own I/O: its output sinks, and the handle that cancels it or
/// passes its command signals (several runs at once in one process, each with its own).
pub fn launch_with(
    plan: &Plan,
    options: Options,
    proxy: Option<ProxyStarter<'_>>,
    io: sandbox::RunIo,
) -> Result<Outcome, RunError> {
    launch_gated(plan, options, proxy, io, None)
}

/// [`launch_with`], the command's start waiting for `before_command` (called once the init is
/// released, while it sets the sandbox up; see [`crate::BeforeCommand`]).
pub(crate) fn launch_gated(
    plan: &Plan,
    options: Options,
    proxy: Option<ProxyStarter<'_>>,
    io: sandbox::RunIo,
    mut before_command: Option<crate::BeforeCommand>,
) -> Result<Outcome, RunError> {
    let started = Instant::now();
    let mut skipped = Vec::new();
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

    // ---- prepare: everything that allocates or may fail slowly, before the fork ----
    // (Spans are the supervisor's: the child after the fork never logs; see docs/design.md.)
    let prepare = tracing::debug_span!("prepare").entered();
    // From the first descriptor meant for this run's init until the supervisor has closed its
    // copies of them: no other run of this process may clone its init meanwhile (it would
    // inherit them, and hold this run's report and output pipes open: both runs would wait).
    let spawning = sys::parent::spawn_lock();
    // Built beside the set-up below, joined before the clone (see `Building`).
    let building = Building::start(plan.landlock.host_rules.clone());
    let landlock_skip_at = skipped.len();
    // The deny-list and mediated creation, one seccomp program: the command installs it with
    // a listener and hands that to the init. (Installing a filter is most of its cost.)
    // seccompiler's sock_filter and libc's have the same C layout but are distinct types.
    let filter: Option<Vec<libc::sock_filter>> =
        match seccomp::build_with_mediation_for(
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
        };

    let idmap_span = tracing::debug_span!("idmap").entered();
    let mut slots: Vec<c_int> = vec![-1; plan.slots];
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
    // A review run under a disk bound: the tmpfs its upper lives on, for the change set.
    let mut review_upper: Option<OwnedFd> = None;
    let disk_size = plan
        .review
        .as_ref()
        .and_then(|v| v.disk_bytes)
        .map(|b| cstring(b.to_string()))
        .transpose()?;
    let disk_options: Vec<(&CStr, &CStr)> = disk_size
        .as_deref()
        .map(|size| vec![(c"size", size), (c"mode", c"0700")])
        .unwrap_or_default();
    if let Some(view) = &plan.review {
        if let Some((uid_map, gid_map)) = &view.by_supervisor {
            let bounded = match view.disk_bytes {
                Some(_) => {
                    let host_id = crate::plan::ROOT_CALLER_HOST_ID;
                    let owned = sys::parent::bounded_upper(
                        &disk_options,
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
            review_upper = bounded.map(|(mnt, _, _)| mnt);
        }
    }
    // The idmapping namespaces' helpers are reaped after the clone (with `held`, below), not
    // here: waiting for a helper to be scheduled and exit is a context switch on the start's
    // critical path (0.05-0.9 ms measured under load). Their descriptors reach the init with
    // the clone like every other the supervisor holds then, and it closes them first thing.
    drop(idmap_span);

    // C strings the child borrows. Built completely before any op borrows them.
    let mount_paths: Vec<(CString, Option<CString>)> = plan
        .mounts
        .iter()
        .map(|m| {
            let (a, b): (Option<&Path>, Option<CString>) = match m {
                Mount::Tmpfs { target, data, .. } => (Some(target), Some(cstring(data)?)),
                Mount::Symlink { target, path } => (Some(path), Some(path_c(target)?)),
                Mount::Overlay { lower, changes, .. } => (Some(lower), Some(path_c(changes)?)),
                other => (other.path(), None),
            };
            Ok((path_c(a.unwrap_or(Path::new("/")))?, b))
        })
        .collect::<Result<_, RunError>>()?;
    // An unprivileged caller's review run under a disk bound: the init makes the tmpfs and
    // hands its mount descriptor over this channel.
    let disk_channel = plan
        .mounts
        .iter()
        .any(|m| matches!(m, Mount::Overlay { disk: Some(_), .. }))
        .then(sys::parent::fd_channel)
        .transpose()
        .map_err(|e| RunError::io("create the disk bound's channel", e))?;
    let ops: Vec<MountOp<'_>> = plan
        .mounts
        .iter()
        .zip(&mount_paths)
        .map(|(m, (p, extra))| {
            let mut op = mount_op(m, p, extra.as_deref(), &plan.identities);
            if let (
                MountOp::Overlay { disk, .. },
                Mount::Overlay {
                    disk: Some((_, mode)),
                    ..
                },
                Some((_, init_end)),
            ) = (&mut op, m, &disk_channel)
            {
                *disk = Some(sys::postfork::DiskBound {
                    options: &disk_options,
                    mode: *mode,
                    sock: init_end.as_raw_fd(),
                });
            }
            op
        })
        .collect();

    let env_c: Vec<CString> = plan
        .env
        .iter()
        .map(|(k, v)| cstring(format!("{k}={v}")))
        .collect::<Result<_, _>>()?;
    let argv_c: Vec<CString> = plan.argv.iter().map(cstring).collect::<Result<_, _>>()?;
    let envp: Vec<*const c_char> = env_c
        .iter()
        .map(|c| c.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let argv: Vec<*const c_char> = argv_c
        .iter()
        .map(|c| c.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let cand_c: Vec<CString> = plan
        .candidates
        .iter()
        .map(|p| path_c(p))
        .collect::<Result<_, _>>()?;
    let candidates: Vec<&CStr> = cand_c.iter().map(CString::as_c_str).collect();
    let cwd = path_c(&plan.cwd)?;
    // Only a kernel without Landlock may be run without it (`--allow-degraded`); a rule's
    // path that changed since planning refuses the run (see `LandlockError`).
    let landlock = match building.finish() {
        Ok(l) => Some(l),
        Err(LandlockError::Unavailable(cause)) if options.allow_degraded => {
            skipped.insert(landlock_skip_at, format!("landlock: {cause}"));
            None
        }
        Err(e) => return Err(e.into_run_error()),
    };
    // The init's rules, each with what it must find at its path (see `ChildRule`): a
    // `read_empty` path must be its own empty cover.
    let child_rules_c: Vec<(CString, u64, bool, bool)> = match &landlock {
        Some(l) => plan
            .landlock
            .child_rules
            .iter()
            .map(|r| {
                Ok((
                    path_c(&r.path)?,
                    access_bits(r.access, r.dir) & l.handled,
                    r.dir,
                    r.access == Access::Read && plan.emptied.contains(&r.path),
                ))
            })
            .collect::<Result<_, RunError>>()?,
        None => Vec::new(),
    };
    let child_rules: Vec<postfork::ChildRule<'_>> = child_rules_c
        .iter()
        .map(|(c, access, dir, emptied)| postfork::ChildRule {
            path: c.as_c_str(),
            access: *access,
            dir: *dir,
            emptied: *emptied,
        })
        .collect();

    let rlimits: Vec<(c_int, u64)> = plan
        .rlimits
        .iter()
        .filter_map(|(name, v)| match name.as_str() {
            "RLIMIT_NOFILE" => Some((libc::RLIMIT_NOFILE as c_int, *v)),
            // Fallbacks for a run without a cgroup: never above what the caller already has
            // (raising a hard limit needs a privilege; a lower one already holds).
            "RLIMIT_DATA" => Some(at_most_hard(libc::RLIMIT_DATA as c_int, *v)),
            "RLIMIT_NPROC" => Some(at_most_hard(libc::RLIMIT_NPROC as c_int, *v)),
            _ => None,
        })
        .collect();
    // The creation guard's rules, borrowed by the init.
    let guard = &plan.creation_guard;
    let guard_roots: Vec<&[u8]> = guard
        .roots
        .iter()
        .map(|p| p.as_os_str().as_bytes())
        .collect();
    let guard_tails: Vec<Vec<&[u8]>> = guard
        .protected
        .iter()
        .map(|g| g.tail.iter().map(|t| t.as_bytes()).collect())
        .collect();
    let guard_protected: Vec<protect::Protected<'_>> = guard
        .protected
        .iter()
        .zip(&guard_tails)
        .map(|(g, tail)| protect::Protected {
            base: g.base.as_os_str().as_bytes(),
            tail,
        })
        .collect();
    let guard_index = protect::PatternIndex::build(&guard_protected);
    let guard_held: Vec<protect::Held<'_>> = guard
        .held_configs
        .iter()
        .map(|(path, slot)| protect::Held {
            path: path.as_os_str().as_bytes(),
            slot: *slot,
        })
        .collect();

    // Mode proxy: a channel for the init to hand over the listening socket it opens inside.
    let proxy_channel = match (plan.network.proxy, &proxy) {
        (Some(_), Some(_)) => Some(
            sys::parent::fd_channel().map_err(|e| RunError::io("create the proxy channel", e))?,
        ),
        (Some(_), None) => {
            return Err(RunError::Unavailable {
                what: "the egress proxy",
                cause: "network mode proxy needs a proxy to serve it".into(),
                fix: "run through `stockade run`, which starts the proxy".into(),
            })
        }
        _ => None,
    };
    let proxy_spec = plan
        .network
        .proxy
        .zip(proxy_channel.as_ref())
        .map(|(addr, (_, init_end))| sys::postfork::ProxySpec {
            addr: addr.ip().octets(),
            port: addr.port(),
            sock: init_end.as_raw_fd(),
        });
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
    let terminal = stream::terminal::caller_terminal(&io, options);
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
    let mut spec = ChildSpec {
        report_fd: -1,
        sync_fd: -1,
        namespaces: if plan.network.new_namespace {
            sys::probe::ALL_NAMESPACES
        } else {
            sys::probe::ALL_NAMESPACES & !libc::CLONE_NEWNET
        },
        uid: plan.ids.inside_uid,
        gid: plan.ids.inside_gid,
        clear_groups: plan.ids.clear_groups,
        hostname: plan.hostname.as_bytes(),
        mounts: &ops,
        command: CommandSpec {
            cwd: &cwd,
            argv: &argv,
            envp: &envp,
            candidates: &candidates,
            landlock: landlock.as_ref().map(|l| LandlockSpec {
                ruleset_fd: l.fd.as_raw_fd(),
                rules: &child_rules,
            }),
            rlimits: &rlimits,
        },
        new_network: plan.network.new_namespace,
        proxy: proxy_spec,
        terminal: terminal
            .zip(terminal_channel.as_ref())
            .map(|(t, (_, init_end))| sys::postfork::TerminalSpec {
                sock: init_end.as_raw_fd(),
                ptmx: c"/dev/pts/ptmx",
                settings: t.settings,
                size: t.size,
                streams: t.streams,
            }),
        stdin: stdin_given.as_ref().map_or(-1, |f| f.as_raw_fd()),
        stdout: output_pipes[0].as_ref().map_or(-1, |p| p.1.as_raw_fd()),
        stderr: output_pipes[1].as_ref().map_or(-1, |p| p.1.as_raw_fd()),
        output_readers: [
            output_pipes[0].as_ref().map_or(-1, |p| p.0.as_raw_fd()),
            output_pipes[1].as_ref().map_or(-1, |p| p.0.as_raw_fd()),
        ],
        wait_group: false,
        join_tasks: &[],
        join_sock: -1,
        join_count: 0,
        mediate: filter.as_deref().map(|filter| MediateSpec {
            filter,
            rules: protect::Rules {
                roots: &guard_roots,
                protected: &guard_protected,
                held: &guard_held,
                index: protect::PatternIndex::of(&guard_index),
                reviewed: guard
                    .reviewed
                    .as_deref()
                    .map_or(&[][..], |p| p.as_os_str().as_bytes()),
            },
        }),
    };

    // The run's cgroup, with a reaper that removes it should this process be killed.
    let cgroup_span = tracing::debug_span!("cgroup").entered();
    let group_name = format!("stockade-{}-{}", std::process::id(), started_nanos());
    let reaper_dirs = crate::cgroup::planned_dirs(&plan.resources, &group_name);
    let reaper = if reaper_dirs.is_empty() {
        None
    } else {
        let dirs: Vec<&Path> = reaper_dirs.iter().map(PathBuf::as_path).collect();
        Some(
            sys::reaper::Reaper::spawn(&dirs)
                .map_err(|e| RunError::io("start the cgroup reaper", e))?,
        )
    };
    // cgroup v1: the groups are made after the clone, while the init sets up the sandbox
    // (below); the init gets their `tasks` files over this channel.
    let join_channel = matches!(
        plan.resources.cgroup,
        Some(crate::cgroup::CgroupSpec::V1 { .. })
    )
    .then(sys::parent::fd_channel)
    .transpose()
    .map_err(|e| RunError::io("create the cgroup channel", e))?;
    let group = match join_channel {
        Some(_) => None,
        None => {
            Group::create(&plan.resources, &group_name).map_err(|e| cgroup_unavailable(plan, e))?
        }
    };
    if let Some((_, init_end)) = &join_channel {
        spec.join_sock = init_end.as_raw_fd();
        spec.join_count = reaper_dirs.len();
    }
    // v1: the init joins by itself through `tasks` (no global lock); v2: the supervisor moves
    // it while it sets up, and it forks the command once told.
    let join_tasks: Vec<OwnedFd> = match &group {
        Some(g) => g.tasks_files().map_err(|e| cgroup_unavailable(plan, e))?,
        None => Vec::new(),
    };
    let join_fds: Vec<c_int> = join_tasks.iter().map(AsRawFd::as_raw_fd).collect();
    spec.join_tasks = &join_fds;
    // v2: the supervisor moves the init; either way the command waits for `before_command`.
    let move_group = group.is_some() && join_fds.is_empty();
    spec.wait_group = move_group || before_command.is_some();
    drop(cgroup_span);

    // ---- launch and supervise ----
    drop(prepare);
    let _supervise = tracing::debug_span!("supervise").entered();
    // Until the init has everything it waits for (the clone, the id maps, the channels).
    let start_span = tracing::debug_span!("start").entered();
    // Ctrl-C from here on is caught (and passed on once the sandbox exists), not fatal. Best
    // effort: without the handlers, Ctrl-C still ends the sandbox with the supervisor.
    if io.process_signals {
        let _ = sys::parent::catch_signals();
    }
    let mut child = sys::parent::spawn(&spec, &mut slots).map_err(|e| match e.raw_os_error() {
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
    })?;
    drop(held);
    drop(namespaces);
    // Only the command may hold the write ends now (the relays see EOF when it is done).
    let limit = plan.output_limit;
    let [out_pipe, err_pipe] = output_pipes;
    let relay_to = |pipe: Option<(OwnedFd, OwnedFd)>, sink: sandbox::Sink, name: &'static str| {
        pipe.map(|(r, w)| {
            drop(w);
            std::thread::Builder::new()
                .spawn(move || stream::relay::relay_to_sink(r, sink, limit, name, sanitize))
        })
    };
    let control = io.control;
    let process_signals = io.process_signals;
    // Modes none and proxy: the kernel's count of what the command tries on the network it
    // lacks (under proxy: around the proxy). Only opened here, while the init surely exists.
    let net_watch = (plan.network.new_namespace)
        .then(|| crate::net_tries::Watch::open(child.pid, plan.network.proxy.is_some()))
        .flatten();
    // The init waits for its id maps: written first, the rest of the supervisor's start (the
    // relays' threads) overlaps with the init's set-up.
    let ids = &plan.ids;
    let mapped =
        sys::parent::write_id_maps(child.pid, &ids.uid_map, &ids.gid_map, ids.deny_setgroups)
            .and_then(|_| child.release());
    let relays = [
        relay_to(out_pipe, io.stdout, "stdout").transpose(),
        relay_to(err_pipe, io.stderr, "stderr").transpose(),
    ];
    // No thread for a relay (the caller's process or thread limit reached): the sandbox is
    // killed and the run refused (an error, not a panic).
    let relays = match relays {
        [Ok(out), Ok(err)] => [out, err],
        [Err(e), _] | [_, Err(e)] => {
            child.kill();
            let _ = child.wait();
            return Err(RunError::io(
                "start a thread relaying the command's output",
                e,
            ));
        }
    };
    // cgroup v1: the run's groups are made now, while the init sets up the sandbox (about a
    // millisecond of CPU off the start's critical path), and each group's `tasks` file goes to
    // the init, which joins every group before it forks the command: the command never runs
    // outside its limits, and the init fails closed if a file does not come. The reaper,
    // started before the clone, removes the groups should this process die from here on.
    let group = match (join_channel, &mapped) {
        (Some((ours, init_end)), Ok(())) => {
            let _span = tracing::debug_span!("cgroup").entered();
            drop(init_end);
            let made = Group::create(&plan.resources, &group_name).and_then(|g| {
                let g = g.ok_or_else(|| std::io::Error::other("no cgroup was made"))?;
                for tasks in g.tasks_files()? {
                    sys::raw::send_fd(ours.as_raw_fd(), tasks.as_raw_fd())
                        .map_err(std::io::Error::from)?;
                }
                Ok(g)
            });
            match made {
                Ok(g) => Some(g),
                Err(e) => {
                    child.kill();
                    let _ = child.wait();
                    return Err(reported_failure(plan, &child)
                        .unwrap_or_else(|| cgroup_unavailable(plan, e)));
                }
            }
        }
        _ => group,
    };
    // Into the run's cgroup while the init sets up the sandbox; it forks the command only
    // once told the move is done.
    drop(join_tasks);
    if let (Some(g), Ok(()), true) = (&group, &mapped, move_group) {
        if let Err(e) = g.add(child.pid) {
            child.kill();
            let _ = child.wait();
            return Err(
                reported_failure(plan, &child).unwrap_or_else(|| cgroup_unavailable(plan, e))
            );
        }
    }
    if let (Ok(()), true) = (&mapped, spec.wait_group) {
        if let Some(Err(cause)) = before_command.take().map(|before| before()) {
            child.kill();
            let _ = child.wait();
            return Err(RunError::Unavailable {
                what: "what the command's start waits for",
                cause,
                fix: "see the cause".into(),
            });
        }
        if let Err(e) = child.release_command() {
            child.kill();
            let _ = child.wait();
            return Err(
                reported_failure(plan, &child).unwrap_or_else(|| match &group {
                    Some(_) if move_group => cgroup_unavailable(plan, e),
                    _ => RunError::io("start the command", e),
                }),
            );
        }
    }
    if let Err(e) = mapped {
        child.kill();
        let _ = child.wait();
        let cause = format!("failed to write the id maps: {e}");
        return Err(
            crate::userns::refusal(&cause, true).unwrap_or(RunError::Unavailable {
                what: "user-namespace id mapping",
                cause,
                fix:
                    "allow writing /proc/PID/uid_map (unprivileged user namespaces must be enabled)"
                        .into(),
            }),
        );
    }
    if let Some((ours, init_end)) = disk_channel {
        drop(init_end); // as for the proxy's channel below: the init's exit is end of stream
        match sys::parent::recv_fd(&ours) {
            Ok(fd) => review_upper = fd,
            Err(e) => {
                child.kill();
                let _ = child.wait();
                return Err(RunError::io("receive the disk bound's filesystem", e));
            }
        }
    }
    if let (Some((ours, init_end)), Some(start)) = (proxy_channel, proxy) {
        drop(init_end); // only the init's copy may remain, so its exit means end of stream
        let started = match sys::parent::recv_listener(&ours) {
            Ok(Some(listener)) => start(listener),
            // The init failed before sending it; its report says why.
            Ok(None) => Ok(()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(cause) = started {
            child.kill();
            let _ = child.wait();
            return Err(RunError::Unavailable {
                what: "the egress proxy",
                cause,
                fix: "see the cause; `--net none` runs without network".into(),
            });
        }
    }
    let attached = match (terminal_channel, terminal) {
        (Some((ours, init_end)), Some(caller)) => {
            drop(init_end); // as for the proxy's channel: the init's exit is end of stream
            let attached = match sys::parent::recv_terminal(&ours) {
                Ok(Some(master)) => stream::terminal::attach(
                    master,
                    &caller,
                    plan.output_limit.filter(|_| options.limit_terminal),
                    sanitize,
                    process_signals,
                    control.clone(),
                )
                .map(Some),
                // The init failed before sending it; its report says why.
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
            match attached {
                Ok(a) => a,
                Err(e) => {
                    child.kill();
                    let _ = child.wait();
                    return Err(RunError::io("attach the command's terminal", e));
                }
            }
        }
        _ => None,
    };
    drop(spawning);
    if process_signals {
        sys::parent::forward_signals_to(child.pid);
    }
    drop(start_span);
    // Until the init's end of the report pipe closes: its set-up, the command, its exit.
    let ended = tracing::debug_span!("wait").in_scope(|| {
        supervise::supervise(
            plan,
            &child,
            started,
            &control,
            process_signals,
            attached.is_some(),
        )
    })?;
    // The command has ended and the init is exiting (its end of the report pipe is closed):
    // read what the group counted while the kernel tears the namespaces down on the other
    // CPU. Peaks and counts no longer move; only the init's last microseconds of CPU time
    // (v2) are left out.
    // The usage, the init's exit status, the groups' removal, the relays' ends.
    let running = collect::Running {
        child,
        group,
        reaper,
        relays,
        attached,
        review_upper,
        net_watch,
    };
    let landlock_abi = landlock.as_ref().map(|l| l.abi);
    tracing::debug_span!("collect").in_scope(|| {
        collect::collect(
            plan,
            started,
            running,
            ended,
            landlock_abi,
            skipped,
            sanitize,
        )
    })
}

/// A pipe for one output stream. For a root caller its write end is given to the sandbox's
/// host uid, so that the command can reopen it (`> /dev/stdout`), which a root-owned pipe
/// refuses to an unprivileged uid.
fn output_pipe(plan: &Plan) -> Result<(OwnedFd, OwnedFd), RunError> {
    let (r, w) = std::io::pipe().map_err(|e| RunError::io("create an output pipe", e))?;
    let w = OwnedFd::from(w);
    if sys::raw::euid() == 0 && plan.ids.host_uid != 0 {
        std::os::unix::fs::fchown(&w, Some(plan.ids.host_uid), Some(plan.ids.host_gid))
            .map_err(|e| RunError::io("hand the output pipe to the sandbox's uid", e))?;
    }
    Ok((OwnedFd::from(r), w))
}

/// `(resource, value)` lowered to the caller's hard limit of `resource` if that is lower.
fn at_most_hard(resource: c_int, value: u64) -> (c_int, u64) {
    let hard = sys::raw::hard_rlimit(resource).unwrap_or(u64::MAX);
    (resource, value.min(hard))
}

fn started_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn cgroup_unavailable(plan: &Plan, e: std::io::Error) -> RunError {
    let which = [
        plan.resources.memory.map(|(_, m)| ("memory", m)),
        plan.resources.pids.map(|(_, m)| ("pids", m)),
        plan.resources.cpu_millis.map(|(_, m)| ("cpu", m)),
    ];
    let limits: Vec<String> = which
        .iter()
        .flatten()
        .filter(|(_, m)| *m != crate::cgroup::Mechanism::Rlimit)
        .map(|(l, m)| format!("{l} ({})", m.describe()))
        .collect();
    RunError::Unavailable {
        what: "the run's cgroup",
        cause: format!("limits {}: {e}", limits.join(", ")),
        fix: "check that the cgroup hierarchy is writable by this user (`stockade doctor`), or lower the limits to none (--memory 0, --pids 0) to run without a cgroup".into(),
    }
}

/// When and how often the processes of a run whose pids limit is an rlimit are counted (a
/// fork bomb reaches the limit within milliseconds; a count walks every task of the run).
const PIDS_FIRST_SAMPLE: Duration = Duration::from_millis(20);
const PIDS_SAMPLE: Duration = Duration::from_millis(50);

/// Exit code of a run that hit its time limit (as `timeout(1)`).
pub const EXIT_TIMEOUT: i32 = 124;
/// How often a run without the process's signals looks at its control handle.
const CONTROL_TICK: Duration = Duration::from_millis(50);
/// Between SIGTERM and SIGKILL at the deadline.
const TIMEOUT_GRACE: Duration = Duration::from_secs(1);

/// Violation kind of a call the creation guard refused during the run.
pub const BLOCKED: &str = "protected_path_blocked";

fn blocked_violation(report: &postfork::Report, path: Vec<u8>) -> Violation {
    let op = mediate::Op::from_u32(report.stage).map_or("call", mediate::Op::name);
    let reason = protect::Reason::from_u32(report.value as u32);
    let why = reason.map_or("protected path", protect::Reason::describe);
    Violation {
        code: E_SANDBOX_VIOLATION,
        kind: BLOCKED,
        path: PathBuf::from(std::ffi::OsString::from_vec(path)),
        action: format!("refused {op} with EPERM during the run ({why})"),
        allow: reason.and_then(protect::Reason::allow),
    }
}

/// A root caller's review view, made here with the supervisor's privileges (see
/// [`sys::parent::overlay_clone`]).
fn review_view(
    view: &crate::plan::ReviewView,
    uid_map: &str,
    gid_map: &str,
    bounded: Option<(std::os::fd::BorrowedFd<'_>, std::os::fd::BorrowedFd<'_>)>,
) -> Result<OwnedFd, RunError> {
    let ns = sys::parent::idmap_userns(uid_map, gid_map).map_err(|e| RunError::Unavailable {
        what: "an idmapping user namespace",
        cause: format!("failed to create an idmapping user namespace: {e}"),
        fix: "enable user namespaces (sysctl user.max_user_namespaces > 0)".into(),
    })?;
    sys::parent::overlay_clone(&view.workspace, ns.fd(), &view.changes, bounded).map_err(|e| {
        RunError::Unavailable {
            what: "a copy-on-write view of the workspace (review mode)",
            cause: format!(
                "failed to mount an overlay of {}: {e}",
                view.workspace.display()
            ),
            fix: REVIEW_FIX.into(),
        }
    })
}

/// How to get review mode where the overlay cannot be made.
pub const REVIEW_FIX: &str = "review mode needs overlayfs with layers given as descriptors (Linux ≥ 6.13) and, for a caller who is not root, overlay mounts in user namespaces (Linux ≥ 5.11); the workspace and the change directory ($XDG_STATE_HOME/stockade/changes) must be on filesystems overlayfs accepts (ext4, xfs, btrfs, tmpfs); or run without --review";

fn mount_op<'a>(
    m: &Mount,
    p: &'a CStr,
    extra: Option<&'a CStr>,
    identities: &BTreeMap<PathBuf, (u64, u64)>,
) -> MountOp<'a> {
    let extra = extra.unwrap_or(c"");
    let expect = m.path().and_then(|path| identities.get(path).copied());
    match m {
        Mount::MakeRootPrivate => MountOp::MakeRootPrivate,
        Mount::Clone {
            slot, recursive, ..
        } => MountOp::Clone {
            source: p,
            slot: *slot,
            recursive: *recursive,
        },
        Mount::ReadOnlyRoot => MountOp::ReadOnlyRoot,
        Mount::Tmpfs { flags, .. } => MountOp::Tmpfs {
            target: p,
            data: extra,
            flags: *flags as libc::c_ulong,
        },
        Mount::Mkdir { mode, .. } => MountOp::Mkdir {
            path: p,
            mode: *mode,
        },
        Mount::File { mode, .. } => MountOp::File {
            path: p,
            mode: *mode,
        },
        Mount::Symlink { .. } => MountOp::Symlink {
            target: extra,
            path: p,
        },
        Mount::Attach {
            slot,
            readonly,
            device,
            ..
        } => MountOp::Attach {
            slot: *slot,
            target: p,
            readonly: *readonly,
            device: *device,
        },
        Mount::Proc { .. } => MountOp::Proc { target: p },
        Mount::Devpts { .. } => MountOp::Devpts { target: p },
        Mount::ReadOnly { .. } => MountOp::ReadOnly { path: p, expect },
        Mount::Pin { .. } => MountOp::Pin { path: p, expect },
        Mount::Hold { slot, .. } => MountOp::Hold {
            path: p,
            slot: *slot,
        },
        Mount::MaskDir { .. } => MountOp::MaskDir { target: p, expect },
        Mount::MaskFile { .. } => MountOp::MaskFile { target: p, expect },
        Mount::EmptyDir { .. } => MountOp::EmptyDir { target: p, expect },
        Mount::EmptyFile { .. } => MountOp::EmptyFile { target: p, expect },
        Mount::Overlay { slot, .. } => MountOp::Overlay {
            lower: p,
            changes: extra,
            slot: *slot,
            disk: None,
        },
    }
}

/// The init's own failure, when it reported one before it ended. A step the supervisor takes
/// while the init sets up (handing it a cgroup's `tasks` file, moving it into the group,
/// releasing the command) fails only because the init is gone (`EPIPE`, `ESRCH`) when the
/// init failed first (a mount step refusing a link planted since planning): its report says
/// why, not "the run's cgroup is not available". Called once the init is reaped: reads only
/// what is already in the pipe.
fn reported_failure(plan: &Plan, child: &sys::parent::Spawned) -> Option<RunError> {
    while child.report_ready(Duration::ZERO).ok()? {
        match child.next_report().ok()?? {
            (r, _) if r.kind == postfork::REPORT_FAILURE => return Some(setup_error(plan, r)),
            _ => {}
        }
    }
    None
}

fn setup_error(plan: &Plan, f: postfork::Report) -> RunError {
    let stage = Stage::from_u32(f.stage);
    let path = match stage {
        Some(Stage::Mount) => plan
            .mounts
            .get(f.index as usize)
            .and_then(|m| m.path().map(Path::to_path_buf)),
        Some(Stage::LandlockRule) => plan
            .landlock
            .child_rules
            .get(f.index as usize)
            .map(|r| r.path.clone()),
        Some(Stage::Chdir) => Some(plan.cwd.clone()),
        _ => None,
    };
    let cause = std::io::Error::from_raw_os_error(f.value);
    // A host setting that denies capabilities in user namespaces (Ubuntu's AppArmor
    // restriction) shows up as the first privileged step failing: name the setting.
    if matches!(f.value, libc::EPERM | libc::EACCES)
        && matches!(
            stage,
            Some(
                Stage::Mount | Stage::SetIds | Stage::SetGroups | Stage::Hostname | Stage::Loopback
            )
        )
    {
        let what = format!(
            "failed to {}{}: {cause}",
            stage.map_or("set up the sandbox", Stage::describe),
            path.as_ref()
                .map(|p| format!(" ({})", p.display()))
                .unwrap_or_default()
        );
        if let Some(e) = crate::userns::refusal(&what, false) {
            return e;
        }
    }
    let overlay_step = matches!(
        plan.mounts.get(f.index as usize),
        Some(Mount::Overlay { .. })
    );
    match stage {
        Some(Stage::Mount) if overlay_step => RunError::Unavailable {
            what: "a copy-on-write view of the workspace (review mode)",
            cause: format!(
                "failed to mount an overlay of {} in the sandbox's user namespace: {cause}",
                path.as_deref().unwrap_or(Path::new("?")).display()
            ),
            fix: REVIEW_FIX.into(),
        },
        Some(Stage::Seccomp) => RunError::Unavailable {
            what: "seccomp",
            cause: format!("failed to install the seccomp filter (with its user-notification listener): {cause}"),
            fix: "use Linux ≥ 5.14 with CONFIG_SECCOMP_FILTER=y; inside a container, allow seccomp()".into(),
        },
        Some(Stage::Mediation) => RunError::Unavailable {
            what: "seccomp user notification",
            cause: format!("failed to set up mediated creation: {cause}"),
            fix: "use Linux ≥ 5.14 (seccomp user notification with SECCOMP_ADDFD_FLAG_SEND)".into(),
        },
        Some(Stage::Rlimit) => RunError::Unavailable {
            what: "the open-files limit",
            cause: format!("failed to set it: {cause}"),
            fix: "ask for at most the caller's own hard limit (`ulimit -Hn`); raising it needs CAP_SYS_RESOURCE".into(),
        },
        Some(Stage::ProxyListener) => RunError::Setup {
            stage: "open the proxy's listening socket inside the sandbox",
            path: None,
            cause,
            explained: None,
        },
        // The init's rules are on its own mounts: a failure is a path changed since planning.
        Some(Stage::LandlockRule) => changed_rule(
            path.unwrap_or_else(|| PathBuf::from("?")),
            sys::Errno(f.value),
        ),
        Some(Stage::LandlockRestrict) => RunError::Unavailable {
            what: "Landlock",
            cause: format!("failed to enforce the ruleset: {cause}"),
            fix: "use a kernel with Landlock enabled, or pass --allow-degraded".into(),
        },
        Some(s) => RunError::Setup {
            stage: s.describe(),
            explained: path
                .as_deref()
                .and_then(|p| crate::explain::setup_failure(plan, p, f.value)),
            path,
            cause,
        },
        None => RunError::Setup {
            stage: "set up the sandbox",
            path,
            cause,
            explained: None,
        },
    }
}
