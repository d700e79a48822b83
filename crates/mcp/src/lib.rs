//! `stockade mcp`: stockade's sandbox for any MCP client. Tools: `execute` (a shell command in
//! the sandbox) and `read_file`, `write_file`, `edit_file`, `ls`, `glob`, `grep` (the
//! workspace, under the sandbox's own rules). Every call is a sandboxed run of its own under
//! the server's policy; concurrent calls are concurrent runs. Transports: stdio, and streamable
//! HTTP on a loopback address with a bearer token.
//!
//! A front end: the policy and the run request come from the caller (the `stockade` binary's
//! options); nothing here decides what the sandbox allows.

mod file_ops;
pub mod file_tool;
mod http;
mod inside_binary;
pub mod sandboxed;
mod tools;

pub use http::{new_token, serve_http, Listening};
pub use inside_binary::InsideBinary;
pub use sandboxed::Config;
pub use tools::Sandbox;

/// Why the server stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {cause}")]
    Io {
        what: &'static str,
        cause: std::io::Error,
    },
    #[error("the MCP session failed: {0}")]
    Session(String),
    #[error("{0}")]
    Refused(String),
}

fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|cause| Error::Io {
            what: "start the server's runtime",
            cause,
        })
}

/// SIGINT, SIGTERM or SIGHUP to this process: the server stops (and its staged binary goes).
pub(crate) async fn shutdown() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
}

/// Serve `config` on stdin and stdout until the client closes them. The runs never see this
/// process's stdin (their stdin is /dev/null or the file tool's request).
pub fn serve_stdio(config: Config) -> Result<(), Error> {
    use rmcp::ServiceExt;
    runtime()?.block_on(async move {
        let running = Sandbox::new(config)
            .serve(rmcp::transport::io::stdio_pipes())
            .await
            .map_err(|e| Error::Session(e.to_string()))?;
        tokio::select! {
            done = running.waiting() => {
                done.map_err(|e| Error::Session(e.to_string()))?;
            }
            _ = shutdown() => {}
        }
        Ok(())
    })
}

/// Serve on a listener (see [`serve_http`]) within a runtime of this crate's own.
pub fn serve_http_blocking(
    config: Config,
    listen: std::net::SocketAddr,
    token: String,
    ready: impl FnOnce(Listening),
) -> Result<(), Error> {
    runtime()?.block_on(serve_http(config, listen, token, ready))
}
