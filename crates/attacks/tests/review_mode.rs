//! Review mode (issue 19): `stockade run --review` works on a copy-on-write view of the
//! workspace; nothing reaches the workspace until `stockade apply`, which refuses flagged
//! entries unless accepted, never writes through a symbolic link, refuses conflicts and a
//! change set that no longer matches its digest. Each attack has its control: the same step
//! in direct mode (or without the tampering) takes effect.

#![allow(clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

use attacks::{read_json, read_text, write_file, Fixture};

use attacks::review::{codes, entries, review};

/// The change set: path → (kind, flag codes).
fn changes(fx: &Fixture, id: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let mut out = BTreeMap::new();
    for c in entries(fx, id) {
        let kind = match &c["kind"] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Object(o) => o.keys().next().cloned().unwrap_or_default(),
            other => other.to_string(),
        };
        out.insert(
            c["path"].as_str().unwrap_or_default().to_owned(),
            (kind, codes(&c)),
        );
    }
    out
}

fn flags_of<'a>(set: &'a BTreeMap<String, (String, Vec<String>)>, path: &str) -> &'a [String] {
    &set.get(path)
        .unwrap_or_else(|| panic!("{path} is not in the change set: {set:?}"))
        .1
}

/// The basic cycle: the run changes, adds, deletes and chmods; the workspace is untouched
/// until `apply`, after which it holds exactly the run's result.
#[test]
fn a_review_run_writes_nothing_until_apply() {
    let fx = Fixture::without_git();
    write_file(&fx.ws.join("keep.txt"), "old\n", 0o644);
    write_file(&fx.ws.join("gone.txt"), "bye\n", 0o644);
    write_file(&fx.ws.join("tool.sh"), "echo tool\n", 0o644);
    let script = "echo new >> keep.txt && echo hello > added.txt && rm gone.txt && mkdir -p d/e && echo deep > d/e/f.txt && chmod 755 tool.sh";
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    let id = id.expect("a pending change set");
    assert_eq!(read_text(&fx.ws.join("keep.txt")).as_deref(), Some("old\n"));
    assert!(!fx.ws.join("added.txt").exists());
    assert!(fx.ws.join("gone.txt").exists());
    assert!(!fx.ws.join("d").exists());
    run.assert_stderr_contains(&format!("stockade apply {id}"));

    let set = changes(&fx, &id);
    assert_eq!(set["keep.txt"].0, "modified", "{set:?}");
    assert_eq!(set["added.txt"].0, "added", "{set:?}");
    assert_eq!(set["gone.txt"].0, "deleted", "{set:?}");
    assert_eq!(set["tool.sh"].0, "mode-changed", "{set:?}");
    assert!(flags_of(&set, "tool.sh").iter().any(|f| f == "executable"));

    let diff = fx.stockade(["diff", &id, "keep.txt"]).run();
    diff.assert_success().assert_stdout_contains("+new");

    // The executable bit is flagged: refused until accepted, nothing written meanwhile.
    let refused = fx.stockade(["apply", &id, "--all-or-nothing"]).run();
    refused
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED");
    assert_eq!(read_text(&fx.ws.join("keep.txt")).as_deref(), Some("old\n"));
    fx.stockade(["apply", &id, "--accept", "tool.sh"])
        .run()
        .assert_success();
    assert_eq!(
        read_text(&fx.ws.join("keep.txt")).as_deref(),
        Some("old\nnew\n")
    );
    assert_eq!(
        read_text(&fx.ws.join("added.txt")).as_deref(),
        Some("hello\n")
    );
    assert_eq!(
        read_text(&fx.ws.join("d/e/f.txt")).as_deref(),
        Some("deep\n")
    );
    assert!(!fx.ws.join("gone.txt").exists());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(fx.ws.join("tool.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    // Applied whole: the change set is gone.
    fx.stockade(["changes", &id]).run().assert_code(125);

    // Control: in direct mode the same script changes the workspace at once.
    let fx = Fixture::without_git();
    write_file(&fx.ws.join("keep.txt"), "old\n", 0o644);
    write_file(&fx.ws.join("gone.txt"), "bye\n", 0o644);
    write_file(&fx.ws.join("tool.sh"), "echo tool\n", 0o644);
    fx.sandbox(&[], script).run().assert_success();
    assert!(fx.ws.join("added.txt").exists());
}

/// A planted git hook, a build script and a Python `.pth` start-up file are flagged and not
/// applied without acceptance; named with `--accept`, they are.
#[test]
fn planted_hook_build_script_and_pth_are_flagged_and_not_applied_without_acceptance() {
    let fx = Fixture::new();
    let script = "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout \
                  && printf 'fn main(){}\\n' > build.rs \
                  && mkdir -p .venv/lib/python3.11/site-packages && echo 'import os' > .venv/lib/python3.11/site-packages/evil.pth";
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    let id = id.expect("a pending change set");
    let set = changes(&fx, &id);
    for path in [
        ".git/hooks/post-checkout",
        "build.rs",
        ".venv/lib/python3.11/site-packages/evil.pth",
    ] {
        assert!(
            !flags_of(&set, path).is_empty(),
            "{path} is not flagged: {set:?}"
        );
    }
    assert!(flags_of(&set, ".git/hooks/post-checkout")
        .iter()
        .any(|f| f == "git-internals"));
    let refused = fx.stockade(["apply", &id, "--all-or-nothing"]).run();
    refused
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED");
    assert!(!fx.ws.join(".git/hooks/post-checkout").exists());
    assert!(!fx.ws.join("build.rs").exists());
    assert!(!fx.ws.join(".venv").exists());
    // Excluding them applies the rest; they stay pending until accepted.
    fx.stockade(["apply", &id, "--accept", "build.rs"])
        .args(["--exclude", ".git", "--exclude", ".venv"])
        .run()
        .assert_success();
    assert!(fx.ws.join("build.rs").exists());
    assert!(!fx.ws.join(".git/hooks/post-checkout").exists());
    fx.stockade(["apply", &id, "--accept-flagged"])
        .run()
        .assert_success();
    assert!(fx.ws.join(".git/hooks/post-checkout").exists());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(fx.ws.join(".git/hooks/post-checkout"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7000, 0, "no set-id bits");
}

/// A symbolic link the run made out of the workspace is flagged; accepted, it is created as
/// a link and nothing is written where it points. A workspace link the run replaced by a
/// directory is replaced on apply, never written through.
#[test]
fn a_symlink_in_the_change_set_cannot_make_apply_write_outside() {
    let fx = Fixture::without_git();
    std::os::unix::fs::symlink(&fx.outside, fx.ws.join("sub")).unwrap();
    let script = format!(
        "ln -s {} escape && rm sub && mkdir sub && echo inside > sub/target.txt",
        fx.outside.display()
    );
    let (run, id) = review(&fx, &[], &script);
    run.assert_success();
    let id = id.expect("a pending change set");
    let set = changes(&fx, &id);
    assert!(flags_of(&set, "escape")
        .iter()
        .any(|f| f == "symlink-outside"));
    let before = read_text(&fx.outside.join("target.txt"));
    fx.stockade(["apply", &id, "--accept-flagged"])
        .run()
        .assert_success();
    assert_eq!(read_text(&fx.outside.join("target.txt")), before);
    assert!(std::fs::symlink_metadata(fx.ws.join("escape"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::symlink_metadata(fx.ws.join("sub"))
        .unwrap()
        .file_type()
        .is_dir());
    assert_eq!(
        read_text(&fx.ws.join("sub/target.txt")).as_deref(),
        Some("inside\n")
    );
}

/// Between review and apply, a directory of the workspace is swapped for a link out of it:
/// apply refuses and writes nothing there. Control: without the swap, apply writes.
#[test]
fn a_destination_replaced_by_a_symlink_after_the_run_is_refused() {
    for swap in [true, false] {
        let fx = Fixture::without_git();
        write_file(&fx.ws.join("dir/file.txt"), "v1\n", 0o644);
        let (run, id) = review(&fx, &[], "echo v2 > dir/file.txt && echo n > dir/new.txt");
        run.assert_success();
        let id = id.expect("a pending change set");
        if swap {
            std::fs::rename(fx.ws.join("dir"), fx.root.join("moved")).unwrap();
            std::os::unix::fs::symlink(&fx.outside, fx.ws.join("dir")).unwrap();
            write_file(&fx.outside.join("file.txt"), "v1\n", 0o644);
        }
        let apply = fx.stockade(["apply", &id]).run();
        if swap {
            apply.assert_code(125);
            assert_eq!(
                read_text(&fx.outside.join("file.txt")).as_deref(),
                Some("v1\n")
            );
            assert!(!fx.outside.join("new.txt").exists());
        } else {
            apply.assert_success();
            assert_eq!(
                read_text(&fx.ws.join("dir/file.txt")).as_deref(),
                Some("v2\n")
            );
        }
    }
}

/// A change set edited in the state directory after the run is refused by every reader.
/// Control: the untouched change set applies.
#[test]
fn a_change_set_tampered_with_after_the_run_is_detected() {
    for tamper in [true, false] {
        let fx = Fixture::without_git();
        write_file(&fx.ws.join("a.txt"), "a\n", 0o644);
        let (run, id) = review(&fx, &[], "echo reviewed > a.txt");
        run.assert_success();
        let id = id.expect("a pending change set");
        let upper = fx
            .home
            .join(".local/state/stockade/changes")
            .join(&id)
            .join("upper");
        assert_eq!(
            read_text(&upper.join("a.txt")).as_deref(),
            Some("reviewed\n"),
            "the change set lives in the state directory"
        );
        if tamper {
            std::fs::write(upper.join("a.txt"), "swapped after review\n").unwrap();
        }
        let apply = fx.stockade(["apply", &id]).run();
        if tamper {
            apply
                .assert_code(125)
                .assert_stderr_contains("E_CHANGES_TAMPERED");
            assert_eq!(read_text(&fx.ws.join("a.txt")).as_deref(), Some("a\n"));
        } else {
            apply.assert_success();
            assert_eq!(
                read_text(&fx.ws.join("a.txt")).as_deref(),
                Some("reviewed\n")
            );
        }
    }
}

/// A file the host changed after the run started is a conflict; control: unchanged, it
/// applies.
#[test]
fn a_file_changed_on_the_host_since_the_run_is_a_conflict() {
    for change in [true, false] {
        let fx = Fixture::without_git();
        write_file(&fx.ws.join("a.txt"), "base\n", 0o644);
        let (run, id) = review(&fx, &[], "echo agent > a.txt");
        run.assert_success();
        let id = id.expect("a pending change set");
        if change {
            std::fs::write(fx.ws.join("a.txt"), "the user's edit\n").unwrap();
        }
        let apply = fx.stockade(["apply", &id]).run();
        if change {
            apply
                .assert_code(125)
                .assert_stderr_contains("E_CHANGES_CONFLICT")
                .assert_stderr_contains("a.txt");
            assert_eq!(
                read_text(&fx.ws.join("a.txt")).as_deref(),
                Some("the user's edit\n")
            );
        } else {
            apply.assert_success();
            assert_eq!(read_text(&fx.ws.join("a.txt")).as_deref(), Some("agent\n"));
        }
    }
}

/// `--ephemeral`: the same view, thrown away at the end; the report still counts it.
#[test]
fn an_ephemeral_run_leaves_the_workspace_and_the_store_empty() {
    let fx = Fixture::without_git();
    write_file(&fx.ws.join("a.txt"), "a\n", 0o644);
    let records = fx.records();
    let mut opts = records.opts();
    opts.push("--ephemeral");
    let run = fx
        .sandbox(&opts, "echo b > a.txt && echo c > c.txt && cat a.txt")
        .run();
    run.assert_success().assert_stdout_contains("b");
    assert_eq!(read_text(&fx.ws.join("a.txt")).as_deref(), Some("a\n"));
    assert!(!fx.ws.join("c.txt").exists());
    let report = read_json(&records.report);
    assert_eq!(report["review"]["mode"], "ephemeral");
    assert_eq!(report["review"]["added"], 1);
    assert_eq!(report["review"]["modified"], 1);
    let runs = fx.stockade(["runs", "--json"]).run();
    runs.assert_success();
    assert_eq!(runs.stdout.trim(), "[]", "{}", runs.stdout);
}

/// No run, review or direct, can read or change a change set waiting for review.
#[test]
fn the_change_store_is_hidden_from_every_run() {
    let fx = Fixture::without_git();
    // The change set is made by a native review run; the runs that try to read it use the
    // backend under test.
    let (run, id) = review(
        &fx,
        &["--backend", "native"],
        "echo secret-draft > draft.txt",
    );
    run.assert_success();
    let id = id.expect("a pending change set");
    let store = fx.home.join(".local/state/stockade/changes");
    let upper = store.join(&id).join("upper/draft.txt");
    let read = format!("cat {}", attacks::sh_quote(&upper));
    for opts in [&[][..], &["--review"]] {
        let inside = fx.sandbox(opts, &read).run();
        assert!(
            !inside.stdout.contains("secret-draft"),
            "{}",
            inside.describe()
        );
    }
    // Control: the host reads it.
    fx.host(&read)
        .run()
        .assert_success()
        .assert_stdout_contains("secret-draft");
}

/// Git works whole in a review run (commit, branch, a linked worktree, a submodule), its
/// writes reviewed; the host repository is unchanged until apply. In direct mode a linked
/// worktree is refused (control).
#[test]
fn git_commits_branches_worktrees_and_submodules_work_inside_a_review_run() {
    let fx = Fixture::new();
    let head_before = fx.git_host(&["rev-parse", "HEAD"]).stdout;
    let script = "git -c user.name=a -c user.email=a@b commit --allow-empty -qm inside \
                  && git branch feature \
                  && git worktree add -q wt feature \
                  && test -f wt/.git && echo worktree-ok";
    let (run, id) = review(&fx, &[], script);
    run.assert_success().assert_stdout_contains("worktree-ok");
    let id = id.expect("a pending change set");
    assert_eq!(fx.git_host(&["rev-parse", "HEAD"]).stdout, head_before);
    assert!(!fx.ws.join("wt").exists());
    let set = changes(&fx, &id);
    assert!(set
        .iter()
        .any(|(p, (_, f))| p.starts_with(".git/") && f.iter().any(|c| c == "git-internals")));
    fx.stockade(["apply", &id, "--accept-flagged"])
        .run()
        .assert_success();
    let log = fx.git_host(&["log", "--format=%s", "-1"]);
    assert_eq!(log.stdout.trim(), "inside");
    assert!(fx
        .git_host(&["branch", "--list", "feature"])
        .stdout
        .contains("feature"));

    // A submodule the host added and took down again: `git submodule update --init` inside.
    let origin = fx.outside.join("sub-origin");
    let origin_s = origin.display().to_string();
    let git_at = |dir: &str, args: &[&str]| {
        let run = attacks::Cmd::new("git", Path::new(dir))
            .env("HOME", &fx.home)
            .args([
                "-c",
                "safe.directory=*",
                "-c",
                "user.name=a",
                "-c",
                "user.email=a@b",
            ])
            .args(["-c", "protocol.file.allow=always"])
            .args(args)
            .run();
        run.assert_success();
    };
    std::fs::create_dir_all(&origin).unwrap();
    git_at(&origin_s, &["init", "-q"]);
    write_file(&origin.join("lib.txt"), "lib\n", 0o644);
    git_at(&origin_s, &["add", "lib.txt"]);
    git_at(&origin_s, &["commit", "-qm", "lib"]);
    let ws = fx.ws.display().to_string();
    git_at(&ws, &["submodule", "--quiet", "add", &origin_s, "sub"]);
    git_at(&ws, &["commit", "-qm", "sub"]);
    git_at(&ws, &["submodule", "--quiet", "deinit", "-f", "sub"]);
    std::fs::remove_dir_all(fx.ws.join(".git/modules/sub")).unwrap();
    let (run, id) = review(
        &fx,
        &[],
        // The origin is the test's (root's, in the root pass): git trusts another owner's
        // repository only by a global `safe.directory`.
        "printf '[safe]\\n\\tdirectory = *\\n' > /tmp/gitconfig && GIT_CONFIG_GLOBAL=/tmp/gitconfig \
         git -c protocol.file.allow=always submodule --quiet update --init && cat sub/lib.txt",
    );
    run.assert_success().assert_stdout_contains("lib");
    let id = id.expect("a pending change set");
    assert!(!fx.ws.join("sub/lib.txt").exists());
    assert!(!fx.ws.join(".git/modules/sub").exists());
    let set = changes(&fx, &id);
    assert!(flags_of(&set, "sub/.git")
        .iter()
        .any(|f| f == "git-internals"));

    // Control: direct mode refuses the worktree's `.git` redirect.
    let fx = Fixture::new();
    let direct = fx
        .sandbox(
            &[],
            "git branch feature && git worktree add -q wt feature && echo worktree-ok",
        )
        .run();
    assert!(
        !direct.stdout.contains("worktree-ok") || !attacks::creation_guarded(),
        "{}",
        direct.describe()
    );
}

/// Files of another owner or group. A root caller's review run modifies them (its view is
/// made with the supervisor's privileges). An unprivileged caller's view cannot (a user
/// namespace maps only the caller's ids: `EOVERFLOW`): stockade names them before the run.
/// The unprivileged half runs in the root pass as the test user (`runuser`), which is the
/// only way to give a user's workspace a file of group root; the unprivileged pass has no
/// such file to make.
#[test]
fn files_of_other_owners_work_for_root_and_are_named_before_an_unprivileged_review_run() {
    if attacks::skip_unless_root("files of other owners in the workspace") {
        return;
    }
    let fx = Fixture::without_git();
    let other = fx.ws.join("other.txt");
    write_file(&other, "o\n", 0o666);
    std::os::unix::fs::chown(&other, Some(4321), Some(0)).unwrap();
    let (run, id) = review(&fx, &[], "echo changed > other.txt");
    run.assert_success();
    let id = id.expect("a pending change set");
    assert!(changes(&fx, &id).contains_key("other.txt"));

    let Some(user) = attacks::which("runuser").and_then(|_| test_user()) else {
        eprintln!("skipped the unprivileged half: no runuser or no user stockade-test");
        return;
    };
    let fx = Fixture::without_git();
    let bin = fx.stockade_inside();
    write_file(&fx.ws.join("mine.txt"), "m\n", 0o644);
    write_file(&fx.ws.join("rootgroup.txt"), "r\n", 0o664);
    let status = std::process::Command::new("chown")
        .args([
            "-R",
            &format!("{0}:{0}", user),
            &fx.home.display().to_string(),
            &fx.ws.display().to_string(),
        ])
        .status()
        .unwrap();
    assert!(status.success());
    std::os::unix::fs::chown(fx.ws.join("rootgroup.txt"), None, Some(0)).unwrap();
    let script = "echo ok >> mine.txt && echo mine-written; echo x >> rootgroup.txt || echo rootgroup-refused";
    let run = attacks::Cmd::new("runuser", &fx.ws)
        .args([
            "-u",
            &user,
            "--",
            "env",
            &format!("HOME={}", fx.home.display()),
        ])
        .arg(&bin)
        .args(["run", "--review", "--workspace"])
        .arg(&fx.ws)
        .args(["--shell", script])
        .run();
    run.assert_success()
        .assert_stdout_contains("mine-written")
        .assert_stdout_contains("rootgroup-refused")
        .assert_stderr_contains("rootgroup.txt")
        .assert_stderr_contains("another user or group");
    // Control: the same caller in direct mode writes it (the file's mode lets its owner).
    let direct = attacks::Cmd::new("runuser", &fx.ws)
        .args([
            "-u",
            &user,
            "--",
            "env",
            &format!("HOME={}", fx.home.display()),
        ])
        .arg(&bin)
        .args(["run", "--workspace"])
        .arg(&fx.ws)
        .args(["--shell", "echo x >> rootgroup.txt && echo direct-written"])
        .run();
    direct
        .assert_success()
        .assert_stdout_contains("direct-written");
}

/// The unprivileged test user of this machine, if there is one.
fn test_user() -> Option<String> {
    let ok = std::process::Command::new("id")
        .arg("stockade-test")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then(|| "stockade-test".to_owned())
}

/// Under the container engines the view is the engine's own overlay (Docker's `local` volume
/// driver, Podman's `:O` volume) over the workspace, its writes in the run's change directory:
/// a review run's writes, deletions and replaced directories wait in the change set and the
/// workspace is untouched; a disk bound, which that view cannot be given, is refused before
/// anything runs, naming `--disk`, never run unbounded or directly. Control: the same
/// command in a direct run changes the workspace.
#[test]
fn a_container_engines_view_holds_the_runs_writes_and_refuses_a_disk_bound() {
    if !matches!(attacks::backend(), "podman" | "docker") {
        println!(
            "n/a under {}: the container engines' own view (the other backends' views are checked by every test of this file)",
            attacks::backend()
        );
        return;
    }
    let script = "echo new > a.txt && rm b.txt && rm -r d && mkdir d && echo y > d/y";
    let make = || {
        let fx = Fixture::without_git();
        std::fs::write(fx.ws.join("b.txt"), "b\n").unwrap();
        std::fs::create_dir(fx.ws.join("d")).unwrap();
        std::fs::write(fx.ws.join("d/x"), "x\n").unwrap();
        fx
    };
    let fx = make();
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    let id = id.expect("a pending change set");
    assert!(!fx.ws.join("a.txt").exists(), "{}", run.describe());
    assert!(fx.ws.join("b.txt").exists() && fx.ws.join("d/x").exists());
    let set = changes(&fx, &id);
    for (path, kind) in [
        ("a.txt", "added"),
        ("b.txt", "deleted"),
        ("d/x", "deleted"),
        ("d/y", "added"),
    ] {
        assert_eq!(
            set.get(path).map(|c| c.0.as_str()),
            Some(kind),
            "{path}: {set:?}"
        );
    }
    fx.stockade(["apply", &id]).run().assert_success();
    assert_eq!(read_text(&fx.ws.join("a.txt")).as_deref(), Some("new\n"));
    assert!(!fx.ws.join("b.txt").exists() && !fx.ws.join("d/x").exists());

    for mode in ["--review", "--ephemeral"] {
        let fx = make();
        let run = fx.sandbox(&[mode, "--disk", "1M"], script).run();
        run.assert_code(125)
            .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
            .assert_stderr_contains("--disk");
        assert!(!fx.ws.join("a.txt").exists(), "{}", run.describe());
        assert!(fx.ws.join("b.txt").exists(), "{}", run.describe());
    }
    // Control: directly, the same command changes the workspace.
    let fx = make();
    fx.sandbox(&[], script).run().assert_success();
    assert!(fx.ws.join("a.txt").exists() && !fx.ws.join("b.txt").exists());
}

/// `--disk SIZE` bounds what a review or ephemeral run writes: past it, ENOSPC inside and
/// `E_LIMIT_REACHED` in the report. Control: the same write without the bound succeeds.
/// Without `--review`/`--ephemeral` the flag is refused (it would bound nothing).
#[test]
fn disk_bound_stops_a_review_runs_writes_with_enospc() {
    if attacks::not_applicable(&attacks::na::VIEW_DISK) {
        return;
    }
    let write = "head -c 3000000 /dev/zero > big 2>/dev/null; echo write-status=$?";
    for mode in ["--review", "--ephemeral"] {
        let fx = Fixture::without_git();
        let records = fx.records();
        let mut opts = records.opts();
        opts.extend([mode, "--disk", "1M"]);
        let run = fx.sandbox(&opts, write).run();
        run.assert_success()
            .assert_stdout_contains("write-status=1");
        let report = read_json(&records.report);
        let hits = report["limit_hits"].as_array().cloned().unwrap_or_default();
        assert!(
            hits.iter()
                .any(|h| h["limit"] == "disk" && h["code"] == "E_LIMIT_REACHED"),
            "{report}"
        );
        assert_eq!(report["review"]["disk_bound_reached"], true);
        assert!(!fx.ws.join("big").exists());
        // Control: no bound, the write fits.
        let fx = Fixture::without_git();
        fx.sandbox(&[mode], write)
            .run()
            .assert_success()
            .assert_stdout_contains("write-status=0");
    }
    // A review run under the bound keeps its (partial) change set, applicable as any other.
    let fx = Fixture::without_git();
    let (run, id) = review(
        &fx,
        &["--disk", "1M"],
        "echo small > small.txt; head -c 3000000 /dev/zero > big; true",
    );
    run.assert_success();
    let id = id.expect("a pending change set");
    let set = changes(&fx, &id);
    assert!(
        set.contains_key("small.txt") && set.contains_key("big"),
        "{set:?}"
    );
    // `big` is zeros: not text (flagged `binary`), applied when accepted.
    assert!(
        flags_of(&set, "big").iter().any(|f| f == "binary"),
        "{set:?}"
    );
    fx.stockade(["apply", &id, "--accept", "big"])
        .run()
        .assert_success();
    assert_eq!(
        read_text(&fx.ws.join("small.txt")).as_deref(),
        Some("small\n")
    );
    // Direct mode: refused.
    let fx = Fixture::without_git();
    fx.sandbox(&["--disk", "1M"], "true")
        .run()
        .assert_code(125)
        .assert_stderr_contains("--review or --ephemeral");
}

/// `review = true` in a policy file makes every run of it a review run; `policy show` says so.
#[test]
fn review_true_in_a_policy_file_reviews_every_run() {
    let fx = Fixture::without_git();
    let policy = fx.out_file("review.toml");
    std::fs::write(&policy, "review = true\n").unwrap();
    let policy = policy.display().to_string();
    let (run, id) = review(&fx, &["--policy", &policy], "echo x > new.txt");
    run.assert_success();
    assert!(id.is_some());
    assert!(!fx.ws.join("new.txt").exists());
    let records = fx.records();
    let mut opts = records.opts();
    opts.extend(["--policy", policy.as_str()]);
    fx.sandbox(&opts, "echo y > other.txt")
        .run()
        .assert_success();
    assert!(!fx.ws.join("other.txt").exists());
    assert_eq!(read_json(&records.report)["review"]["mode"], "review");
    let show = fx
        .stockade(["policy", "show", "--json", "--policy", &policy])
        .run();
    show.assert_success()
        .assert_stdout_contains("\"workspace_mode\":\"review\"");
    // Control: without the file the same run writes the workspace.
    fx.sandbox(&[], "echo z > direct.txt")
        .run()
        .assert_success();
    assert!(fx.ws.join("direct.txt").exists());
}

/// A run's sparse file of huge apparent size (`truncate -s 60G`, one block of data) costs
/// what the run wrote: `finish` records it (read through its data extents, not 60 GiB of
/// zeros through the hasher: that took minutes of CPU per run before), flagged `binary`
/// (saying it is sparse) and `large`, never cut or dropped; `apply` refuses it unaccepted,
/// and accepted writes it sparse: the same size and bytes, a few blocks on the host's disk.
/// Control: a file of zeros the run wrote as data is applied as data (its blocks allocated),
/// without the sparse reason: apply keeps what the run made, it does not punch holes.
#[test]
fn a_huge_sparse_file_is_recorded_flagged_and_applied_sparse() {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let fx = Fixture::without_git();
    let script = "truncate -s 60G big && printf payload | dd of=big bs=4096 seek=262144 conv=notrunc 2>/dev/null \
                  && head -c 1048576 /dev/zero > zeros && echo made";
    let (run, id) = review(&fx, &[], script);
    run.assert_success().assert_stdout_contains("made");
    let id = id.expect("a pending change set");
    let all = entries(&fx, &id);
    let big = all
        .iter()
        .find(|c| c["path"] == "big")
        .unwrap_or_else(|| panic!("big is not in the change set: {all:?}"));
    assert_eq!(big["size"], 60u64 << 30, "{big}");
    let flags = codes(big);
    assert!(
        flags.iter().any(|f| f == "binary") && flags.iter().any(|f| f == "large"),
        "{big}"
    );
    let reasons = big["flags"].to_string();
    if !reasons.contains("sparse") {
        println!("n/a: the change store's filesystem keeps no holes: {big}");
        return;
    }
    let zeros = all
        .iter()
        .find(|c| c["path"] == "zeros")
        .expect("zeros in the change set");
    assert!(!zeros["flags"].to_string().contains("sparse"), "{zeros}");

    fx.stockade(["apply", &id, "--all-or-nothing"])
        .run()
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED");
    assert!(!fx.ws.join("big").exists());
    fx.stockade(["apply", &id, "--accept-flagged"])
        .run()
        .assert_success();
    let m = std::fs::metadata(fx.ws.join("big")).unwrap();
    assert_eq!(m.len(), 60 << 30);
    assert!(m.blocks() * 512 < 1 << 20, "{} blocks on disk", m.blocks());
    let mut buf = [0u8; 9];
    std::fs::File::open(fx.ws.join("big"))
        .unwrap()
        .read_exact_at(&mut buf, (1 << 30) - 1)
        .unwrap();
    assert_eq!(&buf, b"\0payload\0");
    // Control: the zeros the run wrote as data are data on the host too.
    let z = std::fs::metadata(fx.ws.join("zeros")).unwrap();
    assert_eq!(z.len(), 1 << 20);
    assert!(z.blocks() * 512 >= 1 << 20, "{} blocks on disk", z.blocks());

    // Under a disk bound the view's upper is a small tmpfs, where a sparse file fits at any
    // apparent size: copied into the store as one (not 60 GiB of zeros), and applied so.
    if attacks::not_applicable(&attacks::na::VIEW_DISK) {
        return;
    }
    let fx = Fixture::without_git();
    let (run, id) = review(&fx, &["--disk", "1M"], "truncate -s 60G big && echo made");
    run.assert_success().assert_stdout_contains("made");
    let id = id.expect("a pending change set");
    let all = entries(&fx, &id);
    assert!(
        all.iter()
            .any(|c| c["path"] == "big" && c["flags"].to_string().contains("sparse")),
        "{all:?}"
    );
    fx.stockade(["apply", &id, "--accept", "big"])
        .run()
        .assert_success();
    let m = std::fs::metadata(fx.ws.join("big")).unwrap();
    assert_eq!((m.len(), m.blocks()), (60 << 30, 0));
}

/// Directory modes a review run set reach the workspace as the run set them, or need
/// acceptance: `chmod 000`, `111` and `500` directories (with files inside) are applied with
/// those bits after their contents (an unprivileged finish recorded 0700, the bits it opened
/// up to read them); `1777` keeps its sticky bit and is flagged `world-writable`; setgid is
/// flagged `setuid` and never applied (the sandbox refuses set-id bits to the command; the
/// unit tests make one by hand). Control: the same script in direct mode leaves the same
/// modes in the workspace.
#[test]
fn directory_modes_the_run_set_are_applied_or_flagged() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let open = |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
    let script = "for d in d000 d111 d500 d1777 dsg; do mkdir -p $d/in && echo $d > $d/in/f; done \
                  && chmod 000 d000 && chmod 111 d111 && chmod 500 d500 && chmod 1777 d1777 \
                  && { chmod 2755 dsg 2>/dev/null; echo made; }";
    let fx = Fixture::without_git();
    let (run, id) = review(&fx, &[], script);
    run.assert_success().assert_stdout_contains("made");
    let id = id.expect("a pending change set");
    let set = changes(&fx, &id);
    assert_eq!(flags_of(&set, "d1777"), ["world-writable"], "{set:?}");
    for d in ["d000", "d111", "d500"] {
        assert!(flags_of(&set, d).is_empty(), "{d}: {set:?}");
    }
    let all = entries(&fx, &id);
    let recorded = |p: &str| {
        all.iter()
            .find(|c| c["path"] == p)
            .and_then(|c| c["mode"].as_u64())
    };
    assert_eq!(recorded("d000"), Some(0o000));
    assert_eq!(recorded("d111"), Some(0o111));
    let sgid = recorded("dsg").unwrap_or(0) & 0o2000 != 0;
    if sgid {
        assert_eq!(flags_of(&set, "dsg"), ["setuid"], "{set:?}");
    }
    fx.stockade(["apply", &id, "--all-or-nothing"])
        .run()
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED");
    assert!(!fx.ws.join("d000").exists());
    fx.stockade(["apply", &id, "--accept-flagged"])
        .run()
        .assert_success();
    for (d, want) in [
        ("d000", 0o000),
        ("d111", 0o111),
        ("d500", 0o500),
        ("d1777", 0o1777),
        ("dsg", 0o755),
    ] {
        let p = fx.ws.join(d);
        assert_eq!(mode(&p), want, "{d}");
        open(&p).unwrap();
        assert_eq!(read_text(&p.join("in/f")), Some(format!("{d}\n")));
    }

    // Control: direct mode leaves the modes the script set.
    let fx = Fixture::without_git();
    fx.sandbox(&[], script)
        .run()
        .assert_success()
        .assert_stdout_contains("made");
    for (d, want) in [
        ("d000", 0o000),
        ("d111", 0o111),
        ("d500", 0o500),
        ("d1777", 0o1777),
    ] {
        let p = fx.ws.join(d);
        assert_eq!(mode(&p), want, "{d}");
        open(&p).unwrap();
    }
    if sgid {
        assert_eq!(mode(&fx.ws.join("dsg")), 0o2755);
    }
}

/// Host-run files in other cases (`GNUMAKEFILE`, `DOCKERFILE`, `Vagrantfile` as
/// `VAGRANTFILE`, `.ENVRC`, a hook under `.GIT`): make, docker and compose read case
/// variants, and on a case-insensitive filesystem any case is the same file. Each is flagged
/// and refused without acceptance. Control: a text file beside them is applied unflagged.
#[test]
fn host_run_files_in_any_case_are_flagged() {
    let names = [
        "GNUMAKEFILE",
        "DOCKERFILE",
        "VAGRANTFILE",
        ".ENVRC",
        "sub/Docker-Compose.YML",
        ".GIT/hooks/pre-commit",
    ];
    let fx = Fixture::without_git();
    let script = "mkdir -p sub .GIT/hooks && for f in GNUMAKEFILE DOCKERFILE VAGRANTFILE .ENVRC sub/Docker-Compose.YML .GIT/hooks/pre-commit; do echo 'all: ; id' > $f; done && echo text > notes.txt";
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    let id = id.expect("a pending change set");
    let set = changes(&fx, &id);
    for n in names {
        assert!(!flags_of(&set, n).is_empty(), "{n}: {set:?}");
    }
    assert!(flags_of(&set, "notes.txt").is_empty(), "{set:?}");
    fx.stockade(["apply", &id, "--all-or-nothing"])
        .run()
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED");
    let mut only = vec!["apply", &id, "--exclude", ".GIT", "--exclude", "sub"];
    for n in &names[..4] {
        only.extend(["--exclude", n]);
    }
    fx.stockade(only).run().assert_success();
    assert_eq!(
        read_text(&fx.ws.join("notes.txt")).as_deref(),
        Some("text\n")
    );
    for n in names {
        assert!(!fx.ws.join(n).exists(), "{n} applied");
    }
}

/// Whether the file at `path` reads as having a hole now (`SEEK_HOLE` from its start stops
/// before its end).
fn reports_a_hole(path: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).expect("open the upper's file");
    let size = f.metadata().expect("stat").len() as i64;
    // SAFETY: lseek on a descriptor this function holds open touches no memory.
    let hole = unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_HOLE) };
    hole >= 0 && hole < size
}

/// Drops the page cache of `path` (as root every file's, as `echo 3 > drop_caches` does;
/// else the file's own, which `dd iflag=nocache` asks of the kernel unprivileged).
fn drop_cache_of(path: &Path) {
    let _ = std::process::Command::new("sync").status();
    if attacks::is_root() {
        std::fs::write("/proc/sys/vm/drop_caches", "3\n").expect("drop caches as root");
    } else {
        let status = std::process::Command::new("dd")
            .arg(format!("if={}", path.display()))
            .args(["iflag=nocache", "count=0", "status=none"])
            .status()
            .expect("run dd");
        assert!(status.success());
    }
}

/// Red team of review, F3: a run's `fallocate -l 1M f; cat f` leaves unwritten extents that
/// ext4 reports as data while their pages are cached (so at finish) and as holes once they
/// leave the cache (`drop_caches`, memory pressure). The file's identity depends on its bytes
/// only, so `changes` and `apply` still accept the change set (before: E_CHANGES_TAMPERED).
/// Controls: the layout did flip (else n/a), and a byte changed in the upper is still
/// tampering.
#[test]
fn a_file_whose_extents_leave_the_cache_after_the_run_is_not_tampered() {
    for tamper in [false, true] {
        let fx = Fixture::without_git();
        let (run, id) = review(
            &fx,
            &[],
            "fallocate -l 1M f && cat f > /dev/null && echo text > g && echo made",
        );
        run.assert_success().assert_stdout_contains("made");
        let id = id.expect("a pending change set");
        let upper = fx
            .home
            .join(".local/state/stockade/changes")
            .join(&id)
            .join("upper");
        let before = reports_a_hole(&upper.join("f"));
        drop_cache_of(&upper.join("f"));
        let after = reports_a_hole(&upper.join("f"));
        if before == after {
            println!("n/a: the change store's filesystem reports the same layout before and after the cache is dropped ({before})");
            return;
        }
        if tamper {
            use std::os::unix::fs::FileExt;
            std::fs::OpenOptions::new()
                .write(true)
                .open(upper.join("f"))
                .expect("open f")
                .write_all_at(b"x", 4096)
                .expect("write f");
            fx.stockade(["changes", &id])
                .run()
                .assert_code(125)
                .assert_stderr_contains("E_CHANGES_TAMPERED");
            fx.stockade(["apply", &id, "--accept-flagged"])
                .run()
                .assert_code(125)
                .assert_stderr_contains("E_CHANGES_TAMPERED");
            assert!(!fx.ws.join("f").exists());
            continue;
        }
        let set = changes(&fx, &id);
        assert_eq!(set["f"].0, "added", "{set:?}");
        fx.stockade(["apply", &id, "--accept-flagged"])
            .run()
            .assert_success();
        let f = std::fs::read(fx.ws.join("f")).expect("f applied");
        assert_eq!(f.len(), 1 << 20);
        assert!(f.iter().all(|&b| b == 0));
        assert_eq!(read_text(&fx.ws.join("g")).as_deref(), Some("text\n"));
    }
}

/// Red team of review, F2 (finish side): a run makes one file and 300 more names of it (hard
/// links). Each name is an entry flagged `hard-link` (applied as that many copies), refused
/// unaccepted with nothing written; accepted, each name is written. Control: a file with one
/// name beside them is not flagged and is applied unaccepted.
#[test]
fn a_file_with_many_names_is_flagged_and_not_applied_unaccepted() {
    let fx = Fixture::without_git();
    let script = "yes 'a line of text' | head -c 65536 > f0 && mkdir l && i=1 && while [ $i -le 300 ]; do ln f0 l/f$i; i=$((i+1)); done; echo one > single.txt && echo made";
    let (run, id) = review(&fx, &[], script);
    run.assert_success().assert_stdout_contains("made");
    let id = id.expect("a pending change set");
    let set = changes(&fx, &id);
    assert_eq!(set.len(), 303, "{set:?}");
    for (path, (kind, flags)) in &set {
        match path.as_str() {
            "l" | "single.txt" => assert!(flags.is_empty(), "{path}: {flags:?}"),
            _ => {
                assert_eq!(kind, "added");
                assert_eq!(flags, &["hard-link".to_owned()], "{path}");
            }
        }
    }
    let shown = fx.stockade(["changes", &id]).run();
    shown
        .assert_success()
        .assert_stdout_contains("301 names of one file");
    fx.stockade(["apply", &id, "--all-or-nothing"])
        .run()
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED")
        .assert_stderr_contains("hard-link");
    assert!(!fx.ws.join("f0").exists() && !fx.ws.join("l").exists());
    // Control: the file with one name is applied unaccepted.
    fx.stockade(["apply", &id, "--only", "single.txt"])
        .run()
        .assert_success();
    assert_eq!(
        read_text(&fx.ws.join("single.txt")).as_deref(),
        Some("one\n")
    );
    assert!(!fx.ws.join("f0").exists());
    // Accepted: every name is written, each a file of its own.
    fx.stockade(["apply", &id, "--accept-flagged"])
        .run()
        .assert_success();
    let f0 = std::fs::read(fx.ws.join("f0")).expect("f0 applied");
    assert_eq!(f0.len(), 65536);
    assert_eq!(std::fs::read(fx.ws.join("l/f300")).expect("l/f300"), f0);
}
