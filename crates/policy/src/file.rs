//! A policy file as written by a user (`stockade.toml`). Every key is optional; unknown keys,
//! duplicate keys, wrong types and unknown profile names are errors naming line and column.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{known_profiles_hint, PolicyError};
use crate::model::{BackendName, Limits, NetworkMode, ReadScope};
use crate::net::NetList;
use crate::profile::PROFILES;
use crate::strict_json::location;

/// A parsed policy file: a profile name plus patches applied on top of that profile.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct PolicyFile {
    /// Profile to start from; `None` means the default (unless overridden).
    pub profile: Option<String>,
    /// Additions to the filesystem rules.
    pub filesystem: FilesystemPatch,
    /// Additions to the environment rules.
    pub env: EnvPatch,
    /// Network settings.
    pub network: NetworkPatch,
    /// Resource limits; keys given override the profile's.
    pub limits: Limits,
    /// The isolation backend (`backend = "gvisor"`).
    pub backend: Option<BackendName>,
    /// `[credentials.NAME]` tables, each resolved to its route and source.
    pub credentials: Vec<crate::credentials::Credential>,
    /// `agent = "NAME"`: an agent preset ([`crate::presets`]).
    pub agent: Option<String>,
    /// `presets = ["NAME", ...]`: toolchain presets.
    pub presets: Vec<String>,
    /// `hints = true`: every run appends a `<stockade-hint>` block naming what it blocked
    /// (as `--hints` does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hints: Option<bool>,
    /// `review = true`: runs see the workspace through a copy-on-write view and their changes
    /// wait for `stockade apply` (as `--review` does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<bool>,
    /// `[[commands]]`: per-command grants or exclusions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<crate::CommandRule>,
    /// The line of each list entry (TOML files only).
    #[serde(skip)]
    pub lines: crate::file_lines::EntryLines,
}

/// The `[filesystem]` table: lists are appended to the profile's, `read_scope` replaces it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilesystemPatch {
    pub read_scope: Option<ReadScope>,
    pub deny_read: Vec<String>,
    pub read_empty: Vec<String>,
    pub allow_read: Vec<String>,
    pub allow_write: Vec<String>,
    pub deny_write: Vec<String>,
    /// Catalogue entries ([`crate::host_exec::HOST_EXEC`]) to remove from the protected
    /// paths, by their exact name (`.vscode`). Git's files and stockade's own cannot be
    /// removed; any other name is an error.
    pub unprotect: Vec<String>,
}

/// The `[filesystem]` table as deserialized, keeping each `unprotect` entry's span.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawFilesystemPatch {
    read_scope: Option<ReadScope>,
    deny_read: Vec<toml::Spanned<String>>,
    read_empty: Vec<toml::Spanned<String>>,
    allow_read: Vec<toml::Spanned<String>>,
    allow_write: Vec<toml::Spanned<String>>,
    deny_write: Vec<toml::Spanned<String>>,
    unprotect: Vec<toml::Spanned<String>>,
}

/// The `[env]` table: lists are appended, `set` is merged (the file wins).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvPatch {
    pub allow: Vec<String>,
    pub set: BTreeMap<String, String>,
    pub passthrough: Vec<String>,
}

/// The `[network]` table: `mode` replaces the profile's, lists are appended. Entries are
/// kept as written (they are validated when parsed from a file, and normalized by
/// [`crate::resolve()`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkPatch {
    pub mode: Option<NetworkMode>,
    pub allow_domains: Vec<String>,
    pub deny_domains: Vec<String>,
    pub allow_hosts: Vec<String>,
}

/// The `[network]` table as deserialized, keeping each entry's span so an invalid one can be
/// located.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawNetworkPatch {
    mode: Option<NetworkMode>,
    allow_domains: Vec<toml::Spanned<String>>,
    deny_domains: Vec<toml::Spanned<String>>,
    allow_hosts: Vec<toml::Spanned<String>>,
}

