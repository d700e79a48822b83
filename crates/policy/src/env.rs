//! Building a child's environment from scratch: allow-listed caller variables minus
//! secret-looking names, explicit passthroughs, and fixed values.

use std::collections::BTreeMap;
use std::ffi::OsString;

use crate::model::Env;

/// Name suffixes that mark a secret (compared upper-case).
const SECRET_SUFFIXES: &[&str] = &[
    "_KEY",
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_PASSWD",
    "_PASS",
    "_CREDENTIALS",
    "_CREDENTIAL",
    "_AUTH",
];

/// Substrings that mark a secret anywhere in a name (compared upper-case).
const SECRET_WORDS: &[&str] = &[
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PRIVATE_KEY",
    "API_KEY",
    "CREDENTIAL",
];

/// Prefixes of variables that inject code or alter the loader/allocator (compared upper-case).
const DANGEROUS_PREFIXES: &[&str] = &["LD_", "DYLD_", "MALLOC_", "GIT_CONFIG", "GIT_SSH"];

/// Variables that make interpreters, shells or tools run code or reach credentials.
const DANGEROUS_NAMES: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "NODE_OPTIONS",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "GIT_EXEC_PATH",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "SSH_AUTH_SOCK",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
];

/// Whether a variable name looks like a secret or a code-injection vector; such names are never
/// copied through `allow` (only through an explicit `passthrough`). Case-insensitive.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let upper = upper.as_str();
    DANGEROUS_NAMES.contains(&upper)
        || DANGEROUS_PREFIXES.iter().any(|p| upper.starts_with(p))
        || SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || SECRET_WORDS.iter().any(|w| upper.contains(w))
}

/// Whether `name` matches an `allow` entry: exact, or `PREFIX*`.
pub(crate) fn allowed(allow: &[String], name: &str) -> bool {
    allow.iter().any(|entry| match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => entry == name,
    })
}

