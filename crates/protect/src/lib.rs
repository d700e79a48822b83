//! Which new directory entries the sandbox may create inside its writable roots: the rules the
//! native init applies, during the run, to every name-creating syscall it performs for the
//! command (`sys::mediate`), and the one definition of git's rules ([`git`]: what a git dir
//! is, which of its names run code; [`git_config`]: which config keys are inert) that the
//! workspace scan and the sweep after a run use too. Policy, so not in `sys` (which never
//! decides it); pure, so the init may call it after `fork`.
//!
//! Pure and allocation-free (the init runs them after `fork`): paths are byte strings, absolute
//! and normal (no `.`, `..`, `//` or trailing `/`), as the init reads them back from the kernel.
//!
//! A protected pattern is `base/**/t1/t2/..` (each `ti` one path component with `*` and `?`
//! wildcards; an empty tail means `base` itself). Against a path `P` below `base` it can:
//! - **match**: the last components of `P` match the tail (`P` is a protected path);
//! - **cover**: an ancestor of `P` matches (`P` lies inside a protected path);
//! - **begin**: the last components of `P` match a proper prefix of the tail (`P` could become
//!   part of a protected path once children are added, e.g. `.git` for `.git/hooks`).
//!
//! Git needs more than patterns: hooks run from `<gitdir>/hooks`, config is read from
//! `<gitdir>/config`, `<gitdir>/commondir` redirects to another git dir, and a `.git` that is
//! not a directory (a `gitdir:` file or a symlink) sends git anywhere. A *git dir* here is a
//! directory named `.git`, or one below `.git/modules/` (a submodule's) that is not inside its
//! `refs`, `logs`, `objects`, `info` or `hooks` (so a branch named `config` or `hooks/x` is
//! an ordinary file).
//!
//! What `git init` needs, and therefore what is allowed in a git dir: `hooks` as a directory
//! (holding only `*.sample` files, which git never runs), and `config` written through a
//! rename whose content is [inert](git_config_is_inert).

#![forbid(unsafe_code)]

/// A protected pattern: `base/**/tail...` (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct Protected<'a> {
    pub base: &'a [u8],
    pub tail: &'a [&'a [u8]],
}

/// The rules of one run.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    /// Writable roots: only paths below them are checked (elsewhere is read-only or private).
    pub roots: &'a [&'a [u8]],
    pub protected: &'a [Protected<'a>],
    /// Existing git configs that are read-only during the run, each with the slot of the
    /// descriptor the init opened for writing before making it so: a checked rename onto one
    /// rewrites it through that descriptor (a rename onto a mount point fails with `EBUSY`).
    pub held: &'a [Held<'a>],
    /// `protected` looked up by name ([`PatternIndex`]).
    pub index: PatternIndex<'a>,
    /// A review run's workspace (empty: none). Its writes land in a change set that is
    /// reviewed before anything reaches the host, so git's built-in rules (hooks, configs,
    /// `.git` redirects, worktree files) do not apply below it: git works whole there (linked
    /// worktrees, submodules) and the review flags what it wrote. `protected` still applies.
    pub reviewed: &'a [u8],
}

/// Whether git's built-in rules apply at `path`: not inside a reviewed workspace.
fn git_rules_apply(rules: &Rules<'_>, path: &[u8]) -> bool {
    rules.reviewed.is_empty() || !is_within(path, rules.reviewed)
}

/// The protected patterns by the first component of their tail, made before the run (it
/// allocates) with [`PatternIndex::build`]: a pattern can only relate to a path that has a
/// component matching that first one, so a creation needs to look only at the patterns whose
/// literal first component is one of the path's components, plus those whose first one has a
/// wildcard (or whose tail is empty). It was a fifth of the init's time for every mediated
/// call to try all of them (about 80 patterns against each path). An index that does not
/// list every pattern exactly once by count (one built for other rules, or none) is not
/// used: every pattern is tried, so a wrong index can only cost time, never a protection.
#[derive(Debug, Clone, Copy)]
pub struct PatternIndex<'a> {
    /// (first component, index into `protected`), sorted by the component's length, then its
    /// bytes (`by_length_then_bytes`): most of a path's components differ in length from
    /// every key, and a lookup then compares lengths, not bytes.
    pub by_first: &'a [(&'a [u8], u32)],
    /// Indexes of the patterns that are always tried.
    pub always: &'a [u32],
}

/// What [`PatternIndex`] borrows, as built.
pub type PatternIndexParts<'a> = (Vec<(&'a [u8], u32)>, Vec<u32>);

impl<'a> PatternIndex<'a> {
    /// The parts for `protected` (borrow them with [`PatternIndex::of`]).
    pub fn build(protected: &[Protected<'a>]) -> PatternIndexParts<'a> {
        let mut by_first = Vec::new();
        let mut always = Vec::new();
        for (i, p) in protected.iter().enumerate() {
            match p.tail.first() {
                Some(first) if !has_wildcard(first) => by_first.push((*first, i as u32)),
                _ => always.push(i as u32),
            }
        }
        by_first.sort_unstable_by(|a, b| by_length_then_bytes(a.0, b.0).then(a.1.cmp(&b.1)));
        (by_first, always)
    }

    pub fn of(parts: &'a PatternIndexParts<'a>) -> Self {
        PatternIndex {
            by_first: &parts.0,
            always: &parts.1,
        }
    }
}

/// The order of [`PatternIndex::by_first`].
fn by_length_then_bytes(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn has_wildcard(component: &[u8]) -> bool {
    component.iter().any(|b| *b == b'*' || *b == b'?')
}

/// Every pattern of `rules` that could relate to `path` (some more than once), by the index;
/// every pattern when the index does not cover them (see [`PatternIndex`]).
fn candidates<'r>(
    rules: &'r Rules<'_>,
    path: &'r [u8],
) -> impl Iterator<Item = &'r Protected<'r>> + 'r {
    let index = rules.index;
    let covered = index.by_first.len() + index.always.len() == rules.protected.len();
    let (by_first, always, all) = if covered {
        (index.by_first, index.always, 0)
    } else {
        (&[][..], &[][..], rules.protected.len() as u32)
    };
    let by_name = components(path).flat_map(move |c| {
        let from = by_first.partition_point(|(f, _)| by_length_then_bytes(f, c).is_lt());
        by_first[from..]
            .iter()
            .take_while(move |(f, _)| *f == c)
            .map(|(_, i)| *i)
    });
    (0..all)
        .chain(always.iter().copied())
        .chain(by_name)
        .filter_map(|i| rules.protected.get(i as usize))
}

/// An existing, read-only git config the init can rewrite (see [`Rules::held`]).
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    pub path: &'a [u8],
    pub slot: usize,
}

