//! Review and ephemeral runs (`--review`, `--ephemeral`, `review = true`): the run's change
//! directory is made before the plan, the command sees the workspace through a copy-on-write
//! view whose writes land there (the backend's job, from [`sandbox::Review`]), and after the
//! run the change set is read, flagged and sealed with its digest (`stockade changes`,
//! `diff`, `apply`, `discard`), or thrown away for an ephemeral run.
//!
//! Every run, review or not, has the change store masked: a command must neither read what
//! other runs changed nor tamper with a change set waiting for review.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use policy::WorkspaceMode;
use serde::Serialize;
use workspace::changes::{ChangeKind, FlagRules, RunDir, RunMeta, Store};

use crate::{Error, RunRequest};

/// What a review or ephemeral run changed, as the report and the CLI tell it.
#[derive(Debug, Clone, Serialize)]
pub struct ReviewSummary {
    /// `review` or `ephemeral`.
    pub mode: &'static str,
    /// The change set's run id (`stockade changes RUN`).
    pub run_id: String,
    /// Where the change set waits (review), or waited (ephemeral: removed).
    pub dir: PathBuf,
    /// Entries added.
    pub added: usize,
    /// Files changed (their content or their type).
    pub modified: usize,
    /// Entries deleted.
    pub deleted: usize,
    /// Directories replaced whole (what the workspace had below them is dropped).
    pub replaced_dirs: usize,
    /// Entries whose permission bits alone changed.
    pub mode_changes: usize,
    /// Entries carrying a flag (`stockade apply` refuses them unless accepted).
    pub flagged: usize,
    /// Bytes of the files in the change set.
    pub bytes: u64,
    /// Whether the change set was discarded (ephemeral runs).
    pub discarded: bool,
    /// Under `--disk`: the bound, and whether the run reached it (writes past it failed with
    /// ENOSPC inside).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
    /// Whether the run reached `disk_bytes`.
    pub disk_bound_reached: bool,
}

/// A review or ephemeral run whose change set could not be read and sealed after the command
/// ended: the run's exit code and end are recorded all the same, with this beside them.
#[derive(Debug, Clone, Serialize)]
pub struct ReviewFailure {
    /// `review` or `ephemeral`.
    pub mode: &'static str,
    /// The error's code (`E_...`), as a refusal would give it.
    pub code: &'static str,
    /// The error's kind (`policy`, `io`, ...).
    pub kind: &'static str,
    /// What failed, in words.
    pub message: String,
}

impl ReviewFailure {
    pub(crate) fn new(mode: WorkspaceMode, error: &Error) -> ReviewFailure {
        ReviewFailure {
            mode: mode.as_str(),
            code: error.code(),
            kind: error.kind(),
            message: error.to_string(),
        }
    }
}

