use super::*;
use policy::credentials::parse_upstream;
use zeroize::Zeroizing;

fn route(inject: Inject, upstream: &str) -> Route {
    Route {
        name: "r".into(),
        #[allow(clippy::unwrap_used)]
        upstream: parse_upstream(upstream).unwrap(),
        inject,
        token: Token::from_random([7; 32]),
        #[allow(clippy::unwrap_used)]
        secret: Secret::new(Zeroizing::new("real value/+".into())).unwrap(),
        deny_paths: vec!["/v1/organizations".into(), "/repos/*/*/keys".into()],
    }
}

fn header(name: &str, format: &str) -> Inject {
    Inject::Header {
        name: name.into(),
        format: format.into(),
    }
}

fn headers(pairs: &[(&str, &str)]) -> hyper::HeaderMap {
    let mut h = hyper::HeaderMap::new();
    for (k, v) in pairs {
        #[allow(clippy::unwrap_used)]
        h.append(
            hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    h
}

#[test]
fn stand_ins_are_256_bits_of_hex_and_never_printed() {
    let t = Token::from_random([0xab; 32]);
    assert_eq!(t.as_str().len(), TOKEN_PREFIX.len() + 64);
    assert!(t.as_str().ends_with("abab"));
    assert!(!format!("{t:?}").contains("abab"));
    let s = Secret::new(Zeroizing::new("sk-live".into()));
    assert!(s.is_ok_and(|s| !format!("{s:?}").contains("sk-live")));
    assert!(Secret::new(Zeroizing::new(String::new())).is_err());
    assert!(Secret::new(Zeroizing::new("a\r\nx: y".into())).is_err());
}

#[test]
fn routes_are_found_by_their_path() {
    assert_eq!(
        split_route("/credential/anthropic/v1/messages?beta=true"),
        Some(("anthropic", "/v1/messages?beta=true"))
    );
    assert_eq!(split_route("/credential/openai"), Some(("openai", "")));
    assert_eq!(split_route("/credential/openai?x"), Some(("openai", "?x")));
    assert_eq!(split_route("/other/openai"), None);
}

#[test]
fn the_stand_in_is_checked_where_the_value_goes() {
    let r = route(header("authorization", "Bearer {}"), "https://a.test");
    let good = format!("Bearer {}", r.token.as_str());
    let lower = format!("bearer {}", r.token.as_str());
    assert_eq!(
        presented(&r, &headers(&[("authorization", &good)]), None),
        Presented::Valid
    );
    assert_eq!(
        presented(&r, &headers(&[("authorization", &lower)]), None),
        Presented::Valid
    );
    assert_eq!(presented(&r, &headers(&[]), None), Presented::Missing);
    let short = &good[..good.len() - 1];
    let other = Token::from_random([8; 32]);
    for bad in [
        short,
        r.token.as_str(),
        &format!("Bearer {}", other.as_str()),
        "Bearer ",
    ] {
        assert_eq!(
            presented(&r, &headers(&[("authorization", bad)]), None),
            Presented::Wrong,
            "{bad}"
        );
    }
    let twice = headers(&[("authorization", &good), ("authorization", &good)]);
    assert_eq!(presented(&r, &twice, None), Presented::Wrong);
    let q = route(
        Inject::Query {
            param: "key".into(),
        },
        "https://a.test",
    );
    let query = format!("alt=sse&key={}", q.token.as_str());
    assert_eq!(presented(&q, &headers(&[]), Some(&query)), Presented::Valid);
    assert_eq!(
        presented(&q, &headers(&[]), Some("alt=sse")),
        Presented::Missing
    );
    assert_eq!(
        presented(&q, &headers(&[]), Some(&format!("{query}&key=x"))),
        Presented::Wrong
    );
}

#[test]
fn the_target_stays_under_the_upstream_path() {
    let r = route(header("x-api-key", "{}"), "https://a.test/v1");
    let t = |rest: &str| upstream_target(&r, rest).map(|t| t.to_string());
    assert_eq!(
        t("/chat/completions?stream=true"),
        Ok("/v1/chat/completions?stream=true".into())
    );
    assert_eq!(t(""), Ok("/v1/".into()));
    for bad in ["/../admin", "/a/%2E%2e/b", "/./x", "/a\\b", "x"] {
        assert!(t(bad).is_err(), "{bad}");
    }
    let q = route(
        Inject::Query {
            param: "key".into(),
        },
        "https://a.test",
    );
    let rest = format!("/v1/models?key={}&alt=sse", q.token.as_str());
    assert_eq!(
        upstream_target(&q, &rest).map(|t| t.to_string()),
        Ok("/v1/models?alt=sse&key=real%20value%2F%2B".into())
    );
}

#[test]
fn the_header_value_is_the_format_with_the_real_value() {
    let r = route(header("authorization", "Bearer {}"), "https://a.test");
    let v = header_value("Bearer {}", &r.secret);
    assert!(v.is_ok_and(|v| v.is_sensitive() && v.as_bytes() == b"Bearer real value/+"));
}

#[test]
fn the_real_value_is_masked_in_responses_across_chunks() {
    let r = route(header("x-api-key", "{}"), "https://a.test");
    let mut s = Scrubber::new(&r);
    let mut out = Vec::new();
    let feed = |s: &mut Scrubber, chunk: &[u8], out: &mut Vec<u8>| {
        out.extend_from_slice(&s.push_slice(chunk));
    };
    // Split inside the value, a clean chunk, the percent-encoded form, a dangling prefix.
    for chunk in [
        &b"a=real va"[..],
        b"lue/+;",
        b" plain ",
        b"q=real%20value%2F%2B",
        b" end real",
    ] {
        feed(&mut s, chunk, &mut out);
    }
    out.extend_from_slice(&s.finish());
    assert_eq!(
        String::from_utf8_lossy(&out),
        "a=XXXXXXXXXXXX; plain q=XXXXXXXXXXXXXXXXXX end real"
    );
    assert_eq!(s.replaced, 2);
    // Nothing that cannot start a value is held back (an event goes out whole).
    let mut s = Scrubber::new(&r);
    assert_eq!(s.push_slice(b"data: {}\n\n"), b"data: {}\n\n");
    assert!(!s.holds());
    assert_eq!(
        s.header(b"https://x/?k=real%20value%2F%2B"),
        Some(b"https://x/?k=XXXXXXXXXXXXXXXXXX".to_vec())
    );
    assert_eq!(s.header(b"text/plain"), None);
}

#[test]
fn deny_paths_match_every_spelling() {
    let r = route(header("x-api-key", "{}"), "https://a.test");
    for p in [
        "/v1/organizations",
        "/v1/organizations/api_keys",
        "//V1/%6Frganizations/x",
        "/repos/me/proj/keys",
        "/repos/me/proj/keys/1",
        "/repos/me%2Fproj/keys",
        "/v1/organizations;x/y",
        "/v1/organizations%00",
        "/v1/organizations%20",
        "/v1/organizations%2e",
        "/v1/organizations.",
        "/v1/organizations%3Fx",
        "/v1/organizations%23x",
        "/V1/%6Frganizations",
        "/v1/organizations.json",
        "/repos/me/proj/keys.json",
        "/repos/me/proj/keys.xml.json/1",
        "/repos/me/proj/keys.json~",
        "/repos/me/proj/keys.json-x",
        "/repos/me/proj/keys.json%2523",
        "/repos/me/proj.git/keys",
    ] {
        assert!(denied_path(&r, p).is_some(), "{p}");
    }
    for p in [
        "/v1/messages",
        "/v1/organization",
        "/repos/me/keys",
        "/repos/me/proj/hooks",
        "/repos/me/proj/keys_json",
        "/v1/organizations_x.json",
    ] {
        assert_eq!(denied_path(&r, p), None, "{p}");
    }
    for bad in [
        "/x/../v1/organizations",
        "/%2e/v1",
        "/a%2F..%2Fb",
        "/a\\b",
        "/a%5cb",
    ] {
        assert!(check_path_spelling(bad).is_err(), "{bad}");
    }
    assert!(check_path_spelling("/projects/group%2Fproj/issues").is_ok());
    assert!(method_allowed(&hyper::Method::POST));
    assert!(!method_allowed(&hyper::Method::TRACE));
    assert!(!method_allowed(&hyper::Method::CONNECT));
}

fn masked(name: &str, host: &str, sentinel: &str, real: &str) -> Masked {
    Masked {
        name: name.into(),
        hosts: vec![(host.into(), 443)],
        api_prefix: String::new(),
        sentinel: Zeroizing::new(sentinel.into()),
        #[allow(clippy::unwrap_used)]
        secret: Secret::new(Zeroizing::new(real.into())).unwrap(),
        deny_paths: Vec::new(),
    }
}

#[test]
fn sentinels_become_real_values_only_at_their_own_hosts() {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let all = [
        masked("gh", "github.com", "SENTINELgh01", "ghp_realvalue"),
        masked("gl", "gitlab.com", "SENTINELgl02", "glpat-realval"),
    ];
    let basic = format!("Basic {}", b64.encode("x-access-token:SENTINELgh01"));
    let mut h = headers(&[
        ("authorization", &basic),
        ("private-token", "token SENTINELgh01"),
        ("x-api-key", "SENTINELgl02"),
        ("x-echo", "SENTINELgh01"),
    ]);
    let used = unmask_headers(&mut h, "github.com", 443, all.iter());
    assert_eq!(used, ["gh"]);
    let auth = h
        .get("authorization")
        .map(|v| v.as_bytes().to_vec())
        .unwrap_or_default();
    let decoded = b64.decode(&auth[6..]).unwrap_or_default();
    assert_eq!(decoded, b"x-access-token:ghp_realvalue");
    let get = |h: &hyper::HeaderMap, n: &str| h.get(n).map(|v| v.as_bytes().to_vec());
    assert_eq!(
        get(&h, "private-token"),
        Some(b"token ghp_realvalue".to_vec())
    );
    // The other credential's sentinel is not laundered through this host, and a header that
    // is not a credential's (one a server might echo) keeps its sentinel.
    assert_eq!(get(&h, "x-api-key"), Some(b"SENTINELgl02".to_vec()));
    assert_eq!(get(&h, "x-echo"), Some(b"SENTINELgh01".to_vec()));
    // At a host of neither, or another port of the host, nothing changes.
    for (host, port) in [("example.com", 443), ("github.com", 8443)] {
        let mut h = headers(&[("authorization", "token SENTINELgh01")]);
        assert!(unmask_headers(&mut h, host, port, all.iter()).is_empty());
        assert_eq!(
            get(&h, "authorization"),
            Some(b"token SENTINELgh01".to_vec())
        );
    }
}

#[test]
fn echoes_in_other_encodings_are_masked_too() {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let r = route(header("x-api-key", "{}"), "https://a.test");
    for prefix in ["", "u:", "ab:"] {
        let basic = b64.encode(format!("{prefix}real value/+"));
        let mut s = Scrubber::of([&r.secret], true);
        let mut out = s.push_slice(basic.as_bytes());
        out.extend_from_slice(&s.finish());
        let back = b64.decode(&out).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&back).contains("real value"),
            "{prefix}: {}",
            String::from_utf8_lossy(&out)
        );
    }
    let mut s = Scrubber::new(&r);
    assert_eq!(
        s.push_slice(b"q=real%20value%2f%2b"),
        b"q=XXXXXXXXXXXXXXXXXX"
    );
}

