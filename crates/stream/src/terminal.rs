//! The relay between the caller's terminal and a run's own pseudo-terminal.
//!
//! A run attached to a terminal never gets the caller's: the backend opens a new terminal
//! inside the sandbox, makes it the command's controlling terminal, and hands its master side
//! here. [`relay`] copies keystrokes from the caller's terminal (in raw mode for the run, see
//! [`RawMode`]) to the master, and the terminal's output back, through the same sanitizer and
//! output limit as a pipe ([`crate::relay`]). The line discipline that turns Ctrl-C, Ctrl-Z and
//! Ctrl-\ into signals is the inner terminal's: they reach the command's foreground job and
//! do not end the run. Window-size changes follow through [`Wake`]. The relay ends when every
//! process holding the inner terminal is gone (the master reads `EIO`) or when told to stop.
//!
//! Which of the caller's streams make a run's terminal, and starting and ending its relay,
//! are the same for every backend: [`caller_terminal`], [`attach`], [`Attached::finish`].

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::event::{poll, PollFd, PollFlags};
use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
use rustix::termios::{self, OptionalActions, Termios};

use crate::relay::{Outflow, Relayed};

mod caller;
mod session;
pub use caller::{attach, caller_terminal, Attached, CallerTerminal};

/// Bytes read from the terminal or the caller at a time.
const CHUNK: usize = 64 * 1024;
/// Keystrokes held for a terminal that does not take them yet; beyond, the caller's terminal
/// is not read until it does (the caller's own terminal buffers meanwhile).
const PENDING_MAX: usize = 64 * 1024;

/// The two ends of a relay's wake-up pipe: [`Wake::sender`] writes `w` when the caller's
/// window changed (from a SIGWINCH handler), [`Wake::stop`] writes `s` when the run is over.
#[derive(Debug)]
pub struct Wake {
    read: OwnedFd,
    write: OwnedFd,
}

impl Wake {
    pub fn new() -> io::Result<Wake> {
        let (read, write) = rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
        )?;
        Ok(Wake { read, write })
    }

    /// The end a signal handler writes `w` to.
    pub fn sender(&self) -> BorrowedFd<'_> {
        self.write.as_fd()
    }

    /// Tell the relay the run is over: it passes on what the terminal still holds and ends.
    pub fn stop(&self) {
        let _ = rustix::io::write(&self.write, b"s");
    }

    /// The end the relay reads (a duplicate: the [`Wake`] stays usable).
    pub fn receiver(&self) -> io::Result<OwnedFd> {
        self.read.try_clone()
    }
}

/// What [`relay`] connects.
#[derive(Debug)]
pub struct Terminal {
    /// The master side of the run's terminal.
    pub master: OwnedFd,
    /// The caller's terminal, read for keystrokes (see [`Input`]). `None`: nothing is typed
    /// into the run (yet).
    pub input: Option<Input>,
    /// The caller's terminal in raw mode while keystrokes are read; put back as soon as the
    /// relay ends (the run's terminal closed even while its command goes on).
    pub raw: Option<RawMode>,
    /// The caller's terminal on stdin, when keys may be read from it at some point: the
    /// relay takes it (its own description, locked, in raw mode) whenever this process is in
    /// its foreground and does not hold it yet (`stockade run &`, then `fg`), and gives it
    /// back (settings restored) before this process stops on SIGTSTP. `None`: keys are
    /// read only through `input`, if at all.
    pub stdin: Option<OwnedFd>,
    /// Where the terminal's output goes (the caller's terminal).
    pub output: OwnedFd,
    /// The caller's terminal whose window size the run's follows.
    pub size_from: Option<OwnedFd>,
    /// The window size the run's terminal was made with (rows, columns): the relay's first
    /// look copies the caller's only when it differs from this, so a size the command set
    /// itself before the relay started (`stty rows 11`) is not undone.
    pub made_size: (u16, u16),
    /// Output limit per stream (`None`: everything passes) and the name it reports under.
    pub limit: Option<u64>,
    pub stream: &'static str,
    /// Pass the output through the sanitizer.
    pub sanitize: bool,
    /// Cancelled when the person types the escape `~.` at the start of a line: the way out of
    /// a command that ignores Ctrl-C (the keys are the command's otherwise).
    pub end: Option<sandbox::Cancel>,
    /// Why the keyboard could not be taken was already said on stderr (see [`say_no_keys`]).
    pub told: bool,
}

