//! The backend-neutral part of a plan, as a [`sandbox::Spec`]: what another backend (gVisor)
//! lowers in its own way. Computed here, once, by the same planner as the native mounts.

use std::time::Duration;

use sandbox::{Kind, Mask, Spec};

use super::{Mount, Plan};
use crate::cgroup::Mechanism;

impl Plan {
    /// The resolved spec this plan lowers (`policy` is the one it was planned from).
    pub fn spec(&self, policy: &policy::Policy) -> Result<Spec, policy::PolicyError> {
        let mut masks = Vec::new();
        for m in &self.mounts {
            let (path, kind, readable) = match m {
                Mount::MaskDir { target } => (target, Kind::Dir, false),
                Mount::MaskFile { target } => (target, Kind::File, false),
                Mount::EmptyDir { target } => (target, Kind::Dir, true),
                Mount::EmptyFile { target } => (target, Kind::File, true),
                _ => continue,
            };
            masks.push(Mask {
                path: path.clone(),
                kind,
                readable,
            });
        }
        let value = |l: Option<(u64, Mechanism)>| l.map(|(v, _)| v);
        let files = self
            .rlimits
            .iter()
            .find(|(name, _)| name == "RLIMIT_NOFILE")
            .map(|(_, v)| *v);
        let tmp_bytes = match &policy.limits.tmp_size {
            Some(size) => Some(policy::parse_size(size)?),
            None => None,
        };
        Ok(Spec {
            argv: self.argv.clone(),
            cwd: self.cwd.clone(),
            env: self.env.clone(),
            hostname: self.hostname.clone(),
            read_scope: match policy.filesystem.read_scope {
                policy::ReadScope::Host => sandbox::ReadScope::Host,
                policy::ReadScope::AllowList => sandbox::ReadScope::AllowList,
            },
            writable_roots: self.writable_roots.clone(),
            protected: self.protected.clone(),
            masks,
            network: match (self.network.mode, self.network.proxy) {
                (policy::NetworkMode::Host, _) => sandbox::Network::Host,
                (policy::NetworkMode::Proxy, Some(addr)) => sandbox::Network::Proxy { addr },
                _ => sandbox::Network::None,
            },
            limits: sandbox::Limits {
                timeout: self.timeout_secs.map(Duration::from_secs),
                tmp_bytes,
                files,
                memory_bytes: value(self.resources.memory),
                pids: value(self.resources.pids),
                cpu_millis: value(self.resources.cpu_millis),
                output_bytes: self.output_limit,
            },
            caller: sandbox::Ids {
                uid: if self.ids.clear_groups {
                    0
                } else {
                    self.ids.inside_uid
                },
                gid: if self.ids.clear_groups {
                    0
                } else {
                    self.ids.inside_gid
                },
            },
        })
    }
}
