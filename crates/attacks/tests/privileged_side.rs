//! Confused deputy (issue 15, item 2): stockade's privileged side writes the run record
//! (`--report`) and the audit log (`--audit`) with the caller's rights. When the path lies in
//! a directory the command can write, the command replaces it with a link to another file of
//! the caller's (`~/.bashrc`) — during the run, or between two runs for the append-only audit
//! log — and the supervisor used to write through it: the JSON record, whose `argv` ran as
//! shell code at the next login.
//!
//! Now: a path whose directory (or a link on the way to it) lies in a writable root of the
//! run is refused before anything runs (`E_UNSAFE_RECORD_PATH`); anywhere else the audit log
//! is opened with `O_NOFOLLOW` and must be a regular file with one link, owned by the
//! caller, and the report is written to a new file renamed over the name (a planted link is
//! replaced, not followed). Each test's control performs the write as the old code did
//! (plain `>` / `>>` on the host) and shows it reaches the victim.

#![allow(clippy::expect_used)]

use std::path::Path;

use attacks::{read_text, sh_quote, Fixture};

const CODE: &str = "E_UNSAFE_RECORD_PATH";

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn bashrc(fx: &Fixture) -> String {
    read_text(&fx.home.join(".bashrc")).expect("read the fixture's .bashrc")
}

/// `--report` in the workspace: the command swaps it for a link to `~/.bashrc` during the
/// run. Refused before the run (the command never ran, nothing written); the old supervisor
/// wrote the JSON record into `.bashrc`. Control: the same write on the host reaches
/// `.bashrc`; the same run with the report outside the workspace works.
#[test]
fn report_inside_the_workspace_is_refused_and_not_written_through_a_link() {
    let fx = Fixture::new();
    let before = bashrc(&fx);
    let report = fx.ws.join("report.json");
    let plant = format!(
        "ln -sf {} report.json && echo ran > ran.txt",
        sh_quote(fx.home.join(".bashrc"))
    );
    let run = fx.attack(&["--report", s(&report)], &plant).run();
    run.assert_code(125)
        .assert_stderr_contains(CODE)
        .assert_stderr_contains(s(&report))
        .assert_stderr_contains("--report /var/tmp/");
    assert_eq!(
        bashrc(&fx),
        before,
        "the record was written through the link"
    );
    assert!(
        std::fs::symlink_metadata(&report).is_err(),
        "nothing is written"
    );
    assert!(!fx.ws.join("ran.txt").exists(), "the command did not run");

    // Control: what the old supervisor did (write to the name after the command planted
    // the link) reaches the victim.
    fx.control(&format!("{plant} && echo '{{\"argv\":1}}' > report.json"))
        .outcome()
        .assert_ok();
    assert_ne!(
        bashrc(&fx),
        before,
        "control: the write went through the link"
    );

    // Control: outside the workspace the same run and report work.
    let outside = fx.out_file("report-outside.json");
    fx.attack(&["--report", s(&outside)], "echo ran > ran2.txt")
        .outcome()
        .assert_ok();
    let json = attacks::read_json(&outside);
    assert!(json.get("exit_code").is_some(), "{json:#}");
}

/// `--audit` in an `--allow-write` directory: refused the same way, nothing created.
#[test]
fn audit_inside_an_allow_write_directory_is_refused() {
    let fx = Fixture::new();
    let logs = fx.root.join("logs");
    attacks::mkdir(&logs);
    let audit = logs.join("audit.jsonl");
    let run = fx
        .attack(
            &["--allow-write", s(&logs), "--audit", s(&audit)],
            "echo ran > ran.txt",
        )
        .run();
    run.assert_code(125)
        .assert_stderr_contains(CODE)
        .assert_stderr_contains(s(&audit));
    assert!(
        std::fs::symlink_metadata(&audit).is_err(),
        "nothing created"
    );
    assert!(!fx.ws.join("ran.txt").exists(), "the command did not run");
    // Control: without the grant the log is written.
    fx.attack(&["--audit", s(&audit)], "true")
        .outcome()
        .assert_ok();
    assert!(!attacks::read_jsonl(&audit).is_empty());
}

/// A path that reaches its directory through a link in the workspace (`ws/out -> outside`)
/// is refused too: the command could point the link anywhere.
#[test]
fn record_path_through_a_link_in_the_workspace_is_refused() {
    let fx = Fixture::new();
    std::os::unix::fs::symlink(&fx.outside, fx.ws.join("out")).expect("symlink");
    let report = fx.ws.join("out/report.json");
    let run = fx.attack(&["--report", s(&report)], "true").run();
    run.assert_code(125)
        .assert_stderr_contains(CODE)
        .assert_stderr_contains("symbolic link");
    assert!(!fx.outside.join("report.json").exists());
    // Control: the directory the link led to, named directly, works.
    let direct = fx.outside.join("report.json");
    fx.attack(&["--report", s(&direct)], "true")
        .outcome()
        .assert_ok();
    assert!(attacks::read_json(&direct).get("exit_code").is_some());
}

