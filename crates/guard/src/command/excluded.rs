//! The arguments of an excluded program (issue 30, item 5). A `[[commands]] excluded = true`
//! entry runs its program on the host, outside the sandbox, with words the sandbox's side
//! chose: `git -c core.fsmonitor=./x status` would run `./x` on the host, `git diff
//! --output=~/.bashrc` would write a start-up file. So each word must be accepted by an
//! allow-list:
//!
//! - for git, stockade's own model ([`git`]): a few global options, and per subcommand the
//!   options that run nothing, write nowhere but the repository, and read no file outside it;
//!   a repository argument (`fetch`, `pull`, `push`, `ls-remote`) must be a configured remote
//!   or a network URL (never a local path, `file://`, or `<transport>::` such as `ext::`).
//!   An allow-list, not a deny-list: git has hundreds of options, grows more every release,
//!   and takes unambiguous prefixes of long ones (`--upl` is `--upload-pack`), so a list of
//!   what is dangerous is never complete, while a word the model does not know is refused;
//! - for any other program, the entry's `allowed_args` alone: stockade knows nothing of what
//!   its options do, so without them the run is refused.
//!
//! A word matching one of the entry's `allowed_args` (as written, or a prefix ending in `*`)
//! passes whatever the model says, so a refusal names the line that would allow it.
//!
//! A program stockade has no model of also reads files it is not given: `make` its Makefile,
//! `docker build .` its Dockerfile, `npm test` the scripts of `package.json`, `just`, `rake`,
//! `tox` theirs, all from the working directory. The working directory is an argument too, so
//! [`check_workspace_files`] refuses such a run from a directory in a writable root (the
//! sandbox could have written what it reads there), and any word naming a path in one
//! (`-f ./x.mk`, `-C /ws`, `/ws/Dockerfile`, `--file=...`, each `a:b` element: the command
//! layer's path candidates, a leading `~` expanded as make and npm expand it), or any root
//! holding or lying where programs read their per-user configuration and plugins (the home,
//! `$XDG_CONFIG_HOME`, a hidden entry at the top of the home: `~/.npmrc`, `~/.docker`),
//! unless the entry says `runs_workspace_files = true` (the user accepts that the program
//! runs the workspace's files on the host). git has its own check of
//! where it runs (`stockade::command_rules::check_git_place`).
//!
//! What is checked here is the argv (and, for a program without a model, the paths it
//! names). The orchestrator checks the rest (the repository git would use from the working
//! directory, the config files it reads, the environment): `stockade::command_rules`.

use std::path::{Path, PathBuf};

use super::{Construct, Refusal};

/// What a refusal names as the way to allow a word: the entry, and where it is written.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// Its index among the policy's `[[commands]]`.
    pub index: usize,
    /// The policy file it is in, when known.
    pub file: Option<&'a Path>,
    /// Its `allowed_args` (`None`: not given).
    pub allowed_args: Option<&'a [String]>,
    /// Its `runs_workspace_files`: a program without a model may run from a writable root and
    /// be given paths there.
    pub runs_workspace_files: bool,
}

impl Entry<'_> {
    fn allows(&self, word: &str) -> bool {
        self.allowed_args
            .is_some_and(|patterns| patterns.iter().any(|p| pattern_matches(p, word)))
    }

    fn line(&self, words: &[&str]) -> String {
        let quoted: Vec<String> = words.iter().map(|w| format!("{w:?}")).collect();
        let file = self
            .file
            .map(|f| format!(" in {}", f.display()))
            .unwrap_or_default();
        format!(
            "`allowed_args = [{}]` in [[commands]] entry {}{file} would allow it",
            quoted.join(", "),
            self.index
        )
    }

    /// The entry, and where it is written: `[[commands]] entry 3 in /p.toml`.
    fn named(&self) -> String {
        let file = self
            .file
            .map(|f| format!(" in {}", f.display()))
            .unwrap_or_default();
        format!("[[commands]] entry {}{file}", self.index)
    }

    fn refuse(&self, words: &[&str], why: impl std::fmt::Display) -> Refusal {
        Refusal::new(
            Construct::ExcludedArgument,
            words.join(" "),
            format!(
                "{why}; an excluded program runs on the host, outside the sandbox ({})",
                self.line(words)
            ),
        )
    }
}

/// `word` matches `pattern`: equal, or `pattern` ends in `*` and `word` starts with the rest.
pub fn pattern_matches(pattern: &str, word: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => word.starts_with(prefix),
        None => pattern == word,
    }
}

/// Whether stockade has a model of this program's arguments (by file name: `git`).
pub fn has_model(program: &Path) -> bool {
    program.file_name().is_some_and(|n| n == "git")
}

/// Checks the arguments (`args`, without the program) of an excluded run of `program`.
/// `cwd` is where it runs (a bare word git would take as a local repository path is refused
/// when it names something there).
pub fn check(program: &Path, args: &[String], cwd: &Path, entry: &Entry) -> Result<(), Refusal> {
    if let Some(a) = args.iter().find(|a| a.contains('\0')) {
        return Err(Refusal::new(
            Construct::ParseError,
            a,
            "an argument contains a NUL byte",
        ));
    }
    if has_model(program) {
        return git::check(args, cwd, entry);
    }
    let name = program.display();
    if entry.allowed_args.is_none() {
        let first: Vec<&str> = args.iter().take(1).map(String::as_str).collect();
        return Err(Refusal::new(
            Construct::ExcludedArgument,
            format!("{name} {}", args.join(" ")).trim_end(),
            format!(
                "stockade has no model of what {name}'s arguments make it run or write, and an excluded program runs on the host: declare the words it may be given, e.g. `allowed_args = [{}]` in [[commands]] entry {}{}",
                first.iter().map(|w| format!("{w:?}")).collect::<Vec<_>>().join(", "),
                entry.index,
                entry.file.map(|f| format!(" in {}", f.display())).unwrap_or_default()
            ),
        ));
    }
    match args.iter().find(|a| !entry.allows(a)) {
        Some(word) => Err(entry.refuse(
            &[word],
            format!("`{word}` is not among the entry's allowed_args"),
        )),
        None => Ok(()),
    }
}

/// Where programs read their per-user configuration and plugins, as the excluded program
/// would find them.
#[derive(Debug, Clone, Copy)]
pub struct UserPlaces<'a> {
    /// `HOME` as the program gets it: what a leading `~` or `~/` in its words stands for (make
    /// and npm expand it themselves). Relative: taken from the working directory, as they do.
    pub home: &'a Path,
    /// The homes it reads per-user configuration from (that `HOME`, and the account's home
    /// when it differs), absolute: a writable root holding one, or lying in a hidden entry at
    /// its top (`~/.npmrc`, `~/.docker`, `~/.local`, `~/.cache/...`), is refused.
    pub homes: &'a [PathBuf],
    /// `$XDG_CONFIG_HOME` (default `~/.config`), absolute: a writable root holding it or lying
    /// in it is refused.
    pub config_dirs: &'a [PathBuf],
}

