//! Stage 2, the command's streams: their relays to the caller's (under the output limit and
//! `--sanitize-output`), a terminal of the run's own when the caller's streams are its
//! terminal, and a FIFO of the run's for each stream of the caller's that is not when others
//! are.

use std::io::IsTerminal;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;

use sandbox::RunError;

use super::{relay_pipe, ContainerPlanned};
use crate::flags;

/// Why a redirected stdin's copy could not open its FIFO, when it could not (the FIFO and
/// the cause): the supervision ends the container then, and the run is refused.
pub(super) type InputFailed = std::sync::Arc<std::sync::Mutex<Option<(PathBuf, std::io::Error)>>>;

/// What carries the command's output back, and ends it (for [`ContainerPlanned::collect`]).
pub(super) struct Relays {
    pub(super) redirected: Option<Redirected>,
    /// The relays of stdout and stderr.
    pub(super) threads: [std::thread::JoinHandle<stream::relay::Relayed>; 2],
    /// Dropped once the container has gone: a redirected output's relay then reads what its
    /// FIFO holds, and ends.
    pub(super) stop: OwnedFd,
    pub(super) input_failed: InputFailed,
}

/// The streams the engine's client is given (for [`ContainerPlanned::start`]).
pub(super) struct ClientStreams {
    pub(super) stdin: Stdio,
    /// The write ends of stdout's and stderr's pipes, or of their FIFOs.
    pub(super) out_w: OwnedFd,
    pub(super) err_w: OwnedFd,
    /// The run's own terminal: its master and slave sides.
    pub(super) terminal: Option<(OwnedFd, OwnedFd)>,
    /// stdout is a FIFO, whose write end is held until the client has ended.
    pub(super) hold_out: bool,
}

/// The caller's streams that are not its terminal when others are, under a run's own terminal
/// (see [`flags::STREAMS`]): a FIFO each, in a directory of the run's only this process's user
/// may reach (below the run's private files; under a root caller, the directory and FIFOs are
/// the command's id's, which alone may open them inside).
pub(super) struct Redirected {
    /// 0 stdin, 1 stdout, 2 stderr.
    pub(super) which: Vec<usize>,
    pub(super) dir: PathBuf,
    /// The directory's `--mount`.
    pub(super) mount: String,
}

impl Redirected {
    pub(super) fn has(&self, i: usize) -> bool {
        self.which.contains(&i)
    }

    /// A redirected output's FIFO: its read end (relayed to the caller's stream, without
    /// blocking: see `stream::relay::relay_to_sink_until`) and a write end (held for the
    /// client's time, so the relay sees no end before the command has opened its own). The
    /// read end is opened first, so that the write end's open does not wait.
    pub(super) fn open_output(&self, i: usize) -> Result<(OwnedFd, OwnedFd), RunError> {
        use rustix::fs::{Mode, OFlags};
        let refused = |e: rustix::io::Errno| RunError::io("open the run's stream FIFO", e.into());
        let path = self.dir.join(i.to_string());
        let base = OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let read = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::NONBLOCK | base,
            Mode::empty(),
        )
        .map_err(refused)?;
        let write =
            rustix::fs::open(&path, OFlags::WRONLY | base, Mode::empty()).map_err(refused)?;
        Ok((read, write))
    }

    /// A redirected stdin's copy waiting for the check to open its FIFO (a run that ended
    /// before the command started) is let go: a reader's open completes its open, and it ends
    /// at the first write or at once.
    pub(super) fn release_input(&self) {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        drop(rustix::fs::open(self.dir.join("0"), flags, Mode::empty()));
    }
}

