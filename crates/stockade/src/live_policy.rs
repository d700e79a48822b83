//! Live policy (issue 18, item 8): changes that reach the running proxy at once and the next
//! run's sandbox, without a restart. `stockade run --control-fd N` and `stockade mcp
//! --control-fd N` read them as JSON lines; `stockade proxy` reloads its policy on SIGHUP.
//!
//! The network rules are one shared, swappable value that every proxy of the runs started
//! with this handle asks per decision: a change is in force for the next connection. The
//! filesystem rules are fixed for a run's life (its mounts, Landlock and mediation are made
//! before the command starts): a change applies to the runs started after it, and the reply
//! says so. Every change is audited.

use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::Error;

/// A change, as one JSON line: each list given replaces the current one.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Change {
    /// Mode proxy: the domains that may be reached (in force at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_domains: Option<Vec<String>>,
    /// Mode proxy: the domains never reached (at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_domains: Option<Vec<String>>,
    /// Mode proxy: IPs, networks and exact hosts that may be reached (at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_hosts: Option<Vec<String>>,
    /// Writable roots (from the next run on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_write: Option<Vec<String>>,
    /// Readable paths inside denied ones (next run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_read: Option<Vec<String>>,
    /// Masked paths (next run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_read: Option<Vec<String>>,
    /// Protected paths inside writable roots (next run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_write: Option<Vec<String>>,
}

impl Change {
    fn network(&self) -> bool {
        self.allow_domains.is_some() || self.deny_domains.is_some() || self.allow_hosts.is_some()
    }

    fn filesystem(&self) -> bool {
        self.allow_write.is_some()
            || self.allow_read.is_some()
            || self.deny_read.is_some()
            || self.deny_write.is_some()
    }
}

/// What a change did, as the reply states it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Applied {
    /// `"now"` (the proxy's rules were replaced), `"unchanged"`, or why not (no proxy).
    pub network: &'static str,
    /// `"next run"` or `"unchanged"`.
    pub filesystem: &'static str,
}

/// The policy runs start from, and the network rules their proxies ask, shared and swappable.
#[derive(Clone)]
pub struct LivePolicy {
    policy: Arc<RwLock<policy::Policy>>,
    rules: Arc<RwLock<Arc<policy::NetRules>>>,
}

impl std::fmt::Debug for LivePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LivePolicy").finish_non_exhaustive()
    }
}

impl LivePolicy {
    /// Starting from `policy` (its network rules compiled and checked here).
    pub fn new(policy: policy::Policy) -> Result<LivePolicy, Error> {
        let rules = policy::NetRules::new(&policy.network)?;
        Ok(LivePolicy {
            policy: Arc::new(RwLock::new(policy)),
            rules: Arc::new(RwLock::new(Arc::new(rules))),
        })
    }

