#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use super::*;
use crate::{resolve, Overrides};

fn ctx() -> SettingsContext {
    SettingsContext {
        cwd: Some(PathBuf::from("/work/repo")),
        home: Some(PathBuf::from("/home/me")),
        file: Some(PathBuf::from("/etc/srt.json")),
    }
}

fn parse(text: &str) -> PolicyFile {
    parse_settings_json(text, "s.json", &ctx()).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn err(text: &str) -> PolicyError {
    parse_settings_json(text, "s.json", &ctx()).expect_err(text)
}

fn at(e: &PolicyError) -> (usize, usize) {
    match e {
        PolicyError::ParseFile {
            location: Some(l), ..
        } => (l.line, l.column),
        other => panic!("not located: {other}"),
    }
}

/// An srt file holding `network` and `filesystem` sections.
fn srt(network: &str, filesystem: &str) -> String {
    format!("{{\"network\": {{{network}}}, \"filesystem\": {{{filesystem}}}}}")
}

/// srt's README example, with the keys its schema requires and a few optional ones.
const SRT_EXAMPLE: &str = r#"{
  "network": {
    "allowedDomains": ["github.com", "*.github.com", "lfs.github.com", "api.github.com",
                       "npmjs.org", "*.npmjs.org", "registry.npmjs.org:443"],
    "deniedDomains": ["malicious.com"],
    "allowUnixSockets": [],
    "allowLocalBinding": false
  },
  "filesystem": {
    "denyRead": ["~/.ssh", "~/.config/gcloud/**"],
    "allowRead": ["~/.ssh/known_hosts"],
    "allowWrite": [".", "src/", "~/.cache/**", "/tmp"],
    "denyWrite": ["~/.bashrc", ".env", "secrets/*.key"]
  },
  "ignoreViolations": {"*": ["/usr/bin"], "git push": ["/usr/bin/nc"]},
  "enableWeakerNestedSandbox": false,
  "ripgrep": {"command": "rg", "args": ["--hidden"]},
  "mandatoryDenySearchDepth": 3
}"#;

#[test]
fn realistic_srt_file() {
    let file = parse(SRT_EXAMPLE);
    assert_eq!(file.profile.as_deref(), Some("read-only"));
    let net = &file.network;
    assert_eq!(net.mode, Some(NetworkMode::Proxy));
    assert_eq!(
        net.allow_domains,
        [
            "github.com",
            "*.github.com",
            "lfs.github.com",
            "api.github.com",
            "npmjs.org",
            "*.npmjs.org",
            "registry.npmjs.org:443"
        ]
    );
    assert_eq!(net.deny_domains, ["malicious.com"]);
    assert!(net.allow_hosts.is_empty());
    let fs = &file.filesystem;
    assert_eq!(fs.deny_read, ["~/.ssh", "~/.config/gcloud/**"]);
    assert_eq!(fs.allow_read, ["~/.ssh/known_hosts"]);
    assert_eq!(
        fs.allow_write,
        ["/work/repo", "/work/repo/src", "~/.cache"],
        "`/tmp` is the run's own, private and writable: no grant"
    );
    assert_eq!(
        fs.deny_write,
        ["~/.bashrc", "/work/repo/.env", "/work/repo/secrets/*.key"]
    );
    assert_eq!(fs.read_scope, None);
    // The result resolves into a policy like any other file.
    let policy = resolve(Some(file), &Overrides::default()).unwrap();
    assert_eq!(policy.profile, "read-only");
    assert_eq!(policy.network.mode, NetworkMode::Proxy);
    assert!(policy
        .filesystem
        .allow_write
        .contains(&"/work/repo".to_owned()));
}

