//! What a run produced, in terms every backend reports: what it used, the limits it reached,
//! what was blocked, and what a machine can enforce.

use std::path::PathBuf;

use serde::Serialize;

/// What a run used, as its group counted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Usage {
    /// Peak memory of the whole run, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_peak: Option<u64>,
    /// CPU time of the whole run, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_usec: Option<u64>,
    /// Most processes and threads at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids_peak: Option<u64>,
    /// Processes the kernel's OOM killer ended because of the memory limit.
    pub oom_kills: u64,
    /// Times the memory limit was reached (allocation had to reclaim or failed).
    pub memory_limit_hits: u64,
    /// Forks refused because of the pids limit.
    pub pids_limit_hits: u64,
    /// Periods in which the CPU limit throttled the run.
    pub cpu_throttled: u64,
}

/// A limit the run reached, for stderr, the report and the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitHit {
    /// `E_LIMIT_REACHED`.
    pub code: crate::Code,
    /// `memory`, `pids` or `output`.
    pub limit: &'static str,
    /// The limit (bytes, processes).
    pub value: u64,
    /// How it was enforced (`cgroup_v1`, `cgroup_v2`, `rlimit`, `relay`).
    pub mechanism: &'static str,
    pub detail: String,
}

impl LimitHit {
    /// The flag and the policy line that would move this limit, with the run's value.
    pub fn hint(&self) -> String {
        let size = human_size(self.value);
        match self.limit {
            "memory" => format!(
                "give the run more memory with `--memory SIZE` (this run: {size}; e.g. 4G, or 75% of the machine; 0: no limit), or `memory = \"SIZE\"` under [limits] in the policy file"
            ),
            "pids" => format!(
                "allow more processes with `--pids N` (this run: {}; 0: no limit), or `pids = N` under [limits] in the policy file",
                self.value
            ),
            "disk" => format!(
                "let the run write more with `--disk SIZE` (this run: {size}), or `disk = \"SIZE\"` under [limits] in the policy file"
            ),
            "output" => format!(
                "pass more output with `--output-limit SIZE` (this run: {size} per stream; 0: no limit), or `output_limit = \"SIZE\"` under [limits] in the policy file; or write it to a file in the workspace"
            ),
            _ => crate::Code::LimitReached.hint().to_owned(),
        }
    }
}

/// A blocked action of the sandbox: a refused call, or a protected path created during the
/// run and neutralised after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub code: crate::Code,
    pub kind: &'static str,
    pub path: PathBuf,
    /// What stockade did about it.
    pub action: String,
    /// What would allow it, when that is not the general answer ([`crate::Code::hint`]): a
    /// rule no policy line lifts (set-ID bits, git's code paths) says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow: Option<&'static str>,
}

/// One thing a backend needs from this machine, found by trying it (`stockade doctor`).
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    /// Whether the default policy needs it (a failed required check makes `run` refuse).
    pub required: bool,
    pub detail: String,
    pub fix: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The exit code a shell would show (command's code, 128+N for signal N, 126/127).
    pub exit_code: i32,
    /// Signal that killed the command, if any.
    pub signal: Option<i32>,
    /// errno of the failed `execve` when the command could not be executed (126/127).
    pub exec_errno: Option<i32>,
    pub duration: std::time::Duration,
    /// Layers skipped under `--allow-degraded`, with why.
    pub skipped: Vec<String>,
    pub landlock_abi: Option<i32>,
    /// Calls the creation guard refused during the run.
    pub blocked: Vec<Violation>,
    /// The run hit `limits.timeout` and was ended (exit code 124).
    pub timed_out: bool,
    /// What the run used: from its cgroup where it had one, else from the kernel's
    /// accounting of the sandbox's reaped processes (CPU time, the largest process's memory).
    pub usage: Usage,
    /// Limits the run reached.
    pub limit_hits: Vec<LimitHit>,
    /// What the output relays passed on and dropped (under an output limit).
    pub output: Option<Output>,
    /// Which limit ended the run, if one did: `timeout` or `memory`.
    pub ended_by: Option<&'static str>,
    /// A review run under a disk bound: the bounded filesystem whose `upper/` holds the
    /// view's writes (the change set is read and kept from there).
    pub review_upper: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    /// Modes none and proxy, native backend: what the command tried on the network it does not
    /// have (under proxy: around the proxy), as the kernel of its namespace counted it (`None`:
    /// not watched: mode host, gVisor).
    pub network_tries: Option<NetworkTries>,
    /// A container backend's run: the engine, the image and the container (the run record).
    pub container: Option<ContainerRun>,
    /// Protected paths the command saw only a copy of (gVisor's staged git dirs): the backend
    /// judged what it did to them, and another file there after the run is the host's.
    pub staged: Vec<std::path::PathBuf>,
}

