//! Kernel attack surface filtered by seccomp and the namespaces: ptrace, new user
//! namespaces, mount, io_uring, keyctl, bpf, perf_event_open, userfaultfd, TIOCSTI terminal
//! injection, host Unix sockets (path and abstract), host loopback services, interfaces.
//!
//! Syscall probes run through a small python3 script; each prints `NAME: ok` or
//! `NAME: errno E...` and exits 0 or 1.

use std::io::Write;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::thread;

use attacks::{chmod, is_root, python3, sh_quote, which, Fixture};

const PROBE: &str = r#"
import ctypes, errno, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long

def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(L(nr), *args)
    return r, ctypes.get_errno()

name = sys.argv[1]
if name == "io_uring_setup":
    params = ctypes.create_string_buffer(120)
    r, e = call(425, L(8), params)
elif name == "keyctl":
    # KEYCTL_GET_KEYRING_ID of KEY_SPEC_USER_KEYRING, do not create.
    r, e = call(250, L(0), L(-4), L(0))
elif name == "add_key":
    r, e = call(248, b"user", b"stockade-attacks", b"x", L(1), L(-2))
elif name == "bpf":
    # BPF_MAP_CREATE: an array map of one 4-byte entry.
    attr = (ctypes.c_uint32 * 32)(2, 4, 4, 1)
    r, e = call(321, L(0), attr, L(ctypes.sizeof(attr)))
elif name == "perf_event_open":
    attr = ctypes.create_string_buffer(128)
    # PERF_TYPE_SOFTWARE, size, PERF_COUNT_SW_TASK_CLOCK; disabled|exclude_kernel|exclude_hv.
    struct.pack_into("<IIQ", attr, 0, 1, 128, 1)
    struct.pack_into("<Q", attr, 40, 1 | (1 << 5) | (1 << 6))
    r, e = call(298, attr, L(0), L(-1), L(-1), L(0))
elif name == "userfaultfd":
    # UFFD_USER_MODE_ONLY | O_CLOEXEC (allowed for unprivileged users since 5.11).
    r, e = call(323, L(1 | os.O_CLOEXEC))
elif name == "ptrace_traceme":
    r, e = call(101, L(0), L(0), L(0), L(0))
else:
    sys.exit(f"unknown probe {name}")
if r >= 0:
    print(f"{name}: ok")
    sys.exit(0)
print(f"{name}: errno {errno.errorcode.get(e, e)}")
sys.exit(1)
"#;

fn probe_script(fx: &Fixture, py: &std::path::Path) -> String {
    let path = fx.script("probe.py", PROBE);
    format!("{} {}", sh_quote(py), sh_quote(path))
}

/// The probe must fail inside; on the host it must work, unless `host_may_refuse` (the host
/// kernel refuses an unprivileged caller by itself), in which case the control is skipped.
fn syscall_blocked(name: &str, host_may_refuse: bool) {
    let Some(py) = python3(name) else {
        return;
    };
    let fx = Fixture::new();
    let script = format!("{} {name}", probe_script(&fx, &py));
    let inside = fx.attack(&[], &script).outcome();
    inside
        .assert_failed()
        .assert_output_contains(&format!("{name}: errno"));
    let host = fx.control(&script).outcome();
    if host.rc != Some(0) && host_may_refuse && !is_root() {
        println!(
            "skipped: needs root caller: the host kernel refuses {name} to this user: {}",
            host.run.stdout.trim()
        );
        return;
    }
    host.assert_shows(&format!("{name}: ok"));
}

#[test]
fn ptrace_is_denied() {
    if attacks::not_applicable(&attacks::na::SENTRY) {
        return;
    }
    let fx = Fixture::new();
    if let Some(strace) = which("strace") {
        let script = format!("{} -f -o strace.log true", sh_quote(&strace));
        fx.attack(&[], &script)
            .outcome()
            .assert_failed()
            .assert_output_contains("ptrace");
        fx.control(&script).outcome().assert_ok();
    } else {
        println!("skipped: strace not installed, probing ptrace(PTRACE_TRACEME) instead");
    }
    syscall_blocked("ptrace_traceme", false);
}

#[test]
fn new_user_namespace_is_denied() {
    if attacks::not_applicable(&attacks::na::SENTRY) {
        return;
    }
    let fx = Fixture::new();
    for script in [
        "unshare -U true",
        "unshare -r id -u",
        "unshare -U -m -n true",
    ] {
        fx.attack(&[], script).outcome().assert_failed();
    }
    fx.control("unshare -U true").outcome().assert_ok();
}

/// Is `path` a mount point in the test's (the host's) mount namespace?
fn host_mount_point(path: &std::path::Path) -> bool {
    let needle = format!(" {} ", path.display());
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|m| m.contains(&needle))
}

#[test]
fn mount_is_denied() {
    let fx = Fixture::new();
    // The target is a fixture directory, not /mnt: if the sandbox were broken, a root
    // caller's mount would land on the host, where the test removes it again.
    let target = fx.root.join("mnt");
    attacks::mkdir(&target);
    let t = sh_quote(&target);
    for script in [
        format!("mount -t tmpfs none {t}"),
        format!("mount --bind {} {t}", sh_quote(&fx.ws)),
    ] {
        let inside = fx.attack(&[], &script).outcome();
        let leaked = host_mount_point(&target);
        while host_mount_point(&target) {
            let c = std::ffi::CString::new(target.as_os_str().as_encoded_bytes()).expect("path");
            // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
                break;
            }
        }
        assert!(!leaked, "`{script}` inside mounted on the host");
        inside.assert_failed();
    }
    // Control, in a private mount namespace so the host is untouched.
    let t = target.display();
    fx.control(&format!(
        "unshare -r -m sh -c 'mount -t tmpfs none {t} && umount {t}'"
    ))
    .outcome()
    .assert_ok();
}