impl ContainerPlanned {
    /// The FIFOs of the caller's streams `which` (see [`Redirected`]).
    fn redirect(&self, which: &[usize]) -> Result<Redirected, RunError> {
        use rustix::fs::{FileType, Mode, CWD};
        let made = || -> std::io::Result<PathBuf> {
            let hidden = self.files.path().join("io");
            rustix::fs::mkdir(&hidden, Mode::from_raw_mode(0o700))?;
            let dir = hidden.join("streams");
            rustix::fs::mkdir(&dir, Mode::from_raw_mode(0o700))?;
            let mut owned = vec![dir.clone()];
            for i in which {
                let fifo = dir.join(i.to_string());
                rustix::fs::mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0)?;
                owned.push(fifo);
            }
            if let Some((uid, gid)) = self.copy_owner {
                let (uid, gid) = (
                    rustix::process::Uid::from_raw(uid),
                    rustix::process::Gid::from_raw(gid),
                );
                for p in owned {
                    rustix::fs::chown(&p, Some(uid), Some(gid))?;
                }
            }
            Ok(dir)
        };
        let dir = made().map_err(|e| RunError::io("make the run's stream FIFOs", e))?;
        let mount = flags::streams_mount(&dir, &self.target).map_err(|e| RunError::Plan {
            code: sandbox::Code::ProtectionUnavailable,
            message: format!("the run's streams cannot be bound: {e}"),
            hint: Some(
                "run with --no-tty, or with all of stdin, stdout and stderr the terminal or none"
                    .into(),
            ),
        })?;
        Ok(Redirected {
            which: which.to_vec(),
            dir,
            mount,
        })
    }

    /// The command's streams: relays of its output started, its terminal made, its stdin's
    /// copy started, and the engine's flags for them inserted in `args` after `run` (at
    /// `run_at`). A caller whose streams are its terminal (an interactive shell, an agent's
    /// TUI) gives the run a terminal of its own: a pseudo-terminal of stockade's, which the
    /// engine's client has for its streams and relays into the container's (`--tty`), and
    /// stockade relays to and from the caller's as the other backends do (sanitized, bounded,
    /// resized, `~.`). The engine's terminal is all three of the container's streams: one of
    /// the caller's that is not its terminal (`> file`, `2>log`, `< input`, a pipe) is a FIFO
    /// of the run's instead, which the check inside makes the command's (see
    /// [`flags::STREAMS`]).
    pub(super) fn streams(
        &self,
        own_terminal: Option<&stream::terminal::CallerTerminal>,
        sinks: [sandbox::Sink; 2],
        stdin: sandbox::Input,
        options: sandbox::Options,
        args: (&mut Vec<String>, usize),
    ) -> Result<(Relays, ClientStreams), RunError> {
        let redirected = match own_terminal {
            Some(t) if t.streams != [true; 3] => {
                let which: Vec<usize> = (0..3).filter(|&i| !t.streams[i]).collect();
                Some(self.redirect(&which)?)
            }
            _ => None,
        };
        let fifo = |i: usize| redirected.as_ref().filter(|r| r.has(i));
        let sanitize = options.sanitize_output;
        let limit = self.output_limit;
        // A redirected stdout's FIFO is held open for writing here until the client has
        // ended (the command's open may come later: its reader must not see an end before);
        // a redirected stderr's is the client's own stderr (its words go where the command's
        // errors go), which holds it so.
        let [stdout, stderr] = sinks;
        let (out_r, out_w) = match fifo(1) {
            Some(r) => r.open_output(1)?,
            None => relay_pipe()?,
        };
        let (err_r, err_w) = match fifo(2) {
            Some(r) => r.open_output(2)?,
            None => relay_pipe()?,
        };
        let thread_refused =
            |e: std::io::Error| RunError::io("start a thread relaying the command's streams", e);
        // A redirected output's relay ends at the FIFO's end, or once the container has gone
        // and what it holds has been read (`stop_w` dropped): a process of the command's id
        // outside the container could hold a write end open for ever (red team).
        let (stop_r, stop_w) = relay_pipe()?;
        let input_failed = InputFailed::default();
        let relay = |from: OwnedFd, sink: sandbox::Sink, name: &'static str, fifo: bool| {
            let stop = (fifo.then(|| stop_r.try_clone()).transpose())
                .map_err(|e| RunError::io("create a pipe for the command's streams", e))?;
            std::thread::Builder::new()
                .spawn(move || match stop {
                    Some(stop) => {
                        stream::relay::relay_to_sink_until(from, sink, limit, name, sanitize, stop)
                    }
                    None => stream::relay::relay_to_sink(from, sink, limit, name, sanitize),
                })
                .map_err(thread_refused)
        };
        let relays = [
            relay(out_r, stdout, "stdout", fifo(1).is_some())?,
            relay(err_r, stderr, "stderr", fifo(2).is_some())?,
        ];
        drop(stop_r);
        let terminal = match own_terminal {
            Some(t) => Some(
                sys::parent::new_pty(&t.settings, &t.size)
                    .map_err(|e| RunError::io("make the run's terminal", e))?,
            ),
            None => None,
        };
        // Else stdin is copied as it comes; a terminal is never read here (the command reads
        // end of file: `--no-tty`, as natively).
        let keyboard = match &stdin {
            sandbox::Input::Process => std::io::stdin().is_terminal(),
            sandbox::Input::Fd(from) => from.as_fd().is_terminal(),
            sandbox::Input::Null => false,
        };
        let input = match stdin {
            _ if keyboard || (terminal.is_some() && fifo(0).is_none()) => None,
            sandbox::Input::Process if stream::relay::stdin_is_live() => {
                std::io::stdin().as_fd().try_clone_to_owned().ok()
            }
            sandbox::Input::Fd(from) => Some(from),
            sandbox::Input::Process | sandbox::Input::Null => None,
        };
        let (args, run_at) = args;
        let hold_out = fifo(1).is_some();
        let stdin = match (&terminal, input) {
            (Some((_, slave)), input) => {
                args.insert(run_at + 1, "--tty".into());
                args.insert(run_at + 1, "--interactive".into());
                if let Some(r) = &redirected {
                    let paths: Vec<String> = (r.which.iter())
                        .map(|i| format!("{}/{i}", flags::STREAMS))
                        .collect();
                    args.insert(run_at + 1, r.mount.clone());
                    args.insert(run_at + 1, "--mount".into());
                    args.insert(
                        run_at + 1,
                        format!("--env=STOCKADE_CHECK_STREAMS={}", paths.join(" ")),
                    );
                }
                // A redirected stdin: copied into its FIFO once the check has opened it (the
                // thread's open waits for that; nothing to copy gives the command an end of
                // file). An open that fails leaves the check waiting at its own open, before
                // the command: the supervision below ends the container, and the run says why.
                if let Some(r) = fifo(0) {
                    copy_into_fifo(r.dir.join("0"), input, &input_failed)
                        .map_err(thread_refused)?;
                }
                // Docker's client sizes the container's terminal only once it has started
                // (Podman's gives the size at its creation): the check inside waits for it,
                // up to a second, so the command's first look sees the caller's window (a
                // loaded CI saw `stty size` answer "0 0"). Not for a window of no size.
                if own_terminal.is_some_and(|t| t.size.ws_row > 0 && t.size.ws_col > 0) {
                    args.insert(run_at + 1, "--env=STOCKADE_CHECK_TTY=1".into());
                }
                Stdio::from(
                    slave
                        .try_clone()
                        .map_err(|e| RunError::io("hand the run's terminal to the engine", e))?,
                )
            }
            (None, Some(from)) => {
                args.insert(run_at + 1, "--interactive".into());
                let (in_r, in_w) = relay_pipe()?;
                std::thread::Builder::new()
                    .spawn(move || stream::relay::relay_input(from, in_w))
                    .map_err(thread_refused)?;
                Stdio::from(in_r)
            }
            (None, None) => Stdio::null(),
        };
        Ok((
            Relays {
                redirected,
                threads: relays,
                stop: stop_w,
                input_failed,
            },
            ClientStreams {
                stdin,
                out_w,
                err_w,
                terminal,
                hold_out,
            },
        ))
    }
}

/// A thread copying `input` (none: the command reads end of file at once) into a redirected
/// stdin's FIFO at `path` once the check inside has opened it (the thread's open waits for
/// that); an open that fails says why in `failed`.
fn copy_into_fifo(
    path: PathBuf,
    input: Option<OwnedFd>,
    failed: &InputFailed,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let failed = std::sync::Arc::clone(failed);
    std::thread::Builder::new().spawn(move || {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let opened = loop {
            match rustix::fs::open(&path, flags, Mode::empty()) {
                Err(rustix::io::Errno::INTR) => continue,
                other => break other,
            }
        };
        match opened {
            Ok(to) => {
                if let Some(from) = input {
                    stream::relay::relay_input(from, to);
                }
            }
            Err(e) => {
                if let Ok(mut slot) = failed.lock() {
                    *slot = Some((path, e.into()));
                }
            }
        }
    })
}