/// What a syscall is about to create at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// `mkdir`.
    Dir,
    /// A regular file (`open` with `O_CREAT`, `creat`, `mknod S_IFREG`).
    File,
    /// A FIFO or socket node.
    Node,
    Symlink,
    /// A hard link to an existing file.
    Link,
    /// A rename of a non-directory, non-symlink.
    MoveFile,
    MoveDir,
    MoveSymlink,
}

/// The answer for one creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Refuse with `EPERM`; the reason says which rule.
    Deny(Reason),
    /// A git config: allowed only as a fresh, read-only copy of inert content.
    InertConfig,
    /// A git config created by `open(O_CREAT)` (libgit2 creates it empty first, then writes
    /// it by renaming a lock file): allowed only empty and read-only, through a descriptor
    /// that cannot write.
    EmptyConfig,
    /// Git's lock of one of its code files (`config.lock`, `config.worktree.lock`,
    /// `commondir.lock`) in a git dir, made by `open(O_CREAT)`: git on the host renames
    /// whatever file has that name over the code file, so the name is made as a placeholder
    /// holding the code file's current content, and the caller writes to a file of its own
    /// that no name points at; the caller's rename of the lock over the code file takes the
    /// content from that file (and judges it as [`Verdict::InertConfig`] does). Made any other
    /// way (a rename, a link, a symlink, a node, a directory), the lock is refused.
    CodeLock,
}

/// Why a creation was refused. Stable numbers (they cross the report pipe).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The path matches or lies inside a protected pattern.
    ProtectedPath = 1,
    /// A directory or symlink would start a protected path (`mv dir .git`, `ln -s x .config`).
    BeginsProtectedPath = 2,
    /// A `.git` that is not a directory (redirects git to another git dir).
    GitRedirect = 3,
    /// A non-`*.sample` entry in a git hooks directory.
    GitHook = 4,
    /// A git dir's `config` other than by an inert rename, or a `commondir`.
    GitConfig = 5,
    /// `chmod` of a protected file, a hard link to one, or opening one for writing.
    ProtectedFile = 6,
    /// `HEAD`, `objects`, `refs` or `commondir` would make a directory that already holds a
    /// live config or hooks a git dir (a repository assembled config-first).
    PlantedGitDir = 7,
    /// A set-user-ID or set-group-ID bit: the file would run with its owner's rights on the
    /// host (root's, for a root caller's workspace) for anyone who executes it.
    SetId = 8,
}

impl Reason {
    pub fn from_u32(v: u32) -> Option<Reason> {
        use Reason::*;
        [
            ProtectedPath,
            BeginsProtectedPath,
            GitRedirect,
            GitHook,
            GitConfig,
            ProtectedFile,
            PlantedGitDir,
            SetId,
        ]
        .into_iter()
        .find(|r| *r as u32 == v)
    }

    /// What allows what the rule refused, when no policy line does (`None`: a protected path
    /// of the catalogue, which `unprotect` can drop).
    pub fn allow(self) -> Option<&'static str> {
        match self {
            Reason::ProtectedPath | Reason::BeginsProtectedPath | Reason::ProtectedFile => None,
            Reason::SetId => Some(
                "nothing in the policy allows set-ID bits in a run: read the file, then set them on the host (`chmod u+s FILE`)",
            ),
            Reason::GitConfig => Some(
                "nothing in the policy allows it: set that key on the host (`git config KEY VALUE` outside the sandbox)",
            ),
            Reason::GitHook | Reason::GitRedirect | Reason::PlantedGitDir => Some(
                "nothing in the policy allows it: git's hooks, redirects and the configs of new git dirs are made on the host",
            ),
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Reason::ProtectedPath => "protected path",
            Reason::BeginsProtectedPath => "would assemble a protected path",
            Reason::GitRedirect => "a .git that is not a directory redirects git",
            Reason::GitHook => "only *.sample files may be created in a git hooks directory",
            Reason::GitConfig => "git config may only gain, change or lose keys that run nothing (user.*, remote.*.url/fetch, branch.*.remote/merge, ...); set other keys from outside the sandbox",
            Reason::ProtectedFile => "protected file",
            Reason::SetId => "set-user-ID and set-group-ID bits are refused: the file would run with its owner's rights on the host for anyone who executes it",
            Reason::PlantedGitDir => "would make a directory holding a git config that runs code (or a hooks entry that is not a directory) a git dir; assemble a repository with `git init` (its config keys that run code are set from outside the sandbox)",
        }
    }
}

