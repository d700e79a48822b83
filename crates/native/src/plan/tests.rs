//! Whole plans built against a fake host, compared as data.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::*;
use crate::host::{Entry, Host, HostView, Kind};

/// A fake filesystem: path → (kind, uid, mode); symlinks are not modelled.
#[derive(Default)]
struct FakeHost {
    entries: BTreeMap<PathBuf, Entry>,
    files: BTreeMap<PathBuf, String>,
}

impl FakeHost {
    fn dir(mut self, p: &str, uid: u32, mode: u32) -> Self {
        for a in Path::new(p).ancestors() {
            let ino = self.entries.len() as u64 + 1;
            self.entries.entry(a.to_path_buf()).or_insert(Entry {
                kind: Kind::Dir,
                uid: 0,
                gid: 0,
                mode: 0o755,
                dev: 1,
                ino,
                links: 1,
            });
        }
        let ino = self.entries.len() as u64 + 1;
        self.entries.insert(
            p.into(),
            Entry {
                kind: Kind::Dir,
                uid,
                gid: uid,
                mode,
                dev: 1,
                ino,
                links: 1,
            },
        );
        self
    }

    fn file(mut self, p: &str) -> Self {
        let parent = Path::new(p)
            .parent()
            .map(|x| x.display().to_string())
            .unwrap_or_default();
        if !self.entries.contains_key(Path::new(&parent)) {
            self = self.dir(&parent, 0, 0o755);
        }
        let ino = self.entries.len() as u64 + 1;
        self.entries.insert(
            p.into(),
            Entry {
                kind: Kind::File,
                uid: 0,
                gid: 0,
                mode: 0o644,
                dev: 1,
                ino,
                links: 1,
            },
        );
        self
    }

    /// A second name `new` for the file `existing` (a hard link).
    fn hard_link(mut self, existing: &str, new: &str) -> Self {
        self = self.file(new);
        let mut e = self.entries[Path::new(existing)];
        e.links += 1;
        for (_, other) in self.entries.iter_mut().filter(|(_, o)| o.ino == e.ino) {
            other.links = e.links;
        }
        self.entries.insert(new.into(), e);
        self
    }

    fn text(mut self, p: &str, text: &str) -> Self {
        self = self.file(p);
        self.files.insert(p.into(), text.into());
        self
    }
}

impl Host for FakeHost {}

impl HostView for FakeHost {
    fn stat(&self, path: &Path) -> Option<Entry> {
        self.entries.get(path).copied()
    }
    fn lstat_kind(&self, path: &Path) -> Option<Kind> {
        self.entries.get(path).map(|e| e.kind)
    }
    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        self.entries.contains_key(path).then(|| path.to_path_buf())
    }
    fn list_dir(&self, path: &Path) -> Vec<(OsString, Kind)> {
        self.entries
            .iter()
            .filter(|(p, _)| p.parent() == Some(path) && p.as_path() != path)
            .filter_map(|(p, e)| Some((p.file_name()?.to_os_string(), e.kind)))
            .collect()
    }
    fn read_small(&self, path: &Path) -> Option<String> {
        self.files.get(path).cloned()
    }
}

fn machine() -> FakeHost {
    FakeHost::default()
        .dir("/usr/bin", 0, 0o755)
        .dir("/etc", 0, 0o755)
        .dir("/tmp", 0, 0o1777)
        .dir("/proc/sys", 0, 0o555)
        .dir("/proc/irq", 0, 0o555)
        .file("/dev/null")
        .file("/dev/zero")
        .dir("/home/u", 1000, 0o750)
        .file("/home/u/.ssh/id_rsa")
        .file("/home/u/.bashrc")
        .dir("/home/u/ws", 1000, 0o755)
        .file("/home/u/ws/.env")
        .file("/home/u/ws/src.rs")
        .dir("/home/u/ws/.git/hooks", 1000, 0o755)
        .file("/home/u/ws/.git/config")
        .file("/home/u/ws/.git/HEAD")
}

fn request(uid: u32) -> Request {
    Request {
        argv: vec!["git".into(), "status".into()],
        workspace: "/home/u/ws".into(),
        cwd: "/home/u/ws".into(),
        home: "/home/u".into(),
        uid,
        gid: uid,
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("HOME".into(), "/home/u".into()),
            ("FAKE_API_KEY".into(), "k".into()),
            ("LD_PRELOAD".into(), "/x.so".into()),
            ("LC_ALL".into(), "C".into()),
        ],
    }
}

