//! What a run takes from its caller besides the plan: where the command's output goes, and
//! the handle that cancels it or passes it signals. Nothing process-global: two runs in one
//! process each have their own.

use std::net::TcpListener;
use std::os::fd::OwnedFd;

use crate::Cancel;

/// Where one output stream of the command goes.
#[derive(Debug)]
pub enum Sink {
    /// This process's own stream (fd 1 or 2): a terminal or `/dev/null` may be handed to the
    /// command as it is; anything else goes through the backend's relay.
    Process,
    /// This descriptor (a pipe, a file), always through the backend's relay.
    Fd(OwnedFd),
}

/// Where the command's stdin comes from.
#[derive(Debug, Default)]
pub enum Input {
    /// This process's own stdin (a terminal there becomes the run's own terminal, or
    /// `/dev/null` when the run gets none).
    #[default]
    Process,
    /// `/dev/null`: for a process whose own stdin is not the command's to read (a server
    /// whose stdin carries its protocol).
    Null,
    /// This descriptor (a pipe, a file).
    Fd(OwnedFd),
}

/// A run's own I/O and lifetime.
#[derive(Debug)]
pub struct RunIo {
    /// The command's stdin.
    pub stdin: Input,
    pub stdout: Sink,
    pub stderr: Sink,
    /// Cancels the run or passes signals to its command ([`Cancel::signal`]).
    pub control: Cancel,
    /// Also end the run on SIGINT, SIGTERM or SIGHUP to this process, passing the signals it
    /// catches on to the command (what the `stockade` binary wants; a library running several
    /// runs at once uses [`RunIo::control`] instead).
    pub process_signals: bool,
}

impl RunIo {
    /// The process's own streams and signals: what `stockade run` does.
    pub fn process() -> RunIo {
        RunIo {
            stdin: Input::Process,
            stdout: Sink::Process,
            stderr: Sink::Process,
            control: Cancel::new(),
            process_signals: true,
        }
    }

    /// Output into the given descriptors, ended only through `control`; stdin is this
    /// process's (see [`RunIo::with_stdin`]).
    pub fn captured(stdout: OwnedFd, stderr: OwnedFd, control: Cancel) -> RunIo {
        RunIo {
            stdin: Input::Process,
            stdout: Sink::Fd(stdout),
            stderr: Sink::Fd(stderr),
            control,
            process_signals: false,
        }
    }

    /// The same, with the command's stdin from `stdin`.
    pub fn with_stdin(self, stdin: Input) -> RunIo {
        RunIo { stdin, ..self }
    }
}

/// What the caller allows of a run besides its policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Run even when a protection cannot be enforced, recording what was skipped.
    pub allow_degraded: bool,
    /// Pass the command's stdout and stderr through the sanitizer (`sanitize::Sanitizer`), even
    /// when they are terminals.
    pub sanitize_output: bool,
    /// Give the command no terminal of its own even when the caller's streams are terminals
    /// (`--no-tty`): terminal output goes through the relay's pipes and a terminal stdin
    /// becomes `/dev/null`, so the command still never holds the caller's terminal.
    pub no_terminal: bool,
    /// Apply the output limit to the run's own terminal too. Off by default: the default limit
    /// keeps floods out of a model's context, and a terminal is read by a person (a full-screen
    /// program redraws far more than 16 MiB in an afternoon). `--output-limit` given on the
    /// command line turns it on.
    pub limit_terminal: bool,
    /// Leave the run's container behind when it ends, for debugging (`--keep`; the container
    /// backends: the run record names it and how to remove it).
    pub keep: bool,
}

/// Starts the egress proxy on the listener a backend opened in the sandbox's network (mode
/// proxy), from the caller's side.
pub type StartProxy = Box<dyn FnMut(TcpListener) -> Result<(), String> + Send>;

/// What the command's start waits for, once the sandbox is set up (the backend sets it up
/// meanwhile): what the caller prepares beside the set-up that must hold before the command
/// runs (the run journal, durable). An error ends the run before the command starts.
pub type BeforeCommand = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// Waits for `before` (when there is one); its error refuses the run before the command
/// starts, the same way for every backend.
pub fn wait_before_command(before: Option<BeforeCommand>) -> Result<(), crate::RunError> {
    match before.map(|before| before()) {
        Some(Err(cause)) => Err(crate::RunError::Unavailable {
            what: "what the command's start waits for",
            cause,
            fix: "see the cause".into(),
        }),
        _ => Ok(()),
    }
}