/// Run 1 may write `logs/` and plants `logs/audit.jsonl -> outside/victim.sh`; run 2
/// (without the grant) logs to `logs/audit.jsonl`. Refused; the victim unchanged. Control:
/// an append to the name, as the old `OpenOptions::append` did, changes it. The report is written
/// over a planted link as a file of its own.
#[test]
fn audit_log_planted_as_a_symlink_by_an_earlier_run_is_not_followed() {
    let fx = Fixture::new();
    let logs = fx.root.join("logs");
    attacks::mkdir(&logs);
    let audit = logs.join("audit.jsonl");
    let report = logs.join("report.json");
    // A file of the caller's that no mask covers (a link into `~/.bashrc`, which reads as
    // empty, would be quarantined by the sweep after run 1 already).
    let victim = fx.outside.join("victim.sh");
    attacks::write_file(&victim, "echo original\n", 0o644);
    let victim_text = || read_text(&victim).expect("read the victim");
    let before = victim_text();
    let plant = format!(
        "ln -s {v} {a} && ln -s {v} {r}",
        v = sh_quote(&victim),
        a = sh_quote(&audit),
        r = sh_quote(&report)
    );
    fx.attack(&["--allow-write", s(&logs)], &plant)
        .outcome()
        .assert_ok();
    assert!(std::fs::symlink_metadata(&audit).is_ok_and(|m| m.file_type().is_symlink()));

    let run = fx
        .attack(&["--audit", s(&audit)], "echo ran > ran.txt")
        .run();
    run.assert_code(125)
        .assert_stderr_contains(CODE)
        .assert_stderr_contains("symbolic link");
    assert_eq!(
        victim_text(),
        before,
        "the audit log was appended through the link"
    );
    assert!(
        !fx.ws.join("ran.txt").exists(),
        "refused before the command ran"
    );

    fx.attack(&["--report", s(&report)], "true")
        .outcome()
        .assert_ok();
    assert_eq!(
        victim_text(),
        before,
        "the report was written through the link"
    );
    let meta = std::fs::symlink_metadata(&report).expect("report");
    assert!(meta.is_file(), "the link was replaced by the report");
    assert!(attacks::read_json(&report).get("exit_code").is_some());

    // Control: the old code's append follows the planted link.
    std::os::unix::fs::symlink(&victim, logs.join("again.jsonl")).expect("symlink");
    fx.host(&format!(
        "echo '{{}}' >> {}",
        sh_quote(logs.join("again.jsonl"))
    ))
    .run()
    .assert_success();
    assert_ne!(
        victim_text(),
        before,
        "control: the append went through the link"
    );
}

/// Run 1 may write `outside/` and hard-links `outside/target.txt` as `outside/audit.jsonl`
/// (same user, same filesystem); run 2 logs there. Refused (two links); the target is
/// unchanged. Control: an append to the name changes the target.
#[test]
fn audit_log_planted_as_a_hard_link_by_an_earlier_run_is_refused() {
    let fx = Fixture::new();
    let target = fx.outside.join("target.txt");
    let audit = fx.outside.join("audit.jsonl");
    fx.attack(
        &["--allow-write", s(&fx.outside)],
        &format!("ln {} {}", sh_quote(&target), sh_quote(&audit)),
    )
    .outcome()
    .assert_ok();
    let before = read_text(&target);
    let run = fx
        .attack(&["--audit", s(&audit)], "echo ran > ran.txt")
        .run();
    run.assert_code(125)
        .assert_stderr_contains(CODE)
        .assert_stderr_contains("hard links");
    assert_eq!(read_text(&target), before, "the target changed");
    assert!(!fx.ws.join("ran.txt").exists());

    // Control: the old code's append reaches the other name.
    fx.host(&format!("echo '{{}}' >> {}", sh_quote(&audit)))
        .run()
        .assert_success();
    assert_ne!(
        read_text(&target),
        before,
        "control: the append reached the target"
    );
}

/// A FIFO planted at the audit path cannot hang the supervisor (or feed it a reader's
/// choice): refused at once.
#[test]
fn audit_log_planted_as_a_fifo_is_refused_without_blocking() {
    if attacks::not_applicable(&attacks::na::SENTRY_FILES) {
        return;
    }
    let fx = Fixture::new();
    let audit = fx.outside.join("audit.jsonl");
    fx.attack(
        &["--allow-write", s(&fx.outside)],
        &format!("mkfifo {}", sh_quote(&audit)),
    )
    .outcome()
    .assert_ok();
    let run = fx
        .attack(&["--audit", s(&audit)], "true")
        .timeout(std::time::Duration::from_secs(20))
        .run();
    run.assert_code(125).assert_stderr_contains(CODE);
}

