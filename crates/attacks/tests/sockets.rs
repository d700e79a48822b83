//! Host Unix sockets (issue 15, item 4): no host Unix socket of any type is reachable from the
//! sandbox by any call sequence. `socket(AF_UNIX)` was refused, but a datagram socket from
//! `socketpair(AF_UNIX, SOCK_DGRAM)` reached any host datagram socket the user may write
//! (`/dev/log`, journald, `$NOTIFY_SOCKET`) with `sendto(path)`, `sendmsg` with an address, or
//! `connect(path)` — network namespace or not.
//!
//! The host side is a small python3 listener ([`HOST_LISTENER`]): a datagram, a stream and a
//! seqpacket socket, bound under the fixture and open to every uid, logging whatever reaches
//! them. The sandboxed snippet ([`SEQUENCES`]) tries every sequence and prints what each
//! did; the host must receive nothing. Control: the same snippet without stockade delivers.
//! What still works inside: stream and seqpacket pairs between the command's own processes.

#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use attacks::{python3, read_text, sh_quote, Cmd, Fixture};

/// `listener.py DIR`: binds `DIR/dgram.sock`, `DIR/stream.sock`, `DIR/seqpacket.sock` (mode
/// 0777), appends every datagram, connection and message to `DIR/received.log`, and creates
/// `DIR/ready` once listening.
const HOST_LISTENER: &str = r#"
import os, select, socket, sys
d = sys.argv[1]
log = open(os.path.join(d, "received.log"), "ab", buffering=0)
socks = {}
for name, ty in (("dgram", socket.SOCK_DGRAM), ("stream", socket.SOCK_STREAM), ("seqpacket", socket.SOCK_SEQPACKET)):
    s = socket.socket(socket.AF_UNIX, ty)
    p = os.path.join(d, name + ".sock")
    s.bind(p)
    os.chmod(p, 0o777)
    if ty != socket.SOCK_DGRAM:
        s.listen(16)
    socks[s] = name
open(os.path.join(d, "ready"), "w").close()
conns = {}
while True:
    r, _, _ = select.select(list(socks) + list(conns), [], [])
    for s in r:
        if s in socks and socks[s] == "dgram":
            log.write(b"dgram: " + s.recv(4096) + b"\n")
        elif s in socks:
            c, _ = s.accept()
            conns[c] = socks[s]
            log.write(b"accepted on " + socks[s].encode() + b"\n")
        else:
            data = s.recv(4096)
            if data:
                log.write(conns[s].encode() + b": " + data + b"\n")
            else:
                del conns[s]
                s.close()
"#;

/// `sequences.py DIR MARKER`: every way to a Unix socket path this test knows, each tagged;
/// prints `TAG: sent` or `TAG: refused (error)` and sends `MARKER TAG`.
const SEQUENCES: &str = r#"
import os, socket, sys
d, marker = sys.argv[1], sys.argv[2]
dgram, stream, seqpacket = (os.path.join(d, n + ".sock") for n in ("dgram", "stream", "seqpacket"))
ALL = ((dgram, "dgram"), (stream, "stream"), (seqpacket, "seqpacket"))
TYPES = (("dgram", socket.SOCK_DGRAM), ("dgram-cloexec", socket.SOCK_DGRAM | socket.SOCK_CLOEXEC),
         ("raw", socket.SOCK_RAW), ("stream", socket.SOCK_STREAM), ("seqpacket", socket.SOCK_SEQPACKET),
         ("stream-nonblock", socket.SOCK_STREAM | socket.SOCK_NONBLOCK))

def attempt(tag, fn):
    msg = ("%s %s" % (marker, tag)).encode()
    try:
        fn(msg)
        print("%s: sent" % tag)
    except OSError as e:
        print("%s: refused (%s)" % (tag, e))

def pair(ty):
    a, b = socket.socketpair(socket.AF_UNIX, ty)
    return a

for tname, ty in TYPES:
    for path, pname in ALL:
        attempt("pair-%s-sendto-%s" % (tname, pname), lambda m: pair(ty).sendto(m, path))
        attempt("pair-%s-sendmsg-%s" % (tname, pname), lambda m: pair(ty).sendmsg([m], [], 0, path))
        def connect_send(m):
            s = pair(ty)
            s.connect(path)
            s.send(m)
        attempt("pair-%s-connect-%s" % (tname, pname), connect_send)
        def bind_connect(m):
            s = pair(ty)
            s.bind(os.path.join(os.getcwd(), ".bound-%s-%s-%d" % (tname, pname, os.getpid())))
            s.connect(path)
            s.send(m)
        attempt("pair-%s-bind-connect-%s" % (tname, pname), bind_connect)
        def direct(m):
            s = socket.socket(socket.AF_UNIX, ty)
            s.settimeout(5)
            if ty & 0xf == socket.SOCK_DGRAM:
                s.sendto(m, path)
            else:
                s.connect(path)
                s.send(m)
        attempt("socket-%s-%s" % (tname, pname), direct)

