//! `stockade doctor` on the host (every protection works here) and inside a sandbox (user
//! namespaces are unavailable there, so it must fail and say how to fix it), and a nested
//! `stockade run`, which must be refused with E_PROTECTION_UNAVAILABLE rather than run with
//! fewer protections; and a run under a seccomp filter that refuses `openat2` (an older
//! container runtime's profile), which must work with every protection.

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

/// `python3 NO_OPENAT2 ERRNO PROGRAM ARGS...` runs PROGRAM under a seccomp filter that answers
/// `openat2` (x86_64: 437) with ERRNO, as a container runtime's older profile does (`EPERM`,
/// the default answer, or `ENOSYS`), or a sandbox stockade runs inside; every other call is
/// allowed. `no_new_privs` first, as an unprivileged caller's filter needs.
const NO_OPENAT2: &str = r#"import ctypes, errno, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
err = getattr(errno, sys.argv[1])
def stmt(code, k): return struct.pack("HBBI", code, 0, 0, k)
def jump(code, k, jt, jf): return struct.pack("HBBI", code, jt, jf, k)
LD_W_ABS, JEQ_K, RET_K, ALLOW, ERRNO = 0x20, 0x15, 0x06, 0x7fff0000, 0x00050000
prog = b"".join([
    stmt(LD_W_ABS, 4), jump(JEQ_K, 0xC000003E, 1, 0), stmt(RET_K, ALLOW),
    stmt(LD_W_ABS, 0), jump(JEQ_K, 437, 0, 1), stmt(RET_K, ERRNO | err), stmt(RET_K, ALLOW),
])
buf = ctypes.create_string_buffer(prog, len(prog))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fp = Fprog(len(prog) // 8, ctypes.addressof(buf))
if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fp), 0, 0) != 0:
    sys.exit("seccomp: " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[2], sys.argv[2:])
"#;

/// Prints how `openat2(AT_FDCWD, "/", O_PATH, RESOLVE_NO_SYMLINKS)` answers: `openat2: ok`
/// or `openat2: <strerror>`.
const OPENAT2_PROBE: &str = r#"import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
how = (ctypes.c_uint64 * 3)(0o10000000, 0, 4)
r = libc.syscall(437, -100, b"/", ctypes.byref(how), 24)
print("openat2:", "ok" if r >= 0 else os.strerror(ctypes.get_errno()))
"#;

/// The filter of [`NO_OPENAT2`] as a [`Cmd::under`] prefix, after checking that it bites:
/// under it `openat2` fails with each errno, without it the same call works (controls).
/// `None` (a skip line printed) without python3.
fn no_openat2(fx: &Fixture) -> Option<[String; 2]> {
    let python = attacks::python3("the seccomp filter refusing openat2 is a python script")?;
    let python = python.display().to_string();
    let filter = fx.script("no_openat2.py", NO_OPENAT2).display().to_string();
    let probe = fx.script("openat2_probe.py", OPENAT2_PROBE);
    attacks::Cmd::new(&python, &fx.ws)
        .arg(&probe)
        .run()
        .assert_success()
        .assert_stdout_contains("openat2: ok\n");
    for (errno, says) in [
        ("ENOSYS", "Function not implemented"),
        ("EPERM", "Operation not permitted"),
    ] {
        attacks::Cmd::new(&python, &fx.ws)
            .args([filter.as_str(), errno, python.as_str()])
            .arg(&probe)
            .run()
            .assert_success()
            .assert_stdout_contains(&format!("openat2: {says}\n"));
    }
    Some([python, filter])
}

