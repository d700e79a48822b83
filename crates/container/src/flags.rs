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

use std::path::{Path, PathBuf};

use sandbox::{Kind, Mask, Network, ReadScope, Spec};

use crate::Engine;

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

/// The arguments of `ENGINE run` for `spec`.
pub fn lower(spec: &Spec, caller: &Caller, target: &Target) -> Result<Lowered, LowerError> {
    if spec.read_scope == ReadScope::AllowList {
        return Err(LowerError::AllowList);
    }
    if caller.rootless && spec.limits.cpu_millis.is_some() {
        return Err(LowerError::CpuRootless(target.engine.name()));
    }
    if caller.rootless
        && spec
            .limits
            .memory_bytes
            .is_some_and(|b| b < ROOTLESS_MEMORY_FLOOR)
    {
        return Err(LowerError::MemoryRootless);
    }
    if spec.review.is_some() && spec.limits.disk_bytes.is_some() {
        return Err(LowerError::ViewDisk);
    }
    // A review run is never given the workspace itself.
    if spec.review.is_some() && target.view.is_none() {
        return Err(LowerError::Changed(spec.workspace.clone()));
    }
    // The check inside knows the view's lower layer by inode numbers, which the view keeps
    // only over one filesystem, and only of what it can name (see [`Witness`]): otherwise
    // a directory put at the workspace's path before the engine looked it up would be the
    // lower layer unseen (red team of issue 33: a workspace of `.env` and a symbolic link).
    if let Some(view) = &target.view {
        if !view.same_filesystem {
            let store = view.upper.parent().unwrap_or(&view.upper).to_path_buf();
            return Err(LowerError::ViewFilesystems(store, spec.workspace.clone()));
        }
        if view.witness == Witness::None {
            return Err(LowerError::ViewUnwitnessed(spec.workspace.clone()));
        }
    }
    let engine = target.engine;
    let mut a: Vec<String> = Vec::new();
    let mut push = |s: &str| a.push(s.to_owned());
    if let Some(rt) = &target.runtime {
        push("--runtime");
        push(rt);
    }
    push("run");
    // `--rm` always, taken away by the run under `--keep`; `--interactive` is added by the run
    // when stdin is fed: both are the run's options (`sandbox::Launch`), not the plan's.
    push("--rm");
    push("--name");
    push(&target.name);
    push("--pull");
    push("never");
    // Output goes to the caller only, never into the engine's logs.
    push("--log-driver");
    push("none");
    push("--read-only");
    if engine == Engine::Podman {
        // Podman adds writable tmpfs at /run, /tmp and /var/tmp under --read-only by default.
        push("--read-only-tmpfs=false");
    }
    push("--cap-drop");
    push("ALL");
    push("--security-opt");
    push("no-new-privileges");
    push("--security-opt");
    push(&format!("seccomp={}", text(&target.seccomp_profile)?));
    push("--ipc");
    push("private");
    push("--cgroupns");
    push("private");
    push("--hostname");
    push(&spec.hostname);
    push("--network");
    push(match spec.network {
        Network::Host => "host",
        _ => "none",
    });
    push("--user");
    push(&format!("{}:{}", caller.uid, caller.gid));
    // Limits.
    let limits = &spec.limits;
    if caller.rootless {
        if let Some(b) = limits.memory_bytes {
            push("--ulimit");
            push(&format!("data={b}:{b}"));
        }
        if let Some(n) = limits.pids {
            push("--ulimit");
            push(&format!("nproc={n}:{n}"));
        }
    } else {
        if let Some(group) = &target.group {
            push("--cgroup-parent");
            push(&group.path);
            if engine == Engine::Podman {
                // conmon stays out of the run's group (by default Podman makes it a group of
                // its own there, whose processes and memory the run's counters would hold).
                push("--cgroups");
                push("no-conmon");
            }
        }
        if let Some(b) = container_memory(limits.memory_bytes, target) {
            push("--memory");
            push(&b.to_string());
            push("--memory-swap");
            push(&b.to_string());
        }
        if let Some(n) = limits.pids {
            push("--pids-limit");
            push(&n.to_string());
        }
        if let Some(m) = limits.cpu_millis {
            push("--cpus");
            push(&format!("{}.{:03}", m / 1000, m % 1000));
        }
        if engine == Engine::Podman {
            // Root Podman sets a process rlimit the runtime may not raise (EPERM at start):
            // one no higher than this process's own, and than what runc may set here.
            let n = target.nproc_hard.min(32768);
            push("--ulimit");
            push(&format!("nproc={n}:{n}"));
        }
    }
    let files = limits.files.unwrap_or(target.nofile_hard);
    push("--ulimit");
    push(&format!("nofile={files}:{files}"));
    // The private /tmp and /dev/shm.
    let tmp_size = limits
        .tmp_bytes
        .map(|b| format!(",size={b}"))
        .unwrap_or_default();
    push("--tmpfs");
    push(&format!("/tmp:rw,nosuid,nodev,mode=1777{tmp_size}"));
    push("--tmpfs");
    push("/run:rw,nosuid,nodev,mode=0755,size=1m");
    push("--shm-size");
    push(&limits.tmp_bytes.unwrap_or(64 << 20).to_string());
    // Mounts over the read-only image: the host's tree, then (parents before what lies below
    // them) writable roots, read-only protected paths, pins and masks inside them.
    let mut mounts: Vec<(usize, u8, &str, String)> = Vec::new();
    // The binds whose source the command (or a run before it) could have replaced since the
    // run was planned: each is checked inside, after the engine bound it, to be the file
    // planned (the engine, root, follows a symbolic link put in its place).
    // A root with no identity was not what was planned when the backend looked again (a
    // symbolic link, or gone): it is refused, never bound unchecked (CI: a link exchanged in
    // between the plan and that look was bound, the engine followed it, and the check had
    // nothing to compare).
    let identity = |p: &PathBuf| {
        (target.root_identities.iter())
            .find(|(q, _)| q == p)
            .map(|(_, id)| (p.clone(), *id))
            .ok_or_else(|| LowerError::Changed(p.clone()))
    };
    let mut identities: Vec<(PathBuf, (u64, u64))> = (spec.writable_roots.iter())
        .filter(|p| target.view.is_none() || **p != spec.workspace)
        .map(identity)
        .collect::<Result<_, _>>()?;
    // A read grant below the host's /tmp (whoever made it can swap it) is checked as the
    // roots are.
    for grant in spec.tmp_read_grants() {
        identities.push(identity(grant)?);
    }
    let mut planned = |p: &PathBuf| {
        if let Some(id) = spec.identities.get(p) {
            identities.push((p.clone(), *id));
        }
    };
    // The owner's home and the covers of the closed directories above the roots (see
    // [`Cover`]).
    let covers: Vec<&Cover> = target.owner_home.iter().chain(&target.covers).collect();
    for (name, entry, _) in &target.host_root {
        if NOT_BOUND.contains(&name.as_str()) || *entry == crate::image::Entry::Symlink {
            continue;
        }
        let p = Path::new("/").join(name);
        // A cover of a top-level directory (root's 0700 `/root`) takes its place: the engines
        // refuse a second mount at one destination.
        if covers.iter().any(|c| c.dir == p) {
            continue;
        }
        mounts.push((1, 0, "--mount", bind(&p, &p, true, target)?));
    }
    // Recursive binds (rootless Podman): a mount below a read-only bind would keep its own
    // flags (writable), so each gets a read-only bind of itself, unless it lies in a writable
    // root (writable there, as natively) or where nothing of the host is bound.
    if target.nonrecursive == NonRecursive::Recursive {
        for m in &target.mount_points {
            let top = m.components().nth(1);
            let unbound = matches!(top, Some(std::path::Component::Normal(t)) if NOT_BOUND.iter().any(|n| t == *n));
            if m.as_path() == Path::new("/")
                || unbound
                || spec.writable_roots.iter().any(|w| m.starts_with(w))
            {
                continue;
            }
            mounts.push((depth(m), 0, "--mount", bind(m, m, true, target)?));
        }
    }
    // A review run's workspace is its view (see [`View`]), checked inside by the inode
    // number of its top directory, the run's `upper/` (the device is the overlay's).
    let mut view_ids: Vec<(PathBuf, u64)> = Vec::new();
    let mut view_empty: Option<String> = None;
    // Where the engine must have mounted what it was given writable (and, read-only, the
    // read grants below /tmp and the protected paths): each at its own path, checked inside ([`CHECK`], `STOCKADE_CHECK_PLACED`).
    // The engine resolves a bind's source on the host and its destination in the container:
    // a path swapped for a link between the identities' read and the engine's mount, and
    // swapped back before the check, put a host directory writable elsewhere (the host's
    // /tmp on the container's) while the path itself, unmounted, still showed the identity
    // planned (red team of issue 33, tenth round).
    let mut placed: Vec<(bool, PathBuf)> = Vec::new();
    for root in &spec.writable_roots {
        placed.push((false, root.clone()));
        match &target.view {
            Some(view) if *root == spec.workspace => {
                let (flag, m) = view_mount(root, view, engine)?;
                mounts.push((depth(root), 1, flag, m));
                view_ids.push((root.clone(), view.upper_ino));
                match &view.witness {
                    Witness::Entry(p, ino) => view_ids.push((p.clone(), *ino)),
                    Witness::Empty => view_empty = root.to_str().map(escape),
                    Witness::None => return Err(LowerError::ViewUnwitnessed(root.clone())),
                }
            }
            _ => mounts.push((depth(root), 1, "--mount", bind(root, root, false, target)?)),
        }
    }
    // Inside a review run's view nothing is bound from the host writable: a pin (a writable
    // bind of a directory holding read-only binds) would write the host's directory, not the
    // view's. Without it a protected path's directory can be renamed in the view; what the
    // run makes at a protected path is flagged by the review.
    let in_view = |p: &Path| target.view.is_some() && p.starts_with(&spec.workspace);
    for grant in spec.tmp_read_grants() {
        placed.push((true, grant.to_path_buf()));
        mounts.push((
            depth(grant),
            1,
            "--mount",
            bind(grant, grant, true, target)?,
        ));
    }
    // A staged git dir's top-level protected files are the staged copy's (judged after the
    // run, see `workspace::gitstage`): no bind of their own, which git's rename over them
    // would meet (EBUSY).
    let staged_file = |p: &Path| {
        target.staged.iter().any(|s| {
            p.parent() == Some(s.gitdir.as_path())
                && p.file_name()
                    .is_some_and(|n| s.protected.iter().any(|x| x == n))
        })
    };
    for p in &spec.protected {
        if spec.masks.iter().any(|m| p.starts_with(&m.path)) || staged_file(p) {
            continue;
        }
        planned(p);
        // Read-only at its own path: a directory above it swapped for a link before the
        // engine mounted it put the bind where the link led, and left the path writable.
        placed.push((true, p.clone()));
        mounts.push((depth(p), 2, "--mount", bind(p, p, true, target)?));
    }
    let mut subdir_identities = Vec::new();
    let pins = spec.pins_bound_alone();
    for p in pins.iter().copied() {
        if in_view(p) {
            continue;
        }
        match target.staged.iter().position(|s| &s.gitdir == p) {
            // An existing git dir: the staged copy of its top level at its place, and each of
            // its subdirectories (the host's own, each checked inside to be the one planned)
            // bound over theirs in it; protected ones (`hooks`) are bound read-only above.
            Some(i) => {
                let copy = workspace::gitstage::Staged::source(&target.stage_dir, i);
                placed.push((false, p.clone()));
                mounts.push((depth(p), 2, "--mount", bind(&copy, p, false, target)?));
                for (d, id) in target.staged[i].subdirs.iter().zip(&target.subdir_ids[i]) {
                    let sub = p.join(d);
                    // A subdirectory that is a pinned git dir itself (a git dir hidden in
                    // this one) is bound in its own turn: a second mount at one destination
                    // is refused by the engine.
                    if spec.protected.contains(&sub)
                        || spec.masks.iter().any(|m| sub.starts_with(&m.path))
                        || pins.contains(&&sub)
                    {
                        continue;
                    }
                    let Some(id) = id else {
                        return Err(LowerError::Changed(sub));
                    };
                    subdir_identities.push((sub.clone(), *id));
                    placed.push((false, sub.clone()));
                    mounts.push((depth(&sub), 2, "--mount", bind(&sub, &sub, false, target)?));
                }
            }
            None => {
                planned(p);
                placed.push((false, p.clone()));
                mounts.push((depth(p), 2, "--mount", bind(p, p, false, target)?));
            }
        }
    }
    identities.extend(subdir_identities);
    // Each mask in a writable root, with the directory planned to hold it: checked inside
    // through that directory as the check's current directory (one lookup, so an exchange
    // between two checks cannot show each a different directory).
    // (Not below a directory the command's id cannot search: nothing there is in its reach.)
    let mut mask_dirs = Vec::new();
    for (mask, dir) in
        (target.mask_dirs.iter()).filter(|(m, _)| !target.closed.iter().any(|c| m.starts_with(c)))
    {
        let (Some(_), Some((dev, ino)), Some(p)) = (mask.parent(), dir, mask.to_str()) else {
            return Err(LowerError::Changed(mask.clone()));
        };
        match &target.view {
            // In the view, by inode number (it keeps the workspace's: one filesystem, or
            // refused above); the view's top directory shows its upper's.
            Some(view) if in_view(mask) => {
                if mask.parent() == Some(spec.workspace.as_path()) {
                    mask_dirs.push(format!("{}{}", view.upper_ino, escape(p)));
                } else {
                    mask_dirs.push(format!("{ino}{}", escape(p)));
                }
            }
            _ => mask_dirs.push(format!("{dev}:{ino}{}", escape(p))),
        }
    }
    for p in &spec.private_dirs {
        mounts.push((
            depth(p),
            2,
            "--mount",
            tmpfs(p, 0o1777, 64 << 20, false, engine)?,
        ));
    }
    // A mask below a cover, outside everything bound in that cover, is left out: its mount
    // point would show its name and kind in the cover, where the command sees nothing of
    // the host's directory (the mask hides nothing there).
    let shown_in = |c: &Cover, p: &Path| {
        (spec.writable_roots.iter())
            .chain(&spec.read_grants)
            .any(|b| b.starts_with(&c.dir) && p.starts_with(b))
    };
    for m in &spec.masks {
        if covers
            .iter()
            .any(|c| m.path.starts_with(&c.dir) && !shown_in(c, &m.path))
        {
            continue;
        }
        mounts.push((depth(&m.path), 3, "--mount", mask_mount(m, target)?));
    }
    for m in &target.extra_masks {
        mounts.push((depth(m), 3, "--mount", tmpfs(m, 0o200, 4096, true, engine)?));
    }
    if let Some(init) = &target.init {
        mounts.push((2, 3, "--mount", bind(init, Path::new(INIT), true, target)?));
    }
    if let Some(gate) = &target.gate {
        // Read-only: opening a FIFO for writing needs no writable mount.
        mounts.push((2, 3, "--mount", bind(gate, Path::new(GATE), true, target)?));
    }
    if let Some(home) = &target.owner_home {
        if let Some(w) = spec.writable_roots.iter().find(|w| home.dir.starts_with(w)) {
            return Err(LowerError::OwnerHomeWritable(w.clone()));
        }
    }
    // The owner's home and the covers of the closed directories above the roots, before what
    // is bound below them, each checked inside to be mounted at its path. A read grant below
    // one is not in the host's tree there any more: bound read-only at its own path, checked
    // as the roots are.
    for c in &covers {
        placed.push((false, c.dir.clone()));
        mounts.push((
            depth(&c.dir),
            0,
            "--mount",
            bind(&c.source, &c.dir, false, target)?,
        ));
    }
    for grant in (spec.read_grants.iter())
        .filter(|g| covers.iter().any(|c| g.starts_with(&c.dir)))
        .filter(|g| !spec.tmp_read_grants().contains(g))
        .filter(|g| !spec.writable_roots.iter().any(|w| g.starts_with(w)))
    {
        identities.push(identity(grant)?);
        placed.push((true, grant.clone()));
        mounts.push((
            depth(grant),
            1,
            "--mount",
            bind(grant, grant, true, target)?,
        ));
    }
    // A bind below a checked directory the command can neither search nor make searchable
    // (another owner's, e.g. a root caller's own state directory in a workspace owned by
    // someone else) cannot be read back inside, and is out of the command's reach for the
    // whole run whatever is mounted there: that directory is a mount point (it cannot be
    // renamed) and checked to be the one planned, and its mode is not the command's to change.
    let checked: Vec<&PathBuf> = identities.iter().map(|(p, _)| p).collect();
    let closed: Vec<&PathBuf> = (target.closed.iter())
        .filter(|c| checked.contains(c))
        .collect();
    identities.retain(|(p, _)| !closed.iter().any(|c| p != *c && p.starts_with(c)));
    mounts.sort_by_key(|m| (m.0, m.1));
    for (_, _, flag, m) in mounts {
        a.push(flag.into());
        a.push(m);
    }
    // The environment, in a file the engine's client reads (never on its command line, for
    // every user of the machine to read, nor in its environment, where a name such as
    // DOCKER_HOST or XDG_DATA_HOME would steer the engine itself).
    let mut env = spec.env.clone();
    env.retain(|(k, _)| !k.starts_with("STOCKADE_CHECK_"));
    let masks: Vec<String> = (spec.masks.iter().map(|m| &m.path))
        .chain(&target.extra_masks)
        .chain(target.owner_home.iter().map(|c| &c.dir))
        .filter_map(|p| p.to_str().map(escape))
        .collect();
    env.push(("STOCKADE_CHECK_UID".into(), caller.uid.to_string()));
    env.push((
        "STOCKADE_CHECK_NET".into(),
        match spec.network {
            Network::Host => "host".into(),
            _ => "none".into(),
        },
    ));
    env.push(("STOCKADE_CHECK_MASKS".into(), masks.join(" ")));
    if target.gate.is_some() {
        env.push(("STOCKADE_CHECK_GATE".into(), GATE.into()));
    }
    let ids: Vec<String> = (identities.iter())
        .filter_map(|(p, (dev, ino))| p.to_str().map(|p| format!("{dev}:{ino}{}", escape(p))))
        .collect();
    env.push(("STOCKADE_CHECK_IDS".into(), ids.join(" ")));
    let view_ids: Vec<String> = (view_ids.iter())
        .filter_map(|(p, ino)| p.to_str().map(|p| format!("{ino}{}", escape(p))))
        .collect();
    env.push(("STOCKADE_CHECK_VIEWIDS".into(), view_ids.join(" ")));
    env.push((
        "STOCKADE_CHECK_VIEWEMPTY".into(),
        view_empty.unwrap_or_default(),
    ));
    env.push(("STOCKADE_CHECK_MASKDIRS".into(), mask_dirs.join(" ")));
    // What may be mounted writable besides the engine's own (/proc and what lies below it,
    // and by their exact mount points /dev, /tmp, /run and /dev's own: a bind whose source
    // and destination the engine resolved apart, a link followed on the host and a new
    // directory in the container's own /tmp, is no engine's own):
    // the writable roots and private directories, the owner's home's cover (root's, mode
    // 0711) and the covers above the roots (root's, 0755), and what lies below the engine's
    // masked store (the mask, checked above to be empty, hides it). Every other mount must
    // be read-only, unless the command cannot reach it: a directory above it that the
    // command can neither search (the check `cd`s into each, as the command) nor make
    // searchable (a chmod of it to its own mode fails: not its owner, or on a read-only
    // mount such as a mask's tmpfs), or whose path leads elsewhere (a mount over a directory
    // above it, a mask's, covers it). A running Docker
    // container's root below /var/lib/docker (0710, root's) is a shared mount, so it shows
    // writable in rootless Podman's recursive bind of /var: every rootless run beside one was
    // refused.
    let rw: Vec<String> = (spec.writable_roots.iter())
        .chain(&spec.private_dirs)
        .chain(covers.iter().map(|c| &c.dir))
        .chain(&target.extra_masks)
        .filter_map(|p| p.to_str().map(mountinfo_escape))
        .collect();
    env.push(("STOCKADE_CHECK_RW".into(), rw.join(" ")));
    let placed: Vec<String> = (placed.iter())
        .filter_map(|(ro, p)| {
            let tag = if *ro { 'r' } else { 'w' };
            p.to_str().map(|p| format!("{tag}{}", mountinfo_escape(p)))
        })
        .collect();
    env.push(("STOCKADE_CHECK_PLACED".into(), placed.join(" ")));
    // The limits, as the kernel holds them inside (the cgroup's, or the rlimits).
    let some = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    let (pids, mem, nproc, data) = if caller.rootless {
        (None, None, limits.pids, limits.memory_bytes)
    } else {
        // The kernel keeps a memory limit in whole pages.
        (
            limits.pids,
            container_memory(limits.memory_bytes, target).map(|b| b / 4096 * 4096),
            None,
            None,
        )
    };
    env.push(("STOCKADE_CHECK_PIDS".into(), some(pids)));
    env.push(("STOCKADE_CHECK_MEM".into(), some(mem)));
    env.push(("STOCKADE_CHECK_NPROC".into(), some(nproc)));
    env.push(("STOCKADE_CHECK_DATA".into(), some(data)));
    env.push(("STOCKADE_CHECK_NOFILE".into(), some(limits.files)));
    let ignored: Vec<String> = (target.ignored_signals.iter())
        .map(i32::to_string)
        .collect();
    env.push(("STOCKADE_CHECK_IGNORE".into(), ignored.join(" ")));
    // The engines give a command with a terminal `TERM=xterm` when its environment has none;
    // it gets none, as natively (a shell's line editing follows it).
    let no_term = !env.iter().any(|(k, _)| k == "TERM");
    env.push((
        "STOCKADE_CHECK_NOTERM".into(),
        if no_term { "1" } else { "" }.into(),
    ));
    let mut env_file = String::new();
    let mut multi_line = Vec::new();
    for (k, v) in env {
        if k.is_empty()
            || k.starts_with('#')
            || k.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(LowerError::EnvName(k));
        }
        if v.contains('\n') || v.contains('\r') {
            if engine_setting(&k) {
                return Err(LowerError::EngineVariable(k));
            }
            multi_line.push((k, v));
        } else {
            env_file.push_str(&format!("{k}={v}\n"));
        }
    }
    a.push("--env-file".into());
    a.push(text(&target.env_file)?.to_owned());
    for (k, _) in &multi_line {
        a.push("--env".into());
        a.push(k.clone());
    }
    // Below a cover, only what is bound there is in the container.
    let cover = (target.covers.iter().map(|c| &c.dir))
        .find(|c| spec.cwd.starts_with(c))
        .filter(|_| {
            !(spec.writable_roots.iter())
                .chain(&spec.read_grants)
                .any(|w| spec.cwd.starts_with(w))
        });
    let (cwd, cwd_fallback) = if let Some(cover) = cover {
        (
            spec.workspace.clone(),
            Some(format!(
                "{} lies below {}, which the command's id cannot search: the container shows only the way to the workspace there",
                spec.cwd.display(),
                cover.display()
            )),
        )
    } else if reachable(spec, &spec.cwd) {
        (spec.cwd.clone(), None)
    } else {
        (
            spec.workspace.clone(),
            Some(if spec.cwd.starts_with("/tmp") {
                // As native and gVisor say it.
                "the sandbox has its own /tmp (grant the directory with --allow-read or --allow-write to start there)".to_owned()
            } else {
                format!(
                    "{} is not in the container (the host's /run, /proc, /sys and /dev are not bound)",
                    spec.cwd.display()
                )
            }),
        )
    };
    a.push("--workdir".into());
    a.push(text(&cwd)?.to_owned());
    a.push(target.image.clone());
    if target.init.is_some() {
        // Both catatonit and tini take the command after `--`, pass signals on to it, reap
        // what is left to them, and exit with its status (128 + N when a signal ended it).
        a.push(INIT.into());
        a.push("--".into());
    }
    a.push("/bin/sh".into());
    a.push("-c".into());
    a.push(CHECK.into());
    a.push("stockade-check".into());
    a.extend(spec.argv.iter().cloned());
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
