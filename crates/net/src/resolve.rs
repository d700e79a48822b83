//! Name resolution for the proxy, in process: the hosts file first, then DNS through the
//! name servers of `/etc/resolv.conf` (hickory-resolver), the order of glibc's
//! `hosts: files dns`.
//!
//! Not `getaddrinfo`: stockade is linked statically (it starts faster), and a static glibc's
//! `getaddrinfo` loads the host's NSS modules at run time, which must come from the very glibc
//! the binary was built with. So the proxy does what `files dns` does itself:
//! - a name the hosts file lists resolves to every address listed for it there (of both
//!   families, in file order) and nothing else: no DNS query is sent for it;
//! - any other name goes to DNS, A and AAAA asked in parallel, with resolv.conf's servers,
//!   `search`, `ndots`, `timeout` and `attempts` (no server listed: 127.0.0.1, as glibc).
//!
//! Both files are read when a name is resolved (the hosts file on every lookup, as glibc does;
//! resolv.conf on the first DNS lookup of a proxy), so a run sees the host's files of the
//! moment, including bind mounts in the supervisor's mount namespace. NSS sources other
//! than files and DNS (mDNS, systemd-resolved's NSS module, LDAP) are not consulted; a host that
//! relies on them for names its sandboxed tools reach should list them with `allow_hosts`
//! addresses or in the hosts file.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use hickory_resolver::config::{
    LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError};
use hickory_resolver::proto::op::ResponseCode;
use hickory_resolver::system_conf::parse_resolv_conf;
use hickory_resolver::TokioResolver;
use tokio::sync::OnceCell;

/// The hosts file glibc reads.
pub const HOSTS_FILE: &str = "/etc/hosts";

/// Every address the hosts file text `hosts` lists for `name` (ASCII case-insensitive, the
/// canonical name or an alias), in file order, without repeats. Lines are
/// `address name [alias...]`, `#` starts a comment; a line whose address does not parse is
/// skipped, as glibc skips it.
pub fn hosts_lookup(hosts: &str, name: &str) -> Vec<IpAddr> {
    unique(hosts.lines().filter_map(|line| {
        let line = line.split('#').next().unwrap_or_default();
        let mut fields = line.split_ascii_whitespace();
        let addr = fields.next()?;
        if !fields.any(|n| n.eq_ignore_ascii_case(name)) {
            return None;
        }
        addr.parse::<IpAddr>().ok()
    }))
}

/// `ips` in their order, each once.
fn unique(ips: impl IntoIterator<Item = IpAddr>) -> Vec<IpAddr> {
    let mut found = Vec::new();
    for ip in ips {
        if !found.contains(&ip) {
            found.push(ip);
        }
    }
    found
}

/// Why a name has no address, in plain words (shown in the proxy's refusals: "could not
/// resolve NAME: no such host (NXDOMAIN)").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    /// The DNS says the name does not exist (NXDOMAIN).
    NoSuchHost,
    /// The name exists but has no address of either family (no A or AAAA record).
    NoAddress,
    /// No DNS server answered in time.
    NoAnswer,
    /// A DNS server answered with an error (`SERVFAIL`, `REFUSED`, ...).
    ServerError(ResponseCode),
    /// No DNS server could be reached (the reason, e.g. `connection refused`).
    Unreachable(String),
    /// The DNS configuration (resolv.conf) cannot be read or used.
    Config(String),
    /// Anything else the resolver said.
    Other(String),
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LookupError::NoSuchHost => f.write_str("no such host (NXDOMAIN)"),
            LookupError::NoAddress => f.write_str("the name has no address (no A or AAAA record)"),
            LookupError::NoAnswer => f.write_str("the resolver did not answer"),
            LookupError::ServerError(code) => write!(
                f,
                "the resolver answered with an error ({}: {})",
                response_code_name(*code),
                code.to_str().to_lowercase()
            ),
            LookupError::Unreachable(why) => write!(f, "no DNS server could be reached ({why})"),
            LookupError::Config(why) => write!(f, "the DNS configuration cannot be used: {why}"),
            LookupError::Other(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for LookupError {}

/// A DNS response code as the RFCs name it (`SERVFAIL`, `REFUSED`, ...).
fn response_code_name(code: ResponseCode) -> String {
    match code {
        ResponseCode::FormErr => "FORMERR".into(),
        ResponseCode::ServFail => "SERVFAIL".into(),
        ResponseCode::NXDomain => "NXDOMAIN".into(),
        ResponseCode::NotImp => "NOTIMP".into(),
        ResponseCode::Refused => "REFUSED".into(),
        other => format!("rcode {}", u16::from(other)),
    }
}

/// What an `io::Error` of a DNS connection means, in a few words.
fn io_words(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".into(),
        io::ErrorKind::NetworkUnreachable => "network unreachable".into(),
        io::ErrorKind::HostUnreachable => "host unreachable".into(),
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        io::ErrorKind::AddrNotAvailable => "no local address to send from".into(),
        _ => e.to_string(),
    }
}

