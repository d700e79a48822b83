//! The JSON sandbox settings users already have, read as stockade policy files: srt's
//! (`@anthropic-ai/sandbox-runtime`, `~/.srt-settings.json` or `srt --settings FILE`) and the
//! `sandbox` section and sandbox-relevant permission rules of Claude Code's `settings.json`.
//!
//! The key names and their meaning are srt 0.0.78's (its zod schema, `SandboxRuntimeConfigSchema`)
//! and Claude Code 2.1's (the settings schema shipped in `@anthropic-ai/claude-agent-sdk`
//! 0.3). Reading is strict ([`crate::strict_json`]): a repeated key, an unknown key or a value
//! of the wrong type is an error naming its key path, line and column. A key stockade cannot
//! honour is an error too, naming the key and why, unless its value asks for nothing beyond
//! what stockade does anyway (`allowLocalBinding: false`, an empty `allowUnixSockets`).
//! Keys that only steer srt or Claude Code themselves (`ignoreViolations`, `ripgrep`,
//! `excludedCommands`, ...) are accepted and change nothing. The table is in
//! `docs/design.md`; in short:
//!
//! | settings key | stockade |
//! |---|---|
//! | srt file | profile `read-only` (srt writes only where `allowWrite` says) |
//! | Claude Code file | profile `workspace-write` (Claude Code's working directory is writable) |
//! | `network.allowedDomains` (and `WebFetch(domain:X)` allow rules) | mode `proxy` with `allow_domains` (IP literals and `localhost`: `allow_hosts`); empty or absent: mode `none` |
//! | `network.deniedDomains` (and `WebFetch(domain:X)` deny rules) | `deny_domains`; `*`: mode `none` |
//! | `filesystem.denyRead`, `credentials.files` with mode `deny`, `Read(P)` deny rules | `deny_read` |
//! | `filesystem.allowRead` | `allow_read` |
//! | `filesystem.allowWrite`, `Edit(P)` allow rules | `allow_write` (`/tmp` and `/dev/shm` themselves: nothing, a run's own are private and writable) |
//! | `filesystem.denyWrite`, `Edit(P)` deny rules | `deny_write` |
//!
//! Paths: `~` and `~/x` stay as they are (stockade expands them the same way); a relative
//! path becomes absolute the way the tool that owns the file would make it: srt resolves it
//! against the current directory; Claude Code resolves `sandbox.filesystem` paths against the
//! project root for `<project>/.claude/settings*.json` and against `~/.claude` for
//! `~/.claude/settings.json` (`//x` is the absolute `/x`), and permission-rule paths
//! gitignore-style against the current directory.
//!
//! ```
//! use std::path::PathBuf;
//!
//! let ctx = policy::SettingsContext { cwd: Some(PathBuf::from("/work/repo")), ..Default::default() };
//! let file = policy::parse_settings_json(
//!     r#"{"network": {"allowedDomains": ["*.npmjs.org", "github.com"], "deniedDomains": []},
//!         "filesystem": {"denyRead": ["~/.aws"], "allowWrite": ["."], "denyWrite": []}}"#,
//!     "srt.json",
//!     &ctx,
//! )?;
//! assert_eq!(file.profile.as_deref(), Some("read-only"));
//! assert_eq!(file.network.mode, Some(policy::NetworkMode::Proxy));
//! assert_eq!(file.network.allow_domains, ["*.npmjs.org", "github.com"]);
//! assert_eq!(file.filesystem.deny_read, ["~/.aws"]);
//! assert_eq!(file.filesystem.allow_write, ["/work/repo"]);
//!
//! let err = policy::parse_settings_json(
//!     r#"{"network": {"allowedDomains": [], "allowedDomains": ["x.com"]}}"#,
//!     "srt.json",
//!     &ctx,
//! )
//! .unwrap_err();
//! assert_eq!(err.to_string(), "srt.json: line 1, column 36: duplicate key `network.allowedDomains`");
//! # Ok::<(), policy::PolicyError>(())
//! ```

mod claude;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::de::IgnoredAny;
use serde::Deserialize;

