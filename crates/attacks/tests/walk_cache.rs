//! The walk of the writable roots between runs (issue 32, item 1): whatever a run remembers
//! of an earlier run's walk, a change made to the workspace between two runs (by the earlier
//! run's command, by anyone on the host, in any way the walk looks for) is seen by the next
//! run. Every test here makes a big-ish workspace (200 directories of 20 files, with deeper
//! ones), lets it settle (the walk trusts only directories whose ctime is older than
//! `workspace::SETTLED`, 3 s, before it starts), runs once (run 1, which would fill a cache),
//! changes the workspace, and runs again (run 2): what the walk finds must be masked or
//! protected in run 2 as in a first run. Controls: the same read or write on the host
//! succeeds, and where the protection depends on what the walk found, the same step on a path
//! the walk had no reason to find succeeds inside run 2.
//!
//! A test that passes only because run 2 walked everything proves nothing about a cache:
//! [`assert_cache_used`] checks run 2 took directories from the cache, once the cache prints
//! how many it did (`STOCKADE_LOG=debug`) and [`CACHE_EXPECTED`] says the cache has landed.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use attacks::{read_text, write_file, Fixture, Run};

/// Directories of the big tree, and files in each.
const DIRS: usize = 200;
const FILES: usize = 20;

/// Longer than `workspace::SETTLED` (3 s): a directory made before this sleep is one the walk
/// may trust in run 1.
const SETTLE: Duration = Duration::from_millis(3500);

/// Whether every run 2 here must prove it took directories from the walk cache (the debug
/// line `walk: N dirs from cache, M listed`, N > 0): `true` since the cache landed
/// (22bf800). `STOCKADE_TEST_WALK_CACHE=1` asks for it when this is `false`.
const CACHE_EXPECTED: bool = true;

/// What comes before N in the walk's debug line.
const CACHE_LINE: &str = "walk: ";

/// A fixture whose workspace holds `tree/dNNN/` (200 directories of 20 files, each with
/// `a/b/c` below it), with `setup` run on it, all settled.
fn settled(setup: impl FnOnce(&Fixture)) -> Fixture {
    let fx = Fixture::new();
    let tree = fx.ws.join("tree");
    for d in 0..DIRS {
        let dir = tree.join(format!("d{d:03}"));
        std::fs::create_dir_all(dir.join("a/b/c")).unwrap();
        for f in 0..FILES {
            std::fs::write(dir.join(format!("f{f:02}.txt")), "data\n").unwrap();
        }
        std::fs::write(dir.join("a/b/c/plain.txt"), "plain\n").unwrap();
    }
    // Traversable by the sandbox's uid when the caller is root.
    for p in attacks::walk(&tree, &|_| false) {
        if p.is_dir() {
            attacks::chmod(&p, 0o755);
        }
    }
    attacks::chmod(&tree, 0o755);
    setup(&fx);
    std::thread::sleep(SETTLE);
    fx
}

/// `tree/dNNN` (relative to the workspace).
fn d(n: usize) -> String {
    format!("tree/d{n:03}")
}

/// Run 1: the walk that a cache would remember.
fn run1(fx: &Fixture) {
    fx.sandbox_argv(&[], &["true"])
        .env("STOCKADE_LOG", "debug")
        .run()
        .assert_success();
}

/// A run 2 (an attack) with the walk's debug lines on stderr.
fn run2(fx: &Fixture, opts: &[&str], script: &str) -> attacks::Outcome {
    let out = fx
        .attack(opts, script)
        .env("STOCKADE_LOG", "debug")
        .outcome();
    assert_cache_used(&out.run);
    out
}

/// Run 2 took directories from the walk cache (see [`CACHE_EXPECTED`]).
fn assert_cache_used(run: &Run) {
    let asked = std::env::var_os("STOCKADE_TEST_WALK_CACHE").is_some_and(|v| v == "1");
    if !(CACHE_EXPECTED || asked) {
        return;
    }
    let from_cache = run.stderr.lines().find_map(|l| {
        let rest = &l[l.find(CACHE_LINE)? + CACHE_LINE.len()..];
        rest.split_whitespace().next()?.parse::<usize>().ok()
    });
    assert!(
        from_cache.is_some_and(|n| n > 0),
        "run 2 took no directory from the walk cache (`{CACHE_LINE}N dirs from cache`) (a test that walks everything proves \
         nothing about the cache):\n{}",
        run.describe()
    );
}

fn write(fx: &Fixture, rel: &str, contents: &str) {
    write_file(&fx.ws.join(rel), contents, 0o644);
}

fn mv(fx: &Fixture, from: &str, to: &str) {
    std::fs::rename(fx.ws.join(from), fx.ws.join(to))
        .unwrap_or_else(|e| panic!("mv {from} {to}: {e}"));
}