/// The file as deserialized, keeping the span of `profile` so a bad name can be located.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicyFile {
    #[serde(default)]
    profile: Option<toml::Spanned<String>>,
    #[serde(default)]
    filesystem: RawFilesystemPatch,
    #[serde(default)]
    env: EnvPatch,
    #[serde(default)]
    network: RawNetworkPatch,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    backend: Option<BackendName>,
    #[serde(default)]
    credentials: BTreeMap<String, toml::Spanned<crate::credentials::CredentialPatch>>,
    #[serde(default)]
    agent: Option<toml::Spanned<String>>,
    #[serde(default)]
    presets: Vec<toml::Spanned<String>>,
    #[serde(default)]
    hints: Option<bool>,
    #[serde(default)]
    review: Option<bool>,
    #[serde(default)]
    commands: Vec<crate::CommandRule>,
}

/// Parses the text of a policy file. `origin` names it in error messages (usually its path).
///
/// # Errors
///
/// [`PolicyError::ParseFile`] for TOML syntax errors, unknown or duplicate keys, values of the
/// wrong type and unknown profile names, with the line and column of the problem.
pub fn parse_policy_file(text: &str, origin: &str) -> Result<PolicyFile, PolicyError> {
    let raw: RawPolicyFile = toml::from_str(text).map_err(|err| toml_error(text, origin, &err))?;
    let profile = match raw.profile {
        None => None,
        Some(spanned) => {
            let span = spanned.span();
            let name = spanned.into_inner();
            if !PROFILES.contains(&name.as_str()) {
                return Err(PolicyError::ParseFile {
                    origin: origin.to_owned(),
                    location: Some(location(text, span.start)),
                    message: format!("unknown profile `{name}`"),
                    hint: Some(known_profiles_hint()),
                });
            }
            Some(name)
        }
    };
    let mut lines = crate::file_lines::EntryLines::default();
    let raw_net = raw.network;
    let mut net_list = |list: NetList, entries: Vec<toml::Spanned<String>>| {
        for e in &entries {
            lines.record(
                text,
                &format!("network.{}", list.key()),
                e.get_ref(),
                e.span().start,
            );
        }
        net_entries(text, origin, list, entries)
    };
    let network = NetworkPatch {
        mode: raw_net.mode,
        allow_domains: net_list(NetList::AllowDomains, raw_net.allow_domains)?,
        deny_domains: net_list(NetList::DenyDomains, raw_net.deny_domains)?,
        allow_hosts: net_list(NetList::AllowHosts, raw_net.allow_hosts)?,
    };
    let raw_fs = raw.filesystem;
    let filesystem = FilesystemPatch {
        read_scope: raw_fs.read_scope,
        deny_read: lines.take(text, "filesystem.deny_read", raw_fs.deny_read),
        read_empty: lines.take(text, "filesystem.read_empty", raw_fs.read_empty),
        allow_read: lines.take(text, "filesystem.allow_read", raw_fs.allow_read),
        allow_write: lines.take(text, "filesystem.allow_write", raw_fs.allow_write),
        deny_write: lines.take(text, "filesystem.deny_write", raw_fs.deny_write),
        unprotect: raw_fs
            .unprotect
            .into_iter()
            .map(|spanned| {
                let start = spanned.span().start;
                lines.record(text, "filesystem.unprotect", spanned.get_ref(), start);
                let name = spanned.into_inner();
                check_unprotect(&name)
                    .map(|()| name)
                    .map_err(|(message, hint)| PolicyError::ParseFile {
                        origin: origin.to_owned(),
                        location: Some(location(text, start)),
                        message,
                        hint: Some(hint),
                    })
            })
            .collect::<Result<_, _>>()?,
    };
    let credentials = raw
        .credentials
        .into_iter()
        .map(|(name, spanned)| {
            let start = spanned.span().start;
            spanned
                .into_inner()
                .credential(&name)
                .map_err(|e| PolicyError::ParseFile {
                    origin: origin.to_owned(),
                    location: Some(location(text, start)),
                    message: e.to_string(),
                    hint: e.hint(),
                })
        })
        .collect::<Result<_, _>>()?;
    // Preset names are checked here, where their place in the file is known.
    let preset_name = |spanned: toml::Spanned<String>, kind: crate::presets::PresetKind| {
        let start = spanned.span().start;
        let name = spanned.into_inner();
        let found = crate::presets::preset(&name).and_then(|p| {
            if p.kind == kind {
                Ok(name.clone())
            } else {
                Err(PolicyError::InvalidValue {
                    key: if kind == crate::presets::PresetKind::Agent {
                        "agent".into()
                    } else {
                        "presets".into()
                    },
                    value: name.clone(),
                    reason: format!(
                        "`{name}` is not {}",
                        match kind {
                            crate::presets::PresetKind::Agent => "an agent (it goes in `presets`)",
                            crate::presets::PresetKind::Toolchain =>
                                "a toolchain (it goes in `agent`)",
                        }
                    ),
                })
            }
        });
        found.map_err(|e| PolicyError::ParseFile {
            origin: origin.to_owned(),
            location: Some(location(text, start)),
            message: e.to_string(),
            hint: e.hint(),
        })
    };
    let agent = raw
        .agent
        .map(|a| preset_name(a, crate::presets::PresetKind::Agent))
        .transpose()?;
    let presets = raw
        .presets
        .into_iter()
        .map(|p| preset_name(p, crate::presets::PresetKind::Toolchain))
        .collect::<Result<_, _>>()?;
    Ok(PolicyFile {
        profile,
        filesystem,
        env: raw.env,
        network,
        limits: raw.limits,
        backend: raw.backend,
        credentials,
        agent,
        presets,
        hints: raw.hints,
        review: raw.review,
        commands: {
            for (i, c) in raw.commands.iter().enumerate() {
                c.validate(i)?;
            }
            raw.commands
        },
        lines,
    })
}

