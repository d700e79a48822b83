//! The resolved policy: what a run may read, write, see in its environment and reach on the
//! network. Pure data; serializes to the JSON shown by `stockade policy show --json`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A fully resolved policy (profile + file + command-line overrides merged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Name of the profile this policy started from.
    pub profile: String,
    pub filesystem: Filesystem,
    pub env: Env,
    pub network: Network,
    pub limits: Limits,
    /// The isolation backend that runs the command (`backend = "gvisor"`).
    #[serde(default, skip_serializing_if = "BackendName::is_native")]
    pub backend: BackendName,
    /// Credentials the proxy injects on their routes (`[credentials]`, `--credential`); inside,
    /// only per-run stand-ins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<crate::credentials::Credential>,
    /// The agent and toolchain presets applied, in order ([`crate::presets`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub presets: Vec<String>,
    /// Per-command grants or exclusions (`[[commands]]`, policy files only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<crate::CommandRule>,
    /// How the command sees the workspace: directly, or through a copy-on-write view whose
    /// changes are reviewed (`review = true`, `--review`) or thrown away (`--ephemeral`).
    #[serde(default, skip_serializing_if = "WorkspaceMode::is_direct")]
    pub workspace_mode: WorkspaceMode,
}

/// How a run's command sees the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum WorkspaceMode {
    /// The command writes the real workspace (protected paths kept read-only).
    #[default]
    Direct,
    /// A copy-on-write view: nothing reaches the workspace until `stockade apply`.
    Review,
    /// A copy-on-write view thrown away when the run ends.
    Ephemeral,
}

impl WorkspaceMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkspaceMode::Direct => "direct",
            WorkspaceMode::Review => "review",
            WorkspaceMode::Ephemeral => "ephemeral",
        }
    }

    fn is_direct(&self) -> bool {
        *self == WorkspaceMode::Direct
    }
}

/// Which isolation backend runs a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum BackendName {
    /// Namespaces, Landlock and seccomp built by stockade itself.
    #[default]
    Native,
    /// gVisor's `runsc`: the command's kernel is the Sentry.
    Gvisor,
    /// A Podman container (rootless for an unprivileged caller).
    Podman,
    /// A Docker container (the engine's daemon runs it).
    Docker,
}

impl BackendName {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendName::Native => "native",
            BackendName::Gvisor => "gvisor",
            BackendName::Podman => "podman",
            BackendName::Docker => "docker",
        }
    }

    /// Every backend, in the order `--backend` lists them.
    pub const ALL: [BackendName; 4] = [
        BackendName::Native,
        BackendName::Gvisor,
        BackendName::Podman,
        BackendName::Docker,
    ];

    /// The backend `name` names (`--backend NAME`).
    pub fn parse(name: &str) -> Option<BackendName> {
        Self::ALL.into_iter().find(|b| b.as_str() == name)
    }

    fn is_native(&self) -> bool {
        *self == BackendName::Native
    }
}

/// Whether paths outside the listed ones are readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ReadScope {
    /// The whole host filesystem is readable, minus `deny_read`.
    #[default]
    Host,
    /// Only `allow_read`, the writable roots and the system runtime paths are readable.
    AllowList,
}

/// Filesystem rules. Every entry is a path pattern: absolute, or starting with `~`,
/// `$HOME` or `$WORKSPACE`; deny entries may contain globs (`*`, `?`, `[..]`, `**`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Filesystem {
    pub read_scope: ReadScope,
    /// Paths that cannot be read (masked). The most specific rule wins against `allow_read`.
    pub deny_read: Vec<String>,
    /// Paths whose content is hidden but which stay readable: covered by an empty, readable
    /// file or directory (shell start-up files, which shells must be able to open). Exact
    /// paths outside writable roots only (absolute or `~/...`, no globs); `deny_read` wins.
    #[serde(default)]
    pub read_empty: Vec<String>,
    /// Paths readable even inside a `deny_read` entry; with `read_scope = "allow-list"`, the
    /// only readable paths besides writable roots and the system runtime.
    pub allow_read: Vec<String>,
    /// Writable roots (the private `/tmp` is always writable and not listed here).
    pub allow_write: Vec<String>,
    /// Paths inside writable roots that stay read-only (protected paths).
    pub deny_write: Vec<String>,
    /// Catalogue entries ([`crate::host_exec::HOST_EXEC`]) removed from `deny_write` by the
    /// policy file, as written there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprotect: Vec<String>,
    /// Directories stockade makes (mode 0700, with missing parents) when they do not exist
    /// yet: a preset's state and cache directories (also in `allow_write`), and the protected
    /// directories in them its agent would make at start (also in `deny_write`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_roots: Vec<String>,
    /// Directories inside writable roots that each run sees as an empty directory of its own
    /// (a private tmpfs, gone with the run): what the command writes there never reaches the
    /// host, and what the host keeps there is out of its reach (a preset's shell snapshots,
    /// which the host's own agent sessions source before each command). Exact paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private: Vec<String>,
}

