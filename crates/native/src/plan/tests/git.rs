//! Git's indirections found in the repositories of the writable roots, as data.

use super::*;

fn guard_has(plan: &Plan, base: &str, tail: &[&str]) -> bool {
    plan.creation_guard
        .protected
        .iter()
        .any(|g| g.base == p(base) && g.tail == tail)
}

#[test]
fn paths_a_repository_names_or_reads_are_protected_existing_or_not() {
    let host = machine()
        .text(
            "/home/u/ws/.git/config",
            "[core]\n\thooksPath = .githooks\n[include]\n\tpath = ../team.gitconfig\n\
             [includeIf \"gitdir:/\"]\n\tpath = ~/ws/other.gitconfig\n",
        )
        .text(
            "/home/u/ws/team.gitconfig",
            "[include]\n\tpath = nested.gitconfig\n",
        )
        .file("/home/u/ws/nested.gitconfig")
        .file("/home/u/ws/other.gitconfig")
        .dir("/home/u/ws/.githooks", 1000, 0o755)
        .file("/home/u/ws/.git/info/exclude")
        .file("/home/u/ws/.git/worktrees/linked/commondir")
        .file("/home/u/ws/.git/worktrees/linked/gitdir");
    let plan = Plan::new(&default_policy(), &request(1000), &host).unwrap();
    for existing in [
        "/home/u/ws/.githooks",
        "/home/u/ws/team.gitconfig",
        "/home/u/ws/nested.gitconfig",
        "/home/u/ws/other.gitconfig",
        "/home/u/ws/.git/info/exclude",
        "/home/u/ws/.git/worktrees/linked/commondir",
        "/home/u/ws/.git/worktrees/linked/gitdir",
    ] {
        assert!(
            plan.protected.contains(&p(existing)),
            "{existing} not read-only: {:#?}",
            plan.protected
        );
        assert!(
            guard_has(&plan, existing, &[]),
            "{existing} not refused on creation"
        );
    }
    // Missing ones are refused on creation.
    for missing in [
        "/home/u/ws/.git/info/attributes",
        "/home/u/ws/.git/config.worktree",
        "/home/u/ws/.git/worktrees/linked/config.worktree",
    ] {
        assert!(!plan.protected.contains(&p(missing)));
        assert!(
            guard_has(&plan, missing, &[]),
            "{missing} not refused on creation"
        );
    }
    // Any linked worktree's redirects, also of one added during the run.
    for name in ["commondir", "gitdir", "config.worktree"] {
        assert!(guard_has(&plan, "/home/u/ws/.git/worktrees", &[name]));
    }
}

#[test]
fn a_global_hooks_path_applies_to_the_workspace_repository() {
    let host = machine().text("/home/u/.gitconfig", "[core]\n\thooksPath = .hooks\n");
    let plan = Plan::new(&default_policy(), &request(1000), &host).unwrap();
    assert!(guard_has(&plan, "/home/u/ws/.hooks", &[]));
}

#[test]
fn paths_outside_the_writable_roots_are_left_alone() {
    let host = machine().text(
        "/home/u/ws/.git/config",
        "[core]\n\thooksPath = /etc/hooks\n[include]\n\tpath = /etc/x.gitconfig\n",
    );
    let plan = Plan::new(&default_policy(), &request(1000), &host).unwrap();
    assert!(!plan
        .creation_guard
        .protected
        .iter()
        .any(|g| g.base.starts_with("/etc")));
}
