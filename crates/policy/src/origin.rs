//! Where each part of a resolved policy came from: its profile, a preset, the policy file or a
//! command-line flag (`stockade policy show` says it beside each entry). Found by looking the
//! resolved entries up in what [`crate::resolve()`] was given, in its order of precedence:
//! flags, then the file, then the presets, then the profile.
//!
//! ```
//! use policy::origin::{Field, Origin, Origins, Setting};
//!
//! let file = policy::parse_policy_file("[network]\nallow_domains = [\"a.example\"]\n", "x.toml")?;
//! let flags = policy::Overrides {
//!     allow_domains: vec!["B.example".into()],
//!     timeout: Some(30),
//!     ..Default::default()
//! };
//! let origins = Origins::new(Some(&file), &flags);
//! assert_eq!(origins.entry(Field::AllowDomains, "a.example"), Origin::PolicyFile);
//! // Network entries are compared in their canonical form, as the policy keeps them.
//! assert_eq!(origins.entry(Field::AllowDomains, "b.example"), Origin::Flag);
//! assert_eq!(origins.setting(Setting::Timeout), Origin::Flag);
//! assert_eq!(origins.setting(Setting::Memory), Origin::Profile);
//! # Ok::<(), policy::PolicyError>(())
//! ```

use crate::file::PolicyFile;
use crate::model::Policy;
use crate::net::NetList;
use crate::resolve::Overrides;

/// Where an entry or a setting came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The profile the policy started from (built-in data).
    Profile,
    /// A preset (`--agent`, `--preset`, or `agent`/`presets` in the policy file), by name.
    Preset(&'static str),
    /// The policy file (`--policy`).
    PolicyFile,
    /// A command-line flag.
    Flag,
    /// Added for a credential: a masked credential's hosts are allowed domains.
    Credential,
}

impl std::fmt::Display for Origin {
    /// As `policy show` prints it: `profile`, `preset claude-code`, `policy file`, ...
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Profile => f.write_str("profile"),
            Origin::Preset(name) => write!(f, "preset {name}"),
            Origin::PolicyFile => f.write_str("policy file"),
            Origin::Flag => f.write_str("flag"),
            Origin::Credential => f.write_str("credential"),
        }
    }
}

/// The lists of a policy, whose entries each have an origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    DenyRead,
    ReadEmpty,
    AllowRead,
    AllowWrite,
    DenyWrite,
    /// `env.allow`.
    EnvAllow,
    /// `env.passthrough` (`--env NAME`).
    EnvPassthrough,
    /// The names of `env.set` (`--env NAME=VALUE`).
    EnvSet,
    AllowDomains,
    DenyDomains,
    AllowHosts,
    /// The names of the credentials.
    Credentials,
}

impl Field {
    /// The key path of the policy file's list (`filesystem.deny_read`), for the lists whose
    /// entries' lines are kept (the filesystem and network lists).
    pub fn file_key(self) -> Option<&'static str> {
        Some(match self {
            Field::DenyRead => "filesystem.deny_read",
            Field::ReadEmpty => "filesystem.read_empty",
            Field::AllowRead => "filesystem.allow_read",
            Field::AllowWrite => "filesystem.allow_write",
            Field::DenyWrite => "filesystem.deny_write",
            Field::AllowDomains => "network.allow_domains",
            Field::DenyDomains => "network.deny_domains",
            Field::AllowHosts => "network.allow_hosts",
            Field::EnvAllow | Field::EnvPassthrough | Field::EnvSet | Field::Credentials => {
                return None
            }
        })
    }
}

/// The single-valued settings of a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Profile,
    ReadScope,
    NetworkMode,
    Backend,
    Timeout,
    TmpSize,
    Files,
    Memory,
    Pids,
    Cpu,
    OutputLimit,
}

/// Which of the policy files a layer is, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerKind {
    /// The user's own (`$XDG_CONFIG_HOME/stockade/policy.toml`).
    User,
    /// The workspace's `stockade.toml`, approved with `stockade trust approve`.
    Project,
    /// `--policy FILE`.
    Given,
}

impl std::fmt::Display for LayerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LayerKind::User => "user policy",
            LayerKind::Project => "project policy",
            LayerKind::Given => "--policy",
        })
    }
}

/// One of the policy files a policy was resolved from ([`PolicyFile::layered`] in the order
/// of [`LayerKind`]).
#[derive(Debug, Clone)]
pub struct Layer {
    pub kind: LayerKind,
    pub path: std::path::PathBuf,
    pub file: PolicyFile,
}