use crate::env::{allowed, is_secret_name};
use crate::error::PolicyError;
use crate::file::{FilesystemPatch, NetworkPatch, PolicyFile};
use crate::model::NetworkMode;
use crate::net::NetList;
use crate::paths::{check_syntax, has_glob_meta, normalize_lexically};
use crate::profile::DEFAULT_ENV_ALLOW;
use crate::strict_json::{self, location, KeyIndex, StrictJsonError};

/// Which settings a JSON policy file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsFormat {
    /// srt's settings file (`~/.srt-settings.json`): top-level `network` and `filesystem`.
    Srt,
    /// Claude Code's `settings.json`: a `sandbox` section and/or `permissions` rules.
    ClaudeCode,
}

/// What the relative paths of a settings file are relative to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettingsContext {
    /// The current directory: srt resolves relative paths against it, and so do Claude
    /// Code's permission rules. `None`: relative paths there are errors.
    pub cwd: Option<PathBuf>,
    /// The home directory, to tell Claude Code's user settings (`~/.claude/settings.json`)
    /// from a project's (`<project>/.claude/settings.json`).
    pub home: Option<PathBuf>,
    /// The settings file's absolute path. `None`, or a file outside a `.claude` directory:
    /// relative `sandbox.filesystem` paths of a Claude Code file are errors.
    pub file: Option<PathBuf>,
}

impl SettingsContext {
    /// The context of this process reading `file`: its current directory and `$HOME`.
    pub fn of_process(file: &Path) -> SettingsContext {
        let cwd = std::env::current_dir().ok();
        let file = match &cwd {
            Some(cwd) if file.is_relative() => normalize_lexically(&cwd.join(file)),
            _ => normalize_lexically(file),
        };
        SettingsContext {
            cwd,
            home: std::env::var_os("HOME").map(PathBuf::from),
            file: Some(file),
        }
    }
}

/// Whether a policy file is JSON: its name ends in `.json`, or its text starts with `{` (a
/// TOML document cannot).
pub fn is_json(path: &Path, text: &str) -> bool {
    path.extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("json"))
        || text
            .trim_start_matches('\u{feff}')
            .trim_start()
            .starts_with('{')
}

/// Parses srt or Claude Code settings (told apart by their top-level keys) into a
/// [`PolicyFile`]. `origin` names the file in error messages.
///
/// # Errors
///
/// [`PolicyError::ParseFile`], naming the key path, line and column, for invalid JSON, a
/// repeated key, an unknown key, a value of the wrong type, a path or network entry stockade
/// cannot use, a key stockade has no equivalent for, and a document that is neither srt's nor
/// Claude Code's settings.
pub fn parse_settings_json(
    text: &str,
    origin: &str,
    ctx: &SettingsContext,
) -> Result<PolicyFile, PolicyError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let index = KeyIndex::new(text).map_err(|e| strict_error(origin, e))?;
    let mut reader = Reader {
        text,
        origin,
        index,
        ctx,
        out: Mapped::default(),
    };
    match reader.format()? {
        SettingsFormat::Srt => {
            let settings: SrtSettings = reader.typed()?;
            reader.srt(&settings)?;
            Ok(reader.out.finish("read-only"))
        }
        SettingsFormat::ClaudeCode => {
            let settings: claude::ClaudeSettings = reader.typed()?;
            reader.claude(&settings)?;
            Ok(reader.out.finish("workspace-write"))
        }
    }
}

fn strict_error(origin: &str, e: StrictJsonError) -> PolicyError {
    PolicyError::ParseFile {
        origin: origin.to_owned(),
        location: e.location,
        message: e.message,
        hint: e.hint,
    }
}

/// srt's settings file (also the body of Claude Code's `sandbox` section, which has a few more
/// keys: see `claude::ClaudeSandbox`).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
struct SrtSettings {
    #[serde(rename = "$schema")]
    schema: Option<IgnoredAny>,
    network: Option<NetworkSettings>,
    filesystem: Option<FilesystemSettings>,
    credentials: Option<CredentialsSettings>,
    ignore_violations: BTreeMap<String, Vec<String>>,
    enable_weaker_nested_sandbox: bool,
    enable_weaker_network_isolation: bool,
    allow_apple_events: bool,
    ripgrep: Option<RipgrepSettings>,
    mandatory_deny_search_depth: Option<u8>,
    allow_pty: Option<bool>,
    seccomp: Option<SeccompSettings>,
    bwrap_path: Option<String>,
    socat_path: Option<String>,
    java_agent_jar_path: Option<String>,
    windows: Option<IgnoredAny>,
    git: Option<GitSettings>,
}

