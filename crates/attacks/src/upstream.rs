//! A local HTTPS upstream for the credential routes' tests: a CA of its own (its certificate
//! in a file, for `SSL_CERT_FILE`), a server certificate for `127.0.0.1`, and a record of every
//! request it received (method, target, headers). It answers JSON (`{"ok":true}`), or
//! server-sent events when the target contains `stream`, or a Messages API reply when the
//! target is `/v1/messages` (see [`Script`]); `/echo` reflects the key it got, `/big/N` sends N
//! bytes. Loopback only, or a test network's server side ([`Upstream::files_on`], a static
//! site such as a package registry's double).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// One request as the upstream saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub target: String,
    /// Names lower-case, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A CA of the test's own and a server certificate for `127.0.0.1` and `localhost` (or other
/// names) signed by it, as files (PEM) under a directory readable by every user, and as DER.
pub struct TestCerts {
    pub ca_file: PathBuf,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub cert_der: Vec<u8>,
    pub key_der: Vec<u8>,
    pub dir: tempfile::TempDir,
}

#[allow(clippy::unwrap_used, clippy::expect_used)]
impl TestCerts {
    pub fn new() -> TestCerts {
        TestCerts::for_names(&["127.0.0.1", "localhost"])
    }

    /// The same with a server certificate for `names`.
    pub fn for_names(names: &[&str]) -> TestCerts {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "stockade test upstream CA");
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let params = rcgen::CertificateParams::new(names).unwrap();
        let cert = params.signed_by(&key, &ca).unwrap();
        let dir = tempfile::Builder::new()
            .prefix("stockade-test-certs.")
            .tempdir_in("/var/tmp")
            .unwrap();
        let (ca_file, cert_file, key_file) = (
            dir.path().join("ca.pem"),
            dir.path().join("cert.pem"),
            dir.path().join("key.pem"),
        );
        std::fs::write(&ca_file, ca.pem()).unwrap();
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        // Readable by the unprivileged test user's stockade and servers too.
        crate::chmod(dir.path(), 0o755);
        for f in [&ca_file, &cert_file, &key_file] {
            crate::chmod(f, 0o644);
        }
        TestCerts {
            ca_file,
            cert_file,
            key_file,
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
            dir,
        }
    }
}

impl Default for TestCerts {
    fn default() -> Self {
        TestCerts::new()
    }
}

/// Answers for `/v1/messages` and `/v1/responses` (a test double of the model APIs): the body
/// for each request, sent as server-sent events when the request asks for a stream (always for
/// `/v1/responses`).
pub type Script = Arc<dyn Fn(&Seen) -> Vec<u8> + Send + Sync>;

/// A running upstream (it ends with the test process).
pub struct Upstream {
    pub port: u16,
    /// The CA's certificate (PEM): give it to stockade as `SSL_CERT_FILE`.
    pub ca_file: PathBuf,
    seen: Arc<Mutex<Vec<Seen>>>,
    _dir: tempfile::TempDir,
}

#[allow(clippy::unwrap_used, clippy::expect_used)]
impl Upstream {
    pub fn start() -> Upstream {
        Upstream::start_with(None)
    }

    /// With `script` answering `/v1/messages`.
    pub fn start_with(script: Option<Script>) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        Upstream::serve_on(listener, TestCerts::new(), Answers::Double(script))
    }

    /// A static site on `listener` for the host `names` (a certificate for them): a `GET` of
    /// a path in `files` gets its bytes, anything else a 404.
    pub fn files_on(
        listener: TcpListener,
        names: &[&str],
        files: HashMap<String, Vec<u8>>,
    ) -> Upstream {
        let certs = TestCerts::for_names(names);
        Upstream::serve_on(listener, certs, Answers::Files(Arc::new(files)))
    }

    fn serve_on(listener: TcpListener, certs: TestCerts, answers: Answers) -> Upstream {
        let (cert, key) = (certs.cert_der.clone(), certs.key_der.clone());
        let (dir, ca_file) = (certs.dir, certs.ca_file);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.into()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.into()),
            )
            .unwrap();
        let config = Arc::new(config);
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (config, s, answers) = (config.clone(), s.clone(), answers.clone());
                std::thread::spawn(move || serve(stream, config, s, answers));
            }
        });
        Upstream {
            port,
            ca_file,
            seen,
            _dir: dir,
        }
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// An agent as the worker: `stockade run --policy P OPTS -- ARGV` in `fx`, where P makes
    /// this double the upstream of credential route `route` (its URL followed by `suffix`:
    /// `/v1` for openai), `key` is the (name, real value) of the route's variable on the
    /// host, and the proxy trusts the double's CA.
    pub fn worker(
        &self,
        fx: &crate::Fixture,
        route: (&str, &str),
        key: (&str, &str),
        opts: &[&str],
        argv: &[&str],
    ) -> crate::Run {
        self.worker_again(fx, route, key, opts, argv, || {})
    }

    /// [`Upstream::worker`], calling `again` before a second attempt under gVisor (see
    /// [`crate::Cmd::run_agent_again`]).
    pub fn worker_again(
        &self,
        fx: &crate::Fixture,
        (route, suffix): (&str, &str),
        (key_env, key): (&str, &str),
        opts: &[&str],
        argv: &[&str],
        again: impl FnOnce(),
    ) -> crate::Run {
        let policy = fx.out_file("worker-policy.toml");
        crate::write_file(
            &policy,
            format!(
                "[credentials.{route}]\nupstream = \"{}{suffix}\"\n",
                self.url()
            ),
            0o644,
        );
        let policy = policy.display().to_string();
        let mut all = vec!["--policy", policy.as_str()];
        all.extend_from_slice(opts);
        fx.sandbox_argv(&all, argv)
            .env(key_env, key)
            .env("SSL_CERT_FILE", &self.ca_file)
            .run_agent_again(std::time::Duration::from_secs(180), again)
    }
}

