//! CPU limit: `--cpu` caps the CPU time of the whole run through its cgroup; a caller without
//! one is refused (no rlimit gives a CPU share). Alone in its test binary so that the
//! measurement does not share the machine's two cores with other tests of its pass; another
//! pass may run beside it (scripts/test), so the limit is a tenth of a core and the
//! control asks for a fifth of one: a loaded machine still tells them apart.

use attacks::{read_json, Fixture};

/// The mechanism the report says enforced `limit`.
fn mechanism(report: &serde_json::Value, limit: &str) -> String {
    report["limits"][limit]["mechanism"]
        .as_str()
        .unwrap_or_else(|| panic!("no limits.{limit}.mechanism in the report:\n{report:#}"))
        .to_owned()
}

/// `--cpu 0.1`: a 3-second busy loop gets at most a tenth of a core (0.3 s of CPU, under
/// 0.5 s with the last period's quota; under gVisor a tenth of the whole run, whose Sentry
/// starts under the limit too) under a cgroup; control: at least 0.6 of the three
/// seconds without the limit, more than the limit can give (a fifth of a core, so another
/// pass beside this one (scripts/test) still leaves it that much; tried three times, as a
/// busier machine can starve one try). (Its own test binary, so no other test of its pass
/// shares the cores while it measures.)
/// Without a cgroup the run is refused, naming the fix.
#[test]
fn cpu_limit_throttles_a_busy_loop_or_is_refused() {
    let Some(py) = attacks::python3("cpu limit") else {
        return;
    };
    let fx = Fixture::new();
    let script = format!(
        "{} -c 'import time\nt = time.time()\nwhile time.time() - t < 3: pass'",
        attacks::sh_quote(&py)
    );
    let records = fx.records();
    let mut opts = records.opts();
    opts.extend(["--cpu", "0.1"]);
    let run = fx.sandbox(&opts, &script).run();
    if run.code() == 125 {
        run.assert_stderr_contains("E_PROTECTION_UNAVAILABLE");
        if attacks::backend() != "native" {
            // runsc --rootless has no cgroup at all, nor has rootless Podman on cgroup v1.
            run.assert_stderr_contains("CPU limit");
        } else {
            run.assert_stderr_contains("--cpu");
            run.assert_stderr_contains("Delegate=yes");
        }
        assert!(
            !attacks::is_root(),
            "root has cgroup v1 here: --cpu must work"
        );
        return;
    }
    run.assert_code(0);
    let report = read_json(&records.report);
    // `cgroup_v1`, `cgroup_v2`, or gVisor's `gvisor_cgroup`.
    assert!(mechanism(&report, "cpu_millicores").contains("cgroup"));
    let limited = report["usage"]["cpu_usec"].as_u64().unwrap_or(0);
    // The whole run is limited: under gVisor that includes the Sentry's start (seconds of
    // wall time at a tenth of a core), so the bound is a tenth of the run's duration, with
    // the last period's quota and a margin.
    let duration_ms = report["duration_ms"].as_u64().unwrap_or(0);
    let bound = (duration_ms * 100 * 3 / 2).max(500_000);
    assert!(
        (50_000..bound).contains(&limited),
        "{limited} µs of CPU in {duration_ms} ms under --cpu 0.1"
    );
    assert!(report["usage"]["cpu_throttled"].as_u64().unwrap_or(0) > 0);
    let mut tries = Vec::new();
    for _ in 0..3 {
        let records = fx.records();
        let run = fx.sandbox(&records.opts(), &script).run();
        run.assert_code(0);
        let cpu = read_json(&records.report)["usage"]["cpu_usec"]
            .as_u64()
            .unwrap_or(0);
        tries.push(cpu);
        if cpu >= 600_000 {
            return;
        }
    }
    panic!("control: {tries:?} µs of CPU in 3 s without a limit, {limited} with it");
}
