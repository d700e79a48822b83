//! The proxy's HTTP side: a request head as hyper parses it (httparse), whose request target
//! and `Host` headers go to `net::http` as the proxy sends them; and the same bytes straight
//! into each parser of `net::http` and `net::target`.
//!
//! Invariants: nothing panics; every accepted target is canonical (normalizing its host again
//! changes nothing), round-trips through its printed form, and is matched by a `Host` header
//! spelling that same form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use net::{http, normalize_host, Target};

fuzz_target!(|data: &[u8]| {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    if req.parse(data).is_ok() {
        if let (Some(method), Some(path)) = (req.method, req.path) {
            let target = if method.eq_ignore_ascii_case("CONNECT") {
                http::parse_connect_authority(path).ok()
            } else {
                http::parse_absolute_target(path).ok().map(|a| {
                    assert!(a.path.starts_with('/'), "{a:?}");
                    a.target
                })
            };
            if let Some(t) = target {
                check_target(&t);
                for h in req.headers.iter() {
                    if h.name.eq_ignore_ascii_case("host") {
                        if let Ok(value) = std::str::from_utf8(h.value) {
                            let _ = http::host_header_matches(&t.host, t.port, value);
                        }
                    }
                }
            }
        }
    }

    let text = String::from_utf8_lossy(data);
    if let Ok(t) = http::parse_connect_authority(&text) {
        check_target(&t);
    }
    if let Ok(a) = http::parse_absolute_target(&text) {
        assert!(a.path.starts_with('/'), "{a:?}");
        check_target(&a.target);
    }
    if let Ok(host) = normalize_host(&text) {
        assert_eq!(normalize_host(&host).as_ref(), Ok(&host), "not idempotent");
    }
    if let Some((host, header)) = text.split_once('\n') {
        let _ = http::host_header_matches(host, 443, header);
        let _ = http::host_header_matches(host, 80, header);
    }
});

fn check_target(t: &Target) {
    assert_ne!(t.port, 0, "{t:?}");
    assert_eq!(
        normalize_host(&t.host).as_ref(),
        Ok(&t.host),
        "not canonical: {t:?}"
    );
    let printed = t.to_string();
    assert_eq!(
        http::parse_connect_authority(&printed).as_ref(),
        Ok(t),
        "{printed} does not parse back"
    );
    assert!(
        http::host_header_matches(&t.host, t.port, &printed),
        "Host: {printed} does not match {t:?}"
    );
}
