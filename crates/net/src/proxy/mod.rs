//! The egress proxy: HTTP forward proxy (absolute-form requests), HTTPS through `CONNECT`, and
//! SOCKS5 (`CONNECT` with remote name resolution), all on one listening socket that the
//! sandbox's init opened inside the sandbox's network namespace. The supervisor serves it from
//! the host side: no helper process, no bridge, no polling.
//!
//! Every request goes through [`Proxy::admit`]: the rules ([`Rules`]), then one resolution on
//! the host ([`crate::resolve`]: the hosts file, then DNS), then the SSRF check of **every**
//! resolved address ([`crate::ssrf`]); the connection goes to the exact addresses checked, so a
//! second, different answer (DNS rebinding) is never used. Tunnels (CONNECT, SOCKS5) must start
//! with a TLS ClientHello whose SNI names the requested host (domain fronting), unless the
//! target is an explicit `allow_hosts` entry; plain HTTP goes through the forward proxy, where
//! each request's `Host` must match its target.
//!
//! Decisions are [`Event`]s with stable codes, returned when the proxy stops; so is an allowed
//! destination the proxy could not reach ([`UPSTREAM_FAILED`], with the addresses tried and
//! the error): a CONNECT or SOCKS5 client was already told its tunnel is open.

use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Semaphore};

mod masked;
mod oauth;
mod reverse;

use crate::resolve::Resolver;
use crate::{http, sni, socks5, ssrf, Target, TargetError};

/// What the proxy asks of the policy.
pub trait Rules: Send + Sync + 'static {
    /// `Ok(rule)` when `host:port` may be reached, `Err((rule, reason))` when not.
    fn check(&self, host: &str, port: u16) -> Result<String, (String, String)>;
    /// Whether an explicit `allow_hosts` entry lifts the SSRF check for this address.
    fn private_allowed(&self, host: &str, port: u16, ip: IpAddr) -> bool;
    /// Whether `host:port` is an explicit `allow_hosts` entry (tunnels to it need not be TLS).
    fn explicit_host(&self, host: &str, port: u16) -> bool;
    /// What would allow `host:port`, refused under `rule` (a rule of [`Rules::check`], or
    /// `ssrf:<class>`): the flag and the policy line, or why none can. `None`: nothing to say.
    fn allow_hint(&self, host: &str, port: u16, rule: &str) -> Option<String> {
        let _ = (host, port, rule);
        None
    }
    /// [`Rules::allow_hint`] for an `ssrf:<class>` refusal of `host` resolved to `ip`: a
    /// hint can name the address (a grant of a name follows its DNS wherever it points).
    fn allow_hint_resolved(&self, host: &str, port: u16, rule: &str, ip: IpAddr) -> Option<String> {
        let _ = ip;
        self.allow_hint(host, port, rule)
    }
}

/// Limits that keep a slow or hostile client from exhausting the proxy.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    /// Time to send a request line, a SOCKS greeting or a ClientHello.
    pub handshake: Duration,
    /// A tunnel with no traffic either way for this long is closed.
    pub idle: Duration,
    pub connect: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 256,
            handshake: Duration::from_secs(10),
            idle: Duration::from_secs(300),
            connect: Duration::from_secs(10),
        }
    }
}

/// One decision of the proxy.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Event {
    /// `NET_ALLOWED`, `E_NETWORK_DENIED` or `NET_UPSTREAM_FAILED` ([`UPSTREAM_FAILED`]).
    pub code: &'static str,
    /// `http`, `connect` or `socks5`.
    pub protocol: &'static str,
    pub host: String,
    pub port: u16,
    /// The rule that decided.
    pub rule: String,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What would allow a refused destination (the flag and the policy line), or why nothing
    /// can.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Refused before any connection was made.
    pub before_connect: bool,
    /// The address connected to, when allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<SocketAddr>,
    pub bytes_up: u64,
    pub bytes_down: u64,
}

/// A callback for every decision as it is made.
pub type OnEvent = Box<dyn Fn(&Event) + Send + Sync>;

pub const ALLOWED: &str = "NET_ALLOWED";
/// An allowed destination the proxy could not reach (the connection failed or timed out):
/// not a refusal, but the reason a client saw its tunnel close or a 502. The event's `reason`
/// names the addresses tried and the error, `hint` what to check.
pub const UPSTREAM_FAILED: &str = "NET_UPSTREAM_FAILED";
pub const DENIED: &str = sandbox::Code::NetworkDenied.as_str();
/// A request on a credential route without this run's stand-in.
pub const CREDENTIAL_REFUSED: &str = sandbox::Code::CredentialRefused.as_str();
/// Events kept per run; later ones are counted only.
const MAX_EVENTS: usize = 10_000;