/// Builds the child's environment from the caller's variables: those matching `policy.allow`
/// that are not [`is_secret_name`], plus those named exactly in `policy.passthrough`, then
/// `policy.set` on top. Sorted by name, without duplicates (the first caller occurrence of a
/// name wins). Variables whose name is not UTF-8, is empty or contains `=`, or whose value
/// contains NUL, cannot be passed to a child and are dropped.
pub fn build_env(
    policy: &Env,
    caller: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    let mut out: BTreeMap<String, OsString> = BTreeMap::new();
    for (name, value) in caller {
        let Ok(name) = name.into_string() else {
            continue;
        };
        if name.is_empty()
            || name.contains(['=', '\0'])
            || value.as_encoded_bytes().contains(&0)
            || out.contains_key(&name)
        {
            continue;
        }
        let keep = policy.passthrough.contains(&name)
            || (allowed(&policy.allow, &name) && !is_secret_name(&name));
        if keep {
            out.insert(name, value);
        }
    }
    for (name, value) in &policy.set {
        out.insert(name.clone(), OsString::from(value));
    }
    out.into_iter()
        .map(|(name, value)| (OsString::from(name), value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::DEFAULT_ENV_ALLOW;

    fn caller(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        vars.iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn default_env() -> Env {
        Env {
            allow: DEFAULT_ENV_ALLOW.iter().map(|s| s.to_string()).collect(),
            ..Env::default()
        }
    }

    fn names(vars: &[(OsString, OsString)]) -> Vec<String> {
        vars.iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    const CALLER: &[(&str, &str)] = &[
        ("PATH", "/usr/bin"),
        ("LC_ALL", "C.UTF-8"),
        ("HOME", "/home/u"),
        ("FAKE_API_KEY", "sk-123"),
        ("LD_PRELOAD", "/evil.so"),
        ("GITHUB_TOKEN", "ghp_x"),
        ("EDITOR", "vim"),
    ];

    #[test]
    fn secret_suffixes() {
        for name in [
            "FAKE_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "DB_PASSWD",
            "SMTP_PASS",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "X_CREDENTIAL",
            "NPM_AUTH",
            "my_secret",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn secret_words_anywhere() {
        for name in [
            "SECRETS_FILE",
            "TOKENFILE",
            "PASSWORD_STORE_DIR",
            "MY_PRIVATE_KEY_PATH",
            "OPENAI_API_KEY_FILE",
            "CREDENTIALS_DIR",
            "api_key",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn code_injection_variables() {
        for name in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "ld_audit",
            "DYLD_INSERT_LIBRARIES",
            "BASH_ENV",
            "ENV",
            "PROMPT_COMMAND",
            "NODE_OPTIONS",
            "PYTHONSTARTUP",
            "PYTHONPATH",
            "PERL5OPT",
            "PERL5LIB",
            "RUBYOPT",
            "GIT_CONFIG",
            "GIT_CONFIG_GLOBAL",
            "GIT_CONFIG_COUNT",
            "GIT_EXEC_PATH",
            "GIT_SSH",
            "GIT_SSH_COMMAND",
            "GIT_ASKPASS",
            "SSH_ASKPASS",
            "SSH_AUTH_SOCK",
            "GCONV_PATH",
            "MALLOC_CHECK_",
            "GLIBC_TUNABLES",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn ordinary_names_are_not_secret() {
        for name in [
            "PATH",
            "HOME",
            "LC_ALL",
            "TERM",
            "EDITOR",
            "SSL_CERT_FILE",
            "KEYBOARD",
            "ENVIRONMENT",
            "GIT_AUTHOR_NAME",
            "PASSAGE",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn default_allow_list_is_not_secret() {
        for name in DEFAULT_ENV_ALLOW {
            assert!(!is_secret_name(name.trim_end_matches('*')), "{name}");
        }
    }

    #[test]
    fn allow_list_filters_secrets_and_unlisted() {
        let env = build_env(&default_env(), caller(CALLER));
        assert_eq!(names(&env), ["HOME", "LC_ALL", "PATH"]);
        assert_eq!(env[2].1, OsString::from("/usr/bin"));
        assert_eq!(env[1].1, OsString::from("C.UTF-8"));
    }

    #[test]
    fn secret_names_dropped_even_when_allowed() {
        let mut policy = default_env();
        policy.allow.push("FAKE_API_KEY".into());
        policy.allow.push("LD_*".into());
        policy.allow.push("*".into());
        let env = build_env(&policy, caller(CALLER));
        assert_eq!(names(&env), ["EDITOR", "HOME", "LC_ALL", "PATH"]);
    }

    #[test]
    fn passthrough_brings_secret_back() {
        let mut policy = default_env();
        policy.passthrough.push("FAKE_API_KEY".into());
        policy.passthrough.push("ABSENT_TOKEN".into());
        let env = build_env(&policy, caller(CALLER));
        assert_eq!(names(&env), ["FAKE_API_KEY", "HOME", "LC_ALL", "PATH"]);
        assert_eq!(env[0].1, OsString::from("sk-123"));
    }

    #[test]
    fn passthrough_is_exact() {
        let mut policy = Env::default();
        policy.passthrough.push("GITHUB_*".into());
        assert!(build_env(&policy, caller(CALLER)).is_empty());
    }

    #[test]
    fn set_overrides_and_adds() {
        let mut policy = default_env();
        policy.set.insert("PATH".into(), "/opt/bin".into());
        policy.set.insert("FOO".into(), "bar".into());
        let env = build_env(&policy, caller(CALLER));
        assert_eq!(names(&env), ["FOO", "HOME", "LC_ALL", "PATH"]);
        assert_eq!(env[0].1, OsString::from("bar"));
        assert_eq!(env[3].1, OsString::from("/opt/bin"));
    }

    #[test]
    fn allow_prefix_glob() {
        let policy = Env {
            allow: vec!["LC_*".into()],
            ..Env::default()
        };
        let env = build_env(
            &policy,
            caller(&[
                ("LC_ALL", "C"),
                ("LC_TIME", "C"),
                ("LANG", "C"),
                ("LC", "x"),
            ]),
        );
        assert_eq!(names(&env), ["LC_ALL", "LC_TIME"]);
    }

    #[test]
    fn duplicates_keep_first_and_output_sorted() {
        let env = build_env(
            &default_env(),
            caller(&[("TERM", "a"), ("PATH", "/1"), ("PATH", "/2")]),
        );
        assert_eq!(names(&env), ["PATH", "TERM"]);
        assert_eq!(env[0].1, OsString::from("/1"));
    }

    #[test]
    fn unusable_caller_vars_dropped() {
        use std::os::unix::ffi::OsStringExt;
        let policy = Env {
            allow: vec!["*".into()],
            ..Env::default()
        };
        let vars = vec![
            (OsString::from_vec(vec![b'A', 0xff]), OsString::from("x")),
            (OsString::from(""), OsString::from("x")),
            (OsString::from("A=B"), OsString::from("x")),
            (
                OsString::from("NUL"),
                OsString::from_vec(vec![b'a', 0, b'b']),
            ),
            (OsString::from("OK"), OsString::from_vec(vec![0xff])),
        ];
        let env = build_env(&policy, vars);
        assert_eq!(
            env,
            vec![(OsString::from("OK"), OsString::from_vec(vec![0xff]))]
        );
    }
}
