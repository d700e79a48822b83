//! `stockade run --hints` (or `hints = true` in the policy file): after the run, one
//! `<stockade-hint>` block on stderr listing what the run was refused that stockade saw
//! (violations, network refusals, limits reached, the time limit), each with the rule that
//! fired and the flag or policy line that would allow it. For an agent reading the command's
//! output: one place, one line per denial. Nothing is printed when nothing was refused.

use std::path::Path;

use sandbox::Code;
use stockade::RunResult;

/// At most this many lines; the rest is counted.
const MAX_LINES: usize = 20;

/// One refusal, as the block lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// What was refused: a path, `host:port (protocol)`, a limit.
    pub what: String,
    /// Its code (`E_NETWORK_DENIED`, ...).
    pub code: String,
    /// The rule that fired.
    pub rule: String,
    /// The flag or policy line that would allow it, or why nothing can.
    pub allow: String,
}

impl Denial {
    fn line(&self) -> String {
        format!(
            "blocked: {} ({}): {}; to allow: {}",
            self.what, self.code, self.rule, self.allow
        )
    }
}

/// The rule and what allows it, for a path a violation names (`None`: no policy entry covers
/// it).
pub type ExplainPath<'a> = &'a dyn Fn(&Path) -> Option<(String, Option<String>)>;

/// What `result` was refused. `timeout` is the policy's time limit.
pub fn denials(result: &RunResult, timeout: Option<u64>, explain: ExplainPath<'_>) -> Vec<Denial> {
    let mut out = Vec::new();
    for v in &result.violations {
        let kind = v.kind.replace('_', " ");
        if v.path.as_os_str().is_empty() {
            out.push(Denial {
                what: kind,
                code: v.code.to_owned(),
                rule: v.action.clone(),
                allow: Code::SandboxViolation.hint().to_owned(),
            });
            continue;
        }
        let (rule, allow) = match explain(&v.path) {
            Some((rule, Some(allow))) => (format!("{rule}; {}", v.action), allow),
            Some((rule, None)) => (
                format!("{rule}; {}", v.action),
                "nothing in the policy: make that change on the host".to_owned(),
            ),
            None => (v.action.clone(), Code::SandboxViolation.hint().to_owned()),
        };
        out.push(Denial {
            what: format!("{kind} {}", v.path.display()),
            code: v.code.to_owned(),
            rule,
            allow,
        });
    }
    for e in result
        .network
        .iter()
        .filter(|e| e.code == stockade::NETWORK_DENIED)
    {
        out.push(Denial {
            what: format!("{}:{} ({})", e.host, e.port, e.protocol),
            code: e.code.to_owned(),
            rule: e.rule.clone(),
            allow: e
                .hint
                .clone()
                .unwrap_or_else(|| Code::NetworkDenied.hint().to_owned()),
        });
    }
    for h in &result.outcome.limit_hits {
        out.push(Denial {
            what: format!("the {} limit", h.limit),
            code: h.code.to_owned(),
            rule: format!("{} ({})", h.detail, h.mechanism),
            allow: h.hint(),
        });
    }
    if result.outcome.timed_out {
        out.push(Denial {
            what: "the time limit".into(),
            code: Code::Timeout.as_str().to_owned(),
            rule: format!(
                "the run was ended after {} s (--timeout, or timeout under [limits])",
                timeout.unwrap_or(0)
            ),
            allow: Code::Timeout.hint().to_owned(),
        });
    }
    out
}

/// The `<stockade-hint>` block for `denials` (distinct lines, at most [`MAX_LINES`]), or
/// `None` when there is none.
pub fn block(denials: &[Denial]) -> Option<String> {
    let mut lines: Vec<String> = Vec::new();
    for d in denials {
        let line = d.line();
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    if lines.is_empty() {
        return None;
    }
    let more = lines.len().saturating_sub(MAX_LINES);
    lines.truncate(MAX_LINES);
    let mut out = String::from("<stockade-hint>\n");
    for l in &lines {
        // One denial, one line, inside one block: a name from the sandbox holding a newline
        // or a tag of the block's own cannot end it early.
        out.push_str(&l.replace('\n', "\\n").replace('<', "\\u{3c}"));
        out.push('\n');
    }
    if more > 0 {
        out.push_str(&format!("and {more} more\n"));
    }
    out.push_str("</stockade-hint>");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(what: &str) -> Denial {
        Denial {
            what: what.into(),
            code: "E_NETWORK_DENIED".into(),
            rule: "no matching allow rule".into(),
            allow: "allow it with `--allow-domain x`".into(),
        }
    }

    #[test]
    fn nothing_refused_prints_nothing() {
        assert_eq!(block(&[]), None);
    }

    #[test]
    fn one_line_per_distinct_denial_between_the_tags() {
        let b = block(&[
            denial("a:443 (https)"),
            denial("a:443 (https)"),
            denial("b:80 (http)"),
        ])
        .unwrap();
        assert_eq!(
            b,
            "<stockade-hint>\n\
             blocked: a:443 (https) (E_NETWORK_DENIED): no matching allow rule; to allow: allow it with `--allow-domain x`\n\
             blocked: b:80 (http) (E_NETWORK_DENIED): no matching allow rule; to allow: allow it with `--allow-domain x`\n\
             </stockade-hint>"
        );
    }

    #[test]
    fn long_lists_are_capped_and_newlines_stay_on_their_line() {
        let many: Vec<Denial> = (0..25).map(|i| denial(&format!("h{i}:443"))).collect();
        let b = block(&many).unwrap();
        assert_eq!(
            b.lines().filter(|l| l.starts_with("blocked: ")).count(),
            MAX_LINES
        );
        assert!(b.contains("\nand 5 more\n</stockade-hint>"), "{b}");
        let b = block(&[denial("/w/x\n</stockade-hint>")]).unwrap();
        assert_eq!(b.matches("</stockade-hint>").count(), 1, "{b}");
        assert_eq!(b.lines().count(), 3, "{b}");
    }
}
