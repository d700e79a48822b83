//! Reading change sets: every kind, every flag, what is not a change, the digest.

use super::*;

#[test]
fn every_kind_is_read_and_copies_up_are_not_changes() {
    let fx = Fx::new();
    fx.lower("a.txt", "a\n");
    fx.lower("b.txt", "b\n");
    let c = fx.lower("c.txt", "c\n");
    chmod(&c, 0o644);
    fx.lower("d/x", "x\n");
    fx.lower("e/old1", "1\n");
    fx.lower("e/old2", "2\n");
    fx.lower("e/sub/deep", "d\n");
    fx.lower("f", "file\n");
    fx.lower("g/y", "y\n");
    fx.lower("k/keep", "k\n");
    std::fs::create_dir_all(fx.ws.join("m")).unwrap();
    chmod(&fx.ws.join("m"), 0o755);
    fx.lower("u.txt", "same\n");
    let mut run = fx.start("kinds");

    up(&run, "new.txt", "new\n");
    up(&run, "a.txt", "a, changed\n");
    if !whiteout(&run, "b.txt") || !whiteout(&run, "d") {
        return;
    }
    chmod(&up(&run, "c.txt", "c\n"), 0o755);
    up_dir(&run, "e");
    opaque(&run, "e");
    up(&run, "e/new1", "n\n");
    up(&run, "e/old1", "1\n");
    up(&run, "f/z", "z\n");
    up(&run, "g", "now a file\n");
    up(&run, "k/new", "k2\n");
    chmod(&up_dir(&run, "m"), 0o700);
    up(&run, "u.txt", "same\n");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        run.upper().join("fifo"),
        Ft::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();

    let set = run.finish(&FlagRules::default()).unwrap();
    use ChangeKind::*;
    let want: Vec<(String, ChangeKind)> = [
        ("a.txt", Modified),
        ("b.txt", Deleted),
        (
            "c.txt",
            ModeChanged {
                from: 0o644,
                to: 0o755,
            },
        ),
        ("d", Deleted),
        ("e", ReplacedDir),
        ("e/new1", Added),
        ("e/old2", Deleted),
        ("e/sub", Deleted),
        ("f", TypeChanged),
        ("f/z", Added),
        ("fifo", Added),
        ("g", TypeChanged),
        ("k/new", Added),
        (
            "m",
            ModeChanged {
                from: 0o755,
                to: 0o700,
            },
        ),
        ("new.txt", Added),
    ]
    .iter()
    .map(|(p, k)| (p.to_string(), *k))
    .collect();
    assert_eq!(kinds(&set), want);
    // u.txt and e/old1 were copied up unchanged.
    assert_eq!(set.unchanged_copies, 2);
    let d = set.entries.iter().find(|c| c.path == p("d")).unwrap();
    assert_eq!((d.file_type, d.mode), (FileType::Dir, None));
    let fifo = set.entries.iter().find(|c| c.path == p("fifo")).unwrap();
    assert_eq!(fifo.file_type, FileType::Other);
    assert_eq!(codes(&set, "fifo"), ["special-file"]);
    // Bases: a deleted directory's tree, a modified file's hash.
    let f = run.meta().finished.as_ref().unwrap();
    let base = |path: &str| &f.entries.iter().find(|e| e.path == p(path)).unwrap().base;
    assert!(matches!(
        base("d").state,
        BaseState::Dir { tree: Some(_), .. }
    ));
    assert!(matches!(base("a.txt").state, BaseState::File { .. }));
    assert_eq!(base("new.txt").state, BaseState::Absent);
    assert!(!base("a.txt").changed_during_run);
    // Read again (`changes`): the same set.
    assert_eq!(run.changes(&FlagRules::default()).unwrap(), set);
}

