//! The scan of a run's workspace: from a policy and where the run is, what every backend must
//! make of the host: the writable roots, the masked and emptied paths, the protected paths
//! (with git's: hooks, configs, redirects, includes), the directories to pin, the patterns a
//! creation guard refuses, and what the sweep after the run compares against.
//!
//! Pure given a [`HostView`]: the tests build scans against a fake host. Backends lower a scan
//! (as part of the [`sandbox::Spec`]) to their own mechanisms; none of it is native's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use policy::{is_within, PathContext, PathPattern, Policy};
use serde::Serialize;

use crate::git;
use crate::host::{HostView, Kind};
use crate::links;
use crate::secrets::linked_secrets;
use crate::walk::{DenyGlobs, DirStamps, Matches};
use crate::ScanError;
pub use sandbox::GuardPattern;
use sandbox::LinkedSecret;

/// Places every sandbox replaces wholesale; host paths below them are not visible inside.
pub const REPLACED: &[&str] = &["/tmp", "/dev", "/proc"];

/// Where a run is: what the policy's `~`, workspace-relative and git-global paths mean.
#[derive(Debug, Clone)]
pub struct Place {
    /// The canonical workspace directory.
    pub workspace: PathBuf,
    /// The caller's user id: a link in a directory it may write could be a run's
    /// ([`crate::links`]).
    pub uid: u32,
    /// The caller's home.
    pub home: PathBuf,
    /// The caller's `XDG_CONFIG_HOME`, where git's global config may live.
    pub xdg_config_home: Option<PathBuf>,
    /// The directories of the caller's `PATH`, in order: those in the home are persistence
    /// points when a writable root holds them (see `home_path_dirs`).
    pub path_dirs: Vec<PathBuf>,
}

/// What the scan found: everything a backend needs to know about the host's paths for a run.
#[derive(Debug, Clone)]
pub struct Scan {
    /// Canonical writable directories (or files), outermost first; `/tmp` is never one (every
    /// sandbox has a private `/tmp`).
    pub writable_roots: Vec<PathBuf>,
    /// Canonical exact read grants (`allow_read`).
    pub allows: Vec<PathBuf>,
    /// Paths made unreadable (`deny_read`), canonical, with their kinds.
    pub masks: Vec<(PathBuf, Kind)>,
    /// Paths read as empty (`read_empty`).
    pub emptied: Vec<(PathBuf, Kind)>,
    /// Masked files with a hard link outside every mask (the run is refused).
    pub linked_secrets: Vec<LinkedSecret>,
    /// Existing paths inside the writable roots kept read-only.
    pub protected: BTreeSet<PathBuf>,
    /// Directories that must not be renamed during the run (git dirs holding protected paths,
    /// the trust store's ancestors): a rename would carry the read-only paths away whole.
    pub pins: BTreeSet<PathBuf>,
    /// What a creation guard refuses to let the run create (see [`GuardPattern`]).
    pub guard: Vec<GuardPattern>,
    /// `deny_write` globs no [`GuardPattern`] can express: only the sweep checks them.
    pub sweep_only: Vec<String>,
    /// What the sweep after the run compares against.
    pub sweep: SweepPlan,
    pub deny_globs: DenyGlobs,
    /// `(st_dev, st_ino)` of every masked, protected and pinned path when scanned:
    /// a backend mounts over a path only if it is still that file, and the sweep finds a
    /// protected path that was renamed away by it.
    pub identities: BTreeMap<PathBuf, (u64, u64)>,
}

impl Scan {
    /// Scans the host for a run of `policy` at `place`.
    pub fn new(policy: &Policy, place: &Place, host: &dyn HostView) -> Result<Scan, ScanError> {
        Scan::new_cached(policy, place, host, None)
    }

    /// [`Scan::new`] with the walk cache of earlier runs ([`crate::walk_cache`]): the
    /// listings it holds for this walk's key are used where their directories are unchanged,
    /// and the walk's record ([`SweepPlan::dirs`]) is what to store for the next run.
    ///
    /// A match the walk found that is gone or another file by the time the scan masks or
    /// protects it (moved after the walk: a directory exchanged by another run's command) is
    /// never dropped: the scan starts again, and after 3 (`SCAN_ATTEMPTS`) the run is refused
    /// ([`ScanError::WorkspaceChanged`]).
    pub fn new_cached(
        policy: &Policy,
        place: &Place,
        host: &dyn HostView,
        mut cache: Option<&mut crate::walk_cache::WalkCache>,
    ) -> Result<Scan, ScanError> {
        let mut moved = PathBuf::new();
        for _ in 0..SCAN_ATTEMPTS {
            match Scan::once(policy, place, host, cache.as_deref_mut())? {
                Ok(scan) => return Ok(scan),
                Err(m) => moved = m,
            }
        }
        Err(ScanError::WorkspaceChanged {
            dir: moved,
            rewalks: SCAN_ATTEMPTS,
        })
    }

    /// One scan: `Ok(Err(dir))` when what the walk found in `dir` moved before the scan was
    /// over ([`Matches::seen_as`], [`crate::walk::DirStamps::moved_since`]), or a path the
    /// scan decided about is another file now.
    ///
    /// The steps of [`Scanning`], in order: each reads what the earlier ones decided, and
    /// each host call is made in the same order as ever (a fake host exchanging directories
    /// on a given call, `moved_tests`, depends on it).
    fn once(
        policy: &Policy,
        place: &Place,
        host: &dyn HostView,
        cache: Option<&mut crate::walk_cache::WalkCache>,
    ) -> Result<Result<Scan, PathBuf>, ScanError> {
        // The scan's passes ask about the same paths more than once: each is asked once.
        let remembering = crate::host::Remembering::new(host);
        let host: &dyn HostView = &remembering;
        let patterns = Patterns::expand(policy, place, host)?;
        let mut dirs = DirStamps::start();
        let found = Matches::collect(
            host,
            &patterns.writable_roots,
            &patterns.deny_read,
            &patterns.deny_write,
            &mut dirs,
            cache,
        )?;
        let mut s = Scanning::new(place, host, patterns, found, dirs);
        let via_links = s.links_to_dirs();
        s.read_grants()?;
        if let Err(dir) = s.masks() {
            return Ok(Err(dir));
        }
        s.emptied();
        s.hidden_masks();
        s.pin_exact_paths();
        if let Err(dir) = s.protect_denied_writes() {
            return Ok(Err(dir));
        }
        s.git_dirs();
        s.git_before();
        s.protect_git_paths();
        s.git_absent();
        s.guard(via_links);
        s.pin_git_dirs();
        let masked_paths = s.masks_win();
        let identities = s.identities(&masked_paths);
        let sweep = s.sweep_plan();
        if let Some(dir) = s.moved_since_walk(&sweep) {
            return Ok(Err(dir));
        }
        Ok(Ok(s.into_scan(sweep, identities)))
    }
}

/// The policy's paths and patterns, expanded for where a run is.
struct Patterns {
    writable_roots: Vec<PathBuf>,
    deny_read: Vec<PathPattern>,
    read_empty: Vec<PathPattern>,
    allow_read: Vec<PathPattern>,
    /// `deny_write`, with the home's `PATH` directories and the files the shell sources.
    deny_write: Vec<PathPattern>,
}

