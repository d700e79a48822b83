//! One run's directory: `<store>/<run-id>/` with `upper/`, `work/`, `meta.json` and, once an
//! apply started, `applied.log`. Everything in it is reached from the directory's descriptor
//! without following a link; `meta.json` is replaced atomically (a temporary file beside it,
//! renamed over it).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType as Ft, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use super::flags::flags_of;
use super::pathser::LogLine;
use super::read::{self, Layers, Marks};
use super::recorded;
use super::remove::remove_run;
use super::{
    now_ns, Change, ChangeSet, ChangesError, FlagRules, Recorded, RunMeta, FORMAT, OLDEST_FORMAT,
};
use crate::beneath::{errno_io, list, open_child, resolve, stat_child};

/// A `meta.json` larger than this is corrupt.
const MAX_META: u64 = 512 << 20;

const META: &str = "meta.json";
const LOG: &str = "applied.log";

fn io_err(e: Errno) -> std::io::Error {
    errno_io(e)
}

/// A run's directory, held by an `O_PATH` descriptor opened without following a link.
#[derive(Debug)]
pub struct RunDir {
    pub(crate) id: String,
    pub(crate) path: PathBuf,
    pub(crate) fd: OwnedFd,
    pub(crate) store_fd: OwnedFd,
    pub(crate) store: PathBuf,
    pub(crate) meta: RunMeta,
    /// Removed (applied whole): every later call fails.
    pub(crate) removed: bool,
}

impl RunDir {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn upper(&self) -> PathBuf {
        self.path.join("upper")
    }

    pub fn work(&self) -> PathBuf {
        self.path.join("work")
    }

    pub fn meta(&self) -> &RunMeta {
        &self.meta
    }

    /// `name` in the run directory, opened as a readable directory.
    pub(crate) fn open_dir(&self, name: &str) -> std::io::Result<OwnedFd> {
        open_child(
            self.fd.as_fd(),
            OsStr::new(name),
            OFlags::RDONLY | OFlags::DIRECTORY,
        )
    }

    pub(crate) fn check_live(&self) -> Result<(), ChangesError> {
        if self.removed {
            return Err(ChangesError::NotFound {
                what: format!("with run id {} (it was applied and removed)", self.id),
            });
        }
        Ok(())
    }

    pub(crate) fn read_meta(&self) -> Result<RunMeta, ChangesError> {
        let path = self.path.join(META);
        let corrupt = |reason: String| ChangesError::Corrupt {
            path: path.clone(),
            reason,
        };
        let fd = open_child(
            self.fd.as_fd(),
            OsStr::new(META),
            OFlags::RDONLY | OFlags::NONBLOCK,
        )
        .map_err(|cause| ChangesError::Read {
            path: path.clone(),
            cause,
        })?;
        let st = rustix::fs::fstat(&fd).map_err(|e| ChangesError::Read {
            path: path.clone(),
            cause: io_err(e),
        })?;
        if Ft::from_raw_mode(st.st_mode) != Ft::RegularFile {
            return Err(corrupt("it is not a regular file".into()));
        }
        let mut text = Vec::new();
        std::fs::File::from(fd)
            .take(MAX_META + 1)
            .read_to_end(&mut text)
            .map_err(|cause| ChangesError::Read {
                path: path.clone(),
                cause,
            })?;
        if text.len() as u64 > MAX_META {
            return Err(corrupt(format!("it is larger than {MAX_META} bytes")));
        }
        let meta: RunMeta = serde_json::from_slice(&text).map_err(|e| corrupt(e.to_string()))?;
        validate(&meta, &self.id).map_err(corrupt)?;
        Ok(meta)
    }

    /// Replaces `meta.json` atomically, and durably (synced).
    pub(crate) fn write_meta(&self) -> Result<(), ChangesError> {
        self.write_meta_as(true)
    }

    /// Replaces `meta.json` atomically; synced when `durable`. The meta of a run that has not
    /// ended needs no sync: after a crash its change set cannot be applied anyway (it was never
    /// sealed), only discarded. Sparing it keeps a review run's start cheap.
    pub(crate) fn write_meta_as(&self, durable: bool) -> Result<(), ChangesError> {
        let path = self.path.join(META);
        let mut json = serde_json::to_vec_pretty(&self.meta).map_err(|e| ChangesError::Write {
            path: path.clone(),
            cause: std::io::Error::other(e),
        })?;
        json.push(b'\n');
        self.replace_file(META, &json, durable)
    }