/// The policy file is read by the privileged side too: one in an `--allow-write` directory
/// (outside the workspace, so no trust gate pins it) lets the command rewrite the policy of
/// the next run (`allow_write = ["~"]`), which then writes the home. Refused before the
/// run (`E_POLICY_INVALID`), the policy unchanged. Control: the rewrite done (as the old run
/// could), the next run with that policy writes the home.
#[test]
fn policy_file_in_an_allow_write_directory_is_refused() {
    let fx = Fixture::new();
    let conf = fx.root.join("conf");
    attacks::mkdir(&conf);
    let file = conf.join("policy.toml");
    let original = "profile = \"workspace-write\"\n";
    attacks::write_file(&file, original, 0o644);
    let rewrite = format!(
        "printf '[filesystem]\\nallow_write = [\"~\"]\\n' >> {}",
        sh_quote(&file)
    );
    let run = fx
        .attack(&["--policy", s(&file), "--allow-write", s(&conf)], &rewrite)
        .run();
    run.assert_code(125)
        .assert_stderr_contains("E_POLICY_INVALID")
        .assert_stderr_contains(s(&file));
    assert_eq!(
        read_text(&file).as_deref(),
        Some(original),
        "policy rewritten"
    );
    // The policy itself granting its own directory is the same thing.
    let granting = conf.join("granting.toml");
    attacks::write_file(
        &granting,
        format!("[filesystem]\nallow_write = [{:?}]\n", s(&conf)),
        0o644,
    );
    fx.attack(&["--policy", s(&granting)], "true")
        .run()
        .assert_code(125)
        .assert_stderr_contains("E_POLICY_INVALID");

    // Control: the rewrite the old code allowed, then the next run with the policy. (A root
    // caller's container command runs as the workspace's owner: the home, root's, is given
    // to it here, so that the grant is what lets it write.)
    if let (true, Some((uid, gid))) = (attacks::gives_out(), attacks::workspace_owner_ids()) {
        std::os::unix::fs::chown(&fx.home, Some(uid), Some(gid)).expect("chown the home");
    }
    fx.host(&rewrite).run().assert_success();
    fx.attack(&["--policy", s(&file)], "echo pwned > \"$HOME/pwned\"")
        .outcome()
        .assert_ok();
    assert!(
        fx.home.join("pwned").exists(),
        "control: the rewritten policy opened the home"
    );
    // And without the grant the policy in that directory is used as before.
    attacks::write_file(&file, original, 0o644);
    fx.attack(&["--policy", s(&file)], "true")
        .outcome()
        .assert_ok();
}

/// The trust store lies in an `--allow-write` directory (here the state directory itself):
/// it is read-only during the run, but renaming its parent (`stockade/`) moved the approvals
/// away whole, and a workspace approved once then ran un-gated. Now every directory between
/// the writable root and the store is pinned (a mount point cannot be renamed). Control: the
/// same rename on the host leaves the workspace unapproved.
#[test]
fn trust_store_cannot_be_moved_away_by_renaming_its_parent() {
    let fx = Fixture::new();
    let state = fx.root.join("state");
    attacks::write_file(&fx.ws.join(".mcp.json"), "{}\n", 0o644);
    let trust = |verb: &str| {
        fx.stockade(["trust", verb, "--workspace", s(&fx.ws)])
            .env("XDG_STATE_HOME", &state)
            .run()
    };
    trust("approve").assert_success();
    let parent = state.join("stockade");
    let moved = state.join("stockade.old");
    let rename = format!("mv {} {}", sh_quote(&parent), sh_quote(&moved));
    fx.attack(&["--allow-write", s(&state)], &rename)
        .env("XDG_STATE_HOME", &state)
        .outcome()
        .assert_failed_if_guarded();
    assert!(!moved.exists(), "the store's parent was renamed");
    trust("status").assert_success();
    // Moved into a directory named `.stockade` (found by review: a backend that moves the
    // originals back after the run did not look in such directories).
    let hidden = state.join("a/.stockade/loc");
    let hide = format!(
        "mkdir -p {} && mv {} {}",
        sh_quote(state.join("a/.stockade")),
        sh_quote(&parent),
        sh_quote(&hidden)
    );
    fx.attack(&["--allow-write", s(&state)], &hide)
        .env("XDG_STATE_HOME", &state)
        .outcome()
        .assert_failed_if_guarded();
    assert!(!hidden.exists(), "the store's parent was moved away");
    trust("status").assert_success();

    // Control: the rename (as the old run could do it) un-approves the workspace.
    fx.host(&rename).run().assert_success();
    trust("status").assert_failure();
}

/// The trust store reached through a symbolic link in a writable path (`~/.local/state` a
/// link, `--allow-write ~`; found by review): the command could replace the link, and the
/// workspace's approval would vanish, the next approvals going where the command points.
/// Refused before the run, naming the link. Control: the same replacement on the host
/// un-approves the workspace.
#[test]
fn trust_store_behind_a_replaceable_link_is_refused() {
    let fx = Fixture::new();
    let real = fx.home.join("real-state");
    attacks::mkdir(&real);
    attacks::mkdir(&fx.home.join(".local"));
    std::os::unix::fs::symlink(&real, fx.home.join(".local/state")).expect("symlink");
    attacks::write_file(&fx.ws.join(".mcp.json"), "{}\n", 0o644);
    let trust = |verb: &str| fx.stockade(["trust", verb, "--workspace", s(&fx.ws)]).run();
    trust("approve").assert_success();
    let fake = fx.home.join("fake");
    attacks::mkdir(&fake);
    let replace = format!(
        "ln -s {} {} && mv -T {} {}",
        sh_quote(&fake),
        sh_quote(fx.home.join(".local/state.new")),
        sh_quote(fx.home.join(".local/state.new")),
        sh_quote(fx.home.join(".local/state"))
    );
    let run = fx.attack(&["--allow-write", s(&fx.home)], &replace).run();
    run.assert_code(125)
        .assert_stderr_contains("symbolic link")
        .assert_stderr_contains(".local/state");
    trust("status").assert_success();

    fx.host(&replace).run().assert_success();
    trust("status").assert_failure();
}

