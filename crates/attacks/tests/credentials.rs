//! Every default mask holds in a real run (issue 15, item 6): each entry of
//! `policy::DEFAULT_MASKS` in the home is created in the fixture's fake home, once as a file
//! and once as a directory holding a file, with a unique marker, and read inside
//! `stockade run`. Unreadable entries must not show their marker; entries read as empty (shell
//! start-up files) must open and read as nothing. Control: the same reads on the host show
//! every marker. Workspace dotenv entries (`.env`, `.env.*`) are covered by `secrets.rs`.
//!
//! Also: symlinks the command makes in the workspace that resolve into a masked path (direct,
//! relative, chained) are quarantined after the run and reported as
//! `symlink_to_masked_path`; without stockade they stay and read the key.

use attacks::{json_str, sh_quote, write_file, Fixture};
use policy::{MaskKind, DEFAULT_MASKS};

/// Concrete home-relative paths of an entry (`~/.env*` gives three names).
fn instances(pattern: &str) -> Vec<String> {
    let rel = pattern.trim_start_matches("~/");
    if rel.contains('*') {
        ["", "rc", ".local"]
            .iter()
            .map(|s| rel.replace('*', s))
            .collect()
    } else {
        vec![rel.to_owned()]
    }
}

/// Creates every home entry (as a file, or as a directory holding `secret`) with a marker;
/// returns (the path read, marker, kind).
fn plant(fx: &Fixture, as_dir: bool) -> Vec<(String, String, MaskKind)> {
    let mut planted = Vec::new();
    for (i, m) in DEFAULT_MASKS.iter().enumerate() {
        if !m.path.starts_with("~/") {
            continue;
        }
        for (j, rel) in instances(m.path).into_iter().enumerate() {
            let marker = fx.marker(&format!("mask{i}x{j}"));
            let read = if as_dir {
                format!("{rel}/secret")
            } else {
                rel.clone()
            };
            let path = fx.home.join(&read);
            // The fixture's own files (id_rsa, .bashrc, ...) are replaced (`write_file` fails
            // loudly if one is left in the way).
            let existing = fx.home.join(&rel);
            if existing.is_dir() && !as_dir {
                let _ = std::fs::remove_dir_all(&existing);
            } else if existing.is_file() {
                let _ = std::fs::remove_file(&existing);
            }
            write_file(&path, format!("export TOKEN={marker}\n"), 0o644);
            planted.push((read, marker, m.kind));
        }
    }
    planted
}

/// One `cat` per planted path; each prints its rc on a line `RC <i> <rc>`.
fn script(planted: &[(String, String, MaskKind)]) -> String {
    planted
        .iter()
        .enumerate()
        .map(|(i, (read, _, _))| {
            format!(
                "cat \"$HOME\"/{q}; echo; echo \"RC {i} $?\"\n",
                q = sh_quote(read)
            )
        })
        .collect()
}

fn check_every_mask(as_dir: bool) {
    let fx = Fixture::new();
    let planted = plant(&fx, as_dir);
    assert!(planted.len() > 90, "{}", planted.len());
    let script = script(&planted);
    // Control: without stockade every marker shows.
    let control = fx.control(&script).outcome();
    for (read, marker, _) in &planted {
        assert!(
            control.run.all_output().contains(marker.as_str()),
            "control: ~/{read} unreadable without stockade\n{}",
            control.run.describe()
        );
    }
    let inside = fx.attack(&[], &script).outcome();
    let out = inside.run.all_output();
    for (i, (read, marker, kind)) in planted.iter().enumerate() {
        assert!(
            !out.contains(marker.as_str()),
            "~/{read} readable inside stockade\n{}",
            inside.run.describe()
        );
        if *kind == MaskKind::Empty && !as_dir {
            // Read as empty: the open succeeds (shells must start).
            assert!(
                out.contains(&format!("RC {i} 0\n")),
                "~/{read} should read as empty, not fail\n{}",
                inside.run.describe()
            );
        }
    }
}

#[test]
fn every_default_mask_in_home_hides_a_file() {
    check_every_mask(false);
}

