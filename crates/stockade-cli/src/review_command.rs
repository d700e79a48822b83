//! The change sets of review runs (`stockade run --review`): `runs` lists them, `changes`
//! and `diff` show one, `apply` writes it into the workspace, `discard` removes it (see
//! `workspace::changes`).
//!
//! A change set is named by its run id; without one, the newest of the workspace (the current
//! directory, or `--workspace`). Paths are relative to the workspace (or to the current
//! directory inside it).
//!
//! Exit codes: 0 done; 125 refused (flagged entries not accepted, conflicts, a change set that
//! no longer matches its digest, no such change set).

use std::path::{Path, PathBuf};

use clap::Args;
use stockade::Error;
use workspace::changes::{
    ApplyOptions, ApplyReport, Change, ChangeKind, ChangeSet, FlagRules, RunDir, Store,
};

use crate::output::{outln, shown, shown_line};

#[derive(Args)]
pub struct RunsArgs {
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ChangesArgs {
    /// The run whose change set to show. Default: the workspace's newest.
    #[arg(value_name = "RUN")]
    run: Option<String>,
    /// The workspace whose newest change set is meant. Default: current directory.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct DiffArgs {
    /// A run id (optional), then the paths to show (default: all).
    #[arg(value_name = "RUN|PATH")]
    args: Vec<String>,
    /// The workspace whose newest change set is meant. Default: current directory.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

#[derive(Args)]
pub struct ApplyArgs {
    /// The run whose change set to apply. Default: the workspace's newest.
    #[arg(value_name = "RUN")]
    run: Option<String>,
    /// The workspace whose newest change set is meant. Default: current directory.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Apply only PATH (a directory: what lies below it); repeatable.
    #[arg(long = "only", value_name = "PATH")]
    only: Vec<PathBuf>,
    /// Leave PATH out (it stays pending); repeatable.
    #[arg(long = "exclude", value_name = "PATH")]
    exclude: Vec<PathBuf>,
    /// Apply the flagged entry PATH (or the flagged entries below it) too; repeatable.
    #[arg(long = "accept", value_name = "PATH")]
    accept: Vec<PathBuf>,
    /// Apply every flagged entry (after reading `stockade changes`).
    #[arg(long)]
    accept_flagged: bool,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct DiscardArgs {
    /// The run whose change set to remove. Default: the workspace's newest.
    #[arg(value_name = "RUN")]
    run: Option<String>,
    /// The workspace whose newest change set is meant. Default: current directory.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

fn store() -> Result<Store, Error> {
    let dir = workspace::changes::default_store_dir(
        std::env::var_os("XDG_STATE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    )
    .ok_or_else(|| Error::Usage {
        message: "the change store cannot be located: neither XDG_STATE_HOME nor HOME is an absolute path".into(),
        hint: "set HOME (or XDG_STATE_HOME) to an absolute path".into(),
    })?;
    Ok(Store::open(&dir)?)
}

fn current_dir() -> Result<PathBuf, Error> {
    let cwd = std::env::current_dir().map_err(|e| Error::Io {
        what: "read the current directory".into(),
        cause: e,
    })?;
    Ok(std::fs::canonicalize(&cwd).unwrap_or(cwd))
}

/// The change set meant: `run`, or the newest of `workspace` (default: the current
/// directory, or the workspace holding it).
fn find(store: &Store, run: Option<&str>, workspace: Option<&Path>) -> Result<RunDir, Error> {
    if run.is_some() {
        return Ok(store.find(run, None)?);
    }
    let dir = match workspace {
        Some(w) => std::fs::canonicalize(w).map_err(|e| Error::Workspace {
            path: w.to_path_buf(),
            cause: e,
        })?,
        None => current_dir()?,
    };
    // The current directory may lie below the workspace the run had; the error named is
    // the one for the directory itself.
    let mut first = None;
    for a in dir.ancestors() {
        match store.find(None, Some(a)) {
            Ok(r) => return Ok(r),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
        if workspace.is_some() {
            break;
        }
    }
    Err(first.map(Error::from).unwrap_or_else(|| Error::Usage {
        message: "no pending change set".into(),
        hint: "`stockade runs` lists them".into(),
    }))
}

/// `path` as the change set names it: relative to the run's workspace.
fn relative(run: &RunDir, path: &Path) -> Result<PathBuf, Error> {
    let ws = &run.meta().workspace;
    let cwd = current_dir()?;
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else if policy::is_within(&cwd, ws) {
        cwd.join(path)
    } else {
        ws.join(path)
    };
    let normal = policy::normalize_lexically(&absolute);
    normal
        .strip_prefix(ws)
        .map(Path::to_path_buf)
        .map_err(|_| Error::Usage {
            message: format!(
                "{} lies outside the change set's workspace {}",
                path.display(),
                ws.display()
            ),
            hint: "name paths inside the workspace".into(),
        })
}

fn rules(run: &RunDir) -> FlagRules {
    FlagRules::new(run.meta().protected.clone(), run.meta().masked.clone())
}

pub fn runs(args: &RunsArgs) -> Result<u8, Error> {
    let list = store()?.runs()?;
    if args.json {
        outln!("{}", json(&list)?);
        return Ok(0);
    }
    if list.is_empty() {
        outln!("no pending change sets");
        return Ok(0);
    }
    for r in &list {
        outln!("{}", shown_line(&r.to_string()));
    }
    Ok(0)
}

pub fn changes(args: &ChangesArgs) -> Result<u8, Error> {
    let store = store()?;
    let run = find(&store, args.run.as_deref(), args.workspace.as_deref())?;
    let set = run.changes(&rules(&run))?;
    if args.json {
        #[derive(serde::Serialize)]
        struct Shown<'a> {
            run_id: &'a str,
            workspace: &'a Path,
            changes: &'a [Change],
            unchanged_copies: usize,
        }
        outln!(
            "{}",
            json(&Shown {
                run_id: run.id(),
                workspace: &run.meta().workspace,
                changes: &set.entries,
                unchanged_copies: set.unchanged_copies,
            })?
        );
        return Ok(0);
    }
    print_changes(&run, &set);
    Ok(0)
}

fn print_changes(run: &RunDir, set: &ChangeSet) {
    let flagged = set.entries.iter().filter(|c| !c.flags.is_empty()).count();
    outln!(
        "change set {} of {}: {} change{}{}",
        run.id(),
        shown_line(&run.meta().workspace.display().to_string()),
        set.entries.len(),
        if set.entries.len() == 1 { "" } else { "s" },
        if flagged > 0 {
            format!(", {flagged} flagged")
        } else {
            String::new()
        }
    );
    for c in &set.entries {
        let (mark, extra) = match &c.kind {
            ChangeKind::Added => ("A", String::new()),
            ChangeKind::Modified => ("M", String::new()),
            ChangeKind::Deleted => ("D", String::new()),
            ChangeKind::ReplacedDir => ("R", " (directory replaced)".into()),
            ChangeKind::ModeChanged { from, to } => ("m", format!(" ({from:o} → {to:o})")),
            ChangeKind::TypeChanged => ("T", " (type changed)".into()),
        };
        let link = c
            .symlink_target
            .as_ref()
            .map(|t| format!(" -> {}", shown_line(&t.display().to_string())))
            .unwrap_or_default();
        outln!(
            "{}{mark} {}{link}{extra}",
            if c.flags.is_empty() { " " } else { "!" },
            shown_line(&c.path.display().to_string())
        );
        for f in &c.flags {
            outln!("     flagged [{}]: {}", f.code, shown_line(&f.reason));
        }
    }
    let id = run.id();
    outln!("next: stockade diff {id} · stockade apply {id} · stockade discard {id}");
    if flagged > 0 {
        outln!("  flagged entries are applied only when named: --accept PATH, or --accept-flagged");
    }
}

pub fn diff(args: &DiffArgs) -> Result<u8, Error> {
    let store = store()?;
    let mut rest: &[String] = &args.args;
    // A first argument that names a pending change set is the run; the rest are paths.
    let named = rest.first().and_then(|a| store.find(Some(a), None).ok());
    let run = match named {
        Some(r) => {
            rest = &rest[1..];
            r
        }
        None => find(&store, None, args.workspace.as_deref())?,
    };
    let paths = rest
        .iter()
        .map(|p| relative(&run, Path::new(p)))
        .collect::<Result<Vec<_>, _>>()?;
    let text = run.diff(&paths)?;
    // The content and the names are the command's: nothing in them may act on the terminal.
    crate::output::out!("{}", shown(&text));
    Ok(0)
}

pub fn apply(args: &ApplyArgs) -> Result<u8, Error> {
    let store = store()?;
    let mut run = find(&store, args.run.as_deref(), args.workspace.as_deref())?;
    let rel = |list: &[PathBuf]| -> Result<Vec<PathBuf>, Error> {
        list.iter().map(|p| relative(&run, p)).collect()
    };
    let opts = ApplyOptions {
        only: rel(&args.only)?,
        exclude: rel(&args.exclude)?,
        accept: rel(&args.accept)?,
        accept_flagged: args.accept_flagged,
    };
    let rules = rules(&run);
    let id = run.id().to_string();
    // Named before anything is written: the workspace is the change set's, which need not be
    // the current directory when RUN is given.
    if !args.json {
        outln!(
            "applying change set {id} to {}",
            shown_line(&run.meta().workspace.display().to_string())
        );
    }
    let report = run.apply(&opts, &rules)?;
    if args.json {
        outln!("{}", json(&report)?);
        return Ok(0);
    }
    print_applied(&id, &report);
    Ok(0)
}

fn print_applied(id: &str, report: &ApplyReport) {
    for p in &report.written {
        outln!("written  {}", shown_line(&p.display().to_string()));
    }
    for p in &report.deleted {
        outln!("deleted  {}", shown_line(&p.display().to_string()));
    }
    for p in &report.already {
        outln!("already  {}", shown_line(&p.display().to_string()));
    }
    if report.remaining > 0 {
        outln!(
            "{} entr{} of {id} left pending (`stockade changes {id}`)",
            report.remaining,
            if report.remaining == 1 { "y" } else { "ies" }
        );
    } else {
        outln!("change set {id} applied and removed");
    }
}

pub fn discard(args: &DiscardArgs) -> Result<u8, Error> {
    let store = store()?;
    let run = find(&store, args.run.as_deref(), args.workspace.as_deref())?;
    let id = run.id().to_string();
    run.discard()?;
    outln!("change set {id} discarded");
    Ok(0)
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, Error> {
    serde_json::to_string_pretty(value).map_err(|e| Error::Io {
        what: "serialize the change set".into(),
        cause: std::io::Error::other(e),
    })
}
