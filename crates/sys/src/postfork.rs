//! The sandbox's whole life after `clone`, in two processes:
//!
//! 1. **init**: the supervisor's direct child, created by one `clone` with every namespace flag,
//!    so it is pid 1 of the new pid namespace. It first closes every descriptor it inherited
//!    but does not need ([`ChildSpec::inherited`]: another run of the same process may have
//!    pipes, pidfds and channels open in the supervisor at the clone). It leaves the caller's session (it opens files
//!    for the command: it must have no controlling terminal), waits until the supervisor has
//!    written its uid/gid maps, takes the sandbox ids, makes itself non-dumpable, arms its
//!    parent-death signal, builds the mount tree in the planned order, sets the hostname,
//!    brings loopback up, adds the Landlock rules for the mounts it made and enforces the
//!    command's ruleset on itself, empties the capability bounding set, starts the command
//!    (sharing its memory until the command's `execve`, as after `vfork`: no copy of the
//!    address space to make and throw away), points its own stdin, stdout and stderr at
//!    `/dev/null` (the command has the caller's), drops its own capabilities, then serves
//!    mediated creation ([`crate::mediate`]) with the listener the command hands it, forwards
//!    signals to the command and reaps. When the command ends it kills whatever is left in the
//!    namespace and exits with the command's code.
//! 2. **command**: new session, the supervisor's output pipes as fds 1 and 2 (when given),
//!    working directory, every capability dropped (the bounding set came empty), `no_new_privs`,
//!    Landlock (a domain nested in the init's), close-on-exec for every inherited descriptor
//!    above 2, the seccomp filter (the deny-list and mediated creation in one program; its
//!    listener sent to the init and closed), `execve`.
//!
//! Nothing here allocates, panics or decides: the [`ChildSpec`] was prepared by the `native`
//! crate. A failure is reported as a `Copy` [`Report`] over the close-on-exec report pipe and
//! the process `_exit`s with 125 (126/127 for exec failures). The init is a raw `clone`
//! ([`raw::clone_fork`]) and the command a `clone(CLONE_VM | CLONE_VFORK)` on a stack of its
//! own, never glibc's `fork`, so no libc lock is taken after the first one.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_ulong};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::mediate;
use crate::raw::{self, Errno, MountAttr};
use protect::Rules;

/// Where in the child's life a failure happened. Stable numbers (they cross a pipe).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    ParentGone = 1,
    WaitForMaps = 3,
    SetGroups = 5,
    SetIds = 6,
    Mount = 7,
    Hostname = 8,
    Loopback = 9,
    ForkCommand = 10,
    Setsid = 11,
    Chdir = 12,
    LandlockRule = 13,
    DropCapabilities = 14,
    NoNewPrivs = 15,
    LandlockRestrict = 16,
    CloseDescriptors = 17,
    Seccomp = 18,
    Exec = 19,
    Mediation = 20,
    ProxyListener = 21,
    Rlimit = 22,
    Stdio = 23,
    WaitForGroup = 24,
    JoinGroup = 25,
    Terminal = 26,
}

impl Stage {
    pub fn from_u32(v: u32) -> Option<Stage> {
        use Stage::*;
        const ALL: [Stage; 24] = [
            ParentGone,
            WaitForMaps,
            SetGroups,
            SetIds,
            Mount,
            Hostname,
            Loopback,
            ForkCommand,
            Setsid,
            Chdir,
            LandlockRule,
            DropCapabilities,
            NoNewPrivs,
            LandlockRestrict,
            CloseDescriptors,
            Seccomp,
            Exec,
            Mediation,
            ProxyListener,
            Rlimit,
            Stdio,
            WaitForGroup,
            JoinGroup,
            Terminal,
        ];
        ALL.into_iter().find(|s| *s as u32 == v)
    }

    /// A short verb phrase for messages: "failed to <describe>".
    pub fn describe(self) -> &'static str {
        match self {
            Stage::ParentGone => "stay attached to the supervisor",
            Stage::WaitForMaps => "receive the user-namespace id maps",
            Stage::SetGroups => "drop supplementary groups",
            Stage::SetIds => "switch to the sandbox user and group",
            Stage::Mount => "build the sandbox filesystem",
            Stage::Hostname => "set the sandbox hostname",
            Stage::Loopback => "bring up the sandbox loopback interface",
            Stage::ForkCommand => "start the command process",
            Stage::Setsid => "start a new session",
            Stage::Chdir => "enter the working directory",
            Stage::LandlockRule => "add a Landlock rule",
            Stage::DropCapabilities => "drop capabilities",
            Stage::NoNewPrivs => "set no_new_privs",
            Stage::LandlockRestrict => "enforce the Landlock ruleset",
            Stage::CloseDescriptors => "close inherited descriptors",
            Stage::Seccomp => "install the seccomp filter",
            Stage::Exec => "execute the program",
            Stage::Mediation => "hand the mediation listener to the init",
            Stage::ProxyListener => "open the proxy's listening socket in the sandbox",
            Stage::Rlimit => "set a resource limit",
            Stage::Stdio => "connect the command's stdin, stdout and stderr",
            Stage::WaitForGroup => "wait to be placed in the run's cgroup",
            Stage::JoinGroup => "join the run's cgroup",
            Stage::Terminal => "give the command its own terminal",
        }
    }
}

/// What a record on the report pipe says.
pub const REPORT_FAILURE: u32 = 1;
pub const REPORT_STATUS: u32 = 4;

/// One fixed-size record on the report pipe.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Report {
    pub kind: u32,
    pub stage: u32,
    /// Index of the mount step or Landlock rule that failed, else 0.
    pub index: u32,
    /// errno for failures, raw wait status for `REPORT_STATUS`.
    pub value: i32,
}

impl Report {
    pub const SIZE: usize = 16;

    pub fn to_bytes(self) -> [u8; Report::SIZE] {
        let mut b = [0u8; Report::SIZE];
        b[0..4].copy_from_slice(&self.kind.to_ne_bytes());
        b[4..8].copy_from_slice(&self.stage.to_ne_bytes());
        b[8..12].copy_from_slice(&self.index.to_ne_bytes());
        b[12..16].copy_from_slice(&self.value.to_ne_bytes());
        b
    }

    pub fn from_bytes(b: &[u8; Report::SIZE]) -> Report {
        let word = |i: usize| [b[i], b[i + 1], b[i + 2], b[i + 3]];
        Report {
            kind: u32::from_ne_bytes(word(0)),
            stage: u32::from_ne_bytes(word(4)),
            index: u32::from_ne_bytes(word(8)),
            value: i32::from_ne_bytes(word(12)),
        }
    }
}

/// `(st_dev, st_ino)` a mount step's path must still have (what the planner saw): a
/// directory renamed into its place by a concurrent run fails the step with `ESTALE`.
pub type Identity = (u64, u64);

/// An [`Identity`] whose device is not compared (a path inside a review run's overlay, which
/// keeps the workspace's inode numbers under a device of its own).
pub const ANY_DEVICE: u64 = u64::MAX;

