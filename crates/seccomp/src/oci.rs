//! The deny-list as an OCI seccomp profile (the `linux.seccomp` object of a runtime config,
//! the format of `docker run --security-opt seccomp=FILE` and Podman's): the container
//! backends give their containers the same refusals as the native backend's filter, from the
//! same table.
//!
//! Every argument check compares the low 32 bits, as the BPF program does: an equality is a
//! masked one (`(arg & 0xffffffff) == value`), a bit test one masked comparison per bit.

use serde_json::{json, Value};

use crate::{table, Check, Match};

const LOW32: u64 = 0xffff_ffff;

fn masked(index: u8, mask: u64, value: u64) -> Value {
    json!({ "index": index, "value": mask, "valueTwo": value, "op": "SCMP_CMP_MASKED_EQ" })
}

fn rule(name: &str, errno: i32, args: Vec<Value>) -> Value {
    let mut r = json!({ "names": [name], "action": "SCMP_ACT_ERRNO", "errnoRet": errno });
    if !args.is_empty() {
        r["args"] = Value::Array(args);
    }
    r
}

/// The deny-list's rules, in OCI form (allow is the default).
pub fn oci_rules() -> Vec<Value> {
    let mut out = Vec::new();
    for entry in table() {
        let Check::Compiled { matches, errno, .. } = entry.check else {
            continue;
        };
        let name = entry.rule.syscall;
        match matches {
            Match::Always => out.push(rule(name, errno, Vec::new())),
            Match::AnyBit { arg, bits } => {
                for bit in bits {
                    out.push(rule(name, errno, vec![masked(arg, *bit, *bit)]));
                }
            }
            Match::Equals { arg, value } => {
                out.push(rule(name, errno, vec![masked(arg, LOW32, value)]))
            }
            Match::OutsideSocketTypes {
                domain,
                type_mask,
                types,
            } => {
                // Another domain (any bit above the low 32 set counts as another: refused).
                out.push(rule(
                    name,
                    errno,
                    vec![json!({ "index": 0, "value": domain, "op": "SCMP_CMP_NE" })],
                ));
                // The domain, with a type outside the allowed ones.
                for t in (0..=type_mask).filter(|t| !types.contains(t)) {
                    out.push(rule(
                        name,
                        errno,
                        vec![masked(0, LOW32, domain), masked(1, type_mask, t)],
                    ));
                }
            }
        }
    }
    out
}

/// A whole profile: allow by default, x86_64 only (other ABIs, x32 included, are not in
/// it: the runtime kills their calls), the deny-list and `extra` rules.
pub fn oci_profile(extra: Vec<Value>) -> Value {
    let mut rules = oci_rules();
    rules.extend(extra);
    json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": rules,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_compiled_row_of_the_table_is_in_the_profile() {
        let rules = oci_rules();
        let named = |n: &str| rules.iter().filter(|r| r["names"][0] == n).count();
        for entry in table() {
            if let Check::Compiled { .. } = entry.check {
                assert!(named(entry.rule.syscall) > 0, "{}", entry.rule.syscall);
            }
        }
        // A Unix socket is refused whole: socket(AF_UNIX, ...) on the low 32 bits.
        assert!(rules.iter().any(|r| r["names"][0] == "socket"
            && r["args"][0]["valueTwo"] == libc::AF_UNIX as u64
            && r["args"][0]["value"] == LOW32));
        // socketpair: another domain, or a datagram or raw pair, refused; stream allowed.
        let pairs: Vec<&Value> = rules
            .iter()
            .filter(|r| r["names"][0] == "socketpair")
            .collect();
        assert!(pairs.iter().any(|r| r["args"][0]["op"] == "SCMP_CMP_NE"));
        let types: Vec<u64> = (pairs.iter())
            .filter_map(|r| r["args"][1]["valueTwo"].as_u64())
            .collect();
        assert!(types.contains(&(libc::SOCK_DGRAM as u64)));
        assert!(!types.contains(&(libc::SOCK_STREAM as u64)));
        assert!(!types.contains(&(libc::SOCK_SEQPACKET as u64)));
    }
}
