//! Which paths of a workspace a snapshot holds: one decision per relative path, from the
//! resolved policy's masks, git's rules, stockade's state and the list of dependency caches.
//!
//! A path is decided from its own name and its ancestors' (outermost first, the first rule
//! that applies wins), never from the file's content, so the same [`Filter`] can judge a
//! path that comes back from a backend as well as one that goes out.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use policy::{is_within, GlobList, PathContext, PathPattern, Policy};

use super::{Reason, SnapshotError};
use crate::host::{HostView, Kind};

/// A directory of installed dependencies or build output, left out at any depth: the backend
/// rebuilds it from the lockfile or the sources, and a host's copy can hold absolute host
/// paths, compiled code for the host, and (`.venv`) links to the host's interpreter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cache {
    /// The directory's name (only a directory of this name is left out; a file is kept).
    pub name: &'static str,
    /// What it holds.
    pub why: &'static str,
}

/// Every dependency cache a snapshot leaves out, as data.
pub const CACHES: &[Cache] = &[
    Cache {
        name: "node_modules",
        why: "npm, yarn or pnpm packages (installed from the lockfile)",
    },
    Cache {
        name: "target",
        why: "Cargo's (or Maven's) build output",
    },
    Cache {
        name: ".venv",
        why: "a Python virtual environment (links to the host's interpreter)",
    },
    Cache {
        name: "venv",
        why: "a Python virtual environment (links to the host's interpreter)",
    },
    Cache {
        name: "__pycache__",
        why: "Python bytecode compiled on the host",
    },
    Cache {
        name: ".tox",
        why: "tox's virtual environments",
    },
    Cache {
        name: ".gradle",
        why: "Gradle's project cache",
    },
    Cache {
        name: ".mypy_cache",
        why: "mypy's cache",
    },
    Cache {
        name: ".pytest_cache",
        why: "pytest's cache",
    },
];

/// stockade's own state in a workspace (`.stockade/`, at any depth): the quarantine of what
/// sweeps moved aside, and the workspace's policy files. Left out whole: the quarantine holds
/// what a run was not allowed to leave (planted hooks), and the policy files configure the
/// host's stockade, which a backend does not run (nor may it change them: a change coming
/// back under `.stockade/` is not in the snapshot, so it is refused). `stockade.toml` at the
/// top is a project file like any other and is kept.
pub const STOCKADE_STATE: &str = ".stockade";

/// What a snapshot does with one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Copied as it is (a directory: with what is decided in it).
    Include,
    /// A git dir's `config`: written reduced to the keys committing and fetching need
    /// ([`super::git_config::reduce`]).
    GitConfig,
    /// Left out, for `reason`; `detail` names the rule (the policy pattern, the cache).
    Exclude(Reason, String),
}

/// The filter of one workspace under one policy (see the module docs).
#[derive(Debug, Clone)]
pub struct Filter {
    workspace: PathBuf,
    /// Masked exact paths in the workspace (`deny_read`, `read_empty`), with the pattern each
    /// comes from.
    exact: HashMap<PathBuf, String>,
    /// Masked globs, compiled once; `glob_patterns[i]` is the pattern of glob `i`.
    globs: GlobList,
    glob_patterns: Vec<String>,
    /// Exact read grants (`allow_read`): readable even inside a mask.
    allows: Vec<PathBuf>,
    /// Existing masked paths outside the workspace, canonical, with their kinds: a hard link
    /// of one of their files inside the workspace is left out too.
    pub(super) outside_masks: Vec<(PathBuf, Kind)>,
}