#[test]
fn each_flag_names_its_rule() {
    let fx = Fx::new();
    fx.lower("prot/cfg", "p\n");
    fx.lower("tool", "bin\n");
    chmod(&fx.ws.join("tool"), 0o644);
    fx.lower("plain", "x\n");
    chmod(&fx.ws.join("plain"), 0o644);
    fx.lower("bare/HEAD", "ref: refs/heads/main\n");
    std::fs::create_dir_all(fx.ws.join("bare/refs")).unwrap();
    fx.lower("bare/config", "[core]\n");
    let masked = fx.root.join("secret");
    let mut meta = fx.meta("flags");
    meta.protected = vec![fx.ws.join("prot")];
    meta.masked = vec![masked.clone()];
    let mut run = fx.start_with(meta);

    up(&run, ".vscode/settings.json", "{}\n");
    up(&run, "prot/cfg", "changed\n");
    chmod(&up(&run, "run.sh", "#!/bin/sh\necho hi\n"), 0o755);
    chmod(&up(&run, "tool", "new bin\n"), 0o755);
    chmod(&up(&run, "plain", "x\n"), 0o744);
    chmod(&up(&run, "su", "s\n"), 0o4755);
    up(&run, "inside.txt", "i\n");
    std::os::unix::fs::symlink("inside.txt", run.upper().join("l1")).unwrap();
    std::os::unix::fs::symlink("../../etc/passwd", run.upper().join("l2")).unwrap();
    std::os::unix::fs::symlink(masked.join("key"), run.upper().join("l3")).unwrap();
    up(&run, ".git/hooks/pre-commit", "echo\n");
    up(&run, "sub/.git", "gitdir: /elsewhere\n");
    up(&run, "bare/config", "[core]\n\tfsmonitor = evil\n");
    up(&run, "big", "0123456789AB");

    let rules = FlagRules {
        size_threshold: 10,
        ..FlagRules::default()
    };
    let set = run.finish(&rules).unwrap();
    assert_eq!(codes(&set, ".vscode"), ["host-executed"]);
    let vscode = &set
        .entries
        .iter()
        .find(|c| c.path == p(".vscode"))
        .unwrap()
        .flags[0];
    assert!(vscode.reason.contains("VS Code"), "{}", vscode.reason);
    assert_eq!(codes(&set, ".vscode/settings.json"), ["host-executed"]);
    assert_eq!(codes(&set, "prot/cfg"), ["protected"]);
    assert_eq!(codes(&set, "run.sh"), ["executable", "script", "large"]);
    assert_eq!(codes(&set, "tool"), ["executable"]);
    assert_eq!(codes(&set, "plain"), ["executable"]);
    assert_eq!(codes(&set, "su"), ["executable", "setuid"]);
    assert!(codes(&set, "inside.txt").is_empty());
    assert_eq!(codes(&set, "l1"), ["symlink"]);
    assert_eq!(codes(&set, "l2"), ["symlink", "symlink-outside"]);
    assert_eq!(
        codes(&set, "l3"),
        ["symlink", "symlink-outside", "symlink-into-masked"]
    );
    assert_eq!(codes(&set, ".git/hooks/pre-commit"), ["git-internals"]);
    assert_eq!(codes(&set, "sub/.git"), ["git-internals", "large"]);
    assert_eq!(codes(&set, "bare/config"), ["git-internals", "large"]);
    assert_eq!(codes(&set, "big"), ["large"]);
    let reason = |path: &str, code: &str| {
        let c = set.entries.iter().find(|c| c.path == p(path)).unwrap();
        c.flags
            .iter()
            .find(|f| f.code == code)
            .unwrap()
            .reason
            .clone()
    };
    assert!(reason("plain", "executable").contains("744"));
    assert!(reason("l3", "symlink-into-masked").contains("secret"));
    assert!(reason("prot/cfg", "protected").contains("prot"));
}

