//! Resolution: profile, then policy file, then command-line overrides, into one validated
//! [`Policy`]; and the policy's digest.

use sha2::{Digest, Sha256};

use crate::error::PolicyError;
use crate::file::{FilesystemPatch, PolicyFile};
use crate::model::{BackendName, Cores, Filesystem, Limits, Network, NetworkMode, Policy};
use crate::net::NetList;
use crate::paths::{check_syntax, has_glob_meta, is_relative_pattern};
use crate::profile::{profile, DEFAULT_PROFILE};

/// Command-line overrides, applied after the policy file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Profile to start from; wins over the file's `profile`.
    pub profile: Option<String>,
    /// Extra writable roots.
    pub allow_write: Vec<String>,
    /// Extra unreadable paths.
    pub deny_read: Vec<String>,
    /// Extra readable paths.
    pub allow_read: Vec<String>,
    /// Extra protected paths (`filesystem.deny_write`).
    pub deny_write: Vec<String>,
    /// `NAME` passes the caller's `NAME` through; `NAME=VALUE` sets it.
    pub env: Vec<String>,
    /// Network mode; wins over the file's.
    pub net: Option<NetworkMode>,
    /// Extra `network.allow_domains` patterns.
    pub allow_domains: Vec<String>,
    /// Extra `network.deny_domains` patterns.
    pub deny_domains: Vec<String>,
    /// Extra `network.allow_hosts` entries.
    pub allow_hosts: Vec<String>,
    /// `limits.timeout` in seconds (`0`: none); wins over the file's.
    pub timeout: Option<u64>,
    /// `limits.tmp_size` (`512M`, `1G`, bytes); wins over the file's.
    pub tmp_size: Option<String>,
    /// `limits.files` (open files per process); wins over the file's.
    pub files: Option<u64>,
    /// `limits.memory` (`512M`, `50%`, `0`); wins over the file's.
    pub memory: Option<String>,
    /// `limits.pids` (`0`: none); wins over the file's.
    pub pids: Option<u64>,
    /// `limits.cpu` in cores; wins over the file's.
    pub cpu: Option<Cores>,
    /// `limits.output_limit` per stream (`16M`, `0`); wins over the file's.
    pub output_limit: Option<String>,
    /// `limits.disk` (`--disk 2G`): what a review or ephemeral run may write; wins over the
    /// file's.
    pub disk: Option<String>,
    /// The backend; wins over the file's.
    pub backend: Option<BackendName>,
    /// `--review` / `--ephemeral`; wins over the file's `review`.
    pub workspace_mode: Option<crate::WorkspaceMode>,
    /// `--credential NAME[=SOURCE]`: a built-in route or one the file defines.
    pub credentials: Vec<String>,
    /// `--agent NAME`: an agent preset; replaces the file's `agent`.
    pub agent: Option<String>,
    /// `--preset NAME`: toolchain presets, after the file's.
    pub presets: Vec<String>,
}

/// Resolves a policy: the profile (`overrides.profile`, else the file's, else
/// [`DEFAULT_PROFILE`]), then the file's sections, then `overrides`. Lists are appended
/// (duplicates dropped, order kept), `env.set` maps merged (later wins), optional fields
/// replace. The result is validated; network entries are put in canonical form.
///
/// # Errors
///
/// [`PolicyError::UnknownProfile`], [`PolicyError::InvalidEnvName`] for empty names or names
/// containing `=` or NUL (or a misplaced `*`), [`PolicyError::InvalidPattern`] for empty
/// patterns, NUL bytes, malformed patterns, and writable roots that are relative or contain
/// glob characters, [`PolicyError::InvalidNetRule`] for network entries that are malformed
/// or (in `allow_domains`, `allow_hosts`) open a whole public suffix.
pub fn resolve(file: Option<PolicyFile>, overrides: &Overrides) -> Result<Policy, PolicyError> {
    let name = overrides
        .profile
        .as_deref()
        .or_else(|| file.as_ref().and_then(|f| f.profile.as_deref()))
        .unwrap_or(DEFAULT_PROFILE);
    let mut policy = profile(name)?;
    // Presets are layered on the profile, before the file and the flags (which may change
    // what they set). The flag's agent replaces the file's.
    let presets = preset_names(file.as_ref(), overrides)?;
    crate::presets::apply(&mut policy, &presets)?;

    if let Some(file) = file {
        apply_file(&mut policy, file)?;
    }
    apply_overrides(&mut policy, overrides)?;

    validate(&policy)?;
    canonicalize_network(&mut policy.network)?;
    credential_network(&mut policy)?;
    Ok(policy)
}

/// The presets to layer on the profile, in order: the agent (the flag's, else the file's),
/// the file's presets, then the flags'. An agent given as `--preset` or a toolchain preset as
/// `--agent` is refused.
fn preset_names(
    file: Option<&PolicyFile>,
    overrides: &Overrides,
) -> Result<Vec<String>, PolicyError> {
    let mut presets: Vec<String> = Vec::new();
    if let Some(agent) = &overrides.agent {
        let p = crate::presets::preset(agent)?;
        if p.kind != crate::presets::PresetKind::Agent {
            return Err(PolicyError::InvalidValue {
                key: "--agent".into(),
                value: agent.clone(),
                reason: format!("`{agent}` is a toolchain preset: use `--preset {agent}`"),
            });
        }
        presets.push(agent.clone());
    } else if let Some(agent) = file.and_then(|f| f.agent.clone()) {
        presets.push(agent);
    }
    presets.extend(file.iter().flat_map(|f| f.presets.iter().cloned()));
    for name in &overrides.presets {
        if crate::presets::preset(name)?.kind != crate::presets::PresetKind::Toolchain {
            return Err(PolicyError::InvalidValue {
                key: "--preset".into(),
                value: name.clone(),
                reason: format!("`{name}` is an agent: use `--agent {name}`"),
            });
        }
        presets.push(name.clone());
    }
    Ok(presets)
}

