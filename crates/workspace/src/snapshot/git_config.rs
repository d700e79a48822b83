//! A git dir's `config` as a snapshot writes it: a new file holding only the keys that
//! committing and fetching need, each checked, none of those that make git run a program or
//! read another file.
//!
//! Kept: `core.repositoryformatversion`, `core.bare`, `core.filemode`, `core.symlinks`,
//! `core.ignorecase`, `core.precomposeunicode`, `core.logallrefupdates`, `core.autocrlf`,
//! `core.eol`, `extensions.objectformat`,
//! `extensions.refstorage`, `user.name`, `user.email`, `remote.<name>.url`/`pushurl` (network
//! URLs only: `https://`, `http://`, `ssh://`, `git://` and `host:path`; not local paths,
//! `file://` or `transport::address`, which run a remote helper), `remote.<name>.fetch`/`push`,
//! `branch.<name>.remote`/`merge`. Everything else is left out, among it `core.hooksPath`,
//! `core.fsmonitor`, `core.sshCommand`, `core.pager`, `core.editor`, `core.askPass`,
//! `credential.helper`, `filter.*`, `diff.*.textconv`, `alias.*`, `include.*`,
//! `includeIf.*`, `url.*.insteadOf`, `remote.*.uploadpack`/`receivepack`.
//!
//! The reader is simpler than git's and need not agree with it: whatever it misreads, only
//! the keys above can come out, with values that were checked and are written quoted.

/// A section (lower-cased) and its subsection.
type Section = (String, Option<String>);

/// The reduced config of `text` (see the module docs).
pub fn reduce(text: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(text);
    // (section, subsection) in order of first appearance, with their kept keys.
    let mut kept: Vec<(Section, Vec<(String, String)>)> = Vec::new();
    let mut section: Option<Section> = None;
    let mut continued = false;
    for raw in text.lines() {
        let line = raw.trim();
        // A value continued onto the next line (a `\` at the end) is dropped, with its
        // continuation lines.
        let continues = ends_in_backslash(line);
        if std::mem::replace(&mut continued, continues) {
            continue;
        }
        if continues {
            continue;
        }
        let mut body = line;
        if let Some(rest) = line.strip_prefix('[') {
            match header(rest) {
                Some((name, sub, after)) => {
                    section = Some((name, sub));
                    body = after.trim();
                }
                None => {
                    section = None;
                    continue;
                }
            }
        }
        if body.is_empty() || body.starts_with(['#', ';']) {
            continue;
        }
        let Some(current) = &section else { continue };
        let Some((key, value)) = key_value(body) else {
            continue;
        };
        if !keep(&current.0, current.1.as_deref(), &key, &value) {
            continue;
        }
        match kept.iter_mut().find(|(s, _)| s == current) {
            Some((_, keys)) => keys.push((key, value)),
            None => kept.push((current.clone(), vec![(key, value)])),
        }
    }
    let mut out = String::from(
        "# Written by `stockade snapshot`: only the keys committing and fetching need.\n",
    );
    for ((name, sub), keys) in kept {
        match sub {
            Some(sub) => out.push_str(&format!("[{name} \"{sub}\"]\n")),
            None => out.push_str(&format!("[{name}]\n")),
        }
        for (key, value) in keys {
            let quoted = value.replace('\\', "\\\\").replace('"', "\\\"");
            out.push_str(&format!("\t{key} = \"{quoted}\"\n"));
        }
    }
    out.into_bytes()
}

fn ends_in_backslash(line: &str) -> bool {
    let trailing = line.len() - line.trim_end_matches('\\').len();
    trailing % 2 == 1
}

/// `name]`, `name "sub"]` or `name.sub]` (after the `[`): the lower-cased section, the
/// subsection (lower-cased in the legacy dotted form, as git does) and what follows the `]`.
fn header(rest: &str) -> Option<(String, Option<String>, &str)> {
    let name_len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        .unwrap_or(rest.len());
    let name = &rest[..name_len];
    let after = &rest[name_len..];
    if let Some(after) = after.strip_prefix(']') {
        let (name, sub) = match name.split_once('.') {
            Some((n, s)) => (n, Some(s.to_ascii_lowercase())),
            None => (name, None),
        };
        return (!name.is_empty()).then(|| (name.to_ascii_lowercase(), sub, after));
    }
    if name.is_empty() || name.contains('.') {
        return None;
    }
    let quoted = after.trim_start_matches([' ', '\t']).strip_prefix('"')?;
    let mut sub = String::new();
    let mut chars = quoted.char_indices();
    let end = loop {
        match chars.next()? {
            (_, '\\') => sub.push(chars.next()?.1),
            (i, '"') => break i,
            (_, c) => sub.push(c),
        }
    };
    let after = quoted[end + 1..].strip_prefix(']')?;
    Some((name.to_ascii_lowercase(), Some(sub), after))
}

