//! The native Linux backend: namespaces, mounts, Landlock, seccomp, no capabilities, an
//! unprivileged uid inside, a scrubbed environment, built in-process.
//!
//! Flow: [`Plan::new`] turns a policy and a request into data (pure, given a [`HostView`]);
//! [`launch`] prepares what allocates (Landlock ruleset, seccomp program, idmapped mounts,
//! C strings), forks, and supervises. What the workspace holds (the scan the plan lowers, and
//! the sweep after the run) is the `workspace` crate's. The `unsafe` lives in the `sys` crate.
//!
//! ```no_run
//! use native::{launch, Options, Plan, RealHost, Request};
//! let policy = policy::profile("workspace-write")?;
//! let cwd = std::env::current_dir()?;
//! let req = Request {
//!     argv: vec!["true".into()],
//!     workspace: cwd.clone(),
//!     cwd,
//!     home: "/home/me".into(),
//!     uid: 1000,
//!     gid: 1000,
//!     env: std::env::vars_os().collect(),
//! };
//! let plan = Plan::new(&policy, &req, &RealHost)?;
//! let outcome = launch(&plan, Options::default(), None)?;
//! assert_eq!(outcome.exit_code, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod backend;
pub mod cgroup;
pub mod error;
mod explain;
pub mod host;
pub mod launch;
pub mod plan;
pub mod probe;
pub mod userns;

pub use backend::{BeforeCommand, Native, StartProxy};
pub use error::{PlanError, RunError};
pub use host::{Host, HostView, RealHost};
pub use launch::{launch, launch_with, Options, Outcome, ProxyStarter};
pub use plan::{CwdFallback, Plan, Request, ROOT_CALLER_HOST_ID};
pub use probe::{probe, Check};
pub use sandbox::Violation;

/// The caller's effective uid and gid.
pub fn caller_ids() -> (u32, u32) {
    (sys::raw::euid(), sys::raw::egid())
}