/// The inputs of one [`crate::resolve()`], to ask where its result's parts came from.
#[derive(Debug, Clone)]
pub struct Origins<'a> {
    file: Option<&'a PolicyFile>,
    /// The files the policy file was layered from (empty: one file, or none).
    layers: &'a [Layer],
    flags: &'a Overrides,
    /// The profile alone (`None`: an unknown profile, which resolving refuses anyway).
    base: Option<Policy>,
    /// Each preset resolved, with the profile and that preset alone.
    presets: Vec<(&'static str, Policy)>,
}

impl<'a> Origins<'a> {
    /// The policy file and the flags that were resolved (the profile and the presets are
    /// what is left).
    pub fn new(file: Option<&'a PolicyFile>, flags: &'a Overrides) -> Self {
        let profile = flags
            .profile
            .as_deref()
            .or_else(|| file.and_then(|f| f.profile.as_deref()))
            .unwrap_or(crate::profile::DEFAULT_PROFILE);
        let base = crate::profile::profile(profile).ok();
        let agent = flags
            .agent
            .clone()
            .or_else(|| file.and_then(|f| f.agent.clone()));
        let names = agent
            .into_iter()
            .chain(file.iter().flat_map(|f| f.presets.iter().cloned()))
            .chain(flags.presets.iter().cloned());
        let presets = names
            .filter_map(|name| {
                let preset = crate::presets::preset(&name).ok()?;
                let mut alone = base.clone()?;
                crate::presets::apply(&mut alone, &[name]).ok()?;
                Some((preset.name, alone))
            })
            .collect();
        Origins {
            file,
            layers: &[],
            flags,
            base,
            presets,
        }
    }

    /// The same, knowing which files the policy file was layered from, to say which of them
    /// gave an entry or a setting ([`Origins::entry_layer`], [`Origins::setting_layer`]).
    #[must_use]
    pub fn with_layers(mut self, layers: &'a [Layer]) -> Self {
        self.layers = layers;
        self
    }

