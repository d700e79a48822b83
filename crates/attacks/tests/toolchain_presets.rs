//! `--preset cargo` (issue 18, item 2): `cargo add` and `cargo build` inside a run, through
//! the proxy, against a test double of crates.io. The double is a static HTTPS site of the
//! sparse index (`config.json`, the crate's index file) and the crate's download, on a test
//! network's server side ([`TestNet`]), under the real names `index.crates.io` and
//! `static.crates.io` (a hosts file of the run's own maps them there), with a certificate
//! cargo is told to trust (`CARGO_HTTP_CAINFO`). The cargo and rustc are the toolchain that
//! built this test.
//!
//! The control runs the same commands with the proxy but without the preset: the registry's
//! domains are refused and the double sees nothing. Root only (the test network).
#![allow(
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use attacks::test_net::{TestNet, SERVER_IP};
use attacks::upstream::Upstream;
use attacks::*;

const CRATE: &str = "stkdemo";
const MARKER: &str = "hello-from-the-registry-double";

/// The registry's names, all at the double.
fn hosts() -> String {
    format!("127.0.0.1 localhost\n{SERVER_IP} crates.io index.crates.io static.crates.io\n")
}

/// The `bin` directory of the toolchain that built this test (cargo and rustc themselves, not
/// rustup's proxies, which would look for their toolchains in the fixture's home), hard-linked
/// under the fixture: rustup keeps it in `/root` (mode 0700), which the run's user cannot
/// enter when its home is the fixture's.
fn toolchain(fx: &Fixture) -> Option<PathBuf> {
    let cargo = PathBuf::from(option_env!("CARGO")?);
    let rustc = cargo.parent()?.join("rustc");
    let sysroot = Cmd::new(rustc, Path::new("/"))
        .args(["--print", "sysroot"])
        .run();
    let sysroot = PathBuf::from(sysroot.stdout.trim());
    if !sysroot.join("bin/cargo").is_file() || !sysroot.join("bin/rustc").is_file() {
        return None;
    }
    let copy = fx.root.join("toolchain");
    mkdir(&copy);
    Cmd::new("cp", Path::new("/"))
        .arg("-al")
        .arg(sysroot.join("bin"))
        .arg(sysroot.join("lib"))
        .arg(&copy)
        .run()
        .assert_success();
    Some(copy.join("bin"))
}

/// The crate `stkdemo` 0.1.0 as `cargo package` makes it, and its SHA-256.
fn packaged(fx: &Fixture, bin: &Path) -> (Vec<u8>, String) {
    let src = fx.root.join("stkdemo-src");
    write_file(
        &src.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{CRATE}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
             description = \"a test crate\"\nlicense = \"MIT\"\n"
        ),
        0o644,
    );
    write_file(
        &src.join("src/lib.rs"),
        format!("pub fn hello() -> &'static str {{\n    \"{MARKER}\"\n}}\n"),
        0o644,
    );
    Cmd::new(bin.join("cargo"), &src)
        .env("PATH", format!("{}:{PATH}", bin.display()))
        .env("CARGO_HOME", fx.root.join("packaging-cargo-home"))
        .args(["package", "--offline", "--no-verify", "--allow-dirty", "-q"])
        .run()
        .assert_success();
    let file = src.join(format!("target/package/{CRATE}-0.1.0.crate"));
    let bytes = std::fs::read(&file).expect("the packaged crate");
    let sum = Cmd::new("sha256sum", &src).arg(&file).run();
    sum.assert_success();
    let hex = sum
        .stdout
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_owned();
    (bytes, hex)
}

/// The sparse index and the download, as crates.io serves them.
fn registry_files(crate_bytes: Vec<u8>, cksum: &str) -> HashMap<String, Vec<u8>> {
    let entry = format!(
        "{{\"name\":\"{CRATE}\",\"vers\":\"0.1.0\",\"deps\":[],\"cksum\":\"{cksum}\",\
         \"features\":{{}},\"yanked\":false}}\n"
    );
    HashMap::from([
        (
            "/config.json".to_owned(),
            b"{\"dl\":\"https://static.crates.io/crates\",\"api\":\"https://crates.io\"}".to_vec(),
        ),
        (format!("/st/kd/{CRATE}"), entry.into_bytes()),
        (format!("/crates/{CRATE}/0.1.0/download"), crate_bytes),
    ])
}

