//! The contract between stockade's orchestration and its isolation backends (issue 16; see
//! `../shared/architecture.md` for where it grows: the resolved spec, `trait Backend`, the
//! outcome types). It sits below every other crate of the workspace and depends on none.
//!
//! Today it holds the one registry of stable error codes, [`Code`]: every refusal and error
//! stockade prints, writes to `--json`, the report or the audit log names one of these, and
//! no crate spells a code by hand (`tests/registry.rs` checks both that and README's table).
//!
//! ```
//! use sandbox::Code;
//! assert_eq!(Code::PolicyInvalid.as_str(), "E_POLICY_INVALID");
//! assert_eq!(Code::parse("E_TIMEOUT"), Some(Code::Timeout));
//! assert!(Code::ALL.iter().all(|c| Code::parse(c.as_str()) == Some(*c)));
//! ```

#![forbid(unsafe_code)]

mod codes;

pub use codes::Code;
