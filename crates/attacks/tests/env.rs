//! The environment: secret-looking variables (`*_KEY`, `*_TOKEN`, `*_SECRET`, ...) and loader
//! variables (`LD_*`) never reach the command unless named with `--env`; everything outside
//! the allow-list is dropped; allow-listed variables pass. The secret must not be recoverable
//! from any process visible inside either (`/proc/*/environ`, `ps e`, process memory).

use attacks::{python3, sh_quote, Fixture};

/// Secret-looking variables set in the caller's environment, with their marker kinds.
const SECRETS: &[(&str, &str)] = &[
    ("FAKE_API_KEY", "apikey"),
    ("GITHUB_TOKEN", "ghtoken"),
    ("AWS_SECRET_ACCESS_KEY", "awsenv"),
    ("STRIPE_SECRET", "stripe"),
    ("DB_PASSWORD", "dbpass"),
    // Matches the allow-listed `LC_*` but ends in `_TOKEN`: still a secret.
    ("LC_API_TOKEN", "lctoken"),
];

fn with_secrets(fx: &Fixture, mut cmd: attacks::Cmd) -> attacks::Cmd {
    for (name, kind) in SECRETS {
        cmd = cmd.env(name, fx.marker(kind));
    }
    cmd
}

#[test]
fn secret_env_vars_are_not_passed() {
    let fx = Fixture::new();
    let script = "env; cat /proc/self/environ | tr '\\0' '\\n'";
    let inside = with_secrets(&fx, fx.attack(&[], script)).outcome();
    inside.assert_ok().assert_output_contains("PATH=");
    for (_, kind) in SECRETS {
        inside.assert_lacks(&fx.marker(kind));
    }
    let host = with_secrets(&fx, fx.control(script)).outcome();
    for (_, kind) in SECRETS {
        host.assert_shows(&fx.marker(kind));
    }
}

#[test]
fn env_option_passes_a_named_secret_and_only_it() {
    let fx = Fixture::new();
    let script = "echo \"key=[$FAKE_API_KEY] token=[$GITHUB_TOKEN] set=[$ATTACKS_SET]\"";
    let inside = with_secrets(
        &fx,
        fx.attack(
            &["--env", "FAKE_API_KEY", "--env", "ATTACKS_SET=given-value"],
            script,
        ),
    )
    .outcome();
    inside
        .assert_shows(&format!("key=[{}]", fx.marker("apikey")))
        .assert_output_contains("token=[]")
        .assert_output_contains("set=[given-value]");
    // Without the option the variable is absent.
    with_secrets(&fx, fx.attack(&[], script))
        .outcome()
        .assert_shows("key=[] token=[]");
}

#[test]
fn loader_variables_are_dropped() {
    let fx = Fixture::new();
    // A harmless preload (libc itself), so neither stockade nor the control is disturbed.
    let libc = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
    .unwrap_or("libc.so.6");
    let lib_path = format!("/nonexistent/{}", fx.marker("ldpath"));
    let script = "env | grep '^LD_' ; echo \"preload=[${LD_PRELOAD-unset}]\"";
    let run = |cmd: attacks::Cmd| {
        cmd.env("LD_PRELOAD", libc)
            .env("LD_LIBRARY_PATH", &lib_path)
            .env("LD_BIND_NOW", "1")
            .outcome()
    };
    let inside = run(fx.attack(&[], script));
    inside
        .assert_ok()
        .assert_output_contains("preload=[unset]")
        .assert_lacks(&fx.marker("ldpath"))
        .assert_lacks("LD_BIND_NOW");
    let host = run(fx.control(script));
    host.assert_shows(&format!("preload=[{libc}]"))
        .assert_output_contains(&fx.marker("ldpath"));
}