/// Components of an absolute normal path, without the empty first one.
fn components(path: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> + Clone {
    path.split(|b| *b == b'/').filter(|c| !c.is_empty())
}

/// `path` is `root` or lies below it.
pub fn is_within(path: &[u8], root: &[u8]) -> bool {
    let root = match root {
        [rest @ .., b'/'] => rest,
        r => r,
    };
    path.starts_with(root) && (path.len() == root.len() || path[root.len()] == b'/')
}

/// `*` (any run) and `?` (one character) within one component. Works on UTF-8 characters when
/// both sides are UTF-8, else on bytes.
pub fn wildcard_match(pat: &[u8], name: &[u8]) -> bool {
    // Most pattern components are literal (`.git`, `.cargo`): a byte comparison says it all.
    if !has_wildcard(pat) {
        return pat == name;
    }
    // Bytes give the characters' answer when no `?` could meet a character of several bytes:
    // a literal character of the pattern is a whole UTF-8 sequence, which cannot match in the
    // middle of one of the name's (a lead byte is never a continuation byte). Most names are
    // ASCII, and checking UTF-8 was most of the time of a match.
    if !pat.contains(&b'?') || name.is_ascii() {
        return match_units(pat.iter().copied(), name.iter().copied(), b'*', b'?');
    }
    if let (Ok(p), Ok(n)) = (std::str::from_utf8(pat), std::str::from_utf8(name)) {
        return match_units(p.chars(), n.chars(), '*', '?');
    }
    match_units(pat.iter().copied(), name.iter().copied(), b'*', b'?')
}

fn match_units<T: PartialEq + Copy, I: Iterator<Item = T> + Clone>(
    pat: I,
    name: I,
    star: T,
    one: T,
) -> bool {
    // Iterative glob matching with one backtrack point (the last `*`).
    let (mut p, mut n) = (pat, name);
    let mut back: Option<(I, I)> = None;
    loop {
        let mut p_peek = p.clone();
        match n.clone().next() {
            None => return p.all(|c| c == star),
            Some(nc) => match p_peek.next() {
                Some(pc) if pc == star => {
                    back = Some((p_peek.clone(), n.clone()));
                    p = p_peek;
                }
                Some(pc) if pc == one || pc == nc => {
                    p = p_peek;
                    n.next();
                }
                _ => match back.take() {
                    Some((bp, mut bn)) => {
                        bn.next();
                        back = Some((bp.clone(), bn.clone()));
                        p = bp;
                        n = bn;
                    }
                    None => return false,
                },
            },
        }
    }
}

/// How a pattern relates to `path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relation {
    None,
    Begins,
    Covers,
    Matches,
}

fn relation(p: &Protected<'_>, path: &[u8]) -> Relation {
    if !is_within(path, p.base) {
        // An exact path (`~/.config/systemd/user`) begins at each of its ancestors: a
        // directory renamed or a symlink made there (`~/.config/systemd`) would bring it along.
        return if p.tail.is_empty() && is_within(p.base, path) {
            Relation::Begins
        } else {
            Relation::None
        };
    }
    let rest = &path[p.base.len().min(path.len())..];
    if p.tail.is_empty() {
        return if rest.is_empty() || rest == b"/" {
            Relation::Matches
        } else {
            Relation::Covers
        };
    }
    let names = components(rest);
    // Every relation needs a component matching the tail's first one (where a match, a cover
    // or a beginning starts): one pass rules out most patterns for most paths.
    let Some(first) = p.tail.first() else {
        return Relation::None;
    };
    if !names.clone().any(|c| wildcard_match(first, c)) {
        return Relation::None;
    }
    let count = names.clone().count();
    let n = p.tail.len();
    // Does the tail match the `n` components ending at index `end` (exclusive)?
    let tail_ends_at = |end: usize, len: usize| -> bool {
        end >= len
            && names
                .clone()
                .skip(end - len)
                .take(len)
                .zip(p.tail.iter())
                .all(|(c, t)| wildcard_match(t, c))
    };
    if tail_ends_at(count, n) {
        return Relation::Matches;
    }
    if (n..count).any(|end| tail_ends_at(end, n)) {
        return Relation::Covers;
    }
    if (1..n).any(|k| tail_ends_at(count, k)) {
        return Relation::Begins;
    }
    Relation::None
}

/// Split an absolute normal path into its parent's components and its last name.
fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|b| *b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (b"", path),
    }
}

/// Whether `path` lies in a writable root (only there are creations checked).
fn in_roots(rules: &Rules<'_>, path: &[u8]) -> bool {
    rules.roots.iter().any(|r| is_within(path, r))
}

/// What the caller saw on disk: whether the parent and the grandparent of the path look like
/// git dirs by content (a `HEAD` and an `objects` directory: a bare repository, or a git dir
/// reached under another name). Names alone cannot tell `b/hooks` of a bare repository `b`
/// from any `hooks` directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GitHint {
    pub parent_is_gitdir: bool,
    pub grand_is_gitdir: bool,
    /// Creating `HEAD`, `objects`, `refs` or `commondir` would give the parent what git looks
    /// for in a git dir (`HEAD` and one of the others) while it holds a `config` that is not
    /// inert (or cannot be read as one) or a `hooks` that is not a directory.
    pub parent_holds_code: bool,
}

/// Whether [`decide`] or [`is_protected_file`] would use a [`GitHint`] for `path`, so the
/// caller only looks at the disk when it matters.
pub fn wants_hint(path: &[u8]) -> bool {
    let (parent, name) = split(path);
    let (_, parent_name) = split(parent);
    matches!(
        name,
        b"hooks" | b"config" | b"config.worktree" | b"commondir"
    ) || parent_name == b"hooks"
        || completes_git_dir(name)
        || is_code_lock(name)
}

/// Git's lock file of one of its code files (`config.lock`, `config.worktree.lock`,
/// `commondir.lock`): what `git config` writes and then renames over the file.
fn is_code_lock(name: &[u8]) -> bool {
    CODE_LOCKS.contains(&name)
}

/// Git's locks of its code files (`config`, `config.worktree`, `commondir`): the names of
/// `is_code_lock`, for a caller that looks for them on the disk.
pub const CODE_LOCKS: [&[u8]; 3] = [b"config.lock", b"config.worktree.lock", b"commondir.lock"];

