//! [`Target`]: the host and port a client asked the proxy to reach, in one canonical spelling.
//!
//! Every way into the proxy (an HTTP `CONNECT` authority, an absolute-form request target, a
//! SOCKS5 request, a TLS SNI, a `Host` header) names a host. Rules, SSRF checks and the
//! fronting checks compare those names, so they are all normalized the same way by
//! [`normalize_host`] before anything else looks at them.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Longest host name accepted, in bytes, without a trailing dot (the DNS limit).
pub const MAX_HOST_LEN: usize = 253;
/// Longest label (the part between two dots) of a host name, in bytes.
pub const MAX_LABEL_LEN: usize = 63;

/// Where a client wants to go: a host (a lower-case DNS name or the canonical text of an IP
/// address, IPv6 without brackets) and a port.
///
/// Build it with [`Target::new`], which normalizes and validates the host; the fields are
/// public for pattern matching and tests, and a hand-built value is only as canonical as its
/// builder made it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// Lower-case name without a trailing dot, or an IP address as [`IpAddr`] prints it.
    pub host: String,
    /// Never 0 when built by [`Target::new`].
    pub port: u16,
}

impl Target {
    /// Normalizes `host` (see [`normalize_host`]) and pairs it with `port`, which must not be 0.
    ///
    /// ```
    /// let t = net::Target::new("[2001:DB8::0001]", 443)?;
    /// assert_eq!(t.host, "2001:db8::1");
    /// assert_eq!(t.to_string(), "[2001:db8::1]:443");
    /// assert!(net::Target::new("127.1", 80).is_err()); // resolvers would read it as 127.0.0.1
    /// # Ok::<(), net::TargetError>(())
    /// ```
    pub fn new(host: &str, port: u16) -> Result<Self, TargetError> {
        if port == 0 {
            return Err(TargetError::PortZero);
        }
        Ok(Self {
            host: normalize_host(host)?,
            port,
        })
    }

    /// The IP address when the host is an IP literal (brackets around IPv6 are tolerated).
    pub fn ip(&self) -> Option<IpAddr> {
        let host = self
            .host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&self.host);
        host.parse().ok()
    }

    /// Whether the host is an IP address rather than a name to resolve.
    pub fn is_ip_literal(&self) -> bool {
        self.ip().is_some()
    }

    /// Whether `host` names the same host once both are normalized (case, trailing dot, IPv6
    /// brackets and spelling). The port is not compared.
    pub fn host_matches(&self, host: &str) -> bool {
        match (normalize_host(&self.host), normalize_host(host)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

impl fmt::Display for Target {
    /// `host:port`, with brackets around an IPv6 address.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip() {
            Some(IpAddr::V6(ip)) => write!(f, "[{ip}]:{}", self.port),
            _ => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// Why a host (or port) was not accepted as a [`Target`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
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
    #[error(
        "the host ends in a numeric label, which resolvers read as an IPv4 address \
         (write the address in dotted-quad form)"
    )]
    NumericName,
    #[error("the IPv6 address is malformed")]
    BadIpv6,
    #[error("IPv6 zone identifiers are not accepted")]
    ZoneId,
    #[error("port 0 is not a destination")]
    PortZero,
}

