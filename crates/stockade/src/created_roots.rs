//! The writable roots a preset's state and caches live in (`filesystem.created_roots`: an
//! agent's `~/.claude`, stockade's own `~/.cache/stockade/cargo`) are made when missing,
//! before the spec is computed, rather than refused as a missing `--allow-write` would be; so
//! are the protected directories in them that the agent makes at start (`~/.claude/hooks`),
//! which it then finds existing instead of being refused, and reported, on every run.
//!
//! Only paths in the caller's home are made, with mode 0700 (missing parents too, also 0700).
//! Whatever exists at the path already (a directory, a link, a file) is left alone: the
//! workspace scan judges it as it judges any writable root.

use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use crate::Error;

/// Make the policy's missing created roots under `home`.
pub(crate) fn make(policy: &policy::Policy, home: &Path) -> Result<(), Error> {
    for entry in &policy.filesystem.created_roots {
        let Some(rest) = entry.strip_prefix("~/") else {
            continue;
        };
        let path = home.join(rest);
        if path.symlink_metadata().is_ok() {
            continue;
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)
            .map_err(|cause| Error::Io {
                what: format!("create the state directory {}", path.display()),
                cause,
            })?;
    }
    Ok(())
}
