//! One spelling for a host, for everything that compares hosts: the policy's network rules
//! (`allow_domains`, `deny_domains`, `allow_hosts`) and every way into the egress proxy (an
//! HTTP `CONNECT` authority, an absolute-form request target, a SOCKS5 request, a TLS SNI, a
//! `Host` header: `net` re-exports [`normalize_host`]). A rule and a destination that name the
//! same host therefore compare equal, and a host one side refuses the other refuses too.
//!
//! ```
//! use policy::host::{normalize_host, HostError};
//! assert_eq!(normalize_host("Example.COM.").unwrap(), "example.com");
//! assert_eq!(normalize_host("[2001:DB8::0001]").unwrap(), "2001:db8::1");
//! assert_eq!(normalize_host("127.1"), Err(HostError::NumericName)); // inet_aton's 127.0.0.1
//! ```

use std::net::{Ipv4Addr, Ipv6Addr};

/// Longest host name accepted, in bytes, without a trailing dot (the DNS limit).
pub const MAX_HOST_LEN: usize = 253;
/// Longest label (the part between two dots) of a host name, in bytes.
pub const MAX_LABEL_LEN: usize = 63;

/// Why a host (or a destination's port) was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("the host is empty")]
    Empty,
    #[error("the host is longer than {MAX_HOST_LEN} bytes")]
    TooLong,
    #[error("the host has an empty label (two dots in a row, or a leading dot)")]
    EmptyLabel,
    #[error("a label of the host is longer than {MAX_LABEL_LEN} bytes")]
    LabelTooLong,
    #[error("the host contains {0:?}, which is not allowed in a host name")]
    BadChar(char),
    #[error("a label of the host starts or ends with `-`")]
    HyphenAtLabelEdge,
    #[error(
        "the host ends in a numeric label, which resolvers read as an IPv4 address \
         (write the address in dotted-quad form)"
    )]
    NumericName,
    #[error("the IPv6 address is malformed")]
    BadIpv6,
    #[error("IPv6 zone identifiers are not accepted")]
    ZoneId,
    /// For a destination (host and port): port 0.
    #[error("port 0 is not a destination")]
    PortZero,
}

/// Brings a host to the one spelling every comparison uses, or refuses it.
///
/// - IPv6 (bare or in brackets) becomes its canonical compressed lower-case text without
///   brackets; zone identifiers (`%eth0`) are refused.
/// - IPv4 must be strict dotted-quad (std's parser: no octal, hex, short or leading-zero forms)
///   and becomes its canonical text.
/// - Anything else must be a name ([`normalize_name`]).
pub fn normalize_host(host: &str) -> Result<String, HostError> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or(HostError::BadIpv6)?;
        return parse_ipv6(inner);
    }
    if host.contains(':') {
        return parse_ipv6(host);
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    if let Ok(ip) = name.parse::<Ipv4Addr>() {
        return Ok(ip.to_string());
    }
    normalize_name(host)
}

