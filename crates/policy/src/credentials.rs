//! Credentials that never enter the sandbox: routes and where their real values come from.
//!
//! A credential is a **route** (the upstream the real value is for, how the value is put on a
//! request, and the variables that tell a client inside where to send its requests) and a
//! **source** (where stockade, on the host, reads the real value). Inside, the route's token
//! variables hold a per-run stand-in and its base-URL variables point at the egress proxy; the
//! proxy swaps the stand-in for the real value on the way to the upstream, and only there.
//!
//! Built-in routes ([`BUILTIN`]) cover the common APIs; a policy file can define custom ones
//! (`[credentials.NAME]` with `upstream`, `header` + `format` or `query`, `token_env`) or
//! change a built-in's fields. Parsing is strict: an unknown route, a source that is not
//! exactly one of `env`, `file`, `keyring`, `command`, or a route that cannot inject is an
//! error naming the key.

use serde::{Deserialize, Serialize};

use crate::error::PolicyError;

pub mod claude_login;

/// Where the proxy serves a route inside the sandbox: `http://<proxy>/credential/<name>`.
pub const ROUTE_PREFIX: &str = "/credential/";

/// Longest route name (it is part of a URL path).
pub const MAX_NAME_LEN: usize = 32;

/// Default time a `command` source's output is reused, in seconds.
pub const DEFAULT_COMMAND_TTL: u64 = 300;

/// One credential of a policy: its route and its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    /// The route's name (`anthropic`, or a custom one): `[a-z0-9-]`, at most 32 characters.
    pub name: String,
    pub route: Route,
    pub source: Source,
}

/// Where a credential's real value goes and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// `https://host[:port][/path]`: requests to the route go here, their path appended.
    pub upstream: String,
    pub inject: Inject,
    /// Variables inside that hold the stand-in token (the SDK's key variable).
    pub token_env: Vec<String>,
    /// Variables inside set to the route's URL at the proxy (the SDK's base-URL variable).
    pub base_url_env: Vec<String>,
    /// Paths (after the route's prefix) refused on the route: `*` stands for one segment,
    /// and a pattern also refuses everything beneath it. The built-ins refuse the endpoints
    /// that mint or plant lasting credentials (new tokens, SSH keys, deploy keys, webhooks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_paths: Vec<String>,
    /// A masked credential's hosts: for clients that cannot be pointed at a base URL (git
    /// over HTTPS, `gh`, package registries). Inside, the token variables hold a sentinel of
    /// the real value's length; the proxy opens TLS to these hosts with a per-run CA and
    /// replaces the sentinel by the real value in request headers, for these hosts only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
}

impl Route {
    /// Whether the credential is masked (used at its hosts) rather than a reverse route.
    pub fn is_masked(&self) -> bool {
        !self.hosts.is_empty()
    }
}

/// How the real value is put on a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", deny_unknown_fields)]
pub enum Inject {
    /// A header whose value is `format` with `{}` replaced by the credential
    /// (`x-api-key: {}`, `Authorization: Bearer {}`).
    Header { name: String, format: String },
    /// A query parameter (`?key=...`).
    Query { param: String },
}

/// Where the real value is read, on the host, before the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Source {
    /// The caller's environment variable (never passed inside).
    Env(String),
    /// A file's content (absolute or `~/...`), without its trailing newline.
    File(String),
    /// The desktop keyring (Secret Service): the item with these attributes.
    Keyring { service: String, account: String },
    /// A host command's standard output (without its trailing newline), reused for `ttl`
    /// seconds.
    Command { argv: Vec<String>, ttl: u64 },
    /// The host's Claude Code login (its `.credentials.json`): the access token is the value,
    /// refreshed against `token_url` on the host side ([`claude_login`]).
    ClaudeLogin { file: String, token_url: String },
}

impl Source {
    /// How the source is written on the command line and in messages.
    pub fn describe(&self) -> String {
        match self {
            Source::Env(name) => format!("env:{name}"),
            Source::File(path) => format!("file:{path}"),
            Source::Keyring { service, account } => format!("keyring:{service}/{account}"),
            Source::Command { argv, ttl } => format!("command:{} (ttl {ttl}s)", argv.join(" ")),
            Source::ClaudeLogin { file, .. } => format!("claude-login:{file}"),
        }
    }
}

