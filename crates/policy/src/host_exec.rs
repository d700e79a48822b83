//! The catalogue of project files that host tools execute, or that make them execute code:
//! written by a sandboxed command, they would run with the user's full rights the next time
//! the user (or their editor, agent or shell) touches the project. Data, beside the profiles.
//!
//! In every profile these are protected paths (`deny_write`): read-only while the run lasts
//! and refused on creation (mediated creation; the post-run sweep quarantines what got past).
//! Each entry is relative, so it applies at any depth beneath every writable root, and names
//! the tool and why. A policy file can add entries (`deny_write`) and remove catalogue
//! entries by name (`unprotect`); git's own files and stockade's configuration cannot be
//! removed (see [`crate::profile::CORE_PROTECTED`]).
//!
//! No list is complete: a project's own sources, build scripts (`Makefile`, `build.rs`,
//! `package.json` scripts, `setup.py`) and virtualenvs also run on the host. Reviewing a run's
//! changes before they reach the workspace is the full answer.

/// One catalogue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostExec {
    /// A relative path pattern (one or more components; `*` and `?` within a component).
    pub path: &'static str,
    /// The host tool that reads it.
    pub tool: &'static str,
    /// How it makes that tool run code.
    pub why: &'static str,
}

const fn entry(path: &'static str, tool: &'static str, why: &'static str) -> HostExec {
    HostExec { path, tool, why }
}

