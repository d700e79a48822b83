//! Reaching granted paths: covers over untraversable directories, read grants below the
//! private `/tmp`, and where the command starts.

use super::*;

fn position(plan: &Plan, pred: impl Fn(&Mount) -> bool) -> Option<usize> {
    plan.mounts.iter().position(pred)
}

/// `mktemp -d` as root: a 0700 directory holding the workspace.
fn root_under_private_dir() -> (FakeHost, Request) {
    let host = machine()
        .dir("/root", 0, 0o700)
        .dir("/var/tmp/tmp.x", 0, 0o700)
        .dir("/var/tmp/tmp.x/ws", 0, 0o755)
        .file("/var/tmp/tmp.x/secret")
        .file("/var/tmp/tmp.x/ws/.env");
    let mut req = request(0);
    req.workspace = p("/var/tmp/tmp.x/ws");
    req.cwd = p("/var/tmp/tmp.x/ws");
    req.home = p("/root");
    (host, req)
}

#[test]
fn root_callers_workspace_below_an_untraversable_dir_is_reached_through_a_cover() {
    let (host, req) = root_under_private_dir();
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    let cover = position(
        &plan,
        |m| matches!(m, Mount::Tmpfs { target, .. } if target == Path::new("/var/tmp/tmp.x")),
    )
    .expect("a cover over the 0700 directory");
    assert_eq!(
        plan.mounts[cover + 1],
        Mount::Mkdir {
            path: p("/var/tmp/tmp.x/ws"),
            mode: 0o755
        }
    );
    assert_eq!(
        plan.mounts[cover + 2],
        Mount::ReadOnly {
            path: p("/var/tmp/tmp.x")
        }
    );
    let attach = position(&plan, |m| {
        matches!(m, Mount::Attach { target, readonly: false, .. } if target == Path::new("/var/tmp/tmp.x/ws"))
    })
    .unwrap();
    assert!(
        cover < attach,
        "the cover comes before the workspace inside it"
    );
    let read_only_root = position(&plan, |m| *m == Mount::ReadOnlyRoot).unwrap();
    assert!(read_only_root < cover);
    // The workspace's own mask stays; nothing else below the cover is named.
    assert!(plan.mounts.iter().any(
        |m| matches!(m, Mount::MaskFile { target } if target == Path::new("/var/tmp/tmp.x/ws/.env"))
    ));
    assert_eq!(plan.cwd, p("/var/tmp/tmp.x/ws"));
    assert_eq!(plan.cwd_fallback, None);
}

#[test]
fn traversable_dirs_and_unprivileged_callers_get_no_cover() {
    let (host, mut req) = root_under_private_dir();
    let host = host
        .dir("/var/tmp/open", 0, 0o755)
        .dir("/var/tmp/open/ws", 0, 0o755);
    req.workspace = p("/var/tmp/open/ws");
    req.cwd = p("/var/tmp/open/ws");
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    assert!(!plan
        .mounts
        .iter()
        .any(|m| matches!(m, Mount::Tmpfs { target, .. } if target.starts_with("/var"))));
    let (host, mut req) = root_under_private_dir();
    req.uid = 1000;
    req.gid = 1000;
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    assert!(!plan
        .mounts
        .iter()
        .any(|m| matches!(m, Mount::Tmpfs { target, .. } if target.starts_with("/var"))));
}

#[test]
fn grants_below_one_untraversable_dir_share_its_cover() {
    let (host, req) = root_under_private_dir();
    let host = host.dir("/var/tmp/tmp.x/data/deep", 0, 0o755);
    let mut policy = default_policy();
    policy.filesystem.allow_read = vec!["/var/tmp/tmp.x/data/deep".into()];
    let plan = Plan::new(&policy, &req, &host).unwrap();
    let covers: Vec<&Mount> = plan
        .mounts
        .iter()
        .filter(|m| matches!(m, Mount::Tmpfs { target, .. } if target.starts_with("/var")))
        .collect();
    assert_eq!(covers.len(), 1, "{:#?}", plan.mounts);
    for d in [
        "/var/tmp/tmp.x/data",
        "/var/tmp/tmp.x/data/deep",
        "/var/tmp/tmp.x/ws",
    ] {
        assert!(
            plan.mounts.iter().any(|m| *m
                == Mount::Mkdir {
                    path: p(d),
                    mode: 0o755
                }),
            "{d}"
        );
    }
}

#[test]
fn masks_hidden_by_a_cover_are_not_mounted() {
    let (host, req) = root_under_private_dir();
    let host = host.file("/var/tmp/tmp.x/.env");
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    assert!(!plan.mounts.iter().any(
        |m| matches!(m, Mount::MaskFile { target } if target == Path::new("/var/tmp/tmp.x/.env"))
    ));
}

