//! Every tool call is one sandboxed run of its own under the server's policy: `execute` runs
//! the command, the file tools run `stockade file-tool` (this binary) with the request on
//! stdin. Blocking: the server calls these on tokio's blocking pool, so concurrent calls are
//! concurrent runs.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::file_tool::{FailureKind, Reply, Request};

/// What the server runs everything under.
#[derive(Debug, Clone)]
pub struct Config {
    /// The policy every run gets (the file tools' runs with the network off), as it is at
    /// the call (`--control-fd` may change it; the running proxies follow at once).
    pub live: stockade::LivePolicy,
    /// The request every run starts from: workspace, caller, environment, options, audit log,
    /// trust store. Its argv is replaced per call.
    pub request: stockade::RunRequest,
    /// This stockade binary: the file tools run it inside the sandbox (`stockade file-tool`),
    /// so it must be executable there (e.g. under /usr/local/bin, not in a masked home).
    pub exe: PathBuf,
}

/// The most each of `execute`'s stdout and stderr pass on (head and tail kept, the middle
/// dropped with a marker).
pub const EXECUTE_OUTPUT_LIMIT: &str = "64K";
const EXECUTE_OUTPUT_BYTES: u64 = 64 << 10;

/// The time limit of an `execute` call: what the call asks, within the operator's limit
/// (`policy`: `Some(0)` or `None` is none). A call cannot lift the operator's limit, nor ask
/// for none (`0`) under one.
pub fn execute_timeout(policy: Option<u64>, asked: Option<u64>) -> u64 {
    let operator = policy.filter(|t| *t > 0);
    match (operator, asked.filter(|t| *t > 0)) {
        (Some(op), Some(a)) => a.min(op),
        (Some(op), None) => op,
        (None, Some(a)) => a,
        (None, None) => 0,
    }
}
/// A file tool's time limit.
const FILE_TOOL_TIMEOUT_S: u64 = 120;

/// Something the sandbox refused during a run, with what would allow it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Blocked {
    pub code: String,
    pub what: String,
    pub detail: String,
    pub hint: String,
}

/// How a sandboxed run went, as a tool reports it.
#[derive(Debug, Clone, Serialize)]
pub struct Ran {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub blocked: Vec<Blocked>,
}

/// A run stockade refused to start (untrusted configuration, a protection missing here, ...).
#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    pub code: String,
    pub message: String,
    pub hint: String,
}

impl From<stockade::Error> for Refusal {
    fn from(e: stockade::Error) -> Refusal {
        Refusal {
            code: e.code().to_string(),
            hint: e.hint(),
            message: e.to_string(),
        }
    }
}

/// Text headed to a model: without invisible characters, Tags and terminal sequences.
pub fn clean(bytes: &[u8]) -> String {
    sanitize::sanitize(bytes).0
}

fn blocked_of(result: &stockade::RunResult) -> Vec<Blocked> {
    let mut blocked: Vec<Blocked> = result
        .violations
        .iter()
        .map(|v| Blocked {
            code: v.code.to_string(),
            what: clean(v.path.display().to_string().as_bytes()),
            detail: clean(v.action.as_bytes()),
            hint: v.code.hint().to_string(),
        })
        .collect();
    blocked.extend(
        result
            .network
            .iter()
            .filter(|e| e.code == stockade::NETWORK_DENIED)
            .map(|e| Blocked {
                code: e.code.to_string(),
                what: clean(format!("{}:{}", e.host, e.port).as_bytes()),
                detail: clean(e.reason.as_deref().unwrap_or(&e.rule).as_bytes()),
                hint: e.hint.clone().unwrap_or_default(),
            }),
    );
    for h in &result.outcome.limit_hits {
        blocked.push(Blocked {
            code: sandbox::Code::LimitReached.as_str().to_string(),
            what: h.limit.to_string(),
            detail: h.detail.clone(),
            hint: h.hint(),
        });
    }
    blocked.dedup();
    blocked
}

/// Run `argv` under `policy` with `stdin` fed to it, `cancel` ending it early.
fn run(
    policy: &policy::Policy,
    request: &stockade::RunRequest,
    stdin: Option<Vec<u8>>,
    cancel: stockade::Cancel,
) -> Result<(stockade::RunResult, Vec<u8>, Vec<u8>), Refusal> {
    let pipe = |what: &str| {
        std::io::pipe().map_err(|e| Refusal {
            code: sandbox::Code::Internal.as_str().into(),
            message: format!("make a pipe for {what}: {e}"),
            hint: String::new(),
        })
    };
    let (mut out_r, out_w) = pipe("stdout")?;
    let (mut err_r, err_w) = pipe("stderr")?;
    let input = match stdin {
        Some(bytes) => {
            let (in_r, mut in_w) = pipe("stdin")?;
            // The writer ends with the input, or when the command closes its end.
            std::thread::spawn(move || {
                let _ = in_w.write_all(&bytes);
            });
            stockade::Input::Fd(in_r.into())
        }
        None => stockade::Input::Null,
    };
    let readers = [
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = out_r.read_to_end(&mut v);
            v
        }),
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = err_r.read_to_end(&mut v);
            v
        }),
    ];
    let io = stockade::RunIo::captured(out_w.into(), err_w.into(), cancel).with_stdin(input);
    let result = stockade::run_with_io(policy, request, io);
    let [out, err] = readers.map(|r| r.join().unwrap_or_default());
    Ok((result?, out, err))
}