# A stream pair still works between the command's own processes.
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
if os.fork() == 0:
    b.send(b"hello from the child")
    os._exit(0)
print("own pair:", a.recv(100).decode())
os.wait()
"#;

/// `passfd.py DIR FD ARGV...`: an unconnected datagram socket as descriptor FD (inheritable)
/// of ARGV, which is told its number in `$SOCK_FD`.
const PASS_FD: &str = r#"
import os, socket, sys
fd = int(sys.argv[2])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
os.dup2(s.fileno(), fd)
os.set_inheritable(fd, True)
s.close()
os.execvp(sys.argv[3], sys.argv[3:])
"#;

struct Host {
    child: Child,
    dir: PathBuf,
}

impl Host {
    fn start(fx: &Fixture, py: &Path) -> Host {
        let dir = fx.root.join("sockets");
        attacks::mkdir(&dir);
        attacks::chmod(&dir, 0o777);
        let listener = fx.script("unix_listener.py", HOST_LISTENER);
        let child = Command::new(py)
            .arg(&listener)
            .arg(&dir)
            .stdin(Stdio::null())
            .spawn()
            .expect("start the host listener");
        let start = Instant::now();
        while !dir.join("ready").exists() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the host listener did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Host { child, dir }
    }

    fn received(&self) -> String {
        std::thread::sleep(Duration::from_millis(200));
        read_text(&self.dir.join("received.log")).unwrap_or_default()
    }