#[test]
fn every_default_mask_in_home_hides_a_directory() {
    check_every_mask(true);
}

/// Shells start with their start-up files masked, and do not see what those files export.
#[test]
fn shells_start_with_startup_files_read_as_empty() {
    let fx = Fixture::new();
    let marker = fx.marker("rctoken");
    for rc in [".bashrc", ".profile", ".bash_profile"] {
        write_file(
            &fx.home.join(rc),
            format!("export RC_TOKEN={marker}\n"),
            0o644,
        );
    }
    let script = "bash -lic 'echo \"token=$RC_TOKEN\"' 2>/dev/null; bash -ic 'echo \"itoken=$RC_TOKEN\"' 2>/dev/null; test -r \"$HOME/.bashrc\" && echo readable";
    fx.control(script).outcome().assert_shows(&marker);
    fx.attack(&[], script)
        .outcome()
        .assert_ok()
        .assert_output_contains("token=\n")
        .assert_output_contains("itoken=\n")
        .assert_output_contains("readable")
        .assert_lacks(&marker);
}

/// `~/.env*` matches files created in the home before the run, whatever follows `.env`.
#[test]
fn home_dotenv_glob_masks_every_variant() {
    let fx = Fixture::new();
    let names = [
        ".env",
        ".envrc",
        ".env.production",
        ".environment",
        ".env.*x",
    ];
    for (i, n) in names.iter().enumerate() {
        write_file(&fx.home.join(n), fx.marker(&format!("henv{i}")), 0o644);
    }
    for (i, n) in names.iter().enumerate() {
        let script = format!("cat \"$HOME\"/{}", sh_quote(n));
        let marker = fx.marker(&format!("henv{i}"));
        fx.attack(&[], &script).outcome().assert_blocked(&marker);
        fx.control(&script).outcome().assert_shows(&marker);
    }
}

/// Links into masked paths made during the run are quarantined and reported; the agent's
/// host-side tools cannot follow them afterwards.
#[test]
fn symlinks_into_masked_paths_are_quarantined() {
    let fx = Fixture::new();
    // A link the user made before the run is left alone.
    std::os::unix::fs::symlink(fx.home.join(".aws/credentials"), fx.ws.join("old-link")).unwrap();
    let script = r#"ln -s "$HOME/.ssh/id_rsa" link && mkdir -p sub && ln -s ../../home/.ssh/id_rsa sub/rel && ln -s c2 c1 && ln -s "$HOME/.ssh" c2 && ln -s "$HOME/.bashrc" rc && ln -s "$HOME/.ssh/id_ed25519" dangling && ln -s README.md harmless && echo made"#;
    let records = fx.records();
    let inside = fx.attack(&records.opts(), script).outcome();
    inside.assert_ok().assert_output_contains("made");
    for gone in ["link", "sub/rel", "c1", "c2", "rc", "dangling"] {
        assert!(
            std::fs::symlink_metadata(fx.ws.join(gone)).is_err(),
            "{gone} stayed in the workspace\n{}",
            inside.run.describe()
        );
        assert!(
            attacks::quarantined_files(&fx.ws)
                .iter()
                .any(|q| q.ends_with(gone)),
            "{gone} not in the quarantine"
        );
    }
    assert!(std::fs::symlink_metadata(fx.ws.join("harmless")).is_ok());
    assert!(std::fs::symlink_metadata(fx.ws.join("old-link")).is_ok());
    let violations = records.violations();
    for gone in ["link", "sub/rel", "c1", "c2", "rc", "dangling"] {
        assert!(
            violations
                .iter()
                .any(|v| json_str(v, "kind") == "symlink_to_masked_path"
                    && json_str(v, "code") == "E_SANDBOX_VIOLATION"
                    && json_str(v, "path").ends_with(&format!("/{gone}"))),
            "no symlink_to_masked_path violation for {gone}:\n{violations:#?}"
        );
    }
    inside.run.assert_stderr_contains("symlink to masked path");
    // Control: without stockade the links stay and lead to the key.
    let fx = Fixture::new();
    let out = fx
        .control(&format!("{script} && cat link sub/rel c1/id_rsa"))
        .outcome();
    out.assert_shows(&fx.marker("ssh"));
    assert!(std::fs::symlink_metadata(fx.ws.join("link")).is_ok());
}

