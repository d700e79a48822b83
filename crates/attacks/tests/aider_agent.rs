//! `stockade run --agent aider --credential anthropic -- aider ...` (issue 18, item 9): the
//! real Aider (PyPI `aider-chat`, installed by scripts/test in a venv under
//! /var/tmp/stockade-tools) as the worker, against a local test double of the Messages API
//! whose answer is a whole-file edit creating `.envrc` (direnv runs it on the host when the
//! user next enters the directory). A second session runs `/run cat ~/.ssh/id_rsa > leaked.txt`
//! (a command Aider runs for its user, as it runs the lint and test commands).
//!
//! Inside stockade the edit is refused (Aider says it cannot create the file) and the key
//! stays unreadable; the model call goes through the route with the key held on the host. The
//! control runs the same sessions with Aider on the host: `.envrc` is written, the key leaked.
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

/// Where scripts/test installs Aider (`STOCKADE_TEST_AIDER` overrides).
const AIDER: &str = "/var/tmp/stockade-tools/aider-venv/bin/aider";

const AIDER_CLI: PinnedTool = PinnedTool {
    env: "STOCKADE_TEST_AIDER",
    default: AIDER,
    what: "Aider",
    install: "/usr/bin/python3 -m venv /var/tmp/stockade-tools/aider-venv and pip install aider-chat there",
};

fn aider() -> PathBuf {
    AIDER_CLI.path()
}

const KEY: &str = "sk-ant-api03-aider-key-held-on-the-host";
const EDIT: &str = ".envrc\n```\necho planted-by-aider\n```\n";

fn script() -> attacks::upstream::Script {
    Arc::new(|seen: &Seen| {
        // litellm writes `"stream": true` (with a space).
        let stream = serde_json::from_slice::<serde_json::Value>(&seen.body)
            .is_ok_and(|b| b["stream"] == true);
        reply_named(stream, "none", None, EDIT, "toolu_01")
    })
}

fn args(message: &str) -> Vec<String> {
    [
        "--model",
        "anthropic/claude-sonnet-4-5",
        "--edit-format",
        "whole",
        "--yes-always",
        "--no-git",
        "--no-show-model-warnings",
        "--message",
        message,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

const EDIT_NOW: &str = "EDIT-NOW please";
const RUN_NOW: &str = "/run cat ~/.ssh/id_rsa > leaked.txt";

#[test]
fn aider_as_the_worker_cannot_plant_envrc_or_read_the_key() {
    if AIDER_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let up = Upstream::start_with(Some(script()));
    let bin = aider().display().to_string();
    for message in [EDIT_NOW, RUN_NOW] {
        let mut argv = vec![bin.clone()];
        argv.extend(args(message));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let run = up.worker(
            &fx,
            ("anthropic", ""),
            ("ANTHROPIC_API_KEY", KEY),
            &["--agent", "aider", "--credential", "anthropic"],
            &argv,
        );
        if message == EDIT_NOW {
            // Native refuses the creation; under gVisor the file is written, then swept into
            // the quarantine after the run. Either way it is not there for direnv.
            if backend() == "native" {
                run.assert_stdout_contains("Unable to create .envrc");
            }
            assert!(!run.all_output().contains(KEY));
        }
    }
    assert!(!fx.ws.join(".envrc").exists());
    let leaked = read_text(&fx.ws.join("leaked.txt")).unwrap_or_default();
    assert!(!leaked.contains(&fx.marker("ssh")), "{leaked}");
    // The model was asked, with the real key put on by the proxy.
    assert!(up.seen().iter().any(|s| s.header("x-api-key") == Some(KEY)));
}

#[test]
fn control_aider_on_the_host_plants_envrc_and_reads_the_key() {
    if AIDER_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let up = Upstream::start_with(Some(script()));
    for message in [EDIT_NOW, RUN_NOW] {
        let run = Cmd::new(aider(), &fx.ws)
            .env("HOME", &fx.home)
            .env("ANTHROPIC_API_KEY", KEY)
            .env("ANTHROPIC_API_BASE", up.url())
            .env("SSL_CERT_FILE", &up.ca_file)
            .env("AIDER_CHECK_UPDATE", "false")
            .env("AIDER_ANALYTICS", "false")
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .args(args(message))
            .timeout(std::time::Duration::from_secs(120))
            .run();
        assert_eq!(run.code(), 0, "{}", run.describe());
    }
    assert_eq!(
        read_text(&fx.ws.join(".envrc")).as_deref(),
        Some("echo planted-by-aider\n")
    );
    let leaked = read_text(&fx.ws.join("leaked.txt")).unwrap_or_default();
    assert!(leaked.contains(&fx.marker("ssh")), "{leaked}");
}
