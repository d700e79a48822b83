//! The seccomp layer of stockade: the syscall deny-list as a BPF program.
//!
//! This crate only *builds and describes* the filter. Installing it is the job of the
//! `sys` crate, which does so in the forked child, after `PR_SET_NO_NEW_PRIVS`, without
//! allocating: [`build_default`] is called before the fork and the child only reads
//! [`ArchGuarded::instructions`].
//!
//! # Where this layer sits
//!
//! The filter is a **deny-list**: every syscall it does not name is allowed. It is one
//! layer of several; Landlock (file access), namespaces and dropped capabilities do the
//! rest. What it refuses is the kernel surface that those layers do not cover or that
//! exists mainly to attack them (new namespaces, `ptrace`, `io_uring`, keyrings, `bpf`,
//! mounting, module loading, terminal input injection, Unix sockets to host services...).
//! [`default_rules`] lists every refusal with its reason; the same table drives the
//! compiler, so the description and the program cannot drift apart.
//!
//! # Program shape
//!
//! [`build_default`] returns an [`ArchGuarded`] program made of two parts:
//!
//! 1. A guard prefix ([`GUARD_LEN`] instructions):
//!
//!    ```text
//!    0: ld  [4]                      ; seccomp_data.arch
//!    1: jeq #AUDIT_ARCH_X86_64, 1, 0
//!    2: ret #SECCOMP_RET_KILL_PROCESS ; i386 (int 0x80) or any other ABI
//!    3: ld  [0]                      ; seccomp_data.nr
//!    4: jge #0x40000000, 0, 1
//!    5: ret #SECCOMP_RET_KILL_PROCESS ; x32 ABI bit set (this also catches negative nr)
//!    ```
//!
//! 2. A binary search on the syscall number over the table's rows (the `tree` module):
//!    consecutive numbers with the same action share a range, a call reaches its action
//!    after about seven compares, and the calls with argument checks end in a small block
//!    of their own. Default action: allow.
//!
//! `clone3` passes its flags in a struct in user memory, which seccomp cannot read.
//! Answering `ENOSYS` makes glibc (and other libcs) fall back to `clone(2)`, whose flags
//! are a register the filter does check.
//!
//! [`build_with_mediation`] puts the mediation filter's calls ([`build_mediation`]) in the
//! same search: one program to install instead of two (the kernel's cost of installing a
//! filter is most of its cost here), and one filter for each of the command's calls to
//! pass. The two tables name different calls; building refuses an overlap.
//!
//! # Argument checks
//!
//! All argument checks compare the low 32 bits (seccompiler `Dword`), which is what the
//! kernel itself uses for these arguments: `ioctl`'s `cmd` is an `unsigned int`,
//! `socket`'s `domain` an `int`, and `clone(2)` only looks at `lower_32_bits(flags)`.
//! Checking the whole 64-bit value would let a caller slip past by setting high bits
//! that the kernel then ignores.
//!
//! - `unshare` and `clone` are refused when `flags` (arg0) has any namespace bit set
//!   (`jset` on the union of the bits). For `clone` the list leaves
//!   out `CLONE_NEWTIME` (`0x80`): in `clone(2)` the low byte of `flags` is the exit
//!   signal (`CSIGNAL`), the kernel strips it from the flags, and a time namespace can
//!   only be made with `unshare(2)` or `clone3` (which is `ENOSYS` anyway).
//! - `ioctl` is refused for `TIOCSTI` and `TIOCLINUX` (arg1).
//! - `socket` is refused for `AF_UNIX` (arg0). And for `AF_VSOCK`: virtio sockets ignore
//!   the network namespace and reach the hypervisor host even in a run without network.
//! - `socketpair` is allowed only for `AF_UNIX` with a type (arg1, less the
//!   `SOCK_NONBLOCK`/`SOCK_CLOEXEC` flags: `& 0xf`) of `SOCK_STREAM` or `SOCK_SEQPACKET`:
//!   an allow-list (`SOCK_RAW` is a datagram socket to the kernel's `AF_UNIX`), checked
//!   as `ld arg0; jeq AF_UNIX; ld arg1; and 0xf; jeq` per type. A datagram socket from a
//!   pair is unconnected as far as a path goes: `sendto`/`sendmsg` with an address, or
//!   `connect`, reach any host datagram socket the user may write (`/dev/log`, journald,
//!   `$NOTIFY_SOCKET`), network namespace or not. The kernel keeps the allowed pairs to
//!   each other: a stream pair's `sendmsg` with an address fails (`EISCONN`), a seqpacket
//!   pair's ignores it, `connect` on either fails (`EISCONN`), and `listen` fails
//!   (`EINVAL`: already connected), so binding one to a path makes a name nobody can
//!   connect to. Programs still talk to their own children over them.
//!
//! No other call makes a Unix socket on x86_64: `socketcall` exists only in the i386 ABI
//! (killed by the guard), `io_uring` (whose `IORING_OP_SOCKET` would) is refused, an
//! `accept` needs a listening socket, and `open` of a socket's path or `/proc/PID/fd/N`
//! gives `ENXIO`.
//!
//! # Architectures
//!
//! Only x86_64 is supported. On any other target [`build_default`] returns
//! [`SeccompError::UnsupportedArch`].

