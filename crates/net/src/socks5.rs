//! The SOCKS5 server side (RFC 1928), as pure parsing and encoding: no I/O.
//!
//! A session is: the client's greeting ([`parse_greeting`]) → our method selection
//! ([`Greeting::reply`]; only "no authentication" is offered, anything else gets `0xFF`) → the
//! client's request ([`parse_request`]) → our reply ([`encode_reply`]) → relayed bytes. Only
//! `CONNECT` is served; `BIND` and `UDP ASSOCIATE` are parsed so they can be answered with
//! [`Reply::CommandNotSupported`]. A `DOMAINNAME` destination is kept as a name (resolution
//! happens on the proxy side, after the rules, like `socks5h://`).
//!
//! Parsers take everything received so far and answer [`Parsed::Need`] (at least that many
//! more bytes), [`Parsed::Done`] (with the number of bytes used: anything after them is the
//! start of the client's data and must be relayed) or [`Parsed::Invalid`], whose
//! [`Error::reply`] says what to answer before closing, if anything.
//!
//! The wire format is a few fixed fields, so it is parsed by hand; the SOCKS crates on
//! crates.io bundle their own async I/O, which the proxy does not want here.
//!
//! ```
//! use net::socks5::{self, Command, Parsed, Reply};
//!
//! let Parsed::Done { value: greeting, consumed } = socks5::parse_greeting(&[5, 1, 0]) else {
//!     unreachable!()
//! };
//! assert_eq!((greeting.reply(), consumed), ([5, 0], 3));
//!
//! let mut request = vec![5, 1, 0, 3, 12];
//! request.extend_from_slice(b"allowed.test");
//! request.extend_from_slice(&443u16.to_be_bytes());
//! let Parsed::Done { value, .. } = socks5::parse_request(&request) else { unreachable!() };
//! assert_eq!(value.command, Command::Connect);
//! assert_eq!(value.target.to_string(), "allowed.test:443");
//!
//! assert_eq!(socks5::encode_reply(Reply::NotAllowed, None), [5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
//! ```

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::target::{Target, TargetError};

/// The protocol version byte.
pub const VERSION: u8 = 5;
/// Method "no authentication required".
pub const METHOD_NO_AUTH: u8 = 0x00;
/// Method selection answer "no acceptable methods".
pub const METHOD_NO_ACCEPTABLE: u8 = 0xff;

const ATYP_IPV4: u8 = 1;
const ATYP_DOMAIN: u8 = 3;
const ATYP_IPV6: u8 = 4;

/// The result of parsing a prefix of the client's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<T> {
    /// Not complete: at least this many more bytes are needed.
    Need(usize),
    /// Complete; `consumed` bytes of the input belong to it.
    Done { value: T, consumed: usize },
    /// Malformed or unsupported; see [`Error::reply`].
    Invalid(Error),
}

/// The client's method negotiation message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Greeting {
    /// The authentication methods the client offers.
    pub methods: Vec<u8>,
}

impl Greeting {
    /// The method we pick: "no authentication" when offered, else "no acceptable methods"
    /// (after which the client closes).
    pub fn method(&self) -> u8 {
        if self.methods.contains(&METHOD_NO_AUTH) {
            METHOD_NO_AUTH
        } else {
            METHOD_NO_ACCEPTABLE
        }
    }

    /// The method selection message to send back.
    pub fn reply(&self) -> [u8; 2] {
        [VERSION, self.method()]
    }
}

/// The request command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Connect,
    Bind,
    UdpAssociate,
}

/// The client's request: a command and its destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub command: Command,
    /// The destination; a `DOMAINNAME` is normalized like every other host.
    pub target: Target,
    /// Whether the destination came as a name (`DOMAINNAME`) rather than an address.
    pub by_name: bool,
}

/// Reply codes (RFC 1928 section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Succeeded,
    GeneralFailure,
    /// "connection not allowed by ruleset": every policy refusal.
    NotAllowed,
    NetworkUnreachable,
    HostUnreachable,
    ConnectionRefused,
    TtlExpired,
    CommandNotSupported,
    AddressTypeNotSupported,
}

