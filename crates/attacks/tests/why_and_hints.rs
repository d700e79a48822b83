//! Exact hints (issue 18, item 6): `stockade run --hints` ends stderr with one
//! `<stockade-hint>` block naming each refusal stockade saw with its rule and the flag that
//! would allow it, and `stockade why PATH|HOST[:PORT]` explains what the policy does and why.
//! Each `why` answer is checked against a real run: the refusal happens without the flag it
//! proposes, and the same command passes with it (the negative control).

// A helper that cannot bind a loopback port or make a link has nothing to test: it panics.
#![allow(clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;

use attacks::{which, write_file, Fixture, Run};

const OPEN: &str = "<stockade-hint>";
const CLOSE: &str = "</stockade-hint>";

/// `stockade why ARGS...` in the fixture's workspace.
fn why(fx: &Fixture, args: &[&str]) -> Run {
    let ws = fx.ws.display().to_string();
    fx.stockade(["why", "--workspace", &ws]).args(args).run()
}

/// The lines of the one `<stockade-hint>` block that ends stderr.
fn hint_block(run: &Run) -> Vec<String> {
    let stderr = run.stderr.trim_end();
    assert_eq!(
        stderr.matches(OPEN).count(),
        1,
        "expected exactly one hint block\n{}",
        run.describe()
    );
    assert!(
        stderr.ends_with(CLOSE),
        "the hint block must end stderr\n{}",
        run.describe()
    );
    let at = stderr.find(OPEN).unwrap_or_default();
    stderr[at..]
        .lines()
        .skip(1)
        .take_while(|l| *l != CLOSE)
        .map(str::to_owned)
        .collect()
}

