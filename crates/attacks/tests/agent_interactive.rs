//! Interactive worker mode (issue 31, item 1): `stockade run --agent claude-code -- claude` and
//! `stockade run --agent codex -- codex ...` as a person runs them, in a real terminal (a tmux
//! window of the test's own, [`attacks::pty::Screen`]), with the real CLIs against local test
//! doubles of their model APIs, in a fresh home.
//!
//! Claude Code, on its first start in a state directory, runs an onboarding whose first step
//! connects to api.anthropic.com and platform.claude.com itself (not through
//! `ANTHROPIC_BASE_URL`), which the route does not carry: it stopped there ("Unable to connect
//! to Anthropic services"). On every later start it asked whether to use the "custom API key"
//! (default No): the stand-in was new in every run, and Claude Code remembers approved keys by
//! their last 20 characters. The preset now has stockade write, where the state directory has
//! no `.claude.json`, one with the onboarding done and the stand-in's tail approved; the
//! stand-in's last 20 characters are the same in every run of the user (the 176 bits before
//! them new in each); `CLAUDE_CODE_SANDBOXED=1` skips the workspace trust question.
//!
//! The tests: a fresh home starts straight into the prompt, a prompt typed there is answered
//! by the double through the route (with the real key, put on by the proxy), and after quitting,
//! a second start again goes straight to the prompt, with no API-key question. An earlier run's
//! stand-in, which ends alike, is still refused. The controls: a state directory whose
//! `.claude.json` lacks the onboarding stops at the connectivity check (what a fresh directory
//! did before), and one that approved another key's tail asks the question. Codex's TUI with
//! the README's provider starts at its prompt and answers through the route, twice.

use std::sync::Arc;
use std::time::Duration;

use attacks::pty::Screen;
use attacks::upstream::{Seen, Upstream};
use attacks::*;

/// The key the route puts on the model's requests, held on the host.
const KEY: &str = "sk-ant-api03-real-key-held-on-the-host";
const OPENAI_KEY: &str = "sk-proj-real-key-held-on-the-host";

/// What the doubles answer every prompt with.
const ANSWER: &str = "HELLO-FROM-THE-DOUBLE";

/// Claude Code's prompt is ready: the footer under its input box (the permission mode's line,
/// or the shortcut hint).
const CLAUDE_READY: &[&str] = &["? for shortcuts", "shift+tab to cycle"];

/// What Claude Code shows instead of the prompt when it asks something first, or stops.
const CLAUDE_ASKS: &[&str] = &[
    "Unable to connect to Anthropic services",
    "Do you want to use this API key",
    "Quick safety check",
    "Choose the text style",
    "Select login method",
];

/// The CLIs start slowly on a loaded machine, inside a sandbox more so.
const START: Duration = Duration::from_secs(240);

fn claude_double() -> attacks::upstream::Script {
    Arc::new(|seen: &Seen| {
        if seen.target.contains("count_tokens") {
            return br#"{"input_tokens":1}"#.to_vec();
        }
        let body = String::from_utf8_lossy(&seen.body);
        attacks::messages::reply(body.contains("\"stream\":true"), None, ANSWER)
    })
}

/// `stockade run --policy P --agent claude-code -- claude`, the README's recipe, where P makes
/// the double the route's upstream; the caller's terminal, home and key.
fn claude_run(fx: &Fixture, up: &Upstream) -> Cmd {
    let policy = fx.out_file("claude-policy.toml");
    write_file(
        &policy,
        format!("[credentials.anthropic]\nupstream = \"{}\"\n", up.url()),
        0o644,
    );
    let claude = attacks::messages::claude();
    fx.sandbox_argv(
        &[
            "--policy",
            policy.to_str().unwrap_or_default(),
            "--agent",
            "claude-code",
        ],
        &[claude.to_str().unwrap_or_default()],
    )
    .env("ANTHROPIC_API_KEY", KEY)
    .env("SSL_CERT_FILE", &up.ca_file)
    .env("TERM", "xterm-256color")
}

fn screen(fx: &Fixture, cmd: &Cmd) -> Screen {
    let (argv, env, cwd) = cmd.parts();
    Screen::start(&fx.root, &cwd, &env, &argv)
}

/// Types `prompt` and Enter, and waits for the double's answer on the screen.
fn ask(s: &Screen, prompt: &str, refuse: &[&str]) {
    // Keys typed before the CLI reads its input can be lost: type until the screen shows them.
    for _ in 0..6 {
        s.type_text(prompt);
        if s.wait_for(&[prompt], refuse, Duration::from_secs(10))
            .is_ok()
        {
            break;
        }
        s.keys(&["C-u"]);
    }
    std::thread::sleep(Duration::from_millis(500));
    s.keys(&["Enter"]);
    if let Err(e) = s.wait_for(&[ANSWER], refuse, START) {
        panic!("no answer from the double on the screen: {e}");
    }
    println!("--- the screen with the answer:\n{}", s.text());
}

