//! The change sets of review runs (`stockade run --review`): `runs` lists them, `changes`
//! and `diff` show one, `apply` writes it into the workspace, `discard` removes it (see
//! `stockade::changes`).
//!
//! A change set is named by its run id; without one, the newest of the workspace (the current
//! directory, or `--workspace`). Paths are relative to the workspace (or to the current
//! directory inside it).
//!
//! Exit codes: 0 done; [`EXIT_APPLIED_PARTLY`] (3) `apply` wrote what it could and left
//! flagged entries pending; 125 refused, nothing written (flagged entries not accepted under
//! `--all-or-nothing`, or nothing but flagged ones selected; conflicts; a change set that no
//! longer matches its digest; no such change set).
//!
//! `diff` colours its lines (`--color`, default `auto`: when standard output is a terminal,
//! `NO_COLOR` is unset or empty and `TERM` is not `dumb`); the colour codes are stockade's,
//! added after the text is made safe to print ([`shown`]), never the change set's.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Args;
use stockade::changes::{
    ApplyOptions, ApplyReport, Change, ChangeKind, ChangeSet, FileStat, FlagRules, RunDir,
    RunSummary, Store,
};
use stockade::Error;

use crate::output::{errln, out, outln, shown, shown_line};

/// `apply`'s exit status when it applied what it could and flagged entries (with what lies
/// below them) stay pending. Not 2: that is a usage error's (clap's).
pub const EXIT_APPLIED_PARTLY: u8 = 3;

/// From this many finished change sets of one workspace on, `changes`, `runs` and the end
/// of a review run say how many wait and how to clear them.
pub const MANY_WAITING: usize = 5;

/// When `diff` colours its output.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless `NO_COLOR` is set (not empty) or `TERM` is `dumb`.
    Auto,
    Always,
    Never,
}

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
    /// Lines added and removed per path, and the totals, instead of the diff.
    #[arg(long)]
    stat: bool,
    /// Colour the output: auto (on a terminal, without NO_COLOR), always, never.
    #[arg(
        long,
        value_name = "WHEN",
        value_enum,
        default_value_t = ColorWhen::Auto,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "always"
    )]
    color: ColorWhen,
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
    /// Apply nothing when any selected entry is flagged and not accepted (125,
    /// E_CHANGES_FLAGGED). Default: apply the rest, leave those pending (exit 3).
    #[arg(long)]
    all_or_nothing: bool,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct DiscardArgs {
    /// The run whose change set to remove. Default: the workspace's newest.
    #[arg(value_name = "RUN", conflicts_with_all = ["all", "older_than"])]
    run: Option<String>,
    /// The workspace whose newest change set is meant. Default: current directory.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Remove every change set of the workspace (a run still going on is left).
    #[arg(long)]
    all: bool,
    /// Remove the workspace's change sets older than DURATION (`90s`, `30m`, `12h`, `7d`,
    /// `2w`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    older_than: Option<u64>,
    /// With --all or --older-than: the change sets of every workspace, not only this one's.
    #[arg(long, conflicts_with = "workspace")]
    everywhere: bool,
}

/// `DURATION`: a number and a unit, `s`, `m`, `h`, `d` or `w`; in seconds.
fn parse_duration(text: &str) -> Result<u64, String> {
    let unit_at = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?}: give a unit: s, m, h, d or w (`7d`)"))?;
    let (n, unit) = text.split_at(unit_at);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{text:?}: a number, then s, m, h, d or w (`7d`)"))?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(format!("{text:?}: the unit is one of s, m, h, d, w (`7d`)")),
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{text:?}: too large"))
}

