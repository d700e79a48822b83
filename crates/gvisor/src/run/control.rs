//! How runsc is reached about the run: the program with its global arguments, started in the
//! run's network namespace, and what is asked of it about the container.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::Plan;

/// How the run's runsc is reached: the program with its global arguments (its state
/// directory among them), and the network namespace it runs in (its control socket is there:
/// every runsc asked about the run must start there too). A clone serves the usage sampler's
/// thread.
#[derive(Clone)]
pub(super) struct Control {
    program: std::path::PathBuf,
    args: Vec<String>,
    join: Option<sys::netns::Join>,
}

impl Control {
    pub(super) fn new(plan: &Plan, state: &Path, join: Option<sys::netns::Join>) -> Control {
        let mut args = vec![
            format!("--root={}", state.display()),
            format!("--platform={}", plan.platform.name()),
            format!("--network={}", plan.network),
            // The config's seccomp filter (set-ID bits, see `bundle`).
            "--oci-seccomp".to_owned(),
        ];
        if plan.caller.rootless {
            args.push("--rootless".to_owned());
        }
        Control {
            program: plan.runsc.clone(),
            args,
            join,
        }
    }

    /// `runsc` with its global arguments, starting in the run's network namespace.
    pub(super) fn command(&self) -> Command {
        let mut c = Command::new(&self.program);
        if let Some(join) = &self.join {
            join.on_exec(&mut c);
        }
        c.args(&self.args);
        c
    }
}

/// `runsc ARGS...` about the container, to its end, best effort.
pub(super) fn runsc_about_container(ctl: &Control, args: &[&str]) {
    let _ = ctl
        .command()
        .args(args)
        // Pipes, never /dev/null: runsc as root gives its standard streams to `nobody`.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .status();
}

/// Signals the container (`runsc kill`), best effort.
pub(super) fn kill(plan: &Plan, ctl: &Control, signal: &str) {
    runsc_about_container(ctl, &["kill", "--all", &plan.caller.run_id, signal]);
}