struct Shared {
    rules: Box<dyn Rules>,
    limits: Limits,
    events: Mutex<(Vec<Event>, u64)>,
    /// Open tunnels' events (index into `events`) and their live byte counters.
    live: Mutex<Vec<(usize, Arc<Counters>)>>,
    /// Called with every event as it happens (the standalone proxy logs them live).
    on_event: Option<OnEvent>,
    /// Idle upstream connections of the forward proxy.
    pool: Pool,
    /// Names to addresses: the hosts file, then DNS.
    resolver: Resolver,
    /// The run's credential routes (served at `/credential/<name>` on the proxy's own address).
    credentials: Option<crate::credential::Routes>,
    /// The proxy's own address: an absolute-form request to it is a request on a route.
    local: Option<SocketAddr>,
}

impl Shared {
    /// Record an event whose byte counts are filled in from `counters` when reported.
    fn record_live(&self, e: Event, counters: Arc<Counters>) {
        if let Some(f) = &self.on_event {
            f(&e);
        }
        if let (Ok(mut ev), Ok(mut live)) = (self.events.lock(), self.live.lock()) {
            if ev.0.len() < MAX_EVENTS {
                live.push((ev.0.len(), counters));
                ev.0.push(e);
            } else {
                ev.1 += 1;
            }
        }
    }

    fn record(&self, e: Event) {
        if let Some(f) = &self.on_event {
            f(&e);
        }
        if let Ok(mut ev) = self.events.lock() {
            if ev.0.len() < MAX_EVENTS {
                ev.0.push(e);
            } else {
                ev.1 += 1;
            }
        }
    }
}

/// A refusal, for the event and the client's error response.
struct Denial {
    rule: String,
    reason: String,
    /// What would allow it, or why nothing can.
    hint: Option<String>,
    before_connect: bool,
}

/// The running proxy (its own thread and tokio runtime).
pub struct Proxy {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    shared: Arc<Shared>,
}

/// What a stopped proxy reports.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub events: Vec<Event>,
    /// Events beyond the kept ones.
    pub dropped: u64,
}

impl Proxy {
    /// Serve `listener` (already listening, e.g. inside the sandbox's network namespace).
    pub fn start(
        listener: std::net::TcpListener,
        rules: Box<dyn Rules>,
        limits: Limits,
    ) -> io::Result<Proxy> {
        Proxy::start_with(listener, rules, limits, None, None)
    }

    /// [`Proxy::start`], calling `on_event` with every decision as it is made, and serving the
    /// run's credential routes (see [`crate::credential`]).
    pub fn start_with(
        listener: std::net::TcpListener,
        rules: Box<dyn Rules>,
        limits: Limits,
        on_event: Option<OnEvent>,
        credentials: Option<crate::credential::Routes>,
    ) -> io::Result<Proxy> {
        listener.set_nonblocking(true)?;
        let local = listener.local_addr().ok();
        let shared = Arc::new(Shared {
            rules,
            limits,
            events: Mutex::new((Vec::new(), 0)),
            live: Mutex::new(Vec::new()),
            on_event,
            pool: Pool::default(),
            resolver: Resolver::default(),
            credentials,
            local,
        });
        let (stop_tx, stop_rx) = oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .thread_name("stockade-proxy")
            .enable_all()
            .build()?;
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("stockade-proxy".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(_) => return,
                    };
                    tokio::select! {
                        _ = serve(listener, s) => {}
                        _ = stop_rx => {}
                    }
                });
                runtime.shutdown_timeout(Duration::from_millis(200));
            })?;
        Ok(Proxy {
            stop: Some(stop_tx),
            thread: Some(thread),
            shared,
        })
    }

    /// Serve until SIGINT or SIGTERM, then stop (the standalone `stockade proxy`).
    pub fn run_until_signal(self) -> io::Result<Report> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                r = tokio::signal::ctrl_c() => r,
                _ = term.recv() => Ok(()),
            }
        })?;
        Ok(self.stop())
    }

    /// Stop serving (open tunnels are cut) and return the decisions.
    pub fn stop(mut self) -> Report {
        self.shutdown();
        let live = match self.shared.live.lock() {
            Ok(mut l) => std::mem::take(&mut *l),
            Err(_) => Vec::new(),
        };
        match self.shared.events.lock() {
            Ok(mut ev) => {
                for (i, c) in live {
                    if let Some(e) = ev.0.get_mut(i) {
                        e.bytes_up = c.up.load(std::sync::atomic::Ordering::Relaxed);
                        e.bytes_down = c.down.load(std::sync::atomic::Ordering::Relaxed);
                    }
                }
                Report {
                    events: std::mem::take(&mut ev.0),
                    dropped: ev.1,
                }
            }
            Err(_) => Report::default(),
        }
    }

    fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let permits = Arc::new(Semaphore::new(shared.limits.max_connections));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let s = shared.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _ = connection(stream, s).await;
        });
    }
}

