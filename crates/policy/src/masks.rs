//! The default masks, as data: files and directories the sandbox cannot read (credentials,
//! histories, browser profiles, dotenv files) and files it reads as empty (shell start-up
//! files, which commonly hold `export X_TOKEN=...` but must exist for shells to start).
//!
//! Every entry names its category and why it is masked; an attack test (`attacks`
//! `credentials`) creates each one in a fake home and reads it inside a real run. The list
//! covers at least every credential location nono masks on Linux (its `deny_credentials`,
//! `deny_keychains_linux`, `deny_browser_data_linux`, `deny_shell_history` and
//! `deny_shell_configs` groups) plus the usual cloud, registry and database client stores.
//! No list is complete: `deny_read` in a policy file or `--deny-read` adds to it.

/// How a masked path looks inside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaskKind {
    /// Covered by an empty, mode-000 file or directory: every read fails (`deny_read`).
    Unreadable,
    /// Covered by an empty, readable file or directory: reads succeed and find nothing
    /// (`read_empty`). For files programs read at start-up, which must not fail.
    Empty,
}

/// One default mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mask {
    /// A path pattern (see [`crate::paths`]): `~/...` in the home, relative ones beneath every
    /// writable root.
    pub path: &'static str,
    pub kind: MaskKind,
    /// What kind of secret it holds: `ssh`, `cloud`, `registry`, ...
    pub category: &'static str,
    /// Why it is masked: which tool keeps what there.
    pub why: &'static str,
}

const fn hide(path: &'static str, category: &'static str, why: &'static str) -> Mask {
    Mask {
        path,
        kind: MaskKind::Unreadable,
        category,
        why,
    }
}

const fn empty(path: &'static str, why: &'static str) -> Mask {
    Mask {
        path,
        kind: MaskKind::Empty,
        category: "shell",
        why,
    }
}

