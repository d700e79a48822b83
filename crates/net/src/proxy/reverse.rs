//! The reverse route of credentials: a request to the proxy's own address at
//! `/credential/<name>/...` carrying the run's stand-in goes to the route's upstream over TLS
//! with the real value in its place (see [`crate::credential`]). Responses stream through as
//! they come (server-sent events are not held back).
//!
//! The upstream is the policy's, never the client's: the `Host` header, an absolute URL's
//! authority and the path cannot change where the request goes, and TLS verifies the
//! upstream's name with the system's roots. For that reason its addresses are not put through
//! the SSRF check (an internal gateway named in the policy is a legitimate upstream; a name
//! resolved elsewhere would fail verification); the sandbox chooses nothing here but the path.

use std::sync::Arc;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use policy::credentials::Inject;
use zeroize::Zeroizing;

use super::{
    connect, content_length, event, exchange, set_https_host, strip_hop_by_hop, text, when_done,
    Body, Counted, Denial, Event, Shared, Upstream, CREDENTIAL_REFUSED,
};
use crate::credential::oauth::Login;
use crate::credential::{self, Presented, Route, Routes, Secret};

/// The protocol named in a route's events.
const PROTOCOL: &str = "credential";

/// The path (with query) of a request on a route: origin-form (`GET /credential/x/...`, a
/// client given the route as its base URL), or absolute-form to the proxy's own address (the
/// same client also told to use the proxy for everything).
pub(super) fn route_path(
    req: &Request<Incoming>,
    local: Option<std::net::SocketAddr>,
) -> Option<String> {
    let uri = req.uri();
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    match uri.authority() {
        None if path.starts_with('/') => Some(path.to_owned()),
        Some(a) if uri.scheme_str() == Some("http") => {
            let local = local?;
            let host = a.host().trim_start_matches('[').trim_end_matches(']');
            let own = host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip == local.ip())
                && a.port_u16().unwrap_or(80) == local.port();
            own.then(|| path.to_owned())
        }
        _ => None,
    }
}

fn refused(shared: &Shared, host: &str, port: u16, rule: String, reason: String) -> Event {
    let mut e = event(
        PROTOCOL,
        host,
        port,
        Err(&Denial {
            rule,
            reason,
            hint: None,
            before_connect: true,
        }),
        None,
        0,
        0,
    );
    e.code = CREDENTIAL_REFUSED;
    shared.record(e.clone());
    e
}

/// One request on a route.
pub(super) async fn request(
    req: Request<Incoming>,
    path: String,
    shared: Arc<Shared>,
) -> Response<Body> {
    let Some(routes) = shared.credentials.clone() else {
        return text(
            StatusCode::BAD_REQUEST,
            "only absolute-form http:// requests and CONNECT are proxied (this run has no credential routes)",
        );
    };
    let (on, target) = match admit(&req, &path, &shared, &routes) {
        Ok(admitted) => admitted,
        Err(refusal) => return *refusal,
    };
    // A login's access token that has expired is refreshed first, on this side.
    let current = match on.current(&shared, &routes.tls).await {
        Ok(current) => current,
        Err(refusal) => return *refusal,
    };
    let (request, sent_up) = match on.upstream_request(req, current.as_ref(), target) {
        Ok(sent) => sent,
        Err(refusal) => return *refusal,
    };
    let route = on.route;
    let up = &route.upstream;
    let key = pool_key(route);
    let pooled = shared.pool.take_any(&key, up.port);
    let opened = exchange(pooled, || open(&shared, route, &routes.tls), request).await;
    let (sender, addr, resp) = match opened {
        Ok(x) => x,
        Err(e) => return text(StatusCode::BAD_GATEWAY, &e),
    };
    match resp {
        Ok(r) => on.answer(r, shared, key, (sender, addr), sent_up),
        Err(e) => {
            shared.record(event(
                PROTOCOL,
                &up.host,
                up.port,
                Ok(&on.rule),
                Some(addr),
                sent_up,
                0,
            ));
            text(StatusCode::BAD_GATEWAY, &format!("upstream: {e}"))
        }
    }
}