/// A binary crate in the workspace that prints what `stkdemo` says.
fn project(fx: &Fixture) {
    write_file(
        &fx.ws.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
        0o644,
    );
    write_file(
        &fx.ws.join("src/main.rs"),
        format!("fn main() {{\n    println!(\"{{}}\", {CRATE}::hello());\n}}\n"),
        0o644,
    );
}

/// `cargo add stkdemo`, `cargo build`, then the program, in a run with `opts`.
fn add_and_build(fx: &Fixture, net: &TestNet, bin: &Path, ca: &Path, opts: &[&str]) -> Run {
    let path = format!("PATH={}:/usr/bin:/bin", bin.display());
    let cainfo = format!("CARGO_HTTP_CAINFO={}", ca.display());
    let mut all = vec!["--env", &path, "--env", &cainfo];
    all.extend_from_slice(opts);
    let script = format!("cargo add {CRATE} && cargo build && ./target/debug/app");
    fx.sandbox_argv(&all, &["/bin/sh", "-c", &script])
        .under(&net.prefix(fx, &hosts()))
        .timeout(std::time::Duration::from_secs(300))
        .run()
}

#[test]
fn cargo_add_and_build_work_through_the_proxy_with_the_cargo_preset() {
    if skip_unless_root("cargo through the proxy (a test network)") {
        return;
    }
    let fx = Fixture::new();
    let Some(bin) = toolchain(&fx) else {
        println!("skipped: no cargo and rustc of a toolchain next to this test's cargo");
        return;
    };
    let (crate_bytes, cksum) = packaged(&fx, &bin);
    let net = TestNet::new();
    let registry = Upstream::files_on(
        TestNet::tcp(&net.server, &format!("{SERVER_IP}:443")),
        &["crates.io", "index.crates.io", "static.crates.io"],
        registry_files(crate_bytes, &cksum),
    );
    project(&fx);
    let host_cargo = fx.home.join(".cargo");

    // The control: the proxy without the preset refuses the registry (cargo given a
    // writable home of its own, so that it gets as far as the network).
    let own_home = format!("CARGO_HOME={}", fx.ws.join(".cargo-home").display());
    let control = ["--net", "proxy", "--env", &own_home];
    let run = add_and_build(&fx, &net, &bin, &registry.ca_file, &control);
    assert_ne!(run.code(), 0, "{}", run.describe());
    run.assert_stderr_contains("E_NETWORK_DENIED")
        .assert_stderr_contains("index.crates.io");
    assert!(registry.seen().is_empty(), "the double was reached");
    assert!(!read_text(&fx.ws.join("Cargo.toml"))
        .unwrap_or_default()
        .contains(CRATE));

    let run = add_and_build(&fx, &net, &bin, &registry.ca_file, &["--preset", "cargo"]);
    run.assert_success().assert_stdout_contains(MARKER);
    let manifest = read_text(&fx.ws.join("Cargo.toml")).unwrap_or_default();
    assert!(
        manifest.contains(&format!("{CRATE} = \"0.1.0\"")),
        "{manifest}"
    );
    assert!(read_text(&fx.ws.join("Cargo.lock")).is_some_and(|l| l.contains(&cksum)));
    let seen: Vec<String> = registry.seen().into_iter().map(|s| s.target).collect();
    for path in [
        "/config.json".to_owned(),
        format!("/st/kd/{CRATE}"),
        format!("/crates/{CRATE}/0.1.0/download"),
    ] {
        assert!(seen.contains(&path), "{path} not fetched: {seen:?}");
    }
    // What cargo fetched is in the preset's cache, never the host's ~/.cargo.
    let cache = fx.home.join(".cache/stockade/cargo/registry");
    assert!(cache.is_dir(), "nothing in the preset's CARGO_HOME");
    assert!(!host_cargo.join("registry").exists());
}
