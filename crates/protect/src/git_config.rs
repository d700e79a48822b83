//! Which git configs (and which changes to one) run nothing: the check behind the creation
//! guard's "config only with inert keys" (see [`crate`]).
//!
//! Pure and allocation-free (the init runs it after `fork`). It reads a config line by line
//! and never tries to be as lenient as git: anything it does not recognise as an inert key
//! under a plain section header counts as live, so a trick that git reads one way and this
//! check another (a `\` continuation, `[section.sub]` headers, a key on the header's line,
//! invalid UTF-8) can only make a config count as live.

/// What one physical line of a config is, to this check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line<'a> {
    /// Empty, or a comment.
    Blank,
    /// `[name]` or `[name "sub"]`.
    Header { name: &'a str, sub: bool },
    /// `key`, `key = value` or `key value`.
    Key(&'a str),
    /// Anything else (a header with text after it, a header without its `]`).
    Other,
}

fn classify(line: &str) -> Line<'_> {
    if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
        return Line::Blank;
    }
    if let Some(rest) = line.strip_prefix('[') {
        return header(rest).unwrap_or(Line::Other);
    }
    Line::Key(line.split(['=', ' ', '\t']).next().unwrap_or(""))
}

/// A section header as git reads it (`get_base_var`, `get_extended_base_var`): a name of
/// letters, digits, `-` and `.`, optionally whitespace and a quoted subsection (`\"` and `\\`
/// escaped, no newline), then `]`. Git goes on reading the same line after the `]` as more
/// config (`[remote "x"] [core] fsmonitor = ...` sets `core.fsmonitor`), so only blanks or a
/// comment may follow here; anything else is not a header this check knows (live).
fn header(rest: &str) -> Option<Line<'_>> {
    let name_len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        .unwrap_or(rest.len());
    let name = &rest[..name_len];
    if name.is_empty() {
        return None;
    }
    let mut after = &rest[name_len..];
    let mut sub = false;
    if after.starts_with([' ', '\t']) {
        let quoted = after.trim_start_matches([' ', '\t']).strip_prefix('"')?;
        // The subsection runs to the first unescaped quote.
        let mut chars = quoted.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => {
                    chars.next()?;
                }
                (i, '"') => break i,
                _ => {}
            }
        };
        after = &quoted[end + 1..];
        sub = true;
    }
    let tail = after.strip_prefix(']')?.trim_start();
    if !(tail.is_empty() || tail.starts_with('#') || tail.starts_with(';')) {
        return None;
    }
    Some(Line::Header { name, sub })
}

/// Keys that run nothing and point git nowhere, by section: what `git init`, `git clone`,
/// `git remote add`, `git branch --set-upstream-to`, `git push -u`, `git sparse-checkout`
/// and `git config user.*` write, and a few preferences of the same kind.
/// Not here, because they run code or send git elsewhere: `core.fsmonitor`, `core.hooksPath`,
/// `core.pager`, `core.editor`, `core.sshCommand`, `core.worktree`, `include*`, `alias.*`,
/// `filter.*`, `diff.*`, `merge.*`, `remote.*.uploadpack`/`receivepack`/`vcs`, ...
fn inert_key(section: &str, key: &str) -> bool {
    let is = |k: &str| key.eq_ignore_ascii_case(k);
    let s = |name: &str| section.eq_ignore_ascii_case(name);
    if s("core") {
        is("repositoryformatversion")
            || is("filemode")
            || is("bare")
            || is("logallrefupdates")
            || is("ignorecase")
            || is("precomposeunicode")
            || is("symlinks")
            || is("sparsecheckout")
            || is("sparsecheckoutcone")
    } else if s("extensions") {
        is("objectformat") || is("refstorage") || is("worktreeconfig")
    } else if s("user") {
        is("name") || is("email")
    } else if s("init") {
        is("defaultbranch")
    } else if s("branch") {
        is("remote") || is("merge") || is("rebase") || is("pushremote")
    } else if s("remote") {
        is("url") || is("fetch") || is("pushurl") || is("tagopt") || is("prune")
    } else if s("pull") {
        is("rebase") || is("ff")
    } else if s("push") {
        is("default") || is("autosetupremote")
    } else if s("fetch") {
        is("prune")
    } else if s("index") {
        is("sparse")
    } else {
        false
    }
}

/// Keys whose value names a repository git will talk to (and, for a local one, run the hooks
/// of on push): inert only when [`remote_is_inert`] says so.
fn names_a_repository(section: &str, key: &str) -> bool {
    let is = |k: &str| key.eq_ignore_ascii_case(k);
    (section.eq_ignore_ascii_case("remote") && (is("url") || is("pushurl")))
        || (section.eq_ignore_ascii_case("branch") && (is("remote") || is("pushremote")))
}

