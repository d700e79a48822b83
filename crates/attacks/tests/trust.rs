//! Content-addressed trust for workspace configuration (issue 5): `stockade trust
//! approve|status|revoke` and the check `stockade run` makes.
//!
//! The attacks: a workspace's configuration changes after it was approved (one byte of
//! `.mcp.json`, as a `git pull` or an agent's edit tool would leave it), a policy file inside
//! the workspace that nobody approved opens a write outside it, a config is a link to a
//! file outside the workspace, concurrent approvals race on the store, the store is torn or
//! forged, and the sandboxed command tries to write approvals itself.
//!
//! Controls: the refused change runs once it is approved (the pin, not the content, refused
//! it); the unapproved policy, given from outside the workspace (where no pin applies), does
//! open the write, so the refusal is what stops it; the same config as a regular file is
//! approved; the writes to the store that the sandbox cannot make work on the host.
//!
//! Every command gets its own `XDG_STATE_HOME` under the fixture, so the real store is never
//! touched.

#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};

use attacks::{read_json, read_text, sh_quote, write_file, Fixture, Run};

const MCP: &str = r#"{"mcpServers":{"docs":{"command":"npx","args":["docs-server"]}}}"#;
/// One byte changed: `docs-server` -> `docs-servex` (the server a poisoned pull would start).
const MCP_CHANGED: &str = r#"{"mcpServers":{"docs":{"command":"npx","args":["docs-servex"]}}}"#;

fn state(fx: &Fixture) -> PathBuf {
    fx.root.join("state")
}

fn store(fx: &Fixture) -> PathBuf {
    state(fx).join("stockade/trust")
}

/// `stockade trust VERB --workspace WS [EXTRA...]` with the fixture's state directory.
fn trust(fx: &Fixture, verb: &str, extra: &[&str]) -> Run {
    fx.stockade([
        "trust".as_ref(),
        verb.as_ref(),
        "--workspace".as_ref(),
        fx.ws.as_os_str(),
    ])
    .args(extra)
    .env("XDG_STATE_HOME", state(fx))
    .run()
}

/// `stockade run --workspace WS OPTS... --shell SCRIPT` with the fixture's state directory.
fn run(fx: &Fixture, opts: &[&str], script: &str) -> Run {
    fx.sandbox(opts, script)
        .env("XDG_STATE_HOME", state(fx))
        .run()
}

/// The one record file in the store (besides `.lock`).
fn record_file(fx: &Fixture) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(store(fx))
        .expect("read the store")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.file_name().is_some_and(|n| n != ".lock"))
        .collect();
    assert_eq!(
        files.len(),
        1,
        "expected one record and the lock: {files:?}"
    );
    files.into_iter().next().expect("one record")
}

fn assert_refused(run: &Run, code: &str, needles: &[&str]) {
    run.assert_code(125)
        .assert_stderr_contains(&format!("stockade: error[{code}]: "))
        .assert_stderr_contains("  hint: ");
    for n in needles {
        run.assert_stderr_contains(n);
    }
}

