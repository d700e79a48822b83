//! The second filter: calls that create names (and `chmod`) stop and notify a listener, which
//! performs them on the caller's behalf after checking the protected paths (see the `sys`
//! crate's `mediate` module).
//!
//! Written by hand as classic BPF because seccompiler has no `SECCOMP_RET_USER_NOTIF` action.
//! The calls go through the same search as the deny-list (see the `tree` module), after
//! the same architecture guard, so the program stands on its own
//! ([`build_mediation`]) or joins the deny-list in one program
//! ([`crate::build_with_mediation`]):
//!
//! ```text
//!   always-mediated calls:  ret notify
//!   umask:                  ret notify   (observed: the init keeps umasks between calls)
//!   openat2:                ret errno ENOSYS   (flags live in user memory)
//!   setxattr family:        ret errno EOPNOTSUPP   (ACLs would undo chmod checks)
//!   open:    ld args[1]; jset O_PATH ? allow
//!            : jset O_CREAT ? notify
//!            : jset __O_TMPFILE ? allow
//!            : jset O_WRONLY|O_RDWR|O_TRUNC ? notify : allow
//!   openat:  ld args[2]; the same (O_PATH makes the kernel drop every other flag)
//!   with an allocation watch of T bytes (memory limited by `RLIMIT_DATA` only):
//!   mmap:    prot has PROT_WRITE and len >= T ? notify : allow
//!   mremap:  new_len >= T ? notify : allow
//!   anything else: allow
//! ```
//!
//! A review run whose every writable root is its copy-on-write view needs no round trip per
//! created name ([`Creations::SetIdModes`]): there the creating calls pass, except those whose
//! `mode` argument (a plain value) carries a set-user-ID or set-group-ID bit, which still
//! notify (the init refuses or drops the bits as in direct mode); `umask` is still observed.
//!
//! ```text
//!   creat, mknod*, chmod, fchmod*:  ld mode; jset S_ISUID|S_ISGID ? notify : allow
//!   open, openat:  O_CREAT and not O_PATH and mode has S_ISUID|S_ISGID ? notify : allow
//!   mkdir*, symlink*, link*, rename*:  allow   (mkdir drops set-id bits itself)
//! ```
//!
//! A write-open of an existing file stops too: a protected file present at the start is
//! mounted read-only, but a process outside the run (the user's own `git config`, which writes
//! `config.lock` and renames it over `config`) can replace it during the run, and the new file
//! has no mount over it. The init refuses opening a protected file for writing by its name
//! (see the `sys` crate's `mediate` module), whoever made it. `O_TMPFILE` without `O_CREAT`
//! names a directory and makes an unnamed file: it passes, as its `linkat` is mediated.
//!
//! `O_CREAT` is tested on the low 32 bits, which is what the kernel uses (`int flags`). Sizes
//! are 64-bit: a non-zero high half counts as at least `T`, and `T` is capped at 4 GiB - 1.
//!
//! The allocation watch is for reporting only: the kernel enforces `RLIMIT_DATA` either way,
//! but it leaves no trace when it refuses an allocation. The init sees the large allocations
//! (the ones that cross a limit in one step: `bytearray(1 << 30)`, a buffer doubled past it)
//! and reports those that the limit refuses; small ones that cross it fail silently, as
//! before.

use std::collections::BTreeMap;

use crate::tree::Leaf;
use crate::{
    errno_action, guarded, jump, load_arg, sock_filter, stmt, syscall_nr, SeccompError, BPF_ABS,
    BPF_JEQ, BPF_JGE, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET, BPF_W, SECCOMP_DATA_ARGS_OFFSET,
};

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
    // A protected file made again during the run by someone else is not cut by name either.
    ("truncate", libc::SYS_truncate),
];

/// Calls the init only observes: it lets them go on (their arguments are plain values).
/// `umask`: the init keeps each task's umask between calls and must see every change.
const OBSERVED: &[(&str, i64)] = &[("umask", libc::SYS_umask)];

const XATTR_SETTERS: &[(&str, i64)] = &[
    ("setxattr", libc::SYS_setxattr),
    ("lsetxattr", libc::SYS_lsetxattr),
    ("fsetxattr", libc::SYS_fsetxattr),
    ("setxattrat", NR_SETXATTRAT as i64),
];