/// The value of a `key = value` line when it is plain (no quotes, escapes, comments or inner
/// blanks, which this check does not interpret); `None` otherwise.
fn plain_value(line: &str) -> Option<&str> {
    let value = line.split_once('=')?.1.trim();
    let plain = !value.is_empty()
        && !value.contains(['"', '\\', '#', ';', ' ', '\t'])
        && !value.starts_with('-');
    plain.then_some(value)
}

/// Whether a remote (a name, or a URL) is one a push or fetch cannot turn into running code
/// written by the sandbox: another machine (`https://`, `ssh://`, `git://`, `host:path`), a
/// remote's name, or a local repository outside every writable root (`/abs`, `file:///abs`).
/// A local repository inside one could hold hooks the sandbox planted (a push runs the
/// receiving repository's `pre-receive`); relative paths, `transport::address` helpers and
/// anything unusual count as live.
fn remote_is_inert(value: &str, name_allowed: bool, writable: &[&[u8]]) -> bool {
    let lower_starts = |p: &str| value.len() >= p.len() && value[..p.len()].eq_ignore_ascii_case(p);
    if value.contains("::") {
        return false;
    }
    for scheme in [
        "https://",
        "http://",
        "ssh://",
        "git://",
        "git+ssh://",
        "ssh+git://",
    ] {
        if lower_starts(scheme) {
            return value.len() > scheme.len();
        }
    }
    let local = if lower_starts("file://") {
        Some(&value["file://".len()..])
    } else if value.starts_with('/') {
        Some(value)
    } else {
        None
    };
    if let Some(path) = local {
        // Only a plain absolute path is compared with the roots: `//ws/x` and `/ws//x` name
        // the same place for git, and `/proc/self/cwd/x` or `/dev/fd/N/x` lead anywhere.
        let normal = path.starts_with('/')
            && !path.contains("//")
            && !path.starts_with("/proc/")
            && !path.starts_with("/dev/")
            && !path.split('/').any(|c| c == "." || c == "..");
        return normal
            && !writable
                .iter()
                .any(|w| crate::is_within(path.as_bytes(), w));
    }
    if value.starts_with('.') {
        return false;
    }
    match value.split_once(':') {
        // scp-like `[user@]host:path` (git's rule: no `/` before the first `:`).
        Some((host, _)) => !host.is_empty() && !host.contains('/'),
        // A remote's name (`branch.main.remote = origin`); as a URL, a relative path.
        None => name_allowed && !value.contains('/'),
    }
}

/// Whether `text` has a `[remote "NAME"]` section (only a header of exactly that form; an
/// escaped or oddly spaced one counts as absent, which only makes a config live).
fn has_remote_section(text: &str, name: &str) -> bool {
    text.lines().any(|line| {
        let Some(rest) = line.trim().strip_prefix("[remote") else {
            return false;
        };
        let rest = rest.trim_start_matches([' ', '\t']);
        let tail = rest
            .strip_prefix('"')
            .and_then(|r| r.strip_prefix(name))
            .and_then(|r| r.strip_prefix("\"]"))
            .map(str::trim_start);
        tail.is_some_and(|t| t.is_empty() || t.starts_with('#') || t.starts_with(';'))
    })
}

/// Sections whose header may name a subsection (`[remote "origin"]`).
fn takes_subsection(section: &str) -> bool {
    section.eq_ignore_ascii_case("branch") || section.eq_ignore_ascii_case("remote")
}

/// Every line of `text` that is not blank, not a header and not an inert key, each with the
/// header line it stands under ("" before the first): what must not change. `writable`: the
/// run's writable roots (see [`remote_is_inert`]).
fn live_lines<'a>(
    text: &'a str,
    writable: &'a [&'a [u8]],
) -> impl Iterator<Item = (&'a str, &'a str)> {
    let mut header = "";
    let mut section: Option<(&str, bool)> = None;
    text.lines().filter_map(move |raw| {
        let line = raw.trim();
        match classify(line) {
            Line::Blank => None,
            Line::Header { name, sub } => {
                header = line;
                section = Some((name, sub));
                None
            }
            Line::Key(key) => match section {
                Some((name, sub))
                    if (!sub || takes_subsection(name))
                        && inert_key(name, key)
                        && (!names_a_repository(name, key)
                            || plain_value(line).is_some_and(|v| {
                                let branch = name.eq_ignore_ascii_case("branch");
                                remote_is_inert(v, branch, writable)
                                    // git takes a name it has no section for as a path
                                    && (!branch || v.contains(':') || has_remote_section(text, v))
                            })) =>
                {
                    None
                }
                _ => Some((header, line)),
            },
            Line::Other => {
                header = line;
                section = None;
                Some((header, line))
            }
        }
    })
}

