//! `launch`: prepare everything that allocates or may fail slowly (Landlock ruleset, seccomp
//! program, idmapped mounts, C strings), fork the sandbox, write its id maps, supervise it and
//! collect its status. The child side lives in `sys::postfork`.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::raw::c_int;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sys::mediate;
use sys::postfork::{self, ChildSpec, CommandSpec, LandlockSpec, MediateSpec, MountOp, Stage};

mod collect;
mod landlock;
mod prepare;
mod start;
mod strings;
mod supervise;

use landlock::{changed_rule, Building, LandlockError};

use crate::error::RunError;
use crate::plan::{Mount, Plan};
use sandbox::Violation;

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
/// released, while it sets the sandbox up; see [`crate::BeforeCommand`]). In order: what is
/// refused, the preparation ([`prepare_all`]), the child's spec borrowing from it
/// ([`child_spec`]), the launch and supervision ([`launch_prepared`]).
pub(crate) fn launch_gated(
    plan: &Plan,
    options: Options,
    proxy: Option<ProxyStarter<'_>>,
    io: sandbox::RunIo,
    before_command: Option<crate::BeforeCommand>,
) -> Result<Outcome, RunError> {
    let started = Instant::now();
    let skipped = prepare::refusals(plan, options, &io)?;

    // ---- prepare: everything that allocates or may fail slowly, before the fork ----
    // (Spans are the supervisor's: the child after the fork never logs; see docs/design.md.)
    let prepare = tracing::debug_span!("prepare").entered();
    let Prepared {
        skipped,
        spawning,
        filter,
        slots,
        held,
        namespaces,
        disk_size,
        review_upper,
        strings,
        disk_channel,
        landlock,
        child_rules: child_rules_c,
        rlimits,
        proxy_channel,
        streams,
        groups,
    } = prepare_all(plan, options, proxy.is_some(), &io, skipped)?;
    let disk_options = disk_options(disk_size.as_deref());
    let disk_sock = disk_channel
        .as_ref()
        .map(|(_, init_end)| init_end.as_raw_fd());
    let ops = mount_ops(plan, &strings, &disk_options, disk_sock);
    let envp = strings::pointers(&strings.env);
    let argv = strings::pointers(&strings.argv);
    let candidates: Vec<&CStr> = strings.candidates.iter().map(CString::as_c_str).collect();
    let child_rules: Vec<postfork::ChildRule<'_>> = child_rules_c
        .iter()
        .map(|(c, access, dir, emptied)| postfork::ChildRule {
            path: c.as_c_str(),
            access: *access,
            dir: *dir,
            emptied: *emptied,
        })
        .collect();
    // The creation guard's rules, borrowed by the init.
    let (guard_roots, guard_tails) = strings::guard_strings(plan);
    let (guard_protected, guard_held) = guard_rules(plan, &guard_tails);
    let guard_index = protect::PatternIndex::build(&guard_protected);
    let creation = filter.as_deref().map(|filter| MediateSpec {
        filter,
        rules: protect::Rules {
            roots: &guard_roots,
            protected: &guard_protected,
            held: &guard_held,
            index: protect::PatternIndex::of(&guard_index),
            reviewed: (plan.creation_guard.reviewed.as_deref())
                .map_or(&[][..], |p| p.as_os_str().as_bytes()),
        },
    });
    let command = CommandSpec {
        cwd: &strings.cwd,
        argv: &argv,
        envp: &envp,
        candidates: &candidates,
        landlock: landlock.as_ref().map(|l| LandlockSpec {
            ruleset_fd: l.fd.as_raw_fd(),
            rules: &child_rules,
        }),
        rlimits: &rlimits,
    };
    let proxy_sock = proxy_channel
        .as_ref()
        .map(|(_, init_end)| init_end.as_raw_fd());
    let mut spec = child_spec(plan, &ops, command, creation, proxy_sock, &streams);

    // The run's cgroup, with a reaper that removes it should this process be killed.
    if let Some((_, init_end)) = &groups.join_channel {
        spec.join_sock = init_end.as_raw_fd();
        spec.join_count = groups.count;
    }
    // v1: the init joins by itself through `tasks` (no global lock); v2: the supervisor moves
    // it while it sets up, and it forks the command once told.
    let join_fds: Vec<c_int> = groups.join_tasks.iter().map(AsRawFd::as_raw_fd).collect();
    spec.join_tasks = &join_fds;
    // v2: the supervisor moves the init; either way the command waits for `before_command`.
    let move_group = groups.group.is_some() && join_fds.is_empty();
    spec.wait_group = move_group || before_command.is_some();

    // ---- launch and supervise ----
    drop(prepare);
    let launching = Launching {
        started,
        skipped,
        spawning,
        slots,
        held,
        namespaces,
        review_upper,
        disk_channel,
        proxy_channel,
        proxy,
        streams,
        groups,
        move_group,
        before_command,
        landlock_abi: landlock.as_ref().map(|l| l.abi),
    };
    launch_prepared(plan, options, &spec, launching, io)
}

