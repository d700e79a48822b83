//! The record stage: the run's audit events and its record (`--report`), written through
//! nothing the sandbox could have planted; a refused run's refusal audited.

use super::finish::Ran;
use super::Context;
use crate::audit_event::{self, AuditEvent};
use crate::record::{AuditLog, RunRecord};
use crate::record_path::RecordPath;
use crate::{journal, Error, RecoveredSweep, RunResult};

/// The audit events and the record of the run `ran` of `spec`.
pub(super) fn record(
    cx: &Context<'_>,
    audit: &mut AuditLog,
    report: Option<&RecordPath>,
    spec: &sandbox::Spec,
    ran: Ran,
    recovered: Vec<RecoveredSweep>,
) -> Result<RunResult, Error> {
    let Ran {
        enforcement,
        fallback: cwd_fallback,
        outcome,
        violations,
        network,
        review,
        review_error,
    } = ran;
    for e in &network.events {
        audit.event(&AuditEvent::Network(e))?;
    }
    if network.dropped > 0 {
        audit.event(&AuditEvent::NetworkEventsDropped {
            code: audit_event::NET_EVENTS_DROPPED,
            count: network.dropped,
        })?;
    }
    for s in &outcome.skipped {
        audit.event(&AuditEvent::Degraded { skipped: s })?;
    }
    if let Some(f) = &cwd_fallback {
        audit.event(&AuditEvent::CwdFallback {
            cwd: &f.cwd,
            reason: &f.reason,
            started_in: &spec.workspace,
        })?;
    }
    if outcome.ended_by == Some("interrupt") {
        audit.event(&AuditEvent::Interrupt {
            exit_code: outcome.exit_code,
            signal: outcome.signal,
        })?;
    }
    for h in &outcome.limit_hits {
        audit.event(&AuditEvent::Limit(h))?;
    }
    if outcome.timed_out {
        audit.event(&AuditEvent::Timeout {
            code: sandbox::Code::Timeout.as_str(),
            limit_s: cx.policy.limits.timeout,
            exit_code: outcome.exit_code,
        })?;
    }
    for v in &violations {
        audit.event(&AuditEvent::Violation(v))?;
    }
    if let Some(r) = &review {
        audit.event(&AuditEvent::Review(r))?;
    }
    if let Some(f) = &review_error {
        audit.event(&AuditEvent::ReviewFailed(f))?;
    }
    audit.event(&AuditEvent::RunEnd {
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        duration_ms: outcome.duration.as_millis() as u64,
        violations: violations.len(),
    })?;
    if let (Some(report), Some(enforcement)) = (report, &enforcement) {
        RunRecord::new(
            cx.id,
            cx.policy,
            &cx.digest,
            spec,
            enforcement,
            cx.traits.layers,
            &outcome,
            &violations,
            &network.events,
        )
        .with_command_rule(cx.request.command_rule.as_ref())
        .with_review(review.as_ref())
        .with_review_error(review_error.as_ref())
        .write(report)?;
    }
    Ok(RunResult {
        exit_code: outcome.exit_code,
        outcome,
        violations,
        network: network.events,
        run_id: cx.id.to_string(),
        cwd_fallback,
        review,
        review_error,
        recovered,
    })
}

/// A refused run's refusal in the audit log, with the completed sweeps of earlier runs when
/// the start did not audit them yet: what was completed for a dead run stays on record.
pub(super) fn refused(
    audit: &mut AuditLog,
    e: &Error,
    recovered: &[RecoveredSweep],
    recovered_audited: bool,
) -> Result<(), Error> {
    if !recovered_audited {
        journal::audit(audit, recovered)?;
    }
    audit.event(&AuditEvent::Refused {
        code: e.code(),
        kind: e.kind(),
        message: e.to_string(),
    })
}
