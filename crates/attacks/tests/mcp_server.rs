//! `stockade mcp` (issue 18, item 5) driven by a real MCP client: the official TypeScript SDK
//! (`@modelcontextprotocol/sdk`, installed by scripts/test under /var/tmp/stockade-tools) runs
//! `tests/mcp/client.mjs`, which lists the tools and makes the calls each test gives, over
//! stdio or streamable HTTP.
//!
//! What must hold: every tool works; every file tool stays beneath the workspace (`..`,
//! absolute paths and symlinks out of it are refused) and under the sandbox's own rules
//! (masked files stay hidden, protected paths cannot be written, each refusal named with what
//! would allow it); `execute` is a sandboxed run (secrets unreadable, network denials named);
//! concurrent calls are concurrent runs; HTTP needs the token. Each attack has its control:
//! the same path or command on the host reaches what the server refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use attacks::*;
use serde_json::{json, Value};

fn sdk() -> PathBuf {
    MCP_SDK.path()
}

fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.mjs")
}

/// The client run with `config`: its JSON output.
fn client(fx: &Fixture, config: Value) -> Value {
    let node = which("node").expect("node (Node.js) is needed for the MCP client tests");
    // The script is copied beside the fixture: the unprivileged pass cannot read the checkout.
    let script = fx.root.join("client.mjs");
    std::fs::copy(client_script(), &script).expect("copy the client script");
    let run = Cmd::new(node, &fx.root)
        .env("HOME", &fx.home)
        .arg(&script)
        .arg(sdk())
        .arg(config.to_string())
        .timeout(Duration::from_secs(120))
        .run();
    assert_eq!(run.code(), 0, "{}", run.describe());
    let line = run.stdout.lines().last().unwrap_or_default().to_string();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("client output: {e}\n{}", run.describe()))
}

/// `stockade mcp` on stdio as the client spawns it.
fn stdio_config(fx: &Fixture, extra: &[&str], calls: Value) -> Value {
    let mut args = vec!["mcp".to_string()];
    args.extend(attacks::backend_args());
    args.extend(["--workspace".to_string(), fx.ws.display().to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    json!({
        "transport": "stdio",
        "command": stockade_bin(),
        "args": args,
        "env": attacks::with_engine_store(json!({ "PATH": PATH, "HOME": fx.home })),
        "calls": calls,
    })
}

fn call(name: &str, arguments: Value) -> Value {
    json!({ "name": name, "arguments": arguments })
}

/// A result's text content, all blocks joined.
fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_else(|| format!("no content: {result}"))
}

fn is_error(result: &Value) -> bool {
    result["isError"].as_bool().unwrap_or(false)
}

#[test]
fn every_tool_works_over_stdio_with_the_sdk_client() {
    if attacks::MCP_SDK.skip() {
        return;
    }
    let fx = Fixture::new();
    let calls = json!([
        call(
            "execute",
            json!({ "command": "echo from-$((40+2)); id -u >/dev/null" })
        ),
        call("read_file", json!({ "path": "README.md" })),
        call(
            "write_file",
            json!({ "path": "new/dir/made.txt", "content": "made by mcp\n" })
        ),
        call(
            "edit_file",
            json!({ "path": "app/main.txt", "old_string": "main", "new_string": "edited" })
        ),
        call("ls", json!({ "path": "app" })),
        call("glob", json!({ "pattern": "**/*.txt" })),
        call("grep", json!({ "pattern": "^# demo", "path": "" })),
        call("read_file", json!({ "path": fx.ws.join("README.md") })),
        call("execute", json!({ "command": "pwd; exit 3", "cwd": "app" })),
    ]);
    let out = client(&fx, stdio_config(&fx, &[], calls));
    let mut tools: Vec<&str> = out["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            "edit_file",
            "execute",
            "glob",
            "grep",
            "ls",
            "read_file",
            "write_file"
        ],
        "{out}"
    );
    let r = out["results"].as_array().expect("results");
    assert!(
        text(&r[0]).contains("exit code: 0") && text(&r[0]).contains("from-42"),
        "{}",
        r[0]
    );
    assert!(!is_error(&r[0]), "{}", r[0]);
    assert!(text(&r[1]).contains(&fx.marker("readme")), "{}", r[1]);
    assert!(!is_error(&r[2]), "{}", r[2]);
    assert_eq!(
        read_text(&fx.ws.join("new/dir/made.txt")).as_deref(),
        Some("made by mcp\n")
    );
    assert!(!is_error(&r[3]), "{}", r[3]);
    assert_eq!(
        read_text(&fx.ws.join("app/main.txt")).as_deref(),
        Some("edited\n")
    );
    assert!(
        text(&r[4]).contains("main.txt") && text(&r[4]).contains(".env.production"),
        "{}",
        r[4]
    );
    let globbed = text(&r[5]);
    assert!(
        globbed.contains("app/main.txt") && globbed.contains("new/dir/made.txt"),
        "{globbed}"
    );
    assert!(text(&r[6]).contains("README.md:1:# demo"), "{}", r[6]);
    assert!(
        text(&r[7]).contains(&fx.marker("readme")),
        "an absolute path beneath the workspace: {}",
        r[7]
    );
    assert!(
        is_error(&r[8]) && text(&r[8]).contains("exit code: 3"),
        "{}",
        r[8]
    );
    assert!(
        text(&r[8]).contains(&format!("{}/app", fx.ws.display())),
        "{}",
        r[8]
    );
    assert_eq!(r[8]["structuredContent"]["exit_code"], 3, "{}", r[8]);
}

