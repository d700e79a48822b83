//! The toolchain presets (issue 18, item 2): `cargo add` + `cargo build` (`--preset cargo`),
//! `npm install` (`--preset npm`) and `pip install` into a venv (`--preset pip`) inside a run,
//! through the proxy, against test doubles of crates.io, the npm registry and PyPI. Each double
//! is a static HTTPS site (the sparse index and the download; the packument and the tarball;
//! the simple index and the wheel) on a test network's server side ([`TestNet`]), under the
//! registry's real names (a hosts file of the run's own maps them there), with a certificate
//! the tool is told to trust. The cargo and rustc are the toolchain that built this test.
//!
//! Each control runs the same commands with the proxy but without the preset: the registry's
//! domain is refused and the double sees nothing. Root only (the test network).
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

/// A registry's double on a test network of its own.
struct Double {
    net: TestNet,
    site: Upstream,
    names: Vec<String>,
}

impl Double {
    /// `files` served as the hosts `names` (port 443).
    fn start(names: &[&str], files: HashMap<String, Vec<u8>>) -> Double {
        let net = TestNet::new();
        let listener = TestNet::tcp(&net.server, &format!("{SERVER_IP}:443"));
        let site = Upstream::files_on(listener, names, files);
        Double {
            net,
            site,
            names: names.iter().map(|n| n.to_string()).collect(),
        }
    }

    /// `sh -c script` in a run with the variables `env` (`NAME=VALUE`) and `opts`, where the
    /// double's names resolve to it.
    fn run(&self, fx: &Fixture, env: &[String], opts: &[&str], script: &str) -> Run {
        let hosts = format!(
            "127.0.0.1 localhost\n{SERVER_IP} {}\n",
            self.names.join(" ")
        );
        let mut all: Vec<&str> = env.iter().flat_map(|e| ["--env", e.as_str()]).collect();
        all.extend_from_slice(opts);
        fx.sandbox_argv(&all, &["/bin/sh", "-c", script])
            .under(&self.net.prefix(fx, &hosts))
            .timeout(std::time::Duration::from_secs(300))
            .run()
    }

    /// The paths fetched so far.
    fn fetched(&self) -> Vec<String> {
        self.site.seen().into_iter().map(|s| s.target).collect()
    }

    /// The control's run failed because the proxy refused `domain`, before the double.
    fn assert_refused(&self, run: &Run, domain: &str) {
        assert_ne!(run.code(), 0, "{}", run.describe());
        run.assert_stderr_contains("E_NETWORK_DENIED")
            .assert_stderr_contains(domain);
        assert!(self.fetched().is_empty(), "the double was reached");
    }

    fn assert_fetched(&self, paths: &[String]) {
        let seen = self.fetched();
        for path in paths {
            assert!(seen.contains(path), "{path} not fetched: {seen:?}");
        }
    }
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
    let registry = Double::start(
        &["crates.io", "index.crates.io", "static.crates.io"],
        registry_files(crate_bytes, &cksum),
    );
    project(&fx);
    let host_cargo = fx.home.join(".cargo");
    let env = [
        format!("PATH={}:/usr/bin:/bin", bin.display()),
        format!("CARGO_HTTP_CAINFO={}", registry.site.ca_file.display()),
    ];
    let script = format!("cargo add {CRATE} && cargo build && ./target/debug/app");

    // The control: the proxy without the preset refuses the registry (cargo given a
    // writable home of its own, so that it gets as far as the network).
    let own_home = format!("CARGO_HOME={}", fx.ws.join(".cargo-home").display());
    let control = ["--net", "proxy", "--env", &own_home];
    let run = registry.run(&fx, &env, &control, &script);
    registry.assert_refused(&run, "index.crates.io");
    assert!(!read_text(&fx.ws.join("Cargo.toml"))
        .unwrap_or_default()
        .contains(CRATE));

    let run = registry.run(&fx, &env, &["--preset", "cargo"], &script);
    run.assert_success().assert_stdout_contains(MARKER);
    let manifest = read_text(&fx.ws.join("Cargo.toml")).unwrap_or_default();
    assert!(
        manifest.contains(&format!("{CRATE} = \"0.1.0\"")),
        "{manifest}"
    );
    assert!(read_text(&fx.ws.join("Cargo.lock")).is_some_and(|l| l.contains(&cksum)));
    registry.assert_fetched(&[
        "/config.json".to_owned(),
        format!("/st/kd/{CRATE}"),
        format!("/crates/{CRATE}/0.1.0/download"),
    ]);
    // What cargo fetched is in the preset's cache, never the host's ~/.cargo.
    let cache = fx.home.join(".cache/stockade/cargo/registry");
    assert!(cache.is_dir(), "nothing in the preset's CARGO_HOME");
    assert!(!host_cargo.join("registry").exists());
}

