//! Shared harness of the attack suite.
//!
//! Every test builds a [`Fixture`] (a fake `$HOME` full of credentials and a workspace that
//! is a git repository, both under `/var/tmp` because the sandbox replaces `/tmp`), runs a
//! real attack inside `stockade run` and checks that it was blocked, then runs the *same*
//! shell snippet directly with `/bin/sh -c` on the same fixture and checks that it works
//! there (the control), so that every test can fail.
//!
//! Attack snippets are wrapped by [`wrap`]: the snippet runs in a subshell and the wrapper
//! prints [`DONE`] with the snippet's exit status. A sandboxed run that never printed the
//! line did not run the snippet at all (stockade refused or crashed), which is a failure, not
//! a "blocked" attack.
//!
//! The stockade binary is `$STOCKADE_BIN`, else `target/<profile>/stockade` next to the test
//! executable's `deps/` directory (build it first with `cargo build -p stockade-cli`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test harness: panicking with a message is how it reports a failure"
)]

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

pub mod agent_scan;
pub mod messages;
pub mod pty;
pub mod responses;
pub mod review;
pub mod test_net;
pub mod upstream;

/// `PATH` given to every command, sandboxed or not: system directories only, so that both
/// the root and the unprivileged pass find the same tools (`/usr/bin/python3`, not a shim
/// under `/root`).
pub const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A command that runs longer than this is killed and the test fails (override with
/// `STOCKADE_TEST_TIMEOUT=<seconds>`). A minute: `scripts/test` runs two passes side by side,
/// and a `cargo build` under the guard took over 30 s there at load 8. A passing test never
/// waits for it; only a hung one fails later.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The line [`wrap`] prints after the snippet, followed by ` rc=<status>`.
pub const DONE: &str = "__STOCKADE_ATTACK_DONE__";

/// Where fixtures live: not `/tmp`, which the sandbox replaces with an empty tmpfs.
pub const FIXTURE_PARENT: &str = "/var/tmp";

/// The backend the enforcement tests run against: `STOCKADE_TEST_BACKEND` (`native`, the
/// default, `gvisor`, `podman` or `docker`). `scripts/test` runs the suite under native and
/// gVisor, and its containment files under rootless Podman.
pub fn backend() -> &'static str {
    static BACKEND: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BACKEND.get_or_init(|| {
        std::env::var("STOCKADE_TEST_BACKEND")
            .ok()
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| "native".into())
    })
}