    /// The policy file that gave `entry` of `field` (the last one that lists it), when the
    /// layers are known.
    pub fn entry_layer(&self, field: Field, entry: &str) -> Option<&'a Layer> {
        self.layers.iter().rev().find(|l| {
            file_entries(&l.file, field)
                .iter()
                .any(|given| same_entry(field, given, entry))
        })
    }

    /// The policy file that set `setting` (the last one that gives it), when the layers are
    /// known.
    pub fn setting_layer(&self, setting: Setting) -> Option<&'a Layer> {
        self.layers
            .iter()
            .rev()
            .find(|l| file_sets(&l.file, setting))
    }

    /// The preset that put `entry` in `field`, if one did (the profile alone has no such
    /// entry).
    fn preset_of(&self, field: Field, entry: &str) -> Option<Origin> {
        let has = |p: &Policy| policy_entries(p, field).iter().any(|e| e == entry);
        if self.base.as_ref().is_some_and(has) {
            return None;
        }
        self.presets
            .iter()
            .find(|(_, p)| has(p))
            .map(|(name, _)| Origin::Preset(name))
    }

    /// Where the entry `entry` of the resolved policy's list `field` came from.
    pub fn entry(&self, field: Field, entry: &str) -> Origin {
        let flags = self.flag_entries(field);
        let file = self
            .file
            .map(|f| file_entries(f, field))
            .unwrap_or_default();
        let same = |given: &String| same_entry(field, given, entry);
        if flags.iter().any(same) {
            Origin::Flag
        } else if file.iter().any(same) {
            Origin::PolicyFile
        } else if let Some(preset) = self.preset_of(field, entry) {
            preset
        } else if field == Field::AllowDomains && !self.profile_has_allowed_domain(entry) {
            // Nothing else adds allowed domains: a masked credential's hosts.
            Origin::Credential
        } else {
            Origin::Profile
        }
    }

    /// Where the setting `setting` of the resolved policy came from.
    pub fn setting(&self, setting: Setting) -> Origin {
        let f = self.flags;
        let by_flag = match setting {
            Setting::Profile => f.profile.is_some(),
            Setting::ReadScope => false,
            Setting::NetworkMode => f.net.is_some(),
            Setting::Backend => f.backend.is_some(),
            Setting::Timeout => f.timeout.is_some(),
            Setting::TmpSize => f.tmp_size.is_some(),
            Setting::Files => f.files.is_some(),
            Setting::Memory => f.memory.is_some(),
            Setting::Pids => f.pids.is_some(),
            Setting::Cpu => f.cpu.is_some(),
            Setting::OutputLimit => f.output_limit.is_some(),
        };
        let in_file = self.file.is_some_and(|file| file_sets(file, setting));
        if by_flag {
            Origin::Flag
        } else if in_file {
            Origin::PolicyFile
        } else if let Some(preset) = self.preset_setting(setting) {
            preset
        } else if setting == Setting::NetworkMode && self.any_credential() {
            // Credentials travel through the proxy: mode `none` became `proxy` for them.
            Origin::Credential
        } else {
            Origin::Profile
        }
    }

    /// The line of the policy file (TOML) that wrote the entry `entry` of `field`, if the file
    /// gave it (`None` too for a JSON settings file, which carries no lines).
    pub fn file_line(&self, field: Field, entry: &str) -> Option<usize> {
        let key = field.file_key()?;
        self.file?
            .lines
            .find(key, |given| same_entry(field, given, entry))
            .map(|(_, line)| line)
    }

    /// Whether any credential was asked for (flag, file or preset).
    fn any_credential(&self) -> bool {
        !self.flags.credentials.is_empty()
            || self.file.is_some_and(|f| !f.credentials.is_empty())
            || self.presets.iter().any(|(_, p)| !p.credentials.is_empty())
    }

    /// The preset that changed `setting` from the profile's, if one did.
    fn preset_setting(&self, setting: Setting) -> Option<Origin> {
        let base = self.base.as_ref()?;
        let changed = |p: &Policy| match setting {
            Setting::NetworkMode => p.network.mode != base.network.mode,
            Setting::Timeout => p.limits.timeout != base.limits.timeout,
            _ => false,
        };
        self.presets
            .iter()
            .find(|(_, p)| changed(p))
            .map(|(name, _)| Origin::Preset(name))
    }

    /// The entries the flags gave for `field`.
    fn flag_entries(&self, field: Field) -> Vec<String> {
        let f = self.flags;
        match field {
            Field::DenyRead => f.deny_read.clone(),
            Field::ReadEmpty => Vec::new(),
            Field::AllowRead => f.allow_read.clone(),
            Field::AllowWrite => f.allow_write.clone(),
            Field::DenyWrite => f.deny_write.clone(),
            Field::EnvAllow => Vec::new(),
            Field::EnvPassthrough => f.env.iter().filter(|e| !e.contains('=')).cloned().collect(),
            Field::EnvSet => f
                .env
                .iter()
                .filter_map(|e| e.split_once('=').map(|(name, _)| name.to_owned()))
                .collect(),
            Field::AllowDomains => f.allow_domains.clone(),
            Field::DenyDomains => f.deny_domains.clone(),
            Field::AllowHosts => f.allow_hosts.clone(),
            Field::Credentials => f
                .credentials
                .iter()
                .map(|c| c.split_once('=').map_or(c.as_str(), |(name, _)| name))
                .map(str::to_owned)
                .collect(),
        }
    }

    /// Whether the profile the policy started from allows `entry` itself.
    fn profile_has_allowed_domain(&self, entry: &str) -> bool {
        self.base.as_ref().is_some_and(|p| {
            p.network
                .allow_domains
                .iter()
                .any(|d| same_entry(Field::AllowDomains, d, entry))
        })
    }
}

/// The entries of `field` in a resolved (or partly resolved) policy.
fn policy_entries(p: &Policy, field: Field) -> Vec<String> {
    let fs = &p.filesystem;
    match field {
        Field::DenyRead => fs.deny_read.clone(),
        Field::ReadEmpty => fs.read_empty.clone(),
        Field::AllowRead => fs.allow_read.clone(),
        Field::AllowWrite => fs.allow_write.clone(),
        Field::DenyWrite => fs.deny_write.clone(),
        Field::EnvAllow => p.env.allow.clone(),
        Field::EnvPassthrough => p.env.passthrough.clone(),
        Field::EnvSet => p.env.set.keys().cloned().collect(),
        Field::AllowDomains => p.network.allow_domains.clone(),
        Field::DenyDomains => p.network.deny_domains.clone(),
        Field::AllowHosts => p.network.allow_hosts.clone(),
        Field::Credentials => p.credentials.iter().map(|c| c.name.clone()).collect(),
    }
}

