//! A run under a disk bound (`--disk`): its view's upper lived on a tmpfs of that size (the
//! backend hands over the tmpfs's mount descriptor). The change set is read there, where
//! overlayfs's marks (origin, opaque) are as the overlay left them, then copied into the
//! run's `upper/` in the store and checked against the digest just read.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType as Ft, Mode, OFlags};

use super::read::{self, Layers, MAX_DEPTH};
use super::{ChangeSet, ChangesError, FlagRules, RunDir};
use crate::beneath::{errno_io, list, open_child, stat_child};

impl RunDir {
    /// [`RunDir::finish`] for a run whose upper is `bounded/upper` (`bounded`: the tmpfs's
    /// mount descriptor). `keep`: the change set is copied into this run's `upper/` (a review
    /// run); otherwise only read (an ephemeral run, discarded next).
    pub fn finish_from(
        &mut self,
        bounded: BorrowedFd<'_>,
        rules: &FlagRules,
        keep: bool,
    ) -> Result<ChangeSet, ChangesError> {
        self.check_live()?;
        let from_path = Path::new("(bounded upper)");
        let lower = self.open_workspace()?;
        let read_bounded =
            |run_modes: &read::RunModes| -> Result<(OwnedFd, read::Scan), ChangesError> {
                let src = open_child(
                    bounded,
                    OsStr::new("upper"),
                    OFlags::RDONLY | OFlags::DIRECTORY,
                )
                .map_err(|cause| ChangesError::Read {
                    path: from_path.to_path_buf(),
                    cause,
                })?;
                let scan = read::read(&Layers {
                    upper: src.as_fd(),
                    upper_path: from_path,
                    lower: Some((lower.as_fd(), self.meta.workspace.as_path())),
                    marks: self.marks(),
                    started_ns: self.meta.started_unix_ns,
                    content: true,
                    run_modes,
                })?;
                Ok((src, scan))
            };
        // What the command closed to its owner is opened up, as in `finish`.
        let (src, scan) = match read_bounded(&read::RunModes::new()) {
            Err(e) if super::run::denied(&e) => {
                let had =
                    super::run::open_up_tree(bounded, OsStr::new("upper")).map_err(|cause| {
                        ChangesError::Read {
                            path: from_path.to_path_buf(),
                            cause,
                        }
                    })?;
                read_bounded(&had)?
            }
            r => r?,
        };
        if keep {
            let dst = self.open_upper()?;
            let opaque = self.marks().opaque_name();
            copy_dir(src.as_fd(), dst.as_fd(), &opaque, 0).map_err(|cause| {
                ChangesError::Write {
                    path: self.upper(),
                    cause,
                }
            })?;
            let copied = self.scan(false)?.digest;
            if copied != scan.digest {
                return Err(ChangesError::Tampered {
                    expected: scan.digest,
                    found: copied,
                });
            }
        }
        self.meta.finished = Some(super::Finished {
            digest: scan.digest,
            shape_digest: Some(scan.shape_digest),
            ended_unix_ns: super::now_ns(),
            unchanged_copies: scan.unchanged_copies,
            entries: scan.entries,
        });
        if keep {
            self.write_meta()?;
        }
        self.changes_unchecked(rules)
    }
}

/// Copies what `src` holds into `dst` (both directories): directories with their mode and
/// overlayfs's opaque mark (`opaque`: its xattr name), files with their content and mode,
/// symbolic links, whiteouts (character devices 0/0) and fifos. Nothing is followed. Names of
/// one file (hard links) stay one file: a 256 KiB file with 1000 links made 251 MB of the
/// store from a run bounded to 1 MiB.
fn copy_dir(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    opaque: &[u8],
    depth: usize,
) -> std::io::Result<()> {
    let mut links = Links {
        root: dst,
        rel: PathBuf::new(),
        seen: std::collections::HashMap::new(),
    };
    copy_tree(src, dst, opaque, depth, &mut links)
}

