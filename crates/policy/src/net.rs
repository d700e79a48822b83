//! Network rules for the egress proxy: domain patterns (`allow_domains`, `deny_domains`),
//! `allow_hosts` entries, and [`NetRules`], the matcher the proxy asks about every destination.
//!
//! Pure: nothing here resolves a name or opens a socket. The proxy asks [`NetRules::check`]
//! whether the destination a client named may be reached at all, resolves it itself, and asks
//! [`NetRules::private_allowed`] whether an explicit `allow_hosts` entry lifts its SSRF refusal
//! of a loopback, private or link-local address.
//!
//! Forms accepted:
//!
//! | list | entry | matches |
//! |---|---|---|
//! | `allow_domains`, `deny_domains` | `example.com` | exactly `example.com`, any port |
//! | | `*.example.com` | the subdomains of `example.com` (not `example.com` itself) |
//! | | `example.com:443`, `*.example.com:443` | the same, on port 443 only |
//! | `allow_hosts` | `127.0.0.1`, `127.0.0.1:5432` | that IPv4 address (and port) |
//! | | `::1`, `[::1]`, `[::1]:8080` | that IPv6 address (a port needs the brackets) |
//! | | `10.1.2.0/24`, `10.1.2.0/24:5432` | the addresses of that IPv4 network |
//! | | `fd00::/8`, `[fd00::/8]:5432` | the addresses of that IPv6 network |
//! | | `db.internal`, `db.internal:5432` | exactly that name (and port) |
//!
//! Names are ASCII (internationalized names in their `xn--` form), case-insensitive and
//! compared without a trailing dot. Addresses are compared as parsed addresses, IPv4-mapped
//! IPv6 (`::ffff:127.0.0.1`) as the IPv4 address it stands for. Allow lists may not open a whole
//! public suffix (`*.com`, `co.uk`, `*.github.io`); `deny_domains` may be as broad as it likes.
//!
//! ```
//! use std::net::IpAddr;
//!
//! use policy::{Network, NetworkMode, NetRules};
//!
//! let network = Network {
//!     mode: NetworkMode::Proxy,
//!     allow_domains: vec!["*.example.com".into(), "example.com:443".into()],
//!     deny_domains: vec!["evil.example.com".into()],
//!     allow_hosts: vec!["127.0.0.1:5432".into()],
//! };
//! let rules = NetRules::new(&network)?;
//! assert!(rules.check("WWW.Example.com.", 80).allowed);
//! assert_eq!(rules.check("example.com", 443).rule, "allow_domains:example.com:443");
//! assert_eq!(rules.check("example.com", 80).rule, "no matching allow rule");
//! assert_eq!(rules.check("evil.example.com", 443).rule, "deny_domains:evil.example.com");
//! assert_eq!(rules.check("8.8.8.8", 53).rule, "ip literal not in allow_hosts");
//! assert!(rules.check("[::ffff:127.0.0.1]", 5432).allowed);
//! let loopback = IpAddr::from([127, 0, 0, 1]);
//! assert!(rules.private_allowed("127.0.0.1", 5432, loopback));
//! assert!(rules.private_allowed("www.example.com", 5432, loopback));
//! assert!(!rules.private_allowed("www.example.com", 80, loopback));
//! # Ok::<(), policy::PolicyError>(())
//! ```

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::error::PolicyError;
use crate::model::Network;

/// Rule of a denied [`NetDecision`] when no allow rule matches a name.
pub const RULE_NO_MATCH: &str = "no matching allow rule";
/// Rule of a denied [`NetDecision`] for an IP literal that no `allow_hosts` entry matches.
pub const RULE_IP_LITERAL: &str = "ip literal not in allow_hosts";
/// Rule of a denied [`NetDecision`] for a host that is neither a valid name nor an IP literal.
pub const RULE_INVALID_HOST: &str = "invalid host name";
/// Rule of a denied [`NetDecision`] for port 0.
pub const RULE_INVALID_PORT: &str = "invalid port";

use crate::host::{MAX_HOST_LEN as MAX_NAME, MAX_LABEL_LEN as MAX_LABEL};

const HINT_NAME: &str =
    "a name is dot-separated labels of ASCII letters, digits, `-` and `_` (1 to 63 \
    characters each, not starting or ending with `-`, at most 253 in all), optionally followed by \
    `:PORT`, e.g. `example.com`, `*.example.com`, `example.com:443`";
const HINT_IDN: &str =
    "write internationalized names in their ASCII form (`xn--...`), as DNS sees them";
const HINT_PORT: &str =
    "a port is a number from 1 to 65535 after a `:`, e.g. `example.com:443`; no port means any port";
const HINT_IP_IN_DOMAINS: &str = "IP addresses and networks go in `allow_hosts` (e.g. \
    `127.0.0.1:5432`, `[::1]:8080`, `10.1.2.0/24`); domain lists take names";
const HINT_STAR: &str = "name the domains (`example.com`), or use `*.example.com` for the \
    subdomains of one domain; to reach no network at all use mode \"none\"";
const HINT_PUBLIC_SUFFIX: &str = "an allow list cannot open a whole public suffix (a TLD such \
    as `com`, or a shared suffix such as `co.uk` or `github.io`) where anyone can register names: \
    list the domains you need (`example.com`, `*.example.com`); `deny_domains` may be broad";
const HINT_HOSTS: &str = "an `allow_hosts` entry is an IP address (`127.0.0.1`, `::1`), a \
    network (`10.1.2.0/24`, `fd00::/8`) or an exact name (`db.internal`), optionally followed by \
    `:PORT`; an IPv6 address or network needs brackets before a port (`[::1]:8080`, \
    `[fd00::/8]:5432`)";
const HINT_HOSTS_WILDCARD: &str = "`allow_hosts` takes exact names; put `*.` patterns in \
    `allow_domains` (an `allow_hosts` name is what lifts the loopback/private-address refusal)";

/// Why a network rule entry is rejected, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct NetRuleError {
    /// What is wrong, naming the offending part.
    pub reason: String,
    /// How to fix it.
    pub hint: String,
}

impl NetRuleError {
    fn new(reason: impl Into<String>, hint: &str) -> Self {
        NetRuleError {
            reason: reason.into(),
            hint: hint.to_owned(),
        }
    }

    /// The [`PolicyError::InvalidNetRule`] for `entry` in `list`.
    pub fn into_policy_error(self, list: NetList, entry: &str) -> PolicyError {
        PolicyError::InvalidNetRule {
            field: list.field(),
            entry: entry.to_owned(),
            reason: self.reason,
            hint: self.hint,
        }
    }
}

/// The three lists of the `[network]` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NetList {
    /// `allow_domains`: domain patterns that may be reached.
    AllowDomains,
    /// `deny_domains`: domain patterns that may never be reached (wins over every allow).
    DenyDomains,
    /// `allow_hosts`: IP addresses, networks and exact names, the only way to IP literals and
    /// to loopback/private/link-local destinations.
    AllowHosts,
}

impl NetList {
    /// All lists, in the order they are validated.
    pub const ALL: [NetList; 3] = [
        NetList::AllowDomains,
        NetList::DenyDomains,
        NetList::AllowHosts,
    ];

    /// The key in the `[network]` table, also the prefix of [`NetDecision::rule`].
    pub fn key(self) -> &'static str {
        match self {
            NetList::AllowDomains => "allow_domains",
            NetList::DenyDomains => "deny_domains",
            NetList::AllowHosts => "allow_hosts",
        }
    }

    /// The dotted name used in error messages (`network.allow_domains`).
    pub fn field(self) -> &'static str {
        match self {
            NetList::AllowDomains => "network.allow_domains",
            NetList::DenyDomains => "network.deny_domains",
            NetList::AllowHosts => "network.allow_hosts",
        }
    }

    /// Validates `entry` for this list and returns its canonical form (lower case, no
    /// trailing dot, addresses in standard notation, IPv4-mapped IPv6 as IPv4), which parses
    /// back to the same rule.
    ///
    /// # Errors
    ///
    /// [`NetRuleError`] when the entry is malformed, or, in an allow list, opens a whole
    /// public suffix.
    pub fn canonicalize(self, entry: &str) -> Result<String, NetRuleError> {
        Ok(match self {
            NetList::AllowDomains => allowed_domain(entry)?.to_string(),
            NetList::DenyDomains => DomainPattern::parse(entry)?.to_string(),
            NetList::AllowHosts => allowed_host(entry)?.to_string(),
        })
    }
}

