//! The resolved spec of a run: the policy, the request and the workspace scan made into one
//! [`sandbox::Spec`], once, before any backend sees it. Everything the backends lower comes
//! from here: which paths are writable, masked, protected and pinned, the environment, the
//! network intent and the limits as numbers.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use policy::{is_within, Policy};
use sandbox::{Ids, Mask, Spec};

use crate::host::{HostView, Kind};
use crate::{DenyGlobs, Place, Scan, ScanError, SweepPlan};

/// Hostname inside the sandbox.
pub const SANDBOX_HOSTNAME: &str = "stockade";

/// What the caller asked to run, and where.
#[derive(Debug, Clone)]
pub struct Request {
    /// Program and arguments (`--shell S` is `["/bin/sh", "-c", S]`).
    pub argv: Vec<String>,
    /// Canonical workspace directory.
    pub workspace: PathBuf,
    /// Canonical current directory of the caller.
    pub cwd: PathBuf,
    pub home: PathBuf,
    pub uid: u32,
    pub gid: u32,
    /// The caller's environment.
    pub env: Vec<(OsString, OsString)>,
}

impl Request {
    /// Where the run is, as the workspace scan needs it.
    pub fn place(&self) -> Place {
        Place {
            workspace: self.workspace.clone(),
            uid: self.uid,
            home: self.home.clone(),
            xdg_config_home: self
                .env
                .iter()
                .find(|(k, _)| k == "XDG_CONFIG_HOME")
                .map(|(_, v)| PathBuf::from(v)),
            path_dirs: self
                .env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| std::env::split_paths(v).collect())
                .unwrap_or_default(),
        }
    }
}

/// A run's spec, and what the checks after the run compare against.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub spec: Spec,
    pub watch: Watch,
}

/// What only the sweep after the run reads of the scan (the rest of it is in the spec).
#[derive(Debug, Clone)]
pub struct Watch {
    pub sweep: SweepPlan,
    pub deny_globs: DenyGlobs,
}

impl Resolved {
    /// The spec of running `req` under `policy`, with the workspace scanned once.
    pub fn new(policy: &Policy, req: &Request, host: &dyn HostView) -> Result<Resolved, ScanError> {
        Resolved::new_cached(policy, req, host, None)
    }

    /// [`Resolved::new`] with the walk cache of earlier runs (see [`Scan::new_cached`]).
    pub fn new_cached(
        policy: &Policy,
        req: &Request,
        host: &dyn HostView,
        cache: Option<&mut crate::walk_cache::WalkCache>,
    ) -> Result<Resolved, ScanError> {
        let program = req.argv.first().ok_or(ScanError::NoProgram)?;
        if program.is_empty() {
            return Err(ScanError::NoProgram);
        }
        let scan = Scan::new_cached(policy, &req.place(), host, cache)?;
        let network = match policy.network.mode {
            policy::NetworkMode::None => sandbox::Network::None,
            policy::NetworkMode::Proxy => sandbox::Network::Proxy {
                addr: sandbox::PROXY_ADDR,
            },
            policy::NetworkMode::Host => sandbox::Network::Host,
        };
        let mut env = environment(policy, req);
        if let sandbox::Network::Proxy { addr } = network {
            for (k, v) in proxy_env(addr, policy) {
                env.retain(|(name, _)| *name != k);
                env.push((k, v));
            }
            env.sort();
        }
        let mask = |(path, kind): &(PathBuf, Kind), readable: bool| Mask {
            path: path.clone(),
            kind: if *kind == Kind::Dir {
                sandbox::Kind::Dir
            } else {
                sandbox::Kind::File
            },
            readable,
        };
        let masks = (scan.masks.iter().map(|m| mask(m, false)))
            .chain(scan.emptied.iter().map(|m| mask(m, true)))
            .collect();
        let private_dirs = private_dirs(policy, req, host, &scan.writable_roots)?;
        let spec = Spec {
            argv: req.argv.clone(),
            cwd: req.cwd.clone(),
            workspace: req.workspace.clone(),
            home: req.home.clone(),
            env,
            hostname: SANDBOX_HOSTNAME.into(),
            read_scope: match policy.filesystem.read_scope {
                policy::ReadScope::Host => sandbox::ReadScope::Host,
                policy::ReadScope::AllowList => sandbox::ReadScope::AllowList,
            },
            read_grants: scan.allows,
            writable_roots: scan.writable_roots,
            protected: scan.protected.into_iter().collect(),
            pins: scan.pins.into_iter().collect(),
            guard: scan.guard,
            guard_sweep_only: scan.sweep_only,
            masks,
            private_dirs,
            linked_secrets: scan.linked_secrets,
            credential_routes: false,
            network,
            limits: limits(&policy.limits, host)?,
            caller: Ids {
                uid: req.uid,
                gid: req.gid,
            },
            review: None,
            identities: scan.identities,
        };
        let watch = Watch {
            sweep: scan.sweep,
            deny_globs: scan.deny_globs,
        };
        Ok(Resolved { spec, watch })
    }