impl PolicyFile {
    /// This file with `over` layered on top, as [`crate::resolve()`] would apply `over` after
    /// it: lists appended (duplicates are dropped when resolved), `env.set` merged (`over`
    /// wins), single values (`profile`, `read_scope`, `mode`, each limit, `backend`, `agent`,
    /// `hints`, `review`) replaced when `over` gives them, credentials replaced by name,
    /// presets and `[[commands]]` appended. The line of each list entry is `over`'s when it
    /// writes the entry too. How the user's policy file, the project's and `--policy` combine.
    #[must_use]
    pub fn layered(mut self, over: PolicyFile) -> PolicyFile {
        fn or<T>(base: &mut Option<T>, over: Option<T>) {
            if over.is_some() {
                *base = over;
            }
        }
        or(&mut self.profile, over.profile);
        let (fs, o) = (&mut self.filesystem, over.filesystem);
        or(&mut fs.read_scope, o.read_scope);
        fs.deny_read.extend(o.deny_read);
        fs.read_empty.extend(o.read_empty);
        fs.allow_read.extend(o.allow_read);
        fs.allow_write.extend(o.allow_write);
        fs.deny_write.extend(o.deny_write);
        fs.unprotect.extend(o.unprotect);
        self.env.allow.extend(over.env.allow);
        self.env.set.extend(over.env.set);
        self.env.passthrough.extend(over.env.passthrough);
        let (net, o) = (&mut self.network, over.network);
        or(&mut net.mode, o.mode);
        net.allow_domains.extend(o.allow_domains);
        net.deny_domains.extend(o.deny_domains);
        net.allow_hosts.extend(o.allow_hosts);
        let (l, o) = (&mut self.limits, over.limits);
        or(&mut l.timeout, o.timeout);
        or(&mut l.tmp_size, o.tmp_size);
        or(&mut l.files, o.files);
        or(&mut l.memory, o.memory);
        or(&mut l.pids, o.pids);
        or(&mut l.cpu, o.cpu);
        or(&mut l.output_limit, o.output_limit);
        or(&mut l.disk, o.disk);
        or(&mut self.backend, over.backend);
        for c in over.credentials {
            match self.credentials.iter_mut().find(|o| o.name == c.name) {
                Some(o) => *o = c,
                None => self.credentials.push(c),
            }
        }
        or(&mut self.agent, over.agent);
        self.presets.extend(over.presets);
        or(&mut self.hints, over.hints);
        or(&mut self.review, over.review);
        self.commands.extend(over.commands);
        self.lines.layer(over.lines);
        self
    }
}

