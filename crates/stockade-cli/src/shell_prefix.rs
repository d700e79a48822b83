//! `stockade shell-prefix STRING`: Claude Code's `CLAUDE_CODE_SHELL_PREFIX` entry point. Claude
//! Code runs every Bash command as `PREFIX STRING`, the string being its whole wrapped
//! command:
//!
//! ```text
//! source ~/.claude/shell-snapshots/snapshot-bash-ID.sh 2>/dev/null || true && { shopt -u
//! extglob || setopt NO_EXTENDED_GLOB NO_BARE_GLOB_QUAL; } >/dev/null 2>&1 || true && eval
//! 'COMMAND' < /dev/null && pwd -P >| /tmp/claude-HEX-cwd
//! ```
//!
//! It runs as is, with bash (the snapshot is bash), under the policy, in a workspace that is the
//! project's root and never the directory the command happens to start in (`--workspace`,
//! else the directory Claude Code started in, read from its process, `CLAUDE_PID`, which must
//! be an ancestor, else `CLAUDE_PROJECT_DIR`; refused when the two disagree, since a
//! project's `.claude/settings.json` can set variables for the prefix): a `cd` the sandbox reports cannot widen
//! what the next command may write. The file the string ends by writing its working directory
//! to is the one thing outside the workspace the command may write (it reaches the host, so
//! Claude Code follows `cd` across commands). The variables the snapshot's tools need pass
//! (`CLAUDE_CODE_EXECPATH`: its `rg`), and there is no time limit unless one is asked for (a
//! background dev server lasts as long as Claude Code keeps it).

use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use stockade::Error;

/// Claude Code's variables the snapshot's shims and tools read.
const CLAUDE_VARIABLES: &[&str] = &[
    "CLAUDE_CODE_EXECPATH",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDECODE",
];

/// The target of `pwd -P >| FILE` at the end of Claude Code's string when it looks like its
/// working-directory file: an absolute path without spaces, quotes or shell syntax whose name
/// is `claude-*-cwd`. `None` when the string has none (then nothing outside the workspace is
/// granted). Where it may be is [`cwd_file_place`]'s to say.
pub(crate) fn cwd_file(command: &str) -> Option<String> {
    let (_, rest) = command.trim_end().rsplit_once("pwd -P >| ")?;
    let path = Path::new(rest);
    let name = path.file_name()?.to_str()?;
    let plain = !rest.contains(|c: char| c.is_whitespace() || "'\"\\$`;&|<>()".contains(c));
    (plain && path.is_absolute() && name.starts_with("claude-") && name.ends_with("-cwd"))
        .then(|| rest.to_string())
}

/// The name Claude Code gives its working-directory file: `claude-` + four lower-case hex
/// digits (`Math.random()*65536`, `toString(16)`, padded) + `-cwd`; builds that tag the file
/// with the message and tool call put `-msg_<id>` and/or `-toolu_<id>` before `-cwd`
/// (Claude Code 2.1.332, its Bash tool's `buildExecCommand`).
pub(crate) fn is_cwd_file_name(name: &str) -> bool {
    let Some(mid) = name
        .strip_prefix("claude-")
        .and_then(|n| n.strip_suffix("-cwd"))
    else {
        return false;
    };
    let (hex, tags) = mid.split_at(mid.len().min(4));
    let id = |s: &str, extra: &str| {
        (1..=64).contains(&s.len())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || extra.contains(c))
    };
    let tags_ok = match tags.strip_prefix('-') {
        None => tags.is_empty(),
        Some(t) => match t.strip_prefix("msg_") {
            Some(m) => match m.split_once("-toolu_") {
                Some((msg, tool)) => id(msg, "") && id(tool, "-"),
                None => id(m, ""),
            },
            None => t.strip_prefix("toolu_").is_some_and(|tool| id(tool, "-")),
        },
    };
    hex.len() == 4
        && hex
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        && tags_ok
}

