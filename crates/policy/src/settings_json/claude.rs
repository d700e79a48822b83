//! Claude Code's `settings.json`: its `sandbox` section and the permission rules Claude Code
//! itself merges into the sandbox (`Read(P)` deny rules into `denyRead`, `Edit(P)` allow and
//! deny rules into `allowWrite` and `denyWrite`, `WebFetch(domain:X)` allow and deny rules
//! into `allowedDomains` and `deniedDomains`). Every other setting configures Claude Code
//! itself (models, hooks, prompts, UI) and is accepted without effect, as long as it is one
//! Claude Code 2.1 knows: an unknown top-level key is an error (a typo such as `sandbx` would
//! otherwise drop the whole section without a word).

use std::collections::BTreeMap;

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::{
    escape_braces, is_private_area, join_relative, srt_glob, CredentialsSettings,
    FilesystemSettings, NetworkSettings, PathList, PathStyle, Reader, RipgrepSettings, Unsupported,
    MACOS_ONLY, WEAKER_NESTED,
};
use crate::error::PolicyError;
use crate::paths::has_glob_meta;

/// The top level of Claude Code's settings: the two sections stockade reads, and the rest.
#[derive(Debug, Deserialize)]
pub(super) struct ClaudeSettings {
    #[serde(default)]
    sandbox: Option<ClaudeSandbox>,
    #[serde(default)]
    permissions: Option<Permissions>,
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

/// `sandbox`: srt's settings (which Claude Code passes on) plus Claude Code's own switches.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
struct ClaudeSandbox {
    enabled: Option<bool>,
    fail_if_unavailable: Option<bool>,
    auto_allow_bash_if_sandboxed: Option<bool>,
    allow_unsandboxed_commands: Option<bool>,
    network: Option<NetworkSettings>,
    filesystem: Option<FilesystemSettings>,
    credentials: Option<CredentialsSettings>,
    ignore_violations: BTreeMap<String, Vec<String>>,
    enable_weaker_nested_sandbox: bool,
    allow_nested_user_namespaces: bool,
    enable_weaker_network_isolation: bool,
    allow_apple_events: bool,
    excluded_commands: Vec<String>,
    ripgrep: Option<RipgrepSettings>,
    bwrap_path: Option<String>,
    socat_path: Option<String>,
    windows: Option<IgnoredAny>,
}

/// `permissions`: the rule lists, and Claude Code's switches for its own tools.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
struct Permissions {
    allow: Vec<String>,
    deny: Vec<String>,
    ask: Vec<String>,
    default_mode: Option<String>,
    disable_bypass_permissions_mode: Option<String>,
    block_reads_outside_working_directories: bool,
    block_writes_outside_working_directories: Option<bool>,
    block_file_tool_reads_outside_working_directories: Option<bool>,
    block_reads_exempt_paths: Vec<String>,
    working_directories_as_given: Vec<String>,
    working_directories_exclude: Vec<String>,
    disable_auto_mode: Option<String>,
    deny_instead_of_prompting: Option<bool>,
    additional_directories: Vec<String>,
}

const NESTED_NAMESPACES: Unsupported = (
    "stockade's seccomp filter refuses new namespaces in the sandbox and has no switch for it",
    "remove the key or set it to false",
);
const BLOCK_READS: Unsupported = (
    "Claude Code's sandbox then refuses reads outside the working directories; stockade has no \
     exact equivalent",
    "remove the key, or use a stockade TOML policy with `read_scope = \"allow-list\"` under \
     `[filesystem]`",
);

/// Which way a permission rule points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Allow,
    Deny,
}