/// One step of building the sandbox's mount tree, executed by the init in order.
#[derive(Debug, Clone, Copy)]
pub enum MountOp<'a> {
    /// Make every inherited mount private: nothing we do propagates to the host.
    MakeRootPrivate,
    /// Detached copy (`open_tree(OPEN_TREE_CLONE)`) of `source` into `slots[slot]`, taken
    /// before later steps cover its path.
    Clone {
        source: &'a CStr,
        slot: usize,
        recursive: bool,
    },
    /// The inherited tree becomes read-only, nosuid and nodev, recursively.
    ReadOnlyRoot,
    /// A fresh tmpfs at `target`.
    Tmpfs {
        target: &'a CStr,
        data: &'a CStr,
        flags: c_ulong,
    },
    /// A directory inside a tmpfs made by an earlier step, with exactly `mode`.
    Mkdir {
        path: &'a CStr,
        mode: u32,
    },
    /// An empty regular file inside a tmpfs made by an earlier step (a file mount point).
    File {
        path: &'a CStr,
        mode: u32,
    },
    Symlink {
        target: &'a CStr,
        path: &'a CStr,
    },
    /// Attach the detached mount in `slots[slot]` at `target`: always nosuid, nodev unless it
    /// is a device node, read-only if asked.
    Attach {
        slot: usize,
        target: &'a CStr,
        readonly: bool,
        device: bool,
    },
    /// A new procfs for the sandbox's own pid namespace.
    Proc {
        target: &'a CStr,
    },
    /// A new devpts instance.
    Devpts {
        target: &'a CStr,
    },
    /// Re-bind `path` onto itself read-only (protected paths, `/proc/sys`).
    ReadOnly {
        path: &'a CStr,
        expect: Option<Identity>,
    },
    /// Open the existing regular file `path` for writing into `slots[slot]`, before a later
    /// step makes it read-only: the init rewrites a protected git config through it when the
    /// command renames a checked new version onto it (see [`crate::mediate`]).
    Hold {
        path: &'a CStr,
        slot: usize,
    },
    /// Re-bind `path` onto itself, writable: a mount point cannot be renamed or removed.
    Pin {
        path: &'a CStr,
        expect: Option<Identity>,
    },
    /// Cover a directory with an empty, read-only, mode-000 directory.
    MaskDir {
        target: &'a CStr,
        expect: Option<Identity>,
    },
    /// Cover a file with an empty, read-only, mode-000 file.
    MaskFile {
        target: &'a CStr,
        expect: Option<Identity>,
    },
    /// Cover a directory with an empty, read-only, readable (0555) directory.
    EmptyDir {
        target: &'a CStr,
        expect: Option<Identity>,
    },
    /// Cover a file with an empty, read-only, readable (0444) file.
    EmptyFile {
        target: &'a CStr,
        expect: Option<Identity>,
    },
    /// A detached overlay into `slots[slot]` (see [`crate::overlay`]): the workspace `lower`
    /// read through, every write going to `changes/upper`. Made in the sandbox's user
    /// namespace (`userxattr`), before the tree becomes read-only (the upper must be writable).
    Overlay {
        lower: &'a CStr,
        changes: &'a CStr,
        slot: usize,
        /// Under a disk bound the upper is a tmpfs of that size instead of `changes/upper`.
        disk: Option<DiskBound<'a>>,
    },
}

/// A review run's disk bound (see [`crate::overlay::bounded_upper`]).
#[derive(Debug, Clone, Copy)]
pub struct DiskBound<'a> {
    /// The tmpfs's options (`size`, `mode`).
    pub options: &'a [(&'a CStr, &'a CStr)],
    /// Mode of the upper's top directory (the workspace's).
    pub mode: u32,
    /// The init's end of a channel to the supervisor, for the tmpfs's mount descriptor.
    pub sock: c_int,
}

/// Landlock rules the command adds for mounts that exist only after the fork (their inodes
/// are new, so the supervisor could not open them), plus the ruleset to enforce.
#[derive(Debug, Clone, Copy)]
pub struct LandlockSpec<'a> {
    pub ruleset_fd: c_int,
    pub rules: &'a [ChildRule<'a>],
}

/// One of the init's Landlock rules: `path` (canonical in the sandbox's mount namespace, the
/// init's own mounts) is looked up through no symbolic link and must be a directory when
/// `dir`, a regular file otherwise, and with `emptied` the init's own empty cover
/// (`read_empty`: on the masks' tmpfs). Anything else refuses the run (`ESTALE`, `ELOOP`):
/// a path changed after planning never moves a grant.
#[derive(Debug, Clone, Copy)]
pub struct ChildRule<'a> {
    pub path: &'a CStr,
    pub access: u64,
    pub dir: bool,
    pub emptied: bool,
}

/// Everything the command process needs, prepared before the fork.
#[derive(Debug, Clone, Copy)]
pub struct CommandSpec<'a> {
    pub cwd: &'a CStr,
    /// NULL-terminated argv and envp arrays whose strings outlive the fork.
    pub argv: &'a [*const c_char],
    pub envp: &'a [*const c_char],
    /// Paths tried in order with `execve` (the PATH search was done by the planner).
    pub candidates: &'a [&'a CStr],
    pub landlock: Option<LandlockSpec<'a>>,
    /// Resource limits (`RLIMIT_*`, value) set on the command before `execve`.
    pub rlimits: &'a [(c_int, u64)],
}

/// The command's seccomp filter (the deny-list with mediated creation, see
/// [`crate::mediate`]): the command installs `filter` and hands its listener to the init,
/// which serves it under `rules`.
#[derive(Debug, Clone, Copy)]
pub struct MediateSpec<'a> {
    pub filter: &'a [libc::sock_filter],
    pub rules: Rules<'a>,
}

/// The command's own pseudo-terminal. The init opens it from the sandbox's devpts instance
/// (`/dev/pts`, mounted by a [`MountOp::Devpts`] step), so that the command's `/dev/tty`,
/// `tty` and `/dev/pts` agree and nothing of the caller's terminal is inside. The command
/// makes it its controlling terminal in a session of its own (job control works); the init
/// sends the master side to the supervisor, which relays it to and from the caller's terminal.
#[derive(Debug, Clone, Copy)]
pub struct TerminalSpec<'a> {
    /// The init's end of the supervisor's descriptor channel, for the master side.
    pub sock: c_int,
    /// The path of the sandbox's `/dev/ptmx`.
    pub ptmx: &'a CStr,
    /// The terminal's initial settings and window size: the caller's.
    pub settings: libc::termios,
    pub size: libc::winsize,
    /// Which of the command's stdin, stdout and stderr are the terminal.
    pub streams: [bool; 3],
}

/// Everything the init needs, prepared before the clone.
#[derive(Debug, Clone, Copy)]
pub struct ChildSpec<'a> {
    /// Write end of the report pipe.
    pub report_fd: c_int,
    /// Read end of the sync pipe: one byte once the id maps are written. The supervisor keeps
    /// the write end open for the whole run, so a hang-up means the supervisor is gone.
    pub sync_fd: c_int,
    /// Namespace flags for the clone that creates the init.
    pub namespaces: c_int,
    pub uid: u32,
    pub gid: u32,
    pub clear_groups: bool,
    pub hostname: &'a [u8],
    pub mounts: &'a [MountOp<'a>],
    pub command: CommandSpec<'a>,
    pub mediate: Option<MediateSpec<'a>>,
    /// Whether the init is in a new network namespace (then it brings loopback up).
    pub new_network: bool,
    /// The egress proxy's listening socket, made by the init inside the sandbox's network
    /// namespace and sent to the supervisor, which serves it from the host side.
    pub proxy: Option<ProxySpec>,
    /// The command's own terminal, when the caller's stdin, stdout or stderr is one: those
    /// streams become the new terminal (and `stdin`/`stdout`/`stderr` below are -1 for them).
    pub terminal: Option<TerminalSpec<'a>>,
    /// When >= 0, the command's fd 0: `/dev/null` in place of a terminal that is not the run's
    /// own (`--no-tty`, a library run: no descriptor of the caller's terminal is ever handed
    /// over); -1 keeps the caller's.
    /// Same rules as [`ChildSpec::stdout`].
    pub stdin: c_int,
    /// When >= 0, the command's fd 1: the write end of the supervisor's output pipe; -1 keeps
    /// the caller's. Made close-on-exec by the supervisor (only the command's fd 1 copy
    /// survives `execve`); above 2 in practice (Rust's runtime keeps 0..=2 open).
    pub stdout: c_int,
    /// When >= 0, the command's fd 2: the write end of the supervisor's output pipe; -1 keeps
    /// the caller's. Same rules as [`ChildSpec::stdout`].
    pub stderr: c_int,
    /// The supervisor's read ends of those output pipes (-1: none). The init inherits them
    /// with the clone (close-on-exec does not apply without `execve`) and closes them first
    /// thing with everything else it does not need ([`ChildSpec::inherited`]): the supervisor must hold the only read end, so
    /// that when it stops reading (its own output was closed, `stockade run ... | head -1`)
    /// the command gets `EPIPE`/`SIGPIPE` as in a plain pipeline instead of blocking on a
    /// full pipe that nobody drains.
    pub output_readers: [c_int; 2],
    /// The supervisor moves the init into the run's cgroup after releasing it, and says so
    /// with a second byte on the sync pipe: the init sets up the sandbox meanwhile (the move
    /// can wait for an RCU grace period) and forks the command only after that byte, so the
    /// command starts inside the group.
    pub wait_group: bool,
    /// cgroup v1 `tasks` files of the run's groups, opened for writing by the supervisor: the
    /// init writes `0` (itself) to each first thing. A thread moving itself through `tasks`
    /// skips the global threadgroup lock that moving a process through `cgroup.procs` takes,
    /// and with it an RCU grace period (milliseconds) per run.
    pub join_tasks: &'a [c_int],
    /// cgroup v1 groups made after the clone, while the init sets up the sandbox: a socket
    /// over which the supervisor sends each group's `tasks` file (opened for writing by it),
    /// [`ChildSpec::join_count`] of them. The init writes `0` (itself, as for
    /// [`ChildSpec::join_tasks`]) to each before it forks the command, so the command starts
    /// inside every group; end of stream before the last is a failure. -1: none.
    pub join_sock: c_int,
    /// How many `tasks` files come over [`ChildSpec::join_sock`].
    pub join_count: usize,
}