/// Run 1 may write `g/` and plants `g/cache -> outside` (standing for `/etc/cron.d`, root's
/// code when stockade runs as root); run 2 grants `g/cache`, a cache the user meant, and
/// writes a job into it. Refused before anything runs, naming the link and the real path;
/// nothing reaches `outside`. Control: the same run 2 with the real path granted besides
/// (the explicit way to mean it) writes the job there: the link leads where the attack says.
#[test]
fn write_grant_through_a_link_an_earlier_run_planted_is_refused() {
    let fx = Fixture::new();
    let g = fx.root.join("g");
    attacks::mkdir(&g);
    let plant = format!(
        "ln -s {} {}",
        sh_quote(&fx.outside),
        sh_quote(g.join("cache"))
    );
    fx.attack(&["--allow-write", s(&g)], &plant)
        .outcome()
        .assert_ok();
    let cache = g.join("cache");
    let job = format!("echo pwned > {}", sh_quote(cache.join("job")));
    let run = fx.attack(&["--allow-write", s(&cache)], &job).run();
    run.assert_code(125)
        .assert_stderr_contains("symbolic link")
        .assert_stderr_contains(s(&cache))
        .assert_stderr_contains(s(&fx.outside));
    assert!(
        !fx.outside.join("job").exists(),
        "the grant followed the link"
    );

    fx.attack(
        &["--allow-write", s(&cache), "--allow-write", s(&fx.outside)],
        &job,
    )
    .outcome()
    .assert_ok();
    assert_eq!(
        read_text(&fx.outside.join("job")).as_deref(),
        Some("pwned\n")
    );
}

/// The same with a read grant: `g/data -> ~/.ssh` in a directory runs may write; run 2's
/// `--allow-read g/data` would exempt the keys from their mask. (A run that makes such a link
/// loses it to the sweep, which removes links into masked paths; the link is made on the
/// host here, as one made before the target was masked, or by anything else the caller runs,
/// would be.) Refused, no key read. Control: granting the real path reads the key (a read
/// grant does exempt what it names).
#[test]
fn read_grant_through_a_link_in_a_writable_place_is_refused() {
    let fx = Fixture::new();
    let g = fx.root.join("g");
    attacks::mkdir(&g);
    let ssh = fx.home.join(".ssh");
    std::os::unix::fs::symlink(&ssh, g.join("data")).expect("symlink");
    let data = g.join("data");
    let read = format!("cat {}", sh_quote(data.join("id_rsa")));
    let run = fx.attack(&["--allow-read", s(&data)], &read).run();
    run.assert_code(125)
        .assert_stderr_contains("symbolic link")
        .assert_lacks(&fx.marker("ssh"));

    let direct = format!("cat {}", sh_quote(ssh.join("id_rsa")));
    fx.attack(&["--allow-read", s(&ssh)], &direct)
        .outcome()
        .assert_shows(&fx.marker("ssh"));
}

/// `--workspace g/ws` where run 1 planted `g/ws -> outside`: refused, nothing written there.
/// Control: the real directory as the workspace takes the write.
#[test]
fn workspace_through_a_link_an_earlier_run_planted_is_refused() {
    let fx = Fixture::new();
    let g = fx.root.join("g");
    attacks::mkdir(&g);
    let plant = format!("ln -s {} {}", sh_quote(&fx.outside), sh_quote(g.join("ws")));
    fx.attack(&["--allow-write", s(&g)], &plant)
        .outcome()
        .assert_ok();
    let linked = g.join("ws");
    let run = fx
        .stockade([
            "run",
            "--workspace",
            s(&linked),
            "--shell",
            "echo pwned > job",
        ])
        .cwd(&fx.root)
        .run();
    run.assert_code(125)
        .assert_stderr_contains("symbolic link")
        .assert_stderr_contains(s(&fx.outside));
    assert!(!fx.outside.join("job").exists());

    fx.stockade([
        "run",
        "--workspace",
        s(&fx.outside),
        "--shell",
        "echo pwned > job",
    ])
    .cwd(&fx.outside)
    .run()
    .assert_success();
    assert!(fx.outside.join("job").exists());
}

/// A system link no run of the caller's could have made is followed as before (for anyone
/// but root: `/var/run -> /run` lies in root's `/var`); for root every directory is
/// writable, so only links in `/` are, and the refusal names `/run`.
#[test]
fn system_links_out_of_reach_are_followed_for_a_regular_user() {
    let var_run = Path::new("/var/run");
    if !std::fs::symlink_metadata(var_run).is_ok_and(|m| m.file_type().is_symlink()) {
        eprintln!("skipped: /var/run is not a link here");
        return;
    }
    let fx = Fixture::new();
    let run = fx
        .attack(&["--allow-read", "/var/run"], "ls /var/run >/dev/null")
        .run();
    if attacks::is_root() {
        run.assert_code(125)
            .assert_stderr_contains("symbolic link")
            .assert_stderr_contains("/run");
    } else {
        run.assert_success();
    }
}