/// What an [`Upstream`] answers.
#[derive(Clone)]
enum Answers {
    /// The model APIs' double (its script, if any) and the fixed test paths.
    Double(Option<Script>),
    /// A static site.
    Files(Arc<HashMap<String, Vec<u8>>>),
}

fn serve(
    tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
    seen: Arc<Mutex<Vec<Seen>>>,
    answers: Answers,
) {
    let script = match &answers {
        Answers::Double(script) => script.clone(),
        Answers::Files(_) => None,
    };
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let tls = rustls::StreamOwned::new(conn, tcp);
    let mut reader = BufReader::new(tls);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
            return;
        };
        let (method, target) = (method.to_string(), target.to_string());
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let len = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let req = Seen {
            method,
            target,
            headers,
            body,
        };
        if let Ok(mut s) = seen.lock() {
            s.push(req.clone());
        }
        let out = reader.get_mut();
        // The model APIs, and an OAuth token endpoint (a login's refreshes), answered by the
        // script.
        let model_api = req.target.starts_with("/v1/messages")
            || req.target.starts_with("/v1/responses")
            || req.target.starts_with("/v1/oauth/token");
        if let Answers::Files(files) = &answers {
            let ok = match files.get(&req.target) {
                Some(body) => bytes(out, "200 OK", site_type(&req.target, body), body),
                None => bytes(out, "404 Not Found", "text/plain", b"not found"),
            };
            if ok.is_err() {
                return;
            }
            continue;
        }
        let ok = match (&script, model_api) {
            (Some(script), true) => {
                let wants_stream = String::from_utf8_lossy(&req.body).contains("\"stream\":true")
                    || req.target.starts_with("/v1/responses");
                let answer = script(&req);
                if wants_stream {
                    sse(out, &[&answer])
                } else {
                    json(out, &answer)
                }
            }
            _ if req.target.contains("stream") => sse(
                out,
                &[
                    b"event: one\ndata: {\"n\":1}\n\n",
                    b"event: two\ndata: {\"n\":2}\n\n",
                ],
            ),
            _ if req.target.contains("big") => big(out, &req.target),
            _ if req.target.contains("echo") => echo(out, &req),
            _ if req.target.contains("gzip") => gzip(out, &req),
            _ if req.target.contains("reason") => reason(out, &req),
            _ => json(out, b"{\"ok\":true}"),
        };
        if ok.is_err() {
            return;
        }
    }
}

/// A static site's content type: a directory's page is HTML (PyPI's simple index), a body
/// that opens with `{` JSON, anything else bytes.
fn site_type(target: &str, body: &[u8]) -> &'static str {
    if target.ends_with('/') {
        "text/html"
    } else if body.starts_with(b"{") {
        "application/json"
    } else {
        "application/octet-stream"
    }
}

fn bytes(out: &mut impl Write, status: &str, kind: &str, body: &[u8]) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )?;
    out.write_all(body)?;
    out.flush()
}

fn json(out: &mut impl Write, body: &[u8]) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )?;
    out.write_all(body)?;
    out.flush()
}

/// Chunked server-sent events, each chunk flushed on its own.
fn sse(out: &mut impl Write, events: &[&[u8]]) -> std::io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    )?;
    out.flush()?;
    for e in events {
        write!(out, "{:x}\r\n", e.len())?;
        out.write_all(e)?;
        out.write_all(b"\r\n")?;
        out.flush()?;
    }
    out.write_all(b"0\r\n\r\n")?;
    out.flush()
}

/// `/echo`: the request's `x-api-key` and `authorization` back, in the body and in a
/// `location` header (an upstream that reflects what it was sent).
fn echo(out: &mut impl Write, req: &Seen) -> std::io::Result<()> {
    let key = req.header("x-api-key").unwrap_or("");
    let auth = req.header("authorization").unwrap_or("");
    let other = req.header("x-a").unwrap_or("");
    let body = format!("key={key} auth={auth} x-a={other} query={}", req.target);
    write!(
        out,
        "HTTP/1.1 200 OK\r\nlocation: https://elsewhere.invalid/?k={key}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}

/// `/gzip`: an answer with `content-encoding: gzip` whatever was asked (an upstream that
/// compresses anyway), its body the request's `x-api-key` (not really compressed: the point is
/// that a proxy cannot read what it claims to be).
fn gzip(out: &mut impl Write, req: &Seen) -> std::io::Result<()> {
    let body = req.header("x-api-key").unwrap_or("").to_string();
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}

/// `/reason`: the key it received (`x-api-key`, else `private-token`) in the status line's
/// text, after `OK`.
fn reason(out: &mut impl Write, req: &Seen) -> std::io::Result<()> {
    let key = req
        .header("x-api-key")
        .or_else(|| req.header("private-token"))
        .unwrap_or("");
    write!(out, "HTTP/1.1 200 OK {key}\r\ncontent-length: 2\r\n\r\nok")?;
    out.flush()
}

/// `/big/<bytes>`: that many bytes of `x`.
fn big(out: &mut impl Write, target: &str) -> std::io::Result<()> {
    let n: usize = target
        .rsplit('/')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {n}\r\n\r\n"
    )?;
    let chunk = vec![b'x'; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len());
        out.write_all(&chunk[..k])?;
        left -= k;
    }
    out.flush()
}