#![forbid(unsafe_code)]

use std::collections::BTreeMap;

/// A classic BPF instruction, `#[repr(C)]` with the kernel's `struct sock_filter` layout.
pub use seccompiler::sock_filter;

use tree::Leaf;

mod oci;
pub use oci::{oci_profile, oci_rules};

/// One thing the filter refuses, for the plan JSON and docs.
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
pub struct Rule {
    /// The syscall's name, or `"*"` for the guards that apply to every call.
    pub syscall: &'static str,
    /// `"always"`, or the argument condition, e.g. `"arg0 has CLONE_NEWUSER"`.
    pub when: &'static str,
    /// `"errno EPERM"`, `"errno ENOSYS"` or `"kill process"`.
    pub action: &'static str,
    /// Why the sandbox refuses it.
    pub why: &'static str,
}

/// A seccomp BPF program that starts with the architecture guard.
///
/// Only this crate can make one (the field is private), so a program without the guard
/// cannot be handed to the installer by construction. The program is never longer than
/// [`MAX_INSTRUCTIONS`], so its length always fits the `u16` of `struct sock_fprog`.
///
/// [`seccompiler::sock_filter`] is `#[repr(C)]` with the same layout as the kernel's
/// `struct sock_filter` (and `libc::sock_filter`), so the installer can point a
/// `sock_fprog` at [`ArchGuarded::instructions`] directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchGuarded {
    program: Vec<sock_filter>,
}

impl ArchGuarded {
    /// The whole program, guard prefix first.
    pub fn instructions(&self) -> &[sock_filter] {
        &self.program
    }

    /// Number of instructions (at most [`MAX_INSTRUCTIONS`]).
    pub fn len(&self) -> usize {
        self.program.len()
    }

    /// Whether the program has no instructions; never true for a built program.
    pub fn is_empty(&self) -> bool {
        self.program.is_empty()
    }
}

/// Why a filter could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// The crate only knows the x86_64 syscall ABI.
    #[error("failed to build seccomp filter: unsupported architecture {arch} (only x86_64 is supported)")]
    UnsupportedArch {
        /// `std::env::consts::ARCH` of the build.
        arch: &'static str,
    },
    /// A row names a number the search cannot hold (at or above the x32 bit).
    #[error("failed to build seccomp filter: syscall number {nr} is out of range")]
    BadNumber {
        /// The number.
        nr: i64,
    },
    /// An argument check's value does not fit the 32 bits it is compared on.
    #[error("failed to build seccomp filter: argument value {value:#x} is wider than 32 bits")]
    WideValue {
        /// The value.
        value: u64,
    },
    /// The deny-list and the mediation table both name a call.
    #[error("failed to build seccomp filter: syscall {nr} is both denied and mediated")]
    Overlap {
        /// The number.
        nr: u32,
    },
    /// The program is longer than the kernel accepts.
    #[error(
        "failed to build seccomp filter: {len} instructions, the kernel accepts at most {max}"
    )]
    TooLong {
        /// Length of the program that was built.
        len: usize,
        /// [`MAX_INSTRUCTIONS`].
        max: usize,
    },
}

