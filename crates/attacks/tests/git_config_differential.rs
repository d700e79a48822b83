//! The creation guard lets the sandbox write a git config only when it "runs nothing"
//! (`protect::git_config::git_config_is_inert`), and rewrite an existing one only when nothing but
//! such keys change. Both read git's syntax with a parser of their own, so they are held
//! against git itself: configs built from tricky pieces (headers followed by more text,
//! quoted and escaped subsections, comments, continuations, keys on header lines, odd
//! spacing) that the check calls inert must, read by `git config --list`, set only keys on
//! its inert list. The red-team pass found `[remote "x"] [core] fsmonitor = ...` this way.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::process::Command;

/// Keys (`section.key`, subsection left out) the check may let through.
const INERT: &[&str] = &[
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.sparsecheckout",
    "core.sparsecheckoutcone",
    "extensions.objectformat",
    "extensions.refstorage",
    "extensions.worktreeconfig",
    "user.name",
    "user.email",
    "init.defaultbranch",
    "branch.remote",
    "branch.merge",
    "branch.rebase",
    "branch.pushremote",
    "remote.url",
    "remote.fetch",
    "remote.pushurl",
    "remote.tagopt",
    "remote.prune",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "fetch.prune",
    "index.sparse",
];

const PIECES: &[&str] = &[
    "[core]",
    "[user]",
    "[remote \"o\"]",
    "[remote \"a]b\"]",
    "[remote \"x\\\"] [core] pager = y\"]",
    "[branch \"m\"]",
    "[core] ",
    "[core]#c",
    "[remote \"o\"] [core]",
    "[remote \"o\"] fsmonitor = x",
    "[remote \"o\"]url=a",
    "[remote \"x\"] [core] fsmonitor = \"touch p\" #]",
    "[user] pager = x ;]",
    "[remote \"o\"]\tuploadpack = x]",
    "[Core]",
    "[core.sub]",
    "[include]",
    "[alias]",
    "\tfilemode = true",
    "\tbare = false",
    "\tname = n",
    "\turl = https://example.invalid/x",
    "\tfsmonitor = touch p",
    "\tpager = less",
    "\thooksPath = h",
    "\tpath = p",
    "url = a \\",
    "  fsmonitor = y",
    "\tname = \"a # b\" ; c",
    "\tname = a \\\"[core]",
    "# comment [core] fsmonitor = x",
    "; [core]",
    "",
    "\tFSMONITOR=1",
    "fsmonitor",
    "\tname=\"x\\",
];

/// A small deterministic generator (xorshift), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The keys git reads from `text`, as `section.key` (subsection dropped), or `None` when git
/// refuses the file.
fn git_keys(dir: &std::path::Path, text: &str) -> Option<Vec<String>> {
    let file = dir.join("config");
    std::fs::write(&file, text).unwrap();
    let out = Command::new("git")
        .args(["config", "--file"])
        .arg(&file)
        .args(["--list", "--name-only"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("run git");
    if !out.status.success() {
        return None;
    }
    let list = String::from_utf8_lossy(&out.stdout);
    Some(
        list.lines()
            .map(|name| {
                let parts: Vec<&str> = name.split('.').collect();
                let (first, last) = (parts[0], parts[parts.len() - 1]);
                format!("{first}.{last}").to_ascii_lowercase()
            })
            .collect(),
    )
}

#[test]
fn configs_the_check_calls_inert_set_only_inert_keys_in_git() {
    if Command::new("git").arg("--version").output().is_err() {
        println!("skipped: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x5eed_cafe_f00d_1234);
    let mut inert_seen = 0;
    for case in 0..1500 {
        let lines = 1 + rng.next() % 5;
        let text: String = (0..lines)
            .map(|_| PIECES[(rng.next() % PIECES.len() as u64) as usize].to_string() + "\n")
            .collect();
        if !protect::git_config::git_config_is_inert(text.as_bytes(), &[]) {
            continue;
        }
        inert_seen += 1;
        let Some(keys) = git_keys(dir.path(), &text) else {
            continue;
        };
        for key in keys {
            assert!(
                INERT.contains(&key.as_str()),
                "case {case}: the check called this config inert, but git reads `{key}` from it:\n{text}"
            );
        }
        // A rewrite from an empty config to this one is the same question.
        assert!(protect::git_config::git_config_rewrite_is_inert(
            b"",
            text.as_bytes(),
            &[]
        ));
    }
    assert!(
        inert_seen > 100,
        "too few inert configs generated: {inert_seen}"
    );
}