/// One client connection: SOCKS5 if it starts with version byte 5, HTTP otherwise.
async fn connection(stream: TcpStream, shared: Arc<Shared>) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut first = [0u8; 1];
    let n = tokio::time::timeout(shared.limits.handshake, stream.peek(&mut first))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    if n == 1 && first[0] == socks5::VERSION {
        return socks(stream, shared).await;
    }
    let s = shared.clone();
    let service = hyper::service::service_fn(move |req| {
        let s = s.clone();
        async move { Ok::<_, Infallible>(http_request(req, s).await) }
    });
    hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(shared.limits.handshake)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await
        .map_err(io::Error::other)
}

type Body = BoxBody<Bytes, hyper::Error>;

fn text(status: StatusCode, reason: &str) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(format!("stockade: {reason}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(&reason.replace(['\r', '\n'], " ")) {
        r.headers_mut().insert("x-stockade-denied", v);
    }
    r
}

/// A request whose host the normalizer refuses (`policy::host`: a numeric name, a stray
/// character, ...) is refused before anything else and recorded like any other refusal, with
/// the host as the client wrote it (cut to 256 bytes).
fn invalid_host(
    shared: &Shared,
    protocol: &'static str,
    raw: &str,
    e: &TargetError,
) -> Response<Body> {
    let mut end = raw.len().min(256);
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    let rule = policy::net::RULE_INVALID_HOST;
    let d = Denial {
        rule: rule.to_owned(),
        reason: format!("invalid host: {e}"),
        hint: shared.rules.allow_hint(&raw[..end], 0, rule),
        before_connect: true,
    };
    shared.record(event(protocol, &raw[..end], 0, Err(&d), None, 0, 0));
    denied(&d)
}

/// The answer to a refused request: 403, the reason in `x-stockade-denied` and the body, and
/// what would allow it in `x-stockade-hint` and the body's second line.
fn denied(d: &Denial) -> Response<Body> {
    let mut r = text(StatusCode::FORBIDDEN, &format!("{} ({})", d.reason, d.rule));
    if let Some(hint) = &d.hint {
        let clean = hint.replace(['\r', '\n'], " ");
        if let Ok(v) = hyper::header::HeaderValue::from_str(&clean) {
            r.headers_mut().insert("x-stockade-hint", v);
        }
        let body = format!("stockade: {} ({})\n  hint: {clean}\n", d.reason, d.rule);
        *r.body_mut() = Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed();
    }
    r
}

async fn http_request(req: Request<Incoming>, shared: Arc<Shared>) -> Response<Body> {
    if req.method() == Method::CONNECT {
        return connect_request(req, shared).await;
    }
    if let Some(path) = reverse::route_path(&req, shared.local) {
        return reverse::request(req, path, shared).await;
    }
    let uri = req.uri().to_string();
    let (host, port, origin) = match http::parse_absolute_target(&uri) {
        Ok(http::AbsoluteTarget {
            target: Target { host, port },
            path,
        }) => (host, port, path),
        Err(http::Error::Host(e)) => {
            let raw = req.uri().host().unwrap_or(&uri);
            return invalid_host(&shared, "http", raw, &e);
        }
        Err(_) => {
            return text(
                StatusCode::BAD_REQUEST,
                "only absolute-form http:// requests and CONNECT are proxied",
            )
        }
    };
    let header = req
        .headers()
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !http::host_header_matches(&host, port, header) {
        let d = Denial {
            rule: "host header must match the request target".into(),
            reason: format!("Host {header:?} does not match {host}:{port}"),
            hint: Some(format!(
                "no rule allows it (a request sent to one host in the name of another): send it with the Host header `{host}:{port}`"
            )),
            before_connect: true,
        };
        shared.record(event("http", &host, port, Err(&d), None, 0, 0));
        return denied(&d);
    }
    let (rule, addrs) = match admit(&shared, &host, port).await {
        Ok(a) => a,
        Err(d) => {
            shared.record(event("http", &host, port, Err(&d), None, 0, 0));
            return denied(&d);
        }
    };
    let (mut parts, body) = req.into_parts();
    parts.uri = match origin.parse() {
        Ok(u) => u,
        Err(_) => return text(StatusCode::BAD_REQUEST, "bad request target"),
    };
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove("proxy-authorization");
    let up = content_length(&parts.headers);
    let request = Request::from_parts(parts, body);
    let pooled = shared.pool.take(&host, port, &addrs);
    let opened = exchange(
        pooled,
        || open_upstream(&addrs, shared.limits.connect),
        request,
    )
    .await;
    let (sender, addr, resp) = match opened {
        Ok(x) => x,
        Err(e) => {
            shared.record(unreachable("http", &host, port, &rule, &addrs, &e));
            return text(StatusCode::BAD_GATEWAY, &e);
        }
    };
    match resp {
        Ok(r) => {
            // The event is recorded when the response body is done, with its size; a body read
            // to its end gives the connection back to the pool.
            let record = event("http", &host, port, Ok(&rule), Some(addr), up, 0);
            let done = when_done(shared, host.clone(), port, addr, sender, record);
            r.map(|b| {
                Counted {
                    inner: b,
                    bytes: 0,
                    done: Some(done),
                }
                .boxed()
            })
        }
        Err(e) => {
            shared.record(event("http", &host, port, Ok(&rule), Some(addr), up, 0));
            text(StatusCode::BAD_GATEWAY, &format!("upstream: {e}"))
        }
    }
}

