//! Git dirs planted during a run (issue 15, item 3): a directory git accepts as a git dir
//! (`HEAD`, `objects/`, `refs/`, or a `commondir`) assembled in any order — config or hooks
//! first, the parts that make git recognise it last. Refused in the run where that can be
//! decided when it is made (a `HEAD` next to a live config), otherwise taken apart by the
//! sweep: a live config, non-sample hooks and a `commondir` are quarantined. The decisive
//! check is git on the HOST afterwards (`--git-dir` with a work tree, as a user's or an
//! agent's host-side tool would reach it) running nothing; the control is the same steps
//! without stockade, after which git runs the planted fsmonitor or hook.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::path::Path;

use attacks::{json_str, Fixture, Records};

/// `git status` and `git commit` on the host with `dir` as the git dir and a fresh work tree.
fn host_git_with(fx: &Fixture, dir: &str) {
    let wt = fx.root.join(format!("wt-{}", dir.replace('/', "-")));
    std::fs::create_dir_all(&wt).unwrap();
    let git_dir = format!("--git-dir={}", fx.ws.join(dir).display());
    let work_tree = format!("--work-tree={}", wt.display());
    fx.git_host(&[&git_dir, &work_tree, "status"]);
    fx.git_host(&[
        &git_dir,
        &work_tree,
        "-c",
        "user.email=h@example.invalid",
        "-c",
        "user.name=H",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "after the run",
    ]);
}

const MAKE_GIT_DIR: &str = "echo 'ref: refs/heads/main' > HEAD && mkdir -p objects refs/heads";

/// The run reported a `planted_git_dir` violation for `<dir>/<name>` (report and stderr).
fn assert_swept(records: &Records, run: &attacks::Run, fx: &Fixture, rel: &str) {
    let path = fx.ws.join(rel);
    let violations = records.violations();
    assert!(
        violations
            .iter()
            .any(|v| json_str(v, "kind") == "planted_git_dir"
                && Path::new(json_str(v, "path")) == path
                && json_str(v, "action").contains("moved to")),
        "no planted_git_dir violation for {}:\n{violations:#?}\n{}",
        path.display(),
        run.describe()
    );
    run.assert_stderr_contains(&format!(
        "stockade: violation[E_SANDBOX_VIOLATION]: planted git dir {}",
        path.display()
    ));
}

#[test]
fn bare_repository_assembled_config_first_is_refused_or_swept() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let fx = Fixture::new();
    let (script, flag) = fx.tripwire("pwned-config-first");
    let config = format!(
        "printf '[core]\\n\\tbare = false\\n\\tfsmonitor = {}\\n'",
        script.display()
    );
    // Plainly: the live config first, then what makes it a git dir (refused in the run).
    let plain = format!("mkdir b && cd b && {config} > config && {MAKE_GIT_DIR}");
    let records = fx.records();
    let run = fx.attack(&records.opts(), &plain).outcome();
    run.assert_failed_if_guarded();
    records.assert_blocked(&run.run, &["b/HEAD", "b/objects", "b/refs"]);
    host_git_with(&fx, "b");
    assert!(!flag.exists(), "the planted fsmonitor ran on the host");
    // An inert config first, the git dir, and the live key written into the existing file
    // last: the creation that made `c` a git dir turned its config into a fresh read-only
    // copy first (issue 32, third round: `sys::mediate::freeze_configs`), so the write
    // fails during the run. (Before, it landed and git read it while the run lasted; only
    // the sweep took it out afterwards.)
    let raced = format!(
        "mkdir c && cd c && printf '[core]\\n\\tbare = false\\n' > config && {MAKE_GIT_DIR} && {config} > config"
    );
    let records = fx.records();
    let run = fx.attack(&records.opts(), &raced).outcome();
    run.assert_failed_if_guarded();
    let kept = std::fs::read_to_string(fx.ws.join("c/config")).unwrap_or_default();
    assert!(!kept.contains("fsmonitor"), "{kept}");
    host_git_with(&fx, "c");
    assert!(!flag.exists(), "the planted fsmonitor ran on the host");
    // Control: the same steps on the host, and git runs the fsmonitor.
    fx.control(&plain.replace("mkdir b", "mkdir d").replace("cd b", "cd d"))
        .outcome()
        .assert_ok();
    host_git_with(&fx, "d");
    assert!(
        flag.exists(),
        "control: git did not run the planted fsmonitor"
    );
}

