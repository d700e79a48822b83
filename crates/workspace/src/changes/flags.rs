//! What in a change set deserves a second look before it reaches the workspace: each
//! [`Flag`] names the rule that raised it. `apply` refuses flagged entries not accepted.

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use policy::{is_within, normalize_lexically, HostExec, HOST_EXEC};

use super::{BaseState, ChangeKind, FileType, Flag, Recorded};

/// Files larger than this are flagged `large` (10 MiB).
pub const DEFAULT_SIZE_THRESHOLD: u64 = 10 << 20;

/// Project files that build and test tools run code from, beyond the catalogue of host-executed
/// configuration (which direct mode keeps read-only): a run may change them (that is what
/// working on a project means), so review names them. Relative patterns, at any depth.
pub const BUILD_FILES: &[(&str, &str)] = &[
    ("build.rs", "cargo compiles and runs it on the next build"),
    (
        "Cargo.toml",
        "names build scripts, proc-macro crates and their sources for the next cargo build",
    ),
    ("Makefile", "make runs its recipes"),
    ("makefile", "make runs its recipes"),
    ("GNUmakefile", "make runs its recipes"),
    ("*.mk", "make includes it and runs its recipes"),
    ("CMakeLists.txt", "cmake runs its commands when configuring"),
    ("*.cmake", "cmake runs its commands when configuring"),
    ("meson.build", "meson runs its commands when configuring"),
    ("configure", "run to configure the build"),
    (
        "setup.py",
        "pip and setuptools run it to build or install the project",
    ),
    (
        "setup.cfg",
        "setuptools reads entry points and build commands from it",
    ),
    (
        "pyproject.toml",
        "names the build backend pip runs to install the project",
    ),
    ("conftest.py", "pytest imports it before the tests"),
    ("noxfile.py", "nox runs it"),
    ("tox.ini", "tox runs its commands"),
    (
        "package.json",
        "npm, yarn and pnpm run its scripts (install, test, build)",
    ),
    (
        "pnpm-workspace.yaml",
        "pnpm reads its packages and settings",
    ),
    ("bunfig.toml", "bun preloads the scripts it names"),
    ("build.gradle", "gradle runs it"),
    ("build.gradle.kts", "gradle runs it"),
    ("settings.gradle", "gradle runs it"),
    ("settings.gradle.kts", "gradle runs it"),
    (
        "gradle.properties",
        "gradle reads JVM arguments and settings from it",
    ),
    (
        "gradlew",
        "the gradle wrapper script run by hand and by IDEs",
    ),
    ("pom.xml", "maven runs its plugins"),
    ("Rakefile", "rake runs it"),
    ("Gemfile", "bundler evaluates it as Ruby"),
    ("justfile", "just runs its recipes"),
    ("Justfile", "just runs its recipes"),
    ("Taskfile.yml", "task runs its commands"),
    ("BUILD", "bazel runs its rules"),
    ("BUILD.bazel", "bazel runs its rules"),
    ("WORKSPACE", "bazel runs its rules"),
    ("MODULE.bazel", "bazel runs its rules"),
    ("*.bzl", "bazel runs it"),
    (
        "go.mod",
        "its toolchain line makes go download and run another toolchain",
    ),
];

/// Files a Python interpreter runs at start-up, or that a shell sources to enter an
/// environment: a planted one runs with every later `python` or `source .venv/bin/activate`.
pub const STARTUP_FILES: &[(&str, &str)] = &[
    (
        "*.pth",
        "Python runs its `import` lines at every start-up (site-packages)",
    ),
    ("sitecustomize.py", "Python imports it at every start-up"),
    ("usercustomize.py", "Python imports it at every start-up"),
    (
        "bin/activate",
        "sourced by the shell to enter the virtualenv",
    ),
    (
        "bin/activate.*",
        "sourced by the shell to enter the virtualenv",
    ),
];

/// The rules flags are raised by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagRules {
    /// Files larger than this many bytes are flagged `large`.
    pub size_threshold: u64,
    /// Absolute paths (the run's protected paths: `RunMeta::protected` is added to these).
    pub protected: Vec<PathBuf>,
    /// Absolute paths (the run's masks: `RunMeta::masked` is added to these).
    pub masked: Vec<PathBuf>,
    /// Project files host tools execute ([`policy::HOST_EXEC`] by default): relative
    /// patterns, matched at any depth.
    pub host_exec: Vec<HostExec>,
}