/// `network`: srt's keys plus Claude Code's `allowManagedDomainsOnly`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
struct NetworkSettings {
    allowed_domains: Vec<String>,
    denied_domains: Vec<String>,
    denied_domain_reasons: BTreeMap<String, String>,
    strict_allowlist: Option<bool>,
    allow_managed_domains_only: Option<bool>,
    denied_resolved_addresses: Vec<String>,
    allow_unix_sockets: Vec<String>,
    allow_all_unix_sockets: bool,
    allow_local_binding: bool,
    allow_mach_lookup: Vec<String>,
    http_proxy_port: Option<IgnoredAny>,
    socks_proxy_port: Option<IgnoredAny>,
    mitm_proxy: Option<IgnoredAny>,
    tls_terminate: Option<IgnoredAny>,
    parent_proxy: Option<IgnoredAny>,
}

/// `filesystem`: srt's keys plus Claude Code's `allowManagedReadPathsOnly`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
struct FilesystemSettings {
    deny_read: Vec<String>,
    allow_read: Vec<String>,
    allow_write: Vec<String>,
    deny_write: Vec<String>,
    allow_git_config: bool,
    disabled: bool,
    allow_managed_read_paths_only: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
struct CredentialsSettings {
    files: Vec<CredentialFile>,
    env_vars: Vec<CredentialEnvVar>,
    allow_plaintext_inject: Option<bool>,
    aws_pairs: Vec<IgnoredAny>,
    sigv4: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum CredentialMode {
    Deny,
    Mask,
}

/// A credential file; with mode `deny` the masking keys are "accepted but ignored" (srt).
#[allow(
    dead_code,
    reason = "the masking keys are accepted and have no effect with mode deny"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CredentialFile {
    path: String,
    mode: CredentialMode,
    #[serde(default)]
    extract: Option<IgnoredAny>,
    #[serde(default)]
    on_extract_no_match: Option<IgnoredAny>,
    #[serde(default)]
    decode: Option<IgnoredAny>,
    #[serde(default)]
    mask_claims: Option<IgnoredAny>,
    #[serde(default)]
    mask_duplicates: Option<IgnoredAny>,
    #[serde(default)]
    inject_hosts: Option<IgnoredAny>,
}

#[allow(
    dead_code,
    reason = "the masking keys are accepted and have no effect with mode deny"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CredentialEnvVar {
    name: String,
    mode: CredentialMode,
    #[serde(default)]
    extract: Option<IgnoredAny>,
    #[serde(default)]
    on_extract_no_match: Option<IgnoredAny>,
    #[serde(default)]
    decode: Option<IgnoredAny>,
    #[serde(default)]
    mask_claims: Option<IgnoredAny>,
    #[serde(default)]
    inject_hosts: Option<IgnoredAny>,
}

#[allow(dead_code, reason = "validated only: stockade does not run ripgrep")]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RipgrepSettings {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    argv0: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
struct SeccompSettings {
    apply_path: Option<String>,
    argv0: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
struct GitSettings {
    safe_directories: Vec<String>,
}

/// The stockade rules a settings file maps to.
#[derive(Debug, Default)]
struct Mapped {
    deny_read: Vec<String>,
    allow_read: Vec<String>,
    allow_write: Vec<String>,
    deny_write: Vec<String>,
    allow_domains: Vec<String>,
    deny_domains: Vec<String>,
    allow_hosts: Vec<String>,
    /// `deniedDomains` holds `*`: nothing may be reached.
    deny_all: bool,
}

impl Mapped {
    fn finish(self, profile: &str) -> PolicyFile {
        let reach =
            !self.deny_all && (!self.allow_domains.is_empty() || !self.allow_hosts.is_empty());
        let (allow_domains, allow_hosts) = if reach {
            (self.allow_domains, self.allow_hosts)
        } else {
            (Vec::new(), Vec::new())
        };
        PolicyFile {
            profile: Some(profile.to_owned()),
            filesystem: FilesystemPatch {
                read_scope: None,
                deny_read: dedup(self.deny_read),
                allow_read: dedup(self.allow_read),
                allow_write: dedup(self.allow_write),
                deny_write: dedup(self.deny_write),
                ..FilesystemPatch::default()
            },
            network: NetworkPatch {
                mode: Some(if reach {
                    NetworkMode::Proxy
                } else {
                    NetworkMode::None
                }),
                allow_domains: dedup(allow_domains),
                deny_domains: dedup(self.deny_domains),
                allow_hosts: dedup(allow_hosts),
            },
            ..PolicyFile::default()
        }
    }
}

/// `/tmp` and `/dev/shm` themselves: private and writable in every run (an `allowWrite` of
/// them asks for nothing more; a grant of them would be refused).
pub(super) fn is_private_area(pattern: &str) -> bool {
    matches!(
        pattern.trim_end_matches('/'),
        "/tmp" | "/private/tmp" | "/dev/shm"
    )
}

fn dedup(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Which list a filesystem path goes to (decides how it is checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathList {
    DenyRead,
    AllowRead,
    AllowWrite,
    DenyWrite,
}

/// How relative paths are made absolute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathStyle {
    /// srt: `~`, `~/x`, absolute, or relative to the current directory.
    Srt,
    /// Claude Code's `sandbox.filesystem`: as srt, but `//x` is `/x` and relative paths are
    /// relative to the settings root.
    ClaudeSandbox,
}

/// One settings file being read.
struct Reader<'a> {
    text: &'a str,
    origin: &'a str,
    index: KeyIndex,
    ctx: &'a SettingsContext,
    out: Mapped,
}

impl Reader<'_> {
    /// An error about the key (or entry) at `path`, located when the index knows it.
    fn error(&self, path: &str, message: String, hint: impl Into<String>) -> PolicyError {
        PolicyError::ParseFile {
            origin: self.origin.to_owned(),
            location: self.index.offset(path).map(|o| location(self.text, o)),
            message,
            hint: Some(hint.into()),
        }
    }

