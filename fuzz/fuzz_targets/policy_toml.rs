//! The policy file parser (`policy::parse_policy_file`) and the merge (`policy::resolve`) on
//! arbitrary text and command-line overrides.
//!
//! Input: the policy file's text, then optionally a NUL byte and override lines `KEY VALUE`
//! (`profile`, `allow_write`, `deny_read`, `allow_read`, `env`, `allow_domains`,
//! `deny_domains`, `allow_hosts`, `memory`, `tmp_size`, `output_limit`), as the CLI's flags
//! would give them.
//!
//! Invariants: nothing panics; what `resolve` accepts is usable downstream without further
//! errors: the network rules compile and are in canonical form (canonicalizing again changes
//! nothing), every filesystem pattern expands, and `resolve` and the digest are deterministic.
#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use policy::{NetList, NetRules, Overrides, PathContext};

fuzz_target!(|data: &[u8]| {
    let input = String::from_utf8_lossy(data);
    let (text, lines) = input.split_once('\0').unwrap_or((&input, ""));
    let Ok(file) = policy::parse_policy_file(text, "fuzz.toml") else {
        return;
    };
    let overrides = overrides(lines);
    let Ok(resolved) = policy::resolve(Some(file.clone()), &overrides) else {
        return;
    };
    assert_eq!(
        policy::resolve(Some(file), &overrides).ok().as_ref(),
        Some(&resolved),
        "resolve is not deterministic"
    );
    assert_eq!(policy::digest(&resolved), policy::digest(&resolved.clone()));

    let network = &resolved.network;
    if let Err(e) = NetRules::new(network) {
        panic!("resolve accepted network rules NetRules refuses: {e}");
    }
    for (list, entries) in [
        (NetList::AllowDomains, &network.allow_domains),
        (NetList::DenyDomains, &network.deny_domains),
        (NetList::AllowHosts, &network.allow_hosts),
    ] {
        for entry in entries {
            assert_eq!(
                list.canonicalize(entry).as_ref(),
                Ok(entry),
                "{list:?} entry not canonical"
            );
        }
    }

    // The context `resolve` checks pattern syntax against.
    let ctx = PathContext {
        home: PathBuf::from("/home/user"),
        workspace: PathBuf::from("/workspace"),
        writable_roots: vec![PathBuf::from("/workspace")],
    };
    let fs = &resolved.filesystem;
    for pattern in fs
        .deny_read
        .iter()
        .chain(&fs.allow_read)
        .chain(&fs.allow_write)
        .chain(&fs.deny_write)
    {
        if let Err(e) = policy::expand(pattern, &ctx) {
            panic!("resolve accepted a pattern that does not expand: {e}");
        }
    }
    if let Some(memory) = &resolved.limits.memory {
        let _ = policy::parse_memory(memory);
    }
    if let Some(size) = &resolved.limits.tmp_size {
        let _ = policy::parse_size(size);
    }
});

fn overrides(lines: &str) -> Overrides {
    let mut o = Overrides::default();
    for line in lines.lines() {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        let value = value.to_owned();
        match key {
            "profile" => o.profile = Some(value),
            "allow_write" => o.allow_write.push(value),
            "deny_read" => o.deny_read.push(value),
            "allow_read" => o.allow_read.push(value),
            "env" => o.env.push(value),
            "allow_domains" => o.allow_domains.push(value),
            "deny_domains" => o.deny_domains.push(value),
            "allow_hosts" => o.allow_hosts.push(value),
            "memory" => o.memory = Some(value),
            "tmp_size" => o.tmp_size = Some(value),
            "output_limit" => o.output_limit = Some(value),
            _ => {}
        }
    }
    o
}