impl From<&NetError> for LookupError {
    fn from(e: &NetError) -> Self {
        if e.is_nx_domain() {
            return LookupError::NoSuchHost;
        }
        match e {
            NetError::Dns(DnsError::NoRecordsFound(_)) => LookupError::NoAddress,
            NetError::Dns(DnsError::ResponseCode(code)) => LookupError::ServerError(*code),
            NetError::Timeout => LookupError::NoAnswer,
            NetError::Io(io) if io.kind() == io::ErrorKind::TimedOut => LookupError::NoAnswer,
            NetError::Io(io) => LookupError::Unreachable(io_words(io)),
            NetError::NoConnections => LookupError::Unreachable("no name server to ask".into()),
            // Their texts are plain (no record or query dumped in debug form).
            other => LookupError::Other(other.to_string()),
        }
    }
}

/// The proxy's resolver: the hosts file, then DNS (see the module documentation).
pub struct Resolver {
    hosts: PathBuf,
    /// The DNS servers to ask instead of resolv.conf's ([`Resolver::with_server`]).
    dns_config: Option<(ResolverConfig, ResolverOpts)>,
    /// Built on the first name the hosts file does not know (reads resolv.conf then).
    dns: OnceCell<TokioResolver>,
}

impl Default for Resolver {
    fn default() -> Self {
        Self::new(HOSTS_FILE)
    }
}

impl Resolver {
    /// A resolver that reads `hosts` as its hosts file.
    pub fn new(hosts: impl Into<PathBuf>) -> Self {
        Self {
            hosts: hosts.into(),
            dns_config: None,
            dns: OnceCell::new(),
        }
    }

    /// A resolver that reads `hosts` as its hosts file and asks the one DNS server at
    /// `server` (over UDP), waiting `timeout` for an answer, instead of resolv.conf's servers
    /// (a test's own server on loopback).
    pub fn with_server(hosts: impl Into<PathBuf>, server: SocketAddr, timeout: Duration) -> Self {
        let mut ns = NameServerConfig::udp(server.ip());
        for c in &mut ns.connections {
            c.port = server.port();
        }
        let config = ResolverConfig::from_name_servers(vec![ns]);
        let mut opts = ResolverOpts::default();
        opts.use_hosts_file = ResolveHosts::Never;
        opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        opts.timeout = timeout;
        opts.attempts = 1;
        Self {
            dns_config: Some((config, opts)),
            ..Self::new(hosts)
        }
    }

    /// The addresses of `name` (never empty on success). Must run inside a Tokio runtime.
    pub async fn lookup(&self, name: &str) -> Result<Vec<IpAddr>, LookupError> {
        // A missing or unreadable hosts file lists nothing (glibc goes on to DNS too).
        if let Ok(text) = std::fs::read_to_string(&self.hosts) {
            let listed = hosts_lookup(&text, name);
            if !listed.is_empty() {
                return Ok(listed);
            }
        }
        let dns = self
            .dns
            .get_or_try_init(|| async {
                match &self.dns_config {
                    Some((config, opts)) => build(config.clone(), opts.clone()),
                    None => system_dns(),
                }
            })
            .await
            .map_err(|e| LookupError::Config(e.to_string()))?;
        let answer = dns
            .lookup_ip(name)
            .await
            .map_err(|e| LookupError::from(&e))?;
        let found = unique(answer.iter());
        if found.is_empty() {
            return Err(LookupError::NoAddress);
        }
        Ok(found)
    }
}

