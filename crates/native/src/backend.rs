//! The native backend as a [`sandbox::Backend`]: a spec lowered to a [`Plan`] and launched.

use crate::{Options, Outcome, Plan, RealHost, RunError};

/// Namespaces, mounts, Landlock and seccomp, built in-process.
#[derive(Debug, Default, Clone, Copy)]
pub struct Native;

pub use sandbox::{BeforeCommand, StartProxy};

/// What a native run takes besides its plan.
pub struct Io {
    /// The run's output sinks and cancel handle.
    pub run: sandbox::RunIo,
    pub options: Options,
    /// Mode proxy: what serves the proxy's listener.
    pub proxy: Option<StartProxy>,
    /// Waited for before the command starts (see [`BeforeCommand`]).
    pub before_command: Option<BeforeCommand>,
}

impl sandbox::Backend for Native {
    type Plan = Plan;
    type Error = RunError;
    type Finished = Outcome;
    type Io = Io;

    fn name(&self) -> &'static str {
        "native"
    }

    fn probe(&self) -> Vec<sandbox::Check> {
        crate::probe()
    }

    fn plan(&self, spec: &sandbox::Spec) -> Result<Plan, RunError> {
        Ok(Plan::lower(spec, &RealHost)?)
    }

    fn run(&self, plan: &Plan, io: Io) -> Result<Outcome, RunError> {
        let Io {
            run,
            options,
            mut proxy,
            before_command,
        } = io;
        let hook = proxy
            .as_mut()
            .map(|p| -> crate::ProxyStarter<'_> { p.as_mut() });
        crate::launch::launch_gated(plan, options, hook, run, before_command)
    }
}
