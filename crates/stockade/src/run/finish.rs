//! The finish stage: the proxy stopped, a review run's change set read and sealed, and the
//! sweep of what the run left that host tools would act on.

use super::launch::Launched;
use super::Context;
use crate::{review_stage, Error, ReviewFailure, ReviewSummary};

/// A run that ended, with all that the record stage writes down.
pub(super) struct Ran {
    /// What enforced each layer (with `--report`).
    pub enforcement: Option<sandbox::Enforcement>,
    pub fallback: Option<sandbox::CwdFallback>,
    pub outcome: sandbox::Outcome,
    /// Refused during the run, and undone by the sweep after it.
    pub violations: Vec<sandbox::Violation>,
    pub network: net::proxy::Report,
    pub review: Option<ReviewSummary>,
    pub review_error: Option<ReviewFailure>,
}

/// Ends the run `launched` of `resolved`: the proxy, the review, the sweep, the journal.
pub(super) fn finish(
    cx: &Context<'_>,
    resolved: &workspace::Resolved,
    launched: Launched,
    review: Option<review_stage::Stage>,
) -> Result<Ran, Error> {
    let (policy, id) = (cx.policy, cx.id);
    let Launched {
        proxy,
        enforcement,
        fallback,
        launched,
        journal,
        launched_at,
        held,
    } = launched;
    let network = tracing::debug_span!("proxy_stop").in_scope(|| {
        let started = proxy.lock().ok().and_then(|mut p| p.take());
        started
            .map(|p: net::proxy::Proxy| p.stop())
            .unwrap_or_default()
    });
    let mut launched = launched;
    let bounded = launched.as_mut().ok().and_then(|o| o.review_upper.take());
    // A failed finish does not lose the run: its exit code, its end and the sweep after
    // it are recorded as for any run, with the error beside them.
    let (review, review_error) = match review {
        Some(stage) => match tracing::debug_span!("review_finish")
            .in_scope(|| stage.finish(launched.is_ok(), bounded))
        {
            Ok(r) => (r, None),
            Err(e) if launched.is_ok() => {
                (None, Some(ReviewFailure::new(policy.workspace_mode, &e)))
            }
            Err(e) => return Err(e),
        },
        None => (None, None),
    };
    // A launch that failed (a setup step refused: a link swapped in after planning) is
    // swept at once, as its journal would make the next run do; its journal is then
    // done. Left behind, it made every later run on the workspace recover it, and the
    // recovery re-plans the spec, which the same swapped link refuses: the workspace
    // stayed blocked until the journal was removed by hand.
    let staged: Vec<std::path::PathBuf> = (launched.as_ref().ok())
        .map(|o| o.staged.clone())
        .unwrap_or_default();
    let sweep = || {
        tracing::debug_span!("sweep").in_scope(|| {
            workspace::sweep::after_run(
                resolved,
                &workspace::RealHost,
                id,
                held,
                launched_at,
                &staged,
            )
        })
    };
    let mut outcome = match launched {
        Ok(outcome) => outcome,
        // A setup step refused the run: the command never started, so there is nothing of
        // it to sweep, and a sweep would act on what another process did meanwhile (under
        // gVisor the restore of protected paths "moved back" what a concurrent exchange
        // had moved, the exchange that made the start fail: the repository was left
        // rearranged, red team issue 32d, third pass). Its journal goes.
        Err(e) if e.refused_at_setup() => {
            if let Some(j) = journal {
                j.done();
            }
            return Err(e);
        }
        Err(e) => {
            for v in &sweep() {
                tracing::warn!(
                    "after a failed launch: {} {}: {}",
                    v.kind,
                    v.path.display(),
                    v.action
                );
            }
            if let Some(j) = journal {
                j.done();
            }
            return Err(e);
        }
    };
    if let Some(r) = review.as_ref().filter(|r| r.disk_bound_reached) {
        outcome.limit_hits.push(sandbox::LimitHit {
            code: sandbox::Code::LimitReached,
            limit: "disk",
            value: r.disk_bytes.unwrap_or(0),
            mechanism: "tmpfs",
            detail: "the run filled its view's disk bound: writes past it failed with ENOSPC"
                .into(),
        });
    }
    let mut violations = outcome.blocked.clone();
    violations.extend(sweep());
    if let Some(j) = journal {
        j.done();
    }
    Ok(Ran {
        enforcement,
        fallback,
        outcome,
        violations,
        network,
        review,
        review_error,
    })
}
