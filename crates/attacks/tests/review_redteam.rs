//! Review mode under attack from the outside (a red-team pass over `--review`): the store a
//! run could reach before it exists, modes `apply` would carry into the workspace, change
//! sets that cost hours to read, names that act on the terminal or forge lines, processes
//! left behind, a writable parent of the workspace. Each attack has its control.
//!
//! Tests marked `#[ignore = "open finding: ..."]` reproduce escapes not fixed yet (their fix
//! lies outside `workspace::changes`): run them with `--ignored`; drop the mark with the fix.

#![allow(clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;

use attacks::{read_text, sh_quote, write_file, Fixture};

use attacks::review::{codes, entries, review};

fn entry<'a>(all: &'a [serde_json::Value], path: &str) -> &'a serde_json::Value {
    all.iter()
        .find(|c| c["path"] == path)
        .unwrap_or_else(|| panic!("{path} is not in the change set: {all:?}"))
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(path)
        .expect("stat")
        .permissions()
        .mode()
        & 0o7777
}

fn store(fx: &Fixture) -> std::path::PathBuf {
    fx.home.join(".local/state/stockade/changes")
}

/// A review run of `script` (its report written to `report`) in the background, once the
/// command has written `ready` in its change directory (`what` names the run if it never
/// does).
fn review_until_ready(
    fx: &Fixture,
    script: &str,
    report: &std::path::Path,
    what: &str,
) -> std::process::Child {
    let child = fx
        .sandbox(
            &["--review", "--report", &report.display().to_string()],
            script,
        )
        .spawn_with_stdin(std::process::Stdio::piped());
    let ready = || {
        std::fs::read_dir(store(fx))
            .into_iter()
            .flatten()
            .flatten()
            .any(|d| d.path().join("upper/ready").exists())
    };
    assert!(
        attacks::wait_until(ready, std::time::Duration::from_secs(30)),
        "{what}: the run never got ready"
    );
    child
}

/// Lets a run of [`review_until_ready`] go on: a line on its input.
fn go(child: &mut std::process::Child) {
    use std::io::Write;
    let mut input = child.stdin.take().expect("the run's input");
    input.write_all(b"go\n").expect("signal");
}

/// The id of the pending change set `report` names.
fn pending_id(report: &std::path::Path) -> String {
    attacks::read_json(report)["review"]["run_id"]
        .as_str()
        .expect("a pending change set")
        .to_owned()
}

/// The first review run of a caller makes the change store; with the home writable
/// (`--allow-write ~`) that run must not reach the store (its own change set included): it
/// could put a change set of its choosing under its own run id (another workspace, lies in
/// the record), and `stockade apply ID` would write it. Control: beside the store, the home
/// is writable.
#[test]
fn the_first_review_run_cannot_swap_its_own_change_set() {
    let fx = Fixture::without_git();
    assert!(!store(&fx).exists());
    if attacks::gives_out() {
        // A root caller's container command is the home's owner here (the suite gives the
        // granted home to it): its `.local/state`, as in a used home, is there before the
        // store is made in it (made by stockade, it would be root's and shut to the command).
        std::fs::create_dir_all(fx.home.join(".local/state")).expect("mkdir");
    }
    let home = fx.home.display().to_string();
    let c = sh_quote(store(&fx));
    let script = format!(
        "echo c > {h}/.local/state/control.txt && echo control-written; \
         for d in {c}/*/; do mv \"$d\" {c}/.stolen && mkdir \"${{d%/}}\" && echo SWAPPED; done; \
         echo mine > mine.txt",
        h = sh_quote(&home),
    );
    let (run, id) = review(&fx, &["--allow-write", &home], &script);
    run.assert_success()
        .assert_stdout_contains("control-written")
        .assert_lacks("SWAPPED");
    assert!(fx.home.join(".local/state/control.txt").exists());
    let id = id.expect("a pending change set");
    let set = entries(&fx, &id);
    entry(&set, "mine.txt");
    assert!(!store(&fx).join(".stolen").exists());
}

