//! Git's state of a command stopped part-way (a rebase, a cherry-pick or revert sequence,
//! `git am`, rerere's conflicts): files in a git dir that say what git does when someone runs
//! `git rebase --continue`, `git cherry-pick --continue` or the next `git commit`. Some of what they hold runs code then, on the host if the
//! user continues there: an `exec` line of a rebase's todo list is a shell command, and a
//! merge strategy that is not one of git's own runs `git-merge-<name>` from `PATH`.
//!
//! An allow-list, as for configs ([`crate::git_config`]): every line this check does not
//! know to run nothing counts as one that may ([`live_lines`]). A run may leave the state as
//! it found it, or change it with known lines only: the sweep after the run compares the two.
//!
//! Pure and allocation-free, like the rest of the crate.

/// The state files, relative to a git dir: what git reads on `--continue`.
pub const STATE_FILES: [&str; 7] = [
    "rebase-merge/git-rebase-todo",
    "sequencer/todo",
    "rebase-merge/strategy",
    "rebase-merge/strategy_opts",
    "sequencer/opts",
    "rebase-apply/apply-opt",
    "MERGE_RR",
];

/// How much of a state file is read: a larger one counts as live whole.
pub const STATE_LIMIT: usize = 4 << 20;

/// The todo list's commands that run nothing (`git rebase -i`'s list, full and one-letter;
/// the sequencer's `pick` and `revert`). Not here: `exec` and `x`, which run the rest of the
/// line with the shell.
const TODO_COMMANDS: [&str; 24] = [
    "pick",
    "p",
    "revert",
    "reword",
    "r",
    "edit",
    "e",
    "squash",
    "s",
    "fixup",
    "f",
    "drop",
    "d",
    "label",
    "l",
    "reset",
    "t",
    "merge",
    "m",
    "break",
    "b",
    "update-ref",
    "u",
    "noop",
];

/// Git's own merge strategies (built in or shipped with it), which run nothing of a
/// repository's. Any other name runs `git-merge-<name>`, found on `PATH`.
const STRATEGIES: [&str; 6] = ["ort", "recursive", "resolve", "octopus", "ours", "subtree"];

/// The keys git writes in `sequencer/opts` (section `options`), all but `strategy` taking
/// values that run nothing.
const OPTS_KEYS: [&str; 14] = [
    "allow-empty",
    "allow-empty-message",
    "allow-ff",
    "allow-rerere-auto",
    "default-msg-cleanup",
    "edit",
    "gpg-sign",
    "keep-redundant-commits",
    "mainline",
    "no-commit",
    "record-origin",
    "signoff",
    "strategy",
    "strategy-option",
];

/// Which state file `rel` (one of [`STATE_FILES`]) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A todo list: one command a line.
    Todo,
    /// `rebase-merge/strategy`: a strategy's name.
    Strategy,
    /// `rebase-merge/strategy_opts`: the strategy's options (`-X`), quoted, on one line.
    StrategyOpts,
    /// `sequencer/opts`: a config file of section `options`.
    Opts,
    /// `MERGE_RR`: rerere's conflicts in progress, `<id>\t<path>` records ended by NUL. The
    /// user's next `git commit` records each path's text into `rr-cache`: an absolute path
    /// (or one with `..`) copied a host secret there for the next run to read (red team issue
    /// 32, eighth round).
    MergeRr,
    /// `rebase-apply/apply-opt`: the options `git am` passes to `git apply`, quoted, on one
    /// line (`--build-fake-ancestor=<file>` writes an index over any file).
    ApplyOpts,
    /// Anything else: every line of it is live.
    Any,
}

fn kind(rel: &str) -> Kind {
    match rel {
        "rebase-merge/git-rebase-todo" | "sequencer/todo" => Kind::Todo,
        "rebase-merge/strategy" => Kind::Strategy,
        "rebase-merge/strategy_opts" => Kind::StrategyOpts,
        "sequencer/opts" => Kind::Opts,
        "MERGE_RR" => Kind::MergeRr,
        "rebase-apply/apply-opt" => Kind::ApplyOpts,
        _ => Kind::Any,
    }
}

