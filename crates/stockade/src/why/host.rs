//! What the policy does to a destination: the network mode, then the rule of
//! [`policy::NetRules`] the egress proxy would apply, the SSRF check on addresses of this
//! machine and private networks, and a credential route to the host.

use std::net::IpAddr;

use policy::net::NetList;
use policy::origin::{Field, Setting};
use policy::{NetworkMode, Policy, Target};

use super::rule::RuleFinder;
use super::{Enforcement, HostAnswer, Rule, Verdict};
use crate::Error;

/// The port when none is given.
const DEFAULT_PORT: u16 = 443;

/// `HOST[:PORT]` (`[V6]:PORT`, or a bare IPv6 address) → host and port (443 by default).
pub fn split_target(target: &str) -> Result<(String, u16), Error> {
    let bad = |why: &str| Error::Usage {
        message: format!("`{target}` is neither a path nor HOST[:PORT]: {why}"),
        hint:
            "give a path with a `/` (`./FILE`), or a destination as HOST, HOST:PORT or [IPV6]:PORT"
                .into(),
    };
    let (host, port) = if let Some(inner) = target.strip_prefix('[') {
        let (h, after) = inner.split_once(']').ok_or_else(|| bad("no closing `]`"))?;
        match after.strip_prefix(':') {
            Some(p) => (h, Some(p)),
            None if after.is_empty() => (h, None),
            None => return Err(bad("text after `]`")),
        }
    } else if target.matches(':').count() > 1 {
        (target, None)
    } else {
        match target.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (target, None),
        }
    };
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| bad("the port is not a number from 0 to 65535"))?,
        None => DEFAULT_PORT,
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    Ok((host.to_owned(), port))
}

const PROXY: Enforcement = Enforcement {
    by: "stockade: the egress proxy refuses it (E_NETWORK_DENIED)",
    observed: true,
    sees: Some("HTTP 403 (or a refused CONNECT or SOCKS request)"),
};

/// What the policy does to `target` (`HOST[:PORT]`).
pub fn explain(
    policy: &Policy,
    finder: &RuleFinder<'_>,
    target: &str,
) -> Result<HostAnswer, Error> {
    let (host, port) = split_target(target)?;
    let host = policy::host::normalize_host(&host).unwrap_or(host);
    let rules = policy::NetRules::new(&policy.network)?;
    let decision = rules.check(&host, port);
    let mut notes = Vec::new();
    let ip = match Target::parse(&host) {
        Some(Target::Ip(ip)) => Some(ip),
        _ => None,
    };
    let ssrf = ip.and_then(net::ssrf::forbidden);
    match (ip, ssrf) {
        (Some(_), Some(class)) => notes.push(format!("the address is {}", class.describe())),
        (Some(_), None) => notes.push("the address is public".into()),
        (None, _) => notes.push(
            "once resolved, an address of this machine or of a private network is refused unless an exact allow_hosts entry names the host (the SSRF check)"
                .into(),
        ),
    }
    notes.extend(credential_routes(policy, &host, port));
    if policy.network.mode == NetworkMode::Proxy {
        notes.push(
            "only connections through the proxy are checked and reported: one that bypasses it fails inside the sandbox's network namespace, not observed by stockade"
                .into(),
        );
    }
    let mode_rule = |text: String| finder.setting(Setting::NetworkMode, "network.mode", text);
    let mode = policy.network.mode;
    let (mode_name, connect) = match mode {
        NetworkMode::Host => (
            "host",
            Verdict {
                allowed: true,
                state: "allowed",
                rule: mode_rule("network mode host: the host's network, unfiltered".into()),
                enforcement: Enforcement {
                    by: "nothing filters it",
                    observed: false,
                    sees: None,
                },
                allow: None,
            },
        ),
        NetworkMode::None => {
            let under_proxy = policy::allow_hint(&host, port, &decision.rule)
                .and_then(|h| h.strip_prefix("allow it with ").map(str::to_owned));
            let allow = match (decision.allowed, under_proxy) {
                (true, _) => "`--net proxy` (the network rules allow it)".to_owned(),
                (false, Some(h)) => format!("`--net proxy` with {h}"),
                (false, None) => "`--net proxy`, and a rule allowing it".to_owned(),
            };
            (
                "none",
                Verdict {
                    allowed: false,
                    state: "denied",
                    rule: mode_rule(
                        "network mode none: only the sandbox's own loopback; nothing reaches the host or beyond".into(),
                    ),
                    enforcement: Enforcement {
                        by: "kernel: a network namespace with loopback only",
                        observed: false,
                        sees: Some("ENETUNREACH or a failed name lookup"),
                    },
                    allow: Some(allow),
                },
            )
        }
        NetworkMode::Proxy => (
            "proxy",
            proxy_verdict(&rules, finder, &host, port, ip, ssrf.is_some(), &decision),
        ),
    };
    Ok(HostAnswer {
        target: target.to_owned(),
        host,
        port,
        mode: mode_name,
        connect,
        notes,
    })
}

