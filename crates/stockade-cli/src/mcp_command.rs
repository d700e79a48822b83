//! `stockade mcp`: the MCP server (crates/mcp) under the policy of `run`'s options, on stdio
//! or on streamable HTTP (`--http ADDR`, loopback, bearer token); the user's policy file and
//! the approved project's are layered under the options (`default_policy`). And `stockade file-tool`,
//! the file tools' side inside the sandbox (hidden: the server runs it, nobody else).

use std::net::SocketAddr;
use std::path::PathBuf;

use stockade::{Error, RunRequest};

use crate::output::errln;
use crate::PolicyArgs;

/// The variable that gives `--http` its token (else a random one, printed on stderr).
const TOKEN_ENV: &str = "STOCKADE_MCP_TOKEN";

// `stockade mcp`.
// (A plain comment: under `defer` a doc comment here would become the subcommand's about,
// replacing its variant's.)
#[derive(clap::Args)]
pub struct McpArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// Serve streamable HTTP on ADDR (loopback only, e.g. 127.0.0.1:8765; port 0: any free
    /// one) at /mcp instead of stdio. Clients send `Authorization: Bearer TOKEN`: the token
    /// is STOCKADE_MCP_TOKEN (at least 32 characters), else a random one printed on stderr.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Append JSON-line audit events of every run here.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// Run even if Landlock or seccomp cannot be enforced (recorded in the audit log).
    #[arg(long)]
    allow_degraded: bool,
    /// Read policy changes as JSON lines from descriptor N: network rules in force at once
    /// for the runs going on, filesystem rules from the next call on (see `run --help`).
    #[arg(long, value_name = "N")]
    control_fd: Option<i32>,
}

fn io_error(what: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |cause| Error::Io {
        what: what.into(),
        cause,
    }
}

pub fn main(args: &McpArgs) -> Result<u8, Error> {
    let (mut policy, sources, _) = crate::resolve_sources(&args.policy)?;
    let mut request = RunRequest::new(Vec::new(), args.policy.workspace.clone())?;
    crate::default_policy::print_notes(&sources);
    // Every call's run has the writable roots of this policy: checked once.
    crate::default_policy::check_reach(&mut policy, &request, &sources)?;
    request.audit = args.audit.clone();
    request.policy_file = args.policy.policy.clone();
    request.options.allow_degraded = args.allow_degraded;
    // The server's token is never any run's.
    request.invocation.env.retain(|(k, _)| k != TOKEN_ENV);
    // An unapproved workspace configuration refuses the server, not each call later.
    stockade::check_trust(&request)?;
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(io_error(
            "find the stockade binary (the file tools run it inside)",
        ))?;
    // Held until the server ends (a copy under /var/tmp is removed then).
    let inside = mcp::InsideBinary::stage(&exe).map_err(mcp_error)?;
    let live = stockade::LivePolicy::new(policy)?;
    if let Some(fd) = args.control_fd {
        crate::control_fd::start(fd, live.clone(), args.audit.clone())?;
    }
    let config = mcp::Config {
        live,
        request,
        exe: inside.path.clone(),
    };
    let served = match args.http {
        None => mcp::serve_stdio(config),
        Some(addr) => {
            let (token, generated) = match std::env::var(TOKEN_ENV) {
                Ok(t) => (t, false),
                Err(_) => (mcp::new_token().map_err(mcp_error)?, true),
            };
            let shown = generated.then(|| token.clone());
            mcp::serve_http_blocking(config, addr, token, move |l| {
                errln!("stockade mcp: serving {}", l.url);
                if let Some(t) = shown {
                    errln!("stockade mcp: token: {t}");
                }
            })
        }
    };
    served.map_err(mcp_error)?;
    drop(inside);
    Ok(0)
}

fn mcp_error(e: mcp::Error) -> Error {
    match e {
        mcp::Error::Io { what, cause } => Error::Io {
            what: what.into(),
            cause,
        },
        mcp::Error::Refused(message) => Error::Usage {
            message,
            hint: "`stockade mcp --http 127.0.0.1:PORT`, with STOCKADE_MCP_TOKEN of 32 characters or more (or unset: a random one)".into(),
        },
        other => Error::Io {
            what: "serve MCP".into(),
            cause: std::io::Error::other(other.to_string()),
        },
    }
}

/// `stockade file-tool`: one request on stdin, its reply on stdout (inside the sandbox).
pub fn file_tool() -> Result<u8, Error> {
    mcp::file_tool::serve_stdio().map_err(io_error("answer the file tool's request"))?;
    Ok(0)
}
