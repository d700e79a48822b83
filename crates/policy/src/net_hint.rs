//! What would allow a destination the network rules refused: the exact flag and the policy
//! file line, for the egress proxy's refusals (`E_NETWORK_DENIED`: the line on stderr, the
//! report and the audit log). Pure: the rule that refused is all it needs.
//!
//! ```
//! use policy::net::RULE_NO_MATCH;
//! let hint = policy::allow_hint("Example.COM", 443, RULE_NO_MATCH);
//! assert!(hint.unwrap().starts_with("allow it with `--allow-domain example.com`"));
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::net::{
    NetList, Target, RULE_INVALID_HOST, RULE_INVALID_PORT, RULE_IP_LITERAL, RULE_NO_MATCH,
};

/// Where the proxy that refused runs: what its loopback is to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HintContext {
    /// The proxy of a sandboxed run: its loopback is the host's, not the sandbox's own,
    /// which clients inside reach directly (`NO_PROXY`).
    Sandbox,
    /// `stockade proxy` on its own: the client and the proxy share this machine's loopback.
    Standalone,
}

/// What would allow `host:port` (as the client named it), refused under `rule`: a rule of a
/// denied [`crate::NetDecision`], or `ssrf:<class>` for a destination that resolved to an
/// address of this machine or of a private network. Where no rule can allow it, says why.
/// `None` for a rule this function does not know. A sandboxed run's proxy, the resolved
/// address unknown (see [`allow_hint_for`]).
pub fn allow_hint(host: &str, port: u16, rule: &str) -> Option<String> {
    allow_hint_for(host, port, rule, None, HintContext::Sandbox)
}

