//! OAuth logins at the proxy (see [`crate::credential::oauth`]): the login's token host (where
//! the client inside sends its refreshes) is answered by the proxy itself over TLS with the
//! run's CA, and never reached: a tunnel to it is not admitted, resolved or connected. Only
//! `POST <token path>` with `grant_type=refresh_token` and this run's refresh stand-in is
//! answered, with fresh stand-ins; the real refresh, when one is due, goes to the login's
//! fixed endpoint. On the route, a request is refreshed for first when the real access token
//! has expired ([`renew`]). The login's API host (where Claude Code calls its API itself, not
//! through the base URL: its profile after a refresh) is answered the same way, each request
//! handled as one on the route: the stand-in checked, the real token put on, sent to the
//! route's fixed upstream.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::masked::accept_run_ca;
use super::reverse::{self, cut};
use super::{event, text, Body, Denial, Shared, CREDENTIAL_REFUSED};
use crate::credential::oauth::{self, Login};

const PROTOCOL: &str = "oauth";

/// Largest refresh request read, and largest token endpoint answer.
const MAX_BODY: usize = 64 * 1024;

/// Whether `host:port` is a login's token host or API host (answered here, never reached).
pub(super) fn intercepts(shared: &Shared, host: &str, port: u16) -> bool {
    shared.credentials.as_ref().is_some_and(|r| {
        r.ca.is_some() && (r.login_at(host, port).is_some() || r.login_api_at(host, port).is_some())
    })
}

fn record(shared: &Shared, host: &str, port: u16, rule: &str, refused: Option<String>) {
    let mut e = match &refused {
        None => event(PROTOCOL, host, port, Ok(rule), None, 0, 0),
        Some(reason) => event(
            PROTOCOL,
            host,
            port,
            Err(&Denial {
                rule: rule.to_owned(),
                reason: reason.clone(),
                hint: None,
                before_connect: true,
            }),
            None,
            0,
            0,
        ),
    };
    if refused.is_some() {
        e.code = CREDENTIAL_REFUSED;
    }
    shared.record(e);
}

/// A `CONNECT` to a token host: accepted, then served here.
pub(super) fn connect(
    req: Request<Incoming>,
    host: String,
    port: u16,
    shared: Arc<Shared>,
) -> Response<Body> {
    tokio::spawn(async move {
        let Ok(upgraded) = hyper::upgrade::on(req).await else {
            return;
        };
        let Ok(parts) = upgraded.downcast::<TokioIo<TcpStream>>() else {
            return;
        };
        serve(
            parts.io.into_inner(),
            parts.read_buf.to_vec(),
            host,
            port,
            shared,
        )
        .await;
    });
    Response::new(
        http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed(),
    )
}

