//! Installs the default filter for real, in a forked child, and checks what the kernel
//! does with it. Every denial is paired with a control: the same probe in a child
//! without the filter, which must end differently, so these tests can fail.
//!
//! Children only make raw libc calls and leave with `_exit`, so forking from the
//! multithreaded test harness is safe.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use seccomp::{build_default, ArchGuarded};

/// How a child ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Exited(i32),
    Killed(i32),
}

/// Exit codes of the harness itself, out of the range of errno values the probes return.
const NO_NEW_PRIVS_FAILED: i32 = 200;
const SECCOMP_FAILED: i32 = 201;
/// A probe's own setup failed (not the call under test).
const PROBE_SETUP_FAILED: i32 = 250;

const EPERM: Outcome = Outcome::Exited(libc::EPERM);
const OK: Outcome = Outcome::Exited(0);

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
}

/// 0 when `ret` is a success, else errno.
fn result(ret: i64) -> i32 {
    if ret >= 0 {
        0
    } else {
        errno()
    }
}

fn filter() -> ArchGuarded {
    match build_default() {
        Ok(program) => program,
        Err(e) => panic!("{e}"),
    }
}

/// Runs `probe` in a forked child, after installing `filter` when one is given, and
/// reports how the child ended. The child exits with the probe's return value.
fn run(filter: Option<&ArchGuarded>, probe: fn() -> i32) -> Outcome {
    let prog = filter.map(|program| libc::sock_fprog {
        len: match u16::try_from(program.len()) {
            Ok(len) => len,
            Err(_) => panic!("program too long: {}", program.len()),
        },
        // seccompiler's sock_filter is #[repr(C)] with the kernel's layout.
        filter: program
            .instructions()
            .as_ptr()
            .cast::<libc::sock_filter>()
            .cast_mut(),
    });
    // SAFETY: the child only makes raw syscalls through libc and ends with _exit, never
    // returning into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", errno());
    if pid == 0 {
        child(prog.as_ref(), probe);
    }
    let mut status = 0;
    // SAFETY: `status` is a valid out pointer and `pid` is our child.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid, "waitpid failed: {}", errno());
    if libc::WIFEXITED(status) {
        let code = libc::WEXITSTATUS(status);
        assert_ne!(
            code, NO_NEW_PRIVS_FAILED,
            "prctl(PR_SET_NO_NEW_PRIVS) failed"
        );
        assert_ne!(
            code, SECCOMP_FAILED,
            "seccomp(SECCOMP_SET_MODE_FILTER) failed"
        );
        assert_ne!(code, PROBE_SETUP_FAILED, "the probe's own setup failed");
        Outcome::Exited(code)
    } else if libc::WIFSIGNALED(status) {
        Outcome::Killed(libc::WTERMSIG(status))
    } else {
        panic!("unexpected wait status {status:#x}")
    }
}

fn child(prog: Option<&libc::sock_fprog>, probe: fn() -> i32) -> ! {
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls with valid arguments; `no_core` outlives the call.
    unsafe {
        // The x32/i386 probes die of SIGSYS on purpose: no core files.
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            libc::_exit(NO_NEW_PRIVS_FAILED);
        }
    }
    if let Some(prog) = prog {
        let prog: *const libc::sock_fprog = prog;
        // SAFETY: `prog` points to a valid sock_fprog whose instructions live in the
        // parent's copy of the program, duplicated into this child by fork.
        let ret =
            unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, prog) };
        if ret != 0 {
            // SAFETY: _exit is always safe to call.
            unsafe { libc::_exit(SECCOMP_FAILED) };
        }
    }
    let code = probe();
    // SAFETY: _exit is always safe to call.
    unsafe { libc::_exit(code) }
}

fn filtered(probe: fn() -> i32) -> Outcome {
    run(Some(&filter()), probe)
}

fn unfiltered(probe: fn() -> i32) -> Outcome {
    run(None, probe)
}

// ---------------------------------------------------------------- probes

fn probe_getpid() -> i32 {
    // SAFETY: getpid has no preconditions.
    let (libc_pid, raw_pid) = unsafe { (libc::getpid(), libc::syscall(libc::SYS_getpid)) };
    i32::from(!(libc_pid > 0 && i64::from(libc_pid) == raw_pid))
}

fn unshare(flags: libc::c_int) -> i32 {
    // SAFETY: unshare only changes this (throwaway) child's namespaces.
    result(i64::from(unsafe { libc::unshare(flags) }))
}

fn probe_unshare_user() -> i32 {
    unshare(libc::CLONE_NEWUSER)
}

fn probe_unshare_net() -> i32 {
    unshare(libc::CLONE_NEWNET)
}

fn probe_unshare_files() -> i32 {
    unshare(libc::CLONE_FILES)
}

