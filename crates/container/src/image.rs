//! The default image: the host's own root filesystem's layout (its top-level directories,
//! and its symbolic links such as `/bin -> usr/bin`), made locally with `ENGINE import`, over
//! which each run binds the host's directories read-only. Commands find the same tools as on
//! the host, as under the other backends, with no registry and no copy of the host's
//! gigabytes: the image is a few kilobytes, and its name carries a digest of the layout, so a
//! host whose layout changed gets a new image.

use std::path::Path;
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use crate::Engine;

/// An entry of the host's `/`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Entry {
    Dir,
    File,
    Symlink,
}

/// The entries of the host's `/` (a symbolic link's target with it), sorted by name.
pub fn host_root() -> std::io::Result<Vec<(String, Entry, Option<String>)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/")? {
        let e = e?;
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        let t = e.file_type()?;
        if t.is_symlink() {
            let target = std::fs::read_link(e.path())?;
            let Some(target) = target.to_str() else {
                continue;
            };
            out.push((name, Entry::Symlink, Some(target.to_owned())));
        } else if t.is_dir() {
            out.push((name, Entry::Dir, None));
        } else if t.is_file() {
            out.push((name, Entry::File, None));
        }
    }
    out.sort();
    Ok(out)
}

/// The image's name for a host whose `/` holds `entries`.
pub fn tag(entries: &[(String, Entry, Option<String>)]) -> String {
    let mut h = Sha256::new();
    h.update(b"stockade-host-image v1\n");
    for (name, kind, target) in entries {
        h.update(format!("{name}\0{kind:?}\0{}\n", target.as_deref().unwrap_or("")).as_bytes());
    }
    let digest = h.finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("localhost/stockade-host:{hex}")
}

/// The image's root filesystem as a tarball: each directory of the host's `/` empty (the
/// run binds the host's over it), each symbolic link as it is, each file empty (a mount
/// point), and `/proc`, `/sys`, `/dev`, `/tmp` and `/run` for the engine's own mounts.
pub fn tarball(entries: &[(String, Entry, Option<String>)]) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let mut dirs: std::collections::BTreeSet<String> = ["proc", "sys", "dev", "tmp", "run"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    for (name, kind, target) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        match kind {
            Entry::Dir => {
                dirs.insert(name.clone());
                continue;
            }
            Entry::File => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(0o644);
                h.set_size(0);
                h.set_cksum();
                b.append_data(&mut h, name, std::io::empty())?;
            }
            Entry::Symlink => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                b.append_link(&mut h, name, target.as_deref().unwrap_or(""))?;
            }
        }
    }
    for d in dirs {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        h.set_mode(if d == "tmp" { 0o1777 } else { 0o755 });
        h.set_size(0);
        h.set_cksum();
        b.append_data(&mut h, format!("{d}/"), std::io::empty())?;
    }
    b.into_inner()
}

/// The id of `image` in `engine`'s store, if it is there.
pub fn id(
    engine: Engine,
    binary: &Path,
    runtime: Option<&str>,
    image: &str,
    path: &str,
) -> Option<String> {
    let mut c = Command::new(binary);
    c.env("PATH", path);
    if let Some(rt) = runtime.filter(|_| engine == Engine::Podman) {
        c.args(["--runtime", rt]);
    }
    let out = c
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let id = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !id.is_empty()).then(|| {
        if id.starts_with("sha256:") {
            id
        } else {
            format!("sha256:{id}")
        }
    })
}

/// Why `ENGINE import` failed.
#[derive(Debug)]
pub enum ImportFailed {
    /// The engine's client could not be started (at the caller's process limit: EAGAIN).
    Start(std::io::Error),
    /// It ran and failed, or its input or end could not be handled: why.
    Failed(String),
}

/// Makes the default image in `engine`'s store (`ENGINE import`).
pub fn import(binary: &Path, image: &str, tarball: &[u8], path: &str) -> Result<(), ImportFailed> {
    use std::io::Write;
    use ImportFailed::Failed;
    let mut child = Command::new(binary)
        .env("PATH", path)
        .args(["import", "-", image])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(ImportFailed::Start)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(tarball)
            .map_err(|e| Failed(format!("cannot write the image's tarball: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Failed(format!("cannot wait for {}: {e}", binary.display())))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Failed(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Vec<(String, Entry, Option<String>)> {
        vec![
            ("bin".into(), Entry::Symlink, Some("usr/bin".into())),
            ("etc".into(), Entry::Dir, None),
            ("usr".into(), Entry::Dir, None),
            (".dockerenv".into(), Entry::File, None),
        ]
    }

    #[test]
    fn the_tarball_holds_the_layout_and_nothing_of_the_hosts_files() {
        let t = tarball(&entries()).unwrap();
        let mut a = tar::Archive::new(&t[..]);
        let mut seen: Vec<(String, u64, Option<String>)> = a
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let link = e.link_name().unwrap().map(|l| l.display().to_string());
                (e.path().unwrap().display().to_string(), e.size(), link)
            })
            .collect();
        seen.sort();
        let names: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(
            names,
            [
                ".dockerenv",
                "bin",
                "dev/",
                "etc/",
                "proc/",
                "run/",
                "sys/",
                "tmp/",
                "usr/"
            ]
        );
        assert!(seen.iter().all(|s| s.1 == 0), "{seen:?}");
        assert_eq!(seen[1].2.as_deref(), Some("usr/bin"));
    }

    #[test]
    fn the_tag_changes_with_the_layout() {
        let mut e = entries();
        let a = tag(&e);
        assert!(a.starts_with("localhost/stockade-host:"));
        e[0].2 = Some("usr/sbin".into());
        assert_ne!(a, tag(&e));
    }
}
