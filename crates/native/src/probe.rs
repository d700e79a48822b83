//! `stockade doctor` for the native backend: every check tries the feature in a throw-away
//! child and reports what happened, with a fix for what is missing.

pub use sandbox::Check;

fn check(
    name: &'static str,
    required: bool,
    result: std::io::Result<Result<(), sys::Errno>>,
    ok_detail: &str,
    fix: &str,
) -> Check {
    match result {
        Ok(Ok(())) => Check {
            name,
            ok: true,
            required,
            detail: ok_detail.to_string(),
            fix: None,
        },
        Ok(Err(e)) => Check {
            name,
            ok: false,
            required,
            detail: format!("failed: {e}"),
            fix: Some(fix.to_string()),
        },
        Err(e) => Check {
            name,
            ok: false,
            required,
            detail: format!("could not run the probe: {e}"),
            fix: Some(fix.to_string()),
        },
    }
}

const USERNS_FIX: &str = "enable unprivileged user namespaces: `sysctl -w user.max_user_namespaces=15000` and, on Debian/Ubuntu, `sysctl -w kernel.unprivileged_userns_clone=1` (Ubuntu 23.10+: `stockade apparmor-profile`, or `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`); inside a container or another sandbox, namespaces must be allowed by its seccomp profile";

/// Whether a host setting denies user namespaces to stockade (see [`crate::userns`]).
fn userns_policy(refused: bool) -> Check {
    let facts = crate::userns::UsernsFacts::this_host();
    match crate::userns::blocker(&facts, refused) {
        None => Check {
            name: "user-namespace policy",
            ok: true,
            required: true,
            detail: "no host setting denies user namespaces to stockade".into(),
            fix: None,
        },
        Some(b) => Check {
            name: "user-namespace policy",
            ok: false,
            required: true,
            detail: format!("{}: {}", b.setting, b.what),
            fix: Some(b.fix),
        },
    }
}

/// Run every probe.
pub fn probe() -> Vec<Check> {
    let mut checks = vec![
        check(
            "user namespaces",
            true,
            sys::probe::user_namespace(),
            "can create a user namespace",
            USERNS_FIX,
        ),
        check(
            "all namespaces",
            true,
            sys::probe::all_namespaces(),
            "can create user, mount, pid, net, ipc, uts and cgroup namespaces together",
            USERNS_FIX,
        ),
        check(
            "mounts in a user namespace",
            true,
            sys::probe::mounts_in_user_namespace(),
            "can build a private read-only mount tree with tmpfs (new mount API)",
            "use Linux ≥ 5.12 (mount_setattr, open_tree, fsopen) with user namespaces enabled",
        ),
    ];
    let refused = checks.iter().any(|c| !c.ok);
    let policy = userns_policy(refused);
    if let (false, Some(fix)) = (policy.ok, &policy.fix) {
        for c in checks.iter_mut().filter(|c| !c.ok) {
            c.fix = Some(fix.clone());
        }
    }
    checks.insert(0, policy);
    let caller_root = sys::raw::euid() == 0;
    if caller_root {
        checks.push(check(
            "idmapped mounts",
            true,
            sys::probe::idmapped_mount(),
            "can create idmapped mounts (needed to run as an unprivileged uid when the caller is root)",
            "use Linux ≥ 5.12 and a filesystem with idmapped-mount support (ext4, xfs, btrfs; tmpfs from 6.3), or run stockade as a regular user",
        ));
    } else {
        checks.push(Check {
            name: "idmapped mounts",
            ok: true,
            required: false,
            detail: "not needed: the caller is not root".into(),
            fix: None,
        });
    }
    let abi = sys::raw::landlock_abi();
    let landlock_detail = match abi {
        Ok(v) => format!(
            "Landlock ABI {v} enforced (filesystem{}{})",
            if v >= 4 { ", TCP" } else { "" },
            if v >= 6 {
                ", signal and abstract-socket scopes"
            } else {
                ""
            }
        ),
        Err(_) => String::new(),
    };
    checks.push(check(
        "landlock",
        true,
        sys::probe::landlock_enforce(),
        &landlock_detail,
        "use a kernel with CONFIG_SECURITY_LANDLOCK=y and `landlock` in the lsm= boot parameter (Linux ≥ 5.13; ABI 6+ for scopes)",
    ));
    checks.push(check(
        "seccomp",
        true,
        sys::probe::seccomp_filter(),
        "can install seccomp filters with no_new_privs",
        "use a kernel with CONFIG_SECCOMP_FILTER=y; inside a container, allow seccomp()",
    ));
    checks.push(check(
        "seccomp user notification",
        true,
        sys::probe::seccomp_user_notification(),
        "can hand name-creating calls to the init (protected paths are refused during the run)",
        "use Linux ≥ 5.14 (seccomp user notification with SECCOMP_ADDFD_FLAG_SEND); inside a container, allow seccomp()",
    ));
    match seccomp::build_default() {
        Ok(p) => checks.push(Check {
            name: "seccomp program",
            ok: true,
            required: true,
            detail: format!("{} BPF instructions, x86_64 only, x32 refused", p.len()),
            fix: None,
        }),
        Err(e) => checks.push(Check {
            name: "seccomp program",
            ok: false,
            required: true,
            detail: e.to_string(),
            fix: Some("stockade's filter supports x86_64 only".into()),
        }),
    }
    checks.push(cgroups());
    checks
}

/// Which mechanism enforces each resource limit for this caller (see [`crate::cgroup`]).
fn cgroups() -> Check {
    use crate::cgroup::{choose, CgroupFacts, Wanted};
    let facts = CgroupFacts::probe();
    let one = |w: Wanted| match choose(&facts, &w) {
        Ok(p) => p
            .memory
            .or(p.pids)
            .or(p.cpu_millis)
            .map_or("none", |(_, m)| m.describe()),
        Err(_) => "unavailable",
    };
    let memory = one(Wanted {
        memory: Some(1),
        ..Wanted::default()
    });
    let pids = one(Wanted {
        pids: Some(1),
        ..Wanted::default()
    });
    let cpu = one(Wanted {
        cpu_millis: Some(1000),
        ..Wanted::default()
    });
    let memory_note = if memory == "rlimit" {
        " (RLIMIT_DATA, per process)"
    } else {
        ""
    };
    let pids_note = if pids == "rlimit" {
        " (RLIMIT_NPROC, per user namespace)"
    } else {
        ""
    };
    Check {
        name: "resource limits",
        ok: true,
        required: false,
        detail: format!(
            "memory: {memory}{memory_note}; pids: {pids}{pids_note}; cpu: {cpu}"
        ),
        fix: (cpu == "unavailable").then(|| {
            "--cpu needs a cgroup: a systemd session with delegation (`systemd-run --user --scope -p Delegate=yes ...`), or root where cgroup v1 is mounted".into()
        }),
    }
}