/// The kernel's limit on a classic BPF program (`BPF_MAXINSNS`).
pub const MAX_INSTRUCTIONS: usize = 4096;

/// Number of instructions in the guard prefix.
pub const GUARD_LEN: usize = 6;

// Classic BPF opcodes, from <linux/bpf_common.h>.
const BPF_LD: u16 = 0x00;
const BPF_JMP: u16 = 0x05;
const BPF_RET: u16 = 0x06;
const BPF_W: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_JEQ: u16 = 0x10;
const BPF_JGE: u16 = 0x30;
const BPF_JSET: u16 = 0x40;
const BPF_K: u16 = 0x00;
const BPF_ALU: u16 = 0x04;
const BPF_AND: u16 = 0x50;

// Offsets in `struct seccomp_data { int nr; __u32 arch; __u64 ip; __u64 args[6]; }`.
const SECCOMP_DATA_NR_OFFSET: u32 = 0;
const SECCOMP_DATA_ARCH_OFFSET: u32 = 4;
/// `offsetof(struct seccomp_data, args)`; each argument is 8 bytes, low half first.
const SECCOMP_DATA_ARGS_OFFSET: u32 = 16;

/// `AUDIT_ARCH_X86_64` = `EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE` (<linux/audit.h>).
const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;

/// `__X32_SYSCALL_BIT`: x32 syscalls are the x86_64 numbers with this bit set.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const EPERM: &str = "errno EPERM";
const ENOSYS: &str = "errno ENOSYS";
const KILL: &str = "kill process";

/// Namespace bits of `unshare(2)`'s flags.
const UNSHARE_NS_BITS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWTIME as u64,
];

/// Namespace bits of `clone(2)`'s flags: as for `unshare`, less `CLONE_NEWTIME`, whose
/// bit (0x80) is part of the exit-signal byte in `clone(2)` (see the crate docs).
const CLONE_NS_BITS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

// `libc::Ioctl` is `c_ulong` on glibc and `c_int` on musl, hence the casts.
#[allow(clippy::unnecessary_cast)]
const TIOCSTI: u64 = libc::TIOCSTI as u64;
#[allow(clippy::unnecessary_cast)]
const TIOCLINUX: u64 = libc::TIOCLINUX as u64;

/// The bits of a socket's `type` argument that name the type; the rest are the
/// `SOCK_NONBLOCK` and `SOCK_CLOEXEC` flags (the kernel's `SOCK_TYPE_MASK`).
const SOCK_TYPE_MASK: u64 = 0xf;
/// The `socketpair(AF_UNIX, ...)` types allowed: connected byte streams and sequenced
/// packets, whose sockets cannot be pointed anywhere else. Not `SOCK_DGRAM`, whose
/// `sendto`/`sendmsg` with an address and `connect` reach any host datagram socket by path,
/// nor `SOCK_RAW` (the kernel makes it a datagram socket for `AF_UNIX`).
const UNIX_PAIR_TYPES: &[u64] = &[libc::SOCK_STREAM as u64, libc::SOCK_SEQPACKET as u64];

