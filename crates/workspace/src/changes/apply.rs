//! Writing a change set into the workspace.
//!
//! In order: the upper is checked against its digest; the entries are selected; flagged
//! entries not accepted refuse the whole apply (nothing written), or, with
//! `ApplyOptions::hold_flagged`, are left pending with whatever lies below them (`hold`:
//! the rest goes on, each entry through every check below; nothing but held entries
//! selected is still a refusal); conflicts among what is applied refuse the whole apply
//! (nothing written); temporary
//! files an interrupted apply left are removed; then each entry is applied in path order
//! (directories before what they hold) and logged to `applied.log` at once.
//!
//! Every destination is reached from a descriptor of the workspace with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: a link on the way fails the entry, and
//! nothing is written through it. A file is written to `.stockade-apply-<random>` beside its
//! destination (`O_CREAT | O_EXCL`, mode 0600), its content copied from the upper (opened
//! `O_NOFOLLOW`, hashed on the way and compared with what `finish` recorded), fsynced, given
//! its permission bits (never setuid or setgid) and renamed over the destination. A directory
//! gets the bits the run gave it (a sticky bit included; never setuid or setgid), but one
//! the run closed to its owner (`chmod 000`, `111`, `500`) is given them last, deepest first,
//! after what it holds is written: until then its owner may read, write and search it (while
//! entries below it stay pending, held or left out, it stays so: the apply that writes the
//! last of them closes it). A
//! file with holes is written as one: its non-zero blocks at their offsets, then its size
//! (`read::copy_file`), so a `truncate -s 60G` file stays sparse on the host, never 60 GiB of
//! zeros.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType as Ft, Gid, Mode, OFlags, Stat, Uid};

use super::assembly::git_assembly;
use super::read::copy_file;
use super::select::{covers, open_parent, plan, select, user_path, Action};
use super::{
    ApplyOptions, ApplyReport, ChangeKind, ChangesError, FileType, Flag, FlagRules, Held, Recorded,
    RunDir, APPLY_TEMP_PREFIX,
};
use crate::beneath::{chmod_fd, errno_io, list, open_child, random_name, remove_tree, stat_child};

/// What writing one entry did.
enum Done {
    Written,
    Deleted,
}

/// What writing the selected entries did: the paths done, the failure that stopped it, the
/// directories the run closed to their owner with their bits.
type Writing = (Vec<PathBuf>, Option<ChangesError>, Vec<(PathBuf, u32)>);

impl RunDir {
    /// Applies the change set, or the part of it `opts` selects (see the module's docs of
    /// [`super`]). When nothing is left pending, the run directory is removed; otherwise the
    /// applied entries are recorded in `meta.applied` and [`RunDir::changes`] leaves them
    /// out.
    pub fn apply(
        &mut self,
        opts: &ApplyOptions,
        rules: &FlagRules,
    ) -> Result<ApplyReport, ChangesError> {
        self.check_live()?;
        let _lock = self.lock()?;
        // The shape first, reading no file; each file's content is checked against its
        // recorded hash as it is copied, before it takes its name.
        self.verify_shape()?;
        let Some(finished) = self.meta.finished.clone() else {
            return Err(ChangesError::NotFinished {
                run_id: self.id.clone(),
            });
        };
        let applied = self.applied();
        let pending: Vec<&Recorded> = finished
            .entries
            .iter()
            .filter(|e| !applied.contains(e.path.as_path()))
            .collect();
        let selected = select(&pending, &opts.only, &opts.exclude)?;
        let accept = opts
            .accept
            .iter()
            .map(|p| user_path(p))
            .collect::<Result<Vec<_>, _>>()?;
        let ws = self.meta.workspace.clone();
        let root = self.open_workspace()?;
        let flagged = self.apply_flags(root.as_fd(), &ws, &selected, opts, &accept, rules);
        let (selected, held) = hold(selected, &flagged);
        if !held.is_empty() && (!opts.hold_flagged || selected.is_empty()) {
            return Err(ChangesError::Flagged(flagged));
        }
        let upper = self.open_upper()?;
        clean_temps(root.as_fd(), &finished.entries);
        let actions = plan(
            root.as_fd(),
            &ws,
            upper.as_fd(),
            &selected,
            &finished.entries,
        )?;

        drop(applied);

        let as_root = rustix::process::geteuid().is_root();
        let mut report = ApplyReport {
            held,
            ..ApplyReport::default()
        };
        let (done, mut failed, closed) = self.write_selected(
            root.as_fd(),
            upper.as_fd(),
            &selected,
            actions,
            as_root,
            &mut report,
        )?;
        self.close_deferred(
            root.as_fd(),
            &finished.entries,
            &pending,
            &done,
            &closed,
            &mut failed,
        );
        // What was written is on disk before the record says so: an entry an interrupted
        // apply wrote but did not record is looked at again next time (and found `already`).
        rustix::fs::syncfs(&root).map_err(|e| ChangesError::Write {
            path: ws.clone(),
            cause: errno_io(e),
        })?;
        self.meta.applied.extend(done);
        let applied = self.applied();
        report.remaining = finished
            .entries
            .iter()
            .filter(|e| !applied.contains(e.path.as_path()))
            .count();
        drop(applied);
        if let Some(err) = failed {
            self.write_meta()?;
            return Err(err);
        }
        if report.remaining == 0 {
            self.remove()?;
        } else {
            self.write_meta()?;
        }
        Ok(report)
    }