fn store() -> Result<Store, Error> {
    let dir = stockade::changes::default_store_dir(
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
    let mut workspaces: Vec<&Path> = list.iter().filter_map(|r| r.workspace.as_deref()).collect();
    workspaces.sort();
    workspaces.dedup();
    for ws in workspaces {
        note_waiting(&list, ws);
    }
    Ok(0)
}

/// The finished (or failed to finish) change sets of `workspace` in `list`: what may be
/// discarded in bulk. A run still going on (not finished, no error) is not among them.
fn settled<'a>(list: &'a [RunSummary], workspace: Option<&'a Path>) -> Vec<&'a RunSummary> {
    list.iter()
        .filter(|r| r.finished || r.finish_error.is_some())
        .filter(|r| workspace.is_none() || r.workspace.as_deref() == workspace)
        .collect()
}

/// On standard error, when [`MANY_WAITING`] or more change sets of `workspace` wait: how
/// many, and how to see and clear them.
fn note_waiting(list: &[RunSummary], workspace: &Path) {
    let n = settled(list, Some(workspace)).len();
    if n >= MANY_WAITING {
        errln!(
            "stockade: {n} change sets wait for {}: `stockade runs` lists them; `stockade discard --all` (or `--older-than 7d`) in it removes them",
            shown_line(&workspace.display().to_string())
        );
    }
}

/// [`note_waiting`] for the workspace of the review run `run_id`, after it ended. Quiet when
/// the store cannot be read: the run's own notices said what matters.
pub fn note_waiting_after_run(run_id: &str) {
    let Ok(store) = store() else {
        return;
    };
    let Ok(list) = store.runs_without_size() else {
        return;
    };
    if let Some(ws) = list
        .iter()
        .find(|r| r.run_id == run_id)
        .and_then(|r| r.workspace.clone())
    {
        note_waiting(&list, &ws);
    }
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
    if let Ok(list) = store.runs_without_size() {
        note_waiting(&list, &run.meta().workspace);
    }
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
        outln!("  flagged entries are applied only when named: --accept PATH, or --accept-flagged; `stockade apply` applies the rest and leaves them pending");
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
    let color = use_color(args.color);
    if args.stat {
        out!("{}", stat_text(&run.diff_stat(&paths)?, color));
        return Ok(0);
    }
    let text = run.diff(&paths)?;
    // The content and the names are the command's: nothing in them may act on the terminal.
    let text = shown(&text);
    if color {
        out!("{}", colored_diff(&text));
    } else {
        out!("{text}");
    }
    Ok(0)
}

/// Whether to colour, for `when`: `auto` only on a terminal, without a non-empty
/// `NO_COLOR` (no-color.org) and with a `TERM` other than `dumb`.
fn use_color(when: ColorWhen) -> bool {
    let env_allows = || {
        std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
    };
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => std::io::stdout().is_terminal() && env_allows(),
    }
}

const BOLD: &str = "1";
const RED: &str = "31";
const GREEN: &str = "32";
const CYAN: &str = "36";

fn paint(out: &mut String, code: &str, text: &str) {
    out.push_str("\x1b[");
    out.push_str(code);
    out.push('m');
    out.push_str(text);
    out.push_str("\x1b[m");
}

/// `text`, a diff already made safe to print, coloured as git colours one: headers bold,
/// hunk headers cyan, added lines green, removed red. A line is read as a header or as a
/// hunk's line by where it stands (after `@@` until the next `diff --git`), never by its
/// look alone: a removed line `-- x` is red, not a header.
fn colored_diff(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    let mut in_hunk = false;
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if body.starts_with("diff --git ") {
            in_hunk = false;
        }
        let code = if body.starts_with("@@") {
            in_hunk = true;
            Some(CYAN)
        } else if !in_hunk {
            Some(BOLD)
        } else if body.starts_with('+') {
            Some(GREEN)
        } else if body.starts_with('-') {
            Some(RED)
        } else {
            None
        };
        match code {
            Some(c) if !body.is_empty() => paint(&mut out, c, body),
            _ => out.push_str(body),
        }
        out.push_str(end);
    }
    out
}

