//! The writable roots a preset's state and caches live in (`filesystem.created_roots`: an
//! agent's `~/.local/state/stockade/claude-code`, stockade's own `~/.cache/stockade/cargo`) are
//! made when missing, before the spec is computed, rather than refused as a missing
//! `--allow-write` would be; so are the protected and private directories in them that the
//! agent makes at start, which it then finds existing instead of being refused, and reported,
//! on every run.
//!
//! Only paths in the caller's home are made, one component at a time from the home down, and
//! opened without following a link (`O_NOFOLLOW`): a symbolic link on the way (planted by an
//! earlier run that could write there, or a dotfiles manager's) refuses the run, since what
//! the policy protects by name would not be what the agent writes through it. The directory
//! named is made with mode 0700; the parents it needs (`~/.local/state/stockade`) with 0755, as
//! such directories usually are: a sandbox user that is not the owner (gVisor, for a root
//! caller) must be able to pass through them to its own.

use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use rustix::fs::{mkdirat, openat, Mode, OFlags};

use crate::Error;

/// Make the policy's missing created roots under `home`.
pub(crate) fn make(policy: &policy::Policy, home: &Path) -> Result<(), Error> {
    for entry in &policy.filesystem.created_roots {
        let Some(rest) = entry.strip_prefix("~/") else {
            continue;
        };
        make_beneath(home, Path::new(rest))?;
    }
    Ok(())
}

/// Make (or find) each directory of `rest` beneath `home`, refusing links.
fn make_beneath(home: &Path, rest: &Path) -> Result<(), Error> {
    let io = |what: String| {
        move |e: rustix::io::Errno| Error::Io {
            what,
            cause: e.into(),
        }
    };
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir: OwnedFd = rustix::fs::open(
        home,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io(format!("open the home {}", home.display())))?;
    let mut at = home.to_path_buf();
    for part in rest.components() {
        let Component::Normal(name) = part else {
            return Err(Error::Usage {
                message: format!(
                    "a preset's directory ~/{} is not a plain path",
                    rest.display()
                ),
                hint: "report this: presets name plain paths in the home".into(),
            });
        };
        at.push(name);
        let last = at.strip_prefix(home).is_ok_and(|r| r == rest);
        let mode = if last { 0o700 } else { 0o755 };
        match mkdirat(&dir, name, Mode::from_raw_mode(mode)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => {
                return Err(io(format!("create the state directory {}", at.display()))(
                    e,
                ))
            }
        }
        dir = openat(&dir, name, flags, Mode::empty()).map_err(|e| match e {
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => Error::Usage {
                message: format!(
                    "{} is a symbolic link or not a directory: a preset protects the files of its state directory by name, and would not protect what a link leads to",
                    at.display()
                ),
                hint: "replace it by a plain directory (or remove it: stockade makes it), then run again".into(),
            },
            e => io(format!("open the state directory {}", at.display()))(e),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_made_and_links_on_the_way_refused() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let h = home.path();
        make_beneath(h, Path::new(".local/state/stockade/x/hooks")).unwrap();
        assert!(h.join(".local/state/stockade/x/hooks").is_dir());
        // Again: nothing to do.
        make_beneath(h, Path::new(".local/state/stockade/x/hooks")).unwrap();
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(outside.path(), h.join(".cache")).unwrap();
        let e = make_beneath(h, Path::new(".cache/stockade/cargo")).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
    }
}
