//! `stockade guard` and `stockade run --guard`: the command layer ([`stockade::command`]) in
//! front of a run. The check happens on the host before the sandbox is built; a refusal is an
//! `E_SANDBOX_VIOLATION` naming the construct, and a checked command runs as a plain argv,
//! never through `/bin/sh -c`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use stockade::command::{self, Context};
use stockade::{Error, RunRequest};

use crate::output::outln;

// `stockade guard`.
// (A plain comment: under `defer` a doc comment here would become the subcommand's about,
// replacing its variant's.)
#[derive(clap::Args)]
pub struct GuardArgs {
    /// Workspace directory: path arguments must stay inside it. Default: current directory.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print the checked argv (or the refusal) as JSON.
    #[arg(long)]
    pub json: bool,
    /// Append a `refused` event to this JSON-lines audit log when the command is refused.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// The command string, as an agent would pass it to `bash -c` (one argument).
    #[arg(value_name = "COMMAND", allow_hyphen_values = true)]
    command: String,
}

/// The context of a check: `workspace` (default: the current directory), relative paths from
/// the current directory, `~` from `$HOME`, programs from `$PATH` without the entries that are
/// relative or lead into the workspace.
fn context(workspace: &Path, cwd: &Path, env_path: Option<OsString>) -> Result<Context, Error> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute());
    let ctx = Context::new(workspace)
        .and_then(|c| c.with_cwd(cwd))
        .map_err(|cause| Error::Workspace {
            path: workspace.to_path_buf(),
            cause,
        })?
        .with_home(home);
    Ok(match env_path {
        Some(path) => ctx.with_search_path(&path),
        None => ctx,
    })
}

/// `stockade guard`: prints the argv the command becomes, or refuses (exit 125).
pub fn main(args: &GuardArgs) -> Result<u8, Error> {
    let result = (|| {
        let cwd = std::env::current_dir().map_err(|cause| Error::Io {
            what: "read the current directory".into(),
            cause,
        })?;
        let workspace = args.workspace.clone().unwrap_or_else(|| cwd.clone());
        let ctx = context(&workspace, &cwd, std::env::var_os("PATH"))?;
        Ok(command::check(&args.command, &ctx)?)
    })();
    let checked = match result {
        Ok(c) => c,
        Err(e) => {
            if let Some(audit) = &args.audit {
                let _ = stockade::audit_refusal(audit, &e);
            }
            return Err(e);
        }
    };
    if args.json {
        outln!(
            "{}",
            serde_json::json!({ "ok": true, "argv": checked.argv, "program": checked.program })
        );
    } else {
        let words: Vec<String> = checked.argv.iter().map(|w| quote(w)).collect();
        outln!("{}", words.join(" "));
    }
    Ok(0)
}

/// `stockade run --guard`: the request for the checked command (`shell`: the `--shell`
/// string; else `argv`, checked without parsing). The command's own `PATH` becomes the
/// trusted search path, so what it runs in turn is not found in the workspace either.
pub fn guarded_request(
    shell: Option<&str>,
    argv: &[String],
    workspace: Option<PathBuf>,
) -> Result<RunRequest, Error> {
    let mut request = RunRequest::new(Vec::new(), workspace)?;
    let native = &mut request.invocation;
    let env_path = native
        .env
        .iter()
        .find(|(n, _)| n == "PATH")
        .map(|(_, v)| v.clone());
    let ctx = context(&native.workspace, &native.cwd, env_path)?;
    let checked = match shell {
        Some(s) => command::check(s, &ctx)?,
        None => command::check_argv(argv, &ctx)?,
    };
    native.argv = checked.argv;
    native.env.retain(|(n, _)| n != "PATH");
    native
        .env
        .push((OsString::from("PATH"), ctx.search_path_value()));
    Ok(request)
}

/// A word as `/bin/sh` would read it back (single quotes unless it is plainly safe).
fn quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
