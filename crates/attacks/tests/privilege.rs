//! Privilege and isolation: the uid inside (never 0), capabilities, `no_new_privs` and setuid
//! binaries, `/proc/sys` and `/proc/sysrq-trigger`, host SysV IPC, host processes (seeing and
//! signalling them) and the hostname.

use std::os::unix::fs::PermissionsExt;

use attacks::{
    euid, host_hostname, is_root, sh_quote, skip_unless_root, which, Fixture, HostProcess, HostShm,
};

fn field(status: &str, name: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|v| v.trim_start_matches(':').trim().to_owned())
        .unwrap_or_else(|| panic!("no {name} in:\n{status}"))
}

#[test]
fn inside_uid_is_never_root() {
    if !is_root() && attacks::not_applicable(&attacks::na::ROOTLESS_UID0) {
        return;
    }
    let fx = Fixture::new();
    let inside = fx.attack(&[], "id -u; id -g").outcome();
    inside.assert_ok();
    let mut lines = inside.run.stdout.lines();
    let uid: u32 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no uid\n{}", inside.run.describe()));
    assert_ne!(
        uid,
        0,
        "the command runs as root inside\n{}",
        inside.run.describe()
    );
    if is_root() {
        // Native maps it to 1000; the Sentry runs it as the unassigned host id itself; a
        // container engine as the workspace's owner (the suite gives it to WORKSPACE_OWNER).
        let expected = match attacks::backend() {
            "gvisor" => 0x7ff0_0000,
            "podman" | "docker" => {
                attacks::workspace_owner_ids()
                    .expect("the workspace's owner")
                    .0
            }
            _ => 1000,
        };
        assert_eq!(
            uid, expected,
            "a root caller's command should run as uid {expected} inside"
        );
        // Control: directly, the caller is root.
        fx.control("id -u").outcome().assert_shows("0\n");
    } else {
        assert_eq!(uid, euid(), "an unprivileged caller keeps its uid inside");
        println!("skipped: needs root caller: control that the caller is uid 0");
    }
}

#[test]
fn no_effective_capabilities_inside() {
    let fx = Fixture::new();
    let script = "cat /proc/self/status";
    let inside = fx.attack(&[], script).outcome();
    inside.assert_ok();
    // Effective, permitted, inheritable and ambient sets empty, and the bounding set too
    // (which the init empties before the command starts): no execve can grant one back.
    for set in ["CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd"] {
        // The Sentry's /proc/self/status has no ambient set line.
        if set == "CapAmb" && attacks::backend() == "gvisor" && !inside.run.stdout.contains(set) {
            continue;
        }
        let value = field(&inside.run.stdout, set);
        assert_eq!(
            u64::from_str_radix(&value, 16).ok(),
            Some(0),
            "{set} inside is {value}\n{}",
            inside.run.describe()
        );
    }
    // Control: outside, the bounding set is full for any caller.
    let host = fx.control(script).outcome();
    host.assert_ok();
    assert_ne!(field(&host.run.stdout, "CapBnd"), "0000000000000000");
    if skip_unless_root("control: the root caller has capabilities") {
        return;
    }
    assert_ne!(field(&host.run.stdout, "CapEff"), "0000000000000000");
}

#[test]
fn no_new_privs_is_set_and_setuid_does_not_elevate() {
    if attacks::not_applicable(&attacks::na::SENTRY) {
        return;
    }
    let fx = Fixture::new();
    let script = "grep NoNewPrivs /proc/self/status";
    let inside = fx.attack(&[], script).outcome();
    inside.assert_ok();
    assert_eq!(field(&inside.run.stdout, "NoNewPrivs"), "1");
    let host = fx.control(script).outcome();
    if field(&host.run.stdout, "NoNewPrivs") == "1" {
        println!("skipped: the test runner itself has no_new_privs set; no control");
    }

    if skip_unless_root("a setuid-root binary (needs root to create)") {
        return;
    }
    // A setuid-root copy of `id`, outside the workspace.
    let id = which("id").expect("id");
    let suid = fx.root.join("suid-id");
    std::fs::copy(&id, &suid).expect("copy id");
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).expect("chmod");
    let run_suid = format!("{} -u", sh_quote(&suid));
    let inside = fx.attack(&[], &run_suid).outcome();
    inside.assert_ok();
    assert_ne!(
        inside.run.stdout.lines().next().map(str::trim),
        Some("0"),
        "a setuid-root binary gave euid 0 inside\n{}",
        inside.run.describe()
    );
    // Control: an unprivileged user on the host does get euid 0 from it.
    let Some(setpriv) = which("setpriv") else {
        println!("skipped: setpriv not installed: setuid control");
        return;
    };
    fx.control(&format!(
        "{} --reuid=65534 --regid=65534 --clear-groups {run_suid}",
        sh_quote(&setpriv)
    ))
    .outcome()
    .assert_shows("0\n");
}

#[test]
fn proc_sys_and_sysrq_cannot_be_opened_for_writing() {
    let fx = Fixture::new();
    let before = host_hostname();
    // `: >> FILE` opens FILE for writing and writes nothing, so even a broken sandbox cannot
    // change the host through this test.
    let targets: Vec<&str> = [
        "/proc/sys/kernel/hostname",
        "/proc/sys/kernel/core_pattern",
        "/proc/sys/vm/drop_caches",
        "/proc/sysrq-trigger",
    ]
    .into_iter()
    .filter(|t| std::path::Path::new(t).exists())
    .collect();
    for &target in &targets {
        fx.attack(&[], &format!(": >> {target}"))
            .outcome()
            .assert_failed();
    }
    assert_eq!(host_hostname(), before);
    if skip_unless_root("control: root can open /proc/sys files for writing") {
        return;
    }
    for target in targets {
        fx.control(&format!(": >> {target}")).outcome().assert_ok();
    }
}

