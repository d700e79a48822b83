//! The second filter: calls that create names (and `chmod`) stop and notify a listener, which
//! performs them on the caller's behalf after checking the protected paths (see the `sys`
//! crate's `mediate` module).
//!
//! Written by hand as classic BPF because seccompiler has no `SECCOMP_RET_USER_NOTIF` action.
//! Shape (x86_64 only; the arch guard is repeated so the program stands on its own):
//!
//! ```text
//!   ld  [4]   ; arch      jeq AUDIT_ARCH_X86_64 ? next : kill
//!   ld  [0]   ; nr        jge 0x40000000 ? kill : next
//!   per always-mediated call:   jeq nr ? notify : next
//!   openat2:                    jeq nr ? errno ENOSYS : next   (flags live in user memory)
//!   setxattr family:            jeq nr ? errno EOPNOTSUPP : next   (ACLs would undo chmod checks)
//!   open:   jeq nr ? (ld args[1]; jset O_CREAT ? notify : allow) : next
//!   openat: jeq nr ? (ld args[2]; jset O_CREAT ? notify : allow) : next
//!   with an allocation watch of T bytes (memory limited by `RLIMIT_DATA` only):
//!   mmap:   jeq nr ? (prot has PROT_WRITE and len >= T ? notify : allow) : next
//!   mremap: jeq nr ? (new_len >= T ? notify : allow) : next
//!   ret allow
//! ```
//!
//! `O_CREAT` is tested on the low 32 bits, which is what the kernel uses (`int flags`). Sizes
//! are 64-bit: a non-zero high half counts as at least `T`, and `T` is capped at 4 GiB - 1.
//!
//! The allocation watch is for reporting only: the kernel enforces `RLIMIT_DATA` either way,
//! but it leaves no trace when it refuses an allocation. The init sees the large allocations
//! (the ones that cross a limit in one step: `bytearray(1 << 30)`, a buffer doubled past it)
//! and reports those that the limit refuses; small ones that cross it fail silently, as
//! before.

use seccompiler::sock_filter;

use crate::{
    jump, stmt, SeccompError, AUDIT_ARCH_X86_64, BPF_ABS, BPF_JEQ, BPF_JGE, BPF_JMP, BPF_K, BPF_LD,
    BPF_RET, BPF_W, SECCOMP_DATA_ARCH_OFFSET, SECCOMP_DATA_NR_OFFSET, X32_SYSCALL_BIT,
};

const BPF_JSET: u16 = 0x40;
/// `offsetof(struct seccomp_data, args)`; each argument is 8 bytes, low half first.
const SECCOMP_DATA_ARGS_OFFSET: u32 = 16;

/// x86_64 numbers the `libc` crate lacks.
const NR_FCHMODAT2: u32 = 452;
const NR_SETXATTRAT: u32 = 463;
const NR_OPENAT2: u32 = 437;

/// One mediated or refused call, for the plan JSON and docs.
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
pub struct Mediated {
    pub syscall: &'static str,
    pub when: &'static str,
    pub action: &'static str,
}

const ALWAYS: &[(&str, i64)] = &[
    ("creat", libc::SYS_creat),
    ("mkdir", libc::SYS_mkdir),
    ("mkdirat", libc::SYS_mkdirat),
    ("mknod", libc::SYS_mknod),
    ("mknodat", libc::SYS_mknodat),
    ("symlink", libc::SYS_symlink),
    ("symlinkat", libc::SYS_symlinkat),
    ("link", libc::SYS_link),
    ("linkat", libc::SYS_linkat),
    ("rename", libc::SYS_rename),
    ("renameat", libc::SYS_renameat),
    ("renameat2", libc::SYS_renameat2),
    ("chmod", libc::SYS_chmod),
    ("fchmod", libc::SYS_fchmod),
    ("fchmodat", libc::SYS_fchmodat),
    ("fchmodat2", NR_FCHMODAT2 as i64),
];

