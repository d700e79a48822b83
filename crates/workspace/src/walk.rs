//! The walk of the writable roots (and the deny globs' bases) that finds what the scan and the
//! sweep look for, and the directory stamps that let the sweep list again only what changed.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use policy::{is_within, PathPattern};

use crate::host::{DirHandle, DirStamp, HostView, Kind};
use crate::scan::depth;
use crate::ScanError;

/// How long before the planner's walk a directory's ctime must lie for its stamp to be
/// trusted. A change during the run then gives a later ctime even on a filesystem that keeps
/// whole seconds (ext3) or a coarse clock; a directory changed more recently is listed again.
pub const SETTLED: std::time::Duration = std::time::Duration::from_secs(3);

/// A directory the planner listed whose ctime had settled: its subdirectories (those the walk
/// goes into), so an unchanged directory is passed through without listing it, and the
/// entries it handed to the walk's visitor (those that may concern it), so that a later run's
/// planner can visit them again without listing it ([`crate::walk_cache`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettledDir {
    pub stamp: DirStamp,
    pub subdirs: Vec<OsString>,
    pub found: Vec<(OsString, Kind)>,
}

/// The settled directories an earlier run's planner recorded, and when its walk began
/// ([`crate::walk_cache`]): each is taken instead of a listing when its stamp is the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prior {
    pub taken_at: std::time::SystemTime,
    /// Keyed by the path's bytes (see [`DirStamps::dirs`]).
    pub dirs: std::collections::HashMap<OsString, SettledDir>,
}

/// How many times at least the planner walks again what changed during its walk before it
/// refuses the run (`ScanError::WorkspaceChanged`): see [`DirStamps::changed`]. It goes on
/// past that while [`REWALK_BUDGET`] lasts.
pub const REWALKS: usize = 5;

/// How long the planner goes on walking again what changed (from the end of its first walk)
/// before it refuses the run, once it has walked again [`REWALKS`] times: a build writing in
/// a few big directories beside the run (cargo's `target/debug/deps`) changes one of them in
/// most rounds for a while, then a round lands between two changes.
pub const REWALK_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// The pause before a walk again grows by this much each round (lets a burst of changes pass),
/// up to [`BACKOFF_MAX`].
const BACKOFF_STEP: std::time::Duration = std::time::Duration::from_millis(2);
const BACKOFF_MAX: std::time::Duration = std::time::Duration::from_millis(20);

/// How long before a listing began a directory's ctime must lie for an equal stamp to prove,
/// on every kernel, that nothing changed in it since: a change in the same tick of the coarse
/// clock that stamped it (a jiffy: 10 ms at the lowest `HZ`) can be given the same ctime.
/// Generous: a recent directory is only listed again.
const GRAIN: std::time::Duration = std::time::Duration::from_millis(50);
/// [`GRAIN`] on a filesystem that keeps whole seconds (a ctime with no nanoseconds: ext4 with
/// 128-byte inodes).
const GRAIN_SECONDS: std::time::Duration = std::time::Duration::from_secs(2);

/// A directory the planner's walk looked at (listed, or took from the walk cache), in the order
/// the walk went: what [`DirStamps::recheck`] looks at again once the walk is over.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    path: PathBuf,
    /// Its parent's index in [`DirStamps::seen`], when the walk came to it from there (a
    /// parent always comes first).
    parent: Option<usize>,
    /// Its stamp, taken before it was listed (or when it was taken from the cache); `None`
    /// only from a host that gives none (a fake host).
    stamp: Option<DirStamp>,
    /// When the walk that took the stamp began (a round's start).
    since: std::time::SystemTime,
    /// Whether the walk went into subdirectories of it (a handle of it is worth opening).
    subdirs: bool,
    /// Whether the walk visited entries of it by path (matches, git's files): taken from the
    /// walk cache, such a directory and those above it are re-checked even when nothing was
    /// listed (see `Matches::collect`).
    visited: bool,
    /// Its whole listing (every name and kind), kept when it was listed by a walk again, for
    /// [`DirStamps::refresh`] in this round and the next ones.
    listing: Option<Vec<(OsString, Kind)>>,
}

/// The settled directories of the planner's walk, and when it began.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirStamps {
    pub taken_at: Option<std::time::SystemTime>,
    /// [`SETTLED`], but for tests.
    settle: std::time::Duration,
    /// A hash map: thousands of paths, and comparing paths (component by component) is what
    /// a tree would do on every insert. Keyed by the path's bytes, not a `PathBuf`: `Path`'s
    /// hash and equality parse components, which was the walk cache's largest cost per
    /// directory (issue 32). Every key is built the same way (a walk's root joined with
    /// names); a path spelled otherwise only misses, and a miss is a listing.
    pub dirs: std::collections::HashMap<OsString, SettledDir>,
    /// Per device: whether its filesystem sets ctime locally ([`HostView::local_ctime`]).
    local: BTreeMap<u64, bool>,
    /// How many directories the planner's walk took from the walk cache (stamp unchanged
    /// since an earlier run listed them), and how many it listed.
    pub from_cache: usize,
    pub listed: usize,
    /// How many of the listed directories were recorded (settled): what a cache lacks.
    pub recorded_listed: usize,
    /// The walk cache's key for this walk ([`crate::walk_cache`]); `None`: no cache asked.
    pub key: Option<[u8; 32]>,
    /// Whether the cache had listings under that key.
    pub had_prior: bool,
    /// The earlier run's listings, consumed by the walk.
    prior: Option<Prior>,
    /// Every directory this walk listed or took from the cache, in walk order, for the
    /// re-check ([`DirStamps::recheck`]).
    seen: Vec<Seen>,
    /// The listings of this walk's directories that are not settled (not in `dirs`): a walk
    /// again after a change takes them instead of listing them again when unchanged.
    others: std::collections::HashMap<OsString, SettledDir>,
    /// When the current round of the walk began (`taken_at` for the first).
    round_start: Option<std::time::SystemTime>,
    /// Per device: whether a change after a `stat` always gets a later ctime
    /// ([`HostView::fine_ctime`]).
    fine: BTreeMap<u64, bool>,
    /// How many times the walk went again over what changed during it (0: nothing did).
    pub rewalks: usize,
    /// Whether the walk is re-checked at all: only the unit tests' controls turn it off.
    pub(crate) recheck: bool,
    /// Where in `seen` the directories of the latest walk again begin (re-checked first).
    fresh_from: usize,
    /// Entries of a git dir's own files that may concern the walk ([`in_git_internals`]),
    /// for its caller to look at for secrets only, as each walk ends.
    pub(crate) in_git: Vec<(PathBuf, Kind)>,
}

impl DirStamps {
    /// Start recording (the clock is read before anything is listed).
    pub fn start() -> DirStamps {
        DirStamps::start_settled(SETTLED)
    }

    pub fn start_settled(settle: std::time::Duration) -> DirStamps {
        DirStamps {
            taken_at: Some(std::time::SystemTime::now()),
            settle,
            dirs: std::collections::HashMap::new(),
            local: BTreeMap::new(),
            from_cache: 0,
            listed: 0,
            recorded_listed: 0,
            key: None,
            had_prior: false,
            prior: None,
            seen: Vec::new(),
            others: std::collections::HashMap::new(),
            round_start: None,
            fine: BTreeMap::new(),
            rewalks: 0,
            recheck: true,
            fresh_from: 0,
            in_git: Vec::new(),
        }
    }

    /// Notes that the walk listed `dir` (or took it from a prior) with `stamp`, reached from
    /// its parent `parent` (an index in `seen`): its index.
    fn saw(
        &mut self,
        dir: &Path,
        parent: Option<usize>,
        stamp: Option<DirStamp>,
        subdirs: bool,
    ) -> usize {
        let since = (self.round_start.or(self.taken_at)).unwrap_or(std::time::UNIX_EPOCH);
        self.seen.push(Seen {
            path: dir.to_path_buf(),
            parent,
            stamp,
            since,
            subdirs,
            visited: false,
            listing: None,
        });
        self.seen.len() - 1
    }

    /// The directories the walk visited entries of ([`Seen::visited`]) and every one above
    /// them on the walk's way (their parents' chain in `seen`): what a walk taken whole from
    /// the walk cache re-checks.
    fn visited_and_above(&self) -> Vec<bool> {
        let mut mark = vec![false; self.seen.len()];
        for (i, s) in self.seen.iter().enumerate() {
            if !s.visited {
                continue;
            }
            let mut at = Some(i);
            while let Some(j) = at {
                match mark.get_mut(j) {
                    Some(m) if !*m => *m = true,
                    _ => break,
                }
                at = self.seen.get(j).and_then(|s| s.parent);
            }
        }
        mark
    }

    /// After a walk again, just before the re-check: each directory it listed is read again
    /// at once, stamp first (names and kinds only, nothing visited), and when it holds exactly
    /// the same entries in the same order its stamp becomes the new one. Its content is then
    /// proved to be the one the walk visited from this read to the re-check: the window in
    /// which a busy directory must not change is the time to read the changed directories
    /// again, back to back, not the time the walk took to look at their entries (about 8 µs
    /// an entry in a debug build: 25 ms for a `target/debug/deps` of 3000). The argument is
    /// the re-check's ([`DirStamps::changed`]): every stamp (this one) taken before every
    /// re-check, each equal at its re-check, gives one instant at which each directory held
    /// what the walk visited; the whole listing is compared, not what concerns the walk (a
    /// secret moved in and out would be missed by equal views). One that differs keeps its
    /// first stamp: it changed, and the re-check lists it again.
    ///
    /// Every directory listed by an earlier walk again is read again too, in every round (the
    /// re-check's order: the latest first): a busy directory kept from an earlier round would
    /// otherwise have to hold from that round to the last re-check.
    fn refresh(&mut self, host: &dyn HostView) {
        let n = self.seen.len();
        let fresh = self.fresh_from.min(n);
        for i in (fresh..n).chain(0..fresh) {
            let Some(s) = self.seen.get_mut(i) else {
                continue;
            };
            let Some(old) = s.listing.as_ref() else {
                continue;
            };
            let since = std::time::SystemTime::now();
            if let (Some(stamp), entries) = host.list_dir_stamped(&s.path) {
                if &entries == old {
                    s.stamp = Some(stamp);
                    s.since = since;
                }
            }
        }
    }

    /// Whether a change after a `stat` of a directory on device `dev` (holding `dir`) always
    /// gets a later ctime ([`HostView::fine_ctime`]).
    fn is_fine(&mut self, host: &dyn HostView, dev: u64, dir: &Path) -> bool {
        *self.fine.entry(dev).or_insert_with(|| host.fine_ctime(dir))
    }

