//! A run's spec lowered to the arguments of `podman run` / `docker run`: pure, tested as
//! data (the whole argument list).
//!
//! The recipe: the image's root read-only (`--read-only`), every capability dropped,
//! `no-new-privileges`, the engine's seccomp profile, a user of the caller's own, a private
//! `/tmp` and `/dev/shm`, no network (`--network none`), the run's limits as the container's
//! cgroup (or rlimits where the engine has none), and the host's tree bound read-only over
//! the image with the masks, writable roots and protected paths as the native backend has
//! them. Every bind is non-recursive: a mount below a bound directory is hidden (an empty
//! directory), never bound writable by accident (a recursive read-only bind leaves the
//! mounts below it writable on these engines).

mod command;
mod engine;
mod env;
mod mounts;

use std::path::{Path, PathBuf};

use sandbox::{Kind, Mask, Spec};

use crate::Engine;
use mounts::Mounts;

/// Why a spec cannot be lowered to a container run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LowerError {
    #[error("path is not valid UTF-8 (a container engine's --mount cannot name it): {0}")]
    NotUtf8(PathBuf),
    #[error("path holds a comma (a container engine's --mount cannot name it): {0}")]
    Comma(PathBuf),
    #[error("{} is {} bytes long: a container engine resolves each mount's path inside its root filesystem's own path, and refuses one that together passes PATH_MAX (4096); stockade refuses any longer than {} bytes before the engine does", .0.display(), .0.as_os_str().len(), ENGINE_PATH_LIMIT)]
    TooLong(PathBuf),
    #[error("read_scope = \"allow-list\" is not supported by the container backends (they bind the host's tree read-only)")]
    AllowList,
    #[error("--net proxy under {0} needs a root caller: stockade opens the proxy's listener inside the container's network namespace, and only root may enter one the daemon made")]
    ProxyDaemon(&'static str),
    #[error("{0} changed since the run was planned (not the directory it was)")]
    Changed(PathBuf),
    #[error("a CPU limit cannot be enforced by rootless {0} on this machine's cgroups")]
    CpuRootless(&'static str),
    #[error("a memory limit below {} MiB cannot be enforced by rootless Podman: it bounds memory per process (RLIMIT_DATA), and below that runc itself cannot start the container", ROOTLESS_MEMORY_FLOOR >> 20)]
    MemoryRootless,
    #[error("the workspace {0} belongs to root: a root caller's command runs as the workspace's owner, never as root, and no unprivileged id owns this one")]
    RootOwnedWorkspace(PathBuf),
    #[error("the writable root {0} holds the home of the user the command runs as: its credentials could not be masked")]
    OwnerHomeWritable(PathBuf),
    #[error("the command's environment variable {0} has a multi-line value and names a setting of the container engine: it cannot be passed without steering the engine")]
    EngineVariable(String),
    #[error("{0} holds ':' or '\"' or '\\', which an overlay's layer list cannot name: a review run's view cannot be mounted by a container engine")]
    ViewPath(PathBuf),
    #[error("review and ephemeral runs under Docker need a root caller: the daemon mounts the view as root, and the change set's overlay marks (trusted.overlay.*) can be read back only by root")]
    ViewDaemon,
    #[error("the run's change directory {0} and the workspace {1} are on different filesystems: a container engine's view of the workspace keeps the workspace's inode numbers only over one, and the check inside could not tell the workspace planned from another directory")]
    ViewFilesystems(PathBuf, PathBuf),
    #[error("the top directory of the workspace {0} holds nothing the check inside can know the workspace by (only symbolic links and paths the run mounts over): a container engine's view over another directory could not be told from this one")]
    ViewUnwitnessed(PathBuf),
    #[error("--disk bounds a review run's view with a filesystem of its own (a tmpfs holding the view's upper layer), which a container engine's view cannot be given: the engine names the overlay's layers by path, so the check inside knows the workspace by inode numbers, and overlayfs keeps a directory's inode number only when every layer is on one filesystem (over a tmpfs upper the workspace's directories are renumbered)")]
    ViewDisk,
    #[error("the command's environment variable name {0:?} holds a space, a control character or a leading '#': a container engine's --env-file would read it as another variable, or as one to copy from stockade's own environment")]
    EnvName(String),
}

/// Who runs the engine and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The id the command runs as inside the container.
    pub uid: u32,
    pub gid: u32,
    /// Rootless Podman (an unprivileged caller): the container's uid 0 is the caller, in a
    /// user namespace of Podman's; it has no cgroup of its own on cgroup v1, so limits are
    /// rlimits.
    pub rootless: bool,
}

