//! Real homes and CI: workspaces and grants wherever a user or a CI job puts them.
//!
//! - A root caller's sandbox runs as an id no account has (under a container engine: as the
//!   workspace's owner), so it passes only the "others" bits of host directories (or the
//!   owner's); `mktemp -d` makes 0700 directories, and a fresh clone below one must still run
//!   (issue 15: it failed with `E_SANDBOX_SETUP ... Permission denied`; issue 33: refused
//!   under the container engines), showing only the way to the workspace and the grants.
//! - Read grants below `/tmp` are visible in the sandbox's private `/tmp` (they were silently
//!   invisible), and `/tmp` itself cannot be granted.
//! - The command starts in the caller's directory when the sandbox can reach it, and says so
//!   when it cannot.
#![allow(clippy::expect_used)]

use std::path::Path;

use attacks::{chmod, mkdir, read_text, sh_quote, skip_unless_root, write_file, Fixture};

/// A clone of the fixture's repository below a fresh 0700 directory of the caller's.
fn clone_below_private_dir(fx: &Fixture) -> std::path::PathBuf {
    let private = fx.root.join("private");
    mkdir(&private);
    chmod(&private, 0o700);
    let clone = private.join("clone");
    fx.git_host(&[
        "clone",
        "-q",
        &fx.ws.display().to_string(),
        &clone.display().to_string(),
    ])
    .assert_success();
    clone
}

#[test]
fn fresh_clone_below_a_private_dir_runs_git_and_writes() {
    let fx = Fixture::new();
    let clone = clone_below_private_dir(&fx);
    let script = "set -e
        git -c safe.directory='*' status --porcelain
        echo new > new.txt
        cat README.md | head -1
        pwd";
    let run = fx
        .stockade(["run".as_ref(), "--workspace".as_ref(), clone.as_os_str()])
        .arg("--shell")
        .arg(script)
        .cwd(&clone)
        .run();
    run.assert_success()
        .assert_stdout_contains("# demo")
        .assert_stdout_contains(&clone.display().to_string());
    assert_eq!(read_text(&clone.join("new.txt")).as_deref(), Some("new\n"));
    // Control: the same script on the host.
    let control = fx.host(script).cwd(&clone).run();
    control.assert_success();
}

#[test]
fn a_cover_over_a_private_dir_shows_only_the_way_to_the_workspace() {
    if skip_unless_root("only a root caller's sandbox runs as a stranger to the caller's files") {
        return;
    }
    let fx = Fixture::new();
    let clone = clone_below_private_dir(&fx);
    let private = clone.parent().unwrap().to_path_buf();
    let marker = fx.marker("sibling");
    write_file(&private.join("sibling.txt"), &marker, 0o644);
    // The listing by the shell's glob (readdir), not `ls`: Debian's runsc answers statx
    // with EINVAL (na::STATX).
    let script = format!(
        "printf '%s\\n' {p}/* {p}/.[!.]*; cat {p}/sibling.txt; if touch {p}/planted; then echo planted-ok; fi; echo listed",
        p = sh_quote(&private)
    );
    let run = fx
        .stockade(["run".as_ref(), "--workspace".as_ref(), clone.as_os_str()])
        .arg("--shell")
        .arg(&script)
        .cwd(&clone)
        .run();
    run.assert_success()
        .assert_stdout_contains("clone\n")
        .assert_stdout_contains("listed");
    let out = run.all_output();
    assert!(
        !out.contains(&marker),
        "a sibling below the 0700 directory was read:\n{out}"
    );
    assert!(!out.contains("planted-ok"), "the cover is writable:\n{out}");
    assert!(!private.join("planted").exists());
    // Control: the host's root reads the sibling and can write there.
    let control = fx.host(&script).cwd(&clone).run();
    assert!(control.all_output().contains(&marker));
    assert!(control.all_output().contains("planted-ok"));
}