/// The options of network mode `mode` (`--net MODE`) for a test of what the mode does. Under
/// gVisor an unprivileged caller's `--net host` is refused (runsc's control socket would be in
/// the host's network namespace: `gvisor.rs::runscs_control_socket_is_out_of_other_processes_reach`),
/// so a test of the mode itself passes `--allow-degraded` there.
pub fn net(mode: &'static str) -> Vec<&'static str> {
    net_under(backend(), mode)
}

/// [`net`] for a test that names its backend itself (`gvisor.rs` runs under gVisor in every
/// pass).
pub fn net_under(backend_name: &str, mode: &'static str) -> Vec<&'static str> {
    let mut opts = vec!["--net", mode];
    if mode == "host" && backend_name == "gvisor" && !is_root() {
        opts.push("--allow-degraded");
    }
    opts
}

/// A test that does not apply to the backend under test says so and why (printed, so the
/// run's output lists every such test), and returns `true`: the caller returns. For a
/// difference of one backend's own; the kinds several share are [`na`] ([`not_applicable`]).
pub fn not_under(backend_name: &str, why: &str) -> bool {
    if backend() == backend_name {
        println!("n/a under {backend_name}: {why}");
        return true;
    }
    false
}

/// A way a backend differs from native that a test cannot apply across: the backends it holds
/// under (`"podman"`, or `"podman/unprivileged"` for an unprivileged caller's only) and why.
pub struct Na {
    /// The backends (and callers) the difference holds under: `"podman"`, or
    /// `"podman/unprivileged"` or `"podman/root"` for one kind of caller only.
    pub under: &'static [&'static str],
    /// What differs, printed with the test's `n/a` line.
    pub why: &'static str,
}

/// Whether `na` holds for the backend under test and this caller: if so, the test says so and
/// why (printed, so the run's output lists every such test) and the caller returns.
pub fn not_applicable(na: &Na) -> bool {
    let unprivileged = format!("{}/unprivileged", backend());
    let root = format!("{}/root", backend());
    let holds = na.under.iter().any(|u| {
        *u == backend() || (!is_root() && *u == unprivileged) || (is_root() && *u == root)
    });
    if holds {
        println!("n/a under {}: {}", backend(), na.why);
    }
    holds
}

/// Why a test does not apply under a backend ([`not_applicable`]): each names what differs.
pub mod na {
    use super::Na;

    /// Native's mediated creation: refusals during the run, and what only they report.
    pub const NO_CREATION_GUARD: Na = Na {
        under: &["gvisor", "podman", "docker"],
        why: "this backend has no creation guard (native's mediated creation is a seccomp notification its supervisor answers; gVisor's Sentry and a container engine's runtime have none): the path exists until the run ends and the sweep after it takes it out (the end state is checked by the tests that assert_swept); this test checks the refusal during the run, its exact errno or a race against it",
    };
    /// Debian 12's runsc.
    pub const STATX: Na = Na {
        under: &["gvisor"],
        why: "Debian's runsc (2022-12-19) answers statx with EINVAL, so coreutils ls and stat fail inside (gVisor fixed this later; a newer runsc is not installable here)",
    };
    /// What the Sentry implements itself.
    pub const SENTRY: Na = Na {
        under: &["gvisor"],
        why: "the Sentry implements this itself: the call never reaches the host kernel",
    };
    /// `/proc/1` inside.
    pub const PID1: Na = Na {
        under: &["gvisor", "podman", "docker"],
        why: "PID 1 is not native's init: inside gVisor it is the command itself (runsc's own processes are outside the Sentry); in a container it is the engine's init (catatonit or tini, bound from the host), started by the runtime with the command's own user, capabilities and streams, holding nothing the command lacks (its descriptors are the command's own streams, which the sanitizer covers)",
    };
    /// Existing git configs: judged whole after the run.
    pub const GIT_CONFIG_WHOLE: Na = Na {
        under: &["gvisor", "podman", "docker"],
        why: "under gVisor and the container engines an existing git config is a staged copy during the run and its change is judged whole after it (workspace::gitstage): a run that also sets a live key gets none of its config change applied, where native refuses only the live key at its call",
    };
    /// The host's changes at the top of a git dir during a staged run.
    pub const GIT_STAGED: Na = Na {
        under: &["gvisor", "podman", "docker"],
        why: "under gVisor and the container engines the run sees a staged copy of an existing git dir's top level (workspace::gitstage): what the host's git writes there during the run is not visible inside, so this race cannot be set up; a name both change keeps the host's version (staged_git_dir_* in gvisor.rs, the git tests of containers.rs)",
    };
    /// Native's allocation watch.
    pub const ALLOCATION_WATCH: Na = Na {
        under: &["gvisor", "podman", "docker"],
        why: "this checks native's allocation watch (its seccomp notification of large mmap/mremap calls under RLIMIT_DATA): under gVisor the Sentry handles the call, and in a container the engine's cgroup bounds memory (it never refuses an allocation: it reclaims or kills, and the kill is reported); an unprivileged caller's bound is RLIMIT_AS in gVisor's Sentry, where nothing outside sees a refusal, and rootless Podman on cgroup v1 refuses a memory limit (containers.rs::memory_is_bounded)",
    };
    /// An unprivileged caller's memory limit.
    pub const ROOTLESS_MEMORY_EVENT: Na = Na {
        under: &["gvisor/unprivileged", "podman/unprivileged"],
        why: "runsc --rootless and rootless Podman on cgroup v1 have no cgroup: the Sentry's RLIMIT_AS refuses the allocation (the run fails) and nothing outside records it, and rootless Podman refuses a memory limit unless --allow-degraded (containers.rs::memory_is_bounded), so there is no memory event (a root caller's run has one: its cgroup's OOM kill)",
    };
    /// A memory limit under rootless Podman.
    pub const ROOTLESS_PODMAN_MEMORY: Na = Na {
        under: &["podman/unprivileged"],
        why: "rootless Podman on cgroup v1 has no cgroup of its own: it refuses a memory limit (its per-process RLIMIT_DATA does not count memfd or shared memory) unless --allow-degraded, and the suite runs it with --memory 0 (containers.rs::memory_is_bounded checks the refusal and the degraded bound)",
    };
    /// An unprivileged caller's processes limit under rootless Podman.
    pub const ROOTLESS_PIDS_EVENT: Na = Na {
        under: &["podman/unprivileged"],
        why: "rootless Podman on cgroup v1 has no cgroup: the processes limit is the caller's RLIMIT_NPROC inside the container (--ulimit nproc), which refuses the fork in the command's own kernel call and nothing outside records it, so there is no pids event (containers.rs checks the bound itself)",
    };
    /// What only native's set-up explains or reports.
    pub const NATIVE_SETUP: Na = Na {
        under: &["gvisor", "podman", "docker"],
        why: "this checks native's own set-up (its init, Landlock, seccomp, idmapped mounts or their diagnostics)",
    };
    /// An unprivileged caller's gVisor run, or rootless Podman's.
    pub const ROOTLESS_UID0: Na = Na {
        under: &["gvisor", "podman/unprivileged"],
        why: "runsc --rootless, and rootless Podman with no subordinate ids (/etc/subuid has none for the caller here), run the command as uid 0 of their own user namespace, mapped to the caller, with no capabilities (no_effective_capabilities_inside checks those)",
    };
    /// The streams of a gVisor run.
    pub const PIPES: Na = Na {
        under: &["gvisor"],
        why: "a gVisor run's streams are pipes, or the terminal of its own that runsc makes and stockade relays (runsc as root takes over a terminal it is given, so it never gets the caller's): there is no host terminal inside to inject into, and the pty this test opens is the Sentry's own",
    };
    /// A gVisor run's own terminal.
    pub const HOST_TTY: Na = Na {
        under: &["gvisor"],
        why: "gVisor shows the command the terminal runsc made for the run as a host file (/proc/self/fd/0 reads host:[1], no tty_nr in /proc/PID/stat): ttyname() fails, so `tty` says \"not a tty\", and opening /dev/tty fails with EIO in Debian's runsc 2022-12-19 (gVisor issues 11582, 13535, 10925); the terminal itself, job control, the signal keys and the window size work (the other tests here)",
    };
    /// Signal dispositions across the engine.
    pub const IGNORED_SIGNALS: Na = Na {
        under: &["gvisor"],
        why: "runsc does not pass the caller's ignored signals (nohup's SIGHUP) on to the command: inside the Sentry they have their default actions",
    };
    /// The corpus tests, which name their backends themselves.
    pub const CORPUS_ONCE: Na = Na {
        under: &["gvisor", "podman", "docker"],
        why: "the corpus runs under every backend in the native pass (whole_corpus_is_contained, whole_corpus_is_contained_under_gvisor, containers.rs::whole_corpus_is_contained_under_each_engine)",
    };
    /// What a run under `--net none` says it tried.
    pub const NETWORK_OFF: Na = Na {
        under: &["gvisor"],
        why: "gVisor's network stack is the Sentry's own, not the host kernel's, and does not count tries with no route even inside (its /proc/net/snmp keeps OutNoRoutes at 0 after a failed connect, Debian's runsc 2022-12-19), so a gVisor run does not say \"network is off in this run\"",
    };
    /// Files the Sentry makes only inside.
    pub const SENTRY_FILES: Na = Na {
        under: &["gvisor"],
        why: "a FIFO or O_TMPFILE made inside the Sentry is not made on the host in the same way",
    };
    /// Read scope `allow-list`.
    pub const ALLOW_LIST: Na = Na {
        under: &["gvisor", "podman", "docker"],
        why: "read_scope = \"allow-list\" is Landlock's (native's); the gVisor and container backends refuse such a policy (E_PROTECTION_UNAVAILABLE)",
    };
    /// What the sweep does with a git dir's new files when nothing refused them during the run.
    pub const NEW_GIT_FILES_QUARANTINED: Na = Na {
        under: &["gvisor", "podman", "docker"],
        why: "without a creation guard every new file of git's is quarantined after the run, the user's too (a known limit)",
    };
    /// The session of a container run's command.
    pub const CONTAINER_SESSION: Na = Na {
        under: &["podman", "docker"],
        why: "in a container the command is in the session the runtime made for the engine's init (PID 1 leads it), whose controlling terminal, if any, is the container's own (the engine's, relayed by stockade), never the caller's (the terminal tests check injection itself)",
    };
    /// Masks deeper than a container engine can mount.
    pub const DEEP_MASK: Na = Na {
        under: &["podman", "docker"],
        why: "the engines resolve each mount's path inside their root filesystem's path, which must fit PATH_MAX, so a run that needs a mask this deep is refused, typed, before the engine runs (E_PROTECTION_UNAVAILABLE, walk_deep::a_dotenv_below_path_max_is_masked_and_the_tree_left_in_place checks it). A floor of the engines' mount interface: masking the deepest directory the engine can name instead was red-teamed unsafe beside native and gVisor runs, which mask the deep file itself and so leave its directory free to move out of the wider mask (README, Known limits)",
    };
    /// Another user's run beside a root caller's, under a container engine.
    pub const ENGINE_USERS: Na = Na {
        under: &["docker", "podman/root"],
        why: "the test's second user runs stockade under the same engine: Docker only root (and the docker group, root's equal) may use, and that user's rootless Podman on this machine's cgroup v1 refuses the default memory limit; the terminal's handling between two users (stockade's own relay, the same for every backend) is checked in the native and gVisor root passes",
    };
    /// What a container run sees that Docker's daemon makes.
    pub const DOCKER_DAEMON: Na = Na {
        under: &["docker"],
        why: "Docker's daemon, not the caller, makes the container: its /etc/hosts and /etc/resolv.conf are the daemon's (made for the container, or seen in the daemon's own mount namespace) and --net host is the daemon's network namespace, so a test's namespace around stockade (a hosts file, a resolver, a test network) is not the run's",
    };
    /// The caller's home as the workspace of a root caller's container run.
    pub const HOME_WORKSPACE: Na = Na {
        under: &["podman/root", "docker/root"],
        why: "the workspace is the caller's home: a root caller's container command runs as the workspace's owner, so the home would be another user's, and a caller's home of another user is refused (E_POLICY_INVALID: the state directory a preset makes there would be root's)",
    };
    /// The resolver a container's /etc/resolv.conf names.
    pub const ENGINE_RESOLV_CONF: Na = Na {
        under: &["podman/root", "docker/root"],
        why: "the engines write the container's own /etc/resolv.conf (Podman drops a resolver on the host's loopback from it, Docker's daemon reads its own): a test's resolv.conf naming a loopback resolver is not the run's",
    };
    /// A review run's view bounded by `--disk`, under the container engines.
    pub const VIEW_DISK: Na = Na {
        under: &["podman", "docker"],
        why: "--disk bounds a review run's view with a tmpfs for its upper layer, and a container engine's overlay takes its layers by path, so the check inside knows the workspace planned by inode numbers, which overlayfs keeps for directories only when every layer is on one filesystem (measured here: over a tmpfs upper and an ext4 lower, a directory's inode number was the overlay's own, a file's kept): refused, typed (E_PROTECTION_UNAVAILABLE, naming --disk and the backends that bound it). A floor of the engines' mount interface, not of stockade: a bound on the workspace's own filesystem (project quotas) or an engine taking layers as descriptors would lift it",
    };
    /// A redirected stream's FIFO, which only the container backends have.
    pub const STREAM_FIFOS: Na = Na {
        under: &["native", "gvisor"],
        why: "only the container backends carry a stream that is not the terminal through a FIFO of the run's, which a process of the command's user on the host could open through /proc/PID/fd: natively the command's redirected stream is the caller's file itself (which that user may write anyway), and a gVisor run with a redirected stream has pipes that runsc's own processes hold, no terminal",
    };
}

/// `chown -R OWNER PATH` (OWNER as `chown` takes it: `user:`, `root:`, `user:group`).
pub fn chown_to(path: &Path, owner: &str) {
    let ok = Command::new("chown")
        .args(["-R", owner])
        .arg(path)
        .status()
        .expect("run chown")
        .success();
    assert!(ok, "chown -R {owner} {}", path.display());
}

/// The staged-git-dir owner attack, for a root caller of a backend that stages git dirs (gVisor,
/// the container engines), whose workspace belongs to `owner` (as `chown` takes it): a git dir
/// of another owner (root's, 0700, its config 0600 with a secret) must not be staged, or the
/// command would read root's config and set root's remote URL as an inert change; control:
/// given to `owner`, it is staged and its config read. Then a stopped rebase of `owner`'s
/// holding root's 0600 file must refuse the staging: the file stays root's and unread. `run`
/// runs a shell script in the sandbox.
pub fn staged_git_owner_attack(fx: &Fixture, owner: &str, run: impl Fn(&str) -> Run) {
    let secret = fx.marker("root-config");
    fx.git_host(&["config", "http.extraHeader", &secret]);
    let (git, config) = (fx.ws.join(".git"), fx.ws.join(".git/config"));
    chown_to(&git, "root:");
    chmod(&config, 0o600);
    chmod(&git, 0o700);
    let before = read_bytes(&config);
    run("cat .git/config; git config remote.origin.url /tmp/evil.git; echo done")
        .assert_stdout_contains("done")
        .assert_lacks(&secret);
    assert_eq!(read_bytes(&config), before);
    // Control: the owner's git dir is staged, its config read inside.
    chown_to(&git, owner);
    run("cat .git/config").assert_stdout_contains(&secret);
    // A stopped rebase holding root's file: refused, the file root's and unread.
    let rebase = git.join("rebase-merge");
    std::fs::create_dir_all(&rebase).expect("mkdir");
    chown_to(&rebase, owner);
    let held = fx.marker("rebase-secret");
    write_file(&rebase.join("secret"), &held, 0o600);
    run("cat .git/rebase-merge/secret; echo pwn > .git/rebase-merge/secret").assert_lacks(&held);
    assert_eq!(
        read_text(&rebase.join("secret")).as_deref(),
        Some(held.as_str())
    );
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata(rebase.join("secret"))
        .expect("stat")
        .uid();
    assert_eq!(uid, 0);
}

/// The options that put a `stockade run` or `mcp` a test builds itself under the backend under
/// test, as [`Cmd::final_args`] does for the runs it sees: `--backend B`, and under rootless
/// Podman `--memory 0` (it refuses a memory limit it cannot bound whole).
pub fn backend_args() -> Vec<String> {
    backend_options(false)
}

/// [`backend_args`] as words for a shell line a test writes itself (`{bin} run {flags} ...`),
/// with `--backend B` always.
pub fn backend_flags() -> String {
    let mut args = backend_args();
    if backend() == "native" {
        args.splice(0..0, ["--backend".to_string(), "native".to_string()]);
    }
    args.join(" ")
}

/// [`backend_args`] for a run that asks for a memory limit itself (`asks_memory`): rootless
/// Podman's `--memory 0` only when it does not (see containers.rs::memory_is_bounded).
fn backend_options(asks_memory: bool) -> Vec<String> {
    let mut args = Vec::new();
    if backend() != "native" {
        args.extend(["--backend".to_string(), backend().to_string()]);
    }
    if rootless_podman() && !asks_memory {
        args.extend(["--memory".to_string(), "0".to_string()]);
    }
    args
}

/// The engine's store for a run a test starts with an environment of its own (an MCP client's
/// server, an agent's): `XDG_DATA_HOME` ([`engine_store`]) under a container backend, as
/// [`Cmd::final_env`] gives the runs it sees; nothing otherwise.
pub fn engine_store_env() -> Vec<(String, String)> {
    if is_container_backend() {
        vec![(
            "XDG_DATA_HOME".to_string(),
            engine_store().display().to_string(),
        )]
    } else {
        Vec::new()
    }
}

/// `env` (a JSON object: an MCP client's server environment) with [`engine_store_env`].
pub fn with_engine_store(mut env: serde_json::Value) -> serde_json::Value {
    for (k, v) in engine_store_env() {
        env[k] = serde_json::Value::String(v);
    }
    env
}

/// Whether the backend under test is a container engine (`podman`, `docker`).
pub fn is_container_backend() -> bool {
    matches!(backend(), "podman" | "docker")
}

/// Whether the backend under test is Podman run by an unprivileged caller (rootless Podman).
pub fn rootless_podman() -> bool {
    backend() == "podman" && !is_root()
}

/// Where a container engine keeps its images and containers for every test of this user
/// (`XDG_DATA_HOME` of rootless Podman): one store, so the image is imported once and not
/// per fixture's home.
pub fn engine_store() -> PathBuf {
    let dir = PathBuf::from(format!("/var/tmp/stockade-container-tests-{}", euid()));
    std::fs::create_dir_all(&dir).expect("create the engines' shared store");
    dir
}

/// Whether the backend under test refuses protected paths as they are created, during the run
/// (native's mediated creation). Without that (gVisor), a protected path made during the run
/// exists until the run ends, and the sweep after the run takes it out: tests of "refused
/// during the run" check only the state after the run there.
pub fn creation_guarded() -> bool {
    backend() == "native"
}

/// The unprivileged user of the suite's second pass (`scripts/test` makes it).
pub const TEST_USER: &str = "stockade-test";

/// The owner a root caller's container runs give their fixture to ([`GiveOut`]): a user of its
/// own, not [`TEST_USER`], whose processes (the unprivileged pass's, which runs at the same
/// time) share one per-user process limit, RLIMIT_NPROC (`scripts/test` makes it).
pub const WORKSPACE_OWNER: &str = "stockade-owner";

/// [`WORKSPACE_OWNER`]'s uid and gid (`None` when there is no such user).
pub fn workspace_owner_ids() -> Option<(u32, u32)> {
    static IDS: std::sync::OnceLock<Option<(u32, u32)>> = std::sync::OnceLock::new();
    *IDS.get_or_init(|| {
        let id = |flag: &str| -> Option<u32> {
            let out = Command::new("id")
                .args([flag, WORKSPACE_OWNER])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout).trim().parse().ok()
        };
        Some((id("-u")?, id("-g")?))
    })
}

