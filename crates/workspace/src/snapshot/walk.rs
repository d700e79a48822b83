//! The walk of a snapshot: every directory opened beneath the workspace through no link,
//! every entry decided by the filter, links resolved, hard links of masked files found.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, OFlags};

use super::{
    git_config, Content, Decision, Entry, Excluded, Filter, Options, OutsideLink, Reason, Snapshot,
    SnapshotError,
};
use crate::beneath::Root;
use crate::host::{HostView, Kind, RealHost};

/// How many links one link's resolution may pass through (the kernel's limit): a longer
/// chain is a loop, which resolves nowhere, inside or out.
const MAX_HOPS: usize = 40;

/// The most of a git config read (a larger one is reduced from its start).
const CONFIG_LIMIT: u64 = 1 << 20;

/// Metadata of one entry, not following it.
struct Meta {
    kind: Kind,
    mode: u32,
    size: u64,
    mtime: i64,
    links: u64,
    id: (u64, u64),
}

fn meta(dir: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<Meta> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| std::io::Error::from_raw_os_error(e.raw_os_error()))?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => Kind::Dir,
        FileType::RegularFile => Kind::File,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    };
    Ok(Meta {
        kind,
        mode: st.st_mode & 0o777,
        size: u64::try_from(st.st_size).unwrap_or(0),
        mtime: st.st_mtime,
        #[allow(clippy::unnecessary_cast)]
        links: st.st_nlink as u64,
        #[allow(clippy::unnecessary_cast)]
        id: (st.st_dev as u64, st.st_ino as u64),
    })
}

/// The names in the directory `fd`, sorted.
fn names(fd: std::os::fd::OwnedFd, path: &Path) -> Result<Vec<OsString>, SnapshotError> {
    let mut dir = rustix::fs::Dir::new(fd).map_err(|e| SnapshotError::Io {
        what: "list",
        path: path.to_path_buf(),
        cause: std::io::Error::from_raw_os_error(e.raw_os_error()),
    })?;
    let mut out = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(|e| SnapshotError::Io {
            what: "list",
            path: path.to_path_buf(),
            cause: std::io::Error::from_raw_os_error(e.raw_os_error()),
        })?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            out.push(OsStr::from_bytes(name).to_os_string());
        }
    }
    out.sort();
    Ok(out)
}

/// Whether git would take a directory holding `names` for a git dir (see
/// [`crate::planted_git`]): a `HEAD`, and `refs`, `objects` or a `commondir`.
fn looks_like_git_dir(names: &[OsString]) -> bool {
    names.iter().any(|n| n == "HEAD")
        && names
            .iter()
            .any(|n| n == "refs" || n == "objects" || n == "commondir")
}

