//! Worker mode with a real agent: `stockade run --credential anthropic -- claude -p ...` with
//! the real Claude Code CLI (npm `@anthropic-ai/claude-code`, installed by scripts/test) against
//! a local test double of the Messages API (server-sent events) that scripts one Bash tool
//! call. The tool call is the attack: it searches every process's environment and command
//! line, the agent's own memory (`/proc/<agent>/mem`) and the files it can see for anything
//! that looks like an Anthropic key, and prints what it found.
//!
//! Inside stockade the real key is found nowhere, and the model calls succeed through the
//! proxy with the real key. The control runs the same agent and the same tool call on the
//! host with the key in its environment: the search finds it (so the search can fail).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use attacks::agent_scan::{found, SCAN};
use attacks::upstream::{Seen, Upstream};
use attacks::*;

/// Where scripts/test installs the CLI's Linux binary (`STOCKADE_TEST_CLAUDE` overrides).
const CLAUDE: &str =
    "/var/tmp/stockade-tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude";

fn claude() -> PathBuf {
    let path = std::env::var_os("STOCKADE_TEST_CLAUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(CLAUDE));
    assert!(
        path.is_file(),
        "the Claude Code CLI is not at {} (scripts/test installs it: npm install --prefix /var/tmp/stockade-tools @anthropic-ai/claude-code)",
        path.display()
    );
    path
}

/// The Messages API double: the prompt asks for the scan (a Bash tool call), the tool result
/// gets a closing text; anything else a short text.
fn script(tool_command: String) -> attacks::upstream::Script {
    Arc::new(move |seen: &Seen| {
        let body = String::from_utf8_lossy(&seen.body);
        let stream = body.contains("\"stream\":true");
        if body.contains("tool_result") {
            reply(stream, None, "ALL-DONE")
        } else if body.contains("SCAN-NOW") {
            reply(stream, Some(&tool_command), "")
        } else {
            reply(stream, None, "ok")
        }
    })
}

fn reply(stream: bool, tool: Option<&str>, text: &str) -> Vec<u8> {
    let (block, stop) = match tool {
        Some(command) => (
            serde_json::json!({"type": "tool_use", "id": "toolu_01", "name": "Bash",
                "input": {"command": command, "description": "scan"}}),
            "tool_use",
        ),
        None => (
            serde_json::json!({"type": "text", "text": text}),
            "end_turn",
        ),
    };
    let message = |content: serde_json::Value, stop: serde_json::Value| {
        serde_json::json!({"id": "msg_01", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": content, "stop_reason": stop,
            "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}})
    };
    if !stream {
        return message(serde_json::json!([block]), stop.into())
            .to_string()
            .into_bytes();
    }
    let (start, delta) = match tool {
        Some(command) => (
            serde_json::json!({"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {}}),
            serde_json::json!({"type": "input_json_delta", "partial_json":
                serde_json::json!({"command": command, "description": "scan"}).to_string()}),
        ),
        None => (
            serde_json::json!({"type": "text", "text": ""}),
            serde_json::json!({"type": "text_delta", "text": text}),
        ),
    };
    let events = [
        (
            "message_start",
            serde_json::json!({"type": "message_start",
            "message": message(serde_json::json!([]), serde_json::Value::Null)}),
        ),
        (
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        (
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            serde_json::json!({"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 1}}),
        ),
        ("message_stop", serde_json::json!({"type": "message_stop"})),
    ];
    let mut out = Vec::new();
    for (name, data) in events {
        out.extend_from_slice(format!("event: {name}\ndata: {data}\n\n").as_bytes());
    }
    out
}

/// Claude Code's arguments and quiet settings.
const ARGS: &[&str] = &["-p", "SCAN-NOW please", "--allowedTools", "Bash"];

#[test]
fn claude_code_works_through_the_route_and_its_tools_never_find_the_key() {
    let claude = claude();
    let fx = Fixture::new();
    let real = format!("sk-ant-api03-real-{}", fx.id);
    let decoy = format!("sk-ant-decoy-{}", fx.id);
    let scan = fx.script("scan.py", SCAN);
    let state = fx.root.join("claude-state");
    mkdir(&state);
    let roots = [
        fx.ws.clone(),
        fx.home.clone(),
        state.clone(),
        PathBuf::from("/tmp"),
    ];
    let roots: Vec<String> = roots.iter().map(sh_quote).collect();
    let tool = format!(
        "/usr/bin/python3 {} claude {}",
        sh_quote(&scan),
        roots.join(" ")
    );
    let up = Upstream::start_with(Some(script(tool)));
    let policy = fx.out_file("p.toml");
    write_file(
        &policy,
        format!("[credentials.anthropic]\nupstream = \"{}\"\n", up.url()),
        0o644,
    );
    let config = format!("CLAUDE_CONFIG_DIR={}", state.display());
    let decoy_env = format!("DECOY={decoy}");
    let mut argv = vec![claude.to_str().unwrap_or_default()];
    argv.extend_from_slice(ARGS);
    let run = fx
        .sandbox_argv(
            &[
                "--policy",
                &policy.display().to_string(),
                "--credential",
                "anthropic",
                "--allow-write",
                &state.display().to_string(),
                "--env",
                &config,
                "--env",
                "DISABLE_TELEMETRY=1",
                "--env",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
                "--env",
                &decoy_env,
            ],
            &argv,
        )
        .env("ANTHROPIC_API_KEY", &real)
        .env("SSL_CERT_FILE", &up.ca_file)
        .timeout(Duration::from_secs(180))
        .run();
    run.assert_success();
    run.assert_stdout_contains("ALL-DONE");
    // The tool call ran and searched: the agent's memory, files, and (the in-run control) the
    // decoy key in the environment was found.
    let seen = up.seen();
    let result = seen
        .iter()
        .map(|s| String::from_utf8_lossy(&s.body).into_owned())
        .find(|b| b.contains("tool_result"))
        .unwrap_or_else(|| panic!("no tool result reached the model: {seen:#?}"));
    let result: String = result.replace("\\n", "\n");
    let agents = result
        .lines()
        .find(|l| l.contains("SCAN agents="))
        .unwrap_or_else(|| panic!("the scan did not run:\n{result}"));
    // The agent's memory was read (native), or reading it was refused (gVisor's Sentry).
    assert!(
        !(agents.contains("agents=0")
            || agents.contains("regions=0") && agents.contains("denied=0")),
        "{agents}"
    );
    let keys = found(&result);
    assert!(
        keys.iter().any(|k| k.starts_with(&decoy)),
        "the scan finds keys: {keys:?}"
    );
    assert!(
        !result.contains(&real),
        "the tool found the real key:\n{result}"
    );
    assert!(!run.stdout.contains(&real) && !run.stderr.contains(&real));
    // Every model call carried the real key, and only the real key.
    let calls: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.target.starts_with("/v1/messages"))
        .collect();
    assert!(calls.len() >= 2, "{seen:#?}");
    assert!(calls
        .iter()
        .all(|s| s.header("x-api-key") == Some(real.as_str())));
    // Nothing the agent wrote holds it either.
    for f in walk(&state, &|_| false)
        .into_iter()
        .chain(walk(&fx.ws, &|_| false))
    {
        let bytes = read_bytes(&f).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(&real), "{} holds the real key", f.display());
    }
}

#[test]
fn control_without_stockade_the_same_tool_call_finds_the_key() {
    let claude = claude();
    if is_root() {
        // Claude Code runs its tools as root only with permission prompts, which -p cannot
        // answer for a scan of another process's memory; the unprivileged pass runs this.
        println!("skipped as root: the control runs in the unprivileged pass");
        return;
    }
    let fx = Fixture::new();
    let real = format!("sk-ant-api03-real-{}", fx.id);
    let scan = fx.script("scan.py", SCAN);
    let state = fx.root.join("claude-state");
    mkdir(&state);
    let tool = format!(
        "/usr/bin/python3 {} claude {}",
        sh_quote(&scan),
        sh_quote(&state)
    );
    let up = Upstream::start_with(Some(script(tool)));
    let mut cmd = Cmd::new(&claude, &fx.ws)
        .env("HOME", &fx.home)
        .env("ANTHROPIC_API_KEY", &real)
        .env("ANTHROPIC_BASE_URL", up.url())
        .env("NODE_EXTRA_CA_CERTS", &up.ca_file)
        .env("CLAUDE_CONFIG_DIR", &state)
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .timeout(Duration::from_secs(180));
    for a in ARGS {
        cmd = cmd.arg(a);
    }
    let run = cmd.run();
    run.assert_success();
    let result = up
        .seen()
        .iter()
        .map(|s| String::from_utf8_lossy(&s.body).into_owned())
        .find(|b| b.contains("tool_result"))
        .unwrap_or_default();
    assert!(
        result.contains(&real),
        "the scan finds the key when it is there:\n{result}"
    );
}