/// A grant through a planted link whose target lies in another grant (red team): with the
/// home as the workspace, run 1 plants `~/cache2 -> .config/systemd/user`; run 2's
/// `--allow-write ~/cache2` took the target as a root named by the user, and a home entry
/// named as a root stays writable, so a user unit was written. Now such a grant adds
/// nothing: the directory stays protected. The same for a read grant through `ws/d -> .env`
/// (host-made, as the sweep drops a run's link into a masked path): `.env` stays masked.
/// Controls: the targets granted by their own names are writable and readable (a grant by
/// name is what the link borrowed).
#[test]
fn a_planted_link_into_a_protected_path_of_another_grant_unprotects_nothing() {
    let fx = Fixture::new();
    let units = fx.home.join(".config/systemd/user");
    attacks::mkdir(&units);
    let home_run = |opts: &[&str], script: &str| {
        fx.stockade(["run", "--workspace", s(&fx.home)])
            .args(opts)
            .arg("--shell")
            .arg(attacks::wrap(script))
            .cwd(&fx.home)
            .outcome()
    };
    home_run(&[], "ln -s .config/systemd/user cache2").assert_ok();
    let cache2 = fx.home.join("cache2");
    let unit = "printf '[Service]\nExecStart=/bin/true\n' > cache2/evil.service";
    home_run(&["--allow-write", s(&cache2)], unit).assert_failed();
    assert!(
        !units.join("evil.service").exists(),
        "a user unit was written"
    );
    home_run(
        &["--allow-write", s(&units)],
        "printf '[Service]\n' > .config/systemd/user/ok.service",
    )
    .assert_ok();
    assert!(units.join("ok.service").exists());

    std::os::unix::fs::symlink(".env", fx.ws.join("d")).expect("symlink");
    let d = fx.ws.join("d");
    let dotenv = fx.marker("dotenv");
    fx.attack(&["--allow-read", s(&d)], "cat d")
        .outcome()
        .assert_blocked(&dotenv);
    fx.attack(&["--allow-read", s(&fx.ws.join(".env"))], "cat .env")
        .outcome()
        .assert_shows(&dotenv);
}

/// The check and the resolution of a grant are one walk (red team): a process that swaps
/// `g/cache` between a link to `outside` and a plain directory used to win when the
/// resolver saw the link and the check the directory, and `outside` became a root with no
/// link left to see. Races the swap (`renameat2(RENAME_EXCHANGE)` in a host loop) against
/// 150 runs granting `g/cache`; none may write into `outside`. Control: the same runs with
/// the link left in place are refused every time, and without the check (the real path
/// granted) the write lands, so the attack's write is real.
#[test]
fn a_link_swapped_in_and_out_during_planning_never_becomes_a_grant() {
    // Native mounts each root through a descriptor opened with RESOLVE_NO_SYMLINKS, so a
    // link swapped in after planning fails the run (ELOOP). runsc mounts by path: a link
    // swapped in between the backend's last check and runsc's mount is followed. Seen
    // unprivileged within a few tries; its own finding (mounts by descriptor for gVisor).
    if attacks::not_under(
        "gvisor",
        "runsc resolves mount sources by path after stockade's last check: a link swapped in that window is followed (known, not fixed: mounts by descriptor for the gVisor backend)",
    ) {
        return;
    }
    let Some(python) = attacks::python3("a RENAME_EXCHANGE loop") else {
        return;
    };
    let fx = Fixture::new();
    let g = fx.root.join("g");
    attacks::mkdir(&g);
    attacks::mkdir(&g.join("plain"));
    std::os::unix::fs::symlink(&fx.outside, g.join("cache")).expect("symlink");
    let flipper = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
g = sys.argv[1].encode()
a, b = g + b"/cache", g + b"/plain"
while os.path.exists(g + b"/go"):
    libc.renameat2(-100, a, -100, b, 2)
"#;
    attacks::write_file(&fx.root.join("flip.py"), flipper, 0o644);
    attacks::write_file(&g.join("go"), "", 0o644);
    let mut child = std::process::Command::new(&python)
        .arg(fx.root.join("flip.py"))
        .arg(&g)
        .spawn()
        .expect("start the swap loop");
    let cache = g.join("cache");
    let write = format!("echo pwned > {}", sh_quote(cache.join("job")));
    let mut ran = 0;
    for _ in 0..150 {
        let run = fx.attack(&["--allow-write", s(&cache)], &write).run();
        if run.code() != 125 {
            ran += 1;
        }
        if fx.outside.join("job").exists() {
            break;
        }
    }
    std::fs::remove_file(g.join("go")).expect("stop the swap loop");
    let _ = child.wait();
    assert!(
        !fx.outside.join("job").exists(),
        "a run wrote into the link's target"
    );
    eprintln!("{ran} of 150 runs saw a plain directory");

    // Controls: the link in place is refused; the real path granted takes the write.
    if std::fs::symlink_metadata(&cache).is_ok_and(|m| !m.file_type().is_symlink()) {
        std::fs::rename(g.join("plain"), g.join("tmp")).expect("rename");
        std::fs::rename(&cache, g.join("plain")).expect("rename");
        std::fs::rename(g.join("tmp"), &cache).expect("rename");
    }
    fx.attack(&["--allow-write", s(&cache)], &write)
        .run()
        .assert_code(125);
    fx.attack(
        &["--allow-write", s(&cache), "--allow-write", s(&fx.outside)],
        &write,
    )
    .outcome()
    .assert_ok();
    assert!(fx.outside.join("job").exists());
}