fn probe_ptrace_traceme() -> i32 {
    // SAFETY: PTRACE_TRACEME takes no pointers.
    result(unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) })
}

fn close_result(fd: libc::c_int) -> i32 {
    let code = result(i64::from(fd));
    if fd >= 0 {
        // SAFETY: `fd` was just opened by this probe.
        unsafe { libc::close(fd) };
    }
    code
}

fn probe_socket_unix() -> i32 {
    // SAFETY: socket takes no pointers.
    close_result(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) })
}

fn probe_socket_inet() -> i32 {
    // SAFETY: socket takes no pointers.
    close_result(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) })
}

fn probe_socket_unix_dgram() -> i32 {
    // SAFETY: socket takes no pointers.
    close_result(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0) })
}

fn probe_socket_inet_stream() -> i32 {
    // SAFETY: socket takes no pointers.
    close_result(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) })
}

fn probe_socketpair_unix() -> i32 {
    socketpair_result(libc::AF_UNIX, libc::SOCK_STREAM)
}

fn probe_socketpair_unix_seqpacket() -> i32 {
    socketpair_result(libc::AF_UNIX, libc::SOCK_SEQPACKET)
}

fn probe_socketpair_unix_stream_flags() -> i32 {
    let flags = libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    socketpair_result(libc::AF_UNIX, libc::SOCK_STREAM | flags)
}

fn probe_socketpair_unix_dgram() -> i32 {
    socketpair_result(libc::AF_UNIX, libc::SOCK_DGRAM)
}

fn probe_socketpair_unix_dgram_cloexec() -> i32 {
    socketpair_result(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC)
}

/// `SOCK_RAW` is accepted by the kernel for `AF_UNIX` and made a datagram socket.
fn probe_socketpair_unix_raw() -> i32 {
    socketpair_result(libc::AF_UNIX, libc::SOCK_RAW)
}

fn socketpair_result(domain: libc::c_int, ty: libc::c_int) -> i32 {
    let mut fds = [-1; 2];
    // SAFETY: `fds` has room for the two descriptors.
    let ret = unsafe { libc::socketpair(domain, ty, 0, fds.as_mut_ptr()) };
    let code = result(i64::from(ret));
    for fd in fds {
        if fd >= 0 {
            // SAFETY: opened by socketpair above.
            unsafe { libc::close(fd) };
        }
    }
    code
}

/// The terminal side of a fresh pseudo-terminal, so that no real terminal (the test's
/// own stdin may be the developer's) ever receives injected input.
fn open_pty_slave() -> Option<libc::c_int> {
    // SAFETY: plain calls on descriptors this function opens; the master is leaked on
    // purpose (the child exits right after the probe).
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        if master < 0 || libc::grantpt(master) != 0 || libc::unlockpt(master) != 0 {
            return None;
        }
        let slave = libc::ioctl(master, libc::TIOCGPTPEER, libc::O_RDWR | libc::O_NOCTTY);
        (slave >= 0).then_some(slave)
    }
}

/// `ioctl(pty, request, &'x')` through the raw syscall, so `request` keeps all 64 bits.
fn pty_ioctl(request: u64) -> i32 {
    let Some(slave) = open_pty_slave() else {
        return PROBE_SETUP_FAILED;
    };
    let byte: libc::c_char = b'x' as libc::c_char;
    let arg: *const libc::c_char = &byte;
    // SAFETY: `arg` points to a byte that outlives the call; the requests probed read at
    // most one byte through it (TCGETS is passed a termios buffer separately).
    result(unsafe { libc::syscall(libc::SYS_ioctl, slave, request, arg) })
}

fn probe_tiocsti() -> i32 {
    pty_ioctl(libc::TIOCSTI)
}

fn probe_tiocsti_high_bits() -> i32 {
    // The kernel reads `cmd` as an unsigned int, so this is TIOCSTI to it.
    pty_ioctl(libc::TIOCSTI | (1 << 32))
}

fn probe_tioclinux() -> i32 {
    pty_ioctl(libc::TIOCLINUX)
}

fn probe_tcgetattr() -> i32 {
    let Some(slave) = open_pty_slave() else {
        return PROBE_SETUP_FAILED;
    };
    // SAFETY: termios is plain data; all-zero is a valid value to overwrite.
    let mut termios: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `termios` is a valid out pointer.
    result(i64::from(unsafe { libc::tcgetattr(slave, &mut termios) }))
}

fn probe_keyctl() -> i32 {
    const KEYCTL_GET_KEYRING_ID: libc::c_long = 0;
    const KEY_SPEC_SESSION_KEYRING: libc::c_long = -3;
    // SAFETY: KEYCTL_GET_KEYRING_ID takes no pointers.
    result(unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_GET_KEYRING_ID,
            KEY_SPEC_SESSION_KEYRING,
            0,
        )
    })
}