fn default_policy() -> Policy {
    policy::profile("workspace-write").unwrap()
}

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

#[test]
fn unprivileged_plan_mounts_in_order() {
    let plan = Plan::new(&default_policy(), &request(1000), &machine()).unwrap();
    let nosuid_nodev = libc::MS_NOSUID | libc::MS_NODEV;
    let expected = vec![
        Mount::MakeRootPrivate,
        Mount::Clone {
            source: p("/dev/null"),
            slot: 0,
            recursive: false,
        },
        Mount::Clone {
            source: p("/dev/zero"),
            slot: 1,
            recursive: false,
        },
        Mount::Clone {
            source: p("/home/u/ws"),
            slot: 2,
            recursive: true,
        },
        Mount::ReadOnlyRoot,
        Mount::Tmpfs {
            target: p("/tmp"),
            data: "mode=1777,size=1073741824".into(),
            flags: nosuid_nodev,
        },
        Mount::Tmpfs {
            target: p("/dev"),
            data: "mode=0755,size=1m".into(),
            flags: libc::MS_NOSUID | libc::MS_NOEXEC,
        },
        Mount::File {
            path: p("/dev/null"),
            mode: 0o666,
        },
        Mount::Attach {
            slot: 0,
            target: p("/dev/null"),
            readonly: false,
            device: true,
        },
        Mount::File {
            path: p("/dev/zero"),
            mode: 0o666,
        },
        Mount::Attach {
            slot: 1,
            target: p("/dev/zero"),
            readonly: false,
            device: true,
        },
        Mount::Mkdir {
            path: p("/dev/pts"),
            mode: 0o755,
        },
        Mount::Devpts {
            target: p("/dev/pts"),
        },
        Mount::Symlink {
            target: p("pts/ptmx"),
            path: p("/dev/ptmx"),
        },
        Mount::Mkdir {
            path: p("/dev/shm"),
            mode: 0o1777,
        },
        Mount::Tmpfs {
            target: p("/dev/shm"),
            data: "mode=1777,size=1073741824".into(),
            flags: nosuid_nodev,
        },
        Mount::Symlink {
            target: p("/proc/self/fd"),
            path: p("/dev/fd"),
        },
        Mount::Symlink {
            target: p("/proc/self/fd/0"),
            path: p("/dev/stdin"),
        },
        Mount::Symlink {
            target: p("/proc/self/fd/1"),
            path: p("/dev/stdout"),
        },
        Mount::Symlink {
            target: p("/proc/self/fd/2"),
            path: p("/dev/stderr"),
        },
        Mount::Proc { target: p("/proc") },
        Mount::ReadOnly {
            path: p("/proc/sys"),
        },
        Mount::ReadOnly {
            path: p("/proc/irq"),
        },
        // Home credentials (depth 4) come before the workspace (depth 4 by class) ...
        Mount::Attach {
            slot: 2,
            target: p("/home/u/ws"),
            readonly: false,
            device: false,
        },
        Mount::MaskDir {
            target: p("/home/u/.ssh"),
        },
        // The shell start-up file is read as empty.
        Mount::EmptyFile {
            target: p("/home/u/.bashrc"),
        },
        // ... then the pinned git dir, the protected paths and the workspace masks.
        Mount::Pin {
            path: p("/home/u/ws/.git"),
        },
        Mount::MaskFile {
            target: p("/home/u/ws/.env"),
        },
        // The init keeps a writable descriptor of the config: a checked rewrite of inert keys
        // (`git remote add`) goes through it.
        Mount::Hold {
            path: p("/home/u/ws/.git/config"),
            slot: 3,
        },
        Mount::ReadOnly {
            path: p("/home/u/ws/.git/config"),
        },
        Mount::ReadOnly {
            path: p("/home/u/ws/.git/hooks"),
        },
    ];
    assert_eq!(plan.mounts, expected);
    assert_eq!(plan.slots, 4);
    assert_eq!(
        plan.creation_guard.held_configs,
        [(p("/home/u/ws/.git/config"), 3)]
    );
    assert!(plan.idmapped.is_empty());
    assert_eq!(plan.ids.uid_map, "1000 1000 1\n");
    assert!(plan.ids.deny_setgroups);
    assert!(!plan.ids.clear_groups);
}