/// Environment rules: the child's environment is built from scratch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Env {
    /// Names (or `PREFIX*` patterns) copied from the caller's environment, except names that
    /// look like secrets (`LD_*`, `*_KEY`, `*_TOKEN`, `*_SECRET`, ...).
    pub allow: Vec<String>,
    /// Variables set to a fixed value.
    pub set: BTreeMap<String, String>,
    /// Exact names copied from the caller even when they look like secrets.
    pub passthrough: Vec<String>,
}

/// Network access mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// A private network namespace with only loopback: nothing reaches the host or beyond.
    #[default]
    None,
    /// Egress only through stockade's proxy, under `allow_domains`, `deny_domains` and
    /// `allow_hosts`.
    Proxy,
    /// The host's network, unfiltered: an explicit opt-out, recorded as such.
    Host,
}

/// Network rules. The lists are used by the egress proxy (mode `proxy`, or the standalone
/// proxy); entries are validated and kept in canonical form (see [`crate::net`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Network {
    pub mode: NetworkMode,
    /// Domain patterns that may be reached: `example.com` (exactly), `*.example.com`
    /// (subdomains only), each optionally `:PORT`. Never a whole public suffix.
    pub allow_domains: Vec<String>,
    /// Domain patterns that may never be reached; wins over every allow rule.
    pub deny_domains: Vec<String>,
    /// IP addresses, networks and exact names (each optionally `:PORT`): the only way to
    /// reach IP literals and loopback, private or link-local destinations.
    pub allow_hosts: Vec<String>,
}

/// Resource limits. In a policy file each key overrides the profile's value; absent keys keep
/// it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock limit in seconds: at the deadline every process of the run is ended (a grace
    /// signal, then SIGKILL) and the run exits 124. `0` means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// Size of the private `/tmp` (and `/dev/shm`), e.g. `"512M"`, `"1G"`; writes beyond it
    /// fail with ENOSPC inside. Memory-backed: nothing reaches the host's disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp_size: Option<String>,
    /// Open files per process (`RLIMIT_NOFILE`, soft and hard); it can only be lowered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<u64>,
    /// Memory of the whole run (every process together; no swap beyond it): a size (`"512M"`,
    /// `"2G"`) or a share of the machine's memory (`"50%"`). `"0"` means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Processes and threads of the whole run at once. `0` means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    /// CPU time of the whole run, in cores (`0.5`: half of one core; `2`: two cores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cores>,
    /// Output per stream (stdout, stderr) passed on, e.g. `"16M"`: beyond it the middle is
    /// dropped and a marker says how much (the head and the tail are kept). `"0"`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_limit: Option<String>,
    /// What a review or ephemeral run may write into its view of the workspace, e.g. `"2G"`:
    /// beyond it writes fail with ENOSPC inside. The view's writes are then held in memory
    /// (a tmpfs of that size) until the run ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
}

/// A number of CPU cores, kept in thousandths so policies compare and hash exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cores {
    millis: u64,
}

impl Cores {
    /// The smallest share a limit can enforce (the kernel's minimum quota per period).
    pub const MIN_MILLIS: u64 = 10;

    /// `None` unless `cores` is finite and at least 0.01.
    pub fn new(cores: f64) -> Option<Cores> {
        if !cores.is_finite() || !(0.0..=1e6).contains(&cores) {
            return None;
        }
        let millis = (cores * 1000.0).round() as u64;
        (millis >= Cores::MIN_MILLIS).then_some(Cores { millis })
    }

    /// Thousandths of a core.
    pub fn millis(self) -> u64 {
        self.millis
    }

    pub fn as_f64(self) -> f64 {
        self.millis as f64 / 1000.0
    }
}

impl std::fmt::Display for Cores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.as_f64())
    }
}

impl Serialize for Cores {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.as_f64())
    }
}

impl<'de> Deserialize<'de> for Cores {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Cores, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Number {
            F(f64),
            I(u64),
        }
        let cores = match Number::deserialize(d)? {
            Number::F(f) => f,
            Number::I(i) => i as f64,
        };
        Cores::new(cores).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "limits.cpu must be a number of cores of at least 0.01, not {cores}"
            ))
        })
    }
}
