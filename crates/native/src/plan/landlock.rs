//! The Landlock rules of a plan: read rules on the host (split around masks, which Landlock
//! cannot subtract), full access to the writable roots, device rules, and the rules on the
//! mounts the init makes (`child_rules`), a review run's view among them.

use std::path::{Path, PathBuf};

use policy::is_within;
use sandbox::Spec;

use super::{Access, LandlockPlan, ReviewView, Rule, SYSTEM_READ};
use crate::host::{HostView, Kind};

/// The run's Landlock rules ([`landlock_plan`]), with a review run's workspace granted on the
/// view rather than the host.
pub(super) fn plan(
    spec: &Spec,
    host: &dyn HostView,
    masked: &[PathBuf],
    emptied: &[(PathBuf, Kind)],
    devices: &[(PathBuf, usize)],
    review: Option<&ReviewView>,
) -> LandlockPlan {
    let mut landlock = landlock_plan(
        spec.read_scope,
        host,
        &spec.writable_roots,
        &spec.read_grants,
        masked,
        emptied,
        devices,
    );
    if let Some(r) = review {
        // The view's inodes are not the host's: the workspace's rule is added by the
        // command once the view is mounted.
        let host_rules = &mut landlock.host_rules;
        host_rules.retain(|rule| rule.path != r.workspace || rule.access != Access::Full);
        landlock
            .child_rules
            .push(Rule::child(r.workspace.clone(), Access::Full, true));
    }
    landlock
}

fn landlock_plan(
    read_scope: sandbox::ReadScope,
    host: &dyn HostView,
    writable_roots: &[PathBuf],
    allows: &[PathBuf],
    masked: &[PathBuf],
    emptied: &[(PathBuf, Kind)],
    devices: &[(PathBuf, usize)],
) -> LandlockPlan {
    let mut starts: Vec<PathBuf> = match read_scope {
        // The whole host, and each read grant by its own path as well: a grant below a
        // directory a root caller's sandbox cannot search is bound in that directory's cover
        // (`reach::covers`), where the host directory's own rule (one of the siblings a mask
        // beside it splits the host's rules into) no longer lies on its way.
        sandbox::ReadScope::Host => std::iter::once(PathBuf::from("/"))
            .chain(allows.iter().cloned())
            .collect(),
        sandbox::ReadScope::AllowList => SYSTEM_READ
            .iter()
            .chain(workspace::REPLACED.iter())
            .map(PathBuf::from)
            .chain(allows.iter().cloned())
            .collect(),
    };
    starts.sort();
    starts.dedup();
    // Masks inside writable roots cannot be mirrored (a rule on the root grants everything
    // beneath it); the mount masks enforce those alone.
    // Paths read as empty are split out the same way: Landlock does not look at the inode a
    // mount hides, so the host file's rule would be lost; the empty file or directory that
    // covers it gets its own read rule once mounted (below, `child_rules`).
    let outside: Vec<&PathBuf> = masked
        .iter()
        .chain(emptied.iter().map(|(p, _)| p))
        .filter(|m| !writable_roots.iter().any(|w| is_within(m, w)))
        .collect();
    let mut rules = Vec::new();
    for s in &starts {
        // A fixed system start in `/` may be a link there (`/bin -> usr/bin`): no run can
        // make one in `/`. An allowed path never: the scan resolved it (canonical when
        // planned), so a link seen there now was put there since (a concurrent writer
        // swapping it); its rule then records what the path leads to, is looked up through
        // no link, and the build refuses the run as changed (red team i32 L2).
        let fixed = SYSTEM_READ
            .iter()
            .chain(workspace::REPLACED.iter())
            .any(|f| s.as_path() == Path::new(f));
        let links = fixed && host.lstat_kind(s) == Some(Kind::Symlink);
        read_rules(host, s, None, links, &outside, &mut rules);
    }
    for w in writable_roots {
        let Some(e) = host.stat(w) else {
            continue; // gone since the scan: nothing to grant (the mounts refuse the run)
        };
        rules.push(Rule {
            path: w.clone(),
            access: Access::Full,
            dir: e.kind == Kind::Dir,
            id: Some((e.dev, e.ino)),
            links: false,
        });
    }
    for (d, _) in devices {
        let Some(e) = host.stat(d) else {
            continue;
        };
        rules.push(Rule {
            path: d.clone(),
            access: Access::Device,
            dir: false,
            id: Some((e.dev, e.ino)),
            links: host.lstat_kind(d) == Some(Kind::Symlink),
        });
    }
    let mut child_rules = vec![
        Rule::child("/tmp", Access::Full, true),
        Rule::child("/dev/shm", Access::Full, true),
        Rule::child("/dev/pts", Access::Device, true),
        Rule::child("/proc", Access::ReadWriteFiles, true),
    ];
    child_rules.extend(
        emptied
            .iter()
            .map(|(p, kind)| Rule::child(p.clone(), Access::Read, *kind == Kind::Dir)),
    );
    LandlockPlan {
        host_rules: rules,
        child_rules,
    }
}

/// Read rules covering `root` except the masked paths: a root holding a mask is replaced by
/// its children, recursively (Landlock can grant, never subtract). `listed` is the kind the
/// parent's listing gave (not following symlinks; a listed link gets no rule); `links`,
/// whether a fixed system start is a link (see [`Rule::links`]). Each rule records what its path led to ([`Rule::id`]), one
/// `stat` each, so the builder can tell the path was changed after planning.
fn read_rules(
    host: &dyn HostView,
    root: &Path,
    listed: Option<Kind>,
    links: bool,
    masked: &[&PathBuf],
    out: &mut Vec<Rule>,
) {
    if masked.iter().any(|m| m.as_path() == root) {
        return;
    }
    // A symbolic link listed beside a mask gets no rule: Landlock judges an access by the
    // path of what it reaches, so the link needs none, and a rule through it would grant
    // its target, anywhere (red team i32 L1: `shared/link -> private` read `private`).
    if listed == Some(Kind::Symlink) {
        return;
    }
    let Some(entry) = host.stat(root) else {
        return; // gone (or a dangling link): nothing to grant
    };
    let kind = entry.kind;
    // Listed as a directory or a file but found as something else: changed while planning;
    // granting nothing there is the safe side (it is not read again by name).
    if matches!(listed, Some(k @ (Kind::Dir | Kind::File)) if k != kind) {
        return;
    }
    let id = Some((entry.dev, entry.ino));
    let holds_mask = masked.iter().any(|m| is_within(m, root));
    if !holds_mask || kind != Kind::Dir {
        out.push(Rule {
            path: root.to_path_buf(),
            access: Access::Read,
            dir: kind == Kind::Dir,
            id,
            links,
        });
        return;
    }
    out.push(Rule {
        path: root.to_path_buf(),
        access: Access::List,
        dir: true,
        id,
        links,
    });
    for (name, kind) in host.list_dir(root) {
        read_rules(host, &root.join(name), Some(kind), links, masked, out);
    }
}