/// A built-in route and its default source.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    pub name: &'static str,
    pub upstream: &'static str,
    /// `(header, format)`.
    pub header: (&'static str, &'static str),
    pub token_env: &'static [&'static str],
    pub base_url_env: &'static [&'static str],
    /// The caller's variable read by default.
    pub default_env: &'static str,
    /// Paths refused by default ([`Route::deny_paths`]).
    pub deny_paths: &'static [&'static str],
    /// A masked credential's hosts ([`Route::hosts`]).
    pub hosts: &'static [&'static str],
}

/// The built-in routes (`stockade policy show --json` lists what each resolves to).
pub const BUILTIN: &[Builtin] = &[
    Builtin {
        name: "anthropic",
        upstream: "https://api.anthropic.com",
        header: ("x-api-key", "{}"),
        token_env: &["ANTHROPIC_API_KEY"],
        base_url_env: &["ANTHROPIC_BASE_URL"],
        default_env: "ANTHROPIC_API_KEY",
        // The Admin API: keys, members, workspaces.
        deny_paths: &["/v1/organizations"],
        hosts: &[],
    },
    Builtin {
        name: "openai",
        upstream: "https://api.openai.com/v1",
        header: ("authorization", "Bearer {}"),
        // CODEX_API_KEY: the Codex CLI's own name for an API key.
        token_env: &["OPENAI_API_KEY", "CODEX_API_KEY"],
        base_url_env: &["OPENAI_BASE_URL"],
        default_env: "OPENAI_API_KEY",
        // The administration API (admin keys, projects' keys and users).
        deny_paths: &["/organization"],
        hosts: &[],
    },
    Builtin {
        name: "gemini",
        upstream: "https://generativelanguage.googleapis.com",
        header: ("x-goog-api-key", "{}"),
        token_env: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        base_url_env: &["GOOGLE_GEMINI_BASE_URL", "GEMINI_BASE_URL"],
        default_env: "GEMINI_API_KEY",
        deny_paths: &[],
        hosts: &[],
    },
    Builtin {
        name: "github",
        upstream: "https://api.github.com",
        header: ("authorization", "token {}"),
        token_env: &["GITHUB_TOKEN", "GH_TOKEN"],
        base_url_env: &[],
        default_env: "GITHUB_TOKEN",
        deny_paths: &[
            "/authorizations",
            "/applications",
            "/user/keys",
            "/user/gpg_keys",
            "/user/ssh_signing_keys",
            "/repos/*/*/keys",
            "/repos/*/*/hooks",
            "/orgs/*/hooks",
            "/user/codespaces/secrets",
            "/repos/*/*/actions/secrets",
            "/orgs/*/actions/secrets",
            "/repos/*/*/environments/*/secrets",
            "/repos/*/*/dependabot/secrets",
            "/orgs/*/dependabot/secrets",
            "/repos/*/*/codespaces/secrets",
            "/orgs/*/codespaces/secrets",
            "/repos/*/*/actions/runners/registration-token",
            "/orgs/*/actions/runners/registration-token",
            "/repos/*/*/collaborators",
            "/orgs/*/invitations",
            "/orgs/*/memberships",
            "/repos/*/*/actions/runners/generate-jitconfig",
            "/orgs/*/actions/runners/generate-jitconfig",
            "/repositories/*/keys",
            "/repositories/*/hooks",
            "/repositories/*/collaborators",
            "/repositories/*/actions/secrets",
            "/repositories/*/actions/runners",
            "/repositories/*/environments/*/secrets",
            "/orgs/*/teams/*/memberships",
            "/orgs/*/teams/*/repos",
            "/repos/*/*/transfer",
        ],
        // git over HTTPS and the REST API (`gh`).
        hosts: &["github.com", "api.github.com"],
    },
    Builtin {
        name: "gitlab",
        upstream: "https://gitlab.com/api/v4",
        header: ("private-token", "{}"),
        token_env: &["GITLAB_TOKEN"],
        base_url_env: &[],
        default_env: "GITLAB_TOKEN",
        deny_paths: &[
            "/personal_access_tokens",
            "/user/personal_access_tokens",
            "/users/*/personal_access_tokens",
            "/user/keys",
            "/user/gpg_keys",
            "/users/*/keys",
            "/projects/*/access_tokens",
            "/groups/*/access_tokens",
            "/projects/*/deploy_keys",
            "/projects/*/deploy_tokens",
            "/groups/*/deploy_tokens",
            "/projects/*/hooks",
            "/groups/*/hooks",
            "/user/runners",
            "/runners",
            "/projects/*/triggers",
            "/projects/*/members",
            "/groups/*/members",
            "/projects/*/invitations",
            "/groups/*/invitations",
            "/users/*/impersonation_tokens",
            "/service_accounts",
            "/groups/*/service_accounts",
            "/projects/*/runners",
            "/groups/*/runners",
        ],
        hosts: &["gitlab.com"],
    },
];

