//! Where the run record (`--report`) and the audit log (`--audit`) are written, opened so that
//! nothing the sandbox controls can redirect the write (issue 15, "no confused deputy").
//!
//! The supervisor writes these files with the caller's rights after (and, for the audit log,
//! during) a run. A path inside a directory the command can write would let it plant a
//! symbolic link or a hard link to another file of the caller's (`~/.bashrc`) and have the
//! record written there. So:
//!
//! 1. [`RecordPath::locate`] resolves the directory of the path before the run starts, one
//!    component at a time with `O_PATH | O_NOFOLLOW`, noting the directory of every symbolic
//!    link it follows, and keeps the final directory open: later swaps of a component do not
//!    move it.
//! 2. [`RecordPath::refuse_inside`] refuses the path (`E_UNSAFE_RECORD_PATH`) when that
//!    directory, or a directory holding a link on the way, lies in a writable root of the run.
//! 3. The audit log is opened relative to the directory with `O_NOFOLLOW | O_NONBLOCK` (a link
//!    fails, a FIFO cannot block) and must be a regular file with one link, owned by the
//!    caller ([`RecordPath::open_append`]). The report is written to a new file (`O_EXCL`)
//!    and renamed over the name ([`RecordPath::replace`]): a rename replaces a link planted
//!    at the name instead of following it.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::Error;

/// Code of a `--report`/`--audit` path the sandbox could redirect.
pub const E_UNSAFE_RECORD_PATH: &str = sandbox::Code::UnsafeRecordPath.as_str();

/// Symbolic links followed at most while resolving the directory (as the kernel's 40).
const MAX_LINKS: usize = 40;

/// Which record a path is for, to name it in errors.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Which {
    Report,
    Audit,
}

impl Which {
    fn noun(self) -> &'static str {
        match self {
            Which::Report => "the run record",
            Which::Audit => "the audit log",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Which::Report => "--report",
            Which::Audit => "--audit",
        }
    }

    fn example(self) -> &'static str {
        match self {
            Which::Report => "/var/tmp/stockade-report.json",
            Which::Audit => "/var/tmp/stockade-audit.jsonl",
        }
    }
}

/// A record file's directory, held open, and its name in it.
#[derive(Debug)]
pub(crate) struct RecordPath {
    which: Which,
    /// The path as given.
    path: PathBuf,
    dir: OwnedFd,
    /// The directory's real path (no symbolic links).
    dir_path: PathBuf,
    name: OsString,
    /// Directories that held a symbolic link the resolution followed.
    links_in: Vec<PathBuf>,
}

