//! How the sandbox reaches what it is granted, wherever that lies on the host:
//!
//! - **Read grants under `/tmp`.** The sandbox's `/tmp` is private, so a granted path below
//!   the host's `/tmp` is cloned before `/tmp` is replaced and attached read-only at the same
//!   place in the private one (writable roots there already are).
//! - **Grants below directories the sandbox cannot traverse.** A root caller's command runs
//!   as an id no account has, so it passes only the "others" permission bits of host
//!   directories. `mktemp -d` makes `0700` directories: a workspace cloned below one could
//!   not be reached. Each such directory that leads to a granted path (a writable root, the
//!   private home, a read grant) is covered with a small read-only tmpfs holding only the
//!   directories that lead there. Nothing else below it was reachable before either, so the
//!   cover shows nothing the sandbox could not already see.
//! - **Where the command starts**: the caller's current directory when the sandbox can
//!   reach it, otherwise the workspace (and the plan says why, so the CLI can tell the user).

use std::path::{Path, PathBuf};

use policy::is_within;

use workspace::{depth, under_replaced};

use super::Mount;
use crate::host::{Entry, HostView, Kind};

/// A path the sandbox is granted and must be able to reach, and how it is mounted.
#[derive(Debug, Clone)]
pub(super) struct Granted {
    pub path: PathBuf,
    pub kind: Kind,
    /// The idmapped mount that makes `path` the sandbox's own: (host uid, host gid) of the
    /// owner it maps to the sandbox, for root callers' writable roots and home.
    pub mapped_owner: Option<(u32, u32)>,
}

/// Mount points in the private `/tmp` for `path` below it: each missing component, then
/// `path` itself (a directory, or an empty file for a file). `attached` are the other paths
/// below `/tmp` attached there (writable roots, read grants), parents before children: what
/// lies inside one of them is the host's own (attached before `path`, and read-only if it is
/// a read grant), so nothing is made there.
pub(super) fn tmp_mount_points(path: &Path, kind: Kind, attached: &[PathBuf]) -> Vec<Mount> {
    let inside_other = |p: &Path| attached.iter().any(|a| a != path && is_within(p, a));
    if inside_other(path) {
        return Vec::new();
    }
    let mut dirs: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .take_while(|a| *a != Path::new("/tmp"))
        .map(Path::to_path_buf)
        .collect();
    dirs.reverse();
    let mut steps: Vec<Mount> = dirs
        .into_iter()
        .map(|d| Mount::Mkdir {
            path: d,
            mode: 0o755,
        })
        .collect();
    steps.push(mount_point(path, kind));
    steps
}

fn mount_point(path: &Path, kind: Kind) -> Mount {
    if kind == Kind::Dir {
        Mount::Mkdir {
            path: path.to_path_buf(),
            mode: 0o755,
        }
    } else {
        Mount::File {
            path: path.to_path_buf(),
            mode: 0o644,
        }
    }
}

/// Whether the sandbox, as a root caller's unassigned id, may search (traverse) `entry`.
/// `mapped` is the owner an enclosing idmapped mount maps to the sandbox's id.
fn searchable_by_unassigned_id(entry: &Entry, mapped: Option<(u32, u32)>) -> bool {
    entry.kind == Kind::Dir
        && sandbox::unassigned_id_enters(entry.mode, (entry.uid, entry.gid), mapped)
}

/// The idmapped owner in force at `path` (the deepest granted mount holding it).
fn mapped_at(granted: &[Granted], path: &Path) -> Option<(u32, u32)> {
    granted
        .iter()
        .filter(|g| g.mapped_owner.is_some() && is_within(path, &g.path))
        .max_by_key(|g| depth(&g.path))
        .and_then(|g| g.mapped_owner)
}

/// A directory the sandbox cannot traverse, covered with a read-only tmpfs that holds only
/// the way to the granted paths below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cover {
    pub dir: PathBuf,
    pub steps: Vec<Mount>,
}