impl Filter {
    /// The filter of `workspace` (canonical) under `policy`, with `home` for `~` patterns.
    /// Relative patterns (`.env`) apply at any depth beneath the workspace whatever the
    /// profile makes writable; a mask that holds the whole workspace does not apply (as in a
    /// run: writing implies reading).
    ///
    /// # Errors
    ///
    /// A policy pattern that does not expand ([`SnapshotError::Policy`]).
    pub fn new(
        policy: &Policy,
        workspace: &Path,
        home: &Path,
        host: &dyn HostView,
    ) -> Result<Filter, SnapshotError> {
        let home = host
            .canonicalize(home)
            .unwrap_or_else(|| home.to_path_buf());
        let ctx = PathContext {
            home,
            workspace: workspace.to_path_buf(),
            writable_roots: vec![workspace.to_path_buf()],
        };
        let mut exact = HashMap::new();
        let mut globs = Vec::new();
        let mut outside_masks = Vec::new();
        let fs = &policy.filesystem;
        for pattern in fs.deny_read.iter().chain(&fs.read_empty) {
            for expanded in policy::expand(pattern, &ctx)? {
                match expanded {
                    PathPattern::Exact(p) => {
                        if is_within(workspace, &p) {
                            continue;
                        }
                        if is_within(&p, workspace) {
                            exact.entry(p).or_insert_with(|| pattern.clone());
                        } else if let (Some(canon), Some(e)) =
                            (host.canonicalize(&p), host.stat(&p))
                        {
                            outside_masks.push((canon, e.kind));
                        }
                    }
                    PathPattern::Glob(g) => {
                        if g.is_one_level() && !is_within(g.base(), workspace) {
                            for (name, _) in host.list_dir(g.base()) {
                                let p = g.base().join(&name);
                                if g.matches_name(&name) {
                                    if let (Some(canon), Some(e)) =
                                        (host.canonicalize(&p), host.stat(&p))
                                    {
                                        outside_masks.push((canon, e.kind));
                                    }
                                }
                            }
                        }
                        globs.push((g, pattern.clone()));
                    }
                }
            }
        }
        let mut allows = Vec::new();
        for pattern in &fs.allow_read {
            for expanded in policy::expand(pattern, &ctx)? {
                if let PathPattern::Exact(p) = expanded {
                    allows.push(host.canonicalize(&p).unwrap_or(p));
                }
            }
        }
        outside_masks.sort();
        outside_masks.dedup();
        Ok(Filter {
            workspace: workspace.to_path_buf(),
            exact,
            globs: GlobList::new(globs.iter().map(|(g, _)| g))?,
            glob_patterns: globs.into_iter().map(|(_, p)| p).collect(),
            allows,
            outside_masks,
        })
    }

    /// The workspace this filter is for.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The decision for `rel` (relative to the workspace) of kind `kind`; its ancestors are
    /// directories. A directory named `.git` is a git dir; [`Filter::decide_with`] also
    /// knows git dirs under other names.
    pub fn decide(&self, rel: &Path, kind: Kind) -> Decision {
        self.decide_with(rel, kind, &|_| false)
    }