/// The files with more than one name copied so far: where their first copy is, relative to
/// the copy's root.
struct Links<'a> {
    root: BorrowedFd<'a>,
    rel: PathBuf,
    seen: std::collections::HashMap<(u64, u64), PathBuf>,
}

fn copy_tree(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    opaque: &[u8],
    depth: usize,
    links: &mut Links<'_>,
) -> std::io::Result<()> {
    if depth >= MAX_DEPTH {
        return Err(std::io::Error::other("the change set is nested too deep"));
    }
    let st = rustix::fs::fstat(src).map_err(errno_io)?;
    rustix::fs::fchmod(dst, Mode::from_raw_mode(st.st_mode & 0o7777)).map_err(errno_io)?;
    let name = OsStr::from_bytes(opaque);
    let mut value = [0u8; 8];
    if let Ok(n) = rustix::fs::fgetxattr(src, name, &mut value) {
        rustix::fs::fsetxattr(dst, name, &value[..n], rustix::fs::XattrFlags::CREATE)
            .map_err(errno_io)?;
    }
    for entry in list(src)? {
        let Some(st) = stat_child(src, &entry)? else {
            continue;
        };
        // The copy is made by the supervisor (root, for a root caller): a set-id bit the
        // command managed to set would make a root-owned set-id file of its content. A
        // directory's setgid bit is no such thing (it runs nothing) and is inherited: every
        // directory made in a group-shared (setgid) tree has it.
        let dir_setgid = Ft::from_raw_mode(st.st_mode) == Ft::Directory && st.st_mode & 0o4000 == 0;
        if st.st_mode & 0o6000 != 0 && !dir_setgid {
            return Err(std::io::Error::other(format!(
                "{} carries a set-id bit, which the change set does not keep",
                Path::new(&entry).display()
            )));
        }
        let mode = Mode::from_raw_mode(st.st_mode & 0o7777);
        match Ft::from_raw_mode(st.st_mode) {
            Ft::Directory => {
                rustix::fs::mkdirat(dst, &entry, Mode::from_raw_mode(0o700)).map_err(errno_io)?;
                let s = open_child(src, &entry, OFlags::RDONLY | OFlags::DIRECTORY)?;
                let d = open_child(dst, &entry, OFlags::RDONLY | OFlags::DIRECTORY)?;
                links.rel.push(&entry);
                let copied = copy_tree(s.as_fd(), d.as_fd(), opaque, depth + 1, links);
                links.rel.pop();
                copied?;
            }
            Ft::RegularFile
                if st.st_nlink > 1 && links.seen.contains_key(&(st.st_dev, st.st_ino)) =>
            {
                let first = &links.seen[&(st.st_dev, st.st_ino)];
                rustix::fs::linkat(links.root, first, dst, &entry, AtFlags::empty())
                    .map_err(errno_io)?;
            }
            Ft::RegularFile => {
                if st.st_nlink > 1 {
                    links
                        .seen
                        .insert((st.st_dev, st.st_ino), links.rel.join(&entry));
                }
                let s = open_child(src, &entry, OFlags::RDONLY)?;
                let d: OwnedFd = rustix::fs::openat(
                    dst,
                    &entry,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )
                .map_err(errno_io)?;
                // A file with holes stays one: a `truncate -s 60G` file in a 1 MiB bound
                // copies as nothing (see `read::copy_file`).
                let to = std::fs::File::from(d);
                read::copy_file(&std::fs::File::from(s), &to)?;
                rustix::fs::fchmod(to.as_fd(), mode).map_err(errno_io)?;
            }
            Ft::Symlink => {
                let target = rustix::fs::readlinkat(src, &entry, Vec::new()).map_err(errno_io)?;
                rustix::fs::symlinkat(target.as_c_str(), dst, &entry).map_err(errno_io)?;
            }
            Ft::CharacterDevice if st.st_rdev == 0 => {
                rustix::fs::mknodat(dst, &entry, Ft::CharacterDevice, Mode::empty(), 0)
                    .map_err(errno_io)?;
            }
            Ft::Fifo => {
                rustix::fs::mknodat(dst, &entry, Ft::Fifo, mode, 0).map_err(errno_io)?;
            }
            _ => {
                return Err(std::io::Error::other(format!(
                    "{} is a device or socket, which the change set cannot keep",
                    Path::new(&entry).display()
                )))
            }
        }
    }
    Ok(())
}