/// What the supervisor prepares before the fork, all of it owned (the child's spec borrows
/// from it, and the launch takes the rest).
struct Prepared {
    skipped: Vec<String>,
    /// From the first descriptor meant for this run's init until the supervisor has closed
    /// its copies of them: no other run of this process may clone its init meanwhile (it
    /// would inherit them, and hold this run's report and output pipes open: both runs would
    /// wait).
    spawning: std::sync::MutexGuard<'static, ()>,
    /// The deny-list and mediated creation, one seccomp program.
    filter: Option<Vec<libc::sock_filter>>,
    slots: Vec<c_int>,
    held: Vec<OwnedFd>,
    namespaces: Vec<((String, String), sys::parent::IdmapNamespace)>,
    /// A review run's disk bound, as the tmpfs's `size` option.
    disk_size: Option<CString>,
    review_upper: Option<OwnedFd>,
    /// C strings the child borrows.
    strings: strings::Strings,
    disk_channel: Option<start::Channel>,
    landlock: Option<landlock::Landlock>,
    /// The command's Landlock rules: path, access, directory, emptied.
    child_rules: Vec<(CString, u64, bool, bool)>,
    rlimits: Vec<(c_int, u64)>,
    proxy_channel: Option<start::Channel>,
    streams: prepare::Streams,
    groups: prepare::Groups,
}

/// Everything that allocates or may fail slowly, before the fork: the Landlock ruleset (built
/// on a thread meanwhile), the seccomp program, the idmapped mounts, a review run's upper
/// layer, the C strings, the channels, the streams and the run's cgroup.
fn prepare_all(
    plan: &Plan,
    options: Options,
    proxy: bool,
    io: &sandbox::RunIo,
    mut skipped: Vec<String>,
) -> Result<Prepared, RunError> {
    let spawning = sys::parent::spawn_lock();
    // Built beside the set-up below, joined before the clone (see `Building`).
    let building = Building::start(plan.landlock.host_rules.clone());
    let landlock_skip_at = skipped.len();
    // The deny-list and mediated creation, one seccomp program: the command installs it with
    // a listener and hands that to the init. (Installing a filter is most of its cost.)
    let filter = prepare::seccomp_filter(plan, options, &mut skipped)?;

    let idmap_span = tracing::debug_span!("idmap").entered();
    let mut slots: Vec<c_int> = vec![-1; plan.slots];
    let (mut held, namespaces) = prepare::idmapped(plan, &mut slots)?;
    // A review run under a disk bound: the tmpfs its upper lives on, for the change set.
    let disk_size = plan
        .review
        .as_ref()
        .and_then(|v| v.disk_bytes)
        .map(|b| cstring(b.to_string()))
        .transpose()?;
    let disk_options = disk_options(disk_size.as_deref());
    let review_upper = prepare::review_by_supervisor(plan, &mut slots, &mut held, &disk_options)?;
    // The idmapping namespaces' helpers are reaped after the clone (with `held`, below), not
    // here: waiting for a helper to be scheduled and exit is a context switch on the start's
    // critical path (0.05-0.9 ms measured under load). Their descriptors reach the init with
    // the clone like every other the supervisor holds then, and it closes them first thing.
    drop(idmap_span);

    // C strings the child borrows. Built completely before any op borrows them.
    let strings = strings::Strings::new(plan)?;
    // An unprivileged caller's review run under a disk bound: the init makes the tmpfs and
    // hands its mount descriptor over this channel.
    let disk_channel = plan
        .mounts
        .iter()
        .any(|m| matches!(m, Mount::Overlay { disk: Some(_), .. }))
        .then(sys::parent::fd_channel)
        .transpose()
        .map_err(|e| RunError::io("create the disk bound's channel", e))?;
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
    let child_rules_c = strings::child_rules(plan, landlock.as_ref().map(|l| l.handled))?;
    let rlimits = strings::rlimits(plan);
    // Mode proxy: a channel for the init to hand over the listening socket it opens inside.
    let proxy_channel = prepare::proxy_channel(plan, proxy)?;
    let streams = prepare::streams(plan, options, io)?;
    let groups = tracing::debug_span!("cgroup").in_scope(|| prepare::groups(plan))?;
    Ok(Prepared {
        skipped,
        spawning,
        filter,
        slots,
        held,
        namespaces,
        disk_size,
        review_upper,
        strings,
        disk_channel,
        landlock,
        child_rules: child_rules_c,
        rlimits,
        proxy_channel,
        streams,
        groups,
    })
}

