//! Review mode's tests' shared steps: a review run with its change set's id, and the change
//! set as `stockade changes --json` lists it.

use crate::{read_json, Fixture, Run};

/// `stockade run --review --report FILE OPTS --shell SCRIPT` (not wrapped: the scripts are
/// plain steps); the run, and its change set's id (none when nothing is pending: no
/// changes, or an ephemeral run).
///
/// It first waits 50 ms: what the test wrote into the workspace just before is then older
/// than the run (a host change within 20 ms of a run's start counts as one made during the
/// run, a conflict for every path the run changes).
pub fn review(fx: &Fixture, opts: &[&str], script: &str) -> (Run, Option<String>) {
    std::thread::sleep(std::time::Duration::from_millis(50));
    let report = fx.out_file(&format!("review-{}.json", crate::unique()));
    let report_s = report.display().to_string();
    let mut all = vec!["--review", "--report", &report_s];
    all.extend_from_slice(opts);
    let run = fx.sandbox(&all, script).run();
    let id = std::fs::read(&report)
        .ok()
        .and_then(|_| read_json(&report).get("review").cloned())
        .and_then(|r| {
            (r.get("discarded") != Some(&serde_json::Value::Bool(true)))
                .then(|| r["run_id"].as_str().map(str::to_owned))
                .flatten()
        });
    (run, id)
}

/// `stockade changes ID --json`'s entries.
pub fn entries(fx: &Fixture, id: &str) -> Vec<serde_json::Value> {
    let run = fx.stockade(["changes", id, "--json"]).run();
    run.assert_success();
    let v: serde_json::Value = match serde_json::from_str(&run.stdout) {
        Ok(v) => v,
        Err(e) => panic!("changes --json printed no JSON ({e}): {}", run.describe()),
    };
    v["changes"].as_array().cloned().unwrap_or_default()
}

/// An entry's flag codes.
pub fn codes(c: &serde_json::Value) -> Vec<String> {
    c["flags"]
        .as_array()
        .map(|f| {
            f.iter()
                .map(|x| x["code"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}
