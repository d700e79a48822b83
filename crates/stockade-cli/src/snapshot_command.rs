//! `stockade snapshot --out DIR|FILE.tar [--workspace DIR] [--allow-outside-links] [--json]`:
//! the workspace, filtered, for a backend that cannot bind-mount it (see
//! `stockade::snapshot`). The policy is resolved as for `run` (and the trust check is the
//! same); it decides which secrets stay out. Prints a summary (with `--json`: every entry,
//! every path left out and why). A refusal exits 125 with `E_SNAPSHOT_REFUSED`, listing the
//! links that resolve outside the workspace; nothing is written then.

use std::path::PathBuf;

use clap::Args;
use stockade::snapshot::{Content, Filter, Options, Snapshot, SnapshotError};
use stockade::{Error, RunRequest};

use crate::output::{errln, outln, shown};
use crate::PolicyArgs;

#[derive(Args)]
// On the arguments, not on `Command::Snapshot`: that variant's methods run before its deferred
// arguments exist.
#[command(mut_args(hide_run_only))]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Where to write it: a directory (new, or empty), or a tar archive (new) when the name
    /// ends in `.tar`. Must lie outside the workspace.
    #[arg(long, value_name = "DIR|FILE.tar")]
    pub out: PathBuf,
    /// Leave symbolic links that resolve outside the workspace out of the snapshot (listed)
    /// instead of refusing it.
    #[arg(long)]
    pub allow_outside_links: bool,
    /// Print JSON: the summary, and every entry and every path left out with its reason.
    #[arg(long)]
    pub json: bool,
}

/// The options of [`PolicyArgs`] that decide what a snapshot holds (clap's ids), and its own.
const SNAPSHOT_USES: &[&str] = &[
    "workspace",
    "policy",
    "profile",
    "agent",
    "preset",
    "deny_read",
    "allow_read",
    "out",
    "allow_outside_links",
    "json",
    "help",
];

/// Hides the run-only options of [`PolicyArgs`] from `stockade snapshot --help` (accepted,
/// as the policy is resolved as for `run`, but they change nothing of a snapshot).
pub fn hide_run_only(arg: clap::Arg) -> clap::Arg {
    let used = SNAPSHOT_USES.contains(&arg.get_id().as_str());
    arg.hide(!used)
}

pub fn main(args: &SnapshotArgs) -> Result<u8, Error> {
    let (policy, _, _) = crate::resolve(&args.policy)?;
    let mut request = RunRequest::new(vec!["true".into()], args.policy.workspace.clone())?;
    request.policy_file = args.policy.policy.clone();
    stockade::check_trust(&request)?;
    let ws = &request.invocation.workspace;
    let tar = args
        .out
        .extension()
        .is_some_and(|x| x.eq_ignore_ascii_case("tar"));
    let taken = Filter::new(&policy, ws, &request.invocation.home, &stockade::RealHost)
        .and_then(|filter| {
            Snapshot::take(
                &filter,
                Options {
                    allow_outside_links: args.allow_outside_links,
                },
            )
        })
        .and_then(|snapshot| {
            if tar {
                snapshot.write_tar(&args.out)?;
            } else {
                snapshot.write_dir(&args.out)?;
            }
            Ok(snapshot)
        });
    match taken {
        Ok(snapshot) => {
            if args.json {
                outln!("{}", json(&snapshot, args, tar));
            } else {
                summary(&snapshot, args, tar);
            }
            Ok(0)
        }
        Err(e) => {
            refusal(&e, args.json);
            Ok(crate::EXIT_REFUSED)
        }
    }
}

