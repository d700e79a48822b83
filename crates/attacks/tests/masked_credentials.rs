//! Masked credentials (`hosts = [...]`): for clients that cannot be pointed at a base URL.
//! Inside, the token variable holds a sentinel as long as the real value; the proxy answers
//! TLS to the credential's hosts with a per-run CA and puts the real value where the sentinel
//! is, for those hosts only.
//!
//! The server is a real git smart-HTTP server (`git http-backend` behind a small HTTPS server
//! that asks for Basic authentication: git's 401-then-authenticate flow), run by the test on
//! loopback with a CA of its own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use attacks::upstream::TestCerts;
use attacks::*;

const SERVER: &str = r#"
import base64, http.server, os, ssl, subprocess, sys
root, port, token, cert, key, log = sys.argv[1:7]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def any(self):
        auth = self.headers.get("Authorization", "")
        n = int(self.headers.get("Content-Length", 0) or 0)
        body = self.rfile.read(n) if n else b""
        password = ""
        if auth.startswith("Basic "):
            password = base64.b64decode(auth[6:]).decode(errors="replace").partition(":")[2]
        with open(log, "a") as f:
            f.write("%s %s password=%s\n" % (self.command, self.path, password))
        if password != token:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1", PATH_INFO=path,
                   QUERY_STRING=query, REQUEST_METHOD=self.command, REMOTE_USER="tester",
                   REMOTE_ADDR="127.0.0.1", CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   CONTENT_LENGTH=str(len(body)))
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
        head, _, rest = out.partition(sep)
        status, headers = 200, []
        for line in head.replace(b"\r\n", b"\n").split(b"\n"):
            k, _, v = line.decode().partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)
    do_GET = do_POST = any
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
open(log, "a").close()
server.serve_forever()
"#;

/// The git server: a bare repository with one commit, served on a free port.
struct GitServer {
    child: Child,
    port: u16,
    log: PathBuf,
    repo: PathBuf,
    certs: TestCerts,
}

impl Drop for GitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("free port: {e}"))
}

impl GitServer {
    fn start(fx: &Fixture, token: &str) -> GitServer {
        GitServer::start_on(fx, token, free_port())
    }

    fn start_on(fx: &Fixture, token: &str, port: u16) -> GitServer {
        let srv = fx.root.join("srv");
        mkdir(&srv);
        let repo = srv.join("repo.git");
        fx.host(&format!(
            "git clone -q --bare {} {} && git -C {} config http.receivepack true",
            sh_quote(&fx.ws),
            sh_quote(&repo),
            sh_quote(&repo)
        ))
        .run()
        .assert_success();
        let script = fx.script("git_server.py", SERVER);
        let certs = TestCerts::new();
        let log = fx.root.join("git-server.log");
        let child = Command::new("/usr/bin/python3")
            .arg(&script)
            .arg(&srv)
            .arg(port.to_string())
            .arg(token)
            .arg(&certs.cert_file)
            .arg(&certs.key_file)
            .arg(&log)
            .env_clear()
            .env("PATH", PATH)
            .env("HOME", &fx.home)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start the git server: {e}"));
        let mut child = child;
        // Ready when it has made its log (after it bound the port and loaded its key): a
        // connection alone could reach another process on the port (a server orphaned by a
        // killed run held 443, and this test then failed with the proxy's 502).
        let deadline = Instant::now() + Duration::from_secs(10);
        while !log.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the git server exited ({status}): is port {port} held by another process?");
            }
            assert!(Instant::now() < deadline, "the git server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        GitServer {
            child,
            port,
            log,
            repo,
            certs,
        }
    }

    fn url(&self) -> String {
        if self.port == 443 {
            return "https://127.0.0.1/repo.git".into();
        }
        format!("https://127.0.0.1:{}/repo.git", self.port)
    }

    fn log(&self) -> String {
        read_text(&self.log).unwrap_or_default()
    }

    fn head_subject(&self, fx: &Fixture) -> String {
        let run = fx
            .host(&format!(
                "git -C {} log -1 --format=%s main",
                sh_quote(&self.repo)
            ))
            .run();
        run.stdout.trim().to_owned()
    }
}

