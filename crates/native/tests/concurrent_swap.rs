//! A concurrent run in the same workspace swaps a directory for a link between this run's
//! planning and its mount steps (issue 15, "no confused deputy": the init must not follow a
//! path component another sandbox could have changed). The plan masks `app/.env`; the other
//! run renames `app` to `app2` and points a link `app` at a decoy holding its own `.env`.
//! Following the link, the init laid the mask on the decoy and the real secret, now at
//! `app2/.env`, was readable; the same with a real directory renamed into place. Now every
//! mount step looks its (canonical) path up through no link and checks it is still the file
//! the planner saw (`st_dev`, `st_ino`): the run refuses to start.
//!
//! The window (milliseconds, inside one `stockade run`) cannot be hit on purpose through the
//! binary, so this test drives the library: plan, swap, launch — the real sandbox. Control:
//! without the swap the same plan runs and the mask holds.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;

use native::{launch, Options, Plan, RealHost, Request};

fn request(ws: &Path, home: &Path, script: &str) -> Request {
    let (uid, gid) = native::caller_ids();
    Request {
        argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
        workspace: ws.to_path_buf(),
        cwd: ws.to_path_buf(),
        home: home.to_path_buf(),
        uid,
        gid,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
    }
}

fn fixture() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::Builder::new()
        .prefix("stockade-swap.")
        .tempdir_in("/var/tmp")
        .expect("fixture dir");
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (ws, home) = (root.join("ws"), root.join("home"));
    std::fs::create_dir_all(ws.join("app")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(ws.join("app/.env"), "API_KEY=swap-secret\n").unwrap();
    (tmp, ws, home)
}

#[derive(Clone, Copy, PartialEq)]
enum Swap {
    None,
    /// `app` renamed away, a link `app -> decoy` in its place.
    Link,
    /// `app` renamed away, the real directory `decoy` renamed into its place.
    Rename,
}

/// Whether the secret is readable (exit 0) in the run; `None` when the run did not start.
fn leaked(ws: &Path, home: &Path, swap: Swap) -> Option<bool> {
    let policy = policy::profile("workspace-write").unwrap();
    let script = format!(
        "grep -q swap-secret {}/app2/.env 2>/dev/null || grep -q swap-secret {}/app/.env 2>/dev/null",
        ws.display(),
        ws.display()
    );
    let plan = Plan::new(&policy, &request(ws, home, &script), &RealHost).expect("plan");
    assert!(
        plan.masked.iter().any(|m| m == &ws.join("app/.env")),
        "the plan masks app/.env: {:?}",
        plan.masked
    );
    if swap != Swap::None {
        // What the other run does between this run's planning and its mount steps.
        std::fs::rename(ws.join("app"), ws.join("app2")).unwrap();
        std::fs::create_dir_all(ws.join("decoy")).unwrap();
        std::fs::write(ws.join("decoy/.env"), "nothing\n").unwrap();
        if swap == Swap::Link {
            std::os::unix::fs::symlink("decoy", ws.join("app")).unwrap();
        } else {
            std::fs::rename(ws.join("decoy"), ws.join("app")).unwrap();
        }
    }
    match launch(&plan, Options::default(), None) {
        Ok(outcome) => Some(outcome.exit_code == 0),
        Err(e) => {
            eprintln!("run refused: {e}");
            None
        }
    }
}

#[test]
fn mask_does_not_follow_a_directory_swapped_after_planning() {
    for swap in [Swap::Link, Swap::Rename] {
        let (_tmp, ws, home) = fixture();
        assert_ne!(
            leaked(&ws, &home, swap),
            Some(true),
            "the secret was readable after the swap ({})",
            if swap == Swap::Link { "link" } else { "rename" }
        );
    }
    // Control: the file is readable without stockade, and masked in a run without the swap.
    let (_tmp2, ws2, home2) = fixture();
    assert!(std::fs::read_to_string(ws2.join("app/.env"))
        .unwrap()
        .contains("swap-secret"));
    assert_eq!(
        leaked(&ws2, &home2, Swap::None),
        Some(false),
        "the mask held"
    );
}

/// As root, a writable root's idmapped mount is made from its path looked up through no link:
/// a link swapped in after planning (another run's) fails the run as a changed path
/// (`E_SANDBOX_SETUP`, naming it), where it said an idmapped mount was not available on this
/// machine (`E_PROTECTION_UNAVAILABLE`, pointing at the kernel). Control: without the swap the
/// same plan runs.
#[test]
fn a_writable_root_swapped_for_a_link_after_planning_is_a_changed_path() {
    if native::caller_ids().0 != 0 {
        eprintln!("skipped: idmapped mounts are made for a root caller only");
        return;
    }
    for swap in [true, false] {
        let (_tmp, ws, home) = fixture();
        let cache = ws.parent().unwrap().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        let policy = policy::resolve(
            None,
            &policy::Overrides {
                allow_write: vec![cache.display().to_string()],
                ..Default::default()
            },
        )
        .unwrap();
        let plan = Plan::new(&policy, &request(&ws, &home, "true"), &RealHost).expect("plan");
        if swap {
            std::fs::rename(&cache, ws.parent().unwrap().join("cache.real")).unwrap();
            std::os::unix::fs::symlink("/etc", &cache).unwrap();
        }
        match launch(&plan, Options::default(), None) {
            Ok(outcome) => {
                assert!(!swap, "the run started through the swapped link");
                assert_eq!(outcome.exit_code, 0);
            }
            Err(e) => {
                assert!(swap, "the control failed: {e}");
                assert_eq!(e.code().as_str(), "E_SANDBOX_SETUP", "{e}");
                assert!(e.to_string().contains("cache"), "{e}");
            }
        }
    }
}