    /// The flags that refuse or hold each selected entry not accepted: its change's, the git
    /// dir it would assemble, a protected link of the workspace as it is now.
    fn apply_flags(
        &self,
        root: BorrowedFd<'_>,
        ws: &Path,
        selected: &[&Recorded],
        opts: &ApplyOptions,
        accept: &[PathBuf],
        rules: &FlagRules,
    ) -> Vec<(PathBuf, Vec<Flag>)> {
        // A git dir this apply would assemble with what the workspace holds now (another
        // change set applied earlier, a direct run): `assembly`.
        let assembled: HashMap<PathBuf, Flag> =
            git_assembly(root, ws, selected).into_iter().collect();
        // The protected links of the workspace as it is now (the host may have made or
        // changed one since the run): an entry that would become what one leads to is held.
        let links_now = super::recorded::links_now(
            ws,
            &self.meta.protected,
            &self.meta.guard,
            self.meta.checks.as_ref(),
            selected,
        );
        selected
            .iter()
            .filter(|e| !opts.accept_flagged && !accept.iter().any(|a| covers(a, &e.path)))
            .map(|e| {
                let mut flags = self.change(e, rules).flags;
                if let Some(f) = assembled.get(&e.path) {
                    if !flags.iter().any(|g| g.code == f.code) {
                        flags.push(f.clone());
                    }
                }
                if !flags.iter().any(|g| g.code == "protected") {
                    let absolute = ws.join(&e.path);
                    if let Some(reason) =
                        super::recorded::link_target_refusal(&links_now, &absolute, e)
                    {
                        flags.push(Flag {
                            code: "protected",
                            reason: format!("now, in the workspace: {reason}"),
                        });
                    }
                }
                (e.path.clone(), flags)
            })
            .filter(|(_, flags)| !flags.is_empty())
            .collect()
    }

    /// Writes the selected entries in path order, each logged to `applied.log` at once,
    /// stopping at the first failure: the paths done, that failure, and the directories the
    /// run closed to their owner (given their bits last, by `close_deferred`).
    fn write_selected(
        &self,
        root: BorrowedFd<'_>,
        upper: BorrowedFd<'_>,
        selected: &[&Recorded],
        actions: Vec<Action>,
        as_root: bool,
        report: &mut ApplyReport,
    ) -> Result<Writing, ChangesError> {
        let mut log = self.open_log()?;
        let mut done: Vec<PathBuf> = Vec::new();
        let mut failed = None;
        let mut closed: Vec<(PathBuf, u32)> = Vec::new();
        for (e, action) in selected.iter().zip(actions) {
            let (op, list) = match action {
                Action::Already => ("already", &mut report.already),
                Action::Skip => ("skipped", &mut report.skipped),
                Action::Write => match self.write_entry(root, upper, e, as_root, &mut closed) {
                    Ok(Done::Written) => ("written", &mut report.written),
                    Ok(Done::Deleted) => ("deleted", &mut report.deleted),
                    Err(err) => {
                        failed = Some(err);
                        break;
                    }
                },
            };
            list.push(e.path.clone());
            done.push(e.path.clone());
            if let Err(err) = log.line(op, &e.path) {
                failed = Some(err);
                break;
            }
        }
        drop(log);
        Ok((done, failed, closed))
    }