/// A domain pattern: an exact name, or `*.name` for the subdomains of `name`, optionally
/// restricted to one port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DomainPattern {
    name: String,
    subdomains: bool,
    port: Option<u16>,
}

impl DomainPattern {
    /// Parses `example.com`, `*.example.com`, each optionally followed by `:PORT`. Names are
    /// normalized to lower case without a trailing dot.
    ///
    /// # Errors
    ///
    /// [`NetRuleError`] for `*` alone, IP addresses, `*` anywhere but as the whole first
    /// label, invalid labels, names over 253 characters, numeric top-level labels and ports
    /// outside 1..=65535. The public-suffix check is separate
    /// ([`DomainPattern::public_suffix_covered`]): only allow lists apply it.
    pub fn parse(text: &str) -> Result<Self, NetRuleError> {
        if text.is_empty() {
            return Err(NetRuleError::new("the pattern is empty", HINT_NAME));
        }
        if text.starts_with('[') || text.parse::<IpAddr>().is_ok() {
            return Err(NetRuleError::new(
                "an IP address is not a domain pattern",
                HINT_IP_IN_DOMAINS,
            ));
        }
        if text.matches(':').count() > 1 {
            return Err(NetRuleError::new(
                "more than one `:` (a pattern is a name with an optional `:PORT`)",
                HINT_NAME,
            ));
        }
        let (host, port) = split_port(text)?;
        if host == "*" {
            return Err(NetRuleError::new(
                "`*` alone would match every name",
                HINT_STAR,
            ));
        }
        if host.parse::<Ipv4Addr>().is_ok() || host.contains('/') {
            return Err(NetRuleError::new(
                "an IP address or network is not a domain pattern",
                HINT_IP_IN_DOMAINS,
            ));
        }
        let (base, subdomains) = match host.strip_prefix("*.") {
            Some(base) => (base, true),
            None => (host, false),
        };
        let name = normalize_name(base)?;
        if subdomains && name.len() > MAX_NAME - 2 {
            return Err(NetRuleError::new(
                format!(
                    "the name after `*.` is {} characters long; at most {} leave room for a \
                     subdomain",
                    name.len(),
                    MAX_NAME - 2
                ),
                HINT_NAME,
            ));
        }
        Ok(DomainPattern {
            name,
            subdomains,
            port,
        })
    }

    /// The name (for `*.example.com`, `example.com`), lower case, without a trailing dot.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this is a `*.name` pattern (subdomains only).
    pub fn is_wildcard(&self) -> bool {
        self.subdomains
    }

    /// The port this pattern is restricted to, if any.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Whether `name` (already normalized: lower case, no trailing dot, as in
    /// [`Target::Name`]) on `port` matches.
    pub fn matches(&self, name: &str, port: u16) -> bool {
        self.port.is_none_or(|p| p == port) && self.matches_name(name)
    }

    fn matches_name(&self, name: &str) -> bool {
        if self.subdomains {
            name.strip_suffix(self.name.as_str())
                .and_then(|rest| rest.strip_suffix('.'))
                .is_some_and(|rest| !rest.is_empty())
        } else {
            name == self.name
        }
    }

    /// The public suffix this pattern would open whole, if any: for an exact name, the name
    /// when it is listed in the public suffix list (`com`, `co.uk`, `github.io`); for
    /// `*.name`, `name` when it is a public suffix, listed or not (every top-level domain is
    /// one), or `*.name` when the list has a wildcard rule making every `x.name` a suffix.
    pub fn public_suffix_covered(&self) -> Option<String> {
        if !self.subdomains {
            return is_public_suffix(&self.name, false).then(|| self.name.clone());
        }
        if is_public_suffix(&self.name, true) {
            return Some(self.name.clone());
        }
        let probe = format!("stockade-probe.{}", self.name);
        (probe.len() <= MAX_NAME && is_public_suffix(&probe, false))
            .then(|| format!("*.{}", self.name))
    }
}

impl fmt::Display for DomainPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.subdomains {
            f.write_str("*.")?;
        }
        f.write_str(&self.name)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

/// What an `allow_hosts` entry names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostSpec {
    /// An exact host name, lower case, without a trailing dot.
    Name(String),
    /// One address; IPv4-mapped IPv6 addresses are stored as IPv4.
    Ip(IpAddr),
    /// A network: `addr` has no host bits set; `prefix` is 1..=32 (IPv4) or 1..=128 (IPv6).
    Net {
        /// The network address.
        addr: IpAddr,
        /// The prefix length.
        prefix: u8,
    },
}

/// An `allow_hosts` entry: an address, network or exact name, optionally restricted to one
/// port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllowHost {
    spec: HostSpec,
    port: Option<u16>,
}

impl AllowHost {
    /// Parses an entry (see the [module documentation](self) for the forms).
    ///
    /// # Errors
    ///
    /// [`NetRuleError`] for malformed addresses, networks with host bits set or a zero
    /// prefix, wildcard or invalid names, and ports outside 1..=65535. The public-suffix
    /// check on names is separate ([`AllowHost::public_suffix_covered`]).
    pub fn parse(text: &str) -> Result<Self, NetRuleError> {
        if text.is_empty() {
            return Err(NetRuleError::new("the entry is empty", HINT_HOSTS));
        }
        if let Some(rest) = text.strip_prefix('[') {
            let Some((inside, after)) = rest.split_once(']') else {
                return Err(NetRuleError::new("`[` without a closing `]`", HINT_HOSTS));
            };
            // `[fd00::]/8` is read as `[fd00::/8]`.
            let (addr, prefix, after) = match (inside.split_once('/'), after.strip_prefix('/')) {
                (Some((addr, prefix)), _) => (addr, Some(prefix), after),
                (None, Some(net)) => {
                    let (prefix, after) = net.split_at(net.find(':').unwrap_or(net.len()));
                    (inside, Some(prefix), after)
                }
                (None, None) => (inside, None, after),
            };
            let port = if after.is_empty() {
                None
            } else if let Some(port) = after.strip_prefix(':') {
                Some(parse_port(port)?)
            } else {
                return Err(NetRuleError::new(
                    format!("unexpected `{after}` after `]` (expected `:PORT`)"),
                    HINT_HOSTS,
                ));
            };
            let v6 = addr.parse::<Ipv6Addr>().map_err(|_| not_ipv6(addr))?;
            let spec = match prefix {
                Some(prefix) => parse_net(IpAddr::V6(v6), prefix)?,
                None => HostSpec::Ip(IpAddr::V6(v6).to_canonical()),
            };
            return Ok(AllowHost { spec, port });
        }
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(AllowHost {
                spec: HostSpec::Ip(ip.to_canonical()),
                port: None,
            });
        }
        if let Some((addr, rest)) = text.split_once('/') {
            let (prefix, port) = match (addr.contains(':'), rest.split_once(':')) {
                (false, Some((prefix, port))) => (prefix, Some(parse_port(port)?)),
                _ => (rest, None),
            };
            let addr = addr.parse::<IpAddr>().map_err(|_| {
                NetRuleError::new(
                    format!("`{addr}` before `/` is not an IP address"),
                    HINT_HOSTS,
                )
            })?;
            let spec = parse_net(addr, prefix)?;
            return Ok(AllowHost { spec, port });
        }
        if text.matches(':').count() > 1 {
            return Err(NetRuleError::new(
                "not a valid IPv6 address (zone indices such as `%eth0` are not supported)",
                HINT_HOSTS,
            ));
        }
        let (host, port) = split_port(text)?;
        if let Ok(ip) = host.parse::<Ipv4Addr>() {
            return Ok(AllowHost {
                spec: HostSpec::Ip(IpAddr::V4(ip)),
                port,
            });
        }
        if host.contains('*') {
            return Err(NetRuleError::new(
                "a wildcard is not an exact host name",
                HINT_HOSTS_WILDCARD,
            ));
        }
        Ok(AllowHost {
            spec: HostSpec::Name(normalize_name(host)?),
            port,
        })
    }

    /// What the entry names.
    pub fn spec(&self) -> &HostSpec {
        &self.spec
    }

    /// The port this entry is restricted to, if any.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Whether `ip` on `port` matches (an address or network entry; IPv4-mapped IPv6
    /// addresses match as the IPv4 address they stand for).
    pub fn matches_ip(&self, ip: IpAddr, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let ip = ip.to_canonical();
        match &self.spec {
            HostSpec::Name(_) => false,
            HostSpec::Ip(addr) => *addr == ip,
            HostSpec::Net { addr, prefix } => in_network(ip, *addr, *prefix),
        }
    }

    /// Whether the normalized `name` (as in [`Target::Name`]) on `port` matches (a name
    /// entry).
    pub fn matches_name(&self, name: &str, port: u16) -> bool {
        self.port.is_none_or(|p| p == port) && matches!(&self.spec, HostSpec::Name(n) if n == name)
    }

    /// For an address or network entry covering the unspecified address (`0.0.0.0`, `::`),
    /// that address: the kernel connects to it as to its own loopback, so an entry naming it
    /// would be a grant of the host's loopback under another name (refused as an entry).
    pub fn unspecified_covered(&self) -> Option<IpAddr> {
        let port = self.port.unwrap_or(1);
        [
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        ]
        .into_iter()
        .find(|ip| self.matches_ip(*ip, port))
    }

    /// For a name entry that is itself a listed public suffix (`com`), that name.
    pub fn public_suffix_covered(&self) -> Option<String> {
        match &self.spec {
            HostSpec::Name(name) => is_public_suffix(name, false).then(|| name.clone()),
            HostSpec::Ip(_) | HostSpec::Net { .. } => None,
        }
    }
}

