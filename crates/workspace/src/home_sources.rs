//! Files the home's shell start-up files source, found by reading them: best effort, on top of
//! the catalogue (`policy::HOME_EXEC` names the conventional ones, `~/.bash_aliases`,
//! `~/.bashrc.d`, oh-my-zsh, ...).
//!
//! `~/.bashrc` is protected when a writable root holds the home, but a `. ~/.my_own_rc` in it
//! makes `~/.my_own_rc` a start-up file too: the host's next shell runs what the sandbox wrote
//! there. When a writable root holds the home, or a part of it other than the workspace
//! (`--allow-write ~/.config`), the bash, zsh and sh start-up files of the home are read
//! (a few small files, bounded) for `source PATH` and `. PATH` commands whose PATH is a
//! literal `~/...`, `$HOME/...`, `${HOME}/...` or absolute path (quoted or not); anything
//! holding another variable, a command substitution or a glob is left alone, except a loop
//! `for f in DIR/*; do . "$f"; done` (on one line or several), which protects DIR. The
//! sourced files are read the same way in turn (bounded depth). Every target found in a
//! writable root becomes a protected path, existing or not, as a catalogue entry would.
//!
//! Not a shell parser: a file sourced through a variable, a function or `eval` is missed; the
//! catalogue's entries, review mode or a project directory as the workspace are the answer.

use std::path::{Path, PathBuf};

use policy::{is_within, normalize_lexically};

use crate::host::{HostView, Kind};

/// The start-up files read first, relative to the home: bash's, zsh's (also in the common
/// `ZDOTDIR` `~/.config/zsh`) and sh's.
pub(crate) const STARTUP_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".bash_logout",
    ".zshenv",
    ".zprofile",
    ".zshrc",
    ".zlogin",
    ".zlogout",
    ".config/zsh/.zshenv",
    ".config/zsh/.zshrc",
];

/// How much of each file is read.
const READ_LIMIT: usize = 64 * 1024;
/// How many files are read at most (the start-up files that exist, then what they source).
const MAX_FILES: usize = 24;
/// How deep sourced files are followed.
const MAX_DEPTH: usize = 3;

/// Whether the start-up files are worth reading: a writable root holds the home, or is a part
/// of it other than the workspace (a project below the home is the project's own).
pub(crate) fn applies(home: &Path, workspace: &Path, roots: &[PathBuf]) -> bool {
    roots
        .iter()
        .any(|r| is_within(home, r) || (is_within(r, home) && r != workspace))
}

/// The paths the home's start-up files source (see the module docs) that lie in a writable
/// root, strictly below the home or elsewhere, and are neither the home nor hold a writable
/// root. Lexically normal, not resolved (the scan resolves them as any protected path).
pub fn sourced_paths(
    host: &dyn HostView,
    home: &Path,
    workspace: &Path,
    roots: &[PathBuf],
) -> Vec<PathBuf> {
    if !applies(home, workspace, roots) {
        return Vec::new();
    }
    let mut queue: Vec<(PathBuf, usize)> =
        STARTUP_FILES.iter().map(|f| (home.join(f), 0)).collect();
    let mut read: Vec<PathBuf> = Vec::new();
    let mut out: Vec<PathBuf> = Vec::new();
    let mut i = 0;
    while i < queue.len() && read.len() < MAX_FILES {
        let (file, depth) = queue[i].clone();
        i += 1;
        if read.contains(&file) || host.stat(&file).map(|e| e.kind) != Some(Kind::File) {
            continue;
        }
        read.push(file.clone());
        let Some(text) = host.read_lossy(&file, READ_LIMIT) else {
            continue;
        };
        for target in sourced(&text, home) {
            let keep = target != home
                && !is_within(home, &target)
                && roots.iter().any(|r| is_within(&target, r) && target != *r)
                && !roots.iter().any(|r| is_within(r, &target));
            if keep && !out.contains(&target) {
                if depth < MAX_DEPTH {
                    queue.push((target.clone(), depth + 1));
                }
                out.push(target);
            }
        }
    }
    out
}

