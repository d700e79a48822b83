use super::*;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_EPERM: u32 = 0x0005_0000 | 1;
const RET_ENOSYS: u32 = 0x0005_0000 | 38;
const ARCH_X86_64: u32 = 0xc000_003e;
const ARCH_I386: u32 = 0x4000_0003;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The guard, spelled out with literal numbers rather than the crate's constants.
fn expected_guard() -> Vec<sock_filter> {
    vec![
        insn(0x20, 0, 0, 4),                // ld [4] (arch)
        insn(0x15, 1, 0, ARCH_X86_64),      // jeq AUDIT_ARCH_X86_64
        insn(0x06, 0, 0, RET_KILL_PROCESS), // ret KILL_PROCESS
        insn(0x20, 0, 0, 0),                // ld [0] (nr)
        insn(0x35, 0, 1, 0x4000_0000),      // jge x32 bit
        insn(0x06, 0, 0, RET_KILL_PROCESS), // ret KILL_PROCESS
    ]
}

use crate::interpret::run;

fn call(nr: i64, args: [u64; 6]) -> u32 {
    let program = build_default().unwrap();
    run(
        program.instructions(),
        ARCH_X86_64,
        i32::try_from(nr).unwrap(),
        args,
    )
}

#[test]
fn program_starts_with_exact_guard() {
    let program = build_default().unwrap();
    assert!(!program.is_empty());
    assert_eq!(program.len(), program.instructions().len());
    assert_eq!(&program.instructions()[..GUARD_LEN], &expected_guard()[..]);
    assert_eq!(guard_prefix().to_vec(), expected_guard());
}

/// The program as it was compiled before the search: the guard with a `clone3` check, then
/// seccompiler's chain of compares for the EPERM rows (Allow by default). An independent
/// compiler of the same table, kept as the reference the search must agree with.
fn seccompiler_reference() -> Vec<sock_filter> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let rule = |arg: u8, op: SeccompCmpOp, value: u64| {
        let c = SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).unwrap();
        SeccompRule::new(vec![c]).unwrap()
    };
    // An empty chain = denied on every call; it wins over conditional rows.
    let mut chains: std::collections::BTreeMap<i64, Option<Vec<SeccompRule>>> =
        std::collections::BTreeMap::new();
    for entry in table() {
        let Check::Compiled {
            nr, matches, errno, ..
        } = entry.check
        else {
            continue;
        };
        if errno != libc::EPERM {
            continue; // clone3, in the prefix below
        }
        let rules = match matches {
            Match::Always => None,
            Match::AnyBit { arg, bits } => Some(
                bits.iter()
                    .map(|&bit| rule(arg, SeccompCmpOp::MaskedEq(bit), bit))
                    .collect(),
            ),
            Match::Equals { arg, value } => Some(vec![rule(arg, SeccompCmpOp::Eq, value)]),
            // Denied when the domain differs or the masked type is any other value.
            Match::OutsideSocketTypes {
                domain,
                type_mask,
                types,
            } => Some(
                std::iter::once(rule(0, SeccompCmpOp::Ne, domain))
                    .chain(
                        (0..=type_mask)
                            .filter(|t| !types.contains(t))
                            .map(|t| rule(1, SeccompCmpOp::MaskedEq(type_mask), t)),
                    )
                    .collect(),
            ),
        };
        let slot = chains.entry(nr.unwrap()).or_insert(Some(Vec::new()));
        match (slot.as_mut(), rules) {
            (_, None) => *slot = None,
            (Some(existing), Some(more)) => existing.extend(more),
            (None, Some(_)) => {}
        }
    }
    let rules = chains
        .into_iter()
        .map(|(nr, chain)| (nr, chain.unwrap_or_default()))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        TargetArch::x86_64,
    )
    .unwrap();
    let mut program = expected_guard();
    program.push(insn(0x15, 0, 1, 435)); // jeq __NR_clone3
    program.push(insn(0x06, 0, 0, RET_ENOSYS));
    program.extend(BpfProgram::try_from(filter).unwrap());
    program
}