/// What the launch takes from the preparation (the child's spec borrows none of it: at most
/// the numbers of some of its descriptors, which it keeps open until the run's end).
struct Launching<'p> {
    started: Instant,
    skipped: Vec<String>,
    spawning: std::sync::MutexGuard<'static, ()>,
    slots: Vec<c_int>,
    held: Vec<OwnedFd>,
    namespaces: Vec<((String, String), sys::parent::IdmapNamespace)>,
    review_upper: Option<OwnedFd>,
    disk_channel: Option<start::Channel>,
    proxy_channel: Option<start::Channel>,
    proxy: Option<ProxyStarter<'p>>,
    streams: prepare::Streams,
    groups: prepare::Groups,
    /// v2: the supervisor moves the init into the run's group.
    move_group: bool,
    before_command: Option<crate::BeforeCommand>,
    landlock_abi: Option<i32>,
}

/// The launch: the init cloned on `spec`, its id maps written, the relays, groups, proxy and
/// terminal started as it sets the sandbox up, then the supervision until the command's end
/// and the collection of its outcome.
fn launch_prepared(
    plan: &Plan,
    options: Options,
    spec: &ChildSpec<'_>,
    launching: Launching<'_>,
    io: sandbox::RunIo,
) -> Result<Outcome, RunError> {
    let Launching {
        started,
        skipped,
        spawning,
        mut slots,
        held,
        namespaces,
        mut review_upper,
        disk_channel,
        proxy_channel,
        proxy,
        streams,
        groups,
        move_group,
        before_command,
        landlock_abi,
    } = launching;
    let prepare::Streams {
        terminal,
        output_pipes,
        // The command's stdin, held to the run's end as before the split (the init has its
        // own copy from the clone).
        stdin_given: _stdin_given,
        terminal_channel,
    } = streams;
    let prepare::Groups {
        name: group_name,
        reaper,
        join_channel,
        group,
        join_tasks,
        count: _,
    } = groups;
    let sanitize = options.sanitize_output;
    let _supervise = tracing::debug_span!("supervise").entered();
    // Until the init has everything it waits for (the clone, the id maps, the channels).
    let start_span = tracing::debug_span!("start").entered();
    // Ctrl-C from here on is caught (and passed on once the sandbox exists), not fatal. Best
    // effort: without the handlers, Ctrl-C still ends the sandbox with the supervisor.
    if io.process_signals {
        let _ = sys::parent::catch_signals();
    }
    let mut child = start::spawn(spec, &mut slots)?;
    drop(held);
    drop(namespaces);
    let control = io.control;
    let process_signals = io.process_signals;
    // Modes none and proxy: the kernel's count of what the command tries on the network it
    // lacks (under proxy: around the proxy). Only opened here, while the init surely exists.
    let net_watch = (plan.network.new_namespace)
        .then(|| sys::net_tries::Watch::open(child.pid, plan.network.proxy.is_some()))
        .flatten();
    // The init waits for its id maps: written first, the rest of the supervisor's start (the
    // relays' threads) overlaps with the init's set-up.
    let ids = &plan.ids;
    let mapped =
        sys::parent::write_id_maps(child.pid, &ids.uid_map, &ids.gid_map, ids.deny_setgroups)
            .and_then(|_| child.release());
    let relays = start::relay_outputs(
        &child,
        output_pipes,
        [io.stdout, io.stderr],
        plan.output_limit,
        sanitize,
    )?;
    let group = start::join_v1(plan, &child, join_channel, group, &group_name, &mapped)?;
    drop(join_tasks);
    let gate = start::Gate {
        move_group,
        wait: spec.wait_group,
        before_command,
    };
    start::release(plan, &mut child, group.as_ref(), mapped, gate)?;
    if let Some(channel) = disk_channel {
        review_upper = start::receive_disk(&child, channel)?;
    }
    if let (Some(channel), Some(proxy)) = (proxy_channel, proxy) {
        start::serve_proxy(&child, channel, proxy)?;
    }
    let attached = match (terminal_channel, terminal) {
        (Some(channel), Some(caller)) => start::attach(
            plan,
            &child,
            channel,
            &caller,
            options,
            process_signals,
            &control,
        )?,
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
/// The child's spec: the plan's namespaces, ids and mounts (`ops`), the `command`, mediated
/// creation (`creation`), the proxy's channel (`proxy_sock`, the init's end) and the
/// command's streams; the cgroup's fields are set by the caller.
fn child_spec<'a>(
    plan: &'a Plan,
    ops: &'a [MountOp<'a>],
    command: CommandSpec<'a>,
    creation: Option<MediateSpec<'a>>,
    proxy_sock: Option<c_int>,
    streams: &prepare::Streams,
) -> ChildSpec<'a> {
    let output_pipes = &streams.output_pipes;
    ChildSpec {
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
        mounts: ops,
        command,
        new_network: plan.network.new_namespace,
        // Mode proxy: the init opens the listening socket inside and hands it over.
        proxy: plan
            .network
            .proxy
            .zip(proxy_sock)
            .map(|(addr, sock)| sys::postfork::ProxySpec {
                addr: addr.ip().octets(),
                port: addr.port(),
                sock,
            }),
        terminal: (streams.terminal.as_ref())
            .zip(streams.terminal_channel.as_ref())
            .map(|(t, (_, init_end))| sys::postfork::TerminalSpec {
                sock: init_end.as_raw_fd(),
                ptmx: c"/dev/pts/ptmx",
                settings: t.settings,
                size: t.size,
                streams: t.streams,
            }),
        stdin: streams.stdin_given.as_ref().map_or(-1, |f| f.as_raw_fd()),
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
        mediate: creation,
    }
}

