use super::*;
use crate::model::Env;

fn patch(toml: &str) -> CredentialPatch {
    #[allow(clippy::unwrap_used)]
    toml::from_str(toml).unwrap()
}

#[test]
fn builtins_are_valid_and_default_to_their_variable() {
    for b in BUILTIN {
        let c = b.credential();
        assert_eq!(check(&c).map_err(|e| e.to_string()), Ok(()), "{}", b.name);
        assert_eq!(c.source, Source::Env(b.default_env.into()));
        assert!(c.route.token_env.contains(&b.default_env.to_string()));
    }
    let Ok(c) = CredentialPatch::default().credential("anthropic") else {
        panic!("a built-in without fields");
    };
    assert_eq!(c.route.upstream, "https://api.anthropic.com");
    assert_eq!(
        c.route.inject,
        Inject::Header {
            name: "x-api-key".into(),
            format: "{}".into()
        }
    );
}

#[test]
fn a_custom_route_needs_upstream_injection_token_env_and_source() {
    for (toml, key) in [
        (
            "header = \"x\"\ntoken_env = [\"K\"]\nsource = { env = \"K\" }",
            "upstream",
        ),
        (
            "upstream = \"https://a.test\"\ntoken_env = [\"K\"]\nsource = { env = \"K\" }",
            "header",
        ),
        (
            "upstream = \"https://a.test\"\nheader = \"x\"\nsource = { env = \"K\" }",
            "token_env",
        ),
        (
            "upstream = \"https://a.test\"\nheader = \"x\"\ntoken_env = [\"K\"]",
            "source",
        ),
    ] {
        let e = patch(toml).credential("mine").map_err(|e| e.to_string());
        assert!(
            e.as_ref()
                .is_err_and(|e| e.contains(&format!("credentials.mine.{key}"))),
            "{toml}: {e:?}"
        );
    }
    let c = patch(
        "upstream = \"https://llm.test:8443/v1/\"\nquery = \"key\"\ntoken_env = [\"K\"]\nsource = { command = [\"pass\", \"x\"] }",
    )
    .credential("mine");
    let Ok(c) = c else { panic!("{c:?}") };
    assert_eq!(
        c.route.inject,
        Inject::Query {
            param: "key".into()
        }
    );
    assert_eq!(
        c.source,
        Source::Command {
            argv: vec!["pass".into(), "x".into()],
            ttl: DEFAULT_COMMAND_TTL
        }
    );
}

#[test]
fn sources_are_exactly_one_kind() {
    for (src, ok) in [
        ("{ env = \"A\" }", true),
        ("{ file = \"~/.key\" }", true),
        ("{ file = \"rel/key\" }", false),
        ("{ keyring = { service = \"s\", account = \"a\" } }", true),
        ("{ command = [\"x\"], ttl = 5 }", true),
        ("{ command = [] }", false),
        ("{ command = [\"x\"], ttl = 0 }", false),
        ("{ env = \"A\", ttl = 5 }", false),
        ("{ env = \"A\", file = \"/k\" }", false),
        ("{}", false),
        ("{ env = \"A-B\" }", false),
    ] {
        let r = patch(&format!("source = {src}")).credential("anthropic");
        assert_eq!(r.is_ok(), ok, "{src}: {r:?}");
    }
    assert!(toml::from_str::<CredentialPatch>("source = { vault = \"x\" }").is_err());
    assert!(toml::from_str::<CredentialPatch>("upstrem = \"https://x\"").is_err());
}

#[test]
fn upstreams_are_https_with_a_host() {
    let ok = |u: &str| parse_upstream(u);
    assert_eq!(
        ok("https://API.Example.COM./v1/"),
        Ok(Upstream {
            host: "api.example.com".into(),
            port: 443,
            path: "/v1".into()
        })
    );
    assert_eq!(
        ok("https://[::1]:8443").map(|u| (u.host, u.port)),
        Ok(("[::1]".into(), 8443))
    );
    assert_eq!(
        ok("https://127.0.0.1:9").map(|u| (u.host, u.port)),
        Ok(("127.0.0.1".into(), 9))
    );
    for bad in [
        "http://api.example.com",
        "https://",
        "https://a.test:0",
        "https://a.test:x",
        "https://user@a.test",
        "https://a.test/v1?x=1",
        "https://a.test/#f",
        "https://a.test/../x",
        "https://a.test/%2E%2e/x",
        "https://::1/",
        "https://127.1/",
        "https://a test/",
        "https://a.test\\@b.test/",
    ] {
        assert!(ok(bad).is_err(), "{bad}");
    }
}

