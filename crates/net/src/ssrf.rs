//! Which destination addresses the proxy never connects to on a name's behalf.
//!
//! The proxy resolves a name itself, runs every resolved address through [`check`], refuses the
//! whole request if any address is forbidden (unless the policy's explicit `allow_hosts` names
//! that destination), and then connects to exactly the address it checked. This module is only
//! the classification: a pure function of the address.
//!
//! # What is forbidden
//!
//! Everything that reaches the machine itself, its local networks or its provider's
//! infrastructure rather than the public internet:
//!
//! | class ([`Forbidden::code`]) | IPv4 | IPv6 |
//! |---|---|---|
//! | `loopback` | 127.0.0.0/8 | ::1 |
//! | `unspecified` | 0.0.0.0/8 ("this network") | :: |
//! | `private` | 10/8, 172.16/12, 192.168/16 (RFC 1918) | |
//! | `link_local` | 169.254/16 | fe80::/10 |
//! | `cloud_metadata` | 169.254.169.254, 100.100.100.200, 168.63.129.16 | fd00:ec2::254, fd20:ce::254 |
//! | `cgnat` | 100.64/10 (RFC 6598) | |
//! | `unique_local` | | fc00::/7 |
//! | `site_local` | | fec0::/10 (deprecated, still routed by some stacks) |
//! | `multicast` | 224/4 | ff00::/8 |
//! | `broadcast` | 255.255.255.255 | |
//! | `reserved` | 240/4 | everything outside 2000::/3 not named elsewhere (incl. IPv4-compatible and IPv4-translated forms of public addresses, 100::/64 discard) |
//! | `benchmarking` | 198.18/15 | 2001:2::/48 |
//! | `ietf_protocol_assignment` | 192.0.0.0/24 | 2001::/23 (outside Teredo) |
//!
//! IPv6 addresses that carry an IPv4 address are classified by that IPv4 address first, so
//! `::ffff:127.0.0.1` is `loopback` and `64:ff9b::a9fe:a9fe` is `cloud_metadata`: IPv4-mapped
//! `::ffff:0:0/96`, IPv4-translated `::ffff:0:0:0/96`, IPv4-compatible `::/96`, NAT64
//! `64:ff9b::/96`, local-use NAT64 `64:ff9b:1::/48` (every RFC 6052 prefix length that fits in
//! it is tried, since the operator's choice is unknown), 6to4 `2002::/16`, and Teredo
//! `2001::/32` (both the server and the de-obfuscated client address). A mapped, NAT64, 6to4 or
//! Teredo address whose IPv4 addresses are all public is allowed: it reaches that public host.
//!
//! # What is deliberately allowed
//!
//! The documentation ranges 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24 and 2001:db8::/32
//! (and 3fff::/20) are **not** forbidden. Nothing on the internet uses them, so refusing them
//! protects nothing, while stockade's own tests build their "public" test hosts from them in
//! private network namespaces. A deployment that wants them refused can do so with
//! `deny_hosts`-style rules in the policy.
//!
//! ```
//! use net::ssrf::{self, Forbidden};
//!
//! assert_eq!(ssrf::forbidden("10.1.2.3".parse().unwrap()), Some(Forbidden::Private));
//! assert_eq!(ssrf::forbidden("::ffff:127.0.0.1".parse().unwrap()), Some(Forbidden::Loopback));
//! assert_eq!(ssrf::forbidden("198.51.100.7".parse().unwrap()), None);
//! let finding = ssrf::check("64:ff9b::a9fe:a9fe".parse().unwrap()).unwrap();
//! assert_eq!(finding.kind.code(), "cloud_metadata");
//! assert_eq!(
//!     finding.to_string(),
//!     "64:ff9b::a9fe:a9fe embeds 169.254.169.254 (NAT64 64:ff9b::/96): \
//!      cloud metadata service (instance credentials)"
//! );
//! ```

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not a destination for a name (see the module docs for the ranges).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Forbidden {
    Loopback,
    Unspecified,
    Private,
    LinkLocal,
    CloudMetadata,
    Cgnat,
    UniqueLocal,
    SiteLocal,
    Multicast,
    Broadcast,
    Reserved,
    Benchmarking,
    IetfProtocolAssignment,
}

