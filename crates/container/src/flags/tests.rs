use super::*;
use crate::image::Entry;
use sandbox::{Ids, Limits, Network, ReadScope};
use std::time::Duration;

/// [`super::lower`] with an identity for each writable root and read grant below `/tmp` that
/// the target names none for (the backend reads them on the host; one it could not read is
/// refused: see `a_root_the_backend_found_changed_is_refused`).
fn lower(s: &Spec, c: &Caller, t: &Target) -> Result<Lowered, LowerError> {
    let mut t = t.clone();
    for (i, p) in (s.writable_roots.iter().chain(s.tmp_read_grants())).enumerate() {
        if !t.root_identities.iter().any(|(q, _)| q == p) {
            t.root_identities.push((p.clone(), (7, 200 + i as u64)));
        }
    }
    super::lower(s, c, &t)
}

#[test]
fn a_root_the_backend_found_changed_is_refused() {
    // The backend found no identity: the root was a symbolic link (or gone) when it looked.
    let mut t = target(Engine::Podman);
    t.root_identities.clear();
    assert_eq!(
        super::lower(&spec(), &caller(), &t).unwrap_err(),
        LowerError::Changed("/w".into())
    );
    // A read grant below /tmp, as a root.
    t.root_identities = vec![("/w".into(), (7, 100))];
    assert_eq!(
        super::lower(&spec(), &caller(), &t).unwrap_err(),
        LowerError::Changed("/tmp/grant".into())
    );
    t.root_identities.push(("/tmp/grant".into(), (7, 101)));
    let l = super::lower(&spec(), &caller(), &t).expect("lowered");
    assert!(
        l.env_file
            .contains("STOCKADE_CHECK_IDS=7:100/w 7:101/tmp/grant"),
        "{}",
        l.env_file
    );
}

fn spec() -> Spec {
    Spec {
        argv: vec!["make".into(), "test".into()],
        cwd: "/w/src".into(),
        workspace: "/w".into(),
        home: "/h".into(),
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("API_TOKEN".into(), "s3cr3t-value".into()),
        ],
        hostname: "stockade".into(),
        read_scope: ReadScope::Host,
        read_grants: vec!["/tmp/grant".into()],
        writable_roots: vec!["/w".into()],
        protected: vec!["/w/.git/hooks".into(), "/w/.git/config".into()],
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
                path: "/h/.config/gh".into(),
                kind: Kind::Dir,
                readable: true,
            },
        ],
        private_dirs: vec!["/w/.cache/private".into()],
        network: Network::None,
        limits: Limits {
            timeout: Some(Duration::from_secs(5)),
            tmp_bytes: Some(1 << 20),
            files: Some(64),
            memory_bytes: Some(1 << 30),
            pids: Some(100),
            cpu_millis: Some(1500),
            output_bytes: None,
            disk_bytes: None,
        },
        caller: Ids {
            uid: 1000,
            gid: 1000,
        },
        review: None,
        identities: Default::default(),
    }
}

fn target(engine: Engine) -> Target {
    Target {
        engine,
        runtime: (engine == Engine::Podman).then(|| "/usr/sbin/runc".into()),
        image: "localhost/stockade-host:0011".into(),
        name: "stockade-r1".into(),
        empty_file: "/f/empty".into(),
        unreadable_file: "/f/unreadable".into(),
        host_root: vec![
            ("bin".into(), Entry::Symlink, Some("usr/bin".into())),
            ("etc".into(), Entry::Dir, None),
            ("h".into(), Entry::Dir, None),
            ("proc".into(), Entry::Dir, None),
            ("run".into(), Entry::Dir, None),
            ("tmp".into(), Entry::Dir, None),
            ("usr".into(), Entry::Dir, None),
            ("w".into(), Entry::Dir, None),
        ],
        nproc_hard: 96365,
        nofile_hard: 20000,
        ignored_signals: vec![1],
        nonrecursive: NonRecursive::Legacy,
        mount_points: vec![
            "/".into(),
            "/usr/local".into(),
            "/w/mnt".into(),
            "/proc/x".into(),
        ],
        seccomp_profile: "/f/seccomp.json".into(),
        env_file: "/f/env".into(),
        extra_masks: Vec::new(),
        owner_home: None,
        root_identities: vec![("/w".into(), (7, 100))],
        mask_dirs: Vec::new(),
        closed: Vec::new(),
        covers: Vec::new(),
        gate: None,
        init: None,
        staged: Vec::new(),
        stage_dir: "/tmp/run-files".into(),
        view: None,
        subdir_ids: Vec::new(),
        group: None,
    }
}

