//! What the engine's client is: Docker's clients from 25 on take `bind-recursive=disabled`
//! and warn on every `bind-nonrecursive` (on the command's stderr). Asking the client
//! (`docker --version`) costs ~10 ms, so the answer is cached per client build (its path,
//! inode, size and modification time) in `/run/stockade/` for root,
//! `$XDG_STATE_HOME/stockade/` for other users. A wrong entry makes the engine refuse the
//! option or warn, never a weaker run: every bind is non-recursive either way.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::flags::NonRecursive;
use crate::Engine;

fn cache_file() -> Option<PathBuf> {
    if rustix::process::geteuid().is_root() {
        return Some(PathBuf::from("/run/stockade/docker-client"));
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state"))
        })?;
    Some(state.join("stockade").join("docker-client"))
}

fn build_key(binary: &Path) -> Option<String> {
    let m = std::fs::metadata(binary).ok()?;
    Some(format!(
        "{} {} {} {} {}",
        binary.display(),
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime()
    ))
}

fn cached(key: &str) -> Option<u32> {
    let file = cache_file()?;
    let meta = std::fs::symlink_metadata(&file).ok()?;
    if !meta.file_type().is_file() || meta.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let (major, rest) = text.trim_end().split_once(' ')?;
    (rest == key).then(|| major.parse().ok()).flatten()
}

fn remember(key: &str, major: u32) {
    let Some(file) = cache_file() else { return };
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    // A new file renamed over the name: a link planted there is replaced, never followed.
    if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) {
        use std::io::Write;
        if writeln!(tmp, "{major} {key}").is_ok() {
            let _ = tmp.persist(&file);
        }
    }
}

/// The major version in `Docker version 28.2.2, build e6534b4`.
pub(crate) fn major_of(version: &str) -> Option<u32> {
    let v = version.split("version ").nth(1)?;
    v.split(['.', ',', ' ', '+', '-']).next()?.parse().ok()
}

/// How `binary` (of `engine`) is told a bind is not recursive.
pub(crate) fn nonrecursive(engine: Engine, binary: &Path) -> NonRecursive {
    if engine == Engine::Podman {
        return NonRecursive::Legacy;
    }
    let key = build_key(binary);
    let major = key.as_deref().and_then(cached).or_else(|| {
        let out = Command::new(binary)
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let major = major_of(&String::from_utf8_lossy(&out.stdout))?;
        if let Some(k) = &key {
            remember(k, major);
        }
        Some(major)
    });
    match major {
        Some(m) if m >= 25 => NonRecursive::Disabled,
        _ => NonRecursive::Legacy,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_of_docker_clients_are_read() {
        assert_eq!(
            super::major_of("Docker version 28.2.2, build e6534b4"),
            Some(28)
        );
        assert_eq!(
            super::major_of("Docker version 20.10.24+dfsg1, build 297e128"),
            Some(20)
        );
        assert_eq!(super::major_of("nonsense"), None);
    }
}