#[test]
fn root_caller_runs_as_unmapped_uid_with_idmapped_writable_roots_and_private_home() {
    let host = machine().dir("/root", 0, 0o700).dir("/root/ws", 0, 0o755);
    let mut req = request(0);
    req.workspace = p("/root/ws");
    req.cwd = p("/root/ws");
    req.home = p("/root");
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    assert_eq!(plan.ids.inside_uid, ROOT_CALLER_INSIDE_ID);
    assert_ne!(plan.ids.inside_uid, 0);
    assert_eq!(plan.ids.uid_map, format!("1000 {ROOT_CALLER_HOST_ID} 1\n"));
    assert!(plan.ids.clear_groups);
    let home = &plan.idmapped[0];
    assert_eq!(
        (home.path.as_path(), home.readonly),
        (Path::new("/root"), true)
    );
    assert_eq!(home.uid_map, format!("0 {ROOT_CALLER_HOST_ID} 1\n"));
    let ws = &plan.idmapped[1];
    assert_eq!(
        (ws.path.as_path(), ws.readonly),
        (Path::new("/root/ws"), false)
    );
    // Parent-made mounts are attached, never cloned in the child.
    assert!(!plan
        .mounts
        .iter()
        .any(|m| matches!(m, Mount::Clone { source, .. } if source == Path::new("/root/ws"))));
    let home_attach = plan.mounts.iter().position(|m| matches!(m, Mount::Attach { target, readonly: true, .. } if target == Path::new("/root")));
    let ws_attach = plan.mounts.iter().position(|m| matches!(m, Mount::Attach { target, readonly: false, .. } if target == Path::new("/root/ws")));
    assert!(
        home_attach.unwrap() < ws_attach.unwrap(),
        "home before the workspace inside it"
    );
}

#[test]
fn workspace_under_tmp_gets_mount_points_in_the_private_tmp() {
    let host = machine().dir("/tmp/a/ws", 1000, 0o755);
    let mut req = request(1000);
    req.workspace = p("/tmp/a/ws");
    req.cwd = p("/tmp/a/ws");
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    let i = plan
        .mounts
        .iter()
        .position(|m| {
            *m == Mount::Mkdir {
                path: p("/tmp/a"),
                mode: 0o755,
            }
        })
        .unwrap();
    assert_eq!(
        plan.mounts[i + 1],
        Mount::Mkdir {
            path: p("/tmp/a/ws"),
            mode: 0o755
        }
    );
    assert!(
        matches!(&plan.mounts[i + 2], Mount::Attach { target, .. } if target == Path::new("/tmp/a/ws"))
    );
    let tmpfs = plan
        .mounts
        .iter()
        .position(|m| matches!(m, Mount::Tmpfs { target, .. } if target == Path::new("/tmp")))
        .unwrap();
    assert!(tmpfs < i);
}

/// Each host rule carries what its path led to when planned (the builder refuses the run when
/// the path leads elsewhere then), and, with no link on the way, is looked up through none;
/// the init's rules (its own mounts) carry none.
#[test]
fn landlock_host_rules_record_the_planned_inodes() {
    let host = machine();
    let plan = Plan::new(&default_policy(), &request(1000), &host).unwrap();
    assert!(!plan.landlock.host_rules.is_empty());
    for r in &plan.landlock.host_rules {
        let e = host.stat(&r.path).unwrap();
        assert_eq!(r.id, Some((e.dev, e.ino)), "{}", r.path.display());
        assert_eq!(r.dir, e.kind == Kind::Dir, "{}", r.path.display());
        assert!(!r.links, "no link on the way to {}", r.path.display());
    }
    assert!(plan.landlock.child_rules.iter().all(|r| r.id.is_none()));
}

