//! The resolved spec of one run: what the sandbox must look like, in terms every backend
//! can lower (bind mounts, masks, an environment, limits as numbers), with no mechanism in
//! it. The native backend lowers it to namespaces, Landlock and seccomp; the gVisor backend to
//! an OCI bundle.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

/// What a run's sandbox must hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Spec {
    /// The command and its arguments (`argv[0]` is looked up in `PATH` of [`Spec::env`]).
    pub argv: Vec<String>,
    /// Where the command starts (inside the sandbox's view).
    pub cwd: PathBuf,
    /// The command's whole environment: nothing is added by the backend.
    pub env: Vec<(String, String)>,
    pub hostname: String,
    /// The host's directory tree is readable except for [`Spec::masks`].
    pub read_scope: ReadScope,
    /// Directories (or files) the command can write; everything else is read-only.
    pub writable_roots: Vec<PathBuf>,
    /// Paths inside the writable roots kept read-only (git hooks and config, host-executed
    /// project files, the trust store).
    pub protected: Vec<PathBuf>,
    /// Paths the command must not read: replaced by something empty.
    pub masks: Vec<Mask>,
    pub network: Network,
    pub limits: Limits,
    /// Who runs the sandbox.
    pub caller: Ids,
}

/// Whether paths outside the listed ones are readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadScope {
    /// The whole host tree, minus the masks.
    Host,
    /// Only the granted paths and the system's runtime paths.
    AllowList,
}

/// A path replaced by an empty file or directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mask {
    pub path: PathBuf,
    pub kind: Kind,
    /// `true`: readable and empty (`read_empty`); `false`: unreadable (`deny_read`).
    pub readable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    File,
    Dir,
}

/// The network the command gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum Network {
    /// Loopback only.
    None,
    /// Loopback only, with stockade's egress proxy listening at `addr` inside.
    Proxy { addr: std::net::SocketAddrV4 },
    /// The host's network.
    Host,
}

/// The run's limits, as numbers: `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Limits {
    pub timeout: Option<Duration>,
    /// Size of the private `/tmp`, in bytes.
    pub tmp_bytes: Option<u64>,
    /// Open files per process.
    pub files: Option<u64>,
    /// Memory of the whole run, in bytes.
    pub memory_bytes: Option<u64>,
    /// Processes and threads of the whole run.
    pub pids: Option<u64>,
    /// CPU of the whole run, in thousandths of a core.
    pub cpu_millis: Option<u64>,
    /// Output passed on per stream, in bytes.
    pub output_bytes: Option<u64>,
}

/// A user and group id on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
}
