//! The trust digest, the store and the run check, on real directories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::*;

struct Env {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    store: PathBuf,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ws = root.join("ws");
    fs::create_dir(&ws).unwrap();
    Env {
        store: root.join("state/stockade/trust"),
        _dir: dir,
        root,
        ws,
    }
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn entry<'a>(s: &'a Snapshot, path: &str) -> &'a Entry {
    s.entries.iter().find(|e| e.path == path).unwrap()
}

#[test]
fn digest_matches_its_definition() {
    let e = env();
    write(&e.ws.join(".mcp.json"), "{}\n");
    let snap = Snapshot::take(&e.ws).unwrap();
    let mut paths: Vec<&str> = TRUST_PATHS.iter().map(|t| t.path).collect();
    paths.sort();
    let mut h = Sha256::new();
    h.update(b"stockade-trust-v1\0");
    for p in paths {
        let token = if p == ".mcp.json" {
            format!("file:{}", hex(&Sha256::digest(b"{}\n")))
        } else {
            "missing".to_string()
        };
        h.update(format!("{p}\0{token}\0").as_bytes());
    }
    assert_eq!(snap.digest, format!("sha256:{}", hex(&h.finalize())));
    assert_eq!(snap.entries.len(), TRUST_PATHS.len());
}

#[test]
fn digest_does_not_depend_on_creation_order_or_location() {
    let (a, b) = (env(), env());
    let files = [
        (".stockade/b.toml", "b"),
        (".stockade/a.toml", "a"),
        (".claude/commands/x.md", "x"),
        (".envrc", "use nix"),
    ];
    for (p, t) in files {
        write(&a.ws.join(p), t);
    }
    for (p, t) in files.iter().rev() {
        write(&b.ws.join(p), t);
    }
    let (sa, sb) = (
        Snapshot::take(&a.ws).unwrap(),
        Snapshot::take(&b.ws).unwrap(),
    );
    assert_eq!(sa.digest, sb.digest);
    assert_eq!(sa.entries, sb.entries);
    let paths: Vec<&str> = sa.entries.iter().map(|e| e.path.as_str()).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(paths, sorted, "entries are sorted and unique");
    assert_eq!(Snapshot::take(&a.ws).unwrap().digest, sa.digest, "stable");
}

#[test]
fn missing_is_marked_and_differs_from_empty() {
    let e = env();
    let none = Snapshot::take(&e.ws).unwrap();
    assert!(none.entries.iter().all(|x| x.state == State::Missing));
    // A directory without files pins nothing: it counts as missing.
    fs::create_dir_all(e.ws.join(".claude/commands")).unwrap();
    fs::create_dir_all(e.ws.join(".stockade/quarantine/run1")).unwrap();
    assert_eq!(Snapshot::take(&e.ws).unwrap().digest, none.digest);
    // An empty file is not a missing one.
    write(&e.ws.join(".envrc"), "");
    let empty = Snapshot::take(&e.ws).unwrap();
    assert_ne!(empty.digest, none.digest);
    assert_eq!(entry(&empty, ".envrc").state, State::File);
}

#[test]
fn one_byte_and_the_execute_bit_change_the_digest() {
    let e = env();
    write(&e.ws.join(".mcp.json"), r#"{"mcpServers":{}}"#);
    write(&e.ws.join(".git/hooks/pre-commit"), "#!/bin/sh\n");
    let before = Snapshot::take(&e.ws).unwrap();
    write(&e.ws.join(".mcp.json"), r#"{"mcpServers":{ }"#);
    let after = Snapshot::take(&e.ws).unwrap();
    assert_ne!(before.digest, after.digest);
    let changes = diff(&before.entries, &after.entries);
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].path, ".mcp.json");
    assert_eq!(changes[0].change, ChangeKind::Changed);

    let hook = e.ws.join(".git/hooks/pre-commit");
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    let exec = Snapshot::take(&e.ws).unwrap();
    assert!(entry(&exec, ".git/hooks/pre-commit").executable);
    let changes = diff(&after.entries, &exec.entries);
    assert_eq!(
        changes.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(),
        [".git/hooks/pre-commit"]
    );
}