    /// Gives the directories the run closed to their owner their bits, deepest first; a
    /// failure is kept in `failed` unless one is there already.
    fn close_deferred(
        &self,
        root: BorrowedFd<'_>,
        entries: &[Recorded],
        pending: &[&Recorded],
        done: &[PathBuf],
        closed: &[(PathBuf, u32)],
        failed: &mut Option<ChangesError>,
    ) {
        // Directories the run closed to their owner get their bits last, deepest first, once
        // what they hold is written (even after a failure: never left more open than the run
        // made them but for their owner's bits). One with entries below it still pending
        // (held, left out, not reached) stays open to its owner, or those could never be
        // written by a regular user: the apply that writes the last of them closes it.
        let now_done: HashSet<&Path> = done.iter().map(PathBuf::as_path).collect();
        let below_pending: HashSet<&Path> = pending
            .iter()
            .map(|e| e.path.as_path())
            .filter(|p| !now_done.contains(p))
            .flat_map(|p| p.ancestors().skip(1))
            .collect();
        let below_done: HashSet<&Path> = now_done
            .iter()
            .flat_map(|p| p.ancestors().skip(1))
            .collect();
        let before = self.applied();
        let mut closing: Vec<(PathBuf, u32)> = closed
            .iter()
            .filter(|(p, _)| !below_pending.contains(p.as_path()))
            .cloned()
            .collect();
        // Closed by an earlier apply's deferral: its mode as the run gave it, the setgid bit
        // it has kept.
        for e in entries.iter().filter(|e| {
            e.file_type == FileType::Dir
                && e.kind != ChangeKind::Deleted
                && before.contains(e.path.as_path())
                && below_done.contains(e.path.as_path())
                && !below_pending.contains(e.path.as_path())
        }) {
            let mode = e.mode.unwrap_or(0o700) & 0o1777;
            if mode & 0o700 != 0o700 {
                closing.push((e.path.clone(), mode | KEEP_SETGID));
            }
        }
        drop(before);
        closing.sort();
        for (path, mode) in closing.iter().rev() {
            if let Err(err) = close_dir(root, path, *mode) {
                failed.get_or_insert(err);
            }
        }
    }