    fn replace_file(&self, name: &str, bytes: &[u8], durable: bool) -> Result<(), ChangesError> {
        let path = self.path.join(name);
        let write = |cause: std::io::Error| ChangesError::Write {
            path: path.clone(),
            cause,
        };
        let tmp = crate::beneath::random_name(".meta-").map_err(write)?;
        let fd = rustix::fs::openat2(
            &self.fd,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
            resolve(),
        )
        .map_err(|e| write(io_err(e)))?;
        let mut file = std::fs::File::from(fd);
        let done = file
            .write_all(bytes)
            .and_then(|()| if durable { file.sync_all() } else { Ok(()) })
            .and_then(|()| rustix::fs::renameat(&self.fd, &tmp, &self.fd, name).map_err(io_err));
        if let Err(e) = done {
            let _ = rustix::fs::unlinkat(&self.fd, &tmp, AtFlags::empty());
            return Err(write(e));
        }
        if durable {
            self.sync();
        }
        Ok(())
    }

    /// Flushes the run directory's entries (best effort).
    fn sync(&self) {
        if let Ok(d) = self.open_dir(".") {
            let _ = rustix::fs::fsync(&d);
        }
    }

    /// `applied.log`, opened to append: each apply writes a line per entry as it is done
    /// (`written`, `deleted`, `already`, `skipped`), so an interrupted apply leaves the list
    /// of what it wrote.
    pub(crate) fn open_log(&self) -> Result<AppliedLog, ChangesError> {
        let path = self.path.join(LOG);
        let fd = rustix::fs::openat2(
            &self.fd,
            LOG,
            OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
            resolve(),
        )
        .map_err(|e| ChangesError::Write {
            path: path.clone(),
            cause: io_err(e),
        })?;
        Ok(AppliedLog {
            file: std::fs::File::from(fd),
            path,
        })
    }

