//! Landlock for the run: the supervisor builds the ruleset from the host rules on a thread
//! of its own beside the rest of the set-up ([`Building`]), and hands it to the init, which
//! adds its own rules and restricts the command.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::raw::c_int;
use std::path::PathBuf;

use landlock::{Access as _, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, Scope, ABI};

use super::path_c;
use crate::error::RunError;
use crate::plan::{Access, Rule};

// Landlock filesystem access bits (linux/landlock.h).
const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;

pub(super) fn access_bits(access: Access, dir: bool) -> u64 {
    let bits = match access {
        Access::Read => EXECUTE | READ_FILE | READ_DIR,
        Access::List => READ_DIR,
        Access::Full => u64::MAX,
        Access::Device => READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV | READ_DIR,
        Access::ReadWriteFiles => EXECUTE | READ_FILE | READ_DIR | WRITE_FILE | TRUNCATE,
    };
    if dir {
        bits
    } else {
        bits & FILE_RIGHTS
    }
}

/// The Landlock ruleset with every host-side rule added, plus the bits the kernel handles.
pub(super) struct Landlock {
    pub(super) fd: OwnedFd,
    pub(super) handled: u64,
    pub(super) abi: i32,
}

/// The Landlock ruleset, built on a thread of its own while the rest of the set-up before the
/// clone runs (the seccomp program, the idmapped mounts, the cgroups: about 0.2 ms, up to
/// 1.7 ms with a crowded home's hundreds of rules). [`Building::finish`] joins it before the
/// clone, so the init gets the complete ruleset exactly as when it was built in line, and
/// enforces it before it forks the command; an early return joins it on drop, so its
/// descriptors are never made once the spawn lock is released.
pub(super) enum Building {
    Thread(Option<std::thread::JoinHandle<Result<Landlock, LandlockError>>>),
    /// No thread could be made: built in line, as before.
    Built(Option<Result<Landlock, LandlockError>>),
}

impl Building {
    pub(super) fn start(rules: Vec<Rule>) -> Building {
        let parent = tracing::Span::current();
        // Shared so that the rules are still here when no thread can be made (the closure
        // is dropped with them then).
        let rules = std::sync::Arc::new(std::sync::Mutex::new(Some(rules)));
        let take = |r: &std::sync::Mutex<Option<Vec<Rule>>>| {
            r.lock().ok().and_then(|mut r| r.take()).unwrap_or_default()
        };
        let shared = rules.clone();
        let spawned = std::thread::Builder::new()
            .name("stockade-landlock".into())
            .spawn(move || {
                let rules = take(&shared);
                tracing::debug_span!(parent: &parent, "landlock").in_scope(|| landlock(&rules))
            });
        match spawned {
            Ok(handle) => Building::Thread(Some(handle)),
            Err(_) => {
                let rules = take(&rules);
                Building::Built(Some(
                    tracing::debug_span!("landlock").in_scope(|| landlock(&rules)),
                ))
            }
        }
    }

    pub(super) fn finish(mut self) -> Result<Landlock, LandlockError> {
        let built = match &mut self {
            Building::Thread(handle) => handle.take().map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(LandlockError::Internal(
                        "the Landlock ruleset's builder panicked",
                    ))
                })
            }),
            Building::Built(built) => built.take(),
        };
        built.unwrap_or(Err(LandlockError::Internal(
            "the Landlock ruleset was not built",
        )))
    }
}

impl Drop for Building {
    fn drop(&mut self) {
        if let Building::Thread(handle) = self {
            if let Some(handle) = handle.take() {
                let _ = handle.join();
            }
        }
    }
}

