//! The per-stream output limit of a sandboxed run.
//!
//! The command's stdout and stderr are pipes read by the supervisor, one relay thread per
//! stream ([`relay`]). Up to the limit everything passes through unchanged. Beyond it the
//! stream keeps its head and its tail (the end of a log is where the error is): the first
//! `limit - limit / 4` bytes go out live, the last `limit / 4` bytes are held in a bounded ring
//! and written at the end after one marker line that says how much was dropped ([`Capped`]).
//! The pipe is always drained, so a chatty command never blocks on it; the one exception is a
//! destination that refuses writes with `EPIPE` (`stockade run ... | head -1`): then the relay
//! stops reading and closes its end, and the command gets `SIGPIPE`/`EPIPE` as it would in a
//! plain pipeline.
//!
//! ```
//! use stream::relay::Capped;
//! let mut out = Vec::new();
//! let mut sink = |b: &[u8]| -> std::io::Result<()> {
//!     out.extend_from_slice(b);
//!     Ok(())
//! };
//! let mut capped = Capped::new(16, "stdout");
//! capped.push(b"abcdefghijklmnopqrstuvwxyz0123", &mut sink)?;
//! let summary = capped.finish(&mut sink);
//! assert_eq!(summary.dropped, 14);
//! assert_eq!(
//!     String::from_utf8_lossy(&out),
//!     "abcdefghijkl\n[stockade: output limit reached: 14 bytes of stdout dropped here \
//!      (limit 16 B per stream); the last 4 B follow]\n0123"
//! );
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use serde::Serialize;

pub use sandbox::{human_size, StreamSummary as Summary};

/// Bytes read from the command's pipe at a time.
const CHUNK: usize = 64 * 1024;

/// The smallest step by which the tail ring grows (it never grows past its bound).
const RING_STEP: usize = 4 * 1024;

/// How long to wait before retrying a write to a non-blocking destination that is full.
const RETRY: Duration = Duration::from_millis(1);

/// The head-and-tail limiter of one stream: pure, no I/O of its own.
///
/// With a limit `L`, `tail = L / 4` and `head = L - tail`: the first `head` bytes are
/// forwarded by [`Capped::push`] as they come; later bytes go into a ring of at most `tail`
/// bytes (allocated only once the head is exceeded, grown as needed, never above `tail`);
/// [`Capped::finish`] writes the marker (only when something was dropped) and the ring.
#[derive(Debug, Clone)]
pub struct Capped {
    limit: u64,
    head: u64,
    tail: usize,
    stream: &'static str,
    total: u64,
    /// Bytes sent to the head (written or failed).
    headed: u64,
    passed: u64,
    /// The stream holds whole CSIs (a line-editing sanitizer's output): the head ends before
    /// one it would cut, so that the marker never completes half a sequence.
    whole_csi: bool,
    /// The bytes after the head, at most `tail` of them. In order while not full; once full
    /// (`ring.len() == tail`) the oldest byte is at `start`.
    ring: Vec<u8>,
    start: usize,
}

impl Capped {
    /// A limiter for `limit` bytes of the stream named `stream` (`"stdout"`, `"stderr"`; used
    /// in the marker).
    pub fn new(limit: u64, stream: &'static str) -> Capped {
        let tail = limit / 4;
        Capped {
            limit,
            head: limit - tail,
            // A tail beyond the address space cannot be reached: the head before it cannot be.
            tail: usize::try_from(tail).unwrap_or(usize::MAX),
            stream,
            total: 0,
            headed: 0,
            passed: 0,
            whole_csi: false,
            ring: Vec::new(),
            start: 0,
        }
    }

    /// Take the next bytes of the stream: what is still within the head goes to `out` now,
    /// the rest is kept for the tail. An error from `out` is returned (those bytes do not count
    /// as passed); the bytes are accounted for either way, so pushing may go on.
    pub fn push<F>(&mut self, data: &[u8], out: &mut F) -> io::Result<()>
    where
        F: FnMut(&[u8]) -> io::Result<()>,
    {
        let room = self.head.saturating_sub(self.total);
        let mut live_len = usize::try_from(room).map_or(data.len(), |r| r.min(data.len()));
        if self.whole_csi && live_len < data.len() {
            live_len = open_csi(&data[..live_len]).unwrap_or(live_len);
        }
        self.total = self.total.saturating_add(data.len() as u64);
        self.headed += live_len as u64;
        let (live, rest) = data.split_at(live_len);
        self.keep(rest);
        if live.is_empty() {
            return Ok(());
        }
        out(live)?;
        self.passed += live.len() as u64;
        Ok(())
    }

