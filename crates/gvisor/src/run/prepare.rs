//! The run's preparation, before runsc starts: the streams checked, the bundle written (its
//! config with the run's own paths filled in), runsc's control, the socket for the run's own
//! terminal, the copies of existing git dirs' top levels, the mount destinations checked once
//! more, and a root caller's cgroup.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::control::Control;
use super::{host_kind, io_err, is_pipe, Io, BUNDLE_PLACEHOLDER};
use crate::bundle::{EMPTY_FILE, UNREADABLE_FILE};
use crate::console::ConsoleSocket;
use crate::{Error, Plan};

/// What the run holds from its preparation to its end.
pub(super) struct Prepared {
    /// The bundle directory ([`write_bundle`]), removed when dropped.
    pub(super) dir: tempfile::TempDir,
    pub(super) ctl: Control,
    /// Where runsc sends the run's own terminal (a run with one only).
    pub(super) console: Option<ConsoleSocket>,
    /// The staged git dirs' top levels as copied ([`stage_git_dirs`]).
    pub(super) snapshots: Vec<crate::gitstage::Snapshot>,
    /// A root caller's cgroup ([`make_group`]), removed when dropped.
    pub(super) group: Option<crate::usage::Group>,
}

/// Everything the run needs before runsc starts, in order: the bundle, runsc's control (in
/// the run's held network), the console socket, the git dirs' copies, the last check of the
/// mount destinations, and the cgroup.
pub(super) fn prepare(plan: &Plan, io: &Io) -> Result<Prepared, Error> {
    let netns_path = io.network.as_ref().map(sys::netns::HeldNetwork::netns_path);
    let dir = write_bundle(
        plan,
        netns_path.as_deref(),
        io.terminal.map(|t| t.caller.size),
    )?;
    let ctl = Control::new(
        plan,
        &dir.path().join("state"),
        io.network.as_ref().map(sys::netns::HeldNetwork::join),
    );
    // The run's own terminal comes from runsc through a socket in the bundle directory.
    let console = io
        .terminal
        .map(|_| ConsoleSocket::listen(dir.path()))
        .transpose()
        .map_err(io_err("listen for the run's terminal"))?;
    // Tests only: once the run is planned and its bundle written, before the mount
    // destinations are checked and runsc starts.
    #[cfg(debug_assertions)]
    sys::test_pause::at("STOCKADE_TEST_GVISOR_PAUSE");
    let snapshots = stage_git_dirs(plan, dir.path())?;
    check_destinations(plan)?;
    let group = make_group(plan)?;
    Ok(Prepared {
        dir,
        ctl,
        console,
        snapshots,
        group,
    })
}

/// Each of the command's streams must be a pipe (runsc as root would take over the owner of
/// anything else), and the run needs the held network (see [`Plan::control_held`]).
pub(super) fn check_io(plan: &Plan, io: &Io) -> Result<(), Error> {
    for (name, fd) in [
        ("stdin", &io.stdin),
        ("stdout", &io.stdout),
        ("stderr", &io.stderr),
    ] {
        if !is_pipe(fd) {
            return Err(Error::Io {
                what: format!("hand the command its {name}"),
                cause: std::io::Error::other(
                    "not a pipe (runsc as root would take over its owner)",
                ),
            });
        }
    }
    if plan.control_held && io.network.is_none() {
        return Err(Error::Io {
            what: "give runsc a network namespace of the run's own".into(),
            cause: std::io::Error::other(
                "none held (runsc's control socket would be in the caller's network namespace)",
            ),
        });
    }
    Ok(())
}

