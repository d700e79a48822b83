//! The change store: a directory of the caller's that nobody else can write, holding one
//! directory per run (see [`RunDir`]). Every run directory is reached from the store's
//! descriptor without following a link. Applying and discarding hold an exclusive `flock` on
//! `<store>/.lock`.

use std::ffi::OsStr;
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType as Ft, Mode, OFlags};
use rustix::io::Errno;
use serde::Serialize;

use super::remove::remove_run;
use super::run::{lock_store, RunDir};
use super::{now_ns, ChangesError, RunMeta};
use crate::beneath::{errno_io, list, open_child};

/// The change store, held open.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    fd: OwnedFd,
}

/// One pending change set, as `stockade runs` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub run_id: String,
    #[serde(serialize_with = "super::pathser::one::serialize")]
    pub path: PathBuf,
    /// `None` when `meta.json` cannot be read (then `problem` says why).
    #[serde(serialize_with = "super::pathser::option::serialize")]
    pub workspace: Option<PathBuf>,
    pub argv: Vec<String>,
    pub started_unix_ns: u128,
    /// Seconds since the run started.
    pub age_secs: u64,
    /// Bytes of the files in the upper.
    pub size: u64,
    pub finished: bool,
    /// Entries recorded (finished runs), and how many of them were applied.
    pub entries: usize,
    pub applied: usize,
    pub problem: Option<String>,
    /// Why the change set could not be read and sealed after its run (not finished).
    pub finish_error: Option<String>,
}

fn io_err(e: Errno) -> std::io::Error {
    errno_io(e)
}

/// A run id is one plain file name: letters, digits, `.`, `_`, `-`, not starting with `.`.
pub(crate) fn check_run_id(id: &str) -> Result<(), ChangesError> {
    let bad = |reason: &str| {
        Err(ChangesError::BadRunId {
            id: id.to_owned(),
            reason: reason.into(),
        })
    };
    if id.is_empty() || id.len() > 128 {
        return bad("it must be 1 to 128 characters long");
    }
    if id.starts_with('.') {
        return bad("it must not start with `.`");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("it may hold only letters, digits, `.`, `_` and `-`");
    }
    Ok(())
}

