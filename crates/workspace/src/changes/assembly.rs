//! Git dirs assembled across change sets, looked for at apply time.
//!
//! `finish` flags what lies in a directory git would take for a git dir in the merged view of
//! one run (`in_git_dir`). Two change sets each plain on its own (or a review change set and a
//! direct run) can still assemble one: run A writes `sub/HEAD` and a `sub/config` with
//! `core.fsmonitor`, run B makes `sub/objects` and `sub/refs`; whichever is applied last
//! completes a directory where host git runs the config's commands (a bare repository is
//! found from inside it). So `apply` plans against the workspace as it is now plus the entries
//! it is about to write, with the predicate direct mode's creation guard uses (git's
//! `is_git_directory`, read as [`crate::planted_git::accepted_by_git`] does: `HEAD` and
//! `objects`, `refs` or `commondir`, any type; [`protect::completes_git_dir`],
//! [`protect::git::is_code_name`], [`protect::git_config_is_inert`]), and flags
//! `git-internals`:
//! - an entry (`HEAD`, `objects`, `refs`, `commondir`) that makes a directory such a git dir
//!   while that directory holds (now, or from this apply) a config or `config.worktree` that
//!   is not an inert git config, a `hooks` that is not a directory, or a hook that is not a
//!   `*.sample`;
//! - a `config`, `config.worktree`, `hooks`, `commondir`, or anything below `hooks/`, going
//!   into a directory that is a git dir once the apply is done.
//!
//! Deletions the apply makes are not counted (a held deletion would leave its entry): the
//! view errs towards "git dir". A workspace entry that cannot be looked at (a link or an
//! unreadable directory on the way) counts as present, and a config that cannot be read as
//! running code.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType as Ft, OFlags};

use super::{ChangeKind, FileType, Flag, Recorded};
use crate::beneath::{list, open_child, stat_child};

/// Largest git config read to decide whether it is inert (a larger one runs code).
const CONFIG_MAX: u64 = 1 << 20;

/// The flag code these entries get.
const CODE: &str = "git-internals";

/// The workspace now plus what the apply writes.
struct View<'a> {
    root: BorrowedFd<'a>,
    /// The workspace's path, the writable root a config's local remote is judged against.
    ws: &'a Path,
    /// What the apply writes (deletions left out), by path.
    written: HashMap<&'a Path, FileType>,
    /// The `hooks` directories the apply writes something below.
    hooks_written: HashSet<&'a Path>,
}

/// What the workspace holds now at a path.
enum Now {
    Absent,
    /// Present, and whether it is a directory.
    Present(bool),
    /// It could not be looked at (a link or a closed directory on the way).
    Unknown,
}

impl View<'_> {
    fn dir(&self, dir: &Path) -> Option<OwnedFd> {
        let rel = if dir.as_os_str().is_empty() {
            OsStr::new(".")
        } else {
            dir.as_os_str()
        };
        open_child(self.root, rel, OFlags::PATH | OFlags::DIRECTORY).ok()
    }

    fn now(&self, path: &Path) -> Now {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Now::Unknown;
        };
        let rel = if parent.as_os_str().is_empty() {
            OsStr::new(".")
        } else {
            parent.as_os_str()
        };
        let dir = match open_child(self.root, rel, OFlags::PATH | OFlags::DIRECTORY) {
            Ok(d) => d,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => {
                return Now::Absent
            }
            Err(_) => return Now::Unknown,
        };
        match stat_child(dir.as_fd(), name) {
            Ok(None) => Now::Absent,
            Ok(Some(st)) => Now::Present(Ft::from_raw_mode(st.st_mode) == Ft::Directory),
            Err(_) => Now::Unknown,
        }
    }

    fn has_now(&self, dir: &Path, name: &str) -> bool {
        !matches!(self.now(&dir.join(name)), Now::Absent)
    }

    fn has_after(&self, dir: &Path, name: &str) -> bool {
        self.written.contains_key(dir.join(name).as_path()) || self.has_now(dir, name)
    }

    fn shaped_now(&self, dir: &Path) -> bool {
        shaped(|n| self.has_now(dir, n))
    }

    fn shaped_after(&self, dir: &Path) -> bool {
        shaped(|n| self.has_after(dir, n))
    }

    /// Whether `dir`, once the apply is done, holds what runs code in a git dir: a config
    /// that is not inert, a `hooks` that is not a directory, a hook that is not a sample.
    fn holds_code_after(&self, dir: &Path) -> bool {
        let hooks = dir.join("hooks");
        if self
            .written
            .get(hooks.as_path())
            .is_some_and(|t| *t != FileType::Dir)
            || self.hooks_written.contains(hooks.as_path())
        {
            return true;
        }
        match self.now(&hooks) {
            Now::Absent => {}
            Now::Present(false) | Now::Unknown => return true,
            Now::Present(true) => {
                let Some(fd) = self.dir(&hooks).and_then(|d| {
                    open_child(
                        d.as_fd(),
                        OsStr::new("."),
                        OFlags::RDONLY | OFlags::DIRECTORY,
                    )
                    .ok()
                }) else {
                    return true;
                };
                match list(fd.as_fd()) {
                    Ok(names) => {
                        if names.iter().any(|n| !n.as_bytes().ends_with(b".sample")) {
                            return true;
                        }
                    }
                    Err(_) => return true,
                }
            }
        }
        for file in ["config", "config.worktree"] {
            let path = dir.join(file);
            if self.written.contains_key(path.as_path()) {
                return true;
            }
            match self.now(&path) {
                Now::Absent => {}
                Now::Present(true) | Now::Unknown => return true,
                Now::Present(false) => {
                    if !self.config_is_inert(&path) {
                        return true;
                    }
                }
            }
        }
        false
    }

    fn config_is_inert(&self, path: &Path) -> bool {
        let Ok(fd) = open_child(
            self.root,
            path.as_os_str(),
            OFlags::RDONLY | OFlags::NONBLOCK,
        ) else {
            return false;
        };
        let Ok(st) = rustix::fs::fstat(&fd) else {
            return false;
        };
        if Ft::from_raw_mode(st.st_mode) != Ft::RegularFile {
            return false;
        }
        let mut text = Vec::new();
        if std::fs::File::from(fd)
            .take(CONFIG_MAX + 1)
            .read_to_end(&mut text)
            .is_err()
            || text.len() as u64 > CONFIG_MAX
        {
            return false;
        }
        protect::git_config_is_inert(&text, &[self.ws.as_os_str().as_bytes()])
    }
}

