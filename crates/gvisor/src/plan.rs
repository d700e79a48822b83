//! [`Gvisor::plan_with`]: a run's spec lowered for runsc, step by step: a root caller's
//! idmapped views ([`root_views`]) and its way through directories its id cannot enter
//! ([`root_reach`]), an unprivileged caller's masks runsc can start with ([`keep_maskable`]),
//! the git dirs staged ([`stage_git_dirs`]) and the count of mounts ([`check_mount_count`]),
//! where the command starts ([`cwd_fallback`]), the OCI config ([`bundle::config`]), the
//! destinations checked again before the start ([`destinations`]), a review run's view
//! ([`review_view`]), the covers, the cgroup and the limits judged.

use std::path::{Path, PathBuf};

use sandbox::Spec;

use crate::{
    bundle, covers, gitstage, run, still_planned, unreachable_cwd, untraversable, usage,
    view_identities, Caller, Error, Gvisor, Idmapped, Owned, Plan, Reach, ReviewView, MAX_MOUNTS,
};

impl Gvisor {
    /// Lowers `spec` for a run named `run_id` (pure but for the host lookups of `stat`).
    pub fn plan_with(
        &self,
        spec: &Spec,
        run_id: &str,
        stat: &dyn Fn(&Path) -> Option<Owned>,
    ) -> Result<Plan, Error> {
        let caller = self.caller(run_id);
        let mut spec = spec.clone();
        // A root caller's writable roots, and a home only root can enter, are seen through
        // idmapped mounts that give their owner's files to the command's id.
        let mut idmapped = if caller.rootless {
            Vec::new()
        } else {
            root_views(&spec, stat)
        };
        // A root caller's way to granted paths below directories its id cannot enter.
        let (reach, granted) = if caller.rootless {
            (Reach::default(), Vec::new())
        } else {
            root_reach(&mut spec, &mut idmapped, stat)
        };
        if caller.rootless {
            keep_maskable(&mut spec, stat)?;
        }
        // Existing git dirs whose config git must be able to rewrite (see `gitstage`): each
        // of their subdirectories is a mount too.
        let staged = stage_git_dirs(&spec, &caller);
        check_mount_count(&spec, &staged)?;
        let cwd_fallback = cwd_fallback(&spec, &caller, &reach, &granted, &idmapped, stat);
        if cwd_fallback.is_some() {
            spec.cwd = spec.workspace.clone();
        }
        let config = bundle::config(
            &spec,
            &caller,
            &reach,
            &staged,
            Path::new(run::BUNDLE_PLACEHOLDER),
        )?;
        let destinations = destinations(&spec, &staged, &reach, stat);
        idmapped.sort_by_key(|i| i.path.components().count());
        let review = review_view(&spec, stat)?;
        let mut covers = covers(&spec);
        if let Some(r) = &spec.review {
            view_identities(&mut covers, &spec.workspace, r.same_filesystem);
        }
        let group = bundle::group_plan(&spec, &caller);
        let judged = judged(&spec, &caller);
        let control_held = !(caller.rootless && spec.network == sandbox::Network::Host);
        Ok(Plan {
            runsc: self.runsc.clone(),
            platform: self.platform,
            caller,
            network: match spec.network {
                // With a held namespace (proxy) or the host's: the Sentry's sockets are the
                // host kernel's, in the namespace runsc runs in.
                sandbox::Network::Host | sandbox::Network::Proxy { .. } => "host",
                sandbox::Network::None => "none",
            },
            proxy: match spec.network {
                sandbox::Network::Proxy { addr } => Some(addr),
                _ => None,
            },
            control_held,
            config,
            destinations,
            idmapped,
            covers,
            staged,
            review,
            writable_roots: spec.writable_roots.clone(),
            timeout: spec.limits.timeout,
            group,
            judged,
            cwd_fallback,
        })
    }
}

