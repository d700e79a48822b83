//! The Messages API side of the Claude Code tests: where the real CLI is, and the answers a
//! test double of the model gives (a text, or one Bash tool call), with and without
//! server-sent events.

use std::path::PathBuf;

/// Where scripts/test installs the CLI's Linux binary (`STOCKADE_TEST_CLAUDE` overrides).
const CLAUDE: &str =
    "/var/tmp/stockade-tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude";

pub const CLAUDE_CLI: crate::PinnedTool = crate::PinnedTool {
    env: "STOCKADE_TEST_CLAUDE",
    default: CLAUDE,
    what: "the Claude Code CLI",
    install: "npm install --prefix /var/tmp/stockade-tools @anthropic-ai/claude-code",
};

/// The CLI's path (a test that needs it first returns when `CLAUDE_CLI.skip()`).
pub fn claude() -> PathBuf {
    CLAUDE_CLI.path()
}

/// One answer of the model: a Bash tool call running `tool` (with `tool_use` as the stop
/// reason), or the text `text`; as server-sent events when the request asked for a stream.
pub fn reply(stream: bool, tool: Option<&str>, text: &str) -> Vec<u8> {
    reply_as(stream, tool, text, "toolu_01")
}

/// [`reply`] with the tool call's id (each call of a conversation needs its own).
pub fn reply_as(stream: bool, tool: Option<&str>, text: &str, id: &str) -> Vec<u8> {
    reply_named(stream, "Bash", tool, text, id)
}

/// [`reply_as`] calling the shell tool by the name the agent gives it (`Bash` for Claude
/// Code, `bash` for OpenCode).
pub fn reply_named(stream: bool, name: &str, tool: Option<&str>, text: &str, id: &str) -> Vec<u8> {
    let (block, stop) = match tool {
        Some(command) => (
            serde_json::json!({"type": "tool_use", "id": id, "name": name,
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
            serde_json::json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
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
