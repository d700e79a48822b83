//! The run record (`--report FILE`, one JSON document) and the audit log (`--audit FILE`,
//! appended JSON lines).

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::audit_event::AuditEvent;
use crate::record_path::{RecordPath, Which};
use crate::Error;

/// The audit log: its directory is held from the start; the file is opened at the first
/// event (after the run's writable roots were checked, see [`AuditLog::refuse_inside`]) and
/// kept open for the rest of the run.
pub(crate) struct AuditLog {
    target: Option<RecordPath>,
    file: Option<File>,
    run_id: String,
}

impl AuditLog {
    pub(crate) fn open(path: Option<&Path>, run_id: &str) -> Result<AuditLog, Error> {
        let target = match path {
            Some(p) => Some(RecordPath::locate(p, Which::Audit)?),
            None => None,
        };
        Ok(AuditLog {
            target,
            file: None,
            run_id: run_id.to_string(),
        })
    }

    /// Refuses a log the command could redirect (see [`RecordPath::refuse_inside`]); the log
    /// is then never written.
    pub(crate) fn refuse_inside(&mut self, roots: &[std::path::PathBuf]) -> Result<(), Error> {
        let Some(target) = &self.target else {
            return Ok(());
        };
        let refused = target.refuse_inside(roots);
        if refused.is_err() {
            self.target = None;
        }
        refused
    }

    pub(crate) fn event(&mut self, event: &AuditEvent<'_>) -> Result<(), Error> {
        if self.file.is_none() {
            let Some(target) = &self.target else {
                return Ok(());
            };
            self.file = Some(target.open_append()?);
        }
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        #[derive(Serialize)]
        struct Line<'a> {
            ts_ms: u64,
            run_id: &'a str,
            #[serde(flatten)]
            event: &'a AuditEvent<'a>,
        }
        let line = Line {
            ts_ms: ts,
            run_id: &self.run_id,
            event,
        };
        let mut line = serde_json::to_string(&line).map_err(|e| Error::Io {
            what: "write the audit log".into(),
            cause: std::io::Error::other(e),
        })?;
        line.push('\n');
        f.write_all(line.as_bytes()).map_err(|e| Error::Io {
            what: "write the audit log".into(),
            cause: e,
        })
    }
}

#[derive(Serialize)]
struct PlanSummary<'a> {
    inside_uid: u32,
    host_uid: u32,
    writable_roots: &'a [std::path::PathBuf],
    masked: Vec<&'a std::path::Path>,
    /// Read as empty (shell start-up files).
    emptied: Vec<&'a std::path::Path>,
    protected: &'a [std::path::PathBuf],
    mounts: usize,
    landlock_rules: usize,
    landlock_abi: Option<i32>,
    seccomp_rules: usize,
    env_names: Vec<&'a str>,
}

/// One limit and its mechanism (`cgroup_v1`, `cgroup_v2`, `rlimit`; under gVisor
/// `gvisor_cgroup`, `gvisor_rlimit_nproc`, `gvisor_rlimit_as`).
#[derive(Serialize)]
struct LimitRecord {
    value: u64,
    mechanism: &'static str,
}

#[derive(Serialize)]
struct LimitsRecord {
    timeout_s: Option<u64>,
    /// Bytes.
    memory: Option<LimitRecord>,
    pids: Option<LimitRecord>,
    /// Thousandths of a core.
    cpu_millicores: Option<LimitRecord>,
    /// Bytes per stream.
    output: Option<u64>,
}

impl LimitsRecord {
    /// The limits of `spec`, with the mechanism the backend enforces each with.
    fn new(spec: &sandbox::Spec, enforcement: &sandbox::Enforcement) -> LimitsRecord {
        let rec = |e: Option<sandbox::Enforced>| {
            e.map(|e| LimitRecord {
                value: e.value,
                mechanism: e.mechanism.code(),
            })
        };
        LimitsRecord {
            timeout_s: spec.limits.timeout.map(|t| t.as_secs()),
            memory: rec(enforcement.memory),
            pids: rec(enforcement.pids),
            cpu_millicores: rec(enforcement.cpu_millicores),
            output: spec.limits.output_bytes,
        }
    }
}