    /// A key stockade cannot honour with the value it has.
    fn unsupported(&self, path: &str, why: &str, hint: &str) -> PolicyError {
        self.error(
            path,
            format!("`{path}` has no stockade equivalent: {why}"),
            hint,
        )
    }

    fn typed<T: serde::de::DeserializeOwned>(&self) -> Result<T, PolicyError> {
        strict_json::from_str_indexed(self.text, &self.index)
            .map_err(|e| strict_error(self.origin, e))
    }

    /// Tells srt settings from Claude Code settings by their top-level keys.
    fn format(&self) -> Result<SettingsFormat, PolicyError> {
        let keys = self.index.top_level_keys();
        let has = |k: &str| keys.iter().any(|key| key == k);
        let srt = has("network") || has("filesystem");
        let claude = has("sandbox") || has("permissions");
        match (srt, claude) {
            (true, false) => Ok(SettingsFormat::Srt),
            (false, true) => Ok(SettingsFormat::ClaudeCode),
            (true, true) => Err(PolicyError::ParseFile {
                origin: self.origin.to_owned(),
                location: None,
                message: "the file mixes srt settings (top-level `network`/`filesystem`) with \
                          Claude Code settings (`sandbox`/`permissions`)"
                    .to_owned(),
                hint: Some(
                    "in Claude Code's settings.json, network and filesystem rules go inside \
                     `sandbox`"
                        .to_owned(),
                ),
            }),
            (false, false) => Err(PolicyError::ParseFile {
                origin: self.origin.to_owned(),
                location: Some(location(self.text, 0)),
                message: "not a policy stockade can read: JSON policy files are srt settings \
                          (top-level `network` and `filesystem`) or Claude Code settings (a \
                          `sandbox` section or `permissions` rules)"
                    .to_owned(),
                hint: Some(
                    "stockade's own policy files are TOML; name the file `*.toml`".to_owned(),
                ),
            }),
        }
    }

    /// An srt settings file.
    fn srt(&mut self, s: &SrtSettings) -> Result<(), PolicyError> {
        self.sandbox_common(
            "",
            PathStyle::Srt,
            s.network.as_ref(),
            s.filesystem.as_ref(),
            s.credentials.as_ref(),
        )?;
        self.weakening_flags(
            "",
            &[
                (
                    s.enable_weaker_nested_sandbox,
                    "enableWeakerNestedSandbox",
                    WEAKER_NESTED,
                ),
                (
                    s.enable_weaker_network_isolation,
                    "enableWeakerNetworkIsolation",
                    MACOS_ONLY,
                ),
                (s.allow_apple_events, "allowAppleEvents", MACOS_ONLY),
            ],
        )
    }