/// The allow-list: only text `stockade diff` shows as it is, in no place the host runs code
/// from, goes unflagged; everything else says why. Controls: plain text in several shapes
/// (UTF-8, CRLF, a byte-order mark, a character cut by the reader's chunk boundary).
#[test]
fn only_plain_text_goes_unflagged() {
    let fx = Fx::new();
    fx.lower("old.bin", "\0\x01binary");
    fx.lower("old.txt", "text\n");
    let mut run = fx.start("allow");
    let bytes = |rel: &str, b: &[u8]| {
        let path = run.upper().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b).unwrap();
        chmod(&path, 0o644);
    };
    bytes("nul.dat", b"a\0b");
    bytes("latin1.txt", b"caf\xe9\n");
    bytes("cut.txt", b"ends in \xe2\x82");
    bytes("esc.txt", b"ok\n\x1b[2Kgone\n");
    bytes("bidi.rs", "let s = \"\u{202E}x\";\n".as_bytes());
    bytes("tag.md", "see\u{E0041}\n".as_bytes());
    bytes("cr.py", b"good()\rbad()\n");
    bytes("zw.txt", "a\u{200B}b\n".as_bytes());
    bytes(
        "src/__pycache__/m.cpython-312.pyc",
        b"\xcb\x0d\x0d\x0a\0\0\0\0",
    );
    bytes("app.pyc", b"text but bytecode's name\n");
    bytes("Dockerfile", b"FROM x\nRUN id\n");
    bytes("web/node_modules/x/index.js", b"module.exports = 1;\n");
    bytes("old.bin", b"now text\n");
    bytes("old.txt", b"still text\n");
    // Plain text: controls.
    bytes("utf8.txt", "naïve café — ✓\n".as_bytes());
    bytes("crlf.txt", b"a\r\nb\r\n");
    bytes("bom.txt", "\u{FEFF}text\n".as_bytes());
    // Lines of 100 characters, the last one cut by the reader's 64 KiB chunk.
    let mut long = b"a"
        .repeat(99)
        .iter()
        .chain(b"\n")
        .copied()
        .collect::<Vec<u8>>()
        .repeat(656);
    long.truncate(64 * 1024 - 1);
    long.extend("é\n".as_bytes());
    bytes("boundary.txt", &long);
    // What a reader may not see the end of; controls: indentation, trailing blanks, a
    // 2000-character line.
    bytes(
        "pad.py",
        format!("x = 1{}; import os\n", " ".repeat(64)).as_bytes(),
    );
    bytes("wide.min.js", "v".repeat(2001).as_bytes());
    bytes(
        "indent.py",
        format!(
            "{}x = 1\ny = 2{}\n{}\n",
            " ".repeat(63),
            " ".repeat(500),
            "w".repeat(2000)
        )
        .as_bytes(),
    );
    bytes("tab.txt", b"a\tb\n");

    let set = run.finish(&FlagRules::default()).unwrap();
    assert_eq!(codes(&set, "nul.dat"), ["binary"]);
    assert_eq!(codes(&set, "latin1.txt"), ["binary"]);
    assert_eq!(codes(&set, "cut.txt"), ["binary"]);
    assert_eq!(codes(&set, "esc.txt"), ["hidden-text"]);
    assert_eq!(codes(&set, "bidi.rs"), ["hidden-text"]);
    assert_eq!(codes(&set, "tag.md"), ["hidden-text"]);
    assert_eq!(codes(&set, "cr.py"), ["hidden-text"]);
    assert_eq!(codes(&set, "zw.txt"), ["hidden-text"]);
    assert_eq!(codes(&set, "pad.py"), ["hidden-text"]);
    assert_eq!(codes(&set, "wide.min.js"), ["hidden-text"]);
    assert_eq!(
        codes(&set, "src/__pycache__/m.cpython-312.pyc"),
        ["host-loaded", "binary"]
    );
    assert_eq!(codes(&set, "src/__pycache__"), ["host-loaded"]);
    assert_eq!(codes(&set, "app.pyc"), ["host-loaded"]);
    assert_eq!(codes(&set, "Dockerfile"), ["build-file"]);
    assert_eq!(codes(&set, "web/node_modules/x/index.js"), ["host-loaded"]);
    assert_eq!(codes(&set, "old.bin"), ["replaces-binary"]);
    for plain in [
        "old.txt",
        "utf8.txt",
        "crlf.txt",
        "bom.txt",
        "boundary.txt",
        "tab.txt",
        "indent.py",
    ] {
        assert!(
            codes(&set, plain).is_empty(),
            "{plain}: {:?}",
            codes(&set, plain)
        );
    }
    let reason = |path: &str| {
        let c = set.entries.iter().find(|c| c.path == p(path)).unwrap();
        c.flags[0].reason.clone()
    };
    assert!(
        reason("bidi.rs").contains("U+202E"),
        "{}",
        reason("bidi.rs")
    );
    assert!(
        reason("esc.txt").contains("byte 3"),
        "{}",
        reason("esc.txt")
    );
    assert!(
        reason("cr.py").contains("carriage return"),
        "{}",
        reason("cr.py")
    );
    assert!(reason("latin1.txt").contains("not UTF-8 at byte 3"));

    // Apply without acceptance refuses every flagged entry and names each; the plain ones
    // alone go through.
    let e = run.apply(&ApplyOptions::default(), &FlagRules::default());
    let Err(ChangesError::Flagged(list)) = e else {
        panic!("{e:?}");
    };
    assert!(list.iter().any(|(p, _)| p == Path::new("nul.dat")));
    assert!(!list.iter().any(|(p, _)| p == Path::new("utf8.txt")));
    let only_plain = ApplyOptions {
        only: [
            "old.txt",
            "utf8.txt",
            "crlf.txt",
            "bom.txt",
            "boundary.txt",
            "tab.txt",
        ]
        .map(PathBuf::from)
        .to_vec(),
        ..Default::default()
    };
    let report = run.apply(&only_plain, &FlagRules::default()).unwrap();
    assert_eq!(report.written.len(), 6);
}

