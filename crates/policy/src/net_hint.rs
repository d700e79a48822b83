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
    if is_loopback(&target, rule) {
        return host_entry(&target, port).map(|entry| host_loopback(&entry, port));
    }
    if rule == RULE_NO_MATCH {
        if let Target::Name(name) = &target {
            if let Some(hint) = preset_hint(name) {
                return Some(hint);
            }
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

/// Whether the client asked the proxy for a loopback destination: a loopback address,
/// `localhost` (or a name below it), or a name that resolved to loopback (`ssrf:loopback`).
fn is_loopback(target: &Target, rule: &str) -> bool {
    rule == "ssrf:loopback"
        || match target {
            Target::Ip(std::net::IpAddr::V4(ip)) => ip.is_loopback(),
            Target::Ip(std::net::IpAddr::V6(ip)) => {
                ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
            Target::Name(name) => name == "localhost" || name.ends_with(".localhost"),
        }
}

/// A loopback destination through the proxy is the **host's** loopback: the proxy connects
/// from the host. A server the run started listens on the sandbox's own loopback, which
/// clients reach directly (`NO_PROXY` covers it). So the hint says that first, and names the
/// host grant only as what it is, never as the way to a server inside.
fn host_loopback(entry: &str, port: u16) -> String {
    format!(
        "this went through the proxy, where loopback is the host's, not this sandbox's: a \
         server started inside the run is reached directly on the sandbox's own loopback \
         (NO_PROXY covers localhost, 127.0.0.1 and ::1, less a name the policy grants on the \
         host's loopback; a client that ignores NO_PROXY needs its own no-proxy setting, e.g. \
         `curl --noproxy '*'`); only to open the host's own port \
         {port} to the sandbox, a separate grant: `--allow-host {entry}`, or \
         `allow_hosts = [\"{entry}\"]` under [network] in the policy file"
    )
}

/// A refused name one toolchain preset opens (pypi.org, files.pythonhosted.org: `pip`):
/// the preset, which opens every domain the tool goes on to ask for (allowing only this one
/// fixes the next failure alone), and the single domain as the narrower choice.
fn preset_hint(name: &str) -> Option<String> {
    let entry = NetList::AllowDomains.canonicalize(name).ok()?;
    let p = crate::presets::PRESETS.iter().find(|p| {
        p.kind == crate::presets::PresetKind::Toolchain && p.allow_domains.contains(&entry.as_str())
    })?;
    Some(format!(
        "`{entry}` is one of preset {}'s domains ({}): allow them all with `--preset {}`, or \
         `presets = [\"{}\"]` in the policy file (its cache comes with it); only this \
         one: `--allow-domain {entry}`",
        p.name,
        p.allow_domains.join(", "),
        p.name,
        p.name
    ))
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
        let h = allow_hint("192.0.2.7", 8080, RULE_IP_LITERAL).unwrap();
        assert!(
            h.starts_with("allow it with `--allow-host 192.0.2.7:8080`"),
            "{h}"
        );
        assert!(rules_after(&h).check("192.0.2.7", 8080).allowed);
        let h = allow_hint("[2001:db8::1]", 8080, RULE_IP_LITERAL).unwrap();
        assert!(h.contains("`--allow-host [2001:db8::1]:8080`"), "{h}");
        let h = allow_hint("db.example", 5432, "ssrf:private").unwrap();
        assert!(
            h.contains("`--allow-host db.example:5432`")
                && h.contains("`allow_hosts = [\"db.example:5432\"]`"),
            "{h}"
        );
        let private = "10.0.0.1".parse().unwrap();
        assert!(rules_after(&h).private_allowed("db.example", 5432, private));
    }

    /// Issue 31: a loopback target through the proxy is the host's loopback. The hint says
    /// so before anything else, points at the sandbox's own loopback for a server inside, and
    /// names the host grant only as the host's port (it still works as that grant).
    #[test]
    fn a_loopback_target_is_explained_as_the_hosts_not_the_sandboxs() {
        for (host, rule, entry) in [
            ("127.0.0.1", RULE_IP_LITERAL, "127.0.0.1:8000"),
            ("127.0.0.2", RULE_IP_LITERAL, "127.0.0.2:8000"),
            ("[::1]", RULE_IP_LITERAL, "[::1]:8000"),
            ("[::ffff:127.0.0.1]", RULE_IP_LITERAL, "127.0.0.1:8000"),
            ("localhost", RULE_NO_MATCH, "localhost:8000"),
            ("app.localhost", RULE_NO_MATCH, "app.localhost:8000"),
            ("db.example", "ssrf:loopback", "db.example:8000"),
        ] {
            let h = allow_hint(host, 8000, rule).unwrap();
            assert!(
                h.starts_with("this went through the proxy, where loopback is the host's"),
                "{host}: {h}"
            );
            assert!(
                h.contains("sandbox's own loopback") && h.contains("NO_PROXY"),
                "{h}"
            );
            assert!(!h.contains("allow it with"), "{h}");
            let grant = format!("only to open the host's own port 8000 to the sandbox, a separate grant: `--allow-host {entry}`");
            assert!(h.contains(&grant), "{host}: {h}");
            let (_, flag) = h.split_once("grant: ").unwrap();
            assert!(rules_after(flag).check(host, 8000).allowed, "{host}: {h}");
        }
        // Control: an address that is not loopback keeps the plain hint.
        let h = allow_hint("128.0.0.1", 8000, RULE_IP_LITERAL).unwrap();
        assert!(
            h.starts_with("allow it with `--allow-host 128.0.0.1:8000`"),
            "{h}"
        );
    }

    /// Issue 31: a refused domain one toolchain preset opens names the preset first.
    #[test]
    fn a_domain_a_preset_opens_names_the_preset() {
        for (host, preset) in [
            ("pypi.org", "pip"),
            ("Files.PythonHosted.org.", "pip"),
            ("registry.npmjs.org", "npm"),
            ("index.crates.io", "cargo"),
            ("proxy.golang.org", "go"),
        ] {
            let h = allow_hint(host, 443, RULE_NO_MATCH).unwrap();
            assert!(
                h.contains(&format!("allow them all with `--preset {preset}`"))
                    && h.contains(&format!("`presets = [\"{preset}\"]`")),
                "{host}: {h}"
            );
            let name = host.trim_end_matches('.').to_ascii_lowercase();
            assert!(
                h.contains(&format!("only this one: `--allow-domain {name}`")),
                "{h}"
            );
            let p = crate::presets::preset(preset).unwrap();
            assert!(p.allow_domains.contains(&name.as_str()));
        }
        // Control: a domain no preset opens, and one only an agent preset opens (an agent is
        // not a fix for a tool's download), get the single domain.
        for host in ["example.com", "models.dev"] {
            let h = allow_hint(host, 443, RULE_NO_MATCH).unwrap();
            assert!(h.starts_with("allow it with `--allow-domain"), "{h}");
            assert!(!h.contains("--preset"), "{h}");
        }
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
