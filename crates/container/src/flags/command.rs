//! Where the command starts in the container and what starts it: the engine's `--workdir`,
//! the image, the container's init, the check script and the command's own arguments.

use std::path::PathBuf;

use sandbox::Spec;

use super::{reachable, Target, CHECK, INIT};

/// The directory the command starts in, and why it is not where the caller is (when so).
pub(super) fn workdir(spec: &Spec, target: &Target) -> (PathBuf, Option<String>) {
    // Below a cover, only what is bound there is in the container.
    let cover = (target.covers.iter().map(|c| &c.dir))
        .find(|c| spec.cwd.starts_with(c))
        .filter(|_| {
            !(spec.writable_roots.iter())
                .chain(&spec.read_grants)
                .any(|w| spec.cwd.starts_with(w))
        });
    if let Some(cover) = cover {
        (
            spec.workspace.clone(),
            Some(format!(
                "{} lies below {}, which the command's id cannot search: the container shows only the way to the workspace there",
                spec.cwd.display(),
                cover.display()
            )),
        )
    } else if reachable(spec, &spec.cwd) {
        (spec.cwd.clone(), None)
    } else {
        (
            spec.workspace.clone(),
            Some(if spec.cwd.starts_with("/tmp") {
                // As native and gVisor say it.
                "the sandbox has its own /tmp (grant the directory with --allow-read or --allow-write to start there)".to_owned()
            } else {
                format!(
                    "{} is not in the container (the host's /run, /proc, /sys and /dev are not bound)",
                    spec.cwd.display()
                )
            }),
        )
    }
}

/// The image and the command line the container starts: its init (when found), then the
/// check script (`/bin/sh -c` [`CHECK`]), which becomes the command.
pub(super) fn command(spec: &Spec, target: &Target, a: &mut Vec<String>) {
    a.push(target.image.clone());
    if target.init.is_some() {
        // Both catatonit and tini take the command after `--`, pass signals on to it, reap
        // what is left to them, and exit with its status (128 + N when a signal ended it).
        a.push(INIT.into());
        a.push("--".into());
    }
    a.push("/bin/sh".into());
    a.push("-c".into());
    a.push(CHECK.into());
    a.push("stockade-check".into());
    a.extend(spec.argv.iter().cloned());
}