#[test]
fn file_tools_stay_beneath_the_workspace() {
    if attacks::MCP_SDK.skip() {
        return;
    }
    let fx = Fixture::new();
    // Planted in the workspace (as an earlier command could have): links out of it.
    std::os::unix::fs::symlink(fx.outside.join("target.txt"), fx.ws.join("link-out"))
        .expect("plant a link");
    std::os::unix::fs::symlink("../outside", fx.ws.join("dir-out")).expect("plant a link");
    let outside = fx.outside.join("target.txt");
    let calls = json!([
        call("read_file", json!({ "path": "../outside/target.txt" })),
        call("read_file", json!({ "path": outside })),
        call("read_file", json!({ "path": "link-out" })),
        call(
            "write_file",
            json!({ "path": "link-out", "content": "overwritten\n" })
        ),
        call(
            "write_file",
            json!({ "path": "dir-out/new.txt", "content": "escaped\n" })
        ),
        call(
            "edit_file",
            json!({ "path": "dir-out/target.txt", "old_string": "original", "new_string": "edited" })
        ),
        call("ls", json!({ "path": "dir-out" })),
        call("grep", json!({ "pattern": "original", "path": "dir-out" })),
        call("glob", json!({ "pattern": "*", "path": "../outside" })),
    ]);
    let out = client(&fx, stdio_config(&fx, &[], calls));
    for (i, r) in out["results"]
        .as_array()
        .expect("results")
        .iter()
        .enumerate()
    {
        assert!(is_error(r), "call {i} was not refused: {r}");
        assert!(
            text(r).starts_with("outside_workspace:"),
            "call {i}: {}",
            text(r)
        );
        assert!(!text(r).contains("original"), "call {i} read outside: {r}");
    }
    assert_eq!(read_text(&outside).as_deref(), Some("original\n"));
    assert!(!fx.outside.join("new.txt").exists());
    // Control: the same paths do lead outside, on the host.
    assert_eq!(
        read_text(&fx.ws.join("link-out")).as_deref(),
        Some("original\n")
    );
    assert_eq!(
        read_text(&fx.ws.join("dir-out/target.txt")).as_deref(),
        Some("original\n")
    );
}