/// What the scrubber passes on, chunk by chunk, for `chunks` then the end of the body.
fn passed(s: &mut Scrubber, chunks: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for c in chunks {
        let (a, b) = s.push(bytes::Bytes::copy_from_slice(c));
        out.push(a.to_vec());
        out.push(b.to_vec());
    }
    out.push(s.finish());
    out
}

#[test]
fn what_is_passed_on_does_not_tell_a_guess_of_the_value() {
    // The sandbox can make an upstream echo text it chose. Whether that text starts the real
    // value must change nothing it sees: not the bytes, not how they are cut, not when they
    // come. A whole value is masked.
    let r = route(header("x-api-key", "{}"), "https://a.test");
    let secret = b"real value/+";
    let padding = vec![b'.'; 300];
    for k in 1..secret.len() {
        let right = &secret[..k];
        let wrong: Vec<u8> = right.iter().map(|_| b'q').collect();
        for (at_end, mid) in [(true, &b""[..]), (false, &b" more"[..])] {
            let shapes = |guess: &[u8]| {
                let mut s = Scrubber::new(&r);
                let mut first = padding.clone();
                first.extend_from_slice(b"echo: ");
                first.extend_from_slice(guess);
                let chunks: Vec<&[u8]> = if at_end {
                    vec![&first]
                } else {
                    vec![&first, mid, &padding]
                };
                passed(&mut s, &chunks)
            };
            let (a, b) = (shapes(right), shapes(&wrong));
            let lens = |v: &Vec<Vec<u8>>| v.iter().map(Vec::len).collect::<Vec<_>>();
            assert_eq!(
                lens(&a),
                lens(&b),
                "prefix of {k} bytes, at the end: {at_end}"
            );
            assert!(
                a.concat().windows(k).any(|w| w == right),
                "passed on as it is"
            );
        }
    }
    // Control: the whole value is masked.
    let mut s = Scrubber::new(&r);
    let out = passed(&mut s, &[b"echo: real va", b"lue/+ end"]).concat();
    assert_eq!(out, b"echo: XXXXXXXXXXXX end");
}

