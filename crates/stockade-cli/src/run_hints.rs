//! `stockade run --hints` (or `hints = true` in the policy file): after the run, one
//! `<stockade-hint>` block on stderr listing what the run was refused that stockade saw
//! (violations, network refusals, limits reached, the time limit), each with the rule that
//! fired and the flag or policy line that would allow it. For an agent reading the command's
//! output: one place, one line per denial. Nothing is printed when nothing was refused.
//!
//! Beside the refusals, what failed for want of network that stockade saw: an allowed
//! destination the proxy could not reach (`unreachable: ...`, with the host and the error),
//! and, under `--net none`, a command that tried the network it does not have (`network is
//! off in this run: ...`, with the flags that would give it one); under `--net proxy`, one
//! that went around the proxy (`went around the proxy: ...`).

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

/// The `what` of the line for a run under `--net none` whose command tried the network.
const NETWORK_OFF: &str = "network is off in this run";
/// The `what` of the line for a run under `--net proxy` whose command went around the proxy.
const AROUND_PROXY: &str = "went around the proxy";

impl Denial {
    fn line(&self) -> String {
        if self.what == NETWORK_OFF || self.what == AROUND_PROXY {
            return format!(
                "{} ({}): {}; to allow: {}",
                self.what, self.code, self.rule, self.allow
            );
        }
        if self.code == stockade::NETWORK_UPSTREAM_FAILED {
            return format!(
                "unreachable: {} ({}): {}; {}",
                self.what, self.code, self.rule, self.allow
            );
        }
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
                code: v.code.as_str().to_owned(),
                rule: v.action.clone(),
                allow: v.allow.unwrap_or(Code::SandboxViolation.hint()).to_owned(),
            });
            continue;
        }
        let (rule, allow) = match (v.allow, explain(&v.path)) {
            // A rule no policy line lifts, whatever covers the path.
            (Some(allow), explained) => (
                explained.map_or_else(
                    || v.action.clone(),
                    |(rule, _)| format!("{rule}; {}", v.action),
                ),
                allow.to_owned(),
            ),
            (None, explained) => match explained {
                Some((rule, Some(allow))) => (format!("{rule}; {}", v.action), allow),
                Some((rule, None)) => (
                    format!("{rule}; {}", v.action),
                    "nothing in the policy: make that change on the host".to_owned(),
                ),
                None => (v.action.clone(), Code::SandboxViolation.hint().to_owned()),
            },
        };
        out.push(Denial {
            what: format!("{kind} {}", v.path.display()),
            code: v.code.as_str().to_owned(),
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
    // An allowed destination the proxy could not reach: the client saw a closed tunnel or a
    // 502; this says which host and why.
    for e in result
        .network
        .iter()
        .filter(|e| e.code == stockade::NETWORK_UPSTREAM_FAILED)
    {
        out.push(Denial {
            what: format!("{}:{} ({})", e.host, e.port, e.protocol),
            code: e.code.to_owned(),
            rule: e.reason.clone().unwrap_or_else(|| e.rule.clone()),
            allow: e.hint.clone().unwrap_or_default(),
        });
    }
    if let Some(t) = result
        .outcome
        .network_tries
        .filter(sandbox::NetworkTries::tried)
    {
        out.push(if t.proxy {
            around_proxy(&t)
        } else {
            network_off(&t)
        });
    }
    for h in &result.outcome.limit_hits {
        out.push(Denial {
            what: format!("the {} limit", h.limit),
            code: h.code.as_str().to_owned(),
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

/// The line of a run under `--net proxy` whose command tried to connect without the proxy
/// (a tool that ignores the proxy variables): what the kernel counted, and the fix.
fn around_proxy(t: &sandbox::NetworkTries) -> Denial {
    Denial {
        what: AROUND_PROXY.into(),
        code: Code::NetworkDenied.as_str().to_owned(),
        rule: format!(
            "the command tried to reach the network without the proxy: {} (--net proxy: only \
             the proxy at http://127.0.0.1:3128 leads out; HTTP_PROXY, HTTPS_PROXY and \
             ALL_PROXY name it)",
            tried(t).join("; ")
        ),
        allow: "point the tool at the proxy (its own proxy setting, e.g. `--proxy \
                http://127.0.0.1:3128`; for SOCKS, socks5h://127.0.0.1:3128), then allow \
                what it asks for with `--allow-domain`"
            .into(),
    }
}

/// What the kernel counted, in words.
fn tried(t: &sandbox::NetworkTries) -> Vec<String> {
    let mut tried = Vec::new();
    if t.no_route > 0 {
        tried.push(format!(
            "{} connection(s) or name lookup(s) found no route out",
            t.no_route
        ));
    }
    if t.lookups > 0 {
        tried.push(format!(
            "{} name lookup(s) found no resolver (the host's, on loopback, is not inside)",
            t.lookups
        ));
    }
    tried
}

/// The line of a run under `--net none` whose command tried the network: what the kernel
/// counted, and the fixes (a toolchain's preset, or the proxy with the domain it needs).
fn network_off(t: &sandbox::NetworkTries) -> Denial {
    let presets: Vec<String> = policy::PRESETS
        .iter()
        .filter(|p| p.kind == policy::PresetKind::Toolchain && !p.allow_domains.is_empty())
        .map(|p| format!("`--preset {}`", p.name))
        .collect();
    Denial {
        what: NETWORK_OFF.into(),
        code: Code::NetworkDenied.as_str().to_owned(),
        rule: format!(
            "the command tried to reach the network: {} (--net none: only loopback inside)",
            tried(t).join("; ")
        ),
        allow: format!(
            "a toolchain's preset opens its registry ({}), or `--net proxy --allow-domain \
             DOMAIN` for the hosts it needs (`mode = \"proxy\"` and \
             `allow_domains = [\"DOMAIN\"]` under [network] in the policy file)",
            presets.join(", ")
        ),
    }
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
    fn a_command_that_tried_the_network_under_none_gets_the_fix() {
        let d = network_off(&sandbox::NetworkTries {
            no_route: 3,
            lookups: 0,
            proxy: false,
        });
        let b = block(&[d]).unwrap();
        assert!(
            b.contains("\nnetwork is off in this run (E_NETWORK_DENIED): the command tried to reach the network: 3 connection(s) or name lookup(s) found no route out (--net none: only loopback inside); to allow: "),
            "{b}"
        );
        assert!(
            b.contains("`--preset pip`") && b.contains("`--net proxy --allow-domain DOMAIN`"),
            "{b}"
        );
        let d = network_off(&sandbox::NetworkTries {
            no_route: 0,
            lookups: 2,
            proxy: false,
        });
        assert!(
            d.rule.contains("2 name lookup(s) found no resolver"),
            "{d:?}"
        );
        assert!(!d.rule.contains("no route"), "{d:?}");
        let d = around_proxy(&sandbox::NetworkTries {
            no_route: 2,
            lookups: 0,
            proxy: true,
        });
        let b = block(&[d]).unwrap();
        assert!(
            b.contains("\nwent around the proxy (E_NETWORK_DENIED): the command tried to reach the network without the proxy: 2 connection(s) or name lookup(s) found no route out"),
            "{b}"
        );
        assert!(!b.contains("network is off"), "{b}");
    }

    #[test]
    fn an_unreachable_upstream_is_its_own_line() {
        let d = Denial {
            what: "db.test:443 (connect)".into(),
            code: stockade::NETWORK_UPSTREAM_FAILED.into(),
            rule: "allowed, but unreachable from the host: 198.51.100.9:443 (connect failed: Connection refused (os error 111))".into(),
            allow: "the rules let it through".into(),
        };
        let b = block(&[d]).unwrap();
        assert!(
            b.contains("\nunreachable: db.test:443 (connect) (NET_UPSTREAM_FAILED): allowed, but unreachable from the host: 198.51.100.9:443 (connect failed: Connection refused (os error 111)); the rules let it through\n"),
            "{b}"
        );
        assert!(!b.contains("blocked:"), "{b}");
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
