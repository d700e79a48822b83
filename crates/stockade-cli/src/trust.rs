//! `stockade trust approve|status|revoke [--workspace DIR] [--json]`: pin a workspace's
//! trust-relevant configuration by content (see `stockade::trust`).
//!
//! Exit codes: `approve` and `revoke` 0; `status` 0 when the workspace is approved and
//! unchanged, 1 when it is not approved or changed; 125 when stockade refuses (a link out of
//! the workspace, a corrupt store).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use stockade::trust::{diff, Snapshot, State, TrustStore};
use stockade::Error;

use crate::output::outln;

#[derive(Subcommand)]
// Each subcommand's arguments are built only when it is the one parsed (see `Command` in main.rs).
#[command(defer = true)]
pub enum TrustCommand {
    /// Approve the workspace's trust-relevant files as they are now (stockade.toml,
    /// .stockade/, agent and editor configs that run code, git hooks, .envrc).
    Approve(TrustArgs),
    /// Whether the workspace is approved, and which files were added, removed or changed
    /// since. Exit code 0: approved and unchanged; 1: not approved or changed.
    Status(TrustArgs),
    /// Remove the workspace's approval.
    Revoke(TrustArgs),
}

#[derive(Args)]
pub struct TrustArgs {
    /// The workspace. Default: current directory.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print JSON on stdout (and errors as JSON on stderr).
    #[arg(long)]
    json: bool,
}

/// Runs the subcommand; returns its result and whether errors are wanted as JSON.
pub fn main(command: TrustCommand) -> (Result<u8, Error>, bool) {
    match command {
        TrustCommand::Approve(a) => (approve(&a), a.json),
        TrustCommand::Status(a) => (status(&a), a.json),
        TrustCommand::Revoke(a) => (revoke(&a), a.json),
    }
}

fn open(args: &TrustArgs) -> Result<(PathBuf, TrustStore), Error> {
    let given = match &args.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().map_err(|e| Error::Io {
            what: "read the current directory".into(),
            cause: e,
        })?,
    };
    let workspace = std::fs::canonicalize(&given)
        .and_then(|p| {
            if p.is_dir() {
                Ok(p)
            } else {
                Err(std::io::Error::from(std::io::ErrorKind::NotADirectory))
            }
        })
        .map_err(|cause| Error::Workspace {
            path: given.clone(),
            cause,
        })?;
    let dir = stockade::trust::default_store_dir(
        std::env::var_os("XDG_STATE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    )
    .ok_or_else(|| stockade::trust::TrustError::Locate {
        reason: "neither XDG_STATE_HOME nor HOME is set to an absolute path".into(),
    })?;
    let store = TrustStore::open(&dir, &workspace)?;
    Ok((workspace, store))
}

fn short(token: &str) -> String {
    // `file:<64 hex>` -> `file:<12 hex>…`
    match token.split_once(':') {
        Some((kind, hash)) if hash.len() > 12 => format!("{kind}:{}…", &hash[..12]),
        _ => token.to_string(),
    }
}

fn print_entries(entries: &[stockade::trust::Entry]) {
    let present: Vec<_> = entries.iter().filter(|e| e.state == State::File).collect();
    for e in &present {
        outln!("  {:<40} {}", e.path, short(&e.token()));
    }
    outln!(
        "  ({} trust-relevant files; {} trust paths absent)",
        present.len(),
        entries.len() - present.len()
    );
}

fn approve(args: &TrustArgs) -> Result<u8, Error> {
    let (workspace, store) = open(args)?;
    let snapshot = Snapshot::take(&workspace)?;
    let record = store.approve(&snapshot)?;
    if args.json {
        outln!(
            "{}",
            serde_json::json!({ "approved": true, "record": store.record_path(), "trust": record })
        );
    } else {
        outln!(
            "stockade: approved {} ({})",
            workspace.display(),
            record.digest
        );
        print_entries(&record.files);
        for line in crate::default_policy::project_grants(&workspace) {
            outln!("{line}");
        }
    }
    Ok(0)
}

fn status(args: &TrustArgs) -> Result<u8, Error> {
    let (workspace, store) = open(args)?;
    let record = store.load()?;
    let now = Snapshot::take(&workspace)?;
    let (state, changes) = match &record {
        None => ("not_approved", Vec::new()),
        Some(r) if r.digest == now.digest => ("approved", Vec::new()),
        Some(r) => ("changed", diff(&r.files, &now.entries)),
    };
    if args.json {
        outln!(
            "{}",
            serde_json::json!({
                "workspace": workspace,
                "state": state,
                "digest": now.digest,
                "approved_digest": record.as_ref().map(|r| &r.digest),
                "approved_at": record.as_ref().map(|r| r.approved_at),
                "changes": changes,
                "files": now.entries,
            })
        );
    } else {
        print_status(&workspace, state, &now, record.as_ref(), &changes);
    }
    Ok(if state == "approved" { 0 } else { 1 })
}

fn print_status(
    workspace: &Path,
    state: &str,
    now: &Snapshot,
    record: Option<&stockade::trust::Record>,
    changes: &[stockade::trust::Change],
) {
    let ws = workspace.display();
    match (state, record) {
        ("approved", Some(r)) => {
            outln!(
                "stockade: {ws}: approved, unchanged ({}, approved at Unix time {})",
                r.digest,
                r.approved_at
            );
            print_entries(&now.entries);
        }
        ("changed", Some(r)) => {
            outln!(
                "stockade: {ws}: CHANGED since it was approved ({} -> {})",
                r.digest,
                now.digest
            );
            for c in changes {
                let before = c.before.as_deref().map(short).unwrap_or_default();
                let after = c.after.as_deref().map(short).unwrap_or_default();
                outln!("  {:<8} {:<40} {before} -> {after}", c.change, c.path);
            }
            if changes.is_empty() {
                outln!("  (no file differs: the approval was made under other trust rules)");
            }
            outln!("  hint: if you trust this, run `stockade trust approve --workspace {ws}`");
        }
        _ => {
            outln!("stockade: {ws}: not approved ({})", now.digest);
            print_entries(&now.entries);
            outln!(
                "  hint: review these files, then run `stockade trust approve --workspace {ws}`"
            );
        }
    }
}

fn revoke(args: &TrustArgs) -> Result<u8, Error> {
    let (workspace, store) = open(args)?;
    let removed = store.revoke()?;
    if args.json {
        outln!(
            "{}",
            serde_json::json!({ "workspace": workspace, "revoked": removed })
        );
    } else if removed {
        outln!("stockade: revoked the approval of {}", workspace.display());
    } else {
        outln!("stockade: {} was not approved", workspace.display());
    }
    Ok(0)
}
