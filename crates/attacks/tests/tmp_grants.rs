//! Grants and directories below the host's `/tmp` (issue 30, item 7). The sandbox's `/tmp`
//! is its own: a workspace, `--allow-write` or `--allow-read` path below the host's `/tmp` is
//! attached at the same path in it (the command writes the host's files there), nothing else
//! of the host's `/tmp` is visible, and `/tmp` itself (or `/dev/shm`) as a grant or the
//! workspace is refused before the run with the fix. A missing grant path is refused alike
//! for reading and writing. `stockade why` says what the run does.
//!
//! Every directory here is made as `mktemp -d` makes it (mode 0700), as a CI checkout below
//! `/tmp` is: a root caller's sandbox runs as an id that could not enter it on the host.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::path::{Path, PathBuf};

use attacks::{chmod, mkdir, read_text, sh_quote, write_file, Fixture};

/// A `mktemp -d` directory below the host's `/tmp`, removed at the end.
struct HostTmp(PathBuf);

impl HostTmp {
    fn new(what: &str) -> HostTmp {
        let dir = tempfile::Builder::new()
            .prefix(&format!("stockade-{what}."))
            .tempdir_in("/tmp")
            .expect("a directory below /tmp")
            .keep();
        chmod(&dir, 0o700);
        HostTmp(dir.canonicalize().expect("canonical"))
    }

    fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for HostTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A secret file planted directly in the host's `/tmp`, removed at the end.
struct Secret {
    path: PathBuf,
    marker: String,
}

impl Secret {
    fn plant(fx: &Fixture) -> Secret {
        let marker = fx.marker("tmpsecret");
        let path = PathBuf::from(format!("/tmp/stockade-other-secret.{}", fx.id));
        write_file(&path, format!("{marker}\n"), 0o644);
        Secret { path, marker }
    }

    fn cat(&self) -> String {
        format!("cat {}", sh_quote(&self.path))
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// `stockade run OPTS --shell SCRIPT` in `cwd`, with the fixture's home.
fn run_in(fx: &Fixture, cwd: &Path, opts: &[&str], script: &str) -> attacks::Cmd {
    fx.stockade(["run"])
        .args(opts)
        .arg("--shell")
        .arg(attacks::wrap(script))
        .cwd(cwd)
}

#[test]
fn a_workspace_below_tmp_is_the_hosts_and_nothing_else_of_tmp_is_visible() {
    let fx = Fixture::new();
    let secret = Secret::plant(&fx);
    let t = HostTmp::new("tmpws");
    let proj = t.join("proj");
    mkdir(&proj);
    let marker = fx.marker("tmpws");
    write_file(&proj.join("in.txt"), format!("{marker}\n"), 0o644);
    write_file(&t.join("beside.txt"), fx.marker("beside"), 0o644);
    // git works there as in any workspace (a CI checkout below /tmp).
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "safe.directory=*", "-C"])
            .arg(&proj)
            .args(args)
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["-c", "init.defaultBranch=main", "init", "-q"]);
    git(&["add", "in.txt"]);
    git(&[
        "-c",
        "user.email=a@example.invalid",
        "-c",
        "user.name=a",
        "commit",
        "-qm",
        "x",
    ]);
    for p in attacks::walk(&proj, &|_| false) {
        if p.is_dir() {
            chmod(&p, 0o755);
        }
    }
    chmod(&proj, 0o755);
    let script = format!(
        "pwd; cd {} && cat in.txt && echo written > out.txt && git -c safe.directory='*' log --oneline; \
         {}; cat {}",
        sh_quote(&proj),
        secret.cat(),
        sh_quote(t.join("beside.txt"))
    );
    // Started in it (the workspace is the current directory), and named by --workspace from
    // elsewhere: the same.
    for (cwd, opts) in [
        (proj.clone(), vec![]),
        (fx.ws.clone(), vec!["--workspace", proj.to_str().unwrap()]),
    ] {
        let _ = std::fs::remove_file(proj.join("out.txt"));
        let run = run_in(&fx, &cwd, &opts, &script).outcome();
        run.assert_failed() // the last cat: the host's /tmp beside it is not there
            .assert_output_contains(&marker)
            .assert_lacks(&secret.marker)
            .assert_lacks(&fx.marker("beside"));
        // It starts where it was started (in the workspace, or outside it where it can read).
        run.run
            .assert_stdout_contains(&format!("{}\n", cwd.display()))
            .assert_stdout_contains(" x\n") // git log
            .assert_lacks("note:");
        assert_eq!(
            read_text(&proj.join("out.txt")).as_deref(),
            Some("written\n")
        );
        // The host's /tmp is untouched but for the workspace: nothing written beside it.
        assert!(!t.join("out.txt").exists());
    }
    // Control: on the host, the secret and the file beside it are readable.
    fx.control(&format!(
        "{}; cat {}",
        secret.cat(),
        sh_quote(t.join("beside.txt"))
    ))
    .outcome()
    .assert_shows(&secret.marker)
    .assert_output_contains(&fx.marker("beside"));
}

