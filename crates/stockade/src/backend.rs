//! The one place that chooses a backend (issue 33, item 1; codex-rs's `SandboxType` is the
//! model): after it, the run's stages hold a `dyn Backend` and read its [`sandbox::Traits`],
//! with no arm per backend.

use sandbox::Backend;

/// The backend `--backend NAME` (or the policy's `backend`) names.
pub fn choose(name: policy::BackendName) -> &'static dyn Backend {
    match name {
        policy::BackendName::Native => &native::Native,
        policy::BackendName::Gvisor => &gvisor::GvisorBackend,
        policy::BackendName::Podman => &PODMAN,
        policy::BackendName::Docker => &DOCKER,
    }
}

static PODMAN: container::ContainerBackend =
    container::ContainerBackend::new(container::Engine::Podman);
static DOCKER: container::ContainerBackend =
    container::ContainerBackend::new(container::Engine::Docker);
