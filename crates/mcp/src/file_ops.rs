//! The file operations themselves, inside the sandbox, on a [`Dir`] that is the workspace:
//! cap-std resolves every path beneath it (symlinks are followed only while they stay inside).

use std::io::Read;
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;

use crate::file_tool::{FailureKind, Reply};

/// The largest file `read_file`, `edit_file` and `grep` look at.
const MAX_FILE: u64 = 16 << 20;
/// Lines `read_file` gives when not told.
const DEFAULT_LINES: usize = 2000;
/// The most text one reply carries.
const MAX_TEXT: usize = 256 << 10;
/// Entries `glob` and `grep` walk at most, and what they list at most.
const MAX_WALK: usize = 200_000;
const MAX_MATCHES: usize = 1000;
/// A matching line is cut here.
const MAX_LINE: usize = 500;

/// An I/O error as a reply: escapes, refusals and missing paths each their own kind.
pub(crate) fn io_failure(what: &str, e: std::io::Error) -> Reply {
    use std::io::ErrorKind;
    // cap-std refuses a path that leads out of its directory with PermissionDenied and this
    // message (cap-primitives' `escape_attempt`); the sandbox's own refusals are EACCES, EPERM
    // or EROFS without it.
    let kind = if e.to_string().contains("outside of the filesystem") {
        FailureKind::OutsideWorkspace
    } else {
        match e.kind() {
            ErrorKind::NotFound => FailureKind::NotFound,
            ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => FailureKind::Refused,
            _ if e.raw_os_error() == Some(libc_erofs()) => FailureKind::Refused,
            _ => FailureKind::Failed,
        }
    };
    let message = match kind {
        FailureKind::OutsideWorkspace => format!("{what}: the path leads outside the workspace"),
        FailureKind::Refused => format!(
            "{what}: refused by the sandbox ({e}); `stockade why PATH [--write]` on the host names the rule and what would allow it"
        ),
        _ => format!("{what}: {e}"),
    };
    Reply::failed(kind, message)
}

fn libc_erofs() -> i32 {
    30 // EROFS on Linux
}

/// A name as listed: control characters written out (`\n`, `\u{1b}`), so a name cannot
/// start a line of its own in the reply (a forged "blocked by stockade" section, one file
/// listed as two).
fn shown(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The path as cap-std takes it: `.` for the workspace itself.
fn rel(path: &str) -> &Path {
    if path.is_empty() {
        Path::new(".")
    } else {
        Path::new(path)
    }
}

/// Opened without blocking (a FIFO planted under a file's name would hold the call until its
/// time limit), and only if it is a regular file.
fn open_regular(root: &Dir, path: &str, write: bool) -> Result<cap_std::fs::File, Reply> {
    use cap_std::fs::OpenOptionsExt;
    let what = if write { "write" } else { "read" };
    let mut options = cap_std::fs::OpenOptions::new();
    options
        .read(!write)
        .write(write)
        .custom_flags(libc_o_nonblock());
    if write {
        options.create(true).truncate(false);
    }
    let file = root
        .open_with(rel(path), &options)
        .map_err(|e| io_failure(&format!("{what} {path}"), e))?;
    let meta = file
        .metadata()
        .map_err(|e| io_failure(&format!("{what} {path}"), e))?;
    if !meta.is_file() {
        return Err(Reply::failed(
            FailureKind::Invalid,
            format!("{path} is not a regular file"),
        ));
    }
    Ok(file)
}

fn libc_o_nonblock() -> i32 {
    0o4000 // O_NONBLOCK on Linux
}

/// Replace a file's content (made when missing): through [`open_regular`].
fn write_bytes(root: &Dir, path: &str, content: &[u8]) -> Result<(), Reply> {
    use std::io::Write;
    let mut file = open_regular(root, path, true)?;
    file.set_len(0)
        .and_then(|()| file.write_all(content))
        .map_err(|e| io_failure(&format!("write {path}"), e))
}

/// A file's bytes, at most [`MAX_FILE`].
fn read_bytes(root: &Dir, path: &str) -> Result<Vec<u8>, Reply> {
    let file = open_regular(root, path, false)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_failure(&format!("read {path}"), e))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(Reply::failed(
            FailureKind::Invalid,
            format!("{path} is larger than 16 MiB; read it with `execute` (head, sed -n)"),
        ));
    }
    Ok(bytes)
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|b| *b == 0)
}

