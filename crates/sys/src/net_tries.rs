//! Modes none and proxy: what the command tried on the network it does not have, as the
//! kernel of the run's own network namespace counts it, so that the run can end with "network
//! is off in this run" (or, under the proxy, that a tool went around it) instead of a command
//! failing with no word from stockade (issue 31). Under the proxy, tools that use it make no
//! such tries (curl, pip, git through it count nothing: measured).
//!
//! The namespace holds only loopback: a connection or a name lookup to any other address
//! fails at routing (`ENETUNREACH`), which the kernel counts in `Ip: OutNoRoutes`
//! (`/proc/net/snmp`) and `Ip6OutNoRoutes` (`/proc/net/snmp6`). A lookup sent to a resolver
//! on loopback (`nameserver 127.0.0.53`) finds no one listening inside: `Udp: NoPorts` (only
//! counted as lookups when `/etc/resolv.conf` names such a resolver). The supervisor opens
//! the init's `/proc/PID/net/snmp` and `snmp6` as soon as it exists: an open file keeps its
//! namespace's view, read when the run has ended (the init gone). Nothing here is written by
//! the sandbox: the counters are the kernel's.
//!
//! The counters are not read at the start: a network namespace's counters start at zero when
//! it is made (with the init's clone), and nothing before the command moves these four (the
//! init brings loopback up and, under the proxy, listens on it: neither routes a packet
//! elsewhere nor sends a datagram). Reading them then cost 0.1–0.2 ms of every run, before
//! the init could go on (issue 32); counting from zero also counts a try the command makes
//! before the supervisor would have read them.

//!
//! Shared by the backends whose run has a network namespace of the host kernel's: the native
//! backend opens its init's files, the container backends those of the container's first
//! process (found by its namespace's identity, see `container`'s gate).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

/// What the namespace's processes tried (the contract's `sandbox::NetworkTries`, which this
/// crate does not depend on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tries {
    /// `Ip: OutNoRoutes` + `Ip6OutNoRoutes`.
    pub no_route: u64,
    /// Lookups sent to a loopback resolver nobody answers inside (`Udp: NoPorts`), when
    /// `/etc/resolv.conf` names one.
    pub lookups: u64,
    /// Mode proxy: these tries went around the proxy.
    pub proxy: bool,
}

/// The open counter files of one run's network namespace.
pub struct Watch {
    snmp: File,
    snmp6: Option<File>,
    /// Mode proxy: what is counted went around the proxy.
    proxy: bool,
}

/// The counters read from the files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counters {
    no_route4: u64,
    no_route6: u64,
    udp_no_ports: u64,
    udp6_no_ports: u64,
}

impl Watch {
    /// Open the counters of `pid`'s network namespace, a namespace made for the run (`None`
    /// when they cannot be opened: nothing is said then). Only opens: see the module's doc.
    pub fn open(pid: libc::pid_t, proxy: bool) -> Option<Watch> {
        let snmp = File::open(format!("/proc/{pid}/net/snmp")).ok()?;
        let snmp6 = File::open(format!("/proc/{pid}/net/snmp6")).ok();
        Some(Watch { snmp, snmp6, proxy })
    }

    /// What the namespace's processes tried since it was made.
    pub fn tries(mut self) -> Option<Tries> {
        let now = self.read()?;
        let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        Some(Tries {
            no_route: now.no_route4.saturating_add(now.no_route6),
            lookups: if loopback_resolver(&resolv) {
                now.udp_no_ports.saturating_add(now.udp6_no_ports)
            } else {
                0
            },
            proxy: self.proxy,
        })
    }

    fn read(&mut self) -> Option<Counters> {
        let text = |f: &mut File| -> Option<String> {
            f.seek(SeekFrom::Start(0)).ok()?;
            let mut s = String::new();
            f.read_to_string(&mut s).ok()?;
            Some(s)
        };
        let v4 = text(&mut self.snmp)?;
        let v6 = self.snmp6.as_mut().and_then(text).unwrap_or_default();
        Some(parse(&v4, &v6))
    }
}