/// Landlock's grants are the planned inodes (issue 32's red team, launch findings 1-2): with
/// `read_scope = "allow-list"`, `allow_read = [shared/d]` is checked for links by name when
/// the run is planned, and the supervisor then opens `shared/d` again to add its rule. A
/// concurrent run that swaps `shared/d` for a link to `private/` in between used to move the
/// grant there (the open followed the link: the secret was read); one that makes it a file
/// made the rule fail, which was taken for "Landlock is not available", and with
/// `--allow-degraded` the run went on with no Landlock at all. Now each rule's path must be
/// what was planned (the same inode, through no link it did not have): anything else refuses
/// the run, whatever `--allow-degraded` says. The swap happens at a known moment: debug
/// builds pause before the rules are added while `STOCKADE_TEST_LANDLOCK_PAUSE` names a file
/// (compiled out of release builds). Controls: before the swap the grant reads its file and
/// not the secret; after it the path really leads to the secret (the host reads it there);
/// a rule on that directory reads the secret (what the moved grant gave); a run planned after
/// the swap is refused by the planner's check by name.
#[test]
fn a_granted_directory_swapped_after_planning_moves_no_grant() {
    if attacks::not_applicable(&attacks::na::ALLOW_LIST) {
        return;
    }
    let fx = Fixture::new();
    let shared = fx.root.join("shared");
    let d = shared.join("d");
    let private = fx.root.join("private");
    attacks::mkdir(&d);
    attacks::mkdir(&private);
    let secret = fx.marker("private");
    let public = fx.marker("public");
    attacks::write_file(&private.join("k"), format!("{secret}\n"), 0o644);
    attacks::write_file(&d.join("k"), format!("{public}\n"), 0o644);
    let policy = |grant: &Path| {
        let file = fx.root.join("allow-list.toml");
        attacks::write_file(
            &file,
            format!(
                "[filesystem]\nread_scope = \"allow-list\"\nallow_read = [\"{}\"]\n",
                s(grant)
            ),
            0o644,
        );
        file
    };
    let p = policy(&d);
    let opts = |extra: &[&str]| -> Vec<String> {
        let mut o = vec![
            "--no-user-policy".to_string(),
            "--policy".into(),
            s(&p).into(),
        ];
        o.extend(extra.iter().map(|e| e.to_string()));
        o
    };
    let read = format!(
        "cat {} {}",
        sh_quote(d.join("k")),
        sh_quote(private.join("k"))
    );
    let run = |extra: &[&str]| {
        let o = opts(extra);
        let o: Vec<&str> = o.iter().map(String::as_str).collect();
        fx.attack(&o, &read)
    };

    // Control: unswapped, the grant reads its own file and not the secret.
    run(&[])
        .outcome()
        .assert_output_contains(&public)
        .assert_lacks(&secret);

    // Each swap while the planned run waits, with and without --allow-degraded.
    let swaps: [(&str, &dyn Fn()); 3] = [
        ("a link to the private directory", &|| {
            std::fs::rename(&d, shared.join("d.old")).expect("move d away");
            std::os::unix::fs::symlink(&private, &d).expect("plant the link");
        }),
        ("another directory", &|| {
            std::fs::rename(&d, shared.join("d.old")).expect("move d away");
            attacks::mkdir(&d);
        }),
        ("a file", &|| {
            std::fs::rename(&d, shared.join("d.old")).expect("move d away");
            attacks::write_file(&d, "a file now\n", 0o644);
        }),
    ];
    let restore = || {
        let _ = std::fs::remove_file(&d);
        let _ = std::fs::remove_dir(&d);
        std::fs::rename(shared.join("d.old"), &d).expect("put d back");
    };
    for (what, swap) in swaps {
        for extra in [&[][..], &["--allow-degraded"][..]] {
            let done = run(extra).run_paused(
                "STOCKADE_TEST_LANDLOCK_PAUSE",
                &fx.root.join("paused"),
                swap,
            );
            done.assert_code(125)
                .assert_stderr_contains("changed since the run was planned")
                .assert_stderr_contains(s(&d))
                .assert_lacks("--allow-degraded")
                .assert_lacks(&secret)
                .assert_lacks(&public);
            eprintln!("swapped for {what} {extra:?}: refused");
            restore();
        }
    }

    // Controls: the swapped path really leads to the secret; a rule on that directory reads
    // it (what the moved grant gave); planned after the swap, the planner refuses by name.
    std::fs::rename(&d, shared.join("d.old")).expect("move d away");
    std::os::unix::fs::symlink(&private, &d).expect("plant the link");
    fx.control(&format!("cat {}", sh_quote(d.join("k"))))
        .outcome()
        .assert_shows(&secret);
    let p2 = policy(&private);
    fx.attack(
        &["--no-user-policy", "--policy", s(&p2)],
        &format!("cat {}", sh_quote(private.join("k"))),
    )
    .outcome()
    .assert_shows(&secret);
    let _ = policy(&d);
    run(&[])
        .run()
        .assert_code(125)
        .assert_stderr_contains("symbolic link")
        .assert_lacks(&secret);

    // A granted file: swapped for a link to the secret, the run is refused; replaced by
    // another plain file (an atomic save), the new file is not granted (the run goes on and
    // cannot read it). Control: planned after the replacement, it is read.
    let f = shared.join("f");
    let newer = fx.marker("replaced");
    attacks::write_file(&f, format!("{public}\n"), 0o644);
    let _ = policy(&f);
    let read_f = format!("cat {}", sh_quote(&f));
    let paused_run = |swap: &dyn Fn()| {
        let o = opts(&[]);
        let o: Vec<&str> = o.iter().map(String::as_str).collect();
        fx.attack(&o, &read_f).run_paused(
            "STOCKADE_TEST_LANDLOCK_PAUSE",
            &fx.root.join("paused"),
            swap,
        )
    };
    paused_run(&|| {
        std::fs::rename(&f, shared.join("f.old")).expect("move f away");
        std::os::unix::fs::symlink(private.join("k"), &f).expect("plant the link");
    })
    .assert_code(125)
    .assert_stderr_contains("changed since the run was planned")
    .assert_lacks(&secret);
    std::fs::remove_file(&f).expect("remove the link");
    std::fs::rename(shared.join("f.old"), &f).expect("put f back");
    paused_run(&|| {
        attacks::write_file(&shared.join("f.new"), format!("{newer}\n"), 0o644);
        std::fs::rename(shared.join("f.new"), &f).expect("replace f");
    })
    .outcome()
    .assert_blocked(&newer);
    run_f_planned_after(&fx, &opts(&[]), &read_f, &newer);
}

