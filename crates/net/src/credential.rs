//! Credential routes as the proxy holds them: the real value ([`Secret`]), the per-run
//! stand-in the sandbox holds instead ([`Token`]), and the pure steps of the reverse route
//! (which route a request is for, whether it carries the stand-in, what goes upstream).
//!
//! Inside the sandbox a route is `http://<proxy>/credential/<name>/...`; the proxy checks the
//! stand-in in constant time, removes it, puts the real value on the request (header or query
//! parameter, as the route says) and sends it over TLS to the route's upstream, and nowhere
//! else: the client's `Host` header, an absolute URL and the path cannot change the upstream.

use std::fmt;
use std::sync::Arc;

use policy::credentials::{Inject, Upstream, ROUTE_PREFIX};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// A credential's real value: held on the host only, wiped from memory when dropped, never
/// printed (`Debug` shows `<redacted>`).
pub struct Secret(Zeroizing<String>);

impl Secret {
    /// A real value read from its source. Refused when empty, or holding characters a header
    /// cannot carry (a line break would split the request).
    pub fn new(value: Zeroizing<String>) -> Result<Secret, &'static str> {
        if value.is_empty() {
            return Err("the value is empty");
        }
        if value.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err("the value holds a control character (a line break inside it?)");
        }
        Ok(Secret(value))
    }

    /// The value, to put on an upstream request.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Prefix of every stand-in, so one is recognisable in logs and bug reports.
pub const TOKEN_PREFIX: &str = "stockade-standin-";

/// A per-run stand-in: 256 bits, hex, after [`TOKEN_PREFIX`]. A run's route stand-ins keep 176
/// of them random per run; the last 80 (20 hex digits) are the same in every run of the user
/// for that route (an agent remembers an approved key by its tail: stockade's `credentials`).
#[derive(Clone)]
pub struct Token(Zeroizing<String>);

impl Token {
    /// A stand-in made from 32 random bytes.
    pub fn from_random(bytes: [u8; 32]) -> Token {
        let mut s = Zeroizing::new(String::with_capacity(TOKEN_PREFIX.len() + 64));
        s.push_str(TOKEN_PREFIX);
        for b in bytes {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 15)]));
        }
        Token(s)
    }

    /// The stand-in, as the sandbox gets it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` is this stand-in. Time depends only on the lengths (a stand-in's
    /// length is public), never on how many leading bytes match.
    pub fn matches(&self, candidate: &[u8]) -> bool {
        let own = self.0.as_bytes();
        own.len() == candidate.len() && bool::from(own.ct_eq(candidate))
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<per-run stand-in>)")
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// One route of a run.
#[derive(Debug)]
pub struct Route {
    pub name: String,
    pub upstream: Upstream,
    pub inject: Inject,
    pub token: Token,
    pub secret: Secret,
    /// Paths refused on the route (see [`policy::credentials::Route::deny_paths`]).
    pub deny_paths: Vec<String>,
}

pub mod ca;
pub mod oauth;

/// A masked credential of a run: at its hosts, the sentinel in request headers becomes the
/// real value.
pub struct Masked {
    pub name: String,
    /// `(host, port)`: normalized hosts and their ports (443 unless the entry names one; see
    /// [`policy::credentials::Route::hosts`]).
    pub hosts: Vec<(String, u16)>,
    /// The built-in's API path (`/api/v4`): deny patterns are matched below it as well.
    pub api_prefix: String,
    /// What the sandbox holds: as long as the real value, random letters and digits.
    pub sentinel: Zeroizing<String>,
    pub secret: Secret,
    pub deny_paths: Vec<String>,
}

impl Masked {
    /// Whether the credential is used at `host:port` (an IPv6 host with or without brackets).
    pub fn serves(&self, host: &str, port: u16) -> bool {
        let bare = |h: &str| h.trim_start_matches('[').trim_end_matches(']').to_owned();
        let host = bare(host);
        self.hosts
            .iter()
            .any(|(h, p)| bare(h) == host && *p == port)
    }

    /// The deny pattern that refuses `path` on a host (matched as is and below the API path).
    pub fn denied(&self, path: &str) -> Option<&str> {
        let [prefix, _] = path_segments(&self.api_prefix);
        path_segments(path).iter().find_map(|segments| {
            denied_segments(&self.deny_paths, segments).or_else(|| {
                let below = segments
                    .strip_prefix(prefix.as_slice())
                    .filter(|_| !prefix.is_empty())?;
                denied_segments(&self.deny_paths, below)
            })
        })
    }
}

