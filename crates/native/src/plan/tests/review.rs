//! Review runs: the workspace is a copy-on-write view instead of a bind of the workspace.

use super::*;

fn review_plan(uid: u32, same_filesystem: bool) -> Plan {
    let host = machine();
    let resolved = workspace::Resolved::new(&default_policy(), &request(uid), &host).unwrap();
    let mut spec = resolved.spec;
    spec.review = Some(sandbox::Review {
        changes: p("/home/u/.local/state/stockade/changes/r1"),
        same_filesystem,
    });
    Plan::lower(&spec, &host).unwrap()
}

#[test]
fn an_unprivileged_review_run_mounts_an_overlay_in_place_of_the_workspace_clone() {
    let plan = review_plan(1000, true);
    let view = plan.review.clone().expect("a review view");
    assert_eq!(view.workspace, p("/home/u/ws"));
    assert_eq!(view.by_supervisor, None);
    let overlay_at = plan
        .mounts
        .iter()
        .position(|m| {
            *m == Mount::Overlay {
                lower: p("/home/u/ws"),
                changes: p("/home/u/.local/state/stockade/changes/r1"),
                slot: view.slot,
                disk: None,
            }
        })
        .expect("the init makes the overlay");
    let read_only = plan
        .mounts
        .iter()
        .position(|m| *m == Mount::ReadOnlyRoot)
        .unwrap();
    assert!(overlay_at < read_only, "the upper must still be writable");
    assert!(!plan
        .mounts
        .iter()
        .any(|m| matches!(m, Mount::Clone { source, .. } if source == &p("/home/u/ws"))));
    assert!(plan.mounts.contains(&Mount::Attach {
        slot: view.slot,
        target: p("/home/u/ws"),
        readonly: false,
        device: false,
    }));
    // The view's inodes are not the host's: its rule is added after the fork.
    assert!(!plan
        .landlock
        .host_rules
        .iter()
        .any(|r| r.path == p("/home/u/ws") && r.access == Access::Full));
    assert!(plan
        .landlock
        .child_rules
        .contains(&Rule::child(p("/home/u/ws"), Access::Full, true)));
    // Masks and protected paths stay, on top of the view.
    assert!(plan.mounts.contains(&Mount::MaskFile {
        target: p("/home/u/ws/.env")
    }));
    assert!(plan.mounts.contains(&Mount::ReadOnly {
        path: p("/home/u/ws/.git/hooks")
    }));
}

#[test]
fn a_root_callers_review_view_is_made_by_the_supervisor_over_every_owner() {
    let plan = review_plan(0, true);
    let view = plan.review.clone().expect("a review view");
    let h = ROOT_CALLER_HOST_ID;
    let (uid_map, gid_map) = view.by_supervisor.expect("made by the supervisor");
    assert_eq!(uid_map, review_lower_map(1000));
    assert_eq!(gid_map, review_lower_map(1000));
    assert!(!plan.idmapped.iter().any(|m| m.path == p("/home/u/ws")));
    assert!(!plan
        .mounts
        .iter()
        .any(|m| matches!(m, Mount::Overlay { .. })));
    assert!(plan.mounts.contains(&Mount::Attach {
        slot: view.slot,
        target: p("/home/u/ws"),
        readonly: false,
        device: false,
    }));
    assert!(view.slot < plan.slots);
    assert!(h > 1000);
}

#[test]
fn the_lower_map_shows_the_owner_as_the_sandbox_and_every_other_id_as_itself() {
    let h = ROOT_CALLER_HOST_ID;
    assert_eq!(
        review_lower_map(1000),
        format!(
            "0 0 1000\n1000 {h} 1\n1001 1001 {}\n{} {} {}\n",
            h - 1001,
            h + 1,
            h + 1,
            u32::MAX - h - 1
        )
    );
    assert_eq!(
        review_lower_map(0),
        format!(
            "0 {h} 1\n1 1 {}\n{} {} {}\n",
            h - 1,
            h + 1,
            h + 1,
            u32::MAX - h - 1
        )
    );
    // Every id but the sandbox's own appears exactly once on each side.
    for owner in [0, 1000, h + 5] {
        let mut inside: Vec<(u64, u64)> = Vec::new();
        let mut outside: Vec<(u64, u64)> = Vec::new();
        for line in review_lower_map(owner).lines() {
            let n: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
            inside.push((n[0], n[0] + n[2]));
            outside.push((n[1], n[1] + n[2]));
        }
        for side in [&mut inside, &mut outside] {
            side.sort();
            let covered: u64 = side.iter().map(|(a, b)| b - a).sum();
            assert_eq!(covered, u64::from(u32::MAX) - 1, "owner {owner}");
            assert!(
                side.windows(2).all(|w| w[0].1 <= w[1].0),
                "overlap: {side:?}"
            );
        }
    }
}

