//! The native backend as a [`sandbox::Backend`]: a spec lowered to a [`Plan`] and launched.

use sandbox::{Enforced, Enforcement, Launch, LimitMechanism, Planned, Traits};

use crate::{Outcome, Plan, RealHost, RunError};

pub use sandbox::{BeforeCommand, StartProxy};

/// Namespaces, mounts, Landlock and seccomp, built in-process.
#[derive(Debug, Default, Clone, Copy)]
pub struct Native;

impl sandbox::Backend for Native {
    fn name(&self) -> &'static str {
        "native"
    }

    fn probe(&self) -> Vec<sandbox::Check> {
        crate::probe()
    }

    /// The init answers every creation of a protected name (mediated creation), and the
    /// directories holding read-only binds are pinned; review views are overlays.
    fn traits(&self) -> Traits {
        Traits {
            creation_guard: true,
            pins: true,
            exclusive_workspace: false,
            views: sandbox::Views::UnassignedId,
            // The init reports a failed `execve` with its errno.
            exec_errors: true,
            layers: &[],
        }
    }

    fn plan(&self, spec: &sandbox::Spec, _run_id: &str) -> Result<Box<dyn Planned>, RunError> {
        Ok(Box::new(Plan::lower(spec, &RealHost)?))
    }
}

impl Planned for Plan {
    fn cwd_fallback(&self) -> Option<sandbox::CwdFallback> {
        self.cwd_fallback.clone()
    }

    fn enforcement(&self) -> Enforcement {
        let enforced = |chosen: Option<(u64, LimitMechanism)>| {
            chosen.map(|(value, mechanism)| Enforced { value, mechanism })
        };
        Enforcement {
            inside_uid: self.ids.inside_uid,
            host_uid: self.ids.host_uid,
            writable_roots: self.writable_roots.clone(),
            masked: self.masked.clone(),
            emptied: self.emptied.clone(),
            protected: self.protected.clone(),
            mounts: self.mounts.len(),
            landlock_rules: self.landlock.host_rules.len() + self.landlock.child_rules.len(),
            seccomp_rules: self.seccomp.len(),
            env_names: self.env.iter().map(|(k, _)| k.clone()).collect(),
            memory: enforced(self.resources.memory),
            pids: enforced(self.resources.pids),
            cpu_millicores: enforced(self.resources.cpu_millis),
        }
    }

    fn run(self: Box<Self>, launch: Launch) -> Result<Outcome, RunError> {
        let Launch {
            io,
            options,
            mut proxy,
            before_command,
        } = launch;
        let hook = proxy
            .as_mut()
            .map(|p| -> crate::ProxyStarter<'_> { p.as_mut() });
        crate::launch::launch_gated(&self, options, hook, io, before_command)
    }
}
