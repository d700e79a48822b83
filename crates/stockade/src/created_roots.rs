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
//! O_EXCL | O_NOFOLLOW`, mode 0600). Where one is there already, it is rebuilt before every
//! run: the agent writes it, and so can anything the agent runs, and it holds what the agent
//! starts or applies at every start (Claude Code's `mcpServers`, `env`, `apiKeyHelper`,
//! `projects`), so one run's plant would run in every later run, in any workspace. The file is
//! read on the host as data: examined without following a link (`fstatat(AT_SYMLINK_NOFOLLOW)`),
//! opened with `O_NOFOLLOW | O_NONBLOCK`, a regular file with one link (`fstat`), at most 1 MiB,
//! a JSON object; the new file holds only the values of
//! [`policy::presets::SEED_CARRIED_KEYS`] found there (answers and counters that start
//! nothing, the onboarding and the approval among them), written under a new name and renamed over the old one, which replaces the entry
//! itself (a link, a FIFO, a hard link planted at the name is never followed, opened or
//! written through). Anything else there (a link, a FIFO, not JSON) is replaced by the seed,
//! with a note on stderr; a directory is left as it is, with a note.

use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use rustix::fs::{mkdirat, openat, Mode, OFlags};

use crate::Error;

/// Make the policy's missing created roots under `home`.
pub(crate) fn make(policy: &policy::Policy, home: &Path) -> Result<(), Error> {
    let needed = policy
        .filesystem
        .created_roots
        .iter()
        .any(|e| e.starts_with("~/"))
        || policy.presets.iter().any(|name| {
            policy::preset(name)
                .is_ok_and(|p| p.seeds.iter().any(|(path, _)| path.starts_with("~/")))
        });
    if needed {
        owner_check(home, rustix::process::geteuid().as_raw())?;
    }
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

/// A preset's state is made only in a home the caller owns: root with a user's `HOME` (`sudo
/// -E`) would leave root-owned directories and files there, which the user's own runs then
/// cannot write (and which root would later read back as its own).
fn owner_check(home: &Path, euid: u32) -> Result<(), Error> {
    let st = rustix::fs::stat(home).map_err(|e| Error::Io {
        what: format!("examine the home {}", home.display()),
        cause: e.into(),
    })?;
    if st.st_uid == euid {
        return Ok(());
    }
    Err(Error::Usage {
        message: format!(
            "the home {} belongs to uid {}, not to the caller (uid {euid}): a preset's state directory made there would be the caller's, and the home's owner could not use it",
            home.display(),
            st.st_uid
        ),
        hint: "run stockade as the home's owner, or with the caller's own home (`sudo -H`, not `sudo -E`)".into(),
    })
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

/// The largest state file read back (Claude Code's `.claude.json` is a few KiB).
const STATE_CAP: u64 = 1 << 20;

/// Writes the seed `rest` beneath `home` (see the module's documentation): created new where
/// nothing is at that name; else rebuilt from `text` and the [`policy::presets::SEED_CARRIED_KEYS`]
/// of what is there, read as data and replaced by a new file renamed over the name.
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
    let prior = match read_prior(&dir, name) {
        Prior::Missing => {
            return match create(&dir, name, text) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
                Err(e) => Err(io(e)),
            }
        }
        Prior::Directory => {
            eprintln!(
                "stockade: note: {} is a directory, not the agent's state file; left as it is (remove it: stockade writes the file)",
                at.display()
            );
            return Ok(());
        }
        Prior::Unusable(why) => {
            eprintln!(
                "stockade: note: {} {why}; replaced by the preset's first-start state",
                at.display()
            );
            None
        }
        Prior::Json(map) => Some(map),
    };
    let Some(rebuilt) = rebuild(text, prior.as_ref()) else {
        // A seed that is not a JSON object is never rebuilt, only written where missing.
        return Ok(());
    };
    if prior.as_ref() == Some(&rebuilt) {
        return Ok(());
    }
    let body = serde_json::Value::Object(rebuilt).to_string() + "\n";
    replace(&dir, name, &body).map_err(io)
}