impl Forbidden {
    /// A stable machine-readable name for audit events and reports.
    pub fn code(self) -> &'static str {
        match self {
            Self::Loopback => "loopback",
            Self::Unspecified => "unspecified",
            Self::Private => "private",
            Self::LinkLocal => "link_local",
            Self::CloudMetadata => "cloud_metadata",
            Self::Cgnat => "cgnat",
            Self::UniqueLocal => "unique_local",
            Self::SiteLocal => "site_local",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Reserved => "reserved",
            Self::Benchmarking => "benchmarking",
            Self::IetfProtocolAssignment => "ietf_protocol_assignment",
        }
    }

    /// What the class is, for a person reading a refusal.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Loopback => "loopback (this machine: 127.0.0.0/8, ::1)",
            Self::Unspecified => "unspecified address (0.0.0.0/8 \"this network\", ::)",
            Self::Private => "private network (RFC 1918: 10/8, 172.16/12, 192.168/16)",
            Self::LinkLocal => "link-local (169.254.0.0/16, fe80::/10)",
            Self::CloudMetadata => "cloud metadata service (instance credentials)",
            Self::Cgnat => "carrier-grade NAT shared space (100.64.0.0/10)",
            Self::UniqueLocal => "unique local IPv6 (fc00::/7, the IPv6 private range)",
            Self::SiteLocal => "site-local IPv6 (fec0::/10, deprecated private range)",
            Self::Multicast => "multicast (224.0.0.0/4, ff00::/8)",
            Self::Broadcast => "broadcast (255.255.255.255)",
            Self::Reserved => "reserved, not globally routable",
            Self::Benchmarking => "benchmarking network (198.18.0.0/15, 2001:2::/48)",
            Self::IetfProtocolAssignment => "IETF protocol assignment (192.0.0.0/24, 2001::/23)",
        }
    }
}

impl fmt::Display for Forbidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// How an IPv6 address carries an IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Embedding {
    /// `::ffff:a.b.c.d` (RFC 4291).
    Ipv4Mapped,
    /// `::ffff:0:a.b.c.d` (RFC 2765 SIIT).
    Ipv4Translated,
    /// `::a.b.c.d` (RFC 4291, deprecated).
    Ipv4Compatible,
    /// `64:ff9b::a.b.c.d` (RFC 6052 well-known prefix).
    Nat64,
    /// Inside `64:ff9b:1::/48` (RFC 8215) with the given RFC 6052 prefix length.
    LocalNat64 { prefix_len: u8 },
    /// `2002:aabb:ccdd::/48` (RFC 3056).
    SixToFour,
    /// The Teredo server field of `2001:0:ssss:ssss::/64` (RFC 4380).
    TeredoServer,
    /// The obfuscated Teredo client field (last 32 bits, inverted).
    TeredoClient,
}

impl fmt::Display for Embedding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ipv4Mapped => f.write_str("IPv4-mapped ::ffff:0:0/96"),
            Self::Ipv4Translated => f.write_str("IPv4-translated ::ffff:0:0:0/96"),
            Self::Ipv4Compatible => f.write_str("IPv4-compatible ::/96"),
            Self::Nat64 => f.write_str("NAT64 64:ff9b::/96"),
            Self::LocalNat64 { prefix_len } => {
                write!(
                    f,
                    "local-use NAT64 64:ff9b:1::/48 read as a /{prefix_len} prefix"
                )
            }
            Self::SixToFour => f.write_str("6to4 2002::/16"),
            Self::TeredoServer => f.write_str("Teredo 2001::/32 server"),
            Self::TeredoClient => f.write_str("Teredo 2001::/32 client"),
        }
    }
}

/// An IPv4 address found inside an IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Embedded {
    pub via: Embedding,
    pub ipv4: Ipv4Addr,
}

/// A forbidden address, its class and, for an IPv6 address classified by the IPv4 address it
/// carries, that IPv4 address. `Display` gives the full sentence for a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Finding {
    pub addr: IpAddr,
    pub kind: Forbidden,
    pub embedded: Option<Embedded>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.embedded {
            Some(e) => write!(
                f,
                "{} embeds {} ({}): {}",
                self.addr, e.ipv4, e.via, self.kind
            ),
            None => write!(f, "{}: {}", self.addr, self.kind),
        }
    }
}

