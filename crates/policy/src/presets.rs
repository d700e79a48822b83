//! Presets: what a known agent or toolchain needs, as data (like the profiles), layered on the
//! profile before the policy file and the flags (`--agent NAME`, `--preset NAME`, or
//! `agent = "..."` / `presets = [...]` in a policy file). `stockade policy show` prints what
//! each adds.
//!
//! An agent preset runs the agent itself inside (worker mode): its model key stays on the host
//! (a credential route); its state lives in a directory of its own under
//! `~/.local/state/stockade/`, writable and made when missing, never the host's (`~/.claude`,
//! `~/.codex` stay read-only: an agent's state directory holds dozens of files its host
//! sessions execute or load, and no list of them stays complete); in it, what the agent would
//! execute across runs (settings with hooks, commands, agents, skills, plugins, MCP configs)
//! stays read-only or is the run's own; the variables its tools need pass; there is no
//! wall-clock limit unless one is asked for.
//!
//! A toolchain preset opens its registry's domains (through the proxy) and gives it a cache of
//! its own under `~/.cache/stockade/`, shared by sandboxed runs and never the host's own (a
//! writable host cache would let a run poison what the host builds and runs next).
//!
//! ```
//! let p = policy::preset("claude-code").unwrap();
//! assert_eq!(p.kind, policy::PresetKind::Agent);
//! assert!(p.read_only.contains(&"~/.local/state/stockade/claude-code/settings.json"));
//! assert!(policy::preset("npm").unwrap().allow_domains.contains(&"registry.npmjs.org"));
//! ```

use serde::Serialize;

use crate::error::PolicyError;
use crate::model::{NetworkMode, Policy};

/// Whether a preset is an agent (`--agent`, at most one) or a toolchain (`--preset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PresetKind {
    Agent,
    Toolchain,
}

/// One preset: everything it adds to a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Preset {
    pub name: &'static str,
    pub kind: PresetKind,
    /// One line for `policy show`.
    pub summary: &'static str,
    /// Credential routes (`--credential NAME`, with the route's default source).
    pub credentials: &'static [&'static str],
    /// Domains reached through the proxy (the network mode becomes `proxy` if it was `none`).
    pub allow_domains: &'static [&'static str],
    /// Writable directories, made (0700) when missing.
    pub state: &'static [&'static str],
    /// Paths inside them that stay read-only (protected): what the agent runs on the host.
    pub read_only: &'static [&'static str],
    /// Which of those are directories the agent makes at start: made empty (0700) when
    /// missing, so its start meets an existing directory instead of a refusal on every run.
    pub made_dirs: &'static [&'static str],
    /// Directories in the state that each run sees empty and of its own (a private tmpfs):
    /// what the agent writes there and the host later executes (its shell snapshots) never
    /// reaches the host, and the host's are out of the agent's reach.
    pub private: &'static [&'static str],
    /// Files written into the state when missing (created new, beneath the directory's
    /// descriptor, never over or through what is there): the answers to what the agent would
    /// otherwise ask at its first start. Where one is there, it is rebuilt before each run from
    /// the [`SEED_CARRIED_KEYS`] of what is there (read on the host as data); where that is not
    /// a plain JSON file, from this text. `{stand_in_tail:ROUTE}` in a file stands for the
    /// last 20 characters of route ROUTE's stand-ins, the same in every run of the user.
    pub seeds: &'static [(&'static str, &'static str)],
    /// Caller's variables passed in (names that look like secrets never are).
    pub env_allow: &'static [&'static str],
    /// Variables set (a value starting with `~/` is in the caller's home).
    pub env_set: &'static [(&'static str, &'static str)],
    /// No wall-clock limit (an agent session lasts as long as the person wants).
    pub no_timeout: bool,
}

