//! The HTTP side of the proxy: the destination of a `CONNECT` ([`parse_connect_authority`]), of
//! a forwarded absolute-form request ([`parse_absolute_target`]), and whether the request's
//! `Host` header names that same destination ([`host_header_matches`], the plain-HTTP
//! domain-fronting check).
//!
//! These parsers are deliberately narrower than RFC 3986 and the WHATWG URL standard, and are
//! written by hand for that reason: a general URL parser decodes percent-escapes in hosts,
//! maps IDNs, reads `0x7f.1` as an IPv4 address and accepts userinfo, and every such
//! transformation is a way for the name the rules saw to differ from the host that is reached
//! (`http://allowed.test@evil.test/`, `http://allowed.test%2eevil.test/`). Here a host is
//! accepted only in the one spelling [`normalize_host`](crate::normalize_host) defines;
//! userinfo, fragments, backslashes and zone identifiers are refused.
//!
//! ```
//! use net::http;
//!
//! let t = http::parse_connect_authority("Allowed.Test:443")?;
//! assert_eq!(t.to_string(), "allowed.test:443");
//!
//! let a = http::parse_absolute_target("http://[2001:db8::1]:8080/a?b=c")?;
//! assert_eq!((a.target.host.as_str(), a.target.port), ("2001:db8::1", 8080));
//! assert_eq!(a.path, "/a?b=c");
//!
//! assert!(http::host_header_matches("allowed.test", 80, "ALLOWED.test."));
//! assert!(!http::host_header_matches("allowed.test", 80, "evil.test"));
//! # Ok::<(), http::Error>(())
//! ```

use crate::target::{Target, TargetError};

/// The port of an `http://` target without one.
pub const DEFAULT_HTTP_PORT: u16 = 80;

/// Why a request target, authority or `Host` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("the authority has no port (CONNECT needs host:port)")]
    MissingPort,
    #[error("the port {0:?} is not a number from 1 to 65535")]
    BadPort(String),
    #[error("userinfo (user@) is not accepted in a proxy request")]
    Userinfo,
    #[error("an IPv6 address must be in brackets")]
    UnbracketedIpv6,
    #[error("unexpected text after the bracketed IPv6 address")]
    AfterBracket,
    #[error("the request target is not in absolute form (http://host/...)")]
    NotAbsolute,
    #[error("only http:// is forwarded; use CONNECT for {0}://")]
    UnsupportedScheme(String),
    #[error("the request target contains {0:?}")]
    BadChar(char),
    #[error("the host is not acceptable: {0}")]
    Host(TargetError),
}

/// A parsed absolute-form request target: where to connect and what to send there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbsoluteTarget {
    pub target: Target,
    /// The origin-form target for the upstream request: the path and query, at least `/`.
    pub path: String,
}

/// Parses the authority of `CONNECT host:port` (RFC 9110 section 9.3.6): a name, an IPv4
/// address or a bracketed IPv6 address, and a port from 1 to 65535, which is required.
pub fn parse_connect_authority(authority: &str) -> Result<Target, Error> {
    check_chars(authority)?;
    let (host, port) = split_host_port(authority)?;
    match port {
        None | Some("") => Err(Error::MissingPort),
        Some(port) => target(host, parse_port(port)?),
    }
}

/// Parses an absolute-form request target (RFC 9112 section 3.2.2) such as
/// `http://host:8080/path?query`: only the `http` scheme (any case), port 80 by default, an
/// empty path becomes `/`. Userinfo, fragments and anything but a plain host are refused.
pub fn parse_absolute_target(uri: &str) -> Result<AbsoluteTarget, Error> {
    check_chars(uri)?;
    if uri.contains('#') {
        return Err(Error::BadChar('#'));
    }
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Err(Error::NotAbsolute);
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if !scheme_ok {
        return Err(Error::NotAbsolute);
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(Error::UnsupportedScheme(scheme.to_ascii_lowercase()));
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let (host, port) = split_host_port(authority)?;
    let port = match port {
        None | Some("") => DEFAULT_HTTP_PORT,
        Some(port) => parse_port(port)?,
    };
    let path = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    };
    Ok(AbsoluteTarget {
        target: target(host, port)?,
        path,
    })
}