/// The class that forbids `ip`, or `None` when the proxy may connect to it.
pub fn forbidden(ip: IpAddr) -> Option<Forbidden> {
    check(ip).map(|f| f.kind)
}

/// Like [`forbidden`], with the embedded IPv4 address that decided it (for messages).
pub fn check(ip: IpAddr) -> Option<Finding> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4).map(|kind| Finding {
            addr: ip,
            kind,
            embedded: None,
        }),
        IpAddr::V6(v6) => check_v6(v6),
    }
}

/// IPv4 ranges, most specific first (the first match wins).
const V4_RANGES: &[(Ipv4Addr, u8, Forbidden)] = &[
    (Ipv4Addr::new(255, 255, 255, 255), 32, Forbidden::Broadcast),
    // AWS, GCP, Azure, Oracle, OpenStack instance metadata.
    (
        Ipv4Addr::new(169, 254, 169, 254),
        32,
        Forbidden::CloudMetadata,
    ),
    // Alibaba Cloud instance metadata.
    (
        Ipv4Addr::new(100, 100, 100, 200),
        32,
        Forbidden::CloudMetadata,
    ),
    // Azure WireServer: a public address, but only ever the VM host's agent endpoint.
    (
        Ipv4Addr::new(168, 63, 129, 16),
        32,
        Forbidden::CloudMetadata,
    ),
    (Ipv4Addr::new(0, 0, 0, 0), 8, Forbidden::Unspecified),
    (Ipv4Addr::new(10, 0, 0, 0), 8, Forbidden::Private),
    (Ipv4Addr::new(100, 64, 0, 0), 10, Forbidden::Cgnat),
    (Ipv4Addr::new(127, 0, 0, 0), 8, Forbidden::Loopback),
    (Ipv4Addr::new(169, 254, 0, 0), 16, Forbidden::LinkLocal),
    (Ipv4Addr::new(172, 16, 0, 0), 12, Forbidden::Private),
    (
        Ipv4Addr::new(192, 0, 0, 0),
        24,
        Forbidden::IetfProtocolAssignment,
    ),
    (Ipv4Addr::new(192, 168, 0, 0), 16, Forbidden::Private),
    (Ipv4Addr::new(198, 18, 0, 0), 15, Forbidden::Benchmarking),
    (Ipv4Addr::new(224, 0, 0, 0), 4, Forbidden::Multicast),
    (Ipv4Addr::new(240, 0, 0, 0), 4, Forbidden::Reserved),
];

/// IPv6 ranges checked after the embedded-IPv4 forms, most specific first.
const V6_RANGES: &[(Ipv6Addr, u8, Forbidden)] = &[
    (Ipv6Addr::UNSPECIFIED, 128, Forbidden::Unspecified),
    (Ipv6Addr::LOCALHOST, 128, Forbidden::Loopback),
    // AWS IMDS over IPv6 (Nitro).
    (
        Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254),
        128,
        Forbidden::CloudMetadata,
    ),
    // GCP metadata server over IPv6.
    (
        Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254),
        128,
        Forbidden::CloudMetadata,
    ),
    (
        Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0),
        7,
        Forbidden::UniqueLocal,
    ),
    (
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
        10,
        Forbidden::LinkLocal,
    ),
    (
        Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0),
        10,
        Forbidden::SiteLocal,
    ),
    (
        Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0),
        8,
        Forbidden::Multicast,
    ),
    (
        Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0),
        48,
        Forbidden::Benchmarking,
    ),
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        23,
        Forbidden::IetfProtocolAssignment,
    ),
];

// Prefix tests are written out (a mask and a compare) rather than pulled from an IP-network
// crate: the ranges are constant data, and std already parses and prints the addresses.
fn in_v4(ip: Ipv4Addr, net: Ipv4Addr, len: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    u32::from(ip) & mask == u32::from(net) & mask
}

fn in_v6(ip: Ipv6Addr, net: Ipv6Addr, len: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
    u128::from(ip) & mask == u128::from(net) & mask
}