    /// What `applied.log` lists, every apply so far (a last line cut short is left out):
    /// `(op, path)`.
    pub fn applied_log(&self) -> Result<Vec<(String, PathBuf)>, ChangesError> {
        let path = self.path.join(LOG);
        let fd = match open_child(
            self.fd.as_fd(),
            OsStr::new(LOG),
            OFlags::RDONLY | OFlags::NONBLOCK,
        ) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(Vec::new()),
            Err(cause) => return Err(ChangesError::Read { path, cause }),
        };
        let mut text = Vec::new();
        std::fs::File::from(fd)
            .take(MAX_META)
            .read_to_end(&mut text)
            .map_err(|cause| ChangesError::Read { path, cause })?;
        Ok(text
            .split(|&b| b == b'\n')
            .filter_map(|l| serde_json::from_slice::<LogLine>(l).ok())
            .map(|l| (l.op, l.path))
            .collect())
    }

    /// An exclusive lock on the store's `.lock`, released when the descriptor closes.
    pub(crate) fn lock(&self) -> Result<OwnedFd, ChangesError> {
        lock_store(self.store_fd.as_fd(), &self.store)
    }

    /// The upper, opened readable.
    pub(crate) fn open_upper(&self) -> Result<OwnedFd, ChangesError> {
        self.open_dir("upper").map_err(|cause| ChangesError::Open {
            path: self.upper(),
            cause,
        })
    }

    /// The workspace, opened readable (its own path is followed: it was canonical when the
    /// run started).
    pub(crate) fn open_workspace(&self) -> Result<OwnedFd, ChangesError> {
        let ws = &self.meta.workspace;
        let open = |e: Errno| ChangesError::Open {
            path: ws.clone(),
            cause: io_err(e),
        };
        let fd = rustix::fs::open(
            ws,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(open)?;
        let st = rustix::fs::fstat(&fd).map_err(open)?;
        // st_dev's width differs between architectures.
        #[allow(clippy::unnecessary_cast)]
        let (dev, ino) = (st.st_dev as u64, st.st_ino as u64);
        if self.meta.workspace_ino.is_some_and(|i| i != ino)
            || self.meta.workspace_dev.is_some_and(|d| d != dev)
        {
            return Err(ChangesError::Conflict(vec![(
                ws.clone(),
                "the workspace's path names another directory than the run's".into(),
            )]));
        }
        Ok(fd)
    }

    pub(crate) fn marks(&self) -> Marks {
        Marks::for_caller(self.meta.caller.0)
    }

    /// Reads the upper: against the workspace when `compare`, else for the digest only.
    pub(crate) fn scan(&self, compare: bool) -> Result<read::Scan, ChangesError> {
        self.scan_with(compare, &read::RunModes::new())
    }

    /// [`RunDir::scan`], recording `run_modes` ([`read::Layers::run_modes`]).
    pub(crate) fn scan_with(
        &self,
        compare: bool,
        run_modes: &read::RunModes,
    ) -> Result<read::Scan, ChangesError> {
        let upper = self.open_upper()?;
        let upper_path = self.upper();
        let lower = if compare {
            Some(self.open_workspace()?)
        } else {
            None
        };
        read::read(&Layers {
            upper: upper.as_fd(),
            upper_path: &upper_path,
            lower: lower
                .as_ref()
                .map(|l| (l.as_fd(), self.meta.workspace.as_path())),
            marks: self.marks(),
            started_ns: self.meta.started_unix_ns,
            content: true,
            run_modes,
        })
    }

    /// Refuses a change set `finish` sealed in an older format ([`OLDEST_FORMAT`] up to
    /// before [`FORMAT`]): its files' identities are not computed any more, so nothing of it
    /// can be checked, shown or applied (it can be listed and discarded).
    fn check_format(&self) -> Result<(), ChangesError> {
        if self.meta.format == FORMAT || self.meta.finished.is_none() {
            return Ok(());
        }
        Err(ChangesError::Unsupported {
            path: self.path.join(META),
            reason: format!(
                "it was sealed by an older stockade in format {} (files named by the SHA-256 of their bytes); this stockade names them by format {FORMAT}'s block identity and cannot check it: apply it with the stockade that made it",
                self.meta.format
            ),
        })
    }

    /// Checks the upper's shape (everything but files' contents) against what `finish`
    /// recorded, reading no file: `apply` checks each file's content as it copies it. A
    /// change set recorded without a shape digest is checked whole.
    pub(crate) fn verify_shape(&self) -> Result<(), ChangesError> {
        let Some(finished) = &self.meta.finished else {
            return Err(ChangesError::NotFinished {
                run_id: self.id.clone(),
            });
        };
        self.check_format()?;
        let Some(expected) = &finished.shape_digest else {
            return self.verify();
        };
        let upper = self.open_upper()?;
        let upper_path = self.upper();
        let found = read::read(&Layers {
            upper: upper.as_fd(),
            upper_path: &upper_path,
            lower: None,
            marks: self.marks(),
            started_ns: self.meta.started_unix_ns,
            content: false,
            run_modes: &read::RunModes::new(),
        })?
        .shape_digest;
        if found != *expected {
            return Err(ChangesError::Tampered {
                expected: expected.clone(),
                found,
            });
        }
        Ok(())
    }

    /// Checks the upper against the digest `finish` recorded.
    pub(crate) fn verify(&self) -> Result<(), ChangesError> {
        let Some(finished) = &self.meta.finished else {
            return Err(ChangesError::NotFinished {
                run_id: self.id.clone(),
            });
        };
        self.check_format()?;
        let found = self.scan(false)?.digest;
        if found != finished.digest {
            return Err(ChangesError::Tampered {
                expected: finished.digest.clone(),
                found,
            });
        }
        Ok(())
    }

    /// The change shown for a recorded entry.
    pub(crate) fn change(&self, rec: &Recorded, rules: &FlagRules) -> Change {
        let mut flags = flags_of(
            rec,
            rules,
            &self.meta.workspace,
            &self.meta.protected,
            &self.meta.masked,
            &self.meta.guard,
        );
        if !flags.iter().any(|f| f.code == "protected") {
            let absolute = self.meta.workspace.join(&rec.path);
            let why = match &self.meta.checks {
                Some(c) => recorded::sweep_only_refusal(
                    &c.sweep_only,
                    &self.meta.workspace,
                    &absolute,
                    rec,
                )
                .or_else(|| recorded::link_target_refusal(&c.link_targets, &absolute, rec)),
                None => recorded::predates(rec),
            };
            if let Some(reason) = why {
                flags.insert(
                    0,
                    super::Flag {
                        code: "protected",
                        reason,
                    },
                );
            }
        }
        Change {
            path: rec.path.clone(),
            kind: rec.kind,
            file_type: rec.file_type,
            mode: rec.mode,
            size: rec.size,
            symlink_target: rec.symlink_target.clone(),
            flags,
        }
    }

    /// Called right after the run: reads the change set, records each entry's base and the
    /// upper's digest in `meta.json`, and returns the change set. Called again, it returns
    /// what was recorded (after checking the digest).
    ///
    /// The digest is SHA-256 over every upper entry in walk order (depth first, names sorted
    /// by their bytes), each as its relative path, type, permission bits, size, and the
    /// content's SHA-256, a link's target, a whiteout or an opaque mark, each field length-
    /// prefixed.
    pub fn finish(&mut self, rules: &FlagRules) -> Result<ChangeSet, ChangesError> {
        self.check_live()?;
        if self.meta.finished.is_some() {
            return self.changes(rules);
        }
        // A directory (or file) the command made that its owner cannot read (`chmod 000`)
        // stops the scan of an unprivileged supervisor: it is opened up, and read again.
        // The change set records the bits the command set, and apply writes them.
        let scan = match self.scan(true) {
            Err(e) if denied(&e) => {
                let had = open_up_tree(self.fd.as_fd(), OsStr::new("upper")).map_err(|cause| {
                    ChangesError::Read {
                        path: self.upper(),
                        cause,
                    }
                })?;
                self.scan_with(true, &had)?
            }
            r => r?,
        };
        let empty = scan.entries.is_empty();
        // The identities just recorded are this format's.
        self.meta.format = FORMAT;
        self.meta.finished = Some(super::Finished {
            digest: scan.digest,
            shape_digest: Some(scan.shape_digest),
            ended_unix_ns: now_ns(),
            unchanged_copies: scan.unchanged_copies,
            entries: scan.entries,
        });
        // Nothing changed: nothing to keep (the orchestrator discards it), so nothing to sync.
        self.write_meta_as(!empty)?;
        self.changes_unchecked(rules)
    }

    /// Records the creation guard's patterns the change set is flagged by ([`RunMeta::guard`]),
    /// before the run.
    pub fn record_guard(&mut self, guard: Vec<super::GuardRule>) -> Result<(), ChangesError> {
        self.check_live()?;
        self.meta.guard = guard;
        self.write_meta()
    }

    /// Records what the change set is flagged by instead of a direct run's sweep
    /// ([`RunMeta::checks`]), before the run.
    pub fn record_checks(&mut self, checks: super::RecordedChecks) -> Result<(), ChangesError> {
        self.check_live()?;
        self.meta.checks = Some(checks);
        self.write_meta()
    }

    /// Records why [`RunDir::finish`] failed, for `stockade runs` (best effort: the run's
    /// record and audit log carry it too).
    pub fn record_finish_error(&mut self, error: &str) -> Result<(), ChangesError> {
        self.check_live()?;
        self.meta.finish_error = Some(error.to_owned());
        self.write_meta()
    }

    pub(crate) fn changes_unchecked(&self, rules: &FlagRules) -> Result<ChangeSet, ChangesError> {
        let Some(f) = &self.meta.finished else {
            return Err(ChangesError::NotFinished {
                run_id: self.id.clone(),
            });
        };
        let applied = self.applied();
        Ok(ChangeSet {
            entries: f
                .entries
                .iter()
                .filter(|e| !applied.contains(e.path.as_path()))
                .map(|e| self.change(e, rules))
                .collect(),
            unchanged_copies: f.unchanged_copies,
        })
    }

    /// The entries applied by the applies that completed (`meta.applied`).
    pub(crate) fn applied(&self) -> HashSet<&Path> {
        self.meta.applied.iter().map(PathBuf::as_path).collect()
    }

    /// The change set now. A finished run's is the one recorded (the upper checked against
    /// its digest first), entries already applied left out; an unfinished run's is read
    /// afresh against the workspace.
    pub fn changes(&self, rules: &FlagRules) -> Result<ChangeSet, ChangesError> {
        self.check_live()?;
        if self.meta.finished.is_none() {
            let scan = self.scan(true)?;
            return Ok(ChangeSet {
                entries: scan.entries.iter().map(|e| self.change(e, rules)).collect(),
                unchanged_copies: scan.unchanged_copies,
            });
        }
        self.verify()?;
        self.changes_unchecked(rules)
    }

    /// Bytes of the files in the upper.
    pub(crate) fn upper_size(&self) -> Result<u64, ChangesError> {
        fn visit(dir: std::os::fd::BorrowedFd<'_>, depth: usize) -> std::io::Result<u64> {
            let mut total = 0;
            for name in list(dir)? {
                let Some(st) = stat_child(dir, &name)? else {
                    continue;
                };
                match Ft::from_raw_mode(st.st_mode) {
                    Ft::Directory if depth < read::MAX_DEPTH => {
                        let d = open_child(dir, &name, OFlags::RDONLY | OFlags::DIRECTORY)?;
                        total += visit(d.as_fd(), depth + 1)?;
                    }
                    Ft::RegularFile => total += st.st_size as u64,
                    _ => {}
                }
            }
            Ok(total)
        }
        let upper = self.open_upper()?;
        visit(upper.as_fd(), 0).map_err(|cause| ChangesError::Read {
            path: self.upper(),
            cause,
        })
    }

    /// Removes the whole run directory, never following a link.
    pub fn discard(mut self) -> Result<(), ChangesError> {
        if self.removed {
            return Ok(());
        }
        let _lock = self.lock()?;
        self.remove()
    }

    /// Removes the run directory (the caller holds the lock).
    pub(crate) fn remove(&mut self) -> Result<(), ChangesError> {
        remove_run(self.store_fd.as_fd(), OsStr::new(&self.id)).map_err(|cause| {
            ChangesError::Remove {
                path: self.path.clone(),
                cause,
            }
        })?;
        self.removed = true;
        Ok(())
    }
}