/// A change set recorded before the content check (its entries carry no `content`) cannot
/// be applied unflagged: `unchecked`.
#[test]
fn an_entry_without_a_content_check_is_flagged() {
    let fx = Fx::new();
    let mut run = fx.start("old-format");
    up(&run, "a.txt", "a\n");
    chmod(&run.upper().join("a.txt"), 0o644);
    run.finish(&FlagRules::default()).unwrap();
    let mut meta = run.meta().clone();
    meta.finished.as_mut().unwrap().entries[0].content = None;
    let json = serde_json::to_string(&meta).unwrap();
    assert!(!json.contains("\"content\""));
    std::fs::write(run.path().join("meta.json"), json).unwrap();
    let run = fx.store.find(Some("old-format"), None).unwrap();
    let set = run.changes(&FlagRules::default()).unwrap();
    assert_eq!(codes(&set, "a.txt"), ["unchecked"]);
}

#[test]
fn a_deleted_directory_holding_a_protected_path_is_flagged() {
    let fx = Fx::new();
    fx.lower("conf/.envrc", "export A=1\n");
    let mut meta = fx.meta("protdel");
    meta.protected = vec![fx.ws.join("conf/.envrc")];
    let mut run = fx.start_with(meta);
    if !whiteout(&run, "conf") {
        return;
    }
    let set = run.finish(&FlagRules::default()).unwrap();
    assert_eq!(codes(&set, "conf"), ["protected"]);
}

#[test]
fn the_digest_catches_a_changed_byte_an_added_file_and_an_edited_record() {
    let fx = Fx::new();
    fx.lower("a", "a\n");
    let mut run = fx.start("digest");
    let f = up(&run, "a", "upper\n");
    let rules = FlagRules::default();
    run.finish(&rules).unwrap();
    run.changes(&rules).unwrap();
    run.diff(&[]).unwrap();

    std::fs::write(&f, "uPper\n").unwrap();
    let tampered = |r: Result<ChangeSet, ChangesError>| {
        let e = r.unwrap_err();
        assert!(matches!(e, ChangesError::Tampered { .. }), "{e}");
        assert_eq!(e.registry_code(), sandbox::Code::ChangesTampered);
    };
    tampered(run.changes(&rules));
    assert!(matches!(run.diff(&[]), Err(ChangesError::Tampered { .. })));
    assert!(matches!(
        run.apply(&accept_all(), &rules),
        Err(ChangesError::Tampered { .. })
    ));
    std::fs::write(&f, "upper\n").unwrap();
    run.changes(&rules).unwrap();

    up(&run, "planted", "x\n");
    tampered(run.changes(&rules));
    std::fs::remove_file(run.upper().join("planted")).unwrap();
    run.changes(&rules).unwrap();

    // The mode is part of it too.
    chmod(&f, 0o777);
    tampered(run.changes(&rules));
    chmod(&f, 0o644);
    run.changes(&rules).unwrap();

    let meta_path = run.path().join("meta.json");
    let text = std::fs::read_to_string(&meta_path).unwrap();
    let digest = run.meta().finished.as_ref().unwrap().digest.clone();
    let edited = text.replace(&digest, &format!("sha256:{}", "0".repeat(64)));
    assert_ne!(text, edited);
    std::fs::write(&meta_path, edited).unwrap();
    let reopened = fx.store.find(Some("digest"), None).unwrap();
    tampered(reopened.changes(&rules));
}