impl Store {
    /// Opens the store, creating it (and missing parents, mode 0700) if missing. Refuses a
    /// store that is a symbolic link, not a directory, not the caller's (effective uid), or
    /// writable by group or others.
    pub fn open(dir: &Path) -> Result<Store, ChangesError> {
        if !dir.is_absolute() || dir.components().any(|c| c == Component::ParentDir) {
            return Err(ChangesError::Locate {
                reason: format!("{} is not an absolute path without `..`", dir.display()),
            });
        }
        let unsafe_dir = |reason: &str| ChangesError::StoreUnsafe {
            dir: dir.to_path_buf(),
            reason: reason.into(),
        };
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.file_type().is_symlink() => return Err(unsafe_dir("it is a symbolic link")),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|cause| ChangesError::Create {
                        path: dir.to_path_buf(),
                        cause,
                    })?;
            }
            Err(cause) => {
                return Err(ChangesError::Open {
                    path: dir.to_path_buf(),
                    cause,
                })
            }
        }
        let fd = match rustix::fs::open(
            dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::LOOP) => return Err(unsafe_dir("it is a symbolic link")),
            Err(Errno::NOTDIR) => return Err(unsafe_dir("it is not a directory")),
            Err(e) => {
                return Err(ChangesError::Open {
                    path: dir.to_path_buf(),
                    cause: io_err(e),
                })
            }
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| ChangesError::Open {
            path: dir.to_path_buf(),
            cause: io_err(e),
        })?;
        if Ft::from_raw_mode(st.st_mode) != Ft::Directory {
            return Err(unsafe_dir("it is not a directory"));
        }
        let me = rustix::process::geteuid().as_raw();
        if st.st_uid != me {
            return Err(unsafe_dir(&format!(
                "it belongs to uid {}, not to the caller (uid {me})",
                st.st_uid
            )));
        }
        if st.st_mode & 0o022 != 0 {
            return Err(unsafe_dir("others can write it"));
        }
        // The name the store goes by from now on: its ancestors' links resolved (the
        // descriptor is what is used; the path is for messages and for the mount).
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        Ok(Store { dir, fd })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Makes `<run-id>/` (0700; refused if it exists) with `upper/` and `work/` inside, and
    /// writes `meta.json` (0600). `upper_owner`: the upper's owner (a root caller's sandbox
    /// writes as another id); the upper's mode is `root_mode` (the workspace's permission
    /// bits). Refuses a store inside the workspace.
    pub fn create_run(
        &self,
        meta: &RunMeta,
        upper_owner: Option<(u32, u32)>,
        root_mode: u32,
    ) -> Result<RunDir, ChangesError> {
        check_run_id(&meta.run_id)?;
        if !meta.workspace.is_absolute() {
            return Err(ChangesError::BadPath {
                path: meta.workspace.clone(),
                reason: "the workspace must be an absolute path".into(),
            });
        }
        if policy::is_within(&self.dir, &meta.workspace) {
            return Err(ChangesError::StoreUnsafe {
                dir: self.dir.clone(),
                reason: format!(
                    "it lies inside the workspace {}, which the run writes",
                    meta.workspace.display()
                ),
            });
        }
        let path = self.dir.join(&meta.run_id);
        let create = |p: &Path, cause: std::io::Error| ChangesError::Create {
            path: p.to_path_buf(),
            cause,
        };
        let ws = std::fs::metadata(&meta.workspace).map_err(|cause| ChangesError::Open {
            path: meta.workspace.clone(),
            cause,
        })?;
        let mut meta = meta.clone();
        meta.workspace_ino = Some(std::os::unix::fs::MetadataExt::ino(&ws));
        meta.workspace_dev = Some(std::os::unix::fs::MetadataExt::dev(&ws));
        rustix::fs::mkdirat(&self.fd, meta.run_id.as_str(), Mode::from_raw_mode(0o700))
            .map_err(|e| create(&path, io_err(e)))?;
        let made = (|| -> Result<RunDir, ChangesError> {
            let fd = open_child(
                self.fd.as_fd(),
                OsStr::new(&meta.run_id),
                OFlags::PATH | OFlags::DIRECTORY,
            )
            .map_err(|e| create(&path, e))?;
            let run = RunDir {
                id: meta.run_id.clone(),
                path: path.clone(),
                fd,
                store_fd: self.fd.try_clone().map_err(|e| create(&path, e))?,
                store: self.dir.clone(),
                meta: meta.clone(),
                removed: false,
            };
            let here = run.open_dir(".").map_err(|e| create(&path, e))?;
            rustix::fs::fchmod(&here, Mode::from_raw_mode(0o700))
                .map_err(|e| create(&path, io_err(e)))?;
            for (name, mode) in [("upper", root_mode & 0o7777), ("work", 0o700)] {
                let p = path.join(name);
                rustix::fs::mkdirat(&run.fd, name, Mode::from_raw_mode(0o700))
                    .map_err(|e| create(&p, io_err(e)))?;
                let d = run.open_dir(name).map_err(|e| create(&p, e))?;
                if let (Some((uid, gid)), "upper") = (upper_owner, name) {
                    rustix::fs::fchown(
                        &d,
                        Some(rustix::fs::Uid::from_raw(uid)),
                        Some(rustix::fs::Gid::from_raw(gid)),
                    )
                    .map_err(|e| create(&p, io_err(e)))?;
                }
                rustix::fs::fchmod(&d, Mode::from_raw_mode(mode))
                    .map_err(|e| create(&p, io_err(e)))?;
            }
            run.write_meta_as(false)?;
            Ok(run)
        })();
        if made.is_err() {
            let _ = remove_run(self.fd.as_fd(), OsStr::new(&meta.run_id));
        }
        made
    }

    fn open_run(&self, id: &str) -> Result<RunDir, ChangesError> {
        check_run_id(id)?;
        let path = self.dir.join(id);
        let fd = match open_child(
            self.fd.as_fd(),
            OsStr::new(id),
            OFlags::PATH | OFlags::DIRECTORY,
        ) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                return Err(ChangesError::NotFound {
                    what: format!("with run id {id}"),
                })
            }
            Err(cause) => return Err(ChangesError::Open { path, cause }),
        };
        let store_fd = self.fd.try_clone().map_err(|cause| ChangesError::Open {
            path: path.clone(),
            cause,
        })?;
        let mut run = RunDir {
            id: id.to_owned(),
            path,
            fd,
            store_fd,
            store: self.dir.clone(),
            meta: RunMeta::new(id, Path::new("/"), &[], false, (0, 0), (0, 0), &[], &[]),
            removed: false,
        };
        run.meta = run.read_meta()?;
        Ok(run)
    }

    fn run_ids(&self) -> Result<Vec<String>, ChangesError> {
        let dir = open_child(
            self.fd.as_fd(),
            OsStr::new("."),
            OFlags::RDONLY | OFlags::DIRECTORY,
        )
        .and_then(|d| list(d.as_fd()))
        .map_err(|cause| ChangesError::Read {
            path: self.dir.clone(),
            cause,
        })?;
        Ok(dir
            .into_iter()
            .filter_map(|n| n.to_str().map(str::to_owned))
            .filter(|n| check_run_id(n).is_ok())
            .collect())
    }

    /// The pending change sets, newest first.
    pub fn runs(&self) -> Result<Vec<RunSummary>, ChangesError> {
        self.summaries(true)
    }

    /// [`Store::runs`] without reading the uppers (every `size` is 0): what counting and
    /// choosing change sets by workspace and age needs, in time that does not grow with
    /// what they hold.
    pub fn runs_without_size(&self) -> Result<Vec<RunSummary>, ChangesError> {
        self.summaries(false)
    }

    fn summaries(&self, sizes: bool) -> Result<Vec<RunSummary>, ChangesError> {
        let now = now_ns();
        let mut out = Vec::new();
        for id in self.run_ids()? {
            let path = self.dir.join(&id);
            let mut s = RunSummary {
                run_id: id.clone(),
                path,
                workspace: None,
                argv: Vec::new(),
                started_unix_ns: 0,
                age_secs: 0,
                size: 0,
                finished: false,
                entries: 0,
                applied: 0,
                problem: None,
                finish_error: None,
            };
            match self.open_run(&id) {
                Ok(run) => {
                    let m = &run.meta;
                    s.workspace = Some(m.workspace.clone());
                    s.argv = m.argv.clone();
                    s.started_unix_ns = m.started_unix_ns;
                    s.age_secs = (now.saturating_sub(m.started_unix_ns) / 1_000_000_000) as u64;
                    s.finished = m.finished.is_some();
                    s.entries = m.finished.as_ref().map_or(0, |f| f.entries.len());
                    s.applied = m.applied.len();
                    s.finish_error = m.finish_error.clone();
                    if sizes {
                        match run.upper_size() {
                            Ok(n) => s.size = n,
                            Err(e) => s.problem = Some(e.to_string()),
                        }
                    }
                }
                Err(ChangesError::NotFound { .. }) => continue,
                Err(e) => s.problem = Some(e.to_string()),
            }
            out.push(s);
        }
        out.sort_by(|a, b| (b.started_unix_ns, &b.run_id).cmp(&(a.started_unix_ns, &a.run_id)));
        Ok(out)
    }

    /// Discards the change set `id`: [`RunDir::discard`], or, when its record cannot be read
    /// (`meta.json` missing or corrupt, an earlier removal cut short), its directory removed
    /// under the store's lock all the same. No such change set: `NotFound`.
    pub fn discard(&self, id: &str) -> Result<(), ChangesError> {
        match self.open_run(id) {
            Ok(run) => run.discard(),
            Err(
                e @ (ChangesError::NotFound { .. }
                | ChangesError::BadRunId { .. }
                | ChangesError::Open { .. }),
            ) => Err(e),
            Err(_) => {
                let _lock = lock_store(self.fd.as_fd(), &self.dir)?;
                remove_run(self.fd.as_fd(), OsStr::new(id)).map_err(|cause| ChangesError::Remove {
                    path: self.dir.join(id),
                    cause,
                })
            }
        }
    }

    /// The run `id`; without one, the newest whose workspace is `workspace` (when given),
    /// else the newest.
    pub fn find(&self, id: Option<&str>, workspace: Option<&Path>) -> Result<RunDir, ChangesError> {
        if let Some(id) = id {
            return self.open_run(id);
        }
        let mut best: Option<RunDir> = None;
        for id in self.run_ids()? {
            let Ok(run) = self.open_run(&id) else {
                continue;
            };
            if workspace.is_some_and(|w| w != run.meta.workspace) {
                continue;
            }
            let newer = best.as_ref().is_none_or(|b| {
                (run.meta.started_unix_ns, &run.id) > (b.meta.started_unix_ns, &b.id)
            });
            if newer {
                best = Some(run);
            }
        }
        best.ok_or_else(|| ChangesError::NotFound {
            what: match workspace {
                Some(w) => format!("for the workspace {}", w.display()),
                None => "in the store".into(),
            },
        })
    }
}