/// The built-in route called `name`.
pub fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTIN.iter().find(|b| b.name == name)
}

impl Builtin {
    /// The route with its default source.
    pub fn credential(&self) -> Credential {
        Credential {
            name: self.name.to_owned(),
            route: Route {
                upstream: self.upstream.to_owned(),
                inject: Inject::Header {
                    name: self.header.0.to_owned(),
                    format: self.header.1.to_owned(),
                },
                token_env: self.token_env.iter().map(|s| s.to_string()).collect(),
                base_url_env: self.base_url_env.iter().map(|s| s.to_string()).collect(),
                deny_paths: self.deny_paths.iter().map(|s| s.to_string()).collect(),
                hosts: self.hosts.iter().map(|s| s.to_string()).collect(),
            },
            source: Source::Env(self.default_env.to_owned()),
        }
    }
}

fn known_routes() -> String {
    let names: Vec<&str> = BUILTIN.iter().map(|b| b.name).collect();
    format!("built-in routes: {}", names.join(", "))
}

/// A `[credentials.NAME]` table as written: every key optional; a built-in fills the rest.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CredentialPatch {
    pub upstream: Option<String>,
    pub header: Option<String>,
    pub format: Option<String>,
    pub query: Option<String>,
    pub token_env: Option<Vec<String>>,
    pub base_url_env: Option<Vec<String>>,
    /// Replaces the built-in's list.
    pub deny_paths: Option<Vec<String>>,
    /// A masked credential's hosts (replaces the built-in's).
    pub hosts: Option<Vec<String>>,
    pub source: Option<SourcePatch>,
}

/// `source = { env = "NAME" }`, `{ file = "~/.key" }`, `{ keyring = { service, account } }`
/// or `{ command = ["pass", "show", "x"], ttl = 300 }`: exactly one kind.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourcePatch {
    pub env: Option<String>,
    pub file: Option<String>,
    pub keyring: Option<KeyringPatch>,
    pub command: Option<Vec<String>>,
    pub ttl: Option<u64>,
    /// The host's Claude Code login file ([`claude_login`]).
    pub claude_login: Option<String>,
    /// Where that login is refreshed (default [`claude_login::TOKEN_URL`]).
    pub token_url: Option<String>,
}

/// The keyring item's attributes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyringPatch {
    pub service: String,
    pub account: String,
}

fn invalid(
    name: &str,
    key: &str,
    value: impl Into<String>,
    reason: impl Into<String>,
) -> PolicyError {
    PolicyError::InvalidValue {
        key: format!(
            "credentials.{name}{}{key}",
            if key.is_empty() { "" } else { "." }
        ),
        value: value.into(),
        reason: reason.into(),
    }
}