impl fmt::Display for AllowHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.spec, self.port) {
            (HostSpec::Name(name), _) => f.write_str(name)?,
            (HostSpec::Ip(IpAddr::V6(addr)), Some(_)) => write!(f, "[{addr}]")?,
            (HostSpec::Ip(addr), _) => write!(f, "{addr}")?,
            (HostSpec::Net { addr, prefix }, Some(_)) if addr.is_ipv6() => {
                write!(f, "[{addr}/{prefix}]")?;
            }
            (HostSpec::Net { addr, prefix }, _) => write!(f, "{addr}/{prefix}")?,
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

/// A destination as a client named it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A host name: lower case, without a trailing dot.
    Name(String),
    /// An IP literal, as written (an IPv4-mapped IPv6 address stays IPv6 here; matching
    /// compares it as IPv4).
    Ip(IpAddr),
}

impl Target {
    /// Parses the host part of what a client asked for: an IPv4 literal, an IPv6 literal with
    /// or without brackets, or a name (case-insensitive, a trailing dot ignored). `None` for
    /// anything else, including the shorthand and numeric forms some resolvers take as IPv4
    /// (`127.1`, `0x7f.0.0.1`, `2130706433`), zone indices and non-ASCII names.
    pub fn parse(host: &str) -> Option<Target> {
        // The proxy's own normalizer: the host the rules see is the host that is reached.
        let canonical = crate::host::normalize_host(host).ok()?;
        Some(match canonical.parse::<IpAddr>() {
            Ok(ip) => Target::Ip(ip),
            Err(_) => Target::Name(canonical),
        })
    }
}

/// The answer to "may this destination be reached?", with the rule that decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetDecision {
    /// Whether the destination may be reached (subject to the proxy's SSRF check).
    pub allowed: bool,
    /// The deciding rule, stable for audit events: `allow_domains:<pattern>`,
    /// `deny_domains:<pattern>`, `allow_hosts:<entry>` (patterns and entries in canonical
    /// form), or one of [`RULE_NO_MATCH`], [`RULE_IP_LITERAL`], [`RULE_INVALID_HOST`],
    /// [`RULE_INVALID_PORT`].
    pub rule: String,
}

impl NetDecision {
    fn allow(list: NetList, rule: &impl fmt::Display) -> Self {
        NetDecision {
            allowed: true,
            rule: format!("{}:{rule}", list.key()),
        }
    }

    fn deny(rule: String) -> Self {
        NetDecision {
            allowed: false,
            rule,
        }
    }
}

/// The compiled `[network]` rules. Independent of the network mode: the caller decides
/// whether the proxy runs at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetRules {
    allow_domains: Vec<DomainPattern>,
    deny_domains: Vec<DomainPattern>,
    allow_hosts: Vec<AllowHost>,
}

impl NetRules {
    /// Compiles the rules of a network section (usually [`crate::resolve()`]'s, whose entries
    /// are already validated and canonical). `network.mode` is not looked at.
    ///
    /// # Errors
    ///
    /// [`PolicyError::InvalidNetRule`] naming the first invalid entry, as [`crate::resolve()`]
    /// would.
    pub fn new(network: &Network) -> Result<Self, PolicyError> {
        let mut rules = NetRules::default();
        for entry in &network.allow_domains {
            let pattern = allowed_domain(entry)
                .map_err(|e| e.into_policy_error(NetList::AllowDomains, entry))?;
            rules.allow_domains.push(pattern);
        }
        for entry in &network.deny_domains {
            let pattern = DomainPattern::parse(entry)
                .map_err(|e| e.into_policy_error(NetList::DenyDomains, entry))?;
            rules.deny_domains.push(pattern);
        }
        for entry in &network.allow_hosts {
            let host =
                allowed_host(entry).map_err(|e| e.into_policy_error(NetList::AllowHosts, entry))?;
            rules.allow_hosts.push(host);
        }
        Ok(rules)
    }

    /// The `allow_domains` patterns, in order.
    pub fn allow_domains(&self) -> &[DomainPattern] {
        &self.allow_domains
    }

    /// The `deny_domains` patterns, in order.
    pub fn deny_domains(&self) -> &[DomainPattern] {
        &self.deny_domains
    }

    /// The `allow_hosts` entries, in order.
    pub fn allow_hosts(&self) -> &[AllowHost] {
        &self.allow_hosts
    }

    /// Whether the destination a client asked for, `host` (a name, or an IP literal, IPv6
    /// with or without brackets) on `port`, may be reached. For a name: a matching
    /// `deny_domains` pattern denies (deny wins), else a matching `allow_hosts` name or
    /// `allow_domains` pattern allows, else it is denied. An IP literal is allowed only by a
    /// matching `allow_hosts` address or network. The first matching rule of a list is the
    /// one reported.
    ///
    /// An allowed name still goes through the proxy's SSRF check once resolved (see
    /// [`NetRules::private_allowed`]).
    pub fn check(&self, host: &str, port: u16) -> NetDecision {
        if port == 0 {
            return NetDecision::deny(RULE_INVALID_PORT.to_owned());
        }
        match Target::parse(host) {
            None => NetDecision::deny(RULE_INVALID_HOST.to_owned()),
            Some(Target::Ip(ip)) => {
                match self.allow_hosts.iter().find(|h| h.matches_ip(ip, port)) {
                    Some(entry) => NetDecision::allow(NetList::AllowHosts, entry),
                    None => NetDecision::deny(RULE_IP_LITERAL.to_owned()),
                }
            }
            Some(Target::Name(name)) => {
                if let Some(deny) = self.denying(&name, port) {
                    return NetDecision::deny(format!("{}:{deny}", NetList::DenyDomains.key()));
                }
                if let Some(entry) = self
                    .allow_hosts
                    .iter()
                    .find(|h| h.matches_name(&name, port))
                {
                    return NetDecision::allow(NetList::AllowHosts, entry);
                }
                match self.allow_domains.iter().find(|p| p.matches(&name, port)) {
                    Some(pattern) => NetDecision::allow(NetList::AllowDomains, pattern),
                    None => NetDecision::deny(RULE_NO_MATCH.to_owned()),
                }
            }
        }
    }

    /// Whether an explicit `allow_hosts` entry lifts the SSRF refusal for connecting to `ip`
    /// on `port`, where `ip` is the address the proxy resolved `host` to (or the literal
    /// itself). True when an entry names `host` (and `port`), or an address or network entry
    /// contains `ip` (and `port`). Always false for the unspecified address (`0.0.0.0`, `::`:
    /// the connecting machine's own loopback, which no entry names), for a host `deny_domains`
    /// denies, for an IP literal `host` that is not `ip`, for an invalid host and for port 0.
    pub fn private_allowed(&self, host: &str, port: u16, ip: IpAddr) -> bool {
        if port == 0 || ip.to_canonical().is_unspecified() {
            return false;
        }
        match Target::parse(host) {
            None => false,
            Some(Target::Ip(asked)) => {
                asked.to_canonical() == ip.to_canonical()
                    && self.allow_hosts.iter().any(|h| h.matches_ip(ip, port))
            }
            Some(Target::Name(name)) => {
                self.denying(&name, port).is_none()
                    && self
                        .allow_hosts
                        .iter()
                        .any(|h| h.matches_name(&name, port) || h.matches_ip(ip, port))
            }
        }
    }