/// The host's git config of a fixture that is given to [`WORKSPACE_OWNER`] ([`GiveOut`]): root's git
/// trusts that user's checkout (`safe.directory`).
const HOST_GITCONFIG: &str = "host-gitconfig";

/// Whether the suite gives its fixtures to [`WORKSPACE_OWNER`] before each run ([`GiveOut`]): a root
/// caller under a container backend.
pub fn gives_out() -> bool {
    is_root() && is_container_backend()
}

/// A root caller's run under a container backend runs the command as the workspace's owner,
/// never as root, and refuses a workspace root owns (E_PROTECTION_UNAVAILABLE). The suite's
/// fixture is root's, as the root caller made it; so before each command of such a caller's
/// test, what root owns in the fixture's directories (the workspace, the directory outside,
/// the other workspaces a test makes there), and in the workspace and write grants
/// (`--allow-write`) a `stockade` names, is given to [`WORKSPACE_OWNER`], the way a root caller (a CI
/// runner, a platform's agent host) runs a user's agent in that user's checkout. Entries of a
/// third owner keep theirs. The caller's own files stay root's: its home (HOME is the caller's:
/// its user policy, its trust and change stores, the secrets the run must not read), what the
/// tests keep beside the workspace (policies, audit logs, the host's scripts), its stockade
/// config and state directories where the command's environment puts them in a given one (a
/// test's XDG_CONFIG_HOME there, a workspace that is the home), and a file with hard links (its inode is shared with
/// a path outside: a test's link to the caller's file). Only a test's own directories are
/// given: a path below `/tmp/stockade-*.*` or `/var/tmp/stockade-*.*` (a tempdir's name), never
/// `/tmp` itself, the engines' store or the pinned tools.
#[derive(Debug, Clone)]
struct GiveOut {
    /// Directories given besides the run's own.
    dirs: Vec<PathBuf>,
    /// A fixture's root: each directory in it is given, but `home` (the caller's), `scripts`
    /// (the host's), `bin` (binaries the tests copy for another user to run) and `private`
    /// (the caller's closed directory above a workspace it holds: `real_homes`; a workspace
    /// named in it is given).
    fixture: Option<PathBuf>,
}

/// Whether `path` lies in a test's own temporary directory ([`GiveOut`]).
fn a_tests_own(path: &Path) -> bool {
    let mut parts = path
        .components()
        .skip(1)
        .map(|c| c.as_os_str().to_string_lossy());
    let own = |name: Option<std::borrow::Cow<'_, str>>| {
        name.is_some_and(|n| n.starts_with("stockade-") && n.contains('.'))
    };
    match parts.next().as_deref() {
        Some("tmp") => own(parts.next()),
        Some("var") => parts.next().as_deref() == Some("tmp") && own(parts.next()),
        _ => false,
    }
}

impl GiveOut {
    /// Gives the run's workspace and write grants (read from `args`, the command's final
    /// arguments; `cwd` when it names no workspace) and [`GiveOut::dirs`].
    fn apply(&self, args: &[OsString], cwd: &Path, env: &[(OsString, OsString)]) {
        use std::os::unix::fs::MetadataExt;
        let (uid, gid) = workspace_owner_ids().unwrap_or_else(|| {
            panic!("a root caller's container run needs the user {WORKSPACE_OWNER} to own its fixture (scripts/test makes it: useradd --system --create-home --home-dir /var/lib/{WORKSPACE_OWNER} {WORKSPACE_OWNER})")
        });
        let mut dirs = self.dirs.clone();
        if let Some(root) = &self.fixture {
            for entry in fs::read_dir(root).into_iter().flatten().flatten() {
                let keep = matches!(
                    entry.file_name().to_str(),
                    Some("home" | "scripts" | "bin" | "private")
                );
                if !keep && entry.file_type().is_ok_and(|t| t.is_dir()) {
                    dirs.push(entry.path());
                }
            }
        }
        let options = args.iter().take_while(|a| *a != "--" && *a != "--shell");
        let mut named = false;
        let mut after: Option<&str> = None;
        for a in options {
            let text = a.to_string_lossy();
            if let Some(flag) = after.take() {
                named |= flag == "--workspace";
                dirs.push(PathBuf::from(a));
                continue;
            }
            for flag in ["--workspace", "--allow-write"] {
                if text == flag {
                    after = Some(flag);
                } else if let Some(v) = text.strip_prefix(&format!("{flag}=")) {
                    named |= flag == "--workspace";
                    dirs.push(PathBuf::from(v));
                }
            }
        }
        if !named {
            dirs.push(cwd.to_path_buf());
        }
        // The caller's own stockade config and state directories, as this command's
        // environment places them (resolved: the walk below follows no link).
        let var = |name: &str| {
            env.iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| PathBuf::from(v))
                .filter(|p| p.is_absolute())
        };
        let home = var("HOME");
        let resolved = |d: PathBuf| d.canonicalize().unwrap_or(d);
        let config = var("XDG_CONFIG_HOME")
            .or_else(|| home.as_ref().map(|h| h.join(".config")))
            .map(|c| resolved(c.join("stockade")));
        let state = var("XDG_STATE_HOME")
            .or_else(|| home.as_ref().map(|h| h.join(".local/state")))
            .map(|s| resolved(s.join("stockade")));
        // Whole: the config and stockade's own stores; the state directory itself only (an
        // agent's state directory in it is the agent's, granted to the command).
        let mut own: Vec<(PathBuf, bool)> = Vec::new();
        own.extend(config.map(|c| (c, true)));
        if let Some(state) = state {
            for store in ["journal", "trust", "changes"] {
                own.push((state.join(store), true));
            }
            own.push((state, false));
        }
        // Returns whether it changed an owner.
        fn give(path: &Path, own: &[(PathBuf, bool)], uid: u32, gid: u32) -> bool {
            let Ok(meta) = fs::symlink_metadata(path) else {
                return false;
            };
            // The caller's own config and state, and a file with more links than this one
            // (shared with a path outside: the caller's).
            let owned = |(o, whole): &(PathBuf, bool)| {
                if *whole {
                    path.starts_with(o)
                } else {
                    path == o
                }
            };
            if own.iter().any(owned) || (!meta.is_dir() && meta.nlink() > 1) {
                return false;
            }
            let mut changed = false;
            if meta.uid() == 0 {
                changed = std::os::unix::fs::lchown(path, Some(uid), Some(gid)).is_ok();
            }
            if meta.is_dir() {
                for entry in fs::read_dir(path).into_iter().flatten().flatten() {
                    changed |= give(&entry.path(), own, uid, gid);
                }
            }
            changed
        }
        let mut changed = false;
        // The caller's home, whole, in a directory given above it: a command that names no
        // workspace (a client that starts `stockade mcp` from the fixture's root) gives its
        // directory but the home in it. A home that is the workspace, or holds it, is given
        // but for its config and state (above).
        let home = home.map(resolved);
        for dir in dirs {
            let dir = resolved(dir);
            if !a_tests_own(&dir) {
                continue;
            }
            let mut own = own.clone();
            if let Some(home) = &home {
                if home.starts_with(&dir) && *home != dir {
                    own.push((home.clone(), true));
                }
            }
            changed |= give(&dir, &own, uid, gid);
        }
        // A chown is a change of the entry's ctime: one within a tick or so of a review run's
        // start counts as a change on the host during the run (`workspace::changes`,
        // CTIME_SLACK_NS, 20 ms), and `apply` refuses it (seen under Podman, whose run
        // starts sooner than Docker's). The run starts later than that, as a user's would.
        if changed {
            std::thread::sleep(Duration::from_millis(60));
        }
    }
}

