//! runsc's own mount namespace: a root caller's detached, idmapped trees (a review run's
//! workspace as its copy-on-write view) and the masks' covers, each only on the file planned,
//! and why one of them failed.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use sandbox::{Kind, REVIEW_FIX};

use super::io_err;
use crate::{Error, Plan};

/// A root caller's detached trees for runsc's mount namespace, each with where it goes.
pub(super) struct Trees {
    pub(super) trees: Vec<(OwnedFd, std::ffi::CString)>,
    /// A review run under a disk bound: the tmpfs of its view's upper.
    pub(super) bounded_upper: Option<OwnedFd>,
}

/// The detached, idmapped trees of [`Plan::idmapped`], each with where it goes; a review
/// run's workspace is its copy-on-write view ([`review_view`]).
pub(super) fn idmapped_trees(plan: &Plan) -> Result<Trees, Error> {
    let id = crate::ROOT_CALLER_ID;
    let mut out = Vec::new();
    let mut bounded_upper = None;
    for i in &plan.idmapped {
        if let Some(view) = plan
            .review
            .as_ref()
            .filter(|r| r.workspace == i.path && !i.readonly)
        {
            let (tree, bounded) = review_view(view)?;
            bounded_upper = bounded;
            out.push((tree, path_cstring(&view.workspace)?));
            continue;
        }
        let fail = |cause: std::io::Error| {
            Error::Unavailable {
            cause: format!(
                "could not make an idmapped view of {} for the command's unprivileged id: {cause}",
                i.path.display()
            ),
            fix: "idmapped mounts need Linux 5.12 or later and a filesystem that supports them; run with --backend native".into(),
        }
        };
        // The owner's files appear as the command's id; and the other way round, so that
        // what runsc's file server (root) creates before giving it to the command's id has an
        // owner on disk at all (it ends up the owner's).
        // runsc's file server makes a file as root first (its fsuid is 0, and it has no
        // CAP_SETUID): root needs a mapping too, or every creation in a tree another user owns
        // fails with EOVERFLOW (found making a commit in a user's checkout as root). Root's
        // files there show as root's, which the command is not either.
        let map = |owner: u32| {
            if owner == id {
                format!("{owner} {id} 1\n")
            } else if owner == 0 {
                format!("{owner} {id} 1\n{id} {owner} 1\n")
            } else {
                format!("{owner} {id} 1\n{id} {owner} 1\n0 0 1\n")
            }
        };
        let userns = sys::parent::idmap_userns(&map(i.owner.0), &map(i.owner.1)).map_err(fail)?;
        // A tree that changed since it was planned (a symbolic link put in its place, or it is
        // gone) is refused as a changed path, never followed.
        let tree = sys::parent::idmapped_clone(&i.path, userns.fd(), i.readonly).map_err(|e| {
            match e.raw_os_error().and_then(changed_since_planned) {
                Some(what) => Error::Changed {
                    path: i.path.clone(),
                    what: what.into(),
                },
                None => fail(e),
            }
        })?;
        let target = std::ffi::CString::new(i.path.as_os_str().as_encoded_bytes())
            .map_err(|e| fail(std::io::Error::other(e)))?;
        out.push((tree, target));
    }
    Ok(Trees {
        trees: out,
        bounded_upper,
    })
}

fn path_cstring(path: &Path) -> Result<std::ffi::CString, Error> {
    std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| Error::Changed {
        path: path.to_path_buf(),
        what: "its name holds a NUL byte".into(),
    })
}