#[test]
fn marks_are_read_only_in_the_namespace_of_the_runs_overlay() {
    let fx = Fx::new();
    fx.lower("src/main.c", "int main;\n");
    fx.lower("src/util.c", "int util;\n");
    // A root caller's overlay is privileged: `user.overlay.opaque` is the command's own
    // xattr, not a mark. Read as one, it would delete src/util.c.
    let mut meta = fx.meta("marks");
    meta.caller = (0, 0);
    let mut run = fx.start_with(meta);
    up(&run, "src/main.c", "int main(void);\n");
    set_xattr(&run.upper().join("src"), "user.overlay.opaque", b"y");
    let set = run.finish(&FlagRules::default()).unwrap();
    assert_eq!(
        kinds(&set),
        [("src/main.c".to_string(), ChangeKind::Modified)]
    );

    // An unprivileged caller's overlay marks with `user.overlay.*`.
    let mut meta = fx.meta("marks-user");
    meta.caller = (1000, 1000);
    let mut run = fx.start_with(meta);
    up(&run, "src/main.c", "int main(void);\n");
    opaque(&run, "src");
    let set = run.finish(&FlagRules::default()).unwrap();
    assert_eq!(
        kinds(&set),
        [
            ("src".to_string(), ChangeKind::ReplacedDir),
            ("src/main.c".to_string(), ChangeKind::Modified),
            ("src/util.c".to_string(), ChangeKind::Deleted),
        ]
    );
}

#[test]
fn marks_stockade_never_makes_are_refused() {
    if skip_unless_root("setting trusted.* xattrs") {
        return;
    }
    let fx = Fx::new();
    fx.lower("d/f", "f\n");
    let mut meta = fx.meta("redirect");
    meta.caller = (0, 0);
    let mut run = fx.start_with(meta.clone());
    up_dir(&run, "d");
    set_xattr(
        &run.upper().join("d"),
        "trusted.overlay.redirect",
        b"/elsewhere",
    );
    let e = run.finish(&FlagRules::default()).unwrap_err();
    assert!(matches!(e, ChangesError::Unsupported { .. }), "{e}");
    assert_eq!(e.registry_code(), sandbox::Code::ChangesTampered);

    meta.run_id = "metacopy".into();
    let mut run = fx.start_with(meta.clone());
    up(&run, "d/f", "f\n");
    set_xattr(&run.upper().join("d/f"), "trusted.overlay.metacopy", b"");
    assert!(matches!(
        run.finish(&FlagRules::default()),
        Err(ChangesError::Unsupported { .. })
    ));

    // An escaped xattr (the command's own, `trusted.overlay.overlay.*`) is data.
    meta.run_id = "escaped".into();
    let mut run = fx.start_with(meta);
    up(&run, "d/f", "g\n");
    set_xattr(
        &run.upper().join("d/f"),
        "trusted.overlay.overlay.metacopy",
        b"",
    );
    run.finish(&FlagRules::default()).unwrap();
}