/// Whether `run` is a root caller's container run, refused for its credential routes: then it
/// checks the refusal (typed, with the reason and the fix), says the test does not apply, and
/// returns `true` (the caller returns). The command of such a run is the workspace's owner, a
/// host user whose other processes could use the caller's credentials through the proxy.
pub fn refused_credential_routes(run: &Run) -> bool {
    if !gives_out() {
        return false;
    }
    run.assert_code(125)
        .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
        .assert_stderr_contains("credential routes under")
        .assert_stderr_contains("use --backend native or gvisor");
    println!(
        "n/a under {} for a root caller: refused, typed (checked): its command runs as the workspace's owner, whose other processes on the host could use the caller's credentials through the proxy",
        backend()
    );
    true
}

/// Is the test process running as root (the "root caller" pass)?
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Prints the standard skip line for a root-caller-only assertion and returns `true` when
/// the caller is not root, so a test can write `if skip_unless_root("...") { return; }`.
pub fn skip_unless_root(what: &str) -> bool {
    if is_root() {
        false
    } else {
        println!("skipped: needs root caller: {what}");
        true
    }
}

/// The caller's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The caller's effective gid.
pub fn egid() -> u32 {
    // SAFETY: getegid has no preconditions and cannot fail.
    unsafe { libc::getegid() }
}

/// A token unique to this process and call, used in markers and names.
pub use selftest::fixture::unique;

/// The stockade binary under test.
pub fn stockade_bin() -> PathBuf {
    let path = match std::env::var_os("STOCKADE_BIN") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => {
            let exe = std::env::current_exe().expect("current_exe");
            // target/<profile>/deps/<test-exe> -> target/<profile>/stockade
            exe.parent()
                .and_then(Path::parent)
                .map(|dir| dir.join("stockade"))
                .expect("test executable has no grandparent directory")
        }
    };
    assert!(
        path.is_file(),
        "stockade binary not found at {}: build it with `cargo build -p stockade-cli` (or set STOCKADE_BIN)",
        path.display()
    );
    path
}

/// Quotes `s` for `/bin/sh`.
pub fn sh_quote(s: impl AsRef<OsStr>) -> String {
    let s = s.as_ref().to_string_lossy();
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A pinned tool scripts/test installs for the tests (an agent CLI, the MCP SDK): where it is
/// (`default`, or the path in the variable `env`), what it is and how to install it.
pub struct PinnedTool {
    pub env: &'static str,
    pub default: &'static str,
    pub what: &'static str,
    pub install: &'static str,
}

impl PinnedTool {
    /// Its path; the test fails saying how to install it when it is missing (a test that can
    /// run without it calls [`PinnedTool::skip`] first).
    pub fn path(&self) -> PathBuf {
        let path = self.located();
        assert!(
            path.exists(),
            "{} is not at {} (scripts/test installs it: {}; or set {})",
            self.what,
            path.display(),
            self.install,
            self.env
        );
        path
    }

    /// Whether a test that needs the tool does not run here: it is missing and
    /// `STOCKADE_REQUIRE_AGENT_CLIS` is not `1`. Prints one line naming what is missing and
    /// how to install it; the caller returns. CI sets the variable (`.ci/run`), so there a
    /// missing tool fails the tests that need it instead.
    pub fn skip(&self) -> bool {
        let path = self.located();
        if path.exists()
            || std::env::var_os("STOCKADE_REQUIRE_AGENT_CLIS").is_some_and(|v| v == "1")
        {
            return false;
        }
        println!(
            "skipped: {} is not installed at {} (scripts/test installs it when npm or pip can reach \
             their registry: {}; or set {})",
            self.what,
            path.display(),
            self.install,
            self.env
        );
        true
    }

    fn located(&self) -> PathBuf {
        std::env::var_os(self.env)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(self.default))
    }
}

/// The official MCP TypeScript SDK, whose client drives `stockade mcp` in the tests.
pub const MCP_SDK: PinnedTool = PinnedTool {
    env: "STOCKADE_TEST_MCP_SDK",
    default: "/var/tmp/stockade-tools/node_modules/@modelcontextprotocol/sdk",
    what: "the MCP TypeScript SDK",
    install: "npm install --prefix /var/tmp/stockade-tools @modelcontextprotocol/sdk",
};

/// The absolute path of `name` in [`PATH`], if it is installed.
pub fn which(name: &str) -> Option<PathBuf> {
    PATH.split(':')
        .map(|dir| Path::new(dir).join(name))
        .find(|p| {
            fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// `/usr/bin/python3` (or another python3 in [`PATH`]) when installed; prints a skip line
/// naming `what` otherwise.
pub fn python3(what: &str) -> Option<PathBuf> {
    let found = if Path::new("/usr/bin/python3").is_file() {
        Some(PathBuf::from("/usr/bin/python3"))
    } else {
        which("python3")
    };
    if found.is_none() {
        println!("skipped: python3 not installed: {what}");
    }
    found
}

/// A cargo (with its rustc beside it) that the sandboxed command can run: inside, the command
/// never runs as root, so a toolchain under a private home (rustup's under `/root`) is out of
/// reach. The toolchain running the tests (`$CARGO`) when every directory above it can be
/// entered by others, else Debian's `/usr/bin/cargo` (installed by scripts/test). Prints a
/// skip line naming `what` when there is neither.
pub fn cargo_for_sandbox(what: &str) -> Option<(PathBuf, PathBuf)> {
    use std::os::unix::fs::PermissionsExt;
    let reachable = |p: &Path| {
        p.ancestors()
            .skip(1)
            .all(|dir| fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
    };
    let runs = |p: &Path| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let candidates = std::env::var_os("CARGO")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("/usr/bin/cargo")]);
    for cargo in candidates {
        let rustc = cargo.with_file_name("rustc");
        if cargo.is_file() && rustc.is_file() && reachable(&cargo) && runs(&cargo) {
            return Some((cargo, rustc));
        }
    }
    println!("skipped: no cargo the sandbox can reach (install Debian's cargo): {what}");
    None
}

/// Writes `contents` to `path` (creating parent directories, mode 0755) with `mode`.
pub fn write_file(path: &Path, contents: impl AsRef<[u8]>, mode: u32) {
    if let Some(parent) = path.parent() {
        mkdir(parent);
    }
    fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    chmod(path, mode);
}

/// `mkdir -p` with mode 0755 for every directory it creates.
pub fn mkdir(path: &Path) {
    if path.is_dir() {
        return;
    }
    if let Some(parent) = path.parent() {
        mkdir(parent);
    }
    fs::create_dir(path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
    chmod(path, 0o755);
}

/// `chmod`.
pub fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// The file's bytes, or `None` when it cannot be read.
pub fn read_bytes(path: &Path) -> Option<Vec<u8>> {
    fs::read(path).ok()
}

/// The file's text (lossy), or `None` when it cannot be read.
pub fn read_text(path: &Path) -> Option<String> {
    read_bytes(path).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Every path below `dir` (not following symlinks), skipping the subtrees for which `skip`
/// returns true.
pub fn walk(dir: &Path, skip: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if skip(&p) {
                continue;
            }
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            out.push(p.clone());
            if is_dir {
                stack.push(p);
            }
        }
    }
    out
}

/// Git hooks that would run: every entry of a `hooks` directory inside a `.git` directory
/// below `ws` whose name does not end in `.sample` (the quarantine under `.stockade/` is
/// not part of the live workspace and is skipped).
pub fn live_hooks(ws: &Path) -> Vec<PathBuf> {
    let quarantine = ws.join(".stockade");
    walk(ws, &|p| p.starts_with(&quarantine))
        .into_iter()
        .filter(|p| {
            let parent = p.parent();
            let in_hooks = parent.and_then(Path::file_name) == Some(OsStr::new("hooks"))
                && parent
                    .and_then(Path::parent)
                    .and_then(Path::file_name)
                    .is_some_and(|n| n == ".git");
            let sample = p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".sample"));
            in_hooks && !sample
        })
        .collect()
}

/// Files below `<ws>/.stockade/quarantine`.
pub fn quarantined_files(ws: &Path) -> Vec<PathBuf> {
    walk(&ws.join(".stockade/quarantine"), &|_| false)
        .into_iter()
        .filter(|p| p.symlink_metadata().map(|m| !m.is_dir()).unwrap_or(false))
        .collect()
}

/// Does any string anywhere in `value` satisfy `pred`?
pub fn json_any_string(value: &serde_json::Value, pred: &dyn Fn(&str) -> bool) -> bool {
    match value {
        serde_json::Value::String(s) => pred(s),
        serde_json::Value::Array(items) => items.iter().any(|v| json_any_string(v, pred)),
        serde_json::Value::Object(map) => {
            map.iter().any(|(k, v)| pred(k) || json_any_string(v, pred))
        }
        _ => false,
    }
}

/// The string field `key` of a JSON object, or "".
pub fn json_str<'a>(value: &'a serde_json::Value, key: &str) -> &'a str {
    value.get(key).and_then(|v| v.as_str()).unwrap_or("")
}