impl fmt::Debug for Masked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Masked")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

/// A run's credentials: reverse routes, masked credentials with the CA that serves their
/// hosts, and the TLS settings for the real upstreams.
#[derive(Debug, Clone)]
pub struct Routes {
    pub routes: Arc<Vec<Route>>,
    pub masked: Arc<Vec<Masked>>,
    pub ca: Option<Arc<ca::Ca>>,
    pub tls: Arc<rustls::ClientConfig>,
    /// OAuth logins on routes ([`oauth`]): the proxy answers their token hosts itself.
    pub logins: Arc<Vec<oauth::Login>>,
}

impl Routes {
    /// The routes and masked credentials (with a new CA for their hosts), with the system's
    /// trusted roots for the real upstreams (`SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured).
    /// Fails when no root can be loaded.
    pub fn new(routes: Vec<Route>, masked: Vec<Masked>) -> Result<Routes, String> {
        Routes::with_logins(routes, masked, Vec::new())
    }

    /// [`Routes::new`] with OAuth logins: the CA also signs their token hosts.
    pub fn with_logins(
        routes: Vec<Route>,
        masked: Vec<Masked>,
        logins: Vec<oauth::Login>,
    ) -> Result<Routes, String> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = rustls::RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            let why = found
                .errors
                .first()
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            return Err(format!(
                "no trusted root certificates could be loaded for the credential routes' upstreams{why} (install ca-certificates, or set SSL_CERT_FILE)"
            ));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS settings: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let ca = if masked.is_empty() && logins.is_empty() {
            None
        } else {
            let hosts: Vec<String> = masked
                .iter()
                .flat_map(|m| m.hosts.iter().map(|(h, _)| h.clone()))
                .chain(logins.iter().map(|l| l.token_host.clone()))
                .chain(
                    logins
                        .iter()
                        .filter_map(|l| l.api_host.clone().map(|(h, _)| h)),
                )
                .collect();
            Some(Arc::new(ca::Ca::new(&hosts)?))
        };
        Ok(Routes {
            routes: Arc::new(routes),
            masked: Arc::new(masked),
            ca,
            tls: Arc::new(tls),
            logins: Arc::new(logins),
        })
    }

    /// The OAuth login carried on route `name`.
    pub fn login(&self, name: &str) -> Option<&oauth::Login> {
        self.logins.iter().find(|l| l.route == name)
    }

    /// The OAuth login whose token host is `host:port`.
    pub fn login_at(&self, host: &str, port: u16) -> Option<&oauth::Login> {
        self.logins.iter().find(|l| l.answers(host, port))
    }

    /// The OAuth login whose client calls the API itself at `host:port`.
    pub fn login_api_at(&self, host: &str, port: u16) -> Option<&oauth::Login> {
        self.logins.iter().find(|l| l.serves_api(host, port))
    }

    /// The masked credentials used at `host:port`.
    pub fn masked_at<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> impl Iterator<Item = &'a Masked> + 'a {
        self.masked.iter().filter(move |m| m.serves(host, port))
    }

    /// The route a request path names, and the rest of the path (with its query).
    pub fn find<'a>(&self, path_and_query: &'a str) -> Option<(&Route, &'a str)> {
        let (name, rest) = split_route(path_and_query)?;
        let route = self.routes.iter().find(|r| r.name == name)?;
        Some((route, rest))
    }
}

/// `/credential/<name>/rest?q` → (`name`, `/rest?q`).
pub fn split_route(path_and_query: &str) -> Option<(&str, &str)> {
    let after = path_and_query.strip_prefix(ROUTE_PREFIX)?;
    let end = after.find(['/', '?']).unwrap_or(after.len());
    Some((&after[..end], &after[end..]))
}

/// What a request on a route carried where the route expects its stand-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presented {
    /// The stand-in of this run.
    Valid,
    /// Nothing where the stand-in goes.
    Missing,
    /// Something else, or more than one value.
    Wrong,
}

impl Presented {
    /// Why a request was refused, for the audit log.
    pub fn reason(self, route: &str) -> String {
        match self {
            Presented::Valid => String::new(),
            Presented::Missing => format!("the request on credential route `{route}` carried no stand-in"),
            Presented::Wrong => format!("the request on credential route `{route}` carried a value that is not this run's stand-in"),
        }
    }
}

