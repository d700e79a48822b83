//! What the planner protects in the git repositories the sandbox can write: everything that
//! makes git run code or look elsewhere, beyond the `hooks`, `config` and `commondir` that the
//! protected-path patterns and the creation guard already cover.
//!
//! For every git dir found in (or redirected to from) the writable roots:
//! - `config.worktree` (read with `extensions.worktreeConfig`), `info/exclude` and
//!   `info/attributes` (they can hide a change from `git status` and `git diff`), the legacy
//!   remote definitions `remotes/` and `branches/`;
//! - each linked worktree's `worktrees/<name>/{commondir,gitdir,config.worktree}` (the
//!   worktree itself may lie outside the workspace: its git reads them);
//! - the directory `core.hooksPath` names, the files `include.path` and
//!   `includeIf.<condition>.path` name (whatever the condition), followed through includes,
//!   in the repository's configs and the caller's global ones;
//! - the targets of hooks that are symbolic links (`pre-commit -> ../../scripts/pre-commit`).
//!
//! Paths that exist become read-only; every one of them is refused on creation.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use policy::{is_within, normalize_lexically};

use crate::host::{HostView, Kind};

/// How much of a git config is read.
const CONFIG_LIMIT: usize = 256 * 1024;
/// How deep includes are followed (git's own limit is 10).
const INCLUDE_DEPTH: usize = 10;

/// Whether `path` is an existing git config (`config` or `config.worktree` as a regular file
/// in a git dir): read-only during the run, rewritten by the init when only inert keys change.
pub fn is_existing_config(host: &dyn HostView, path: &Path) -> bool {
    let named_config = path
        .file_name()
        .is_some_and(|n| n == "config" || n == "config.worktree");
    let Some(parent) = path.parent() else {
        return false;
    };
    named_config
        && host.lstat_kind(path) == Some(Kind::File)
        && (parent.file_name().is_some_and(|n| n == ".git")
            || host.stat(&parent.join("HEAD")).is_some())
}

/// The admin dirs of git dir `dir`'s linked worktrees (`worktrees/<name>`, each with its own
/// `HEAD`, index and state of a stopped rebase).
pub(crate) fn worktree_dirs(host: &dyn HostView, dir: &Path) -> Vec<PathBuf> {
    let worktrees = dir.join("worktrees");
    if host.lstat_kind(&worktrees) != Some(Kind::Dir) {
        return Vec::new();
    }
    (host.list_dir(&worktrees).into_iter())
        .filter(|(_, kind)| *kind == Kind::Dir)
        .map(|(name, _)| worktrees.join(name))
        .collect()
}

/// The git dirs of the repository that holds `root` (its own `.git`, or one above it), if any.
pub(crate) fn enclosing(host: &dyn HostView, root: &Path) -> Option<GitDir> {
    root.ancestors().find_map(|top| {
        let dot = top.join(".git");
        match host.lstat_kind(&dot)? {
            Kind::Dir => Some(GitDir {
                dir: dot,
                top: Some(top.to_path_buf()),
            }),
            _ => None, // a `.git` file or link: the planner's redirect rules handle it
        }
    })
}

/// The length of object names in the repository of git dir `dir`: 32 bytes for SHA-256
/// (`extensions.objectFormat = sha256`), else 20.
pub(crate) fn hash_len(host: &dyn HostView, dir: &Path) -> usize {
    let sha256 = host
        .read_lossy(&dir.join("config"), CONFIG_LIMIT)
        .is_some_and(|text| {
            entries(&text).iter().any(|e| {
                e.section == "extensions"
                    && e.key == "objectformat"
                    && e.value.eq_ignore_ascii_case("sha256")
            })
        });
    if sha256 {
        32
    } else {
        20
    }
}

/// A git dir, and the top of the worktree git runs hooks in (unknown for a bare repository or
/// a submodule's git dir).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct GitDir {
    pub dir: PathBuf,
    pub top: Option<PathBuf>,
}

/// One `key = value` of a git config: section and key lower-cased, the subsection as written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    section: String,
    subsection: Option<String>,
    key: String,
    value: String,
}

