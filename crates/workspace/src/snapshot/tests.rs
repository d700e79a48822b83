use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use super::*;
use crate::host::{Kind, RealHost};

/// A workspace `ws` and a home `home` side by side, canonical.
struct Env {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    home: PathBuf,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let (ws, home) = (root.join("ws"), root.join("home"));
    fs::create_dir_all(&ws).unwrap();
    fs::create_dir_all(&home).unwrap();
    Env {
        _tmp: tmp,
        root,
        ws,
        home,
    }
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn filter_for(e: &Env, policy: &policy::Policy) -> Filter {
    Filter::new(policy, &e.ws, &e.home, &RealHost).unwrap()
}

fn default_filter(e: &Env) -> Filter {
    filter_for(e, &policy::profile("workspace-write").unwrap())
}

fn take(e: &Env) -> Snapshot {
    Snapshot::take(&default_filter(e), Options::default()).unwrap()
}

fn paths(s: &Snapshot) -> Vec<String> {
    s.entries
        .iter()
        .map(|e| e.path.display().to_string())
        .collect()
}

fn reason_of(s: &Snapshot, path: &str) -> Option<Reason> {
    s.excluded
        .iter()
        .find(|x| x.path == Path::new(path))
        .map(|x| x.reason)
}

/// Every path under `dir` (relative), with the content of files and the target of links.
fn tree(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let t = e.file_type().unwrap();
            let what = if t.is_symlink() {
                format!("-> {}", fs::read_link(&p).unwrap().display())
            } else if t.is_dir() {
                todo.push(p.clone());
                "dir".into()
            } else {
                String::from_utf8_lossy(&fs::read(&p).unwrap()).into_owned()
            };
            out.insert(rel, what);
        }
    }
    out
}

/// Every entry of the tar at `file`, as [`tree`] shows a directory.
fn tar_tree(file: &Path) -> BTreeMap<String, String> {
    use std::io::Read;
    let mut out = BTreeMap::new();
    let mut archive = tar::Archive::new(fs::File::open(file).unwrap());
    for e in archive.entries().unwrap() {
        let mut e = e.unwrap();
        let rel = e.path().unwrap().display().to_string();
        let rel = rel.trim_end_matches('/').to_string();
        let what = match e.header().entry_type() {
            tar::EntryType::Symlink => {
                format!("-> {}", e.link_name().unwrap().unwrap().display())
            }
            tar::EntryType::Directory => "dir".into(),
            _ => {
                let mut text = String::new();
                e.read_to_string(&mut text).unwrap();
                text
            }
        };
        out.insert(rel, what);
    }
    out
}