#[test]
fn directories_count_recursively_except_the_quarantine() {
    let e = env();
    write(&e.ws.join(".stockade/policy.toml"), "p");
    write(&e.ws.join(".stockade/sub/deep.toml"), "d");
    write(&e.ws.join(".stockade/quarantine/run1/.mcp.json"), "q");
    write(&e.ws.join(".claude/notes.txt"), "not trust-relevant");
    let s = Snapshot::take(&e.ws).unwrap();
    let paths: Vec<&str> = s.entries.iter().map(|x| x.path.as_str()).collect();
    assert!(paths.contains(&".stockade/policy.toml"));
    assert!(paths.contains(&".stockade/sub/deep.toml"));
    assert!(!paths.iter().any(|p| p.contains("quarantine")));
    assert!(
        !paths.contains(&".stockade"),
        "a directory with files has no marker"
    );
    assert!(!paths.contains(&".claude/notes.txt"));
    let before = s.digest;
    write(&e.ws.join(".stockade/quarantine/run2/x"), "more");
    assert_eq!(Snapshot::take(&e.ws).unwrap().digest, before);
    let added = {
        write(&e.ws.join(".stockade/sub/new.toml"), "n");
        Snapshot::take(&e.ws).unwrap()
    };
    let old = Snapshot {
        workspace: e.ws.clone(),
        digest: before,
        entries: s.entries,
    };
    let changes = diff(&old.entries, &added.entries);
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].path, ".stockade/sub/new.toml");
    assert_eq!(changes[0].change, ChangeKind::Added);
}

#[test]
fn links_out_of_the_workspace_are_refused() {
    let e = env();
    let outside = e.root.join("outside.json");
    write(&outside, "{}");
    // Absolute link, relative link past the root, and a linked parent directory.
    let cases: Vec<(&str, PathBuf)> = vec![
        (".mcp.json", outside.clone()),
        (".envrc", PathBuf::from("../outside.json")),
        (".claude", e.root.clone()),
    ];
    for (name, target) in cases {
        let link = e.ws.join(name);
        symlink(&target, &link).unwrap();
        let err = Snapshot::take(&e.ws).unwrap_err();
        assert!(
            matches!(&err, TrustError::Escapes { .. }),
            "{name} -> {}: {err}",
            target.display()
        );
        assert_eq!(err.code(), E_UNTRUSTED_CONFIG);
        fs::remove_file(&link).unwrap();
    }
    // A dangling absolute link is refused too (it would lead out if the target appeared).
    symlink("/nonexistent/stockade-test", e.ws.join(".mcp.json")).unwrap();
    assert!(matches!(
        Snapshot::take(&e.ws),
        Err(TrustError::Escapes { .. })
    ));
}

#[test]
fn links_inside_the_workspace_pin_what_they_lead_to() {
    let e = env();
    write(&e.ws.join("scripts/pre-commit"), "#!/bin/sh\necho one\n");
    fs::create_dir_all(e.ws.join(".git/hooks")).unwrap();
    symlink(
        "../../scripts/pre-commit",
        e.ws.join(".git/hooks/pre-commit"),
    )
    .unwrap();
    let one = Snapshot::take(&e.ws).unwrap();
    assert_eq!(
        entry(&one, ".git/hooks/pre-commit").sha256.as_deref(),
        Some(hex(&Sha256::digest(b"#!/bin/sh\necho one\n")).as_str())
    );
    write(&e.ws.join("scripts/pre-commit"), "#!/bin/sh\necho two\n");
    assert_ne!(Snapshot::take(&e.ws).unwrap().digest, one.digest);
}

