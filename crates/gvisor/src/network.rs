//! The network namespace a run, or a platform probe, holds for runsc: runsc binds its control
//! socket (`@runsc-sandbox.ID`, abstract: any process in the namespace can connect to it,
//! whoever runs it, and have the sandbox run a command) in the namespace it starts in, so it
//! starts in one of the run's own (see `Plan::control_held`).

/// A network namespace with only loopback, owned by the caller's own user namespace (the
/// caller mapped to 0) when the caller is not root, with the proxy's listener at `listen` in
/// it when asked.
pub(crate) fn hold(
    listen: Option<([u8; 4], u16)>,
) -> std::io::Result<(sys::netns::HeldNetwork, Option<std::net::TcpListener>)> {
    let (uid, gid) = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    let maps = (uid != 0).then(|| (format!("0 {uid} 1\n"), format!("0 {gid} 1\n")));
    sys::netns::hold_network(maps.as_ref().map(|(u, g)| (u.as_str(), g.as_str())), listen)
}
