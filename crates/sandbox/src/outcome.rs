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
    pub code: &'static str,
    /// `memory`, `pids` or `output`.
    pub limit: &'static str,
    /// The limit (bytes, processes).
    pub value: u64,
    /// How it was enforced (`cgroup_v1`, `cgroup_v2`, `rlimit`, `relay`).
    pub mechanism: &'static str,
    pub detail: String,
}

/// A blocked action of the sandbox: a refused call, or a protected path created during the
/// run and neutralised after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub code: &'static str,
    pub kind: &'static str,
    pub path: PathBuf,
    /// What stockade did about it.
    pub action: String,
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