    fn write_entry(
        &self,
        root: BorrowedFd<'_>,
        upper: BorrowedFd<'_>,
        e: &Recorded,
        as_root: bool,
        closed: &mut Vec<(PathBuf, u32)>,
    ) -> Result<Done, ChangesError> {
        let fail = |cause: io::Error| ChangesError::Apply {
            path: e.path.clone(),
            cause,
        };
        let parent = open_parent(root, &e.path).map_err(|why| fail(io::Error::other(why)))?;
        let parent = parent.as_fd();
        let name = e
            .path
            .file_name()
            .ok_or_else(|| fail(io::Error::other("not a plain relative path")))?;
        let old = stat_child(parent, name).map_err(fail)?;
        // Root gives what it makes an owner: a replaced entry keeps its owner, a new one gets
        // the workspace's.
        let owner = as_root.then_some(match &old {
            Some(st) => (st.st_uid, st.st_gid),
            None => self.meta.workspace_owner,
        });
        // Never setuid or setgid; a directory keeps its sticky bit (it only restricts).
        let mode = e.mode.unwrap_or(0o600)
            & if e.file_type == FileType::Dir {
                0o1777
            } else {
                0o777
            };
        // A directory is open to its owner until what it holds is written (`closed`). A
        // setgid bit it has on the host is kept, never added: the kernel gives it to a
        // directory made in a setgid one (a group-shared tree), and a chmod without it would
        // end that sharing below.
        let mut open_dir = |d: BorrowedFd<'_>| -> io::Result<()> {
            let inherited = rustix::fs::fstat(d).map_err(errno_io)?.st_mode & 0o2000;
            let mode = mode | inherited;
            let now = mode | 0o700;
            chmod_fd(d, now)?;
            if now != mode {
                closed.push((e.path.clone(), mode));
            }
            Ok(())
        };
        let done = match (e.kind, e.file_type) {
            (ChangeKind::Deleted, _) => {
                remove_tree(parent, name).map_err(fail)?;
                Done::Deleted
            }
            (_, FileType::File) => {
                self.write_file(parent, name, upper, e, old.as_ref(), owner, mode)?;
                Done::Written
            }
            (_, FileType::Symlink) => {
                let target = e
                    .symlink_target
                    .as_deref()
                    .ok_or_else(|| fail(io::Error::other("a link without its target")))?;
                replace_with(parent, name, old.as_ref(), |tmp| {
                    rustix::fs::symlinkat(target, parent, tmp).map_err(errno_io)?;
                    if let Some((u, g)) = owner {
                        let (u, g) = (Uid::from_raw(u), Gid::from_raw(g));
                        rustix::fs::chownat(
                            parent,
                            tmp,
                            Some(u),
                            Some(g),
                            AtFlags::SYMLINK_NOFOLLOW,
                        )
                        .map_err(errno_io)?;
                    }
                    Ok(())
                })
                .map_err(fail)?;
                Done::Written
            }
            (ChangeKind::ModeChanged { .. } | ChangeKind::ReplacedDir, FileType::Dir) => {
                let d = open_child(parent, name, OFlags::PATH | OFlags::DIRECTORY).map_err(fail)?;
                open_dir(d.as_fd()).map_err(fail)?;
                Done::Written
            }
            (_, FileType::Dir) => {
                if old.as_ref().is_some_and(|st| kind(st) != Ft::Directory) {
                    rustix::fs::unlinkat(parent, name, AtFlags::empty())
                        .map_err(|e| fail(errno_io(e)))?;
                }
                match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(err) => return Err(fail(errno_io(err))),
                }
                // Root (an owner to give) opens any directory readable; others need not read
                // it to set its mode.
                let access = if owner.is_some() {
                    OFlags::RDONLY
                } else {
                    OFlags::PATH
                };
                let d = open_child(parent, name, access | OFlags::DIRECTORY).map_err(fail)?;
                if let Some((u, g)) = owner {
                    rustix::fs::fchown(&d, Some(Uid::from_raw(u)), Some(Gid::from_raw(g)))
                        .map_err(|e| fail(errno_io(e)))?;
                }
                open_dir(d.as_fd()).map_err(fail)?;
                Done::Written
            }
            (_, FileType::Other) => {
                return Err(fail(io::Error::other("special files are never applied")))
            }
        };
        Ok(done)
    }

    #[allow(clippy::too_many_arguments)]
    fn write_file(
        &self,
        parent: BorrowedFd<'_>,
        name: &OsStr,
        upper: BorrowedFd<'_>,
        e: &Recorded,
        old: Option<&Stat>,
        owner: Option<(u32, u32)>,
        mode: u32,
    ) -> Result<(), ChangesError> {
        let fail = |cause: io::Error| ChangesError::Apply {
            path: e.path.clone(),
            cause,
        };
        let mut tampered = None;
        replace_with(parent, name, old, |tmp| {
            let fd = rustix::fs::openat2(
                parent,
                tmp,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
                crate::beneath::resolve(),
            )
            .map_err(errno_io)?;
            let out = std::fs::File::from(fd);
            let src = open_child(upper, e.path.as_os_str(), OFlags::RDONLY | OFlags::NONBLOCK)?;
            let st = rustix::fs::fstat(&src).map_err(errno_io)?;
            if kind(&st) != Ft::RegularFile {
                return Err(io::Error::other(
                    "its upper copy is no longer a regular file",
                ));
            }
            let found = copy_file(&std::fs::File::from(src), &out)?;
            if Some(&found) != e.sha256.as_ref() {
                tampered = Some(found);
                return Err(io::Error::other("its upper copy changed"));
            }
            out.sync_all()?;
            if let Some((u, g)) = owner {
                rustix::fs::fchown(&out, Some(Uid::from_raw(u)), Some(Gid::from_raw(g)))
                    .map_err(errno_io)?;
            }
            rustix::fs::fchmod(&out, Mode::from_raw_mode(mode)).map_err(errno_io)?;
            Ok(())
        })
        .map_err(|cause| match tampered.take() {
            Some(found) => ChangesError::Tampered {
                expected: format!(
                    "{}: sha256:{}",
                    e.path.display(),
                    e.sha256.as_deref().unwrap_or("")
                ),
                found: format!("{}: sha256:{found}", e.path.display()),
            },
            None => fail(cause),
        })
    }
}