/// git with a credential helper that answers the token variable `var` (inside: the sentinel).
fn git(var: &str) -> String {
    format!(
        "git -c credential.helper= -c 'credential.helper=!f() {{ echo username=x-access-token; echo \"password=${var}\"; }}; f'"
    )
}

fn policy(fx: &Fixture, server: &GitServer) -> PathBuf {
    let p = fx.out_file("masked.toml");
    write_file(
        &p,
        format!(
            "[credentials.gitserver]\nhosts = [\"127.0.0.1:{port}\"]\ntoken_env = [\"GIT_TOKEN\"]\nsource = {{ env = \"REAL_GIT_TOKEN\" }}\n\
             [credentials.other]\nhosts = [\"203.0.113.7\"]\ntoken_env = [\"OTHER_TOKEN\"]\nsource = {{ env = \"REAL_OTHER_TOKEN\" }}\n\
             [network]\nallow_hosts = [\"127.0.0.1:{port}\"]\n",
            port = server.port
        ),
        0o644,
    );
    p
}

/// The run of `script` with the masked credentials' policy; `None` for a root caller under a
/// container engine, whose run is refused (checked here): its command runs as the workspace's
/// owner, a host user whose other processes could use the routes.
fn masked_run(
    fx: &Fixture,
    server: &GitServer,
    real: &str,
    other: &str,
    script: &str,
) -> Option<Run> {
    let p = policy(fx, server);
    let run = fx
        .attack(&["--policy", &p.display().to_string()], script)
        .env("REAL_GIT_TOKEN", real)
        .env("REAL_OTHER_TOKEN", other)
        .env("SSL_CERT_FILE", &server.certs.ca_file)
        .timeout(Duration::from_secs(60))
        .run();
    if attacks::refused_credential_routes(&run) {
        run.assert_lacks(real);
        assert!(!server.log().contains(real), "{}", server.log());
        return None;
    }
    Some(run)
}

fn assert_absent(dir: &Path, value: &str) {
    for f in walk(dir, &|_| false) {
        let bytes = read_bytes(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(value),
            "{} holds the real value",
            f.display()
        );
    }
}

#[test]
fn git_clones_and_pushes_over_https_with_a_token_it_never_holds() {
    let fx = Fixture::new();
    let real = format!("ghp_real{}", fx.id);
    let other = format!("glpat_other{}", fx.id);
    let server = GitServer::start(&fx, &real);
    let script = format!(
        "{git} clone -q {url} clone && cd clone && git config user.email a@b.invalid && git config user.name t \
         && echo change > pushed.txt && git add pushed.txt && git commit -q -m pushed-through-stockade \
         && {git} push -q origin HEAD:main && echo PUSHED\n\
         echo \"len=${{#GIT_TOKEN}} value=$GIT_TOKEN\"\n\
         cat .git/config; env",
        git = git("GIT_TOKEN"),
        url = server.url()
    );
    let Some(run) = masked_run(&fx, &server, &real, &other, &script) else {
        return;
    };
    let o = run.outcome();
    assert_eq!(o.ran(), 0, "{}\n{}", o.run.describe(), server.log());
    o.run.assert_stdout_contains("PUSHED");
    o.run.assert_lacks(&real);
    // The sentinel is as long as the real value.
    assert!(
        o.run.stdout.contains(&format!("len={} ", real.len())),
        "{}",
        o.run.describe()
    );
    assert_eq!(server.head_subject(&fx), "pushed-through-stockade");
    // git's flow: first without credentials (401), then with the real value.
    let log = server.log();
    assert!(
        log.contains("password= ") || log.contains("password=\n"),
        "{log}"
    );
    assert!(log.contains(&format!("password={real}")), "{log}");
    assert!(log.contains("POST /repo.git/git-receive-pack"), "{log}");
    assert_absent(&fx.ws, &real);
}

