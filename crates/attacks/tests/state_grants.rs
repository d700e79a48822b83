//! Stockade's own state cannot be granted to a run (issue 32, item 1, found with the walk
//! cache). The caller's state directory (`$XDG_STATE_HOME/stockade`, default
//! `~/.local/state/stockade`) holds the run journals and the walk cache (a later run trusts
//! them), the trust store and the change sets of review runs. A grant that holds it is
//! handled where the state is protected (read-only inside the root, the cache not used); a
//! grant AT or BENEATH it (`--allow-write ~/.local/state/stockade/journal`) did not use the
//! cache, but its command could plant a cache file, a journal or trust records that a later,
//! narrower run reads and trusts. Such grants, writable or readable, and a workspace there,
//! are refused (`E_POLICY_INVALID`) naming the grant, the rule and what to do instead, also
//! the default directory below the home when `XDG_STATE_HOME` points elsewhere, before
//! anything runs: nothing is planted.
//!
//! Controls: in the same fixture a grant of a sibling (`~/.local/state/other`) and of an
//! agent's own directory below the state directory (`~/.local/state/stockade/claude-code`,
//! which `--agent claude-code` grants) are accepted and written through.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::path::{Path, PathBuf};

use attacks::{mkdir, Fixture};

/// The rule, as every refusal names it.
const RULE: &str = "stockade's own state cannot be granted to a run";

/// A command that plants `planted` in `dir`, then says so.
fn plant(dir: &Path) -> String {
    format!("echo forged > {}/planted && echo planted", dir.display())
}

/// `stockade run` with `opts` (and `env`), planting in `dir`: refused before it runs, with
/// the code, the grant, the rule and a hint; nothing planted.
fn assert_refused(fx: &Fixture, env: &[(&str, &Path)], opts: &[&str], dir: &Path) {
    let mut cmd = fx.attack(opts, &plant(dir));
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let run = cmd.run();
    run.assert_code(125)
        .assert_stderr_contains("E_POLICY_INVALID")
        .assert_stderr_contains(RULE)
        .assert_stderr_contains(&format!("{}:", opts[1]))
        .assert_stderr_contains("hint: grant (or run in) a directory outside")
        .assert_lacks("planted\n");
    assert!(!dir.join("planted").exists(), "{opts:?} planted in {dir:?}");
}

/// `stockade run` with `opts` writing into `dir`: accepted, and the file is on the host.
fn assert_written(fx: &Fixture, env: &[(&str, &Path)], opts: &[&str], dir: &Path) {
    let mut cmd = fx.attack(opts, &plant(dir));
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    cmd.outcome().assert_shows("planted");
    assert_eq!(
        std::fs::read_to_string(dir.join("planted")).ok().as_deref(),
        Some("forged\n"),
        "{opts:?}"
    );
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn grants_of_stockades_state_are_refused() {
    let fx = Fixture::new();
    let state = fx.home.join(".local/state");
    let stockade = state.join("stockade");
    // A plain run first: the journal directory (and its walk cache) exists, as it would.
    fx.sandbox_argv(&[], &["true"]).run().assert_success();
    let journal = stockade.join("journal");
    assert!(journal.is_dir(), "no journal directory {journal:?}");
    let places: Vec<PathBuf> = ["", "journal", "journal/sub", "trust", "changes/run1"]
        .iter()
        .map(|sub| {
            if sub.is_empty() {
                stockade.clone()
            } else {
                stockade.join(sub)
            }
        })
        .collect();
    for p in &places {
        mkdir(p);
    }
    for p in &places {
        assert_refused(&fx, &[], &["--allow-write", &s(p)], p);
        assert_refused(&fx, &[], &["--allow-read", &s(p)], p);
    }
    // The workspace there.
    let run = fx
        .stockade(["run", "--workspace", &s(&journal.join("sub")), "--shell"])
        .arg(plant(&journal.join("sub")))
        .run();
    run.assert_code(125)
        .assert_stderr_contains("E_POLICY_INVALID")
        .assert_stderr_contains(RULE)
        .assert_stderr_contains("the workspace (--workspace)")
        .assert_lacks("planted\n");
    assert!(!journal.join("sub/planted").exists());

    // XDG_STATE_HOME elsewhere: its stockade directory, and the default one below the home
    // (what `stockade` without the variable uses) both.
    let xdg = fx.root.join("xdg-state");
    let xdg_journal = xdg.join("stockade/journal");
    mkdir(&xdg_journal);
    let env = [("XDG_STATE_HOME", xdg.as_path())];
    assert_refused(
        &fx,
        &env,
        &["--allow-write", &s(&xdg_journal)],
        &xdg_journal,
    );
    assert_refused(&fx, &env, &["--allow-write", &s(&journal)], &journal);

    // Controls: a sibling and an agent's own directory are granted and written through.
    let other = state.join("other");
    let agent = stockade.join("claude-code");
    mkdir(&other);
    mkdir(&agent);
    assert_written(&fx, &[], &["--allow-write", &s(&other)], &other);
    std::fs::remove_file(other.join("planted")).unwrap();
    assert_written(&fx, &env, &["--allow-write", &s(&other)], &other);
    assert_written(&fx, &[], &["--allow-write", &s(&agent)], &agent);
    fx.attack(
        &["--allow-read", &s(&other)],
        "cat ~/.local/state/other/planted",
    )
    .outcome()
    .assert_shows("forged");
}