/// Whether `option` (a `-X` option, without its `--`) is one of the merge options of git's
/// own strategies, with a plain value. Any other reaches `git-merge-resolve` and
/// `git-merge-octopus` (shell scripts) as an option of `git read-tree`:
/// `--index-output=<file>` writes an index over any file the user can write (red team
/// issue 32, eighth round).
fn strategy_option_is_inert(option: &str) -> bool {
    let (name, value) = match option.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (option, None),
    };
    let digits = |v: &str| {
        let v = v.strip_suffix('%').unwrap_or(v);
        !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())
    };
    match (name, value) {
        (
            "ours"
            | "theirs"
            | "patience"
            | "histogram"
            | "ignore-space-change"
            | "ignore-all-space"
            | "ignore-space-at-eol"
            | "ignore-cr-at-eol"
            | "renormalize"
            | "no-renormalize"
            | "no-renames"
            | "find-renames"
            | "subtree",
            None,
        ) => true,
        ("diff-algorithm", Some(v)) => {
            matches!(
                v,
                "patience" | "minimal" | "histogram" | "myers" | "default"
            )
        }
        ("find-renames" | "rename-threshold", Some(v)) => digits(v),
        ("subtree", Some(v)) => {
            !v.is_empty()
                && !v.starts_with('-')
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b))
        }
        _ => false,
    }
}

/// Whether a line of blank-separated words, each plain or wholly in `"..."` or `'...'` (no
/// other quote or backslash inside: git's `split_cmdline` and `sq_dequote` read them), has
/// only words `inert` accepts.
fn words_are_inert(line: &str, inert: impl Fn(&str) -> bool) -> bool {
    line.split([' ', '\t'])
        .filter(|w| !w.is_empty())
        .all(|word| {
            let bare = (word.strip_prefix('"').and_then(|w| w.strip_suffix('"')))
                .or_else(|| word.strip_prefix('\'').and_then(|w| w.strip_suffix('\'')))
                .unwrap_or(word);
            !bare.contains(['"', '\'', '\\']) && inert(bare)
        })
}

/// Whether a `strategy_opts` line is a list of inert options, each with an optional leading
/// `--` (`parse_strategy_opts`).
fn strategy_opts_are_inert(line: &str) -> bool {
    words_are_inert(line, |w| {
        strategy_option_is_inert(w.strip_prefix("--").unwrap_or(w))
    })
}

/// Whether every option of an `apply-opt` line is one of the `git apply` options `git am`
/// takes (`-p<n>`, `-C<n>`, `--whitespace=`, `--ignore-space-change`, `--ignore-whitespace`,
/// `--reject`, `--directory=`, `--exclude=`, `--include=`) with a plain value.
fn apply_opts_are_inert(line: &str) -> bool {
    let plain = |v: &str| {
        !v.is_empty()
            && !v.starts_with('-')
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._/-*".contains(&b))
    };
    let digits = |v: &str| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
    words_are_inert(line, |w| {
        if let Some(n) = w.strip_prefix("-p").or_else(|| w.strip_prefix("-C")) {
            return digits(n);
        }
        match w.split_once('=') {
            Some(("--whitespace", v)) => {
                matches!(
                    v,
                    "nowarn" | "warn" | "fix" | "error" | "error-all" | "strip"
                )
            }
            Some(("--directory" | "--exclude" | "--include", v)) => plain(v),
            None => matches!(
                w,
                "--ignore-space-change" | "--ignore-whitespace" | "--reject"
            ),
            _ => false,
        }
    })
}