/// Claude Code's own state in the host's home (issue 31, F2): a Console `/login` keeps its API
/// key as `primaryApiKey` in `~/.claude.json` on Linux, with user MCP servers' env tokens; the
/// legacy `~/.claude/.config.json`, `settings.json`'s env, the prompt history, the backups and
/// the transcripts hold the same. None is readable inside, in a plain run nor in the
/// claude-code worker's (whose state is a directory of its own). Control: on the host, the
/// same reads show every one.
#[test]
fn claude_codes_host_state_and_login_key_are_masked() {
    let fx = Fixture::new();
    let key = fx.marker("console-login-key");
    let files = [
        (
            ".claude.json",
            format!(
                "{{\"primaryApiKey\":\"{key}-primary\",\"hasCompletedOnboarding\":true,\
                 \"mcpServers\":{{\"gh\":{{\"command\":\"gh-mcp\",\"env\":{{\"GITHUB_TOKEN\":\"{key}-mcp\"}}}}}}}}\n"
            ),
        ),
        (
            ".claude.json.backup",
            format!("{{\"primaryApiKey\":\"{key}-home-backup\"}}\n"),
        ),
        (
            ".claude/backups/.claude.json.backup.1764345600000",
            format!("{{\"primaryApiKey\":\"{key}-backup\"}}\n"),
        ),
        (
            ".claude/.config.json",
            format!("{{\"primaryApiKey\":\"{key}-legacy\"}}\n"),
        ),
        (
            ".claude/settings.json",
            format!("{{\"env\":{{\"ANTHROPIC_AUTH_TOKEN\":\"{key}-settings\"}}}}\n"),
        ),
        (
            ".claude/settings.local.json",
            format!("{{\"env\":{{\"ANTHROPIC_AUTH_TOKEN\":\"{key}-local\"}}}}\n"),
        ),
        (
            ".claude/history.jsonl",
            format!("{{\"display\":\"export GITHUB_TOKEN={key}-history\"}}\n"),
        ),
        (
            ".claude/projects/-w/s1.jsonl",
            format!("{{\"message\":\"{key}-transcript\"}}\n"),
        ),
        (
            ".codex/history.jsonl",
            format!("{{\"text\":\"{key}-codex-history\"}}\n"),
        ),
        (
            ".codex/sessions/2026/s1.jsonl",
            format!("{{\"text\":\"{key}-codex-session\"}}\n"),
        ),
    ];
    // 0600, as the agents write them; readable by all for a root caller's container run,
    // whose command runs as another user (the workspace's owner): the mask must be what hides
    // them, not their mode.
    let mode = if attacks::gives_out() { 0o644 } else { 0o600 };
    for (rel, body) in &files {
        write_file(&fx.home.join(rel), body, mode);
    }
    let script: String = files
        .iter()
        .map(|(rel, _)| format!("cat \"$HOME\"/{} 2>&1; ", sh_quote(rel)))
        .collect::<String>()
        + "echo read-all";
    let control = fx.control(&script).outcome();
    for (_, body) in &files {
        let tail = body.split(&key).nth(1).unwrap_or_default();
        let shown = format!(
            "{key}{}",
            &tail[..tail.find('"').or(tail.find('\n')).unwrap()]
        );
        control.assert_shows(&shown);
    }
    fx.attack(&[], &script)
        .outcome()
        .assert_ok()
        .assert_lacks(&key);
    let agent = fx
        .attack(&["--agent", "claude-code"], &script)
        .env("ANTHROPIC_API_KEY", "sk-ant-api03-held-on-the-host")
        .run();
    if attacks::refused_credential_routes(&agent) {
        return;
    }
    agent.outcome().assert_ok().assert_lacks(&key);
}