/// The view of `path` with its owner's files the command's own.
fn idmapped_view(
    path: &Path,
    readonly: bool,
    stat: &dyn Fn(&Path) -> Option<Owned>,
) -> Option<Idmapped> {
    stat(path).map(|o| Idmapped {
        path: path.to_path_buf(),
        owner: (o.uid, o.gid),
        readonly,
    })
}

/// A root caller's idmapped views: its writable roots, its read grants below `/tmp`
/// (read-only) and a home only root can enter (read-only).
fn root_views(spec: &Spec, stat: &dyn Fn(&Path) -> Option<Owned>) -> Vec<Idmapped> {
    let mut idmapped = Vec::new();
    idmapped.extend(
        spec.writable_roots
            .iter()
            .filter_map(|r| idmapped_view(r, false, stat)),
    );
    // Read grants below /tmp are bound into the private /tmp (`bundle`): read-only,
    // with their owner's files the command's own as under the native backend.
    idmapped.extend(
        spec.tmp_read_grants()
            .into_iter()
            .filter_map(|g| idmapped_view(g, true, stat)),
    );
    let home = spec
        .env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| PathBuf::from(v));
    if let Some(home) = home.filter(|h| h.is_absolute()) {
        let covered = spec.writable_roots.iter().any(|w| home.starts_with(w));
        if let Some(o) = stat(&home).filter(|o| o.kind == sandbox::Kind::Dir) {
            if !covered && o.mode & 0o001 == 0 {
                idmapped.push(Idmapped {
                    path: home,
                    owner: (o.uid, o.gid),
                    readonly: true,
                });
            }
        }
    }
    idmapped
}

/// A root caller's way to granted paths below directories its id cannot enter ([`Reach`]),
/// and the paths it is granted: a read grant bound below a cover gets an idmapped view of
/// its own, and what a cover hides leaves `spec`'s protected paths and pins.
fn root_reach(
    spec: &mut Spec,
    idmapped: &mut Vec<Idmapped>,
    stat: &dyn Fn(&Path) -> Option<Owned>,
) -> (Reach, Vec<PathBuf>) {
    // Below /tmp, /dev and /proc the Sentry's own directories lead there (0755).
    let private = |p: &Path| ["/tmp", "/dev", "/proc"].iter().any(|r| p.starts_with(r));
    let home = idmapped.iter().filter(|i| i.readonly).map(|i| &i.path);
    let granted: Vec<PathBuf> = (spec.writable_roots.iter())
        .chain(&spec.read_grants)
        .chain(home)
        .filter(|g| !private(g))
        .cloned()
        .collect();
    let reach = Reach::plan(&granted, &spec.writable_roots, idmapped, stat);
    // A read grant bound below a cover is opened as the writable roots are (an
    // idmapped clone made without following a link, attached in runsc's own mount
    // namespace), never by its path at runsc's start: a concurrent run could swap a
    // directory on its way for a link after the last check, and runsc would bind
    // where it leads (red team: the rest of a covered 0700 home, read).
    idmapped.extend(
        reach
            .binds
            .iter()
            .filter_map(|g| idmapped_view(g, true, stat)),
    );
    // What a cover hides needs no mount of its own (a protected path there was out
    // of the command's reach, and stays so).
    spec.protected
        .retain(|p| reach.hides(p, &granted).is_none());
    spec.pins.retain(|p| reach.hides(p, &granted).is_none());
    (reach, granted)
}