impl ChildSpec<'_> {
    /// The supervisor's descriptors this run's init needs (negative entries are "none"):
    /// everything else it inherits at the clone is closed first thing ([`init`]). The
    /// supervisor's read ends of the output pipes ([`ChildSpec::output_readers`]) are not
    /// among them. Allocates nothing.
    pub fn inherited(&self) -> impl Iterator<Item = c_int> + '_ {
        let disk = self.mounts.iter().filter_map(|op| match op {
            MountOp::Overlay { disk: Some(d), .. } => Some(d.sock),
            _ => None,
        });
        [
            self.report_fd,
            self.sync_fd,
            self.stdin,
            self.stdout,
            self.stderr,
            self.proxy.map_or(-1, |p| p.sock),
            self.terminal.map_or(-1, |t| t.sock),
            self.command.landlock.map_or(-1, |l| l.ruleset_fd),
            self.join_sock,
        ]
        .into_iter()
        .chain(self.join_tasks.iter().copied())
        .chain(disk)
    }
}

/// Where the proxy listens inside the sandbox, and the socket to hand the listener over.
#[derive(Debug, Clone, Copy)]
pub struct ProxySpec {
    pub addr: [u8; 4],
    pub port: u16,
    /// The init's end of a socketpair made by the supervisor.
    pub sock: c_int,
}

pub(crate) fn report(fd: c_int, r: Report) {
    // A failed report cannot be reported; the exit code still tells the supervisor.
    let _ = raw::write_all(fd, &r.to_bytes());
}

fn fail(fd: c_int, stage: Stage, index: usize, e: Errno, code: c_int) -> ! {
    report(
        fd,
        Report {
            kind: REPORT_FAILURE,
            stage: stage as u32,
            index: index as u32,
            value: e.0,
        },
    );
    raw::exit(code)
}

/// The exit code a shell would show for a raw wait status.
pub fn exit_code(status: c_int) -> c_int {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        125
    }
}

/// The command's pid, for the init's signal-forwarding handler.
static COMMAND_PID: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(sig: c_int) {
    let pid = COMMAND_PID.load(Ordering::Relaxed);
    if pid > 0 {
        // To the command's process group, as a terminal's Ctrl-C reaches the whole foreground
        // job (a shell waiting for `sleep` runs its trap at once, not after the sleep); the
        // command leads its own session, so its group is its pid. If the group is gone but
        // the command is not (it moved itself to another group), to the command alone.
        // kill is async-signal-safe; a failure (command already gone) needs no handling.
        if raw::kill(-pid, sig).is_err() {
            let _ = raw::kill(pid, sig);
        }
    }
}

/// Signals the supervisor and the init pass on to the command.
pub const FORWARDED_SIGNALS: [c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Entry point of the init (pid 1 of the sandbox). Never returns.
///
/// One step after the other, each a function below (a failure is reported and ends the init
/// inside the step): first away from the caller and into the sandbox's ids, then the sandbox
/// itself (mounts, names, network, terminal, Landlock), then the command, then the init's
/// watch over it.
pub fn init(spec: &ChildSpec<'_>, slots: &mut [c_int]) -> ! {
    close_inherited(spec, slots);
    detach_from_caller(spec);
    join_opened_groups(spec);
    wait_for_maps(spec);
    take_sandbox_ids(spec);
    make_undumpable();
    die_with_supervisor(spec);
    let mask_fd = build_mount_tree(spec, slots);
    set_hostname_and_loopback(spec);
    open_proxy_listener(spec);
    let (streams, controlling) = open_terminal(spec);
    confine_init(spec, mask_fd);
    let (init_sock, cmd_sock) = mediation_channel(spec);
    join_sent_groups(spec);
    wait_for_group(spec);
    let cmd = start_command(spec, streams, controlling, init_sock, cmd_sock);
    release_command_streams(spec, controlling);
    let listener = receive_listener(spec, cmd, init_sock, cmd_sock);
    close_set_up(spec, listener, slots);
    forward_signals(cmd);
    drop_init_privileges(listener);
    let status = serve_command(spec, listener, cmd, slots);
    finish(spec, status)
}

/// Closes every descriptor inherited at the clone but not this run's.
fn close_inherited(spec: &ChildSpec<'_>, slots: &[c_int]) {
    let fd = spec.report_fd;
    // First of all, give up every descriptor the supervisor held at the clone but this run
    // does not need (the clone copied them all, close-on-exec or not, and the init never
    // execs): another run of the same process has pipes, pidfds, channels, a terminal's
    // master side open there, and an init that held them while it sets up would keep that
    // run's input, output or report open, or its supervisor from seeing this one's end.
    // Kept: the spec's own descriptors and the slots the supervisor filled.
    if let Err(e) = raw::close_all_except_each(|| spec.inherited().chain(slots.iter().copied())) {
        fail(fd, Stage::CloseDescriptors, 0, e, 125);
    }
}

/// Leaves the caller's controlling terminal and process group.
fn detach_from_caller(spec: &ChildSpec<'_>) {
    let fd = spec.report_fd;
    // Rid of the caller's controlling terminal before anything else: the init performs opens
    // for the command (mediated creation), and an `open("/dev/tty")` made by a process that
    // still had the caller's controlling terminal would hand the command the caller's
    // terminal. Out of the caller's process group too: the terminal's signals and a kill of
    // the caller's group are the supervisor's, which stays in the caller's foreground group
    // and forwards Ctrl-C. Not a session of its own (the command makes one below, where it
    // matters: it leads it, and takes its own terminal there): each session is a scheduler
    // autogroup, 0.5-1 ms of the start's critical path (`leave_caller_terminal`, which falls
    // back to `setsid` whenever it cannot show the terminal is gone).
    if let Err(e) = raw::leave_caller_terminal() {
        fail(fd, Stage::Setsid, 0, e, 125);
    }
}

/// Joins the cgroups whose `tasks` files the supervisor opened before the clone
/// ([`ChildSpec::join_tasks`]).
fn join_opened_groups(spec: &ChildSpec<'_>) {
    let fd = spec.report_fd;
    for (i, tasks) in spec.join_tasks.iter().enumerate() {
        if let Err(e) = raw::write_all(*tasks, b"0") {
            fail(fd, Stage::JoinGroup, i, e, 125);
        }
        raw::close(*tasks);
    }
}

/// Waits for the sync pipe's first byte: the supervisor has written the id maps.
fn wait_for_maps(spec: &ChildSpec<'_>) {
    let fd = spec.report_fd;
    let mut byte = [0u8; 1];
    match raw::read(spec.sync_fd, &mut byte) {
        Ok(1) => {}
        Ok(_) => fail(fd, Stage::WaitForMaps, 0, Errno(libc::EPIPE), 125),
        Err(e) => fail(fd, Stage::WaitForMaps, 0, e, 125),
    }
}

/// Drops the supplementary groups (when asked) and takes the sandbox's gid and uid.
fn take_sandbox_ids(spec: &ChildSpec<'_>) {
    let fd = spec.report_fd;
    if spec.clear_groups {
        if let Err(e) = raw::clear_groups() {
            fail(fd, Stage::SetGroups, 0, e, 125);
        }
    }
    if let Err(e) = raw::setresgid(spec.gid).and_then(|_| raw::setresuid(spec.uid)) {
        fail(fd, Stage::SetIds, 0, e, 125);
    }
}

/// Makes the init non-dumpable.
fn make_undumpable() {
    // Not dumpable from here on (a root caller's init already is: its uid changed): the
    // supervisor wrote the id maps before the byte above (`wait_for_maps`), and nothing in
    // the sandbox may trace the init or open its /proc files (its descriptors, its memory) —
    // not even in the moment between the command's `execve` and the init's last set-up
    // steps.
    let _ = raw::prctl(libc::PR_SET_DUMPABLE, 0, 0);
}

/// Arms the parent-death signal and checks the supervisor is still there.
fn die_with_supervisor(spec: &ChildSpec<'_>) {
    let fd = spec.report_fd;
    // Die with the supervisor. Armed only now because the kernel clears the setting when the
    // uid or gid changes; a supervisor that died before this point has hung up the sync pipe.
    // The init's credentials never change after this.
    if let Err(e) = raw::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as c_ulong, 0) {
        fail(fd, Stage::ParentGone, 0, e, 125);
    }
    match raw::pipe_writers_gone(spec.sync_fd) {
        Ok(false) if !spec.wait_group => raw::close(spec.sync_fd),
        Ok(false) => {}
        Ok(true) => fail(fd, Stage::ParentGone, 0, Errno(libc::ESRCH), 125),
        Err(e) => fail(fd, Stage::ParentGone, 0, e, 125),
    }
}