/// A read grant beside the clone below the caller's 0700 directory: read, never written,
/// wherever the way to it is only shown (a root caller's container engines cover the closed
/// directory and bind the grant in the cover). Control: the host's caller writes there.
#[test]
fn a_read_grant_below_a_private_dir_is_read_and_not_written() {
    let fx = Fixture::new();
    let clone = clone_below_private_dir(&fx);
    let data = clone.parent().unwrap().join("data");
    mkdir(&data);
    let marker = fx.marker("granted");
    write_file(&data.join("f.txt"), &marker, 0o644);
    let script = format!(
        "cat {d}/f.txt; echo; if echo x > {d}/new; then echo wrote-ok; fi; echo done",
        d = sh_quote(&data)
    );
    let run = fx
        .stockade(["run".as_ref(), "--workspace".as_ref(), clone.as_os_str()])
        .args(["--allow-read".as_ref(), data.as_os_str()])
        .arg("--shell")
        .arg(&script)
        .cwd(&clone)
        .run();
    run.assert_success()
        .assert_stdout_contains(&marker)
        .assert_stdout_contains("done");
    assert!(!run.all_output().contains("wrote-ok"), "{}", run.describe());
    assert!(!data.join("new").exists());
    let control = fx.host(&script).cwd(&clone).run();
    assert!(control.all_output().contains("wrote-ok"));
}

/// A read grant below a top-level directory closed to the command (root's 0700 `/root`,
/// where a root caller's tool caches live): the grant is read, and the directory shows only
/// the way to it, not the entry beside it nor a masked one (under the container engines a
/// masked entry's mount point showed its name there, and the cover of `/root` met the host's
/// own bind of it: the engine refused the run). Control: the host's root lists both.
#[test]
fn a_read_grant_in_roots_home_shows_only_the_way_to_it() {
    if skip_unless_root("only a root caller's sandbox runs as a stranger to root's home") {
        return;
    }
    let fx = Fixture::new();
    let root_home = Path::new("/root");
    let grant = root_home.join(format!(".stockade-test-grant-{}", fx.id));
    let beside = root_home.join(format!(".stockade-test-beside-{}", fx.id));
    let masked = root_home.join(format!(".stockade-test-masked-{}", fx.id));
    struct Gone(Vec<std::path::PathBuf>);
    impl Drop for Gone {
        fn drop(&mut self) {
            for p in &self.0 {
                let _ = std::fs::remove_dir_all(p);
            }
        }
    }
    let _gone = Gone(vec![grant.clone(), beside.clone(), masked.clone()]);
    let marker = fx.marker("granted");
    write_file(&grant.join("f.txt"), &marker, 0o644);
    write_file(&beside.join("f.txt"), fx.marker("beside"), 0o644);
    write_file(&masked.join("f.txt"), fx.marker("masked"), 0o644);
    let script = format!(
        "cat {}/f.txt; echo; ls -a /root; echo listed",
        sh_quote(&grant)
    );
    let run = fx
        .stockade(["run".as_ref(), "--allow-read".as_ref(), grant.as_os_str()])
        .args(["--deny-read".as_ref(), masked.as_os_str()])
        .arg("--shell")
        .arg(&script)
        .run();
    run.assert_success()
        .assert_stdout_contains(&marker)
        .assert_stdout_contains("listed");
    let out = run.all_output();
    for name in ["stockade-test-beside", "stockade-test-masked"] {
        assert!(!out.contains(name), "{name} shows:\n{}", run.describe());
    }
    let control = fx.host(&script).run();
    for name in ["stockade-test-beside", "stockade-test-masked"] {
        assert!(control.all_output().contains(name));
    }
}

/// A directory below the host's `/tmp` holding a file with `marker`; removed on drop.
struct TmpGrant(std::path::PathBuf);

impl TmpGrant {
    fn new(marker: &str) -> TmpGrant {
        let dir = tempfile::Builder::new()
            .prefix("stockade-grant.")
            .tempdir_in("/tmp")
            .expect("a directory below /tmp")
            .keep();
        chmod(&dir, 0o700);
        let data = dir.join("data");
        mkdir(&data);
        write_file(&data.join("f.txt"), marker, 0o644);
        TmpGrant(dir)
    }
}