/// Whether a request's `Host` header value names `target_host:target_port`: hosts compared
/// after normalization (case, one trailing dot, IPv6 spelling; brackets required in the header
/// and optional in `target_host`), a header without a port meaning port 80.
///
/// An empty or malformed header never matches. A missing header, or several `Host` headers,
/// are for the caller to decide before calling: the safe choices are to refuse, or (for a
/// missing one) to set `Host` from the target.
pub fn host_header_matches(target_host: &str, target_port: u16, host_header: &str) -> bool {
    host_header_names(target_host, target_port, host_header, DEFAULT_HTTP_PORT)
}

/// [`host_header_matches`] where a header without a port means `default_port` (443 inside
/// TLS).
pub fn host_header_names(
    target_host: &str,
    target_port: u16,
    host_header: &str,
    default_port: u16,
) -> bool {
    let value = host_header.trim_matches([' ', '\t']);
    if check_chars(value).is_err() {
        return false;
    }
    let Ok((host, port)) = split_host_port(value) else {
        return false;
    };
    let port = match port {
        None | Some("") => default_port,
        Some(port) => match parse_port(port) {
            Ok(port) => port,
            Err(_) => return false,
        },
    };
    let Ok(target) = Target::new(target_host, target_port) else {
        return false;
    };
    port == target.port && target.host_matches(host)
}

/// Refuses whitespace, control characters, non-ASCII and backslashes anywhere.
fn check_chars(s: &str) -> Result<(), Error> {
    match s.chars().find(|c| !c.is_ascii_graphic() || *c == '\\') {
        Some(c) => Err(Error::BadChar(c)),
        None => Ok(()),
    }
}

/// Splits `host[:port]` or `[v6][:port]`; the port text is returned unparsed (maybe empty).
fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), Error> {
    if authority.contains('@') {
        return Err(Error::Userinfo);
    }
    if authority.starts_with('[') {
        let close = authority
            .find(']')
            .ok_or(Error::Host(TargetError::BadIpv6))?;
        let (host, rest) = authority.split_at(close + 1);
        return match rest.strip_prefix(':') {
            Some(port) => Ok((host, Some(port))),
            None if rest.is_empty() => Ok((host, None)),
            None => Err(Error::AfterBracket),
        };
    }
    match authority.split_once(':') {
        Some((_, port)) if port.contains(':') => Err(Error::UnbracketedIpv6),
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((authority, None)),
    }
}

/// A decimal port from 1 to 65535, at most five digits (leading zeros allowed, as RFC 3986's
/// `*DIGIT` does, but no sign or spaces).
fn parse_port(text: &str) -> Result<u16, Error> {
    let bad = || Error::BadPort(text.to_owned());
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err(bad()),
        Ok(port) => Ok(port),
    }
}