impl Patterns {
    /// The writable roots, then each list of the policy expanded against them.
    fn expand(policy: &Policy, place: &Place, host: &dyn HostView) -> Result<Patterns, ScanError> {
        let writable_roots = writable_roots(policy, place, host)?;
        let ctx = PathContext {
            home: place.home.clone(),
            workspace: place.workspace.clone(),
            writable_roots: writable_roots.clone(),
        };
        let expand_all = |list: &[String]| -> Result<Vec<PathPattern>, ScanError> {
            let mut out = Vec::new();
            for p in list {
                out.extend(policy::expand(p, &ctx)?);
            }
            Ok(out)
        };
        let deny_read = expand_all(&policy.filesystem.deny_read)?;
        let read_empty = expand_all(&policy.filesystem.read_empty)?;
        let allow_read = expand_all(&policy.filesystem.allow_read)?;
        let mut deny_write = expand_all(&policy.filesystem.deny_write)?;
        for p in home_path_dirs(policy, place, &ctx)
            .into_iter()
            .chain(home_sourced_files(policy, place, &ctx, host))
        {
            if !deny_write.contains(&p) {
                deny_write.push(p);
            }
        }
        Ok(Patterns {
            writable_roots,
            deny_read,
            read_empty,
            allow_read,
            deny_write,
        })
    }
}

/// One scan being built, after the walk: each step ([`Scan::once`] calls them in order)
/// reads what the earlier ones decided.
struct Scanning<'a> {
    place: &'a Place,
    host: &'a dyn HostView,
    writable_roots: Vec<PathBuf>,
    deny_read: Vec<PathPattern>,
    read_empty: Vec<PathPattern>,
    allow_read: Vec<PathPattern>,
    deny_write: Vec<PathPattern>,
    /// What the walk found.
    found: Matches,
    /// The walk's settled directories (the sweep plan's `dirs`).
    dirs: DirStamps,
    /// The paths protected (or not) by what the scan found there after the walk, with the
    /// file found (`None`: nothing): the same again at the end, or the scan starts again.
    /// A directory on the way renamed away while the scan looked and back later (an
    /// include target, a `.cargo` link's target: red team issue 32d, second pass) is
    /// another answer at one of the two.
    decided: Vec<(PathBuf, Option<(u64, u64)>)>,
    allows: Vec<PathBuf>,
    /// Read grants below the host's /tmp, attached in the private one.
    tmp_grants: Vec<(PathBuf, Kind)>,
    masks: Vec<(PathBuf, Kind)>,
    emptied: Vec<(PathBuf, Kind)>,
    linked_secrets: Vec<LinkedSecret>,
    protected: BTreeSet<PathBuf>,
    pins: BTreeSet<PathBuf>,
    redirect_gitdirs: BTreeSet<PathBuf>,
    git_dirs: Vec<git::GitDir>,
    /// Git dirs under other names (see `git_dirs`).
    bare: Vec<PathBuf>,
    git_indexes: Vec<GitIndex>,
    git_state: Vec<(PathBuf, Vec<u8>)>,
    git_paths: BTreeSet<PathBuf>,
    git_absent: BTreeSet<PathBuf>,
    guard: Vec<GuardPattern>,
    sweep_only: Vec<String>,
}

