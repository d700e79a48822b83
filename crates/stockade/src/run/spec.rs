//! The spec stage: the policy, the request and one scan of the workspace become the resolved
//! spec every later stage reads, with stockade's own state kept out of the command's reach,
//! the credentials' stand-ins put in, and the stores and the review view prepared.

use std::path::PathBuf;

use super::Context;
use crate::{claude_login, created_roots, credentials, journal, review_stage, Error, RunRequest};

/// What the spec stage hands on.
pub(super) struct Prepared {
    pub resolved: workspace::Resolved,
    /// The credential routes the proxy serves (mode proxy with credentials).
    pub credentials: Option<net::credential::Routes>,
    /// The per-run CA's directory, removed when dropped (after the run).
    pub _ca_dir: Option<credentials::CaDir>,
    /// A review or ephemeral run's view and change directory.
    pub review: Option<review_stage::Stage>,
}

/// Trust, the preset's state directories, the spec (the workspace scanned once), the
/// credentials, the stores and the review view, in that order.
pub(super) fn prepare(cx: &Context<'_>) -> Result<Prepared, Error> {
    let (policy, request) = (cx.policy, cx.request);
    // First: nothing of an unapproved workspace configuration is acted on.
    tracing::debug_span!("trust").in_scope(|| crate::check_trust(request))?;
    // A preset's state directories, made when missing (the spec needs them to exist).
    let state = tracing::debug_span!("state").entered();
    created_roots::make(policy, &request.invocation.home)?;
    // The spec, once: every later stage reads it, none computes it again.
    // A credential's source file is hidden from the command, as any other secret.
    let hidden = credentials::file_source_masks(&policy.credentials, &request.invocation.home)?;
    drop(state);
    let with_hidden;
    let spec_policy = if hidden.is_empty() {
        policy
    } else {
        let mut p = policy.clone();
        p.filesystem.deny_read.extend(hidden);
        with_hidden = p;
        &with_hidden
    };
    let mut resolved =
        tracing::debug_span!("spec").in_scope(|| resolve(spec_policy, request, cx.traits))?;
    // The real values, read on this side; the spec gets only stand-ins and the routes.
    let (credentials, _ca_dir) = match tracing::debug_span!("credentials")
        .in_scope(|| credential_stage(policy, request, &mut resolved.spec))?
    {
        Some((routes, dir)) => (Some(routes), dir),
        None => (None, None),
    };
    // The change store is never the command's; a review run gets its change directory
    // (removed again if the run does not start).
    tracing::debug_span!("stores").in_scope(|| {
        review_stage::mask_store(policy, request, &mut resolved.spec)?;
        journal::prepare(request, &mut resolved.spec)
    })?;
    let review = tracing::debug_span!("review").in_scope(|| {
        review_stage::prepare(
            policy,
            request,
            &mut resolved.spec,
            &resolved.watch.sweep.links,
            cx.id,
            cx.backend,
        )
    })?;
    Ok(Prepared {
        resolved,
        credentials,
        _ca_dir,
        review,
    })
}

/// The credentials stage: the real values read from their sources (refused when the command
/// could have written them), stand-ins and route URLs put in the spec's environment, and the
/// routes for the proxy, with the per-run CA's directory (removed when dropped). `None`
/// without credentials.
fn credential_stage(
    policy: &policy::Policy,
    request: &RunRequest,
    spec: &mut sandbox::Spec,
) -> Result<Option<(net::credential::Routes, Option<credentials::CaDir>)>, Error> {
    if policy.credentials.is_empty() {
        return Ok(None);
    }
    let ctx = credentials::Context {
        caller_env: &request.invocation.env,
        home: &request.invocation.home,
        writable_roots: &spec.writable_roots,
        cache: &request.credential_cache,
    };
    let loaded = credentials::load(&policy.credentials, &ctx)?;
    spec.credential_routes = true;
    for (k, v) in loaded.env {
        spec.env.retain(|(name, _)| *name != k);
        spec.env.push((k, v));
    }
    spec.env.sort();
    credentials::refuse_real_values_inside(&spec.env, &spec.argv, &loaded.routes)?;
    claude_login::refuse_inside(&spec.env, &spec.argv, &loaded.routes)?;
    for inside in &loaded.login_files {
        claude_login::place(inside, &spec.env, &spec.writable_roots)?;
    }
    if let Some(ca) = &loaded.ca_dir {
        spec.read_grants.push(ca.dir.clone());
    }
    Ok(Some((loaded.routes, loaded.ca_dir)))
}

