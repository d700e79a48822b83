//! Where stockade keeps its own state on the host.

use std::ffi::OsStr;
use std::path::PathBuf;

/// `$XDG_STATE_HOME/stockade` when that is set to an absolute path (the XDG spec says to
/// ignore a relative one), else `$HOME/.local/state/stockade`; `None` without either. The
/// trust store and the change sets of review runs live below it.
pub fn state_dir(xdg_state_home: Option<&OsStr>, home: Option<&OsStr>) -> Option<PathBuf> {
    let absolute = |v: Option<&OsStr>| {
        v.map(PathBuf::from)
            .filter(|p| p.is_absolute() && !p.as_os_str().is_empty())
    };
    let state = match absolute(xdg_state_home) {
        Some(s) => s,
        None => absolute(home)?.join(".local/state"),
    };
    Some(state.join("stockade"))
}