/// A directory the container shows as an empty one of stockade's ([`Target::owner_home`],
/// [`Target::covers`]): `source`, root's, made for the run with the mode wanted, bound over
/// `dir`; the engine makes in it the mount points of what is bound below. A bind, not a
/// tmpfs: runc gives a tmpfs the mode of the directory it is mounted on, whatever
/// `tmpfs-mode` says, so root's tmpfs over a 0700 home (or over root's 0700 directory) was
/// closed to the command, and a root caller's run in a workspace in its owner's 0700 home
/// was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cover {
    pub dir: PathBuf,
    pub source: PathBuf,
}

/// What the arguments name besides the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub engine: Engine,
    /// `--runtime` for Podman (runc where crun fails on hybrid cgroups).
    pub runtime: Option<String>,
    pub image: String,
    /// The container's name.
    pub name: String,
    /// An empty file and an unreadable one (mode 0), bound over masked files.
    pub empty_file: PathBuf,
    pub unreadable_file: PathBuf,
    /// The entries of the host's `/`: bound read-only over the image (directories and
    /// files), or made as the image's own (symbolic links).
    pub host_root: Vec<(String, crate::image::Entry, Option<String>)>,
    /// The engine's process limit that a root Podman must not raise (`ulimit -Hu`).
    pub nproc_hard: u64,
    /// The caller's open-files hard limit (the default when the spec has none).
    pub nofile_hard: u64,
    /// The signals the caller ignores (`nohup` ignores SIGHUP), by number: the check inside
    /// ignores them before it becomes the command, which keeps them ignored across `execve`
    /// as a native run's command does (the engine starts it with default actions).
    pub ignored_signals: Vec<i32>,
    /// How this engine's client is told a bind is not recursive.
    pub nonrecursive: NonRecursive,
    /// The host's mount points (rootless Podman binds recursively, see [`lower`]).
    pub mount_points: Vec<PathBuf>,
    /// A root caller's cgroup (v1) for the run, made by stockade before the engine starts
    /// (`sys::cgroup1`): the container's group is made below it (`--cgroup-parent`), and its
    /// counters, read once the run has ended, are the run's usage and limit events (the
    /// container's own group goes with the container). It holds the memory limit itself, and
    /// the container's own limit is [`CHILD_SLACK`] above it: the group reaches its limit
    /// first, so the OOM kill is counted in it. `None`: no limits, an unprivileged caller, a
    /// pure cgroup v2 host, or systemd's cgroups (the engines want a slice there).
    pub group: Option<sys::cgroup1::GroupPlan>,
    /// The seccomp profile (the native backend's deny-list, see `seccomp::oci_profile`) and
    /// the file the command's environment is given in (`--env-file`).
    pub seccomp_profile: PathBuf,
    pub env_file: PathBuf,
    /// Directories masked besides the spec's (unreadable, read-only): the engine's own store
    /// when it lies in the bound tree (rootless Podman's, in the caller's home).
    pub extra_masks: Vec<PathBuf>,
    /// A root caller's command runs as the workspace's owner, whose home holds that user's
    /// credentials, which the spec's masks (made for the caller, root) do not cover: the home
    /// is an empty directory of root's (mode 0711: the command passes through it to what is
    /// bound inside, and lists or reads nothing of it).
    pub owner_home: Option<Cover>,
    /// `(st_dev, st_ino)` of each writable root and read grant when the run was planned (the
    /// protected and pinned paths' are the spec's `identities`).
    pub root_identities: Vec<(PathBuf, (u64, u64))>,
    /// Each planned mask in a writable root (one whose file the spec identified) and the
    /// `(st_dev, st_ino)` of the directory holding it when planned, read through that directory
    /// with the masked file checked in it to be the one identified (`None`: it was not there).
    /// The engine mounts a mask by path: had another run exchanged that directory since, the
    /// mask would land in the other one and the file stay bare at its new place. The check
    /// inside refuses the run unless each directory is the one planned (and, as for every mask,
    /// the path shows the mask: an exchange back leaves the file, not the mask, there).
    pub mask_dirs: Vec<(PathBuf, Option<(u64, u64)>)>,
    /// Directories among the protected and pinned paths that the command's id can neither
    /// search nor change the mode of (not its owner), as planned on the host.
    pub closed: Vec<PathBuf>,
    /// Directories above a writable root or read grant that a root caller's command (the
    /// workspace's owner) cannot search: another owner's, such as root's 0700 `mktemp -d`
    /// holding a clone given to a user. Each is covered by an empty directory of root's (0755,
    /// the command cannot write it) in which the engine makes only the way to what is bound
    /// below it, as the native backend's cover shows it; what else the directory holds is not
    /// in the container. Outermost only: a closed directory below another is the cover's.
    pub covers: Vec<Cover>,
    /// Existing git dirs whose top level the command sees as a staged copy
    /// (`workspace::gitstage`), and the run's directory their copies are made below
    /// (`gitstage::Staged::source`).
    pub staged: Vec<workspace::gitstage::Staged>,
    pub stage_dir: PathBuf,
    /// `(st_dev, st_ino)` of each staged git dir's subdirectories when planned (`None`: not a
    /// directory then), in the order of [`Staged::subdirs`](workspace::gitstage::Staged).
    pub subdir_ids: Vec<Vec<Option<(u64, u64)>>>,
    /// The container's init, a binary of the host's (catatonit or tini) bound read-only at
    /// [`INIT`] and started first: the command is never the container's pid 1, where a signal
    /// it has no handler for would be ignored (a `SIGTERM` sent by stockade, or by the command
    /// to itself, ends it as natively). `None`: none found, the command is pid 1.
    pub init: Option<PathBuf>,
    /// `--net none` and `--net proxy`: the directory holding the gate's two FIFOs (`ready`,
    /// `go`), bound at [`GATE`] (see [`CHECK`]): stockade opens the proxy's listener (proxy)
    /// and the network namespace's counters (both) while the check waits there.
    pub gate: Option<PathBuf>,
    /// A review or ephemeral run ([`Spec::review`]): the copy-on-write view the engine mounts
    /// at the workspace.
    pub view: Option<View>,
}

