//! The MCP tools: `execute` and the file tools, each call a sandboxed run of its own.

use std::sync::Arc;

use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::file_tool::{Reply, Request};
use crate::sandboxed::{self, Blocked, Config, Refusal};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ExecuteArgs {
    /// The shell command (bash -c) to run in the sandbox.
    pub command: String,
    /// The directory to start in, relative to the workspace (default: the workspace).
    pub cwd: Option<String>,
    /// Seconds until the run is ended (default 600).
    pub timeout_s: Option<u64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ReadArgs {
    /// The file, relative to the workspace (or absolute beneath it).
    pub path: String,
    /// The first line to give (1-based; default 1).
    pub offset: Option<usize>,
    /// How many lines (default 2000).
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WriteArgs {
    /// The file, relative to the workspace; missing directories are made.
    pub path: String,
    /// The file's whole new content.
    pub content: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EditArgs {
    /// The file, relative to the workspace.
    pub path: String,
    /// The exact text to replace (must occur once, unless replace_all).
    pub old_string: String,
    /// What replaces it.
    pub new_string: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct LsArgs {
    /// The directory, relative to the workspace (default: the workspace).
    pub path: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct GlobArgs {
    /// A glob, e.g. `**/*.rs`, matched against paths beneath `path`.
    pub pattern: String,
    /// Where to search, relative to the workspace (default: the workspace).
    pub path: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct GrepArgs {
    /// A regular expression (Rust regex syntax).
    pub pattern: String,
    /// A file or directory, relative to the workspace (default: the workspace).
    pub path: Option<String>,
    /// Only files whose path or name matches this glob, e.g. `*.py`.
    pub glob: Option<String>,
    /// Match without regard to case.
    #[serde(default)]
    pub ignore_case: bool,
}

/// Runs at once, server-wide: each run has its own limits (memory, processes), so the total
/// needs a bound of its own; calls beyond it wait their turn.
pub const MAX_RUNS: usize = 8;

/// The server: one policy, one workspace; every call a run of its own.
#[derive(Clone)]
pub struct Sandbox {
    config: Arc<Config>,
    runs: Arc<tokio::sync::Semaphore>,
    #[allow(dead_code)] // read by the `tool_handler` macro's code
    tool_router: ToolRouter<Self>,
}

/// A result: the text, then (a content block of its own, which no output or file name can
/// forge into the first) what the sandbox blocked.
fn text_result(
    text: String,
    blocked: String,
    structured: serde_json::Value,
    error: bool,
) -> CallToolResult {
    let mut content = vec![ContentBlock::text(text)];
    if !blocked.is_empty() {
        content.push(ContentBlock::text(blocked));
    }
    let mut result = if error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = Some(structured);
    result
}

fn refusal_result(r: &Refusal) -> CallToolResult {
    text_result(
        format!(
            "stockade refused to run it: {} {}\nhint: {}",
            r.code, r.message, r.hint
        ),
        String::new(),
        serde_json::json!({ "refused": r }),
        true,
    )
}

/// The lines naming what the sandbox refused, each with what would allow it.
fn blocked_lines(blocked: &[Blocked]) -> String {
    let mut text = String::new();
    if !blocked.is_empty() {
        text.push_str("--- blocked by stockade ---\n");
        for b in blocked {
            text.push_str(&format!("{} {}: {}", b.code, b.what, b.detail));
            if !b.hint.is_empty() {
                text.push_str(&format!(" (to allow: {})", b.hint));
            }
            text.push('\n');
        }
    }
    text
}

/// Run `f` on the blocking pool once one of the server's run slots is free; a cancelled
/// request cancels the run.
async fn blocking<T: Send + 'static>(
    runs: &tokio::sync::Semaphore,
    ct: CancellationToken,
    f: impl FnOnce(stockade::Cancel) -> T + Send + 'static,
) -> Result<T, rmcp::ErrorData> {
    let _slot = tokio::select! {
        slot = runs.acquire() => slot.map_err(|e| rmcp::ErrorData::internal_error(format!("the server is closing: {e}"), None))?,
        _ = ct.cancelled() => return Err(rmcp::ErrorData::internal_error("cancelled while waiting for a run slot", None)),
    };
    let cancel = stockade::Cancel::new();
    let handle = cancel.clone();
    let watcher = tokio::spawn(async move {
        ct.cancelled().await;
        handle.cancel();
    });
    let done = tokio::task::spawn_blocking(move || f(cancel)).await;
    watcher.abort();
    done.map_err(|e| rmcp::ErrorData::internal_error(format!("the run's thread failed: {e}"), None))
}

#[tool_router]
impl Sandbox {
    /// A server for `config`.
    pub fn new(config: Config) -> Sandbox {
        Sandbox {
            config: Arc::new(config),
            runs: Arc::new(tokio::sync::Semaphore::new(MAX_RUNS)),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Run a shell command (bash -c) in stockade's sandbox, in the workspace: writes only where the policy allows, secrets masked, network as the policy says. Returns the exit code, stdout and stderr (sanitized, at most 64 KiB each) and what the sandbox blocked, with the flag or policy line that would allow it."
    )]
    async fn execute(
        &self,
        Parameters(args): Parameters<ExecuteArgs>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        let config = self.config.clone();
        let ran = blocking(&self.runs, ct, move |cancel| {
            sandboxed::execute(
                &config,
                &args.command,
                args.cwd.as_deref(),
                args.timeout_s,
                cancel,
            )
        })
        .await?;
        Ok(match ran {
            Ok(ran) => {
                let mut text = format!("exit code: {}", ran.exit_code);
                if ran.timed_out {
                    text.push_str(" (ended by the time limit)");
                }
                text.push('\n');
                text.push_str(&ran.stdout);
                if !ran.stderr.is_empty() {
                    text.push_str("\n--- stderr ---\n");
                    text.push_str(&ran.stderr);
                }
                let structured = serde_json::to_value(&ran).unwrap_or_default();
                text_result(
                    text,
                    blocked_lines(&ran.blocked),
                    structured,
                    ran.exit_code != 0,
                )
            }
            Err(r) => refusal_result(&r),
        })
    }

    #[tool(
        description = "Read a text file of the workspace (lines offset..offset+limit), as the sandbox sees it: masked files read as the sandbox shows them, paths outside the workspace are refused."
    )]
    async fn read_file(
        &self,
        Parameters(a): Parameters<ReadArgs>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        self.file(ct, a.path, move |path| Request::Read {
            path,
            offset: a.offset,
            limit: a.limit,
        })
        .await
    }

    #[tool(
        description = "Write a file of the workspace (its whole content; missing directories are made), under the sandbox's rules: protected paths (git hooks, editor and build configurations the host executes) are refused."
    )]
    async fn write_file(
        &self,
        Parameters(a): Parameters<WriteArgs>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        self.file(ct, a.path, move |path| Request::Write {
            path,
            content: a.content,
        })
        .await
    }

    #[tool(
        description = "Replace old_string by new_string in a file of the workspace (exactly one occurrence unless replace_all), under the sandbox's rules."
    )]
    async fn edit_file(
        &self,
        Parameters(a): Parameters<EditArgs>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        self.file(ct, a.path, move |path| Request::Edit {
            path,
            old: a.old_string,
            new: a.new_string,
            all: a.replace_all,
        })
        .await
    }

    #[tool(description = "List a directory of the workspace.")]
    async fn ls(
        &self,
        Parameters(a): Parameters<LsArgs>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        self.file(ct, a.path.unwrap_or_default(), |path| Request::Ls { path })
            .await
    }

    #[tool(
        description = "Find the paths of the workspace that match a glob (e.g. **/*.rs), beneath path; .git is skipped unless the pattern names it."
    )]
    async fn glob(
        &self,
        Parameters(a): Parameters<GlobArgs>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        self.file(ct, a.path.unwrap_or_default(), move |path| Request::Glob {
            pattern: a.pattern,
            path,
        })
        .await
    }

    #[tool(
        description = "Search the workspace's text files for a regular expression; gives path:line:text per match (at most 1000)."
    )]
    async fn grep(
        &self,
        Parameters(a): Parameters<GrepArgs>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        self.file(ct, a.path.unwrap_or_default(), move |path| Request::Grep {
            pattern: a.pattern,
            path,
            glob: a.glob,
            ignore_case: a.ignore_case,
        })
        .await
    }
}