    /// The keys srt's settings and Claude Code's `sandbox` section share. `prefix` is `""` or
    /// `"sandbox."`.
    fn sandbox_common(
        &mut self,
        prefix: &str,
        style: PathStyle,
        network: Option<&NetworkSettings>,
        filesystem: Option<&FilesystemSettings>,
        credentials: Option<&CredentialsSettings>,
    ) -> Result<(), PolicyError> {
        if let Some(net) = network {
            self.network(&format!("{prefix}network"), net)?;
        }
        if let Some(fs) = filesystem {
            let key = format!("{prefix}filesystem");
            self.weakening_flags(
                &format!("{key}."),
                &[
                    (fs.disabled, "disabled", FS_DISABLED),
                    (fs.allow_git_config, "allowGitConfig", GIT_CONFIG),
                ],
            )?;
            for (name, list, entries) in [
                ("denyRead", PathList::DenyRead, &fs.deny_read),
                ("allowRead", PathList::AllowRead, &fs.allow_read),
                ("allowWrite", PathList::AllowWrite, &fs.allow_write),
                ("denyWrite", PathList::DenyWrite, &fs.deny_write),
            ] {
                for (i, raw) in entries.iter().enumerate() {
                    let path = format!("{key}.{name}[{i}]");
                    let mapped = self.settings_path(&path, raw, style, list)?;
                    // srt and Claude Code share the host's /tmp; every stockade run has a
                    // private, writable one, and a grant of the whole /tmp (or /dev/shm) is
                    // refused. Writing there is what the entry asks for, and the run can.
                    if list == PathList::AllowWrite && is_private_area(&mapped) {
                        continue;
                    }
                    self.push_path(list, mapped);
                }
            }
        }
        if let Some(creds) = credentials {
            self.credentials(&format!("{prefix}credentials"), creds, style)?;
        }
        Ok(())
    }

    fn network(&mut self, key: &str, net: &NetworkSettings) -> Result<(), PolicyError> {
        self.weakening_flags(
            &format!("{key}."),
            &[
                (
                    !net.allow_unix_sockets.is_empty(),
                    "allowUnixSockets",
                    UNIX_SOCKETS,
                ),
                (
                    net.allow_all_unix_sockets,
                    "allowAllUnixSockets",
                    UNIX_SOCKETS,
                ),
                (net.allow_local_binding, "allowLocalBinding", LOCAL_BINDING),
                (
                    !net.allow_mach_lookup.is_empty(),
                    "allowMachLookup",
                    MACOS_ONLY,
                ),
                (net.http_proxy_port.is_some(), "httpProxyPort", OTHER_PROXY),
                (
                    net.socks_proxy_port.is_some(),
                    "socksProxyPort",
                    OTHER_PROXY,
                ),
                (net.mitm_proxy.is_some(), "mitmProxy", OTHER_PROXY),
                (net.parent_proxy.is_some(), "parentProxy", PARENT_PROXY),
                (net.tls_terminate.is_some(), "tlsTerminate", TLS_TERMINATE),
                (
                    !net.denied_resolved_addresses.is_empty(),
                    "deniedResolvedAddresses",
                    RESOLVED_ADDRESSES,
                ),
            ],
        )?;
        for (i, entry) in net.allowed_domains.iter().enumerate() {
            self.allowed_domain(&format!("{key}.allowedDomains[{i}]"), entry)?;
        }
        for (i, entry) in net.denied_domains.iter().enumerate() {
            self.denied_domain(&format!("{key}.deniedDomains[{i}]"), entry)?;
        }
        Ok(())
    }

    /// Refuses each `(set, key, (why, hint))` whose value asks for more than stockade does.
    fn weakening_flags(
        &self,
        prefix: &str,
        flags: &[(bool, &str, Unsupported)],
    ) -> Result<(), PolicyError> {
        match flags.iter().find(|(set, _, _)| *set) {
            Some((_, key, (why, hint))) => {
                Err(self.unsupported(&format!("{prefix}{key}"), why, hint))
            }
            None => Ok(()),
        }
    }