/// What `meta.json` must hold to be read at all.
fn validate(meta: &RunMeta, id: &str) -> Result<(), String> {
    if !(OLDEST_FORMAT..=FORMAT).contains(&meta.format) {
        return Err(format!(
            "format {} (this stockade reads formats {OLDEST_FORMAT} to {FORMAT})",
            meta.format
        ));
    }
    if meta.run_id != id {
        return Err(format!("it names run {:?}, not {id:?}", meta.run_id));
    }
    if !meta.workspace.is_absolute() {
        return Err("the workspace is not an absolute path".into());
    }
    let Some(f) = &meta.finished else {
        return Ok(());
    };
    for pair in f.entries.windows(2) {
        if let [a, b] = pair {
            if a.path >= b.path {
                return Err(format!(
                    "entries out of order or repeated: {} then {}",
                    a.path.display(),
                    b.path.display()
                ));
            }
        }
    }
    for e in &f.entries {
        check_relative(&e.path)?;
        if let Some(h) = &e.sha256 {
            if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("{}: not a SHA-256", e.path.display()));
            }
        }
        if e.file_type == super::FileType::File
            && e.kind != super::ChangeKind::Deleted
            && e.sha256.is_none()
        {
            return Err(format!("{}: a file without its SHA-256", e.path.display()));
        }
    }
    Ok(())
}

