//! The run's resource limits on this machine: how each is enforced (cgroup or rlimit), the
//! size of the private memory filesystems, and the rlimits set before `execve`.

use crate::cgroup::{Missing, ResourcePlan, Wanted};
use crate::host::Host;

/// The limits of the whole run and how this machine enforces them (see [`crate::cgroup`]).
pub(super) fn resources(
    limits: &sandbox::Limits,
    host: &dyn Host,
) -> (ResourcePlan, Option<Missing>, Option<u64>) {
    let wanted = Wanted {
        memory: limits.memory_bytes,
        pids: limits.pids,
        cpu_millis: limits.cpu_millis,
    };
    let output = limits.output_bytes;
    let facts = host.cgroups();
    match crate::cgroup::choose(&facts, &wanted) {
        Ok(plan) => (plan, None, output),
        Err(missing) => {
            // Everything else still planned; the CPU limit is what is missing.
            let rest = Wanted {
                cpu_millis: None,
                ..wanted
            };
            let plan = crate::cgroup::choose(&facts, &rest).unwrap_or_default();
            (plan, Some(missing), output)
        }
    }
}

/// The mount data of the private /tmp and /dev/shm. They are memory: bounded by
/// `limits.tmp_size` each. A memory cgroup counts their pages with the rest of the run's;
/// `RLIMIT_DATA` does not, so under it neither may hold more than the memory limit.
pub(super) fn tmp_data(tmp_bytes: Option<u64>, resources: &ResourcePlan) -> String {
    let uncounted = match resources.memory {
        Some((bytes, crate::cgroup::Mechanism::Rlimit)) => Some(bytes),
        _ => None,
    };
    match (tmp_bytes, uncounted) {
        (Some(t), Some(m)) => format!("mode=1777,size={}", t.min(m)),
        (None, Some(m)) | (Some(m), None) => format!("mode=1777,size={m}"),
        (None, None) => "mode=1777".to_string(),
    }
}

/// The rlimits set on the command before `execve`: `limits.files`, then those the resource
/// plan enforces by rlimit.
pub(super) fn rlimits(limits: &sandbox::Limits, resources: &ResourcePlan) -> Vec<(String, u64)> {
    limits
        .files
        .map(|n| ("RLIMIT_NOFILE".to_string(), n))
        .into_iter()
        .chain(resources.rlimits.iter().cloned())
        .collect()
}