/// Nothing changed between the runs: what run 1 found deep in the tree (a dotenv file, a
/// protected `.envrc`, a nested repository's config and hooks) is masked and protected in
/// run 2 as in run 1 (a cache that skips an unchanged directory must still give back what
/// the directory held). Control: the host reads and writes them.
#[test]
fn what_run_one_found_in_unchanged_directories_holds_in_run_two() {
    let fx = settled(|fx| {
        write(
            fx,
            &format!("{}/a/b/c/.env", d(7)),
            &fx.marker("deep-dotenv"),
        );
        write(fx, &format!("{}/a/.envrc", d(8)), "export A=1\n");
        let nested = fx.ws.join(d(9)).join("a/b");
        fx.git_host(&["init", "-q", &nested.display().to_string()])
            .assert_success();
        for p in attacks::walk(&nested.join(".git"), &|_| false) {
            if p.is_dir() {
                attacks::chmod(&p, 0o755);
            }
        }
    });
    run1(&fx);
    let nested_config = fx.ws.join(d(9)).join("a/b/.git/config");
    let config_before = read_text(&nested_config).unwrap();
    let read = format!("cat {}/a/b/c/.env", d(7));
    run2(&fx, &[], &read).assert_hidden(&fx.marker("deep-dotenv"));
    let script = format!(
        "echo 'export EVIL=1' >> {d8}/a/.envrc; \
         printf '[core]\\n\\tfsmonitor = /bin/evil\\n' >> {d9}/a/b/.git/config; \
         echo evil > {d9}/a/b/.git/hooks/pre-commit",
        d8 = d(8),
        d9 = d(9)
    );
    run2(&fx, &[], &script).ran();
    assert_eq!(
        read_text(&fx.ws.join(d(8)).join("a/.envrc")).as_deref(),
        Some("export A=1\n")
    );
    assert_eq!(read_text(&nested_config), Some(config_before));
    assert!(!fx.ws.join(d(9)).join("a/b/.git/hooks/pre-commit").exists());
    // Control: the host reads and writes them.
    fx.control(&read)
        .outcome()
        .assert_shows(&fx.marker("deep-dotenv"));
    fx.control(&script).outcome().assert_ok();
    assert!(read_text(&fx.ws.join(d(8)).join("a/.envrc")).is_some_and(|t| t.contains("EVIL")));
    assert!(fx.ws.join(d(9)).join("a/b/.git/hooks/pre-commit").exists());
}

/// A dotenv file (`deny_read`: `.env`, `.env.*`) appears between the runs in an old
/// directory, in every way a name can appear: written deep in an old directory, renamed into
/// place, a symlink named `.env`, written by run 1's own command, an old directory renamed
/// over an empty one, two old trees swapped (the same paths, other inodes, old ctimes below),
/// a whole old tree moved in from outside the workspace (only the destination's ctime moves,
/// not the moved directories'). Run 2 reads none of them. Control: the host reads each, and
/// run 2 reads the plain file beside each.
#[test]
fn dotenv_files_appearing_between_runs_are_masked() {
    let fx = settled(|fx| {
        // Renamed into place later.
        write(
            fx,
            &format!("{}/a/b/staged.txt", d(11)),
            &fx.marker("renamed"),
        );
        // The target of a symlink named `.env`.
        write(
            fx,
            &format!("{}/a/target.txt", d(12)),
            &fx.marker("symlinked"),
        );
        // Renamed over the empty `a2` later.
        std::fs::create_dir(fx.ws.join(d(13)).join("a2")).unwrap();
        write(
            fx,
            &format!("{}/new/deep/.env.local", d(13)),
            &fx.marker("over"),
        );
        // Swapped: `p/q/.env` ends up at `r/q/.env`.
        write(fx, &format!("{}/p/q/.env", d(14)), &fx.marker("swapped"));
        write(fx, &format!("{}/r/q/plain.txt", d(14)), "plain\n");
        // Moved in from outside.
        write_file(
            &fx.outside.join("moved/x/y/.env.production"),
            fx.marker("moved-in"),
            0o644,
        );
        for p in [
            fx.ws.join(d(13)),
            fx.ws.join(d(14)),
            fx.outside.join("moved"),
        ] {
            for q in attacks::walk(&p, &|_| false) {
                if q.is_dir() {
                    attacks::chmod(&q, 0o755);
                }
            }
        }
    });
    // Run 1 writes one itself.
    let by_run = format!("{}/a/b/c/.env.local", d(16));
    fx.attack(
        &[],
        &format!("printf '%s' {} > {by_run}", fx.marker("by-run-one")),
    )
    .outcome()
    .assert_ok();
    // Between the runs, on the host (within the second of run 1's end).
    let deep = format!("{}/a/b/c/.env", d(10));
    write(&fx, &deep, &fx.marker("deep-new"));
    mv(
        &fx,
        &format!("{}/a/b/staged.txt", d(11)),
        &format!("{}/a/b/.env.production", d(11)),
    );
    symlink("target.txt", fx.ws.join(d(12)).join("a/.env")).unwrap();
    std::fs::remove_dir(fx.ws.join(d(13)).join("a2")).unwrap();
    mv(&fx, &format!("{}/new", d(13)), &format!("{}/a2", d(13)));
    mv(&fx, &format!("{}/p", d(14)), &format!("{}/t", d(14)));
    mv(&fx, &format!("{}/r", d(14)), &format!("{}/p", d(14)));
    mv(&fx, &format!("{}/t", d(14)), &format!("{}/r", d(14)));
    std::fs::rename(fx.outside.join("moved"), fx.ws.join(d(15)).join("moved")).unwrap();

    let cases = [
        (deep.clone(), "deep-new"),
        (format!("{}/a/b/.env.production", d(11)), "renamed"),
        (format!("{}/a/.env", d(12)), "symlinked"),
        (format!("{}/a2/deep/.env.local", d(13)), "over"),
        (format!("{}/r/q/.env", d(14)), "swapped"),
        (format!("{}/moved/x/y/.env.production", d(15)), "moved-in"),
        (by_run, "by-run-one"),
    ];
    let script: String = cases
        .iter()
        .map(|(p, _)| format!("cat {p}; echo; cat $(dirname {p})/../f00.txt 2>/dev/null; "))
        .collect();
    let inside = run2(&fx, &[], &script);
    for (path, kind) in &cases {
        inside.assert_lacks(&fx.marker(kind));
        fx.control(&format!("cat {path}"))
            .outcome()
            .assert_shows(&fx.marker(kind));
    }
    // Control: the directories are readable in run 2 (the plain file swapped away from `r`).
    run2(&fx, &[], &format!("cat {}/p/q/plain.txt", d(14))).assert_shows("plain");
}

