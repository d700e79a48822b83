//! An OAuth login as a route's credential (Claude Code's subscription login): the real access
//! and refresh tokens stay here; the sandbox holds stand-ins of both.
//!
//! On the route the access stand-in (any this run handed out) is swapped for the current real
//! access token, which is refreshed on the host side first when it has expired. At the token
//! host ([`Login::token_host`], answered by the proxy itself with the run's CA, never reached)
//! a refresh that carries the current refresh stand-in gets fresh stand-ins back; when the real
//! access token is (nearly) expired the proxy first refreshes it against the fixed
//! [`Login::endpoint`], never a host the request names, and hands the new tokens to the
//! [`Store`] (the host's login file). Every check of a stand-in is in constant time.

use std::fmt;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use policy::credentials::Upstream;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use super::Secret;

/// Prefix of an access stand-in: Claude Code recognises OAuth access tokens by `sk-ant-oat`.
pub const ACCESS_PREFIX: &str = "sk-ant-oat01-stockade-standin-";
/// Prefix of a refresh stand-in.
pub const REFRESH_PREFIX: &str = "sk-ant-ort01-stockade-standin-";

/// Access stand-ins kept valid at once (a refresh adds one; requests in flight may still carry
/// an earlier one).
const MAX_ACCESS_STANDINS: usize = 8;

/// A refresh at the token host renews the real token when it expires within this.
pub const REFRESH_MARGIN_MS: u64 = 5 * 60 * 1000;
/// A request on the route renews the real token first when it expires within this.
pub const REQUEST_MARGIN_MS: u64 = 60 * 1000;

