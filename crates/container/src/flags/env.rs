//! The command's environment and the check's inputs: the caller's variables, what the check
//! inside reads back (`STOCKADE_CHECK_*`: the mounts, the limits, the signals, the terminal),
//! and the `--env-file` and `--env` flags that give them to the command.

use sandbox::{Network, Spec};

use super::mounts::Mounts;
use super::{
    container_memory, engine_setting, escape, mountinfo_escape, text, Caller, LowerError, Target,
    GATE,
};

/// The command's environment with what the check reads of the mounts: its id, the network,
/// the masks, the gate, the identities, the view, the masks' directories, what may be
/// writable and where each bind must be placed.
pub(super) fn mounts_env(
    spec: &Spec,
    caller: &Caller,
    target: &Target,
    mounts: &Mounts,
) -> Vec<(String, String)> {
    // The environment, in a file the engine's client reads (never on its command line, for
    // every user of the machine to read, nor in its environment, where a name such as
    // DOCKER_HOST or XDG_DATA_HOME would steer the engine itself).
    let mut env = spec.env.clone();
    env.retain(|(k, _)| !k.starts_with("STOCKADE_CHECK_"));
    let masks: Vec<String> = (spec.masks.iter().map(|m| &m.path))
        .chain(&target.extra_masks)
        .chain(target.owner_home.iter().map(|c| &c.dir))
        .filter_map(|p| p.to_str().map(escape))
        .collect();
    env.push(("STOCKADE_CHECK_UID".into(), caller.uid.to_string()));
    env.push((
        "STOCKADE_CHECK_NET".into(),
        match spec.network {
            Network::Host => "host".into(),
            _ => "none".into(),
        },
    ));
    env.push(("STOCKADE_CHECK_MASKS".into(), masks.join(" ")));
    if target.gate.is_some() {
        env.push(("STOCKADE_CHECK_GATE".into(), GATE.into()));
    }
    let ids: Vec<String> = (mounts.identities.iter())
        .filter_map(|(p, (dev, ino))| p.to_str().map(|p| format!("{dev}:{ino}{}", escape(p))))
        .collect();
    env.push(("STOCKADE_CHECK_IDS".into(), ids.join(" ")));
    let view_ids: Vec<String> = (mounts.view_ids.iter())
        .filter_map(|(p, ino)| p.to_str().map(|p| format!("{ino}{}", escape(p))))
        .collect();
    env.push(("STOCKADE_CHECK_VIEWIDS".into(), view_ids.join(" ")));
    env.push((
        "STOCKADE_CHECK_VIEWEMPTY".into(),
        mounts.view_empty.clone().unwrap_or_default(),
    ));
    env.push(("STOCKADE_CHECK_MASKDIRS".into(), mounts.mask_dirs.join(" ")));
    // What may be mounted writable besides the engine's own (/proc and what lies below it,
    // and by their exact mount points /dev, /tmp, /run and /dev's own: a bind whose source
    // and destination the engine resolved apart, a link followed on the host and a new
    // directory in the container's own /tmp, is no engine's own):
    // the writable roots and private directories, the owner's home's cover (root's, mode
    // 0711) and the covers above the roots (root's, 0755), and what lies below the engine's
    // masked store (the mask, checked above to be empty, hides it). Every other mount must
    // be read-only, unless the command cannot reach it: a directory above it that the
    // command can neither search (the check `cd`s into each, as the command) nor make
    // searchable (a chmod of it to its own mode fails: not its owner, or on a read-only
    // mount such as a mask's tmpfs), or whose path leads elsewhere (a mount over a directory
    // above it, a mask's, covers it). A running Docker
    // container's root below /var/lib/docker (0710, root's) is a shared mount, so it shows
    // writable in rootless Podman's recursive bind of /var: every rootless run beside one was
    // refused.
    let rw: Vec<String> = (spec.writable_roots.iter())
        .chain(&spec.private_dirs)
        .chain(mounts.covers.iter().map(|c| &c.dir))
        .chain(&target.extra_masks)
        .filter_map(|p| p.to_str().map(mountinfo_escape))
        .collect();
    env.push(("STOCKADE_CHECK_RW".into(), rw.join(" ")));
    let placed: Vec<String> = (mounts.placed.iter())
        .filter_map(|(ro, p)| {
            let tag = if *ro { 'r' } else { 'w' };
            p.to_str().map(|p| format!("{tag}{}", mountinfo_escape(p)))
        })
        .collect();
    env.push(("STOCKADE_CHECK_PLACED".into(), placed.join(" ")));
    env
}

/// The limits, as the kernel holds them inside (the cgroup's, or the rlimits).
pub(super) fn limits_env(
    spec: &Spec,
    caller: &Caller,
    target: &Target,
    env: &mut Vec<(String, String)>,
) {
    let limits = &spec.limits;
    let some = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    let (pids, mem, nproc, data) = if caller.rootless {
        (None, None, limits.pids, limits.memory_bytes)
    } else {
        // The kernel keeps a memory limit in whole pages.
        (
            limits.pids,
            container_memory(limits.memory_bytes, target).map(|b| b / 4096 * 4096),
            None,
            None,
        )
    };
    env.push(("STOCKADE_CHECK_PIDS".into(), some(pids)));
    env.push(("STOCKADE_CHECK_MEM".into(), some(mem)));
    env.push(("STOCKADE_CHECK_NPROC".into(), some(nproc)));
    env.push(("STOCKADE_CHECK_DATA".into(), some(data)));
    env.push(("STOCKADE_CHECK_NOFILE".into(), some(limits.files)));
}

/// The signals the command starts with ignored, and whether its terminal's `TERM` is unset.
pub(super) fn process_env(target: &Target, env: &mut Vec<(String, String)>) {
    let ignored: Vec<String> = (target.ignored_signals.iter())
        .map(i32::to_string)
        .collect();
    env.push(("STOCKADE_CHECK_IGNORE".into(), ignored.join(" ")));
    // The engines give a command with a terminal `TERM=xterm` when its environment has none;
    // it gets none, as natively (a shell's line editing follows it).
    let no_term = !env.iter().any(|(k, _)| k == "TERM");
    env.push((
        "STOCKADE_CHECK_NOTERM".into(),
        if no_term { "1" } else { "" }.into(),
    ));
}

/// The environment as the `--env-file` lines and the variables with multi-line values (given
/// as `--env NAME` from the engine's client's own environment): a name the file would misread
/// is refused, and so is a multi-line value of a name that is a setting of the engine.
pub(super) fn env_file(
    env: Vec<(String, String)>,
) -> Result<(String, Vec<(String, String)>), LowerError> {
    let mut env_file = String::new();
    let mut multi_line = Vec::new();
    for (k, v) in env {
        if k.is_empty()
            || k.starts_with('#')
            || k.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(LowerError::EnvName(k));
        }
        if v.contains('\n') || v.contains('\r') {
            if engine_setting(&k) {
                return Err(LowerError::EngineVariable(k));
            }
            multi_line.push((k, v));
        } else {
            env_file.push_str(&format!("{k}={v}\n"));
        }
    }
    Ok((env_file, multi_line))
}

/// The flags that give the command its environment: the file, and each multi-line variable.
pub(super) fn env_flags(
    target: &Target,
    multi_line: &[(String, String)],
    a: &mut Vec<String>,
) -> Result<(), LowerError> {
    a.push("--env-file".into());
    a.push(text(&target.env_file)?.to_owned());
    for (k, _) in multi_line {
        a.push("--env".into());
        a.push(k.clone());
    }
    Ok(())
}