impl<'a> Scanning<'a> {
    fn new(
        place: &'a Place,
        host: &'a dyn HostView,
        patterns: Patterns,
        found: Matches,
        dirs: DirStamps,
    ) -> Scanning<'a> {
        let Patterns {
            writable_roots,
            deny_read,
            read_empty,
            allow_read,
            deny_write,
        } = patterns;
        Scanning {
            place,
            host,
            writable_roots,
            deny_read,
            read_empty,
            allow_read,
            deny_write,
            found,
            dirs,
            decided: Vec::new(),
            allows: Vec::new(),
            tmp_grants: Vec::new(),
            masks: Vec::new(),
            emptied: Vec::new(),
            linked_secrets: Vec::new(),
            protected: BTreeSet::new(),
            pins: BTreeSet::new(),
            redirect_gitdirs: BTreeSet::new(),
            git_dirs: Vec::new(),
            bare: Vec::new(),
            git_indexes: Vec::new(),
            git_state: Vec::new(),
            git_paths: BTreeSet::new(),
            git_absent: BTreeSet::new(),
            guard: Vec::new(),
            sweep_only: Vec::new(),
        }
    }

    /// Protected paths that a link to a directory makes land where no glob names them
    /// (`.cargo -> cargo-dir`: `cargo-dir/config.toml` is read as `.cargo/config.toml`):
    /// the guard refuses creating them, the sweep treats them as protected, and those
    /// that exist are protected like any match. Returns the guard's patterns for them.
    fn links_to_dirs(&mut self) -> Vec<GuardPattern> {
        let host = self.host;
        let found = &mut self.found;
        // Each link's target as the scan resolves it (a target gone then yields no pattern).
        for l in &found.dir_links {
            self.decided.push((l.clone(), identity(host, l)));
        }
        let via_links = via_dir_links(
            host,
            &self.deny_write,
            &found.dir_links,
            &self.writable_roots,
        );
        for g in &via_links {
            self.decided.push((g.base.clone(), identity(host, &g.base)));
        }
        for g in via_links.iter().filter(|g| g.tail.is_empty()) {
            if host.lstat_kind(&g.base).is_some() && !found.deny_write.contains(&g.base) {
                found.deny_write.push(g.base.clone());
            }
        }
        found.globs.via_links = (via_links.iter())
            .map(|g| (g.base.clone(), g.tail.clone()))
            .collect();
        via_links
    }

    /// Exact read grants: a missing one is refused as a missing writable path is (globs
    /// are patterns, not paths: one may match nothing).
    fn read_grants(&mut self) -> Result<(), ScanError> {
        let host = self.host;
        let mut linked = Vec::new();
        for p in &self.allow_read {
            let PathPattern::Exact(p) = p else { continue };
            let resolved = links::resolve(host, p, self.place.uid)
                .filter(|r| r.exists)
                .ok_or_else(|| ScanError::ReadGrantMissing(p.clone()))?;
            let canon = resolved.real;
            if is_private_place(&canon) {
                return Err(ScanError::PrivateTmpGrant(canon));
            }
            match resolved.planted {
                Some(link) => linked.push((p.clone(), canon, link)),
                None => self.allows.push(canon),
            }
        }
        // A read grant through a link a run could have planted would exempt its target from
        // the masks (`/tmp/g/data -> ~/.ssh`): refused unless a grant of a path with no such
        // link covers the target, and then it adds nothing (a mask inside stays).
        let taken: Vec<PathBuf> = (self.allows.iter())
            .chain(&self.writable_roots)
            .cloned()
            .collect();
        through_links(linked, &taken)?;
        // Read grants below the host's /tmp are attached in the private one.
        self.tmp_grants = tmp_read_grants(host, &self.allows, &self.writable_roots);
        Ok(())
    }

    /// Whether a canonical path is seen inside the sandbox: not below a place every sandbox
    /// replaces, unless a writable root or a read grant attached in the private `/tmp` holds
    /// it.
    fn visible(&self, canon: &Path) -> bool {
        !under_replaced(canon)
            || self.writable_roots.iter().any(|w| is_within(canon, w))
            || self.tmp_grants.iter().any(|(g, _)| is_within(canon, g))
    }

    /// Masks: every denied path that exists, minus allow exceptions, minus writable roots
    /// (writing implies reading), minus paths the sandbox replaces. A denied directory
    /// that holds a writable root is split around it as around a read grant: its other
    /// entries stay masked (red team, issue 33: `--allow-write ~/.ssh/tmp` dropped the
    /// whole `~/.ssh` mask, and `~/.kube/cache` would have `~/.kube/config`).
    /// `Err(dir)`: a match moved since the walk.
    fn masks(&mut self) -> Result<(), PathBuf> {
        let host = self.host;
        for d in &self.found.deny_read {
            let seen = self.found.seen_as.get(d).copied();
            let Some(canon) = host.canonicalize(d) else {
                // Gone since the walk found it (or a dangling link, which has nothing to read).
                if seen.is_some() {
                    return Err(parent_of(d));
                }
                continue;
            };
            // The file the walk saw, or the scan starts again: the mask lands on this path
            // only if it still holds that file (`identities`), wherever the walk's secret is.
            // First: a match replaced by a link to `/` or the workspace (which no mask
            // covers) is a move too (red team issue 32d, 01).
            if seen.is_some() && host.stat_now(&canon).map(|e| (e.dev, e.ino)) != seen {
                return Err(parent_of(d));
            }
            if self.writable_roots.contains(&canon) {
                continue;
            }
            if !self.visible(&canon) {
                continue;
            }
            let holes = holes_in(&self.allows, &self.writable_roots, &canon);
            mask_targets(host, &canon, &holes, &mut self.masks);
        }
        self.masks.sort();
        self.masks.dedup();
        Ok(())
    }

    /// Paths read as empty: exact paths (the policy allows no other form), covered by an
    /// empty readable file or directory unless an unreadable mask covers them already, or
    /// they are a writable root (one holding a writable root is split around it, as a
    /// mask is). Inside a writable root too (a home as the workspace):
    /// the shell start-up files there read as empty as anywhere else, and the read-only
    /// cover keeps them from being written.
    fn emptied(&mut self) {
        let host = self.host;
        for d in &self.read_empty {
            let PathPattern::Exact(d) = d else { continue };
            let Some(canon) = host.canonicalize(d) else {
                continue;
            };
            let covered = self.masks.iter().any(|(m, _)| is_within(&canon, m))
                || self.writable_roots.contains(&canon);
            if covered || !self.visible(&canon) {
                continue;
            }
            let holes = holes_in(&self.allows, &self.writable_roots, &canon);
            mask_targets(host, &canon, &holes, &mut self.emptied);
        }
        self.emptied.sort();
        self.emptied.dedup();
    }

    /// The hard links of every mask looked for, then the masks hidden by a masked directory
    /// dropped.
    fn hidden_masks(&mut self) {
        let all_masks: Vec<(PathBuf, Kind)> =
            self.masks.iter().chain(&self.emptied).cloned().collect();
        self.linked_secrets = linked_secrets(self.host, &all_masks);
        // A mask inside a masked directory (a dotenv file in `.stockade/quarantine`, a file
        // found in a directory masked whole) is hidden by it: not mounted (its path is gone
        // once the directory's mask is), but its hard links were looked for above.
        let dir_masks: Vec<PathBuf> = (self.masks.iter())
            .filter(|(_, k)| *k == Kind::Dir)
            .map(|(p, _)| p.clone())
            .collect();
        self.masks
            .retain(|(p, _)| !dir_masks.iter().any(|d| p != d && is_within(p, d)));
    }

    /// An exact path masked or read as empty inside a writable root (a policy's own, the
    /// catalogue's `~/snap/firefox` with the home as the workspace) is found by its name
    /// only: a concurrent run could rename a directory on its way while this run's scan
    /// looks (its own mask goes along) and back once this run's command runs, and no
    /// pattern would find it elsewhere (red team issue 32d). The directories between the
    /// root and it are pinned: no run can rename them.
    fn pin_exact_paths(&mut self) {
        for pattern in self.deny_read.iter().chain(&self.read_empty) {
            let PathPattern::Exact(p) = pattern else {
                continue;
            };
            let Some(canon) = self.host.canonicalize(p) else {
                continue;
            };
            let Some(root) = (self.writable_roots.iter())
                .filter(|w| is_within(&canon, w) && canon != **w)
                .max_by_key(|w| depth(w))
            else {
                continue;
            };
            for dir in canon.ancestors().skip(1) {
                if dir == root.as_path() || !is_within(dir, root) {
                    break;
                }
                self.pins.insert(dir.to_path_buf());
            }
        }
    }

    /// Protected paths inside writable roots (outside them everything is read-only): the
    /// walk's `deny_write` matches. `Err(dir)`: a match moved since the walk.
    fn protect_denied_writes(&mut self) -> Result<(), PathBuf> {
        let host = self.host;
        for p in &self.found.deny_write {
            // A mount cannot cover a symlink: protect its target when that is writable (the
            // link itself can still be replaced; the sweep notices the change of kind).
            let seen = self.found.seen_as.get(p).copied();
            if seen.is_none() {
                self.decided.push((p.clone(), identity(host, p)));
            }
            let Some(target) = mount_target(host, p) else {
                if seen.is_some() {
                    return Err(parent_of(p));
                }
                continue;
            };
            if seen.is_some() && host.stat_now(&target).map(|e| (e.dev, e.ino)) != seen {
                return Err(parent_of(p));
            }
            // A writable root named by itself (the workspace, `--allow-write ~/.local/bin`)
            // stays writable.
            if self.writable_roots.iter().any(|w| is_within(&target, w))
                && target != self.place.workspace
                && !self.writable_roots.contains(&target)
            {
                self.protected.insert(target);
            }
        }
        Ok(())
    }

    /// The git dirs whose code paths are protected: those git files point to (protected
    /// themselves), the walk's, those under other names, and those enclosing a writable
    /// root.
    fn git_dirs(&mut self) {
        let host = self.host;
        for gitfile in &self.found.git_files {
            protect_git_file(
                host,
                gitfile,
                &self.writable_roots,
                &mut self.protected,
                &mut self.redirect_gitdirs,
                &mut self.git_dirs,
            );
        }
        // Everything else in those git dirs that makes git run code or look elsewhere.
        for d in &self.found.git_dirs {
            let top = (d.file_name().is_some_and(|n| n == ".git"))
                .then(|| d.parent().map(Path::to_path_buf))
                .flatten();
            self.git_dirs.push(git::GitDir {
                dir: d.clone(),
                top,
            });
        }
        // Git dirs under other names (a bare repository in the workspace, or one hidden in
        // a git dir's own files, `.git/inner`): git runs their config and hooks as it does
        // `.git`'s. Not `.git` itself nor a submodule's git dir (the walk's `git_dirs`,
        // protected as such), nor a linked worktree's admin dir as git makes it
        // (`worktrees/<name>` with `commondir` `../..`: inert, its worktree files protected
        // as such; `git worktree remove` deletes it).
        let found = &self.found;
        let writable_roots = &self.writable_roots;
        self.bare = found
            .accepted_git_dirs
            .iter()
            .filter(|d| {
                d.file_name().is_some_and(|n| n != ".git")
                    && !found.git_dirs.contains(d)
                    && !git::is_plain_worktree_admin_dir(host, d)
                    && writable_roots.iter().any(|w| is_within(d, w) && *d != w)
            })
            .cloned()
            .collect();
        self.git_dirs.extend(self.bare.iter().map(|d| git::GitDir {
            dir: d.clone(),
            top: None,
        }));
        self.git_dirs.extend(
            writable_roots
                .iter()
                .filter_map(|r| git::enclosing(host, r)),
        );
        self.git_dirs.sort();
        self.git_dirs.dedup();
    }

    /// What the sweep compares the git dirs in the writable roots with after the run.
    fn git_before(&mut self) {
        let host = self.host;
        let writable_roots = &self.writable_roots;
        // Their indexes: which entries git does not check for changes, before the run.
        self.git_indexes = (self.git_dirs.iter())
            .filter(|d| writable_roots.iter().any(|w| is_within(&d.dir, w)))
            .filter_map(|d| {
                let path = d.dir.join("index");
                let hash_len = git::hash_len(host, &d.dir);
                let data = host.read_bytes(&path, crate::GIT_INDEX_LIMIT)?;
                let hidden = crate::git_index::hidden_entries(&data, hash_len)?;
                Some(GitIndex {
                    path,
                    hidden,
                    hash_len,
                })
            })
            .collect();
        // Their state of a stopped rebase or sequence, as it is before the run.
        // A linked worktree keeps its own in its admin dir (`worktrees/<name>`).
        self.git_state = (self.git_dirs.iter())
            .filter(|d| writable_roots.iter().any(|w| is_within(&d.dir, w)))
            .flat_map(|d| std::iter::once(d.dir.clone()).chain(git::worktree_dirs(host, &d.dir)))
            .flat_map(|dir| {
                protect::git_state::STATE_FILES.map(|rel| {
                    let path = dir.join(rel);
                    let before = host.read_bytes(&path, protect::git_state::STATE_LIMIT + 1);
                    (path, before.unwrap_or_default())
                })
            })
            .collect();
    }

    /// Git's code paths (hooks, configs, what they name), protected where they exist in a
    /// writable root.
    fn protect_git_paths(&mut self) {
        let host = self.host;
        let place = self.place;
        self.git_paths = git::protected_paths(
            host,
            &self.git_dirs,
            &self.writable_roots,
            &place.home,
            &git::global_configs(&place.home, place.xdg_config_home.as_deref()),
        );
        for d in &self.bare {
            for name in GIT_DIR_CODE {
                self.git_paths.insert(d.join(name));
            }
        }
        for p in &self.git_paths {
            self.decided.push((p.clone(), identity(host, p)));
            if let Some(target) = mount_target(host, p) {
                if self.writable_roots.iter().any(|w| is_within(&target, w))
                    && target != place.workspace
                {
                    self.protected.insert(target);
                }
            }
        }
    }

    /// Git's exact paths in the writable roots that do not exist now: one there after a
    /// native run was made by someone else (the creation guard refused the run's own), and
    /// the run could then write it (`sweep::made_by_others`).
    fn git_absent(&mut self) {
        let host = self.host;
        let writable_roots = &self.writable_roots;
        let redirect_paths =
            (self.redirect_gitdirs.iter()).flat_map(|d| GIT_DIR_CODE.map(|n| d.join(n)));
        self.git_absent = (self.git_paths.iter().cloned())
            .chain(redirect_paths)
            .filter(|p| writable_roots.iter().any(|w| is_within(p, w) && p != w))
            .filter(|p| host.lstat_kind(p).is_none())
            .collect();
    }

    /// What a creation guard refuses: the `deny_write` patterns (those it cannot express
    /// are left to the sweep), where they land through links to directories, git's code
    /// paths and linked worktrees' files.
    fn guard(&mut self, via_links: Vec<GuardPattern>) {
        let (mut guard, sweep_only) = guard_patterns(
            self.host,
            &self.deny_write,
            &self.redirect_gitdirs,
            &self.writable_roots,
        );
        for g in via_links {
            if !guard.contains(&g) {
                guard.push(g);
            }
        }
        guard.extend(self.git_paths.iter().map(|p| GuardPattern {
            base: p.clone(),
            tail: Vec::new(),
        }));
        for d in &self.git_dirs {
            if self.writable_roots.iter().any(|w| is_within(&d.dir, w)) {
                for name in git::WORKTREE_FILES {
                    guard.push(GuardPattern {
                        base: d.dir.join("worktrees"),
                        tail: vec![name.to_string()],
                    });
                }
            }
        }
        self.guard = guard;
        self.sweep_only = sweep_only;
    }

    /// The git dir holding a protected path is pinned (unless it is a writable root).
    fn pin_git_dirs(&mut self) {
        for p in &self.protected {
            if let Some(parent) = p.parent() {
                let is_gitdir = parent.file_name().is_some_and(|n| n == ".git")
                    || self.host.stat(&parent.join("HEAD")).is_some();
                if is_gitdir && !self.writable_roots.iter().any(|w| w == parent) {
                    self.pins.insert(parent.to_path_buf());
                }
            }
        }
    }

    /// Where masks and protections overlap, the masks win. Returns the masked paths.
    fn masks_win(&mut self) -> Vec<PathBuf> {
        // A mask inside a protected path or a protected path inside a mask: the mask wins.
        // A path read as empty too (its cover is read-only): a read-only bind of the path
        // itself at the same place would show its content under gVisor.
        let masked_paths: Vec<PathBuf> = self.masks.iter().map(|(p, _)| p.clone()).collect();
        let emptied = &self.emptied;
        self.protected.retain(|p| {
            !(masked_paths.iter().chain(emptied.iter().map(|(e, _)| e))).any(|m| is_within(p, m))
        });
        // Nor is a directory pinned inside a mask (a git dir in the quarantine, masked whole:
        // its pin's mount point is gone once the mask is; every run failed at set-up, red
        // team issue 32d, 06).
        self.pins
            .retain(|p| !masked_paths.iter().any(|m| is_within(p, m)));
        masked_paths
    }

    /// The identities of every masked, emptied, protected and pinned path.
    fn identities(&self, masked_paths: &[PathBuf]) -> BTreeMap<PathBuf, (u64, u64)> {
        // Paths read as empty too: inside a writable root (a home as the workspace) the cover
        // goes only over the file the scan saw.
        masked_paths
            .iter()
            .chain(self.emptied.iter().map(|(p, _)| p))
            .chain(&self.protected)
            .chain(&self.pins)
            .filter_map(|p| self.host.stat(p).map(|e| (p.clone(), (e.dev, e.ino))))
            .collect()
    }

    /// What the sweep after the run compares against (the walk's record, the git state and
    /// absent paths taken over).
    fn sweep_plan(&mut self) -> SweepPlan {
        let host = self.host;
        let found = &self.found;
        let sweep = SweepPlan {
            roots: self.writable_roots.clone(),
            // Git's code paths too (a git dir's config that is a symlink of the user's,
            // `gd/config -> config.real`: protected as its target, and no creation after
            // a run that left it alone; Docker and gVisor as root quarantined it, red team
            // of issue 33, eighth round).
            existing: (found.deny_write.iter())
                .chain(&found.git_files)
                .chain(&self.git_paths)
                .cloned()
                .chain(
                    self.redirect_gitdirs
                        .iter()
                        .flat_map(|d| GIT_DIR_CODE.map(|n| d.join(n))),
                )
                .filter_map(|p| {
                    let kind = host.lstat_kind(&p)?;
                    Some((p, kind))
                })
                .collect(),
            git_dirs: found
                .accepted_git_dirs
                .iter()
                .chain(&found.git_dirs)
                .cloned()
                .collect(),
            dirs: std::mem::take(&mut self.dirs),
            git_indexes: std::mem::take(&mut self.git_indexes),
            git_state: std::mem::take(&mut self.git_state),
            git_absent: std::mem::take(&mut self.git_absent),
            links: BTreeMap::new(),
            own: BTreeMap::new(),
            closed: (found.unlisted.iter())
                .filter_map(|p| host.stat(p).map(|e| (p.clone(), (e.dev, e.ino))))
                .collect(),
        };
        // What each protected symbolic link holds and where it leads: under gVisor nothing
        // refuses `rm .envrc; ln -s evil .envrc` during the run (the kind stays a link).
        let links = (sweep.existing.iter())
            .filter(|(_, k)| **k == Kind::Symlink)
            .filter_map(|(p, _)| {
                let target = host.read_link(p)?;
                let resolves = host.canonicalize(p);
                Some((p.clone(), ProtectedLink { target, resolves }))
            })
            .collect();
        SweepPlan { links, ..sweep }
    }

    /// The directory that moved since the walk, if one did, or the parent of a path decided
    /// about that is another file now.
    fn moved_since_walk(&self, sweep: &SweepPlan) -> Option<PathBuf> {
        let host = self.host;
        let found = &self.found;
        // Everything above read the tree after the walk (where each match resolves, the git
        // dirs' configs and what they name): it holds only if no directory on the way to a
        // match or git dir changed since the walk's re-check; else the scan starts again.
        // The paths decided about too (an include target's directory renamed away after the
        // walk and back after the checks: red team 32d third pass).
        let walked = (found.deny_read.iter())
            .chain(&found.deny_write)
            .chain(&found.git_files)
            .chain(&found.git_dirs)
            .chain(&found.accepted_git_dirs)
            .chain(self.decided.iter().map(|(p, _)| p))
            .map(PathBuf::as_path);
        let git_dirs: Vec<&Path> = (found.git_dirs.iter())
            .chain(&found.accepted_git_dirs)
            .map(PathBuf::as_path)
            .collect();
        if let Some(dir) = sweep
            .dirs
            .moved_since(host, &self.writable_roots, &git_dirs, walked)
        {
            return Some(dir);
        }
        for (p, id) in &self.decided {
            if identity(host, p) != *id {
                return Some(parent_of(p));
            }
        }
        None
    }

    /// The scan, with the protected files' other names among the linked secrets.
    fn into_scan(self, sweep: SweepPlan, identities: BTreeMap<PathBuf, (u64, u64)>) -> Scan {
        Scan {
            writable_roots: self.writable_roots,
            allows: self.allows,
            masks: self.masks,
            emptied: self.emptied,
            // Protected files with another name (`ln .git/config keep`): refused alike.
            linked_secrets: [
                self.linked_secrets,
                crate::secrets::linked_protected(self.host, &self.protected),
            ]
            .concat(),
            protected: self.protected,
            pins: self.pins,
            guard: self.guard,
            sweep_only: self.sweep_only,
            sweep,
            deny_globs: self.found.globs,
            identities,
        }
    }
}

