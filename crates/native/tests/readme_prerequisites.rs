//! README's "Prerequisites" section says what `stockade doctor` and a refused run say (issue
//! 18, item 10): every host setting the user-namespace diagnosis can name, with the commands
//! of its fix, appears there. A setting or fix changed in `userns.rs` without the README fails
//! here.
#![allow(
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::fs;
use std::path::Path;

use native::userns::{blocker, UsernsFacts};

/// README's Prerequisites section.
fn prerequisites() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let start = readme
        .find("## Prerequisites")
        .expect("README has a Prerequisites section");
    let section = &readme[start..];
    let end = section[3..].find("\n## ").map_or(section.len(), |e| e + 3);
    section[..end].to_owned()
}

/// A host laid out under a temporary directory with these settings.
fn facts(files: &[(&str, &str)], root_caller: bool) -> UsernsFacts {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let p = dir.path().join(path.trim_start_matches('/'));
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    }
    UsernsFacts::read(dir.path(), root_caller, Path::new("/opt/bin/stockade"))
}

/// The commands of a fix (its backquoted parts), as README writes them: the binary as
/// `stockade`, `|` escaped inside its table.
fn commands(fix: &str) -> Vec<String> {
    fix.split('`')
        .skip(1)
        .step_by(2)
        .map(|c| {
            c.replace("/opt/bin/stockade", "stockade")
                .replace('|', "\\|")
        })
        .collect()
}

#[test]
fn readme_names_every_setting_and_fix_the_diagnosis_can_name() {
    let section = prerequisites();
    let hosts: [&[(&str, &str)]; 4] = [
        &[("/proc/sys/user/max_user_namespaces", "0")],
        &[("/proc/sys/kernel/unprivileged_userns_clone", "0")],
        &[
            (
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "1",
            ),
            ("/proc/self/attr/apparmor/current", "unconfined"),
        ],
        &[("/sys/fs/selinux/enforce", "1")],
    ];
    for files in hosts {
        let b = blocker(&facts(files, false), true).expect("a blocker");
        assert!(
            section.contains(&b.setting),
            "README's Prerequisites do not name {}:\n{section}",
            b.setting
        );
        for command in commands(&b.fix) {
            assert!(
                section.contains(&command),
                "README's Prerequisites lack the fix `{command}` for {}",
                b.setting
            );
        }
    }
}