#[test]
fn write_and_read_grants_below_tmp_are_attached_at_their_paths_even_nested() {
    let fx = Fixture::new();
    let secret = Secret::plant(&fx);
    let t = HostTmp::new("tmpgrant");
    let (data, out, file) = (t.join("data"), t.join("data/out"), t.join("note.txt"));
    mkdir(&out);
    chmod(&data, 0o755);
    chmod(&out, 0o755);
    let marker = fx.marker("tmpdata");
    write_file(&data.join("in.txt"), format!("{marker}\n"), 0o644);
    write_file(&file, "old\n", 0o644);
    // A read grant with a writable root inside it, and a writable file: before, the mount
    // point of the inner one was made (and chmod-ed) inside the read-only outer one, and the
    // run failed to start (E_SANDBOX_SETUP, "Read-only file system").
    let opts = [
        "--allow-read",
        data.to_str().unwrap(),
        "--allow-write",
        out.to_str().unwrap(),
        "--allow-write",
        file.to_str().unwrap(),
    ];
    let script = format!(
        "cat {d}/in.txt && echo new > {d}/out/w && echo appended >> {f} && \
         if echo x > {d}/w; then echo WROTE-RO; fi; {}",
        secret.cat(),
        d = sh_quote(&data),
        f = sh_quote(&file),
    );
    let run = run_in(&fx, &fx.ws, &opts, &script).outcome();
    run.assert_failed() // the secret's cat
        .assert_output_contains(&marker)
        .assert_lacks("WROTE-RO")
        .assert_lacks(&secret.marker);
    assert_eq!(read_text(&out.join("w")).as_deref(), Some("new\n"));
    assert_eq!(read_text(&file).as_deref(), Some("old\nappended\n"));
    assert!(!data.join("w").exists(), "the read grant was writable");
    // The host's directories keep their modes (a mount point made in the host's directory
    // chmod-ed it to 0755).
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&t.0), 0o700);
    // The workspace inside a read grant: attached after it.
    let proj = data.join("proj");
    mkdir(&proj);
    chmod(&proj, 0o755);
    let run = run_in(
        &fx,
        &proj,
        &["--allow-read", data.to_str().unwrap()],
        "echo w > w && cat ../in.txt",
    )
    .outcome();
    run.assert_shows(&marker);
    assert_eq!(read_text(&proj.join("w")).as_deref(), Some("w\n"));
    // Control: without the grants none of it is there.
    run_in(&fx, &fx.ws, &[], &format!("cat {}/in.txt", sh_quote(&data)))
        .outcome()
        .assert_failed()
        .assert_lacks(&marker);
    fx.control(&secret.cat())
        .outcome()
        .assert_shows(&secret.marker);
}

