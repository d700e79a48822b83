//! What in a change set deserves a second look before it reaches the workspace: each
//! [`Flag`] names the rule that raised it. `apply` refuses flagged entries not accepted.
//!
//! An allow-list: an entry goes unflagged only when a reviewer can judge it from `stockade
//! diff`. That is a deletion, a directory, or a regular file that is text `diff` shows as it
//! is ([`super::Content::Text`]), without an execute, set-id bit or `#!` line, not over
//! [`DEFAULT_SIZE_THRESHOLD`], replacing no file `diff` cannot show; and in no place the host
//! runs code from: the catalogue ([`policy::HOST_EXEC`], [`policy::host_exec::HOST_RUN`]:
//! build files, start-up files, tools' configurations, bytecode, caches and installed
//! packages), the run's protected paths, a git directory. The catalogue's names and `.git`
//! match whatever their case (`MAKEFILE`, `dockerfile`, `.ENVRC`, `.GIT`): tools read case
//! variants, and a case-insensitive filesystem takes any case for the same file. Links and
//! special files are always flagged. Every other entry carries at least one flag saying why (the last resort
//! is `not-plain`).

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use policy::host_exec::{HostRun, HOST_RUN};
use policy::{is_within, normalize_lexically, HostExec, HOST_EXEC};

use super::{BaseState, ChangeKind, Content, FileType, Flag, GuardRule, Recorded};

/// Files larger than this are flagged `large`: `MAX_DIFF_BYTES` (8 MiB),
/// past which `stockade diff` names a file without showing it.
pub const DEFAULT_SIZE_THRESHOLD: u64 = super::diff::MAX_DIFF_BYTES;

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
    /// Project files host tools run code from that direct mode leaves writable
    /// ([`HOST_RUN`] by default).
    pub host_run: Vec<HostRun>,
    /// Creation-guard patterns (`RunMeta::guard` is added to these).
    pub guard: Vec<GuardRule>,
}