/// Whether the policy file gives `setting`.
fn file_sets(file: &PolicyFile, setting: Setting) -> bool {
    let l = &file.limits;
    match setting {
        Setting::Profile => file.profile.is_some(),
        Setting::ReadScope => file.filesystem.read_scope.is_some(),
        Setting::NetworkMode => file.network.mode.is_some(),
        Setting::Backend => file.backend.is_some(),
        Setting::Timeout => l.timeout.is_some(),
        Setting::TmpSize => l.tmp_size.is_some(),
        Setting::Files => l.files.is_some(),
        Setting::Memory => l.memory.is_some(),
        Setting::Pids => l.pids.is_some(),
        Setting::Cpu => l.cpu.is_some(),
        Setting::OutputLimit => l.output_limit.is_some(),
    }
}

/// The entries the policy file gave for `field`.
fn file_entries(file: &PolicyFile, field: Field) -> Vec<String> {
    let fs = &file.filesystem;
    match field {
        Field::DenyRead => fs.deny_read.clone(),
        Field::ReadEmpty => fs.read_empty.clone(),
        Field::AllowRead => fs.allow_read.clone(),
        Field::AllowWrite => fs.allow_write.clone(),
        Field::DenyWrite => fs.deny_write.clone(),
        Field::EnvAllow => file.env.allow.clone(),
        Field::EnvPassthrough => file.env.passthrough.clone(),
        Field::EnvSet => file.env.set.keys().cloned().collect(),
        Field::AllowDomains => file.network.allow_domains.clone(),
        Field::DenyDomains => file.network.deny_domains.clone(),
        Field::AllowHosts => file.network.allow_hosts.clone(),
        Field::Credentials => file.credentials.iter().map(|c| c.name.clone()).collect(),
    }
}