fn classify_v4(ip: Ipv4Addr) -> Option<Forbidden> {
    V4_RANGES
        .iter()
        .find(|(net, len, _)| in_v4(ip, *net, *len))
        .map(|(_, _, kind)| *kind)
}

fn check_v6(ip: Ipv6Addr) -> Option<Finding> {
    let finding = |kind, embedded| {
        Some(Finding {
            addr: IpAddr::V6(ip),
            kind,
            embedded,
        })
    };
    // `::` and `::1` sit inside the IPv4-compatible range but are their own classes.
    if ip == Ipv6Addr::UNSPECIFIED {
        return finding(Forbidden::Unspecified, None);
    }
    if ip == Ipv6Addr::LOCALHOST {
        return finding(Forbidden::Loopback, None);
    }
    let embedded = embedded_ipv4(ip);
    for e in embedded.iter().flatten() {
        if let Some(kind) = classify_v4(e.ipv4) {
            return finding(kind, Some(*e));
        }
    }
    // Every IPv4 address it carries is public: mapped, NAT64, 6to4 and Teredo addresses then
    // reach that public host. (Compatible and translated forms fall through to `reserved`.)
    if let Some(Embedded { via, .. }) = embedded[0] {
        match via {
            Embedding::Ipv4Mapped
            | Embedding::Nat64
            | Embedding::LocalNat64 { .. }
            | Embedding::SixToFour
            | Embedding::TeredoServer
            | Embedding::TeredoClient => return None,
            Embedding::Ipv4Translated | Embedding::Ipv4Compatible => {}
        }
    }
    if let Some((_, _, kind)) = V6_RANGES.iter().find(|(net, len, _)| in_v6(ip, *net, *len)) {
        return finding(*kind, None);
    }
    // Only 2000::/3 is allocated for global unicast; the rest is IETF-reserved.
    if !in_v6(ip, Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3) {
        return finding(Forbidden::Reserved, None);
    }
    None
}

/// The IPv4 addresses an IPv6 address carries, by the forms listed in the module docs. At most
/// four (local-use NAT64 read at four prefix lengths); the first entry is `Some` whenever any is.
pub fn embedded_ipv4(ip: Ipv6Addr) -> [Option<Embedded>; 4] {
    let o = ip.octets();
    let v4 = |a: u8, b: u8, c: u8, d: u8| Ipv4Addr::new(a, b, c, d);
    let last = v4(o[12], o[13], o[14], o[15]);
    let one = |via, ipv4| [Some(Embedded { via, ipv4 }), None, None, None];
    let in_net = |net: Ipv6Addr, len| in_v6(ip, net, len);
    if in_net(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0), 96) {
        return one(Embedding::Ipv4Mapped, last);
    }
    if in_net(Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, 0, 0), 96) {
        return one(Embedding::Ipv4Translated, last);
    }
    if in_net(Ipv6Addr::UNSPECIFIED, 96) {
        return one(Embedding::Ipv4Compatible, last);
    }
    if in_net(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96) {
        return one(Embedding::Nat64, last);
    }
    if in_net(Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48) {
        // RFC 6052 section 2.2: where the IPv4 address sits for each prefix length (bits 64..72,
        // octet 8, are skipped). Lengths shorter than the /48 itself cannot apply.
        let with = |prefix_len, ipv4| {
            Some(Embedded {
                via: Embedding::LocalNat64 { prefix_len },
                ipv4,
            })
        };
        return [
            with(96, last),
            with(64, v4(o[9], o[10], o[11], o[12])),
            with(56, v4(o[7], o[9], o[10], o[11])),
            with(48, v4(o[6], o[7], o[9], o[10])),
        ];
    }
    if in_net(Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16) {
        return one(Embedding::SixToFour, v4(o[2], o[3], o[4], o[5]));
    }
    if in_net(Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32) {
        let client = v4(!o[12], !o[13], !o[14], !o[15]);
        return [
            Some(Embedded {
                via: Embedding::TeredoServer,
                ipv4: v4(o[4], o[5], o[6], o[7]),
            }),
            Some(Embedded {
                via: Embedding::TeredoClient,
                ipv4: client,
            }),
            None,
            None,
        ];
    }
    [None; 4]
}

#[cfg(test)]
mod tests {
    use super::*;
    use Forbidden::*;