/// The escape that ends a run from the keyboard, as ssh's: `~` at the start of a line, then
/// `.`; `~~` types one `~`.
#[derive(Debug, Default)]
struct Escape {
    /// Nothing typed yet on this line.
    mid_line: bool,
    /// A `~` at the start of a line, held until the next key.
    tilde: bool,
}

impl Escape {
    /// Pass `keys` on into `out`; true when the escape to end the run was typed.
    fn feed(&mut self, keys: &[u8], out: &mut Vec<u8>) -> bool {
        for &k in keys {
            if self.tilde {
                self.tilde = false;
                match k {
                    b'.' => return true,
                    b'~' => {
                        out.push(b'~');
                        self.mid_line = true;
                        continue;
                    }
                    _ => out.push(b'~'),
                }
            } else if !self.mid_line && k == b'~' {
                self.tilde = true;
                continue;
            }
            out.push(k);
            self.mid_line = !matches!(k, b'\r' | b'\n');
        }
        false
    }
}

/// Relay `t` until the run's terminal is closed by every process inside or `wake` says stop;
/// meant to run on its own thread. Returns what went to the output.
///
/// The master is made non-blocking, so a command that stops reading its terminal never
/// stalls its output, nor output a caller that stopped typing; one chunk of output is passed
/// per round, so a flood never keeps keystrokes (Ctrl-C) from the command. `EIO` from the
/// master is the end of the terminal. A failing output drops the rest of it (as the pipe
/// relay does); a failing input stops the keystrokes only.
pub fn relay(t: Terminal, wake: OwnedFd) -> Relayed {
    let Terminal {
        master,
        input,
        raw,
        stdin,
        output,
        size_from,
        made_size,
        limit,
        stream,
        sanitize,
        end,
        told,
    } = t;
    let mut keys = Keys {
        stdin,
        input,
        raw,
        told,
    };
    keys.take();
    let _ = fcntl_getfl(&master).and_then(|f| fcntl_setfl(&master, f | OFlags::NONBLOCK));
    let mut out = Outflow::new(output.as_fd(), limit, stream, sanitize).line_editing();
    // The caller's window may have changed since the terminal was made (only then: the
    // command may have set a size of its own meanwhile, on a loaded machine even before this
    // thread ran).
    if let Some(from) = &size_from {
        if let Ok(size) = termios::tcgetwinsize(from) {
            if (size.ws_row, size.ws_col) != made_size {
                let _ = termios::tcsetwinsize(&master, size);
            }
        }
    }
    Relaying {
        master: &master,
        wake: &wake,
        size_from: size_from.as_ref(),
        end: end.as_ref(),
        keys: &mut keys,
        out: &mut out,
        escape: Escape::default(),
        pending: Vec::new(),
        buf: vec![0u8; CHUNK],
        stopping: false,
    }
    .rounds();
    // The caller's terminal gets its settings back now, not when the run ends: the command
    // may go on without its terminal (every holder closed it) for as long as it likes.
    keys.release();
    out.finish()
}

/// A relay under way: what [`relay`] connects, and where it is.
struct Relaying<'a> {
    master: &'a OwnedFd,
    wake: &'a OwnedFd,
    size_from: Option<&'a OwnedFd>,
    end: Option<&'a sandbox::Cancel>,
    keys: &'a mut Keys,
    out: &'a mut Outflow,
    escape: Escape,
    /// Keystrokes the terminal has not taken yet.
    pending: Vec<u8>,
    buf: Vec<u8>,
    /// Told to stop: the terminal's output is drained, then the relay ends.
    stopping: bool,
}

