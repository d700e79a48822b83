//! What on this host denies user namespaces to stockade, read from the host's settings, so that
//! `doctor` and a refused run name the exact setting and its fix instead of a bare `EPERM`.
//!
//! The cases (first match wins):
//! - `user.max_user_namespaces = 0`: nobody may create one.
//! - Debian's `kernel.unprivileged_userns_clone = 0`: only privileged callers may.
//! - Ubuntu 23.10+'s `kernel.apparmor_restrict_unprivileged_userns = 1` while stockade runs
//!   unconfined: the namespace is created, but every capability in it is denied, so the first
//!   mount fails. The fix that keeps the restriction for everything else is an AppArmor
//!   profile for the stockade binary that allows `userns` (`dist/apparmor/stockade`), as
//!   distributions ship one for bwrap.
//! - SELinux enforcing, for a refusal none of the above explains (its `user_namespace` class
//!   can deny `create`).
//!
//! Root callers (CAP_SYS_ADMIN) are not subject to the unprivileged restrictions.

use std::path::{Path, PathBuf};

/// stockade's AppArmor profile (see the module docs), with `@STOCKADE@` where the binary's
/// path goes.
const APPARMOR_PROFILE: &str = include_str!("../data/apparmor.profile");

/// The AppArmor profile for the stockade binary at `exe`.
pub fn apparmor_profile(exe: &Path) -> String {
    APPARMOR_PROFILE.replace("@STOCKADE@", &exe.display().to_string())
}

/// The settings that decide whether this process may use user namespaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsernsFacts {
    pub caller_root: bool,
    /// `/proc/sys/user/max_user_namespaces`.
    pub max_user_namespaces: Option<u64>,
    /// `/proc/sys/kernel/unprivileged_userns_clone` (Debian's patch; absent elsewhere).
    pub unprivileged_userns_clone: Option<u64>,
    /// `/proc/sys/kernel/apparmor_restrict_unprivileged_userns` (Ubuntu; absent elsewhere).
    pub apparmor_restrict: Option<u64>,
    /// This process's AppArmor label (`unconfined`, `stockade (unconfined)`, ...).
    pub apparmor_label: Option<String>,
    /// `/sys/fs/selinux/enforce`.
    pub selinux_enforcing: Option<u64>,
    /// The stockade binary, for the profile's path.
    pub exe: PathBuf,
}

fn number(root: &Path, path: &str) -> Option<u64> {
    std::fs::read_to_string(root.join(path.trim_start_matches('/')))
        .ok()?
        .trim()
        .parse()
        .ok()
}

impl UsernsFacts {
    /// Read the facts under `root` (`/` on a real host; a directory laid out like one in
    /// tests).
    pub fn read(root: &Path, caller_root: bool, exe: &Path) -> UsernsFacts {
        let label = ["proc/self/attr/apparmor/current", "proc/self/attr/current"]
            .iter()
            .find_map(|p| std::fs::read_to_string(root.join(p)).ok())
            .map(|s| s.trim_end_matches(['\n', '\0']).trim().to_string())
            .filter(|s| !s.is_empty());
        UsernsFacts {
            caller_root,
            max_user_namespaces: number(root, "/proc/sys/user/max_user_namespaces"),
            unprivileged_userns_clone: number(root, "/proc/sys/kernel/unprivileged_userns_clone"),
            apparmor_restrict: number(
                root,
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            ),
            apparmor_label: label,
            selinux_enforcing: number(root, "/sys/fs/selinux/enforce"),
            exe: exe.to_path_buf(),
        }
    }

    /// The facts of this process on this host.
    pub fn this_host() -> UsernsFacts {
        let exe =
            std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/usr/local/bin/stockade"));
        UsernsFacts::read(Path::new("/"), sys::raw::euid() == 0, &exe)
    }
}

/// A host setting that denies user namespaces, and how to change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocker {
    /// The setting, as the user would look it up.
    pub setting: String,
    pub what: String,
    pub fix: String,
}