#[derive(Serialize)]
pub(crate) struct RunRecord<'a> {
    run_id: &'a str,
    backend: &'static str,
    profile: &'a str,
    policy_digest: &'a str,
    argv: &'a [String],
    plan: PlanSummary<'a>,
    exit_code: i32,
    signal: Option<i32>,
    exec_errno: Option<i32>,
    duration_ms: u64,
    violations: &'a [sandbox::Violation],
    skipped: &'a [String],
    network_mode: policy::NetworkMode,
    /// Which limit ended the run, if one did (`timeout`, `memory`).
    ended_by: Option<&'static str>,
    /// The limits in force and how each was enforced.
    limits: LimitsRecord,
    /// What the run used.
    usage: &'a sandbox::Usage,
    /// Limits the run reached.
    limit_hits: &'a [sandbox::LimitHit],
    /// Bytes of output written, passed on and dropped, per stream (under an output limit).
    output: Option<&'a sandbox::Output>,
    /// Every decision of the egress proxy (mode proxy).
    network: &'a [net::proxy::Event],
    /// Mode none (native): the command tried the network it does not have ("network is off
    /// in this run"): the kernel's counts. Absent when it did not try, or was not watched.
    #[serde(skip_serializing_if = "Option::is_none")]
    network_off: Option<sandbox::NetworkTries>,
    /// Mode proxy (native): connections or lookups that went around the proxy (a tool that
    /// ignores the proxy variables), as the kernel counted them.
    #[serde(skip_serializing_if = "Option::is_none")]
    network_around_proxy: Option<sandbox::NetworkTries>,
    /// Under a backend other than native: which mechanism enforces each layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    enforced_by: Option<&'static [sandbox::Layer]>,
    /// A container backend's run: the engine, the image's id, the container and the exact
    /// arguments given to the engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a sandbox::ContainerRun>,
    /// The `[[commands]]` entry whose grants the run had.
    #[serde(skip_serializing_if = "Option::is_none")]
    command_rule: Option<&'a crate::CommandMatch>,
    /// Review and ephemeral runs: what the run changed in its view of the workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    review: Option<&'a crate::ReviewSummary>,
    /// Review and ephemeral runs: why the change set could not be read and sealed.
    #[serde(skip_serializing_if = "Option::is_none")]
    review_error: Option<&'a crate::ReviewFailure>,
}

impl<'a> RunRecord<'a> {
    /// The record of a run of `spec`: what enforced it as its backend planned
    /// (`enforcement`), and in words where its mechanisms are not the host kernel's own
    /// (`layers`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        run_id: &'a str,
        policy: &'a policy::Policy,
        digest: &'a str,
        spec: &'a sandbox::Spec,
        enforcement: &'a sandbox::Enforcement,
        layers: &'static [sandbox::Layer],
        outcome: &'a sandbox::Outcome,
        violations: &'a [sandbox::Violation],
        network: &'a [net::proxy::Event],
    ) -> RunRecord<'a> {
        let plan = PlanSummary {
            inside_uid: enforcement.inside_uid,
            host_uid: enforcement.host_uid,
            writable_roots: &enforcement.writable_roots,
            masked: enforcement.masked.iter().map(|p| p.as_path()).collect(),
            emptied: enforcement.emptied.iter().map(|p| p.as_path()).collect(),
            protected: &enforcement.protected,
            mounts: enforcement.mounts,
            landlock_rules: enforcement.landlock_rules,
            landlock_abi: outcome.landlock_abi,
            seccomp_rules: enforcement.seccomp_rules,
            env_names: enforcement.env_names.iter().map(String::as_str).collect(),
        };
        RunRecord {
            run_id,
            backend: policy.backend.as_str(),
            profile: &policy.profile,
            policy_digest: digest,
            argv: &spec.argv,
            plan,
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            exec_errno: outcome.exec_errno,
            duration_ms: outcome.duration.as_millis() as u64,
            violations,
            skipped: &outcome.skipped,
            network_mode: policy.network.mode,
            ended_by: outcome.ended_by,
            limits: LimitsRecord::new(spec, enforcement),
            usage: &outcome.usage,
            limit_hits: &outcome.limit_hits,
            output: outcome.output.as_ref(),
            network,
            network_off: outcome.network_tries.filter(|t| t.tried() && !t.proxy),
            network_around_proxy: outcome.network_tries.filter(|t| t.tried() && t.proxy),
            enforced_by: (!layers.is_empty()).then_some(layers),
            container: outcome.container.as_ref(),
            command_rule: None,
            review: None,
            review_error: None,
        }
    }

    /// What a review or ephemeral run changed.
    pub(crate) fn with_review(mut self, review: Option<&'a crate::ReviewSummary>) -> Self {
        self.review = review;
        self
    }

    /// Why a review or ephemeral run's change set could not be read and sealed.
    pub(crate) fn with_review_error(mut self, error: Option<&'a crate::ReviewFailure>) -> Self {
        self.review_error = error;
        self
    }

    /// Name the `[[commands]]` entry whose grants the run had.
    pub(crate) fn with_command_rule(mut self, rule: Option<&'a crate::CommandMatch>) -> Self {
        self.command_rule = rule;
        self
    }

    pub(crate) fn write(&self, target: &RecordPath) -> Result<(), Error> {
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::Io {
            what: "serialize the run record".into(),
            cause: std::io::Error::other(e),
        })?;
        target.replace((text + "\n").as_bytes())
    }
}
