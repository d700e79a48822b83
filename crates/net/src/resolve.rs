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
//!   `search`, `ndots`, `timeout` and `attempts`.
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

use hickory_resolver::config::{LookupIpStrategy, ResolveHosts};
use hickory_resolver::TokioResolver;
use tokio::sync::OnceCell;

/// The hosts file glibc reads.
pub const HOSTS_FILE: &str = "/etc/hosts";

/// Every address the hosts file text `hosts` lists for `name` (ASCII case-insensitive, the
/// canonical name or an alias), in file order, without repeats. Lines are
/// `address name [alias...]`, `#` starts a comment; a line whose address does not parse is
/// skipped, as glibc skips it.
pub fn hosts_lookup(hosts: &str, name: &str) -> Vec<IpAddr> {
    let mut found = Vec::new();
    for line in hosts.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut fields = line.split_ascii_whitespace();
        let Some(addr) = fields.next() else { continue };
        if !fields.any(|n| n.eq_ignore_ascii_case(name)) {
            continue;
        }
        if let Ok(ip) = addr.parse::<IpAddr>() {
            if !found.contains(&ip) {
                found.push(ip);
            }
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
        let answer = dns.lookup_ip(name).await.map_err(|e| {
            let kind = if e.is_no_records_found() {
                io::ErrorKind::NotFound
            } else {
                io::ErrorKind::Other
            };
            io::Error::new(kind, e.to_string())
        })?;
        let mut found: Vec<IpAddr> = Vec::new();
        for ip in answer.iter() {
            if !found.contains(&ip) {
                found.push(ip);
            }
        }
        if found.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no address records",
            ));
        }
        Ok(found)
    }
}

/// A DNS resolver configured from `/etc/resolv.conf`, never reading the hosts file itself
/// (that is [`hosts_lookup`]'s, with glibc's rule that a listed name never goes to DNS).
fn system_dns() -> io::Result<TokioResolver> {
    let mut builder = TokioResolver::builder_tokio()
        .map_err(|e| io::Error::other(format!("/etc/resolv.conf: {e}")))?;
    let opts = builder.options_mut();
    opts.use_hosts_file = ResolveHosts::Never;
    opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    builder
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
