//! The entries of a git index whose changes git stops showing: `assume-unchanged` (the
//! assume-valid bit) and `skip-worktree` (also what `git sparse-checkout` sets). A run that
//! sets them hides its edits to tracked files from the user's `git status` and `git diff`
//! (`git update-index --skip-worktree Makefile` after changing the Makefile), the same class as
//! `info/exclude`. The planner reads the index before the run, the sweep after it, and the
//! names hidden during the run are reported.
//!
//! Hand-written: the format is small and stable (git's `Documentation/gitformat-index.txt`,
//! versions 2 to 4), and reading it here means never running git, whose config the run may
//! have made live, from the supervisor. Only the flags and names are read; extensions are not.

use std::collections::BTreeSet;

const ASSUME_VALID: u16 = 0x8000;
const EXTENDED: u16 = 0x4000;
const SKIP_WORKTREE: u16 = 0x4000;
/// ctime, mtime, dev, ino, mode, uid, gid, size.
const STAT_LEN: usize = 40;

/// The names of the entries git does not check for changes, or `None` when `data` is not an
/// index this reader understands (then nothing is claimed either way). `hash_len`: 20 for
/// SHA-1 repositories, 32 for SHA-256 (`extensions.objectFormat`).
pub fn hidden_entries(data: &[u8], hash_len: usize) -> Option<BTreeSet<String>> {
    let be32 = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?))
    };
    let be16 = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes(data.get(at..at + 2)?.try_into().ok()?))
    };
    if data.get(..4)? != b"DIRC" {
        return None;
    }
    let version = be32(4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = be32(8)? as usize;
    let mut at = 12;
    let mut previous: Vec<u8> = Vec::new();
    let mut hidden = BTreeSet::new();
    for _ in 0..count {
        let start = at;
        let flags = be16(at + STAT_LEN + hash_len)?;
        at += STAT_LEN + hash_len + 2;
        let mut extended = 0u16;
        if flags & EXTENDED != 0 {
            if version < 3 {
                return None;
            }
            extended = be16(at)?;
            at += 2;
        }
        let name: Vec<u8> = if version == 4 {
            // Prefix compression: strip N bytes from the previous name, then a NUL-terminated
            // suffix.
            let (strip, used) = varint(data.get(at..)?)?;
            at += used;
            let end = at + data.get(at..)?.iter().position(|b| *b == 0)?;
            let keep = previous.len().checked_sub(strip)?;
            let mut name = previous[..keep].to_vec();
            name.extend_from_slice(&data[at..end]);
            at = end + 1;
            name
        } else {
            let end = at + data.get(at..)?.iter().position(|b| *b == 0)?;
            let name = data[at..end].to_vec();
            // Padded with 1 to 8 NULs to a multiple of 8 bytes from the entry's start.
            let len = end - start;
            at = start + (len + 8) / 8 * 8;
            name
        };
        if flags & ASSUME_VALID != 0 || extended & SKIP_WORKTREE != 0 {
            hidden.insert(String::from_utf8_lossy(&name).into_owned());
        }
        previous = name;
    }
    Some(hidden)
}

/// Git's offset varint (`varint.c`): 7 bits a byte, high bit "more", each continuation adds 1.
fn varint(data: &[u8]) -> Option<(usize, usize)> {
    let mut value: usize = 0;
    for (i, b) in data.iter().enumerate().take(10) {
        value = value.checked_add((b & 0x7f) as usize)?;
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
        value = value.checked_add(1)?.checked_shl(7)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A repository with three files, made by git, at index `version`.
    fn repo(version: u32) -> Option<tempfile::TempDir> {
        let dir = tempfile::tempdir().ok()?;
        let git = |args: &[&str]| {
            Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(["-c", "user.email=t@example.invalid", "-c", "user.name=T"])
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", dir.path())
                .status()
                .ok()
                .filter(|s| s.success())
        };
        git(&["init", "-q"])?;
        for f in ["Makefile", "a/long/path/name.txt", "a/long/path/other.txt"] {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent()?).ok()?;
            std::fs::write(p, "x\n").ok()?;
        }
        git(&["add", "."])?;
        git(&["update-index", "--index-version", &version.to_string()])?;
        git(&["commit", "-q", "-m", "x"])?;
        Some(dir)
    }

    fn read(dir: &tempfile::TempDir) -> Option<BTreeSet<String>> {
        hidden_entries(&std::fs::read(dir.path().join(".git/index")).ok()?, 20)
    }

    #[test]
    fn flags_set_by_git_are_found_in_every_index_version() {
        for version in [2, 3, 4] {
            let Some(dir) = repo(version) else {
                println!("skipped: git is not installed");
                return;
            };
            assert_eq!(read(&dir), Some(BTreeSet::new()), "v{version}");
            let status = Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(["update-index", "--skip-worktree", "Makefile"])
                .status()
                .unwrap();
            assert!(status.success());
            let status = Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args([
                    "update-index",
                    "--assume-unchanged",
                    "a/long/path/other.txt",
                ])
                .status()
                .unwrap();
            assert!(status.success());
            let want: BTreeSet<String> = ["Makefile", "a/long/path/other.txt"]
                .into_iter()
                .map(String::from)
                .collect();
            assert_eq!(read(&dir), Some(want), "v{version}");
        }
    }

    #[test]
    fn what_is_not_an_index_is_not_read() {
        assert_eq!(hidden_entries(b"", 20), None);
        assert_eq!(hidden_entries(b"DIRC\0\0\0\x05\0\0\0\0", 20), None);
        let mut truncated = b"DIRC\0\0\0\x02\0\0\0\x01".to_vec();
        truncated.extend([0u8; 30]);
        assert_eq!(hidden_entries(&truncated, 20), None);
        assert_eq!(varint(&[0x80, 0x80, 0x80]), None);
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x80, 0x00]), Some((128, 2)));
    }
}
