//! The engine's own flags of a run: what is refused before anything is lowered, the base
//! flags and hardening (`--read-only`, every capability dropped, `no-new-privileges`, the
//! seccomp profile, private namespaces, the network, the user), the run's limits (the
//! container's cgroup, or rlimits where the engine has none) and the private `/tmp`, `/run`
//! and `/dev/shm`.

use sandbox::{Network, ReadScope, Spec};

use super::{container_memory, text, Caller, LowerError, Target, Witness, ROOTLESS_MEMORY_FLOOR};
use crate::Engine;

/// What no container run can enforce or be given: refused before anything is lowered.
pub(super) fn refuse_unenforceable(
    spec: &Spec,
    caller: &Caller,
    target: &Target,
) -> Result<(), LowerError> {
    if spec.read_scope == ReadScope::AllowList {
        return Err(LowerError::AllowList);
    }
    if caller.rootless && spec.limits.cpu_millis.is_some() {
        return Err(LowerError::CpuRootless(target.engine.name()));
    }
    if caller.rootless
        && spec
            .limits
            .memory_bytes
            .is_some_and(|b| b < ROOTLESS_MEMORY_FLOOR)
    {
        return Err(LowerError::MemoryRootless);
    }
    if spec.review.is_some() && spec.limits.disk_bytes.is_some() {
        return Err(LowerError::ViewDisk);
    }
    // A review run is never given the workspace itself.
    if spec.review.is_some() && target.view.is_none() {
        return Err(LowerError::Changed(spec.workspace.clone()));
    }
    // The check inside knows the view's lower layer by inode numbers, which the view keeps
    // only over one filesystem, and only of what it can name (see [`Witness`]): otherwise
    // a directory put at the workspace's path before the engine looked it up would be the
    // lower layer unseen (red team of issue 33: a workspace of `.env` and a symbolic link).
    if let Some(view) = &target.view {
        if !view.same_filesystem {
            let store = view.upper.parent().unwrap_or(&view.upper).to_path_buf();
            return Err(LowerError::ViewFilesystems(store, spec.workspace.clone()));
        }
        if view.witness == Witness::None {
            return Err(LowerError::ViewUnwitnessed(spec.workspace.clone()));
        }
    }
    Ok(())
}

/// The engine's base flags and hardening, up to the command's user.
pub(super) fn base_flags(
    spec: &Spec,
    caller: &Caller,
    target: &Target,
    a: &mut Vec<String>,
) -> Result<(), LowerError> {
    let engine = target.engine;
    let mut push = |s: &str| a.push(s.to_owned());
    if let Some(rt) = &target.runtime {
        push("--runtime");
        push(rt);
    }
    push("run");
    // `--rm` always, taken away by the run under `--keep`; `--interactive` is added by the run
    // when stdin is fed: both are the run's options (`sandbox::Launch`), not the plan's.
    push("--rm");
    push("--name");
    push(&target.name);
    push("--pull");
    push("never");
    // Output goes to the caller only, never into the engine's logs.
    push("--log-driver");
    push("none");
    push("--read-only");
    if engine == Engine::Podman {
        // Podman adds writable tmpfs at /run, /tmp and /var/tmp under --read-only by default.
        push("--read-only-tmpfs=false");
    }
    push("--cap-drop");
    push("ALL");
    push("--security-opt");
    push("no-new-privileges");
    push("--security-opt");
    push(&format!("seccomp={}", text(&target.seccomp_profile)?));
    push("--ipc");
    push("private");
    push("--cgroupns");
    push("private");
    push("--hostname");
    push(&spec.hostname);
    push("--network");
    push(match spec.network {
        Network::Host => "host",
        _ => "none",
    });
    push("--user");
    push(&format!("{}:{}", caller.uid, caller.gid));
    Ok(())
}

/// The run's limits: the container's cgroup under a root caller (`--memory`,
/// `--pids-limit`, `--cpus` and the run's group as `--cgroup-parent`), rlimits under
/// rootless Podman, and the open-files rlimit under both.
pub(super) fn limit_flags(spec: &Spec, caller: &Caller, target: &Target, a: &mut Vec<String>) {
    let engine = target.engine;
    let mut push = |s: &str| a.push(s.to_owned());
    let limits = &spec.limits;
    if caller.rootless {
        if let Some(b) = limits.memory_bytes {
            push("--ulimit");
            push(&format!("data={b}:{b}"));
        }
        if let Some(n) = limits.pids {
            push("--ulimit");
            push(&format!("nproc={n}:{n}"));
        }
    } else {
        if let Some(group) = &target.group {
            push("--cgroup-parent");
            push(&group.path);
            if engine == Engine::Podman {
                // conmon stays out of the run's group (by default Podman makes it a group of
                // its own there, whose processes and memory the run's counters would hold).
                push("--cgroups");
                push("no-conmon");
            }
        }
        if let Some(b) = container_memory(limits.memory_bytes, target) {
            push("--memory");
            push(&b.to_string());
            push("--memory-swap");
            push(&b.to_string());
        }
        if let Some(n) = limits.pids {
            push("--pids-limit");
            push(&n.to_string());
        }
        if let Some(m) = limits.cpu_millis {
            push("--cpus");
            push(&format!("{}.{:03}", m / 1000, m % 1000));
        }
        if engine == Engine::Podman {
            // Root Podman sets a process rlimit the runtime may not raise (EPERM at start):
            // one no higher than this process's own, and than what runc may set here.
            let n = target.nproc_hard.min(32768);
            push("--ulimit");
            push(&format!("nproc={n}:{n}"));
        }
    }
    let files = limits.files.unwrap_or(target.nofile_hard);
    push("--ulimit");
    push(&format!("nofile={files}:{files}"));
}

/// The private /tmp, /run and /dev/shm (their sizes the run's `tmp_bytes`).
pub(super) fn private_tmp(spec: &Spec, a: &mut Vec<String>) {
    let limits = &spec.limits;
    let mut push = |s: &str| a.push(s.to_owned());
    // The private /tmp and /dev/shm.
    let tmp_size = limits
        .tmp_bytes
        .map(|b| format!(",size={b}"))
        .unwrap_or_default();
    push("--tmpfs");
    push(&format!("/tmp:rw,nosuid,nodev,mode=1777{tmp_size}"));
    push("--tmpfs");
    push("/run:rw,nosuid,nodev,mode=0755,size=1m");
    push("--shm-size");
    push(&limits.tmp_bytes.unwrap_or(64 << 20).to_string());
}
