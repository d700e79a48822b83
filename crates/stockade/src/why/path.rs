//! What the policy does to a path: read and write verdicts from the run's plan (its masks,
//! writable roots, protected paths and the creation guard's patterns, decided by
//! [`protect::decide`], the rules the init applies during the run).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use policy::origin::{Field, Setting};
use policy::{is_within, PathContext, Policy, ReadScope};

use super::rule::{entry_for, protected_rule, RuleFinder};
use super::{Enforcement, PathAnswer, Rule, Verdict};

/// What a path's verdicts are computed from.
pub struct PathFacts<'a> {
    /// The resolved policy.
    pub policy: &'a Policy,
    /// The plan a run would get ([`crate::plan`]).
    pub plan: &'a native::Plan,
    /// What the policy's path patterns are expanded against.
    pub ctx: &'a PathContext,
}

/// `target` as the sandbox resolves it: `~/` in the home, relative to the workspace, with
/// links resolved as far as the path exists.
pub fn resolve_target(target: &str, workspace: &Path, home: &Path) -> PathBuf {
    let joined = match target.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None if target == "~" => home.to_path_buf(),
        None => workspace.join(target),
    };
    let lexical = policy::normalize_lexically(&joined);
    let mut existing = lexical.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(existing) {
            return rest.iter().rev().fold(canonical, |p, c| p.join(c));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return lexical,
        }
    }
}

const KERNEL_MASK: Enforcement = Enforcement {
    by: "kernel: an empty, unreadable file or directory is mounted over it",
    observed: false,
    sees: Some("EACCES"),
};

const KERNEL_READ_ONLY: Enforcement = Enforcement {
    by: "kernel: read-only mounts and Landlock",
    observed: false,
    sees: Some("EROFS or EACCES"),
};

const NOTHING_TO_REFUSE: Enforcement = Enforcement {
    by: "nothing to refuse",
    observed: false,
    sees: None,
};

/// `--allow-read PATH`, or its policy line.
fn allow_read(path: &Path) -> String {
    let p = path.display();
    format!("`--allow-read {p}`, or `allow_read = [\"{p}\"]` under [filesystem] in the policy file")
}

/// `--allow-write PATH`, or its policy line.
fn allow_write(path: &Path) -> String {
    let p = path.display();
    format!(
        "`--allow-write {p}`, or `allow_write = [\"{p}\"]` under [filesystem] in the policy file"
    )
}

/// How to grant the host's `path` below `/tmp` with `grant` (`allow_read`/`allow_write`):
/// its deepest existing ancestor below `/tmp`, since `/tmp` itself and missing paths are
/// refused.
fn tmp_grant_hint(path: &Path, grant: fn(&Path) -> String) -> String {
    let at = existing_ancestor(path);
    if workspace::is_private_place(at) || !is_within(at, Path::new("/tmp")) {
        return "make a directory below /tmp (`mktemp -d`) and grant it: /tmp itself cannot be granted".into();
    }
    grant(at)
}

/// The deepest existing ancestor of `path` (itself if it exists).
fn existing_ancestor(path: &Path) -> &Path {
    path.ancestors()
        .find(|a| std::fs::symlink_metadata(a).is_ok())
        .unwrap_or(path)
}

/// What the policy does to `path` (resolved from `target`).
pub fn explain(
    facts: &PathFacts<'_>,
    finder: &RuleFinder<'_>,
    target: &str,
    path: PathBuf,
) -> PathAnswer {
    let exists = std::fs::symlink_metadata(&path).is_ok();
    PathAnswer {
        target: target.to_owned(),
        read: read(facts, finder, &path),
        write: write(facts, finder, &path, exists),
        path,
        exists,
    }
}

/// The writable root `path` lies in, if any.
fn writable_root<'p>(facts: &'p PathFacts<'_>, path: &Path) -> Option<&'p PathBuf> {
    facts
        .plan
        .writable_roots
        .iter()
        .find(|w| is_within(path, w))
}

/// The read grant below the host's `/tmp` that the run attaches read-only in its private
/// `/tmp` and `path` lies in, if any (read off the plan's mounts: what the run does).
fn tmp_read_grant<'p>(facts: &'p PathFacts<'_>, path: &Path) -> Option<&'p PathBuf> {
    facts.plan.mounts.iter().find_map(|m| match m {
        native::plan::Mount::Attach {
            target,
            readonly: true,
            ..
        } if is_within(target, Path::new("/tmp")) && is_within(path, target) => Some(target),
        _ => None,
    })
}

