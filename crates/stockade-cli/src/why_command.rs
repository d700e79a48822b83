//! `stockade why TARGET [--write] [--json]`: what the policy of the given options does to a
//! path or a destination, and why (the rule, where it came from, who enforces it, whether
//! stockade sees a refusal, what would allow it). The answer comes from the same plan and
//! network rules a run uses (`stockade::why`). Exit status: 0 when the access asked about
//! (reading, writing with `--write`, connecting for a destination) is allowed, 1 when not.

use clap::Args;
use stockade::why::{Answer, Verdict};
use stockade::{Error, RunRequest};

use crate::output::outln;
use crate::PolicyArgs;

#[derive(Args)]
pub struct WhyArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// A path (relative to the workspace; `~/` is the home) or a destination, HOST[:PORT]
    /// (port 443 by default; `[IPV6]:PORT`). A target with a `/`, starting with `.` or `~`,
    /// or existing in the workspace is a path.
    #[arg(value_name = "PATH|HOST[:PORT]")]
    pub target: String,
    /// Ask about writing the path (the exit status says whether it is allowed).
    #[arg(long)]
    pub write: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: &WhyArgs) -> Result<u8, Error> {
    let (mut policy, sources, overrides) = crate::resolve_sources(&args.policy)?;
    let file = sources.merged();
    let request = RunRequest::new(vec!["true".into()], args.policy.workspace.clone())?;
    // As a run would have it: refused, or with the user file's directory protected.
    crate::default_policy::check_reach(&mut policy, &request, &sources)?;
    let origins =
        policy::origin::Origins::new(file.as_ref(), &overrides).with_layers(&sources.layers);
    let answer = stockade::why::why(
        &policy,
        &request,
        &origins,
        args.policy.policy.as_deref(),
        &args.target,
    )?;
    let (asked, verdict) = asked(&answer, args.write);
    if args.json {
        let mut doc = serde_json::to_value(&answer).unwrap_or_default();
        doc["asked"] = asked.into();
        doc["allowed"] = verdict.allowed.into();
        outln!("{doc}");
    } else {
        for line in lines(&answer) {
            outln!("{}", crate::output::shown(&line));
        }
    }
    Ok(if verdict.allowed { 0 } else { 1 })
}

/// The access asked about (`read`, `write`, `connect`) and its verdict.
pub fn asked(answer: &Answer, write: bool) -> (&'static str, &Verdict) {
    match answer {
        Answer::Path(p) if write => ("write", &p.write),
        Answer::Path(p) => ("read", &p.read),
        Answer::Host(h) => ("connect", &h.connect),
    }
}

/// The answer for a person.
pub fn lines(answer: &Answer) -> Vec<String> {
    let mut out = Vec::new();
    match answer {
        Answer::Path(p) => {
            let exists = if p.exists { "exists" } else { "does not exist" };
            out.push(format!("path     {} ({exists})", p.path.display()));
            verdict(&mut out, "read", &p.read);
            verdict(&mut out, "write", &p.write);
        }
        Answer::Host(h) => {
            out.push(format!(
                "host     {}:{} (network mode {})",
                h.host, h.port, h.mode
            ));
            verdict(&mut out, "connect", &h.connect);
            for n in &h.notes {
                out.push(format!("note     {n}"));
            }
        }
    }
    out
}

fn verdict(out: &mut Vec<String>, name: &str, v: &Verdict) {
    let yes = if v.allowed { "yes" } else { "no" };
    out.push(format!(
        "{name:<8} {yes} ({}): {}",
        v.state.replace('_', " "),
        v.rule.described()
    ));
    if v.allowed {
        return;
    }
    out.push(format!(
        "         enforced by {}",
        v.enforcement.described()
    ));
    match &v.allow {
        Some(allow) => out.push(format!("         to allow: {allow}")),
        None => out.push(
            "         to allow: nothing in the policy can; make that change on the host".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stockade::why::{Enforcement, PathAnswer, Rule};

    fn masked() -> Verdict {
        Verdict {
            allowed: false,
            state: "masked",
            rule: Rule {
                text: "`~/notes` in filesystem.deny_read".into(),
                entry: Some("~/notes".into()),
                key: Some("filesystem.deny_read"),
                origin: "policy file".into(),
                file: Some("/p/stockade.toml".into()),
                line: Some(3),
            },
            enforcement: Enforcement {
                by: "kernel: an empty, unreadable file or directory is mounted over it",
                observed: false,
                sees: Some("EACCES"),
            },
            allow: Some("`--allow-read /h/notes`".into()),
        }
    }

    #[test]
    fn a_path_answer_names_rule_file_line_enforcement_and_flag() {
        let answer = Answer::Path(PathAnswer {
            target: "~/notes".into(),
            path: "/h/notes".into(),
            exists: true,
            read: masked(),
            write: masked(),
        });
        let text = lines(&answer);
        assert_eq!(text[0], "path     /h/notes (exists)");
        assert_eq!(
            text[1],
            "read     no (masked): `~/notes` in filesystem.deny_read [policy file /p/stockade.toml line 3]"
        );
        assert!(
            text[2].contains(
                "not observed by stockade: the command sees EACCES, no violation is reported"
            ),
            "{}",
            text[2]
        );
        assert_eq!(text[3], "         to allow: `--allow-read /h/notes`");
        assert_eq!(asked(&answer, true).0, "write");
        let json = serde_json::to_value(&answer).unwrap();
        assert_eq!(json["kind"], "path");
        assert_eq!(json["read"]["rule"]["line"], 3);
        assert_eq!(json["read"]["enforcement"]["observed"], false);
        assert_eq!(json["write"]["allow"], "`--allow-read /h/notes`");
    }
}