/// Calls that make shared memory, whose pages `RLIMIT_DATA` does not count: refused when that
/// rlimit is what bounds a run's memory (a memory cgroup counts them).
const SHARED_MEMORY: &[(&str, i64)] = &[
    ("memfd_create", libc::SYS_memfd_create),
    ("memfd_secret", libc::SYS_memfd_secret),
    ("shmget", libc::SYS_shmget),
];

/// Which name-creating calls stop for the init (the plan decides, see `native::plan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Creations {
    /// Every one: a protected path must not appear in a writable root, not even for a moment
    /// (direct mode, and any run with a writable root that is not a review view). The default.
    #[default]
    All,
    /// Only those whose `mode` argument carries a set-user-ID or set-group-ID bit: every
    /// writable root is a review run's view, whose writes reach the host only through
    /// `stockade apply`, which flags what the creation guard refuses.
    SetIdModes,
}

/// The position of the `mode` argument of the calls that take one.
const MODE_ARG: &[(i64, u8)] = &[
    (libc::SYS_creat, 1),
    (libc::SYS_mknod, 1),
    (libc::SYS_mknodat, 2),
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (NR_FCHMODAT2 as i64, 2),
];

/// `S_ISUID | S_ISGID`.
const SET_ID: u32 = 0o6000;

/// The flags of an `open` that may change an existing file's content.
const WRITES: u32 = (libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC) as u32;
/// `__O_TMPFILE` (`O_TMPFILE` without `O_DIRECTORY`).
const O_TMPFILE_BIT: u32 = 0o20_000_000;

/// What the mediation filter does, call by call; `watch` is the allocation watch's threshold
/// (see [`build_mediation`]).
pub fn mediated_calls(watch: Option<u64>) -> Vec<Mediated> {
    mediated_calls_for(watch, Creations::All)
}

