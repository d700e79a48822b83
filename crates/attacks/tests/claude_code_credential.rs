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

use std::sync::Arc;
use std::time::Duration;

use attacks::agent_scan::AgentCase;
use attacks::messages::{claude, reply};
use attacks::upstream::{Seen, Upstream};
use attacks::*;

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

/// Claude Code's arguments and quiet settings.
const ARGS: &[&str] = &["-p", "SCAN-NOW please", "--allowedTools", "Bash"];

#[test]
fn claude_code_works_through_the_route_and_its_tools_never_find_the_key() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
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
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
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