/// Why the Landlock ruleset was not built. Only [`LandlockError::Unavailable`] is the
/// kernel's (`--allow-degraded` may run without Landlock then); a rule that cannot be added
/// means its path is not what was planned, and refuses the run whatever the options: skipping
/// the whole ruleset would drop every other grant's limit with it.
#[derive(Debug)]
pub(super) enum LandlockError {
    /// No Landlock ABI, or the ruleset could not be created.
    Unavailable(String),
    /// A host rule's path changed since the run was planned (another file or directory, a
    /// symbolic link on the way), or its rule was refused.
    Changed { path: PathBuf, cause: sys::Errno },
    /// The builder itself failed.
    Internal(&'static str),
}

impl LandlockError {
    pub(super) fn into_run_error(self) -> RunError {
        match self {
            LandlockError::Unavailable(cause) => RunError::Unavailable {
                what: "Landlock",
                cause,
                fix: "use a kernel with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y and `landlock` in the lsm= boot list), or pass --allow-degraded to run without it".into(),
            },
            LandlockError::Changed { path, cause } => changed_rule(path, cause),
            LandlockError::Internal(what) => RunError::io(
                "build the Landlock ruleset",
                std::io::Error::other(what),
            ),
        }
    }
}

/// The refusal when a Landlock rule's path is not what the run was planned with (the host's
/// rules here, the init's in [`setup_error`]).
pub(super) fn changed_rule(path: PathBuf, cause: sys::Errno) -> RunError {
    let why = std::io::Error::from_raw_os_error(cause.0);
    RunError::Setup {
        stage: "add a Landlock rule",
        path: Some(path),
        cause: std::io::Error::other(format!(
            "the path changed since the run was planned ({why})"
        )),
        explained: Some(
            "this path now leads to another file or directory than when the run was planned (replaced, or through a symbolic link put on the way: another run writing the same directories?); nothing was granted on it and nothing ran: check the path and run again".into(),
        ),
    }
}

/// `rule.path` opened again (`O_PATH`), checked to be what the planner saw there: through no
/// symbolic link unless the planner saw one on the way ([`Rule::links`]; never a
/// `/proc`-style magic link), the same kind, the same `(st_dev, st_ino)` ([`Rule::id`]).
/// `Ok(None)`: nothing to grant there (gone since planning, or a plain file read by name that
/// was replaced by another plain file: an editor's or a tool's atomic save in a listed home
/// directory; the new file is not granted, so it stays unreadable in this run).
fn open_planned(c: &CStr, rule: &Rule) -> sys::raw::Result<Option<c_int>> {
    let resolve = if rule.links {
        sys::raw::RESOLVE_NO_MAGICLINKS
    } else {
        sys::raw::RESOLVE_NO_SYMLINKS
    };
    let opened = match sys::raw::openat2(libc::AT_FDCWD, c, libc::O_PATH, resolve) {
        // No openat2 (a seccomp filter answering ENOSYS, or EPERM, its default in older
        // container profiles: a run nested in a sandbox, an older Docker): where the planner
        // saw no link, the same lookup component by component (`ELOOP` at a link); where it
        // saw one, a plain lookup. Both sound because whatever the path leads to must still
        // be the planned `(st_dev, st_ino)` (checked below), and a Landlock rule binds that
        // inode only.
        Err(sys::Errno(libc::ENOSYS | libc::EPERM)) if rule.links => {
            sys::raw::openat(libc::AT_FDCWD, c, libc::O_PATH, 0)
        }
        Err(sys::Errno(libc::ENOSYS | libc::EPERM)) => {
            sys::raw::openat_no_symlinks_by_component(libc::AT_FDCWD, c, libc::O_PATH)
        }
        other => other,
    };
    let fd = match opened {
        Ok(fd) => fd,
        Err(sys::Errno(libc::ENOENT)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let st = match sys::raw::fstatat(fd, c"", libc::AT_EMPTY_PATH) {
        Ok(st) => st,
        Err(e) => {
            sys::raw::close(fd);
            return Err(e);
        }
    };
    let kind = st.st_mode & libc::S_IFMT;
    // st_dev's and st_ino's widths differ between architectures.
    #[allow(clippy::unnecessary_cast)]
    let id = (st.st_dev as u64, st.st_ino as u64);
    if (kind == libc::S_IFDIR) == rule.dir && rule.id == Some(id) {
        return Ok(Some(fd));
    }
    sys::raw::close(fd);
    let replaced_file =
        !rule.links && !rule.dir && rule.access == Access::Read && kind == libc::S_IFREG;
    if replaced_file {
        return Ok(None);
    }
    Err(sys::Errno(libc::ESTALE))
}

pub(super) fn landlock(host_rules: &[Rule]) -> Result<Landlock, LandlockError> {
    let unavailable = |e: String| LandlockError::Unavailable(e);
    let abi_num = sys::raw::landlock_abi()
        .map_err(|e| unavailable(format!("Landlock is not supported by this kernel ({e})")))?;
    let abi = ABI::from(abi_num.min(7));
    let fs = AccessFs::from_all(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(fs)
        .map_err(|e| unavailable(e.to_string()))?;
    if abi_num >= 6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(|e| unavailable(e.to_string()))?;
    }
    let created = ruleset.create().map_err(|e| unavailable(e.to_string()))?;
    let handled = fs.bits();
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or_else(|| unavailable("Landlock ruleset was not created".into()))?;
    // Tests only: once the run is planned, before the host's rules are added (an attack test
    // changes a granted path between planning and the build).
    #[cfg(debug_assertions)]
    sys::test_pause::at("STOCKADE_TEST_LANDLOCK_PAUSE");
    // Rules added with the raw call: the planner already knows each path's kind and inode
    // (checked on the descriptor the rule is added through), so the crate's `stat` of every
    // path (44 on a root run) would be wasted.
    for rule in host_rules {
        let changed = |cause| LandlockError::Changed {
            path: rule.path.clone(),
            cause,
        };
        let c = path_c(&rule.path).map_err(|_| changed(sys::Errno(libc::EINVAL)))?;
        let pfd = match open_planned(&c, rule) {
            Ok(Some(pfd)) => pfd,
            // Gone since planning, or a file replaced by another (see `open_planned`):
            // nothing is granted in its place.
            Ok(None) => continue,
            Err(e) => return Err(changed(e)),
        };
        let bits = access_bits(rule.access, rule.dir) & handled;
        let added = sys::raw::landlock_add_path_rule(fd.as_raw_fd(), pfd, bits);
        sys::raw::close(pfd);
        added.map_err(changed)?;
    }
    Ok(Landlock {
        fd,
        handled,
        abi: abi_num,
    })
}
