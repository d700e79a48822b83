//! The SOCKS5 greeting and request parsers of the proxy, fed a client's bytes.
//!
//! Invariants: nothing panics; a complete message consumes at most the input and parses the
//! same from exactly its own bytes; every strict prefix of it asks for more bytes, never more
//! than the message has (incremental reading never over-reads or refuses a valid message
//! early); an accepted destination is canonical and not port 0.
#![no_main]

use libfuzzer_sys::fuzz_target;
use net::socks5::{self, Parsed};

fuzz_target!(|data: &[u8]| {
    // The proxy reads the greeting, then the request from the bytes after it.
    let rest = match socks5::parse_greeting(data) {
        Parsed::Done { value, consumed } => {
            assert!(consumed <= data.len());
            assert_eq!(consumed, 2 + value.methods.len());
            prefixes(data, consumed, socks5::parse_greeting);
            let _ = value.reply();
            &data[consumed..]
        }
        Parsed::Need(n) => {
            assert!(n > 0);
            data
        }
        Parsed::Invalid(e) => {
            let _ = e.reply();
            data
        }
    };
    for input in [data, rest] {
        match socks5::parse_request(input) {
            Parsed::Done { value, consumed } => {
                assert!(consumed <= input.len());
                let t = &value.target;
                assert_ne!(t.port, 0, "{value:?}");
                assert_eq!(
                    net::normalize_host(&t.host).as_ref(),
                    Ok(&t.host),
                    "{value:?}"
                );
                prefixes(input, consumed, socks5::parse_request);
                let reply = socks5::encode_reply(socks5::Reply::Succeeded, None);
                assert_eq!(reply.len(), 10);
            }
            Parsed::Need(n) => assert!(n > 0),
            Parsed::Invalid(e) => {
                let _ = e.reply();
            }
        }
    }
});

/// `parse(&input[..consumed])` is the same `Done`; each strict prefix is `Need(k)` with
/// `len + k <= consumed`.
fn prefixes<T: PartialEq + std::fmt::Debug>(
    input: &[u8],
    consumed: usize,
    parse: fn(&[u8]) -> Parsed<T>,
) {
    assert_eq!(parse(&input[..consumed]), parse(input));
    for len in 0..consumed {
        match parse(&input[..len]) {
            Parsed::Need(k) => assert!(
                k > 0 && len + k <= consumed,
                "prefix {len} of a {consumed}-byte message asks for {k} more"
            ),
            other => panic!("prefix {len} of a complete {consumed}-byte message: {other:?}"),
        }
    }
}