/// The counters in `snmp` (pairs of a header line and a value line per protocol) and `snmp6`
/// (one `Name value` per line). A missing counter is 0.
fn parse(snmp: &str, snmp6: &str) -> Counters {
    let field = |proto: &str, name: &str| -> u64 {
        let mut lines = snmp
            .lines()
            .filter(|l| l.starts_with(&format!("{proto}: ")));
        let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
            return 0;
        };
        names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0)
    };
    let field6 = |name: &str| -> u64 {
        snmp6
            .lines()
            .filter_map(|l| l.split_once(char::is_whitespace))
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0)
    };
    Counters {
        no_route4: field("Ip", "OutNoRoutes"),
        no_route6: field6("Ip6OutNoRoutes"),
        udp_no_ports: field("Udp", "NoPorts"),
        udp6_no_ports: field6("Udp6NoPorts"),
    }
}

/// Whether `resolv_conf` names a resolver on loopback (127.0.0.0/8, ::1).
fn loopback_resolver(resolv_conf: &str) -> bool {
    resolv_conf.lines().any(|l| {
        let mut w = l.split_whitespace();
        w.next() == Some("nameserver")
            && w.next()
                .and_then(|a| a.parse::<std::net::IpAddr>().ok())
                .is_some_and(|ip| ip.is_loopback())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout
Ip: 2 64 0 0 0 0 0 0 0 0 0 3 0
Icmp: InMsgs InErrors
Icmp: 0 0
Udp: InDatagrams NoPorts InErrors OutDatagrams
Udp: 0 2 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams
UdpLite: 0 9 0 0
";
    const SNMP6: &str = "Ip6InReceives                   \t0\nIp6OutNoRoutes                  \t1\nUdp6NoPorts                     \t4\n";

    #[test]
    fn counters_are_read_by_name() {
        assert_eq!(
            parse(SNMP, SNMP6),
            Counters {
                no_route4: 3,
                no_route6: 1,
                udp_no_ports: 2,
                udp6_no_ports: 4
            }
        );
        assert_eq!(parse("", ""), Counters::default());
        assert_eq!(parse("Ip: OutNoRoutes\n", "garbage"), Counters::default());
    }

    #[test]
    fn only_a_loopback_resolver_makes_closed_ports_lookups() {
        assert!(loopback_resolver(
            "# x\nnameserver 127.0.0.53\noptions edns0\n"
        ));
        assert!(loopback_resolver("nameserver ::1\n"));
        assert!(!loopback_resolver("nameserver 10.255.255.53\n"));
        assert!(!loopback_resolver("#nameserver 127.0.0.1\n"));
    }

    /// The kernel's own counters of a namespace with only loopback (up): a connection to an
    /// address that is not loopback is counted, one to loopback is not (the control). Needs
    /// `unshare -rn`, bash and ip; skipped without.
    #[test]
    fn the_kernel_counts_a_connection_with_no_route() {
        use std::io::{BufRead, Write};
        let script = "ip link set lo up || exit 1; echo ready; read go; \
                      : 3<>/dev/tcp/127.0.0.1/9 2>/dev/null; echo one; read go; \
                      : 3<>/dev/tcp/192.0.2.1/9 2>/dev/null; echo two; read go";
        let Ok(mut child) = std::process::Command::new("unshare")
            .args(["-rn", "bash", "-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
        else {
            println!("skipped: no unshare");
            return;
        };
        let pid = child.id() as libc::pid_t;
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut stdin = child.stdin.take().unwrap();
        let mut expect = |w: &str| {
            let mut line = String::new();
            let _ = out.read_line(&mut line);
            line.trim() == w
        };
        if !expect("ready") {
            let _ = child.kill();
            let _ = child.wait();
            println!("skipped: no network namespace with ip here");
            return;
        }
        let w = Watch::open(pid, false).unwrap();
        let _ = writeln!(stdin, "go");
        assert!(expect("one"));
        let loopback = w.tries().unwrap();
        let w = Watch::open(pid, false).unwrap();
        let _ = writeln!(stdin, "go");
        assert!(expect("two"));
        let outside = w.tries().unwrap();
        let _ = writeln!(stdin, "go");
        drop(stdin);
        let _ = child.wait();
        assert_eq!(loopback, Tries::default(), "loopback is no try");
        assert_eq!(
            outside,
            Tries {
                no_route: 1,
                lookups: 0,
                proxy: false
            }
        );
    }
}