#[test]
fn allowed_domains_set_the_network_mode() {
    let none = parse(&srt(r#""allowedDomains": [], "deniedDomains": []"#, ""));
    assert_eq!(none.network.mode, Some(NetworkMode::None));
    let absent = parse(&srt("", r#""denyRead": []"#));
    assert_eq!(absent.network.mode, Some(NetworkMode::None));
    let one = parse(&srt(r#""allowedDomains": ["allowed.test"]"#, ""));
    assert_eq!(one.network.mode, Some(NetworkMode::Proxy));
    assert_eq!(one.network.allow_domains, ["allowed.test"]);
}

#[test]
fn ip_literals_and_localhost_go_to_allow_hosts() {
    let file = parse(&srt(
        r#""allowedDomains": ["127.0.0.1", "10.0.0.5:5432", "[::1]", "[2001:db8::1]:443", "localhost", "LOCALHOST:3000", "db.test:5432"]"#,
        "",
    ));
    assert_eq!(
        file.network.allow_hosts,
        [
            "127.0.0.1",
            "10.0.0.5:5432",
            "[::1]",
            "[2001:db8::1]:443",
            "localhost",
            "LOCALHOST:3000"
        ]
    );
    assert_eq!(file.network.allow_domains, ["db.test:5432"]);
    assert_eq!(file.network.mode, Some(NetworkMode::Proxy));
    // Only hosts: still proxy.
    let hosts = parse(&srt(r#""allowedDomains": ["127.0.0.1:8080"]"#, ""));
    assert_eq!(hosts.network.mode, Some(NetworkMode::Proxy));
}

#[test]
fn denied_domains() {
    let file = parse(&srt(
        r#""allowedDomains": ["x.test"], "deniedDomains": ["evil.test", "*.evil.test:22", "*.com"]"#,
        "",
    ));
    assert_eq!(
        file.network.deny_domains,
        ["evil.test", "*.evil.test:22", "*.com"]
    );
    // `*` denies everything: no network at all, whatever is allowed.
    let all = parse(&srt(
        r#""allowedDomains": ["x.test", "127.0.0.1"], "deniedDomains": ["*"]"#,
        "",
    ));
    assert_eq!(all.network.mode, Some(NetworkMode::None));
    assert!(all.network.allow_domains.is_empty() && all.network.allow_hosts.is_empty());

    let e = err(&srt(r#""deniedDomains": ["ok.test", "*:22"]"#, ""));
    assert!(
        e.to_string()
            .contains("`*:22` in `network.deniedDomains[1]` has no stockade equivalent"),
        "{e}"
    );
    assert_eq!(at(&e), (1, 43));
    let e = err(&srt(r#""deniedDomains": ["169.254.169.254"]"#, ""));
    assert!(e.to_string().contains("network.deniedDomains[0]"), "{e}");
    assert!(e
        .hint()
        .unwrap()
        .contains("stockade refuses every IP address"));
}

#[test]
fn allowed_domain_opening_a_public_suffix_is_an_error_naming_the_entry() {
    // srt accepts `*.co.uk` (two labels after `*.`); stockade does not open a public suffix.
    let e = err("{\"network\": {\n  \"allowedDomains\": [\"ok.test\", \"*.co.uk\"]}}");
    assert_eq!(
        e.to_string(),
        "s.json: line 2, column 33: invalid entry `*.co.uk` in \
         `network.allowedDomains[1]`: it opens the whole public suffix `co.uk`"
    );
    assert_eq!(e.code(), "E_POLICY_INVALID");
    assert!(e.hint().is_some());
    let e = err(&srt(r#""allowedDomains": ["https://x.test/path"]"#, ""));
    assert!(e.to_string().contains("network.allowedDomains[0]"), "{e}");
    let e = err(&srt(r#""allowedDomains": ["*"]"#, ""));
    assert!(e.to_string().contains("`*` alone"), "{e}");
}

#[test]
fn paths_are_resolved_as_srt_resolves_them() {
    let file = parse(&srt(
        "",
        r#""denyRead": ["~", "~/x/", "/abs/dir/", "rel", "./a/../b", "../up", "*.pem", "a{1,2}"],
            "allowWrite": ["build/**", "/", "/data/**"]"#,
    ));
    assert_eq!(
        file.filesystem.deny_read,
        [
            "~",
            "~/x",
            "/abs/dir",
            "/work/repo/rel",
            "/work/repo/b",
            "/work/up",
            "/work/repo/*.pem",
            "/work/repo/a[{]1,2[}]"
        ]
    );
    assert_eq!(
        file.filesystem.allow_write,
        ["/work/repo/build", "/", "/data"]
    );
}

#[test]
fn glob_characters_in_the_current_directory_match_themselves() {
    let ctx = SettingsContext {
        cwd: Some(PathBuf::from("/w/[x]*")),
        ..ctx()
    };
    let file = parse_settings_json(&srt("", r#""denyRead": ["s*", "."]"#), "s.json", &ctx).unwrap();
    assert_eq!(
        file.filesystem.deny_read,
        ["/w/[[]x[]][*]/s*", "/w/[[]x[]][*]"]
    );
}

#[test]
fn unusable_paths_are_errors_naming_the_key() {
    for (fs, key, needle) in [
        (
            r#""allowWrite": ["src/*"]"#,
            "filesystem.allowWrite[0]",
            "cannot be a glob",
        ),
        (
            r#""denyRead": [""]"#,
            "filesystem.denyRead[0]",
            "the path is empty",
        ),
        (
            r#""denyRead": ["$HOME/.aws"]"#,
            "filesystem.denyRead[0]",
            "variables",
        ),
        (
            r#""denyWrite": ["~root/x"]"#,
            "filesystem.denyWrite[0]",
            "`~user`",
        ),
        (
            r#""allowRead": ["/a", "/b\u0000"]"#,
            "filesystem.allowRead[1]",
            "NUL",
        ),
    ] {
        let e = err(&srt("", fs));
        let msg = e.to_string();
        assert!(msg.contains(&format!("in `{key}`")), "{msg}");
        assert!(msg.contains(needle), "{msg}");
        assert!(e.hint().is_some());
    }
    let no_cwd = SettingsContext { cwd: None, ..ctx() };
    let e = parse_settings_json(&srt("", r#""denyRead": ["rel"]"#), "s.json", &no_cwd).unwrap_err();
    assert!(e.to_string().contains("current directory"), "{e}");
}

#[test]
fn keys_without_equivalent_are_errors_naming_the_key() {
    for (doc, key) in [
        (srt(r#""allowUnixSockets": ["/var/run/docker.sock"]"#, ""), "network.allowUnixSockets"),
        (srt(r#""allowAllUnixSockets": true"#, ""), "network.allowAllUnixSockets"),
        (srt(r#""allowLocalBinding": true"#, ""), "network.allowLocalBinding"),
        (srt(r#""allowMachLookup": ["com.apple.x"]"#, ""), "network.allowMachLookup"),
        (srt(r#""httpProxyPort": 8080"#, ""), "network.httpProxyPort"),
        (srt(r#""socksProxyPort": 1080"#, ""), "network.socksProxyPort"),
        (srt(r#""mitmProxy": {"socketPath": "/s", "domains": ["a.test"]}"#, ""), "network.mitmProxy"),
        (srt(r#""parentProxy": {"http": "http://p:3128"}"#, ""), "network.parentProxy"),
        (srt(r#""tlsTerminate": {}"#, ""), "network.tlsTerminate"),
        (srt(r#""deniedResolvedAddresses": ["10.0.0.0/8"]"#, ""), "network.deniedResolvedAddresses"),
        (srt("", r#""disabled": true"#), "filesystem.disabled"),
        (srt("", r#""allowGitConfig": true"#), "filesystem.allowGitConfig"),
        (r#"{"network": {}, "enableWeakerNestedSandbox": true}"#.into(), "enableWeakerNestedSandbox"),
        (r#"{"network": {}, "enableWeakerNetworkIsolation": true}"#.into(), "enableWeakerNetworkIsolation"),
        (r#"{"network": {}, "allowAppleEvents": true}"#.into(), "allowAppleEvents"),
        (r#"{"network": {}, "credentials": {"files": [{"path": "~/.npmrc", "mode": "mask"}]}}"#.into(), "credentials.files[0].mode"),
        (r#"{"network": {}, "credentials": {"envVars": [{"name": "GH_TOKEN", "mode": "mask"}]}}"#.into(), "credentials.envVars[0].mode"),
        (r#"{"network": {}, "credentials": {"envVars": [{"name": "PATH", "mode": "deny"}]}}"#.into(), "credentials.envVars[0]"),
        (r#"{"network": {}, "credentials": {"awsPairs": [{"accessKeyIdVar": "A", "secretAccessKeyVar": "B"}]}}"#.into(), "credentials.awsPairs"),
    ] {
        let e = err(&doc);
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("`{key}` has no stockade equivalent: ")),
            "{key}: {msg}"
        );
        assert!(e.hint().is_some(), "{key}");
        assert!(
            matches!(&e, PolicyError::ParseFile { location: Some(_), .. }),
            "{key} not located: {msg}"
        );
    }
}

#[test]
fn values_that_ask_for_nothing_more_and_srt_only_keys_are_accepted() {
    let file = parse(
        r#"{
  "$schema": "https://example.test/srt.json",
  "network": {
    "allowedDomains": ["a.test"], "deniedDomains": [], "allowUnixSockets": [],
    "allowAllUnixSockets": false, "allowLocalBinding": false, "allowMachLookup": [],
    "strictAllowlist": true, "deniedDomainReasons": {"a.test:22": "no ssh"},
    "deniedResolvedAddresses": []
  },
  "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": [], "disabled": false, "allowGitConfig": false},
  "credentials": {
    "files": [{"path": "~/.npmrc", "mode": "deny", "extract": "token=(\\S+)"}],
    "envVars": [{"name": "GITHUB_TOKEN", "mode": "deny"}, {"name": "MY_VAR", "mode": "deny"}],
    "allowPlaintextInject": false
  },
  "ignoreViolations": {},
  "enableWeakerNestedSandbox": false, "enableWeakerNetworkIsolation": false, "allowAppleEvents": false,
  "allowPty": true, "mandatoryDenySearchDepth": 5,
  "ripgrep": {"command": "/usr/bin/rg", "argv0": "rg"},
  "seccomp": {"applyPath": "/opt/apply-seccomp"},
  "bwrapPath": "/usr/bin/bwrap", "socatPath": "/usr/bin/socat", "javaAgentJarPath": "/opt/a.jar",
  "windows": {"sandboxUser": "x"},
  "git": {"safeDirectories": ["/work/repo"]}
}"#,
    );
    assert_eq!(file.network.allow_domains, ["a.test"]);
    // A credential file with mode `deny` is unreadable, like `denyRead`.
    assert_eq!(file.filesystem.deny_read, ["~/.npmrc"]);
}

#[test]
fn unknown_keys_are_errors_naming_the_path() {
    let e = err("{\"network\": {\"allowedDomains\": []},\n \"filesystem\": {\"denyReads\": []}}");
    assert_eq!(
        e.to_string(),
        "s.json: line 2, column 17: unknown key `filesystem.denyReads`"
    );
    assert!(e.hint().unwrap().contains("`denyRead`"), "{:?}", e.hint());
    let e = err(r#"{"network": {}, "sandboxMode": 1}"#);
    assert!(e.to_string().ends_with("unknown key `sandboxMode`"), "{e}");
    let e = err(r#"{"network": {}, "ripgrep": {"command": "rg", "flags": []}}"#);
    assert!(
        e.to_string().ends_with("unknown key `ripgrep.flags`"),
        "{e}"
    );
    let e = err(r#"{"network": {}, "credentials": {"files": [{"path": "/x", "mode": "hide"}]}}"#);
    assert!(e.to_string().contains("credentials.files[0].mode"), "{e}");
    let e = err(r#"{"network": {"allowedDomains": "a.test"}}"#);
    assert!(
        e.to_string()
            .contains("expected a sequence, in `network.allowedDomains`"),
        "{e}"
    );
    let e = err(r#"{"network": {}, "ripgrep": {}}"#);
    assert!(e.to_string().contains("missing field `command`"), "{e}");
}

#[test]
fn duplicate_keys_are_errors_naming_the_path() {
    let e = err(r#"{"network":{"allowedDomains":[],"allowedDomains":["x.com"]}}"#);
    assert_eq!(
        e.to_string(),
        "s.json: line 1, column 33: duplicate key `network.allowedDomains`"
    );
    let e = err("{\"network\": {},\n\"network\": {\"allowedDomains\": [\"x.com\"]}}");
    assert_eq!(
        e.to_string(),
        "s.json: line 2, column 1: duplicate key `network`"
    );
    let e = err(r#"{"network": {}, "ignoreViolations": {"*": [], "*": ["/x"]}}"#);
    assert!(
        e.to_string().contains("duplicate key `ignoreViolations.*`"),
        "{e}"
    );
    let e =
        err(r#"{"sandbox": {"network": {"allowedDomains": ["a.test"], "allowedDomains": []}}}"#);
    assert!(
        e.to_string()
            .contains("duplicate key `sandbox.network.allowedDomains`"),
        "{e}"
    );
}

#[test]
fn documents_that_are_neither_format() {
    let e = err("{}");
    assert!(
        e.to_string().contains("not a policy stockade can read"),
        "{e}"
    );
    let e = err(r#"{"model": "opus"}"#);
    assert!(
        e.to_string().contains("not a policy stockade can read"),
        "{e}"
    );
    let e = err(r#"{"network": {}, "sandbox": {}}"#);
    assert!(e.to_string().contains("mixes srt settings"), "{e}");
    let e = err("[1]");
    assert!(e.to_string().contains("not a policy"), "{e}");
    let e = err("{\"network\": {}");
    assert_eq!(at(&e).0, 1);
}

/// A Claude Code `settings.json` as people have them: Claude Code's own settings, permission
/// rules of every kind, and a `sandbox` section.
const CLAUDE_EXAMPLE: &str = r#"{
  "$schema": "https://json.schemastore.org/claude-code-settings.json",
  "model": "opus",
  "env": {"FOO": "bar"},
  "includeCoAuthoredBy": false,
  "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo"}]}]},
  "statusLine": {"type": "command", "command": "~/.claude/statusline.sh"},
  "enabledPlugins": {"x@y": true},
  "permissions": {
    "allow": ["Bash(npm run test:*)", "Read(~/.zshrc)", "Edit(./docs/**)", "Edit(*.md)",
              "Edit(//var/tmp/out/**)", "WebFetch(domain:docs.rs)", "WebFetch", "mcp__github"],
    "deny": ["Read(./.env)", "Read(*.pem)", "Read(//etc/secret/**)", "Read(~/.aws/**)",
             "Edit(./.github/workflows/**)", "Bash(curl:*)", "WebFetch(domain:evil.test)"],
    "ask": ["Bash(git push:*)", "Read(./private)"],
    "defaultMode": "acceptEdits",
    "additionalDirectories": ["../other"],
    "disableBypassPermissionsMode": "disable"
  },
  "sandbox": {
    "enabled": true,
    "autoAllowBashIfSandboxed": true,
    "allowUnsandboxedCommands": false,
    "excludedCommands": ["docker"],
    "network": {"allowedDomains": ["github.com", "*.npmjs.org"], "allowLocalBinding": false},
    "filesystem": {"denyRead": ["~/.kube"], "allowWrite": ["~/.cache/pip", "//opt/cache"], "denyWrite": ["build/keep"]},
    "enableWeakerNestedSandbox": false
  }
}"#;

fn claude_ctx(file: &str) -> SettingsContext {
    SettingsContext {
        file: Some(PathBuf::from(file)),
        ..ctx()
    }
}

#[test]
fn realistic_claude_code_settings() {
    let file = parse_settings_json(
        CLAUDE_EXAMPLE,
        "settings.json",
        &claude_ctx("/work/repo/.claude/settings.json"),
    )
    .unwrap();
    assert_eq!(file.profile.as_deref(), Some("workspace-write"));
    let net = &file.network;
    assert_eq!(net.mode, Some(NetworkMode::Proxy));
    assert_eq!(net.allow_domains, ["github.com", "*.npmjs.org", "docs.rs"]);
    assert_eq!(net.deny_domains, ["evil.test"]);
    let fs = &file.filesystem;
    assert_eq!(
        fs.deny_read,
        [
            "~/.kube",
            "/work/repo/.env",
            "/work/repo/**/*.pem",
            "/etc/secret/**",
            "~/.aws/**"
        ]
    );
    // `Edit(*.md)` names no directory: like srt on Linux, it grants no write.
    assert_eq!(
        fs.allow_write,
        [
            "~/.cache/pip",
            "/opt/cache",
            "/work/repo/docs",
            "/var/tmp/out"
        ]
    );
    // A relative sandbox path is relative to the project root (the parent of `.claude`).
    assert_eq!(
        fs.deny_write,
        ["/work/repo/build/keep", "/work/repo/.github/workflows/**"]
    );
    assert!(fs.allow_read.is_empty());
    let policy = resolve(Some(file), &Overrides::default()).unwrap();
    assert_eq!(policy.filesystem.allow_write[0], "$WORKSPACE");
}

#[test]
fn claude_settings_root_decides_relative_sandbox_paths() {
    let text = r#"{"sandbox": {"filesystem": {"allowWrite": ["out"]}}}"#;
    let project =
        parse_settings_json(text, "s", &claude_ctx("/p/.claude/settings.local.json")).unwrap();
    assert_eq!(project.filesystem.allow_write, ["/p/out"]);
    let user =
        parse_settings_json(text, "s", &claude_ctx("/home/me/.claude/settings.json")).unwrap();
    assert_eq!(user.filesystem.allow_write, ["/home/me/.claude/out"]);
    let e = parse_settings_json(text, "s", &claude_ctx("/etc/claude.json")).unwrap_err();
    assert!(
        e.to_string().contains("`sandbox.filesystem.allowWrite[0]`"),
        "{e}"
    );
    assert!(e.to_string().contains("project root"), "{e}");
}

#[test]
fn claude_network_without_allowed_domains_is_none() {
    let file = parse(r#"{"permissions": {"allow": ["Bash(ls)"]}}"#);
    assert_eq!(file.network.mode, Some(NetworkMode::None));
    let file = parse(r#"{"permissions": {"allow": ["WebFetch(domain:allowed.test)"]}}"#);
    assert_eq!(file.network.mode, Some(NetworkMode::Proxy));
    assert_eq!(file.network.allow_domains, ["allowed.test"]);
    let e = err(r#"{"permissions": {"allow": ["WebFetch(domain:*.github.io)"]}}"#);
    assert!(e.to_string().contains("permissions.allow[0]"), "{e}");
}

#[test]
fn claude_rules_relative_to_the_settings_file_are_errors() {
    let e = err(r#"{"permissions": {"deny": ["Read(/src/**)"]}}"#);
    assert!(
        e.to_string()
            .contains("cannot use `Read(/src/**)` in `permissions.deny[0]`"),
        "{e}"
    );
    assert!(e.hint().unwrap().contains("//absolute/path"));
    // The same rule in `allow` is Claude Code's own business: no error.
    parse(r#"{"permissions": {"allow": ["Read(/src/**)"]}}"#);
}

#[test]
fn claude_keys_without_equivalent() {
    for (doc, key) in [
        (
            r#"{"sandbox": {"allowNestedUserNamespaces": true}}"#,
            "sandbox.allowNestedUserNamespaces",
        ),
        (
            r#"{"sandbox": {"enableWeakerNestedSandbox": true}}"#,
            "sandbox.enableWeakerNestedSandbox",
        ),
        (
            r#"{"sandbox": {"network": {"allowUnixSockets": ["/x.sock"]}}}"#,
            "sandbox.network.allowUnixSockets",
        ),
        (
            r#"{"sandbox": {"network": {"httpProxyPort": 8080}}}"#,
            "sandbox.network.httpProxyPort",
        ),
        (
            r#"{"sandbox": {"filesystem": {"disabled": true}}}"#,
            "sandbox.filesystem.disabled",
        ),
        (
            r#"{"permissions": {"blockReadsOutsideWorkingDirectories": true}}"#,
            "permissions.blockReadsOutsideWorkingDirectories",
        ),
    ] {
        let e = err(doc);
        assert!(
            e.to_string()
                .contains(&format!("`{key}` has no stockade equivalent")),
            "{key}: {e}"
        );
    }
}

#[test]
fn claude_unknown_keys() {
    let e = err(r#"{"sandbox": {}, "sandbx": {"enabled": true}}"#);
    assert!(
        e.to_string()
            .ends_with("unknown key `sandbx`: not a Claude Code setting"),
        "{e}"
    );
    assert_eq!(at(&e), (1, 17));
    let e = err(r#"{"sandbox": {"network": {"allowedDomain": []}}}"#);
    assert!(
        e.to_string()
            .ends_with("unknown key `sandbox.network.allowedDomain`"),
        "{e}"
    );
    let e = err(r#"{"permissions": {"denny": []}}"#);
    assert!(
        e.to_string().ends_with("unknown key `permissions.denny`"),
        "{e}"
    );
}

#[test]
fn read_policy_file_tells_json_from_toml() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("srt-settings.json");
    std::fs::write(
        &json,
        r#"{"network": {"allowedDomains": ["allowed.test"]}}"#,
    )
    .unwrap();
    let file = crate::read_policy_file(&json).unwrap();
    assert_eq!(file.network.allow_domains, ["allowed.test"]);
    // By content, whatever the name.
    let settings = dir.path().join("settings");
    std::fs::write(
        &settings,
        "\n  {\"network\": {\"allowedDomains\": [], \"x\": 1}}",
    )
    .unwrap();
    let e = crate::read_policy_file(&settings).unwrap_err();
    assert!(e.to_string().contains("unknown key `network.x`"), "{e}");
    assert!(
        e.to_string().starts_with(&settings.display().to_string()),
        "{e}"
    );
    // TOML stays TOML.
    let toml = dir.path().join("stockade.toml");
    std::fs::write(
        &toml,
        "[network]\nmode = \"proxy\"\nallow_domains = [\"a.test\"]\n",
    )
    .unwrap();
    assert_eq!(
        crate::read_policy_file(&toml)
            .unwrap()
            .network
            .allow_domains,
        ["a.test"]
    );
    // A relative path in an srt file is resolved against the current directory.
    std::fs::write(&json, r#"{"filesystem": {"denyRead": ["secret.txt"]}}"#).unwrap();
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(
        crate::read_policy_file(&json).unwrap().filesystem.deny_read,
        [format!(
            "{}/secret.txt",
            escape_literal(cwd.to_str().unwrap())
        )]
    );
}

#[test]
fn is_json_by_name_or_content() {
    assert!(is_json(Path::new("x.JSON"), ""));
    assert!(is_json(Path::new("x"), "\u{feff} \n{"));
    assert!(!is_json(Path::new("x.toml"), "[network]"));
    assert!(!is_json(Path::new("x"), "# {"));
}

#[test]
fn allow_write_of_tmp_itself_maps_to_the_private_tmp() {
    // srt's README example grants `/tmp`; every stockade run has its own writable /tmp, and a
    // grant of the host's whole /tmp is refused before the run: the entry maps to nothing.
    for raw in ["/tmp", "/tmp/", "/tmp/**", "/dev/shm"] {
        let file = parse(&srt("", &format!(r#""allowWrite": [".", "{raw}"]"#)));
        assert_eq!(file.filesystem.allow_write, ["/work/repo"], "{raw}");
    }
    // Control: a directory below /tmp is a grant like any other.
    let file = parse(&srt("", r#""allowWrite": ["/tmp/build"]"#));
    assert_eq!(file.filesystem.allow_write, ["/tmp/build"]);
    // Claude Code's `Edit(//tmp)` allow rule, the same.
    let claude = parse_settings_json(
        r#"{"permissions": {"allow": ["Edit(//tmp)", "Edit(//tmp/build)"]}}"#,
        "s.json",
        &claude_ctx("/work/repo/.claude/settings.json"),
    )
    .unwrap();
    assert_eq!(claude.filesystem.allow_write, ["/tmp/build"]);
}