/// A review run's view as the engine mounts it: an overlay whose lower layer is the workspace
/// and whose upper and work directories are the run's change directory's (made by stockade,
/// only the caller can enter it), mounted by the engine itself (Docker's daemon through its
/// `local` volume driver, a privileged overlay; rootless Podman's `:O` volume, in its user
/// namespace with `userxattr`; root Podman's, privileged), so that the change set's marks
/// are in the namespace `workspace::changes` reads for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub upper: PathBuf,
    pub work: PathBuf,
    /// The inode number of `upper` when planned: the view's top directory shows it, which
    /// the check inside compares (the engine looked the layers up by path).
    pub upper_ino: u64,
    /// [`sandbox::Review::same_filesystem`] (else refused: [`LowerError::ViewFilesystems`]):
    /// the view keeps the workspace's inode numbers for what it has not copied up, so a
    /// directory below the workspace is checked inside by its inode number (its device is
    /// the overlay's).
    pub same_filesystem: bool,
    /// What shows inside that the view's lower layer is the workspace planned (the engine,
    /// root, looked it up by path: a directory put in its place, or a link to another, would
    /// be the lower layer instead): see [`Witness`].
    pub witness: Witness,
}

/// An entry of the workspace's top directory, as planned, checked inside the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Witness {
    /// The first entry by name that is neither a symbolic link nor a mount's destination, and
    /// its inode number (kept by a view over one filesystem).
    Entry(PathBuf, u64),
    /// The workspace was empty: the view must be too.
    Empty,
    /// Nothing to check by (only links and mount points, or two filesystems): refused
    /// ([`LowerError::ViewUnwitnessed`]).
    None,
}

/// Where the gate's FIFOs are inside the container under `--net none` and `--net proxy`: the
/// check writes the identities of its network and user namespaces to `ready` and waits for
/// `go`, which stockade writes once it has opened that network namespace's counters (and,
/// under the proxy, its listener there).
pub const GATE: &str = "/run/stockade";

/// Where a run's redirected streams are inside the container: when the caller's terminal is
/// some of its streams but not all (`> file`, `2>log`, `< input`, a pipe), the engine's
/// terminal is all three of the container's, so each of the others is a FIFO of the run's
/// (only the command's id may open it), bound here read-only (opening a FIFO needs no
/// writable mount), which the check makes the command's stream before it starts
/// (`STOCKADE_CHECK_STREAMS`: the FIFOs' paths here, each named by its stream's number).
pub const STREAMS: &str = "/run/stockade-streams";