    /// An `allowedDomains` entry: a name pattern goes to `allow_domains`; an IP literal and
    /// `localhost` (which srt lets resolve to loopback) go to `allow_hosts`.
    fn allowed_domain(&mut self, path: &str, entry: &str) -> Result<(), PolicyError> {
        let host = host_of(entry);
        let list = if host.parse::<IpAddr>().is_ok() || host.eq_ignore_ascii_case("localhost") {
            NetList::AllowHosts
        } else {
            NetList::AllowDomains
        };
        self.check_net(path, entry, list)?;
        match list {
            NetList::AllowHosts => self.out.allow_hosts.push(entry.to_owned()),
            _ => self.out.allow_domains.push(entry.to_owned()),
        }
        Ok(())
    }

    /// A `deniedDomains` entry: `*` denies everything (mode `none`); names go to
    /// `deny_domains`.
    fn denied_domain(&mut self, path: &str, entry: &str) -> Result<(), PolicyError> {
        if entry == "*" {
            self.out.deny_all = true;
            return Ok(());
        }
        let host = host_of(entry);
        if host == "*" {
            return Err(self.error(
                path,
                format!(
                    "`{entry}` in `{path}` has no stockade equivalent: stockade cannot deny one \
                     port for every name"
                ),
                "list the names to deny on that port (`example.com:22`), or deny `*` entirely",
            ));
        }
        if host.parse::<IpAddr>().is_ok() {
            return Err(self.error(
                path,
                format!(
                    "`{entry}` in `{path}` has no stockade equivalent: srt also refuses names \
                     that resolve to a denied address, which stockade cannot do"
                ),
                "remove the entry: stockade refuses every IP address that is not in an allow \
                 list, and loopback, private and link-local addresses for every name",
            ));
        }
        self.check_net(path, entry, NetList::DenyDomains)?;
        self.out.deny_domains.push(entry.to_owned());
        Ok(())
    }

    fn check_net(&self, path: &str, entry: &str, list: NetList) -> Result<(), PolicyError> {
        list.canonicalize(entry).map(|_| ()).map_err(|err| {
            self.error(
                path,
                format!("invalid entry `{entry}` in `{path}`: {}", err.reason),
                err.hint,
            )
        })
    }

    fn credentials(
        &mut self,
        key: &str,
        creds: &CredentialsSettings,
        style: PathStyle,
    ) -> Result<(), PolicyError> {
        if !creds.aws_pairs.is_empty() {
            let (why, hint) = MASKING;
            return Err(self.unsupported(&format!("{key}.awsPairs"), why, hint));
        }
        for (i, file) in creds.files.iter().enumerate() {
            let path = format!("{key}.files[{i}]");
            if file.mode == CredentialMode::Mask {
                let (why, hint) = MASKING;
                return Err(self.unsupported(&format!("{path}.mode"), why, hint));
            }
            let mapped = self.settings_path(
                &format!("{path}.path"),
                &file.path,
                style,
                PathList::DenyRead,
            )?;
            self.out.deny_read.push(mapped);
        }
        for (i, var) in creds.env_vars.iter().enumerate() {
            let path = format!("{key}.envVars[{i}]");
            if var.mode == CredentialMode::Mask {
                let (why, hint) = MASKING;
                return Err(self.unsupported(&format!("{path}.mode"), why, hint));
            }
            // stockade builds the environment from an allow-list: a variable it does not pass
            // is denied already; one it passes cannot be denied one by one.
            let defaults: Vec<String> = DEFAULT_ENV_ALLOW.iter().map(|s| (*s).to_owned()).collect();
            if allowed(&defaults, &var.name) && !is_secret_name(&var.name) {
                return Err(self.error(
                    &format!("{path}.name"),
                    format!(
                        "`{path}` has no stockade equivalent: stockade passes `{}` to every \
                         command (it is on the environment allow-list) and cannot deny it",
                        var.name
                    ),
                    "remove the entry, or use a stockade TOML policy",
                ));
            }
        }
        Ok(())
    }

