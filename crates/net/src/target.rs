//! [`Target`]: the host and port a client asked the proxy to reach, in one canonical spelling.
//!
//! Every way into the proxy (an HTTP `CONNECT` authority, an absolute-form request target, a
//! SOCKS5 request, a TLS SNI, a `Host` header) names a host. Rules, SSRF checks and the
//! fronting checks compare those names, so they are all normalized the same way by
//! [`normalize_host`] before anything else looks at them.

use std::fmt;
use std::net::IpAddr;

/// The one host normalizer, shared with the policy's network rules (`policy::host`): a rule
/// and a destination naming the same host compare equal, and what one refuses the other
/// refuses. `TargetError` is its error (`PortZero` is a destination's).
pub use policy::host::{normalize_host, HostError as TargetError, MAX_HOST_LEN, MAX_LABEL_LEN};

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

#[cfg(test)]
mod tests {
    use super::*;

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
