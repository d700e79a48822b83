//! Grants below the host's `/tmp` (issue 30, item 7): the private `/tmp` is mounted first,
//! each grant is attached at its own path after it, and a grant inside another one gets no
//! mount point made inside that one (which is the host's directory: a `chmod` of it would
//! change the host's mode, or fail on a read-only grant).

use super::*;

fn position(plan: &Plan, pred: impl Fn(&Mount) -> bool) -> usize {
    plan.mounts
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no such mount in {:#?}", plan.mounts))
}

fn private_tmp(m: &Mount) -> bool {
    matches!(m, Mount::Tmpfs { target, .. } if target == Path::new("/tmp"))
}

fn attach(target: &'static str, ro: bool) -> impl Fn(&Mount) -> bool {
    move |m| matches!(m, Mount::Attach { target: t, readonly, .. } if t == Path::new(target) && *readonly == ro)
}

/// Paths the plan makes (directories, files) or changes the mode of.
fn made(plan: &Plan) -> Vec<PathBuf> {
    plan.mounts
        .iter()
        .filter_map(|m| match m {
            Mount::Mkdir { path, .. } | Mount::File { path, .. } => Some(path.clone()),
            _ => None,
        })
        .collect()
}

/// [`made`] below `/tmp`.
fn made_below_tmp(plan: &Plan) -> Vec<PathBuf> {
    made(plan)
        .into_iter()
        .filter(|m| m.starts_with("/tmp"))
        .collect()
}

#[test]
fn a_workspace_inside_a_read_grant_below_tmp_is_attached_after_it_with_nothing_made_inside() {
    for uid in [1000, 0] {
        let host = machine()
            .dir("/tmp/a", 1000, 0o700)
            .dir("/tmp/a/ws", 1000, 0o755);
        let mut req = request(uid);
        req.workspace = p("/tmp/a/ws");
        req.cwd = p("/tmp/a/ws");
        let mut policy = default_policy();
        policy.filesystem.allow_read = vec!["/tmp/a".into()];
        let plan = Plan::new(&policy, &req, &host).unwrap();
        let tmp = position(&plan, private_tmp);
        let grant = position(&plan, attach("/tmp/a", true));
        let ws = position(&plan, attach("/tmp/a/ws", false));
        assert!(tmp < grant && grant < ws, "{:#?}", plan.mounts);
        let made = made(&plan);
        assert!(
            made.contains(&p("/tmp/a")),
            "the grant's mount point: {made:?}"
        );
        assert!(
            !made
                .iter()
                .any(|m| is_within(m, Path::new("/tmp/a")) && m != Path::new("/tmp/a")),
            "nothing made inside the read-only grant: {made:?}"
        );
        assert_eq!(plan.cwd, p("/tmp/a/ws"));
    }
}

#[test]
fn a_writable_root_inside_another_below_tmp_makes_nothing_in_the_outer_one() {
    // The outer one is the host's directory, writable: a Mkdir + chmod 0755 there changed the
    // host's 0700 directory to 0755 (found while fixing item 7).
    let host = machine()
        .dir("/tmp/a", 1000, 0o700)
        .dir("/tmp/a/b", 1000, 0o700)
        .file("/tmp/a/f");
    let mut req = request(1000);
    req.workspace = p("/tmp/a");
    req.cwd = p("/tmp/a");
    let mut policy = default_policy();
    policy.filesystem.allow_write.push("/tmp/a/b".into());
    policy.filesystem.allow_write.push("/tmp/a/f".into());
    let plan = Plan::new(&policy, &req, &host).unwrap();
    let tmp = position(&plan, private_tmp);
    let outer = position(&plan, attach("/tmp/a", false));
    let inner = position(&plan, attach("/tmp/a/b", false));
    let file = position(&plan, attach("/tmp/a/f", false));
    assert!(
        tmp < outer && outer < inner && outer < file,
        "{:#?}",
        plan.mounts
    );
    assert_eq!(made_below_tmp(&plan), [p("/tmp/a")]);
}

#[test]
fn a_read_grant_with_a_writable_root_inside_below_tmp() {
    let host = machine().dir("/tmp/r/w", 0, 0o755).file("/tmp/r/x");
    let mut policy = default_policy();
    policy.filesystem.allow_read = vec!["/tmp/r".into()];
    policy.filesystem.allow_write.push("/tmp/r/w".into());
    let plan = Plan::new(&policy, &request(1000), &host).unwrap();
    let tmp = position(&plan, private_tmp);
    let grant = position(&plan, attach("/tmp/r", true));
    let root = position(&plan, attach("/tmp/r/w", false));
    assert!(tmp < grant && grant < root, "{:#?}", plan.mounts);
    assert_eq!(made_below_tmp(&plan), [p("/tmp/r")]);
}

#[test]
fn a_root_callers_home_below_tmp_is_not_attached() {
    // It is not in the sandbox's view (its /tmp is private): attaching it failed with ENOENT
    // ("removed or renamed"), and attached it would show the home unmasked.
    let host = machine().dir("/tmp/h", 0, 0o700).file("/tmp/h/.ssh/id_rsa");
    let mut req = request(0);
    req.home = p("/tmp/h");
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    assert!(
        !plan
            .mounts
            .iter()
            .any(|m| matches!(m, Mount::Attach { target, .. } if target.starts_with("/tmp"))),
        "{:#?}",
        plan.mounts
    );
    assert!(!plan.idmapped.iter().any(|i| i.path.starts_with("/tmp")));
    // Control: the same home elsewhere is attached (read-only, idmapped).
    let host = machine().dir("/srv/h", 0, 0o700);
    req.home = p("/srv/h");
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    position(&plan, attach("/srv/h", true));
}

#[test]
fn tmp_itself_and_dev_shm_cannot_be_granted_nor_be_the_workspace() {
    use workspace::ScanError as E;
    let refused = |policy: &Policy, req: &Request| match Plan::new(
        policy,
        req,
        &machine().dir("/dev/shm", 0, 0o1777),
    ) {
        Err(PlanError::Scan(e)) => e,
        other => panic!("not refused: {:?}", other.map(|p| p.mounts)),
    };
    for (list, path) in [
        ("write", "/tmp"),
        ("read", "/tmp"),
        ("read", "/dev/shm"),
        ("write", "/dev/shm"),
    ] {
        let mut policy = default_policy();
        match list {
            "write" => policy.filesystem.allow_write.push(path.into()),
            _ => policy.filesystem.allow_read.push(path.into()),
        }
        let e = refused(&policy, &request(1000));
        assert!(
            matches!(&e, E::PrivateTmpGrant(x) if x == Path::new(path)),
            "{list} {path}: {e}"
        );
        assert!(e.hint().unwrap_or_default().contains("below /tmp"));
    }
    let mut req = request(1000);
    req.workspace = p("/tmp");
    req.cwd = p("/tmp");
    let e = refused(&default_policy(), &req);
    assert!(matches!(e, E::PrivateTmpWorkspace(_)), "{e}");
    // Even where the policy writes nothing (the workspace is where the command starts).
    let e = refused(&policy::profile("read-only").unwrap(), &req);
    assert!(matches!(e, E::PrivateTmpWorkspace(_)), "{e}");
    // Control: a directory below /tmp is fine.
    let host = machine().dir("/tmp/x", 1000, 0o755);
    req.workspace = p("/tmp/x");
    req.cwd = p("/tmp/x");
    Plan::new(&default_policy(), &req, &host).unwrap();
}

#[test]
fn a_missing_grant_is_refused_for_reading_as_for_writing() {
    use workspace::ScanError as E;
    let mut policy = default_policy();
    policy.filesystem.allow_read = vec!["/nonexistent".into()];
    let e = Plan::new(&policy, &request(1000), &machine()).unwrap_err();
    assert!(
        matches!(&e, PlanError::Scan(E::ReadGrantMissing(x)) if x == Path::new("/nonexistent")),
        "{e}"
    );
    let mut policy = default_policy();
    policy.filesystem.allow_write.push("/nonexistent".into());
    let e = Plan::new(&policy, &request(1000), &machine()).unwrap_err();
    assert!(
        matches!(&e, PlanError::Scan(E::WritableRootMissing(x)) if x == Path::new("/nonexistent")),
        "{e}"
    );
    // A glob is a pattern, not a path: matching nothing is fine.
    let mut policy = default_policy();
    policy.filesystem.allow_read = vec!["/srv/*.none".into()];
    Plan::new(&policy, &request(1000), &machine()).unwrap();
}
