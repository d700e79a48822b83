//! The egress proxy as a stage: the run's own (started on the listener its backend hands
//! over) and `stockade proxy`'s, both asking the policy's network rules, fixed or live.

use crate::audit_event::AuditEvent;
use crate::record::AuditLog;
use crate::run::run_id;
use crate::{Applied, Change, Error, LivePolicy, NetworkEvent};

/// `stockade proxy`: serve the egress proxy on `listen` (loopback only) under the policy's
/// network rules until SIGINT/SIGTERM, for users who wrap a whole agent. `ready` is told the
/// address once it listens. Every decision goes to the audit log, and to `on_event`, as it
/// happens. On SIGHUP `reload` gives the policy anew (the policy file read again): its
/// network rules are in force for the next connection, `on_reload` is told (and the audit
/// log), and a failed reload keeps the rules as they were.
pub fn serve_proxy(
    policy: &policy::Policy,
    listen: std::net::SocketAddr,
    audit: Option<&std::path::Path>,
    ready: &dyn Fn(std::net::SocketAddr),
    on_event: net::proxy::OnEvent,
    reload: &dyn Fn() -> Result<policy::Policy, Error>,
    on_reload: &dyn Fn(&Result<(), Error>),
) -> Result<Vec<NetworkEvent>, Error> {
    if !listen.ip().is_loopback() {
        return Err(Error::Usage {
            message: format!("refusing to listen on {listen}: not a loopback address"),
            hint: "anyone who can reach the address could use the proxy; listen on 127.0.0.1 or ::1 and expose it deliberately if you must".into(),
        });
    }
    let live = LivePolicy::new(policy.clone())?;
    let listener = std::net::TcpListener::bind(listen).map_err(|e| Error::Io {
        what: format!("listen on {listen}"),
        cause: e,
    })?;
    let addr = listener.local_addr().map_err(|e| Error::Io {
        what: "read the listening address".into(),
        cause: e,
    })?;
    let log = std::sync::Arc::new(std::sync::Mutex::new(AuditLog::open(audit, &run_id())?));
    let events_log = log.clone();
    let on_event = move |e: &NetworkEvent| {
        if let Ok(mut log) = events_log.lock() {
            let _ = log.event(&AuditEvent::Network(e));
        }
        on_event(e);
    };
    let proxy = net::proxy::Proxy::start_with(
        listener,
        Box::new(ProxyRules::Live(live.clone())),
        net::proxy::Limits::default(),
        Some(Box::new(on_event)),
        None,
    )
    .map_err(|e| Error::Io {
        what: "start the egress proxy".into(),
        cause: e,
    })?;
    ready(addr);
    let io = |what: &str| {
        let what = what.to_string();
        move |cause| Error::Io { what, cause }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("start the signal loop"))?;
    rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).map_err(io("watch SIGTERM"))?;
        let mut hup = signal(SignalKind::hangup()).map_err(io("watch SIGHUP"))?;
        loop {
            tokio::select! {
                r = tokio::signal::ctrl_c() => return r.map_err(io("watch SIGINT")),
                _ = term.recv() => return Ok(()),
                _ = hup.recv() => {
                    let reloaded = reload().and_then(|p| live.reload(p));
                    if let Ok(mut log) = log.lock() {
                        let _ = log.event(&AuditEvent::PolicyChange {
                            source: "SIGHUP",
                            change: None,
                            applied: None,
                            refused: reloaded.as_ref().err().map(|e| e.to_string()),
                        });
                    }
                    on_reload(&reloaded);
                }
            }
        }
    })?;
    Ok(proxy.stop().events)
}

/// Record a live policy change from `source` (or its refusal) in the audit log at `path`.
pub fn audit_policy_change(
    path: &std::path::Path,
    source: &str,
    change: &Change,
    result: &Result<Applied, Error>,
) -> Result<(), Error> {
    let mut audit = AuditLog::open(Some(path), &run_id())?;
    audit.event(&AuditEvent::PolicyChange {
        source,
        change: Some(change),
        applied: result.as_ref().ok(),
        refused: result.as_ref().err().map(|e| e.to_string()),
    })
}

/// What starts the run's proxy on the listener its backend hands over, keeping it in `slot`
/// for the stage that stops it.
pub(crate) fn proxy_starter(
    policy: &policy::Policy,
    live: Option<&LivePolicy>,
    slot: std::sync::Arc<std::sync::Mutex<Option<net::proxy::Proxy>>>,
    credentials: Option<net::credential::Routes>,
) -> Result<sandbox::StartProxy, Error> {
    let mut rules = Some(RunRules {
        rules: match live {
            Some(live) => ProxyRules::Live(live.clone()),
            None => ProxyRules::Fixed(std::sync::Arc::new(policy::NetRules::new(&policy.network)?)),
        },
        routes: route_hosts(policy),
    });
    let mut credentials = Some(credentials);
    Ok(Box::new(move |listener: std::net::TcpListener| {
        let rules = rules.take().ok_or("the proxy was started twice")?;
        let credentials = credentials.take().flatten();
        if credentials.is_some() {
            crate::credentials::forbid_dumps()?;
        }
        let p = net::proxy::Proxy::start_with(
            listener,
            Box::new(rules),
            net::proxy::Limits::default(),
            None,
            credentials,
        )
        .map_err(|e| format!("failed to start the egress proxy: {e}"))?;
        let mut slot = slot.lock().map_err(|_| "the proxy's slot is poisoned")?;
        *slot = Some(p);
        Ok(())
    }))
}