/// The entries of a git config. Lenient where git is (comments, quotes, escapes,
/// continuation lines, `[section.sub]`); a line it cannot read is skipped, as what matters
/// here is finding every path a config names.
fn entries(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut subsection: Option<String> = None;
    let mut lines = text.lines();
    // Git reads on after a header's `]` as more config (a key, or another header).
    let mut rest_of_line: Option<String> = None;
    while let Some(raw) = rest_of_line
        .take()
        .or_else(|| lines.next().map(str::to_string))
    {
        let mut line = raw.trim_start().to_string();
        if let Some(rest) = line.strip_prefix('[') {
            let Some(end) = rest.find(']') else {
                continue;
            };
            let header = &rest[..end];
            let after = rest[end + 1..].trim().to_string();
            match header.split_once(char::is_whitespace) {
                Some((name, sub)) => {
                    section = name.to_ascii_lowercase();
                    let sub = sub.trim().trim_matches('"').replace("\\\"", "\"");
                    subsection = Some(sub.replace("\\\\", "\\"));
                }
                None => match header.split_once('.') {
                    Some((name, sub)) => {
                        section = name.to_ascii_lowercase();
                        subsection = Some(sub.to_ascii_lowercase());
                    }
                    None => {
                        section = header.to_ascii_lowercase();
                        subsection = None;
                    }
                },
            }
            if !(after.is_empty() || after.starts_with('#') || after.starts_with(';')) {
                rest_of_line = Some(after);
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        // Continuation lines: a value ending in an unescaped backslash goes on.
        while line.ends_with('\\') && !line.ends_with("\\\\") {
            line.pop();
            match lines.next() {
                Some(next) => line.push_str(next),
                None => break,
            }
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), value_of(v).0),
            None => (line.trim(), String::from("true")),
        };
        out.push(Entry {
            section: section.clone(),
            subsection: subsection.clone(),
            key: key.to_ascii_lowercase(),
            value,
        });
    }
    out
}

/// A value as git reads it: quotes removed, escapes applied, a comment outside quotes cut;
/// and whether it was well formed (its quotes closed, no escape cut off at the end).
pub(crate) fn value_of(raw: &str) -> (String, bool) {
    let mut out = String::new();
    let mut quoted = false;
    let mut whole = true;
    let mut chars = raw.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('b') => {
                    out.pop();
                }
                Some(other) => out.push(other),
                None => whole = false,
            },
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    (out.trim_end().to_string(), whole && !quoted)
}

/// A path value as git expands it: `~/` from the home, relative ones from `base`. `None` for
/// forms that cannot name a workspace path this planner could protect (`~user/`).
fn expand(value: &str, base: &Path, home: &Path) -> Option<PathBuf> {
    if value.is_empty() {
        return None;
    }
    let path = if let Some(rest) = value.strip_prefix("~/") {
        home.join(rest)
    } else if value == "~" {
        home.to_path_buf()
    } else if value.starts_with('~') || value.starts_with("%(prefix)") {
        return None;
    } else {
        base.join(value)
    };
    Some(normalize_lexically(&path))
}

/// Paths named by a config file and the files it includes: (hooks directories as written,
/// relative ones still relative to the worktree; included files, resolved).
#[derive(Debug, Default)]
struct Named {
    hooks_paths: Vec<String>,
    includes: Vec<PathBuf>,
}

fn read_config(host: &dyn HostView, file: &Path, home: &Path, depth: usize, named: &mut Named) {
    if depth > INCLUDE_DEPTH {
        return;
    }
    let Some(text) = host.read_lossy(file, CONFIG_LIMIT) else {
        return;
    };
    let base = file.parent().unwrap_or(Path::new("/"));
    for e in entries(&text) {
        if e.section == "core" && e.key == "hookspath" {
            named.hooks_paths.push(e.value);
        } else if (e.section == "include" || e.section == "includeif") && e.key == "path" {
            if let Some(p) = expand(&e.value, base, home) {
                if !named.includes.contains(&p) {
                    named.includes.push(p.clone());
                    read_config(host, &p, home, depth + 1, named);
                }
            }
        }
    }
}

/// The caller's global git configs (their includes and `core.hooksPath` apply to every
/// repository), from the caller's `XDG_CONFIG_HOME`.
pub(crate) fn global_configs(home: &Path, xdg_config_home: Option<&Path>) -> Vec<PathBuf> {
    let xdg = xdg_config_home
        .filter(|p| p.is_absolute())
        .map_or_else(|| home.join(".config"), Path::to_path_buf);
    vec![
        PathBuf::from("/etc/gitconfig"),
        home.join(".gitconfig"),
        xdg.join("git/config"),
    ]
}

/// Whether `dir` is a linked worktree's admin dir, `<git dir>/worktrees/<name>` below a
/// `.git`: git's own (its `commondir`, `gitdir` and `config.worktree` are
/// [`WORKTREE_FILES`]), made by `git worktree add` and deleted by `git worktree remove`.
fn is_worktree_admin_dir(dir: &Path) -> bool {
    // Exactly `.git/worktrees/<name>` (or a submodule git dir's, `.git/modules/.../worktrees/
    // <name>`): `.git/X/worktrees/Y` with `commondir` `../..` sends git to `.git/X`, a
    // directory the run made, with its config and hooks (red team of issue 33, eighth round).
    let mut up = dir.ancestors().skip(1);
    let worktrees = up.next();
    let owner = up.next();
    worktrees.is_some_and(|w| w.file_name().is_some_and(|n| n == "worktrees"))
        && owner.is_some_and(|o| {
            o.file_name().is_some_and(|n| n == ".git")
                || o.ancestors().skip(1).any(|a| {
                    a.file_name().is_some_and(|n| n == "modules")
                        && a.parent()
                            .is_some_and(|g| g.file_name().is_some_and(|n| n == ".git"))
                })
        })
}

