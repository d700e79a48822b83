//! The Responses API side of the Codex tests: where the real CLI is, and a test double of the
//! model that answers the first request with one `exec_command` tool call and the call's
//! output with a closing message (server-sent events).

use std::path::PathBuf;
use std::sync::Arc;

use crate::upstream::Seen;

/// Where scripts/test installs the CLI's Linux binary (`STOCKADE_TEST_CODEX` overrides).
const CODEX: &str = "/var/tmp/stockade-tools/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";

pub const CODEX_CLI: crate::PinnedTool = crate::PinnedTool {
    env: "STOCKADE_TEST_CODEX",
    default: CODEX,
    what: "the Codex CLI",
    install: "npm install --prefix /var/tmp/stockade-tools @openai/codex",
};

/// The CLI's path (a test that needs it first returns when `CODEX_CLI.skip()`).
pub fn codex() -> PathBuf {
    CODEX_CLI.path()
}

/// Codex's `-c` settings for a model provider at `base_url` (the key from `OPENAI_API_KEY`)
/// that speaks HTTPS from the start (the README's recipe). Codex's built-in `openai` provider first tries a
/// WebSocket to the Responses API five times, with back-off, then falls back to HTTPS; under
/// a loaded CI that fallback stalled a test twice, and Codex 0.171 dropped the
/// `features.responses_websockets` switch. The provider is otherwise the built-in one.
pub fn provider_args(base_url: &str) -> [String; 4] {
    [
        "-c".into(),
        format!(
            "model_providers.stockade={{name=\"stockade\", base_url=\"{base_url}\", \
             env_key=\"OPENAI_API_KEY\", wire_api=\"responses\", supports_websockets=false}}"
        ),
        "-c".into(),
        "model_provider=\"stockade\"".into(),
    ]
}

/// The Responses API double: the prompt gets an `exec_command` call running `tool`; its
/// output gets a closing message.
pub fn script(tool: String) -> crate::upstream::Script {
    Arc::new(move |seen: &Seen| {
        let body = String::from_utf8_lossy(&seen.body);
        if body.contains("function_call_output") {
            events(message("CODEX-DONE"))
        } else {
            events(function_call(
                "exec_command",
                &serde_json::json!({"cmd": tool}).to_string(),
            ))
        }
    })
}

/// An assistant message saying `text`.
pub fn message(text: &str) -> serde_json::Value {
    serde_json::json!({"type": "message", "id": "msg_1", "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A call of the function tool `name` with `arguments` (JSON text).
pub fn function_call(name: &str, arguments: &str) -> serde_json::Value {
    serde_json::json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": name, "arguments": arguments})
}

/// One response whose output is `item`, as server-sent events.
pub fn events(item: serde_json::Value) -> Vec<u8> {
    let response = |status: &str, output: serde_json::Value| {
        serde_json::json!({"id": "resp_1", "object": "response", "created_at": 0,
            "model": "gpt-5", "status": status, "output": output,
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0}}})
    };
    let events = [
        serde_json::json!({"type": "response.created",
            "response": response("in_progress", serde_json::json!([]))}),
        serde_json::json!({"type": "response.output_item.done", "output_index": 0,
            "item": item.clone()}),
        serde_json::json!({"type": "response.completed",
            "response": response("completed", serde_json::json!([item]))}),
    ];
    let mut out = Vec::new();
    for e in events {
        let name = e["type"].as_str().unwrap_or("").to_owned();
        out.extend_from_slice(format!("event: {name}\ndata: {e}\n\n").as_bytes());
    }
    out
}
