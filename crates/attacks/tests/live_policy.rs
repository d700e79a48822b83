//! Live policy (issue 18, item 8): `stockade run --control-fd N` changes the running proxy's
//! rules at once (and says a filesystem change applies to a next run), and `stockade proxy`
//! reloads its policy file on SIGHUP (a broken file keeps the old rules). Every change is in
//! the audit log. The destination is a loopback HTTP server on the host, which the proxy
//! refuses until an `allow_hosts` entry names it; the controls are the refusals before the
//! change (and after a failed reload).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use attacks::*;

/// A host HTTP server on loopback answering every request with `body`; its port.
fn http_server(body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer(stream, body));
        }
    });
    port
}

fn answer(mut s: TcpStream, body: &str) {
    let mut buf = [0u8; 4096];
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let _ = write!(
        s,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// The child's descriptor 3 becomes `fd` (its end of the control socket pair).
fn give_fd_3(cmd: &mut Command, fd: std::os::fd::RawFd) {
    // SAFETY: between fork and exec only dup2 (async-signal-safe) on a descriptor this
    // process owns and keeps open until the child has started.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn control_fd_changes_the_running_proxys_rules_at_once() {
    let fx = Fixture::new();
    let port = http_server("live-ok");
    let url = format!("http://127.0.0.1:{port}/");
    let audit = fx.out_file("audit.jsonl");
    let go = fx.ws.join("go");
    let script = format!(
        "curl -s -m 10 --noproxy '' -o /dev/null -w 'first=%{{http_code}}\\n' {url}; : > first-done; \
         while [ ! -e go ]; do sleep 0.1; done; \
         curl -s -m 10 --noproxy '' -w '\\nsecond=%{{http_code}}\\n' {url}"
    );
    let (ours, theirs) = UnixStream::pair().expect("a socket pair");
    let theirs_fd = std::os::fd::AsRawFd::as_raw_fd(&theirs);
    let mut cmd = Command::new(stockade_bin());
    cmd.args(["run", "--workspace"])
        .arg(&fx.ws)
        .args(["--net", "proxy", "--no-tty", "--control-fd", "3", "--audit"])
        .arg(&audit);
    cmd.args(attacks::backend_args());
    cmd.args(["--shell", &script])
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &fx.home)
        .envs(attacks::engine_store_env())
        .current_dir(&fx.ws)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    give_fd_3(&mut cmd, theirs_fd);
    let child = cmd.spawn().expect("start stockade run");
    drop(theirs);
    // Wait until the first request is done (the run's stdout is read at the end).
    let first = wait_until(
        || fx.ws.join("first-done").exists(),
        Duration::from_secs(60),
    );
    assert!(first, "the first request never ended");
    let line = format!(
        "{{\"allow_hosts\": [\"127.0.0.1:{port}\"], \"allow_write\": [\"{}\"]}}\n",
        fx.outside.display()
    );
    (&ours).write_all(line.as_bytes()).expect("send the change");
    let mut reply = String::new();
    BufReader::new(&ours)
        .read_line(&mut reply)
        .expect("read the reply");
    write_file(&go, "", 0o644);
    let out = child.wait_with_output().expect("the run ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let reply: serde_json::Value = serde_json::from_str(&reply).expect("a JSON reply");
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["applied"]["network"], "now", "{reply}");
    assert_eq!(reply["applied"]["filesystem"], "next run", "{reply}");
    // Control: the same request before the change was refused.
    assert!(stdout.contains("first=403"), "{stdout}");
    assert!(
        stdout.contains("live-ok") && stdout.contains("second=200"),
        "{stdout}"
    );
    let events = read_jsonl(&audit);
    assert!(
        events.iter().any(|e| e["event"] == "policy_change"
            && e["source"] == "control-fd"
            && e["applied"]["network"] == "now"),
        "{events:?}"
    );
}

#[test]
fn control_fd_refuses_an_invalid_change_and_keeps_the_rules() {
    let fx = Fixture::new();
    let (ours, theirs) = UnixStream::pair().expect("a socket pair");
    let theirs_fd = std::os::fd::AsRawFd::as_raw_fd(&theirs);
    let mut cmd = Command::new(stockade_bin());
    cmd.args(["run", "--workspace"])
        .arg(&fx.ws)
        .args(["--net", "proxy", "--no-tty", "--control-fd", "3"])
        .args(["--shell", "sleep 3"])
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &fx.home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    give_fd_3(&mut cmd, theirs_fd);
    let mut child = cmd.spawn().expect("start stockade run");
    drop(theirs);
    let mut reader = BufReader::new(&ours);
    for (line, code) in [
        ("{\"allow_domains\": [\"*.com\"]}\n", "E_POLICY_INVALID"),
        ("{\"mode\": \"host\"}\n", "E_POLICY_INVALID"),
        ("not json\n", "E_POLICY_INVALID"),
    ] {
        (&ours).write_all(line.as_bytes()).expect("send");
        let mut reply = String::new();
        reader.read_line(&mut reply).expect("reply");
        let reply: serde_json::Value = serde_json::from_str(&reply).expect("JSON");
        assert_eq!(reply["ok"], false, "{line}: {reply}");
        assert_eq!(reply["error"]["code"], code, "{line}: {reply}");
    }
    // Control: a valid line is applied.
    (&ours)
        .write_all(b"{\"allow_domains\": [\"example.com\"]}\n")
        .expect("send");
    let mut reply = String::new();
    reader.read_line(&mut reply).expect("reply");
    assert!(reply.contains("\"ok\":true"), "{reply}");
    let _ = child.wait();
}

#[test]
fn proxy_reloads_its_policy_on_sighup() {
    let fx = Fixture::new();
    let port = http_server("reloaded-ok");
    let policy = fx.out_file("proxy-policy.toml");
    write_file(
        &policy,
        "[network]\nallow_domains = [\"example.com\"]\n",
        0o644,
    );
    let audit = fx.out_file("proxy-audit.jsonl");
    let listen = {
        let l = TcpListener::bind("127.0.0.1:0").expect("a free port");
        l.local_addr().expect("addr")
    };
    let mut child = Command::new(stockade_bin())
        .args(["proxy", "--listen", &listen.to_string(), "--policy"])
        .arg(&policy)
        .arg("--audit")
        .arg(&audit)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &fx.home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start stockade proxy");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let until = |needle: &str| loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) if line.contains(needle) => return line,
            Ok(_) => continue,
            Err(_) => panic!("no line with {needle:?} from stockade proxy"),
        }
    };
    until("egress proxy on");
    let fetch = || {
        let out = Command::new("curl")
            .args(["-s", "-m", "10", "-w", "\ncode=%{http_code}", "-x"])
            .arg(format!("http://{listen}"))
            .arg(format!("http://127.0.0.1:{port}/"))
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let pid = child.id().to_string();
    let hup = || {
        Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .expect("kill -HUP");
    };
    // Control: not allowed yet.
    assert!(fetch().contains("code=403"));
    // A broken file: the reload fails and the rules stay.
    write_file(&policy, "[network\nallow_hosts = [\n", 0o644);
    hup();
    until("reload (SIGHUP) failed");
    assert!(fetch().contains("code=403"));
    // The host allowed: in force after the reload.
    write_file(
        &policy,
        format!("[network]\nallow_hosts = [\"127.0.0.1:{port}\"]\n"),
        0o644,
    );
    hup();
    until("reloaded the policy");
    let after = fetch();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        after.contains("reloaded-ok") && after.contains("code=200"),
        "{after}"
    );
    let events = read_jsonl(&audit);
    let changes: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "policy_change" && e["source"] == "SIGHUP")
        .collect();
    assert_eq!(changes.len(), 2, "{events:?}");
    assert!(changes[0]["refused"].is_string(), "{events:?}");
    assert!(changes[1]["refused"].is_null(), "{events:?}");
}