/// The holes to split a mask at `canon` around: every read grant, and the writable roots
/// inside it.
fn holes_in(allows: &[PathBuf], writable_roots: &[PathBuf], canon: &Path) -> Vec<PathBuf> {
    (allows.iter())
        .chain(writable_roots.iter().filter(|w| is_within(w, canon)))
        .cloned()
        .collect()
}

/// The directory to name for a path that moved.
fn parent_of(p: &Path) -> PathBuf {
    p.parent()
        .map_or_else(|| p.to_path_buf(), Path::to_path_buf)
}

/// The file at `p` now, through links (`None`: nothing there).
fn identity(host: &dyn HostView, p: &Path) -> Option<(u64, u64)> {
    host.stat_now(p).map(|e| (e.dev, e.ino))
}

/// The entries of a git dir that run code or send git elsewhere, protected (and refused on
/// creation) in a git dir found under another name or through a redirect.
const GIT_DIR_CODE: [&str; 3] = ["hooks", "config", "commondir"];

/// How many times a scan starts again when a match its walk found moved before it was over
/// ([`Scan::new_cached`]).
pub const SCAN_ATTEMPTS: usize = 3;

/// What the supervisor checks after the run: protected paths that did not exist at the start.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct SweepPlan {
    pub roots: Vec<PathBuf>,
    /// Protected paths present at the start, with their kind: a path whose kind changed (a
    /// symlinked `.git/hooks` replaced by a real directory) counts as created.
    pub existing: BTreeMap<PathBuf, Kind>,
    /// Directories git accepted as git dirs at the start (see [`crate::planted_git`]): one
    /// that appears during the run is a planted git dir.
    pub git_dirs: BTreeSet<PathBuf>,
    /// Directories the planner listed, with their stamps: the sweep lists again only those
    /// that changed (and new ones).
    #[serde(skip)]
    pub dirs: DirStamps,
    /// The git indexes of the repositories in the writable roots, with the entries whose
    /// changes git already did not show ([`crate::git_index`]) and the object name length.
    pub git_indexes: Vec<GitIndex>,
    /// Git's state of a stopped rebase or sequence ([`protect::git_state::STATE_FILES`]) in
    /// each git dir of the writable roots, with what it held at the start (empty when it did
    /// not exist): one that gained a line that runs code when git goes on is quarantined
    /// after the run ([`crate::sweep::after_run`]).
    #[serde(skip)]
    pub git_state: Vec<(PathBuf, Vec<u8>)>,
    /// Git's exact paths in the writable roots (hooks, configs, included files, redirects of
    /// the git dirs found) that did not exist at the start: one there after a native run was
    /// made by someone else (the sweep's `made_by_others`).
    pub git_absent: BTreeSet<PathBuf>,
    /// The protected paths of [`SweepPlan::existing`] that are symbolic links: what each
    /// holds and where it led at the start. One holding another target after the run, or
    /// leading elsewhere, was replaced ([`crate::sweep::replaced_links`]).
    pub links: BTreeMap<PathBuf, ProtectedLink>,
    /// stockade's own directories in a writable root that the supervisor writes into while
    /// the run lasts (the run journals), with their device and inode at the start: masked
    /// from the command, so the same directory after the run is not one the run created,
    /// whatever its ctime ([`crate::sweep::guard_after_run`]). One replaced is still caught.
    pub own: BTreeMap<PathBuf, (u64, u64)>,
    /// Directories the planner could not list, masked whole from the command
    /// (the walk's `closed_to_planner`), with their device and inode: what the same
    /// directory holds after the run is not the command's (it saw an empty mask).
    pub closed: BTreeMap<PathBuf, (u64, u64)>,
}

