//! Expansion of path patterns into concrete paths and globs. Pure: nothing here touches the
//! filesystem except [`canonicalize_existing`].
//!
//! Pattern forms:
//! - `/abs/path`: as written;
//! - `~`, `~/x`, `$HOME`, `${HOME}/x`: under [`PathContext::home`];
//! - `$WORKSPACE`, `${WORKSPACE}/x`: under [`PathContext::workspace`];
//! - a relative pattern such as `.env` or `.git/hooks`: that path at any depth beneath every
//!   writable root, one [`Glob`] `<root>/**/<pattern>` per root.
//!
//! A pattern containing `*`, `?`, `[` or `{` becomes a [`Glob`], anything else an exact path.
//! Backslash is an ordinary character; to match a metacharacter literally, bracket it (`[*]`).

use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};

use crate::error::PolicyError;

/// The directories patterns are expanded against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathContext {
    /// The user's home directory (`~`, `$HOME`). Must be absolute.
    pub home: PathBuf,
    /// The workspace directory (`$WORKSPACE`). Must be absolute.
    pub workspace: PathBuf,
    /// Writable roots, beneath which relative patterns apply. Must be absolute.
    pub writable_roots: Vec<PathBuf>,
}

/// One expanded pattern.
// The glob variant is larger (parsed glob + lazy matcher); patterns are few and short-lived,
// so boxing would only add indirection.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathPattern {
    /// A single absolute, lexically normalized path.
    Exact(PathBuf),
    /// An absolute glob.
    Glob(Glob),
}

/// An absolute glob pattern, parsed. `*` and `?` never match `/`; `**` matches any number of
/// directories (including none). The matcher (a regex) is compiled on first use only: most
/// globs are matched in bulk through a [`GlobList`], and compiling each one costs ~100 µs.
#[derive(Debug, Clone)]
pub struct Glob {
    pattern: String,
    base: PathBuf,
    glob: globset::Glob,
    matcher: std::sync::OnceLock<GlobMatcher>,
}

impl PartialEq for Glob {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern
    }
}

impl Eq for Glob {}

impl Glob {
    /// The absolute glob pattern (in `globset` syntax; literal parts are escaped).
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The longest directory prefix free of glob characters: every match lies beneath it.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Whether `path` (made lexically normal first) matches the pattern.
    pub fn is_match(&self, path: &Path) -> bool {
        self.matcher
            .get_or_init(|| self.glob.compile_matcher())
            .is_match(normalize_lexically(path))
    }

    /// Whether the pattern can match at any depth (contains `**`).
    pub fn crosses_dirs(&self) -> bool {
        self.pattern.contains("**")
    }

    /// Whether only the last component holds wildcards (`~/.env*`): every match is an entry of
    /// [`Glob::base`] itself, found by listing that one directory.
    pub fn is_one_level(&self) -> bool {
        let literal = self
            .base
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count();
        !self.crosses_dirs() && self.pattern.matches('/').count() == literal + 1
    }

    /// For a [one-level](Glob::is_one_level) glob: whether the entry `name` of its base
    /// matches. Wildcards `*` and `?` are matched without compiling the glob.
    pub fn matches_name(&self, name: &OsStr) -> bool {
        let tail = escaped(&self.base).and_then(|b| {
            self.pattern
                .strip_prefix(&format!("{b}/"))
                .map(str::to_owned)
        });
        match (tail, name.to_str()) {
            (Some(t), Some(n)) if !t.contains(['[', ']', '{', '}', '\\', '/']) => {
                wildcard_match(&t, n)
            }
            _ => self.is_match(&self.base.join(name)),
        }
    }

    /// For the common shape `<literal dir>/**/<tail>` whose tail uses only `*` and `?`: the
    /// directory and the tail's components (unescaped), e.g. `(/ws, [".git", "hooks"])`.
    pub fn literal_base_and_tail(&self) -> Option<(&Path, Vec<String>)> {
        FastGlob::of(self).map(|f| (self.base.as_path(), f.tail))
    }
}

/// Expands `pattern` against `ctx`. Relative patterns give one glob per writable root (none
/// when there are no writable roots); the other forms give exactly one entry.
///
/// # Errors
///
/// [`PolicyError::ExpandPattern`] for an empty pattern, a NUL byte, a variable other than
/// `HOME`/`WORKSPACE`, `~user`, `..` in a relative pattern, a non-absolute context directory,
/// or an invalid glob.
pub fn expand(pattern: &str, ctx: &PathContext) -> Result<Vec<PathPattern>, PolicyError> {
    let fail = |reason: String| PolicyError::ExpandPattern {
        pattern: pattern.to_owned(),
        reason,
    };
    match classify(pattern).map_err(fail)? {
        Start::Root(tail) => Ok(vec![build(Path::new("/"), &[tail]).map_err(fail)?]),
        Start::Home(tail) => Ok(vec![build(&ctx.home, &[tail]).map_err(fail)?]),
        Start::Workspace(tail) => Ok(vec![build(&ctx.workspace, &[tail]).map_err(fail)?]),
        Start::Relative(rel) => ctx
            .writable_roots
            .iter()
            .map(|root| build(root, &["**", rel]).map_err(fail))
            .collect(),
    }
}

