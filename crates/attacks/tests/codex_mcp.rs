//! Codex on the host with stockade as its MCP server (issue 18, item 4, the MCP route): the
//! real Codex CLI, configured with `mcp_servers.stockade = stockade mcp --workspace WS` and
//! `default_tools_approval_mode = "approve"` (Codex asks before every MCP call otherwise, and
//! `codex exec` cannot ask), against a local test double of the Responses API that scripts one
//! call of the server's `execute` tool (Codex offers it in the namespace `mcp__stockade`).
//!
//! The call reads the fixture's SSH key, plants a git hook and writes a file: through stockade
//! the key stays unreadable and the hook is refused (named, with what would allow it), the
//! file is written. The control runs the same command through Codex's own shell tool with its
//! sandbox off, as Codex would without stockade: the key is read and the hook planted.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::sync::Arc;

use attacks::responses::{codex, events, function_call, message, provider_args, script};
use attacks::upstream::{Seen, Upstream};
use attacks::*;

const TOOL: &str = "echo mcp-ran; cat ~/.ssh/id_rsa; printf '#!/bin/sh\\n' > .git/hooks/pre-commit && echo hook=planted; echo made > mcp-made.txt";

/// The double: the prompt gets a call of stockade's `execute`; its output a closing message.
fn mcp_script() -> attacks::upstream::Script {
    Arc::new(|seen: &Seen| {
        let body = String::from_utf8_lossy(&seen.body);
        if body.contains("function_call_output") {
            return events(message("MCP-DONE"));
        }
        let args = serde_json::json!({ "command": TOOL }).to_string();
        let mut call = function_call("execute", &args);
        call["namespace"] = "mcp__stockade".into();
        events(call)
    })
}

/// `codex exec` on the host (its home in the fixture), the double as its model.
fn codex_exec(fx: &Fixture, up: &Upstream, extra: &[String]) -> Run {
    let state = fx.home.join(".codex");
    if !state.exists() {
        mkdir(&state);
    }
    Cmd::new(codex(), &fx.ws)
        .env("HOME", &fx.home)
        .env("CODEX_HOME", &state)
        .env("OPENAI_API_KEY", "sk-proj-test")
        .env("SSL_CERT_FILE", &up.ca_file)
        .args(["exec", "--skip-git-repo-check", "-c", "model=gpt-5"])
        .args(provider_args(&format!("{}/v1", up.url())))
        .args(extra)
        .arg("RUN-NOW please")
        .timeout(std::time::Duration::from_secs(180))
        .run()
}

/// What the model was given back for its call (the `function_call_output` item's output).
fn tool_output(up: &Upstream) -> String {
    up.seen()
        .iter()
        .filter_map(|s| serde_json::from_slice::<serde_json::Value>(&s.body).ok())
        .flat_map(|b| b["input"].as_array().cloned().unwrap_or_default())
        .find(|item| item["type"] == "function_call_output")
        .map(|item| item["output"].to_string())
        .unwrap_or_default()
}

#[test]
fn codex_calls_stockade_over_mcp_and_its_commands_are_contained() {
    if attacks::responses::CODEX_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let up = Upstream::start_with(Some(mcp_script()));
    let mut args = vec!["mcp".to_string()];
    args.extend(attacks::backend_args());
    args.extend(["--workspace".to_string(), fx.ws.display().to_string()]);
    let args = serde_json::to_string(&args).expect("args as JSON");
    let mut config = vec![
        "-c".to_string(),
        format!(
            "mcp_servers.stockade.command=\"{}\"",
            stockade_bin().display()
        ),
        "-c".to_string(),
        format!("mcp_servers.stockade.args={args}"),
        "-c".to_string(),
        "mcp_servers.stockade.default_tools_approval_mode=\"approve\"".to_string(),
        // Codex starts the turn without an MCP server not ready within its grace period (the
        // tool call then fails as `mcp__stockadeexecute`): wait for it, as a slow CI needs.
        "-c".to_string(),
        "mcp_optional_startup_grace_ms=60000".to_string(),
    ];
    for (k, v) in attacks::engine_store_env() {
        config.push("-c".to_string());
        config.push(format!("mcp_servers.stockade.env.{k}=\"{v}\""));
    }
    let run = codex_exec(&fx, &up, &config);
    let output = tool_output(&up);
    assert!(
        output.contains("mcp-ran"),
        "the call did not run:\n{output}\n{}",
        run.describe()
    );
    assert!(!output.contains(&fx.marker("ssh")), "{output}");
    assert!(!output.contains("hook=planted"), "{output}");
    assert!(
        output.contains("E_SANDBOX_VIOLATION") || backend() != "native",
        "{output}"
    );
    assert!(live_hooks(&fx.ws).is_empty(), "{:?}", live_hooks(&fx.ws));
    assert_eq!(
        read_text(&fx.ws.join("mcp-made.txt")).as_deref(),
        Some("made\n")
    );
}

#[test]
fn control_codex_own_shell_without_its_sandbox_reads_the_key_and_plants_the_hook() {
    if attacks::responses::CODEX_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let up = Upstream::start_with(Some(script(TOOL.to_string())));
    let extra = ["--sandbox".to_string(), "danger-full-access".to_string()];
    let run = codex_exec(&fx, &up, &extra);
    let output = tool_output(&up);
    assert!(
        output.contains("mcp-ran"),
        "the call did not run:\n{output}\n{}",
        run.describe()
    );
    assert!(output.contains(&fx.marker("ssh")), "{output}");
    assert!(output.contains("hook=planted"), "{output}");
    assert!(!live_hooks(&fx.ws).is_empty());
}
