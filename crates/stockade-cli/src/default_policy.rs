//! The policy files a command's policy is made of, lowest precedence first: the user's own
//! (`$XDG_CONFIG_HOME/stockade/policy.toml`, default `~/.config/stockade/policy.toml`), the
//! workspace's `stockade.toml` once approved with `stockade trust approve`, then `--policy
//! FILE`; the flags come last. `run`, `shell-prefix`, the runs `hook` wraps, `mcp`, `why`,
//! `snapshot`, `proxy` and `policy show` all read them here, so the prefix and hook recipes
//! need no flags.
//!
//! Fail closed: a user file that cannot be read or parsed refuses the command naming it
//! (`--no-user-policy` or `STOCKADE_NO_USER_POLICY=1` ignores it for one command); one that
//! another user could write, or that lies in a writable root of the run (a run could widen
//! the next run), is refused with the fix; where the file would be created in a writable root,
//! the run gets its directory as a protected path. The project's file is read only when the
//! workspace is approved and unchanged, and only with the bytes the approval pinned (read once,
//! hashed, compared with the record); `[[commands]]` in it are refused (the sandbox writes the
//! workspace; such entries belong in the user's file). A project file that is not approved is
//! not used, and the command says so on stderr.

use std::path::{Path, PathBuf};

use policy::origin::{Layer, LayerKind};
use policy::PolicyFile;
use stockade::{Error, RunRequest};

use crate::PolicyArgs;

/// The variable that ignores the user's policy file (any value but empty or `0`).
pub const NO_USER_POLICY: &str = "STOCKADE_NO_USER_POLICY";

/// The project's own policy file, at the top of the workspace.
const PROJECT_FILE: &str = "stockade.toml";

/// The policy files of one command.
#[derive(Debug, Default)]
pub struct Sources {
    /// The files read, lowest precedence first.
    pub layers: Vec<Layer>,
    /// Where the user's file is (or would be), read or ignored.
    pub user_path: Option<PathBuf>,
    /// Files found but not used, and why (printed on stderr by commands that run).
    pub notes: Vec<String>,
}

impl Sources {
    /// The files layered into one, as `policy::resolve` takes it.
    pub fn merged(&self) -> Option<PolicyFile> {
        self.layers
            .iter()
            .map(|l| l.file.clone())
            .reduce(PolicyFile::layered)
    }

    /// `user policy /home/u/.config/stockade/policy.toml, --policy x.toml`, or `None`.
    pub fn described(&self) -> Option<String> {
        (!self.layers.is_empty()).then(|| {
            self.layers
                .iter()
                .map(|l| format!("{} {}", l.kind, l.path.display()))
                .collect::<Vec<_>>()
                .join(", ")
        })
    }
}

