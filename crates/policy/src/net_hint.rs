//! What would allow a destination the network rules refused: the exact flag and the policy
//! file line, for the egress proxy's refusals (`E_NETWORK_DENIED`: the line on stderr, the
//! report and the audit log). Pure: the rule that refused is all it needs.
//!
//! ```
//! use policy::net::RULE_NO_MATCH;
//! let hint = policy::allow_hint("Example.COM", 443, RULE_NO_MATCH);
//! assert!(hint.unwrap().starts_with("allow it with `--allow-domain example.com`"));
//! ```

use crate::net::{
    NetList, Target, RULE_INVALID_HOST, RULE_INVALID_PORT, RULE_IP_LITERAL, RULE_NO_MATCH,
};

/// What would allow `host:port` (as the client named it), refused under `rule`: a rule of a
/// denied [`crate::NetDecision`], or `ssrf:<class>` for a destination that resolved to an
/// address of this machine or of a private network. Where no rule can allow it, says why.
/// `None` for a rule this function does not know.
pub fn allow_hint(host: &str, port: u16, rule: &str) -> Option<String> {
    if rule == RULE_INVALID_PORT {
        return Some("no rule allows port 0".into());
    }
    if rule == RULE_INVALID_HOST {
        return Some(format!(
            "no rule allows it: `{host}` is neither a host name nor an IP address as the proxy \
             reads them (numeric forms some resolvers take for IPv4, such as `127.1`, are refused)"
        ));
    }
    if let Some(pattern) = rule.strip_prefix("deny_domains:") {
        return Some(format!(
            "`{pattern}` in deny_domains refuses it, and a deny rule wins over every allow rule: \
             drop `--deny-domain {pattern}`, or remove it from deny_domains in the policy file"
        ));
    }
    let target = Target::parse(host)?;
    if rule == RULE_NO_MATCH {
        if let Target::Name(name) = &target {
            return Some(match NetList::AllowDomains.canonicalize(name) {
                Ok(entry) => lines("--allow-domain", "allow_domains", &entry),
                Err(_) => match host_entry(&target, port) {
                    Some(entry) => format!(
                        "`{name}` cannot be an allowed domain (a whole public suffix); {}",
                        lines("--allow-host", "allow_hosts", &entry)
                    ),
                    None => format!("no rule can allow `{name}`: it is a whole public suffix"),
                },
            });
        }
    }
    let entry = host_entry(&target, port)?;
    if rule == RULE_IP_LITERAL {
        return Some(lines("--allow-host", "allow_hosts", &entry));
    }
    if rule.starts_with("ssrf:") {
        return Some(format!(
            "only an exact allow_hosts entry opens an address of this machine or of a private \
             network: {}",
            lines("--allow-host", "allow_hosts", &entry)
        ));
    }
    None
}

/// `allow it with `FLAG ENTRY`, or `KEY = ["ENTRY"]` under [network] in the policy file`.
fn lines(flag: &str, key: &str, entry: &str) -> String {
    format!(
        "allow it with `{flag} {entry}`, or `{key} = [\"{entry}\"]` under \
         [network] in the policy file"
    )
}

/// The `allow_hosts` entry for exactly `target` on `port`, if it is one.
fn host_entry(target: &Target, port: u16) -> Option<String> {
    let text = match target {
        Target::Name(name) => format!("{name}:{port}"),
        Target::Ip(ip) if ip.is_ipv6() => format!("[{ip}]:{port}"),
        Target::Ip(ip) => format!("{ip}:{port}"),
    };
    NetList::AllowHosts.canonicalize(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::NetRules;

    /// The rules after applying the hint's flag.
    fn rules_after(hint: &str) -> NetRules {
        let (flag, rest) = hint
            .split_once("`--")
            .and_then(|(_, r)| r.split_once(' '))
            .unwrap();
        let entry = rest.split('`').next().unwrap().to_owned();
        let mut network = crate::model::Network::default();
        match flag {
            "allow-domain" => network.allow_domains.push(entry),
            "allow-host" => network.allow_hosts.push(entry),
            other => panic!("unexpected flag {other}"),
        }
        NetRules::new(&network).unwrap()
    }

    #[test]
    fn a_name_no_rule_allows_gets_allow_domain_and_its_policy_line() {
        let h = allow_hint("Example.COM.", 443, RULE_NO_MATCH).unwrap();
        assert_eq!(
            h,
            "allow it with `--allow-domain example.com`, or \
             `allow_domains = [\"example.com\"]` under [network] in the policy file"
        );
        assert!(rules_after(&h).check("example.com", 443).allowed);
    }

    #[test]
    fn addresses_and_private_destinations_get_an_exact_allow_host() {
        let h = allow_hint("127.0.0.1", 8080, RULE_IP_LITERAL).unwrap();
        assert!(h.contains("`--allow-host 127.0.0.1:8080`"), "{h}");
        assert!(rules_after(&h).check("127.0.0.1", 8080).allowed);
        let h = allow_hint("[::1]", 8080, RULE_IP_LITERAL).unwrap();
        assert!(h.contains("`--allow-host [::1]:8080`"), "{h}");
        let h = allow_hint("db.example", 5432, "ssrf:loopback").unwrap();
        assert!(
            h.contains("`--allow-host db.example:5432`")
                && h.contains("`allow_hosts = [\"db.example:5432\"]`"),
            "{h}"
        );
        let private = "10.0.0.1".parse().unwrap();
        assert!(rules_after(&h).private_allowed("db.example", 5432, private));
    }

    #[test]
    fn what_no_allow_rule_can_change_says_so() {
        let h = allow_hint("x.evil.test", 443, "deny_domains:*.evil.test").unwrap();
        assert!(h.contains("drop `--deny-domain *.evil.test`"), "{h}");
        assert!(allow_hint("127.1", 80, RULE_INVALID_HOST)
            .unwrap()
            .starts_with("no rule allows it"));
        assert_eq!(
            allow_hint("a.example", 0, RULE_INVALID_PORT).unwrap(),
            "no rule allows port 0"
        );
        assert!(allow_hint("co.uk", 443, RULE_NO_MATCH)
            .unwrap()
            .contains("public suffix"));
        assert_eq!(allow_hint("a.example", 443, "something else"), None);
    }
}
