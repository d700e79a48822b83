//! The ClientHello SNI extractor the proxy runs on the first bytes of every tunnel: raw bytes,
//! and well-formed ClientHellos (arbitrary name and extensions) cut into arbitrary records.
//!
//! Invariants: nothing panics; a found name is canonical; every strict prefix of an input
//! whose hello was found asks for more bytes (never more than the hello still needs: the
//! client would wait for the server and deadlock) or finds the same hello; a built hello
//! yields exactly its name (normalized) and its ECH flag, or is refused when the name is not
//! a host name or the records are too many.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use net::sni::{self, tests_support as build, Sni};

/// A well-formed ClientHello to build: arbitrary name and extensions, cut into records of
/// `record_size` bytes, followed by `trailing` bytes.
#[derive(Debug, Arbitrary)]
struct Built {
    name: Option<String>,
    extensions: Vec<(u16, Vec<u8>)>,
    record_size: u16,
    trailing: Vec<u8>,
}

// Input starting with `B`: the rest describes a hello to build (`Built`); anything else is
// raw bytes from a client (so seed files can be real captures).
fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((b'B', rest)) => {
            if let Ok(b) = Built::arbitrary_take_rest(Unstructured::new(rest)) {
                built(b);
            }
        }
        _ => check(data),
    }
});

fn check(bytes: &[u8]) {
    let result = sni::parse(bytes);
    match &result {
        Sni::Need(n) => assert!(*n > 0),
        Sni::Found(hello) => {
            if let Some(name) = &hello.server_name {
                assert_eq!(net::normalize_host(name).as_ref(), Ok(name));
            }
            // The hello ends at the shortest prefix where it is found.
            let step = (bytes.len() / 256).max(1);
            let mut end = None;
            for len in (0..bytes.len()).step_by(step) {
                match sni::parse(&bytes[..len]) {
                    Sni::Need(k) => {
                        assert!(k > 0);
                        if let Some(end) = end {
                            panic!(
                                "prefix {len} needs {k} more after the hello was found at {end}"
                            );
                        }
                    }
                    Sni::Found(h) => {
                        assert_eq!(&Sni::Found(h), &result, "prefix {len}");
                        end.get_or_insert(len);
                    }
                    other => panic!("prefix {len} of a found hello: {other:?}"),
                }
            }
            let end = end.unwrap_or(bytes.len());
            for len in (0..end).step_by(step) {
                if let Sni::Need(k) = sni::parse(&bytes[..len]) {
                    assert!(
                        len + k <= end,
                        "prefix {len} asks for {k}, hello ends at {end}"
                    );
                }
            }
        }
        Sni::NotTls | Sni::Invalid(_) => {}
    }
}

fn built(b: Built) {
    let Built {
        name,
        extensions,
        record_size,
        trailing,
    } = b;
    if name.as_ref().is_some_and(|n| n.len() > 1 << 14) {
        return;
    }
    let mut block = Vec::new();
    if let Some(name) = &name {
        block.extend(build::server_name_extension(&[(0, name.as_bytes())]));
    }
    let mut seen = std::collections::HashSet::from([0u16]);
    let mut ech = false;
    for (kind, mut data) in extensions {
        if !seen.insert(kind) {
            continue;
        }
        data.truncate(512);
        ech |= kind == 0xfe0d;
        block.extend(build::extension(kind, &data));
    }
    if block.len() > usize::from(u16::MAX) {
        return;
    }
    let handshake = build::handshake(&build::hello_body(&block));
    let size = usize::from(record_size.max(1)).min(1 << 14);
    let mut bytes = build::refragment(&build::record(&handshake), size);
    let records = handshake.len().div_ceil(size);
    bytes.extend_from_slice(&trailing);
    let result = sni::parse(&bytes);
    let expected = name.as_deref().map(net::normalize_host);
    match (&result, expected) {
        (_, _) if records > sni::MAX_RECORDS || handshake.len() > sni::MAX_HANDSHAKE_LEN => {
            assert!(matches!(result, Sni::Invalid(_)), "{result:?}");
        }
        (Sni::Found(hello), Some(Ok(n))) => {
            assert_eq!(hello.server_name.as_ref(), Some(&n));
            assert_eq!(hello.ech, ech);
        }
        (Sni::Found(hello), None) => {
            assert_eq!(hello.server_name, None);
            assert_eq!(hello.ech, ech);
        }
        (Sni::Invalid(_), Some(Err(_))) => {}
        (other, expected) => panic!("{other:?}, expected {expected:?}"),
    }
    check(&bytes);
}
