//! Why a setup step failed, from host facts: which directory on the way to a path the
//! sandbox's identity cannot enter or read (see docs/design.md, "Identity"), or that the path
//! vanished after planning. The error's hint carries it, so the user is not sent to a `doctor`
//! that cannot see the failing path.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::plan::Plan;

/// The reason and the fix for `errno` on `path` in a setup step, when host facts tell one.
pub(crate) fn setup_failure(plan: &Plan, path: &Path, errno: i32) -> Option<String> {
    match errno {
        libc::EACCES | libc::EPERM => Some(access_denied(plan, path).unwrap_or_else(|| {
            format!(
                "{} can reach {} by its permission bits, so something else refused it: an ACL, a security module (AppArmor, SELinux: see `dmesg` or the audit log), or a filesystem that refuses mounts over it (FUSE, NFS with root squashing); `stockade doctor` checks the kernel features",
                who(plan).trim_end_matches(" and"),
                path.display()
            )
        })),
        libc::ENOENT => Some(format!(
            "{} (or a directory on the way to it) no longer exists: it was removed or renamed after the run was planned (a concurrent change); check the path and run again",
            path.display()
        )),
        _ => None,
    }
}

/// Permission bits (`rwx` as 0..=7) the sandbox's identity gets on a file with `meta` at `p`.
fn bits(plan: &Plan, p: &Path, meta: &std::fs::Metadata) -> u32 {
    let mode = meta.mode();
    let root_caller = plan.ids.clear_groups;
    let owner = if root_caller {
        // Under an idmapped mount the root's owner appears as the sandbox's host uid.
        plan.idmapped.iter().any(|m| {
            p.starts_with(&m.path)
                && m.uid_map
                    .split_whitespace()
                    .next()
                    .and_then(|o| o.parse::<u32>().ok())
                    == Some(meta.uid())
        })
    } else {
        meta.uid() == plan.ids.host_uid
    };
    if owner {
        (mode >> 6) & 7
    } else if !root_caller && meta.gid() == plan.ids.host_gid {
        (mode >> 3) & 7
    } else {
        mode & 7
    }
}

fn who(plan: &Plan) -> String {
    if plan.ids.clear_groups {
        format!(
            "the sandbox of a root caller runs as host uid {:#x} (it passes only the \"others\" permission bits outside the workspace and home) and",
            plan.ids.host_uid
        )
    } else {
        format!("the sandbox runs as your uid {} and", plan.ids.host_uid)
    }
}

fn access_denied(plan: &Plan, path: &Path) -> Option<String> {
    let ancestors: Vec<&Path> = path.ancestors().collect();
    for dir in ancestors.iter().rev() {
        if *dir == path {
            break;
        }
        let meta = std::fs::metadata(dir).ok()?;
        if bits(plan, dir, &meta) & 1 == 0 {
            return Some(format!(
                "{} cannot enter {} (mode {:o}, owner uid {}), so it cannot reach {}. Fix: `chmod o+x {}` (or an ACL for that uid), or run stockade as uid {}; a grant below it can also be left out",
                who(plan),
                dir.display(),
                meta.mode() & 0o7777,
                meta.uid(),
                path.display(),
                dir.display(),
                meta.uid()
            ));
        }
    }
    let meta = std::fs::symlink_metadata(path).ok()?;
    let want = if meta.is_dir() { 5 } else { 4 };
    (bits(plan, path, &meta) & want != want).then(|| {
        format!(
            "{} cannot read {} (mode {:o}, owner uid {}). Fix: `chmod o+r{} {}`, or run stockade as uid {}, or leave it out of the policy",
            who(plan),
            path.display(),
            meta.mode() & 0o7777,
            meta.uid(),
            if meta.is_dir() { "x" } else { "" },
            path.display(),
            meta.uid()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A plan for an unprivileged caller whose uid owns nothing here.
    fn plan_for(ws: &Path) -> Plan {
        crate::plan::plan_on_this_machine(ws, 4242)
    }

    #[test]
    fn names_the_directory_the_sandbox_cannot_enter_and_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        let locked = ws.join("locked");
        std::fs::create_dir_all(locked.join("inner")).unwrap();
        std::fs::write(locked.join("inner/.env"), "x").unwrap();
        for d in [tmp.path(), &ws] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let plan = plan_for(&ws);
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
        let why = setup_failure(&plan, &locked.join("inner/.env"), libc::EACCES).unwrap();
        assert!(why.contains("your uid 4242"), "{why}");
        assert!(
            why.contains(&format!("cannot enter {} (mode 700", locked.display())),
            "{why}"
        );
        assert!(
            why.contains(&format!("`chmod o+x {}`", locked.display())),
            "{why}"
        );
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o711)).unwrap();
        std::fs::set_permissions(
            locked.join("inner/.env"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        let why = setup_failure(&plan, &locked.join("inner/.env"), libc::EACCES).unwrap();
        assert!(why.contains("cannot read"), "{why}");
        std::fs::write(ws.join("open"), "x").unwrap();
        std::fs::set_permissions(ws.join("open"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let other = setup_failure(&plan, &ws.join("open"), libc::EACCES).unwrap();
        assert!(other.contains("something else refused it"), "{other}");
        let gone = setup_failure(&plan, &ws.join("gone"), libc::ENOENT).unwrap();
        assert!(gone.contains("no longer exists"), "{gone}");
    }
}