/// A run's rules: the policy's, with the hosts of its credential routes for the hints.
struct RunRules {
    rules: ProxyRules,
    routes: Vec<RouteHost>,
}

/// A reverse route's upstream host (the run's, or the built-in's where a policy points the
/// route elsewhere), for the hint of a refused connection to it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RouteHost {
    host: String,
    route: String,
    base_url_env: Vec<String>,
}

/// The upstream hosts of the policy's reverse routes.
fn route_hosts(policy: &policy::Policy) -> Vec<RouteHost> {
    let mut out: Vec<RouteHost> = Vec::new();
    for c in &policy.credentials {
        if c.route.is_masked() {
            continue;
        }
        let builtin = policy::credentials::builtin(&c.name).map(|b| b.upstream.to_owned());
        for upstream in std::iter::once(c.route.upstream.clone()).chain(builtin) {
            let Ok(u) = policy::credentials::parse_upstream(&upstream) else {
                continue;
            };
            let host = RouteHost {
                host: u.host,
                route: c.name.clone(),
                base_url_env: c.route.base_url_env.clone(),
            };
            if !out.contains(&host) {
                out.push(host);
            }
        }
    }
    out
}

/// Why Claude Code connected to its hosts itself, and what makes it not.
const CLAUDE_ONBOARDING: &str = "Claude Code connects to it itself only in its onboarding, at \
     the first start in a state directory: `--agent claude-code` has that done where it makes \
     the directory (in one an earlier run left without it, remove \
     `~/.local/state/stockade/claude-code/.claude.json` once: the next run writes it anew)";

/// What to say of a refused connection to `host`, the upstream of a credential route: the
/// command reaches it through the route, and allowing the domain is not the fix (it would
/// let the command use a key of its own there).
fn route_hint(routes: &[RouteHost], host: &str) -> Option<String> {
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    if name == "platform.claude.com" && routes.iter().any(|r| r.route == "anthropic") {
        return Some(format!(
            "`{name}` is where Claude Code signs in, not needed with credential route \
             `anthropic`'s key; {CLAUDE_ONBOARDING}"
        ));
    }
    let r = routes.iter().find(|r| r.host == name)?;
    let at = r
        .base_url_env
        .first()
        .map(|v| format!("`${v}`"))
        .unwrap_or_else(|| format!("`http://{}/credential/{}`", sandbox::PROXY_ADDR, r.route));
    let claude = if r.route == "anthropic" {
        format!("; {CLAUDE_ONBOARDING}")
    } else {
        String::new()
    };
    Some(format!(
        "`{name}` is the upstream of credential route `{}`: the command reaches it through the \
         route, at {at}, which puts the key on; a client connecting to it directly bypasses \
         the route (allowing the domain is not needed, and would let the command use a key of \
         its own there){claude}",
        r.route
    ))
}

/// A refused `stockade`, the sandbox's own hostname (`workspace::SANDBOX_HOSTNAME`), is the
/// sandbox, not a domain: it does not resolve inside, and through the proxy it would be
/// whatever the host's resolver makes of it. The hint points at the sandbox's loopback, never
/// `--allow-domain stockade`.
fn own_hostname_hint(host: &str, port: u16) -> Option<String> {
    let name = host.strip_suffix('.').unwrap_or(host);
    if !name.eq_ignore_ascii_case(workspace::SANDBOX_HOSTNAME) {
        return None;
    }
    Some(format!(
        "`{name}` is this sandbox's own hostname, which does not resolve inside (through the \
         proxy it would be the host's lookup of that name): a server started inside the run is \
         reached directly at `http://127.0.0.1:{port}/` (NO_PROXY covers it); no rule is needed"
    ))
}

impl net::proxy::Rules for RunRules {
    fn check(&self, host: &str, port: u16) -> Result<String, (String, String)> {
        self.rules.check(host, port)
    }

    fn private_allowed(&self, host: &str, port: u16, ip: std::net::IpAddr) -> bool {
        self.rules.private_allowed(host, port, ip)
    }

    fn explicit_host(&self, host: &str, port: u16) -> bool {
        self.rules.explicit_host(host, port)
    }

    fn allow_hint(&self, host: &str, port: u16, rule: &str) -> Option<String> {
        if rule == policy::net::RULE_NO_MATCH {
            if let Some(hint) = route_hint(&self.routes, host) {
                return Some(hint);
            }
            if let Some(hint) = own_hostname_hint(host, port) {
                return Some(hint);
            }
        }
        policy::allow_hint_for(host, port, rule, None, policy::HintContext::Sandbox)
    }

