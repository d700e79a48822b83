//! What a review run's change set records before the run for the checks a direct run's sweep
//! makes after it (issue 32): a view's upper is never swept, so `changes` and `apply` flag
//! from this record what the sweep would have quarantined.
//!
//! - `deny_write` globs the creation guard cannot express ([`RecordedChecks::sweep_only`],
//!   `policy show --json`'s `sweep_only`): an entry at or below a match is flagged
//!   `protected`, matched with the sweep's own matcher ([`policy::GlobList`]).
//! - Where every protected symbolic link leads inside the workspace, existing or dangling,
//!   through every link on the way ([`RecordedChecks::link_targets`]): an entry at or below
//!   such a target is flagged `protected` (`.cargo/config.toml -> ../cfg.toml` dangling: a
//!   `cfg.toml` the run made would be read by the host's cargo), and so is a symbolic link
//!   made on the way to one (it would lead the protected link elsewhere). `apply` checks the
//!   workspace again as it is then ([`links_now`]): the host may have made such a link since.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use policy::is_within;
use serde::{Deserialize, Serialize};

use super::{pathser, ChangeKind, FileType, GuardRule, Recorded};

/// See the module's docs. `RunMeta::checks` is `None` for a change set made before these
/// were recorded: every entry it would write is flagged (see `predates`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedChecks {
    /// Absolute `deny_write` globs (globset syntax, as the plan writes them) that only the
    /// sweep checks in a direct run.
    #[serde(default)]
    pub sweep_only: Vec<String>,
    /// Protected symbolic links and where each leads (inside the workspace).
    #[serde(default)]
    pub link_targets: Vec<LinkTarget>,
}

/// A protected symbolic link and where it leads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkTarget {
    #[serde(with = "pathser::one")]
    pub link: PathBuf,
    #[serde(with = "pathser::one")]
    pub target: PathBuf,
}

/// Most links followed before a path is taken as a loop (the kernel's `MAXSYMLINKS`).
const MAX_HOPS: usize = 40;

/// Where `path` leads: every symbolic link on the way and at its end followed (read with
/// `readlink`, nothing opened through them), the part that does not exist appended as
/// written (`..` taken lexically there). `None`: a loop, or a link that cannot be read.
pub fn leads_to(path: &Path) -> Option<PathBuf> {
    let mut rest: VecDeque<OsString> = VecDeque::new();
    push_front(&mut rest, path);
    let mut at = PathBuf::from("/");
    let mut hops = 0usize;
    while let Some(c) = rest.pop_front() {
        if c == ".." {
            at.pop();
            continue;
        }
        if c == "." || c.is_empty() {
            continue;
        }
        let next = at.join(&c);
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_HOPS {
                    return None;
                }
                let target = std::fs::read_link(&next).ok()?;
                if target.is_absolute() {
                    at = PathBuf::from("/");
                }
                push_front(&mut rest, &target);
            }
            _ => at = next,
        }
    }
    Some(at)
}

