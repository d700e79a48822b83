//! The start stage: the run's records refused where the command could write them, its start
//! audited, and what every backend refuses alike (masked files with other names) checked,
//! before anything runs.

use std::path::PathBuf;

use super::Context;
use crate::audit_event::AuditEvent;
use crate::record::AuditLog;
use crate::record_path::RecordPath;
use crate::{journal, Error, RecoveredSweep, RunRequest};

/// The records' places checked against the spec's writable roots, earlier runs' completed
/// sweeps and this run's start audited, and a masked file with another name refused.
pub(super) fn start(
    cx: &Context<'_>,
    spec: &sandbox::Spec,
    audit: &mut AuditLog,
    report: Option<&RecordPath>,
    recovered: &[RecoveredSweep],
    recovered_audited: &mut bool,
) -> Result<(), Error> {
    let request = cx.request;
    let audit_start = tracing::debug_span!("audit_start").entered();
    refuse_policy_file_in_writable_root(request, &spec.writable_roots)?;
    // Before the first audit event: a log in a writable root is never written.
    audit.refuse_inside(&spec.writable_roots)?;
    if let Some(report) = report {
        report.refuse_inside(&spec.writable_roots)?;
    }
    *recovered_audited = true;
    journal::audit(audit, recovered)?;
    audit.event(&AuditEvent::RunStart {
        argv: &spec.argv,
        workspace: &request.invocation.workspace,
        policy_digest: &cx.digest,
        backend: cx.backend.name(),
    })?;
    if let Some(m) = &request.command_rule {
        audit.event(&AuditEvent::CommandRule(m))?;
    }
    drop(audit_start);
    // A masked or protected file with another name outside its mask: refused before anything
    // of the run happens (the backend's run checks it again, and records what
    // `--allow-degraded` skips).
    sandbox::refuse_linked_secrets(&spec.linked_secrets, request.options)?;
    Ok(())
}

/// A policy file (`--policy`) outside the workspace that the command could write (it lies in
/// an `--allow-write` directory, or is reached through one) would let it rewrite the policy
/// of the next run: refused. One inside the workspace is the trust gate's: it must lie under
/// a trust path, protected during every run and pinned by content (`stockade trust`).
fn refuse_policy_file_in_writable_root(
    request: &RunRequest,
    roots: &[PathBuf],
) -> Result<(), Error> {
    let Some(file) = &request.policy_file else {
        return Ok(());
    };
    let workspace = &request.invocation.workspace;
    let canonical = std::fs::canonicalize(file).map_err(|e| Error::Io {
        what: format!("resolve the policy file {}", file.display()),
        cause: e,
    })?;
    let spelled = policy::normalize_lexically(&request.invocation.cwd.join(file));
    let inside_workspace = policy::is_within(&canonical, workspace);
    let root = roots.iter().find(|r| {
        (!inside_workspace && policy::is_within(&canonical, r))
            || (!policy::is_within(&spelled, workspace) && policy::is_within(&spelled, r))
    });
    match root {
        None => Ok(()),
        Some(root) => Err(Error::Usage {
            message: format!(
                "refusing --policy {}: it lies in {}, which the command can write, so it could \
                 rewrite the policy of your next run",
                file.display(),
                root.display()
            ),
            hint: "keep the policy file outside every --allow-write directory (or in the \
                   workspace's .stockade/, approved with `stockade trust`)"
                .into(),
        }),
    }
}
