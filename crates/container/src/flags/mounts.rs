//! The mounts of a run over the read-only image, by mechanism (issue 33, item 2): the host's
//! tree, the writable roots (or a review run's view), the read grants below `/tmp`, the
//! protected paths, the pins and staged git dirs, the private directories, the masks, the
//! container's init and gate, and the covers of closed directories; then the engine's
//! `--mount` flags in order, parents before what lies below them. Each step also notes what
//! the check inside reads back (the identities, the places, the masks' directories).

use std::path::{Path, PathBuf};

use sandbox::Spec;

use super::{
    bind, depth, escape, mask_mount, tmpfs, view_mount, Cover, LowerError, NonRecursive, Target,
    Witness, GATE, INIT, NOT_BOUND,
};

/// The mounts being lowered: each later step reads what the earlier ones decided.
pub(super) struct Mounts<'a> {
    spec: &'a Spec,
    target: &'a Target,
    /// Mounts over the read-only image: the host's tree, then (parents before what lies below
    /// them) writable roots, read-only protected paths, pins and masks inside them. By
    /// (depth, class), then the client's flag and its value.
    mounts: Vec<(usize, u8, &'static str, String)>,
    /// The binds whose source the command (or a run before it) could have replaced since the
    /// run was planned: each is checked inside, after the engine bound it, to be the file
    /// planned (the engine, root, follows a symbolic link put in its place).
    pub identities: Vec<(PathBuf, (u64, u64))>,
    /// A review run's workspace is its view (see [`View`](super::View)), checked inside by the
    /// inode number of its top directory, the run's `upper/` (the device is the overlay's).
    pub view_ids: Vec<(PathBuf, u64)>,
    pub view_empty: Option<String>,
    /// Where the engine must have mounted what it was given writable (and, read-only, the
    /// read grants below /tmp and the protected paths): each at its own path, checked inside
    /// ([`CHECK`](super::CHECK), `STOCKADE_CHECK_PLACED`).
    /// The engine resolves a bind's source on the host and its destination in the container:
    /// a path swapped for a link between the identities' read and the engine's mount, and
    /// swapped back before the check, put a host directory writable elsewhere (the host's
    /// /tmp on the container's) while the path itself, unmounted, still showed the identity
    /// planned (red team of issue 33, tenth round).
    pub placed: Vec<(bool, PathBuf)>,
    /// Each mask in a writable root with the directory planned to hold it, as the check reads
    /// them (see [`Mounts::mask_dirs`]).
    pub mask_dirs: Vec<String>,
    /// The owner's home and the covers of the closed directories above the roots (see
    /// [`Cover`]).
    pub covers: Vec<&'a Cover>,
}

