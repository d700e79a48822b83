//! The proxy's hosts-file lookup (`net::resolve::hosts_lookup`): arbitrary hosts-file text and
//! an arbitrary name.
//!
//! Input: the first line is the name to look up, the rest is the hosts file.
//!
//! Invariants: nothing panics; every address returned is written on a line of the file that
//! names the name (ASCII-case-insensitively) outside a comment; no address is returned twice;
//! the name's ASCII case does not change the answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use net::resolve::hosts_lookup;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (name, hosts) = text.split_once('\n').unwrap_or((&text, ""));
    let found = hosts_lookup(hosts, name);
    for (i, ip) in found.iter().enumerate() {
        assert!(!found[..i].contains(ip), "{ip} twice");
        let listed = hosts.lines().any(|line| {
            let line = line.split('#').next().unwrap_or_default();
            let mut fields = line.split_ascii_whitespace();
            fields.next().and_then(|a| a.parse().ok()) == Some(*ip)
                && fields.any(|n| n.eq_ignore_ascii_case(name))
        });
        assert!(listed, "{ip} is not listed for {name:?}");
    }
    assert_eq!(hosts_lookup(hosts, &name.to_ascii_uppercase()), found);
    assert_eq!(hosts_lookup(hosts, &name.to_ascii_lowercase()), found);
});