/// The lines of state file `rel` (one of [`STATE_FILES`]) that may run code when git goes on,
/// each trimmed: an `exec` (or any unknown) line of a todo list, a strategy that is not git's
/// own or a strategy option that is not theirs, any line of `sequencer/opts` but its
/// `[options]` header and known keys, an option of `rebase-apply/apply-opt` not on its list. Text that is
/// not UTF-8 is one live line, the whole of it.
pub fn live_lines<'a>(rel: &str, text: &'a [u8]) -> impl Iterator<Item = &'a [u8]> {
    let kind = kind(rel);
    let whole = std::str::from_utf8(text).is_err();
    let end = if kind == Kind::MergeRr { b'\0' } else { b'\n' };
    let lines = if whole {
        None
    } else {
        Some(text.split(move |b| *b == end))
    };
    std::iter::once(text)
        .filter(move |_| whole)
        .chain(lines.into_iter().flatten().filter_map(move |raw| {
            let line = raw.trim_ascii();
            (!line.is_empty() && !line_is_inert(kind, line)).then_some(line)
        }))
}

fn line_is_inert(kind: Kind, line: &[u8]) -> bool {
    let Ok(line) = std::str::from_utf8(line) else {
        return false;
    };
    match kind {
        // Git's parser: the comment character (`#` unless the protected config says
        // otherwise: then a `#` line is an error, which runs nothing either), then a command
        // ended by a blank or the line's end.
        Kind::Todo => {
            line.starts_with('#') || {
                let command = line.split([' ', '\t']).next().unwrap_or("");
                TODO_COMMANDS.contains(&command)
            }
        }
        Kind::Strategy => STRATEGIES.contains(&line),
        Kind::StrategyOpts => strategy_opts_are_inert(line),
        Kind::ApplyOpts => apply_opts_are_inert(line),
        Kind::MergeRr => line.split_once('\t').is_some_and(|(id, path)| {
            !id.is_empty()
                && id.bytes().all(|b| b.is_ascii_hexdigit())
                && !path.is_empty()
                && !path.starts_with('/')
                && !path.split('/').any(|c| c == ".." || c.is_empty())
        }),
        Kind::Any => false,
        Kind::Opts => {
            if line.starts_with('#') || line.starts_with(';') || line == "[options]" {
                return true;
            }
            let Some((key, value)) = line.split_once('=') else {
                return false;
            };
            let (key, value) = (key.trim_end(), value.trim());
            let known = OPTS_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key));
            let value_ok = if key.eq_ignore_ascii_case("strategy") {
                STRATEGIES.contains(&value)
            } else if key.eq_ignore_ascii_case("strategy-option") {
                strategy_option_is_inert(value)
            } else {
                true
            };
            known && value_ok
        }
    }
}