/// `path`'s components (`..` kept) put before `rest`.
fn push_front(rest: &mut VecDeque<OsString>, path: &Path) {
    for c in path.components().rev() {
        match c {
            Component::Normal(n) => rest.push_front(n.to_owned()),
            Component::ParentDir => rest.push_front("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
}

/// The protected links `links` (absolute) that are symbolic links now, with where each
/// leads, kept when that lies inside `workspace` (and is not the link itself).
pub fn link_targets<'a>(
    workspace: &Path,
    links: impl IntoIterator<Item = &'a PathBuf>,
) -> Vec<LinkTarget> {
    let mut out: Vec<LinkTarget> = Vec::new();
    for link in links {
        if !is_within(link, workspace)
            || !std::fs::symlink_metadata(link).is_ok_and(|m| m.file_type().is_symlink())
        {
            continue;
        }
        let Some(target) = leads_to(link) else {
            // A loop or an unreadable link: the link itself stands for it (an entry at its
            // name is flagged anyway as a protected path).
            continue;
        };
        if target != *link
            && is_within(&target, workspace)
            && !out.iter().any(|l| l.link == *link && l.target == target)
        {
            out.push(LinkTarget {
                link: link.clone(),
                target,
            });
        }
    }
    out
}

/// The protected links of the workspace as it is now, for `apply`: the recorded ones, the
/// exact protected paths and creation-guard bases, and each guard pattern's tail in the
/// workspace's top directory and in every directory above an entry to be written that the
/// host has. Not looked for: a link the host made since the run in another directory (say
/// `other/.envrc -> ../cfg.toml`), or one matching a sweep-only glob, which would take a
/// walk of the workspace.
pub fn links_now(
    workspace: &Path,
    protected: &[PathBuf],
    guard: &[GuardRule],
    checks: Option<&RecordedChecks>,
    entries: &[&Recorded],
) -> Vec<LinkTarget> {
    let mut candidates: Vec<PathBuf> = protected.to_vec();
    candidates.extend(
        checks
            .iter()
            .flat_map(|c| c.link_targets.iter().map(|l| l.link.clone())),
    );
    let mut dirs: Vec<PathBuf> = vec![workspace.to_path_buf()];
    for e in entries {
        for a in e.path.ancestors().skip(1) {
            if !a.as_os_str().is_empty() {
                dirs.push(workspace.join(a));
            }
        }
    }
    dirs.sort();
    dirs.dedup();
    // A link is looked for only in directories the host has now (those the change set
    // makes hold none of the host's yet): an extraction's thousands of new directories cost
    // one `lstat` each, not one per pattern.
    dirs.retain(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()));
    for g in guard {
        if g.tail.is_empty() {
            candidates.push(g.base.clone());
            continue;
        }
        for d in dirs.iter().filter(|d| is_within(d, &g.base)) {
            candidates.push(g.tail.iter().fold(d.clone(), |p, t| p.join(t)));
        }
    }
    candidates.sort();
    candidates.dedup();
    link_targets(workspace, &candidates)
}

/// Why an entry at `absolute` is flagged `protected` by a protected link's target: at or
/// below one, or a symbolic link made on the way to one.
pub(crate) fn link_target_refusal(
    targets: &[LinkTarget],
    absolute: &Path,
    rec: &Recorded,
) -> Option<String> {
    if rec.kind == ChangeKind::Deleted {
        return None;
    }
    for l in targets {
        if is_within(absolute, &l.target) {
            return Some(format!(
                "the protected link {} leads to {}: what is written here is what the host reads through it",
                l.link.display(),
                l.target.display()
            ));
        }
        if rec.file_type == FileType::Symlink && is_within(&l.target, absolute) {
            return Some(format!(
                "a symbolic link on the way of the protected link {} (to {}): it would lead the protected link elsewhere",
                l.link.display(),
                l.target.display()
            ));
        }
    }
    None
}

/// Sweep-only globs compiled, or why they could not be.
type Compiled = Rc<Result<policy::GlobList, String>>;

thread_local! {
    /// The last sweep-only globs compiled (a change set's entries are flagged one by one).
    static COMPILED: RefCell<Option<(Vec<String>, Compiled)>> =
        const { RefCell::new(None) };
}

/// `patterns` compiled as the sweep compiles `deny_write` globs.
fn compiled(patterns: &[String]) -> Compiled {
    COMPILED.with(|c| {
        if let Some((p, g)) = &*c.borrow() {
            if p == patterns {
                return g.clone();
            }
        }
        let ctx = policy::PathContext {
            home: PathBuf::from("/"),
            workspace: PathBuf::from("/"),
            writable_roots: Vec::new(),
        };
        let mut globs = Vec::new();
        let mut bad = None;
        for p in patterns {
            match policy::expand(p, &ctx).map(|v| v.into_iter().next()) {
                Ok(Some(policy::PathPattern::Glob(g))) => globs.push(g),
                Ok(Some(policy::PathPattern::Exact(e))) => {
                    // No wildcard left: the path itself (escaped into a glob again).
                    match policy::expand(&format!("{}/**", e.display()), &ctx) {
                        Ok(v) => globs.extend(v.into_iter().filter_map(|x| match x {
                            policy::PathPattern::Glob(g) => Some(g),
                            policy::PathPattern::Exact(_) => None,
                        })),
                        Err(e) => bad = Some(format!("{p}: {e}")),
                    }
                }
                Ok(None) => bad = Some(format!("{p}: no pattern")),
                Err(e) => bad = Some(format!("{p}: {e}")),
            }
        }
        let out = Rc::new(match bad {
            Some(b) => Err(b),
            None => policy::GlobList::new(&globs).map_err(|e| e.to_string()),
        });
        *c.borrow_mut() = Some((patterns.to_vec(), out.clone()));
        out
    })
}

/// Why an entry at `absolute` (below `workspace`) is flagged `protected` by a sweep-only
/// glob: it or a directory above it matches one. A glob that cannot be compiled flags every
/// entry (fail closed).
pub(crate) fn sweep_only_refusal(
    patterns: &[String],
    workspace: &Path,
    absolute: &Path,
    rec: &Recorded,
) -> Option<String> {
    if patterns.is_empty() || rec.kind == ChangeKind::Deleted {
        return None;
    }
    let globs = compiled(patterns);
    let list = match &*globs {
        Ok(l) => l,
        Err(e) => {
            return Some(format!(
                "a recorded `deny_write` glob could not be read ({e}): nothing here was checked against it"
            ))
        }
    };
    let hit = absolute
        .ancestors()
        .take_while(|a| *a != workspace && is_within(a, workspace))
        .find(|a| list.is_match(a))?;
    Some(format!(
        "{} matches a `deny_write` glob the creation guard cannot express (checked by a direct run's sweep, which quarantines it)",
        hit.display()
    ))
}

/// The reason every entry of a change set made before these checks were recorded is flagged.
pub(crate) fn predates(rec: &Recorded) -> Option<String> {
    (rec.kind != ChangeKind::Deleted).then(|| {
        "the change set predates the checks of sweep-only `deny_write` globs and protected \
         links' targets (recorded with change sets since issue 32): check it, then accept it \
         by name"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changes::{BaseState, RunMeta};

    fn rec(path: &str, kind: ChangeKind, ft: FileType) -> Recorded {
        super::super::tests::recorded(path, kind, ft, 0o644, BaseState::Absent)
    }

    /// A protected link leads where the kernel would create through it: dangling, through a
    /// link on the way, absolute; a loop leads nowhere.
    #[test]
    fn where_protected_links_lead() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(w.join(".cargo")).unwrap();
        std::fs::create_dir_all(w.join("d")).unwrap();
        let ln = |t: &str, at: &str| std::os::unix::fs::symlink(t, w.join(at)).unwrap();
        ln("../cfg.toml", ".cargo/config.toml");
        ln("d", "sub");
        ln("sub/e/f", ".envrc");
        ln(&w.join("abs").display().to_string(), "a");
        ln("loop", "loop");
        assert_eq!(
            leads_to(&w.join(".cargo/config.toml")),
            Some(w.join("cfg.toml"))
        );
        assert_eq!(leads_to(&w.join(".envrc")), Some(w.join("d/e/f")));
        assert_eq!(leads_to(&w.join("a")), Some(w.join("abs")));
        assert_eq!(leads_to(&w.join("loop")), None);
        let links: Vec<PathBuf> = [".cargo/config.toml", ".envrc", "loop", "d", "nothing"]
            .iter()
            .map(|p| w.join(p))
            .collect();
        let got = link_targets(&w, &links);
        let targets: Vec<&Path> = got.iter().map(|l| l.target.as_path()).collect();
        assert_eq!(targets, [w.join("cfg.toml"), w.join("d/e/f")]);
        // What each flags: at or below a target, a symlink on the way; not beside, not a
        // deletion.
        let why = |p: &str, k, ft| link_target_refusal(&got, &w.join(p), &rec(p, k, ft));
        let added = ChangeKind::Added;
        assert!(why("cfg.toml", added, FileType::File).is_some());
        assert!(why("d/e/f", added, FileType::File).is_some());
        assert!(why("d/e", added, FileType::Symlink).is_some());
        assert!(why("d/e", added, FileType::Dir).is_none());
        assert!(why("cfg.toml.bak", added, FileType::File).is_none());
        assert!(why("cfg.toml", ChangeKind::Deleted, FileType::File).is_none());
    }

    /// Sweep-only globs flag what they match and what lies below a match, with the sweep's
    /// matcher. Controls: a name beside, a deletion, no globs.
    #[test]
    fn sweep_only_globs_flag_their_matches() {
        let ctx = policy::PathContext {
            home: "/h".into(),
            workspace: "/w".into(),
            writable_roots: vec!["/w".into()],
        };
        let patterns: Vec<String> = ["a/**/b.sh", "evil[0-9].sh"]
            .iter()
            .flat_map(|p| policy::expand(p, &ctx).unwrap())
            .filter_map(|p| match p {
                policy::PathPattern::Glob(g) => Some(g.pattern().to_string()),
                policy::PathPattern::Exact(_) => None,
            })
            .collect();
        assert_eq!(patterns.len(), 2);
        let w = Path::new("/w");
        let why = |p: &str, k, ft| sweep_only_refusal(&patterns, w, &w.join(p), &rec(p, k, ft));
        let added = ChangeKind::Added;
        assert!(why("a/x/b.sh", added, FileType::File).is_some());
        assert!(why("q/a/b.sh", added, FileType::Symlink).is_some());
        assert!(why("a/x/b.sh/inner", added, FileType::File).is_some());
        assert!(why("x/evil7.sh", ChangeKind::Modified, FileType::File).is_some());
        assert!(why("a/x/c.sh", added, FileType::File).is_none());
        assert!(why("evilx.sh", added, FileType::File).is_none());
        assert!(why("a/x/b.sh", ChangeKind::Deleted, FileType::File).is_none());
        assert!(sweep_only_refusal(
            &[],
            w,
            &w.join("a/b.sh"),
            &rec("a/b.sh", added, FileType::File)
        )
        .is_none());
    }

    /// A change set recorded before the checks (no `checks` in its `meta.json`) loads, as
    /// `None`; a new one records them.
    #[test]
    fn old_change_sets_load_without_the_checks() {
        let mut meta = RunMeta::new("r", Path::new("/w"), &[], false, (0, 0), (0, 0), &[], &[]);
        assert_eq!(meta.checks, Some(RecordedChecks::default()));
        meta.checks = None;
        let text = serde_json::to_string(&meta).unwrap();
        assert!(!text.contains("checks"));
        let back: RunMeta = serde_json::from_str(&text).unwrap();
        assert_eq!(back.checks, None);
        let r = rec("x", ChangeKind::Added, FileType::File);
        assert!(predates(&r).is_some());
        assert!(predates(&rec("x", ChangeKind::Deleted, FileType::File)).is_none());
    }
}