/// The bundle: `config.json` (it holds the command's environment: the directory is 0700) and
/// the files masks are bound from. Removed when dropped.
fn write_bundle(
    plan: &Plan,
    netns: Option<&str>,
    terminal: Option<libc::winsize>,
) -> Result<tempfile::TempDir, Error> {
    let parent = bundle_parent(plan)?;
    let dir = tempfile::Builder::new()
        .prefix("stockade-gvisor-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(&parent)
        .map_err(io_err("create the gVisor bundle directory"))?;
    let bundle = dir.path();
    let mut config = plan.config.clone();
    if let Some(size) = terminal {
        crate::bundle::with_terminal(&mut config, size.ws_row, size.ws_col);
    }
    let bundle_text = bundle
        .to_str()
        .ok_or_else(|| io_err("name the bundle")(std::io::Error::other("not UTF-8")))?;
    fill_in(&mut config, bundle_text, netns);
    let text = serde_json::to_string(&config)
        .map_err(|e| io_err("write the OCI config")(std::io::Error::other(e)))?;
    let create = |name: &str, mode: u32, bytes: &[u8]| -> Result<(), Error> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(bundle.join(name))
            .map_err(io_err("write the gVisor bundle"))?;
        f.write_all(bytes)
            .map_err(io_err("write the gVisor bundle"))?;
        // The mode is exact, whatever the umask.
        f.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io_err("write the gVisor bundle"))
    };
    create("config.json", 0o600, text.as_bytes())?;
    create(EMPTY_FILE, 0o444, b"")?;
    create(UNREADABLE_FILE, 0o000, b"")?;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(bundle.join("state"))
        .map_err(io_err("write the gVisor bundle"))?;
    Ok(dir)
}

/// Puts the run's own paths into `config` where the plan left placeholders, in those fields
/// only: the bundle directory at the start of a mount's source, and the network namespaces'
/// paths (the held one, `netns`, and the caller's own). A command's argument or variable that
/// holds a placeholder's text stays as it is.
fn fill_in(config: &mut serde_json::Value, bundle: &str, netns: Option<&str>) {
    use serde_json::Value;
    if let Some(mounts) = config["mounts"].as_array_mut() {
        for m in mounts {
            let filled = (m["source"].as_str())
                .and_then(|s| s.strip_prefix(BUNDLE_PLACEHOLDER))
                .map(|rest| format!("{bundle}{rest}"));
            if let Some(source) = filled {
                m["source"] = Value::String(source);
            }
        }
    }
    if let Some(namespaces) = config["linux"]["namespaces"].as_array_mut() {
        for ns in namespaces {
            let path = match ns["path"].as_str() {
                Some(crate::bundle::NETNS_PLACEHOLDER) => netns.map(str::to_owned),
                Some(crate::bundle::CALLER_NETNS_PLACEHOLDER) => {
                    Some(format!("/proc/{}/ns/net", std::process::id()))
                }
                _ => None,
            };
            if let Some(path) = path {
                ns["path"] = Value::String(path);
            }
        }
    }
}

/// Where the bundle goes: a temporary directory outside every writable root. The command
/// must not reach the bundle (the mask sources) or runsc's state in it (which `runsc kill`
/// and `runsc delete` act on, as root for a root caller); `TMPDIR` could name one inside the
/// workspace.
fn bundle_parent(plan: &Plan) -> Result<std::path::PathBuf, Error> {
    let candidates = [
        std::env::temp_dir(),
        std::path::PathBuf::from("/tmp"),
        std::path::PathBuf::from("/var/tmp"),
    ];
    candidates
        .into_iter()
        .filter_map(|c| std::fs::canonicalize(c).ok())
        .find(|c| !plan.writable_roots.iter().any(|w| c.starts_with(w)))
        .ok_or_else(|| Error::Io {
            what: "find a directory for the gVisor bundle outside the writable paths".into(),
            cause: std::io::Error::other("TMPDIR, /tmp and /var/tmp all lie in a writable path"),
        })
}

/// Each mount destination is still what the plan saw: `runsc`'s gofer would create a missing
/// one on the host (as root for a root caller) and follow a symbolic link put in its place.
fn check_destinations(plan: &Plan) -> Result<(), Error> {
    for (path, kind) in &plan.destinations {
        match host_kind(path) {
            Some(k) if k == *kind => {}
            Some(_) => {
                return Err(Error::Changed {
                    path: path.clone(),
                    what: "its kind changed".into(),
                })
            }
            None => {
                return Err(Error::Changed {
                    path: path.clone(),
                    what: "it is gone or a symbolic link".into(),
                })
            }
        }
        // No symbolic link on the way either.
        if std::fs::canonicalize(path).ok().as_deref() != Some(path.as_path()) {
            return Err(Error::Changed {
                path: path.clone(),
                what: "a directory on its way is a symbolic link".into(),
            });
        }
    }
    Ok(())
}

