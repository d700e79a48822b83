//! A masked file with a second, unmasked name (hard link), run through the native backend's
//! library API (`Plan::new`, then `launch`) rather than stockade's pipeline: the backend's
//! run refuses it itself (red team of issue 33: when the refusal moved into the pipeline,
//! this path read the secret). Control: the same plan with `--allow-degraded` runs, records
//! the skipped masking, and reads the secret through the other name.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use native::{launch, Options, Plan, RealHost, Request};

#[test]
fn the_backend_refuses_a_masked_file_with_another_name_by_itself() {
    let tmp = tempfile::Builder::new()
        .prefix("stockade-linked.")
        .tempdir_in("/var/tmp")
        .unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (ws, home) = (root.join("ws"), root.join("home"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(ws.join(".env"), "API_KEY=hunter2\n").unwrap();
    std::fs::hard_link(ws.join(".env"), ws.join("notes.txt")).unwrap();
    let (uid, gid) = native::caller_ids();
    let req = Request {
        argv: vec![
            "/bin/sh".into(),
            "-c".into(),
            "grep -q hunter2 notes.txt".into(),
        ],
        workspace: ws.clone(),
        cwd: ws.clone(),
        home,
        uid,
        gid,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
    };
    let policy = policy::profile("workspace-write").unwrap();
    let plan = match Plan::new(&policy, &req, &RealHost) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("skipped: no plan here ({e})");
            return;
        }
    };
    assert!(
        !plan.linked_secrets.is_empty(),
        "the plan sees the linked secret"
    );
    match launch(&plan, Options::default(), None) {
        Err(e) => {
            assert_eq!(e.code().as_str(), "E_PROTECTION_UNAVAILABLE", "{e}");
            assert!(e.to_string().contains("2 names"), "{e}");
        }
        Ok(o) => panic!(
            "the command ran (exit {}; 0: it read the masked secret through notes.txt)",
            o.exit_code
        ),
    }
    // Control: allowed to degrade, the run goes ahead, says what it skipped, and the secret
    // is readable through the other name: what the refusal prevents.
    let degraded = Options {
        allow_degraded: true,
        ..Options::default()
    };
    match launch(&plan, degraded, None) {
        Ok(o) => {
            assert_eq!(o.exit_code, 0, "the control did not read the secret");
            assert!(
                o.skipped
                    .iter()
                    .any(|s| s.starts_with("masking of linked credential files: ")),
                "{:?}",
                o.skipped
            );
        }
        Err(e) => eprintln!("skipped: this host cannot run the sandbox ({e})"),
    }
}
