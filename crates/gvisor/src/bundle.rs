//! A run's [`Spec`] lowered to an OCI runtime config for `runsc` (pure: no I/O).
//!
//! The root is the host's `/`, read-only; the writable roots are bind mounts over it; protected
//! paths are read-only binds of themselves; masks are empty files (from the bundle) or empty
//! tmpfs directories over the path. Every mount destination is a path the planner found on
//! the host: `runsc`'s gofer creates a missing mount point on the host itself (as root for a
//! root caller), so the run ([`crate::Gvisor::run`]) checks again that each still exists,
//! unchanged, right before the start.

use std::path::{Path, PathBuf};

use sandbox::{Kind, Mask, Spec};
use serde_json::{json, Value};

use crate::gitstage::Staged;
use crate::{Caller, Reach};

/// The file every unreadable file mask is bound from: an empty file with mode 0 in the bundle
/// directory (the command runs without capabilities, so not even its owner can open it).
pub const UNREADABLE_FILE: &str = "unreadable";
/// The file every readable-empty file mask is bound from: an empty file, mode 0444.
pub const EMPTY_FILE: &str = "empty";

/// Stands for the held network namespace's path in a config until the run knows it.
pub const NETNS_PLACEHOLDER: &str = "/@netns@";
/// Stands for the caller's own network namespace's path (`/proc/PID/ns/net`) in a config
/// until the run knows it: a root caller's `--net host`, where runsc itself runs in a held
/// namespace of the run's own.
pub const CALLER_NETNS_PLACEHOLDER: &str = "/@caller-netns@";

/// Why a spec cannot be lowered for gVisor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LowerError {
    #[error("the gvisor backend cannot run with read_scope = \"allow-list\" yet")]
    AllowList,
    #[error(
        "the gvisor backend cannot enforce a CPU limit (limits.cpu) for a caller who is not root"
    )]
    CpuUnprivileged,
    #[error("a path of the spec is not valid UTF-8: {0}")]
    NotUtf8(PathBuf),
}

fn text(p: &Path) -> Result<&str, LowerError> {
    p.to_str()
        .ok_or_else(|| LowerError::NotUtf8(p.to_path_buf()))
}

/// One mount of the config, kept with its kind for the run's last check.
fn bind(dest: &Path, source: &Path, readonly: bool) -> Result<Value, LowerError> {
    Ok(json!({
        "destination": text(dest)?,
        "type": "bind",
        "source": text(source)?,
        "options": ["rbind", if readonly { "ro" } else { "rw" }, "nosuid", "nodev"],
    }))
}

fn tmpfs(dest: &str, options: Vec<String>) -> Value {
    json!({ "destination": dest, "type": "tmpfs", "source": "tmpfs", "options": options })
}

fn mask_mount(mask: &Mask, bundle: &Path) -> Result<Value, LowerError> {
    Ok(match (mask.kind, mask.readable) {
        (Kind::Dir, readable) => {
            let mode = if readable { "mode=0555" } else { "mode=0000" };
            let mut m = tmpfs(
                text(&mask.path)?,
                vec![
                    "ro".into(),
                    "size=4k".into(),
                    mode.into(),
                    "nosuid".into(),
                    "nodev".into(),
                ],
            );
            m["destination"] = json!(text(&mask.path)?);
            m
        }
        (Kind::File, readable) => {
            let source = bundle.join(if readable {
                EMPTY_FILE
            } else {
                UNREADABLE_FILE
            });
            bind(&mask.path, &source, true)?
        }
    })
}

/// A seccomp filter (applied by the Sentry, `runsc --oci-seccomp`) refusing set-user-ID and
/// set-group-ID bits in `chmod` and in the mode of new files, directories and nodes: on the
/// host, such a file of the workspace would run with its owner's rights (root's, for a root
/// caller) for anyone who executes it. (This runsc answers every refusal with EPERM.)
fn set_id_filter() -> Value {
    // (call, index of its mode argument)
    const MODE_ARG: &[(&str, u32)] = &[
        ("chmod", 1),
        ("fchmod", 1),
        ("fchmodat", 2),
        ("creat", 1),
        ("open", 2),
        ("openat", 3),
        ("mkdir", 1),
        ("mkdirat", 2),
        ("mknod", 1),
        ("mknodat", 2),
    ];
    let mut rules = Vec::new();
    for (call, index) in MODE_ARG {
        for bit in [libc::S_ISUID, libc::S_ISGID] {
            rules.push(json!({
                "names": [call],
                "action": "SCMP_ACT_ERRNO",
                "errnoRet": libc::EPERM,
                "args": [{ "index": index, "value": bit, "valueTwo": bit, "op": "SCMP_CMP_MASKED_EQ" }],
            }));
        }
    }
    json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": rules,
    })
}