fn errno_io(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

impl RecordPath {
    /// Resolves the directory of `path` (relative to the current directory) and holds it open.
    pub(crate) fn locate(path: &Path, which: Which) -> Result<RecordPath, Error> {
        let unsafe_path = |reason: String| Error::UnsafeRecordPath {
            flag: which.flag(),
            path: path.to_path_buf(),
            reason,
            hint: format!(
                "give {} a file path, e.g. {} {}",
                which.flag(),
                which.flag(),
                which.example()
            ),
        };
        let name = match path.components().next_back() {
            Some(Component::Normal(n)) => n.to_os_string(),
            _ => return Err(unsafe_path("it does not end in a file name".into())),
        };
        let io = |what: &str, cause: std::io::Error| Error::Io {
            what: format!("{what} of {} {}", which.noun(), path.display()),
            cause,
        };
        let parent = path.parent().unwrap_or(Path::new(""));
        let absolute = if parent.is_absolute() {
            parent.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| io("read the current directory for the directory", e))?
                .join(parent)
        };
        let (dir, dir_path, links_in) =
            resolve_dir(&absolute).map_err(|e| io("open the directory", e))?;
        Ok(RecordPath {
            which,
            path: path.to_path_buf(),
            dir,
            dir_path,
            name,
            links_in,
        })
    }

    /// Refuses the path when the command could write its directory, or a directory holding a
    /// symbolic link on the way to it (`roots`: the run's writable roots, canonical).
    pub(crate) fn refuse_inside(&self, roots: &[PathBuf]) -> Result<(), Error> {
        let inside = |p: &Path| roots.iter().find(|r| policy::is_within(p, r));
        let reason = if let Some(root) = inside(&self.dir_path) {
            let place = if root == &self.dir_path {
                "is writable by the command".to_string()
            } else {
                format!("lies in {}, which the command can write", root.display())
            };
            format!(
                "its directory {} {place}: it could put a link to another of your files there \
                 and have the record written through it",
                self.dir_path.display(),
            )
        } else if let Some((dir, root)) = self
            .links_in
            .iter()
            .find_map(|d| inside(d).map(|root| (d, root)))
        {
            format!(
                "the path follows a symbolic link in {}, which lies in {}, a directory the \
                 command can write",
                dir.display(),
                root.display()
            )
        } else {
            return Ok(());
        };
        Err(self.refusal(
            reason,
            format!(
                "write {} outside the workspace and every --allow-write directory, e.g. {} {}",
                self.which.noun(),
                self.which.flag(),
                self.which.example()
            ),
        ))
    }

    fn refusal(&self, reason: String, hint: String) -> Error {
        Error::UnsafeRecordPath {
            flag: self.which.flag(),
            path: self.path.clone(),
            reason,
            hint,
        }
    }

    /// The existing file must be one stockade may write into: not a link, not a FIFO or
    /// device, not a hard link of another file, the caller's own.
    fn planted(&self, what: String) -> Error {
        self.refusal(
            what,
            format!(
                "remove {} if you did not put it there (a command run earlier may have), or choose another {} path",
                self.path.display(),
                self.which.flag()
            ),
        )
    }

    /// Opens the audit log for appending (created when missing).
    pub(crate) fn open_append(&self) -> Result<File, Error> {
        let flags = OFlags::WRONLY
            | OFlags::APPEND
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::CLOEXEC
            | OFlags::NOCTTY;
        let fd = match rustix::fs::openat(&self.dir, &self.name, flags, Mode::from_raw_mode(0o666))
        {
            Ok(fd) => fd,
            Err(Errno::LOOP) => return Err(self.planted("it is a symbolic link".into())),
            Err(Errno::NXIO) => return Err(self.planted("it is a FIFO or socket".into())),
            Err(e) => {
                return Err(Error::Io {
                    what: format!("open {} {}", self.which.noun(), self.path.display()),
                    cause: errno_io(e),
                })
            }
        };
        self.check_opened(&fd)?;
        Ok(File::from(fd))
    }

    fn check_opened(&self, fd: &OwnedFd) -> Result<(), Error> {
        let st = rustix::fs::fstat(fd).map_err(|e| Error::Io {
            what: format!("inspect {} {}", self.which.noun(), self.path.display()),
            cause: errno_io(e),
        })?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(self.planted("it is not a regular file".into()));
        }
        if st.st_nlink != 1 {
            return Err(self.planted(format!(
                "it has {} hard links: writing to it would change another file too",
                st.st_nlink
            )));
        }
        let me = rustix::process::geteuid().as_raw();
        if st.st_uid != me {
            return Err(self.planted(format!(
                "it belongs to uid {}, not to you (uid {me})",
                st.st_uid
            )));
        }
        Ok(())
    }

    /// Writes `bytes` as the whole file: a new file beside it, renamed over the name.
    pub(crate) fn replace(&self, bytes: &[u8]) -> Result<(), Error> {
        let io = |what: &str, cause: std::io::Error| Error::Io {
            what: format!("{what} {} {}", self.which.noun(), self.path.display()),
            cause,
        };
        let (tmp, fd) = self.create_temp().map_err(|e| io("create a file for", e))?;
        let mut file = File::from(fd);
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        let renamed = written.and_then(|()| {
            rustix::fs::renameat(&self.dir, &tmp, &self.dir, &self.name).map_err(errno_io)
        });
        if let Err(e) = renamed {
            let _ = rustix::fs::unlinkat(&self.dir, &tmp, AtFlags::empty());
            return Err(io("write", e));
        }
        Ok(())
    }

    /// A fresh file in the directory (`O_EXCL`: never an existing file or link).
    fn create_temp(&self) -> std::io::Result<(OsString, OwnedFd)> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
        let mut last = Errno::EXIST;
        for n in 0..100u32 {
            let mut tmp = OsString::from(".");
            tmp.push(&self.name);
            tmp.push(format!(".{}-{n}.tmp", std::process::id()));
            match rustix::fs::openat(&self.dir, &tmp, flags, Mode::from_raw_mode(0o666)) {
                Ok(fd) => return Ok((tmp, fd)),
                Err(Errno::EXIST) => last = Errno::EXIST,
                Err(e) => return Err(errno_io(e)),
            }
        }
        Err(errno_io(last))
    }
}

