//! The policy commands and the records of a run: `policy check` (line numbers for unknown
//! and duplicate keys), `policy show`, refusing a bad policy with exit 125 and the documented
//! error format (plain and `--json`), policy files being enforced, and the `--report` and
//! `--audit` files.

use std::path::PathBuf;

use attacks::{json_any_string, json_str, read_json, read_jsonl, write_file, Fixture, Run};

fn policy(fx: &Fixture, name: &str, text: &str) -> PathBuf {
    let path = fx.root.join(name);
    write_file(&path, text, 0o644);
    path
}

/// `stockade: error[CODE]: message` then at least one `  hint: ...` line.
fn assert_error_format(run: &Run, code: &str) {
    run.assert_code(125);
    let lines: Vec<&str> = run.stderr.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&format!("stockade: error[{code}]: ")))
        .unwrap_or_else(|| panic!("no `stockade: error[{code}]: ` line\n{}", run.describe()));
    assert!(
        lines[at + 1..].iter().any(|l| l.starts_with("  hint: ")),
        "no `  hint: ` line after the error\n{}",
        run.describe()
    );
}

const VALID: &str = r#"profile = "workspace-write"
[filesystem]
deny_read = ["~/notes.txt"]
[env]
set = { ATTACKS_FROM_POLICY = "from-policy-file" }
"#;

#[test]
fn policy_check_accepts_a_valid_file() {
    let fx = Fixture::new();
    let file = policy(&fx, "good.toml", VALID);
    fx.stockade(["policy".as_ref(), "check".as_ref(), file.as_os_str()])
        .run()
        .assert_success();
}

#[test]
fn policy_check_rejects_an_unknown_key_with_its_line() {
    let fx = Fixture::new();
    let file = policy(
        &fx,
        "unknown.toml",
        "profile = \"read-only\"\n\n[filesystem]\nbogus_key = 1\n",
    );
    let run = fx
        .stockade(["policy".as_ref(), "check".as_ref(), file.as_os_str()])
        .run();
    assert_error_format(&run, "E_POLICY_INVALID");
    run.assert_stderr_contains("line 4")
        .assert_stderr_contains("bogus_key");
}

#[test]
fn policy_check_rejects_a_duplicate_key_with_its_line() {
    let fx = Fixture::new();
    let file = policy(
        &fx,
        "dup.toml",
        "[env]\nallow = [\"A\"]\n# comment\nallow = [\"B\"]\n",
    );
    let run = fx
        .stockade(["policy".as_ref(), "check".as_ref(), file.as_os_str()])
        .run();
    assert_error_format(&run, "E_POLICY_INVALID");
    run.assert_stderr_contains("line 4")
        .assert_stderr_contains("duplicate");
}

#[test]
fn run_with_an_invalid_policy_is_refused_before_running() {
    let fx = Fixture::new();
    let file = policy(&fx, "bad.toml", "[filesystem]\nallow_everything = true\n");
    let file = file.to_str().expect("utf-8 path");
    let run = fx.sandbox(&["--policy", file], "echo ran > ran.txt").run();
    assert_error_format(&run, "E_POLICY_INVALID");
    run.assert_stderr_contains("line 2");
    assert!(!fx.ws.join("ran.txt").exists(), "the command ran anyway");
    // An unknown profile on the command line too.
    let run = fx
        .sandbox(&["--profile", "yolo"], "echo ran > ran.txt")
        .run();
    assert_error_format(&run, "E_POLICY_INVALID");
    assert!(!fx.ws.join("ran.txt").exists(), "the command ran anyway");
}

#[test]
fn json_errors_are_one_object_on_stderr() {
    let fx = Fixture::new();
    let file = policy(&fx, "bad.toml", "nope = 1\n");
    let file = file.to_str().expect("utf-8 path");
    let run = fx.sandbox(&["--json", "--policy", file], "true").run();
    run.assert_code(125);
    assert!(run.stdout.is_empty(), "{}", run.describe());
    let err: serde_json::Value = serde_json::from_str(run.stderr.trim())
        .unwrap_or_else(|e| panic!("stderr is not one JSON object ({e})\n{}", run.describe()));
    assert!(err.is_object(), "{err}");
    assert!(
        json_any_string(&err, &|s| s == "E_POLICY_INVALID"),
        "the JSON error does not carry the code: {err:#}"
    );
}