/// Readable, or at its end (hung up, or an error to read).
fn readable(f: PollFlags) -> bool {
    f.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR)
}

impl Relaying<'_> {
    /// The relay's rounds: wait, then the wake-up pipe, the keyboard to take, the terminal's
    /// output, the keystrokes it takes, the caller's keys; until the terminal is closed or
    /// everything was passed on after a stop.
    fn rounds(&mut self) {
        loop {
            let ready = match self.wait() {
                Ok(ready) => ready,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            };
            if readable(ready[1]) {
                self.woken();
            }
            if self.keys.waiting() {
                self.keys.take();
            }
            // The terminal's output: one chunk a round (all of it once the run is over).
            if (readable(ready[0]) || self.stopping) && self.pass_output() {
                break;
            }
            if !self.pending.is_empty() && ready[0].contains(PollFlags::OUT) {
                self.write_pending();
            }
            self.read_keys(ready.get(2).copied());
        }
    }

    /// Wait for the master, the wake-up pipe and the caller's keys (while more are taken);
    /// what each is ready for, in that order.
    fn wait(&self) -> rustix::io::Result<Vec<PollFlags>> {
        let master_events = if self.pending.is_empty() {
            PollFlags::IN
        } else {
            PollFlags::IN | PollFlags::OUT
        };
        let reading_input =
            self.keys.input.is_some() && self.pending.len() < PENDING_MAX && !self.stopping;
        let mut fds = vec![
            PollFd::new(self.master, master_events),
            PollFd::new(self.wake, PollFlags::IN),
        ];
        if let (Some(i), true) = (&self.keys.input, reading_input) {
            fds.push(PollFd::new(&i.fd, PollFlags::IN));
        }
        // Stopping: drain without waiting. Waiting for the foreground (a shell's `fg` sends
        // SIGCONT, which wakes the relay; a second's look covers one that does not).
        let timeout = if self.stopping {
            Some(&rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            })
        } else if self.keys.waiting() {
            Some(&rustix::event::Timespec {
                tv_sec: 1,
                tv_nsec: 0,
            })
        } else {
            None
        };
        poll(&mut fds, timeout)?;
        Ok(fds.iter().map(PollFd::revents).collect())
    }

    /// Read the wake-up pipe: `w` the caller's window changed, `s` stop, `t` stop this
    /// process (keyboard given back first), `c` continued.
    fn woken(&mut self) {
        let mut got = [0u8; 64];
        while let Ok(n @ 1..) = rustix::io::read(self.wake, &mut got) {
            if got[..n].contains(&b'w') {
                self.follow_size();
            }
            if got[..n].contains(&b's') {
                self.stopping = true;
            }
            if got[..n].contains(&b't') {
                self.keys.release();
                // Stop as SIGTSTP would have, with the caller's terminal as it was.
                let me = rustix::process::getpid();
                let _ = rustix::process::kill_process(me, rustix::process::Signal::STOP);
            }
            if got[..n].contains(&b'c') {
                self.keys.resume();
            }
        }
    }

    /// Give the run's terminal the caller's window size.
    fn follow_size(&self) {
        if let Some(from) = self.size_from {
            if let Ok(size) = termios::tcgetwinsize(from) {
                let _ = termios::tcsetwinsize(self.master, size);
            }
        }
    }

    /// Pass on one chunk of the terminal's output, or all of it when stopping. True: the
    /// relay ends (the terminal is closed, or its output was drained after a stop).
    fn pass_output(&mut self) -> bool {
        loop {
            match rustix::io::read(self.master, &mut self.buf) {
                Ok(0) => return true,
                Ok(n) => {
                    // A caller that is gone takes nothing more; the terminal is still
                    // drained, so the command never blocks on it.
                    let _ = self.out.push(&self.buf[..n]);
                    if !self.stopping {
                        break;
                    }
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => break,
                // EIO: no process holds the terminal any more.
                Err(_) => return true,
            }
        }
        self.stopping
    }

    /// Write what the terminal takes of the pending keystrokes.
    fn write_pending(&mut self) {
        match rustix::io::write(self.master, &self.pending) {
            Ok(n) => {
                self.pending.drain(..n);
            }
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
            Err(_) => self.pending.clear(),
        }
    }

    /// Read the caller's keys (`flags`: what the poll found on them), through the escape,
    /// into the pending keystrokes; the escape cancels the run.
    fn read_keys(&mut self, flags: Option<PollFlags>) {
        if let (Some(i), Some(flags)) = (&self.keys.input, flags) {
            if readable(flags) {
                let hung_up = flags.intersects(PollFlags::HUP | PollFlags::ERR);
                match rustix::io::read(&i.fd, &mut self.buf[..PENDING_MAX - self.pending.len()]) {
                    // The shared description reads nothing, at once, when another reader
                    // took the keys first (`VMIN` 0): not the end of the terminal.
                    Ok(0) if i.shared && !hung_up => {}
                    Ok(0) => self.keys.done(),
                    Ok(n) => {
                        if self.escape.feed(&self.buf[..n], &mut self.pending) {
                            if let Some(end) = self.end {
                                end.cancel();
                            }
                        }
                    }
                    Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                    Err(_) => self.keys.done(),
                }
            }
        }
    }
}