impl fmt::Display for RunSummary {
    /// `ID  AGE  SIZE  N changes  WORKSPACE  ARGV`, control characters shown as `?`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_control() { '?' } else { c })
                .collect()
        };
        let age = match self.age_secs {
            s if s < 120 => format!("{s}s ago"),
            s if s < 7200 => format!("{}m ago", s / 60),
            s if s < 172_800 => format!("{}h ago", s / 3600),
            s => format!("{}d ago", s / 86_400),
        };
        let size = match self.size {
            b if b < 10 << 10 => format!("{b} B"),
            b if b < 10 << 20 => format!("{} KiB", b >> 10),
            b => format!("{} MiB", b >> 20),
        };
        let state = if let Some(p) = &self.problem {
            format!("unreadable: {}", clean(p))
        } else if let (false, Some(e)) = (self.finished, &self.finish_error) {
            format!("not finished: {}", clean(e))
        } else if !self.finished {
            "not finished".into()
        } else if self.applied > 0 {
            format!("{} changes, {} applied", self.entries, self.applied)
        } else {
            format!(
                "{} change{}",
                self.entries,
                if self.entries == 1 { "" } else { "s" }
            )
        };
        let ws = self
            .workspace
            .as_ref()
            .map(|w| clean(&w.display().to_string()))
            .unwrap_or_default();
        write!(
            f,
            "{}  {age}  {size}  {state}  {ws}  {}",
            self.run_id,
            clean(&self.argv.join(" "))
        )
    }
}