/// Whether `given` (as written) is the resolved `entry`: network entries compared in their
/// canonical form, everything else as written.
fn same_entry(field: Field, given: &str, entry: &str) -> bool {
    let list = match field {
        Field::AllowDomains => NetList::AllowDomains,
        Field::DenyDomains => NetList::DenyDomains,
        Field::AllowHosts => NetList::AllowHosts,
        _ => return given == entry,
    };
    list.canonicalize(given).is_ok_and(|c| c == entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> PolicyFile {
        crate::parse_policy_file(text, "test.toml").unwrap()
    }

    #[test]
    fn flags_win_over_the_file_which_wins_over_the_profile() {
        let file = file(
            "profile = \"read-only\"\n[filesystem]\ndeny_read = [\"~/a\", \"~/b\"]\n[limits]\nmemory = \"2G\"\npids = 10\n",
        );
        let flags = Overrides {
            deny_read: vec!["~/b".into()],
            pids: Some(20),
            ..Default::default()
        };
        let o = Origins::new(Some(&file), &flags);
        assert_eq!(o.entry(Field::DenyRead, "~/a"), Origin::PolicyFile);
        assert_eq!(o.entry(Field::DenyRead, "~/b"), Origin::Flag);
        assert_eq!(o.entry(Field::DenyRead, "~/.ssh"), Origin::Profile);
        assert_eq!(o.setting(Setting::Profile), Origin::PolicyFile);
        assert_eq!(o.setting(Setting::Memory), Origin::PolicyFile);
        assert_eq!(o.setting(Setting::Pids), Origin::Flag);
        assert_eq!(o.setting(Setting::Timeout), Origin::Profile);
        assert_eq!(o.file_line(Field::DenyRead, "~/a"), Some(3));
        assert_eq!(o.file_line(Field::DenyRead, "~/.ssh"), None);
    }

    #[test]
    fn layered_files_each_name_what_they_gave_the_later_winning() {
        let user = file("presets = [\"npm\"]\n[network]\nallow_domains = [\"a.example\"]\n[limits]\npids = 10\nmemory = \"1G\"\n");
        let project = file(
            "\n\n[network]\nallow_domains = [\"b.example\", \"a.example\"]\n[limits]\npids = 20\n",
        );
        let layers = vec![
            Layer {
                kind: LayerKind::User,
                path: "/u/policy.toml".into(),
                file: user.clone(),
            },
            Layer {
                kind: LayerKind::Project,
                path: "/w/stockade.toml".into(),
                file: project.clone(),
            },
        ];
        let merged = user.layered(project);
        assert_eq!(
            merged.network.allow_domains,
            ["a.example", "b.example", "a.example"]
        );
        assert_eq!(merged.limits.pids, Some(20));
        assert_eq!(merged.limits.memory.as_deref(), Some("1G"));
        assert_eq!(merged.presets, ["npm"]);
        let flags = Overrides::default();
        let o = Origins::new(Some(&merged), &flags).with_layers(&layers);
        let kind = |l: Option<&Layer>| l.map(|l| l.kind);
        assert_eq!(
            o.entry(Field::AllowDomains, "a.example"),
            Origin::PolicyFile
        );
        assert_eq!(
            kind(o.entry_layer(Field::AllowDomains, "a.example")),
            Some(LayerKind::Project)
        );
        // The line is the project file's, the file that won.
        assert_eq!(o.file_line(Field::AllowDomains, "a.example"), Some(4));
        assert_eq!(
            kind(o.setting_layer(Setting::Pids)),
            Some(LayerKind::Project)
        );
        assert_eq!(
            kind(o.setting_layer(Setting::Memory)),
            Some(LayerKind::User)
        );
        assert_eq!(o.setting_layer(Setting::Timeout).map(|l| l.kind), None);
        assert_eq!(
            o.entry(Field::AllowDomains, "registry.npmjs.org"),
            Origin::Preset("npm")
        );
        assert_eq!(LayerKind::User.to_string(), "user policy");
    }

    #[test]
    fn network_entries_are_found_on_their_line_in_canonical_form() {
        let file = file("[network]\nmode = \"proxy\"\nallow_domains = [\n  \"A.example\",\n  \"b.example\",\n]\n");
        let flags = Overrides::default();
        let o = Origins::new(Some(&file), &flags);
        assert_eq!(o.file_line(Field::AllowDomains, "a.example"), Some(4));
        assert_eq!(o.file_line(Field::AllowDomains, "b.example"), Some(5));
        assert_eq!(o.file_line(Field::AllowHosts, "b.example"), None);
    }

    #[test]
    fn env_flags_are_passthrough_names_or_set_names() {
        let flags = Overrides {
            env: vec!["GITHUB_TOKEN".into(), "FOO=bar".into()],
            ..Default::default()
        };
        let o = Origins::new(None, &flags);
        assert_eq!(o.entry(Field::EnvPassthrough, "GITHUB_TOKEN"), Origin::Flag);
        assert_eq!(o.entry(Field::EnvSet, "FOO"), Origin::Flag);
        assert_eq!(o.entry(Field::EnvSet, "npm_config_cache"), Origin::Profile);
    }

    #[test]
    fn allowed_domains_no_input_names_came_from_a_credential() {
        let flags = Overrides {
            allow_domains: vec!["Example.COM.".into()],
            credentials: vec!["github=env:GH".into()],
            ..Default::default()
        };
        let o = Origins::new(None, &flags);
        assert_eq!(o.entry(Field::AllowDomains, "example.com"), Origin::Flag);
        assert_eq!(
            o.entry(Field::AllowDomains, "github.com"),
            Origin::Credential
        );
        assert_eq!(o.entry(Field::Credentials, "github"), Origin::Flag);
    }

    #[test]
    fn what_a_preset_adds_is_tagged_with_its_name() {
        let file = file("presets = [\"npm\"]\n");
        let flags = Overrides {
            agent: Some("claude-code".into()),
            ..Default::default()
        };
        let o = Origins::new(Some(&file), &flags);
        let agent = Origin::Preset("claude-code");
        let state = "~/.local/state/stockade/claude-code";
        assert_eq!(o.entry(Field::AllowWrite, state), agent);
        assert_eq!(
            o.entry(Field::DenyWrite, &format!("{state}/settings.json")),
            agent
        );
        assert_eq!(o.entry(Field::Credentials, "anthropic"), agent);
        assert_eq!(o.setting(Setting::Timeout), agent);
        // npm's registry made the mode `proxy`; without it, the agent's credential did.
        assert_eq!(o.setting(Setting::NetworkMode), Origin::Preset("npm"));
        let alone = Origins::new(None, &flags);
        assert_eq!(alone.setting(Setting::NetworkMode), Origin::Credential);
        assert_eq!(
            o.entry(Field::AllowDomains, "registry.npmjs.org"),
            Origin::Preset("npm")
        );
        assert_eq!(o.entry(Field::DenyRead, "~/.ssh"), Origin::Profile);
        assert_eq!(agent.to_string(), "preset claude-code");
    }
}
