//! A run's streams on the caller's side, the same for every backend (issue 33: the contract
//! crate, `sandbox`, holds types; this is the machinery every backend shares).
//!
//! - [`relay`]: the command's stdout and stderr read from pipes into the caller's sinks,
//!   through the per-stream output limit and the sanitizer, and the caller's stdin into the
//!   command's pipe;
//! - [`terminal`]: which of the caller's streams make a run's own terminal, and the relay
//!   between the caller's terminal and that one.
//!
//! ```
//! use stream::relay::human_size;
//! assert_eq!(human_size(16 * 1024 * 1024), "16 MiB");
//! ```

#![forbid(unsafe_code)]

pub mod relay;
pub mod terminal;
