//! Networks that explain themselves, and loopback under the proxy (issue 31, items 4 and 5):
//!
//! - under `--net proxy` a dev server the run started on its own loopback is reachable from
//!   inside (`NO_PROXY` covers `localhost,127.0.0.1,::1,0.0.0.0,::`), also as the
//!   `http://0.0.0.0:P/` a dev server prints; control: with `NO_PROXY` emptied
//!   the request goes to the proxy, which refuses it, and its hint explains that loopback
//!   through the proxy is the host's, never offering the host's port as the way to a server
//!   inside;
//! - a run under `--net none` whose command tried the network ends with "network is off in this
//!   run" and the fix (`--hints`), and the report says what the kernel counted; control: a run
//!   that does not touch the network, and one that talks only to its own loopback, have no
//!   such line;
//! - an allowed CONNECT (or plain HTTP request) to an upstream that cannot be reached is
//!   reported with the host and the error (report, audit log, `--hints`); control: a reachable
//!   one is not;
//! - a refused domain a toolchain preset opens (pypi.org) names the preset; control: a domain
//!   no preset opens gets `--allow-domain`.
//!
//! Traffic goes only to loopback; the `--net none` test sends to 192.0.2.1 (TEST-NET-1) only
//! after checking that the namespace it runs in has nothing but loopback.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::net::TcpListener;

use attacks::{
    na, not_applicable, python3, read_json, read_jsonl, sh_quote, which, write_file, Fixture,
    Outcome, Records,
};
use serde_json::Value;

const UPSTREAM_FAILED: &str = "NET_UPSTREAM_FAILED";
const DENIED: &str = "E_NETWORK_DENIED";
const NETWORK_OFF: &str = "network is off in this run";

/// `None` (with a skip line) without curl or python3.
fn tools(what: &str) -> Option<std::path::PathBuf> {
    let py = python3(what)?;
    if which("curl").is_none() {
        println!("skipped: curl not installed: {what}");
        return None;
    }
    Some(py)
}

/// `stockade run OPTS... --shell SCRIPT` with `rec`'s report and audit log and `--hints`.
fn run(fx: &Fixture, rec: &Records, opts: &[&str], script: &str) -> Outcome {
    let mut all: Vec<&str> = opts.to_vec();
    all.extend(rec.opts());
    all.push("--hints");
    fx.attack(&all, script).outcome()
}

/// The report's and the audit log's network events.
fn events(rec: &Records) -> Vec<Value> {
    let report = read_json(&rec.report);
    let mut all: Vec<Value> = report["network"].as_array().cloned().unwrap_or_default();
    all.extend(
        read_jsonl(&rec.audit)
            .into_iter()
            .filter(|e| e["event"] == "network" && e.get("host").is_some()),
    );
    all
}

/// The `<stockade-hint>` block's lines on stderr.
fn hint_lines(out: &Outcome) -> Vec<String> {
    let err = &out.run.stderr;
    let Some(start) = err.find("<stockade-hint>") else {
        return Vec::new();
    };
    let end = err[start..]
        .find("</stockade-hint>")
        .map_or(err.len(), |e| start + e);
    err[start..end].lines().skip(1).map(str::to_owned).collect()
}

/// A loopback port nothing on the host listens on.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

// ---------------------------------------------------------------------------------------
// Item 4: the sandbox's own loopback under --net proxy