/// Protected paths (`deny_write`: host-executed project files) appear between the runs in old
/// directories: an `.envrc` written deep, a `.vscode/tasks.json`, a `.cargo/config.toml`
/// renamed into place, an `.envrc` in an old tree moved over an empty directory. Run 2 cannot
/// change them. Control: the host can, and run 2 writes the plain file beside each.
#[test]
fn protected_paths_appearing_between_runs_are_read_only() {
    let fx = settled(|fx| {
        write(fx, &format!("{}/a/b/staged.toml", d(22)), "[build]\n");
        write(fx, &format!("{}/new/.envrc", d(23)), "export B=1\n");
        std::fs::create_dir(fx.ws.join(d(23)).join("a2")).unwrap();
        for q in attacks::walk(&fx.ws.join(d(23)), &|_| false) {
            if q.is_dir() {
                attacks::chmod(&q, 0o755);
            }
        }
    });
    run1(&fx);
    write(&fx, &format!("{}/a/b/c/.envrc", d(20)), "export A=1\n");
    write(&fx, &format!("{}/a/.vscode/tasks.json", d(21)), "{}\n");
    attacks::chmod(&fx.ws.join(d(21)).join("a/.vscode"), 0o755);
    std::fs::create_dir(fx.ws.join(d(22)).join("a/b/.cargo")).unwrap();
    attacks::chmod(&fx.ws.join(d(22)).join("a/b/.cargo"), 0o755);
    mv(
        &fx,
        &format!("{}/a/b/staged.toml", d(22)),
        &format!("{}/a/b/.cargo/config.toml", d(22)),
    );
    std::fs::remove_dir(fx.ws.join(d(23)).join("a2")).unwrap();
    mv(&fx, &format!("{}/new", d(23)), &format!("{}/a2", d(23)));

    let cases = [
        (format!("{}/a/b/c/.envrc", d(20)), "export A=1\n"),
        (format!("{}/a/.vscode/tasks.json", d(21)), "{}\n"),
        (format!("{}/a/b/.cargo/config.toml", d(22)), "[build]\n"),
        (format!("{}/a2/.envrc", d(23)), "export B=1\n"),
    ];
    for (path, before) in &cases {
        let script = format!("echo evil >> {path}");
        run2(&fx, &[], &script).assert_failed();
        assert_eq!(
            read_text(&fx.ws.join(path)).as_deref(),
            Some(*before),
            "{path} was changed by run 2"
        );
    }
    // Control: run 2 writes a plain file beside each (beside `.vscode`, itself protected);
    // the host writes them.
    let beside: String = cases
        .iter()
        .map(|(p, _)| {
            let dir = Path::new(p).parent().unwrap();
            let dir = if dir.ends_with(".vscode") {
                dir.parent().unwrap()
            } else {
                dir
            };
            format!("echo ok >> {}/plain-{}.txt && ", dir.display(), p.len())
        })
        .collect();
    run2(&fx, &[], &format!("{beside} true")).assert_ok();
    for (path, _) in &cases {
        fx.control(&format!("echo evil >> {path}"))
            .outcome()
            .assert_ok();
        assert!(read_text(&fx.ws.join(path)).is_some_and(|t| t.contains("evil")));
    }
}

/// Make every directory below `dir` traversable (git makes some 0700).
fn open_dirs(dir: &Path) {
    for p in attacks::walk(dir, &|_| false) {
        if p.is_dir() {
            attacks::chmod(&p, 0o755);
        }
    }
    attacks::chmod(dir, 0o755);
}

/// A git dir the walk never looks into on its own: below the top `.git` (which it enters
/// only for `modules`). Reached by a redirect, it is as live as any.
fn hidden_git_dir(fx: &Fixture, name: &str) -> PathBuf {
    let dir = fx.ws.join(".git").join(name);
    fx.git_host(&["init", "-q", "--bare", &dir.display().to_string()])
        .assert_success();
    open_dirs(&dir);
    dir
}