#[test]
fn filter_decides_each_reason() {
    let e = env();
    let f = default_filter(&e);
    let d = |p: &str, k: Kind| f.decide(Path::new(p), k);
    let reason = |p: &str, k: Kind| match d(p, k) {
        Decision::Exclude(r, _) => Some(r),
        _ => None,
    };
    // Kept.
    for (p, k) in [
        ("src/main.rs", Kind::File),
        ("stockade.toml", Kind::File),
        ("target", Kind::File),
        (".git", Kind::Dir),
        (".git/HEAD", Kind::File),
        (".git/index", Kind::File),
        (".git/packed-refs", Kind::File),
        (".git/objects/ab/cdef", Kind::File),
        (".git/objects/pack/p.pack", Kind::File),
        (".git/refs/heads/main", Kind::File),
        ("vendor/lib/.git/HEAD", Kind::File),
    ] {
        assert_eq!(d(p, k), Decision::Include, "{p}");
    }
    assert_eq!(d(".git/config", Kind::File), Decision::GitConfig);
    // Git internals and redirects.
    for p in [
        ".git/hooks",
        ".git/hooks/pre-commit",
        ".git/info/exclude",
        ".git/logs/HEAD",
        ".git/modules/sub/config",
        ".git/worktrees/w/gitdir",
        ".git/commondir",
        ".git/config.worktree",
        ".git/objects/info/alternates",
        ".git/FETCH_HEAD",
    ] {
        assert_eq!(reason(p, Kind::File), Some(Reason::GitInternal), "{p}");
    }
    assert_eq!(
        reason(".git/config", Kind::Symlink),
        Some(Reason::GitInternal)
    );
    assert_eq!(reason(".git", Kind::File), Some(Reason::GitRedirect));
    assert_eq!(reason("sub/.git", Kind::Symlink), Some(Reason::GitRedirect));
    // stockade's state, at any depth.
    for p in [
        ".stockade",
        ".stockade/quarantine/run1/x",
        "a/.stockade/p.toml",
    ] {
        assert_eq!(reason(p, Kind::File), Some(Reason::StockadeState), "{p}");
    }
    // Dependency caches at any depth, directories only.
    for p in [
        "node_modules",
        "web/node_modules/left-pad/index.js",
        "target/debug/app",
        ".venv/bin/python",
        "venv",
        "pkg/__pycache__/m.pyc",
        ".tox",
        ".gradle",
        ".mypy_cache",
    ] {
        let kind = if p.contains('/') {
            Kind::File
        } else {
            Kind::Dir
        };
        assert_eq!(reason(p, kind), Some(Reason::DependencyCache), "{p}");
    }
    // The default policy's masks: dotenv files at any depth.
    for p in [".env", ".env.local", "app/.env.production"] {
        assert_eq!(reason(p, Kind::File), Some(Reason::Secret), "{p}");
    }
    match d(".env", Kind::File) {
        Decision::Exclude(_, detail) => assert!(detail.starts_with(".env: "), "{detail}"),
        other => panic!("{other:?}"),
    }
    // Not a path of the workspace.
    assert_eq!(reason("../x", Kind::File), Some(Reason::NotInWorkspace));
    assert_eq!(
        reason("/etc/passwd", Kind::File),
        Some(Reason::NotInWorkspace)
    );
}

#[test]
fn home_masks_apply_when_the_workspace_holds_the_home() {
    let e = env();
    // The workspace is the home's parent: `~/.ssh` lies inside it.
    let policy = policy::profile("workspace-write").unwrap();
    let f = Filter::new(&policy, &e.root, &e.home, &RealHost).unwrap();
    let secret = |p: &str| {
        matches!(
            f.decide(Path::new(p), Kind::File),
            Decision::Exclude(Reason::Secret, _)
        )
    };
    assert!(secret("home/.ssh/id_ed25519"));
    assert!(secret("home/.aws/credentials"));
    assert!(secret("home/.bashrc"), "read_empty masks too");
    assert!(!secret("home/notes.txt"));
    // A mask that holds the whole workspace does not apply (writing implies reading).
    let mut wide = policy.clone();
    wide.filesystem.deny_read.push(e.root.display().to_string());
    let f = Filter::new(&wide, &e.ws, &e.home, &RealHost).unwrap();
    assert_eq!(f.decide(Path::new("a.txt"), Kind::File), Decision::Include);
}

#[test]
fn policy_deny_read_and_allow_read_are_followed() {
    let e = env();
    let mut policy = policy::profile("workspace-write").unwrap();
    policy
        .filesystem
        .deny_read
        .push("$WORKSPACE/private".into());
    policy.filesystem.deny_read.push("*.pem".into());
    policy
        .filesystem
        .allow_read
        .push("$WORKSPACE/private/public.txt".into());
    write(&e.ws.join("private/key"), "k");
    write(&e.ws.join("private/public.txt"), "p");
    write(&e.ws.join("certs/server.pem"), "c");
    write(&e.ws.join("certs/ca.crt"), "c");
    let s = Snapshot::take(&filter_for(&e, &policy), Options::default()).unwrap();
    assert_eq!(
        paths(&s),
        ["certs", "certs/ca.crt", "private", "private/public.txt"]
    );
    assert_eq!(reason_of(&s, "private/key"), Some(Reason::Secret));
    assert_eq!(reason_of(&s, "certs/server.pem"), Some(Reason::Secret));
}