/// The policy file's sections, on the profile and presets: lists appended, `env.set` merged,
/// optional fields replacing, credentials replacing a preset's of the same name.
fn apply_file(policy: &mut Policy, file: PolicyFile) -> Result<(), PolicyError> {
    policy.commands.clone_from(&file.commands);
    apply_file_filesystem(&mut policy.filesystem, file.filesystem)?;
    append(&mut policy.env.allow, file.env.allow);
    policy.env.set.extend(file.env.set);
    append(&mut policy.env.passthrough, file.env.passthrough);
    let net = &mut policy.network;
    if let Some(mode) = file.network.mode {
        net.mode = mode;
    }
    append(&mut net.allow_domains, file.network.allow_domains);
    append(&mut net.deny_domains, file.network.deny_domains);
    append(&mut net.allow_hosts, file.network.allow_hosts);
    if let Some(t) = file.limits.timeout {
        policy.limits.timeout = Some(t);
    }
    if let Some(size) = file.limits.tmp_size.clone() {
        policy.limits.tmp_size = Some(size);
    }
    if let Some(n) = file.limits.files {
        policy.limits.files = Some(n);
    }
    merge_limits(&mut policy.limits, file.limits);
    if let Some(b) = file.backend {
        policy.backend = b;
    }
    match file.review {
        Some(true) => policy.workspace_mode = crate::WorkspaceMode::Review,
        Some(false) => policy.workspace_mode = crate::WorkspaceMode::Direct,
        None => {}
    }
    // The file's credentials replace a preset's of the same name.
    for c in file.credentials {
        match policy.credentials.iter_mut().find(|o| o.name == c.name) {
            Some(o) => *o = c,
            None => policy.credentials.push(c),
        }
    }
    Ok(())
}

/// The file's `filesystem` section: `read_scope` replaces, the lists are appended; each
/// `unprotect` name is checked before they are added.
fn apply_file_filesystem(fs: &mut Filesystem, patch: FilesystemPatch) -> Result<(), PolicyError> {
    if let Some(scope) = patch.read_scope {
        fs.read_scope = scope;
    }
    append(&mut fs.deny_read, patch.deny_read);
    append(&mut fs.read_empty, patch.read_empty);
    append(&mut fs.allow_read, patch.allow_read);
    append(&mut fs.allow_write, patch.allow_write);
    append(&mut fs.deny_write, patch.deny_write);
    for name in &patch.unprotect {
        crate::file::check_unprotect(name).map_err(|(reason, _)| PolicyError::InvalidPattern {
            field: "filesystem.unprotect",
            pattern: name.clone(),
            reason,
        })?;
    }
    append(&mut fs.unprotect, patch.unprotect);
    Ok(())
}

/// The command line's overrides, after the file: credentials, backend and workspace mode,
/// then the filesystem, the environment, the network mode, the limits and the network lists.
fn apply_overrides(policy: &mut Policy, overrides: &Overrides) -> Result<(), PolicyError> {
    for flag in &overrides.credentials {
        let c = crate::credentials::parse_flag(flag, &policy.credentials)?;
        match policy.credentials.iter_mut().find(|o| o.name == c.name) {
            Some(o) => *o = c,
            None => policy.credentials.push(c),
        }
    }
    if let Some(b) = overrides.backend {
        policy.backend = b;
    }
    if let Some(m) = overrides.workspace_mode {
        policy.workspace_mode = m;
    }

    override_filesystem(&mut policy.filesystem, overrides);
    for entry in &overrides.env {
        match entry.split_once('=') {
            Some((name, value)) => {
                policy.env.set.insert(name.to_owned(), value.to_owned());
            }
            None => append(&mut policy.env.passthrough, [entry.clone()]),
        }
    }

    let net = &mut policy.network;
    if let Some(mode) = overrides.net {
        net.mode = mode;
    }
    override_limits(&mut policy.limits, overrides)?;
    append(
        &mut net.allow_domains,
        overrides.allow_domains.iter().cloned(),
    );
    append(
        &mut net.deny_domains,
        overrides.deny_domains.iter().cloned(),
    );
    append(&mut net.allow_hosts, overrides.allow_hosts.iter().cloned());
    Ok(())
}

/// The flags' filesystem lists, appended; then the built-in `deny_write` entries the file
/// unprotected are dropped, unless a flag adds them back.
fn override_filesystem(fs: &mut Filesystem, overrides: &Overrides) {
    append(&mut fs.allow_write, overrides.allow_write.iter().cloned());
    append(&mut fs.deny_read, overrides.deny_read.iter().cloned());
    append(&mut fs.allow_read, overrides.allow_read.iter().cloned());
    append(&mut fs.deny_write, overrides.deny_write.iter().cloned());
    // Catalogue entries the policy file removed; one a flag adds back stays.
    let unprotect = fs.unprotect.clone();
    let builtin = crate::profile::default_deny_write();
    fs.deny_write.retain(|p| {
        !unprotect.contains(p) || overrides.deny_write.contains(p) || !builtin.contains(p)
    });
}

/// The flags' limits, replacing the file's; then the limits are checked (`limits.files` at
/// least 16, every value typed).
fn override_limits(limits: &mut Limits, overrides: &Overrides) -> Result<(), PolicyError> {
    if let Some(t) = overrides.timeout {
        limits.timeout = Some(t);
    }
    if let Some(size) = &overrides.tmp_size {
        limits.tmp_size = Some(size.clone());
    }
    if let Some(n) = overrides.files {
        limits.files = Some(n);
    }
    merge_limits(
        limits,
        Limits {
            memory: overrides.memory.clone(),
            pids: overrides.pids,
            cpu: overrides.cpu,
            output_limit: overrides.output_limit.clone(),
            disk: overrides.disk.clone(),
            ..Limits::default()
        },
    );
    if limits.files.is_some_and(|n| n < 16) {
        return Err(PolicyError::InvalidValue {
            key: "limits.files".into(),
            value: limits.files.unwrap_or_default().to_string(),
            reason: "at least 16 (stdin, stdout, stderr and the dynamic loader need some)".into(),
        });
    }
    // Refused here, as the policy is made; the run's spec takes the same typed values.
    limits.typed()?;
    Ok(())
}