#[test]
fn refuses_a_run_after_one_byte_of_mcp_json_changed() {
    let fx = Fixture::new();
    let ran = fx.marker("ran");
    let script = format!("echo {ran}");
    write_file(&fx.ws.join(".mcp.json"), MCP, 0o644);
    trust(&fx, "approve", &[])
        .assert_success()
        .assert_stdout_contains(".mcp.json");
    trust(&fx, "status", &[]).assert_code(0);
    run(&fx, &[], &script)
        .assert_success()
        .assert_stdout_contains(&ran);

    // The attack: one byte of the approved MCP config changes on the host.
    write_file(&fx.ws.join(".mcp.json"), MCP_CHANGED, 0o644);
    let records = fx.records();
    let opts = records.opts();
    let refused = run(&fx, &opts, &script);
    assert_refused(
        &refused,
        "E_UNTRUSTED_CONFIG",
        &[".mcp.json (changed)", "stockade trust approve --workspace"],
    );
    refused.assert_lacks(&ran);
    let audit = attacks::read_jsonl(&records.audit);
    assert!(
        audit
            .iter()
            .any(|e| e["event"] == "refused" && e["code"] == "E_UNTRUSTED_CONFIG"),
        "the refusal is audited: {audit:?}"
    );
    let status = trust(&fx, "status", &[]);
    status
        .assert_code(1)
        .assert_stdout_contains("CHANGED")
        .assert_stdout_contains(".mcp.json");
    let json = trust(&fx, "status", &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("status --json");
    assert_eq!(v["state"], "changed", "{v:#}");
    assert_eq!(v["changes"][0]["path"], ".mcp.json", "{v:#}");
    assert_eq!(v["changes"][0]["change"], "changed", "{v:#}");

    // Reverted: the approved bytes run again.
    write_file(&fx.ws.join(".mcp.json"), MCP, 0o644);
    run(&fx, &[], &script)
        .assert_success()
        .assert_stdout_contains(&ran);

    // Control: the same change, approved, runs: the pin refused it, not its content.
    write_file(&fx.ws.join(".mcp.json"), MCP_CHANGED, 0o644);
    trust(&fx, "approve", &[]).assert_success();
    run(&fx, &[], &script)
        .assert_success()
        .assert_stdout_contains(&ran);
    // And after `revoke`, a workspace without a policy file runs as if never approved.
    trust(&fx, "revoke", &[]).assert_success();
    trust(&fx, "status", &[]).assert_code(1);
    write_file(&fx.ws.join(".mcp.json"), MCP, 0o644);
    run(&fx, &[], &script).assert_success();
}

#[test]
fn refuses_an_unapproved_workspace_policy_that_opens_a_write_outside() {
    let fx = Fixture::new();
    let target = fx.outside.join("target.txt");
    let policy = format!(
        "[filesystem]\nallow_write = [{}]\n",
        toml_string(&fx.outside)
    );
    write_file(&fx.ws.join("stockade.toml"), &policy, 0o644);
    let ws_policy = fx.ws.join("stockade.toml").display().to_string();
    let write = format!("echo pwned > {}", sh_quote(&target));

    // The attack: the workspace's own policy (from a pull) widens the sandbox.
    let refused = run(&fx, &["--policy", &ws_policy], &write);
    assert_refused(
        &refused,
        "E_UNTRUSTED_CONFIG",
        &["stockade.toml", "not approved"],
    );
    assert_eq!(read_text(&target).as_deref(), Some("original\n"));
    // A policy file elsewhere in the workspace cannot be approved at all.
    write_file(&fx.ws.join("conf/sandbox.toml"), &policy, 0o644);
    let other = fx.ws.join("conf/sandbox.toml").display().to_string();
    assert_refused(
        &run(&fx, &["--policy", &other], &write),
        "E_UNTRUSTED_CONFIG",
        &["conf/sandbox.toml"],
    );
    assert_eq!(read_text(&target).as_deref(), Some("original\n"));

    // Control: the same policy from outside the workspace (no pin applies to it) is used,
    // and the write lands: the refusal above is what kept it out.
    let outside_policy = fx.root.join("copied-policy.toml");
    write_file(&outside_policy, &policy, 0o644);
    let outside_policy = outside_policy.display().to_string();
    run(&fx, &["--policy", &outside_policy], &write).assert_success();
    assert_eq!(read_text(&target).as_deref(), Some("pwned\n"));

    // Approved by the user, the workspace policy is used; changed again, it is refused.
    write_file(&target, "original\n", 0o644);
    trust(&fx, "approve", &[])
        .assert_success()
        .assert_stdout_contains("stockade.toml");
    run(&fx, &["--policy", &ws_policy], &write).assert_success();
    assert_eq!(read_text(&target).as_deref(), Some("pwned\n"));
    write_file(
        &fx.ws.join("stockade.toml"),
        format!("{policy}[network]\nmode = \"host\"\n"),
        0o644,
    );
    assert_refused(
        &run(&fx, &["--policy", &ws_policy], "true"),
        "E_UNTRUSTED_CONFIG",
        &["stockade.toml (changed)"],
    );
}

fn toml_string(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

#[test]
fn refuses_a_config_linked_out_of_the_workspace() {
    let fx = Fixture::new();
    write_file(&fx.ws.join(".mcp.json"), MCP, 0o644);
    trust(&fx, "approve", &[]).assert_success();
    // The attack: the approved path becomes a link to a file the attacker controls, outside
    // the workspace (under /var/tmp).
    let evil = fx.outside.join("mcp.json");
    write_file(&evil, MCP, 0o644);
    std::fs::remove_file(fx.ws.join(".mcp.json")).expect("rm");
    std::os::unix::fs::symlink(&evil, fx.ws.join(".mcp.json")).expect("symlink");
    let needles = [".mcp.json", "leads out of the workspace"];
    assert_refused(&run(&fx, &[], "true"), "E_UNTRUSTED_CONFIG", &needles);
    assert_refused(&trust(&fx, "approve", &[]), "E_UNTRUSTED_CONFIG", &needles);
    assert_refused(&trust(&fx, "status", &[]), "E_UNTRUSTED_CONFIG", &needles);
    // A linked directory on the way is the same escape.
    std::fs::remove_file(fx.ws.join(".mcp.json")).expect("rm");
    std::os::unix::fs::symlink(&fx.outside, fx.ws.join(".claude")).expect("symlink");
    assert_refused(
        &trust(&fx, "approve", &[]),
        "E_UNTRUSTED_CONFIG",
        &[".claude", "leads out of the workspace"],
    );
    std::fs::remove_file(fx.ws.join(".claude")).expect("rm");

    // Control: the same bytes as a regular file, or a link that stays inside the workspace,
    // are approved and run.
    write_file(&fx.ws.join(".mcp.json"), MCP, 0o644);
    trust(&fx, "approve", &[]).assert_success();
    run(&fx, &[], "true").assert_success();
    write_file(&fx.ws.join("config/mcp.json"), MCP, 0o644);
    std::fs::remove_file(fx.ws.join(".mcp.json")).expect("rm");
    std::os::unix::fs::symlink("config/mcp.json", fx.ws.join(".mcp.json")).expect("symlink");
    run(&fx, &[], "true").assert_success();
    trust(&fx, "approve", &[]).assert_success();
}

#[test]
fn concurrent_approvals_cannot_corrupt_the_store() {
    let fx = Fixture::new();
    write_file(&fx.ws.join(".mcp.json"), MCP, 0o644);
    write_file(
        &fx.ws.join(".stockade/extra.toml"),
        "profile = \"read-only\"\n",
        0o644,
    );
    for round in 0..5 {
        let runs: Vec<Run> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| trust(&fx, "approve", &["--json"])))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("approve thread"))
                .collect()
        });
        for r in &runs {
            r.assert_success();
        }
        let record = read_json(&record_file(&fx));
        assert_eq!(
            record["workspace"].as_str(),
            Some(fx.ws.display().to_string().as_str()),
            "round {round}: {record:#}"
        );
        trust(&fx, "status", &[]).assert_code(0);
        run(&fx, &[], "true").assert_success();
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(store(&fx)).expect("store").permissions(),
    );
    assert_eq!(mode & 0o777, 0o700, "the store directory is private");
}

