//! The store and run directories: what is refused, what is made, listing, removal.

use std::os::unix::fs::MetadataExt;

use super::*;

#[test]
fn default_store_dir_takes_absolute_paths_only() {
    let d =
        |x: Option<&str>, h: Option<&str>| default_store_dir(x.map(OsStr::new), h.map(OsStr::new));
    assert_eq!(d(Some("/s"), Some("/h")), Some(p("/s/stockade/changes")));
    assert_eq!(
        d(Some("rel"), Some("/h")),
        Some(p("/h/.local/state/stockade/changes"))
    );
    assert_eq!(
        d(None, Some("/h")),
        Some(p("/h/.local/state/stockade/changes"))
    );
    assert_eq!(d(None, Some("h")), None);
    assert_eq!(d(None, None), None);
}

#[test]
fn the_store_is_made_private_and_refused_when_unsafe() {
    let t = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(t.path()).unwrap();
    let dir = root.join("state/stockade/changes");
    let store = Store::open(&dir).unwrap();
    assert_eq!(store.path(), dir);
    assert_eq!(mode_of(&dir), 0o700);
    assert_eq!(mode_of(&root.join("state/stockade")), 0o700);

    let refused = |path: &Path, why: &str| {
        let e = Store::open(path).unwrap_err();
        assert!(matches!(e, ChangesError::StoreUnsafe { .. }), "{e}");
        assert!(e.to_string().contains(why), "{e}");
    };
    std::os::unix::fs::symlink(&dir, root.join("link")).unwrap();
    refused(&root.join("link"), "symbolic link");
    std::fs::write(root.join("file"), "").unwrap();
    refused(&root.join("file"), "not a directory");
    chmod(&dir, 0o770);
    refused(&dir, "others can write");
    chmod(&dir, 0o700);
    if is_root() {
        std::os::unix::fs::chown(&dir, Some(1000), None).unwrap();
        refused(&dir, "belongs to uid 1000");
        std::os::unix::fs::chown(&dir, Some(0), None).unwrap();
    }
    assert!(matches!(
        Store::open(Path::new("relative")),
        Err(ChangesError::Locate { .. })
    ));
}

#[test]
fn a_run_directory_is_made_once_with_its_layers_and_record() {
    let fx = Fx::new();
    let meta = fx.meta("run-1");
    let owner = is_root().then_some((4242, 4243));
    let run = fx.store.create_run(&meta, owner, 0o2775).unwrap();
    assert_eq!(run.path(), fx.store.path().join("run-1"));
    assert_eq!(mode_of(run.path()), 0o700);
    assert_eq!(mode_of(&run.upper()), 0o2775);
    assert_eq!(mode_of(&run.work()), 0o700);
    assert_eq!(mode_of(&run.path().join("meta.json")), 0o600);
    if let Some((uid, gid)) = owner {
        let m = std::fs::metadata(run.upper()).unwrap();
        assert_eq!((m.uid(), m.gid()), (uid, gid));
    }
    let ws_meta = std::fs::metadata(&fx.ws).unwrap();
    let (ino, dev) = (ws_meta.ino(), ws_meta.dev());
    assert_eq!(run.meta().workspace_ino, Some(ino));
    assert_eq!(
        run.meta(),
        &RunMeta {
            workspace_ino: Some(ino),
            workspace_dev: Some(dev),
            ..meta.clone()
        }
    );
    let e = fx.store.create_run(&meta, None, 0o755).unwrap_err();
    assert!(matches!(e, ChangesError::Create { .. }), "{e}");

    let mut bad = meta.clone();
    bad.run_id = "../escape".into();
    assert!(matches!(
        fx.store.create_run(&bad, None, 0o755),
        Err(ChangesError::BadRunId { .. })
    ));
    // A store inside the workspace would be the run's to write.
    let inside = Store::open(&fx.ws.join(".state")).unwrap();
    let mut m = meta;
    m.run_id = "inside".into();
    assert!(matches!(
        inside.create_run(&m, None, 0o755),
        Err(ChangesError::StoreUnsafe { .. })
    ));
}

#[test]
fn runs_are_listed_newest_first_and_found_by_id_or_workspace() {
    let fx = Fx::new();
    let mut first = fx.start("first");
    up(&first, "a", "12345");
    first.finish(&FlagRules::default()).unwrap();
    let mut other = fx.meta("other-ws");
    other.workspace = fx.outside.clone();
    std::thread::sleep(Duration::from_millis(5));
    fx.start_with(other);
    let list = fx.store.runs().unwrap();
    let ids: Vec<&str> = list.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, ["other-ws", "first"]);
    assert_eq!(
        (list[1].size, list[1].entries, list[1].finished),
        (5, 1, true)
    );
    let line = list[1].to_string();
    assert!(
        line.starts_with("first  ") && line.contains("1 change"),
        "{line}"
    );
    assert!(serde_json::to_string(&list)
        .unwrap()
        .contains("\"run_id\":\"first\""));

    assert_eq!(fx.store.find(None, None).unwrap().id(), "other-ws");
    assert_eq!(fx.store.find(None, Some(&fx.ws)).unwrap().id(), "first");
    assert_eq!(fx.store.find(Some("first"), None).unwrap().id(), "first");
    let e = fx.store.find(Some("missing"), None).unwrap_err();
    assert!(matches!(e, ChangesError::NotFound { .. }), "{e}");
    assert!(matches!(
        fx.store.find(None, Some(&fx.root)),
        Err(ChangesError::NotFound { .. })
    ));
}