    /// The re-check, once the walk is over: every directory the walk listed or took from the
    /// cache is stat'ed again (by name in its parent's handle, as the walk does). Returns the
    /// directories whose stamp changed (top-most: those below them are walked again with
    /// them), and which of `seen` lie in or below one of them.
    ///
    /// Why this is enough (issue 32): each directory's stamp was taken before it was listed.
    /// Its entries change only by a create, remove, link or rename in it, and each of those
    /// moves its ctime; nothing without `CAP_SYS_TIME` sets a ctime back; a directory put in
    /// its place has another device or inode. So a stamp found the same again proves its
    /// listing held from the listing to the re-check. Every listing ended before the first
    /// re-check began: if every stamp is the same, there is one instant (between the two)
    /// at which every listing held at once, and the walk saw the tree exactly as it was
    /// then. A directory exchanged with another (`RENAME_EXCHANGE`) between two listings
    /// (the walk lists `P`, the exchange, it lists `S`, now the old `P`: it never sees what
    /// the old `S` held) moved the ctimes of both parents (and `S` is another inode at that
    /// name now): it is walked again. A secret present all along was somewhere in the tree at
    /// that instant, so it was found.
    ///
    /// What it relies on, besides the kernel's ctimes: a change in the same tick of the
    /// coarse clock as the stamp may get the same ctime. An equal stamp is trusted when its
    /// ctime lies at least [`GRAIN`] before its walk began ([`GRAIN_SECONDS`] when the
    /// filesystem keeps whole seconds), or on a filesystem whose ctimes are multigrain
    /// ([`HostView::fine_ctime`]: Linux >= 6.13; the `stat` that took the stamp makes the
    /// next change take a fine-grained, later ctime, and no later coarse ctime falls behind
    /// it). Any other recent directory is listed again, and a directory that keeps changing
    /// refuses the run after [`REWALKS`] walks again and [`REWALK_BUDGET`].
    ///
    /// Only what is not proven is listed again: a directory that changed lately but whose
    /// stamp is equal and proven (multigrain, or settled) keeps its listing. Each round after
    /// the first lists only the changed directories and then re-checks those first, back to
    /// back, so the window in which a busy directory must not change is the time to list the
    /// changed ones, not a whole walk: a build churning in a few big directories converges.
    /// Equal views of a directory listed again (the same concerning names) prove nothing and
    /// are not used: a secret moved from `A` to `B` after `A`'s listing and back before `B`'s
    /// re-check is in no listing though both views are equal; only equal stamps over
    /// [listing, re-check], every listing before every re-check, give one instant.
    fn changed(&mut self, host: &dyn HostView, only: Option<&[bool]>) -> (Vec<usize>, Vec<bool>) {
        let n = self.seen.len();
        // Each one's stamp now (`Some(same)`), or `None` when not looked at (below a
        // directory already found changed, or the clock went back since the walk began: a
        // ctime compared across a clock step proves nothing).
        let mut same: Vec<Option<bool>> = vec![None; n];
        let clock_ok = (self.taken_at).is_some_and(|t| std::time::SystemTime::now() >= t);
        if clock_ok {
            // What the latest walk again listed first: it is the most likely to change again.
            let fresh = self.fresh_from.min(n);
            for range in [fresh..n, 0..fresh] {
                let mut chain: Vec<(usize, DirHandle)> = Vec::new();
                for i in range.clone() {
                    let Some(s) = self.seen.get(i) else { continue };
                    if s.parent.is_some_and(|p| same.get(p) == Some(&Some(false))) {
                        continue;
                    }
                    // Not asked for (`only`): its stamp stands as the walk took it.
                    if only.is_some_and(|o| !o.get(i).copied().unwrap_or(true)) {
                        same[i] = Some(true);
                        continue;
                    }
                    // The handles held are those of its parent's chain (in walk order, a
                    // directory's ancestors come first and its parent last).
                    while chain
                        .last()
                        .is_some_and(|(j, _)| s.parent.is_none_or(|p| *j > p))
                    {
                        chain.pop();
                    }
                    let parent = (chain.last())
                        .filter(|(j, _)| Some(*j) == s.parent)
                        .map(|(_, h)| h);
                    let open = s.subdirs && chain.len() < HELD;
                    let (now, handle) = host.dir_stamp_at(parent, &s.path, open);
                    let unchanged = now == s.stamp;
                    same[i] = Some(unchanged);
                    if let (true, Some(h)) = (unchanged, handle) {
                        chain.push((i, h));
                    }
                }
            }
        }
        // Whether each one's listing is proved to hold still (below a changed one or not).
        let mut holds = vec![false; n];
        for (i, held) in holds.iter_mut().enumerate() {
            let Some(s) = self.seen.get(i) else { continue };
            let (stamp, since, path) = (s.stamp, s.since, s.path.clone());
            *held = same[i] == Some(true)
                && stamp
                    .is_none_or(|st| settled_for(&st, since) || self.is_fine(host, st.dev, &path));
        }
        let mut stale = vec![false; n];
        let mut tops = Vec::new();
        for i in 0..n {
            let Some(s) = self.seen.get(i) else { continue };
            if s.parent.is_some_and(|p| stale.get(p) == Some(&true)) {
                stale[i] = true;
            } else if !holds[i] {
                stale[i] = true;
                tops.push(i);
            }
        }
        (tops, stale)
    }

    /// How long to wait before walking the `stale` directories again so that one that does
    /// not change again is settled when it is listed ([`settled_for`]): an equal stamp too
    /// recent to prove anything (a ctime within [`GRAIN`] of the walk's start, on a kernel
    /// without multigrain ctimes) proves something once that time has passed. At most
    /// [`GRAIN_SECONDS`]; zero when nothing recent is among them.
    fn settle_wait(&mut self, host: &dyn HostView, stale: &[bool]) -> std::time::Duration {
        let now = std::time::SystemTime::now();
        let recent: Vec<(DirStamp, PathBuf)> = (self.seen.iter())
            .zip(stale)
            .filter(|(_, stale)| **stale)
            .filter_map(|(s, _)| Some((s.stamp?, s.path.clone())))
            .collect();
        (recent.into_iter())
            .filter(|(st, path)| !self.is_fine(host, st.dev, path))
            .filter_map(|(st, _)| {
                let grain = if st.ctime_nsec == 0 {
                    GRAIN_SECONDS
                } else {
                    GRAIN
                };
                (changed_at(&st) + grain).duration_since(now).ok()
            })
            .max()
            .unwrap_or_default()
            .min(GRAIN_SECONDS)
    }

    /// Readies a walk again of `tops` and what lies below them ([`DirStamps::changed`]): the
    /// listings of the directories below them whose ctime lay well before their listing
    /// ([`settled_for`]) become the walk's prior (taken again when their stamp is the same),
    /// the rest is dropped from the record; each top is returned with its parent's new index.
    fn rewalk(&mut self, tops: &[usize], stale: &[bool]) -> Vec<(PathBuf, Option<usize>)> {
        let now = std::time::SystemTime::now();
        let mut prior = std::collections::HashMap::new();
        let mut index: Vec<Option<usize>> = vec![None; self.seen.len()];
        let mut kept: Vec<Seen> = Vec::with_capacity(self.seen.len());
        let mut roots = Vec::new();
        let mut is_top = vec![false; self.seen.len()];
        for &t in tops {
            if let Some(x) = is_top.get_mut(t) {
                *x = true;
            }
        }
        for (i, s) in std::mem::take(&mut self.seen).into_iter().enumerate() {
            if !stale.get(i).copied().unwrap_or(true) {
                index[i] = Some(kept.len());
                let parent = s.parent.and_then(|p| index.get(p).copied().flatten());
                kept.push(Seen { parent, ..s });
                continue;
            }
            let key = s.path.as_os_str();
            let rec = (self.dirs.remove(key)).or_else(|| self.others.remove(key));
            if is_top.get(i).copied().unwrap_or(false) {
                let parent = s.parent.and_then(|p| index.get(p).copied().flatten());
                roots.push((s.path, parent));
            } else if let (Some(rec), Some(stamp)) = (rec, s.stamp) {
                if rec.stamp == stamp && settled_for(&stamp, s.since) {
                    prior.insert(s.path.into_os_string(), rec);
                }
            }
        }
        self.fresh_from = kept.len();
        self.seen = kept;
        self.prior = Some(Prior {
            taken_at: now,
            dirs: prior,
        });
        self.round_start = Some(now);
        self.rewalks += 1;
        roots
    }