/// `config.worktree` is a config too: with `extensions.worktreeConfig` (an inert key) in
/// `config`, git reads it, and a `core.worktree` and `core.fsmonitor` there made host git in
/// that directory run the fsmonitor while the run lasted (the guard looked at `config` only;
/// red team of issue 30). Refused in the run like a live `config`.
#[test]
fn bare_repository_with_a_live_config_worktree_is_refused_in_the_run() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let fx = Fixture::new();
    let (script, flag) = fx.tripwire("pwned-config-worktree");
    let steps = |dir: &str| {
        format!(
            "mkdir {dir} && cd {dir} && \
             printf '[core]\\n\\trepositoryformatversion = 1\\n[extensions]\\n\\tworktreeConfig = true\\n' > config && \
             printf '[core]\\n\\tbare = false\\n\\tfsmonitor = {}\\n' > config.worktree && {MAKE_GIT_DIR}",
            script.display()
        )
    };
    let records = fx.records();
    let run = fx.attack(&records.opts(), &steps("b")).outcome();
    run.assert_failed_if_guarded();
    records.assert_blocked(&run.run, &["b/HEAD", "b/objects", "b/refs"]);
    host_git_with(&fx, "b");
    assert!(!flag.exists(), "the planted fsmonitor ran on the host");
    // Control: the same steps on the host, and git runs the fsmonitor of config.worktree.
    fx.control(&steps("d")).outcome().assert_ok();
    host_git_with(&fx, "d");
    assert!(
        flag.exists(),
        "control: git did not run the fsmonitor of config.worktree"
    );
}

#[test]
fn bare_repository_assembled_hooks_first_is_swept() {
    let fx = Fixture::new();
    let (script, flag) = fx.tripwire("pwned-hooks-first");
    let steps = |dir: &str| {
        format!(
            "mkdir -p {dir}/hooks && cd {dir} && cp {} hooks/pre-commit && chmod +x hooks/pre-commit && {MAKE_GIT_DIR}",
            script.display()
        )
    };
    let records = fx.records();
    let run = fx.attack(&records.opts(), &steps("b")).outcome();
    run.assert_ok();
    assert_swept(&records, &run.run, &fx, "b/hooks/pre-commit");
    host_git_with(&fx, "b");
    assert!(!flag.exists(), "the planted hook ran on the host");
    fx.control(&steps("d")).outcome().assert_ok();
    host_git_with(&fx, "d");
    assert!(flag.exists(), "control: git did not run the planted hook");
}