pub(super) fn take(filter: &Filter, options: Options) -> Result<Snapshot, SnapshotError> {
    let ws = filter.workspace().to_path_buf();
    let root = Root::open(&ws).map_err(SnapshotError::io("open", &ws))?;
    let mut entries: Vec<Entry> = Vec::new();
    let mut excluded: Vec<Excluded> = Vec::new();
    let mut outside: Vec<OutsideLink> = Vec::new();
    // Secrets left out inside the workspace (absolute, with kinds), and files with more
    // than one name: a hard link of a secret goes too.
    let mut secrets: Vec<(PathBuf, Kind)> = Vec::new();
    let mut multi_linked: HashSet<(u64, u64)> = HashSet::new();
    let mut git_dirs: HashSet<PathBuf> = HashSet::new();
    // Directories to list, with whether they lie in a git dir (no bare git dir is looked
    // for there).
    let mut todo: Vec<(PathBuf, bool)> = vec![(PathBuf::new(), false)];
    while let Some((dir, in_git)) = todo.pop() {
        let shown = ws.join(&dir);
        let fd = root
            .open_beneath(&dir, OFlags::RDONLY | OFlags::DIRECTORY)
            .map_err(SnapshotError::io("open", &shown))?;
        let base = root.dir(&dir).map_err(SnapshotError::io("open", &shown))?;
        let listing = names(fd, &shown)?;
        let is_git = dir.file_name().is_some_and(|n| n == ".git") || {
            let bare = !in_git && looks_like_git_dir(&listing);
            if bare {
                git_dirs.insert(dir.clone());
            }
            bare
        };
        for name in listing {
            let rel = dir.join(&name);
            let m = meta(base.as_fd(), &name).map_err(SnapshotError::io("stat", ws.join(&rel)))?;
            let decision = filter.decide_with(&rel, m.kind, &|p: &Path| git_dirs.contains(p));
            let content = match (decision, m.kind) {
                (Decision::Exclude(reason, detail), kind) => {
                    if reason == Reason::Secret {
                        secrets.push((ws.join(&rel), kind));
                    }
                    excluded.push(Excluded {
                        path: rel,
                        reason,
                        detail,
                    });
                    continue;
                }
                (_, Kind::Other) => {
                    excluded.push(Excluded {
                        path: rel,
                        reason: Reason::SpecialFile,
                        detail: "not a regular file, directory or symbolic link".into(),
                    });
                    continue;
                }
                (Decision::GitConfig, Kind::File) => {
                    Content::GitConfig(read_config(&root, &rel, &ws)?)
                }
                (_, Kind::Dir) => {
                    todo.push((rel.clone(), in_git || is_git));
                    Content::Dir
                }
                (_, Kind::File) => Content::File,
                (_, Kind::Symlink) => {
                    let target = rustix::fs::readlinkat(base.as_fd(), name.as_os_str(), vec![])
                        .map_err(|e| SnapshotError::Io {
                            what: "read the link",
                            path: ws.join(&rel),
                            cause: std::io::Error::from_raw_os_error(e.raw_os_error()),
                        })?;
                    let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
                    if resolves_outside(&root, &ws, &rel, &target) {
                        outside.push(OutsideLink { path: rel, target });
                        continue;
                    }
                    Content::Symlink(target)
                }
            };
            let size = match &content {
                Content::GitConfig(bytes) => bytes.len() as u64,
                Content::File => m.size,
                _ => 0,
            };
            let mode = match &content {
                Content::GitConfig(_) => 0o644,
                _ => m.mode,
            };
            entries.push(Entry {
                path: rel,
                content,
                mode,
                size,
                mtime: m.mtime,
                id: m.id,
            });
            if m.kind == Kind::File && m.links > 1 {
                multi_linked.insert(m.id);
            }
        }
    }
    if !outside.is_empty() && !options.allow_outside_links {
        outside.sort_by(|a, b| a.path.cmp(&b.path));
        return Err(SnapshotError::OutsideLinks {
            workspace: ws,
            links: outside,
        });
    }
    if !multi_linked.is_empty() {
        leave_out_linked_secrets(filter, &secrets, &multi_linked, &mut entries, &mut excluded);
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    excluded.sort_by(|a, b| a.path.cmp(&b.path));
    outside.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Snapshot {
        workspace: ws,
        entries,
        excluded,
        outside_links: outside,
    })
}

/// A git dir's config, read through no link, reduced.
fn read_config(root: &Root, rel: &Path, ws: &Path) -> Result<Vec<u8>, SnapshotError> {
    use std::io::Read;
    let fd = root
        .open_beneath(rel, OFlags::RDONLY | OFlags::NONBLOCK)
        .map_err(SnapshotError::io("open", ws.join(rel)))?;
    let mut text = Vec::new();
    std::fs::File::from(fd)
        .take(CONFIG_LIMIT)
        .read_to_end(&mut text)
        .map_err(SnapshotError::io("read", ws.join(rel)))?;
    Ok(git_config::reduce(&text))
}

