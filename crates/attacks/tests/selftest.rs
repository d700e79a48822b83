//! `stockade selftest`: the whole embedded corpus through the binary, as the caller of this
//! test (root, and again as the unprivileged user in CI). Every case's control must escape
//! (no vacuous case), no attack may escape, and every case must run or be not applicable for
//! a stated reason.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::time::Duration;

use attacks::{stockade_bin, Cmd};

/// Most cases that may be not applicable for one caller (root-only cases for an unprivileged
/// caller, kernel features this machine lacks).
const MAX_NOT_APPLICABLE: u64 = 25;

#[test]
fn whole_corpus_is_contained() {
    if attacks::not_applicable(&attacks::na::CORPUS_ONCE) {
        return;
    }
    whole_corpus(&[], MAX_NOT_APPLICABLE);
}

/// The same corpus against the gVisor backend (skipped, saying so, without runsc). More
/// cases are not applicable there: those that reach what the Sentry implements on its own
/// (each says why, `not_under.gvisor` in the corpus).
#[test]
fn whole_corpus_is_contained_under_gvisor() {
    if attacks::not_applicable(&attacks::na::CORPUS_ONCE) {
        return;
    }
    if !std::path::Path::new("/usr/bin/runsc").exists() {
        eprintln!("SKIP: runsc is not installed (apt-get install runsc)");
        return;
    }
    whole_corpus(&["--backend", "gvisor"], MAX_NOT_APPLICABLE + 15);
}

fn whole_corpus(extra: &[&str], max_not_applicable: u64) {
    let dir = std::path::Path::new("/var/tmp");
    let run = Cmd::new(stockade_bin(), dir)
        .args(["selftest", "--json"])
        .args(extra)
        .timeout(Duration::from_secs(600))
        .run();
    let doc: serde_json::Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("selftest --json printed no JSON ({e})\n{}", run.describe()));
    let cases = doc["cases"].as_array().expect("cases");
    for c in cases {
        if c["verdict"] != "contained" {
            println!("{} {}: {}", c["verdict"], c["id"], c["detail"]);
        }
    }
    let s = &doc["summary"];
    println!("summary: {s}");
    let n = |k: &str| s[k].as_u64().expect(k);
    assert_eq!(n("escaped"), 0, "escaped cases\n{}", run.stderr);
    assert_eq!(n("vacuous"), 0, "vacuous cases (a control did not escape)");
    assert_eq!(n("error"), 0, "cases that did not run");
    assert!(
        n("not_applicable") <= max_not_applicable,
        "too many cases not applicable"
    );
    assert!(n("contained") >= 150, "fewer than 150 cases ran contained");
    assert_eq!(doc["passed"], true);
    run.assert_code(0);
}

#[test]
fn one_case_can_be_selected_and_an_unknown_one_is_refused() {
    let run = Cmd::new(stockade_bin(), std::path::Path::new("/var/tmp"))
        .args(["selftest", "--json", "--case", "secrets.ssh-private-key"])
        .run();
    let doc: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("json");
    assert_eq!(
        doc["cases"][0]["verdict"],
        "contained",
        "{}",
        run.describe()
    );
    assert_eq!(doc["summary"]["total"], 1);
    let bad = Cmd::new(stockade_bin(), std::path::Path::new("/var/tmp"))
        .args(["selftest", "--case", "no.such-case"])
        .run();
    bad.assert_code(125);
}