#[test]
fn policy_show_prints_the_resolved_policy_and_plan() {
    let fx = Fixture::new();
    let ws = fx.ws.to_str().expect("utf-8 path");
    let run = fx
        .stockade(["policy", "show", "--json", "--workspace", ws])
        .run();
    run.assert_success();
    let shown: serde_json::Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("policy show --json is not JSON ({e})\n{}", run.describe()));
    // The document keeps its shape (scripts and benches/startup.sh read it).
    let mut keys: Vec<&str> = shown
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "plan",
            "policy",
            "policy_digest",
            "policy_files",
            "policy_files_not_used",
            "protected_paths"
        ],
        "{shown:#}"
    );
    assert!(shown["plan"]["writable_roots"].is_array(), "{shown:#}");
    for needle in ["workspace-write", ws, "~/.ssh"] {
        assert!(
            json_any_string(&shown, &|s| s.contains(needle)),
            "policy show does not mention {needle:?}:\n{shown:#}"
        );
    }
    // Run options change what is shown.
    let extra = format!("{}/extra-denied", fx.home.display());
    let run = fx
        .stockade([
            "policy",
            "show",
            "--json",
            "--workspace",
            ws,
            "--profile",
            "read-only",
            "--deny-read",
            &extra,
        ])
        .run();
    run.assert_success();
    let shown: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("JSON");
    assert!(json_any_string(&shown, &|s| s == "read-only"), "{shown:#}");
    assert!(
        json_any_string(&shown, &|s| s.contains("extra-denied")),
        "{shown:#}"
    );
}

/// Without `--json`, `policy show` is a page for a person, not JSON: the profile, the
/// workspace, the masks counted with examples, the network mode and its domains, the limits
/// and the environment, each part tagged with where it came from (the profile, the policy
/// file or a flag).
#[test]
fn policy_show_without_json_is_a_summary_that_says_where_each_part_came_from() {
    let fx = Fixture::new();
    let ws = fx.ws.to_str().expect("utf-8 path");
    let file = policy(
        &fx,
        "summary.toml",
        "[network]\nallow_domains = [\"from-file.example\"]\n[limits]\nmemory = \"2G\"\n",
    );
    let run = fx
        .stockade([
            "policy",
            "show",
            "--workspace",
            ws,
            "--policy",
            file.to_str().expect("utf-8 path"),
            "--net",
            "proxy",
            "--allow-domain",
            "From-Flag.example",
            "--deny-read",
            "~/summary-denied",
            "--env",
            "SUMMARY_SET=secret-value",
            "--timeout",
            "42",
        ])
        .run();
    run.assert_success();
    let text = &run.stdout;
    assert!(
        serde_json::from_str::<serde_json::Value>(text.trim()).is_err(),
        "policy show without --json printed JSON:\n{text}"
    );
    for needle in [
        "profile      workspace-write (the default)",
        &format!("workspace    {ws}"),
        "masked",
        "~/.ssh",
        "~/summary-denied [flag]",
        "network      proxy [flag]",
        "from-file.example [policy file]",
        "from-flag.example [flag]",
        "timeout    42 s [flag]",
        "memory     2 GiB",
        "[policy file]",
        "SUMMARY_SET [flag]",
        "credentials  none",
    ] {
        assert!(
            text.contains(needle),
            "the summary lacks {needle:?}:\n{text}"
        );
    }
    // A summary shows names of variables, never their values.
    run.assert_lacks("secret-value");
    assert!(
        text.lines().count() < 60,
        "the summary should fit a page:\n{text}"
    );
    // What an agent preset adds is tagged with its name.
    attacks::mkdir(&fx.home.join(".claude"));
    let run = fx
        .stockade([
            "policy",
            "show",
            "--workspace",
            ws,
            "--agent",
            "claude-code",
        ])
        .run();
    run.assert_success();
    for needle in [
        "preset       claude-code: ",
        "timeout    no limit [preset claude-code]",
        "preset claude-code (~/.local/state/stockade/claude-code/settings.json",
        "anthropic        from env:ANTHROPIC_API_KEY to https://api.anthropic.com [preset claude-code]",
    ] {
        assert!(
            run.stdout.contains(needle),
            "the summary lacks {needle:?}:\n{}",
            run.stdout
        );
    }
}