/// A host name, lower-cased and without one trailing dot. It may contain ASCII letters,
/// digits, `-` and `_` in non-empty labels of at most 63 bytes that neither start nor end with
/// `-`, 253 bytes in all. Percent-encoding, userinfo, whitespace and non-ASCII are refused (an
/// IDN must arrive as its `xn--` form).
///
/// A name whose last label is numeric (`127.1`, `2130706433`, `0x7f.1`, `1.2.3.010`, and so a
/// dotted quad) is refused: `getaddrinfo`/`inet_aton` and URL parsers read such names as IPv4
/// addresses in the legacy forms, which would turn a "name" into a loopback address behind
/// the back of rules that only treat IP literals specially. Real host names never end in a
/// number.
pub fn normalize_name(text: &str) -> Result<String, HostError> {
    let name = text.strip_suffix('.').unwrap_or(text);
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if name.len() > MAX_HOST_LEN {
        return Err(HostError::TooLong);
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_' || *c == '.'))
    {
        return Err(HostError::BadChar(c));
    }
    let mut last = "";
    for label in name.split('.') {
        if label.is_empty() {
            return Err(HostError::EmptyLabel);
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(HostError::LabelTooLong);
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(HostError::HyphenAtLabelEdge);
        }
        last = label;
    }
    if is_numeric_label(last) {
        return Err(HostError::NumericName);
    }
    Ok(name.to_ascii_lowercase())
}

fn parse_ipv6(text: &str) -> Result<String, HostError> {
    if text.contains('%') {
        return Err(HostError::ZoneId);
    }
    text.parse::<Ipv6Addr>()
        .map(|ip| ip.to_string())
        .map_err(|_| HostError::BadIpv6)
}

/// The WHATWG URL standard's "ends in a number" test for a label: all decimal digits, or
/// `0x`/`0X` followed by hex digits (possibly none). `inet_aton` accepts the same forms.
fn is_numeric_label(label: &str) -> bool {
    if let Some(hex) = label
        .strip_prefix("0x")
        .or_else(|| label.strip_prefix("0X"))
    {
        return hex.chars().all(|c| c.is_ascii_hexdigit());
    }
    !label.is_empty() && label.chars().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(host: &str) -> Result<String, HostError> {
        normalize_host(host)
    }

    #[test]
    fn names_are_lower_cased_and_lose_one_trailing_dot() {
        assert_eq!(norm("Allowed.TEST").unwrap(), "allowed.test");
        assert_eq!(norm("allowed.test.").unwrap(), "allowed.test");
        assert_eq!(norm("localhost").unwrap(), "localhost");
        assert_eq!(
            norm("_acme-challenge.a-b.test").unwrap(),
            "_acme-challenge.a-b.test"
        );
        assert_eq!(norm("xn--bcher-kva.test").unwrap(), "xn--bcher-kva.test");
        assert_eq!(norm("a.test..").unwrap_err(), HostError::EmptyLabel);
    }

    #[test]
    fn malformed_names_are_refused() {
        assert_eq!(norm("").unwrap_err(), HostError::Empty);
        assert_eq!(norm(".").unwrap_err(), HostError::Empty);
        assert_eq!(norm(".a.test").unwrap_err(), HostError::EmptyLabel);
        assert_eq!(norm("a..test").unwrap_err(), HostError::EmptyLabel);
        assert_eq!(norm("a%2etest").unwrap_err(), HostError::BadChar('%'));
        assert_eq!(norm("user@a.test").unwrap_err(), HostError::BadChar('@'));
        assert_eq!(norm("a test").unwrap_err(), HostError::BadChar(' '));
        assert_eq!(norm("a.test\0").unwrap_err(), HostError::BadChar('\0'));
        assert_eq!(norm("a\\b.test").unwrap_err(), HostError::BadChar('\\'));
        assert_eq!(norm("a/b").unwrap_err(), HostError::BadChar('/'));
        assert_eq!(norm("bücher.test").unwrap_err(), HostError::BadChar('ü'));
        assert_eq!(norm("ａ.test").unwrap_err(), HostError::BadChar('ａ'));
    }

    #[test]
    fn length_limits_hold_at_their_boundaries() {
        let label63 = "a".repeat(63);
        assert!(norm(&format!("{label63}.test")).is_ok());
        assert_eq!(
            norm(&format!("{}.test", "a".repeat(64))).unwrap_err(),
            HostError::LabelTooLong
        );
        // 4 labels of 63 + 3 dots = 255 > 253; 3 x 63 + 61 + 3 dots = 253.
        let at_limit = format!("{label63}.{label63}.{label63}.{}", "b".repeat(61));
        assert_eq!(at_limit.len(), 253);
        assert!(norm(&at_limit).is_ok());
        assert!(norm(&format!("{at_limit}.")).is_ok());
        let over = format!("{label63}.{label63}.{label63}.{}", "b".repeat(62));
        assert_eq!(norm(&over).unwrap_err(), HostError::TooLong);
    }

    #[test]
    fn ip_literals_become_canonical_text() {
        assert_eq!(norm("198.51.100.7").unwrap(), "198.51.100.7");
        assert_eq!(norm("198.51.100.7.").unwrap(), "198.51.100.7");
        assert_eq!(norm("[::1]").unwrap(), "::1");
        assert_eq!(norm("::1").unwrap(), "::1");
        assert_eq!(norm("[2001:DB8:0:0::1]").unwrap(), "2001:db8::1");
        assert_eq!(norm("::FFFF:127.0.0.1").unwrap(), "::ffff:127.0.0.1");
        assert_eq!(norm("[::ffff:7f00:1]").unwrap(), "::ffff:127.0.0.1");
    }

    #[test]
    fn malformed_ip_literals_are_refused() {
        assert_eq!(norm("[::1").unwrap_err(), HostError::BadIpv6);
        assert_eq!(norm("[]").unwrap_err(), HostError::BadIpv6);
        assert_eq!(norm("[198.51.100.7]").unwrap_err(), HostError::BadIpv6);
        assert_eq!(norm("[::1]:80").unwrap_err(), HostError::BadIpv6);
        assert_eq!(norm("1::2::3").unwrap_err(), HostError::BadIpv6);
        assert_eq!(norm("a.test:80").unwrap_err(), HostError::BadIpv6);
        assert_eq!(norm("[fe80::1%eth0]").unwrap_err(), HostError::ZoneId);
        assert_eq!(norm("fe80::1%25eth0").unwrap_err(), HostError::ZoneId);
    }

    #[test]
    fn legacy_numeric_ipv4_spellings_are_refused() {
        for host in [
            "127.1",
            "127.0.1",
            "2130706433",
            "0x7f000001",
            "0x7f.0.0.1",
            "0177.0.0.1",
            "127.0.0.01",
            "127.0.0.0x1",
            "1.2.3.4.5",
            "256.1.1.1",
            "a.test.0x",
            "a.test.123",
            "0",
        ] {
            assert_eq!(norm(host).unwrap_err(), HostError::NumericName, "{host}");
        }
        // A numeric label elsewhere, or a label that only starts like a number, is a name.
        assert_eq!(norm("123.test").unwrap(), "123.test");
        assert_eq!(norm("a.0xg").unwrap(), "a.0xg");
        assert_eq!(norm("a.1e5").unwrap(), "a.1e5");
    }

    #[test]
    fn labels_may_not_start_or_end_with_a_hyphen() {
        for host in ["-a.test", "a-.test", "a.-b.test", "a.test-"] {
            assert_eq!(
                norm(host).unwrap_err(),
                HostError::HyphenAtLabelEdge,
                "{host}"
            );
        }
        assert_eq!(norm("a-b.test").unwrap(), "a-b.test");
        assert_eq!(norm("xn--a.test").unwrap(), "xn--a.test");
    }
}
