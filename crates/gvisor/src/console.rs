//! A terminal of the run's own under gVisor: runsc makes a new pseudo-terminal for the
//! command (`process.terminal` in the bundle) and hands its master side to a Unix socket we
//! listen on (`runsc run --console-socket`); stockade relays the master to and from the
//! caller's terminal as for the native backend ([`stream::terminal::attach`]). runsc never
//! gets the caller's terminal: its own streams stay pipes.
//!
//! The socket lies in a directory of its own (0700) in the run's bundle directory (0700,
//! created fresh outside every writable root): only this user (and root) can reach it, and
//! the command cannot (the Sentry does not connect to host sockets). Exactly one connection,
//! from a process of this user, bringing exactly one descriptor, which must be a
//! pseudo-terminal's master side, is accepted; anything else, or nothing within
//! [`CONSOLE_WAIT`], refuses the run.

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags};

/// How long runsc has to hand over the terminal once started. It does so as it creates the
/// sandbox, before the command starts (milliseconds); a runsc that has not after this long
/// is broken or stuck, and the run is refused rather than left waiting.
pub(crate) const CONSOLE_WAIT: Duration = Duration::from_secs(20);

/// How often the wait looks whether runsc is still there.
const TICK: Duration = Duration::from_millis(50);

/// Descriptors a message may bring before it is cut (more than one is refused).
const FDS_MAX: usize = 4;

/// The listening console socket of one run.
#[derive(Debug)]
pub(crate) struct ConsoleSocket {
    listener: UnixListener,
    path: PathBuf,
}

/// Why no terminal came from runsc.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConsoleError {
    #[error("runsc did not hand over the run's terminal within {} s", CONSOLE_WAIT.as_secs())]
    TimedOut,
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl From<rustix::io::Errno> for ConsoleError {
    fn from(e: rustix::io::Errno) -> ConsoleError {
        ConsoleError::Io(e.into())
    }
}

impl ConsoleSocket {
    /// Listen at `dir/console/sock`; `dir` is the run's private bundle directory.
    pub(crate) fn listen(dir: &Path) -> std::io::Result<ConsoleSocket> {
        let sub = dir.join("console");
        std::fs::DirBuilder::new().mode(0o700).create(&sub)?;
        let path = sub.join("sock");
        // A Unix socket's path holds 107 bytes: a longer one is refused here, never cut.
        if path.as_os_str().len() > 107 {
            return Err(std::io::Error::other(format!(
                "the console socket's path {} is too long for a Unix socket (set TMPDIR to a shorter directory)",
                path.display()
            )));
        }
        let listener = UnixListener::bind(&path)?;
        listener.set_nonblocking(true)?;
        Ok(ConsoleSocket { listener, path })
    }

    /// Where runsc connects (`--console-socket`).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The master side of the run's terminal, once runsc sends it: `Ok(None)` when `gone`
    /// says runsc ended (or the run was cancelled) first, whose own report says why. Waits at
    /// most until `deadline`. The socket is closed and removed either way.
    pub(crate) fn receive(
        self,
        deadline: Instant,
        mut gone: impl FnMut() -> bool,
    ) -> Result<Option<OwnedFd>, ConsoleError> {
        let stream = loop {
            match self.listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
            if gone() {
                return Ok(None);
            }
            if !wait_readable(self.listener.as_fd(), deadline)? {
                // A last look: runsc may have ended just now.
                return if gone() {
                    Ok(None)
                } else {
                    Err(ConsoleError::TimedOut)
                };
            }
        };
        let _ = std::fs::remove_file(&self.path);
        drop(self.listener);
        receive_master(&stream, deadline)
    }
}

/// Waits until `fd` is readable (true) or `deadline` passed (false), looking up every
/// [`TICK`] at most.
fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, deadline: Instant) -> std::io::Result<bool> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Ok(false);
    }
    let wait = left.min(TICK);
    let timeout = Timespec {
        tv_sec: 0,
        tv_nsec: i64::from(wait.subsec_nanos()),
    };
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    match poll(&mut fds, Some(&timeout)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(true),
        Err(e) => Err(e.into()),
    }
}