fn probe_io_uring_setup() -> i32 {
    // struct io_uring_params is 120 bytes; all zero asks for a default ring.
    let mut params = [0u32; 30];
    // SAFETY: `params` is a writable buffer of the size the kernel expects.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) };
    close_result(libc::c_int::try_from(fd).unwrap_or(-1))
}

fn probe_clone3() -> i32 {
    // Without the filter the kernel answers EINVAL (size 0 is too small); nothing is
    // ever created.
    // SAFETY: a null pointer with size 0 is never dereferenced.
    result(unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize) })
}

/// Waits for `pid` and returns 0 when it exited with `expected`.
fn reap(pid: libc::pid_t, expected: i32) -> i32 {
    let mut status = 0;
    // SAFETY: `status` is a valid out pointer.
    if unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
        return errno();
    }
    i32::from(!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == expected))
}

fn probe_fork() -> i32 {
    // SAFETY: the grandchild only calls _exit.
    match unsafe { libc::fork() } {
        -1 => errno(),
        // SAFETY: _exit is always safe to call.
        0 => unsafe { libc::_exit(7) },
        pid => reap(pid, 7),
    }
}

/// Raw clone(2) with `flags` (no new stack: it behaves like fork).
fn raw_clone(flags: libc::c_int) -> i32 {
    let flags = libc::c_ulong::try_from(flags | libc::SIGCHLD).unwrap_or(0);
    // SAFETY: without CLONE_VM the grandchild gets its own copy of the stack, like fork;
    // it only calls _exit.
    let ret = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    match ret {
        -1 => errno(),
        // SAFETY: _exit is always safe to call.
        0 => unsafe { libc::_exit(9) },
        pid => reap(libc::pid_t::try_from(pid).unwrap_or(-1), 9),
    }
}

fn probe_clone_plain() -> i32 {
    raw_clone(0)
}

fn probe_clone_newuser() -> i32 {
    raw_clone(libc::CLONE_NEWUSER)
}

extern "C" fn thread_main(_: *mut libc::c_void) -> *mut libc::c_void {
    std::ptr::without_provenance_mut(42)
}

fn probe_pthread() -> i32 {
    // glibc's pthread_create tries clone3 first and falls back to clone(2) on ENOSYS.
    // SAFETY: pthread_t is plain data, written by pthread_create before use.
    let mut thread: libc::pthread_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid out pointer, default attributes, a thread function with the C ABI.
    let ret = unsafe {
        libc::pthread_create(
            &mut thread,
            std::ptr::null(),
            thread_main,
            std::ptr::null_mut(),
        )
    };
    if ret != 0 {
        return ret;
    }
    let mut value: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: `thread` was created above and is joined once.
    let ret = unsafe { libc::pthread_join(thread, &mut value) };
    if ret != 0 {
        return ret;
    }
    i32::from(value.addr() != 42)
}

fn probe_posix_spawn() -> i32 {
    // glibc's posix_spawn also goes through clone3 first.
    let path = c"/bin/true";
    let argv = [path.as_ptr().cast_mut(), std::ptr::null_mut()];
    let envp = [std::ptr::null_mut::<libc::c_char>()];
    let mut pid: libc::pid_t = 0;
    // SAFETY: `path`, `argv` and `envp` are NUL-terminated and outlive the call; null
    // file actions and attributes mean defaults.
    let ret = unsafe {
        libc::posix_spawn(
            &mut pid,
            path.as_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            argv.as_ptr(),
            envp.as_ptr(),
        )
    };
    if ret != 0 {
        return ret;
    }
    reap(pid, 0)
}

fn probe_x32_getpid() -> i32 {
    // SAFETY: getpid through the x32 ABI takes no arguments.
    let _ = unsafe { libc::syscall(0x4000_0000 | libc::SYS_getpid) };
    0
}

fn probe_i386_getpid() -> i32 {
    let ret: i32;
    // SAFETY: `int 0x80` with eax = 20 is getpid in the i386 ABI; it reads no memory and
    // the registers it may clobber are declared.
    unsafe {
        std::arch::asm!(
            "int 0x80",
            inlateout("eax") 20i32 => ret,
            out("r8") _, out("r9") _, out("r10") _, out("r11") _,
            options(nostack),
        );
    }
    // SAFETY: getpid has no preconditions.
    i32::from(ret != unsafe { libc::getpid() })
}

// ---------------------------------------------------------------- tests

#[test]
fn getpid_still_works() {
    assert_eq!(filtered(probe_getpid), OK);
    assert_eq!(unfiltered(probe_getpid), OK);
}