#[test]
fn landlock_read_rules_split_around_masked_paths_outside_writable_roots() {
    let plan = Plan::new(&default_policy(), &request(1000), &machine()).unwrap();
    let read: Vec<&Path> = plan
        .landlock
        .host_rules
        .iter()
        .filter(|r| r.access == Access::Read)
        .map(|r| r.path.as_path())
        .collect();
    assert!(
        !read.contains(&Path::new("/")),
        "/ holds a mask: it must be split"
    );
    assert!(!read.contains(&Path::new("/home/u")));
    assert!(!read.contains(&Path::new("/home/u/.ssh")));
    // Read as empty: the host file's inode gets no rule (the mount hides it from Landlock);
    // the empty file over it gets one after the fork.
    assert!(!read.contains(&Path::new("/home/u/.bashrc")));
    for granted in ["/usr", "/etc", "/tmp", "/home/u/ws"] {
        assert!(
            read.contains(&Path::new(granted)),
            "{granted} readable: {read:?}"
        );
    }
    let full: Vec<&Path> = plan
        .landlock
        .host_rules
        .iter()
        .filter(|r| r.access == Access::Full)
        .map(|r| r.path.as_path())
        .collect();
    assert_eq!(full, vec![Path::new("/home/u/ws")]);
    let child: Vec<&Path> = plan
        .landlock
        .child_rules
        .iter()
        .map(|r| r.path.as_path())
        .collect();
    assert_eq!(
        child,
        vec![
            Path::new("/tmp"),
            Path::new("/dev/shm"),
            Path::new("/dev/pts"),
            Path::new("/proc"),
            Path::new("/home/u/.bashrc")
        ]
    );
}

/// A read grant gets a rule of its own under the host read scope: one below a directory a
/// root caller's sandbox cannot search is bound in that directory's cover, where the rule of
/// the host's directory (a sibling of the home, split out around the home's masks) is not on
/// its way (found by `real_homes::a_read_grant_below_a_private_dir_is_read_and_not_written`:
/// the grant read EACCES).
#[test]
fn a_read_grant_has_its_own_rule_beside_the_split_host_rules() {
    let host = machine().dir("/home/p", 0, 0o700).file("/home/p/data/f");
    let mut pol = default_policy();
    pol.filesystem.allow_read.push("/home/p/data".into());
    let plan = Plan::new(&pol, &request(0), &host).unwrap();
    let read: Vec<&Path> = (plan.landlock.host_rules.iter())
        .filter(|r| r.access == Access::Read)
        .map(|r| r.path.as_path())
        .collect();
    assert!(read.contains(&Path::new("/home/p")), "{read:?}");
    assert!(read.contains(&Path::new("/home/p/data")), "{read:?}");
}

#[test]
fn allow_read_inside_a_denied_dir_masks_only_the_siblings() {
    let host = machine()
        .file("/home/u/.ssh/known_hosts")
        .file("/home/u/.ssh/config");
    let mut pol = default_policy();
    pol.filesystem.allow_read.push("~/.ssh/known_hosts".into());
    let plan = Plan::new(&pol, &request(1000), &host).unwrap();
    assert!(plan.masked.contains(&p("/home/u/.ssh/id_rsa")));
    assert!(plan.masked.contains(&p("/home/u/.ssh/config")));
    assert!(!plan.masked.contains(&p("/home/u/.ssh/known_hosts")));
    assert!(!plan.masked.contains(&p("/home/u/.ssh")));
}

#[test]
fn environment_is_scrubbed_and_tmpdir_set() {
    let plan = Plan::new(&default_policy(), &request(1000), &machine()).unwrap();
    let names: Vec<&str> = plan.env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "HOME",
            "LC_ALL",
            "PATH",
            "PWD",
            "TMPDIR",
            "npm_config_cache"
        ]
    );
    assert!(plan.env.contains(&("TMPDIR".into(), "/tmp".into())));
    let mut pol = default_policy();
    pol.env.passthrough.push("FAKE_API_KEY".into());
    let plan = Plan::new(&pol, &request(1000), &machine()).unwrap();
    assert!(plan.env.contains(&("FAKE_API_KEY".into(), "k".into())));
}

#[test]
fn program_search_follows_the_sandbox_path() {
    let host = machine().file("/usr/bin/git").file("/bin/git");
    let plan = Plan::new(&default_policy(), &request(1000), &host).unwrap();
    assert_eq!(plan.candidates, vec![p("/usr/bin/git"), p("/bin/git")]);
    // Places where the host has nothing by that name are not tried.
    let host = machine().file("/bin/git");
    let plan = Plan::new(&default_policy(), &request(1000), &host).unwrap();
    assert_eq!(plan.candidates, vec![p("/bin/git")]);
    let plan = Plan::new(&default_policy(), &request(1000), &machine()).unwrap();
    assert!(plan.candidates.is_empty());
    let mut req = request(1000);
    req.argv = vec!["./run.sh".into()];
    let plan = Plan::new(&default_policy(), &req, &machine()).unwrap();
    assert_eq!(plan.candidates, vec![p("./run.sh")]);
}