/// The covers a root caller's sandbox needs to reach `granted` (see the module comment).
/// Unprivileged callers run as themselves and need none.
pub(super) fn covers(host: &dyn HostView, root_caller: bool, granted: &[Granted]) -> Vec<Cover> {
    if !root_caller {
        return Vec::new();
    }
    // The first directory on the way to each granted path that the sandbox cannot search.
    let mut blocked: Vec<PathBuf> = Vec::new();
    for g in granted {
        if under_replaced(&g.path) {
            continue;
        }
        let mut chain: Vec<&Path> = g.path.ancestors().skip(1).collect();
        chain.reverse();
        for dir in chain {
            let Some(entry) = host.stat(dir) else {
                break;
            };
            if !searchable_by_unassigned_id(&entry, mapped_at(granted, dir)) {
                blocked.push(dir.to_path_buf());
                break;
            }
        }
    }
    blocked.sort();
    blocked.dedup();
    // A blocked directory below another one is inside that one's cover already.
    let outer: Vec<PathBuf> = blocked
        .iter()
        .filter(|b| !blocked.iter().any(|o| o != *b && is_within(b, o)))
        .cloned()
        .collect();
    outer
        .into_iter()
        .map(|dir| {
            let mut steps = vec![Mount::Tmpfs {
                target: dir.clone(),
                data: "mode=0755,size=64k".into(),
                flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            }];
            let mut made: Vec<PathBuf> = Vec::new();
            let mut inside: Vec<&Granted> = granted
                .iter()
                .filter(|g| is_within(&g.path, &dir) && g.path != dir)
                .filter(|g| {
                    !granted
                        .iter()
                        .any(|o| o.path != g.path && is_within(&g.path, &o.path))
                })
                .collect();
            inside.sort_by(|a, b| a.path.cmp(&b.path));
            for g in inside {
                let mut between: Vec<&Path> = g
                    .path
                    .ancestors()
                    .skip(1)
                    .take_while(|a| *a != dir.as_path())
                    .collect();
                between.reverse();
                for d in between {
                    if !made.iter().any(|m| m == d) {
                        made.push(d.to_path_buf());
                        steps.push(Mount::Mkdir {
                            path: d.to_path_buf(),
                            mode: 0o755,
                        });
                    }
                }
                if !made.iter().any(|m| m == &g.path) {
                    made.push(g.path.clone());
                    steps.push(mount_point(&g.path, g.kind));
                }
            }
            steps.push(Mount::ReadOnly { path: dir.clone() });
            Cover { dir, steps }
        })
        .collect()
}

/// Is `path` hidden by a cover (below one, and not inside a granted path)?
pub(super) fn hidden_by_cover(path: &Path, covers: &[Cover], granted: &[Granted]) -> bool {
    covers.iter().any(|c| is_within(path, &c.dir))
        && !granted.iter().any(|g| is_within(path, &g.path))
}

/// Whether a root caller's sandbox cannot reach `path` at all: a directory on the way (not
/// below a granted path, whose mount it reaches through) that its unassigned id may not
/// search. A mask there covers nothing the sandbox could see, and the init, which looks the
/// path up as that id, could not make it.
pub(super) fn out_of_reach(host: &dyn HostView, path: &Path, granted: &[Granted]) -> bool {
    if granted.iter().any(|g| is_within(path, &g.path)) {
        return false;
    }
    let mut chain: Vec<&Path> = path.ancestors().skip(1).collect();
    chain.reverse();
    chain.into_iter().any(|dir| {
        host.stat(dir)
            .is_some_and(|entry| !searchable_by_unassigned_id(&entry, mapped_at(granted, dir)))
    })
}

pub use sandbox::CwdFallback;

/// What [`start_dir`] needs to know about the sandbox's view.
pub(super) struct View<'a> {
    pub host: &'a dyn HostView,
    pub workspace: &'a Path,
    pub root_caller: bool,
    pub granted: &'a [Granted],
    pub covers: &'a [Cover],
    pub masks: &'a [PathBuf],
    /// `None`: the whole host is readable; else the readable roots.
    pub readable: Option<&'a [PathBuf]>,
}

/// Why a current directory below `/tmp` that no grant holds is not the sandbox's, with the fix.
const TMP_CWD: &str = "the sandbox has its own /tmp (grant the directory with --allow-read or --allow-write to start there)";

/// Where the command starts: the caller's `cwd` when the sandbox can reach it, else the
/// workspace with the reason.
pub(super) fn start_dir(cwd: &Path, view: &View<'_>) -> (PathBuf, Option<CwdFallback>) {
    match unreachable_because(cwd, view) {
        None => (cwd.to_path_buf(), None),
        Some(reason) => (
            view.workspace.to_path_buf(),
            Some(CwdFallback {
                cwd: cwd.to_path_buf(),
                reason,
            }),
        ),
    }
}

fn unreachable_because(cwd: &Path, view: &View<'_>) -> Option<String> {
    if is_within(cwd, view.workspace) {
        return None;
    }
    if view.granted.iter().any(|g| is_within(cwd, &g.path)) {
        return None;
    }
    if is_within(cwd, Path::new("/tmp")) {
        return Some(TMP_CWD.into());
    }
    if under_replaced(cwd) {
        return Some("the sandbox has its own /tmp, /dev and /proc".into());
    }
    if let Some(m) = view.masks.iter().find(|m| is_within(cwd, m)) {
        return Some(format!("{} is masked", m.display()));
    }
    if hidden_by_cover(cwd, view.covers, view.granted) {
        return Some("the sandbox cannot traverse a directory above it".into());
    }
    if let Some(readable) = view.readable {
        if !readable.iter().any(|r| is_within(cwd, r)) {
            return Some("it is outside the readable paths (read_scope = \"allow-list\")".into());
        }
    }
    if view.root_caller {
        let mut chain: Vec<&Path> = cwd.ancestors().collect();
        chain.reverse();
        for dir in chain {
            let entry = view.host.stat(dir)?;
            if !searchable_by_unassigned_id(&entry, mapped_at(view.granted, dir)) {
                return Some(format!(
                    "the sandbox's user cannot enter {} (mode {:o})",
                    dir.display(),
                    entry.mode & 0o7777
                ));
            }
        }
    }
    None
}
