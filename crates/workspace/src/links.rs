//! Grants that pass through a symbolic link a run could have planted.
//!
//! A grant names a path; the kernel follows every link on the way. A run with a writable root
//! can leave a link in it (`/tmp/g/cache -> /etc/cron.d`), and a later run that grants
//! `/tmp/g/cache` (a cache the user meant) would then write the link's target: root code, for
//! a run as root. The same holds for a read grant (`/tmp/g/data -> ~/.ssh`: a read grant
//! exempts what it names from the masks) and for `--workspace`.
//!
//! So a link on the way to a granted path is taken only where no run of the caller's could
//! have made it: in a directory the caller neither owns nor may write through its group or
//! other bits (the system's `/home -> var/home` on an image-based distribution), or in `/`
//! itself, which is never a writable root. Every directory is writable for root, so for root
//! only links in `/` are taken. Any other link refuses the grant, naming the link and the real
//! path: granting the real path instead (or besides) is the explicit way to mean it.
//!
//! Checked a component at a time with `lstat` and `readlink` (no `realpath`, which would say
//! where a path leads but not through which links), at most [`MAX_LINKS`] links per path, as
//! the kernel allows.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::host::{HostView, Kind};

/// Links followed on one path before giving up (the kernel's own limit).
pub const MAX_LINKS: usize = 40;

/// A link on the way to a granted path that a run of the caller's could have made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantableLink {
    /// The link itself (its directory resolved).
    pub link: PathBuf,
    /// What it holds, as written.
    pub target: PathBuf,
}

/// Where a granted path leads, and through which link a run could have planted, if any: both
/// from one walk, so what is checked is what is granted (a `realpath` beside the walk let a
/// link swapped in and out between the two pass as a plain directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The path with every link resolved, as the walk saw each component; when it does not
    /// exist, its deepest existing part resolved and the rest as written.
    pub real: PathBuf,
    /// Whether the whole path exists.
    pub exists: bool,
    /// The first link on the way lying in a directory the caller could have written.
    pub planted: Option<PlantableLink>,
}

/// `path` (absolute) resolved a component at a time, noting the first link that lies in a
/// directory a run of `uid`'s could have written. A missing component, a dangling link or a
/// file with more below it ends the walk (`exists: false`); `None` when more than
/// [`MAX_LINKS`] links lie on the way.
pub fn resolve(host: &dyn HostView, path: &Path, uid: u32) -> Option<Resolved> {
    let mut queue: VecDeque<OsString> = VecDeque::new();
    push_front(&mut queue, path);
    let mut cur = PathBuf::from("/");
    let mut planted = None;
    let mut followed = 0usize;
    while let Some(name) = queue.pop_front() {
        match name.to_str() {
            Some("/") => cur = PathBuf::from("/"),
            Some(".") => {}
            Some("..") => {
                cur.pop();
            }
            _ => {
                let next = cur.join(&name);
                let kind = host.lstat_kind(&next);
                let target = match kind {
                    Some(Kind::Symlink) => host.read_link(&next),
                    _ => None,
                };
                match (kind, target) {
                    (Some(Kind::Symlink), Some(target)) => {
                        if planted.is_none() && !out_of_reach(host, &cur, uid) {
                            planted = Some(PlantableLink {
                                link: next,
                                target: target.clone(),
                            });
                        }
                        followed += 1;
                        if followed > MAX_LINKS {
                            return None;
                        }
                        if target.is_absolute() {
                            cur = PathBuf::from("/");
                        }
                        push_front(&mut queue, &target);
                    }
                    (Some(Kind::Dir), _) => cur = next,
                    // Anything but a directory ends the path.
                    (Some(k), _) if k != Kind::Symlink && queue.is_empty() => cur = next,
                    _ => {
                        cur.push(&name);
                        for rest in queue {
                            match rest.to_str() {
                                Some(".") => {}
                                Some("..") => {
                                    cur.pop();
                                }
                                _ => cur.push(rest),
                            }
                        }
                        return Some(Resolved {
                            real: cur,
                            exists: false,
                            planted,
                        });
                    }
                }
            }
        }
    }
    Some(Resolved {
        real: cur,
        exists: true,
        planted,
    })
}

/// The first link on the way to `path` (absolute) lying in a directory a run of `uid`'s could
/// have written, if any (from [`resolve`]).
pub fn plantable_link(host: &dyn HostView, path: &Path, uid: u32) -> Option<PlantableLink> {
    resolve(host, path, uid)?.planted
}

/// `path`'s components put ahead of what `queue` holds (`/` for the root).
fn push_front(queue: &mut VecDeque<OsString>, path: &Path) {
    for c in path.components().rev() {
        let word = match c {
            Component::RootDir | Component::Prefix(_) => OsString::from("/"),
            Component::CurDir => OsString::from("."),
            Component::ParentDir => OsString::from(".."),
            Component::Normal(n) => n.to_os_string(),
        };
        queue.push_front(word);
    }
}