/// Parses a JSON file written by stockade (`--report`), panicking with its text otherwise.
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = read_text(path).unwrap_or_else(|| panic!("{} was not written", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON ({e}):\n{text}", path.display()))
}

/// Parses a JSON-lines file written by stockade (`--audit`).
pub fn read_jsonl(path: &Path) -> Vec<serde_json::Value> {
    let text = read_text(path).unwrap_or_else(|| panic!("{} was not written", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("line of {} is not JSON ({e}): {l}", path.display()))
        })
        .collect()
}

/// Wraps an attack snippet: it runs in a subshell, then [`DONE`] and its status are printed
/// on a line of their own.
pub fn wrap(script: &str) -> String {
    // The status goes on a line of its own even when the snippet's output lacks a final
    // newline.
    format!("(\n{script}\n)\n__rc=$?\nprintf '\\n{DONE} rc=%s\\n' \"$__rc\"\n")
}

/// A finished command.
#[derive(Debug)]
pub struct Run {
    /// What was run, for messages.
    pub what: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The exit code as a shell reports it: the code, or 128 + the signal that killed it.
    pub fn code(&self) -> i32 {
        self.status
            .code()
            .unwrap_or_else(|| 128 + self.status.signal().unwrap_or(0))
    }

    /// stdout followed by stderr.
    pub fn all_output(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// A description for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "{}\n--- status: {} (code {})\n--- stdout:\n{}\n--- stderr:\n{}\n---",
            self.what,
            self.status,
            self.code(),
            self.stdout,
            self.stderr
        )
    }

    /// Asserts the exit code.
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code(),
            code,
            "expected exit code {code}\n{}",
            self.describe()
        );
        self
    }

    /// Asserts exit code 0.
    pub fn assert_success(&self) -> &Self {
        self.assert_code(0)
    }

    /// Asserts a non-zero exit code.
    pub fn assert_failure(&self) -> &Self {
        assert_ne!(
            self.code(),
            0,
            "expected a non-zero exit code\n{}",
            self.describe()
        );
        self
    }

    /// Asserts that stdout contains `needle`.
    pub fn assert_stdout_contains(&self, needle: &str) -> &Self {
        assert!(
            self.stdout.contains(needle),
            "expected stdout to contain {needle:?}\n{}",
            self.describe()
        );
        self
    }

    /// Asserts that stderr contains `needle`.
    pub fn assert_stderr_contains(&self, needle: &str) -> &Self {
        assert!(
            self.stderr.contains(needle),
            "expected stderr to contain {needle:?}\n{}",
            self.describe()
        );
        self
    }

    /// Asserts that neither stdout nor stderr contains `needle`.
    pub fn assert_lacks(&self, needle: &str) -> &Self {
        assert!(
            !self.stdout.contains(needle) && !self.stderr.contains(needle),
            "output must not contain {needle:?}\n{}",
            self.describe()
        );
        self
    }

    /// Interprets the output of a [`wrap`]ped snippet.
    pub fn outcome(self) -> Outcome {
        let rc = self.stdout.lines().rev().find_map(|l| {
            l.strip_prefix(DONE)
                .and_then(|rest| rest.trim().strip_prefix("rc="))
                .and_then(|n| n.trim().parse::<i32>().ok())
        });
        Outcome { run: self, rc }
    }
}

/// The result of a [`wrap`]ped snippet: the run, and the snippet's own exit status when the
/// wrapper got to print it.
#[derive(Debug)]
pub struct Outcome {
    pub run: Run,
    pub rc: Option<i32>,
}

impl Outcome {
    /// Asserts the snippet really ran (the wrapper printed its status) and the whole command
    /// exited 0; returns the snippet's status.
    pub fn ran(&self) -> i32 {
        match self.rc {
            Some(rc) if self.run.code() == 0 => rc,
            _ => panic!(
                "the snippet did not run to the end (no `{DONE}` line, or a non-zero exit \
                 of the shell): stockade refused or crashed\n{}",
                self.run.describe()
            ),
        }
    }

    /// The attack ran, failed (non-zero status) and `marker` appears nowhere in its output.
    pub fn assert_blocked(&self, marker: &str) -> &Self {
        let rc = self.ran();
        assert_ne!(
            rc,
            0,
            "the attack succeeded (status 0)\n{}",
            self.run.describe()
        );
        self.run.assert_lacks(marker);
        self
    }

    /// The attack ran and `marker` appears nowhere in its output (its status is not checked).
    pub fn assert_hidden(&self, marker: &str) -> &Self {
        self.ran();
        self.run.assert_lacks(marker);
        self
    }

    /// The attack ran and failed, where the backend refuses protected creations during the
    /// run ([`creation_guarded`]); elsewhere it only ran: the sweep after the run is the
    /// protection there, and the caller checks the state the run left.
    pub fn assert_failed_if_guarded(&self) -> &Self {
        if creation_guarded() {
            self.assert_failed()
        } else {
            self.ran();
            self
        }
    }

    /// The attack ran and failed (non-zero status).
    pub fn assert_failed(&self) -> &Self {
        let rc = self.ran();
        assert_ne!(
            rc,
            0,
            "expected the snippet to fail\n{}",
            self.run.describe()
        );
        self
    }

    /// The snippet ran and succeeded (status 0).
    pub fn assert_ok(&self) -> &Self {
        let rc = self.ran();
        assert_eq!(
            rc,
            0,
            "expected the snippet to succeed\n{}",
            self.run.describe()
        );
        self
    }

    /// The snippet ran, succeeded and printed `marker` on stdout.
    pub fn assert_shows(&self, marker: &str) -> &Self {
        self.assert_ok();
        self.run.assert_stdout_contains(marker);
        self
    }

    /// Asserts that stdout or stderr contains `needle`.
    pub fn assert_output_contains(&self, needle: &str) -> &Self {
        assert!(
            self.run.all_output().contains(needle),
            "expected output to contain {needle:?}\n{}",
            self.run.describe()
        );
        self
    }

    /// Asserts that neither stdout nor stderr contains `needle`.
    pub fn assert_lacks(&self, needle: &str) -> &Self {
        self.run.assert_lacks(needle);
        self
    }
}

/// A command to run with a clean environment, a timeout and captured output.
#[derive(Debug, Clone)]
pub struct Cmd {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: PathBuf,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    /// A fixture given to [`WORKSPACE_OWNER`] before the command runs ([`GiveOut`]).
    give_out: Option<GiveOut>,
}