/// A request's declared body size (0 when not declared), for the event's bytes sent.
fn content_length(headers: &hyper::HeaderMap) -> u64 {
    headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
}

/// What an answer's body does when it ends: the connection goes back to the pool under `key`
/// if the body was read to its end, and `record` is recorded with the body's size.
fn when_done(
    shared: Arc<Shared>,
    key: String,
    port: u16,
    addr: SocketAddr,
    sender: Upstream,
    mut record: Event,
) -> Box<dyn FnOnce(u64, bool) + Send + Sync> {
    Box::new(move |down: u64, complete: bool| {
        if complete {
            shared.pool.put(&key, port, addr, sender);
        }
        record.bytes_down = down;
        shared.record(record);
    })
}

/// Send `request` on a pooled connection, or on a new one from `open`. A pooled connection
/// serves once it has finished its previous exchange (an error means the upstream closes it:
/// HTTP/1.0, `Connection: close`); one that closed under us before the request went out gives
/// the request back untouched, and it goes on a new connection. The answer comes without
/// hop-by-hop headers, as HTTP/1.1.
async fn exchange<F, Fut>(
    pooled: Option<(Upstream, SocketAddr)>,
    open: F,
    request: Request<Incoming>,
) -> Result<(Upstream, SocketAddr, hyper::Result<Response<Incoming>>), String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(Upstream, SocketAddr), String>>,
{
    let pooled = match pooled {
        Some((mut s, a)) => match tokio::time::timeout(POOL_READY, s.ready()).await {
            Ok(Ok(())) => Some((s, a)),
            _ => None,
        },
        None => None,
    };
    let reused = pooled.is_some();
    let (mut sender, mut addr) = match pooled {
        Some(x) => x,
        None => open().await?,
    };
    let mut resp = sender.try_send_request(request).await;
    if reused {
        if let Err(e) = &mut resp {
            if let Some(request) = e.take_message() {
                (sender, addr) = open().await?;
                resp = sender.try_send_request(request).await;
            }
        }
    }
    let resp = resp.map(|mut r| {
        // The upstream's connection handling is its own: the client's connection to the proxy
        // stays open for its next request.
        strip_hop_by_hop(r.headers_mut());
        // The client's connection is HTTP/1.1 whatever the upstream spoke (an HTTP/1.0 status
        // line would make the client close its proxy connection after each request).
        *r.version_mut() = hyper::Version::HTTP_11;
        r
    });
    Ok((sender, addr, resp.map_err(|e| e.into_error())))
}

/// Connect to the first reachable checked address and start an HTTP/1.1 client connection.
async fn open_upstream(
    addrs: &[SocketAddr],
    limit: Duration,
) -> Result<(Upstream, SocketAddr), String> {
    let (stream, addr) = connect(addrs, limit)
        .await
        .map_err(|e| format!("connect failed: {e}"))?;
    let io = TokioIo::new(HandOffFirst {
        inner: stream,
        yielded: false,
    });
    let (sender, conn) = hyper::client::conn::http1::handshake::<_, Incoming>(io)
        .await
        .map_err(|e| format!("upstream: {e}"))?;
    tokio::spawn(conn);
    Ok((sender, addr))
}

type Upstream = hyper::client::conn::http1::SendRequest<Incoming>;

/// An upstream socket that lets the response go first. When an upstream ends its connection
/// with the response (HTTP/1.0, `Connection: close`), hyper's connection task would shut the
/// socket down and close it before the task that hands the response to the client runs: an
/// eighth of the proxy's work per request (measured), on the client's critical path. Yielding once at
/// the shutdown puts that work after the hand-off.
struct HandOffFirst {
    inner: TcpStream,
    yielded: bool,
}