    /// The first directory on the way to `paths` that changed since the walk, or `None`: their
    /// ancestors strictly below the writable roots `roots` that the walk looked at (their
    /// stamps held at its last re-check), but the git dirs themselves (`.git`, and those in
    /// `git_dirs`; what lies in them is asked: an exchange of `.git/modules/a` and `b` moves
    /// `.git/modules`, red team 32d third pass). What the scan read after
    /// the walk (a git dir's config and the paths it names, where each match resolves) is what
    /// the walk saw only if nothing on the way was renamed in between: a rename moves the
    /// ctime of the directory renamed (and of the one it left), an exchange there and back
    /// twice, never back (red team issue 32d, 01 and 03). Not the roots themselves, nor the
    /// paths, nor git dirs: their entries change all the time (files made in the workspace,
    /// `git add` renaming `.git/index`: every run was refused beside either, red team 32d
    /// second pass), and what is renamed below them moves its own ctime. One `lstat` per
    /// directory on the way, each once.
    pub(crate) fn moved_since<'a>(
        &self,
        host: &dyn HostView,
        roots: &[PathBuf],
        git_dirs: &[&Path],
        paths: impl IntoIterator<Item = &'a Path>,
    ) -> Option<PathBuf> {
        let stamps: std::collections::HashMap<&std::ffi::OsStr, &DirStamp> = (self.seen.iter())
            .filter_map(|s| Some((s.path.as_os_str(), s.stamp.as_ref()?)))
            .collect();
        let mut checked: std::collections::HashSet<&Path> = std::collections::HashSet::new();
        for p in paths {
            for dir in p.ancestors().skip(1) {
                if !roots.iter().any(|r| dir != r && is_within(dir, r)) {
                    break;
                }
                if dir.file_name().is_some_and(|n| n == ".git") || git_dirs.contains(&dir) {
                    continue;
                }
                let Some(stamp) = stamps.get(dir.as_os_str()) else {
                    continue;
                };
                // Checked, and so was everything above it.
                if !checked.insert(dir) {
                    break;
                }
                if host.dir_stamp(dir).as_ref() != Some(*stamp) {
                    return Some(dir.to_path_buf());
                }
            }
        }
        None
    }

    /// Whether the filesystem of device `dev` (holding `dir`) sets ctimes locally.
    fn is_local(&mut self, host: &dyn HostView, dev: u64, dir: &Path) -> bool {
        *self
            .local
            .entry(dev)
            .or_insert_with(|| host.local_ctime(dir))
    }

    /// Takes the earlier run's listings (see [`crate::walk_cache`]) unless the clock has gone
    /// back since that walk began (a ctime compared across a clock step proves nothing).
    fn set_prior(&mut self, prior: Prior) {
        self.had_prior = true;
        if self.taken_at.is_some_and(|now| now >= prior.taken_at) {
            self.dirs.reserve(prior.dirs.len());
            self.prior = Some(prior);
        }
    }

    /// The earlier run's record of `dir`, if its stamp is the same now, on a filesystem that
    /// sets ctimes locally: its entries are those it had then. Only a remembered directory is
    /// stat'ed (not followed: a link or a non-directory in its place is listed, and fails),
    /// by name in `parent` when the walk holds its parent's handle
    /// ([`HostView::dir_stamp_at`]); with `open`, one that has subdirectories is opened and
    /// its handle returned with it.
    fn reuse(
        &mut self,
        host: &dyn HostView,
        parent: Option<&DirHandle>,
        dir: &Path,
        open: bool,
    ) -> Option<(SettledDir, Option<DirHandle>)> {
        let prior = self.prior.as_mut()?;
        let rec = prior.dirs.remove(dir.as_os_str())?;
        let (now, handle) = host.dir_stamp_at(parent, dir, open && !rec.subdirs.is_empty());
        let now = now?;
        (now == rec.stamp && self.is_local(host, now.dev, dir)).then_some((rec, handle))
    }

    fn record(
        &mut self,
        host: &dyn HostView,
        dir: PathBuf,
        stamp: DirStamp,
        subdirs: Vec<OsString>,
        found: Vec<(OsString, Kind)>,
    ) {
        let local = self.is_local(host, stamp.dev, &dir);
        let Some(settled_before) = self.taken_at.and_then(|t| t.checked_sub(self.settle)) else {
            return;
        };
        let changed = changed_at(&stamp);
        let rec = SettledDir {
            stamp,
            subdirs,
            found,
        };
        if local && changed < settled_before {
            self.recorded_listed += 1;
            self.dirs.insert(dir.into_os_string(), rec);
        } else if local {
            self.others.insert(dir.into_os_string(), rec);
        }
    }

    /// Keeps the listing of `dir` that the walk took unchanged from a prior: with the settled
    /// ones when it is settled for this walk, else with the others.
    fn keep(&mut self, dir: OsString, rec: SettledDir) {
        let settled = self
            .settled_before()
            .is_some_and(|before| changed_at(&rec.stamp) < before);
        if settled {
            self.dirs.insert(dir, rec);
        } else {
            self.others.insert(dir, rec);
        }
    }

    /// Before when a directory's ctime must lie to prove it unchanged since the walk began:
    /// the walk's start less the settling window (a coarse clock's lag, a filesystem's
    /// timestamp granularity). `None` when nothing was recorded.
    pub fn settled_before(&self) -> Option<std::time::SystemTime> {
        self.taken_at.and_then(|t| t.checked_sub(self.settle))
    }

    /// The record of `dir` if its stamp is the same now, and the clock has not gone back since
    /// the walk (a ctime compared across a clock step proves nothing). Only a recorded
    /// directory is stat'ed, by name in `parent` when the walk holds its parent's handle; with
    /// `open`, one that has subdirectories is opened and its handle returned with it (see
    /// [`DirStamps::reuse`]).
    fn unchanged(
        &self,
        host: &dyn HostView,
        parent: Option<&DirHandle>,
        dir: &Path,
        open: bool,
    ) -> Option<(&SettledDir, Option<DirHandle>)> {
        let rec = self.dirs.get(dir.as_os_str())?;
        let clock_ok = self
            .taken_at
            .is_some_and(|t| std::time::SystemTime::now() >= t);
        if !clock_ok {
            return None;
        }
        let (now, handle) = host.dir_stamp_at(parent, dir, open && !rec.subdirs.is_empty());
        (now == Some(rec.stamp)).then_some((rec, handle))
    }
}

/// When a directory last changed, by its stamp.
fn changed_at(stamp: &DirStamp) -> std::time::SystemTime {
    std::time::UNIX_EPOCH
        + std::time::Duration::new(
            u64::try_from(stamp.ctime).unwrap_or(u64::MAX / 2),
            u32::try_from(stamp.ctime_nsec).unwrap_or(0),
        )
}

/// Whether `stamp`, taken by a walk that began at `since`, lies far enough before it that any
/// change after the stamp was read has a later ctime, whatever the kernel ([`GRAIN`]).
fn settled_for(stamp: &DirStamp, since: std::time::SystemTime) -> bool {
    let grain = if stamp.ctime_nsec == 0 {
        GRAIN_SECONDS
    } else {
        GRAIN
    };
    since
        .checked_sub(grain)
        .is_some_and(|before| changed_at(stamp) < before)
}

/// What [`walk`] does with directory stamps.
pub enum Stamps<'a> {
    /// List every directory and record the settled ones (the planner).
    Record(&'a mut DirStamps),
    /// Pass through the recorded directories whose stamp is unchanged (the sweep).
    SkipUnchanged(&'a DirStamps),
}

/// Existing paths that match deny patterns, found by stat (exact) and by walking (globs).
/// The deny globs of a policy, compiled once: the planner's walk and the sweep's both use it.
#[derive(Debug, Clone)]
pub struct DenyGlobs {
    set: policy::GlobList,
    /// Per glob: from `deny_read` (true) or `deny_write` (false).
    read: Vec<bool>,
    /// The literal components of the `deny_write` globs' tails but the last (`.cargo` of
    /// `**/.cargo/config.toml`): a symbolic link of that name to a directory makes a match
    /// land where no glob names it (`.cargo -> cargo-dir`), so the walk records such links.
    link_names: Vec<std::ffi::OsString>,
    /// Where protected paths land through those links (`cargo-dir/config.toml`), as the
    /// creation guard matches them (`base/**/tail`, or `base` and below): the scan sets them,
    /// and the sweep treats a match as protected.
    pub(crate) via_links: Vec<(PathBuf, Vec<String>)>,
}

impl DenyGlobs {
    fn new<'a>(
        read: impl IntoIterator<Item = &'a policy::Glob>,
        write: impl IntoIterator<Item = &'a policy::Glob>,
    ) -> Result<DenyGlobs, ScanError> {
        let globs: Vec<(&policy::Glob, bool)> = read
            .into_iter()
            .map(|g| (g, true))
            .chain(write.into_iter().map(|g| (g, false)))
            .collect();
        let mut link_names: Vec<std::ffi::OsString> = Vec::new();
        for (g, _) in globs.iter().filter(|(_, r)| !*r) {
            let Some((_, tail)) = g.literal_base_and_tail() else {
                continue;
            };
            for c in tail.iter().rev().skip(1) {
                let name = std::ffi::OsString::from(c);
                if !c.contains(['*', '?']) && !link_names.contains(&name) {
                    link_names.push(name);
                }
            }
        }
        Ok(DenyGlobs {
            set: policy::GlobList::new(globs.iter().map(|(g, _)| *g))?,
            read: globs.iter().map(|(_, r)| *r).collect(),
            link_names,
            via_links: Vec::new(),
        })
    }

    /// Whether `name` is one of [`DenyGlobs::link_names`].
    fn is_link_name(&self, name: &std::ffi::OsStr) -> bool {
        self.link_names.iter().any(|n| n == name)
    }

    /// Whether `path` matches a `deny_read` glob, and whether it matches a `deny_write` one.
    fn matches(&self, path: &Path) -> (bool, bool) {
        self.set
            .matches(path)
            .into_iter()
            .fold((false, false), |(r, w), i| {
                let is_read = self.read.get(i).copied().unwrap_or(false);
                (r || is_read, w || !is_read)
            })
    }

    /// Whether an entry named `name` can be anything the walks look for (a glob's match, or
    /// a name [`is_submodule_code_path`] or [`is_git_redirect`] looks at): the others are
    /// passed over without building their paths.
    pub(crate) fn may_concern(&self, name: &std::ffi::OsStr) -> bool {
        self.set.may_match_name(name)
            || self.is_link_name(name)
            || name == ".git"
            || name == "hooks"
            || name == "config"
            || name == "config.worktree"
            || name == "commondir"
    }

    /// A path whose appearance the sweep must handle: a protected glob's match, code of a
    /// submodule's git dir, or a `.git` that redirects git elsewhere.
    pub(crate) fn is_protected(&self, path: &Path, kind: Kind) -> bool {
        self.matches(path).1
            || is_submodule_code_path(path)
            || is_git_redirect(path, kind)
            || (self.via_links.iter()).any(|(base, tail)| guard_matches(base, tail, path))
    }
}

/// Whether the creation guard's pattern `base`/`tail` matches `path`: `base/**/tail[0]/..`
/// (`*` and `?` within a component), or `base` and everything below it for an empty tail.
pub(crate) fn guard_matches(base: &Path, tail: &[String], path: &Path) -> bool {
    let tail: Vec<&[u8]> = tail.iter().map(|t| t.as_bytes()).collect();
    let pattern = protect::Protected {
        base: base.as_os_str().as_encoded_bytes(),
        tail: &tail,
    };
    protect::pattern_matches(&pattern, path.as_os_str().as_encoded_bytes())
}

#[derive(Debug)]
pub(crate) struct Matches {
    pub(crate) deny_read: Vec<PathBuf>,
    pub(crate) deny_write: Vec<PathBuf>,
    pub(crate) git_files: Vec<PathBuf>,
    /// `.git` directories and submodule git dirs found in the walk.
    pub(crate) git_dirs: Vec<PathBuf>,
    /// Directories git accepts as git dirs that hold a config, hooks or a commondir.
    pub(crate) accepted_git_dirs: Vec<PathBuf>,
    /// Directories the planner could not list that a command could enter (masked whole).
    pub(crate) unlisted: Vec<PathBuf>,
    /// Symbolic links named as a `deny_write` glob's directory ([`DenyGlobs::link_names`]).
    pub(crate) dir_links: Vec<PathBuf>,
    /// The device and inode of every `deny_read` and `deny_write` match the walk found (what
    /// it leads to, through a link), stat'ed when the walk came to it: the re-check proves its
    /// directory held that file under that name from the listing until the walk was over. The
    /// scan masks and protects that file or refuses: a match that no longer resolves, or is
    /// another file, was moved since (a directory exchanged after the walk, red team issue
    /// 32c) and is never dropped in silence. A dangling link has none (nothing to read).
    pub(crate) seen_as: BTreeMap<PathBuf, (u64, u64)>,
    pub(crate) globs: DenyGlobs,
}

