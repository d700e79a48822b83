//! Links where a preset puts an agent's state (second red team of issue 18). stockade makes the
//! state directory and its private directories before a run; a symbolic link on the way, or
//! at a private directory, would carry what the preset protects by name (and the run's own
//! tmpfs) elsewhere. Each refuses the run (`E_POLICY_INVALID`, naming the link) and nothing is
//! written past it. Controls: on the host, the same writes through the same links land
//! outside, and without a link the same run starts.
//!
//! Also: a FIFO planted at Claude Code's working-directory file makes `stockade shell-prefix`
//! refuse at once instead of waiting forever for a reader.

use std::time::Duration;

use attacks::*;

/// `stockade run --agent claude-code` with a stand-in key, running `script`.
fn agent_run(fx: &Fixture, script: &str) -> Run {
    fx.sandbox(&["--agent", "claude-code"], script)
        .env("ANTHROPIC_API_KEY", "sk-ant-api03-link-test-key-0123456789")
        .timeout(Duration::from_secs(60))
        .run()
}

const PLANT: &str = "echo planted > \"$CLAUDE_CONFIG_DIR/settings.json\"; echo ran-inside";

#[test]
fn a_link_on_the_way_to_the_state_directory_refuses_the_run() {
    let fx = Fixture::new();
    let elsewhere = fx.root.join("elsewhere");
    mkdir(&elsewhere);
    mkdir(&fx.home.join(".local/state"));
    std::os::unix::fs::symlink(&elsewhere, fx.home.join(".local/state/stockade"))
        .expect("plant the link");
    let run = agent_run(&fx, PLANT);
    run.assert_code(125)
        .assert_stderr_contains("E_POLICY_INVALID")
        .assert_stderr_contains("symbolic link")
        .assert_lacks("ran-inside");
    assert!(
        walk(&elsewhere, &|_| false).is_empty(),
        "something was made past the link: {:?}",
        walk(&elsewhere, &|_| false)
    );
    // Control: through the link, what lands "in the state directory" lands elsewhere.
    fx.host("mkdir -p ~/.local/state/stockade/claude-code && echo x > ~/.local/state/stockade/claude-code/settings.json")
        .run()
        .assert_success();
    assert!(elsewhere.join("claude-code/settings.json").exists());
}

#[test]
fn a_linked_private_directory_refuses_the_run() {
    let fx = Fixture::new();
    let host_snapshots = fx.root.join("host-snapshots");
    mkdir(&host_snapshots);
    write_file(
        &host_snapshots.join("snapshot-bash-1.sh"),
        "# host\n",
        0o644,
    );
    let state = fx.home.join(".local/state/stockade/claude-code");
    mkdir(&state);
    std::os::unix::fs::symlink(&host_snapshots, state.join("shell-snapshots"))
        .expect("plant the link");
    let script = "echo 'touch /tmp/pwned' >> \"$CLAUDE_CONFIG_DIR/shell-snapshots/snapshot-bash-1.sh\"; echo ran-inside";
    let run = agent_run(&fx, script);
    run.assert_code(125)
        .assert_stderr_contains("E_POLICY_INVALID")
        .assert_stderr_contains("symbolic link")
        .assert_lacks("ran-inside");
    assert_eq!(
        read_text(&host_snapshots.join("snapshot-bash-1.sh")).as_deref(),
        Some("# host\n")
    );
    // Control: on the host the same append through the link reaches the host's file.
    fx.host("echo '# appended' >> \"$HOME/.local/state/stockade/claude-code/shell-snapshots/snapshot-bash-1.sh\"")
        .run()
        .assert_success();
    assert_eq!(
        read_text(&host_snapshots.join("snapshot-bash-1.sh")).as_deref(),
        Some("# host\n# appended\n")
    );
    // Control: without the link the run starts, and its snapshots are its own (the host's
    // file is not there to append to).
    std::fs::remove_file(state.join("shell-snapshots")).expect("remove the link");
    let run = agent_run(
        &fx,
        &format!("ls \"$CLAUDE_CONFIG_DIR/shell-snapshots\" | wc -l; {script}"),
    );
    run.assert_success().assert_stdout_contains("0\nran-inside");
}