impl SourcePatch {
    fn source(self, name: &str) -> Result<Source, PolicyError> {
        let kinds = [
            self.env.is_some(),
            self.file.is_some(),
            self.keyring.is_some(),
            self.command.is_some(),
            self.claude_login.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() != 1 {
            return Err(invalid(
                name,
                "source",
                "",
                "give exactly one of `env`, `file`, `keyring`, `command`, `claude_login`",
            ));
        }
        if self.ttl.is_some() && self.command.is_none() {
            return Err(invalid(
                name,
                "source.ttl",
                "",
                "`ttl` goes with `command` only",
            ));
        }
        if self.token_url.is_some() && self.claude_login.is_none() {
            return Err(invalid(
                name,
                "source.token_url",
                "",
                "`token_url` goes with `claude_login` only",
            ));
        }
        let source = if let Some(file) = self.claude_login {
            Source::ClaudeLogin {
                file,
                token_url: self
                    .token_url
                    .unwrap_or_else(|| claude_login::TOKEN_URL.to_owned()),
            }
        } else if let Some(v) = self.env {
            Source::Env(v)
        } else if let Some(p) = self.file {
            Source::File(p)
        } else if let Some(k) = self.keyring {
            Source::Keyring {
                service: k.service,
                account: k.account,
            }
        } else {
            Source::Command {
                argv: self.command.unwrap_or_default(),
                ttl: self.ttl.unwrap_or(DEFAULT_COMMAND_TTL),
            }
        };
        check_source(name, &source)?;
        Ok(source)
    }
}

impl CredentialPatch {
    /// The credential `name` this table defines: a built-in's fields replaced by the ones
    /// given, or a custom route that gives `upstream`, an injection and `token_env`.
    pub fn credential(self, name: &str) -> Result<Credential, PolicyError> {
        check_name(name)?;
        let base = builtin(name).map(Builtin::credential);
        let hosts = match (self.hosts, &base) {
            (Some(v), _) => v,
            (None, Some(b)) => b.route.hosts.clone(),
            (None, None) => Vec::new(),
        };
        // A masked credential is used at its hosts: no upstream or injection of its own.
        let masked_default = hosts.first().map(|h| format!("https://{h}"));
        let (header, format, query) = match (&self.header, &self.format, &self.query, &base) {
            (None, None, None, None) if !hosts.is_empty() => {
                (Some("authorization".to_owned()), None, None)
            }
            _ => (self.header, self.format, self.query),
        };
        let Some(upstream) = self
            .upstream
            .or_else(|| base.as_ref().map(|b| b.route.upstream.clone()))
            .or(masked_default)
        else {
            return Err(invalid(
                name,
                "upstream",
                "",
                format!(
                    "`{name}` is not a built-in route, so it needs `upstream`, `header` (or `query`) and `token_env` ({})",
                    known_routes()
                ),
            ));
        };
        let inject = match (header, format, query) {
            (None, None, None) => match &base {
                Some(b) => b.route.inject.clone(),
                None => {
                    return Err(invalid(
                        name,
                        "header",
                        "",
                        "a custom route needs `header` (with `format`) or `query`",
                    ))
                }
            },
            (Some(header), format, None) => Inject::Header {
                name: header.to_ascii_lowercase(),
                format: format.unwrap_or_else(|| "{}".to_owned()),
            },
            (None, Some(format), None) => match &base {
                Some(Credential {
                    route:
                        Route {
                            inject: Inject::Header { name: header, .. },
                            ..
                        },
                    ..
                }) => Inject::Header {
                    name: header.clone(),
                    format,
                },
                _ => return Err(invalid(name, "format", format, "`format` needs `header`")),
            },
            (None, None, Some(param)) => Inject::Query { param },
            (_, _, Some(_)) => {
                return Err(invalid(
                    name,
                    "query",
                    "",
                    "give either `header` (with `format`) or `query`, not both",
                ))
            }
        };
        let token_env =
            match (self.token_env, &base) {
                (Some(v), _) => v,
                (None, Some(b)) => b.route.token_env.clone(),
                (None, None) => return Err(invalid(
                    name,
                    "token_env",
                    "",
                    "a custom route needs `token_env`: the variable inside that holds the stand-in",
                )),
            };
        let base_url_env = match (self.base_url_env, &base) {
            (Some(v), _) => v,
            (None, Some(b)) => b.route.base_url_env.clone(),
            (None, None) => Vec::new(),
        };
        let deny_paths = match (self.deny_paths, &base) {
            (Some(v), _) => v,
            (None, Some(b)) => b.route.deny_paths.clone(),
            (None, None) => Vec::new(),
        };
        let source = match (self.source, &base) {
            (Some(s), _) => s.source(name)?,
            (None, Some(b)) => b.source.clone(),
            (None, None) => {
                return Err(invalid(
                    name,
                    "source",
                    "",
                    "a custom route needs `source` (`env`, `file`, `keyring` or `command`)",
                ))
            }
        };
        let mut credential = Credential {
            name: name.to_owned(),
            route: Route {
                upstream,
                inject,
                token_env,
                base_url_env,
                deny_paths,
                hosts,
            },
            source,
        };
        claude_login::adapt(&mut credential);
        check(&credential)?;
        Ok(credential)
    }
}

/// `--credential NAME` (a built-in, or a route the policy file defines) or
/// `--credential NAME=SOURCE` with `env:VAR`, `file:PATH` or `keyring:SERVICE/ACCOUNT`.
pub fn parse_flag(flag: &str, defined: &[Credential]) -> Result<Credential, PolicyError> {
    let (name, source) = match flag.split_once('=') {
        Some((n, s)) => (n, Some(s)),
        None => (flag, None),
    };
    check_name(name)?;
    let mut credential = match defined.iter().find(|c| c.name == name) {
        Some(c) => c.clone(),
        None => match builtin(name) {
            Some(b) => b.credential(),
            None => {
                return Err(PolicyError::InvalidValue {
                    key: "--credential".into(),
                    value: flag.to_owned(),
                    reason: format!(
                        "unknown route `{name}` ({}; define others in the policy file's [credentials.{name}])",
                        known_routes()
                    ),
                })
            }
        },
    };
    if let Some(mut login) = source.and_then(claude_login::parse_flag_source) {
        // A login the policy file defines keeps its token endpoint (and its file, unless the
        // flag names one).
        if let (
            Source::ClaudeLogin { file, token_url },
            Some(Source::ClaudeLogin {
                file: defined_file,
                token_url: defined_url,
            }),
        ) = (
            &mut login,
            defined.iter().find(|c| c.name == name).map(|c| &c.source),
        ) {
            *token_url = defined_url.clone();
            if source == Some("claude-login") {
                *file = defined_file.clone();
            }
        }
        credential.source = login;
        claude_login::adapt(&mut credential);
        check(&credential)?;
        return Ok(credential);
    }
    if let Some(source) = source {
        let parsed = match source.split_once(':') {
            Some(("env", v)) => Source::Env(v.to_owned()),
            Some(("file", v)) => Source::File(v.to_owned()),
            Some(("keyring", v)) => match v.split_once('/') {
                Some((service, account)) => Source::Keyring {
                    service: service.to_owned(),
                    account: account.to_owned(),
                },
                None => {
                    return Err(invalid(
                        name,
                        "source",
                        source,
                        "write `keyring:SERVICE/ACCOUNT`",
                    ))
                }
            },
            _ => {
                return Err(invalid(
                    name,
                    "source",
                    source,
                    "write `NAME=env:VAR`, `NAME=file:PATH`, `NAME=keyring:SERVICE/ACCOUNT` or `NAME=claude-login[:PATH]` (commands only in a policy file)",
                ))
            }
        };
        check_source(name, &parsed)?;
        credential.source = parsed;
    }
    Ok(credential)
}

fn check_name(name: &str) -> Result<(), PolicyError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(invalid(
            name,
            "",
            name,
            format!("a route name is 1 to {MAX_NAME_LEN} of `a-z`, `0-9`, `-` (not first)"),
        ))
    }
}