/// Checks the stand-in where `inject` puts the real value: the header (its format around
/// it: `Bearer <token>`; the scheme compared without case) or the query parameter.
pub fn presented(route: &Route, headers: &hyper::HeaderMap, query: Option<&str>) -> Presented {
    match &route.inject {
        Inject::Header { name, format } => {
            let mut values = headers.get_all(name.as_str()).iter();
            let Some(value) = values.next() else {
                return Presented::Missing;
            };
            if values.next().is_some() {
                return Presented::Wrong;
            }
            let v = value.as_bytes();
            let (prefix, suffix) = format.split_once("{}").unwrap_or((format.as_str(), ""));
            let (p, s) = (prefix.as_bytes(), suffix.as_bytes());
            if v.len() < p.len() + s.len()
                || !v[..p.len()].eq_ignore_ascii_case(p)
                || &v[v.len() - s.len()..] != s
            {
                return Presented::Wrong;
            }
            judge(route.token.matches(&v[p.len()..v.len() - s.len()]))
        }
        Inject::Query { param } => {
            let mut found = query
                .unwrap_or("")
                .split('&')
                .filter_map(|pair| pair.split_once('=').filter(|(k, _)| k == param));
            match (found.next(), found.next()) {
                (None, _) => Presented::Missing,
                (Some((_, v)), None) => judge(route.token.matches(v.as_bytes())),
                (Some(_), Some(_)) => Presented::Wrong,
            }
        }
    }
}

fn judge(matched: bool) -> Presented {
    if matched {
        Presented::Valid
    } else {
        Presented::Wrong
    }
}

/// The origin-form target sent upstream: the upstream's path, then the rest of the client's
/// path; for a query route, the stand-in's parameter replaced by the real value. Dot segments
/// (also percent-encoded) are refused: they would leave the upstream's path.
pub fn upstream_target(route: &Route, rest: &str) -> Result<Zeroizing<String>, &'static str> {
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    if !path.is_empty() && !path.starts_with('/') {
        return Err("bad path");
    }
    check_path_spelling(path)?;
    if path
        .bytes()
        .any(|b| b == b'\\' || b == b'#' || !(0x21..0x7f).contains(&b))
    {
        return Err("bad path");
    }
    let mut target = Zeroizing::new(String::with_capacity(rest.len() + 64));
    target.push_str(&route.upstream.path);
    target.push_str(if path.is_empty() { "/" } else { path });
    let mut pairs: Vec<&str> = query.map(|q| q.split('&').collect()).unwrap_or_default();
    if let Inject::Query { param } = &route.inject {
        pairs.retain(|p| {
            let name = p.split_once('=').map_or(*p, |(k, _)| k);
            !decode_unreserved(name).eq_ignore_ascii_case(param)
        });
    }
    pairs.retain(|p| !p.is_empty());
    let inject = match &route.inject {
        Inject::Query { param } => Some(param),
        Inject::Header { .. } => None,
    };
    if !pairs.is_empty() || inject.is_some() {
        target.push('?');
        target.push_str(&pairs.join("&"));
        if let Some(param) = inject {
            if !pairs.is_empty() {
                target.push('&');
            }
            target.push_str(param);
            target.push('=');
            percent_encode(route.secret.expose(), &mut target);
        }
    }
    Ok(target)
}

/// Query-component encoding of a value: unreserved characters as they are.
fn percent_encode(value: &str, out: &mut String) {
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]).to_ascii_uppercase());
            out.push(char::from(HEX[usize::from(b & 15)]).to_ascii_uppercase());
        }
    }
}

/// Methods a route forwards. `TRACE` (echoes the request, real value included), `CONNECT`
/// and extension methods are refused.
pub fn method_allowed(method: &hyper::Method) -> bool {
    use hyper::Method;
    [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
        Method::OPTIONS,
    ]
    .contains(method)
}

/// Headers that carry credentials in the APIs the routes serve: removed from every request on
/// a route before the route's own is put on, so the command cannot send a key of its own
/// beside (or instead of) the user's.
pub const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "private-token",
    "job-token",
    "x-auth-token",
    "cookie",
];

/// The deny pattern that refuses `path` (the route's rest, without its query), if any.
/// Percent-encoded unreserved characters are decoded, runs of `/` count as one and letters
/// are compared without case, so another spelling of a path does not slip past.
pub fn denied_path<'a>(route: &'a Route, path: &str) -> Option<&'a str> {
    denied_by(&route.deny_paths, path)
}