fn run_f_planned_after(fx: &Fixture, opts: &[String], script: &str, marker: &str) {
    let o: Vec<&str> = opts.iter().map(String::as_str).collect();
    fx.attack(&o, script).outcome().assert_shows(marker);
}

/// Red team i32 L1: an allow-list grant split around a mask (`--deny-read shared/sec`) has
/// its children granted one by one; a symbolic link among them (`shared/link -> private`,
/// what a run that can write `shared` plants) must not carry a rule onto its target: before
/// the fix its rule followed the link and `private` was read through it and by name.
/// Controls: the host reads the secret through the link; the listed files beside the mask
/// are read and the mask holds; without the mask (one rule on `shared`) nothing of
/// `private` is read either.
#[test]
fn a_link_listed_beside_a_mask_grants_nothing() {
    if attacks::not_applicable(&attacks::na::ALLOW_LIST) {
        return;
    }
    let fx = Fixture::new();
    let shared = fx.root.join("shared");
    let private = fx.root.join("private");
    attacks::mkdir(&shared);
    attacks::mkdir(&private);
    let secret = fx.marker("private");
    let public = fx.marker("public");
    let hidden = fx.marker("masked");
    attacks::write_file(&private.join("k"), format!("{secret}\n"), 0o644);
    attacks::write_file(&shared.join("pub"), format!("{public}\n"), 0o644);
    attacks::write_file(&shared.join("sec"), format!("{hidden}\n"), 0o644);
    let link = shared.join("link");
    std::os::unix::fs::symlink(&private, &link).expect("plant the link");
    let file = fx.root.join("allow-list.toml");
    attacks::write_file(
        &file,
        format!(
            "[filesystem]\nread_scope = \"allow-list\"\nallow_read = [\"{}\"]\n",
            s(&shared)
        ),
        0o644,
    );
    let read = format!(
        "cat {}; cat {}; cat {}; cat {}",
        sh_quote(shared.join("pub")),
        sh_quote(link.join("k")),
        sh_quote(private.join("k")),
        sh_quote(shared.join("sec")),
    );
    let deny = shared.join("sec");
    let opts = |mask: bool| {
        let mut o = vec!["--no-user-policy", "--policy", s(&file)];
        if mask {
            o.extend(["--deny-read", s(&deny)]);
        }
        o
    };

    // Control: the link really leads to the secret.
    fx.control(&format!("cat {}", sh_quote(link.join("k"))))
        .outcome()
        .assert_shows(&secret);
    // Without the mask: one rule on `shared`, the secret is not read.
    fx.attack(&opts(false), &read)
        .outcome()
        .assert_output_contains(&public)
        .assert_output_contains(&hidden)
        .assert_lacks(&secret);
    // The attack: `shared` split around the mask; the listed file is read, the mask holds,
    // and the link grants nothing.
    fx.attack(&opts(true), &read)
        .outcome()
        .assert_output_contains(&public)
        .assert_lacks(&hidden)
        .assert_lacks(&secret);
}