/// Removes `.` components and resolves `..` against the preceding component, without touching
/// the filesystem. `..` above `/` stays `/`; leading `..` of a relative path are kept.
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out: Vec<Component<'_>> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(component),
            },
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

/// Whether `path` is `root` or lies beneath it, comparing whole components after lexical
/// normalization (`/h/.sshfoo` is not within `/h/.ssh`).
pub fn is_within(path: &Path, root: &Path) -> bool {
    // Paths with neither `.` nor `..` components (all the planner's, nearly) are their own
    // lexical normal form, so `starts_with` alone decides, without building either again: the
    // planner asks this some thousands of times a run. An empty path normalizes to `.`.
    if is_plain(path) && is_plain(root) {
        return path.starts_with(root);
    }
    normalize_lexically(path).starts_with(normalize_lexically(root))
}

/// Whether `path` is non-empty and has no `.` or `..` components (`Path::components` already
/// drops the `.` components that are not first, and repeated or trailing separators).
fn is_plain(path: &Path) -> bool {
    !path.as_os_str().is_empty()
        && path
            .components()
            .all(|c| !matches!(c, Component::CurDir | Component::ParentDir))
}

/// The canonical form of `path` (symlinks resolved), or `None` if it does not exist or cannot
/// be resolved.
pub fn canonicalize_existing(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// Whether a pattern (or path component) contains glob metacharacters.
pub(crate) fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', '{'])
}

/// Whether a pattern is relative (applies beneath every writable root).
pub(crate) fn is_relative_pattern(pattern: &str) -> bool {
    !pattern.is_empty() && !pattern.starts_with(['/', '~', '$'])
}

/// Checks that `pattern` is well-formed, by expanding it against a placeholder context.
pub(crate) fn check_syntax(pattern: &str) -> Result<(), PolicyError> {
    let ctx = PathContext {
        home: PathBuf::from("/home/user"),
        workspace: PathBuf::from("/workspace"),
        writable_roots: vec![PathBuf::from("/workspace")],
    };
    expand(pattern, &ctx).map(|_| ())
}

/// Where a pattern is anchored, with the rest of the pattern.
enum Start<'a> {
    Root(&'a str),
    Home(&'a str),
    Workspace(&'a str),
    Relative(&'a str),
}

fn classify(pattern: &str) -> Result<Start<'_>, String> {
    if pattern.is_empty() {
        return Err("the pattern is empty".to_owned());
    }
    if pattern.contains('\0') {
        return Err("the pattern contains a NUL byte".to_owned());
    }
    if let Some(rest) = pattern.strip_prefix('/') {
        return Ok(Start::Root(rest));
    }
    if let Some(rest) = pattern.strip_prefix('~') {
        return match rest.strip_prefix('/') {
            Some(tail) => Ok(Start::Home(tail)),
            None if rest.is_empty() => Ok(Start::Home("")),
            None => Err("`~user` is not supported; use `~/` or an absolute path".to_owned()),
        };
    }
    if let Some(rest) = pattern.strip_prefix('$') {
        let (name, after) = match rest.strip_prefix('{') {
            Some(braced) => braced
                .split_once('}')
                .ok_or_else(|| "unterminated `${`".to_owned())?,
            None => {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                rest.split_at(end)
            }
        };
        let tail = match after.strip_prefix('/') {
            Some(tail) => tail,
            None if after.is_empty() => "",
            None => return Err(format!("expected `/` after `${name}`")),
        };
        return match name {
            "HOME" => Ok(Start::Home(tail)),
            "WORKSPACE" => Ok(Start::Workspace(tail)),
            _ => Err(format!(
                "unknown variable `${name}`; only `$HOME` and `$WORKSPACE` are expanded"
            )),
        };
    }
    if pattern.split('/').any(|part| part == "..") {
        return Err("a relative pattern cannot contain `..`".to_owned());
    }
    Ok(Start::Relative(pattern))
}

/// A component of a pattern under construction.
enum Part {
    Literal(OsString),
    Glob(String),
}

/// Joins `base` (a context directory) with pattern `tails`, normalizes lexically and compiles.
fn build(base: &Path, tails: &[&str]) -> Result<PathPattern, String> {
    if !base.is_absolute() {
        return Err(format!("`{}` is not an absolute path", base.display()));
    }
    let mut parts: Vec<Part> = Vec::new();
    for component in normalize_lexically(base).components() {
        if let Component::Normal(name) = component {
            parts.push(Part::Literal(name.to_owned()));
        }
    }
    for piece in tails.iter().flat_map(|t| t.split('/')) {
        match piece {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p if has_glob_meta(p) => parts.push(Part::Glob(p.to_owned())),
            p => parts.push(Part::Literal(OsString::from(p))),
        }
    }
    if !parts.iter().any(|p| matches!(p, Part::Glob(_))) {
        let mut path = PathBuf::from("/");
        for part in &parts {
            if let Part::Literal(name) = part {
                path.push(name);
            }
        }
        return Ok(PathPattern::Exact(path));
    }
    let mut base = PathBuf::from("/");
    let mut pattern = String::new();
    let mut in_base = true;
    for part in &parts {
        pattern.push('/');
        match part {
            Part::Literal(name) => {
                pattern.push_str(&globset::escape(utf8(name)?));
                if in_base {
                    base.push(name);
                }
            }
            Part::Glob(glob) => {
                pattern.push_str(glob);
                in_base = false;
            }
        }
    }
    let glob = GlobBuilder::new(&pattern)
        .literal_separator(true)
        .backslash_escape(false)
        .build()
        .map_err(|e| format!("invalid glob: {}", e.kind()))?;
    Ok(PathPattern::Glob(Glob {
        pattern,
        base,
        glob,
        matcher: std::sync::OnceLock::new(),
    }))
}

fn utf8(name: &OsStr) -> Result<&str, String> {
    name.to_str().ok_or_else(|| {
        format!(
            "`{}` is not valid UTF-8 and cannot be part of a glob",
            name.to_string_lossy()
        )
    })
}

#[cfg(test)]
mod tests {
    /// `is_within`'s shortcut for plain paths answers as comparing the normal forms does,
    /// for every pair of a set of spellings (absolute, relative, `.`, `..`, doubled and
    /// trailing separators, a name that extends another's).
    #[test]
    fn is_within_answers_as_the_normal_forms_do() {
        use std::path::Path;
        let spellings = [
            "", ".", "..", "/", "//", "/a", "/a/", "/a//b", "/a/b", "/a/./b", "/a/../b", "/ab",
            "/a/b/c", "/a/bc", "a", "a/b", "./a", "../a", "a/..", "/..", "/a/b/..", "/b",
        ];
        for p in spellings {
            for r in spellings {
                let (p, r) = (Path::new(p), Path::new(r));
                assert_eq!(
                    super::is_within(p, r),
                    super::normalize_lexically(p).starts_with(super::normalize_lexically(r)),
                    "is_within({p:?}, {r:?})"
                );
            }
        }
    }

    use super::*;

    fn ctx() -> PathContext {
        PathContext {
            home: PathBuf::from("/home/u"),
            workspace: PathBuf::from("/ws"),
            writable_roots: vec![PathBuf::from("/ws")],
        }
    }

    fn exact(pattern: &str) -> PathBuf {
        match expand(pattern, &ctx()).unwrap().as_slice() {
            [PathPattern::Exact(path)] => path.clone(),
            other => panic!("{pattern}: {other:?}"),
        }
    }

    fn globs(pattern: &str, ctx: &PathContext) -> Vec<Glob> {
        expand(pattern, ctx)
            .unwrap()
            .into_iter()
            .map(|p| match p {
                PathPattern::Glob(g) => g,
                other => panic!("{pattern}: {other:?}"),
            })
            .collect()
    }

    fn glob(pattern: &str) -> Glob {
        let mut all = globs(pattern, &ctx());
        assert_eq!(all.len(), 1, "{pattern}");
        all.remove(0)
    }

    fn expand_err(pattern: &str) -> String {
        expand(pattern, &ctx()).unwrap_err().to_string()
    }

    #[test]
    fn home_forms() {
        assert_eq!(exact("~"), Path::new("/home/u"));
        assert_eq!(exact("~/"), Path::new("/home/u"));
        assert_eq!(exact("~/.ssh"), Path::new("/home/u/.ssh"));
        assert_eq!(exact("$HOME"), Path::new("/home/u"));
        assert_eq!(exact("$HOME/.aws"), Path::new("/home/u/.aws"));
        assert_eq!(exact("${HOME}"), Path::new("/home/u"));
        assert_eq!(exact("${HOME}/x/y"), Path::new("/home/u/x/y"));
    }

    #[test]
    fn workspace_forms() {
        assert_eq!(exact("$WORKSPACE"), Path::new("/ws"));
        assert_eq!(exact("$WORKSPACE/build"), Path::new("/ws/build"));
        assert_eq!(exact("${WORKSPACE}"), Path::new("/ws"));
        assert_eq!(exact("${WORKSPACE}/target/"), Path::new("/ws/target"));
    }

    #[test]
    fn absolute_as_is() {
        assert_eq!(exact("/etc/shadow"), Path::new("/etc/shadow"));
        assert_eq!(exact("/"), Path::new("/"));
        assert_eq!(exact("/var/log/"), Path::new("/var/log"));
        assert_eq!(exact("//a//b"), Path::new("/a/b"));
    }

    #[test]
    fn dot_and_dotdot_are_normalized() {
        assert_eq!(exact("/a/./b/../c"), Path::new("/a/c"));
        assert_eq!(exact("~/../other"), Path::new("/home/other"));
        assert_eq!(exact("$WORKSPACE/.."), Path::new("/"));
        assert_eq!(exact("/../../etc"), Path::new("/etc"));
        assert_eq!(exact("/.."), Path::new("/"));
    }

    #[test]
    fn context_dirs_are_normalized_too() {
        let ctx = PathContext {
            home: PathBuf::from("/home/./u/"),
            workspace: PathBuf::from("/x/../ws"),
            writable_roots: vec![PathBuf::from("/ws/")],
        };
        assert_eq!(
            expand("~/.ssh", &ctx).unwrap(),
            [PathPattern::Exact(PathBuf::from("/home/u/.ssh"))]
        );
        assert_eq!(
            expand("$WORKSPACE", &ctx).unwrap(),
            [PathPattern::Exact(PathBuf::from("/ws"))]
        );
        assert_eq!(globs(".env", &ctx)[0].pattern(), "/ws/**/.env");
    }

    #[test]
    fn glob_under_home() {
        let g = glob("~/.config/*/token");
        assert_eq!(g.pattern(), "/home/u/.config/*/token");
        assert_eq!(g.base(), Path::new("/home/u/.config"));
        assert!(!g.crosses_dirs());
        assert!(g.is_match(Path::new("/home/u/.config/app/token")));
        assert!(!g.is_match(Path::new("/home/u/.config/a/b/token")));
    }

    #[test]
    fn glob_metacharacters() {
        for pattern in ["/a/b?", "/a/[ab]", "/a/{x,y}", "/a/*.pem"] {
            assert_eq!(glob(pattern).base(), Path::new("/a"), "{pattern}");
        }
        assert!(glob("/a/{x,y}").is_match(Path::new("/a/y")));
        assert!(glob("/a/*.pem").is_match(Path::new("/a/key.pem")));
        assert!(!glob("/a/*.pem").is_match(Path::new("/a/b/key.pem")));
    }

    #[test]
    fn double_star_crosses_dirs() {
        let g = glob("/data/**/*.key");
        assert!(g.crosses_dirs());
        assert_eq!(g.base(), Path::new("/data"));
        assert!(g.is_match(Path::new("/data/x.key")));
        assert!(g.is_match(Path::new("/data/a/b/x.key")));
        assert!(!g.is_match(Path::new("/other/x.key")));
    }

    #[test]
    fn glob_with_dotdot_after_literal() {
        let g = glob("/a/b/../*.txt");
        assert_eq!(g.pattern(), "/a/*.txt");
        assert_eq!(g.base(), Path::new("/a"));
    }

    #[test]
    fn relative_pattern_one_glob_per_root() {
        let ctx = PathContext {
            home: PathBuf::from("/home/u"),
            workspace: PathBuf::from("/ws"),
            writable_roots: vec![PathBuf::from("/ws"), PathBuf::from("/home/u/.cache")],
        };
        let all = globs(".env", &ctx);
        let patterns: Vec<&str> = all.iter().map(Glob::pattern).collect();
        assert_eq!(patterns, ["/ws/**/.env", "/home/u/.cache/**/.env"]);
        assert_eq!(all[0].base(), Path::new("/ws"));
        assert_eq!(all[1].base(), Path::new("/home/u/.cache"));
        assert!(all.iter().all(Glob::crosses_dirs));
        assert!(all[1].is_match(Path::new("/home/u/.cache/pip/.env")));
        assert!(!all[1].is_match(Path::new("/ws/.env")));
    }

    #[test]
    fn relative_pattern_without_roots_expands_to_nothing() {
        let ctx = PathContext {
            writable_roots: Vec::new(),
            ..ctx()
        };
        assert!(expand(".env", &ctx).unwrap().is_empty());
    }

    #[test]
    fn dotenv_globs() {
        let env = glob(".env");
        let env_star = glob(".env.*");
        let matches = |p: &str| env.is_match(Path::new(p)) || env_star.is_match(Path::new(p));
        assert!(matches("/ws/.env"));
        assert!(matches("/ws/a/.env"));
        assert!(matches("/ws/.env.local"));
        assert!(matches("/ws/a/b/.env.local"));
        assert!(!matches("/ws/.envrc"));
        assert!(!matches("/ws/a/.environment"));
        assert!(!matches("/ws/.env/inner"));
        assert!(!matches("/other/.env"));
    }

    #[test]
    fn git_hooks_relative_glob() {
        let g = glob(".git/hooks");
        assert_eq!(g.pattern(), "/ws/**/.git/hooks");
        assert!(g.is_match(Path::new("/ws/.git/hooks")));
        assert!(g.is_match(Path::new("/ws/sub/.git/hooks")));
        assert!(g.is_match(Path::new("/ws/a/b/.git/hooks/")));
        assert!(!g.is_match(Path::new("/ws/.git/hooksx")));
        assert!(!g.is_match(Path::new("/ws/git/hooks")));
    }

    #[test]
    fn relative_pattern_with_dot_prefix() {
        assert_eq!(glob("./.envrc").pattern(), "/ws/**/.envrc");
    }

    #[test]
    fn literal_metacharacters_in_context_are_escaped() {
        let ctx = PathContext {
            home: PathBuf::from("/home/u"),
            workspace: PathBuf::from("/src/[proj]"),
            writable_roots: vec![PathBuf::from("/src/[proj]")],
        };
        let g = globs(".env", &ctx).remove(0);
        assert_eq!(g.pattern(), "/src/[[]proj[]]/**/.env");
        assert_eq!(g.base(), Path::new("/src/[proj]"));
        assert!(g.is_match(Path::new("/src/[proj]/.env")));
        assert!(!g.is_match(Path::new("/src/p/.env")));
    }

    #[test]
    fn is_match_normalizes_input() {
        assert!(glob(".env").is_match(Path::new("/ws/a/./b/../.env")));
    }

    #[test]
    fn glob_equality_compares_patterns() {
        assert_eq!(glob("/a/*"), glob("/a/./*"));
        assert_ne!(glob("/a/*"), glob("/b/*"));
    }

    #[test]
    fn errors() {
        assert_eq!(
            expand_err("$FOO/x"),
            "failed to expand path pattern `$FOO/x`: unknown variable `$FOO`; only `$HOME` \
             and `$WORKSPACE` are expanded"
        );
        assert!(expand_err("${USER}").contains("unknown variable `$USER`"));
        assert!(expand_err("$HOMEX").contains("unknown variable `$HOMEX`"));
        assert!(expand_err("${HOME}x").contains("expected `/` after `$HOME`"));
        assert!(expand_err("${HOME").contains("unterminated"));
        assert!(expand_err("~root/.ssh").contains("`~user` is not supported"));
        assert!(expand_err("").contains("empty"));
        assert!(expand_err("/a\0b").contains("NUL"));
        assert!(expand_err("../x").contains("cannot contain `..`"));
        assert!(expand_err("a/../../x").contains("cannot contain `..`"));
        assert!(expand_err("/a/[b").contains("invalid glob"));
    }

    #[test]
    fn error_code_and_hint() {
        let e = expand("$FOO", &ctx()).unwrap_err();
        assert_eq!(e.code(), "E_POLICY_INVALID");
        assert!(e.hint().unwrap().contains("$WORKSPACE"));
    }

    #[test]
    fn relative_context_dir_is_an_error() {
        let ctx = PathContext {
            home: PathBuf::from("home"),
            ..ctx()
        };
        let e = expand("~/.ssh", &ctx).unwrap_err().to_string();
        assert!(e.contains("`home` is not an absolute path"), "{e}");
    }

    #[test]
    fn normalize() {
        let n = |p: &str| normalize_lexically(Path::new(p));
        assert_eq!(n("/a/./b/../c/"), Path::new("/a/c"));
        assert_eq!(n("/../.."), Path::new("/"));
        assert_eq!(n("/"), Path::new("/"));
        assert_eq!(n("a/b/../.."), Path::new("."));
        assert_eq!(n("../a/../b"), Path::new("../b"));
        assert_eq!(n("./a"), Path::new("a"));
    }

    #[test]
    fn within() {
        let w = |p: &str, r: &str| is_within(Path::new(p), Path::new(r));
        assert!(w("/h/.ssh", "/h/.ssh"));
        assert!(w("/h/.ssh/id_rsa", "/h/.ssh"));
        assert!(w("/h/.ssh/", "/h/.ssh"));
        assert!(!w("/h/.sshfoo", "/h/.ssh"));
        assert!(!w("/h/.ssh-backup/key", "/h/.ssh"));
        assert!(!w("/h", "/h/.ssh"));
        assert!(w("/anything", "/"));
        assert!(!w("/h/.ssh/../x", "/h/.ssh"));
        assert!(w("/h/x/../.ssh/k", "/h/.ssh"));
    }

    #[test]
    fn canonicalize() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let canon_real = canonicalize_existing(&real).unwrap();
        assert_eq!(canonicalize_existing(&link), Some(canon_real));
        assert_eq!(canonicalize_existing(&dir.path().join("missing")), None);
    }

    #[test]
    fn helpers() {
        assert!(has_glob_meta("a*"));
        assert!(has_glob_meta("{a,b}"));
        assert!(!has_glob_meta("/plain/path"));
        assert!(is_relative_pattern(".env"));
        assert!(!is_relative_pattern("/x"));
        assert!(!is_relative_pattern("~/x"));
        assert!(!is_relative_pattern("$HOME"));
        assert!(check_syntax("~/.ssh").is_ok());
        assert!(check_syntax("$NOPE").is_err());
    }

    #[test]
    fn one_level_globs() {
        let glob = |p: &str| match expand(p, &ctx()).unwrap().pop() {
            Some(PathPattern::Glob(g)) => g,
            other => panic!("{other:?}"),
        };
        assert!(glob("~/.env*").is_one_level());
        assert!(glob("/etc/*.conf").is_one_level());
        assert!(!glob("~/*/x").is_one_level());
        assert!(!glob("~/a/**/x").is_one_level());
        assert!(!glob(".env").is_one_level());
        let env = glob("~/.env*");
        for (name, yes) in [
            (".env", true),
            (".envrc", true),
            (".env.*x", true),
            (".en", false),
            ("x.env", false),
        ] {
            assert_eq!(env.matches_name(OsStr::new(name)), yes, "{name}");
            assert_eq!(env.is_match(&env.base().join(name)), yes, "{name}");
        }
        let bracket = glob("~/.env[0-9]");
        assert!(bracket.matches_name(OsStr::new(".env1")));
        assert!(!bracket.matches_name(OsStr::new(".envx")));
    }

    #[test]
    fn default_patterns_all_expand() {
        for pattern in crate::default_deny_read()
            .iter()
            .chain(&crate::default_read_empty())
            .chain(&crate::default_deny_write())
        {
            assert!(!expand(pattern, &ctx()).unwrap().is_empty(), "{pattern}");
        }
    }
}

/// Many globs compiled into one matcher, so a directory walk tests each path once.
///
/// Globs of the common shape `<literal dir>/**/<tail>` whose tail uses only `*` and `?` (every
/// relative pattern, e.g. `.env.*` or `.git/hooks`) are matched component-wise without a regex:
/// compiling a regex set costs milliseconds per run, matching this way microseconds. Other
/// shapes go to one `globset::GlobSet`, built only when there are any.
#[derive(Debug, Clone)]
pub struct GlobList {
    fast: Vec<(usize, FastGlob)>,
    /// Fast globs by their literal last component: a walk looks a file name up once instead of
    /// testing every glob (most names match none).
    by_name: std::collections::HashMap<String, Vec<usize>>,
    /// Fast globs whose last component has wildcards (`.env.*`).
    wild: Vec<usize>,
    slow: Option<(globset::GlobSet, Vec<usize>)>,
}

/// `base/**/c1/c2/..`: a path matches when it lies beneath `base` and its last components
/// match `c1, c2, ..` (each with `*`/`?` wildcards that never cross `/`).
#[derive(Debug, Clone)]
struct FastGlob {
    base: PathBuf,
    tail: Vec<String>,
}

impl FastGlob {
    fn of(g: &Glob) -> Option<FastGlob> {
        let prefix = format!("{}/**/", escaped(&g.base)?);
        let tail = g.pattern.strip_prefix(&prefix)?;
        if tail.is_empty() || tail.contains(['[', ']', '{', '}', '\\']) || tail.contains("**") {
            return None;
        }
        Some(FastGlob {
            base: g.base.clone(),
            tail: tail.split('/').map(str::to_string).collect(),
        })
    }

    fn is_match(&self, path: &Path) -> bool {
        let Ok(rest) = path.strip_prefix(&self.base) else {
            return false;
        };
        let names: Vec<&OsStr> = rest.iter().collect();
        if names.len() < self.tail.len() {
            return false;
        }
        let last = &names[names.len() - self.tail.len()..];
        last.iter()
            .zip(&self.tail)
            .all(|(name, pat)| name.to_str().is_some_and(|n| wildcard_match(pat, n)))
    }
}

/// The glob text for a literal directory, as [`expand`] writes it.
fn escaped(dir: &Path) -> Option<String> {
    let mut out = String::new();
    for c in dir.components() {
        match c {
            std::path::Component::RootDir => {}
            std::path::Component::Normal(n) => {
                out.push('/');
                out.push_str(&globset::escape(n.to_str()?));
            }
            _ => return None,
        }
    }
    Some(out)
}

/// `*` (any run, possibly empty) and `?` (one character) within one path component.
fn wildcard_match(pat: &str, name: &str) -> bool {
    // Bytes, as the glob engine matches (`?` is one byte there too, so a non-ASCII character
    // is not one `?`): the two must agree on every name (the `path_resolution` fuzz target).
    let (p, n) = (pat.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        // A `*` in the pattern is always the wildcard, even against a `*` in the name (taken
        // as a literal match, it would lose the wildcard: `.env.*` would miss `.env.*x`).
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && (p[pi] == b'?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == b'*')
}

impl GlobList {
    /// Compile `globs` (already parsed by [`expand`]) into one matcher; indices follow the
    /// iteration order.
    pub fn new<'a>(globs: impl IntoIterator<Item = &'a Glob>) -> Result<GlobList, PolicyError> {
        let mut fast = Vec::new();
        let mut builder = globset::GlobSetBuilder::new();
        let mut slow_index = Vec::new();
        for (i, g) in globs.into_iter().enumerate() {
            match FastGlob::of(g) {
                Some(f) => fast.push((i, f)),
                None => {
                    builder.add(g.glob.clone());
                    slow_index.push(i);
                }
            }
        }
        let mut by_name: std::collections::HashMap<String, Vec<usize>> = Default::default();
        let mut wild = Vec::new();
        for (k, (_, f)) in fast.iter().enumerate() {
            match f.tail.last() {
                Some(last) if !last.contains(['*', '?']) => {
                    by_name.entry(last.clone()).or_default().push(k)
                }
                _ => wild.push(k),
            }
        }
        let slow = if slow_index.is_empty() {
            None
        } else {
            let set = builder.build().map_err(|e| PolicyError::ExpandPattern {
                pattern: String::new(),
                reason: format!("failed to compile globs: {e}"),
            })?;
            Some((set, slow_index))
        };
        Ok(GlobList {
            fast,
            by_name,
            wild,
            slow,
        })
    }

    /// Fast globs that can match a path with this last component.
    fn fast_candidates<'a>(
        &'a self,
        path: &'a Path,
    ) -> impl Iterator<Item = &'a (usize, FastGlob)> + 'a {
        self.named_candidates(path.file_name().unwrap_or_default())
    }

    /// Fast globs that can match a path whose last component is `name`.
    fn named_candidates<'a>(
        &'a self,
        name: &'a OsStr,
    ) -> impl Iterator<Item = &'a (usize, FastGlob)> + 'a {
        let name = name.to_str().unwrap_or("");
        let named = self.by_name.get(name).map(Vec::as_slice).unwrap_or(&[]);
        let wild = self.wild.iter().filter(move |k| {
            self.fast[**k]
                .1
                .tail
                .last()
                .is_some_and(|pat| wildcard_match(pat, name))
        });
        named.iter().chain(wild).map(|k| &self.fast[*k])
    }

    /// Indices of the globs that match `path` (taken as it is: walk output is already normal),
    /// in ascending order.
    pub fn matches(&self, path: &Path) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .fast_candidates(path)
            .filter(|(_, f)| f.is_match(path))
            .map(|(i, _)| *i)
            .collect();
        if let Some((set, index)) = &self.slow {
            out.extend(
                set.matches(path)
                    .into_iter()
                    .filter_map(|j| index.get(j).copied()),
            );
        }
        out.sort_unstable();
        out
    }

    /// Whether a path whose last component is `name` could match a glob: false rules the
    /// path out without building it (walks ask this of every directory entry).
    pub fn may_match_name(&self, name: &OsStr) -> bool {
        self.slow.is_some() || self.named_candidates(name).next().is_some()
    }

    /// Whether any glob matches `path`.
    pub fn is_match(&self, path: &Path) -> bool {
        self.fast_candidates(path).any(|(_, f)| f.is_match(path))
            || self
                .slow
                .as_ref()
                .is_some_and(|(set, _)| set.is_match(path))
    }
}