/// `selected` without the `flagged` entries and what lies below one of them (a file in a
/// flagged directory the change set makes has nowhere to go without it; what a flagged
/// directory holds waits with it), and the entries so held, in path order. The entries kept
/// are exactly those no flagged entry is at or above: a held entry is never written.
fn hold<'a>(
    selected: Vec<&'a Recorded>,
    flagged: &[(PathBuf, Vec<Flag>)],
) -> (Vec<&'a Recorded>, Vec<Held>) {
    if flagged.is_empty() {
        return (selected, Vec::new());
    }
    // Each entry looks up itself and its ancestors: linear in the entries times their depth.
    let by_path: HashMap<&Path, &Vec<Flag>> =
        flagged.iter().map(|(p, f)| (p.as_path(), f)).collect();
    let mut kept = Vec::with_capacity(selected.len());
    let mut held = Vec::new();
    for e in selected {
        if let Some(flags) = by_path.get(e.path.as_path()) {
            held.push(Held {
                path: e.path.clone(),
                flags: (*flags).clone(),
                below: None,
            });
        } else if let Some(above) = e.path.ancestors().skip(1).find(|a| by_path.contains_key(a)) {
            held.push(Held {
                path: e.path.clone(),
                flags: Vec::new(),
                below: Some(above.to_path_buf()),
            });
        } else {
            kept.push(e);
        }
    }
    (kept, held)
}

/// In a mode [`close_dir`] is given: keep the setgid bit the directory has now.
const KEEP_SETGID: u32 = 1 << 31;

/// Gives the directory `path` (relative to the workspace `root`) the bits `mode`, the run's,
/// once what it holds is written ([`KEEP_SETGID`]: with the setgid bit it has).
fn close_dir(root: BorrowedFd<'_>, path: &Path, mode: u32) -> Result<(), ChangesError> {
    let fail = |cause: io::Error| ChangesError::Apply {
        path: path.to_path_buf(),
        cause,
    };
    let parent = open_parent(root, path).map_err(|why| fail(io::Error::other(why)))?;
    let name = path
        .file_name()
        .ok_or_else(|| fail(io::Error::other("not a plain relative path")))?;
    let d = open_child(parent.as_fd(), name, OFlags::PATH | OFlags::DIRECTORY).map_err(fail)?;
    let mode = if mode & KEEP_SETGID != 0 {
        let st = rustix::fs::fstat(&d).map_err(|e| fail(errno_io(e)))?;
        (mode & 0o1777) | (st.st_mode & 0o2000)
    } else {
        mode
    };
    chmod_fd(d.as_fd(), mode).map_err(fail)
}

fn kind(st: &Stat) -> Ft {
    Ft::from_raw_mode(st.st_mode)
}