impl Reply {
    /// The code byte on the wire.
    pub fn code(self) -> u8 {
        match self {
            Self::Succeeded => 0x00,
            Self::GeneralFailure => 0x01,
            Self::NotAllowed => 0x02,
            Self::NetworkUnreachable => 0x03,
            Self::HostUnreachable => 0x04,
            Self::ConnectionRefused => 0x05,
            Self::TtlExpired => 0x06,
            Self::CommandNotSupported => 0x07,
            Self::AddressTypeNotSupported => 0x08,
        }
    }

    /// The reply for a failed outbound connect or resolution. Timeouts map to "TTL expired",
    /// as common servers do; anything unrecognised is a general failure.
    pub fn from_io_error_kind(kind: io::ErrorKind) -> Self {
        match kind {
            io::ErrorKind::ConnectionRefused => Self::ConnectionRefused,
            io::ErrorKind::NetworkUnreachable => Self::NetworkUnreachable,
            io::ErrorKind::HostUnreachable => Self::HostUnreachable,
            io::ErrorKind::TimedOut => Self::TtlExpired,
            io::ErrorKind::PermissionDenied => Self::NotAllowed,
            _ => Self::GeneralFailure,
        }
    }
}

/// Why a greeting or request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("not SOCKS version 5 (version byte {0})")]
    Version(u8),
    #[error("the request's reserved byte is {0}, not 0")]
    Reserved(u8),
    #[error("unknown SOCKS command {0}")]
    Command(u8),
    #[error("unknown address type {0}")]
    AddressType(u8),
    #[error("the destination is not acceptable: {0}")]
    Target(TargetError),
}

impl Error {
    /// The reply to send before closing, or `None` when the peer does not speak SOCKS5 (no
    /// reply it would understand exists).
    pub fn reply(&self) -> Option<Reply> {
        match self {
            Self::Version(_) => None,
            Self::Reserved(_) => Some(Reply::GeneralFailure),
            Self::Command(_) => Some(Reply::CommandNotSupported),
            Self::AddressType(_) => Some(Reply::AddressTypeNotSupported),
            // A name or port we refuse to treat as a destination is a policy refusal.
            Self::Target(_) => Some(Reply::NotAllowed),
        }
    }
}

/// Parses the greeting: `VER NMETHODS METHODS...`. `NMETHODS = 0` is accepted and then answered
/// with "no acceptable methods".
pub fn parse_greeting(input: &[u8]) -> Parsed<Greeting> {
    let Some(&version) = input.first() else {
        return Parsed::Need(2);
    };
    if version != VERSION {
        return Parsed::Invalid(Error::Version(version));
    }
    let Some(&n) = input.get(1) else {
        return Parsed::Need(1);
    };
    let consumed = 2 + usize::from(n);
    match input.get(2..consumed) {
        Some(methods) => Parsed::Done {
            value: Greeting {
                methods: methods.to_vec(),
            },
            consumed,
        },
        None => Parsed::Need(consumed - input.len()),
    }
}