/// A direct run with the home writable, before the caller's first review run: the store
/// does not exist yet, so there is nothing masked, and the run may make it with a change set
/// of its own inside. Control: once the store exists, the same plant is refused.
#[test]
fn a_direct_run_cannot_plant_a_change_set_before_the_store_exists() {
    let plant = |fx: &Fixture| {
        let c = sh_quote(store(fx).join("9999999999999-1"));
        let script =
            format!("mkdir -p {c}/upper {c}/work && echo '{{}}' > {c}/meta.json && echo PLANTED");
        fx.sandbox(&["--allow-write", &fx.home.display().to_string()], &script)
            .run()
    };
    // Control first: with the store made by a review run, the plant fails.
    let fx = Fixture::without_git();
    let (run, _) = review(&fx, &[], "echo x > x.txt");
    run.assert_success();
    plant(&fx).assert_lacks("PLANTED");
    // The attack: no store yet.
    let fx = Fixture::without_git();
    assert!(!store(&fx).exists());
    let run = plant(&fx);
    run.assert_lacks("PLANTED");
    let runs = fx.stockade(["runs", "--json"]).run();
    assert!(!runs.stdout.contains("9999999999999-1"), "{}", runs.stdout);
}

/// A run that makes a directory or a file writable by everyone: `apply` would carry the bit
/// into the workspace, where any local account could later plant what the host runs. It is
/// flagged and not applied unaccepted. Control: the same entries at 0755 and 0644 are not.
#[test]
fn world_writable_entries_are_flagged_and_not_applied_unaccepted() {
    let fx = Fixture::without_git();
    let script = "mkdir pub priv && chmod 777 pub && chmod 755 priv \
                  && echo y > y.txt && chmod 666 y.txt && echo z > z.txt && chmod 644 z.txt";
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    let id = id.expect("a pending change set");
    let set = entries(&fx, &id);
    for p in ["pub", "y.txt"] {
        assert!(
            codes(entry(&set, p)).iter().any(|c| c == "world-writable"),
            "{p}: {set:?}"
        );
    }
    for p in ["priv", "z.txt"] {
        assert!(codes(entry(&set, p)).is_empty(), "{p}: {set:?}");
    }
    fx.stockade(["apply", &id, "--all-or-nothing"])
        .run()
        .assert_code(125)
        .assert_stderr_contains("world-writable");
    assert!(!fx.ws.join("pub").exists() && !fx.ws.join("z.txt").exists());
    fx.stockade(["apply", &id, "--exclude", "pub", "--exclude", "y.txt"])
        .run()
        .assert_success();
    assert_eq!(mode(&fx.ws.join("priv")), 0o755);
    assert_eq!(mode(&fx.ws.join("z.txt")), 0o644);
    assert!(!fx.ws.join("pub").exists() && !fx.ws.join("y.txt").exists());
}

/// `truncate -s 15T` costs the command nothing; it cost the change set terabytes of hashing
/// on every read (then: refused whole past 64 GiB). A sparse file is read through its data
/// extents only: the run ends at once with the file in its change set, flagged (`binary`,
/// saying it is sparse, and `large`), the workspace untouched and the file refused unaccepted.
/// Control: a 1 MiB sparse file is the same kind of change.
#[test]
fn a_sparse_file_of_terabytes_neither_hangs_the_run_nor_reaches_the_workspace() {
    let fx = Fixture::without_git();
    let (run, id) = review(
        &fx,
        &[],
        "truncate -s 15T big || truncate -s 100G big; echo x > x.txt",
    );
    // `review` would panic on a timeout (30 s): reaching here is the point.
    run.assert_success();
    let id = id.expect("a pending change set");
    let set = entries(&fx, &id);
    let big = entry(&set, "big");
    assert!(big["size"].as_u64().unwrap_or(0) >= 100 << 30, "{big}");
    let flags = codes(big);
    assert!(
        flags.iter().any(|c| c == "binary") && flags.iter().any(|c| c == "large"),
        "{big}"
    );
    assert!(big["flags"].to_string().contains("sparse"), "{big}");
    assert!(!fx.ws.join("big").exists() && !fx.ws.join("x.txt").exists());
    fx.stockade(["apply", &id, "--all-or-nothing"])
        .run()
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED");
    assert!(!fx.ws.join("big").exists());
    fx.stockade(["discard", &id]).run().assert_success();

    let (run, id) = review(&fx, &[], "truncate -s 1M small");
    run.assert_success();
    let id = id.expect("a pending change set");
    let small = entry(&entries(&fx, &id), "small").clone();
    assert_eq!(small["size"], 1 << 20);
    assert!(small["flags"].to_string().contains("sparse"), "{small}");
}