impl Sandbox {
    /// One file tool call: the path made workspace-relative, the request run in the sandbox.
    async fn file(
        &self,
        ct: CancellationToken,
        path: String,
        request: impl FnOnce(String) -> Request + Send + 'static,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        let config = self.config.clone();
        let relative =
            match sandboxed::workspace_relative(&config.request.invocation.workspace, &path) {
                Ok(p) => p,
                Err(reply) => return Ok(reply_result(reply, Vec::new())),
            };
        let request = request(relative);
        let done = blocking(&self.runs, ct, move |cancel| {
            sandboxed::file_tool(&config, &request, cancel)
        })
        .await?;
        Ok(match done {
            Ok((reply, blocked)) => reply_result(reply, blocked),
            Err(r) => refusal_result(&r),
        })
    }
}

fn reply_result(reply: Reply, blocked: Vec<Blocked>) -> CallToolResult {
    let structured = serde_json::json!({ "reply": &reply, "blocked": &blocked });
    match reply {
        Reply::Done { text } => {
            let failed = !blocked.is_empty();
            text_result(text, blocked_lines(&blocked), structured, failed)
        }
        Reply::Failed { kind, message } => {
            let kind = serde_json::to_value(kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            text_result(
                format!("{kind}: {message}"),
                blocked_lines(&blocked),
                structured,
                true,
            )
        }
    }
}

#[tool_handler]
impl ServerHandler for Sandbox {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            format!(
                "stockade's sandbox for the workspace {}: `execute` runs shell commands in it; the file tools read and change the workspace under the same rules. What the sandbox blocks is listed in each result with what would allow it.",
                self.config.request.invocation.workspace.display()
            ),
        )
    }
}