    fn denying(&self, name: &str, port: u16) -> Option<&DomainPattern> {
        self.deny_domains.iter().find(|p| p.matches(name, port))
    }
}

/// An `allow_domains` pattern: parsed, and not opening a whole public suffix.
fn allowed_domain(entry: &str) -> Result<DomainPattern, NetRuleError> {
    let pattern = DomainPattern::parse(entry)?;
    match pattern.public_suffix_covered() {
        Some(suffix) => Err(public_suffix_error(&suffix)),
        None => Ok(pattern),
    }
}

/// An `allow_hosts` entry: parsed, not naming a public suffix, and not covering the
/// unspecified address (`0.0.0.0`, `::`).
fn allowed_host(entry: &str) -> Result<AllowHost, NetRuleError> {
    let host = AllowHost::parse(entry)?;
    if let Some(ip) = host.unspecified_covered() {
        let port = host.port().map(|p| format!(":{p}")).unwrap_or_default();
        let (v4, v6) = (format!("127.0.0.1{port}"), format!("[::1]{port}"));
        return Err(NetRuleError::new(
            format!(
                "it covers the unspecified address `{ip}`, which is no destination: connecting \
                 to it reaches the loopback of the machine that connects (the proxy's, the \
                 host's)"
            ),
            &format!(
                "a server the command starts on 0.0.0.0 is reached inside the run directly \
                 (http://127.0.0.1{port}/; NO_PROXY covers 0.0.0.0 and ::), no grant needed; \
                 only to open the host's own loopback port to the sandbox, name it: `{v4}` or \
                 `{v6}`"
            ),
        ));
    }
    match host.public_suffix_covered() {
        Some(suffix) => Err(public_suffix_error(&suffix)),
        None => Ok(host),
    }
}

fn public_suffix_error(suffix: &str) -> NetRuleError {
    NetRuleError::new(
        format!("it opens the whole public suffix `{suffix}`"),
        HINT_PUBLIC_SUFFIX,
    )
}

/// Whether `name` is a public suffix: listed in the public suffix list, or (with
/// `implicit`) any single label under the list's default rule `*`.
fn is_public_suffix(name: &str, implicit: bool) -> bool {
    psl::suffix(name.as_bytes()).is_some_and(|s| s == name && (implicit || s.is_known()))
}

/// Splits `name:PORT` (at most one `:`, checked by the caller).
fn split_port(text: &str) -> Result<(&str, Option<u16>), NetRuleError> {
    match text.split_once(':') {
        Some((host, port)) => Ok((host, Some(parse_port(port)?))),
        None => Ok((text, None)),
    }
}

fn parse_port(text: &str) -> Result<u16, NetRuleError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NetRuleError::new(
            format!("`{text}` is not a port number"),
            HINT_PORT,
        ));
    }
    match text.parse::<u16>() {
        Ok(port) if port != 0 => Ok(port),
        _ => Err(NetRuleError::new(
            format!("port `{text}` is not between 1 and 65535"),
            HINT_PORT,
        )),
    }
}

/// Lower-cases `text`, strips one trailing dot and checks it is a host name: the one rule for
/// names shared with the proxy ([`crate::host::normalize_name`]), its refusals worded for a
/// policy entry with the hint that fixes it.
fn normalize_name(text: &str) -> Result<String, NetRuleError> {
    use crate::host::{self, HostError};
    let name = text.strip_suffix('.').unwrap_or(text);
    let label_where =
        |bad: &dyn Fn(&str) -> bool| name.split('.').find(|l| bad(l)).unwrap_or(name).to_owned();
    host::normalize_name(text).map_err(|e| match e {
        HostError::Empty => NetRuleError::new("the name is empty", HINT_NAME),
        HostError::BadChar(c) if !c.is_ascii() => {
            NetRuleError::new("the name is not ASCII", HINT_IDN)
        }
        HostError::BadChar('*') => NetRuleError::new(
            "`*` is only allowed as the whole first label, as in `*.example.com`",
            HINT_NAME,
        ),
        HostError::BadChar(c) => NetRuleError::new(
            format!(
                "the label `{}` contains `{}`",
                label_where(&|l: &str| l.contains(c)),
                c.escape_default()
            ),
            HINT_NAME,
        ),
        HostError::TooLong => NetRuleError::new(
            format!(
                "the name is {} characters long (at most {MAX_NAME})",
                name.len()
            ),
            HINT_NAME,
        ),
        HostError::EmptyLabel => NetRuleError::new(
            "the name has an empty label (`..`, or a leading `.`)",
            HINT_NAME,
        ),
        HostError::LabelTooLong => {
            let label = label_where(&|l: &str| l.len() > MAX_LABEL);
            NetRuleError::new(
                format!(
                    "the label `{label}` is {} characters long (at most {MAX_LABEL})",
                    label.len()
                ),
                HINT_NAME,
            )
        }
        HostError::HyphenAtLabelEdge => NetRuleError::new(
            format!(
                "the label `{}` starts or ends with `-`",
                label_where(&|l: &str| l.starts_with('-') || l.ends_with('-'))
            ),
            HINT_NAME,
        ),
        HostError::NumericName => NetRuleError::new(
            "a numeric name is an IPv4 address in disguise, not a host name",
            HINT_IP_IN_DOMAINS,
        ),
        other => NetRuleError::new(other.to_string(), HINT_NAME),
    })
}

fn not_ipv6(text: &str) -> NetRuleError {
    NetRuleError::new(
        format!("`{text}` in brackets is not an IPv6 address"),
        HINT_HOSTS,
    )
}

/// A network from its address and prefix text; IPv6 networks inside `::ffff:0:0/96` become
/// the IPv4 networks they stand for.
fn parse_net(addr: IpAddr, prefix: &str) -> Result<HostSpec, NetRuleError> {
    let max: u8 = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix.parse::<u8>() {
        Ok(p) if prefix.bytes().all(|b| b.is_ascii_digit()) && p <= max => p,
        _ => {
            return Err(NetRuleError::new(
                format!("`/{prefix}` is not a prefix length from 1 to {max}"),
                HINT_HOSTS,
            ))
        }
    };
    if prefix == 0 {
        return Err(NetRuleError::new(
            format!("`{addr}/0` covers every address"),
            "list the networks you need (e.g. `10.1.2.0/24`); /0 would lift the \
             loopback/private-address refusal for everything",
        ));
    }
    let network = mask(addr, prefix);
    if network != addr {
        return Err(NetRuleError::new(
            format!("`{addr}/{prefix}` has host bits set"),
            &format!("write the network address: `{network}/{prefix}`"),
        ));
    }
    if let IpAddr::V6(v6) = addr {
        if let (Some(v4), true) = (v6.to_ipv4_mapped(), prefix >= 96) {
            if prefix == 96 {
                return Err(NetRuleError::new(
                    format!("`{addr}/{prefix}` covers every IPv4 address"),
                    "list the networks you need (e.g. `10.1.2.0/24`)",
                ));
            }
            return Ok(HostSpec::Net {
                addr: IpAddr::V4(v4),
                prefix: prefix - 96,
            });
        }
    }
    Ok(HostSpec::Net { addr, prefix })
}

fn mask(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let bits = u32::MAX
                .checked_shl(32 - u32::from(prefix))
                .unwrap_or_default();
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & bits))
        }
        IpAddr::V6(a) => {
            let bits = u128::MAX
                .checked_shl(128 - u32::from(prefix))
                .unwrap_or_default();
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & bits))
        }
    }
}