#[test]
fn on_the_default_port_clients_that_name_no_port_in_host_work_and_connection_cannot_drop_host() {
    // git, curl and gh name no port in `Host` on 443 (github.com, gitlab.com): inside TLS
    // that means 443, not 80.
    if skip_unless_root("binds port 443 on loopback") {
        return;
    }
    let fx = Fixture::new();
    let real = format!("ghp_real{}", fx.id);
    let other = format!("glpat_other{}", fx.id);
    let server = GitServer::start_on(&fx, &real, 443);
    let script = format!(
        "{git} ls-remote {url} >/dev/null && echo listed
         curl -sS -o /dev/null -w 'nohost=%{{http_code}}\n' -u \"x:$GIT_TOKEN\" -H 'Connection: host' {url}/nohost-probe",
        git = git("GIT_TOKEN"),
        url = server.url()
    );
    let Some(run) = masked_run(&fx, &server, &real, &other, &script) else {
        return;
    };
    let o = run.outcome();
    assert_eq!(o.ran(), 0, "{}\n{}", o.run.describe(), server.log());
    o.run.assert_stdout_contains("listed");
    // `Connection: host` would strip the Host checked: refused instead of sent on.
    o.run.assert_stdout_contains("nohost=421");
    let log = server.log();
    assert!(log.contains(&format!("password={real}")), "{log}");
    assert!(!log.contains("nohost-probe"), "sent on without Host: {log}");
}

#[test]
fn a_sentinel_is_never_replaced_at_another_credentials_host_or_anywhere_else() {
    let fx = Fixture::new();
    let real = format!("ghp_real{}", fx.id);
    let other = format!("glpat_other{}", fx.id);
    let server = GitServer::start(&fx, &real);
    // The other credential's sentinel, sent to this credential's host: it stays a sentinel,
    // so the clone is refused; then, as control, this credential's own sentinel works.
    let script = format!(
        "{laundered} ls-remote {url} >/dev/null 2>&1; echo laundered=$?\n{own} ls-remote {url} >/dev/null && echo own=ok",
        laundered = git("OTHER_TOKEN"),
        own = git("GIT_TOKEN"),
        url = server.url()
    );
    let Some(run) = masked_run(&fx, &server, &real, &other, &script) else {
        return;
    };
    let o = run.outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    assert!(
        !o.run.stdout.contains("laundered=0"),
        "{}",
        o.run.describe()
    );
    o.run.assert_stdout_contains("own=ok");
    let log = server.log();
    assert!(
        !log.contains(&other),
        "the other credential's real value reached this host:\n{log}"
    );
    assert!(log.contains(&format!("password={real}")), "control: {log}");
    o.run.assert_lacks(&real);
    o.run.assert_lacks(&other);
}

#[test]
fn without_the_run_ca_the_client_refuses_the_proxy_and_nothing_is_sent() {
    let fx = Fixture::new();
    let real = format!("ghp_real{}", fx.id);
    let server = GitServer::start(&fx, &real);
    // A client that does not trust the run's CA (its own empty bundle) cannot be fooled into
    // thinking it reached the host, and the host sees nothing.
    let script = format!(
        "GIT_SSL_CAINFO={ca} {git} ls-remote {url} >/dev/null 2>&1; echo client_rc=$?",
        ca = sh_quote(&server.certs.ca_file),
        git = git("GIT_TOKEN"),
        url = server.url()
    );
    let Some(run) = masked_run(&fx, &server, &real, "x-other-value-long-enough", &script) else {
        return;
    };
    let o = run.outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    assert!(
        !o.run.stdout.contains("client_rc=0"),
        "{}",
        o.run.describe()
    );
    assert!(
        !server.log().contains("repo.git"),
        "server log:\n{}",
        server.log()
    );
}