/// The answer to a request refused before it went upstream (boxed: it is large).
type Refusal = Box<Response<Body>>;

/// A request let onto its route (see [`admit`]).
struct OnRoute<'r> {
    route: &'r Route,
    /// The rule its events name: `credential:<name>`.
    rule: String,
    /// The OAuth login of the route, whose access stand-ins are its own.
    login: Option<&'r Login>,
}

/// The checks of a request before anything goes upstream, in order: a route for its path,
/// a method that is forwarded, a path the route does not refuse, the run's stand-in, a
/// target on the route's upstream. Each refusal is recorded and is the answer (`Err`).
/// `Ok`: the route and the request's target upstream.
fn admit<'r>(
    req: &Request<Incoming>,
    path: &str,
    shared: &Shared,
    routes: &'r Routes,
) -> Result<(OnRoute<'r>, Zeroizing<String>), Refusal> {
    let Some((route, rest)) = routes.find(path) else {
        let name = credential::split_route(path).map(|(n, _)| n).unwrap_or("");
        let e = refused(
            shared,
            "",
            0,
            format!("credential:{name}"),
            format!(
                "no credential route `{name}` in this run (path {})",
                cut(path)
            ),
        );
        return Err(text(StatusCode::NOT_FOUND, e.reason.as_deref().unwrap_or("")).into());
    };
    let up = &route.upstream;
    let rule = format!("credential:{}", route.name);
    if !credential::method_allowed(req.method()) {
        let reason = format!(
            "method {} is not forwarded on a credential route",
            req.method()
        );
        let e = refused(shared, &up.host, up.port, rule, reason);
        return Err(text(
            StatusCode::METHOD_NOT_ALLOWED,
            e.reason.as_deref().unwrap_or(""),
        )
        .into());
    }
    let (rest_path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    if let Some(pattern) = credential::denied_path(route, rest_path) {
        let reason = format!(
            "{} is refused on credential route `{}` (deny_paths: {pattern}): it can mint or plant lasting credentials",
            cut(rest_path),
            route.name
        );
        let e = refused(shared, &up.host, up.port, rule, reason);
        return Err(text(StatusCode::FORBIDDEN, e.reason.as_deref().unwrap_or("")).into());
    }
    // An OAuth login's access stand-ins are its own (a refresh hands out new ones).
    let login = routes.login(&route.name);
    let shown = match login {
        Some(l) => l.presented(req.headers()),
        None => credential::presented(route, req.headers(), query),
    };
    if shown != Presented::Valid {
        let e = refused(shared, &up.host, up.port, rule, shown.reason(&route.name));
        let mut r = text(StatusCode::UNAUTHORIZED, e.reason.as_deref().unwrap_or(""));
        if let Ok(v) = hyper::header::HeaderValue::from_str(CREDENTIAL_REFUSED) {
            r.headers_mut().insert("x-stockade-code", v);
        }
        return Err(r.into());
    }
    let target = match credential::upstream_target(route, rest) {
        Ok(t) => t,
        Err(reason) => {
            let e = refused(shared, &up.host, up.port, rule, reason.to_owned());
            return Err(text(StatusCode::BAD_REQUEST, e.reason.as_deref().unwrap_or("")).into());
        }
    };
    Ok((OnRoute { route, rule, login }, target))
}

impl OnRoute<'_> {
    /// The login's access token, renewed first when it is about to expire (`None`: the route
    /// has no login; its secret is the value). A failed renewal is recorded and answered.
    async fn current(
        &self,
        shared: &Shared,
        tls: &Arc<rustls::ClientConfig>,
    ) -> Result<Option<Secret>, Refusal> {
        let Some(l) = self.login else {
            return Ok(None);
        };
        if let Err((status, why)) =
            super::oauth::renew(shared, tls, l, credential::oauth::REQUEST_MARGIN_MS).await
        {
            let up = &self.route.upstream;
            let e = refused(shared, &up.host, up.port, self.rule.clone(), why);
            return Err(text(status, e.reason.as_deref().unwrap_or("")).into());
        }
        match l.access() {
            Ok(s) => Ok(Some(s)),
            Err(reason) => Err(text(StatusCode::INTERNAL_SERVER_ERROR, reason).into()),
        }
    }

    /// The request as it goes upstream, and the size it declares: hop-by-hop and credential
    /// headers dropped, the real value injected (`current`, else the route's secret), the
    /// upstream's `Host`, no compression, no ranges, `target` as its URI, HTTP/1.1.
    fn upstream_request(
        &self,
        req: Request<Incoming>,
        current: Option<&Secret>,
        target: Zeroizing<String>,
    ) -> Result<(Request<Incoming>, u64), Refusal> {
        let route = self.route;
        let up = &route.upstream;
        let (mut parts, body) = req.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        for h in credential::CREDENTIAL_HEADERS {
            parts.headers.remove(*h);
        }
        parts.headers.remove(hyper::header::HOST);
        if let Inject::Header { name, format } = &route.inject {
            match credential::header_value(format, current.unwrap_or(&route.secret)) {
                Ok(v) => {
                    if let Ok(n) = hyper::header::HeaderName::from_bytes(name.as_bytes()) {
                        parts.headers.insert(n, v);
                    }
                }
                Err(reason) => return Err(text(StatusCode::INTERNAL_SERVER_ERROR, reason).into()),
            }
        }
        set_https_host(&mut parts.headers, &up.host, up.port);
        // Responses must be readable to be masked: no compression.
        parts.headers.insert(
            hyper::header::ACCEPT_ENCODING,
            hyper::header::HeaderValue::from_static("identity"),
        );
        // Whole answers only: a range of an echo could hold a piece of the value.
        parts.headers.remove(hyper::header::RANGE);
        parts.headers.remove(hyper::header::IF_RANGE);
        parts.uri = match target.parse() {
            Ok(u) => u,
            Err(_) => return Err(text(StatusCode::BAD_REQUEST, "bad request target").into()),
        };
        drop(target);
        parts.version = hyper::Version::HTTP_11;
        let sent_up = content_length(&parts.headers);
        Ok((Request::from_parts(parts, body), sent_up))
    }

    /// The upstream's answer, passed on masked; one in an encoding that cannot be masked is
    /// refused. The connection goes back to the pool under `key` when the body is done.
    fn answer(
        &self,
        r: Response<Incoming>,
        shared: Arc<Shared>,
        key: String,
        (sender, addr): (Upstream, std::net::SocketAddr),
        sent_up: u64,
    ) -> Response<Body> {
        let up = &self.route.upstream;
        if let Some(reason) = encoded(&r) {
            let e = refused(&shared, &up.host, up.port, self.rule.clone(), reason);
            return text(StatusCode::BAD_GATEWAY, e.reason.as_deref().unwrap_or(""));
        }
        let host = up.host.clone();
        let port = up.port;
        let record = event(
            PROTOCOL,
            &host,
            port,
            Ok(&self.rule),
            Some(addr),
            sent_up,
            0,
        );
        let done = when_done(shared, key, port, addr, sender, record);
        // The real value never comes back: not in a redirect's Location, not echoed in a
        // body.
        let scrub = match self.login {
            // Every real value of the login (access and refresh, earlier ones too).
            Some(l) => credential::Scrubber::of(l.held().iter(), false),
            None => credential::Scrubber::new(self.route),
        };
        scrubbed(r, scrub, done)
    }
}