const XATTR_SETTERS: &[(&str, i64)] = &[
    ("setxattr", libc::SYS_setxattr),
    ("lsetxattr", libc::SYS_lsetxattr),
    ("fsetxattr", libc::SYS_fsetxattr),
    ("setxattrat", NR_SETXATTRAT as i64),
];

/// What the mediation filter does, call by call; `watch` is the allocation watch's threshold
/// (see [`build_mediation`]).
pub fn mediated_calls(watch: Option<u64>) -> Vec<Mediated> {
    let mut out: Vec<Mediated> = ALWAYS
        .iter()
        .map(|(name, _)| Mediated {
            syscall: name,
            when: "always",
            action: "performed by the sandbox init after the protected-path check",
        })
        .collect();
    for (name, arg) in [("open", "arg1"), ("openat", "arg2")] {
        out.push(Mediated {
            syscall: name,
            when: if arg == "arg1" {
                "arg1 (flags) has O_CREAT"
            } else {
                "arg2 (flags) has O_CREAT"
            },
            action: "performed by the sandbox init after the protected-path check",
        });
    }
    out.push(Mediated {
        syscall: "openat2",
        when: "always",
        action: "errno ENOSYS (its flags are in memory; callers fall back to openat)",
    });
    for (name, _) in XATTR_SETTERS {
        out.push(Mediated {
            syscall: name,
            when: "always",
            action: "errno EOPNOTSUPP (an ACL could grant back the write bit chmod may not)",
        });
    }
    if watch.is_some() {
        let action = "checked by the sandbox init against RLIMIT_DATA: refused with ENOMEM and reported when over it, else continued";
        out.push(Mediated {
            syscall: "mmap",
            when: "writable and at least the allocation watch's size",
            action,
        });
        out.push(Mediated {
            syscall: "mremap",
            when: "new size at least the allocation watch's size",
            action,
        });
    }
    out
}

/// Six instructions: `then` when the 64-bit argument `arg` is at least `t` (a non-zero high
/// half counts as at least), else `otherwise`.
fn size_at_least(arg: u32, t: u32, then: sock_filter, otherwise: sock_filter) -> [sock_filter; 6] {
    let lo = SECCOMP_DATA_ARGS_OFFSET + 8 * arg;
    [
        stmt(BPF_LD | BPF_W | BPF_ABS, lo + 4),
        jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2),
        stmt(BPF_LD | BPF_W | BPF_ABS, lo),
        jump(BPF_JMP | BPF_JGE | BPF_K, t, 0, 1),
        then,
        otherwise,
    ]
}

