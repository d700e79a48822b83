//! What a workspace holds, for every backend: the [`Scan`] before a run (writable roots, masked
//! and protected paths, git's code paths, what a creation guard refuses), made into the run's
//! [`sandbox::Spec`] once by [`Resolved::new`], and the [`sweep()`] after it (protected paths
//! the run created, moved out of the way and reported).
//!
//! No isolation mechanism lives here: backends lower the spec to theirs (native: mounts,
//! Landlock and mediated creation; gVisor: an OCI bundle). Everything reads the host through
//! [`HostView`], so scans are built and tested against a fake host.
//!
//! ```no_run
//! use workspace::{RealHost, Request, Resolved};
//! let policy = policy::profile("workspace-write")?;
//! let cwd = std::env::current_dir()?.canonicalize()?;
//! let request = Request {
//!     argv: vec!["true".into()],
//!     workspace: cwd.clone(),
//!     cwd,
//!     home: "/home/me".into(),
//!     uid: 1000,
//!     gid: 1000,
//!     env: Vec::new(),
//! };
//! let run = Resolved::new(&policy, &request, &RealHost)?;
//! println!("protected: {:?}", run.spec.protected);
//! // ... the run ...
//! let violations = workspace::sweep(&run, &RealHost, "run-1");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod beneath;
pub mod changes;
mod error;
mod git;
pub mod git_index;
pub mod gitstage;
mod home_sources;
pub mod host;
pub mod links;
pub mod planted_git;
mod scan;
mod secrets;
pub mod snapshot;
mod spec;
pub mod state_grants;
pub mod sweep;
mod walk;
pub mod walk_cache;

pub use beneath::{create_dir_all_no_links, identity_no_links};
pub use error::ScanError;
pub use git::is_existing_config;
pub use home_sources::sourced_paths as home_sourced_paths;
pub use host::{DirStamp, Entry, HostView, Kind, RealHost};
pub use sandbox::LinkedSecret;
pub use scan::{
    depth, is_private_place, tmp_read_grants, under_replaced, writable_roots, GitIndex,
    GuardPattern, Place, ProtectedLink, Scan, SweepPlan, REPLACED,
};
pub use spec::{Request, Resolved, Watch, SANDBOX_HOSTNAME};
pub use sweep::{sweep, Violation};
pub use walk::{
    in_git_modules, is_git_redirect, is_submodule_code_path, walk, DenyGlobs, DirStamps, Prior,
    SettledDir, Stamps, SETTLED,
};
pub use walk_cache::WalkCache;

/// The largest git index the scan reads (about half a million entries).
pub const GIT_INDEX_LIMIT: usize = 64 << 20;