/// What denies user namespaces here, if the settings say so. `refused` is whether a probe or
/// a run was actually refused (SELinux is only named then: it cannot be read off a setting).
pub fn blocker(f: &UsernsFacts, refused: bool) -> Option<Blocker> {
    if f.max_user_namespaces == Some(0) {
        return Some(Blocker {
            setting: "user.max_user_namespaces = 0".into(),
            what: "this host allows no user namespaces at all".into(),
            fix:
                "`sudo sysctl -w user.max_user_namespaces=15000` (and in /etc/sysctl.d/ to keep it)"
                    .into(),
        });
    }
    if f.caller_root {
        return None;
    }
    if f.unprivileged_userns_clone == Some(0) {
        return Some(Blocker {
            setting: "kernel.unprivileged_userns_clone = 0".into(),
            what: "this kernel allows user namespaces to privileged processes only".into(),
            fix: "`sudo sysctl -w kernel.unprivileged_userns_clone=1` (and in /etc/sysctl.d/ to keep it)".into(),
        });
    }
    let unconfined = f
        .apparmor_label
        .as_deref()
        .is_none_or(|l| l == "unconfined");
    if f.apparmor_restrict == Some(1) && unconfined {
        return Some(Blocker {
            setting: "kernel.apparmor_restrict_unprivileged_userns = 1".into(),
            what: "AppArmor denies capabilities in user namespaces to unconfined programs, and stockade runs unconfined".into(),
            fix: format!(
                "install stockade's AppArmor profile for {exe} (as distributions do for bwrap): \
                 `{exe} apparmor-profile | sudo tee /etc/apparmor.d/stockade && sudo apparmor_parser -r /etc/apparmor.d/stockade`; \
                 or, for every program, `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`",
                exe = f.exe.display()
            ),
        });
    }
    if refused && f.selinux_enforcing == Some(1) {
        return Some(Blocker {
            setting: "SELinux enforcing".into(),
            what: "SELinux may deny `user_namespace { create }` to this domain".into(),
            fix: "check `ausearch -m avc -ts recent` for a user_namespace denial and allow it for stockade's domain".into(),
        });
    }
    None
}

/// The refusal of a run that failed with `EPERM`/`EACCES` while a host setting denies user
/// namespaces (`refused`: the namespaces themselves could not be made), naming the setting.
pub(crate) fn refusal(cause: &str, refused: bool) -> Option<crate::RunError> {
    let b = blocker(&UsernsFacts::this_host(), refused)?;
    Some(crate::RunError::Unavailable {
        what: "a user namespace",
        cause: format!("{cause}: {}: {}", b.setting, b.what),
        fix: b.fix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake host: a directory laid out like `/` with the given files.
    fn host(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    fn read(files: &[(&str, &str)], root_caller: bool) -> UsernsFacts {
        let h = host(files);
        UsernsFacts::read(h.path(), root_caller, Path::new("/opt/bin/stockade"))
    }

    const UBUNTU: &[(&str, &str)] = &[
        ("/proc/sys/user/max_user_namespaces", "63388\n"),
        (
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "1\n",
        ),
        ("/proc/self/attr/apparmor/current", "unconfined\n"),
    ];

    #[test]
    fn ubuntu_restriction_on_an_unconfined_stockade_is_named_with_the_profile_fix() {
        let b = blocker(&read(UBUNTU, false), true).unwrap();
        assert_eq!(
            b.setting,
            "kernel.apparmor_restrict_unprivileged_userns = 1"
        );
        assert!(
            b.fix
                .contains("/opt/bin/stockade apparmor-profile | sudo tee /etc/apparmor.d/stockade"),
            "{}",
            b.fix
        );
        // Known before any refusal: doctor can say it up front.
        assert_eq!(blocker(&read(UBUNTU, false), false), Some(b));
    }

    #[test]
    fn a_profile_for_stockade_or_a_root_caller_lifts_the_restriction() {
        let mut confined = UBUNTU.to_vec();
        confined[2] = (
            "/proc/self/attr/apparmor/current",
            "stockade (unconfined)\n",
        );
        assert_eq!(blocker(&read(&confined, false), true), None);
        assert_eq!(blocker(&read(UBUNTU, true), true), None);
        // The older attr file (no apparmor/ directory).
        let old = [
            (
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "1",
            ),
            ("/proc/self/attr/current", "stockade (enforce)\n"),
        ];
        assert_eq!(blocker(&read(&old, false), true), None);
    }

    #[test]
    fn the_profile_allows_user_namespaces_for_this_binary_only() {
        let p = apparmor_profile(Path::new("/opt/bin/stockade"));
        assert!(p.contains("profile stockade /opt/bin/stockade flags=(unconfined) {"));
        assert!(p.contains("\n  userns,\n"));
        assert!(!p.contains("@STOCKADE@"));
    }

    #[test]
    fn other_settings_are_named() {
        let b = blocker(
            &read(&[("/proc/sys/user/max_user_namespaces", "0")], true),
            true,
        );
        assert_eq!(b.unwrap().setting, "user.max_user_namespaces = 0");
        let debian = [("/proc/sys/kernel/unprivileged_userns_clone", "0\n")];
        assert_eq!(
            blocker(&read(&debian, false), true).unwrap().setting,
            "kernel.unprivileged_userns_clone = 0"
        );
        assert_eq!(blocker(&read(&debian, true), true), None);
        let selinux = [("/sys/fs/selinux/enforce", "1")];
        assert_eq!(blocker(&read(&selinux, false), false), None);
        assert_eq!(
            blocker(&read(&selinux, false), true).unwrap().setting,
            "SELinux enforcing"
        );
    }

    #[test]
    fn a_host_without_these_settings_has_no_blocker() {
        assert_eq!(blocker(&read(&[], false), true), None);
        let open = [
            (
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "0",
            ),
            ("/proc/sys/kernel/unprivileged_userns_clone", "1"),
        ];
        assert_eq!(blocker(&read(&open, false), true), None);
    }
}