impl Reader<'_> {
    /// A Claude Code settings file.
    pub(super) fn claude(&mut self, s: &ClaudeSettings) -> Result<(), PolicyError> {
        if let Some(key) = s.other.keys().find(|k| !KNOWN_KEYS.contains(&k.as_str())) {
            return Err(self.error(
                key,
                format!("unknown key `{key}`: not a Claude Code setting"),
                "stockade reads `sandbox` and `permissions` and knows the other settings of \
                 Claude Code 2.1; remove or fix the key",
            ));
        }
        if let Some(sandbox) = &s.sandbox {
            self.sandbox_common(
                "sandbox.",
                PathStyle::ClaudeSandbox,
                sandbox.network.as_ref(),
                sandbox.filesystem.as_ref(),
                sandbox.credentials.as_ref(),
            )?;
            self.weakening_flags(
                "sandbox.",
                &[
                    (
                        sandbox.enable_weaker_nested_sandbox,
                        "enableWeakerNestedSandbox",
                        WEAKER_NESTED,
                    ),
                    (
                        sandbox.allow_nested_user_namespaces,
                        "allowNestedUserNamespaces",
                        NESTED_NAMESPACES,
                    ),
                    (
                        sandbox.enable_weaker_network_isolation,
                        "enableWeakerNetworkIsolation",
                        MACOS_ONLY,
                    ),
                    (sandbox.allow_apple_events, "allowAppleEvents", MACOS_ONLY),
                ],
            )?;
        }
        if let Some(perms) = &s.permissions {
            self.weakening_flags(
                "permissions.",
                &[(
                    perms.block_reads_outside_working_directories,
                    "blockReadsOutsideWorkingDirectories",
                    BLOCK_READS,
                )],
            )?;
            for (name, verdict, rules) in [
                ("allow", Verdict::Allow, &perms.allow),
                ("deny", Verdict::Deny, &perms.deny),
            ] {
                for (i, rule) in rules.iter().enumerate() {
                    self.rule(&format!("permissions.{name}[{i}]"), verdict, rule)?;
                }
            }
        }
        Ok(())
    }

    /// One permission rule, `Tool` or `Tool(specifier)`. Only the rules Claude Code merges into
    /// its sandbox have an effect; the rest belong to Claude Code's own permission prompts.
    fn rule(&mut self, path: &str, verdict: Verdict, rule: &str) -> Result<(), PolicyError> {
        let Some((tool, spec)) = rule.strip_suffix(')').and_then(|r| r.split_once('(')) else {
            return Ok(());
        };
        match (verdict, tool) {
            (Verdict::Deny, "Read") => {
                let pattern = self.rule_path(path, rule, spec, PathList::DenyRead)?;
                self.out.deny_read.extend(pattern);
            }
            (Verdict::Deny, "Edit") => {
                let pattern = self.rule_path(path, rule, spec, PathList::DenyWrite)?;
                self.out.deny_write.extend(pattern);
            }
            (Verdict::Allow, "Edit") => {
                let pattern = self.rule_path(path, rule, spec, PathList::AllowWrite)?;
                self.out.allow_write.extend(pattern);
            }
            (_, "WebFetch") => {
                if let Some(domain) = spec.strip_prefix("domain:") {
                    match verdict {
                        Verdict::Allow => self.allowed_domain(path, domain)?,
                        Verdict::Deny => self.denied_domain(path, domain)?,
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The stockade pattern of a `Read`/`Edit` rule's gitignore-style path: `//x` is `/x`,
    /// `~/x` is under the home directory, `x/y` and `./x` are anchored at the current
    /// directory, `x` (no `/`) matches at any depth beneath it. `/x` (relative to the settings
    /// file) is an error. For `allowWrite` only a directory can be used: a glob (after a
    /// trailing `/**` is dropped) or an any-depth name gives nothing, as srt on Linux skips
    /// glob write paths.
    fn rule_path(
        &self,
        path: &str,
        rule: &str,
        spec: &str,
        list: PathList,
    ) -> Result<Option<String>, PolicyError> {
        let fail = |why: &str, hint: &str| {
            self.error(
                path,
                format!("cannot use `{rule}` in `{path}`: {why}"),
                hint.to_owned(),
            )
        };
        let mut spec = spec.to_owned();
        if list == PathList::AllowWrite {
            if let Some(stripped) = spec.strip_suffix("/**") {
                spec = stripped.to_owned();
            }
        }
        if spec.len() > 1 && spec.ends_with('/') && !srt_glob(&spec) {
            spec = spec.trim_end_matches('/').to_owned();
        }
        if spec.is_empty() {
            return Err(fail("the path is empty", "write a path in the parentheses"));
        }
        let pattern = if let Some(abs) = spec.strip_prefix("//") {
            format!("/{}", escape_braces(abs))
        } else if spec == "~" || spec.starts_with("~/") {
            escape_braces(&spec)
        } else if spec.starts_with('/') {
            return Err(fail(
                "a `/path` rule is relative to the settings file, which stockade does not map",
                "write `//absolute/path`, `~/path` or `./path` (relative to the current directory)",
            ));
        } else {
            let Some(cwd) = self.ctx.cwd.as_deref() else {
                return Err(fail(
                    "a relative rule is relative to the current directory, which cannot be read",
                    "write `//absolute/path` or `~/path`",
                ));
            };
            let anchored = spec.starts_with("./") || spec.trim_start_matches("./").contains('/');
            let rel = spec.trim_start_matches("./");
            if rel.is_empty() || rel == "." {
                join_relative(cwd, "")
            } else if anchored {
                join_relative(cwd, rel)
            } else if list == PathList::AllowWrite {
                return Ok(None);
            } else {
                join_relative(cwd, &format!("**/{rel}"))
            }
            .ok_or_else(|| {
                fail(
                    "the current directory is not valid UTF-8",
                    "write `//absolute/path` or `~/path`",
                )
            })?
        };
        if list == PathList::AllowWrite && (has_glob_meta(&pattern) || is_private_area(&pattern)) {
            return Ok(None);
        }
        self.check_path(path, rule, &pattern, list)?;
        Ok(Some(pattern))
    }
}

/// The top-level keys of Claude Code's settings (`Settings` in `@anthropic-ai/claude-agent-sdk`
/// 0.3.330's `sdk.d.ts`, generated from Claude Code's settings schema).
const KNOWN_KEYS: &[&str] = &[
    "$schema",
    "apiKeyHelper",
    "proxyAuthHelper",
    "awsCredentialExport",
    "awsAuthRefresh",
    "gcpAuthRefresh",
    "processWrapper",
    "policyHelper",
    "fileSuggestion",
    "respectGitignore",
    "cleanupPeriodDays",
    "desktopSessionCleanupPeriodDays",
    "syncClaudeAiSkills",
    "syncClaudeAiPlugins",
    "skillListingMaxDescChars",
    "skillListingBudgetFraction",
    "wslInheritsWindowsSettings",
    "env",
    "attribution",
    "attributionProject",
    "attributionProjectPolicy",
    "includeCoAuthoredBy",
    "includeGitInstructions",
    "permissions",
    "model",
    "fallbackModel",
    "availableModels",
    "enforceAvailableModels",
    "availableModelsMatch",
    "deniedModels",
    "modelOverrides",
    "modelPicker",
    "modelPricing",
    "enableAllProjectMcpServers",
    "enabledMcpjsonServers",
    "disabledMcpjsonServers",
    "disableClaudeAiConnectors",
    "skillOverrides",
    "disableBundledSkills",
    "managedMcpServers",
    "allowedMcpServers",
    "deniedMcpServers",
    "hooks",
    "worktree",
    "disableAllHooks",
    "disableReplyCheck",
    "disableAgentView",
    "disableRemoteControl",
    "disableWorkflows",
    "disableArtifact",
    "enableArtifact",
    "enableWorkflows",
    "workflowSizeGuideline",
    "workflowKeywordTriggerEnabled",
    "disableSkillShellExecution",
    "disableWindowsBashCommandSplit",
    "defaultShell",
    "bashEditDiffEnabled",
    "bashOutputMaxChars",
    "taskOutputMaxChars",
    "respondToBashCommands",
    "allowManagedHooksOnly",
    "allowedHttpHookUrls",
    "httpHookAllowedEnvVars",
    "allowManagedPermissionRulesOnly",
    "allowManagedMcpServersOnly",
    "desktopMcpServersListScope",
    "allowAllClaudeAiMcps",
    "allowClaudeInChromeWithManagedMcp",
    "strictPluginOnlyCustomization",
    "statusLine",
    "prUrlTemplate",
    "footerLinksRegexes",
    "subagentStatusLine",
    "enabledPlugins",
    "prependPlugins",
    "appendPlugins",
    "extraKnownMarketplaces",
    "additionalMarketplaces",
    "strictKnownMarketplaces",
    "allowedMarketplaces",
    "blockedMarketplaces",
    "disableCommandPluginSources",
    "disableSideloadFlags",
    "pluginSuggestionMarketplaces",
    "forceLoginMethod",
    "forceLoginGatewayUrl",
    "gatewayInternalNetworks",
    "parentSettingsBehavior",
    "managedSourcesBehavior",
    "forceLoginOrgUUID",
    "allowNestedModelAccessUnderForceLogin",
    "allowedProviders",
    "forceRemoteSettingsRefresh",
    "otelHeadersHelper",
    "outputStyle",
    "viewMode",
    "language",
    "skipWebFetchPreflight",
    "sandbox",
    "feedbackSurveyRate",
    "feedbackDrafts",
    "spinnerTipsEnabled",
    "spinnerVerbs",
    "spinnerTipsOverride",
    "syntaxHighlightingDisabled",
    "maxProseWidth",
    "spellcheck",
    "terminalTitleFromRename",
    "promptCacheTtl",
    "subagentPromptCacheTtl",
    "alwaysThinkingEnabled",
    "effortLevel",
    "maxEffortLevel",
    "modelSettings",
    "ultracode",
    "autoCompactWindow",
    "advisorModel",
    "fastMode",
    "fastModePerSessionOptIn",
    "promptSuggestionEnabled",
    "emojiCompletionEnabled",
    "showClearContextOnPlanAccept",
    "askUserQuestionTimeout",
    "dialogExpiry",
    "agent",
    "companyAnnouncements",
    "pluginConfigs",
    "remote",
    "autoUpdatesChannel",
    "minimumVersion",
    "requiredMinimumVersion",
    "requiredMaximumVersion",
    "plansDirectory",
    "tui",
    "voice",
    "channelsEnabled",
    "allowedChannelPlugins",
    "prefersReducedMotion",
    "timeFormat",
    "timeZone",
    "autoMemoryEnabled",
    "autoMemoryDirectory",
    "autoDreamEnabled",
    "showThinkingSummaries",
    "skipDangerousModePermissionPrompt",
    "disableAutoMode",
    "sshConfigs",
    "sshHostCommands",
    "claudeMd",
    "claudeMdExcludes",
    "pluginTrustMessage",
    "theme",
    "editorMode",
    "keybindingFlavor",
    "vimInsertModeRemaps",
    "verbose",
    "preferredNotifChannel",
    "autoCompactEnabled",
    "precomputeCompactionEnabled",
    "idleCompaction",
    "switchModelsOnFlag",
    "autoContinueAtUsageLimit",
    "autoScrollEnabled",
    "wheelScrollAccelerationEnabled",
    "fileCheckpointingEnabled",
    "showTurnDuration",
    "showMessageTimestamps",
    "terminalProgressBarEnabled",
    "todoFeatureEnabled",
    "teammateMode",
    "remoteControlAtStartup",
    "isolatePeerMachines",
    "daemonColdStart",
    "crossSessionInbound",
    "autoUploadSessions",
    "inputNeededNotifEnabled",
    "agentPushNotifEnabled",
    "skipAutoPermissionPrompt",
    "useAutoModeDuringPlan",
    "autoMode",
    "disableDeepLinkRegistration",
    "voiceEnabled",
    "defaultView",
];