    /// End of the stream: write the marker line if anything was dropped, then the kept tail.
    /// Write errors only reduce [`Summary::passed`].
    pub fn finish<F>(self, out: &mut F) -> Summary
    where
        F: FnMut(&[u8]) -> io::Result<()>,
    {
        let dropped = self
            .total
            .saturating_sub(self.headed)
            .saturating_sub(self.ring.len() as u64);
        if dropped > 0 {
            let marker = marker(dropped, self.stream, self.limit, self.tail as u64);
            let _ = out(marker.as_bytes());
        }
        let mut passed = self.passed;
        let (newer, older) = self.ring.split_at(self.start);
        for part in [older, newer] {
            if !part.is_empty() && out(part).is_ok() {
                passed += part.len() as u64;
            }
        }
        Summary {
            total: self.total,
            passed,
            dropped,
        }
    }

    /// Add bytes past the head to the ring, keeping only the last `tail` bytes.
    fn keep(&mut self, mut data: &[u8]) {
        if self.tail == 0 || data.is_empty() {
            return;
        }
        if data.len() >= self.tail {
            // The ring's old content is all superseded.
            self.grow_to(self.tail);
            self.ring.clear();
            self.ring.extend_from_slice(&data[data.len() - self.tail..]);
            self.start = 0;
            return;
        }
        if self.ring.len() < self.tail {
            let n = (self.tail - self.ring.len()).min(data.len());
            self.grow_to(self.ring.len() + n);
            self.ring.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        // Full: overwrite the oldest bytes, wrapping around.
        while !data.is_empty() {
            let n = (self.tail - self.start).min(data.len());
            self.ring[self.start..self.start + n].copy_from_slice(&data[..n]);
            self.start = (self.start + n) % self.tail;
            data = &data[n..];
        }
    }

    /// Make room for `need` bytes in the ring (`need <= tail`), growing geometrically but never
    /// past `tail`. `Vec::with_capacity` gives exactly the capacity asked for, so the bound is
    /// exact. Only called while the ring is still in order.
    fn grow_to(&mut self, need: usize) {
        if need <= self.ring.capacity() {
            return;
        }
        let cap = need
            .max(self.ring.capacity().saturating_mul(2))
            .max(RING_STEP)
            .min(self.tail);
        let mut grown = Vec::with_capacity(cap);
        grown.extend_from_slice(&self.ring);
        self.ring = grown;
    }
}

/// Where a CSI that `head` ends in the middle of starts: its ESC, at most a few bytes from
/// the end (the CSIs a line-editing sanitizer keeps are `ESC [`, up to 8 parameter bytes,
/// a final byte 0x40–0x7E).
fn open_csi(head: &[u8]) -> Option<usize> {
    let from = head.len().saturating_sub(2 + 8);
    let esc = from + head[from..].iter().rposition(|&b| b == 0x1B)?;
    let ended = head[esc + 1..]
        .iter()
        .skip(1)
        .any(|b| (0x40..=0x7E).contains(b));
    (!ended).then_some(esc)
}

/// The marker line written where output was cut.
fn marker(dropped: u64, stream: &str, limit: u64, tail: u64) -> String {
    format!(
        "\n[stockade: output limit reached: {dropped} bytes of {stream} dropped here \
         (limit {} per stream); the last {} follow]\n",
        human_size(limit),
        human_size(tail)
    )
}

/// Whether this process's stdin is open and not `/dev/null`: input worth passing on.
pub fn stdin_is_live() -> bool {
    let stdin = io::stdin();
    let fd = stdin.as_fd();
    fd.try_clone_to_owned().is_ok() && !is_dev_null(fd)
}

/// Whether `fd` is the null device (character device 1:3).
pub fn is_dev_null(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(file) = fd.try_clone_to_owned().map(File::from) else {
        return false;
    };
    file.metadata()
        .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == libc::makedev(1, 3))
}

/// What a [`relay`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Relayed {
    pub summary: Summary,
    /// The destination refused writes with `EPIPE` (its reader is gone): the relay stopped
    /// reading and closed the pipe, so the command saw `SIGPIPE`/`EPIPE` too.
    pub broken: bool,
    /// What the sanitizer removed, when the stream was sanitized.
    pub sanitized: Option<sanitize::Report>,
}

/// [`relay`] into a run's sink: the caller's descriptor, or this process's own stream,
/// stdout or stderr as `stream` names it. Every backend that relays its command's output
/// relays it this way.
pub fn relay_to_sink(
    from: OwnedFd,
    sink: sandbox::Sink,
    limit: Option<u64>,
    stream: &'static str,
    sanitize: bool,
) -> Relayed {
    match sink {
        sandbox::Sink::Fd(fd) => relay(from, fd, limit, stream, sanitize),
        sandbox::Sink::Process if stream == "stderr" => {
            relay(from, io::stderr(), limit, stream, sanitize)
        }
        sandbox::Sink::Process => relay(from, io::stdout(), limit, stream, sanitize),
    }
}