impl<'a> Mounts<'a> {
    /// The identities of the writable roots and of the read grants below the host's `/tmp`,
    /// as the backend read them when the run was planned.
    pub(super) fn new(spec: &'a Spec, target: &'a Target) -> Result<Mounts<'a>, LowerError> {
        let mut m = Mounts {
            spec,
            target,
            mounts: Vec::new(),
            identities: Vec::new(),
            view_ids: Vec::new(),
            view_empty: None,
            placed: Vec::new(),
            mask_dirs: Vec::new(),
            covers: target.owner_home.iter().chain(&target.covers).collect(),
        };
        m.identities = (spec.writable_roots.iter())
            .filter(|p| target.view.is_none() || **p != spec.workspace)
            .map(|p| m.identity(p))
            .collect::<Result<_, _>>()?;
        // A read grant below the host's /tmp (whoever made it can swap it) is checked as the
        // roots are.
        for grant in spec.tmp_read_grants() {
            let id = m.identity(grant)?;
            m.identities.push(id);
        }
        Ok(m)
    }

    /// The identity of a writable root or read grant when the run was planned.
    /// A root with no identity was not what was planned when the backend looked again (a
    /// symbolic link, or gone): it is refused, never bound unchecked (CI: a link exchanged in
    /// between the plan and that look was bound, the engine followed it, and the check had
    /// nothing to compare).
    fn identity(&self, p: &PathBuf) -> Result<(PathBuf, (u64, u64)), LowerError> {
        (self.target.root_identities.iter())
            .find(|(q, _)| q == p)
            .map(|(_, id)| (p.clone(), *id))
            .ok_or_else(|| LowerError::Changed(p.clone()))
    }

    /// A protected or pinned path's identity as the spec planned it, checked inside.
    fn planned(&mut self, p: &PathBuf) {
        if let Some(id) = self.spec.identities.get(p) {
            self.identities.push((p.clone(), *id));
        }
    }

    /// Inside a review run's view nothing is bound from the host writable: a pin (a writable
    /// bind of a directory holding read-only binds) would write the host's directory, not the
    /// view's. Without it a protected path's directory can be renamed in the view; what the
    /// run makes at a protected path is flagged by the review.
    fn in_view(&self, p: &Path) -> bool {
        self.target.view.is_some() && p.starts_with(&self.spec.workspace)
    }

    /// The host's tree: each top-level directory and file of the host's `/` bound read-only
    /// over the image, but the kernel's views, devices and run-time directories
    /// ([`NOT_BOUND`]) and what a cover takes the place of.
    pub(super) fn host_tree(&mut self) -> Result<(), LowerError> {
        let target = self.target;
        for (name, entry, _) in &target.host_root {
            if NOT_BOUND.contains(&name.as_str()) || *entry == crate::image::Entry::Symlink {
                continue;
            }
            let p = Path::new("/").join(name);
            // A cover of a top-level directory (root's 0700 `/root`) takes its place: the engines
            // refuse a second mount at one destination.
            if self.covers.iter().any(|c| c.dir == p) {
                continue;
            }
            self.mounts
                .push((1, 0, "--mount", bind(&p, &p, true, target)?));
        }
        Ok(())
    }

    /// Recursive binds (rootless Podman): a mount below a read-only bind would keep its own
    /// flags (writable), so each gets a read-only bind of itself, unless it lies in a writable
    /// root (writable there, as natively) or where nothing of the host is bound.
    pub(super) fn mount_points(&mut self) -> Result<(), LowerError> {
        let (spec, target) = (self.spec, self.target);
        if target.nonrecursive == NonRecursive::Recursive {
            for m in &target.mount_points {
                let top = m.components().nth(1);
                let unbound = matches!(top, Some(std::path::Component::Normal(t)) if NOT_BOUND.iter().any(|n| t == *n));
                if m.as_path() == Path::new("/")
                    || unbound
                    || spec.writable_roots.iter().any(|w| m.starts_with(w))
                {
                    continue;
                }
                self.mounts
                    .push((depth(m), 0, "--mount", bind(m, m, true, target)?));
            }
        }
        Ok(())
    }

    /// The writable roots, each bound writable at its own path; a review run's workspace is
    /// its view instead, known inside by its inode numbers.
    pub(super) fn writable_roots(&mut self) -> Result<(), LowerError> {
        let (spec, target) = (self.spec, self.target);
        for root in &spec.writable_roots {
            self.placed.push((false, root.clone()));
            match &target.view {
                Some(view) if *root == spec.workspace => {
                    let (flag, m) = view_mount(root, view, target.engine)?;
                    self.mounts.push((depth(root), 1, flag, m));
                    self.view_ids.push((root.clone(), view.upper_ino));
                    match &view.witness {
                        Witness::Entry(p, ino) => self.view_ids.push((p.clone(), *ino)),
                        Witness::Empty => self.view_empty = root.to_str().map(escape),
                        Witness::None => return Err(LowerError::ViewUnwitnessed(root.clone())),
                    }
                }
                _ => {
                    self.mounts
                        .push((depth(root), 1, "--mount", bind(root, root, false, target)?))
                }
            }
        }
        Ok(())
    }

    /// The read grants below the host's `/tmp`, which the container's own `/tmp` hides: each
    /// bound read-only at its own path.
    pub(super) fn tmp_read_grants(&mut self) -> Result<(), LowerError> {
        let (spec, target) = (self.spec, self.target);
        for grant in spec.tmp_read_grants() {
            self.placed.push((true, grant.to_path_buf()));
            self.mounts.push((
                depth(grant),
                1,
                "--mount",
                bind(grant, grant, true, target)?,
            ));
        }
        Ok(())
    }

    /// The protected paths, each bound read-only at its own path (but those masked, and a
    /// staged git dir's top-level files).
    pub(super) fn protected(&mut self) -> Result<(), LowerError> {
        let (spec, target) = (self.spec, self.target);
        // A staged git dir's top-level protected files are the staged copy's (judged after the
        // run, see `workspace::gitstage`): no bind of their own, which git's rename over them
        // would meet (EBUSY).
        let staged_file = |p: &Path| {
            target.staged.iter().any(|s| {
                p.parent() == Some(s.gitdir.as_path())
                    && p.file_name()
                        .is_some_and(|n| s.protected.iter().any(|x| x == n))
            })
        };
        for p in &spec.protected {
            if spec.masks.iter().any(|m| p.starts_with(&m.path)) || staged_file(p) {
                continue;
            }
            self.planned(p);
            // Read-only at its own path: a directory above it swapped for a link before the
            // engine mounted it put the bind where the link led, and left the path writable.
            self.placed.push((true, p.clone()));
            self.mounts
                .push((depth(p), 2, "--mount", bind(p, p, true, target)?));
        }
        Ok(())
    }

    /// The pins bound alone (outside a review run's view), each bound writable at its own
    /// path; an existing git dir staged is its staged copy with its subdirectories bound in.
    pub(super) fn pins(&mut self) -> Result<(), LowerError> {
        let (spec, target) = (self.spec, self.target);
        let mut subdir_identities = Vec::new();
        let pins = spec.pins_bound_alone();
        for p in pins.iter().copied() {
            if self.in_view(p) {
                continue;
            }
            match target.staged.iter().position(|s| &s.gitdir == p) {
                // An existing git dir: the staged copy of its top level at its place, and each of
                // its subdirectories (the host's own, each checked inside to be the one planned)
                // bound over theirs in it; protected ones (`hooks`) are bound read-only above.
                Some(i) => {
                    let copy = workspace::gitstage::Staged::source(&target.stage_dir, i);
                    self.placed.push((false, p.clone()));
                    self.mounts
                        .push((depth(p), 2, "--mount", bind(&copy, p, false, target)?));
                    for (d, id) in target.staged[i].subdirs.iter().zip(&target.subdir_ids[i]) {
                        let sub = p.join(d);
                        // A subdirectory that is a pinned git dir itself (a git dir hidden in
                        // this one) is bound in its own turn: a second mount at one destination
                        // is refused by the engine.
                        if spec.protected.contains(&sub)
                            || spec.masks.iter().any(|m| sub.starts_with(&m.path))
                            || pins.contains(&&sub)
                        {
                            continue;
                        }
                        let Some(id) = id else {
                            return Err(LowerError::Changed(sub));
                        };
                        subdir_identities.push((sub.clone(), *id));
                        self.placed.push((false, sub.clone()));
                        self.mounts.push((
                            depth(&sub),
                            2,
                            "--mount",
                            bind(&sub, &sub, false, target)?,
                        ));
                    }
                }
                None => {
                    self.planned(p);
                    self.placed.push((false, p.clone()));
                    self.mounts
                        .push((depth(p), 2, "--mount", bind(p, p, false, target)?));
                }
            }
        }
        self.identities.extend(subdir_identities);
        Ok(())
    }

    /// Each mask in a writable root, with the directory planned to hold it: checked inside
    /// through that directory as the check's current directory (one lookup, so an exchange
    /// between two checks cannot show each a different directory).
    /// (Not below a directory the command's id cannot search: nothing there is in its reach.)
    pub(super) fn mask_dirs(&mut self) -> Result<(), LowerError> {
        let (spec, target) = (self.spec, self.target);
        for (mask, dir) in (target.mask_dirs.iter())
            .filter(|(m, _)| !target.closed.iter().any(|c| m.starts_with(c)))
        {
            let (Some(_), Some((dev, ino)), Some(p)) = (mask.parent(), dir, mask.to_str()) else {
                return Err(LowerError::Changed(mask.clone()));
            };
            match &target.view {
                // In the view, by inode number (it keeps the workspace's: one filesystem, or
                // refused above); the view's top directory shows its upper's.
                Some(view) if self.in_view(mask) => {
                    if mask.parent() == Some(spec.workspace.as_path()) {
                        self.mask_dirs
                            .push(format!("{}{}", view.upper_ino, escape(p)));
                    } else {
                        self.mask_dirs.push(format!("{ino}{}", escape(p)));
                    }
                }
                _ => self.mask_dirs.push(format!("{dev}:{ino}{}", escape(p))),
            }
        }
        Ok(())
    }

    /// The private directories, each a writable tmpfs of its own.
    pub(super) fn private_dirs(&mut self) -> Result<(), LowerError> {
        let (spec, target) = (self.spec, self.target);
        for p in &spec.private_dirs {
            self.mounts.push((
                depth(p),
                2,
                "--mount",
                tmpfs(p, 0o1777, 64 << 20, false, target.engine)?,
            ));
        }
        Ok(())
    }

    /// The spec's masks (a tmpfs over a directory, an empty or unreadable file over a file)
    /// and the engine's store (unreadable, read-only).
    pub(super) fn masks(&mut self) -> Result<(), LowerError> {
        let (spec, target) = (self.spec, self.target);
        // A mask below a cover, outside everything bound in that cover, is left out: its mount
        // point would show its name and kind in the cover, where the command sees nothing of
        // the host's directory (the mask hides nothing there).
        let shown_in = |c: &Cover, p: &Path| {
            (spec.writable_roots.iter())
                .chain(&spec.read_grants)
                .any(|b| b.starts_with(&c.dir) && p.starts_with(b))
        };
        for m in &spec.masks {
            if (self.covers.iter()).any(|c| m.path.starts_with(&c.dir) && !shown_in(c, &m.path)) {
                continue;
            }
            self.mounts
                .push((depth(&m.path), 3, "--mount", mask_mount(m, target)?));
        }
        for m in &target.extra_masks {
            self.mounts.push((
                depth(m),
                3,
                "--mount",
                tmpfs(m, 0o200, 4096, true, target.engine)?,
            ));
        }
        Ok(())
    }

    /// The container's init ([`INIT`]) and the gate's directory ([`GATE`]), read-only.
    pub(super) fn init_and_gate(&mut self) -> Result<(), LowerError> {
        let target = self.target;
        if let Some(init) = &target.init {
            self.mounts
                .push((2, 3, "--mount", bind(init, Path::new(INIT), true, target)?));
        }
        if let Some(gate) = &target.gate {
            // Read-only: opening a FIFO for writing needs no writable mount.
            self.mounts
                .push((2, 3, "--mount", bind(gate, Path::new(GATE), true, target)?));
        }
        Ok(())
    }

    /// The owner's home and the covers of the closed directories above the roots (see
    /// [`Cover`]), and the read grants below them.
    pub(super) fn covers(&mut self) -> Result<(), LowerError> {
        let (spec, target) = (self.spec, self.target);
        if let Some(home) = &target.owner_home {
            if let Some(w) = spec.writable_roots.iter().find(|w| home.dir.starts_with(w)) {
                return Err(LowerError::OwnerHomeWritable(w.clone()));
            }
        }
        // The owner's home and the covers of the closed directories above the roots, before what
        // is bound below them, each checked inside to be mounted at its path. A read grant below
        // one is not in the host's tree there any more: bound read-only at its own path, checked
        // as the roots are.
        let covers = self.covers.clone();
        for c in &covers {
            self.placed.push((false, c.dir.clone()));
            self.mounts.push((
                depth(&c.dir),
                0,
                "--mount",
                bind(&c.source, &c.dir, false, target)?,
            ));
        }
        for grant in (spec.read_grants.iter())
            .filter(|g| covers.iter().any(|c| g.starts_with(&c.dir)))
            .filter(|g| !spec.tmp_read_grants().contains(g))
            .filter(|g| !spec.writable_roots.iter().any(|w| g.starts_with(w)))
        {
            let id = self.identity(grant)?;
            self.identities.push(id);
            self.placed.push((true, grant.clone()));
            self.mounts.push((
                depth(grant),
                1,
                "--mount",
                bind(grant, grant, true, target)?,
            ));
        }
        Ok(())
    }

    /// The identities the check can read back: not those below a closed directory.
    /// A bind below a checked directory the command can neither search nor make searchable
    /// (another owner's, e.g. a root caller's own state directory in a workspace owned by
    /// someone else) cannot be read back inside, and is out of the command's reach for the
    /// whole run whatever is mounted there: that directory is a mount point (it cannot be
    /// renamed) and checked to be the one planned, and its mode is not the command's to change.
    pub(super) fn closed(&mut self) {
        let checked: Vec<&PathBuf> = self.identities.iter().map(|(p, _)| p).collect();
        let closed: Vec<&PathBuf> = (self.target.closed.iter())
            .filter(|c| checked.contains(c))
            .collect();
        self.identities
            .retain(|(p, _)| !closed.iter().any(|c| p != *c && p.starts_with(c)));
    }

    /// The engine's mount flags, parents before what lies below them (by depth, then class:
    /// covers and the host's tree, roots and grants, protected paths and pins, masks).
    pub(super) fn flags(&mut self, a: &mut Vec<String>) {
        let mut mounts = std::mem::take(&mut self.mounts);
        mounts.sort_by_key(|m| (m.0, m.1));
        for (_, _, flag, m) in mounts {
            a.push(flag.into());
            a.push(m);
        }
    }
}
