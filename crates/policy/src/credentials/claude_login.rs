//! The host's Claude Code login (a subscription's OAuth tokens) as a credential's source
//! (`--credential anthropic=claude-login`, `source = { claude_login = "PATH" }`).
//!
//! Claude Code keeps its login on Linux in `$CLAUDE_CONFIG_DIR/.credentials.json` (default
//! `~/.claude/.credentials.json`): `{"claudeAiOauth": {"accessToken", "refreshToken",
//! "expiresAt", "scopes", "subscriptionType", ...}}`. With it, Claude Code sends
//! `Authorization: Bearer <access token>` to its API (its base URL honoured), and refreshes
//! by POSTing `{"grant_type": "refresh_token", ...}` as JSON to
//! `https://platform.claude.com/v1/oauth/token` (a URL no variable changes, bar a few of
//! Anthropic's own endpoints).
//!
//! With this source the route's value is the login's access token and goes in
//! `Authorization: Bearer`. Inside, the worker's state directory gets a login whose access
//! and refresh tokens are stand-ins; the proxy swaps the access stand-in on the route, and
//! answers Claude Code's refreshes at [`TOKEN_HOST`] itself, refreshing against the fixed
//! `token_url` on the host side (see `net::credential::oauth`).

use super::{invalid, Credential, Inject, Source};
use crate::error::PolicyError;

/// Where Claude Code keeps its login unless `CLAUDE_CONFIG_DIR` says otherwise.
pub const DEFAULT_FILE: &str = "~/.claude/.credentials.json";

/// Where the proxy refreshes the login (Claude Code's own token endpoint).
pub const TOKEN_URL: &str = "https://platform.claude.com/v1/oauth/token";

/// Where Claude Code inside sends its refreshes: answered by the proxy itself, never reached.
pub const TOKEN_HOST: &str = "platform.claude.com";
pub const TOKEN_PORT: u16 = 443;
/// The only path answered at [`TOKEN_HOST`].
pub const TOKEN_PATH: &str = "/v1/oauth/token";

/// Where Claude Code calls its API itself, not through the base URL (its profile after a
/// refresh, its usage and roles): answered by the proxy as requests on the route.
pub const API_HOST: &str = "api.anthropic.com";
pub const API_PORT: u16 = 443;

/// Claude Code's OAuth client id (public), used when the login does not name its own.
pub const CLIENT_ID: &str = "9d1c250a-e61b-44d9-88ed-5944d1962f5e";

/// Paths refused on a route carrying the login, beyond the route's own: minting an API key
/// from the login, and the OAuth endpoints.
pub const DENY_PATHS: &[&str] = &["/api/oauth/claude_cli/create_api_key", "/v1/oauth"];

/// The source as written on the command line: `claude-login` or `claude-login:PATH`.
pub fn parse_flag_source(text: &str) -> Option<Source> {
    let file = match text.strip_prefix("claude-login") {
        Some("") => DEFAULT_FILE.to_owned(),
        Some(rest) => rest.strip_prefix(':')?.to_owned(),
        None => return None,
    };
    Some(Source::ClaudeLogin {
        file,
        token_url: TOKEN_URL.to_owned(),
    })
}

/// Checks the source's fields: a file path as for `file` sources, an `https://` token URL.
pub fn check_source(name: &str, file: &str, token_url: &str) -> Result<(), PolicyError> {
    if !(file.starts_with('/') || file.starts_with("~/")) {
        return Err(invalid(
            name,
            "source.claude_login",
            file,
            "an absolute path or one starting with `~/` (Claude Code's `.credentials.json`)",
        ));
    }
    super::parse_upstream(token_url)
        .map_err(|e| invalid(name, "source.token_url", token_url, e))?;
    Ok(())
}

/// A credential whose source is the login: its value goes in `Authorization: Bearer`, and
/// the paths that would mint lasting credentials from it are refused.
pub fn adapt(c: &mut Credential) {
    if !matches!(c.source, Source::ClaudeLogin { .. }) {
        return;
    }
    c.route.inject = Inject::Header {
        name: "authorization".into(),
        format: "Bearer {}".into(),
    };
    for p in DENY_PATHS {
        if !c.route.deny_paths.iter().any(|d| d == p) {
            c.route.deny_paths.push((*p).to_owned());
        }
    }
}

/// The login is for a route (a base URL), not a masked credential's hosts.
pub fn check_route(c: &Credential) -> Result<(), PolicyError> {
    if matches!(c.source, Source::ClaudeLogin { .. }) && c.route.is_masked() {
        return Err(invalid(
            &c.name,
            "source.claude_login",
            "",
            "Claude Code's login goes on a route with a base URL (`anthropic`), not on a masked credential's hosts",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_and_the_policy_file_name_the_login() {
        assert_eq!(
            parse_flag_source("claude-login"),
            Some(Source::ClaudeLogin {
                file: DEFAULT_FILE.into(),
                token_url: TOKEN_URL.into()
            })
        );
        assert_eq!(
            parse_flag_source("claude-login:/etc/x.json"),
            Some(Source::ClaudeLogin {
                file: "/etc/x.json".into(),
                token_url: TOKEN_URL.into()
            })
        );
        assert_eq!(parse_flag_source("claude-loginx"), None);
        assert_eq!(parse_flag_source("file:/x"), None);
        let Ok(c) = super::super::parse_flag("anthropic=claude-login", &[]) else {
            panic!("the flag is refused");
        };
        assert_eq!(
            c.route.inject,
            Inject::Header {
                name: "authorization".into(),
                format: "Bearer {}".into()
            }
        );
        assert!(c
            .route
            .deny_paths
            .contains(&"/api/oauth/claude_cli/create_api_key".to_owned()));
        assert_eq!(
            c.source.describe(),
            "claude-login:~/.claude/.credentials.json"
        );
        // A relative path, a token URL that is not https, a masked route: refused.
        assert!(super::super::parse_flag("anthropic=claude-login:x.json", &[]).is_err());
        assert!(super::super::parse_flag("github=claude-login", &[]).is_err());
        let toml = "source = { claude_login = \"~/.claude/.credentials.json\", token_url = \"http://a.test/t\" }";
        let p: super::super::CredentialPatch =
            toml::from_str(toml).unwrap_or_else(|e| panic!("{e}"));
        assert!(p.credential("anthropic").is_err());
        let toml = "source = { claude_login = \"/h/.credentials.json\", token_url = \"https://127.0.0.1:9/v1/oauth/token\" }";
        let p: super::super::CredentialPatch =
            toml::from_str(toml).unwrap_or_else(|e| panic!("{e}"));
        let c = p.credential("anthropic").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            c.source,
            Source::ClaudeLogin {
                file: "/h/.credentials.json".into(),
                token_url: "https://127.0.0.1:9/v1/oauth/token".into()
            }
        );
        // The flag keeps a login the policy file defines (its endpoint; its file unless named).
        let flagged = super::super::parse_flag("anthropic=claude-login", std::slice::from_ref(&c))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(flagged.source, c.source);
        let flagged =
            super::super::parse_flag("anthropic=claude-login:/o.json", std::slice::from_ref(&c))
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            flagged.source,
            Source::ClaudeLogin {
                file: "/o.json".into(),
                token_url: "https://127.0.0.1:9/v1/oauth/token".into()
            }
        );
        // `token_url` goes with `claude_login` only.
        let toml = "source = { env = \"K\", token_url = \"https://a.test/t\" }";
        let p: super::super::CredentialPatch =
            toml::from_str(toml).unwrap_or_else(|e| panic!("{e}"));
        assert!(p.credential("anthropic").is_err());
    }
}