/// Where an excluded `program` stockade has no model of runs, the paths it is given, and
/// where it reads its per-user configuration: refused, unless the entry has
/// `runs_workspace_files`, when
///
/// - `cwd` lies in one of `roots` (the run's writable roots, canonical): such a program reads
///   files it is not given from where it runs (a Makefile, a Dockerfile, `package.json`
///   scripts);
/// - a home or a config dir of `user` lies in a root, or a root lies in a config dir or in a
///   hidden entry at the top of a home (`--allow-write ~/.npmrc`, `~/.docker`, `~/.config/x`,
///   `~/.local/bin`, `~/.cache/pip`), or such an entry (or an entry of a config dir) is a link
///   leading into a root: programs read their per-user configuration and plugins there
///   (`~/.npmrc`'s `script-shell`, `~/.docker/cli-plugins`, `~/.config/...`). A plain
///   directory below the home (`~/proj`) is the normal workspace and passes;
/// - a word of `args` names a path in one (the command layer's path candidates: the word, the
///   value after `=`, `-fX`, `@file`, each `a:b` element, a `file://` URL; absolute, relative
///   to `cwd`, or starting with `~`/`~/`, expanded with `user.home` as make and npm expand
///   it). A `~user` form (another account's home, `~+`) may lead anywhere and is refused.
///
/// It takes the paths it is given as build files, configs or scripts: whatever the sandbox
/// wrote there would run on the host. A path is in a root when it, or any directory on the
/// way to it, leads there (links followed, dangling ones too; the nearest existing ancestor
/// for a path that does not exist yet): a path through a writable root is one the sandbox can
/// redirect between this check and the program's `open`. git (a program with a model) passes
/// here: its place is checked by its own rules.
///
/// Not covered: the environment the program gets beyond what `excluded_env` removes (the
/// caller's `MAKEFILES`, `npm_config_*`, `DOCKER_CONFIG` naming a file in a root: the caller
/// sets them, not the sandbox).
pub fn check_workspace_files(
    program: &Path,
    args: &[String],
    cwd: &Path,
    user: &UserPlaces,
    roots: &[PathBuf],
    entry: &Entry,
) -> Result<(), Refusal> {
    if has_model(program) || entry.runs_workspace_files {
        return Ok(());
    }
    let name = program.file_name().map_or_else(
        || program.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let accept = format!(
        "`runs_workspace_files = true` in {} accepts that it runs the workspace's files on the host",
        entry.named()
    );
    if let Some((real, root)) = reaches(cwd, roots) {
        return Err(Refusal::new(
            Construct::ExcludedWorkspaceFiles,
            cwd.display(),
            format!(
                "{} would run in {}, which lies in the writable root {} ({}): {name} on the host reads files from its working directory (a Makefile, a Dockerfile, package.json scripts), and the sandbox could have written them; run it from a directory outside every writable root, or {accept}",
                program.display(),
                cwd.display(),
                root.display(),
                real.display()
            ),
        ));
    }
    for dir in user.homes.iter().chain(user.config_dirs) {
        if let Some((real, root)) = reaches(dir, roots) {
            return Err(Refusal::new(
                Construct::ExcludedWorkspaceFiles,
                dir.display(),
                format!(
                    "{} lies in the writable root {} ({}): {name} on the host reads its per-user configuration and plugins there (~/.npmrc, ~/.docker/cli-plugins, ~/.config/...), and the sandbox could have written them; keep the home out of the workspace and --allow-write paths, or {accept}",
                    dir.display(),
                    root.display(),
                    real.display()
                ),
            ));
        }
    }
    if let Some((text, why)) = root_in_user_config(user, roots) {
        return Err(Refusal::new(
            Construct::ExcludedWorkspaceFiles,
            text,
            format!(
                "{why}: programs read their per-user configuration and plugins there (~/.npmrc, ~/.docker/cli-plugins, ~/.config/..., ~/.local/bin), so {name} on the host could run what the sandbox wrote; grant a plain project directory instead of a dotfile or config directory, or {accept}"
            ),
        ));
    }
    let real_cwd = leads_to(cwd);
    for word in args {
        for candidate in super::path_candidates(word) {
            let p = match expand_tilde(&candidate, user.home) {
                Tilde::None => PathBuf::from(&candidate),
                Tilde::Home(p) => p,
                Tilde::OtherUser => {
                    return Err(Refusal::new(
                        Construct::ExcludedWorkspaceFiles,
                        word,
                        format!(
                            "`{word}` names `{candidate}`, another account's home (or `~+`/`~-`) that {name} on the host would expand itself, and it may lead into a writable root: give {} the full path, or {accept}",
                            program.display()
                        ),
                    ));
                }
            };
            let path = if p.is_absolute() { p } else { real_cwd.join(p) };
            if let Some((real, root)) = reaches(&path, roots) {
                return Err(Refusal::new(
                    Construct::ExcludedWorkspaceFiles,
                    word,
                    format!(
                        "`{word}` names {}, which leads into the writable root {} ({}): {name} on the host would read it (a build file, a config, a script), and the sandbox could have written it; give {} no path in a writable root, or {accept}",
                        path.display(),
                        root.display(),
                        real.display(),
                        program.display(),
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// What a leading `~` in a path candidate stands for.
enum Tilde {
    /// No leading `~`.
    None,
    /// `~` or `~/...`: the run's home.
    Home(PathBuf),
    /// `~user...`, `~+`, `~-`: not looked up (no account database here).
    OtherUser,
}

fn expand_tilde(candidate: &str, home: &Path) -> Tilde {
    if candidate == "~" {
        return Tilde::Home(home.to_path_buf());
    }
    match candidate.strip_prefix("~/") {
        Some(rest) => Tilde::Home(home.join(rest.trim_start_matches('/'))),
        None if candidate.starts_with('~') => Tilde::OtherUser,
        None => Tilde::None,
    }
}

/// A writable root lying where programs read per-user configuration and plugins: in a config
/// dir, in a hidden entry at the top of a home, or reached by a link there. The place (for the
/// refusal's text) and why.
fn root_in_user_config(user: &UserPlaces, roots: &[PathBuf]) -> Option<(String, String)> {
    for dir in user.config_dirs {
        let real = leads_to(dir);
        if let Some(root) = roots.iter().find(|r| r.starts_with(&real)) {
            return Some((
                root.display().to_string(),
                format!(
                    "the writable root {} lies in {} ({}), the per-user configuration directory",
                    root.display(),
                    dir.display(),
                    real.display()
                ),
            ));
        }
    }
    for home in user.homes {
        let real = leads_to(home);
        let hidden = roots.iter().find(|r| {
            r.strip_prefix(&real).is_ok_and(|rest| {
                rest.components()
                    .next()
                    .is_some_and(|c| c.as_os_str().as_encoded_bytes().starts_with(b"."))
            })
        });
        if let Some(root) = hidden {
            return Some((
                root.display().to_string(),
                format!(
                    "the writable root {} lies in a hidden entry at the top of the home {}",
                    root.display(),
                    home.display()
                ),
            ));
        }
    }
    // Entries that are links: `~/.npmrc -> ~/dotfiles/npmrc` with `~/dotfiles` a root.
    let hidden_entries = user.homes.iter().flat_map(|home| {
        std::fs::read_dir(home)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().as_encoded_bytes().starts_with(b"."))
            .map(|e| e.path())
    });
    let config_entries = user.config_dirs.iter().flat_map(|dir| {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
    });
    for place in hidden_entries.chain(config_entries) {
        let real = leads_to(&place);
        if let Some(root) = roots
            .iter()
            .find(|r| real.starts_with(r) || r.starts_with(&real))
        {
            return Some((
                place.display().to_string(),
                format!(
                    "{} leads to {}, which lies in (or holds) the writable root {}",
                    place.display(),
                    real.display(),
                    root.display()
                ),
            ));
        }
    }
    None
}

/// Where `path` (absolute), or a directory on the way to it, leads into one of `roots`: that
/// place and the root. `None`: no step of it is the sandbox's.
fn reaches<'r>(path: &Path, roots: &'r [PathBuf]) -> Option<(PathBuf, &'r PathBuf)> {
    path.ancestors().find_map(|a| {
        let real = leads_to(a);
        let root = roots.iter().find(|r| real.starts_with(r))?;
        Some((real, root))
    })
}

/// Where `p` (absolute) leads: its nearest existing ancestor made canonical (links followed),
/// the rest as written with `.` dropped; `..` in the rest is taken lexically (the kernel would
/// fail on the missing component before it, so the result is only ever more inside).
fn leads_to(p: &Path) -> PathBuf {
    leads_to_depth(p, 0)
}

fn leads_to_depth(p: &Path, depth: u32) -> PathBuf {
    use std::path::Component;
    let mut existing = p.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        match (existing.file_name(), existing.parent()) {
            (Some(n), Some(parent)) => {
                rest.push(n.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut out = match std::fs::canonicalize(&existing) {
        Ok(real) => real,
        // A dangling link: where it would lead once its target exists (bounded, as the
        // kernel bounds a chain of links).
        Err(_) => match std::fs::read_link(&existing) {
            Ok(target) if depth < 40 => {
                let parent = existing.parent().map(Path::to_path_buf).unwrap_or_default();
                leads_to_depth(&parent.join(target), depth + 1)
            }
            _ => existing,
        },
    };
    for c in rest.iter().rev() {
        match Path::new(c).components().next() {
            Some(Component::ParentDir) => {
                out.pop();
            }
            Some(Component::CurDir) | None => {}
            _ => out.push(c),
        }
    }
    out
}

/// git's arguments, by allow-list.
pub mod git {
    use std::path::Path;

    use super::{Entry, Refusal};

    /// Options before the subcommand that change nothing git runs or reads.
    pub const GLOBAL: &[&str] = &[
        "--no-pager",
        "-P",
        "--no-optional-locks",
        "--literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
        "--no-replace-objects",
        "--no-lazy-fetch",
        "--no-advice",
        "--version",
        "-v",
    ];

    /// Global options refused by name, with why (any other unknown one is refused too).
    const GLOBAL_WHY: &[(&str, &str)] = &[
        ("-c", "`-c` sets any config key (core.fsmonitor, core.pager, alias.*, ...: programs git runs)"),
        ("--config-env", "`--config-env` sets any config key from a variable"),
        ("--exec-path", "`--exec-path` makes git run its commands from another directory"),
        ("-C", "`-C` points git at another directory, whose repository config and hooks the sandbox could have written"),
        ("--git-dir", "`--git-dir` points git at a repository the sandbox could have assembled"),
        ("--work-tree", "`--work-tree` points git at another tree"),
        ("--namespace", "`--namespace` changes which refs git sees"),
        ("--bare", "`--bare` makes the directory a repository the sandbox could have assembled"),
        ("--super-prefix", "an internal option"),
        ("--list-cmds", "`--list-cmds` lists programs from PATH and config"),
        ("--attr-source", "`--attr-source` reads attributes (filters, diff drivers) from another tree"),
        ("-p", "`-p` starts a pager"),
        ("--paginate", "`--paginate` starts a pager"),
        ("--html-path", "an installation path"),
        ("--man-path", "an installation path"),
        ("--info-path", "an installation path"),
    ];

    /// Subcommands that write the working tree from objects or move files in it: refused with
    /// their own reason (inside the sandbox the same commands meet the protected paths).
    pub const WORKTREE_WRITERS: &[&str] = &[
        "checkout",
        "switch",
        "restore",
        "merge",
        "pull",
        "rebase",
        "cherry-pick",
        "revert",
        "am",
        "apply",
        "clean",
        "rm",
        "mv",
        "read-tree",
        "checkout-index",
        "sparse-checkout",
        "submodule",
        "stash",
    ];

    /// Config an excluded git always gets (through `GIT_CONFIG_*`, above every config file):
    /// it talks to network repositories only (a local one, `file://`, `ext::` or another
    /// transport helper could be the sandbox's, and a push runs the receiving repository's
    /// hooks), also when a word or a remote's URL names another, and it never enters a
    /// submodule, whose repository (an old-style `.git` directory in the worktree) the sandbox
    /// could have made. And it runs no hook (`core.hooksPath=/dev/null`): the repository's
    /// hooks are the user's, but they run the workspace's code (`pre-commit` running
    /// `./scripts/lint.sh`, `npm test`, `make lint`), which the sandbox writes, so an
    /// excluded `commit` (`push`, `gc`, any ref or index update) ran it on the host.
    pub const FORCED_CONFIG: &[(&str, &str)] = &[
        ("protocol.allow", "never"),
        ("protocol.https.allow", "always"),
        ("protocol.http.allow", "always"),
        ("protocol.ssh.allow", "always"),
        ("protocol.git.allow", "always"),
        ("submodule.recurse", "false"),
        ("diff.ignoreSubmodules", "all"),
        ("status.submoduleSummary", "false"),
        ("fetch.recurseSubmodules", "false"),
        ("push.recurseSubmodules", "no"),
        ("core.hooksPath", "/dev/null"),
    ];

    /// How a subcommand's non-option words are taken.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Words {
        /// Revisions, paths (git refuses paths outside the repository), names, messages.
        Free,
        /// The first is a repository to talk to: a configured remote or a network URL.
        Remote,
        /// `git config`: only reading forms.
        ConfigRead,
        /// The first, when given, is one of these (`git remote show`, `git worktree list`).
        Only(&'static [&'static str]),
    }

    /// A subcommand: options without a value (or with an optional `=value`), options that
    /// take a value (`--opt=v`, `--opt v`, `-ov`, `-o v`), and how its words are taken.
    struct Sub {
        name: &'static str,
        flags: &'static [&'static str],
        /// More flags (`git log` also takes diff options).
        more: &'static [&'static str],
        valued: &'static [&'static str],
        words: Words,
        /// `-<number>` (`git log -5`).
        counts: bool,
    }

    impl Sub {
        /// A subcommand without extra flags or `-<number>`, its words taken as `words` says.
        fn plain(
            name: &'static str,
            flags: &'static [&'static str],
            valued: &'static [&'static str],
            words: Words,
        ) -> Sub {
            Sub {
                name,
                flags,
                more: &[],
                valued,
                words,
                counts: false,
            }
        }

        fn flag(&self, opt: &str) -> bool {
            self.flags.contains(&opt) || self.more.contains(&opt)
        }
    }

    const DIFF_FLAGS: &[&str] = &[
        "-p",
        "-u",
        "--patch",
        "-s",
        "--no-patch",
        "--raw",
        "--patch-with-raw",
        "--stat",
        "--shortstat",
        "--numstat",
        "--dirstat",
        "--compact-summary",
        "--summary",
        "--name-only",
        "--name-status",
        "--check",
        "-z",
        "--color",
        "--no-color",
        "--color-moved",
        "--no-color-moved",
        "--color-words",
        "--word-diff",
        "-w",
        "--ignore-all-space",
        "-b",
        "--ignore-space-change",
        "--ignore-space-at-eol",
        "--ignore-blank-lines",
        "--ignore-cr-at-eol",
        "--minimal",
        "--patience",
        "--histogram",
        "--no-renames",
        "-M",
        "--find-renames",
        "-C",
        "--find-copies",
        "-D",
        "--irreversible-delete",
        "-R",
        "--relative",
        "--no-relative",
        "--text",
        "-a",
        "--binary",
        "--full-index",
        "--abbrev",
        "--no-abbrev",
        "--exit-code",
        "--quiet",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules",
        "--no-prefix",
        "--default-prefix",
        "--function-context",
        "-W",
        "--indent-heuristic",
        "--no-indent-heuristic",
        "-B",
        "--break-rewrites",
        "--merge-base",
        "--cached",
        "--staged",
        "--unified",
        "-U",
        "--diff-algorithm",
        "--stat-width",
        "--stat-count",
        "--ws-error-highlight",
        "--submodule",
        "--src-prefix",
        "--dst-prefix",
        "--line-prefix",
        "--diff-filter",
        "--anchored",
        "--inter-hunk-context",
        "--dirstat-by-file",
        "--cumulative",
        "--numstat",
        "--ours",
        "--theirs",
        "--base",
        "-1",
        "-2",
        "-3",
        "--combined-all-paths",
        "--diff-merges",
        "--no-diff-merges",
        "--remerge-diff",
        "--cc",
        "-m",
        "-c",
        "--first-parent",
    ];

    const LOG_FLAGS: &[&str] = &[
        "--oneline",
        "--graph",
        "--decorate",
        "--no-decorate",
        "--all",
        "--branches",
        "--tags",
        "--remotes",
        "--reverse",
        "--format",
        "--pretty",
        "--abbrev-commit",
        "--no-abbrev-commit",
        "--no-merges",
        "--merges",
        "--first-parent",
        "-i",
        "--regexp-ignore-case",
        "--date",
        "--follow",
        "--cherry-pick",
        "--cherry-mark",
        "--cherry",
        "--left-right",
        "--left-only",
        "--right-only",
        "--boundary",
        "--topo-order",
        "--date-order",
        "--author-date-order",
        "--full-history",
        "--simplify-merges",
        "--ancestry-path",
        "--source",
        "--use-mailmap",
        "--mailmap",
        "--no-mailmap",
        "--show-signature",
        "--notes",
        "--no-notes",
        "--show-notes",
        "--since",
        "--after",
        "--until",
        "--before",
        "--author",
        "--committer",
        "--grep",
        "--all-match",
        "--invert-grep",
        "-E",
        "--extended-regexp",
        "-F",
        "--fixed-strings",
        "--max-count",
        "--skip",
        "--max-parents",
        "--min-parents",
        "--no-walk",
        "--walk-reflogs",
        "-g",
        "--parents",
        "--children",
        "--encoding",
        "--expand-tabs",
        "--no-expand-tabs",
        "--relative-date",
        "--decorate-refs",
        "--decorate-refs-exclude",
        "--clear-decorations",
        "--exclude",
        "--not",
        "--glob",
        "--dense",
        "--sparse",
        "--full-diff",
        "--log-size",
        "-L",
        "-S",
        "-G",
        "--pickaxe-all",
        "--pickaxe-regex",
        "--show-linear-break",
        "--count",
        "--no-color",
        "--color",
        "--stdin",
    ];

    fn sub(name: &str) -> Option<Sub> {
        const STATUS: &[&str] = &[
            "-s",
            "--short",
            "-b",
            "--branch",
            "--porcelain",
            "--long",
            "-v",
            "--verbose",
            "-u",
            "--untracked-files",
            "--ignored",
            "--ignore-submodules",
            "-z",
            "--column",
            "--no-column",
            "--ahead-behind",
            "--no-ahead-behind",
            "--renames",
            "--no-renames",
            "--find-renames",
            "--show-stash",
            "--no-optional-locks",
        ];
        let s = |name, flags, valued| Sub::plain(name, flags, valued, Words::Free);
        let only = |name, flags, first| Sub::plain(name, flags, &[], Words::Only(first));
        let remote = |name, flags, valued| Sub::plain(name, flags, valued, Words::Remote);
        let log = |name: &'static str| Sub {
            name,
            flags: LOG_FLAGS,
            more: DIFF_FLAGS,
            valued: &[
                "-n",
                "-L",
                "-S",
                "-G",
                "-U",
                "--max-count",
                "--skip",
                "--since",
                "--until",
                "--author",
                "--committer",
                "--grep",
                "--unified",
                "--diff-filter",
            ],
            words: Words::Free,
            counts: true,
        };
        Some(match name {
            "status" => s("status", STATUS, &["-u"]),
            "log" => log("log"),
            "show" => log("show"),
            "whatchanged" => log("whatchanged"),
            "diff" => s("diff", DIFF_FLAGS, &["-U", "--unified", "--diff-filter"]),
            "shortlog" => s(
                "shortlog",
                &[
                    "-s",
                    "--summary",
                    "-n",
                    "--numbered",
                    "-e",
                    "--email",
                    "--all",
                    "--no-merges",
                    "-c",
                    "--committer",
                    "--format",
                    "--group",
                ],
                &[],
            ),
            "branch" => s(
                "branch",
                &[
                    "-a",
                    "--all",
                    "-r",
                    "--remotes",
                    "-v",
                    "-vv",
                    "--verbose",
                    "-l",
                    "--list",
                    "--contains",
                    "--no-contains",
                    "--merged",
                    "--no-merged",
                    "--show-current",
                    "--sort",
                    "--format",
                    "--color",
                    "--no-color",
                    "--column",
                    "--no-column",
                    "-d",
                    "-D",
                    "--delete",
                    "-m",
                    "-M",
                    "--move",
                    "-c",
                    "--copy",
                    "-f",
                    "--force",
                    "--set-upstream-to",
                    "-u",
                    "--unset-upstream",
                    "--points-at",
                    "-q",
                    "--quiet",
                    "--track",
                    "--no-track",
                    "-i",
                    "--ignore-case",
                    "--abbrev",
                    "--no-abbrev",
                ],
                &["-u", "--sort", "--format", "--contains", "--points-at"],
            ),
            "rev-parse" => s(
                "rev-parse",
                &[
                    "--show-toplevel",
                    "--git-dir",
                    "--absolute-git-dir",
                    "--git-common-dir",
                    "--abbrev-ref",
                    "--short",
                    "--verify",
                    "-q",
                    "--quiet",
                    "--is-inside-work-tree",
                    "--is-inside-git-dir",
                    "--is-bare-repository",
                    "--is-shallow-repository",
                    "--show-prefix",
                    "--show-cdup",
                    "--symbolic",
                    "--symbolic-full-name",
                    "--show-object-format",
                    "--show-superproject-working-tree",
                    "--all",
                    "--branches",
                    "--tags",
                    "--remotes",
                    "--default",
                    "--revs-only",
                    "--no-revs",
                    "--flags",
                    "--no-flags",
                    "--sq",
                ],
                &[],
            ),
            "ls-files" => s(
                "ls-files",
                &[
                    "-c",
                    "--cached",
                    "-d",
                    "--deleted",
                    "-m",
                    "--modified",
                    "-o",
                    "--others",
                    "-i",
                    "--ignored",
                    "-s",
                    "--stage",
                    "-u",
                    "--unmerged",
                    "-k",
                    "--killed",
                    "-z",
                    "--directory",
                    "--no-empty-directory",
                    "--exclude-standard",
                    "--error-unmatch",
                    "--full-name",
                    "--abbrev",
                    "--eol",
                    "--deduplicate",
                    "-t",
                    "-v",
                    "-f",
                    "--sparse",
                    "--format",
                ],
                &[],
            ),
            "ls-tree" => s(
                "ls-tree",
                &[
                    "-r",
                    "-d",
                    "-t",
                    "-l",
                    "--long",
                    "-z",
                    "--name-only",
                    "--name-status",
                    "--object-only",
                    "--full-name",
                    "--full-tree",
                    "--abbrev",
                    "--format",
                ],
                &[],
            ),
            "blame" => s(
                "blame",
                &[
                    "-L",
                    "-w",
                    "-M",
                    "-C",
                    "-e",
                    "--show-email",
                    "-s",
                    "--porcelain",
                    "--line-porcelain",
                    "-l",
                    "-t",
                    "--date",
                    "-b",
                    "--root",
                    "--show-stats",
                    "-f",
                    "--show-name",
                    "-n",
                    "--show-number",
                    "-c",
                    "--incremental",
                    "--abbrev",
                    "--color-lines",
                    "--color-by-age",
                    "--minimal",
                    "--progress",
                    "--no-progress",
                    "--first-parent",
                    "--reverse",
                ],
                &["-L"],
            ),
            "describe" => s(
                "describe",
                &[
                    "--tags",
                    "--always",
                    "--dirty",
                    "--broken",
                    "--abbrev",
                    "--long",
                    "--all",
                    "--match",
                    "--exclude",
                    "--exact-match",
                    "--first-parent",
                    "--candidates",
                    "--contains",
                ],
                &["--match", "--exclude"],
            ),
            "tag" => s(
                "tag",
                &[
                    "-l",
                    "--list",
                    "-n",
                    "--sort",
                    "--contains",
                    "--no-contains",
                    "--merged",
                    "--no-merged",
                    "--points-at",
                    "-a",
                    "--annotate",
                    "-m",
                    "--message",
                    "-d",
                    "--delete",
                    "-f",
                    "--force",
                    "--column",
                    "--no-column",
                    "--format",
                    "-i",
                    "--ignore-case",
                    "--color",
                ],
                &[
                    "-m",
                    "--message",
                    "--sort",
                    "--format",
                    "--contains",
                    "--points-at",
                ],
            ),
            "cat-file" => s(
                "cat-file",
                &[
                    "-t",
                    "-s",
                    "-e",
                    "-p",
                    "--batch",
                    "--batch-check",
                    "--batch-command",
                    "--batch-all-objects",
                    "--buffer",
                    "--follow-symlinks",
                    "--unordered",
                    "-Z",
                    "-z",
                    "--allow-unknown-type",
                    "--use-mailmap",
                    "--mailmap",
                ],
                &[],
            ),
            "rev-list" => s(
                "rev-list",
                LOG_FLAGS,
                &[
                    "-n",
                    "--max-count",
                    "--skip",
                    "--since",
                    "--until",
                    "--author",
                    "--committer",
                    "--grep",
                ],
            ),
            "show-ref" => s(
                "show-ref",
                &[
                    "--head",
                    "--heads",
                    "--branches",
                    "--tags",
                    "-d",
                    "--dereference",
                    "-s",
                    "--hash",
                    "--verify",
                    "--abbrev",
                    "-q",
                    "--quiet",
                    "--exists",
                    "--exclude-existing",
                ],
                &[],
            ),
            "for-each-ref" => s(
                "for-each-ref",
                &[
                    "--count",
                    "--sort",
                    "--format",
                    "--shell",
                    "--perl",
                    "--python",
                    "--tcl",
                    "--points-at",
                    "--merged",
                    "--no-merged",
                    "--contains",
                    "--no-contains",
                    "--ignore-case",
                    "--omit-empty",
                    "--exclude",
                ],
                &["--count", "--sort", "--format", "--points-at"],
            ),
            "merge-base" => s(
                "merge-base",
                &[
                    "--all",
                    "--octopus",
                    "--is-ancestor",
                    "--independent",
                    "--fork-point",
                ],
                &[],
            ),
            "count-objects" => s(
                "count-objects",
                &["-v", "--verbose", "-H", "--human-readable"],
                &[],
            ),
            "grep" => s(
                "grep",
                &[
                    "--cached",
                    "--untracked",
                    "--no-exclude-standard",
                    "--exclude-standard",
                    "-a",
                    "--text",
                    "--textconv",
                    "--no-textconv",
                    "-i",
                    "--ignore-case",
                    "-I",
                    "--max-depth",
                    "-r",
                    "--recursive",
                    "--no-recursive",
                    "-w",
                    "--word-regexp",
                    "-v",
                    "--invert-match",
                    "-h",
                    "-H",
                    "--full-name",
                    "-E",
                    "--extended-regexp",
                    "-G",
                    "--basic-regexp",
                    "-P",
                    "--perl-regexp",
                    "-F",
                    "--fixed-strings",
                    "-n",
                    "--line-number",
                    "--column",
                    "-l",
                    "--files-with-matches",
                    "--name-only",
                    "-L",
                    "--files-without-match",
                    "-z",
                    "--null",
                    "-o",
                    "--only-matching",
                    "-c",
                    "--count",
                    "--color",
                    "--no-color",
                    "--break",
                    "--heading",
                    "-p",
                    "--show-function",
                    "-A",
                    "--after-context",
                    "-B",
                    "--before-context",
                    "-C",
                    "--context",
                    "-W",
                    "--function-context",
                    "-m",
                    "--max-count",
                    "--threads",
                    "-e",
                    "--and",
                    "--or",
                    "--not",
                    "--all-match",
                    "-q",
                    "--quiet",
                ],
                &[
                    "-A",
                    "-B",
                    "-C",
                    "-m",
                    "-e",
                    "--max-depth",
                    "--after-context",
                    "--before-context",
                    "--context",
                    "--max-count",
                    "--threads",
                ],
            ),
            "add" => s(
                "add",
                &[
                    "-A",
                    "--all",
                    "-u",
                    "--update",
                    "-N",
                    "--intent-to-add",
                    "-f",
                    "--force",
                    "-v",
                    "--verbose",
                    "-n",
                    "--dry-run",
                    "--ignore-errors",
                    "--ignore-missing",
                    "--no-all",
                    "--ignore-removal",
                    "--no-ignore-removal",
                    "--refresh",
                    "--renormalize",
                    "--sparse",
                    "--chmod",
                ],
                &[],
            ),
            "commit" => s(
                "commit",
                &[
                    "-m",
                    "--message",
                    "-a",
                    "--all",
                    "--amend",
                    "--no-edit",
                    "-s",
                    "--signoff",
                    "--no-signoff",
                    "--allow-empty",
                    "--allow-empty-message",
                    "--no-verify",
                    "-n",
                    "--verify",
                    "-q",
                    "--quiet",
                    "-v",
                    "--verbose",
                    "--author",
                    "--date",
                    "--fixup",
                    "--squash",
                    "-S",
                    "--gpg-sign",
                    "--no-gpg-sign",
                    "-C",
                    "--reuse-message",
                    "--reset-author",
                    "--only",
                    "-o",
                    "--include",
                    "-i",
                    "--dry-run",
                    "--short",
                    "--branch",
                    "--porcelain",
                    "--long",
                    "-z",
                    "--untracked-files",
                    "-u",
                    "--no-post-rewrite",
                    "--trailer",
                    "--status",
                    "--no-status",
                ],
                &[
                    "-m",
                    "-u",
                    "--message",
                    "--author",
                    "--date",
                    "--fixup",
                    "--squash",
                    "-C",
                    "--reuse-message",
                    "--trailer",
                ],
            ),
            "remote" => only(
                "remote",
                &["-v", "--verbose", "-n", "--push", "--all"],
                &["show", "get-url"],
            ),
            "worktree" => only(
                "worktree",
                &["--porcelain", "-v", "--verbose", "-z"],
                &["list"],
            ),
            "config" => Sub {
                name: "config",
                more: &[],
                flags: &[
                    "--get",
                    "--get-all",
                    "--get-regexp",
                    "--get-urlmatch",
                    "-l",
                    "--list",
                    "--show-origin",
                    "--show-scope",
                    "--name-only",
                    "-z",
                    "--null",
                    "--type",
                    "--bool",
                    "--int",
                    "--bool-or-int",
                    "--path",
                    "--expiry-date",
                    "--default",
                    "--local",
                    "--global",
                    "--system",
                    "--worktree",
                    "--includes",
                    "--no-includes",
                    "--all",
                    "--regexp",
                    "--value",
                    "--fixed-value",
                    "--url",
                ],
                valued: &["--type", "--default", "--value", "--url"],
                words: Words::ConfigRead,
                counts: false,
            },
            "fetch" => remote(
                "fetch",
                &[
                    "--all",
                    "-a",
                    "--append",
                    "--atomic",
                    "--depth",
                    "--deepen",
                    "--shallow-since",
                    "--shallow-exclude",
                    "--unshallow",
                    "--update-shallow",
                    "--dry-run",
                    "-f",
                    "--force",
                    "-k",
                    "--keep",
                    "--multiple",
                    "--prefetch",
                    "-p",
                    "--prune",
                    "-P",
                    "--prune-tags",
                    "-n",
                    "--no-tags",
                    "-t",
                    "--tags",
                    "--refetch",
                    "--refmap",
                    "-j",
                    "--jobs",
                    "--set-upstream",
                    "-q",
                    "--quiet",
                    "-v",
                    "--verbose",
                    "--progress",
                    "--no-progress",
                    "--show-forced-updates",
                    "--no-show-forced-updates",
                    "-4",
                    "--ipv4",
                    "-6",
                    "--ipv6",
                    "--no-write-fetch-head",
                    "--write-fetch-head",
                    "--porcelain",
                    "--filter",
                    "--negotiation-tip",
                    "--negotiate-only",
                    "--auto-gc",
                    "--no-auto-gc",
                    "--auto-maintenance",
                    "--no-auto-maintenance",
                    "--write-commit-graph",
                    "--no-write-commit-graph",
                ],
                &[
                    "--depth",
                    "--deepen",
                    "--shallow-since",
                    "--shallow-exclude",
                    "-j",
                    "--jobs",
                    "--filter",
                    "--refmap",
                    "--negotiation-tip",
                ],
            ),
            "push" => remote(
                "push",
                &[
                    "--all",
                    "--branches",
                    "--mirror",
                    "--tags",
                    "--follow-tags",
                    "--no-follow-tags",
                    "-n",
                    "--dry-run",
                    "--porcelain",
                    "-d",
                    "--delete",
                    "--prune",
                    "-f",
                    "--force",
                    "--force-with-lease",
                    "--no-force-with-lease",
                    "--force-if-includes",
                    "--no-force-if-includes",
                    "-u",
                    "--set-upstream",
                    "--atomic",
                    "--no-atomic",
                    "--thin",
                    "--no-thin",
                    "-q",
                    "--quiet",
                    "-v",
                    "--verbose",
                    "--progress",
                    "--no-progress",
                    "--no-verify",
                    "--verify",
                    "--signed",
                    "--no-signed",
                    "-4",
                    "--ipv4",
                    "-6",
                    "--ipv6",
                ],
                &[],
            ),
            "ls-remote" => remote(
                "ls-remote",
                &[
                    "-h",
                    "--heads",
                    "-b",
                    "--branches",
                    "-t",
                    "--tags",
                    "--refs",
                    "-q",
                    "--quiet",
                    "--exit-code",
                    "--get-url",
                    "--sort",
                    "--symref",
                ],
                &["--sort"],
            ),
            "version" => s("version", &["--build-options"], &[]),
            "var" => s("var", &["-l"], &[]),
            "check-ignore" => s(
                "check-ignore",
                &[
                    "-q",
                    "--quiet",
                    "-v",
                    "--verbose",
                    "-n",
                    "--non-matching",
                    "-z",
                    "--no-index",
                ],
                &[],
            ),
            "check-attr" => s("check-attr", &["-a", "--all", "--cached", "-z"], &[]),
            "symbolic-ref" => s(
                "symbolic-ref",
                &["-q", "--quiet", "--short", "--no-recurse"],
                &[],
            ),
            "reflog" => log("reflog"),
            "cherry" => s("cherry", &["-v", "--abbrev"], &[]),
            "name-rev" => s(
                "name-rev",
                &[
                    "--tags",
                    "--refs",
                    "--exclude",
                    "--all",
                    "--annotate-stdin",
                    "--name-only",
                    "--no-undefined",
                    "--always",
                ],
                &[],
            ),
            "range-diff" => s("range-diff", DIFF_FLAGS, &[]),
            "fsck" => s(
                "fsck",
                &[
                    "--unreachable",
                    "--dangling",
                    "--no-dangling",
                    "--root",
                    "--tags",
                    "--cache",
                    "--no-reflogs",
                    "--full",
                    "--no-full",
                    "--connectivity-only",
                    "--strict",
                    "--verbose",
                    "--lost-found",
                    "--name-objects",
                    "--progress",
                    "--no-progress",
                ],
                &[],
            ),
            "gc" => s(
                "gc",
                &[
                    "--aggressive",
                    "--auto",
                    "--prune",
                    "--no-prune",
                    "--quiet",
                    "--force",
                    "--keep-largest-pack",
                ],
                &[],
            ),
            "update-index" => s(
                "update-index",
                &[
                    "--refresh",
                    "--really-refresh",
                    "-q",
                    "--assume-unchanged",
                    "--no-assume-unchanged",
                    "--skip-worktree",
                    "--no-skip-worktree",
                ],
                &[],
            ),
            // Index and refs only: `--hard`, `--merge`, `--keep` write the worktree.
            "reset" => s(
                "reset",
                &[
                    "--soft",
                    "--mixed",
                    "-q",
                    "--quiet",
                    "-N",
                    "--no-refresh",
                    "--refresh",
                ],
                &[],
            ),
            "stash" => only(
                "stash",
                &[
                    "--stat",
                    "-p",
                    "--patch",
                    "--name-only",
                    "--oneline",
                    "-u",
                    "--include-untracked",
                    "--only-untracked",
                ],
                &["list", "show"],
            ),
            _ => return None,
        })
    }

    /// Checks git's arguments (after `git`).
    pub fn check(args: &[String], cwd: &Path, entry: &Entry) -> Result<(), Refusal> {
        let mut i = 0;
        // Global options.
        let sub = loop {
            let Some(word) = args.get(i) else {
                return Ok(());
            };
            i += 1;
            if entry.allows(word) {
                continue;
            }
            if !word.starts_with('-') {
                break word.as_str();
            }
            if GLOBAL.contains(&word.as_str()) {
                continue;
            }
            let name = word.split_once('=').map_or(word.as_str(), |(n, _)| n);
            let why = GLOBAL_WHY
                .iter()
                .find(|(n, _)| {
                    *n == name
                        || (n.len() == 2 && !n.starts_with("--") && word.starts_with(n))
                        || (n.starts_with("--") && name.len() > 3 && n.starts_with(name))
                })
                .map_or_else(
                    || format!("`{word}` is not among the global options stockade lets an excluded git take"),
                    |(_, why)| (*why).to_string(),
                );
            // `-c KEY=VALUE`, `-C DIR`: name the value too.
            let takes_value = matches!(
                word.as_str(),
                "-c" | "-C"
                    | "--git-dir"
                    | "--work-tree"
                    | "--namespace"
                    | "--config-env"
                    | "--attr-source"
            );
            let value: Vec<&str> = match args.get(i) {
                Some(v) if takes_value => vec![word.as_str(), v.as_str()],
                _ => vec![word.as_str()],
            };
            return Err(entry.refuse(&value, why));
        };
        let Some(model) = self::sub(sub) else {
            // An alias or a subcommand stockade has no model of: every word must be allowed.
            if entry.allows(sub) {
                return rest_allowed(&args[i..], entry);
            }
            let why = if WORKTREE_WRITERS.contains(&sub) {
                format!("`git {sub}` writes the working tree from commits the sandbox could have made (a file host tools run, such as `.envrc` or `.vscode/tasks.json`, would appear on the host, past the sandbox's protected paths): run it inside the sandbox, an excluded git fetches and pushes")
            } else {
                format!("`git {sub}` is not among the subcommands stockade lets an excluded git run (aliases and other subcommands can run programs or write outside the repository)")
            };
            return Err(entry.refuse(&[sub], why));
        };
        check_sub(&model, &args[i..], cwd, entry)
    }

    fn rest_allowed(words: &[String], entry: &Entry) -> Result<(), Refusal> {
        match words.iter().find(|w| !entry.allows(w)) {
            Some(w) => Err(entry.refuse(
                &[w],
                format!("`{w}` follows a subcommand stockade has no model of, and is not among the entry's allowed_args"),
            )),
            None => Ok(()),
        }
    }

    fn check_sub(model: &Sub, words: &[String], cwd: &Path, entry: &Entry) -> Result<(), Refusal> {
        let name = model.name;
        let mut positional: Vec<&str> = Vec::new();
        let mut options_done = false;
        let mut i = 0;
        while let Some(word) = words.get(i) {
            i += 1;
            if entry.allows(word) {
                continue;
            }
            if options_done || !word.starts_with('-') || word == "-" {
                positional.push(word);
                continue;
            }
            if word == "--" {
                options_done = true;
                continue;
            }
            let refuse_option = |shown: &str| {
                entry.refuse(
                    &[word.as_str()],
                    format!("`{shown}` is not among the options stockade lets an excluded `git {name}` take (options that run a program, write or read a file outside the repository, or name another repository are refused; git also takes abbreviations of long options, so only full names of known ones pass)"),
                )
            };
            if let Some(long) = word.strip_prefix("--") {
                let (opt, has_value) = match long.split_once('=') {
                    Some((o, _)) => (format!("--{o}"), true),
                    None => (word.clone(), false),
                };
                if model.valued.contains(&opt.as_str()) {
                    if !has_value {
                        i += 1; // its value
                    }
                    continue;
                }
                if model.flag(&opt) {
                    continue;
                }
                return Err(refuse_option(&opt));
            }
            // Short options, possibly bundled (`-sb`), a value attached or next (`-n5`, `-m x`).
            if model.counts && word[1..].chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            if model.flag(word) && !model.valued.contains(&word.as_str()) {
                continue; // also multi-letter flags such as `-vv`
            }
            let chars: Vec<char> = word[1..].chars().collect();
            for (k, c) in chars.iter().enumerate() {
                let opt = format!("-{c}");
                if model.valued.contains(&opt.as_str()) {
                    if k + 1 == chars.len() {
                        i += 1; // its value is the next word
                    }
                    break;
                }
                if !model.flag(&opt) {
                    return Err(refuse_option(&opt));
                }
                // A number after a flag is its value (`-M90%`, `-U3`).
                let rest = &chars[k + 1..];
                if !rest.is_empty()
                    && rest
                        .iter()
                        .all(|c| c.is_ascii_digit() || *c == '%' || *c == '.')
                {
                    break;
                }
            }
        }
        if name == "diff" {
            check_no_index(words, cwd, entry)?;
        }
        match model.words {
            Words::Free => Ok(()),
            Words::Remote => {
                // `fetch --multiple a b`: each is a repository; otherwise the first.
                let multiple = words.iter().any(|w| w == "--multiple");
                let repos = if multiple {
                    &positional[..]
                } else {
                    &positional[..positional.len().min(1)]
                };
                repos
                    .iter()
                    .try_for_each(|repo| check_repository(repo, name, cwd, entry))
            }
            Words::Only(first) => match positional.first() {
                Some(w) if !first.contains(w) => Err(entry.refuse(
                    &[w],
                    format!(
                        "an excluded `git {name}` may only run {}",
                        first
                            .iter()
                            .map(|f| format!("`{name} {f}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )),
                _ => Ok(()),
            },
            Words::ConfigRead => check_config_read(words, &positional, entry),
        }
    }

    /// `git diff A B` is `git diff --no-index A B` when either lies outside the repository (or
    /// git finds none): it then prints both files, wherever they are (`git diff /etc/shadow
    /// /dev/null`, `~/.ssh/id_rsa`, or through a link the sandbox made: `git diff l/.ssh/id_rsa
    /// x` with `l -> ~`), on the host and unmasked. git's rule: exactly two words from the
    /// first that is `--` or no option (a `--` among them not counted). So those two must be
    /// relative, without `..`, and reach no symbolic link.
    fn check_no_index(words: &[String], cwd: &Path, entry: &Entry) -> Result<(), Refusal> {
        let i = words
            .iter()
            .position(|w| w == "--" || !w.starts_with('-'))
            .unwrap_or(words.len());
        // git 2.47 takes `diff -- A B` so too: the words past a `--` count.
        let pair: Vec<&String> = words[i..].iter().filter(|w| *w != "--").collect();
        if pair.len() != 2 {
            return Ok(());
        }
        for word in pair {
            if entry.allows(word) {
                continue;
            }
            let path = Path::new(word.as_str());
            let mut at = cwd.to_path_buf();
            let mut link = false;
            let escapes = path.is_absolute()
                || path.components().any(|c| {
                    if !matches!(c, std::path::Component::Normal(_)) {
                        return !matches!(c, std::path::Component::CurDir);
                    }
                    at.push(c);
                    link |=
                        std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink());
                    false
                });
            if escapes || link {
                return Err(entry.refuse(
                    &[word.as_str()],
                    "`git diff` given two paths, one outside the repository or through a symbolic link, compares the files themselves (`--no-index`): it would print any file of the host, masks notwithstanding; name paths inside the repository, relative and without `..`",
                ));
            }
        }
        Ok(())
    }

    /// `git config` only reads: `--get*`, `-l`/`--list`, or the `get`/`list` subcommands,
    /// and never `--file`/`--blob` (files or blobs stockade did not pick).
    fn check_config_read(
        words: &[String],
        positional: &[&str],
        entry: &Entry,
    ) -> Result<(), Refusal> {
        let reads = words.iter().any(|w| {
            matches!(
                w.as_str(),
                "--get" | "--get-all" | "--get-regexp" | "--get-urlmatch" | "-l" | "--list"
            )
        });
        let sub_reads = matches!(positional.first(), Some(&("get" | "list")));
        if reads && positional.len() <= 2 || sub_reads && positional.len() <= 2 {
            return Ok(());
        }
        Err(entry.refuse(
            &[positional.first().copied().unwrap_or("config")],
            "an excluded `git config` may only read (`--get`, `--get-all`, `--get-regexp`, `--list`, `get`, `list`): a key it writes (core.pager, alias.*, core.fsmonitor in the global config) runs on the host later",
        ))
    }

    /// The repository a `fetch`/`pull`/`push`/`ls-remote` talks to: a configured remote's
    /// name (not also a path in the working directory) or a network URL. A local path,
    /// `file://` or a `<transport>::<address>` (`ext::sh -c ...` runs a program; other
    /// transports run `git-remote-<name>`) is refused: git would run its upload or receive
    /// side on a repository the sandbox could have made.
    pub fn check_repository(
        repo: &str,
        sub: &str,
        cwd: &Path,
        entry: &Entry,
    ) -> Result<(), Refusal> {
        let refuse = |why: &str| {
            Err(entry.refuse(
                &[repo],
                format!("`git {sub}` would talk to `{repo}`: {why}; name a configured remote or a network URL (https://, ssh://, git://, host:path)"),
            ))
        };
        if repo.contains("::") {
            return refuse(
                "a `<transport>::` address runs a transport program (`ext::` runs any command)",
            );
        }
        if let Some((scheme, _)) = repo.split_once("://") {
            let scheme = scheme.to_ascii_lowercase();
            return match scheme.as_str() {
                "https" | "http" | "ssh" | "git" | "git+ssh" | "ssh+git" => Ok(()),
                "file" => {
                    refuse("a `file://` repository is a local one the sandbox could have made")
                }
                _ => refuse("an unknown scheme runs a `git-remote-<scheme>` helper"),
            };
        }
        let colon = repo.find(':');
        let slash = repo.find('/');
        let scp = match (colon, slash) {
            (Some(c), Some(s)) => c < s,
            (Some(_), None) => true,
            _ => false,
        };
        if scp && !repo.starts_with('.') && !repo.starts_with('/') {
            // `[user@]host:path`, git's scp-like syntax for ssh.
            return Ok(());
        }
        if slash.is_some() || repo.starts_with('.') || repo.starts_with('~') {
            return refuse("a local path is a repository the sandbox could have made");
        }
        if std::fs::symlink_metadata(cwd.join(repo)).is_ok() {
            return refuse("it also names a path in the working directory, which git takes for a local repository when no remote has that name");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn entry(allowed: Option<&[String]>) -> Entry<'_> {
        Entry {
            index: 3,
            file: Some(Path::new("/home/u/.config/stockade/policy.toml")),
            allowed_args: allowed,
            runs_workspace_files: false,
        }
    }

    fn git(args: &str) -> Result<(), Refusal> {
        let cwd = std::env::temp_dir();
        check(Path::new("/usr/bin/git"), &words(args), &cwd, &entry(None))
    }

    #[test]
    fn everyday_git_passes() {
        for ok in [
            "",
            "--version",
            "status",
            "status -sb",
            "status --porcelain=v2 -uno",
            "--no-pager log --oneline -n 5",
            "log -5 --stat --format=%H%x09%s",
            "log -p -U3 -M90% -- src/main.rs",
            "log -L1,5:src/lib.rs",
            "diff --cached --stat",
            "diff HEAD~1 -- a.txt",
            "show HEAD:README.md",
            "branch -vv",
            "branch -u origin/main",
            "rev-parse --show-toplevel",
            "add -A",
            "commit -m wip -a",
            "commit --amend --no-edit",
            "reset HEAD~1",
            "reset --soft HEAD~1",
            "stash list",
            "stash show -p",
            "fetch",
            "fetch --all --prune",
            "fetch origin",
            "fetch --multiple origin upstream",
            "push -u origin HEAD",
            "push origin main:main",
            "push --force-with-lease origin topic",
            "push https://git.example.com/me/repo.git main",
            "push git@github.com:me/repo.git",
            "ls-remote origin",
            "remote -v",
            "remote get-url origin",
            "worktree list",
            "config --get user.name",
            "config --global --get user.email",
            "config --list --show-origin",
            "config get user.name",
            "grep -n -e TODO -- src",
            "blame -L 10,20 src/lib.rs",
            "describe --tags --always --dirty",
            "tag -l",
            "cat-file -p HEAD",
        ] {
            assert!(git(ok).is_ok(), "{ok}: {:?}", git(ok));
        }
    }

    #[test]
    fn code_running_and_redirecting_git_arguments_are_refused() {
        for (bad, named) in [
            ("-c core.fsmonitor=./x status", "-c core.fsmonitor=./x"),
            ("-ccore.pager=./x log", "-ccore.pager=./x"),
            ("--config-env=core.pager=X log", "--config-env=core.pager=X"),
            ("--exec-path=./bin status", "--exec-path=./bin"),
            ("-C sub status", "-C sub"),
            ("--git-dir=planted status", "--git-dir=planted"),
            ("--git-dir planted status", "--git-dir planted"),
            ("--work-tree=/ status", "--work-tree=/"),
            ("--namespace=x log", "--namespace=x"),
            ("-p log", "-p"),
            ("--paginate log", "--paginate"),
            ("--bare status", "--bare"),
            ("difftool -x ./x", "difftool"),
            ("mergetool", "mergetool"),
            ("bisect run ./x", "bisect"),
            ("filter-branch --tree-filter ./x", "filter-branch"),
            ("submodule foreach ./x", "submodule"),
            ("archive --remote=./x HEAD", "archive"),
            ("clone -u ./x https://h/r d", "clone"),
            ("clone --template=./t https://h/r d", "clone"),
            ("init --template=./t", "init"),
            ("help -w log", "help"),
            ("my-alias", "my-alias"),
            ("rebase --exec ./x main", "rebase"),
            ("checkout evil -- .envrc", "checkout"),
            ("switch evil", "switch"),
            ("restore --source=evil .envrc", "restore"),
            ("reset --hard evil", "--hard"),
            ("stash pop", "pop"),
            ("merge evil", "merge"),
            ("pull origin main", "pull"),
            ("cherry-pick evil", "cherry-pick"),
            ("mv x .envrc", "mv"),
            ("clean -fdx", "clean"),
            ("status --recurse-submodules", "--recurse-submodules"),
            ("grep --recurse-submodules x", "--recurse-submodules"),
            ("fetch --recurse-submodules origin", "--recurse-submodules"),
            ("grep -O./x TODO", "-O./x"),
            (
                "grep --open-files-in-pager=./x TODO",
                "--open-files-in-pager=./x",
            ),
            ("grep --no-index secret /home", "--no-index"),
            ("diff --output=/home/u/.bashrc", "--output=/home/u/.bashrc"),
            ("diff --no-index /etc/shadow /dev/null", "--no-index"),
            ("diff --ext-diff", "--ext-diff"),
            ("log --output=/home/u/.profile", "--output=/home/u/.profile"),
            ("log --ou=/home/u/.profile", "--ou=/home/u/.profile"),
            ("commit -F /home/u/.ssh/id_rsa", "-F"),
            (
                "commit --file=/home/u/.ssh/id_rsa",
                "--file=/home/u/.ssh/id_rsa",
            ),
            ("commit -t ./tpl", "-t"),
            ("commit -e -m x", "-e"),
            ("merge -s ./x main", "merge"),
            ("fetch --upload-pack=./x origin", "--upload-pack=./x"),
            ("fetch --upl=./x origin", "--upl=./x"),
            ("fetch -u ./x origin", "-u"),
            ("ls-remote --upload-pack=./x origin", "--upload-pack=./x"),
            ("push --receive-pack=./x origin", "--receive-pack=./x"),
            ("push --exec=./x origin", "--exec=./x"),
            ("fetch ext::sh%-c%touch%x", "ext::sh%-c%touch%x"),
            ("push ext::sh%-c%touch%x main", "ext::sh%-c%touch%x"),
            ("ls-remote fd::3", "fd::3"),
            ("fetch file:///tmp/planted", "file:///tmp/planted"),
            ("fetch ./planted", "./planted"),
            ("fetch /tmp/planted", "/tmp/planted"),
            ("fetch sub/planted", "sub/planted"),
            ("fetch --multiple origin ./planted", "./planted"),
            ("push evil+x://host/repo", "evil+x://host/repo"),
            ("config --global core.pager ./x", "core.pager"),
            ("config core.fsmonitor ./x", "core.fsmonitor"),
            ("config set core.pager ./x", "set"),
            ("config --file ./x --list", "--file"),
            ("config --edit", "--edit"),
            ("remote add evil ext::sh", "add"),
            ("remote set-url origin ext::sh", "set-url"),
            ("worktree add /home/u/x", "add"),
            ("tag -F /home/u/.ssh/id_rsa v1", "-F"),
            (
                "add --pathspec-from-file=/etc/x",
                "--pathspec-from-file=/etc/x",
            ),
            ("blame --contents /home/u/.ssh/id_rsa a", "--contents"),
            ("hash-object -w /home/u/.ssh/id_rsa", "hash-object"),
            (
                "format-patch -o /home/u/.config/autostart HEAD~1",
                "format-patch",
            ),
            ("bundle create /home/u/x HEAD", "bundle"),
            ("apply x.patch", "apply"),
            ("am x.mbox", "am"),
            ("notes add -m x", "notes"),
            ("send-email x", "send-email"),
        ] {
            let refused = git(bad).expect_err(bad);
            assert_eq!(refused.construct, Construct::ExcludedArgument, "{bad}");
            assert!(
                refused.text.contains(named),
                "{bad}: names {:?}, not {named:?}",
                refused.text
            );
            assert!(
                refused.reason.contains("allowed_args = [")
                    && refused
                        .reason
                        .contains("entry 3 in /home/u/.config/stockade/policy.toml"),
                "{bad}: {}",
                refused.reason
            );
            assert_eq!(refused.code(), "E_SANDBOX_VIOLATION");
        }
    }

    #[test]
    fn a_diff_of_two_paths_reaching_outside_the_repository_is_refused() {
        let dir = std::env::temp_dir().join(format!("stockade-noindex-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("l");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/etc", &link).unwrap();
        let at = |args: &str| check(Path::new("git"), &words(args), &dir, &entry(None));
        for bad in [
            "diff /etc/shadow /dev/null",
            "diff --stat /etc/shadow README",
            "diff README ../../etc/passwd",
            "diff -- README /etc/passwd",
            "diff l/passwd README",
        ] {
            let err = at(bad).unwrap_err();
            assert_eq!(err.construct, Construct::ExcludedArgument, "{bad}");
        }
        // Controls: revisions, paths inside, three words (no `--no-index` then).
        for ok in [
            "diff HEAD~1 HEAD",
            "diff main..topic",
            "diff README src/x",
            "diff HEAD~1 -- a.txt",
            "diff --cached",
        ] {
            assert!(at(ok).is_ok(), "{ok}: {:?}", at(ok));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_remote_name_that_is_also_a_path_here_is_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(dir.path().join("origin")).unwrap_or_else(|e| panic!("{e}"));
        let e = entry(None);
        assert!(git::check(&words("fetch origin"), dir.path(), &e).is_err());
        assert!(git::check(&words("fetch upstream"), dir.path(), &e).is_ok());
    }

    #[test]
    fn allowed_args_let_words_through_and_nothing_else() {
        let allowed = vec!["-c".to_string(), "core.fsmonitor=*".to_string()];
        let e = entry(Some(&allowed));
        let cwd = std::env::temp_dir();
        let git_path = Path::new("/usr/bin/git");
        assert!(check(git_path, &words("-c core.fsmonitor=./x status"), &cwd, &e).is_ok());
        assert!(check(git_path, &words("-c core.pager=./x status"), &cwd, &e).is_err());
        // An alias allowed by name: what follows it must be allowed too.
        let alias = vec!["st".to_string()];
        let e = entry(Some(&alias));
        assert!(check(git_path, &words("st"), &cwd, &e).is_ok());
        assert!(check(git_path, &words("st --x"), &cwd, &e).is_err());
    }

    #[test]
    fn a_program_without_a_model_needs_allowed_args() {
        let cwd = std::env::temp_dir();
        let make = Path::new("/usr/bin/make");
        let none = entry(None);
        let refused = check(make, &words("test"), &cwd, &none).expect_err("no allowed_args");
        assert!(
            refused.reason.contains("allowed_args = [\"test\"]"),
            "{}",
            refused.reason
        );
        // Even with no arguments: the entry must say what the program may be given.
        assert!(check(make, &[], &cwd, &none).is_err());
        let empty: Vec<String> = Vec::new();
        assert!(check(make, &[], &cwd, &entry(Some(&empty))).is_ok());
        assert!(check(make, &words("test"), &cwd, &entry(Some(&empty))).is_err());
        let some = vec!["test".to_string(), "-j*".to_string()];
        let e = entry(Some(&some));
        assert!(check(make, &words("test -j4"), &cwd, &e).is_ok());
        let refused = check(make, &words("test -f ./evil.mk"), &cwd, &e).expect_err("-f");
        assert_eq!(refused.text, "-f");
    }

    /// A program without a model reads files from where it runs and from the paths it is
    /// given: both must lie outside the writable roots, unless the entry accepts it.
    #[test]
    fn a_program_without_a_model_runs_no_workspace_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let base = std::fs::canonicalize(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let ws = base.join("ws");
        let out = base.join("out");
        for d in [ws.join("sub"), out.clone()] {
            std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(ws.join("x.mk"), "all:\n").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(ws.join("x.mk"), out.join("link.mk"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(ws.join("later.mk"), out.join("dangling.mk"))
            .unwrap_or_else(|e| panic!("{e}"));
        let roots = vec![ws.clone()];
        let make = Path::new("/usr/bin/make");
        let star = vec!["*".to_string()];
        let e = entry(Some(&star));
        let home = base.join("home");
        std::fs::create_dir_all(home.join("proj")).unwrap_or_else(|e| panic!("{e}"));
        let homes = vec![home.clone()];
        let config = vec![home.join(".config")];
        let user = UserPlaces {
            home: &home,
            homes: &homes,
            config_dirs: &config,
        };
        let run = |cwd: &Path, args: &str| {
            check_workspace_files(make, &words(args), cwd, &user, &roots, &e)
        };
        std::os::unix::fs::symlink(&out, ws.join("to-out")).unwrap_or_else(|e| panic!("{e}"));
        // The working directory in a writable root (its top, or below), whatever the words.
        for cwd in [ws.clone(), ws.join("sub"), ws.join("sub/..")] {
            let refused = run(&cwd, "test").expect_err("cwd in the workspace");
            assert_eq!(refused.construct, Construct::ExcludedWorkspaceFiles);
            for part in [
                "/usr/bin/make would run in",
                &format!("the writable root {}", ws.display()),
                "reads files from its working directory (a Makefile, a Dockerfile, package.json scripts)",
                "`runs_workspace_files = true` in [[commands]] entry 3 in /home/u/.config/stockade/policy.toml",
                "outside every writable root",
            ] {
                assert!(refused.reason.contains(part), "{part}: {}", refused.reason);
            }
        }
        // Outside: everyday words pass.
        assert!(run(&out, "test -j4").is_ok());
        assert!(run(&out, "").is_ok());
        // Words naming a path in the workspace: absolute, relative, `..`, glued to an
        // option, after `=`, in an `a:b` list, through a link (dangling too), not yet there.
        let ws_s = ws.display().to_string();
        for args in [
            format!("-f {ws_s}/x.mk"),
            format!("-C {ws_s}"),
            format!("-C{ws_s}/sub"),
            format!("--file={ws_s}/x.mk"),
            format!("--include-dir=/usr:{ws_s}"),
            "-f ../ws/x.mk".to_string(),
            "-f link.mk".to_string(),
            "-f ./dangling.mk".to_string(),
            format!("-f {ws_s}/new/later.mk"),
            format!("@{ws_s}/args"),
            format!("file://{ws_s}/x.mk"),
            // Out again, but through a link in the workspace the sandbox can turn.
            format!("-f {ws_s}/to-out/link.mk"),
            format!("-f {ws_s}/to-out/../out/x.mk"),
            // A leading `~` make and npm expand with the run's HOME (issue 30 red team, F3).
            "-f ~/../ws/x.mk".to_string(),
            "--file=~/../ws/x.mk".to_string(),
            "-f~/../ws/x.mk".to_string(),
            "test MAKEFILES=~/../ws/x.mk".to_string(),
            "-I~/../ws".to_string(),
            "--prefix=~/../ws".to_string(),
            "--include-dir=/usr:~/../ws".to_string(),
            "@~/../ws/args".to_string(),
            "-f ~//../ws/x.mk".to_string(),
        ] {
            let refused = run(&out, &args).expect_err(&args);
            assert_eq!(
                refused.construct,
                Construct::ExcludedWorkspaceFiles,
                "{args}"
            );
            assert!(
                refused.reason.contains("runs_workspace_files = true"),
                "{args}: {}",
                refused.reason
            );
        }
        // Another account's home (not looked up): it may lead anywhere.
        for args in ["-f ~root/x.mk", "--file=~u/x.mk", "-f ~+/x.mk", "-I~-"] {
            let refused = run(&out, args).expect_err(args);
            assert_eq!(refused.construct, Construct::ExcludedWorkspaceFiles);
            assert!(
                refused.reason.contains("another account's home")
                    && refused.reason.contains("runs_workspace_files = true"),
                "{args}: {}",
                refused.reason
            );
        }
        // Paths outside every root pass, `~` ones too; a `~` not leading is no home.
        assert!(run(&out, &format!("-f {}/x.mk -C /usr", out.display())).is_ok());
        assert!(run(&out, "-f ../ws-not/x.mk").is_ok());
        assert!(run(&out, "-f ~/proj/x.mk -C ~ --prefix=~/proj backup~ a~b").is_ok());
        // The per-user configuration (the home, $XDG_CONFIG_HOME) in a writable root.
        for (homes, dirs) in [
            (vec![ws.clone()], vec![]),
            (vec![home.clone()], vec![ws.join(".config")]),
        ] {
            let user = UserPlaces {
                home: &home,
                homes: &homes,
                config_dirs: &dirs,
            };
            let refused = check_workspace_files(make, &words("test"), &out, &user, &roots, &e)
                .expect_err("config in the workspace");
            assert_eq!(refused.construct, Construct::ExcludedWorkspaceFiles);
            assert!(
                refused.reason.contains("per-user configuration"),
                "{}",
                refused.reason
            );
        }
        // A writable root in a place programs read per-user configuration and plugins from
        // (issue 30 red team, F4): `--allow-write ~/.npmrc`, `~/.docker`, `~/.config/x`,
        // `~/.local/bin`, `~/.cache/pip`, or a dotfile that is a link into a root.
        for place in [
            ".npmrc",
            ".docker",
            ".config/gh",
            ".config",
            ".local/bin",
            ".cache/pip",
        ] {
            let root = home.join(place);
            std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("{e}"));
            let roots = vec![ws.clone(), root.clone()];
            let refused = check_workspace_files(make, &words("test"), &out, &user, &roots, &e)
                .expect_err(place);
            assert_eq!(
                refused.construct,
                Construct::ExcludedWorkspaceFiles,
                "{place}"
            );
            for part in [
                &format!("the writable root {}", root.display()),
                "per-user configuration and plugins there (~/.npmrc, ~/.docker/cli-plugins",
                "`runs_workspace_files = true` in [[commands]] entry 3",
            ] {
                assert!(
                    refused.reason.contains(part),
                    "{place}: {part}: {}",
                    refused.reason
                );
            }
        }
        let dotfiles = home.join("dotfiles");
        std::fs::create_dir_all(&dotfiles).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(dotfiles.join("npmrc"), home.join(".npmrc-link"))
            .unwrap_or_else(|e| panic!("{e}"));
        let with_dotfiles = vec![ws.clone(), dotfiles.clone()];
        let refused = check_workspace_files(make, &words("test"), &out, &user, &with_dotfiles, &e)
            .expect_err("a dotfile links into a root");
        assert!(
            refused.text.ends_with(".npmrc-link") && refused.reason.contains("leads to"),
            "{refused:?}"
        );
        // Controls: a plain project directory below the home is the normal workspace (even
        // beside hidden entries, and with a link from the home elsewhere into it).
        std::fs::remove_file(home.join(".npmrc-link")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(home.join("proj"), home.join("proj-link"))
            .unwrap_or_else(|e| panic!("{e}"));
        for plain in [home.join("proj"), home.join("dotfiles")] {
            let roots = vec![plain.clone()];
            assert!(
                check_workspace_files(
                    make,
                    &words("test -f ~/../out/x.mk"),
                    &out,
                    &user,
                    &roots,
                    &e
                )
                .is_ok(),
                "{}",
                plain.display()
            );
        }
        // The entry accepts it: everything passes.
        let accepted = Entry {
            runs_workspace_files: true,
            ..entry(Some(&star))
        };
        let ws_home = vec![ws.clone()];
        let ws_user = UserPlaces {
            home: &ws,
            homes: &ws_home,
            config_dirs: &[],
        };
        let accepts = |cwd: &Path, args: &str| {
            check_workspace_files(make, &words(args), cwd, &ws_user, &roots, &accepted)
        };
        assert!(accepts(&ws, "test").is_ok());
        assert!(accepts(&out, &format!("-f {ws_s}/x.mk")).is_ok());
        assert!(accepts(&out, "-f ~/../ws/x.mk -f ~root/x").is_ok());
        let npmrc = vec![home.join(".npmrc")];
        assert!(
            check_workspace_files(make, &words("test"), &out, &user, &npmrc, &accepted).is_ok()
        );
        // git has its own rules for where it runs.
        let git = Path::new("/usr/bin/git");
        assert!(check_workspace_files(git, &words("status"), &ws, &ws_user, &roots, &e).is_ok());
    }

    #[test]
    fn patterns() {
        assert!(pattern_matches("status", "status"));
        assert!(!pattern_matches("status", "status2"));
        assert!(pattern_matches("--format=*", "--format=%H"));
        assert!(!pattern_matches("--format=*", "--output=x"));
        assert!(pattern_matches("*", "anything"));
    }
}
