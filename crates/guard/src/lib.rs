//! `guard`: defenses above the kernel. Pure library code (no processes, no `unsafe`).
//!
//! - [`sanitize`]: the sanitizer (its own crate, `crates/sanitize`, which the run's outcome
//!   reports from; re-exported here): strips invisible and direction-changing code points,
//!   Unicode Tag characters and terminal control sequences from text, streaming.
//! - [`command`]: the command layer: a shell command string parsed and checked under the
//!   argv-only policy (one simple command of literal words, paths inside the workspace, the
//!   program from a trusted search path) and turned into an argv that runs without a shell.
//! - [`trust`]: content-addressed trust for a workspace's configuration: the digest of its
//!   trust-relevant files, the per-user trust store, and the check `stockade run` makes.

#![forbid(unsafe_code)]

pub mod command;
pub mod trust;

pub use ::sanitize;
pub use ::sanitize::{classify, sanitize, Class, Found, Report, Sanitizer};