impl Drop for TmpGrant {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn read_grants_below_tmp_are_visible_inside() {
    let fx = Fixture::new();
    let marker = fx.marker("tmpgrant");
    let grant = TmpGrant::new(&marker);
    let data = grant.0.join("data");
    let script = format!(
        "cat {f}; if echo x > {d}/w; then echo wrote; fi; true",
        f = sh_quote(data.join("f.txt")),
        d = sh_quote(&data)
    );
    let run = fx
        .attack(&["--allow-read", &data.display().to_string()], &script)
        .outcome();
    run.assert_shows(&marker).assert_lacks("wrote");
    assert!(!data.join("w").exists(), "a read grant became writable");
    // Without the grant the private /tmp has nothing there.
    fx.attack(&[], &format!("cat {}", sh_quote(data.join("f.txt"))))
        .outcome()
        .assert_failed();
    // Control: the host reads it.
    fx.control(&script).outcome().assert_shows(&marker);
}

#[test]
fn granting_tmp_itself_is_refused_with_the_reason() {
    let fx = Fixture::new();
    let run = fx.sandbox(&["--allow-read", "/tmp"], "true").run();
    run.assert_code(125)
        .assert_stderr_contains("/tmp")
        .assert_stderr_contains("private /tmp");
}

#[test]
fn the_command_starts_in_the_callers_directory_or_says_why_not() {
    let fx = Fixture::new();
    // A directory outside the workspace that the sandbox can read: the command starts there.
    let elsewhere = fx.outside.clone();
    let run = fx.sandbox(&[], "pwd").cwd(&elsewhere).run();
    run.assert_success()
        .assert_stdout_contains(&format!("{}\n", elsewhere.display()));
    assert!(!run.all_output().contains("note:"), "{}", run.all_output());
    // One the sandbox cannot reach (the host's /tmp is not the sandbox's): the workspace,
    // and a note naming both.
    let grant = TmpGrant::new("x");
    chmod(&grant.0, 0o755);
    let run = fx.sandbox(&[], "pwd").cwd(&grant.0).run();
    run.assert_success()
        .assert_stdout_contains(&format!("{}\n", fx.ws.display()))
        .assert_stderr_contains("note: the command ran in the workspace")
        .assert_stderr_contains(&grant.0.display().to_string());
    assert!(Path::new(&grant.0).exists());
}

/// A directory in the workspace the sandbox cannot enter (another user's, 0700) holding a
/// file the policy masks: the mask cannot be mounted, and the run stops (fail closed). The
/// error names the directory, why (the sandbox's identity and the directory's mode and
/// owner) and the fix, instead of sending the user to a `doctor` that cannot see the path;
/// applying that fix makes the run work, with the file still masked.
#[test]
fn a_setup_failure_names_the_directory_the_reason_and_the_fix() {
    if attacks::not_applicable(&attacks::na::NATIVE_SETUP) {
        return;
    }
    if skip_unless_root("another user's 0700 directory only stops a root caller's sandbox") {
        return;
    }
    let fx = Fixture::new();
    let locked = fx.ws.join("locked");
    mkdir(&locked);
    write_file(&locked.join(".env"), "API_TOKEN=secret-value\n", 0o600);
    let other = 999;
    for p in [&locked, &locked.join(".env")] {
        std::os::unix::fs::chown(p, Some(other), Some(other)).expect("chown");
    }
    chmod(&locked, 0o700);
    let run = fx.sandbox(&[], "cat locked/.env").run();
    run.assert_code(125)
        .assert_stderr_contains("E_SANDBOX_SETUP")
        .assert_stderr_contains(&format!("cannot enter {}", locked.display()))
        .assert_stderr_contains("mode 700, owner uid 999")
        .assert_stderr_contains(&format!("`chmod o+x {}`", locked.display()))
        .assert_lacks("stockade doctor");
    // The fix it names works, and the file stays masked.
    chmod(&locked, 0o701);
    let run = fx.sandbox(&[], "cat locked/.env; echo done").run();
    run.assert_success()
        .assert_stdout_contains("done")
        .assert_lacks("secret-value");
}