/// Whether a git config only holds keys that run nothing: what `git init`, `git clone`,
/// `git remote add`, `git branch --set-upstream-to` and `git config user.*` write. Anything
/// else (`core.fsmonitor`, `core.hooksPath`, `core.pager`, `include.path`, aliases, filters,
/// `core.sshCommand`, ...) makes the config "live", and so does a remote that is a local
/// repository inside one of the `writable` roots (see `remote_is_inert`). Invalid UTF-8 or
/// syntax is live too.
pub fn git_config_is_inert(text: &[u8], writable: &[&[u8]]) -> bool {
    let Ok(text) = std::str::from_utf8(text) else {
        return false;
    };
    let mut headers_ok = true;
    for line in text.lines() {
        if let Line::Header { name, sub: true } = classify(line.trim()) {
            headers_ok &= takes_subsection(name);
        }
    }
    headers_ok && live_lines(text, writable).next().is_none()
}

/// Whether rewriting a config from `old` to `new` only adds, changes or removes inert keys:
/// every other line stays as it was, in the same order and under the same header. This is
/// how `git config`, `git remote add` or `git push -u` may change an existing repository's
/// config that already holds live keys (a `filter "lfs"` section, a `core.hooksPath` the user
/// set): those keys must come through untouched.
pub fn git_config_rewrite_is_inert(old: &[u8], new: &[u8], writable: &[&[u8]]) -> bool {
    let (Ok(old), Ok(new)) = (std::str::from_utf8(old), std::str::from_utf8(new)) else {
        return false;
    };
    let mut headers_ok = true;
    for line in new.lines() {
        if let Line::Header { name, sub: true } = classify(line.trim()) {
            // A new live section with a subsection is caught below (its keys are live); a
            // subsection header alone changes nothing.
            headers_ok &= takes_subsection(name) || old.lines().any(|o| o.trim() == line.trim());
        }
    }
    headers_ok && live_lines(old, writable).eq(live_lines(new, writable))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inert_git_configs() {
        let init = b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";
        assert!(git_config_is_inert(init, &[]));
        assert!(git_config_is_inert(
            b"[remote \"origin\"]\n\turl = host:x\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[user]\n\temail = a@b\n",
            &[]
        ));
        assert!(git_config_is_inert(b"", &[]));
        assert!(git_config_is_inert(
            b"[remote \"a]b\\\"c\"] # comment ]\n\turl = git://h/x\n[user] ; note\n\tname = n\n",
            &[]
        ));
        // An escaped quote keeps the subsection going: git reads one header here (subsection
        // `x"] [core] pager = x`), no key.
        assert!(git_config_is_inert(
            b"[remote \"x\\\"] [core] pager = x\"]\n\turl = h:a\n",
            &[]
        ));
        for live in [
            &b"[core]\n\tfsmonitor = touch /tmp/pwned\n"[..],
            b"[core]\n\thooksPath = /tmp/h\n",
            b"[include]\n\tpath = /tmp/x\n",
            b"[includeIf \"gitdir:/\"]\n\tpath = /tmp/x\n",
            b"[alias]\n\tst = !sh\n",
            b"[core]\n\tpager = sh\n",
            b"[filter \"x\"]\n\tclean = sh\n",
            b"[user \"x\"]\n\tname = a\n",
            b"[remote.origin]\n\turl = a\n",
            b"[core] fsmonitor = x\n",
            b"[remote \"x\"] [core] fsmonitor = \"touch p\" #]\n",
            b"[remote \"x\"]fsmonitor = y\n",
            b"[remote \"a]b\"] [core] pager = x\n",
            b"[remote \"x\"\n",
            b"[remote x]\n\turl = a\n",
            b"[]\n",
            b"[remote \"o\"]\n\tvcs = x\n",
            b"fsmonitor = x\n",
            b"[core\n",
            b"[core]\n\t\xff = 1\n",
        ] {
            assert!(
                !git_config_is_inert(live, &[]),
                "{}",
                String::from_utf8_lossy(live)
            );
        }
    }

    const WS: &[&[u8]] = &[b"/ws"];

    #[test]
    fn remotes_inside_a_writable_root_are_live() {
        let cfg = |url: &str| format!("[remote \"o\"]\n\turl = {url}\n");
        for inert in [
            "https://example.invalid/x.git",
            "ssh://git@example.invalid/x",
            "git@example.invalid:x/y.git",
            "example.invalid:x",
            "/srv/repos/x.git",
            "file:///srv/repos/x.git",
        ] {
            assert!(git_config_is_inert(cfg(inert).as_bytes(), WS), "{inert}");
        }
        for live in [
            "/ws/evil.git",
            "/ws",
            "file:///ws/evil",
            "/srv/../ws/evil",
            "//ws/evil",
            "/ws//evil",
            "file:////ws/evil",
            "/proc/self/cwd/evil",
            "/dev/fd/3/evil",
            "../evil.git",
            "./evil",
            "evil",
            "sub/evil",
            "ext::sh -c x",
            "fd::3",
            "evil::x",
            "\"/ws/evil\"",
            "/srv/x # c",
            "-oProxyCommand=x:y",
            "https://",
        ] {
            assert!(!git_config_is_inert(cfg(live).as_bytes(), WS), "{live}");
        }
        // A branch's remote: a name, or a URL under the same rule.
        let branch = |r: &str| {
            format!("[remote \"origin\"]\n\turl = h:x\n[branch \"m\"]\n\tremote = {r}\n\tmerge = refs/heads/m\n")
        };
        assert!(git_config_is_inert(branch("origin").as_bytes(), WS));
        // A name with no section of its own is a relative path to git.
        assert!(!git_config_is_inert(branch("evil").as_bytes(), WS));
        assert!(!git_config_is_inert(branch("/ws/evil").as_bytes(), WS));
        assert!(!git_config_is_inert(branch("../evil").as_bytes(), WS));
        // An existing remote in the workspace may stay as it is.
        let old = cfg("/ws/r.git");
        let new = old.clone() + "[user]\n\tname = n\n";
        assert!(git_config_rewrite_is_inert(
            old.as_bytes(),
            new.as_bytes(),
            WS
        ));
        let moved = cfg("/ws/other.git");
        assert!(!git_config_rewrite_is_inert(
            old.as_bytes(),
            moved.as_bytes(),
            WS
        ));
    }

    const USER_CONFIG: &[u8] = b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n\
        [filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n\tprocess = git-lfs filter-process\n\
        [core]\n\thooksPath = .githooks\n";

    #[test]
    fn rewrites_that_only_touch_inert_keys_pass() {
        let added = [
            USER_CONFIG,
            b"[remote \"origin\"]\n\turl = https://example.invalid/x\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
            b"[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n[user]\n\tname = A\n",
        ]
        .concat();
        assert!(git_config_rewrite_is_inert(USER_CONFIG, &added, WS));
        // Inert keys removed again, or changed.
        assert!(git_config_rewrite_is_inert(&added, USER_CONFIG, WS));
        let changed = String::from_utf8_lossy(USER_CONFIG).replace("bare = false", "bare = true");
        assert!(git_config_rewrite_is_inert(
            USER_CONFIG,
            changed.as_bytes(),
            WS
        ));
        // sparse-checkout and worktree config.
        let sparse = [
            USER_CONFIG,
            b"[extensions]\n\tworktreeConfig = true\n[core]\n\tsparseCheckout = true\n",
        ]
        .concat();
        assert!(git_config_rewrite_is_inert(USER_CONFIG, &sparse, WS));
    }

    #[test]
    fn rewrites_that_touch_live_keys_are_refused() {
        let text = String::from_utf8_lossy(USER_CONFIG).to_string();
        for new in [
            text.clone() + "[core]\n\tfsmonitor = sh -c x\n",
            text.replace("hooksPath = .githooks", "hooksPath = /tmp/h"),
            text.replace("\thooksPath = .githooks\n", ""),
            text.replace("git-lfs clean", "sh -c evil"),
            text.replace("[filter \"lfs\"]", "[filter \"other\"]"),
            text.clone() + "[include]\n\tpath = x\n",
            text.clone() + "[remote \"o\"]\n\turl = a\n\tuploadpack = sh\n",
            text.clone() + "[alias \"x\"]\n",
        ] {
            assert!(
                !git_config_rewrite_is_inert(USER_CONFIG, new.as_bytes(), WS),
                "{new}"
            );
        }
        assert!(!git_config_rewrite_is_inert(b"\xff", b"", WS));
        // Moving a live key to another section instance changes its header.
        let moved =
            b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n\thooksPath = .githooks\n\
            [filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n\tprocess = git-lfs filter-process\n";
        assert!(!git_config_rewrite_is_inert(USER_CONFIG, moved, WS));
    }
}