/// Credentials travel only through the proxy: with them, mode `none` becomes `proxy` with the
/// lists as they are (so with none, the routes are all the command reaches); mode `host` has
/// no proxy to hold the real values and is refused.
fn credential_network(policy: &mut Policy) -> Result<(), PolicyError> {
    if policy.credentials.is_empty() {
        return Ok(());
    }
    crate::credentials::check_all(&policy.credentials, &policy.env)?;
    // A masked credential's hosts are reached directly (through the proxy): named ones are
    // allowed; an address stays the network rules' to allow (`--allow-host`).
    let names: Vec<String> = policy
        .credentials
        .iter()
        .flat_map(|c| c.route.hosts.iter())
        .filter_map(|h| {
            crate::credentials::parse_host_port(h)
                .ok()
                .map(|hp| (h, hp))
        })
        .filter(|(_, (host, _))| {
            host.parse::<std::net::IpAddr>().is_err() && !host.starts_with('[')
        })
        .map(|(h, _)| h.clone())
        .collect();
    append(&mut policy.network.allow_domains, names);
    match policy.network.mode {
        NetworkMode::None => policy.network.mode = NetworkMode::Proxy,
        NetworkMode::Proxy => {}
        NetworkMode::Host => {
            return Err(PolicyError::InvalidValue {
                key: "network.mode".into(),
                value: "host".into(),
                reason: "credentials are injected by stockade's proxy, which a run on the host's network does not use: use `--net proxy` (or leave the credentials out)".into(),
            })
        }
    }
    Ok(())
}

/// Validates the network lists and replaces every entry by its canonical form (lower case,
/// no trailing dot, standard address notation), dropping the duplicates that leaves.
fn canonicalize_network(net: &mut Network) -> Result<(), PolicyError> {
    for (list, entries) in [
        (NetList::AllowDomains, &mut net.allow_domains),
        (NetList::DenyDomains, &mut net.deny_domains),
        (NetList::AllowHosts, &mut net.allow_hosts),
    ] {
        let mut canonical = Vec::with_capacity(entries.len());
        for entry in entries.iter() {
            let item = list
                .canonicalize(entry)
                .map_err(|err| err.into_policy_error(list, entry))?;
            append(&mut canonical, [item]);
        }
        *entries = canonical;
    }
    Ok(())
}

/// The memory, pids, cpu and output keys of `patch` that are set replace the policy's.
fn merge_limits(limits: &mut Limits, patch: Limits) {
    if patch.memory.is_some() {
        limits.memory = patch.memory;
    }
    if patch.pids.is_some() {
        limits.pids = patch.pids;
    }
    if patch.cpu.is_some() {
        limits.cpu = patch.cpu;
    }
    if patch.output_limit.is_some() {
        limits.output_limit = patch.output_limit;
    }
    if patch.disk.is_some() {
        limits.disk = patch.disk;
    }
}

/// A memory limit: bytes, or a share of the machine's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryLimit {
    Bytes(u64),
    /// Percent (1–100) of the machine's physical memory.
    Percent(u8),
}

/// The limits of a policy as numbers: the one reading of its strings (sizes, `0` as no
/// limit), for the policy's own check and for the run's spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TypedLimits {
    pub timeout: Option<std::time::Duration>,
    pub tmp_bytes: Option<u64>,
    pub files: Option<u64>,
    /// Bytes or a share of the machine's memory (which only the machine can make bytes).
    pub memory: Option<MemoryLimit>,
    pub pids: Option<u64>,
    pub cpu_millis: Option<u64>,
    pub output_bytes: Option<u64>,
    /// `limits.disk` in bytes.
    pub disk_bytes: Option<u64>,
}

impl Limits {
    /// These limits as numbers, or the first one that is not valid.
    pub fn typed(&self) -> Result<TypedLimits, PolicyError> {
        Ok(TypedLimits {
            timeout: (self.timeout)
                .filter(|t| *t > 0)
                .map(std::time::Duration::from_secs),
            tmp_bytes: self.tmp_size.as_deref().map(parse_size).transpose()?,
            files: self.files,
            memory: self
                .memory
                .as_deref()
                .map(parse_memory)
                .transpose()?
                .flatten(),
            pids: self.pids.filter(|n| *n > 0),
            cpu_millis: self.cpu.map(|c| c.millis()),
            output_bytes: (self.output_limit.as_deref())
                .map(parse_output_limit)
                .transpose()?
                .flatten(),
            disk_bytes: (self.disk.as_deref())
                .map(|d| size_at_least("limits.disk", d, 1 << 20))
                .transpose()?,
        })
    }
}

/// `limits.memory`: `0` (no limit, `None`), a size of at least 4M (`512M`, `2G`), or a share
/// of physical memory (`50%`, 1–100).
pub fn parse_memory(text: &str) -> Result<Option<MemoryLimit>, PolicyError> {
    let t = text.trim();
    if t == "0" {
        return Ok(None);
    }
    if let Some(p) = t.strip_suffix('%') {
        return match p.trim().parse::<u8>() {
            Ok(n @ 1..=100) => Ok(Some(MemoryLimit::Percent(n))),
            _ => Err(PolicyError::InvalidValue {
                key: "limits.memory".into(),
                value: text.to_owned(),
                reason: "a share of memory is 1% to 100%".into(),
            }),
        };
    }
    size_at_least("limits.memory", text, 4 << 20).map(|b| Some(MemoryLimit::Bytes(b)))
}

/// `limits.output_limit`: `0` (no limit, `None`) or a size of at least 1K per stream.
pub fn parse_output_limit(text: &str) -> Result<Option<u64>, PolicyError> {
    if text.trim() == "0" {
        return Ok(None);
    }
    size_at_least("limits.output_limit", text, 1 << 10).map(Some)
}

