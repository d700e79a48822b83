//! The stockade binary the file tools run inside the sandbox. The sandbox may not see where
//! this one lies: a build under `/tmp` (each run has a private `/tmp`), `~/.cargo/bin` under a
//! home the sandbox user cannot enter (a root caller's `/root`). A binary under the system's
//! own directories is used as it is; any other is copied into a fresh directory under
//! `/var/tmp` (the caller's, mode 0755, removed when the server ends), which the sandbox sees
//! read-only.

use std::path::{Path, PathBuf};

use crate::Error;

/// Where the system keeps programs: readable in every sandbox (the runtime it needs).
const SYSTEM_DIRS: &[&str] = &["/usr/", "/bin/", "/sbin/"];

/// The binary for the file tools, and the directory of its copy (removed on drop).
#[derive(Debug)]
pub struct InsideBinary {
    pub path: PathBuf,
    _copy: Option<tempfile::TempDir>,
}

impl InsideBinary {
    /// `exe` (canonical), or a copy of it that the sandbox can execute.
    pub fn stage(exe: &Path) -> Result<InsideBinary, Error> {
        if SYSTEM_DIRS.iter().any(|d| exe.starts_with(d)) {
            return Ok(InsideBinary {
                path: exe.to_path_buf(),
                _copy: None,
            });
        }
        let io = |what: &'static str| move |cause| Error::Io { what, cause };
        reap_stale();
        let dir = tempfile::Builder::new()
            .prefix("stockade-mcp.")
            .tempdir_in("/var/tmp")
            .map_err(io(
                "make a directory for the file tools' binary under /var/tmp",
            ))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(io("make the file tools' directory readable"))?;
        let path = dir.path().join("stockade");
        // A link where it can be one (the same filesystem: instant), else a copy (a debug
        // build is a quarter of a gigabyte, and an MCP client may not wait that long).
        // A link only to a binary others may read and run (the sandbox's user may be another).
        let shareable =
            std::fs::metadata(exe).is_ok_and(|m| m.permissions().mode() & 0o005 == 0o005);
        if !shareable || std::fs::hard_link(exe, &path).is_err() {
            std::fs::copy(exe, &path).map_err(io("copy the stockade binary for the file tools"))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .map_err(io("make the file tools' binary executable"))?;
        }
        std::fs::write(dir.path().join(OWNER), std::process::id().to_string())
            .map_err(io("record the server's pid beside its binary"))?;
        Ok(InsideBinary {
            path,
            _copy: Some(dir),
        })
    }
}

/// The file naming the server (its pid) a copy belongs to.
const OWNER: &str = "server.pid";

/// Copies left by servers that did not end cleanly (SIGKILL): this user's own directories
/// whose server is gone. Another user's, and any whose pid is alive or unreadable, stay.
fn reap_stale() {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir("/var/tmp") else {
        return;
    };
    let me = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("stockade-mcp.") {
            continue;
        }
        let path = entry.path();
        // The directory itself, never through a link, and ours.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || Some(meta.uid()) != me {
            continue;
        }
        let Ok(pid) = std::fs::read_to_string(path.join(OWNER)) else {
            continue;
        };
        let alive = pid
            .trim()
            .parse::<u32>()
            .is_ok_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}
