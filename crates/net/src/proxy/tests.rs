//! The proxy's own tests: what a client and the events see when an allowed upstream cannot be
//! reached (issue 31: the tunnel closed, or a 502, with nothing said).

use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};

use super::*;

/// Every destination allowed, loopback included, as an explicit host (tunnels need no TLS).
struct AllowAll;

impl Rules for AllowAll {
    fn check(&self, _host: &str, _port: u16) -> Result<String, (String, String)> {
        Ok("allow_hosts:test".into())
    }
    fn private_allowed(&self, _host: &str, _port: u16, _ip: IpAddr) -> bool {
        true
    }
    fn explicit_host(&self, _host: &str, _port: u16) -> bool {
        true
    }
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// `request` sent to a proxy allowing everything; what came back and the events.
fn ask(request: &str) -> (String, Vec<Event>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let proxy = Proxy::start(listener, Box::new(AllowAll), Limits::default()).unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    // The tunnel's event is recorded as its task ends, just before the socket closes.
    std::thread::sleep(Duration::from_millis(100));
    (
        String::from_utf8_lossy(&answer).into_owned(),
        proxy.stop().events,
    )
}

fn assert_unreachable(events: &[Event], protocol: &str, port: u16) {
    let e = events
        .iter()
        .find(|e| e.code == UPSTREAM_FAILED)
        .unwrap_or_else(|| panic!("no {UPSTREAM_FAILED} event: {events:#?}"));
    assert_eq!(
        (e.protocol, e.host.as_str(), e.port),
        (protocol, "127.0.0.1", port)
    );
    let reason = e.reason.as_deref().unwrap();
    assert!(
        reason.contains(&format!("127.0.0.1:{port}")) && reason.contains("refused"),
        "{reason}"
    );
    assert!(e.hint.as_deref().unwrap().contains("allow_hosts:test"));
}

#[test]
fn a_tunnel_to_an_unreachable_upstream_is_an_event_with_the_error() {
    let port = closed_port();
    let (answer, events) = ask(&format!(
        "CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    ));
    // What the client sees: the tunnel opened, then closed.
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_unreachable(&events, "connect", port);
}

#[test]
fn a_request_to_an_unreachable_upstream_is_an_event_with_the_error() {
    let port = closed_port();
    let (answer, events) = ask(&format!(
        "GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    ));
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert_unreachable(&events, "http", port);
}

/// Control: a reachable upstream is an allowed event, no failure.
#[test]
fn a_reachable_upstream_is_no_failure() {
    let up = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = up.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut c, _) = up.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = c.read(&mut buf);
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
    });
    let (answer, events) = ask(&format!(
        "GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    ));
    server.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(events.iter().all(|e| e.code == ALLOWED), "{events:#?}");
}

/// A reader that answers each read with the next step: bytes (as many as fit), the end, an
/// error, or "nothing yet".
struct Script(std::collections::VecDeque<Step>);

enum Step {
    Data(Vec<u8>),
    Pending,
    Fail,
}

impl AsyncRead for Script {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.0.pop_front() {
            None => Poll::Ready(Ok(())),
            Some(Step::Pending) => Poll::Pending,
            Some(Step::Fail) => Poll::Ready(Err(io::Error::from(io::ErrorKind::UnexpectedEof))),
            Some(Step::Data(mut d)) => {
                let n = d.len().min(buf.remaining());
                buf.put_slice(&d[..n]);
                if n < d.len() {
                    self.0.push_front(Step::Data(d.split_off(n)));
                }
                Poll::Ready(Ok(()))
            }
        }
    }
}

/// One read of `r` into a buffer of `size`: the bytes, or the error, or `None` for Pending.
fn read_once<R: AsyncRead + Unpin>(r: &mut R, size: usize) -> Option<io::Result<Vec<u8>>> {
    let mut mem = vec![0u8; size];
    let mut buf = ReadBuf::new(&mut mem);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    match Pin::new(r).poll_read(&mut cx, &mut buf) {
        Poll::Pending => None,
        Poll::Ready(r) => Some(r.map(|()| buf.filled().to_vec())),
    }
}

fn gathered(steps: Vec<Step>) -> reverse::Gathered<Script> {
    reverse::Gathered::new(Script(steps.into()))
}

/// The upstream's reads take every record that is there, up to the buffer, and stop when the
/// socket has nothing more (nothing waits for bytes that have not come).
#[test]
fn an_upstream_read_gathers_what_is_there_and_waits_for_nothing() {
    let mut r = gathered(vec![
        Step::Data(vec![1; 3]),
        Step::Data(vec![2; 4]),
        Step::Pending,
        Step::Data(vec![3; 10]),
        // The first "nothing yet" ends the read that gathered the 3s; the second is seen.
        Step::Pending,
        Step::Pending,
    ]);
    assert_eq!(
        read_once(&mut r, 100).unwrap().unwrap(),
        [1, 1, 1, 2, 2, 2, 2]
    );
    // Up to the buffer: the rest waits for the next read.
    assert_eq!(read_once(&mut r, 4).unwrap().unwrap(), [3; 4]);
    assert_eq!(read_once(&mut r, 100).unwrap().unwrap(), [3; 6]);
    assert!(read_once(&mut r, 100).is_none(), "nothing there: Pending");
    assert_eq!(
        read_once(&mut r, 100).unwrap().unwrap(),
        [0u8; 0],
        "the end"
    );
}

/// A connection cut short after some bytes: the bytes, then the error, never a clean end
/// (which would let a truncated answer pass as whole). Control: without a failure, the end.
#[test]
fn an_upstream_error_after_bytes_is_the_next_read() {
    let mut r = gathered(vec![Step::Data(vec![7; 5]), Step::Fail]);
    assert_eq!(read_once(&mut r, 100).unwrap().unwrap(), [7; 5]);
    let e = read_once(&mut r, 100).unwrap().unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);

    let mut r = gathered(vec![Step::Fail]);
    let e = read_once(&mut r, 100).unwrap().unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);

    let mut r = gathered(vec![Step::Data(vec![7; 5])]);
    assert_eq!(read_once(&mut r, 100).unwrap().unwrap(), [7; 5]);
    assert_eq!(read_once(&mut r, 100).unwrap().unwrap(), [0u8; 0]);
}