/// Whether canonical `ip` lies in the network `net/prefix`. Families never mix: an IPv4
/// address (IPv4-mapped ones included) is only in IPv4 networks, so a broad IPv6 network
/// such as `::/8` does not silently cover the IPv4-mapped range.
fn in_network(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    ip.is_ipv4() == net.is_ipv4() && mask(ip, prefix) == net
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NetworkMode;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn rules(allow: &[&str], deny: &[&str], hosts: &[&str]) -> NetRules {
        NetRules::new(&Network {
            mode: NetworkMode::Proxy,
            allow_domains: allow.iter().map(|s| (*s).to_owned()).collect(),
            deny_domains: deny.iter().map(|s| (*s).to_owned()).collect(),
            allow_hosts: hosts.iter().map(|s| (*s).to_owned()).collect(),
        })
        .unwrap()
    }

    fn decide(rules: &NetRules, host: &str, port: u16) -> (bool, String) {
        let d = rules.check(host, port);
        (d.allowed, d.rule)
    }

    fn allowed(rule: &str) -> (bool, String) {
        (true, rule.to_owned())
    }

    fn denied(rule: &str) -> (bool, String) {
        (false, rule.to_owned())
    }

    fn domain_err(text: &str) -> NetRuleError {
        DomainPattern::parse(text).unwrap_err()
    }

    fn host_err(text: &str) -> NetRuleError {
        AllowHost::parse(text).unwrap_err()
    }

    fn canon(list: NetList, text: &str) -> String {
        list.canonicalize(text).unwrap()
    }

    // ---- domain patterns ----

    #[test]
    fn exact_and_wildcard_patterns_parse() {
        let p = DomainPattern::parse("Example.COM.").unwrap();
        assert_eq!(
            (p.name(), p.is_wildcard(), p.port()),
            ("example.com", false, None)
        );
        assert_eq!(p.to_string(), "example.com");
        let p = DomainPattern::parse("*.Example.com:443").unwrap();
        assert_eq!(
            (p.name(), p.is_wildcard(), p.port()),
            ("example.com", true, Some(443))
        );
        assert_eq!(p.to_string(), "*.example.com:443");
        let p = DomainPattern::parse("*.example.com.:8080").unwrap();
        assert_eq!(p.to_string(), "*.example.com:8080");
        assert_eq!(
            DomainPattern::parse("localhost").unwrap().to_string(),
            "localhost"
        );
        assert_eq!(
            DomainPattern::parse("xn--bcher-kva.example")
                .unwrap()
                .name(),
            "xn--bcher-kva.example"
        );
        assert_eq!(
            DomainPattern::parse("a-b.c0.io").unwrap().name(),
            "a-b.c0.io"
        );
        assert_eq!(DomainPattern::parse("3com.com").unwrap().name(), "3com.com");
    }

    #[test]
    fn wildcard_matches_subdomains_only() {
        let p = DomainPattern::parse("*.example.com").unwrap();
        assert!(p.matches("a.example.com", 1));
        assert!(p.matches("a.b.example.com", 65535));
        assert!(!p.matches("example.com", 443));
        assert!(!p.matches("badexample.com", 443));
        assert!(!p.matches("a.example.com.evil", 443));
        assert!(!p.matches(".example.com", 443));
        let p = DomainPattern::parse("example.com").unwrap();
        assert!(p.matches("example.com", 80));
        assert!(!p.matches("www.example.com", 80));
        assert!(!p.matches("xexample.com", 80));
    }

    #[test]
    fn pattern_ports() {
        let p = DomainPattern::parse("example.com:443").unwrap();
        assert!(p.matches("example.com", 443));
        assert!(!p.matches("example.com", 80));
        assert_eq!(
            DomainPattern::parse("example.com:65535").unwrap().port(),
            Some(65535)
        );
        assert_eq!(
            DomainPattern::parse("example.com:0080")
                .unwrap()
                .to_string(),
            "example.com:80"
        );
        for bad in [
            "example.com:0",
            "example.com:65536",
            "example.com:",
            "example.com:http",
            "example.com:+80",
            "example.com:-1",
            "example.com:99999999999999999999",
        ] {
            let e = domain_err(bad);
            assert_eq!(e.hint, HINT_PORT, "{bad}");
            assert!(e.reason.contains("port"), "{bad}: {}", e.reason);
        }
        assert!(domain_err("example.com:80:80")
            .reason
            .contains("more than one `:`"));
    }

    #[test]
    fn star_alone_rejected() {
        for bad in ["*", "*:443", "*."] {
            let e = domain_err(bad);
            assert!(
                e.reason.contains("every name") || e.reason.contains("empty"),
                "{bad}: {e}"
            );
        }
        assert_eq!(domain_err("*").hint, HINT_STAR);
        assert!(NetList::DenyDomains.canonicalize("*").is_err());
    }

    #[test]
    fn misplaced_stars_rejected() {
        for bad in [
            "*example.com",
            "a.*.example.com",
            "**.example.com",
            "*.*.example.com",
            "example.*",
            "ex*ample.com",
        ] {
            let e = domain_err(bad);
            assert!(
                e.reason
                    .contains("`*` is only allowed as the whole first label"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn invalid_names_rejected() {
        let cases = [
            ("", "empty"),
            (".", "empty"),
            ("example..com", "empty label"),
            (".example.com", "empty label"),
            ("example.com..", "empty label"),
            ("-a.example.com", "starts or ends with `-`"),
            ("a-.example.com", "starts or ends with `-`"),
            ("per%cent.example.com", "contains `%`"),
            ("sp ace.com", "contains ` `"),
            ("tab\tx.com", "contains `\\t`"),
            ("exa/mple.com", "IP address or network"),
            ("b\u{fc}cher.example", "not ASCII"),
            ("example.123", "numeric"),
        ];
        for (bad, why) in cases {
            let e = domain_err(bad);
            assert!(e.reason.contains(why), "{bad:?}: {}", e.reason);
            assert!(!e.hint.is_empty());
        }
        assert_eq!(domain_err("b\u{fc}cher.example").hint, HINT_IDN);
    }

    #[test]
    fn name_lengths() {
        let label63 = "a".repeat(63);
        assert!(DomainPattern::parse(&format!("{label63}.com")).is_ok());
        let e = domain_err(&format!("{}a.com", label63));
        assert!(e.reason.contains("64 characters long (at most 63)"), "{e}");
        // 4 labels of 63 + 3 dots = 255 > 253; 253 exactly is fine.
        let name253 = format!("{label63}.{label63}.{label63}.{}", "b".repeat(61));
        assert_eq!(name253.len(), 253);
        assert!(DomainPattern::parse(&name253).is_ok());
        assert!(DomainPattern::parse(&format!("{name253}.")).is_ok());
        let e = domain_err(&format!("{name253}b"));
        assert!(e.reason.contains("254 characters long"), "{e}");
        // A wildcard needs room for one more label.
        let e = domain_err(&format!("*.{name253}"));
        assert!(e.reason.contains("leave room for a subdomain"), "{e}");
        let name251 = &name253[2..];
        assert!(DomainPattern::parse(&format!("*.{name251}")).is_ok());
    }

    #[test]
    fn ip_addresses_are_not_domain_patterns() {
        for bad in [
            "127.0.0.1",
            "127.0.0.1:80",
            "::1",
            "[::1]",
            "[::1]:443",
            "10.0.0.0/8",
            "127.1",
            "0x7f.0.0.1",
            "2130706433",
            "1.2.3.4.",
            "0177.0.0.1",
            "*.1.2.3",
        ] {
            let e = domain_err(bad);
            assert_eq!(e.hint, HINT_IP_IN_DOMAINS, "{bad}: {e}");
        }
    }

    #[test]
    fn public_suffixes_rejected_in_allow_domains_only() {
        for (bad, suffix) in [
            ("com", "com"),
            ("COM.", "com"),
            ("*.com", "com"),
            ("*.com:443", "com"),
            ("co.uk", "co.uk"),
            ("*.co.uk", "co.uk"),
            ("*.uk", "uk"),
            ("github.io", "github.io"),
            ("*.github.io", "github.io"),
            // Not listed, but a top-level domain all the same.
            ("*.test", "test"),
            ("*.internal", "internal"),
        ] {
            let e = NetList::AllowDomains.canonicalize(bad).unwrap_err();
            assert_eq!(
                e.reason,
                format!("it opens the whole public suffix `{suffix}`"),
                "{bad}"
            );
            assert_eq!(e.hint, HINT_PUBLIC_SUFFIX);
            // deny_domains may be broad.
            assert!(NetList::DenyDomains.canonicalize(bad).is_ok(), "{bad}");
        }
        for ok in [
            "example.com",
            "*.example.com",
            "example.co.uk",
            "*.example.co.uk",
            "user.github.io",
            "*.user.github.io",
            "allowed.test",
            "localhost",
            "db",
            "*.corp.internal",
        ] {
            assert!(NetList::AllowDomains.canonicalize(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn psl_wildcard_rules_are_suffixes_too() {
        // The list has `*.ck` (every `x.ck` is a suffix, except `www.ck`).
        let p = DomainPattern::parse("*.ck").unwrap();
        assert_eq!(p.public_suffix_covered().as_deref(), Some("ck"));
        let p = DomainPattern::parse("foo.ck").unwrap();
        assert_eq!(p.public_suffix_covered().as_deref(), Some("foo.ck"));
        let p = DomainPattern::parse("*.foo.ck").unwrap();
        assert_eq!(p.public_suffix_covered().as_deref(), Some("foo.ck"));
        assert_eq!(
            DomainPattern::parse("www.ck")
                .unwrap()
                .public_suffix_covered(),
            None
        );
        // `*.kawasaki.jp` is a wildcard rule beneath a non-suffix-looking name.
        let p = DomainPattern::parse("*.kawasaki.jp").unwrap();
        assert_eq!(p.public_suffix_covered().as_deref(), Some("*.kawasaki.jp"));
    }

    // ---- allow_hosts entries ----

    #[test]
    fn allow_hosts_forms_round_trip() {
        for (text, canonical) in [
            ("127.0.0.1", "127.0.0.1"),
            ("127.0.0.1:5432", "127.0.0.1:5432"),
            ("::1", "::1"),
            ("[::1]", "::1"),
            ("[::1]:8080", "[::1]:8080"),
            ("[0:0:0:0:0:0:0:1]:8080", "[::1]:8080"),
            ("[2001:DB8::1]", "2001:db8::1"),
            ("::ffff:127.0.0.1", "127.0.0.1"),
            ("[::ffff:7f00:1]:5432", "127.0.0.1:5432"),
            ("10.1.2.0/24", "10.1.2.0/24"),
            ("10.1.2.0/24:5432", "10.1.2.0/24:5432"),
            ("10.1.2.3/32", "10.1.2.3/32"),
            ("fd00::/8", "fd00::/8"),
            ("[fd00::/8]:5432", "[fd00::/8]:5432"),
            ("[FD00::]/8", "fd00::/8"),
            ("[fd00::]/8:5432", "[fd00::/8]:5432"),
            ("[::ffff:10.0.0.0]/104:22", "10.0.0.0/8:22"),
            ("::ffff:10.0.0.0/104", "10.0.0.0/8"),
            ("Db.Internal.", "db.internal"),
            ("db.internal:5432", "db.internal:5432"),
            ("localhost:3000", "localhost:3000"),
        ] {
            let host = AllowHost::parse(text).unwrap();
            assert_eq!(host.to_string(), canonical, "{text}");
            assert_eq!(AllowHost::parse(canonical).unwrap(), host, "{canonical}");
        }
    }

    #[test]
    fn allow_hosts_invalid_entries() {
        for (bad, why) in [
            ("", "empty"),
            ("[::1", "without a closing `]`"),
            ("[::1]8080", "unexpected `8080` after `]`"),
            ("[fd00::/8]/8", "unexpected `/8` after `]`"),
            ("[]", "`` in brackets is not an IPv6 address"),
            ("fd00::/8:443", "`/8:443` is not a prefix length"),
            ("[::1]:0", "not between 1 and 65535"),
            ("[127.0.0.1]:80", "not an IPv6 address"),
            ("[db.internal]:80", "not an IPv6 address"),
            ("::1:99999:x", "not a valid IPv6 address"),
            ("fe80::1%eth0", "zone indices"),
            ("127.0.0.1:70000", "not between 1 and 65535"),
            ("127.0.0.1:", "not a port number"),
            ("10.1.2.3/24", "host bits set"),
            ("10.0.0.0/33", "not a prefix length from 1 to 32"),
            ("10.0.0.0/", "not a prefix length"),
            ("10.0.0.0/x", "not a prefix length"),
            ("10.0.0.0/+8", "not a prefix length"),
            ("0.0.0.0/0", "covers every address"),
            ("::/0", "covers every address"),
            ("::ffff:0.0.0.0/96", "covers every IPv4 address"),
            ("fd00::/129", "from 1 to 128"),
            ("db.internal/24", "is not an IP address"),
            ("*.internal", "wildcard"),
            ("*", "wildcard"),
            ("127.1", "numeric"),
            ("2130706433:80", "numeric"),
            ("bad%name:80", "contains `%`"),
            ("com", "public suffix `com`"),
        ] {
            let e = allowed_host(bad).unwrap_err();
            assert!(e.reason.contains(why), "{bad:?}: {}", e.reason);
            assert!(!e.hint.is_empty(), "{bad}");
        }
        assert_eq!(host_err("*.internal").hint, HINT_HOSTS_WILDCARD);
        assert_eq!(
            host_err("10.1.2.3/24").hint,
            "write the network address: `10.1.2.0/24`"
        );
        assert_eq!(
            host_err("[fd00::1/8]:80").hint,
            "write the network address: `fd00::/8`"
        );
    }

    #[test]
    fn allow_hosts_matching() {
        let h = AllowHost::parse("127.0.0.1:5432").unwrap();
        assert!(h.matches_ip(ip("127.0.0.1"), 5432));
        assert!(h.matches_ip(ip("::ffff:127.0.0.1"), 5432));
        assert!(!h.matches_ip(ip("127.0.0.1"), 5433));
        assert!(!h.matches_ip(ip("127.0.0.2"), 5432));
        assert!(!h.matches_ip(ip("::1"), 5432));
        assert!(!h.matches_ip(ip("::127.0.0.1"), 5432)); // IPv4-compatible is another address
        assert!(!h.matches_ip(ip("64:ff9b::7f00:1"), 5432)); // so is NAT64
        assert!(!h.matches_name("127.0.0.1", 5432));

        let h = AllowHost::parse("10.1.2.0/24").unwrap();
        assert!(h.matches_ip(ip("10.1.2.0"), 1));
        assert!(h.matches_ip(ip("10.1.2.255"), 1));
        assert!(h.matches_ip(ip("::ffff:10.1.2.9"), 1));
        assert!(!h.matches_ip(ip("10.1.3.0"), 1));
        assert!(!h.matches_ip(ip("10.1.1.255"), 1));

        let h = AllowHost::parse("[fd00::/8]:443").unwrap();
        assert!(h.matches_ip(ip("fd12:3456::1"), 443));
        assert!(!h.matches_ip(ip("fd12:3456::1"), 80));
        assert!(!h.matches_ip(ip("fe80::1"), 443));

        // A broad IPv6 network does not cover IPv4 (mapped or not).
        let h = AllowHost::parse("::/8").unwrap();
        assert!(h.matches_ip(ip("::1"), 1));
        assert!(!h.matches_ip(ip("::ffff:10.0.0.1"), 1));
        assert!(!h.matches_ip(ip("10.0.0.1"), 1));

        let h = AllowHost::parse("::1").unwrap();
        assert!(h.matches_ip(ip("0:0:0:0:0:0:0:1"), 9));
        assert!(!h.matches_ip(ip("127.0.0.1"), 9));

        let h = AllowHost::parse("db.internal:5432").unwrap();
        assert!(h.matches_name("db.internal", 5432));
        assert!(!h.matches_name("db.internal", 5433));
        assert!(!h.matches_name("x.db.internal", 5432));
        assert!(!h.matches_ip(ip("10.0.0.5"), 5432));
    }

    // ---- targets ----

    #[test]
    fn target_parsing() {
        let name = |s: &str| Some(Target::Name(s.to_owned()));
        let addr = |s: &str| Some(Target::Ip(ip(s)));
        assert_eq!(Target::parse("Example.COM."), name("example.com"));
        assert_eq!(Target::parse("localhost"), name("localhost"));
        assert_eq!(Target::parse("127.0.0.1"), addr("127.0.0.1"));
        assert_eq!(Target::parse("::1"), addr("::1"));
        assert_eq!(Target::parse("[::1]"), addr("::1"));
        assert_eq!(
            Target::parse("[::FFFF:127.0.0.1]"),
            addr("::ffff:127.0.0.1")
        );
        for bad in [
            "",
            ".",
            "[127.0.0.1]",
            "[::1",
            "::1]",
            "[fe80::1%eth0]",
            "fe80::1%25eth0",
            "127.1",
            "0x7f000001",
            "2130706433",
            "0177.0.0.1",
            "a..b",
            "-a.com",
            "ex ample.com",
            "b\u{fc}cher.de",
            "*.example.com",
            "example.com:80",
            "[::1]:80",
        ] {
            assert_eq!(Target::parse(bad), None, "{bad:?}");
        }
    }

    // ---- the matcher ----

    #[test]
    fn exact_vs_wildcard_decisions() {
        let r = rules(&["example.com", "*.docs.rs"], &[], &[]);
        assert_eq!(
            decide(&r, "example.com", 443),
            allowed("allow_domains:example.com")
        );
        assert_eq!(decide(&r, "www.example.com", 443), denied(RULE_NO_MATCH));
        assert_eq!(decide(&r, "docs.rs", 443), denied(RULE_NO_MATCH));
        assert_eq!(
            decide(&r, "a.b.docs.rs", 443),
            allowed("allow_domains:*.docs.rs")
        );
        assert_eq!(
            decide(&r, "example.com.evil.test", 443),
            denied(RULE_NO_MATCH)
        );
        assert_eq!(decide(&r, "notexample.com", 443), denied(RULE_NO_MATCH));
    }

    #[test]
    fn case_and_trailing_dot_ignored() {
        let r = rules(&["Example.COM."], &["*.EVIL.test"], &[]);
        assert_eq!(
            decide(&r, "EXAMPLE.com.", 80),
            allowed("allow_domains:example.com")
        );
        assert_eq!(
            decide(&r, "example.com", 80),
            allowed("allow_domains:example.com")
        );
        assert_eq!(
            decide(&r, "X.Evil.Test.", 80),
            denied("deny_domains:*.evil.test")
        );
        assert_eq!(decide(&r, "example.com..", 80), denied(RULE_INVALID_HOST));
    }

    #[test]
    fn port_restrictions() {
        let r = rules(
            &["example.com:443", "*.example.org"],
            &["bad.example.org:25"],
            &[],
        );
        assert_eq!(
            decide(&r, "example.com", 443),
            allowed("allow_domains:example.com:443")
        );
        assert_eq!(decide(&r, "example.com", 80), denied(RULE_NO_MATCH));
        assert_eq!(
            decide(&r, "bad.example.org", 25),
            denied("deny_domains:bad.example.org:25")
        );
        assert_eq!(
            decide(&r, "bad.example.org", 443),
            allowed("allow_domains:*.example.org")
        );
        assert_eq!(decide(&r, "example.com", 0), denied(RULE_INVALID_PORT));
    }

    #[test]
    fn deny_wins_over_allow() {
        let r = rules(
            &["*.example.com", "evil.example.com"],
            &["evil.example.com", "*.com"],
            &["evil.example.com", "db.example.com:5432"],
        );
        assert_eq!(
            decide(&r, "evil.example.com", 443),
            denied("deny_domains:evil.example.com")
        );
        assert_eq!(
            decide(&r, "www.example.com", 443),
            denied("deny_domains:*.com")
        );
        assert_eq!(
            decide(&r, "db.example.com", 5432),
            denied("deny_domains:*.com")
        );
        assert!(!r.private_allowed("db.example.com", 5432, ip("10.0.0.5")));
        assert!(!r.private_allowed("evil.example.com", 443, ip("10.0.0.5")));
        // The first matching deny rule is reported.
        let r = rules(&[], &["*.example.com", "a.example.com"], &[]);
        assert_eq!(
            decide(&r, "a.example.com", 1),
            denied("deny_domains:*.example.com")
        );
    }

    /// Names with `_` (`_acme-challenge`, service labels) are names for the rules as for the
    /// proxy, which shares the normalizer (`crate::host`).
    #[test]
    fn underscore_names_are_names_for_rules_and_destinations() {
        let r = rules(&["*.example.com", "_svc.test"], &[], &[]);
        assert_eq!(
            decide(&r, "_acme-challenge.example.com", 443),
            allowed("allow_domains:*.example.com")
        );
        assert_eq!(
            decide(&r, "_SVC.test.", 443),
            allowed("allow_domains:_svc.test")
        );
        assert_eq!(
            Target::parse("_a.b_c.test"),
            Some(Target::Name("_a.b_c.test".into()))
        );
    }

    #[test]
    fn ip_literals_need_allow_hosts() {
        let r = rules(&["example.com"], &["*.test"], &[]);
        assert_eq!(decide(&r, "93.184.216.34", 80), denied(RULE_IP_LITERAL));
        assert_eq!(decide(&r, "[2001:db8::1]", 443), denied(RULE_IP_LITERAL));
        assert_eq!(decide(&r, "2001:db8::1", 443), denied(RULE_IP_LITERAL));
        assert_eq!(
            decide(&r, "[::ffff:127.0.0.1]", 80),
            denied(RULE_IP_LITERAL)
        );
        // Forms a resolver might read as an address are not names either.
        for odd in ["127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1"] {
            assert_eq!(decide(&r, odd, 80), denied(RULE_INVALID_HOST), "{odd}");
        }
        // A dotted quad with a trailing dot is that address, for the rules as for the proxy.
        assert_eq!(decide(&r, "127.0.0.1.", 80), denied(RULE_IP_LITERAL));
    }

    #[test]
    fn ip_literals_v4_v6_mapped() {
        let r = rules(
            &[],
            &[],
            &[
                "127.0.0.1:5432",
                "[::1]:8080",
                "203.0.113.0/24",
                "[2001:db8::/32]:443",
            ],
        );
        assert_eq!(
            decide(&r, "127.0.0.1", 5432),
            allowed("allow_hosts:127.0.0.1:5432")
        );
        assert_eq!(decide(&r, "127.0.0.1", 5433), denied(RULE_IP_LITERAL));
        // The mapped form is the same address, whichever way it is written.
        assert_eq!(
            decide(&r, "[::ffff:127.0.0.1]", 5432),
            allowed("allow_hosts:127.0.0.1:5432")
        );
        assert_eq!(
            decide(&r, "::ffff:7f00:1", 5432),
            allowed("allow_hosts:127.0.0.1:5432")
        );
        assert_eq!(
            decide(&r, "[::ffff:127.0.0.2]", 5432),
            denied(RULE_IP_LITERAL)
        );
        assert_eq!(decide(&r, "[::1]", 8080), allowed("allow_hosts:[::1]:8080"));
        assert_eq!(decide(&r, "::1", 8080), allowed("allow_hosts:[::1]:8080"));
        assert_eq!(
            decide(&r, "[0::1]", 8080),
            allowed("allow_hosts:[::1]:8080")
        );
        assert_eq!(decide(&r, "[::1]", 8081), denied(RULE_IP_LITERAL));
        assert_eq!(decide(&r, "127.0.0.1", 8080), denied(RULE_IP_LITERAL));
        assert_eq!(
            decide(&r, "203.0.113.77", 1),
            allowed("allow_hosts:203.0.113.0/24")
        );
        assert_eq!(
            decide(&r, "[::ffff:203.0.113.77]", 1),
            allowed("allow_hosts:203.0.113.0/24")
        );
        assert_eq!(decide(&r, "203.0.114.1", 1), denied(RULE_IP_LITERAL));
        assert_eq!(
            decide(&r, "[2001:db8:1::5]", 443),
            allowed("allow_hosts:[2001:db8::/32]:443")
        );
        assert_eq!(decide(&r, "[2001:db9::5]", 443), denied(RULE_IP_LITERAL));
        // Names are not matched by address entries.
        assert_eq!(decide(&r, "localhost", 5432), denied(RULE_NO_MATCH));
    }

    #[test]
    fn allow_hosts_names_allow_and_lift_ssrf() {
        let r = rules(&["*.example.com"], &[], &["db.internal:5432", "LocalHost"]);
        assert_eq!(
            decide(&r, "DB.internal.", 5432),
            allowed("allow_hosts:db.internal:5432")
        );
        assert_eq!(decide(&r, "db.internal", 5433), denied(RULE_NO_MATCH));
        assert_eq!(
            decide(&r, "localhost", 3000),
            allowed("allow_hosts:localhost")
        );
        assert!(r.private_allowed("db.internal", 5432, ip("10.0.0.5")));
        assert!(r.private_allowed("db.internal.", 5432, ip("fd00::5")));
        assert!(!r.private_allowed("db.internal", 5433, ip("10.0.0.5")));
        assert!(r.private_allowed("localhost", 1, ip("127.0.0.1")));
        assert!(r.private_allowed("localhost", 1, ip("::1")));
        // An allowed domain does not lift the SSRF refusal by itself.
        assert!(!r.private_allowed("www.example.com", 443, ip("127.0.0.1")));
        assert!(!r.private_allowed("www.example.com", 443, ip("169.254.169.254")));
    }

    #[test]
    fn private_allowed_by_address_and_network() {
        let r = rules(
            &["*.example.com"],
            &["*.evil.test"],
            &["127.0.0.1:5432", "10.1.2.0/24", "[::1]:8080"],
        );
        // By address, whatever name led there.
        assert!(r.private_allowed("127.0.0.1", 5432, ip("127.0.0.1")));
        assert!(r.private_allowed("[::ffff:127.0.0.1]", 5432, ip("127.0.0.1")));
        assert!(r.private_allowed("127.0.0.1", 5432, ip("::ffff:127.0.0.1")));
        assert!(r.private_allowed("db.example.com", 5432, ip("127.0.0.1")));
        assert!(!r.private_allowed("db.example.com", 5433, ip("127.0.0.1")));
        assert!(!r.private_allowed("db.example.com", 5432, ip("127.0.0.2")));
        // By network, any port.
        assert!(r.private_allowed("10.1.2.3", 22, ip("10.1.2.3")));
        assert!(r.private_allowed("svc.example.com", 1, ip("::ffff:10.1.2.200")));
        assert!(!r.private_allowed("svc.example.com", 1, ip("10.1.3.1")));
        // IPv6 loopback.
        assert!(r.private_allowed("[::1]", 8080, ip("::1")));
        assert!(r.private_allowed("::1", 8080, ip("::1")));
        assert!(!r.private_allowed("[::1]", 8081, ip("::1")));
        assert!(!r.private_allowed("localhost", 8080, ip("127.0.0.1")));
        // The literal asked for must be the address checked.
        assert!(!r.private_allowed("127.0.0.1", 5432, ip("10.1.2.3")));
        // A denied name never lifts it; nor does an invalid host or port 0.
        assert!(!r.private_allowed("x.evil.test", 5432, ip("127.0.0.1")));
        assert!(!r.private_allowed("127.1", 5432, ip("127.0.0.1")));
        assert!(!r.private_allowed("127.0.0.1", 0, ip("127.0.0.1")));
        // No entry for link-local or other private addresses.
        assert!(!r.private_allowed("169.254.169.254", 80, ip("169.254.169.254")));
        assert!(!r.private_allowed("[fe80::1]", 80, ip("fe80::1")));
    }

    #[test]
    fn empty_rules_deny_everything() {
        let r = NetRules::default();
        assert_eq!(decide(&r, "example.com", 443), denied(RULE_NO_MATCH));
        assert_eq!(decide(&r, "127.0.0.1", 80), denied(RULE_IP_LITERAL));
        assert_eq!(decide(&r, "", 80), denied(RULE_INVALID_HOST));
        assert!(!r.private_allowed("localhost", 80, ip("127.0.0.1")));
        assert_eq!(r, rules(&[], &[], &[]));
    }

    #[test]
    fn mode_is_not_consulted() {
        let mut network = Network {
            allow_domains: vec!["example.com".into()],
            ..Network::default()
        };
        for mode in [NetworkMode::None, NetworkMode::Proxy, NetworkMode::Host] {
            network.mode = mode;
            assert!(
                NetRules::new(&network)
                    .unwrap()
                    .check("example.com", 1)
                    .allowed
            );
        }
    }

    /// Issue 31: `0.0.0.0`/`::` as a destination is the connecting machine's own loopback
    /// (the proxy's: the host's), so an entry covering it is refused, saying where a server
    /// inside is reached and how the host's loopback is named; a name resolving to it is
    /// never admitted, whatever names it. Controls: the loopback entries it points at.
    #[test]
    fn the_unspecified_address_is_no_allow_hosts_entry_and_never_admitted() {
        for entry in [
            "0.0.0.0",
            "0.0.0.0:8000",
            "[::]:8000",
            "::",
            "[::ffff:0.0.0.0]:8000",
            "0.0.0.0/8",
            "[::/64]:8000",
        ] {
            let e = NetList::AllowHosts.canonicalize(entry).unwrap_err();
            assert!(e.reason.contains("unspecified address"), "{entry}: {e:?}");
            assert!(
                e.hint.contains("`127.0.0.1") && e.hint.contains("`[::1]"),
                "{entry}: {e:?}"
            );
            let network = Network {
                allow_hosts: vec![entry.into()],
                ..Network::default()
            };
            let e = NetRules::new(&network).unwrap_err();
            assert_eq!(e.code(), "E_POLICY_INVALID", "{entry}");
        }
        let e = NetList::AllowHosts
            .canonicalize("0.0.0.0:8000")
            .unwrap_err();
        assert!(e.hint.contains("`127.0.0.1:8000` or `[::1]:8000`"), "{e:?}");
        let r = rules(
            &[],
            &[],
            &["db.example:8000", "127.0.0.1:8000", "[::1]:8000"],
        );
        for ip in ["0.0.0.0", "::", "::ffff:0.0.0.0"] {
            assert!(
                !r.private_allowed("db.example", 8000, ip.parse().unwrap()),
                "{ip}"
            );
        }
        // Controls: the entries the hint names are accepted and admit what they name.
        assert!(r.private_allowed("db.example", 8000, "127.0.0.1".parse().unwrap()));
        assert!(r.private_allowed("127.0.0.1", 8000, "127.0.0.1".parse().unwrap()));
        assert!(r.private_allowed("::1", 8000, "::1".parse().unwrap()));
        assert!(NetList::AllowHosts.canonicalize("0.0.0.1/32").is_ok());
    }

    #[test]
    fn new_rejects_invalid_entries_naming_them() {
        let network = Network {
            allow_domains: vec!["example.com".into(), "*.co.uk".into()],
            ..Network::default()
        };
        let e = NetRules::new(&network).unwrap_err();
        assert_eq!(
            e.to_string(),
            "failed to validate network rule `*.co.uk` in network.allow_domains: it opens the \
             whole public suffix `co.uk`"
        );
        assert_eq!(e.code(), "E_POLICY_INVALID");
        assert_eq!(e.hint().as_deref(), Some(HINT_PUBLIC_SUFFIX));
        let network = Network {
            deny_domains: vec!["*".into()],
            ..Network::default()
        };
        assert!(NetRules::new(&network)
            .unwrap_err()
            .to_string()
            .contains("`*` in network.deny_domains"));
        let network = Network {
            allow_hosts: vec!["10.0.0.1/8".into()],
            ..Network::default()
        };
        let e = NetRules::new(&network).unwrap_err();
        assert!(
            e.to_string()
                .contains("`10.0.0.1/8` in network.allow_hosts"),
            "{e}"
        );
        assert_eq!(
            e.hint().as_deref(),
            Some("write the network address: `10.0.0.0/8`")
        );
    }

    #[test]
    fn accessors_and_canonical_entries() {
        let r = rules(
            &["A.example.com:443"],
            &["*.Evil.test."],
            &["[::ffff:10.0.0.1]:22"],
        );
        assert_eq!(r.allow_domains()[0].to_string(), "a.example.com:443");
        assert_eq!(r.deny_domains()[0].to_string(), "*.evil.test");
        assert_eq!(r.allow_hosts()[0].to_string(), "10.0.0.1:22");
        assert_eq!(r.allow_hosts()[0].spec(), &HostSpec::Ip(ip("10.0.0.1")));
        assert_eq!(r.allow_hosts()[0].port(), Some(22));
        assert_eq!(
            canon(NetList::AllowDomains, "WWW.Example.COM."),
            "www.example.com"
        );
        assert_eq!(canon(NetList::AllowHosts, "[::ffff:10.0.0.1]"), "10.0.0.1");
        assert_eq!(
            NetList::ALL.map(NetList::key),
            ["allow_domains", "deny_domains", "allow_hosts"]
        );
    }

    #[test]
    fn decision_serializes() {
        let d = rules(&["example.com"], &[], &[]).check("example.com", 443);
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            r#"{"allowed":true,"rule":"allow_domains:example.com"}"#
        );
    }
}