fn check_env_name(cred: &str, key: &str, v: &str) -> Result<(), PolicyError> {
    let ok = !v.is_empty()
        && !v.starts_with(|c: char| c.is_ascii_digit())
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(invalid(
            cred,
            key,
            v,
            "a variable name is `A-Z`, `a-z`, `0-9`, `_`, not starting with a digit",
        ))
    }
}

fn check_source(name: &str, source: &Source) -> Result<(), PolicyError> {
    match source {
        Source::Env(v) => check_env_name(name, "source.env", v),
        Source::File(p) => {
            if p.starts_with('/') || p.starts_with("~/") {
                Ok(())
            } else {
                Err(invalid(
                    name,
                    "source.file",
                    p,
                    "an absolute path or one starting with `~/`",
                ))
            }
        }
        Source::Keyring { service, account } => {
            if service.is_empty() || account.is_empty() {
                Err(invalid(
                    name,
                    "source.keyring",
                    "",
                    "`service` and `account` must not be empty",
                ))
            } else {
                Ok(())
            }
        }
        Source::Command { argv, ttl } => {
            if argv.first().is_none_or(|p| p.is_empty()) {
                return Err(invalid(
                    name,
                    "source.command",
                    "",
                    "a program and its arguments, e.g. [\"pass\", \"show\", \"api-key\"]",
                ));
            }
            if *ttl == 0 {
                return Err(invalid(name, "source.ttl", "0", "at least 1 second"));
            }
            Ok(())
        }
        Source::ClaudeLogin { file, token_url } => {
            claude_login::check_source(name, file, token_url)
        }
    }
}

