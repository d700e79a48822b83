//! Before `apply` writes anything: which entries it applies, and whether each one's
//! workspace path is still as the run left it (its base), already as the change set wants it
//! (an earlier apply was interrupted), or changed (a conflict).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{OFlags, Stat};
use rustix::io::Errno;

use super::read::{perm, state_of};
use super::{BaseState, ChangeKind, ChangesError, FileType, Recorded};
use crate::beneath::{errno_io, list, open_child, resolve, stat_child};

/// A path the user named: relative to the workspace, `.` components dropped, no `..`.
pub(crate) fn user_path(p: &Path) -> Result<PathBuf, ChangesError> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => {
                return Err(ChangesError::BadPath {
                    path: p.to_path_buf(),
                    reason: "not a path relative to the workspace without `..`".into(),
                })
            }
        }
    }
    Ok(out)
}

/// Whether the user's `sel` (a path or a directory above it) names `path`.
pub(crate) fn covers(sel: &Path, path: &Path) -> bool {
    path.starts_with(sel)
}

fn creates_dir(e: &Recorded) -> bool {
    e.file_type == FileType::Dir && matches!(e.kind, ChangeKind::Added | ChangeKind::TypeChanged)
}

/// The entries of `pending` that `only` and `exclude` select, sorted by path, with the
/// directories the change set creates above a selected entry (without them it has nowhere to
/// go). `only` paths that select nothing are an error.
pub(crate) fn select<'a>(
    pending: &[&'a Recorded],
    only: &[PathBuf],
    exclude: &[PathBuf],
) -> Result<Vec<&'a Recorded>, ChangesError> {
    let only = only
        .iter()
        .map(|p| user_path(p))
        .collect::<Result<Vec<_>, _>>()?;
    let exclude = exclude
        .iter()
        .map(|p| user_path(p))
        .collect::<Result<Vec<_>, _>>()?;
    let unmatched: Vec<PathBuf> = only
        .iter()
        .filter(|o| !pending.iter().any(|e| covers(o, &e.path)))
        .cloned()
        .collect();
    if !unmatched.is_empty() {
        return Err(ChangesError::NoSuchChange(unmatched));
    }
    let excluded = |e: &Recorded| exclude.iter().any(|x| covers(x, &e.path));
    let mut chosen: HashSet<&Path> = pending
        .iter()
        .filter(|e| only.is_empty() || only.iter().any(|o| covers(o, &e.path)))
        .filter(|e| !excluded(e))
        .map(|e| e.path.as_path())
        .collect();
    let needed: Vec<&Path> = pending
        .iter()
        .filter(|e| creates_dir(e) && !excluded(e) && !chosen.contains(e.path.as_path()))
        .filter(|e| chosen.iter().any(|c| c.starts_with(&e.path)))
        .map(|e| e.path.as_path())
        .collect();
    chosen.extend(needed);
    let mut out: Vec<&Recorded> = pending
        .iter()
        .copied()
        .filter(|e| chosen.contains(e.path.as_path()))
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// A workspace path now.
#[derive(Debug)]
pub(crate) enum Current {
    /// Its directory cannot be reached without following a link: the reason.
    NoParent(String),
    /// Its directory does not exist (or a component on the way is not a directory): the
    /// reason.
    ParentGone(String),
    Absent,
    Present(Stat, BaseState),
}

/// The directory of `rel` in the workspace `root`, reached without following a link.
pub(crate) fn open_parent(root: BorrowedFd<'_>, rel: &Path) -> Result<OwnedFd, String> {
    open_parent_errno(root, rel).map_err(|(_, why)| why)
}

fn open_parent_errno(root: BorrowedFd<'_>, rel: &Path) -> Result<OwnedFd, (Errno, String)> {
    let parent = match rel.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    rustix::fs::openat2(
        root,
        parent,
        // No O_NOFOLLOW: with it, a link as the last component would be opened itself
        // (and fail as "not a directory"); RESOLVE_NO_SYMLINKS refuses it with ELOOP.
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
        resolve(),
    )
    .map_err(|e| {
        let d = parent.display();
        let why = match e {
            Errno::LOOP => {
                format!("a symbolic link on the way to it ({d}): nothing is written through one")
            }
            Errno::NOENT => format!("its directory {d} does not exist"),
            Errno::NOTDIR => format!("{d} is not a directory"),
            e => format!("its directory {d} cannot be opened: {}", errno_io(e)),
        };
        (e, why)
    })
}

/// The state of `rel` in the workspace; `tree`: a directory's tree signature is taken.
pub(crate) fn current(
    root: BorrowedFd<'_>,
    root_path: &Path,
    rel: &Path,
    tree: bool,
) -> Result<Current, ChangesError> {
    let parent = match open_parent_errno(root, rel) {
        Ok(p) => p,
        Err((Errno::NOENT | Errno::NOTDIR, why)) => return Ok(Current::ParentGone(why)),
        Err((_, why)) => return Ok(Current::NoParent(why)),
    };
    let name = rel.file_name().unwrap_or(OsStr::new("."));
    let read = |cause| ChangesError::Read {
        path: root_path.join(rel),
        cause,
    };
    let Some(st) = stat_child(parent.as_fd(), name).map_err(read)? else {
        return Ok(Current::Absent);
    };
    let state = state_of(parent.as_fd(), name, &st, tree, false)
        .map_err(read)?
        .state;
    Ok(Current::Present(st, state))
}

fn describe(state: &BaseState) -> String {
    match state {
        BaseState::Absent => "absent".into(),
        BaseState::File { sha256, mode } => {
            format!(
                "a file, mode {mode:o}, sha256 {}",
                sha256.get(..12).unwrap_or(sha256)
            )
        }
        BaseState::Symlink { target } => format!("a link to {}", target.display()),
        BaseState::Dir { mode, tree: None } => format!("a directory, mode {mode:o}"),
        BaseState::Dir {
            mode,
            tree: Some(_),
        } => {
            format!("a directory, mode {mode:o}, with other contents")
        }
        BaseState::Other { mode, .. } => format!("a special file, mode {mode:o}"),
    }
}