#[test]
fn read_grants_below_tmp_are_attached_in_the_private_tmp() {
    let host = machine()
        .dir("/tmp/tmp.y", 0, 0o700)
        .dir("/tmp/tmp.y/data", 0, 0o755);
    let mut policy = default_policy();
    policy.filesystem.allow_read = vec!["/tmp/tmp.y/data".into()];
    let plan = Plan::new(&policy, &request(1000), &host).unwrap();
    let clone = position(&plan, |m| {
        matches!(m, Mount::Clone { source, recursive: true, .. } if source == Path::new("/tmp/tmp.y/data"))
    })
    .unwrap();
    let tmp = position(
        &plan,
        |m| matches!(m, Mount::Tmpfs { target, .. } if target == Path::new("/tmp")),
    )
    .unwrap();
    let mkdir = position(&plan, |m| {
        *m == Mount::Mkdir {
            path: p("/tmp/tmp.y"),
            mode: 0o755,
        }
    })
    .unwrap();
    let attach = position(&plan, |m| {
        matches!(m, Mount::Attach { target, readonly: true, .. } if target == Path::new("/tmp/tmp.y/data"))
    })
    .unwrap();
    assert!(clone < tmp && tmp < mkdir && mkdir < attach);
}

#[test]
fn granting_the_private_tmp_itself_is_refused() {
    let mut policy = default_policy();
    policy.filesystem.allow_read = vec!["/tmp".into()];
    let e = Plan::new(&policy, &request(1000), &machine()).unwrap_err();
    assert!(
        matches!(e, PlanError::Scan(workspace::ScanError::PrivateTmpGrant(_))),
        "{e}"
    );
}

#[test]
fn the_command_starts_in_the_callers_directory_when_the_sandbox_can_reach_it() {
    let host = machine().dir("/srv/project/sub", 0, 0o755);
    let mut req = request(1000);
    req.cwd = p("/srv/project/sub");
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    assert_eq!(plan.cwd, p("/srv/project/sub"));
    assert_eq!(plan.cwd_fallback, None);

    for (cwd, why) in [
        ("/tmp/elsewhere", "its own /tmp"),
        ("/home/u/.ssh", "is masked"),
    ] {
        let host = machine().dir(cwd, 1000, 0o755);
        let mut req = request(1000);
        req.cwd = p(cwd);
        let plan = Plan::new(&default_policy(), &req, &host).unwrap();
        assert_eq!(plan.cwd, p("/home/u/ws"), "{cwd}");
        let f = plan.cwd_fallback.unwrap();
        assert_eq!(f.cwd, p(cwd));
        assert!(f.reason.contains(why), "{cwd}: {}", f.reason);
    }

    // A root caller's sandbox cannot enter a 0700 directory it was not granted.
    let (host, mut req) = root_under_private_dir();
    let host = host.dir("/srv/closed", 0, 0o700);
    req.cwd = p("/srv/closed");
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    assert_eq!(plan.cwd, p("/var/tmp/tmp.x/ws"));
    assert!(plan
        .cwd_fallback
        .unwrap()
        .reason
        .contains("cannot enter /srv/closed"));
}

#[test]
fn hidden_read_grants_are_attached_by_the_supervisor_for_a_root_caller() {
    let (host, req) = root_under_private_dir();
    let host = host
        .dir("/var/tmp/tmp.x/data", 0, 0o700)
        .dir("/tmp/tmp.z", 0, 0o700)
        .dir("/tmp/tmp.z/in", 0, 0o700);
    let mut policy = default_policy();
    policy.filesystem.allow_read = vec!["/var/tmp/tmp.x/data".into(), "/tmp/tmp.z/in".into()];
    let plan = Plan::new(&policy, &req, &host).unwrap();
    for grant in ["/var/tmp/tmp.x/data", "/tmp/tmp.z/in"] {
        let m = plan
            .idmapped
            .iter()
            .find(|m| m.path == Path::new(grant))
            .unwrap_or_else(|| panic!("{grant}: {:#?}", plan.idmapped));
        assert!(m.readonly);
        assert!(plan.mounts.iter().any(|x| *x
            == Mount::Attach {
                slot: m.slot,
                target: p(grant),
                readonly: true,
                device: false
            }));
        // Never cloned in the child, whose id cannot traverse the way there.
        assert!(!plan
            .mounts
            .iter()
            .any(|x| matches!(x, Mount::Clone { source, .. } if source == Path::new(grant))));
    }
}
