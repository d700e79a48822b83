//! Tests only (debug builds): a pause at a known moment of a run, so that an attack test can
//! change the workspace then (between the plan and the mechanism that acts on it). Each
//! backend names its moments by environment variable at the call.

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// With `variable` set to `FILE`: makes `FILE` and waits (at most 30 s) while it exists; the
/// test removes it to let the run go on. Nothing without the variable, or when `FILE` cannot
/// be made.
pub fn at(variable: &str) {
    let Some(flag) = std::env::var_os(variable) else {
        return;
    };
    let flag = PathBuf::from(flag);
    if std::fs::write(&flag, b"").is_err() {
        return;
    }
    let until = Instant::now() + Duration::from_secs(30);
    while flag.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
}
