//! What the audit log records: one enum, each variant one kind of line (issue 16, item 3).
//! Serialized as a JSON object whose `event` names the variant, beside `ts_ms` and `run_id`
//! ([`crate::record::AuditLog::event`]). The fields are the log's format: change them only
//! with the README's description of `--audit`.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::NetworkEvent;

/// One line of the audit log.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum AuditEvent<'a> {
    /// The run is about to start (after the trust check and the plan).
    RunStart {
        argv: &'a [String],
        workspace: &'a Path,
        policy_digest: &'a str,
        backend: &'a str,
    },
    /// A decision of the egress proxy.
    Network(&'a NetworkEvent),
    /// Decisions beyond what the proxy keeps per run: only their number.
    #[serde(rename = "network")]
    NetworkEventsDropped { code: &'static str, count: u64 },
    /// A protection skipped under `--allow-degraded`.
    Degraded { skipped: &'a str },
    /// The command started in the workspace instead of the caller's directory.
    CwdFallback {
        cwd: &'a Path,
        reason: &'a str,
        started_in: &'a Path,
    },
    /// The run was ended by Ctrl-C (or SIGTERM/SIGHUP to stockade).
    Interrupt { exit_code: i32, signal: Option<i32> },
    /// A limit the run reached.
    Limit(&'a sandbox::LimitHit),
    /// The run hit its time limit.
    Timeout {
        code: &'static str,
        limit_s: Option<u64>,
        exit_code: i32,
    },
    /// Something the sandbox refused or the sweep took out.
    Violation(&'a sandbox::Violation),
    /// A review or ephemeral run's change set could not be read and sealed after the command
    /// ended (the `run_end` that follows has the command's exit code).
    ReviewFailed(&'a crate::ReviewFailure),
    /// The sweep of an earlier run on the workspace whose supervisor died before it (see
    /// `journal`), completed before this run: `violations` of them follow as `violation`.
    SweepRecovered {
        code: &'static str,
        recovered_run_id: &'a str,
        journal: &'a Path,
        violations: usize,
        /// The dead run's writable roots this run cannot write: not swept.
        #[serde(skip_serializing_if = "<[PathBuf]>::is_empty")]
        not_swept: &'a [PathBuf],
    },
    /// The run ended.
    RunEnd {
        exit_code: i32,
        signal: Option<i32>,
        duration_ms: u64,
        violations: usize,
    },
    /// A live policy change (`--control-fd`, `stockade proxy`'s SIGHUP reload): what changed
    /// and when it applies, or why it was refused (then nothing changed).
    PolicyChange {
        source: &'a str,
        change: Option<&'a crate::Change>,
        #[serde(skip_serializing_if = "Option::is_none")]
        applied: Option<&'a crate::Applied>,
        #[serde(skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
    },
    /// The run's program matched a `[[commands]]` entry: its grants apply, or (excluded) it
    /// runs outside the sandbox.
    CommandRule(&'a crate::CommandMatch),
    /// A review or ephemeral run's change set: where it waits, what it holds.
    Review(&'a crate::ReviewSummary),
    /// Stockade refused the run (or failed) before or while starting it.
    Refused {
        code: &'static str,
        kind: &'static str,
        message: String,
    },
}

/// Code of [`AuditEvent::NetworkEventsDropped`].
pub(crate) const NET_EVENTS_DROPPED: &str = "NET_EVENTS_DROPPED";

#[cfg(test)]
mod tests {
    use super::*;

    fn json(e: &AuditEvent<'_>) -> serde_json::Value {
        serde_json::to_value(e).unwrap()
    }

    /// The lines keep the shape the log had before the events were typed (README's `--audit`).
    #[test]
    fn events_serialize_with_their_name_and_fields() {
        let argv = ["true".to_owned()];
        assert_eq!(
            json(&AuditEvent::RunStart {
                argv: &argv,
                workspace: Path::new("/ws"),
                policy_digest: "d",
                backend: "native",
            }),
            serde_json::json!({"event": "run_start", "argv": ["true"], "workspace": "/ws",
                "policy_digest": "d", "backend": "native"})
        );
        assert_eq!(
            json(&AuditEvent::NetworkEventsDropped {
                code: NET_EVENTS_DROPPED,
                count: 3
            }),
            serde_json::json!({"event": "network", "code": "NET_EVENTS_DROPPED", "count": 3})
        );
        assert_eq!(
            json(&AuditEvent::RunEnd {
                exit_code: 0,
                signal: None,
                duration_ms: 5,
                violations: 1
            }),
            serde_json::json!({"event": "run_end", "exit_code": 0, "signal": null,
                "duration_ms": 5, "violations": 1})
        );
        let e = NetworkEvent {
            code: "NET_ALLOWED",
            protocol: "http",
            host: "a.test".into(),
            port: 80,
            rule: "allow_domains:a.test".into(),
            reason: None,
            hint: None,
            before_connect: false,
            addr: None,
            bytes_up: 1,
            bytes_down: 2,
        };
        let v = json(&AuditEvent::Network(&e));
        assert_eq!(v["event"], "network");
        assert_eq!(v["host"], "a.test");
        assert_eq!(v["bytes_down"], 2);
    }
}