fn caller() -> Caller {
    Caller {
        uid: 1000,
        gid: 1000,
        rootless: false,
    }
}

/// The values of every `flag VALUE` pair.
fn values<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
    (args.windows(2))
        .filter(|w| w[0] == flag)
        .map(|w| w[1].as_str())
        .collect()
}

/// A root caller's run with a group of stockade's: the container below it, its own memory
/// limit `CHILD_SLACK` above the group's (the group reaches the limit first, and counts the
/// OOM), the check reading back the container's; Podman's conmon kept out of the group.
#[test]
fn a_group_of_stockades_is_the_containers_parent_and_holds_the_memory_limit() {
    let group = sys::cgroup1::GroupPlan {
        path: "/stockade/r1".into(),
        memory: Some(1 << 30),
        cpu: None,
        count_pids: true,
    };
    for engine in [Engine::Docker, Engine::Podman] {
        let mut t = target(engine);
        t.group = Some(group.clone());
        let l = lower(&spec(), &caller(), &t).unwrap();
        let a = &l.args;
        assert_eq!(values(a, "--cgroup-parent"), ["/stockade/r1"]);
        let inner = ((1u64 << 30) + CHILD_SLACK).to_string();
        assert_eq!(values(a, "--memory"), [inner.as_str()]);
        assert_eq!(values(a, "--memory-swap"), [inner.as_str()]);
        assert_eq!(values(a, "--pids-limit"), ["100"]);
        let mem = format!(
            "STOCKADE_CHECK_MEM={inner}
"
        );
        assert!(l.env_file.contains(&mem), "{}", l.env_file);
        let conmon = values(a, "--cgroups");
        assert_eq!(
            conmon,
            if engine == Engine::Podman {
                vec!["no-conmon"]
            } else {
                vec![]
            }
        );
    }
}

#[test]
fn every_flag_of_the_hardening_recipe_is_given() {
    let l = lower(&spec(), &caller(), &target(Engine::Docker)).unwrap();
    let a = &l.args;
    assert_eq!(a[0], "run");
    for f in ["--rm", "--read-only"] {
        assert!(a.iter().any(|x| x == f), "{f} missing: {a:?}");
    }
    assert_eq!(values(a, "--cap-drop"), ["ALL"]);
    assert_eq!(
        values(a, "--security-opt"),
        ["no-new-privileges", "seccomp=/f/seccomp.json"]
    );
    assert_eq!(values(a, "--network"), ["none"]);
    assert_eq!(values(a, "--user"), ["1000:1000"]);
    assert_eq!(values(a, "--pull"), ["never"]);
    assert_eq!(values(a, "--log-driver"), ["none"]);
    assert_eq!(values(a, "--memory"), ["1073741824"]);
    assert_eq!(values(a, "--memory-swap"), ["1073741824"]);
    assert_eq!(values(a, "--pids-limit"), ["100"]);
    assert_eq!(values(a, "--cpus"), ["1.500"]);
    assert_eq!(values(a, "--ulimit"), ["nofile=64:64"]);
    assert_eq!(values(a, "--workdir"), ["/w/src"]);
    // The image, then the check script that becomes the command.
    let at = a
        .iter()
        .position(|x| x == "localhost/stockade-host:0011")
        .unwrap();
    assert_eq!(
        &a[at + 1..],
        ["/bin/sh", "-c", CHECK, "stockade-check", "make", "test"]
    );
    // No Podman-only flag for Docker.
    assert!(!a
        .iter()
        .any(|x| x.contains("tmpcopyup") || x.contains("read-only-tmpfs")));
}

#[test]
fn the_host_tree_is_bound_read_only_without_its_run_time_and_kernel_directories() {
    let l = lower(&spec(), &caller(), &target(Engine::Docker)).unwrap();
    let mounts = values(&l.args, "--mount");
    for d in ["/etc", "/h", "/usr", "/w"] {
        assert!(
            mounts.contains(
                &format!("type=bind,src={d},dst={d},ro=true,bind-nonrecursive=true").as_str()
            ),
            "{d}: {mounts:?}"
        );
    }
    for d in ["/bin", "/proc", "/run", "/tmp"] {
        assert!(
            !mounts.iter().any(|m| m.contains(&format!("src={d},"))),
            "{d} bound: {mounts:?}"
        );
    }
    // The private /tmp and /run.
    let tmpfs = values(&l.args, "--tmpfs");
    assert_eq!(
        tmpfs,
        [
            "/tmp:rw,nosuid,nodev,mode=1777,size=1048576",
            "/run:rw,nosuid,nodev,mode=0755,size=1m"
        ]
    );
}

