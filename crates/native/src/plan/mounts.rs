//! The mount steps of a plan, by mechanism (issue 33, item 2): detached copies taken while
//! the host tree is intact (devices, the home and writable roots a root caller's supervisor
//! maps, read grants), the system's own mounts (a read-only root, private `/tmp`, `/dev`,
//! `/proc`), and the grants and protections over them, parents before children.

use std::path::{Path, PathBuf};

use policy::is_within;
use sandbox::Spec;
use workspace::depth;

use super::reach::{self, Cover, Granted};
use super::{
    review_lower_map, Idmapped, Mount, ReviewView, DEVICES, PRIVATE_DIR_BYTES, PROC_READ_ONLY,
    ROOT_CALLER_HOST_ID,
};
use crate::host::{Host, Kind};

/// The mount steps being built: each later step reads what the earlier ones decided.
pub(super) struct Mounts<'a> {
    spec: &'a Spec,
    host: &'a dyn Host,
    root_caller: bool,
    /// Descriptors the supervisor or the init opens before the sandbox's view is built.
    pub slots: usize,
    /// Steps in the init's order: the copies first, then the system's mounts.
    pub mounts: Vec<Mount>,
    /// A root caller's writable roots, home and grants, mapped by the supervisor.
    pub idmapped: Vec<Idmapped>,
    /// Steps over the system's mounts, by (depth, class): parents before children.
    overlay: Vec<(usize, u8, Vec<Mount>)>,
    /// Every path the sandbox is granted, to find the directories on the way to them that
    /// it could not traverse (root callers, see `reach`).
    pub granted: Vec<Granted>,
    /// Device nodes and the slot of each one's copy.
    pub devices: Vec<(PathBuf, usize)>,
    pub review: Option<ReviewView>,
    pub covers: Vec<Cover>,
    /// Existing git configs kept read-only, each with the slot of its writable descriptor.
    pub held_configs: Vec<(PathBuf, usize)>,
}

