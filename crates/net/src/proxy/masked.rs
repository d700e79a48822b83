//! Masked credentials at their hosts: a tunnel (CONNECT or SOCKS5, admitted by the rules as
//! any other) to a host of a masked credential is not spliced. The proxy answers the client's
//! TLS with a certificate from the run's CA (which the sandbox trusts and which can sign only
//! these hosts), reads its HTTP/1.1 requests, puts the real value where the sentinel is
//! ([`credential::unmask_headers`]: only credentials used at this host) and sends each request
//! over verified TLS to the host itself. Responses come back as they stream, with the real
//! values masked.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use super::reverse::{open_tls, scrubbed};
use super::{
    content_length, event, exchange, strip_hop_by_hop, text, when_done, Body, Denial, Shared,
    Tunnel, CREDENTIAL_REFUSED,
};
use crate::credential;

const PROTOCOL: &str = "masked";

/// Whether a tunnel to `host` is a masked credential's.
pub(super) fn applies(shared: &Shared, host: &str, port: u16) -> bool {
    shared
        .credentials
        .as_ref()
        .is_some_and(|r| r.ca.is_some() && r.masked_at(host, port).next().is_some())
}

/// Serve the tunnel `t` (its first bytes in `first`) as the masked credentials' host.
pub(super) async fn serve(client: TcpStream, first: Vec<u8>, t: Tunnel, shared: Arc<Shared>) {
    let Some(tls) = accept_run_ca(
        client,
        first,
        &t.host,
        &shared,
        "SSL_CERT_FILE / NODE_EXTRA_CA_CERTS",
        |reason| {
            refuse(&shared, &t, "masked credential".into(), reason);
        },
    )
    .await
    else {
        return;
    };
    let t = Arc::new(t);
    let s = shared.clone();
    let service = hyper::service::service_fn(move |req| {
        let (s, t) = (s.clone(), t.clone());
        async move { Ok::<_, Infallible>(request(req, &t, s).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(shared.limits.handshake)
        .serve_connection(TokioIo::new(tls), service)
        .await;
}

fn refuse(shared: &Shared, t: &Tunnel, rule: String, reason: String) -> String {
    let mut e = event(
        PROTOCOL,
        &t.host,
        t.port,
        Err(&Denial {
            rule,
            reason: reason.clone(),
            hint: None,
            before_connect: true,
        }),
        None,
        0,
        0,
    );
    e.code = CREDENTIAL_REFUSED;
    shared.record(e);
    reason
}

async fn request(req: Request<Incoming>, t: &Tunnel, shared: Arc<Shared>) -> Response<Body> {
    let Some(routes) = shared.credentials.clone() else {
        return text(StatusCode::BAD_GATEWAY, "no credentials");
    };
    if !credential::method_allowed(req.method()) {
        let reason = format!(
            "method {} is not forwarded to a masked credential's host",
            req.method()
        );
        let r = refuse(&shared, t, t.rule.clone(), reason);
        return text(StatusCode::METHOD_NOT_ALLOWED, &r);
    }
    let (mut parts, body) = req.into_parts();
    // Before the Host check: `Connection: host` would otherwise remove the header checked.
    strip_hop_by_hop(&mut parts.headers);
    let mut hosts = parts.headers.get_all(hyper::header::HOST).iter();
    let header = hosts.next().and_then(|h| h.to_str().ok()).unwrap_or("");
    // Inside TLS, a Host without a port means 443 (what git, curl and gh send).
    if hosts.next().is_some() || !crate::http::host_header_names(&t.host, t.port, header, 443) {
        let reason = format!("Host {header:?} does not match {}:{}", t.host, t.port);
        let r = refuse(
            &shared,
            t,
            "host header must match the request target".into(),
            reason,
        );
        return text(StatusCode::MISDIRECTED_REQUEST, &r);
    }
    // The upstream sees the host as the tunnel named it, in one spelling.
    super::set_https_host(&mut parts.headers, &t.host, t.port);
    parts.headers.remove("proxy-authorization");
    let used =
        credential::unmask_headers(&mut parts.headers, &t.host, t.port, routes.masked.iter());
    let path = parts.uri.path().to_owned();
    if !used.is_empty() {
        if let Err(reason) = credential::check_path_spelling(&path) {
            let r = refuse(
                &shared,
                t,
                format!("credential:{}", used.join(",")),
                reason.into(),
            );
            return text(StatusCode::BAD_REQUEST, &r);
        }
    }
    // Responses must be readable to be masked: no compression.
    parts.headers.insert(
        hyper::header::ACCEPT_ENCODING,
        hyper::header::HeaderValue::from_static("identity"),
    );
    // Whole answers only: a range of an echo could hold a piece of the value.
    if !used.is_empty() {
        parts.headers.remove(hyper::header::RANGE);
        parts.headers.remove(hyper::header::IF_RANGE);
    }
    for m in routes
        .masked_at(&t.host, t.port)
        .filter(|m| used.contains(&m.name.as_str()))
    {
        if let Some(pattern) = m.denied(&path) {
            let reason = format!(
                "{path} is refused with credential `{}` (deny_paths: {pattern}): it can mint or plant lasting credentials",
                m.name
            );
            let r = refuse(&shared, t, format!("credential:{}", m.name), reason);
            return text(StatusCode::FORBIDDEN, &r);
        }
    }
    let target = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    parts.uri = match target.parse() {
        Ok(u) => u,
        Err(_) => return text(StatusCode::BAD_REQUEST, "bad request target"),
    };
    parts.version = hyper::Version::HTTP_11;
    let rule = if used.is_empty() {
        t.rule.clone()
    } else {
        format!("credential:{}", used.join(","))
    };
    let sent_up = content_length(&parts.headers);
    let request = Request::from_parts(parts, body);
    let key = format!("masked/{}", t.host);
    let pooled = shared.pool.take(&key, t.port, &t.addrs);
    let bare = t.host.trim_start_matches('[').trim_end_matches(']');
    let limit = shared.limits.connect;
    let opened = exchange(
        pooled,
        || open_tls(&t.addrs, bare, &routes.tls, limit),
        request,
    )
    .await;
    let (sender, addr, resp) = match opened {
        Ok(x) => x,
        Err(e) => return text(StatusCode::BAD_GATEWAY, &e),
    };
    match resp {
        Ok(r) => {
            if let Some(refusal) = super::reverse::encoded(&r) {
                return text(StatusCode::BAD_GATEWAY, &refuse(&shared, t, rule, refusal));
            }
            let scrub = credential::Scrubber::of(
                routes.masked_at(&t.host, t.port).map(|m| &m.secret),
                true,
            );
            let (host, port) = (t.host.clone(), t.port);
            let record = event(PROTOCOL, &host, port, Ok(&rule), Some(addr), sent_up, 0);
            let done = when_done(shared, key, port, addr, sender, record);
            scrubbed(r, scrub, done)
        }
        Err(e) => text(StatusCode::BAD_GATEWAY, &format!("upstream: {e}")),
    }
}

/// Accept TLS from `client` (its first bytes in `first`) as `host`, with a certificate of the
/// run's CA, within the handshake limit. `None` when there is no CA (the client shut down),
/// or the certificate could not be made (the client shut down) or the client did not complete
/// TLS: `refused` gets why for these two, the latter naming `trust` (the variables it reads).
pub(super) async fn accept_run_ca(
    mut client: TcpStream,
    first: Vec<u8>,
    host: &str,
    shared: &Shared,
    trust: &str,
    refused: impl FnOnce(String),
) -> Option<tokio_rustls::server::TlsStream<Prefixed>> {
    let Some(ca) = shared.credentials.as_ref().and_then(|r| r.ca.clone()) else {
        let _ = client.shutdown().await;
        return None;
    };
    let config = match ca.server(host) {
        Ok(c) => c,
        Err(reason) => {
            refused(reason);
            let _ = client.shutdown().await;
            return None;
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let stream = Prefixed {
        prefix: first,
        at: 0,
        inner: client,
    };
    match tokio::time::timeout(shared.limits.handshake, acceptor.accept(stream)).await {
        Ok(Ok(s)) => Some(s),
        Ok(Err(e)) => {
            refused(format!(
                "the client did not complete TLS with the run's CA (does it trust {trust}?): {e}"
            ));
            None
        }
        Err(_) => None,
    }
}

/// The client's socket with the bytes already read from it (its ClientHello) first.
pub(super) struct Prefixed {
    pub(super) prefix: Vec<u8>,
    pub(super) at: usize,
    pub(super) inner: TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.prefix.len() {
            let n = buf.remaining().min(self.prefix.len() - self.at);
            let at = self.at;
            buf.put_slice(&self.prefix[at..at + n]);
            self.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