#[test]
fn unshare_of_namespaces_is_denied() {
    assert_eq!(unfiltered(probe_unshare_user), OK);
    assert_eq!(filtered(probe_unshare_user), EPERM);
    assert_eq!(unfiltered(probe_unshare_net), OK);
    assert_eq!(filtered(probe_unshare_net), EPERM);
    // unshare without namespace flags stays allowed.
    assert_eq!(filtered(probe_unshare_files), OK);
}

#[test]
fn ptrace_is_denied() {
    assert_eq!(unfiltered(probe_ptrace_traceme), OK);
    assert_eq!(filtered(probe_ptrace_traceme), EPERM);
}

#[test]
fn unix_sockets_are_denied_but_stream_socketpairs_and_inet_work() {
    assert_eq!(unfiltered(probe_socket_unix), OK);
    assert_eq!(filtered(probe_socket_unix), EPERM);
    assert_eq!(filtered(probe_socketpair_unix), OK);
    assert_eq!(filtered(probe_socketpair_unix_seqpacket), OK);
    assert_eq!(filtered(probe_socketpair_unix_stream_flags), OK);
    // Datagram pairs can be aimed at any host datagram socket by path: denied (the controls
    // show the kernel makes them, SOCK_RAW included).
    for probe in [
        probe_socketpair_unix_dgram,
        probe_socketpair_unix_dgram_cloexec,
        probe_socketpair_unix_raw,
    ] {
        assert_eq!(unfiltered(probe), OK);
        assert_eq!(filtered(probe), EPERM);
    }
    assert_eq!(filtered(probe_socket_inet), OK);
    // The domain is what counts, whatever the type (SOCK_STREAM is also 1).
    assert_eq!(unfiltered(probe_socket_unix_dgram), OK);
    assert_eq!(filtered(probe_socket_unix_dgram), EPERM);
    assert_eq!(filtered(probe_socket_inet_stream), OK);
}

#[test]
fn terminal_injection_is_denied() {
    // Root (CAP_SYS_ADMIN) may TIOCSTI into any tty, so the control succeeds.
    assert_eq!(unfiltered(probe_tiocsti), OK);
    assert_eq!(filtered(probe_tiocsti), EPERM);
    // High bits in `cmd` are ignored by the kernel, and by the filter too.
    assert_eq!(unfiltered(probe_tiocsti_high_bits), OK);
    assert_eq!(filtered(probe_tiocsti_high_bits), EPERM);
    // TIOCLINUX on a pty fails without the filter, but not with EPERM.
    let control = unfiltered(probe_tioclinux);
    assert!(matches!(control, Outcome::Exited(code) if code != libc::EPERM && code != 0));
    assert_eq!(filtered(probe_tioclinux), EPERM);
    // Other terminal ioctls stay allowed.
    assert_eq!(filtered(probe_tcgetattr), OK);
}

#[test]
fn keyctl_is_denied() {
    assert_ne!(unfiltered(probe_keyctl), EPERM);
    assert_eq!(filtered(probe_keyctl), EPERM);
}

#[test]
fn io_uring_setup_is_denied() {
    assert_eq!(unfiltered(probe_io_uring_setup), OK);
    assert_eq!(filtered(probe_io_uring_setup), EPERM);
}

#[test]
fn clone3_is_enosys() {
    assert_eq!(unfiltered(probe_clone3), Outcome::Exited(libc::EINVAL));
    assert_eq!(filtered(probe_clone3), Outcome::Exited(libc::ENOSYS));
}

#[test]
fn clone_with_namespace_flags_is_denied() {
    assert_eq!(unfiltered(probe_clone_newuser), OK);
    assert_eq!(filtered(probe_clone_newuser), EPERM);
    assert_eq!(filtered(probe_clone_plain), OK);
}

#[test]
fn fork_threads_and_spawn_still_work() {
    assert_eq!(filtered(probe_fork), OK);
    assert_eq!(filtered(probe_pthread), OK);
    assert_eq!(filtered(probe_posix_spawn), OK);
}

#[test]
fn x32_syscalls_kill_the_process() {
    // This kernel may or may not have the x32 ABI; either way the call returns.
    assert!(matches!(unfiltered(probe_x32_getpid), Outcome::Exited(_)));
    assert_eq!(filtered(probe_x32_getpid), Outcome::Killed(libc::SIGSYS));
}

#[test]
fn i386_syscalls_kill_the_process() {
    let control = unfiltered(probe_i386_getpid);
    if control != OK {
        // Kernel without IA32 emulation: int 0x80 never reaches seccomp.
        eprintln!("skipping: int 0x80 unavailable here ({control:?})");
        return;
    }
    assert_eq!(filtered(probe_i386_getpid), Outcome::Killed(libc::SIGSYS));
}