    fn allow_hint_resolved(
        &self,
        host: &str,
        port: u16,
        rule: &str,
        ip: std::net::IpAddr,
    ) -> Option<String> {
        policy::allow_hint_for(host, port, rule, Some(ip), policy::HintContext::Sandbox)
    }
}

/// The policy's network rules, as the proxy asks them: fixed for the run, or live.
enum ProxyRules {
    Fixed(std::sync::Arc<policy::NetRules>),
    Live(LivePolicy),
}

impl ProxyRules {
    fn current(&self) -> std::sync::Arc<policy::NetRules> {
        match self {
            ProxyRules::Fixed(rules) => rules.clone(),
            ProxyRules::Live(live) => live.rules(),
        }
    }
}

impl net::proxy::Rules for ProxyRules {
    fn check(&self, host: &str, port: u16) -> Result<String, (String, String)> {
        let d = self.current().check(host, port);
        if d.allowed {
            Ok(d.rule)
        } else {
            let reason = format!("{host}:{port} is not allowed by the network rules");
            Err((d.rule, reason))
        }
    }

    fn private_allowed(&self, host: &str, port: u16, ip: std::net::IpAddr) -> bool {
        self.current().private_allowed(host, port, ip)
    }

    fn explicit_host(&self, host: &str, port: u16) -> bool {
        let d = self.current().check(host, port);
        d.allowed && d.rule.starts_with("allow_hosts:")
    }

    /// Only `stockade proxy` asks these rules directly (a run's proxy asks [`RunRules`]):
    /// its clients share this machine's loopback, no sandbox is between.
    fn allow_hint(&self, host: &str, port: u16, rule: &str) -> Option<String> {
        policy::allow_hint_for(host, port, rule, None, policy::HintContext::Standalone)
    }

    fn allow_hint_resolved(
        &self,
        host: &str,
        port: u16,
        rule: &str,
        ip: std::net::IpAddr,
    ) -> Option<String> {
        policy::allow_hint_for(host, port, rule, Some(ip), policy::HintContext::Standalone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_route_host_is_explained_as_the_routes_not_offered_as_a_domain() {
        let mut policy = policy::profile("workspace-write").unwrap_or_else(|e| panic!("{e}"));
        let mut c = policy::credentials::builtin("anthropic")
            .map(|b| b.credential())
            .unwrap_or_else(|| unreachable!());
        c.route.upstream = "https://127.0.0.1:8443".into();
        policy.credentials.push(c);
        let rules = RunRules {
            rules: ProxyRules::Fixed(std::sync::Arc::new(
                policy::NetRules::new(&policy.network).unwrap_or_else(|e| panic!("{e}")),
            )),
            routes: route_hosts(&policy),
        };
        use net::proxy::Rules;
        let no_match = policy::net::RULE_NO_MATCH;
        // The hint for a host no rule allows.
        let no_rule_hint = |host, port| rules.allow_hint(host, port, no_match).unwrap_or_default();
        // The built-in's host, though this policy points the route elsewhere.
        let hint = no_rule_hint("API.anthropic.com.", 443);
        assert!(
            hint.contains("upstream of credential route `anthropic`")
                && hint.contains("`$ANTHROPIC_BASE_URL`")
                && hint.contains(".claude.json")
                && !hint.contains("allow it with"),
            "{hint}"
        );
        // The control: another domain gets the flag that allows it.
        let other = no_rule_hint("example.com", 443);
        assert!(
            other.starts_with("allow it with `--allow-domain example.com`"),
            "{other}"
        );
        // A deny rule's hint is the policy's, as before.
        let denied = rules
            .allow_hint("api.anthropic.com", 443, "deny_domains:anthropic.com")
            .unwrap_or_default();
        assert!(denied.contains("deny_domains"), "{denied}");
        // Claude Code's sign-in host, which its onboarding checks too.
        let platform = no_rule_hint("platform.claude.com", 443);
        assert!(platform.contains("onboarding"), "{platform}");
        // Issue 31: the sandbox's own hostname is not offered as a domain; control: another
        // single-label name is.
        let own = no_rule_hint("Stockade.", 8000);
        assert!(
            own.contains("this sandbox's own hostname")
                && own.contains("http://127.0.0.1:8000/")
                && !own.contains("--allow-domain"),
            "{own}"
        );
        let other = no_rule_hint("stockades", 8000);
        assert!(!other.contains("own hostname"), "{other}");
        // Issue 31: a run's loopback hint is the sandbox's; a name resolved to loopback is
        // named by its address. `stockade proxy` alone (ProxyRules) says this machine's.
        let lo = rules
            .allow_hint_resolved("db.example", 8000, "ssrf:loopback", [127, 0, 0, 1].into())
            .unwrap_or_default();
        assert!(
            lo.contains("not this sandbox's") && lo.contains("`--allow-host 127.0.0.1:8000`"),
            "{lo}"
        );
        let alone = rules
            .rules
            .allow_hint("127.0.0.1", 8000, policy::net::RULE_IP_LITERAL)
            .unwrap_or_default();
        assert!(
            alone.starts_with("loopback through this proxy is this machine's own"),
            "{alone}"
        );
    }
}