#[test]
fn tmp_itself_and_dev_shm_are_refused_before_the_run_with_the_fix() {
    let fx = Fixture::new();
    let ran = fx.marker("ran");
    let cases: [(&Path, &[&str], &str); 5] = [
        (
            &fx.ws,
            &["--workspace", "/tmp"],
            "the workspace cannot be /tmp",
        ),
        (Path::new("/tmp"), &[], "the workspace cannot be /tmp"),
        (&fx.ws, &["--allow-write", "/tmp"], "cannot grant /tmp"),
        (&fx.ws, &["--allow-read", "/tmp"], "cannot grant /tmp"),
        (
            &fx.ws,
            &["--allow-read", "/dev/shm"],
            "cannot grant /dev/shm",
        ),
    ];
    for (cwd, opts, why) in cases {
        let run = run_in(&fx, cwd, opts, &format!("echo {ran}")).run();
        run.assert_code(125)
            .assert_stderr_contains("E_POLICY_INVALID")
            .assert_stderr_contains(why)
            .assert_stderr_contains("below /tmp")
            .assert_lacks(&ran)
            .assert_lacks("removed or renamed");
    }
    // Control: a directory below /tmp in the same places runs.
    let t = HostTmp::new("tmpctl");
    chmod(&t.0, 0o755);
    for opts in [
        vec!["--workspace", t.0.to_str().unwrap()],
        vec!["--allow-write", t.0.to_str().unwrap()],
        vec!["--allow-read", t.0.to_str().unwrap()],
    ] {
        run_in(&fx, &fx.ws, &opts, &format!("echo {ran}"))
            .outcome()
            .assert_shows(&ran);
    }
}

#[test]
fn a_missing_grant_path_is_refused_alike_for_reading_and_writing() {
    let fx = Fixture::new();
    let missing = fx.root.join("missing");
    let ran = fx.marker("ran");
    for (flag, key) in [
        ("--allow-read", "allow_read"),
        ("--allow-write", "allow_write"),
    ] {
        let run = run_in(
            &fx,
            &fx.ws,
            &[flag, missing.to_str().unwrap()],
            &format!("echo {ran}"),
        )
        .run();
        run.assert_code(125)
            .assert_stderr_contains("E_POLICY_INVALID")
            .assert_stderr_contains("does not exist")
            .assert_stderr_contains(&s(&missing))
            .assert_stderr_contains(&format!("create it first or remove it from {key}"))
            .assert_lacks(&ran);
    }
    // Control: once it exists, both run.
    mkdir(&missing);
    for flag in ["--allow-read", "--allow-write"] {
        run_in(
            &fx,
            &fx.ws,
            &[flag, missing.to_str().unwrap()],
            &format!("echo {ran}"),
        )
        .outcome()
        .assert_shows(&ran);
    }
}

#[test]
fn a_home_below_tmp_is_not_visible_and_the_run_starts() {
    // A root caller's 0700 home below /tmp was attached into the private /tmp where it had no
    // mount point: "no longer exists: it was removed or renamed".
    let fx = Fixture::new();
    let t = HostTmp::new("tmphome");
    let home = t.join("home");
    let marker = fx.marker("tmphome");
    write_file(&home.join(".ssh/id_rsa"), format!("{marker}\n"), 0o644);
    chmod(&home, 0o700);
    chmod(&t.0, 0o755);
    let script = "cat \"$HOME/.ssh/id_rsa\"";
    run_in(&fx, &fx.ws, &[], script)
        .env("HOME", &home)
        .outcome()
        .assert_failed()
        .assert_lacks(&marker)
        .assert_lacks("removed or renamed");
    // Control: the host reads it.
    fx.control(script)
        .env("HOME", &home)
        .outcome()
        .assert_shows(&marker);
}