/// A protected symbolic link as the run found it (see [`SweepPlan::links`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProtectedLink {
    /// Its target as written (`readlink`).
    pub target: PathBuf,
    /// Where it led, every link resolved; `None` when it dangled.
    pub resolves: Option<PathBuf>,
}

/// A git index as the run found it (see [`SweepPlan::git_indexes`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GitIndex {
    pub path: PathBuf,
    pub hidden: BTreeSet<String>,
    pub hash_len: usize,
}

/// Protected paths of the home that only the caller's environment names: the directories of
/// its `PATH` in the home (the host's shells look programs up there: `~/.npm-global/bin`,
/// `~/.yarn/bin`, ... beside the catalogue's `~/.local/bin`), and the `~/.config/...` entries
/// of the policy's `deny_write` again below `XDG_CONFIG_HOME` when that is elsewhere. A `PATH`
/// directory inside a workspace below the home is the project's own (its `bin`), not the
/// home's; one a policy unprotects by name stays unprotected.
fn home_path_dirs(policy: &Policy, place: &Place, ctx: &PathContext) -> Vec<PathPattern> {
    let unprotected: Vec<PathBuf> = (policy.filesystem.unprotect.iter())
        .filter_map(|u| policy::expand(u, ctx).ok())
        .flatten()
        .filter_map(|p| match p {
            PathPattern::Exact(p) => Some(p),
            PathPattern::Glob(_) => None,
        })
        .collect();
    let workspace_holds_home = is_within(&place.home, &place.workspace);
    let mut out: Vec<PathPattern> = Vec::new();
    for dir in &place.path_dirs {
        if !dir.is_absolute() {
            continue;
        }
        let dir = policy::normalize_lexically(dir);
        if dir == place.home
            || !is_within(&dir, &place.home)
            || (is_within(&dir, &place.workspace) && !workspace_holds_home)
            || unprotected.contains(&dir)
        {
            continue;
        }
        out.push(PathPattern::Exact(dir));
    }
    if let Some(xdg) = place
        .xdg_config_home
        .as_ref()
        .filter(|x| x.is_absolute() && **x != place.home.join(".config"))
    {
        for pattern in &policy.filesystem.deny_write {
            if let Some(rest) = pattern.strip_prefix("~/.config/") {
                if !rest.contains(['*', '?', '[', '{']) {
                    out.push(PathPattern::Exact(policy::normalize_lexically(
                        &xdg.join(rest),
                    )));
                }
            }
        }
    }
    out
}