/// A word for `sh`, quoted.
fn shell_quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\"'\"'"))
}

/// `execute`: `command` by the shell in the workspace (or `cwd` beneath it: the shell's own
/// `cd`, inside the sandbox; stockade never resolves it on this side).
pub fn execute(
    config: &Config,
    command: &str,
    cwd: Option<&str>,
    timeout_s: Option<u64>,
    cancel: stockade::Cancel,
) -> Result<Ran, Refusal> {
    let mut policy = config.live.policy();
    policy.limits.timeout = Some(execute_timeout(policy.limits.timeout, timeout_s));
    // At most 64 KiB per stream for a model; the operator's smaller limit stays.
    let operator = policy
        .limits
        .output_limit
        .as_deref()
        .and_then(|l| policy::parse_size(l).ok())
        .filter(|l| *l > 0);
    if operator.is_none_or(|l| l > EXECUTE_OUTPUT_BYTES) {
        policy.limits.output_limit = Some(EXECUTE_OUTPUT_LIMIT.into());
    }
    let mut request = config.request.clone();
    request.live = Some(config.live.clone());
    let script = match cwd.filter(|c| !c.is_empty()) {
        Some(dir) => format!("cd -- {} || exit 1\n{command}", shell_quoted(dir)),
        None => command.to_string(),
    };
    let shell = if Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    request.invocation.argv = vec![shell.into(), "-c".into(), script];
    request.invocation.cwd = request.invocation.workspace.clone();
    request.options.sanitize_output = true;
    request.options.no_terminal = true;
    let (result, out, err) = run(&policy, &request, None, cancel)?;
    Ok(Ran {
        exit_code: result.exit_code,
        stdout: clean(&out),
        stderr: clean(&err),
        timed_out: result.outcome.timed_out,
        blocked: blocked_of(&result),
    })
}

/// A path as the file tools take it: relative to the workspace. An absolute path inside the
/// workspace is made relative (lexically: nothing is resolved on this side); any other is
/// refused.
pub fn workspace_relative(workspace: &Path, path: &str) -> Result<String, Reply> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Ok(path.to_string());
    }
    match p.strip_prefix(workspace) {
        Ok(rest) => Ok(rest.display().to_string()),
        Err(_) => Err(Reply::failed(
            FailureKind::OutsideWorkspace,
            format!(
                "{path} is outside the workspace ({}): the file tools work only beneath it",
                workspace.display()
            ),
        )),
    }
}

/// A file tool: `request` done by `stockade file-tool` inside a sandboxed run.
pub fn file_tool(
    config: &Config,
    request: &Request,
    cancel: stockade::Cancel,
) -> Result<(Reply, Vec<Blocked>), Refusal> {
    let mut policy = config.live.policy();
    // The file tools need no network, no credentials, no environment.
    policy.network.mode = policy::NetworkMode::None;
    policy.credentials = Default::default();
    policy.limits.timeout = Some(FILE_TOOL_TIMEOUT_S);
    policy.limits.output_limit = Some("8M".into());
    let exe = config.exe.display().to_string();
    if !policy.filesystem.allow_read.contains(&exe) {
        policy.filesystem.allow_read.push(exe.clone());
    }
    let mut run_request = config.request.clone();
    run_request.invocation.argv = vec![exe, "file-tool".into()];
    run_request.invocation.cwd = run_request.invocation.workspace.clone();
    run_request.invocation.env = Vec::new();
    run_request.options.sanitize_output = false;
    run_request.options.no_terminal = true;
    let body = serde_json::to_vec(request).map_err(|e| Refusal {
        code: sandbox::Code::Internal.as_str().into(),
        message: format!("encode the file tool's request: {e}"),
        hint: String::new(),
    })?;
    let (result, out, err) = run(&policy, &run_request, Some(body), cancel)?;
    let blocked = blocked_of(&result);
    let reply = match serde_json::from_slice::<Reply>(&out) {
        Ok(Reply::Done { text }) => Reply::Done {
            text: clean(text.as_bytes()),
        },
        Ok(Reply::Failed { kind, message }) => Reply::Failed {
            kind,
            message: clean(message.as_bytes()),
        },
        Err(_) => Reply::failed(
            FailureKind::Failed,
            format!(
                "the file tool did not answer (exit code {}): {}",
                result.exit_code,
                clean(&err[..err.len().min(2000)]).trim()
            ),
        ),
    };
    Ok((reply, blocked))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_cannot_lift_the_operators_time_limit() {
        assert_eq!(execute_timeout(Some(600), None), 600);
        assert_eq!(execute_timeout(Some(600), Some(30)), 30);
        assert_eq!(execute_timeout(Some(2), Some(3600)), 2);
        assert_eq!(execute_timeout(Some(2), Some(0)), 2);
        assert_eq!(execute_timeout(Some(2), Some(u64::MAX)), 2);
        assert_eq!(execute_timeout(Some(0), Some(30)), 30);
        assert_eq!(execute_timeout(None, None), 0);
    }
}