/// setuid and setgid bits: refused in the view where the guard refuses them, and whatever
/// the change set records never written into the workspace (a directory's sticky bit is). Control: the change set
/// holds the entries, with the bits the view let through.
#[test]
fn setuid_setgid_and_sticky_bits_never_reach_the_workspace() {
    let fx = Fixture::without_git();
    let script = "echo t > tool; chmod 755 tool; chmod 6755 tool; chmod g+s tool; \
                  mkdir d; chmod 775 d; chmod 3775 d; chmod +t d; true";
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    let id = id.expect("a pending change set");
    let set = entries(&fx, &id);
    let recorded = |p: &str| entry(&set, p)["mode"].as_u64().expect("a mode") as u32;
    eprintln!(
        "recorded: tool {:o}, d {:o}",
        recorded("tool"),
        recorded("d")
    );
    if recorded("tool") & 0o6000 != 0 {
        assert!(codes(entry(&set, "tool")).iter().any(|c| c == "setuid"));
    }
    fx.stockade(["apply", &id, "--accept-flagged"])
        .run()
        .assert_success();
    assert_eq!(mode(&fx.ws.join("tool")), 0o755);
    // A directory keeps the sticky bit (it only restricts), never a set-id bit.
    assert_eq!(mode(&fx.ws.join("d")), 0o775 | (recorded("d") & 0o1000));
}

/// Names and contents the command chose carry no terminal control sequence to the caller's
/// terminal through `changes`, `diff`, `apply`'s refusal, `runs` or the run's own summary.
/// Control: the name is in the change set (JSON, escaped).
#[test]
fn names_and_contents_with_escape_sequences_stay_inert_in_every_listing() {
    let fx = Fixture::without_git();
    let script = "n=$(printf 'evil\\033]0;PWNED\\007\\033[2J'); \
                  printf '#!/bin/sh\\n\\033[31mred\\033]52;c;cHduZWQ=\\007\\n' > \"$n\" && chmod +x \"$n\" \
                  && ln -s \"$(printf '/etc/\\033[1m')\" \"$n.lnk\"";
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    assert!(!run.stderr.contains('\u{1b}'), "{}", run.describe());
    let id = id.expect("a pending change set");
    let json = fx.stockade(["changes", &id, "--json"]).run();
    json.assert_success().assert_stdout_contains("evil");
    for args in [
        vec!["changes", id.as_str()],
        vec!["diff", id.as_str()],
        vec!["apply", id.as_str()],
        vec!["runs"],
    ] {
        let out = fx.stockade(&args).run();
        assert!(
            !out.all_output().contains('\u{1b}') && !out.all_output().contains('\u{7}'),
            "{args:?}: {}",
            out.all_output()
        );
    }
}

/// A name holding a newline must not print as a line of its own in `changes`: the command
/// could forge a harmless-looking entry (or hide a flagged one among forged lines). Control:
/// the entry is there, under its real name, in the JSON.
#[test]
fn a_name_with_a_newline_cannot_forge_a_line_of_the_listing() {
    let fx = Fixture::without_git();
    let (run, id) = review(&fx, &[], "echo x > \"$(printf 'notes\\n M README.md')\"");
    run.assert_success();
    let id = id.expect("a pending change set");
    assert!(entries(&fx, &id)
        .iter()
        .any(|c| c["path"] == "notes\n M README.md"));
    let out = fx.stockade(["changes", &id]).run();
    out.assert_success();
    assert!(
        !out.stdout.lines().any(|l| l == " M README.md"),
        "{}",
        out.stdout
    );
}

/// What a run's command leaves behind (a daemon that outlives it) writes nothing into the
/// change set after it was sealed: the change set stays whole and readable. Control: the
/// same write in the foreground is in the change set.
#[test]
fn a_process_left_behind_cannot_write_the_sealed_change_set() {
    let fx = Fixture::without_git();
    let (run, id) = review(
        &fx,
        &[],
        "(setsid sh -c 'sleep 2; echo late > late.txt' >/dev/null 2>&1 &); \
         nohup sh -c 'trap \"\" TERM HUP; sleep 2; echo late > late2.txt' >/dev/null 2>&1 & \
         echo x > x.txt",
    );
    run.assert_success();
    let id = id.expect("a pending change set");
    std::thread::sleep(std::time::Duration::from_secs(4));
    let set = entries(&fx, &id);
    entry(&set, "x.txt");
    assert!(
        !set.iter()
            .any(|c| c["path"] == "late.txt" || c["path"] == "late2.txt"),
        "{set:?}"
    );
    assert!(!fx.ws.join("late.txt").exists());

    let (run, id) = review(&fx, &[], "sh -c 'sleep 1; echo late > late.txt'");
    run.assert_success();
    entry(
        &entries(&fx, &id.expect("a pending change set")),
        "late.txt",
    );
}