/// `diff --stat`: ` PATH | N +++--` per path (`Bin` for what has no line counts), then the
/// totals, as git prints them; the bars scaled to at most 50 columns.
fn stat_text(stats: &[FileStat], color: bool) -> String {
    let names: Vec<String> = stats
        .iter()
        .map(|s| shown_line(&s.path.display().to_string()).into_owned())
        .collect();
    let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let most = stats
        .iter()
        .map(|s| s.insertions + s.deletions)
        .max()
        .unwrap_or(0);
    let digits = most.to_string().len();
    let scale = |n: usize| -> usize {
        if most <= 50 || n == 0 {
            n
        } else {
            (n * 50).div_ceil(most)
        }
    };
    let mut out = String::new();
    let (mut ins, mut del) = (0, 0);
    for (s, name) in stats.iter().zip(&names) {
        let pad = width - name.chars().count();
        out.push_str(&format!(" {name}{} | ", " ".repeat(pad)));
        if s.applied {
            out.push_str("(applied earlier) ");
        }
        if s.binary {
            out.push_str("Bin\n");
            continue;
        }
        ins += s.insertions;
        del += s.deletions;
        out.push_str(&format!("{:>digits$}", s.insertions + s.deletions));
        let (plus, minus) = (scale(s.insertions), scale(s.deletions));
        if plus + minus > 0 {
            out.push(' ');
        }
        let (plus, minus) = ("+".repeat(plus), "-".repeat(minus));
        if color {
            if !plus.is_empty() {
                paint(&mut out, GREEN, &plus);
            }
            if !minus.is_empty() {
                paint(&mut out, RED, &minus);
            }
        } else {
            out.push_str(&plus);
            out.push_str(&minus);
        }
        out.push('\n');
    }
    let plural = |n: usize, one: &str, many: &str| {
        if n == 1 {
            one.to_owned()
        } else {
            many.to_owned()
        }
    };
    out.push_str(&format!(
        " {} {} changed, {ins} {}(+), {del} {}(-)\n",
        stats.len(),
        plural(stats.len(), "path", "paths"),
        plural(ins, "insertion", "insertions"),
        plural(del, "deletion", "deletions"),
    ));
    out
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
        hold_flagged: !args.all_or_nothing,
    };
    let rules = rules(&run);
    let id = run.id().to_string();
    let workspace = run.meta().workspace.clone();
    // Nothing is said before it is done: a refusal prints the error alone. An apply that
    // fails part way names what it wrote first (from `applied.log`: the lines it added).
    let logged = run.applied_log().map(|l| l.len()).unwrap_or(0);
    let report = match run.apply(&opts, &rules) {
        Ok(r) => r,
        Err(e) => {
            let wrote: Vec<(String, PathBuf)> = run
                .applied_log()
                .map(|l| l.into_iter().skip(logged).collect())
                .unwrap_or_default();
            let changed: Vec<&(String, PathBuf)> = wrote
                .iter()
                .filter(|(op, _)| op == "written" || op == "deleted")
                .collect();
            if !changed.is_empty() {
                outln!(
                    "change set {id} applied in part to {} before it failed: {} entr{} written or deleted (listed in {})",
                    shown_line(&workspace.display().to_string()),
                    changed.len(),
                    if changed.len() == 1 { "y" } else { "ies" },
                    shown_line(&run.path().join("applied.log").display().to_string()),
                );
                for (op, p) in changed {
                    outln!("{op:<8} {}", shown_line(&p.display().to_string()));
                }
            }
            return Err(e.into());
        }
    };
    let code = if report.held.is_empty() {
        0
    } else {
        EXIT_APPLIED_PARTLY
    };
    if args.json {
        outln!("{}", json(&report)?);
        return Ok(code);
    }
    print_applied(&id, &workspace, &report);
    Ok(code)
}

