//! What a new user meets before any sandbox runs (issue 18, item 10): the binary's own output.
//! A closed pipe ends any subcommand quietly with 141 (128 + SIGPIPE), as coreutils do,
//! instead of a panic with a backtrace; `proxy --help` lists the proxy's options only; shell
//! completions and manual pages come from the same definitions as the parser.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::process::{Command, Output, Stdio};

use attacks::{stockade_bin, write_file, Fixture, PATH};

/// `stockade ARGS` in the fixture's workspace, with `stdin` on standard input and, as
/// standard output, `stdout`.
fn stockade_with_stdout(fx: &Fixture, args: &[&str], stdout: Stdio, stdin: &[u8]) -> Output {
    let mut child = Command::new(stockade_bin())
        .args(args)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &fx.home)
        .current_dir(&fx.ws)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start stockade");
    {
        use std::io::Write;
        let mut input = child.stdin.take().expect("stdin pipe");
        // The command may end before it reads (a closed pipe): not an error here.
        let _ = input.write_all(stdin);
    }
    child.wait_with_output().expect("wait for stockade")
}

/// The subcommands that print on standard output, with what each reads on standard input.
fn printing_subcommands(fx: &Fixture) -> Vec<(Vec<String>, Vec<u8>)> {
    let policy = fx.root.join("policy.toml");
    write_file(&policy, "profile = \"read-only\"\n", 0o644);
    let ws = fx.ws.display().to_string();
    let mut list: Vec<(Vec<&str>, &[u8])> = vec![
        (vec!["selftest", "--list"], b""),
        (vec!["selftest", "--list", "--json"], b""),
        (vec!["policy", "show", "--workspace", &ws], b""),
        (vec!["policy", "show", "--json", "--workspace", &ws], b""),
        (vec!["doctor"], b""),
        (vec!["doctor", "--json"], b""),
        (vec!["why", "--workspace", &ws, "README.md"], b""),
        (
            vec!["why", "--json", "--workspace", &ws, "example.com"],
            b"",
        ),
        (vec!["guard", "--workspace", &ws, "ls -l"], b""),
        (vec!["trust", "status", "--workspace", &ws], b""),
        (vec!["apparmor-profile"], b""),
        (vec!["sanitize"], b"plain text\n"),
        (vec!["completions", "bash"], b""),
        (vec!["man"], b""),
        (vec!["runs"], b""),
        (vec!["runs", "--json"], b""),
    ];
    let check = ["policy", "check", policy.to_str().expect("utf-8 path")];
    list.push((check.to_vec(), b""));
    list.into_iter()
        .map(|(args, input)| {
            (
                args.into_iter().map(str::to_owned).collect(),
                input.to_vec(),
            )
        })
        .collect()
}

/// `stockade selftest --list | head -1` and the like: every subcommand that prints, given a
/// standard output whose reader has gone away, exits 141 without a word (no panic, no
/// backtrace). Control: with a reader, each prints something and does not exit 141.
#[test]
fn a_closed_pipe_ends_every_subcommand_quietly_with_141() {
    let fx = Fixture::new();
    for (args, input) in printing_subcommands(&fx) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let out = stockade_with_stdout(&fx, &args, writer.into(), &input);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(141),
            "stockade {args:?} with a closed stdout: {:?}\n{stderr}",
            out.status
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "stockade {args:?} with a closed stdout said:\n{stderr}"
        );
        // Control: the same command with a reader prints.
        let out = stockade_with_stdout(&fx, &args, Stdio::piped(), &input);
        assert!(
            !out.stdout.is_empty() && out.status.code() != Some(141),
            "stockade {args:?} printed nothing: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Any other failure to write standard output (a full disk) is stockade's own error, named,
/// with exit 125; not a panic.
#[test]
fn a_full_stdout_is_an_internal_error_not_a_panic() {
    let fx = Fixture::new();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = stockade_with_stdout(&fx, &["selftest", "--list"], full.into(), b"");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("stockade: error[E_INTERNAL]: failed to write standard output")
            && !stderr.contains("panicked"),
        "{stderr}"
    );
}