/// A dev server the run starts (`python3 -m http.server` on 127.0.0.1:8000) is reached by
/// plain `curl http://127.0.0.1:8000/` and `http://localhost:8000/` under `--net proxy`.
/// Control: the same request with `NO_PROXY` emptied (as before issue 31) goes to the proxy,
/// which refuses it (the host's loopback), and the hint says so: it never offers
/// `--allow-host 127.0.0.1:8000` as the way to the server inside, only as the separate grant
/// of the host's own port.
#[test]
fn a_dev_server_inside_is_reachable_under_the_proxy() {
    let Some(py) = tools("dev server under --net proxy") else {
        return;
    };
    let fx = Fixture::new();
    let marker = fx.marker("devserver");
    let www = fx.ws.join("www");
    write_file(&www.join("index.txt"), format!("{marker}\n"), 0o644);
    let rec = fx.records();
    let script = format!(
        "{py} -m http.server --bind 127.0.0.1 8000 --directory {www} >/dev/null 2>&1 & \
         for i in $(seq 100); do curl --noproxy '*' -s -o /dev/null http://127.0.0.1:8000/ && break; sleep 0.1; done; \
         echo \"NO_PROXY=$NO_PROXY\"; \
         curl -sS -f -m 5 http://127.0.0.1:8000/index.txt && echo by-address-ok; \
         curl -sS -f -m 5 http://localhost:8000/index.txt && echo by-name-ok; \
         NO_PROXY= no_proxy= curl -sS -f -m 5 http://127.0.0.1:8000/index.txt; echo \"old-way=$?\"; \
         kill $! 2>/dev/null; \
         if grep -q ' lo$' /proc/net/if_inet6 2>/dev/null; then echo has-v6; \
           {py} -m http.server --bind ::1 8001 --directory {www} >/dev/null 2>&1 & \
           for i in $(seq 100); do curl --noproxy '*' -g -s -o /dev/null 'http://[::1]:8001/' && break; sleep 0.1; done; \
           curl -g -sS -f -m 5 -o /dev/null 'http://[::1]:8001/index.txt' && echo v6-curl-ok; \
           kill $!; fi; exit 0",
        py = sh_quote(&py),
        www = sh_quote(&www),
    );
    let out = run(&fx, &rec, &["--net", "proxy"], &script);
    out.assert_ok();
    let stdout = &out.run.stdout;
    assert!(
        stdout.contains("NO_PROXY=localhost,127.0.0.1,::1,0.0.0.0,::"),
        "{}",
        out.run.describe()
    );
    for ok in ["by-address-ok", "by-name-ok"] {
        assert!(stdout.contains(ok), "{ok} missing\n{}", out.run.describe());
    }
    assert_eq!(stdout.matches(&marker).count(), 2, "{}", out.run.describe());
    // `[::1]` too, by curl (`::1` in NO_PROXY; never the bracketed form, which httpx cannot
    // parse: aider_agent.rs fails with it).
    if stdout.contains("has-v6") {
        assert!(
            stdout.contains("v6-curl-ok"),
            "v6-curl-ok missing\n{}",
            out.run.describe()
        );
    } else {
        println!("no ::1 inside: the IPv6 part is skipped");
    }
    // Control: through the proxy (NO_PROXY empty) the same URL is the host's loopback,
    // refused (curl -f: exit 22 on the 403).
    assert!(stdout.contains("old-way=22"), "{}", out.run.describe());
    let refused: Vec<Value> = events(&rec)
        .into_iter()
        .filter(|e| e["code"] == DENIED && e["host"] == "127.0.0.1" && e["port"] == 8000)
        .collect();
    assert!(refused.len() >= 2, "report and audit: {refused:#?}");
    for e in &refused {
        let hint = e["hint"].as_str().unwrap_or_default();
        assert!(
            hint.starts_with(
                "this went through the proxy, where loopback is the host's, not this sandbox's"
            ) && hint.contains("a server started inside the run is reached directly"),
            "{hint}"
        );
        let grant = "only to open the host's own port 8000 to the sandbox, a separate grant: `--allow-host 127.0.0.1:8000`";
        assert!(hint.contains(grant), "{hint}");
        assert_eq!(hint.matches("--allow-host").count(), 1, "{hint}");
    }
    let lines = hint_lines(&out);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("blocked: 127.0.0.1:8000 (http)")
                && l.contains(
                    "to allow: this went through the proxy, where loopback is the host's"
                )),
        "{lines:#?}\n{}",
        out.run.describe()
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("to allow: allow it with `--allow-host 127.0.0.1")),
        "{lines:#?}"
    );
}

/// The host's loopback stays an explicit grant that works as it did: with
/// `--allow-host 127.0.0.1:P` (a server on the host's port P), `127.0.0.1` leaves `NO_PROXY`
/// (that address is the host's, through the proxy) and plain `curl http://127.0.0.1:P/`
/// reaches the host's server, recorded; the sandbox's own server is still reached by
/// `localhost`. Control: without the grant the same request stays inside and reaches no
/// host server.
#[test]
fn an_explicit_grant_of_the_hosts_loopback_port_still_reaches_the_host() {
    let Some(py) = tools("host loopback grant") else {
        return;
    };
    let fx = Fixture::new();
    let marker = fx.marker("host-server");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let body = format!("{marker}\n");
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        // One request: the granted run's (the control's never comes).
        if let Ok((mut s, _)) = listener.accept() {
            let mut buf = [0u8; 2048];
            let _ = s.read(&mut buf);
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(reply.as_bytes());
        }
    });
    let inside = fx.marker("inside-server");
    let www = fx.ws.join("www");
    write_file(&www.join("index.txt"), format!("{inside}\n"), 0o644);
    let script = |p: u16| {
        format!(
            "{py} -m http.server --bind 127.0.0.1 8000 --directory {www} >/dev/null 2>&1 & \
             for i in $(seq 100); do curl --noproxy '*' -s -o /dev/null http://127.0.0.1:8000/ && break; sleep 0.1; done; \
             echo \"NO_PROXY=$NO_PROXY\"; curl -sS -m 5 http://127.0.0.1:{p}/; \
             curl -sS -f -m 5 http://localhost:8000/index.txt; kill $!; exit 0",
            py = sh_quote(&py),
            www = sh_quote(&www),
        )
    };
    // Control first: no grant, the request stays in the sandbox (nothing listens there).
    let rec = fx.records();
    let out = run(&fx, &rec, &["--net", "proxy"], &script(port));
    out.assert_ok().assert_lacks(&marker);
    assert!(
        out.run
            .stdout
            .contains("NO_PROXY=localhost,127.0.0.1,::1,0.0.0.0,::"),
        "{}",
        out.run.describe()
    );
    let allow = format!("127.0.0.1:{port}");
    let rec = fx.records();
    let out = run(
        &fx,
        &rec,
        &["--net", "proxy", "--allow-host", &allow],
        &script(port),
    );
    out.assert_ok();
    let _ = server.join();
    assert!(
        out.run
            .stdout
            .contains("NO_PROXY=localhost,::1,0.0.0.0,::\n")
            && out.run.stdout.contains(&marker)
            && out.run.stdout.contains(&inside),
        "{}",
        out.run.describe()
    );
    assert!(
        events(&rec)
            .iter()
            .any(|e| e["code"] == "NET_ALLOWED" && e["host"] == "127.0.0.1" && e["port"] == port),
        "{:#?}",
        events(&rec)
    );
}