/// The tmpfs options of a review run's disk bound (`size`, from `--disk`): none without one.
fn disk_options(size: Option<&CStr>) -> Vec<(&CStr, &CStr)> {
    size.map(|size| vec![(c"size", size), (c"mode", c"0700")])
        .unwrap_or_default()
}

/// The init's mount steps, borrowing the plan's C strings; a review view under a disk bound
/// gets the tmpfs's options and the init's end of the channel (`disk_sock`) it hands its
/// mount over.
fn mount_ops<'a>(
    plan: &'a Plan,
    strings: &'a strings::Strings,
    disk_options: &'a [(&'a CStr, &'a CStr)],
    disk_sock: Option<c_int>,
) -> Vec<MountOp<'a>> {
    plan.mounts
        .iter()
        .zip(&strings.mounts)
        .map(|(m, (p, extra))| {
            let mut op = mount_op(m, p, extra.as_deref(), &plan.identities);
            if let (
                MountOp::Overlay { disk, .. },
                Mount::Overlay {
                    disk: Some((_, mode)),
                    ..
                },
                Some(sock),
            ) = (&mut op, m, disk_sock)
            {
                *disk = Some(sys::postfork::DiskBound {
                    options: disk_options,
                    mode: *mode,
                    sock,
                });
            }
            op
        })
        .collect()
}

/// The creation guard's protected patterns (a base and its tail, from `tails`) and held
/// configs, as the init borrows them.
fn guard_rules<'a>(
    plan: &'a Plan,
    tails: &'a [Vec<&'a [u8]>],
) -> (Vec<protect::Protected<'a>>, Vec<protect::Held<'a>>) {
    let guard = &plan.creation_guard;
    let protected = (guard.protected.iter())
        .zip(tails)
        .map(|(g, tail)| protect::Protected {
            base: g.base.as_os_str().as_bytes(),
            tail,
        })
        .collect();
    let held = (guard.held_configs.iter())
        .map(|(path, slot)| protect::Held {
            path: path.as_os_str().as_bytes(),
            slot: *slot,
        })
        .collect();
    (protected, held)
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
        code: sandbox::Code::SandboxViolation,
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
pub use sandbox::REVIEW_FIX;

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