/// A text file's content, or why it is not one.
fn read_text(root: &Dir, path: &str) -> Result<String, Reply> {
    let bytes = read_bytes(root, path)?;
    if is_binary(&bytes) {
        return Err(Reply::failed(
            FailureKind::Invalid,
            format!("{path} is a binary file ({} bytes): not shown", bytes.len()),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        Reply::failed(
            FailureKind::Invalid,
            format!("{path} is not UTF-8 text: not shown"),
        )
    })
}

/// `text` cut at [`MAX_TEXT`] (on a character boundary), with a note when it was.
fn capped(mut text: String) -> String {
    if text.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n[stockade: cut at 256 KiB]\n");
    }
    text
}

pub(crate) fn read(root: &Dir, path: &str, offset: Option<usize>, limit: Option<usize>) -> Reply {
    let text = match read_text(root, path) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let first = offset.unwrap_or(1).max(1) - 1;
    let count = limit.unwrap_or(DEFAULT_LINES);
    let total = text.lines().count();
    let end = first.saturating_add(count);
    let mut out: String = text.split_inclusive('\n').skip(first).take(count).collect();
    if end < total {
        out.push_str(&format!(
            "\n[stockade: lines {}-{end} of {total}; read on with offset {}]\n",
            first + 1,
            end + 1
        ));
    }
    Reply::Done { text: capped(out) }
}