#[test]
fn file_tools_follow_the_sandbox_rules() {
    if attacks::MCP_SDK.skip() {
        return;
    }
    let fx = Fixture::new();
    let calls = json!([
        call("read_file", json!({ "path": ".env" })),
        call("grep", json!({ "pattern": "MARKER" })),
        call(
            "write_file",
            json!({ "path": ".git/hooks/pre-commit", "content": "#!/bin/sh\necho planted\n" })
        ),
        call(
            "write_file",
            json!({ "path": ".envrc", "content": "echo planted\n" })
        ),
        call(
            "execute",
            json!({ "command": "cat ~/.ssh/id_rsa; cat .env" })
        ),
    ]);
    let out = client(&fx, stdio_config(&fx, &[], calls));
    let r = out["results"].as_array().expect("results");
    // Masked: the dotenv file's content never comes out, by read_file, grep or execute.
    for (i, result) in r.iter().enumerate() {
        for kind in ["dotenv", "dotenvlocal", "dotenvprod", "ssh"] {
            assert!(
                !result.to_string().contains(&fx.marker(kind)),
                "call {i} showed the {kind} secret: {result}"
            );
        }
    }
    assert!(is_error(&r[0]), "{}", r[0]);
    // Protected: refused, named, with what would allow it (native mediates the creation and
    // reports it; under gVisor the kernel's EROFS is all there is); nothing on the host.
    for i in [2, 3] {
        assert!(is_error(&r[i]), "{}", r[i]);
        let t = text(&r[i]);
        // gVisor: `.envrc` is written, then swept into the quarantine after the run.
        assert!(
            t.starts_with("refused:")
                || (t.contains("E_SANDBOX_VIOLATION") && t.contains("quarantine")),
            "call {i}: {t}"
        );
        if backend() == "native" {
            assert!(t.contains("E_SANDBOX_VIOLATION"), "call {i}: {t}");
            assert!(t.contains("to allow:"), "call {i}: {t}");
        }
    }
    assert!(live_hooks(&fx.ws).is_empty(), "{:?}", live_hooks(&fx.ws));
    assert!(!fx.ws.join(".envrc").exists());
    assert!(is_error(&r[4]), "{}", r[4]);
    // Control: on the host the same reads and writes succeed.
    fx.control(
        "cat ~/.ssh/id_rsa; cat .env; printf '#!/bin/sh\\n' > .git/hooks/pre-commit && echo hook-written",
    )
    .run()
    .assert_stdout_contains(&fx.marker("ssh"))
    .assert_stdout_contains(&fx.marker("dotenv"))
    .assert_stdout_contains("hook-written");
}

#[test]
fn execute_names_network_denials_with_the_flag() {
    if attacks::MCP_SDK.skip() {
        return;
    }
    let fx = Fixture::new();
    let curl = "curl -sS --max-time 10 -o /dev/null http://blocked.example.invalid/ ; echo curl=$?";
    let calls = json!([call("execute", json!({ "command": curl }))]);
    let out = client(&fx, stdio_config(&fx, &["--net", "proxy"], calls));
    let r = &out["results"][0];
    let t = text(r);
    assert!(
        t.contains("E_NETWORK_DENIED") && t.contains("blocked.example.invalid:80"),
        "{t}"
    );
    assert!(t.contains("--allow-domain blocked.example.invalid"), "{t}");
    // Control: with the domain allowed, the rule lets the request through (the proxy then
    // fails to resolve the .invalid name, which no flag changes).
    let calls = json!([call("execute", json!({ "command": curl }))]);
    let out = client(
        &fx,
        stdio_config(
            &fx,
            &[
                "--net",
                "proxy",
                "--allow-domain",
                "blocked.example.invalid",
            ],
            calls,
        ),
    );
    let t = text(&out["results"][0]);
    assert!(!t.contains("--allow-domain"), "{t}");
    assert!(
        t.contains("could not resolve blocked.example.invalid"),
        "{t}"
    );
}

/// The nanosecond clock values a call printed as `start=N` and `end=N`.
fn span(result: &Value) -> (u128, u128) {
    let t = text(result);
    let value = |key: &str| {
        t.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u128>().ok())
            .unwrap_or_else(|| panic!("no {key} in {t}"))
    };
    (value("start="), value("end="))
}

