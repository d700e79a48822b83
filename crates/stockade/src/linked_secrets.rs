//! Masked and protected files with other names outside their masks: refused before any
//! backend runs (issue 33: one check in the pipeline, not one per backend).

use sandbox::RunError;

/// A masked file with another name (hard link) outside every mask could be read through that
/// name by any backend, and a protected file with another name outside the protected paths
/// written through it (`ln .git/config keep`: `core.fsmonitor` for the host's next `git
/// status`): the run is refused, or the protection recorded as skipped under
/// `--allow-degraded`. The same for every backend (a masked file's other name is readable
/// through gVisor's gofer as through the host kernel), so the pipeline checks it once, before
/// any backend plans.
pub(crate) fn refuse(
    linked: &[sandbox::LinkedSecret],
    options: sandbox::Options,
    skipped: &mut Vec<String>,
) -> Result<(), RunError> {
    // A protected file first: its refusal names what a write through the other name does.
    let first = (linked.iter().find(|l| l.protected)).or_else(|| linked.first());
    if let Some(l) = first {
        let others = linked.len() - 1;
        let more = if others > 0 {
            format!(" (and {others} more such files)")
        } else {
            String::new()
        };
        let (what, cause, fix) = if l.protected {
            (
                "protection of a file host tools run",
                format!(
                    "{} is protected (read-only during the run) but has {} names (hard links) and only {} of them is protected: another name of this protected file would be writable{more}",
                    l.path.display(),
                    l.links,
                    l.masked,
                ),
                format!(
                    "break the link with a copy: `cp --preserve=all {f} {f}.new && mv {f}.new {f}` (find its other names with `find / -xdev -samefile {f}`), or pass --allow-degraded to run anyway",
                    f = l.path.display()
                ),
            )
        } else {
            (
                "masking of a credential file",
                format!(
                    "{} has {} names (hard links) and only {} of them lies under a mask: the sandbox could read it through another{more}",
                    l.path.display(),
                    l.links,
                    l.masked,
                ),
                format!(
                    "find its other names with `find / -xdev -samefile {}` and remove the ones you did not make on purpose (a copy does not share the file), or pass --allow-degraded to run anyway",
                    l.path.display()
                ),
            )
        };
        if options.allow_degraded {
            let kind = if l.protected {
                "protection of linked protected files"
            } else {
                "masking of linked credential files"
            };
            skipped.push(format!("{kind}: {cause}"));
        } else {
            return Err(RunError::Unavailable { what, cause, fix });
        }
    }
    Ok(())
}