    /// Pins every directory between a writable root and `path` (none may be renamed during the
    /// run): `path` itself may be kept read-only, but renaming one of its parents would move
    /// it away whole (the trust store: its approvals would vanish and the workspaces they
    /// gate would run un-gated).
    /// Records `dir`, a directory of stockade's own that the supervisor writes into while the
    /// run lasts (masked from the command), with its identity: the checks after the run do
    /// not take that same directory for one the run created ([`SweepPlan::own`]).
    pub fn own_dir(&mut self, dir: &Path, host: &dyn HostView) {
        if host.lstat_kind(dir) != Some(Kind::Dir) {
            return;
        }
        if let Some(e) = host.stat(dir) {
            self.watch
                .sweep
                .own
                .insert(dir.to_path_buf(), (e.dev, e.ino));
        }
    }

    pub fn pin_ancestors(&mut self, path: &Path, host: &dyn HostView) {
        let spec = &mut self.spec;
        let mut pins: Vec<PathBuf> = path
            .ancestors()
            .skip(1)
            .filter(|a| (spec.writable_roots.iter()).any(|w| is_within(a, w) && *a != w.as_path()))
            .filter(|a| host.lstat_kind(a) == Some(Kind::Dir))
            .map(Path::to_path_buf)
            .collect();
        pins.reverse();
        for p in pins {
            if let Some(e) = host.stat(&p) {
                spec.identities.insert(p.clone(), (e.dev, e.ino));
            }
            if !spec.pins.contains(&p) {
                spec.pins.push(p);
            }
        }
    }
}

/// The policy's limits as numbers: sizes parsed, a share of memory made bytes of this
/// machine's, `0` (no limit) made `None`.
fn limits(limits: &policy::Limits, host: &dyn HostView) -> Result<sandbox::Limits, ScanError> {
    let typed = limits.typed()?;
    Ok(sandbox::Limits {
        timeout: typed.timeout,
        tmp_bytes: typed.tmp_bytes,
        files: typed.files,
        memory_bytes: match typed.memory {
            Some(policy::MemoryLimit::Bytes(b)) => Some(b),
            // A share of an unknown total is no limit rather than a limit of nothing.
            Some(policy::MemoryLimit::Percent(p)) => {
                Some(mem_total(host) / 100 * u64::from(p)).filter(|b| *b > 0)
            }
            None => None,
        },
        pids: typed.pids,
        cpu_millis: typed.cpu_millis,
        output_bytes: typed.output_bytes,
        disk_bytes: typed.disk_bytes,
    })
}