fn state(fx: &Fixture) -> std::path::PathBuf {
    fx.home.join(".local/state/stockade/claude-code")
}

#[test]
fn claude_code_starts_at_the_prompt_answers_through_the_route_and_does_not_ask_again() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let up = Upstream::start_with(Some(claude_double()));
    let run = claude_run(&fx, &up);
    assert!(!state(&fx).exists());
    {
        let s = screen(&fx, &run);
        if let Err(e) = s.wait_for(CLAUDE_READY, CLAUDE_ASKS, START) {
            panic!("a fresh state directory did not start at the prompt: {e}");
        }
        ask(&s, "say hello", CLAUDE_ASKS);
        s.quit();
    }
    // Claude Code kept its state where stockade made it (the onboarding answered there).
    let config = read_json(&state(&fx).join(".claude.json"));
    assert_eq!(config["hasCompletedOnboarding"], true, "{config}");
    // The second start: straight to the prompt again, no API-key question.
    {
        let s = screen(&fx, &run);
        if let Err(e) = s.wait_for(CLAUDE_READY, CLAUDE_ASKS, START) {
            panic!("the second start did not go straight to the prompt: {e}");
        }
        ask(&s, "say hello again", CLAUDE_ASKS);
        s.quit();
    }
    // The key stayed on the host: every model call carried it, set by the proxy.
    let calls: Vec<Seen> = up
        .seen()
        .into_iter()
        .filter(|s| s.target.starts_with("/v1/messages"))
        .collect();
    assert!(calls.len() >= 2, "{calls:#?}");
    assert!(
        calls.iter().all(|s| s.header("x-api-key") == Some(KEY)),
        "{calls:#?}"
    );
}

/// The control for the first start: a state directory whose `.claude.json` lacks the
/// onboarding (one made before stockade wrote it, after Claude Code's first failed start)
/// stops at Claude Code's own connectivity check, which the route does not carry.
#[test]
fn control_without_the_onboarding_claude_code_stops_at_its_connectivity_check() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let up = Upstream::start_with(Some(claude_double()));
    mkdir(&state(&fx));
    chmod(&state(&fx), 0o700);
    write_file(&state(&fx).join(".claude.json"), "{}\n", 0o600);
    let s = screen(&fx, &claude_run(&fx, &up));
    let shown = s.wait_for(
        &["Unable to connect to Anthropic services"],
        CLAUDE_READY,
        START,
    );
    assert_eq!(shown, Ok(0), "the control did not meet the check");
    // Claude Code exits; stockade's refusal of its connection names the route, and does not
    // offer to open the route's host to the command.
    assert!(s.wait_exit(START), "{}", s.text());
    let hint = s.wait_for(&["upstream of credential route `anthropic`"], &[], START);
    assert_eq!(hint, Ok(0), "no hint naming the route");
    println!("--- the screen after the run:\n{}", s.text());
    assert!(
        !s.text().contains("--allow-domain api.anthropic.com")
            && !s.text().contains("--allow-domain platform.claude.com"),
        "{}",
        s.text()
    );
}

/// The control for the question: a state directory that approved another key's tail (as
/// Claude Code would have it after a run whose stand-in ended otherwise) asks again.
#[test]
fn control_an_approval_of_another_tail_brings_the_api_key_question_back() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let up = Upstream::start_with(Some(claude_double()));
    mkdir(&state(&fx));
    chmod(&state(&fx), 0o700);
    write_file(
        &state(&fx).join(".claude.json"),
        r#"{"hasCompletedOnboarding":true,"customApiKeyResponses":{"approved":["0123456789abcdef0123"],"rejected":[]}}"#,
        0o600,
    );
    let s = screen(&fx, &claude_run(&fx, &up));
    let shown = s.wait_for(&["Do you want to use this API key"], CLAUDE_READY, START);
    assert_eq!(shown, Ok(0), "the control was not asked");
}

