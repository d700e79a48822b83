//! The run's watchdog: ends the container, and removes the run's private files, should
//! stockade die before the run's end.

use std::process::{Command, Stdio};

use sandbox::RunError;

use super::ContainerPlanned;
use crate::Engine;

/// Ends the container should this process die before the run's end (SIGKILL, a crash): the
/// engine keeps a container running when its client dies (Docker's daemon, Podman's conmon),
/// and the command would run on unsupervised, past its time limit and never swept. A shell
/// reads a pipe only this process writes: `done` (when dropped, on every way out of the run)
/// lets it go; end of file without it makes it end the container (`ENGINE rm --force`, Podman
/// without its ten-second stop timeout; under `--keep`, `ENGINE kill`, which keeps it), again
/// two seconds later for a creation that was under way, then remove the run's private files
/// (its environment file, seccomp profile, staged git dirs and stream FIFOs, which this
/// process's end would have removed: `rm -rf` as GNU rm does it, not following links and not
/// crossing into another filesystem, in a directory only this process's user reaches; under
/// `--keep` they stay with the kept container). It is not this process's child nor in
/// its process group (the shell started here leaves it running in the background and exits),
/// and it ignores the terminal's signals: a kill of the group, of the process tree (by parent
/// pid, as agent hosts' tree-kill does) or Ctrl-C leaves it to do its work. A kill of the whole
/// cgroup (`systemctl stop`) ends it too (README: "Backends").
pub(super) struct Watchdog {
    tell: Option<std::io::PipeWriter>,
}

/// The watchdog's shell: `$1` is the run's private files (empty: they stay), the rest the
/// engine's command that ends the container. The background
/// subshell gets the pipe through fd 3 (a non-interactive shell gives a background list
/// /dev/null as its stdin otherwise); the shell itself exits at once.
const WATCHDOG: &str = "exec 3<&0; files=$1; shift; (trap '' INT TERM HUP; IFS= read -r said; [ \"$said\" = done ] && exit 0; \"$@\" >/dev/null 2>&1; sleep 2; \"$@\" >/dev/null 2>&1; [ -z \"$files\" ] || exec rm -rf --one-file-system -- \"$files\" >/dev/null 2>&1) <&3 3<&- & exit 0";

impl Watchdog {
    pub(super) fn start(planned: &ContainerPlanned, keep: bool) -> Result<Watchdog, RunError> {
        use std::os::unix::process::CommandExt;
        let refused = |e: std::io::Error| RunError::io("start the container's watchdog", e);
        // Both ends close on exec: only the shell's stdin (a duplicate) reaches it.
        let (read, tell) = std::io::pipe().map_err(refused)?;
        let end: &[&str] = match (keep, planned.engine) {
            (true, _) => &["kill"],
            // Podman's `rm --force` waits for the stop timeout (SIGTERM first) by default.
            // `--volumes`: with it its anonymous volume, a review run's view (see
            // `flags::View`), which Docker keeps otherwise.
            (false, Engine::Podman) => &["rm", "--force", "--volumes", "--time", "0"],
            (false, Engine::Docker) => &["rm", "--force", "--volumes"],
        };
        // stockade's own environment (the engine's store and daemon address), with the
        // engine's PATH; none of the command's variables.
        let mut shell = Command::new("/bin/sh")
            .args(["-c", WATCHDOG, "stockade-watchdog"])
            // Under `--keep` the private files stay with the container, whose binds need them
            // (`ENGINE start` of a kept container; its staged git dirs' state).
            .arg(if keep {
                std::path::Path::new("")
            } else {
                planned.files.path()
            })
            .arg(&planned.binary)
            .args(end)
            .arg(&planned.target.name)
            .env("PATH", &planned.engine_path)
            .stdin(Stdio::from(read))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Out of the caller's process group.
            .process_group(0)
            .spawn()
            .map_err(refused)?;
        // It exits at once, leaving the watchdog to init (or the nearest subreaper).
        shell.wait().map_err(refused)?;
        Ok(Watchdog { tell: Some(tell) })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(mut tell) = self.tell.take() {
            let _ = std::io::Write::write_all(&mut tell, b"done\n");
        }
    }
}
