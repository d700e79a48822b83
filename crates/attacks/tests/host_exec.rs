//! Project files that host tools execute (issue 15, item 5): the catalogue
//! `policy::HOST_EXEC` is enforced in a real run. An existing entry cannot be changed, a new
//! one cannot be created (the refusal is reported), a policy can remove an entry by name, and
//! `policy show` names each protected path's source. Controls: the same steps without
//! stockade (or with the entry removed) take effect.

use attacks::{json_str, mkdir, read_text, sh_quote, write_file, Fixture};
use policy::HOST_EXEC;

/// A concrete path for an entry (`lefthook.*` → `lefthook.yml`).
fn instance(pattern: &str) -> String {
    pattern.replace('*', "yml")
}

/// `.cargo/config.toml` with `build.rustc-wrapper` runs a program on the next host `cargo`
/// command: an existing one cannot be rewritten, a new one cannot be created.
#[test]
fn cargo_config_cannot_be_written_or_created() {
    let write = "printf '[build]\\nrustc-wrapper = \"/tmp/evil\"\\n' > .cargo/config.toml";
    // Existing: read-only for the run.
    let fx = Fixture::new();
    write_file(&fx.ws.join(".cargo/config.toml"), "[build]\n", 0o644);
    fx.attack(&[], write).outcome().assert_failed_if_guarded();
    assert_eq!(
        read_text(&fx.ws.join(".cargo/config.toml")).as_deref(),
        Some("[build]\n")
    );
    fx.control(write).outcome().assert_ok();
    assert!(
        read_text(&fx.ws.join(".cargo/config.toml")).is_some_and(|t| t.contains("rustc-wrapper"))
    );
    // New: creation refused and reported.
    let fx = Fixture::new();
    let records = fx.records();
    let script = format!("mkdir -p .cargo && {write}");
    let inside = fx.attack(&records.opts(), &script).outcome();
    inside.assert_failed_if_guarded();
    records.assert_blocked(&inside.run, &[".cargo/config.toml"]);
    assert!(!fx.ws.join(".cargo/config.toml").exists());
    fx.control(&script).outcome().assert_ok();
    assert!(fx.ws.join(".cargo/config.toml").exists());
}

/// `.cargo -> cargo-dir`, a link the workspace already has (issue 32): `.cargo/config.toml`
/// lands in `cargo-dir/config.toml`, which no glob names but host cargo reads as
/// `.cargo/config.toml`. Its creation is refused (quarantined by the sweep where no creation
/// guard runs), an existing one cannot be rewritten. Control: the same write through a link
/// no glob names (`.other -> other-dir`) goes through.
#[test]
fn cargo_config_through_a_linked_dir_cannot_be_created_or_written() {
    let write = |dir: &str| {
        format!("printf '[build]\\nrustc-wrapper = \"/tmp/evil\"\\n' > {dir}/config.toml")
    };
    let armed = |p: &std::path::Path| read_text(p).is_some_and(|t| t.contains("rustc-wrapper"));
    let fx = Fixture::new();
    for (link, dir) in [(".cargo", "cargo-dir"), (".other", "other-dir")] {
        mkdir(&fx.ws.join(dir));
        std::os::unix::fs::symlink(dir, fx.ws.join(link)).unwrap();
    }
    let records = fx.records();
    let inside = fx.attack(&records.opts(), &write(".cargo")).outcome();
    inside.assert_failed_if_guarded();
    records.assert_blocked(&inside.run, &["cargo-dir/config.toml"]);
    assert!(!armed(&fx.ws.join(".cargo/config.toml")));
    fx.attack(&[], &write(".other")).outcome().assert_ok();
    assert!(armed(&fx.ws.join(".other/config.toml")));
    // Existing: read-only for the run.
    let fx = Fixture::new();
    write_file(&fx.ws.join("cargo-dir/config.toml"), "[build]\n", 0o644);
    std::os::unix::fs::symlink("cargo-dir", fx.ws.join(".cargo")).unwrap();
    fx.attack(&[], &write(".cargo"))
        .outcome()
        .assert_failed_if_guarded();
    assert_eq!(
        read_text(&fx.ws.join(".cargo/config.toml")).as_deref(),
        Some("[build]\n")
    );
    fx.control(&write(".cargo")).outcome().assert_ok();
    assert!(armed(&fx.ws.join(".cargo/config.toml")));
}

/// A directory entry (`.zed`): its creation is refused, a file inside an existing one cannot
/// be written.
#[test]
fn editor_config_dir_cannot_be_created_or_changed() {
    let fx = Fixture::new();
    let records = fx.records();
    let script = "mkdir .zed && echo '[{\"command\":\"evil\"}]' > .zed/tasks.json";
    let inside = fx.attack(&records.opts(), script).outcome();
    inside.assert_failed_if_guarded();
    records.assert_blocked(&inside.run, &[".zed"]);
    assert!(!fx.ws.join(".zed").exists());
    fx.control(script).outcome().assert_ok();

    let fx = Fixture::new();
    write_file(&fx.ws.join(".zed/tasks.json"), "[]\n", 0o644);
    let script = "echo '[{\"command\":\"evil\"}]' > .zed/tasks.json";
    fx.attack(&[], script).outcome().assert_failed_if_guarded();
    assert_eq!(
        read_text(&fx.ws.join(".zed/tasks.json")).as_deref(),
        Some("[]\n")
    );
    fx.control(script).outcome().assert_ok();
}