/// Git dirs appear between the runs: a nested repository (`git init`) in an old directory, a
/// `.git` symlink and a `.git` file (`gitdir:`) in old directories redirecting to git dirs
/// the walk does not enter, a submodule's git dir under `.git/modules`, and a directory git
/// accepts as a git dir under another name (HEAD, objects, refs, config). Run 2 can change
/// none of their configs, nor leave a hook in them; natively each config has its read-only
/// mount in run 2 (what the walk found). A git dir under `.git` that nothing redirects to is
/// one too (git runs its config once told to use it: red team of issue 33, eighth round).
/// Controls: a directory under `.git` git would not take for a git dir (a `config`, no
/// `HEAD`) has no mount in run 2, and run 2 writes its config. And the host writes them all.
#[test]
fn git_dirs_appearing_between_runs_are_protected() {
    let fx = settled(|_| {});
    run1(&fx);
    let nested = fx.ws.join(d(30)).join("a/b");
    fx.git_host(&["init", "-q", &nested.display().to_string()])
        .assert_success();
    open_dirs(&nested.join(".git"));
    let via_link = hidden_git_dir(&fx, "linked-gd");
    symlink(&via_link, fx.ws.join(d(31)).join("a/.git")).unwrap();
    let via_file = hidden_git_dir(&fx, "filed-gd");
    std::fs::write(
        fx.ws.join(d(32)).join("a/.git"),
        format!("gitdir: {}\n", via_file.display()),
    )
    .unwrap();
    let module = fx.ws.join(".git/modules/sub");
    fx.git_host(&["init", "-q", "--bare", &module.display().to_string()])
        .assert_success();
    open_dirs(&fx.ws.join(".git/modules"));
    let bare = fx.ws.join(d(33)).join("a/b/mirror");
    fx.git_host(&["init", "-q", "--bare", &bare.display().to_string()])
        .assert_success();
    open_dirs(&bare);
    hidden_git_dir(&fx, "unreferenced-gd");
    let not_git = fx.ws.join(".git/not-a-git-dir");
    std::fs::create_dir_all(&not_git).unwrap();
    std::fs::write(not_git.join("config"), "[core]\n").unwrap();
    open_dirs(&not_git);

    let git_dirs = [
        format!("{}/a/b/.git", d(30)),
        format!("{}/a/.git", d(31)),
        ".git/filed-gd".to_owned(),
        ".git/modules/sub".to_owned(),
        format!("{}/a/b/mirror", d(33)),
        ".git/unreferenced-gd".to_owned(),
    ];
    let configs: Vec<String> = git_dirs
        .iter()
        .map(|g| read_text(&fx.ws.join(g).join("config")).unwrap())
        .collect();
    // A read-only mount at the config's real path (mountinfo's fields are separated by
    // spaces; these paths have none).
    let mounted = |g: &str| format!("grep -c \" $(realpath {g}/config) \" /proc/self/mountinfo");
    for g in &git_dirs {
        let script = format!(
            "{{ {}; }} > mounted; \
             printf '[core]\\n\\tfsmonitor = /bin/evil\\n' >> {g}/config; \
             echo '#!/bin/sh' > {g}/hooks/pre-commit; chmod +x {g}/hooks/pre-commit",
            mounted(g)
        );
        run2(&fx, &[], &script).ran();
        if attacks::creation_guarded() {
            let mounts =
                read_text(&fx.ws.join("mounted")).and_then(|t| t.trim().parse::<u32>().ok());
            assert!(
                mounts.is_some_and(|n| n >= 1),
                "run 2 has no read-only mount over {g}/config ({mounts:?}): the walk did not find it"
            );
        }
    }
    for (g, before) in git_dirs.iter().zip(&configs) {
        assert_eq!(
            read_text(&fx.ws.join(g).join("config")).as_ref(),
            Some(before),
            "run 2 changed {g}/config"
        );
        assert!(
            !fx.ws.join(g).join("hooks/pre-commit").exists(),
            "run 2 left a hook in {g}"
        );
    }
    // Control: a directory the walk has no reason to take for a git dir is writable in run 2.
    let control = run2(
        &fx,
        &[],
        &format!(
            "{{ {} || true; }} > mounted; echo '# the run' >> .git/not-a-git-dir/config",
            mounted(".git/not-a-git-dir")
        ),
    );
    control.assert_ok();
    if attacks::creation_guarded() {
        assert_eq!(
            read_text(&fx.ws.join("mounted")).as_deref(),
            Some("0\n"),
            "control: run 2 has a mount over the config of a directory git would not use"
        );
    }
    assert!(read_text(&not_git.join("config")).is_some_and(|t| t.contains("# the run")));
    // Control: the host writes them.
    for g in &git_dirs {
        fx.control(&format!("echo '#' >> {g}/config"))
            .outcome()
            .assert_ok();
    }
}