/// The `--mount` of the directory of a run's redirected streams (see [`STREAMS`]).
pub fn streams_mount(dir: &Path, target: &Target) -> Result<String, LowerError> {
    bind(dir, Path::new(STREAMS), true, target)
}

/// Where the container's init is bound (see [`Target::init`]). Not the engines' own `--init`:
/// Docker's daemon binds its init at `/sbin/docker-init`, which in an image holding only the
/// host's layout lies below the read-only bind of the host's `/usr/sbin`.
pub const INIT: &str = "/run/stockade-init";

/// How an engine's client is told that a bind is not recursive: Docker's clients from 25 on
/// call `bind-nonrecursive` deprecated (a warning per mount, on the command's stderr) and take
/// `bind-recursive=disabled`, which older clients and Podman 4 do not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonRecursive {
    Legacy,
    Disabled,
    /// Rootless Podman: the kernel refuses a non-recursive bind of a directory holding mounts
    /// in a user namespace (it would uncover what they hide), so binds are recursive and each
    /// mount below a read-only one gets a read-only bind of its own (see [`lower`]).
    Recursive,
}

impl NonRecursive {
    pub fn option(self) -> &'static str {
        match self {
            NonRecursive::Legacy => "bind-nonrecursive=true",
            NonRecursive::Disabled => "bind-recursive=disabled",
            NonRecursive::Recursive => "",
        }
    }
}

/// The lowered run: the engine's arguments after `run`, and what they chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lowered {
    pub args: Vec<String>,
    /// Why the command starts in the workspace rather than where the caller is (when so).
    pub cwd_fallback: Option<String>,
    /// The command's environment as `--env-file` lines (`NAME=VALUE`), and the variables
    /// with multi-line values (which that file cannot hold): the engine takes them from its
    /// own environment (`--env NAME`), never a setting of the engine's own.
    pub env_file: String,
    pub env: Vec<(String, String)>,
}

/// The smallest memory limit rootless Podman can start a container under: runc's own start
/// runs under the container's RLIMIT_DATA, and fails below about 72 MiB here (measured: 64 MiB
/// fails, 80 MiB starts); with a margin.
pub const ROOTLESS_MEMORY_FLOOR: u64 = 96 << 20;

/// Top-level host directories the container gets from the engine or a tmpfs of its own, never
/// the host's: the kernel's views, devices, and the host's run-time sockets (`/run` holds the
/// engine's own socket: a command that reached it would be root on the host).
const NOT_BOUND: &[&str] = &["proc", "sys", "dev", "tmp", "run"];