/// A real overlay over the workspace, changed by `sh`, then read and applied. `userxattr`:
/// mounted in a user namespace (`unshare -Urm`), as for an unprivileged caller.
fn real_overlay(userxattr: bool) {
    let fx = Fx::new();
    fx.lower("keep", "k\n");
    fx.lower("gone", "g\n");
    fx.lower("edit", "e\n");
    fx.lower("dir/a", "a\n");
    fx.lower("dir/b", "b\n");
    fx.lower("dropped/x", "x\n");
    let mut meta = fx.meta("overlay");
    meta.caller = if userxattr { (1000, 1000) } else { (0, 0) };
    let mut run = fx.start_with(meta);
    let merged = fx.root.join("merged");
    std::fs::create_dir_all(&merged).unwrap();
    let script = format!(
        "set -e; mount -t overlay overlay -o lowerdir={},upperdir={},workdir={}{} {m}; cd {m}; \
         rm gone; echo edited > edit; rm -rf dir; mkdir dir; echo a > dir/a; rm -rf dropped; \
         echo n > new; chmod 600 keep; cd /; umount {m}",
        fx.ws.display(),
        run.upper().display(),
        run.work().display(),
        if userxattr { ",userxattr" } else { "" },
        m = merged.display()
    );
    let mut cmd = if userxattr {
        let mut c = std::process::Command::new("unshare");
        c.args(["-Urm", "sh", "-c", &script]);
        c
    } else {
        let mut c = std::process::Command::new("sh");
        c.args(["-c", &script]);
        c
    };
    let out = cmd.output();
    if !out.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: cannot mount an overlay here: {out:?}");
        return;
    }
    let set = run.finish(&FlagRules::default()).unwrap();
    use ChangeKind::*;
    let want: Vec<(String, ChangeKind)> = [
        ("dir", ReplacedDir),
        ("dir/b", Deleted),
        ("dropped", Deleted),
        ("edit", Modified),
        ("gone", Deleted),
        (
            "keep",
            ModeChanged {
                from: 0o644,
                to: 0o600,
            },
        ),
        ("new", Added),
    ]
    .iter()
    .map(|(p, k)| (p.to_string(), *k))
    .collect();
    assert_eq!(kinds(&set), want);
    assert_eq!(set.unchanged_copies, 1, "dir/a is the same");
    // The work dir overlay leaves (work/work, mode 000) goes with the rest.
    let report = run.apply(&accept_all(), &FlagRules::default()).unwrap();
    assert_eq!(report.remaining, 0);
    assert_eq!(listing(&fx.ws), ["dir", "edit", "keep", "new"]);
    assert_eq!(listing(&fx.ws.join("dir")), ["a"]);
    assert_eq!(mode_of(&fx.ws.join("keep")), 0o600);
    assert!(!fx.store.path().join("overlay").exists());
}

#[test]
fn a_privileged_overlay_is_read_as_it_was_written() {
    if skip_unless_root("a privileged overlay") {
        return;
    }
    real_overlay(false);
}

#[test]
fn a_userxattr_overlay_is_read_as_it_was_written() {
    real_overlay(true);
}

#[test]
fn names_that_are_not_utf8_survive_the_record() {
    use std::os::unix::ffi::OsStrExt;
    let fx = Fx::new();
    let mut run = fx.start("bytes");
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9");
    std::fs::write(run.upper().join(name), "x\n").unwrap();
    let set = run.finish(&FlagRules::default()).unwrap();
    assert_eq!(set.entries[0].path, Path::new(name));
    let json = serde_json::to_string(&set).unwrap();
    assert!(json.contains("\"bytes\""), "{json}");
    let again = fx.store.find(Some("bytes"), None).unwrap();
    assert_eq!(again.changes(&FlagRules::default()).unwrap(), set);
}

#[test]
fn diffs_show_text_name_binaries_and_use_dev_null() {
    let fx = Fx::new();
    fx.lower("t.txt", "one\ntwo\nthree\n");
    fx.lower("gone.txt", "bye\n");
    fx.lower("bin", "a\0b");
    let mut run = fx.start("diff");
    up(&run, "t.txt", "one\n2\nthree\n");
    up(&run, "new.txt", "hello\n");
    up(&run, "bin", "a\0c");
    chmod(&up(&run, "x.sh", "#!/bin/sh\n"), 0o755);
    std::os::unix::fs::symlink("t.txt", run.upper().join("ln")).unwrap();
    if !whiteout(&run, "gone.txt") {
        return;
    }
    run.finish(&FlagRules::default()).unwrap();
    let d = run.diff(&[]).unwrap();
    assert!(d.contains("diff --git a/t.txt b/t.txt\n--- a/t.txt\n+++ b/t.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"), "{d}");
    assert!(
        d.contains("new file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n"),
        "{d}"
    );
    assert!(
        d.contains("deleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n"),
        "{d}"
    );
    assert!(d.contains("Binary files a/bin and b/bin differ"), "{d}");
    assert!(d.contains("new file mode 100755"), "{d}");
    assert!(d.contains("new file mode 120000\n--- /dev/null\n+++ b/ln\n@@ -0,0 +1 @@\n+t.txt\n\\ No newline at end of file"), "{d}");
    let only = run.diff(&[p("new.txt")]).unwrap();
    assert!(
        only.contains("b/new.txt") && !only.contains("t.txt"),
        "{only}"
    );
    assert!(matches!(
        run.diff(&[p("nope")]),
        Err(ChangesError::NoSuchChange(_))
    ));
}

