//! The stockade policy: what a sandboxed command may read, write, see in its environment and
//! reach on the network.
//!
//! A policy starts from a built-in [profile](profile()) (data, not code), is patched by an
//! optional policy file ([`parse_policy_file`], strict: unknown keys are errors with line and
//! column; [`read_policy_file`] also reads srt's and Claude Code's JSON sandbox settings, see
//! [`settings_json`]), then by command-line [`Overrides`]; [`resolve`] merges and validates the
//! three into a [`Policy`]. Path patterns in the policy (`~/.ssh`, `$WORKSPACE`, `.env`) are turned into
//! concrete paths and globs by [`expand`]; the child's environment is built from scratch by
//! [`build_env`]; the network rules are compiled into a matcher for the egress proxy by
//! [`NetRules::new`] (see [`net`]).
//!
//! ```
//! use std::ffi::OsString;
//! use std::path::PathBuf;
//!
//! let file = policy::parse_policy_file(
//!     r#"
//! profile = "workspace-write"
//! [filesystem]
//! deny_read = ["~/secrets"]
//! [env]
//! set = { FOO = "bar" }
//! "#,
//!     "stockade.toml",
//! )?;
//! let overrides = policy::Overrides { env: vec!["GITHUB_TOKEN".into()], ..Default::default() };
//! let resolved = policy::resolve(Some(file), &overrides)?;
//! assert_eq!(resolved.filesystem.allow_write, ["$WORKSPACE"]);
//! assert!(policy::digest(&resolved).starts_with("sha256:"));
//!
//! let ctx = policy::PathContext {
//!     home: PathBuf::from("/home/me"),
//!     workspace: PathBuf::from("/work/repo"),
//!     writable_roots: vec![PathBuf::from("/work/repo")],
//! };
//! let secrets = policy::expand("~/secrets", &ctx)?;
//! assert_eq!(secrets, [policy::PathPattern::Exact(PathBuf::from("/home/me/secrets"))]);
//! let Some(policy::PathPattern::Glob(dotenv)) = policy::expand(".env", &ctx)?.pop() else {
//!     unreachable!()
//! };
//! assert!(dotenv.is_match("/work/repo/app/.env".as_ref()));
//!
//! let caller = [("PATH", "/usr/bin"), ("GITHUB_TOKEN", "ghp_x"), ("AWS_SECRET_ACCESS_KEY", "x")]
//!     .map(|(k, v)| (OsString::from(k), OsString::from(v)));
//! let env = policy::build_env(&resolved.env, caller);
//! let names: Vec<_> = env.iter().map(|(k, _)| k.to_str().unwrap_or_default()).collect();
//! assert_eq!(names, ["FOO", "GITHUB_TOKEN", "PATH", "npm_config_cache"]);
//! # Ok::<(), policy::PolicyError>(())
//! ```
#![forbid(unsafe_code)]

pub mod commands;
pub mod credentials;
pub mod env;
pub mod error;
pub mod file;
pub mod file_lines;
pub mod home_exec;
pub mod host;
pub mod host_exec;
pub mod masks;
pub mod model;
pub mod net;
pub mod net_hint;
pub mod origin;
pub mod paths;
pub mod presets;
pub mod profile;
pub mod resolve;
pub mod settings_json;
pub mod strict_json;

pub use commands::CommandRule;
pub use credentials::{Credential, Inject, Route, Source};
pub use env::{build_env, is_secret_name};
pub use error::{Location, PolicyError};
pub use file::{
    parse_policy_file, read_policy_file, EnvPatch, FilesystemPatch, NetworkPatch, PolicyFile,
};
pub use home_exec::{home_exec_entry, HOME_EXEC};
pub use host_exec::{host_exec_entry, protected_sources, HostExec, ProtectedSource, HOST_EXEC};
pub use masks::{default_masks, mask_entry, Mask, MaskKind, DEFAULT_MASKS};
pub use model::*;
pub use net::{
    AllowHost, DomainPattern, HostSpec, NetDecision, NetList, NetRuleError, NetRules, Target,
};
pub use net_hint::{allow_hint, allow_hint_for, HintContext};
pub use paths::{
    canonicalize_existing, expand, is_within, normalize_lexically, Glob, GlobList, PathContext,
    PathPattern,
};
pub use presets::{preset, Preset, PresetKind, PRESETS};
pub use profile::{
    default_deny_read, default_deny_write, default_read_empty, profile, CORE_PROTECTED,
    DEFAULT_ENV_ALLOW, DEFAULT_ENV_SET, DEFAULT_MEMORY, DEFAULT_OUTPUT_LIMIT, DEFAULT_PIDS,
    DEFAULT_PROFILE, DEFAULT_TIMEOUT_SECS, DEFAULT_TMP_SIZE, PROFILES,
};
pub use resolve::{
    digest, parse_memory, parse_output_limit, parse_size, resolve, MemoryLimit, Overrides,
    TypedLimits,
};
pub use settings_json::{is_json, parse_settings_json, SettingsContext, SettingsFormat};
pub use strict_json::StrictJsonError;