    /// A path of `sandbox.filesystem` / srt's `filesystem` (or a credential file) as a
    /// stockade pattern for `list`, checked.
    fn settings_path(
        &self,
        path: &str,
        raw: &str,
        style: PathStyle,
        list: PathList,
    ) -> Result<String, PolicyError> {
        let fail = |why: String, hint: &str| {
            self.error(path, format!("cannot use `{raw}` in `{path}`: {why}"), hint)
        };
        if raw.is_empty() {
            return Err(fail("the path is empty".into(), "remove the entry"));
        }
        let mut text = raw.to_owned();
        // srt drops a trailing `/**` from write paths (`removeTrailingGlobSuffix`), and a
        // trailing `/` from every path that is not a glob.
        if matches!(list, PathList::AllowWrite | PathList::DenyWrite) {
            if let Some(stripped) = text.strip_suffix("/**") {
                text = if stripped.is_empty() {
                    "/".into()
                } else {
                    stripped.to_owned()
                };
            }
        }
        if !srt_glob(&text) {
            let trimmed = text.trim_end_matches('/');
            text = if trimmed.is_empty() {
                "/".into()
            } else {
                trimmed.to_owned()
            };
        }
        let pattern = if style == PathStyle::ClaudeSandbox && text.starts_with("//") {
            format!("/{}", escape_braces(text.trim_start_matches('/')))
        } else if text == "~" || text.starts_with("~/") || text.starts_with('/') {
            escape_braces(&text)
        } else if text.starts_with('~') || text.starts_with('$') {
            return Err(fail(
                "neither srt nor Claude Code expands `~user` or variables: it would be a path \
                 relative to the current directory"
                    .into(),
                "write the path out: absolute, or starting with `~/`",
            ));
        } else {
            let base = match style {
                PathStyle::Srt => self.ctx.cwd.clone().ok_or_else(|| {
                    fail(
                        "a relative path is relative to the current directory, which cannot be \
                         read"
                            .into(),
                        "write the path absolute, or starting with `~/`",
                    )
                })?,
                PathStyle::ClaudeSandbox => self.claude_settings_root().ok_or_else(|| {
                    fail(
                        "Claude Code resolves a relative path against the project root (for \
                         `<project>/.claude/settings.json`) or `~/.claude` (for \
                         `~/.claude/settings.json`), and this file is neither"
                            .into(),
                        "write the path absolute, or starting with `~/`",
                    )
                })?,
            };
            join_relative(&base, &text).ok_or_else(|| {
                fail(
                    "the directory it is relative to is not valid UTF-8".into(),
                    "write the path absolute, or starting with `~/`",
                )
            })?
        };
        self.check_path(path, raw, &pattern, list)?;
        Ok(pattern)
    }

    /// Checks a mapped pattern the way [`crate::resolve()`] will, but naming the settings key.
    fn check_path(
        &self,
        path: &str,
        raw: &str,
        pattern: &str,
        list: PathList,
    ) -> Result<(), PolicyError> {
        if list == PathList::AllowWrite && has_glob_meta(pattern) {
            return Err(self.error(
                path,
                format!(
                    "cannot use `{raw}` in `{path}`: a writable path cannot be a glob (srt on \
                     Linux skips it, granting nothing)"
                ),
                "name the directory to make writable (a trailing `/**` is dropped)",
            ));
        }
        check_syntax(pattern).map_err(|err| {
            let reason = match err {
                PolicyError::ExpandPattern { reason, .. } => reason,
                other => other.to_string(),
            };
            self.error(
                path,
                format!("cannot use `{raw}` in `{path}`: {reason}"),
                "write the path absolute, or starting with `~/`",
            )
        })
    }

    fn push_path(&mut self, list: PathList, pattern: String) {
        match list {
            PathList::DenyRead => self.out.deny_read.push(pattern),
            PathList::AllowRead => self.out.allow_read.push(pattern),
            PathList::AllowWrite => self.out.allow_write.push(pattern),
            PathList::DenyWrite => self.out.deny_write.push(pattern),
        }
    }