/// The script the command is started by (`/bin/sh -c`), with the system's `PATH` for its own
/// tools (the command's could name a directory of the workspace, where a planted `awk` would
/// answer for the check), given back to the command: it reads back what the engine applied
/// and refuses to run the command (exit 125, naming the flag) when a hardening flag was
/// ignored; then it becomes the command (`exec`: same process, same exit codes as a shell's,
/// 126 and 127 included).
pub const CHECK: &str = r#"if [ -n "${PATH+x}" ]; then STOCKADE_CHECK_SAVED_PATH=$PATH; fi
PATH=/usr/sbin:/usr/bin:/sbin:/bin
fail() { printf 'stockade: E_PROTECTION_UNAVAILABLE: the container engine did not apply %s (%s): the command was not run; fix: use an engine that applies it, or --backend native\n' "$1" "$2" >&2; exit 125; }
while read -r k v rest; do case "$k" in
CapPrm:|CapEff:|CapBnd:|CapAmb:) [ "$v" = 0000000000000000 ] || fail "--cap-drop ALL" "$k $v";;
NoNewPrivs:) [ "$v" = 1 ] || fail "--security-opt no-new-privileges" "NoNewPrivs $v";;
Seccomp:) [ "$v" = 2 ] || fail "its seccomp profile" "Seccomp $v";;
Uid:) [ "$v" = "$STOCKADE_CHECK_UID" ] || fail "--user" "uid $v";;
esac; done < /proc/self/status
w=$(awk '
BEGIN { rw = ENVIRON["STOCKADE_CHECK_RW"] }
function hidden(m,   c) { if (m in shadow) return 1; for (c = m; (c in par) && (par[c] in mp); c = par[c]) if ((par[c] in shadow) && mp[c] != mp[par[c]]) return 1; return 0 }
function ok(p,   n, a, i) { if (p ~ /^\/(proc(\/.*)?|dev|tmp|run|dev\/(pts|mqueue|shm|console|null|zero|full|random|urandom|tty))$/ || p ~ /^\/sys\/fs\/cgroup(\/|$)/ || p == "/etc/hosts" || p == "/etc/hostname" || p == "/etc/resolv.conf") return 1; n = split(rw, a, " "); for (i = 1; i <= n; i++) if (p == a[i] || index(p, a[i] "/") == 1) return 1; return 0 }
{ id[NR] = $1; par[$1] = $2; mp[$1] = $5; op[$1] = $6 }
END { for (i = 1; i <= NR; i++) { m = id[i]; q = par[m]; if ((q in mp) && mp[q] == mp[m]) shadow[q] = 1 }
for (i = 1; i <= NR; i++) { m = id[i]; if (hidden(m) || ("," op[m] ",") ~ /,ro,/) continue; if (mp[m] == "/") { print "W /"; exit } if (!ok(mp[m])) print "S " mp[m] }
n = split(ENVIRON["STOCKADE_CHECK_PLACED"], pl, " "); for (j = 1; j <= n; j++) { f = substr(pl[j], 1, 1); p = substr(pl[j], 2); seen = 0; for (i = 1; i <= NR; i++) { m = id[i]; if (mp[m] != p || hidden(m)) continue; if (f == "r" && ("," op[m] ",") !~ /,ro,/) { print "W " p; exit } seen = 1 } if (!seen) { print "U " p; exit } } }' /proc/self/mountinfo) || fail "a read-only mount (ro=true)" "awk: $w"
shut() { p=$1; case $p in *\\*) p=$(printf %b "$p");; esac; d=; rest=${p#/}; while [ "${rest#*/}" != "$rest" ]; do d=$d/${rest%%/*}; rest=${rest#*/}; if ! (cd -- "$d") 2>/dev/null; then [ -d "$d" ] && a=$(stat -c %a -- "$d" 2>/dev/null) && ! chmod -- "$a" "$d" 2>/dev/null; return; fi; done; ! [ -e "$p" ] && ! [ -L "$p" ]; }
while IFS= read -r l; do case $l in
"") ;;
"W /") fail "--read-only" "/ is writable";;
"S "*) shut "${l#S }" || fail "a read-only mount (ro=true)" "${l#S } is writable";;
"W "*) fail "a read-only mount (ro=true)" "${l#W } is writable";;
"U "*) fail "a bind at the path planned" "nothing is mounted at ${l#U }: a path was replaced by a link after the run was planned, and the engine mounted it elsewhere";;
*) fail "a read-only mount (ro=true)" "awk: $l";;
esac; done <<STOCKADE_CHECK_EOF
$w
STOCKADE_CHECK_EOF
lim() { [ -n "$2" ] || return 0; for f in $3; do if [ -r "$f" ]; then read -r v < "$f"; [ "$v" = "$2" ] || fail "$1" "$f holds $v"; return 0; fi; done; fail "$1" "none of $3"; }
lim --pids-limit "$STOCKADE_CHECK_PIDS" "/sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max"
lim --memory "$STOCKADE_CHECK_MEM" "/sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max"
rl() { while read -r l; do case $l in "$1 "*) set -- "$2" "$3" ${l#"$1"}; [ "$3" = "$2" ] && [ "$4" = "$2" ] || fail "$1" "$3 $4"; return 0;; esac; done < /proc/self/limits; fail "$2" "no $1"; }
[ -z "$STOCKADE_CHECK_NPROC" ] || rl "Max processes" "--ulimit nproc" "$STOCKADE_CHECK_NPROC"
[ -z "$STOCKADE_CHECK_DATA" ] || rl "Max data size" "--ulimit data" "$STOCKADE_CHECK_DATA"
[ -z "$STOCKADE_CHECK_NOFILE" ] || rl "Max open files" "--ulimit nofile" "$STOCKADE_CHECK_NOFILE"
if [ "$STOCKADE_CHECK_NET" = none ]; then for i in /sys/class/net/*; do [ "${i##*/}" = lo ] || fail "--network none" "interface ${i##*/}"; done; fi
shows() { for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do if [ -e "$f" ] || [ -L "$f" ]; then return 0; fi; done; return 1; }
for m in $STOCKADE_CHECK_MASKS; do case $m in *\\*) m=$(printf %b "$m");; esac; if [ -d "$m" ]; then if shows "$m"; then fail "a masked directory's tmpfs" "$m shows files"; fi; elif [ -s "$m" ]; then fail "a masked file's bind" "$m is not empty"; fi; done
ids() { f=$1 l=$2; set --; want=; for e in $l; do p=/${e#*/}; case $p in *\\*) p=$(printf %b "$p");; esac; set -- "$@" "$p"; want="$want${e%%/*}
"; done; [ $# -gt 0 ] || return 0; got=$(stat -L -c "$f" -- "$@" 2>&1) || fail "a bind of a planned path" "$got"; [ "$got
" = "$want" ] || fail "a bind of the path planned" "a path in a writable root was replaced before the engine bound it"; }
ids %d:%i "$STOCKADE_CHECK_IDS"
ids %i "$STOCKADE_CHECK_VIEWIDS"
[ -z "$STOCKADE_CHECK_VIEWEMPTY" ] || { p=$(printf %b "$STOCKADE_CHECK_VIEWEMPTY"); [ -z "$(ls -A -- "$p")" ] || fail "a view of the workspace planned" "$p, empty when planned, shows entries: its lower layer is another directory"; }
for e in $STOCKADE_CHECK_MASKDIRS; do p=/${e#*/}; case $p in *\\*) p=$(printf %b "$p");; esac; case ${e%%/*} in *:*) f=%d:%i;; *) f=%i;; esac; (cd -- "${p%/*}/" 2>/dev/null && [ "$(stat -c $f .)" = "${e%%/*}" ] && { if [ -d "${p##*/}" ]; then ! shows "${p##*/}"; else ! [ -s "${p##*/}" ]; fi; }) || fail "a mask in the directory planned" "${p%/*} was exchanged for another directory before the engine mounted the mask of $p"; done
if [ -n "$STOCKADE_CHECK_GATE" ]; then
printf '%s %s\n' "$(readlink /proc/self/ns/net)" "$(readlink /proc/self/ns/user)" > "$STOCKADE_CHECK_GATE/ready" || fail "the run's gate" "writing $STOCKADE_CHECK_GATE/ready"
IFS= read -r go < "$STOCKADE_CHECK_GATE/go"; [ "$go" = go ] || fail "the run's gate" "${go:-no answer}"
fi
[ -z "$STOCKADE_CHECK_IGNORE" ] || trap '' $STOCKADE_CHECK_IGNORE
[ -z "$STOCKADE_CHECK_NOTERM" ] || unset TERM
if [ -n "$STOCKADE_CHECK_TTY" ] && [ -t 0 ]; then n=0; while [ "$(stty size 2>/dev/null)" = "0 0" ] && [ $n -lt 50 ]; do sleep 0.02; n=$((n+1)); done; fi
for f in $STOCKADE_CHECK_STREAMS; do [ -p "$f" ] || fail "a bind of the run's streams" "$f is not a FIFO"; case ${f##*/} in 0) exec <"$f";; 1) exec >"$f";; 2) exec 2>"$f";; *) fail "a bind of the run's streams" "$f";; esac; done
unset STOCKADE_CHECK_STREAMS STOCKADE_CHECK_TTY STOCKADE_CHECK_NOTERM STOCKADE_CHECK_VIEWIDS STOCKADE_CHECK_VIEWEMPTY STOCKADE_CHECK_MASKDIRS STOCKADE_CHECK_IGNORE STOCKADE_CHECK_GATE STOCKADE_CHECK_UID STOCKADE_CHECK_NET STOCKADE_CHECK_MASKS STOCKADE_CHECK_IDS STOCKADE_CHECK_RW STOCKADE_CHECK_PLACED STOCKADE_CHECK_PIDS STOCKADE_CHECK_MEM STOCKADE_CHECK_NPROC STOCKADE_CHECK_DATA STOCKADE_CHECK_NOFILE
if [ -n "${STOCKADE_CHECK_SAVED_PATH+x}" ]; then PATH=$STOCKADE_CHECK_SAVED_PATH; unset STOCKADE_CHECK_SAVED_PATH; else unset PATH; fi
exec "$@""#;

/// The longest path a `--mount` may name. The engines resolve a mount's destination below
/// the container's root filesystem, a path of their store (rootless Podman's
/// `~/.local/share/containers/storage/overlay/<id>/merged`, about 120 bytes; Docker's
/// `/var/lib/docker/overlay2/<id>/merged`, 89), and the whole must fit `PATH_MAX`: measured
/// here, rootless Podman with a 136-byte root took a destination of 3954 bytes and refused one
/// of 3984 ("resolving symlinks for mount destination"). 512 bytes are kept for the store.
pub const ENGINE_PATH_LIMIT: usize = 4095 - 512;

fn text(p: &Path) -> Result<&str, LowerError> {
    let s = p
        .to_str()
        .ok_or_else(|| LowerError::NotUtf8(p.to_path_buf()))?;
    // A mask or protected path deeper than the engine can mount (one the native backend masks
    // by its deepest maskable directory): refused, typed, not left to the engine's error.
    if s.len() > ENGINE_PATH_LIMIT {
        return Err(LowerError::TooLong(p.to_path_buf()));
    }
    // `--mount` is comma-separated with no quoting.
    if s.contains(',') {
        return Err(LowerError::Comma(p.to_path_buf()));
    }
    Ok(s)
}

fn bind(src: &Path, dst: &Path, readonly: bool, t: &Target) -> Result<String, LowerError> {
    let mut m = format!("type=bind,src={},dst={}", text(src)?, text(dst)?);
    if readonly {
        m.push_str(",ro=true");
    }
    if t.nonrecursive != NonRecursive::Recursive {
        m.push(',');
        m.push_str(t.nonrecursive.option());
    }
    Ok(m)
}

/// A tmpfs. Podman copies what lies below into a new tmpfs unless told not to
/// (`notmpcopyup`): a mask would show what it masks. Both engines take a mode of 0 as no mode
/// (0755): an unreadable tmpfs is mode 0200 (nothing to read or enter; the mount is read-only).
fn tmpfs(dst: &Path, mode: u32, size: u64, ro: bool, engine: Engine) -> Result<String, LowerError> {
    let mut m = format!(
        "type=tmpfs,dst={},tmpfs-mode={mode:o},tmpfs-size={size}",
        text(dst)?
    );
    if ro {
        m.push_str(",ro=true");
    }
    if engine == Engine::Podman {
        m.push_str(",notmpcopyup");
    }
    Ok(m)
}

fn mask_mount(mask: &Mask, target: &Target) -> Result<String, LowerError> {
    match (mask.kind, mask.readable) {
        (Kind::Dir, readable) => tmpfs(
            &mask.path,
            if readable { 0o555 } else { 0o200 },
            4096,
            true,
            target.engine,
        ),
        (Kind::File, true) => bind(&target.empty_file, &mask.path, true, target),
        (Kind::File, false) => bind(&target.unreadable_file, &mask.path, true, target),
    }
}

/// A review run's view at the workspace (see [`View`]): the client's flag and its value.
fn view_mount(
    workspace: &Path,
    view: &View,
    engine: Engine,
) -> Result<(&'static str, String), LowerError> {
    // The layers are named in an option string: `:` separates lower layers, `\` escapes, and
    // Docker's `--mount` is read as CSV (the options' field is quoted).
    let layer = |p: &Path| -> Result<String, LowerError> {
        let s = text(p)?;
        if s.contains([':', '"', '\\']) {
            return Err(LowerError::ViewPath(p.to_path_buf()));
        }
        Ok(s.to_owned())
    };
    let (ws, upper, work) = (layer(workspace)?, layer(&view.upper)?, layer(&view.work)?);
    Ok(match engine {
        // Podman's overlay volume; it takes no option beside its layers (rootless, it is
        // mounted in Podman's user namespace: nodev, and `userxattr`, `redirect_dir=nofollow`
        // as Podman mounts it).
        Engine::Podman => ("--volume", format!("{ws}:{ws}:O,upperdir={upper},workdir={work}")),
        // An anonymous volume of Docker's `local` driver, which mounts what it is given (and
        // is removed with the container); `volume-nocopy`: nothing of the image is copied in.
        Engine::Docker => (
            "--mount",
            format!("type=volume,dst={ws},volume-nocopy=true,volume-driver=local,volume-opt=type=overlay,volume-opt=device=overlay,\"volume-opt=o=lowerdir={ws},upperdir={upper},workdir={work},redirect_dir=nofollow,metacopy=off,index=off,nosuid,nodev\""),
        ),
    })
}

fn depth(p: &Path) -> usize {
    p.components().count()
}

/// Whether the command can start at `cwd` in the container: a directory the host tree binds
/// (not below one of [`NOT_BOUND`]) or a writable root.
fn reachable(spec: &Spec, cwd: &Path) -> bool {
    // The writable roots and the read grants below /tmp are bound where nothing else is.
    if (spec.writable_roots.iter())
        .chain(spec.tmp_read_grants())
        .any(|w| cwd.starts_with(w))
    {
        return true;
    }
    let top = cwd.components().nth(1);
    !matches!(top, Some(std::path::Component::Normal(t)) if NOT_BOUND.iter().any(|n| t == *n))
}

/// How far above the run's memory limit a root caller's container's own limit is when the
/// run's group below `--cgroup-parent` holds the limit ([`Target::group`]): the group's usage
/// is the container's and more, so the group reaches its limit first and its OOM kill is
/// counted where stockade reads it. Should the engine not put the container there, this is
/// how far the container could go beyond the limit asked for.
pub const CHILD_SLACK: u64 = 1 << 20;

/// The memory limit the engine gives the container (`--memory`): the run's, or [`CHILD_SLACK`]
/// above it when the run's group holds the limit.
fn container_memory(memory: Option<u64>, target: &Target) -> Option<u64> {
    let b = memory?;
    Some(match &target.group {
        Some(g) if g.memory.is_some() => b + CHILD_SLACK,
        _ => b,
    })
}

/// A path as `/proc/self/mountinfo` writes it (space, tab, newline and backslash in octal).
fn mountinfo_escape(p: &str) -> String {
    let mut out = String::new();
    for c in p.chars() {
        match c {
            ' ' => out.push_str("\\040"),
            '\t' => out.push_str("\\011"),
            '\n' => out.push_str("\\012"),
            '\\' => out.push_str("\\134"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes a mask path for the check's space-separated list (`printf %b` undoes it).
fn escape(p: &str) -> String {
    let mut out = String::new();
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"/._-+@:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\0{b:03o}"));
        }
    }
    out
}

/// The arguments of `ENGINE run` for `spec`: the engine's flags, the mounts, the environment
/// and the command, step by step (each step in its module: `engine`, `mounts`, `env`,
/// `command`), in the order the engines take them.
pub fn lower(spec: &Spec, caller: &Caller, target: &Target) -> Result<Lowered, LowerError> {
    engine::refuse_unenforceable(spec, caller, target)?;
    let mut a: Vec<String> = Vec::new();
    engine::base_flags(spec, caller, target, &mut a)?;
    engine::limit_flags(spec, caller, target, &mut a);
    engine::private_tmp(spec, &mut a);
    let mut m = Mounts::new(spec, target)?;
    m.host_tree()?;
    m.mount_points()?;
    m.writable_roots()?;
    m.tmp_read_grants()?;
    m.protected()?;
    m.pins()?;
    m.mask_dirs()?;
    m.private_dirs()?;
    m.masks()?;
    m.init_and_gate()?;
    m.covers()?;
    m.closed();
    m.flags(&mut a);
    let mut env = env::mounts_env(spec, caller, target, &m);
    env::limits_env(spec, caller, target, &mut env);
    env::process_env(target, &mut env);
    let (env_file, multi_line) = env::env_file(env)?;
    env::env_flags(target, &multi_line, &mut a)?;
    let (cwd, cwd_fallback) = command::workdir(spec, target);
    a.push("--workdir".into());
    a.push(text(&cwd)?.to_owned());
    command::command(spec, target, &mut a);
    Ok(Lowered {
        args: a,
        cwd_fallback,
        env_file,
        env: multi_line,
    })
}

/// Whether `name` is a setting of a container engine's client or of what it runs (its store,
/// its daemon, its configuration, its helpers' lookup): never given to the engine's process.
pub fn engine_setting(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "DOCKER_",
        "CONTAINER",
        "PODMAN_",
        "BUILDAH_",
        "XDG_",
        "REGISTRY_",
        "STORAGE_",
        "LD_",
        "GO",
        "TMPDIR",
        "HOME",
        "PATH",
        "SSL_",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NOTIFY_SOCKET",
        "DBUS_",
        "SHELL",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests;