/// `key = value` or a bare `key` (boolean true): the lower-cased key and the value as git
/// reads it (quotes removed, escapes applied, a comment outside quotes cut).
fn key_value(line: &str) -> Option<(String, String)> {
    let key_len = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .unwrap_or(line.len());
    let key = &line[..key_len];
    if !key.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let rest = line[key_len..].trim_start();
    let value = if rest.is_empty() || rest.starts_with(['#', ';']) {
        "true".to_string()
    } else {
        value_of(rest.strip_prefix('=')?)?
    };
    Some((key.to_ascii_lowercase(), value))
}

/// A value as git reads it, or `None` when it is not well formed.
fn value_of(raw: &str) -> Option<String> {
    let (value, whole) = crate::git::value_of(raw);
    whole.then_some(value)
}

/// Whether `section.sub.key = value` is one of the kept keys, with a value of its kind.
fn keep(section: &str, sub: Option<&str>, key: &str, value: &str) -> bool {
    match (section, sub, key) {
        ("core", None, "repositoryformatversion") => matches!(value, "0" | "1"),
        (
            "core",
            None,
            "bare" | "filemode" | "symlinks" | "ignorecase" | "precomposeunicode"
            | "logallrefupdates",
        ) => is_bool(value),
        // Line endings: without them, files checked out with CRLF would all show as changed.
        ("core", None, "autocrlf") => is_bool(value) || value.eq_ignore_ascii_case("input"),
        ("core", None, "eol") => {
            matches!(
                value.to_ascii_lowercase().as_str(),
                "lf" | "crlf" | "native"
            )
        }
        ("extensions", None, "objectformat") => {
            matches!(value.to_ascii_lowercase().as_str(), "sha1" | "sha256")
        }
        ("extensions", None, "refstorage") => {
            matches!(value.to_ascii_lowercase().as_str(), "files" | "reftable")
        }
        ("user", None, "name" | "email") => is_text(value),
        ("remote", Some(name), "url" | "pushurl") => is_name(name) && is_network_url(value),
        ("remote", Some(name), "fetch" | "push") => is_name(name) && is_refspec(value),
        ("branch", Some(name), "remote") => is_name(name) && is_name(value),
        ("branch", Some(name), "merge") => is_name(name) && is_refspec(value),
        _ => false,
    }
}

fn is_bool(value: &str) -> bool {
    matches!(
        value.to_ascii_lowercase().as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "1" | "0"
    )
}

fn is_text(value: &str) -> bool {
    value.len() <= 1024 && !value.chars().any(char::is_control)
}

/// A remote or branch name: letters, digits, `.`, `_`, `/`, `-`, not starting with `-`.
fn is_name(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 256
        && !value.starts_with('-')
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
}

fn is_refspec(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 1024
        && !value.starts_with('-')
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/-*+:^".contains(c))
}