/// Protected paths of the home that its shell start-up files source by a literal path
/// (`. ~/.my_own_rc` in `~/.bashrc`), beyond the catalogue's conventional ones: read only when
/// a writable root holds the home or part of it (see [`crate::home_sources`], best effort).
/// One a policy unprotects by name stays unprotected.
fn home_sourced_files(
    policy: &Policy,
    place: &Place,
    ctx: &PathContext,
    host: &dyn HostView,
) -> Vec<PathPattern> {
    let found = crate::home_sources::sourced_paths(
        host,
        &place.home,
        &place.workspace,
        &ctx.writable_roots,
    );
    if found.is_empty() {
        return Vec::new();
    }
    let unprotected: Vec<PathPattern> = (policy.filesystem.unprotect.iter())
        .filter_map(|u| policy::expand(u, ctx).ok())
        .flatten()
        .collect();
    found
        .into_iter()
        .map(PathPattern::Exact)
        .filter(|p| !unprotected.contains(p))
        .collect()
}

/// How many components `p` has (mount steps go parents first).
pub fn depth(p: &Path) -> usize {
    p.components().count()
}

pub fn under_replaced(p: &Path) -> bool {
    REPLACED.iter().any(|r| is_within(p, Path::new(r)))
}

/// `/tmp` itself, or `/dev/shm` or a path below it: the sandbox's own, empty and discarded
/// after the run, so granting them (or running in them) would reach nothing of the host's.
/// A path below the host's `/tmp` can be granted: it is attached at the same path inside.
pub fn is_private_place(p: &Path) -> bool {
    p == Path::new("/tmp") || is_within(p, Path::new("/dev/shm"))
}

/// The canonical writable roots of `policy` at `place`, outermost first (no walk: what
/// [`Scan::new`] starts from).
pub fn writable_roots(
    policy: &Policy,
    place: &Place,
    host: &dyn HostView,
) -> Result<Vec<PathBuf>, ScanError> {
    let ctx = PathContext {
        home: place.home.clone(),
        workspace: place.workspace.clone(),
        writable_roots: Vec::new(),
    };
    if is_private_place(&place.workspace) {
        return Err(ScanError::PrivateTmpWorkspace(place.workspace.clone()));
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    let mut linked = Vec::new();
    for entry in &policy.filesystem.allow_write {
        for pat in policy::expand(entry, &ctx)? {
            let PathPattern::Exact(p) = pat else {
                return Err(ScanError::WritableRootGlob(entry.clone()));
            };
            // A created root (a preset's state directory) is made before a run; until then
            // (`policy show`) it stands as written.
            // Resolved and checked for planted links in one walk (`links::resolve`).
            let resolved = links::resolve(host, &p, place.uid);
            let planted = resolved.as_ref().and_then(|r| r.planted.clone());
            let canon = match resolved {
                Some(r) if r.exists => r.real,
                _ if policy.filesystem.created_roots.contains(entry) => p.clone(),
                _ => return Err(ScanError::WritableRootMissing(p.clone())),
            };
            if is_private_place(&canon) {
                return Err(ScanError::PrivateTmpGrant(canon));
            }
            for forbidden in ["/", "/dev", "/proc", "/sys"] {
                if canon == Path::new(forbidden)
                    || (forbidden != "/" && is_within(&canon, Path::new(forbidden)))
                {
                    return Err(ScanError::WritableRootForbidden(canon));
                }
            }
            if let Some(link) = planted {
                linked.push((p.clone(), canon, link));
            } else if !roots.contains(&canon) {
                roots.push(canon);
            }
        }
    }
    through_links(linked, &roots)?;
    roots.sort_by_key(|p| (depth(p), p.clone()));
    Ok(roots)
}

/// Grants that pass through a link a run could have planted ([`links::resolve`]): each must
/// lead within a grant of a path with no such link (`taken`: the real path named too, or a
/// workspace holding it), or the run is refused. Such a grant adds nothing of its own: its
/// target is reached through the grant that covers it, with that grant's protections and
/// masks (taken as a grant by name, a link into `.vscode` or `~/.aws` chose what lost them).
fn through_links(
    linked: Vec<(PathBuf, PathBuf, links::PlantableLink)>,
    taken: &[PathBuf],
) -> Result<(), ScanError> {
    for (given, real, link) in linked {
        if !taken.iter().any(|t| is_within(&real, t)) {
            return Err(ScanError::GrantThroughLink {
                given,
                link: link.link,
                target: link.target,
                real,
            });
        }
    }
    Ok(())
}

/// The paths to cover so that `deny` is unreadable except for `allows` inside it.
fn mask_targets(
    host: &dyn HostView,
    deny: &Path,
    allows: &[PathBuf],
    out: &mut Vec<(PathBuf, Kind)>,
) {
    if allows.iter().any(|a| a == deny) {
        return;
    }
    let Some(entry) = host.stat(deny) else {
        return;
    };
    let inner: Vec<&PathBuf> = allows.iter().filter(|a| is_within(a, deny)).collect();
    if inner.is_empty() || entry.kind != Kind::Dir {
        out.push((deny.to_path_buf(), entry.kind));
        return;
    }
    // Split around the exceptions; a directory that cannot be split (it cannot be listed, a
    // child cannot be named by a mount or resolved for any reason but its removal) is masked
    // whole: the exceptions inside it are lost, nothing in it is left readable.
    let whole = || vec![(deny.to_path_buf(), Kind::Dir)];
    let split = || -> Option<Vec<(PathBuf, Kind)>> {
        let mut parts = Vec::new();
        for (name, _) in host.try_list_dir(deny).ok()? {
            let child = deny.join(name);
            if child.as_os_str().len() > MASKABLE {
                return None;
            }
            if inner.iter().any(|a| is_within(a, &child)) {
                mask_targets(host, &child, allows, &mut parts);
            } else if let Some(e) = host
                .canonicalize(&child)
                .and_then(|c| Some((host.stat(&c)?, c)))
            {
                parts.push((e.1, e.0.kind));
            } else if host.lstat_kind(&child).is_some_and(|k| k != Kind::Symlink) {
                // There but unresolvable (a dangling link has nothing to read).
                return None;
            }
        }
        Some(parts)
    };
    out.extend(split().unwrap_or_else(whole));
}

/// The longest path a mount can name: `PATH_MAX` with its terminating NUL.
const MASKABLE: usize = 4095;

/// Where a read-only bind for `path` can land: the path itself, or, since a mount cannot cover
/// a symlink, the symlink's target. `None` if it does not exist (or dangles).
fn mount_target(host: &dyn HostView, path: &Path) -> Option<PathBuf> {
    match host.lstat_kind(path)? {
        Kind::Symlink => host.canonicalize(path),
        _ => Some(path.to_path_buf()),
    }
}

/// For a `.git` that is not a directory (a `gitdir:` file of a worktree or submodule, or a
/// symlink), protect the real git dir's hooks, config and commondir.
fn protect_git_file(
    host: &dyn HostView,
    entry: &Path,
    roots: &[PathBuf],
    protected: &mut BTreeSet<PathBuf>,
    gitdirs: &mut BTreeSet<PathBuf>,
    found: &mut Vec<git::GitDir>,
) {
    let base = entry.parent().unwrap_or(Path::new("/"));
    let gitdir = match host.stat(entry).map(|e| e.kind) {
        // A symlink to the git dir itself.
        Some(Kind::Dir) => match host.canonicalize(entry) {
            Some(d) => d,
            None => return,
        },
        Some(Kind::File) => {
            let Some(text) = host.read_small(entry) else {
                return;
            };
            let Some(target) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) else {
                return;
            };
            policy::normalize_lexically(&base.join(target.trim()))
        }
        _ => return,
    };
    // A regular `.git` file can be bound read-only; a symlink cannot (the sweep watches it).
    if host.lstat_kind(entry) == Some(Kind::File) {
        protected.insert(entry.to_path_buf());
    }
    let mut dirs = vec![gitdir.clone()];
    if let Some(common) = host.read_small(&gitdir.join("commondir")) {
        dirs.push(policy::normalize_lexically(&gitdir.join(common.trim())));
    }
    for d in dirs {
        let Some(d) = host.canonicalize(&d) else {
            continue;
        };
        gitdirs.insert(d.clone());
        found.push(git::GitDir {
            dir: d.clone(),
            top: Some(base.to_path_buf()),
        });
        for name in GIT_DIR_CODE {
            let p = d.join(name);
            let Some(target) = mount_target(host, &p) else {
                continue;
            };
            if roots.iter().any(|w| is_within(&target, w)) {
                protected.insert(target);
            }
        }
    }
}