/// The run's spec, computed once (the workspace scanned once), with the trust store kept
/// read-only when it lies in a writable root (a workspace or `--allow-write` that holds
/// `$HOME`): otherwise the sandbox could forge approvals for other workspaces.
pub(crate) fn resolve(
    policy: &policy::Policy,
    request: &RunRequest,
    traits: sandbox::Traits,
) -> Result<workspace::Resolved, Error> {
    let host = &workspace::RealHost;
    let invocation = &request.invocation;
    // The writable roots alone (no walk) tell whether the scan must protect stockade's state.
    let roots = workspace::writable_roots(policy, &invocation.place(), host)?;
    refuse_state_grants(policy, request, &roots)?;
    let mut state: Vec<PathBuf> = Vec::new();
    let made_before = !traits.creation_guard;
    if let Some(spelled) = request.trust_store.as_deref() {
        let dir = guard::trust::resolve_dir(spelled)?;
        refuse_replaceable_link_to_store(spelled, &dir, &roots, StateKind::TrustStore)?;
        state.push(make_before_run(made_before, dir, &roots)?);
    }
    // The user's policy directory, by its real path (`~/.config` may be a link into a
    // writable root, dotfiles kept with stow): whether this command reads the file or not,
    // no run may make or change it for the next one, nor rename an ancestor away.
    if let Some(spelled) = request
        .user_policy
        .as_deref()
        .and_then(std::path::Path::parent)
        .filter(|p| p.is_absolute())
    {
        let spelled = policy::normalize_lexically(spelled);
        let dir = review_stage::resolve_existing_part(&spelled);
        refuse_replaceable_link_to_store(&spelled, &dir, &roots, StateKind::UserPolicy)?;
        state.push(make_before_run(made_before, dir, &roots)?);
    }
    // The change stores: a command that could make one could plant change sets in it (one
    // that exists is masked, see `review_stage::mask_store`). Without a creation guard a
    // missing one in a writable root is made now, as the trust store is, and masked: a
    // plant would otherwise wait there until the sweep after the run, and a review run's
    // store, made after the walk, was swept away with the run's own change set as the
    // command's creation (found running review mode under gVisor).
    let mut stores = Vec::new();
    for spelled in review_stage::store_dirs(request) {
        let dir = review_stage::resolve_existing_part(&spelled);
        refuse_replaceable_link_to_store(&spelled, &dir, &roots, StateKind::ChangeStore)?;
        stores.push(make_before_run(made_before, dir, &roots)?);
    }
    state.extend(stores.iter().cloned());
    // The run journals likewise: a command that could write one could steer the sweep a
    // later run completes from it (see `journal`).
    if let Some(spelled) = journal::dir(request) {
        let dir = review_stage::resolve_existing_part(&spelled);
        refuse_replaceable_link_to_store(&spelled, &dir, &roots, StateKind::ChangeStore)?;
        state.push(dir);
    }
    // The journal directory exists before the scan (see `journal::make`).
    let journals = journal::make(request);
    let mut cache = walk_cache(journals.as_deref(), invocation, &roots);
    state.retain(|d| roots.iter().any(|w| d.starts_with(w)));
    if state.is_empty() {
        let resolved = workspace::Resolved::new_cached(policy, invocation, host, cache.as_mut())?;
        log_walk(&resolved);
        store_walk_cache(cache, journals.as_deref(), invocation, &resolved);
        return Ok(resolved);
    }
    let mut guarded = policy.clone();
    for dir in &state {
        let pattern = dir
            .to_str()
            .filter(|p| !p.contains(['*', '?', '[', ']', '{', '}']));
        let Some(pattern) = pattern else {
            return Err(Error::Usage {
                message: format!(
                    "stockade's state {} lies in a writable path and cannot be protected (its name is not UTF-8 or holds glob characters)",
                    dir.display()
                ),
                hint: "point XDG_STATE_HOME (or XDG_CONFIG_HOME, for the user policy) at a plain path outside the writable paths".into(),
            });
        };
        guarded.filesystem.deny_write.push(pattern.to_string());
    }
    let mut resolved = workspace::Resolved::new_cached(&guarded, invocation, host, cache.as_mut())?;
    // Read-only is not enough: renaming a parent would move the approvals away whole.
    for dir in &state {
        resolved.pin_ancestors(dir, host);
    }
    // The supervisor writes the run's journal there during the run (see `journal`).
    if let Some(spelled) = journal::dir(request) {
        resolved.own_dir(&review_stage::resolve_existing_part(&spelled), host);
    }
    // And a review run's change directory into the change store, after the walk (every run
    // has the store masked: nothing else writes there meanwhile). Without this the sweep of
    // a backend without a creation guard took the new change directory for the command's
    // creation and moved it away (found running an unprivileged caller's review under gVisor).
    for dir in &stores {
        resolved.own_dir(dir, host);
    }
    log_walk(&resolved);
    store_walk_cache(cache, journals.as_deref(), invocation, &resolved);
    Ok(resolved)
}