#[test]
fn git_file_protects_the_real_git_dir() {
    let host = machine()
        .dir("/home/u/ws/wt", 1000, 0o755)
        .text(
            "/home/u/ws/wt/.git",
            "gitdir: /home/u/ws/.git/worktrees/wt\n",
        )
        .dir("/home/u/ws/.git/worktrees/wt", 1000, 0o755)
        .text("/home/u/ws/.git/worktrees/wt/commondir", "../..\n");
    let plan = Plan::new(&default_policy(), &request(1000), &host).unwrap();
    assert!(plan.protected.contains(&p("/home/u/ws/wt/.git")));
    assert!(plan.protected.contains(&p("/home/u/ws/.git/hooks")));
    assert!(plan.protected.contains(&p("/home/u/ws/.git/config")));
}

#[test]
fn refusals_name_the_path() {
    let mut pol = default_policy();
    pol.filesystem.allow_write.push("/nonexistent".into());
    let e = Plan::new(&pol, &request(1000), &machine()).unwrap_err();
    assert!(
        matches!(e, PlanError::Scan(workspace::ScanError::WritableRootMissing(ref x)) if x == Path::new("/nonexistent")),
        "{e}"
    );
    let mut pol = default_policy();
    pol.filesystem.allow_write.push("/proc/sys".into());
    let e = Plan::new(&pol, &request(1000), &machine()).unwrap_err();
    assert!(
        matches!(
            e,
            PlanError::Scan(workspace::ScanError::WritableRootForbidden(_))
        ),
        "{e}"
    );
    let mut req = request(1000);
    req.argv = vec![];
    assert!(matches!(
        Plan::new(&default_policy(), &req, &machine()),
        Err(PlanError::Scan(workspace::ScanError::NoProgram))
    ));
}

#[test]
fn read_only_profile_has_no_writable_roots() {
    let pol = policy::profile("read-only").unwrap();
    let plan = Plan::new(&pol, &request(1000), &machine()).unwrap();
    assert!(plan.writable_roots.is_empty());
    assert!(!plan
        .mounts
        .iter()
        .any(|m| matches!(m, Mount::Attach { device: false, .. })));
}

#[test]
fn submodule_git_dirs_are_protected_without_a_worktree_link() {
    let host = machine()
        .dir("/home/u/ws/.git/modules/lib/hooks", 1000, 0o755)
        .file("/home/u/ws/.git/modules/lib/config")
        .file("/home/u/ws/.git/modules/lib/HEAD")
        .dir("/home/u/ws/.git/modules/lib/objects/ab", 1000, 0o755)
        .dir("/home/u/ws/.git/modules/hooks/hooks", 1000, 0o755)
        .file("/home/u/ws/.git/modules/hooks/HEAD");
    let plan = Plan::new(&default_policy(), &request(1000), &host).unwrap();
    for p in [
        "/home/u/ws/.git/modules/lib/hooks",
        "/home/u/ws/.git/modules/lib/config",
        "/home/u/ws/.git/modules/hooks/hooks",
    ] {
        assert!(
            plan.protected.contains(&PathBuf::from(p)),
            "{p} protected: {:?}",
            plan.protected
        );
    }
    // A submodule named `hooks` is a git dir, not a hooks dir: it stays writable.
    assert!(!plan.protected.contains(&p("/home/u/ws/.git/modules/hooks")));
    assert!(plan.mounts.contains(&Mount::Pin {
        path: p("/home/u/ws/.git/modules/lib")
    }));
}

