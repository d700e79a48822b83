//! The server name (SNI) of the TLS ClientHello a client sends first through a `CONNECT`
//! tunnel or a SOCKS5 connection, so the proxy can refuse a tunnel whose TLS names another host
//! than the one it was opened for (domain fronting at the SNI level).
//!
//! [`parse`] is called on the bytes received so far and answers one of:
//! [`Sni::Need`] (read at least that many more bytes and call again with everything received),
//! [`Sni::Found`] (a complete ClientHello, with or without a server name), [`Sni::NotTls`] (the
//! first bytes are not a TLS handshake record) or [`Sni::Invalid`] (it starts like TLS but is
//! malformed, or exceeds the bounds below).
//!
//! # Bounds
//!
//! The ClientHello handshake message may be at most [`MAX_HANDSHAKE_LEN`] (16 KiB, one full
//! TLS record) and may span at most [`MAX_RECORDS`] records, so a caller never needs to buffer
//! more than [`MAX_INPUT`] bytes. `Need(n)` is exact (the rest of the current record header or
//! record), so a caller that waits for `n` more bytes before calling again re-parses at most
//! about twice per record, whatever the size of its reads.
//!
//! # Strictness
//!
//! The name the proxy checks must be the name the server acts on, so anything a server could
//! read differently is [`Sni::Invalid`]: duplicate extensions, a `server_name` list with other
//! than exactly one `host_name` entry, bytes left over inside a length-delimited field, non-
//! handshake records interleaved with the ClientHello, and names that [`normalize_host`] refuses
//! (the name is returned normalized: lower-case, no trailing dot).
//!
//! The parser is written by hand (instead of using `tls-parser`): extracting SNI needs record
//! reassembly, which that crate leaves to the caller, and strict checks on a handful of fields;
//! the result is a small bounds-checked reader with no `nom` and proc-macro dependencies.
//!
//! ```
//! use net::sni::{self, Sni};
//!
//! let hello = sni::tests_support::client_hello(Some("Allowed.Test"));
//! assert_eq!(sni::parse(&hello[..3]), Sni::Need(2));
//! match sni::parse(&hello) {
//!     Sni::Found(h) => assert_eq!(h.server_name.as_deref(), Some("allowed.test")),
//!     other => panic!("{other:?}"),
//! }
//! assert_eq!(sni::parse(b"GET / HTTP/1.1\r\n"), Sni::NotTls);
//! ```

use std::collections::HashSet;

use crate::target::{normalize_host, TargetError};

/// Length of a TLS record header: content type, version, length.
pub const RECORD_HEADER_LEN: usize = 5;
/// Largest ClientHello handshake message accepted, its 4-byte header included.
pub const MAX_HANDSHAKE_LEN: usize = 16 * 1024;
/// Most records a ClientHello may be split into.
pub const MAX_RECORDS: usize = 32;
/// The most bytes [`parse`] ever asks for before it decides.
pub const MAX_INPUT: usize = MAX_HANDSHAKE_LEN + MAX_RECORDS * RECORD_HEADER_LEN;

const CONTENT_HANDSHAKE: u8 = 22;
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
const EXT_SERVER_NAME: u16 = 0;
const EXT_ENCRYPTED_CLIENT_HELLO: u16 = 0xfe0d;
const NAME_TYPE_HOST_NAME: u8 = 0;
/// TLS plaintext records carry at most 2^14 bytes (RFC 8446 section 5.1).
const MAX_RECORD_LEN: usize = 1 << 14;

/// What the first bytes of a tunnel say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sni {
    /// Not decided yet: at least this many more bytes are needed.
    Need(usize),
    /// A complete, well-formed ClientHello.
    Found(ClientHello),
    /// Not a TLS handshake (plain text, SSLv2, another protocol).
    NotTls,
    /// Starts as a TLS handshake but is malformed or over the bounds.
    Invalid(Invalid),
}

/// What the proxy needs from a ClientHello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// The `server_name` host name, normalized; `None` when the extension is absent.
    pub server_name: Option<String>,
    /// Whether the client offered Encrypted Client Hello (extension 0xfe0d). The name above is
    /// then the *outer*, public name; the name the server acts on is encrypted. Browsers send
    /// a GREASE ECH extension even without an ECH config, so this alone is not a refusal.
    pub ech: bool,
}

