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
        insn(0x15, 0, 1, 435),              // jeq __NR_clone3
        insn(0x06, 0, 0, RET_ENOSYS),       // ret ERRNO|ENOSYS
    ]
}

/// A classic-BPF interpreter for the opcodes seccompiler and the guard use, run over a
/// synthetic `struct seccomp_data`. It also checks the program is well formed (every
/// jump forward and in bounds, every path ends in `ret`).
fn run(program: &[sock_filter], arch: u32, nr: i32, args: [u64; 6]) -> u32 {
    let mut data = Vec::with_capacity(64);
    data.extend_from_slice(&nr.to_le_bytes());
    data.extend_from_slice(&arch.to_le_bytes());
    data.extend_from_slice(&0x1234_5678u64.to_le_bytes());
    for arg in args {
        data.extend_from_slice(&arg.to_le_bytes());
    }
    let mut acc: u32 = 0;
    let mut pc = 0usize;
    loop {
        let i = &program[pc];
        let next = |off: u8| {
            let target = pc + 1 + usize::from(off);
            assert!(target < program.len(), "jump out of bounds at {pc}");
            target
        };
        match i.code {
            0x20 => {
                let k = i.k as usize;
                assert!(
                    k.is_multiple_of(4) && k + 4 <= data.len(),
                    "bad load at {pc}"
                );
                acc = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
                pc = next(0);
            }
            0x54 => {
                acc &= i.k;
                pc = next(0);
            }
            0x05 => {
                let target = pc + 1 + i.k as usize;
                assert!(target < program.len(), "ja out of bounds at {pc}");
                pc = target;
            }
            0x15 => pc = next(if acc == i.k { i.jt } else { i.jf }),
            0x25 => pc = next(if acc > i.k { i.jt } else { i.jf }),
            0x35 => pc = next(if acc >= i.k { i.jt } else { i.jf }),
            0x45 => pc = next(if acc & i.k != 0 { i.jt } else { i.jf }),
            0x06 => return i.k,
            other => panic!("unexpected opcode {other:#x} at {pc}"),
        }
    }
}

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

#[test]
fn compiled_part_follows_the_guard_with_its_own_arch_check() {
    let program = build_default().unwrap();
    let rest = &program.instructions()[GUARD_LEN..];
    assert_eq!(
        &rest[..4],
        &[
            insn(0x20, 0, 0, 4),
            insn(0x15, 1, 0, ARCH_X86_64),
            insn(0x06, 0, 0, RET_KILL_PROCESS),
            insn(0x20, 0, 0, 0),
        ]
    );
    // Prepending must not change what seccompiler produced.
    let compiled = compile(&table()).unwrap();
    assert_eq!(rest, &compiled[..]);
    assert!(program.len() <= MAX_INSTRUCTIONS);
    // The last instruction is the default action: allow.
    assert_eq!(
        program.instructions().last(),
        Some(&insn(0x06, 0, 0, RET_ALLOW))
    );
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
    ] {
        assert!(names.contains(&name), "{name} missing from default_rules()");
    }
    for allowed in ["personality", "socketpair", "fork", "execve"] {
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
        let Check::Compiled { nr, matches } = entry.check else {
            continue;
        };
        let nr = i32::try_from(nr.unwrap()).unwrap();
        let expect = |args: [u64; 6]| {
            assert_eq!(
                run(program.instructions(), ARCH_X86_64, nr, args),
                RET_EPERM,
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
    let listed: Vec<i64> = table()
        .iter()
        .filter_map(|e| match e.check {
            Check::Compiled { nr, .. } => nr,
            Check::Guard => None,
        })
        .collect();
    let mut denied = 0;
    for nr in 0..600i32 {
        let got = run(program.instructions(), ARCH_X86_64, nr, [0; 6]);
        if i64::from(nr) == libc::SYS_clone3 {
            assert_eq!(got, RET_ENOSYS);
        } else if listed.contains(&i64::from(nr)) {
            // Conditional rows (unshare, clone, ioctl, socket) allow all-zero arguments.
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
                    ..
                }
            )
        })
        .count();
    assert_eq!(denied, always);
}

#[test]
fn errors_name_the_problem() {
    let e = SeccompError::UnsupportedArch { arch: "riscv64" };
    assert_eq!(
        e.to_string(),
        "failed to build seccomp filter: unsupported architecture riscv64 (only x86_64 is supported)"
    );
    let e = SeccompError::Compile(seccompiler::BackendError::IdenticalActions);
    assert!(e
        .to_string()
        .starts_with("failed to build seccomp filter: "));
}