/// The identity [`Walked::visit`] records for a match that was gone when it was stat'ed: no
/// file has it, so the scan starts again.
const MOVED: (u64, u64) = (u64::MAX, u64::MAX);

/// What the walk found so far ([`Matches`] but the patterns' exact paths, which are not the
/// walk's): what a walk again of a directory finds below it replaces what was found there
/// before ([`Walked::supersede`]).
#[derive(Default)]
struct Walked {
    deny_read: Vec<PathBuf>,
    deny_write: Vec<PathBuf>,
    git_files: Vec<PathBuf>,
    git_dirs: Vec<PathBuf>,
    accepted_git_dirs: Vec<PathBuf>,
    unlisted: Vec<PathBuf>,
    dir_links: Vec<PathBuf>,
    /// Matches whose own path a mount cannot name (longer than [`MASKABLE`]: a dotenv file
    /// at 4097 bytes in a listable directory of 4092): masked by their deepest ancestor a
    /// mount can name, whole, as a directory the walk could not list.
    too_deep: Vec<PathBuf>,
    seen_as: BTreeMap<PathBuf, (u64, u64)>,
}

impl Walked {
    /// The walk came to `path` (of `kind`), an entry that may concern it.
    fn visit(&mut self, host: &dyn HostView, globs: &DenyGlobs, path: &Path, kind: Kind) {
        let (read, write) = globs.matches(path);
        let code = is_submodule_code_path(path);
        if (read || write || code) && path.as_os_str().len() > MASKABLE {
            self.too_deep.extend(maskable(path));
        }
        if read {
            self.deny_read.push(path.to_path_buf());
        }
        if write || code {
            self.deny_write.push(path.to_path_buf());
        }
        if read || write || code {
            self.record_identity(host, path, kind);
        }
        if kind == Kind::Dir && path.file_name().is_some_and(|n| n == ".git") {
            self.git_dirs.push(path.to_path_buf());
        } else if code {
            if let Some(parent) = path.parent() {
                self.git_dirs.push(parent.to_path_buf());
            }
        }
        if is_git_redirect(path, kind) {
            self.git_files.push(path.to_path_buf());
        }
        if kind == Kind::Symlink && path.file_name().is_some_and(|n| globs.is_link_name(n)) {
            self.dir_links.push(path.to_path_buf());
        }
        self.git_dir_of(host, path);
    }

    /// When `path` is a git dir's code (its config, hooks or commondir) in a directory git
    /// would accept as a git dir, that directory is recorded ([`Matches::accepted_git_dirs`]).
    fn git_dir_of(&mut self, host: &dyn HostView, path: &Path) {
        if let (Some(name), Some(parent)) = (path.file_name(), path.parent()) {
            if crate::planted_git::is_code_name(name)
                && crate::planted_git::accepted_by_git(host, parent)
            {
                self.accepted_git_dirs.push(parent.to_path_buf());
            }
        }
    }

    /// The walk came to `path` (of `kind`) in a git dir's own files ([`in_git_internals`]):
    /// a secret is looked for there (what else matches is git's, and protected as such), and
    /// a git dir hidden among them (`.git/inner`, which nothing points to yet: git runs its
    /// config and hooks once told to use it, as a bare repository's; red team of issue 33,
    /// eighth round).
    fn visit_secret(&mut self, host: &dyn HostView, globs: &DenyGlobs, path: &Path, kind: Kind) {
        self.git_dir_of(host, path);
        if !globs.matches(path).0 {
            return;
        }
        if path.as_os_str().len() > MASKABLE {
            self.too_deep.extend(maskable(path));
        }
        self.deny_read.push(path.to_path_buf());
        self.record_identity(host, path, kind);
    }

    /// Records the file a match is now ([`Matches::seen_as`]): asked now, not as remembered
    /// (a walk again comes to the same name holding another file).
    fn record_identity(&mut self, host: &dyn HostView, path: &Path, kind: Kind) {
        match host.stat_now(path) {
            Some(e) => {
                self.seen_as.insert(path.to_path_buf(), (e.dev, e.ino));
            }
            // Listed, and not there when stat'ed: moved (or removed) since the listing. Never
            // taken for a dangling link: the scan starts again for it (no file has this
            // identity), unless a walk again finds it (red team issue 32d, 07: an exchange
            // around this stat left no identity and no mask).
            None if kind != Kind::Symlink && path.as_os_str().len() <= MASKABLE => {
                self.seen_as.insert(path.to_path_buf(), MOVED);
            }
            // A dangling link has nothing to read; a path no call can name is masked by its
            // ancestor (`too_deep`).
            None => {}
        }
    }

    /// `dir` is walked again: what an earlier walk found below it is dropped (what is still
    /// there is found again; what was moved away is found where it went, and a stale path
    /// must not stand for it).
    fn supersede(&mut self, dir: &Path) {
        let below = |p: &PathBuf| p != dir && is_within(p, dir);
        for v in [
            &mut self.deny_read,
            &mut self.deny_write,
            &mut self.git_files,
            &mut self.git_dirs,
            &mut self.accepted_git_dirs,
            &mut self.unlisted,
            &mut self.dir_links,
            &mut self.too_deep,
        ] {
            v.retain(|p| !below(p));
        }
        self.seen_as.retain(|p, _| !below(p));
    }
}

impl Matches {
    pub(crate) fn collect(
        host: &dyn HostView,
        roots: &[PathBuf],
        deny_read: &[PathPattern],
        deny_write: &[PathPattern],
        stamps: &mut DirStamps,
        cache: Option<&mut crate::walk_cache::WalkCache>,
    ) -> Result<Matches, ScanError> {
        let (mut deny_read_found, read_globs) = exact_matches(host, deny_read);
        let (deny_write_found, write_globs) = exact_matches(host, deny_write);
        let read_globs = list_one_level(host, read_globs, &mut deny_read_found);
        let globs = DenyGlobs::new(read_globs.iter().copied(), write_globs.iter().copied())?;
        let bases = glob_bases(roots, &read_globs, &write_globs);
        if let Some(cache) = cache {
            let key = crate::walk_cache::key(
                cache.binary(),
                cache.uid(),
                roots,
                &bases,
                &read_globs,
                &write_globs,
            );
            stamps.key = Some(key);
            if let Some(prior) = cache.take(&key) {
                stamps.set_prior(prior);
            }
        }
        let mut planning = Planning {
            host,
            roots,
            globs: &globs,
            w: Walked::default(),
            count: 0,
        };
        stamps.round_start = stamps.taken_at;
        planning.walk_bases(bases, stamps)?;
        planning.recheck(stamps)?;
        let w = planning.w;
        let mut m = Matches {
            deny_read: [deny_read_found, w.deny_read].concat(),
            deny_write: [deny_write_found, w.deny_write].concat(),
            git_files: w.git_files,
            git_dirs: w.git_dirs,
            accepted_git_dirs: w.accepted_git_dirs,
            unlisted: w.unlisted,
            dir_links: w.dir_links,
            seen_as: w.seen_as,
            globs,
        };
        Matches::mask_unlisted(&mut m, host, roots, w.too_deep)?;
        // What was not reached (removed, or below a changed directory) is dropped.
        stamps.prior = None;
        for v in [
            &mut m.deny_read,
            &mut m.deny_write,
            &mut m.git_files,
            &mut m.git_dirs,
            &mut m.accepted_git_dirs,
            &mut m.dir_links,
        ] {
            v.sort();
            v.dedup();
        }
        Ok(m)
    }

    /// What the walk could not list ([`Matches::unlisted`]), stockade's quarantine and the
    /// ancestors of matches too deep to mask (`too_deep`) are masked whole: denied to read and
    /// to write. One that is or holds a writable root refuses the run.
    fn mask_unlisted(
        m: &mut Matches,
        host: &dyn HostView,
        roots: &[PathBuf],
        too_deep: Vec<PathBuf>,
    ) -> Result<(), ScanError> {
        // stockade's own quarantine holds what earlier sweeps took from runs (a dotenv file
        // a run buried below `PATH_MAX`, its planted hooks): a later run sees none of it.
        for root in roots {
            let q = root.join(".stockade").join("quarantine");
            if host.lstat_kind(&q) == Some(Kind::Dir) {
                m.unlisted.push(q);
            }
        }
        // A directory the planner could not list, that a command could enter (it can
        // `chmod` it back open, or search it for names it knows): masked whole, unreadable
        // and unwritable, since nothing in it was checked.
        m.unlisted.extend(too_deep);
        m.unlisted.sort();
        m.unlisted.dedup();
        // One that is or holds a writable root cannot be masked (the command writes there):
        // the run is refused, naming it (a run's `chmod 0311` of its own workspace, a secret
        // moved beyond `PATH_MAX` in a shallow tree).
        for d in &m.unlisted {
            if let Some(root) = roots.iter().find(|r| is_within(r, d)) {
                let deep = (host.try_list_dir(d))
                    .map_or_else(|e| !crate::beneath::is_denied(&e), |_| true);
                return Err(ScanError::Unlistable {
                    dir: d.clone(),
                    root: root.clone(),
                    deep,
                });
            }
        }
        for d in std::mem::take(&mut m.unlisted) {
            m.deny_read.push(d.clone());
            m.deny_write.push(d.clone());
            m.unlisted.push(d);
        }
        Ok(())
    }
}

/// The exact paths of `list` that exist (found by stat), and its globs (found by walking).
fn exact_matches<'p>(
    host: &dyn HostView,
    list: &'p [PathPattern],
) -> (Vec<PathBuf>, Vec<&'p policy::Glob>) {
    let (mut found, mut globs) = (Vec::new(), Vec::new());
    for pat in list {
        match pat {
            PathPattern::Exact(p) => {
                if host.lstat_kind(p).is_some() {
                    found.push(p.clone());
                }
            }
            PathPattern::Glob(g) => globs.push(g),
        }
    }
    (found, globs)
}

