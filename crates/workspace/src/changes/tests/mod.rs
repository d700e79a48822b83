//! Change sets built by hand on real directories: an upper and a lower (the workspace) laid
//! out as overlayfs leaves them, whiteouts included (character devices 0/0: `mknod` needs
//! root before Linux 5.8; a test that cannot make one says so and returns).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{FileType as Ft, Mode, XattrFlags};

use super::*;

mod apply;
mod identity;
mod read;
mod store;

pub(super) struct Fx {
    _t: tempfile::TempDir,
    pub(super) root: PathBuf,
    pub(super) ws: PathBuf,
    pub(super) outside: PathBuf,
    pub(super) store: Store,
}

/// A recorded change of one byte of text at `path`, its base unchanged during the run: the
/// fixture the unit tests of flags and apply build their change sets from.
pub(super) fn recorded(
    path: &str,
    kind: ChangeKind,
    file_type: FileType,
    mode: u32,
    base: BaseState,
) -> Recorded {
    Recorded {
        path: PathBuf::from(path),
        kind,
        file_type,
        mode: Some(mode),
        size: 1,
        sha256: None,
        symlink_target: None,
        script: false,
        content: Some(Content::Text),
        base_content: None,
        in_git_dir: false,
        base: Base {
            state: base,
            changed_during_run: false,
        },
        hard_links: 0,
    }
}

pub(super) fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Prints `skipped: <why> needs root` and returns `true` when the caller is not root, so a
/// root-only test can write `if skip_unless_root("...") { return; }`.
pub(super) fn skip_unless_root(why: &str) -> bool {
    if is_root() {
        return false;
    }
    eprintln!("skipped: {why} needs root");
    true
}

impl Fx {
    pub(super) fn new() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let ws = root.join("ws");
        let outside = root.join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let store = Store::open(&root.join("state/stockade/changes")).unwrap();
        Fx {
            _t: t,
            root,
            ws,
            outside,
            store,
        }
    }

    /// Writes a workspace file (parents made).
    pub(super) fn lower(&self, rel: &str, content: &str) -> PathBuf {
        write(&self.ws.join(rel), content)
    }

    /// A run's record, starting now: what the workspace holds is older than the run (by
    /// more than `read::CTIME_SLACK_NS`).
    pub(super) fn meta(&self, id: &str) -> RunMeta {
        std::thread::sleep(Duration::from_millis(30));
        let ws = std::fs::metadata(&self.ws).unwrap();
        let me = (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        );
        RunMeta::new(
            id,
            &self.ws,
            &["make".to_owned()],
            false,
            me,
            (ws.uid(), ws.gid()),
            &[],
            &[],
        )
    }

    /// Starts a run.
    pub(super) fn start(&self, id: &str) -> RunDir {
        self.start_with(self.meta(id))
    }

    pub(super) fn start_with(&self, meta: RunMeta) -> RunDir {
        self.store.create_run(&meta, None, 0o755).unwrap()
    }
}

pub(super) fn write(path: &Path, content: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
    path.to_path_buf()
}

pub(super) fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

pub(super) fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// Writes a file into the run's upper.
pub(super) fn up(run: &RunDir, rel: &str, content: &str) -> PathBuf {
    write(&run.upper().join(rel), content)
}

pub(super) fn up_dir(run: &RunDir, rel: &str) -> PathBuf {
    let p = run.upper().join(rel);
    std::fs::create_dir_all(&p).unwrap();
    p
}

/// Makes a whiteout in the upper; `false` (said on stderr) when this process may not.
pub(super) fn whiteout(run: &RunDir, rel: &str) -> bool {
    let p = run.upper().join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    match rustix::fs::mknodat(
        rustix::fs::CWD,
        &p,
        Ft::CharacterDevice,
        Mode::from_raw_mode(0),
        0,
    ) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("skipped: cannot make a whiteout (mknod c 0 0) as uid {}: {e}; run the tests as root", rustix::process::geteuid().as_raw());
            false
        }
    }
}

/// Marks an upper directory opaque the way the run's overlay does.
pub(super) fn opaque(run: &RunDir, rel: &str) {
    let name = if run.meta().caller.0 == 0 {
        "trusted.overlay.opaque"
    } else {
        "user.overlay.opaque"
    };
    set_xattr(&run.upper().join(rel), name, b"y");
}

pub(super) fn set_xattr(path: &Path, name: &str, value: &[u8]) {
    rustix::fs::lsetxattr(path, name, value, XattrFlags::empty()).unwrap();
}

pub(super) fn kinds(set: &ChangeSet) -> Vec<(String, ChangeKind)> {
    set.entries
        .iter()
        .map(|c| (c.path.display().to_string(), c.kind))
        .collect()
}

pub(super) fn codes<'a>(set: &'a ChangeSet, path: &str) -> Vec<&'a str> {
    let c = set
        .entries
        .iter()
        .find(|c| c.path == Path::new(path))
        .unwrap_or_else(|| panic!("no entry {path} in {:?}", kinds(set)));
    c.flags.iter().map(|f| f.code).collect()
}

pub(super) fn accept_all() -> ApplyOptions {
    ApplyOptions {
        accept_flagged: true,
        ..Default::default()
    }
}

pub(super) fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

pub(super) fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