/// Whether state file `rel` holds, as `after`, a live line that `before` (its content when
/// the run started; empty when it did not exist) did not hold: what the sweep quarantines.
pub fn gained_live_lines(rel: &str, before: &[u8], after: &[u8]) -> bool {
    if after.len() > STATE_LIMIT {
        return true;
    }
    live_lines(rel, after).any(|line| !live_lines(rel, before).any(|b| b == line))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TODO: &str = "rebase-merge/git-rebase-todo";

    /// Each of `planted` (all of state file `rel`) gains a live line over an empty start.
    fn assert_each_gains(rel: &str, planted: &[&str]) {
        for planted in planted {
            assert!(
                gained_live_lines(rel, b"", planted.as_bytes()),
                "{planted:?}"
            );
        }
    }

    #[test]
    fn a_todo_list_of_picks_runs_nothing() {
        let todo = b"pick 1a2b3c4 first\nfixup -C 5d6e7f8 second\nmerge -C 9a8b7c6 topic # Merge\n\
            label onto\nreset onto\nupdate-ref refs/heads/x\n\n# Rebase 1a2b..5d6e onto 9a8b\n# exec = run\n";
        assert_eq!(live_lines(TODO, todo).count(), 0);
        assert!(!gained_live_lines(TODO, b"", todo));
    }

    #[test]
    fn exec_lines_are_live_and_only_new_ones_count() {
        let before = b"pick 1a2b3c4 first\nexec make test\n";
        let live: Vec<&[u8]> = live_lines(TODO, before).collect();
        assert_eq!(live, [b"exec make test".as_slice()]);
        // The user's own `-x` lines, as they were, and fewer of them.
        assert!(!gained_live_lines(
            TODO,
            before,
            b"exec make test\npick 5d6e7f8 second\nexec make test\n"
        ));
        assert!(!gained_live_lines(TODO, before, b"pick 5d6e7f8 second\n"));
        for planted in [
            "exec touch /tmp/pwned\n",
            "x touch /tmp/pwned\n",
            "  exec\tmake test; touch /tmp/pwned\n",
            "Pick 1a2b3c4\n",
            "pick\r1a2b3c4\n",
        ] {
            let after = format!("pick 1a2b3c4 first\n{planted}");
            assert!(
                gained_live_lines(TODO, before, after.as_bytes()),
                "{planted:?}"
            );
        }
        assert!(gained_live_lines(TODO, before, b"pick \xff\n"));
    }

    #[test]
    fn rerere_may_only_name_paths_in_the_worktree() {
        let rel = "MERGE_RR";
        assert!(!gained_live_lines(
            rel,
            b"",
            b"0a1b2c\tsrc/a.rs\x00dd\tb\x00"
        ));
        assert_each_gains(
            rel,
            &[
                "0a1b\t/root/.ssh/id_rsa\0",
                "0a1b\t../x\0",
                "0a1b\tsrc/../../x\0",
                "0a1b\tsrc//x\0",
                "zz\tsrc/a\0",
                "0a1b src/a\0",
            ],
        );
    }

    #[test]
    fn only_git_s_own_strategies_run_nothing() {
        let rel = "rebase-merge/strategy";
        assert!(!gained_live_lines(rel, b"", b"ort\n"));
        assert!(gained_live_lines(rel, b"", b"evil\n"));
        assert!(!gained_live_lines(rel, b"evil\n", b"evil\n"));
        let opts = "sequencer/opts";
        let written = b"[options]\n\tsignoff = true\n\tstrategy = ort\n\tstrategy-option = theirs\n\tgpg-sign = -SABC\n";
        assert!(!gained_live_lines(opts, b"", written));
        let rel = "rebase-merge/strategy_opts";
        let xopts = b"\"patience\" \"diff-algorithm=histogram\" \"find-renames=40\"\n";
        assert!(!gained_live_lines(rel, b"", xopts));
        assert!(!gained_live_lines(
            rel,
            b"",
            b" '--theirs' '--subtree=lib/x'\n"
        ));
        assert_each_gains(
            rel,
            &[
                "'--index-output=/etc/passwd'",
                "\"--index-output=/x\"",
                "--theirs --exclude-per-directory=x",
                "\"subtree=-x\"",
                "\"the\\irs\"",
                "'theirs\" --index-output=/x'",
            ],
        );
        assert!(gained_live_lines(
            "rebase-apply/apply-opt",
            b"",
            b"'--build-fake-ancestor=/x'\n"
        ));
        let apply = "rebase-apply/apply-opt";
        let am = b" '-p1' '--whitespace=fix' '-C3' '--reject'\n";
        assert!(!gained_live_lines(apply, b"", am));
        assert_each_gains(
            apply,
            &[
                "'--index-output=/x'",
                "'--directory=-x'",
                "'-p1' '--unsafe-paths'",
                "'--exclude=a b'",
            ],
        );
        for planted in [
            "\tstrategy-option = index-output=/x\n",
            "\tstrategy = evil\n",
            "\tstrategy = \"evil\"\n",
            "[options] strategy = evil\n",
            "\tunknown = 1\n",
            "\tstrategy\n",
        ] {
            let after = [written.as_slice(), planted.as_bytes()].concat();
            assert!(gained_live_lines(opts, b"", &after), "{planted:?}");
        }
    }
}
