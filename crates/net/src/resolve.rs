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

use std::io;
use std::net::IpAddr;
use std::path::PathBuf;

use hickory_resolver::config::{LookupIpStrategy, ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
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

/// The proxy's resolver: the hosts file, then DNS (see the module documentation).
pub struct Resolver {
    hosts: PathBuf,
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
            dns: OnceCell::new(),
        }
    }

    /// The addresses of `name` (never empty on success). Must run inside a Tokio runtime.
    pub async fn lookup(&self, name: &str) -> io::Result<Vec<IpAddr>> {
        // A missing or unreadable hosts file lists nothing (glibc goes on to DNS too).
        if let Ok(text) = std::fs::read_to_string(&self.hosts) {
            let listed = hosts_lookup(&text, name);
            if !listed.is_empty() {
                return Ok(listed);
            }
        }
        let dns = self.dns.get_or_try_init(|| async { system_dns() }).await?;
        let answer = dns
            .lookup_ip(name)
            .await
            .map_err(|e| io::Error::other(e.to_string()))?;
        let found = unique(answer.iter());
        if found.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no address records",
            ));
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
