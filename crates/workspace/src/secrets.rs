//! Masked files with another name outside the masks.

use std::collections::BTreeMap;
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
    // (dev, ino) → (first path seen, links, names seen under masks)
    let mut seen: BTreeMap<(u64, u64), (PathBuf, u64, u64)> = BTreeMap::new();
    let mut note = |path: &Path, e: &Entry| {
        if e.kind == Kind::File && e.links > 1 {
            seen.entry((e.dev, e.ino))
                .or_insert_with(|| (path.to_path_buf(), e.links, 0))
                .2 += 1;
        }
    };
    for (mask, kind) in masks {
        match kind {
            // Mask paths are canonical: no symlink to tell apart from its target here.
            Kind::File => {
                if let Some(e) = host.stat(mask) {
                    note(mask, &e);
                }
            }
            Kind::Dir => {
                let mut budget = LINK_CHECK_ENTRIES;
                let mut todo = vec![(mask.clone(), 0usize)];
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
                            Kind::Dir if depth + 1 < LINK_CHECK_DEPTH => {
                                todo.push((child, depth + 1))
                            }
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
        })
        .collect()
}