/// When a compiled rule matches.
#[derive(Debug, Clone, Copy)]
enum Match {
    /// Every call of the syscall.
    Always,
    /// The low 32 bits of argument `arg` have at least one of `bits` set.
    AnyBit { arg: u8, bits: &'static [u64] },
    /// The low 32 bits of argument `arg` equal `value`.
    Equals { arg: u8, value: u64 },
    /// Unless the low 32 bits of arg0 (a socket domain) equal `domain` and those of arg1
    /// (the type) masked with `type_mask` are one of `types`: an allow-list of socket types.
    OutsideSocketTypes {
        domain: u64,
        type_mask: u64,
        types: &'static [u64],
    },
}

/// How a table entry is enforced.
#[derive(Debug, Clone, Copy)]
enum Check {
    /// By the guard prefix.
    Guard,
    /// By the search, answering `errno` when the call matches. `nr` is `None` when the
    /// build target is not x86_64 (the numbers are only taken from libc there).
    Compiled {
        nr: Option<i64>,
        matches: Match,
        errno: i32,
    },
}

/// A row of the table: what is described and how it is enforced.
#[derive(Debug, Clone)]
struct Entry {
    rule: Rule,
    check: Check,
}

/// The x86_64 number of `libc::$sys`, or `None` when building for another architecture
/// (where the constant may not exist or mean another syscall).
macro_rules! nr {
    ($sys:ident) => {{
        #[cfg(target_arch = "x86_64")]
        let nr: Option<i64> = Some(libc::$sys);
        #[cfg(not(target_arch = "x86_64"))]
        let nr: Option<i64> = None;
        nr
    }};
}

/// A row enforced by the compiled part; the name comes from the libc constant, so the
/// name and the number cannot disagree.
macro_rules! deny {
    ($sys:ident, $when:expr, $matches:expr, $why:expr) => {
        Entry {
            rule: Rule {
                syscall: stringify!($sys).trim_start_matches("SYS_"),
                when: $when,
                action: EPERM,
                why: $why,
            },
            check: Check::Compiled {
                nr: nr!($sys),
                matches: $matches,
                errno: libc::EPERM,
            },
        }
    };
    ($sys:ident, $why:expr) => {
        deny!($sys, "always", Match::Always, $why)
    };
}

const WHY_MEMORY: &str = "reads or writes another process's memory";
const WHY_IO_URING: &str =
    "io_uring performs I/O the syscall filter never sees and is a large kernel attack surface";
const WHY_MOUNT: &str = "changes the filesystem view that the sandbox's other layers rely on";
const WHY_KEYS: &str = "kernel keyrings are not namespaced: could read or plant credentials";
const WHY_MODULE: &str = "loads or unloads kernel modules";
const WHY_KEXEC: &str = "replaces the running kernel";
const WHY_SWAP: &str = "changes the system's swap";
const WHY_CLOCK: &str = "changes the system clock";
const WHY_PORTS: &str = "raw access to I/O ports";
const WHY_HANDLE: &str =
    "file handles open files by inode, bypassing path-based checks (the 'shocker' escape)";
const WHY_NAMESPACES: &str =
    "new namespaces (user namespaces above all) expose kernel attack surface and can regain capabilities";

/// The whole table, in the order [`default_rules`] reports it.
fn table() -> Vec<Entry> {
    vec![
        Entry {
            rule: Rule {
                syscall: "*",
                when: "seccomp_data.arch is not AUDIT_ARCH_X86_64",
                action: KILL,
                why: "other ABIs (i386 via int 0x80) number syscalls differently; the deny-list only covers x86_64",
            },
            check: Check::Guard,
        },
        Entry {
            rule: Rule {
                syscall: "*",
                when: "nr >= 0x40000000 (x32 ABI bit set, or a negative number)",
                action: KILL,
                why: "x32 syscalls reach the same kernel code under other numbers than the deny-list names",
            },
            check: Check::Guard,
        },
        deny!(SYS_ptrace, "inspects and controls other processes"),
        deny!(SYS_process_vm_readv, WHY_MEMORY),
        deny!(SYS_process_vm_writev, WHY_MEMORY),
        deny!(SYS_io_uring_setup, WHY_IO_URING),
        deny!(SYS_io_uring_enter, WHY_IO_URING),
        deny!(SYS_io_uring_register, WHY_IO_URING),
        deny!(SYS_mount, WHY_MOUNT),
        deny!(SYS_umount2, WHY_MOUNT),
        deny!(SYS_pivot_root, WHY_MOUNT),
        deny!(SYS_chroot, WHY_MOUNT),
        deny!(SYS_move_mount, WHY_MOUNT),
        deny!(SYS_open_tree, WHY_MOUNT),
        deny!(SYS_fsopen, WHY_MOUNT),
        deny!(SYS_fsconfig, WHY_MOUNT),
        deny!(SYS_fsmount, WHY_MOUNT),
        deny!(SYS_fspick, WHY_MOUNT),
        deny!(SYS_mount_setattr, WHY_MOUNT),
        deny!(SYS_setns, "joins another process's namespaces"),
        deny!(SYS_keyctl, WHY_KEYS),
        deny!(SYS_add_key, WHY_KEYS),
        deny!(SYS_request_key, WHY_KEYS),
        deny!(SYS_bpf, "loads eBPF programs: a large kernel attack surface"),
        deny!(
            SYS_perf_event_open,
            "performance events leak information about the kernel and other processes"
        ),
        deny!(
            SYS_userfaultfd,
            "stalls kernel page faults at will, a common kernel-exploit primitive"
        ),
        deny!(SYS_kexec_load, WHY_KEXEC),
        deny!(SYS_kexec_file_load, WHY_KEXEC),
        deny!(SYS_init_module, WHY_MODULE),
        deny!(SYS_finit_module, WHY_MODULE),
        deny!(SYS_delete_module, WHY_MODULE),
        deny!(SYS_acct, "switches system-wide process accounting"),
        deny!(SYS_swapon, WHY_SWAP),
        deny!(SYS_swapoff, WHY_SWAP),
        deny!(SYS_reboot, "reboots or halts the machine"),
        deny!(
            SYS_syslog,
            "reads or clears the kernel log, which leaks kernel addresses"
        ),
        deny!(SYS_settimeofday, WHY_CLOCK),
        deny!(SYS_clock_settime, WHY_CLOCK),
        deny!(SYS_clock_adjtime, WHY_CLOCK),
        deny!(SYS_adjtimex, WHY_CLOCK),
        deny!(SYS_quotactl, "reads or changes disk quotas"),
        deny!(SYS_open_by_handle_at, WHY_HANDLE),
        deny!(SYS_name_to_handle_at, WHY_HANDLE),
        deny!(
            SYS_lookup_dcookie,
            "kernel profiling interface that resolves kernel directory entries"
        ),
        deny!(SYS_iopl, WHY_PORTS),
        deny!(SYS_ioperm, WHY_PORTS),
        deny!(
            SYS_fanotify_init,
            "watches (and can block) file access across the whole mount or filesystem"
        ),
        deny!(
            SYS_pidfd_getfd,
            "copies file descriptors out of another process"
        ),
        deny!(
            SYS_vhangup,
            "hangs up the controlling terminal of the user's session"
        ),
        // personality(2) is deliberately NOT denied: setarch, some build tools and
        // emulators use it, and the x32/i386 guards do not depend on it.
        deny!(
            SYS_unshare,
            "arg0 (flags) has any of CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWUTS|CLONE_NEWCGROUP|CLONE_NEWTIME",
            Match::AnyBit {
                arg: 0,
                bits: UNSHARE_NS_BITS
            },
            WHY_NAMESPACES
        ),
        deny!(
            SYS_clone,
            "arg0 (flags) has any of CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWUTS|CLONE_NEWCGROUP",
            Match::AnyBit {
                arg: 0,
                bits: CLONE_NS_BITS
            },
            WHY_NAMESPACES
        ),
        Entry {
            rule: Rule {
                syscall: "clone3",
                when: "always",
                action: ENOSYS,
                why: "its flags are in memory seccomp cannot read; ENOSYS makes libc fall back to clone(2), whose flags are checked",
            },
            check: Check::Compiled {
                nr: nr!(SYS_clone3),
                matches: Match::Always,
                errno: libc::ENOSYS,
            },
        },
        deny!(
            SYS_ioctl,
            "arg1 (cmd) == TIOCSTI",
            Match::Equals {
                arg: 1,
                value: TIOCSTI
            },
            "pushes characters into a terminal's input: commands run in the user's shell after the sandbox exits"
        ),
        deny!(
            SYS_ioctl,
            "arg1 (cmd) == TIOCLINUX",
            Match::Equals {
                arg: 1,
                value: TIOCLINUX
            },
            "virtual-console control: can paste into the console's input and read the screen"
        ),
        deny!(
            SYS_socket,
            "arg0 (domain) == AF_UNIX",
            Match::Equals {
                arg: 0,
                value: libc::AF_UNIX as u64
            },
            "reaches host services over Unix sockets (container runtimes, D-Bus, ssh-agent, systemd); socketpair stays allowed"
        ),
        deny!(
            SYS_socketpair,
            "arg0 (domain) != AF_UNIX, or arg1 (type) & 0xf is neither SOCK_STREAM nor SOCK_SEQPACKET",
            Match::OutsideSocketTypes {
                domain: libc::AF_UNIX as u64,
                type_mask: SOCK_TYPE_MASK,
                types: UNIX_PAIR_TYPES
            },
            "a datagram socket from socketpair reaches any host datagram socket by path (sendto, sendmsg, connect: /dev/log, journald, the notify socket); stream and seqpacket pairs stay allowed for talking to the command's own processes"
        ),
        deny!(
            SYS_socket,
            "arg0 (domain) == AF_VSOCK",
            Match::Equals {
                arg: 0,
                value: libc::AF_VSOCK as u64
            },
            "virtio sockets are not confined by the network namespace: they reach the hypervisor host (and other VMs) even without network"
        ),
    ]
}

/// Everything the default filter refuses, in program order: the two guards (foreign
/// architecture, x32), then the syscalls denied outright, then the argument-dependent
/// ones (`unshare`, `clone`, `clone3`, `ioctl`, `socket`, `socketpair`).
pub fn default_rules() -> Vec<Rule> {
    table().into_iter().map(|entry| entry.rule).collect()
}

/// Builds the default filter: the guard prefix followed by the search over the deny-list.
///
/// Deterministic: two calls return equal programs.
pub fn build_default() -> Result<ArchGuarded, SeccompError> {
    guarded(deny_calls()?)
}

/// Builds one program with the deny-list and the mediation filter's calls
/// ([`build_mediation`]): install it with a listener (`SECCOMP_FILTER_FLAG_NEW_LISTENER`).
pub fn build_with_mediation(watch: Option<u64>) -> Result<ArchGuarded, SeccompError> {
    build_with_mediation_for(watch, Creations::All)
}

/// [`build_with_mediation`] with `creations` deciding which name-creating calls notify
/// (see [`Creations`]).
pub fn build_with_mediation_for(
    watch: Option<u64>,
    creations: Creations,
) -> Result<ArchGuarded, SeccompError> {
    let mut calls = deny_calls()?;
    for (nr, leaf) in mediation::calls(watch, creations)? {
        if calls.insert(nr, leaf).is_some() {
            return Err(SeccompError::Overlap { nr });
        }
    }
    guarded(calls)
}

/// The guard followed by the search over `calls` (unlisted calls are allowed).
fn guarded(calls: BTreeMap<u32, Leaf>) -> Result<ArchGuarded, SeccompError> {
    if !cfg!(target_arch = "x86_64") {
        return Err(SeccompError::UnsupportedArch {
            arch: std::env::consts::ARCH,
        });
    }
    let mut program = guard_prefix().to_vec();
    program.extend(tree::search(&calls, libc::SECCOMP_RET_ALLOW)?);
    Ok(ArchGuarded { program })
}

/// The guard prefix (see the crate docs for the listing); it leaves the number loaded.
fn guard_prefix() -> [sock_filter; GUARD_LEN] {
    [
        stmt(BPF_LD | BPF_W | BPF_ABS, SECCOMP_DATA_ARCH_OFFSET),
        jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD | BPF_W | BPF_ABS, SECCOMP_DATA_NR_OFFSET),
        jump(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1),
        stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_KILL_PROCESS),
    ]
}

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The action "fail with `errno`".
fn errno_action(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA)
}