/// An unprivileged caller's masks, those `runsc --rootless` cannot start with left out where
/// that is safe; refused where it is not.
fn keep_maskable(spec: &mut Spec, stat: &dyn Fn(&Path) -> Option<Owned>) -> Result<(), Error> {
    // runsc --rootless cannot start with a mount over a path the caller cannot open.
    // Left unmasked, such a path stays out of reach inside only if the command cannot
    // make it readable (uid 0 there is the caller, without capabilities: it can chmod
    // what the caller owns) nor reach into it by name (a directory it may search):
    // anything else is refused, never dropped (found by review: a mode-000 `.env`
    // of the caller's was `chmod`ed back and read).
    let me = rustix::process::geteuid().as_raw();
    let mut kept = Vec::new();
    for m in std::mem::take(&mut spec.masks) {
        // Only a file the caller cannot read, and still the one planned, is left
        // unmasked: one gone or replaced since (a directory on its way exchanged by
        // another process) is kept, and refused at the start (its cover finds
        // another file or none). Dropped, it was read where the exchange moved it.
        let unreadable = matches!(
            rustix::fs::access(&m.path, rustix::fs::Access::READ_OK),
            Err(rustix::io::Errno::ACCESS)
        );
        if !unreadable || !still_planned(spec, &m.path) {
            kept.push(m);
            continue;
        }
        let owned = stat(&m.path).is_some_and(|o| o.uid == me);
        let searchable = m.kind == sandbox::Kind::Dir
            && rustix::fs::access(&m.path, rustix::fs::Access::EXEC_OK).is_ok();
        if owned || searchable {
            return Err(Error::CannotMask {
                cause: format!(
                    "runsc --rootless cannot mask {} (you cannot read it), and unmasked the command could {}",
                    m.path.display(),
                    if owned { "make it readable (it is yours)" } else { "reach what it holds by name" }
                ),
                fix: format!(
                    "make it readable by you (chmod u+r {}) so it can be masked, or run with --backend native",
                    m.path.display()
                ),
            });
        }
    }
    spec.masks = kept;
    Ok(())
}

/// The existing git dirs whose top level the command sees as a staged copy ([`gitstage`]).
fn stage_git_dirs(spec: &Spec, caller: &Caller) -> Vec<gitstage::Staged> {
    // A root caller's command gets the copies: only git dirs of the workspace's owner,
    // whose files its idmapped view gives the command, are staged.
    if caller.rootless {
        gitstage::plan(spec, None)
    } else {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(&spec.workspace) {
            Ok(m) => gitstage::plan(spec, Some(m.uid())),
            Err(_) => Vec::new(),
        }
    }
}

/// The run's masks, protected paths, pins and staged git dirs' subdirectories: each a mount,
/// refused above [`MAX_MOUNTS`].
fn check_mount_count(spec: &Spec, staged: &[gitstage::Staged]) -> Result<(), Error> {
    // runsc starts no sandbox over more mounts than about 240 (here: 237 masks started, 242
    // failed with "cannot read client sync file", untyped), and a run can plant dotenv
    // files for the next (red team issue 32d: 250 `.env` under `.git/junk`): refused,
    // typed, before anything starts.
    let mounts = spec.masks.len()
        + spec.protected.len()
        + spec.pins.len()
        + staged.iter().map(|s| s.subdirs.len()).sum::<usize>();
    if mounts > MAX_MOUNTS {
        return Err(Error::Unavailable {
            cause: format!(
                "{mounts} paths to mask, protect or pin ({} masked or read as empty): runsc starts no sandbox with more than about {MAX_MOUNTS}",
                spec.masks.len()
            ),
            fix: "run with --backend native (no such limit), or remove or move the dotenv files and other masked files that a run left in the workspace (`stockade policy show` lists what is masked)".into(),
        });
    }
    Ok(())
}

