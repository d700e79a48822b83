//! The caller's side of a run's own terminal, for every backend: which of the caller's streams
//! are terminals decides which of the command's streams become the run's terminal
//! ([`caller_terminal`]); once the backend has the run's terminal's master side (native: from
//! its init; gVisor: from runsc's console socket, see [`CallerTerminal::apply_to`]), [`attach`] puts the caller's terminal in raw mode and relays both ways
//! ([`super::relay`]) until [`Attached::finish`].
//!
//! Only the `stockade` process's own streams count (`Sink::Process`, and stdin only when the
//! run owns the process's signals): a library run never takes over its host's terminal.
//!
//! Several runs may share one terminal (`make -j`, an agent running tools in parallel): the
//! first takes it (an exclusive `flock` on a description of its own, or a claim by name for a
//! caller that may not open its terminal again, see [`super::take_input`]), the others relay
//! only their output, leave its settings alone and say so on stderr.

use std::io::IsTerminal;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::thread::JoinHandle;

use super::{RawMode, Terminal, Wake};
use crate::relay::Relayed;

/// The caller's terminal as the run's own starts from it.
#[derive(Debug, Clone, Copy)]
pub struct CallerTerminal {
    /// Which of stdin, stdout and stderr are terminals (and become the run's terminal).
    pub streams: [bool; 3],
    pub settings: libc::termios,
    pub size: libc::winsize,
}

impl CallerTerminal {
    /// Give a terminal someone else made (runsc's, through its master side) the window size
    /// and the settings the run's terminal starts from: the line discipline's input, output
    /// and local modes and its special characters (Ctrl-C, erase, ...); the control modes
    /// (character size, speed) stay the new terminal's.
    pub fn apply_to(&self, master: BorrowedFd<'_>) -> std::io::Result<()> {
        use rustix::termios::{self, InputModes, LocalModes, OutputModes, SpecialCodeIndex as I};
        let mut t = termios::tcgetattr(master)?;
        let s = &self.settings;
        t.input_modes = InputModes::from_bits_retain(s.c_iflag);
        t.output_modes = OutputModes::from_bits_retain(s.c_oflag);
        t.local_modes = LocalModes::from_bits_retain(s.c_lflag);
        let codes = [
            (I::VINTR, libc::VINTR),
            (I::VQUIT, libc::VQUIT),
            (I::VERASE, libc::VERASE),
            (I::VKILL, libc::VKILL),
            (I::VEOF, libc::VEOF),
            (I::VTIME, libc::VTIME),
            (I::VMIN, libc::VMIN),
            (I::VSTART, libc::VSTART),
            (I::VSTOP, libc::VSTOP),
            (I::VSUSP, libc::VSUSP),
            (I::VEOL, libc::VEOL),
            (I::VREPRINT, libc::VREPRINT),
            (I::VDISCARD, libc::VDISCARD),
            (I::VWERASE, libc::VWERASE),
            (I::VLNEXT, libc::VLNEXT),
            (I::VEOL2, libc::VEOL2),
        ];
        for (index, from) in codes {
            if let Some(c) = s.c_cc.get(from) {
                t.special_codes[index] = *c;
            }
        }
        termios::tcsetattr(master, termios::OptionalActions::Now, &t)?;
        let size = termios::Winsize {
            ws_row: self.size.ws_row,
            ws_col: self.size.ws_col,
            ws_xpixel: self.size.ws_xpixel,
            ws_ypixel: self.size.ws_ypixel,
        };
        termios::tcsetwinsize(master, size)?;
        Ok(())
    }
}

/// The caller's terminal, when any of stdin, stdout (`Sink::Process`) and stderr (same) is
/// one and `--no-tty` was not given. Its settings and window size are read from the first
/// of them (the usual interactive settings instead when another run holds it raw, or when
/// this process is in the background); one whose settings cannot be read counts as no
/// terminal.
pub fn caller_terminal(io: &sandbox::RunIo, options: sandbox::Options) -> Option<CallerTerminal> {
    if options.no_terminal {
        return None;
    }
    let own = |sink: &sandbox::Sink| matches!(sink, sandbox::Sink::Process);
    let mut streams = [
        io.process_signals
            && matches!(io.stdin, sandbox::Input::Process)
            && std::io::stdin().is_terminal(),
        own(&io.stdout) && std::io::stdout().is_terminal(),
        own(&io.stderr) && std::io::stderr().is_terminal(),
    ];
    // Not stdin when stdout goes to a pipe or a socket (`| less`, `| head`): a pager there
    // reads the same terminal, and a run holding it raw took the keys typed for the pager and
    // left the terminal raw when both had ended (red team of issue 33). The command reads end
    // of file, and the caller is told.
    if streams[0] && !streams[1] && piped(&io.stdout) {
        streams[0] = false;
        super::say_no_keys(&mut false, &super::NoKeys::PipedOutput);
    }
    let first = streams.iter().position(|t| *t)?;
    let settings = sys::raw::terminal_settings(first as i32).ok()?;
    let size = sys::raw::window_size(first as i32).ok()?;
    // In the background (`stockade run &`) the settings are the foreground's: a shell's line
    // editor has echo and canonical input off while it waits at its prompt, and a shell
    // inside started with them would never echo what is typed once the run is brought back.
    let foreground = std_fd(first as i32)
        .map(|fd| super::in_foreground(fd.as_fd()))
        .unwrap_or(true);
    let settings = if foreground {
        sane(settings)
    } else {
        interactive(settings)
    };
    Some(CallerTerminal {
        streams,
        settings,
        size,
    })
}