#[test]
fn special_files_and_loops_are_refused_without_hanging() {
    let e = env();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        e.ws.join(".envrc"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let err = Snapshot::take(&e.ws).unwrap_err();
    assert!(matches!(err, TrustError::Unsupported { .. }), "{err}");
    fs::remove_file(e.ws.join(".envrc")).unwrap();

    fs::create_dir_all(e.ws.join(".stockade")).unwrap();
    symlink("..", e.ws.join(".stockade/loop")).unwrap();
    let err = Snapshot::take(&e.ws).unwrap_err();
    assert!(matches!(err, TrustError::Unsupported { .. }), "{err}");
}

#[test]
fn approve_load_revoke() {
    let e = env();
    write(&e.ws.join("stockade.toml"), "profile = \"read-only\"\n");
    let store = TrustStore::open(&e.store, &e.ws).unwrap();
    assert_eq!(store.load().unwrap(), None);
    let snap = Snapshot::take(&e.ws).unwrap();
    let record = store.approve(&snap).unwrap();
    assert_eq!(record.digest, snap.digest);
    assert_eq!(store.load().unwrap(), Some(record));
    let mode = fs::metadata(&e.store).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the store directory is private");
    let name = store.record_path().file_name().unwrap().to_str().unwrap();
    assert_eq!(
        name,
        format!("{}.json", hex(&Sha256::digest(e.ws.to_str().unwrap())))
    );
    assert!(store.revoke().unwrap());
    assert_eq!(store.load().unwrap(), None);
    assert!(!store.revoke().unwrap());
}

fn approved(e: &Env) -> (TrustStore, String) {
    write(&e.ws.join(".mcp.json"), "{}");
    let store = TrustStore::open(&e.store, &e.ws).unwrap();
    store.approve(&Snapshot::take(&e.ws).unwrap()).unwrap();
    let text = fs::read_to_string(store.record_path()).unwrap();
    (store, text)
}

fn assert_corrupt(store: &TrustStore, text: &str, why: &str) {
    fs::write(store.record_path(), text).unwrap();
    let err = store.load().unwrap_err();
    assert!(matches!(err, TrustError::Corrupt { .. }), "{why}: {err}");
    assert_eq!(err.code(), E_TRUST_STORE);
}

#[test]
fn a_corrupt_record_is_an_error_never_trusted() {
    let e = env();
    let (store, good) = approved(&e);
    let value: serde_json::Value = serde_json::from_str(&good).unwrap();

    assert_corrupt(&store, "", "empty");
    assert_corrupt(&store, "{not json", "garbage");
    assert_corrupt(&store, &good[..good.len() / 2], "truncated");
    // Duplicate keys: the second `digest` would otherwise win.
    let dup = good.replacen(
        "\"digest\"",
        "\"digest\": \"sha256:0000\",\n  \"digest\"",
        1,
    );
    assert_corrupt(&store, &dup, "duplicate key");
    let dup_in_entry = good.replacen("\"state\"", "\"state\": \"missing\", \"state\"", 1);
    assert_corrupt(&store, &dup_in_entry, "duplicate key in an entry");
    let unknown = good.replacen('{', "{\n  \"trust_everything\": true,", 1);
    assert_corrupt(&store, &unknown, "unknown key");
    let mut v = value.clone();
    v["digest"] = serde_json::json!(format!("sha256:{}", "0".repeat(64)));
    assert_corrupt(&store, &v.to_string(), "digest mismatch");
    let mut v = value.clone();
    let sha = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .position(|f| f["path"] == ".mcp.json")
        .unwrap();
    v["files"][sha]["sha256"] = serde_json::json!("f".repeat(64));
    assert_corrupt(&store, &v.to_string(), "entry edited, digest kept");
    let mut v = value.clone();
    let first = v["files"][0].clone();
    v["files"].as_array_mut().unwrap().insert(0, first);
    assert_corrupt(&store, &v.to_string(), "duplicated entry");
    let mut v = value.clone();
    v["workspace"] = serde_json::json!("/somewhere/else");
    assert_corrupt(&store, &v.to_string(), "another workspace's record");
    let mut v = value.clone();
    v["format"] = serde_json::json!(99);
    assert_corrupt(&store, &v.to_string(), "unknown format");
    let mut v = value;
    v["files"][0]["path"] = serde_json::json!("../x");
    assert_corrupt(&store, &v.to_string(), "path escaping");
    // The run check fails too instead of passing.
    assert!(check_run(&e.ws, None, Some(&e.store)).is_err());
    // A record that is a symbolic link is refused.
    fs::remove_file(store.record_path()).unwrap();
    let elsewhere = e.root.join("forged.json");
    fs::write(&elsewhere, &good).unwrap();
    symlink(&elsewhere, store.record_path()).unwrap();
    assert!(matches!(store.load(), Err(TrustError::Corrupt { .. })));
}

#[test]
fn the_store_is_refused_inside_the_workspace_or_writable_by_others() {
    let e = env();
    let inside = e.ws.join(".state/stockade/trust");
    let err = TrustStore::open(&inside, &e.ws).unwrap_err();
    assert!(matches!(
        err,
        TrustError::StoreUnsafe {
            inside_workspace: true,
            ..
        }
    ));
    // Through a link too: the nearest existing ancestor is resolved.
    symlink(&e.ws, e.root.join("link")).unwrap();
    assert!(TrustStore::open(&e.root.join("link/state"), &e.ws).is_err());
    // Ungated without a workspace policy file; refused with one.
    assert_eq!(
        check_run(&e.ws, None, Some(&inside)).unwrap(),
        Gate::Ungated
    );
    write(&e.ws.join("stockade.toml"), "");
    assert!(check_run(&e.ws, Some(&e.ws.join("stockade.toml")), Some(&inside)).is_err());

    fs::create_dir_all(&e.store).unwrap();
    fs::set_permissions(&e.store, fs::Permissions::from_mode(0o777)).unwrap();
    let err = TrustStore::open(&e.store, &e.ws).unwrap_err();
    assert!(matches!(err, TrustError::StoreUnsafe { .. }), "{err}");
    assert!(TrustStore::open(Path::new("relative/dir"), &e.ws).is_err());
}

#[test]
fn concurrent_approvals_leave_one_whole_record() {
    let e = env();
    write(&e.ws.join(".mcp.json"), "{}");
    write(&e.ws.join(".stockade/a.toml"), "a");
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let (store, ws) = (e.store.clone(), e.ws.clone());
            std::thread::spawn(move || {
                for _ in 0..20 {
                    let s = TrustStore::open(&store, &ws).unwrap();
                    s.approve(&Snapshot::take(&ws).unwrap()).unwrap();
                    // Readers never see a half-written record.
                    assert!(s.load().unwrap().is_some());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let store = TrustStore::open(&e.store, &e.ws).unwrap();
    let record = store.load().unwrap().unwrap();
    assert_eq!(record.digest, Snapshot::take(&e.ws).unwrap().digest);
    let mut names: Vec<String> = fs::read_dir(&e.store)
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names.len(),
        2,
        "the record and the lock, no leftovers: {names:?}"
    );
}

#[test]
fn the_run_check() {
    let e = env();
    let store = Some(e.store.as_path());
    // Never approved, no workspace policy: as before.
    assert_eq!(check_run(&e.ws, None, store).unwrap(), Gate::Ungated);
    let outside_policy = e.root.join("policy.toml");
    write(&outside_policy, "");
    assert_eq!(
        check_run(&e.ws, Some(&outside_policy), store).unwrap(),
        Gate::Ungated
    );
    // A workspace policy needs an approval, and must be where trust looks.
    let policy = e.ws.join("stockade.toml");
    write(&policy, "");
    assert_eq!(
        check_run(&e.ws, Some(&policy), store).unwrap(),
        Gate::Refused(Refusal::NotApproved {
            policy: "stockade.toml".into()
        })
    );
    let other = e.ws.join("conf/sandbox.toml");
    write(&other, "");
    assert_eq!(
        check_run(&e.ws, Some(&other), store).unwrap(),
        Gate::Refused(Refusal::NotCovered {
            policy: "conf/sandbox.toml".into()
        })
    );
    // A link outside the workspace to the workspace policy is still a workspace policy.
    let link = e.root.join("via-link.toml");
    symlink(&policy, &link).unwrap();
    assert!(matches!(
        check_run(&e.ws, Some(&link), store).unwrap(),
        Gate::Refused(Refusal::NotApproved { .. })
    ));
    let ts = TrustStore::open(&e.store, &e.ws).unwrap();
    ts.approve(&Snapshot::take(&e.ws).unwrap()).unwrap();
    assert!(matches!(
        check_run(&e.ws, Some(&policy), store).unwrap(),
        Gate::Approved { .. }
    ));
    // Once approved, every run is checked, with or without a policy file.
    write(&e.ws.join(".mcp.json"), "{}");
    let gate = check_run(&e.ws, None, store).unwrap();
    let Gate::Refused(refusal) = gate else {
        panic!("not refused: {gate:?}")
    };
    assert!(
        refusal.to_string().contains(".mcp.json (added)"),
        "{refusal}"
    );
    assert!(refusal
        .hint(&e.ws)
        .contains("stockade trust approve --workspace"));
    fs::remove_file(e.ws.join(".mcp.json")).unwrap();
    assert!(matches!(
        check_run(&e.ws, None, store).unwrap(),
        Gate::Approved { .. }
    ));
    // No store location: fine without a workspace policy, an error with one.
    assert_eq!(check_run(&e.ws, None, None).unwrap(), Gate::Ungated);
    assert!(check_run(&e.ws, Some(&policy), None).is_err());
}

#[test]
fn store_location() {
    let d =
        |x: Option<&str>, h: Option<&str>| default_store_dir(x.map(OsStr::new), h.map(OsStr::new));
    assert_eq!(
        d(Some("/x/state"), Some("/home/u")),
        Some(PathBuf::from("/x/state/stockade/trust"))
    );
    assert_eq!(
        d(Some("relative"), Some("/home/u")),
        Some(PathBuf::from("/home/u/.local/state/stockade/trust"))
    );
    assert_eq!(
        d(Some(""), Some("/home/u")),
        Some(PathBuf::from("/home/u/.local/state/stockade/trust"))
    );
    assert_eq!(d(None, None), None);
    assert_eq!(d(None, Some("rel")), None);
}

#[test]
fn coverage_of_policy_paths() {
    assert!(is_covered("stockade.toml"));
    assert!(is_covered(".stockade/policy.toml"));
    assert!(is_covered(".stockade/a/b.json"));
    assert!(!is_covered(".stockade/quarantine/x.toml"));
    assert!(!is_covered("stockade.toml.bak"));
    assert!(!is_covered(".stockadex/p.toml"));
    assert!(!is_covered("conf/stockade.toml"));
}
