//! Test hosts of a test's own (root only): two network namespaces joined by a veth pair, the
//! *client* side (198.51.100.1/24, plus 10.1.2.3/32 and 169.254.169.254/32 on its loopback,
//! and no route anywhere else) where stockade runs, and the *server* side (198.51.100.2/24)
//! where a test's servers listen. Names resolve through a hosts file and a resolv.conf of the
//! test's, bind-mounted in a mount namespace of the run only ([`TestNet::prefix`]): the real
//! files are never touched, and nothing is ever sent to any other address.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test harness: panicking with a message is how it reports a failure"
)]

use std::fs;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;

use crate::{unique, which, write_file, Cmd, Fixture};

/// The client side of a [`TestNet`] (where stockade runs).
pub const CLIENT_IP: &str = "198.51.100.1";
/// The server side of a [`TestNet`].
pub const SERVER_IP: &str = "198.51.100.2";

/// Two network namespaces of the test's own, joined by a veth pair: the client side
/// (198.51.100.1/24, plus 10.1.2.3/32 and 169.254.169.254/32 on its loopback, and no other
/// route) where stockade runs, and the server side (198.51.100.2/24). Deleted on drop.
pub struct TestNet {
    /// The client namespace's name (under `/run/netns`).
    pub client: String,
    /// The server namespace's name.
    pub server: String,
}

impl TestNet {
    #[allow(
        clippy::new_without_default,
        reason = "it creates namespaces: not a default"
    )]
    pub fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let id = format!(
            "{:x}x{}",
            std::process::id() & 0xf_ffff,
            N.fetch_add(1, Ordering::Relaxed)
        );
        let net = Self {
            client: format!("stkc{id}"),
            server: format!("stks{id}"),
        };
        let (vc, vs) = (format!("vc{id}"), format!("vs{id}"));
        let (c, s) = (net.client.as_str(), net.server.as_str());
        ip(&["netns", "add", c]);
        ip(&["netns", "add", s]);
        ip(&[
            "link", "add", &vc, "netns", c, "type", "veth", "peer", "name", &vs, "netns", s,
        ]);
        for (ns, dev, addr) in [(c, &vc, CLIENT_IP), (s, &vs, SERVER_IP)] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&["-n", c, "addr", "add", "10.1.2.3/32", "dev", "lo"]);
        ip(&["-n", c, "addr", "add", "169.254.169.254/32", "dev", "lo"]);
        net
    }

    /// Runs `f` on a thread that has joined namespace `ns` (sockets made there stay there).
    pub fn within<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{ns}");
        thread::spawn(move || {
            let file = fs::File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
            // SAFETY: setns only reads the descriptor; it changes this thread's namespace.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("netns thread")
    }

    pub fn tcp(ns: &str, addr: &str) -> TcpListener {
        let addr = addr.to_owned();
        Self::within(ns, move || {
            TcpListener::bind(&addr).unwrap_or_else(|e| panic!("bind {addr} in netns: {e}"))
        })
    }

    /// A prefix for [`Cmd::under`](crate::Cmd::under): run in the client namespace, with `hosts` and a
    /// resolv.conf naming 198.51.100.2 bind-mounted in a private mount namespace.
    pub fn prefix(&self, fx: &Fixture, hosts: &str) -> Vec<String> {
        let dir = fx.root.join(format!("etc-{}", unique()));
        let (h, r) = (dir.join("hosts"), dir.join("resolv.conf"));
        write_file(&h, hosts, 0o644);
        write_file(
            &r,
            format!("nameserver {SERVER_IP}\noptions timeout:1 attempts:1\n"),
            0o644,
        );
        let tool = |name: &str| {
            which(name)
                .unwrap_or_else(|| panic!("{name} not installed"))
                .display()
                .to_string()
        };
        vec![
            tool("nsenter"),
            format!("--net=/run/netns/{}", self.client),
            "--".into(),
            tool("unshare"),
            "--mount".into(),
            "--".into(),
            "/bin/sh".into(),
            "-c".into(),
            r#"mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@""#
                .into(),
            "sh".into(),
            h.display().to_string(),
            r.display().to_string(),
        ]
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        for ns in [&self.client, &self.server] {
            let _ = Command::new(which("ip").unwrap_or_else(|| "ip".into()))
                .args(["netns", "del", ns])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn ip(args: &[&str]) {
    let ip = which("ip").expect("ip (iproute2) not installed");
    Cmd::new(ip, Path::new("/"))
        .args(args)
        .run()
        .assert_success();
}