/// The read globs that need a walk; those of one level are matched here, into `found`.
fn list_one_level<'p>(
    host: &dyn HostView,
    read_globs: Vec<&'p policy::Glob>,
    found: &mut Vec<PathBuf>,
) -> Vec<&'p policy::Glob> {
    // A read glob with wildcards in its last component only (`~/.env*`) needs one listing
    // of its base, not a walk of everything beneath (the whole home), nor a place in the
    // compiled matcher (its shape would cost a regex set on every run).
    let (one_level, read_globs): (Vec<&policy::Glob>, Vec<&policy::Glob>) =
        read_globs.into_iter().partition(|g| g.is_one_level());
    for g in &one_level {
        for (name, _) in host.list_dir(g.base()) {
            if g.matches_name(&name) {
                found.push(g.base().join(name));
            }
        }
    }
    read_globs
}

/// The directories the planner walks, outermost first.
fn glob_bases(
    roots: &[PathBuf],
    read_globs: &[&policy::Glob],
    write_globs: &[&policy::Glob],
) -> Vec<PathBuf> {
    // Walk every distinct glob base once (writable roots are the bases of the relative
    // patterns); a base inside another base is covered by the outer walk.
    let mut bases: Vec<PathBuf> = read_globs
        .iter()
        .chain(write_globs)
        .map(|g| g.base().to_path_buf())
        .collect();
    bases.extend(roots.iter().cloned());
    bases.sort_by_key(|p| (depth(p), p.clone()));
    bases.dedup();
    bases
}

/// The planner's walk under way ([`Matches::collect`]): what it found so far, and how many
/// entries it went through.
struct Planning<'a> {
    host: &'a dyn HostView,
    roots: &'a [PathBuf],
    globs: &'a DenyGlobs,
    w: Walked,
    count: usize,
}

impl Planning<'_> {
    /// Walks each of `bases` that exists and is not inside one already walked.
    fn walk_bases(&mut self, bases: Vec<PathBuf>, stamps: &mut DirStamps) -> Result<(), ScanError> {
        let mut walked: Vec<PathBuf> = Vec::new();
        for base in bases {
            if walked.iter().any(|w| is_within(&base, w)) || self.host.lstat_kind(&base).is_none() {
                continue;
            }
            self.walk_dir(&base, None, stamps)?;
            walked.push(base);
        }
        Ok(())
    }

    /// Walks `dir` (whose parent is `parent` in [`DirStamps::seen`], none for a base),
    /// recording what it finds, then looks for secrets among the git internals it passed.
    fn walk_dir(
        &mut self,
        dir: &Path,
        parent: Option<usize>,
        stamps: &mut DirStamps,
    ) -> Result<(), ScanError> {
        let (host, globs, roots) = (self.host, self.globs, self.roots);
        let concern = |name: &std::ffi::OsStr, _| globs.may_concern(name);
        let unlisted = |w: &mut Walked, dir: &Path, e: std::io::Error| {
            if let Some(closed) = closed_to_planner(dir, &e, roots) {
                w.unlisted.push(closed);
            }
        };
        let w = std::cell::RefCell::new(&mut self.w);
        walk_from(
            host,
            dir,
            parent,
            &mut self.count,
            Stamps::Record(stamps),
            &concern,
            &mut |p, k| w.borrow_mut().visit(host, globs, p, k),
            &mut |d, e| unlisted(&mut w.borrow_mut(), d, e),
        )?;
        for (p, k) in std::mem::take(&mut stamps.in_git) {
            w.borrow_mut().visit_secret(host, globs, &p, k);
        }
        Ok(())
    }

    /// Checks the walk again once it is over, and walks again what changed during it.
    fn recheck(&mut self, stamps: &mut DirStamps) -> Result<(), ScanError> {
        // The walk is checked again once it is over (`DirStamps::changed` says why that
        // proves it saw the tree as it was at one instant); what changed during it is walked
        // again (what was found below it before is found again, or where it went), and
        // checked again, at least `REWALKS` times and for `REWALK_BUDGET`: a directory that
        // keeps changing refuses the run.
        //
        // A walk that listed nothing (every directory taken from the walk cache) re-checks
        // only the directories it visited entries of and those above them (issue 32, item 1:
        // not a third `stat` per directory of an unchanged workspace). The tree it went
        // through is the tree as it was when the run began: each cached listing was read in
        // an earlier run after that directory's stamp was read (before this run began), and
        // the walk found the same settled stamp, so nothing was created, removed or renamed in
        // it over that interval, which holds this run's start; a subdirectory is stamped by
        // its name in its parent's handle, bound to one inode all along by the unchanged
        // parent (the inode the earlier run stamped by that name while that parent held what
        // it listed), and an equal stamp is that inode. What it visits, though, it visits by
        // path, later: a directory on the way exchanged between its stamp and the visit
        // (`sub`, holding `.env`, exchanged with an already walked `zz` holding a decoy) makes
        // the visit see another file (red team issue 32, fifth round: the secret read, 7 of
        // 7 timed runs). Those directories unchanged at this re-check, after every visit,
        // prove each visit found the file of the run's start; one changed brings the whole
        // re-check and a walk again, as below. A walk that listed anything re-checks all.
        let host = self.host;
        let mut only =
            (stamps.listed == 0 && stamps.from_cache > 0).then(|| stamps.visited_and_above());
        let began = std::time::Instant::now();
        while stamps.recheck {
            let (tops, stale) = stamps.changed(host, only.take().as_deref());
            let Some(first) = tops.first().and_then(|&t| stamps.seen.get(t)) else {
                break;
            };
            if stamps.rewalks >= REWALKS && began.elapsed() >= REWALK_BUDGET {
                return Err(ScanError::WorkspaceChanged {
                    dir: first.path.clone(),
                    rewalks: stamps.rewalks,
                });
            }
            let backoff =
                (BACKOFF_STEP * u32::try_from(stamps.rewalks).unwrap_or(u32::MAX)).min(BACKOFF_MAX);
            std::thread::sleep(stamps.settle_wait(host, &stale).max(backoff));
            for (dir, parent) in stamps.rewalk(&tops, &stale) {
                self.w.supersede(&dir);
                self.walk_dir(&dir, parent, stamps)?;
            }
            stamps.refresh(host);
        }
        Ok(())
    }
}

/// Depth-first walk that does not follow symlinks. Inside a `.git` directory it only goes into
/// `modules` (submodule git dirs), and inside those it skips object stores, refs and logs:
/// hooks and config are what can run code.
///
/// The sweep's walk ([`Stamps::SkipUnchanged`]) hands every directory it could not list to
/// `unlisted`, with the reason: what it holds was not seen, and the caller must say so (a
/// directory the run made unreadable is not an empty one). The planner's walk
/// ([`Stamps::Record`]) hands them to `unlisted` too (its caller masks what a command could
/// reach into: `closed_to_planner`); such a directory has no stamp, is never recorded, and
/// the sweep and the next run list it again.
pub fn walk(
    host: &dyn HostView,
    root: &Path,
    count: &mut usize,
    stamps: Stamps<'_>,
    concern: &dyn Fn(&std::ffi::OsStr, Kind) -> bool,
    visit: &mut dyn FnMut(&Path, Kind),
    unlisted: &mut dyn FnMut(&Path, std::io::Error),
) -> Result<(), ScanError> {
    walk_from(host, root, None, count, stamps, concern, visit, unlisted)
}

/// Most directories a walk holds a handle of at once (each the parent of the next): a deep
/// tree does not run the process out of descriptors; deeper, whole paths are stat'ed.
const HELD: usize = 64;