/// The stand-in's tail on its own: in a state directory whose `.claude.json` has the onboarding
/// done but no approval (one a user finished by hand), Claude Code asks about the key once;
/// answered Yes, the next run's stand-in, new but ending alike, is not asked about again. (With
/// a stand-in new to its end in every run, as before, it asked at every start: the control
/// above shows the question for a tail not approved.)
#[test]
fn a_stand_in_approved_once_is_not_asked_about_in_the_next_run() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let up = Upstream::start_with(Some(claude_double()));
    mkdir(&state(&fx));
    chmod(&state(&fx), 0o700);
    write_file(
        &state(&fx).join(".claude.json"),
        r#"{"hasCompletedOnboarding":true}"#,
        0o600,
    );
    let run = claude_run(&fx, &up);
    {
        let s = screen(&fx, &run);
        let asked = s.wait_for(&["Do you want to use this API key"], CLAUDE_READY, START);
        assert_eq!(asked, Ok(0), "the first start did not ask");
        // "No (recommended)" is preselected: up to "Yes".
        s.keys(&["Up"]);
        std::thread::sleep(Duration::from_millis(300));
        s.keys(&["Enter"]);
        if let Err(e) = s.wait_for(CLAUDE_READY, &[], START) {
            panic!("no prompt after approving the key: {e}");
        }
        ask(&s, "say hello", &[]);
        s.quit();
    }
    let s = screen(&fx, &run);
    if let Err(e) = s.wait_for(CLAUDE_READY, CLAUDE_ASKS, START) {
        panic!("the next run asked again: {e}");
    }
    ask(&s, "say hello again", CLAUDE_ASKS);
    s.quit();
}

/// The control for the tail: the state Claude Code kept in a run where it went straight to the
/// prompt (its `.claude.json`, the stand-in approved), copied into another home, whose
/// stand-ins end otherwise, as every run's did before the tail stayed: Claude Code asks again.
#[test]
fn control_a_stand_in_ending_otherwise_is_asked_about_again() {
    if attacks::messages::CLAUDE_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let up = Upstream::start_with(Some(claude_double()));
    {
        let s = screen(&fx, &claude_run(&fx, &up));
        if let Err(e) = s.wait_for(CLAUDE_READY, CLAUDE_ASKS, START) {
            panic!("a fresh state directory did not start at the prompt: {e}");
        }
        s.quit();
    }
    let kept = read_text(&state(&fx).join(".claude.json")).unwrap_or_default();
    assert!(kept.contains("customApiKeyResponses"), "{kept}");
    let other = Fixture::new();
    mkdir(&state(&other));
    chmod(&state(&other), 0o700);
    write_file(&state(&other).join(".claude.json"), &kept, 0o600);
    let s = screen(&other, &claude_run(&other, &up));
    let asked = s.wait_for(&["Do you want to use this API key"], CLAUDE_READY, START);
    assert_eq!(asked, Ok(0), "the control was not asked");
}

/// The stand-in's last 20 characters stay from run to run (what Claude Code remembers), the
/// rest does not: an earlier run's stand-in is refused (401, nothing reaches the upstream),
/// this run's is carried (the control).
#[test]
fn an_earlier_runs_stand_in_ends_alike_and_is_still_refused() {
    let fx = Fixture::new();
    let up = Upstream::start();
    let policy = fx.out_file("stand-in-policy.toml");
    write_file(
        &policy,
        format!("[credentials.anthropic]\nupstream = \"{}\"\n", up.url()),
        0o644,
    );
    let policy = policy.to_str().unwrap_or_default();
    let opts = ["--policy", policy, "--credential", "anthropic"];
    let stand_in = |file: &str| {
        let o = fx
            .attack(&opts, &format!("printf %s \"$ANTHROPIC_API_KEY\" > {file}"))
            .env("ANTHROPIC_API_KEY", KEY)
            .env("SSL_CERT_FILE", &up.ca_file)
            .outcome();
        assert_eq!(o.ran(), 0, "{}", o.run.describe());
        read_text(&fx.ws.join(file)).unwrap_or_default()
    };
    let (old, new) = (stand_in("old-token"), stand_in("new-token"));
    assert!(old.starts_with("stockade-standin-"), "{old:?}");
    assert_eq!(old.len(), new.len());
    assert_eq!(old[old.len() - 20..], new[new.len() - 20..]);
    assert_ne!(old[..old.len() - 20], new[..new.len() - 20]);
    let curl = |token: &str, path: &str| {
        format!(
            "curl -s --noproxy '*' -o /dev/null -w 'status=%{{http_code}}\\n' -H \"x-api-key: {token}\" \"$ANTHROPIC_BASE_URL{path}\""
        )
    };
    let script = format!(
        "{}\n{}",
        curl("$(cat old-token)", "/v1/replayed"),
        curl("$ANTHROPIC_API_KEY", "/v1/own")
    );
    let o = fx
        .attack(&opts, &script)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("SSL_CERT_FILE", &up.ca_file)
        .outcome();
    assert_eq!(o.ran(), 0, "{}", o.run.describe());
    assert!(o.run.stdout.contains("status=401"), "{}", o.run.describe());
    assert!(o.run.stdout.contains("status=200"), "{}", o.run.describe());
    let targets: Vec<_> = up.seen().into_iter().map(|r| r.target).collect();
    assert_eq!(targets, ["/v1/own"]);
}