/// Parses a request: `VER CMD RSV ATYP DST.ADDR DST.PORT`. Unknown commands are refused only
/// once the whole request has arrived, so the reply is not sent in the middle of it.
pub fn parse_request(input: &[u8]) -> Parsed<Request> {
    let Some(&version) = input.first() else {
        return Parsed::Need(5);
    };
    if version != VERSION {
        return Parsed::Invalid(Error::Version(version));
    }
    // Length so far known: VER CMD RSV ATYP, and for a name its length byte.
    let Some(&atyp) = input.get(3) else {
        return Parsed::Need(5 - input.len());
    };
    let (addr_len, addr_start) = match atyp {
        ATYP_IPV4 => (4, 4),
        ATYP_IPV6 => (16, 4),
        ATYP_DOMAIN => match input.get(4) {
            Some(&n) => (usize::from(n), 5),
            None => return Parsed::Need(1),
        },
        other => return Parsed::Invalid(Error::AddressType(other)),
    };
    let consumed = addr_start + addr_len + 2;
    if input.len() < consumed {
        return Parsed::Need(consumed - input.len());
    }
    let command = match input[1] {
        1 => Command::Connect,
        2 => Command::Bind,
        3 => Command::UdpAssociate,
        other => return Parsed::Invalid(Error::Command(other)),
    };
    if input[2] != 0 {
        return Parsed::Invalid(Error::Reserved(input[2]));
    }
    let addr = &input[addr_start..addr_start + addr_len];
    let port = u16::from_be_bytes([input[consumed - 2], input[consumed - 1]]);
    let host = match atyp {
        ATYP_IPV4 => Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3]).to_string(),
        ATYP_IPV6 => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(addr);
            Ipv6Addr::from(octets).to_string()
        }
        // Not UTF-8 cannot be a host name; the replacement character makes normalization
        // refuse it with a readable error.
        _ => String::from_utf8_lossy(addr).into_owned(),
    };
    match Target::new(&host, port) {
        Ok(target) => Parsed::Done {
            value: Request {
                command,
                target,
                by_name: atyp == ATYP_DOMAIN,
            },
            consumed,
        },
        Err(e) => Parsed::Invalid(Error::Target(e)),
    }
}