/// Hard links between the runs: a second name in an old workspace directory for a masked
/// home file (`~/.aws/credentials`) and for a masked workspace file (the top `.env`), a
/// `.env` that is a second name of a plain file, and the reverse, a masked file replaced by
/// a second name of an existing workspace file (no workspace directory's ctime moves). Each
/// refuses run 2 (125, naming the file). Control: the host reads the secret through the
/// workspace name; after the link is gone, run 2 runs.
#[test]
fn hard_links_made_between_runs_refuse_run_two() {
    let fx = settled(|fx| {
        write(fx, &format!("{}/a/b/data.txt", d(43)), "plain\n");
        write(fx, &format!("{}/a/b/src.txt", d(42)), &fx.marker("src"));
    });
    run1(&fx);
    let refused = |why: &str, read: &str, marker: &str| {
        let run = fx
            .sandbox(&[], &format!("cat {read}"))
            .env("STOCKADE_LOG", "debug")
            .run();
        assert_eq!(
            run.code(),
            125,
            "{why}: run 2 was not refused\n{}",
            run.describe()
        );
        run.assert_stderr_contains("E_PROTECTION_UNAVAILABLE");
        run.assert_lacks(marker);
        assert_cache_used(&run);
        fx.control(&format!("cat {read}"))
            .outcome()
            .assert_shows(marker);
    };
    // A masked home file.
    let aws_link = format!("{}/a/b/c/notes.csv", d(40));
    std::fs::hard_link(fx.home.join(".aws/credentials"), fx.ws.join(&aws_link)).unwrap();
    refused("link to ~/.aws/credentials", &aws_link, &fx.marker("aws"));
    std::fs::remove_file(fx.ws.join(&aws_link)).unwrap();
    run2(&fx, &[], "true").assert_ok();
    // A masked workspace file.
    let env_link = format!("{}/a/b/c/env.txt", d(41));
    std::fs::hard_link(fx.ws.join(".env"), fx.ws.join(&env_link)).unwrap();
    refused(
        "link to the workspace's .env",
        &env_link,
        &fx.marker("dotenv"),
    );
    std::fs::remove_file(fx.ws.join(&env_link)).unwrap();
    run2(&fx, &[], "true").assert_ok();
    // A `.env` that is another name of a plain file.
    let src = format!("{}/a/b/src.txt", d(42));
    std::fs::hard_link(fx.ws.join(&src), fx.ws.join(d(42)).join("a/b/c/.env")).unwrap();
    refused("a .env linked to a plain file", &src, &fx.marker("src"));
    std::fs::remove_file(fx.ws.join(d(42)).join("a/b/c/.env")).unwrap();
    run2(&fx, &[], "true").assert_ok();
    // The reverse: the masked file becomes a name of an existing workspace file.
    let data = format!("{}/a/b/data.txt", d(43));
    let creds = fx.home.join(".aws/credentials");
    std::fs::remove_file(&creds).unwrap();
    std::fs::hard_link(fx.ws.join(&data), &creds).unwrap();
    std::fs::write(&creds, fx.marker("aws-replaced")).unwrap();
    refused(
        "~/.aws/credentials replaced by a link to a workspace file",
        &data,
        &fx.marker("aws-replaced"),
    );
}

/// Symbolic links into masks appear between the runs in old directories (to a masked file,
/// to a masked directory): run 2 reads nothing through them. Control: the host does.
#[test]
fn links_into_masks_made_between_runs_show_nothing() {
    let fx = settled(|_| {});
    run1(&fx);
    symlink(
        fx.home.join(".ssh/id_rsa"),
        fx.ws.join(d(50)).join("a/b/key"),
    )
    .unwrap();
    symlink(fx.home.join(".aws"), fx.ws.join(d(51)).join("a/cloud")).unwrap();
    for (read, kind) in [
        (format!("{}/a/b/key", d(50)), "ssh"),
        (format!("{}/a/cloud/credentials", d(51)), "aws"),
    ] {
        run2(&fx, &[], &format!("cat {read}")).assert_blocked(&fx.marker(kind));
        fx.control(&format!("cat {read}"))
            .outcome()
            .assert_shows(&fx.marker(kind));
    }
}

/// Changes in time: made on the host while run 1 runs (after its walk, before whatever it
/// remembers is written), and by a detached process run 1 leaves behind (`setsid`, writing
/// after run 1's sweep). Run 2 masks what they made. If the sandbox ended the detached
/// process with run 1, the test says so and checks that nothing was written.
#[test]
fn changes_during_and_after_run_one_are_seen() {
    let fx = settled(|_| {});
    let during = format!("{}/a/b/c/.env", d(60));
    let detached = format!("{}/a/b/c/.env.detached", d(61));
    let run1 = fx
        .sandbox(
            &[],
            &format!(
                "setsid sh -c 'sleep 2; printf %s {} > {detached}' </dev/null >/dev/null 2>&1 & \
                 sleep 1.5",
                fx.marker("detached")
            ),
        )
        .spawn();
    std::thread::sleep(Duration::from_millis(700));
    write(&fx, &during, &fx.marker("during"));
    let mut run1 = run1;
    let status = run1.wait().unwrap();
    assert!(status.success(), "run 1: {status}");
    std::thread::sleep(Duration::from_millis(1500));
    run2(&fx, &[], &format!("cat {during}")).assert_blocked(&fx.marker("during"));
    fx.control(&format!("cat {during}"))
        .outcome()
        .assert_shows(&fx.marker("during"));
    if fx.ws.join(&detached).exists() {
        run2(&fx, &[], &format!("cat {detached}")).assert_blocked(&fx.marker("detached"));
        fx.control(&format!("cat {detached}"))
            .outcome()
            .assert_shows(&fx.marker("detached"));
    } else {
        println!(
            "the sandbox ended run 1's detached process with run 1 ({}): nothing of it to see",
            attacks::backend()
        );
    }
}

/// A directory closed during run 1 (so no walk could list it then: for an unprivileged
/// caller, a listing needs the read bit) is opened and given a dotenv file between the runs;
/// run 2 reads nothing of it. Control: the host reads it.
#[test]
fn a_directory_opened_between_runs_hides_nothing() {
    let fx = settled(|fx| {
        std::fs::create_dir(fx.ws.join(d(71)).join("a/shut")).unwrap();
        attacks::chmod(&fx.ws.join(d(71)).join("a/shut"), 0o000);
    });
    let shut = fx.ws.join(d(71)).join("a/shut");
    if attacks::backend() == "gvisor" && !attacks::is_root() {
        // runsc --rootless cannot mask a directory the caller cannot read: run 1 is refused,
        // naming it (fail closed); its walk was made and remembered all the same.
        fx.sandbox_argv(&[], &["true"])
            .env("STOCKADE_LOG", "debug")
            .run()
            .assert_stderr_contains("E_PROTECTION_UNAVAILABLE");
    } else {
        run1(&fx);
    }
    attacks::chmod(&shut, 0o755);
    write(&fx, &format!("{}/a/shut/.env", d(71)), &fx.marker("opened"));
    let read = format!("cat {}/a/shut/.env", d(71));
    run2(&fx, &[], &read).assert_blocked(&fx.marker("opened"));
    fx.control(&read)
        .outcome()
        .assert_shows(&fx.marker("opened"));
}