/// `path` with `.`, `..` and repeated or trailing `/` resolved as text (Node's
/// `path.join`, which Claude Code builds the file's path with).
fn normalized(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// Claude Code's temporary directory, where it makes the working-directory file:
/// `CLAUDE_CODE_TMPDIR`, else `os.tmpdir()` as its runtime (Bun) computes it: the first
/// non-empty of `TMPDIR`, `TMP`, `TEMP`, else `/tmp`; then normalized. `var` reads the
/// caller's environment. `None` when that is not an absolute path.
pub(crate) fn claude_tmpdir(var: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let dir = ["CLAUDE_CODE_TMPDIR", "TMPDIR", "TMP", "TEMP"]
        .iter()
        .find_map(|n| var(n).filter(|v| !v.is_empty()))
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    dir.is_absolute().then(|| normalized(&dir))
}

/// Where the working-directory file `written` may be: exactly `TMPDIR/NAME` as Claude Code
/// writes it, `TMPDIR` being the caller's ([`claude_tmpdir`]) and `NAME` of Claude Code's
/// shape ([`is_cwd_file_name`]); never through `..`, `.` or `//`. `Err` is the reason.
pub(crate) fn cwd_file_place(
    written: &str,
    tmpdir: Option<&Path>,
) -> Result<(PathBuf, String), String> {
    let path = Path::new(written);
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("it has no file name")?;
    if !is_cwd_file_name(name) {
        return Err(format!(
            "`{name}` is not the name Claude Code gives it (claude-<4 hex digits>-cwd)"
        ));
    }
    let tmpdir = tmpdir.ok_or("the caller's temporary directory (CLAUDE_CODE_TMPDIR, TMPDIR, TMP, TEMP) is not an absolute path")?;
    let expected = tmpdir.join(name);
    if expected.as_os_str() != path.as_os_str() {
        return Err(format!(
            "Claude Code makes it in its temporary directory, as {}: this one is elsewhere, or reached through `..`, `.` or `//`",
            expected.display()
        ));
    }
    Ok((tmpdir.to_path_buf(), name.to_string()))
}

/// Make the cwd file `name` in `tmpdir` (mode 0600), or check the one there: `tmpdir` is the
/// real directory (its last component no symlink, opened with `O_NOFOLLOW`), the caller's or
/// root's, sticky when others may write it, and out of the run's reach (`reach`: the
/// workspace and the `--allow-write` paths, where the sandbox could swap it for a link); the
/// file is a regular file of this user with one name, reached through no symlink (opened
/// with `O_NOFOLLOW` beneath the directory's descriptor). The run may write it and nothing
/// else outside its roots.
fn prepare_cwd_file(tmpdir: &Path, name: &str, reach: &[PathBuf]) -> Result<PathBuf, Error> {
    let path = tmpdir.join(name);
    let refuse = |reason: String| {
        Error::Usage {
        message: format!(
            "refusing to let the command write Claude Code's working-directory file {}: {reason}",
            path.display()
        ),
        hint: "remove it, or point CLAUDE_CODE_TMPDIR at a directory of your own (mode 0700, outside the workspace)".into(),
    }
    };
    let me = rustix::process::geteuid().as_raw();
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(tmpdir)
        .map_err(|e| {
            refuse(format!(
                "its directory cannot be opened without following a link: {e}"
            ))
        })?;
    let dmeta = dir.metadata().map_err(|e| refuse(e.to_string()))?;
    if dmeta.uid() != me && dmeta.uid() != 0 {
        return Err(refuse(format!(
            "its directory belongs to uid {}, neither you nor root",
            dmeta.uid()
        )));
    }
    if dmeta.mode() & 0o022 != 0 && dmeta.mode() & 0o1000 == 0 {
        return Err(refuse(
            "others may write its directory, which is not sticky: they could swap the file".into(),
        ));
    }
    let fd_path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    let real = std::fs::read_link(&fd_path).map_err(|e| refuse(e.to_string()))?;
    if let Some(root) = reach.iter().find(|r| real.starts_with(r)) {
        return Err(refuse(format!(
            "its directory {} lies in {}, which the command may write (it could swap it for a link)",
            real.display(),
            root.display()
        )));
    }
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        // O_NONBLOCK: a FIFO planted there must not leave the open waiting for a reader.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(fd_path.join(name));
    let file = opened.map_err(|e| refuse(e.to_string()))?;
    let meta = file.metadata().map_err(|e| refuse(e.to_string()))?;
    if !meta.is_file() || meta.uid() != me || meta.nlink() != 1 {
        return Err(refuse(
            "it is not a regular file of yours with one name".into(),
        ));
    }
    Ok(path)
}

/// The workspace of a shell-prefix run: `--workspace`, else the directory Claude Code started
/// in ([`claude_start_dir`]), else `CLAUDE_PROJECT_DIR`. A repository's own
/// `.claude/settings.json` can set variables for Claude Code's commands (its `env` block), the
/// prefix's included: `CLAUDE_PROJECT_DIR` set there (`~`) would widen the workspace (found
/// by review). So Claude Code's process is believed first, and when both are there and name
/// different directories the command is refused.
fn workspace(given: Option<PathBuf>) -> Result<PathBuf, Error> {
    if let Some(dir) = given {
        return Ok(dir);
    }
    let named = std::env::var_os("CLAUDE_PROJECT_DIR").map(PathBuf::from);
    pick_workspace(
        claude_start_dir(&|n| std::env::var_os(n), &parent_of, &process_cwd),
        named,
    )
}

/// [`workspace`] without `--workspace`: `start` is [`claude_start_dir`]'s answer, `named` is
/// `CLAUDE_PROJECT_DIR`.
pub(crate) fn pick_workspace(
    start: Result<PathBuf, String>,
    named: Option<PathBuf>,
) -> Result<PathBuf, Error> {
    match (start, named) {
        (Ok(start), None) => Ok(start),
        (Ok(start), Some(named)) => {
            let same = |a: &Path, b: &Path| {
                std::fs::canonicalize(a).ok().zip(std::fs::canonicalize(b).ok()).is_some_and(|(a, b)| a == b)
            };
            if same(&start, &named) {
                Ok(start)
            } else {
                Err(Error::Usage {
                    message: format!(
                        "stockade shell-prefix: CLAUDE_PROJECT_DIR={} is not the directory Claude Code started in ({}): a project's .claude/settings.json `env` can set it for every command, so it is not believed",
                        named.display(),
                        start.display()
                    ),
                    hint: "remove CLAUDE_PROJECT_DIR from the settings' `env` (the prefix takes the directory Claude Code started in), or pass `--workspace /path/to/project` in the prefix script".into(),
                })
            }
        }
        (Err(_), Some(named)) => Ok(named),
        (Err(reason), None) => Err(Error::Usage {
            message: format!(
                "stockade shell-prefix needs the project's root: neither --workspace nor CLAUDE_PROJECT_DIR is set, and {reason}"
            ),
            hint: "run it as Claude Code's CLAUDE_CODE_SHELL_PREFIX (it takes the directory Claude Code started in), or pass `--workspace /path/to/project` in the prefix script".into(),
        }),
    }
}

/// How many processes up from this one Claude Code may be (the prefix script, a shell of
/// its own, stockade).
const MAX_DEPTH: usize = 8;

/// The directory Claude Code started in, as it tells its commands: `CLAUDE_PID` (which it
/// puts in every command's environment, the prefix's included, before the command string
/// runs) names its process, which must be an ancestor of this one (at most [`MAX_DEPTH`]
/// levels up: a `CLAUDE_PID` of another process is not believed), and that process's working
/// directory is where it started: Claude Code tracks a `cd` of its commands on its own (the
/// prefix starts in the tracked directory) and never changes its own, so no command can steer
/// it. `var`, `parent` and `cwd` read the environment, a process's parent and its working
/// directory (`/proc`). `Err` is the reason, for the refusal.
pub(crate) fn claude_start_dir(
    var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    parent: &dyn Fn(u32) -> Option<u32>,
    cwd: &dyn Fn(u32) -> Option<PathBuf>,
) -> Result<PathBuf, String> {
    let pid = var("CLAUDE_PID")
        .ok_or("CLAUDE_PID (which Claude Code gives its commands) is not set either")?;
    let pid: u32 = pid
        .to_str()
        .and_then(|p| p.parse().ok())
        .filter(|p| *p > 1)
        .ok_or_else(|| format!("CLAUDE_PID={} is not a process id", pid.to_string_lossy()))?;
    let me = std::process::id();
    let mut at = me;
    let found = (0..MAX_DEPTH).any(|_| match parent(at) {
        Some(p) if p > 0 => {
            at = p;
            p == pid
        }
        _ => false,
    });
    if !found {
        return Err(format!(
            "CLAUDE_PID={pid} is not a process this one was started by (Claude Code runs the prefix itself)"
        ));
    }
    let dir = cwd(pid).ok_or_else(|| {
        format!("the working directory of Claude Code's process {pid} cannot be read")
    })?;
    if !dir.is_absolute() || dir.to_string_lossy().ends_with(" (deleted)") {
        return Err(format!(
            "Claude Code's working directory {} is gone",
            dir.display()
        ));
    }
    Ok(dir)
}

/// The parent of process `pid` (`/proc/PID/stat`'s fourth field, after the name).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    ppid_in_stat(&stat)
}