#[test]
fn io_uring_is_denied() {
    if attacks::not_applicable(&attacks::na::SENTRY) {
        return;
    }
    syscall_blocked("io_uring_setup", false);
}

#[test]
fn keyctl_and_add_key_are_denied() {
    syscall_blocked("keyctl", false);
    // add_key plants a key in the caller's session keyring on the host: probe it inside only.
    let Some(py) = python3("add_key") else {
        return;
    };
    let fx = Fixture::new();
    let script = format!("{} add_key", probe_script(&fx, &py));
    fx.attack(&[], &script)
        .outcome()
        .assert_failed()
        .assert_output_contains("add_key: errno");
}

#[test]
fn bpf_is_denied() {
    syscall_blocked("bpf", true);
}

#[test]
fn perf_event_open_is_denied() {
    syscall_blocked("perf_event_open", true);
}

#[test]
fn userfaultfd_is_denied() {
    syscall_blocked("userfaultfd", true);
}

const TIOCSTI: &str = r#"
import fcntl, os, pty, sys, termios
pid, fd = pty.fork()
if pid == 0:
    # Child: its stdin is a fresh pty, which is also its controlling terminal.
    os.write(1, b"child-on-pty\n")
    try:
        fcntl.ioctl(0, termios.TIOCSTI, b"x")
    except OSError as e:
        os.write(1, f"TIOCSTI failed: {e}\n".encode())
        os._exit(1)
    os.write(1, b"TIOCSTI injected\n")
    os._exit(0)
out = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status))
"#;

#[test]
fn tiocsti_terminal_injection_is_denied() {
    if attacks::not_applicable(&attacks::na::PIPES) {
        return;
    }
    let Some(py) = python3("TIOCSTI") else {
        return;
    };
    let fx = Fixture::new();
    let path = fx.script("tiocsti.py", TIOCSTI);
    let script = format!("{} {}", sh_quote(&py), sh_quote(path));
    fx.attack(&[], &script)
        .outcome()
        .assert_failed()
        .assert_output_contains("TIOCSTI failed")
        .assert_lacks("TIOCSTI injected");
    let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
        .map(|s| s.trim() == "1")
        .unwrap_or(true);
    if !legacy && !is_root() {
        println!(
            "skipped: needs root caller: dev.tty.legacy_tiocsti=0 refuses TIOCSTI to this user"
        );
        return;
    }
    fx.control(&script)
        .outcome()
        .assert_shows("TIOCSTI injected");
}

const UNIX_CLIENT: &str = r#"
import socket, sys
addr = sys.argv[1]
if addr.startswith("@"):
    addr = "\0" + addr[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(addr)
print(s.recv(200).decode())
"#;

/// Serves `payload` to every connection on `listener`, forever (the thread dies with the
/// test process).
fn serve_unix(listener: UnixListener, payload: String) {
    thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.write_all(payload.as_bytes());
        }
    });
}

#[test]
fn host_unix_sockets_are_unreachable() {
    let Some(py) = python3("unix socket client") else {
        return;
    };
    let fx = Fixture::new();
    let client = fx.script("unix_client.py", UNIX_CLIENT);
    // A socket file the host listens on, open to every uid.
    let sock: PathBuf = fx.root.join("host.sock");
    let listener = UnixListener::bind(&sock).expect("bind unix socket");
    chmod(&sock, 0o777);
    let marker = fx.marker("unixsock");
    serve_unix(listener, marker.clone());
    // An abstract socket (not a file at all: only the network namespace hides it).
    let abstract_name = format!("stockade-attacks-{}", fx.id);
    let abstract_addr = {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
            .expect("abstract address")
    };
    let abstract_listener = UnixListener::bind_addr(&abstract_addr).expect("bind abstract");
    let abstract_marker = fx.marker("abstractsock");
    serve_unix(abstract_listener, abstract_marker.clone());

    for (addr, marker) in [
        (sock.display().to_string(), &marker),
        (format!("@{abstract_name}"), &abstract_marker),
    ] {
        let script = format!(
            "{} {} {}",
            sh_quote(&py),
            sh_quote(&client),
            sh_quote(&addr)
        );
        fx.attack(&[], &script)
            .outcome()
            .assert_blocked(marker)
            // python ran and got an OS error (not, say, a missing interpreter).
            .assert_output_contains("[Errno");
        fx.control(&script).outcome().assert_shows(marker);
    }
}

#[test]
fn host_loopback_services_are_unreachable() {
    let fx = Fixture::new();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    let marker = fx.marker("tcp");
    let payload = marker.clone();
    thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.write_all(payload.as_bytes());
        }
    });
    let script = format!("timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && cat <&3'");
    fx.attack(&[], &script)
        .outcome()
        .assert_blocked(&marker)
        // bash really tried to connect.
        .assert_output_contains("/dev/tcp");
    fx.control(&script).outcome().assert_shows(&marker);
}

#[test]
fn only_the_loopback_interface_exists_inside() {
    let fx = Fixture::new();
    let script = "awk -F: 'NR > 2 { gsub(/ /, \"\", $1); print \"if=\" $1 }' /proc/net/dev";
    let inside = fx.attack(&[], script).outcome();
    inside.assert_ok();
    let ifaces: Vec<&str> = inside
        .run
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("if="))
        .collect();
    assert_eq!(
        ifaces,
        ["lo"],
        "interfaces inside\n{}",
        inside.run.describe()
    );
    let host = fx.control(script).outcome();
    host.assert_ok();
    let host_ifaces = host
        .run
        .stdout
        .lines()
        .filter(|l| l.starts_with("if="))
        .count();
    if host_ifaces < 2 {
        println!("skipped: the host has only a loopback interface: no control");
    }
}