/// The pattern of `deny_paths` that refuses `path` ([`denied_path`]), matched on the path's
/// segments as a server would read them ([`path_segments`]).
pub fn denied_by<'a>(deny_paths: &'a [String], path: &str) -> Option<&'a str> {
    path_segments(path)
        .iter()
        .find_map(|segments| denied_segments(deny_paths, segments))
}

/// The pattern whose segments start `segments`.
fn denied_segments<'a>(deny_paths: &'a [String], segments: &[String]) -> Option<&'a str> {
    deny_paths
        .iter()
        .find(|p| {
            let pattern: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
            pattern.len() <= segments.len()
                && pattern.iter().zip(segments).all(|(want, got)| {
                    *want == "*" || stems(got).any(|g| want.eq_ignore_ascii_case(g))
                })
        })
        .map(String::as_str)
}

/// A segment, then the same without each trailing `.format` in turn: API frameworks route
/// `keys.json` (GitLab's Grape, Rails) to the endpoint of `keys`, and Rails takes anything
/// but `/`, `.` and `?` as a format.
fn stems(segment: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(Some(segment), |s| match s.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && !ext.is_empty() => Some(stem),
        _ => None,
    })
}

/// A path's segments as servers may read them, in two spellings: `%2F` kept inside its
/// segment (GitLab's `group%2Fproject`), and `%2F` read as `/`. Everything else is
/// percent-decoded; a segment loses its `;parameters` and everything from a control
/// character, space, `#` or `?` on, and its trailing dots; letters are lower-cased; empty
/// segments (`//`) are dropped.
pub fn path_segments(path: &str) -> [Vec<String>; 2] {
    let kept = path.to_ascii_lowercase();
    let slashed = kept.replace("%2f", "/");
    [kept, slashed].map(|spelled| {
        spelled
            .split('/')
            .map(|raw| {
                let decoded = percent_decode_keeping_2f(raw);
                let seg = decoded.split(';').next().unwrap_or("");
                let end = seg
                    .find(|c: char| c.is_control() || c == ' ' || c == '#' || c == '?')
                    .unwrap_or(seg.len());
                seg[..end].trim_end_matches('.').to_owned()
            })
            .filter(|s| !s.is_empty())
            .collect()
    })
}

/// Percent-decoding, leaving `%2f` as it is (the caller decides what it is), lossy UTF-8.
fn percent_decode_keeping_2f(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                if v != b'/' {
                    out.push(v);
                    i += 3;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).to_lowercase()
}

/// Refuses a path a server could read as another (so a deny pattern would not see it): dot
/// segments (also percent-encoded), an encoded backslash, a backslash.
pub fn check_path_spelling(path: &str) -> Result<(), &'static str> {
    let lower = path.to_ascii_lowercase();
    if lower.contains("%5c") || lower.contains('\\') {
        return Err("a backslash in the path is refused with a credential");
    }
    let dot = |s: &str| {
        let s = s.replace("%2e", ".");
        let s = s.split(';').next().unwrap_or("");
        s == "." || s == ".."
    };
    if lower.replace("%2f", "/").split('/').any(dot) {
        return Err("`.` and `..` segments are refused with a credential");
    }
    Ok(())
}

/// `%XX` of an unreserved character (letters, digits, `-._~`) replaced by the character.
fn decode_unreserved(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                if v.is_ascii_alphanumeric() || b"-._~".contains(&v) {
                    out.push(char::from(v));
                    i += 3;
                    continue;
                }
            }
        }
        out.push(char::from(b[i]));
        i += 1;
    }
    out
}

/// Replaces every occurrence of a route's real value (as it is, and percent-encoded) in a
/// response by as many `X` (lengths, and so `Content-Length`, stay), across chunk boundaries.
///
/// What it passes on, and when, must not depend on the value except where a whole value was
/// found: the response can hold text the sandbox chose (an echo, a blob it stored), so
/// holding back "the start of the value" at the end of a chunk, or masking such a start at
/// the end of a body, would answer "does the value start with this guess?" byte by byte.
/// Instead the tail held back at the end of each chunk is decided without the value: the
/// bytes after the chunk's last control character (no value can hold one; a server-sent
/// event ends in `\n\n`, so it is passed on at once), at most [`Scrubber::cap`] of them (the
/// longest value's length rounded up to 256). A piece of a value that never completes is
/// passed on as it is, like any other text.
pub struct Scrubber {
    needles: Vec<Needle>,
    /// Held back from the end of the last chunk: no whole value is in it.
    held: Vec<u8>,
    /// Base64 characters still to mask at the start of the next chunk (the group that ends
    /// a base64 value found at the end of this one).
    pending: usize,
    /// The most bytes held back: at least the longest value's length less one, plus the
    /// group before a base64 value.
    cap: usize,
    /// Occurrences replaced so far.
    pub replaced: u64,
}

