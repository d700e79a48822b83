//! `stockade selftest`: the attack corpus as data (TOML under `corpus/`, embedded) and the
//! runner that proves each case on the caller's machine: the control escapes in a throw-away
//! fixture, the attack does not escape inside `stockade run`.
//!
//! Safe on a workstation by construction: fixtures live in fresh directories under
//! `/var/tmp` with a fake `HOME` (and, for a case whose workspace lies below the host's
//! `/tmp`, one directory there), network cases talk only to loopback listeners the runner
//! starts, controls are bounded (capped loops, writes inside the fixture) and everything is
//! removed at the end, also on Ctrl-C.

#![forbid(unsafe_code)]

pub mod corpus;
pub mod fixture;
pub mod runner;

pub use corpus::{load, Case, CorpusError, CORPUS_VERSION};
pub use runner::{
    caller_is_root, install_interrupt_handler, run_cases, select, CaseResult, Config, Counts,
    Verdict,
};