/// A masked credential's host entry: `host` (port 443) or `host:port` (`[v6]:port`), the
/// host in canonical form (lower case, no wildcard).
pub fn parse_host_port(entry: &str) -> Result<(String, u16), String> {
    let (host, port) = split_host_port(entry)?;
    let canonical = canonical_host(host)?;
    if canonical.trim_start_matches('[').trim_end_matches(']') != host {
        return Err(format!("write the host in canonical form: `{canonical}`"));
    }
    Ok((canonical, port))
}

/// `host[:port]` or `[v6][:port]` → the host (without brackets) and the port (443).
fn split_host_port(entry: &str) -> Result<(&str, u16), String> {
    let (host, port) = if let Some(inner) = entry.strip_prefix('[') {
        let (h, after) = inner
            .split_once(']')
            .ok_or("an IPv6 host needs its closing `]`")?;
        match after.strip_prefix(':') {
            Some(p) => (h, Some(p)),
            None if after.is_empty() => (h, None),
            None => return Err(format!("bad authority `{entry}`")),
        }
    } else if entry.matches(':').count() > 1 {
        return Err("write an IPv6 host in brackets: `[::1]:8443`".into());
    } else {
        match entry.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (entry, None),
        }
    };
    let port = match port {
        None => 443,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("bad port `{p}`"))?,
    };
    Ok((host, port))
}

/// The host in canonical form ([`crate::host::normalize_host`]), in brackets when IPv6.
fn canonical_host(host: &str) -> Result<String, String> {
    let canonical =
        crate::host::normalize_host(host).map_err(|e| format!("bad host `{host}`: {e}"))?;
    Ok(if canonical.contains(':') {
        format!("[{canonical}]")
    } else {
        canonical
    })
}

/// A parsed upstream: `https://host[:port][/path]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// Normalized ([`crate::host::normalize_host`]); IPv6 in brackets.
    pub host: String,
    pub port: u16,
    /// Empty, or starts with `/` and does not end with one.
    pub path: String,
}

/// Parses and checks an upstream URL: `https` only, a host, an optional port and path; no
/// user info, query or fragment.
pub fn parse_upstream(url: &str) -> Result<Upstream, String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or("the upstream must be an `https://` URL (the real value only travels over TLS)")?;
    if rest.contains(['?', '#', '@', '\\'])
        || rest.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err("no user info, query, fragment, backslash or spaces in the upstream".into());
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (host, port) = split_host_port(authority)?;
    let host = canonical_host(host)?;
    let path = path.trim_end_matches('/');
    if path
        .split('/')
        .any(|s| s == "." || s == ".." || s.to_ascii_lowercase().contains("%2e"))
    {
        return Err("no `.` or `..` segments in the upstream's path".into());
    }
    Ok(Upstream {
        host,
        port,
        path: path.to_owned(),
    })
}

/// Whether `c` may appear in a header value (visible ASCII and spaces, no CR/LF).
fn header_value_ok(s: &str) -> bool {
    s.bytes()
        .all(|b| b == b' ' || b == b'\t' || (0x21..0x7f).contains(&b))
}