/// `[filesystem] unprotect = [".vscode"]` makes that one entry writable, and only it.
#[test]
fn catalogue_entry_removed_by_policy_becomes_writable() {
    let fx = Fixture::new();
    let policy = fx.out_file("unprotect.toml");
    std::fs::write(&policy, "[filesystem]\nunprotect = [\".vscode\"]\n").unwrap();
    let policy = policy.display().to_string();
    let script = "mkdir .vscode && echo '{}' > .vscode/settings.json && echo wrote";
    fx.attack(&["--policy", &policy], script)
        .outcome()
        .assert_ok()
        .assert_output_contains("wrote");
    assert!(fx.ws.join(".vscode/settings.json").exists());
    // The others stay protected under the same policy.
    fx.attack(&["--policy", &policy], "mkdir .idea")
        .outcome()
        .assert_failed_if_guarded();
    assert!(!fx.ws.join(".idea").exists());
    // Without the policy line the same steps are refused.
    let fx = Fixture::new();
    fx.attack(&[], script).outcome().assert_failed_if_guarded();
    assert!(!fx.ws.join(".vscode").exists());
    // An unknown name is an error naming it, before anything runs.
    let bad = fx.out_file("bad.toml");
    std::fs::write(&bad, "[filesystem]\nunprotect = [\".vscod\"]\n").unwrap();
    let bad = bad.display().to_string();
    let run = fx.sandbox_argv(&["--policy", &bad], &["true"]).run();
    assert_ne!(run.code(), 0, "{}", run.describe());
    run.assert_stderr_contains("unknown catalogue entry `.vscod`");
}

/// Every catalogue entry: creating it (as a file, and as a directory) is refused and
/// reported, and an existing one cannot be rewritten. Control: without stockade each lands.
#[test]
fn every_catalogue_entry_is_enforced() {
    let paths: Vec<String> = HOST_EXEC.iter().map(|e| instance(e.path)).collect();
    let create: String = paths
        .iter()
        .map(|p| {
            let q = sh_quote(p);
            let parent = std::path::Path::new(p)
                .parent()
                .map(|d| d.display().to_string())
                .filter(|d| !d.is_empty());
            let mk = parent.map_or(String::new(), |d| format!("mkdir -p {} ; ", sh_quote(d)));
            format!("{mk}echo pwned > {q} ; mkdir {q} ; ln -s /tmp/x {q}\n")
        })
        .collect();
    let fx = Fixture::new();
    fx.control(&create).outcome();
    for p in &paths {
        assert!(
            std::fs::symlink_metadata(fx.ws.join(p)).is_ok(),
            "control: {p} was not created without stockade"
        );
    }
    let fx = Fixture::new();
    let records = fx.records();
    let inside = fx.attack(&records.opts(), &create).outcome();
    for p in &paths {
        assert!(
            std::fs::symlink_metadata(fx.ws.join(p)).is_err(),
            "{p} was created inside stockade\n{}",
            inside.run.describe()
        );
        records.assert_blocked(&inside.run, &[p.as_str()]);
    }
    records.assert_nothing_swept(&inside.run);

    // Existing entries (as files) stay as they were.
    let fx = Fixture::new();
    for p in &paths {
        write_file(&fx.ws.join(p), "original\n", 0o644);
    }
    let rewrite: String = paths
        .iter()
        .map(|p| format!("echo pwned > {} ; ", sh_quote(p)))
        .collect();
    fx.attack(&[], &rewrite).outcome();
    for p in &paths {
        assert_eq!(
            read_text(&fx.ws.join(p)).as_deref(),
            Some("original\n"),
            "{p} was rewritten inside stockade"
        );
    }
    fx.control(&rewrite).outcome();
    for p in &paths {
        assert_eq!(
            read_text(&fx.ws.join(p)).as_deref(),
            Some("pwned\n"),
            "control: {p}"
        );
    }
}

/// `policy show` lists each protected path with its source: the catalogue (tool and why),
/// git's and stockade's own, the policy file, a flag; removed entries are marked.
#[test]
fn policy_show_names_the_source_of_each_protected_path() {
    let fx = Fixture::new();
    let policy = fx.out_file("show.toml");
    std::fs::write(
        &policy,
        "[filesystem]\ndeny_write = [\"Makefile\"]\nunprotect = [\".idea\"]\n",
    )
    .unwrap();
    let ws = fx.ws.display().to_string();
    let run = fx
        .stockade([
            "policy",
            "show",
            "--json",
            "--workspace",
            &ws,
            "--policy",
            &policy.display().to_string(),
            "--protect",
            "justfile",
        ])
        .run();
    assert_eq!(run.code(), 0, "{}", run.describe());
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let list = doc["protected_paths"].as_array().unwrap();
    let find = |p: &str| {
        list.iter()
            .find(|e| json_str(e, "pattern") == p)
            .unwrap_or_else(|| panic!("{p} not listed: {list:#?}"))
    };
    assert_eq!(json_str(find(".git/hooks"), "source"), "built-in");
    let cargo = find(".cargo/config.toml");
    assert_eq!(json_str(cargo, "source"), "catalogue");
    assert_eq!(json_str(cargo, "tool"), "cargo");
    assert!(json_str(cargo, "why").contains("rustc-wrapper"));
    assert_eq!(json_str(find("Makefile"), "source"), "policy file");
    assert_eq!(json_str(find("justfile"), "source"), "flag");
    assert_eq!(find(".idea")["removed"], true);
    assert!(!doc["policy"]["filesystem"]["deny_write"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p == ".idea"));
}