/// An answer with the real values masked in its headers and its body; `done` is told the
/// body's size, and whether it was read to its end, when the body is dropped.
pub(super) fn scrubbed(
    mut r: Response<Incoming>,
    mut scrub: credential::Scrubber,
    done: Box<dyn FnOnce(u64, bool) + Send + Sync>,
) -> Response<Body> {
    // The status line's own text (hyper keeps a non-standard one and sends it on) is dropped:
    // an upstream could put anything there, the real value included.
    r.extensions_mut().remove::<hyper::ext::ReasonPhrase>();
    // A header whose name holds a value is dropped.
    let named: Vec<hyper::header::HeaderName> = r
        .headers()
        .keys()
        .filter(|n| scrub.in_name(n.as_str().as_bytes()))
        .cloned()
        .collect();
    for n in named {
        r.headers_mut().remove(n);
    }
    for v in r.headers_mut().values_mut() {
        if let Some(clean) = scrub.header(v.as_bytes()) {
            if let Ok(c) = hyper::header::HeaderValue::from_bytes(&clean) {
                *v = c;
            }
        }
    }
    r.map(|b| {
        Scrubbed {
            inner: Counted {
                inner: b,
                bytes: 0,
                done: Some(done),
            },
            scrub,
            next: None,
        }
        .boxed()
    })
}

