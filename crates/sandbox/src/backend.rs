//! The one trait every isolation backend implements.

use crate::{Check, Spec};

/// A sandbox implementation: finds what this machine can enforce, lowers a [`Spec`] to its
/// own plan (pure: the plan is data, inspectable and tested as such), and runs a plan.
pub trait Backend {
    /// The backend's own plan: what it will do, before it does it.
    type Plan: serde::Serialize;
    /// Why a spec cannot be lowered or a plan cannot run here.
    type Error: std::error::Error;
    /// What a run of a plan returns.
    type Finished;
    /// What a run takes from its caller besides the plan: its output sinks and cancel handle.
    type Io;

    /// The name in reports, audit events and `--backend`.
    fn name(&self) -> &'static str;
    /// What this machine can enforce, found by trying.
    fn probe(&self) -> Vec<Check>;
    /// The spec lowered to this backend's mechanisms, or why it cannot be.
    fn plan(&self, spec: &Spec) -> Result<Self::Plan, Self::Error>;
    /// Runs a plan to its end.
    fn run(&self, plan: &Self::Plan, io: Self::Io) -> Result<Self::Finished, Self::Error>;
}
