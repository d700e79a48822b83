//! The egress rules: `allow_domains`/`deny_domains` patterns and `allow_hosts` entries parsed
//! from arbitrary strings, and destinations (arbitrary host strings and ports) checked
//! against them.
//!
//! Input: lines `allow PATTERN`, `deny PATTERN`, `host ENTRY` (rules; entries the parser
//! refuses are left out), and `check HOST PORT` (a destination). Any other line is a host to
//! check on port 443.
//!
//! Invariants: nothing panics; a canonical entry is a fixed point and parses to the same rule;
//! a `deny_domains` pattern matching a name always wins (`check` denies it and
//! `private_allowed` refuses it); matching is ASCII-case-insensitive and ignores one trailing
//! dot; an allow names the rule list; the proxy and the policy share one host normalizer
//! (`policy::host`, re-exported as `net::normalize_host`): they accept the same hosts, its
//! output is a fixed point, and the name the rules saw is the name that is reached.
#![no_main]

use std::net::IpAddr;

use libfuzzer_sys::fuzz_target;
use policy::{DomainPattern, NetList, NetRules, Network, NetworkMode, Target};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut network = Network {
        mode: NetworkMode::Proxy,
        allow_domains: Vec::new(),
        deny_domains: Vec::new(),
        allow_hosts: Vec::new(),
    };
    let mut checks = Vec::new();
    for line in text.lines() {
        let (key, value) = line.split_once(' ').unwrap_or(("", line));
        let list = match key {
            "allow" => NetList::AllowDomains,
            "deny" => NetList::DenyDomains,
            "host" => NetList::AllowHosts,
            "check" => {
                let (host, port) = value.rsplit_once(' ').unwrap_or((value, "443"));
                checks.push((host.to_owned(), port.parse::<u16>().unwrap_or(443)));
                continue;
            }
            _ => {
                checks.push((line.to_owned(), 443));
                continue;
            }
        };
        let Ok(canonical) = list.canonicalize(value) else {
            continue;
        };
        assert_eq!(list.canonicalize(&canonical).as_ref(), Ok(&canonical));
        if list != NetList::AllowHosts {
            assert_eq!(
                DomainPattern::parse(&canonical),
                DomainPattern::parse(value)
            );
        }
        match list {
            NetList::AllowDomains => network.allow_domains.push(value.to_owned()),
            NetList::DenyDomains => network.deny_domains.push(value.to_owned()),
            NetList::AllowHosts => network.allow_hosts.push(value.to_owned()),
        }
    }
    let rules = match NetRules::new(&network) {
        Ok(rules) => rules,
        Err(e) => panic!("entries canonicalize accepted do not compile: {e}"),
    };
    for (host, port) in &checks {
        check(&rules, host, *port);
    }
});

fn check(rules: &NetRules, host: &str, port: u16) {
    let decision = rules.check(host, port);
    if decision.allowed {
        assert!(
            decision.rule.starts_with("allow_domains:")
                || decision.rule.starts_with("allow_hosts:"),
            "{decision:?}"
        );
    }
    assert_eq!(
        rules.check(&host.to_ascii_uppercase(), port),
        decision,
        "case: {host}"
    );
    assert_eq!(
        rules.check(&host.to_ascii_lowercase(), port),
        decision,
        "case: {host}"
    );

    let target = Target::parse(host);
    if let Some(Target::Name(name)) = &target {
        assert_eq!(
            Target::parse(&format!("{name}.")).as_ref(),
            Some(&Target::Name(name.clone())),
            "trailing dot"
        );
        assert_eq!(
            Target::parse(name).as_ref(),
            target.as_ref(),
            "not canonical"
        );
        if rules.deny_domains().iter().any(|p| p.matches(name, port)) {
            assert!(
                !decision.allowed,
                "deny must win: {host}:{port} {decision:?}"
            );
            for ip in ["127.0.0.1", "10.0.0.1", "::1"] {
                let ip: IpAddr = ip.parse().unwrap_or(IpAddr::from([127, 0, 0, 1]));
                assert!(
                    !rules.private_allowed(host, port, ip),
                    "deny must win: {host}"
                );
            }
        }
        if decision.allowed {
            assert!(
                rules.allow_domains().iter().any(|p| p.matches(name, port))
                    || rules
                        .allow_hosts()
                        .iter()
                        .any(|h| h.matches_name(name, port)),
                "allowed without a matching rule: {host}:{port} {decision:?}"
            );
        }
    }

    // One normalizer (`policy::host`, which `net` re-exports): the proxy and the rules accept
    // the same hosts, its canonical form is a fixed point, and the policy reads the proxy's
    // form as the same host, not another one.
    let normalized = net::normalize_host(host);
    assert_eq!(normalized.is_ok(), target.is_some(), "accepted by one side only: {host:?}");
    if let Ok(canonical) = &normalized {
        assert_eq!(
            net::normalize_host(canonical).as_ref(),
            Ok(canonical),
            "not a fixed point: {host:?}"
        );
    }
    if let (Ok(canonical), Some(target)) = (normalized, &target) {
        match target {
            Target::Name(name) => assert_eq!(&canonical, name, "{host}"),
            Target::Ip(ip) => assert_eq!(canonical.parse::<IpAddr>().ok(), Some(*ip), "{host}"),
        }
        assert_eq!(
            rules.check(&canonical, port),
            decision,
            "{host} vs {canonical}"
        );
    }
}