/// The one descriptor runsc sends on `stream`, checked to come from a process of this user
/// and to be a pseudo-terminal's master side.
fn receive_master(stream: &UnixStream, deadline: Instant) -> Result<Option<OwnedFd>, ConsoleError> {
    let peer = rustix::net::sockopt::socket_peercred(stream)?;
    if peer.uid != rustix::process::geteuid() {
        return Err(ConsoleError::Refused(format!(
            "the run's console socket was connected to by uid {}, not this user",
            peer.uid.as_raw()
        )));
    }
    stream.set_nonblocking(true)?;
    loop {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(FDS_MAX))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut bytes = [0u8; 64];
        let got = rustix::net::recvmsg(
            stream,
            &mut [IoSliceMut::new(&mut bytes)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        );
        let msg = match got {
            Ok(m) => m,
            Err(rustix::io::Errno::AGAIN) => {
                let within = wait_readable(stream.as_fd(), deadline)?;
                if !within {
                    return Err(ConsoleError::TimedOut);
                }
                continue;
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(ConsoleError::Io(e.into())),
        };
        // Every descriptor that came is owned here (and closed unless it is the one).
        let mut fds: Vec<OwnedFd> = Vec::new();
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(got) = m {
                fds.extend(got);
            }
        }
        if msg.flags.contains(ReturnFlags::CTRUNC) {
            return Err(ConsoleError::Refused(
                "runsc sent more descriptors than a terminal's master side".into(),
            ));
        }
        if msg.bytes == 0 && fds.is_empty() {
            // Closed without sending: runsc failed, and says why.
            return Ok(None);
        }
        let master = match <[OwnedFd; 1]>::try_from(fds) {
            Ok([fd]) => fd,
            Err(fds) => {
                return Err(ConsoleError::Refused(format!(
                    "runsc sent {} descriptors for the run's terminal, not one",
                    fds.len()
                )))
            }
        };
        check_master(&master)?;
        return Ok(Some(master));
    }
}

/// `fd` is a character device and a pseudo-terminal's master side (only a master answers
/// `TIOCGPTN`, which `ptsname` asks).
fn check_master(fd: &OwnedFd) -> Result<(), ConsoleError> {
    let st = rustix::fs::fstat(fd)?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::CharacterDevice {
        return Err(ConsoleError::Refused(
            "runsc sent a descriptor that is not a character device for the run's terminal".into(),
        ));
    }
    if rustix::pty::ptsname(fd, Vec::new()).is_err() {
        return Err(ConsoleError::Refused(
            "runsc sent a descriptor that is not a pseudo-terminal's master side".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    use std::io::IoSlice;
    use std::os::fd::BorrowedFd;

    fn send(path: &Path, fds: &[BorrowedFd<'_>]) {
        let s = UnixStream::connect(path).expect("connect");
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(FDS_MAX))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() {
            assert!(control.push(SendAncillaryMessage::ScmRights(fds)));
        }
        rustix::net::sendmsg(
            &s,
            &[IoSlice::new(b"pty-master")],
            &mut control,
            SendFlags::empty(),
        )
        .expect("sendmsg");
    }

    fn socket() -> (tempfile::TempDir, ConsoleSocket) {
        let dir = tempfile::tempdir().expect("tempdir");
        let sock = ConsoleSocket::listen(dir.path()).expect("listen");
        (dir, sock)
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[test]
    fn a_pty_master_is_received_and_its_socket_removed() {
        let (_dir, sock) = socket();
        let path = sock.path().to_owned();
        let (master, _slave) = openpty();
        send(&path, &[master.as_fd()]);
        let got = sock.receive(soon(), || false).expect("received");
        assert!(got.is_some());
        assert!(!path.exists(), "the socket is removed once used");
    }

    #[test]
    fn anything_but_one_pty_master_is_refused() {
        let (master, slave) = openpty();
        let (r, _w) = std::io::pipe().expect("pipe");
        let cases: [&[BorrowedFd<'_>]; 4] = [
            &[slave.as_fd()],
            &[r.as_fd()],
            &[master.as_fd(), master.as_fd()],
            &[master.as_fd(), r.as_fd(), slave.as_fd(), master.as_fd()],
        ];
        for fds in cases {
            let (_dir, sock) = socket();
            send(sock.path(), fds);
            let got = sock.receive(soon(), || false);
            assert!(matches!(got, Err(ConsoleError::Refused(_))), "{got:?}");
        }
    }

    #[test]
    fn no_terminal_times_out_or_ends_with_runsc() {
        let (_dir, sock) = socket();
        let got = sock.receive(Instant::now() + Duration::from_millis(200), || false);
        assert!(matches!(got, Err(ConsoleError::TimedOut)), "{got:?}");
        let (_dir, sock) = socket();
        let got = sock.receive(soon(), || true);
        assert!(matches!(got, Ok(None)), "{got:?}");
        // A connection that brings nothing: runsc failed and says why itself.
        let (_dir, sock) = socket();
        drop(UnixStream::connect(sock.path()).expect("connect"));
        assert!(matches!(sock.receive(soon(), || false), Ok(None)));
    }

    fn openpty() -> (OwnedFd, OwnedFd) {
        use rustix::pty::{openpt, unlockpt, OpenptFlags};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
        unlockpt(&master).expect("unlockpt");
        let name = rustix::pty::ptsname(&master, Vec::new()).expect("ptsname");
        let slave = rustix::fs::open(
            name.as_c_str(),
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY,
            rustix::fs::Mode::empty(),
        )
        .expect("open the slave");
        (master, slave)
    }
}