/// Builds the sandbox's mount tree in the planned order. Returns the masks' detached tmpfs
/// (-1: none made).
fn build_mount_tree(spec: &ChildSpec<'_>, slots: &mut [c_int]) -> c_int {
    let fd = spec.report_fd;
    raw::umask(0o022);
    let mut mask_fd: c_int = -1;
    for (i, op) in spec.mounts.iter().enumerate() {
        if let Err(e) = apply_mount(op, slots, &mut mask_fd) {
            fail(fd, Stage::Mount, i, e, 125);
        }
    }
    // The masks' detached tmpfs stays open until the command has started: closing the last
    // reference to a detached mount dissolves it, which waits for an RCU grace period (50 µs
    // to 0.5 ms measured here), and the command need not wait for that. It is close-on-exec,
    // so the command never holds it past its `execve`; the init's close of what its set-up
    // left open, once the command runs, closes it.
    mask_fd
}

/// Sets the sandbox's hostname, and brings loopback up in a new network namespace.
fn set_hostname_and_loopback(spec: &ChildSpec<'_>) {
    let fd = spec.report_fd;
    if let Err(e) = raw::sethostname(spec.hostname) {
        fail(fd, Stage::Hostname, 0, e, 125);
    }
    if spec.new_network {
        if let Err(e) = raw::loopback_up() {
            fail(fd, Stage::Loopback, 0, e, 125);
        }
    }
}

/// Opens the egress proxy's listening socket in the sandbox and sends it to the supervisor
/// ([`ChildSpec::proxy`]).
fn open_proxy_listener(spec: &ChildSpec<'_>) {
    let fd = spec.report_fd;
    if let Some(p) = spec.proxy {
        let sent = raw::tcp_listen(p.addr, p.port, 1024).and_then(|listener| {
            let r = raw::send_fd(p.sock, listener);
            raw::close(listener);
            r
        });
        raw::close(p.sock);
        if let Err(e) = sent {
            fail(fd, Stage::ProxyListener, 0, e, 125);
        }
    }
}

/// Opens the command's own terminal ([`ChildSpec::terminal`]) and sends its master side to
/// the supervisor. Returns the command's stdin, stdout and stderr, and its controlling
/// terminal (-1: none).
fn open_terminal(spec: &ChildSpec<'_>) -> ((c_int, c_int, c_int), c_int) {
    let fd = spec.report_fd;
    // The command's terminal comes from the sandbox's own devpts, opened before Landlock
    // (the init's rules need not grant /dev/pts/ptmx); the master side goes to the supervisor.
    let mut streams = (spec.stdin, spec.stdout, spec.stderr);
    let mut controlling: c_int = -1;
    if let Some(t) = spec.terminal {
        let (master, slave) = match raw::open_pty(t.ptmx, &t.settings, &t.size) {
            Ok(pair) => pair,
            Err(e) => fail(fd, Stage::Terminal, 0, e, 125),
        };
        let sent = raw::send_fd(t.sock, master);
        raw::close(master);
        raw::close(t.sock);
        if let Err(e) = sent {
            fail(fd, Stage::Terminal, 1, e, 125);
        }
        let [stdin, stdout, stderr] = t.streams;
        if stdin {
            streams.0 = slave;
        }
        if stdout {
            streams.1 = slave;
        }
        if stderr {
            streams.2 = slave;
        }
        controlling = slave;
    }
    (streams, controlling)
}

/// Adds the Landlock rules for the init's own mounts and enforces the command's ruleset on
/// the init.
fn confine_init(spec: &ChildSpec<'_>, mask_fd: c_int) {
    let fd = spec.report_fd;
    // The init takes the command's Landlock rules itself: it performs mediated calls for the
    // command and must not be able to do more than the command could. The command's domain
    // will be nested in this one.
    if let Some(ll) = spec.command.landlock {
        for (i, rule) in ll.rules.iter().enumerate() {
            let added = open_child_rule(rule, mask_fd).and_then(|pfd| {
                let r = raw::landlock_add_path_rule(ll.ruleset_fd, pfd, rule.access);
                raw::close(pfd);
                r
            });
            if let Err(e) = added {
                fail(fd, Stage::LandlockRule, i, e, 125);
            }
        }
        if let Err(e) = raw::landlock_restrict_self(ll.ruleset_fd) {
            fail(fd, Stage::LandlockRestrict, 0, e, 125);
        }
    }
}

/// The channel over which the command hands the init its mediation listener: the init's end
/// and the command's (-1, -1 without mediation).
fn mediation_channel(spec: &ChildSpec<'_>) -> (c_int, c_int) {
    let fd = spec.report_fd;
    match spec.mediate {
        Some(_) => match raw::socketpair() {
            Ok(pair) => pair,
            Err(e) => fail(fd, Stage::ForkCommand, 0, e, 125),
        },
        None => (-1, -1),
    }
}

/// Joins the cgroups made after the clone, whose `tasks` files come over
/// [`ChildSpec::join_sock`].
fn join_sent_groups(spec: &ChildSpec<'_>) {
    let fd = spec.report_fd;
    if spec.join_sock >= 0 {
        for i in 0..spec.join_count {
            let tasks = match raw::recv_fd(spec.join_sock) {
                Ok(Some(tasks)) => tasks,
                Ok(None) => fail(fd, Stage::JoinGroup, i, Errno(libc::EPIPE), 125),
                Err(e) => fail(fd, Stage::JoinGroup, i, e, 125),
            };
            if let Err(e) = raw::write_all(tasks, b"0") {
                fail(fd, Stage::JoinGroup, i, e, 125);
            }
            raw::close(tasks);
        }
        raw::close(spec.join_sock);
    }
}

/// Waits for the sync pipe's second byte when the supervisor moves the init into the run's
/// cgroup ([`ChildSpec::wait_group`]).
fn wait_for_group(spec: &ChildSpec<'_>) {
    let fd = spec.report_fd;
    if spec.wait_group {
        let mut byte = [0u8; 1];
        match raw::read(spec.sync_fd, &mut byte) {
            Ok(1) => raw::close(spec.sync_fd),
            Ok(_) => fail(fd, Stage::WaitForGroup, 0, Errno(libc::EPIPE), 125),
            Err(e) => fail(fd, Stage::WaitForGroup, 0, e, 125),
        }
    }
}