#[test]
fn variables_outside_the_allow_list_are_dropped() {
    let fx = Fixture::new();
    let script = "env";
    let run = |cmd: attacks::Cmd| {
        cmd.env("ATTACKS_RANDOM_VAR", fx.marker("randomvar"))
            .env("BASH_ENV", format!("/nonexistent/{}", fx.marker("bashenv")))
            .env(
                "PYTHONSTARTUP",
                format!("/nonexistent/{}", fx.marker("pystartup")),
            )
            .env("EDITOR", fx.marker("editor"))
            .outcome()
    };
    let inside = run(fx.attack(&[], script));
    inside.assert_ok();
    for kind in ["randomvar", "bashenv", "pystartup", "editor"] {
        inside.assert_lacks(&fx.marker(kind));
    }
    let host = run(fx.control(script));
    for kind in ["randomvar", "bashenv", "pystartup", "editor"] {
        host.assert_shows(&fx.marker(kind));
    }
}

#[test]
fn allow_listed_variables_pass() {
    let fx = Fixture::new();
    let script = "echo \"home=[$HOME] lang=[$LANG] lcall=[$LC_ALL] tz=[$TZ] term=[$TERM] ci=[$CI] user=[$USER] path=[$PATH]\"";
    let inside = fx
        .attack(&[], script)
        .env("LANG", "C.UTF-8")
        .env("LC_ALL", "C.UTF-8")
        .env("TZ", "UTC")
        .env("TERM", "xterm-256color")
        .env("CI", "true")
        .env("USER", "attacks-user")
        .outcome();
    inside
        .assert_shows(&format!("home=[{}]", fx.home.display()))
        .assert_output_contains("lang=[C.UTF-8] lcall=[C.UTF-8] tz=[UTC] term=[xterm-256color] ci=[true] user=[attacks-user]")
        .assert_output_contains(&format!("path=[{}]", attacks::PATH));
}

/// The caller's environment must not be recoverable from any process visible inside: the
/// sandbox's own init or supervisor may still hold it (`/proc/PID/environ`, `ps e`, memory).
#[test]
fn secret_env_is_not_in_any_visible_process() {
    let fx = Fixture::new();
    let marker = fx.marker("apikey");
    let script = "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < \"$f\"; done; ps eww -A; true";
    fx.attack(&[], script)
        .env("FAKE_API_KEY", &marker)
        .outcome()
        .assert_hidden(&marker)
        // The loop really read environments (its own, at least).
        .assert_output_contains("PATH=");
    fx.control(script)
        .env("FAKE_API_KEY", &marker)
        .outcome()
        .assert_shows(&marker);

    // Process memory: the stack and heap of every visible process.
    let Some(py) = python3("reading /proc/PID/mem") else {
        return;
    };
    let mem = fx.script(
        "read_mem.py",
        r#"
import os, re, sys
needle = open(sys.argv[1], "rb").read().strip()
mine = os.getpid()
pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != mine]
if len(sys.argv) > 2:
    pids = [int(p) for p in sys.argv[2:]]
for pid in pids:
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb")
    except OSError as e:
        print(f"pid {pid}: {e.strerror}")
        continue
    for line in maps:
        if not (line.endswith("[stack]") or line.endswith("[heap]")):
            continue
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        try:
            mem.seek(lo)
            data = mem.read(min(hi - lo, 16 << 20))
        except OSError as e:
            print(f"pid {pid}: {e.strerror}")
            continue
        at = data.find(needle)
        if at >= 0:
            print(f"pid {pid}: found", data[at:at + len(needle)].decode(errors="replace"))
"#,
    );
    // The needle comes from a file, so only the scanner's own memory (skipped) holds it.
    let needle = fx.script("needle.txt", &marker);
    let script = format!(
        "{} {} {} $EXTRA_PIDS",
        sh_quote(&py),
        sh_quote(&mem),
        sh_quote(&needle)
    );
    fx.attack(&[], &script)
        .env("FAKE_API_KEY", &marker)
        .outcome()
        .assert_hidden(&marker);
    // Control: the host shell's own memory holds it.
    let control = format!("EXTRA_PIDS=$$; {script}");
    fx.control(&control)
        .env("FAKE_API_KEY", &marker)
        .outcome()
        .assert_shows(&marker);
}