/// Whether a run's stdout is a pipe or a socket (a pager or a filter reads it).
fn piped(sink: &sandbox::Sink) -> bool {
    let st = match sink {
        sandbox::Sink::Process => rustix::fs::fstat(std::io::stdout()),
        sandbox::Sink::Fd(fd) => rustix::fs::fstat(fd),
    };
    st.is_ok_and(|st| {
        matches!(
            rustix::fs::FileType::from_raw_mode(st.st_mode),
            rustix::fs::FileType::Fifo | rustix::fs::FileType::Socket
        )
    })
}

/// `settings`, or the usual interactive ones when they are raw (no canonical input, no signal
/// keys): another run (or program) holds the caller's terminal in raw mode, and the run's own
/// terminal must not start without echo and Ctrl-C.
fn sane(t: libc::termios) -> libc::termios {
    if t.c_lflag & (libc::ICANON | libc::ISIG) != 0 {
        return t;
    }
    interactive(t)
}

/// `t` with the usual interactive settings: canonical input, echo, the signal keys, CR/NL
/// translation.
fn interactive(mut t: libc::termios) -> libc::termios {
    t.c_iflag |= libc::ICRNL | libc::BRKINT;
    t.c_oflag |= libc::OPOST | libc::ONLCR;
    t.c_cflag |= libc::CREAD;
    t.c_lflag |= libc::ICANON
        | libc::ISIG
        | libc::IEXTEN
        | libc::ECHO
        | libc::ECHOE
        | libc::ECHOK
        | libc::ECHOCTL
        | libc::ECHOKE;
    t
}

/// The relay of a run's terminal, running.
#[derive(Debug)]
pub struct Attached {
    thread: JoinHandle<Relayed>,
    wake: Wake,
    watching_size: bool,
    /// Where the output is accounted: 0 stdout, 1 stderr.
    pub slot: usize,
    /// Whether stdout or stderr is the terminal (else its output is no stream's: echo and
    /// what the command writes to `/dev/tty`, see [`Attached::finish_into`]).
    pub accounted: bool,
}

/// A duplicate of the caller's fd `n` (0, 1 or 2).
fn std_fd(n: i32) -> std::io::Result<OwnedFd> {
    match n {
        0 => std::io::stdin().as_fd().try_clone_to_owned(),
        1 => std::io::stdout().as_fd().try_clone_to_owned(),
        _ => std::io::stderr().as_fd().try_clone_to_owned(),
    }
}

/// Start relaying `master` (the run's terminal) to and from the caller's terminal.
///
/// Output goes to stdout when it is the terminal, else to stderr, else back to the terminal
/// on stdin (only echo and what the command writes to `/dev/tty` come out then). Keystrokes are
/// read only when stdin is the terminal, this process may read it (its foreground, or not its
/// controlling terminal) and no other run holds it; then the caller's terminal is in raw mode
/// until the relay ends, and `~.` at the start of a line cancels the run through `end`.
/// `watch_size`: this process's signals are the run's to watch (the `stockade` binary; a
/// library running several runs leaves its signals alone): SIGWINCH makes the run's terminal
/// follow the caller's window, and job control (`&` then `fg`, SIGTSTP) takes and gives
/// back the keyboard ([`Terminal::stdin`]).
pub fn attach(
    master: OwnedFd,
    caller: &CallerTerminal,
    limit: Option<u64>,
    sanitize: bool,
    watch_size: bool,
    end: sandbox::Cancel,
) -> std::io::Result<Attached> {
    let [stdin, stdout, stderr] = caller.streams;
    let (out_fd, slot) = if stdout {
        (1, 0)
    } else if stderr {
        (2, 1)
    } else {
        (0, 1)
    };
    let output = std_fd(out_fd)?;
    let first = caller.streams.iter().position(|t| *t).unwrap_or(0) as i32;
    let size_from = std_fd(first).ok();
    let mut told = false;
    let input = if stdin && super::in_foreground(std::io::stdin().as_fd()) {
        match super::take_input(std::io::stdin().as_fd()) {
            Ok(input) => Some(input),
            Err(why) => {
                super::say_no_keys(&mut told, &why);
                None
            }
        }
    } else {
        // In the background of a terminal that is not its controlling terminal (`su -c ... &`):
        // no shell's job control tells the person why nothing typed arrives.
        if stdin && super::in_background_elsewhere(std::io::stdin().as_fd()) {
            super::say_no_keys(&mut told, &super::NoKeys::Background);
        }
        None
    };
    // Raw mode before the first keystroke is read: the caller's line discipline must not cook
    // or echo what the run's terminal will.
    let raw = match &input {
        Some(i) => Some(RawMode::enter(i.fd.as_fd(), i.shared)?),
        None => None,
    };
    let wake = Wake::new()?;
    let watching_size = watch_size && sys::parent::watch_terminal_signals(wake.sender()).is_ok();
    let receiver = wake.receiver()?;
    let stream = if slot == 0 { "stdout" } else { "stderr" };
    let terminal = Terminal {
        master,
        // The keys may be taken later (`stockade run &`, then `fg`), when the process's
        // signals are this run's to watch.
        stdin: if stdin && watch_size {
            std_fd(0).ok()
        } else {
            None
        },
        end: (input.is_some() || (stdin && watch_size)).then_some(end),
        input,
        raw,
        output,
        size_from,
        made_size: (caller.size.ws_row, caller.size.ws_col),
        limit,
        stream,
        sanitize,
        told,
    };
    let thread = std::thread::spawn(move || super::relay(terminal, receiver));
    Ok(Attached {
        thread,
        wake,
        watching_size,
        slot,
        accounted: stdout || stderr,
    })
}