/// A start refused because the workspace changed after planning touches nothing (red team
/// issue 32d, third pass). A nested repository `a` (its git dir pinned, its `config` and
/// `hooks` protected, each with its identity) is exchanged with a plain directory `b` while
/// the planned run waits (debug builds pause there while `STOCKADE_TEST_GVISOR_PAUSE`, or
/// native's `STOCKADE_TEST_LANDLOCK_PAUSE`, names a file): the start is refused, and the
/// sweep after a failed launch used to "move back" the originals under gVisor, which has no
/// pins: `b/.git` went back to `a/.git`, the repository rearranged by a run whose command
/// never ran. Now the tree stays as the exchange left it and nothing is quarantined. Control
/// (gVisor, where a command can rename a directory holding protected paths): the same
/// exchange made by the command itself is undone by the sweep.
#[test]
fn a_start_refused_after_an_exchange_rearranges_nothing() {
    if attacks::not_applicable(&attacks::na::NATIVE_SETUP) {
        return;
    }
    let fx = Fixture::new();
    let (a, b) = (fx.ws.join("a"), fx.ws.join("b"));
    fx.git_host(&["init", "-q", s(&a)]).assert_success();
    attacks::mkdir(&b);
    attacks::write_file(&b.join("notes.txt"), "b\n", 0o644);
    let exchange = || {
        let x = fx.ws.join("x");
        std::fs::rename(&a, &x).expect("move a aside");
        std::fs::rename(&b, &a).expect("move b to a");
        std::fs::rename(&x, &b).expect("move a to b");
    };
    let gvisor = attacks::backend() == "gvisor";
    let pause = if gvisor {
        "STOCKADE_TEST_GVISOR_PAUSE"
    } else {
        "STOCKADE_TEST_LANDLOCK_PAUSE"
    };
    let done = fx
        .attack(&[], "true")
        .run_paused(pause, &fx.root.join("paused"), exchange);
    done.assert_code(125)
        .assert_stderr_contains("E_SANDBOX_SETUP");
    assert!(
        b.join(".git/config").is_file() && a.join("notes.txt").is_file(),
        "the exchanged directories were moved back"
    );
    assert!(!a.join(".git").exists(), "a git dir was moved into a");
    let quarantined = attacks::quarantined_files(&fx.ws);
    assert!(quarantined.is_empty(), "quarantined: {quarantined:?}");
    if gvisor {
        // Control: the command's own exchange is undone.
        exchange();
        fx.attack(&[], "mv a x && mv b a && mv x b").run();
        assert!(
            a.join(".git/config").is_file(),
            "control: the sweep did not move the git dir back"
        );
    }
}

/// The sweep after a run acting through a link the run planted (red team of issue 33, tenth
/// round): a writable root `p/tmp` inside the workspace, whose parent `p` the command
/// replaces by a link to another directory holding a `tmp` with files named like protected
/// paths (`.envrc`, a hook). The sweep of the root used to walk where the link led and, under
/// gVisor and the containers, move those files into a quarantine there (as root under Docker:
/// a victim's `.bashrc`); natively it walked there and told the user to remove them by hand.
/// Now the root is reported replaced, and nothing there is looked at or moved. Control: the
/// same name made in the root itself is refused or quarantined, so the sweep would act on it.
#[test]
fn a_writable_root_whose_parent_the_run_swapped_for_a_link_is_not_swept_through_it() {
    let fx = Fixture::new();
    let parent = fx.ws.join("p");
    let root = parent.join("tmp");
    attacks::mkdir(&root);
    let victim = fx.outside.join("v");
    let hooks = victim.join("tmp/.git/hooks");
    attacks::mkdir(&hooks);
    attacks::write_file(&victim.join("tmp/.envrc"), "export A=1\n", 0o644);
    attacks::write_file(&hooks.join("pre-commit"), "#!/bin/sh\n", 0o755);
    let swap = format!(
        "mv p p.away && ln -s {} p && echo swapped",
        sh_quote(&victim)
    );
    let run = fx.attack(&["--allow-write", s(&root)], &swap).run();
    let kept = victim.join("tmp/.envrc").exists() && hooks.join("pre-commit").exists();
    let untouched = !victim.join("tmp/.stockade").exists();
    run.assert_stdout_contains("swapped")
        .assert_stderr_contains("writable root replaced")
        // Its own hint: no policy line allows it (not the general `unprotect` answer).
        .assert_stderr_contains(
            "no policy line allows this: a directory on the writable root's path",
        );
    assert!(
        kept && untouched,
        "the sweep acted where the link led\n{}",
        run.describe()
    );

    // Control: the root put back, a run makes `.envrc` in it: refused, or quarantined by the
    // sweep.
    std::fs::remove_file(&parent).expect("remove the link");
    std::fs::rename(fx.ws.join("p.away"), &parent).expect("put the directory back");
    let control = fx
        .attack(&["--allow-write", s(&root)], "echo x > p/tmp/.envrc; true")
        .run();
    assert!(
        !root.join(".envrc").exists(),
        "control: the name is not protected here\n{}",
        control.describe()
    );
}