/// Brings a host to the one spelling every comparison uses, or refuses it.
///
/// - IPv6 (bare or in brackets) becomes its canonical compressed lower-case text without
///   brackets; zone identifiers (`%eth0`) are refused.
/// - IPv4 must be strict dotted-quad (std's parser: no octal, hex, short or leading-zero forms)
///   and becomes its canonical text.
/// - A name is lower-cased and loses one trailing dot; it may contain ASCII letters, digits,
///   `-` and `_` in non-empty labels of at most 63 bytes, 253 bytes in all. Percent-encoding,
///   userinfo, whitespace and non-ASCII are refused (an IDN must arrive as its `xn--` form).
/// - A name whose last label is numeric (`127.1`, `2130706433`, `0x7f.1`, `1.2.3.010`) is
///   refused: `getaddrinfo`/`inet_aton` and URL parsers read such names as IPv4 addresses in
///   the legacy forms, which would turn a "name" into a loopback address behind the back of
///   rules that only treat IP literals specially. Real host names never end in a number.
pub fn normalize_host(host: &str) -> Result<String, TargetError> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or(TargetError::BadIpv6)?;
        return parse_ipv6(inner);
    }
    if host.contains(':') {
        return parse_ipv6(host);
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.is_empty() {
        return Err(TargetError::Empty);
    }
    if let Ok(ip) = name.parse::<Ipv4Addr>() {
        return Ok(ip.to_string());
    }
    if name.len() > MAX_HOST_LEN {
        return Err(TargetError::TooLong);
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_' || *c == '.'))
    {
        return Err(TargetError::BadChar(c));
    }
    let mut last = "";
    for label in name.split('.') {
        if label.is_empty() {
            return Err(TargetError::EmptyLabel);
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(TargetError::LabelTooLong);
        }
        last = label;
    }
    if is_numeric_label(last) {
        return Err(TargetError::NumericName);
    }
    Ok(name.to_ascii_lowercase())
}

fn parse_ipv6(text: &str) -> Result<String, TargetError> {
    if text.contains('%') {
        return Err(TargetError::ZoneId);
    }
    text.parse::<Ipv6Addr>()
        .map(|ip| ip.to_string())
        .map_err(|_| TargetError::BadIpv6)
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

    fn norm(host: &str) -> Result<String, TargetError> {
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
        assert_eq!(norm("a.test..").unwrap_err(), TargetError::EmptyLabel);
    }

    #[test]
    fn malformed_names_are_refused() {
        assert_eq!(norm("").unwrap_err(), TargetError::Empty);
        assert_eq!(norm(".").unwrap_err(), TargetError::Empty);
        assert_eq!(norm(".a.test").unwrap_err(), TargetError::EmptyLabel);
        assert_eq!(norm("a..test").unwrap_err(), TargetError::EmptyLabel);
        assert_eq!(norm("a%2etest").unwrap_err(), TargetError::BadChar('%'));
        assert_eq!(norm("user@a.test").unwrap_err(), TargetError::BadChar('@'));
        assert_eq!(norm("a test").unwrap_err(), TargetError::BadChar(' '));
        assert_eq!(norm("a.test\0").unwrap_err(), TargetError::BadChar('\0'));
        assert_eq!(norm("a\\b.test").unwrap_err(), TargetError::BadChar('\\'));
        assert_eq!(norm("a/b").unwrap_err(), TargetError::BadChar('/'));
        assert_eq!(norm("bücher.test").unwrap_err(), TargetError::BadChar('ü'));
        assert_eq!(norm("ａ.test").unwrap_err(), TargetError::BadChar('ａ'));
    }

    #[test]
    fn length_limits_hold_at_their_boundaries() {
        let label63 = "a".repeat(63);
        assert!(norm(&format!("{label63}.test")).is_ok());
        assert_eq!(
            norm(&format!("{}.test", "a".repeat(64))).unwrap_err(),
            TargetError::LabelTooLong
        );
        // 4 labels of 63 + 3 dots = 255 > 253; 3 x 63 + 61 + 3 dots = 253.
        let at_limit = format!("{label63}.{label63}.{label63}.{}", "b".repeat(61));
        assert_eq!(at_limit.len(), 253);
        assert!(norm(&at_limit).is_ok());
        assert!(norm(&format!("{at_limit}.")).is_ok());
        let over = format!("{label63}.{label63}.{label63}.{}", "b".repeat(62));
        assert_eq!(norm(&over).unwrap_err(), TargetError::TooLong);
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
        assert_eq!(norm("[::1").unwrap_err(), TargetError::BadIpv6);
        assert_eq!(norm("[]").unwrap_err(), TargetError::BadIpv6);
        assert_eq!(norm("[198.51.100.7]").unwrap_err(), TargetError::BadIpv6);
        assert_eq!(norm("[::1]:80").unwrap_err(), TargetError::BadIpv6);
        assert_eq!(norm("1::2::3").unwrap_err(), TargetError::BadIpv6);
        assert_eq!(norm("a.test:80").unwrap_err(), TargetError::BadIpv6);
        assert_eq!(norm("[fe80::1%eth0]").unwrap_err(), TargetError::ZoneId);
        assert_eq!(norm("fe80::1%25eth0").unwrap_err(), TargetError::ZoneId);
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
            assert_eq!(norm(host).unwrap_err(), TargetError::NumericName, "{host}");
        }
        // A numeric label elsewhere, or a label that only starts like a number, is a name.
        assert_eq!(norm("123.test").unwrap(), "123.test");
        assert_eq!(norm("a.0xg").unwrap(), "a.0xg");
        assert_eq!(norm("a.1e5").unwrap(), "a.1e5");
    }

    #[test]
    fn target_new_checks_port_and_host() {
        let t = Target::new("Allowed.Test.", 443).unwrap();
        assert_eq!(
            t,
            Target {
                host: "allowed.test".into(),
                port: 443
            }
        );
        assert_eq!(Target::new("a.test", 0).unwrap_err(), TargetError::PortZero);
        assert_eq!(Target::new("", 1).unwrap_err(), TargetError::Empty);
    }

    #[test]
    fn ip_helpers() {
        let name = Target::new("allowed.test", 80).unwrap();
        assert_eq!(name.ip(), None);
        assert!(!name.is_ip_literal());
        let v4 = Target::new("203.0.113.9", 80).unwrap();
        assert_eq!(v4.ip(), Some("203.0.113.9".parse().unwrap()));
        assert!(v4.is_ip_literal());
        let v6 = Target::new("[2001:db8::5]", 80).unwrap();
        assert_eq!(v6.ip(), Some("2001:db8::5".parse().unwrap()));
        // A hand-built value with brackets still answers.
        let hand = Target {
            host: "[::1]".into(),
            port: 1,
        };
        assert_eq!(hand.ip(), Some("::1".parse().unwrap()));
    }

    #[test]
    fn display_brackets_ipv6_only() {
        assert_eq!(
            Target::new("a.test", 8080).unwrap().to_string(),
            "a.test:8080"
        );
        assert_eq!(
            Target::new("203.0.113.9", 1).unwrap().to_string(),
            "203.0.113.9:1"
        );
        assert_eq!(Target::new("::1", 443).unwrap().to_string(), "[::1]:443");
    }

    #[test]
    fn host_matches_ignores_spelling_differences() {
        let t = Target::new("allowed.test", 443).unwrap();
        assert!(t.host_matches("ALLOWED.test."));
        assert!(!t.host_matches("other.test"));
        assert!(!t.host_matches("allowed.test.evil.test"));
        assert!(!t.host_matches(""));
        let v6 = Target::new("2001:db8::1", 443).unwrap();
        assert!(v6.host_matches("[2001:DB8:0::1]"));
        assert!(!v6.host_matches("2001:db8::2"));
    }
}