#[test]
fn host_sysv_shared_memory_is_invisible() {
    if attacks::not_applicable(&attacks::na::SENTRY) {
        return;
    }
    let fx = Fixture::new();
    let shm = HostShm::create();
    let key_hex = shm.key_hex();
    let key_dec = shm.key.to_string();
    let script = "ipcs -m; cat /proc/sysvipc/shm";
    let inside = fx.attack(&[], script).outcome();
    inside.assert_ok();
    inside
        .assert_lacks(&key_hex)
        .assert_lacks(&key_dec)
        // ipcs really ran.
        .assert_output_contains("shmid");
    let host = fx.control(script).outcome();
    host.assert_shows(&key_hex).assert_output_contains(&key_dec);
}

#[test]
fn host_processes_are_invisible() {
    let fx = Fixture::new();
    let proc = HostProcess::sleeper();
    let pid = proc.pid();
    let script = format!(
        "ps -eo pid,args; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < \"$f\"; echo; done; \
         if kill -0 {pid} && [ -d /proc/{pid} ]; then echo HOST-PID-\"VISIBLE\"; fi"
    );
    let inside = fx.attack(&[], &script).outcome();
    inside.assert_ok();
    inside
        .assert_lacks(&proc.marker)
        .assert_lacks("HOST-PID-VISIBLE")
        // ps really ran.
        .assert_output_contains("COMMAND");
    let host = fx.control(&script).outcome();
    host.assert_shows(&proc.marker)
        .assert_output_contains("HOST-PID-VISIBLE");
}

#[test]
fn kill_all_does_not_reach_host_processes() {
    let fx = Fixture::new();
    let mut proc = HostProcess::sleeper();
    let pid = proc.pid();
    // Guard: only signal "every process" once it is certain the host process is not visible
    // (a sandbox without its own pid namespace would otherwise kill the test runner).
    let script = format!(
        "if [ -d /proc/{pid} ]; then echo GUARD-HOST-PID-VISIBLE; exit 3; fi\n\
         kill -9 -1\n\
         echo after-kill-all"
    );
    let inside = fx.sandbox(&[], &script).run();
    inside.assert_lacks("GUARD-HOST-PID-VISIBLE");
    assert!(
        proc.alive(),
        "the host process was killed from inside\n{}",
        inside.describe()
    );
    // Control: the caller can signal it directly.
    fx.control(&format!("kill -0 {pid}")).outcome().assert_ok();
    assert!(proc.alive());
}

#[test]
fn hostname_is_private() {
    let fx = Fixture::new();
    let before = host_hostname();
    let evil = format!("evil-{}", &fx.id[..fx.id.len().min(20)]);
    // Guard: only try to change it once the sandbox shows its own hostname.
    let script = format!(
        "[ \"$(hostname)\" = stockade ] || {{ echo \"hostname is $(hostname)\"; exit 7; }}\n\
         hostname {evil} 2>&1; echo {evil} > /proc/sys/kernel/hostname 2>&1; hostname"
    );
    let inside = fx.attack(&[], &script).outcome();
    let after = host_hostname();
    if after != before && is_root() {
        // Put the host back before failing.
        let _ = std::fs::write("/proc/sys/kernel/hostname", &before);
    }
    inside.ran();
    assert_eq!(after, before, "the host hostname was changed from inside");
    assert_ne!(
        inside.rc,
        Some(7),
        "the hostname inside is not `stockade`\n{}",
        inside.run.describe()
    );
    // Control: the same change in a private UTS namespace works.
    if which("unshare").is_none() {
        println!("skipped: unshare not installed: hostname control");
        return;
    }
    let control = format!("unshare -r -u sh -c 'hostname {evil} && hostname'");
    fx.control(&control).outcome().assert_shows(&evil);
    assert_eq!(host_hostname(), before);
}

/// A set-user-ID (or set-group-ID) file left in the workspace would run with its owner's
/// rights for anyone on the host: root's, for a root caller's workspace (found by review).
/// `chmod` with those bits is refused and recorded; new files never get them. Control: the
/// same snippet on the host makes the bits.
#[test]
fn set_id_bits_are_refused() {
    let fx = attacks::Fixture::new();
    let script = "cp /bin/true t && chmod 4755 t; chmod g+s t; \
                  python3 -c 'import os; os.close(os.open(\"t2\", os.O_CREAT | os.O_WRONLY, 0o6755))'; \
                  stat -c %a t t2";
    let run = fx.attack(&[], script).run();
    // Native records the refusal; gVisor's seccomp filter refuses the call (EPERM) unrecorded,
    // and refuses the whole `open` that asks for the bits.
    let native = attacks::backend() == "native";
    if native {
        assert!(
            run.stderr
                .contains("set-user-ID and set-group-ID bits are refused"),
            "no violation recorded\n{}",
            run.describe()
        );
        // Its hint says no policy line allows it (not `unprotect`, a catalogue's answer).
        run.assert_stderr_contains("nothing in the policy allows set-ID bits");
        assert!(
            !run.stderr.contains("unprotect"),
            "the set-ID refusal's hint names `unprotect`\n{}",
            run.describe()
        );
    }
    for name in ["t", "t2"] {
        let Ok(meta) = std::fs::metadata(fx.ws.join(name)) else {
            assert!(!native, "{name} was not made\n{}", run.describe());
            continue;
        };
        let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
        assert_eq!(
            mode & 0o6000,
            0,
            "{name} has set-ID bits: {mode:o}\n{}",
            run.describe()
        );
    }
    let _ = std::fs::remove_file(fx.ws.join("t"));
    let _ = std::fs::remove_file(fx.ws.join("t2"));
    fx.control(script).outcome().assert_shows("6755\n");
}
