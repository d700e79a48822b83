//! Masked files with another name outside the masks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub use sandbox::LinkedSecret;

use crate::host::{Entry, HostView, Kind};

/// How deep below a masked directory files are checked for hard links, and how many entries
/// per mask at most: credential files sit near the top (`~/.ssh/id_rsa`, `~/.aws/credentials`,
/// `~/.gnupg/private-keys-v1.d/X.key`), and a browser profile of thousands of files must not
/// cost every run a walk. Deeper or further files are not checked.
const LINK_CHECK_DEPTH: usize = 2;
const LINK_CHECK_ENTRIES: usize = 512;

/// Masked regular files with a name outside the masks. A mask covers a path, not a file: a
/// hard link to `~/.aws/credentials` planted in the workspace (or anywhere readable) would be
/// read through. A file whose every name lies under a mask (`id_rsa` and a backup link of it
/// in `~/.ssh`) is fine.
pub fn linked_secrets(host: &dyn HostView, masks: &[(PathBuf, Kind)]) -> Vec<LinkedSecret> {
    names_outside(host, masks, LINK_CHECK_DEPTH, false)
}

/// How deep below a protected directory files are checked for hard links: the files right in
/// it (`.git/hooks/pre-commit`, `.vscode/tasks.json`, `.husky/pre-commit`, the rustup
/// proxies in `~/.cargo/bin`, all hard links of one file there). Deeper ones are not: a
/// home's toolchain directories (`~/miniconda3`, its packages hard-linked into its
/// environments) would cost every run a walk and refuse it for links that stay inside.
const PROTECTED_CHECK_DEPTH: usize = 1;

/// Protected regular files (the paths the plan binds read-only because host tools run them
/// or what they say: `deny_write` matches, git's configs and hooks, `.envrc`) with a name
/// outside the protected paths. A read-only bind covers a path, not a file: a hard link made
/// on the host before the run (`ln .git/config keep`, `cp -al`, `rsync -H`, a backup tool)
/// would be written through (`core.fsmonitor` for the host's next `git status`), and the
/// sweep, which compares paths, would not notice. A file whose every name is protected (the
/// rustup proxies in `~/.cargo/bin`) is fine.
///
/// A run cannot make such a link itself for the next run: linking a protected file is refused
/// by the mediated creation guard (`linkat` judges its source), the configs of a git dir a
/// run assembles are made fresh read-only copies or replaced by the sweep, and a read-only
/// bind is another mount, across which `link` fails (`EXDEV`). So only the host makes one,
/// and each run's plan finds it before anything runs.
pub fn linked_protected(host: &dyn HostView, protected: &BTreeSet<PathBuf>) -> Vec<LinkedSecret> {
    let paths: Vec<(PathBuf, Kind)> = (protected.iter())
        .filter_map(|p| Some((p.clone(), host.stat(p)?.kind)))
        .collect();
    names_outside(host, &paths, PROTECTED_CHECK_DEPTH, true)
}

/// Regular files under `roots` (files, and directories to `depth` levels) with more names
/// (hard links) than found under `roots`.
fn names_outside(
    host: &dyn HostView,
    roots: &[(PathBuf, Kind)],
    depth_limit: usize,
    protected: bool,
) -> Vec<LinkedSecret> {
    // (dev, ino) → (first path seen, links, names seen under the roots)
    let mut seen: BTreeMap<(u64, u64), (PathBuf, u64, u64)> = BTreeMap::new();
    // A name reached twice (a protected file inside a protected directory) counts once.
    let mut visited: BTreeSet<PathBuf> = BTreeSet::new();
    let mut note = |path: &Path, e: &Entry| {
        if e.kind == Kind::File && e.links > 1 && visited.insert(path.to_path_buf()) {
            seen.entry((e.dev, e.ino))
                .or_insert_with(|| (path.to_path_buf(), e.links, 0))
                .2 += 1;
        }
    };
    for (root, kind) in roots {
        match kind {
            // Mask and protected paths are canonical: no symlink to tell apart from its
            // target here.
            Kind::File => {
                if let Some(e) = host.stat(root) {
                    note(root, &e);
                }
            }
            Kind::Dir => {
                let mut budget = LINK_CHECK_ENTRIES;
                let mut todo = vec![(root.clone(), 0usize)];
                while let Some((dir, depth)) = todo.pop() {
                    for (name, k) in host.list_dir(&dir) {
                        if budget == 0 {
                            break;
                        }
                        budget -= 1;
                        let child = dir.join(name);
                        match k {
                            Kind::File => {
                                if let Some(e) = host.stat(&child) {
                                    note(&child, &e);
                                }
                            }
                            Kind::Dir if depth + 1 < depth_limit => todo.push((child, depth + 1)),
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
    }
    seen.into_values()
        .filter(|(_, links, masked)| masked < links)
        .map(|(path, links, masked)| LinkedSecret {
            path,
            links,
            masked,
            protected,
        })
        .collect()
}