/// Refuses a grant at or beneath the caller's stockade state directory
/// ([`workspace::state_grants`]): the writable roots, the exact read grants (a glob's literal
/// base), and the workspace. The state directories are those the journal, trust and change
/// store code finds (`$XDG_STATE_HOME/stockade`, else `$HOME/.local/state/stockade`), the
/// default below `$HOME` besides (`stockade` run without `XDG_STATE_HOME` uses it), and the
/// default below the caller's home in `/etc/passwd` (a caller whose `HOME` points elsewhere),
/// each with its existing part canonical, as the grants are compared.
fn refuse_state_grants(
    policy: &policy::Policy,
    request: &RunRequest,
    roots: &[PathBuf],
) -> Result<(), Error> {
    // Without the trailing separator `resolve_existing_part` leaves on an existing path.
    let real = |p: &std::path::Path| -> PathBuf {
        review_stage::resolve_existing_part(p)
            .components()
            .collect()
    };
    use workspace::state_grants::GrantKind;
    let invocation = &request.invocation;
    let env = |name: &str| {
        (invocation.env.iter())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let home = env("HOME");
    let passwd_home = std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|t| workspace::state_grants::passwd_home(&t, invocation.uid));
    let mut state_dirs: Vec<PathBuf> = [
        sandbox::state_dir(env("XDG_STATE_HOME").as_deref(), home.as_deref()),
        sandbox::state_dir(None, home.as_deref()),
        sandbox::state_dir(None, passwd_home.as_deref().map(std::path::Path::as_os_str)),
    ]
    .into_iter()
    .flatten()
    .map(|d| real(&d))
    .collect();
    state_dirs.sort();
    state_dirs.dedup();
    // The agents' own state the presets keep below the default state directory: named
    // below its real path as spelled (a link there leads nowhere it exempts).
    let default = sandbox::state_dir(None, Some(invocation.home.as_os_str())).map(|d| real(&d));
    let agent_dirs: Vec<PathBuf> = (policy::PRESETS.iter())
        .flat_map(|p| p.state.iter())
        .filter_map(|s| s.strip_prefix("~/.local/state/stockade/"))
        .filter_map(|rest| default.as_ref().map(|d| d.join(rest)))
        .collect();
    let ctx = policy::PathContext {
        home: invocation.home.clone(),
        workspace: invocation.workspace.clone(),
        writable_roots: Vec::new(),
    };
    let mut grants: Vec<(GrantKind, PathBuf)> =
        vec![(GrantKind::Workspace, real(&invocation.workspace))];
    grants.extend(roots.iter().map(|r| (GrantKind::Write, real(r))));
    for entry in &policy.filesystem.allow_read {
        for pattern in policy::expand(entry, &ctx)? {
            let path = match &pattern {
                policy::PathPattern::Exact(p) => p.as_path(),
                policy::PathPattern::Glob(g) => g.base(),
            };
            grants.push((GrantKind::Read, real(path)));
        }
    }
    workspace::state_grants::refuse_state_grants(&grants, &state_dirs, &agent_dirs)?;
    Ok(())
}