/// One spelling of a value, and how many base64 characters around it to mask as well.
struct Needle {
    bytes: Zeroizing<Vec<u8>>,
    /// A base64 spelling leaves out the groups at its edges, which mix the value's first and
    /// last bytes with what surrounds it (chosen by the sandbox); they are masked with it.
    before: usize,
    after: usize,
}

/// Bytes no value can hold (controls: [`Secret::new`] refuses them).
fn is_break(b: u8) -> bool {
    b < 0x20 || b == 0x7f
}

fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'='
}

/// The spellings an upstream may echo a value in: as it is; percent-encoded (reserved
/// characters) with upper- or lower-case hex; JSON-escaped (`\/`, and `\u00XX` for the
/// characters some encoders escape, in either case). Each is a pass over every chunk of a
/// response (when it differs from the others), so spellings no encoder makes of its own, such
/// as every byte percent-encoded, are left out.
fn spellings(value: &str) -> Vec<Zeroizing<String>> {
    let mut out = vec![Zeroizing::new(value.to_owned())];
    let mut reserved = Zeroizing::new(String::new());
    percent_encode(value, &mut reserved);
    let mut slash = Zeroizing::new(String::new());
    let mut unicode = Zeroizing::new(String::new());
    for b in value.bytes() {
        if b == b'/' {
            slash.push_str("\\/");
        } else {
            slash.push(char::from(b));
        }
        // What JSON encoders escape beyond quotes and backslashes: HTML-sensitive characters,
        // `+` (.NET) and `/`.
        if !b"\"\\/<>&'+`".contains(&b) {
            unicode.push(char::from(b));
        } else {
            unicode.push_str(&format!("\\u{:04X}", b));
        }
    }
    for upper in [reserved, unicode] {
        out.push(Zeroizing::new(hex_lower(&upper)));
        out.push(upper);
    }
    out.push(slash);
    out
}