#[test]
fn snapshot_leaves_out_secrets_caches_state_and_git_code() {
    let e = env();
    let ws = &e.ws;
    write(&ws.join("README.md"), "readme");
    write(&ws.join(".env"), "API_KEY=secret");
    write(&ws.join("app/.env.production"), "K=secret");
    write(&ws.join("node_modules/x/index.js"), "x");
    write(
        &ws.join(".stockade/quarantine/run1/.git/hooks/pre-commit"),
        "x",
    );
    write(&ws.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(&ws.join(".git/objects/ab/cd"), "obj");
    write(&ws.join(".git/refs/heads/main"), "0000\n");
    write(&ws.join(".git/hooks/pre-commit"), "#!/bin/sh\nevil\n");
    write(&ws.join(".git/logs/HEAD"), "log");
    write(
        &ws.join(".git/config"),
        "[core]\n\tbare = false\n\thooksPath = /x\n\tfsmonitor = evil\n[alias]\n\tx = !evil\n",
    );
    write(&ws.join("sub/.git"), "gitdir: ../.git/modules/sub\n");
    write(&ws.join("sub/file"), "f");
    // A bare repository under another name: git's rules apply to it too.
    write(&ws.join("mirror.git/HEAD"), "ref: refs/heads/main\n");
    write(&ws.join("mirror.git/refs/heads/main"), "0000\n");
    write(&ws.join("mirror.git/hooks/post-update"), "evil");
    write(
        &ws.join("mirror.git/config"),
        "[core]\n\tbare = true\n\tpager = evil\n",
    );
    let s = take(&e);
    assert_eq!(
        paths(&s),
        [
            ".git",
            ".git/HEAD",
            ".git/config",
            ".git/objects",
            ".git/objects/ab",
            ".git/objects/ab/cd",
            ".git/refs",
            ".git/refs/heads",
            ".git/refs/heads/main",
            "README.md",
            "app",
            "mirror.git",
            "mirror.git/HEAD",
            "mirror.git/config",
            "mirror.git/refs",
            "mirror.git/refs/heads",
            "mirror.git/refs/heads/main",
            "sub",
            "sub/file",
        ]
    );
    for (p, r) in [
        (".env", Reason::Secret),
        ("app/.env.production", Reason::Secret),
        ("node_modules", Reason::DependencyCache),
        (".stockade", Reason::StockadeState),
        (".git/hooks", Reason::GitInternal),
        (".git/logs", Reason::GitInternal),
        ("sub/.git", Reason::GitRedirect),
        ("mirror.git/hooks", Reason::GitInternal),
    ] {
        assert_eq!(reason_of(&s, p), Some(r), "{p}");
    }
    let summary = s.summary();
    assert_eq!(summary.excluded.get(&Reason::Secret), Some(&2));
    assert_eq!(summary.files, 9);
    let out = e.root.join("out");
    s.write_dir(&out).unwrap();
    let config = fs::read_to_string(out.join(".git/config")).unwrap();
    assert!(config.contains("bare = \"false\""), "{config}");
    for gone in ["hooksPath", "fsmonitor", "alias", "evil"] {
        assert!(!config.contains(gone), "{gone} in {config}");
    }
    let mirror = fs::read_to_string(out.join("mirror.git/config")).unwrap();
    assert!(mirror.contains("bare = \"true\"") && !mirror.contains("evil"));
    assert!(!out.join(".env").exists() && !out.join("app/.env.production").exists());
}

#[test]
fn links_outside_refuse_the_snapshot_and_nothing_is_written() {
    for target in [
        "/etc/passwd",
        "../outside",
        "../ws/../outside",
        "sub/../../outside",
    ] {
        let e = env();
        fs::create_dir_all(e.root.join("outside")).unwrap();
        write(&e.ws.join("a.txt"), "a");
        fs::create_dir_all(e.ws.join("sub")).unwrap();
        symlink(target, e.ws.join("link")).unwrap();
        let err = Snapshot::take(&default_filter(&e), Options::default()).unwrap_err();
        match &err {
            SnapshotError::OutsideLinks { links, .. } => {
                assert_eq!(
                    links,
                    &[OutsideLink {
                        path: "link".into(),
                        target: target.into()
                    }]
                );
            }
            other => panic!("{target}: {other}"),
        }
        assert_eq!(err.code(), sandbox::Code::SnapshotRefused);
        assert!(err.to_string().contains(target), "{err}");
        // With the flag: left out and listed.
        let s = Snapshot::take(
            &default_filter(&e),
            Options {
                allow_outside_links: true,
            },
        )
        .unwrap();
        assert_eq!(paths(&s), ["a.txt", "sub"]);
        assert_eq!(s.outside_links.len(), 1);
    }
}

#[test]
fn links_through_other_links_are_followed_inside_the_workspace() {
    let e = env();
    fs::create_dir_all(e.root.join("outside")).unwrap();
    write(&e.ws.join("src/lib.rs"), "lib");
    fs::create_dir_all(e.ws.join("deep/er")).unwrap();
    // Kept: inside, possibly through other links, dangling inside, a loop.
    symlink("src/lib.rs", e.ws.join("inside")).unwrap();
    symlink(e.ws.join("src"), e.ws.join("absolute_inside")).unwrap();
    symlink("../../src", e.ws.join("deep/er/up")).unwrap();
    symlink("deep/er/up/lib.rs", e.ws.join("chained")).unwrap();
    symlink("missing/file", e.ws.join("dangling")).unwrap();
    symlink("loop", e.ws.join("loop")).unwrap();
    let s = take(&e);
    for p in [
        "inside",
        "absolute_inside",
        "deep/er/up",
        "chained",
        "dangling",
        "loop",
    ] {
        assert!(
            s.entries
                .iter()
                .any(|x| x.path == Path::new(p) && matches!(x.content, Content::Symlink(_))),
            "{p}"
        );
    }
    // Refused: `..` after a link goes up from where the link points, not from the name.
    symlink("deep/er", e.ws.join("down")).unwrap();
    symlink("down/../../../outside", e.ws.join("escape")).unwrap();
    let err = Snapshot::take(&default_filter(&e), Options::default()).unwrap_err();
    let SnapshotError::OutsideLinks { links, .. } = err else {
        panic!("{err}")
    };
    assert_eq!(links.len(), 1);
    assert_eq!(links[0].path, Path::new("escape"));
}

#[test]
fn dir_and_tar_hold_the_same_and_modes_lose_setuid() {
    let e = env();
    let ws = &e.ws;
    write(&ws.join("bin/tool"), "#!/bin/sh\n");
    fs::set_permissions(ws.join("bin/tool"), fs::Permissions::from_mode(0o6755)).unwrap();
    write(&ws.join("readonly.txt"), "ro");
    fs::set_permissions(ws.join("readonly.txt"), fs::Permissions::from_mode(0o444)).unwrap();
    write(&ws.join("docs/a.md"), "a");
    fs::set_permissions(ws.join("docs"), fs::Permissions::from_mode(0o555)).unwrap();
    symlink("docs/a.md", ws.join("link.md")).unwrap();
    write(&ws.join(".env"), "secret");
    write(&ws.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(&ws.join(".git/config"), "[core]\n\tbare = false\n");
    let s = take(&e);
    let (dir, tar) = (e.root.join("out"), e.root.join("out.tar"));
    s.write_dir(&dir).unwrap();
    s.write_tar(&tar).unwrap();
    // Deterministic: the same workspace gives the same archive.
    let again = e.root.join("again.tar");
    take(&e).write_tar(&again).unwrap();
    assert!(fs::read(&tar).unwrap() == fs::read(&again).unwrap());
    fs::set_permissions(ws.join("docs"), fs::Permissions::from_mode(0o755)).unwrap();
    let (from_dir, from_tar) = (tree(&dir), tar_tree(&tar));
    assert_eq!(from_dir, from_tar);
    assert!(!from_dir.contains_key(".env"));
    assert_eq!(
        from_dir.get("link.md").map(String::as_str),
        Some("-> docs/a.md")
    );
    let mode = |p: &Path| fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&dir.join("bin/tool")), 0o755);
    assert_eq!(mode(&dir.join("readonly.txt")), 0o444);
    assert_eq!(mode(&dir.join("docs")), 0o555);
    let mut archive = tar::Archive::new(fs::File::open(&tar).unwrap());
    for entry in archive.entries().unwrap() {
        let entry = entry.unwrap();
        let h = entry.header();
        assert_eq!(h.mode().unwrap() & 0o7000, 0);
        assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (0, 0));
    }
    fs::set_permissions(dir.join("docs"), fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn outputs_inside_the_workspace_or_not_new_are_refused() {
    let e = env();
    write(&e.ws.join("a.txt"), "a");
    let s = take(&e);
    for out in [e.ws.join("snap"), e.root.join("ws/../ws/snap2")] {
        let err = s.write_dir(&out).unwrap_err();
        assert!(
            matches!(err, SnapshotError::OutputInsideWorkspace { .. }),
            "{err}"
        );
    }
    assert!(matches!(
        s.write_tar(&e.ws.join("snap.tar")).unwrap_err(),
        SnapshotError::OutputInsideWorkspace { .. }
    ));
    assert!(!e.ws.join("snap").exists() && !e.ws.join("snap.tar").exists());
    write(&e.root.join("full/x"), "x");
    let err = s.write_dir(&e.root.join("full")).unwrap_err();
    assert!(matches!(err, SnapshotError::OutputNotEmpty(_)), "{err}");
    assert_eq!(err.code(), sandbox::Code::SnapshotRefused);
    write(&e.root.join("exists.tar"), "keep");
    let err = s.write_tar(&e.root.join("exists.tar")).unwrap_err();
    assert!(matches!(err, SnapshotError::OutputExists(_)), "{err}");
    assert_eq!(
        fs::read_to_string(e.root.join("exists.tar")).unwrap(),
        "keep"
    );
    // An empty directory may be given.
    fs::create_dir(e.root.join("empty")).unwrap();
    s.write_dir(&e.root.join("empty")).unwrap();
    assert!(e.root.join("empty/a.txt").is_file());
}

#[test]
fn hard_links_of_masked_files_are_left_out() {
    let e = env();
    write(&e.home.join(".aws/credentials"), "aws secret");
    write(&e.ws.join(".env"), "dotenv secret");
    fs::hard_link(e.home.join(".aws/credentials"), e.ws.join("innocent.txt")).unwrap();
    fs::hard_link(e.ws.join(".env"), e.ws.join("config.txt")).unwrap();
    write(&e.ws.join("plain.txt"), "plain");
    fs::hard_link(e.ws.join("plain.txt"), e.ws.join("plain2.txt")).unwrap();
    let s = take(&e);
    assert_eq!(paths(&s), ["plain.txt", "plain2.txt"]);
    assert_eq!(reason_of(&s, "innocent.txt"), Some(Reason::LinkedSecret));
    assert_eq!(reason_of(&s, "config.txt"), Some(Reason::LinkedSecret));
}

#[test]
fn special_files_are_left_out() {
    let e = env();
    let _listener = std::os::unix::net::UnixListener::bind(e.ws.join("sock")).unwrap();
    write(&e.ws.join("a.txt"), "a");
    let s = take(&e);
    assert_eq!(paths(&s), ["a.txt"]);
    assert_eq!(reason_of(&s, "sock"), Some(Reason::SpecialFile));
}