/// Whether the link `link` (relative to the workspace) with `target` resolves outside the
/// workspace: component by component from the link's directory, `..` against the path so
/// far, through the links it meets inside the workspace. A path that leaves the workspace at
/// any point is outside (what it names depends on the host's directories), and so is an
/// absolute target that does not start with the workspace's path. A link that loops, or
/// dangles inside the workspace, resolves to nothing outside: it is kept.
pub(super) fn resolves_outside(root: &Root, ws: &Path, link: &Path, target: &Path) -> bool {
    let mut pos: Vec<OsString> = link
        .parent()
        .map(|p| p.iter().map(OsStr::to_os_string).collect())
        .unwrap_or_default();
    let mut todo: VecDeque<OsString> = VecDeque::new();
    if !queue(target, ws, &mut pos, &mut todo) {
        return true;
    }
    let mut hops = 0usize;
    let mut exists = true;
    while let Some(name) = todo.pop_front() {
        if name == ".." {
            if pos.pop().is_none() {
                return true;
            }
            continue;
        }
        pos.push(name);
        if !exists {
            continue;
        }
        match lstat_link(root, &pos) {
            Lstat::Missing => exists = false,
            Lstat::Other => {}
            Lstat::Link(next) => {
                hops += 1;
                if hops > MAX_HOPS {
                    return false;
                }
                pos.pop();
                let mut rest: VecDeque<OsString> = VecDeque::new();
                if !queue(&next, ws, &mut pos, &mut rest) {
                    return true;
                }
                rest.extend(todo.drain(..));
                todo = rest;
            }
        }
    }
    false
}

/// Puts the components of `target` before what is left to resolve; an absolute target
/// restarts from the workspace (false: it does not lie in the workspace at all).
fn queue(target: &Path, ws: &Path, pos: &mut Vec<OsString>, todo: &mut VecDeque<OsString>) -> bool {
    let rest = if target.is_absolute() {
        match target.strip_prefix(ws) {
            Ok(rest) => {
                pos.clear();
                rest
            }
            Err(_) => return false,
        }
    } else {
        target
    };
    for c in rest.components() {
        match c {
            Component::Normal(n) => todo.push_back(n.to_os_string()),
            Component::ParentDir => todo.push_back("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    true
}

enum Lstat {
    Missing,
    Other,
    Link(PathBuf),
}

/// What `pos` (relative to the workspace) is, through no link on the way.
fn lstat_link(root: &Root, pos: &[OsString]) -> Lstat {
    let Some((name, parent)) = pos.split_last() else {
        return Lstat::Other;
    };
    let parent: PathBuf = parent.iter().collect();
    let Ok(dir) = root.dir(&parent) else {
        return Lstat::Missing;
    };
    match meta(dir.as_fd(), name) {
        Ok(m) if m.kind == Kind::Symlink => {
            match rustix::fs::readlinkat(dir.as_fd(), name.as_os_str(), vec![]) {
                Ok(t) => Lstat::Link(PathBuf::from(OsStr::from_bytes(t.as_bytes()))),
                Err(_) => Lstat::Missing,
            }
        }
        Ok(_) => Lstat::Other,
        Err(_) => Lstat::Missing,
    }
}

/// Leaves out files of `entries` that are hard links of a masked file (one of the policy's
/// outside the workspace, or a secret left out inside it): a mask covers a name, not a file.
fn leave_out_linked_secrets(
    filter: &Filter,
    secrets: &[(PathBuf, Kind)],
    multi_linked: &HashSet<(u64, u64)>,
    entries: &mut Vec<Entry>,
    excluded: &mut Vec<Excluded>,
) {
    let masks: Vec<(PathBuf, Kind)> = filter
        .outside_masks
        .iter()
        .chain(secrets)
        .cloned()
        .collect();
    let mut ids: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut named: Vec<((u64, u64), PathBuf)> = Vec::new();
    for linked in crate::secrets::linked_secrets(&RealHost, &masks) {
        if let Some(e) = RealHost.stat(&linked.path) {
            if multi_linked.contains(&(e.dev, e.ino)) && ids.insert((e.dev, e.ino)) {
                named.push(((e.dev, e.ino), linked.path));
            }
        }
    }
    if ids.is_empty() {
        return;
    }
    entries.retain(|e| {
        let secret = e.content == Content::File && ids.contains(&e.id);
        if secret {
            let of = named
                .iter()
                .find(|(id, _)| *id == e.id)
                .map(|(_, p)| p.display().to_string())
                .unwrap_or_default();
            excluded.push(Excluded {
                path: e.path.clone(),
                reason: Reason::LinkedSecret,
                detail: format!("a hard link of the masked {of}"),
            });
        }
        !secret
    });
}