#[test]
fn what_an_opaque_directory_drops_is_recorded_in_path_order() {
    let fx = Fx::new();
    fx.lower("e/aaa", "a\n");
    fx.lower("e/mmm/x", "m\n");
    let mut run = fx.start("order");
    up_dir(&run, "e");
    opaque(&run, "e");
    up(&run, "e/zzz/y", "z\n");
    let set = run.finish(&FlagRules::default()).unwrap();
    let paths: Vec<String> = kinds(&set).into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, ["e", "e/aaa", "e/mmm", "e/zzz", "e/zzz/y"]);
    // The record reads back (it must be sorted to be read at all).
    let again = fx.store.find(Some("order"), None).unwrap();
    assert_eq!(again.changes(&FlagRules::default()).unwrap(), set);
}

/// What `truncate -s 16T big` leaves in the upper (no blocks, terabytes of apparent size),
/// one byte over the limit a file without holes may have: recorded as a change, flagged,
/// read through its data extents (none: see the test below, which counts the bytes read)
/// rather than refusing the whole change set or hashing terabytes of zeros.
#[test]
fn a_huge_sparse_file_is_recorded_and_flagged_not_hashed_whole() {
    let fx = Fx::new();
    fx.lower("a.txt", "a\n");
    let mut run = fx.start("sparse");
    up(&run, "a.txt", "b\n");
    let big = std::fs::File::create(run.upper().join("big")).unwrap();
    let size = crate::changes::read::MAX_FILE_BYTES + 1;
    if let Err(e) = big.set_len(size) {
        eprintln!("skipped: this filesystem holds no sparse file that large: {e}");
        return;
    }
    if !crate::changes::read::has_hole(&big, size).unwrap() {
        eprintln!("skipped: this filesystem keeps no holes");
        return;
    }
    let set = run.finish(&FlagRules::default()).unwrap();
    assert_eq!(
        kinds(&set),
        [
            ("a.txt".to_string(), ChangeKind::Modified),
            ("big".to_string(), ChangeKind::Added)
        ]
    );
    let c = codes(&set, "big");
    assert!(c.contains(&"binary") && c.contains(&"large"), "{c:?}");
    assert!(codes(&set, "a.txt").is_empty());
}

/// A file of `size` bytes holding `data` at `at`, the rest a hole (`false`: this filesystem
/// keeps no hole, said on stderr).
fn sparse(path: &Path, size: u64, at: u64, data: &[u8]) -> bool {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::create(path).unwrap();
    f.set_len(size).unwrap();
    f.write_all_at(data, at).unwrap();
    f.sync_all().unwrap();
    let holes = crate::changes::read::has_hole(&f, size).unwrap();
    if !holes {
        eprintln!("skipped: {} keeps no holes", path.display());
    }
    holes
}