/// The creation guard's patterns: every `deny_write` pattern it can express, plus the hooks,
/// config and commondir of git dirs that existing `.git` files or symlinks point to; and the
/// `deny_write` globs of other shapes, which only the sweep after the run checks.
fn guard_patterns(
    host: &dyn HostView,
    deny_write: &[PathPattern],
    redirect_gitdirs: &BTreeSet<PathBuf>,
    writable_roots: &[PathBuf],
) -> (Vec<GuardPattern>, Vec<String>) {
    let (mut guard, mut sweep_only) = (Vec::new(), Vec::new());
    let mut resolved_dirs = std::collections::HashMap::new();
    for pat in deny_write {
        match pat {
            PathPattern::Exact(p) => {
                // The guard sees the paths the kernel resolved: through a symbolic link on
                // the way (`~/.config` a link into a dotfiles repository), the path is
                // created where the link leads.
                let resolved = resolved_prefix(host, p, &mut resolved_dirs);
                // A protected exact path that is or holds a writable root (the workspace is
                // `~/.config/nvim`, `--allow-write ~/.local/bin`) was granted by name: as the
                // workspace itself is never kept read-only, it is not refused wholesale.
                if (writable_roots.iter()).any(|w| is_within(w, p) || is_within(w, &resolved)) {
                    continue;
                }
                // Creations are checked below the writable roots only: an exact path outside
                // them (the home's entries, for a project workspace) can never be made there,
                // and would only cost every mediated call a comparison.
                if !(writable_roots.iter()).any(|w| is_within(p, w) || is_within(&resolved, w)) {
                    continue;
                }
                guard.push(GuardPattern {
                    base: p.clone(),
                    tail: Vec::new(),
                });
                if resolved != *p {
                    guard.push(GuardPattern {
                        base: resolved,
                        tail: Vec::new(),
                    });
                }
            }
            PathPattern::Glob(g) => match g.literal_base_and_tail() {
                Some((base, tail)) => guard.push(GuardPattern {
                    base: base.to_path_buf(),
                    tail,
                }),
                None => sweep_only.push(g.pattern().to_string()),
            },
        }
    }
    for d in redirect_gitdirs {
        for name in GIT_DIR_CODE {
            guard.push(GuardPattern {
                base: d.join(name),
                tail: Vec::new(),
            });
        }
    }
    (guard, sweep_only)
}

/// Where the `deny_write` globs' matches land through the symbolic links `links` to
/// directories (each named as a literal component of a glob's tail, [`Matches::dir_links`]):
/// for `**/.cargo/config.toml` and `ws/.cargo -> cargo-dir`, `ws/cargo-dir/config.toml`. Only
/// a link inside a writable root to a directory inside one counts (elsewhere nothing can be
/// created). The rest of the tail after the link's name is appended when it is literal (an
/// exact path), else kept as the pattern's tail below the link's target (`target/**/rest`:
/// more than the glob says, never less).
fn via_dir_links(
    host: &dyn HostView,
    deny_write: &[PathPattern],
    links: &[PathBuf],
    writable_roots: &[PathBuf],
) -> Vec<GuardPattern> {
    let mut out: Vec<GuardPattern> = Vec::new();
    for link in links {
        let Some(name) = link.file_name() else {
            continue;
        };
        if !writable_roots.iter().any(|w| is_within(link, w)) {
            continue;
        }
        let Some(target) = host.canonicalize(link) else {
            continue;
        };
        if host.stat(&target).map(|e| e.kind) != Some(Kind::Dir)
            || !writable_roots.iter().any(|w| is_within(&target, w))
        {
            continue;
        }
        for pat in deny_write {
            let PathPattern::Glob(g) = pat else { continue };
            let Some((base, tail)) = g.literal_base_and_tail() else {
                continue;
            };
            let Ok(rel) = link.strip_prefix(base) else {
                continue;
            };
            let rel: Vec<&[u8]> = rel.iter().map(|c| c.as_encoded_bytes()).collect();
            for (i, t) in tail.iter().enumerate().take(tail.len().saturating_sub(1)) {
                // The link is `tail[i]`, its parents `tail[..i]` (all below `base/**`).
                let Some(start) = (rel.len()).checked_sub(i + 1) else {
                    continue;
                };
                let fits = t.as_bytes() == name.as_encoded_bytes()
                    && (rel.iter().skip(start).zip(&tail[..=i]))
                        .all(|(c, p)| protect::wildcard_match(p.as_bytes(), c));
                if !fits {
                    continue;
                }
                let rest = &tail[i + 1..];
                let g = if rest.iter().all(|c| !c.contains(['*', '?'])) {
                    let p = rest.iter().fold(target.clone(), |p, c| p.join(c));
                    // A writable root granted by name stays writable (as for exact paths).
                    if writable_roots.iter().any(|w| is_within(w, &p)) {
                        continue;
                    }
                    GuardPattern {
                        base: p,
                        tail: Vec::new(),
                    }
                } else {
                    GuardPattern {
                        base: target.clone(),
                        tail: rest.to_vec(),
                    }
                };
                if !out.contains(&g) {
                    out.push(g);
                }
            }
        }
    }
    out
}

/// `path` with its deepest existing ancestor (or itself) resolved through symbolic links, the
/// rest appended as written: where creating `path` would land. Resolved a component at a
/// time, each directory once per scan (`cache`): the catalogues' exact paths share their
/// parents (`~/.config/...`), and a whole `realpath` of each cost every run about 1 ms.
fn resolved_prefix(
    host: &dyn HostView,
    path: &Path,
    cache: &mut std::collections::HashMap<PathBuf, PathBuf>,
) -> PathBuf {
    if let Some(r) = cache.get(path) {
        return r.clone();
    }
    let out = match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            let base = resolved_prefix(host, parent, cache);
            match host.lstat_kind(path) {
                // A link (dangling: its own name is where creating lands, as `realpath`
                // of the parent would say).
                Some(Kind::Symlink) => host.canonicalize(path).unwrap_or_else(|| base.join(name)),
                _ => base.join(name),
            }
        }
        _ => host
            .canonicalize(path)
            .unwrap_or_else(|| path.to_path_buf()),
    };
    cache.insert(path.to_path_buf(), out.clone());
    out
}

/// Read grants that lie below the host's `/tmp` and outside every writable root, outermost
/// only (a grant inside another is reached through it): every backend replaces `/tmp` with a
/// private one, and attaches these in it.
pub fn tmp_read_grants(
    host: &dyn HostView,
    allows: &[PathBuf],
    writable_roots: &[PathBuf],
) -> Vec<(PathBuf, Kind)> {
    let under_tmp: Vec<&PathBuf> = allows
        .iter()
        .filter(|a| is_within(a, Path::new("/tmp")) && *a != Path::new("/tmp"))
        .filter(|a| !writable_roots.iter().any(|w| is_within(a, w)))
        .collect();
    let mut out: Vec<(PathBuf, Kind)> = Vec::new();
    for a in &under_tmp {
        if under_tmp.iter().any(|o| o != a && is_within(a, o)) {
            continue;
        }
        let Some(entry) = host.stat(a) else {
            continue;
        };
        if !out.iter().any(|(p, _)| p == *a) {
            out.push(((*a).clone(), entry.kind));
        }
    }
    out.sort_by(|x, y| x.0.cmp(&y.0));
    out
}