/// The parent's id in the text of `/proc/PID/stat`: the name (in parentheses) may hold spaces
/// and `)`, so fields are counted after its last `)`.
pub(crate) fn ppid_in_stat(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The working directory of process `pid`.
fn process_cwd(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// The `run` arguments of `stockade shell-prefix OPTIONS STRING`.
pub(crate) fn run_args(args: crate::ShellPrefixArgs) -> Result<crate::RunArgs, Error> {
    let crate::ShellPrefixArgs {
        mut policy,
        record,
        command,
    } = args;
    // `STOCKADE_NO_USER_POLICY` is not believed here: a project's `.claude/settings.json` can
    // set it for Claude Code's commands (found by review); `--no-user-policy` in the prefix
    // script is the user's own word.
    crate::default_policy::ignore_env_switch();
    let root = workspace(policy.workspace.take())?;
    if let Some(written) = cwd_file(&command) {
        let tmpdir = claude_tmpdir(&|n| std::env::var_os(n));
        let (dir, name) = cwd_file_place(&written, tmpdir.as_deref()).map_err(|reason| Error::Usage {
            message: format!(
                "refusing to let the command write {written} as Claude Code's working-directory file: {reason}"
            ),
            hint: "run stockade shell-prefix from Claude Code (CLAUDE_CODE_SHELL_PREFIX), whose command ends with `pwd -P >| $TMPDIR/claude-XXXX-cwd`; set CLAUDE_CODE_TMPDIR for another directory".into(),
        })?;
        let reach: Vec<PathBuf> = std::iter::once(root.clone())
            .chain(policy.allow_write.iter().map(PathBuf::from))
            .filter(|p| p.is_absolute())
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        let file = prepare_cwd_file(&dir, &name, &reach)?;
        policy.allow_write.push(file.display().to_string());
    }
    for name in CLAUDE_VARIABLES {
        if std::env::var_os(name).is_some() {
            policy.env.push((*name).to_owned());
        }
    }
    if policy.timeout.is_none() {
        policy.timeout = Some(0);
    }
    policy.workspace = Some(root);
    Ok(crate::RunArgs {
        policy,
        shell: None,
        guard: false,
        record,
        // Claude Code gives its commands no terminal.
        no_tty: true,
        keep: false,
        control_fd: None,
        argv: vec!["bash".into(), "-c".into(), command],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_codes_start_directory_wins_over_claude_project_dir() {
        let a = std::env::temp_dir();
        let b = PathBuf::from("/");
        // Both name the same directory, or only one is known: taken.
        assert_eq!(
            pick_workspace(Ok(a.clone()), Some(a.clone())).ok(),
            Some(a.clone())
        );
        assert_eq!(pick_workspace(Ok(a.clone()), None).ok(), Some(a.clone()));
        assert_eq!(
            pick_workspace(Err("no pid".into()), Some(b.clone())).ok(),
            Some(b.clone())
        );
        // They disagree (a repository's settings set CLAUDE_PROJECT_DIR): refused, naming it.
        let e = pick_workspace(Ok(a), Some(b)).err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("CLAUDE_PROJECT_DIR=/")));
        // Neither: refused, naming --workspace.
        assert!(pick_workspace(Err("no pid".into()), None).is_err());
    }

    #[test]
    fn the_parent_is_read_after_the_name() {
        assert_eq!(ppid_in_stat("42 (claude) S 7 42 42 0"), Some(7));
        assert_eq!(ppid_in_stat("42 (a) b) (c) S 9 1"), Some(9));
        assert_eq!(ppid_in_stat("garbage"), None);
    }

    #[test]
    fn claude_codes_start_directory_only_from_an_ancestor() {
        let me = std::process::id();
        // me -> 500 (the prefix script) -> 400 (Claude Code) -> 1
        let parent = move |p: u32| match p {
            p if p == me => Some(500),
            500 => Some(400),
            400 => Some(1),
            _ => None,
        };
        let cwd = |p: u32| match p {
            400 => Some(PathBuf::from("/home/u/proj")),
            300 => Some(PathBuf::from("/")),
            _ => None,
        };
        let env = |pid: &'static str| move |n: &str| (n == "CLAUDE_PID").then(|| pid.into());
        assert_eq!(
            claude_start_dir(&env("400"), &parent, &cwd),
            Ok(PathBuf::from("/home/u/proj"))
        );
        // Not an ancestor: another process's directory is not taken.
        let e = claude_start_dir(&env("300"), &parent, &cwd).unwrap_err();
        assert!(e.contains("not a process this one was started by"), "{e}");
        assert!(claude_start_dir(&env("x"), &parent, &cwd).is_err());
        assert!(claude_start_dir(&env("1"), &parent, &cwd).is_err());
        let e = claude_start_dir(&|_| None, &parent, &cwd).unwrap_err();
        assert!(e.contains("CLAUDE_PID"), "{e}");
        let gone = |_| Some(PathBuf::from("/home/u/proj (deleted)"));
        assert!(claude_start_dir(&env("400"), &parent, &gone).is_err());
    }

    #[test]
    fn the_cwd_file_is_read_from_the_end_of_the_string() {
        let s = "source ~/.claude/shell-snapshots/snapshot-bash-1.sh 2>/dev/null || true && eval 'cd sub' < /dev/null && pwd -P >| /tmp/claude-a1b2-cwd";
        assert_eq!(cwd_file(s).as_deref(), Some("/tmp/claude-a1b2-cwd"));
        assert_eq!(cwd_file("echo hi"), None);
        for bad in [
            "x && pwd -P >| relative/claude-1-cwd",
            "x && pwd -P >| /etc/passwd",
            "x && pwd -P >| /tmp/claude-1-cwd; rm -rf /",
            "x && pwd -P >| '/tmp/claude-1-cwd'",
        ] {
            assert_eq!(cwd_file(bad), None, "{bad}");
        }
        // Looks like one: the place is checked next.
        assert_eq!(
            cwd_file("x && pwd -P >| /home/x/.bashrc/../claude-1-cwd").as_deref(),
            Some("/home/x/.bashrc/../claude-1-cwd")
        );
    }

    #[test]
    fn the_name_has_claude_codes_shape() {
        for ok in [
            "claude-a1b2-cwd",
            "claude-0000-cwd",
            "claude-ffff-cwd",
            "claude-1a2b-msg_01AbC-cwd",
            "claude-1a2b-toolu_01Ab-Cd-cwd",
            "claude-1a2b-msg_01-toolu_01x-cwd",
        ] {
            assert!(is_cwd_file_name(ok), "{ok}");
        }
        for bad in [
            "claude-1-cwd",
            "claude--cwd",
            "claude-A1B2-cwd",
            "claude-a1b2c-cwd",
            "claude-g123-cwd",
            "claude-a1b2-x-cwd",
            "claude-a1b2-msg_-cwd",
            "claude-a1b2-msg_a.b-cwd",
            "claude-a1b2-cwd.sh",
            "xclaude-a1b2-cwd",
            "claude-a1b2-",
            "claude-",
        ] {
            assert!(!is_cwd_file_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_temporary_directory_is_claude_codes() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |n: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        let dir = |pairs: &'static [(&'static str, &'static str)]| claude_tmpdir(&env(pairs));
        assert_eq!(dir(&[]), Some(PathBuf::from("/tmp")));
        assert_eq!(
            dir(&[("TMPDIR", "/var/tmp/u/")]),
            Some(PathBuf::from("/var/tmp/u"))
        );
        assert_eq!(
            dir(&[("TMPDIR", ""), ("TMP", "/t2")]),
            Some(PathBuf::from("/t2"))
        );
        assert_eq!(dir(&[("TEMP", "/t3")]), Some(PathBuf::from("/t3")));
        assert_eq!(
            dir(&[("CLAUDE_CODE_TMPDIR", "/c/./d/../e"), ("TMPDIR", "/x")]),
            Some(PathBuf::from("/c/e"))
        );
        assert_eq!(dir(&[("TMPDIR", "relative")]), None);
    }

    #[test]
    fn the_file_is_accepted_only_where_claude_code_makes_it() {
        let tmp = Some(Path::new("/tmp"));
        assert_eq!(
            cwd_file_place("/tmp/claude-a1b2-cwd", tmp),
            Ok((PathBuf::from("/tmp"), "claude-a1b2-cwd".to_string()))
        );
        let other = Some(Path::new("/var/tmp/me"));
        assert!(cwd_file_place("/var/tmp/me/claude-a1b2-cwd", other).is_ok());
        for (bad, why) in [
            ("/home/x/.bashrc/../claude-a1b2-cwd", "elsewhere"),
            ("/tmp/../root/claude-a1b2-cwd", "elsewhere"),
            ("/tmp/../tmp/claude-a1b2-cwd", "elsewhere"),
            ("/tmp/./claude-a1b2-cwd", "elsewhere"),
            ("//tmp/claude-a1b2-cwd", "elsewhere"),
            ("/etc/claude-a1b2-cwd", "elsewhere"),
            ("/etc/cron.d/claude-a1b2-cwd", "elsewhere"),
            ("/tmp/sub/claude-a1b2-cwd", "elsewhere"),
            ("/tmp/claude-1-cwd", "not the name"),
            ("/home/x/.bashrc/../claude-1-cwd", "not the name"),
        ] {
            let err = cwd_file_place(bad, tmp).expect_err(bad);
            assert!(err.contains(why), "{bad}: {err}");
        }
        // Not /tmp when the caller's temporary directory is elsewhere.
        assert!(cwd_file_place("/tmp/claude-a1b2-cwd", other).is_err());
        assert!(cwd_file_place("/tmp/claude-a1b2-cwd", None).is_err());
    }

    #[test]
    fn a_link_or_a_directory_within_reach_is_refused() {
        let base =
            std::env::temp_dir().join(format!("stockade-cwd-file-test.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir(&base).unwrap_or_else(|e| panic!("{e}"));
        let tmp = base.join("tmp");
        std::fs::create_dir(&tmp).unwrap_or_else(|e| panic!("{e}"));
        let target = base.join("bashrc");
        std::fs::write(&target, "# rc\n").unwrap_or_else(|e| panic!("{e}"));
        // A link named like the file, to a start-up file.
        std::os::unix::fs::symlink(&target, tmp.join("claude-a1b2-cwd"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(prepare_cwd_file(&tmp, "claude-a1b2-cwd", &[]).is_err());
        assert_eq!(
            std::fs::read_to_string(&target).ok().as_deref(),
            Some("# rc\n")
        );
        // The directory itself a link.
        let link = base.join("tmplink");
        std::os::unix::fs::symlink(&tmp, &link).unwrap_or_else(|e| panic!("{e}"));
        assert!(prepare_cwd_file(&link, "claude-c3d4-cwd", &[]).is_err());
        assert!(!tmp.join("claude-c3d4-cwd").exists());
        // A directory the run may write.
        let real = std::fs::canonicalize(&tmp).unwrap_or_else(|e| panic!("{e}"));
        assert!(prepare_cwd_file(&tmp, "claude-c3d4-cwd", &[real]).is_err());
        assert!(!tmp.join("claude-c3d4-cwd").exists());
        // Control: the real shape in the real directory is made, mode 0600.
        let made = prepare_cwd_file(&tmp, "claude-c3d4-cwd", &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(made, tmp.join("claude-c3d4-cwd"));
        let mode = std::fs::metadata(&made).map(|m| m.mode() & 0o777).ok();
        assert_eq!(mode, Some(0o600));
        let _ = std::fs::remove_dir_all(&base);
    }
}