#[test]
fn writable_roots_come_before_protected_paths_and_masks_in_them() {
    let l = lower(&spec(), &caller(), &target(Engine::Podman)).unwrap();
    let mounts = values(&l.args, "--mount");
    let at = |needle: &str| {
        mounts
            .iter()
            .position(|m| m.contains(needle))
            .unwrap_or_else(|| panic!("{needle}: {mounts:?}"))
    };
    let root = at("src=/w,dst=/w,bind-nonrecursive");
    assert!(root > at("src=/w,dst=/w,ro=true"), "the host's /w first");
    assert!(at("dst=/w/.git/hooks,ro=true") > root);
    assert!(
        at("dst=/w/.git,bind-nonrecursive") > root,
        "the pin, writable"
    );
    assert!(at("src=/f/unreadable,dst=/w/.env,ro=true") > root);
    // Masked directories: read-only tmpfs, unreadable (mode 0200: the engines take 0 as
    // none) or empty, never copied up from what they hide.
    assert_eq!(
        mounts[at("dst=/h/.ssh")],
        "type=tmpfs,dst=/h/.ssh,tmpfs-mode=200,tmpfs-size=4096,ro=true,notmpcopyup"
    );
    assert_eq!(
        mounts[at("dst=/h/.config/gh")],
        "type=tmpfs,dst=/h/.config/gh,tmpfs-mode=555,tmpfs-size=4096,ro=true,notmpcopyup"
    );
    assert!(mounts[at("dst=/w/.cache/private")].starts_with("type=tmpfs"));
    assert!(at("dst=/tmp/grant,ro=true") > 0);
}

#[test]
fn podman_runs_with_runc_and_without_its_own_writable_tmpfs() {
    let l = lower(&spec(), &caller(), &target(Engine::Podman)).unwrap();
    assert_eq!(&l.args[..3], ["--runtime", "/usr/sbin/runc", "run"]);
    assert!(l.args.iter().any(|a| a == "--read-only-tmpfs=false"));
    // Root Podman: a process rlimit no higher than what the runtime may set.
    assert_eq!(
        values(&l.args, "--ulimit"),
        ["nproc=32768:32768", "nofile=64:64"]
    );
}

#[test]
fn rootless_podman_bounds_with_rlimits_and_refuses_a_cpu_limit() {
    let rootless = Caller {
        uid: 0,
        gid: 0,
        rootless: true,
    };
    assert_eq!(
        lower(&spec(), &rootless, &target(Engine::Podman)),
        Err(LowerError::CpuRootless("podman"))
    );
    let mut s = spec();
    s.limits.cpu_millis = None;
    s.limits.memory_bytes = Some(64 << 20);
    assert_eq!(
        lower(&s, &rootless, &target(Engine::Podman)),
        Err(LowerError::MemoryRootless)
    );
    s.limits.memory_bytes = Some(1 << 30);
    let l = lower(&s, &rootless, &target(Engine::Podman)).unwrap();
    assert_eq!(
        values(&l.args, "--ulimit"),
        [
            "data=1073741824:1073741824",
            "nproc=100:100",
            "nofile=64:64"
        ]
    );
    assert!(values(&l.args, "--memory").is_empty());
    assert!(values(&l.args, "--pids-limit").is_empty());
    assert_eq!(values(&l.args, "--user"), ["0:0"]);
}