/// The walk cache of this workspace ([`workspace::walk_cache`]), in the journal directory:
/// none when there is no journal directory, when it lies in one of this run's writable roots
/// (a command there, or an earlier one, could have written it: the run walks), or when the
/// caller is not the process's user (the file's owner is checked against the latter).
fn walk_cache(
    journals: Option<&std::path::Path>,
    invocation: &workspace::Request,
    roots: &[PathBuf],
) -> Option<workspace::WalkCache> {
    let dir = journals?;
    let euid = rustix::process::geteuid().as_raw();
    if invocation.uid != euid {
        return None;
    }
    let real = std::fs::canonicalize(dir).ok()?;
    if roots.iter().any(|w| policy::is_within(&real, w)) {
        tracing::debug!("walk: no cache: {} lies in a writable path", real.display());
        return None;
    }
    Some(workspace::WalkCache::load(
        dir,
        &invocation.workspace,
        euid,
        &binary_id(),
    ))
}

/// What identifies this binary for the walk cache: a cache another build wrote (with other
/// walk rules) is not read.
fn binary_id() -> String {
    use std::os::unix::fs::MetadataExt;
    let exe = std::fs::metadata("/proc/self/exe")
        .map(|m| {
            format!(
                "{}:{}:{}:{}.{}",
                m.dev(),
                m.ino(),
                m.size(),
                m.mtime(),
                m.mtime_nsec()
            )
        })
        .unwrap_or_default();
    format!("{} {exe}", env!("CARGO_PKG_VERSION"))
}

/// Writes what the planner's walk recorded for the next run, when it listed something new.
fn store_walk_cache(
    cache: Option<workspace::WalkCache>,
    journals: Option<&std::path::Path>,
    invocation: &workspace::Request,
    resolved: &workspace::Resolved,
) {
    let (Some(cache), Some(dir)) = (cache, journals) else {
        return;
    };
    let dirs = &resolved.watch.sweep.dirs;
    if !workspace::WalkCache::worth_storing(dirs) {
        return;
    }
    if let Err(e) = cache.store(dir, &invocation.workspace, dirs) {
        tracing::debug!("walk: cache not written in {}: {e}", dir.display());
    }
}

/// The planner's walk, for tests that must know the walk cache was used (or not).
fn log_walk(resolved: &workspace::Resolved) {
    let dirs = &resolved.watch.sweep.dirs;
    tracing::debug!(
        "walk: {} dirs from cache, {} listed, walked again {} times (changed during the walk)",
        dirs.from_cache,
        dirs.listed,
        dirs.rewalks
    );
}

/// Which of stockade's state a directory on the state list is (for the messages).
#[derive(Clone, Copy)]
enum StateKind {
    TrustStore,
    UserPolicy,
    ChangeStore,
}

impl StateKind {
    fn name(self) -> &'static str {
        match self {
            StateKind::TrustStore => "the trust store",
            StateKind::UserPolicy => "your user policy's directory",
            StateKind::ChangeStore => "stockade's state",
        }
    }
    fn variable(self) -> &'static str {
        match self {
            StateKind::UserPolicy => "XDG_CONFIG_HOME",
            StateKind::TrustStore | StateKind::ChangeStore => "XDG_STATE_HOME",
        }
    }
}