    fn v4(s: &str) -> Option<Forbidden> {
        forbidden(IpAddr::V4(s.parse().unwrap()))
    }

    fn v6(s: &str) -> Option<Forbidden> {
        forbidden(IpAddr::V6(s.parse().unwrap()))
    }

    /// Asserts the class of the first and last address of a range and that the addresses just
    /// outside it are not in that class.
    fn v4_range(first: &str, last: &str, kind: Forbidden) {
        assert_eq!(v4(first), Some(kind), "{first}");
        assert_eq!(v4(last), Some(kind), "{last}");
        let before = u32::from(first.parse::<Ipv4Addr>().unwrap()).checked_sub(1);
        let after = u32::from(last.parse::<Ipv4Addr>().unwrap()).checked_add(1);
        for outside in [before, after].into_iter().flatten() {
            let ip = Ipv4Addr::from(outside);
            assert_ne!(
                forbidden(IpAddr::V4(ip)),
                Some(kind),
                "{ip} is outside {first}-{last}"
            );
        }
    }

    fn v6_range(first: &str, last: &str, kind: Forbidden) {
        assert_eq!(v6(first), Some(kind), "{first}");
        assert_eq!(v6(last), Some(kind), "{last}");
        let before = u128::from(first.parse::<Ipv6Addr>().unwrap()).checked_sub(1);
        let after = u128::from(last.parse::<Ipv6Addr>().unwrap()).checked_add(1);
        for outside in [before, after].into_iter().flatten() {
            let ip = Ipv6Addr::from(outside);
            assert_ne!(
                forbidden(IpAddr::V6(ip)),
                Some(kind),
                "{ip} is outside {first}-{last}"
            );
        }
    }

    #[test]
    fn ipv4_ranges_and_their_boundaries() {
        v4_range("0.0.0.0", "0.255.255.255", Unspecified);
        v4_range("10.0.0.0", "10.255.255.255", Private);
        v4_range("100.64.0.0", "100.127.255.255", Cgnat);
        v4_range("127.0.0.0", "127.255.255.255", Loopback);
        v4_range("169.254.0.0", "169.254.169.253", LinkLocal);
        v4_range("169.254.169.255", "169.254.255.255", LinkLocal);
        v4_range("172.16.0.0", "172.31.255.255", Private);
        v4_range("192.0.0.0", "192.0.0.255", IetfProtocolAssignment);
        v4_range("192.168.0.0", "192.168.255.255", Private);
        v4_range("198.18.0.0", "198.19.255.255", Benchmarking);
        v4_range("224.0.0.0", "239.255.255.255", Multicast);
        v4_range("240.0.0.0", "255.255.255.254", Reserved);
        assert_eq!(v4("255.255.255.255"), Some(Broadcast));
    }

    #[test]
    fn ipv4_neighbours_of_ranges_are_public() {
        for ip in [
            "1.0.0.0",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "191.255.255.255",
            "192.0.1.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "8.8.8.8",
            "1.1.1.1",
        ] {
            assert_eq!(v4(ip), None, "{ip}");
        }
    }

    #[test]
    fn cloud_metadata_addresses_are_called_out() {
        assert_eq!(v4("169.254.169.254"), Some(CloudMetadata));
        assert_eq!(v4("100.100.100.200"), Some(CloudMetadata));
        assert_eq!(v4("168.63.129.16"), Some(CloudMetadata));
        assert_eq!(v4("168.63.129.15"), None);
        assert_eq!(v4("168.63.129.17"), None);
        assert_eq!(v6("fd00:ec2::254"), Some(CloudMetadata));
        assert_eq!(v6("fd20:ce::254"), Some(CloudMetadata));
        assert_eq!(v6("fd00:ec2::253"), Some(UniqueLocal));
        assert_eq!(v6("::ffff:169.254.169.254"), Some(CloudMetadata));
    }

    #[test]
    fn documentation_ranges_stay_allowed() {
        for ip in [
            "192.0.2.0",
            "192.0.2.255",
            "198.51.100.0",
            "198.51.100.255",
            "203.0.113.0",
            "203.0.113.255",
        ] {
            assert_eq!(v4(ip), None, "{ip}");
        }
        for ip in [
            "2001:db8::",
            "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
            "3fff::1",
        ] {
            assert_eq!(v6(ip), None, "{ip}");
        }
        assert_eq!(v6("::ffff:203.0.113.9"), None);
    }

