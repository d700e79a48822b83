//! `stockade diff`: the change set as a unified diff, git's flavour (`diff --git` headers,
//! `new file mode`, `deleted file mode`, `old mode`/`new mode`, additions and deletions
//! against `/dev/null`, links as their target without a newline). Binary files (a NUL byte,
//! or not UTF-8) and files over [`MAX_DIFF_BYTES`] are named, not dumped. The old side is the
//! workspace now, the new side the upper; both read without following a link.
//!
//! The text is the files' own: a caller printing it to a terminal sanitizes it.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{FileType as Ft, OFlags};

use super::read::{open_regular, read_link};
use super::select::{covers, open_parent, user_path};
use super::{ChangeKind, ChangesError, Recorded, RunDir};
use crate::beneath::{list, open_child, stat_child};

/// Larger files are named, not diffed.
pub const MAX_DIFF_BYTES: u64 = 8 << 20;

/// One path's line counts, as `stockade diff --stat` lists them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileStat {
    /// Relative to the workspace.
    #[serde(serialize_with = "super::pathser::one::serialize")]
    pub path: PathBuf,
    /// Lines added.
    pub insertions: usize,
    /// Lines removed.
    pub deletions: usize,
    /// Not shown as text (a binary or large file, a special file): no line counts.
    pub binary: bool,
    /// Written (or deleted) by an earlier partial apply: in the workspace already, counted
    /// as the run wrote it (against nothing).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub applied: bool,
}

/// What the diff of a change set is written into: its text and each path's counts.
#[derive(Default)]
struct Sink {
    text: String,
    stats: Vec<FileStat>,
}

impl std::fmt::Write for Sink {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.text.push_str(s);
        Ok(())
    }
}

impl Sink {
    fn stat(&mut self, path: &Path, insertions: usize, deletions: usize, binary: bool) {
        self.stats.push(FileStat {
            path: path.to_path_buf(),
            insertions,
            deletions,
            binary,
            applied: false,
        });
    }
}

/// One side of a diff.
enum Side {
    None,
    Text(String, u32),
    Link(PathBuf),
    Binary(u32),
    Large(u64, u32),
    Dir(u32),
    Special,
}

