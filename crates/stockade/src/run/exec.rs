//! The command looked up before the run, for a backend that does not report a failed
//! `execve` itself (its [`sandbox::Traits::exec_errors`]): as the native backend's init finds
//! it, among the host's files as every backend's sandbox sees them (the masks hide what they
//! cover; the host's `/tmp` is private unless a writable root or a read grant shows a part of
//! it). A command that is not there is exit 127, one that cannot be executed 126, with the
//! errno the native backend would report, so the notices and the record are the same under
//! every backend. A file that is there and executable runs: what the sandbox then says of it
//! is the backend's.
//!
//! It reads the host only (`stat`), never writes: a path the command's workspace changes in
//! between makes the answer stale, never a run weaker.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Whether the sandbox of `spec` shows `path` (canonical) at all.
fn visible(spec: &sandbox::Spec, path: &Path) -> bool {
    if spec.masks.iter().any(|m| path.starts_with(&m.path)) {
        return false;
    }
    let shown = |p: &Path| {
        (spec.writable_roots.iter())
            .chain(&spec.read_grants)
            .any(|r| p.starts_with(r))
    };
    !path.starts_with("/tmp") || shown(path)
}

/// The errno of `execve` of `spec`'s command started in `cwd` (ENOENT, EACCES), or `None`
/// when it is there and executable.
pub(super) fn exec_errno(spec: &sandbox::Spec, cwd: &Path) -> Option<i32> {
    let argv0 = spec.argv.first()?;
    let candidates: Vec<PathBuf> = if argv0.contains('/') {
        vec![cwd.join(argv0)]
    } else {
        let path = (spec.env.iter())
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or("/usr/local/bin:/usr/bin:/bin");
        path.split(':')
            .map(|d| {
                if d.is_empty() {
                    cwd.to_path_buf()
                } else {
                    cwd.join(d)
                }
            })
            .map(|d| d.join(argv0))
            .collect()
    };
    let mut not_executable = false;
    for c in candidates {
        let Ok(real) = std::fs::canonicalize(&c) else {
            continue;
        };
        if !visible(spec, &real) {
            continue;
        }
        match std::fs::metadata(&real) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => return None,
            Ok(_) => not_executable = true,
            Err(_) => {}
        }
    }
    Some(if not_executable {
        libc::EACCES
    } else {
        libc::ENOENT
    })
}

/// The outcome of a run whose command could not be executed: nothing ran.
pub(super) fn not_run(errno: i32) -> sandbox::Outcome {
    sandbox::Outcome {
        exit_code: if errno == libc::ENOENT { 127 } else { 126 },
        signal: None,
        exec_errno: Some(errno),
        duration: std::time::Duration::ZERO,
        skipped: Vec::new(),
        landlock_abi: None,
        blocked: Vec::new(),
        timed_out: false,
        usage: sandbox::Usage::default(),
        limit_hits: Vec::new(),
        output: None,
        ended_by: None,
        review_upper: None,
        network_tries: None,
        container: None,
        staged: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(ws: &Path) -> sandbox::Spec {
        sandbox::Spec {
            argv: vec!["tool".into()],
            cwd: ws.to_path_buf(),
            workspace: ws.to_path_buf(),
            home: ws.to_path_buf(),
            env: vec![("PATH".into(), format!("{}/bin:/usr/bin", ws.display()))],
            hostname: "h".into(),
            read_scope: sandbox::ReadScope::Host,
            read_grants: Vec::new(),
            writable_roots: vec![ws.to_path_buf()],
            protected: Vec::new(),
            pins: Vec::new(),
            guard: Vec::new(),
            guard_sweep_only: Vec::new(),
            masks: Vec::new(),
            private_dirs: Vec::new(),
            linked_secrets: Vec::new(),
            credential_routes: false,
            network: sandbox::Network::None,
            limits: sandbox::Limits::default(),
            caller: sandbox::Ids { uid: 0, gid: 0 },
            review: None,
            identities: Default::default(),
        }
    }

    #[test]
    fn found_missing_masked_and_not_executable_as_the_init_would_say() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join("bin")).unwrap();
        let mut s = spec(&ws);
        assert_eq!(exec_errno(&s, &ws), Some(libc::ENOENT));
        std::fs::write(ws.join("bin/tool"), "#!/bin/sh\n").unwrap();
        assert_eq!(exec_errno(&s, &ws), Some(libc::EACCES));
        std::fs::set_permissions(ws.join("bin/tool"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        assert_eq!(exec_errno(&s, &ws), None);
        // A path with a slash is taken from the directory the command starts in.
        s.argv = vec!["./bin/tool".into()];
        assert_eq!(exec_errno(&s, &ws), None);
        s.argv = vec!["./bin".into()];
        assert_eq!(exec_errno(&s, &ws), Some(libc::EACCES));
        // Under a mask, it is not there.
        s.argv = vec!["tool".into()];
        s.masks.push(sandbox::Mask {
            path: ws.join("bin"),
            kind: sandbox::Kind::Dir,
            readable: false,
        });
        assert_eq!(exec_errno(&s, &ws), Some(libc::ENOENT));
        // A system program is found.
        s.argv = vec!["sh".into()];
        assert_eq!(exec_errno(&s, &ws), None);
    }
}