#[test]
fn network_modes_plan_the_namespace_the_proxy_and_its_variables() {
    let host = machine();
    let req = request(1000);
    let env_of = |plan: &Plan, name: &str| {
        plan.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };

    let none = Plan::new(&default_policy(), &req, &host).unwrap();
    assert!(none.network.new_namespace);
    assert_eq!(none.network.proxy, None);
    assert_eq!(env_of(&none, "HTTPS_PROXY"), None);

    let mut policy = default_policy();
    policy.network.mode = policy::NetworkMode::Proxy;
    let proxy = Plan::new(&policy, &req, &host).unwrap();
    assert!(proxy.network.new_namespace);
    assert_eq!(proxy.network.proxy, Some(PROXY_ADDR));
    let http = format!("http://{PROXY_ADDR}");
    for name in [
        "HTTP_PROXY",
        "https_proxy",
        "npm_config_https_proxy",
        "CARGO_HTTP_PROXY",
    ] {
        assert_eq!(
            env_of(&proxy, name).as_deref(),
            Some(http.as_str()),
            "{name}"
        );
    }
    assert_eq!(
        env_of(&proxy, "ALL_PROXY"),
        Some(format!("socks5h://{PROXY_ADDR}"))
    );
    assert_eq!(
        env_of(&proxy, "NO_PROXY").as_deref(),
        Some("localhost,127.0.0.1,::1,0.0.0.0,::")
    );

    policy.network.mode = policy::NetworkMode::Host;
    let host_net = Plan::new(&policy, &req, &host).unwrap();
    assert!(!host_net.network.new_namespace);
    assert_eq!(host_net.network.proxy, None);
}

/// A masked credential file with a hard link in the workspace is found (the run is refused
/// on it); one whose every name is masked, or that has one name, is not.
#[test]
fn hard_links_of_masked_files_are_found() {
    let policy = policy::resolve(None, &policy::Overrides::default()).unwrap();
    let host = machine()
        .file("/home/u/.aws/credentials")
        .hard_link("/home/u/.aws/credentials", "/home/u/ws/data.csv")
        .file("/home/u/.ssh/id_ed25519")
        .hard_link("/home/u/.ssh/id_ed25519", "/home/u/.ssh/backup_key");
    let plan = Plan::new(&policy, &request(1000), &host).unwrap();
    assert_eq!(
        plan.linked_secrets,
        vec![LinkedSecret {
            path: "/home/u/.aws/credentials".into(),
            links: 2,
            masked: 1,
            protected: false,
        }]
    );
    let plan = Plan::new(&policy, &request(1000), &machine()).unwrap();
    assert!(plan.linked_secrets.is_empty());
}

/// A protected file (read-only bind) with a hard link outside the protected paths is found
/// (the run is refused on it: a write through `keep` reaches `.git/config`); hooks hard-linked
/// to each other (every name protected), and the same repository without the link, are not.
/// The control: without the link the plan has nothing to refuse.
#[test]
fn hard_links_of_protected_files_are_found() {
    let policy = policy::resolve(None, &policy::Overrides::default()).unwrap();
    let repo = || {
        machine()
            .text("/home/u/ws/.git/config", "[core]\n\tbare = false\n")
            .file("/home/u/ws/.git/HEAD")
            .dir("/home/u/ws/.git/objects", 1000, 0o755)
            .dir("/home/u/ws/.git/refs", 1000, 0o755)
            .file("/home/u/ws/.git/hooks/pre-commit")
            .hard_link(
                "/home/u/ws/.git/hooks/pre-commit",
                "/home/u/ws/.git/hooks/pre-push",
            )
            .file("/home/u/ws/.envrc")
    };
    let host = repo()
        .hard_link("/home/u/ws/.git/config", "/home/u/ws/keep")
        .hard_link("/home/u/ws/.envrc", "/home/u/ws/keep-envrc");
    let plan = Plan::new(&policy, &request(1000), &host).unwrap();
    let found: Vec<_> = plan.linked_secrets.iter().map(|l| l.path.clone()).collect();
    assert_eq!(
        plan.linked_secrets,
        vec![
            LinkedSecret {
                path: "/home/u/ws/.git/config".into(),
                links: 2,
                masked: 1,
                protected: true,
            },
            LinkedSecret {
                path: "/home/u/ws/.envrc".into(),
                links: 2,
                masked: 1,
                protected: true,
            }
        ],
        "{found:?}"
    );
    let plan = Plan::new(&policy, &request(1000), &repo()).unwrap();
    assert!(plan.linked_secrets.is_empty(), "{:?}", plan.linked_secrets);
}

mod git;
mod reach;
mod review;
mod tmp;