fn depth(p: &Path) -> usize {
    p.components().count()
}

/// A root caller's cgroup for the run, when it has a memory or CPU limit (`runsc --rootless`
/// has none: see `usage`).
pub fn group_plan(spec: &Spec, caller: &Caller) -> Option<crate::usage::GroupPlan> {
    let limits = &spec.limits;
    (!caller.rootless && (limits.memory_bytes.is_some() || limits.cpu_millis.is_some())).then(
        || crate::usage::GroupPlan {
            path: format!("/stockade/{}", caller.run_id),
            memory: limits.memory_bytes,
            cpu: limits.cpu_millis.map(|m| (m * 100, 100_000)),
            count_pids: false,
        },
    )
}

/// The OCI config of `spec` for a bundle at `bundle`, run by `caller`, as JSON: the command's
/// process with its limits (`rlimits`), the mounts (the Sentry's own, `base_mounts`, then
/// those over the read-only root, `Layered`) and its namespaces, seccomp filter and cgroup
/// (`linux`).
///
/// Written as JSON rather than built with the `oci-spec` crate's types: linking them into
/// stockade added ~120 KB of relocated data that every run (native ones too) pays for at
/// start-up (+60 page faults, +4% on `run -- true`). The `oci-spec` crate checks the output
/// instead: the tests parse every config made here into `oci_spec::runtime::Spec`.
pub fn config(
    spec: &Spec,
    caller: &Caller,
    reach: &Reach,
    staged: &[Staged],
    bundle: &Path,
) -> Result<Value, LowerError> {
    if spec.read_scope == sandbox::ReadScope::AllowList {
        return Err(LowerError::AllowList);
    }
    if spec.limits.cpu_millis.is_some() && caller.rootless {
        return Err(LowerError::CpuUnprivileged);
    }
    // Mounts over the read-only root, parents before what lies below them: writable roots,
    // then read-only protected paths and masks inside them.
    let mut layered = Layered::default();
    layered.reach(reach)?;
    layered.grants(spec)?;
    layered.protected(spec, staged)?;
    layered.pins(spec, staged, bundle)?;
    layered.private_dirs(spec)?;
    layered.masks(spec, bundle)?;
    let mut mounts = base_mounts(spec, caller);
    // The private /tmp goes first: a writable root below /tmp is bound into it.
    mounts.extend(layered.sorted());
    let rlimits = rlimits(spec, caller);
    let env: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let linux = linux(spec, caller);
    let none: Vec<String> = Vec::new();
    let config = json!({
        "ociVersion": "1.0.2",
        "root": { "path": "/", "readonly": true },
        "hostname": spec.hostname,
        "process": {
            "terminal": false,
            "user": { "uid": caller.uid, "gid": caller.gid, "additionalGids": [] },
            "args": spec.argv,
            "env": env,
            "cwd": text(&spec.cwd)?,
            "capabilities": { "bounding": none, "effective": none, "inheritable": none, "permitted": none, "ambient": none },
            "noNewPrivileges": true,
            "rlimits": rlimits,
        },
        "mounts": mounts,
        "linux": linux,
    });
    Ok(config)
}

/// The mounts over the read-only root, each with its depth and rank: sorted, parents come
/// before what lies below them, and at one depth the grants (rank 0) before protected paths,
/// pins and private directories (1), before masks (2).
#[derive(Default)]
struct Layered(Vec<(usize, u8, Value)>);

impl Layered {
    /// A mount at `depth` with `rank`.
    fn push(&mut self, (depth, rank, mount): (usize, u8, Value)) {
        self.0.push((depth, rank, mount));
    }