#[cfg(test)]
mod glob_list_tests {
    use super::*;

    /// Indices of the globs of `gs` that match `path`, each asked alone (globset): what
    /// [`GlobList::matches`] must give.
    fn one_by_one(gs: &[Glob], path: &Path) -> Vec<usize> {
        gs.iter()
            .enumerate()
            .filter(|(_, g)| g.is_match(path))
            .map(|(i, _)| i)
            .collect()
    }

    fn globs(patterns: &[&str], roots: &[&str]) -> Vec<Glob> {
        let ctx = PathContext {
            home: "/h".into(),
            workspace: roots[0].into(),
            writable_roots: roots.iter().map(PathBuf::from).collect(),
        };
        patterns
            .iter()
            .flat_map(|p| expand(p, &ctx).unwrap())
            .filter_map(|p| match p {
                PathPattern::Glob(g) => Some(g),
                PathPattern::Exact(_) => None,
            })
            .collect()
    }

    #[test]
    fn fast_and_regex_paths_agree_with_each_glob() {
        let gs = globs(
            &[
                ".env",
                ".env.*",
                ".git/hooks",
                "a?c",
                "x*y*z",
                "~/.config/*/token",
                "/etc/[ab]*",
                "$WORKSPACE/**/k[0-9]",
            ],
            &["/ws", "/w s/[x]"],
        );
        let list = GlobList::new(&gs).unwrap();
        assert!(
            list.fast.len() >= 10,
            "relative patterns take the fast path"
        );
        assert!(
            list.slow.is_some(),
            "bracket and mid-path globs take the regex path"
        );
        let paths = [
            "/ws/.env",
            "/ws/a/b/.env",
            "/ws/.envrc",
            "/ws/.env.local",
            "/ws/.env.",
            "/ws/x/.git/hooks",
            "/ws/.git/hooks/pre-commit",
            "/ws/abc",
            "/ws/a/abc",
            "/ws/ac",
            "/ws/xyz",
            "/ws/x1y2z",
            "/w s/[x]/.env",
            "/w s/x/.env",
            "/h/.config/gh/token",
            "/h/.config/a/b/token",
            "/etc/a1",
            "/etc/c1",
            "/ws/q/k7",
            "/wsx/.env",
            "/ws",
            "/",
        ];
        for path in paths {
            let path = Path::new(path);
            let want = one_by_one(&gs, path);
            assert_eq!(list.matches(path), want, "{}", path.display());
            assert_eq!(list.is_match(path), !want.is_empty());
        }
    }

