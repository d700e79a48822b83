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
    cache("docker-client")
}

/// The cache file `name`: in `/run/stockade/` for root, `$XDG_STATE_HOME/stockade/` for
/// other users.
fn cache(name: &str) -> Option<PathBuf> {
    if rustix::process::geteuid().is_root() {
        return Some(PathBuf::from("/run/stockade").join(name));
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state"))
        })?;
    Some(state.join("stockade").join(name))
}

pub(crate) fn build_key(binary: &Path) -> Option<String> {
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
    read_entry(&cache_file()?, key)?.parse().ok()
}

/// The value cached in `file` for exactly `key` (`VALUE KEY` on one line).
fn read_entry(file: &Path, key: &str) -> Option<String> {
    let meta = std::fs::symlink_metadata(file).ok()?;
    if !meta.file_type().is_file() || meta.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    let (value, rest) = text.trim_end().split_once(' ')?;
    (rest == key).then(|| value.to_owned())
}

fn remember(key: &str, major: u32) {
    if let Some(file) = cache_file() {
        write_entry(&file, key, &major.to_string());
    }
}

/// The default image's id as last made or seen for `key` (the engine's build, the store the
/// environment names, the image's name): the engine is not asked on every run (~20 ms for
/// Podman). A stale entry (the image removed since) makes the engine refuse the run, never a
/// weaker one; the run then drops the entry (see `run.rs`).
pub(crate) fn cached_image(engine: Engine, key: &str) -> Option<String> {
    let v = read_entry(&cache(&format!("image-{}", engine.name()))?, key)?;
    (v.starts_with("sha256:") && v.len() == 71).then_some(v)
}

pub(crate) fn remember_image(engine: Engine, key: &str, id: Option<&str>) {
    if let Some(file) = cache(&format!("image-{}", engine.name())) {
        match id {
            Some(id) => write_entry(&file, key, id),
            None => {
                let _ = std::fs::remove_file(file);
            }
        }
    }
}

fn write_entry(file: &Path, key: &str, value: &str) {
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    // A new file renamed over the name: a link planted there is replaced, never followed.
    if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) {
        use std::io::Write;
        if writeln!(tmp, "{value} {key}").is_ok() {
            let _ = tmp.persist(file);
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