#[cfg(test)]
mod split_tests {
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    use super::{mask_targets, MASKABLE};
    use crate::host::fake::TextFiles;
    use crate::host::{Entry, HostView, Kind};

    /// [`TextFiles`] that lists its directories, refuses to list `closed`, and, like the
    /// kernel, resolves no path longer than [`MASKABLE`].
    struct Splits {
        files: TextFiles,
        closed: PathBuf,
    }

    impl HostView for Splits {
        fn stat(&self, path: &Path) -> Option<Entry> {
            self.lstat_kind(path)?;
            self.files.stat(path)
        }
        fn lstat_kind(&self, path: &Path) -> Option<Kind> {
            (path.as_os_str().len() <= MASKABLE)
                .then(|| self.files.lstat_kind(path))
                .flatten()
        }
        fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
            self.lstat_kind(path).map(|_| path.to_path_buf())
        }
        fn list_dir(&self, path: &Path) -> Vec<(OsString, Kind)> {
            self.try_list_dir(path).unwrap_or_default()
        }
        fn try_list_dir(&self, path: &Path) -> std::io::Result<Vec<(OsString, Kind)>> {
            if path == self.closed {
                return Err(std::io::Error::from_raw_os_error(libc::EACCES));
            }
            let mut names: Vec<(OsString, Kind)> = (self.files.0.keys())
                .filter_map(|p| p.strip_prefix(path).ok()?.iter().next())
                .map(|n| {
                    let kind = self.files.lstat_kind(&path.join(n)).unwrap_or(Kind::File);
                    (n.to_os_string(), kind)
                })
                .collect();
            names.dedup();
            Ok(names)
        }
        fn read_small(&self, path: &Path) -> Option<String> {
            self.files.read_small(path)
        }
    }

    /// A denied directory with a read exception inside is split around it, unless it cannot
    /// be listed or holds a child a mount cannot name: then it is masked whole (the exception
    /// is lost). Control: a listable one with short children is split (the exception kept).
    #[test]
    fn a_dir_that_cannot_be_split_is_masked_whole() {
        let long = "x".repeat(250);
        let mut deep = PathBuf::from("/ws/D");
        while deep.as_os_str().len() + 251 <= MASKABLE {
            deep.push(&long);
        }
        let files = ["/ws/C/.env", "/ws/C/pub/x", "/ws/O/.env", "/ws/O/pub/x"]
            .map(|p| (PathBuf::from(p), String::new()))
            .into_iter()
            .chain([
                (deep.join("pub/x"), String::new()),
                (deep.join(&long).join(".env"), String::new()),
            ]);
        let host = Splits {
            files: TextFiles::new(files),
            closed: PathBuf::from("/ws/C"),
        };
        let masks = |deny: &Path, allow: PathBuf| {
            let mut out = Vec::new();
            mask_targets(&host, deny, &[allow], &mut out);
            out
        };
        let c = Path::new("/ws/C");
        assert_eq!(masks(c, c.join("pub")), vec![(c.to_path_buf(), Kind::Dir)]);
        assert_eq!(
            masks(&deep, deep.join("pub")),
            vec![(deep.clone(), Kind::Dir)]
        );
        let o = Path::new("/ws/O");
        assert_eq!(masks(o, o.join("pub")), vec![(o.join(".env"), Kind::File)]);
    }
}

#[cfg(test)]
mod moved_tests {
    //! A match the walk found that moves before the scan masks it (another run's command
    //! exchanging two directories right after the walk's re-check, red team issue 32c).
    use std::path::{Path, PathBuf};

    use super::{Place, Scan, SCAN_ATTEMPTS};
    use crate::host::fake::Swapping;
    use crate::host::HostView;
    use crate::walk::recheck_tests::collect_dotenv;
    use crate::ScanError;

    const WS: &str = "/ws";

    fn host() -> Swapping {
        Swapping::new(&["/ws/B", "/ws/src"], &["/ws/A/.env", "/ws/src/main.rs"], 1)
    }

    /// Each time `A/.env` (or `B/.env`) is resolved, `A` and `B` are exchanged first, up to
    /// `times` times each.
    fn exchange_on_resolve(host: &Swapping, times: usize) {
        for at in ["/ws/A/.env", "/ws/B/.env"] {
            host.on_resolve.borrow_mut().push((
                PathBuf::from(at),
                PathBuf::from("/ws/A"),
                PathBuf::from("/ws/B"),
                times,
            ));
        }
    }

    fn scan(host: &Swapping) -> Result<Scan, ScanError> {
        let mut policy = policy::profile::profile("read-only").unwrap();
        policy.filesystem.allow_write = vec![WS.into()];
        policy.filesystem.deny_read = vec!["**/.env".into()];
        let place = Place {
            workspace: WS.into(),
            uid: 0,
            home: "/home/u".into(),
            xdg_config_home: None,
            path_dirs: Vec::new(),
        };
        Scan::new(&policy, &place, host)
    }

    fn secret(host: &Swapping) -> PathBuf {
        ["/ws/A/.env", "/ws/B/.env"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| host.lstat_kind(p).is_some())
            .unwrap()
    }

    /// Moved once after the walk: the scan starts again and masks it where it went.
    #[test]
    fn a_secret_moved_after_the_walk_is_masked_where_it_went() {
        let host = host();
        exchange_on_resolve(&host, 1);
        let scan = scan(&host).unwrap();
        let secret = secret(&host);
        assert!(
            scan.masks.iter().any(|(p, _)| *p == secret),
            "{secret:?} not in {:?}",
            scan.masks
        );
        // The mount checks the path still holds the file the walk saw.
        let id = host.stat(&secret).map(|e| (e.dev, e.ino)).unwrap();
        assert_eq!(scan.identities.get(&secret), Some(&id));
        // Nothing stale: the first attempt's path is not masked.
        assert_eq!(
            scan.masks
                .iter()
                .filter(|(p, _)| p.ends_with(".env"))
                .count(),
            1
        );
    }

    /// Moved every time: refused with the typed error, after [`SCAN_ATTEMPTS`] scans.
    #[test]
    fn a_secret_that_keeps_moving_refuses_the_run() {
        let host = host();
        exchange_on_resolve(&host, 100);
        match scan(&host) {
            Err(ScanError::WorkspaceChanged { dir, rewalks }) => {
                assert_eq!(rewalks, SCAN_ATTEMPTS);
                assert!(
                    dir == Path::new("/ws/A") || dir == Path::new("/ws/B"),
                    "{dir:?}"
                );
            }
            other => panic!("expected WorkspaceChanged, got {other:?}"),
        }
    }

    /// Control: the attack is real. The walk's matches name `A/.env`; after the exchange that
    /// path resolves to nothing and the secret is at `B/.env`, which no match names: dropping
    /// the match that no longer resolves (as the scan did) leaves it unmasked.
    #[test]
    fn control_the_moved_match_no_longer_names_the_secret() {
        let host = host();
        let m = collect_dotenv(&host, true).0.unwrap();
        assert_eq!(m.deny_read, vec![PathBuf::from("/ws/A/.env")]);
        host.exchange(Path::new("/ws/A"), Path::new("/ws/B"));
        assert_eq!(host.canonicalize(Path::new("/ws/A/.env")), None);
        assert!(host.lstat_kind(Path::new("/ws/B/.env")).is_some());
        assert!(!m.deny_read.contains(&PathBuf::from("/ws/B/.env")));
    }
}