/// Loads the low 32 bits of argument `arg`: what the kernel reads of an `int` or
/// `unsigned int` argument.
fn load_arg(arg: u8) -> sock_filter {
    stmt(
        BPF_LD | BPF_W | BPF_ABS,
        SECCOMP_DATA_ARGS_OFFSET + 8 * u32::from(arg),
    )
}

/// A syscall number as the search holds it.
fn syscall_nr(nr: i64) -> Result<u32, SeccompError> {
    u32::try_from(nr).map_err(|_| SeccompError::BadNumber { nr })
}

fn low_bits(value: u64) -> Result<u32, SeccompError> {
    u32::try_from(value).map_err(|_| SeccompError::WideValue { value })
}

/// The search's leaves for the `Check::Compiled` rows: a call denied on every call
/// returns its errno (that wins over conditional rows of the same call); a call with
/// argument checks gets a block that tests each in table order.
fn deny_calls() -> Result<BTreeMap<u32, Leaf>, SeccompError> {
    let mut rows: BTreeMap<u32, Vec<(Match, i32)>> = BTreeMap::new();
    for entry in table() {
        let Check::Compiled { nr, matches, errno } = entry.check else {
            continue;
        };
        let nr = nr.ok_or(SeccompError::UnsupportedArch {
            arch: std::env::consts::ARCH,
        })?;
        rows.entry(syscall_nr(nr)?)
            .or_default()
            .push((matches, errno));
    }
    let mut calls = BTreeMap::new();
    for (nr, checks) in rows {
        let always = checks
            .iter()
            .find(|(m, _)| matches!(m, Match::Always))
            .map(|(_, errno)| *errno);
        let leaf = match always {
            Some(errno) => Leaf::Ret(errno_action(errno)),
            None => Leaf::Block(argument_block(&checks)?),
        };
        calls.insert(nr, leaf);
    }
    Ok(calls)
}