/// What of a seeded JSON state file (Claude Code's `.claude.json`) one run leaves for the next:
/// these top-level keys only, answers and counters that start nothing. The rest, written by the
/// agent or by anything it ran, is dropped when the next run rebuilds the file from its seed:
/// `mcpServers` (started at every start), `env` (applied to the agent and its tools:
/// `BASH_ENV`), `apiKeyHelper`, `primaryApiKey`, `projects` (per-directory grants and MCP
/// servers), the plugin marketplace's installs, and any key not named here.
pub const SEED_CARRIED_KEYS: &[&str] = &[
    "hasCompletedOnboarding",
    "lastOnboardingVersion",
    "customApiKeyResponses",
    "numStartups",
    "firstStartTime",
    "firstStartVersion",
    "userID",
    "machineID",
    "migrationVersion",
    "opusProMigrationComplete",
    "hasResetAutoModeOptInForDefaultOffer",
    "seenNotifications",
    "tipsHistory",
    "tipsHistoryByCommand",
    "tipLifetimeShownCounts",
    "lastReleaseNotesSeen",
    "lastClawdEntranceVersion",
    "hasSeenAutoDefaultNotice",
    "hasSeenTasksHint",
    "promptQueueUseCount",
    "autoModeClassifierBillingNoticeAcknowledgedAt",
    "theme",
];