/// Empties the capability bounding set and starts the command (see [`command`]); returns
/// once the command has called `execve` or exited, with its pid.
fn start_command(
    spec: &ChildSpec<'_>,
    streams: (c_int, c_int, c_int),
    controlling: c_int,
    init_sock: c_int,
    cmd_sock: c_int,
) -> libc::pid_t {
    let fd = spec.report_fd;
    // The command shares the init's memory until its `execve` (`CLONE_VM | CLONE_VFORK`, on a
    // stack of its own): the init is suspended meanwhile, as after `vfork`, so nothing runs
    // beside it, and there is no copy of the address space to make and then throw away at
    // the `execve` (about 200 µs of every run). It makes no call the mediation filter stops
    // (which would wait for the suspended init) between installing the filter and `execve`.
    // The bounding set goes before the command starts: it inherits the empty set, and
    // neither needs more than its effective capabilities dropped afterwards.
    if let Err(e) = raw::drop_bounding_set() {
        fail(fd, Stage::DropCapabilities, 0, e, 125);
    }
    let start = CommandStart {
        fd,
        init_sock,
        spec: &spec.command,
        streams,
        terminal: controlling,
        mediation: spec.mediate.map(|m| (m.filter, cmd_sock)),
    };
    // SAFETY: `COMMAND_STACK` is used by this one child only, which runs `command_start` on
    // it; the init touches neither it nor `start` until the child has called `execve` or
    // exited (CLONE_VFORK), and `start` outlives that. The child only makes the raw calls
    // `command` makes, which never allocate; the `errno` it shares is the suspended init's.
    let cloned = unsafe {
        raw::clone_vm(
            libc::CLONE_VFORK,
            command_start,
            std::ptr::addr_of!(start).cast_mut().cast(),
            COMMAND_STACK.get(),
        )
    };
    match cloned {
        Ok(pid) => pid,
        Err(e) => fail(fd, Stage::ForkCommand, 0, e, 125),
    }
}

/// Closes the init's copies of the command's streams and points its own stdin, stdout and
/// stderr at `/dev/null`.
fn release_command_streams(spec: &ChildSpec<'_>, controlling: c_int) {
    // The output pipes are the command's: the init writes nothing to them, and must not be
    // what keeps them open (end of output is when the command and its descendants are gone).
    for own in [spec.stdin, spec.stdout, spec.stderr, controlling] {
        if own > 2 {
            raw::close(own);
        }
    }
    // Nor does it keep the caller's stdin, stdout and stderr (the caller's terminal, when
    // interactive, even when the command's output goes through the supervisor's pipes): the
    // command has its own copies, and the init should hold nothing of the caller's.
    release_stdio();
}

/// Receives the mediation listener the command sends once its filter is installed (`None`
/// without mediation, or when the command failed before).
fn receive_listener(
    spec: &ChildSpec<'_>,
    cmd: libc::pid_t,
    init_sock: c_int,
    cmd_sock: c_int,
) -> Option<c_int> {
    let fd = spec.report_fd;
    match spec.mediate {
        Some(_) => {
            raw::close(cmd_sock);
            // EOF means the command failed before installing the filter (and reported why).
            // Any other failure would leave the command's creating calls unserved: end the
            // run instead, with the reason.
            let got = raw::recv_fd(init_sock);
            raw::close(init_sock);
            match got {
                Ok(listener) => listener,
                Err(e) => {
                    let _ = raw::kill(cmd, libc::SIGKILL);
                    fail(fd, Stage::Mediation, 0, e, 125)
                }
            }
        }
        None => None,
    }
}

/// Closes what the set-up needed and no longer does.
fn close_set_up(spec: &ChildSpec<'_>, listener: Option<c_int>, slots: &[c_int]) {
    let fd = spec.report_fd;
    // From here the init needs only its report pipe, the mediation listener and the slots
    // mediation acts through. What the supervisor held for other runs went first thing;
    // this closes what the set-up needed and no longer does (the Landlock ruleset, the
    // channels' ends, anything a set-up step left open).
    let _ = raw::close_all_except(&[fd, listener.unwrap_or(-1)], slots);
}

/// Passes the [`FORWARDED_SIGNALS`] on to the command from here on.
fn forward_signals(cmd: libc::pid_t) {
    COMMAND_PID.store(cmd, Ordering::Relaxed);
    for sig in FORWARDED_SIGNALS {
        // Best effort: without a handler the signal is simply not forwarded. One the caller
        // ignores stays ignored (the supervisor does not catch it either).
        let _ = raw::set_signal_handler_unless_ignored(sig, Some(forward_signal));
    }
    // The supervisor cloned us with these signals blocked: one sent meanwhile is pending and
    // reaches the command now. (The command unblocks every signal before its exec.)
    let _ = raw::unblock_all_signals();
}

/// Drops the init's capabilities (all but `CAP_SYS_PTRACE` under mediation) and sets
/// `no_new_privs`.
fn drop_init_privileges(listener: Option<c_int>) {
    // The init needs no privilege from here on: it waits, forwards, kills, and performs
    // mediated calls with the command's rights. The one exception is CAP_SYS_PTRACE (in the
    // sandbox's user namespace): without it the init could not read the path arguments of a
    // command that made itself non-dumpable (ssh, gpg-agent and others do), and every file
    // such a program creates would fail. It grants no file access.
    const CAP_SYS_PTRACE: u32 = 19; // linux/capability.h
    let keep = listener.map(|_| CAP_SYS_PTRACE);
    let _ = raw::drop_capabilities_except(keep);
    let _ = raw::set_no_new_privs();
}

/// Serves mediated creation (or only waits) until the command ends; returns its raw wait
/// status.
fn serve_command(
    spec: &ChildSpec<'_>,
    listener: Option<c_int>,
    cmd: libc::pid_t,
    slots: &[c_int],
) -> c_int {
    let fd = spec.report_fd;
    match (listener, spec.mediate) {
        (Some(listener), Some(m)) => mediate::serve(listener, cmd, &m.rules, slots, fd),
        _ => loop {
            match raw::waitpid(-1, 0) {
                Ok((pid, status)) if pid == cmd => break status,
                Ok(_) => continue,
                Err(_) => break 0x7f00, // no children left: report 127<<8-ish "unknown"
            }
        },
    }
}

/// Reports the command's status, ends the namespace and exits with the command's code.
fn finish(spec: &ChildSpec<'_>, status: c_int) -> ! {
    let fd = spec.report_fd;
    report(
        fd,
        Report {
            kind: REPORT_STATUS,
            value: status,
            ..Report::default()
        },
    );
    // Nothing outlives the command: kill every other process in the namespace and reap it.
    end_namespace();
    raw::exit(exit_code(status))
}

/// Kill every other process of the init's pid namespace and reap them all. Every process of
/// the namespace descends from the init (orphans are reparented to it), so an init with no
/// child left (zombies reaped) is alone there and has nothing to kill. `kill(-1)` walks every
/// task of the host (tens of µs with a few hundred), so it is made only when a child is
/// still alive; the kernel kills anything else in the namespace when the init exits anyway.
fn end_namespace() {
    loop {
        match raw::waitpid(-1, libc::WNOHANG) {
            // A child that has not exited: kill them all, then reap every one.
            Ok((0, _)) => {
                let _ = raw::kill(-1, libc::SIGKILL);
                while raw::waitpid(-1, 0).is_ok() {}
                return;
            }
            // A zombie reaped: look again.
            Ok(_) => continue,
            // No child at all (ECHILD): no other process in the namespace.
            Err(_) => return,
        }
    }
}

/// Points the init's descriptors 0, 1 and 2 at `/dev/null` (closes them if it cannot be
/// opened).
fn release_stdio() {
    let null = raw::openat(libc::AT_FDCWD, c"/dev/null", libc::O_RDWR, 0).unwrap_or(-1);
    for std_fd in 0..=2 {
        if null < 0 || raw::dup2(null, std_fd).is_err() {
            raw::close(std_fd);
        }
    }
    if null > 2 {
        raw::close(null);
    }
}