/// The proxy's verdict on `host:port` under `rules`, given its `decision`.
fn proxy_verdict(
    rules: &policy::NetRules,
    finder: &RuleFinder<'_>,
    host: &str,
    port: u16,
    ip: Option<IpAddr>,
    forbidden_class: bool,
    decision: &policy::NetDecision,
) -> Verdict {
    let rule = net_rule(finder, &decision.rule);
    if !decision.allowed {
        return Verdict {
            allowed: false,
            state: "denied",
            rule,
            enforcement: PROXY,
            allow: policy::allow_hint(host, port, &decision.rule),
        };
    }
    if let Some(ip) = ip.filter(|_| forbidden_class) {
        if !rules.private_allowed(host, port, ip) {
            let ssrf =
                net::ssrf::forbidden(ip).map_or("private".to_owned(), |c| c.code().to_owned());
            let rule_name = format!("ssrf:{ssrf}");
            return Verdict {
                allowed: false,
                state: "denied",
                rule: Rule::built_in(format!(
                    "{rule_name}: an address of this machine or of a private network"
                )),
                enforcement: PROXY,
                allow: policy::allow_hint_for(
                    host,
                    port,
                    &rule_name,
                    Some(ip),
                    policy::HintContext::Sandbox,
                ),
            };
        }
    }
    Verdict {
        allowed: true,
        state: "allowed",
        rule,
        enforcement: PROXY,
        allow: None,
    }
}

/// The rule `rule` (as a [`policy::NetDecision`] names it), with its entry's origin.
fn net_rule(finder: &RuleFinder<'_>, rule: &str) -> Rule {
    for (list, field) in [
        (NetList::AllowDomains, Field::AllowDomains),
        (NetList::DenyDomains, Field::DenyDomains),
        (NetList::AllowHosts, Field::AllowHosts),
    ] {
        if let Some(entry) = rule.strip_prefix(&format!("{}:", list.key())) {
            return finder.entry(field, entry, format!("`{entry}` in {}", list.field()));
        }
    }
    Rule::built_in(rule.to_owned())
}

/// The credential routes whose real value goes to `host:port`.
fn credential_routes(policy: &Policy, host: &str, port: u16) -> Vec<String> {
    let mut out = Vec::new();
    for c in &policy.credentials {
        let route = &c.route;
        let at_hosts = route.hosts.iter().any(|h| {
            policy::credentials::parse_host_port(h).is_ok_and(|(h, p)| {
                h.trim_start_matches('[').trim_end_matches(']') == host && p == port
            })
        });
        let upstream = policy::credentials::parse_upstream(&route.upstream).is_ok_and(|u| {
            u.host.trim_start_matches('[').trim_end_matches(']') == host && u.port == port
        });
        if at_hosts {
            out.push(format!(
                "credential `{}`: the proxy puts its real value on requests to this host (the command holds a stand-in)",
                c.name
            ));
        } else if upstream {
            out.push(format!(
                "credential `{}`: its route's upstream; the command reaches it through the proxy's route URL with a stand-in",
                c.name
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_into_host_and_port() {
        assert_eq!(
            split_target("example.com").unwrap(),
            ("example.com".into(), 443)
        );
        assert_eq!(
            split_target("example.com:80").unwrap(),
            ("example.com".into(), 80)
        );
        assert_eq!(split_target("[::1]:8080").unwrap(), ("::1".into(), 8080));
        assert_eq!(split_target("::1").unwrap(), ("::1".into(), 443));
        assert!(split_target("example.com:http").is_err());
        assert!(split_target(":80").is_err());
    }

    fn answer(flags: &policy::Overrides, target: &str) -> HostAnswer {
        let policy = policy::resolve(None, flags).unwrap();
        let origins = policy::origin::Origins::new(None, flags);
        explain(&policy, &RuleFinder::new(&origins, None), target).unwrap()
    }

    #[test]
    fn proxy_rules_name_the_entry_and_the_allowing_flag() {
        let flags = policy::Overrides {
            net: Some(NetworkMode::Proxy),
            allow_domains: vec!["*.example.com".into()],
            allow_hosts: vec!["127.0.0.1:5432".into()],
            ..Default::default()
        };
        let a = answer(&flags, "api.example.com");
        assert!(a.connect.allowed, "{a:?}");
        assert_eq!(a.connect.rule.entry.as_deref(), Some("*.example.com"));
        assert_eq!(a.connect.rule.origin, "flag");
        let a = answer(&flags, "other.test:80");
        assert!(!a.connect.allowed);
        assert!(a
            .connect
            .allow
            .as_deref()
            .unwrap()
            .contains("`--allow-domain other.test`"));
        assert!(a.connect.enforcement.observed);
        let a = answer(&flags, "10.0.0.1:80");
        assert!(!a.connect.allowed);
        assert!(a
            .connect
            .allow
            .as_deref()
            .unwrap()
            .contains("`--allow-host 10.0.0.1:80`"));
        assert!(a.notes[0].contains("private network"), "{:?}", a.notes);
        assert!(answer(&flags, "127.0.0.1:5432").connect.allowed);
    }

    #[test]
    fn mode_none_is_not_observed_and_names_net_proxy() {
        let a = answer(&policy::Overrides::default(), "example.org");
        assert_eq!(a.mode, "none");
        assert!(!a.connect.allowed && !a.connect.enforcement.observed);
        assert_eq!(
            a.connect.allow.as_deref(),
            Some("`--net proxy` with `--allow-domain example.org`, or `allow_domains = [\"example.org\"]` under [network] in the policy file")
        );
    }
}