#[test]
fn a_corrupt_store_refuses_runs_instead_of_trusting() {
    let fx = Fixture::new();
    write_file(&fx.ws.join(".mcp.json"), MCP, 0o644);
    trust(&fx, "approve", &[]).assert_success();
    let record = record_file(&fx);
    let good = read_text(&record).expect("record");
    let torn = &good[..good.len() / 2];
    let dup = good.replacen("\"digest\"", "\"digest\": \"sha256:00\",\n  \"digest\"", 1);
    // The attack shape: a record torn by a crash, or with a second key meant to win.
    for text in [torn, dup.as_str()] {
        write_file(&record, text, 0o600);
        assert_refused(&run(&fx, &[], "true"), "E_TRUST_STORE", &["corrupt"]);
        assert_refused(&trust(&fx, "status", &[]), "E_TRUST_STORE", &["corrupt"]);
    }
    // Control: the intact record runs.
    write_file(&record, &good, 0o600);
    run(&fx, &[], "true").assert_success();
}

#[test]
fn the_sandbox_cannot_forge_approvals_even_where_the_store_is_writable() {
    let fx = Fixture::new();
    write_file(&fx.ws.join(".mcp.json"), MCP, 0o644);
    trust(&fx, "approve", &[]).assert_success();
    let record = record_file(&fx);
    let before = read_text(&record).expect("record");
    let forged = store(&fx).join("0000-forged.json");
    // Overwrite the record, add one, or delete it (which would un-gate the workspace).
    let attack = format!(
        "echo forged > {rec}; echo forged > {new}; rm -f {rec}; \
         test ! -e {rec} || test \"$(cat {rec})\" = forged || test -e {new}",
        rec = sh_quote(&record),
        new = sh_quote(&forged)
    );
    // `--allow-write` on the state directory holds the store: stockade keeps it read-only.
    let state = state(&fx).display().to_string();
    let opts = ["--allow-write", state.as_str()];
    fx.attack(&opts, &attack)
        .env("XDG_STATE_HOME", state.as_str())
        .outcome()
        .assert_failed();
    assert_eq!(read_text(&record).as_deref(), Some(before.as_str()));
    assert!(!forged.exists(), "a forged record appeared");
    trust(&fx, "status", &[]).assert_code(0);

    // A store inside the workspace is refused by `approve`; runs there keep it read-only.
    let inside = fx.ws.join(".state");
    let approve_inside = fx
        .stockade([
            "trust".as_ref(),
            "approve".as_ref(),
            "--workspace".as_ref(),
            fx.ws.as_os_str(),
        ])
        .env("XDG_STATE_HOME", &inside)
        .run();
    assert_refused(&approve_inside, "E_TRUST_STORE", &["inside the workspace"]);
    let planted = inside.join("stockade/trust/planted.json");
    let plant = format!(
        "mkdir -p {dir} && echo forged > {file}",
        dir = sh_quote(planted.parent().expect("parent")),
        file = sh_quote(&planted)
    );
    fx.attack(&[], &plant)
        .env("XDG_STATE_HOME", &inside)
        .outcome()
        .assert_failed_if_guarded();
    assert!(
        !planted.exists(),
        "a record was planted in the workspace store"
    );

    // Controls: the same sandboxes, with stockade told the store lives elsewhere (so it
    // guards another path), make every one of these writes: the guard is what stopped them.
    let elsewhere = fx.root.join("elsewhere");
    fx.attack(&[], &plant)
        .env("XDG_STATE_HOME", &elsewhere)
        .outcome()
        .assert_ok();
    assert!(planted.exists());
    fx.attack(&opts, &attack)
        .env("XDG_STATE_HOME", &elsewhere)
        .outcome()
        .assert_ok();
    assert!(!record.exists(), "the unguarded sandbox deleted the record");
}