/// [`walk`] from `root`, whose parent is `root_parent` in the planner's record of what it saw
/// ([`DirStamps::seen`]; a walk again of a directory that changed during the walk).
#[allow(clippy::too_many_arguments)]
fn walk_from(
    host: &dyn HostView,
    root: &Path,
    root_parent: Option<usize>,
    count: &mut usize,
    mut stamps: Stamps<'_>,
    concern: &dyn Fn(&std::ffi::OsStr, Kind) -> bool,
    visit: &mut dyn FnMut(&Path, Kind),
    unlisted: &mut dyn FnMut(&Path, std::io::Error),
) -> Result<(), ScanError> {
    // Each directory to walk, with the handle of its parent when the walk opened that parent
    // and found its stamp unchanged (its entries' stamps are then taken by name in it), how
    // many handles its chain of parents holds (at most `HELD`), and its parent's index in the
    // planner's record of what it saw.
    type Parent = Option<std::rc::Rc<DirHandle>>;
    let mut stack: Vec<(PathBuf, Parent, usize, Option<usize>)> =
        vec![(root.to_path_buf(), None, 0, root_parent)];
    while let Some((dir, parent, held, parent_seen)) = stack.pop() {
        let parent = parent.as_deref();
        if let Stamps::Record(rec) = &mut stamps {
            if let Some((old, handle)) = rec.reuse(host, parent, &dir, held < HELD) {
                // Same entries as when an earlier run's planner listed it: what concerned the
                // walk then is visited again (every check on it runs again), and its
                // subdirectories are walked (each checked on its own).
                let internal = in_git_internals(&dir);
                for (name, kind) in &old.found {
                    *count += 1;
                    if internal {
                        rec.in_git.push((dir.join(name), *kind));
                    } else {
                        visit(&dir.join(name), *kind);
                    }
                }
                let me = rec.saw(&dir, parent_seen, Some(old.stamp), !old.subdirs.is_empty());
                if let Some(seen) = rec.seen.get_mut(me) {
                    seen.visited = !old.found.is_empty();
                }
                let held = held + usize::from(handle.is_some());
                let handle = handle.map(std::rc::Rc::new);
                stack.extend(
                    (old.subdirs.iter()).map(|n| (dir.join(n), handle.clone(), held, Some(me))),
                );
                rec.from_cache += 1;
                rec.keep(dir.into_os_string(), old);
                continue;
            }
        }
        if let Stamps::SkipUnchanged(known) = &stamps {
            if let Some((rec, handle)) = known.unchanged(host, parent, &dir, held < HELD) {
                // Same entries as when the planner listed it (every create, remove or rename
                // in it would have moved its ctime): visited then, nothing new to see.
                let held = held + usize::from(handle.is_some());
                let handle = handle.map(std::rc::Rc::new);
                // Into a git dir's own files too: a git dir made there during the run
                // (`.git/new`, hooks first) is the sweep's to take apart ([`in_git_internals`]).
                stack.extend(
                    (rec.subdirs.iter()).map(|n| (dir.join(n), handle.clone(), held, None)),
                );
                continue;
            }
        }
        // The stamp is taken before the listing: a change after it shows in the ctime.
        let (stamp, entries) = match &mut stamps {
            Stamps::Record(rec) => {
                rec.listed += 1;
                match host.list_dir_stamped(&dir) {
                    // No stamp: not listed (a real host), or a fake host's listing: ask again
                    // why (a directory it cannot list is handed to `unlisted`, never recorded).
                    (None, _) => match host.try_list_dir(&dir) {
                        Ok(entries) => (None, entries),
                        Err(e) => {
                            unlisted(&dir, e);
                            continue;
                        }
                    },
                    listed => listed,
                }
            }
            Stamps::SkipUnchanged(_) => match host.try_list_dir(&dir) {
                Ok(entries) => (None, entries),
                Err(e) => {
                    unlisted(&dir, e);
                    continue;
                }
            },
        };
        let me = match &mut stamps {
            Stamps::Record(rec) => {
                let me = rec.saw(&dir, parent_seen, stamp, false);
                // A walk again keeps the whole listing for `DirStamps::refresh`.
                if rec.rewalks > 0 && stamp.is_some() {
                    if let Some(seen) = rec.seen.get_mut(me) {
                        seen.listing = Some(entries.clone());
                    }
                }
                Some(me)
            }
            Stamps::SkipUnchanged(_) => None,
        };
        let planner = matches!(stamps, Stamps::Record(_));
        // A git dir's own files (below `.git` but its submodules' worktree-like parts): the
        // planner goes into them for secrets and hidden git dirs only (a run under gVisor,
        // which has no creation guard, could move a `.env`'s directory into a `.git` it made,
        // where no walk looked: the next run read it, red team issue 32d). The sweep goes
        // there as everywhere, into what changed: a git dir assembled there during the run,
        // hooks first (which no creation guard knows as a git dir's yet), kept its hook for
        // host git told to use it (red team of issue 33, eighth round). Unchanged
        // directories cost it a `stat` each (a repository's `objects` fan-out, its refs).
        let internal = in_git_internals(&dir);
        let mut subdirs = Vec::new();
        let mut found = Vec::new();
        for (name, kind) in entries {
            // No limit: what one run creates must never make a later run fail. The walk is
            // linear in the entries (about 1 s per million here, docs/benchmarks.md).
            *count += 1;
            let interesting = concern(&name, kind);
            let descend = kind == Kind::Dir;
            if interesting || descend {
                let path = dir.join(&name);
                if interesting {
                    match &mut stamps {
                        Stamps::Record(rec) if internal => rec.in_git.push((path.clone(), kind)),
                        _ => visit(&path, kind),
                    }
                    if planner {
                        found.push((name.clone(), kind));
                    }
                }
                if descend {
                    // Listed, not passed through: its entries are stat'ed by their paths.
                    stack.push((path, None, held, me));
                    subdirs.push(name);
                }
            }
        }
        if let (Stamps::Record(rec), Some(me)) = (&mut stamps, me) {
            if let Some(seen) = rec.seen.get_mut(me) {
                seen.subdirs = !subdirs.is_empty();
            }
        }
        if let (Stamps::Record(rec), Some(stamp)) = (&mut stamps, stamp) {
            rec.record(host, dir, stamp, subdirs, found);
        }
    }
    Ok(())
}

/// The longest path a mount (a mask) can name: `PATH_MAX` with its terminating NUL.
const MASKABLE: usize = 4095;

/// What to mask whole for a directory the planner's walk could not list (`e`): `None` when a
/// command cannot reach into it either, or it is gone.
///
/// - Gone (`ENOENT`, `ENOTDIR`: removed or replaced while the walk ran): nothing to mask; a
///   directory made in its place is the next walk's.
/// - Refused by permission: masked when a command could enter it: either searchable by the
///   caller (a command reaches the names it knows: `chmod 311`) or the caller's own in a
///   writable root (a command `chmod`s it open: `chmod 000` in run 1, `chmod 755` in run 2).
///   A directory of another user the caller cannot search, or its own outside the writable
///   roots (read-only to a command), stays closed to a command as it is to the planner. Root
///   lists everything (`CAP_DAC_READ_SEARCH`).
/// - Any other error (`ENAMETOOLONG` below a tree deeper than `PATH_MAX`, `EIO`, `ELOOP`, ...):
///   nothing in it was checked, so it is masked whole, fail-closed. A mask is mounted by path,
///   so one whose own path is longer than [`MASKABLE`] (every `ENAMETOOLONG`) is masked by its
///   deepest ancestor that a mount can name: its parent, which the walk listed by that path.
fn closed_to_planner(dir: &Path, e: &std::io::Error, roots: &[PathBuf]) -> Option<PathBuf> {
    if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) {
        return None;
    }
    if crate::beneath::is_denied(e) {
        let searchable = searchable_by_caller(dir);
        let own = rustix::fs::lstat(dir).is_ok_and(|st| {
            let euid = rustix::process::geteuid();
            euid.is_root() || st.st_uid == euid.as_raw()
        });
        return (searchable || (own && roots.iter().any(|r| is_within(dir, r))))
            .then(|| dir.to_path_buf());
    }
    maskable(dir)
}

/// `dir`, or its deepest ancestor whose path a mount can name ([`MASKABLE`]).
fn maskable(dir: &Path) -> Option<PathBuf> {
    (dir.ancestors())
        .find(|a| a.as_os_str().len() <= MASKABLE)
        .map(Path::to_path_buf)
}

/// Whether the caller may search `dir` (its effective ids: `access(X_OK)` with `AT_EACCESS`).
pub(crate) fn searchable_by_caller(dir: &Path) -> bool {
    rustix::fs::accessat(
        rustix::fs::CWD,
        dir,
        rustix::fs::Access::EXEC_OK,
        rustix::fs::AtFlags::EACCESS,
    )
    .is_ok()
}

fn names(path: &Path) -> impl DoubleEndedIterator<Item = &[u8]> + Clone {
    path.iter().map(|c| c.as_encoded_bytes())
}

/// Whether `path` lies inside a `.git/modules` tree (the git dirs of submodules; see
/// [`protect::git::in_modules`]).
pub fn in_git_modules(path: &Path) -> bool {
    protect::git::in_modules(names(path))
}

/// Where a directory is among git's dirs: what the walks' rules for project files go into.
struct GitRules {
    is_git: bool,
    in_modules: bool,
    is_modules: bool,
}

impl GitRules {
    fn of(dir: &Path) -> GitRules {
        let in_modules = in_git_modules(dir);
        GitRules {
            is_git: dir.file_name().is_some_and(|n| n == ".git"),
            in_modules,
            // `.git/modules` (or a nested `modules`) holds submodule git dirs, whatever
            // their names.
            is_modules: in_modules && dir.file_name().is_some_and(|n| n == "modules"),
        }
    }

    /// Whether the rules for project files go into the subdirectory `name`: inside a `.git`
    /// only `modules` (submodule git dirs), and inside those not the object stores, refs
    /// and logs (hooks and config are what can run code).
    fn descends(&self, name: &std::ffi::OsStr) -> bool {
        if self.is_git {
            name == "modules"
        } else if self.is_modules {
            true
        } else if self.in_modules {
            !matches!(
                name.to_str(),
                Some("objects" | "refs" | "logs" | "info" | "branches" | "lfs" | "hooks")
            )
        } else {
            true
        }
    }
}

/// [`GitRules::descends`] for `name` in `dir`.
fn descends(dir: &Path, name: &std::ffi::OsStr) -> bool {
    GitRules::of(dir).descends(name)
}

/// Whether `path` lies in a git dir's own files, where the rules for project files do not go
/// ([`GitRules::descends`] says no somewhere on its way): the planner looks there for
/// secrets only.
pub(crate) fn in_git_internals(path: &Path) -> bool {
    if !path.iter().any(|c| c == ".git") {
        return false;
    }
    let mut dir = PathBuf::new();
    for c in path.iter() {
        if dir.iter().any(|c| c == ".git") && !descends(&dir, c) {
            return true;
        }
        dir.push(c);
    }
    false
}

/// `hooks`, `config` or `commondir` of a submodule's git dir: what makes git run code there
/// (see [`protect::git::is_submodule_code_path`]).
pub fn is_submodule_code_path(path: &Path) -> bool {
    // Called for every entry of every walk: the cheap test first.
    let named = path
        .file_name()
        .is_some_and(|n| n == "hooks" || n == "config" || n == "commondir");
    named && protect::git::is_submodule_code_path(names(path))
}

/// A `.git` entry that is not a directory (a `gitdir:` file or a symlink) redirects git to
/// another git dir, with that dir's hooks and config (see [`protect::git::is_redirect`]).
pub fn is_git_redirect(path: &Path, kind: Kind) -> bool {
    path.file_name()
        .is_some_and(|n| protect::git::is_redirect(n.as_encoded_bytes(), kind == Kind::Dir))
}

#[cfg(test)]
mod via_link_tests {
    use super::guard_matches;
    use std::path::Path;

    #[test]
    fn guard_patterns_match_as_the_creation_guard_does() {
        let tail = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (base, none) = (Path::new("/ws/cargo-dir/config.toml"), tail(&[]));
        assert!(guard_matches(base, &none, base));
        assert!(guard_matches(
            base,
            &none,
            Path::new("/ws/cargo-dir/config.toml/x")
        ));
        assert!(!guard_matches(
            base,
            &none,
            Path::new("/ws/cargo-dir/other.toml")
        ));
        let (base, wf) = (Path::new("/ws/gh"), tail(&["workflows", "*.yml"]));
        assert!(guard_matches(
            base,
            &wf,
            Path::new("/ws/gh/workflows/ci.yml")
        ));
        assert!(guard_matches(
            base,
            &wf,
            Path::new("/ws/gh/a/workflows/ci.yml")
        ));
        assert!(!guard_matches(
            base,
            &wf,
            Path::new("/ws/gh/workflows/ci.txt")
        ));
        assert!(!guard_matches(base, &wf, Path::new("/ws/gh/ci.yml")));
        assert!(!guard_matches(
            base,
            &wf,
            Path::new("/ws/other/workflows/ci.yml")
        ));
    }
}

#[cfg(test)]
mod closed_tests {
    use super::{closed_to_planner, MASKABLE};
    use std::path::{Path, PathBuf};