/// `"sha256:"` followed by the hex SHA-256 of the policy's JSON serialization. Stable: struct
/// fields serialize in declaration order and maps are sorted.
/// A size such as `1G`, `512M`, `64k` or a number of bytes (binary units, case-insensitive,
/// an optional `iB`/`B`), at least 1 MiB.
pub fn parse_size(text: &str) -> Result<u64, PolicyError> {
    size_at_least("limits.tmp_size", text, 1 << 20)
}

/// A size (see [`parse_size`]) of at least `min` bytes, for `key`.
fn size_at_least(key: &str, text: &str, min: u64) -> Result<u64, PolicyError> {
    let invalid = |reason: &str| PolicyError::InvalidValue {
        key: key.into(),
        value: text.to_owned(),
        reason: reason.to_owned(),
    };
    let t = text.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("ib")
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(&t);
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&t[..i], &t[i..]),
        None => (t, ""),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| invalid("expected a number with an optional unit k, M, G or T"))?;
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(invalid("unknown unit; use k, M, G or T")),
    };
    let bytes = n
        .checked_mul(1u64 << shift)
        .ok_or_else(|| invalid("too large"))?;
    if bytes < min {
        let at_least = if min >= 1 << 20 {
            format!("at least {}M", min >> 20)
        } else {
            format!("at least {}k", min >> 10)
        };
        return Err(invalid(&at_least));
    }
    Ok(bytes)
}

pub fn digest(policy: &Policy) -> String {
    // Serializing plain structs, strings and string-keyed maps cannot fail; should it ever,
    // the error text is hashed instead so the function stays total.
    let json = serde_json::to_vec(policy)
        .unwrap_or_else(|e| format!("unserializable policy: {e}").into_bytes());
    let hash = Sha256::digest(&json);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in hash.iter() {
        out.push(hex_digit(byte >> 4));
        out.push(hex_digit(byte & 0x0f));
    }
    out
}

fn hex_digit(nibble: u8) -> char {
    char::from(b"0123456789abcdef"[usize::from(nibble & 0x0f)])
}

/// Appends the items not already present, keeping order.
fn append(list: &mut Vec<String>, items: impl IntoIterator<Item = String>) {
    for item in items {
        if !list.contains(&item) {
            list.push(item);
        }
    }
}

fn validate(policy: &Policy) -> Result<(), PolicyError> {
    let fs = &policy.filesystem;
    for (field, list) in [
        ("filesystem.deny_read", &fs.deny_read),
        ("filesystem.read_empty", &fs.read_empty),
        ("filesystem.allow_read", &fs.allow_read),
        ("filesystem.allow_write", &fs.allow_write),
        ("filesystem.deny_write", &fs.deny_write),
    ] {
        for pattern in list {
            validate_pattern(field, pattern)?;
        }
    }
    for pattern in &fs.read_empty {
        let reason = if has_glob_meta(pattern) {
            "a path read as empty cannot contain glob characters (the mask covers an existing path)"
        } else if is_relative_pattern(pattern)
            || pattern.starts_with("$WORKSPACE")
            || pattern.starts_with("${WORKSPACE}")
        {
            "a path read as empty must be absolute or start with `~/` or `$HOME` (outside the workspace)"
        } else {
            continue;
        };
        return Err(invalid_pattern("filesystem.read_empty", pattern, reason));
    }
    for pattern in &fs.allow_write {
        let reason = if has_glob_meta(pattern) {
            "a writable root cannot contain glob characters (`*`, `?`, `[`, `{`)"
        } else if is_relative_pattern(pattern) {
            "a writable root must be absolute or start with `~/`, `$HOME` or `$WORKSPACE`"
        } else {
            continue;
        };
        return Err(invalid_pattern("filesystem.allow_write", pattern, reason));
    }

    let env = &policy.env;
    for name in &env.allow {
        let star = name.find('*');
        if star.is_some_and(|at| at + 1 != name.len()) {
            return Err(invalid_env(
                "env.allow",
                name,
                "`*` is only allowed at the end",
            ));
        }
        if name != "*" {
            validate_env_name(name.trim_end_matches('*'))
                .map_err(|reason| invalid_env("env.allow", name, reason))?;
        }
    }
    for name in &env.passthrough {
        validate_env_name(name)
            .and_then(|()| no_star(name))
            .map_err(|reason| invalid_env("env.passthrough", name, reason))?;
    }
    for (name, value) in &env.set {
        validate_env_name(name)
            .and_then(|()| no_star(name))
            .map_err(|reason| invalid_env("env.set", name, reason))?;
        if value.contains('\0') {
            return Err(invalid_env(
                "env.set",
                name,
                "the value contains a NUL byte",
            ));
        }
    }
    Ok(())
}

fn validate_pattern(field: &'static str, pattern: &str) -> Result<(), PolicyError> {
    if pattern.is_empty() {
        return Err(invalid_pattern(field, pattern, "the pattern is empty"));
    }
    if pattern.contains('\0') {
        return Err(invalid_pattern(
            field,
            pattern,
            "the pattern contains a NUL byte",
        ));
    }
    if crate::profile::is_builtin_pattern(pattern) {
        return Ok(());
    }
    check_syntax(pattern).map_err(|err| match err {
        PolicyError::ExpandPattern { reason, .. } => invalid_pattern(field, pattern, &reason),
        other => other,
    })
}

fn validate_env_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        Err("the name is empty")
    } else if name.contains('=') {
        Err("the name contains `=`")
    } else if name.contains('\0') {
        Err("the name contains a NUL byte")
    } else {
        Ok(())
    }
}

fn no_star(name: &str) -> Result<(), &'static str> {
    if name.contains('*') {
        Err("only `env.allow` accepts `*` patterns")
    } else {
        Ok(())
    }
}

fn invalid_pattern(field: &'static str, pattern: &str, reason: &str) -> PolicyError {
    PolicyError::InvalidPattern {
        field,
        pattern: pattern.to_owned(),
        reason: reason.to_owned(),
    }
}

