//! `stockade hook claude-code [-- RUN-OPTIONS...]`: a Claude Code PreToolUse hook. Claude Code
//! hands it each tool call as JSON on stdin (`tool_name`, `tool_input`, `cwd`); for a Bash call
//! it answers with the same input, the command wrapped in `stockade run`, so the command runs
//! in the sandbox:
//!
//! ```json
//! {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
//!  "permissionDecisionReason": "...", "updatedInput": {"command": "'/usr/local/bin/stockade' run ..."}}}
//! ```
//!
//! Other tools pass unchanged (no output, exit 0). A Bash call it cannot wrap is denied: the
//! reason on stderr and exit 2, which Claude Code shows the model. The workspace is the
//! project's root (`CLAUDE_PROJECT_DIR`, which Claude Code gives hooks), never the directory
//! the call starts in. RUN-OPTIONS (`--policy FILE`, `--net proxy`, ...) go to every `run`;
//! `--ask` keeps Claude Code's own permission prompt for the wrapped command.

use std::io::Read;
use std::path::PathBuf;

use serde_json::{json, Value};
use stockade::Error;

use crate::output::{errln, outln};

/// What the hook answers: the JSON to print (none: let the call be) or a refusal (exit 2).
#[derive(Debug, PartialEq)]
pub(crate) enum Answer {
    Pass,
    Wrap(Value),
    Deny(String),
}

/// One shell word, single-quoted.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\"'\"'"))
}

/// The answer to one PreToolUse call `input`, wrapping Bash commands in `stockade run` with
/// `stockade` (this binary), `root` (the workspace) and `options`.
pub(crate) fn answer(
    input: &Value,
    stockade: &str,
    root: Option<&str>,
    options: &[String],
    ask: bool,
) -> Answer {
    if input.get("tool_name").and_then(Value::as_str) != Some("Bash") {
        return Answer::Pass;
    }
    let Some(tool_input) = input.get("tool_input").and_then(Value::as_object) else {
        return Answer::Deny("stockade: the Bash call has no tool_input".into());
    };
    let Some(command) = tool_input.get("command").and_then(Value::as_str) else {
        return Answer::Deny("stockade: the Bash call has no command".into());
    };
    let Some(root) = root else {
        return Answer::Deny(
            "stockade: CLAUDE_PROJECT_DIR is not set, so the project's root (the sandbox's workspace) is unknown; the command was not run".into(),
        );
    };
    let mut words = vec![
        quote(stockade),
        "run".into(),
        "--workspace".into(),
        quote(root),
    ];
    // No time limit unless asked (Claude Code has its own), no terminal (Claude Code gives
    // none), then the user's options.
    if !options
        .iter()
        .any(|o| o == "--timeout" || o.starts_with("--timeout="))
    {
        words.extend(["--timeout".into(), "0".into()]);
    }
    words.push("--no-tty".into());
    words.extend(options.iter().map(|o| quote(o)));
    words.extend(["--".into(), "bash".into(), "-c".into(), quote(command)]);
    let mut updated = tool_input.clone();
    updated.insert("command".into(), Value::String(words.join(" ")));
    Answer::Wrap(json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": if ask { "ask" } else { "allow" },
            "permissionDecisionReason": "runs in stockade's sandbox",
            "updatedInput": Value::Object(updated),
        }
    }))
}

/// `stockade hook claude-code`: read the call from stdin, print the answer; exit 2 on a
/// refusal.
pub(crate) fn main(options: &[String]) -> Result<u8, Error> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|cause| Error::Io {
            what: "read the hook's input".into(),
            cause,
        })?;
    let input: Value = serde_json::from_str(&text).map_err(|e| Error::Usage {
        message: format!("the hook's input is not JSON: {e}"),
        hint: "register `stockade hook claude-code` as a PreToolUse hook in Claude Code's settings"
            .into(),
    })?;
    let ask = options.iter().any(|o| o == "--ask");
    let options: Vec<String> = options.iter().filter(|o| *o != "--ask").cloned().collect();
    let exe = std::env::current_exe().map_err(|cause| Error::Io {
        what: "find the stockade binary".into(),
        cause,
    })?;
    let root = std::env::var_os("CLAUDE_PROJECT_DIR").map(PathBuf::from);
    let root = root.as_deref().and_then(|p| p.to_str());
    match answer(&input, &exe.display().to_string(), root, &options, ask) {
        Answer::Pass => Ok(0),
        Answer::Wrap(v) => {
            outln!("{v}");
            Ok(0)
        }
        Answer::Deny(reason) => {
            errln!("{reason}");
            Ok(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bash(command: &str) -> Value {
        json!({"tool_name": "Bash", "tool_input": {"command": command, "description": "d"}, "cwd": "/p/sub"})
    }

    #[test]
    fn bash_calls_are_wrapped_and_others_pass() {
        let a = answer(
            &bash("echo 'hi' && cd sub"),
            "/bin/stockade",
            Some("/p"),
            &[],
            false,
        );
        let Answer::Wrap(v) = a else { panic!("{a:?}") };
        let out = &v["hookSpecificOutput"];
        assert_eq!(out["permissionDecision"], "allow");
        assert_eq!(out["updatedInput"]["description"], "d");
        assert_eq!(
            out["updatedInput"]["command"],
            "'/bin/stockade' run --workspace '/p' --timeout 0 --no-tty -- bash -c 'echo '\"'\"'hi'\"'\"' && cd sub'"
        );
        let read = json!({"tool_name": "Read", "tool_input": {"file_path": "/etc/passwd"}});
        assert_eq!(answer(&read, "s", Some("/p"), &[], false), Answer::Pass);
    }

    #[test]
    fn options_go_to_the_run_and_ask_keeps_the_prompt() {
        let opts = [
            "--net".to_string(),
            "proxy".into(),
            "--timeout".into(),
            "60".into(),
        ];
        let Answer::Wrap(v) = answer(&bash("ls"), "s", Some("/p"), &opts, true) else {
            panic!()
        };
        let cmd = v["hookSpecificOutput"]["updatedInput"]["command"]
            .as_str()
            .unwrap_or("");
        assert_eq!(
            cmd,
            "'s' run --workspace '/p' --no-tty '--net' 'proxy' '--timeout' '60' -- bash -c 'ls'"
        );
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "ask");
    }

    #[test]
    fn calls_it_cannot_wrap_are_denied() {
        for (input, root) in [
            (json!({"tool_name": "Bash"}), Some("/p")),
            (json!({"tool_name": "Bash", "tool_input": {}}), Some("/p")),
            (bash("ls"), None),
        ] {
            assert!(
                matches!(answer(&input, "s", root, &[], false), Answer::Deny(_)),
                "{input}"
            );
        }
    }
}
