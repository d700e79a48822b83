//! `stockade doctor` on the host (every protection works here) and inside a sandbox (user
//! namespaces are unavailable there, so it must fail and say how to fix it), and a nested
//! `stockade run`, which must be refused with E_PROTECTION_UNAVAILABLE rather than run with
//! fewer protections.

use attacks::{json_str, sh_quote, Fixture};

fn parse(stdout: &str, what: &str) -> serde_json::Value {
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{what}: stdout is not one JSON object ({e}):\n{stdout}"))
}

fn checks(report: &serde_json::Value) -> &Vec<serde_json::Value> {
    report
        .get("checks")
        .and_then(|c| c.as_array())
        .unwrap_or_else(|| panic!("no `checks` array:\n{report:#}"))
}

fn mentions_userns(check: &serde_json::Value) -> bool {
    let text = format!("{} {}", json_str(check, "name"), json_str(check, "detail")).to_lowercase();
    text.contains("user namespace") || text.contains("userns") || text.contains("user_namespace")
}

#[test]
fn doctor_passes_on_this_machine() {
    let fx = Fixture::new();
    let run = fx.stockade(["doctor"]).run();
    run.assert_success();
    let run = fx.stockade(["doctor", "--json"]).run();
    run.assert_success();
    let report = parse(&run.stdout, "doctor --json");
    assert_eq!(
        report.get("ok"),
        Some(&serde_json::Value::Bool(true)),
        "{report:#}"
    );
    let checks = checks(&report);
    assert!(!checks.is_empty(), "doctor ran no check:\n{report:#}");
    for check in checks {
        for key in ["name", "ok", "detail", "fix"] {
            assert!(check.get(key).is_some(), "check without `{key}`: {check}");
        }
        assert!(
            !json_str(check, "name").is_empty(),
            "unnamed check: {check}"
        );
        assert_eq!(
            check.get("ok"),
            Some(&serde_json::Value::Bool(true)),
            "{check}"
        );
    }
    assert!(
        checks.iter().any(mentions_userns),
        "no check is about user namespaces:\n{report:#}"
    );
}

#[test]
fn doctor_inside_a_sandbox_fails_and_names_user_namespaces() {
    let fx = Fixture::new();
    let bin = fx.stockade_inside();
    let bin = bin.to_str().expect("utf-8 path");
    let run = fx.sandbox_argv(&[], &[bin, "doctor", "--json"]).run();
    assert_ne!(
        run.code(),
        0,
        "doctor inside a sandbox claims every protection works\n{}",
        run.describe()
    );
    let report = parse(&run.stdout, "doctor --json inside a sandbox");
    assert_eq!(
        report.get("ok"),
        Some(&serde_json::Value::Bool(false)),
        "{report:#}"
    );
    let failing: Vec<_> = checks(&report)
        .iter()
        .filter(|c| c.get("ok") == Some(&serde_json::Value::Bool(false)))
        .collect();
    let userns = failing
        .iter()
        .find(|c| mentions_userns(c))
        .unwrap_or_else(|| panic!("no failing check names user namespaces:\n{report:#}"));
    assert!(
        !json_str(userns, "fix").trim().is_empty(),
        "the user-namespace check has no fix: {userns}"
    );
    // The human-readable form fails too and names the problem.
    let run = fx.sandbox_argv(&[], &[bin, "doctor"]).run();
    run.assert_failure();
    assert!(
        run.all_output().to_lowercase().contains("user namespace"),
        "{}",
        run.describe()
    );
}

#[test]
fn nested_run_is_refused_with_protection_unavailable() {
    let fx = Fixture::new();
    let bin = sh_quote(fx.stockade_inside());
    let marker = fx.marker("nested");
    let script = format!("{bin} run -- echo {marker}; echo \"inner=$?\"");
    let run = fx.sandbox(&[], &script).run();
    run.assert_success()
        .assert_stdout_contains("inner=125")
        .assert_stderr_contains("stockade: error[E_PROTECTION_UNAVAILABLE]");
    assert!(
        !run.stdout.lines().any(|l| l == marker),
        "the nested run executed its command\n{}",
        run.describe()
    );
    // With --json the inner error is one JSON object naming the code.
    let script =
        format!("{bin} run --json -- true 2>/tmp/err.json; echo \"inner=$?\"; cat /tmp/err.json");
    let run = fx.sandbox(&[], &script).run();
    run.assert_success().assert_stdout_contains("inner=125\n");
    let json = run
        .stdout
        .split_once('\n')
        .map_or("", |(_, rest)| rest)
        .trim();
    let err: serde_json::Value = serde_json::from_str(json)
        .unwrap_or_else(|e| panic!("--json error is not JSON ({e})\n{}", run.describe()));
    assert!(
        attacks::json_any_string(&err, &|s| s == "E_PROTECTION_UNAVAILABLE"),
        "{err:#}"
    );
    // The refusal is audited with its code and kind.
    let script = format!(
        "{bin} run --audit /tmp/audit.jsonl -- true; echo \"inner=$?\"; cat /tmp/audit.jsonl"
    );
    let run = fx.sandbox(&[], &script).run();
    run.assert_success().assert_stdout_contains("inner=125\n");
    let audited = run.stdout.lines().skip(1).any(|line| {
        serde_json::from_str::<serde_json::Value>(line).is_ok_and(|e| {
            json_str(&e, "code") == "E_PROTECTION_UNAVAILABLE"
                && !json_str(&e, "kind").is_empty()
                && !json_str(&e, "event").is_empty()
        })
    });
    assert!(
        audited,
        "no audited E_PROTECTION_UNAVAILABLE refusal\n{}",
        run.describe()
    );
    // Control: the same command outside a sandbox runs.
    fx.host(&format!("{bin} run -- echo {marker}"))
        .run()
        .assert_success()
        .assert_stdout_contains(&marker);
}

/// A host setting that denies user namespaces is named, with its fix, by `doctor` and by a
/// refused run (not a bare `EPERM`). `user.max_user_namespaces` is per user namespace, so a
/// namespace of the test's own stands in for such a host; the same reader takes Ubuntu's
/// AppArmor restriction and Debian's switch (unit tests on a fake host in `native::userns`).
#[test]
fn a_host_setting_that_denies_user_namespaces_is_named_with_its_fix() {
    let fx = Fixture::new();
    let bin = sh_quote(attacks::stockade_bin());
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces || exit 99
        {bin} run -- true; echo run-rc=$?
        {bin} doctor; echo doctor-rc=$?"
    );
    let run = attacks::Cmd::new("/usr/bin/unshare", &fx.ws)
        .args(["-Ur", "/bin/sh", "-c", &script])
        .run();
    let out = run.all_output();
    assert!(out.contains("run-rc=125"), "{}\n{out}", run.describe());
    assert!(out.contains("doctor-rc=1"), "{out}");
    for want in [
        "error[E_PROTECTION_UNAVAILABLE]: a user namespace is not available",
        "user.max_user_namespaces = 0: this host allows no user namespaces at all",
        "[FAIL] user-namespace policy",
        "sysctl -w user.max_user_namespaces=15000",
    ] {
        assert!(out.contains(want), "missing {want:?}:\n{out}");
    }
    // Control: the same namespace without the setting has no such finding.
    let control = attacks::Cmd::new("/usr/bin/unshare", &fx.ws)
        .args(["-Ur", "/bin/sh", "-c", &format!("{bin} doctor")])
        .run();
    assert!(
        control
            .all_output()
            .contains("[ok  ] user-namespace policy"),
        "{}",
        control.all_output()
    );
}