/// [`relay_to_sink`] of a FIFO that processes other than the run's may hold open for writing
/// (one the command can name is one any process of its id can open, and the end of file a
/// relay waits for would never come): `stop` (a pipe's read end) readable or hung up ends the
/// relay once what the FIFO holds has been read, whoever still holds a write end. `from` is
/// read without blocking (a reader the command opened could take what a poll promised).
pub fn relay_to_sink_until(
    from: OwnedFd,
    sink: sandbox::Sink,
    limit: Option<u64>,
    stream: &'static str,
    sanitize: bool,
    stop: OwnedFd,
) -> Relayed {
    let stop = Some(stop);
    match sink {
        sandbox::Sink::Fd(fd) => relay_with(from, fd, limit, stream, sanitize, stop),
        sandbox::Sink::Process if stream == "stderr" => {
            relay_with(from, io::stderr(), limit, stream, sanitize, stop)
        }
        sandbox::Sink::Process => relay_with(from, io::stdout(), limit, stream, sanitize, stop),
    }
}

/// Copy one output stream of the command from the pipe `from` (the read end; the command
/// holds the write end) to `to` (the caller's stdout or stderr: `std::io::stdout()` or any
/// descriptor; duplicated here, the original is not closed), applying `limit` bytes per stream with [`Capped`] (`None`: everything passes).
/// Meant to run on its own thread; returns once every writer of the pipe has closed it.
///
/// Reads retry on `EINTR`. Writes are complete (short writes continue, `EINTR` retries); a
/// non-blocking destination that answers `EAGAIN` is retried after a 1 ms sleep rather than
/// polled. The pipe is drained whatever happens to the destination, with one exception:
/// `EPIPE` (the reader of `to` is gone) stops the relay at once and drops `from`, so the
/// command gets `SIGPIPE`/`EPIPE` as in a plain pipeline ([`Relayed::broken`]). The caller must
/// hold the only read end and ignore `SIGPIPE` itself (Rust programs do by default). Any
/// other write error (or a destination that cannot be duplicated) stops writing for good;
/// the rest is read and discarded, and is missing from [`Summary::passed`]. A read error other
/// than `EINTR`/`EAGAIN` ends the relay as end of stream does.
pub fn relay(
    from: OwnedFd,
    to: impl AsFd,
    limit: Option<u64>,
    stream: &'static str,
    sanitize: bool,
) -> Relayed {
    relay_with(from, to, limit, stream, sanitize, None)
}

/// [`relay`], and with `stop` as [`relay_to_sink_until`] says.
fn relay_with(
    from: OwnedFd,
    to: impl AsFd,
    limit: Option<u64>,
    stream: &'static str,
    sanitize: bool,
    stop: Option<OwnedFd>,
) -> Relayed {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut src = File::from(from);
    let mut out = Outflow::new(to.as_fd(), limit, stream, sanitize);
    let mut buf = vec![0u8; CHUNK];
    let mut stopping = false;
    loop {
        if let (Some(stop), false) = (&stop, stopping) {
            let mut fds = [
                PollFd::new(&src, PollFlags::IN),
                PollFd::new(stop, PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            }
            stopping = !fds[1].revents().is_empty();
        }
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && stopping => break,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if stop.is_none() {
                    std::thread::sleep(RETRY);
                }
                continue;
            }
            Err(_) => break,
        };
        if matches!(out.push(&buf[..n]), Err(e) if is_epipe(&e)) {
            break;
        }
    }
    // Closing the read end now is what hands SIGPIPE to the command after a broken sink.
    drop(src);
    out.finish()
}