#[test]
fn headers_and_formats_are_checked() {
    for (h, f, good) in [
        ("authorization", "Bearer {}", true),
        ("x-api-key", "{}", true),
        ("x-api-key", "Bearer", false),
        ("x-api-key", "{}{}", false),
        ("x-api-key", "{}\r\nx: y", false),
        ("host", "{}", false),
        ("Transfer-Encoding", "{}", false),
        ("bad header", "{}", false),
    ] {
        let t = format!(
            "upstream = \"https://a.test\"\nheader = \"{h}\"\nformat = {f:?}\ntoken_env = [\"K\"]\nsource = {{ env = \"K\" }}"
        );
        assert_eq!(patch(&t).credential("x").is_ok(), good, "{h}: {f:?}");
    }
}

#[test]
fn flags_name_a_route_and_maybe_a_source() {
    let Ok(c) = parse_flag("openai", &[]) else {
        panic!()
    };
    assert_eq!(c.source, Source::Env("OPENAI_API_KEY".into()));
    let Ok(c) = parse_flag("openai=file:/run/key", &[]) else {
        panic!()
    };
    assert_eq!(c.source, Source::File("/run/key".into()));
    let Ok(c) = parse_flag("github=keyring:gh/me", &[]) else {
        panic!()
    };
    assert_eq!(
        c.source,
        Source::Keyring {
            service: "gh".into(),
            account: "me".into()
        }
    );
    for bad in [
        "nope",
        "openai=vault:x",
        "openai=file:rel",
        "openai=keyring:x",
        "Open",
    ] {
        let e = parse_flag(bad, &[]);
        assert!(e.is_err(), "{bad}");
    }
    let e = parse_flag("nope", &[]).map_err(|e| e.to_string());
    assert!(e.is_err_and(|e| e.contains("unknown route `nope`") && e.contains("anthropic")));
    // A route the file defines.
    let Ok(mine) = patch(
        "upstream = \"https://a.test\"\nheader = \"x\"\ntoken_env = [\"K\"]\nsource = { env = \"K\" }",
    )
    .credential("mine") else {
        panic!()
    };
    assert_eq!(
        parse_flag("mine", std::slice::from_ref(&mine)).ok(),
        Some(mine)
    );
}

#[test]
fn variables_are_claimed_once_and_never_also_passed() {
    let a = BUILTIN[0].credential();
    let env = Env::default();
    assert!(check_all(&[a.clone(), a.clone()], &env).is_err());
    let mut other = BUILTIN[1].credential();
    other.route.token_env = a.route.token_env.clone();
    assert!(check_all(&[a.clone(), other], &env).is_err());
    let passed = Env {
        passthrough: vec!["ANTHROPIC_API_KEY".into()],
        ..Env::default()
    };
    let e = check_all(std::slice::from_ref(&a), &passed).map_err(|e| e.to_string());
    assert!(e.is_err_and(|e| e.contains("--env")));
    let mut from_other = a.clone();
    from_other.source = Source::Env("MY_KEY".into());
    let passed = Env {
        passthrough: vec!["MY_KEY".into()],
        ..Env::default()
    };
    assert!(check_all(&[from_other], &passed).is_err());
    assert!(check_all(&[a], &env).is_ok());
}

#[test]
fn a_policy_file_defines_routes_and_credentials_imply_the_proxy() {
    let file = crate::parse_policy_file(
        "[credentials.anthropic]\nsource = { file = \"~/.anthropic\" }\n[credentials.llm]\nupstream = \"https://127.0.0.1:8443\"\nheader = \"authorization\"\nformat = \"Bearer {}\"\ntoken_env = [\"LLM_KEY\"]\nsource = { env = \"LLM_KEY\" }\n",
        "t.toml",
    );
    let Ok(file) = file else { panic!("{file:?}") };
    let names: Vec<_> = file.credentials.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["anthropic", "llm"]);
    let Ok(p) = crate::resolve(Some(file.clone()), &crate::Overrides::default()) else {
        panic!()
    };
    assert_eq!(p.network.mode, crate::NetworkMode::Proxy);
    // A flag changes a defined route's source.
    let flags = crate::Overrides {
        credentials: vec!["llm=env:OTHER".into(), "openai".into()],
        ..Default::default()
    };
    let Ok(p) = crate::resolve(Some(file.clone()), &flags) else {
        panic!()
    };
    assert_eq!(p.credentials.len(), 3);
    assert_eq!(p.credentials[1].source, Source::Env("OTHER".into()));
    let host = crate::Overrides {
        net: Some(crate::NetworkMode::Host),
        ..Default::default()
    };
    let e = crate::resolve(Some(file), &host).map_err(|e| e.to_string());
    assert!(e.is_err_and(|e| e.contains("--net proxy")));
    let bad = crate::parse_policy_file("[credentials.nope]\nsource = { env = \"X\" }\n", "t.toml")
        .map_err(|e| e.to_string());
    assert!(bad.is_err_and(|e| e.contains("line 1") && e.contains("not a built-in route")));
    let none = crate::resolve(None, &crate::Overrides::default());
    assert!(
        none.is_ok_and(|p| p.network.mode == crate::NetworkMode::None && p.credentials.is_empty())
    );
}