#[test]
fn nested_dot_git_assembled_out_of_order_runs_nothing() {
    let fx = Fixture::new();
    let (script, flag) = fx.tripwire("pwned-nested");
    let steps = |dir: &str| {
        format!(
            "mkdir -p {dir}/.git/hooks && cd {dir}/.git; \
             printf '[core]\\n\\tfsmonitor = {s}\\n' > config; \
             cp {s} hooks/pre-commit; chmod +x hooks/pre-commit; {MAKE_GIT_DIR}",
            s = script.display()
        )
    };
    let records = fx.records();
    let run = fx.attack(&records.opts(), &steps("sub")).outcome();
    let violations = records.violations();
    assert!(
        !violations.is_empty(),
        "nothing reported\n{}",
        run.run.describe()
    );
    for args in [
        &["status"][..],
        &[
            "-c",
            "user.email=h@example.invalid",
            "-c",
            "user.name=H",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
    ] {
        let mut all = vec!["-C", "sub"];
        all.extend_from_slice(args);
        fx.git_host(&all);
    }
    assert!(
        !flag.exists(),
        "the planted fsmonitor or hook ran on the host"
    );
    fx.control(&steps("other")).outcome().assert_ok();
    fx.git_host(&["-C", "other", "status"]);
    assert!(
        flag.exists(),
        "control: git did not run the planted fsmonitor"
    );
}

#[test]
fn git_dir_with_a_commondir_redirect_is_swept() {
    let fx = Fixture::new();
    let (script, flag) = fx.tripwire("pwned-commondir");
    // `evil` holds the config but no HEAD (not a git dir by itself); `b` is a HEAD and a
    // `commondir` that sends git to it.
    let steps = |dir: &str| {
        format!(
            "mkdir -p {dir}/evil/objects {dir}/evil/refs {dir}/b && \
             printf '[core]\\n\\tbare = false\\n\\tfsmonitor = {}\\n' > {dir}/evil/config && \
             echo 'ref: refs/heads/main' > {dir}/b/HEAD && echo ../evil > {dir}/b/commondir",
            script.display()
        )
    };
    let records = fx.records();
    let run = fx.attack(&records.opts(), &steps("x")).outcome();
    run.assert_ok();
    assert_swept(&records, &run.run, &fx, "x/b/commondir");
    host_git_with(&fx, "x/b");
    assert!(!flag.exists(), "the redirected config ran on the host");
    fx.control(&steps("y")).outcome().assert_ok();
    host_git_with(&fx, "y/b");
    assert!(flag.exists(), "control: git did not follow the commondir");
}

/// Across two runs: the first leaves hooks, `objects`, `refs` and a `HEAD` git would not
/// accept (so the directory is not a git dir when that run ends); the second only rewrites
/// `HEAD`'s content, which moves no directory's ctime. The first run's sweep must already
/// have taken the hook out.
#[test]
fn a_head_made_valid_in_a_later_run_finds_no_hook() {
    let fx = Fixture::new();
    let (script, flag) = fx.tripwire("pwned-later-head");
    let first = |dir: &str| {
        format!(
            "mkdir -p {dir}/hooks {dir}/objects {dir}/refs/heads && cp {} {dir}/hooks/pre-commit && chmod +x {dir}/hooks/pre-commit && echo not-yet > {dir}/HEAD",
            script.display()
        )
    };
    let second = |dir: &str| format!("echo 'ref: refs/heads/main' > {dir}/HEAD");
    let records = fx.records();
    let run = fx.attack(&records.opts(), &first("b")).outcome();
    run.assert_ok();
    assert_swept(&records, &run.run, &fx, "b/hooks/pre-commit");
    fx.attack(&[], &second("b")).outcome().assert_ok();
    host_git_with(&fx, "b");
    assert!(!flag.exists(), "the planted hook ran on the host");
    fx.control(&first("d")).outcome().assert_ok();
    fx.control(&second("d")).outcome().assert_ok();
    host_git_with(&fx, "d");
    assert!(flag.exists(), "control: git did not run the planted hook");
}

/// A bare repository that exists when the run starts (a mirror kept in the workspace) is a
/// git dir like `.git`: its config, hooks and `commondir` are read-only and refused on
/// creation, and it cannot be renamed away and rebuilt.
#[test]
fn existing_bare_repository_is_protected_like_dot_git() {
    let fx = Fixture::new();
    let (script, flag) = fx.tripwire("pwned-existing-bare");
    for dir in ["mirror.git", "control.git"] {
        fx.git_host(&["init", "-q", "--bare", dir]).assert_success();
    }
    let attack = |dir: &str| {
        format!(
            "printf '[core]\\n\\tbare = false\\n\\tfsmonitor = {s}\\n' >> {dir}/config; \
             cp {s} {dir}/hooks/pre-commit; chmod +x {dir}/hooks/pre-commit; \
             mv {dir} {dir}.old && cp -r {dir}.old {dir}; \
             printf '[core]\\n\\tbare = false\\n\\tfsmonitor = {s}\\n' >> {dir}/config; \
             cp {s} {dir}/hooks/pre-commit; chmod +x {dir}/hooks/pre-commit",
            s = script.display()
        )
    };
    let records = fx.records();
    let run = fx.attack(&records.opts(), &attack("mirror.git")).outcome();
    run.assert_failed_if_guarded();
    if attacks::creation_guarded() {
        records.assert_blocked(
            &run.run,
            &["mirror.git/hooks/pre-commit", "mirror.git/hooks"],
        );
    } else {
        // gVisor: the bare repository is a pinned git dir, a bind of itself, so the rename is
        // refused (EBUSY) and its config and hooks are read-only: nothing is planted, and the
        // sweep has nothing to take out.
        assert!(
            !fx.ws.join("mirror.git.old").exists(),
            "the pinned bare repository was renamed"
        );
        assert!(
            !fx.ws.join("mirror.git/hooks/pre-commit").exists(),
            "a hook was planted in the bare repository"
        );
    }
    host_git_with(&fx, "mirror.git");
    assert!(
        !flag.exists(),
        "the planted fsmonitor or hook ran on the host"
    );
    fx.control(&attack("control.git")).outcome().assert_ok();
    host_git_with(&fx, "control.git");
    assert!(
        flag.exists(),
        "control: git did not run the planted fsmonitor"
    );
}

/// Found by the second red-team pass: a `refs` that is a symlink to a directory made only
/// later (by the host's build, or a later run, which does not move the planted directory's
/// ctime), with a config hard-linked to a second name and rewritten through it after the
/// git dir was complete. The sweep counts the dangling `refs` and takes the config out.
#[test]
fn a_git_dir_completed_later_through_a_refs_link_is_swept() {
    let fx = Fixture::new();
    let (script, flag) = fx.tripwire("pwned-refs-link");
    let attack = format!(
        "mkdir e e/objects && printf '[core]\\n\\tbare = false\\n' > .cfg && ln .cfg e/config \
         && echo 'ref: refs/heads/main' > e/HEAD && ln -s ../later e/refs \
         && printf '[core]\\n\\tbare = false\\n\\tworktree = ..\\n\\tfsmonitor = {}\\n' > .cfg && rm .cfg",
        script.display()
    );
    let records = fx.records();
    let run = fx.attack(&records.opts(), &attack).outcome();
    run.ran();
    std::fs::create_dir_all(fx.ws.join("later/heads")).unwrap();
    host_git_with(&fx, "e");
    assert!(!flag.exists(), "the planted fsmonitor ran on the host");
    // Control: the same steps on the host, then the directory the link names.
    std::fs::remove_dir_all(fx.ws.join("e")).ok();
    std::fs::remove_dir_all(fx.ws.join("later")).ok();
    fx.control(&attack).outcome().assert_ok();
    std::fs::create_dir_all(fx.ws.join("later/heads")).unwrap();
    host_git_with(&fx, "e");
    assert!(
        flag.exists(),
        "control: git did not run the planted fsmonitor"
    );
}

/// A bare repository inside `.git` that nothing points to (`.git/inner`): git runs its config
/// and hooks once told to use it (`--git-dir`, a gitfile made later on the host), as a bare
/// repository's elsewhere in the workspace, so it is protected alike. The red team of issue 33
/// (eighth round) found it writable under gVisor and the container backends (the walk looked
/// for git dirs outside `.git` only): a run put a `core.fsmonitor` and a hook there, and both
/// ran on the host afterwards.
#[test]
fn a_git_dir_hidden_in_dot_git_is_protected_like_a_bare_repository() {
    let fx = Fixture::new();
    let (script, flag) = fx.tripwire("pwned-hidden-in-dot-git");
    fx.git_host(&["init", "-q"]).assert_success();
    for dir in [".git/inner", ".git/control"] {
        fx.git_host(&["init", "-q", "--bare", dir]).assert_success();
    }
    let attack = |dir: &str| {
        format!(
            "printf '[core]\\n\\tbare = false\\n\\tfsmonitor = {s}\\n' >> {dir}/config; \
             cp {s} {dir}/hooks/pre-commit; chmod +x {dir}/hooks/pre-commit; \
             mv {dir} {dir}.old && cp -r {dir}.old {dir}; \
             printf '[core]\\n\\tbare = false\\n\\tfsmonitor = {s}\\n' >> {dir}/config; \
             cp {s} {dir}/hooks/pre-commit; chmod +x {dir}/hooks/pre-commit; true",
            s = script.display()
        )
    };
    let records = fx.records();
    let run = fx.attack(&records.opts(), &attack(".git/inner")).outcome();
    run.ran();
    if attacks::creation_guarded() {
        records.assert_blocked(&run.run, &[".git/inner/hooks/pre-commit"]);
    }
    assert!(
        !fx.ws.join(".git/inner/hooks/pre-commit").exists(),
        "a hook was planted in the git dir hidden in .git\n{}",
        run.run.describe()
    );
    let config = std::fs::read_to_string(fx.ws.join(".git/inner/config")).unwrap_or_default();
    assert!(!config.contains("fsmonitor"), "{config}");
    host_git_with(&fx, ".git/inner");
    if fx.ws.join(".git/inner.old").exists() {
        host_git_with(&fx, ".git/inner.old");
    }
    assert!(
        !flag.exists(),
        "the planted fsmonitor or hook ran on the host\n{}",
        run.run.describe()
    );
    // Control: the same steps on the host, and git runs them.
    fx.control(&attack(".git/control")).outcome().assert_ok();
    host_git_with(&fx, ".git/control");
    assert!(
        flag.exists(),
        "control: git did not run the planted fsmonitor"
    );
}

/// A git dir assembled inside `.git` during the run, hooks first (no creation guard knows it
/// for a git dir's until its `HEAD` is there): the sweep goes into `.git`'s own files too, and
/// takes the hook out, under every backend (natively it stayed: the sweep did not look below
/// `.git`; under gVisor and the containers the staged `.git` brought it back renamed, whole).
#[test]
fn a_git_dir_assembled_in_dot_git_hooks_first_is_swept() {
    let fx = Fixture::new();
    let (script, flag) = fx.tripwire("pwned-assembled-in-dot-git");
    fx.git_host(&["init", "-q"]).assert_success();
    let steps = |dir: &str| {
        format!(
            "mkdir -p {dir}/hooks && cp {s} {dir}/hooks/pre-commit && chmod +x {dir}/hooks/pre-commit \
             && cd {dir} && {MAKE_GIT_DIR}",
            s = script.display()
        )
    };
    let records = fx.records();
    let run = fx.attack(&records.opts(), &steps(".git/new")).outcome();
    run.ran();
    let violations = records.violations();
    assert!(
        violations
            .iter()
            .any(|v| json_str(v, "path").contains("/.git/new")),
        "nothing reported of .git/new:\n{violations:#?}\n{}",
        run.run.describe()
    );
    let ws_git = fx.ws.join(".git");
    let left: Vec<String> = std::fs::read_dir(&ws_git)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("new"))
        .collect();
    for dir in &left {
        assert!(
            !ws_git.join(dir).join("hooks/pre-commit").exists(),
            "the hook stayed in .git/{dir}\n{}",
            run.run.describe()
        );
        host_git_with(&fx, &format!(".git/{dir}"));
    }
    assert!(
        !flag.exists(),
        "the planted hook ran on the host\n{}",
        run.run.describe()
    );
    fx.control(&steps(".git/control")).outcome().assert_ok();
    host_git_with(&fx, ".git/control");
    assert!(flag.exists(), "control: git did not run the planted hook");
}