/// A server on the host's loopback that answers `marker` to every request and counts them.
struct HostServer {
    port: u16,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl HostServer {
    fn start(marker: &str) -> Self {
        use std::io::{Read, Write};
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut all = vec![listener];
        // The same port on ::1 too, where the host has it: `[::]` is that loopback.
        all.extend(TcpListener::bind(("::1", port)).ok());
        for listener in all {
            let (hits, body) = (hits.clone(), format!("{marker}\n"));
            std::thread::spawn(move || {
                for mut s in listener.incoming().flatten() {
                    hits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let mut buf = [0u8; 2048];
                    let _ = s.read(&mut buf);
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(reply.as_bytes());
                }
            });
        }
        HostServer { port, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A dev server started as usual prints `http://0.0.0.0:P/` (or binds `::`); that URL, as
/// copied, reaches the server inside under `--net proxy` (`NO_PROXY` covers `0.0.0.0`, `::`,
/// `[::]`), by curl and by Python, and never the host's server on the same port. Through the
/// proxy (`NO_PROXY` emptied, the control) it is the host's loopback, refused, and the hint
/// says so and names the host's port as `127.0.0.1:P`, never `0.0.0.0:P`. The grant the old
/// hint named, `--allow-host 0.0.0.0:P` (which reached the host's server), is refused as a
/// policy entry (E_POLICY_INVALID) naming `127.0.0.1:P`; control: the host connecting to
/// `0.0.0.0:P` itself reaches its own loopback server (what that grant opened).
#[test]
fn a_dev_server_on_the_unspecified_address_is_reached_inside_never_the_hosts() {
    let Some(py) = tools("dev server on 0.0.0.0") else {
        return;
    };
    let fx = Fixture::new();
    let host_marker = fx.marker("host-server");
    let host = HostServer::start(&host_marker);
    let p = host.port;
    let marker = fx.marker("inside-server");
    let www = fx.ws.join("www");
    write_file(&www.join("index.txt"), format!("{marker}\n"), 0o644);
    let rec = fx.records();
    let script = format!(
        "if grep -q ' lo$' /proc/net/if_inet6 2>/dev/null; then echo has-v6; b=::; else b=0.0.0.0; fi; \
         {py} -m http.server --bind $b {p} --directory {www} >/dev/null 2>&1 & \
         for i in $(seq 100); do curl --noproxy '*' -s -o /dev/null http://127.0.0.1:{p}/ && break; sleep 0.1; done; \
         echo \"NO_PROXY=$NO_PROXY\"; \
         curl -sS -f -m 5 http://0.0.0.0:{p}/index.txt && echo zero-curl-ok; \
         {py} -c \"import urllib.request; print(urllib.request.urlopen('http://0.0.0.0:{p}/index.txt', timeout=5).read().decode())\" && echo zero-python-ok; \
         if [ $b = :: ]; then curl -g -sS -f -m 5 'http://[::]:{p}/index.txt' && echo any6-curl-ok; fi; \
         NO_PROXY= no_proxy= curl -sS -f -m 5 http://0.0.0.0:{p}/index.txt; echo \"old-way=$?\"; \
         kill $! 2>/dev/null; exit 0",
        py = sh_quote(&py),
        www = sh_quote(&www),
    );
    let out = run(&fx, &rec, &["--net", "proxy"], &script);
    out.assert_ok().assert_lacks(&host_marker);
    let stdout = &out.run.stdout;
    let mut oks = vec!["zero-curl-ok", "zero-python-ok"];
    if stdout.contains("has-v6") {
        oks.push("any6-curl-ok");
    } else {
        println!("no ::1 inside: the [::] part is skipped");
    }
    for ok in &oks {
        assert!(stdout.contains(ok), "{ok} missing\n{}", out.run.describe());
    }
    assert_eq!(
        stdout.matches(&marker).count(),
        oks.len(),
        "{}",
        out.run.describe()
    );
    // Control: through the proxy the same URL is the host's loopback: refused (curl -f: 22),
    // the hint naming the host's port by its loopback address.
    assert!(stdout.contains("old-way=22"), "{}", out.run.describe());
    assert_eq!(host.hits(), 0, "the host's server was reached");
    let refused: Vec<Value> = events(&rec)
        .into_iter()
        .filter(|e| e["code"] == DENIED && e["host"] == "0.0.0.0" && e["port"] == p)
        .collect();
    assert!(refused.len() >= 2, "report and audit: {refused:#?}");
    for e in &refused {
        let hint = e["hint"].as_str().unwrap_or_default();
        assert!(
            hint.starts_with("this went through the proxy, where loopback is the host's")
                && hint.contains(&format!("a separate grant: `--allow-host 127.0.0.1:{p}`"))
                && !hint.contains(&format!("0.0.0.0:{p}")),
            "{hint}"
        );
    }
    // The grant the old hint named is no policy entry.
    for entry in [format!("0.0.0.0:{p}"), format!("[::]:{p}")] {
        let got = fx
            .attack(
                &["--net", "proxy", "--allow-host", &entry],
                &format!("NO_PROXY= no_proxy= curl -sS -m 5 http://0.0.0.0:{p}/"),
            )
            .run();
        assert_ne!(got.code(), 0, "{}", got.describe());
        let all = got.all_output();
        assert!(
            all.contains("E_POLICY_INVALID")
                && all.contains("unspecified address")
                && all.contains(&format!("`127.0.0.1:{p}`")),
            "{}",
            got.describe()
        );
        assert!(!all.contains(&host_marker), "{}", got.describe());
    }
    assert_eq!(host.hits(), 0, "the host's server was reached");
    // Control: 0.0.0.0 as a destination is the connecting machine's loopback (the host's,
    // for the proxy): what `--allow-host 0.0.0.0:P` opened.
    let reached = std::net::TcpStream::connect(("0.0.0.0", p)).is_ok();
    assert!(reached, "the host's own 0.0.0.0:{p} did not connect");
    for _ in 0..50 {
        if host.hits() > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(host.hits(), 1);
}

/// Names the host resolves to loopback or to `0.0.0.0` (blocking hosts files), in a private
/// mount namespace whose `/etc/hosts` says so (root only). A refused name's hint names the
/// address, `--allow-host 127.0.0.1:P`, and says a grant of the name follows its DNS; a name
/// resolving to `0.0.0.0` is refused even when granted by name (it reached the host's
/// loopback). The address grant the hint names does not admit the name once it resolves
/// elsewhere (fd00::2, unique-local: the rebinding the name grant admits). Control: the
/// address grant reaches the host's server by address.
#[test]
fn a_name_resolving_to_loopback_gets_its_address_named_and_zero_is_never_reached() {
    if attacks::skip_unless_root("a private /etc/hosts") {
        return;
    }
    let Some(unshare) = which("unshare") else {
        println!("skipped: unshare not installed");
        return;
    };
    if which("curl").is_none() {
        println!("skipped: curl not installed");
        return;
    }
    let fx = Fixture::new();
    let host_marker = fx.marker("host-server");
    let host = HostServer::start(&host_marker);
    let p = host.port;
    let base = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let hosts = |lines: &str| {
        let path = fx.root.join(format!("hosts-{}", fx.marker("h")));
        write_file(&path, format!("{base}\n{lines}\n"), 0o644);
        vec![
            unshare.display().to_string(),
            "--mount".into(),
            "--".into(),
            "/bin/sh".into(),
            "-c".into(),
            r#"mount --bind "$1" /etc/hosts && shift && exec "$@""#.into(),
            "sh".into(),
            path.display().to_string(),
        ]
    };
    let (zero, lo) = ("zero.stockade.test", "lo.stockade.test");
    let curl = |name: &str| {
        format!("curl -sS -m 5 -o /dev/null -w '{name}=%{{http_code}}\\n' http://{name}:{p}/; ")
    };
    let prefix = hosts(&format!("0.0.0.0 {zero}\n127.0.0.1 {lo}"));
    let rec = fx.records();
    let mut opts = vec![
        "--net",
        "proxy",
        "--allow-domain",
        zero,
        "--allow-domain",
        lo,
        "--hints",
    ];
    opts.extend(rec.opts());
    let out = fx
        .attack(&opts, &format!("{}{}exit 0", curl(zero), curl(lo)))
        .under(&prefix)
        .outcome();
    out.assert_ok().assert_lacks(&host_marker);
    let hint_of = |name: &str| {
        events(&rec)
            .into_iter()
            .find(|e| e["code"] == DENIED && e["host"] == name)
            .map(|e| e["hint"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_else(|| panic!("no refusal of {name}: {}", out.run.describe()))
    };
    let grant = format!("a separate grant: `--allow-host 127.0.0.1:{p}`");
    let h = hint_of(zero);
    assert!(
        h.contains(&format!(
            "`{zero}` resolves to the unspecified address 0.0.0.0"
        )) && h.contains(&grant),
        "{h}"
    );
    let h = hint_of(lo);
    assert!(
        h.contains(&format!("`{lo}` resolves to 127.0.0.1"))
            && h.contains("would follow its DNS")
            && h.contains(&grant),
        "{h}"
    );
    // A name resolving to 0.0.0.0, granted by name: still never connected to.
    let grant_zero = format!("{zero}:{p}");
    let rec = fx.records();
    let mut opts = vec!["--net", "proxy", "--allow-host", &grant_zero];
    opts.extend(rec.opts());
    let out = fx.attack(&opts, &curl(zero)).under(&prefix).outcome();
    out.assert_ok().assert_lacks(&host_marker);
    assert!(
        out.run.stdout.contains(&format!("{zero}=403")),
        "{}",
        out.run.describe()
    );
    assert!(
        events(&rec)
            .iter()
            .any(|e| e["code"] == DENIED && e["rule"] == "ssrf:unspecified"),
        "{:#?}",
        events(&rec)
    );
    assert_eq!(host.hits(), 0, "the host's server was reached");
    // The address grant the hint names, with the name rebound to fd00::2: refused.
    let rebound = hosts(&format!("fd00::2 {lo}"));
    let addr_grant = format!("127.0.0.1:{p}");
    let rec = fx.records();
    let mut opts = vec![
        "--net",
        "proxy",
        "--allow-domain",
        lo,
        "--allow-host",
        &addr_grant,
    ];
    opts.extend(rec.opts());
    let out = fx.attack(&opts, &curl(lo)).under(&rebound).outcome();
    out.assert_ok();
    assert!(
        out.run.stdout.contains(&format!("{lo}=403")),
        "{}",
        out.run.describe()
    );
    assert!(
        events(&rec)
            .iter()
            .any(|e| e["code"] == DENIED && e["rule"] == "ssrf:unique_local"),
        "{:#?}",
        events(&rec)
    );
    // Control: the address grant reaches the host's server (127.0.0.1 leaves NO_PROXY).
    let out = fx
        .attack(
            &["--net", "proxy", "--allow-host", &addr_grant],
            &format!("curl -sS -m 5 http://127.0.0.1:{p}/"),
        )
        .under(&prefix)
        .outcome();
    out.assert_ok().assert_output_contains(&host_marker);
    assert_eq!(host.hits(), 1);
}

/// `http://stockade:P/` (the sandbox's hostname, as a server inside may print it) goes to
/// the proxy, which refuses it: the hint says it is the sandbox's own name and points at
/// `http://127.0.0.1:P/`, never `--allow-domain stockade`. Control: another single-label name
/// gets `--allow-domain`. Nothing is resolved (refused by the rules first).
#[test]
fn the_sandboxs_hostname_is_not_offered_as_a_domain() {
    if which("curl").is_none() {
        println!("skipped: curl not installed");
        return;
    }
    let fx = Fixture::new();
    let rec = fx.records();
    let out = run(
        &fx,
        &rec,
        &["--net", "proxy"],
        "curl -s -m 5 -o /dev/null http://stockade:8000/; curl -s -m 5 -o /dev/null http://stockadex:8000/; exit 0",
    );
    out.assert_ok();
    let lines = hint_lines(&out);
    assert!(
        lines.iter().any(|l| l.starts_with("blocked: stockade:8000")
            && l.contains("this sandbox's own hostname")
            && l.contains("http://127.0.0.1:8000/")
            && !l.contains("--allow-domain")),
        "{lines:#?}\n{}",
        out.run.describe()
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("blocked: stockadex:8000")
                && l.contains("`--allow-domain stockadex`")),
        "{lines:#?}\n{}",
        out.run.describe()
    );
}

// ---------------------------------------------------------------------------------------
// Item 5a: --net none says the network is off

/// A shell guard: refuses (status 99) unless the namespace has only `lo`.
const ONLY_LO: &str = r#"__ifs=$(awk -F: 'NR > 2 { gsub(/ /, "", $1); printf "%s ", $1 }' /proc/net/dev)
if [ "$__ifs" != "lo " ]; then echo "UNSAFE-NOT-SENT: interfaces here: $__ifs"; exit 99; fi
"#;

/// Under `--net none`, a command that tries names and connections (curl of a name, a
/// connection to an address) ends with "network is off in this run" and the fixes; the
/// report has the kernel's counts. Controls: a run that does not touch the network, and one
/// that talks only to a server on its own loopback, have neither.
#[test]
fn a_command_that_tried_the_network_under_none_is_told_it_is_off() {
    if not_applicable(&na::NETWORK_OFF) {
        return;
    }
    let Some(py) = tools("network is off") else {
        return;
    };
    let fx = Fixture::new();
    let rec = fx.records();
    let script = format!(
        "{ONLY_LO}curl -sS -m 5 http://example.test/; \
         {py} -c \"import socket; socket.create_connection(('192.0.2.1', 80), timeout=2)\"; exit 0",
        py = sh_quote(&py)
    );
    let out = run(&fx, &rec, &["--net", "none"], &script);
    out.assert_ok();
    assert!(
        !out.run.stdout.contains("UNSAFE-NOT-SENT"),
        "{}",
        out.run.describe()
    );
    let lines = hint_lines(&out);
    let line = lines
        .iter()
        .find(|l| l.starts_with(NETWORK_OFF))
        .unwrap_or_else(|| panic!("no `{NETWORK_OFF}` line\n{}", out.run.describe()));
    assert!(
        line.contains("(E_NETWORK_DENIED): the command tried to reach the network")
            && line.contains("`--preset pip`")
            && line.contains("`--net proxy --allow-domain DOMAIN`"),
        "{line}"
    );
    let report = read_json(&rec.report);
    let tries = &report["network_off"];
    assert!(
        tries["no_route"].as_u64().unwrap_or(0) + tries["lookups"].as_u64().unwrap_or(0) >= 2,
        "report: {report}"
    );

    // Controls: no network touched; only the sandbox's own loopback.
    let quiet = fx.records();
    let out = run(&fx, &quiet, &["--net", "none"], "echo nothing here");
    out.assert_ok();
    assert!(
        !out.run.stderr.contains(NETWORK_OFF),
        "{}",
        out.run.describe()
    );
    assert!(read_json(&quiet.report).get("network_off").is_none());
    let www = fx.ws.join("www");
    write_file(&www.join("index.txt"), "local\n", 0o644);
    let lo = fx.records();
    let script = format!(
        "{py} -m http.server --bind 127.0.0.1 8000 --directory {www} >/dev/null 2>&1 & \
         for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:8000/ && break; sleep 0.1; done; \
         curl -sS -f -m 5 http://127.0.0.1:8000/index.txt; kill $!; exit 0",
        py = sh_quote(&py),
        www = sh_quote(&www),
    );
    let out = run(&fx, &lo, &["--net", "none"], &script);
    out.assert_ok().assert_output_contains("local");
    assert!(
        !out.run.stderr.contains(NETWORK_OFF),
        "{}",
        out.run.describe()
    );
    assert!(read_json(&lo.report).get("network_off").is_none());
}

/// With a resolver on loopback (`nameserver 127.0.0.53`, systemd-resolved's), a lookup under
/// `--net none` finds nobody listening inside: counted as a name lookup (`Udp: NoPorts`) and
/// named so. The resolv.conf is bind-mounted in a mount namespace of stockade's own (the
/// host's file is never touched): root only. Control: a run that looks nothing up.
#[test]
fn a_lookup_to_a_loopback_resolver_under_none_is_named_a_lookup() {
    if not_applicable(&na::NETWORK_OFF)
        || not_applicable(&na::ENGINE_RESOLV_CONF)
        || attacks::skip_unless_root("a private resolv.conf")
    {
        return;
    }
    let (Some(unshare), Some(getent)) = (which("unshare"), which("getent")) else {
        println!("skipped: unshare or getent not installed");
        return;
    };
    let fx = Fixture::new();
    let conf = fx.root.join("resolv.conf");
    write_file(
        &conf,
        "nameserver 127.0.0.53\noptions timeout:1 attempts:1\n",
        0o644,
    );
    let prefix = [
        unshare.display().to_string(),
        "--mount".into(),
        "--".into(),
        "/bin/sh".into(),
        "-c".into(),
        r#"mount --bind "$1" /etc/resolv.conf && shift && exec "$@""#.into(),
        "sh".into(),
        conf.display().to_string(),
    ];
    let rec = fx.records();
    let mut opts = vec!["--net", "none", "--hints"];
    opts.extend(rec.opts());
    let script = format!("{} hosts example.test; exit 0", sh_quote(&getent));
    let out = fx.attack(&opts, &script).under(&prefix).outcome();
    out.assert_ok();
    let lines = hint_lines(&out);
    assert!(
        lines.iter().any(|l| l.starts_with(NETWORK_OFF)
            && l.contains(
                "name lookup(s) found no resolver (the host's, on loopback, is not inside)"
            )),
        "{lines:#?}\n{}",
        out.run.describe()
    );
    assert!(
        read_json(&rec.report)["network_off"]["lookups"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{}",
        read_json(&rec.report)
    );
    // Control: nothing looked up.
    let quiet = fx.records();
    let mut opts = vec!["--net", "none", "--hints"];
    opts.extend(quiet.opts());
    let out = fx.attack(&opts, "echo quiet").under(&prefix).outcome();
    out.assert_ok();
    assert!(
        !out.run.stderr.contains(NETWORK_OFF),
        "{}",
        out.run.describe()
    );
}

/// Under `--net proxy`, a tool that ignores the proxy variables (`curl --noproxy '*'`, a
/// connection to an address) is told it went around the proxy, and the report has the
/// kernel's counts. Control: the same URL through the proxy (refused by the rules) counts
/// nothing around it.
#[test]
fn a_command_that_went_around_the_proxy_is_told_so() {
    if not_applicable(&na::NETWORK_OFF) {
        return;
    }
    let Some(py) = tools("around the proxy") else {
        return;
    };
    let fx = Fixture::new();
    let rec = fx.records();
    let script = format!(
        "{ONLY_LO}curl --noproxy '*' -sS -m 5 http://example.test/; \
         {py} -c \"import socket; socket.create_connection(('192.0.2.1', 80), timeout=2)\"; exit 0",
        py = sh_quote(&py)
    );
    let out = run(&fx, &rec, &["--net", "proxy"], &script);
    out.assert_ok();
    assert!(
        !out.run.stdout.contains("UNSAFE-NOT-SENT"),
        "{}",
        out.run.describe()
    );
    let lines = hint_lines(&out);
    assert!(
        lines.iter().any(|l| l.starts_with(
            "went around the proxy (E_NETWORK_DENIED): the command tried to reach the network without the proxy"
        ) && l.contains("point the tool at the proxy")),
        "{lines:#?}\n{}",
        out.run.describe()
    );
    assert!(
        !lines.iter().any(|l| l.starts_with(NETWORK_OFF)),
        "{lines:#?}"
    );
    let report = read_json(&rec.report);
    assert!(report.get("network_off").is_none(), "{report}");
    assert!(
        report["network_around_proxy"]["no_route"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{report}"
    );
    // Control: through the proxy.
    let via = fx.records();
    let out = run(
        &fx,
        &via,
        &["--net", "proxy"],
        "curl -sS -m 5 http://example.test/; exit 0",
    );
    out.assert_ok();
    assert!(
        !out.run.stderr.contains("went around the proxy"),
        "{}",
        out.run.describe()
    );
    assert!(read_json(&via.report).get("network_around_proxy").is_none());
}

/// `pip download` under `--net none` (pip retries its lookups, then fails with no word of
/// why): the run ends with "network is off in this run". Skipped without python3's pip.
#[test]
fn pip_under_none_is_told_the_network_is_off() {
    if not_applicable(&na::NETWORK_OFF) {
        return;
    }
    let Some(py) = tools("pip under --net none") else {
        return;
    };
    let fx = Fixture::new();
    let has_pip = fx
        .host(&format!("{} -m pip --version", sh_quote(&py)))
        .run()
        .code()
        == 0;
    if !has_pip {
        println!("skipped: python3 has no pip");
        return;
    }
    let rec = fx.records();
    let script = format!(
        "{ONLY_LO}{} -m pip download --no-deps --retries 0 --timeout 3 -d /tmp/dl x; exit 0",
        sh_quote(&py)
    );
    let out = run(&fx, &rec, &["--net", "none"], &script);
    out.assert_ok();
    assert!(
        hint_lines(&out).iter().any(|l| l.starts_with(NETWORK_OFF)),
        "{}",
        out.run.describe()
    );
    assert!(read_json(&rec.report).get("network_off").is_some());
}

// ---------------------------------------------------------------------------------------
// Item 5b: an allowed upstream that cannot be reached

/// `--allow-host 127.0.0.1:P` with nothing listening on the host's port P: the CONNECT is
/// answered (the tunnel opens, then closes) and the plain request gets a 502; both are
/// reported with the host and the error in the report, the audit log and `--hints`.
/// Control: with a server on P, no such event.
#[test]
fn an_unreachable_upstream_after_an_allowed_connect_is_reported() {
    if tools("unreachable upstream").is_none() {
        return;
    }
    let fx = Fixture::new();
    let port = closed_port();
    let allow = format!("127.0.0.1:{port}");
    let rec = fx.records();
    let script = format!(
        "curl --noproxy '' -sS -k -m 5 https://127.0.0.1:{port}/; echo connect=$?; \
         curl --noproxy '' -sS -m 5 http://127.0.0.1:{port}/; echo http=$?; exit 0"
    );
    let out = run(
        &fx,
        &rec,
        &["--net", "proxy", "--allow-host", &allow],
        &script,
    );
    out.assert_ok();
    let failed: Vec<Value> = events(&rec)
        .into_iter()
        .filter(|e| e["code"] == UPSTREAM_FAILED)
        .collect();
    for protocol in ["connect", "http"] {
        let these: Vec<&Value> = failed
            .iter()
            .filter(|e| e["protocol"] == protocol && e["host"] == "127.0.0.1" && e["port"] == port)
            .collect();
        assert_eq!(
            these.len(),
            2,
            "{protocol} in the report and the audit log: {failed:#?}"
        );
        for e in these {
            let reason = e["reason"].as_str().unwrap_or_default();
            assert!(
                reason.contains(&format!("127.0.0.1:{port}")) && reason.contains("refused"),
                "{reason}"
            );
        }
        let lines = hint_lines(&out);
        let want = format!("unreachable: 127.0.0.1:{port} ({protocol}) ({UPSTREAM_FAILED}): allowed, but unreachable from the host");
        assert!(
            lines.iter().any(|l| l.starts_with(&want)),
            "{want}\n{lines:#?}\n{}",
            out.run.describe()
        );
    }
    // Control: something listens on the port now.
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the port again");
    let served = std::thread::spawn(move || {
        use std::io::{Read, Write};
        if let Ok((mut s, _)) = listener.accept() {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nup\n",
            );
        }
    });
    let rec = fx.records();
    let out = run(
        &fx,
        &rec,
        &["--net", "proxy", "--allow-host", &allow],
        &format!("curl --noproxy '' -sS -f -m 5 http://127.0.0.1:{port}/"),
    );
    out.assert_ok().assert_output_contains("up");
    let _ = served.join();
    assert!(
        events(&rec).iter().all(|e| e["code"] != UPSTREAM_FAILED),
        "{:#?}",
        events(&rec)
    );
    assert!(
        !out.run.stderr.contains("unreachable:"),
        "{}",
        out.run.describe()
    );
}

// ---------------------------------------------------------------------------------------
// Item 5c: a refused domain a preset opens names the preset

/// pypi.org and files.pythonhosted.org refused under `--net proxy` (no rule: refused before
/// any resolution, nothing leaves the host): the hint names `--preset pip`, which opens both,
/// in the report, the audit log, the 403 and `--hints`. Control: a domain no preset opens
/// gets `--allow-domain` and no preset.
#[test]
fn a_refused_domain_a_preset_opens_names_the_preset() {
    if tools("preset hint").is_none() {
        return;
    }
    let fx = Fixture::new();
    let rec = fx.records();
    let script = "curl -sS -i -m 5 http://pypi.org/simple/x/; \
                  curl -sS -m 5 https://files.pythonhosted.org/x; \
                  curl -sS -m 5 http://not-a-preset.invalid/; exit 0";
    let out = run(&fx, &rec, &["--net", "proxy"], script);
    out.assert_ok();
    let all = events(&rec);
    for host in ["pypi.org", "files.pythonhosted.org"] {
        let hints: Vec<&str> = all
            .iter()
            .filter(|e| e["code"] == DENIED && e["host"] == host)
            .map(|e| e["hint"].as_str().unwrap_or_default())
            .collect();
        assert!(hints.len() >= 2, "{host}: {all:#?}");
        for h in hints {
            assert!(
                h.contains("allow them all with `--preset pip`")
                    && h.contains(&format!("only this one: `--allow-domain {host}`")),
                "{h}"
            );
        }
    }
    assert!(
        out.run
            .stdout
            .to_ascii_lowercase()
            .contains("x-stockade-hint: ")
            && out.run.stdout.contains("`--preset pip`"),
        "the 403's hint\n{}",
        out.run.describe()
    );
    let lines = hint_lines(&out);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("blocked: pypi.org:80 (http)") && l.contains("`--preset pip`")),
        "{lines:#?}"
    );
    // Control: no preset opens it.
    let other: Vec<&str> = all
        .iter()
        .filter(|e| e["code"] == DENIED && e["host"] == "not-a-preset.invalid")
        .map(|e| e["hint"].as_str().unwrap_or_default())
        .collect();
    assert!(!other.is_empty(), "{all:#?}");
    for h in other {
        assert!(
            h.starts_with("allow it with `--allow-domain not-a-preset.invalid`")
                && !h.contains("--preset"),
            "{h}"
        );
    }
}