/// Where `openat2` is refused around stockade (an older Docker or containerd seccomp profile
/// answers `EPERM` or `ENOSYS`; a sandbox stockade runs in answers `ENOSYS`), a run works and
/// keeps its protections: the sandbox's init and the supervisor make the same lookups
/// through no symbolic link component by component. Masked dotenv files stay unreadable, a
/// git hook cannot be made, the workspace is writable, a `.envrc` planted in a directory the
/// run closes is not left behind (the sweep's lookups work without `openat2` too), review mode
/// is refused naming `openat2` (its change sets need it), as is a workspace with approved
/// configuration (read through `openat2` only), and under both an exclusive creation (what
/// git's lock files use) and git init, add and commit work. Controls: the filter really refuses
/// `openat2` (`no_openat2`), and the same script on the host reads the secrets.
#[test]
fn a_run_where_openat2_is_refused_works_and_keeps_its_protections() {
    let fx = Fixture::new();
    let Some([python, filter]) = no_openat2(&fx) else {
        return;
    };
    let script = "cat .env app/.env.production; cat app/main.txt; \
                  echo changed > app/main.txt; \
                  printf '#!/bin/sh\\n' > .git/hooks/pre-commit; echo \"hook=$?\"";
    fx.control(script)
        .outcome()
        .assert_shows(&fx.marker("dotenv"))
        .assert_shows(&fx.marker("dotenvprod"));
    std::fs::remove_file(fx.ws.join(".git/hooks/pre-commit")).expect("remove the control's hook");
    attacks::write_file(&fx.ws.join("app/main.txt"), "main\n", 0o644);
    for errno in ["ENOSYS", "EPERM"] {
        let run = fx
            .attack(&[], script)
            .under(&[python.as_str(), filter.as_str(), errno])
            .run();
        run.assert_success()
            .assert_stdout_contains("main\n")
            .assert_lacks(&fx.marker("dotenv"))
            .assert_lacks(&fx.marker("dotenvprod"));
        assert!(
            !run.stdout.contains("hook=0"),
            "the hook was made under {errno}\n{}",
            run.describe()
        );
        assert_eq!(
            attacks::live_hooks(&fx.ws),
            Vec::<std::path::PathBuf>::new(),
            "{errno}"
        );
        assert_eq!(
            attacks::read_text(&fx.ws.join("app/main.txt")).as_deref(),
            Some("changed\n"),
            "the workspace was not writable under {errno}\n{}",
            run.describe()
        );
        attacks::write_file(&fx.ws.join("app/main.txt"), "main\n", 0o644);
    }
    // What the sweep takes out after the run (the gVisor backend has no creation guard):
    // a .envrc made in a directory the run then closed is not left in the workspace, where
    // direnv would run it (the sweep's own lookups also work without openat2). Natively the
    // creation is refused during the run.
    for errno in ["ENOSYS", "EPERM"] {
        let planted = "mkdir -p sub && echo 'echo pwned' > sub/.envrc; chmod 000 sub; echo done";
        let run = fx
            .sandbox(&[], planted)
            .under(&[python.as_str(), filter.as_str(), errno])
            .run();
        run.assert_success().assert_stdout_contains("done");
        attacks::chmod(&fx.ws.join("sub"), 0o755);
        assert!(
            !fx.ws.join("sub/.envrc").exists(),
            "the planted .envrc stayed under {errno}\n{}",
            run.describe()
        );
        std::fs::remove_dir_all(fx.ws.join("sub")).expect("remove sub");
    }
    // Review mode, whose change sets are read and written through openat2 only, is refused
    // before anything runs, naming openat2 and what to allow.
    for errno in ["ENOSYS", "EPERM"] {
        let run = fx
            .sandbox(&["--review"], "echo COMMAND-RAN > ran.txt")
            .under(&[python.as_str(), filter.as_str(), errno])
            .run();
        run.assert_code(125)
            .assert_stderr_contains("error[E_PROTECTION_UNAVAILABLE]");
        run.assert_stderr_contains("openat2")
            .assert_stderr_contains("allow openat2 in the outer seccomp profile");
        assert!(!fx.ws.join("ran.txt").exists(), "{}", run.describe());
    }
    // An exclusive creation (git's index.lock, editors' swap files, cp's new file): the
    // one-call creation answers ENOSYS or EPERM (an older Docker or containerd profile's
    // answer) and the careful way makes it; git init, add and commit work.
    let create = "python3 -c \"open('made.txt', 'x').write('made')\" && cp made.txt copy.txt \
                  && git status --short && git init -q repo && cd repo && echo a > a \
                  && git add a && git -c user.email=a@b -c user.name=a commit -qm one \
                  && git checkout -q -b two && echo COMMITTED";
    for errno in ["ENOSYS", "EPERM"] {
        let run = fx
            .sandbox(&[], create)
            .under(&[python.as_str(), filter.as_str(), errno])
            .run();
        run.assert_success().assert_stdout_contains("COMMITTED");
        for made in ["made.txt", "copy.txt"] {
            assert_eq!(
                attacks::read_text(&fx.ws.join(made)).as_deref(),
                Some("made"),
                "{made} under {errno}\n{}",
                run.describe()
            );
            std::fs::remove_file(fx.ws.join(made)).expect("remove the made file");
        }
        std::fs::remove_dir_all(fx.ws.join("repo")).expect("remove the run's repository");
    }
    // A workspace whose configuration is approved (`stockade trust approve`) is read through
    // openat2 only (RESOLVE_BENEATH follows links that stay inside, which no lookup by hand
    // confines as safely): refused, naming openat2 and what to allow, not as an untrusted or
    // unreadable file. Control: without the filter the approved workspace runs.
    attacks::write_file(&fx.ws.join("stockade.toml"), "[filesystem]\n", 0o644);
    let ws = fx.ws.display().to_string();
    fx.stockade(["trust", "approve", "--workspace", ws.as_str()])
        .run()
        .assert_success();
    for errno in ["ENOSYS", "EPERM"] {
        fx.sandbox(&[], "echo COMMAND-RAN")
            .under(&[python.as_str(), filter.as_str(), errno])
            .run()
            .assert_code(125)
            .assert_stderr_contains("error[E_PROTECTION_UNAVAILABLE]")
            .assert_stderr_contains("allow openat2 in the seccomp profile")
            .assert_lacks("COMMAND-RAN");
    }
    fx.sandbox(&[], "echo COMMAND-RAN")
        .run()
        .assert_success()
        .assert_stdout_contains("COMMAND-RAN");
}

