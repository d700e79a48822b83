//! Streamable HTTP on a loopback address. Every request carries `Authorization: Bearer TOKEN`
//! (compared in constant time) or gets 401 before the MCP layer sees it; requests with an
//! `Origin` header (a browser page) and `Host` names other than loopback are refused by rmcp's
//! own checks (DNS rebinding).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use subtle::ConstantTimeEq;

use crate::{Config, Error, Sandbox};

/// Connections served at once.
const MAX_CONNECTIONS: usize = 64;
/// How long a connection may take to send a request's headers.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where the server listens, and the path of its endpoint.
#[derive(Debug, Clone)]
pub struct Listening {
    pub addr: SocketAddr,
    /// `http://ADDR/mcp`.
    pub url: String,
}

/// A fresh token: 256 random bits, hex.
pub fn new_token() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::Io {
        what: "make a token",
        cause: std::io::Error::other(e.to_string()),
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `header` (an `Authorization` value) is `Bearer TOKEN` for `token`.
fn authorized(header: Option<&hyper::header::HeaderValue>, token: &str) -> bool {
    let Some(value) = header.map(|h| h.as_bytes()) else {
        return false;
    };
    let Some(given) = value
        .strip_prefix(b"Bearer ")
        .or_else(|| value.strip_prefix(b"bearer "))
    else {
        return false;
    };
    bool::from(given.ct_eq(token.as_bytes()))
}

fn unauthorized() -> Response<BoxBody<Bytes, Infallible>> {
    let body = Full::new(Bytes::from_static(
        b"stockade mcp: a bearer token is required (Authorization: Bearer TOKEN; the token `stockade mcp --http` printed or was given)\n",
    ))
    .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer"),
    );
    response
}

/// Serve `config` over streamable HTTP on `listen` (a loopback address) until the process
/// ends. `token` must be at least 32 characters. `ready` is told the address once bound.
pub async fn serve_http(
    config: Config,
    listen: SocketAddr,
    token: String,
    ready: impl FnOnce(Listening),
) -> Result<(), Error> {
    if !listen.ip().is_loopback() {
        return Err(Error::Refused(format!(
            "stockade mcp listens on loopback addresses only (127.0.0.1, ::1), not {}: anyone who can reach it runs commands in your workspace",
            listen.ip()
        )));
    }
    if token.len() < 32 {
        return Err(Error::Refused(
            "the token must be at least 32 characters (leave STOCKADE_MCP_TOKEN unset for a random one)".into(),
        ));
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|cause| Error::Io {
            what: "listen",
            cause,
        })?;
    let addr = listener.local_addr().map_err(|cause| Error::Io {
        what: "read the listening address",
        cause,
    })?;
    let sandbox = Sandbox::new(config);
    // Loopback names only (DNS rebinding), and the address listened on (127.1.2.3 too).
    let own = match addr.ip() {
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    let http_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts([
            "localhost".to_string(),
            "127.0.0.1".into(),
            "::1".into(),
            "[::1]".into(),
            own,
        ])
        .enforce_origin_validation();
    let service: Arc<StreamableHttpService<Sandbox, LocalSessionManager>> = Arc::new(
        StreamableHttpService::new(move || Ok(sandbox.clone()), Default::default(), http_config),
    );
    let token: Arc<str> = token.into();
    ready(Listening {
        addr,
        url: format!("http://{addr}/mcp"),
    });
    let stop = crate::shutdown();
    tokio::pin!(stop);
    // Connections at once: any local user can connect without the token, and each holds a
    // descriptor; beyond the cap new ones wait in the listen backlog.
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => match s {
                Ok(s) => s,
                Err(_) => return Ok(()),
            },
            _ = &mut stop => return Ok(()),
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = &mut stop => return Ok(()),
        };
        let (stream, _) = match accepted {
            Ok(s) => s,
            // EMFILE and the like: the next accept may work, after a pause (not a busy loop).
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let service = service.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let handler =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let service = service.clone();
                    let token = token.clone();
                    async move {
                        let ok =
                            authorized(request.headers().get(hyper::header::AUTHORIZATION), &token);
                        let response = if !ok {
                            unauthorized()
                        } else if request.uri().path() != "/mcp" {
                            let mut r = Response::new(
                                Full::new(Bytes::from_static(b"not found\n")).boxed(),
                            );
                            *r.status_mut() = StatusCode::NOT_FOUND;
                            r
                        } else {
                            service.handle(request).await
                        };
                        Ok::<_, Infallible>(response)
                    }
                });
            // A connection that sends no request headers within the timeout is closed: idle
            // connections cannot hold the slots.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), handler)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_passes() {
        let token = "a".repeat(64);
        let h = |s: &str| hyper::header::HeaderValue::from_str(s).ok();
        assert!(authorized(h(&format!("Bearer {token}")).as_ref(), &token));
        assert!(!authorized(None, &token));
        assert!(!authorized(
            h(&format!("Bearer {}", "a".repeat(63))).as_ref(),
            &token
        ));
        assert!(!authorized(h(&format!("Bearer {token}a")).as_ref(), &token));
        assert!(!authorized(h(&format!("Basic {token}")).as_ref(), &token));
        assert!(!authorized(h("Bearer ").as_ref(), &token));
    }
}