/// The rule for creating `what` at `path` (absolute, normal).
pub fn decide(rules: &Rules<'_>, path: &[u8], what: Create, hint: GitHint) -> Verdict {
    if !in_roots(rules, path) {
        return Verdict::Allow;
    }
    let (parent, name) = split(path);
    if git_rules_apply(rules, path) {
        if let Some(v) = decide_git(parent, name, path, what, hint) {
            return v;
        }
    }
    let mut begins = false;
    for p in candidates(rules, path) {
        match relation(p, path) {
            Relation::Matches | Relation::Covers => return Verdict::Deny(Reason::ProtectedPath),
            Relation::Begins => begins = true,
            Relation::None => {}
        }
    }
    // A directory or symlink whose name starts a protected path could complete it at once
    // (its content comes along); an empty new directory cannot.
    if begins
        && matches!(
            what,
            Create::MoveDir | Create::Symlink | Create::MoveSymlink
        )
    {
        return Verdict::Deny(Reason::BeginsProtectedPath);
    }
    Verdict::Allow
}

/// Git's built-in rules for creating `what` at `path` (`parent`/`name`): a verdict, or `None`
/// when they say nothing and the protected patterns decide.
fn decide_git(
    parent: &[u8],
    name: &[u8],
    path: &[u8],
    what: Create,
    hint: GitHint,
) -> Option<Verdict> {
    let dirlike = matches!(what, Create::Dir | Create::MoveDir);
    // Git first: its exceptions take precedence over the generic patterns.
    if name == b".git" && !dirlike {
        return Some(Verdict::Deny(Reason::GitRedirect));
    }
    if name == b".git" && what == Create::MoveDir {
        // A whole directory renamed into place would bring hooks and config with it.
        return Some(Verdict::Deny(Reason::BeginsProtectedPath));
    }
    if what == Create::MoveDir && is_git_dir(components(path)) {
        // A directory renamed to become a git dir (`.git/modules/<name>`) brings its hooks.
        return Some(Verdict::Deny(Reason::BeginsProtectedPath));
    }
    if hint.parent_holds_code && completes_git_dir(name) {
        // Git would accept the directory as a git dir, with a config or hooks that were not
        // checked as such when they were made.
        return Some(Verdict::Deny(Reason::PlantedGitDir));
    }
    if hint.parent_is_gitdir || is_git_dir(components(parent)) {
        match name {
            b"hooks" if what == Create::Dir => return Some(Verdict::Allow),
            b"hooks" => return Some(Verdict::Deny(Reason::GitHook)),
            b"config" | b"config.worktree" => {
                return Some(match what {
                    Create::MoveFile => Verdict::InertConfig,
                    Create::File => Verdict::EmptyConfig,
                    _ => Verdict::Deny(Reason::GitConfig),
                })
            }
            b"commondir" => return Some(Verdict::Deny(Reason::GitConfig)),
            // Whatever has a lock's name when git on the host commits its change becomes the
            // code file (red team, issue 32 sixth round, second pass: the run's own file
            // renamed or exchanged onto the host's `config.lock`, or made after unlinking it).
            _ if is_code_lock(name) => {
                return Some(match what {
                    Create::File => Verdict::CodeLock,
                    _ => Verdict::Deny(Reason::GitConfig),
                })
            }
            _ => {}
        }
        if what == Create::MoveDir {
            // git never renames directories into a git dir; doing so could bring in `hooks`.
            return Some(Verdict::Deny(Reason::BeginsProtectedPath));
        }
    }
    let (grand, parent_name) = split(parent);
    if parent_name == b"hooks" && (hint.grand_is_gitdir || is_git_dir(components(grand))) {
        let sample = name.ends_with(b".sample");
        return Some(
            if sample && matches!(what, Create::File | Create::MoveFile) {
                Verdict::Allow
            } else {
                Verdict::Deny(Reason::GitHook)
            },
        );
    }
    None
}

/// Whether `path` is what the one pattern `p` names: its tail ends the path (`base/**/tail`),
/// or, for an exact path (no tail), the path is `base` or below it. The sweep's test of a
/// pattern the scan resolved through a directory link (`workspace`'s `DenyGlobs::via_links`).
pub fn pattern_matches(p: &Protected<'_>, path: &[u8]) -> bool {
    match relation(p, path) {
        Relation::Matches => true,
        Relation::Covers => p.tail.is_empty(),
        Relation::Begins | Relation::None => false,
    }
}

/// Whether the one pattern `p` refuses creating `what` at `path` (the patterns' part of
/// [`decide`]: no roots, no git rules): how a review run's change set is flagged for what the
/// creation guard would have refused, had the run's creations been mediated.
pub fn pattern_refuses(p: &Protected<'_>, path: &[u8], what: Create) -> Option<Reason> {
    match relation(p, path) {
        Relation::Matches | Relation::Covers => Some(Reason::ProtectedPath),
        Relation::Begins
            if matches!(
                what,
                Create::MoveDir | Create::Symlink | Create::MoveSymlink
            ) =>
        {
            Some(Reason::BeginsProtectedPath)
        }
        _ => None,
    }
}

/// Whether an existing file at `path` is protected (no `chmod`, no hard links to it, no
/// opening it for writing).
pub fn is_protected_file(rules: &Rules<'_>, path: &[u8], hint: GitHint) -> bool {
    protected_file_reason(rules, path, hint).is_some()
}

