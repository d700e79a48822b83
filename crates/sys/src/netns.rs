//! A network namespace held open for a backend that joins one rather than making it (gVisor's
//! `runsc --network=host` uses the network of the namespace it runs in, and `runsc` binds its
//! control socket, an abstract one any process in the namespace can connect to, in the
//! namespace it starts in): only loopback, up, and optionally the proxy's listening socket
//! made inside it and handed to the supervisor.
//!
//! A holder process (a raw fork, allocation-free after the fork) unshares the network
//! namespace (and, for an unprivileged caller, a user namespace that owns it, mapping the
//! caller to 0 as `unshare -r` does), brings loopback up, opens the listener, sends it over a
//! socketpair, and then waits until the supervisor lets it go (end of file on a pipe) or
//! dies (`PR_SET_PDEATHSIG`).

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::raw::c_int;
use std::os::unix::process::CommandExt;
use std::sync::Arc;

use crate::raw;

/// A network namespace with loopback only, kept alive by its holder until dropped.
#[derive(Debug)]
pub struct HeldNetwork {
    pid: libc::pid_t,
    /// Closing it lets the holder exit.
    keep: Option<OwnedFd>,
    join: Join,
}

/// How to enter a [`HeldNetwork`]: its namespaces, open. A clone keeps them open, so that a
/// command built with it may be spawned after the held network itself was dropped.
#[derive(Debug, Clone)]
pub struct Join {
    netns: Arc<OwnedFd>,
    userns: Option<Arc<OwnedFd>>,
}

impl Join {
    /// Makes `cmd` start inside the held namespaces (the user namespace first, when there is
    /// one), as `nsenter -U -n --preserve-credentials` does.
    pub fn on_exec(&self, cmd: &mut std::process::Command) {
        let user = self.userns.clone();
        let net = self.netns.clone();
        // SAFETY: the closure runs in the child between fork and exec and makes only
        // `setns(2)` calls, on descriptors it keeps open itself (its `Arc`s live as long as
        // `cmd`).
        unsafe {
            cmd.pre_exec(move || {
                if let Some(u) = &user {
                    raw::setns(u.as_raw_fd(), libc::CLONE_NEWUSER)?;
                }
                raw::setns(net.as_raw_fd(), libc::CLONE_NEWNET)?;
                Ok(())
            });
        }
    }
}

impl HeldNetwork {
    /// The namespace as a path another process can open while this value lives.
    pub fn netns_path(&self) -> String {
        format!("/proc/{}/ns/net", self.pid)
    }

    /// Makes `cmd` start inside the held namespaces (see [`Join::on_exec`]).
    pub fn join_on_exec(&self, cmd: &mut std::process::Command) {
        self.join.on_exec(cmd);
    }

    /// Enters the held namespaces, for commands spawned later (even after `self` is gone).
    pub fn join(&self) -> Join {
        self.join.clone()
    }
}

impl Drop for HeldNetwork {
    fn drop(&mut self) {
        drop(self.keep.take());
        if self.pid > 0 {
            let _ = raw::waitpid(self.pid, 0);
        }
    }
}

/// Exit codes of the holder, for the error when it fails.
const FAILED_WAIT: c_int = 70;
const FAILED_LOOPBACK: c_int = 71;
const FAILED_LISTEN: c_int = 72;
const FAILED_SEND: c_int = 73;

/// What the holder sends when the namespace is ready and it has no listener to send.
const READY: &[u8] = b"r";

/// The holder's life after the fork: only raw, allocation-free calls.
fn holder(go: c_int, keep: c_int, sock: c_int, proxy: Option<([u8; 4], u16)>) -> ! {
    let _ = raw::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0);
    let mut b = [0u8; 1];
    // Wait until the supervisor has written the id maps.
    if !matches!(raw::read(go, &mut b), Ok(1)) {
        raw::exit(FAILED_WAIT);
    }
    if raw::loopback_up().is_err() {
        raw::exit(FAILED_LOOPBACK);
    }
    match proxy {
        Some((addr, port)) => {
            let Ok(fd) = raw::tcp_listen(addr, port, 128) else {
                raw::exit(FAILED_LISTEN);
            };
            if raw::send_fd(sock, fd).is_err() {
                raw::exit(FAILED_SEND);
            }
            raw::close(fd);
        }
        None => {
            if raw::write_all(sock, READY).is_err() {
                raw::exit(FAILED_SEND);
            }
        }
    }
    raw::close(sock);
    // Until the supervisor closes its end (or dies: PDEATHSIG).
    while let Ok(n) = raw::read(keep, &mut b) {
        if n == 0 {
            break;
        }
    }
    raw::exit(0)
}

fn holder_failure(status: c_int) -> String {
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(FAILED_LOOPBACK) => "bringing loopback up failed".into(),
        Some(FAILED_LISTEN) => "opening the proxy's listening socket failed".into(),
        Some(FAILED_SEND) => "handing over the proxy's socket failed".into(),
        Some(FAILED_WAIT) => "the holder was not told to go on".into(),
        _ => format!("the holder ended with status {status:#x}"),
    }
}