/// A directory closed (`chmod 000`, which moves only its own ctime) by run 1's command, or
/// on the host between the runs, still holds its dotenv file and `.envrc`: run 2 opens it
/// again and reads or changes nothing; nor through a directory left searchable but not
/// readable (`chmod 311` by run 1: its entries can be opened by name, not listed). Control:
/// the host opens and reads them.
///
/// For an unprivileged caller the planner's walk cannot list such a directory: it masks it
/// whole (unreadable, unwritable) for run 2, since nothing in it was checked (before, the
/// dotenv file inside was not masked, run 2 read it and changed the `.envrc`); under
/// `runsc --rootless`, which cannot mask what the caller cannot read, run 2 is refused.
#[test]
fn a_directory_closed_before_run_two_hides_nothing() {
    let fx = settled(|fx| {
        for n in [70, 72, 73] {
            write(fx, &format!("{}/a/box/.env", d(n)), &fx.marker("closed"));
            write(fx, &format!("{}/a/box/.envrc", d(n)), "export A=1\n");
            attacks::chmod(&fx.ws.join(d(n)).join("a/box"), 0o755);
        }
    });
    // Run 1's command closes two, the host the third.
    fx.attack(
        &[],
        &format!("chmod 000 {}/a/box && chmod 311 {}/a/box", d(70), d(73)),
    )
    .outcome()
    .assert_ok();
    attacks::chmod(&fx.ws.join(d(72)).join("a/box"), 0o000);
    for n in [70, 72, 73] {
        let bx = fx.ws.join(d(n)).join("a/box");
        let b = format!("{}/a/box", d(n));
        let open = if n == 73 {
            String::new()
        } else {
            format!("chmod 755 {b}; ")
        };
        let script = format!("{open}cat {b}/.env; echo 'export EVIL=1' >> {b}/.envrc");
        let out = run2(&fx, &[], &script);
        attacks::chmod(&bx, 0o755);
        // runsc --rootless cannot mask a directory the caller cannot read: the run is
        // refused, naming it (fail closed).
        if attacks::backend() == "gvisor" && !attacks::is_root() {
            assert_eq!(out.rc, None, "{}", out.run.describe());
            out.run.assert_stderr_contains("E_PROTECTION_UNAVAILABLE");
            out.run.assert_lacks(&fx.marker("closed"));
        } else {
            out.assert_hidden(&fx.marker("closed"));
        }
        assert_eq!(
            read_text(&bx.join(".envrc")).as_deref(),
            Some("export A=1\n"),
            "run 2 changed {b}/.envrc"
        );
        attacks::chmod(&bx, if n == 73 { 0o311 } else { 0o000 });
        fx.control(&format!("chmod 755 {b}; cat {b}/.env"))
            .outcome()
            .assert_shows(&fx.marker("closed"));
    }
}