/// A path relative to the workspace: plain names only.
/// Whether the scan stopped at a permission refusal.
pub(crate) fn denied(e: &ChangesError) -> bool {
    match e {
        ChangesError::Read { cause, .. } | ChangesError::Open { cause, .. } => {
            crate::beneath::is_denied(cause)
        }
        _ => false,
    }
}

/// Gives every directory of the upper (`name` in the directory `parent`) that this process cannot
/// read, write or search its owner's read, write and search bits, and every file it cannot
/// read its owner's read bit. The sandbox is gone and the upper is the caller's (made by its
/// sandbox): a command's `mkdir d; chmod 000 d` must not make the change set unreadable, and
/// so unreviewable, to an unprivileged supervisor. The change set then records (and `apply`
/// writes) those entries with those bits. Every step goes through a descriptor of the
/// directory above, never through a link; only what this process owns (or root) is changed.
///
/// Returns the bits each entry it opened up had (by path relative to `name`): the change set
/// records those, the bits the run set ([`read::Layers::run_modes`]).
pub(crate) fn open_up_tree(
    parent: std::os::fd::BorrowedFd<'_>,
    name: &OsStr,
) -> std::io::Result<read::RunModes> {
    /// The bits `name` had, if it was opened up.
    fn open_up(
        parent: std::os::fd::BorrowedFd<'_>,
        name: &OsStr,
        dir: bool,
    ) -> std::io::Result<Option<u32>> {
        use rustix::fs::Access;
        let flags = if dir {
            OFlags::PATH | OFlags::DIRECTORY
        } else {
            OFlags::PATH
        };
        let fd = open_child(parent, name, flags)?;
        let need = if dir {
            Access::READ_OK | Access::WRITE_OK | Access::EXEC_OK
        } else {
            Access::READ_OK
        };
        if rustix::fs::accessat(&fd, "", need, AtFlags::EMPTY_PATH | AtFlags::EACCESS).is_ok() {
            return Ok(None);
        }
        let st = rustix::fs::fstat(&fd).map_err(io_err)?;
        let euid = rustix::process::geteuid();
        if !euid.is_root() && st.st_uid != euid.as_raw() {
            return Ok(None);
        }
        let bits = if dir { 0o700 } else { 0o400 };
        let had = st.st_mode & 0o7777;
        crate::beneath::chmod_fd(fd.as_fd(), had | bits)?;
        Ok(Some(had))
    }
    fn walk(
        parent: std::os::fd::BorrowedFd<'_>,
        name: &OsStr,
        rel: &Path,
        depth: usize,
        had: &mut read::RunModes,
    ) -> std::io::Result<()> {
        if let Some(m) = open_up(parent, name, true)? {
            had.insert(rel.to_path_buf(), m);
        }
        let dir = open_child(parent, name, OFlags::RDONLY | OFlags::DIRECTORY)?;
        for child in list(dir.as_fd())? {
            let Some(st) = stat_child(dir.as_fd(), &child)? else {
                continue;
            };
            let child_rel = rel.join(&child);
            match Ft::from_raw_mode(st.st_mode) {
                Ft::Directory if depth < read::MAX_DEPTH => {
                    walk(dir.as_fd(), &child, &child_rel, depth + 1, had)?
                }
                Ft::RegularFile => {
                    if let Some(m) = open_up(dir.as_fd(), &child, false)? {
                        had.insert(child_rel, m);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
    let mut had = read::RunModes::new();
    walk(parent, name, Path::new(""), 0, &mut had)?;
    Ok(had)
}

pub(crate) fn check_relative(p: &Path) -> Result<(), String> {
    if p.as_os_str().is_empty()
        || p.as_os_str().as_bytes().contains(&0)
        || !p.components().all(|c| matches!(c, Component::Normal(_)))
    {
        return Err(format!("{:?} is not a plain relative path", p));
    }
    Ok(())
}

/// `applied.log`, open for appending.
pub(crate) struct AppliedLog {
    file: std::fs::File,
    path: PathBuf,
}

impl AppliedLog {
    /// Appends `{"op": OP, "path": PATH}` and a newline, in one write.
    pub(crate) fn line(&mut self, op: &str, rel: &Path) -> Result<(), ChangesError> {
        let line = LogLine {
            op: op.to_owned(),
            path: rel.to_path_buf(),
        };
        let mut text = serde_json::to_vec(&line).map_err(|e| ChangesError::Write {
            path: self.path.clone(),
            cause: std::io::Error::other(e),
        })?;
        text.push(b'\n');
        self.file
            .write_all(&text)
            .map_err(|cause| ChangesError::Write {
                path: self.path.clone(),
                cause,
            })
    }
}

/// An exclusive `flock` on the store's `.lock` (see [`RunDir::lock`]).
pub(super) fn lock_store(store_fd: BorrowedFd<'_>, store: &Path) -> Result<OwnedFd, ChangesError> {
    let path = store.join(".lock");
    let fd = rustix::fs::openat2(
        store_fd,
        ".lock",
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
        resolve(),
    )
    .map_err(|e| ChangesError::Lock {
        path: path.clone(),
        cause: io_err(e),
    })?;
    rustix::fs::flock(&fd, FlockOperation::LockExclusive).map_err(|e| ChangesError::Lock {
        path,
        cause: io_err(e),
    })?;
    Ok(fd)
}