/// Why the command starts in the workspace rather than in the caller's directory, if it does:
/// the Sentry does not show it, a cover hides it, or a root caller's command cannot enter it.
fn cwd_fallback(
    spec: &Spec,
    caller: &Caller,
    reach: &Reach,
    granted: &[PathBuf],
    idmapped: &[Idmapped],
    stat: &dyn Fn(&Path) -> Option<Owned>,
) -> Option<String> {
    // Below /tmp the way to a granted path is the private /tmp's own directories (made
    // for the bind, mode 0755), not the host's: only the grant and below are the host's.
    let tmp_base = (spec.cwd.starts_with("/tmp"))
        .then(|| {
            (spec.writable_roots.iter())
                .chain(spec.tmp_read_grants())
                .filter(|g| spec.cwd.starts_with(g))
                .min_by_key(|g| g.components().count())
                .cloned()
        })
        .flatten();
    let sentrys_own = Some(Owned {
        kind: sandbox::Kind::Dir,
        uid: 0,
        gid: 0,
        mode: 0o755,
    });
    // A cover and the way through it are the Sentry's own directories too; granted paths
    // below it are the host's.
    let in_cover = |d: &Path| {
        reach.covers.iter().any(|c| d.starts_with(c)) && !granted.iter().any(|g| d.starts_with(g))
    };
    let seen = |d: &Path| match &tmp_base {
        Some(base) if !d.starts_with(base) => sentrys_own,
        _ if in_cover(d) => sentrys_own,
        _ => stat(d),
    };
    let hidden = reach.hides(&spec.cwd, granted).map(|c| {
        format!(
            "{} is covered: the sandbox's user cannot enter it, and sees there only the way to what it is granted",
            c.display()
        )
    });
    unreachable_cwd(spec).or(hidden).or_else(|| {
        // A root caller's command has an id no account has: it passes only the "others"
        // bits of host directories, and its owner's bits inside the idmapped trees.
        (!caller.rootless)
            .then(|| untraversable(&spec.cwd, idmapped, &seen))
            .flatten()
    })
}

/// The paths the config mounts over, with what they were when planned (a missing one as what
/// it would be made), checked again right before the start.
fn destinations(
    spec: &Spec,
    staged: &[gitstage::Staged],
    reach: &Reach,
    stat: &dyn Fn(&Path) -> Option<Owned>,
) -> Vec<(PathBuf, sandbox::Kind)> {
    let exists = |p: &Path| stat(p).map(|o| o.kind);
    let mut destinations = Vec::new();
    for r in &spec.writable_roots {
        destinations.push((r.clone(), exists(r).unwrap_or(sandbox::Kind::Dir)));
    }
    for g in spec.tmp_read_grants() {
        destinations.push((g.clone(), exists(g).unwrap_or(sandbox::Kind::Dir)));
    }
    for p in &spec.protected {
        destinations.push((p.clone(), exists(p).unwrap_or(sandbox::Kind::File)));
    }
    // Pins are directories the planner found (a missing one is refused at the start).
    for p in spec.pins_bound_alone() {
        destinations.push((p.clone(), sandbox::Kind::Dir));
    }
    for s in staged {
        for d in &s.subdirs {
            destinations.push((s.gitdir.join(d), sandbox::Kind::Dir));
        }
    }
    for p in reach.covers.iter().chain(&reach.binds) {
        destinations.push((p.clone(), exists(p).unwrap_or(sandbox::Kind::Dir)));
    }
    for m in &spec.masks {
        destinations.push((m.path.clone(), m.kind));
    }
    destinations
}

/// A review run's copy-on-write view: refused as changed when the workspace is gone.
fn review_view(
    spec: &Spec,
    stat: &dyn Fn(&Path) -> Option<Owned>,
) -> Result<Option<ReviewView>, Error> {
    Ok(match &spec.review {
        Some(r) => {
            let Some(o) = stat(&spec.workspace).filter(|o| o.kind == sandbox::Kind::Dir) else {
                return Err(Error::Changed {
                    path: spec.workspace.clone(),
                    what: "it is gone (moved away since it was planned)".into(),
                });
            };
            Some(ReviewView {
                workspace: spec.workspace.clone(),
                changes: r.changes.clone(),
                owner: (o.uid, o.gid),
                disk_bytes: spec.limits.disk_bytes,
                upper_mode: o.mode & 0o7777,
            })
        }
        None => None,
    })
}

/// The limits the run's events are judged against, with what enforces the memory limit.
fn judged(spec: &Spec, caller: &Caller) -> usage::Judged {
    usage::Judged {
        memory: spec.limits.memory_bytes.map(|b| {
            let how = if caller.rootless {
                sandbox::LimitMechanism::GvisorRlimitAs
            } else {
                sandbox::LimitMechanism::GvisorCgroup
            };
            (b, how)
        }),
        pids: spec.limits.pids,
    }
}