/// `%XX` and `\uXXXX` escapes of a spelling with lower-case hex (nothing else changed).
fn hex_lower(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let digits = match (b[i], b.get(i + 1)) {
            (b'%', _) => 2,
            (b'\\', Some(b'u')) => 5,
            _ => 0,
        };
        let end = (i + 1 + digits).min(b.len());
        out.push(b[i]);
        out.extend(b[i + 1..end].iter().map(u8::to_ascii_lowercase));
        i = end;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Scrubber {
    pub fn new(route: &Route) -> Scrubber {
        Scrubber::of([&route.secret], false)
    }

    /// For these real values: in every spelling of [`spellings`] and, with `basic` (masked
    /// credentials, which may be put inside `Authorization: Basic`), base64-encoded at each
    /// of the three alignments. Spellings that are the same are searched once: a value of
    /// letters, digits, `-` and `_` has one.
    pub fn of<'a>(secrets: impl IntoIterator<Item = &'a Secret>, basic: bool) -> Scrubber {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut needles: Vec<Needle> = Vec::new();
        let mut add = |bytes: &[u8], before: usize, after: usize| {
            if bytes.len() >= 8 && !needles.iter().any(|m| *m.bytes == bytes) {
                needles.push(Needle {
                    bytes: Zeroizing::new(bytes.to_vec()),
                    before,
                    after,
                });
            }
        };
        for secret in secrets {
            for spelled in spellings(secret.expose()) {
                add(spelled.as_bytes(), 0, 0);
            }
            let raw = secret.expose().as_bytes();
            for pad in (0..3usize).filter(|_| basic) {
                let mut bytes = Zeroizing::new(vec![0u8; pad]);
                bytes.extend_from_slice(raw);
                let enc = Zeroizing::new(b64.encode(&*bytes));
                // The first group holds the padding, the last may depend on what follows:
                // both are masked around a match instead.
                let start = if pad == 0 { 0 } else { 4 };
                let end = enc.len().saturating_sub(4);
                if end > start {
                    add(&enc.as_bytes()[start..end], start, 4);
                }
            }
        }
        let longest = needles
            .iter()
            .map(|n| n.before + n.bytes.len())
            .max()
            .unwrap_or(0);
        Scrubber {
            cap: longest.saturating_sub(1).div_ceil(256) * 256,
            needles,
            held: Vec::new(),
            pending: 0,
            replaced: 0,
        }
    }

    /// The most bytes held back at the end of a chunk.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Passes `chunk` on: what is released now, in order (either may be empty). A chunk with
    /// no value in it, and not shorter than [`Scrubber::cap`], is passed on without a copy.
    pub fn push(&mut self, chunk: bytes::Bytes) -> (bytes::Bytes, bytes::Bytes) {
        let n = chunk.len();
        if n >= self.cap && self.pending == 0 && !self.spans(&chunk) && !self.contains(&chunk) {
            let hold = self.hold_len(&chunk);
            let released = bytes::Bytes::from(std::mem::take(&mut self.held));
            self.held = chunk[n - hold..].to_vec();
            return (released, chunk.slice(..n - hold));
        }
        let mut buf = std::mem::take(&mut self.held);
        let mut start = buf.len();
        buf.extend_from_slice(&chunk);
        // The end of a base64 value found at the end of the last chunk.
        while self.pending > 0 && start < buf.len() && is_base64(buf[start]) {
            buf[start] = b'X';
            start += 1;
            self.pending -= 1;
        }
        if start < buf.len() {
            self.pending = 0;
        }
        let (mut out, clean_from) = self.mask(&buf);
        let hold = self.hold_len(&buf[clean_from..]);
        out.truncate(buf.len() - hold);
        self.held = buf[buf.len() - hold..].to_vec();
        (bytes::Bytes::new(), bytes::Bytes::from(out))
    }

    /// The same for a slice, with everything released now in one piece.
    pub fn push_slice(&mut self, chunk: &[u8]) -> Vec<u8> {
        let (a, b) = self.push(bytes::Bytes::copy_from_slice(chunk));
        [a, b].concat()
    }

    /// Whether bytes are held back.
    pub fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// What is still held at the end of the body: no whole value, passed on as it is.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }

    /// How much of the end of `buf` (which holds no whole value) to hold back: what follows
    /// its last break, at most `cap` bytes. Depends on `buf` and the values' lengths only.
    fn hold_len(&self, buf: &[u8]) -> usize {
        let tail = buf.len().min(self.cap);
        let region = &buf[buf.len() - tail..];
        match region.iter().rposition(|&b| is_break(b)) {
            Some(at) => tail - at - 1,
            None => tail,
        }
    }

    /// Whether `chunk` holds a whole value.
    fn contains(&self, chunk: &[u8]) -> bool {
        self.needles
            .iter()
            .any(|n| memchr::memmem::find(chunk, &n.bytes).is_some())
    }

    /// Whether a value starts in what is held and ends in `chunk` (it would end within `cap`
    /// bytes of it).
    fn spans(&self, chunk: &[u8]) -> bool {
        if self.held.is_empty() {
            return false;
        }
        let mut joint = self.held.clone();
        joint.extend_from_slice(&chunk[..chunk.len().min(self.cap)]);
        self.contains(&joint)
    }

    /// `buf` with every whole value replaced, and where the text after the last one starts.
    /// A base64 value's edge groups go with it; one cut off by the end of `buf` is finished
    /// on the next chunk ([`Scrubber::pending`]).
    fn mask(&mut self, buf: &[u8]) -> (Vec<u8>, usize) {
        let mut out = Vec::with_capacity(buf.len());
        let mut i = 0;
        while i < buf.len() {
            let next = self
                .needles
                .iter()
                .filter_map(|n| {
                    memchr::memmem::find(&buf[i..], &n.bytes)
                        .map(|at| (i + at, n.bytes.len(), n.before, n.after))
                })
                .min();
            let Some((at, len, before, after)) = next else {
                break;
            };
            out.extend_from_slice(&buf[i..at]);
            let edge = out
                .iter()
                .rev()
                .take(before)
                .take_while(|&&b| is_base64(b))
                .count();
            let from = out.len() - edge;
            out[from..].fill(b'X');
            out.resize(out.len() + len, b'X');
            self.replaced += 1;
            i = at + len;
            let tail = buf[i..]
                .iter()
                .take(after)
                .take_while(|&&b| is_base64(b))
                .count();
            out.resize(out.len() + tail, b'X');
            i += tail;
            self.pending = if i == buf.len() { after - tail } else { 0 };
        }
        out.extend_from_slice(&buf[i..]);
        (out, i)
    }

    /// Whether a header name (lower-cased by HTTP libraries) holds a value in any case.
    pub fn in_name(&self, name: &[u8]) -> bool {
        self.needles.iter().any(|n| {
            let lower = Zeroizing::new(n.bytes.to_ascii_lowercase());
            memchr::memmem::find(&name.to_ascii_lowercase(), &lower).is_some()
        })
    }

    /// A header value with every value replaced (`None`: unchanged).
    pub fn header(&mut self, value: &[u8]) -> Option<Vec<u8>> {
        if !self.contains(value) {
            return None;
        }
        let pending = self.pending;
        let masked = self.mask(value).0;
        self.pending = pending;
        Some(masked)
    }
}