/// Whether no run of `uid`'s could have written `dir`: `/` (never a writable root), or, for
/// anyone but root, a directory owned by someone else with no group or other write bit.
fn out_of_reach(host: &dyn HostView, dir: &Path, uid: u32) -> bool {
    if dir == Path::new("/") {
        return true;
    }
    if uid == 0 {
        return false;
    }
    host.stat(dir)
        .is_some_and(|e| e.uid != uid && e.mode & 0o022 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Entry;
    use std::collections::BTreeMap;

    /// Directories with owners and modes, and links with targets.
    #[derive(Default)]
    struct Fake {
        dirs: BTreeMap<PathBuf, (u32, u32)>,
        links: BTreeMap<PathBuf, PathBuf>,
    }

    impl Fake {
        fn dir(mut self, p: &str, uid: u32, mode: u32) -> Self {
            self.dirs.insert(p.into(), (uid, mode));
            self
        }
        fn link(mut self, p: &str, target: &str) -> Self {
            self.links.insert(p.into(), target.into());
            self
        }
    }

    impl HostView for Fake {
        fn stat(&self, path: &Path) -> Option<Entry> {
            let (uid, mode) = *self.dirs.get(path)?;
            Some(Entry {
                kind: Kind::Dir,
                uid,
                gid: uid,
                mode,
                dev: 1,
                ino: 1,
                links: 1,
            })
        }
        fn lstat_kind(&self, path: &Path) -> Option<Kind> {
            if self.links.contains_key(path) {
                return Some(Kind::Symlink);
            }
            self.dirs.get(path).map(|_| Kind::Dir)
        }
        fn canonicalize(&self, _: &Path) -> Option<PathBuf> {
            None
        }
        fn list_dir(&self, _: &Path) -> Vec<(std::ffi::OsString, Kind)> {
            Vec::new()
        }
        fn read_small(&self, _: &Path) -> Option<String> {
            None
        }
        fn read_link(&self, path: &Path) -> Option<PathBuf> {
            self.links.get(path).cloned()
        }
    }

    fn host() -> Fake {
        Fake::default()
            .dir("/tmp", 0, 0o1777)
            .dir("/tmp/g", 1000, 0o755)
            .dir("/etc", 0, 0o755)
            .dir("/etc/cron.d", 0, 0o755)
            .dir("/var/home", 0, 0o755)
            .dir("/var/home/u", 1000, 0o755)
            .dir("/var/home/u/cache", 1000, 0o755)
            .dir("/var", 0, 0o755)
            .dir("/var/run2", 0, 0o755)
            .dir("/run", 0, 0o755)
            .dir("/srv/shared", 0, 0o775)
            .dir("/srv", 0, 0o755)
            .link("/tmp/g/cache", "/etc/cron.d")
            .link("/tmp/g/rel", "../g/cache")
            .link("/home", "var/home")
            .link("/var/run", "../run")
            .link("/srv/shared/l", "/etc/cron.d")
    }

    fn found(path: &str, uid: u32) -> Option<(String, String)> {
        plantable_link(&host(), Path::new(path), uid)
            .map(|l| (l.link.display().to_string(), l.target.display().to_string()))
    }

    #[test]
    fn a_link_in_the_callers_own_directory_is_plantable() {
        let link = Some(("/tmp/g/cache".into(), "/etc/cron.d".into()));
        assert_eq!(found("/tmp/g/cache", 1000), link);
        assert_eq!(found("/tmp/g/cache/x", 1000), link);
        // Through a relative link to it: the first link met is the one named.
        assert_eq!(
            found("/tmp/g/rel", 1000),
            Some(("/tmp/g/rel".into(), "../g/cache".into()))
        );
    }

    #[test]
    fn a_link_in_a_group_or_world_writable_directory_is_plantable() {
        assert_eq!(
            found("/srv/shared/l", 1000),
            Some(("/srv/shared/l".into(), "/etc/cron.d".into()))
        );
    }

    #[test]
    fn system_links_out_of_the_callers_reach_are_followed() {
        // `/home -> var/home` lies in `/`; `/var/run` in root's `/var`.
        assert_eq!(found("/home/u/cache", 1000), None);
        assert_eq!(found("/var/run", 1000), None);
        // A path with no link at all.
        assert_eq!(found("/var/home/u/cache", 1000), None);
        // A missing component ends the walk.
        assert_eq!(found("/nowhere/x", 1000), None);
    }

    #[test]
    fn for_root_only_links_in_the_root_directory_are_followed() {
        assert_eq!(found("/home/u/cache", 0), None);
        assert_eq!(
            found("/var/run", 0),
            Some(("/var/run".into(), "../run".into()))
        );
        assert_eq!(
            found("/tmp/g/cache", 0),
            Some(("/tmp/g/cache".into(), "/etc/cron.d".into()))
        );
    }

    #[test]
    fn the_real_path_comes_from_the_same_walk() {
        let h = host();
        let r = resolve(&h, Path::new("/home/u/cache"), 1000).unwrap();
        assert_eq!(r.real, Path::new("/var/home/u/cache"));
        assert!(r.exists && r.planted.is_none());
        let r = resolve(&h, Path::new("/tmp/g/rel"), 1000).unwrap();
        assert_eq!(r.real, Path::new("/etc/cron.d"));
        assert!(r.exists);
        assert_eq!(r.planted.unwrap().link, Path::new("/tmp/g/rel"));
        // Missing below a link: the link is still named, the rest kept as written.
        let r = resolve(&h, Path::new("/tmp/g/cache/new/../x"), 1000).unwrap();
        assert_eq!(r.real, Path::new("/etc/cron.d/x"));
        assert!(!r.exists);
        assert_eq!(r.planted.unwrap().link, Path::new("/tmp/g/cache"));
        // `..` after a link goes up from where the link led.
        let r = resolve(&h, Path::new("/var/run/../var"), 1000).unwrap();
        assert_eq!(r.real, Path::new("/var"));
    }

    #[test]
    fn a_link_loop_ends() {
        let h = Fake::default()
            .dir("/d", 0, 0o755)
            .link("/d/a", "/d/b")
            .link("/d/b", "/d/a");
        assert_eq!(plantable_link(&h, Path::new("/d/a"), 1000), None);
    }
}