    /// [`Filter::decide`], with `is_git_dir` saying which other directories (relative; `""`
    /// is the workspace) are git dirs: a bare repository git would accept where it lies.
    pub fn decide_with(
        &self,
        rel: &Path,
        kind: Kind,
        is_git_dir: &dyn Fn(&Path) -> bool,
    ) -> Decision {
        let mut names: Vec<&OsStr> = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(n) => names.push(n),
                Component::CurDir => {}
                _ => {
                    return Decision::Exclude(
                        Reason::NotInWorkspace,
                        "not a plain relative path".into(),
                    )
                }
            }
        }
        if is_git_dir(Path::new("")) {
            return git_rule(&names, kind);
        }
        let mut prefix = PathBuf::new();
        for (i, name) in names.iter().enumerate() {
            prefix.push(name);
            let last = i + 1 == names.len();
            let this_kind = if last { kind } else { Kind::Dir };
            if let Some(pattern) = self.masked(&prefix) {
                let full = self.workspace.join(rel);
                let allowed = self.allows.iter().any(|a| is_within(&full, a));
                // A masked directory with a read grant inside: only the grant is kept.
                let holds_grant =
                    last && kind == Kind::Dir && self.allows.iter().any(|a| is_within(a, &full));
                if !allowed && !holds_grant {
                    return Decision::Exclude(Reason::Secret, secret_detail(pattern));
                }
            }
            if *name == ".git" {
                if this_kind != Kind::Dir {
                    return Decision::Exclude(
                        Reason::GitRedirect,
                        "a `.git` file or link points git at a git dir outside the snapshot".into(),
                    );
                }
                return git_rule(&names[i + 1..], kind);
            }
            if this_kind == Kind::Dir && is_git_dir(&prefix) {
                return git_rule(&names[i + 1..], kind);
            }
            if *name == STOCKADE_STATE {
                return Decision::Exclude(
                    Reason::StockadeState,
                    "stockade's quarantine and workspace policy files".into(),
                );
            }
            if this_kind == Kind::Dir {
                if let Some(cache) = CACHES.iter().find(|c| *name == c.name) {
                    return Decision::Exclude(Reason::DependencyCache, cache.why.into());
                }
            }
        }
        Decision::Include
    }

    /// The policy pattern that masks the workspace path `rel` itself, if any.
    fn masked(&self, rel: &Path) -> Option<&str> {
        let abs = self.workspace.join(rel);
        if let Some(pattern) = self.exact.get(&abs) {
            return Some(pattern);
        }
        let first = self.globs.matches(&abs).into_iter().next()?;
        self.glob_patterns.get(first).map(String::as_str)
    }
}

/// What the policy's catalogue says about a mask's pattern, or where it comes from.
fn secret_detail(pattern: &str) -> String {
    match policy::mask_entry(pattern) {
        Some(m) => format!("{pattern}: {}", m.why),
        None => format!("{pattern}: masked by the policy (deny_read)"),
    }
}

/// The decision for the path `inner` inside a git dir (empty: the git dir itself). Kept:
/// what committing and fetching need (`HEAD`, `objects`, `refs`, `packed-refs`, `index`,
/// `shallow`, `reftable`, and `config` reduced); the rest runs code (`hooks`), points git
/// elsewhere (`commondir`, `worktrees`, `objects/info/alternates`), belongs to the host's
/// checkout (`info`, `logs`), or is another repository's (`modules`).
fn git_rule(inner: &[&OsStr], kind: Kind) -> Decision {
    let Some(first) = inner.first() else {
        return Decision::Include;
    };
    let first = first.to_str().unwrap_or("");
    match (first, inner.len()) {
        ("HEAD" | "packed-refs" | "index" | "shallow", 1) => Decision::Include,
        ("config", 1) if kind == Kind::File => Decision::GitConfig,
        ("config", 1) => Decision::Exclude(
            Reason::GitInternal,
            "a git config that is not a regular file is not followed".into(),
        ),
        ("objects", _) => {
            let alternates = inner.len() == 3
                && inner[1] == "info"
                && (inner[2] == "alternates" || inner[2] == "http-alternates");
            if alternates {
                Decision::Exclude(
                    Reason::GitInternal,
                    "names object stores outside the snapshot".into(),
                )
            } else {
                Decision::Include
            }
        }
        ("refs" | "reftable", _) => Decision::Include,
        (name, _) => Decision::Exclude(Reason::GitInternal, git_why(name).into()),
    }
}

fn git_why(name: &str) -> &'static str {
    match name {
        "hooks" => "hooks: programs git runs",
        "config.worktree" => "a per-worktree config (can make git run programs)",
        "commondir" => "points git at another git dir",
        "worktrees" => "links to the host's other worktrees",
        "modules" => "submodules' git dirs, with their own hooks and configs",
        "info" => "the host checkout's exclude and attributes rules",
        "logs" => "reflogs: the host's history of its refs",
        "lfs" => "Git LFS's object cache",
        "remotes" | "branches" => "legacy remote definitions (can name local repositories)",
        _ => "git's own state, not needed to commit",
    }
}