/// The caller's keyboard, as the relay holds it: taken while this process is in the
/// terminal's foreground, given back when it stops or finds itself in the background.
struct Keys {
    /// The caller's terminal to take it from (see [`Terminal::stdin`]).
    stdin: Option<OwnedFd>,
    /// Held: read for keys.
    input: Option<Input>,
    raw: Option<RawMode>,
    /// Why it could not be taken was said already.
    told: bool,
}

impl Keys {
    /// Not held, but could be once this process is in the foreground.
    fn waiting(&self) -> bool {
        self.input.is_none() && self.stdin.is_some()
    }

    /// Take the keyboard (raw mode first, then read) when in the foreground; no other run
    /// holds it ([`take_input`]).
    fn take(&mut self) {
        let Some(stdin) = self.stdin.as_ref().filter(|_| self.input.is_none()) else {
            return;
        };
        if !in_foreground(stdin.as_fd()) {
            return;
        }
        let input = match take_input(stdin.as_fd()) {
            Ok(input) => input,
            Err(why) => {
                say_no_keys(&mut self.told, &why);
                return;
            }
        };
        match RawMode::enter(input.fd.as_fd(), input.shared) {
            Ok(raw) => {
                self.raw = Some(raw);
                self.input = Some(input);
            }
            Err(e) => say_no_keys(&mut self.told, &NoKeys::Failed(e)),
        }
    }

    /// Give the keyboard back: the settings from before are restored when this process is in
    /// the foreground (in the background, changing them would stop it: the shell that has
    /// the terminal set its own).
    fn release(&mut self) {
        if let Some(raw) = self.raw.take() {
            if !in_foreground(raw.fd.as_fd()) {
                raw.abandon();
            }
        }
        self.input = None;
    }

    /// After SIGCONT: in the foreground, raw mode again (the shell that had the terminal
    /// while this process was stopped set its own settings); in the background, let go.
    fn resume(&mut self) {
        match &self.raw {
            Some(raw) if in_foreground(raw.fd.as_fd()) => raw.reapply(),
            Some(_) => self.release(),
            None => {}
        }
        self.take();
    }

    /// The caller's terminal has no more keys (closed or failing): read no more.
    fn done(&mut self) {
        self.release();
        self.stdin = None;
    }
}

/// The caller's keyboard as a run holds it.
#[derive(Debug)]
pub struct Input {
    fd: OwnedFd,
    /// `fd` is the caller's own description of the terminal (its shell's too), not one this
    /// run opened: it is never made non-blocking (the shell would inherit that), and the raw
    /// mode reads it with `VMIN` 0 instead (see [`RawMode::enter`]).
    shared: bool,
    /// This run's claim on the terminal's keyboard (see [`claim`]), held as long as the keys.
    _claim: Option<OwnedFd>,
}