fn apply_mount(op: &MountOp<'_>, slots: &mut [c_int], mask_fd: &mut c_int) -> raw::Result<()> {
    const NOSUID_NODEV: u64 = raw::MOUNT_ATTR_NOSUID | raw::MOUNT_ATTR_NODEV;
    let ro = |extra: u64| MountAttr {
        attr_set: raw::MOUNT_ATTR_RDONLY | extra,
        ..MountAttr::default()
    };
    match *op {
        MountOp::MakeRootPrivate => raw::mount(
            None,
            c"/",
            None,
            (libc::MS_REC | libc::MS_PRIVATE) as c_ulong,
            None,
        ),
        MountOp::Clone {
            source,
            slot,
            recursive,
        } => {
            let mut flags = raw::OPEN_TREE_CLONE | raw::OPEN_TREE_CLOEXEC;
            if recursive {
                flags |= libc::AT_RECURSIVE as u32;
            }
            let fd = raw::open_tree_no_symlinks(source, flags)?;
            match slots.get_mut(slot) {
                Some(s) => {
                    *s = fd;
                    Ok(())
                }
                None => Err(Errno(libc::EINVAL)),
            }
        }
        MountOp::Overlay {
            lower,
            changes,
            slot,
            disk,
        } => {
            let layers = match disk {
                None => crate::overlay::open_layers(lower, changes)?,
                Some(d) => bounded_layers(lower, d)?,
            };
            let fd = crate::overlay::detached_overlay(layers, true);
            crate::overlay::close_layers(layers);
            let fd = fd?;
            match slots.get_mut(slot) {
                Some(s) => {
                    *s = fd;
                    Ok(())
                }
                None => {
                    raw::close(fd);
                    Err(Errno(libc::EINVAL))
                }
            }
        }
        MountOp::ReadOnlyRoot => raw::mount_setattr(
            libc::AT_FDCWD,
            c"/",
            libc::AT_RECURSIVE as u32,
            &ro(NOSUID_NODEV),
        ),
        MountOp::Tmpfs {
            target,
            data,
            flags,
        } => raw::mount(Some(c"tmpfs"), target, Some(c"tmpfs"), flags, Some(data)),
        MountOp::Mkdir { path, mode } => {
            raw::mkdirat(libc::AT_FDCWD, path, mode)?;
            raw::chmod(path, mode)
        }
        MountOp::File { path, mode } => {
            let fd = raw::openat(libc::AT_FDCWD, path, libc::O_CREAT | libc::O_WRONLY, mode)?;
            raw::close(fd);
            raw::chmod(path, mode)
        }
        MountOp::Symlink { target, path } => raw::symlink(target, path),
        MountOp::Attach {
            slot,
            target,
            readonly,
            device,
        } => {
            let fd = *slots.get(slot).ok_or(Errno(libc::EINVAL))?;
            let mut attr = MountAttr {
                attr_set: raw::MOUNT_ATTR_NOSUID,
                ..MountAttr::default()
            };
            if !device {
                attr.attr_set |= raw::MOUNT_ATTR_NODEV;
            }
            if readonly {
                attr.attr_set |= raw::MOUNT_ATTR_RDONLY;
            }
            raw::mount_setattr_fd(fd, true, &attr)?;
            raw::move_mount_fd_no_symlinks(fd, target)?;
            raw::close(fd);
            Ok(())
        }
        MountOp::Proc { target } => raw::mount(
            Some(c"proc"),
            target,
            Some(c"proc"),
            (libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC) as c_ulong,
            None,
        ),
        MountOp::Devpts { target } => raw::mount(
            Some(c"devpts"),
            target,
            Some(c"devpts"),
            (libc::MS_NOSUID | libc::MS_NOEXEC) as c_ulong,
            // `max`: the run's own terminal is the first; a command opening terminals without
            // end must not take the host's last ones (kernel.pty.max counts every instance).
            Some(c"newinstance,ptmxmode=0666,mode=0620,max=128"),
        ),
        MountOp::ReadOnly { path, expect } => rebind(path, Some(ro(NOSUID_NODEV)), expect),
        MountOp::Pin { path, expect } => rebind(path, None, expect),
        MountOp::Hold { path, slot } => {
            // Through no link, as every mount step (see `locate`): the path is canonical.
            let fd = raw::openat_no_symlinks(
                libc::AT_FDCWD,
                path,
                libc::O_RDWR | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )?;
            let regular = raw::fstat(fd).map(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG);
            match (regular, slots.get_mut(slot)) {
                (Ok(true), Some(s)) => {
                    *s = fd;
                    Ok(())
                }
                (Err(e), _) => {
                    raw::close(fd);
                    Err(e)
                }
                _ => {
                    raw::close(fd);
                    Err(Errno(libc::EINVAL))
                }
            }
        }
        MountOp::MaskDir { target, expect } => mask(target, c"d", mask_fd, expect),
        MountOp::MaskFile { target, expect } => mask(target, c"f", mask_fd, expect),
        MountOp::EmptyDir { target, expect } => mask(target, c"ed", mask_fd, expect),
        MountOp::EmptyFile { target, expect } => mask(target, c"ef", mask_fd, expect),
    }
}

/// The layers of a review run under a disk bound: the upper on a new tmpfs, whose mount
/// descriptor goes to the supervisor (it reads the change set there after the run).
pub(crate) fn bounded_layers(
    lower: &CStr,
    d: DiskBound<'_>,
) -> raw::Result<crate::overlay::Layers> {
    let (mnt, mut layers) = crate::overlay::bounded_upper(d.options, d.mode, None)?;
    let sent = raw::send_fd(d.sock, mnt);
    raw::close(mnt);
    raw::close(d.sock);
    let opened = sent.and_then(|_| {
        raw::openat_no_symlinks(libc::AT_FDCWD, lower, libc::O_PATH | libc::O_DIRECTORY)
    });
    match opened {
        Ok(fd) => {
            layers.lower = fd;
            Ok(layers)
        }
        Err(e) => {
            crate::overlay::close_layers(layers);
            Err(e)
        }
    }
}

/// The path of one of the init's Landlock rules, opened and checked (see [`ChildRule`]).
fn open_child_rule(rule: &ChildRule<'_>, mask_fd: c_int) -> raw::Result<c_int> {
    let fd = raw::openat_no_symlinks(libc::AT_FDCWD, rule.path, libc::O_PATH)?;
    let kind = if rule.dir {
        libc::S_IFDIR
    } else {
        libc::S_IFREG
    };
    let same = raw::fstatat(fd, c"", libc::AT_EMPTY_PATH).and_then(|st| {
        if st.st_mode & libc::S_IFMT != kind {
            return Ok(false);
        }
        if !rule.emptied {
            return Ok(true);
        }
        // The masks' tmpfs is this init's own (detached, never on the host).
        if mask_fd < 0 {
            return Ok(false);
        }
        raw::fstatat(mask_fd, c"", libc::AT_EMPTY_PATH).map(|m| m.st_dev == st.st_dev)
    });
    match same {
        Ok(true) => Ok(fd),
        other => {
            raw::close(fd);
            Err(other.err().unwrap_or(Errno(libc::ESTALE)))
        }
    }
}

fn locate(path: &CStr, expect: Option<Identity>) -> raw::Result<c_int> {
    let fd = raw::openat_no_symlinks(libc::AT_FDCWD, path, libc::O_PATH)?;
    if let Some((dev, ino)) = expect {
        // st_dev's and st_ino's widths differ between architectures.
        #[allow(clippy::unnecessary_cast)]
        let same = raw::fstatat(fd, c"", libc::AT_EMPTY_PATH)
            .map(|st| (dev == ANY_DEVICE || st.st_dev as u64 == dev) && st.st_ino as u64 == ino);
        if same != Ok(true) {
            raw::close(fd);
            return Err(same.err().unwrap_or(Errno(libc::ESTALE)));
        }
    }
    Ok(fd)
}

fn rebind(path: &CStr, attr: Option<MountAttr>, expect: Option<Identity>) -> raw::Result<()> {
    let at = locate(path, expect)?;
    let flags = raw::OPEN_TREE_CLONE
        | raw::OPEN_TREE_CLOEXEC
        | libc::AT_RECURSIVE as u32
        | libc::AT_EMPTY_PATH as u32;
    let res = raw::open_tree(at, c"", flags).and_then(|fd| {
        let res = attr
            .map_or(Ok(()), |a| raw::mount_setattr_fd(fd, true, &a))
            .and_then(|_| raw::move_mount_fd_to_fd(fd, at));
        raw::close(fd);
        res
    });
    raw::close(at);
    res
}