/// Every preset, agents first, in the order they are documented.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "claude-code",
        kind: PresetKind::Agent,
        summary: "Claude Code (`claude`) as the worker: the Anthropic key on the host, its state in a directory of its own (CLAUDE_CONFIG_DIR, never the host's ~/.claude, which stays read-only); its settings, hooks, commands, agents and skills read-only there, shell snapshots, session env and plugins its own per run",
        credentials: &["anthropic"],
        allow_domains: &[],
        state: &["~/.local/state/stockade/claude-code"],
        read_only: &[
            "~/.local/state/stockade/claude-code/settings.json",
            "~/.local/state/stockade/claude-code/settings.local.json",
            "~/.local/state/stockade/claude-code/settings*.json",
            "~/.local/state/stockade/claude-code/.config.json",
            "~/.local/state/stockade/claude-code/hooks",
            "~/.local/state/stockade/claude-code/commands",
            "~/.local/state/stockade/claude-code/agents",
            "~/.local/state/stockade/claude-code/skills",
            "~/.local/state/stockade/claude-code/output-styles",
            "~/.local/state/stockade/claude-code/CLAUDE.md",
            "~/.local/state/stockade/claude-code/.mcp.json",
            "~/.local/state/stockade/claude-code/local",
        ],
        made_dirs: &[
            "~/.local/state/stockade/claude-code/hooks",
            "~/.local/state/stockade/claude-code/commands",
            "~/.local/state/stockade/claude-code/agents",
            "~/.local/state/stockade/claude-code/skills",
            "~/.local/state/stockade/claude-code/output-styles",
            "~/.local/state/stockade/claude-code/local",
        ],
        // What Claude Code runs or sources without asking (shell snapshots, session env
        // scripts, background jobs) and the code it loads (plugins): the worker's own, per run.
        private: &[
            "~/.local/state/stockade/claude-code/shell-snapshots",
            "~/.local/state/stockade/claude-code/session-env",
            "~/.local/state/stockade/claude-code/jobs",
            "~/.local/state/stockade/claude-code/plugins",
        ],
        // Its first start's onboarding done (else it checks that it reaches api.anthropic.com
        // and platform.claude.com itself, which the route does not carry, and exits), and the
        // stand-in approved as its API key (it remembers keys by their last 20 characters).
        seeds: &[(
            "~/.local/state/stockade/claude-code/.claude.json",
            "{\"hasCompletedOnboarding\":true,\"customApiKeyResponses\":{\"approved\":[\"{stand_in_tail:anthropic}\"],\"rejected\":[]}}\n",
        )],
        env_allow: &["CLAUDE_CODE_EXECPATH", "CLAUDE_CODE_ENTRYPOINT", "CLAUDECODE"],
        env_set: &[
            ("CLAUDE_CONFIG_DIR", "~/.local/state/stockade/claude-code"),
            // Updates, telemetry and error reports: nothing the worker needs, and nothing the
            // proxy would let through.
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            // Claude Code's own switch for running in a sandbox: it does not ask whether to
            // trust the workspace, whose settings, hooks and MCP servers run inside with it.
            ("CLAUDE_CODE_SANDBOXED", "1"),
        ],
        no_timeout: true,
    },
    Preset {
        name: "codex",
        kind: PresetKind::Agent,
        summary: "Codex CLI (`codex --sandbox danger-full-access`: stockade is the sandbox) as the worker: the OpenAI key on the host, its state in a directory of its own (CODEX_HOME, never the host's ~/.codex, which stays read-only); config.toml, rules, prompts, skills, hooks and AGENTS files read-only there",
        credentials: &["openai"],
        allow_domains: &[],
        state: &["~/.local/state/stockade/codex"],
        read_only: &[
            "~/.local/state/stockade/codex/config.toml",
            "~/.local/state/stockade/codex/*.toml",
            "~/.local/state/stockade/codex/rules",
            "~/.local/state/stockade/codex/prompts",
            "~/.local/state/stockade/codex/skills",
            "~/.local/state/stockade/codex/hooks",
            "~/.local/state/stockade/codex/hooks.json",
            "~/.local/state/stockade/codex/AGENTS.md",
            "~/.local/state/stockade/codex/AGENTS.override.md",
        ],
        made_dirs: &[
            "~/.local/state/stockade/codex/rules",
            "~/.local/state/stockade/codex/prompts",
            "~/.local/state/stockade/codex/skills",
            "~/.local/state/stockade/codex/hooks",
        ],
        private: &["~/.local/state/stockade/codex/shell_snapshots"],
        seeds: &[],
        env_allow: &[],
        env_set: &[("CODEX_HOME", "~/.local/state/stockade/codex")],
        no_timeout: true,
    },
    Preset {
        name: "opencode",
        kind: PresetKind::Agent,
        summary: "opencode as the worker: its data, state and cache in directories of its own (XDG_DATA_HOME, XDG_STATE_HOME, XDG_CACHE_HOME; never the host's, whose downloaded tools the host runs); its config directory (XDG_CONFIG_HOME: plugins, tools, what it installs there at start) a fresh one per run, the host's ~/.config/opencode unseen and read-only (give settings in the project's opencode.json or OPENCODE_CONFIG_CONTENT); add the model's key with --credential (for the anthropic route with upstream = \"https://api.anthropic.com/v1\")",
        credentials: &[],
        allow_domains: &["models.dev", "models.opencode.ai"],
        state: &["~/.local/state/stockade/opencode"],
        read_only: &[],
        made_dirs: &[],
        // Its config directory: OpenCode writes a .gitignore, a package.json and plugin
        // dependencies there at every start, and loads plugins from it: each run's own.
        private: &["~/.local/state/stockade/opencode/config"],
        seeds: &[],
        env_allow: &["OPENCODE_*"],
        env_set: &[
            ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
            ("XDG_CONFIG_HOME", "~/.local/state/stockade/opencode/config"),
            ("XDG_DATA_HOME", "~/.local/state/stockade/opencode/data"),
            ("XDG_STATE_HOME", "~/.local/state/stockade/opencode/state"),
            ("XDG_CACHE_HOME", "~/.local/state/stockade/opencode/cache"),
        ],
        no_timeout: true,
    },
    Preset {
        name: "aider",
        kind: PresetKind::Agent,
        summary: "aider as the worker: ~/.aider writable (caches), its config files read-only (they are in the read-only home); add the model's key with --credential",
        credentials: &[],
        allow_domains: &[],
        state: &["~/.aider"],
        read_only: &[],
        made_dirs: &[],
        private: &[],
        seeds: &[],
        env_allow: &["AIDER_*"],
        env_set: &[
            ("AIDER_CHECK_UPDATE", "false"),
            ("AIDER_ANALYTICS", "false"),
            // litellm's model prices from its own package, not raw.githubusercontent.com.
            ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
        ],
        no_timeout: true,
    },
    Preset {
        name: "cargo",
        kind: PresetKind::Toolchain,
        summary: "crates.io through the proxy; CARGO_HOME is a cache of stockade's own (the host's ~/.cargo config and registry are not used)",
        credentials: &[],
        allow_domains: &["crates.io", "index.crates.io", "static.crates.io"],
        state: &["~/.cache/stockade/cargo"],
        read_only: &["~/.cache/stockade/cargo/config.toml", "~/.cache/stockade/cargo/config", "~/.cache/stockade/cargo/bin"],
        made_dirs: &["~/.cache/stockade/cargo/bin"],
        private: &[],
        seeds: &[],
        env_allow: &[],
        env_set: &[("CARGO_HOME", "~/.cache/stockade/cargo")],
        no_timeout: false,
    },
    Preset {
        name: "npm",
        kind: PresetKind::Toolchain,
        summary: "registry.npmjs.org through the proxy; npm's cache is one of stockade's own",
        credentials: &[],
        allow_domains: &["registry.npmjs.org"],
        state: &["~/.cache/stockade/npm"],
        read_only: &[],
        made_dirs: &[],
        private: &[],
        seeds: &[],
        env_allow: &[],
        env_set: &[("npm_config_cache", "~/.cache/stockade/npm")],
        no_timeout: false,
    },
    Preset {
        name: "pip",
        kind: PresetKind::Toolchain,
        summary: "PyPI through the proxy; pip's cache is one of stockade's own",
        credentials: &[],
        allow_domains: &["pypi.org", "files.pythonhosted.org"],
        state: &["~/.cache/stockade/pip"],
        read_only: &[],
        made_dirs: &[],
        private: &[],
        seeds: &[],
        env_allow: &[],
        env_set: &[("PIP_CACHE_DIR", "~/.cache/stockade/pip")],
        no_timeout: false,
    },
    Preset {
        name: "go",
        kind: PresetKind::Toolchain,
        summary: "the Go module proxy and checksum database through the proxy; module and build caches of stockade's own",
        credentials: &[],
        allow_domains: &["proxy.golang.org", "sum.golang.org"],
        state: &["~/.cache/stockade/go"],
        read_only: &[],
        made_dirs: &[],
        private: &[],
        seeds: &[],
        env_allow: &[],
        env_set: &[
            ("GOMODCACHE", "~/.cache/stockade/go/mod"),
            ("GOCACHE", "~/.cache/stockade/go/build"),
            ("GOPATH", "~/.cache/stockade/go/path"),
        ],
        no_timeout: false,
    },
];