/// Set by `shell-prefix`: the variable is not believed, only the flag
/// ([`ignore_env_switch`]).
static ENV_SWITCH_IGNORED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// `STOCKADE_NO_USER_POLICY` is not believed for the rest of this command: `shell-prefix`,
/// whose environment a project's `.claude/settings.json` (`env`) can set.
pub fn ignore_env_switch() {
    ENV_SWITCH_IGNORED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether the user's file is ignored: `--no-user-policy`, or `STOCKADE_NO_USER_POLICY` set
/// to anything but empty or `0` (not for `shell-prefix`, see [`ignore_env_switch`]).
fn user_ignored(args: &PolicyArgs) -> bool {
    args.no_user_policy
        || (!ENV_SWITCH_IGNORED.load(std::sync::atomic::Ordering::SeqCst)
            && std::env::var_os(NO_USER_POLICY).is_some_and(|v| !v.is_empty() && v != "0"))
}

/// Reads the policy files of `args` ([`Sources`]).
pub fn load(args: &PolicyArgs) -> Result<Sources, Error> {
    let mut sources = Sources::default();
    let path = policy::file::user_policy_path(
        std::env::var_os("XDG_CONFIG_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    );
    if let Some(path) = path.as_ref().filter(|_| !user_ignored(args)) {
        if let Some(file) = read_user(path)? {
            sources.layers.push(Layer {
                kind: LayerKind::User,
                path: path.clone(),
                file,
            });
        }
    }
    // Ignored or not, no run may write it for the next one ([`check_reach`]).
    sources.user_path = path;
    project(args, &mut sources)?;
    if let Some(p) = &args.policy {
        sources.layers.push(Layer {
            kind: LayerKind::Given,
            path: p.clone(),
            file: policy::read_policy_file(p)?,
        });
    }
    Ok(sources)
}

/// The user's file at `path`: `None` when there is none; refused when it cannot be read or
/// parsed, or when someone else could write it.
fn read_user(path: &Path) -> Result<Option<PolicyFile>, Error> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(policy::PolicyError::ReadFile {
                path: path.to_path_buf(),
                source,
            }
            .into())
        }
    };
    let me = rustix::process::geteuid().as_raw();
    let refuse = |reason: String| {
        Error::Usage {
        message: format!("refusing your user policy {}: {reason}", path.display()),
        hint: format!(
            "make it a regular file of yours that only you may write (`chmod go-w {}`), or ignore it for this command with --no-user-policy (or {NO_USER_POLICY}=1)",
            path.display()
        ),
    }
    };
    if !meta.is_file() {
        return Err(refuse("it is not a regular file".into()));
    }
    if meta.uid() != me && meta.uid() != 0 {
        return Err(refuse(format!(
            "it belongs to uid {}, neither you nor root",
            meta.uid()
        )));
    }
    if meta.mode() & 0o002 != 0 {
        return Err(refuse("every user may write it".into()));
    }
    // A second name elsewhere (a run that could write the home linked it into a workspace,
    // or a dotfile manager that hard-links): writing that name rewrites the policy (review).
    if meta.nlink() != 1 {
        return Err(refuse(format!(
            "it has {} names (hard links): another one may lie where a run can write it",
            meta.nlink()
        )));
    }
    // Its directory: another user who may write it could replace the file.
    if let Some(dir) = path.parent() {
        if let Ok(d) = std::fs::metadata(dir) {
            if d.uid() != me && d.uid() != 0 {
                return Err(refuse(format!(
                    "its directory {} belongs to uid {}, neither you nor root",
                    dir.display(),
                    d.uid()
                )));
            }
            if d.mode() & 0o002 != 0 && d.mode() & 0o1000 == 0 {
                return Err(refuse(format!(
                    "every user may write its directory {}",
                    dir.display()
                )));
            }
        }
    }
    policy::read_policy_file(path)
        .map(Some)
        .map_err(|e| user_file_error(path, e))
}

/// A user file's parse or read error, with how to ignore the file for one command.
fn user_file_error(path: &Path, e: policy::PolicyError) -> Error {
    let hint = e.hint().unwrap_or_default();
    Error::Usage {
        message: format!("your user policy: {e}"),
        hint: format!(
            "{hint}{}fix {} (`stockade policy check {}`), or ignore it for this command with --no-user-policy (or {NO_USER_POLICY}=1)",
            if hint.is_empty() { "" } else { "; " },
            path.display(),
            path.display()
        ),
    }
}