#[test]
fn environment_values_reach_neither_the_engines_command_line_nor_its_environment() {
    let mut s = spec();
    s.env.push(("DOCKER_HOST".into(), "tcp://evil:2375".into()));
    s.env.push(("CERT".into(), "line1\nline2".into()));
    let l = lower(&s, &caller(), &target(Engine::Docker)).unwrap();
    assert!(!l
        .args
        .iter()
        .any(|a| a.contains("s3cr3t") || a.contains("evil")));
    assert_eq!(values(&l.args, "--env-file"), ["/f/env"]);
    // Only a multi-line value goes through the engine's environment, by name.
    assert_eq!(values(&l.args, "--env"), ["CERT"]);
    assert_eq!(l.env, [("CERT".to_owned(), "line1\nline2".to_owned())]);
    assert!(l.env_file.contains("API_TOKEN=s3cr3t-value\n"));
    assert!(l.env_file.contains("DOCKER_HOST=tcp://evil:2375\n"));
    assert!(l
        .env_file
        .contains("STOCKADE_CHECK_MASKS=/w/.env /h/.ssh /h/.config/gh\n"));
    // The binds whose source lies in a writable root, with the identity planned.
    let mut s = spec();
    s.identities.insert("/w/.git/hooks".into(), (7, 200));
    s.identities.insert("/w/.git".into(), (7, 300));
    let l = lower(&s, &caller(), &target(Engine::Docker)).unwrap();
    assert!(
        l.env_file.contains(
            "STOCKADE_CHECK_IDS=7:100/w 7:201/tmp/grant 7:200/w/.git/hooks 7:300/w/.git\n"
        ),
        "{}",
        l.env_file
    );
    // Below a checked directory the command can neither search nor chmod (`closed`), the
    // binds are out of its reach and not read back (it could not stat them); the directory
    // itself is. One that is not checked closes nothing.
    let mut t = target(Engine::Docker);
    t.closed = vec!["/w/.git".into()];
    let l = lower(&s, &caller(), &t).unwrap();
    assert!(
        l.env_file
            .contains("STOCKADE_CHECK_IDS=7:100/w 7:201/tmp/grant 7:300/w/.git\n"),
        "{}",
        l.env_file
    );
    s.identities.remove(Path::new("/w/.git"));
    let l = lower(&s, &caller(), &t).unwrap();
    assert!(
        l.env_file
            .contains("STOCKADE_CHECK_IDS=7:100/w 7:201/tmp/grant 7:200/w/.git/hooks\n"),
        "{}",
        l.env_file
    );
    // A name an env file would read as something else is refused: a line of its own that
    // copies a variable of stockade's own environment into the container.
    for name in ["SECRET_TOKEN\nX", " SECRET_TOKEN", "#X", "A B", "A\rB"] {
        let mut s = spec();
        s.env.push((name.into(), "1".into()));
        assert_eq!(
            lower(&s, &caller(), &target(Engine::Docker)),
            Err(LowerError::EnvName(name.into()))
        );
    }
    // A multi-line value named as an engine's setting is refused.
    let mut s = spec();
    s.env.push(("XDG_DATA_HOME".into(), "/w/a\n".into()));
    assert_eq!(
        lower(&s, &caller(), &target(Engine::Docker)),
        Err(LowerError::EngineVariable("XDG_DATA_HOME".into()))
    );
}

#[test]
fn the_owners_home_and_the_engines_store_are_masked() {
    let mut t = target(Engine::Docker);
    t.owner_home = Some(Cover {
        dir: "/home/u".into(),
        source: "/f/owner-home".into(),
    });
    t.extra_masks = vec!["/h/.local/share/containers".into()];
    let l = lower(&spec(), &caller(), &t).unwrap();
    let mounts = values(&l.args, "--mount");
    assert!(mounts.contains(&"type=bind,src=/f/owner-home,dst=/home/u,bind-nonrecursive=true"));
    assert!(mounts.contains(
        &"type=tmpfs,dst=/h/.local/share/containers,tmpfs-mode=200,tmpfs-size=4096,ro=true"
    ));
    assert!(l
        .env_file
        .contains("/h/.config/gh /h/.local/share/containers /home/u\n"));
    // A writable root holding the owner's home is refused.
    t.owner_home = Some(Cover {
        dir: "/w/home".into(),
        source: "/f/owner-home".into(),
    });
    assert_eq!(
        lower(&spec(), &caller(), &t),
        Err(LowerError::OwnerHomeWritable("/w".into()))
    );
}

#[test]
fn what_cannot_be_enforced_is_refused() {
    let mut s = spec();
    s.read_scope = ReadScope::AllowList;
    assert_eq!(
        lower(&s, &caller(), &target(Engine::Docker)),
        Err(LowerError::AllowList)
    );
    let mut s = spec();
    s.writable_roots.push("/w2,ro=false".into());
    assert!(matches!(
        lower(&s, &caller(), &target(Engine::Docker)),
        Err(LowerError::Comma(_))
    ));
}

#[test]
fn a_mask_deeper_than_the_engine_can_mount_is_refused_typed() {
    // "/w/" and components of 250 bytes up to `len` bytes in all.
    let deep = |len: usize| {
        let mut p = String::from("/w");
        while p.len() + 251 <= len {
            p.push('/');
            p.push_str(&"x".repeat(250));
        }
        let rest = len - p.len() - 1;
        p.push('/');
        p.push_str(&"e".repeat(rest));
        std::path::PathBuf::from(p)
    };
    for engine in [Engine::Docker, Engine::Podman] {
        let mut s = spec();
        s.masks.push(Mask {
            path: deep(ENGINE_PATH_LIMIT),
            kind: Kind::File,
            readable: false,
        });
        assert!(lower(&s, &caller(), &target(engine)).is_ok(), "{engine:?}");
        s.masks.last_mut().unwrap().path = deep(ENGINE_PATH_LIMIT + 1);
        assert_eq!(
            lower(&s, &caller(), &target(engine)),
            Err(LowerError::TooLong(deep(ENGINE_PATH_LIMIT + 1))),
            "{engine:?}"
        );
    }
}

