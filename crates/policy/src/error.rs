//! The one error type of the crate. Every variant names the object it is about, and its
//! message reads "failed to <verb> <object>: <cause>" or, for policy-file problems,
//! "<file>: line N, column M: <what>".

use std::fmt;
use std::path::PathBuf;

/// A 1-based line and column (in characters) inside a policy file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// Everything that can go wrong while loading, resolving or expanding a policy.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The policy file could not be read from disk.
    #[error("failed to read policy file {}: {source}", path.display())]
    ReadFile {
        /// The file that could not be read.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },

    /// The policy file is not valid TOML, or does not match the policy schema.
    #[error("{}", parse_message(origin, location.as_ref(), message))]
    ParseFile {
        /// Where the text came from (usually the file path).
        origin: String,
        /// Position of the offending token, when known.
        location: Option<Location>,
        /// What is wrong, naming the offending key or value.
        message: String,
        /// How to fix it, when there is something useful to say.
        hint: Option<String>,
    },

    /// A profile name that is not one of [`crate::PROFILES`].
    #[error("failed to load profile `{name}`: unknown profile")]
    UnknownProfile {
        /// The name that was asked for.
        name: String,
    },

    /// A preset name that is not one of [`crate::presets::PRESETS`].
    #[error("failed to load preset `{name}`: unknown agent or toolchain preset")]
    UnknownPreset {
        /// The name that was asked for.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },

    /// An environment variable name (or `allow` pattern) that cannot be used.
    #[error("failed to validate environment variable `{name}` in {field}: {reason}")]
    InvalidEnvName {
        /// Which list it was found in (`env.allow`, `env.set`, ...).
        field: &'static str,
        /// The offending name, as written.
        name: String,
        /// Why it is rejected.
        reason: String,
    },

    /// A path pattern that cannot be used in the list it appears in.
    #[error("failed to validate path pattern `{pattern}` in {field}: {reason}")]
    InvalidPattern {
        /// Which list it was found in (`filesystem.allow_write`, ...).
        field: &'static str,
        /// The offending pattern, as written.
        pattern: String,
        /// Why it is rejected.
        reason: String,
    },

    /// A network rule (`allow_domains`, `deny_domains` or `allow_hosts` entry) that cannot be
    /// used in the list it appears in.
    #[error("failed to validate network rule `{entry}` in {field}: {reason}")]
    InvalidNetRule {
        /// Which list it was found in (`network.allow_domains`, ...).
        field: &'static str,
        /// The offending entry, as written.
        entry: String,
        /// Why it is rejected.
        reason: String,
        /// How to fix it.
        hint: String,
    },

    /// A value (a limit) that cannot be used.
    #[error("failed to validate `{value}` for {key}: {reason}")]
    InvalidValue {
        /// The key, e.g. `limits.tmp_size`.
        key: String,
        /// The value, as written.
        value: String,
        /// Why it is rejected.
        reason: String,
    },

    /// A path pattern that cannot be turned into concrete paths.
    #[error("failed to expand path pattern `{pattern}`: {reason}")]
    ExpandPattern {
        /// The offending pattern, as written.
        pattern: String,
        /// Why it cannot be expanded.
        reason: String,
    },
}

fn parse_message(origin: &str, location: Option<&Location>, message: &str) -> String {
    match location {
        Some(loc) => format!("{origin}: {loc}: {message}"),
        None => format!("{origin}: {message}"),
    }
}

/// What a path pattern may look like, shown in hints.
const PATTERN_FORMS: &str = "a path pattern is absolute (`/etc/x`), starts with `~/`, `$HOME` or \
    `$WORKSPACE`, or is relative (`.env`, matched at any depth beneath every writable root)";

impl PolicyError {
    /// Stable machine-readable error code; the same for every policy error.
    pub fn code(&self) -> &'static str {
        sandbox::Code::PolicyInvalid.as_str()
    }

    /// How to fix the problem, when there is something more to say than the message.
    pub fn hint(&self) -> Option<String> {
        match self {
            PolicyError::ReadFile { .. } => {
                Some("check that the policy file exists and is readable".to_owned())
            }
            PolicyError::ParseFile { hint, .. } => hint.clone(),
            PolicyError::UnknownProfile { .. } => Some(known_profiles_hint()),
            PolicyError::UnknownPreset { known, .. } => Some(format!(
                "known presets: {known} (`stockade policy show --agent NAME` prints what one adds)"
            )),
            PolicyError::InvalidValue { key, .. } => Some(if key == "limits.tmp_size" {
                "write a size such as `512M` or `2G` (binary units)".to_owned()
            } else {
                format!("choose another value for `{key}`")
            }),
            PolicyError::InvalidEnvName { field, .. } => Some(if *field == "env.allow" {
                "use a variable name, or a prefix followed by a single trailing `*` (e.g. `LC_*`)"
                    .to_owned()
            } else {
                "use a plain variable name: non-empty, without `=`, `*` or NUL".to_owned()
            }),
            PolicyError::InvalidPattern { field, .. } => {
                Some(if *field == "filesystem.allow_write" {
                    "writable roots are plain directories: absolute, or starting with `~/`, `$HOME` \
                 or `$WORKSPACE`, without glob characters (`*`, `?`, `[`, `{`)"
                    .to_owned()
                } else {
                    PATTERN_FORMS.to_owned()
                })
            }
            PolicyError::InvalidNetRule { hint, .. } => Some(hint.clone()),
            PolicyError::ExpandPattern { .. } => Some(PATTERN_FORMS.to_owned()),
        }
    }
}

/// "known profiles: a, b", shared by the file parser and [`crate::profile`].
pub(crate) fn known_profiles_hint() -> String {
    format!("known profiles: {}", crate::PROFILES.join(", "))
}