/// Every default mask, in the order `policy show --json` lists them.
pub const DEFAULT_MASKS: &[Mask] = &[
    // Keys.
    hide("~/.ssh", "ssh", "SSH private keys and client config"),
    hide("~/.gnupg", "gpg", "GnuPG private keys"),
    hide(
        "~/.pki",
        "keys",
        "NSS database: client certificates and their keys",
    ),
    hide("~/.keys", "keys", "conventional place for hand-kept keys"),
    hide(
        "~/.secrets",
        "keys",
        "conventional place for hand-kept secrets",
    ),
    hide(
        "~/.credentials",
        "keys",
        "conventional place for hand-kept credentials",
    ),
    // Cloud providers.
    hide("~/.aws", "cloud", "AWS CLI/SDK credentials and SSO tokens"),
    hide("~/.azure", "cloud", "Azure CLI access tokens"),
    hide("~/.config/gcloud", "cloud", "Google Cloud SDK credentials"),
    hide("~/.gcloud", "cloud", "older Google Cloud SDK credentials"),
    hide(
        "~/.oci",
        "cloud",
        "Oracle Cloud CLI config and API signing keys",
    ),
    hide("~/.config/doctl", "cloud", "DigitalOcean CLI access token"),
    hide("~/.config/hcloud", "cloud", "Hetzner Cloud CLI API tokens"),
    hide("~/.fly", "cloud", "flyctl access token"),
    hide(
        "~/.config/rclone",
        "cloud",
        "rclone remotes with their keys and tokens",
    ),
    hide("~/.s3cfg", "cloud", "s3cmd access and secret keys"),
    hide("~/.boto", "cloud", "boto/gsutil credentials"),
    hide(
        "~/.terraform.d",
        "cloud",
        "Terraform Cloud API tokens (credentials.tfrc.json)",
    ),
    hide(
        "~/.terraformrc",
        "cloud",
        "Terraform CLI config: `credentials` blocks hold tokens",
    ),
    hide("~/.vault-token", "cloud", "HashiCorp Vault token"),
    // Containers and clusters.
    hide(
        "~/.kube",
        "containers",
        "kubeconfig: cluster credentials and tokens",
    ),
    hide(
        "~/.docker",
        "containers",
        "docker login credentials (config.json)",
    ),
    hide(
        "~/.config/containers/auth.json",
        "containers",
        "podman/buildah login credentials",
    ),
    // Source forges and git.
    hide(
        "~/.git-credentials",
        "git",
        "git credential-store passwords and tokens",
    ),
    hide(
        "~/.config/git/credentials",
        "git",
        "git credential-store, XDG location",
    ),
    hide("~/.config/gh", "git", "GitHub CLI OAuth token"),
    hide("~/.config/hub", "git", "hub OAuth token"),
    hide("~/.config/glab-cli", "git", "GitLab CLI token"),
    hide("~/.netrc", "git", "logins for curl, git, ftp and others"),
    // Package registries.
    hide("~/.npmrc", "registry", "npm registry auth tokens"),
    hide("~/.pypirc", "registry", "PyPI upload credentials"),
    hide(
        "~/.cargo/credentials",
        "registry",
        "crates.io token (old name)",
    ),
    hide("~/.cargo/credentials.toml", "registry", "crates.io token"),
    hide("~/.gem/credentials", "registry", "RubyGems API key"),
    hide(
        "~/.config/composer/auth.json",
        "registry",
        "Composer registry credentials",
    ),
    hide(
        "~/.composer/auth.json",
        "registry",
        "Composer registry credentials, old location",
    ),
    hide("~/.m2/settings.xml", "registry", "Maven server passwords"),
    hide(
        "~/.m2/settings-security.xml",
        "registry",
        "Maven master password",
    ),
    hide(
        "~/.gradle/gradle.properties",
        "registry",
        "Gradle publishing credentials",
    ),
    hide(
        "~/.nuget/NuGet/NuGet.Config",
        "registry",
        "NuGet source credentials",
    ),
    // Databases.
    hide("~/.pgpass", "database", "PostgreSQL passwords"),
    hide("~/.my.cnf", "database", "MySQL client password"),
    hide(
        "~/.mylogin.cnf",
        "database",
        "MySQL login paths (obfuscated passwords)",
    ),
    // Password managers and keyrings.
    hide("~/.password-store", "passwords", "pass(1) store"),
    hide("~/.local/share/keyrings", "passwords", "GNOME keyring"),
    hide("~/.local/share/kwalletd", "passwords", "KDE wallets"),
    hide(
        "~/.config/op",
        "passwords",
        "1Password CLI config and session",
    ),
    hide("~/.op", "passwords", "1Password CLI, older location"),
    hide(
        "~/.1password",
        "passwords",
        "1Password agent socket and data",
    ),
    hide(
        "~/.config/1Password",
        "passwords",
        "1Password desktop app data",
    ),
    // Coding agents' own logins.
    hide(
        "~/.claude/.credentials.json",
        "agents",
        "Claude Code OAuth tokens",
    ),
    hide(
        "~/.claude.json",
        "agents",
        "Claude Code's global state: the API key of a Console /login (primaryApiKey) on Linux, \
         user MCP servers' env tokens",
    ),
    hide(
        "~/.claude.json.backup*",
        "agents",
        "Claude Code's backups of ~/.claude.json (the same keys and tokens)",
    ),
    hide(
        "~/.claude/backups",
        "agents",
        "Claude Code's backups of ~/.claude.json (the same keys and tokens)",
    ),
    hide(
        "~/.claude/.config.json",
        "agents",
        "Claude Code's legacy global config (primaryApiKey)",
    ),
    hide(
        "~/.claude/settings.json",
        "agents",
        "Claude Code's user settings: its env (ANTHROPIC_AUTH_TOKEN, gateway keys), apiKeyHelper",
    ),
    hide(
        "~/.claude/settings.local.json",
        "agents",
        "Claude Code's local user settings (env tokens)",
    ),
    hide(
        "~/.claude/history.jsonl",
        "history",
        "Claude Code's prompt history (typed prompts, pasted tokens)",
    ),
    hide(
        "~/.claude/projects",
        "history",
        "Claude Code's session transcripts (every prompt, tool output and file read)",
    ),
    hide(
        "~/.codex/auth.json",
        "agents",
        "Codex CLI API key and tokens",
    ),
    hide(
        "~/.codex/history.jsonl",
        "history",
        "Codex CLI's prompt history (typed prompts, pasted tokens)",
    ),
    hide(
        "~/.codex/sessions",
        "history",
        "Codex CLI's session transcripts (every prompt, tool output and file read)",
    ),
    hide(
        "~/.gemini/oauth_creds.json",
        "agents",
        "Gemini CLI OAuth tokens",
    ),
    // Environment files in the home.
    hide(
        "~/.env*",
        "dotenv",
        "dotenv files in the home (~/.env, ~/.envrc, ~/.env.local)",
    ),
    // Shell and REPL histories: typed passwords and exported tokens.
    hide("~/.bash_history", "history", "bash history"),
    hide("~/.zsh_history", "history", "zsh history"),
    hide("~/.histfile", "history", "zsh history, common HISTFILE"),
    hide("~/.history", "history", "shell history, common HISTFILE"),
    hide(
        "~/.local/share/fish/fish_history",
        "history",
        "fish history",
    ),
    hide("~/.python_history", "history", "Python REPL history"),
    hide("~/.node_repl_history", "history", "Node.js REPL history"),
    hide("~/.psql_history", "history", "psql history"),
    hide("~/.mysql_history", "history", "mysql client history"),
    hide("~/.sqlite_history", "history", "sqlite3 history"),
    hide(
        "~/.rediscli_history",
        "history",
        "redis-cli history (AUTH commands)",
    ),
    hide("~/.lesshst", "history", "less search history"),
    hide("~/.viminfo", "history", "vim registers and command history"),
    // Browser profiles (cookies, saved passwords, sessions).
    hide("~/.mozilla", "browser", "Firefox profiles"),
    hide("~/.config/google-chrome", "browser", "Chrome profiles"),
    hide("~/.config/chromium", "browser", "Chromium profiles"),
    hide("~/.config/BraveSoftware", "browser", "Brave profiles"),
    hide("~/.config/microsoft-edge", "browser", "Edge profiles"),
    hide("~/.config/vivaldi", "browser", "Vivaldi profiles"),
    hide("~/.config/opera", "browser", "Opera profiles"),
    hide("~/snap/firefox", "browser", "Firefox (snap) profiles"),
    hide(
        "~/.var/app/org.mozilla.firefox",
        "browser",
        "Firefox (flatpak) profiles",
    ),
    hide(
        "~/.var/app/com.google.Chrome",
        "browser",
        "Chrome (flatpak) profiles",
    ),
    // Dotenv files, at any depth beneath every writable root.
    hide(".env", "dotenv", "dotenv file in a project"),
    hide(
        ".env.*",
        "dotenv",
        "dotenv variants in a project (.env.local, .env.production)",
    ),
    // Shell start-up files: read as empty, so shells still start.
    empty("~/.bashrc", "bash start-up file; often exports tokens"),
    empty("~/.bash_profile", "bash login start-up file"),
    empty("~/.bash_login", "bash login start-up file"),
    empty("~/.bash_logout", "bash logout file"),
    empty("~/.bash_aliases", "sourced by the usual ~/.bashrc"),
    empty("~/.profile", "POSIX shell login start-up file"),
    empty("~/.zshrc", "zsh start-up file"),
    empty("~/.zshenv", "zsh start-up file, read by every zsh"),
    empty("~/.zprofile", "zsh login start-up file"),
    empty("~/.zlogin", "zsh login start-up file"),
    empty("~/.zlogout", "zsh logout file"),
    empty("~/.kshrc", "ksh start-up file"),
    empty("~/.mkshrc", "mksh start-up file"),
    empty("~/.cshrc", "csh start-up file"),
    empty("~/.tcshrc", "tcsh start-up file"),
    empty("~/.config/fish", "fish configuration (config.fish, conf.d)"),
];