/// A filesystem mounted over an old directory between the runs (root: `mount --bind`),
/// holding a dotenv file and an `.envrc`: no directory's ctime moves. Run 2 reads and writes
/// neither. Control: run 2 reads the plain file of the mount (it sees the mount), and the
/// host reads the secret.
#[test]
fn a_mount_over_an_old_directory_between_runs_is_seen() {
    if attacks::skip_unless_root("mount --bind over a workspace directory") {
        return;
    }
    let fx = settled(|fx| {
        write_file(&fx.outside.join("mnt/.env"), fx.marker("mounted"), 0o644);
        write_file(&fx.outside.join("mnt/.envrc"), "export A=1\n", 0o644);
        write_file(&fx.outside.join("mnt/plain.txt"), "mounted-plain\n", 0o644);
    });
    run1(&fx);
    let target = fx.ws.join(d(75)).join("a/b");
    let mounted = std::process::Command::new("mount")
        .arg("--bind")
        .arg(fx.outside.join("mnt"))
        .arg(&target)
        .status()
        .unwrap();
    if !mounted.success() {
        println!("skipped: mount --bind failed here ({mounted})");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(target.clone());
    let rel = format!("{}/a/b", d(75));
    run2(&fx, &[], &format!("cat {rel}/.env")).assert_blocked(&fx.marker("mounted"));
    run2(&fx, &[], &format!("echo 'export EVIL=1' >> {rel}/.envrc")).ran();
    assert_eq!(
        read_text(&target.join(".envrc")).as_deref(),
        Some("export A=1\n")
    );
    run2(&fx, &[], &format!("cat {rel}/plain.txt")).assert_shows("mounted-plain");
    fx.control(&format!("cat {rel}/.env"))
        .outcome()
        .assert_shows(&fx.marker("mounted"));
}

/// The policy changes between the runs, the tree does not: a file read in run 1 is masked by
/// run 2's `--deny-read`, a file written in run 1 is protected by run 2's `--protect`, and a
/// writable root added by run 2's `--allow-write` brings its old dotenv file under the
/// workspace rules (`.env` at any depth of every writable root). What a run remembers of an
/// earlier walk must be keyed by what the walk looked for. Control: run 1 itself, which
/// reads and writes them.
#[test]
fn a_policy_changed_between_runs_applies_to_old_files() {
    let fx = settled(|fx| {
        write(
            fx,
            &format!("{}/a/b/mydata.secret", d(80)),
            &fx.marker("secret"),
        );
        write(fx, &format!("{}/a/build.cfg", d(81)), "orig\n");
        write_file(&fx.outside.join("deep/x/.env"), fx.marker("outside"), 0o644);
    });
    let secret = format!("{}/a/b/mydata.secret", d(80));
    let cfg = format!("{}/a/build.cfg", d(81));
    let outside_env = fx.outside.join("deep/x/.env").display().to_string();
    // Run 1 (the control): none of it is masked or protected yet.
    fx.attack(
        &[],
        &format!("cat {secret}; cat {outside_env}; echo run1 > {cfg}"),
    )
    .env("STOCKADE_LOG", "debug")
    .outcome()
    .assert_shows(&fx.marker("secret"))
    .assert_output_contains(&fx.marker("outside"));
    assert_eq!(read_text(&fx.ws.join(&cfg)).as_deref(), Some("run1\n"));
    let outside = fx.outside.display().to_string();
    let opts = [
        "--deny-read",
        "mydata.secret",
        "--protect",
        "build.cfg",
        "--allow-write",
        &outside,
    ];
    // Run 2: another policy, so another cache key (nothing of run 1's walk may serve).
    let changed = |script: &str| fx.attack(&opts, script).outcome();
    changed(&format!("cat {secret}")).assert_blocked(&fx.marker("secret"));
    changed(&format!("cat {outside_env}")).assert_blocked(&fx.marker("outside"));
    // Run 3 and on: the same policy again, from the cache of run 2's.
    run2(&fx, &opts, &format!("echo evil > {cfg}")).assert_failed();
    assert_eq!(read_text(&fx.ws.join(&cfg)).as_deref(), Some("run1\n"));
    run2(&fx, &opts, &format!("cat {secret}")).assert_blocked(&fx.marker("secret"));
    run2(&fx, &opts, &format!("cat {outside_env}")).assert_blocked(&fx.marker("outside"));
    // And back to run 1's policy: its own key, nothing masked.
    fx.attack(&[], &format!("cat {secret}"))
        .outcome()
        .assert_shows(&fx.marker("secret"));
}

/// Review mode, unprivileged caller: a file of another group appears between two review runs
/// in an old directory (the ownership check before such a run remembers its directories
/// too). Run 2 names it before the command starts, as a first run does. Control: the same
/// caller's direct run writes it. Runs in the root pass as the test user (`runuser`): only
/// root can give a user's workspace a file of group root. A file given to another group in
/// place (`chgrp`, which moves only the file's ctime) is the ownership cache's documented
/// limit (`workspace::changes::copyable`): named once its directory changes.
#[test]
fn a_file_of_another_owner_appearing_between_review_runs_is_named() {
    if attacks::skip_unless_root("files of other owners in the workspace") {
        return;
    }
    let user = "stockade-test";
    let exists = std::process::Command::new("id")
        .arg(user)
        .output()
        .is_ok_and(|o| o.status.success());
    if attacks::which("runuser").is_none() || !exists {
        println!("skipped: no runuser or no user {user}");
        return;
    }
    let fx = settled(|fx| {
        let status = std::process::Command::new("chown")
            .args(["-R", &format!("{user}:{user}")])
            .arg(&fx.home)
            .arg(&fx.ws)
            .status()
            .unwrap();
        assert!(status.success());
    });
    let bin = fx.stockade_inside();
    let as_user = |args: &[&str], script: &str| {
        attacks::Cmd::new("runuser", &fx.ws)
            .args(["-u", user, "--", "env", "STOCKADE_LOG=debug"])
            .arg(format!("HOME={}", fx.home.display()))
            .arg(&bin)
            .arg("run")
            .args(args)
            .arg("--workspace")
            .arg(&fx.ws)
            .args(["--shell", script])
            .run()
    };
    as_user(&["--review"], "true").assert_success();
    let rel = format!("{}/a/b/rootgroup.txt", d(90));
    let path = fx.ws.join(&rel);
    write_file(&path, "r\n", 0o664);
    let uid = std::process::Command::new("id")
        .args(["-u", user])
        .output()
        .unwrap();
    let uid: u32 = String::from_utf8_lossy(&uid.stdout).trim().parse().unwrap();
    std::os::unix::fs::chown(&path, Some(uid), Some(0)).unwrap();
    let run = as_user(
        &["--review"],
        &format!("echo x >> {rel} && echo written || echo refused"),
    );
    run.assert_success()
        .assert_stdout_contains("refused")
        .assert_stderr_contains("rootgroup.txt")
        .assert_stderr_contains("another user or group");
    assert_cache_used(&run);
    // Control: the same caller's direct run writes it.
    as_user(&[], &format!("echo x >> {rel} && echo direct-written"))
        .assert_success()
        .assert_stdout_contains("direct-written");
}

/// The walk cache itself (`<state>/stockade/journal/walk/walk-*.cache`): a run whose writable
/// roots hold the journal directory (`--allow-write ~/.local/state`) can neither rewrite nor
/// replace nor add a cache file there, nor move either directory away (a forged listing would
/// hide a dotenv file from every later run), and does not read it; a plain run cannot read
/// it. Afterwards a plain run still takes its walk from the same cache and masks the old
/// dotenv file. Control: the grant is real (a sibling of the journal directory is written
/// in the same run) and the host reads the cache.
#[test]
fn the_walk_cache_cannot_be_forged_by_a_run() {
    let fx = settled(|fx| {
        write(fx, &format!("{}/a/b/.env", d(95)), &fx.marker("cached"));
    });
    run1(&fx);
    let state = fx.home.join(".local/state");
    let journal = state.join("stockade/journal");
    let walk = journal.join("walk");
    let caches: Vec<PathBuf> = std::fs::read_dir(&walk)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("walk-"))
        })
        .collect();
    assert_eq!(caches.len(), 1, "run 1 left no walk cache in {walk:?}");
    let cache = &caches[0];
    let before = std::fs::read(cache).unwrap();
    let j = journal.display();
    let w = walk.display();
    let c = cache.display();
    let script = format!(
        "mkdir -p {s}/other && echo ok > {s}/other/granted && echo granted; \
         cat {c} > /dev/null && echo read-cache; \
         printf forged > {c} && echo rewrote; \
         printf forged > {w}/walk-forged.cache && echo added; \
         rm {c} && echo removed; \
         mv {w} {j}/walk.old && mkdir {w} && echo moved-walk-dir; \
         mv {j} {j}.old && mkdir {j} && echo moved-dir; \
         true",
        s = state.display()
    );
    let opts = ["--allow-write", &state.display().to_string()];
    let run = fx
        .attack(&opts, &script)
        .env("STOCKADE_LOG", "debug")
        .outcome();
    run.assert_shows("granted");
    for done in [
        "read-cache",
        "rewrote",
        "added",
        "removed",
        "moved-walk-dir",
        "moved-dir",
    ] {
        run.run.assert_lacks(&format!("{done}\n"));
    }
    run.run
        .assert_stderr_contains("walk: no cache: ")
        .assert_stderr_contains("walk: 0 dirs from cache");
    assert_eq!(std::fs::read(cache).ok(), Some(before.clone()));
    assert!(!walk.join("walk-forged.cache").exists());
    // A plain run cannot read it either.
    run2(&fx, &[], &format!("cat {c} > /dev/null && echo read-cache"))
        .run
        .assert_lacks("read-cache\n");
    // Later runs take their walk from it, and mask the old dotenv file.
    run2(&fx, &[], &format!("cat {}/a/b/.env", d(95))).assert_blocked(&fx.marker("cached"));
    // Control: the host reads it.
    assert!(read_text(cache).is_some());
}