/// `--allow-write` of the workspace's parent: the view is mounted over the workspace, so the
/// parent's writable mount does not reach the real workspace around it (by `..` or by the
/// absolute path). Control: the parent's other directories are written.
#[test]
fn a_writable_parent_does_not_reach_around_the_view() {
    let fx = Fixture::without_git();
    write_file(&fx.ws.join("a.txt"), "orig\n", 0o644);
    let root = fx.root.display().to_string();
    let script = format!(
        "echo pwn > ../ws/a.txt; echo pwn > {ws}/b.txt; echo ctl > {out}/ctl.txt && echo control-written",
        ws = sh_quote(&fx.ws),
        out = sh_quote(&fx.outside),
    );
    // No report: its directory would be writable by the command (refused).
    let run = fx
        .sandbox(&["--review", "--allow-write", &root], &script)
        .run();
    run.assert_success()
        .assert_stdout_contains("control-written");
    assert_eq!(read_text(&fx.ws.join("a.txt")).as_deref(), Some("orig\n"));
    assert!(!fx.ws.join("b.txt").exists());
    assert!(fx.outside.join("ctl.txt").exists());
    let runs = fx.stockade(["runs", "--json"]).run();
    let list: serde_json::Value = serde_json::from_str(&runs.stdout).expect("runs --json");
    let id = list[0]["run_id"].as_str().expect("a pending change set");
    let set = entries(&fx, id);
    entry(&set, "a.txt");
    entry(&set, "b.txt");
}

/// An unprivileged caller's upper holds what the command made with the command's modes: a
/// directory it made unreadable (`chmod 000`) must not make the whole change set unreadable
/// (finish failing, the run's work lost), and the change set records the modes the command
/// set (not the bits finish opened up to read them). Control: as root (who reads anything)
/// it was always fine.
#[test]
fn an_unreadable_directory_in_the_view_does_not_lose_the_change_set() {
    let fx = Fixture::without_git();
    let (run, id) = review(
        &fx,
        &[],
        "mkdir -p d/e && echo x > d/e/f && echo s > secret && chmod 000 secret d/e d && echo ok > ok.txt",
    );
    run.assert_success();
    let set = entries(&fx, &id.expect("a pending change set"));
    entry(&set, "ok.txt");
    for p in ["d", "d/e", "secret"] {
        assert_eq!(entry(&set, p)["mode"], 0, "{p}");
    }
}

// Issue 30, item 2: review flags by allow-list. Only text `stockade diff` shows as it is,
// outside the places host tools run code from, is applied without acceptance.