/// What is at a seed's name before the run.
enum Prior {
    Missing,
    Directory,
    /// Not a plain, single-linked, small JSON object file: why.
    Unusable(&'static str),
    Json(serde_json::Map<String, serde_json::Value>),
}

/// Reads what is at `name` beneath `dir` as data: never through a link (`O_NOFOLLOW`), never
/// opening a FIFO or device (checked with `fstatat(AT_SYMLINK_NOFOLLOW)` first, then `fstat` of
/// what was opened), at most [`STATE_CAP`] bytes, strict JSON.
fn read_prior(dir: &OwnedFd, name: &std::ffi::OsStr) -> Prior {
    use rustix::fs::{AtFlags, FileType};
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Prior::Missing,
        Err(_) => return Prior::Unusable("cannot be examined"),
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Prior::Directory,
        FileType::Symlink => return Prior::Unusable("is a symbolic link"),
        _ => return Prior::Unusable("is not a regular file (a FIFO, socket or device)"),
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let Ok(file) = openat(dir, name, flags, Mode::empty()) else {
        return Prior::Unusable("cannot be opened");
    };
    let Ok(st) = rustix::fs::fstat(&file) else {
        return Prior::Unusable("cannot be examined");
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Prior::Unusable("is not a regular file");
    }
    if st.st_nlink != 1 {
        return Prior::Unusable("has other hard links");
    }
    if u64::try_from(st.st_size).map_or(true, |n| n > STATE_CAP) {
        return Prior::Unusable("is larger than 1 MiB");
    }
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match rustix::io::read(&file, &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                bytes.extend_from_slice(&buf[..n]);
                if bytes.len() as u64 > STATE_CAP {
                    return Prior::Unusable("is larger than 1 MiB");
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Prior::Unusable("cannot be read"),
        }
    }
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(map)) => Prior::Json(map),
        _ => Prior::Unusable("is not a JSON object"),
    }
}

/// The carried keys of `prior` (their values as they are there: a state the agent made its
/// own keeps its answers, the seed is not forced into it), or the seed's object when there is
/// no prior state to carry.
fn rebuild(
    text: &str,
    prior: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let serde_json::Value::Object(mut out) = serde_json::from_str(text).ok()? else {
        return None;
    };
    if let Some(prior) = prior {
        out = serde_json::Map::new();
        for key in policy::presets::SEED_CARRIED_KEYS {
            if let Some(value) = prior.get(*key) {
                out.insert((*key).to_owned(), value.clone());
            }
        }
    }
    Some(out)
}