/// Copy the command's input from `from` (the caller's stdin: a pipe, a file, a socket) into
/// the pipe `to` (the write end; the command holds the read end), until `from` ends or the
/// command's end of the pipe is closed by every holder. Meant to run on its own thread; it
/// returns when the run is over even though `from` stays open and silent (a socket Claude
/// Code keeps open, a pipe whose writer waits), because it waits in `poll(2)` for either
/// `from` to have data or `to` to have no reader left (`POLLERR`), and reads only then.
///
/// Never `splice(2)` (which `std::io::copy` uses between a socket and a pipe): a splice from
/// a socket into a pipe waits for the socket's data holding the pipe's lock, and closing the
/// pipe's read end then waits for that lock: the run never ends.
///
/// What was read is written whole (a full pipe blocks until the command reads, or fails with
/// `EPIPE` once it is gone); `EINTR` and a non-blocking `from`'s `EAGAIN` are waited out. Any
/// other error ends the relay as end of input does, and dropping `to` gives the command end
/// of file. The caller must ignore `SIGPIPE` (Rust programs do by default).
pub fn relay_input(from: OwnedFd, to: OwnedFd) {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut src = File::from(from);
    let mut dst = File::from(to);
    let mut buf = vec![0u8; CHUNK];
    loop {
        let mut fds = [
            PollFd::new(&src, PollFlags::IN),
            // No events asked: a pipe's write end reports POLLERR when no reader is left.
            PollFd::new(&dst, PollFlags::empty()),
        ];
        match poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return,
        }
        let (input, output) = (fds[0].revents(), fds[1].revents());
        if output.intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL) {
            return;
        }
        if !input.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) {
            if input.contains(PollFlags::NVAL) {
                return;
            }
            continue;
        }
        let n = match src.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) =>
            {
                continue
            }
            Err(_) => return,
        };
        if dst.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// The way out of one relayed stream: the sanitizer (when asked), then the limit, then the
/// destination. Sanitizing comes first: the limit counts what would reach the reader. Shared
/// by the pipe relay above and the terminal relay ([`crate::terminal`]).
pub(crate) struct Outflow {
    sink: Sink,
    capped: Option<Capped>,
    plain: Summary,
    sanitizer: Option<sanitize::Sanitizer>,
    clean: Vec<u8>,
}

impl Outflow {
    /// Output to `to` (duplicated here; a destination that cannot be duplicated takes
    /// nothing, as one whose writes fail).
    pub(crate) fn new(
        to: std::os::fd::BorrowedFd<'_>,
        limit: Option<u64>,
        stream: &'static str,
        sanitize: bool,
    ) -> Outflow {
        Outflow {
            sink: Sink {
                file: to.try_clone_to_owned().ok().map(File::from),
                broken: false,
            },
            capped: limit.map(|l| Capped::new(l, stream)),
            plain: Summary::default(),
            sanitizer: sanitize.then(sanitize::Sanitizer::new),
            clean: Vec::new(),
        }
    }

    /// For a terminal a person reads: the sanitizer (when asked) keeps line editing
    /// ([`sanitize::Sanitizer::line_editing`]: backspace and the CSIs of one line), so that
    /// what is typed shows as it is edited.
    pub(crate) fn line_editing(mut self) -> Outflow {
        if self.sanitizer.is_some() {
            self.sanitizer = Some(sanitize::Sanitizer::line_editing());
            if let Some(capped) = self.capped.as_mut() {
                capped.whole_csi = true;
            }
        }
        self
    }

    /// Pass the next bytes of the stream on. An `EPIPE` error means the reader is gone.
    pub(crate) fn push(&mut self, data: &[u8]) -> io::Result<()> {
        let data: &[u8] = match self.sanitizer.as_mut() {
            Some(s) => {
                self.clean.clear();
                s.push(data, &mut self.clean);
                &self.clean
            }
            None => data,
        };
        pass(&mut self.capped, &mut self.plain, &mut self.sink, data)
    }

    /// End of the stream: what the sanitizer still held, the kept tail, and the summary.
    pub(crate) fn finish(mut self) -> Relayed {
        let sanitized = self.sanitizer.take().map(|s| {
            self.clean.clear();
            let report = s.finish(&mut self.clean);
            let _ = pass(
                &mut self.capped,
                &mut self.plain,
                &mut self.sink,
                &self.clean,
            );
            report
        });
        let summary = match self.capped.take() {
            Some(c) => c.finish(&mut |b: &[u8]| self.sink.write(b)),
            None => self.plain,
        };
        Relayed {
            summary,
            broken: self.sink.broken,
            sanitized,
        }
    }
}

/// Bytes through the limit (or counted as they are, without one) into the sink.
fn pass(
    capped: &mut Option<Capped>,
    plain: &mut Summary,
    sink: &mut Sink,
    data: &[u8],
) -> io::Result<()> {
    match capped.as_mut() {
        Some(c) => c.push(data, &mut |b: &[u8]| sink.write(b)),
        None => {
            plain.total += data.len() as u64;
            let r = sink.write(data);
            if r.is_ok() {
                plain.passed += data.len() as u64;
            }
            r
        }
    }
}

fn is_epipe(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EPIPE) || e.kind() == io::ErrorKind::BrokenPipe
}

/// The destination of a relay; `file` is `None` once a write failed (or the duplication did).
struct Sink {
    file: Option<File>,
    broken: bool,
}