    /// A directory the walk could not list for any reason but "gone" is masked, fail-closed;
    /// one beyond `PATH_MAX` by its deepest ancestor a mount can name. Controls: a directory
    /// removed or replaced during the walk is not.
    #[test]
    fn every_error_but_gone_masks_and_a_path_too_long_masks_its_parent() {
        let err = |n| std::io::Error::from_raw_os_error(n);
        let roots = [PathBuf::from("/ws")];
        let name = "x".repeat(250);
        let mut deep = PathBuf::from("/ws");
        while deep.as_os_str().len() <= MASKABLE {
            deep.push(&name);
        }
        let parent = deep.parent().unwrap().to_path_buf();
        assert!(parent.as_os_str().len() <= MASKABLE);
        assert_eq!(
            closed_to_planner(&deep, &err(libc::ENAMETOOLONG), &roots),
            Some(parent.clone())
        );
        let below = deep.join(&name).join("sec");
        assert_eq!(
            closed_to_planner(&below, &err(libc::ENAMETOOLONG), &roots),
            Some(parent)
        );
        for e in [libc::EIO, libc::ELOOP, libc::EMFILE, libc::ENOMEM] {
            let dir = Path::new("/ws/a/b");
            assert_eq!(
                closed_to_planner(dir, &err(e), &roots).as_deref(),
                Some(dir)
            );
        }
        for e in [libc::ENOENT, libc::ENOTDIR] {
            assert_eq!(closed_to_planner(Path::new("/ws/a"), &err(e), &roots), None);
        }
    }
}

#[cfg(test)]
pub(crate) mod recheck_tests {
    //! The re-check after the planner's walk, against a host that exchanges directories
    //! between two listings (another run's command racing the walk).
    use super::{DirStamps, Matches, REWALKS};
    use crate::host::fake::Swapping;
    use crate::host::{HostView, Kind};
    use crate::ScanError;
    use std::path::{Path, PathBuf};

    const WS: &str = "/ws";

    /// The reproducer's tree: `P/C` holds nothing, `S/C/.env` the secret, and some more.
    fn tree(ctime_ns: i64) -> Swapping {
        Swapping::new(
            &["/ws/P/C", "/ws/tree/d1/a", "/ws/tree/d2/a"],
            &["/ws/S/C/.env", "/ws/tree/d1/a/f"],
            ctime_ns,
        )
    }

    /// The exchange at the worst moments: `P` and `S` right after the walk listed the
    /// workspace (it then lists the old `P` as `S`), and back right after it listed `S/C`
    /// (it then lists the old `P` as `P` again): no listing ever holds `.env`.
    fn race(host: &Swapping, times: usize) {
        let (ws, p, s) = (
            PathBuf::from(WS),
            PathBuf::from("/ws/P"),
            PathBuf::from("/ws/S"),
        );
        host.swaps.borrow_mut().extend([
            (ws, p.clone(), s.clone(), times),
            (PathBuf::from("/ws/S/C"), p, s, times),
        ]);
    }

    fn collect(host: &Swapping, recheck: bool) -> (Result<Matches, ScanError>, DirStamps) {
        collect_dotenv(host, recheck)
    }

    /// The planner's walk of `/ws` for `**/.env` on `host`, checked again after it or not.
    pub(crate) fn collect_dotenv(
        host: &dyn crate::host::HostView,
        recheck: bool,
    ) -> (Result<Matches, ScanError>, DirStamps) {
        collect_dotenv_with(host, recheck, None)
    }

    /// [`collect_dotenv`] with a walk cache.
    fn collect_dotenv_with(
        host: &dyn crate::host::HostView,
        recheck: bool,
        cache: Option<&mut crate::walk_cache::WalkCache>,
    ) -> (Result<Matches, ScanError>, DirStamps) {
        let ctx = policy::PathContext {
            home: "/home/u".into(),
            workspace: WS.into(),
            writable_roots: vec![WS.into()],
        };
        let read: Vec<_> = policy::expand("**/.env", &ctx).unwrap();
        let mut stamps = DirStamps::start();
        stamps.recheck = recheck;
        let m = Matches::collect(host, &[WS.into()], &read, &[], &mut stamps, cache);
        (m, stamps)
    }

    fn secret() -> PathBuf {
        Path::new("/ws/S/C/.env").to_path_buf()
    }

    /// The planner's walk of `/ws` for `**/.env`, with a walk cache, checked again or not.
    fn collect_cached(
        host: &Swapping,
        cache: &mut crate::walk_cache::WalkCache,
        recheck: bool,
    ) -> (Matches, DirStamps) {
        let (m, stamps) = collect_dotenv_with(host, recheck, Some(cache));
        (m.unwrap(), stamps)
    }

    /// A walk taken whole from the walk cache re-checks only the way to what it visited: one
    /// stamp per directory, and one more for `P/C` and those above it (every cached listing
    /// held at the run's start, see `Matches::collect`), and it finds what a full walk finds. One during which two directories are exchanged (the secret in
    /// `P/C`, still to be walked, goes to `S/C`, already taken from the cache) finds `P`
    /// changed and lists it: it is checked again, walks the workspace again and finds the
    /// secret where it went. Control: the same walk with no re-check misses the secret.
    #[test]
    fn a_walk_from_the_cache_is_checked_again_when_it_listed_something() {
        let old = 1_000_000_000_000_000_000;
        let make = || Swapping::new(&["/ws/S/C", "/ws/tree/d1/a"], &["/ws/P/C/.env"], old);
        let uid = rustix::process::geteuid().as_raw();
        let tmp = tempfile::tempdir().unwrap();
        let stored = {
            let mut c = crate::walk_cache::WalkCache::empty("test", uid);
            let (m, stamps) = collect_cached(&make(), &mut c, true);
            assert_eq!(m.deny_read, vec![PathBuf::from("/ws/P/C/.env")]);
            c.store(tmp.path(), Path::new(WS), &stamps).unwrap();
            stamps.dirs.len()
        };
        let load = || crate::walk_cache::WalkCache::load(tmp.path(), Path::new(WS), uid, "test");
        // Unchanged: every directory from the cache, each stamped once, nothing walked again.
        let quiet = make();
        let (m, stamps) = collect_cached(&quiet, &mut load(), true);
        assert_eq!(m.deny_read, vec![PathBuf::from("/ws/P/C/.env")]);
        assert_eq!(
            (stamps.from_cache, stamps.listed, stamps.rewalks),
            (stored, 0, 0)
        );
        // Re-checked: only the directories it visited entries of (those holding a match or a
        // subdirectory, `DenyGlobs::may_concern`) and those above them; not `S/C` nor
        // `tree/d1/a`, which hold nothing it visited.
        let marked = stamps.visited_and_above();
        let rechecked = marked.iter().filter(|m| **m).count();
        assert_eq!(quiet.stamped.get(), stored + rechecked);
        assert_eq!(stored - rechecked, 2, "{marked:?}");
        // `P` and `S` exchanged right after `S/C` was taken from the cache.
        let race = |host: &Swapping| {
            host.after_stamp.borrow_mut().push((
                PathBuf::from("/ws/S/C"),
                PathBuf::from("/ws/P"),
                PathBuf::from("/ws/S"),
                1,
            ))
        };
        let control = make();
        race(&control);
        let (m, stamps) = collect_cached(&control, &mut load(), false);
        assert!(
            m.deny_read.is_empty() && stamps.listed > 0,
            "the exchange did not hide the secret: the test proves nothing ({:?})",
            m.deny_read
        );
        let raced = make();
        race(&raced);
        let (m, stamps) = collect_cached(&raced, &mut load(), true);
        assert_eq!(m.deny_read, vec![PathBuf::from("/ws/S/C/.env")]);
        assert!(stamps.rewalks >= 1);
    }

    /// The exchange during the walk hides the secret from it (control: no re-check); the
    /// re-check sees the workspace's stamp moved, walks it again and finds the secret.
    #[test]
    fn an_exchange_during_the_walk_is_walked_again_and_the_secret_found() {
        let old = 1_000_000_000_000_000_000;
        let host = tree(old);
        race(&host, 1);
        let (m, _) = collect(&host, false);
        let m = m.unwrap();
        assert!(
            m.deny_read.is_empty(),
            "the race did not hide the secret: the test proves nothing ({:?})",
            m.deny_read
        );
        let host = tree(old);
        race(&host, 1);
        let (m, stamps) = collect(&host, true);
        assert_eq!(m.unwrap().deny_read, vec![secret()]);
        assert_eq!(stamps.rewalks, 1);
        // Nothing changed during the walk: no walk again, and the same finding.
        let quiet = tree(old);
        let (m, stamps) = collect(&quiet, true);
        assert_eq!(m.unwrap().deny_read, vec![secret()]);
        assert_eq!(stamps.rewalks, 0);
    }

    /// A match found before a walk again of a directory above it is replaced by what that
    /// walk finds: the secret moved after its directory was listed (`A` and `B` exchanged)
    /// is found where it went, with its device and inode, and the stale path is dropped (it
    /// named nothing, and a scan would start again for it). Control: without the re-check
    /// the walk's only match is the stale path, which names nothing now.
    #[test]
    fn a_walk_again_replaces_what_was_found_below_it() {
        let old = 1_000_000_000_000_000_000;
        let make = || {
            let host = Swapping::new(&["/ws/B"], &["/ws/A/.env"], old);
            host.swaps.borrow_mut().push((
                PathBuf::from("/ws/A"),
                PathBuf::from("/ws/A"),
                PathBuf::from("/ws/B"),
                1,
            ));
            host
        };
        let host = make();
        let (m, _) = collect(&host, false);
        let m = m.unwrap();
        assert_eq!(m.deny_read, vec![PathBuf::from("/ws/A/.env")]);
        // Gone when stat'ed: recorded as moved (the scan would start again for it).
        assert_eq!(
            m.seen_as.get(Path::new("/ws/A/.env")),
            Some(&super::MOVED),
            "{:?}",
            m.seen_as
        );
        let host = make();
        let (m, stamps) = collect(&host, true);
        let m = m.unwrap();
        assert_eq!(m.deny_read, vec![PathBuf::from("/ws/B/.env")]);
        let id = host.stat(Path::new("/ws/B/.env")).map(|e| (e.dev, e.ino));
        assert_eq!(m.seen_as.get(Path::new("/ws/B/.env")).copied(), id);
        assert_eq!(m.seen_as.len(), 1);
        assert!(stamps.rewalks >= 1);
    }

