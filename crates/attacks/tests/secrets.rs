//! Reading credentials: `~/.ssh`, `~/.aws`, other masked home files and workspace dotenv
//! files, directly and through every indirection an agent could try (symlinks and hardlinks
//! made inside the workspace, `/proc/self/root`, `/proc/self/cwd`, `..` paths, other tools).
//! Each attack is paired with the same snippet run directly on the host, which must succeed.

use attacks::{python3, sh_quote, write_file, Fixture};

/// Runs `script` inside the sandbox (must not reveal `marker`, must fail) and on the host
/// (must succeed and reveal `marker`).
fn blocked_read(fx: &Fixture, script: &str, marker: &str) {
    fx.attack(&[], script).outcome().assert_blocked(marker);
    fx.control(script).outcome().assert_shows(marker);
}

/// The sandbox really can read the (world-readable) fake home and the workspace: the
/// secrets below are hidden by stockade, not by file permissions.
#[test]
fn non_secret_home_and_workspace_files_are_readable() {
    if attacks::not_applicable(&attacks::na::STATX) {
        return;
    }
    let fx = Fixture::new();
    let script = r#"cat "$HOME/notes.txt" README.md"#;
    fx.attack(&[], script)
        .outcome()
        .assert_shows(&fx.marker("notes"))
        .assert_output_contains(&fx.marker("readme"));
    // The home directory and the workspace can be listed (read-only is not unreadable).
    fx.attack(&[], r#"ls -a "$HOME" && ls -a"#)
        .outcome()
        .assert_shows("notes.txt\n")
        .assert_output_contains("README.md\n");
}

#[test]
fn ssh_private_key_direct_read_is_blocked() {
    let fx = Fixture::new();
    blocked_read(&fx, r#"cat "$HOME/.ssh/id_rsa""#, &fx.marker("ssh"));
    blocked_read(&fx, r#"cat ~/.ssh/config"#, &fx.marker("sshconfig"));
}

#[test]
fn aws_credentials_direct_read_is_blocked() {
    let fx = Fixture::new();
    blocked_read(&fx, r#"cat "$HOME/.aws/credentials""#, &fx.marker("aws"));
}

#[test]
fn workspace_dotenv_direct_read_is_blocked() {
    let fx = Fixture::new();
    blocked_read(&fx, "cat .env", &fx.marker("dotenv"));
    blocked_read(&fx, "cat ./.env.local", &fx.marker("dotenvlocal"));
    blocked_read(&fx, "cat app/.env.production", &fx.marker("dotenvprod"));
    // Absolute path to the workspace file.
    let abs = format!("cat {}", sh_quote(fx.ws.join(".env")));
    blocked_read(&fx, &abs, &fx.marker("dotenv"));
    // A `*` in the name (the bulk glob matcher once took it for `.env.*`'s wildcard and
    // missed the file; found by fuzzing).
    let starred = fx.marker("dotenvstar");
    write_file(&fx.ws.join("app/.env.*prod"), format!("{starred}\n"), 0o644);
    blocked_read(&fx, "cat 'app/.env.*prod'", &starred);
}

#[test]
fn other_credential_files_in_home_are_blocked() {
    let fx = Fixture::new();
    for (file, kind) in [
        (".netrc", "netrc"),
        (".git-credentials", "gitcred"),
        (".bash_history", "history"),
        (".npmrc", "npmrc"),
        (".config/gh/hosts.yml", "gh"),
        (".gnupg/private-keys-v1.d/key.key", "gnupg"),
    ] {
        blocked_read(&fx, &format!(r#"cat "$HOME/{file}""#), &fx.marker(kind));
    }
}

/// `grep -r` over the whole home and workspace finds no secret (a recursive tool that
/// opens every file, including through directory listings).
#[test]
fn recursive_grep_over_home_and_workspace_finds_no_secret() {
    let fx = Fixture::new();
    let script = format!(r#"grep -r -h -a MARKER "$HOME" {}; true"#, sh_quote(&fx.ws));
    let inside = fx.attack(&[], &script).outcome();
    inside.assert_ok();
    for kind in [
        "ssh", "aws", "netrc", "gitcred", "history", "gh", "gnupg", "dotenv",
    ] {
        inside.assert_lacks(&fx.marker(kind));
    }
    // The non-secret file is found, so grep really searched.
    inside.assert_output_contains(&fx.marker("notes"));
    let host = fx.control(&script).outcome();
    host.assert_shows(&fx.marker("ssh"))
        .assert_output_contains(&fx.marker("aws"))
        .assert_output_contains(&fx.marker("dotenv"));
}

#[test]
fn secret_via_symlink_created_in_workspace_is_blocked() {
    let fx = Fixture::new();
    let cases = [
        (r#""$HOME/.ssh/id_rsa""#, "ssh"),
        (r#""$HOME/.aws/credentials""#, "aws"),
        (r#""$HOME/.ssh""#, "ssh-dir"),
        (".env", "dotenv"),
    ];
    for (i, (target, kind)) in cases.into_iter().enumerate() {
        let (script, marker) = if kind == "ssh-dir" {
            (
                format!("rm -f link{i} && ln -s {target} link{i} && cat link{i}/id_rsa"),
                fx.marker("ssh"),
            )
        } else {
            (
                format!("rm -f link{i} && ln -s {target} link{i} && cat link{i}"),
                fx.marker(kind),
            )
        };
        blocked_read(&fx, &script, &marker);
    }
}

/// A symlink to a secret that already exists in the workspace when the run starts (planted
/// earlier, or committed to the repository).
#[test]
fn secret_via_preexisting_symlink_is_blocked() {
    let fx = Fixture::new();
    std::os::unix::fs::symlink(fx.home.join(".ssh/id_rsa"), fx.ws.join("planted-key"))
        .expect("symlink");
    std::os::unix::fs::symlink(fx.home.join(".aws"), fx.ws.join("planted-aws")).expect("symlink");
    blocked_read(&fx, "cat planted-key", &fx.marker("ssh"));
    blocked_read(&fx, "cat planted-aws/credentials", &fx.marker("aws"));
}

#[test]
fn secret_via_hardlink_attempt_in_workspace_is_blocked() {
    let fx = Fixture::new();
    let cases = [
        (r#""$HOME/.ssh/id_rsa""#, "ssh"),
        (r#""$HOME/.aws/credentials""#, "aws"),
        (".env", "dotenv"),
        ("app/.env.production", "dotenvprod"),
    ];
    for (i, (source, kind)) in cases.into_iter().enumerate() {
        let script = format!("rm -f hard{i} && ln {source} hard{i} && cat hard{i}");
        blocked_read(&fx, &script, &fx.marker(kind));
        // The control left a real hardlink behind; remove it before the next case.
        let _ = std::fs::remove_file(fx.ws.join(format!("hard{i}")));
    }
}

#[test]
fn secret_via_proc_self_root_is_blocked() {
    let fx = Fixture::new();
    blocked_read(
        &fx,
        r#"cat "/proc/self/root$HOME/.ssh/id_rsa""#,
        &fx.marker("ssh"),
    );
    blocked_read(
        &fx,
        r#"cat "/proc/self/root$HOME/.aws/credentials""#,
        &fx.marker("aws"),
    );
    blocked_read(
        &fx,
        &format!("cat /proc/self/root{}", sh_quote(fx.ws.join(".env"))),
        &fx.marker("dotenv"),
    );
    blocked_read(&fx, "cat /proc/self/cwd/.env", &fx.marker("dotenv"));
    blocked_read(
        &fx,
        r#"cat "/proc/$$/root$HOME/.ssh/id_rsa""#,
        &fx.marker("ssh"),
    );
}

#[test]
fn secret_via_dotdot_paths_is_blocked() {
    let fx = Fixture::new();
    // The fake home is the workspace's sibling: <root>/home and <root>/ws.
    blocked_read(&fx, "cat ../home/.ssh/id_rsa", &fx.marker("ssh"));
    blocked_read(
        &fx,
        "cat app/../../home/.aws/credentials",
        &fx.marker("aws"),
    );
    blocked_read(&fx, "cat ../ws/.env", &fx.marker("dotenv"));
    blocked_read(&fx, "cat app/../.env", &fx.marker("dotenv"));
    blocked_read(
        &fx,
        "cd app && cat ../.env.local",
        &fx.marker("dotenvlocal"),
    );
    blocked_read(
        &fx,
        r#"cat "$HOME/../home/.ssh/../.ssh/id_rsa""#,
        &fx.marker("ssh"),
    );
}

/// Copying a secret into the workspace leaves no copy of it on the host.
#[test]
fn copying_secret_into_workspace_leaks_nothing_to_host() {
    let fx = Fixture::new();
    let script = r#"cp "$HOME/.ssh/id_rsa" stolen-key; cp .env stolen-env; cat "$HOME/.aws/credentials" > stolen-aws; tar cf stolen.tar -C "$HOME" .ssh .aws; cat stolen-key stolen-env"#;
    fx.attack(&[], script)
        .outcome()
        .assert_blocked(&fx.marker("ssh"));
    for name in ["stolen-key", "stolen-env", "stolen-aws", "stolen.tar"] {
        let text = attacks::read_text(&fx.ws.join(name)).unwrap_or_default();
        for kind in ["ssh", "aws", "dotenv"] {
            assert!(
                !text.contains(&fx.marker(kind)),
                "host file {name} holds the {kind} secret after the run: {text:?}"
            );
        }
        let _ = std::fs::remove_file(fx.ws.join(name));
    }
    fx.control("cp \"$HOME/.ssh/id_rsa\" stolen-key && cat stolen-key")
        .outcome()
        .assert_shows(&fx.marker("ssh"));
}

/// Reading through an interpreter rather than a shell tool.
#[test]
fn secret_read_through_python_is_blocked() {
    let Some(py) = python3("python open()") else {
        return;
    };
    let fx = Fixture::new();
    let script = format!(
        r#"{} -c 'import os; print(open(os.path.expanduser("~/.ssh/id_rsa")).read())'"#,
        sh_quote(&py)
    );
    blocked_read(&fx, &script, &fx.marker("ssh"));
    let script = format!(r#"{} -c 'print(open(".env").read())'"#, sh_quote(&py));
    blocked_read(&fx, &script, &fx.marker("dotenv"));
}

/// `--deny-read PATH` adds a path to the masked set.
#[test]
fn deny_read_option_masks_an_extra_path() {
    let fx = Fixture::new();
    write_file(
        &fx.home.join("project-secret.txt"),
        format!("{}\n", fx.marker("extra")),
        0o644,
    );
    let script = r#"cat "$HOME/project-secret.txt""#;
    // Readable without the option (it is not in the default deny list)...
    fx.attack(&[], script)
        .outcome()
        .assert_shows(&fx.marker("extra"));
    // ...and not with it.
    let opt = fx.home.join("project-secret.txt");
    let opt = opt.to_str().expect("utf-8 path");
    fx.attack(&["--deny-read", opt], script)
        .outcome()
        .assert_blocked(&fx.marker("extra"));
}

/// `--allow-read PATH` re-opens one path inside a denied directory, and only that path.
#[test]
fn allow_read_option_unmasks_only_the_named_path() {
    let fx = Fixture::new();
    let opt = fx.home.join(".aws/credentials");
    let opt = opt.to_str().expect("utf-8 path");
    fx.attack(&["--allow-read", opt], r#"cat "$HOME/.aws/credentials""#)
        .outcome()
        .assert_shows(&fx.marker("aws"));
    fx.attack(&["--allow-read", opt], r#"cat "$HOME/.ssh/id_rsa""#)
        .outcome()
        .assert_blocked(&fx.marker("ssh"));
}

/// `--allow-write` of a directory inside a masked one (`~/.ssh/tmp`, as `~/.kube/cache` or
/// `~/.docker/buildx` would be) opens that directory only: the masked directory is split
/// around it, its other files stay unreadable (red team, issue 33: the whole `~/.ssh` mask
/// was dropped, writing a subdirectory taken as reading the parent). The same for a
/// `--deny-read` directory of the workspace around an `--allow-write` inside it. Controls:
/// the granted directory is written; the host reads the key; the mask of the whole
/// directory granted (`--allow-write ~/.ssh`: writing implies reading) is lifted.
#[test]
fn a_writable_directory_inside_a_masked_one_opens_only_itself() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.home.join(".ssh/tmp")).expect("mkdir");
    let tmp = fx.home.join(".ssh/tmp").display().to_string();
    let key = r#"cat "$HOME/.ssh/id_rsa""#;
    fx.attack(&["--allow-write", &tmp], key)
        .outcome()
        .assert_blocked(&fx.marker("ssh"));
    fx.control(key).outcome().assert_shows(&fx.marker("ssh"));
    let written = fx
        .sandbox(
            &["--allow-write", &tmp],
            r#"echo w > "$HOME/.ssh/tmp/w" && echo written"#,
        )
        .run();
    written.assert_success().assert_stdout_contains("written");
    assert!(fx.home.join(".ssh/tmp/w").exists());
    let whole = fx.home.join(".ssh").display().to_string();
    fx.attack(&["--allow-write", &whole], key)
        .outcome()
        .assert_shows(&fx.marker("ssh"));
    // In the workspace: a denied directory with a writable one inside.
    std::fs::create_dir_all(fx.ws.join("priv/out")).expect("mkdir");
    write_file(
        &fx.ws.join("priv/key"),
        format!("{}\n", fx.marker("priv")),
        0o644,
    );
    let (deny, out) = (fx.ws.join("priv"), fx.ws.join("priv/out"));
    let opts = [
        "--deny-read",
        deny.to_str().expect("utf-8"),
        "--allow-write",
        out.to_str().expect("utf-8"),
    ];
    fx.attack(&opts, "cat priv/key")
        .outcome()
        .assert_blocked(&fx.marker("priv"));
    fx.control("cat priv/key")
        .outcome()
        .assert_shows(&fx.marker("priv"));
}

/// A descriptor to a secret that the caller left open (no close-on-exec) must not survive
/// into the sandbox.
#[test]
fn secret_via_inherited_file_descriptor_is_blocked() {
    let fx = Fixture::new();
    let inner = attacks::wrap("cat <&7");
    let script = format!(
        r#"exec 7< "$HOME/.ssh/id_rsa"; exec {} run --workspace {} --shell {}"#,
        sh_quote(attacks::stockade_bin()),
        sh_quote(&fx.ws),
        sh_quote(&inner)
    );
    fx.host(&script).outcome().assert_blocked(&fx.marker("ssh"));
    fx.control(r#"exec 7< "$HOME/.ssh/id_rsa"; cat <&7"#)
        .outcome()
        .assert_shows(&fx.marker("ssh"));
}

/// A hard link to `~/.aws/credentials` planted in the workspace before the run (a mask covers
/// a path, not the file): the run is refused (125, `E_PROTECTION_UNAVAILABLE`) naming the
/// file, instead of reading it through the other name. Found by the self-test corpus. Control:
/// the planted name shows the secret on the host; a second name that is itself masked (a
/// backup link in `~/.ssh`) does not stop runs.
#[test]
fn planted_hard_link_to_a_credential_file_refuses_the_run() {
    let fx = Fixture::new();
    std::fs::hard_link(fx.home.join(".aws/credentials"), fx.ws.join("data.csv")).unwrap();
    let run = fx.sandbox(&[], "cat data.csv").run();
    run.assert_code(125);
    run.assert_stderr_contains("E_PROTECTION_UNAVAILABLE");
    run.assert_stderr_contains(".aws/credentials has 2 names");
    run.assert_stderr_contains("-samefile");
    run.assert_lacks(&fx.marker("aws"));
    fx.control("cat data.csv")
        .outcome()
        .assert_shows(&fx.marker("aws"));
    // Under `--allow-degraded` the run goes ahead and its report says what was skipped (the
    // pipeline's one check, the same for every backend).
    let report = fx.out_file("report.json");
    let r = report.display().to_string();
    fx.sandbox(&["--allow-degraded", "--report", &r], "true")
        .run()
        .assert_success();
    let skipped = attacks::read_json(&report)["skipped"].clone();
    assert!(
        attacks::json_any_string(&skipped, &|s| s
            .starts_with("masking of linked credential files: ")
            && s.contains(".aws/credentials has 2 names")),
        "the report's skipped: {skipped}"
    );

    let fx = Fixture::new();
    std::fs::hard_link(fx.home.join(".ssh/id_rsa"), fx.home.join(".ssh/id_rsa.bak")).unwrap();
    fx.attack(&[], "echo ran").outcome().assert_shows("ran");
}

/// A dotenv file in a git dir's own files: a directory holding one moved into a `.git` (a
/// run under gVisor, which has no creation guard, can make a `.git` and move a `.env`'s
/// directory into it; the walk never looked below `.git` but for submodules, and the next
/// run read it), or into a submodule's object store. Each is masked. Control: the host reads
/// them; and under gVisor the move itself made by a run, then read by the next run.
#[test]
fn a_dotenv_file_moved_into_a_git_dir_stays_masked() {
    let fx = Fixture::new();
    for (i, p) in [
        ".git/app/.env",
        ".git/objects/ab/.env",
        ".git/modules/s/objects/x/.env",
    ]
    .iter()
    .enumerate()
    {
        write_file(&fx.ws.join(p), fx.marker(&format!("ingit{i}")), 0o644);
    }
    let script = "cat .git/app/.env .git/objects/ab/.env .git/modules/s/objects/x/.env";
    for i in 0..3 {
        blocked_read(&fx, script, &fx.marker(&format!("ingit{i}")));
    }
    // The move made by a run (refused by the creation guard under native), then a read.
    let secret = fx.marker("moved");
    write_file(&fx.ws.join("app2/.env"), &secret, 0o644);
    let _ = fx
        .attack(&[], "mkdir -p .git/x && mv app2 .git/x/app2")
        .outcome();
    fx.attack(&[], "cat .git/x/app2/.env app2/.env")
        .outcome()
        .assert_hidden(&secret);
    assert!(
        attacks::read_text(&fx.ws.join(".git/x/app2/.env"))
            .or_else(|| attacks::read_text(&fx.ws.join("app2/.env")))
            .is_some_and(|t| t.contains(&secret)),
        "the secret is gone from the host"
    );
}

/// A policy's exact masked path in the workspace cannot be taken out of another run's sight by
/// renaming a directory on its way (this run's mask goes along; renamed back once the other
/// run's command runs, no pattern finds it elsewhere: red team issue 32d): the directories on
/// its way are pinned, the rename fails. Control: without the mask the same rename works.
#[test]
fn an_exact_masked_path_cannot_be_moved_away_by_renaming_its_directory() {
    let fx = Fixture::new();
    let key = fx.ws.join("conf/deep/secret.key");
    write_file(&key, fx.marker("key"), 0o644);
    let deny = format!("--deny-read={}", key.display());
    for script in ["mv conf hidden", "mv conf/deep conf/hidden"] {
        fx.attack(&[&deny], script).outcome().assert_failed();
        assert!(key.exists(), "{script}: the secret left its path");
    }
    fx.attack(&[&deny], "cat conf/deep/secret.key")
        .outcome()
        .assert_blocked(&fx.marker("key"));
    fx.attack(&[], "mv conf hidden && mv hidden conf && echo renamed")
        .outcome()
        .assert_shows("renamed");
}