/// What a shell file sources by a literal path (see the module docs), expanded against
/// `home`: files, and the directories of `for` loops whose variable is sourced.
pub(crate) fn sourced(text: &str, home: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    // The innermost open `for VAR in WORDS`: (VAR, the paths its words stand for).
    let mut loops: Vec<(String, Vec<PathBuf>)> = Vec::new();
    for line in text.lines() {
        for command in commands(line) {
            let words = split_words(command);
            let Some(first) = words.first() else {
                continue;
            };
            match first.as_str() {
                "for" if words.len() >= 3 && words[2] == "in" => {
                    let dirs = words[3..]
                        .iter()
                        .take_while(|w| !matches!(w.as_str(), "do" | ";"))
                        .filter_map(|w| loop_word(w, home))
                        .collect();
                    loops.push((words[1].clone(), dirs));
                }
                "done" => {
                    loops.pop();
                }
                "source" | "." if words.len() >= 2 => {
                    let arg = &words[1];
                    if let Some(p) = literal_path(arg, home) {
                        out.push(p);
                    } else if let Some(var) = variable(arg) {
                        if let Some((_, dirs)) = loops.iter().rev().find(|(v, _)| *v == var) {
                            out.extend(dirs.iter().cloned());
                        }
                    }
                }
                _ => {}
            }
        }
    }
    out.dedup();
    out
}