/// The sandbox's init looks its mount steps' paths up through no symbolic link even where
/// `openat2` is refused: a directory on the way to a masked `.env` swapped for a link after
/// the run was planned (by a concurrent run, say) refuses the run, nothing ran. The link
/// leads to the very same file (the planned inode, so the identity check alone would pass):
/// only a lookup that follows no link refuses it. The swap happens at a known moment (the
/// debug build's pause before the Landlock build, `STOCKADE_TEST_LANDLOCK_PAUSE`, before
/// the clone). Controls: without the filter (`openat2`'s own lookup) the same refusal; the
/// host reads the secret through the link (it leads to the planned file); unswapped, the
/// run goes on.
#[test]
fn a_link_planted_after_planning_is_not_followed_where_openat2_is_refused() {
    if attacks::not_applicable(&attacks::na::NATIVE_SETUP) {
        return;
    }
    let fx = Fixture::new();
    let Some([python, filter]) = no_openat2(&fx) else {
        return;
    };
    let app = fx.ws.join("app");
    let old = fx.ws.join("app.old");
    let secret = fx.marker("dotenvprod");
    // With the run's cgroup (root): the init's own failure is what is reported, not the
    // cgroup hand-over it made fail ("the run's cgroup is not available: Broken pipe").
    let opts: [&str; 0] = [];
    let script = "echo RAN; cat app/.env.production; cat app/main.txt";
    for errno in [Some("ENOSYS"), Some("EPERM"), None] {
        let mut cmd = fx.sandbox(&opts, script);
        if let Some(errno) = errno {
            cmd = cmd.under(&[python.as_str(), filter.as_str(), errno]);
        }
        let done = cmd.run_paused(
            "STOCKADE_TEST_LANDLOCK_PAUSE",
            &fx.root.join("paused"),
            || {
                std::fs::rename(&app, &old).expect("move app away");
                std::os::unix::fs::symlink("app.old", &app).expect("plant the link");
            },
        );
        done.assert_code(125)
            .assert_stderr_contains("E_SANDBOX_SETUP")
            .assert_stderr_contains("symbolic link")
            .assert_stderr_contains(&app.join(".env.production").display().to_string())
            .assert_lacks("RAN")
            .assert_lacks(&secret);
        // Control: the link leads to the planned file.
        fx.control("cat app/.env.production")
            .outcome()
            .assert_shows(&secret);
        std::fs::remove_file(&app).expect("remove the link");
        std::fs::rename(&old, &app).expect("put app back");
        eprintln!("{errno:?}: refused");
    }
    // Control: unswapped, under the filter, the run goes on and the secret stays masked.
    fx.sandbox(&opts, script)
        .under(&[python.as_str(), filter.as_str(), "ENOSYS"])
        .run()
        .assert_success()
        .assert_stdout_contains("RAN")
        .assert_stdout_contains("main")
        .assert_lacks(&secret);
}
