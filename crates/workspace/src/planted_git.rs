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

use crate::host::HostView;

/// Violation kind of what the sweep took out of a git dir assembled during the run.
pub const PLANTED_GIT_DIR: &str = "planted_git_dir";

/// Whether an entry named `name` in a git dir makes git run code or look elsewhere (see
/// [`protect::git::is_code_name`]).
pub(crate) fn is_code_name(name: &OsStr) -> bool {
    protect::git::is_code_name(name.as_encoded_bytes())
}

/// Whether git would accept `dir` as a git dir, or could once a file's content changes. Git's
/// test (`is_git_directory`): a `HEAD` that validates as a ref (a `refs/...` symlink,
/// `ref: refs/...`, or an object id), and in the common dir (the directory itself, or the one
/// its `commondir` names) `objects` and `refs`. This errs towards "yes": any `HEAD` counts,
/// whatever it holds (rewriting an existing file's content moves no directory's ctime, so a
/// `HEAD` made invalid in one run and valid in the next would never be listed again),
/// `objects` is not required (`GIT_OBJECT_DIRECTORY` replaces it in git's test), and any
/// `commondir` counts, whatever it names.
pub(crate) fn accepted_by_git(host: &dyn HostView, dir: &Path) -> bool {
    // `lstat`: a `refs` that is a symlink to a directory made later (by the host, or by a
    // later run, which does not move this directory's ctime) counts already.
    host.lstat_kind(&dir.join("HEAD")).is_some()
        && ["commondir", "refs", "objects"]
            .iter()
            .any(|n| host.lstat_kind(&dir.join(n)).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::RealHost;

    #[test]
    fn any_head_with_refs_or_a_commondir_counts() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        assert!(!accepted_by_git(&RealHost, d));
        std::fs::write(d.join("HEAD"), "not a ref yet").unwrap();
        assert!(!accepted_by_git(&RealHost, d), "HEAD alone");
        std::fs::write(d.join("commondir"), "../x").unwrap();
        assert!(accepted_by_git(&RealHost, d), "HEAD and a commondir");
        std::fs::remove_file(d.join("commondir")).unwrap();
        std::fs::create_dir(d.join("refs")).unwrap();
        assert!(accepted_by_git(&RealHost, d), "HEAD and refs");
        std::fs::remove_dir(d.join("refs")).unwrap();
        std::os::unix::fs::symlink("../later", d.join("refs")).unwrap();
        assert!(
            accepted_by_git(&RealHost, d),
            "HEAD and a dangling refs link"
        );
    }
}
