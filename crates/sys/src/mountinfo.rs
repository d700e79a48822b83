//! `/proc/self/mountinfo` read as data (proc(5)): the mount points below a directory. Safe
//! code; here because the native backend's cgroup probe and the review stage both read it.

use std::path::{Path, PathBuf};

/// A `mountinfo` field with its octal escapes undone (space, tab, newline and backslash are
/// written as `\040`, `\011`, `\012`, `\134`).
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount points of a `mountinfo` text strictly below `dir` (its fifth field), in order.
pub fn mount_points_below(mountinfo: &str, dir: &Path) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|f| PathBuf::from(unescape(f)))
        .filter(|p| p != dir && p.starts_with(dir))
        .collect()
}

/// The mount points of this process's mount namespace strictly below `dir` (canonical).
pub fn mounts_below(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(mount_points_below(&info, dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_below_a_directory_are_read_unescaped() {
        let info = "22 1 8:1 / / rw - ext4 /dev/vda rw\n\
                    30 22 0:26 / /w rw - tmpfs tmpfs rw\n\
                    31 30 0:27 / /w/m\\040x rw - tmpfs t rw\n\
                    32 22 0:28 / /wx rw - tmpfs t rw\n\
                    33 31 0:29 / /w/m\\040x/deep rw - tmpfs t rw\n";
        assert_eq!(
            mount_points_below(info, Path::new("/w")),
            [PathBuf::from("/w/m x"), PathBuf::from("/w/m x/deep")]
        );
        assert!(mount_points_below(info, Path::new("/wx")).is_empty());
        assert_eq!(unescape("/a\\040b\\134"), "/a b\\");
    }
}