    #[test]
    fn ipv6_ranges_and_their_boundaries() {
        assert_eq!(v6("::"), Some(Unspecified));
        assert_eq!(v6("::1"), Some(Loopback));
        v6_range(
            "fc00::",
            "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            UniqueLocal,
        );
        v6_range(
            "fe80::",
            "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            LinkLocal,
        );
        v6_range(
            "fec0::",
            "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            SiteLocal,
        );
        v6_range(
            "ff00::",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            Multicast,
        );
        v6_range(
            "2001:2::",
            "2001:2:0:ffff:ffff:ffff:ffff:ffff",
            Benchmarking,
        );
        v6_range(
            "2001:1::",
            "2001:1:ffff:ffff:ffff:ffff:ffff:ffff",
            IetfProtocolAssignment,
        );
        v6_range(
            "2001:2:1::",
            "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
            IetfProtocolAssignment,
        );
        assert_eq!(v6("2001:200::"), None);
        assert_eq!(v6("2000::"), None);
        assert_eq!(v6("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), None);
        assert_eq!(v6("2606:4700:4700::1111"), None);
        assert_eq!(v6("2a00:1450:4001:80b::200e"), None);
    }

    #[test]
    fn ipv6_outside_global_unicast_is_reserved() {
        for ip in [
            "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "4000::",
            "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "100::1",
            "::1:0:0:1",
            "5f00::1",
            "64:ff9b:2::1",
        ] {
            assert_eq!(v6(ip), Some(Reserved), "{ip}");
        }
    }

    #[test]
    fn ipv4_mapped_is_classified_by_the_ipv4_address() {
        assert_eq!(v6("::ffff:127.0.0.1"), Some(Loopback));
        assert_eq!(v6("::ffff:7f00:1"), Some(Loopback));
        assert_eq!(v6("::ffff:10.0.0.1"), Some(Private));
        assert_eq!(v6("::ffff:0.0.0.0"), Some(Unspecified));
        assert_eq!(v6("::ffff:255.255.255.255"), Some(Broadcast));
        assert_eq!(v6("::ffff:100.64.0.1"), Some(Cgnat));
        assert_eq!(v6("::ffff:8.8.8.8"), None);
        // The range's boundaries: ::fffe:ffff:ffff and ::1:0:0:0 are not mapped.
        assert_eq!(v6("::fffe:7f00:1"), Some(Reserved));
        assert_eq!(v6("::1:0:0:0"), Some(Reserved));
    }

    #[test]
    fn ipv4_translated_and_compatible_forms() {
        assert_eq!(v6("::ffff:0:127.0.0.1"), Some(Loopback));
        assert_eq!(v6("::ffff:0:8.8.8.8"), Some(Reserved));
        assert_eq!(v6("::127.0.0.1"), Some(Loopback));
        assert_eq!(v6("::169.254.169.254"), Some(CloudMetadata));
        assert_eq!(v6("::0.0.0.2"), Some(Unspecified));
        assert_eq!(v6("::8.8.8.8"), Some(Reserved));
    }

    #[test]
    fn nat64_forms() {
        assert_eq!(v6("64:ff9b::127.0.0.1"), Some(Loopback));
        assert_eq!(v6("64:ff9b::a9fe:a9fe"), Some(CloudMetadata));
        assert_eq!(v6("64:ff9b::192.168.1.1"), Some(Private));
        assert_eq!(v6("64:ff9b::8.8.8.8"), None);
        // Just outside the /96: not NAT64, and outside 2000::/3.
        assert_eq!(v6("64:ff9b::1:808:808"), Some(Reserved));
        // Local-use prefix, /96 reading.
        assert_eq!(v6("64:ff9b:1::127.0.0.1"), Some(Loopback));
        // Public under every reading.
        assert_eq!(v6("64:ff9b:1:808:8:808:808:808"), None);
        // The usual /96 spelling of a public address reads as 0.0.0.8 at /64: refused, since
        // which prefix length the local translator uses is unknown.
        assert_eq!(v6("64:ff9b:1::8.8.8.8"), Some(Unspecified));
        // /64 reading: 127.0.0.1 at octets 9..13 while the /96 reading is public.
        assert_eq!(v6("64:ff9b:1:0:7f:0:108:808"), Some(Loopback));
        // /48 reading: 10.8 in octets 6..8 and 8.8 in 9..11; the other readings are 8.8.8.8.
        let ip: Ipv6Addr = "64:ff9b:1:a08:8:808:808:808".parse().unwrap();
        let finding = check(IpAddr::V6(ip)).unwrap();
        assert_eq!(finding.kind, Private);
        assert_eq!(
            finding.embedded,
            Some(Embedded {
                via: Embedding::LocalNat64 { prefix_len: 48 },
                ipv4: Ipv4Addr::new(10, 8, 8, 8)
            })
        );
    }

    #[test]
    fn six_to_four_is_classified_by_the_ipv4_address() {
        assert_eq!(v6("2002:7f00:1::"), Some(Loopback));
        assert_eq!(v6("2002:a9fe:a9fe::1"), Some(CloudMetadata));
        assert_eq!(v6("2002:c0a8:101:1::1"), Some(Private));
        assert_eq!(v6("2002:808:808::1"), None);
        assert_eq!(
            v6("2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
            Some(Broadcast)
        );
        // Boundaries of 2002::/16.
        assert_eq!(v6("2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), None);
        assert_eq!(v6("2003::"), None);
    }

    #[test]
    fn teredo_checks_server_and_deobfuscated_client() {
        // Client 127.0.0.1 is stored inverted: 80ff:fffe.
        assert_eq!(v6("2001:0:4136:e378:8000:63bf:80ff:fffe"), Some(Loopback));
        // Public server 65.54.227.120, public client 8.8.8.8 (f7f7:f7f7).
        assert_eq!(v6("2001:0:4136:e378:8000:63bf:f7f7:f7f7"), None);
        // Private server.
        assert_eq!(v6("2001:0:a00:1:8000:63bf:f7f7:f7f7"), Some(Private));
        // The client field read without inverting would be public: still loopback.
        let finding = check("2001:0:4136:e378:8000:63bf:80ff:fffe".parse().unwrap()).unwrap();
        assert_eq!(
            finding.embedded,
            Some(Embedded {
                via: Embedding::TeredoClient,
                ipv4: Ipv4Addr::new(127, 0, 0, 1)
            })
        );
        // Boundaries of 2001::/32.
        assert_eq!(v6("2001:1::"), Some(IetfProtocolAssignment));
        assert_eq!(v6("2001:0:ffff:ffff:ffff:ffff:ffff:ffff"), Some(Broadcast));
    }

    #[test]
    fn codes_are_stable_and_distinct() {
        let all = [
            Loopback,
            Unspecified,
            Private,
            LinkLocal,
            CloudMetadata,
            Cgnat,
            UniqueLocal,
            SiteLocal,
            Multicast,
            Broadcast,
            Reserved,
            Benchmarking,
            IetfProtocolAssignment,
        ];
        let codes: std::collections::BTreeSet<_> = all.iter().map(|k| k.code()).collect();
        assert_eq!(codes.len(), all.len());
        assert_eq!(Loopback.code(), "loopback");
        assert_eq!(CloudMetadata.code(), "cloud_metadata");
        assert!(all.iter().all(|k| !k.describe().is_empty()));
    }

    #[test]
    fn findings_read_as_sentences() {
        let f = check("127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(
            f.to_string(),
            "127.0.0.1: loopback (this machine: 127.0.0.0/8, ::1)"
        );
        let f = check("::ffff:10.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(
            f.to_string(),
            "::ffff:10.0.0.1 embeds 10.0.0.1 (IPv4-mapped ::ffff:0:0/96): \
             private network (RFC 1918: 10/8, 172.16/12, 192.168/16)"
        );
    }

    #[test]
    fn embedded_ipv4_of_plain_addresses_is_none() {
        assert_eq!(embedded_ipv4("2001:db8::1".parse().unwrap()), [None; 4]);
        assert_eq!(embedded_ipv4("fe80::1".parse().unwrap()), [None; 4]);
    }
}