/// The first word `tool FILE` prints (a digest).
fn digest(tool: &str, file: &Path) -> String {
    let out = Cmd::new(tool, Path::new("/")).arg(file).run();
    out.assert_success();
    out.stdout
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn npm_install_works_through_the_proxy_with_the_npm_preset() {
    if skip_unless_root("npm through the proxy (a test network)") {
        return;
    }
    if which("npm").is_none() || which("node").is_none() {
        println!("skipped: npm or node not installed");
        return;
    }
    let fx = Fixture::new();
    // The package as `npm pack` lays it out: a gzipped tar of `package/`.
    let src = fx.root.join("npm-src");
    write_file(
        &src.join("package/package.json"),
        format!("{{\"name\":\"{CRATE}\",\"version\":\"1.0.0\",\"main\":\"index.js\"}}\n"),
        0o644,
    );
    write_file(
        &src.join("package/index.js"),
        format!("exports.hello = () => \"{MARKER}\";\n"),
        0o644,
    );
    let tgz = fx.root.join("stkdemo-1.0.0.tgz");
    Cmd::new("tar", &src)
        .arg("czf")
        .arg(&tgz)
        .arg("package")
        .run()
        .assert_success();
    let tarball = format!("/{CRATE}/-/{CRATE}-1.0.0.tgz");
    let packument = format!(
        "{{\"name\":\"{CRATE}\",\"dist-tags\":{{\"latest\":\"1.0.0\"}},\"versions\":{{\"1.0.0\":\
         {{\"name\":\"{CRATE}\",\"version\":\"1.0.0\",\"main\":\"index.js\",\"dist\":\
         {{\"tarball\":\"https://registry.npmjs.org{tarball}\",\"shasum\":\"{}\"}}}}}}}}",
        digest("sha1sum", &tgz)
    );
    let registry = Double::start(
        &["registry.npmjs.org"],
        HashMap::from([
            (format!("/{CRATE}"), packument.into_bytes()),
            (tarball.clone(), std::fs::read(&tgz).expect("the tarball")),
        ]),
    );
    write_file(
        &fx.ws.join("package.json"),
        "{\"name\":\"app\",\"version\":\"1.0.0\"}\n",
        0o644,
    );
    let env = [
        format!("npm_config_cafile={}", registry.site.ca_file.display()),
        "npm_config_update_notifier=false".to_owned(),
    ];
    let script = format!(
        "npm install --no-audit --no-fund {CRATE} && node -e 'console.log(require(\"{CRATE}\").hello())'"
    );

    // The control: npm's cache of its own in the workspace, so that it gets to the network.
    let cache = format!("npm_config_cache={}", fx.ws.join(".npm-cache").display());
    let run = registry.run(&fx, &env, &["--net", "proxy", "--env", &cache], &script);
    registry.assert_refused(&run, "registry.npmjs.org");

    let run = registry.run(&fx, &env, &["--preset", "npm"], &script);
    run.assert_success().assert_stdout_contains(MARKER);
    assert!(read_text(&fx.ws.join("package.json")).is_some_and(|p| p.contains(CRATE)));
    registry.assert_fetched(&[format!("/{CRATE}"), tarball]);
    assert!(fx.home.join(".cache/stockade/npm").is_dir());
    assert!(
        !fx.home.join(".npm").exists(),
        "the host's npm cache was written"
    );
}

/// A wheel of `stkdemo` 1.0 (a zip with the module and its dist-info), written by python3.
const WHEEL: &str = r#"
import sys, zipfile
out, marker = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w") as z:
    z.writestr("stkdemo/__init__.py", f"def hello():\n    return {marker!r}\n")
    d = "stkdemo-1.0.dist-info/"
    z.writestr(d + "METADATA", "Metadata-Version: 2.1\nName: stkdemo\nVersion: 1.0\n")
    z.writestr(d + "WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr(d + "RECORD", f"stkdemo/__init__.py,,\n{d}METADATA,,\n{d}WHEEL,,\n{d}RECORD,,\n")
"#;

#[test]
fn pip_install_works_through_the_proxy_with_the_pip_preset() {
    if skip_unless_root("pip through the proxy (a test network)") {
        return;
    }
    let Some(python) = python3("pip through the proxy") else {
        return;
    };
    let fx = Fixture::new();
    let wheel_name = format!("{CRATE}-1.0-py3-none-any.whl");
    let wheel = fx.root.join(&wheel_name);
    Cmd::new(&python, &fx.root)
        .arg(fx.script("wheel.py", WHEEL))
        .arg(&wheel)
        .arg(MARKER)
        .run()
        .assert_success();
    let download = format!("/packages/{wheel_name}");
    let page = format!(
        "<!DOCTYPE html><html><body><a href=\"https://files.pythonhosted.org{download}#sha256={}\">\
         {wheel_name}</a></body></html>\n",
        digest("sha256sum", &wheel)
    );
    let registry = Double::start(
        &["pypi.org", "files.pythonhosted.org"],
        HashMap::from([
            (format!("/simple/{CRATE}/"), page.into_bytes()),
            (download.clone(), std::fs::read(&wheel).expect("the wheel")),
        ]),
    );
    let env = [
        format!("PIP_CERT={}", registry.site.ca_file.display()),
        "PIP_DISABLE_PIP_VERSION_CHECK=1".to_owned(),
    ];
    let script = format!(
        "{} -m venv .venv && .venv/bin/pip install -q {CRATE} && \
         .venv/bin/python -c 'import {CRATE}; print({CRATE}.hello())'",
        python.display()
    );

    // The control: no cache (pip's default one is in the read-only home).
    let run = registry.run(
        &fx,
        &env,
        &["--net", "proxy", "--env", "PIP_NO_CACHE_DIR=1"],
        &script,
    );
    registry.assert_refused(&run, "pypi.org");

    let run = registry.run(&fx, &env, &["--preset", "pip"], &script);
    run.assert_success().assert_stdout_contains(MARKER);
    registry.assert_fetched(&[format!("/simple/{CRATE}/"), download]);
    assert!(fx.home.join(".cache/stockade/pip").is_dir());
}