/// A loopback HTTP server answering every request with `body`, for `count` requests.
fn serve(body: String, count: usize) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(count) {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// A blocked destination and a protected path in one run: the block names both, each with
/// its rule and the allowing flag or policy line; it is the last thing on stderr.
#[test]
fn hints_name_a_network_refusal_and_a_protected_path_with_what_allows_them() {
    if which("curl").is_none() {
        eprintln!("skipped: no curl");
        return;
    }
    let fx = Fixture::new();
    let script = "curl -s -o /dev/null -w '%{http_code}\\n' http://blocked.invalid/; \
                  mkdir -p .vscode; echo x > .vscode/tasks.json; true";
    let run = fx.sandbox(&["--net", "proxy", "--hints"], script).run();
    run.assert_success();
    let lines = hint_block(&run);
    assert!(
        lines.iter().all(|l| l.starts_with("blocked: ")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(
            |l| l.contains("blocked.invalid:80 (http) (E_NETWORK_DENIED)")
                && l.contains("no matching allow rule")
                && l.contains("to allow: allow it with `--allow-domain blocked.invalid`")
        ),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains(".vscode")
            && l.contains("(E_SANDBOX_VIOLATION)")
            && l.contains("`.vscode` in filesystem.deny_write")
            && l.contains("to allow: `unprotect = [\".vscode\"]` under [filesystem]")),
        "{lines:#?}"
    );
}

/// Controls: without `--hints` the same refusals print no block; with `--hints`, a run that
/// was refused nothing prints none.
#[test]
fn no_hint_block_without_the_flag_or_without_a_refusal() {
    let fx = Fixture::new();
    let run = fx
        .sandbox(&["--net", "proxy"], "mkdir -p .vscode; true")
        .run();
    run.assert_success()
        .assert_stderr_contains("E_SANDBOX_VIOLATION")
        .assert_lacks(OPEN);
    fx.sandbox(&["--hints"], "echo fine > out.txt && cat README.md")
        .run()
        .assert_success()
        .assert_lacks(OPEN)
        .assert_lacks("blocked:");
}

/// `hints = true` in the policy file asks for the block as `--hints` does.
#[test]
fn hints_key_in_the_policy_file_prints_the_block() {
    let fx = Fixture::new();
    let file = fx.root.join("hints.toml");
    write_file(&file, "hints = true\n", 0o644);
    let policy = file.display().to_string();
    let run = fx
        .sandbox(&["--policy", &policy], "mkdir .vscode; true")
        .run();
    let lines = hint_block(&run);
    assert!(lines.iter().any(|l| l.contains(".vscode")), "{lines:#?}");
}

/// A masked file: `why` names the default mask, says the kernel refuses it unobserved, and
/// proposes `--allow-read`; the read fails without it and shows the file with it.
#[test]
fn why_a_masked_file_names_its_mask_and_allow_read_opens_it() {
    let fx = Fixture::new();
    let path = fx.ws.join(".env");
    let run = why(&fx, &[".env"]);
    run.assert_code(1)
        .assert_stdout_contains("read     no (masked): `.env` in filesystem.deny_read")
        .assert_stdout_contains("[profile]")
        .assert_stdout_contains("not observed by stockade: the command sees EACCES");
    let flag = format!("`--allow-read {}`", path.display());
    run.assert_stdout_contains(&flag);
    let marker = fx.marker("dotenv");
    fx.sandbox(&[], "cat .env").run().assert_lacks(&marker);
    let allow = path.display().to_string();
    fx.sandbox(&["--allow-read", &allow], "cat .env")
        .run()
        .assert_success()
        .assert_stdout_contains(&marker);
}

/// A protected path: `why --write` names the catalogue entry, says stockade refuses its
/// creation and reports it, and proposes `unprotect`; with that policy line the run creates
/// it.
#[test]
fn why_a_protected_path_names_the_catalogue_and_unprotect_allows_it() {
    let fx = Fixture::new();
    let run = why(&fx, &[".vscode/tasks.json", "--write"]);
    run.assert_code(1)
        .assert_stdout_contains("write    no (creation refused): `.vscode` in filesystem.deny_write (catalogue: VS Code")
        .assert_stdout_contains("to allow: `unprotect = [\".vscode\"]` under [filesystem]");
    if attacks::creation_guarded() {
        run.assert_stdout_contains("observed: the command sees EPERM and stockade reports it");
    }
    let script = "mkdir -p .vscode && echo '{}' > .vscode/tasks.json && echo made";
    fx.sandbox(&[], script)
        .run()
        .assert_stderr_contains("E_SANDBOX_VIOLATION");
    let file = fx.root.join("unprotect.toml");
    write_file(&file, "[filesystem]\nunprotect = [\".vscode\"]\n", 0o644);
    let policy = file.display().to_string();
    fx.sandbox(&["--policy", &policy], script)
        .run()
        .assert_success()
        .assert_stdout_contains("made")
        .assert_lacks("E_SANDBOX_VIOLATION");
    assert!(fx.ws.join(".vscode/tasks.json").is_file());
    // The same question under that policy: allowed, by the workspace's allow_write entry.
    why(&fx, &["--policy", &policy, ".vscode/tasks.json", "--write"])
        .assert_success()
        .assert_stdout_contains("write    yes (writable)");
}

/// A path outside the workspace: read-only, refused by the kernel unobserved; the proposed
/// `--allow-write` lets the same write through.
#[test]
fn why_a_path_outside_the_workspace_is_read_only_and_allow_write_opens_it() {
    let fx = Fixture::new();
    let target = fx.outside.join("target.txt");
    let shown = target.display().to_string();
    let run = why(&fx, &[&shown, "--write"]);
    run.assert_code(1)
        .assert_stdout_contains("read     yes (readable)")
        .assert_stdout_contains("write    no (read only): outside every writable path")
        .assert_stdout_contains("not observed by stockade: the command sees EROFS or EACCES")
        .assert_stdout_contains(&format!("`--allow-write {shown}`"));
    let script = format!("echo changed > {shown} && echo wrote");
    fx.sandbox(&[], &script).run().assert_failure();
    assert_eq!(
        std::fs::read_to_string(&target).ok().as_deref(),
        Some("original\n")
    );
    fx.sandbox(&["--allow-write", &shown], &script)
        .run()
        .assert_success()
        .assert_stdout_contains("wrote");
    assert_eq!(
        std::fs::read_to_string(&target).ok().as_deref(),
        Some("changed\n")
    );
}

/// An allowed write from a policy file: the answer names the allow_write entry with the
/// file and its line, in text and JSON.
#[test]
fn why_an_allowed_write_names_the_policy_file_and_line() {
    let fx = Fixture::new();
    let file = fx.root.join("writes.toml");
    let outside = fx.outside.display().to_string();
    write_file(
        &file,
        format!("# where builds go\n[filesystem]\nallow_write = [\n  \"{outside}\",\n]\n"),
        0o644,
    );
    let policy = file.display().to_string();
    let new = fx.outside.join("new.txt").display().to_string();
    why(&fx, &["--policy", &policy, &new, "--write"])
        .assert_success()
        .assert_stdout_contains(&format!(
            "write    yes (writable): inside {outside}, writable by `{outside}` in filesystem.allow_write [policy file {policy} line 4]"
        ));
    let run = why(&fx, &["--policy", &policy, &new, "--write", "--json"]);
    run.assert_success();
    let doc: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("JSON");
    assert_eq!(doc["kind"], "path");
    assert_eq!(doc["asked"], "write");
    assert_eq!(doc["allowed"], true);
    assert_eq!(doc["write"]["state"], "writable");
    assert_eq!(doc["write"]["rule"]["key"], "filesystem.allow_write");
    assert_eq!(doc["write"]["rule"]["line"], 4);
    assert_eq!(doc["write"]["rule"]["file"], policy.as_str());
}

/// An allowed and a denied destination under `--net proxy`: the rule with its origin, and
/// for the denied one the exact `--allow-host`, which then lets the same request through.
#[test]
fn why_hosts_name_the_rule_and_the_flag_that_lets_the_request_through() {
    let fx = Fixture::new();
    why(
        &fx,
        &[
            "--net",
            "proxy",
            "--allow-domain",
            "*.example.com",
            "api.example.com",
        ],
    )
    .assert_success()
    .assert_stdout_contains(
        "connect  yes (allowed): `*.example.com` in network.allow_domains [flag]",
    );
    let denied = why(&fx, &["--net", "proxy", "not-allowed.invalid:80"]);
    denied
        .assert_code(1)
        .assert_stdout_contains("connect  no (denied): no matching allow rule")
        .assert_stdout_contains("to allow: allow it with `--allow-domain not-allowed.invalid`");
    // Under mode none nothing reaches out, unobserved; the answer says to use the proxy.
    why(&fx, &["example.org"])
        .assert_code(1)
        .assert_stdout_contains("network mode none")
        .assert_stdout_contains("not observed by stockade")
        .assert_stdout_contains("`--net proxy` with `--allow-domain example.org`");
    if which("curl").is_none() {
        eprintln!("skipped the run: no curl");
        return;
    }
    let marker = fx.marker("served");
    let port = serve(marker.clone(), 1);
    let target = format!("127.0.0.1:{port}");
    let run = why(&fx, &["--net", "proxy", &target]);
    run.assert_code(1)
        .assert_stdout_contains("the address is loopback");
    let flag = format!("`--allow-host {target}`");
    run.assert_stdout_contains(&flag);
    // `--noproxy ''`: the host's loopback is reached through the proxy only (NO_PROXY sends
    // loopback to the sandbox's own).
    let script = format!("curl -s --noproxy '' http://{target}/");
    fx.sandbox(&["--net", "proxy"], &script)
        .run()
        .assert_lacks(&marker)
        .assert_stderr_contains("E_NETWORK_DENIED");
    fx.sandbox(&["--net", "proxy", "--allow-host", &target], &script)
        .run()
        .assert_success()
        .assert_stdout_contains(&marker)
        .assert_lacks("E_NETWORK_DENIED");
    why(&fx, &["--net", "proxy", "--allow-host", &target, &target]).assert_success();
}

/// Paths are resolved as the sandbox does: relative to the workspace, links resolved.
#[test]
fn why_resolves_paths_relative_to_the_workspace_through_links() {
    let fx = Fixture::new();
    let link = fx.ws.join("to-outside");
    std::os::unix::fs::symlink(&fx.outside, &link).expect("symlink");
    let run = why(&fx, &["./to-outside/target.txt", "--write"]);
    run.assert_code(1).assert_stdout_contains(&format!(
        "path     {} (exists)",
        Path::new(&fx.outside).join("target.txt").display()
    ));
}