/// Review M4 (10-cross-user-home.sh): root run with a regular user's HOME (`sudo` keeping it,
/// `su` without `-`) must not believe that user's trust store: the user could approve (or
/// forge a record for) a workspace whose `stockade.toml` root's run would then use (a
/// credential `command` source runs as root). A store, or a record, of another uid refuses
/// the run, naming the owner. Control: the same store root's own, the project file is used.
/// Root only (making a file of another user's takes root).
#[test]
fn a_trust_store_of_another_user_is_not_believed() {
    if attacks::skip_unless_root("chown the store to another user") {
        return;
    }
    let fx = Fixture::new();
    write_file(
        &fx.ws.join("stockade.toml"),
        "[env]\nset = { FROM_PROJECT = \"yes\" }\n",
        0o644,
    );
    trust(&fx, "approve", &[]).assert_success();
    let chown = |uid: u32, p: &Path| std::os::unix::fs::chown(p, Some(uid), None).expect("chown");
    let record = record_file(&fx);
    for (dir_uid, record_uid) in [(999, 999), (0, 999), (999, 0)] {
        chown(dir_uid, &store(&fx));
        chown(record_uid, &record);
        let r = run(&fx, &[], "echo p=${FROM_PROJECT:-none}");
        assert_refused(
            &r,
            "E_TRUST_STORE",
            &["belongs to uid 999, neither you nor root"],
        );
        assert!(!r.stdout.contains("p="), "{}", r.describe());
    }
    // Control: root's own store.
    chown(0, &store(&fx));
    chown(0, &record);
    run(&fx, &[], "echo p=${FROM_PROJECT:-none}")
        .assert_success()
        .assert_stdout_contains("p=yes");
}