    /// The walks skip entries by name alone: a name ruled out must never belong to a match.
    #[test]
    fn names_ruled_out_never_match() {
        let gs = globs(
            &[".env", ".env.*", ".git/hooks", ".vscode", "x*y*z"],
            &["/ws"],
        );
        let list = GlobList::new(&gs).unwrap();
        assert!(list.slow.is_none());
        let mut matched = 0;
        for path in [
            "/ws/.env",
            "/ws/a/.env.local",
            "/ws/.git/hooks",
            "/ws/b/.vscode",
            "/ws/x1y2z",
            "/ws/src/main.rs",
            "/ws/.envrc",
            "/ws/hooks",
        ] {
            let path = Path::new(path);
            let name = path.file_name().unwrap();
            if !list.matches(path).is_empty() {
                matched += 1;
                assert!(list.may_match_name(name), "{}", path.display());
            }
        }
        assert_eq!(matched, 5, "the paths that should match do");
        for name in ["main.rs", ".envrc", "target", "env"] {
            assert!(!list.may_match_name(OsStr::new(name)), "{name}");
        }
        // With a glob the regex path handles, nothing is ruled out.
        let slow = GlobList::new(&globs(&["/etc/[ab]*"], &["/ws"])).unwrap();
        assert!(slow.may_match_name(OsStr::new("main.rs")));
    }

