//! Policy files in the JSON settings users already have: srt's (`~/.srt-settings.json`) and
//! Claude Code's `settings.json` (its `sandbox` section and `Read`/`Edit`/`WebFetch` rules).
//! `policy check` accepts them, `--policy` enforces them (a `denyRead` entry hides a file
//! that the caller, and stockade's default policy, can read; an `allowedDomains` list lets
//! the proxy refuse every other name), and strict reading refuses what a plain JSON parser
//! would quietly accept: a repeated key (the parser keeps the last one, a known false
//! success) and keys stockade cannot honour, each error naming the key path.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::path::PathBuf;

use attacks::{python3, sh_quote, write_file, Fixture, Run};

/// Writes a settings file outside the workspace (a policy file inside it would need
/// `stockade trust`).
fn settings(fx: &Fixture, name: &str, text: &str) -> PathBuf {
    let path = fx.root.join(name);
    write_file(&path, text, 0o644);
    path
}

fn path_str(path: &std::path::Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// `stockade: error[E_POLICY_INVALID]: ...` naming `needle`, then a `  hint:` line; exit 125.
fn assert_policy_error(run: &Run, needle: &str) {
    run.assert_code(125);
    let lines: Vec<&str> = run.stderr.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("stockade: error[E_POLICY_INVALID]: "))
        .unwrap_or_else(|| panic!("no E_POLICY_INVALID line\n{}", run.describe()));
    assert!(
        lines[at].contains(needle),
        "the error does not name {needle:?}\n{}",
        run.describe()
    );
    assert!(
        lines[at + 1..].iter().any(|l| l.starts_with("  hint: ")),
        "no hint line\n{}",
        run.describe()
    );
}

/// srt settings allowing only `allowed.test`, hiding `~/notes.txt` (which stockade's
/// default policy lets a command read).
const SRT: &str = r#"{
  "network": {
    "allowedDomains": ["allowed.test"],
    "deniedDomains": [],
    "allowUnixSockets": [],
    "allowLocalBinding": false
  },
  "filesystem": {
    "denyRead": ["~/notes.txt"],
    "allowWrite": [],
    "denyWrite": []
  },
  "ignoreViolations": {},
  "enableWeakerNestedSandbox": false
}"#;

#[test]
fn policy_check_accepts_srt_and_claude_code_settings() {
    let fx = Fixture::new();
    let srt = settings(&fx, "srt-settings.json", SRT);
    fx.stockade(["policy".as_ref(), "check".as_ref(), srt.as_os_str()])
        .run()
        .assert_success();
    let claude = settings(
        &fx,
        "settings.json",
        r#"{"model": "opus", "permissions": {"allow": ["Bash(ls)", "WebFetch(domain:docs.rs)"],
            "deny": ["Read(~/.aws/**)"]}, "sandbox": {"enabled": true}}"#,
    );
    fx.stockade(["policy".as_ref(), "check".as_ref(), claude.as_os_str()])
        .run()
        .assert_success();
}

#[test]
fn duplicate_key_that_a_plain_parser_accepts_is_refused_naming_the_key() {
    let fx = Fixture::new();
    let text = "{\"network\":{\"allowedDomains\":[],\"allowedDomains\":[\"x.com\"]}}";
    let file = settings(&fx, "dup.json", text);
    // Control: a plain JSON parser takes the file, silently keeping the last list.
    if let Some(py) = python3("a plain JSON parser") {
        let script = format!(
            "{} -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"network\"][\"allowedDomains\"])' {}",
            sh_quote(&py),
            sh_quote(&file)
        );
        fx.host(&script)
            .run()
            .assert_success()
            .assert_stdout_contains("['x.com']");
    }
    let run = fx
        .stockade(["policy".as_ref(), "check".as_ref(), file.as_os_str()])
        .run();
    assert_policy_error(&run, "duplicate key `network.allowedDomains`");
    run.assert_stderr_contains("line 1, column 33");
    // And a run with it never starts.
    let run = fx
        .sandbox(&["--policy", path_str(&file)], "echo ran > ran.txt")
        .run();
    assert_policy_error(&run, "duplicate key `network.allowedDomains`");
    assert!(!fx.ws.join("ran.txt").exists(), "the command ran anyway");
    // Without the repeat the same file is fine.
    let ok = settings(
        &fx,
        "nodup.json",
        "{\"network\":{\"allowedDomains\":[\"x.com\"]}}",
    );
    fx.stockade(["policy".as_ref(), "check".as_ref(), ok.as_os_str()])
        .run()
        .assert_success();
}