/// At `host`, each sentinel of `masked` in a credential header ([`CREDENTIAL_HEADERS`], not
/// `cookie`) becomes its real value: as it is, and inside an `Authorization: Basic` pair (git sends `user:token` there). Sentinels of
/// credentials not used at `host` stay as they are. Returns the names of the credentials put
/// on the request.
pub fn unmask_headers<'a>(
    headers: &mut hyper::HeaderMap,
    host: &str,
    port: u16,
    masked: impl Iterator<Item = &'a Masked> + Clone,
) -> Vec<&'a str> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut used: Vec<&'a str> = Vec::new();
    for (name, value) in headers.iter_mut() {
        // Only where credentials go: a sentinel in any other header (one the server might
        // echo) stays a sentinel.
        if !CREDENTIAL_HEADERS.contains(&name.as_str()) || name == "cookie" {
            continue;
        }
        let bytes = value.as_bytes();
        let mut text: Option<Zeroizing<Vec<u8>>> = None;
        for m in masked.clone().filter(|m| m.serves(host, port)) {
            let current: &[u8] = text.as_deref().map_or(bytes, |t| t.as_slice());
            if let Some(replaced) =
                replace_all(current, m.sentinel.as_bytes(), m.secret.expose().as_bytes())
            {
                text = Some(replaced);
                used.push(&m.name);
                continue;
            }
            let basic = current.len() > 6 && current[..6].eq_ignore_ascii_case(b"basic ");
            if !basic {
                continue;
            }
            let Ok(decoded) = b64.decode(current[6..].trim_ascii()) else {
                continue;
            };
            let decoded = Zeroizing::new(decoded);
            if let Some(replaced) = replace_all(
                &decoded,
                m.sentinel.as_bytes(),
                m.secret.expose().as_bytes(),
            ) {
                let mut v = Zeroizing::new(b"Basic ".to_vec());
                v.extend_from_slice(Zeroizing::new(b64.encode(&*replaced)).as_bytes());
                text = Some(v);
                used.push(&m.name);
            }
        }
        if let Some(t) = text {
            if let Ok(mut v) = hyper::header::HeaderValue::from_bytes(&t) {
                v.set_sensitive(true);
                *value = v;
            }
        }
    }
    used.sort_unstable();
    used.dedup();
    used
}

/// `haystack` with every `needle` replaced (`None`: there was none).
fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    let mut found = memchr::memmem::find_iter(haystack, needle).peekable();
    found.peek()?;
    let mut out = Zeroizing::new(Vec::with_capacity(haystack.len() + with.len()));
    let mut last = 0;
    for at in found {
        if at < last {
            continue;
        }
        out.extend_from_slice(&haystack[last..at]);
        out.extend_from_slice(with);
        last = at + needle.len();
    }
    out.extend_from_slice(&haystack[last..]);
    Some(out)
}

/// The header value carrying the real value (`Bearer <value>`), marked sensitive.
pub fn header_value(
    format: &str,
    secret: &Secret,
) -> Result<hyper::header::HeaderValue, &'static str> {
    let text = Zeroizing::new(format.replacen("{}", secret.expose(), 1));
    let mut v = hyper::header::HeaderValue::from_str(&text)
        .map_err(|_| "the value cannot go in a header")?;
    v.set_sensitive(true);
    Ok(v)
}

#[cfg(test)]
mod tests;