    #[test]
    fn wildcards_stay_within_one_component() {
        assert!(wildcard_match(".env.*", ".env.local"));
        // A non-ASCII character is more than one `?`, as for the glob engine.
        assert!(!wildcard_match("a?b", "a\u{e9}b"));
        assert!(wildcard_match("a??b", "a\u{e9}b"));
        assert!(wildcard_match(".env.*", ".env."));
        assert!(!wildcard_match(".env.*", ".env"));
        assert!(wildcard_match("a*b*c", "aXbYc"));
        assert!(wildcard_match("a*b*c", "abc"));
        assert!(!wildcard_match("a*b*c", "acb"));
        assert!(!wildcard_match("?", ""));
        assert!(wildcard_match("*", ""));
    }

    /// Found by fuzzing (`path_resolution`): the bulk matcher took `?` for one character,
    /// the glob engine takes it for one byte, so they disagreed on non-ASCII names.
    #[test]
    fn a_question_mark_is_one_byte_for_both_matchers() {
        let gs = globs(&["?m", "???m", "*.pem?"], &["/ws"]);
        let list = GlobList::new(&gs).unwrap();
        for path in [
            "/ws/a/\u{fffd}m",
            "/ws/\u{e9}m",
            "/ws/k.pem\u{e9}",
            "/ws/xm",
        ] {
            let path = Path::new(path);
            assert_eq!(
                list.matches(path),
                one_by_one(&gs, path),
                "{}",
                path.display()
            );
        }
    }

    /// Found by fuzzing (`path_resolution`): a `*` in a file name was taken as matching the
    /// pattern's `*` literally, so the bulk matcher missed `.env.*x` where globset masks it.
    #[test]
    fn a_star_or_question_mark_in_a_name_is_an_ordinary_character() {
        assert!(wildcard_match("*", "*.pem"));
        assert!(wildcard_match(".env.*", ".env.*x"));
        assert!(wildcard_match("*.pem", "a*.pem"));
        assert!(wildcard_match("a?c", "a*c"));
        assert!(!wildcard_match("a*", "b*"));
        let gs = globs(&["*", ".env.*", "*.pem"], &["/ws"]);
        let list = GlobList::new(&gs).unwrap();
        assert!(list.slow.is_none());
        for path in [
            "/ws/a/*.pem",
            "/ws/.env.*x",
            "/ws/b/?",
            "/ws/c/*",
            "/ws/*/.env.*?",
        ] {
            let path = Path::new(path);
            let want = one_by_one(&gs, path);
            assert!(!want.is_empty(), "{}", path.display());
            assert_eq!(list.matches(path), want, "{}", path.display());
        }
    }
}