/// Creates `name` beneath `dir` (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600: `EEXIST` when
/// anything is at the name) holding `text`; a half-written file is removed.
fn create(dir: &OwnedFd, name: &std::ffi::OsStr, text: &str) -> Result<(), rustix::io::Errno> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let file = openat(dir, name, flags, Mode::from_raw_mode(0o600))?;
    let mut left = text.as_bytes();
    while !left.is_empty() {
        match rustix::io::write(&file, left) {
            Ok(0) => {
                let _ = rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty());
                return Err(rustix::io::Errno::IO);
            }
            Ok(n) => left = &left[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                // Half a file would be worse than none: the agent would find it broken.
                let _ = rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty());
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Replaces `name` beneath `dir` by a new file holding `text`: written under a new name of its
/// own (created, never opened if something is there) and renamed over `name`, which replaces
/// the entry itself (a link or FIFO planted there is never followed or opened).
fn replace(dir: &OwnedFd, name: &std::ffi::OsStr, text: &str) -> Result<(), rustix::io::Errno> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut tmp = std::ffi::OsString::from(".stockade-new-");
    tmp.push(format!("{}-{nanos:08x}", std::process::id()));
    tmp.push(name);
    create(dir, &tmp, text)?;
    if let Err(e) = rustix::fs::renameat(dir, &tmp, dir, name) {
        let _ = rustix::fs::unlinkat(dir, &tmp, rustix::fs::AtFlags::empty());
        return Err(e);
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
    fn a_home_the_caller_does_not_own_is_refused() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let me = rustix::process::geteuid().as_raw();
        owner_check(home.path(), me).unwrap();
        let e = owner_check(home.path(), me.wrapping_add(1)).unwrap_err();
        assert!(
            e.to_string().contains("sudo -H") || format!("{e:?}").contains("sudo -H"),
            "{e:?}"
        );
    }

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

    /// A file in the home, beside the state directory (same file system, for a hard link).
    fn outside_h(h: &Path) -> std::path::PathBuf {
        h.join("elsewhere.json")
    }

    #[test]
    fn a_seed_is_written_where_missing_rebuilt_from_its_carried_keys_and_never_through_a_link() {
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
        // What the agent made of it since: its carried keys stay, the rest goes.
        std::fs::write(
            &file,
            "{\"numStartups\":7,\"approved\":[\"mine\"],\"mcpServers\":{\"x\":{}},\"env\":{\"BASH_ENV\":\"/x\"},\"primaryApiKey\":\"k\",\"projects\":{\"/w\":{}}}",
        )
        .unwrap();
        seed(h, &state.join(".claude.json"), &text).unwrap();
        let got: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(got, serde_json::json!({"numStartups": 7}), "{got}");
        // Again: unchanged, not rewritten.
        let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap());
        seed(h, &state.join(".claude.json"), &text).unwrap();
        assert_eq!(
            std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap()),
            ino
        );
        // Not JSON, a FIFO: replaced by the seed (the FIFO never opened: this would block).
        std::fs::write(&file, "{not json").unwrap();
        seed(h, &state.join(".claude.json"), &text).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap().trim_end(), text);
        std::fs::remove_file(&file).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &file,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        seed(h, &state.join(".claude.json"), &text).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap().trim_end(), text);
        // A directory is left as it is.
        std::fs::remove_file(&file).unwrap();
        std::fs::create_dir(&file).unwrap();
        seed(h, &state.join(".claude.json"), &text).unwrap();
        assert!(file.is_dir());
        std::fs::remove_dir(&file).unwrap();
        // A hard link to a file elsewhere is not read from nor written through.
        std::fs::write(outside_h(h), "{\"numStartups\":99}").unwrap();
        std::fs::hard_link(outside_h(h), &file).unwrap();
        seed(h, &state.join(".claude.json"), &text).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap().trim_end(), text);
        assert_eq!(
            std::fs::read_to_string(outside_h(h)).unwrap(),
            "{\"numStartups\":99}"
        );
        // A link planted at the name (dangling, or to a file elsewhere) is never followed:
        // replaced by the seed; the control, a missing name, is written (above).
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(outside.path().join("planted"), &file).unwrap();
        seed(h, &state.join(".claude.json"), &text).unwrap();
        assert!(!outside.path().join("planted").exists());
        std::fs::write(outside.path().join("victim"), "{\"numStartups\":5}").unwrap();
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(outside.path().join("victim"), &file).unwrap();
        seed(h, &state.join(".claude.json"), &text).unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.path().join("victim")).unwrap(),
            "{\"numStartups\":5}"
        );
        assert!(!file.is_symlink());
        assert_eq!(std::fs::read_to_string(&file).unwrap().trim_end(), text);
        // A link on the way to the directory refuses, as for the directory itself.
        std::fs::remove_dir_all(h.join(".local")).unwrap();
        std::os::unix::fs::symlink(outside.path(), h.join(".local")).unwrap();
        assert!(seed(h, &state.join(".claude.json"), &text).is_err());
        assert!(!outside.path().join("state").exists());
    }
}