    fn clear(&self) {
        let _ = std::fs::write(self.dir.join("received.log"), "");
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every sequence of [`SEQUENCES`], sandboxed with each network mode: the host receives
/// nothing, and only the socketpair-internal exchange works. Control: on the host the
/// datagram-pair sequences (the escape) and the plain `socket` ones deliver.
#[test]
fn no_host_unix_socket_is_reachable_by_any_sequence() {
    let Some(py) = python3("host unix sockets") else {
        return;
    };
    let fx = Fixture::new();
    let host = Host::start(&fx, &py);
    let seq = fx.script("unix_sequences.py", SEQUENCES);
    let marker = fx.marker("unixseq");
    let script = format!(
        "{} {} {} {}",
        sh_quote(&py),
        sh_quote(&seq),
        sh_quote(&host.dir),
        sh_quote(&marker)
    );
    // Each sequence starts processes: under gVisor (ptrace platform here) that is slow.
    let timeout = match attacks::backend() {
        "gvisor" => std::time::Duration::from_secs(150),
        _ => attacks::TIMEOUT,
    };
    for net in ["none", "proxy", "host"] {
        host.clear();
        let outcome = fx
            .attack(&attacks::net(net), &script)
            .timeout(timeout)
            .outcome();
        outcome.assert_ok();
        let got = host.received();
        assert!(
            !got.contains(&marker),
            "--net {net}: the host received: {got}\n{}",
            outcome.run.describe()
        );
        outcome.assert_output_contains("own pair: hello from the child");
        outcome.assert_lacks(": sent");
    }

    host.clear();
    let control = fx.control(&script).outcome();
    control.assert_ok();
    let got = host.received();
    for tag in [
        "pair-dgram-sendto-dgram",
        "pair-dgram-sendmsg-dgram",
        "pair-dgram-connect-dgram",
        "pair-raw-sendto-dgram",
        "socket-stream-stream",
        "socket-seqpacket-seqpacket",
    ] {
        assert!(
            got.contains(&format!("{marker} {tag}")),
            "control: {tag} did not reach the host: {got}\n{}",
            control.run.describe()
        );
    }
    // The kernel itself keeps stream and seqpacket pairs to each other.
    for tag in [
        "pair-stream-sendto-dgram",
        "pair-stream-connect-stream",
        "pair-seqpacket-sendmsg-dgram",
        "pair-seqpacket-connect-seqpacket",
        "pair-stream-bind-connect-stream",
    ] {
        control.assert_output_contains(&format!("{tag}: refused"));
    }
}

/// A host datagram socket the caller passes in as an inherited descriptor (fd 7) is closed
/// before the command starts. Control: without stockade the command sends through it.
#[test]
fn inherited_host_socket_is_closed() {
    let Some(py) = python3("inherited unix socket") else {
        return;
    };
    let fx = Fixture::new();
    let host = Host::start(&fx, &py);
    let pass = fx.script("passfd.py", PASS_FD);
    let marker = fx.marker("passedfd");
    let code = format!(
        "import socket\n\
         s = socket.socket(fileno=7)\n\
         s.sendto(b'{marker} via fd 7', {dgram:?})\n\
         print('sent')\n",
        dgram = host.dir.join("dgram.sock").display().to_string(),
    );
    let script = format!("{} -c {}", sh_quote(&py), sh_quote(&code));
    let wrapper = [
        py.as_os_str(),
        pass.as_os_str(),
        host.dir.as_os_str(),
        "7".as_ref(),
    ];
    let outcome = fx.attack(&[], &script).under(&wrapper).outcome();
    outcome
        .assert_failed()
        .assert_output_contains("Bad file descriptor");
    let got = host.received();
    assert!(!got.contains(&marker), "the host received: {got}");
    fx.control(&script)
        .under(&wrapper)
        .outcome()
        .assert_shows("sent");
    assert!(
        host.received().contains(&marker),
        "control: nothing arrived"
    );
}

/// The caller's stdin or stdout being a socket the command could aim elsewhere (here an
/// unconnected Unix datagram socket; inetd hands UDP services such a socket as stdin): stdin
/// is refused (`E_PROTECTION_UNAVAILABLE`, naming the fix; under gVisor it is copied through
/// a pipe instead, and the run ends with its command), stdout is relayed through a pipe even
/// with `--output-limit 0`. A connected stream socket (what libuv gives a child as stdio)
/// still passes. Control: without stockade the command sends through them.
#[test]
fn caller_sockets_on_stdio_are_not_handed_over() {
    let Some(py) = python3("unix sockets on stdio") else {
        return;
    };
    let fx = Fixture::new();
    let host = Host::start(&fx, &py);
    let pass = fx.script("passfd.py", PASS_FD);
    let dgram = host.dir.join("dgram.sock").display().to_string();
    for fd in ["0", "1"] {
        let marker = fx.marker(&format!("stdio{fd}"));
        let code = format!(
            "import socket, sys\n\
             s = socket.socket(fileno={fd})\n\
             s.sendto(b'{marker} via fd {fd}', {dgram:?})\n\
             sys.stderr.write('sent through fd {fd}\\n')\n"
        );
        let argv = [py.to_str().unwrap_or("python3"), "-c", &code];
        let wrapper = [
            py.as_os_str(),
            pass.as_os_str(),
            host.dir.as_os_str(),
            fd.as_ref(),
        ];
        let run = fx
            .sandbox_argv(&["--output-limit", "0"], &argv)
            .under(&wrapper)
            .run();
        let got = host.received();
        assert!(
            !got.contains(&marker),
            "fd {fd}: the host received {got}\n{}",
            run.describe()
        );
        // gVisor and the container engines never hand a stream over: stdin too is copied
        // through a pipe (ENOTSOCK inside), and the run ends with its command though the
        // socket stays open.
        if fd == "0" && attacks::backend() == "native" {
            run.assert_code(125)
                .assert_stderr_contains("E_PROTECTION_UNAVAILABLE")
                .assert_stderr_contains("stdin is a socket");
        } else {
            run.assert_failure().assert_lacks("sent through");
        }
        let control = Cmd::new(&py, &fx.ws).args(&argv[1..]).under(&wrapper).run();
        control
            .assert_success()
            .assert_stderr_contains("sent through");
        assert!(
            host.received().contains(&marker),
            "control: nothing arrived through fd {fd}"
        );
    }
    // A connected stream socketpair as stdin is what libuv gives its children: it passes.
    let pair_stdin = "import os, socket, sys\n\
                      a, b = socket.socketpair()\n\
                      b.sendall(b'through-the-pair\\n'); b.close()\n\
                      os.dup2(a.fileno(), 0)\n\
                      os.execvp(sys.argv[1], sys.argv[1:])\n";
    fx.sandbox_argv(&[], &["cat"])
        .under(&[py.as_os_str(), "-c".as_ref(), pair_stdin.as_ref()])
        .run()
        .assert_success()
        .assert_stdout_contains("through-the-pair");
}