#[test]
fn a_directory_outside_the_container_starts_the_command_in_the_workspace() {
    let mut s = spec();
    s.cwd = "/tmp/elsewhere".into();
    let l = lower(&s, &caller(), &target(Engine::Docker)).unwrap();
    assert_eq!(values(&l.args, "--workdir"), ["/w"]);
    // Below /tmp: how to grant it, as every backend says it.
    assert!(l
        .cwd_fallback
        .unwrap()
        .contains("--allow-read or --allow-write"));
    s.cwd = "/run/elsewhere".into();
    let l = lower(&s, &caller(), &target(Engine::Docker)).unwrap();
    assert!(l.cwd_fallback.unwrap().contains("/run/elsewhere"));
    // A read grant below /tmp is bound: the command starts there.
    s.cwd = "/tmp/grant/sub".into();
    let l = lower(&s, &caller(), &target(Engine::Docker)).unwrap();
    assert_eq!(values(&l.args, "--workdir"), ["/tmp/grant/sub"]);
    assert!(l.cwd_fallback.is_none());
}

#[test]
fn mask_paths_with_spaces_reach_the_check_escaped() {
    assert_eq!(escape("/h/my keys"), "/h/my\\0040keys");
    assert_eq!(escape("/h/.ssh"), "/h/.ssh");
}

#[test]
fn rootless_binds_are_recursive_and_each_mount_below_them_read_only() {
    let rootless = Caller {
        uid: 0,
        gid: 0,
        rootless: true,
    };
    let mut t = target(Engine::Podman);
    t.nonrecursive = NonRecursive::Recursive;
    let mut s = spec();
    s.limits.cpu_millis = None;
    let l = lower(&s, &rootless, &t).unwrap();
    let mounts = values(&l.args, "--mount");
    assert!(
        mounts.contains(&"type=bind,src=/usr,dst=/usr,ro=true"),
        "{mounts:?}"
    );
    assert!(
        mounts.contains(&"type=bind,src=/usr/local,dst=/usr/local,ro=true"),
        "{mounts:?}"
    );
    // A mount in a writable root stays writable; nothing below /proc is bound.
    assert!(
        !mounts
            .iter()
            .any(|m| m.contains("/w/mnt") || m.contains("/proc")),
        "{mounts:?}"
    );
    assert!(!mounts.iter().any(|m| m.contains("nonrecursive")));
    // Non-recursive binds leave the mounts below hidden: no bind of their own.
    let l = lower(&s, &caller(), &target(Engine::Podman)).unwrap();
    assert!(!values(&l.args, "--mount")
        .iter()
        .any(|m| m.contains("/usr/local")));
}

#[test]
fn the_proxys_gate_is_bound_read_only_and_named_to_the_check() {
    let mut s = spec();
    s.network = Network::Proxy {
        addr: sandbox::PROXY_ADDR,
    };
    let mut t = target(Engine::Podman);
    t.gate = Some("/tmp/run-files/gate".into());
    let l = lower(&s, &caller(), &t).expect("lowered");
    let at = l
        .args
        .iter()
        .position(|a| a == "--network")
        .expect("--network");
    assert_eq!(l.args[at + 1], "none", "no network of the engine's");
    assert!(
        l.args
            .iter()
            .any(|a| a.starts_with("type=bind,src=/tmp/run-files/gate,dst=/run/stockade,ro=true")),
        "{:?}",
        l.args
    );
    assert!(l.env_file.contains("STOCKADE_CHECK_GATE=/run/stockade\n"));
    assert!(l.env_file.contains("STOCKADE_CHECK_NET=none\n"));
    // Without a gate (no proxy), nothing of it.
    let l = lower(&spec(), &caller(), &target(Engine::Podman)).expect("lowered");
    assert!(!l.env_file.contains("STOCKADE_CHECK_GATE"));
    assert!(!l.args.iter().any(|a| a.contains("/run/stockade")));
}