/// Argument vectors worth trying for a call: all zero, each single bit of the low and high
/// half of each of the first three arguments, the values the table compares with (alone,
/// with high bits, with neighbours) and pseudo-random ones.
fn argument_samples() -> Vec<[u64; 6]> {
    let mut out = vec![[0u64; 6], [u64::MAX; 6]];
    let mut values: Vec<u64> = (0..64).map(|b| 1u64 << b).collect();
    for entry in table() {
        if let Check::Compiled { matches, .. } = entry.check {
            match matches {
                Match::Always => {}
                Match::AnyBit { bits, .. } => {
                    let any = bits.iter().fold(0, |a, b| a | b);
                    values.extend([any, any | (1 << 40), !any, !any & 0xffff_ffff]);
                }
                Match::Equals { value, .. } => {
                    values.extend([value, value | (0xdead << 32), value + 1, value - 1]);
                }
                Match::OutsideSocketTypes { domain, types, .. } => {
                    values.extend([domain, domain | (0xdead << 32), domain + 1]);
                    for &t in types {
                        let flags = (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u64;
                        values.extend([t, t | flags, t | (1 << 40), t + 1]);
                    }
                }
            }
        }
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        values.push(x);
        values.push(x & 0xffff);
    }
    for arg in 0..3 {
        for &v in &values {
            let mut args = [0u64; 6];
            args[arg] = v;
            out.push(args);
        }
    }
    // Pairs for the rows that look at two arguments: a socket domain with each type.
    let domains = [libc::AF_UNIX as u64, libc::AF_INET as u64, 1 | (7 << 32)];
    for domain in domains {
        for t in 0..20u64 {
            for flags in [
                0,
                (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u64,
                0xdead << 32,
            ] {
                out.push([domain, t | flags, 0, 0, 0, 0]);
            }
        }
    }
    out
}

/// The syscall numbers the table's compiled rows name.
fn listed_numbers() -> Vec<i64> {
    table()
        .iter()
        .filter_map(|e| match e.check {
            Check::Compiled { nr, .. } => nr,
            Check::Guard => None,
        })
        .collect()
}

#[test]
fn the_search_agrees_with_seccompilers_chain() {
    let reference = seccompiler_reference();
    let program = build_default().unwrap();
    let p = program.instructions();
    assert!(
        p.len() * 2 < reference.len(),
        "{} vs {} instructions",
        p.len(),
        reference.len()
    );
    let samples = argument_samples();
    let listed = listed_numbers();
    let mut numbers: Vec<i32> = (-3..1024).collect();
    numbers.extend([0x3fff_ffff, 0x4000_0000, 0x4000_0065, i32::MAX, i32::MIN]);
    for arch in [ARCH_X86_64, ARCH_I386, 0] {
        for &nr in &numbers {
            // Every argument sample for the calls the table names, a few for the others.
            let args: &[[u64; 6]] = if listed.contains(&i64::from(nr)) {
                &samples
            } else {
                &samples[..2]
            };
            for &a in args {
                assert_eq!(
                    run(p, arch, nr, a),
                    run(&reference, arch, nr, a),
                    "arch {arch:#x} nr {nr} args {a:x?}"
                );
            }
        }
    }
}

/// Of two seccomp actions, the one the kernel applies when two filters disagree (the lower
/// action value, read as signed: KILL_PROCESS first, ALLOW last).
fn stronger(a: u32, b: u32) -> u32 {
    if ((a & 0xffff_0000) as i32) <= ((b & 0xffff_0000) as i32) {
        a
    } else {
        b
    }
}

#[test]
fn one_program_does_what_the_two_filters_did() {
    for watch in [None, Some(16u64 << 20)] {
        let both = build_with_mediation(watch).unwrap();
        let deny = build_default().unwrap();
        let mediation = build_mediation(watch).unwrap();
        assert!(both.len() < deny.len() + mediation.len());
        let samples = argument_samples();
        let creat = libc::O_CREAT as u64;
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let mut extra = vec![
            [0, creat, 0, 0, 0, 0],
            [0, 0, creat, 0, 0, 0],
            [0, 1 << 30, rw, 0x22, 0, 0],
            [0, 1 << 20, 1 << 30, 1, 0, 0],
        ];
        extra.extend(samples);
        for arch in [ARCH_X86_64, ARCH_I386] {
            for nr in (-3..1024).chain([0x4000_0002, 0x3fff_ffff]) {
                for &a in &extra {
                    let want = stronger(
                        run(deny.instructions(), arch, nr, a),
                        run(&mediation, arch, nr, a),
                    );
                    assert_eq!(
                        run(both.instructions(), arch, nr, a),
                        want,
                        "watch {watch:?} arch {arch:#x} nr {nr} args {a:x?}"
                    );
                }
            }
        }
    }
}

#[test]
fn build_is_deterministic() {
    assert_eq!(build_default().unwrap(), build_default().unwrap());
    assert_eq!(default_rules(), default_rules());
}

#[test]
fn default_rules_name_everything_denied() {
    let rules = default_rules();
    let names: Vec<&str> = rules.iter().map(|r| r.syscall).collect();
    for name in [
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "move_mount",
        "open_tree",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
        "setns",
        "keyctl",
        "add_key",
        "request_key",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "acct",
        "swapon",
        "swapoff",
        "reboot",
        "syslog",
        "settimeofday",
        "clock_settime",
        "clock_adjtime",
        "adjtimex",
        "quotactl",
        "open_by_handle_at",
        "name_to_handle_at",
        "lookup_dcookie",
        "iopl",
        "ioperm",
        "fanotify_init",
        "pidfd_getfd",
        "vhangup",
        "unshare",
        "clone",
        "clone3",
        "ioctl",
        "socket",
        "socketpair",
    ] {
        assert!(names.contains(&name), "{name} missing from default_rules()");
    }
    for allowed in ["personality", "fork", "execve"] {
        assert!(!names.contains(&allowed), "{allowed} must not be denied");
    }
    for rule in &rules {
        assert!(
            ["errno EPERM", "errno ENOSYS", "kill process"].contains(&rule.action),
            "{rule:?}"
        );
        assert!(!rule.when.is_empty() && !rule.why.is_empty(), "{rule:?}");
    }
    let clone3 = rules.iter().find(|r| r.syscall == "clone3").unwrap();
    assert_eq!(clone3.action, "errno ENOSYS");
    assert_eq!(clone3.when, "always");
    assert_eq!(
        rules.iter().filter(|r| r.action == "kill process").count(),
        2
    );
    let ptrace = rules.iter().find(|r| r.syscall == "ptrace").unwrap();
    assert_eq!((ptrace.when, ptrace.action), ("always", "errno EPERM"));
}

#[test]
fn rule_serializes_with_its_field_names() {
    let rule = default_rules()
        .into_iter()
        .find(|r| r.syscall == "socket")
        .unwrap();
    let json = serde_json::to_value(&rule).unwrap();
    assert_eq!(json["syscall"], "socket");
    assert_eq!(json["when"], "arg0 (domain) == AF_UNIX");
    assert_eq!(json["action"], "errno EPERM");
    assert!(json["why"].as_str().unwrap().contains("Unix"));
}

#[test]
fn every_table_row_is_enforced_by_the_program() {
    let program = build_default().unwrap();
    for entry in table() {
        let Check::Compiled { nr, matches, errno } = entry.check else {
            continue;
        };
        let nr = i32::try_from(nr.unwrap()).unwrap();
        let expect = |args: [u64; 6]| {
            assert_eq!(
                run(program.instructions(), ARCH_X86_64, nr, args),
                errno_action(errno),
                "{:?} with {args:?}",
                entry.rule
            );
        };
        match matches {
            Match::Always => expect([0; 6]),
            Match::AnyBit { arg, bits } => {
                for &bit in bits {
                    let mut args = [0; 6];
                    args[usize::from(arg)] = bit;
                    expect(args);
                }
            }
            Match::Equals { arg, value } => {
                let mut args = [0; 6];
                args[usize::from(arg)] = value;
                expect(args);
            }
            Match::OutsideSocketTypes {
                domain,
                type_mask,
                types,
            } => {
                expect([domain + 1, types[0], 0, 0, 0, 0]);
                for t in (0..=type_mask).filter(|t| !types.contains(t)) {
                    expect([domain, t, 0, 0, 0, 0]);
                }
            }
        }
    }
}

#[test]
fn interpreter_agrees_with_the_intended_policy() {
    let none = [0u64; 6];
    // Plain calls are allowed.
    assert_eq!(call(libc::SYS_getpid, none), RET_ALLOW);
    assert_eq!(call(libc::SYS_read, none), RET_ALLOW);
    assert_eq!(call(libc::SYS_personality, none), RET_ALLOW);
    assert_eq!(call(libc::SYS_socketpair, [1, 1, 0, 0, 0, 0]), RET_ALLOW);
    // Denied outright.
    assert_eq!(call(libc::SYS_ptrace, none), RET_EPERM);
    assert_eq!(call(libc::SYS_keyctl, none), RET_EPERM);
    // clone3 and the guards.
    assert_eq!(call(libc::SYS_clone3, none), RET_ENOSYS);
    let program = build_default().unwrap();
    let p = program.instructions();
    assert_eq!(run(p, ARCH_I386, 20, none), RET_KILL_PROCESS);
    assert_eq!(run(p, ARCH_X86_64, 0x4000_0027, none), RET_KILL_PROCESS);
    assert_eq!(run(p, ARCH_X86_64, -1, none), RET_KILL_PROCESS);
    assert_eq!(run(p, ARCH_X86_64, 0x3fff_ffff, none), RET_ALLOW);
}

#[test]
fn argument_checks() {
    let sigchld = libc::SIGCHLD as u64;
    let newuser = libc::CLONE_NEWUSER as u64;
    // unshare: namespace bits denied (also mixed with other bits), the rest allowed.
    assert_eq!(call(libc::SYS_unshare, [newuser, 0, 0, 0, 0, 0]), RET_EPERM);
    let mixed = newuser | libc::CLONE_FILES as u64;
    assert_eq!(call(libc::SYS_unshare, [mixed, 0, 0, 0, 0, 0]), RET_EPERM);
    let newtime = libc::CLONE_NEWTIME as u64;
    assert_eq!(call(libc::SYS_unshare, [newtime, 0, 0, 0, 0, 0]), RET_EPERM);
    let files = libc::CLONE_FILES as u64;
    assert_eq!(call(libc::SYS_unshare, [files, 0, 0, 0, 0, 0]), RET_ALLOW);
    // clone: what fork() and pthread_create() pass is allowed.
    assert_eq!(call(libc::SYS_clone, [sigchld, 0, 0, 0, 0, 0]), RET_ALLOW);
    let thread = (libc::CLONE_VM
        | libc::CLONE_FS
        | libc::CLONE_FILES
        | libc::CLONE_SIGHAND
        | libc::CLONE_THREAD
        | libc::CLONE_SYSVSEM
        | libc::CLONE_SETTLS
        | libc::CLONE_PARENT_SETTID
        | libc::CLONE_CHILD_CLEARTID) as u64;
    assert_eq!(call(libc::SYS_clone, [thread, 0, 0, 0, 0, 0]), RET_ALLOW);
    // Exit signal 0x80|SIGCHLD is not CLONE_NEWTIME for clone(2).
    assert_eq!(
        call(libc::SYS_clone, [0x80 | sigchld, 0, 0, 0, 0, 0]),
        RET_ALLOW
    );
    for bit in CLONE_NS_BITS {
        assert_eq!(
            call(libc::SYS_clone, [bit | sigchld, 0, 0, 0, 0, 0]),
            RET_EPERM
        );
    }
    // ioctl: the cmd is compared on its low 32 bits, as the kernel reads it.
    let tiocsti: u64 = 0x5412;
    assert_eq!(call(libc::SYS_ioctl, [0, tiocsti, 0, 0, 0, 0]), RET_EPERM);
    let high = tiocsti | 0xdead_0000_0000;
    assert_eq!(call(libc::SYS_ioctl, [0, high, 0, 0, 0, 0]), RET_EPERM);
    let tioclinux: u64 = 0x541c;
    assert_eq!(call(libc::SYS_ioctl, [0, tioclinux, 0, 0, 0, 0]), RET_EPERM);
    let tcgets: u64 = 0x5401;
    assert_eq!(call(libc::SYS_ioctl, [0, tcgets, 0, 0, 0, 0]), RET_ALLOW);
    // The request in arg0 (the fd) does not matter.
    assert_eq!(call(libc::SYS_ioctl, [tiocsti, 0, 0, 0, 0, 0]), RET_ALLOW);
    // socketpair: AF_UNIX stream and seqpacket pairs (with any flags) are allowed; datagram
    // (and SOCK_RAW, a datagram socket for AF_UNIX), other types and other domains are not.
    let (unix, inet) = (libc::AF_UNIX as u64, libc::AF_INET as u64);
    let flags = (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u64;
    for allowed in [libc::SOCK_STREAM, libc::SOCK_SEQPACKET] {
        let t = allowed as u64;
        for args in [[unix, t, 0, 0, 0, 0], [unix, t | flags, 0, 0, 0, 0]] {
            assert_eq!(call(libc::SYS_socketpair, args), RET_ALLOW, "{args:x?}");
        }
        // The kernel reads int arguments: high bits change nothing.
        let high = [unix | (1 << 32), t | (1 << 40), 0, 0, 0, 0];
        assert_eq!(call(libc::SYS_socketpair, high), RET_ALLOW);
        assert_eq!(call(libc::SYS_socketpair, [inet, t, 0, 0, 0, 0]), RET_EPERM);
    }
    for denied in [
        libc::SOCK_DGRAM,
        libc::SOCK_RAW,
        libc::SOCK_RDM,
        10, // SOCK_PACKET
        0,
        15,
    ] {
        let t = denied as u64;
        for args in [[unix, t, 0, 0, 0, 0], [unix, t | flags, 0, 0, 0, 0]] {
            assert_eq!(call(libc::SYS_socketpair, args), RET_EPERM, "{args:x?}");
        }
    }
    // The domain is not masked: a flag-like bit in it is another domain.
    let odd = [unix | 0x80, libc::SOCK_STREAM as u64, 0, 0, 0, 0];
    assert_eq!(call(libc::SYS_socketpair, odd), RET_EPERM);
    // socket: AF_UNIX denied, others allowed.
    assert_eq!(call(libc::SYS_socket, [1, 1, 0, 0, 0, 0]), RET_EPERM);
    // Only the domain counts: SOCK_STREAM (1) in arg1 does not make AF_INET a Unix socket.
    assert_eq!(call(libc::SYS_socket, [1, 2, 0, 0, 0, 0]), RET_EPERM);
    assert_eq!(call(libc::SYS_socket, [2, 1, 0, 0, 0, 0]), RET_ALLOW);
    assert_eq!(
        call(libc::SYS_socket, [1 | (1 << 32), 1, 0, 0, 0, 0]),
        RET_EPERM
    );
    let inet = libc::AF_INET as u64;
    assert_eq!(call(libc::SYS_socket, [inet, 2, 0, 0, 0, 0]), RET_ALLOW);
    let netlink = libc::AF_NETLINK as u64;
    assert_eq!(call(libc::SYS_socket, [netlink, 3, 0, 0, 0, 0]), RET_ALLOW);
}

#[test]
fn only_listed_syscalls_are_touched() {
    let program = build_default().unwrap();
    let listed = listed_numbers();
    let mut denied = 0;
    for nr in 0..600i32 {
        let got = run(program.instructions(), ARCH_X86_64, nr, [0; 6]);
        if i64::from(nr) == libc::SYS_clone3 {
            assert_eq!(got, RET_ENOSYS);
        } else if listed.contains(&i64::from(nr)) {
            // Conditional rows (unshare, clone, ioctl, socket) allow all-zero arguments;
            // socketpair's allow-list does not (domain 0 is not AF_UNIX).
            assert!(got == RET_EPERM || got == RET_ALLOW, "nr {nr}: {got:#x}");
            denied += usize::from(got == RET_EPERM);
        } else {
            assert_eq!(got, RET_ALLOW, "nr {nr} should be allowed");
        }
    }
    let always = table()
        .iter()
        .filter(|e| {
            matches!(
                e.check,
                Check::Compiled {
                    matches: Match::Always,
                    errno: libc::EPERM,
                    ..
                }
            )
        })
        .count();
    assert_eq!(denied, always + 1);
}

#[test]
fn errors_name_the_problem() {
    let e = SeccompError::UnsupportedArch { arch: "riscv64" };
    assert_eq!(
        e.to_string(),
        "failed to build seccomp filter: unsupported architecture riscv64 (only x86_64 is supported)"
    );
    let e = SeccompError::Overlap { nr: 2 };
    assert_eq!(
        e.to_string(),
        "failed to build seccomp filter: syscall 2 is both denied and mediated"
    );
}