/// Whether the bounded filesystem is (nearly) full: a write that did not fit failed with
/// `ENOSPC` inside, so the run reached its disk bound.
pub fn bound_reached(bounded: BorrowedFd<'_>) -> bool {
    rustix::fs::fstatvfs(bounded).is_ok_and(|st| st.f_bavail.saturating_mul(st.f_frsize) < 64 << 10)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A set-id file in a bounded upper is refused, never copied into the store (where the
    /// supervisor, root for a root caller, would own it). Control: without the bit it is
    /// copied with its mode.
    #[test]
    fn a_set_id_file_is_not_copied_into_the_store() {
        for (mode, refused) in [(0o4755, true), (0o2755, true), (0o755, false)] {
            let src = tempfile::tempdir().unwrap();
            let dst = tempfile::tempdir().unwrap();
            let f = src.path().join("tool");
            std::fs::write(&f, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            let open = |p: &Path| {
                rustix::fs::open(p, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
            };
            let (s, d) = (open(src.path()), open(dst.path()));
            let copied = copy_dir(s.as_fd(), d.as_fd(), b"user.overlay.opaque", 0);
            assert_eq!(copied.is_err(), refused, "mode {mode:o}");
            assert_eq!(dst.path().join("tool").exists(), !refused, "mode {mode:o}");
        }
    }

    /// Names of one file are copied as one file (links in the copy too), in one directory or
    /// several. Control: two files with the same content stay two files.
    #[test]
    fn hard_links_are_copied_as_one_file() {
        use std::os::unix::fs::MetadataExt;
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("d")).unwrap();
        std::fs::write(src.path().join("f"), vec![7u8; 300 << 10]).unwrap();
        std::fs::write(src.path().join("twin"), vec![7u8; 300 << 10]).unwrap();
        for n in 0..50 {
            std::fs::hard_link(src.path().join("f"), src.path().join(format!("l{n}"))).unwrap();
        }
        std::fs::hard_link(src.path().join("f"), src.path().join("d/deep")).unwrap();
        let open = |p: &Path| {
            rustix::fs::open(p, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
        };
        let (s, d) = (open(src.path()), open(dst.path()));
        copy_dir(s.as_fd(), d.as_fd(), b"user.overlay.opaque", 0).unwrap();
        let meta = |p: &str| std::fs::metadata(dst.path().join(p)).unwrap();
        assert_eq!(meta("f").nlink(), 52);
        assert_eq!(meta("l49").ino(), meta("f").ino());
        assert_eq!(meta("d/deep").ino(), meta("f").ino());
        assert_eq!(
            std::fs::read(dst.path().join("d/deep")).unwrap().len(),
            300 << 10
        );
        assert_ne!(meta("twin").ino(), meta("f").ino());
    }

    /// A directory's setgid bit (inherited in a group-shared tree) does not refuse the copy
    /// (it refused every `--disk` review run in a setgid workspace); a setuid one still does.
    #[test]
    fn a_setgid_directory_is_copied_a_setuid_one_is_not() {
        for (mode, refused) in [(0o2755, false), (0o4755, true), (0o755, false)] {
            let src = tempfile::tempdir().unwrap();
            let dst = tempfile::tempdir().unwrap();
            let d = src.path().join("sub");
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("f"), "f\n").unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
            let open = |p: &Path| {
                rustix::fs::open(p, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
            };
            let (s, dd) = (open(src.path()), open(dst.path()));
            let copied = copy_dir(s.as_fd(), dd.as_fd(), b"user.overlay.opaque", 0);
            assert_eq!(copied.is_err(), refused, "mode {mode:o}");
            assert_eq!(dst.path().join("sub/f").exists(), !refused, "mode {mode:o}");
        }
    }
}