/// Opens the directory `absolute` one component at a time, never following a symbolic link
/// implicitly: each link is read and its target resolved the same way, and the directory it
/// lay in is noted. Returns the directory, its real path and those directories.
fn resolve_dir(absolute: &Path) -> std::io::Result<(OwnedFd, PathBuf, Vec<PathBuf>)> {
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let root = || rustix::fs::open("/", dir_flags, Mode::empty()).map_err(errno_io);
    let mut queue: VecDeque<OsString> = components(absolute);
    let mut cur = root()?;
    let mut cur_path = PathBuf::from("/");
    let mut links_in = Vec::new();
    let mut links = 0usize;
    while let Some(c) = queue.pop_front() {
        if c.is_empty() {
            cur = root()?;
            cur_path = PathBuf::from("/");
            continue;
        }
        if c == ".." {
            cur = rustix::fs::openat(&cur, "..", dir_flags, Mode::empty()).map_err(errno_io)?;
            cur_path.pop();
            continue;
        }
        let fd = rustix::fs::openat(
            &cur,
            &c,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno_io)?;
        let st = rustix::fs::fstat(&fd).map_err(errno_io)?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {
                cur = fd;
                cur_path.push(&c);
            }
            FileType::Symlink => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(errno_io(Errno::LOOP));
                }
                let target = rustix::fs::readlinkat(&cur, &c, Vec::new()).map_err(errno_io)?;
                links_in.push(cur_path.clone());
                let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
                for t in components(&target).into_iter().rev() {
                    queue.push_front(t);
                }
            }
            _ => return Err(errno_io(Errno::NOTDIR)),
        }
    }
    // The path of what is held, as the kernel sees it (a check that the walk agrees).
    let held = std::fs::read_link(format!("/proc/self/fd/{}", cur.as_fd().as_raw_fd()))?;
    if held != cur_path {
        return Err(std::io::Error::other(format!(
            "the directory moved while it was opened ({} is now {})",
            cur_path.display(),
            held.display()
        )));
    }
    Ok((cur, cur_path, links_in))
}

/// `path`'s components as names: `""` for the root, `..`, and normal names (`.` dropped).
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::RootDir | Component::Prefix(_) => Some(OsString::new()),
            Component::CurDir => None,
            Component::ParentDir => Some("..".into()),
            Component::Normal(n) => Some(n.to_os_string()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let p = std::fs::canonicalize(t.path()).unwrap();
        (t, p)
    }

    #[test]
    fn links_on_the_way_are_noted_and_resolved() {
        let (_t, d) = dir();
        std::fs::create_dir_all(d.join("real/sub")).unwrap();
        std::fs::create_dir_all(d.join("ws")).unwrap();
        std::os::unix::fs::symlink(d.join("real"), d.join("ws/link")).unwrap();
        let rp = RecordPath::locate(&d.join("ws/link/sub/../sub/r.json"), Which::Report).unwrap();
        assert_eq!(rp.dir_path, d.join("real/sub"));
        assert_eq!(rp.links_in, vec![d.join("ws")]);
        // The directory in a root: refused.
        let err = rp.refuse_inside(&[d.join("real")]).unwrap_err();
        assert_eq!(err.code(), E_UNSAFE_RECORD_PATH);
        assert!(err.to_string().contains("lies in"), "{err}");
        // Only the link's directory in a root: refused.
        let err = rp.refuse_inside(&[d.join("ws")]).unwrap_err();
        assert!(err.to_string().contains("symbolic link in"), "{err}");
        // Roots elsewhere: allowed.
        rp.refuse_inside(&[d.join("other")]).unwrap();
        // `..` after a link goes to the link target's parent, as the kernel does.
        let rp = RecordPath::locate(&d.join("ws/link/sub/../x.json"), Which::Report).unwrap();
        assert_eq!(rp.dir_path, d.join("real"));
    }

    #[test]
    fn report_replaces_a_planted_link_instead_of_following_it() {
        let (_t, d) = dir();
        std::fs::write(d.join("victim"), "precious").unwrap();
        std::os::unix::fs::symlink(d.join("victim"), d.join("r.json")).unwrap();
        let rp = RecordPath::locate(&d.join("r.json"), Which::Report).unwrap();
        rp.replace(b"{}\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("victim")).unwrap(),
            "precious"
        );
        assert_eq!(std::fs::read_to_string(d.join("r.json")).unwrap(), "{}\n");
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            2,
            "no temporary file left"
        );
    }

    #[test]
    fn audit_refuses_links_hard_links_and_fifos() {
        let (_t, d) = dir();
        std::fs::write(d.join("victim"), "precious").unwrap();
        std::os::unix::fs::symlink(d.join("victim"), d.join("sym")).unwrap();
        std::fs::hard_link(d.join("victim"), d.join("hard")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            d.join("fifo"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        for name in ["sym", "hard", "fifo"] {
            let rp = RecordPath::locate(&d.join(name), Which::Audit).unwrap();
            let err = rp.open_append().unwrap_err();
            assert_eq!(err.code(), E_UNSAFE_RECORD_PATH, "{name}: {err}");
        }
        assert_eq!(
            std::fs::read_to_string(d.join("victim")).unwrap(),
            "precious"
        );
        let rp = RecordPath::locate(&d.join("new.jsonl"), Which::Audit).unwrap();
        rp.open_append().unwrap().write_all(b"x\n").unwrap();
        rp.open_append().unwrap().write_all(b"y\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("new.jsonl")).unwrap(),
            "x\ny\n"
        );
    }
}