fn mask(
    target: &CStr,
    name: &CStr,
    mask_fd: &mut c_int,
    expect: Option<Identity>,
) -> raw::Result<()> {
    if *mask_fd < 0 {
        let fd = raw::detached_tmpfs(c"0755")?;
        raw::mkdirat(fd, c"d", 0)?;
        let f = raw::openat(fd, c"f", libc::O_CREAT | libc::O_RDONLY, 0)?;
        raw::close(f);
        // The readable ones (the umask, 022 here, leaves these modes as they are).
        raw::mkdirat(fd, c"ed", 0o555)?;
        let f = raw::openat(fd, c"ef", libc::O_CREAT | libc::O_RDONLY, 0o444)?;
        raw::close(f);
        *mask_fd = fd;
    }
    let fd = raw::cover_clone(*mask_fd, name)?;
    let res = locate(target, expect).and_then(|at| {
        let res = raw::move_mount_fd_to_fd(fd, at);
        raw::close(at);
        res
    });
    raw::close(fd);
    res
}

/// What the command needs to start (see `start_command`), read from the init's memory.
struct CommandStart<'a> {
    fd: c_int,
    init_sock: c_int,
    spec: &'a CommandSpec<'a>,
    streams: (c_int, c_int, c_int),
    /// The command's own terminal (-1: none), to become its controlling terminal.
    terminal: c_int,
    mediation: Option<(&'a [libc::sock_filter], c_int)>,
}

/// The command's stack until its `execve`: in the init's memory, untouched (and so not even
/// allocated) in the supervisor, used once per init.
struct Stack(std::cell::UnsafeCell<[u8; COMMAND_STACK_SIZE]>);
const COMMAND_STACK_SIZE: usize = 256 * 1024;
// SAFETY: only the init's one command child uses it (see `start_command`).
unsafe impl Sync for Stack {}
static COMMAND_STACK: Stack = Stack(std::cell::UnsafeCell::new([0; COMMAND_STACK_SIZE]));

impl Stack {
    /// The whole stack.
    ///
    /// # Safety
    ///
    /// Nothing else may use the stack while the slice is alive.
    #[allow(clippy::mut_from_ref)]
    unsafe fn get(&self) -> &mut [u8] {
        // SAFETY: per the caller's contract, this is the only reference.
        unsafe { &mut *self.0.get() }
    }
}