/// Why a run does not read the keyboard.
#[derive(Debug)]
pub enum NoKeys {
    /// Another run holds it, or someone else claimed it.
    Held,
    /// This run is in the background of a terminal that is not its controlling terminal.
    Background,
    /// Neither way of reading it works.
    Failed(io::Error),
    /// The backend (named: gVisor) gives the command a terminal of the run's own only when
    /// stdin, stdout and stderr are all the caller's terminal (its terminal is all three
    /// streams at once), and some are not.
    NoTerminal(&'static str),
    /// The command's output goes to a pipe or a socket (`| less`): a pager there reads the same
    /// terminal (see `caller_terminal`).
    PipedOutput,
}

/// The caller's terminal `stdin`, taken for this run's keys; an error when another run
/// holds it (that one reads the keys; this one shows its output only) or it cannot be read.
///
/// First opened again (a description of this run's own, non-blocking, so another reader never
/// leaves the relay blocked) and locked (`flock`, which every run on the terminal tries).
/// A caller that may not open its terminal again (`su`, `runuser`, `sudo -u` in a terminal
/// another user owns: the device is not theirs, `EACCES`) reads it through the descriptor
/// it holds, which its shell shares: see `Input::shared`. Such a run cannot take the
/// `flock` (on the shared description it would outlive a killed run in the shell's hands)
/// and claims the terminal by name instead (`claim`), which every run makes.
pub fn take_input(stdin: BorrowedFd<'_>) -> Result<Input, NoKeys> {
    use rustix::fs::{flock, FlockOperation, Mode};
    use std::os::fd::AsRawFd;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let path = format!("/proc/self/fd/{}", stdin.as_raw_fd());
    match rustix::fs::open(path.as_str(), flags, Mode::empty()) {
        Ok(fd) => {
            flock(&fd, FlockOperation::NonBlockingLockExclusive).map_err(|_| NoKeys::Held)?;
            // A run that reads through its shared description must see this one too; the
            // lock is what excludes runs of this kind, so a name someone else squats on is
            // no reason to let go. A name taken while the terminal is in a shared
            // description's raw mode is: such a run reads the keys (and would restore its
            // own settings over this one's).
            let claim = match claim(stdin) {
                Ok(Some(c)) => Some(c),
                Ok(None) if termios::tcgetattr(stdin).is_ok_and(|t| shared_raw(&t)) => {
                    return Err(NoKeys::Held)
                }
                _ => None,
            };
            Ok(Input {
                fd,
                shared: false,
                _claim: claim,
            })
        }
        Err(reopen) => {
            let claim = match claim(stdin) {
                Ok(Some(c)) => Some(c),
                Ok(None) => return Err(NoKeys::Held),
                // No claim to make (no sockets here): the keys are still this run's to read.
                Err(_) => None,
            };
            let fd = stdin
                .try_clone_to_owned()
                .map_err(|e| NoKeys::Failed(io::Error::other(format!("{reopen}; {e}"))))?;
            Ok(Input {
                fd,
                shared: true,
                _claim: claim,
            })
        }
    }
}

/// A claim on the keyboard of the terminal `tty`: an abstract unix socket named after its
/// device (its devpts instance and number), bound for as long as the claim is held and gone
/// with the process however it ends. `Ok(None)`: another run holds it.
fn claim(tty: BorrowedFd<'_>) -> io::Result<Option<OwnedFd>> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let st = rustix::fs::fstat(tty)?;
    let name = format!("stockade/keyboard/{}/{}", st.st_dev, st.st_rdev);
    let addr = SocketAddrUnix::new_abstract_name(name.as_bytes())?;
    let sock = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    match rustix::net::bind(&sock, &addr) {
        Ok(()) => Ok(Some(sock)),
        Err(rustix::io::Errno::ADDRINUSE) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Say once, on stderr, that this run does not read the keyboard and why: silently getting
/// no keys looks like a hung command.
pub fn say_no_keys(told: &mut bool, why: &NoKeys) {
    use std::io::{IsTerminal, Write};
    if std::mem::replace(told, true) {
        return;
    }
    let line = match why {
        NoKeys::Held => "stockade: note: this terminal's keyboard claim is taken (by another run or another user): this run shows its output, and reads no keys until it is let go".to_owned(),
        NoKeys::Background => "stockade: note: this run is not in its terminal's foreground (a session of its own, started in the background): it shows its output, and reads no keys while it is not".to_owned(),
        NoKeys::Failed(e) => format!(
            "stockade: note: this run cannot read the keyboard of its terminal ({e}): it shows its output only (--no-tty runs it without a terminal)"
        ),
        NoKeys::NoTerminal(backend) => format!(
            "stockade: note: --backend {backend} gives the command a terminal only when its input, output and errors are all this terminal (its terminal is all three at once), and here some are not: its input is empty (end of file) and its output is not a terminal; --backend native runs it on a terminal of its own"
        ),
        NoKeys::PipedOutput => "stockade: note: this run reads no keys: its output goes to a pipe, where a pager would read this terminal too; the command's input is empty (end of file) (--no-tty runs it so without this note)".to_owned(),
    };
    let mut err = std::io::stderr();
    // Another run may hold the terminal in raw mode: a line that ends in CR LF reads right.
    let end = if err.is_terminal() { "\r\n" } else { "\n" };
    let _ = write!(err, "{line}{end}");
}

/// The caller's terminal in raw mode for as long as this lives: every key goes to the run's
/// own terminal as typed, which applies its own settings (echo, line editing, the signal
/// keys). The settings from before are put back on drop, after the output written so far
/// has left.
#[derive(Debug)]
pub struct RawMode {
    fd: OwnedFd,
    saved: Termios,
    /// Entered for a shared description (see [`RawMode::enter`]).
    shared: bool,
    /// Put `saved` back on drop.
    restore: bool,
}

impl RawMode {
    /// Raw mode on `fd`, a terminal this process is in the foreground of (see
    /// [`in_foreground`]: a background process changing it would be stopped by SIGTTOU).
    ///
    /// `shared`: `fd` is a description others read too, which this run may not make
    /// non-blocking: a read returns at once with what there is, nothing when another reader
    /// took it (`VMIN` and `VTIME` 0), so the relay never waits in `read`.
    ///
    /// Found in a shared description's raw mode (another run's, or one that was killed), the
    /// settings put back at the end are the usual interactive ones, not that raw mode: the
    /// shell that gets the terminal back must not be left raw.
    pub fn enter(fd: BorrowedFd<'_>, shared: bool) -> io::Result<RawMode> {
        let fd = fd.try_clone_to_owned()?;
        let found = termios::tcgetattr(&fd)?;
        let saved = if shared_raw(&found) {
            interactive(found)
        } else {
            found
        };
        let raw = raw_settings(&saved, shared);
        termios::tcsetattr(&fd, OptionalActions::Now, &raw)?;
        Ok(RawMode {
            fd,
            saved,
            shared,
            restore: true,
        })
    }

    /// Raw mode again (after another process changed the settings), from the foreground.
    fn reapply(&self) {
        let raw = raw_settings(&self.saved, self.shared);
        let _ = termios::tcsetattr(&self.fd, OptionalActions::Now, &raw);
    }

    /// Let go without restoring anything (from the background, where the settings are the
    /// foreground's).
    fn abandon(mut self) {
        self.restore = false;
    }
}

/// Settings as a shared description's raw mode leaves them: no canonical input, no signal
/// keys, a read returns at once (`VMIN` and `VTIME` 0). No shell waits at its prompt so.
fn shared_raw(t: &Termios) -> bool {
    use rustix::termios::{LocalModes, SpecialCodeIndex};
    !t.local_modes
        .intersects(LocalModes::ICANON | LocalModes::ISIG)
        && t.special_codes[SpecialCodeIndex::VMIN] == 0
        && t.special_codes[SpecialCodeIndex::VTIME] == 0
}

/// `t` with the usual interactive settings: canonical input, echo, the signal keys, CR/NL
/// translation, reads that wait for a line.
fn interactive(mut t: Termios) -> Termios {
    use rustix::termios::{InputModes, LocalModes, OutputModes, SpecialCodeIndex};
    t.input_modes |= InputModes::ICRNL | InputModes::BRKINT;
    t.output_modes |= OutputModes::OPOST | OutputModes::ONLCR;
    t.local_modes |= LocalModes::ICANON
        | LocalModes::ISIG
        | LocalModes::IEXTEN
        | LocalModes::ECHO
        | LocalModes::ECHOE
        | LocalModes::ECHOK
        | LocalModes::ECHOCTL
        | LocalModes::ECHOKE;
    t.special_codes[SpecialCodeIndex::VMIN] = 1;
    t.special_codes[SpecialCodeIndex::VTIME] = 0;
    t
}

/// `saved` made raw; `shared`: reads return at once (see [`RawMode::enter`]).
fn raw_settings(saved: &Termios, shared: bool) -> Termios {
    use rustix::termios::SpecialCodeIndex;
    let mut raw = saved.clone();
    raw.make_raw();
    if shared {
        raw.special_codes[SpecialCodeIndex::VMIN] = 0;
        raw.special_codes[SpecialCodeIndex::VTIME] = 0;
    }
    raw
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if self.restore {
            let _ = termios::tcsetattr(&self.fd, OptionalActions::Drain, &self.saved);
        }
    }
}

/// Whether this process may read the terminal `fd` and change its settings: it is in the
/// terminal's foreground process group (else it would be stopped by SIGTTIN, SIGTTOU), or the
/// terminal is not its controlling terminal (`ENOTTY`: `su -c`, a harness that gave it a pty
/// in a session of its own) and the nearest ancestor whose controlling terminal it is is in
/// its foreground, or none has it and no other process does either (see the `session` module). In
/// doubt, not.
pub fn in_foreground(fd: BorrowedFd<'_>) -> bool {
    match termios::tcgetpgrp(fd) {
        Ok(pgrp) => pgrp == rustix::process::getpgrp(),
        Err(rustix::io::Errno::NOTTY) => session::foreground_elsewhere(fd),
        Err(_) => false,
    }
}

/// `fd` is a terminal this process is not in the foreground of, and not its controlling
/// terminal either (`su -c ... &`): no job control brings it to this process, so it is told.
pub fn in_background_elsewhere(fd: BorrowedFd<'_>) -> bool {
    matches!(termios::tcgetpgrp(fd), Err(rustix::io::Errno::NOTTY))
        && !session::foreground_elsewhere(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(chunks: &[&[u8]]) -> (Vec<u8>, bool) {
        let mut e = Escape::default();
        let mut out = Vec::new();
        let mut ended = false;
        for c in chunks {
            ended |= e.feed(c, &mut out);
        }
        (out, ended)
    }

    /// A pty's slave side (and the master, kept open).
    fn pty() -> (OwnedFd, OwnedFd) {
        use rustix::pty::{openpt, ptsname, unlockpt, OpenptFlags};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
        unlockpt(&master).expect("unlockpt");
        let name = ptsname(&master, Vec::new()).expect("ptsname");
        let slave = rustix::fs::open(
            name.as_c_str(),
            OFlags::RDWR | OFlags::NOCTTY,
            rustix::fs::Mode::empty(),
        )
        .expect("the slave");
        (master, slave)
    }

    #[test]
    fn a_shared_description_reads_without_waiting_and_is_never_made_non_blocking() {
        use rustix::termios::SpecialCodeIndex;
        let (_master, slave) = pty();
        let saved = termios::tcgetattr(&slave).expect("tcgetattr");
        let shared = raw_settings(&saved, true);
        assert_eq!(shared.special_codes[SpecialCodeIndex::VMIN], 0);
        assert_eq!(shared.special_codes[SpecialCodeIndex::VTIME], 0);
        // Its own description: the usual raw mode (a read waits for a key; it is non-blocking).
        let own = raw_settings(&saved, false);
        assert_eq!(own.special_codes[SpecialCodeIndex::VMIN], 1);
        let before = fcntl_getfl(&slave).expect("flags");
        {
            let _raw = RawMode::enter(slave.as_fd(), true).expect("raw");
            let mut buf = [0u8; 8];
            // Nothing typed: the read returns at once with nothing.
            assert_eq!(rustix::io::read(&slave, &mut buf).expect("read"), 0);
            assert_eq!(fcntl_getfl(&slave).expect("flags"), before);
        }
        let after = termios::tcgetattr(&slave).expect("tcgetattr");
        assert_eq!(after.local_modes, saved.local_modes);
        assert_eq!(
            after.special_codes[SpecialCodeIndex::VMIN],
            saved.special_codes[SpecialCodeIndex::VMIN]
        );
        assert!(!fcntl_getfl(&slave)
            .expect("flags")
            .contains(OFlags::NONBLOCK));
    }

    #[test]
    fn a_terminal_found_in_another_runs_raw_mode_is_given_back_interactive() {
        use rustix::termios::{LocalModes, SpecialCodeIndex};
        let (_master, slave) = pty();
        let cooked = termios::tcgetattr(&slave).expect("tcgetattr");
        // Another run's shared raw mode, as it leaves the terminal while it reads.
        termios::tcsetattr(&slave, OptionalActions::Now, &raw_settings(&cooked, true))
            .expect("raw");
        drop(RawMode::enter(slave.as_fd(), true).expect("raw"));
        let after = termios::tcgetattr(&slave).expect("tcgetattr");
        assert!(after
            .local_modes
            .contains(LocalModes::ICANON | LocalModes::ISIG | LocalModes::ECHO));
        assert_eq!(after.special_codes[SpecialCodeIndex::VMIN], 1);
        // Control: found in a program's own raw mode (reads wait for a key), it is put back
        // as found.
        termios::tcsetattr(&slave, OptionalActions::Now, &raw_settings(&cooked, false))
            .expect("raw");
        drop(RawMode::enter(slave.as_fd(), true).expect("raw"));
        let after = termios::tcgetattr(&slave).expect("tcgetattr");
        assert!(!after
            .local_modes
            .intersects(LocalModes::ICANON | LocalModes::ISIG));
    }

    #[test]
    fn one_claim_per_terminal_until_it_is_let_go() {
        let (_m1, one) = pty();
        let (_m2, other) = pty();
        let first = claim(one.as_fd()).expect("claim").expect("free");
        assert!(
            claim(one.as_fd()).expect("claim").is_none(),
            "claimed twice"
        );
        // Another terminal's claim is its own.
        let _other = claim(other.as_fd()).expect("claim").expect("free");
        drop(first);
        assert!(claim(one.as_fd()).expect("claim").is_some(), "not let go");
    }

    #[test]
    fn the_escape_ends_only_at_the_start_of_a_line() {
        assert_eq!(typed(&[b"~."]), (Vec::new(), true));
        assert_eq!(typed(&[b"ls\r", b"~", b"."]), (b"ls\r".to_vec(), true));
        assert_eq!(typed(&[b"a~."]), (b"a~.".to_vec(), false));
        assert_eq!(typed(&[b"~~."]), (b"~.".to_vec(), false));
        assert_eq!(typed(&[b"~x"]), (b"~x".to_vec(), false));
        assert_eq!(
            typed(&[b"echo\n~/bin\r"]),
            (b"echo\n~/bin\r".to_vec(), false)
        );
    }
}