    /// The policy as it is now: what the next run gets.
    pub fn policy(&self) -> policy::Policy {
        match self.policy.read() {
            Ok(p) => p.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The network rules as they are now.
    pub fn rules(&self) -> Arc<policy::NetRules> {
        match self.rules.read() {
            Ok(r) => r.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Apply `change`: checked whole first (an invalid entry changes nothing), then the
    /// network rules are replaced for every proxy at once and the policy for the next run.
    pub fn apply(&self, change: &Change) -> Result<Applied, Error> {
        let mut next = self.policy();
        let set = |list: &mut Vec<String>, new: &Option<Vec<String>>| {
            if let Some(new) = new {
                list.clone_from(new);
            }
        };
        set(&mut next.network.allow_domains, &change.allow_domains);
        set(&mut next.network.deny_domains, &change.deny_domains);
        set(&mut next.network.allow_hosts, &change.allow_hosts);
        set(&mut next.filesystem.allow_write, &change.allow_write);
        set(&mut next.filesystem.allow_read, &change.allow_read);
        set(&mut next.filesystem.deny_read, &change.deny_read);
        set(&mut next.filesystem.deny_write, &change.deny_write);
        for path in [
            &next.filesystem.allow_write,
            &next.filesystem.allow_read,
            &next.filesystem.deny_read,
            &next.filesystem.deny_write,
        ]
        .into_iter()
        .flatten()
        {
            if path.trim().is_empty() || path.contains('\0') {
                return Err(Error::Usage {
                    message: format!("the control line's path {path:?} is empty or holds a NUL"),
                    hint: "give paths as in a policy file (absolute, ~/..., or relative to the workspace)".into(),
                });
            }
        }
        let rules = policy::NetRules::new(&next.network)?;
        self.replace(next, rules);
        Ok(Applied {
            network: match (change.network(), self.mode()) {
                (false, _) => "unchanged",
                (true, policy::NetworkMode::Proxy) => "now",
                (true, _) => {
                    "no proxy: the network mode is not proxy (the rules are kept for none)"
                }
            },
            filesystem: if change.filesystem() {
                "next run"
            } else {
                "unchanged"
            },
        })
    }

    /// Replace the whole policy (`stockade proxy`'s reload): its network rules at once.
    pub fn reload(&self, policy: policy::Policy) -> Result<(), Error> {
        let rules = policy::NetRules::new(&policy.network)?;
        self.replace(policy, rules);
        Ok(())
    }

    fn mode(&self) -> policy::NetworkMode {
        match self.policy.read() {
            Ok(p) => p.network.mode,
            Err(poisoned) => poisoned.into_inner().network.mode,
        }
    }

    fn replace(&self, policy: policy::Policy, rules: policy::NetRules) {
        // Rules first: a run started between the two writes gets the new rules with the old
        // filesystem, never old rules after the reply said "now".
        match self.rules.write() {
            Ok(mut r) => *r = Arc::new(rules),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(rules),
        }
        match self.policy.write() {
            Ok(mut p) => *p = policy,
            Err(poisoned) => *poisoned.into_inner() = policy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(mode: &str) -> LivePolicy {
        let overrides = policy::Overrides {
            net: Some(match mode {
                "proxy" => policy::NetworkMode::Proxy,
                _ => policy::NetworkMode::None,
            }),
            allow_domains: vec!["example.com".into()],
            ..Default::default()
        };
        let p = policy::resolve(None, &overrides).unwrap_or_else(|e| panic!("{e}"));
        LivePolicy::new(p).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn network_changes_apply_now_and_filesystem_ones_next_run() {
        let l = live("proxy");
        assert!(l.rules().check("example.com", 443).allowed);
        assert!(!l.rules().check("example.org", 443).allowed);
        let change: Change = serde_json::from_str(
            r#"{"allow_domains": ["example.org"], "allow_write": ["/var/tmp/x"]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let applied = l.apply(&change).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(applied.network, "now");
        assert_eq!(applied.filesystem, "next run");
        assert!(l.rules().check("example.org", 443).allowed);
        assert!(!l.rules().check("example.com", 443).allowed);
        assert_eq!(l.policy().filesystem.allow_write, ["/var/tmp/x"]);
    }

    #[test]
    fn an_invalid_change_changes_nothing() {
        let l = live("proxy");
        let bad = Change {
            allow_domains: Some(vec!["*.com".into()]),
            allow_write: Some(vec!["/var/tmp/y".into()]),
            ..Default::default()
        };
        assert!(l.apply(&bad).is_err());
        assert!(l.rules().check("example.com", 443).allowed);
        assert!(!l
            .policy()
            .filesystem
            .allow_write
            .contains(&"/var/tmp/y".to_string()));
        assert!(serde_json::from_str::<Change>(r#"{"mode": "host"}"#).is_err());
    }

    #[test]
    fn without_a_proxy_the_reply_says_so() {
        let l = live("none");
        let change = Change {
            allow_domains: Some(vec!["example.org".into()]),
            ..Default::default()
        };
        let applied = l.apply(&change).unwrap_or_else(|e| panic!("{e}"));
        assert!(applied.network.starts_with("no proxy"), "{applied:?}");
    }
}