impl AsyncRead for HandOffFirst {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for HandOffFirst {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.yielded {
            // Woken at once, behind the tasks already woken by the response.
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Idle upstream connections of the forward proxy, kept for the next request to the same
/// place. Every request is still admitted on its own (rules, one resolution, SSRF check); a
/// pooled connection serves it only when it was opened for the same host and port and its
/// address is one of those this request's admission returned.
#[derive(Default)]
struct Pool {
    idle: Mutex<Vec<Idle>>,
}

struct Idle {
    host: String,
    port: u16,
    addr: SocketAddr,
    sender: Upstream,
    since: Instant,
}

/// Idle connections kept at most, all places together, and for how long.
const POOL_MAX: usize = 32;
const POOL_IDLE: Duration = Duration::from_secs(30);
/// How long a pooled connection may take to finish its previous exchange.
const POOL_READY: Duration = Duration::from_secs(1);

impl Pool {
    fn take(&self, host: &str, port: u16, addrs: &[SocketAddr]) -> Option<(Upstream, SocketAddr)> {
        let mut idle = self.idle.lock().ok()?;
        idle.retain(|i| !i.sender.is_closed() && i.since.elapsed() < POOL_IDLE);
        let at = idle
            .iter()
            .rposition(|i| i.port == port && i.host == host && addrs.contains(&i.addr))?;
        let i = idle.swap_remove(at);
        Some((i.sender, i.addr))
    }

    /// An idle connection to `host:port` whatever its address (a credential route's: its
    /// upstream is fixed by the policy and verified by TLS).
    fn take_any(&self, host: &str, port: u16) -> Option<(Upstream, SocketAddr)> {
        let mut idle = self.idle.lock().ok()?;
        idle.retain(|i| !i.sender.is_closed() && i.since.elapsed() < POOL_IDLE);
        let at = idle
            .iter()
            .rposition(|i| i.port == port && i.host == host)?;
        let i = idle.swap_remove(at);
        Some((i.sender, i.addr))
    }