/// The login's real tokens.
pub struct Tokens {
    pub access: Zeroizing<String>,
    pub refresh: Zeroizing<String>,
    /// Milliseconds since the epoch.
    pub expires_at_ms: u64,
    /// What the token endpoint granted (`scope`), when it said.
    pub scopes: Option<Vec<String>>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokens")
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

/// Where the host keeps the login (Claude Code's `.credentials.json`).
pub trait Store: Send + Sync {
    /// The login as the host holds it now (the host's own Claude Code may have refreshed it).
    fn load(&self) -> Option<Tokens>;
    /// Saves refreshed tokens when the host still holds `replaced` (the refresh token used);
    /// otherwise leaves the host's login as it is.
    fn save(&self, tokens: &Tokens, replaced: &str) -> Result<(), String>;
}

/// The stand-ins a refresh hands back.
pub struct Fresh {
    pub access: Zeroizing<String>,
    pub refresh: Zeroizing<String>,
    pub expires_in_s: u64,
    pub scopes: Vec<String>,
}

struct State {
    current: Tokens,
    access_standins: Vec<Zeroizing<String>>,
    refresh_standin: Zeroizing<String>,
    /// Every real value this run held: masked in answers.
    held: Vec<Zeroizing<String>>,
}

/// One login of a run, serving the route `route`.
pub struct Login {
    /// The reverse route whose requests carry the access token.
    pub route: String,
    /// Where the client inside sends its refreshes (`platform.claude.com`, 443).
    pub token_host: String,
    pub token_port: u16,
    /// The only path answered there.
    pub token_path: String,
    /// Where the client inside calls the API itself, not through the route's base URL
    /// (`api.anthropic.com`, 443): answered by the proxy as requests on the route.
    pub api_host: Option<(String, u16)>,
    /// Where the proxy refreshes: fixed by the policy.
    pub endpoint: Upstream,
    pub client_id: String,
    /// Scopes asked for on a refresh: the login's.
    pub scopes: Vec<String>,
    state: Mutex<State>,
    /// Held while a refresh is under way: one at a time.
    pub(crate) refreshing: tokio::sync::Mutex<()>,
    store: Box<dyn Store>,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Login")
            .field("route", &self.route)
            .field("token_host", &self.token_host)
            .finish_non_exhaustive()
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A stand-in: `prefix` and 256 random bits in hex.
pub fn standin(prefix: &str) -> Result<Zeroizing<String>, String> {
    let mut bytes = Zeroizing::new([0u8; 32]);
    getrandom::fill(&mut *bytes).map_err(|e| format!("make a stand-in: {e}"))?;
    let mut s = Zeroizing::new(String::with_capacity(prefix.len() + 64));
    s.push_str(prefix);
    for b in bytes.iter() {
        s.push_str(&format!("{b:02x}"));
    }
    Ok(s)
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

impl Login {
    /// A login with its first stand-ins.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        route: String,
        (token_host, token_port, token_path): (String, u16, String),
        endpoint: Upstream,
        client_id: String,
        scopes: Vec<String>,
        tokens: Tokens,
        store: Box<dyn Store>,
    ) -> Result<Login, String> {
        for v in [&tokens.access, &tokens.refresh] {
            Secret::new(v.clone()).map_err(|e| format!("the login's token: {e}"))?;
        }
        let held = vec![tokens.access.clone(), tokens.refresh.clone()];
        Ok(Login {
            route,
            token_host,
            token_port,
            token_path,
            api_host: None,
            endpoint,
            client_id,
            scopes,
            state: Mutex::new(State {
                current: tokens,
                access_standins: vec![standin(ACCESS_PREFIX)?],
                refresh_standin: standin(REFRESH_PREFIX)?,
                held,
            }),
            refreshing: tokio::sync::Mutex::new(()),
            store,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The stand-ins the sandbox starts with: (access, refresh).
    pub fn first_standins(&self) -> (Zeroizing<String>, Zeroizing<String>) {
        let s = self.state();
        let access = s.access_standins.first().cloned().unwrap_or_default();
        (access, s.refresh_standin.clone())
    }

    /// When the real access token expires (milliseconds since the epoch).
    pub fn expires_at_ms(&self) -> u64 {
        self.state().current.expires_at_ms
    }

    /// Whether `host:port` is where the client sends its refreshes.
    pub fn answers(&self, host: &str, port: u16) -> bool {
        let bare = |h: &str| h.trim_start_matches('[').trim_end_matches(']').to_owned();
        bare(host) == bare(&self.token_host) && port == self.token_port
    }

    /// Whether `host:port` is where the client calls the API itself ([`Login::api_host`]).
    pub fn serves_api(&self, host: &str, port: u16) -> bool {
        let bare = |h: &str| h.trim_start_matches('[').trim_end_matches(']').to_owned();
        self.api_host
            .as_ref()
            .is_some_and(|(h, p)| bare(h) == bare(host) && *p == port)
    }

    /// Whether `Authorization` carries one of this run's access stand-ins (`Bearer <token>`),
    /// and only that.
    pub fn presented(&self, headers: &hyper::HeaderMap) -> super::Presented {
        let mut values = headers.get_all("authorization").iter();
        let Some(value) = values.next() else {
            return super::Presented::Missing;
        };
        if values.next().is_some() {
            return super::Presented::Wrong;
        }
        let v = value.as_bytes();
        if v.len() < 7 || !v[..7].eq_ignore_ascii_case(b"bearer ") {
            return super::Presented::Wrong;
        }
        let token = &v[7..];
        let s = self.state();
        // Every stand-in is compared: the time does not say which one matched.
        let mut any = false;
        for t in &s.access_standins {
            any |= ct_eq(t.as_bytes(), token);
        }
        if any {
            super::Presented::Valid
        } else {
            super::Presented::Wrong
        }
    }

    /// Whether `candidate` is the current refresh stand-in.
    pub fn is_refresh_standin(&self, candidate: &[u8]) -> bool {
        ct_eq(self.state().refresh_standin.as_bytes(), candidate)
    }

    /// The current real access token.
    pub fn access(&self) -> Result<Secret, &'static str> {
        Secret::new(self.state().current.access.clone())
    }

    /// Whether the real access token expires within `margin_ms`.
    pub fn expiring(&self, margin_ms: u64) -> bool {
        self.state().current.expires_at_ms <= now_ms().saturating_add(margin_ms)
    }

    /// The real refresh token, for a refresh.
    pub fn refresh_token(&self) -> Zeroizing<String> {
        self.state().current.refresh.clone()
    }

    /// The host's login, when the host has renewed it since (another client of the same
    /// login refreshed): adopted when its access token is good for `margin_ms` more.
    pub fn adopt_from_store(&self, margin_ms: u64) -> bool {
        let Some(t) = self.store.load() else {
            return false;
        };
        let fresh = t.expires_at_ms > now_ms().saturating_add(margin_ms);
        let mut s = self.state();
        let same = ct_eq(t.access.as_bytes(), s.current.access.as_bytes());
        if same || !fresh || Secret::new(t.access.clone()).is_err() {
            return false;
        }
        if Secret::new(t.refresh.clone()).is_err() {
            return false;
        }
        s.held.push(t.access.clone());
        s.held.push(t.refresh.clone());
        s.current = t;
        true
    }

    /// Takes refreshed tokens (the token endpoint's answer), and saves them on the host.
    /// Returns why the host's login could not be saved, if it could not.
    pub fn renewed(&self, tokens: Tokens) -> Result<Option<String>, &'static str> {
        Secret::new(tokens.access.clone())?;
        Secret::new(tokens.refresh.clone())?;
        let replaced = {
            let mut s = self.state();
            let replaced = s.current.refresh.clone();
            s.held.push(tokens.access.clone());
            s.held.push(tokens.refresh.clone());
            s.current = Tokens {
                access: tokens.access.clone(),
                refresh: tokens.refresh.clone(),
                expires_at_ms: tokens.expires_at_ms,
                scopes: tokens.scopes.clone(),
            };
            replaced
        };
        Ok(self.store.save(&tokens, &replaced).err())
    }

    /// Fresh stand-ins for the current login: a new access stand-in (earlier ones stay valid,
    /// the oldest dropped past [`MAX_ACCESS_STANDINS`]) and a new refresh stand-in (the
    /// previous one no longer refreshes).
    pub fn hand_out(&self) -> Result<Fresh, String> {
        self.hand_out_checked(None)
    }

    /// [`Self::hand_out`] for a refresh that presented `presented`: checked again while the
    /// stand-ins are replaced, so of concurrent refreshes with one refresh stand-in only the
    /// first gets fresh ones (each other one would end a login the first got): the others are
    /// refused as a reused refresh token is.
    pub fn hand_out_for(&self, presented: &[u8]) -> Result<Fresh, String> {
        self.hand_out_checked(Some(presented))
    }

    fn hand_out_checked(&self, presented: Option<&[u8]>) -> Result<Fresh, String> {
        let access = standin(ACCESS_PREFIX)?;
        let refresh = standin(REFRESH_PREFIX)?;
        let mut s = self.state();
        if let Some(p) = presented {
            if !ct_eq(s.refresh_standin.as_bytes(), p) {
                return Err("the refresh stand-in was used already (a concurrent refresh)".into());
            }
        }
        s.access_standins.push(access.clone());
        if s.access_standins.len() > MAX_ACCESS_STANDINS {
            s.access_standins.remove(0);
        }
        s.refresh_standin = refresh.clone();
        let expires_in_s = s.current.expires_at_ms.saturating_sub(now_ms()) / 1000;
        let scopes = s
            .current
            .scopes
            .clone()
            .unwrap_or_else(|| self.scopes.clone());
        Ok(Fresh {
            access,
            refresh,
            expires_in_s,
            scopes,
        })
    }

    /// Every real value this run held, for masking answers.
    pub fn held(&self) -> Vec<Secret> {
        self.state()
            .held
            .iter()
            .filter_map(|v| Secret::new(v.clone()).ok())
            .collect()
    }

    /// Every real value this run held, as text (to refuse them in the sandbox's environment).
    pub fn held_values(&self) -> Vec<Zeroizing<String>> {
        self.state().held.clone()
    }
}

/// The body of a refresh against the token endpoint (JSON, as Claude Code sends it).
pub fn refresh_body(login: &Login) -> Zeroizing<Vec<u8>> {
    let body = serde_json::json!({
        "grant_type": "refresh_token",
        "refresh_token": login.refresh_token().as_str(),
        "client_id": login.client_id,
        "scope": login.scopes.join(" "),
    });
    Zeroizing::new(body.to_string().into_bytes())
}

/// The token endpoint's answer to a refresh: the new tokens (the refresh token kept when it
/// sends none), or why not.
pub fn parse_refresh_answer(body: &[u8], previous_refresh: &str) -> Result<Tokens, String> {
    let v: serde_json::Value = serde_json::from_slice(body)
        .map_err(|_| "the token endpoint's answer is not JSON".to_owned())?;
    let access = v
        .get("access_token")
        .and_then(|a| a.as_str())
        .filter(|a| !a.is_empty())
        .ok_or("the token endpoint's answer has no access_token")?;
    let refresh = match v.get("refresh_token").and_then(|r| r.as_str()) {
        Some(r) if !r.is_empty() => r.to_owned(),
        _ => previous_refresh.to_owned(),
    };
    let expires_in = v
        .get("expires_in")
        .and_then(|e| e.as_u64())
        .ok_or("the token endpoint's answer has no expires_in")?;
    let scopes = v.get("scope").and_then(|s| s.as_str()).map(|s| {
        s.split(' ')
            .filter(|t| !t.is_empty() && t.bytes().all(scope_byte))
            .map(str::to_owned)
            .collect()
    });
    Ok(Tokens {
        access: Zeroizing::new(access.to_owned()),
        refresh: Zeroizing::new(refresh),
        expires_at_ms: now_ms().saturating_add(expires_in.saturating_mul(1000)),
        scopes,
    })
}

fn scope_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b":_.-".contains(&b)
}

/// What a refresh request from the sandbox asked: `Ok(refresh_token)` for a JSON or form body
/// with `grant_type` `refresh_token`; anything else is refused (`Err(why)`).
pub fn parse_refresh_request(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Zeroizing<Vec<u8>>, &'static str> {
    let form = content_type.is_some_and(|t| {
        t.trim()
            .to_ascii_lowercase()
            .starts_with("application/x-www-form-urlencoded")
    });
    if form {
        let mut grant = None;
        let mut token = None;
        for pair in body.split(|b| *b == b'&') {
            let (k, v) = match pair.iter().position(|b| *b == b'=') {
                Some(i) => (&pair[..i], &pair[i + 1..]),
                None => (pair, &[][..]),
            };
            match k {
                b"grant_type" if grant.is_none() => grant = Some(v),
                b"refresh_token" if token.is_none() => token = Some(v),
                b"grant_type" | b"refresh_token" => return Err("a field given twice"),
                _ => {}
            }
        }
        if grant != Some(&b"refresh_token"[..]) {
            return Err("only grant_type=refresh_token is answered");
        }
        return token
            .map(|t| Zeroizing::new(t.to_vec()))
            .ok_or("no refresh_token");
    }
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| "the body is not JSON or a form")?;
    if v.get("grant_type").and_then(|g| g.as_str()) != Some("refresh_token") {
        return Err("only grant_type=refresh_token is answered");
    }
    v.get("refresh_token")
        .and_then(|t| t.as_str())
        .map(|t| Zeroizing::new(t.as_bytes().to_vec()))
        .ok_or("no refresh_token")
}

/// The answer to the sandbox's refresh: the stand-ins, never the real tokens.
pub fn answer(fresh: &Fresh) -> Zeroizing<Vec<u8>> {
    let body = serde_json::json!({
        "token_type": "Bearer",
        "access_token": fresh.access.as_str(),
        "refresh_token": fresh.refresh.as_str(),
        "expires_in": fresh.expires_in_s,
        "scope": fresh.scopes.join(" "),
    });
    Zeroizing::new(body.to_string().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Default)]
    struct Memory {
        saved: Arc<Mutex<Vec<(String, String)>>>,
        host: Arc<Mutex<Option<(String, String, u64)>>>,
    }