/// The real attack: bytecode the host's Python loads instead of the source beside it. The run
/// compiles a malicious `mod.py` with the benign one's size and mtime, then puts the benign
/// source back: `mod.py` is no change at all, and `__pycache__/mod.cpython-311.pyc` is a
/// binary that `stockade diff` cannot show (a deny-list of host-run files never named it).
/// Unaccepted, `apply` refuses it and the host's `import mod` runs the benign source. The
/// control: accepted, the same change set makes the host run the planted code.
#[test]
fn planted_python_bytecode_runs_on_the_host_only_when_accepted() {
    let python = std::path::Path::new("/usr/bin/python3");
    if !python.exists() {
        eprintln!("n/a: /usr/bin/python3 is missing");
        return;
    }
    let fx = Fixture::without_git();
    write_file(&fx.ws.join("mod.py"), "print(\"benign\")\n", 0o644);
    let script = "cp -p mod.py /tmp/orig.py \
        && printf 'print(\"pwned!\")\\n' > mod.py && touch -r /tmp/orig.py mod.py \
        && /usr/bin/python3 -m py_compile mod.py \
        && cp /tmp/orig.py mod.py && touch -r /tmp/orig.py mod.py \
        && echo __pycache__/*";
    let (run, id) = review(&fx, &[], script);
    run.assert_success();
    let id = id.expect("a pending change set");
    let set = entries(&fx, &id);
    assert!(
        !set.iter().any(|c| c["path"] == "mod.py"),
        "the source is no change: {set:?}"
    );
    let pyc = set
        .iter()
        .find(|c| {
            c["path"]
                .as_str()
                .is_some_and(|p| p.starts_with("__pycache__/mod.") && p.ends_with(".pyc"))
        })
        .unwrap_or_else(|| panic!("no bytecode in the change set: {set:?}"));
    let pyc_path = pyc["path"].as_str().unwrap_or_default().to_owned();
    let flags = codes(pyc);
    assert!(
        flags.iter().any(|f| f == "host-loaded") && flags.iter().any(|f| f == "binary"),
        "{flags:?}"
    );
    let import = || {
        fx.host("/usr/bin/python3 -c 'import mod'")
            .run()
            .stdout
            .trim()
            .to_owned()
    };
    fx.stockade(["apply", &id, "--all-or-nothing"])
        .run()
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED")
        .assert_stderr_contains(&pyc_path);
    assert!(!fx.ws.join("__pycache__").exists());
    assert_eq!(import(), "benign");
    // Control: accepted, the planted bytecode is what the host runs.
    std::fs::remove_dir_all(fx.ws.join("__pycache__")).ok();
    fx.stockade(["apply", &id, "--accept-flagged"])
        .run()
        .assert_success();
    assert_eq!(import(), "pwned!");
}

