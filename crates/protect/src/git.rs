//! Git's rules, in one place: what a git dir is, which of its names make git run code or look
//! elsewhere. The native init's creation guard ([`crate::decide`]), the workspace scan and the
//! sweep after a run all ask these. Paths are byte strings and component lists; nothing
//! allocates.

/// Directories inside a git dir whose entries are git's data, never a git dir or its code.
pub const GIT_DIR_INNER: [&[u8]; 5] = [b"refs", b"logs", b"objects", b"info", b"hooks"];

/// Whether the directory whose components are `names` is a git dir (see the module docs).
pub fn is_git_dir<'p>(names: impl DoubleEndedIterator<Item = &'p [u8]> + Clone) -> bool {
    if names.clone().next_back() == Some(b".git".as_slice()) {
        return true;
    }
    // Below the last `.git`: `modules/<name...>` without any git-internal directory.
    let after: usize = names
        .clone()
        .rev()
        .position(|c| c == b".git")
        .unwrap_or(usize::MAX);
    if after == usize::MAX {
        return false;
    }
    let total = names.clone().count();
    let mut inner = names.skip(total - after);
    inner.next() == Some(b"modules".as_slice())
        && after >= 2
        && inner.all(|c| !GIT_DIR_INNER.contains(&c))
}

/// Names that complete a git dir (what git's `is_git_directory` looks for).
pub fn completes_git_dir(name: &[u8]) -> bool {
    matches!(name, b"HEAD" | b"objects" | b"refs" | b"commondir")
}

/// Whether an entry named `name` in a git dir makes git run code or look elsewhere: its
/// config (and per-worktree config), its hooks, a `commondir` that moves its common dir.
pub fn is_code_name(name: &[u8]) -> bool {
    matches!(
        name,
        b"config" | b"config.worktree" | b"hooks" | b"commondir"
    )
}

/// Whether the path whose components are `names` lies inside a `.git/modules` tree (the git
/// dirs of submodules).
pub fn in_modules<'p>(names: impl Iterator<Item = &'p [u8]>) -> bool {
    let mut previous_is_git = false;
    for name in names {
        if previous_is_git && name == b"modules" {
            return true;
        }
        previous_is_git = name == b".git";
    }
    false
}

/// Whether the path whose components are `names` is the `hooks`, `config` or `commondir` of a
/// submodule's git dir: what makes git run code there.
pub fn is_submodule_code_path<'p>(
    names: impl DoubleEndedIterator<Item = &'p [u8]> + Clone,
) -> bool {
    let mut back = names.clone().rev();
    let named = back
        .next()
        .is_some_and(|n| matches!(n, b"hooks" | b"config" | b"commondir"));
    if !named {
        return false;
    }
    let parent_is_modules = back.next() == Some(b"modules".as_slice());
    let total = names.clone().count();
    !parent_is_modules && in_modules(names.take(total.saturating_sub(1)))
}

/// Whether an entry named `name` that is not a directory redirects git elsewhere: a `.git`
/// `gitdir:` file or symlink sends git to another git dir, with that dir's hooks and config.
pub fn is_redirect(name: &[u8], is_dir: bool) -> bool {
    !is_dir && name == b".git"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &str) -> impl DoubleEndedIterator<Item = &[u8]> + Clone {
        p.split('/').filter(|c| !c.is_empty()).map(str::as_bytes)
    }

    #[test]
    fn submodule_code_paths() {
        assert!(is_submodule_code_path(names("/w/.git/modules/a/hooks")));
        assert!(is_submodule_code_path(names("/w/.git/modules/a/b/config")));
        assert!(!is_submodule_code_path(names("/w/.git/modules/config")));
        assert!(!is_submodule_code_path(names("/w/.git/hooks")));
        assert!(!is_submodule_code_path(names("/w/modules/a/hooks")));
        assert!(in_modules(names("/w/.git/modules")));
        assert!(!in_modules(names("/w/.git/x/modules")));
    }
}
