//! The contract between stockade's orchestration and its isolation backends (issue 16; see
//! `../shared/architecture.md` for where it grows: the resolved spec, `trait Backend`, the
//! outcome types). It sits below every backend and depends on no crate of the workspace but
//! `sanitize` (the type of what the sanitizer removed, in the outcome), and `libc` for errno
//! constants. It holds types, not
//! machinery: the output relay and the terminal every backend shares are the `stream` crate's.
//!
//! It holds the resolved [`Spec`] of a run (what the sandbox must look like, with no mechanism
//! in it), the [`Backend`] trait that lowers and runs it, what a run reports ([`Usage`],
//! [`LimitHit`], [`Violation`], [`Check`]), and the one registry of stable error codes,
//! [`Code`]: every refusal and error stockade prints, writes to `--json`, the report or the
//! audit log names one of these, and no crate spells a code by hand (`tests/registry.rs`
//! checks both that and README's table).
//!
//! ```
//! use sandbox::Code;
//! assert_eq!(Code::PolicyInvalid.as_str(), "E_POLICY_INVALID");
//! assert_eq!(Code::parse("E_TIMEOUT"), Some(Code::Timeout));
//! assert!(Code::ALL.iter().all(|c| Code::parse(c.as_str()) == Some(*c)));
//! ```

#![forbid(unsafe_code)]

mod backend;
mod cancel;
mod codes;
mod error;
mod io;
mod outcome;
mod spec;
mod state;

pub use backend::{
    Backend, Enforced, Enforcement, Launch, Layer, LimitMechanism, Planned, Traits, Views,
};
pub use cancel::Cancel;
pub use codes::{Code, Notice};
pub use error::{CwdFallback, RunError};
pub use io::{wait_before_command, BeforeCommand, Input, Options, RunIo, Sink, StartProxy};
pub use outcome::{
    human_size, Check, ContainerRun, LimitHit, NetworkTries, Outcome, Output, StreamSummary, Usage,
    Violation,
};
pub use spec::{
    refuse_linked_secrets, unassigned_id_enters, GuardPattern, Ids, Kind, Limits, LinkedSecret,
    Mask, Network, ReadScope, Review, Spec, PROXY_ADDR, REVIEW_FIX,
};
pub use state::state_dir;