impl FlagRules {
    /// The default threshold and the whole catalogue, with `protected` and `masked`.
    pub fn new(protected: Vec<PathBuf>, masked: Vec<PathBuf>) -> FlagRules {
        FlagRules {
            size_threshold: DEFAULT_SIZE_THRESHOLD,
            protected,
            masked,
            host_exec: HOST_EXEC.to_vec(),
        }
    }
}

impl Default for FlagRules {
    fn default() -> Self {
        FlagRules::new(Vec::new(), Vec::new())
    }
}

fn flag(code: &'static str, reason: String) -> Flag {
    Flag { code, reason }
}

/// Whether `name` matches `pattern` (`*`: any run of bytes, `?`: one byte).
fn glob_component(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == b'?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Whether the relative `path` is a catalogue entry `pattern`, or lies below one, at any
/// depth.
pub(crate) fn matches_at_any_depth(pattern: &str, path: &Path) -> bool {
    let pat: Vec<&[u8]> = pattern
        .split('/')
        .filter(|c| !c.is_empty())
        .map(str::as_bytes)
        .collect();
    let names: Vec<&[u8]> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.as_bytes()),
            _ => None,
        })
        .collect();
    if pat.is_empty() || pat.len() > names.len() {
        return false;
    }
    (0..=names.len() - pat.len()).any(|i| {
        pat.iter()
            .zip(&names[i..])
            .all(|(p, n)| glob_component(p, n))
    })
}

fn is_executable(mode: Option<u32>) -> bool {
    mode.is_some_and(|m| m & 0o111 != 0)
}

/// Where the link `link` (relative to `workspace`) with `target` points, lexically.
fn link_destination(workspace: &Path, link: &Path, target: &Path) -> PathBuf {
    if target.is_absolute() {
        return normalize_lexically(target);
    }
    let dir = link.parent().unwrap_or(Path::new(""));
    normalize_lexically(&workspace.join(dir).join(target))
}

/// Why the entry makes a file or directory writable by every local user (the bit `apply`
/// would carry into the workspace: any account could then plant what the host runs there),
/// or `None`: not world-writable, or already so in the workspace.
fn world_writable(rec: &Recorded) -> Option<String> {
    let to = rec.mode?;
    if rec.kind == ChangeKind::Deleted
        || !matches!(rec.file_type, FileType::File | FileType::Dir)
        || to & 0o002 == 0
    {
        return None;
    }
    let from = match (&rec.kind, &rec.base.state) {
        (ChangeKind::ModeChanged { from, .. }, _) => Some(*from),
        (_, BaseState::File { mode, .. }) if rec.file_type == FileType::File => Some(*mode),
        (_, BaseState::Dir { mode, .. }) if rec.file_type == FileType::Dir => Some(*mode),
        _ => None,
    };
    if from.is_some_and(|m| m & 0o002 != 0) {
        return None;
    }
    Some(format!(
        "writable by every local user (mode {to:o}): any account could change it later"
    ))
}

