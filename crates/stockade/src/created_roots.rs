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
//!
//! A preset's seed files (Claude Code's `.claude.json`, its first start's onboarding done and
//! the stand-in approved, see [`policy::Preset::seeds`]) are written where they are missing,
//! beneath the descriptor of their directory (opened as above), created new (`O_CREAT |
//! O_EXCL | O_NOFOLLOW`, mode 0600): whatever is at the name already, a file the agent wrote, or
//! a link, a FIFO or a directory an earlier run planted there (the directory is writable
//! inside), is left as it is and never opened, followed or read. What is written is the
//! preset's own text, the same for every run of the user: a run that removes the file gets it
//! back, and nothing else.

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
    for name in &policy.presets {
        let Ok(preset) = policy::preset(name) else {
            continue;
        };
        for (path, text) in preset.seeds {
            if let Some(rest) = path.strip_prefix("~/") {
                seed(home, Path::new(rest), &fill(text, home))?;
            }
        }
    }
    Ok(())
}

/// A seed's text with each `{stand_in_tail:ROUTE}` replaced by that route's stand-in tail.
fn fill(text: &str, home: &Path) -> String {
    const OPEN: &str = "{stand_in_tail:";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        let Some(end) = after.find('}') else {
            break;
        };
        out.push_str(&rest[..at]);
        out.push_str(&crate::credentials::stand_in_tail_hex(home, &after[..end]));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Writes `text` into the file `rest` beneath `home` when nothing is at that name (see the
/// module's documentation); its directory made or found as [`make_beneath`] does.
fn seed(home: &Path, rest: &Path, text: &str) -> Result<(), Error> {
    let (Some(parent), Some(name)) = (rest.parent(), rest.file_name()) else {
        return Ok(());
    };
    let dir = make_beneath(home, parent)?;
    let at = home.join(rest);
    let io = |e: rustix::io::Errno| Error::Io {
        what: format!("write the agent's first-start state {}", at.display()),
        cause: e.into(),
    };
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let file = match openat(&dir, name, flags, Mode::from_raw_mode(0o600)) {
        Ok(file) => file,
        Err(rustix::io::Errno::EXIST) => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    let mut left = text.as_bytes();
    while !left.is_empty() {
        match rustix::io::write(&file, left) {
            Ok(0) => {
                let _ = rustix::fs::unlinkat(&dir, name, rustix::fs::AtFlags::empty());
                return Err(io(rustix::io::Errno::IO));
            }
            Ok(n) => left = &left[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                // Half a file would be worse than none: the agent would find it broken.
                let _ = rustix::fs::unlinkat(&dir, name, rustix::fs::AtFlags::empty());
                return Err(io(e));
            }
        }
    }
    Ok(())
}

/// Make (or find) each directory of `rest` beneath `home`, refusing links; the last one's
/// descriptor (`O_PATH`).
fn make_beneath(home: &Path, rest: &Path) -> Result<OwnedFd, Error> {
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
    Ok(dir)
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

    #[test]
    fn a_seed_is_written_where_missing_and_never_over_or_through_what_is_there() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let h = home.path();
        let state = Path::new(".local/state/stockade/x");
        let file = h.join(state).join(".claude.json");
        let text = fill("{\"approved\":[\"{stand_in_tail:anthropic}\"]}", h);
        let tail = crate::credentials::stand_in_tail_hex(h, "anthropic");
        assert_eq!(text, format!("{{\"approved\":[\"{tail}\"]}}"));
        seed(h, &state.join(".claude.json"), &text).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // What the agent made of it since stays.
        std::fs::write(&file, "{\"agent\":1}").unwrap();
        seed(h, &state.join(".claude.json"), &text).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{\"agent\":1}");
        // A link planted at the name (dangling, or to a file elsewhere) is neither followed nor
        // replaced; the control, a missing name, is written (above).
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(outside.path().join("planted"), &file).unwrap();
        seed(h, &state.join(".claude.json"), &text).unwrap();
        assert!(!outside.path().join("planted").exists());
        std::fs::write(outside.path().join("victim"), "mine").unwrap();
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(outside.path().join("victim"), &file).unwrap();
        seed(h, &state.join(".claude.json"), &text).unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.path().join("victim")).unwrap(),
            "mine"
        );
        // A link on the way to the directory refuses, as for the directory itself.
        std::fs::remove_dir_all(h.join(".local")).unwrap();
        std::os::unix::fs::symlink(outside.path(), h.join(".local")).unwrap();
        assert!(seed(h, &state.join(".claude.json"), &text).is_err());
        assert!(!outside.path().join("state").exists());
    }
}