#[test]
fn policy_file_rules_are_enforced() {
    let fx = Fixture::new();
    let file = policy(&fx, "good.toml", VALID);
    let file = file.to_str().expect("utf-8 path");
    let script = "echo \"set=[$ATTACKS_FROM_POLICY]\"; cat \"$HOME/notes.txt\"";
    let with = fx.attack(&["--policy", file], script).outcome();
    with.assert_failed()
        .assert_output_contains("set=[from-policy-file]")
        .assert_lacks(&fx.marker("notes"));
    // Control: without the policy file the note is readable and the variable unset.
    fx.attack(&[], script)
        .outcome()
        .assert_shows(&fx.marker("notes"))
        .assert_output_contains("set=[]");
}

#[test]
fn report_and_audit_record_the_run() {
    let fx = Fixture::new();
    let report = fx.out_file("report.json");
    let audit = fx.out_file("audit.jsonl");
    let run = fx
        .sandbox(
            &[
                "--report",
                report.to_str().expect("utf-8"),
                "--audit",
                audit.to_str().expect("utf-8"),
            ],
            "echo hi; exit 3",
        )
        .run();
    run.assert_code(3);
    let json = read_json(&report);
    assert!(
        json_str(&json, "policy_digest").len() > 8,
        "no policy_digest:\n{json:#}"
    );
    assert!(
        !json_str(&json, "backend").is_empty(),
        "no backend:\n{json:#}"
    );
    assert!(json.get("plan").is_some(), "no plan:\n{json:#}");
    assert_eq!(
        json.get("exit_code").and_then(|v| v.as_i64()),
        Some(3),
        "{json:#}"
    );
    assert!(
        json.get("duration_ms")
            .is_some_and(|v| v.is_u64() || v.is_f64()),
        "no numeric duration_ms:\n{json:#}"
    );
    assert!(
        json.get("violations").is_some_and(|v| v.is_array()),
        "{json:#}"
    );
    assert!(
        json.get("skipped").is_some_and(|v| v.is_array()),
        "{json:#}"
    );
    let events = read_jsonl(&audit);
    assert!(!events.is_empty(), "the audit log is empty");
    for e in &events {
        assert!(
            !json_str(e, "event").is_empty(),
            "event without `event`: {e}"
        );
    }
    // A second run appends.
    fx.sandbox(&["--audit", audit.to_str().expect("utf-8")], "true")
        .run()
        .assert_success();
    assert!(
        read_jsonl(&audit).len() > events.len(),
        "--audit did not append"
    );
}

#[test]
fn refusals_are_audited_with_code_and_kind() {
    let fx = Fixture::new();
    let file = policy(&fx, "bad.toml", "nope = 1\n");
    let audit = fx.out_file("audit.jsonl");
    let run = fx
        .sandbox(
            &[
                "--policy",
                file.to_str().expect("utf-8"),
                "--audit",
                audit.to_str().expect("utf-8"),
            ],
            "true",
        )
        .run();
    run.assert_code(125);
    let events = read_jsonl(&audit);
    assert!(
        events
            .iter()
            .any(|e| json_str(e, "code") == "E_POLICY_INVALID"
                && !json_str(e, "kind").is_empty()
                && !json_str(e, "event").is_empty()),
        "no audited refusal with code E_POLICY_INVALID and a kind:\n{events:#?}"
    );
}