/// Every catalogue entry, grouped by tool.
pub const HOST_EXEC: &[HostExec] = &[
    // Rust.
    entry(
        ".cargo/config.toml",
        "cargo",
        "build.rustc-wrapper, target runners and aliases run programs on the next cargo command (rust-analyzer runs one on opening the project)",
    ),
    entry(".cargo/config", "cargo", "old name of .cargo/config.toml, read the same way"),
    entry(
        "rust-toolchain.toml",
        "rustup",
        "a `path` toolchain makes every rustup proxy (cargo, rustc) run binaries from that path",
    ),
    entry("rust-toolchain", "rustup", "old name of rust-toolchain.toml, path toolchains included"),
    // JavaScript.
    entry(
        ".npmrc",
        "npm",
        "`script-shell` and `node-options` (--require) choose what every `npm run` executes",
    ),
    entry(".yarnrc.yml", "yarn", "`yarnPath` names the script every `yarn` command runs; `plugins` are loaded"),
    entry(".yarnrc", "yarn (classic)", "`yarn-path` names the script every `yarn` command runs"),
    entry(".yarn/releases", "yarn", "the yarn release `yarnPath` points at, run by every `yarn` command"),
    entry(".yarn/plugins", "yarn", "plugins loaded by every `yarn` command"),
    entry(".pnpmfile.cjs", "pnpm", "its hooks (readPackage, afterAllResolved) run on every install"),
    // Python.
    entry(
        ".venv/pip.conf",
        "pip",
        "pip in that virtualenv reads it: `index-url` picks where the next install fetches (and runs) packages from",
    ),
    // Environment managers.
    entry(".envrc", "direnv", "evaluated by the user's shell on entering the directory (once allowed; it can source other files)"),
    entry(".tool-versions", "asdf, mise", "a `path:` version makes the shims run binaries from that path"),
    entry("mise.toml", "mise", "[env] `_.source`, hooks and tasks run shell code on entering the directory"),
    entry(".mise.toml", "mise", "as mise.toml"),
    entry("mise.local.toml", "mise", "as mise.toml"),
    entry(".mise.local.toml", "mise", "as mise.toml"),
    entry(".config/mise", "mise", "as mise.toml (config.toml, conf.d)"),
    entry(".config/mise.toml", "mise", "as mise.toml"),
    // Git hook managers.
    entry(".pre-commit-config.yaml", "pre-commit", "its hooks (`repo: local` runs any command) run on the next `git commit`"),
    entry(".husky", "husky", "hook scripts git runs (core.hooksPath points there once installed)"),
    entry("lefthook.*", "lefthook", "commands it runs on git events"),
    entry(".lefthook.*", "lefthook", "as lefthook.yml"),
    entry("lefthook-local.*", "lefthook", "as lefthook.yml, local overrides"),
    entry(".lefthook-local.*", "lefthook", "as lefthook.yml, local overrides"),
    entry(".overcommit.yml", "overcommit", "hooks it runs on git events"),
    // Build tools that read per-project configuration on every command.
    entry(".bazelrc", "bazel", "flags for every command: `--workspace_status_command` runs a program on each build"),
    entry(
        ".mvn",
        "maven",
        "extensions.xml loads build extensions, jvm.config can add -javaagent, the wrapper's distributionUrl picks what mvnw runs",
    ),
    // Development containers.
    entry(".devcontainer", "devcontainers", "`initializeCommand` runs on the host; Dockerfiles and features are built from it"),
    entry(".devcontainer.json", "devcontainers", "as .devcontainer/devcontainer.json"),
    // Editors and IDEs.
    entry(".vscode", "VS Code", "tasks (runOn: folderOpen), launch configurations and settings that name executables"),
    entry(".idea", "JetBrains IDEs", "run configurations, external tools and startup tasks"),
    entry(".zed", "Zed", "tasks and settings that name language servers and formatters"),
    entry(".helix", "Helix", "languages.toml names language servers and formatters it starts"),
    entry(".nvim.lua", "Neovim", "run on start with `exrc` set (after a trust prompt)"),
    entry(".nvimrc", "Neovim", "run on start with `exrc` set (after a trust prompt)"),
    entry(".exrc", "Vim, Neovim", "run on start with `exrc` set"),
    entry(".dir-locals.el", "Emacs", "`eval` entries run Lisp on opening a file (after a prompt for unsafe ones)"),
    // Coding agents.
    entry(".claude", "Claude Code", "settings hooks and statusLine run commands; MCP servers, commands and agents"),
    entry(".mcp.json", "Claude Code and other MCP clients", "project MCP servers: commands started after approval"),
    entry(".codex", "Codex CLI", "project config: MCP servers and tool commands"),
    entry(".cursor", "Cursor", "hooks.json runs commands; mcp.json starts MCP servers"),
    entry(".gemini", "Gemini CLI", "settings.json MCP servers and tool-discovery commands, extensions"),
    entry(".qwen", "Qwen Code", "settings.json MCP servers and tool-discovery commands"),
    entry("opencode.json", "opencode", "local MCP servers and formatter/LSP commands"),
    entry("opencode.jsonc", "opencode", "as opencode.json"),
    entry(".opencode", "opencode", "plugins (JavaScript loaded at start), custom tools, config"),
    entry(".kiro", "Kiro", "agent hooks run commands; settings/mcp.json starts MCP servers"),
    entry(".amazonq", "Amazon Q Developer", "mcp.json starts workspace MCP servers"),
    entry(".roo", "Roo Code", "mcp.json starts project MCP servers"),
    entry(".continue", "Continue", "config blocks start MCP servers and run commands"),
    entry(".junie", "Junie", "project MCP servers (mcp/mcp.json)"),
    entry(".crush.json", "Crush", "MCP servers and language-server commands"),
    entry("crush.json", "Crush", "as .crush.json"),
    entry(".aider.conf.yml", "aider", "`lint-cmd` and `test-cmd` run after each edit"),
    entry(".windsurf", "Windsurf", "hooks.json runs commands around Cascade's actions"),
    entry(".clinerules/hooks", "Cline", "hook scripts run around Cline's tasks and tools"),
    // Shells, when the workspace is (or holds) a home directory.
    entry(".bashrc", "bash", "sourced by every interactive shell"),
    entry(".bash_profile", "bash", "sourced by login shells"),
    entry(".bash_login", "bash", "sourced by login shells"),
    entry(".bash_logout", "bash", "sourced when a login shell exits"),
    entry(".profile", "sh, bash", "sourced by login shells"),
    entry(".zshrc", "zsh", "sourced by interactive shells"),
    entry(".zshenv", "zsh", "sourced by every zsh"),
    entry(".zprofile", "zsh", "sourced by login shells"),
    entry(".zlogin", "zsh", "sourced by login shells"),
    entry(".config/fish", "fish", "config.fish and conf.d are sourced by every fish"),
    // Tools' global configs, when the workspace is (or holds) a home directory: each applies
    // to every project the user opens afterwards.
    entry(
        ".gitconfig",
        "git",
        "the global config: core.fsmonitor, core.hooksPath, aliases and filters run in every repository",
    ),
    entry(".config/git/config", "git", "the global config (XDG location), as ~/.gitconfig"),
    entry(
        ".config/git/attributes",
        "git",
        "global attributes select the diff, merge and filter drivers run in every repository",
    ),
    entry(".config/git/ignore", "git", "global ignore rules can hide a planted file from every `git status`"),
];

/// The catalogue entry named `path`.
pub fn host_exec_entry(path: &str) -> Option<&'static HostExec> {
    HOST_EXEC.iter().find(|e| e.path == path)
}