/// Every kind of entry a reviewer cannot judge from `stockade diff`, or that the host runs,
/// is flagged, with why in `stockade changes` (and `--json`), and `apply` refuses it
/// unaccepted: binary files, text with hidden characters, executables, scripts, links, a
/// fifo, bytecode and installed packages, and the host-run files the catalogue names (compose
/// files, Dockerfile, nix files, Vagrantfile, build.zig, Package.swift, build.sbt, mix.exs,
/// rake files, gemspecs, .pdbrc, pytest.ini, lint and bundler configs, Procfile, pyvenv.cfg,
/// go.work, .ripgreprc, ...). Controls: plain text files go through without acceptance, and
/// in direct mode the same script writes every one of them into the workspace.
#[test]
fn what_a_diff_cannot_show_or_the_host_runs_is_flagged_with_why() {
    let catalogue = [
        ("docker-compose.yml", "build-file"),
        ("compose.yaml", "build-file"),
        ("Dockerfile", "build-file"),
        ("Containerfile", "build-file"),
        ("flake.nix", "build-file"),
        ("shell.nix", "build-file"),
        ("nix/default.nix", "build-file"),
        ("Vagrantfile", "build-file"),
        ("build.zig", "build-file"),
        ("Package.swift", "build-file"),
        ("build.sbt", "build-file"),
        ("mix.exs", "build-file"),
        ("Rakefile", "build-file"),
        ("lib/tasks/x.rake", "build-file"),
        ("x.gemspec", "build-file"),
        ("Gemfile", "build-file"),
        ("Procfile", "build-file"),
        ("go.work", "build-file"),
        ("tests/conftest.py", "build-file"),
        ("tox.ini", "build-file"),
        (".pdbrc", "startup-file"),
        ("venv/pyvenv.cfg", "startup-file"),
        ("pytest.ini", "tool-config"),
        (".eslintrc.js", "tool-config"),
        ("eslint.config.mjs", "tool-config"),
        (".prettierrc.js", "tool-config"),
        ("babel.config.js", "tool-config"),
        ("vite.config.ts", "tool-config"),
        (".rubocop.yml", "tool-config"),
        (".bundle/config", "tool-config"),
        (".golangci.yml", "tool-config"),
        (".ripgreprc", "tool-config"),
        (".gitattributes", "tool-config"),
        ("node_modules/x/index.js", "host-loaded"),
        ("Foo.class", "host-loaded"),
    ];
    let kinds = [
        ("blob.bin", "binary"),
        ("hidden.txt", "hidden-text"),
        ("bidi.rs", "hidden-text"),
        ("tool", "executable"),
        ("run.sh", "script"),
        ("link", "symlink"),
        ("pipe", "special-file"),
    ];
    // A FIFO made inside gVisor's Sentry is the Sentry's own: the view gets none to flag.
    let fifo_on_host = attacks::backend() != "gvisor";
    if !fifo_on_host {
        println!("pipe: n/a under gvisor: {}", attacks::na::SENTRY_FILES.why);
    }
    let kinds: Vec<_> = (kinds.into_iter())
        .filter(|(p, _)| fifo_on_host || *p != "pipe")
        .collect();
    let mut script = String::from(
        "set -e; printf 'a\\0b' > blob.bin; printf 'ok\\n\\033[2Kgone\\n' > hidden.txt; \
         printf 'let s = \"\\342\\200\\256x\";\\n' > bidi.rs; \
         printf 'echo hi\\n' > tool; chmod 755 tool; printf '#!/bin/sh\\necho\\n' > run.sh; \
         ln -s notes.txt link; mkfifo pipe; \
         echo notes > notes.txt; mkdir -p src; echo 'pub fn f() {}' > src/lib.rs; ",
    );
    for (path, _) in catalogue {
        let q = sh_quote(path);
        script.push_str(&format!("mkdir -p \"$(dirname {q})\"; echo x > {q}; "));
    }
    let fx = Fixture::without_git();
    let (run, id) = review(&fx, &[], &script);
    run.assert_success();
    let id = id.expect("a pending change set");
    let set = entries(&fx, &id);
    for (path, code) in catalogue.iter().chain(kinds.iter()) {
        let c = entry(&set, path);
        let flags = c["flags"].as_array().cloned().unwrap_or_default();
        let flag = flags
            .iter()
            .find(|f| f["code"] == *code)
            .unwrap_or_else(|| panic!("{path} is not flagged {code}: {c}"));
        assert!(
            flag["reason"].as_str().is_some_and(|r| r.len() > 10),
            "{path}: {flag}"
        );
    }
    for plain in ["notes.txt", "src/lib.rs", "src"] {
        assert!(codes(entry(&set, plain)).is_empty(), "{plain} is flagged");
    }
    // The listing says why, for each.
    let listing = fx.stockade(["changes", &id]).run();
    listing.assert_success();
    for needle in [
        "flagged [binary]: not text",
        "flagged [hidden-text]:",
        "flagged [build-file]: `Dockerfile`",
        "flagged [tool-config]: `.ripgreprc`",
        "flagged [host-loaded]: `node_modules`",
        "flagged [startup-file]: `pyvenv.cfg`",
    ] {
        listing.assert_stdout_contains(needle);
    }
    // Unaccepted, under --all-or-nothing: refused whole, nothing written.
    fx.stockade(["apply", &id, "--all-or-nothing"])
        .run()
        .assert_code(125)
        .assert_stderr_contains("E_CHANGES_FLAGGED");
    assert!(!fx.ws.join("Dockerfile").exists() && !fx.ws.join("notes.txt").exists());
    // Control: the plain entries go through without acceptance; the rest stays pending.
    fx.stockade(["apply", &id, "--only", "notes.txt", "--only", "src"])
        .run()
        .assert_success();
    assert_eq!(
        read_text(&fx.ws.join("notes.txt")).as_deref(),
        Some("notes\n")
    );
    assert!(fx.ws.join("src/lib.rs").exists());
    assert!(!fx.ws.join("Dockerfile").exists() && !fx.ws.join("blob.bin").exists());
    // Control: in direct mode the same files land in the workspace at once.
    let fx = Fixture::without_git();
    let direct = script.replace("set -e; ", "").replace("mkfifo pipe; ", "");
    fx.sandbox(&[], &direct).run();
    for (path, _) in catalogue.iter().chain(kinds.iter()) {
        if *path != "pipe" {
            assert!(
                fx.ws.join(path).symlink_metadata().is_ok(),
                "{path} was not written in direct mode"
            );
        }
    }
}

// Issue 30, item 3: no host edit is ever lost by `apply`.