/// [`is_worktree_admin_dir`], and its `commondir` is git's own `../..`: git takes hooks and
/// config from the `.git` above, never from the admin dir (but `config.worktree`, one of
/// [`WORKTREE_FILES`]). Read without following a FIFO ([`HostView::read_small`]).
pub(crate) fn is_plain_worktree_admin_dir(host: &dyn HostView, dir: &Path) -> bool {
    is_worktree_admin_dir(dir)
        && host
            .read_small(&dir.join("commondir"))
            .is_some_and(|c| c.trim_end_matches('\n') == "../..")
}

/// Names below every linked worktree's git dir (`<gitdir>/worktrees/<name>/`) that are
/// refused on creation.
pub(crate) const WORKTREE_FILES: [&str; 3] = ["commondir", "gitdir", "config.worktree"];

/// Every path to protect for `dirs` (see the module docs) that lies in a writable root,
/// existing or not. Symlinks are followed where they exist.
pub(crate) fn protected_paths(
    host: &dyn HostView,
    dirs: &[GitDir],
    roots: &[PathBuf],
    home: &Path,
    globals: &[PathBuf],
) -> BTreeSet<PathBuf> {
    let mut wanted: Vec<PathBuf> = Vec::new();
    let mut global = Named::default();
    for g in globals {
        read_config(host, g, home, 0, &mut global);
    }
    // The global configs' includes (and a hooks directory they name by an absolute or `~/`
    // path) apply to every repository of the host, whether or not a repository lies in the
    // writable roots: with the home as the workspace, `~/.gitconfig` is protected but a
    // `~/.gitconfig.local` it includes would take `core.fsmonitor` for the host's next
    // `git status`. Protected existing or not (the creation guard, the sweep under gVisor).
    wanted.extend(global.includes.iter().cloned());
    for h in &global.hooks_paths {
        if h.starts_with('/') || h.starts_with("~/") {
            wanted.extend(expand(h, home, home));
        }
    }
    for g in dirs {
        let d = &g.dir;
        // `remotes/<name>` and `branches/<name>`: git's legacy remote definitions, read for a
        // remote name the config does not define (their `URL:` can name a local repository
        // whose hooks a push runs).
        for name in [
            "config.worktree",
            "info/exclude",
            "info/attributes",
            "remotes",
            "branches",
        ] {
            wanted.push(d.join(name));
        }
        for (name, kind) in host.list_dir(&d.join("worktrees")) {
            if kind == Kind::Dir {
                let w = d.join("worktrees").join(name);
                for file in WORKTREE_FILES {
                    wanted.push(w.join(file));
                }
            }
        }
        let mut named = Named {
            hooks_paths: global.hooks_paths.clone(),
            includes: global.includes.clone(),
        };
        for file in ["config", "config.worktree"] {
            read_config(host, &d.join(file), home, 0, &mut named);
        }
        wanted.extend(named.includes);
        let top = g.top.as_deref().unwrap_or(d);
        let mut hook_dirs = vec![d.join("hooks")];
        for h in &named.hooks_paths {
            if let Some(p) = expand(h, top, home) {
                wanted.push(p.clone());
                hook_dirs.push(p);
            }
        }
        for dir in hook_dirs {
            for (name, kind) in host.list_dir(&dir) {
                if kind == Kind::Symlink {
                    if let Some(target) = host.canonicalize(&dir.join(name)) {
                        wanted.push(target);
                    }
                }
            }
        }
    }
    wanted
        .into_iter()
        .map(|p| host.canonicalize(&p).unwrap_or(p))
        .filter(|p| roots.iter().any(|r| is_within(p, r) && p != r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::fake::TextFiles;

    #[test]
    fn only_a_worktree_admin_dir_as_git_makes_it_is_plain() {
        let tmp = tempfile::tempdir().unwrap();
        let host = crate::host::RealHost;
        let admin = tmp.path().join("ws/.git/worktrees/wt");
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::write(admin.join("commondir"), "../..\n").unwrap();
        assert!(is_plain_worktree_admin_dir(&host, &admin));
        std::fs::write(admin.join("commondir"), "../../../evil\n").unwrap();
        assert!(
            !is_plain_worktree_admin_dir(&host, &admin),
            "another common dir"
        );
        std::fs::remove_file(admin.join("commondir")).unwrap();
        assert!(!is_plain_worktree_admin_dir(&host, &admin), "no common dir");
        let elsewhere = tmp.path().join("ws/worktrees/wt");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("commondir"), "../..\n").unwrap();
        assert!(
            !is_plain_worktree_admin_dir(&host, &elsewhere),
            "not below .git"
        );
        let hidden = tmp.path().join("ws/.git/inner");
        std::fs::create_dir_all(&hidden).unwrap();
        std::fs::write(hidden.join("commondir"), "../..\n").unwrap();
        assert!(
            !is_plain_worktree_admin_dir(&host, &hidden),
            "not in worktrees/"
        );
        let planted = tmp.path().join("ws/.git/X/worktrees/Y");
        std::fs::create_dir_all(&planted).unwrap();
        std::fs::write(planted.join("commondir"), "../..\n").unwrap();
        assert!(
            !is_plain_worktree_admin_dir(&host, &planted),
            "a worktrees/ below a directory the run made in .git"
        );
        let module = tmp.path().join("ws/.git/modules/sub/worktrees/w");
        std::fs::create_dir_all(&module).unwrap();
        std::fs::write(module.join("commondir"), "../..\n").unwrap();
        assert!(is_plain_worktree_admin_dir(&host, &module), "a submodule's");
    }

    #[test]
    fn config_entries_are_read_as_git_reads_them() {
        let text = "[core]\n\thooksPath = \"hooks dir\" # comment\n\
            [includeIf \"gitdir:~/w/\"]\n\tpath = ../x.inc\n\
            [include] path = y ; trailing\n\
            [remote \"x\"] [core] hooksPath = z\n\
            [remote.Origin]\n\turl = a\\\n\tb\n\
            [Core]\n\tHOOKSPATH\n";
        let e = entries(text);
        let find = |s: &str, k: &str| -> Vec<String> {
            e.iter()
                .filter(|x| x.section == s && x.key == k)
                .map(|x| x.value.clone())
                .collect()
        };
        assert_eq!(find("core", "hookspath"), ["hooks dir", "z", "true"]);
        assert_eq!(find("includeif", "path"), ["../x.inc"]);
        assert_eq!(find("include", "path"), ["y"]);
        assert_eq!(find("remote", "url"), ["a\tb"]);
        assert_eq!(
            e.iter()
                .find(|x| x.section == "remote")
                .and_then(|x| x.subsection.clone()),
            Some("origin".into())
        );
    }

    /// The global configs' includes are protected with no repository in the writable roots
    /// (the home as the workspace), followed through includes, relative to the including file,
    /// existing or not; `includeIf` whatever its condition. Control: without the include
    /// lines nothing of the home is protected; a target outside the roots is left out.
    #[test]
    fn global_includes_are_protected_without_any_repository() {
        let home = Path::new("/h");
        let roots = vec![home.to_path_buf()];
        let globals = global_configs(home, None);
        let host = TextFiles::new(vec![
            (
                home.join(".gitconfig"),
                "[user]\n\tname = u\n[include]\n\tpath = ~/.gitconfig.local\n\
                 [includeIf \"gitdir:~/work/\"]\n\tpath = .config/git/work.inc\n\
                 [include] path = /etc/elsewhere\n[core]\n\thooksPath = ~/.githooks\n"
                    .into(),
            ),
            (
                home.join(".config/git/work.inc"),
                "[include]\n\tpath = deeper.inc\n".into(),
            ),
            (
                home.join(".config/git/config"),
                "[include]\n\tpath = xdg.inc\n".into(),
            ),
        ]);
        let got = protected_paths(&host, &[], &roots, home, &globals);
        for p in [
            ".gitconfig.local",
            ".config/git/work.inc",
            ".config/git/deeper.inc",
            ".config/git/xdg.inc",
            ".githooks",
        ] {
            assert!(got.contains(&home.join(p)), "~/{p} not protected: {got:?}");
        }
        assert!(!got.iter().any(|p| p.starts_with("/etc")), "{got:?}");
        // Control: the same home without includes.
        let plain = TextFiles::new(vec![(
            home.join(".gitconfig"),
            "[user]\n\tname = u\n".into(),
        )]);
        assert!(protected_paths(&plain, &[], &roots, home, &globals).is_empty());
    }

    #[test]
    fn values_expand_like_git_paths() {
        let (base, home) = (Path::new("/ws/.git"), Path::new("/h"));
        assert_eq!(expand("x", base, home), Some(PathBuf::from("/ws/.git/x")));
        assert_eq!(expand("../x", base, home), Some(PathBuf::from("/ws/x")));
        assert_eq!(expand("~/x", base, home), Some(PathBuf::from("/h/x")));
        assert_eq!(expand("/abs", base, home), Some(PathBuf::from("/abs")));
        assert_eq!(expand("~bob/x", base, home), None);
        assert_eq!(expand("", base, home), None);
    }
}
