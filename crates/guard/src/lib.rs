//! `guard`: defenses above the kernel. Pure library code (no processes, no `unsafe`).
//!
//! - [`sanitize`]: strips invisible and direction-changing code points, Unicode Tag
//!   characters and terminal control sequences from text, streaming, and reports what it
//!   removed (including text hidden in Tag characters).

#![forbid(unsafe_code)]

pub mod sanitize;

pub use sanitize::{classify, sanitize, Class, Found, Report, Sanitizer};

#[cfg(test)]
mod tests;
