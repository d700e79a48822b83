//! Built-in profiles. A profile is plain data: a name and the writable roots it grants; every
//! profile shares the same deny lists, environment allow-list and network mode.

use crate::error::PolicyError;
use crate::host_exec::HOST_EXEC;
use crate::masks::{default_masks, MaskKind, DEFAULT_MASKS};
use crate::model::{
    BackendName, Env, Filesystem, Limits, Network, NetworkMode, Policy, ReadScope, WorkspaceMode,
};

/// The profile used when neither the command line nor the policy file names one.
pub const DEFAULT_PROFILE: &str = "workspace-write";

/// Names of the built-in profiles, in the order they are documented.
pub const PROFILES: &[&str] = &["workspace-write", "read-only"];

/// Paths inside writable roots that stay read-only in every profile and that no policy can
/// remove (relative: at any depth beneath every writable root): git's hooks and the files
/// that point git at them, and stockade's own configuration. The catalogue of other project
/// files host tools execute ([`crate::host_exec::HOST_EXEC`]) comes after them.
pub const CORE_PROTECTED: &[&str] = &[
    ".git/hooks",
    ".git/config",
    ".git/commondir",
    ".gitmodules",
    "stockade.toml",
    ".stockade",
];

/// The default unreadable paths (`filesystem.deny_read`): the [`DEFAULT_MASKS`] read as
/// nothing (credentials, histories, browser profiles, dotenv files), in catalogue order.
pub fn default_deny_read() -> Vec<String> {
    default_masks(MaskKind::Unreadable)
        .map(str::to_owned)
        .collect()
}

/// The default paths read as empty (`filesystem.read_empty`): shell start-up files.
pub fn default_read_empty() -> Vec<String> {
    default_masks(MaskKind::Empty).map(str::to_owned).collect()
}

/// The default protected paths (`filesystem.deny_write`): [`CORE_PROTECTED`], then the
/// catalogue of files host tools execute, then the home's own persistence points
/// ([`crate::home_exec::HOME_EXEC`]).
pub fn default_deny_write() -> Vec<String> {
    CORE_PROTECTED
        .iter()
        .copied()
        .chain(HOST_EXEC.iter().map(|e| e.path))
        .chain(crate::home_exec::HOME_EXEC.iter().map(|e| e.path))
        .map(str::to_owned)
        .collect()
}

/// Default wall-clock limit of a run (10 minutes); raise it with `--timeout` or `[limits]`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;

/// Default size of the private `/tmp`; raise it with `--tmp-size` or `[limits]`.
pub const DEFAULT_TMP_SIZE: &str = "1G";

/// Default memory of a run: half of the machine's; change it with `--memory` or `[limits]`.
pub const DEFAULT_MEMORY: &str = "50%";

/// Default number of processes (and threads) of a run at once.
pub const DEFAULT_PIDS: u64 = 1024;

/// Default output passed on per stream.
pub const DEFAULT_OUTPUT_LIMIT: &str = "16M";

/// Environment variables copied from the caller by default (secret-looking names excepted).
pub const DEFAULT_ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "TZ",
    "CI",
    "NO_COLOR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// What distinguishes one built-in profile from another.
struct ProfileDef {
    name: &'static str,
    allow_write: &'static [&'static str],
}

const DEFS: &[ProfileDef] = &[
    ProfileDef {
        name: "workspace-write",
        allow_write: &["$WORKSPACE"],
    },
    ProfileDef {
        name: "read-only",
        allow_write: &[],
    },
];

/// The built-in profile called `name`, as a resolved [`Policy`].
///
/// # Errors
///
/// [`PolicyError::UnknownProfile`] when `name` is not one of [`PROFILES`].
/// Variables every profile sets. Package managers whose cache lives in the read-only home get a
/// private one in the sandbox's `/tmp` (a writable shared cache would let one run poison the
/// packages the next one, or the host, installs).
pub const DEFAULT_ENV_SET: &[(&str, &str)] = &[("npm_config_cache", "/tmp/.npm")];

pub fn profile(name: &str) -> Result<Policy, PolicyError> {
    let def = DEFS
        .iter()
        .find(|d| d.name == name)
        .ok_or_else(|| PolicyError::UnknownProfile {
            name: name.to_owned(),
        })?;
    Ok(Policy {
        profile: def.name.to_owned(),
        filesystem: Filesystem {
            read_scope: ReadScope::Host,
            deny_read: default_deny_read(),
            read_empty: default_read_empty(),
            allow_read: Vec::new(),
            allow_write: strings(def.allow_write),
            deny_write: default_deny_write(),
            unprotect: Vec::new(),
            created_roots: Vec::new(),
            private: Vec::new(),
        },
        env: Env {
            allow: strings(DEFAULT_ENV_ALLOW),
            set: DEFAULT_ENV_SET
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            passthrough: Vec::new(),
        },
        network: Network {
            mode: NetworkMode::None,
            allow_domains: Vec::new(),
            deny_domains: Vec::new(),
            allow_hosts: Vec::new(),
        },
        limits: Limits {
            timeout: Some(DEFAULT_TIMEOUT_SECS),
            tmp_size: Some(DEFAULT_TMP_SIZE.to_owned()),
            files: None,
            memory: Some(DEFAULT_MEMORY.to_owned()),
            pids: Some(DEFAULT_PIDS),
            cpu: None,
            output_limit: Some(DEFAULT_OUTPUT_LIMIT.to_owned()),
            disk: None,
        },
        backend: BackendName::Native,
        credentials: Vec::new(),
        presets: Vec::new(),
        commands: Vec::new(),
        workspace_mode: WorkspaceMode::Direct,
    })
}