/// The private `/tmp`, `/dev` or `/proc` of the sandbox: the host's is not visible inside
/// (but for the writable roots and read grants attached in its `/tmp`).
fn private(facts: &PathFacts<'_>, path: &Path) -> Option<&'static str> {
    if writable_root(facts, path).is_some()
        || tmp_read_grant(facts, path).is_some()
        || !workspace::under_replaced(path)
    {
        return None;
    }
    workspace::REPLACED
        .iter()
        .copied()
        .find(|r| is_within(path, Path::new(r)))
}

/// The rule of the masked path `path` (in `field`), with what would allow reading it.
fn mask_rule(
    facts: &PathFacts<'_>,
    finder: &RuleFinder<'_>,
    field: Field,
    path: &Path,
) -> (Rule, String) {
    let fs = &facts.policy.filesystem;
    let (entries, key) = match field {
        Field::ReadEmpty => (&fs.read_empty, "read_empty"),
        _ => (&fs.deny_read, "deny_read"),
    };
    let allow = allow_read(path);
    let Some(entry) = entry_for(entries, facts.ctx, path) else {
        return (
            Rule::built_in(format!(
                "masked (no {key} entry names it: found by the workspace scan)"
            )),
            allow,
        );
    };
    let why = policy::DEFAULT_MASKS
        .iter()
        .find(|m| m.path == entry)
        .map(|m| format!(" (default mask, {}: {})", m.category, m.why))
        .unwrap_or_default();
    let rule = finder.entry(field, entry, format!("`{entry}` in filesystem.{key}{why}"));
    let allow = match finder.origin(field, entry) {
        policy::origin::Origin::Flag if field == Field::DenyRead => {
            format!("drop `--deny-read {entry}`, or {allow}")
        }
        policy::origin::Origin::PolicyFile => format!(
            "remove `{entry}` from {key} in the policy file{}, or {allow}",
            finder.place(&rule)
        ),
        _ => allow,
    };
    (rule, allow)
}

/// If `path` is read as empty (filesystem.read_empty): refused, by `enforcement`, with the
/// entry's rule and what would allow reading it.
fn read_empty(
    facts: &PathFacts<'_>,
    finder: &RuleFinder<'_>,
    path: &Path,
    enforcement: Enforcement,
) -> Option<Verdict> {
    if !facts.plan.emptied.iter().any(|m| is_within(path, m)) {
        return None;
    }
    let (rule, allow) = mask_rule(facts, finder, Field::ReadEmpty, path);
    Some(Verdict {
        allowed: false,
        state: "read_empty",
        rule,
        enforcement,
        allow: Some(allow),
    })
}

fn read(facts: &PathFacts<'_>, finder: &RuleFinder<'_>, path: &Path) -> Verdict {
    let plan = facts.plan;
    if let Some(place) = private(facts, path) {
        return Verdict {
            allowed: false,
            state: "private",
            rule: Rule::built_in(format!(
                "the sandbox has its own {place}: the host's is not visible inside"
            )),
            enforcement: Enforcement {
                by: "kernel: a mount namespace",
                observed: false,
                sees: Some("ENOENT (or the sandbox's own file)"),
            },
            allow: (place == "/tmp").then(|| tmp_grant_hint(path, allow_read)),
        };
    }
    if plan.masked.iter().any(|m| is_within(path, m)) {
        let (rule, allow) = mask_rule(facts, finder, Field::DenyRead, path);
        return Verdict {
            allowed: false,
            state: "masked",
            rule,
            enforcement: KERNEL_MASK,
            allow: Some(allow),
        };
    }
    if let Some(verdict) = read_empty(
        facts,
        finder,
        path,
        Enforcement {
            by: "kernel: an empty, readable file or directory is mounted over it",
            observed: false,
            sees: Some("an empty file"),
        },
    ) {
        return verdict;
    }
    if let Some(root) = writable_root(facts, path) {
        let (rule, _) = write_root_rule(facts, finder, root);
        return Verdict {
            allowed: true,
            state: "readable",
            rule,
            enforcement: NOTHING_TO_REFUSE,
            allow: None,
        };
    }
    if let Some(grant) = tmp_read_grant(facts, path) {
        let text = |by: &str| {
            format!(
                "inside {}, attached read-only at the same path in the sandbox's private /tmp by {by}",
                grant.display()
            )
        };
        let rule = match entry_for(&facts.policy.filesystem.allow_read, facts.ctx, grant) {
            Some(entry) => finder.entry(
                Field::AllowRead,
                entry,
                text(&format!("`{entry}` in filesystem.allow_read")),
            ),
            None => Rule::built_in(text("a read grant")),
        };
        return Verdict {
            allowed: true,
            state: "readable",
            rule,
            enforcement: NOTHING_TO_REFUSE,
            allow: None,
        };
    }
    let scope = facts.policy.filesystem.read_scope;
    let granted = plan
        .landlock
        .host_rules
        .iter()
        .chain(&plan.landlock.child_rules)
        .any(|r| is_within(path, &r.path) && r.access != native::plan::Access::List);
    if scope == ReadScope::AllowList && !granted {
        return Verdict {
            allowed: false,
            state: "not_granted",
            rule: finder.setting(
                Setting::ReadScope,
                "filesystem.read_scope",
                "read_scope = \"allow-list\": only allow_read, the writable roots and the system's runtime paths".into(),
            ),
            enforcement: Enforcement {
                by: "kernel: Landlock",
                observed: false,
                sees: Some("EACCES"),
            },
            allow: Some(allow_read(path)),
        };
    }
    let mut text = match scope {
        ReadScope::Host => "the host is readable (read_scope = \"host\") except what is masked; the host's file permissions still apply".to_owned(),
        ReadScope::AllowList => "granted for reading (allow_read or the system's runtime paths)".to_owned(),
    };
    // The scan masks what exists when the run starts: say which entry would cover it.
    if let Some(entry) = entry_for(&facts.policy.filesystem.deny_read, facts.ctx, path) {
        text.push_str(&format!(
            " (it is not masked now: `{entry}` in filesystem.deny_read masks it once it exists when a run starts)"
        ));
    }
    Verdict {
        allowed: true,
        state: "readable",
        rule: finder.setting(Setting::ReadScope, "filesystem.read_scope", text),
        enforcement: NOTHING_TO_REFUSE,
        allow: None,
    }
}

/// The rule that made `root` writable: its `allow_write` entry.
fn write_root_rule(
    facts: &PathFacts<'_>,
    finder: &RuleFinder<'_>,
    root: &Path,
) -> (Rule, Option<String>) {
    match entry_for(&facts.policy.filesystem.allow_write, facts.ctx, root) {
        Some(entry) => (
            finder.entry(
                Field::AllowWrite,
                entry,
                format!(
                    "inside {}, writable by `{entry}` in filesystem.allow_write",
                    root.display()
                ),
            ),
            None,
        ),
        None => (
            Rule::built_in(format!("inside the writable root {}", root.display())),
            None,
        ),
    }
}

/// The rule for a path the home's shell start-up files source (`. ~/.my_own_rc` in
/// `~/.bashrc`), found by reading them as a run's scan does.
fn sourced_rule(facts: &PathFacts<'_>, path: &Path) -> Option<Rule> {
    let sourced = workspace::home_sourced_paths(
        &workspace::RealHost,
        &facts.ctx.home,
        &facts.ctx.workspace,
        &facts.ctx.writable_roots,
    );
    sourced.iter().find(|s| is_within(path, s)).map(|s| {
        Rule::built_in(format!(
            "{} is sourced by the home's shell start-up files (found by reading them)",
            s.display()
        ))
    })
}

fn write(facts: &PathFacts<'_>, finder: &RuleFinder<'_>, path: &Path, exists: bool) -> Verdict {
    let plan = facts.plan;
    if plan.masked.iter().any(|m| is_within(path, m)) {
        let (rule, allow) = mask_rule(facts, finder, Field::DenyRead, path);
        let allow = match writable_root(facts, path) {
            Some(_) => allow,
            None => format!("{allow}, and {}", allow_write(existing_ancestor(path))),
        };
        return Verdict {
            allowed: false,
            state: "masked",
            rule,
            enforcement: KERNEL_MASK,
            allow: Some(allow),
        };
    }
    if let Some(place) = private(facts, path) {
        // Allowed (into the private /tmp), but the host's file is not what is written: say
        // what would make it so.
        return Verdict {
            allowed: place == "/tmp",
            state: "private",
            rule: Rule::built_in(format!(
                "the sandbox has its own {place}: what the command writes there stays inside and is gone with the run{}",
                if place == "/tmp" {
                    format!(
                        " (to write the host's, {})",
                        tmp_grant_hint(path, allow_write)
                    )
                } else {
                    String::new()
                }
            )),
            enforcement: NOTHING_TO_REFUSE,
            allow: None,
        };
    }
    let Some(root) = writable_root(facts, path) else {
        let names: Vec<&str> = facts
            .policy
            .filesystem
            .allow_write
            .iter()
            .map(String::as_str)
            .collect();
        return Verdict {
            allowed: false,
            state: "read_only",
            rule: Rule::built_in(format!(
                "outside every writable path (filesystem.allow_write: {}): read-only",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            )),
            enforcement: KERNEL_READ_ONLY,
            allow: Some(allow_write(existing_ancestor(path))),
        };
    };
    // Inside a writable root (a home as the workspace), a path read as empty is covered by a
    // read-only empty file or directory: not writable either.
    if let Some(verdict) = read_empty(
        facts,
        finder,
        path,
        Enforcement {
            by: "kernel: the empty file or directory mounted over it is read-only",
            observed: false,
            sees: Some("EROFS"),
        },
    ) {
        return verdict;
    }
    if plan.protected.iter().any(|p| is_within(path, p)) {
        let (rule, allow) = protected_rule(facts.policy, finder, facts.ctx, path).unwrap_or_else(|| {
            let rule = sourced_rule(facts, path).unwrap_or_else(|| {
                Rule::built_in("git's own files (hooks, config, commondir, what its configs include) and the trust store stay read-only")
            });
            (rule, None)
        });
        return Verdict {
            allowed: false,
            state: "protected",
            rule,
            enforcement: Enforcement {
                by: "kernel: a read-only bind mount",
                observed: false,
                sees: Some("EROFS"),
            },
            allow,
        };
    }
    if !exists {
        if let Some(reason) = creation_refused(plan, path) {
            let (mut rule, allow) = protected_rule(facts.policy, finder, facts.ctx, path)
                .unwrap_or_else(|| {
                    (
                        sourced_rule(facts, path).unwrap_or_else(|| {
                            Rule::built_in(
                                "git's rules for what a git dir may hold and the files git's configs include",
                            )
                        }),
                        None,
                    )
                });
            rule.text.push_str(&format!(": {}", reason.describe()));
            let by = if crate::backend::choose(facts.policy.backend)
                .traits()
                .creation_guard
            {
                "stockade: mediated creation refuses the call during the run (reported as E_SANDBOX_VIOLATION)"
            } else {
                "stockade: the sweep after the run quarantines it (reported as E_SANDBOX_VIOLATION)"
            };
            return Verdict {
                allowed: false,
                state: "creation_refused",
                rule,
                enforcement: Enforcement {
                    by,
                    observed: true,
                    sees: Some("EPERM"),
                },
                allow,
            };
        }
    }
    let (rule, _) = write_root_rule(facts, finder, root);
    Verdict {
        allowed: true,
        state: "writable",
        rule,
        enforcement: NOTHING_TO_REFUSE,
        allow: None,
    }
}

/// Why the creation guard would refuse creating a file at `path`, as the init decides it.
fn creation_refused(plan: &native::Plan, path: &Path) -> Option<protect::Reason> {
    let guard = &plan.creation_guard;
    let roots: Vec<&[u8]> = guard
        .roots
        .iter()
        .map(|r| r.as_os_str().as_bytes())
        .collect();
    let tails: Vec<Vec<&[u8]>> = guard
        .protected
        .iter()
        .map(|g| g.tail.iter().map(|t| t.as_bytes()).collect())
        .collect();
    let protected: Vec<protect::Protected<'_>> = guard
        .protected
        .iter()
        .zip(&tails)
        .map(|(g, tail)| protect::Protected {
            base: g.base.as_os_str().as_bytes(),
            tail,
        })
        .collect();
    // No index: every pattern is tried (see `protect::PatternIndex`).
    let rules = protect::Rules {
        roots: &roots,
        protected: &protected,
        held: &[],
        index: protect::PatternIndex {
            by_first: &[],
            always: &[],
        },
        reviewed: &[],
    };
    let bytes = path.as_os_str().as_bytes();
    match protect::decide(
        &rules,
        bytes,
        protect::Create::File,
        protect::GitHint::default(),
    ) {
        protect::Verdict::Deny(reason) => Some(reason),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_resolve_in_the_workspace_or_home_through_links_as_far_as_they_exist() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (ws, home, out) = (root.join("ws"), root.join("home"), root.join("out"));
        for d in [&ws, &home, &out] {
            std::fs::create_dir(d).unwrap();
        }
        std::os::unix::fs::symlink(&out, ws.join("link")).unwrap();
        assert_eq!(resolve_target("a/../b.txt", &ws, &home), ws.join("b.txt"));
        assert_eq!(
            resolve_target("~/.ssh/id", &ws, &home),
            home.join(".ssh/id")
        );
        assert_eq!(resolve_target("link/new/x", &ws, &home), out.join("new/x"));
        assert_eq!(resolve_target(out.to_str().unwrap(), &ws, &home), out);
        assert!(super::super::is_path(".env", &ws));
        assert!(super::super::is_path("~/x", &ws));
        assert!(!super::super::is_path("example.com:443", &ws));
        std::fs::write(ws.join("README.md"), "x").unwrap();
        assert!(super::super::is_path("README.md", &ws));
    }
}