/// `stockade ARGS` in the fixture's workspace, its output captured.
fn stockade(fx: &Fixture, args: &[&str]) -> Output {
    stockade_with_stdout(fx, args, Stdio::piped(), b"")
}

/// The `--flags` a help text lists as options (`  -h, --help`, `      --listen <ADDR>`).
fn flags_in(help: &str) -> Vec<String> {
    let mut flags: Vec<String> = help
        .lines()
        .filter(|l| l.starts_with("  "))
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("-h, ").unwrap_or(l);
            let flag = l.split_whitespace().next()?;
            flag.starts_with("--").then(|| flag.to_owned())
        })
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

/// `stockade proxy --help` lists the proxy's options only: the network rules (with the
/// registries of `--preset`), where to listen and the audit log; not `run`'s filesystem, environment and limit flags. Those stay
/// accepted, as before, with a warning that the proxy does not use them. Control: `run --help`
/// still lists them all.
#[test]
fn proxy_help_lists_only_the_proxy_options() {
    let fx = Fixture::new();
    let help = stockade(&fx, &["proxy", "--help"]);
    assert!(help.status.success());
    let shown = flags_in(&String::from_utf8_lossy(&help.stdout));
    assert_eq!(
        shown,
        [
            "--allow-domain",
            "--allow-host",
            "--audit",
            "--deny-domain",
            "--help",
            "--listen",
            "--policy",
            "--preset"
        ],
        "{}",
        String::from_utf8_lossy(&help.stdout)
    );
    let run_help = stockade(&fx, &["run", "--help"]);
    let run_flags = flags_in(&String::from_utf8_lossy(&run_help.stdout));
    for flag in [
        "--workspace",
        "--allow-write",
        "--memory",
        "--timeout",
        "--credential",
        "--allow-domain",
        "--shell",
        "--report",
    ] {
        assert!(run_flags.iter().any(|f| f == flag), "{flag}: {run_flags:?}");
    }
    // Still accepted by the proxy (a non-loopback address makes it stop right after).
    let out = stockade(
        &fx,
        &[
            "proxy",
            "--memory",
            "1G",
            "--allow-write",
            "/var/tmp",
            "--listen",
            "0.0.0.0:1",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("warning: --allow-write, --memory: options of `stockade run`")
            && stderr.contains("refusing to listen on 0.0.0.0:1"),
        "{stderr}"
    );
}

/// `stockade completions bash|zsh|fish` prints a completion script that knows `run` and its
/// flags; an unknown shell is a usage error.
#[test]
fn completions_are_printed_for_bash_zsh_and_fish() {
    let fx = Fixture::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = stockade(&fx, &["completions", shell]);
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{shell}: {:?}", out.status);
        assert!(
            script.contains("run") && script.contains("allow-domain") && script.len() > 1000,
            "{shell} completions lack `run`:\n{script}"
        );
    }
    let out = stockade(&fx, &["completions", "no-such-shell"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `stockade man` prints stockade(1) in roff, naming `run` among its subcommands; `stockade
/// man run` prints stockade-run(1) with run's options; an unknown subcommand is refused.
#[test]
fn man_prints_roff_pages() {
    let fx = Fixture::new();
    let out = stockade(&fx, &["man"]);
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        page.contains(".TH stockade 1") && page.contains(".SH SUBCOMMANDS"),
        "{page}"
    );
    assert!(page.contains("stockade\\-run(1)"), "{page}");
    let out = stockade(&fx, &["man", "run"]);
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        page.contains(".TH stockade-run 1") && page.contains("\\fB\\-\\-allow\\-domain\\fR"),
        "{page}"
    );
    // The proxy's page lists the proxy's options only.
    let out = stockade(&fx, &["man", "proxy"]);
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.contains("\\-\\-listen") && !page.contains("\\-\\-memory"),
        "{page}"
    );
    let out = stockade(&fx, &["man", "no-such-subcommand"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("  hint: "));
}