#[test]
fn concurrent_calls_are_runs_of_their_own() {
    if attacks::MCP_SDK.skip() {
        return;
    }
    if backend() == "gvisor" && is_root() {
        println!("n/a: a root caller's gVisor runs of one workspace take turns (its workspace lock: crates/stockade/src/workspace_lock.rs)");
        return;
    }
    let fx = Fixture::new();
    // Four calls at once, each 4 s long: all four are running at one moment (the last to
    // start starts before the first to end) only if each is a run of its own. Serialized,
    // each would start after the one before it ended.
    let command = "echo start=$(date +%s%N); sleep 4; echo end=$(date +%s%N)";
    let calls: Vec<Value> = (0..4)
        .map(|_| call("execute", json!({ "command": command })))
        .collect();
    let mut config = stdio_config(&fx, &[], Value::Array(calls.clone()));
    config["concurrent"] = json!(true);
    let out = client(&fx, config);
    let spans: Vec<(u128, u128)> = out["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(span)
        .collect();
    let last_start = spans.iter().map(|s| s.0).max().unwrap_or(0);
    let first_end = spans.iter().map(|s| s.1).min().unwrap_or(0);
    assert!(last_start < first_end, "not all at once: {spans:?}");
    // Control: the same calls one after the other never overlap (the check can fail).
    let out = client(
        &fx,
        stdio_config(&fx, &[], Value::Array(calls[..2].to_vec())),
    );
    let spans: Vec<(u128, u128)> = out["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(span)
        .collect();
    assert!(spans[1].0 >= spans[0].1, "{spans:?}");
}

/// The numbers a call printed one to a line (a listing of `/proc/self/fd`).
fn numbers(result: &Value) -> Vec<u32> {
    text(result)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Concurrent runs of one server hold nothing of each other's (issue 30, item 8): each
/// command, while the others run beside it, holds only its stdin, stdout and stderr (what
/// it hands a child: a listing of `/proc/self/fd` shows those and its own descriptor). (Each
/// run's init closes what the server held for the other runs first thing, and the command
/// everything above 2 at its exec; `crates/sys/tests/init_descriptors.rs` catches the init
/// before its set-up.) Control: a descriptor the command opens itself is in the same listing.
#[test]
fn concurrent_calls_hold_only_their_own_descriptors() {
    if attacks::MCP_SDK.skip() {
        return;
    }
    if backend() == "gvisor" && is_root() {
        println!("n/a: a root caller's gVisor runs of one workspace take turns (its workspace lock: crates/stockade/src/workspace_lock.rs)");
        return;
    }
    let fx = Fixture::new();
    // A subshell lists its own descriptors (the command's, and the listing's own: 3) with the
    // shell's glob (`ls` cannot stat `/proc/self/fd` under an unprivileged gVisor).
    let command = "echo start=$(date +%s%N); sleep 2; (cd /proc/self/fd && for f in *; do echo $f; done); sleep 2; echo end=$(date +%s%N)";
    let mut calls: Vec<Value> = (0..3)
        .map(|_| call("execute", json!({ "command": command })))
        .collect();
    let control = format!("exec 7</dev/null; {command}");
    calls.push(call("execute", json!({ "command": control })));
    let mut config = stdio_config(&fx, &[], Value::Array(calls));
    config["concurrent"] = json!(true);
    let out = client(&fx, config);
    let results = out["results"].as_array().expect("results");
    let spans: Vec<(u128, u128)> = results.iter().map(span).collect();
    let last_start = spans.iter().map(|s| s.0).max().unwrap_or(0);
    let first_end = spans.iter().map(|s| s.1).min().unwrap_or(0);
    assert!(last_start < first_end, "not all at once: {spans:?}");
    for r in &results[..3] {
        assert_eq!(numbers(r), [0, 1, 2, 3], "{}", text(r));
    }
    assert_eq!(
        numbers(&results[3]),
        [0, 1, 2, 3, 7],
        "{}",
        text(&results[3])
    );
}

/// `stockade mcp --http 127.0.0.1:0` with `token`: the child and the URL it printed.
fn http_server(fx: &Fixture, token: &str) -> (std::process::Child, String) {
    let mut args = vec!["mcp".to_string()];
    args.extend(attacks::backend_args());
    args.extend([
        "--workspace".to_string(),
        fx.ws.display().to_string(),
        "--http".to_string(),
        "127.0.0.1:0".to_string(),
    ]);
    let mut child = Command::new(stockade_bin())
        .args(&args)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &fx.home)
        .env("STOCKADE_MCP_TOKEN", token)
        .envs(attacks::engine_store_env())
        .current_dir(&fx.ws)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start stockade mcp --http");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(url) = line.strip_prefix("stockade mcp: serving ") {
                    break url.to_string();
                }
            }
            _ => {
                let _ = child.kill();
                panic!("stockade mcp --http ended before serving");
            }
        }
    };
    // Keep draining stderr so the server never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

