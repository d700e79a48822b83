//! Grants of stockade's own state: refused.
//!
//! The caller's state directory (`$XDG_STATE_HOME/stockade`, default
//! `~/.local/state/stockade`) holds what later runs and `stockade apply` read and trust: the
//! run journals (a later run completes its sweep from them), the walk cache (a later run takes
//! its listings instead of walking), the trust store (approved workspaces) and the change
//! sets of review runs. A grant of a directory that holds it is handled where the state is
//! protected (read-only and pinned inside the writable root, the walk cache not used); a
//! grant AT or BENEATH it would hand the command the stores themselves: a run that writes
//! `…/stockade/journal` does not use the cache, but its command could plant one that a later,
//! narrower run reads and trusts. Such grants are refused, writable ones and readable ones
//! alike (a read grant exempts its place from the masks: the change sets of other review runs,
//! what other workspaces hold, and the journals' invocations are not the command's to read),
//! and a workspace there too.
//!
//! The agents' own directories that the presets keep below it
//! (`~/.local/state/stockade/claude-code`, ...) are the agents' state, never stockade's: a
//! grant at or beneath one of those is not refused (the presets grant them).

use std::path::{Path, PathBuf};

use crate::ScanError;

/// What kind of grant a path is, as the messages name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantKind {
    /// `--allow-write`, `allow_write` in a policy file, or a preset's writable directory.
    Write,
    /// `--allow-read`, or `allow_read` in a policy file.
    Read,
    /// The workspace (`--workspace`, or the current directory).
    Workspace,
}

impl GrantKind {
    /// How the grant is spelled on the command line and in a policy file.
    pub fn spelled(self) -> &'static str {
        match self {
            GrantKind::Write => "--allow-write (allow_write)",
            GrantKind::Read => "--allow-read (allow_read)",
            GrantKind::Workspace => "the workspace (--workspace)",
        }
    }
}

/// Refuses the first grant at or beneath one of `state_dirs` that is not at or beneath one of
/// `agent_dirs`. All paths are compared as given: callers pass them resolved the same way
/// (their existing part canonical).
pub fn refuse_state_grants(
    grants: &[(GrantKind, PathBuf)],
    state_dirs: &[PathBuf],
    agent_dirs: &[PathBuf],
) -> Result<(), ScanError> {
    for (kind, grant) in grants {
        let Some(state) = state_dirs.iter().find(|s| policy::is_within(grant, s)) else {
            continue;
        };
        if agent_dirs.iter().any(|a| policy::is_within(grant, a)) {
            continue;
        }
        return Err(ScanError::StateGrant {
            kind: *kind,
            grant: grant.clone(),
            state: state.clone(),
        });
    }
    Ok(())
}

/// The home of user `uid` in `/etc/passwd`'s text (field 6), if it names one that is absolute.
/// A caller whose `HOME` or `XDG_STATE_HOME` points elsewhere still has the default state
/// directory below this home, which `stockade` run without them would use.
pub fn passwd_home(passwd: &str, uid: u32) -> Option<PathBuf> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let home = Path::new(*fields.get(5)?);
        (fields.get(2)?.parse::<u32>().ok()? == uid && home.is_absolute())
            .then(|| home.to_path_buf())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn check(kind: GrantKind, grant: &str) -> Result<(), ScanError> {
        refuse_state_grants(
            &[(kind, p(grant))],
            &[p("/h/.local/state/stockade"), p("/x/state/stockade")],
            &[p("/h/.local/state/stockade/claude-code")],
        )
    }

    #[test]
    fn grants_of_the_state_directory_or_below_are_refused() {
        for grant in [
            "/h/.local/state/stockade",
            "/h/.local/state/stockade/journal",
            "/h/.local/state/stockade/journal/sub",
            "/h/.local/state/stockade/trust",
            "/h/.local/state/stockade/changes/run1",
            "/h/.local/state/stockade/gvisor-platform",
            "/x/state/stockade/journal",
            "/h/.local/state/stockade/./journal",
            "/h/.local/state/stockade/claude-code/../journal",
        ] {
            for kind in [GrantKind::Write, GrantKind::Read, GrantKind::Workspace] {
                let e = check(kind, grant).expect_err(grant);
                assert!(
                    matches!(&e, ScanError::StateGrant { kind: k, grant: g, .. }
                        if *k == kind && g == Path::new(grant)),
                    "{grant}: {e:?}"
                );
                let text = e.to_string();
                assert!(text.contains(grant), "{text}");
                assert!(
                    text.contains("stockade's own state cannot be granted to a run"),
                    "{text}"
                );
                assert!(e.hint().is_some_and(|h| h.contains("outside")));
            }
        }
    }

    #[test]
    fn grants_beside_above_or_in_an_agents_directory_are_not() {
        for grant in [
            "/h/.local/state/other",
            "/h/.local/state/stockade-other",
            "/h/.local/state",
            "/h",
            "/x/state",
            "/h/.local/state/stockade/claude-code",
            "/h/.local/state/stockade/claude-code/local",
            "/ws",
        ] {
            for kind in [GrantKind::Write, GrantKind::Read, GrantKind::Workspace] {
                assert!(check(kind, grant).is_ok(), "{grant}");
            }
        }
    }

    #[test]
    fn the_first_refused_grant_is_named() {
        let e = refuse_state_grants(
            &[
                (GrantKind::Workspace, p("/ws")),
                (GrantKind::Write, p("/s/stockade/trust")),
                (GrantKind::Read, p("/s/stockade/journal")),
            ],
            &[p("/s/stockade")],
            &[],
        )
        .unwrap_err();
        assert!(matches!(
            e,
            ScanError::StateGrant {
                kind: GrantKind::Write,
                ..
            }
        ));
    }

    #[test]
    fn passwd_homes() {
        let text = "root:x:0:0:root:/root:/bin/sh\n\
                    broken\n\
                    u:x:1000:1000::relative:/bin/sh\n\
                    v:x:1001:1001:V:/home/v:/bin/sh\n";
        assert_eq!(passwd_home(text, 0), Some(p("/root")));
        assert_eq!(passwd_home(text, 1001), Some(p("/home/v")));
        assert_eq!(passwd_home(text, 1000), None);
        assert_eq!(passwd_home(text, 7), None);
    }
}
