//! `sys`: the only stockade crate that contains `unsafe`.
//!
//! Two halves:
//! - [`raw`]: thin wrappers over the Linux syscalls the sandbox needs (namespaces, the new mount
//!   API, Landlock, seccomp, capabilities). Each returns [`Errno`] instead of touching `errno`
//!   globals, never allocates, and is safe to call after `fork` in a process that had threads.
//! - [`postfork`]: the child's whole life after `fork`, driven by a prepared, borrowed
//!   [`postfork::ChildSpec`]. It makes raw syscalls in the planned order, reports a failure as a
//!   `Copy` record over a close-on-exec pipe and `_exit`s. It never allocates, panics or decides
//!   policy: the `native` crate decided everything before the fork.
//!
//! [`parent`] holds the supervisor-side helpers (user-namespace id maps, idmapped mounts, signal
//! forwarding) and [`probe`] the "try it and see" checks behind `stockade doctor`.
//!
//! Why raw `libc::syscall` rather than a wrapper crate: the child after fork must not allocate
//! and must report errors as plain integers; several calls used here (`mount_setattr` with
//! `MOUNT_ATTR_IDMAP`, raw `landlock_add_rule` on a ruleset created elsewhere, `open_tree`
//! clones, `fsopen`/`fsmount`) are exposed by no maintained crate in that form.

pub mod cgroup1;
pub mod mediate;
pub mod mountinfo;
pub mod mountns;
pub mod net_tries;
pub mod netns;
pub mod overlay;
pub mod parent;
pub mod postfork;
pub mod probe;
pub mod raw;
pub mod reaper;
pub mod relay;
#[cfg(debug_assertions)]
pub mod test_pause;

pub use raw::Errno;