/// Codex's prompt is ready.
const CODEX_READY: &[&str] = &["? for shortcuts"];

/// What Codex shows instead when it asks first: its sign-in and trust screens.
const CODEX_ASKS: &[&str] = &[
    "Sign in with ChatGPT",
    "Provide your own API key",
    "Trust this folder?",
    "Failed to set trust",
];

/// `stockade run --policy P --agent codex -- codex --sandbox danger-full-access -c ...`: the
/// README's recipe (the workspace trusted, its provider at the route), P making the double the
/// route's upstream. Without `trust`, the workspace is not named trusted (the control).
fn codex_run(fx: &Fixture, up: &Upstream, trust: bool) -> Cmd {
    let policy = fx.out_file("codex-policy.toml");
    write_file(
        &policy,
        format!("[credentials.openai]\nupstream = \"{}/v1\"\n", up.url()),
        0o644,
    );
    let codex = attacks::responses::codex();
    let mut argv = vec![
        codex.to_str().unwrap_or_default().to_owned(),
        "--sandbox".to_owned(),
        "danger-full-access".to_owned(),
    ];
    if trust {
        // The README's `-c "projects={\"$PWD\"={trust_level=\"trusted\"}}"`, as its shell
        // expands it in the workspace.
        argv.push("-c".to_owned());
        argv.push(format!(
            "projects={{\"{}\"={{trust_level=\"trusted\"}}}}",
            fx.ws.display()
        ));
    }
    argv.extend(attacks::responses::provider_args(
        "http://127.0.0.1:3128/credential/openai",
    ));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    fx.sandbox_argv(
        &[
            "--policy",
            policy.to_str().unwrap_or_default(),
            "--agent",
            "codex",
        ],
        &argv,
    )
    .env("OPENAI_API_KEY", OPENAI_KEY)
    .env("SSL_CERT_FILE", &up.ca_file)
    .env("TERM", "xterm-256color")
}

#[test]
fn codex_tui_starts_at_the_prompt_and_answers_through_the_route_twice() {
    if attacks::responses::CODEX_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let up = Upstream::start_with(Some(Arc::new(|_: &Seen| {
        attacks::responses::events(attacks::responses::message(ANSWER))
    })));
    let run = codex_run(&fx, &up, true);
    for start in ["first", "second"] {
        let s = screen(&fx, &run);
        if let Err(e) = s.wait_for(CODEX_READY, CODEX_ASKS, START) {
            panic!("Codex's {start} start did not go straight to the prompt: {e}");
        }
        ask(&s, "say hello", CODEX_ASKS);
        s.quit();
    }
    let calls: Vec<Seen> = up
        .seen()
        .into_iter()
        .filter(|s| s.target.starts_with("/v1/responses"))
        .collect();
    assert!(calls.len() >= 2, "{calls:#?}");
    let bearer = format!("Bearer {OPENAI_KEY}");
    assert!(
        calls
            .iter()
            .all(|s| s.header("authorization") == Some(bearer.as_str())),
        "{calls:#?}"
    );
}

/// The control: without the workspace named trusted, Codex asks whether to trust the folder
/// (a git repository), at its start or when the first prompt is sent (both seen with the same
/// pinned build, on different machines), and cannot save the
/// answer (its `config.toml` is read-only in the preset), so it would ask at every start.
#[test]
fn control_codex_without_the_trusted_workspace_asks_and_cannot_save_the_answer() {
    if attacks::responses::CODEX_CLI.skip() {
        return;
    }
    let fx = Fixture::new();
    let up = Upstream::start_with(Some(Arc::new(|_: &Seen| {
        attacks::responses::events(attacks::responses::message(ANSWER))
    })));
    let s = screen(&fx, &codex_run(&fx, &up, false));
    let trust = "Trust this folder?";
    let first: Vec<&str> = CODEX_READY.iter().copied().chain([trust]).collect();
    match s.wait_for(&first, &[], START) {
        Ok(i) if first[i] == trust => return,
        Ok(_) => {}
        Err(e) => panic!("Codex did not start: {e}"),
    }
    s.type_text("say hello");
    std::thread::sleep(Duration::from_millis(500));
    s.keys(&["Enter"]);
    let shown = s.wait_for(&["Trust this folder?"], &[ANSWER], START);
    assert_eq!(shown, Ok(0), "the control was not asked");
}