    /// What Claude Code resolves relative `sandbox.filesystem` paths against: the project
    /// root for `<project>/.claude/settings*.json`, `~/.claude` for the user's settings.
    fn claude_settings_root(&self) -> Option<PathBuf> {
        let dir = self.ctx.file.as_deref()?.parent()?;
        if dir.file_name()? != ".claude" {
            return None;
        }
        let user = self
            .ctx
            .home
            .as_deref()
            .is_some_and(|home| normalize_lexically(&home.join(".claude")) == dir);
        if user {
            Some(dir.to_path_buf())
        } else {
            dir.parent().map(Path::to_path_buf)
        }
    }
}

/// Why a key cannot be honoured, and what to do.
type Unsupported = (&'static str, &'static str);

const UNIX_SOCKETS: Unsupported = (
    "stockade refuses new Unix sockets in the sandbox (seccomp) and has no exception for \
     paths or for all of them",
    "remove the key (or leave it empty/false); a tool that needs a host socket must run outside \
     the sandbox",
);
const LOCAL_BINDING: Unsupported = (
    "a sandboxed command may listen on the sandbox's own loopback, but nothing outside the \
     sandbox can reach it",
    "remove the key or set it to false",
);
const MACOS_ONLY: Unsupported = (
    "it opens a macOS-only service (XPC, trustd, Apple Events) that does not exist on Linux",
    "remove the key (or leave it empty/false)",
);
const OTHER_PROXY: Unsupported = (
    "stockade filters egress with its own proxy and cannot hand the sandbox's traffic to \
     another one",
    "remove the key and list the domains that proxy allowed in `allowedDomains`",
);
const PARENT_PROXY: Unsupported = (
    "stockade's proxy connects to destinations directly; it cannot chain to an upstream proxy",
    "remove the key, or run stockade where destinations can be reached directly",
);
const TLS_TERMINATE: Unsupported = (
    "stockade does not terminate TLS: tunnels stay end to end",
    "remove the key",
);
const RESOLVED_ADDRESSES: Unsupported = (
    "stockade has no list of addresses a name may not resolve to; it refuses loopback, \
     private, link-local and cloud-metadata addresses for every name already",
    "remove the key",
);
const FS_DISABLED: Unsupported = (
    "stockade always confines the filesystem",
    "remove the key or set it to false",
);
const GIT_CONFIG: Unsupported = (
    "stockade keeps `.git/config` read-only in every writable root",
    "remove the key or set it to false; run `git remote set-url` outside the sandbox",
);
const WEAKER_NESTED: Unsupported = (
    "stockade always gives the sandbox its own /proc and has no weaker mode",
    "remove the key or set it to false",
);
const MASKING: Unsupported = (
    "stockade has no credential masking (sentinel values swapped by the proxy)",
    "use mode `deny` to make the file unreadable (an environment variable stockade does not \
     pass is denied already)",
);

/// The host part of a domain entry: `[v6]` without brackets, or the part before a `:PORT`.
fn host_of(entry: &str) -> &str {
    if let Some(rest) = entry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match entry.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => entry,
    }
}

/// Whether srt counts `path` as a glob (`*`, `?`, `[`, `]`).
fn srt_glob(path: &str) -> bool {
    path.contains(['*', '?', '[', ']'])
}

/// Braces are literal for srt and Claude Code but alternation for stockade: bracket them.
fn escape_braces(text: &str) -> String {
    text.replace('{', "[{]").replace('}', "[}]")
}

/// Glob characters in a literal directory (the current directory, a settings root) must
/// match themselves: bracket them.
fn escape_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}') {
            out.push('[');
            out.push(c);
            out.push(']');
        } else {
            out.push(c);
        }
    }
    out
}

/// The relative pattern `rel` (whose braces are escaped here) beneath the literal directory
/// `base` (whose glob characters are escaped here), lexically normalized. `None` when a path
/// is not UTF-8.
fn join_relative(base: &Path, rel: &str) -> Option<String> {
    let rel = rel.trim_start_matches("./");
    let joined = normalize_lexically(&base.join(rel));
    let base = normalize_lexically(base);
    // Escape only the part that came from `base`; the relative part keeps its globs.
    match joined.strip_prefix(&base) {
        Ok(tail) => {
            let base = escape_literal(base.to_str()?);
            let tail = escape_braces(tail.to_str()?);
            Some(if tail.is_empty() {
                base
            } else if base.ends_with('/') {
                format!("{base}{tail}")
            } else {
                format!("{base}/{tail}")
            })
        }
        // `..` climbed above `base`: what is left of it is escaped with the rest.
        Err(_) if srt_glob(rel) => Some(escape_braces(joined.to_str()?)),
        Err(_) => Some(escape_literal(joined.to_str()?)),
    }
}

#[cfg(test)]
mod tests;
