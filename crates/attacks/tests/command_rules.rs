//! `[[commands]]` (issue 18, item 7): a policy file's entry gives one program more than the
//! rest of the policy, or runs it outside the sandbox, matched by its resolved path; each use is
//! in the audit log and the report. The controls are the same commands without the entry (or
//! with a command string that is not plain), which the sandbox refuses as usual; entries the
//! sandbox could have planted or whose program it could have replaced are refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use attacks::*;

/// A policy file outside the workspace with `body`.
fn policy(fx: &Fixture, body: &str) -> String {
    let path = fx.out_file("commands-policy.toml");
    write_file(&path, body, 0o644);
    path.display().to_string()
}

#[test]
fn an_entry_grants_its_program_a_write_outside_the_workspace() {
    let fx = Fixture::new();
    let target = fx.outside.join("granted.txt");
    let p = policy(
        &fx,
        &format!(
            "[[commands]]\nprogram = \"touch\"\nreason = \"the test's grant\"\nallow_write = [\"{}\"]\n",
            fx.outside.display()
        ),
    );
    let audit = fx.out_file("audit.jsonl");
    let report = fx.out_file("report.json");
    let (a, r) = (audit.display().to_string(), report.display().to_string());
    let t = target.display().to_string();
    fx.sandbox_argv(
        &["--policy", &p, "--audit", &a, "--report", &r],
        &["touch", &t],
    )
    .run()
    .assert_success()
    .assert_stderr_contains("gets the grants of [[commands]] entry 0");
    assert!(target.exists());
    let events = read_jsonl(&audit);
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "command_rule" && e["index"] == 0),
        "{events:?}"
    );
    assert_eq!(
        read_json(&report)["command_rule"]["rule"]["program"],
        "touch"
    );
    std::fs::remove_file(&target).expect("remove");
    // The same program in a plain command string matches too.
    fx.sandbox(&["--policy", &p], &format!("touch {t}"))
        .run()
        .assert_success();
    assert!(target.exists());
    std::fs::remove_file(&target).expect("remove");
    // Controls: not a plain command (a list), another program, or no entry: refused.
    fx.sandbox(&["--policy", &p], &format!("touch {t}; true"))
        .run();
    assert!(!target.exists(), "a list took the grant");
    fx.sandbox(&["--policy", &p], &format!("cp /dev/null {t}"))
        .run();
    assert!(!target.exists(), "another program took the grant");
    fx.sandbox_argv(&[], &["touch", &t]).run().assert_failure();
    assert!(!target.exists());
}

#[test]
fn an_excluded_program_runs_outside_the_sandbox_and_says_so() {
    let fx = Fixture::new();
    let p = policy(
        &fx,
        "[[commands]]\nprogram = \"cat\"\nexcluded = true\nreason = \"the test's exclusion\"\n",
    );
    let audit = fx.out_file("audit.jsonl");
    let report = fx.out_file("report.json");
    let (a, r) = (audit.display().to_string(), report.display().to_string());
    let key = fx.home.join(".ssh/id_rsa").display().to_string();
    fx.sandbox_argv(
        &["--policy", &p, "--audit", &a, "--report", &r],
        &["cat", &key],
    )
    .run()
    .assert_success()
    .assert_stdout_contains(&fx.marker("ssh"))
    .assert_stderr_contains("OUTSIDE the sandbox");
    let events = read_jsonl(&audit);
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "command_rule" && e["rule"]["excluded"] == true),
        "{events:?}"
    );
    assert_eq!(read_json(&report)["sandboxed"], false);
    // Control: without the entry the key stays hidden.
    let run = fx.sandbox_argv(&[], &["cat", &key]).run();
    run.assert_lacks(&fx.marker("ssh"));
}

#[test]
fn entries_the_sandbox_could_have_written_or_replaced_are_refused() {
    let fx = Fixture::new();
    // A program in the workspace: the sandbox could have replaced it.
    let tool = fx.ws.join("tool.sh");
    write_file(&tool, "#!/bin/sh\necho ran-tool\n", 0o755);
    let p = policy(
        &fx,
        &format!(
            "[[commands]]\nprogram = \"{}\"\nexcluded = true\n",
            tool.display()
        ),
    );
    let t = tool.display().to_string();
    fx.sandbox_argv(&["--policy", &p], &[&t])
        .run()
        .assert_code(125)
        .assert_stderr_contains("lies in the writable root")
        .assert_lacks("ran-tool");
    // Control: the same script, no entry: it runs (in the sandbox).
    fx.sandbox_argv(&[], &[&t])
        .run()
        .assert_success()
        .assert_stdout_contains("ran-tool");
    // An entry in a policy file inside the workspace is refused (the sandbox could write it).
    let inside = fx.ws.join("stockade.toml");
    write_file(
        &inside,
        "[[commands]]\nprogram = \"cat\"\nexcluded = true\n",
        0o644,
    );
    let key = fx.home.join(".ssh/id_rsa").display().to_string();
    let run = fx
        .sandbox_argv(&["--policy", &inside.display().to_string()], &["cat", &key])
        .run();
    run.assert_code(125).assert_lacks(&fx.marker("ssh"));
    // Bad entries are refused when the file is read.
    let bad = policy(
        &fx,
        "[[commands]]\nprogram = \"bin/cat\"\nexcluded = true\n",
    );
    fx.sandbox_argv(&["--policy", &bad], &["true"])
        .run()
        .assert_code(125)
        .assert_stderr_contains("commands[0].program");
}
