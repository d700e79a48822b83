//! A real terminal for the interactive agent tests: a tmux server of the test's own (its socket
//! in a directory the test gives, so the unprivileged pass's user runs its own), one window of
//! a fixed size running the command with exactly the environment given, what the window shows
//! as a person sees it (`capture-pane`: the screen after the agent's cursor movements and
//! redraws, not the raw byte stream), and keys typed into it. The window stays after the
//! command exits (`remain-on-exit`), so its last screen can be read.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Columns and rows of the window.
pub const SIZE: (u16, u16) = (120, 40);

/// A command running in a tmux window; the server is killed on drop.
pub struct Screen {
    socket: PathBuf,
}

#[allow(clippy::unwrap_used, clippy::expect_used)]
impl Screen {
    /// `argv` in `cwd` with exactly `env` (and nothing of the test's own environment), in a
    /// new tmux server whose socket is `dir/tmux.sock`.
    pub fn start(dir: &Path, cwd: &Path, env: &[(String, String)], argv: &[String]) -> Screen {
        let screen = Screen {
            socket: dir.join(format!("tmux-{}.sock", crate::unique())),
        };
        let mut command = vec!["/usr/bin/env".to_owned(), "-i".to_owned()];
        command.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        command.extend(argv.iter().cloned());
        let (cols, rows) = SIZE;
        let out = screen
            .tmux()
            .args(["-f", "/dev/null", "new-session", "-d", "-s", "t"])
            .args(["-x", &cols.to_string(), "-y", &rows.to_string()])
            .arg("-c")
            .arg(cwd)
            .args(&command)
            .output()
            .expect("run tmux (the terminal of these tests: scripts/test installs it)");
        assert!(
            out.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Keep the window when the command ends, to read its last screen and exit status.
        let _ = screen
            .tmux()
            .args(["set-option", "-t", "t", "remain-on-exit", "on"])
            .output();
        screen
    }

    fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket).env_remove("TMUX");
        c
    }

    /// The screen as it shows now, with what scrolled off it above, wrapped lines joined
    /// (trailing blank lines dropped).
    pub fn text(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-J", "-S", "-", "-t", "t"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        out.trim_end().to_owned()
    }

    /// Whether the command has exited.
    pub fn exited(&self) -> bool {
        self.tmux()
            .args(["display-message", "-p", "-t", "t", "#{pane_dead}"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "1")
            .unwrap_or(true)
    }

    /// Waits until the screen shows one of `want` (its index), or fails as soon as it shows one
    /// of `refuse` or the command exits, or after `timeout`: `Err` with what it showed.
    pub fn wait_for(
        &self,
        want: &[&str],
        refuse: &[&str],
        timeout: Duration,
    ) -> Result<usize, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.text();
            if let Some(i) = want.iter().position(|w| text.contains(w)) {
                return Ok(i);
            }
            if let Some(r) = refuse.iter().find(|r| text.contains(**r)) {
                return Err(format!("the screen shows {r:?}:\n{text}"));
            }
            if self.exited() {
                // Its last output may have come with its exit.
                let text = self.text();
                if let Some(i) = want.iter().position(|w| text.contains(w)) {
                    return Ok(i);
                }
                return Err(format!("the command exited; its last screen:\n{text}"));
            }
            if Instant::now() >= deadline {
                return Err(format!("nothing of {want:?} after {timeout:?}:\n{text}"));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Types `text` literally (no key names).
    pub fn type_text(&self, text: &str) {
        let _ = self
            .tmux()
            .args(["send-keys", "-t", "t", "-l", text])
            .output();
    }

    /// Presses keys by tmux's names (`Enter`, `Escape`, `C-c`, `Down`).
    pub fn keys(&self, keys: &[&str]) {
        let _ = self
            .tmux()
            .args(["send-keys", "-t", "t"])
            .args(keys)
            .output();
    }

    /// Waits up to `timeout` for the command to exit.
    pub fn wait_exit(&self, timeout: Duration) -> bool {
        crate::wait_until(|| self.exited(), timeout)
    }

    /// Ctrl-C twice (the second within an agent CLI's window for it), then waits for the
    /// command to exit; again while it has not (on a loaded machine a key can come before the
    /// CLI reads the first, and two can fall into one of its windows). Panics, showing the
    /// screen, when two minutes of that do not end it.
    pub fn quit(&self) {
        for _ in 0..12 {
            for _ in 0..2 {
                self.keys(&["C-c"]);
                std::thread::sleep(Duration::from_millis(400));
            }
            if self.wait_exit(Duration::from_secs(10)) {
                return;
            }
        }
        panic!("the run did not end after Ctrl-C twice:\n{}", self.text());
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").output();
        let _ = std::fs::remove_file(&self.socket);
    }
}