/// `stockade why --json OPTS PATH` in `cwd`: (read state, write state, read allowed).
fn why(fx: &Fixture, cwd: &Path, opts: &[&str], path: &Path) -> (String, String, bool) {
    let run = fx
        .stockade(["why", "--json"])
        .args(opts)
        .arg(path)
        .cwd(cwd)
        .run();
    let doc: serde_json::Value =
        serde_json::from_str(run.all_output().lines().next().unwrap_or(""))
            .unwrap_or_else(|e| panic!("{e}: {}", run.describe()));
    (
        doc["read"]["state"].as_str().unwrap_or_default().to_owned(),
        doc["write"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        doc["read"]["allowed"].as_bool().unwrap_or_default(),
    )
}

#[test]
fn why_answers_what_the_run_does_below_tmp() {
    let fx = Fixture::new();
    let secret = Secret::plant(&fx);
    let t = HostTmp::new("tmpwhy");
    let (proj, data) = (t.join("proj"), t.join("data"));
    mkdir(&proj);
    mkdir(&data);
    chmod(&proj, 0o755);
    chmod(&data, 0o755);
    write_file(&proj.join("f"), "f\n", 0o644);
    write_file(&data.join("d"), "d\n", 0o644);
    let ws = ["--workspace", proj.to_str().unwrap()];
    let read = ["--allow-read", data.to_str().unwrap()];
    let both = [ws[0], ws[1], read[0], read[1]];
    assert_eq!(
        why(&fx, &fx.ws, &both, &proj.join("f")),
        ("readable".into(), "writable".into(), true)
    );
    assert_eq!(
        why(&fx, &fx.ws, &both, &data.join("d")),
        ("readable".into(), "read_only".into(), true)
    );
    assert_eq!(
        why(&fx, &fx.ws, &both, &secret.path),
        ("private".into(), "private".into(), false)
    );
    // The run does exactly that.
    let script = format!(
        "cat {f} && echo w >> {f} && cat {d} && if echo x >> {d}; then echo WROTE-RO; fi; {}",
        secret.cat(),
        f = sh_quote(proj.join("f")),
        d = sh_quote(data.join("d")),
    );
    run_in(&fx, &fx.ws, &both, &script)
        .outcome()
        .assert_failed()
        .assert_lacks("WROTE-RO")
        .assert_lacks(&secret.marker);
    assert_eq!(read_text(&proj.join("f")).as_deref(), Some("f\nw\n"));
    assert_eq!(read_text(&data.join("d")).as_deref(), Some("d\n"));
    // Without the grants: both private, as the run sees them (control: the host reads them).
    assert_eq!(why(&fx, &fx.ws, &[], &data.join("d")).0, "private");
    fx.control(&format!("cat {}", sh_quote(data.join("d"))))
        .outcome()
        .assert_shows("d");
    // And `why` refuses what the run refuses, the same way.
    let run = fx.stockade(["why", "--workspace", "/tmp", "./x"]).run();
    run.assert_code(125)
        .assert_stderr_contains("the workspace cannot be /tmp");
}

#[test]
fn a_current_directory_below_tmp_outside_every_grant_starts_in_the_workspace_saying_how_to_grant_it(
) {
    let fx = Fixture::new();
    let t = HostTmp::new("tmpcwd");
    chmod(&t.0, 0o755);
    let marker = fx.marker("tmpcwd");
    write_file(&t.join("here.txt"), format!("{marker}\n"), 0o644);
    let run = fx.sandbox(&[], "pwd; cat here.txt").cwd(&t.0).run();
    run.assert_failure()
        .assert_stdout_contains(&format!("{}\n", fx.ws.display()))
        .assert_stderr_contains("note: the command ran in the workspace")
        .assert_stderr_contains("--allow-read or --allow-write")
        .assert_lacks(&marker);
    // Granted, it starts there (read-only) and sees the host's directory.
    let run = fx
        .sandbox(
            &["--allow-read", t.0.to_str().unwrap()],
            "pwd; cat here.txt",
        )
        .cwd(&t.0)
        .run();
    run.assert_success()
        .assert_stdout_contains(&format!("{}\n", t.0.display()))
        .assert_stdout_contains(&marker)
        .assert_lacks("note:");
}