impl FlagRules {
    /// The default threshold and the whole catalogue, with `protected` and `masked`.
    pub fn new(protected: Vec<PathBuf>, masked: Vec<PathBuf>) -> FlagRules {
        FlagRules {
            size_threshold: DEFAULT_SIZE_THRESHOLD,
            protected,
            masked,
            host_exec: HOST_EXEC.to_vec(),
            host_run: HOST_RUN.to_vec(),
            guard: Vec::new(),
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

/// A name as the catalogue compares it: case folded. The catalogue's names are matched
/// whatever their case: tools read case variants themselves (make reads `makefile` and
/// `GNUmakefile`, compose `compose.yaml` and `docker-compose.yml`), and on a case-insensitive
/// filesystem (a directory from macOS, NTFS or FAT, an ext4 `casefold` directory) any case
/// names the same file. Flagging more never applies less. A UTF-8 name is folded a character
/// at a time through upper then lower case, so the characters such filesystems fold onto
/// ASCII letters (`ſ`, `ı`, the Kelvin sign) match too; another name is folded as ASCII.
fn fold(name: &[u8]) -> Vec<u8> {
    match std::str::from_utf8(name) {
        Ok(s) if !s.is_ascii() => s
            .chars()
            .flat_map(char::to_uppercase)
            .flat_map(char::to_lowercase)
            .collect::<String>()
            .into_bytes(),
        _ => name.to_ascii_lowercase(),
    }
}

/// Whether `name` (folded: [`fold`]) matches `pattern` (`*`: any run of bytes, `?`: one
/// byte; its ASCII letters in any case).
fn glob_component(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == b'?' || c.to_ascii_lowercase() == name[n] => {
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

/// The names of the relative `path`, folded ([`fold`]): what [`matches_folded`] takes, made
/// once per entry.
fn folded_names(path: &Path) -> Vec<Vec<u8>> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(fold(n.as_bytes())),
            _ => None,
        })
        .collect()
}

/// Whether the relative `path` is a catalogue entry `pattern`, or lies below one, at any
/// depth, whatever the case of either ([`fold`]).
#[cfg(test)]
pub(crate) fn matches_at_any_depth(pattern: &str, path: &Path) -> bool {
    matches_folded(pattern, &folded_names(path))
}

/// Whether a path (its [`folded_names`]) is the catalogue entry `pattern`, or lies below one,
/// at any depth, whatever the case of either.
fn matches_folded(pattern: &str, names: &[Vec<u8>]) -> bool {
    let pat: Vec<std::borrow::Cow<'_, [u8]>> = pattern
        .split('/')
        .filter(|c| !c.is_empty())
        .map(|c| match c.is_ascii() {
            true => std::borrow::Cow::Borrowed(c.as_bytes()),
            false => std::borrow::Cow::Owned(fold(c.as_bytes())),
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

/// The first creation-guard pattern that refuses `rec` at `absolute`, with why: the same
/// predicate the init applies (`protect::pattern_refuses`), for the entry's kind.
fn guard_refusal(guard: &[GuardRule], absolute: &Path, rec: &Recorded) -> Option<String> {
    let what = match rec.file_type {
        FileType::Dir => protect::Create::Dir,
        FileType::File => protect::Create::File,
        FileType::Symlink => protect::Create::Symlink,
        FileType::Other => protect::Create::Node,
    };
    let path = absolute.as_os_str().as_bytes();
    let mut tail: Vec<&[u8]> = Vec::new();
    for g in guard {
        tail.clear();
        tail.extend(g.tail.iter().map(|t| t.as_bytes()));
        let pattern = protect::Protected {
            base: g.base.as_os_str().as_bytes(),
            tail: &tail,
        };
        if let Some(reason) = protect::pattern_refuses(&pattern, path, what) {
            let shown = if g.tail.is_empty() {
                g.base.display().to_string()
            } else {
                format!("{}/**/{}", g.base.display(), g.tail.join("/"))
            };
            return Some(format!(
                "{} (`{shown}`): a direct run's creation guard refuses it",
                reason.describe()
            ));
        }
    }
    None
}

/// The flags of one entry.
pub(crate) fn flags_of(
    rec: &Recorded,
    rules: &FlagRules,
    workspace: &Path,
    protected: &[PathBuf],
    masked: &[PathBuf],
    guard: &[GuardRule],
) -> Vec<Flag> {
    let mut out = Vec::new();
    let path = &rec.path;
    let absolute = workspace.join(path);
    let deleted = rec.kind == ChangeKind::Deleted;
    let names = folded_names(path);

    host_flags(rules, &names, deleted, &mut out);
    let is_dir_like = deleted || rec.file_type == FileType::Dir;
    protected_flags(
        rec,
        rules,
        &absolute,
        is_dir_like,
        protected,
        guard,
        &mut out,
    );
    if rec.file_type == FileType::File && !deleted {
        runnable_flags(rec, &mut out);
    }
    if rec.file_type == FileType::File && !deleted {
        content_flags(rec, &mut out);
    }
    directory_flags(rec, rules, &absolute, masked, &mut out);
    if let (false, Some(why)) = (deleted, unshown_name(path)) {
        out.push(flag("unshown-name", why));
    }
    if let Some(reason) = world_writable(rec) {
        out.push(flag("world-writable", reason));
    }
    if let (false, Some(target)) = (deleted, &rec.symlink_target) {
        symlink_flags(rules, workspace, path, target, masked, &mut out);
    }
    git_flags(rec, is_dir_like, &mut out);
    let limit = rules.size_threshold.min(super::diff::MAX_DIFF_BYTES);
    size_and_kind_flags(rec, limit, &mut out);
    // The allow-list's last word: what is not plain is flagged, if nothing above said why.
    if out.is_empty() && !is_plain(rec, limit) {
        out.push(flag(
            "not-plain",
            format!(
                "a {} that is not plain text `stockade diff` shows: the host may run or load it",
                rec.file_type
            ),
        ));
    }
    out
}

/// `host-executed` and `host-run`: a path a host tool reads or runs.
fn host_flags(rules: &FlagRules, names: &[Vec<u8>], deleted: bool, out: &mut Vec<Flag>) {
    if let Some(e) = rules
        .host_exec
        .iter()
        .find(|e| matches_folded(e.path, names))
    {
        out.push(flag(
            "host-executed",
            format!("{} reads `{}` on the host: {}", e.tool, e.path, e.why),
        ));
    }
    if !deleted {
        if let Some(e) = rules
            .host_run
            .iter()
            .find(|e| matches_folded(e.path, names))
        {
            out.push(flag(e.kind.code(), format!("`{}`: {}", e.path, e.why)));
        }
    }
}

/// `protected`: a protected path of the run at, below or above it, or a creation the guard
/// refuses.
fn protected_flags(
    rec: &Recorded,
    rules: &FlagRules,
    absolute: &Path,
    is_dir_like: bool,
    protected: &[PathBuf],
    guard: &[GuardRule],
    out: &mut Vec<Flag>,
) {
    let deleted = rec.kind == ChangeKind::Deleted;
    if let Some(p) = rules
        .protected
        .iter()
        .chain(protected)
        .find(|p| is_within(absolute, p) || (is_dir_like && is_within(p, absolute)))
    {
        let reason = if is_within(absolute, p) {
            format!("{} is a protected path of the run", p.display())
        } else {
            format!("the protected path {} lies below it", p.display())
        };
        out.push(flag("protected", reason));
    } else if deleted {
        // A removal creates nothing: the guard never saw one.
    } else if let Some(reason) =
        guard_refusal(&rules.guard, absolute, rec).or_else(|| guard_refusal(guard, absolute, rec))
    {
        out.push(flag("protected", reason));
    }
}

/// `executable`, `script` and `setuid` of a regular file that is not deleted.
fn runnable_flags(rec: &Recorded, out: &mut Vec<Flag>) {
    let exec = match rec.kind {
        ChangeKind::ModeChanged { from, to } if from & 0o111 == 0 => (to & 0o111 != 0)
            .then(|| format!("made executable (mode {from:o} → {to:o}): the host may run it")),
        ChangeKind::ModeChanged { from, to } => (to & 0o111 != 0).then(|| {
            format!(
                "an executable file whose mode changes ({from:o} → {to:o}): the host may run it"
            )
        }),
        ChangeKind::Added | ChangeKind::TypeChanged => {
            is_executable(rec.mode).then(|| "a new executable file: the host may run it".to_owned())
        }
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

/// `opens-masked` and `setuid` of a directory.
fn directory_flags(
    rec: &Recorded,
    rules: &FlagRules,
    absolute: &Path,
    masked: &[PathBuf],
    out: &mut Vec<Flag>,
) {
    let deleted = rec.kind == ChangeKind::Deleted;
    // A directory opened to group or others (read or search) above a masked path: the
    // sandbox was not shown what lies there, and after the apply every local account may be.
    if let (ChangeKind::ModeChanged { from, to }, FileType::Dir) = (rec.kind, rec.file_type) {
        if to & !from & 0o055 != 0 {
            if let Some(m) = rules
                .masked
                .iter()
                .chain(masked)
                .find(|m| is_within(m, absolute))
            {
                out.push(flag(
                    "opens-masked",
                    format!(
                        "opens the directory to other users (mode {from:o} → {to:o}) while the masked path {} lies below it: they could read what the run was not shown",
                        m.display()
                    ),
                ));
            }
        }
    }
    // A directory's setgid bit is not flagged: the run cannot set one (the sandbox refuses
    // the chmod), so it is inherited (a directory made in a setgid one) or the host's own;
    // apply keeps it only where the host gives it (never adds it).
    if rec.file_type == FileType::Dir && !deleted && rec.mode.is_some_and(|m| m & 0o4000 != 0) {
        out.push(flag(
            "setuid",
            format!(
                "a directory carrying the setuid bit (mode {:o}); apply makes it without",
                rec.mode.unwrap_or(0)
            ),
        ));
    }
}

/// `symlink`, `symlink-outside` and `symlink-into-masked` of a symbolic link that is not
/// deleted.
fn symlink_flags(
    rules: &FlagRules,
    workspace: &Path,
    path: &Path,
    target: &Path,
    masked: &[PathBuf],
    out: &mut Vec<Flag>,
) {
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

/// `git-internals`: a `.git` of any case in its path, or inside a git directory.
fn git_flags(rec: &Recorded, is_dir_like: bool, out: &mut Vec<Flag>) {
    let path = &rec.path;
    // Any case: `.GIT` is the git directory on a case-insensitive filesystem.
    let git_component = path
        .components()
        .any(|c| fold(c.as_os_str().as_bytes()) == b".git");
    if git_component || rec.in_git_dir {
        let reason = if path
            .file_name()
            .is_some_and(|n| fold(n.as_bytes()) == b".git")
            && !is_dir_like
        {
            "a `.git` that is not a directory sends host git to another git directory (its hooks and config run)"
        } else {
            "inside a git directory: its hooks and config run code when host git runs here"
        };
        out.push(flag("git-internals", reason.into()));
    }
}

/// `large`, `hard-link` and `special-file`: what `stockade diff` does not show, or apply
/// does not write as it is.
fn size_and_kind_flags(rec: &Recorded, limit: u64, out: &mut Vec<Flag>) {
    let deleted = rec.kind == ChangeKind::Deleted;
    if rec.file_type == FileType::File
        && !deleted
        && (rec.size > limit || rec.content == Some(Content::Large))
    {
        out.push(flag(
            "large",
            format!(
                "{} bytes, over the review threshold of {limit} bytes (`stockade diff` names it without showing it)",
                rec.size
            ),
        ));
    }
    if rec.file_type == FileType::File && !deleted && rec.hard_links > 1 {
        out.push(flag(
            "hard-link",
            format!(
                "one of {} names of one file (hard links): applied as {} copies",
                rec.hard_links, rec.hard_links
            ),
        ));
    }
    if rec.file_type == FileType::Other && !deleted {
        out.push(flag(
            "special-file",
            "a fifo, socket or device node: never applied".into(),
        ));
    }
}

/// The allow-list: a deletion, a directory, or a regular file of text `stockade diff` shows
/// as it is, without an execute or set-id bit or a `#!` line, at most `limit` bytes. (Where
/// it lies is checked by the path rules.)
pub(crate) fn is_plain(rec: &Recorded, limit: u64) -> bool {
    match (rec.kind, rec.file_type) {
        (ChangeKind::Deleted, _) | (_, FileType::Dir) => true,
        (_, FileType::File) => {
            rec.content == Some(Content::Text)
                && !matches!(
                    rec.base_content,
                    Some(Content::Binary { .. } | Content::Large)
                )
                && !rec.script
                && rec.mode.is_some_and(|m| m & 0o6111 == 0)
                && rec.size <= limit
        }
        (_, FileType::Symlink | FileType::Other) => false,
    }
}

/// Why the listing cannot show `path` as it is, if it cannot: not UTF-8, or holding a control
/// character or one the terminal sanitizer strips (a name that looks like another).
fn unshown_name(path: &Path) -> Option<String> {
    let Some(text) = path.to_str() else {
        return Some(
            "its name is not UTF-8: the listing shows it with replacement characters".into(),
        );
    };
    let c = text
        .chars()
        .find(|&c| c.is_control() || sanitize::classify(c).is_some())?;
    Some(format!(
        "its name holds U+{:04X}, which the listing does not show as it is: it may pass for another name",
        c as u32
    ))
}

/// The flags of a file's content: what `stockade diff` cannot show of it, or of the file it
/// replaces.
fn content_flags(rec: &Recorded, out: &mut Vec<Flag>) {
    match &rec.content {
        Some(Content::Text | Content::Large) => {}
        Some(Content::Binary { why }) => out.push(flag(
            "binary",
            format!("not text ({why}): `stockade diff` names it without showing it, and the host may load or run it"),
        )),
        Some(Content::Hidden { why }) => out.push(flag(
            "hidden-text",
            format!("holds what a reader of `stockade diff` does not see: {why}"),
        )),
        None => out.push(flag(
            "unchecked",
            "recorded by an older stockade, which did not check whether `stockade diff` shows it".into(),
        )),
    }
    let why = match &rec.base_content {
        Some(Content::Binary { why }) => why.clone(),
        Some(Content::Large) => "over the size `stockade diff` shows".into(),
        _ => return,
    };
    out.push(flag(
        "replaces-binary",
        format!(
            "the workspace's version is not text ({why}): `stockade diff` cannot show what changes"
        ),
    ));
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

    /// The flag codes a text file at `path` gets (added, mode 644).
    fn path_codes(path: &str) -> Vec<&'static str> {
        let r = Recorded {
            path: PathBuf::from(path),
            ..rec(ChangeKind::Added, FileType::File, 0o644, BaseState::Absent)
        };
        codes(&r)
    }

    /// Each path of `flagged` gets `code` (and a control path of `plain` none): one family
    /// of the catalogue.
    fn family(name: &str, code: &str, flagged: &[&str], plain: &[&str]) {
        assert!(
            HOST_RUN.iter().any(|e| e.family == name),
            "no family {name}"
        );
        for p in flagged {
            assert!(path_codes(p).contains(&code), "{p}: {:?}", path_codes(p));
        }
        for p in plain {
            assert!(path_codes(p).is_empty(), "{p}: {:?}", path_codes(p));
        }
    }

    /// The families the tests below cover: every family of the catalogue has its test.
    const TESTED: &[&str] = &[
        "rust",
        "make",
        "tasks",
        "bazel",
        "python",
        "python-startup",
        "python-loaded",
        "javascript",
        "javascript-config",
        "ruby",
        "go",
        "jvm",
        "other-builds",
        "containers",
        "nix",
        "infra",
        "vcs",
        "editors",
        "environment",
        "tools",
    ];

    /// The catalogue matches names whatever their case (tools read variants; a
    /// case-insensitive filesystem takes any case for the same file), and the characters
    /// such filesystems fold onto ASCII letters. Controls: other names stay plain.
    #[test]
    fn catalogue_names_are_flagged_in_any_case() {
        for (p, code) in [
            ("MAKEFILE", "build-file"),
            ("makefile", "build-file"),
            ("gnumakefile", "build-file"),
            ("sub/GNUMakefile", "build-file"),
            ("dockerfile", "build-file"),
            ("DOCKERFILE", "build-file"),
            ("Docker-Compose.YML", "build-file"),
            ("vagrantfile", "build-file"),
            ("RAKEFILE", "build-file"),
            ("gemfile", "build-file"),
            ("BUILD.RS", "build-file"),
            ("x/.CARGO/CONFIG.TOML", "host-executed"),
            ("a/.VSCODE/tasks.json", "host-executed"),
            // The Kelvin sign folds to `k`, the dotless i to `i`, the long s to `s`.
            ("Ma\u{212A}efile", "build-file"),
            ("Dockerf\u{131}le", "build-file"),
            ("\u{17F}Con\u{17F}truct", "build-file"),
        ] {
            let got = path_codes(p);
            assert!(got.contains(&code), "{p}: {got:?}");
        }
        let envrc = path_codes(".ENVRC");
        assert!(envrc.contains(&"host-executed"), "{envrc:?}");
        assert!(path_codes(".GIT/hooks/pre-commit").contains(&"git-internals"));
        assert!(path_codes(".Git/config").contains(&"git-internals"));
        // Controls: not catalogue names in any case.
        for p in [
            "MAKEFILE.md",
            "docs/makefiles.txt",
            "src/dockerfile_notes.txt",
            "ENVRC",
        ] {
            assert!(path_codes(p).is_empty(), "{p}: {:?}", path_codes(p));
        }
    }

    #[test]
    fn a_name_the_listing_cannot_show_is_flagged() {
        assert_eq!(path_codes("src/a\u{200B}.py"), ["unshown-name"]);
        assert_eq!(path_codes("notes\u{202E}txt.exe"), ["unshown-name"]);
        assert_eq!(path_codes("a\nb"), ["unshown-name"]);
        let bad = Recorded {
            path: PathBuf::from(std::ffi::OsStr::from_bytes(b"caf\xe9")),
            ..rec(ChangeKind::Added, FileType::File, 0o644, BaseState::Absent)
        };
        assert_eq!(codes(&bad), ["unshown-name"]);
        // Controls: names in any script, shown as they are.
        assert!(path_codes("docs/café/naïve.md").is_empty());
        assert!(path_codes("文档/说明.txt").is_empty());
    }

    #[test]
    fn every_family_has_its_test() {
        for e in HOST_RUN {
            assert!(
                TESTED.contains(&e.family),
                "family {} has no test",
                e.family
            );
        }
    }

    #[test]
    fn family_rust() {
        family(
            "rust",
            "build-file",
            &["build.rs", "crates/x/build.rs", "Cargo.toml"],
            &["src/main.rs", "src/build.rs.md"],
        );
    }

    #[test]
    fn family_make() {
        family(
            "make",
            "build-file",
            &[
                "Makefile",
                "sub/GNUmakefile",
                "cmake/deps.cmake",
                "rules.mk",
                "CMakeLists.txt",
                "meson.build",
                "configure.ac",
                "Makefile.am",
                "SConstruct",
                "conanfile.py",
                "CMakePresets.json",
            ],
            &["docs/make.md", "src/cmake.c"],
        );
    }

    #[test]
    fn family_tasks() {
        family(
            "tasks",
            "build-file",
            &[
                "justfile",
                "Justfile",
                "Taskfile.yml",
                "Earthfile",
                "Procfile",
                "Procfile.dev",
                "Tiltfile",
                "ecosystem.config.js",
                "Brewfile",
            ],
            &["docs/procfile-notes.txt"],
        );
    }

    #[test]
    fn family_bazel() {
        family(
            "bazel",
            "build-file",
            &[
                "BUILD",
                "pkg/BUILD.bazel",
                "WORKSPACE",
                "MODULE.bazel",
                "defs.bzl",
                "tools/bazel",
            ],
            &["src/build.txt"],
        );
        family(
            "bazel",
            "tool-config",
            &[".bazelversion", ".buckconfig"],
            &[],
        );
    }

    #[test]
    fn family_python() {
        family(
            "python",
            "build-file",
            &[
                "setup.py",
                "setup.cfg",
                "pyproject.toml",
                "tests/conftest.py",
                "tox.ini",
                "noxfile.py",
            ],
            &["src/app.py", "tests/test_x.py"],
        );
        family(
            "python",
            "tool-config",
            &["pytest.ini", "uv.toml", ".python-version", ".pdm-python"],
            &[],
        );
    }

    #[test]
    fn family_python_startup() {
        family(
            "python-startup",
            "startup-file",
            &[
                "x.pth",
                "sitecustomize.py",
                "usercustomize.py",
                "env/pyvenv.cfg",
                "env/bin/activate",
                "env/bin/activate.fish",
                ".pdbrc",
                ".pythonrc",
            ],
            &["src/path.py", "bin/tool.txt"],
        );
    }

    #[test]
    fn family_python_loaded() {
        family(
            "python-loaded",
            "host-loaded",
            &[
                "src/__pycache__/app.cpython-312.pyc",
                "app.pyc",
                "app.pyo",
                "lib/python3.12/site-packages/evil.py",
                "x/dist-packages/y.py",
                "pkg.dist-info/entry_points.txt",
                "pkg.egg-info/entry_points.txt",
                ".venv/lib/x.py",
                ".tox/py312/lib/x.py",
                ".nox/s/x.py",
            ],
            &["src/pycache.py", "src/packages/x.py"],
        );
    }

    #[test]
    fn family_javascript() {
        family(
            "javascript",
            "build-file",
            &[
                "package.json",
                "web/package.json",
                "pnpm-workspace.yaml",
                "deno.json",
                "gulpfile.js",
                "Gruntfile.js",
            ],
            &["src/index.js", "package.md"],
        );
        family(
            "javascript",
            "host-loaded",
            &[
                "node_modules/x/index.js",
                "web/node_modules/.cache/babel/x.json",
                "node_modules/.bin/tool",
            ],
            &["src/modules/x.js"],
        );
        family("javascript", "tool-config", &["bunfig.toml"], &[]);
    }

    #[test]
    fn family_javascript_config() {
        family(
            "javascript-config",
            "tool-config",
            &[
                ".eslintrc",
                ".eslintrc.js",
                "eslint.config.mjs",
                ".prettierrc",
                ".prettierrc.js",
                "prettier.config.cjs",
                "babel.config.js",
                ".babelrc",
                "vite.config.ts",
                "webpack.config.js",
                "jest.config.js",
                "tailwind.config.js",
                ".mocharc.yml",
                ".lintstagedrc.json",
                "app/next.config.mjs",
            ],
            &["src/config.js", "src/eslint.md"],
        );
    }

    #[test]
    fn family_ruby() {
        family(
            "ruby",
            "build-file",
            &[
                "Gemfile",
                "x.gemspec",
                "Rakefile",
                "lib/tasks/db.rake",
                "config.ru",
                "Guardfile",
            ],
            &["lib/app.rb", "Gemfile.lock"],
        );
        family(
            "ruby",
            "tool-config",
            &[".rubocop.yml", ".bundle/config"],
            &[],
        );
        family("ruby", "startup-file", &[".irbrc", ".pryrc"], &[]);
        family(
            "ruby",
            "host-loaded",
            &["vendor/bundle/ruby/3.2/gems/x/lib/x.rb"],
            &["vendor/x.rb"],
        );
    }

    #[test]
    fn family_go() {
        family(
            "go",
            "build-file",
            &["go.mod", "go.work", "sub/go.mod"],
            &["main.go", "go.sum"],
        );
        family(
            "go",
            "tool-config",
            &[".golangci.yml", ".golangci.toml"],
            &[],
        );
    }

    #[test]
    fn family_jvm() {
        family(
            "jvm",
            "build-file",
            &[
                "build.gradle",
                "app/build.gradle.kts",
                "settings.gradle",
                "deps.gradle",
                "gradlew",
                "pom.xml",
                "mvnw",
                "build.sbt",
                "project/plugins.sbt",
                "project/Deps.scala",
                "build.xml",
            ],
            &["src/main/java/App.java", "src/project.scala"],
        );
        family(
            "jvm",
            "tool-config",
            &[
                "gradle.properties",
                "gradle/wrapper/gradle-wrapper.properties",
                ".jvmopts",
                ".sbtopts",
            ],
            &[],
        );
        family(
            "jvm",
            "host-loaded",
            &["out/App.class", "lib/x.jar", ".gradle/8.5/x.bin"],
            &[],
        );
    }

    #[test]
    fn family_other_builds() {
        family(
            "other-builds",
            "build-file",
            &[
                "mix.exs",
                "rebar.config",
                "Package.swift",
                "build.zig",
                "build.zig.zon",
                "Setup.hs",
                "x.cabal",
                "cabal.project",
                "stack.yaml",
                "src/dune",
                "dune-project",
                "Makefile.PL",
                "composer.json",
                "App.csproj",
                "Directory.Build.props",
            ],
            &["lib/app.ex", "Sources/main.swift", "src/main.zig"],
        );
        family("other-builds", "startup-file", &[".iex.exs"], &[]);
    }

    #[test]
    fn family_containers() {
        family(
            "containers",
            "build-file",
            &[
                "Dockerfile",
                "docker/Dockerfile.dev",
                "api.Dockerfile",
                "Containerfile",
                "docker-compose.yml",
                "docker-compose.prod.yaml",
                "compose.yaml",
                "compose.override.yml",
                "docker-bake.hcl",
            ],
            &["docs/docker.md", "src/compose.rs"],
        );
    }

    #[test]
    fn family_nix() {
        family(
            "nix",
            "build-file",
            &["flake.nix", "shell.nix", "default.nix", "nix/pkgs.nix"],
            &["src/nix.rs"],
        );
        family("nix", "tool-config", &["flake.lock"], &[]);
    }

    #[test]
    fn family_infra() {
        family(
            "infra",
            "build-file",
            &["Vagrantfile", "main.tf", "infra/modules/x/vars.tf"],
            &["docs/tf.md"],
        );
        family(
            "infra",
            "tool-config",
            &[".terraform.lock.hcl", ".terraformrc", "terraform.rc"],
            &[],
        );
        family("infra", "host-loaded", &[".terraform/providers/x/y"], &[]);
    }

    #[test]
    fn family_vcs() {
        family(
            "vcs",
            "tool-config",
            &[
                ".gitattributes",
                "sub/.gitattributes",
                ".gitmodules",
                ".lfsconfig",
            ],
            &[".gitignore-notes.md"],
        );
        family(
            "vcs",
            "host-loaded",
            &[".hg/hgrc", "sub/.jj/repo/config.toml"],
            &["src/hg.rs"],
        );
    }

    /// The second round of the catalogue (tools found auto-loading files by a search of their
    /// documentation), family by family.
    /// Names host tools also run that the first rounds missed (red team of issue 30):
    /// other spellings of catalogued build files and loaders.
    #[test]
    fn families_red_team() {
        family(
            "make",
            "build-file",
            &["Sconstruct", "sconstruct", "SConstruct.py", "sconstruct.py"],
            &["src/sconstruct.md"],
        );
        family(
            "tasks",
            "build-file",
            &[
                "JUSTFILE",
                "taskfile.yml",
                "taskfile.dist.yaml",
                "fabfile.py",
                "dodo.py",
            ],
            &["docs/taskfile.md"],
        );
        family("python", "build-file", &["Pipfile"], &["Pipfile.lock"]);
        family("python", "tool-config", &[".flaskenv"], &[]);
        family(
            "javascript",
            "build-file",
            &["Gruntfile.coffee", "Gruntfile.ts", "gruntfile.js"],
            &[],
        );
        family(
            "javascript",
            "host-loaded",
            &[".pnp.cjs", ".pnp.loader.mjs"],
            &["src/pnp.js"],
        );
        family(
            "javascript-config",
            "tool-config",
            &[
                ".commitlintrc.js",
                ".commitlintrc.json",
                ".huskyrc",
                ".huskyrc.js",
                ".storybook/main.js",
            ],
            &["src/storybook.js"],
        );
        family(
            "ruby",
            "build-file",
            &[
                "gems.rb",
                "Rakefile.rb",
                "rakefile.rb",
                "Thorfile",
                "Dangerfile",
                "Podfile",
                "Berksfile",
                "fastlane/Fastfile",
            ],
            &["gems.locked", "lib/gems.rb.md"],
        );
        family("ruby", "startup-file", &[".simplecov", ".rvmrc"], &[]);
        family(
            "containers",
            "build-file",
            &["dockerfile", "docker/dockerfile"],
            &["docs/dockerfile-notes.md"],
        );
        family("infra", "build-file", &["vagrantfile"], &[]);
        family(
            "editors",
            "startup-file",
            &[".vimrc", "_vimrc", ".gvimrc", "_exrc", ".lazy.lua"],
            &["vimrc.txt"],
        );
    }

    #[test]
    fn families_second_round() {
        family(
            "python",
            "tool-config",
            &[
                "mypy.ini",
                ".pylintrc",
                "pylintrc",
                ".flake8",
                ".coveragerc",
            ],
            &[],
        );
        family(
            "python",
            "build-file",
            &["hatch.toml", "docs/conf.py", "pkg/doc/conf.py"],
            &["src/conf.py"],
        );
        family(
            "tasks",
            "build-file",
            &[
                "Makefile.toml",
                "nodemon.json",
                "terragrunt.hcl",
                "Pulumi.yaml",
            ],
            &[],
        );
        family(
            "tasks",
            "tool-config",
            &["ansible.cfg"],
            &["ansible/roles/x.yml"],
        );
        family("ruby", "tool-config", &[".rspec"], &[]);
        family(
            "other-builds",
            "build-file",
            &[
                "project.clj",
                "deps.edn",
                "build.boot",
                "bb.edn",
                "build.sc",
                "config.nims",
                "x.nims",
                "x.nimble",
                "shard.yml",
                "dub.json",
                "dub.sdl",
            ],
            &["src/core.clj", "src/x.nim"],
        );
        family(
            "other-builds",
            "tool-config",
            &[
                "nuget.config",
                ".formatter.exs",
                ".credo.exs",
                ".php-cs-fixer.php",
                ".php-cs-fixer.dist.php",
                "phpunit.xml",
                "phpunit.xml.dist",
                "phpstan.neon",
            ],
            &["src/App.php"],
        );
        family(
            "editors",
            "tool-config",
            &[".dir-locals-2.el", ".lvimrc"],
            &[],
        );
        family(
            "environment",
            "startup-file",
            &[".autoenv.zsh", ".autoenv_leave.zsh"],
            &[],
        );
        family(
            "tools",
            "startup-file",
            &[".Rprofile", "renv/activate.R", ".ghci", ".ocamlinit"],
            &["R/analysis.R"],
        );
        family("tools", "tool-config", &[".Renviron"], &[]);
    }

    #[test]
    fn family_editors() {
        family(
            "editors",
            "tool-config",
            &["proj.code-workspace", ".fleet/run.json"],
            &["src/workspace.rs"],
        );
    }

    #[test]
    fn family_environment() {
        family(
            "environment",
            "tool-config",
            &[".env", "app/.env.local", ".env.production"],
            &["src/env.rs", "env.example"],
        );
        family(
            "environment",
            "host-loaded",
            &[".direnv/python-3.12/bin/x"],
            &[],
        );
    }

    #[test]
    fn family_tools() {
        family(
            "tools",
            "startup-file",
            &[".gdbinit", ".lldbinit", ".psqlrc", ".sqliterc"],
            &["src/gdb.c"],
        );
        family("tools", "tool-config", &[".inputrc", ".ripgreprc"], &[]);
    }

    fn rec(kind: ChangeKind, file_type: FileType, mode: u32, base: BaseState) -> Recorded {
        super::super::tests::recorded("src/x", kind, file_type, mode, base)
    }

    fn codes(r: &Recorded) -> Vec<&'static str> {
        flags_of(r, &FlagRules::default(), Path::new("/w"), &[], &[], &[])
            .into_iter()
            .map(|f| f.code)
            .collect()
    }

    /// r09: a directory opened to others above a masked path. Controls: nothing masked
    /// below, a masked path elsewhere, a mode change that opens nothing to others.
    #[test]
    fn a_directory_opened_above_a_masked_path_is_flagged() {
        let chmod = |from: u32, to: u32| Recorded {
            path: PathBuf::from("private"),
            ..rec(
                ChangeKind::ModeChanged { from, to },
                FileType::Dir,
                to,
                BaseState::Dir {
                    mode: from,
                    tree: None,
                },
            )
        };
        let with = |r: &Recorded, masked: &[&str]| -> Vec<&'static str> {
            let masked: Vec<PathBuf> = masked.iter().map(PathBuf::from).collect();
            flags_of(r, &FlagRules::default(), Path::new("/w"), &[], &masked, &[])
                .into_iter()
                .map(|f| f.code)
                .collect()
        };
        assert_eq!(
            with(&chmod(0o700, 0o755), &["/w/private/.env"]),
            ["opens-masked"]
        );
        assert_eq!(
            with(&chmod(0o700, 0o711), &["/w/private/a/b"]),
            ["opens-masked"]
        );
        assert!(with(&chmod(0o700, 0o755), &[]).is_empty());
        assert!(with(&chmod(0o700, 0o755), &["/w/other/.env"]).is_empty());
        assert!(with(&chmod(0o755, 0o700), &["/w/private/.env"]).is_empty());
        assert!(with(&chmod(0o750, 0o770), &["/w/private/.env"]).is_empty());
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

    /// Issue 32, item 2: what the creation guard refuses is flagged `protected` from the
    /// run's guard patterns (recorded in `RunMeta::guard`), with the same predicate: an
    /// entry at or below a pattern, a symlink that begins one. Controls: an entry beside
    /// them, a deletion, a directory that only begins one (an empty one cannot complete it).
    #[test]
    fn what_the_creation_guard_refuses_is_flagged_protected() {
        let guard = [
            GuardRule {
                base: PathBuf::from("/w"),
                tail: vec!["secrets.toml".into()],
            },
            GuardRule {
                base: PathBuf::from("/w/deploy/run.sh"),
                tail: vec![],
            },
            GuardRule {
                base: PathBuf::from("/w"),
                tail: vec![".config".into(), "fish".into()],
            },
        ];
        let at = |path: &str, kind: ChangeKind, ft: FileType| {
            let r = super::super::tests::recorded(path, kind, ft, 0o644, BaseState::Absent);
            let flags = flags_of(&r, &FlagRules::default(), Path::new("/w"), &[], &[], &guard);
            flags
                .into_iter()
                .filter(|f| f.code == "protected")
                .map(|f| f.reason)
                .collect::<Vec<_>>()
        };
        let added = ChangeKind::Added;
        for (path, ft) in [
            ("secrets.toml", FileType::File),
            ("a/b/secrets.toml", FileType::File),
            ("a/secrets.toml", FileType::Dir),
            ("a/secrets.toml/x", FileType::File),
            ("deploy/run.sh", FileType::File),
            (".config/fish", FileType::Dir),
            ("x/.config/fish/config.fish", FileType::File),
            (".config", FileType::Symlink),
            ("deploy", FileType::Symlink),
        ] {
            let why = at(path, added, ft);
            assert_eq!(why.len(), 1, "{path}: {why:?}");
            assert!(why[0].contains("creation guard"), "{path}: {why:?}");
        }
        assert!(at(".config", added, FileType::Symlink)[0].contains(".config/fish"));
        // Controls.
        for (path, kind, ft) in [
            ("secrets.toml.txt", added, FileType::File),
            ("deploy/other.sh", added, FileType::File),
            (".config", added, FileType::Dir),
            (".config/nvim/init.lua", added, FileType::File),
            ("secrets.toml", ChangeKind::Deleted, FileType::File),
        ] {
            assert!(at(path, kind, ft).is_empty(), "{path}");
        }
        // The rules' own patterns count as the record's do.
        let rules = FlagRules {
            guard: guard.to_vec(),
            ..FlagRules::default()
        };
        let r = super::super::tests::recorded(
            "secrets.toml",
            added,
            FileType::File,
            0o644,
            BaseState::Absent,
        );
        assert!(flags_of(&r, &rules, Path::new("/w"), &[], &[], &[])
            .iter()
            .any(|f| f.code == "protected"));
    }
}