/// Git's test (`is_git_directory`), as the creation guard reads it: `HEAD`, and `objects`,
/// `refs` or a `commondir`, each of any type.
fn shaped(has: impl Fn(&str) -> bool) -> bool {
    has("HEAD") && ["objects", "refs", "commondir"].iter().any(|n| has(n))
}

/// The `git-internals` flags the entries of `selected` get because, with what the workspace
/// holds now (`root`, the workspace at `ws`), applying them assembles a git dir or writes
/// into one (see the module's docs). Each path at most once.
pub(super) fn git_assembly(
    root: BorrowedFd<'_>,
    ws: &Path,
    selected: &[&Recorded],
) -> Vec<(PathBuf, Flag)> {
    let written: HashMap<&Path, FileType> = selected
        .iter()
        .filter(|e| e.kind != ChangeKind::Deleted)
        .map(|e| (e.path.as_path(), e.file_type))
        .collect();
    let hooks_written = written
        .keys()
        .flat_map(|p| p.ancestors().skip(1))
        .filter(|a| a.file_name() == Some(OsStr::new("hooks")))
        .collect();
    let view = View {
        root,
        ws,
        written,
        hooks_written,
    };
    let mut out = Vec::new();
    for e in selected.iter().filter(|e| e.kind != ChangeKind::Deleted) {
        let (Some(dir), Some(name)) = (e.path.parent(), e.path.file_name()) else {
            continue;
        };
        let name = name.as_bytes();
        let shown = |d: &Path| {
            if d.as_os_str().is_empty() {
                ".".to_string()
            } else {
                d.display().to_string()
            }
        };
        let reason = if protect::git::is_code_name(name) && view.shaped_after(dir) {
            Some(format!(
                "it goes into {}, a git directory once applied (with what the workspace holds now): host git runs its config and hooks there",
                shown(dir)
            ))
        } else if let Some(git_dir) = dir
            .ancestors()
            .skip(1)
            .zip(dir.ancestors())
            .find(|(_, h)| h.file_name() == Some(OsStr::new("hooks")))
            .map(|(g, _)| g)
            .filter(|g| view.shaped_after(g))
        {
            Some(format!(
                "a hook of {}, a git directory once applied (with what the workspace holds now): host git runs it",
                shown(git_dir)
            ))
        } else if protect::completes_git_dir(name)
            && !view.shaped_now(dir)
            && view.shaped_after(dir)
            && view.holds_code_after(dir)
        {
            Some(format!(
                "it makes {} a git directory (with what the workspace holds now) whose config or hooks run code when host git runs there",
                shown(dir)
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            out.push((e.path.clone(), Flag { code: CODE, reason }));
        }
    }
    out
}
