//! The backend seam holds (issue 33, item 1): the contract crate holds types only, no backend
//! imports another, the front end reaches everything through the library, and one file of
//! the pipeline chooses the backend. A dependency or a match on a backend's name added
//! elsewhere fails here.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The names under `[dependencies]` of `crates/NAME/Cargo.toml`.
fn dependencies(name: &str) -> Vec<String> {
    let text = fs::read_to_string(root().join("crates").join(name).join("Cargo.toml"))
        .expect("the crate's Cargo.toml");
    let mut inside = false;
    let mut deps = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if inside && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
            deps.push(name.to_string());
        }
    }
    deps
}

#[test]
fn the_contract_crate_holds_types_and_depends_on_no_mechanism() {
    let deps = dependencies("sandbox");
    for d in &deps {
        assert!(
            ["serde", "sanitize", "thiserror", "libc"].contains(&d.as_str()),
            "sandbox depends on {d}: the contract holds types, not machinery (the relay and the terminal are `stream`'s)"
        );
    }
}

#[test]
fn no_backend_imports_another_and_the_cli_reaches_only_the_library() {
    let backends = ["native", "gvisor", "container"];
    for b in backends {
        let deps = dependencies(b);
        for other in backends.iter().filter(|o| **o != b) {
            assert!(!deps.iter().any(|d| d == other), "{b} depends on {other}");
        }
    }
    let cli = dependencies("stockade-cli");
    for past in [
        "native",
        "gvisor",
        "container",
        "workspace",
        "guard",
        "sys",
        "stream",
    ] {
        assert!(
            !cli.iter().any(|d| d == past),
            "stockade-cli depends on {past}: reach it through the stockade library"
        );
    }
    // Control: the parser sees the dependencies that are there.
    assert!(cli.iter().any(|d| d == "stockade"), "{cli:?}");
    assert!(dependencies("gvisor").iter().any(|d| d == "sandbox"));
}

/// Every `.rs` file below `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).expect("a source directory").flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn one_file_of_the_pipeline_chooses_the_backend() {
    let src = root().join("crates/stockade/src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut choosers = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).expect("a source file");
        if [
            "BackendName::Gvisor",
            "gvisor::",
            "BackendName::Podman",
            "BackendName::Docker",
            "container::",
        ]
        .iter()
        .any(|name| text.contains(name))
        {
            choosers.push(f.strip_prefix(&src).unwrap_or(f).display().to_string());
        }
    }
    assert_eq!(
        choosers,
        ["backend.rs"],
        "only backend.rs may name a backend; the stages read its traits"
    );
}