impl<'a> Mounts<'a> {
    pub(super) fn new(spec: &'a Spec, host: &'a dyn Host) -> Mounts<'a> {
        Mounts {
            spec,
            host,
            root_caller: spec.caller.uid == 0,
            slots: 0,
            mounts: vec![Mount::MakeRootPrivate],
            idmapped: Vec::new(),
            overlay: Vec::new(),
            granted: Vec::new(),
            devices: Vec::new(),
            review: None,
            covers: Vec::new(),
            held_configs: Vec::new(),
        }
    }

    /// The next descriptor slot.
    fn slot(&mut self) -> usize {
        self.slots += 1;
        self.slots - 1
    }

    /// A mapping of `uid`/`gid` to the sandbox's host id, for a root caller's idmapped mount.
    fn idmap(&mut self, slot: usize, path: &Path, owner: (u32, u32), readonly: bool) {
        self.idmapped.push(Idmapped {
            slot,
            path: path.to_path_buf(),
            readonly,
            uid_map: format!("{} {} 1\n", owner.0, ROOT_CALLER_HOST_ID),
            gid_map: format!("{} {} 1\n", owner.1, ROOT_CALLER_HOST_ID),
        });
    }

    /// Detached copies of the device nodes, taken while the host's `/dev` is still there.
    pub(super) fn devices(&mut self) {
        for dev in DEVICES {
            let path = PathBuf::from(dev);
            if self.host.stat(&path).is_some() {
                let slot = self.slot();
                self.mounts.push(Mount::Clone {
                    source: path.clone(),
                    slot,
                    recursive: false,
                });
                self.devices.push((path, slot));
            }
        }
    }

    /// A root caller's home that only its owner can enter, and that no writable root covers:
    /// seen read-only through a mapping of its owner to the sandbox.
    pub(super) fn home(&mut self, writable_roots: &[PathBuf]) {
        let (spec, host) = (self.spec, self.host);
        if !self.root_caller {
            return;
        }
        // Canonical: the mount steps look their paths up through no symbolic link.
        let home_path = host
            .canonicalize(&spec.home)
            .unwrap_or_else(|| spec.home.clone());
        let Some(home) = host.stat(&home_path) else {
            return;
        };
        let covered = writable_roots.iter().any(|w| is_within(&home_path, w));
        // A home below /tmp is not in the sandbox's view at all (its /tmp is private): there
        // is nothing to reach.
        let replaced = workspace::under_replaced(&home_path);
        if home.kind == Kind::Dir && home.mode & 0o001 == 0 && !covered && !replaced {
            self.granted.push(Granted {
                path: spec.home.clone(),
                kind: Kind::Dir,
                mapped_owner: Some((home.uid, home.gid)),
            });
            let slot = self.slot();
            self.idmap(slot, &home_path, (home.uid, home.gid), true);
            self.overlay.push((
                depth(&home_path),
                0,
                vec![Mount::Attach {
                    slot,
                    target: home_path.clone(),
                    readonly: true,
                    device: false,
                }],
            ));
        }
    }

    /// Each writable root: the review view over the workspace, a root caller's mapping, or a
    /// copy, attached over the read-only host (`tmp_attached`: what lies below the private
    /// `/tmp`).
    pub(super) fn writable_roots(
        &mut self,
        writable_roots: &[PathBuf],
        tmp_attached: &[PathBuf],
    ) -> Result<(), workspace::ScanError> {
        let (spec, host, root_caller) = (self.spec, self.host, self.root_caller);
        for root in writable_roots {
            let entry = host
                .stat(root)
                .ok_or_else(|| workspace::ScanError::WritableRootMissing(root.clone()))?;
            self.granted.push(Granted {
                path: root.clone(),
                kind: entry.kind,
                mapped_owner: (root_caller).then_some((entry.uid, entry.gid)),
            });
            let slot = self.slot();
            let reviewed = spec.review.as_ref().filter(|_| *root == spec.workspace);
            if let Some(r) = reviewed {
                self.review = Some(ReviewView {
                    slot,
                    workspace: root.clone(),
                    changes: r.changes.clone(),
                    by_supervisor: root_caller
                        .then(|| (review_lower_map(entry.uid), review_lower_map(entry.gid))),
                    disk_bytes: spec.limits.disk_bytes,
                    upper_mode: entry.mode & 0o7777,
                });
                if !root_caller {
                    self.mounts.push(Mount::Overlay {
                        lower: root.clone(),
                        changes: r.changes.clone(),
                        slot,
                        disk: spec.limits.disk_bytes.map(|b| (b, entry.mode & 0o7777)),
                    });
                }
            } else if root_caller {
                self.idmap(slot, root, (entry.uid, entry.gid), false);
            } else {
                self.mounts.push(Mount::Clone {
                    source: root.clone(),
                    slot,
                    recursive: true,
                });
            }
            let mut steps = Vec::new();
            if is_within(root, Path::new("/tmp")) {
                // Mount points inside the private /tmp: create each missing component.
                steps = reach::tmp_mount_points(root, entry.kind, tmp_attached);
            }
            steps.push(Mount::Attach {
                slot,
                target: root.clone(),
                readonly: false,
                device: false,
            });
            self.overlay.push((depth(root), 1, steps));
        }
        Ok(())
    }

    /// The read grants, and the covers over the directories on the way to any grant that a
    /// root caller's sandbox could not traverse.
    pub(super) fn grants_and_covers(&mut self, allows: &[PathBuf]) {
        for a in allows {
            if let Some(entry) = self.host.stat(a) {
                if !self.granted.iter().any(|g| g.path == *a) {
                    self.granted.push(Granted {
                        path: a.clone(),
                        kind: entry.kind,
                        mapped_owner: None,
                    });
                }
            }
        }
        self.covers = reach::covers(self.host, self.root_caller, &self.granted);
        for c in &self.covers {
            self.overlay.push((depth(&c.dir), 0, c.steps.clone()));
        }
    }

    /// Read grants the sandbox's own view does not hold (below the private /tmp, or below a
    /// cover) are cloned before it is built: by the supervisor for a root caller, whose init
    /// could not traverse the way there either, mapping the grant's owner to the sandbox as
    /// for the home (read-only); by the init for anyone else.
    pub(super) fn attached_grants(
        &mut self,
        allows: &[PathBuf],
        tmp_grants: &[(PathBuf, Kind)],
        tmp_attached: &[PathBuf],
    ) {
        let mut attached: Vec<(PathBuf, Kind)> = tmp_grants.to_vec();
        for g in &self.granted {
            let below_cover = self.covers.iter().any(|c| is_within(&g.path, &c.dir));
            let outermost =
                !(self.granted.iter()).any(|o| o.path != g.path && is_within(&g.path, &o.path));
            if below_cover && outermost && allows.contains(&g.path) && g.mapped_owner.is_none() {
                attached.push((g.path.clone(), g.kind));
            }
        }
        for (grant, kind) in &attached {
            let owner = match self.root_caller {
                true => match self.host.stat(grant) {
                    Some(entry) => Some((entry.uid, entry.gid)),
                    None => continue,
                },
                false => None,
            };
            let slot = self.slot();
            match owner {
                Some(owner) => self.idmap(slot, grant, owner, true),
                None => self.mounts.push(Mount::Clone {
                    source: grant.clone(),
                    slot,
                    recursive: true,
                }),
            }
            let mut steps = if is_within(grant, Path::new("/tmp")) {
                reach::tmp_mount_points(grant, *kind, tmp_attached)
            } else {
                Vec::new() // the cover made its mount point
            };
            steps.push(Mount::Attach {
                slot,
                target: grant.clone(),
                readonly: true,
                device: false,
            });
            self.overlay.push((depth(grant), 1, steps));
        }
    }

    /// The masks the sandbox can reach: those below a cover and outside every grant are out
    /// of its reach already (and their mount points do not exist in the cover); nor are
    /// those a root caller's sandbox cannot reach at all (the init could not make them
    /// either: the change store below a 0700 directory of a home it is not given).
    pub(super) fn reachable(&self, masks: &mut Vec<(PathBuf, Kind)>) {
        masks.retain(|(p, _)| !reach::hidden_by_cover(p, &self.covers, &self.granted));
        if self.root_caller {
            masks.retain(|(p, _)| !reach::out_of_reach(self.host, p, &self.granted));
        }
    }

    /// Pins, private directories, protected paths (an existing config held for writing
    /// first), masks and emptied paths, over the grants.
    pub(super) fn protections(&mut self, masks: &[(PathBuf, Kind)], emptied: &[(PathBuf, Kind)]) {
        let spec = self.spec;
        for p in &spec.pins {
            self.overlay
                .push((depth(p), 2, vec![Mount::Pin { path: p.clone() }]));
        }
        // A private directory: an empty tmpfs of the run's own over the host's (a mount point
        // cannot be renamed either).
        for p in &spec.private_dirs {
            self.overlay.push((
                depth(p),
                2,
                vec![Mount::Tmpfs {
                    target: p.clone(),
                    data: format!("mode=1777,size={PRIVATE_DIR_BYTES}"),
                    flags: libc::MS_NOSUID | libc::MS_NODEV,
                }],
            ));
        }
        let protected = &spec.protected;
        for p in protected {
            let mut steps = Vec::new();
            // A config inside another protected path (`~/.pyenv/.git/config` with the home as
            // the workspace: `~/.pyenv` is protected whole) is not rewritten: the run may not
            // change anything there, and the init could not open it for writing below that
            // path's read-only bind (every such run failed at set-up with EROFS).
            let inside_protected = (protected.iter()).any(|q| q != p && is_within(p, q));
            if workspace::is_existing_config(self.host, p) && !inside_protected {
                let slot = self.slot();
                steps.push(Mount::Hold {
                    path: p.clone(),
                    slot,
                });
                self.held_configs.push((p.clone(), slot));
            }
            steps.push(Mount::ReadOnly { path: p.clone() });
            self.overlay.push((depth(p), 3, steps));
        }
        for (p, kind) in masks {
            let m = if *kind == Kind::Dir {
                Mount::MaskDir { target: p.clone() }
            } else {
                Mount::MaskFile { target: p.clone() }
            };
            self.overlay.push((depth(p), 4, vec![m]));
        }
        for (p, kind) in emptied {
            let m = if *kind == Kind::Dir {
                Mount::EmptyDir { target: p.clone() }
            } else {
                Mount::EmptyFile { target: p.clone() }
            };
            self.overlay.push((depth(p), 4, vec![m]));
        }
    }

    /// The host tree becomes read-only; private /tmp, /dev and /proc replace the host's
    /// (`tmp_data`: the options of the private /tmp and /dev/shm); then the steps over them,
    /// parents before children.
    pub(super) fn system(mut self, tmp_data: String) -> Mounts<'a> {
        let nosuid_nodev = libc::MS_NOSUID | libc::MS_NODEV;
        let mounts = &mut self.mounts;
        mounts.push(Mount::ReadOnlyRoot);
        mounts.push(Mount::Tmpfs {
            target: "/tmp".into(),
            data: tmp_data.clone(),
            flags: nosuid_nodev,
        });
        mounts.push(Mount::Tmpfs {
            target: "/dev".into(),
            data: "mode=0755,size=1m".into(),
            flags: libc::MS_NOSUID | libc::MS_NOEXEC,
        });
        for (path, slot) in &self.devices {
            mounts.push(Mount::File {
                path: path.clone(),
                mode: 0o666,
            });
            mounts.push(Mount::Attach {
                slot: *slot,
                target: path.clone(),
                readonly: false,
                device: true,
            });
        }
        mounts.push(Mount::Mkdir {
            path: "/dev/pts".into(),
            mode: 0o755,
        });
        mounts.push(Mount::Devpts {
            target: "/dev/pts".into(),
        });
        mounts.push(Mount::Symlink {
            target: "pts/ptmx".into(),
            path: "/dev/ptmx".into(),
        });
        mounts.push(Mount::Mkdir {
            path: "/dev/shm".into(),
            mode: 0o1777,
        });
        mounts.push(Mount::Tmpfs {
            target: "/dev/shm".into(),
            data: tmp_data,
            flags: nosuid_nodev,
        });
        for (target, path) in [
            ("/proc/self/fd", "/dev/fd"),
            ("/proc/self/fd/0", "/dev/stdin"),
            ("/proc/self/fd/1", "/dev/stdout"),
            ("/proc/self/fd/2", "/dev/stderr"),
        ] {
            mounts.push(Mount::Symlink {
                target: target.into(),
                path: path.into(),
            });
        }
        mounts.push(Mount::Proc {
            target: "/proc".into(),
        });
        for p in PROC_READ_ONLY {
            if self.host.lstat_kind(Path::new(p)).is_some() {
                mounts.push(Mount::ReadOnly { path: p.into() });
            }
        }
        // Home, writable roots, pins, protected paths and masks: parents before children.
        let mut overlay = std::mem::take(&mut self.overlay);
        overlay.sort_by_key(|(d, class, _)| (*d, *class));
        for (_, _, steps) in overlay {
            self.mounts.extend(steps);
        }
        self
    }
}