/// Where a protected path of a resolved policy comes from, as `stockade policy show --json` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProtectedSource {
    pub pattern: String,
    /// `built-in` (git's and stockade's own files), `catalogue`, `preset` (then `preset`
    /// names it), `flag` (`--protect`) or `policy file`.
    pub source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<&'static str>,
    /// A catalogue entry the policy file removed (`filesystem.unprotect`): not protected.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
}

/// The protected paths of `policy` with their sources, then the catalogue entries it
/// removed. `flags` are the `--protect` patterns of the command line.
pub fn protected_sources(policy: &crate::Policy, flags: &[String]) -> Vec<ProtectedSource> {
    let fs = &policy.filesystem;
    let of = |pattern: &str, removed: bool| {
        let entry = host_exec_entry(pattern);
        let preset = policy
            .presets
            .iter()
            .filter_map(|name| crate::presets::preset(name).ok())
            .find(|p| p.read_only.contains(&pattern))
            .map(|p| p.name);
        let source = if crate::profile::CORE_PROTECTED.contains(&pattern) {
            "built-in"
        } else if entry.is_some() {
            "catalogue"
        } else if flags.iter().any(|f| f == pattern) {
            "flag"
        } else if preset.is_some() {
            "preset"
        } else {
            "policy file"
        };
        ProtectedSource {
            pattern: pattern.to_owned(),
            preset: preset.filter(|_| source == "preset"),
            source,
            tool: entry.map(|e| e.tool),
            why: entry.map(|e| e.why),
            removed,
        }
    };
    fs.deny_write
        .iter()
        .map(|p| of(p, false))
        .chain(
            fs.unprotect
                .iter()
                .filter(|p| !fs.deny_write.contains(p))
                .map(|p| of(p, true)),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_unique_relative_and_documented() {
        let mut seen = std::collections::HashSet::new();
        for e in HOST_EXEC {
            assert!(seen.insert(e.path), "duplicate {}", e.path);
            assert!(!e.tool.is_empty() && !e.why.is_empty(), "{}", e.path);
            assert!(crate::paths::is_relative_pattern(e.path), "{}", e.path);
            crate::paths::check_syntax(e.path).unwrap();
        }
    }

    /// Every entry has a shape mediated creation checks during the run (`<root>/**/<tail>`,
    /// the tail only `*` and `?` wildcards): none is left to the post-run sweep alone.
    #[test]
    fn every_entry_is_guarded_during_the_run() {
        let ctx = crate::PathContext {
            home: "/h".into(),
            workspace: "/w".into(),
            writable_roots: vec!["/w".into()],
        };
        for e in HOST_EXEC {
            for p in crate::expand(e.path, &ctx).unwrap() {
                let crate::PathPattern::Glob(g) = p else {
                    panic!("{} is not a glob", e.path);
                };
                assert!(g.literal_base_and_tail().is_some(), "{}", e.path);
            }
        }
    }

    #[test]
    fn sources_name_catalogue_flag_and_file() {
        let file = crate::parse_policy_file(
            "[filesystem]\ndeny_write = [\"Makefile\"]\nunprotect = [\".idea\"]\n",
            "p",
        )
        .unwrap();
        let flags = vec!["justfile".to_owned()];
        let overrides = crate::Overrides {
            deny_write: flags.clone(),
            ..Default::default()
        };
        let policy = crate::resolve(Some(file), &overrides).unwrap();
        let sources = protected_sources(&policy, &flags);
        let find = |p: &str| sources.iter().find(|s| s.pattern == p).unwrap();
        assert_eq!(find(".git/hooks").source, "built-in");
        assert_eq!(find(".cargo/config.toml").source, "catalogue");
        assert_eq!(find(".cargo/config.toml").tool, Some("cargo"));
        assert_eq!(find("Makefile").source, "policy file");
        assert_eq!(find("justfile").source, "flag");
        assert!(find(".idea").removed);
        assert!(!find(".vscode").removed);
    }

    #[test]
    fn a_presets_read_only_paths_name_the_preset() {
        let file = crate::parse_policy_file("agent = \"codex\"\n", "p").unwrap();
        let policy = crate::resolve(Some(file), &crate::Overrides::default()).unwrap();
        let sources = protected_sources(&policy, &[]);
        let config = sources
            .iter()
            .find(|s| s.pattern == "~/.local/state/stockade/codex/config.toml")
            .unwrap();
        assert_eq!((config.source, config.preset), ("preset", Some("codex")));
    }
}