/// Why a response cannot be masked: it is compressed (asked for `identity`, the upstream sent
/// another encoding), so an echoed real value would pass unseen.
pub(super) fn encoded(r: &Response<Incoming>) -> Option<String> {
    let enc = r.headers().get(hyper::header::CONTENT_ENCODING)?;
    let enc = enc.to_str().unwrap_or("?").trim();
    (!enc.eq_ignore_ascii_case("identity")).then(|| {
        format!("the upstream answered with Content-Encoding {enc}, in which stockade could not mask the real value")
    })
}

/// Pool connections of a route apart from plain ones to the same host.
fn pool_key(route: &Route) -> String {
    format!("credential/{}/{}", route.name, route.upstream.host)
}

/// The start of a path for a message (the sandbox chose it).
pub(super) fn cut(path: &str) -> &str {
    let mut end = path.len().min(120);
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    &path[..end]
}

/// Resolve the upstream, connect, verify it over TLS and start an HTTP/1.1 connection.
async fn open(
    shared: &Shared,
    route: &Route,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<(Upstream, std::net::SocketAddr), String> {
    let up = &route.upstream;
    let bare = up.host.trim_start_matches('[').trim_end_matches(']');
    let addrs = resolve(shared, bare, up.port, "upstream").await?;
    open_tls(&addrs, bare, tls, shared.limits.connect).await
}

/// The addresses of `bare` (a host without brackets) at `port`: itself if it is an address,
/// else the proxy's resolver's answer. `what` names it in the error ("upstream").
pub(super) async fn resolve(
    shared: &Shared,
    bare: &str,
    port: u16,
    what: &str,
) -> Result<Vec<std::net::SocketAddr>, String> {
    Ok(match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![std::net::SocketAddr::new(ip, port)],
        Err(_) => shared
            .resolver
            .lookup(bare)
            .await
            .map_err(|e| format!("could not resolve the {what} {bare}: {e}"))?
            .into_iter()
            .map(|ip| std::net::SocketAddr::new(ip, port))
            .collect(),
    })
}

/// Connect to the first reachable of `addrs`, verify the server as `name` over TLS (the
/// system's roots) and start an HTTP/1.1 client connection.
pub(super) async fn open_tls(
    addrs: &[std::net::SocketAddr],
    name: &str,
    tls: &Arc<rustls::ClientConfig>,
    limit: std::time::Duration,
) -> Result<(Upstream, std::net::SocketAddr), String> {
    let (stream, addr) = connect_tls(addrs, name, tls, limit, "upstream").await?;
    let (sender, conn) =
        hyper::client::conn::http1::handshake::<_, Incoming>(TokioIo::new(Gathered::new(stream)))
            .await
            .map_err(|e| format!("upstream: {e}"))?;
    tokio::spawn(conn);
    Ok((sender, addr))
}

/// Connect to the first reachable of `addrs` and verify the server as `name` over TLS (with
/// `tls`), each step within `limit`. `what` names the server in the errors ("upstream").
pub(super) async fn connect_tls(
    addrs: &[std::net::SocketAddr],
    name: &str,
    tls: &Arc<rustls::ClientConfig>,
    limit: std::time::Duration,
    what: &str,
) -> Result<
    (
        tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
        std::net::SocketAddr,
    ),
    String,