/// A git dir hidden in a staged one (`.git/inner`, pinned itself) is one of the staged git
/// dir's subdirectories too: it gets one mount (the engine refuses a second mount at one
/// destination: "duplicate mount destination").
#[test]
fn a_git_dir_hidden_in_a_staged_one_is_mounted_once() {
    let mut spec = spec();
    spec.pins.push("/w/.git/inner".into());
    let mut target = target(Engine::Podman);
    target.staged = vec![workspace::gitstage::Staged {
        gitdir: "/w/.git".into(),
        owner: None,
        identity: (1, 2),
        config_identity: None,
        subdirs: vec!["objects".into(), "inner".into()],
        copied: Vec::new(),
        protected: vec!["config".into()],
    }];
    target.subdir_ids = vec![vec![Some((1, 3)), Some((1, 4))]];
    let lowered = lower(&spec, &caller(), &target).expect("lowered");
    let mounts = values(&lowered.args, "--mount");
    let at = |dest: &str| {
        (mounts.iter())
            .filter(|m| m.split(',').any(|f| f == format!("dst={dest}")))
            .count()
    };
    assert_eq!(at("/w/.git/inner"), 1, "{mounts:#?}");
    assert_eq!(at("/w/.git/objects"), 1, "{mounts:#?}");
    assert_eq!(at("/w/.git"), 1, "{mounts:#?}");
}

/// A mask in a writable root is checked inside to sit in the directory planned: the mask and
/// that directory's identity reach the check; a mask whose file was no longer in its directory
/// when the run was planned refuses the run.
#[test]
fn a_masks_directory_is_checked_to_be_the_one_planned() {
    let mut s = spec();
    s.masks.push(sandbox::Mask {
        path: "/w/S/C/.env".into(),
        kind: sandbox::Kind::File,
        readable: false,
    });
    let mut t = target(Engine::Podman);
    t.mask_dirs = vec![("/w/S/C/.env".into(), Some((7, 400)))];
    let l = lower(&s, &caller(), &t).unwrap();
    let dirs = (l.env_file.lines())
        .find_map(|l| l.strip_prefix("STOCKADE_CHECK_MASKDIRS="))
        .unwrap_or_default()
        .to_owned();
    assert_eq!(dirs, "7:400/w/S/C/.env");
    t.mask_dirs = vec![("/w/S/C/.env".into(), None)];
    assert!(matches!(
        lower(&s, &caller(), &t),
        Err(LowerError::Changed(p)) if p == std::path::Path::new("/w/S/C/.env")
    ));
}