/// Serve a tunnel to a token host (`first`: client bytes already read).
pub(super) async fn serve(
    mut client: TcpStream,
    mut first: Vec<u8>,
    host: String,
    port: u16,
    shared: Arc<Shared>,
) {
    let rule = "oauth token host".to_owned();
    let checked = match super::first_flight(&mut client, &mut first, shared.limits.handshake).await
    {
        Ok(()) => super::check_sni(&first, &host),
        Err(e) => Err(e),
    };
    if let Err(reason) = checked {
        record(&shared, &host, port, &rule, Some(reason));
        let _ = client.shutdown().await;
        return;
    }
    let Some(tls) = accept_run_ca(
        client,
        first,
        &host,
        &shared,
        "NODE_EXTRA_CA_CERTS / SSL_CERT_FILE",
        |reason| record(&shared, &host, port, &rule, Some(reason)),
    )
    .await
    else {
        return;
    };
    let s = shared.clone();
    let service = hyper::service::service_fn(move |req| {
        let (s, host) = (s.clone(), host.clone());
        async move {
            let api = s
                .credentials
                .as_ref()
                .and_then(|r| r.login_api_at(&host, port))
                .map(|l| l.route.clone());
            Ok::<_, Infallible>(match api {
                Some(route) => api_request(req, &route, s).await,
                None => token_request(req, &host, port, s).await,
            })
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(shared.limits.handshake)
        .serve_connection(TokioIo::new(tls), service)
        .await;
}

fn json(status: StatusCode, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)).map_err(|n| match n {}).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    r
}

/// An OAuth error answer (`{"error": ..., "error_description": "stockade: ..."}`).
fn oauth_error(status: StatusCode, error: &str, why: &str) -> Response<Body> {
    let body = serde_json::json!({"error": error, "error_description": format!("stockade: {why}")});
    let mut r = json(status, body.to_string().into_bytes());
    if let Ok(v) = hyper::header::HeaderValue::from_str(CREDENTIAL_REFUSED) {
        r.headers_mut().insert("x-stockade-code", v);
    }
    r
}

/// One request at a token host.
async fn token_request(
    req: Request<Incoming>,
    host: &str,
    port: u16,
    shared: Arc<Shared>,
) -> Response<Body> {
    let Some(routes) = shared.credentials.clone() else {
        return text(StatusCode::BAD_GATEWAY, "no credentials");
    };
    let Some(login) = routes.login_at(host, port) else {
        return text(StatusCode::BAD_GATEWAY, "no login");
    };
    let rule = format!("credential:{}", login.route);
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    if req.method() != hyper::Method::POST || path != login.token_path {
        let reason = format!(
            "{} {} at the token host of credential `{}`: only POST {} (a refresh) is answered, by stockade",
            req.method(),
            cut(path),
            login.route,
            login.token_path
        );
        record(&shared, host, port, &rule, Some(reason.clone()));
        return text(StatusCode::NOT_FOUND, &reason);
    }
    let content_type = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            let reason = "the refresh request's body could not be read (or is over 64 KiB)";
            record(&shared, host, port, &rule, Some(reason.into()));
            return oauth_error(StatusCode::BAD_REQUEST, "invalid_request", reason);
        }
    };
    let presented = match oauth::parse_refresh_request(content_type.as_deref(), &body) {
        Ok(t) => t,
        Err(why) => {
            record(&shared, host, port, &rule, Some(why.into()));
            return oauth_error(StatusCode::BAD_REQUEST, "invalid_request", why);
        }
    };
    if !login.is_refresh_standin(&presented) {
        let reason = format!(
            "a refresh at the token host of credential `{}` without this run's refresh stand-in",
            login.route
        );
        record(&shared, host, port, &rule, Some(reason.clone()));
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", &reason);
    }
    if let Err((status, why)) = renew(&shared, &routes.tls, login, oauth::REFRESH_MARGIN_MS).await {
        record(&shared, host, port, &rule, Some(why.clone()));
        // The endpoint refused the refresh: the login is over. Anything else (unreachable,
        // an answer that is not a login) may pass: Claude Code is told to try again later
        // rather than to log out.
        return if status == StatusCode::BAD_REQUEST {
            oauth_error(status, "invalid_grant", &why)
        } else {
            oauth_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                &why,
            )
        };
    }
    match login.hand_out_for(&presented) {
        Ok(fresh) => {
            record(&shared, host, port, &rule, None);
            json(StatusCode::OK, oauth::answer(&fresh).to_vec())
        }
        Err(why) => {
            record(&shared, host, port, &rule, Some(why.clone()));
            oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", &why)
        }
    }
}

/// A request at the login's API host: one on the route (`/credential/<route>` and its path),
/// whatever its `Host` says.
async fn api_request(req: Request<Incoming>, route: &str, shared: Arc<Shared>) -> Response<Body> {
    let rest = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    if !rest.starts_with('/') {
        return text(StatusCode::BAD_REQUEST, "bad request target");
    }
    let path = format!("{}{route}{rest}", policy::credentials::ROUTE_PREFIX);
    super::reverse::request(req, path, shared).await
}