/// The run's first write of a path and a host edit of it race, many times: the command
/// waits for a signal, then writes `a.txt`; the host gives the signal and edits `a.txt`
/// at once, so the two writes land within a clock tick of each other. `apply` never writes
/// the run's version over the host's: each round is a conflict and the host's edit stays.
/// The rule no longer compares the host's ctime with when the run first wrote the path (the
/// rounds in one tick are counted: where the host's ctime is not after the upper entry's
/// birth, that rule applied over the edit). Control: a round without the host's edit applies.
#[test]
fn a_host_edit_racing_the_runs_first_write_is_never_lost() {
    const ROUNDS: usize = 20;
    let fx = Fixture::without_git();
    let mut close = 0;
    for round in 0..=ROUNDS {
        let edit = round < ROUNDS;
        let a = fx.ws.join("a.txt");
        write_file(&a, "base\n", 0o644);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let report = fx.out_file(&format!("race-{round}.json"));
        let script = format!("echo > ready; read go; echo run {round} > a.txt; rm ready");
        // The command waits for its input once `ready` is in its change directory.
        let mut child = review_until_ready(&fx, &script, &report, &format!("round {round}"));
        go(&mut child);
        let host = format!("host {round}\n");
        if edit {
            std::fs::write(&a, &host).expect("the host's edit");
        }
        assert!(child.wait().expect("wait").success(), "round {round}");
        let id = pending_id(&report);
        if edit {
            // Birth of the run's copy and ctime of the host's file, as `stat` prints them
            // (the same format and zone: they compare as text).
            let upper = store(&fx).join(&id).join("upper/a.txt");
            let born = std::process::Command::new("stat")
                .args(["-c", "%w"])
                .arg(&upper)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_default();
            let changed = std::process::Command::new("stat")
                .args(["-c", "%z"])
                .arg(&a)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_default();
            let born = (born != "-" && !born.is_empty()).then_some(born);
            if born.is_some_and(|b| changed <= b) {
                close += 1;
            }
            fx.stockade(["apply", &id])
                .run()
                .assert_code(125)
                .assert_stderr_contains("E_CHANGES_CONFLICT")
                .assert_stderr_contains("a.txt");
            assert_eq!(
                read_text(&a),
                Some(host),
                "round {round}: the host's edit was lost"
            );
            fx.stockade(["discard", &id]).run().assert_success();
        } else {
            fx.stockade(["apply", &id]).run().assert_success();
            assert_eq!(
                read_text(&a).as_deref(),
                Some(format!("run {round}\n").as_str())
            );
        }
    }
    eprintln!("{close} of {ROUNDS} rounds: the host's edit not after the run's first write");
    assert!(
        close > 0,
        "no round put the host's edit before the run's first write: the race was not run"
    );
}

/// The run edits a workspace file (overlayfs copies it up), then the host deletes the file
/// while the run goes on: `apply` would bring it back with the run's content, undoing the
/// host's deletion (no ctime is left to compare). A conflict, from the copy's origin mark.
/// Control: without the host's deletion the edit applies.
#[test]
fn a_file_the_host_deletes_during_the_run_is_not_brought_back() {
    for delete in [true, false] {
        let fx = Fixture::without_git();
        let a = fx.ws.join("a.txt");
        write_file(&a, "base\n", 0o644);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let report = fx.out_file("delete.json");
        let script = "echo run >> a.txt; echo > ready; read go; rm ready";
        let mut child = review_until_ready(&fx, script, &report, &format!("delete {delete}"));
        if delete {
            std::fs::remove_file(&a).expect("the host's deletion");
        }
        go(&mut child);
        assert!(child.wait().expect("wait").success());
        let id = pending_id(&report);
        let apply = fx.stockade(["apply", &id]).run();
        if delete {
            apply
                .assert_code(125)
                .assert_stderr_contains("E_CHANGES_CONFLICT")
                .assert_stderr_contains("a.txt");
            assert!(!a.exists(), "the host's deletion was undone");
        } else {
            apply.assert_success();
            assert_eq!(read_text(&a).as_deref(), Some("base\nrun\n"));
        }
    }
}

