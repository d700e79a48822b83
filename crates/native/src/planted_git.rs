//! Git dirs the sandbox assembled: a directory git would accept as a git dir
//! (`is_git_directory` in git's `setup.c`) that was not one when the run started.
//!
//! A command can build a repository in any order — `config` with `core.fsmonitor` and
//! `hooks/post-checkout` first, `HEAD`, `objects/` and `refs/` last — so the creation guard,
//! which only knows a git dir once it looks like one, cannot refuse all of it. Host git runs
//! that config or hook when anyone runs git in the directory (a bare repository is found from
//! inside it: `safe.bareRepository` defaults to `all`), reaches it with `git -C` or `GIT_DIR`,
//! or through a `.git` file elsewhere. The sweep recognises such a directory the way git does
//! and takes out what runs code or sends git elsewhere.

use std::ffi::OsStr;
use std::path::Path;

use crate::host::{HostView, Kind};

/// Violation kind of what the sweep took out of a git dir assembled during the run.
pub const PLANTED_GIT_DIR: &str = "planted_git_dir";

/// Whether an entry named `name` in a git dir makes git run code or look elsewhere: its
/// config (and per-worktree config), its hooks, a `commondir` that moves its common dir.
pub(crate) fn is_code_name(name: &OsStr) -> bool {
    name == "config" || name == "config.worktree" || name == "hooks" || name == "commondir"
}

/// Whether git would accept `dir` as a git dir. Git's test (`is_git_directory`): a `HEAD` that
/// validates as a ref (a `refs/...` symlink, `ref: refs/...`, or an object id), and in the
/// common dir (the directory itself, or the one its `commondir` names) `objects` and `refs`.
/// This errs towards "yes": `objects` is not required (`GIT_OBJECT_DIRECTORY` replaces it in
/// git's test), any `commondir` counts (whatever it names), and a symlinked `HEAD` counts.
pub(crate) fn accepted_by_git(host: &dyn HostView, dir: &Path) -> bool {
    head_validates(host, &dir.join("HEAD"))
        && (host.lstat_kind(&dir.join("commondir")).is_some()
            || host.stat(&dir.join("refs")).is_some())
}

/// Git's `validate_headref`, leaning to "valid" where it cannot read.
fn head_validates(host: &dyn HostView, head: &Path) -> bool {
    match host.lstat_kind(head) {
        Some(Kind::Symlink) => true,
        // Unreadable as text (not UTF-8, swapped for a FIFO): counted as valid.
        Some(Kind::File) => host
            .read_small(head)
            .is_none_or(|t| head_text_validates(&t)),
        _ => false,
    }
}

fn head_text_validates(text: &str) -> bool {
    if let Some(rest) = text.strip_prefix("ref:") {
        return rest.trim_start().starts_with("refs/");
    }
    let hex = text.bytes().take_while(u8::is_ascii_hexdigit).count();
    // `get_oid_hex_any`: the first 40 (SHA-1) or 64 (SHA-256) characters, whatever follows.
    hex >= 40
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_is_validated_like_git() {
        for ok in [
            "ref: refs/heads/main\n",
            "ref:refs/heads/x",
            "ref: \t refs/heads/.invalid\n",
            "0123456789abcdef0123456789abcdef01234567\n",
            "0123456789abcdef0123456789abcdef01234567 trailing",
        ] {
            assert!(head_text_validates(ok), "{ok:?}");
        }
        for bad in ["", "ref: heads/main", "hello", "0123456789abcdef\n"] {
            assert!(!head_text_validates(bad), "{bad:?}");
        }
    }
}