/// A review run's workspace is the engine's overlay over it, never a bind of the host's: the
/// layers named, Docker's options pinned, the view's top directory checked by its upper's
/// inode number, pins inside it (writable binds of the host's directories) left out, masks
/// still mounted over it; a layer an option string cannot name, a disk bound, and a review
/// spec without a planned view are refused.
#[test]
fn a_review_runs_workspace_is_the_engines_overlay_and_nothing_of_the_host_is_bound_writable_in_it()
{
    let mut s = spec();
    s.review = Some(sandbox::Review {
        changes: "/s/changes/r1".into(),
        same_filesystem: true,
    });
    s.masks.push(Mask {
        path: "/w/app/.env".into(),
        kind: Kind::File,
        readable: false,
    });
    s.identities.insert("/w/.git".into(), (7, 300));
    let view = View {
        upper: "/s/changes/r1/upper".into(),
        work: "/s/changes/r1/work".into(),
        upper_ino: 900,
        same_filesystem: true,
        witness: Witness::Entry("/w/README".into(), 77),
    };
    // No view planned: refused, never the workspace itself.
    assert_eq!(
        lower(&s, &caller(), &target(Engine::Docker)).unwrap_err(),
        LowerError::Changed("/w".into())
    );
    for engine in [Engine::Docker, Engine::Podman] {
        let mut t = target(engine);
        t.view = Some(view.clone());
        t.mask_dirs = vec![
            ("/w/.env".into(), Some((7, 100))),
            ("/w/app/.env".into(), Some((7, 400))),
        ];
        let l = lower(&s, &caller(), &t).unwrap();
        let mounts = values(&l.args, "--mount");
        let volumes = values(&l.args, "--volume");
        assert!(
            !mounts.iter().any(|m| m.contains("dst=/w,")
                && m.contains("type=bind")
                && !m.contains("ro=true")),
            "{mounts:?}"
        );
        // The pin of /w/.git (a writable bind of the host's directory) is not given.
        assert!(
            !mounts.iter().any(|m| m.contains("dst=/w/.git,")),
            "{mounts:?}"
        );
        assert!(
            mounts.iter().any(|m| m.contains("dst=/w/.env,")),
            "{mounts:?}"
        );
        match engine {
            Engine::Docker => {
                assert!(volumes.is_empty());
                assert!(mounts.contains(&"type=volume,dst=/w,volume-nocopy=true,volume-driver=local,volume-opt=type=overlay,volume-opt=device=overlay,\"volume-opt=o=lowerdir=/w,upperdir=/s/changes/r1/upper,workdir=/s/changes/r1/work,redirect_dir=nofollow,metacopy=off,index=off,nosuid,nodev\""), "{mounts:?}");
            }
            Engine::Podman => assert_eq!(
                volumes,
                ["/w:/w:O,upperdir=/s/changes/r1/upper,workdir=/s/changes/r1/work"]
            ),
        }
        // The workspace by its upper's inode, not as the host's directory; a mask's directory
        // by its inode (the top one's is the upper's).
        assert!(
            l.env_file.contains("STOCKADE_CHECK_IDS=7:201/tmp/grant\n"),
            "{}",
            l.env_file
        );
        assert!(
            l.env_file
                .contains("STOCKADE_CHECK_VIEWIDS=900/w 77/w/README\n"),
            "{}",
            l.env_file
        );
        assert!(l.env_file.contains("STOCKADE_CHECK_VIEWEMPTY=\n"));
        assert!(
            l.env_file
                .contains("STOCKADE_CHECK_MASKDIRS=900/w/.env 400/w/app/.env\n"),
            "{}",
            l.env_file
        );
        // Over two filesystems the view has its own inode numbers, and with nothing to know
        // the workspace by (only links and mount points at its top) the view's lower layer
        // cannot be checked: refused.
        let mut t2 = t.clone();
        t2.view = Some(View {
            same_filesystem: false,
            ..view.clone()
        });
        assert_eq!(
            lower(&s, &caller(), &t2).unwrap_err(),
            LowerError::ViewFilesystems("/s/changes/r1".into(), "/w".into())
        );
        t2.view = Some(View {
            witness: Witness::None,
            ..view.clone()
        });
        assert_eq!(
            lower(&s, &caller(), &t2).unwrap_err(),
            LowerError::ViewUnwitnessed("/w".into())
        );
        // An empty workspace's view must show nothing.
        t2.view = Some(View {
            witness: Witness::Empty,
            ..view.clone()
        });
        let l = lower(&s, &caller(), &t2).unwrap();
        assert!(l.env_file.contains("STOCKADE_CHECK_VIEWIDS=900/w\n"));
        assert!(l.env_file.contains("STOCKADE_CHECK_VIEWEMPTY=/w\n"));
        // Refused: a layer with a colon, a disk bound.
        let mut t3 = t.clone();
        t3.view = Some(View {
            upper: "/s/a:b/upper".into(),
            ..view.clone()
        });
        assert_eq!(
            lower(&s, &caller(), &t3).unwrap_err(),
            LowerError::ViewPath("/s/a:b/upper".into())
        );
        let mut s2 = s.clone();
        s2.limits.disk_bytes = Some(1 << 20);
        assert_eq!(lower(&s2, &caller(), &t).unwrap_err(), LowerError::ViewDisk);
    }
}

#[test]
fn every_writable_bind_is_checked_at_its_own_path() {
    // The check inside requires a mount at each of these paths (`w`: any, `r`: read-only):
    // a bind the engine put elsewhere (a path swapped for a link, then back) leaves its own
    // path unmounted. The protected paths too: each read-only at its own path.
    let mut s = spec();
    s.identities.insert("/w/.git".into(), (7, 300));
    let l = lower(&s, &caller(), &target(Engine::Docker)).unwrap();
    assert!(
        l.env_file.contains(
            "STOCKADE_CHECK_PLACED=w/w r/tmp/grant r/w/.git/hooks r/w/.git/config w/w/.git\n"
        ),
        "{}",
        l.env_file
    );
    // Escaped as the kernel shows mount points.
    let mut s = spec();
    s.writable_roots = vec!["/w".into(), "/c a\\b".into()];
    let mut t = target(Engine::Docker);
    t.root_identities.push(("/c a\\b".into(), (7, 400)));
    let l = lower(&s, &caller(), &t).unwrap();
    assert!(
        l.env_file
            .contains("STOCKADE_CHECK_PLACED=w/w w/c\\040a\\134b r/tmp/grant"),
        "{}",
        l.env_file
    );
}