/// A link to a directory named as a protected glob's directory (`.cargo -> cargo-dir`, for
/// `**/.cargo/config.toml`) in an unchanged directory: run 2 takes that directory from the
/// cache and still refuses `.cargo/config.toml` through the link (it would land in
/// `cargo-dir/config.toml`, which host cargo reads as `.cargo/config.toml`). Control: in run
/// 2, the same write through a link no glob names (`.other -> other-dir`) goes through.
#[test]
fn a_linked_protected_dir_in_an_unchanged_directory_holds_in_run_two() {
    let fx = settled(|fx| {
        let base = fx.ws.join(d(100)).join("a");
        for (link, dir) in [(".cargo", "cargo-dir"), (".other", "other-dir")] {
            attacks::mkdir(&base.join(dir));
            symlink(dir, base.join(link)).unwrap();
        }
    });
    run1(&fx);
    let write = |link: &str| {
        format!(
            "printf '[build]\\nrustc-wrapper = \"/tmp/evil\"\\n' > {}/a/{link}/config.toml",
            d(100)
        )
    };
    let armed = |link: &str| {
        read_text(&fx.ws.join(d(100)).join("a").join(link).join("config.toml"))
            .is_some_and(|t| t.contains("rustc-wrapper"))
    };
    run2(&fx, &[], &write(".cargo")).assert_failed_if_guarded();
    assert!(!armed(".cargo"));
    run2(&fx, &[], &write(".other")).assert_ok();
    assert!(armed(".other"));
}

/// Walk caches where they were kept before their own directory (the journal directory
/// itself, which every run lists for journals to recover: a cache for every workspace ever
/// run in made that listing grow with them) are removed by the next run, and the cache now
/// lives in `journal/walk`. Control: another file in the journal directory stays.
#[test]
fn caches_of_the_previous_place_are_removed_by_the_next_run() {
    let fx = settled(|_| {});
    run1(&fx);
    let journal = fx.home.join(".local/state/stockade/journal");
    let cached: Vec<_> = std::fs::read_dir(journal.join("walk")).unwrap().collect();
    assert_eq!(cached.len(), 1, "run 1 left no cache in {journal:?}/walk");
    let old = journal.join("walk-0123456789abcdef0123456789abcdef-0.cache");
    let other = journal.join("not-a-cache.txt");
    write_file(&old, "an old cache", 0o600);
    write_file(&other, "kept", 0o600);
    fx.sandbox_argv(&[], &["true"]).run().assert_success();
    assert!(!old.exists(), "the old place's cache is still there");
    assert!(other.exists(), "control: another file was removed");
}
