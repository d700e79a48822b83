//! `stockade run --agent opencode --credential anthropic -- opencode run ...` (issue 18,
//! items 2 and 9): the real OpenCode CLI (npm `opencode-linux-x64`, installed by scripts/test)
//! as the worker, against a local test double of the Messages API that scripts one call of
//! OpenCode's `bash` tool. The project's `opencode.json` (written on the host) lets OpenCode run
//! everything without asking: stockade is the boundary.
//!
//! The call reads the fixture's SSH key, plants a plugin in the project's `.opencode/plugin/`
//! (JavaScript OpenCode loads at its next start on the host) and one in the host's
//! `~/.config/opencode/`, and writes a file. Inside stockade the key stays unreadable, both
//! plants fail, the file is written, and the model call goes through the route with the key
//! held on the host. The control runs the same session with OpenCode on the host: the key is
//! read and the plugin planted.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::path::PathBuf;
use std::sync::Arc;

use attacks::messages::reply_named;
use attacks::upstream::{Seen, Upstream};
use attacks::*;

/// Where scripts/test installs the CLI (`STOCKADE_TEST_OPENCODE` overrides).
const OPENCODE: &str = "/var/tmp/stockade-tools/node_modules/opencode-linux-x64/bin/opencode";

const OPENCODE_CLI: PinnedTool = PinnedTool {
    env: "STOCKADE_TEST_OPENCODE",
    default: OPENCODE,
    what: "the OpenCode CLI",
    install: "npm install --prefix /var/tmp/stockade-tools opencode-linux-x64",
};

fn opencode() -> PathBuf {
    OPENCODE_CLI.path()
}

const TOOL: &str = "echo oc-ran; cat ~/.ssh/id_rsa; \
    (mkdir -p .opencode/plugin && echo 'export const P = 1' > .opencode/plugin/evil.js && echo plant-project=written || echo plant-project=refused); \
    (mkdir -p ~/.config/opencode && echo '{}' > ~/.config/opencode/opencode.json && echo plant-home=written || echo plant-home=refused); \
    echo made > oc-made.txt";

const KEY: &str = "sk-ant-api03-opencode-key-held-on-the-host";

fn script() -> attacks::upstream::Script {
    Arc::new(|seen: &Seen| {
        let body = String::from_utf8_lossy(&seen.body);
        let stream = body.contains("\"stream\":true");
        if body.contains("\"tool_result\"") || !body.contains("\"bash\"") {
            reply_named(stream, "bash", None, "OC-DONE", "toolu_01")
        } else {
            reply_named(stream, "bash", Some(TOOL), "", "toolu_01")
        }
    })
}

/// The tool's output as the model got it back.
fn tool_result(up: &Upstream) -> String {
    up.seen()
        .iter()
        .filter_map(|s| serde_json::from_slice::<serde_json::Value>(&s.body).ok())
        .flat_map(|b| b["messages"].as_array().cloned().unwrap_or_default())
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|c| c["type"] == "tool_result")
        .map(|c| c["content"].to_string())
        .unwrap_or_default()
}

fn project_config(fx: &Fixture) {
    write_file(
        &fx.ws.join("opencode.json"),
        r#"{"autoupdate": false, "share": "disabled", "permission": {"bash": "allow", "edit": "allow", "external_directory": "allow"}}"#,
        0o644,
    );
}

const ARGS: [&str; 4] = [
    "run",
    "--model",
    "anthropic/claude-sonnet-4-5",
    "RUN-NOW please",
];

#[test]
fn opencode_as_the_worker_cannot_read_secrets_or_plant_plugins() {
    if OPENCODE_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    project_config(&fx);
    let up = Upstream::start_with(Some(script()));
    let bin = opencode();
    let mut argv = vec![bin.to_str().unwrap_or_default()];
    argv.extend(ARGS);
    // OpenCode's Anthropic client appends `/messages` to its base URL (Claude Code appends
    // `/v1/messages`): its route's upstream carries the `/v1` (the README's recipe too).
    let run = up.worker(
        &fx,
        ("anthropic", "/v1"),
        ("ANTHROPIC_API_KEY", KEY),
        &["--agent", "opencode", "--credential", "anthropic"],
        &argv,
    );
    let result = tool_result(&up);
    assert!(
        result.contains("oc-ran"),
        "the call did not run:\n{result}\n{}",
        run.describe()
    );
    assert!(!result.contains(&fx.marker("ssh")), "{result}");
    // Native refuses the creation; under gVisor the plugin is written, then swept into the
    // quarantine after the run: either way it is not there for the host's next OpenCode.
    if backend() == "native" {
        assert!(result.contains("plant-project=refused"), "{result}");
    }
    assert!(result.contains("plant-home=refused"), "{result}");
    assert!(!fx.ws.join(".opencode/plugin/evil.js").exists());
    assert!(!fx.home.join(".config/opencode/opencode.json").exists());
    assert_eq!(
        read_text(&fx.ws.join("oc-made.txt")).as_deref(),
        Some("made\n")
    );
    // The model's requests carried the real key (put on by the proxy), never seen inside.
    assert!(up.seen().iter().any(|s| s.header("x-api-key") == Some(KEY)));
    assert!(!run.all_output().contains(KEY));
    // Its state went to its own directory.
    assert!(fx.home.join(".local/state/stockade/opencode").is_dir());
}

#[test]
fn control_opencode_on_the_host_reads_the_key_and_plants_the_plugin() {
    if OPENCODE_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    project_config(&fx);
    let up = Upstream::start_with(Some(script()));
    let run = Cmd::new(opencode(), &fx.ws)
        .env("HOME", &fx.home)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ANTHROPIC_BASE_URL", format!("{}/v1", up.url()))
        .env("NODE_EXTRA_CA_CERTS", &up.ca_file)
        .env("SSL_CERT_FILE", &up.ca_file)
        .args(ARGS)
        .timeout(std::time::Duration::from_secs(120))
        .run();
    let result = tool_result(&up);
    assert!(
        result.contains("oc-ran"),
        "the call did not run:\n{result}\n{}",
        run.describe()
    );
    assert!(result.contains(&fx.marker("ssh")), "{result}");
    assert!(fx.ws.join(".opencode/plugin/evil.js").exists());
}