/// What a container backend ran: enough to find the container and to repeat the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerRun {
    /// `podman` or `docker`, and the engine's binary.
    pub engine: &'static str,
    pub engine_binary: std::path::PathBuf,
    /// The image as named, and its id (`sha256:...`) as the engine reported it.
    pub image: String,
    pub image_id: String,
    /// The container's name (its id is the engine's; `ENGINE inspect NAME` shows it).
    pub container: String,
    /// The engine's arguments, exactly as given (the environment's values are not in them:
    /// `--env NAME` takes each from the engine's own environment).
    pub args: Vec<String>,
    /// `--keep`: the container is left behind; how to remove it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// Tries to reach a network that is not there (mode none): counted by the kernel of the
/// run's own network namespace (`/proc/net/snmp`, `snmp6`), so nothing the command says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct NetworkTries {
    /// Packets and connections with no route (`Ip: OutNoRoutes` + `Ip6OutNoRoutes`): every
    /// connection or name lookup to an address that is not loopback fails this way.
    pub no_route: u64,
    /// Name lookups sent to the loopback resolver `/etc/resolv.conf` names (e.g.
    /// 127.0.0.53), which does not answer inside (`Udp: NoPorts`, counted only when the
    /// resolver is on loopback).
    pub lookups: u64,
    /// The run had the proxy (mode proxy): these tries went around it (a tool that ignores
    /// the proxy variables). Not in the report: it names the two apart.
    #[serde(skip)]
    pub proxy: bool,
}

impl NetworkTries {
    /// Whether the command tried at all.
    pub fn tried(&self) -> bool {
        self.no_route > 0 || self.lookups > 0
    }
}

/// Output of a run under an output limit or `--sanitize-output`, per stream; `None` for a
/// stream that was not relayed (a terminal under an output limit alone).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Output {
    pub stdout: Option<StreamSummary>,
    pub stderr: Option<StreamSummary>,
    /// What `--sanitize-output` removed, per stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sanitized_stdout: Option<sanitize::Report>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sanitized_stderr: Option<sanitize::Report>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(limit: &'static str, value: u64) -> LimitHit {
        LimitHit {
            code: crate::Code::LimitReached,
            limit,
            value,
            mechanism: "rlimit",
            detail: String::new(),
        }
    }

    #[test]
    fn each_limit_names_its_flag_and_policy_key_with_the_value() {
        let h = hit("memory", 128 << 20).hint();
        assert!(
            h.contains("`--memory SIZE`") && h.contains("128 MiB"),
            "{h}"
        );
        assert!(h.contains("`memory = \"SIZE\"` under [limits]"), "{h}");
        let h = hit("pids", 64).hint();
        assert!(
            h.contains("`--pids N`") && h.contains("this run: 64"),
            "{h}"
        );
        let h = hit("output", 16 << 20).hint();
        assert!(
            h.contains("`--output-limit SIZE`") && h.contains("16 MiB"),
            "{h}"
        );
        assert_eq!(hit("other", 1).hint(), crate::Code::LimitReached.hint());
    }
}

/// What happened to one output stream.
///
/// `total - passed - dropped` bytes were lost to a destination that refused writes (see the
/// `stream` crate's relay); with a destination that accepts everything, `passed + dropped == total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct StreamSummary {
    /// Bytes the command wrote to the stream.
    pub total: u64,
    /// Bytes of the command's output written to the destination, the kept tail included and
    /// the marker line excluded. A chunk counts only when all of it was written.
    pub passed: u64,
    /// Bytes cut by the limit (`total - limit` when the total is above the limit, else 0).
    pub dropped: u64,
}

/// A byte count in binary units: `512 B`, `1 KiB`, `1.5 MiB`, `16 MiB` (an integer when
/// exact, else one decimal).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut unit = 1024u128;
    let mut name = UNITS[0];
    for next in &UNITS[1..] {
        if u128::from(bytes) < unit * 1024 {
            break;
        }
        unit *= 1024;
        name = next;
    }
    let b = u128::from(bytes);
    if b % unit == 0 {
        return format!("{} {name}", b / unit);
    }
    let tenths = (b * 10 + unit / 2) / unit;
    format!("{}.{} {name}", tenths / 10, tenths % 10)
}