#[test]
fn a_closed_directory_above_the_roots_is_covered_showing_only_the_way() {
    // A root caller's clone below its own 0700 directory, given to a user: the directory is
    // covered by an empty one of root's, before the workspace is bound in it; the cover is checked
    // inside to be mounted, and may be writable (root's, 0755: the command cannot write it).
    // A read grant below it, no longer in the host's tree there, is bound read-only at its
    // own path and checked as the roots are.
    let mut s = spec();
    s.workspace = "/var/p/w".into();
    s.writable_roots = vec!["/var/p/w".into()];
    s.cwd = "/var/p/w".into();
    s.read_grants = vec!["/var/p/data".into()];
    s.protected.clear();
    s.pins.clear();
    s.masks.clear();
    s.private_dirs.clear();
    let mut t = target(Engine::Docker);
    t.host_root.push(("var".into(), Entry::Dir, None));
    t.root_identities = vec![
        ("/var/p/w".into(), (7, 100)),
        ("/var/p/data".into(), (7, 200)),
    ];
    t.covers = vec![Cover {
        dir: "/var/p".into(),
        source: "/f/cover-0".into(),
    }];
    let l = lower(&s, &caller(), &t).unwrap();
    let mounts = values(&l.args, "--mount");
    let at = |m: &str| {
        mounts
            .iter()
            .position(|x| *x == m)
            .unwrap_or_else(|| panic!("no {m} in {mounts:?}"))
    };
    let cover = at("type=bind,src=/f/cover-0,dst=/var/p,bind-nonrecursive=true");
    let var = at("type=bind,src=/var,dst=/var,ro=true,bind-nonrecursive=true");
    let ws = at("type=bind,src=/var/p/w,dst=/var/p/w,bind-nonrecursive=true");
    let grant = at("type=bind,src=/var/p/data,dst=/var/p/data,ro=true,bind-nonrecursive=true");
    assert!(var < cover && cover < ws && cover < grant, "{mounts:?}");
    assert!(
        l.env_file
            .contains("STOCKADE_CHECK_PLACED=w/var/p/w w/var/p r/var/p/data\n"),
        "{}",
        l.env_file
    );
    assert!(
        l.env_file.contains("STOCKADE_CHECK_RW=/var/p/w /var/p\n"),
        "{}",
        l.env_file
    );
    assert!(
        l.env_file.contains("7:200/var/p/data"),
        "the grant's identity is checked: {}",
        l.env_file
    );
    assert_eq!(l.cwd_fallback, None);
    // A working directory below the cover, outside the roots: not in the container.
    s.cwd = "/var/p/other".into();
    let l = lower(&s, &caller(), &t).unwrap();
    assert!(
        l.cwd_fallback
            .as_deref()
            .is_some_and(|w| w.contains("lies below /var/p")),
        "{:?}",
        l.cwd_fallback
    );
}

#[test]
fn a_cover_of_a_top_level_directory_replaces_its_bind_and_shows_no_masks_outside_the_grants() {
    // Root's 0700 home (`/h`) above a read grant: its cover takes the place of the host's bind
    // of `/h` (the engines refuse two mounts at one destination), and the masks below it are
    // mounted only inside what is bound there (a mask's mount point elsewhere would show the
    // masked entry's name and kind in the empty cover).
    let mut s = spec();
    s.read_grants = vec!["/h/.config".into()];
    let mut t = target(Engine::Docker);
    t.root_identities.push(("/h/.config".into(), (7, 500)));
    t.covers = vec![Cover {
        dir: "/h".into(),
        source: "/f/cover-0".into(),
    }];
    let l = lower(&s, &caller(), &t).unwrap();
    let mounts = values(&l.args, "--mount");
    assert!(
        !mounts.iter().any(|m| m.contains("dst=/h,ro=true")),
        "{mounts:?}"
    );
    assert!(mounts.contains(&"type=bind,src=/f/cover-0,dst=/h,bind-nonrecursive=true"));
    assert!(
        mounts.contains(&"type=bind,src=/h/.config,dst=/h/.config,ro=true,bind-nonrecursive=true")
    );
    assert!(
        mounts.iter().any(|m| m.contains("dst=/h/.config/gh")),
        "{mounts:?}"
    );
    assert!(
        !mounts.iter().any(|m| m.contains("dst=/h/.ssh")),
        "{mounts:?}"
    );
    // Without the cover, both masks are mounted and `/h` is the host's.
    t.covers.clear();
    let l = lower(&s, &caller(), &t).unwrap();
    let mounts = values(&l.args, "--mount");
    assert!(
        mounts.iter().any(|m| m.contains("dst=/h,ro=true")),
        "{mounts:?}"
    );
    assert!(
        mounts.iter().any(|m| m.contains("dst=/h/.ssh")),
        "{mounts:?}"
    );
}