/// [`is_protected_file`], with the rule that protects the file: git's own files
/// ([`Reason::GitConfig`] for `config`, `config.worktree` and `commondir`, [`Reason::GitHook`]
/// for the hooks), else [`Reason::ProtectedFile`] (a protected path of the catalogue or the
/// policy), so that a refusal names the rule and its way out.
pub fn protected_file_reason(rules: &Rules<'_>, path: &[u8], hint: GitHint) -> Option<Reason> {
    if !in_roots(rules, path) {
        return None;
    }
    let (parent, name) = split(path);
    let git = git_rules_apply(rules, path);
    if git && (hint.parent_is_gitdir || is_git_dir(components(parent))) {
        match name {
            b"config" | b"config.worktree" | b"commondir" => return Some(Reason::GitConfig),
            b"hooks" => return Some(Reason::GitHook),
            _ => {}
        }
    }
    let (grand, parent_name) = split(parent);
    if git && parent_name == b"hooks" && (hint.grand_is_gitdir || is_git_dir(components(grand))) {
        return (!name.ends_with(b".sample")).then_some(Reason::GitHook);
    }
    candidates(rules, path)
        .any(|p| matches!(relation(p, path), Relation::Matches | Relation::Covers))
        .then_some(Reason::ProtectedFile)
}

/// [`protected_file_reason`] for opening an existing file for writing (or `truncate`): also
/// git's lock files of its code files in a git dir ([`Reason::GitConfig`]). Git makes the
/// lock (`O_CREAT|O_EXCL`), writes it through the descriptor that made it and renames it over
/// the file, so the run's own git never opens an existing one; a descriptor the run opened on
/// a lock that git on the host made would be one on the new config once git renames it (red
/// team, issue 32 sixth round). Not for `chmod`: git gives its lock the old file's mode.
pub fn protected_for_writing(rules: &Rules<'_>, path: &[u8], hint: GitHint) -> Option<Reason> {
    if let Some(reason) = protected_file_reason(rules, path, hint) {
        return Some(reason);
    }
    let (parent, name) = split(path);
    (in_roots(rules, path)
        && is_code_lock(name)
        && git_rules_apply(rules, path)
        && (hint.parent_is_gitdir || is_git_dir(components(parent))))
    .then_some(Reason::GitConfig)
}

pub mod git;

pub use git::completes_git_dir;
use git::is_git_dir;
pub mod git_config;

pub use git_config::{git_config_is_inert, git_config_rewrite_is_inert};

pub mod git_state;

#[cfg(test)]
mod tests {
    use super::*;

    const HOOKS: &[&[u8]] = &[b".git", b"hooks"];
    const CONFIG: &[&[u8]] = &[b".git", b"config"];
    const ENVRC: &[&[u8]] = &[b".envrc"];
    const FISH: &[&[u8]] = &[b".config", b"fish"];
    const ENVS: &[&[u8]] = &[b".env.*"];
    const PROTECTED: &[Protected<'static>] = &[
        Protected {
            base: b"/ws",
            tail: HOOKS,
        },
        Protected {
            base: b"/ws",
            tail: CONFIG,
        },
        Protected {
            base: b"/ws",
            tail: ENVRC,
        },
        Protected {
            base: b"/ws",
            tail: FISH,
        },
        Protected {
            base: b"/ws",
            tail: ENVS,
        },
        Protected {
            base: b"/ws/secret.txt",
            tail: &[],
        },
        Protected {
            base: b"/ws/home/.config/systemd/user",
            tail: &[],
        },
    ];
    static INDEX: std::sync::LazyLock<PatternIndexParts<'static>> =
        std::sync::LazyLock::new(|| PatternIndex::build(PROTECTED));

