//! What the init borrows from the supervisor, built completely before anything borrows it:
//! the C strings of its mounts, the command's environment, argv, exec candidates and
//! directory, its Landlock rules, its rlimits, and the creation guard's byte strings.

use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::landlock::access_bits;
use super::{at_most_hard, cstring, path_c};
use crate::error::RunError;
use crate::plan::{Access, Mount, Plan};

/// The C strings of a plan.
pub(super) struct Strings {
    /// Per mount: its path, and the second string some mounts take (a tmpfs's options, a
    /// link's target, an overlay's change directory).
    pub mounts: Vec<(CString, Option<CString>)>,
    /// `KEY=value`.
    pub env: Vec<CString>,
    pub argv: Vec<CString>,
    pub candidates: Vec<CString>,
    pub cwd: CString,
}

impl Strings {
    /// Refused when one holds a NUL byte.
    pub(super) fn new(plan: &Plan) -> Result<Strings, RunError> {
        let mounts = (plan.mounts.iter())
            .map(|m| {
                let (a, b): (Option<&Path>, Option<CString>) = match m {
                    Mount::Tmpfs { target, data, .. } => (Some(target), Some(cstring(data)?)),
                    Mount::Symlink { target, path } => (Some(path), Some(path_c(target)?)),
                    Mount::Overlay { lower, changes, .. } => (Some(lower), Some(path_c(changes)?)),
                    other => (other.path(), None),
                };
                Ok((path_c(a.unwrap_or(Path::new("/")))?, b))
            })
            .collect::<Result<_, RunError>>()?;
        Ok(Strings {
            mounts,
            env: (plan.env.iter())
                .map(|(k, v)| cstring(format!("{k}={v}")))
                .collect::<Result<_, _>>()?,
            argv: plan.argv.iter().map(cstring).collect::<Result<_, _>>()?,
            candidates: (plan.candidates.iter())
                .map(|p| path_c(p))
                .collect::<Result<_, _>>()?,
            cwd: path_c(&plan.cwd)?,
        })
    }
}

/// NULL-terminated pointers to `strings` (argv, envp), valid while `strings` lives.
pub(super) fn pointers(strings: &[CString]) -> Vec<*const c_char> {
    (strings.iter())
        .map(|c| c.as_ptr())
        .chain([std::ptr::null()])
        .collect()
}

/// The init's Landlock rules, each with what it must find at its path (see
/// `postfork::ChildRule`: a `read_empty` path must be its own empty cover), and its access
/// bits as far as the kernel handles them (`handled`; none without Landlock: no rules).
pub(super) fn child_rules(
    plan: &Plan,
    handled: Option<u64>,
) -> Result<Vec<(CString, u64, bool, bool)>, RunError> {
    let Some(handled) = handled else {
        return Ok(Vec::new());
    };
    (plan.landlock.child_rules.iter())
        .map(|r| {
            Ok((
                path_c(&r.path)?,
                access_bits(r.access, r.dir) & handled,
                r.dir,
                r.access == Access::Read && plan.emptied.contains(&r.path),
            ))
        })
        .collect()
}

/// The command's rlimits.
pub(super) fn rlimits(plan: &Plan) -> Vec<(c_int, u64)> {
    (plan.rlimits.iter())
        .filter_map(|(name, v)| match name.as_str() {
            "RLIMIT_NOFILE" => Some((libc::RLIMIT_NOFILE as c_int, *v)),
            // Fallbacks for a run without a cgroup: never above what the caller already has
            // (raising a hard limit needs a privilege; a lower one already holds).
            "RLIMIT_DATA" => Some(at_most_hard(libc::RLIMIT_DATA as c_int, *v)),
            "RLIMIT_NPROC" => Some(at_most_hard(libc::RLIMIT_NPROC as c_int, *v)),
            _ => None,
        })
        .collect()
}

/// The creation guard's writable roots and each protected pattern's tail, as bytes.
#[allow(clippy::type_complexity)]
pub(super) fn guard_strings(plan: &Plan) -> (Vec<&[u8]>, Vec<Vec<&[u8]>>) {
    let guard = &plan.creation_guard;
    let roots = (guard.roots.iter())
        .map(|p| p.as_os_str().as_bytes())
        .collect();
    let tails = (guard.protected.iter())
        .map(|g| g.tail.iter().map(|t| t.as_bytes()).collect())
        .collect();
    (roots, tails)
}