impl Cmd {
    /// `program` with no arguments, an environment holding only [`PATH`], run in `cwd`.
    pub fn new(program: impl Into<PathBuf>, cwd: &Path) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: vec![("PATH".into(), PATH.into())],
            cwd: cwd.to_path_buf(),
            stdin: None,
            give_out: None,
            timeout: std::env::var("STOCKADE_TEST_TIMEOUT")
                .ok()
                .and_then(|s| s.parse().ok())
                .map_or(TIMEOUT, Duration::from_secs),
        }
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// Sets (or replaces) an environment variable.
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        let name = name.as_ref().to_os_string();
        self.env.retain(|(n, _)| *n != name);
        self.env.push((name, value.as_ref().to_os_string()));
        self
    }

    /// Runs in `dir` instead.
    pub fn cwd(mut self, dir: &Path) -> Self {
        self.cwd = dir.to_path_buf();
        self
    }

    /// Feeds `input` on standard input (the default is `/dev/null`).
    pub fn stdin(mut self, input: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(input.into());
        self
    }

    /// Runs the command under a wrapper: `prefix[0] prefix[1..]... PROGRAM ARGS...` (e.g.
    /// `nsenter --net=/run/netns/x --`), with the same environment and directory.
    pub fn under<S: AsRef<OsStr>>(mut self, prefix: &[S]) -> Self {
        let Some((first, rest)) = prefix.split_first() else {
            return self;
        };
        // A wrapped `stockade run` keeps the backend under test.
        self.args = self.final_args();
        let mut args: Vec<OsString> = rest.iter().map(|a| a.as_ref().to_os_string()).collect();
        args.push(self.program.into_os_string());
        args.append(&mut self.args);
        self.program = PathBuf::from(first.as_ref());
        self.args = args;
        self
    }

    /// Kills the command after `timeout` instead of [`TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// A one-line description of the command.
    pub fn describe(&self) -> String {
        let mut s = format!("$ cd {} &&", sh_quote(&self.cwd));
        for (n, v) in &self.env {
            s.push_str(&format!(" {}={}", n.to_string_lossy(), sh_quote(v)));
        }
        s.push_str(&format!(" {}", sh_quote(&self.program)));
        for a in &self.final_args() {
            s.push(' ');
            s.push_str(&sh_quote(a));
        }
        s
    }

    /// The arguments as run: a `stockade run` that names no backend gets the one under test
    /// ([`backend`]).
    pub fn final_args(&self) -> Vec<OsString> {
        let mut args = self.args.clone();
        let is_run = self.program == stockade_bin()
            && args.first().is_some_and(|a| a == "run" || a == "mcp");
        // Only options before the command count (`--shell S` or `-- ARGV` end them).
        let names_one = args
            .iter()
            .take_while(|a| *a != "--" && *a != "--shell")
            .any(|a| a == "--backend" || a.to_string_lossy().starts_with("--backend="));
        if is_run && !names_one && backend() != "native" {
            // Rootless Podman on cgroup v1 cannot bound memory whole: its runs go without the
            // default limit unless the test asks for one.
            let asks_memory = args
                .iter()
                .take_while(|a| *a != "--" && *a != "--shell")
                .any(|a| a == "--memory" || a.to_string_lossy().starts_with("--memory="));
            args.splice(
                1..1,
                backend_options(asks_memory).into_iter().map(OsString::from),
            );
        }
        args
    }

    /// The environment as run: a run under a container backend gets the engine's shared store
    /// ([`engine_store`]) unless the test names one.
    pub fn final_env(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.env.clone();
        for (k, v) in engine_store_env() {
            if !env.iter().any(|(n, _)| *n == *k) {
                env.push((k.into(), v.into()));
            }
        }
        env
    }

    /// The command line as run (the program, then [`Cmd::final_args`]), its environment and
    /// its directory, as text: for a runner of its own ([`pty::Screen`], a terminal).
    pub fn parts(&self) -> (Vec<String>, Vec<(String, String)>, PathBuf) {
        self.give_out();
        let text = |s: &OsStr| s.to_string_lossy().into_owned();
        let mut argv = vec![text(self.program.as_os_str())];
        argv.extend(self.final_args().iter().map(|a| text(a)));
        let env = self
            .final_env()
            .iter()
            .map(|(k, v)| (text(k), text(v)))
            .collect();
        (argv, env, self.cwd.clone())
    }

    /// Runs the command with a test build's pause point: `variable` names `flag`, which the
    /// run makes where it pauses and waits for it to be removed. Waits (up to 60 s) until it
    /// has paused, does `meanwhile` (the attack's change at that known moment), lets it go on,
    /// and returns how it ended.
    pub fn run_paused(self, variable: &str, flag: &Path, meanwhile: impl FnOnce()) -> Run {
        let _ = std::fs::remove_file(flag);
        let cmd = self.env(variable, flag);
        let waiting = std::thread::spawn(move || cmd.run());
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while !flag.exists() {
            assert!(
                std::time::Instant::now() < until,
                "the run never paused at {variable}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        meanwhile();
        std::fs::remove_file(flag).expect("let the run go on");
        waiting.join().expect("the run's thread")
    }

    /// Gives the fixture of a root caller's container run to [`WORKSPACE_OWNER`] ([`GiveOut`]).
    ///
    /// Only for a command that starts a sandbox: `stockade run` (or `mcp`), or another program
    /// (a test's shell, a terminal's harness) whose arguments start stockade. Not for the other
    /// subcommands (`apply` would find the workspace changed since the run) or a plain control.
    fn give_out(&self) {
        if !gives_out() {
            return;
        }
        let bin = stockade_bin();
        let starts_a_run = if self.program == bin {
            self.args.first().is_some_and(|a| a == "run" || a == "mcp")
        } else {
            let bin = bin.to_string_lossy();
            self.args
                .iter()
                .any(|a| a.to_string_lossy().contains(&*bin))
        };
        if !starts_a_run {
            return;
        }
        match &self.give_out {
            Some(give) => give.apply(&self.final_args(), &self.cwd, &self.env),
            None => GiveOut {
                dirs: Vec::new(),
                fixture: None,
            }
            .apply(&self.final_args(), &self.cwd, &self.env),
        }
    }

    /// Runs the command to completion (killing it after [`TIMEOUT`]).
    pub fn run(self) -> Run {
        self.run_within()
            .unwrap_or_else(|timed_out| panic!("{timed_out}"))
    }

    /// [`Cmd::run`] for a real agent CLI inside `stockade run`, given `timeout` in all.
    ///
    /// Under gVisor, one more attempt (each with half of `timeout`) when the first is killed
    /// at its timeout. Codex there sometimes never learns that the command it ran has ended:
    /// seen under load about once in 25 runs, never on the native backend), the sandbox
    /// held the tool's shell and Codex's `git` as zombies while all of Codex's threads waited,
    /// and a `SIGCHLD` sent from outside did not wake it. The run under test passed
    /// everything up to there (the model's first answer came through the route, the tool ran),
    /// so a second attempt asks the same of stockade; both failing still fails the test, and
    /// the first attempt's output is printed.
    pub fn run_agent(self, timeout: Duration) -> Run {
        self.run_agent_again(timeout, || {})
    }

    /// [`Cmd::run_agent`], calling `again` before a second attempt: for a run whose first
    /// attempt changes what the second would start from (a control whose plants land in the
    /// agent's own configuration, which the agent reads when it starts), `again` puts the
    /// fixture back as the test set it up.
    pub fn run_agent_again(self, timeout: Duration, again: impl FnOnce()) -> Run {
        if backend() != "gvisor" {
            return self.timeout(timeout).run();
        }
        let half = timeout / 2;
        match self.clone().timeout(half).run_within() {
            Ok(run) => run,
            Err(first) => {
                again();
                // Straight to the descriptor, past the test harness's capture: a second
                // attempt shows in the log of a passing run too.
                let _ = writeln!(
                    std::io::stderr(),
                    "run_agent: the first attempt under gVisor ended at its timeout; once more. It printed:\n{first}"
                );
                self.timeout(half).run()
            }
        }
    }

    /// [`Cmd::run`], but a run killed at its timeout is an `Err` saying so (with what it
    /// printed) instead of a panic: for a caller that may run it again.
    pub fn run_within(self) -> Result<Run, String> {
        self.give_out();
        let what = self.describe();
        let mut command = Command::new(&self.program);
        command
            .args(self.final_args())
            .env_clear()
            .envs(self.final_env())
            .current_dir(&self.cwd)
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("failed to start: {e}\n{what}"));
        if let Some(input) = self.stdin {
            let mut pipe = child.stdin.take().expect("stdin pipe");
            thread::spawn(move || {
                let _ = pipe.write_all(&input);
            });
        }
        let stdout = reader(child.stdout.take().expect("stdout pipe"));
        let stderr = reader(child.stderr.take().expect("stderr pipe"));
        let status = wait_deadline(&mut child, self.timeout);
        let collect = |rx: mpsc::Receiver<Vec<u8>>| {
            rx.recv_timeout(Duration::from_secs(10))
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_else(|_| "<output pipe still held open by a leftover process>".into())
        };
        let stdout = collect(stdout);
        let stderr = collect(stderr);
        match status {
            Some(status) => Ok(Run {
                what,
                status,
                stdout,
                stderr,
            }),
            None => Err(format!(
                "timed out after {:?}, killed\n{what}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}",
                self.timeout
            )),
        }
    }

    /// Runs a [`wrap`]ped snippet and interprets its output.
    pub fn outcome(self) -> Outcome {
        self.run().outcome()
    }

    /// Starts the command without waiting for it (its output discarded); the caller waits.
    pub fn spawn(self) -> Child {
        self.spawn_with_stdin(Stdio::null())
    }

    /// [`Cmd::spawn`] with its standard output and error written to `log` (read it when the
    /// command's part of a test did not happen: a run that never started says why there).
    pub fn spawn_logged(self, log: &Path) -> Child {
        self.give_out();
        let what = self.describe();
        let out = fs::File::create(log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let err = out.try_clone().expect("clone the log's descriptor");
        Command::new(&self.program)
            .args(self.final_args())
            .env_clear()
            .envs(self.final_env())
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("failed to start: {e}\n{what}"))
    }

    /// [`Cmd::spawn`] with `stdin` as its standard input (`Stdio::piped()`: the caller writes
    /// to the command while it runs, a signal every backend passes on as it comes; a file
    /// the host makes is not seen inside gVisor, whose root is cached).
    pub fn spawn_with_stdin(self, stdin: Stdio) -> Child {
        self.give_out();
        let what = self.describe();
        Command::new(&self.program)
            .args(self.final_args())
            .env_clear()
            .envs(self.final_env())
            .current_dir(&self.cwd)
            .stdin(stdin)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("failed to start: {e}\n{what}"))
    }
}

fn reader(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

/// Waits for `child`; after `timeout` kills its process group and returns `None`.
fn wait_deadline(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: kill has no memory-safety preconditions; the group is the child's own.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// A fake home and a workspace, under a fresh directory in `/var/tmp`.
///
/// Layout (all directories 0755 and files 0644, so the sandbox, which runs as another uid
/// when the caller is root, is kept out by stockade alone, not by file permissions):
///
/// ```text
/// <root>/home/            fake $HOME: .ssh/id_rsa .aws/credentials .bashrc .netrc
///                         .git-credentials .bash_history .gnupg/… .config/gh/hosts.yml
///                         notes.txt (not a secret: readable inside)
/// <root>/ws/              workspace: git repo (README.md, app/main.txt and a .gitignore
///                         naming the dotenv files committed), .env, .env.local,
///                         app/.env.production
/// <root>/outside/         caller-writable directory outside the workspace: target.txt
/// <root>/scripts/         helper scripts the tests write (readable inside)
/// ```
pub struct Fixture {
    dir: tempfile::TempDir,
    /// Unique token of this fixture (appears in markers, never in paths).
    pub id: String,
    pub root: PathBuf,
    pub home: PathBuf,
    pub ws: PathBuf,
    pub outside: PathBuf,
}

impl Drop for Fixture {
    /// Gives every directory of the fixture its owner's `rwx` back before the temporary
    /// directory is removed. Attack tests leave directories the suite's user cannot enter (a
    /// `chmod 000` directory the sweep quarantined keeps its mode), and the removal stopped at
    /// the first one when the suite ran unprivileged: about fifty fixtures stayed in `/var/tmp`
    /// after each run. Best effort, never following a symbolic link; root needs none of it.
    fn drop(&mut self) {
        fn open_up(dir: &Path) {
            let Ok(meta) = fs::symlink_metadata(dir) else {
                return;
            };
            if !meta.is_dir() {
                return;
            }
            let mode = meta.permissions().mode();
            if mode & 0o700 != 0o700 {
                let _ = fs::set_permissions(dir, fs::Permissions::from_mode(mode | 0o700));
            }
            for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    open_up(&entry.path());
                }
            }
        }
        open_up(&self.root);
    }
}

impl Fixture {
    /// A fixture whose workspace is a git repository with one commit.
    pub fn new() -> Self {
        Self::build(true)
    }

    /// A fixture whose workspace is a plain directory (no `.git`).
    pub fn without_git() -> Self {
        Self::build(false)
    }