    /// The rules of the tests, with the index a run builds.
    fn rules() -> Rules<'static> {
        Rules {
            held: &[],
            reviewed: &[],
            roots: &[b"/ws"],
            protected: PROTECTED,
            index: PatternIndex::of(&INDEX),
        }
    }

    /// The same without the index: every pattern tried.
    fn rules_unindexed() -> Rules<'static> {
        const ALL: &[u32] = &[0, 1, 2, 3, 4, 5, 6];
        assert_eq!(ALL.len(), PROTECTED.len());
        Rules {
            index: PatternIndex {
                by_first: &[],
                always: ALL,
            },
            ..rules()
        }
    }

    /// An index that does not cover the rules' patterns (none, or one built for other rules) is
    /// not trusted: every pattern is tried, and `.envrc` stays protected.
    /// A review run's workspace: git's own rules give way (its writes are reviewed before
    /// they reach the host), the protected patterns do not; outside it both apply.
    #[test]
    fn git_rules_give_way_inside_a_reviewed_workspace_and_patterns_do_not() {
        let reviewed = Rules {
            reviewed: b"/ws",
            ..rules()
        };
        let none = GitHint::default();
        let in_gitdir = GitHint {
            parent_is_gitdir: true,
            ..none
        };
        for (path, what, hint) in [
            (&b"/ws/wt/.git"[..], Create::File, none),
            (b"/ws/.git/worktrees/wt/commondir", Create::File, in_gitdir),
            (b"/ws/.git/modules/sub/hooks/pre-commit", Create::File, none),
            (b"/ws/.git/modules/sub/config", Create::MoveFile, none),
        ] {
            assert!(
                matches!(
                    decide(&rules(), path, what, hint),
                    Verdict::Deny(_) | Verdict::InertConfig
                ),
                "control: {}",
                String::from_utf8_lossy(path)
            );
            assert_eq!(
                decide(&reviewed, path, what, hint),
                Verdict::Allow,
                "{}",
                String::from_utf8_lossy(path)
            );
        }
        assert_eq!(
            decide(&reviewed, b"/ws/.envrc", Create::File, none),
            Verdict::Deny(Reason::ProtectedPath)
        );
        let module_config = b"/ws/.git/modules/sub/config";
        assert!(is_protected_file(&rules(), module_config, none));
        assert!(!is_protected_file(&reviewed, module_config, none));
        assert!(is_protected_file(&reviewed, b"/ws/sub/.git/config", none));
        let elsewhere = Rules {
            reviewed: b"/other",
            ..rules()
        };
        assert_eq!(
            decide(&elsewhere, b"/ws/wt/.git", Create::File, none),
            Verdict::Deny(Reason::GitRedirect)
        );
    }

    #[test]
    fn an_index_that_does_not_cover_the_patterns_is_not_used() {
        for index in [
            PatternIndex {
                by_first: &[],
                always: &[],
            },
            PatternIndex {
                by_first: &[(b".envrc", 2)],
                always: &[],
            },
        ] {
            let r = Rules { index, ..rules() };
            assert_eq!(
                decide(&r, b"/ws/src/.envrc", Create::File, GitHint::default()),
                DENY_PATH
            );
            assert!(is_protected_file(&r, b"/ws/secret.txt", GitHint::default()));
        }
    }

    /// The index changes nothing: every verdict and protected-file answer is the same with it
    /// as with every pattern tried, for paths that relate to each pattern in each way.
    #[test]
    fn index_gives_the_verdicts_of_trying_every_pattern() {
        let names = [
            ".git",
            "hooks",
            "config",
            ".envrc",
            ".config",
            "fish",
            ".env.local",
            ".env",
            "secret.txt",
            "src",
            "x",
            "HEAD",
            "objects",
            "modules",
        ];
        let mut paths = vec![b"/ws".to_vec(), b"/elsewhere/.envrc".to_vec()];
        for a in names {
            paths.push(format!("/ws/{a}").into_bytes());
            for b in names {
                paths.push(format!("/ws/{a}/{b}").into_bytes());
                for c in ["hooks", "fish", ".envrc", "x", "config"] {
                    paths.push(format!("/ws/{a}/{b}/{c}").into_bytes());
                }
            }
        }
        let whats = [
            Create::Dir,
            Create::File,
            Create::Node,
            Create::Symlink,
            Create::Link,
            Create::MoveFile,
            Create::MoveDir,
            Create::MoveSymlink,
        ];
        let (indexed, all) = (rules(), rules_unindexed());
        let mut denied = 0;
        for p in &paths {
            for w in whats {
                let v = decide(&indexed, p, w, GitHint::default());
                assert_eq!(v, decide(&all, p, w, GitHint::default()), "{p:?} {w:?}");
                denied += usize::from(matches!(v, Verdict::Deny(_)));
            }
            assert_eq!(
                is_protected_file(&indexed, p, GitHint::default()),
                is_protected_file(&all, p, GitHint::default()),
                "{p:?}"
            );
        }
        assert!(denied > 100, "the paths exercise the patterns: {denied}");
    }

    fn d(path: &str, what: Create) -> Verdict {
        decide(&rules(), path.as_bytes(), what, GitHint::default())
    }

    const DENY_PATH: Verdict = Verdict::Deny(Reason::ProtectedPath);

    #[test]
    fn outside_the_roots_everything_is_allowed() {
        assert_eq!(d("/tmp/.envrc", Create::File), Verdict::Allow);
        assert_eq!(d("/tmp/x/.git", Create::Symlink), Verdict::Allow);
        assert_eq!(d("/wsx/.envrc", Create::File), Verdict::Allow);
    }

    #[test]
    fn protected_names_are_refused_at_any_depth_and_inside() {
        assert_eq!(d("/ws/.envrc", Create::File), DENY_PATH);
        assert_eq!(d("/ws/a/b/.envrc", Create::Dir), DENY_PATH);
        assert_eq!(d("/ws/.env.local", Create::MoveFile), DENY_PATH);
        assert_eq!(d("/ws/.config/fish", Create::Dir), DENY_PATH);
        assert_eq!(d("/ws/.config/fish/config.fish", Create::File), DENY_PATH);
        assert_eq!(d("/ws/secret.txt", Create::Link), DENY_PATH);
        assert_eq!(d("/ws/.envrcx", Create::File), Verdict::Allow);
        assert_eq!(d("/ws/src/main.rs", Create::File), Verdict::Allow);
    }

    /// An exact protected path cannot be brought in whole by a directory renamed, or a
    /// symlink made, at one of its ancestors; empty directories on the way can still be made.
    #[test]
    fn an_exact_path_is_not_assembled_from_an_ancestor() {
        let unit = "/ws/home/.config/systemd/user";
        assert_eq!(d(unit, Create::Dir), DENY_PATH);
        assert_eq!(d(&format!("{unit}/x.service"), Create::File), DENY_PATH);
        for ancestor in ["/ws/home/.config/systemd", "/ws/home/.config", "/ws/home"] {
            for what in [Create::MoveDir, Create::Symlink, Create::MoveSymlink] {
                assert_eq!(
                    d(ancestor, what),
                    Verdict::Deny(Reason::BeginsProtectedPath),
                    "{ancestor} {what:?}"
                );
            }
            assert_eq!(d(ancestor, Create::Dir), Verdict::Allow, "{ancestor}");
        }
        // Control: a sibling of an ancestor is not on the way.
        assert_eq!(
            d("/ws/home/.config/systemdx", Create::Symlink),
            Verdict::Allow
        );
        assert_eq!(d("/ws/home/.cache", Create::MoveDir), Verdict::Allow);
    }

    #[test]
    fn git_init_can_build_a_repository() {
        assert_eq!(d("/ws/.git", Create::Dir), Verdict::Allow);
        assert_eq!(d("/ws/.git/hooks", Create::Dir), Verdict::Allow);
        assert_eq!(
            d("/ws/.git/hooks/pre-commit.sample", Create::File),
            Verdict::Allow
        );
        assert_eq!(d("/ws/.git/config.lock", Create::File), Verdict::CodeLock);
        assert_eq!(d("/ws/.git/config", Create::MoveFile), Verdict::InertConfig);
        assert_eq!(d("/ws/.git/HEAD", Create::MoveFile), Verdict::Allow);
        assert_eq!(d("/ws/.git/objects/ab", Create::Dir), Verdict::Allow);
        assert_eq!(
            d("/ws/.git/refs/heads/config", Create::MoveFile),
            Verdict::Allow
        );
        assert_eq!(d("/ws/.git/refs/heads/hooks", Create::Dir), Verdict::Allow);
        assert_eq!(
            d("/ws/.git/refs/heads/hooks/x", Create::MoveFile),
            Verdict::Allow
        );
        assert_eq!(
            d("/ws/.git/logs/refs/heads/config", Create::File),
            Verdict::Allow
        );
        assert_eq!(d("/ws/.config", Create::Dir), Verdict::Allow);
    }

    #[test]
    fn hooks_and_config_cannot_be_planted() {
        let hook = Verdict::Deny(Reason::GitHook);
        assert_eq!(d("/ws/.git/hooks/pre-commit", Create::File), hook);
        assert_eq!(d("/ws/.git/hooks/pre-commit", Create::MoveFile), hook);
        assert_eq!(d("/ws/.git/hooks/pre-commit", Create::Symlink), hook);
        assert_eq!(d("/ws/.git/hooks/x.sample", Create::Symlink), hook);
        assert_eq!(d("/ws/.git/hooks/pre-commit", Create::Link), hook);
        assert_eq!(d("/ws/.git/hooks", Create::Symlink), hook);
        assert_eq!(d("/ws/.git/hooks", Create::MoveDir), hook);
        assert_eq!(d("/ws/a/.git/hooks/post-checkout", Create::File), hook);
        assert_eq!(d("/ws/.git/modules/sub/hooks/pre-push", Create::File), hook);
        assert_eq!(
            d("/ws/.git/modules/a/b/hooks/pre-push", Create::MoveFile),
            hook
        );
        let config = Verdict::Deny(Reason::GitConfig);
        assert_eq!(d("/ws/.git/config", Create::File), Verdict::EmptyConfig);
        assert_eq!(d("/ws/.git/config", Create::Node), config);
        assert_eq!(d("/ws/.git/config", Create::Link), config);
        assert_eq!(d("/ws/.git/config", Create::Symlink), config);
        assert_eq!(d("/ws/.git/commondir", Create::File), config);
        assert_eq!(
            d("/ws/.git/modules/sub/commondir", Create::MoveFile),
            config
        );
        assert_eq!(
            d("/ws/.git/modules/sub/config", Create::MoveFile),
            Verdict::InertConfig
        );
        // Inside the hooks dir's subdirectories the generic pattern still covers.
        assert_eq!(d("/ws/.git/hooks/d/x", Create::File), DENY_PATH);
    }

    #[test]
    fn git_redirects_and_assembled_paths_are_refused() {
        let redirect = Verdict::Deny(Reason::GitRedirect);
        assert_eq!(d("/ws/sub/.git", Create::File), redirect);
        assert_eq!(d("/ws/sub/.git", Create::Symlink), redirect);
        assert_eq!(d("/ws/sub/.git", Create::MoveFile), redirect);
        assert_eq!(d("/ws/sub/.git", Create::MoveSymlink), redirect);
        let begins = Verdict::Deny(Reason::BeginsProtectedPath);
        assert_eq!(d("/ws/sub/.git", Create::MoveDir), begins);
        assert_eq!(d("/ws/.git/x", Create::MoveDir), begins);
        assert_eq!(d("/ws/.config", Create::MoveDir), begins);
        assert_eq!(d("/ws/.config", Create::Symlink), begins);
        assert_eq!(d("/ws/.config", Create::File), Verdict::Allow);
        assert_eq!(d("/ws/a/b", Create::MoveDir), Verdict::Allow);
        assert_eq!(d("/ws/.git/refs/x", Create::MoveDir), Verdict::Allow);
        assert_eq!(d("/ws/.git/modules/sub", Create::MoveDir), begins);
        assert_eq!(d("/ws/.git/modules/a/modules/b", Create::MoveDir), begins);
        assert_eq!(d("/ws/.git/modules/sub", Create::Dir), Verdict::Allow);
    }

    #[test]
    fn a_directory_with_a_live_config_cannot_become_a_git_dir() {
        let live = GitHint {
            parent_holds_code: true,
            ..GitHint::default()
        };
        for (path, what) in [
            ("/ws/b/HEAD", Create::File),
            ("/ws/b/HEAD", Create::MoveFile),
            ("/ws/b/HEAD", Create::Symlink),
            ("/ws/b/objects", Create::Dir),
            ("/ws/b/refs", Create::MoveDir),
            ("/ws/b/commondir", Create::File),
        ] {
            assert_eq!(
                decide(&rules(), path.as_bytes(), what, live),
                Verdict::Deny(Reason::PlantedGitDir),
                "{path} {what:?}"
            );
        }
        let v = decide(&rules(), b"/ws/b/HEAD", Create::File, GitHint::default());
        assert_eq!(v, Verdict::Allow, "git init: config (inert) before HEAD");
        assert_eq!(
            decide(&rules(), b"/ws/b/README", Create::File, live),
            Verdict::Allow
        );
    }

    #[test]
    fn bare_repositories_are_recognised_by_content() {
        let bare = GitHint {
            parent_is_gitdir: false,
            grand_is_gitdir: true,
            parent_holds_code: false,
        };
        let v = decide(&rules(), b"/ws/b/hooks/pre-receive", Create::File, bare);
        assert_eq!(v, Verdict::Deny(Reason::GitHook));
        let v = decide(&rules(), b"/ws/b/hooks/x.sample", Create::File, bare);
        assert_eq!(v, Verdict::Allow);
        let parent = GitHint {
            parent_is_gitdir: true,
            grand_is_gitdir: false,
            parent_holds_code: false,
        };
        let v = decide(&rules(), b"/ws/b/config", Create::MoveFile, parent);
        assert_eq!(v, Verdict::InertConfig);
        assert!(is_protected_file(&rules(), b"/ws/b/config", parent));
        assert!(!is_protected_file(
            &rules(),
            b"/ws/b/config",
            GitHint::default()
        ));
        assert!(wants_hint(b"/ws/b/hooks/pre-receive"));
        assert!(wants_hint(b"/ws/b/config"));
        assert!(!wants_hint(b"/ws/b/src/main.rs"));
    }

    #[test]
    fn protected_files_are_recognised() {
        let p = |s: &str| is_protected_file(&rules(), s.as_bytes(), GitHint::default());
        assert!(p("/ws/.git/config"));
        assert!(p("/ws/.git/modules/s/config"));
        assert!(p("/ws/.git/hooks/pre-commit"));
        assert!(p("/ws/.envrc"));
        assert!(p("/ws/.config/fish/config.fish"));
        assert!(!p("/ws/.git/hooks/pre-commit.sample"));
        assert!(!p("/ws/.git/refs/heads/config"));
        assert!(!p("/ws/src/config"));
        assert!(!p("/tmp/.envrc"));
    }

    #[test]
    fn a_protected_file_is_refused_by_the_rule_that_protects_it() {
        let r = |s: &str| protected_file_reason(&rules(), s.as_bytes(), GitHint::default());
        assert_eq!(r("/ws/.git/config"), Some(Reason::GitConfig));
        assert_eq!(r("/ws/.git/config.worktree"), Some(Reason::GitConfig));
        // A linked worktree's git dir is one by what it holds (the hint read from the disk).
        let gitdir = GitHint {
            parent_is_gitdir: true,
            ..GitHint::default()
        };
        let commondir = b"/ws/.git/worktrees/w/commondir";
        assert_eq!(
            protected_file_reason(&rules(), commondir, gitdir),
            Some(Reason::GitConfig)
        );
        assert_eq!(r("/ws/.git/hooks"), Some(Reason::GitHook));
        assert_eq!(r("/ws/.git/hooks/pre-commit"), Some(Reason::GitHook));
        assert_eq!(r("/ws/.git/hooks/pre-commit.sample"), None);
        assert_eq!(r("/ws/.envrc"), Some(Reason::ProtectedFile));
        assert_eq!(r("/ws/src/config"), None);
        // Git's lock of a code file: not for chmod (git sets its mode), but for writing.
        assert_eq!(r("/ws/.git/config.lock"), None);
        let w = |s: &str| protected_for_writing(&rules(), s.as_bytes(), GitHint::default());
        assert_eq!(w("/ws/.git/config.lock"), Some(Reason::GitConfig));
        assert_eq!(
            w("/ws/.git/modules/s/config.worktree.lock"),
            Some(Reason::GitConfig)
        );
        assert_eq!(w("/ws/.git/config"), Some(Reason::GitConfig));
        assert_eq!(w("/ws/.envrc"), Some(Reason::ProtectedFile));
        assert_eq!(w("/ws/.git/index.lock"), None);
        // Made only by `open(O_CREAT)`, as a placeholder: whatever has the name when git on
        // the host commits becomes its config.
        for lock in [
            "/ws/.git/config.lock",
            "/ws/.git/config.worktree.lock",
            "/ws/.git/modules/s/commondir.lock",
        ] {
            assert_eq!(d(lock, Create::File), Verdict::CodeLock, "{lock}");
            for what in [
                Create::MoveFile,
                Create::MoveSymlink,
                Create::MoveDir,
                Create::Symlink,
                Create::Link,
                Create::Node,
                Create::Dir,
            ] {
                assert!(matches!(d(lock, what), Verdict::Deny(_)), "{lock} {what:?}");
            }
        }
        assert_eq!(d("/ws/.git/index.lock", Create::MoveFile), Verdict::Allow);
        assert_eq!(d("/ws/src/config.lock", Create::Symlink), Verdict::Allow);
        assert_eq!(w("/ws/src/config.lock"), None);
        assert_eq!(w("/tmp/.git/config.lock"), None);
        assert!(wants_hint(b"/ws/.git/worktrees/w/commondir.lock"));
    }

    #[test]
    fn wildcards() {
        assert!(wildcard_match(b".env.*", b".env.local"));
        assert!(wildcard_match(b".env.*", b".env."));
        assert!(!wildcard_match(b".env.*", b".env"));
        assert!(wildcard_match(b"a?c", b"abc"));
        assert!(wildcard_match(b"a?c", "aéc".as_bytes()));
        assert!(!wildcard_match(b"a??c", "aéc".as_bytes()));
        // Without `?`, bytes and characters give the same answers (UTF-8 sequences cannot
        // match inside one another).
        let names = [
            "aéb",
            "éé",
            "a",
            "",
            "ébé.pem",
            "x.pém",
            ".env.é",
            "日本.env",
        ];
        let pats = [
            "*é*", "a*", "é*", "*b", "*.pem", "*.p*m", ".env.*", "*.env", "**", "日*",
        ];
        for p in pats {
            for n in names {
                let by_chars = match_units(p.chars(), n.chars(), '*', '?');
                assert_eq!(
                    wildcard_match(p.as_bytes(), n.as_bytes()),
                    by_chars,
                    "{p} {n}"
                );
            }
        }
        assert!(wildcard_match(b"*.pem", b"key.pem"));
        assert!(wildcard_match(b"*a*b", b"xxaxxb"));
        assert!(!wildcard_match(b"*a*b", b"xxaxxbc"));
        assert!(wildcard_match(b"*", b""));
        assert!(wildcard_match(b"x", b"x"));
        assert!(!wildcard_match(b"x", b"y"));
    }

    #[test]
    fn within() {
        assert!(is_within(b"/ws", b"/ws"));
        assert!(is_within(b"/ws/a", b"/ws"));
        assert!(is_within(b"/ws/a", b"/"));
        assert!(!is_within(b"/wsa", b"/ws"));
    }
}