    /// A root caller's covers on the way to what it is granted, and the grants bound below them.
    fn reach(&mut self, reach: &Reach) -> Result<(), LowerError> {
        // A root caller's covers over directories it cannot enter on the way to what it is
        // granted (see [`Reach`]), before the granted paths bound below them; the Sentry makes
        // their mount points in the cover.
        for c in &reach.covers {
            let options = ["mode=0755", "size=64k", "nosuid", "nodev", "noexec"];
            let options = options.iter().map(|o| o.to_string()).collect();
            self.push((depth(c), 0, tmpfs(text(c)?, options)));
        }
        for g in &reach.binds {
            self.push((depth(g), 0, bind(g, g, true)?));
        }
        Ok(())
    }

    /// The writable roots, and the read grants below the host's `/tmp`.
    fn grants(&mut self, spec: &Spec) -> Result<(), LowerError> {
        for root in &spec.writable_roots {
            self.push((depth(root), 0, bind(root, root, false)?));
        }
        // Read grants below the host's /tmp: the private /tmp does not hold them, so each is
        // bound read-only at its own path in it (a writable root inside one comes after it).
        for grant in spec.tmp_read_grants() {
            self.push((depth(grant), 0, bind(grant, grant, true)?));
        }
        Ok(())
    }

    /// The protected paths: read-only binds of themselves.
    fn protected(&mut self, spec: &Spec, staged: &[Staged]) -> Result<(), LowerError> {
        // A protected path at or below a mask is the mask's: a read-only bind of the path itself
        // at a mask's destination would show the file the mask hides (two mounts at one place are
        // not layered in order by every runsc).
        // A staged git dir's top-level protected files are the staged copy's (judged after the
        // run, see `gitstage`): no bind of their own, which git's rename over them would meet.
        let staged_file = |p: &Path| {
            staged.iter().any(|s| {
                p.parent() == Some(s.gitdir.as_path())
                    && p.file_name()
                        .is_some_and(|n| s.protected.iter().any(|x| x == n))
            })
        };
        for p in &spec.protected {
            if (spec.masks.iter()).any(|m| p.starts_with(&m.path)) || staged_file(p) {
                continue;
            }
            self.push((depth(p), 1, bind(p, p, true)?));
        }
        Ok(())
    }

    /// The pins: writable binds of themselves, or a staged git dir's copy.
    fn pins(&mut self, spec: &Spec, staged: &[Staged], bundle: &Path) -> Result<(), LowerError> {
        // A pinned directory (a git dir holding protected paths, the ancestors of stockade's
        // state inside a writable root): a writable bind of itself, as the native backend pins
        // it. The Sentry refuses to rename a mount point, or to rename anything over one (EBUSY):
        // without it a command could move `~/.local/state` away and put a directory of its own
        // in its place, where a concurrent run would keep its journals and walk cache. A pin that
        // is a writable root, a protected path, or lies at or below a mask or a private directory
        // is a mount point already.
        for p in spec.pins_bound_alone() {
            match staged.iter().position(|s| &s.gitdir == p) {
                // An existing git dir: the staged copy of its top level at its place, and each
                // of its subdirectories (the host's own) bound over theirs in it; protected ones
                // (`hooks`) are bound read-only above.
                Some(i) => {
                    self.push((depth(p), 1, bind(p, &Staged::source(bundle, i), false)?));
                    for d in &staged[i].subdirs {
                        let sub = p.join(d);
                        if spec.protected.contains(&sub)
                            || (spec.masks.iter()).any(|m| sub.starts_with(&m.path))
                        {
                            continue;
                        }
                        self.push((depth(&sub), 1, bind(&sub, &sub, false)?));
                    }
                }
                None => self.push((depth(p), 1, bind(p, p, false)?)),
            }
        }
        Ok(())
    }

    /// The private directories: an empty tmpfs each.
    fn private_dirs(&mut self, spec: &Spec) -> Result<(), LowerError> {
        // A private directory: an empty tmpfs of the run's own over the host's.
        for p in &spec.private_dirs {
            let dest = text(p)?;
            let options = vec![
                "mode=1777".into(),
                "nosuid".into(),
                "nodev".into(),
                format!("size={}", 64u64 << 20),
            ];
            self.push((depth(p), 1, tmpfs(dest, options)));
        }
        Ok(())
    }

