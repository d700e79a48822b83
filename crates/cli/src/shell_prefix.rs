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
//! else `CLAUDE_PROJECT_DIR`, which Claude Code sets): a `cd` the sandbox reports cannot widen
//! what the next command may write. The file the string ends by writing its working directory
//! to is the one thing outside the workspace the command may write (it reaches the host, so
//! Claude Code follows `cd` across commands). The variables the snapshot's tools need pass
//! (`CLAUDE_CODE_EXECPATH`: its `rg`), and there is no time limit unless one is asked for (a
//! background dev server lasts as long as Claude Code keeps it).

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use stockade::Error;

/// Claude Code's variables the snapshot's shims and tools read.
const CLAUDE_VARIABLES: &[&str] = &[
    "CLAUDE_CODE_EXECPATH",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDECODE",
];

/// The file `pwd -P >| FILE` at the end of Claude Code's string names: an absolute path whose
/// name is `claude-*-cwd`, without spaces or quotes. `None` when the string has none.
pub(crate) fn cwd_file(command: &str) -> Option<PathBuf> {
    let (_, rest) = command.trim_end().rsplit_once("pwd -P >| ")?;
    let path = Path::new(rest);
    let name = path.file_name()?.to_str()?;
    let plain = !rest.contains(|c: char| c.is_whitespace() || "'\"\\$`;&|<>()".contains(c));
    (plain && path.is_absolute() && name.starts_with("claude-") && name.ends_with("-cwd"))
        .then(|| path.to_path_buf())
}

/// Make the cwd file on the host (mode 0600), or check the one there: a regular file of this
/// user, reached through no symlink. The run may write it and nothing else outside its roots.
fn prepare_cwd_file(path: &Path) -> Result<(), Error> {
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        // O_NONBLOCK: a FIFO planted there must not leave the open waiting for a reader.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path);
    let refuse = |reason: String| Error::Usage {
        message: format!(
            "refusing to let the command write Claude Code's working-directory file {}: {reason}",
            path.display()
        ),
        hint: "remove it, or point CLAUDE_CODE_TMPDIR at a directory of your own".into(),
    };
    let file = opened.map_err(|e| refuse(e.to_string()))?;
    let meta = file.metadata().map_err(|e| refuse(e.to_string()))?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != me || meta.nlink() != 1 {
        return Err(refuse(
            "it is not a regular file of yours with one name".into(),
        ));
    }
    Ok(())
}

/// The workspace of a shell-prefix run: `--workspace`, else `CLAUDE_PROJECT_DIR`.
fn workspace(given: Option<PathBuf>) -> Result<PathBuf, Error> {
    given
        .or_else(|| std::env::var_os("CLAUDE_PROJECT_DIR").map(PathBuf::from))
        .ok_or_else(|| Error::Usage {
            message: "stockade shell-prefix needs the project's root: neither --workspace nor CLAUDE_PROJECT_DIR is set".into(),
            hint: "set CLAUDE_CODE_SHELL_PREFIX to `stockade shell-prefix --workspace /path/to/project`, or run it from Claude Code".into(),
        })
}

/// The `run` arguments of `stockade shell-prefix OPTIONS STRING`.
pub(crate) fn run_args(args: crate::ShellPrefixArgs) -> Result<crate::RunArgs, Error> {
    let crate::ShellPrefixArgs {
        mut policy,
        record,
        command,
    } = args;
    let root = workspace(policy.workspace.take())?;
    if let Some(file) = cwd_file(&command) {
        prepare_cwd_file(&file)?;
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
        control_fd: None,
        argv: vec!["bash".into(), "-c".into(), command],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cwd_file_is_read_from_the_end_of_the_string() {
        let s = "source ~/.claude/shell-snapshots/snapshot-bash-1.sh 2>/dev/null || true && eval 'cd sub' < /dev/null && pwd -P >| /tmp/claude-a1b2-cwd";
        assert_eq!(cwd_file(s), Some(PathBuf::from("/tmp/claude-a1b2-cwd")));
        assert_eq!(cwd_file("echo hi"), None);
        for bad in [
            "x && pwd -P >| relative/claude-1-cwd",
            "x && pwd -P >| /etc/passwd",
            "x && pwd -P >| /tmp/claude-1-cwd; rm -rf /",
            "x && pwd -P >| '/tmp/claude-1-cwd'",
        ] {
            assert_eq!(cwd_file(bad), None, "{bad}");
        }
    }
}
