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

use attacks::agent_scan::AgentCase;
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
    let case = AgentCase::new("claude", "sk-ant-api03");
    let fx = &case.fx;
    let up = Upstream::start_with(Some(script(case.tool_inside())));
    let policy = fx.out_file("p.toml");
    write_file(
        &policy,
        format!("[credentials.anthropic]\nupstream = \"{}\"\n", up.url()),
        0o644,
    );
    let config = format!("CLAUDE_CONFIG_DIR={}", case.state.display());
    let decoy_env = format!("DECOY={}", case.decoy);
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
                &case.state.display().to_string(),
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
        .env("ANTHROPIC_API_KEY", &case.real)
        .env("SSL_CERT_FILE", &up.ca_file)
        .timeout(Duration::from_secs(180))
        .run();
    run.assert_success();
    run.assert_stdout_contains("ALL-DONE");
    let seen = up.seen();
    case.assert_held(&seen, "tool_result", &run);
    // Every model call carried the real key, and only the real key.
    let calls: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.target.starts_with("/v1/messages"))
        .collect();
    assert!(calls.len() >= 2, "{seen:#?}");
    assert!(calls
        .iter()
        .all(|s| s.header("x-api-key") == Some(case.real.as_str())));
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
    let case = AgentCase::new("claude", "sk-ant-api03");
    let up = Upstream::start_with(Some(script(case.tool(&[&case.state]))));
    let mut cmd = Cmd::new(&claude, &case.fx.ws)
        .env("HOME", &case.fx.home)
        .env("ANTHROPIC_API_KEY", &case.real)
        .env("ANTHROPIC_BASE_URL", up.url())
        .env("NODE_EXTRA_CA_CERTS", &up.ca_file)
        .env("CLAUDE_CONFIG_DIR", &case.state)
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .timeout(Duration::from_secs(180));
    for a in ARGS {
        cmd = cmd.arg(a);
    }
    cmd.run().assert_success();
    case.assert_found(&up.seen(), "tool_result");
}