fn print_applied(id: &str, workspace: &Path, report: &ApplyReport) {
    // The workspace is named: it is the change set's, which need not be the current
    // directory when RUN is given.
    outln!(
        "change set {id} applied {}to {}: {} written, {} deleted{}",
        if report.held.is_empty() {
            ""
        } else {
            "in part "
        },
        shown_line(&workspace.display().to_string()),
        report.written.len(),
        report.deleted.len(),
        if report.already.is_empty() {
            String::new()
        } else {
            format!(", {} already in place", report.already.len())
        }
    );
    for p in &report.written {
        outln!("written  {}", shown_line(&p.display().to_string()));
    }
    for p in &report.deleted {
        outln!("deleted  {}", shown_line(&p.display().to_string()));
    }
    for p in &report.already {
        outln!("already  {}", shown_line(&p.display().to_string()));
    }
    for p in &report.skipped {
        outln!(
            "dropped  {} (a special file: never applied)",
            shown_line(&p.display().to_string())
        );
    }
    for h in &report.held {
        let path = shown_line(&h.path.display().to_string()).into_owned();
        match &h.below {
            Some(above) => outln!(
                "pending  {path} (below the flagged {})",
                shown_line(&above.display().to_string())
            ),
            None => outln!("pending  {path}"),
        }
        for f in &h.flags {
            outln!("     flagged [{}]: {}", f.code, shown_line(&f.reason));
        }
    }
    if !report.held.is_empty() {
        let n = report.held.len();
        outln!(
            "{n} entr{} not applied for {} flags: read them (`stockade diff {id} PATH`), then `stockade apply {id} --accept PATH` (or `--accept-flagged`), or `stockade discard {id}`",
            if n == 1 { "y" } else { "ies" },
            if n == 1 { "its" } else { "their" },
        );
        if !report.written.is_empty() || !report.deleted.is_empty() {
            outln!(
                "the pending entries may depend on the ones just applied (a held Makefile that includes a plain file written now): review them together, `stockade diff {id}` shows both"
            );
        }
    }
    if report.remaining > 0 {
        outln!(
            "{} entr{} of {id} left pending (`stockade changes {id}`)",
            report.remaining,
            if report.remaining == 1 { "y" } else { "ies" }
        );
    } else {
        outln!("change set {id} applied whole and removed");
    }
}

pub fn discard(args: &DiscardArgs) -> Result<u8, Error> {
    let store = store()?;
    if args.all || args.older_than.is_some() {
        return discard_many(&store, args);
    }
    if args.everywhere {
        return Err(Error::Usage {
            message: "--everywhere goes with --all or --older-than".into(),
            hint: "`stockade discard --all --everywhere`, or `--older-than 7d --everywhere`".into(),
        });
    }
    // A change set named by its id is removed even when its record cannot be read.
    if let Some(id) = args.run.as_deref() {
        store.discard(id)?;
        outln!("change set {id} discarded");
        return Ok(0);
    }
    let run = find(&store, None, args.workspace.as_deref())?;
    let id = run.id().to_string();
    run.discard()?;
    outln!("change set {id} discarded");
    Ok(0)
}