/// Checks one credential's route: a usable upstream, injection and variables.
pub fn check(c: &Credential) -> Result<(), PolicyError> {
    let name = &c.name;
    check_name(name)?;
    parse_upstream(&c.route.upstream)
        .map_err(|e| invalid(name, "upstream", &c.route.upstream, e))?;
    match &c.route.inject {
        Inject::Header {
            name: header,
            format,
        } => {
            let token = !header.is_empty()
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                return Err(invalid(
                    name,
                    "header",
                    header,
                    "a header name (letters, digits, `-`)",
                ));
            }
            if [
                "host",
                "content-length",
                "transfer-encoding",
                "connection",
                "proxy-authorization",
            ]
            .contains(&header.to_ascii_lowercase().as_str())
            {
                return Err(invalid(
                    name,
                    "header",
                    header,
                    "this header cannot carry a credential",
                ));
            }
            if format.matches("{}").count() != 1 || !header_value_ok(format) {
                return Err(invalid(
                    name,
                    "format",
                    format,
                    "exactly one `{}` (where the value goes), e.g. `Bearer {}`, in visible ASCII",
                ));
            }
        }
        Inject::Query { param } => {
            if param.is_empty()
                || !param
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            {
                return Err(invalid(
                    name,
                    "query",
                    param,
                    "a query parameter name (letters, digits, `-`, `_`, `.`)",
                ));
            }
        }
    }
    if c.route.token_env.is_empty() {
        return Err(invalid(name, "token_env", "[]", "at least one variable"));
    }
    for v in &c.route.token_env {
        check_env_name(name, "token_env", v)?;
    }
    for v in &c.route.base_url_env {
        check_env_name(name, "base_url_env", v)?;
    }
    for h in &c.route.hosts {
        parse_host_port(h).map_err(|e| invalid(name, "hosts", h, e))?;
    }
    if c.route.is_masked() && !c.route.base_url_env.is_empty() {
        return Err(invalid(
            name,
            "base_url_env",
            c.route.base_url_env.join(","),
            "a masked credential (with `hosts`) is used at its hosts, not through a base URL",
        ));
    }
    for p in &c.route.deny_paths {
        let ok = p.starts_with('/')
            && p.len() > 1
            && !p.ends_with('/')
            && p.bytes()
                .all(|b| (0x21..0x7f).contains(&b) && b != b'?' && b != b'%');
        if !ok {
            return Err(invalid(name, "deny_paths", p, "a path starting with `/` (segments may be `*`), without `?`, `%` or a trailing `/`"));
        }
    }
    claude_login::check_route(c)?;
    check_source(name, &c.source)
}

/// Checks credentials against each other and the environment rules: unique names, no variable
/// claimed twice, none also passed through or set by `env` (that would pass a real value, or
/// be overwritten).
pub fn check_all(credentials: &[Credential], env: &crate::model::Env) -> Result<(), PolicyError> {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, c) in credentials.iter().enumerate() {
        if credentials[..i].iter().any(|o| o.name == c.name) {
            return Err(invalid(&c.name, "", &c.name, "the route is given twice"));
        }
        for v in c.route.token_env.iter().chain(&c.route.base_url_env) {
            if let Some((_, other)) = seen.iter().find(|(name, _)| name == v) {
                return Err(invalid(
                    &c.name,
                    "token_env",
                    v,
                    format!("`{v}` is also set by the route `{other}`"),
                ));
            }
            seen.push((v, &c.name));
            if env.passthrough.iter().any(|p| p == v) || env.set.contains_key(v) {
                return Err(invalid(
                    &c.name,
                    "token_env",
                    v,
                    format!("`{v}` is also passed with --env/[env]: drop that, the route sets it"),
                ));
            }
        }
        if let Source::Env(v) = &c.source {
            if env.passthrough.iter().any(|p| p == v) {
                return Err(invalid(
                    &c.name,
                    "source.env",
                    v,
                    format!("`{v}` holds the real value and is also passed inside with --env/[env].passthrough: drop that"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