fn target(host: &str, port: u16) -> Result<Target, Error> {
    if host.is_empty() {
        return Err(Error::Host(TargetError::Empty));
    }
    Target::new(host, port).map_err(Error::Host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(s: &str) -> Result<(String, u16), Error> {
        parse_connect_authority(s).map(|t| (t.host, t.port))
    }

    fn absolute(s: &str) -> Result<(String, u16, String), Error> {
        parse_absolute_target(s).map(|a| (a.target.host, a.target.port, a.path))
    }

    fn ok3(host: &str, port: u16, path: &str) -> Result<(String, u16, String), Error> {
        Ok((host.to_owned(), port, path.to_owned()))
    }

    #[test]
    fn connect_authorities() {
        assert_eq!(
            connect("allowed.test:443"),
            Ok(("allowed.test".into(), 443))
        );
        assert_eq!(
            connect("Allowed.Test.:443"),
            Ok(("allowed.test".into(), 443))
        );
        assert_eq!(
            connect("203.0.113.9:8443"),
            Ok(("203.0.113.9".into(), 8443))
        );
        assert_eq!(
            connect("[2001:DB8::1]:443"),
            Ok(("2001:db8::1".into(), 443))
        );
        assert_eq!(
            connect("[::ffff:127.0.0.1]:22"),
            Ok(("::ffff:127.0.0.1".into(), 22))
        );
        assert_eq!(connect("a.test:1"), Ok(("a.test".into(), 1)));
        assert_eq!(connect("a.test:65535"), Ok(("a.test".into(), 65535)));
        assert_eq!(connect("a.test:00443"), Ok(("a.test".into(), 443)));
    }

    #[test]
    fn connect_needs_a_port_in_range() {
        assert_eq!(connect("allowed.test"), Err(Error::MissingPort));
        assert_eq!(connect("allowed.test:"), Err(Error::MissingPort));
        assert_eq!(connect("[::1]"), Err(Error::MissingPort));
        for port in [
            "0", "65536", "99999", "000000", "-1", "+443", "44 3", "0x1bb", "443a",
        ] {
            let err = connect(&format!("a.test:{port}")).unwrap_err();
            assert!(
                matches!(err, Error::BadPort(_) | Error::BadChar(' ')),
                "{port}: {err:?}"
            );
        }
    }

    #[test]
    fn connect_refuses_ambiguous_hosts() {
        assert_eq!(connect("::1:443"), Err(Error::UnbracketedIpv6));
        assert_eq!(connect("2001:db8::1:443"), Err(Error::UnbracketedIpv6));
        assert_eq!(connect("user@allowed.test:443"), Err(Error::Userinfo));
        assert_eq!(connect("allowed.test@evil.test:443"), Err(Error::Userinfo));
        assert_eq!(connect("[::1]x:443"), Err(Error::AfterBracket));
        assert_eq!(connect("[::1:443"), Err(Error::Host(TargetError::BadIpv6)));
        assert_eq!(
            connect("[fe80::1%25eth0]:443"),
            Err(Error::Host(TargetError::ZoneId))
        );
        assert_eq!(
            connect("[203.0.113.9]:443"),
            Err(Error::Host(TargetError::BadIpv6))
        );
        assert_eq!(connect(":443"), Err(Error::Host(TargetError::Empty)));
        assert_eq!(
            connect("127.1:443"),
            Err(Error::Host(TargetError::NumericName))
        );
        assert_eq!(
            connect("2130706433:443"),
            Err(Error::Host(TargetError::NumericName))
        );
        assert_eq!(
            connect("a%2etest:443"),
            Err(Error::Host(TargetError::BadChar('%')))
        );
        assert_eq!(
            connect("a.test/x:443"),
            Err(Error::Host(TargetError::BadChar('/')))
        );
        assert_eq!(connect("a.test\\:443"), Err(Error::BadChar('\\')));
        assert_eq!(connect("a.test :443"), Err(Error::BadChar(' ')));
        assert_eq!(connect("a.tést:443"), Err(Error::BadChar('é')));
        assert_eq!(connect("a.test:443\r\n"), Err(Error::BadChar('\r')));
    }

    #[test]
    fn absolute_targets() {
        assert_eq!(
            absolute("http://allowed.test/"),
            ok3("allowed.test", 80, "/")
        );
        assert_eq!(
            absolute("http://allowed.test"),
            ok3("allowed.test", 80, "/")
        );
        assert_eq!(
            absolute("HTTP://Allowed.Test:8080/a/b?c=d&e"),
            ok3("allowed.test", 8080, "/a/b?c=d&e")
        );
        assert_eq!(
            absolute("http://allowed.test?q"),
            ok3("allowed.test", 80, "/?q")
        );
        assert_eq!(
            absolute("http://allowed.test:/x"),
            ok3("allowed.test", 80, "/x")
        );
        assert_eq!(
            absolute("http://allowed.test:80/x"),
            ok3("allowed.test", 80, "/x")
        );
        assert_eq!(
            absolute("http://[2001:db8::1]/"),
            ok3("2001:db8::1", 80, "/")
        );
        assert_eq!(
            absolute("http://[2001:db8::1]:81"),
            ok3("2001:db8::1", 81, "/")
        );
        assert_eq!(
            absolute("http://198.51.100.7/%7Euser"),
            ok3("198.51.100.7", 80, "/%7Euser")
        );
        // Text after the authority is the path's business, not the host's.
        assert_eq!(
            absolute("http://a.test/@evil.test"),
            ok3("a.test", 80, "/@evil.test")
        );
        assert_eq!(absolute("http://a.test/x//y"), ok3("a.test", 80, "/x//y"));
    }

    #[test]
    fn absolute_target_refusals() {
        assert_eq!(absolute("/index.html"), Err(Error::NotAbsolute));
        assert_eq!(absolute("*"), Err(Error::NotAbsolute));
        assert_eq!(absolute("allowed.test:443"), Err(Error::NotAbsolute));
        assert_eq!(absolute("://a.test/"), Err(Error::NotAbsolute));
        assert_eq!(absolute("ht!tp://a.test/"), Err(Error::NotAbsolute));
        assert_eq!(
            absolute("https://a.test/"),
            Err(Error::UnsupportedScheme("https".into()))
        );
        assert_eq!(
            absolute("FTP://a.test/"),
            Err(Error::UnsupportedScheme("ftp".into()))
        );
        assert_eq!(
            absolute("ws://a.test/"),
            Err(Error::UnsupportedScheme("ws".into()))
        );
        assert_eq!(absolute("http:/a.test/"), Err(Error::NotAbsolute));
        assert_eq!(absolute("http:///x"), Err(Error::Host(TargetError::Empty)));
        assert_eq!(
            absolute("http://:80/"),
            Err(Error::Host(TargetError::Empty))
        );
        assert_eq!(
            absolute("http://a.test:0/"),
            Err(Error::BadPort("0".into()))
        );
        assert_eq!(
            absolute("http://a.test:80:80/"),
            Err(Error::UnbracketedIpv6)
        );
        assert_eq!(absolute("http://::1/"), Err(Error::UnbracketedIpv6));
    }

    #[test]
    fn absolute_targets_with_parser_confusion_tricks() {
        // Userinfo: curl and a WHATWG parser connect to b, a naive split to a.
        assert_eq!(absolute("http://a@b/"), Err(Error::Userinfo));
        assert_eq!(
            absolute("http://allowed.test@evil.test/"),
            Err(Error::Userinfo)
        );
        assert_eq!(
            absolute("http://allowed.test:80@evil.test/"),
            Err(Error::Userinfo)
        );
        assert_eq!(
            absolute("http://user:pw@allowed.test/"),
            Err(Error::Userinfo)
        );
        // Fragment and backslash tricks.
        assert_eq!(
            absolute("http://evil.test#@allowed.test/"),
            Err(Error::BadChar('#'))
        );
        assert_eq!(absolute("http://a.test/#frag"), Err(Error::BadChar('#')));
        assert_eq!(
            absolute("http://evil.test\\@allowed.test/"),
            Err(Error::BadChar('\\'))
        );
        // Percent-encoding and legacy numeric forms in the host.
        assert_eq!(
            absolute("http://allowed.test%2eevil.test/"),
            Err(Error::Host(TargetError::BadChar('%')))
        );
        assert_eq!(
            absolute("http://%31%32%37.0.0.1/"),
            Err(Error::Host(TargetError::BadChar('%')))
        );
        assert_eq!(
            absolute("http://0x7f.1/"),
            Err(Error::Host(TargetError::NumericName))
        );
        assert_eq!(
            absolute("http://2130706433/"),
            Err(Error::Host(TargetError::NumericName))
        );
        assert_eq!(
            absolute("http://[::1%25lo]/"),
            Err(Error::Host(TargetError::ZoneId))
        );
        // Whitespace, controls and non-ASCII anywhere.
        assert_eq!(
            absolute("http://a.test/ HTTP/1.1"),
            Err(Error::BadChar(' '))
        );
        assert_eq!(
            absolute("http://a.test/\r\nHost: evil"),
            Err(Error::BadChar('\r'))
        );
        assert_eq!(absolute("http://a.test\t/"), Err(Error::BadChar('\t')));
        assert_eq!(absolute("http://ａllowed.test/"), Err(Error::BadChar('ａ')));
    }

    #[test]
    fn host_header_exact_and_normalized() {
        assert!(host_header_names("github.com", 443, "github.com", 443));
        assert!(host_header_names("github.com", 443, "GitHub.com.:443", 443));
        assert!(!host_header_names("github.com", 443, "github.com:80", 443));
        assert!(!host_header_matches("github.com", 443, "github.com"));
        assert!(host_header_matches("allowed.test", 80, "allowed.test"));
        assert!(host_header_matches("allowed.test", 80, "Allowed.TEST"));
        assert!(host_header_matches("allowed.test", 80, "allowed.test."));
        assert!(host_header_matches("allowed.test.", 80, "allowed.test"));
        assert!(host_header_matches("Allowed.Test", 80, "allowed.test"));
        assert!(host_header_matches("allowed.test", 80, " allowed.test\t"));
        assert!(host_header_matches("203.0.113.9", 80, "203.0.113.9"));
    }

    #[test]
    fn host_header_ports() {
        assert!(host_header_matches("allowed.test", 80, "allowed.test:80"));
        assert!(host_header_matches("allowed.test", 80, "allowed.test:"));
        assert!(host_header_matches("allowed.test", 80, "allowed.test:080"));
        assert!(host_header_matches(
            "allowed.test",
            8080,
            "allowed.test:8080"
        ));
        assert!(!host_header_matches("allowed.test", 8080, "allowed.test"));
        assert!(!host_header_matches(
            "allowed.test",
            80,
            "allowed.test:8080"
        ));
        assert!(!host_header_matches("allowed.test", 80, "allowed.test:443"));
        assert!(!host_header_matches("allowed.test", 443, "allowed.test"));
        assert!(!host_header_matches("allowed.test", 80, "allowed.test:0"));
        assert!(!host_header_matches("allowed.test", 80, "allowed.test:x"));
    }

    #[test]
    fn host_header_ipv6() {
        assert!(host_header_matches("2001:db8::1", 80, "[2001:db8::1]"));
        assert!(host_header_matches(
            "[2001:db8::1]",
            80,
            "[2001:DB8:0::1]:80"
        ));
        assert!(host_header_matches(
            "2001:db8::1",
            8080,
            "[2001:db8::1]:8080"
        ));
        assert!(!host_header_matches("2001:db8::1", 80, "2001:db8::1"));
        assert!(!host_header_matches("2001:db8::1", 80, "[2001:db8::2]"));
        assert!(!host_header_matches(
            "::ffff:203.0.113.9",
            80,
            "203.0.113.9"
        ));
    }

    #[test]
    fn host_header_mismatches_and_garbage() {
        assert!(!host_header_matches("allowed.test", 80, "evil.test"));
        assert!(!host_header_matches(
            "allowed.test",
            80,
            "allowed.test.evil.test"
        ));
        assert!(!host_header_matches(
            "allowed.test",
            80,
            "evil.allowed.test"
        ));
        assert!(!host_header_matches("allowed.test", 80, ""));
        assert!(!host_header_matches("allowed.test", 80, "   "));
        assert!(!host_header_matches(
            "allowed.test",
            80,
            "user@allowed.test"
        ));
        assert!(!host_header_matches(
            "allowed.test",
            80,
            "allowed.test, evil.test"
        ));
        assert!(!host_header_matches(
            "allowed.test",
            80,
            "allowed.test evil.test"
        ));
        assert!(!host_header_matches("allowed.test", 80, "allowed%2etest"));
        assert!(!host_header_matches(
            "allowed.test",
            80,
            "http://allowed.test/"
        ));
        assert!(!host_header_matches("allowed.test", 80, "allowed.test\0"));
        // An invalid target never matches, even itself.
        assert!(!host_header_matches("127.1", 80, "127.1"));
        assert!(!host_header_matches("allowed.test", 0, "allowed.test:0"));
    }
}