/// `discard --all` / `--older-than`: the settled change sets of the workspace (of every
/// workspace with `--everywhere`) at least that old. A run still going on is left, and
/// said so.
fn discard_many(store: &Store, args: &DiscardArgs) -> Result<u8, Error> {
    let list = store.runs_without_size()?;
    let workspace = if args.everywhere {
        None
    } else {
        Some(workspace_meant(&list, args.workspace.as_deref())?)
    };
    let min_age = args.older_than.unwrap_or(0);
    let chosen: Vec<&RunSummary> = settled(&list, workspace.as_deref())
        .into_iter()
        .filter(|r| r.age_secs >= min_age)
        .collect();
    let where_ = match &workspace {
        Some(w) => format!("of {}", shown_line(&w.display().to_string())),
        None => "in the store".into(),
    };
    let mut n = 0;
    // One that cannot be removed does not stop the rest: each is said at the end.
    let mut failed = Vec::new();
    for r in &chosen {
        match store.discard(&r.run_id) {
            Ok(()) => {}
            // Gone meanwhile (another discard, an apply): nothing to do.
            Err(stockade::changes::ChangesError::NotFound { .. }) => continue,
            Err(e) => {
                failed.push((r.run_id.clone(), e));
                continue;
            }
        }
        outln!(
            "discarded {}: {} change{}, {} old, {}",
            r.run_id,
            r.entries - r.applied.min(r.entries),
            if r.entries - r.applied.min(r.entries) == 1 {
                ""
            } else {
                "s"
            },
            duration_text(r.age_secs),
            shown_line(
                &r.workspace
                    .as_deref()
                    .map(|w| w.display().to_string())
                    .unwrap_or_default()
            )
        );
        n += 1;
    }
    let going = list
        .iter()
        .filter(|r| !r.finished && r.finish_error.is_none())
        .filter(|r| workspace.is_none() || r.workspace.as_deref() == workspace.as_deref())
        .count();
    outln!(
        "{n} change set{} {where_} discarded{}",
        if n == 1 { "" } else { "s" },
        match args.older_than {
            Some(s) if s > 0 => format!(" (older than {})", duration_text(s)),
            _ => String::new(),
        }
    );
    if going > 0 {
        outln!(
            "{going} not finished left (a run may still be going on): `stockade runs` lists them, `stockade discard RUN` removes one"
        );
    }
    if failed.is_empty() {
        return Ok(0);
    }
    errln!(
        "stockade: {} change set{} could not be discarded (`stockade discard RUN` tries one again):",
        failed.len(),
        if failed.len() == 1 { "" } else { "s" }
    );
    let mut failed = failed.into_iter();
    let first = failed.next();
    for (id, e) in failed {
        errln!("stockade: {id}: {}", shown_line(&e.to_string()));
    }
    match first {
        Some((_, e)) => Err(Error::from(e)),
        None => Ok(0),
    }
}

/// `secs` in its largest whole unit: `7d`, `90m`, `45s`.
fn duration_text(secs: u64) -> String {
    match secs {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// The workspace `--all` means: `--workspace`, or the current directory's nearest
/// ancestor (itself included) that change sets name, else the current directory.
fn workspace_meant(list: &[RunSummary], workspace: Option<&Path>) -> Result<PathBuf, Error> {
    if let Some(w) = workspace {
        return std::fs::canonicalize(w).map_err(|e| Error::Workspace {
            path: w.to_path_buf(),
            cause: e,
        });
    }
    let cwd = current_dir()?;
    Ok(cwd
        .ancestors()
        .find(|a| list.iter().any(|r| r.workspace.as_deref() == Some(*a)))
        .unwrap_or(&cwd)
        .to_path_buf())
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, Error> {
    serde_json::to_string_pretty(value).map_err(|e| Error::Io {
        what: "serialize the change set".into(),
        cause: std::io::Error::other(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_coloured_by_where_it_stands_not_by_its_look() {
        let diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-- removed\n++ added\n \\u{1b}]0;t\n";
        let c = colored_diff(diff);
        assert!(c.contains("\x1b[1m--- a/x\x1b[m\n"), "{c}");
        assert!(c.contains("\x1b[36m@@ -1,2 +1,2 @@\x1b[m\n"), "{c}");
        assert!(c.contains("\x1b[31m-- removed\x1b[m\n"), "{c}");
        assert!(c.contains("\x1b[32m++ added\x1b[m\n"), "{c}");
        // Context is left as it is (already written out by `shown`).
        assert!(c.contains("\n \\u{1b}]0;t\n"), "{c}");
        // Six lines painted, two codes each; nothing else carries an escape.
        assert_eq!(c.matches('\x1b').count(), 12);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("7d"), Ok(604_800));
        assert_eq!(parse_duration("2w"), Ok(1_209_600));
        for bad in ["7", "d", "7x", "-1d", "1.5h", ""] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(duration_text(604_800), "7d");
        assert_eq!(duration_text(90), "90s");
    }
}