/// `ld` the argument (when not already loaded), then per check: `jset`/`jeq` falling into
/// `ret errno`, else over it; `ret allow` at the end.
fn argument_block(checks: &[(Match, i32)]) -> Result<Vec<sock_filter>, SeccompError> {
    let mut block = Vec::new();
    let mut loaded = None;
    for &(matches, errno) in checks {
        let (arg, test) = match matches {
            Match::Always => continue,
            Match::OutsideSocketTypes {
                domain,
                type_mask,
                types,
            } => {
                block.extend(socket_type_check(
                    loaded == Some(0),
                    domain,
                    type_mask,
                    types,
                    errno,
                )?);
                loaded = None; // the accumulator holds the masked type now
                continue;
            }
            Match::AnyBit { arg, bits } => {
                let any = bits.iter().fold(0u64, |acc, b| acc | b);
                (arg, jump(BPF_JMP | BPF_JSET | BPF_K, low_bits(any)?, 0, 1))
            }
            Match::Equals { arg, value } => {
                (arg, jump(BPF_JMP | BPF_JEQ | BPF_K, low_bits(value)?, 0, 1))
            }
        };
        if loaded != Some(arg) {
            block.push(load_arg(arg));
            loaded = Some(arg);
        }
        block.push(test);
        block.push(stmt(BPF_RET | BPF_K, errno_action(errno)));
    }
    block.push(stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ALLOW));
    Ok(block)
}