/// Makes the new entry under a temporary name with `make`, then puts it in `name`'s place
/// (a directory there is removed first: a rename cannot replace one by a file). The
/// temporary entry is removed if anything fails.
fn replace_with(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    old: Option<&Stat>,
    make: impl FnOnce(&OsStr) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = random_name(APPLY_TEMP_PREFIX)?;
    let done = make(&tmp).and_then(|()| {
        if old.is_some_and(|st| kind(st) == Ft::Directory) {
            remove_tree(parent, name)?;
        }
        rustix::fs::renameat(parent, &tmp, parent, name).map_err(errno_io)
    });
    if done.is_err() {
        let _ = rustix::fs::unlinkat(parent, &tmp, AtFlags::empty());
    }
    done
}

/// Whether `name` is one of `apply`'s temporary names.
pub(crate) fn is_temp_name(name: &OsStr) -> bool {
    name.to_str()
        .and_then(|n| n.strip_prefix(APPLY_TEMP_PREFIX))
        .is_some_and(|rest| rest.len() == 16 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Removes temporary files (and links) an interrupted apply left in the directories the
/// change set writes to. Best effort: a directory that cannot be opened is left alone.
fn clean_temps(root: BorrowedFd<'_>, entries: &[Recorded]) {
    let dirs: HashSet<&Path> = entries
        .iter()
        .map(|e| e.path.parent().unwrap_or(Path::new("")))
        .collect();
    for dir in dirs {
        let rel = if dir.as_os_str().is_empty() {
            OsStr::new(".")
        } else {
            dir.as_os_str()
        };
        let Ok(fd) = open_child(root, rel, OFlags::RDONLY | OFlags::DIRECTORY) else {
            continue;
        };
        let Ok(names) = list(fd.as_fd()) else {
            continue;
        };
        for name in names.iter().filter(|n| is_temp_name(n)) {
            let Ok(Some(st)) = stat_child(fd.as_fd(), name) else {
                continue;
            };
            if matches!(kind(&st), Ft::RegularFile | Ft::Symlink) {
                let _ = rustix::fs::unlinkat(&fd, name, AtFlags::empty());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changes::BaseState;

    fn rec(path: String) -> Recorded {
        let (kind, file_type) = (ChangeKind::Added, FileType::File);
        super::super::tests::recorded(&path, kind, file_type, 0o644, BaseState::Absent)
    }

    /// The red team's r13b: N plain and N flagged entries made `hold` compare every entry with
    /// every flagged path (40 s and more for N = 20000). Now each entry looks up its ancestors.
    /// Control: on a smaller set, the held entries are exactly those a flagged path is at or
    /// above (the quadratic reading of the rule).
    #[test]
    fn hold_is_linear_in_the_entries() {
        let flag = Flag {
            code: "host-loaded",
            reason: "x".into(),
        };
        let set = |n: usize| -> Vec<Recorded> {
            let mut v: Vec<Recorded> = (0..n).map(|i| rec(format!("p/{i}"))).collect();
            v.push(rec("node_modules/x".into()));
            v.extend((0..n).map(|i| rec(format!("node_modules/x/{i}.js"))));
            v.extend((0..n).map(|i| rec(format!("q/{i}.js"))));
            v
        };
        let flagged_of = |all: &[Recorded]| -> Vec<(PathBuf, Vec<Flag>)> {
            all.iter()
                .filter(|e| e.path.extension().is_some_and(|x| x == "js"))
                .map(|e| (e.path.clone(), vec![flag.clone()]))
                .collect()
        };
        // Control: the rule as it reads.
        let small = set(300);
        let flagged = flagged_of(&small);
        let (kept, held) = hold(small.iter().collect(), &flagged);
        let want_held: Vec<&Path> = small
            .iter()
            .filter(|e| flagged.iter().any(|(p, _)| e.path.starts_with(p)))
            .map(|e| e.path.as_path())
            .collect();
        assert_eq!(
            held.iter().map(|h| h.path.as_path()).collect::<Vec<_>>(),
            want_held
        );
        assert_eq!(kept.len(), small.len() - want_held.len());

        let big = set(20_000);
        let flagged = flagged_of(&big);
        let t = std::time::Instant::now();
        let (kept, held) = hold(big.iter().collect(), &flagged);
        let took = t.elapsed();
        assert_eq!((kept.len(), held.len()), (20_001, 40_000));
        assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    }
}