#[test]
fn a_fifo_at_the_cwd_file_is_refused_at_once() {
    let fx = Fixture::new();
    // Claude Code makes the file in its temporary directory with a name of its shape
    // (`claude-<4 hex>-cwd`): a temporary directory of the fixture's own.
    let tmp = fx.root.join("tmp");
    mkdir(&tmp);
    chmod(&tmp, 0o700);
    let cwd_file = format!("{}/claude-a1b2-cwd", tmp.display());
    let string = |file: &str| format!("echo hi && pwd -P >| {file}");
    fx.host(&format!("mkfifo {}", sh_quote(&cwd_file)))
        .run()
        .assert_success();
    let ws = fx.ws.display().to_string();
    let run = fx
        .stockade(["shell-prefix", "--workspace", &ws, &string(&cwd_file)])
        .env("TMPDIR", &tmp)
        .timeout(Duration::from_secs(30))
        .run();
    let _ = std::fs::remove_file(&cwd_file);
    run.assert_failure()
        .assert_stderr_contains("working-directory file")
        .assert_lacks("hi\n");
    // Control: a plain path gets the file, with the directory the command ended in.
    let plain = format!("{}/claude-c3d4-cwd", tmp.display());
    let run = fx
        .stockade(["shell-prefix", "--workspace", &ws, &string(&plain)])
        .env("TMPDIR", &tmp)
        .timeout(Duration::from_secs(30))
        .run();
    let written = read_text(std::path::Path::new(&plain));
    let _ = std::fs::remove_file(&plain);
    run.assert_success().assert_stdout_contains("hi");
    assert_eq!(written.as_deref().map(str::trim), Some(ws.as_str()));
}

/// Root with a user's `HOME` (`sudo -E stockade run --agent claude-code ...`, issue 31 F5)
/// would make the state directory and its `.claude.json` root's, in the user's home, and the
/// user's own runs could not use them: the run is refused (`E_POLICY_INVALID`, naming
/// `sudo -H`) and nothing is made. Control: the same home owned by the caller runs and gets
/// its state. Root only: an unprivileged caller cannot make a home another user owns.
#[test]
fn root_with_a_users_home_is_refused_and_makes_nothing() {
    if !is_root() {
        println!("skipped: needs root (a home owned by another user)");
        return;
    }
    let fx = Fixture::new();
    let chown = |uid: u32| {
        std::os::unix::fs::chown(&fx.home, Some(uid), None).expect("chown the home");
    };
    chown(65534);
    let run = agent_run(&fx, "echo ran-inside");
    chown(0);
    run.assert_code(125)
        .assert_stderr_contains("E_POLICY_INVALID")
        .assert_stderr_contains("sudo -H")
        .assert_lacks("ran-inside");
    assert!(
        !fx.home.join(".local/state/stockade").exists(),
        "state was made in a home the caller does not own"
    );
    // Control: the caller's own home.
    agent_run(&fx, "echo ran-inside")
        .assert_success()
        .assert_stdout_contains("ran-inside");
    assert!(fx
        .home
        .join(".local/state/stockade/claude-code/.claude.json")
        .exists());
}

/// A FIFO or a directory a run leaves at the worker's `.claude.json` (issue 31, F4): the next
/// run neither opens the FIFO (it would wait for a writer forever) nor follows it; it replaces it
/// by the seed, with a note, and starts. A directory is left as it is, with a note. Control:
/// on the host, opening the same FIFO waits (cut short by `timeout`).
#[test]
fn a_fifo_or_directory_at_the_state_file_is_replaced_or_left_with_a_note() {
    let fx = Fixture::new();
    let file = fx
        .home
        .join(".local/state/stockade/claude-code/.claude.json");
    agent_run(
        &fx,
        "rm -f \"$CLAUDE_CONFIG_DIR/.claude.json\" && mkfifo \"$CLAUDE_CONFIG_DIR/.claude.json\" && echo planted",
    )
    .assert_success()
    .assert_stdout_contains("planted");
    let is_fifo = |f: &std::path::Path| {
        std::fs::symlink_metadata(f)
            .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()))
    };
    if !is_fifo(&file) {
        // gVisor's sweep quarantines special files a run leaves in a writable root: the FIFO
        // is planted as a native run leaves it, to test the next run's reading on its own.
        fx.host(&format!("rm -f {f} && mkfifo {f}", f = sh_quote(&file)))
            .run()
            .assert_success();
    }
    assert!(is_fifo(&file));
    // Control: a reader of the FIFO waits.
    fx.host(&format!("timeout 2 cat {}; echo rc=$?", sh_quote(&file)))
        .run()
        .assert_stdout_contains("rc=124");
    let run = agent_run(&fx, "echo ran-inside");
    run.assert_success()
        .assert_stdout_contains("ran-inside")
        .assert_stderr_contains("not a regular file");
    assert!(std::fs::symlink_metadata(&file).unwrap().is_file());
    assert!(read_text(&file)
        .unwrap_or_default()
        .contains("hasCompletedOnboarding"));

    agent_run(
        &fx,
        "rm -f \"$CLAUDE_CONFIG_DIR/.claude.json\" && mkdir \"$CLAUDE_CONFIG_DIR/.claude.json\" && echo planted",
    )
    .assert_success();
    agent_run(&fx, "echo ran-inside")
        .assert_success()
        .assert_stderr_contains("is a directory");
    assert!(file.is_dir());
}