/// The change store of this caller: `$XDG_STATE_HOME/stockade/changes`.
pub fn store_dir(request: &RunRequest) -> Option<PathBuf> {
    let env = |name: &str| {
        (request.invocation.env.iter())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    workspace::changes::default_store_dir(env("XDG_STATE_HOME").as_deref(), env("HOME").as_deref())
}

/// The change stores a run must keep the command away from: the one this run names
/// (`$XDG_STATE_HOME`) and the one a caller without it would use (`~/.local/state`), since
/// `stockade apply` may run with either.
pub(crate) fn store_dirs(request: &RunRequest) -> Vec<PathBuf> {
    let env = |name: &str| {
        (request.invocation.env.iter())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let named = store_dir(request);
    let home_store = workspace::changes::default_store_dir(None, env("HOME").as_deref());
    let mut dirs: Vec<PathBuf> = named.into_iter().chain(home_store).collect();
    dirs.dedup();
    dirs
}

/// Hides the change stores ([`store_dirs`]) from the command (every run): unreadable and
/// unwritable. A store is masked only if it exists; one missing that the command could make
/// (in a writable root) is protected from being made instead (`resolve`), and the store a
/// review run is about to use is made now, before anything runs, so that it is masked
/// too: otherwise the command could swap its own change set (found by review).
pub(crate) fn mask_store(
    policy: &policy::Policy,
    request: &RunRequest,
    spec: &mut sandbox::Spec,
) -> Result<(), Error> {
    for (i, dir) in store_dirs(request).iter().enumerate() {
        if i == 0 && policy.workspace_mode != WorkspaceMode::Direct {
            Store::open(dir)?;
        }
        let Ok(dir) = std::fs::canonicalize(dir) else {
            continue;
        };
        // Below a directory the sandbox replaces (its private /tmp) the store is out of sight
        // already, and there is nothing to mount over, unless a writable root brings it back.
        let visible = !workspace::under_replaced(&dir)
            || spec
                .writable_roots
                .iter()
                .any(|w| policy::is_within(&dir, w));
        if !visible || spec.masks.iter().any(|m| m.path == dir) {
            continue;
        }
        spec.masks.push(sandbox::Mask {
            path: dir,
            kind: sandbox::Kind::Dir,
            readable: false,
        });
    }
    Ok(())
}

/// `path` with its longest existing prefix canonical (the rest as spelled): where a path that
/// does not exist yet would be made.
pub fn resolve_existing_part(path: &std::path::Path) -> PathBuf {
    for a in path.ancestors() {
        if let Ok(real) = std::fs::canonicalize(a) {
            let rest = path.strip_prefix(a).unwrap_or(std::path::Path::new(""));
            return real.join(rest);
        }
    }
    path.to_path_buf()
}

/// A review or ephemeral run's change directory, from before the plan until after the run.
/// Dropped before [`Stage::finish`] (a refusal after the change directory was made): the
/// directory is removed, nothing having run in it.
pub(crate) struct Stage {
    run: Option<RunDir>,
    mode: WorkspaceMode,
    rules: FlagRules,
    disk_bytes: Option<u64>,
}

/// Makes the run's change directory and points the spec's workspace view at it; `None` in
/// direct mode. Refused where the workspace is not writable (nothing to review), or the
/// backend cannot make the view.
pub(crate) fn prepare(
    policy: &policy::Policy,
    request: &RunRequest,
    spec: &mut sandbox::Spec,
    links: &std::collections::BTreeMap<std::path::PathBuf, workspace::ProtectedLink>,
    run_id: &str,
    backend: &dyn sandbox::Backend,
) -> Result<Option<Stage>, Error> {
    let mode = policy.workspace_mode;
    if mode == WorkspaceMode::Direct {
        if policy.limits.disk.is_some() {
            return Err(Error::Usage {
                message: "--disk bounds what a review or ephemeral run writes into its view of the workspace; this run writes the workspace directly".into(),
                hint: "add --review or --ephemeral, or leave out --disk (and `disk` under [limits])".into(),
            });
        }
        return Ok(None);
    }
    let flag = format!("--{}", mode.as_str());
    let views = backend.traits().views;
    if views == sandbox::Views::None {
        return Err(Error::Run(sandbox::RunError::Unavailable {
            what: "a copy-on-write view of the workspace (review mode)",
            cause: format!(
                "the {} backend cannot give the command a reviewed view of the workspace yet",
                backend.name()
            ),
            fix: format!("run {flag} with another backend (native, gvisor, podman or docker), or without {flag}"),
        }));
    }
    let workspace = spec.workspace.clone();
    if !spec.writable_roots.contains(&workspace) {
        return Err(Error::Usage {
            message: format!(
                "{flag}: the workspace {} is read-only under this policy, so there is nothing to review",
                workspace.display()
            ),
            hint: format!("use a profile that writes the workspace (--profile workspace-write), or leave out {flag}"),
        });
    }
    // The view's lower layer is the workspace's own mount alone (overlayfs does not follow
    // mounts): below a mount point inside it the command would read the directory the mount
    // hides, which the walk never saw (it sees the mounted filesystem), nor masked (red team
    // of review under gVisor: a `.env` under a tmpfs mounted in the workspace was read, on
    // both backends). Refused, naming it.
    let below = sys::mountinfo::mounts_below(&workspace).map_err(|e| Error::Io {
        what: "read /proc/self/mountinfo (mounts inside the workspace)".into(),
        cause: e,
    })?;
    if let Some(mount) = below.first() {
        return Err(Error::Run(sandbox::RunError::Unavailable {
            what: "a copy-on-write view of the workspace (review mode)",
            cause: format!(
                "{} is a mount point inside the workspace ({} in all): the view would show the directory it hides, not what is mounted there, and nothing under it was checked for secrets",
                mount.display(),
                below.len()
            ),
            fix: format!("unmount what is mounted inside the workspace, or run without {flag}"),
        }));
    }
    let Some(store) = store_dir(request) else {
        return Err(Error::Usage {
            message: format!("{flag}: the change store cannot be located: neither XDG_STATE_HOME nor HOME is an absolute path"),
            hint: "set HOME (or XDG_STATE_HOME) to an absolute path".into(),
        });
    };
    // The change set is made, read and applied through `openat2` only (beneath the store and
    // the workspace, through no link): where a seccomp filter around stockade refuses it (an
    // older container runtime's profile, a sandbox stockade runs in), refuse before anything
    // runs, naming it, instead of an internal error at the change store.
    if let Some(e) = sys::raw::openat2_refused() {
        return Err(Error::Run(sandbox::RunError::Unavailable {
            what: "openat2 (review mode)",
            cause: format!("{flag} needs openat2, which this process is refused ({e}): a seccomp profile around stockade (an older Docker or containerd default), or a kernel before 5.6"),
            fix: format!("allow openat2 in the outer seccomp profile (recent Docker and containerd default profiles allow it), or leave out {flag}: direct runs work without it"),
        }));
    }
    let store = Store::open(&store)?;
    let ws_meta = std::fs::metadata(&workspace).map_err(|e| Error::Workspace {
        path: workspace.clone(),
        cause: e,
    })?;
    let store_dev = std::fs::metadata(store.path())
        .map_err(|e| Error::Io {
            what: format!("read the change store {}", store.path().display()),
            cause: e,
        })?
        .dev();
    let caller = (spec.caller.uid, spec.caller.gid);
    let meta = RunMeta::new(
        run_id,
        &workspace,
        &spec.argv,
        mode == WorkspaceMode::Ephemeral,
        caller,
        (ws_meta.uid(), ws_meta.gid()),
        &spec.protected,
        &spec
            .masks
            .iter()
            .map(|m| m.path.clone())
            .collect::<Vec<_>>(),
    );
    // A root caller's sandbox writes as an id no account has (see `native::plan`): the view's
    // top directory is that id's, as the idmapped workspace is in direct mode. Under a
    // container engine it writes as the workspace's owner: the top directory is the owner's,
    // as the workspace is.
    let upper_owner = (spec.caller.uid == 0).then_some(match views {
        sandbox::Views::WorkspaceOwner => (ws_meta.uid(), ws_meta.gid()),
        _ => (native::ROOT_CALLER_HOST_ID, native::ROOT_CALLER_HOST_ID),
    });
    let mut run = store.create_run(&meta, upper_owner, ws_meta.mode() & 0o7777)?;
    spec.review = Some(sandbox::Review {
        changes: run.path().to_path_buf(),
        same_filesystem: store_dev == ws_meta.dev(),
    });
    // A writable path inside the workspace would be mounted over the view, and its writes
    // would reach the host unreviewed: inside the view it is writable anyway.
    spec.writable_roots
        .retain(|w| *w == workspace || !policy::is_within(w, &workspace));
    review_git_internals(spec, &workspace);
    let rules = FlagRules::new(spec.protected.clone(), meta.masked.clone());
    // The creation guard's patterns, as the plan gets them, recorded with the change set:
    // what they refuse is flagged `protected` (by `finish`, `changes` and `apply`) whether or
    // not the run mediated its creations (see `native::plan::creations`).
    run.record_guard(guard_rules(spec))?;
    // What a direct run's sweep checks after the run, which never sweeps a view's upper:
    // the `deny_write` globs the guard cannot express, and where each protected symbolic
    // link leads (existing or dangling): what the run makes there is flagged `protected`.
    run.record_checks(workspace::changes::RecordedChecks {
        sweep_only: spec.guard_sweep_only.clone(),
        link_targets: workspace::changes::link_targets(
            &workspace,
            links.keys().chain(&meta.protected),
        ),
    })?;
    Ok(Some(Stage {
        run: Some(run),
        mode,
        rules,
        disk_bytes: spec.limits.disk_bytes,
    }))
}

/// The spec's creation-guard patterns as the change set records them.
fn guard_rules(spec: &sandbox::Spec) -> Vec<workspace::changes::GuardRule> {
    (spec.guard.iter())
        .map(|g| workspace::changes::GuardRule {
            base: g.base.clone(),
            tail: g.tail.clone(),
        })
        .collect()
}

/// Git's own files in the reviewed workspace are reviewed instead of kept read-only: git works
/// whole in the view (commits, branches, `git worktree add`, `git submodule update`, `git
/// remote add`), and everything it writes below a `.git` is flagged `git-internals` by the
/// review, applied only when accepted. The policy's other protected paths stay as in direct
/// mode.
fn review_git_internals(spec: &mut sandbox::Spec, workspace: &std::path::Path) {
    let git = |p: &std::path::Path| {
        p.strip_prefix(workspace)
            .is_ok_and(|rel| rel.components().any(|c| c.as_os_str() == ".git"))
    };
    spec.protected.retain(|p| !git(p));
    spec.pins.retain(|p| !git(p));
    spec.guard.retain(|g| {
        let tail_in_git = g.tail.iter().any(|t| t == ".git");
        !(policy::is_within(&g.base, workspace) && (git(&g.base) || tail_in_git))
    });
}

impl Stage {
    /// After the run: the change set read, flagged and sealed (review), or removed
    /// (ephemeral). A run that did not start leaves nothing.
    /// `bounded`: under `--disk`, the filesystem the view's upper lived on.
    pub(crate) fn finish(
        mut self,
        started: bool,
        bounded: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    ) -> Result<Option<ReviewSummary>, Error> {
        let Some(mut run) = self.run.take() else {
            return Ok(None);
        };
        if !started {
            run.discard()?;
            return Ok(None);
        }
        let ephemeral = self.mode == WorkspaceMode::Ephemeral;
        let (set, reached) = match &bounded {
            Some(fd) => {
                use std::os::fd::AsFd;
                let reached = workspace::changes::bound_reached(fd.as_fd());
                let set = run.finish_from(fd.as_fd(), &self.rules, !ephemeral);
                (set, reached)
            }
            None => (run.finish(&self.rules), false),
        };
        // A change set that cannot be read stays in the store, saying why (`stockade runs`).
        let set = match set {
            Ok(s) => s,
            Err(e) => {
                let _ = run.record_finish_error(&e.to_string());
                return Err(e.into());
            }
        };
        let count = |f: fn(&ChangeKind) -> bool| set.entries.iter().filter(|c| f(&c.kind)).count();
        let summary = ReviewSummary {
            mode: self.mode.as_str(),
            run_id: run.id().to_string(),
            dir: run.path().to_path_buf(),
            added: count(|k| matches!(k, ChangeKind::Added)),
            modified: count(|k| matches!(k, ChangeKind::Modified | ChangeKind::TypeChanged)),
            deleted: count(|k| matches!(k, ChangeKind::Deleted)),
            replaced_dirs: count(|k| matches!(k, ChangeKind::ReplacedDir)),
            mode_changes: count(|k| matches!(k, ChangeKind::ModeChanged { .. })),
            flagged: set.entries.iter().filter(|c| !c.flags.is_empty()).count(),
            bytes: set.entries.iter().map(|c| c.size).sum(),
            discarded: ephemeral || set.entries.is_empty(),
            disk_bytes: self.disk_bytes,
            disk_bound_reached: reached,
        };
        // Nothing to review: nothing is kept.
        if ephemeral || set.entries.is_empty() {
            run.discard()?;
        }
        Ok(Some(summary))
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        if let Some(run) = self.run.take() {
            let _ = run.discard();
        }
    }
}

/// Files an unprivileged caller's review run cannot modify: an overlay in a user namespace
/// copies a file up with its owner and group, and fails (`EOVERFLOW`) for ids the namespace
/// does not map (only the caller's own). Told before the run, with up to `limit` examples.
pub fn not_copyable(
    policy: &policy::Policy,
    request: &RunRequest,
    limit: usize,
) -> Option<(usize, Vec<PathBuf>)> {
    let inv = &request.invocation;
    if policy.workspace_mode == WorkspaceMode::Direct || inv.uid == 0 {
        return None;
    }
    // Remembered by directory in the caller's change store (which only the caller can
    // write, and no run can see).
    let store = store_dir(request).filter(|d| d.is_dir());
    let found = workspace::changes::not_copyable_cached(
        &inv.workspace,
        inv.uid,
        inv.gid,
        limit,
        store.as_deref(),
    )
    .ok()?;
    (found.0 > 0).then_some(found)
}