/// A state directory that is missing and lies in a writable root, before the run of a
/// backend without a creation guard (gVisor): made (0700, the caller's) so that the run gets
/// it read-only. Without the guard a protected path the command creates is only swept when
/// the run ends, and meanwhile a parallel command would read a user policy or a trust record
/// planted there (found by review). The directory is made before the command starts, and
/// resolved again after: what it resolves to is what is protected.
fn make_before_run(made_before: bool, dir: PathBuf, roots: &[PathBuf]) -> Result<PathBuf, Error> {
    if !made_before || dir.exists() || !roots.iter().any(|w| dir.starts_with(w)) {
        return Ok(dir);
    }
    // Through no link: a concurrent run whose writable root holds the way could exchange a
    // directory on it for a link (red team, issue 33).
    workspace::create_dir_all_no_links(&dir, 0o700).map_err(|e| Error::Io {
        what: format!(
            "make {} before the run (a path the run must not create)",
            dir.display()
        ),
        cause: e,
    })?;
    let again = review_stage::resolve_existing_part(&dir);
    if again != dir || !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Err(Error::Usage {
            message: format!(
                "{} changed while it was made before the run (now {})",
                dir.display(),
                again.display()
            ),
            hint: "run again; if it persists, make the directory yourself (`mkdir -p`)".into(),
        });
    }
    Ok(dir)
}

/// The trust store (or another state directory) reached through a symbolic link in a
/// writable root (`~/.local/state -> elsewhere` with `--allow-write ~`): the store itself can
/// be kept read-only, but the command could replace the link, and the next runs would read
/// and write approvals (or the policy) where it points (found by review). Refused, with the
/// real path to use instead.
fn refuse_replaceable_link_to_store(
    spelled: &std::path::Path,
    store: &std::path::Path,
    roots: &[PathBuf],
    kind: StateKind,
) -> Result<(), Error> {
    for a in spelled.ancestors() {
        // Only a link is looked into further: this runs before every run.
        if !std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()) {
            continue;
        }
        let Some(parent) = a.parent().and_then(|p| std::fs::canonicalize(p).ok()) else {
            continue;
        };
        if let Some(root) = roots.iter().find(|r| policy::is_within(&parent, r)) {
            return Err(Error::Usage {
                message: format!(
                    "{} {} is reached through the symbolic link {}, which the command could replace (it lies in {}, which it can write)",
                    kind.name(),
                    spelled.display(),
                    a.display(),
                    root.display()
                ),
                hint: format!(
                    "point {} at the real directory (it is {}), or leave {} out of the writable paths",
                    kind.variable(),
                    store.display(),
                    root.display()
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The walk cache is not read (nor written) when the journal directory that holds it lies
    /// in a writable root of the run (the home as the workspace, `--allow-write` of it or a
    /// parent): a command could have written it. Control: outside them it is.
    #[test]
    fn no_walk_cache_from_a_journal_directory_the_run_can_write() {
        let tmp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(tmp.path()).unwrap();
        let journals = home.join(".local/state/stockade/journal");
        std::fs::create_dir_all(&journals).unwrap();
        let uid = rustix::process::geteuid().as_raw();
        let invocation = workspace::Request {
            argv: vec!["true".into()],
            workspace: home.join("ws"),
            cwd: home.join("ws"),
            home: home.clone(),
            uid,
            gid: 0,
            env: Vec::new(),
        };
        for root in [&home, &home.join(".local"), &journals] {
            let roots = [home.join("ws"), root.clone()];
            assert!(
                super::walk_cache(Some(&journals), &invocation, &roots).is_none(),
                "a cache in {} was used with {} writable",
                journals.display(),
                root.display()
            );
        }
        let roots = [home.join("ws"), home.join("other")];
        assert!(super::walk_cache(Some(&journals), &invocation, &roots).is_some());
        let other = workspace::Request {
            uid: uid + 1,
            ..invocation
        };
        assert!(super::walk_cache(Some(&journals), &other, &roots).is_none());
    }
}