/// The flags of one entry.
pub(crate) fn flags_of(
    rec: &Recorded,
    rules: &FlagRules,
    workspace: &Path,
    protected: &[PathBuf],
    masked: &[PathBuf],
) -> Vec<Flag> {
    let mut out = Vec::new();
    let path = &rec.path;
    let absolute = workspace.join(path);
    let deleted = rec.kind == ChangeKind::Deleted;

    if let Some(e) = rules
        .host_exec
        .iter()
        .find(|e| matches_at_any_depth(e.path, path))
    {
        out.push(flag(
            "host-executed",
            format!("{} reads `{}` on the host: {}", e.tool, e.path, e.why),
        ));
    }
    if !deleted && rec.file_type != FileType::Dir {
        if let Some((pattern, why)) = BUILD_FILES
            .iter()
            .find(|(pattern, _)| matches_at_any_depth(pattern, path))
        {
            out.push(flag("build-file", format!("`{pattern}`: {why}")));
        }
        if let Some((pattern, why)) = STARTUP_FILES
            .iter()
            .find(|(pattern, _)| matches_at_any_depth(pattern, path))
        {
            out.push(flag("startup-file", format!("`{pattern}`: {why}")));
        }
    }
    let is_dir_like = deleted || rec.file_type == FileType::Dir;
    if let Some(p) = rules
        .protected
        .iter()
        .chain(protected)
        .find(|p| is_within(&absolute, p) || (is_dir_like && is_within(p, &absolute)))
    {
        let reason = if is_within(&absolute, p) {
            format!("{} is a protected path of the run", p.display())
        } else {
            format!("the protected path {} lies below it", p.display())
        };
        out.push(flag("protected", reason));
    }
    if rec.file_type == FileType::File && !deleted {
        let exec = match rec.kind {
            ChangeKind::ModeChanged { from, to } => (to & 0o111 != 0 && from & 0o111 == 0)
                .then(|| format!("made executable (mode {from:o} → {to:o}): the host may run it")),
            ChangeKind::Added | ChangeKind::TypeChanged => is_executable(rec.mode)
                .then(|| "a new executable file: the host may run it".to_owned()),
            ChangeKind::Modified => is_executable(rec.mode)
                .then(|| "an executable file with new content: the host may run it".to_owned()),
            ChangeKind::Deleted | ChangeKind::ReplacedDir => None,
        };
        if let Some(reason) = exec {
            out.push(flag("executable", reason));
        }
        if rec.script {
            out.push(flag(
                "script",
                "starts with `#!`: a script the host may run".into(),
            ));
        }
        if rec.mode.is_some_and(|m| m & 0o6000 != 0) {
            out.push(flag(
                "setuid",
                format!(
                    "carries the setuid or setgid bit (mode {:o}); apply writes it without",
                    rec.mode.unwrap_or(0)
                ),
            ));
        }
    }
    if let Some(reason) = world_writable(rec) {
        out.push(flag("world-writable", reason));
    }
    if let (false, Some(target)) = (deleted, &rec.symlink_target) {
        out.push(flag(
            "symlink",
            format!(
                "a symbolic link to {}: host tools follow it",
                target.display()
            ),
        ));
        let dest = link_destination(workspace, path, target);
        if !is_within(&dest, workspace) {
            out.push(flag(
                "symlink-outside",
                format!("it points to {}, outside the workspace", dest.display()),
            ));
        }
        if let Some(m) = rules
            .masked
            .iter()
            .chain(masked)
            .find(|m| is_within(&dest, m))
        {
            out.push(flag(
                "symlink-into-masked",
                format!(
                    "it points to {}, inside the masked path {}",
                    dest.display(),
                    m.display()
                ),
            ));
        }
    }
    let git_component = path.components().any(|c| c.as_os_str() == ".git");
    if git_component || rec.in_git_dir {
        let reason = if path.file_name().is_some_and(|n| n == ".git") && !is_dir_like {
            "a `.git` that is not a directory sends host git to another git directory (its hooks and config run)"
        } else {
            "inside a git directory: its hooks and config run code when host git runs here"
        };
        out.push(flag("git-internals", reason.into()));
    }
    if rec.file_type == FileType::File && !deleted && rec.size > rules.size_threshold {
        out.push(flag(
            "large",
            format!(
                "{} bytes, over the review threshold of {} bytes",
                rec.size, rules.size_threshold
            ),
        ));
    }
    if rec.file_type == FileType::Other && !deleted {
        out.push(flag(
            "special-file",
            "a fifo, socket or device node: never applied".into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_patterns_match_at_any_depth_and_below() {
        assert!(matches_at_any_depth(".vscode", Path::new(".vscode")));
        assert!(matches_at_any_depth(
            ".vscode",
            Path::new("a/b/.vscode/tasks.json")
        ));
        assert!(matches_at_any_depth(
            ".cargo/config.toml",
            Path::new("x/.cargo/config.toml")
        ));
        assert!(!matches_at_any_depth(
            ".cargo/config.toml",
            Path::new(".cargo/other")
        ));
        assert!(matches_at_any_depth(
            "lefthook.*",
            Path::new("lefthook.yml")
        ));
        assert!(!matches_at_any_depth("lefthook.*", Path::new("lefthook")));
        assert!(matches_at_any_depth("a?c", Path::new("abc")));
        assert!(!matches_at_any_depth(".vscodex", Path::new(".vscode")));
        assert!(!matches_at_any_depth(".envrc", Path::new("envrc")));
    }

    #[test]
    fn build_and_startup_files_are_named_at_any_depth() {
        let build = |p: &str| {
            BUILD_FILES
                .iter()
                .any(|(pattern, _)| matches_at_any_depth(pattern, Path::new(p)))
        };
        let startup = |p: &str| {
            STARTUP_FILES
                .iter()
                .any(|(pattern, _)| matches_at_any_depth(pattern, Path::new(p)))
        };
        assert!(build("build.rs") && build("crates/x/build.rs") && build("web/package.json"));
        assert!(build("cmake/deps.cmake") && build("sub/Makefile"));
        assert!(!build("src/main.rs") && !build("README.md"));
        assert!(startup(".venv/lib/python3.11/site-packages/evil.pth"));
        assert!(startup(".venv/bin/activate") && startup(".venv/bin/activate.fish"));
        assert!(startup("sitecustomize.py"));
        assert!(!startup("src/path.py") && !startup("bin/tool"));
    }

    fn rec(kind: ChangeKind, file_type: FileType, mode: u32, base: BaseState) -> Recorded {
        Recorded {
            path: PathBuf::from("src/x"),
            kind,
            file_type,
            mode: Some(mode),
            size: 1,
            sha256: None,
            symlink_target: None,
            script: false,
            in_git_dir: false,
            base: super::super::Base {
                state: base,
                changed_during_run: false,
            },
        }
    }

    fn codes(r: &Recorded) -> Vec<&'static str> {
        flags_of(r, &FlagRules::default(), Path::new("/w"), &[], &[])
            .into_iter()
            .map(|f| f.code)
            .collect()
    }

    #[test]
    fn an_entry_made_world_writable_is_flagged() {
        let file = |mode| BaseState::File {
            sha256: "0".repeat(64),
            mode,
        };
        let dir = |mode| BaseState::Dir { mode, tree: None };
        // A new file or directory anyone may write: any local account could plant what the
        // host runs (a directory 0777 takes any file later).
        let added = rec(ChangeKind::Added, FileType::File, 0o666, BaseState::Absent);
        assert_eq!(codes(&added), ["world-writable"]);
        let added_dir = rec(ChangeKind::Added, FileType::Dir, 0o777, BaseState::Absent);
        assert_eq!(codes(&added_dir), ["world-writable"]);
        let chmod_dir = rec(
            ChangeKind::ModeChanged {
                from: 0o755,
                to: 0o1777,
            },
            FileType::Dir,
            0o1777,
            dir(0o755),
        );
        assert_eq!(codes(&chmod_dir), ["world-writable"]);
        // New content and a new mode at once: the mode is still a change.
        let modified = rec(ChangeKind::Modified, FileType::File, 0o646, file(0o644));
        assert_eq!(codes(&modified), ["world-writable"]);
        // Controls: already world-writable in the workspace, or not world-writable.
        let kept = rec(ChangeKind::Modified, FileType::File, 0o666, file(0o666));
        assert!(codes(&kept).is_empty());
        let plain = rec(ChangeKind::Added, FileType::File, 0o664, BaseState::Absent);
        assert!(codes(&plain).is_empty());
        let gone = Recorded {
            mode: None,
            ..rec(ChangeKind::Deleted, FileType::File, 0, file(0o666))
        };
        assert!(codes(&gone).is_empty());
    }

    #[test]
    fn link_destinations_are_resolved_from_the_links_directory() {
        let ws = Path::new("/w");
        assert_eq!(
            link_destination(ws, Path::new("a/l"), Path::new("../../x")),
            PathBuf::from("/x")
        );
        assert_eq!(
            link_destination(ws, Path::new("a/l"), Path::new("b")),
            PathBuf::from("/w/a/b")
        );
        assert_eq!(
            link_destination(ws, Path::new("l"), Path::new("/etc/passwd")),
            PathBuf::from("/etc/passwd")
        );
    }
}