/// The preset called `name`.
///
/// # Errors
///
/// [`PolicyError::UnknownPreset`] when there is none, listing the known ones.
pub fn preset(name: &str) -> Result<&'static Preset, PolicyError> {
    PRESETS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| PolicyError::UnknownPreset {
            name: name.to_owned(),
            known: PRESETS
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Add the presets `names` to `policy`, in order: at most one agent, then toolchains; each
/// name once. Called on the profile, before the policy file and the flags (which may change
/// anything a preset set: `--timeout 600` gives an agent run a limit again).
///
/// # Errors
///
/// An unknown name, two agents, or a name given twice ([`PolicyError::UnknownPreset`],
/// [`PolicyError::InvalidValue`]).
pub fn apply(policy: &mut Policy, names: &[String]) -> Result<(), PolicyError> {
    let mut agent: Option<&str> = None;
    for name in names {
        let p = preset(name)?;
        if policy.presets.iter().any(|n| n == name) {
            continue;
        }
        if p.kind == PresetKind::Agent {
            if let Some(first) = agent {
                return Err(PolicyError::InvalidValue {
                    key: "agent".into(),
                    value: name.clone(),
                    reason: format!("one agent per run (`{first}` is already given)"),
                });
            }
            agent = Some(p.name);
        }
        for c in p.credentials {
            let cred = crate::credentials::parse_flag(c, &policy.credentials)?;
            if !policy.credentials.iter().any(|o| o.name == cred.name) {
                policy.credentials.push(cred);
            }
        }
        let fs = &mut policy.filesystem;
        push_all(&mut fs.allow_write, p.state);
        push_all(&mut fs.created_roots, p.state);
        push_all(&mut fs.created_roots, p.made_dirs);
        push_all(&mut fs.created_roots, p.private);
        push_all(&mut fs.private, p.private);
        push_all(&mut fs.deny_write, p.read_only);
        push_all(&mut policy.env.allow, p.env_allow);
        for (k, v) in p.env_set {
            policy.env.set.insert((*k).to_owned(), (*v).to_owned());
        }
        if !p.allow_domains.is_empty() {
            push_all(&mut policy.network.allow_domains, p.allow_domains);
            if policy.network.mode == NetworkMode::None {
                policy.network.mode = NetworkMode::Proxy;
            }
        }
        if p.no_timeout {
            policy.limits.timeout = Some(0);
        }
        policy.presets.push(p.name.to_owned());
    }
    Ok(())
}

fn push_all(list: &mut Vec<String>, items: &[&str]) {
    for item in items {
        if !list.iter().any(|x| x == item) {
            list.push((*item).to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::profile;

    #[test]
    fn every_preset_path_passes_the_syntax_check() {
        for p in PRESETS {
            for path in p.state.iter().chain(p.read_only) {
                crate::paths::check_syntax(path).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            }
            for path in p.state {
                assert!(path.starts_with("~/"), "{}: {path}", p.name);
                assert!(!crate::paths::has_glob_meta(path), "{}: {path}", p.name);
            }
            for path in p.private {
                assert!(!crate::paths::has_glob_meta(path), "{}: {path}", p.name);
                assert!(
                    p.state.iter().any(|s| path.starts_with(&format!("{s}/"))),
                    "{}: {path} is not inside its state",
                    p.name
                );
            }
            for path in p.made_dirs {
                assert!(
                    p.read_only.contains(path),
                    "{}: {path} is not read-only",
                    p.name
                );
            }
            for path in p.read_only {
                assert!(
                    p.state.iter().any(|s| path.starts_with(&format!("{s}/"))),
                    "{}: {path} is not inside its state",
                    p.name
                );
            }
            for (name, _) in p.env_set {
                assert!(!crate::env::is_secret_name(name), "{}: {name}", p.name);
            }
        }
    }

    #[test]
    fn claude_code_adds_its_route_state_and_read_only_config() {
        let mut p = profile("workspace-write").unwrap();
        apply(&mut p, &["claude-code".into()]).unwrap();
        assert_eq!(p.presets, ["claude-code"]);
        assert_eq!(p.credentials.len(), 1);
        assert_eq!(p.credentials[0].name, "anthropic");
        let state = "~/.local/state/stockade/claude-code";
        assert!(p.filesystem.allow_write.contains(&state.to_owned()));
        assert!(p.filesystem.created_roots.contains(&state.to_owned()));
        assert!(!p
            .filesystem
            .allow_write
            .iter()
            .any(|w| w.starts_with("~/.claude")));
        for f in ["settings.json", "hooks", "skills", ".config.json"] {
            let f = format!("{state}/{f}");
            assert!(p.filesystem.deny_write.contains(&f), "{f}");
        }
        assert_eq!(p.env.set["CLAUDE_CONFIG_DIR"], state);
        assert!(p.env.allow.contains(&"CLAUDE_CODE_EXECPATH".to_owned()));
        assert_eq!(p.limits.timeout, Some(0));
    }

    #[test]
    fn toolchains_open_their_registry_through_the_proxy() {
        let mut p = profile("workspace-write").unwrap();
        apply(&mut p, &["cargo".into(), "npm".into(), "cargo".into()]).unwrap();
        assert_eq!(p.presets, ["cargo", "npm"]);
        assert_eq!(p.network.mode, NetworkMode::Proxy);
        assert!(p
            .network
            .allow_domains
            .contains(&"static.crates.io".to_owned()));
        assert!(p
            .network
            .allow_domains
            .contains(&"registry.npmjs.org".to_owned()));
        assert_eq!(p.limits.timeout, Some(crate::profile::DEFAULT_TIMEOUT_SECS));
    }

    #[test]
    fn one_agent_and_known_names_only() {
        let mut p = profile("workspace-write").unwrap();
        let two = apply(&mut p, &["claude-code".into(), "codex".into()]).unwrap_err();
        assert!(two.to_string().contains("one agent per run"), "{two}");
        let unknown = preset("yolo").unwrap_err();
        assert_eq!(unknown.code(), "E_POLICY_INVALID");
        assert!(unknown
            .hint()
            .unwrap_or_default()
            .contains("claude-code, codex"));
    }
}