#[test]
fn a_clean_chunk_is_passed_on_without_holding_what_ends_in_a_break() {
    let r = route(header("x-api-key", "{}"), "https://a.test");
    let mut s = Scrubber::new(&r);
    assert_eq!(s.cap(), 256);
    let big = vec![b'a'; 4096];
    let (a, b) = s.push(bytes::Bytes::from(big.clone()));
    assert!(a.is_empty());
    assert_eq!(
        b.len(),
        4096 - 256,
        "the last cap bytes wait for the next chunk"
    );
    let mut line = big.clone();
    line.push(b'\n');
    let (a, b) = s.push(bytes::Bytes::from(line));
    assert_eq!(
        (a.len(), b.len()),
        (256, 4097),
        "released, then a line passed whole"
    );
    assert!(!s.holds());
}

/// Median nanoseconds per call of `f(candidate)` over interleaved batches.
fn median_ns(f: &dyn Fn(&[u8]) -> bool, candidates: &[&[u8]]) -> Vec<f64> {
    const BATCH: u32 = 2_000;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
    for _ in 0..150 {
        for (i, c) in candidates.iter().enumerate() {
            let start = std::time::Instant::now();
            for _ in 0..BATCH {
                std::hint::black_box(f(std::hint::black_box(c)));
            }
            times[i].push(start.elapsed().as_nanos() as f64 / f64::from(BATCH));
        }
    }
    times
        .into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect()
}