    fn build(git: bool) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("stockade-attacks.")
            .tempdir_in(FIXTURE_PARENT)
            .expect("create fixture directory in /var/tmp");
        // Canonical path: the workspace stockade sees is canonicalized too.
        let root = dir.path().canonicalize().expect("canonicalize fixture");
        chmod(&root, 0o755);
        if gives_out() {
            write_file(
                &root.join(HOST_GITCONFIG),
                "[safe]\n\tdirectory = *\n",
                0o644,
            );
        }
        let fx = Fixture {
            id: unique(),
            home: root.join("home"),
            ws: root.join("ws"),
            outside: root.join("outside"),
            root,
            dir,
        };
        fx.populate_home();
        mkdir(&fx.ws);
        mkdir(&fx.outside);
        mkdir(&fx.root.join("scripts"));
        write_file(&fx.outside.join("target.txt"), "original\n", 0o644);
        write_file(
            &fx.ws.join("README.md"),
            format!("# demo\n{}\n", fx.marker("readme")),
            0o644,
        );
        write_file(
            &fx.ws.join(".env"),
            format!("API_KEY={}\n", fx.marker("dotenv")),
            0o644,
        );
        write_file(
            &fx.ws.join(".env.local"),
            format!("DB_PASSWORD={}\n", fx.marker("dotenvlocal")),
            0o644,
        );
        write_file(
            &fx.ws.join("app/.env.production"),
            format!("STRIPE_KEY={}\n", fx.marker("dotenvprod")),
            0o644,
        );
        write_file(&fx.ws.join("app/main.txt"), "main\n", 0o644);
        // As in a real project, the dotenv files are ignored by git.
        write_file(&fx.ws.join(".gitignore"), ".env\n.env.*\n", 0o644);
        if git {
            fx.git_host(&["-c", "init.defaultBranch=main", "init", "-q"])
                .assert_success();
            fx.git_host(&["config", "user.email", "attacks@example.invalid"])
                .assert_success();
            fx.git_host(&["config", "user.name", "Attack Suite"])
                .assert_success();
            fx.git_host(&["config", "commit.gpgsign", "false"])
                .assert_success();
            fx.git_host(&["add", "README.md", "app/main.txt", ".gitignore"])
                .assert_success();
            fx.git_host(&["commit", "-q", "-m", "initial"])
                .assert_success();
            // git creates .git/ with its own modes; make every directory traversable.
            for p in walk(&fx.ws.join(".git"), &|_| false) {
                if p.is_dir() {
                    chmod(&p, 0o755);
                }
            }
        }
        fx
    }

    fn populate_home(&self) {
        let h = &self.home;
        mkdir(h);
        write_file(
            &h.join(".ssh/id_rsa"),
            format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
                self.marker("ssh")
            ),
            0o644,
        );
        write_file(
            &h.join(".ssh/config"),
            format!("# {}\nHost *\n", self.marker("sshconfig")),
            0o644,
        );
        write_file(
            &h.join(".aws/credentials"),
            format!(
                "[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = {}\n",
                self.marker("aws")
            ),
            0o644,
        );
        write_file(
            &h.join(".bashrc"),
            format!("# bashrc {}\n", self.marker("bashrc")),
            0o644,
        );
        write_file(
            &h.join(".netrc"),
            format!(
                "machine example.invalid login u password {}\n",
                self.marker("netrc")
            ),
            0o644,
        );
        write_file(
            &h.join(".git-credentials"),
            format!("https://u:{}@example.invalid\n", self.marker("gitcred")),
            0o644,
        );
        write_file(
            &h.join(".bash_history"),
            format!("export GITHUB_TOKEN={}\n", self.marker("history")),
            0o644,
        );
        write_file(
            &h.join(".gnupg/private-keys-v1.d/key.key"),
            format!("{}\n", self.marker("gnupg")),
            0o644,
        );
        write_file(
            &h.join(".config/gh/hosts.yml"),
            format!("github.com:\n  oauth_token: {}\n", self.marker("gh")),
            0o644,
        );
        write_file(
            &h.join(".npmrc"),
            format!(
                "//registry.example.invalid/:_authToken={}\n",
                self.marker("npmrc")
            ),
            0o644,
        );
        write_file(
            &h.join("notes.txt"),
            format!("{}\n", self.marker("notes")),
            0o644,
        );
    }

    /// The marker string of a kind of secret (`ssh`, `aws`, `dotenv`, `bashrc`, ...).
    /// Markers appear only in file contents and environment values, never in paths, so an
    /// error message naming a path never contains one.
    pub fn marker(&self, kind: &str) -> String {
        format!("{kind}-MARKER-{}", self.id)
    }

    /// Environment given to every command: `PATH` and the fake `HOME`. Under a root caller's
    /// container backend every command of the fixture first gives it to [`WORKSPACE_OWNER`]
    /// ([`GiveOut`]: a test's shell may start `stockade` itself), and root's git on the host
    /// (the controls, the tests' own set-up) trusts the checkout of that user, as such a root
    /// caller's would.
    fn base(&self, program: impl Into<PathBuf>) -> Cmd {
        let mut cmd = Cmd::new(program, &self.ws).env("HOME", &self.home);
        if gives_out() {
            cmd.give_out = Some(self.give_out_plan());
            // The system's config, not GIT_CONFIG_COUNT: git drops that for the other side of
            // a local clone.
            cmd = cmd.env("GIT_CONFIG_SYSTEM", self.root.join(HOST_GITCONFIG));
        }
        cmd
    }

    /// What this fixture gives ([`GiveOut`]): every directory in it but the caller's home, the
    /// host's scripts and the binaries the tests copy for another user (`bin`).
    fn give_out_plan(&self) -> GiveOut {
        GiveOut {
            dirs: Vec::new(),
            fixture: Some(self.root.clone()),
        }
    }

    /// For a `stockade` the test starts itself: under a root caller's container backend, gives
    /// the fixture to [`WORKSPACE_OWNER`] as the fixture's commands do ([`GiveOut`]); nothing
    /// otherwise.
    pub fn give_out(&self) {
        if gives_out() {
            let home = [("HOME".into(), self.home.clone().into_os_string())];
            self.give_out_plan().apply(&[], &self.ws, &home);
        }
    }

    /// `stockade ARGS...` with the fixture's environment, in the workspace. A `run` goes to
    /// the backend under test ([`backend`]) unless it names one.
    pub fn stockade<I, S>(&self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.base(stockade_bin()).args(args)
    }

    /// `stockade run --workspace WS OPTS... --shell SCRIPT`.
    pub fn sandbox(&self, opts: &[&str], script: &str) -> Cmd {
        self.stockade(["run".as_ref(), "--workspace".as_ref(), self.ws.as_os_str()])
            .args(opts)
            .arg("--shell")
            .arg(script)
    }

    /// `stockade run --workspace WS OPTS... -- ARGV...`.
    pub fn sandbox_argv(&self, opts: &[&str], argv: &[&str]) -> Cmd {
        self.stockade(["run".as_ref(), "--workspace".as_ref(), self.ws.as_os_str()])
            .args(opts)
            .arg("--")
            .args(argv)
    }

    /// `/bin/sh -c SCRIPT` on the host, with the same environment and directory as
    /// [`Fixture::sandbox`].
    pub fn host(&self, script: &str) -> Cmd {
        self.base("/bin/sh").arg("-c").arg(script)
    }

    /// The attack: [`wrap`]ped `script` inside `stockade run` with `opts`.
    pub fn attack(&self, opts: &[&str], script: &str) -> Cmd {
        self.sandbox(opts, &wrap(script))
    }

    /// The control: the same [`wrap`]ped `script` directly on the host.
    pub fn control(&self, script: &str) -> Cmd {
        self.host(&wrap(script))
    }

    /// `git -C WS ARGS...` on the host (for setting up and inspecting the repository).
    pub fn git_host(&self, args: &[&str]) -> Run {
        self.base("git")
            .args(["-c", "safe.directory=*"])
            .args(args)
            .run()
    }

    /// A copy of the stockade binary under the fixture root, for tests that run stockade
    /// inside a sandbox: the build directory may be under `/tmp` (a clone in `/tmp/x`), which
    /// the sandbox replaces with its own empty `/tmp`.
    pub fn stockade_inside(&self) -> PathBuf {
        let dir = self.root.join("bin");
        mkdir(&dir);
        let copy = dir.join("stockade");
        std::fs::copy(stockade_bin(), &copy).expect("copy the stockade binary into the fixture");
        chmod(&copy, 0o755);
        copy
    }

    /// Writes a helper script into `<root>/scripts/` (readable inside the sandbox).
    pub fn script(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.root.join("scripts").join(name);
        write_file(&path, contents, 0o755);
        path
    }

    /// A script under `<root>/scripts/` that leaves the file `<root>/<marker>` when something
    /// runs it (a git hook or fsmonitor on the host, after the run): (script, flag file).
    pub fn tripwire(&self, marker: &str) -> (PathBuf, PathBuf) {
        let flag = self.root.join(marker);
        let script = self.script(
            &format!("{marker}.sh"),
            &format!("#!/bin/sh\ntouch {}\n", flag.display()),
        );
        (script, flag)
    }

    /// A path for a `--report`/`--audit` file, outside the workspace.
    pub fn out_file(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Fresh `--report` and `--audit` files for one run (see [`Records`]).
    pub fn records(&self) -> Records {
        let report = self.out_file(&format!("report-{}.json", unique()));
        let audit = self.out_file(&format!("audit-{}.jsonl", unique()));
        Records {
            opts: vec![
                "--report".to_owned(),
                report.display().to_string(),
                "--audit".to_owned(),
                audit.display().to_string(),
            ],
            report,
            audit,
            ws: self.ws.clone(),
        }
    }

    /// The fixture directory handle (kept alive as long as the fixture).
    pub fn tempdir(&self) -> &tempfile::TempDir {
        &self.dir
    }
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

/// Violation kind of a protected path whose creation was refused inside the run.
pub const PROTECTED_PATH_BLOCKED: &str = "protected_path_blocked";

/// Violation kind of a protected path the post-run sweep found and quarantined.
pub const PROTECTED_PATH_CREATED: &str = "protected_path_created";

/// The `--report` and `--audit` files of one run, and the options that ask for them.
pub struct Records {
    pub report: PathBuf,
    pub audit: PathBuf,
    opts: Vec<String>,
    ws: PathBuf,
}

impl Records {
    /// `--report FILE --audit FILE`, to pass to [`Fixture::attack`] and friends.
    pub fn opts(&self) -> Vec<&str> {
        self.opts.iter().map(String::as_str).collect()
    }

    /// The `violations` list of the report.
    pub fn violations(&self) -> Vec<serde_json::Value> {
        let json = read_json(&self.report);
        json.get("violations")
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_else(|| panic!("report has no `violations` list:\n{json:#}"))
    }

    /// The `violation` events of the audit log (every event must name itself).
    pub fn audit_violations(&self) -> Vec<serde_json::Value> {
        let events = read_jsonl(&self.audit);
        assert!(
            events.iter().all(|e| !json_str(e, "event").is_empty()),
            "every audit event needs an `event` field:\n{events:#?}"
        );
        events
            .into_iter()
            .filter(|e| json_str(e, "event") == "violation")
            .collect()
    }

    /// Is `v` an `E_SANDBOX_VIOLATION` of `kind` whose absolute `path` lies in the workspace
    /// and ends with `/<one of suffixes>`?
    fn is(&self, v: &serde_json::Value, kind: &str, suffixes: &[&str]) -> bool {
        let path = json_str(v, "path");
        json_str(v, "code") == "E_SANDBOX_VIOLATION"
            && json_str(v, "kind") == kind
            && Path::new(path).starts_with(&self.ws)
            && suffixes.iter().any(|s| path.ends_with(&format!("/{s}")))
    }

    /// Without a creation guard ([`creation_guarded`]): what the sweep after the run took
    /// out, a violation (report and audit log) on a path ending in one of `suffixes` or on a
    /// directory above such a path (a new `.vscode` is moved whole), saying where it went.
    /// Returns the reported path.
    /// A violation of `kind` (report and audit log) on a path ending with one of `suffixes`
    /// whose action says where the run's version went.
    pub fn assert_swept_kind(&self, kind: &str, suffixes: &[&str]) {
        let found = |all: Vec<serde_json::Value>| {
            all.into_iter()
                .any(|v| self.is(&v, kind, suffixes) && json_str(&v, "action").contains("moved"))
        };
        assert!(
            found(self.violations()),
            "report has no {kind} violation for {suffixes:?}:\n{:#?}",
            self.violations()
        );
        assert!(
            found(self.audit_violations()),
            "audit log has no {kind} violation for {suffixes:?}"
        );
    }

    pub fn assert_swept(&self, run: &Run, suffixes: &[&str]) -> String {
        let swept = |v: &serde_json::Value| {
            let path = Path::new(json_str(v, "path"));
            json_str(v, "code") == "E_SANDBOX_VIOLATION"
                && path.starts_with(&self.ws)
                && path != self.ws
                && suffixes.iter().any(|s| {
                    path.to_string_lossy().ends_with(&format!("/{s}"))
                        || self.ws.join(s).starts_with(path)
                })
        };
        let violations = self.violations();
        // The path's own violation first: one of an ancestor (a staged git dir's, naming what
        // it did not bring back) says nothing of where this path went.
        let own = |v: &&serde_json::Value| {
            let path = json_str(v, "path");
            suffixes.iter().any(|s| path.ends_with(&format!("/{s}")))
        };
        let found = (violations.iter().filter(|v| swept(v)).find(own))
            .or_else(|| violations.iter().find(|v| swept(v)));
        let Some(v) = found else {
            panic!(
                "report has no violation of the sweep for a path in {} ending with one of \
                 {suffixes:?}:\n{violations:#?}\n{}",
                self.ws.display(),
                run.describe()
            );
        };
        let action = json_str(v, "action");
        assert!(
            action.contains("moved") || action.contains("replaced"),
            "the sweep's violation should say where the path went:\n{v:#}"
        );
        assert!(
            self.audit_violations().iter().any(swept),
            "audit log has no violation event of the sweep for {suffixes:?}"
        );
        json_str(v, "path").to_owned()
    }

    /// The run's refusal to create a protected path ending in one of `suffixes` (relative to
    /// the workspace) was reported everywhere: a `protected_path_blocked` violation with an
    /// absolute `path` and an `action` in the report, the same in the audit log, and the usual
    /// `stockade: violation[...]` line on stderr. Returns the reported path.
    pub fn assert_blocked(&self, run: &Run, suffixes: &[&str]) -> String {
        if !creation_guarded() {
            return self.assert_swept(run, suffixes);
        }
        let violations = self.violations();
        let Some(v) = violations
            .iter()
            .find(|v| self.is(v, PROTECTED_PATH_BLOCKED, suffixes))
        else {
            panic!(
                "report has no E_SANDBOX_VIOLATION/{PROTECTED_PATH_BLOCKED} violation whose path \
                 is in {} and ends with one of {suffixes:?}:\n{violations:#?}\n{}",
                self.ws.display(),
                run.describe()
            );
        };
        let path = json_str(v, "path").to_owned();
        let action = json_str(v, "action");
        assert!(
            action.contains("refused"),
            "the violation's `action` should say what was refused (e.g. \"refused mkdir (EPERM)\"):\n{v:#}"
        );
        let events = self.audit_violations();
        assert!(
            events
                .iter()
                .any(|e| self.is(e, PROTECTED_PATH_BLOCKED, suffixes)),
            "audit log has no {PROTECTED_PATH_BLOCKED} violation event for {path}:\n{events:#?}"
        );
        let line =
            format!("stockade: violation[E_SANDBOX_VIOLATION]: protected path blocked {path}");
        run.assert_stderr_contains(&line);
        path
    }

    /// The post-run sweep had nothing to do: no `protected_path_created` violation and an
    /// empty quarantine (the run never got to create a protected path).
    pub fn assert_nothing_swept(&self, run: &Run) {
        if !creation_guarded() {
            // Without a creation guard the sweep is the protection: it has work to do.
            return;
        }
        let created: Vec<_> = self
            .violations()
            .into_iter()
            .filter(|v| json_str(v, "kind") == PROTECTED_PATH_CREATED)
            .collect();
        assert!(
            created.is_empty(),
            "a protected path was created during the run (the sweep caught it afterwards, \
             in-run prevention did not):\n{created:#?}\n{}",
            run.describe()
        );
        let q = quarantined_files(&self.ws);
        assert!(q.is_empty(), "quarantine is not empty: {q:?}");
    }

    /// The run reported no violation at all (ordinary work refused nothing).
    pub fn assert_no_violations(&self, run: &Run) {
        let violations = self.violations();
        assert!(
            violations.is_empty(),
            "ordinary work produced violations:\n{violations:#?}\n{}",
            run.describe()
        );
        run.assert_lacks("stockade: violation[");
    }
}

/// A host process that must stay invisible and untouchable from inside; killed on drop.
pub struct HostProcess {
    pub child: Child,
    /// Unique string in its command line.
    pub marker: String,
}

impl HostProcess {
    /// Starts `sleep 60` on the host, with the marker as its `argv[0]` (so it shows in `ps`
    /// and `/proc/PID/cmdline`, and killing it leaves no orphan behind).
    pub fn sleeper() -> Self {
        let marker = format!("hostproc-MARKER-{}", unique());
        let child = Command::new(which("sleep").expect("sleep"))
            .arg0(&marker)
            .arg("60")
            .env_clear()
            .env("PATH", PATH)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn host sleeper");
        Self { child, marker }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Is it still running (not exited, not killed)?
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A host SysV shared-memory segment; removed on drop.
pub struct HostShm {
    pub key: i32,
    pub id: i32,
}

impl HostShm {
    /// Creates a 4096-byte segment with a fresh key, mode 0644.
    pub fn create() -> Self {
        for attempt in 0..64u32 {
            let seed = u32::from_str_radix(&unique()[..8], 16).unwrap_or(attempt) ^ attempt;
            let key = i32::try_from(0x5700_0000 | (seed & 0x00ff_ffff)).unwrap_or(0x5700_0001);
            // SAFETY: shmget only reads its integer arguments.
            let id = unsafe { libc::shmget(key, 4096, libc::IPC_CREAT | libc::IPC_EXCL | 0o644) };
            if id >= 0 {
                return Self { key, id };
            }
        }
        panic!("shmget: {}", std::io::Error::last_os_error());
    }

    /// The key as `ipcs` prints it (`0x5700abcd`).
    pub fn key_hex(&self) -> String {
        format!("0x{:08x}", self.key)
    }
}

impl Drop for HostShm {
    fn drop(&mut self) {
        // SAFETY: IPC_RMID ignores the buffer argument, which may be null.
        unsafe { libc::shmctl(self.id, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

/// The host's hostname.
pub fn host_hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// Pids whose command line mentions `tag` (all users, all pid namespaces this one can see).
pub fn processes_with(tag: &str) -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(tag))
                .unwrap_or(false)
        })
        .collect()
}

/// Polls `what` every 20 ms until it holds or `timeout` passes; returns its last value.
pub fn wait_until(what: impl Fn() -> bool, timeout: Duration) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < timeout {
        if what() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    what()
}

/// SIGKILL every process whose command line mentions `tag` (clean-up after controls).
pub fn kill_all(tag: &str) {
    for pid in processes_with(tag) {
        // SAFETY: kill with a pid and a signal number touches no memory.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}