/// Makes a [`HeldNetwork`], with the proxy's listener at `proxy` inside when there is one
/// (returned once the namespace is ready). `user_maps` (`uid_map`, `gid_map`): an
/// unprivileged caller's own user namespace owning it.
pub fn hold_network(
    user_maps: Option<(&str, &str)>,
    proxy: Option<([u8; 4], u16)>,
) -> io::Result<(HeldNetwork, Option<TcpListener>)> {
    let (sock_ours, sock_theirs) = raw::socketpair()?;
    let (go_r, go_w) = raw::pipe()?;
    let (keep_r, keep_w) = raw::pipe()?;
    let flags = libc::CLONE_NEWNET | user_maps.map_or(0, |_| libc::CLONE_NEWUSER);
    let forked = raw::clone_fork(flags);
    match forked {
        Ok(0) => {
            // The child: every descriptor but its three is closed (it must not keep another
            // run's pipes open).
            let keep_fds = [go_r, keep_r, sock_theirs];
            let _ = raw::close_all_but(&keep_fds);
            holder(go_r, keep_r, sock_theirs, proxy)
        }
        Ok(pid) => {
            raw::close(go_r);
            raw::close(keep_r);
            raw::close(sock_theirs);
            // SAFETY: these descriptors were just created here and are owned by nobody else.
            let (sock, keep, go) = unsafe {
                (
                    OwnedFd::from_raw_fd(sock_ours),
                    OwnedFd::from_raw_fd(keep_w),
                    OwnedFd::from_raw_fd(go_w),
                )
            };
            let mut held = HeldNetwork {
                pid,
                keep: Some(keep),
                // Replaced below; a placeholder that is valid to drop.
                join: Join {
                    netns: Arc::new(sock.try_clone()?),
                    userns: None,
                },
            };
            if let Some((uid_map, gid_map)) = user_maps {
                crate::parent::write_id_maps(pid, uid_map, gid_map, true)?;
            }
            raw::write_all(go.as_raw_fd(), b"g")?;
            drop(go);
            let ready = match proxy {
                // SAFETY: the kernel just installed this descriptor for us (SCM_RIGHTS).
                Some(_) => (raw::recv_fd(sock.as_raw_fd())?)
                    .map(|fd| Some(unsafe { TcpListener::from_raw_fd(fd) })),
                None => {
                    let mut b = [0u8; 1];
                    (raw::read(sock.as_raw_fd(), &mut b)? == 1).then_some(None)
                }
            };
            let Some(listener) = ready else {
                drop(held.keep.take());
                let status = raw::waitpid(pid, 0).map(|(_, s)| s).unwrap_or(-1);
                held.pid = -1;
                return Err(io::Error::other(holder_failure(status)));
            };
            let open = |ns: &str| -> io::Result<Arc<OwnedFd>> {
                let f = std::fs::File::open(format!("/proc/{pid}/ns/{ns}"))?;
                Ok(Arc::new(OwnedFd::from(f)))
            };
            held.join = Join {
                netns: open("net")?,
                userns: user_maps.map(|_| open("user")).transpose()?,
            };
            Ok((held, listener))
        }
        Err(e) => {
            for fd in [sock_ours, sock_theirs, go_r, go_w, keep_r, keep_w] {
                raw::close(fd);
            }
            Err(e.into())
        }
    }
}

/// Exit codes of [`listen_in`]'s child, for the error when it fails.
const FAILED_USERNS: c_int = 74;
const FAILED_NETNS: c_int = 75;

/// Opens a listening TCP socket at `addr` in the network namespace `netns` (entering the user
/// namespace `userns` first, when given: the one that owns `netns`, e.g. rootless Podman's),
/// for a backend whose sandbox made its network namespace itself (a container's) before the
/// command starts. A child process enters the namespaces (a multi-threaded process cannot
/// enter a user namespace), opens the socket and hands it over; this process's own namespaces
/// are untouched.
pub fn listen_in(
    userns: Option<std::os::fd::BorrowedFd<'_>>,
    netns: std::os::fd::BorrowedFd<'_>,
    addr: ([u8; 4], u16),
) -> io::Result<TcpListener> {
    let (sock_ours, sock_theirs) = raw::socketpair()?;
    let user = userns.map_or(-1, |f| f.as_raw_fd());
    let net = netns.as_raw_fd();
    match raw::clone_fork(0) {
        Ok(0) => {
            // The child: only raw, allocation-free calls; every descriptor but its own three
            // is closed first.
            // (No -1 among them: `close_all_but` takes every entry as a descriptor.)
            let keep = [sock_theirs, if user >= 0 { user } else { net }, net];
            let _ = raw::close_all_but(&keep);
            let _ = raw::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0);
            if user >= 0 && raw::setns(user, libc::CLONE_NEWUSER).is_err() {
                raw::exit(FAILED_USERNS);
            }
            if raw::setns(net, libc::CLONE_NEWNET).is_err() {
                raw::exit(FAILED_NETNS);
            }
            let Ok(fd) = raw::tcp_listen(addr.0, addr.1, 128) else {
                raw::exit(FAILED_LISTEN);
            };
            if raw::send_fd(sock_theirs, fd).is_err() {
                raw::exit(FAILED_SEND);
            }
            raw::exit(0)
        }
        Ok(pid) => {
            raw::close(sock_theirs);
            // SAFETY: created just above, owned by nobody else.
            let sock = unsafe { OwnedFd::from_raw_fd(sock_ours) };
            let got = raw::recv_fd(sock.as_raw_fd());
            let status = raw::waitpid(pid, 0).map(|(_, s)| s).unwrap_or(-1);
            match got {
                // SAFETY: the kernel just installed this descriptor for us (SCM_RIGHTS).
                Ok(Some(fd)) => Ok(unsafe { TcpListener::from_raw_fd(fd) }),
                _ => Err(io::Error::other(
                    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
                        Some(FAILED_USERNS) => "entering the user namespace failed".into(),
                        Some(FAILED_NETNS) => "entering the network namespace failed".into(),
                        _ => holder_failure(status),
                    },
                )),
            }
        }
        Err(e) => {
            raw::close(sock_ours);
            raw::close(sock_theirs);
            Err(e.into())
        }
    }
}