impl Sink {
    fn write(&mut self, mut buf: &[u8]) -> io::Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Err(if self.broken {
                io::Error::from_raw_os_error(libc::EPIPE)
            } else {
                io::Error::other("the output destination failed earlier")
            });
        };
        while !buf.is_empty() {
            match file.write(buf) {
                Ok(0) => {
                    self.file = None;
                    return Err(io::ErrorKind::WriteZero.into());
                }
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(RETRY),
                Err(e) => {
                    self.broken = is_epipe(&e);
                    self.file = None;
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

/// What the relays of stdout and stderr (`None`: not relayed) did, for the outcome, with a
/// limit hit per stream the output limit cut (added to `limit_hits`). Any backend that relays
/// its command's output with [`relay`] reports it this way.
pub fn output_summary(
    output_limit: Option<u64>,
    sanitize: bool,
    relayed: [Option<Relayed>; 2],
    limit_hits: &mut Vec<sandbox::LimitHit>,
) -> Option<sandbox::Output> {
    let [out_r, err_r] = relayed;
    let output = (output_limit.is_some() || sanitize).then(|| sandbox::Output {
        stdout: out_r.as_ref().map(|r| r.summary),
        stderr: err_r.as_ref().map(|r| r.summary),
        sanitized_stdout: out_r.and_then(|r| r.sanitized),
        sanitized_stderr: err_r.and_then(|r| r.sanitized),
    });
    if let (Some(o), Some(limit)) = (&output, output_limit) {
        for (name, s) in [("stdout", o.stdout), ("stderr", o.stderr)] {
            if let Some(s) = s.filter(|s| s.dropped > 0) {
                limit_hits.push(sandbox::LimitHit {
                    code: sandbox::Code::LimitReached,
                    limit: "output",
                    value: limit,
                    mechanism: "relay",
                    detail: format!(
                        "{} of {name} dropped (head and tail kept, a marker where the cut is)",
                        human_size(s.dropped)
                    ),
                });
            }
        }
    }
    output
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn run(limit: u64, chunks: &[&[u8]]) -> (Vec<u8>, Summary) {
        let mut out = Vec::new();
        let mut sink = |b: &[u8]| -> io::Result<()> {
            out.extend_from_slice(b);
            Ok(())
        };
        let mut c = Capped::new(limit, "stdout");
        for chunk in chunks {
            c.push(chunk, &mut sink).unwrap();
        }
        let s = c.finish(&mut sink);
        (out, s)
    }

    /// A line-editing sanitizer's output cut by the limit: the head never ends inside a kept
    /// CSI (the marker's `\n[s` would complete it as `ESC [ s`), and what was dropped is
    /// counted exactly, whichever byte the limit falls on. Control: without `whole_csi` the
    /// head ends with a bare ESC.
    #[test]
    fn the_head_of_a_terminal_stream_ends_between_sequences() {
        let cut = |whole_csi: bool, before: usize| {
            let mut out = Vec::new();
            let mut sink = |b: &[u8]| -> io::Result<()> {
                out.extend_from_slice(b);
                Ok(())
            };
            let mut c = Capped::new(64, "stdout");
            c.whole_csi = whole_csi;
            let input = [vec![b'A'; before], b"\x1b[12;34D".to_vec(), vec![b'B'; 100]].concat();
            c.push(&input, &mut sink).unwrap();
            let s = c.finish(&mut sink);
            (out, s)
        };
        for before in 38..=48 {
            let (out, s) = cut(true, before);
            let marker = out.windows(7).position(|w| w == b"\n[stock").unwrap();
            let head = &out[..marker];
            assert_eq!(
                open_csi(head),
                None,
                "{before}: {:?}",
                String::from_utf8_lossy(head)
            );
            let shown = head.len() as u64 + 16;
            assert_eq!(s.dropped, s.total - shown, "{before}");
        }
        let (out, _) = cut(false, 47);
        assert!(out.windows(2).any(|w| w == b"\x1b\n"));
    }

    #[test]
    fn under_the_limit_passes_unchanged() {
        for chunks in [&[&b"hello"[..]][..], &[b"he", b"", b"llo wor", b"ld!"]] {
            let input: Vec<u8> = chunks.concat();
            let (out, s) = run(16, chunks);
            assert_eq!(out, input);
            assert_eq!(
                s,
                Summary {
                    total: input.len() as u64,
                    passed: input.len() as u64,
                    dropped: 0
                }
            );
        }
        let (out, s) = run(16, &[]);
        assert!(out.is_empty());
        assert_eq!(s, Summary::default());
    }

    #[test]
    fn exactly_at_the_limit_passes_unchanged() {
        let input = b"0123456789abcdef";
        for split in 0..=input.len() {
            let (a, b) = input.split_at(split);
            let (out, s) = run(16, &[a, b]);
            assert_eq!(out, input);
            assert_eq!(s.dropped, 0);
            assert_eq!(s.passed, 16);
        }
    }

    #[test]
    fn over_the_limit_keeps_head_marker_and_tail() {
        let input = b"abcdefghijklmnopqrstuvwxyz0123";
        let expected =
            b"abcdefghijkl\n[stockade: output limit reached: 14 bytes of stdout dropped \
                         here (limit 16 B per stream); the last 4 B follow]\n0123";
        for size in 1..=input.len() {
            let chunks: Vec<&[u8]> = input.chunks(size).collect();
            let (out, s) = run(16, &chunks);
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(expected),
                "chunk size {size}"
            );
            assert_eq!(
                s,
                Summary {
                    total: 30,
                    passed: 16,
                    dropped: 14
                }
            );
        }
        // One byte over.
        let (out, s) = run(16, &[b"0123456789abcdefX"]);
        assert!(out.starts_with(b"0123456789ab\n[stockade: output limit reached: 1 bytes"));
        assert!(out.ends_with(b"follow]\ndefX"));
        assert_eq!(s.dropped, 1);
    }

    #[test]
    fn tiny_limits() {
        // limit 3: no tail at all, head only.
        let (out, s) = run(3, &[b"abcdef"]);
        assert!(out.starts_with(b"abc\n[stockade: output limit reached: 3 bytes"));
        assert!(out.ends_with(b"the last 0 B follow]\n"));
        assert_eq!((s.passed, s.dropped), (3, 3));
        let (out, s) = run(0, &[b"ab"]);
        assert!(out.starts_with(b"\n[stockade: output limit reached: 2 bytes of stdout"));
        assert_eq!((s.total, s.passed, s.dropped), (2, 0, 2));
    }

    #[test]
    fn the_ring_is_allocated_lazily() {
        let mut c = Capped::new(1 << 20, "stderr");
        let mut sink = |_: &[u8]| -> io::Result<()> { Ok(()) };
        c.push(&vec![1u8; 768 * 1024], &mut sink).unwrap();
        assert_eq!(c.ring.capacity(), 0);
        c.push(b"x", &mut sink).unwrap();
        assert!(c.ring.capacity() >= 1 && c.ring.capacity() <= RING_STEP);
    }

    #[test]
    fn failed_writes_do_not_count_as_passed() {
        let mut c = Capped::new(16, "stdout");
        let mut failing = |_: &[u8]| -> io::Result<()> { Err(io::ErrorKind::Other.into()) };
        assert!(c.push(b"0123456789", &mut failing).is_err());
        assert!(c.push(b"abcdefghij", &mut failing).is_err());
        let s = c.finish(&mut failing);
        assert_eq!(
            s,
            Summary {
                total: 20,
                passed: 0,
                dropped: 4
            }
        );
    }

    /// Byte `i` of a long deterministic stream.
    fn byte(i: u64) -> u8 {
        (i.wrapping_mul(2_654_435_761) >> 13) as u8
    }

    /// What `total` bytes of the [`byte`] stream on stdout become under `limit`: the summary
    /// and the bytes (head, marker, tail).
    fn cut_stream(total: u64, limit: u64, limit_h: &str, tail_h: &str) -> (Summary, Vec<u8>) {
        let tail = limit / 4;
        let marker = format!(
            "\n[stockade: output limit reached: {} bytes of stdout dropped here (limit {limit_h} \
             per stream); the last {tail_h} follow]\n",
            total - limit
        );
        let bytes = (0..limit - tail)
            .map(byte)
            .chain(marker.bytes())
            .chain((total - tail..total).map(byte))
            .collect();
        let summary = Summary {
            total,
            passed: limit,
            dropped: total - limit,
        };
        (summary, bytes)
    }

    #[test]
    fn huge_input_keeps_memory_bounded_and_the_exact_tail() {
        const LIMIT: u64 = 1 << 20;
        const TOTAL: u64 = 50_000_000;
        let tail = (LIMIT / 4) as usize;
        let mut out = Vec::new();
        let mut c = Capped::new(LIMIT, "stdout");
        let mut pos = 0u64;
        let sizes = [
            1usize, 7, 4093, 65_537, 262_143, 262_144, 262_145, 999_999, 3,
        ];
        let mut k = 0;
        while pos < TOTAL {
            let n = (sizes[k % sizes.len()] as u64).min(TOTAL - pos);
            k += 1;
            let chunk: Vec<u8> = (pos..pos + n).map(byte).collect();
            pos += n;
            c.push(&chunk, &mut |b: &[u8]| -> io::Result<()> {
                out.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
            assert!(
                c.ring.capacity() <= tail,
                "ring grew to {}",
                c.ring.capacity()
            );
            assert!(c.ring.len() <= tail);
        }
        let s = c.finish(&mut |b: &[u8]| -> io::Result<()> {
            out.extend_from_slice(b);
            Ok(())
        });
        let (summary, expected) = cut_stream(TOTAL, LIMIT, "1 MiB", "256 KiB");
        assert_eq!(s, summary);
        assert!(out == expected, "output differs from head + marker + tail");
    }

    #[test]
    fn human_sizes() {
        let cases: [(u64, &str); 12] = [
            (0, "0 B"),
            (512, "512 B"),
            (1023, "1023 B"),
            (1024, "1 KiB"),
            (1536, "1.5 KiB"),
            (256 * 1024, "256 KiB"),
            (1 << 20, "1 MiB"),
            (3 << 19, "1.5 MiB"),
            (16 << 20, "16 MiB"),
            ((1 << 20) + 1, "1.0 MiB"),
            (1 << 30, "1 GiB"),
            (u64::MAX, "16.0 EiB"),
        ];
        for (n, s) in cases {
            assert_eq!(human_size(n), s, "{n}");
        }
    }

    /// Write `total` bytes of the deterministic stream into `w`, in 10,000-byte chunks.
    fn write_stream(mut w: io::PipeWriter, total: u64) -> io::Result<()> {
        let mut pos = 0;
        while pos < total {
            let n = 10_000.min(total - pos);
            let chunk: Vec<u8> = (pos..pos + n).map(byte).collect();
            w.write_all(&chunk)?;
            pos += n;
        }
        Ok(())
    }

    #[test]
    fn relay_caps_a_real_pipe_without_blocking_the_writer() {
        const LIMIT: u64 = 64 * 1024;
        const TOTAL: u64 = 5_000_000;
        let (cmd_r, cmd_w) = io::pipe().unwrap();
        let (dest_r, dest_w) = io::pipe().unwrap();
        let relay = std::thread::spawn(move || {
            let r = relay(
                OwnedFd::from(cmd_r),
                dest_w.as_fd(),
                Some(LIMIT),
                "stdout",
                false,
            );
            drop(dest_w);
            r
        });
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done_tx.send(write_stream(cmd_w, TOTAL));
        });
        // Nobody reads the destination yet: the head (48 KiB) fits in its pipe buffer, and
        // the relay keeps draining the command's pipe regardless.
        let written = done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the writer blocked");
        written.unwrap();
        let mut out = Vec::new();
        let mut dest_r = dest_r;
        dest_r.read_to_end(&mut out).unwrap();
        let r = relay.join().unwrap();
        assert!(!r.broken);
        let (summary, expected) = cut_stream(TOTAL, LIMIT, "64 KiB", "16 KiB");
        assert_eq!(r.summary, summary);
        assert!(out == expected, "relayed output differs");
    }

    #[test]
    fn relay_without_limit_passes_everything() {
        const TOTAL: u64 = 300_000;
        let (cmd_r, cmd_w) = io::pipe().unwrap();
        let (mut dest_r, dest_w) = io::pipe().unwrap();
        let writer = std::thread::spawn(move || write_stream(cmd_w, TOTAL));
        let relay = std::thread::spawn(move || {
            let r = relay(OwnedFd::from(cmd_r), dest_w.as_fd(), None, "stderr", false);
            drop(dest_w);
            r
        });
        let mut out = Vec::new();
        dest_r.read_to_end(&mut out).unwrap();
        writer.join().unwrap().unwrap();
        let r = relay.join().unwrap();
        assert_eq!(
            r,
            Relayed {
                summary: Summary {
                    total: TOTAL,
                    passed: TOTAL,
                    dropped: 0
                },
                broken: false,
                sanitized: None,
            }
        );
        assert!(out == (0..TOTAL).map(byte).collect::<Vec<u8>>());
    }

    #[test]
    fn relay_hands_epipe_back_to_the_writer() {
        for limit in [Some(1 << 20), None] {
            let (cmd_r, cmd_w) = io::pipe().unwrap();
            let (dest_r, dest_w) = io::pipe().unwrap();
            drop(dest_r); // `| head -1` that has already exited
            let (done_tx, done_rx) = mpsc::channel();
            std::thread::spawn(move || {
                let _ = done_tx.send(write_stream(cmd_w, 1 << 30));
            });
            let r = relay(OwnedFd::from(cmd_r), dest_w.as_fd(), limit, "stdout", false);
            assert!(r.broken);
            assert_eq!(r.summary.passed, 0);
            assert!(r.summary.total < 1 << 30);
            let written = done_rx
                .recv_timeout(Duration::from_secs(30))
                .expect("the writer blocked instead of getting EPIPE");
            assert_eq!(
                written.map_err(|e| e.kind()),
                Err(io::ErrorKind::BrokenPipe)
            );
        }
    }

    /// `relay_input` from a socket whose peer stays open and silent (Claude Code's stdin for
    /// its commands) ends once the command's end of the pipe is closed, and the close itself
    /// does not wait on the relay.
    #[test]
    fn relay_input_ends_with_the_command_though_a_socket_stays_open() {
        let (peer, src) = std::os::unix::net::UnixStream::pair().unwrap();
        let (cmd_r, cmd_w) = io::pipe().unwrap();
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            relay_input(OwnedFd::from(src), OwnedFd::from(cmd_w));
            let _ = done_tx.send(());
        });
        std::thread::sleep(Duration::from_millis(100)); // the relay waits on the socket
        let (closed_tx, closed_rx) = mpsc::channel();
        std::thread::spawn(move || {
            drop(cmd_r);
            let _ = closed_tx.send(());
        });
        closed_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("closing the command's end waited on the relay");
        done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the relay outlived the command's end of the pipe");
        drop(peer);
    }

    /// Control for the test above: `std::io::copy` from a socket into a pipe (what the gVisor
    /// backend's stdin relay was) splices, and closing the pipe's read end then waits until
    /// the socket has data. Input lets it go.
    #[test]
    fn std_copy_from_a_socket_holds_the_close_of_its_pipe() {
        let (mut peer, src) = std::os::unix::net::UnixStream::pair().unwrap();
        let (cmd_r, cmd_w) = io::pipe().unwrap();
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = io::copy(
                &mut File::from(OwnedFd::from(src)),
                &mut File::from(OwnedFd::from(cmd_w)),
            );
            let _ = done_tx.send(());
        });
        std::thread::sleep(Duration::from_millis(100));
        let (closed_tx, closed_rx) = mpsc::channel();
        std::thread::spawn(move || {
            drop(cmd_r);
            let _ = closed_tx.send(());
        });
        assert!(
            closed_rx.recv_timeout(Duration::from_millis(500)).is_err(),
            "the close did not wait: std::io::copy no longer splices, relay_input's reason is gone"
        );
        // The copy may take the lock back for its next splice before the close has it: a
        // byte at a time until the close is through.
        let mut sent = 0;
        while closed_rx.recv_timeout(Duration::from_millis(50)).is_err() {
            assert!(
                sent < 600,
                "the close still waits after {sent} bytes of input"
            );
            if peer.write_all(b"x").is_err() {
                break; // the copy is over (EPIPE), so is the close
            }
            sent += 1;
        }
        drop(peer); // end of input: the copy ends (it may have gone back to waiting on it)
        done_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    }

    /// What comes on the socket reaches the command in order, and the socket's end is the
    /// command's end of file; the command that stops reading with a full pipe ends the relay
    /// (EPIPE) too.
    #[test]
    fn relay_input_passes_the_input_and_its_end() {
        let (mut peer, src) = std::os::unix::net::UnixStream::pair().unwrap();
        let (mut cmd_r, cmd_w) = io::pipe().unwrap();
        let relay =
            std::thread::spawn(move || relay_input(OwnedFd::from(src), OwnedFd::from(cmd_w)));
        let sent: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let writer = {
            let sent = sent.clone();
            std::thread::spawn(move || {
                peer.write_all(&sent).unwrap();
                drop(peer);
            })
        };
        let mut got = Vec::new();
        cmd_r.read_to_end(&mut got).unwrap();
        assert!(got == sent);
        writer.join().unwrap();
        relay.join().unwrap();

        let (mut peer, src) = std::os::unix::net::UnixStream::pair().unwrap();
        let (cmd_r, cmd_w) = io::pipe().unwrap();
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            relay_input(OwnedFd::from(src), OwnedFd::from(cmd_w));
            let _ = done_tx.send(());
        });
        let feeder = std::thread::spawn(move || {
            let chunk = vec![b'y'; 64 * 1024];
            while peer.write_all(&chunk).is_ok() {}
        });
        std::thread::sleep(Duration::from_millis(200)); // the pipe fills, the relay waits on it
        drop(cmd_r);
        done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the relay blocked on a pipe nobody reads");
        drop(feeder); // it ends when the relay's end of the socket is gone
    }
}