/// A root caller's review view: a privileged overlay (this process's) over an idmapped,
/// read-only view of the workspace in which its owner's files are the command's id's and
/// every other id is itself (so a file of any owner can be copied up), its writes landing in
/// the change directory's `upper/` (or, under a disk bound, a tmpfs's, whose mount comes back
/// too), as the native backend makes it for its supervisor. runsc's file server creates as
/// root and then gives the file to the command's id: the upper is not idmapped, so both
/// owners are the disk's.
fn review_view(view: &crate::ReviewView) -> Result<(OwnedFd, Option<OwnedFd>), Error> {
    let id = crate::ROOT_CALLER_ID;
    let fail = |cause: std::io::Error| Error::Unavailable {
        cause: format!(
            "could not make a copy-on-write view of {} (review mode): {cause}",
            view.workspace.display()
        ),
        fix: REVIEW_FIX.into(),
    };
    let bounded = match view.disk_bytes {
        Some(bytes) => {
            let size = std::ffi::CString::new(bytes.to_string()).map_err(std::io::Error::other);
            let size = size.map_err(fail)?;
            let options = [(c"size", size.as_c_str()), (c"mode", c"0700")];
            Some(
                sys::parent::bounded_upper(&options, view.upper_mode, Some((id, id)))
                    .map_err(fail)?,
            )
        }
        None => None,
    };
    let userns = sys::parent::idmap_userns(
        &sys::parent::review_lower_map(view.owner.0, id),
        &sys::parent::review_lower_map(view.owner.1, id),
    )
    .map_err(fail)?;
    let layers = bounded.as_ref().map(|(_, u, w)| (u.as_fd(), w.as_fd()));
    let tree = sys::parent::overlay_clone(&view.workspace, userns.fd(), &view.changes, layers)
        .map_err(|e| match e.raw_os_error().and_then(changed_since_planned) {
            Some(what) => view_changed(view, what),
            None => fail(e),
        })?;
    Ok((tree, bounded.map(|(mnt, _, _)| mnt)))
}

/// The detached covers of [`Plan::covers`], ready for runsc's own mount namespace.
pub(super) fn prepared_covers(plan: &Plan) -> Result<sys::mountns::Covers, Error> {
    let mut covers = Vec::with_capacity(plan.covers.len());
    for c in &plan.covers {
        covers.push(sys::mountns::Cover {
            target: std::ffi::CString::new(c.path.as_os_str().as_encoded_bytes())
                .map_err(|e| io_err("cover a masked path")(std::io::Error::other(e)))?,
            dir: c.kind == Kind::Dir,
            readable: c.readable,
            expect: c.identity,
        });
    }
    if plan.caller.rootless {
        let view = match &plan.review {
            Some(r) => Some(sys::mountns::View {
                lower: path_cstring(&r.workspace)?,
                changes: path_cstring(&r.changes)?,
                disk: r.disk_bytes.map(|b| {
                    (
                        std::ffi::CString::new(b.to_string()).unwrap_or_default(),
                        r.upper_mode,
                    )
                }),
            }),
            None => None,
        };
        sys::mountns::Covers::unprivileged(&covers, view)
    } else {
        sys::mountns::Covers::prepare(&covers)
    }
    .map_err(io_err("prepare the masks' covers"))
}

/// Why cover `index` of `plan` failed at runsc's start (see [`sys::mountns::Covers::failed`]).
pub(super) fn cover_failed(plan: &Plan, index: usize, errno: sys::raw::Errno) -> Error {
    let path = plan
        .covers
        .get(index)
        .map(|c| c.path.clone())
        .unwrap_or_default();
    let what = match errno.0 {
        libc::ESTALE => "it is another file than the one planned: moved since (a directory on its way exchanged or renamed by another program); a mask goes only on the file the run planned".to_string(),
        e => changed_since_planned(e).map_or_else(
            || format!("it could not be covered: {errno}"),
            str::to_owned,
        ),
    };
    Error::Changed { path, what }
}

/// A layer of the view changed since it was planned: the workspace or the run's change
/// directory (its `upper` or `work`), which of them the lookup does not say.
fn view_changed(view: &crate::ReviewView, what: &str) -> Error {
    Error::Changed {
        path: view.workspace.clone(),
        what: format!(
            "it, or the run's change directory {} (its upper or work), changed: {what}",
            view.changes.display()
        ),
    }
}

/// Why an unprivileged caller's review view could not be made by runsc's child.
pub(super) fn view_failed(plan: &Plan, errno: sys::raw::Errno) -> Error {
    let path = plan
        .review
        .as_ref()
        .map(|r| r.workspace.clone())
        .unwrap_or_default();
    match (changed_since_planned(errno.0), &plan.review) {
        (Some(what), Some(view)) => view_changed(view, what),
        _ => Error::Unavailable {
            cause: format!(
                "could not make a copy-on-write view of {} (review mode): {errno}",
                path.display()
            ),
            fix: REVIEW_FIX.into(),
        },
    }
}

/// What an errno of opening a planned path says changed since it was planned: it is gone,
/// or a symbolic link is on its way (never followed).
fn changed_since_planned(errno: i32) -> Option<&'static str> {
    match errno {
        libc::ENOENT | libc::ENOTDIR => Some("it is gone (moved away since it was planned)"),
        libc::ELOOP => Some("a symbolic link is on its way"),
        _ => None,
    }
}