    /// The red team's timing (issue 32, fifth round) against a walk taken whole from the
    /// cache: right after `sub` (holding the secret `.env`) is stamped, and before its `.env`
    /// is visited by path, a decoy `.env` is made in `zz` (already walked) and `sub` and `zz`
    /// are exchanged: the visit finds the decoy at `sub/.env`, and the secret is at
    /// `zz/.env`. The re-check of the way to what was visited sees the workspace changed,
    /// walks it again and finds the secret. Control: no re-check, and the secret is missed.
    #[test]
    fn a_visit_by_path_after_an_exchange_in_a_cached_walk_is_checked() {
        let old = 1_000_000_000_000_000_000;
        let tree = || Swapping::new(&["/ws/zz/refs"], &["/ws/sub/.env", "/ws/sub/x"], old);
        let make = || {
            let host = tree();
            host.add_after_stamp
                .borrow_mut()
                .push((PathBuf::from("/ws/sub"), PathBuf::from("/ws/zz/.env")));
            host.after_stamp.borrow_mut().push((
                PathBuf::from("/ws/sub"),
                PathBuf::from("/ws/sub"),
                PathBuf::from("/ws/zz"),
                1,
            ));
            host
        };
        let uid = rustix::process::geteuid().as_raw();
        let tmp = tempfile::tempdir().unwrap();
        {
            let mut c = crate::walk_cache::WalkCache::empty("test", uid);
            let (m, stamps) = collect_cached(&tree(), &mut c, true);
            assert_eq!(m.deny_read, vec![PathBuf::from("/ws/sub/.env")]);
            c.store(tmp.path(), Path::new(WS), &stamps).unwrap();
        }
        let load = || crate::walk_cache::WalkCache::load(tmp.path(), Path::new(WS), uid, "test");
        let secret = PathBuf::from("/ws/zz/.env");
        let control = make();
        let (m, stamps) = collect_cached(&control, &mut load(), false);
        assert_eq!(
            stamps.listed, 0,
            "the walk was not taken whole from the cache"
        );
        assert!(
            !m.deny_read.contains(&secret),
            "the exchange did not hide the secret: the test proves nothing ({:?})",
            m.deny_read
        );
        let raced = make();
        let (m, stamps) = collect_cached(&raced, &mut load(), true);
        assert!(m.deny_read.contains(&secret), "missed: {:?}", m.deny_read);
        assert!(stamps.rewalks >= 1);
    }

    /// After the walk, an exchange of `P` and `S` and back leaves every path as it was, but
    /// the workspace's ctime moved: the directories on the way to the walk's match say so
    /// (the scan then starts again). Control: nothing moved, nothing said; a path the walk
    /// did not look at is not asked about.
    #[test]
    fn a_rename_on_the_way_to_a_match_after_the_walk_is_seen() {
        let old = 1_000_000_000_000_000_000;
        let host = tree(old);
        let (m, stamps) = collect(&host, true);
        let m = m.unwrap();
        assert_eq!(m.deny_read, vec![secret()]);
        let paths = || m.deny_read.iter().map(PathBuf::as_path);
        let roots = [PathBuf::from(WS)];
        assert_eq!(stamps.moved_since(&host, &roots, &[], paths()), None);
        // A file made in the workspace's root moves only the root's ctime: not asked.
        host.add(Path::new("/ws/new"), Kind::File);
        assert_eq!(stamps.moved_since(&host, &roots, &[], paths()), None);
        let (p, s) = (Path::new("/ws/P"), Path::new("/ws/S"));
        host.exchange(p, s);
        host.exchange(p, s);
        assert_eq!(
            stamps.moved_since(&host, &roots, &[], paths()),
            Some(PathBuf::from("/ws/S"))
        );
        let elsewhere = [Path::new("/elsewhere/x")];
        assert_eq!(stamps.moved_since(&host, &roots, &[], elsewhere), None);
    }

    /// A `.env` moved into a git dir's own files (a directory renamed into a `.git` a run
    /// made, or into a submodule's object store) is found and masked; the rules for project
    /// files still stop there (control: they do not reach those paths, and the sweep's walk
    /// does not go there).
    #[test]
    fn a_secret_in_a_git_dirs_own_files_is_found() {
        let host = Swapping::new(
            &["/ws/.git/objects/ab"],
            &[
                "/ws/.git/HEAD",
                "/ws/.git/app/.env",
                "/ws/.git/objects/ab/.env",
                "/ws/.git/modules/s/objects/x/.env",
                "/ws/.git/modules/s/src/.env",
                "/ws/src/.env",
            ],
            1_000_000_000_000_000_000,
        );
        let (m, _) = collect(&host, true);
        let found = m.unwrap().deny_read;
        for p in [
            "/ws/.git/app/.env",
            "/ws/.git/objects/ab/.env",
            "/ws/.git/modules/s/objects/x/.env",
            "/ws/.git/modules/s/src/.env",
            "/ws/src/.env",
        ] {
            assert!(found.contains(&PathBuf::from(p)), "{p} not in {found:?}");
        }
        for (p, internal) in [
            ("/ws/.git/app/.env", true),
            ("/ws/.git/objects/ab", true),
            ("/ws/.git/modules/s/objects/x/.env", true),
            ("/ws/.git/modules/s/src/.env", false),
            ("/ws/.git/modules", false),
            ("/ws/.git", false),
            ("/ws/src/.env", false),
        ] {
            assert_eq!(super::in_git_internals(Path::new(p)), internal, "{p}");
        }
    }

    /// An exchange that goes on for ever: walked again at least `REWALKS` times and for
    /// `REWALK_BUDGET`, then the run is refused, naming the directory that kept changing.
    #[test]
    fn a_directory_that_keeps_changing_refuses_the_run() {
        let host = tree(1_000_000_000_000_000_000);
        race(&host, usize::MAX);
        let (m, stamps) = collect(&host, true);
        match m {
            Err(ScanError::WorkspaceChanged { dir, rewalks }) => {
                assert_eq!(dir.as_path(), Path::new(WS));
                assert!(rewalks >= REWALKS, "{rewalks}");
                assert_eq!(stamps.rewalks, rewalks);
            }
            other => panic!("not refused: {:?}", other.map(|m| m.deny_read)),
        }
        // One that stops: found where it is at the end (the exchange back after `S/C` is
        // listed did not come the second time: the secret is in `P` now).
        let host = tree(1_000_000_000_000_000_000);
        race(&host, 2);
        let (m, stamps) = collect(&host, true);
        assert_eq!(m.unwrap().deny_read, vec![PathBuf::from("/ws/P/C/.env")]);
        // Once: the walk again's listings are read again right after it (`refresh`), when
        // the exchanges are over, and hold to the re-check.
        assert_eq!(stamps.rewalks, 1);
    }

    /// On a kernel without multigrain ctimes, a change in the same clock tick as the stamp
    /// can keep the ctime: here the secret is moved from `A` (not listed yet) to `B` (just
    /// listed) and every stamp stays the same. An equal stamp whose ctime lies within `GRAIN`
    /// of the walk is not trusted, and the directory is listed again once that time has passed
    /// (the run is not refused). Control: the same race with such stamps trusted (what
    /// multigrain ctimes make safe) misses the secret.
    #[test]
    fn an_equal_recent_stamp_proves_nothing_without_multigrain_ctimes() {
        let now = || {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            i64::try_from(t.unwrap().as_nanos()).unwrap()
        };
        let coarse = |fine: bool| {
            let mut host = Swapping::new(&["/ws/B"], &["/ws/A/.env"], now());
            host.keep_ctime = true;
            host.fine = fine;
            let (a, b) = (PathBuf::from("/ws/A/.env"), PathBuf::from("/ws/B/.env"));
            host.moves.borrow_mut().push(("/ws/B".into(), a, b));
            host
        };
        let (m, _) = collect(&coarse(true), true);
        assert!(
            m.unwrap().deny_read.is_empty(),
            "the race did not hide the secret: the test proves nothing"
        );
        let started = std::time::Instant::now();
        let (m, stamps) = collect(&coarse(false), true);
        assert_eq!(m.unwrap().deny_read, vec![PathBuf::from("/ws/B/.env")]);
        assert_eq!(stamps.rewalks, 1);
        assert!(started.elapsed() >= std::time::Duration::from_millis(40));
    }

    /// On a real filesystem, the re-check (stamps taken by name in the parents' handles, and
    /// by whole paths deeper than the handles held) finds exactly the directories changed
    /// since the walk. Control: with nothing changed it finds none.
    #[test]
    fn a_real_tree_re_checked_finds_what_changed_and_nothing_else() {
        use crate::host::{HostView, RealHost};
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap();
        let mut deep = ws.join("deep");
        for i in 0..70 {
            deep.push(format!("d{i}"));
        }
        for d in ["p/q/r", "t/s", "other"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        std::fs::create_dir_all(&deep).unwrap();
        // Settled (`GRAIN`) even where ctimes are not multigrain, but changed lately: with
        // what changed below, only what changed is listed again, not every directory that
        // changed in the last second (the dropped `HOT` rule: this tree was made 150 ms ago,
        // and that rule listed all of it again).
        std::thread::sleep(super::GRAIN + std::time::Duration::from_millis(100));
        let ctx = policy::PathContext {
            home: "/home/u".into(),
            workspace: ws.clone(),
            writable_roots: vec![ws.clone()],
        };
        let read: Vec<_> = policy::expand("**/.env", &ctx).unwrap();
        let mut stamps = DirStamps::start();
        stamps.recheck = false;
        Matches::collect(
            &RealHost,
            std::slice::from_ref(&ws),
            &read,
            &[],
            &mut stamps,
            None,
        )
        .unwrap();
        assert!(
            stamps.seen.len() > 70,
            "{} directories seen",
            stamps.seen.len()
        );
        let changed = |stamps: &mut DirStamps| -> Vec<PathBuf> {
            let (tops, _) = stamps.changed(&RealHost, None);
            let mut paths: Vec<PathBuf> = (tops.iter())
                .map(|&t| stamps.seen[t].path.clone())
                .collect();
            paths.sort();
            paths
        };
        if !RealHost.local_ctime(&ws) {
            eprintln!("n/a: {} does not set ctimes locally", ws.display());
            return;
        }
        assert_eq!(changed(&mut stamps), Vec::<PathBuf>::new());
        std::fs::write(ws.join("p/q/r/.env"), "").unwrap();
        std::fs::create_dir(deep.join("new")).unwrap();
        std::fs::rename(ws.join("t/s"), ws.join("other/s")).unwrap();
        // Top-most only: what lies below a changed directory is walked again with it.
        let mut want = vec![
            ws.join("t"),
            ws.join("p/q/r"),
            ws.join("other"),
            deep.clone(),
        ];
        want.sort();
        assert_eq!(changed(&mut stamps), want);
    }
}
