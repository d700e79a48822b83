//! Stage 1, before anything starts: what the spec needs that this machine may not give
//! (refused, or recorded as skipped), the engine's image (made when it lacks it) and the
//! copies of existing git dirs' top levels.

use sandbox::RunError;

use super::ContainerPlanned;
use crate::{image, Engine};

/// What the run's later stages need of its preparation.
pub(super) struct Prepared {
    /// The protections skipped under `--allow-degraded`.
    pub(super) skipped: Vec<String>,
    /// The image's id, and whether it came from the cache (unchecked).
    pub(super) image_id: String,
    pub(super) cached_image: bool,
    /// The staged git dirs as they were copied (`workspace::gitstage`).
    pub(super) snapshots: Vec<workspace::gitstage::Snapshot>,
}

impl ContainerPlanned {
    /// The linked secrets refused (or recorded), rootless Podman's partial memory limit
    /// refused unless degraded, the image made if missing, the git dirs staged.
    pub(super) fn prepare(&self, options: sandbox::Options) -> Result<Prepared, RunError> {
        // A masked file's other name is readable through a bind of its directory as through
        // the host kernel: refused (or recorded) by every backend's run.
        let mut skipped = sandbox::refuse_linked_secrets(&self.linked_secrets, options)?;
        if let Some(bytes) = self.partial_memory {
            let what = format!(
                "the memory limit ({} MiB): rootless Podman on cgroup v1 has no cgroup of its own, and the per-process RLIMIT_DATA it gives instead does not count memfd or shared memory",
                bytes >> 20
            );
            if !options.allow_degraded {
                return Err(RunError::Plan {
                    code: sandbox::Code::ProtectionUnavailable,
                    message: format!("{what} cannot be enforced"),
                    hint: Some("--memory 0 (no limit), --allow-degraded (the per-process bound, recorded as skipped), run as root (the container's cgroup), or use --backend native".into()),
                });
            }
            skipped.push(what);
        }
        let (image_id, cached_image) = self.ensure_image()?;
        // The copies of existing git dirs' top levels (`workspace::gitstage`), made as late as
        // can be: what the host's git does meanwhile is in them.
        if !self.target.staged.is_empty() {
            // Only this process's user reaches the copies' directory (as the run's whole
            // private directory: a process of the command's id on the host could rename a
            // tree of its own, holding another owner's files, into its copy, for the removal
            // or the copy back to act on as root: red team of this round).
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(workspace::gitstage::Staged::copies(&self.target.stage_dir))
                .map_err(|e| RunError::io("make the staged git dirs' directory", e))?;
        }
        let snapshots = workspace::gitstage::stage_all(
            &self.target.staged,
            &self.target.stage_dir,
            self.copy_owner,
        )
        .map_err(|(gitdir, e)| RunError::Plan {
            code: sandbox::Code::WorkspaceChanged,
            message: format!(
                "{}: its top level could not be staged for the run: {e}",
                gitdir.display()
            ),
            hint: Some("run again".into()),
        })?;
        Ok(Prepared {
            skipped,
            image_id,
            cached_image,
            snapshots,
        })
    }

    /// What the cached image id is valid for: the engine's build, the store the environment
    /// names, the image's name.
    fn image_key(&self) -> String {
        let env = |n: &str| std::env::var(n).unwrap_or_default().replace('\n', " ");
        format!(
            "{} uid={} home={} data={} storage={} host={}{} context={} image={}",
            crate::client::build_key(&self.binary).unwrap_or_default(),
            rustix::process::geteuid().as_raw(),
            env("HOME"),
            env("XDG_DATA_HOME"),
            env("CONTAINERS_STORAGE_CONF"),
            env("CONTAINER_HOST"),
            env("DOCKER_HOST"),
            env("DOCKER_CONTEXT"),
            self.target.image,
        )
    }

    /// The default image's id, made first when the engine lacks it, and whether it came from
    /// the cache (unchecked).
    fn ensure_image(&self) -> Result<(String, bool), RunError> {
        let key = self.image_key();
        if let Some(id) = crate::client::cached_image(self.engine, &key) {
            return Ok((id, true));
        }
        let rt = self.target.runtime.as_deref();
        if let Some(id) = image::id(
            self.engine,
            &self.binary,
            rt,
            &self.target.image,
            &self.engine_path,
        ) {
            crate::client::remember_image(self.engine, &key, Some(&id));
            return Ok((id, false));
        }
        let unavailable = |cause: String| RunError::Unavailable {
            what: "the container engine's image",
            cause,
            fix: format!(
                "see the cause; `{} info` shows whether the engine works{}",
                self.engine.name(),
                if self.engine == Engine::Docker {
                    " (is `dockerd` running?)"
                } else {
                    ""
                }
            ),
        };
        let tarball = image::tarball(&self.target.host_root)
            .map_err(|e| unavailable(format!("cannot make the image's tarball: {e}")))?;
        image::import(
            &self.binary,
            &self.target.image,
            &tarball,
            &self.engine_path,
        )
        .map_err(|failed| match failed {
            // At the caller's process limit: that is the error, not the engine's.
            image::ImportFailed::Start(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                RunError::io("start the container engine", e)
            }
            image::ImportFailed::Start(e) => {
                unavailable(format!("cannot start {}: {e}", self.binary.display()))
            }
            image::ImportFailed::Failed(cause) => unavailable(format!(
                "`{} import` of {} failed: {cause}",
                self.engine.name(),
                self.target.image
            )),
        })?;
        let id = image::id(
            self.engine,
            &self.binary,
            rt,
            &self.target.image,
            &self.engine_path,
        )
        .ok_or_else(|| {
            unavailable(format!(
                "{} has no {} after importing it",
                self.engine.name(),
                self.target.image
            ))
        })?;
        crate::client::remember_image(self.engine, &key, Some(&id));
        Ok((id, false))
    }

    /// so the next run makes the image anew.
    pub(super) fn image_gone(&self) -> bool {
        let rt = self.target.runtime.as_deref();
        let gone = image::id(
            self.engine,
            &self.binary,
            rt,
            &self.target.image,
            &self.engine_path,
        )
        .is_none();
        if gone {
            crate::client::remember_image(self.engine, &self.image_key(), None);
        }
        gone
    }
}