    fn put(&self, host: &str, port: u16, addr: SocketAddr, sender: Upstream) {
        if sender.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() >= POOL_MAX {
                idle.remove(0);
            }
            idle.push(Idle {
                host: host.to_string(),
                port,
                addr,
                sender,
                since: Instant::now(),
            });
        }
    }
}

/// Sets `Host` to `host` as an HTTPS request names it: an IPv6 address in brackets, the port
/// left out when it is 443.
fn set_https_host(headers: &mut hyper::HeaderMap, host: &str, port: u16) {
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    let authority = if port == 443 {
        host
    } else {
        format!("{host}:{port}")
    };
    if let Ok(v) = hyper::header::HeaderValue::from_str(&authority) {
        headers.insert(hyper::header::HOST, v);
    }
}

/// Remove hop-by-hop headers (RFC 9110 section 7.6.1), including those the `Connection`
/// header names: they describe one connection, not the message.
fn strip_hop_by_hop(headers: &mut hyper::HeaderMap) {
    let named: Vec<String> = headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    for name in named {
        headers.remove(name.as_str());
    }
    for h in [
        "connection",
        "proxy-connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-authenticate",
    ] {
        headers.remove(h);
    }
}

/// A response body that counts its bytes and reports the total when dropped (finished or cut),
/// and whether it was read to its end.
struct Counted {
    inner: Incoming,
    bytes: u64,
    done: Option<Box<dyn FnOnce(u64, bool) + Send + Sync>>,
}

impl hyper::body::Body for Counted {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, hyper::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            std::task::Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.bytes += data.len() as u64;
                }
                // The last frame: report now, before the client has it and sends its next
                // request, so the connection is back in the pool for that one.
                if hyper::body::Body::is_end_stream(&self.inner) {
                    self.finish(true);
                }
            }
            std::task::Poll::Ready(None) => self.finish(true),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl Counted {
    fn finish(&mut self, complete: bool) {
        if let Some(done) = self.done.take() {
            done(self.bytes, complete);
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let complete = hyper::body::Body::is_end_stream(&self.inner);
        self.finish(complete);
    }
}

async fn connect_request(req: Request<Incoming>, shared: Arc<Shared>) -> Response<Body> {
    let authority = req
        .uri()
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let (host, port) = match http::parse_connect_authority(&authority) {
        Ok(Target { host, port }) => (host, port),
        Err(http::Error::Host(e)) => return invalid_host(&shared, "connect", &authority, &e),
        Err(_) => return text(StatusCode::BAD_REQUEST, "CONNECT needs host:port"),
    };
    // An OAuth login's token host is answered here, never reached (no admission needed).
    if oauth::intercepts(&shared, &host, port) {
        return oauth::connect(req, host, port, shared);
    }
    let (rule, addrs) = match admit(&shared, &host, port).await {
        Ok(a) => a,
        Err(d) => {
            shared.record(event("connect", &host, port, Err(&d), None, 0, 0));
            return denied(&d);
        }
    };
    tokio::spawn(async move {
        let Ok(upgraded) = hyper::upgrade::on(req).await else {
            return;
        };
        // Back to the plain socket (plus anything hyper read ahead) for zero-copy relaying.
        let Ok(parts) = upgraded.downcast::<TokioIo<TcpStream>>() else {
            return;
        };
        let t = Tunnel {
            protocol: "connect",
            host,
            port,
            rule,
            addrs,
        };
        tunnel(parts.io.into_inner(), t, parts.read_buf.to_vec(), shared).await;
    });
    Response::new(Empty::new().map_err(|never| match never {}).boxed())
}

async fn socks(mut stream: TcpStream, shared: Arc<Shared>) -> io::Result<()> {
    let limit = shared.limits.handshake;
    let request = tokio::time::timeout(limit, socks_handshake(&mut stream))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    let Some((request, pipelined)) = request else {
        return Ok(()); // already answered (no acceptable method, bad request)
    };
    let Target { host, port } = request.target;
    if request.command != socks5::Command::Connect {
        let reply = socks5::encode_reply(socks5::Reply::CommandNotSupported, None);
        return stream.write_all(&reply).await;
    }
    if oauth::intercepts(&shared, &host, port) {
        let ok = socks5::encode_reply(socks5::Reply::Succeeded, None);
        stream.write_all(&ok).await?;
        oauth::serve(stream, pipelined, host, port, shared).await;
        return Ok(());
    }
    match admit(&shared, &host, port).await {
        Ok((rule, addrs)) => {
            let ok = socks5::encode_reply(socks5::Reply::Succeeded, None);
            stream.write_all(&ok).await?;
            let t = Tunnel {
                protocol: "socks5",
                host,
                port,
                rule,
                addrs,
            };
            tunnel(stream, t, pipelined, shared).await;
            Ok(())
        }
        Err(d) => {
            shared.record(event("socks5", &host, port, Err(&d), None, 0, 0));
            let no = socks5::encode_reply(socks5::Reply::NotAllowed, None);
            stream.write_all(&no).await
        }
    }
}

/// Greeting, method choice, request. `None` when the exchange ended with a refusal already
/// sent. Bytes after the request (a client that did not wait for the reply) come back too.
async fn socks_handshake(stream: &mut TcpStream) -> io::Result<Option<(socks5::Request, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    let greeting = loop {
        match socks5::parse_greeting(&buf) {
            socks5::Parsed::Done { value, consumed } => {
                buf.drain(..consumed);
                break value;
            }
            socks5::Parsed::Invalid(_) => return Ok(None),
            socks5::Parsed::Need(_) => {}
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() > 4096 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    stream.write_all(&greeting.reply()).await?;
    if greeting.method() != socks5::METHOD_NO_AUTH {
        return Ok(None);
    }
    loop {
        match socks5::parse_request(&buf) {
            socks5::Parsed::Done { value, consumed } => {
                buf.drain(..consumed);
                return Ok(Some((value, buf)));
            }
            socks5::Parsed::Invalid(e) => {
                if let Some(reply) = e.reply() {
                    stream.write_all(&socks5::encode_reply(reply, None)).await?;
                }
                return Ok(None);
            }
            socks5::Parsed::Need(_) => {}
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() > 4096 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A name that does not resolve: no rule changes that.
const UNRESOLVED_HINT: &str = "no rule changes what a name resolves to: check the name; the proxy \
    resolves it on this host (/etc/hosts, then the DNS servers of /etc/resolv.conf)";

/// A tunnel without TLS naming its host: nothing allows that but an exact `allow_hosts` entry.
fn sni_hint(host: &str, port: u16) -> String {
    format!(
        "a tunnel must carry TLS whose server name is the host it was opened for (no domain \
         fronting); a tunnel without TLS to this host needs an exact `--allow-host {host}:{port}` \
         (`allow_hosts` in the policy file)"
    )
}

/// The rules, then one resolution and the SSRF check of every address. Returns the rule
/// that allowed it and the addresses to connect to (only these).
async fn admit(
    shared: &Shared,
    host: &str,
    port: u16,
) -> Result<(String, Vec<SocketAddr>), Denial> {
    let rules = &shared.rules;
    let rule = match rules.check(host, port) {
        Ok(rule) => rule,
        Err((rule, reason)) => {
            return Err(Denial {
                hint: rules.allow_hint(host, port, &rule),
                rule,
                reason,
                before_connect: true,
            })
        }
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => match shared.resolver.lookup(bare).await {
            Ok(a) => a.into_iter().map(|ip| SocketAddr::new(ip, port)).collect(),
            Err(e) => {
                return Err(Denial {
                    rule: "resolution".into(),
                    reason: format!("could not resolve {host}: {e}"),
                    hint: Some(UNRESOLVED_HINT.into()),
                    before_connect: true,
                })
            }
        },
    };
    if addrs.is_empty() {
        return Err(Denial {
            rule: "resolution".into(),
            reason: format!(
                "could not resolve {host}: {}",
                crate::resolve::LookupError::NoAddress
            ),
            hint: Some(UNRESOLVED_HINT.into()),
            before_connect: true,
        });
    }
    for a in &addrs {
        if let Some(class) = ssrf::forbidden(a.ip()) {
            if !rules.private_allowed(host, port, a.ip()) {
                let rule = format!("ssrf:{}", class.code());
                return Err(Denial {
                    hint: rules.allow_hint_resolved(host, port, &rule, a.ip()),
                    rule,
                    reason: format!(
                        "{host} resolves to {} ({}); only an allow_hosts entry opens it",
                        a.ip(),
                        class.describe()
                    ),
                    before_connect: true,
                });
            }
        }
    }
    Ok((rule, addrs))
}

async fn connect(addrs: &[SocketAddr], limit: Duration) -> io::Result<(TcpStream, SocketAddr)> {
    let mut last = io::Error::from(io::ErrorKind::AddrNotAvailable);
    for a in addrs {
        match tokio::time::timeout(limit, TcpStream::connect(a)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok((s, *a));
            }
            Ok(Err(e)) => last = e,
            Err(_) => last = io::Error::from(io::ErrorKind::TimedOut),
        }
    }
    Err(last)
}

/// An admitted tunnel.
struct Tunnel {
    protocol: &'static str,
    host: String,
    port: u16,
    rule: String,
    addrs: Vec<SocketAddr>,
}

/// A tunnel: check the first flight (TLS with the right SNI), connect, splice. `first` holds
/// client bytes already read.
async fn tunnel(mut client: TcpStream, t: Tunnel, mut first: Vec<u8>, shared: Arc<Shared>) {
    let Tunnel {
        protocol,
        host,
        port,
        rule,
        addrs,
    } = t;
    let explicit = shared.rules.explicit_host(&host, port);
    if !explicit {
        match first_flight(&mut client, &mut first, shared.limits.handshake).await {
            Ok(()) => {}
            Err(reason) => {
                let d = Denial {
                    rule: "tls sni must match the requested host".into(),
                    reason,
                    hint: Some(sni_hint(&host, port)),
                    before_connect: true,
                };
                shared.record(event(protocol, &host, port, Err(&d), None, 0, 0));
                let _ = client.shutdown().await;
                return;
            }
        }
        if let Err(reason) = check_sni(&first, &host) {
            let d = Denial {
                rule: "tls sni must match the requested host".into(),
                reason,
                hint: Some(sni_hint(&host, port)),
                before_connect: true,
            };
            shared.record(event(protocol, &host, port, Err(&d), None, 0, 0));
            let _ = client.shutdown().await;
            return;
        }
    }
    if masked::applies(&shared, &host, port) {
        let t = Tunnel {
            protocol,
            host,
            port,
            rule,
            addrs,
        };
        return masked::serve(client, first, t, shared).await;
    }
    let (mut upstream, addr) = match connect(&addrs, shared.limits.connect).await {
        Ok(x) => x,
        Err(e) => {
            // The client was told the tunnel is open (CONNECT's 200, SOCKS5's success): the
            // closed tunnel alone would not say why.
            let why = format!("connect failed: {e}");
            shared.record(unreachable(protocol, &host, port, &rule, &addrs, &why));
            let _ = client.shutdown().await;
            return;
        }
    };
    if upstream.write_all(&first).await.is_err() {
        return;
    }
    // Recorded now, not when the tunnel closes: a run can end (and the proxy stop) while a
    // tunnel is still open. Its byte counts are live counters read when the report is made.
    let counters = Arc::new(Counters::default());
    counters
        .up
        .store(first.len() as u64, std::sync::atomic::Ordering::Relaxed);
    shared.record_live(
        event(protocol, &host, port, Ok(&rule), Some(addr), 0, 0),
        counters.clone(),
    );
    relay(client, upstream, shared.limits.idle, &counters).await;
}

/// Bytes moved by an open tunnel, each way.
#[derive(Debug, Default)]
struct Counters {
    up: std::sync::atomic::AtomicU64,
    down: std::sync::atomic::AtomicU64,
}

/// Read until the ClientHello is complete (or clearly not one).
async fn first_flight<S: AsyncRead + Unpin>(
    client: &mut S,
    buf: &mut Vec<u8>,
    limit: Duration,
) -> Result<(), String> {
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            match sni::parse(buf) {
                sni::Sni::Need(_) => {}
                _ => return Ok(()),
            }
            if buf.len() > 64 * 1024 {
                return Err("the first flight is too long".to_string());
            }
            match client.read(&mut chunk).await {
                Ok(0) => return Err("the client closed before sending a ClientHello".into()),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(e.to_string()),
            }
        }
    };
    tokio::time::timeout(limit, read)
        .await
        .map_err(|_| "no ClientHello in time".to_string())?
}

fn check_sni(first: &[u8], host: &str) -> Result<(), String> {
    let want = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    match sni::parse(first) {
        sni::Sni::Found(hello) => match hello.server_name {
            Some(name) if name == want => Ok(()),
            Some(name) => Err(format!(
                "TLS SNI {name:?} does not match the requested host {want:?} (domain fronting)"
            )),
            None if want.parse::<IpAddr>().is_ok() => Ok(()),
            None => Err(format!("TLS without SNI to {want:?}")),
        },
        sni::Sni::NotTls => Err(format!(
            "not TLS: tunnels to {want:?} must carry TLS (use the HTTP proxy for http://)"
        )),
        sni::Sni::Invalid(e) => Err(format!("malformed ClientHello: {e}")),
        sni::Sni::Need(_) => Err("incomplete ClientHello".into()),
    }
}

/// Relay both ways with `splice(2)` on two blocking threads (no copy through user space) until
/// both sides close or nothing moves for `idle`; falls back to copying if the sockets cannot
/// be turned into blocking ones. Returns bytes (client → upstream, upstream → client).
async fn relay(client: TcpStream, upstream: TcpStream, idle: Duration, counters: &Arc<Counters>) {
    let blocking = |s: TcpStream| -> io::Result<std::net::TcpStream> {
        let s = s.into_std()?;
        s.set_nonblocking(false)?;
        Ok(s)
    };
    let (client, upstream) = match (blocking(client), blocking(upstream)) {
        (Ok(c), Ok(u)) => (c, u),
        _ => return,
    };
    let (Ok(c2), Ok(u2)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let activity = Arc::new(sys::relay::Activity::new());
    let a2 = activity.clone();
    let (k1, k2) = (counters.clone(), counters.clone());
    let up =
        tokio::task::spawn_blocking(move || sys::relay::splice_all(&c2, &u2, &a2, idle, &k1.up));
    let down = tokio::task::spawn_blocking(move || {
        sys::relay::splice_all(&upstream, &client, &activity, idle, &k2.down)
    });
    let _ = tokio::join!(up, down);
}

/// The event of an allowed destination the proxy could not reach: `error` (e.g. `connect
/// failed: Connection refused (os error 111)`) after the addresses it tried.
fn unreachable(
    protocol: &'static str,
    host: &str,
    port: u16,
    rule: &str,
    addrs: &[SocketAddr],
    error: &str,
) -> Event {
    let tried: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    Event {
        code: UPSTREAM_FAILED,
        reason: Some(format!(
            "allowed, but unreachable from the host: {} ({error})",
            tried.join(", ")
        )),
        hint: Some(format!(
            "the rules let it through ({rule}); the connection from the host failed: check \
             that {host} is up and serving port {port}, and that the host itself can reach it \
             (its name resolves as on the host: /etc/hosts, then DNS)"
        )),
        ..event(protocol, host, port, Ok(rule), None, 0, 0)
    }
}

fn event(
    protocol: &'static str,
    host: &str,
    port: u16,
    outcome: Result<&str, &Denial>,
    addr: Option<SocketAddr>,
    up: u64,
    down: u64,
) -> Event {
    match outcome {
        Ok(rule) => Event {
            code: ALLOWED,
            protocol,
            host: host.to_string(),
            port,
            rule: rule.to_string(),
            reason: None,
            hint: None,
            before_connect: false,
            addr,
            bytes_up: up,
            bytes_down: down,
        },
        Err(d) => Event {
            code: DENIED,
            protocol,
            host: host.to_string(),
            port,
            rule: d.rule.clone(),
            reason: Some(d.reason.clone()),
            hint: d.hint.clone(),
            before_connect: d.before_connect,
            addr: None,
            bytes_up: 0,
            bytes_down: 0,
        },
    }
}

#[cfg(test)]
mod tests;