/// A group-shared workspace (setgid, `chmod 2775`): every directory made in it inherits the
/// bit, and a `--disk` run's finish refused the whole change set over it ("carries a set-id
/// bit"), losing the run's work; without `--disk` each new directory was flagged `setuid` and
/// applied without the bit, ending the sharing below it. Now finish keeps the change set,
/// nothing is flagged, and apply leaves the bit the host gives. Control: the same run in a
/// workspace without the bit applies the directory without it.
#[test]
fn a_setgid_workspace_keeps_review_runs_and_its_sharing() {
    for (shared, opts) in [
        (true, &["--disk", "10M"][..]),
        (true, &[][..]),
        (false, &["--disk", "10M"][..]),
    ] {
        if opts.contains(&"--disk") && attacks::not_applicable(&attacks::na::VIEW_DISK) {
            continue;
        }
        let fx = Fixture::without_git();
        std::fs::set_permissions(
            &fx.ws,
            std::fs::Permissions::from_mode(if shared { 0o2775 } else { 0o775 }),
        )
        .expect("chmod");
        let (run, id) = review(&fx, opts, "mkdir sub && echo hi > sub/f");
        run.assert_success();
        let id = id.expect("a pending change set");
        let all = entries(&fx, &id);
        assert!(codes(entry(&all, "sub")).is_empty(), "{all:?}");
        fx.stockade(["apply", &id]).run().assert_success();
        assert_eq!(read_text(&fx.ws.join("sub/f")).as_deref(), Some("hi\n"));
        assert_eq!(
            mode(&fx.ws.join("sub")) & 0o2000 != 0,
            shared,
            "shared {shared}, {opts:?}"
        );
    }
}

/// A mount inside the workspace: the view's lower layer is the workspace's own mount alone
/// (overlayfs does not follow mounts), so a review run would show the directory a mount
/// hides, which the walk never saw (it sees the mounted filesystem) and never masked: a
/// `.env` under a tmpfs mounted in the workspace was read (red team of review under gVisor,
/// both backends). Refused before anything runs, naming the mount point. Controls: a direct
/// run sees the mounted filesystem (no `.env` there); once unmounted, the same review run
/// runs and the `.env`, now seen by the walk, is masked.
#[test]
fn a_mount_inside_the_workspace_refuses_review() {
    if !attacks::is_root() {
        println!("n/a as an unprivileged caller: mounting a filesystem inside the workspace needs root (the refusal is every caller's)");
        return;
    }
    /// Unmounts when dropped (a failed assertion too).
    struct Mounted(std::path::PathBuf);
    impl Drop for Mounted {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let fx = Fixture::without_git();
    let m = fx.ws.join("m");
    std::fs::create_dir(&m).expect("mkdir");
    write_file(&m.join(".env"), "HIDDEN_KEY=1\n", 0o644);
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "stockade-test-tmpfs"])
        .arg(&m)
        .status()
        .expect("mount");
    assert!(mounted.success(), "mount a tmpfs in the workspace");
    let guard = Mounted(m.clone());
    let read = "cat m/.env; echo x > a.txt; echo ran";
    let run = fx.sandbox(&["--review"], read).run();
    run.assert_code(125)
        .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
        .assert_stderr_contains("is a mount point inside the workspace")
        .assert_lacks("HIDDEN_KEY")
        .assert_lacks("ran");
    assert!(!fx.ws.join("a.txt").exists());
    // Control: the workspace's own mount alone (a bind without its submounts, as the
    // view's lower layer takes it) shows the hidden file.
    let alone = fx.root.join("alone");
    std::fs::create_dir(&alone).expect("mkdir");
    let bound = std::process::Command::new("mount")
        .arg("--bind")
        .arg(&fx.ws)
        .arg(&alone)
        .status()
        .expect("mount --bind");
    assert!(bound.success());
    let bind_guard = Mounted(alone.clone());
    assert_eq!(
        read_text(&alone.join("m/.env")).as_deref(),
        Some("HIDDEN_KEY=1\n")
    );
    drop(bind_guard);
    // Control: directly, the command sees what is mounted there; a root caller's container
    // engine binds the workspace without its mounts, and refuses the same (what it would show
    // is the hidden directory).
    let direct = fx.sandbox(&[], "cat m/.env 2>&1; echo ran").run();
    if attacks::is_container_backend() && attacks::is_root() {
        direct
            .assert_code(125)
            .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
            .assert_stderr_contains("is a mount point inside")
            .assert_lacks("HIDDEN_KEY");
    } else {
        direct
            .assert_success()
            .assert_stdout_contains("ran")
            .assert_lacks("HIDDEN_KEY");
    }
    drop(guard);
    // Control: unmounted, the review runs, and the walk masks the `.env` it now sees.
    let (run, _) = review(&fx, &[], read);
    run.assert_success()
        .assert_stdout_contains("ran")
        .assert_lacks("HIDDEN_KEY");
}