/// Encodes a reply: `VER REP RSV ATYP BND.ADDR BND.PORT`. `bound` is the proxy's local address
/// of the outbound connection on success; `None` sends `0.0.0.0:0`, the usual value for
/// failures (and enough for every client that ignores it, which is nearly all).
pub fn encode_reply(reply: Reply, bound: Option<SocketAddr>) -> Vec<u8> {
    let bound = bound.unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
    let mut out = vec![VERSION, reply.code(), 0];
    match bound.ip() {
        IpAddr::V4(ip) => {
            out.push(ATYP_IPV4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(ATYP_IPV6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&bound.port().to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done<T: std::fmt::Debug>(p: Parsed<T>) -> (T, usize) {
        match p {
            Parsed::Done { value, consumed } => (value, consumed),
            other => panic!("expected Done, got {other:?}"),
        }
    }

    fn domain_request(cmd: u8, name: &[u8], port: u16) -> Vec<u8> {
        let mut out = vec![5, cmd, 0, 3, name.len() as u8];
        out.extend_from_slice(name);
        out.extend_from_slice(&port.to_be_bytes());
        out
    }

    #[test]
    fn greeting_with_no_auth() {
        let (g, n) = done(parse_greeting(&[5, 2, 2, 0]));
        assert_eq!(g.methods, [2, 0]);
        assert_eq!(n, 4);
        assert_eq!(g.method(), METHOD_NO_AUTH);
        assert_eq!(g.reply(), [5, 0]);
    }

    #[test]
    fn greeting_without_no_auth_gets_no_acceptable_methods() {
        let (g, _) = done(parse_greeting(&[5, 1, 2]));
        assert_eq!(g.reply(), [5, 0xff]);
        let (g, n) = done(parse_greeting(&[5, 0]));
        assert_eq!((g.reply(), n), ([5, 0xff], 2));
    }

    #[test]
    fn greeting_partial_input_and_leftovers() {
        assert_eq!(parse_greeting(&[]), Parsed::Need(2));
        assert_eq!(parse_greeting(&[5]), Parsed::Need(1));
        assert_eq!(parse_greeting(&[5, 3]), Parsed::Need(3));
        assert_eq!(parse_greeting(&[5, 3, 0, 1]), Parsed::Need(1));
        // A pipelined request after the greeting is left for the next parser.
        let (_, n) = done(parse_greeting(&[5, 1, 0, 5, 1, 0, 1]));
        assert_eq!(n, 3);
        let all: Vec<u8> = [5, 255].into_iter().chain(0..=254).collect();
        let (g, n) = done(parse_greeting(&all));
        assert_eq!((g.methods.len(), n), (255, 257));
    }

    #[test]
    fn other_versions_are_refused_without_a_reply() {
        // SOCKS4 CONNECT and an HTTP request sent to the SOCKS port.
        let e = match parse_greeting(&[4, 1, 0, 80, 127, 0, 0, 1, 0]) {
            Parsed::Invalid(e) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(e, Error::Version(4));
        assert_eq!(e.reply(), None);
        assert_eq!(
            parse_greeting(b"CONNECT a:443"),
            Parsed::Invalid(Error::Version(b'C'))
        );
        assert_eq!(parse_request(&[4]), Parsed::Invalid(Error::Version(4)));
    }

    #[test]
    fn connect_to_ipv4() {
        let (r, n) = done(parse_request(&[5, 1, 0, 1, 203, 0, 113, 9, 0, 80]));
        assert_eq!(n, 10);
        assert_eq!(r.command, Command::Connect);
        assert_eq!(r.target, Target::new("203.0.113.9", 80).unwrap());
        assert!(!r.by_name);
        assert!(r.target.is_ip_literal());
    }

    #[test]
    fn connect_to_ipv6() {
        let mut req = vec![5, 1, 0, 4];
        req.extend_from_slice(&"2001:db8::7".parse::<Ipv6Addr>().unwrap().octets());
        req.extend_from_slice(&443u16.to_be_bytes());
        let (r, n) = done(parse_request(&req));
        assert_eq!(n, 22);
        assert_eq!(r.target.host, "2001:db8::7");
        assert_eq!(r.target.port, 443);
        let mut mapped = vec![5, 1, 0, 4];
        mapped.extend_from_slice(&"::ffff:127.0.0.1".parse::<Ipv6Addr>().unwrap().octets());
        mapped.extend_from_slice(&[0, 22]);
        assert_eq!(
            done(parse_request(&mapped)).0.target.host,
            "::ffff:127.0.0.1"
        );
    }

    #[test]
    fn connect_to_a_name_keeps_and_normalizes_it() {
        let (r, n) = done(parse_request(&domain_request(1, b"Allowed.TEST.", 443)));
        assert_eq!(n, 7 + 13);
        assert_eq!(
            r.target,
            Target {
                host: "allowed.test".into(),
                port: 443
            }
        );
        assert!(r.by_name);
        // An IP address sent as a name becomes an IP literal, for the IP-literal rules.
        let (r, _) = done(parse_request(&domain_request(1, b"127.0.0.1", 80)));
        assert!(r.target.is_ip_literal());
        assert!(r.by_name);
    }

    #[test]
    fn unacceptable_names_and_ports_are_a_ruleset_refusal() {
        for (name, port, err) in [
            (&b"127.1"[..], 80, TargetError::NumericName),
            (b"", 80, TargetError::Empty),
            (b"a b.test", 80, TargetError::BadChar(' ')),
            (b"a.test\0", 80, TargetError::BadChar('\0')),
            (
                b"caf\xe9.test",
                80,
                TargetError::BadChar(char::REPLACEMENT_CHARACTER),
            ),
            (b"allowed.test", 0, TargetError::PortZero),
        ] {
            let p = parse_request(&domain_request(1, name, port));
            assert_eq!(p, Parsed::Invalid(Error::Target(err)));
            if let Parsed::Invalid(e) = p {
                assert_eq!(e.reply(), Some(Reply::NotAllowed));
            }
        }
        let p = parse_request(&[5, 1, 0, 1, 10, 0, 0, 1, 0, 0]);
        assert_eq!(p, Parsed::Invalid(Error::Target(TargetError::PortZero)));
    }

    #[test]
    fn bind_and_udp_associate_are_parsed_for_a_command_not_supported_reply() {
        let (r, _) = done(parse_request(&domain_request(2, b"a.test", 1)));
        assert_eq!(r.command, Command::Bind);
        let (r, _) = done(parse_request(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 1]));
        assert_eq!(r.command, Command::UdpAssociate);
        let p = parse_request(&[5, 9, 0, 1, 198, 51, 100, 1, 0, 80]);
        assert_eq!(p, Parsed::Invalid(Error::Command(9)));
        assert_eq!(Error::Command(9).reply(), Some(Reply::CommandNotSupported));
        // An unknown command is only refused once the request is complete.
        assert_eq!(parse_request(&[5, 9, 0, 1, 198]), Parsed::Need(5));
    }

    #[test]
    fn unknown_address_type_and_reserved_byte() {
        let p = parse_request(&[5, 1, 0, 2, 0, 0]);
        assert_eq!(p, Parsed::Invalid(Error::AddressType(2)));
        assert_eq!(
            Error::AddressType(2).reply(),
            Some(Reply::AddressTypeNotSupported)
        );
        let p = parse_request(&[5, 1, 1, 1, 198, 51, 100, 1, 0, 80]);
        assert_eq!(p, Parsed::Invalid(Error::Reserved(1)));
        assert_eq!(Error::Reserved(1).reply(), Some(Reply::GeneralFailure));
    }

    #[test]
    fn request_partial_input_asks_for_exactly_the_rest() {
        let full = domain_request(1, b"allowed.test", 443);
        assert_eq!(parse_request(&[]), Parsed::Need(5));
        assert_eq!(parse_request(&full[..3]), Parsed::Need(2));
        assert_eq!(parse_request(&full[..4]), Parsed::Need(1));
        for cut in 5..full.len() {
            assert_eq!(
                parse_request(&full[..cut]),
                Parsed::Need(full.len() - cut),
                "{cut}"
            );
        }
        let v4 = [5, 1, 0, 1, 198, 51, 100, 1, 0, 80];
        for cut in 4..v4.len() {
            assert_eq!(
                parse_request(&v4[..cut]),
                Parsed::Need(v4.len() - cut),
                "{cut}"
            );
        }
        // Early client data after the request is left to relay.
        let mut pipelined = full.clone();
        pipelined.extend_from_slice(b"\x16\x03\x01");
        assert_eq!(done(parse_request(&pipelined)).1, full.len());
    }

    #[test]
    fn replies_encode_standard_codes() {
        let codes: Vec<u8> = [
            Reply::Succeeded,
            Reply::GeneralFailure,
            Reply::NotAllowed,
            Reply::NetworkUnreachable,
            Reply::HostUnreachable,
            Reply::ConnectionRefused,
            Reply::TtlExpired,
            Reply::CommandNotSupported,
            Reply::AddressTypeNotSupported,
        ]
        .into_iter()
        .map(Reply::code)
        .collect();
        assert_eq!(codes, (0..=8).collect::<Vec<u8>>());
        assert_eq!(
            encode_reply(Reply::NotAllowed, None),
            [5, 2, 0, 1, 0, 0, 0, 0, 0, 0]
        );
        let v4: SocketAddr = "198.51.100.2:40000".parse().unwrap();
        assert_eq!(
            encode_reply(Reply::Succeeded, Some(v4)),
            [5, 0, 0, 1, 198, 51, 100, 2, 0x9c, 0x40]
        );
        let v6: SocketAddr = "[2001:db8::1]:443".parse().unwrap();
        let out = encode_reply(Reply::Succeeded, Some(v6));
        assert_eq!(out.len(), 22);
        assert_eq!(out[..4], [5, 0, 0, 4]);
        assert_eq!(
            out[4..20],
            "2001:db8::1".parse::<Ipv6Addr>().unwrap().octets()
        );
        assert_eq!(out[20..], [1, 187]);
    }

    #[test]
    fn io_errors_map_to_reply_codes() {
        use io::ErrorKind::*;
        assert_eq!(
            Reply::from_io_error_kind(ConnectionRefused),
            Reply::ConnectionRefused
        );
        assert_eq!(
            Reply::from_io_error_kind(NetworkUnreachable),
            Reply::NetworkUnreachable
        );
        assert_eq!(
            Reply::from_io_error_kind(HostUnreachable),
            Reply::HostUnreachable
        );
        assert_eq!(Reply::from_io_error_kind(TimedOut), Reply::TtlExpired);
        assert_eq!(
            Reply::from_io_error_kind(PermissionDenied),
            Reply::NotAllowed
        );
        assert_eq!(Reply::from_io_error_kind(Other), Reply::GeneralFailure);
    }
}