/// A URL git reaches over the network without running a helper program of the URL's
/// choosing: `https://`, `http://`, `ssh://`, `git://` (and `git+ssh://`, `ssh+git://`),
/// or scp-like `[user@]host:path`. A host starting with `-` (an ssh option) is refused.
fn is_network_url(value: &str) -> bool {
    if !is_text(value) || value.contains(char::is_whitespace) || value.contains("::") {
        return false;
    }
    if let Some((scheme, rest)) = value.split_once("://") {
        let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
        return matches!(
            scheme.to_ascii_lowercase().as_str(),
            "https" | "http" | "ssh" | "git" | "git+ssh" | "ssh+git"
        ) && !host.is_empty()
            && !host.starts_with('-');
    }
    // scp-like: a colon before any slash, and more than one character before it (`C:`).
    match value.split_once(':') {
        Some((host, _)) => {
            let host_only = host.rsplit_once('@').map_or(host, |(_, h)| h);
            !host.contains('/')
                && host_only.len() > 1
                && !host.starts_with('-')
                && !host_only.starts_with('-')
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reduced(text: &str) -> String {
        String::from_utf8(reduce(text.as_bytes())).unwrap()
    }

    #[test]
    fn keeps_what_committing_needs_and_drops_what_runs_programs() {
        let text = r#"[core]
	repositoryformatversion = 0
	filemode = true
	bare = false
	hooksPath = /tmp/hooks
	fsmonitor = "touch /tmp/pwned"
	sshCommand = ssh -o ProxyCommand=evil
	pager = less; evil
	editor = evil
	askPass = evil
[alias]
	st = !evil
[include]
	path = ../evil.inc
[includeIf "gitdir:/"]
	path = ../evil.inc
[filter "lfs"]
	smudge = evil %f
[diff "x"]
	textconv = evil
[credential]
	helper = store
[url "ext::sh -c evil"]
	insteadOf = https://
[remote "origin"]
	url = https://example.com/r.git
	fetch = +refs/heads/*:refs/remotes/origin/*
	uploadpack = evil
[remote "local"]
	url = ../other
[remote "helper"]
	url = ext::sh -c evil
[remote "opt"]
	url = -oProxyCommand=evil:x
[branch "main"]
	remote = origin
	merge = refs/heads/main
[user]
	name = A Person
	email = a@example.com
	signingkey = x
[extensions]
	objectFormat = sha256
"#;
        let out = reduced(text);
        for gone in [
            "hookspath",
            "fsmonitor",
            "sshcommand",
            "pager",
            "editor",
            "askpass",
            "alias",
            "include",
            "filter",
            "textconv",
            "helper",
            "insteadof",
            "uploadpack",
            "evil",
            "../other",
            "signingkey",
        ] {
            assert!(
                !out.to_ascii_lowercase().contains(gone),
                "{gone} in:\n{out}"
            );
        }
        assert_eq!(
            out,
            "# Written by `stockade snapshot`: only the keys committing and fetching need.\n\
             [core]\n\trepositoryformatversion = \"0\"\n\tfilemode = \"true\"\n\tbare = \"false\"\n\
             [remote \"origin\"]\n\turl = \"https://example.com/r.git\"\n\
             \tfetch = \"+refs/heads/*:refs/remotes/origin/*\"\n\
             [branch \"main\"]\n\tremote = \"origin\"\n\tmerge = \"refs/heads/main\"\n\
             [user]\n\tname = \"A Person\"\n\temail = \"a@example.com\"\n\
             [extensions]\n\tobjectformat = \"sha256\"\n"
        );
    }

    #[test]
    fn tricks_on_one_line_or_continued_do_not_come_through() {
        // A key after a header's `]` is read (as git does) and judged like any other.
        let out = reduced("[remote \"x\"] [core] fsmonitor = evil\n[core] bare = false\n");
        assert!(!out.contains("evil"), "{out}");
        assert!(out.contains("bare = \"false\""), "{out}");
        // A continued value is dropped whole, with its continuation.
        let out = reduced("[core]\n\tbare = fal\\\nse\n\tfsmonitor = \\\n evil\n");
        assert!(!out.contains("bare") && !out.contains("evil"), "{out}");
        // Legacy `[remote.origin]` headers, quotes and escapes in values.
        let out = reduced("[remote.Origin]\n\turl = \"git@example.com:r.git\" # c\n");
        assert!(out.contains("[remote \"origin\"]\n\turl = \"git@example.com:r.git\"\n"));
        // Values that would break out of the quoting are not kept.
        let out = reduced("[user]\n\tname = \"a\\nb\"\n\temail = \"x\\\"y\"\n");
        assert!(!out.contains("name"), "{out}");
        assert!(out.contains("email = \"x\\\"y\""), "{out}");
    }

    #[test]
    fn network_urls_only() {
        for ok in [
            "https://h/r",
            "ssh://git@h/r",
            "git@github.com:o/r.git",
            "host:r",
            "git://h/r",
        ] {
            assert!(is_network_url(ok), "{ok}");
        }
        for bad in [
            "/abs/path",
            "../rel",
            "file:///x",
            "ext::sh -c x",
            "fd::3",
            "codecommit::r",
            "ssh://-oProxyCommand=x/r",
            "-oProxyCommand=x:r",
            "C:/x",
            "",
        ] {
            assert!(!is_network_url(bad), "{bad}");
        }
    }
}