fn invalid_env(field: &'static str, name: &str, reason: &str) -> PolicyError {
    PolicyError::InvalidEnvName {
        field,
        name: name.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::parse_policy_file;
    use crate::model::ReadScope;
    use crate::profile::{default_deny_read, default_deny_write, DEFAULT_ENV_ALLOW};

    fn file(text: &str) -> PolicyFile {
        parse_policy_file(text, "stockade.toml").unwrap()
    }

    fn overrides_err(overrides: Overrides) -> String {
        resolve(None, &overrides).unwrap_err().to_string()
    }

    fn file_err(text: &str) -> String {
        resolve(Some(file(text)), &Overrides::default())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn memory_pids_cpu_output_come_from_profile_then_file_then_flag() {
        let p = resolve(None, &Overrides::default()).unwrap();
        assert_eq!(p.limits.memory.as_deref(), Some(crate::DEFAULT_MEMORY));
        assert_eq!(p.limits.pids, Some(crate::DEFAULT_PIDS));
        assert_eq!(p.limits.cpu, None);
        assert_eq!(
            p.limits.output_limit.as_deref(),
            Some(crate::DEFAULT_OUTPUT_LIMIT)
        );
        let f = || Some(file("[limits]\nmemory = \"1G\"\npids = 64\ncpu = 1.5\n"));
        let p = resolve(f(), &Overrides::default()).unwrap();
        assert_eq!(p.limits.memory.as_deref(), Some("1G"));
        assert_eq!(p.limits.pids, Some(64));
        assert_eq!(p.limits.cpu.map(|c| c.millis()), Some(1500));
        assert_eq!(p.limits.output_limit.as_deref(), Some("16M"));
        let flags = Overrides {
            memory: Some("0".into()),
            pids: Some(0),
            cpu: Cores::new(0.25),
            output_limit: Some("1M".into()),
            ..Overrides::default()
        };
        let p = resolve(f(), &flags).unwrap();
        assert_eq!(p.limits.memory.as_deref(), Some("0"));
        assert_eq!(p.limits.pids, Some(0));
        assert_eq!(p.limits.cpu.map(|c| c.millis()), Some(250));
        assert_eq!(p.limits.output_limit.as_deref(), Some("1M"));
        for (memory, ok) in [
            ("50%", true),
            ("100%", true),
            ("0%", false),
            ("101%", false),
            ("2M", false),
            ("4M", true),
            ("lots", false),
        ] {
            let o = Overrides {
                memory: Some(memory.into()),
                ..Overrides::default()
            };
            assert_eq!(resolve(None, &o).is_ok(), ok, "{memory}");
        }
        assert_eq!(parse_memory("50%").unwrap(), Some(MemoryLimit::Percent(50)));
        assert_eq!(parse_memory("0").unwrap(), None);
        assert_eq!(
            parse_memory("128M").unwrap(),
            Some(MemoryLimit::Bytes(128 << 20))
        );
        assert_eq!(parse_output_limit("0").unwrap(), None);
        assert_eq!(parse_output_limit("4k").unwrap(), Some(4096));
        assert!(parse_output_limit("100").is_err());
    }

    #[test]
    fn timeout_comes_from_profile_then_file_then_flag() {
        let p = resolve(None, &Overrides::default()).unwrap();
        assert_eq!(p.limits.timeout, Some(crate::DEFAULT_TIMEOUT_SECS));
        let p = resolve(
            Some(file("[limits]\ntimeout = 30\n")),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(p.limits.timeout, Some(30));
        let p = resolve(Some(file("[limits]\n")), &Overrides::default()).unwrap();
        assert_eq!(p.limits.timeout, Some(crate::DEFAULT_TIMEOUT_SECS));
        let flags = Overrides {
            timeout: Some(0),
            ..Overrides::default()
        };
        let p = resolve(Some(file("[limits]\ntimeout = 30\n")), &flags).unwrap();
        assert_eq!(p.limits.timeout, Some(0));
    }

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("4096k").unwrap(), 4 << 20);
        for bad in ["", "G", "1.5G", "1X", "-1G", "1k", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        let p = resolve(None, &Overrides::default()).unwrap();
        assert_eq!(p.limits.tmp_size.as_deref(), Some(crate::DEFAULT_TMP_SIZE));
        let bad = Overrides {
            tmp_size: Some("lots".into()),
            ..Overrides::default()
        };
        assert!(overrides_err(bad).contains("limits.tmp_size"));
    }

    #[test]
    fn no_file_no_overrides_is_default_profile() {
        let p = resolve(None, &Overrides::default()).unwrap();
        assert_eq!(p, profile(DEFAULT_PROFILE).unwrap());
    }

    #[test]
    fn profile_precedence() {
        let f = file("profile = \"read-only\"");
        assert_eq!(
            resolve(Some(f.clone()), &Overrides::default())
                .unwrap()
                .profile,
            "read-only"
        );
        let o = Overrides {
            profile: Some("workspace-write".into()),
            ..Overrides::default()
        };
        let p = resolve(Some(f), &o).unwrap();
        assert_eq!(p.profile, "workspace-write");
        assert_eq!(p.filesystem.allow_write, ["$WORKSPACE"]);
    }

    #[test]
    fn unknown_override_profile() {
        let o = Overrides {
            profile: Some("nope".into()),
            ..Overrides::default()
        };
        let e = resolve(None, &o).unwrap_err();
        assert!(matches!(e, PolicyError::UnknownProfile { .. }));
        assert_eq!(
            e.hint().as_deref(),
            Some("known profiles: workspace-write, read-only")
        );
    }

    #[test]
    fn unknown_profile_in_programmatic_file() {
        let f = PolicyFile {
            profile: Some("nope".into()),
            ..PolicyFile::default()
        };
        assert!(matches!(
            resolve(Some(f), &Overrides::default()),
            Err(PolicyError::UnknownProfile { .. })
        ));
    }

    #[test]
    fn lists_append_in_order_profile_file_overrides() {
        let f = file(
            r#"
[filesystem]
deny_read = ["~/secrets", "~/.ssh", "/b"]
allow_read = ["~/.ssh/config"]
allow_write = ["~/.cache/pip"]
deny_write = ["Makefile"]
"#,
        );
        let o = Overrides {
            deny_read: vec!["/a".into(), "/b".into()],
            allow_read: vec!["/r".into()],
            allow_write: vec!["/tmp/out".into(), "~/.cache/pip".into()],
            ..Overrides::default()
        };
        let p = resolve(Some(f), &o).unwrap();
        let fs = &p.filesystem;
        let n = default_deny_read().len();
        assert_eq!(fs.deny_read[..n], default_deny_read());
        assert_eq!(fs.deny_read[n..], ["~/secrets", "/b", "/a"]);
        assert_eq!(fs.allow_read, ["~/.ssh/config", "/r"]);
        assert_eq!(fs.allow_write, ["$WORKSPACE", "~/.cache/pip", "/tmp/out"]);
        assert_eq!(fs.deny_write.len(), default_deny_write().len() + 1);
        assert_eq!(fs.deny_write.last().map(String::as_str), Some("Makefile"));
    }

    #[test]
    fn optional_fields_replace() {
        let f = file("[filesystem]\nread_scope = \"allow-list\"\n[network]\nmode = \"none\"");
        let p = resolve(Some(f), &Overrides::default()).unwrap();
        assert_eq!(p.filesystem.read_scope, ReadScope::AllowList);
        assert_eq!(p.network.mode, NetworkMode::None);
        let p = resolve(Some(file("")), &Overrides::default()).unwrap();
        assert_eq!(p.filesystem.read_scope, ReadScope::Host);
    }

    #[test]
    fn env_merging() {
        let f = file(
            r#"
[env]
allow = ["RUST_LOG", "PATH"]
set = { FOO = "file", BAR = "file" }
passthrough = ["GITHUB_TOKEN"]
"#,
        );
        let o = Overrides {
            env: vec![
                "FOO=cli".into(),
                "GITHUB_TOKEN".into(),
                "NPM_TOKEN".into(),
                "EMPTY=".into(),
                "EQ=a=b".into(),
            ],
            ..Overrides::default()
        };
        let p = resolve(Some(f), &o).unwrap();
        let n = DEFAULT_ENV_ALLOW.len();
        assert_eq!(p.env.allow[..n], *DEFAULT_ENV_ALLOW);
        assert_eq!(p.env.allow[n..], ["RUST_LOG"]);
        assert_eq!(p.env.passthrough, ["GITHUB_TOKEN", "NPM_TOKEN"]);
        let set: Vec<(&str, &str)> = p
            .env
            .set
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            set,
            [
                ("BAR", "file"),
                ("EMPTY", ""),
                ("EQ", "a=b"),
                ("FOO", "cli"),
                ("npm_config_cache", "/tmp/.npm")
            ]
        );
    }

    #[test]
    fn allow_write_glob_rejected_naming_entry() {
        let e = overrides_err(Overrides {
            allow_write: vec!["/tmp/*".into()],
            ..Overrides::default()
        });
        assert_eq!(
            e,
            "failed to validate path pattern `/tmp/*` in filesystem.allow_write: a writable \
             root cannot contain glob characters (`*`, `?`, `[`, `{`)"
        );
        assert!(file_err("[filesystem]\nallow_write = [\"~/{a,b}\"]").contains("`~/{a,b}`"));
    }

    #[test]
    fn allow_write_relative_rejected() {
        let e = file_err("[filesystem]\nallow_write = [\"build\"]");
        assert!(e.contains("`build` in filesystem.allow_write"), "{e}");
        assert!(e.contains("must be absolute"), "{e}");
    }

    #[test]
    fn empty_and_nul_patterns_rejected() {
        let e = file_err("[filesystem]\ndeny_read = [\"\"]");
        assert_eq!(
            e,
            "failed to validate path pattern `` in filesystem.deny_read: the pattern is empty"
        );
        let e = overrides_err(Overrides {
            allow_read: vec!["/a\0b".into()],
            ..Overrides::default()
        });
        assert!(e.contains("filesystem.allow_read: the pattern contains a NUL byte"));
    }

    #[test]
    fn malformed_patterns_rejected_early() {
        let e = file_err("[filesystem]\ndeny_write = [\"$PROJECT/x\"]");
        assert_eq!(
            e,
            "failed to validate path pattern `$PROJECT/x` in filesystem.deny_write: unknown \
             variable `$PROJECT`; only `$HOME` and `$WORKSPACE` are expanded"
        );
        assert!(file_err("[filesystem]\nallow_read = [\"~bob\"]").contains("`~user`"));
    }

    #[test]
    fn invalid_env_names() {
        let e = overrides_err(Overrides {
            env: vec!["=x".into()],
            ..Overrides::default()
        });
        assert_eq!(
            e,
            "failed to validate environment variable `` in env.set: the name is empty"
        );
        let e = file_err("[env]\nallow = [\"A=B\"]");
        assert_eq!(
            e,
            "failed to validate environment variable `A=B` in env.allow: the name contains `=`"
        );
        assert!(file_err("[env]\npassthrough = [\"\"]").contains("empty"));
        assert!(file_err("[env]\npassthrough = [\"A\\u0000\"]").contains("NUL"));
        assert!(file_err("[env]\nset = { \"A=B\" = \"1\" }").contains("`A=B` in env.set"));
        assert!(file_err("[env]\nset = { A = \"x\\u0000\" }").contains("value contains a NUL"));
    }

    #[test]
    fn env_star_placement() {
        assert!(resolve(
            Some(file("[env]\nallow = [\"MY_*\", \"*\"]")),
            &Overrides::default()
        )
        .is_ok());
        let e = file_err("[env]\nallow = [\"*_DIR\"]");
        assert!(e.contains("`*` is only allowed at the end"), "{e}");
        let e = file_err("[env]\npassthrough = [\"GH_*\"]");
        assert!(e.contains("only `env.allow` accepts `*`"), "{e}");
    }

    #[test]
    fn env_error_hint() {
        let e = resolve(Some(file("[env]\nallow = [\"\"]")), &Overrides::default()).unwrap_err();
        assert_eq!(e.code(), "E_POLICY_INVALID");
        assert!(e.hint().unwrap().contains("LC_*"));
    }

    #[test]
    fn network_defaults_to_none_without_rules() {
        for name in crate::PROFILES {
            let o = Overrides {
                profile: Some((*name).to_owned()),
                ..Overrides::default()
            };
            assert_eq!(resolve(None, &o).unwrap().network, Network::default());
        }
    }

    #[test]
    fn network_mode_precedence() {
        let f = file("[network]\nmode = \"proxy\"");
        let p = resolve(Some(f.clone()), &Overrides::default()).unwrap();
        assert_eq!(p.network.mode, NetworkMode::Proxy);
        let o = Overrides {
            net: Some(NetworkMode::Host),
            ..Overrides::default()
        };
        assert_eq!(
            resolve(Some(f), &o).unwrap().network.mode,
            NetworkMode::Host
        );
        let o = Overrides {
            net: Some(NetworkMode::None),
            ..Overrides::default()
        };
        let p = resolve(Some(file("[network]\nmode = \"host\"")), &o).unwrap();
        assert_eq!(p.network.mode, NetworkMode::None);
    }

    #[test]
    fn network_lists_append_canonical_and_deduplicated() {
        let f = file(
            r#"
[network]
mode = "proxy"
allow_domains = ["Example.COM.", "*.docs.rs:443"]
deny_domains = ["*.Evil.test"]
allow_hosts = ["[::ffff:127.0.0.1]:5432", "[0::1]", "db.internal"]
"#,
        );
        let o = Overrides {
            allow_domains: vec!["example.com".into(), "crates.io".into()],
            deny_domains: vec!["*.com".into(), "*.evil.test.".into()],
            allow_hosts: vec!["127.0.0.1:5432".into(), "10.1.2.0/24".into()],
            ..Overrides::default()
        };
        let net = resolve(Some(f), &o).unwrap().network;
        assert_eq!(net.mode, NetworkMode::Proxy);
        assert_eq!(
            net.allow_domains,
            ["example.com", "*.docs.rs:443", "crates.io"]
        );
        assert_eq!(net.deny_domains, ["*.evil.test", "*.com"]);
        assert_eq!(
            net.allow_hosts,
            ["127.0.0.1:5432", "::1", "db.internal", "10.1.2.0/24"]
        );
        // The canonical form resolves to itself.
        let again = Overrides {
            allow_domains: net.allow_domains.clone(),
            deny_domains: net.deny_domains.clone(),
            allow_hosts: net.allow_hosts.clone(),
            net: Some(net.mode),
            ..Overrides::default()
        };
        assert_eq!(resolve(None, &again).unwrap().network, net);
    }

    #[test]
    fn network_overrides_validated_like_the_file() {
        let e = resolve(
            None,
            &Overrides {
                allow_domains: vec!["ok.test".into(), "*.github.io".into()],
                ..Overrides::default()
            },
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "failed to validate network rule `*.github.io` in network.allow_domains: it opens \
             the whole public suffix `github.io`"
        );
        assert_eq!(e.code(), "E_POLICY_INVALID");
        assert!(e.hint().unwrap().contains("list the domains you need"));
        assert!(resolve(
            None,
            &Overrides {
                deny_domains: vec!["*.github.io".into(), "com".into()],
                ..Overrides::default()
            }
        )
        .is_ok());
        let e = overrides_err(Overrides {
            deny_domains: vec!["*".into()],
            ..Overrides::default()
        });
        assert_eq!(
            e,
            "failed to validate network rule `*` in network.deny_domains: `*` alone would \
             match every name"
        );
        let e = overrides_err(Overrides {
            allow_hosts: vec!["[::1]:99999".into()],
            ..Overrides::default()
        });
        assert!(
            e.contains("`[::1]:99999` in network.allow_hosts: port `99999`"),
            "{e}"
        );
        let e = overrides_err(Overrides {
            allow_domains: vec!["bad%name.test".into()],
            ..Overrides::default()
        });
        assert!(e.contains("the label `bad%name` contains `%`"), "{e}");
    }

    #[test]
    fn programmatic_file_entries_are_validated() {
        let mut f = PolicyFile::default();
        f.network.allow_hosts.push("0.0.0.0/0".into());
        let e = resolve(Some(f), &Overrides::default()).unwrap_err();
        assert!(matches!(
            e,
            PolicyError::InvalidNetRule {
                field: "network.allow_hosts",
                ..
            }
        ));
        assert!(e.to_string().contains("covers every address"), "{e}");
    }

    #[test]
    fn network_json_rendering() {
        let o = Overrides {
            net: Some(NetworkMode::Proxy),
            allow_domains: vec!["example.com".into()],
            deny_domains: vec!["*.evil.test".into()],
            allow_hosts: vec!["[::1]:8080".into()],
            ..Overrides::default()
        };
        let p = resolve(None, &o).unwrap();
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(
            json["network"],
            serde_json::json!({
                "mode": "proxy",
                "allow_domains": ["example.com"],
                "deny_domains": ["*.evil.test"],
                "allow_hosts": ["[::1]:8080"],
            })
        );
        let back: Policy = serde_json::from_value(json).unwrap();
        assert_eq!(back, p);
        let none = serde_json::to_value(resolve(None, &Overrides::default()).unwrap()).unwrap();
        assert_eq!(
            none["network"],
            serde_json::json!({
                "mode": "none", "allow_domains": [], "deny_domains": [], "allow_hosts": [],
            })
        );
        let host = Overrides {
            net: Some(NetworkMode::Host),
            ..Overrides::default()
        };
        let host = serde_json::to_value(resolve(None, &host).unwrap()).unwrap();
        assert_eq!(host["network"]["mode"], "host");
    }

    #[test]
    fn digest_covers_network() {
        let base = resolve(None, &Overrides::default()).unwrap();
        let with = |o: Overrides| digest(&resolve(None, &o).unwrap());
        let proxy = with(Overrides {
            net: Some(NetworkMode::Proxy),
            ..Overrides::default()
        });
        assert_ne!(digest(&base), proxy);
        let allow = with(Overrides {
            net: Some(NetworkMode::Proxy),
            allow_domains: vec!["example.com".into()],
            ..Overrides::default()
        });
        assert_ne!(proxy, allow);
        // Equivalent spellings resolve to the same policy, hence the same digest.
        let spelled = with(Overrides {
            net: Some(NetworkMode::Proxy),
            allow_domains: vec!["EXAMPLE.com.".into(), "example.com".into()],
            ..Overrides::default()
        });
        assert_eq!(allow, spelled);
        for field in 0..3 {
            let mut other = base.clone();
            let list = match field {
                0 => &mut other.network.allow_domains,
                1 => &mut other.network.deny_domains,
                _ => &mut other.network.allow_hosts,
            };
            list.push("x.test".into());
            assert_ne!(digest(&base), digest(&other));
        }
    }

    #[test]
    fn digest_is_stable() {
        let p = resolve(None, &Overrides::default()).unwrap();
        let d = digest(&p);
        assert!(d.starts_with("sha256:"));
        assert_eq!(d.len(), "sha256:".len() + 64);
        assert!(d["sha256:".len()..]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_eq!(d, digest(&p.clone()));
        assert_eq!(d, digest(&resolve(None, &Overrides::default()).unwrap()));
    }

    #[test]
    fn digest_matches_json_sha256() {
        let p = profile("read-only").unwrap();
        let json = serde_json::to_vec(&p).unwrap();
        let expected: String = Sha256::digest(&json)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(digest(&p), format!("sha256:{expected}"));
    }

    #[test]
    fn digest_changes_with_content() {
        let base = resolve(None, &Overrides::default()).unwrap();
        let mut other = base.clone();
        other.env.set.insert("A".into(), "1".into());
        assert_ne!(digest(&base), digest(&other));
        let mut other = base.clone();
        other.filesystem.deny_read.push("/x".into());
        assert_ne!(digest(&base), digest(&other));
        assert_ne!(digest(&base), digest(&profile("read-only").unwrap()));
    }

    #[test]
    fn digest_independent_of_set_insertion_order() {
        let mut a = profile("read-only").unwrap();
        let mut b = a.clone();
        a.env.set.insert("X".into(), "1".into());
        a.env.set.insert("Y".into(), "2".into());
        b.env.set.insert("Y".into(), "2".into());
        b.env.set.insert("X".into(), "1".into());
        assert_eq!(digest(&a), digest(&b));
    }

    #[test]
    fn unprotect_removes_catalogue_entries_only() {
        let p = resolve(
            Some(file(
                "[filesystem]\nunprotect = [\".vscode\", \"lefthook.*\"]\n",
            )),
            &Overrides::default(),
        )
        .unwrap();
        let fs = &p.filesystem;
        assert!(!fs
            .deny_write
            .iter()
            .any(|d| d == ".vscode" || d == "lefthook.*"));
        assert!(fs.deny_write.iter().any(|d| d == ".cargo/config.toml"));
        assert_eq!(fs.unprotect, [".vscode", "lefthook.*"]);
        // A flag puts one back.
        let back = Overrides {
            deny_write: vec![".vscode".into()],
            ..Overrides::default()
        };
        let p = resolve(
            Some(file("[filesystem]\nunprotect = [\".vscode\"]\n")),
            &back,
        )
        .unwrap();
        assert!(p.filesystem.deny_write.iter().any(|d| d == ".vscode"));

        let parse_err = |text: &str| {
            parse_policy_file(text, "stockade.toml")
                .unwrap_err()
                .to_string()
        };
        let e = parse_err("[filesystem]\nunprotect = [\".vscod\"]\n");
        assert!(e.contains("unknown catalogue entry `.vscod`"), "{e}");
        assert!(e.contains("line 2, column 14"), "{e}");
        for core in [".git/hooks", "stockade.toml"] {
            let e = parse_err(&format!("[filesystem]\nunprotect = [\"{core}\"]\n"));
            assert!(e.contains("cannot be unprotected"), "{e}");
        }
        // A file built in code is checked too.
        let mut f = PolicyFile::default();
        f.filesystem.unprotect.push(".vscod".into());
        assert!(resolve(Some(f), &Overrides::default()).is_err());
    }

    #[test]
    fn read_empty_takes_exact_paths_outside_the_workspace() {
        let p = resolve(
            Some(file("[filesystem]\nread_empty = [\"~/.kshrc.local\"]\n")),
            &Overrides::default(),
        )
        .unwrap();
        assert!(p
            .filesystem
            .read_empty
            .iter()
            .any(|d| d == "~/.kshrc.local"));
        assert!(p.filesystem.read_empty.iter().any(|d| d == "~/.bashrc"));
        for bad in ["~/.rc*", ".bashrc", "$WORKSPACE/x"] {
            let err = resolve(
                Some(file(&format!("[filesystem]\nread_empty = [\"{bad}\"]\n"))),
                &Overrides::default(),
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("filesystem.read_empty"), "{err}");
        }
    }

    #[test]
    fn append_dedups_keeping_order() {
        let mut list = vec!["a".to_owned(), "b".to_owned()];
        append(&mut list, ["c", "a", "d", "c"].map(String::from));
        assert_eq!(list, ["a", "b", "c", "d"]);
    }

    #[test]
    fn hex() {
        assert_eq!(hex_digit(0), '0');
        assert_eq!(hex_digit(9), '9');
        assert_eq!(hex_digit(10), 'a');
        assert_eq!(hex_digit(15), 'f');
    }
}