/// The workspace's `stockade.toml`, when the workspace is approved and unchanged and the
/// bytes read are the approved ones.
fn project(args: &PolicyArgs, sources: &mut Sources) -> Result<(), Error> {
    let given = args.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    // A missing workspace is the run's to refuse, with its own error.
    let Ok(ws) = std::fs::canonicalize(&given) else {
        return Ok(());
    };
    let path = ws.join(PROJECT_FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(());
    }
    // `--policy stockade.toml` is that file already, under the trust gate of `--policy`.
    if let Some(p) = &args.policy {
        if std::fs::canonicalize(p).is_ok_and(|p| p == path) {
            return Ok(());
        }
    }
    let store = stockade::trust::default_store_dir(
        std::env::var_os("XDG_STATE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    );
    let note = |why: &str| format!("{} is not used: {why}", path.display());
    let gate = stockade::trust::check_run(&ws, None, store.as_deref())?;
    match gate {
        stockade::trust::Gate::Approved { .. } => {}
        stockade::trust::Gate::Ungated => {
            sources.notes.push(note(
                "the workspace is not approved (read it, then `stockade trust approve` to use it)",
            ));
            return Ok(());
        }
        // The run's own trust check refuses it, naming what changed.
        stockade::trust::Gate::Refused(_) => {
            sources.notes.push(note(
                "the workspace's configuration differs from the approved one (`stockade trust status`)",
            ));
            return Ok(());
        }
    }
    let Some(store) = store else {
        return Ok(());
    };
    let record = stockade::trust::TrustStore::open(&store, &ws)?.load()?;
    let pinned = record.as_ref().and_then(|r| {
        r.files
            .iter()
            .find(|e| e.path == PROJECT_FILE)
            .and_then(|e| e.sha256.clone())
    });
    let bytes = std::fs::read(&path).map_err(|source| policy::PolicyError::ReadFile {
        path: path.clone(),
        source,
    })?;
    let digest = stockade::trust::sha256_hex(&bytes);
    if pinned.as_deref() != Some(digest.as_str()) {
        return Err(Error::Usage {
            message: format!(
                "{} changed while it was read: it is not the approved file",
                path.display()
            ),
            hint: format!(
                "`stockade trust status --workspace {}`, then approve it again if the change is yours",
                ws.display()
            ),
        });
    }
    let text = String::from_utf8(bytes).map_err(|e| policy::PolicyError::ReadFile {
        path: path.clone(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })?;
    let file = policy::parse_policy_file(&text, &path.display().to_string())?;
    if !file.commands.is_empty() {
        return Err(Error::Usage {
            message: format!(
                "[[commands]] in {}, which lies in the workspace: the sandbox could have written the entry",
                path.display()
            ),
            hint: "keep [[commands]] in your user policy (~/.config/stockade/policy.toml), outside every writable root".into(),
        });
    }
    refuse_project_powers(&file, &text, &path, &ws)?;
    sources.layers.push(Layer {
        kind: LayerKind::Project,
        path,
        file,
    });
    Ok(())
}

/// Prints the notes of `sources` on stderr (commands that run).
pub fn print_notes(sources: &Sources) {
    for n in &sources.notes {
        crate::output::errln!("stockade: note: {}", crate::output::shown_line(n));
    }
}

/// The user's file against the run's writable roots: refused when it is used and lies in one
/// (the run could rewrite the policy of the next run); when it is ignored, or would be created
/// there, its directory becomes a protected path of this run.
pub fn check_reach(
    policy: &mut policy::Policy,
    request: &RunRequest,
    sources: &Sources,
) -> Result<(), Error> {
    let Some(path) = &sources.user_path else {
        return Ok(());
    };
    let roots = stockade::writable_roots(policy, &request.invocation.place())?;
    // Both spellings: the given one and the real one, the nearest existing ancestor resolved
    // and the rest appended (`~/.config` may be a link into a writable root, and the file or
    // its directory may not exist yet).
    let real = real_path(path);
    let used = sources.layers.iter().any(|l| l.kind == LayerKind::User);
    let inside = |p: &Path| roots.iter().find(|r| policy::is_within(p, r));
    let hit = inside(path).or_else(|| inside(&real));
    match hit {
        Some(root) if used => Err(Error::Usage {
            message: format!(
                "refusing your user policy {}: it lies in {}, which this run can write, so a run could rewrite the policy of your next run",
                path.display(),
                root.display()
            ),
            hint: "keep it out of the run's writable roots (a narrower --workspace or --allow-write), or ignore it for this command with --no-user-policy (or STOCKADE_NO_USER_POLICY=1)".into(),
        }),
        Some(_) => {
            // Not there, or ignored for this run: the run must not make or change it. The
            // run also protects its real directory and pins its ancestors (the state list of
            // `stockade::run`, from `RunRequest::user_policy`).
            for dir in [path.parent(), real.parent()].into_iter().flatten() {
                let dir = dir.display().to_string();
                if !policy.filesystem.deny_write.contains(&dir) {
                    policy.filesystem.deny_write.push(dir);
                }
            }
            Ok(())
        }
        None => Ok(()),
    }
}

/// `path` with its nearest existing ancestor resolved to its real path and the rest appended.
fn real_path(path: &Path) -> PathBuf {
    stockade::resolve_existing_part(&policy::normalize_lexically(path))
}

/// What a project's `stockade.toml` may not grant, approved or not (review M3): its author is
/// the repository's, and `trust approve` pins bytes, not intent. Refused, naming the file and
/// the line: credentials (a `command` source runs on the host; any source sends a real
/// secret to the upstream the file names), variables passed from the host (`[env] allow`,
/// `passthrough`), reads or writes outside the workspace, `unprotect`, and the host's
/// network. These belong in the user's own policy file.
fn refuse_project_powers(
    file: &PolicyFile,
    text: &str,
    path: &Path,
    ws: &Path,
) -> Result<(), Error> {
    let line_of = |needle: &str| {
        text.lines()
            .position(|l| l.trim_start().starts_with(needle))
            .map(|i| i + 1)
    };
    let refuse = |line: Option<usize>, what: String| -> Result<(), Error> {
        Err(policy::PolicyError::ParseFile {
            origin: path.display().to_string(),
            location: line.map(|line| policy::Location { line, column: 1 }),
            message: format!("{what}: a project's stockade.toml may not grant it (its author is the repository's)"),
            hint: Some("put it in your user policy (~/.config/stockade/policy.toml) or pass it as a flag; remove it from stockade.toml and approve again (`stockade trust approve`)".into()),
        }
        .into())
    };
    if let Some(c) = file.credentials.first() {
        return refuse(
            line_of("[credentials").or_else(|| line_of("credentials")),
            format!("credential `{}`", c.name),
        );
    }
    for (key, names) in [
        ("allow", &file.env.allow),
        ("passthrough", &file.env.passthrough),
    ] {
        if let Some(n) = names.first() {
            return refuse(
                line_of(key),
                format!("`env.{key}` passes the host's variable {n} into the sandbox"),
            );
        }
    }
    if let Some(n) = file.filesystem.unprotect.first() {
        return refuse(
            file.lines
                .line("filesystem.unprotect", n)
                .or_else(|| line_of("unprotect")),
            format!("`unprotect` of {n}"),
        );
    }
    if file.network.mode == Some(policy::NetworkMode::Host) {
        return refuse(
            line_of("mode"),
            "the host's network (`mode = \"host\"`)".into(),
        );
    }
    for (key, list) in [
        ("allow_write", &file.filesystem.allow_write),
        ("allow_read", &file.filesystem.allow_read),
    ] {
        for entry in list {
            let p = Path::new(entry);
            let inside = if p.is_absolute() {
                policy::is_within(&policy::normalize_lexically(p), ws)
            } else {
                !entry.starts_with('~')
                    && !entry.contains('$')
                    && !p.components().any(|c| c == std::path::Component::ParentDir)
            };
            if !inside {
                return refuse(
                    file.lines
                        .line(&format!("filesystem.{key}"), entry)
                        .or_else(|| line_of(key)),
                    format!("`{key}` of {entry}, outside the workspace {}", ws.display()),
                );
            }
        }
    }
    Ok(())
}

/// What the workspace's `stockade.toml` grants, for `trust approve` to print (review M3):
/// the user approves what the file does, not only its bytes. Empty without the file.
pub fn project_grants(ws: &Path) -> Vec<String> {
    let path = ws.join(PROJECT_FILE);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    let mut out = vec![format!(
        "  {PROJECT_FILE} grants every run here (as a layer of your policy):"
    )];
    let file = match policy::parse_policy_file(&text, &path.display().to_string()) {
        Ok(f) => f,
        Err(e) => {
            out.push(format!(
                "    nothing: it does not parse ({e}), and runs will refuse it"
            ));
            return out;
        }
    };
    let mut item = |what: &str, list: Vec<String>| {
        if !list.is_empty() {
            out.push(format!("    {what:<14} {}", list.join(", ")));
        }
    };
    item("profile", file.profile.iter().cloned().collect());
    item("agent", file.agent.iter().cloned().collect());
    item("presets", file.presets.clone());
    item(
        "backend",
        file.backend
            .iter()
            .map(|b| format!("{b:?}").to_lowercase())
            .collect(),
    );
    item(
        "network mode",
        file.network
            .mode
            .iter()
            .map(|m| format!("{m:?}").to_lowercase())
            .collect(),
    );
    item("allow_domains", file.network.allow_domains.clone());
    item("allow_hosts", file.network.allow_hosts.clone());
    item("allow_write", file.filesystem.allow_write.clone());
    item("allow_read", file.filesystem.allow_read.clone());
    item("unprotect", file.filesystem.unprotect.clone());
    item("env set", file.env.set.keys().cloned().collect());
    item("env allow", file.env.allow.clone());
    item("env pass", file.env.passthrough.clone());
    item(
        "credentials",
        file.credentials.iter().map(|c| c.name.clone()).collect(),
    );
    item(
        "commands",
        file.commands.iter().map(|c| c.program.clone()).collect(),
    );
    item(
        "review",
        file.review.iter().map(|r| r.to_string()).collect(),
    );
    item("hints", file.hints.iter().map(|r| r.to_string()).collect());
    if out.len() == 1 {
        out.push("    nothing beyond your policy (limits and deny rules only, or empty)".into());
    }
    let refused = if !file.commands.is_empty() {
        Some("[[commands]] (they belong in your user policy)".to_string())
    } else {
        refuse_project_powers(&file, &text, &path, ws)
            .err()
            .map(|e| e.to_string())
    };
    if let Some(why) = refused {
        out.push(format!("  runs will refuse it: {why}"));
    }
    out
}