/// The simple commands of a line: split at `;`, `&&`, `||`, `|` and `&` outside quotes, a
/// comment cut, and the keywords that can precede a command (`then`, `do`, `else`, `{`,
/// `if`, `!`) removed.
fn commands(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quote) = (0, None::<char>);
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') if i == 0 || bytes[i - 1].is_ascii_whitespace() || bytes[i - 1] == b';' => {
                out.push(&line[start..i]);
                start = bytes.len();
                break;
            }
            (None, ';' | '&' | '|') => {
                out.push(&line[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < line.len() {
        out.push(&line[start..]);
    }
    out.into_iter()
        .map(|c| {
            let mut c = c.trim();
            while let Some(rest) = ["then ", "do ", "else ", "{ ", "if ", "! ", "builtin "]
                .iter()
                .find_map(|k| c.strip_prefix(k))
            {
                c = rest.trim_start();
            }
            c
        })
        .filter(|c| !c.is_empty())
        .collect()
}

/// The words of a simple command, quotes kept (they matter to what a word means).
fn split_words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote = None::<char>;
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                word.push(c);
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.push(c);
            }
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            (None, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// A word naming a literal path: `~/x`, `$HOME/x`, `${HOME}/x` or `/x`, with double quotes
/// anywhere (single quotes: an absolute path only, nothing expands in them). `None` for
/// anything with another expansion or a glob.
fn literal_path(word: &str, home: &Path) -> Option<PathBuf> {
    let (base, rest): (Option<&Path>, String) =
        if word.len() >= 2 && word.starts_with('\'') && word.ends_with('\'') {
            let inner = &word[1..word.len() - 1];
            if !inner.starts_with('/') {
                return None;
            }
            (None, inner.to_string())
        } else if word.contains('\'') {
            return None;
        } else {
            let w = word.replace('"', "");
            match ["~/", "$HOME/", "${HOME}/"]
                .iter()
                .find_map(|prefix| w.strip_prefix(prefix))
            {
                Some(r) => (Some(home), r.to_string()),
                None if w.starts_with('/') => (None, w),
                None => return None,
            }
        };
    if rest.contains(['$', '`', '*', '?', '[', '{', '~', '\\', '\'']) {
        return None;
    }
    let p = normalize_lexically(&base.map_or_else(|| PathBuf::from(&rest), |b| b.join(&rest)));
    (p.is_absolute() && p.parent().is_some()).then_some(p)
}

/// What a word of `for VAR in WORDS` stands for: a literal path, or the literal directory of
/// a glob whose last component alone holds the pattern (`~/.bashrc.d/*`, `~/.zsh/*.zsh`).
fn loop_word(word: &str, home: &Path) -> Option<PathBuf> {
    if let Some(p) = literal_path(word, home) {
        return Some(p);
    }
    let unquoted = word.replace('"', "");
    let (dir, last) = unquoted.rsplit_once('/')?;
    if last.contains('/') || !last.contains(['*', '?', '[']) || last.contains(['$', '`']) {
        return None;
    }
    literal_path(dir, home)
}

/// The variable a word expands to whole: `$f`, `"$f"`, `${f}`, `"${f}"`.
fn variable(word: &str) -> Option<String> {
    let w = word.trim_matches('"');
    let name = w
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .or_else(|| w.strip_prefix('$'))?;
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::fake::TextFiles;

    fn h() -> PathBuf {
        PathBuf::from("/h")
    }

    fn found(text: &str) -> Vec<String> {
        sourced(text, &h())
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    }

    #[test]
    fn literal_sources_in_every_spelling_are_found() {
        let text = r#"
# . ~/.commented
[ -f ~/.bash_aliases ] && . ~/.bash_aliases
if [ -r "$HOME/.my_own_rc" ]; then source "$HOME/.my_own_rc"; fi
source ${HOME}/.config/x/y.sh   # trailing comment
  . "/opt/shared/rc"
builtin source ~/sub/../.flat
test -r ~/.q && . '/abs/single'
"#;
        assert_eq!(
            found(text),
            [
                "/h/.bash_aliases",
                "/h/.my_own_rc",
                "/h/.config/x/y.sh",
                "/opt/shared/rc",
                "/h/.flat",
                "/abs/single",
            ]
        );
    }

    /// Other variables, command substitutions, globs, relative paths and `~user` are left
    /// alone (the control: the same lines with a literal path are found above).
    #[test]
    fn anything_not_literal_is_left_alone() {
        let text = r#"
. "$ZDOTDIR/.zshrc"
source $XDG_CONFIG_HOME/shell/rc
. "$(brew --prefix)/etc/profile.d/x.sh"
. ~/.rc.d/*.sh
source ./local.sh
. ~bob/.rc
. '~/.quoted_tilde'
. '$HOME/.quoted_var'
source ~/$NAME
echo . ~/.not_a_source
"#;
        assert_eq!(found(text), Vec::<String>::new());
    }

    #[test]
    fn loops_sourcing_their_variable_protect_the_directory() {
        let one_line = "for f in ~/.bashrc.d/*; do . $f; done";
        assert_eq!(found(one_line), ["/h/.bashrc.d"]);
        let multi = "for rc in \"$HOME\"/.config/rc.d/*.sh; do\n  if [ -f \"$rc\" ]; then\n    . \"$rc\"\n  fi\ndone\nunset rc\n";
        assert_eq!(found(multi), ["/h/.config/rc.d"]);
        let files = "for f in ~/.a ~/.b; do source \"${f}\"; done";
        assert_eq!(found(files), ["/h/.a", "/h/.b"]);
        // Control: a loop that does not source its variable protects nothing.
        assert_eq!(
            found("for f in ~/.bashrc.d/*; do echo $f; done"),
            Vec::<String>::new()
        );
        // A glob above the last component is not a directory.
        assert_eq!(
            found("for f in ~/.d*/x.sh; do . $f; done"),
            Vec::<String>::new()
        );
    }

    fn home_with(files: &[(&str, &str)]) -> TextFiles {
        TextFiles(
            files
                .iter()
                .map(|(p, t)| (h().join(p), (*t).to_string()))
                .collect(),
        )
    }

    /// With the home as the workspace, what `~/.bashrc` sources is protected, followed into
    /// the sourced file (existing or not); targets outside the writable roots, the home itself
    /// and a writable root by name are not.
    #[test]
    fn the_home_as_workspace_follows_its_start_up_files() {
        let host = home_with(&[
            (
                ".bashrc",
                ". ~/.my_own_rc\n. /etc/bash_completion\n. ~/proj/env.sh\n. ~\n",
            ),
            (".my_own_rc", "source ~/.deeper_rc\n"),
            (".config/zsh/.zshrc", ". ~/.config/zsh/aliases.zsh\n"),
        ]);
        let roots = vec![h(), h().join("proj")];
        let mut got = sourced_paths(&host, &h(), &h(), &roots);
        got.sort();
        let mut want = vec![
            h().join(".my_own_rc"),
            h().join(".config/zsh/aliases.zsh"),
            h().join(".deeper_rc"),
            h().join("proj/env.sh"),
        ];
        want.sort();
        assert_eq!(got, want);
    }

    /// A workspace below the home (a project) reads nothing; part of the home granted
    /// (`--allow-write ~/.config`) does, and protects only what lies in the grant.
    #[test]
    fn only_a_writable_home_or_part_of_it_is_read() {
        let host = home_with(&[(".bashrc", ". ~/.config/sh/rc\n. ~/.my_own_rc\n")]);
        let project = h().join("proj");
        assert!(sourced_paths(&host, &h(), &project, std::slice::from_ref(&project)).is_empty());
        let config = h().join(".config");
        assert_eq!(
            sourced_paths(&host, &h(), &project, &[config.clone(), project.clone()]),
            [h().join(".config/sh/rc")]
        );
        // A parent of the home as the workspace.
        assert_eq!(
            sourced_paths(&host, &h(), Path::new("/"), &[PathBuf::from("/")]).len(),
            2
        );
    }

    /// The reads are bounded: a chain of files sourcing each other stops at the depth limit.
    #[test]
    fn reads_are_bounded() {
        let mut files: Vec<(String, String)> = vec![(".bashrc".into(), ". ~/.r0\n".into())];
        for i in 0..40 {
            files.push((format!(".r{i}"), format!(". ~/.r{}\n", i + 1)));
        }
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let got = sourced_paths(&home_with(&refs), &h(), &h(), &[h()]);
        assert_eq!(got.len(), MAX_DEPTH + 1, "{got:?}");
    }
}