#[test]
fn discard_removes_everything_overlay_leaves_and_follows_no_link() {
    let fx = Fx::new();
    let run = fx.start("discard");
    // As overlayfs leaves its work dir: work/work at mode 000 holding a whiteout.
    let work = run.work().join("work");
    std::fs::create_dir(&work).unwrap();
    if is_root() {
        let _ = rustix::fs::mknodat(
            rustix::fs::CWD,
            work.join("#19"),
            Ft::CharacterDevice,
            Mode::from_raw_mode(0),
            0,
        );
    }
    chmod(&work, 0o000);
    // A deep tree, and links out of it.
    let mut deep = run.upper();
    for i in 0..100 {
        deep.push(format!("d{i}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    write(&deep.join("f"), "f");
    write(&fx.outside.join("precious"), "p");
    std::os::unix::fs::symlink(&fx.outside, run.upper().join("out")).unwrap();
    std::os::unix::fs::symlink(&fx.outside, deep.join("out")).unwrap();
    let path = run.path().to_path_buf();
    run.discard().unwrap();
    assert!(!path.exists());
    assert_eq!(listing(&fx.outside), ["precious"]);
}

#[test]
fn not_copyable_counts_what_the_caller_does_not_own() {
    let fx = Fx::new();
    fx.lower("mine", "m");
    fx.lower("sub/theirs", "t");
    fx.lower("sub/also-theirs", "t");
    std::os::unix::fs::symlink("/nowhere", fx.ws.join("link")).unwrap();
    let m = std::fs::metadata(&fx.ws).unwrap();
    let (uid, gid) = (m.uid(), m.gid());
    assert_eq!(not_copyable(&fx.ws, uid, gid, 10).unwrap(), (0, vec![]));
    if skip_unless_root("giving files to another owner") {
        return;
    }
    std::os::unix::fs::chown(fx.ws.join("sub/theirs"), Some(1000), None).unwrap();
    std::os::unix::fs::chown(fx.ws.join("sub/also-theirs"), None, Some(1000)).unwrap();
    let (n, paths) = not_copyable(&fx.ws, uid, gid, 1).unwrap();
    assert_eq!(n, 2);
    assert_eq!(paths, [fx.ws.join("sub/also-theirs")]);
}

/// The cache by directory: an unchanged directory is not listed again (what it found is
/// remembered, even after the file is given back: that is the documented blind spot of a
/// `chown` in place); a directory that gained a name is listed again.
#[test]
fn not_copyable_remembers_unchanged_directories_and_looks_again_at_changed_ones() {
    if skip_unless_root("giving files to another owner") {
        return;
    }
    let fx = Fx::new();
    fx.lower("sub/theirs", "t");
    let m = std::fs::metadata(&fx.ws).unwrap();
    let ids = (m.uid(), m.gid());
    std::os::unix::fs::chown(fx.ws.join("sub/theirs"), Some(4321), None).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let settle = std::time::Duration::ZERO;
    let check = |c| super::super::copyable::check(&fx.ws, ids, 10, c, settle).unwrap();
    assert_eq!(check(Some(cache.path())).0, 1);
    // Given back in place: the directory did not change, so the remembered answer stands.
    std::os::unix::fs::chown(fx.ws.join("sub/theirs"), Some(ids.0), None).unwrap();
    assert_eq!(check(Some(cache.path())).0, 1);
    // Control: without the cache the file is seen as it is now.
    assert_eq!(check(None).0, 0);
    // A new name in the directory: it is listed again.
    fx.lower("sub/new", "n");
    std::os::unix::fs::chown(fx.ws.join("sub/new"), Some(4321), None).unwrap();
    let (n, paths) = check(Some(cache.path()));
    assert_eq!(n, 1);
    assert_eq!(paths, [fx.ws.join("sub/new")]);
}

/// `cargo test -p workspace -- --ignored not_copyable_timing --nocapture`
#[test]
#[ignore]
fn not_copyable_timing() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    for d in 0..1000 {
        let dir = ws.join(format!("d{}/e{d}", d % 50));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(dir.join(format!("f{f}")), "").unwrap();
        }
    }
    let m = std::fs::metadata(ws).unwrap();
    // Cold-ish and warm.
    for _ in 0..3 {
        let start = std::time::Instant::now();
        let (n, _) = not_copyable(ws, m.uid() + 1, m.gid(), 10).unwrap();
        eprintln!("not_copyable: {n} entries in {:?}", start.elapsed());
    }
}