fn read_side(dir: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<Side> {
    let Some(st) = stat_child(dir, name)? else {
        return Ok(Side::None);
    };
    let mode = st.st_mode & 0o7777;
    Ok(match Ft::from_raw_mode(st.st_mode) {
        Ft::RegularFile if st.st_size as u64 > MAX_DIFF_BYTES => {
            Side::Large(st.st_size as u64, mode)
        }
        Ft::RegularFile => {
            let mut bytes = Vec::new();
            std::fs::File::from(open_regular(dir, name)?)
                .take(MAX_DIFF_BYTES + 1)
                .read_to_end(&mut bytes)?;
            if bytes.contains(&0) {
                Side::Binary(mode)
            } else {
                match String::from_utf8(bytes) {
                    Ok(s) => Side::Text(s, mode),
                    Err(_) => Side::Binary(mode),
                }
            }
        }
        Ft::Symlink => Side::Link(read_link(dir, name)?),
        Ft::Directory => Side::Dir(mode),
        _ => Side::Special,
    })
}

/// `rel` in the tree `root` (the workspace or the upper), reached without following a link.
fn side_at(root: BorrowedFd<'_>, rel: &Path) -> std::io::Result<Side> {
    let parent = match open_parent(root, rel) {
        Ok(p) => p,
        Err(_) => return Ok(Side::None),
    };
    read_side(parent.as_fd(), rel.file_name().unwrap_or(OsStr::new(".")))
}

fn git_mode(side: &Side) -> Option<String> {
    match side {
        Side::Text(_, m) | Side::Binary(m) | Side::Large(_, m) => {
            Some(format!("100{:03o}", m & 0o777))
        }
        Side::Link(_) => Some("120000".into()),
        _ => None,
    }
}

fn content(side: &Side) -> Option<String> {
    match side {
        Side::None => Some(String::new()),
        Side::Text(s, _) => Some(s.clone()),
        Side::Link(t) => Some(String::from_utf8_lossy(t.as_os_str().as_bytes()).into_owned()),
        _ => None,
    }
}

/// `prefix` + `path` as a diff header names it: as is, or, when it holds a control
/// character, a quote or a backslash, C-quoted as git does (`"a/x\ny"`), so that a name
/// cannot start a line of its own in the listing.
fn header_name(prefix: &str, path: &Path) -> String {
    let bytes = path.as_os_str().as_bytes();
    let plain = !bytes
        .iter()
        .any(|&b| b < 0x20 || b == 0x7f || b == b'"' || b == b'\\');
    if plain {
        return format!("{prefix}{}", path.display());
    }
    let mut q = String::from("\"");
    q.push_str(prefix);
    for &b in bytes {
        match b {
            b'\n' => q.push_str("\\n"),
            b'\t' => q.push_str("\\t"),
            b'\r' => q.push_str("\\r"),
            b'"' => q.push_str("\\\""),
            b'\\' => q.push_str("\\\\"),
            b if !(0x20..0x7f).contains(&b) => q.push_str(&format!("\\{b:03o}")),
            b => q.push(char::from(b)),
        }
    }
    q.push('"');
    q
}

/// The diff of one path between `old` and `new`.
fn file_diff(out: &mut Sink, path: &Path, old: &Side, new: &Side) {
    let (a, b) = (header_name("a/", path), header_name("b/", path));
    let _ = writeln!(out, "diff --git {a} {b}");
    let (om, nm) = (git_mode(old), git_mode(new));
    let old_none = matches!(old, Side::None);
    let new_none = matches!(new, Side::None);
    match (&om, &nm) {
        (None, Some(m)) if old_none => {
            let _ = writeln!(out, "new file mode {m}");
        }
        (Some(m), None) if new_none => {
            let _ = writeln!(out, "deleted file mode {m}");
        }
        (Some(o), Some(n)) if o != n => {
            let _ = writeln!(out, "old mode {o}\nnew mode {n}");
        }
        _ => {}
    }
    let a = if old_none { "/dev/null".to_string() } else { a };
    let b = if new_none { "/dev/null".to_string() } else { b };
    if let (Side::Large(n, _), _) | (_, Side::Large(n, _)) = (old, new) {
        let _ = writeln!(
            out,
            "Files {a} and {b} differ (over {MAX_DIFF_BYTES} bytes: {n})"
        );
        out.stat(path, 0, 0, true);
        return;
    }
    match (content(old), content(new)) {
        (Some(o), Some(n)) if o == n => out.stat(path, 0, 0, false),
        (Some(o), Some(n)) => {
            let diff = similar::TextDiff::configure()
                .timeout(Duration::from_secs(10))
                .diff_lines(&o, &n);
            let (mut ins, mut del) = (0, 0);
            for op in diff.ops() {
                for change in diff.iter_changes(op) {
                    match change.tag() {
                        similar::ChangeTag::Insert => ins += 1,
                        similar::ChangeTag::Delete => del += 1,
                        similar::ChangeTag::Equal => {}
                    }
                }
            }
            let mut unified = diff.unified_diff();
            unified.context_radius(3).header(&a, &b);
            out.text.push_str(&unified.to_string());
            out.stat(path, ins, del, false);
        }
        _ => {
            let _ = writeln!(out, "Binary files {a} and {b} differ");
            out.stat(path, 0, 0, true);
        }
    }
}

/// Deletion diffs of every file and link at and below `rel` in the workspace.
fn deleted_tree(
    out: &mut Sink,
    dir: BorrowedFd<'_>,
    name: &OsStr,
    rel: &Path,
    depth: usize,
) -> std::io::Result<()> {
    match read_side(dir, name)? {
        Side::Dir(_) if depth < super::read::MAX_DEPTH => {
            let fd = open_child(dir, name, OFlags::RDONLY | OFlags::DIRECTORY)?;
            for child in list(fd.as_fd())? {
                deleted_tree(out, fd.as_fd(), &child, &rel.join(&child), depth + 1)?;
            }
        }
        Side::Dir(_) | Side::None => {}
        Side::Special => {
            let _ = writeln!(
                out,
                "diff --git {} {}\ndeleted special file",
                header_name("a/", rel),
                header_name("b/", rel)
            );
            out.stat(rel, 0, 0, true);
        }
        old => file_diff(out, rel, &old, &Side::None),
    }
    Ok(())
}

impl RunDir {
    /// The unified diff of the entries at or below `paths` (all when empty). Entries an
    /// earlier partial apply wrote follow, each after a line `applied earlier: PATH` and
    /// shown whole as the run wrote it (a held entry may depend on them: a `Makefile` that
    /// includes a plain file already written). A finished run's upper is checked against its
    /// digest first.
    pub fn diff(&self, paths: &[PathBuf]) -> Result<String, ChangesError> {
        Ok(self.diff_into(paths)?.text)
    }

    /// What [`RunDir::diff`] shows, as line counts per path (`diff --stat`), in the same
    /// order: a mode change alone counts no line, a binary, large or special file is
    /// [`FileStat::binary`].
    pub fn diff_stat(&self, paths: &[PathBuf]) -> Result<Vec<FileStat>, ChangesError> {
        Ok(self.diff_into(paths)?.stats)
    }

    fn diff_into(&self, paths: &[PathBuf]) -> Result<Sink, ChangesError> {
        self.check_live()?;
        let (entries, done): (Vec<Recorded>, Vec<Recorded>) = match &self.meta.finished {
            Some(f) => {
                self.verify()?;
                let applied = self.applied();
                f.entries
                    .iter()
                    .cloned()
                    .partition(|e| !applied.contains(e.path.as_path()))
            }
            None => (self.scan(true)?.entries, Vec::new()),
        };
        let wanted = paths
            .iter()
            .map(|p| user_path(p))
            .collect::<Result<Vec<_>, _>>()?;
        let unmatched: Vec<PathBuf> = wanted
            .iter()
            .filter(|w| !entries.iter().chain(&done).any(|e| covers(w, &e.path)))
            .cloned()
            .collect();
        if !unmatched.is_empty() {
            return Err(ChangesError::NoSuchChange(unmatched));
        }
        let root = self.open_workspace()?;
        let upper = self.open_upper()?;
        let mut out = Sink::default();
        for e in entries
            .iter()
            .filter(|e| wanted.is_empty() || wanted.iter().any(|w| covers(w, &e.path)))
        {
            self.diff_entry(&mut out, root.as_fd(), upper.as_fd(), e)?;
        }
        for e in done
            .iter()
            .filter(|e| wanted.is_empty() || wanted.iter().any(|w| covers(w, &e.path)))
        {
            self.applied_entry(&mut out, upper.as_fd(), e)?;
        }
        Ok(out)
    }

    /// An entry an earlier partial apply wrote, shown as the run wrote it: the workspace has
    /// it now, so a diff against the workspace would show nothing.
    fn applied_entry(
        &self,
        out: &mut Sink,
        upper: BorrowedFd<'_>,
        e: &Recorded,
    ) -> Result<(), ChangesError> {
        let (a, b) = (header_name("a/", &e.path), header_name("b/", &e.path));
        let before = out.stats.len();
        if e.kind == ChangeKind::Deleted {
            let _ = writeln!(
                out,
                "applied earlier: {}\ndiff --git {a} {b}\ndeleted (applied earlier)",
                header_name("", &e.path)
            );
            out.stat(&e.path, 0, 0, true);
        } else {
            let new = side_at(upper, &e.path).map_err(|cause| ChangesError::Read {
                path: self.upper().join(&e.path),
                cause,
            })?;
            match new {
                Side::Dir(_) | Side::None => {}
                Side::Special => {
                    let _ = writeln!(
                        out,
                        "applied earlier: {}\ndiff --git {a} {b}\nspecial file: never applied",
                        header_name("", &e.path)
                    );
                    out.stat(&e.path, 0, 0, true);
                }
                new => {
                    let _ = writeln!(out, "applied earlier: {}", header_name("", &e.path));
                    file_diff(out, &e.path, &Side::None, &new);
                }
            }
        }
        for s in out.stats.iter_mut().skip(before) {
            s.applied = true;
        }
        Ok(())
    }

    fn diff_entry(
        &self,
        out: &mut Sink,
        root: BorrowedFd<'_>,
        upper: BorrowedFd<'_>,
        e: &Recorded,
    ) -> Result<(), ChangesError> {
        let read = |path: PathBuf| move |cause| ChangesError::Read { path, cause };
        let old = side_at(root, &e.path).map_err(read(self.meta.workspace.join(&e.path)))?;
        let new = if e.kind == ChangeKind::Deleted {
            Side::None
        } else {
            side_at(upper, &e.path).map_err(read(self.upper().join(&e.path)))?
        };
        // What the workspace has at a path that stops being a directory goes away whole.
        if let Side::Dir(from) = old {
            if !matches!(new, Side::Dir(_)) {
                let parent = open_parent(root, &e.path)
                    .map_err(|why| read(e.path.clone())(std::io::Error::other(why)))?;
                let name = e.path.file_name().unwrap_or(OsStr::new("."));
                deleted_tree(out, parent.as_fd(), name, &e.path, 0)
                    .map_err(read(self.meta.workspace.join(&e.path)))?;
                if !matches!(new, Side::None) {
                    file_diff(out, &e.path, &Side::None, &new);
                }
                return Ok(());
            }
            if let (Side::Dir(to), ChangeKind::ModeChanged { .. } | ChangeKind::ReplacedDir) =
                (&new, e.kind)
            {
                if from & 0o7777 != to & 0o7777 {
                    let _ = writeln!(
                        out,
                        "diff --git {} {}\nold mode 040{:03o}\nnew mode 040{:03o}",
                        header_name("a/", &e.path),
                        header_name("b/", &e.path),
                        from & 0o777,
                        to & 0o777
                    );
                    out.stat(&e.path, 0, 0, false);
                }
            }
            return Ok(());
        }
        let special = |out: &mut Sink, what: &str| {
            let (a, b) = (header_name("a/", &e.path), header_name("b/", &e.path));
            let _ = writeln!(out, "diff --git {a} {b}\n{what}");
            out.stat(&e.path, 0, 0, true);
        };
        match (&old, &new) {
            (_, Side::Special) => special(
                out,
                "special file (fifo, socket or device node): never applied",
            ),
            (Side::Special, _) => special(out, "deleted special file"),
            (Side::None, Side::Dir(_)) => {}
            (_, Side::Dir(_)) => file_diff(out, &e.path, &old, &Side::None),
            _ => file_diff(out, &e.path, &old, &new),
        }
        Ok(())
    }
}