/// Where the user's own policy file is: `$XDG_CONFIG_HOME/stockade/policy.toml`, the variable
/// taken when it is an absolute path (as the XDG base directory specification says), else
/// `$HOME/.config/stockade/policy.toml`. `None` without either.
pub fn user_policy_path(
    xdg_config_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Option<std::path::PathBuf> {
    let absolute =
        |v: Option<&std::ffi::OsStr>| v.map(std::path::PathBuf::from).filter(|p| p.is_absolute());
    let config = absolute(xdg_config_home).or_else(|| absolute(home).map(|h| h.join(".config")))?;
    Some(config.join("stockade").join("policy.toml"))
}

/// Whether `name` may be listed in `filesystem.unprotect`: a catalogue entry, by its exact
/// name. Otherwise the message and hint of the error.
pub(crate) fn check_unprotect(name: &str) -> Result<(), (String, String)> {
    if crate::host_exec::host_exec_entry(name).is_some() {
        return Ok(());
    }
    if crate::profile::CORE_PROTECTED.contains(&name) {
        return Err((
            format!("`{name}` cannot be unprotected, in `filesystem.unprotect`"),
            "git's hooks and config and stockade's own configuration stay protected in every policy".to_owned(),
        ));
    }
    Err((
        format!("unknown catalogue entry `{name}`, in `filesystem.unprotect`"),
        "name an entry exactly as `stockade policy show --json` lists it under protected_paths (e.g. \".vscode\")".to_owned(),
    ))
}

/// Validates the entries of one `[network]` list, locating the first invalid one.
fn net_entries(
    text: &str,
    origin: &str,
    list: NetList,
    entries: Vec<toml::Spanned<String>>,
) -> Result<Vec<String>, PolicyError> {
    entries
        .into_iter()
        .map(|spanned| {
            let start = spanned.span().start;
            let entry = spanned.into_inner();
            match list.canonicalize(&entry) {
                Ok(_) => Ok(entry),
                Err(err) => Err(PolicyError::ParseFile {
                    origin: origin.to_owned(),
                    location: Some(location(text, start)),
                    message: format!(
                        "invalid entry `{entry}`: {}, in `{}`",
                        err.reason,
                        list.field()
                    ),
                    hint: Some(err.hint),
                }),
            }
        })
        .collect()
}

/// Reads and parses the policy file at `path`: stockade's TOML, or, when the file is JSON
/// (named `*.json`, or starting with `{`), srt's or Claude Code's sandbox settings (see
/// [`crate::settings_json`]; relative paths in them are resolved against this process's
/// current directory, as srt and Claude Code do).
///
/// # Errors
///
/// [`PolicyError::ReadFile`] when the file cannot be read (or is not UTF-8), otherwise as
/// [`parse_policy_file`] or [`crate::parse_settings_json`].
pub fn read_policy_file(path: &Path) -> Result<PolicyFile, PolicyError> {
    let text = std::fs::read_to_string(path).map_err(|source| PolicyError::ReadFile {
        path: path.to_path_buf(),
        source,
    })?;
    let origin = path.display().to_string();
    if crate::settings_json::is_json(path, &text) {
        let ctx = crate::settings_json::SettingsContext::of_process(path);
        return crate::settings_json::parse_settings_json(&text, &origin, &ctx);
    }
    parse_policy_file(&text, &origin)
}

fn toml_error(text: &str, origin: &str, err: &toml::de::Error) -> PolicyError {
    let span = err.span();
    let mut message = err.message().trim_end().to_owned();
    // Name the offending key when the parser's message does not (duplicate keys).
    if let Some(key) = span.as_ref().and_then(|s| text.get(s.clone())) {
        let key = key.trim();
        if message.starts_with("duplicate key") && !key.is_empty() && !message.contains(key) {
            message = format!("duplicate key `{key}`");
        }
    }
    let hint = message
        .find("expected one of ")
        .map(|at| {
            format!(
                "known keys here: {}",
                &message[at + "expected one of ".len()..]
            )
        })
        .or_else(|| {
            // A table with a single known key: "expected `timeout`".
            message
                .find("expected `")
                .map(|at| format!("known keys here: {}", &message[at + "expected ".len()..]))
        })
        .or_else(|| {
            message
                .contains("there are no fields")
                .then(|| "this table accepts no keys yet; remove the key".to_owned())
        })
        .or_else(|| {
            message
                .starts_with("duplicate key")
                .then(|| "each key may appear only once; remove one of them".to_owned())
        });
    if let Some(keys) = key_path(err) {
        message = format!("{message}, in `{keys}`");
    }
    PolicyError::ParseFile {
        origin: origin.to_owned(),
        location: span.map(|s| location(text, s.start)),
        message,
        hint,
    }
}

/// The dotted key path the error is about, when the parser knows it. `toml` keeps it private
/// but prints it (as "in `a.b`") when the error carries no input text.
fn key_path(err: &toml::de::Error) -> Option<String> {
    let mut bare = err.clone();
    bare.set_input(None);
    let shown = bare.to_string();
    let line = shown.lines().rev().find(|l| l.starts_with("in `"))?;
    let keys = line.strip_prefix("in `")?.strip_suffix('`')?;
    (!keys.is_empty()).then(|| keys.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Location;

    fn err(text: &str) -> PolicyError {
        parse_policy_file(text, "stockade.toml").unwrap_err()
    }

    fn located(err: &PolicyError) -> (usize, usize) {
        match err {
            PolicyError::ParseFile {
                location: Some(loc),
                ..
            } => (loc.line, loc.column),
            other => panic!("no location in {other:?}"),
        }
    }

    const EXAMPLE: &str = r#"
profile = "workspace-write"
[filesystem]
deny_read = ["~/secrets", ".env.local"]
allow_write = ["~/.cache/pip"]
[env]
allow = ["RUST_LOG"]
set = { FOO = "bar" }
passthrough = ["GITHUB_TOKEN"]
[network]
mode = "none"
[limits]
timeout = 120
"#;

    #[test]
    fn parses_full_example() {
        let file = parse_policy_file(EXAMPLE, "stockade.toml").unwrap();
        assert_eq!(file.profile.as_deref(), Some("workspace-write"));
        assert_eq!(file.filesystem.deny_read, ["~/secrets", ".env.local"]);
        assert_eq!(file.filesystem.allow_write, ["~/.cache/pip"]);
        assert!(file.filesystem.allow_read.is_empty());
        assert!(file.filesystem.deny_write.is_empty());
        assert_eq!(file.filesystem.read_scope, None);
        assert_eq!(file.env.allow, ["RUST_LOG"]);
        assert_eq!(file.env.set.get("FOO").map(String::as_str), Some("bar"));
        assert_eq!(file.env.passthrough, ["GITHUB_TOKEN"]);
        assert_eq!(file.network.mode, Some(NetworkMode::None));
    }

    #[test]
    fn empty_file_is_all_defaults() {
        assert_eq!(parse_policy_file("", "x").unwrap(), PolicyFile::default());
        assert_eq!(
            parse_policy_file("# nothing\n", "x").unwrap(),
            PolicyFile::default()
        );
    }

    #[test]
    fn read_scope_values() {
        let file = parse_policy_file("[filesystem]\nread_scope = \"allow-list\"", "x").unwrap();
        assert_eq!(file.filesystem.read_scope, Some(ReadScope::AllowList));
        let file = parse_policy_file("[filesystem]\nread_scope = \"host\"", "x").unwrap();
        assert_eq!(file.filesystem.read_scope, Some(ReadScope::Host));
    }

    #[test]
    fn backend_is_named_or_refused() {
        let f = parse_policy_file("backend = \"gvisor\"\n", "stockade.toml").expect("parses");
        assert_eq!(f.backend, Some(BackendName::Gvisor));
        let f = parse_policy_file("", "stockade.toml").expect("parses");
        assert_eq!(f.backend, None);
        for (name, backend) in [
            ("podman", BackendName::Podman),
            ("docker", BackendName::Docker),
        ] {
            let f = parse_policy_file(&format!("backend = \"{name}\"\n"), "stockade.toml")
                .expect("parses");
            assert_eq!(f.backend, Some(backend));
        }
        let e = parse_policy_file("backend = \"firecracker\"\n", "stockade.toml")
            .expect_err("an unknown backend is refused")
            .to_string();
        assert!(e.contains("unknown variant `firecracker`"), "{e}");
    }

    #[test]
    fn unknown_top_level_key() {
        let e = err("profile = \"read-only\"\nfoo = 1\n");
        assert_eq!(located(&e), (2, 1));
        assert_eq!(
            e.to_string(),
            "stockade.toml: line 2, column 1: unknown field `foo`, expected one of \
             `profile`, `filesystem`, `env`, `network`, `limits`, `backend`, `credentials`, `agent`, `presets`, `hints`, `review`, `commands`"
        );
        assert_eq!(e.code(), "E_POLICY_INVALID");
        assert_eq!(
            e.hint().as_deref(),
            Some("known keys here: `profile`, `filesystem`, `env`, `network`, `limits`, `backend`, `credentials`, `agent`, `presets`, `hints`, `review`, `commands`")
        );
    }

    #[test]
    fn unknown_nested_key_names_line_and_column() {
        let e = err("[filesystem]\ndeny_read = []\n  bogus = 2\n");
        assert_eq!(located(&e), (3, 3));
        let msg = e.to_string();
        assert!(
            msg.starts_with("stockade.toml: line 3, column 3: unknown field `bogus`"),
            "{msg}"
        );
        assert!(e.hint().unwrap().contains("`allow_write`"));
    }

    #[test]
    fn unknown_key_in_env_and_network() {
        assert_eq!(located(&err("[env]\nallowed = []")), (2, 1));
        assert!(err("[network]\nproxy = 1").to_string().contains("`proxy`"));
    }

    #[test]
    fn limits_timeout_parses() {
        let file = parse_policy_file("[limits]\ntimeout = 30\n", "x").unwrap();
        assert_eq!(file.limits.timeout, Some(30));
        assert!(parse_policy_file("[limits]\ntimeout = -1\n", "x").is_err());
        assert!(parse_policy_file("[limits]\ntimeout = \"1m\"\n", "x").is_err());
    }

    #[test]
    fn limits_memory_pids_cpu_output_parse() {
        let file = parse_policy_file(
            "[limits]\nmemory = \"512M\"\npids = 64\ncpu = 0.5\noutput_limit = \"1M\"\n",
            "x",
        )
        .unwrap();
        assert_eq!(file.limits.memory.as_deref(), Some("512M"));
        assert_eq!(file.limits.pids, Some(64));
        assert_eq!(file.limits.cpu.map(|c| c.millis()), Some(500));
        assert_eq!(file.limits.output_limit.as_deref(), Some("1M"));
        let two = parse_policy_file("[limits]\ncpu = 2\n", "x").unwrap();
        assert_eq!(two.limits.cpu.map(|c| c.millis()), Some(2000));
        for bad in [
            "cpu = 0",
            "cpu = 0.001",
            "cpu = -1",
            "cpu = \"half\"",
            "pids = -1",
        ] {
            assert!(
                parse_policy_file(&format!("[limits]\n{bad}\n"), "x").is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn unknown_key_in_limits() {
        let e = err("[limits]\nswap = 1\n");
        assert_eq!(located(&e), (2, 1));
        assert!(e.to_string().contains("unknown field `swap`"));
        assert!(e.hint().is_some());
    }

    #[test]
    fn duplicate_key_names_key() {
        let e = err("profile = \"read-only\"\nprofile = \"read-only\"\n");
        assert_eq!(
            e.to_string(),
            "stockade.toml: line 2, column 1: duplicate key `profile`"
        );
    }

    #[test]
    fn duplicate_key_in_inline_table() {
        let e = err("[env]\nset = { A = \"1\", A = \"2\" }");
        assert_eq!(located(&e), (2, 18));
        assert!(e.to_string().contains("duplicate key `A`"), "{e}");
    }

    #[test]
    fn duplicate_table() {
        let e = err("[filesystem]\n[filesystem]\n");
        assert_eq!(located(&e), (2, 2));
        assert!(e.to_string().contains("duplicate key `filesystem`"), "{e}");
    }

    #[test]
    fn wrong_type_names_line_and_key() {
        let e = err("[filesystem]\ndeny_read = \"x\"\n");
        assert_eq!(located(&e), (2, 13));
        let msg = e.to_string();
        assert!(
            msg.contains("invalid type: string \"x\", expected a sequence"),
            "{msg}"
        );
        assert!(msg.ends_with("in `filesystem.deny_read`"), "{msg}");
    }

    #[test]
    fn wrong_type_inside_list_and_map() {
        assert_eq!(
            located(&err("[filesystem]\ndeny_read = [\"a\", 1]")),
            (2, 19)
        );
        let e = err("[env]\nset = { FOO = 1 }");
        assert_eq!(located(&e), (2, 15));
        assert!(e.to_string().contains("in `env.set.FOO`"), "{e}");
    }

    #[test]
    fn wrong_enum_value() {
        let e = err("[network]\nmode = \"full\"");
        assert_eq!(located(&e), (2, 8));
        assert!(
            e.to_string()
                .contains("unknown variant `full`, expected one of `none`, `proxy`, `host`"),
            "{e}"
        );
        let e = err("[filesystem]\nread_scope = \"all\"");
        assert!(e.to_string().contains("`host` or `allow-list`"));
    }

    const NETWORK: &str = r#"
[network]
mode = "proxy"
allow_domains = ["Example.com", "*.docs.rs:443"]
deny_domains = ["*.com"]
allow_hosts = ["127.0.0.1:5432", "[::1]:8080", "10.1.2.0/24", "db.internal:5432"]
"#;

    #[test]
    fn network_table() {
        let file = parse_policy_file(NETWORK, "x").unwrap();
        let net = &file.network;
        assert_eq!(net.mode, Some(NetworkMode::Proxy));
        // Kept as written; resolution canonicalizes.
        assert_eq!(net.allow_domains, ["Example.com", "*.docs.rs:443"]);
        assert_eq!(net.deny_domains, ["*.com"]);
        assert_eq!(
            net.allow_hosts,
            [
                "127.0.0.1:5432",
                "[::1]:8080",
                "10.1.2.0/24",
                "db.internal:5432"
            ]
        );
        for (text, mode) in [
            ("none", NetworkMode::None),
            ("proxy", NetworkMode::Proxy),
            ("host", NetworkMode::Host),
        ] {
            let file = parse_policy_file(&format!("[network]\nmode = \"{text}\""), "x").unwrap();
            assert_eq!(file.network.mode, Some(mode));
        }
        let file = parse_policy_file("[network]\n", "x").unwrap();
        assert_eq!(file.network, NetworkPatch::default());
    }

    #[test]
    fn network_unknown_and_duplicate_keys() {
        let e = err("[network]\nmode = \"proxy\"\nallow_domain = [\"a.test\"]\n");
        assert_eq!(located(&e), (3, 1));
        assert_eq!(
            e.to_string(),
            "stockade.toml: line 3, column 1: unknown field `allow_domain`, expected one of \
             `mode`, `allow_domains`, `deny_domains`, `allow_hosts`, in `network`"
        );
        assert_eq!(
            e.hint().as_deref(),
            Some("known keys here: `mode`, `allow_domains`, `deny_domains`, `allow_hosts`")
        );
        let e = err("[network]\nallow_hosts = []\n\nallow_hosts = [\"::1\"]\n");
        assert_eq!(located(&e), (4, 1));
        assert!(e.to_string().contains("duplicate key `allow_hosts`"), "{e}");
        let e = err("[network]\ndeny_domains = \"evil.test\"\n");
        assert_eq!(located(&e), (2, 16));
        assert!(e.to_string().ends_with("in `network.deny_domains`"), "{e}");
        let e = err("[network]\nallow_hosts = [\"::1\", 5432]\n");
        assert_eq!(located(&e), (2, 23));
    }

    #[test]
    fn network_invalid_entries_name_line_and_column() {
        let e = err("[network]\nmode = \"proxy\"\nallow_domains = [\"ok.test\", \"*.co.uk\"]\n");
        assert_eq!(located(&e), (3, 29));
        assert_eq!(
            e.to_string(),
            "stockade.toml: line 3, column 29: invalid entry `*.co.uk`: it opens the whole \
             public suffix `co.uk`, in `network.allow_domains`"
        );
        assert_eq!(e.code(), "E_POLICY_INVALID");
        assert!(e.hint().unwrap().contains("`deny_domains` may be broad"));

        // Broad patterns are fine in deny_domains, `*` alone is not.
        assert!(parse_policy_file("[network]\ndeny_domains = [\"*.com\", \"co.uk\"]", "x").is_ok());
        let e = err("[network]\ndeny_domains = [\n  \"evil.test\",\n  \"*\",\n]\n");
        assert_eq!(located(&e), (4, 3));
        assert!(e
            .to_string()
            .contains("invalid entry `*`: `*` alone would match every name"));

        let e = err("[network]\nallow_hosts = [\"10.1.2.3/24\"]");
        assert_eq!(located(&e), (2, 16));
        assert!(
            e.to_string().contains("`10.1.2.3/24` has host bits set"),
            "{e}"
        );
        assert_eq!(
            e.hint().as_deref(),
            Some("write the network address: `10.1.2.0/24`")
        );

        let e = err("[network]\nallow_domains = [\"127.0.0.1\"]");
        assert!(e.hint().unwrap().contains("go in `allow_hosts`"), "{e}");
        let e = err("[network]\nallow_domains = [\"example.com:0\"]");
        assert!(
            e.to_string()
                .contains("port `0` is not between 1 and 65535"),
            "{e}"
        );
        let e = err("[network]\nallow_hosts = [\"*.internal\"]");
        assert!(
            e.hint()
                .unwrap()
                .contains("put `*.` patterns in `allow_domains`"),
            "{e}"
        );
    }

    #[test]
    fn unknown_profile_names_line_and_column() {
        let e = err("# comment\n  profile = \"yolo\"\n");
        assert_eq!(
            e.to_string(),
            "stockade.toml: line 2, column 13: unknown profile `yolo`"
        );
        assert_eq!(
            e.hint().as_deref(),
            Some("known profiles: workspace-write, read-only")
        );
    }

    #[test]
    fn syntax_error_has_location() {
        let e = err("profile = \n");
        assert_eq!(located(&e).0, 1);
        assert!(e.to_string().starts_with("stockade.toml: line 1, column "));
    }

    #[test]
    fn columns_count_characters() {
        // "é" is two bytes but one column: the second key starts at character 20 (byte 21).
        let e = err("[env]\nset = { \"é\" = \"1\", \"é\" = \"2\" }");
        assert_eq!(located(&e), (2, 20));
    }

    #[test]
    fn location_conversion() {
        let text = "ab\ncd\n\nxy";
        assert_eq!(location(text, 0), Location { line: 1, column: 1 });
        assert_eq!(location(text, 1), Location { line: 1, column: 2 });
        assert_eq!(location(text, 3), Location { line: 2, column: 1 });
        assert_eq!(location(text, 7), Location { line: 4, column: 1 });
        assert_eq!(location(text, 999), Location { line: 4, column: 3 });
    }

    #[test]
    fn read_file_from_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stockade.toml");
        std::fs::write(&path, EXAMPLE).unwrap();
        let file = read_policy_file(&path).unwrap();
        assert_eq!(file.env.passthrough, ["GITHUB_TOKEN"]);

        std::fs::write(&path, "\n\nnope = 1\n").unwrap();
        let e = read_policy_file(&path).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: line 3, column 1: unknown field `nope`, expected one of `profile`, \
                 `filesystem`, `env`, `network`, `limits`, `backend`, `credentials`, `agent`, `presets`, `hints`, `review`, `commands`",
                path.display()
            )
        );
    }

    #[test]
    fn the_user_policy_is_in_the_xdg_config_home() {
        use std::ffi::OsStr;
        let path = |x: Option<&str>, h: Option<&str>| {
            user_policy_path(x.map(OsStr::new), h.map(OsStr::new))
        };
        assert_eq!(
            path(Some("/x/cfg"), Some("/h")),
            Some("/x/cfg/stockade/policy.toml".into())
        );
        assert_eq!(
            path(None, Some("/h")),
            Some("/h/.config/stockade/policy.toml".into())
        );
        // A relative XDG_CONFIG_HOME is ignored, as the specification says.
        assert_eq!(
            path(Some("cfg"), Some("/h")),
            Some("/h/.config/stockade/policy.toml".into())
        );
        assert_eq!(path(Some(""), Some("rel")), None);
        assert_eq!(path(None, None), None);
    }

    #[test]
    fn read_missing_file_names_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.toml");
        let e = read_policy_file(&path).unwrap_err();
        assert!(matches!(e, PolicyError::ReadFile { .. }));
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!("failed to read policy file {}: ", path.display())),
            "{msg}"
        );
        assert_eq!(e.code(), "E_POLICY_INVALID");
        assert!(e.hint().is_some());
    }
}