/// The copies of existing git dirs' top levels (`gitstage`), in the bundle directory `dir`.
fn stage_git_dirs(plan: &Plan, dir: &Path) -> Result<Vec<crate::gitstage::Snapshot>, Error> {
    // The copies of existing git dirs' top levels (`gitstage`): a root caller's command owns
    // them (it writes them through runsc's file server, which checks as the Sentry does).
    let copy_owner = (!plan.caller.rootless).then_some((plan.caller.uid, plan.caller.gid));
    crate::gitstage::stage_all(&plan.staged, dir, copy_owner).map_err(|(path, e)| Error::Changed {
        path,
        what: format!("its top level could not be staged for the run: {e}"),
    })
}

/// How to run where the run's cgroup cannot be made.
const GROUP_FIX: &str = "stockade as root makes the run's cgroup at /stockade/<run id> in the cgroup v1 memory and cpu hierarchies below /sys/fs/cgroup: mount them writable; or run with --memory 0 and no --cpu (no such limits), or with --backend native";

/// A root caller's cgroup, with the run's limits, where the machine has cgroup v1.
fn make_group(plan: &Plan) -> Result<Option<crate::usage::Group>, Error> {
    // A root caller's cgroup, with the run's limits: made here, so its counters outlive
    // runsc (see `usage`). Removed when dropped; those of runs killed outright go first.
    // On a pure cgroup v2 machine runsc makes the group, from the config's resources, as
    // before (and removes it with its counters).
    let cgroups = Path::new(crate::usage::CGROUP_ROOT);
    let group_plan = plan.group.as_ref().filter(|_| crate::usage::is_v1(cgroups));
    if group_plan.is_some() {
        crate::usage::sweep_stale(cgroups, &crate::usage::process_alive);
    }
    group_plan
        .map(|g| crate::usage::Group::create(g, cgroups, crate::usage::machine_has_swap()))
        .transpose()
        .map_err(|e| Error::Unavailable {
            cause: format!("could not make the run's cgroup for its memory and CPU limits: {e}"),
            fix: GROUP_FIX.into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Only a mount's source and a namespace's path are filled in: a command's argument and
    /// variable holding a placeholder's text keep it (they were rewritten when the config's
    /// text was searched).
    #[test]
    fn placeholders_are_filled_in_their_fields_only() {
        let caller_netns = crate::bundle::CALLER_NETNS_PLACEHOLDER;
        let netns = crate::bundle::NETNS_PLACEHOLDER;
        let mut config = json!({
            "process": {
                "args": ["echo", BUNDLE_PLACEHOLDER, netns, caller_netns],
                "env": [format!("X={netns}")],
            },
            "mounts": [
                { "destination": "/w/.env", "source": format!("{BUNDLE_PLACEHOLDER}/unreadable") },
                { "destination": BUNDLE_PLACEHOLDER, "source": "/w" },
            ],
            "linux": { "namespaces": [
                { "type": "network", "path": netns },
                { "type": "network", "path": caller_netns },
                { "type": "pid" },
            ] },
        });
        let before = config.clone();
        fill_in(&mut config, "/tmp/b", Some("/proc/7/ns/net"));
        assert_eq!(config["process"], before["process"]);
        assert_eq!(config["mounts"][0]["source"], "/tmp/b/unreadable");
        assert_eq!(config["mounts"][1], before["mounts"][1]);
        let ns = &config["linux"]["namespaces"];
        assert_eq!(ns[0]["path"], "/proc/7/ns/net");
        assert_eq!(
            ns[1]["path"],
            format!("/proc/{}/ns/net", std::process::id())
        );
        assert_eq!(ns[2], json!({ "type": "pid" }));
    }
}