/// A worktree admin dir's look below a directory the run made in `.git`
/// (`.git/X/worktrees/Y`, `commondir` `../..`): git takes `.git/X`, with the run's config and
/// hooks, for its common dir. Only `.git/worktrees/<name>` is git's own; this one is swept
/// like any git dir assembled during the run (red team of issue 33, eighth round: natively
/// and under gVisor host git ran its fsmonitor and hook). Control: the same on the host.
#[test]
fn a_worktree_admin_dir_below_a_planted_common_dir_is_swept() {
    let fx = Fixture::new();
    let (script, flag) = fx.tripwire("pwned-planted-common-dir");
    fx.git_host(&["init", "-q"]).assert_success();
    let steps = |x: &str| {
        format!(
            "mkdir -p {x}/objects {x}/refs/heads {x}/hooks {x}/worktrees/Y && \
             printf '[core]\\n\\tfsmonitor = {s}\\n' > {x}/config && \
             cp {s} {x}/hooks/pre-commit && chmod +x {x}/hooks/pre-commit && \
             echo ../.. > {x}/worktrees/Y/commondir && \
             echo 'ref: refs/heads/main' > {x}/worktrees/Y/HEAD && \
             echo /nonexistent/.git > {x}/worktrees/Y/gitdir",
            s = script.display()
        )
    };
    let run = fx.attack(&[], &steps(".git/X")).outcome();
    run.ran();
    for dir in [".git/X", ".git/X.stockade-refused"] {
        if fx.ws.join(dir).join("worktrees/Y").exists() {
            host_git_with(&fx, &format!("{dir}/worktrees/Y"));
        }
    }
    assert!(
        !flag.exists(),
        "host git ran the planted common dir's fsmonitor or hook\n{}",
        run.run.describe()
    );
    fx.control(&steps(".git/C")).outcome().assert_ok();
    host_git_with(&fx, ".git/C/worktrees/Y");
    assert!(
        flag.exists(),
        "control: git did not use the planted common dir"
    );
}