/// Why a TLS-looking first flight was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("the first handshake message is not a ClientHello (type {0})")]
    NotClientHello(u8),
    #[error("a record of content type {0} is interleaved with the ClientHello")]
    Interleaved(u8),
    #[error("a record has an unknown protocol version {0:#06x}")]
    RecordVersion(u16),
    #[error("an empty handshake record")]
    EmptyRecord,
    #[error("a record is longer than 16384 bytes")]
    RecordTooLong,
    #[error("the ClientHello is split across more than {MAX_RECORDS} records")]
    TooManyRecords,
    #[error("the ClientHello is {0} bytes, more than {MAX_HANDSHAKE_LEN}")]
    TooLong(usize),
    #[error("the ClientHello is truncated or a length field overruns it")]
    Truncated,
    #[error("the ClientHello has bytes left over in {0}")]
    TrailingBytes(&'static str),
    #[error("the ClientHello has an unknown protocol version {0:#06x}")]
    HelloVersion(u16),
    #[error("the ClientHello has a malformed {0}")]
    Malformed(&'static str),
    #[error("extension {0} appears twice")]
    DuplicateExtension(u16),
    #[error("the server_name extension does not hold exactly one host name")]
    ServerNameList,
    #[error("the server name is not a host name: {0}")]
    ServerName(TargetError),
}

/// Looks for a ClientHello at the start of `input` (everything the client sent so far).
pub fn parse(input: &[u8]) -> Sni {
    match reassemble(input) {
        Ok(Some(message)) => match parse_client_hello(&message) {
            Ok(hello) => Sni::Found(hello),
            Err(e) => Sni::Invalid(e),
        },
        Ok(None) => Sni::NotTls,
        Err(Step::Need(n)) => Sni::Need(n),
        Err(Step::Invalid(e)) => Sni::Invalid(e),
    }
}

enum Step {
    Need(usize),
    Invalid(Invalid),
}

impl From<Invalid> for Step {
    fn from(e: Invalid) -> Self {
        Step::Invalid(e)
    }
}

/// Joins the handshake records at the start of `input` into the ClientHello body (without
/// its 4-byte header). `Ok(None)` means not TLS.
fn reassemble(input: &[u8]) -> Result<Option<Vec<u8>>, Step> {
    let mut message: Vec<u8> = Vec::new();
    let mut pos = 0;
    for record in 0..MAX_RECORDS {
        let header = &input[pos..];
        // Decide "not TLS" as early as the bytes allow, and only on the first record.
        if let Some(&content) = header.first() {
            if content != CONTENT_HANDSHAKE {
                if record == 0 {
                    return Ok(None);
                }
                return Err(Invalid::Interleaved(content).into());
            }
        }
        if let Some(&major) = header.get(1) {
            let minor = header.get(2).copied().unwrap_or(0);
            if major != 3 || minor > 4 {
                if record == 0 {
                    return Ok(None);
                }
                return Err(Invalid::RecordVersion(u16::from_be_bytes([major, minor])).into());
            }
        }
        if header.len() < RECORD_HEADER_LEN {
            return Err(Step::Need(RECORD_HEADER_LEN - header.len()));
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len == 0 {
            return Err(Invalid::EmptyRecord.into());
        }
        if len > MAX_RECORD_LEN {
            return Err(Invalid::RecordTooLong.into());
        }
        let body = &header[RECORD_HEADER_LEN..];
        let available = body.len().min(len);
        message.extend_from_slice(&body[..available]);
        // Check the handshake header as soon as it is there, so an oversized or non-hello
        // message is refused before its records are waited for.
        let mut total = None;
        if message.len() >= 4 {
            if message[0] != HANDSHAKE_CLIENT_HELLO {
                return Err(Invalid::NotClientHello(message[0]).into());
            }
            let body_len = usize::from(message[1]) << 16
                | usize::from(message[2]) << 8
                | usize::from(message[3]);
            let whole = body_len + 4;
            if whole > MAX_HANDSHAKE_LEN {
                return Err(Invalid::TooLong(whole).into());
            }
            total = Some(whole);
        } else if let Some(&kind) = message.first() {
            if kind != HANDSHAKE_CLIENT_HELLO {
                return Err(Invalid::NotClientHello(kind).into());
            }
        }
        // Bytes still missing from the hello (or from its header while the length is unknown).
        let want = match total {
            Some(whole) if message.len() >= whole => {
                // Anything after the ClientHello in its last record is the server's problem;
                // the name is decided by the hello alone.
                message.truncate(whole);
                message.drain(..4);
                return Ok(Some(message));
            }
            Some(whole) => whole - message.len(),
            None => 4 - message.len(),
        };
        if available < len {
            // Never ask past the end of the hello: a client that sent exactly its hello waits
            // for the server, and a caller waiting for more would deadlock with it.
            return Err(Step::Need((len - available).min(want)));
        }
        pos += RECORD_HEADER_LEN + len;
    }
    Err(Invalid::TooManyRecords.into())
}

/// A bounds-checked cursor over a byte slice; every read past the end is [`Invalid::Truncated`].
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Invalid> {
        if n > self.bytes.len() {
            return Err(Invalid::Truncated);
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, Invalid> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, Invalid> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A field with a one-byte length prefix.
    fn vec8(&mut self) -> Result<&'a [u8], Invalid> {
        let n = usize::from(self.u8()?);
        self.take(n)
    }

    /// A field with a two-byte length prefix.
    fn vec16(&mut self) -> Result<&'a [u8], Invalid> {
        let n = usize::from(self.u16()?);
        self.take(n)
    }
}

/// Parses a ClientHello body (RFC 8446 section 4.1.2, RFC 5246 section 7.4.1.2).
fn parse_client_hello(body: &[u8]) -> Result<ClientHello, Invalid> {
    let mut r = Reader::new(body);
    let version = r.u16()?;
    if !(0x0300..=0x0304).contains(&version) {
        return Err(Invalid::HelloVersion(version));
    }
    r.take(32)?; // random
    if r.vec8()?.len() > 32 {
        return Err(Invalid::Malformed("session id"));
    }
    let suites = r.vec16()?;
    if suites.is_empty() || suites.len() % 2 != 0 {
        return Err(Invalid::Malformed("cipher suite list"));
    }
    if r.vec8()?.is_empty() {
        return Err(Invalid::Malformed("compression method list"));
    }
    let mut hello = ClientHello {
        server_name: None,
        ech: false,
    };
    if r.is_empty() {
        // TLS 1.2 and older may omit the extensions block entirely.
        return Ok(hello);
    }
    let mut extensions = Reader::new(r.vec16()?);
    if !r.is_empty() {
        return Err(Invalid::TrailingBytes("the ClientHello"));
    }
    let mut seen = HashSet::new();
    while !extensions.is_empty() {
        let kind = extensions.u16()?;
        let data = extensions.vec16()?;
        if !seen.insert(kind) {
            return Err(Invalid::DuplicateExtension(kind));
        }
        match kind {
            EXT_SERVER_NAME => hello.server_name = Some(parse_server_name(data)?),
            EXT_ENCRYPTED_CLIENT_HELLO => hello.ech = true,
            _ => {}
        }
    }
    Ok(hello)
}

/// The `server_name` extension (RFC 6066 section 3): exactly one `host_name` entry.
fn parse_server_name(data: &[u8]) -> Result<String, Invalid> {
    let mut ext = Reader::new(data);
    let mut list = Reader::new(ext.vec16()?);
    if !ext.is_empty() {
        return Err(Invalid::TrailingBytes("the server_name extension"));
    }
    if list.u8().map_err(|_| Invalid::ServerNameList)? != NAME_TYPE_HOST_NAME {
        return Err(Invalid::ServerNameList);
    }
    let name = list.vec16()?;
    if !list.is_empty() {
        return Err(Invalid::ServerNameList);
    }
    let name = std::str::from_utf8(name)
        .map_err(|_| Invalid::ServerName(TargetError::BadChar(char::REPLACEMENT_CHARACTER)))?;
    normalize_host(name).map_err(Invalid::ServerName)
}

/// Builders of synthetic ClientHellos, public so doc examples and the proxy's tests can use
/// them. Not for production use.
#[doc(hidden)]
pub mod tests_support {
    /// A minimal TLS 1.2-style ClientHello record, with a `server_name` extension when `name`
    /// is given.
    pub fn client_hello(name: Option<&str>) -> Vec<u8> {
        let mut extensions = Vec::new();
        if let Some(name) = name {
            extensions.extend_from_slice(&server_name_extension(&[(0, name.as_bytes())]));
        }
        record(&handshake(&hello_body(&extensions)))
    }

    /// A `server_name` extension with the given (type, name) entries.
    pub fn server_name_extension(entries: &[(u8, &[u8])]) -> Vec<u8> {
        let mut list = Vec::new();
        for (kind, name) in entries {
            list.push(*kind);
            list.extend_from_slice(&len16(name.len()));
            list.extend_from_slice(name);
        }
        let mut data = len16(list.len()).to_vec();
        data.extend_from_slice(&list);
        extension(0, &data)
    }

    /// One extension: type, length, data.
    pub fn extension(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut out = kind.to_be_bytes().to_vec();
        out.extend_from_slice(&len16(data.len()));
        out.extend_from_slice(data);
        out
    }

    /// A ClientHello body with the given extensions block contents.
    pub fn hello_body(extensions: &[u8]) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend_from_slice(&[0x11; 32]); // random
        body.push(0); // empty session id
        body.extend_from_slice(&[0, 2, 0x13, 0x01]); // one cipher suite
        body.extend_from_slice(&[1, 0]); // null compression
        body.extend_from_slice(&len16(extensions.len()));
        body.extend_from_slice(extensions);
        body
    }

    /// A handshake message of type ClientHello around `body`.
    pub fn handshake(body: &[u8]) -> Vec<u8> {
        let n = body.len();
        let mut out = vec![1, (n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(body);
        out
    }

    /// Handshake bytes in one record.
    pub fn record(fragment: &[u8]) -> Vec<u8> {
        let mut out = vec![22, 3, 1];
        out.extend_from_slice(&len16(fragment.len()));
        out.extend_from_slice(fragment);
        out
    }

    /// Re-frames the records of `records` so each carries at most `size` handshake bytes.
    pub fn refragment(records: &[u8], size: usize) -> Vec<u8> {
        let mut payload = Vec::new();
        let mut rest = records;
        while rest.len() >= 5 {
            let n = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
            let end = (5 + n).min(rest.len());
            payload.extend_from_slice(&rest[5..end]);
            rest = &rest[end..];
        }
        payload.chunks(size.max(1)).flat_map(record).collect()
    }

    fn len16(n: usize) -> [u8; 2] {
        (n as u16).to_be_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::*;
    use super::*;

    const OPENSSL_SNI: &[u8] = include_bytes!("../testdata/openssl-sni.bin");
    const OPENSSL_NOSNI: &[u8] = include_bytes!("../testdata/openssl-nosni.bin");
    const OPENSSL_TLS12: &[u8] = include_bytes!("../testdata/openssl-tls12-sni.bin");
    const CURL_SNI: &[u8] = include_bytes!("../testdata/curl-sni.bin");
    const OPENSSL_FRAGMENTED: &[u8] = include_bytes!("../testdata/openssl-fragmented.bin");

    fn found(input: &[u8]) -> ClientHello {
        match parse(input) {
            Sni::Found(hello) => hello,
            other => panic!("expected a ClientHello, got {other:?}"),
        }
    }

    fn name(input: &[u8]) -> Option<String> {
        found(input).server_name
    }

    fn invalid(input: &[u8]) -> Invalid {
        match parse(input) {
            Sni::Invalid(e) => e,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    /// Feeds `input` the way a careful caller does: read `Need(n)` more bytes, then call again.
    /// Returns the outcome and how many times `parse` ran.
    fn feed(input: &[u8]) -> (Sni, usize) {
        let mut have = 0;
        let mut calls = 0;
        loop {
            calls += 1;
            match parse(&input[..have]) {
                Sni::Need(n) => {
                    assert!(have + n <= input.len(), "asked past the end: {have} + {n}");
                    assert!(have + n <= MAX_INPUT);
                    have += n;
                }
                other => return (other, calls),
            }
        }
    }

    #[test]
    fn real_client_hellos() {
        // openssl s_client -servername X.Test: the name comes back lower-cased.
        assert_eq!(name(OPENSSL_SNI).as_deref(), Some("x.test"));
        assert_eq!(name(OPENSSL_NOSNI), None);
        assert_eq!(name(OPENSSL_TLS12).as_deref(), Some("allowed.test"));
        assert_eq!(name(CURL_SNI).as_deref(), Some("allowed.test"));
        assert!(!found(CURL_SNI).ech);
    }

    #[test]
    fn real_client_hello_split_across_records_by_the_client() {
        // openssl -max_send_frag 512 sends three records of 512, 512 and 290 bytes.
        assert_eq!(OPENSSL_FRAGMENTED[3..5], [2, 0]);
        assert_eq!(
            name(OPENSSL_FRAGMENTED).as_deref(),
            Some("frag.allowed.test")
        );
        let (outcome, calls) = feed(OPENSSL_FRAGMENTED);
        assert_eq!(outcome, Sni::Found(found(OPENSSL_FRAGMENTED)));
        assert_eq!(calls, 8);
    }

    #[test]
    fn every_prefix_asks_for_more_and_never_past_the_hello() {
        for input in [OPENSSL_SNI, CURL_SNI, OPENSSL_FRAGMENTED, OPENSSL_NOSNI] {
            for cut in 0..input.len() {
                match parse(&input[..cut]) {
                    Sni::Need(n) => assert!(n >= 1 && cut + n <= input.len(), "cut {cut}"),
                    other => panic!("cut {cut}: {other:?}"),
                }
            }
        }
        assert_eq!(parse(&[]), Sni::Need(5));
        assert_eq!(parse(&[22]), Sni::Need(4));
        // Record of 0x133 bytes: first the handshake header, then exactly the rest.
        assert_eq!(OPENSSL_SNI[3..9], [0x01, 0x33, 1, 0, 1, 0x2f]);
        assert_eq!(parse(&OPENSSL_SNI[..5]), Sni::Need(4));
        assert_eq!(parse(&OPENSSL_SNI[..6]), Sni::Need(3));
        assert_eq!(parse(&OPENSSL_SNI[..9]), Sni::Need(0x12f));
        assert_eq!(parse(&OPENSSL_SNI[..10]), Sni::Need(0x12e));
    }

    #[test]
    fn one_byte_records_and_odd_fragment_sizes() {
        for size in [1, 2, 3, 7, 100, 311, 312] {
            let input = refragment(OPENSSL_SNI, size);
            let outcome = parse(&input);
            if OPENSSL_SNI.len() - 5 > size * MAX_RECORDS {
                assert_eq!(
                    outcome,
                    Sni::Invalid(Invalid::TooManyRecords),
                    "size {size}"
                );
            } else {
                assert_eq!(outcome, Sni::Found(found(OPENSSL_SNI)), "size {size}");
                assert_eq!(feed(&input).0, outcome);
            }
        }
        // Ten records are fine, for curl's 512-byte hello too.
        let input = refragment(CURL_SNI, 52);
        assert_eq!(name(&input).as_deref(), Some("allowed.test"));
    }

    #[test]
    fn never_asks_for_bytes_after_the_hello_in_its_record() {
        // The record is longer than the hello; the client sends only the hello and then waits.
        let message = handshake(&hello_body(&server_name_extension(&[(0, b"allowed.test")])));
        let mut fragment = message.clone();
        fragment.extend_from_slice(&[0xaa; 50]);
        let input = record(&fragment);
        let (outcome, _) = feed(&input[..5 + message.len()]);
        assert_eq!(
            name(&input[..5 + message.len()]).as_deref(),
            Some("allowed.test")
        );
        assert_eq!(outcome, parse(&input));
    }

    #[test]
    fn trailing_data_after_the_hello_is_ignored() {
        let mut input = OPENSSL_SNI.to_vec();
        input.extend_from_slice(&[23, 3, 3, 0, 1, 0]);
        assert_eq!(name(&input).as_deref(), Some("x.test"));
    }

    #[test]
    fn not_tls() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), Sni::NotTls);
        assert_eq!(parse(b"SSH-2.0-OpenSSH_9.6\r\n"), Sni::NotTls);
        assert_eq!(parse(&[0x80, 0x2e, 0x01, 0x03, 0x01]), Sni::NotTls); // SSLv2 hello
        assert_eq!(parse(&[22, 2]), Sni::NotTls);
        assert_eq!(parse(&[22, 3, 5]), Sni::NotTls);
        assert_eq!(parse(&[23, 3, 3, 0, 1, 0]), Sni::NotTls); // application data
        assert_eq!(parse(&[21]), Sni::NotTls); // alert
    }

    #[test]
    fn record_level_violations() {
        assert_eq!(invalid(&[22, 3, 1, 0, 0]), Invalid::EmptyRecord);
        assert_eq!(invalid(&[22, 3, 1, 0x40, 1]), Invalid::RecordTooLong);
        let mut split = refragment(OPENSSL_SNI, 100);
        assert_eq!(split[105], 22);
        split[105] = 23;
        assert_eq!(invalid(&split), Invalid::Interleaved(23));
        let mut split = refragment(OPENSSL_SNI, 100);
        split[106] = 2;
        assert_eq!(invalid(&split), Invalid::RecordVersion(0x0201));
        // Server hello (type 2) and a certificate message (11).
        assert_eq!(
            invalid(&record(&[2, 0, 0, 1, 0])),
            Invalid::NotClientHello(2)
        );
        assert_eq!(invalid(&[22, 3, 1, 0, 9, 11]), Invalid::NotClientHello(11));
    }

    #[test]
    fn oversized_hellos_are_refused_from_their_header() {
        // Declares 16 KiB + 1 of body; refused after 9 bytes, without waiting for the rest.
        let n = MAX_HANDSHAKE_LEN - 3;
        let header = [
            22,
            3,
            1,
            0x40,
            0,
            1,
            (n >> 16) as u8,
            (n >> 8) as u8,
            n as u8,
        ];
        assert_eq!(invalid(&header), Invalid::TooLong(MAX_HANDSHAKE_LEN + 1));
        // The largest accepted hello: 16 KiB including its header, in two records.
        let padding = vec![0u8; MAX_HANDSHAKE_LEN - 4 - hello_body(&[]).len() - 4];
        let body = hello_body(&extension(21, &padding));
        let message = handshake(&body);
        assert_eq!(message.len(), MAX_HANDSHAKE_LEN);
        let mut input = record(&message[..MAX_RECORD_LEN - 1]);
        input.extend_from_slice(&record(&message[MAX_RECORD_LEN - 1..]));
        assert_eq!(
            found(&input),
            ClientHello {
                server_name: None,
                ech: false
            }
        );
        assert!(input.len() <= MAX_INPUT);
    }

    #[test]
    fn synthetic_names() {
        assert_eq!(
            name(&client_hello(Some("A.Test."))).as_deref(),
            Some("a.test")
        );
        assert_eq!(
            name(&client_hello(Some("198.51.100.7"))).as_deref(),
            Some("198.51.100.7")
        );
        assert_eq!(name(&client_hello(None)), None);
        let label = "a".repeat(63);
        let long = format!("{label}.{label}.{label}.{}", "b".repeat(61));
        assert_eq!(name(&client_hello(Some(&long))), Some(long));
    }

    #[test]
    fn bad_names_are_refused() {
        assert_eq!(
            invalid(&client_hello(Some("a.test\0.evil.test"))),
            Invalid::ServerName(TargetError::BadChar('\0'))
        );
        assert_eq!(
            invalid(&client_hello(Some(""))),
            Invalid::ServerName(TargetError::Empty)
        );
        assert_eq!(
            invalid(&client_hello(Some("127.1"))),
            Invalid::ServerName(TargetError::NumericName)
        );
        let latin1 = server_name_extension(&[(0, b"caf\xe9.test")]);
        assert!(matches!(
            invalid(&record(&handshake(&hello_body(&latin1)))),
            Invalid::ServerName(_)
        ));
    }

    #[test]
    fn ambiguous_server_name_lists_are_refused() {
        let hello = |ext: Vec<u8>| record(&handshake(&hello_body(&ext)));
        let two = server_name_extension(&[(0, b"allowed.test"), (0, b"evil.test")]);
        assert_eq!(invalid(&hello(two)), Invalid::ServerNameList);
        let other_type = server_name_extension(&[(1, b"allowed.test")]);
        assert_eq!(invalid(&hello(other_type)), Invalid::ServerNameList);
        let mixed = server_name_extension(&[(0, b"allowed.test"), (1, b"x")]);
        assert_eq!(invalid(&hello(mixed)), Invalid::ServerNameList);
        let empty_list = extension(0, &[0, 0]);
        assert_eq!(invalid(&hello(empty_list)), Invalid::ServerNameList);
        // An empty server_name extension (what a server sends back) is not a request.
        assert_eq!(invalid(&hello(extension(0, &[]))), Invalid::Truncated);
        let mut trailing = server_name_extension(&[(0, b"allowed.test")]);
        trailing.push(0);
        let n = trailing.len() - 4;
        trailing[2..4].copy_from_slice(&(n as u16).to_be_bytes());
        assert_eq!(
            invalid(&hello(trailing)),
            Invalid::TrailingBytes("the server_name extension")
        );
        let mut dup = server_name_extension(&[(0, b"allowed.test")]);
        dup.extend_from_slice(&server_name_extension(&[(0, b"evil.test")]));
        assert_eq!(invalid(&hello(dup)), Invalid::DuplicateExtension(0));
    }

    #[test]
    fn ech_is_reported() {
        let mut ext = server_name_extension(&[(0, b"public.allowed.test")]);
        ext.extend_from_slice(&extension(0xfe0d, &[0; 8]));
        let hello = found(&record(&handshake(&hello_body(&ext))));
        assert_eq!(hello.server_name.as_deref(), Some("public.allowed.test"));
        assert!(hello.ech);
    }

    #[test]
    fn hello_structure_violations() {
        let hello = |body: Vec<u8>| record(&handshake(&body));
        // No extensions block at all: a valid TLS 1.2 hello without SNI.
        let mut bare = hello_body(&[]);
        bare.truncate(bare.len() - 2);
        assert_eq!(found(&hello(bare.clone())).server_name, None);
        let mut body = bare.clone();
        body[0] = 2;
        assert_eq!(
            invalid(&hello(body)),
            Invalid::HelloVersion(0x0303 - 0x0100)
        );
        let mut body = bare.clone();
        body[34] = 33; // session id longer than 32
        body.splice(35..35, [0u8; 33]);
        assert_eq!(invalid(&hello(body)), Invalid::Malformed("session id"));
        let mut body = bare.clone();
        body[35..39].copy_from_slice(&[0, 1, 0x13, 1]);
        assert_eq!(
            invalid(&hello(body)),
            Invalid::Malformed("cipher suite list")
        );
        let mut body = bare.clone();
        body[39..41].copy_from_slice(&[0, 0]);
        body.truncate(40);
        assert_eq!(
            invalid(&hello(body)),
            Invalid::Malformed("compression method list")
        );
        let mut body = hello_body(&[]);
        body.push(0);
        assert_eq!(
            invalid(&hello(body)),
            Invalid::TrailingBytes("the ClientHello")
        );
        let mut body = hello_body(&extension(0x0010, b"h2"));
        body.truncate(body.len() - 1);
        let n = body.len() - 43;
        body[41..43].copy_from_slice(&(n as u16).to_be_bytes());
        assert_eq!(invalid(&hello(body)), Invalid::Truncated);
        // The handshake length is shorter than the hello's own fields.
        assert_eq!(invalid(&hello(vec![3, 3, 0])), Invalid::Truncated);
    }

    #[test]
    fn every_truncation_of_a_declared_length_is_caught() {
        // Shrink the handshake length field: the hello ends early and must be refused or read
        // consistently, never read past its declared end.
        let message = handshake(&hello_body(&server_name_extension(&[(0, b"allowed.test")])));
        for cut in 0..message.len() - 4 {
            let mut m = message[..4 + cut].to_vec();
            m[1..4].copy_from_slice(&(cut as u32).to_be_bytes()[1..]);
            match parse(&record(&m)) {
                Sni::Invalid(_) => {}
                Sni::Found(h) => assert_eq!(h.server_name, None, "cut {cut}"),
                other => panic!("cut {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A small deterministic fuzz: flip bytes of real hellos and parse every variant.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for input in [OPENSSL_SNI, CURL_SNI, OPENSSL_FRAGMENTED] {
            for _ in 0..3000 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let mut bytes = input.to_vec();
                let at = (state as usize) % bytes.len();
                bytes[at] = (state >> 32) as u8;
                let _ = parse(&bytes);
                let _ = parse(&bytes[..at]);
            }
        }
    }
}