#[test]
fn keys_without_equivalent_and_unknown_keys_are_refused_naming_the_key() {
    let fx = Fixture::new();
    let socket = settings(
        &fx,
        "socket.json",
        r#"{"network": {"allowedDomains": [], "allowUnixSockets": ["/var/run/docker.sock"]}}"#,
    );
    let run = fx
        .stockade(["policy".as_ref(), "check".as_ref(), socket.as_os_str()])
        .run();
    assert_policy_error(
        &run,
        "`network.allowUnixSockets` has no stockade equivalent",
    );
    let typo = settings(
        &fx,
        "typo.json",
        "{\"network\": {\"allowedDomains\": []},\n \"filesystem\": {\"denyReads\": [\"~/x\"]}}",
    );
    let run = fx
        .stockade(["policy".as_ref(), "check".as_ref(), typo.as_os_str()])
        .run();
    assert_policy_error(
        &run,
        "line 2, column 17: unknown key `filesystem.denyReads`",
    );
    // Control: the same keys with values stockade honours are accepted.
    let fine = settings(
        &fx,
        "fine.json",
        r#"{"network": {"allowedDomains": [], "allowUnixSockets": []}, "filesystem": {"denyRead": ["~/x"]}}"#,
    );
    fx.stockade(["policy".as_ref(), "check".as_ref(), fine.as_os_str()])
        .run()
        .assert_success();
}

#[test]
fn policy_show_maps_srt_settings_onto_the_policy() {
    let fx = Fixture::new();
    let file = settings(&fx, "srt-settings.json", SRT);
    let run = fx
        .stockade([
            "policy",
            "show",
            "--json",
            "--workspace",
            path_str(&fx.ws),
            "--policy",
            path_str(&file),
        ])
        .run();
    run.assert_success();
    let shown: serde_json::Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e})\n{}", run.describe()));
    let policy = &shown["policy"];
    assert_eq!(policy["profile"], "read-only", "{policy:#}");
    assert_eq!(policy["network"]["mode"], "proxy", "{policy:#}");
    assert_eq!(
        policy["network"]["allow_domains"],
        serde_json::json!(["allowed.test"]),
        "{policy:#}"
    );
    let deny_read = policy["filesystem"]["deny_read"].as_array().unwrap();
    assert!(deny_read.iter().any(|p| p == "~/notes.txt"), "{policy:#}");
}

#[test]
fn srt_deny_read_hides_a_file_the_default_policy_shows() {
    let fx = Fixture::new();
    let file = settings(&fx, "srt-settings.json", SRT);
    let marker = fx.marker("notes");
    let script = "cat \"$HOME/notes.txt\"";
    // Controls: the caller reads it, and so does a command under stockade's default policy.
    fx.control(script).outcome().assert_shows(&marker);
    fx.attack(&[], script).outcome().assert_shows(&marker);
    // The srt settings hide it.
    fx.attack(&["--policy", path_str(&file)], script)
        .outcome()
        .assert_blocked(&marker);
}

#[test]
fn claude_code_read_deny_rule_hides_a_file() {
    let fx = Fixture::new();
    let file = settings(
        &fx,
        "settings.json",
        r#"{"permissions": {"deny": ["Read(~/notes.txt)", "Bash(curl:*)"]},
            "sandbox": {"enabled": true, "network": {"allowedDomains": []}}}"#,
    );
    let marker = fx.marker("notes");
    let script = "cat \"$HOME/notes.txt\"";
    fx.attack(&[], script).outcome().assert_shows(&marker);
    fx.attack(&["--policy", path_str(&file)], script)
        .outcome()
        .assert_blocked(&marker);
}

/// `curl -i` of `url` through the run's proxy (stockade sets `HTTP_PROXY`).
fn curl_i(url: &str) -> String {
    format!("curl -sS -m 5 -i {}", sh_quote(url))
}

/// The status line and the `x-stockade-denied` header of a `curl -i` response.
fn refusal(run: &Run) -> (Option<String>, Option<String>) {
    let text = run.all_output();
    let status = text
        .lines()
        .find(|l| l.starts_with("HTTP/"))
        .and_then(|l| l.split_whitespace().nth(1))
        .map(str::to_owned);
    let denied = text.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("x-stockade-denied")
            .then(|| value.trim().to_owned())
    });
    (status, denied)
}

#[test]
fn srt_allowed_domains_make_the_proxy_refuse_other_names() {
    let fx = Fixture::new();
    let file = settings(&fx, "srt-settings.json", SRT);
    let policy = ["--policy", path_str(&file)];
    let out = fx.attack(&policy, &curl_i("http://other.test/")).outcome();
    out.ran();
    let (status, denied) = refusal(&out.run);
    assert_eq!(status.as_deref(), Some("403"), "{}", out.run.describe());
    let denied = denied.unwrap_or_default();
    assert!(
        denied.contains("no matching allow rule"),
        "the refusal should say no rule allows it: {denied:?}\n{}",
        out.run.describe()
    );
    // Control: the name the settings allow is not refused by rule (the proxy goes on to
    // resolve it, which fails here: `allowed.test` does not exist).
    let out = fx
        .attack(&policy, &curl_i("http://allowed.test/"))
        .outcome();
    out.ran();
    let (status, denied) = refusal(&out.run);
    assert!(
        status.is_some(),
        "no answer from the proxy\n{}",
        out.run.describe()
    );
    assert!(
        !denied
            .unwrap_or_default()
            .contains("no matching allow rule"),
        "the allowed name was refused by rule\n{}",
        out.run.describe()
    );
}