/// [`mediated_calls`] for the filter of [`crate::build_with_mediation_for`].
pub fn mediated_calls_for(watch: Option<u64>, creations: Creations) -> Vec<Mediated> {
    const PERFORMED: &str = "performed by the sandbox init after the protected-path check";
    const OPENED: &str = "performed by the sandbox init after the protected-path check (a protected file is not opened for writing, whoever made it)";
    const VIEW: &str = "allowed (every writable root is a review view: apply flags what the guard refuses); with a set-id mode performed by the sandbox init, which refuses or drops the bits";
    let mut out: Vec<Mediated> = ALWAYS
        .iter()
        .map(|(name, nr)| {
            let with_mode = MODE_ARG.iter().find(|(n, _)| n == nr).map(|(_, a)| *a);
            let (when, action) = match (creations, with_mode) {
                (Creations::All, _) => ("always", PERFORMED),
                (Creations::SetIdModes, Some(1)) => ("arg1 (mode) has S_ISUID or S_ISGID", VIEW),
                (Creations::SetIdModes, Some(_)) => ("arg2 (mode) has S_ISUID or S_ISGID", VIEW),
                (Creations::SetIdModes, None) => ("never", VIEW),
            };
            Mediated {
                syscall: name,
                when,
                action,
            }
        })
        .collect();
    for (name, arg) in [("open", "arg1"), ("openat", "arg2")] {
        let when = match (creations, arg) {
            (Creations::All, "arg1") => "arg1 (flags) has O_CREAT, or O_WRONLY, O_RDWR or O_TRUNC without O_TMPFILE; and not O_PATH",
            (Creations::All, _) => "arg2 (flags) has O_CREAT, or O_WRONLY, O_RDWR or O_TRUNC without O_TMPFILE; and not O_PATH",
            (Creations::SetIdModes, "arg1") => {
                "arg1 (flags) has O_CREAT and not O_PATH, and arg2 (mode) has S_ISUID or S_ISGID"
            }
            (Creations::SetIdModes, _) => {
                "arg2 (flags) has O_CREAT and not O_PATH, and arg3 (mode) has S_ISUID or S_ISGID"
            }
        };
        let action = match creations {
            Creations::All => OPENED,
            Creations::SetIdModes => VIEW,
        };
        out.push(Mediated {
            syscall: name,
            when,
            action,
        });
    }
    for (name, _) in OBSERVED {
        out.push(Mediated {
            syscall: name,
            when: "always",
            action: "seen by the sandbox init (it drops the umask it keeps for mediated creations) and continued",
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
        for (name, _) in SHARED_MEMORY {
            out.push(Mediated {
                syscall: name,
                when: "always (memory bounded by RLIMIT_DATA, which does not count shared memory)",
                action:
                    "errno ENOSYS (programs fall back to files in the bounded /tmp or /dev/shm)",
            });
        }
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
    build_mediation_for(watch, Creations::All)
}

/// [`build_mediation`] with `creations` deciding which creating calls notify.
pub fn build_mediation_for(
    watch: Option<u64>,
    creations: Creations,
) -> Result<Vec<sock_filter>, SeccompError> {
    Ok(guarded(calls(watch, creations)?)?.instructions().to_vec())
}

/// The search's leaves for the mediated calls.
pub(crate) fn calls(
    watch: Option<u64>,
    creations: Creations,
) -> Result<BTreeMap<u32, Leaf>, SeccompError> {
    let notify = libc::SECCOMP_RET_USER_NOTIF;
    let allow = libc::SECCOMP_RET_ALLOW;
    let ret = |k: u32| stmt(BPF_RET | BPF_K, k);
    let mut calls = BTreeMap::new();
    for (_, n) in OBSERVED {
        calls.insert(syscall_nr(*n)?, Leaf::Ret(notify));
    }
    for (_, n) in ALWAYS {
        let with_mode = MODE_ARG.iter().find(|(m, _)| m == n).map(|(_, a)| *a);
        let leaf = match (creations, with_mode) {
            (Creations::All, _) => Leaf::Ret(notify),
            // The mode is a plain value: notify only when it carries a set-id bit.
            (Creations::SetIdModes, Some(arg)) => Leaf::Block(vec![
                load_arg(arg),
                jump(BPF_JMP | BPF_JSET | BPF_K, SET_ID, 0, 1),
                ret(notify),
                ret(allow),
            ]),
            (Creations::SetIdModes, None) => continue,
        };
        calls.insert(syscall_nr(*n)?, leaf);
    }
    calls.insert(NR_OPENAT2, Leaf::Ret(errno_action(libc::ENOSYS)));
    for (_, n) in XATTR_SETTERS {
        calls.insert(syscall_nr(*n)?, Leaf::Ret(errno_action(libc::EOPNOTSUPP)));
    }
    if let Some(t) = watch {
        for (_, n) in SHARED_MEMORY {
            calls.insert(syscall_nr(*n)?, Leaf::Ret(errno_action(libc::ENOSYS)));
        }
        let t = u32::try_from(t).unwrap_or(u32::MAX);
        let size_at_least = |arg: u32| size_at_least(arg, t, ret(notify), ret(allow));
        // mmap(addr, len, prot, flags, fd, off): without PROT_WRITE the jset skips to the
        // tail's last instruction (allow).
        let mut mmap = vec![
            load_arg(2),
            jump(BPF_JMP | BPF_JSET | BPF_K, libc::PROT_WRITE as u32, 0, 5),
        ];
        mmap.extend(size_at_least(1));
        calls.insert(syscall_nr(libc::SYS_mmap)?, Leaf::Block(mmap));
        // mremap(old, old_len, new_len, flags, new_addr).
        calls.insert(
            syscall_nr(libc::SYS_mremap)?,
            Leaf::Block(size_at_least(2).to_vec()),
        );
    }
    for (n, arg) in [(libc::SYS_open, 1u8), (libc::SYS_openat, 2u8)] {
        // With O_PATH the kernel drops O_CREAT (and every other flag but a few): nothing can
        // be created, and the kernel refuses to hand an O_PATH file over with ADDFD.
        let block = match creations {
            // A write-open of an existing name too (see the module's doc).
            Creations::All => vec![
                load_arg(arg),
                jump(BPF_JMP | BPF_JSET | BPF_K, libc::O_PATH as u32, 4, 0),
                jump(BPF_JMP | BPF_JSET | BPF_K, libc::O_CREAT as u32, 2, 0),
                jump(BPF_JMP | BPF_JSET | BPF_K, O_TMPFILE_BIT, 2, 0),
                jump(BPF_JMP | BPF_JSET | BPF_K, WRITES, 0, 1),
                ret(notify),
                ret(allow),
            ],
            // The mode follows the flags.
            Creations::SetIdModes => vec![
                load_arg(arg),
                jump(BPF_JMP | BPF_JSET | BPF_K, libc::O_CREAT as u32, 0, 4),
                jump(BPF_JMP | BPF_JSET | BPF_K, libc::O_PATH as u32, 3, 0),
                load_arg(arg + 1),
                jump(BPF_JMP | BPF_JSET | BPF_K, SET_ID, 0, 1),
                ret(notify),
                ret(allow),
            ],
        };
        calls.insert(syscall_nr(n)?, Leaf::Block(block));
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::{AUDIT_ARCH_X86_64, X32_SYSCALL_BIT};

    fn run(p: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        crate::interpret::run(p, arch, nr as i32, args)
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
        assert_eq!(run(&p, x86, libc::SYS_truncate as u32, [0; 6]), notify);
        assert_eq!(run(&p, x86, libc::SYS_ftruncate as u32, [0; 6]), allow);
        assert_eq!(
            run(&p, x86, libc::SYS_umask as u32, [0o77, 0, 0, 0, 0, 0]),
            notify
        );
        assert_eq!(
            run(&p, x86, libc::SYS_open as u32, [0, creat | 1, 0, 0, 0, 0]),
            notify
        );
        // A write-open of an existing name stops too; a read-only one passes.
        for w in [
            libc::O_WRONLY,
            libc::O_RDWR,
            libc::O_TRUNC,
            libc::O_APPEND | libc::O_WRONLY,
        ] {
            let w = w as u64;
            assert_eq!(
                run(&p, x86, libc::SYS_open as u32, [0, w, 0, 0, 0, 0]),
                notify
            );
            assert_eq!(
                run(&p, x86, libc::SYS_openat as u32, [0, 0, w, 0, 0, 0]),
                notify
            );
            // Its flags are arg2: arg1 is the path pointer.
            assert_eq!(
                run(&p, x86, libc::SYS_openat as u32, [0, w, 0, 0, 0, 0]),
                allow
            );
            // O_PATH makes the kernel drop it; O_TMPFILE (no O_CREAT) names a directory.
            let path = libc::O_PATH as u64;
            assert_eq!(
                run(&p, x86, libc::SYS_openat as u32, [0, 0, w | path, 0, 0, 0]),
                allow
            );
            let tmpfile = libc::O_TMPFILE as u64;
            assert_eq!(
                run(
                    &p,
                    x86,
                    libc::SYS_openat as u32,
                    [0, 0, w | tmpfile, 0, 0, 0]
                ),
                allow
            );
        }
        for r in [
            libc::O_RDONLY,
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
            libc::O_DIRECTORY,
        ] {
            assert_eq!(
                run(&p, x86, libc::SYS_open as u32, [0, r as u64, 0, 0, 0, 0]),
                allow
            );
            assert_eq!(
                run(&p, x86, libc::SYS_openat as u32, [0, 0, r as u64, 0, 0, 0]),
                allow
            );
        }
        // O_TMPFILE with O_CREAT is the kernel's EINVAL, but stops as any O_CREAT does.
        let bad = (libc::O_TMPFILE | libc::O_CREAT | libc::O_RDWR) as u64;
        assert_eq!(
            run(&p, x86, libc::SYS_openat as u32, [0, 0, bad, 0, 0, 0]),
            notify
        );
        assert_eq!(
            run(&p, x86, libc::SYS_openat as u32, [0, 0, creat, 0, 0, 0]),
            notify
        );
        // O_PATH makes the kernel ignore O_CREAT: nothing to mediate.
        let path = libc::O_PATH as u64;
        assert_eq!(
            run(
                &p,
                x86,
                libc::SYS_openat as u32,
                [0, 0, creat | path, 0, 0, 0]
            ),
            allow
        );
        assert_eq!(
            run(
                &p,
                x86,
                libc::SYS_open as u32,
                [0, creat | path, 0, 0, 0, 0]
            ),
            allow
        );
        assert_eq!(
            run(&p, x86, libc::SYS_openat as u32, [0, 0, path, 0, 0, 0]),
            allow
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
            ALWAYS.len() + 2 + OBSERVED.len() + 1 + XATTR_SETTERS.len()
        );
        // No allocation watch: mmap and mremap pass whatever their size.
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        assert_eq!(
            run(&p, x86, libc::SYS_mmap as u32, [0, 1 << 40, rw, 0, 0, 0]),
            allow
        );
    }

    /// A review view's shape: creating calls pass unless their mode carries a set-id bit;
    /// `umask` is still observed, `openat2` and the `setxattr` family still refused.
    #[test]
    fn under_a_view_only_set_id_modes_notify() {
        let p = build_mediation_for(None, Creations::SetIdModes).unwrap();
        let x86 = AUDIT_ARCH_X86_64;
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let allow = libc::SECCOMP_RET_ALLOW;
        let creat = libc::O_CREAT as u64;
        let nr = |n: i64| n as u32;
        for n in [
            libc::SYS_mkdir,
            libc::SYS_mkdirat,
            libc::SYS_symlink,
            libc::SYS_symlinkat,
            libc::SYS_link,
            libc::SYS_linkat,
            libc::SYS_rename,
            libc::SYS_renameat,
            libc::SYS_renameat2,
        ] {
            assert_eq!(
                run(&p, x86, nr(n), [0, 0, 0o4777, 0o6777, 0, 0]),
                allow,
                "{n}"
            );
        }
        // The mode's position, per call: with a set-id bit there, notify; elsewhere, allow.
        for (n, arg) in MODE_ARG {
            let mut args = [0u64; 6];
            args[*arg as usize] = 0o755;
            assert_eq!(run(&p, x86, nr(*n), args), allow, "{n}");
            for bit in [0o4000, 0o2000, 0o6755] {
                args[*arg as usize] = bit;
                assert_eq!(run(&p, x86, nr(*n), args), notify, "{n} {bit:o}");
            }
            let mut elsewhere = [0o6777u64; 6];
            elsewhere[*arg as usize] = 0o777;
            assert_eq!(run(&p, x86, nr(*n), elsewhere), allow, "{n}");
        }
        // open(path, flags, mode), openat(dirfd, path, flags, mode).
        let open =
            |flags: u64, mode: u64| run(&p, x86, nr(libc::SYS_open), [0, flags, mode, 0, 0, 0]);
        let openat =
            |flags: u64, mode: u64| run(&p, x86, nr(libc::SYS_openat), [0, 0, flags, mode, 0, 0]);
        assert_eq!(open(creat | 1, 0o644), allow);
        assert_eq!(openat(creat | 1, 0o644), allow);
        assert_eq!(open(creat | 1, 0o4755), notify);
        assert_eq!(openat(creat, 0o2755), notify);
        // Without O_CREAT the mode means nothing; with O_PATH nothing is created.
        assert_eq!(openat(1, 0o6755), allow);
        assert_eq!(openat(creat | libc::O_PATH as u64, 0o6755), allow);
        assert_eq!(open(creat | libc::O_PATH as u64, 0o6755), allow);
        assert_eq!(
            run(&p, x86, nr(libc::SYS_umask), [0o77, 0, 0, 0, 0, 0]),
            notify
        );
        assert_eq!(
            run(&p, x86, NR_OPENAT2, [0; 6]),
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(
            run(&p, x86, libc::SYS_fsetxattr as u32, [0; 6]),
            libc::SECCOMP_RET_ERRNO | libc::EOPNOTSUPP as u32
        );
        assert_eq!(
            mediated_calls_for(None, Creations::SetIdModes).len(),
            mediated_calls(None).len()
        );
        // The allocation watch is the same in both shapes.
        let watched = build_mediation_for(Some(16 << 20), Creations::SetIdModes).unwrap();
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        assert_eq!(
            run(
                &watched,
                x86,
                nr(libc::SYS_mmap),
                [0, 1 << 30, rw, 0x22, 0, 0]
            ),
            notify
        );
    }

    #[test]
    fn shared_memory_is_refused_only_under_the_allocation_watch() {
        let enosys = errno_action(libc::ENOSYS);
        for (_, n) in SHARED_MEMORY {
            let nr = *n as u32;
            let with = build_mediation(Some(16 << 20)).unwrap();
            assert_eq!(run(&with, AUDIT_ARCH_X86_64, nr, [0; 6]), enosys, "{nr}");
            let without = build_mediation(None).unwrap();
            assert_eq!(
                run(&without, AUDIT_ARCH_X86_64, nr, [0; 6]),
                libc::SECCOMP_RET_ALLOW,
                "{nr}"
            );
        }
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
            mediated_calls(None).len() + 2 + SHARED_MEMORY.len()
        );
    }
}