#[test]
fn http_needs_the_bearer_token() {
    if attacks::MCP_SDK.skip() {
        return;
    }
    let fx = Fixture::new();
    let token = format!("tok-{}-{}", fx.id, "x".repeat(32));
    let (mut server, url) = http_server(&fx, &token);
    let calls = json!([call(
        "execute",
        json!({ "command": "echo over-http; cat ~/.ssh/id_rsa" })
    )]);
    let with = client(
        &fx,
        json!({ "transport": "http", "url": url, "token": token, "calls": calls }),
    );
    let without = client(
        &fx,
        json!({ "transport": "http", "url": url, "calls": calls }),
    );
    let wrong = client(
        &fx,
        json!({ "transport": "http", "url": url, "token": format!("{token}x"), "calls": calls }),
    );
    // A browser page (an Origin header) is refused even with the token.
    let origin = Cmd::new("curl", &fx.root)
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["-H", "Origin: http://evil.example"])
        .args(["-H", "Content-Type: application/json"])
        .args(["-H", "Accept: application/json, text/event-stream"])
        .args(["-d", r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#])
        .arg(&url)
        .run();
    // SIGTERM, as a user would stop it: the server removes its copy of the binary.
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
    assert!(with.get("error").is_none(), "{with}");
    let t = text(&with["results"][0]);
    assert!(t.contains("over-http"), "{t}");
    assert!(!t.contains(&fx.marker("ssh")), "{t}");
    for (what, out) in [("no token", &without), ("a wrong token", &wrong)] {
        let e = out["error"].as_str().unwrap_or_default();
        assert!(e.contains("a bearer token is required"), "{what}: {out}");
        assert!(
            out["results"].as_array().is_none_or(Vec::is_empty),
            "{what}: {out}"
        );
    }
    assert_eq!(origin.stdout.trim(), "403", "{}", origin.describe());
}

#[test]
fn control_fd_changes_the_servers_policy_for_running_and_later_calls() {
    if attacks::MCP_SDK.skip() {
        return;
    }
    let fx = Fixture::new();
    // A loopback server on the host, refused by the proxy until allowed.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 2048];
            let _ = std::io::Read::read(&mut s, &mut buf);
            let _ = std::io::Write::write_all(
                &mut s,
                b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nlive-ok",
            );
        }
    });
    let fifo = fx.out_file("control.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let url = format!("http://127.0.0.1:{port}/");
    let target = fx.outside.join("from-mcp.txt");
    let first = format!(
        "curl -s -m 10 --noproxy '' -o /dev/null -w 'first=%{{http_code}}\\n' {url}; \
         echo x > {t} && echo write=ok || echo write=refused; : > first-done; \
         while [ ! -e go ]; do sleep 0.1; done; curl -s -m 10 --noproxy '' -w '\\nsecond=%{{http_code}}\\n' {url}",
        t = target.display()
    );
    let second = format!(
        "echo x > {t} && echo write=ok || echo write=refused",
        t = target.display()
    );
    let calls = json!([
        call("execute", json!({ "command": first })),
        call("execute", json!({ "command": second })),
    ]);
    let audit = fx.out_file("mcp-audit.jsonl");
    let audit_arg = audit.display().to_string();
    let mut config = stdio_config(
        &fx,
        &["--net", "proxy", "--control-fd", "3", "--audit", &audit_arg],
        calls,
    );
    // The client starts the server through sh, which opens the FIFO as its descriptor 3.
    let args: Vec<Value> = config["args"].as_array().expect("args").clone();
    let mut script = String::from("exec \"$0\"");
    for (i, _) in args.iter().enumerate() {
        script.push_str(&format!(" \"${{{}}}\"", i + 2));
    }
    script.push_str(" 3<\"$1\"");
    let mut sh_args = vec![
        json!("-c"),
        json!(script),
        config["command"].clone(),
        json!(fifo),
    ];
    sh_args.extend(args);
    config["command"] = json!("/bin/sh");
    config["args"] = Value::Array(sh_args);
    let (ws, fifo_path) = (fx.ws.clone(), fifo.clone());
    let allow = format!(
        "{{\"allow_hosts\": [\"127.0.0.1:{port}\"], \"allow_write\": [\"{}\", \"{}\"]}}\n",
        fx.ws.display(),
        fx.outside.display()
    );
    let writer = std::thread::spawn(move || {
        // Opening blocks until the server opens its end.
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .open(&fifo_path)
            .expect("open the FIFO");
        assert!(wait_until(
            || ws.join("first-done").exists(),
            Duration::from_secs(60)
        ));
        std::io::Write::write_all(&mut w, allow.as_bytes()).expect("send the change");
        // The change is applied (and audited) before the command goes on.
        let applied = || read_text(&audit).is_some_and(|a| a.contains("\"policy_change\""));
        assert!(wait_until(applied, Duration::from_secs(30)));
        write_file(&ws.join("go"), "", 0o644);
        w
    });
    let out = client(&fx, config);
    drop(writer.join().expect("the writer"));
    let r = out["results"].as_array().expect("results");
    let (t1, t2) = (text(&r[0]), text(&r[1]));
    // Control: before the change, the host and the write outside were refused.
    assert!(
        t1.contains("first=403") && t1.contains("write=refused"),
        "{t1}"
    );
    // The running call's proxy follows at once; the next call gets the new filesystem rules.
    assert!(t1.contains("live-ok") && t1.contains("second=200"), "{t1}");
    assert!(t2.contains("write=ok"), "{t2}");
    assert_eq!(read_text(&target).as_deref(), Some("x\n"));
}

