//! Zero-copy relaying between two sockets for the egress proxy's tunnels: `splice(2)` through
//! a pipe moves pages from one socket's receive queue to the other's send queue without
//! copying them through user space, which on a small machine is the difference between a
//! tunnel at half the speed of a direct transfer and one at nearly full speed.

use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::raw::{self, Errno};

/// How much one `splice` call moves at most.
const CHUNK: usize = 1 << 20;

/// The pipe between the two sockets (the default unprivileged `pipe-max-size`).
const PIPE_SIZE: usize = 1 << 20;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Activity shared by the two directions of one tunnel, for the idle timeout.
#[derive(Debug, Default)]
pub struct Activity(AtomicU64);

impl Activity {
    pub fn new() -> Activity {
        Activity(AtomicU64::new(now_ms()))
    }

    fn touch(&self) {
        self.0.store(now_ms(), Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        Duration::from_millis(now_ms().saturating_sub(self.0.load(Ordering::Relaxed)))
    }
}

/// Move everything `from` sends to `to`, blocking, until `from` closes (then `to`'s write side
/// is shut down), an error, or `idle` without traffic in either direction (both sockets are
/// shut down then). `from` must be in blocking mode; its read timeout is set here to poll the
/// idle clock. Returns the bytes moved.
pub fn splice_all(
    from: &TcpStream,
    to: &TcpStream,
    activity: &Activity,
    idle: Duration,
    moved: &AtomicU64,
) -> io::Result<u64> {
    from.set_read_timeout(Some(
        idle.min(Duration::from_secs(5))
            .max(Duration::from_millis(100)),
    ))?;
    let (pipe_r, pipe_w) = raw::pipe()?;
    // A bigger pipe lets one splice move more than the default 64 KiB; failure only costs speed.
    let _ = raw::set_pipe_size(pipe_w, PIPE_SIZE);
    let result = (|| -> io::Result<u64> {
        let mut total = 0u64;
        loop {
            let n = match raw::splice(from.as_raw_fd(), pipe_w, CHUNK) {
                Ok(0) => {
                    let _ = to.shutdown(Shutdown::Write);
                    return Ok(total);
                }
                Ok(n) => n,
                Err(Errno(libc::EINTR)) => continue,
                Err(Errno(libc::EAGAIN)) => {
                    if activity.idle_for() >= idle {
                        let _ = from.shutdown(Shutdown::Both);
                        let _ = to.shutdown(Shutdown::Both);
                        return Ok(total);
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            activity.touch();
            let mut left = n;
            while left > 0 {
                match raw::splice(pipe_r, to.as_raw_fd(), left) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(m) => left -= m,
                    Err(Errno(libc::EINTR)) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            total += n as u64;
            moved.fetch_add(n as u64, Ordering::Relaxed);
        }
    })();
    raw::close(pipe_r);
    raw::close(pipe_w);
    result
}