/// A sparse file is read through its data extents only: a 60 GiB file holding one block of
/// data costs that block (the bytes read are counted), not 60 GiB of zeros through the
/// hasher. Its identity depends on its bytes only: the same bytes with a block of zeros
/// written as data (another hole layout) compare equal; other bytes do not. Control: a file
/// without holes is read whole, and the same bytes in a file without holes have another
/// identity (a spurious change at worst, never a missed one).
#[test]
fn a_sparse_file_is_read_through_its_data_extents_only() {
    let t = tempfile::tempdir().unwrap();
    let big = t.path().join("big");
    if !sparse(&big, 60 << 30, 1 << 30, b"payload") {
        return;
    }
    let f = std::fs::File::open(&big).unwrap();
    let mut blocks = Vec::new();
    let read = crate::changes::read::nonzero_blocks(&f, 60 << 30, |offset, bytes| {
        blocks.push((offset, bytes.to_vec()));
        Ok(())
    })
    .unwrap();
    assert!(read <= 1 << 20, "read {read} bytes of a file holding 7");
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].0, 1 << 30);
    assert!(blocks[0].1.starts_with(b"payload"));
    let h = crate::changes::read::hash_file(&mut std::fs::File::open(&big).unwrap(), true).unwrap();
    assert!(h.sparse && !h.script);
    assert!(
        matches!(&h.content, Some(Content::Binary { why }) if why.contains("sparse")),
        "{:?}",
        h.content
    );

    // The same bytes, another layout: a block of zeros written as data.
    let other = t.path().join("other");
    assert!(sparse(&other, 60 << 30, 1 << 30, b"payload"));
    {
        use std::os::unix::fs::FileExt;
        let g = std::fs::OpenOptions::new()
            .write(true)
            .open(&other)
            .unwrap();
        g.write_all_at(&[0u8; 8192], 2 << 30).unwrap();
    }
    let h2 =
        crate::changes::read::hash_file(&mut std::fs::File::open(&other).unwrap(), false).unwrap();
    assert_eq!(h.sha256, h2.sha256);
    // Other bytes: another identity.
    let third = t.path().join("third");
    assert!(sparse(&third, 60 << 30, 1 << 30, b"pAyload"));
    let h3 =
        crate::changes::read::hash_file(&mut std::fs::File::open(&third).unwrap(), false).unwrap();
    assert_ne!(h.sha256, h3.sha256);
    // Another size: another identity.
    let fourth = t.path().join("fourth");
    assert!(sparse(&fourth, (60 << 30) + 1, 1 << 30, b"payload"));
    let h4 =
        crate::changes::read::hash_file(&mut std::fs::File::open(&fourth).unwrap(), false).unwrap();
    assert_ne!(h.sha256, h4.sha256);

    // A file without holes is read whole; the same bytes with holes have the same identity
    // (one identity for all layouts), which is no plain SHA-256 of the bytes.
    let dense = t.path().join("dense");
    std::fs::write(&dense, vec![0u8; 3 * 4096]).unwrap();
    let d = std::fs::File::open(&dense).unwrap();
    assert!(!crate::changes::read::has_hole(&d, 3 * 4096).unwrap());
    let hd =
        crate::changes::read::hash_file(&mut std::fs::File::open(&dense).unwrap(), true).unwrap();
    assert!(!hd.sparse);
    use sha2::Digest;
    assert_ne!(
        hd.sha256,
        crate::changes::read::hex(&sha2::Sha256::digest(vec![0u8; 3 * 4096]))
    );
    let small = t.path().join("small");
    assert!(sparse(&small, 3 * 4096, 3 * 4096, b""));
    let hs =
        crate::changes::read::hash_file(&mut std::fs::File::open(&small).unwrap(), true).unwrap();
    assert!(hs.sparse);
    assert_eq!(hs.sha256, hd.sha256);
}

/// A run's `truncate -s 60G` file: `finish` records it at once, flagged (`binary`, saying it
/// is sparse, and `large`), never truncated or dropped; applied when accepted, the workspace
/// gets a file of the same size and bytes that stays sparse (a few blocks on disk, not
/// 60 GiB of zeros), its identity checked on the way.
#[test]
fn a_sparse_file_is_recorded_flagged_and_applied_sparse() {
    let fx = Fx::new();
    let mut run = fx.start("sparse");
    let size: u64 = 60 << 30;
    if !sparse(&run.upper().join("f"), size, 5 << 30, b"written") {
        return;
    }
    let rules = FlagRules::default();
    let set = run.finish(&rules).unwrap();
    let e = set.entries.iter().find(|e| e.path == p("f")).unwrap();
    assert_eq!(e.size, size);
    let c = codes(&set, "f");
    assert!(c.contains(&"binary") && c.contains(&"large"), "{c:?}");
    assert!(
        e.flags.iter().any(|f| f.reason.contains("sparse")),
        "{:?}",
        e.flags
    );
    // Refused unflagged; accepted, applied sparse.
    assert!(run.apply(&ApplyOptions::default(), &rules).is_err());
    assert!(!fx.ws.join("f").exists());
    run.apply(&accept_all(), &rules).unwrap();
    let m = std::fs::metadata(fx.ws.join("f")).unwrap();
    assert_eq!(m.len(), size);
    assert!(m.blocks() * 512 < 1 << 20, "{} blocks", m.blocks());
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 9];
    std::fs::File::open(fx.ws.join("f"))
        .unwrap()
        .read_exact_at(&mut buf, (5 << 30) - 1)
        .unwrap();
    assert_eq!(&buf, b"\0written\0");
}
