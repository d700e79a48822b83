//! Worker mode with an OpenAI-based agent: `stockade run --credential openai -- codex exec
//! ...` with the real Codex CLI (npm `@openai/codex`, installed by scripts/test; its own
//! sandbox off, since stockade is the sandbox) against a local test double of the Responses
//! API (server-sent events) that scripts one `exec_command` tool call: the search of
//! `attacks::agent_scan` (environ, the agent's memory, the files it sees). Inside stockade the
//! real key is found nowhere and the model calls carry it; the control runs the same agent and
//! tool call on the host with the key in its environment, and the search finds it.

use std::time::Duration;

use attacks::agent_scan::AgentCase;
use attacks::responses::{codex, provider_args, script};
use attacks::upstream::{Seen, Upstream};
use attacks::*;

/// `codex exec` with a provider at `base_url` whose key is `OPENAI_API_KEY`.
fn args(base_url: &str) -> Vec<String> {
    [
        "exec",
        "--skip-git-repo-check",
        "--sandbox",
        "danger-full-access",
        "-c",
        "model=gpt-5",
    ]
    .map(String::from)
    .into_iter()
    .chain(provider_args(base_url))
    .chain(["SCAN-NOW please".to_string()])
    .collect()
}

#[test]
fn codex_works_through_the_openai_route_and_its_tools_never_find_the_key() {
    if attacks::responses::CODEX_CLI.skip() {
        return;
    }
    let codex = codex();
    let case = AgentCase::new("codex", "sk-proj");
    let fx = &case.fx;
    let up = Upstream::start_with(Some(script(case.tool_inside())));
    let policy = fx.out_file("p.toml");
    write_file(
        &policy,
        format!("[credentials.openai]\nupstream = \"{}/v1\"\n", up.url()),
        0o644,
    );
    let home = format!("CODEX_HOME={}", case.state.display());
    let decoy_env = format!("DECOY={}", case.decoy);
    let mut argv = vec![codex.display().to_string()];
    argv.extend(args("http://127.0.0.1:3128/credential/openai"));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let run = fx
        .sandbox_argv(
            &[
                "--policy",
                &policy.display().to_string(),
                "--credential",
                "openai",
                "--allow-write",
                &case.state.display().to_string(),
                "--env",
                &home,
                "--env",
                &decoy_env,
            ],
            &argv,
        )
        .env("OPENAI_API_KEY", &case.real)
        .env("SSL_CERT_FILE", &up.ca_file)
        .run_agent(Duration::from_secs(180));
    run.assert_success();
    run.assert_stdout_contains("CODEX-DONE");
    let seen = up.seen();
    case.assert_held(&seen, "function_call_output", &run);
    let calls: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.target == "/v1/responses")
        .collect();
    assert!(calls.len() >= 2, "{seen:#?}");
    let bearer = format!("Bearer {}", case.real);
    assert!(calls
        .iter()
        .all(|s| s.header("authorization") == Some(bearer.as_str())));
}

#[test]
fn control_without_stockade_the_same_tool_call_finds_the_key() {
    if attacks::responses::CODEX_CLI.skip() {
        return;
    }
    let codex = codex();
    let case = AgentCase::new("codex", "sk-proj");
    // Plain HTTP to the double is not possible (it speaks TLS): Codex trusts its CA here.
    let up = Upstream::start_with(Some(script(case.tool(&[&case.state]))));
    let mut cmd = Cmd::new(&codex, &case.fx.ws)
        .env("HOME", &case.fx.home)
        .env("OPENAI_API_KEY", &case.real)
        .env("CODEX_HOME", &case.state)
        .env("SSL_CERT_FILE", &up.ca_file)
        .timeout(Duration::from_secs(180));
    for a in args(&format!("{}/v1", up.url())) {
        cmd = cmd.arg(a);
    }
    cmd.run().assert_success();
    case.assert_found(&up.seen(), "function_call_output");
}