/// The home as the workspace (issue 30): its start-up files are still read as empty, by a
/// read-only cover mounted over the writable root (not a read-only bind of the file itself,
/// which would show its content), and the home's persistence points are protected: existing
/// ones read-only, all of them in the creation guard. One named as the workspace is not.
#[test]
fn a_home_as_workspace_keeps_its_masks_and_guards_its_persistence_points() {
    let host = machine().dir("/home/u/.local/bin", 1000, 0o755);
    let mut req = request(1000);
    req.workspace = p("/home/u");
    req.cwd = p("/home/u");
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    let at = |want: &dyn Fn(&Mount) -> bool| plan.mounts.iter().position(want);
    let root = at(&|m| {
        matches!(m, Mount::Attach { target, readonly: false, .. } if target == Path::new("/home/u"))
    })
    .expect("the home is attached writable");
    let bashrc = at(&|m| {
        *m == Mount::EmptyFile {
            target: p("/home/u/.bashrc"),
        }
    })
    .expect("~/.bashrc is read as empty");
    let ssh = at(&|m| {
        *m == Mount::MaskDir {
            target: p("/home/u/.ssh"),
        }
    })
    .expect("~/.ssh masked");
    let bin = at(&|m| {
        *m == Mount::ReadOnly {
            path: p("/home/u/.local/bin"),
        }
    })
    .expect("~/.local/bin read-only");
    assert!(
        root < bashrc && root < ssh && root < bin,
        "{:#?}",
        plan.mounts
    );
    assert_eq!(
        at(&|m| *m
            == Mount::ReadOnly {
                path: p("/home/u/.bashrc")
            }),
        None,
        "a read-only bind of ~/.bashrc itself would show its content"
    );
    assert!(plan.emptied.contains(&p("/home/u/.bashrc")));
    let guarded = |plan: &Plan, base: &str| {
        (plan.creation_guard.protected.iter())
            .any(|g| g.base == Path::new(base) && g.tail.is_empty())
    };
    for base in [
        "/home/u/.config/systemd",
        "/home/u/.config/autostart",
        "/home/u/.local/bin",
        "/home/u/bin",
        "/home/u/.ssh",
        "/home/u/.config/nvim",
    ] {
        assert!(guarded(&plan, base), "{base} is not guarded");
    }
    // Control: named as the workspace, a catalogue directory stays writable.
    let host = host.dir("/home/u/.config/nvim", 1000, 0o755);
    req.workspace = p("/home/u/.config/nvim");
    req.cwd = req.workspace.clone();
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    assert!(!guarded(&plan, "/home/u/.config/nvim"));
    assert!(!plan.protected.contains(&p("/home/u/.config/nvim")));
    // Entries outside every writable root cannot be made there: not in the guard at all.
    assert!(!guarded(&plan, "/home/u/.config/systemd"));
    assert!(plan
        .creation_guard
        .protected
        .iter()
        .filter(|g| g.tail.is_empty())
        .all(|g| is_within(&g.base, Path::new("/home/u/.config/nvim"))));
}

/// The caller's `PATH` directories in the home and the `~/.config` entries below a moved
/// `XDG_CONFIG_HOME` are the home's persistence points too; a `PATH` directory of a project
/// workspace below the home is the project's own.
#[test]
fn path_directories_and_xdg_config_of_the_home_are_guarded() {
    let host = machine().dir("/home/u/.npm-global/bin", 1000, 0o755);
    let mut req = request(1000);
    req.env.retain(|(k, _)| k != "PATH");
    req.env.push((
        "PATH".into(),
        "/home/u/.npm-global/bin:/home/u/ws/bin:/usr/bin:relative/bin".into(),
    ));
    req.env
        .push(("XDG_CONFIG_HOME".into(), "/home/u/.xdg".into()));
    let guarded = |plan: &Plan, base: &str| {
        (plan.creation_guard.protected.iter())
            .any(|g| g.base == Path::new(base) && g.tail.is_empty())
    };
    // A project workspace below the home: its bin stays writable.
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    assert!(!guarded(&plan, "/home/u/ws/bin"));
    // The home as the workspace.
    req.workspace = p("/home/u");
    req.cwd = p("/home/u");
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    for base in [
        "/home/u/.npm-global/bin",
        "/home/u/ws/bin",
        "/home/u/.xdg/systemd",
        "/home/u/.xdg/autostart",
    ] {
        assert!(guarded(&plan, base), "{base} is not guarded");
    }
    assert!(plan.protected.contains(&p("/home/u/.npm-global/bin")));
    assert!(!guarded(&plan, "/usr/bin"), "outside the home");
    // Unprotected by name: not brought back by PATH.
    let file = policy::parse_policy_file(
        "[filesystem]\nunprotect = [\"~/.local/bin\"]\n",
        "stockade.toml",
    )
    .unwrap();
    let policy = policy::resolve(Some(file), &policy::Overrides::default()).unwrap();
    req.env.push(("PATH".into(), "/home/u/.local/bin".into()));
    req.env
        .retain(|(k, v)| k != "PATH" || v == "/home/u/.local/bin");
    let plan = Plan::new(&policy, &req, &host).unwrap();
    assert!(!guarded(&plan, "/home/u/.local/bin"));
}