> {
    let (stream, addr) = connect(addrs, limit)
        .await
        .map_err(|e| format!("connect to the {what} {name}: {e}"))?;
    let server = rustls::pki_types::ServerName::try_from(name.to_owned())
        .map_err(|e| format!("the {what}'s name {name}: {e}"))?;
    let connector = tokio_rustls::TlsConnector::from(tls.clone());
    let stream = tokio::time::timeout(limit, connector.connect(server, stream))
        .await
        .map_err(|_| format!("TLS with the {what} {name} timed out"))?
        .map_err(|e| format!("TLS with the {what} {name}: {e}"))?;
    Ok((stream, addr))
}

/// A route's response body with the real value replaced ([`credential::Scrubber`]).
pub(super) struct Scrubbed {
    pub(super) inner: Counted,
    pub(super) scrub: credential::Scrubber,
    /// Released by the scrubber with the last frame, passed on next.
    pub(super) next: Option<bytes::Bytes>,
}

impl hyper::body::Body for Scrubbed {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, hyper::Error>>> {
        use std::task::Poll;
        if let Some(data) = self.next.take() {
            return Poll::Ready(Some(Ok(hyper::body::Frame::data(data))));
        }
        loop {
            let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
            let frame = match polled {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => frame,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    let rest = self.scrub.finish();
                    return Poll::Ready(if rest.is_empty() {
                        None
                    } else {
                        Some(Ok(hyper::body::Frame::data(rest.into())))
                    });
                }
            };
            let data = match frame.into_data() {
                Ok(data) => data,
                // Trailers are dropped: they are not masked.
                Err(_) => continue,
            };
            let (first, then) = self.scrub.push(data);
            match (first.is_empty(), then.is_empty()) {
                (true, true) => continue,
                (true, false) => return Poll::Ready(Some(Ok(hyper::body::Frame::data(then)))),
                (false, true) => return Poll::Ready(Some(Ok(hyper::body::Frame::data(first)))),
                (false, false) => {
                    self.next = Some(then);
                    return Poll::Ready(Some(Ok(hyper::body::Frame::data(first))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.next.is_none() && self.inner.is_end_stream() && !self.scrub.holds()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// The upstream's TLS stream as hyper reads it. rustls hands out one record (16 KiB at most)
/// per read; this read goes on taking what is already decrypted or waiting in the socket until
/// hyper's buffer is full or the socket has nothing more, so a large answer crosses hyper, the
/// masking ([`Scrubbed`]) and the client's socket in chunks of up to hyper's buffer instead of
/// one per record. The bytes and their one copy out of rustls are the same; nothing waits for
/// more than is there (a server-sent event goes on at once).
///
/// An error after some bytes were read is kept and returned by the next read, after those
/// bytes: a connection cut short is seen as such (never as a clean end).
pub(super) struct Gathered<S> {
    inner: S,
    failed: Option<std::io::Error>,
}

impl<S> Gathered<S> {
    pub(super) fn new(inner: S) -> Gathered<S> {
        Gathered {
            inner,
            failed: None,
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Gathered<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        if let Some(e) = self.failed.take() {
            return Poll::Ready(Err(e));
        }
        let start = buf.filled().len();
        while buf.remaining() > 0 {
            let before = buf.filled().len();
            match std::pin::Pin::new(&mut self.inner).poll_read(cx, buf) {
                // The end of the stream: what was gathered now, the end again on the next read.
                Poll::Ready(Ok(())) if buf.filled().len() == before => break,
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) if buf.filled().len() == start => return Poll::Ready(Err(e)),
                Poll::Ready(Err(e)) => {
                    self.failed = Some(e);
                    break;
                }
                Poll::Pending if buf.filled().len() == start => return Poll::Pending,
                Poll::Pending => break,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Gathered<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