impl Attached {
    /// The run is over: pass on what the terminal still holds and end the relay (which gives
    /// the caller's terminal its settings back). Returns where the output was accounted and
    /// what was relayed.
    pub fn finish(self) -> (usize, Relayed) {
        self.wake.stop();
        let relayed = self.thread.join().unwrap_or_default();
        if self.watching_size {
            sys::parent::unwatch_terminal_signals();
        }
        (self.slot, relayed)
    }

    /// [`Attached::finish`], what was relayed accounted as its stream's in `relayed` (stdout's,
    /// stderr's), replacing that stream's relay (which carried no command output then). When
    /// neither is the terminal (`cmd >out 2>err` with the keyboard), the relays' accounts
    /// stay: the terminal showed no stream of the command's (red team: stderr's count and its
    /// limit event were lost).
    pub fn finish_into(self, relayed: &mut [Option<Relayed>; 2]) {
        let accounted = self.accounted;
        let (slot, r) = self.finish();
        if let (true, Some(s)) = (accounted, relayed.get_mut(slot)) {
            *s = Some(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn raw_settings_become_interactive_ones_and_others_stay() {
        // All flags clear is raw: no canonical input, no signal keys.
        let raw: libc::termios = libc::termios {
            c_iflag: 0,
            c_oflag: 0,
            c_cflag: libc::CS8,
            c_lflag: 0,
            c_line: 0,
            c_cc: [0; 32],
            c_ispeed: 0,
            c_ospeed: 0,
        };
        let fixed = sane(raw);
        assert_ne!(fixed.c_lflag & libc::ICANON, 0);
        assert_ne!(fixed.c_lflag & libc::ISIG, 0);
        assert_ne!(fixed.c_lflag & libc::ECHO, 0);
        assert_ne!(fixed.c_oflag & libc::ONLCR, 0);
        let cooked = libc::termios {
            c_lflag: libc::ISIG,
            ..raw
        };
        assert_eq!(sane(cooked).c_lflag, libc::ISIG);
    }

    #[test]
    fn a_terminal_made_elsewhere_gets_the_callers_settings_and_size() {
        use rustix::termios::{tcgetattr, tcgetwinsize, LocalModes, SpecialCodeIndex};
        let master =
            rustix::pty::openpt(rustix::pty::OpenptFlags::RDWR | rustix::pty::OpenptFlags::NOCTTY)
                .expect("openpt");
        rustix::pty::unlockpt(&master).expect("unlockpt");
        let mut settings = sys::raw::terminal_settings(master.as_raw_fd()).expect("tcgetattr");
        settings.c_lflag &= !libc::ECHO;
        settings.c_cc[libc::VINTR] = 0x07;
        let caller = CallerTerminal {
            streams: [true, true, true],
            settings,
            size: libc::winsize {
                ws_row: 33,
                ws_col: 77,
                ws_xpixel: 0,
                ws_ypixel: 0,
            },
        };
        caller.apply_to(master.as_fd()).expect("applied");
        // Through the master, the settings are the terminal's (the slave side's).
        let name = rustix::pty::ptsname(&master, Vec::new()).expect("ptsname");
        let slave = rustix::fs::open(
            name.as_c_str(),
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY,
            rustix::fs::Mode::empty(),
        )
        .expect("the slave");
        let t = tcgetattr(&slave).expect("tcgetattr");
        assert!(!t.local_modes.contains(LocalModes::ECHO));
        assert_eq!(t.special_codes[SpecialCodeIndex::VINTR], 0x07);
        let size = tcgetwinsize(&slave).expect("size");
        assert_eq!((size.ws_row, size.ws_col), (33, 77));
    }
}
