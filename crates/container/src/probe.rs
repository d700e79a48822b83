//! What `doctor --backend podman|docker` checks, by trying the real command surface: the
//! engine's binary, the engine answering, and a hardened run of `true` in the default image
//! (which reads back every hardening flag before `true` starts, as each run does).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use sandbox::{Backend, Check, Ids, Kind, Limits, Mask, Network, ReadScope, Spec};

use crate::{ContainerBackend, Engine};

/// A run of `true` in a scratch workspace, with a masked directory and file in it.
pub(crate) fn probe_spec(workspace: PathBuf) -> Spec {
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    Spec {
        argv: vec!["true".into()],
        cwd: workspace.clone(),
        workspace: workspace.clone(),
        home: workspace.clone(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        hostname: "stockade".into(),
        read_scope: ReadScope::Host,
        read_grants: Vec::new(),
        writable_roots: vec![workspace.clone()],
        protected: Vec::new(),
        pins: Vec::new(),
        guard: Vec::new(),
        guard_sweep_only: Vec::new(),
        masks: vec![
            Mask {
                path: workspace.join("secret-dir"),
                kind: Kind::Dir,
                readable: false,
            },
            Mask {
                path: workspace.join("secret-file"),
                kind: Kind::File,
                readable: false,
            },
        ],
        private_dirs: Vec::new(),
        linked_secrets: Vec::new(),
        credential_routes: false,
        network: Network::None,
        limits: Limits {
            timeout: Some(Duration::from_secs(60)),
            pids: Some(64),
            ..Limits::default()
        },
        caller: Ids { uid, gid },
        review: None,
        identities: Default::default(),
    }
}

fn check(name: &'static str, ok: bool, detail: String, fix: Option<String>) -> Check {
    Check {
        name,
        ok,
        required: true,
        detail,
        fix,
    }
}

/// The checks, in order; each after a failed one is not tried.
pub(crate) fn checks(engine: Engine) -> Vec<Check> {
    let mut out = Vec::new();
    let binary = match crate::locate(engine, &[]) {
        Ok(b) => {
            out.push(check("engine", true, b.display().to_string(), None));
            b
        }
        Err(e) => {
            let fix = match &e {
                sandbox::RunError::Unavailable { fix, .. } => Some(fix.clone()),
                _ => None,
            };
            out.push(check("engine", false, e.to_string(), fix));
            return out;
        }
    };
    let version = Command::new(&binary)
        .args(["version", "--format", "{{.Server.Version}}"])
        .stdin(Stdio::null())
        .output();
    let answered = match version {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_owned()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_owned()),
        Err(e) => Err(e.to_string()),
    };
    match answered {
        Ok(v) => out.push(check(
            "engine answers",
            true,
            format!("{} {v}", engine.name()),
            None,
        )),
        Err(cause) => {
            out.push(check(
                "engine answers",
                false,
                cause,
                Some(match engine {
                    Engine::Docker => "start the daemon (`dockerd`, or `systemctl start docker`) and make its socket yours (the docker group)".into(),
                    Engine::Podman => "see `podman info`".into(),
                }),
            ));
            return out;
        }
    }
    // A hardened run of `true`: the image made if missing, every flag read back inside.
    let ws = match tempfile::Builder::new()
        .prefix("stockade-container-probe-")
        .tempdir()
    {
        Ok(d) => d,
        Err(e) => {
            out.push(check("hardened run", false, e.to_string(), None));
            return out;
        }
    };
    let _ = std::fs::create_dir(ws.path().join("secret-dir"));
    let _ = std::fs::write(ws.path().join("secret-dir/key"), b"k");
    let _ = std::fs::write(ws.path().join("secret-file"), b"k");
    if rustix::process::geteuid().is_root() {
        // A root caller's command runs as the workspace's owner.
        let _ = rustix::fs::chown(
            ws.path(),
            Some(rustix::process::Uid::from_raw(65534)),
            Some(rustix::process::Gid::from_raw(65534)),
        );
    }
    let spec = probe_spec(ws.path().to_path_buf());
    let result = ContainerBackend::new(engine)
        .plan(&spec, &format!("probe-{}", std::process::id()))
        .and_then(|p| {
            let (err_r, err_w) = std::io::pipe().map_err(|e| sandbox::RunError::io("pipe", e))?;
            let reader = std::thread::spawn(move || {
                let mut s = String::new();
                let _ = std::io::Read::read_to_string(&mut { err_r }, &mut s);
                s
            });
            let outcome = p.run(sandbox::Launch {
                io: sandbox::RunIo {
                    stdin: sandbox::Input::Null,
                    stdout: sandbox::Sink::Fd(
                        std::fs::File::open("/dev/null")
                            .map_err(|e| sandbox::RunError::io("open /dev/null", e))?
                            .into(),
                    ),
                    stderr: sandbox::Sink::Fd(err_w.into()),
                    control: sandbox::Cancel::new(),
                    process_signals: false,
                },
                options: sandbox::Options::default(),
                proxy: None,
                before_command: None,
            })?;
            Ok((outcome, reader.join().unwrap_or_default()))
        });
    match result {
        Ok((o, _)) if o.exit_code == 0 => out.push(check(
            "hardened run",
            true,
            format!(
                "read-only root, no capabilities, no-new-privileges, seccomp, no network, masks applied ({} ms)",
                o.duration.as_millis()
            ),
            None,
        )),
        Ok((o, err)) => out.push(check(
            "hardened run",
            false,
            format!("exit {}: {}", o.exit_code, err.trim()),
            Some("see the message; the engine must apply every flag of the run".into()),
        )),
        Err(e) => out.push(check("hardened run", false, e.to_string(), e.hint())),
    }
    out
}