/// The stand-in's comparison takes as long whether a guess is right up to its last byte or
/// wrong from its first: a guess cannot be found byte by byte. The control is a comparison
/// that stops at the first differing byte, measured the same way, which does show it.
#[test]
fn the_comparison_does_not_tell_how_much_of_a_guess_is_right() {
    let token = Token::from_random([0x5a; 32]);
    let right = token.as_str().as_bytes().to_vec();
    let mut late = right.clone();
    if let Some(last) = late.last_mut() {
        *last ^= 1;
    }
    let mut early = right.clone();
    early[0] ^= 1;
    let constant = |c: &[u8]| token.matches(c);
    let t = median_ns(&constant, &[&late, &early]);
    let ratio = t[0] / t[1];
    assert!(
        (0.75..1.33).contains(&ratio),
        "a guess right up to its last byte takes {:.1} ns, one wrong from its first {:.1} ns",
        t[0],
        t[1]
    );
    // Control: an early-exit comparison, measured the same way, tells them apart.
    let leaky = |c: &[u8]| {
        let own = token.as_str().as_bytes();
        own.len() == c.len() && own.iter().zip(c).all(|(a, b)| std::hint::black_box(a == b))
    };
    let t = median_ns(&leaky, &[&late, &early]);
    assert!(t[0] > 2.0 * t[1], "the control must show the leak: {t:?}");
}

