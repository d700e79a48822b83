//! `stockade snapshot --out DIR|FILE.tar` (issue 19, item 7): the workspace exported for a
//! backend that cannot bind-mount it must not carry the host's secrets, git's code paths or
//! a way out of the workspace.
//!
//! The attacks: a symbolic link in the workspace to the home's SSH key (a backend unpacking
//! the snapshot, or a host tool following it later, would read it), dotenv files, a git
//! hook and a `core.fsmonitor` planted in `.git` (the first `git status` in the exported
//! copy would run them), stockade's quarantine, a dependency cache.
//!
//! Controls: the same workspace without the link exports; git in the exported copy commits
//! (what it needs is kept) without running the planted programs; `--allow-outside-links`
//! leaves the link out and says so.

#![allow(clippy::expect_used)]

use std::path::Path;

use attacks::{read_text, sh_quote, walk, write_file, Fixture, Run};

fn snapshot(fx: &Fixture, out: &Path, extra: &[&str]) -> Run {
    fx.stockade([
        "snapshot".as_ref(),
        "--workspace".as_ref(),
        fx.ws.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ])
    .args(extra)
    .env("XDG_STATE_HOME", fx.root.join("state"))
    .run()
}

/// Every file of `dir` that holds `needle`.
fn holding(dir: &Path, needle: &str) -> Vec<String> {
    walk(dir, &|_| false)
        .into_iter()
        .filter(|p| !p.is_symlink() && p.is_file())
        .filter(|p| read_text(p).is_some_and(|t| t.contains(needle)))
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn snapshot_refuses_a_link_to_the_ssh_key_and_writes_nothing() {
    let fx = Fixture::new();
    std::os::unix::fs::symlink(fx.home.join(".ssh/id_rsa"), fx.ws.join("deploy_key"))
        .expect("plant the link");
    for out in [fx.root.join("snap"), fx.root.join("snap.tar")] {
        let run = snapshot(&fx, &out, &[]);
        run.assert_code(125)
            .assert_stderr_contains("stockade: error[E_SNAPSHOT_REFUSED]: ")
            .assert_stderr_contains("  hint: ")
            .assert_stderr_contains(&format!(
                "deploy_key -> {}",
                fx.home.join(".ssh/id_rsa").display()
            ));
        assert!(!out.exists(), "a refused snapshot wrote {}", out.display());
    }
    // JSON refusal: the code and the links, machine-readable.
    let run = snapshot(&fx, &fx.root.join("snap"), &["--json"]);
    run.assert_code(125);
    let err: serde_json::Value =
        serde_json::from_str(run.stderr.trim()).expect("the refusal is one JSON object");
    assert_eq!(
        err["error"]["code"],
        "E_SNAPSHOT_REFUSED",
        "{}",
        run.describe()
    );
    assert_eq!(err["error"]["outside_links"][0]["path"], "deploy_key");
    // Control: with the flag, the link is left out and listed; the rest is exported.
    let out = fx.root.join("snap");
    snapshot(&fx, &out, &["--allow-outside-links"])
        .assert_success()
        .assert_stdout_contains("deploy_key -> ");
    assert!(out.join("README.md").is_file());
    assert!(std::fs::symlink_metadata(out.join("deploy_key")).is_err());
    assert!(holding(&out, &fx.marker("ssh")).is_empty());
}

#[test]
fn snapshot_leaves_out_secrets_and_git_code_and_git_still_commits() {
    let fx = Fixture::new();
    let (hook, hook_flag) = fx.tripwire("hook-ran");
    let (monitor, monitor_flag) = fx.tripwire("fsmonitor-ran");
    write_file(
        &fx.ws.join(".git/hooks/pre-commit"),
        format!("#!/bin/sh\n{}\n", sh_quote(&hook)),
        0o755,
    );
    // Appended after every host git command of the fixture: the host's git would run it.
    let config = fx.ws.join(".git/config");
    let mut text = read_text(&config).expect("the fixture's git config");
    text.push_str(&format!(
        "[core]\n\tfsmonitor = {}\n\thooksPath = .git/hooks\n[alias]\n\tst = !{}\n",
        monitor.display(),
        monitor.display()
    ));
    write_file(&config, text, 0o644);
    write_file(
        &fx.ws.join("node_modules/left-pad/index.js"),
        "module.exports = 1;\n",
        0o644,
    );
    write_file(
        &fx.ws
            .join(".stockade/quarantine/run1/.git/hooks/post-checkout"),
        "#!/bin/sh\n",
        0o755,
    );
    std::os::unix::fs::symlink("app/main.txt", fx.ws.join("main-link")).expect("link");

    let (dir, tar) = (fx.root.join("snap"), fx.root.join("snap.tar"));
    let run = snapshot(&fx, &dir, &["--json"]);
    run.assert_success();
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON summary");
    let listed = |key: &str| -> Vec<(String, String)> {
        doc[key]
            .as_array()
            .expect("a list")
            .iter()
            .map(|x| {
                (
                    x["path"].as_str().unwrap_or_default().to_string(),
                    x["reason"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };
    let excluded = listed("excluded");
    for (path, reason) in [
        (".env", "secret"),
        (".env.local", "secret"),
        ("app/.env.production", "secret"),
        (".git/hooks", "git_internal"),
        ("node_modules", "dependency_cache"),
        (".stockade", "stockade_state"),
    ] {
        assert!(
            excluded.contains(&(path.to_string(), reason.to_string())),
            "{path} ({reason}) not listed as left out:\n{}",
            run.stdout
        );
    }
    for gone in [
        ".env",
        ".env.local",
        "app/.env.production",
        "node_modules",
        ".stockade",
    ] {
        assert!(!dir.join(gone).exists(), "{gone} was exported");
    }
    assert!(!dir.join(".git/hooks").exists());
    for kind in ["dotenv", "dotenvlocal", "dotenvprod", "ssh"] {
        assert!(holding(&dir, &fx.marker(kind)).is_empty(), "{kind} leaked");
    }
    let exported = read_text(&dir.join(".git/config")).expect("a reduced config");
    for gone in ["fsmonitor", "hooksPath", "alias", "-ran.sh"] {
        assert!(!exported.contains(gone), "{gone} kept:\n{exported}");
    }
    assert_eq!(
        std::fs::read_link(dir.join("main-link")).expect("the link inside is kept"),
        Path::new("app/main.txt")
    );

    // Git works in the copy, and runs nothing of what was planted.
    write_file(&dir.join("README.md"), "# changed\n", 0o644);
    fx.host(&format!(
        "cd {} && git status --porcelain && git commit -qam changed && git log --oneline",
        sh_quote(&dir)
    ))
    .run()
    .assert_success()
    .assert_stdout_contains("changed");
    assert!(!hook_flag.exists(), "the planted hook ran");
    assert!(!monitor_flag.exists(), "the planted fsmonitor ran");

    // The archive holds the same entries.
    let run_tar = snapshot(&fx, &tar, &["--json"]);
    run_tar.assert_success();
    let doc_tar: serde_json::Value = serde_json::from_str(&run_tar.stdout).expect("JSON");
    assert_eq!(doc["entries"], doc_tar["entries"]);
    assert_eq!(doc["excluded"], doc_tar["excluded"]);
    let names = fx.host(&format!("tar -tf {}", sh_quote(&tar))).run();
    names
        .assert_success()
        .assert_lacks(".env")
        .assert_lacks("hooks/");
    assert!(
        names.stdout.lines().any(|l| l == ".git/HEAD"),
        "{}",
        names.stdout
    );

    // Summary for a person: counts per reason.
    let out = fx.root.join("snap2");
    snapshot(&fx, &out, &[])
        .assert_success()
        .assert_stdout_contains("left out: ")
        .assert_stdout_contains("secret");
}

#[test]
fn snapshot_refuses_an_output_inside_the_workspace() {
    let fx = Fixture::new();
    let out = fx.ws.join("snap");
    snapshot(&fx, &out, &[])
        .assert_code(125)
        .assert_stderr_contains("E_SNAPSHOT_REFUSED");
    assert!(!out.exists());
}