#[test]
fn identities_inside_the_view_are_checked_by_inode_or_not_at_all_across_filesystems() {
    let plan = review_plan(1000, true);
    let id = plan.identities[&p("/home/u/ws/.env")];
    assert_eq!(id.0, sys::postfork::ANY_DEVICE);
    let outside = plan.identities.get(&p("/home/u/.ssh/id_rsa"));
    assert!(outside.is_none_or(|o| o.0 != sys::postfork::ANY_DEVICE));
    let plan = review_plan(1000, false);
    assert!(!plan.identities.contains_key(&p("/home/u/ws/.env")));
}

/// A root caller's sandbox runs as an id no account has: a mask below a directory it may not
/// search covers nothing it could see, and the init (looking the path up as that id) could
/// not make it, so it is left out. Control: the same mask below a searchable directory stays.
#[test]
fn masks_a_root_callers_sandbox_cannot_reach_are_left_out() {
    let host = machine()
        .dir("/srv/private", 0, 0o700)
        .file("/srv/private/store/secret")
        .dir("/srv/open", 0, 0o755)
        .file("/srv/open/secret");
    let mut policy = default_policy();
    policy.filesystem.deny_read.extend([
        "/srv/private/store/secret".into(),
        "/srv/open/secret".into(),
    ]);
    let req = request(0);
    let plan = Plan::new(&policy, &req, &host).unwrap();
    let masked = |p: &str| {
        plan.mounts
            .iter()
            .any(|m| m.path() == Some(Path::new(p)) && matches!(m, Mount::MaskFile { .. }))
    };
    assert!(!masked("/srv/private/store/secret"));
    assert!(masked("/srv/open/secret"));
    // An unprivileged caller searches as itself: both stay.
    let plan = Plan::new(&policy, &request(1000), &host).unwrap();
    assert!(plan
        .mounts
        .iter()
        .any(|m| m.path() == Some(Path::new("/srv/private/store/secret"))));
}

/// Issue 32, item 2: the plan decides, as data, which creations stop for the init. A review
/// run whose only writable root is its view (git's files reviewed, as `review_stage` leaves
/// them) mediates only set-id modes; a direct run, a review run with another writable root
/// (the host's own directory), or one whose init holds a git config, mediates every creation.
#[test]
fn creations_are_mediated_unless_every_writable_root_is_the_view() {
    let host = machine().dir("/home/u/cache", 1000, 0o755);
    let review = sandbox::Review {
        changes: p("/home/u/.local/state/stockade/changes/r1"),
        same_filesystem: true,
    };
    let spec_of = |extra_root: bool, reviewed: bool, git_reviewed: bool| {
        let mut spec = workspace::Resolved::new(&default_policy(), &request(1000), &host)
            .unwrap()
            .spec;
        if extra_root {
            spec.writable_roots.push(p("/home/u/cache"));
        }
        if reviewed {
            spec.review = Some(review.clone());
        }
        if git_reviewed {
            // What `review_stage::review_git_internals` does before the plan.
            spec.protected.retain(|x| !x.starts_with("/home/u/ws/.git"));
        }
        spec
    };
    let creations = |spec: &sandbox::Spec| {
        let plan = Plan::lower(spec, &host).unwrap();
        let guard = plan.creation_guard;
        let mkdir = guard.calls.iter().find(|c| c.syscall == "mkdir").unwrap();
        (guard.creations, mkdir.when)
    };
    let view_only = creations(&spec_of(false, true, true));
    assert_eq!(view_only, (seccomp::Creations::SetIdModes, "never"));
    // Direct mode: every creation.
    assert_eq!(
        creations(&spec_of(false, false, true)),
        (seccomp::Creations::All, "always")
    );
    // Another writable root beside the view is the host's own directory.
    assert_eq!(
        creations(&spec_of(true, true, true)),
        (seccomp::Creations::All, "always")
    );
    // `.git/config` held by the init: only mediation can rename onto it.
    let held = spec_of(false, true, false);
    assert!(!Plan::lower(&held, &host)
        .unwrap()
        .creation_guard
        .held_configs
        .is_empty());
    assert_eq!(creations(&held), (seccomp::Creations::All, "always"));
    // The decision alone.
    let view = Plan::lower(&spec_of(false, true, true), &host)
        .unwrap()
        .review
        .unwrap();
    assert_eq!(
        super::super::creations(&[p("/home/u/ws")], Some(&view), &[]),
        seccomp::Creations::SetIdModes
    );
    assert_eq!(
        super::super::creations(&[p("/home/u/ws"), p("/tmp/x")], Some(&view), &[]),
        seccomp::Creations::All
    );
    assert_eq!(
        super::super::creations(&[p("/home/u/ws")], None, &[]),
        seccomp::Creations::All
    );
    assert_eq!(
        super::super::creations(&[p("/home/u/ws/sub")], Some(&view), &[]),
        seccomp::Creations::All
    );
}