fn lossy(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

fn summary(s: &Snapshot, args: &SnapshotArgs, tar: bool) {
    let sum = s.summary();
    outln!(
        "{}",
        shown(&format!(
            "snapshot of {} written to {} ({})",
            s.workspace.display(),
            args.out.display(),
            if tar { "tar archive" } else { "directory" }
        ))
    );
    outln!(
        "  {} files, {} directories, {} symbolic links, {} bytes",
        sum.files,
        sum.dirs,
        sum.symlinks,
        sum.bytes
    );
    if sum.excluded.is_empty() {
        outln!("  left out: nothing");
    } else {
        let parts: Vec<String> = sum
            .excluded
            .iter()
            .map(|(r, n)| format!("{n} {}", r.as_str()))
            .collect();
        outln!("  left out: {} (`--json` lists them)", parts.join(", "));
    }
    for x in &s.excluded {
        if x.reason == stockade::snapshot::Reason::GitRedirect {
            outln!(
                "{}",
                shown(&format!(
                    "  note: {} is a `.git` file or link (a worktree or submodule): left out, so git does not work there in the snapshot",
                    x.path.display()
                ))
            );
        }
    }
    if !s.outside_links.is_empty() {
        outln!(
            "  left out (--allow-outside-links): {} links resolving outside the workspace:",
            s.outside_links.len()
        );
        for l in &s.outside_links {
            outln!(
                "{}",
                shown(&format!(
                    "    {} -> {}",
                    l.path.display(),
                    l.target.display()
                ))
            );
        }
    }
}

fn json(s: &Snapshot, args: &SnapshotArgs, tar: bool) -> serde_json::Value {
    let entries: Vec<serde_json::Value> = s
        .entries
        .iter()
        .map(|e| {
            let (kind, target) = match &e.content {
                Content::Dir => ("dir", None),
                Content::File => ("file", None),
                Content::GitConfig(_) => ("git_config", None),
                Content::Symlink(t) => ("symlink", Some(lossy(t))),
            };
            let mut v = serde_json::json!({
                "path": lossy(&e.path),
                "kind": kind,
                "mode": format!("{:04o}", e.mode),
                "size": e.size,
            });
            if let Some(t) = target {
                v["target"] = t.into();
            }
            v
        })
        .collect();
    let excluded: Vec<serde_json::Value> = s
        .excluded
        .iter()
        .map(|x| {
            serde_json::json!({
                "path": lossy(&x.path),
                "reason": x.reason.as_str(),
                "detail": x.detail,
            })
        })
        .collect();
    serde_json::json!({
        "workspace": lossy(&s.workspace),
        "out": lossy(&args.out),
        "format": if tar { "tar" } else { "dir" },
        "summary": s.summary(),
        "entries": entries,
        "excluded": excluded,
        "outside_links": links(&s.outside_links),
    })
}

fn links(links: &[stockade::snapshot::OutsideLink]) -> Vec<serde_json::Value> {
    links
        .iter()
        .map(|l| serde_json::json!({ "path": lossy(&l.path), "target": lossy(&l.target) }))
        .collect()
}

/// A refusal or failure, as `print_error` prints stockade's errors, with the links listed.
fn refusal(e: &SnapshotError, json: bool) {
    let code = e.code();
    let hint = e.hint().unwrap_or_else(|| code.hint().to_string());
    let kind = match e {
        SnapshotError::Policy(_) => "policy",
        _ if code == sandbox::Code::SnapshotRefused => "snapshot",
        _ => "internal",
    };
    let outside = match e {
        SnapshotError::OutsideLinks { links, .. } => links.as_slice(),
        _ => &[],
    };
    if json {
        let mut v = serde_json::json!({
            "error": {
                "code": code.as_str(),
                "kind": kind,
                "message": e.to_string(),
                "hint": hint,
            }
        });
        if !outside.is_empty() {
            v["error"]["outside_links"] = links(outside).into();
        }
        errln!("{v}");
    } else {
        let message = match e {
            SnapshotError::OutsideLinks { workspace, links } => format!(
                "refusing to snapshot {}: {} symbolic link(s) resolve outside it",
                workspace.display(),
                links.len()
            ),
            e => e.to_string(),
        };
        errln!(
            "{}",
            sandbox::Notice::new("error", code, &message).with_hint(Some(&hint))
        );
        for l in outside {
            errln!("  {} -> {}", l.path.display(), l.target.display());
        }
    }
}