    impl Store for Memory {
        fn load(&self) -> Option<Tokens> {
            let h = self.host.lock().ok()?.clone()?;
            Some(Tokens {
                access: Zeroizing::new(h.0),
                refresh: Zeroizing::new(h.1),
                expires_at_ms: h.2,
                scopes: None,
            })
        }
        fn save(&self, tokens: &Tokens, replaced: &str) -> Result<(), String> {
            if let Ok(mut s) = self.saved.lock() {
                s.push((tokens.access.to_string(), replaced.to_owned()));
            }
            Ok(())
        }
    }

    fn login(store: Memory, expires_at_ms: u64) -> Login {
        let endpoint = policy::credentials::parse_upstream("https://127.0.0.1:9/v1/oauth/token")
            .unwrap_or_else(|e| panic!("{e}"));
        Login::new(
            "anthropic".into(),
            ("platform.claude.com".into(), 443, "/v1/oauth/token".into()),
            endpoint,
            "client".into(),
            vec!["user:inference".into()],
            Tokens {
                access: Zeroizing::new("sk-ant-oat01-real-access".into()),
                refresh: Zeroizing::new("sk-ant-ort01-real-refresh".into()),
                expires_at_ms,
                scopes: None,
            },
            Box::new(store),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn bearer(token: &str) -> hyper::HeaderMap {
        let mut h = hyper::HeaderMap::new();
        h.insert(
            "authorization",
            hyper::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .unwrap_or_else(|e| panic!("{e}")),
        );
        h
    }

    #[test]
    fn stand_ins_are_checked_renewed_and_never_the_real_tokens() {
        let store = Memory::default();
        let saved = store.saved.clone();
        let l = login(store, now_ms() + 3_600_000);
        let (access, refresh) = l.first_standins();
        assert!(access.starts_with("sk-ant-oat01-"));
        assert!(refresh.starts_with("sk-ant-ort01-"));
        assert_eq!(
            l.presented(&bearer(&access)),
            super::super::Presented::Valid
        );
        // The real token, another stand-in, the refresh stand-in: not this run's access.
        for wrong in ["sk-ant-oat01-real-access", &refresh, "x"] {
            assert_eq!(l.presented(&bearer(wrong)), super::super::Presented::Wrong);
        }
        assert_eq!(
            l.presented(&hyper::HeaderMap::new()),
            super::super::Presented::Missing
        );
        assert!(l.is_refresh_standin(refresh.as_bytes()));
        assert!(!l.is_refresh_standin(b"sk-ant-ort01-real-refresh"));
        // A refresh: fresh stand-ins, the old access one still valid, the old refresh not.
        let fresh = l
            .hand_out_for(refresh.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        // Control of the check in the lock: the same stand-in a second time gets nothing.
        assert!(l.hand_out_for(refresh.as_bytes()).is_err());
        assert_ne!(fresh.access, access);
        assert_eq!(
            l.presented(&bearer(&fresh.access)),
            super::super::Presented::Valid
        );
        assert_eq!(
            l.presented(&bearer(&access)),
            super::super::Presented::Valid
        );
        assert!(!l.is_refresh_standin(refresh.as_bytes()));
        assert!(l.is_refresh_standin(fresh.refresh.as_bytes()));
        let text = String::from_utf8_lossy(&answer(&fresh)).into_owned();
        assert!(!text.contains("real"), "{text}");
        assert!(text.contains(fresh.access.as_str()));
        // Renewed tokens are the login's and are saved, naming the refresh token replaced.
        let ok = l.renewed(Tokens {
            access: Zeroizing::new("sk-ant-oat01-new-access".into()),
            refresh: Zeroizing::new("sk-ant-ort01-new-refresh".into()),
            expires_at_ms: now_ms() + 3_600_000,
            scopes: None,
        });
        assert_eq!(ok, Ok(None));
        assert_eq!(
            l.access().map(|s| s.expose().to_owned()),
            Ok("sk-ant-oat01-new-access".into())
        );
        assert_eq!(
            saved.lock().map(|s| s.clone()).unwrap_or_default(),
            vec![(
                "sk-ant-oat01-new-access".into(),
                "sk-ant-ort01-real-refresh".into()
            )]
        );
        let held: Vec<String> = l.held().iter().map(|s| s.expose().to_owned()).collect();
        assert!(held.contains(&"sk-ant-ort01-real-refresh".to_owned()));
        assert!(held.contains(&"sk-ant-oat01-new-access".to_owned()));
    }

    #[test]
    fn the_host_renewing_first_is_adopted_when_fresh() {
        let store = Memory::default();
        let host = store.host.clone();
        let l = login(store, now_ms().saturating_sub(1000));
        assert!(l.expiring(0));
        // Nothing newer on the host, or something as expired: not adopted.
        assert!(!l.adopt_from_store(REFRESH_MARGIN_MS));
        if let Ok(mut h) = host.lock() {
            *h = Some((
                "sk-ant-oat01-host".into(),
                "sk-ant-ort01-host".into(),
                now_ms(),
            ));
        }
        assert!(!l.adopt_from_store(REFRESH_MARGIN_MS));
        if let Ok(mut h) = host.lock() {
            *h = Some((
                "sk-ant-oat01-host".into(),
                "sk-ant-ort01-host".into(),
                now_ms() + 3_600_000,
            ));
        }
        assert!(l.adopt_from_store(REFRESH_MARGIN_MS));
        assert!(!l.expiring(REFRESH_MARGIN_MS));
        assert_eq!(l.refresh_token().as_str(), "sk-ant-ort01-host");
    }

    #[test]
    fn refresh_requests_and_answers_are_read_strictly() {
        let ok = parse_refresh_request(
            Some("application/json"),
            br#"{"grant_type":"refresh_token","refresh_token":"R","client_id":"c","scope":"s"}"#,
        );
        assert_eq!(ok.map(|t| t.to_vec()), Ok(b"R".to_vec()));
        let form = parse_refresh_request(
            Some("application/x-www-form-urlencoded"),
            b"grant_type=refresh_token&refresh_token=R",
        );
        assert_eq!(form.map(|t| t.to_vec()), Ok(b"R".to_vec()));
        for (t, b) in [
            (
                Some("application/json"),
                &br#"{"grant_type":"authorization_code","code":"x"}"#[..],
            ),
            (Some("application/json"), &b"not json"[..]),
            (
                Some("application/x-www-form-urlencoded"),
                &b"grant_type=refresh_token&refresh_token=R&refresh_token=S"[..],
            ),
        ] {
            assert!(
                parse_refresh_request(t, b).is_err(),
                "{}",
                String::from_utf8_lossy(b)
            );
        }
        let t = parse_refresh_answer(
            br#"{"access_token":"A","refresh_token":"B","expires_in":60,"scope":"user:inference bad\u0001 user:profile"}"#,
            "old",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((t.access.as_str(), t.refresh.as_str()), ("A", "B"));
        assert_eq!(
            t.scopes,
            Some(vec!["user:inference".to_owned(), "user:profile".to_owned()])
        );
        let kept = parse_refresh_answer(br#"{"access_token":"A","expires_in":60}"#, "old")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(kept.refresh.as_str(), "old");
        assert!(parse_refresh_answer(br#"{"error":"invalid_grant"}"#, "old").is_err());
    }
}