#[test]
fn masked_deny_paths_hold_below_every_spelling_of_the_api_path() {
    let m = Masked {
        api_prefix: "/api/v4".into(),
        deny_paths: vec![
            "/user/personal_access_tokens".into(),
            "/projects/*/hooks".into(),
        ],
        ..masked("gl", "gitlab.com", "SENTINELgl02", "glpat-realval")
    };
    for p in [
        "/api/v4/user/personal_access_tokens",
        "//api/v4/user/personal_access_tokens",
        "/%61pi/v4/user/personal_access_tokens",
        "/api%2Fv4/user/personal_access_tokens",
        "/API/v4/user/personal_access_tokens",
        "//api//v4/projects/1/hooks",
        "/api/v4/projects/group%2Fproj/hooks",
        "/user/personal_access_tokens",
        "/api/v4/user/personal_access_tokens.json",
        "/api/v4/projects/1/hooks.json",
    ] {
        assert!(m.denied(p).is_some(), "{p}");
    }
    for p in [
        "/api/v4/user",
        "/api/v4/projects/1/issues",
        "/api/v5/user/personal_access_tokens",
    ] {
        assert_eq!(m.denied(p), None, "{p}");
    }
}

fn secret(value: &str) -> Secret {
    #[allow(clippy::unwrap_used)]
    Secret::new(Zeroizing::new(value.to_owned())).unwrap()
}

#[test]
fn the_spellings_upstreams_echo_a_value_in_are_masked() {
    let value = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY+a";
    for spelled in [
        value.to_owned(),
        value.replace('/', "%2F").replace('+', "%2B"),
        value.replace('/', "%2f").replace('+', "%2b"),
        value.replace('/', "\\/"),
        value.replace('/', "\\u002F").replace('+', "\\u002B"),
        value.replace('/', "\\u002f").replace('+', "\\u002b"),
    ] {
        let mut s = Scrubber::of([&secret(value)], false);
        let body = format!("k={spelled} end");
        let mut out = s.push_slice(body.as_bytes());
        out.extend_from_slice(&s.finish());
        assert_eq!(
            String::from_utf8_lossy(&out),
            format!("k={} end", "X".repeat(spelled.len())),
            "{spelled}"
        );
    }
}

#[test]
fn a_basic_echo_keeps_no_edge_of_the_value_whatever_surrounds_it_or_where_it_is_cut() {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let value = "ghp_EDGEtestVALUE0123456789xyzQRS";
    let (head, tail) = (&value[..2], &value[value.len() - 3..]);
    for user in ["", "a", "ab"] {
        let enc = b64.encode(format!("{user}:{value}zz"));
        for cut in 0..=enc.len() {
            let mut s = Scrubber::of([&secret(value)], true);
            let mut out = s.push_slice(&enc.as_bytes()[..cut]);
            out.extend_from_slice(&s.push_slice(&enc.as_bytes()[cut..]));
            out.extend_from_slice(&s.finish());
            assert_eq!(out.len(), enc.len());
            let back = b64.decode(&out).unwrap_or_default();
            let back = String::from_utf8_lossy(&back);
            assert!(
                !back.contains(head) && !back.contains(tail),
                "user {user:?}, cut at {cut}: {back:?} from {}",
                String::from_utf8_lossy(&out)
            );
        }
    }
    // Control: text around a value that is not base64 is left alone.
    let mut s = Scrubber::of([&secret(value)], true);
    let enc = b64.encode(value);
    let body = format!("a: {} ;b", &enc[..enc.len() - 4]);
    let mut out = s.push_slice(body.as_bytes());
    out.extend_from_slice(&s.finish());
    assert!(
        out.starts_with(b"a: X") && out.ends_with(b"X ;b"),
        "{out:?}"
    );
}

#[test]
fn an_ipv6_host_is_served_with_or_without_brackets() {
    let m = masked("v6", "[::1]", "SENTINELv6xx", "realvalue-v6-0123");
    assert!(m.serves("::1", 443) && m.serves("[::1]", 443));
    assert!(!m.serves("::1", 8443) && !m.serves("::2", 443));
}

#[test]
fn a_header_name_holding_the_value_is_found_in_any_case() {
    let s = Scrubber::of([&secret("ghp_NameCaseVALUE0123456789")], true);
    assert!(s.in_name(b"x-ghp_namecasevalue0123456789-y"));
    assert!(!s.in_name(b"x-ghp_namecasevalue012345678-y"));
}