extern "C" fn command_start(arg: *mut libc::c_void) -> c_int {
    // SAFETY: `arg` is the init's `CommandStart`, alive until this child has called `execve`
    // or exited.
    let start = unsafe { &*(arg as *const CommandStart<'_>) };
    // The child has its own descriptor table (a copy of the init's).
    if start.init_sock >= 0 {
        raw::close(start.init_sock);
    }
    command(
        start.fd,
        start.spec,
        start.streams,
        start.terminal,
        start.mediation,
    )
}

fn command(
    fd: c_int,
    spec: &CommandSpec<'_>,
    (stdin, stdout, stderr): (c_int, c_int, c_int),
    terminal: c_int,
    mediation: Option<(&[libc::sock_filter], c_int)>,
) -> ! {
    // The supervisor's handlers (inherited through the init) back to the default; a signal
    // the caller ignores stays ignored, as across a plain shell's exec.
    for sig in FORWARDED_SIGNALS {
        let _ = raw::set_signal_handler_unless_ignored(sig, None);
    }
    // The supervisor (a Rust program) ignores SIGPIPE, and an ignored signal stays ignored
    // across `execve`: restore the default so `stockade run yes | head -1` ends `yes` with
    // SIGPIPE as a plain pipeline would, not with an EPIPE error message.
    let _ = raw::set_signal_handler(libc::SIGPIPE, None);
    let _ = raw::unblock_all_signals();
    if let Err(e) = raw::setsid() {
        fail(fd, Stage::Setsid, 0, e, 125);
    }
    // The leader of the new session takes its own terminal as controlling terminal: job
    // control, `/dev/tty` and the terminal's signals (Ctrl-C, Ctrl-Z, Ctrl-\) are the
    // command's, inside the sandbox.
    if terminal >= 0 {
        if let Err(e) = raw::set_controlling_terminal(terminal) {
            fail(fd, Stage::Terminal, 2, e, 125);
        }
    }
    // The supervisor's output pipes become fds 1 and 2, a read-only terminal fd 0 (without
    // close-on-exec); the originals are close-on-exec and `cloexec_from(3)` below covers them
    // anyway. (Stage index 0 and 1 are stdout and stderr, 2 stdin.)
    for (i, (from, to)) in [(stdout, 1), (stderr, 2), (stdin, 0)]
        .into_iter()
        .enumerate()
    {
        if from >= 0 {
            if let Err(e) = raw::dup2(from, to) {
                fail(fd, Stage::Stdio, i, e, 125);
            }
        }
    }
    if let Err(e) = raw::chdir(spec.cwd) {
        fail(fd, Stage::Chdir, 0, e, 125);
    }
    if let Err(e) = raw::drop_capabilities_except(None) {
        fail(fd, Stage::DropCapabilities, 0, e, 125);
    }
    if let Err(e) = raw::set_no_new_privs() {
        fail(fd, Stage::NoNewPrivs, 0, e, 125);
    }
    if let Some(ll) = spec.landlock {
        if let Err(e) = raw::landlock_restrict_self(ll.ruleset_fd) {
            fail(fd, Stage::LandlockRestrict, 0, e, 125);
        }
        raw::close(ll.ruleset_fd);
    }
    for (i, (resource, value)) in spec.rlimits.iter().enumerate() {
        if let Err(e) = raw::set_rlimit(*resource, *value) {
            fail(fd, Stage::Rlimit, i, e, 125);
        }
    }
    if let Err(e) = raw::cloexec_from(3) {
        fail(fd, Stage::CloseDescriptors, 0, e, 125);
    }
    if let Some((filter, sock)) = mediation {
        // From here on every name-creating call waits for the init, which gets the listener
        // now; the command must not keep it (it could answer its own calls).
        let listener = match raw::seccomp_install_listener(filter) {
            Ok(listener) => listener,
            Err(e) => fail(fd, Stage::Seccomp, 0, e, 125),
        };
        let sent = raw::send_fd(sock, listener);
        raw::close(listener);
        raw::close(sock);
        if let Err(e) = sent {
            fail(fd, Stage::Mediation, 0, e, 125);
        }
    }
    // execvp-like search over the planned candidates: remember EACCES-class errors (126)
    // over "not found" (127), as shells do.
    let mut worst = Errno(libc::ENOENT);
    for path in spec.candidates {
        let e = raw::execve(path, spec.argv, spec.envp);
        match e.0 {
            libc::ENOENT | libc::ENOTDIR => {}
            _ => worst = e,
        }
    }
    let code = match worst.0 {
        libc::ENOENT | libc::ENOTDIR => 127,
        _ => 126,
    };
    fail(fd, Stage::Exec, 0, worst, code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    fn c(p: &std::path::Path) -> CString {
        CString::new(p.as_os_str().as_bytes()).unwrap()
    }

    /// The init's Landlock rules land only on what it planned: through no link, of the planned
    /// kind, and a `read_empty` rule only on its own masks' filesystem (here: the directory's
    /// own filesystem stands for it, `/proc` for another). Controls: the planned shapes open.
    #[test]
    fn child_rules_open_only_what_was_planned() {
        let dir = std::env::temp_dir().join(format!("stockade-child-rule-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("d")).unwrap();
        std::fs::write(dir.join("f"), b"").unwrap();
        std::os::unix::fs::symlink(dir.join("d"), dir.join("link")).unwrap();
        let same_fs = raw::openat(libc::AT_FDCWD, &c(&dir), libc::O_PATH, 0).unwrap();
        let other_fs = raw::openat(libc::AT_FDCWD, c"/proc", libc::O_PATH, 0).unwrap();
        let (d, f, link) = (c(&dir.join("d")), c(&dir.join("f")), c(&dir.join("link")));
        let rule = |path, dir, emptied| ChildRule {
            path,
            access: 0,
            dir,
            emptied,
        };
        let open = |r: ChildRule<'_>, mask| open_child_rule(&r, mask).map(raw::close);
        // Controls: as planned.
        assert_eq!(open(rule(&d, true, false), -1), Ok(()));
        assert_eq!(open(rule(&f, false, false), -1), Ok(()));
        assert_eq!(open(rule(&f, false, true), same_fs), Ok(()));
        // A link on the way, another kind, not the init's own cover.
        assert_eq!(open(rule(&link, true, false), -1), Err(Errno(libc::ELOOP)));
        assert_eq!(open(rule(&d, false, false), -1), Err(Errno(libc::ESTALE)));
        assert_eq!(open(rule(&f, true, false), -1), Err(Errno(libc::ESTALE)));
        assert_eq!(
            open(rule(&f, false, true), other_fs),
            Err(Errno(libc::ESTALE))
        );
        assert_eq!(open(rule(&f, false, true), -1), Err(Errno(libc::ESTALE)));
        raw::close(same_fs);
        raw::close(other_fs);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Where `openat2` is missing (a seccomp filter of a container runtime or of a sandbox
    /// around ours), the init's lookups walk component by component
    /// (`raw::openat_no_symlinks_by_component`): that walk answers every shape the init's
    /// steps open exactly as `openat2(RESOLVE_NO_SYMLINKS)` does, the same file or the same
    /// errno: a link anywhere on the way (a magic link too) is `ELOOP`, never followed.
    #[test]
    fn the_walk_without_openat2_answers_as_openat2_does() {
        let dir = std::env::temp_dir().join(format!("stockade-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("d/e")).unwrap();
        std::fs::write(dir.join("d/f"), b"").unwrap();
        std::os::unix::fs::symlink(dir.join("d"), dir.join("link")).unwrap();
        std::os::unix::fs::symlink("f", dir.join("d/flink")).unwrap();
        std::os::unix::fs::symlink("gone", dir.join("d/dangling")).unwrap();
        let base = raw::openat(libc::AT_FDCWD, &c(&dir), libc::O_PATH, 0).unwrap();
        let held = raw::openat(libc::AT_FDCWD, c"/dev/null", libc::O_RDONLY, 0).unwrap();
        let pid = std::process::id();
        let at = |rel: &str| c(&dir.join(rel));
        let long = "x".repeat(300);
        let absolute = [
            at("d"),
            at("d/"),
            at("d/e"),
            at("d/f"),
            at("d/f/"),
            at("d/f/x"),
            at("d//e/./"),
            at("d/e/../f"),
            at("d/f/."),
            at("d/f/.."),
            at("d/e/."),
            at("d/./f/"),
            at("link"),
            at("link/"),
            at("link/f"),
            at("d/flink"),
            at("d/dangling"),
            at("missing"),
            at("missing/x"),
            at(&long),
            c(std::path::Path::new(&format!("/proc/{pid}/root"))),
            c(std::path::Path::new(&format!("/proc/{pid}/fd/{held}"))),
            c(std::path::Path::new(&format!("/proc/{pid}/cwd/x"))),
            c(std::path::Path::new("/proc/self")),
            c(std::path::Path::new("/")),
            c(std::path::Path::new("//")),
        ];
        let relative = [
            c"d", c"d/f", c"link", c"link/f", c"d/flink", c".", c"./d/e", c"", c"d/f/.", c"d/.",
        ];
        let flag_sets = [
            libc::O_PATH,
            libc::O_PATH | libc::O_DIRECTORY,
            libc::O_RDONLY,
            libc::O_RDONLY | libc::O_DIRECTORY,
            libc::O_RDWR | libc::O_NOFOLLOW | libc::O_NONBLOCK,
        ];
        let same = |a: raw::Result<c_int>, b: raw::Result<c_int>| match (a, b) {
            (Ok(x), Ok(y)) => {
                let (sx, sy) = (raw::fstat(x).unwrap(), raw::fstat(y).unwrap());
                // The same open mode (an `O_PATH` descriptor's lookup flags, `O_NOFOLLOW`
                // and `O_DIRECTORY`, are kept in its flags but change nothing afterwards).
                let mode = |fd| {
                    // SAFETY: F_GETFL takes no pointer.
                    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
                    fl & (libc::O_ACCMODE | libc::O_PATH | libc::O_NONBLOCK)
                };
                let r = (sx.st_dev, sx.st_ino, mode(x)) == (sy.st_dev, sy.st_ino, mode(y));
                raw::close(x);
                raw::close(y);
                r
            }
            (Err(x), Err(y)) => x == y,
            (Ok(x), Err(_)) | (Err(_), Ok(x)) => {
                raw::close(x);
                false
            }
        };
        let mut checked = 0;
        for flags in flag_sets {
            let cases = absolute
                .iter()
                .map(|p| (libc::AT_FDCWD, p.as_c_str()))
                .chain(relative.iter().map(|p| (base, *p)));
            for (dirfd, path) in cases {
                let kernel = raw::openat2(dirfd, path, flags, raw::RESOLVE_NO_SYMLINKS);
                let walked = raw::openat_no_symlinks_by_component(dirfd, path, flags);
                let shown = format!("{path:?} flags {flags:#o}: {kernel:?} / {walked:?}");
                assert!(same(kernel, walked), "{shown}");
                checked += 1;
            }
        }
        assert_eq!(checked, 5 * 36);
        // Controls: the walk opens the planned shapes, and refuses the links.
        let ok = raw::openat_no_symlinks_by_component(libc::AT_FDCWD, &at("d/e/../f"), 0);
        assert!(ok.map(raw::close).is_ok());
        let link = raw::openat_no_symlinks_by_component(libc::AT_FDCWD, &at("link/f"), 0);
        assert_eq!(link, Err(Errno(libc::ELOOP)));
        // Creation is not its business.
        let create = raw::openat_no_symlinks_by_component(base, c"new", libc::O_CREAT);
        assert_eq!(create, Err(Errno(libc::EINVAL)));
        raw::close(base);
        raw::close(held);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// "s/" asks for a directory: the walk checks the last component's kind on an `O_PATH`
    /// handle and then opens it again by name, so a file exchanged in between
    /// (`RENAME_EXCHANGE` by another thread, another run) must still be `ENOTDIR`, as with
    /// `openat2`, never opened. Control: the exchange happens (both kinds are seen), and
    /// `openat2` itself never opens the file.
    #[test]
    fn the_walk_without_openat2_keeps_a_trailing_slash_across_a_swap() {
        let dir = std::env::temp_dir().join(format!("stockade-swap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("s")).unwrap();
        std::fs::write(dir.join("t"), b"").unwrap();
        let base = raw::openat(libc::AT_FDCWD, &c(&dir), libc::O_PATH, 0).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let stop = stop.clone();
            let dir = dir.clone();
            std::thread::spawn(move || {
                let base = raw::openat(libc::AT_FDCWD, &c(&dir), libc::O_PATH, 0).unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    raw::renameat2(base, c"s", base, c"t", libc::RENAME_EXCHANGE).unwrap();
                }
                raw::close(base);
            })
        };
        let is_dir = |fd: c_int| {
            let dir = raw::fstat(fd).unwrap().st_mode & libc::S_IFMT == libc::S_IFDIR;
            raw::close(fd);
            dir
        };
        let (mut dirs, mut not_dirs) = (0, 0);
        let started = std::time::Instant::now();
        let mut file_opened = None;
        while started.elapsed() < std::time::Duration::from_secs(3) {
            for path in [c"s/", c"s/."] {
                match raw::openat_no_symlinks_by_component(base, path, libc::O_RDONLY) {
                    Ok(fd) if is_dir(fd) => dirs += 1,
                    Ok(_) => file_opened = Some(path),
                    Err(e) => {
                        assert_eq!(e, Errno(libc::ENOTDIR), "{path:?}");
                        not_dirs += 1
                    }
                }
                if let Ok(fd) = raw::openat2(base, path, libc::O_RDONLY, raw::RESOLVE_NO_SYMLINKS) {
                    assert!(is_dir(fd), "control: openat2 opened a file for {path:?}");
                }
            }
            if file_opened.is_some() {
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        swapper.join().unwrap();
        raw::close(base);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(file_opened, None, "a file opened as a directory");
        assert!(
            dirs > 0 && not_dirs > 0,
            "control: no swap seen ({dirs}, {not_dirs})"
        );
    }
}