/// A host where a symbolic link is listed beside a mask in an allowed directory (red team
/// i32 L1): the link gets no rule (a rule through it granted its target), and nothing under
/// the allowed path is planned through links.
struct Swapping {
    inner: FakeHost,
    links: Vec<PathBuf>,
}

impl Host for Swapping {}

impl HostView for Swapping {
    fn stat(&self, path: &Path) -> Option<Entry> {
        self.inner.stat(path)
    }
    fn lstat_kind(&self, path: &Path) -> Option<Kind> {
        if self.links.iter().any(|l| l == path) {
            return Some(Kind::Symlink);
        }
        self.inner.lstat_kind(path)
    }
    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        self.inner.canonicalize(path)
    }
    fn list_dir(&self, path: &Path) -> Vec<(OsString, Kind)> {
        let mut v = self.inner.list_dir(path);
        for l in &self.links {
            if l.parent() == Some(path) {
                if let Some(name) = l.file_name() {
                    v.retain(|(n, _)| n.as_os_str() != name);
                    v.push((name.to_os_string(), Kind::Symlink));
                }
            }
        }
        v
    }
    fn read_small(&self, path: &Path) -> Option<String> {
        self.inner.read_small(path)
    }
}

#[test]
fn a_link_listed_beside_a_mask_in_an_allowed_directory_gets_no_rule() {
    let host = Swapping {
        inner: machine()
            .dir("/srv/shared/d", 0, 0o755)
            .file("/srv/shared/sec")
            .dir("/srv/shared/link", 0, 0o755)
            .dir("/srv/private", 0, 0o700),
        links: vec![p("/srv/shared/link")],
    };
    let mut policy = default_policy();
    policy.filesystem.read_scope = policy::ReadScope::AllowList;
    policy.filesystem.allow_read = vec!["/srv/shared".into()];
    policy.filesystem.deny_read.push("/srv/shared/sec".into());
    let plan = Plan::new(&policy, &request(1000), &host).unwrap();
    let rules = &plan.landlock.host_rules;
    assert!(
        rules
            .iter()
            .any(|r| r.path == p("/srv/shared") && r.access == Access::List),
        "{rules:#?}"
    );
    assert!(
        !rules.iter().any(|r| r.path == p("/srv/shared/link")),
        "{rules:#?}"
    );
    for r in rules.iter().filter(|r| r.path.starts_with("/srv")) {
        assert!(!r.links, "{} planned through links", r.path.display());
    }
}

/// A git clone the catalogue protects whole in a home that is the workspace (`~/.pyenv`):
/// read-only as a whole, and its config is not held for a checked rewrite (the init could not
/// open it for writing below `~/.pyenv`'s read-only bind: every run failed at set-up). The
/// workspace's own repository keeps its held config (control).
#[test]
fn a_config_inside_a_path_protected_whole_is_not_held() {
    let host = machine()
        .dir("/home/u/.pyenv/.git/hooks", 1000, 0o755)
        .file("/home/u/.pyenv/.git/config")
        .file("/home/u/.pyenv/.git/HEAD");
    let mut req = request(1000);
    req.workspace = p("/home/u");
    req.cwd = p("/home/u");
    let plan = Plan::new(&default_policy(), &req, &host).unwrap();
    let has = |m: Mount| plan.mounts.contains(&m);
    assert!(has(Mount::ReadOnly {
        path: p("/home/u/.pyenv")
    }));
    let held: Vec<&PathBuf> = (plan.creation_guard.held_configs.iter())
        .map(|(p, _)| p)
        .collect();
    assert!(
        !held.contains(&&p("/home/u/.pyenv/.git/config")),
        "{held:?}"
    );
    assert!(
        !plan.mounts.iter().any(
            |m| matches!(m, Mount::Hold { path, .. } if path == Path::new("/home/u/.pyenv/.git/config"))
        ),
        "{:#?}",
        plan.mounts
    );
    assert!(held.contains(&&p("/home/u/ws/.git/config")), "{held:?}");
}