/// The block for [`Match::OutsideSocketTypes`], falling through when the call is allowed:
///
/// ```text
///     ld  arg0                      ; unless already loaded
///     jeq #domain, 0, deny
///     ld  arg1
///     and #type_mask
///     jeq #types[0], allow, 0       ; one per allowed type
///     ...
/// deny:
///     ret errno
/// allow:
/// ```
fn socket_type_check(
    domain_loaded: bool,
    domain: u64,
    type_mask: u64,
    types: &[u64],
    errno: i32,
) -> Result<Vec<sock_filter>, SeccompError> {
    let n = u8::try_from(types.len()).map_err(|_| SeccompError::WideValue {
        value: types.len() as u64,
    })?;
    let mut block = Vec::new();
    if !domain_loaded {
        block.push(load_arg(0));
    }
    block.push(jump(
        BPF_JMP | BPF_JEQ | BPF_K,
        low_bits(domain)?,
        0,
        n.saturating_add(2),
    ));
    block.push(load_arg(1));
    block.push(stmt(BPF_ALU | BPF_AND | BPF_K, low_bits(type_mask)?));
    for (i, t) in (0u8..).zip(types) {
        // Over the remaining compares and the `ret`.
        block.push(jump(BPF_JMP | BPF_JEQ | BPF_K, low_bits(*t)?, n - i, 0));
    }
    block.push(stmt(BPF_RET | BPF_K, errno_action(errno)));
    Ok(block)
}

mod mediation;
mod tree;
pub use mediation::{
    build_mediation, build_mediation_for, mediated_calls, mediated_calls_for, Creations, Mediated,
};

#[cfg(test)]
mod interpret;
#[cfg(test)]
mod tests;