/// Whether the workspace path is as the change set wants it.
pub(crate) fn is_target(e: &Recorded, cur: &Current) -> bool {
    let want = e.mode.unwrap_or(0) & 0o777;
    match (e.kind, cur) {
        (ChangeKind::Deleted, Current::Absent | Current::ParentGone(_)) => true,
        (ChangeKind::Deleted, _)
        | (_, Current::Absent | Current::NoParent(_) | Current::ParentGone(_)) => false,
        (_, Current::Present(st, state)) => match (e.file_type, state) {
            (FileType::File, BaseState::File { sha256, .. }) => {
                Some(sha256) == e.sha256.as_ref() && perm(st) == want
            }
            (FileType::Symlink, BaseState::Symlink { target }) => {
                Some(target) == e.symlink_target.as_ref()
            }
            (FileType::Dir, BaseState::Dir { .. }) => perm(st) & 0o777 == want,
            _ => false,
        },
    }
}

/// Whether the workspace path is still in its recorded base state.
fn is_base(e: &Recorded, cur: &Current) -> bool {
    match (&e.base.state, cur) {
        (BaseState::Absent, Current::Absent) => true,
        (_, Current::Present(_, now)) => *now == e.base.state,
        _ => false,
    }
}

/// What to do with one selected entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Write,
    Already,
    /// Never applied (a fifo, socket or device node).
    Skip,
}

/// Each selected entry's action, or the conflicts. `all` is every recorded entry (a replaced
/// directory may hold what the change set deletes below it).
pub(crate) fn plan(
    root: BorrowedFd<'_>,
    root_path: &Path,
    upper: BorrowedFd<'_>,
    selected: &[&Recorded],
    all: &[Recorded],
) -> Result<Vec<Action>, ChangesError> {
    let mut actions = Vec::with_capacity(selected.len());
    let mut conflicts = Vec::new();
    // Directories the apply creates (or makes out of another type): what lies below them
    // need not exist yet.
    let mut made: Vec<&Path> = Vec::new();
    for e in selected {
        if e.file_type == FileType::Other && e.kind != ChangeKind::Deleted {
            actions.push(Action::Skip);
            continue;
        }
        let tree = matches!(e.base.state, BaseState::Dir { tree: Some(_), .. });
        let cur = current(root, root_path, &e.path, tree)?;
        let conflict = |why: String| (e.path.clone(), why);
        let action = if is_target(e, &cur) {
            Ok(Action::Already)
        } else if let Current::NoParent(why) | Current::ParentGone(why) = &cur {
            // A directory this apply makes (or makes out of a file or link) is on the way.
            if made.iter().any(|m| e.path.starts_with(m)) {
                Ok(Action::Write)
            } else {
                Err(conflict(why.clone()))
            }
        } else if e.base.changed_during_run {
            Err(conflict(
                "it changed on the host while the run went on".into(),
            ))
        } else if !is_base(e, &cur) {
            let now = match &cur {
                Current::Present(_, s) => describe(s),
                _ => "absent".into(),
            };
            Err(conflict(match e.base.state {
                BaseState::Absent => format!("it exists in the workspace now ({now})"),
                _ => format!(
                    "it changed in the workspace since the run ended (was {}, now {now})",
                    describe(&e.base.state)
                ),
            }))
        } else {
            Ok(Action::Write)
        };
        let action = match (action, e.kind) {
            (Ok(a), ChangeKind::ReplacedDir) => {
                match extra_in_replaced(root, root_path, upper, e, all)? {
                    Some(name) => Err(conflict(format!(
                        "the workspace has {} below it, made after the run ended",
                        name.display()
                    ))),
                    None => Ok(a),
                }
            }
            (a, _) => a,
        };
        match action {
            Ok(a) => {
                if creates_dir(e) && a == Action::Write {
                    made.push(&e.path);
                }
                actions.push(a);
            }
            Err(c) => conflicts.push(c),
        }
    }
    if !conflicts.is_empty() {
        return Err(ChangesError::Conflict(conflicts));
    }
    Ok(actions)
}

/// A name in the workspace's copy of the replaced directory `e` that neither the upper
/// holds nor the change set deletes: made on the host after the run.
fn extra_in_replaced(
    root: BorrowedFd<'_>,
    root_path: &Path,
    upper: BorrowedFd<'_>,
    e: &Recorded,
    all: &[Recorded],
) -> Result<Option<PathBuf>, ChangesError> {
    let dest = rustix::fs::openat2(
        root,
        &e.path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
        resolve(),
    );
    let Ok(dest) = dest else {
        return Ok(None);
    };
    let read = |path: PathBuf| move |cause| ChangesError::Read { path, cause };
    let names = list(dest.as_fd()).map_err(read(root_path.join(&e.path)))?;
    let up = open_child(
        upper,
        e.path.as_os_str(),
        OFlags::RDONLY | OFlags::DIRECTORY,
    )
    .map_err(read(e.path.clone()))?;
    let in_upper = list(up.as_fd()).map_err(read(e.path.clone()))?;
    for name in names {
        let child = e.path.join(&name);
        let deleted = all
            .iter()
            .any(|d| d.path == child && d.kind == ChangeKind::Deleted);
        let ours = name
            .to_str()
            .is_some_and(|n| n.starts_with(super::APPLY_TEMP_PREFIX));
        if !deleted && !ours && !in_upper.contains(&name) {
            return Ok(Some(child));
        }
    }
    Ok(None)
}