/// Build the mediation program. `watch`: also notify writable `mmap`s and `mremap`s of at
/// least that many bytes (the allocation watch, for runs whose memory limit is
/// `RLIMIT_DATA`).
pub fn build_mediation(watch: Option<u64>) -> Result<Vec<sock_filter>, SeccompError> {
    if !cfg!(target_arch = "x86_64") {
        return Err(SeccompError::UnsupportedArch {
            arch: std::env::consts::ARCH,
        });
    }
    let notify = libc::SECCOMP_RET_USER_NOTIF;
    let allow = libc::SECCOMP_RET_ALLOW;
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA);
    let ret = |k: u32| stmt(BPF_RET | BPF_K, k);
    let mut p = vec![
        stmt(BPF_LD | BPF_W | BPF_ABS, SECCOMP_DATA_ARCH_OFFSET),
        jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        ret(libc::SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD | BPF_W | BPF_ABS, SECCOMP_DATA_NR_OFFSET),
        jump(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1),
        ret(libc::SECCOMP_RET_KILL_PROCESS),
    ];
    let on = |p: &mut Vec<sock_filter>, nr: i64, action: u32| {
        p.push(jump(BPF_JMP | BPF_JEQ | BPF_K, nr as u32, 0, 1));
        p.push(ret(action));
    };
    for (_, nr) in ALWAYS {
        on(&mut p, *nr, notify);
    }
    on(&mut p, NR_OPENAT2 as i64, errno(libc::ENOSYS));
    for (_, nr) in XATTR_SETTERS {
        on(&mut p, *nr, errno(libc::EOPNOTSUPP));
    }
    if let Some(t) = watch {
        let t = u32::try_from(t).unwrap_or(u32::MAX);
        let size_at_least = |arg: u32| size_at_least(arg, t, ret(notify), ret(allow));
        // mmap(addr, len, prot, flags, fd, off): nine instructions; without PROT_WRITE the
        // jset skips to the tail's last one (allow).
        p.push(jump(BPF_JMP | BPF_JEQ | BPF_K, libc::SYS_mmap as u32, 0, 8));
        p.push(stmt(
            BPF_LD | BPF_W | BPF_ABS,
            SECCOMP_DATA_ARGS_OFFSET + 8 * 2,
        ));
        p.push(jump(
            BPF_JMP | BPF_JSET | BPF_K,
            libc::PROT_WRITE as u32,
            0,
            5,
        ));
        p.extend(size_at_least(1));
        // mremap(old, old_len, new_len, flags, new_addr): seven instructions.
        p.push(jump(
            BPF_JMP | BPF_JEQ | BPF_K,
            libc::SYS_mremap as u32,
            0,
            6,
        ));
        p.extend(size_at_least(2));
    }
    for (nr, arg) in [(libc::SYS_open, 1u32), (libc::SYS_openat, 2u32)] {
        p.push(jump(BPF_JMP | BPF_JEQ | BPF_K, nr as u32, 0, 4));
        p.push(stmt(
            BPF_LD | BPF_W | BPF_ABS,
            SECCOMP_DATA_ARGS_OFFSET + 8 * arg,
        ));
        p.push(jump(BPF_JMP | BPF_JSET | BPF_K, libc::O_CREAT as u32, 0, 1));
        p.push(ret(notify));
        p.push(ret(allow));
    }
    p.push(ret(allow));
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny classic-BPF interpreter for the instructions the program uses.
    fn run(p: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = &p[pc];
            match i.code {
                c if c == BPF_LD | BPF_W | BPF_ABS => {
                    let k = i.k as usize;
                    acc = u32::from_ne_bytes([data[k], data[k + 1], data[k + 2], data[k + 3]]);
                    pc += 1;
                }
                c if c == BPF_RET | BPF_K => return i.k,
                c => {
                    let taken = match c & 0xf0 {
                        BPF_JEQ => acc == i.k,
                        BPF_JGE => acc >= i.k,
                        BPF_JSET => acc & i.k != 0,
                        other => panic!("unexpected op {other:#x}"),
                    };
                    pc += 1 + if taken { i.jt } else { i.jf } as usize;
                }
            }
        }
    }

    #[test]
    fn creating_calls_notify_and_others_pass() {
        let p = build_mediation(None).unwrap();
        let x86 = AUDIT_ARCH_X86_64;
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let allow = libc::SECCOMP_RET_ALLOW;
        let creat = libc::O_CREAT as u64;
        assert_eq!(run(&p, x86, libc::SYS_mkdir as u32, [0; 6]), notify);
        assert_eq!(run(&p, x86, libc::SYS_renameat2 as u32, [0; 6]), notify);
        assert_eq!(run(&p, x86, NR_FCHMODAT2, [0; 6]), notify);
        assert_eq!(
            run(&p, x86, libc::SYS_open as u32, [0, creat | 1, 0, 0, 0, 0]),
            notify
        );
        assert_eq!(
            run(&p, x86, libc::SYS_open as u32, [0, 1, 0, 0, 0, 0]),
            allow
        );
        assert_eq!(
            run(&p, x86, libc::SYS_openat as u32, [0, 0, creat, 0, 0, 0]),
            notify
        );
        // The flags of openat are arg2; O_CREAT in arg1 (the path pointer) means nothing.
        assert_eq!(
            run(&p, x86, libc::SYS_openat as u32, [0, creat, 0, 0, 0, 0]),
            allow
        );
        // High bits are ignored by the kernel and by the check.
        let high = (1u64 << 32) | creat;
        assert_eq!(
            run(&p, x86, libc::SYS_openat as u32, [0, 0, high, 0, 0, 0]),
            notify
        );
        assert_eq!(run(&p, x86, libc::SYS_read as u32, [0; 6]), allow);
        assert_eq!(run(&p, x86, libc::SYS_unlink as u32, [0; 6]), allow);
        assert_eq!(
            run(&p, x86, NR_OPENAT2, [0; 6]),
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(
            run(&p, x86, libc::SYS_fsetxattr as u32, [0; 6]),
            libc::SECCOMP_RET_ERRNO | libc::EOPNOTSUPP as u32
        );
        assert_eq!(
            run(&p, 0x4000_0003, libc::SYS_mkdir as u32, [0; 6]),
            libc::SECCOMP_RET_KILL_PROCESS
        );
        assert_eq!(
            run(&p, x86, X32_SYSCALL_BIT | libc::SYS_mkdir as u32, [0; 6]),
            libc::SECCOMP_RET_KILL_PROCESS
        );
        assert_eq!(
            mediated_calls(None).len(),
            ALWAYS.len() + 2 + 1 + XATTR_SETTERS.len()
        );
        // No allocation watch: mmap and mremap pass whatever their size.
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        assert_eq!(
            run(&p, x86, libc::SYS_mmap as u32, [0, 1 << 40, rw, 0, 0, 0]),
            allow
        );
    }

    #[test]
    fn allocation_watch_notifies_large_writable_mappings() {
        let t = 16u64 << 20;
        let p = build_mediation(Some(t)).unwrap();
        let x86 = AUDIT_ARCH_X86_64;
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let allow = libc::SECCOMP_RET_ALLOW;
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let mmap = |len: u64, prot: u64| {
            run(
                &p,
                x86,
                libc::SYS_mmap as u32,
                [0, len, prot, 0x22, u64::MAX, 0],
            )
        };
        assert_eq!(mmap(t, rw), notify);
        assert_eq!(mmap(1 << 30, rw), notify);
        assert_eq!(mmap(t - 1, rw), allow);
        assert_eq!(mmap(4096, rw), allow);
        // A size whose low half is small but high half is not.
        assert_eq!(mmap((1 << 32) | 5, rw), notify);
        // Reservations without write access are not data until made writable.
        assert_eq!(mmap(1 << 30, libc::PROT_NONE as u64), allow);
        assert_eq!(mmap(1 << 30, libc::PROT_READ as u64), allow);
        let mremap =
            |old: u64, new: u64| run(&p, x86, libc::SYS_mremap as u32, [0, old, new, 1, 0, 0]);
        assert_eq!(mremap(1 << 20, 1 << 30), notify);
        assert_eq!(mremap(1 << 20, 2 << 20), allow);
        assert_eq!(mremap(0, 1 << 33), notify);
        // The rest of the program is unchanged.
        assert_eq!(run(&p, x86, libc::SYS_mkdir as u32, [0; 6]), notify);
        assert_eq!(run(&p, x86, libc::SYS_read as u32, [0; 6]), allow);
        let creat = libc::O_CREAT as u64;
        assert_eq!(
            run(&p, x86, libc::SYS_openat as u32, [0, 0, creat, 0, 0, 0]),
            notify
        );
        // Watches above 4 GiB are capped there.
        let p = build_mediation(Some(1 << 40)).unwrap();
        let big = run(
            &p,
            x86,
            libc::SYS_mmap as u32,
            [0, u32::MAX as u64, rw, 0x22, 0, 0],
        );
        assert_eq!(big, notify);
        assert_eq!(
            mediated_calls(Some(t)).len(),
            mediated_calls(None).len() + 2
        );
    }
}