#[test]
fn a_call_cannot_lift_the_operators_time_limit_or_overflow_it() {
    if attacks::MCP_SDK.skip() {
        return;
    }
    let fx = Fixture::new();
    let calls = json!([
        call(
            "execute",
            json!({ "command": "sleep 5; echo slept", "timeout_s": 0 })
        ),
        call(
            "execute",
            json!({ "command": "sleep 5; echo slept", "timeout_s": 3600 })
        ),
        call(
            "execute",
            json!({ "command": "echo huge-ok", "timeout_s": 9_007_199_254_740_991u64 })
        ),
        call("execute", json!({ "command": "echo still-serving" })),
    ]);
    let out = client(&fx, stdio_config(&fx, &["--timeout", "2"], calls));
    let r = out["results"].as_array().expect("results");
    for i in [0, 1] {
        assert_eq!(
            r[i]["structuredContent"]["timed_out"], true,
            "call {i}: {}",
            r[i]
        );
        assert!(!text(&r[i]).contains("slept"), "call {i}: {}", r[i]);
    }
    assert!(text(&r[2]).contains("huge-ok"), "{}", r[2]);
    assert!(text(&r[3]).contains("still-serving"), "{}", r[3]);
    // Control: under a larger operator limit the same call finishes.
    let calls = json!([call("execute", json!({ "command": "sleep 3; echo slept" }))]);
    let out = client(&fx, stdio_config(&fx, &["--timeout", "30"], calls));
    assert!(text(&out["results"][0]).contains("slept"), "{out}");
}

/// A limit past what the clock can hold is none, not a crash (it panicked adding it to the
/// start time; a release build aborts on a panic).
#[test]
fn a_time_limit_past_the_clock_is_no_limit() {
    let fx = Fixture::new();
    fx.sandbox_argv(
        &["--timeout", "18446744073709551615"],
        &["echo", "ran-anyway"],
    )
    .run()
    .assert_success()
    .assert_stdout_contains("ran-anyway");
}
