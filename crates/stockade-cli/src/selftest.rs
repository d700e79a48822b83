//! `stockade selftest [--json] [--category C] [--case ID] [--list]`: runs the embedded attack
//! corpus on this machine with throw-away fixtures and prints, per case, contained / escaped /
//! not applicable (with why), plus what `doctor` found.
//!
//! Exit codes: 0 when nothing escaped, nothing was vacuous and every case ran; 1 otherwise;
//! 125 when the selftest itself could not start (corpus or binary missing).

use std::collections::BTreeSet;
use std::io::Write;

use clap::Args;
use stockade::Error;

use crate::output::outln;

#[derive(Args)]
pub struct SelftestArgs {
    /// Print the results as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// Run only the cases of this category (see --list).
    #[arg(long, value_name = "CATEGORY")]
    category: Option<String>,
    /// Run only this case (repeatable).
    #[arg(long = "case", value_name = "ID")]
    cases: Vec<String>,
    /// List the cases instead of running them.
    #[arg(long)]
    list: bool,
    /// Cases run at once (default 3).
    #[arg(long, value_name = "N", default_value_t = 3)]
    parallel: usize,
    /// Run the corpus against this backend: native (default), gvisor, podman or docker.
    #[arg(long, value_name = "NAME", value_parser = ["native", "gvisor", "podman", "docker"])]
    backend: Option<String>,
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |cause| Error::Io {
        what: what.to_string(),
        cause,
    }
}

pub fn main(args: &SelftestArgs) -> Result<u8, Error> {
    let corpus = selftest::load().map_err(|e| Error::Io {
        what: "load the embedded attack corpus".into(),
        cause: std::io::Error::other(e.to_string()),
    })?;
    let ids: BTreeSet<String> = args.cases.iter().cloned().collect();
    let cases = selftest::select(&corpus, args.category.as_deref(), &ids);
    let known: BTreeSet<&str> = corpus.iter().map(|c| c.id.as_str()).collect();
    if let Some(bad) = ids.iter().find(|id| !known.contains(id.as_str())) {
        return Err(Error::Io {
            what: format!("select case {bad}"),
            cause: std::io::Error::new(std::io::ErrorKind::NotFound, "no such case (see --list)"),
        });
    }
    if cases.is_empty() {
        return Err(Error::Io {
            what: "select cases".into(),
            cause: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no case matches (see --list for the categories and ids)",
            ),
        });
    }
    if args.list {
        return list(&cases, args.json);
    }
    let config = selftest::Config {
        stockade: std::env::current_exe().map_err(io("find the stockade binary"))?,
        parallel: args.parallel,
        backend: args.backend.clone(),
    };
    selftest::install_interrupt_handler();
    let (backend_name, checks, _) = stockade::backend_checks(
        (args.backend.as_deref())
            .and_then(policy::BackendName::parse)
            .unwrap_or_default(),
    );
    let doctor_ok = checks.iter().all(|c| c.ok || !c.required);
    let json = args.json;
    let progress = |r: &selftest::CaseResult| {
        if !json {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "  {:<10} {}", r.verdict.label(), r.id);
        }
    };
    let started = std::time::Instant::now();
    let results = selftest::run_cases(&cases, &config, &progress);
    let interrupted = selftest::runner::INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst);
    let counts = selftest::Counts::of(&results);
    let passed = counts.passed() && !interrupted && results.len() == cases.len();
    if json {
        let doc = serde_json::json!({
            "corpus_version": selftest::CORPUS_VERSION,
            "caller": { "uid": selftest::runner::caller_uid(), "root": selftest::caller_is_root() },
            "passed": passed,
            "interrupted": interrupted,
            "seconds": started.elapsed().as_secs_f64(),
            "summary": counts,
            "cases": results,
            "backend": backend_name,
            "doctor": { "ok": doctor_ok, "backend": backend_name, "checks": checks },
        });
        outln!("{doc}");
    } else {
        print_table(&results);
        outln!();
        outln!("doctor:");
        for c in &checks {
            outln!("  [{}] {:<28} {}", crate::check_mark(c), c.name, c.detail);
        }
        outln!();
        outln!(
            "selftest (corpus v{}, {} backend, {} caller, {:.1}s): {} cases: {} contained, {} escaped, {} not applicable, {} vacuous, {} errors{}",
            selftest::CORPUS_VERSION,
            backend_name,
            if selftest::caller_is_root() { "root" } else { "unprivileged" },
            started.elapsed().as_secs_f64(),
            counts.total,
            counts.contained,
            counts.escaped,
            counts.not_applicable,
            counts.vacuous,
            counts.error,
            if interrupted { " (interrupted)" } else { "" }
        );
        outln!(
            "{}",
            if passed {
                "PASS: every attack of the corpus was contained on this machine."
            } else {
                "FAIL: see the ESCAPED, VACUOUS and ERROR lines above."
            }
        );
    }
    Ok(if passed { 0 } else { 1 })
}

fn print_table(results: &[selftest::CaseResult]) {
    let width = results.iter().map(|r| r.id.len()).max().unwrap_or(4).max(4);
    outln!(
        "{:<width$}  {:<13}  {:<9}  detail",
        "case",
        "category",
        "result"
    );
    for r in results {
        outln!(
            "{:<width$}  {:<13}  {:<9}  {}",
            r.id,
            r.category,
            r.verdict.label(),
            r.detail
        );
    }
}

fn list(cases: &[selftest::Case], json: bool) -> Result<u8, Error> {
    if json {
        outln!(
            "{}",
            serde_json::json!({ "corpus_version": selftest::CORPUS_VERSION, "cases": cases })
        );
    } else {
        let width = cases.iter().map(|c| c.id.len()).max().unwrap_or(4);
        for c in cases {
            outln!("{:<width$}  {}  [{}]", c.id, c.title, c.why);
        }
        outln!(
            "{} cases (corpus v{})",
            cases.len(),
            selftest::CORPUS_VERSION
        );
    }
    Ok(0)
}