/// Whether `pattern` is one of the profiles' own path patterns: those pass
/// `paths::check_syntax` (a test checks every one), so resolving a policy need not parse them
/// again on every run.
pub(crate) fn is_builtin_pattern(pattern: &str) -> bool {
    // A set built once: a policy has some 170 patterns to check against as many built-ins.
    static BUILTIN: std::sync::OnceLock<std::collections::HashSet<&'static str>> =
        std::sync::OnceLock::new();
    BUILTIN
        .get_or_init(|| {
            DEFAULT_MASKS
                .iter()
                .map(|m| m.path)
                .chain(CORE_PROTECTED.iter().copied())
                .chain(HOST_EXEC.iter().map(|e| e.path))
                .chain(crate::home_exec::HOME_EXEC.iter().map(|e| e.path))
                .chain(DEFS.iter().flat_map(|d| d.allow_write.iter().copied()))
                .collect()
        })
        .contains(pattern)
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_patterns_pass_the_syntax_check() {
        let all = default_deny_read()
            .into_iter()
            .chain(default_read_empty())
            .chain(default_deny_write())
            .chain(
                DEFS.iter()
                    .flat_map(|d| d.allow_write)
                    .map(|s| s.to_string()),
            );
        for pattern in &all.collect::<Vec<_>>() {
            assert!(is_builtin_pattern(pattern));
            crate::paths::check_syntax(pattern).unwrap();
        }
        assert!(!is_builtin_pattern("~/.ssh/extra"));
    }

    #[test]
    fn profiles_list_matches_definitions() {
        let names: Vec<&str> = DEFS.iter().map(|d| d.name).collect();
        assert_eq!(names, PROFILES);
        assert!(PROFILES.contains(&DEFAULT_PROFILE));
    }

    #[test]
    fn workspace_write_profile() {
        let p = profile("workspace-write").unwrap();
        assert_eq!(p.profile, "workspace-write");
        assert_eq!(p.filesystem.read_scope, ReadScope::Host);
        assert_eq!(p.filesystem.allow_write, vec!["$WORKSPACE"]);
        assert_eq!(p.filesystem.deny_read, default_deny_read());
        assert_eq!(p.filesystem.read_empty, default_read_empty());
        assert_eq!(p.filesystem.deny_write, default_deny_write());
        assert!(p.filesystem.allow_read.is_empty());
        assert_eq!(p.env.allow, strings(DEFAULT_ENV_ALLOW));
        assert_eq!(
            p.env
                .set
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
            [("npm_config_cache", "/tmp/.npm")]
        );
        assert!(p.env.passthrough.is_empty());
        assert_eq!(p.network, Network::default());
        assert_eq!(p.network.mode, NetworkMode::None);
    }

    #[test]
    fn read_only_profile_has_no_writable_roots() {
        let p = profile("read-only").unwrap();
        assert_eq!(p.profile, "read-only");
        assert!(p.filesystem.allow_write.is_empty());
        assert_eq!(p.filesystem.deny_write, default_deny_write());
        assert_eq!(p.filesystem.deny_read, default_deny_read());
        assert_eq!(p.network, Network::default());
    }

    #[test]
    fn unknown_profile_lists_known_ones() {
        let err = profile("yolo").unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to load profile `yolo`: unknown profile"
        );
        assert_eq!(err.code(), "E_POLICY_INVALID");
        assert_eq!(
            err.hint().as_deref(),
            Some("known profiles: workspace-write, read-only")
        );
    }

    #[test]
    fn default_lists_have_no_duplicates() {
        let env: Vec<String> = strings(DEFAULT_ENV_ALLOW);
        for list in [default_deny_read(), default_deny_write(), env] {
            let mut seen = std::collections::HashSet::new();
            for item in list {
                assert!(seen.insert(item.clone()), "duplicate {item}");
            }
        }
    }

    #[test]
    fn dotenv_patterns_are_relative() {
        assert!(default_deny_read().iter().any(|p| p == ".env"));
        assert!(default_deny_read().iter().any(|p| p == ".env.*"));
    }
}