/// Physical memory in bytes (`MemTotal` of `/proc/meminfo`); 0 when unknown.
fn mem_total(host: &dyn HostView) -> u64 {
    host.read_small(Path::new("/proc/meminfo"))
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// `filesystem.private`, each an exact path inside a writable root (canonical when it exists:
/// it is made before a run, see `filesystem.created_roots`).
fn private_dirs(
    policy: &Policy,
    req: &Request,
    host: &dyn HostView,
    writable_roots: &[PathBuf],
) -> Result<Vec<PathBuf>, crate::ScanError> {
    let ctx = policy::PathContext {
        home: req.home.clone(),
        workspace: req.workspace.clone(),
        writable_roots: Vec::new(),
    };
    let mut out = Vec::new();
    for entry in &policy.filesystem.private {
        for pat in policy::expand(entry, &ctx)? {
            let policy::PathPattern::Exact(p) = pat else {
                continue;
            };
            // A link there would take the tmpfs elsewhere, or leave the host's directory in
            // reach when the mount is skipped: refused, never passed over.
            let canonical = host.canonicalize(&p);
            let parent = p.parent().and_then(|d| host.canonicalize(d));
            if let (Some(c), Some(parent), Some(name)) = (&canonical, parent, p.file_name()) {
                if *c != parent.join(name) {
                    return Err(crate::ScanError::PrivateDirLink(p));
                }
            }
            let p = canonical.unwrap_or(p);
            if writable_roots.iter().any(|w| is_within(&p, w) && p != *w) && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// The command's environment: the policy's filter of the caller's, with `TMPDIR`, `PWD`, and
/// `HOME` and `PATH` when missing.
fn environment(policy: &Policy, req: &Request) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = policy::build_env(&policy.env, req.env.iter().cloned())
        .into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    // A value the policy sets that starts with `~/` is in the caller's home (a preset's
    // `CLAUDE_CONFIG_DIR = "~/.claude"`), as a shell would read it.
    for (name, value) in env.iter_mut() {
        if let (Some(rest), true) = (value.strip_prefix("~/"), policy.env.set.contains_key(name)) {
            *value = req.home.join(rest).display().to_string();
        }
    }
    let cwd = if is_within(&req.cwd, &req.workspace) {
        &req.cwd
    } else {
        &req.workspace
    };
    for (k, v) in [
        ("TMPDIR", "/tmp".to_string()),
        ("PWD", cwd.display().to_string()),
    ] {
        env.retain(|(name, _)| name != k);
        env.push((k.to_string(), v));
    }
    if !env.iter().any(|(k, _)| k == "HOME") {
        env.push(("HOME".into(), req.home.display().to_string()));
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    env.sort();
    env
}

/// Variables that point clients at the proxy: curl, wget, git, pip, npm, cargo, Python,
/// Node and Go all read some of them. `NO_PROXY` names the loopback ([`loopback_no_proxy`]):
/// `127.0.0.1`, `::1` and `localhost` inside are the sandbox's own loopback (a dev server the
/// run started), which the proxy, connecting from the host, could only reach as the host's.
/// Nothing else goes direct, and could not: the namespace has only loopback.
fn proxy_env(addr: std::net::SocketAddrV4, policy: &Policy) -> Vec<(String, String)> {
    let http = format!("http://{addr}");
    let socks = format!("socks5h://{addr}");
    let mut env = Vec::new();
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        env.push((name.to_string(), http.clone()));
    }
    for name in ["ALL_PROXY", "all_proxy"] {
        env.push((name.to_string(), socks.clone()));
    }
    for name in [
        "npm_config_proxy",
        "npm_config_https_proxy",
        "CARGO_HTTP_PROXY",
        "PIP_PROXY",
    ] {
        env.push((name.to_string(), http.clone()));
    }
    for name in ["NO_PROXY", "no_proxy", "npm_config_noproxy"] {
        env.push((name.to_string(), loopback_no_proxy(policy)));
    }
    env
}

/// What `NO_PROXY` holds under mode proxy: the sandbox's own loopback names, reached
/// directly, `localhost,127.0.0.1,::1,0.0.0.0,::` (never a bracketed `[::1]`: httpx, under
/// the OpenAI and Anthropic SDKs and litellm, fails to build any client with one (`Invalid
/// port`); so Python's bare urllib, which compares `[::1]` with the brackets, sends
/// `http://[::1]:P` to the proxy, which refuses it with the loopback hint; `0.0.0.0` and `::` are the address a dev
/// server prints, which as a destination is the connecting side's own loopback: no
/// `allow_hosts` entry can name them, so they always stay), less each one the policy grants
/// on the host's
/// loopback (an `allow_hosts` entry or a masked credential's host covering it, e.g.
/// `127.0.0.1:5432`): that grant is the host's port through the proxy, so clients keep
/// sending that name there (as before there was a `NO_PROXY`), and the sandbox's own server
/// is reached by the other names. Read at the start: a grant added to a running proxy does
/// not change it.
fn loopback_no_proxy(policy: &Policy) -> String {
    let granted: Vec<policy::net::AllowHost> = (policy.network.allow_hosts.iter())
        .chain(policy.credentials.iter().flat_map(|c| c.route.hosts.iter()))
        .filter_map(|entry| policy::net::AllowHost::parse(entry).ok())
        .collect();
    let host_grant = |name: &str| {
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        granted
            .iter()
            .any(|g| match (g.spec(), bare.parse::<std::net::IpAddr>()) {
                (policy::net::HostSpec::Name(n), _) => n == name,
                (_, Ok(ip)) => g.matches_ip(ip, g.port().unwrap_or(1)),
                (_, Err(_)) => false,
            })
    };
    ["localhost", "127.0.0.1", "::1", "0.0.0.0", "::"]
        .into_iter()
        .filter(|name| !host_grant(name))
        .collect::<Vec<_>>()
        .join(",")
}

/// For unit tests: the default profile's spec of running `true` in workspace `ws` on this
/// machine (home: `ws/home`).
#[cfg(test)]
pub(crate) fn resolved_on_this_machine(ws: &Path) -> Resolved {
    let req = Request {
        argv: vec!["true".into()],
        workspace: ws.to_path_buf(),
        cwd: ws.to_path_buf(),
        home: ws.join("home"),
        uid: 1000,
        gid: 1000,
        env: Vec::new(),
    };
    #[allow(clippy::unwrap_used)]
    Resolved::new(
        &policy::profile("workspace-write").unwrap(),
        &req,
        &crate::host::RealHost,
    )
    .unwrap()
}

#[cfg(test)]
mod no_proxy_tests {
    use super::*;

    fn with(allow_hosts: &[&str], credential_hosts: &[&str]) -> String {
        #[allow(clippy::unwrap_used)]
        let mut p = policy::profile("workspace-write").unwrap();
        p.network.allow_hosts = allow_hosts.iter().map(|s| s.to_string()).collect();
        if !credential_hosts.is_empty() {
            #[allow(clippy::unwrap_used)]
            let mut c = policy::credentials::builtin("anthropic")
                .unwrap()
                .credential();
            c.route.hosts = credential_hosts.iter().map(|s| s.to_string()).collect();
            p.credentials.push(c);
        }
        loopback_no_proxy(&p)
    }

    /// Issue 31: the sandbox's own loopback goes direct, unless the policy grants that name
    /// on the host's loopback (then it is the host's, through the proxy, as before).
    #[test]
    fn no_proxy_is_the_loopback_less_what_the_policy_grants_on_the_hosts() {
        // httpx (the OpenAI and Anthropic SDKs, litellm) fails to build any client when an
        // entry is a bracketed IPv6 address (`Invalid port: ':1]'`).
        assert!(!with(&[], &[]).contains('['));
        assert_eq!(with(&[], &[]), "localhost,127.0.0.1,::1,0.0.0.0,::");
        assert_eq!(
            with(&["db.example:5432", "10.0.0.0/8"], &[]),
            "localhost,127.0.0.1,::1,0.0.0.0,::"
        );
        assert_eq!(with(&["127.0.0.1:5432"], &[]), "localhost,::1,0.0.0.0,::");
        assert_eq!(with(&["127.0.0.0/8"], &[]), "localhost,::1,0.0.0.0,::");
        assert_eq!(
            with(&["[::1]:8080", "localhost:3000"], &[]),
            "127.0.0.1,0.0.0.0,::"
        );
        assert_eq!(
            with(&["127.0.0.2:80"], &[]),
            "localhost,127.0.0.1,::1,0.0.0.0,::"
        );
        assert_eq!(with(&[], &["127.0.0.1:3000"]), "localhost,::1,0.0.0.0,::");
    }
}