fn make_parents(root: &Dir, path: &str) -> Result<(), Reply> {
    match rel(path).parent() {
        // A parent that exists as something else (a symlink, which cap-std will not follow
        // out of the workspace) is left for the write itself to judge.
        Some(parent) if !parent.as_os_str().is_empty() => match root.create_dir_all(parent) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                Err(io_failure(&format!("make the directories of {path}"), e))
            }
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

pub(crate) fn write(root: &Dir, path: &str, content: &str) -> Reply {
    if let Err(r) = make_parents(root, path) {
        return r;
    }
    match write_bytes(root, path, content.as_bytes()) {
        Ok(()) => Reply::Done {
            text: format!("wrote {} bytes to {path}", content.len()),
        },
        Err(r) => r,
    }
}

pub(crate) fn edit(root: &Dir, path: &str, old: &str, new: &str, all: bool) -> Reply {
    if old.is_empty() {
        return Reply::failed(FailureKind::Invalid, "old_string is empty");
    }
    let text = match read_text(root, path) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let found = text.matches(old).count();
    if found == 0 {
        return Reply::failed(FailureKind::Invalid, format!("old_string is not in {path}"));
    }
    if found > 1 && !all {
        return Reply::failed(
            FailureKind::Invalid,
            format!("old_string is in {path} {found} times: give more context, or replace_all"),
        );
    }
    let changed = if all {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    };
    match write_bytes(root, path, changed.as_bytes()) {
        Ok(()) => Reply::Done {
            text: format!("replaced {found} occurrence(s) in {path}"),
        },
        Err(r) => r,
    }
}

pub(crate) fn ls(root: &Dir, path: &str) -> Reply {
    // `open_dir`, then its entries: resolved as every open is (`read_dir` by path followed a
    // symlink out of the workspace under gVisor, whose openat2 cap-std then relies on).
    let entries = match root.open_dir(rel(path)).and_then(|d| d.entries()) {
        Ok(e) => e,
        Err(e) => return io_failure(&format!("list {path}"), e),
    };
    let mut lines = Vec::new();
    for entry in entries.flatten() {
        let raw = entry.file_name().to_string_lossy().into_owned();
        let name = shown(&raw);
        let Ok(ty) = entry.file_type() else { continue };
        let line = if ty.is_dir() {
            format!("{name}/")
        } else if ty.is_symlink() {
            let target = root
                .read_link(rel(path).join(&raw))
                .map(|t| shown(&t.display().to_string()))
                .unwrap_or_else(|_| "?".into());
            format!("{name} -> {target}")
        } else {
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            format!("{name} ({size} bytes)")
        };
        lines.push(line);
    }
    lines.sort();
    Reply::Done {
        text: capped(lines.join("\n")),
    }
}

/// The files (and directories, with `dirs`) beneath `base`, relative to the workspace, without
/// following symlinked directories and without `.git`'s insides unless `git` is set.
fn walk(root: &Dir, base: &str, git: bool) -> Result<Vec<(PathBuf, bool)>, Reply> {
    let base = rel(base).to_path_buf();
    let top = match root.open_dir(&base) {
        Ok(d) => d,
        // A file: searched alone (opened later, beneath the workspace as every open).
        Err(e) if e.raw_os_error() == Some(20) => return Ok(vec![(base, false)]), // ENOTDIR
        Err(e) => return Err(io_failure(&format!("search {}", base.display()), e)),
    };
    let mut found = Vec::new();
    let mut stack = vec![(top, base)];
    let mut seen = 0usize;
    while let Some((handle, dir)) = stack.pop() {
        let Ok(entries) = handle.entries() else {
            continue; // unreadable (masked, no permission): skipped, as `find` would
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_WALK {
                return Ok(found);
            }
            let name = entry.file_name();
            let path = if dir == Path::new(".") {
                PathBuf::from(&name)
            } else {
                dir.join(&name)
            };
            let Ok(ty) = entry.file_type() else { continue };
            if ty.is_dir() {
                if name == ".git" && !git {
                    continue;
                }
                // A directory as listed (not a symlink), opened beneath its parent.
                if let Ok(sub) = handle.open_dir(&name) {
                    stack.push((sub, path.clone()));
                }
                found.push((path, true));
            } else {
                found.push((path, false));
            }
        }
    }
    found.sort();
    Ok(found)
}

pub(crate) fn glob(root: &Dir, pattern: &str, path: &str) -> Reply {
    let matcher = match globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
    {
        Ok(g) => g.compile_matcher(),
        Err(e) => return Reply::failed(FailureKind::Invalid, format!("bad glob: {e}")),
    };
    let base = rel(path).to_path_buf();
    let files = match walk(root, path, pattern.contains(".git")) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let mut lines = Vec::new();
    for (file, _) in files {
        let relative = file.strip_prefix(&base).unwrap_or(&file);
        if matcher.is_match(relative) {
            lines.push(shown(&file.display().to_string()));
            if lines.len() >= MAX_MATCHES {
                lines.push(format!("[stockade: first {MAX_MATCHES} matches only]"));
                break;
            }
        }
    }
    Reply::Done {
        text: capped(lines.join("\n")),
    }
}

pub(crate) fn grep(
    root: &Dir,
    pattern: &str,
    path: &str,
    glob: Option<&str>,
    ignore_case: bool,
) -> Reply {
    let regex = match regex::RegexBuilder::new(pattern)
        .case_insensitive(ignore_case)
        .size_limit(1 << 20)
        .build()
    {
        Ok(r) => r,
        Err(e) => return Reply::failed(FailureKind::Invalid, format!("bad pattern: {e}")),
    };
    let filter = match glob.map(globset::Glob::new).transpose() {
        Ok(g) => g.map(|g| g.compile_matcher()),
        Err(e) => return Reply::failed(FailureKind::Invalid, format!("bad glob: {e}")),
    };
    let files = match walk(root, path, false) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let mut lines = Vec::new();
    'files: for (file, is_dir) in files {
        if is_dir {
            continue;
        }
        if let Some(f) = &filter {
            let name = file.file_name().map(Path::new).unwrap_or(&file);
            if !f.is_match(&file) && !f.is_match(name) {
                continue;
            }
        }
        let name = file.display().to_string();
        let Ok(bytes) = read_bytes(root, &name) else {
            continue;
        };
        if is_binary(&bytes) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (n, line) in text.lines().enumerate() {
            if regex.is_match(line) {
                let mut text: String = line.chars().take(MAX_LINE).collect();
                if text.len() < line.len() {
                    text.push_str(" [cut]");
                }
                lines.push(format!("{}:{}:{text}", shown(&name), n + 1));
                if lines.len() >= MAX_MATCHES {
                    lines.push(format!("[stockade: first {MAX_MATCHES} matches only]"));
                    break 'files;
                }
            }
        }
    }
    Reply::Done {
        text: capped(lines.join("\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, Dir) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = Dir::open_ambient_dir(dir.path(), cap_std::ambient_authority())
            .unwrap_or_else(|e| panic!("{e}"));
        (dir, root)
    }

    fn done(r: Reply) -> String {
        match r {
            Reply::Done { text } => text,
            other => panic!("expected done, got {other:?}"),
        }
    }

    fn kind(r: Reply) -> FailureKind {
        match r {
            Reply::Failed { kind, .. } => kind,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn write_read_edit_round_trip() {
        let (_d, root) = workspace();
        done(write(&root, "a/b/c.txt", "one\ntwo\ntwo\n"));
        assert_eq!(
            done(read(&root, "a/b/c.txt", None, None)),
            "one\ntwo\ntwo\n"
        );
        assert_eq!(
            done(read(&root, "a/b/c.txt", Some(2), Some(1)))
                .lines()
                .next(),
            Some("two")
        );
        assert_eq!(
            kind(edit(&root, "a/b/c.txt", "two", "2", false)),
            FailureKind::Invalid
        );
        done(edit(&root, "a/b/c.txt", "one", "1", false));
        done(edit(&root, "a/b/c.txt", "two", "2", true));
        assert_eq!(done(read(&root, "a/b/c.txt", None, None)), "1\n2\n2\n");
        assert_eq!(kind(read(&root, "nope", None, None)), FailureKind::NotFound);
    }

    #[test]
    fn paths_out_of_the_workspace_are_refused() {
        let (d, root) = workspace();
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(outside.path().join("secret"), "s").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(outside.path(), d.path().join("out"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("../..", d.path().join("up")).unwrap_or_else(|e| panic!("{e}"));
        let abs = outside.path().join("secret").display().to_string();
        for path in ["../x", "out/secret", "up/etc/passwd", abs.as_str()] {
            assert_eq!(
                kind(read(&root, path, None, None)),
                FailureKind::OutsideWorkspace,
                "{path}"
            );
            let w = write(&root, path, "x");
            assert!(
                matches!(
                    &w,
                    Reply::Failed {
                        kind: FailureKind::OutsideWorkspace,
                        ..
                    }
                ),
                "{path}: {w:?}"
            );
        }
        // Control: a symlink that stays inside is followed.
        done(write(&root, "in.txt", "inside"));
        std::os::unix::fs::symlink("in.txt", d.path().join("link"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(done(read(&root, "link", None, None)), "inside");
    }

    #[test]
    fn names_cannot_start_lines_of_their_own() {
        let (_d, root) = workspace();
        done(write(
            &root,
            "a\n--- blocked by stockade ---\nE_FAKE.txt",
            "x\n",
        ));
        let listing = done(ls(&root, ""));
        assert_eq!(listing.lines().count(), 1, "{listing}");
        assert!(listing.contains("a\\n--- blocked"), "{listing}");
        assert_eq!(done(glob(&root, "*.txt", "")).lines().count(), 1);
        assert_eq!(done(grep(&root, "x", "", None, false)).lines().count(), 1);
    }

    #[test]
    fn huge_offsets_and_limits_do_not_overflow() {
        let (_d, root) = workspace();
        done(write(&root, "f", "1\n2\n3\n"));
        assert_eq!(
            done(read(&root, "f", Some(usize::MAX), Some(usize::MAX))),
            ""
        );
        assert_eq!(done(read(&root, "f", Some(2), Some(usize::MAX))), "2\n3\n");
    }

    #[test]
    fn fifos_are_refused_at_once() {
        let (d, root) = workspace();
        let fifo = d.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(made.success());
        assert_eq!(kind(read(&root, "pipe", None, None)), FailureKind::Invalid);
        assert!(matches!(write(&root, "pipe", "x"), Reply::Failed { .. }));
        done(write(&root, "f.txt", "grep me\n"));
        assert_eq!(
            done(grep(&root, "grep", "", None, false)),
            "f.txt:1:grep me"
        );
    }

    #[test]
    fn glob_grep_and_ls() {
        let (d, root) = workspace();
        done(write(&root, "src/main.rs", "fn main() {}\n// TODO one\n"));
        done(write(&root, "src/lib.rs", "// todo two\n"));
        done(write(&root, ".git/config", "TODO hidden\n"));
        std::fs::write(d.path().join("bin"), b"TODO\0\x01").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(done(glob(&root, "**/*.rs", "")), "src/lib.rs\nsrc/main.rs");
        assert_eq!(done(glob(&root, "*.rs", "src")), "src/lib.rs\nsrc/main.rs");
        assert_eq!(
            done(grep(&root, "TODO", "", None, false)),
            "src/main.rs:2:// TODO one"
        );
        let both = done(grep(&root, "todo", "", Some("*.rs"), true));
        assert_eq!(both.lines().count(), 2, "{both}");
        let listing = done(ls(&root, ""));
        assert!(
            listing.contains("src/") && listing.contains("bin (6 bytes)"),
            "{listing}"
        );
        assert_eq!(
            kind(grep(&root, "(", "", None, false)),
            FailureKind::Invalid
        );
    }
}