/// [`allow_hint`], knowing the address the proxy resolved a name to (`resolved`, for an
/// `ssrf:` refusal: the hint then names that address, since a grant of the name would follow
/// its DNS wherever it points later) and where the proxy runs (`context`).
pub fn allow_hint_for(
    host: &str,
    port: u16,
    rule: &str,
    resolved: Option<IpAddr>,
    context: HintContext,
) -> Option<String> {
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
        return loopback_hint(&target, port, rule, resolved, context);
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

/// Whether the client asked the proxy for a loopback destination: a loopback address, the
/// unspecified address (`0.0.0.0`, `::`: as a destination, the connecting machine's own
/// loopback), `localhost` (or a name below it), or a name that resolved to either
/// (`ssrf:loopback`, `ssrf:unspecified`).
fn is_loopback(target: &Target, rule: &str) -> bool {
    rule == "ssrf:loopback"
        || rule == "ssrf:unspecified"
        || match target {
            Target::Ip(ip) => {
                let ip = ip.to_canonical();
                ip.is_loopback() || ip.is_unspecified()
            }
            Target::Name(name) => name == "localhost" || name.ends_with(".localhost"),
        }
}

/// A loopback destination through the proxy is the loopback of the machine the proxy
/// connects from: under a run, the **host's**. A server the run started listens on the
/// sandbox's own loopback, which clients reach directly (`NO_PROXY` covers it). So the hint
/// says that first, and names the host grant only as what it is, never as the way to a server
/// inside. The grant named is an address: `127.0.0.1:P`/`[::1]:P` for the unspecified address
/// (no entry names that), the resolved address for a name (a name grant follows its DNS), and
/// `localhost:P` or the loopback address as asked otherwise.
fn loopback_hint(
    target: &Target,
    port: u16,
    rule: &str,
    resolved: Option<IpAddr>,
    context: HintContext,
) -> Option<String> {
    let addr_entry = |ip: IpAddr| host_entry(&Target::Ip(ip), port);
    let unspecified_entries = |v6: bool| {
        let (v4, v6e) = (
            addr_entry(IpAddr::V4(Ipv4Addr::LOCALHOST))?,
            addr_entry(IpAddr::V6(Ipv6Addr::LOCALHOST))?,
        );
        Some(if v6 { (v6e, Some(v4)) } else { (v4, Some(v6e)) })
    };
    // (the grant to name, another form of it, a note before it)
    let (entry, other, note) = match target {
        Target::Ip(ip) if ip.to_canonical().is_unspecified() => {
            let (entry, other) = unspecified_entries(ip.to_canonical().is_ipv6())?;
            let note = format!(
                "`{ip}` is no destination (as one, it is the loopback of the machine that \
                 connects), and no allow_hosts entry names it; "
            );
            (entry, other, note)
        }
        Target::Ip(_) => (host_entry(target, port)?, None, String::new()),
        Target::Name(name) if rule == "ssrf:unspecified" => {
            let (entry, other) = unspecified_entries(resolved.is_some_and(|ip| ip.is_ipv6()))?;
            let note = format!(
                "`{name}` resolves to the unspecified address{} on the host (as blocking hosts \
                 files map names), which the proxy never connects to, whatever the grant; ",
                resolved.map(|ip| format!(" {ip}")).unwrap_or_default()
            );
            (entry, other, note)
        }
        Target::Name(name) if rule == "ssrf:loopback" => match resolved {
            Some(ip) => (
                addr_entry(ip.to_canonical())?,
                None,
                format!(
                    "`{name}` resolves to {} on the host (a grant of the name, `--allow-host \
                     {name}:{port}`, would follow its DNS to whatever address it names later, \
                     private ones too); ",
                    ip.to_canonical()
                ),
            ),
            None => (
                addr_entry(IpAddr::V4(Ipv4Addr::LOCALHOST))?,
                None,
                format!(
                    "`{name}` resolves to a loopback address on the host (name that address: a \
                     grant of the name, `--allow-host {name}:{port}`, would follow its DNS to \
                     whatever address it names later, private ones too); "
                ),
            ),
        },
        Target::Name(_) => (host_entry(target, port)?, None, String::new()),
    };
    let or_other = other
        .map(|o| format!(" (or `--allow-host {o}`)"))
        .unwrap_or_default();
    let grant = format!(
        "a separate grant: `--allow-host {entry}`{or_other}, or `allow_hosts = [\"{entry}\"]` \
         under [network] in the policy file"
    );
    Some(match context {
        HintContext::Sandbox => format!(
            "this went through the proxy, where loopback is the host's, not this sandbox's: \
             {note}a server started inside the run is reached directly on the sandbox's own \
             loopback (NO_PROXY covers localhost, 127.0.0.1, ::1, 0.0.0.0 and ::, less a name \
             the policy grants on the host's loopback; a client that ignores NO_PROXY needs its \
             own no-proxy setting, e.g. `curl --noproxy '*'`); only to open the host's own port \
             {port} to the sandbox, {grant}"
        ),
        HintContext::Standalone => format!(
            "loopback through this proxy is this machine's own (the proxy connects from here): \
             {note}to open port {port} of this machine to the proxy's clients, {grant}"
        ),
    })
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

    /// Issue 31: a dev server inside prints `http://0.0.0.0:P/`. Through the proxy that is
    /// the host's loopback: the hint says so, says a server inside is reached directly, and
    /// names the host's port as `127.0.0.1:P`/`[::1]:P` (an entry of the unspecified address
    /// is refused), never `0.0.0.0:P`. A name resolving to it gets the same. Control: the
    /// names entries are accepted and allow the loopback address.
    #[test]
    fn the_unspecified_address_is_explained_as_loopback_and_named_as_its_address() {
        for (host, rule, entry, other) in [
            ("0.0.0.0", RULE_IP_LITERAL, "127.0.0.1:8000", "[::1]:8000"),
            ("[::]", RULE_IP_LITERAL, "[::1]:8000", "127.0.0.1:8000"),
            (
                "::ffff:0.0.0.0",
                RULE_IP_LITERAL,
                "127.0.0.1:8000",
                "[::1]:8000",
            ),
            (
                "0.0.0.0",
                "ssrf:unspecified",
                "127.0.0.1:8000",
                "[::1]:8000",
            ),
            (
                "zero.example",
                "ssrf:unspecified",
                "127.0.0.1:8000",
                "[::1]:8000",
            ),
        ] {
            let h = allow_hint(host, 8000, rule).unwrap();
            assert!(
                h.starts_with("this went through the proxy, where loopback is the host's"),
                "{host}: {h}"
            );
            assert!(h.contains("sandbox's own loopback") && h.contains("0.0.0.0 and ::"));
            assert!(
                h.contains(&format!(
                    "only to open the host's own port 8000 to the sandbox, a separate grant: \
                     `--allow-host {entry}` (or `--allow-host {other}`)"
                )),
                "{host}: {h}"
            );
            assert!(
                !h.contains("0.0.0.0:8000") && !h.contains("[::]:8000"),
                "{h}"
            );
            let (_, flag) = h.split_once("grant: ").unwrap();
            let ip: std::net::IpAddr = entry
                .rsplit_once(':')
                .unwrap()
                .0
                .trim_matches(['[', ']'])
                .parse()
                .unwrap();
            assert!(
                rules_after(flag).check(&ip.to_string(), 8000).allowed,
                "{h}"
            );
        }
        let h = allow_hint("zero.example", 8000, "ssrf:unspecified").unwrap();
        assert!(
            h.contains("`zero.example` resolves to the unspecified address"),
            "{h}"
        );
        assert!(h.contains("never connects to"), "{h}");
    }

    /// Issue 31: a name that resolved to loopback gets the grant of the address it resolved
    /// to, and is told a grant of the name follows its DNS (to any address, later); known or
    /// not, the address is what is named. Control: the address grant does not admit the name
    /// resolving elsewhere, which the name grant would.
    #[test]
    fn a_name_resolving_to_loopback_gets_its_address_named_not_the_name() {
        for (resolved, entry) in [
            (Some("127.0.0.1"), "127.0.0.1:8000"),
            (Some("::1"), "[::1]:8000"),
            (Some("::ffff:127.0.0.2"), "127.0.0.2:8000"),
            (None, "127.0.0.1:8000"),
        ] {
            let ip = resolved.map(|r| r.parse::<IpAddr>().unwrap());
            let h = allow_hint_for(
                "db.example",
                8000,
                "ssrf:loopback",
                ip,
                HintContext::Sandbox,
            )
            .unwrap();
            assert!(
                h.starts_with("this went through the proxy, where loopback is the host's"),
                "{h}"
            );
            assert!(
                h.contains(&format!("a separate grant: `--allow-host {entry}`")),
                "{resolved:?}: {h}"
            );
            assert!(
                h.contains("`--allow-host db.example:8000`, would follow its DNS"),
                "{h}"
            );
            let (_, flag) = h.split_once("grant: ").unwrap();
            let rules = rules_after(flag);
            let at: IpAddr = entry
                .rsplit_once(':')
                .unwrap()
                .0
                .trim_matches(['[', ']'])
                .parse()
                .unwrap();
            assert!(rules.private_allowed("db.example", 8000, at), "{h}");
            let elsewhere: IpAddr = "fd00::2".parse().unwrap();
            assert!(!rules.private_allowed("db.example", 8000, elsewhere), "{h}");
            let name_grant = rules_after("`--allow-host db.example:8000`");
            assert!(name_grant.private_allowed("db.example", 8000, elsewhere));
        }
    }

    /// Issue 31: `stockade proxy` on its own has no sandbox: its loopback hint says the
    /// loopback is this machine's and names the grant, nothing about a sandbox or NO_PROXY.
    /// Control: the run's proxy says the sandbox's.
    #[test]
    fn the_standalone_proxy_says_loopback_is_this_machines() {
        let h = allow_hint_for(
            "127.0.0.1",
            8000,
            RULE_IP_LITERAL,
            None,
            HintContext::Standalone,
        )
        .unwrap();
        assert!(
            h.starts_with("loopback through this proxy is this machine's own"),
            "{h}"
        );
        assert!(
            h.contains("a separate grant: `--allow-host 127.0.0.1:8000`"),
            "{h}"
        );
        assert!(!h.contains("sandbox") && !h.contains("NO_PROXY"), "{h}");
        let run = allow_hint("127.0.0.1", 8000, RULE_IP_LITERAL).unwrap();
        assert!(run.contains("not this sandbox's"), "{run}");
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
