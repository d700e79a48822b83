//! The sweep sees everything the command made, whatever its mode (issue 30, item 1). A
//! command makes a directory, puts in it what the sweep after the run must take out (a link
//! into a masked path, a nested repository's hook, a `.git` file sending git elsewhere, an
//! `.envrc`), then shuts the caller out of it: `chmod 000` (nothing), `111` (search only, no
//! listing), `311` / `300` (no listing), `444` (listing, no search), `555` (no write, so
//! nothing can be moved out). The old walk took an unreadable directory for an empty one, so
//! all of it stayed for the host to follow or run (under gVisor the sweep is the only guard;
//! natively the link to the key stayed).
//!
//! The decisive checks are on the HOST after the run: the directory has the mode the run
//! left, and once the test opens it again nothing of the attack is in it; each thing is in
//! the quarantine and reported. Controls: the same tree left at 0755 is caught the same way,
//! and without stockade the link reads the key and the hook, `.git` file and `.envrc` exist.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use attacks::{json_str, live_hooks, quarantined_files, Fixture, Records};

/// The modes a command can leave a directory at to keep the sweep out, and 0755 (the control:
/// the same attack caught without any mode game).
const MODES: &[u32] = &[0o000, 0o111, 0o311, 0o300, 0o444, 0o555, 0o755];

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Gives `d` back to the test (which owns it, or is root) to look inside.
fn open(d: &Path) {
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `d` has the mode `m` the run left it at; then it is opened for the test to look inside.
fn assert_left_at(d: &Path, m: u32, run: &attacks::Run) {
    assert_eq!(
        mode(d),
        m,
        "{m:o}: the mode the run left at {}\n{}",
        d.display(),
        run.describe()
    );
    open(d);
}

/// The report names a violation of `kind` at `path` that says where it went.
fn assert_reported(records: &Records, run: &attacks::Run, kind: &str, path: &Path) {
    let violations = records.violations();
    assert!(
        violations.iter().any(|v| json_str(v, "kind") == kind
            && json_str(v, "code") == "E_SANDBOX_VIOLATION"
            && Path::new(json_str(v, "path")) == path
            && json_str(v, "action").contains("moved to")),
        "no {kind} violation for {}:\n{violations:#?}\n{}",
        path.display(),
        run.describe()
    );
}

/// No directory is reported as one the sweep could not look into: it opened every one up.
fn assert_all_inspected(records: &Records) {
    let violations = records.violations();
    assert!(
        !violations
            .iter()
            .any(|v| json_str(v, "kind") == "uninspectable_directory"),
        "{violations:#?}"
    );
}

/// A link into `~/.ssh` in a directory the command then closes: quarantined and reported as
/// `symlink_to_masked_path`, and the directory keeps the mode the command gave it.
#[test]
fn a_closed_directory_hides_no_link_into_a_masked_path() {
    for &m in MODES {
        let fx = Fixture::new();
        let records = fx.records();
        let script = format!(
            r#"mkdir d && ln -s "$HOME/.ssh/id_rsa" d/link && mkdir d/deeper && ln -s "$HOME/.ssh" d/deeper/keys && chmod {m:o} d/deeper && chmod {m:o} d && echo made"#
        );
        let run = fx.attack(&records.opts(), &script).outcome();
        run.assert_ok().assert_output_contains("made");
        let d = fx.ws.join("d");
        assert_left_at(&d, m, &run.run);
        assert_left_at(&d.join("deeper"), m, &run.run);
        for gone in ["d/link", "d/deeper/keys"] {
            assert!(
                std::fs::symlink_metadata(fx.ws.join(gone)).is_err(),
                "{m:o}: {gone} stayed in the workspace\n{}",
                run.run.describe()
            );
            assert!(
                quarantined_files(&fx.ws).iter().any(|q| q.ends_with(gone)),
                "{m:o}: {gone} not in the quarantine"
            );
            assert_reported(
                &records,
                &run.run,
                "symlink_to_masked_path",
                &fx.ws.join(gone),
            );
        }
        assert_all_inspected(&records);
    }
    // Control: without stockade the links stay and lead to the key.
    let fx = Fixture::new();
    let out = fx
        .control(r#"mkdir d && ln -s "$HOME/.ssh/id_rsa" d/link && cat d/link && chmod 000 d"#)
        .outcome();
    out.assert_shows(&fx.marker("ssh"));
    open(&fx.ws.join("d"));
    assert!(std::fs::symlink_metadata(fx.ws.join("d/link")).is_ok());
}

/// What host tools run, planted in a directory the command then closes: a nested
/// repository's hook, a `.git` file sending git to a repository of the command's making, an
/// `.envrc`. Natively the creation guard refuses them as they are made (reported as
/// `protected_path_blocked`); under gVisor the sweep takes them out after the run, closed
/// directory or not. Either way none is in the workspace after the run.
#[test]
fn a_closed_directory_hides_no_hook_git_file_or_envrc() {
    let plant = r#"mkdir -p d/repo/.git/hooks && printf '#!/bin/sh\necho pwned-by-hook\n' > d/repo/.git/hooks/pre-commit && chmod +x d/repo/.git/hooks/pre-commit
mkdir -p d/sub && printf 'gitdir: ../repo/.git\n' > d/sub/.git
printf 'echo pwned-by-envrc\n' > d/.envrc"#;
    for &m in MODES {
        let fx = Fixture::new();
        let records = fx.records();
        let script = format!("{plant}\nchmod {m:o} d/repo d/sub d; echo made");
        let run = fx.attack(&records.opts(), &script).outcome();
        run.assert_output_contains("made");
        let d = fx.ws.join("d");
        assert_left_at(&d, m, &run.run);
        for sub in ["repo", "sub"] {
            if d.join(sub).exists() {
                assert_left_at(&d.join(sub), m, &run.run);
            }
        }
        let hooks = live_hooks(&fx.ws);
        assert!(
            hooks.is_empty(),
            "{m:o}: live hooks {hooks:?}\n{}",
            run.run.describe()
        );
        for gone in ["d/sub/.git", "d/.envrc"] {
            assert!(
                std::fs::symlink_metadata(fx.ws.join(gone)).is_err(),
                "{m:o}: {gone} stayed in the workspace\n{}",
                run.run.describe()
            );
        }
        if attacks::creation_guarded() {
            records.assert_blocked(&run.run, &["d/repo/.git", "d/sub/.git", "d/.envrc"]);
        } else {
            for (kind, rel) in [
                ("protected_path_created", "d/repo/.git/hooks/pre-commit"),
                ("protected_path_created", "d/sub/.git"),
                ("protected_path_created", "d/.envrc"),
            ] {
                assert_reported(&records, &run.run, kind, &fx.ws.join(rel));
            }
        }
        assert_all_inspected(&records);
        // The host runs nothing the command planted.
        let status = fx.git_host(&["-C", &d.join("sub").display().to_string(), "status"]);
        status.assert_lacks("pwned");
    }
    // Control: without stockade all three exist after the same steps.
    let fx = Fixture::new();
    fx.control(&format!("{plant}\nchmod 000 d/repo d/sub d"))
        .outcome()
        .assert_ok();
    let d = fx.ws.join("d");
    for p in [&d, &d.join("repo"), &d.join("sub")] {
        open(p);
    }
    assert!(!live_hooks(&fx.ws).is_empty());
    assert!(d.join("sub/.git").is_file() && d.join(".envrc").is_file());
}

/// The directory the repository's `core.hooksPath` names, missing at the start: made during
/// the run with a hook in it, then closed. Natively the creation guard refuses it; under
/// gVisor the guard's rules after the run move it out whole. A directory moved to another
/// parent needs its own write bit (its `..` changes), which the run took away: the old sweep
/// could neither move nor remove it and left the hook for host git to run.
#[test]
fn a_closed_hooks_path_directory_is_still_taken_out() {
    let plant = "mkdir -p .githooks/x && printf '#!/bin/sh\\necho pwned-by-hook\\n' > .githooks/pre-commit && chmod +x .githooks/pre-commit";
    let commit = |fx: &Fixture| {
        fx.git_host(&[
            "-c",
            "user.email=h@example.invalid",
            "-c",
            "user.name=H",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "after the run",
        ])
    };
    for &m in MODES {
        let fx = Fixture::new();
        fx.git_host(&["config", "core.hooksPath", ".githooks"])
            .assert_success();
        let records = fx.records();
        let script = format!("{plant}\nchmod {m:o} .githooks/x .githooks; echo made");
        let run = fx.attack(&records.opts(), &script).outcome();
        run.assert_output_contains("made");
        let gh = fx.ws.join(".githooks");
        if std::fs::symlink_metadata(&gh).is_ok() {
            open(&gh);
        }
        assert!(
            std::fs::symlink_metadata(gh.join("pre-commit")).is_err(),
            "{m:o}: the hook stayed\n{}",
            run.run.describe()
        );
        if !attacks::creation_guarded() {
            assert_reported(&records, &run.run, "protected_path_created", &gh);
        }
        assert_all_inspected(&records);
        commit(&fx).assert_lacks("pwned");
    }
    // Control: without stockade host git runs the hook.
    let fx = Fixture::new();
    fx.git_host(&["config", "core.hooksPath", ".githooks"])
        .assert_success();
    fx.control(&format!("{plant}\nchmod 555 .githooks"))
        .outcome()
        .assert_ok();
    assert!(commit(&fx).all_output().contains("pwned-by-hook"));
}

/// The workspace itself closed at the end of the run (`chmod 000 .`): the sweep starts from
/// the root's own descriptor (opening `.` from it would need the search bit the run took),
/// finds the link, and leaves the root at mode 000 as the run did. The old sweep reported
/// nothing and left the link.
#[test]
fn a_closed_workspace_hides_no_link() {
    let fx = Fixture::new();
    let records = fx.records();
    let script = r#"ln -s "$HOME/.ssh/id_rsa" link && chmod 000 . && echo closed"#;
    let run = fx.attack(&records.opts(), script).outcome();
    let closed = run.run.stdout.contains("closed");
    let left = mode(&fx.ws);
    open(&fx.ws);
    if closed {
        assert_eq!(left, 0o000, "the mode the run left\n{}", run.run.describe());
    }
    assert!(
        std::fs::symlink_metadata(fx.ws.join("link")).is_err(),
        "the link stayed\n{}",
        run.run.describe()
    );
    assert_reported(
        &records,
        &run.run,
        "symlink_to_masked_path",
        &fx.ws.join("link"),
    );
    assert_all_inspected(&records);
    // Control: without stockade the link stays and reads the key.
    let fx = Fixture::new();
    let out = fx.control(script).outcome();
    open(&fx.ws);
    assert!(std::fs::read_to_string(fx.ws.join("link"))
        .unwrap()
        .contains(&fx.marker("ssh")));
    out.assert_ok();
}