    /// The masks: an empty file or directory over each ([`mask_mount`]).
    fn masks(&mut self, spec: &Spec, bundle: &Path) -> Result<(), LowerError> {
        for m in &spec.masks {
            self.push((depth(&m.path), 2, mask_mount(m, bundle)?));
        }
        Ok(())
    }

    /// The mounts, parents before what lies below them.
    fn sorted(mut self) -> Vec<Value> {
        self.0.sort_by_key(|a| (a.0, a.1));
        self.0.into_iter().map(|(_, _, m)| m).collect()
    }
}

/// The Sentry's own mounts: `/proc`, `/sys`, `/dev`, and the private `/tmp` and `/dev/shm`.
fn base_mounts(spec: &Spec, caller: &Caller) -> Vec<Value> {
    // The private /tmp and /dev/shm are the Sentry's memory. Without a cgroup (an unprivileged
    // caller) nothing else counts them against the memory limit (RLIMIT_AS is per process and
    // does not see them): neither may hold more than that limit, as under the native backend.
    let uncounted = spec.limits.memory_bytes.filter(|_| caller.rootless);
    let tmp_bytes = match (spec.limits.tmp_bytes, uncounted) {
        (Some(t), Some(m)) => Some(t.min(m)),
        (t, m) => t.or(m),
    };
    let tmp_size = tmp_bytes.map(|b| format!("size={b}"));
    let mut mounts = vec![
        json!({ "destination": "/proc", "type": "proc", "source": "proc" }),
        json!({ "destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["ro", "nosuid", "nodev", "noexec"] }),
        tmpfs("/dev", vec!["mode=0755".into(), "nosuid".into()]),
    ];
    for dest in ["/tmp", "/dev/shm"] {
        let mut o = vec!["mode=1777".to_string(), "nosuid".into(), "nodev".into()];
        o.extend(tmp_size.clone());
        mounts.push(tmpfs(dest, o));
    }
    mounts
}

/// The command's resource limits: open files, processes, and (without a cgroup) memory per
/// process.
fn rlimits(spec: &Spec, caller: &Caller) -> Vec<Value> {
    let mut rlimits = Vec::new();
    let mut rlimit = |kind: &str, value: u64| {
        rlimits.push(json!({ "type": kind, "hard": value, "soft": value }));
    };
    if let Some(n) = spec.limits.files {
        rlimit("RLIMIT_NOFILE", n);
    }
    // The Sentry is the run's own kernel: its RLIMIT_NPROC counts exactly the run's
    // processes (a cgroup's pids limit would count the Sentry's host threads instead).
    if let Some(n) = spec.limits.pids {
        rlimit("RLIMIT_NPROC", n);
    }
    if caller.rootless {
        // No cgroup for an unprivileged caller: memory is bounded per process.
        if let Some(b) = spec.limits.memory_bytes {
            rlimit("RLIMIT_AS", b);
        }
    }
    rlimits
}

/// The config's `linux` section: the namespaces (the network's by mode), the set-ID filter,
/// and a root caller's cgroup with its resources.
fn linux(spec: &Spec, caller: &Caller) -> Value {
    // A root caller's cgroup: stockade makes it with these limits before runsc starts
    // (`usage::Group`); runsc joins a group it finds made and leaves it be. The resources are
    // written here too, for the config to say what the group holds.
    let group = group_plan(spec, caller);
    let mut resources = serde_json::Map::new();
    if let Some(g) = &group {
        if let Some(b) = g.memory {
            resources.insert("memory".into(), json!({ "limit": b, "swap": b }));
        }
        if let Some((quota, period)) = g.cpu {
            resources.insert("cpu".into(), json!({ "quota": quota, "period": period }));
        }
    }
    // `--network=host` with a network namespace of its own is an empty one; without, the
    // network of the namespace runsc runs in (`--network=none` is the Sentry's loopback
    // whatever the namespace). runsc runs in a namespace held for the run (its control
    // socket is bound there, see `Plan::control_held`), but for an unprivileged caller's
    // `--net host`.
    let mut namespaces = vec![
        json!({ "type": "pid" }),
        json!({ "type": "ipc" }),
        json!({ "type": "uts" }),
        json!({ "type": "mount" }),
    ];
    match spec.network {
        sandbox::Network::None => namespaces.push(json!({ "type": "network" })),
        // The held namespace with the proxy's listener (`sys::netns`): joined by path as
        // root; `runsc --rootless` cannot open that path and is started inside it instead.
        sandbox::Network::Proxy { .. } if !caller.rootless => {
            namespaces.push(json!({ "type": "network", "path": NETNS_PLACEHOLDER }))
        }
        // The host's network, joined by path as root (runsc itself is elsewhere).
        sandbox::Network::Host if !caller.rootless => {
            namespaces.push(json!({ "type": "network", "path": CALLER_NETNS_PLACEHOLDER }))
        }
        sandbox::Network::Proxy { .. } | sandbox::Network::Host => {}
    }
    let mut linux = json!({
        "namespaces": namespaces,
        "seccomp": set_id_filter(),
    });
    if let Some(g) = group {
        linux["resources"] = Value::Object(resources);
        linux["cgroupsPath"] = json!(g.path);
    }
    linux
}

/// `config` with a terminal of the run's own: runsc makes a new pseudo-terminal for the
/// command, `rows` by `cols`, and hands its master side to `--console-socket` (see
/// [`crate::Gvisor::run`]); the command's stdin, stdout and stderr are that terminal. Without
/// it (`"terminal": false`) they are runsc's own streams, which are always pipes.
pub fn with_terminal(config: &mut Value, rows: u16, cols: u16) {
    config["process"]["terminal"] = json!(true);
    config["process"]["consoleSize"] = json!({ "height": rows, "width": cols });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sandbox::{Ids, Limits, Network, ReadScope};
    use std::time::Duration;

    pub(crate) fn spec() -> Spec {
        Spec {
            argv: vec!["/bin/true".into()],
            cwd: "/w".into(),
            workspace: "/w".into(),
            home: "/h".into(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            hostname: "stockade".into(),
            read_scope: ReadScope::Host,
            read_grants: Vec::new(),
            writable_roots: vec!["/w".into()],
            protected: vec!["/w/.git/hooks".into()],
            pins: vec!["/w/.git".into()],
            guard: Vec::new(),
            guard_sweep_only: Vec::new(),
            linked_secrets: Vec::new(),
            credential_routes: false,
            masks: vec![
                Mask {
                    path: "/w/.env".into(),
                    kind: Kind::File,
                    readable: false,
                },
                Mask {
                    path: "/h/.ssh".into(),
                    kind: Kind::Dir,
                    readable: false,
                },
                Mask {
                    path: "/h/.bashrc".into(),
                    kind: Kind::File,
                    readable: true,
                },
            ],
            network: Network::None,
            limits: Limits {
                timeout: Some(Duration::from_secs(5)),
                tmp_bytes: Some(1 << 20),
                files: Some(64),
                memory_bytes: Some(1 << 30),
                pids: Some(100),
                cpu_millis: None,
                output_bytes: None,
                disk_bytes: None,
            },
            caller: Ids {
                uid: 1000,
                gid: 1000,
            },
            review: None,
            identities: Default::default(),
            private_dirs: Vec::new(),
        }
    }

    fn caller(rootless: bool) -> Caller {
        Caller {
            rootless,
            uid: 0,
            gid: 0,
            run_id: "r1".into(),
        }
    }

    /// The config, checked against the OCI runtime spec's types (`oci-spec`): it parses, and
    /// says the same once parsed.
    fn as_json(spec: &Spec, rootless: bool) -> Value {
        let c = config(
            spec,
            &caller(rootless),
            &Reach::default(),
            &[],
            Path::new("/b"),
        )
        .expect("lowers");
        let typed: oci_spec::runtime::Spec =
            serde_json::from_value(c.clone()).expect("a valid OCI runtime config");
        let back = serde_json::to_value(&typed).expect("serializes");
        for key in ["root", "process", "mounts", "hostname"] {
            assert_eq!(back[key], c[key], "{key} changes through oci-spec");
        }
        c
    }

    fn mount<'a>(v: &'a Value, dest: &str) -> &'a Value {
        v["mounts"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["destination"] == dest))
            .unwrap_or_else(|| panic!("no mount at {dest}: {v}"))
    }

    #[test]
    fn a_terminal_of_the_runs_own_is_asked_for_only_with_one() {
        let mut c = as_json(&spec(), false);
        assert_eq!(c["process"]["terminal"], false);
        assert!(c["process"].get("consoleSize").is_none());
        with_terminal(&mut c, 41, 132);
        let typed: oci_spec::runtime::Spec =
            serde_json::from_value(c.clone()).expect("a valid OCI runtime config");
        let process = typed.process().as_ref().expect("a process");
        assert_eq!(process.terminal(), Some(true));
        let size = process.console_size().expect("a console size");
        assert_eq!((size.height(), size.width()), (41, 132));
    }

    #[test]
    fn root_is_the_read_only_host_and_the_command_has_no_capabilities() {
        let v = as_json(&spec(), false);
        assert_eq!(v["root"]["path"], "/");
        assert_eq!(v["root"]["readonly"], true);
        assert_eq!(v["process"]["noNewPrivileges"], true);
        for set in [
            "bounding",
            "effective",
            "inheritable",
            "permitted",
            "ambient",
        ] {
            assert_eq!(
                v["process"]["capabilities"][set],
                serde_json::json!([]),
                "{set}"
            );
        }
        assert_eq!(
            v["process"]["env"],
            serde_json::json!(["PATH=/usr/bin:/bin"])
        );
    }

    /// A protected path that a mask covers (a home as the workspace: `~/.config/fish` is both
    /// a protected start-up directory and read as empty) gets the mask only.
    #[test]
    fn a_mask_wins_over_a_protected_bind_at_its_place() {
        let mut s = spec();
        s.writable_roots = vec!["/h".into()];
        s.protected = vec!["/h/.config/fish".into(), "/h/.local/bin".into()];
        s.masks = vec![Mask {
            path: "/h/.config/fish".into(),
            kind: Kind::Dir,
            readable: true,
        }];
        let v = as_json(&s, false);
        let at = |dest: &str| -> Vec<serde_json::Value> {
            (v["mounts"].as_array().unwrap().iter())
                .filter(|m| m["destination"] == dest)
                .cloned()
                .collect()
        };
        let fish = at("/h/.config/fish");
        assert_eq!(fish.len(), 1, "{fish:#?}");
        assert_eq!(fish[0]["type"], "tmpfs");
        // Control: a protected path no mask covers is still bound read-only.
        assert_eq!(at("/h/.local/bin")[0]["options"][1], "ro");
    }

    /// Every pin is a mount point (the Sentry refuses to rename one): a writable bind of
    /// itself after its writable root and before what lies in it; none over a writable root,
    /// a protected path, or a path a mask or private directory covers.
    #[test]
    fn a_staged_git_dir_is_its_copy_with_the_hosts_subdirectories_bound_over_it() {
        let mut s = spec();
        s.writable_roots = vec!["/w".into()];
        s.pins = vec!["/w/.git".into()];
        s.protected = vec!["/w/.git/config".into(), "/w/.git/hooks".into()];
        let staged = Staged {
            owner: None,
            gitdir: "/w/.git".into(),
            identity: (1, 2),
            config_identity: Some((1, 3)),
            subdirs: vec!["hooks".into(), "objects".into(), "refs".into()],
            copied: vec!["rebase-merge".into()],
            protected: vec!["config".into()],
        };
        let c = config(
            &s,
            &caller(false),
            &Reach::default(),
            &[staged],
            Path::new("/b"),
        )
        .expect("lowers");
        let order: Vec<&str> = (c["mounts"].as_array().expect("mounts").iter())
            .filter_map(|m| m["destination"].as_str())
            .collect();
        let at = |d: &str| order.iter().position(|o| *o == d);
        let git = mount(&c, "/w/.git");
        assert_eq!(git["source"], "/b/git/0");
        assert!(git["options"].to_string().contains("\"rw\""), "{git}");
        for sub in ["/w/.git/objects", "/w/.git/refs"] {
            let m = mount(&c, sub);
            assert_eq!(m["source"], sub);
            assert!(m["options"].to_string().contains("\"rw\""), "{m}");
            assert!(at("/w/.git") < at(sub), "{order:?}");
        }
        // Protected subdirectories stay read-only binds; the copied one and the config are
        // the copy's, with no mount of their own (git renames over the config, and removes
        // the copied one when its operation ends).
        assert_eq!(mount(&c, "/w/.git/hooks")["options"][1], "ro");
        assert_eq!(order.iter().filter(|o| **o == "/w/.git/hooks").count(), 1);
        assert_eq!(at("/w/.git/config"), None, "{order:?}");
        assert_eq!(at("/w/.git/rebase-merge"), None, "{order:?}");
    }

    #[test]
    fn pins_are_writable_binds_of_themselves() {
        let mut s = spec();
        s.writable_roots = vec!["/h".into()];
        s.pins = vec![
            "/h".into(),
            "/h/.local".into(),
            "/h/.local/state".into(),
            "/h/.local/state/stockade".into(),
            "/h/.ssh/inner".into(),
            "/h/p/.git".into(),
            "/h/cache/x".into(),
        ];
        s.protected = vec!["/h/.local/state/stockade".into()];
        s.private_dirs = vec!["/h/cache".into()];
        let v = as_json(&s, false);
        let order: Vec<&str> = (v["mounts"].as_array().expect("mounts").iter())
            .filter_map(|m| m["destination"].as_str())
            .collect();
        let at = |d: &str| order.iter().position(|o| *o == d);
        for pin in ["/h/.local", "/h/.local/state", "/h/p/.git"] {
            let m = mount(&v, pin);
            assert_eq!(
                (m["type"].as_str(), m["source"].as_str()),
                (Some("bind"), Some(pin))
            );
            assert!(
                m["options"].as_array().expect("o").contains(&"rw".into()),
                "{m}"
            );
            assert!(at("/h") < at(pin), "{order:?}");
        }
        assert!(at("/h/.local") < at("/h/.local/state"), "{order:?}");
        assert!(
            at("/h/.local/state") < at("/h/.local/state/stockade"),
            "{order:?}"
        );
        // One mount each at the root, the protected path, and what a mask or tmpfs covers.
        for once in ["/h", "/h/.local/state/stockade"] {
            assert_eq!(order.iter().filter(|o| **o == once).count(), 1, "{order:?}");
        }
        assert_eq!(mount(&v, "/h/.local/state/stockade")["options"][1], "ro");
        assert_eq!(at("/h/.ssh/inner"), None, "{order:?}");
        assert_eq!(at("/h/cache/x"), None, "{order:?}");
    }

    #[test]
    fn read_grants_below_tmp_are_bound_read_only_after_the_private_tmp() {
        let mut s = spec();
        s.read_grants = vec![
            "/tmp/r".into(),
            "/tmp/r/inner".into(), // reached through /tmp/r
            "/tmp/ws/in".into(),   // inside a writable root
            "/srv/other".into(),   // visible anyway
        ];
        s.writable_roots = vec!["/tmp/r/w".into(), "/tmp/ws".into()];
        s.masks = vec![Mask {
            path: "/tmp/r/.env".into(),
            kind: Kind::File,
            readable: false,
        }];
        let v = as_json(&s, false);
        let order: Vec<&str> = (v["mounts"].as_array().expect("mounts").iter())
            .filter_map(|m| m["destination"].as_str())
            .collect();
        let at = |d: &str| order.iter().position(|o| *o == d);
        let (tmp, grant) = (at("/tmp").expect("/tmp"), at("/tmp/r").expect("grant"));
        assert!(tmp < grant, "{order:?}");
        assert!(grant < at("/tmp/r/w").expect("root") && grant < at("/tmp/r/.env").expect("mask"));
        let options = mount(&v, "/tmp/r")["options"].as_array().expect("options");
        assert!(options.contains(&"ro".into()) && !options.contains(&"rw".into()));
        for not_bound in ["/tmp/r/inner", "/tmp/ws/in", "/srv/other"] {
            assert_eq!(at(not_bound), None, "{not_bound}: {order:?}");
        }
    }

    #[test]
    fn writable_roots_come_before_what_lies_in_them_and_masks_are_empty() {
        let v = as_json(&spec(), false);
        let order: Vec<&str> = v["mounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .filter_map(|m| m["destination"].as_str())
            .collect();
        let at = |d: &str| order.iter().position(|o| *o == d).expect("mounted");
        assert!(
            at("/tmp") < at("/w") && at("/w") < at("/w/.git/hooks") && at("/w") < at("/w/.env")
        );
        assert!(mount(&v, "/w")["options"]
            .as_array()
            .expect("options")
            .contains(&"rw".into()));
        assert!(mount(&v, "/w/.git/hooks")["options"]
            .as_array()
            .expect("o")
            .contains(&"ro".into()));
        assert_eq!(mount(&v, "/w/.env")["source"], "/b/unreadable");
        assert_eq!(mount(&v, "/h/.bashrc")["source"], "/b/empty");
        assert_eq!(mount(&v, "/h/.ssh")["type"], "tmpfs");
        assert!(mount(&v, "/h/.ssh")["options"]
            .as_array()
            .expect("o")
            .contains(&"mode=0000".into()));
    }

    #[test]
    fn limits_use_the_cgroup_for_root_and_rlimits_without_it() {
        let root = as_json(&spec(), false);
        assert_eq!(root["linux"]["resources"]["memory"]["limit"], 1u64 << 30);
        assert!(
            root["linux"]["resources"].get("pids").is_none(),
            "pids by RLIMIT_NPROC only"
        );
        let rootless = as_json(&spec(), true);
        assert!(rootless["linux"].get("resources").is_none());
        let rl = rootless["process"]["rlimits"].to_string();
        assert!(
            rl.contains("RLIMIT_NPROC") && rl.contains("RLIMIT_AS") && rl.contains("RLIMIT_NOFILE"),
            "{rl}"
        );
        // Without a cgroup the private /tmp and /dev/shm are bounded by the memory limit too.
        let mut small = spec();
        small.limits.memory_bytes = Some(1 << 19);
        let tmp = as_json(&small, true);
        assert!(
            mount(&tmp, "/dev/shm")["options"]
                .to_string()
                .contains("size=524288"),
            "{tmp}"
        );
        let tmp = as_json(&small, false);
        assert!(
            mount(&tmp, "/dev/shm")["options"]
                .to_string()
                .contains("size=1048576"),
            "{tmp}"
        );
        let mut cpu = spec();
        cpu.limits.cpu_millis = Some(500);
        assert_eq!(
            config(&cpu, &caller(true), &Reach::default(), &[], Path::new("/b")).err(),
            Some(LowerError::CpuUnprivileged)
        );
    }

    #[test]
    fn host_mode_joins_the_callers_network_by_path_as_root_and_is_left_out_unprivileged() {
        let has_netns = |v: &Value| v["linux"]["namespaces"].to_string().contains("network");
        assert!(has_netns(&as_json(&spec(), false)));
        let mut host = spec();
        host.network = Network::Host;
        let root = as_json(&host, false);
        assert!(
            root["linux"]["namespaces"]
                .to_string()
                .contains(CALLER_NETNS_PLACEHOLDER),
            "{root}"
        );
        assert!(!has_netns(&as_json(&host, true)));
        let mut allow = spec();
        allow.read_scope = ReadScope::AllowList;
        assert_eq!(
            config(
                &allow,
                &caller(false),
                &Reach::default(),
                &[],
                Path::new("/b")
            )
            .err(),
            Some(LowerError::AllowList)
        );
    }

    /// A pinned git dir with a protected config is staged, with its subdirectories to bind
    /// and a stopped rebase's state to copy; not one inside a path protected whole.
    #[test]
    fn only_git_dirs_outside_paths_protected_whole_are_staged() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("a directory");
        let g = dir.path().join("tool/.git");
        for sub in ["objects", "refs", "hooks", "rebase-merge"] {
            std::fs::create_dir_all(g.join(sub)).expect("mkdir");
        }
        std::fs::write(g.join("config"), "[core]\n").expect("write");
        std::fs::write(g.join("HEAD"), "ref: refs/heads/main\n").expect("write");
        let m = std::fs::metadata(&g).expect("stat");
        let mut spec = spec();
        spec.pins = vec![g.clone()];
        spec.protected = vec![g.join("config"), g.join("hooks")];
        spec.identities.insert(g.clone(), (m.dev(), m.ino()));
        let staged = crate::gitstage::plan(&spec, None);
        assert_eq!(staged.len(), 1);
        assert_eq!(staged[0].subdirs, ["hooks", "objects", "refs"]);
        assert_eq!(staged[0].copied, ["rebase-merge"]);
        assert_eq!(staged[0].protected, ["config"]);
        spec.protected.push(dir.path().join("tool"));
        assert!(crate::gitstage::plan(&spec, None).is_empty());
    }
}
