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