/// The patterns of the default masks of `kind`, in catalogue order.
pub fn default_masks(kind: MaskKind) -> impl Iterator<Item = &'static str> {
    DEFAULT_MASKS
        .iter()
        .filter(move |m| m.kind == kind)
        .map(|m| m.path)
}

/// The catalogue entry of `pattern`, if it is a default mask.
pub fn mask_entry(pattern: &str) -> Option<&'static Mask> {
    DEFAULT_MASKS.iter().find(|m| m.path == pattern)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_unique_and_documented() {
        let mut seen = std::collections::HashSet::new();
        for m in DEFAULT_MASKS {
            assert!(seen.insert(m.path), "duplicate {}", m.path);
            assert!(!m.why.is_empty() && !m.category.is_empty(), "{}", m.path);
            crate::paths::check_syntax(m.path).unwrap();
        }
    }

    /// Empty masks are exact home paths: a mount needs an existing path, and a relative or
    /// glob pattern would name paths the sandbox can create.
    #[test]
    fn empty_masks_are_exact_home_paths() {
        for p in default_masks(MaskKind::Empty) {
            assert!(p.starts_with("~/"), "{p}");
            assert!(!crate::paths::has_glob_meta(p), "{p}");
        }
    }

    /// nono's Linux credential, keyring, history and shell-config locations are all covered
    /// (by an entry of their own or by a parent directory's).
    #[test]
    fn covers_nonos_linux_list() {
        let nono = [
            "~/.ssh",
            "~/.gnupg",
            "~/.aws",
            "~/.azure",
            "~/.config/gcloud",
            "~/.gcloud",
            "~/.kube",
            "~/.docker",
            "~/.git-credentials",
            "~/.netrc",
            "~/.npmrc",
            "~/.vault-token",
            "~/.credentials",
            "~/.secrets",
            "~/.keys",
            "~/.pki",
            "~/.terraform.d",
            "~/.config/op",
            "~/.password-store",
            "~/.1password",
            "~/.op",
            "~/.local/share/keyrings",
            "~/.config/google-chrome",
            "~/.config/chromium",
            "~/.mozilla/firefox",
            "~/.config/microsoft-edge",
            "~/.config/BraveSoftware",
            "~/.bash_history",
            "~/.zsh_history",
            "~/.history",
            "~/.python_history",
            "~/.zshrc",
            "~/.zprofile",
            "~/.zshenv",
            "~/.zlogin",
            "~/.zlogout",
            "~/.bashrc",
            "~/.bash_profile",
            "~/.bash_login",
            "~/.bash_logout",
            "~/.profile",
            "~/.config/fish",
            "~/.env",
            "~/.envrc",
        ];
        let home = std::path::Path::new("/h");
        let ctx = crate::PathContext {
            home: home.to_path_buf(),
            workspace: "/w".into(),
            writable_roots: Vec::new(),
        };
        let patterns: Vec<crate::PathPattern> = DEFAULT_MASKS
            .iter()
            .flat_map(|m| crate::expand(m.path, &ctx).unwrap())
            .collect();
        for p in nono {
            let path = home.join(&p[2..]);
            let covered = patterns.iter().any(|pat| match pat {
                crate::PathPattern::Exact(e) => crate::is_within(&path, e),
                crate::PathPattern::Glob(g) => g.is_match(&path),
            });
            assert!(covered, "{p} is not masked");
        }
    }
}