/// Makes the login's real access token good for `margin_ms` more: taken from the host's
/// login when the host renewed it since, else refreshed at the login's fixed endpoint (one
/// refresh at a time; a request that waited for another's finds it done).
pub(super) async fn renew(
    shared: &Shared,
    tls: &Arc<rustls::ClientConfig>,
    login: &Login,
    margin_ms: u64,
) -> Result<(), (StatusCode, String)> {
    if !login.expiring(margin_ms) {
        return Ok(());
    }
    let _one = login.refreshing.lock().await;
    if !login.expiring(margin_ms) || login.adopt_from_store(margin_ms) {
        return Ok(());
    }
    let rule = format!("credential:{}", login.route);
    let up = &login.endpoint;
    let previous = login.refresh_token();
    let answer = refresh_upstream(shared, tls, login).await;
    let (status, body, addr) = match answer {
        Ok(x) => x,
        Err(why) => {
            record(shared, &up.host, up.port, &rule, Some(why.clone()));
            return Err((StatusCode::BAD_GATEWAY, why));
        }
    };
    shared.record(event(
        PROTOCOL,
        &up.host,
        up.port,
        Ok(&rule),
        Some(addr),
        0,
        body.len() as u64,
    ));
    if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        let why = format!(
            "the token endpoint {} could not refresh credential `{}` now ({status}): try again later",
            up.host, login.route
        );
        return Err((StatusCode::BAD_GATEWAY, why));
    }
    if status != StatusCode::OK {
        let why = format!(
            "the token endpoint {} refused the refresh of credential `{}` ({status}): log in again with `claude` on the host",
            up.host, login.route
        );
        return Err((StatusCode::BAD_REQUEST, why));
    }
    let tokens = oauth::parse_refresh_answer(&body, &previous)
        .map_err(|why| (StatusCode::BAD_GATEWAY, why))?;
    match login.renewed(tokens) {
        Ok(None) => Ok(()),
        Ok(Some(not_saved)) => {
            let why = format!("the refreshed login was not saved on the host: {not_saved}");
            record(shared, &up.host, up.port, &rule, Some(why));
            Ok(())
        }
        Err(why) => Err((StatusCode::BAD_GATEWAY, why.to_owned())),
    }
}

/// `POST` the refresh to the login's endpoint over verified TLS: its status and body (at
/// most 64 KiB), and the address reached.
async fn refresh_upstream(
    shared: &Shared,
    tls: &Arc<rustls::ClientConfig>,
    login: &Login,
) -> Result<(StatusCode, Bytes, std::net::SocketAddr), String> {
    let up = &login.endpoint;
    let bare = up.host.trim_start_matches('[').trim_end_matches(']');
    let what = "token endpoint";
    let addrs = reverse::resolve(shared, bare, up.port, what).await?;
    let (stream, addr) =
        reverse::connect_tls(&addrs, bare, tls, shared.limits.connect, what).await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream))
            .await
            .map_err(|e| format!("token endpoint: {e}"))?;
    tokio::spawn(conn);
    let body = oauth::refresh_body(login);
    let path = if up.path.is_empty() { "/" } else { &up.path };
    let mut req = Request::post(path)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json")
        .header(hyper::header::ACCEPT_ENCODING, "identity")
        .body(Full::new(Bytes::copy_from_slice(&body)))
        .map_err(|e| format!("token endpoint request: {e}"))?;
    drop(body);
    super::set_https_host(req.headers_mut(), &up.host, up.port);
    let resp = tokio::time::timeout(std::time::Duration::from_secs(30), sender.send_request(req))
        .await
        .map_err(|_| format!("the token endpoint {bare} did not answer in 30 s"))?
        .map_err(|e| format!("token endpoint: {e}"))?;
    let status = resp.status();
    let body = Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|_| {
            format!("the token endpoint {bare}'s answer could not be read (or is over 64 KiB)")
        })?
        .to_bytes();
    Ok((status, body, addr))
}