/// The file the DNS servers and options come from.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";

/// The DNS configuration of resolv.conf text `conf`, as glibc reads it: a file without a
/// usable `nameserver` line (or no file: `conf` empty) means the server on this machine,
/// 127.0.0.1, with the file's other options kept.
pub fn dns_config(conf: &str) -> io::Result<(ResolverConfig, ResolverOpts)> {
    let (config, mut opts) = parse_resolv_conf(conf).or_else(|first| {
        parse_resolv_conf(format!("{conf}\nnameserver 127.0.0.1\n"))
            .map_err(|_| io::Error::other(format!("{RESOLV_CONF}: {first}")))
    })?;
    // The hosts file is [`hosts_lookup`]'s, with glibc's rule that a listed name never goes
    // to DNS; hickory's own reading of it would query DNS for a family the file lacks.
    opts.use_hosts_file = ResolveHosts::Never;
    opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    Ok((config, opts))
}

/// A DNS resolver configured from [`RESOLV_CONF`] (see [`dns_config`]).
fn system_dns() -> io::Result<TokioResolver> {
    let conf = match std::fs::read_to_string(RESOLV_CONF) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{RESOLV_CONF}: {e}"))),
    };
    let (config, opts) = dns_config(&conf)?;
    build(config, opts)
}

fn build(config: ResolverConfig, opts: ResolverOpts) -> io::Result<TokioResolver> {
    TokioResolver::builder_with_config(config, TokioRuntimeProvider::default())
        .with_options(opts)
        .build()
        .map_err(|e| io::Error::other(format!("DNS resolver: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter()
            .map(|s| s.parse().expect("test address"))
            .collect()
    }

    const HOSTS: &str = "\
127.0.0.1 localhost
# 10.0.0.1 commented.test
198.51.100.2 allowed.test Alias.Test   # trailing comment
fd12:3456:789a::1 allowed.test
::ffff:127.0.0.1\tmapped.test
not-an-address broken.test
198.51.100.2 allowed.test
10.9.9.9
";

    #[test]
    fn listed_names_give_every_listed_address_of_both_families_once() {
        assert_eq!(
            hosts_lookup(HOSTS, "allowed.test"),
            ips(&["198.51.100.2", "fd12:3456:789a::1"])
        );
        assert_eq!(hosts_lookup(HOSTS, "ALIAS.test"), ips(&["198.51.100.2"]));
        assert_eq!(
            hosts_lookup(HOSTS, "mapped.test"),
            ips(&["::ffff:127.0.0.1"])
        );
        assert_eq!(hosts_lookup(HOSTS, "localhost"), ips(&["127.0.0.1"]));
    }

    #[test]
    fn comments_bad_addresses_and_unlisted_names_give_nothing() {
        for name in [
            "commented.test",
            "broken.test",
            "other.test",
            "10.9.9.9",
            "",
            "#",
        ] {
            assert!(hosts_lookup(HOSTS, name).is_empty(), "{name}");
        }
    }

    fn servers(conf: &str) -> Vec<IpAddr> {
        let (config, _) = dns_config(conf).expect("config");
        config.name_servers().iter().map(|s| s.ip).collect()
    }

    #[test]
    fn resolv_conf_servers_and_options_are_read() {
        let conf = "# comment\nnameserver 198.51.100.2\nnameserver fd12::53\noptions timeout:1 attempts:1 ndots:2\nsearch corp.test\n";
        assert_eq!(servers(conf), ips(&["198.51.100.2", "fd12::53"]));
        let (config, opts) = dns_config(conf).expect("config");
        assert_eq!(opts.timeout, std::time::Duration::from_secs(1));
        assert_eq!((opts.attempts, opts.ndots), (1, 2));
        assert_eq!(config.search().len(), 1);
        assert_eq!(opts.use_hosts_file, ResolveHosts::Never);
    }

    #[test]
    fn no_nameserver_means_the_local_one_as_in_glibc() {
        for conf in [
            "",
            "options timeout:1\n",
            "search corp.test\n",
            "nameserver\n",
        ] {
            assert_eq!(servers(conf), ips(&["127.0.0.1"]), "{conf:?}");
        }
        let (_, opts) = dns_config("options timeout:1\n").expect("config");
        assert_eq!(opts.timeout, std::time::Duration::from_secs(1));
    }

    /// A DNS server on loopback that answers every query with `rcode` and no records
    /// (`None`: never answers). Serves until the test's process ends.
    fn fake_dns(rcode: Option<u8>) -> SocketAddr {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let addr = sock.local_addr().expect("addr");
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = sock.recv_from(&mut buf) {
                let (Some(rcode), Some(q)) = (rcode, buf.get(..n)) else {
                    continue;
                };
                // The question: the name's labels, then type and class.
                let mut end = 12;
                while let Some(&len) = q.get(end) {
                    end += 1 + usize::from(len);
                    if len == 0 {
                        break;
                    }
                }
                let Some(question) = q.get(12..end + 4) else {
                    continue;
                };
                let mut r = q[..2].to_vec();
                r.extend_from_slice(&[0x81, 0x80 | rcode, 0, 1, 0, 0, 0, 0, 0, 0]);
                r.extend_from_slice(question);
                let _ = sock.send_to(&r, from);
            }
        });
        addr
    }

    async fn failure(server: SocketAddr, name: &str) -> String {
        let dir = tempfile::tempdir().expect("tempdir");
        let resolver =
            Resolver::with_server(dir.path().join("hosts"), server, Duration::from_millis(300));
        let e = resolver.lookup(name).await.expect_err("resolved");
        e.to_string()
    }

    /// A failed lookup says why in plain words: no record or query dumped in Rust's debug
    /// form (`no records found for Query { name: Name("...") ... }`). Names under the
    /// special-use `.test` and `.invalid`, asked of a server on loopback only.
    #[tokio::test]
    async fn a_failed_lookup_says_why_in_plain_words() {
        let cases = [
            (Some(3), "no such host (NXDOMAIN)"),
            (Some(0), "the name has no address (no A or AAAA record)"),
            (
                Some(2),
                "the resolver answered with an error (SERVFAIL: server failure)",
            ),
            (None, "the resolver did not answer"),
        ];
        for (rcode, want) in cases {
            let said = failure(fake_dns(rcode), "nowhere.test").await;
            assert_eq!(said, want, "rcode {rcode:?}");
        }
        // Nobody on the server's port: the kernel refuses the datagram.
        let closed = std::net::UdpSocket::bind("127.0.0.1:0")
            .and_then(|s| s.local_addr())
            .expect("a port");
        let said = failure(closed, "nowhere.test").await;
        assert!(
            said == "no DNS server could be reached (connection refused)"
                || said == "the resolver did not answer",
            "{said}"
        );
        // `.invalid` never exists (RFC 6761): answered without asking any server.
        let said = failure(fake_dns(Some(0)), "example.invalid").await;
        assert_eq!(said, "no such host (NXDOMAIN)");
    }

    #[tokio::test]
    async fn a_listed_name_is_answered_from_the_hosts_file_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hosts");
        std::fs::write(&path, HOSTS).expect("write");
        let resolver = Resolver::new(&path);
        assert_eq!(
            resolver.lookup("allowed.test").await.expect("lookup"),
            ips(&["198.51.100.2", "fd12:3456:789a::1"])
        );
        // Answered without building the DNS resolver (no resolv.conf read, no query sent).
        assert!(resolver.dns.get().is_none());
    }
}
