//! The host's Claude Code login as a credential (`--credential anthropic=claude-login`, see
//! [`policy::credentials::claude_login`]): its tokens are read on the host and stay here; the
//! worker's state directory gets a login of stand-ins.
//!
//! - The host's `.credentials.json` is refused when the command could write it (it lies in a
//!   writable root) or is a symbolic link (Claude Code itself refuses one), and is masked
//!   inside the run.
//! - Inside, `$CLAUDE_CONFIG_DIR/.credentials.json` (the worker's state directory, which the
//!   sandbox writes) is replaced by a login whose access and refresh tokens are stand-ins,
//!   with the real expiry, scopes and plan. The directory is reached beneath its writable root
//!   one component at a time without following a link, the file written as a new file and
//!   renamed over the name: a link the sandbox planted there is replaced, never followed.
//! - Tokens the proxy refreshes are written back to the host's file, in place (the same inode,
//!   so the mount masking it inside stays on it; its owner and mode kept; the other fields
//!   kept) when the host still holds the refresh token that was used, so the host's own Claude
//!   Code stays logged in. A file that could not be written so is refused before the run.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use net::credential::oauth::{Login, Store, Tokens};
use net::credential::{Route, Routes, Token};
use policy::credentials::{claude_login, parse_upstream, Credential};
use rustix::fs::{Mode, OFlags};
use zeroize::Zeroizing;

use crate::credentials::{unavailable, Context};
use crate::Error;

/// The largest login file read.
const MAX_FILE: u64 = 1024 * 1024;

/// The fields of the host's `claudeAiOauth` copied inside: what Claude Code reads about its
/// login, none of them a secret. Any other field (one a later Claude Code adds) stays out.
const COPIED: &[&str] = &[
    "expiresAt",
    "scopes",
    "subscriptionType",
    "subscriptionTypeSource",
    "subscriptionTypeVerifiedAt",
    "rateLimitTier",
    "refreshTokenExpiresAt",
    "clientId",
    "accountUuid",
    "organizationUuid",
];

/// `~/...` in the caller's home.
fn expand(spelled: &str, home: &Path) -> PathBuf {
    match spelled.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None => PathBuf::from(spelled),
    }
}

/// The file's JSON, read without following a link.
fn read_json(path: &Path) -> Result<serde_json::Value, String> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        if e == rustix::io::Errno::LOOP {
            format!(
                "{} is a symbolic link (Claude Code refuses one too)",
                path.display()
            )
        } else {
            format!("cannot open {}: {e}", path.display())
        }
    })?;
    let mut text = Zeroizing::new(Vec::new());
    std::fs::File::from(fd)
        .take(MAX_FILE)
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_slice(&text).map_err(|_| format!("{} is not JSON", path.display()))
}

/// What a login file holds: its tokens and the `claudeAiOauth` object.
struct HostLogin {
    tokens: Tokens,
    oauth: serde_json::Map<String, serde_json::Value>,
}

fn parse_login(v: &serde_json::Value) -> Result<HostLogin, String> {
    let oauth = v
        .get("claudeAiOauth")
        .and_then(|o| o.as_object())
        .ok_or("it holds no Claude Code login (`claudeAiOauth`)")?;
    let text = |k: &str| {
        oauth
            .get(k)
            .and_then(|t| t.as_str())
            .filter(|t| !t.is_empty())
            .map(|t| Zeroizing::new(t.to_owned()))
    };
    let access = text("accessToken").ok_or("the login holds no access token (logged out?)")?;
    let refresh = text("refreshToken").ok_or("the login holds no refresh token")?;
    let expires_at_ms = oauth
        .get("expiresAt")
        .and_then(|e| e.as_u64())
        .ok_or("the login holds no expiresAt")?;
    Ok(HostLogin {
        tokens: Tokens {
            access,
            refresh,
            expires_at_ms,
            scopes: None,
        },
        oauth: oauth.clone(),
    })
}

/// The host's login, refused when the command could write it.
fn read_host(c: &Credential, file: &str, ctx: &Context) -> Result<(PathBuf, HostLogin), Error> {
    let path = expand(file, ctx.home);
    crate::credentials::refuse_writable(c, &path, ctx)?;
    let hint = "log in on the host with `claude` (then /login), or name the login file: --credential anthropic=claude-login:PATH";
    let v = read_json(&path).map_err(|why| unavailable(c, why, hint))?;
    let login = parse_login(&v)
        .map_err(|why| unavailable(c, format!("{}: {why}", path.display()), hint))?;
    Ok((path, login))
}

/// The access token (the route's value), for [`crate::credentials`]' reading of sources.
pub(crate) fn read_access(
    c: &Credential,
    file: &str,
    ctx: &Context,
) -> Result<Zeroizing<String>, Error> {
    Ok(read_host(c, file, ctx)?.1.tokens.access)
}

/// The host's login file as the login's [`Store`].
struct HostFile {
    path: PathBuf,
}

impl Store for HostFile {
    fn load(&self) -> Option<Tokens> {
        parse_login(&read_json(&self.path).ok()?)
            .ok()
            .map(|l| l.tokens)
    }

    fn save(&self, tokens: &Tokens, replaced: &str) -> Result<(), String> {
        let file = open_host_rw(&self.path)?;
        let mut text = Zeroizing::new(Vec::new());
        (&file)
            .take(MAX_FILE)
            .read_to_end(&mut text)
            .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
        let mut v: serde_json::Value = serde_json::from_slice(&text)
            .map_err(|_| format!("{} is not JSON", self.path.display()))?;
        let Some(oauth) = v.get_mut("claudeAiOauth").and_then(|o| o.as_object_mut()) else {
            return Err(format!("{} no longer holds a login", self.path.display()));
        };
        // The host's own Claude Code refreshed meanwhile: its login is newer, left as it is.
        if oauth.get("refreshToken").and_then(|r| r.as_str()) != Some(replaced) {
            return Ok(());
        }
        oauth.insert("accessToken".into(), tokens.access.as_str().into());
        oauth.insert("refreshToken".into(), tokens.refresh.as_str().into());
        oauth.insert("expiresAt".into(), tokens.expires_at_ms.into());
        if let Some(scopes) = &tokens.scopes {
            oauth.insert("scopes".into(), scopes.clone().into());
        }
        let text = Zeroizing::new(v.to_string().into_bytes());
        write_in_place(&file, &text).map_err(|e| format!("write {}: {e}", self.path.display()))
    }
}

/// Opens the host's login file to rewrite it in place: beneath its directory, through no link
/// at its name, never blocking on a FIFO; a regular file with one link, the caller's (a root
/// caller may write a user's: written in place, it stays the user's).
///
/// In place, not a new file renamed over it: inside the run the file is masked by a mount on
/// its inode, and a rename would put a new, unmasked file (the renewed real tokens) at the
/// name the sandbox sees. The inode, its owner and its mode stay.
fn open_host_rw(path: &Path) -> Result<std::fs::File, String> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path
        .file_name()
        .ok_or_else(|| format!("{} names no file", path.display()))?;
    let dirfd = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("open {}: {e}", dir.display()))?;
    let fd = rustix::fs::openat(
        &dirfd,
        name,
        OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("cannot open {} for writing: {e}", path.display()))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("stat {}: {e}", path.display()))?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if st.st_nlink != 1 {
        return Err(format!(
            "{} has {} hard links (another name could be inside the run, unmasked)",
            path.display(),
            st.st_nlink
        ));
    }
    let me = rustix::process::geteuid();
    if st.st_uid != me.as_raw() && !me.is_root() {
        return Err(format!(
            "{} belongs to uid {}, not to you (uid {})",
            path.display(),
            st.st_uid,
            me.as_raw()
        ));
    }
    Ok(std::fs::File::from(fd))
}

/// Rewrites the open file with `bytes`: written from the start, cut to their length, synced.
fn write_in_place(file: &std::fs::File, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(bytes, 0)?;
    file.set_len(bytes.len() as u64)?;
    file.sync_all()
}

/// Writes `bytes` as `name` beneath `dir`: a new file (mode 0600, never through a link),
/// renamed over the name (whatever is there, a link included, is replaced).
fn replace(dir: &OwnedFd, name: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).map_err(|e| std::io::Error::other(e.to_string()))?;
    let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let mut tmp = name.as_os_str().to_owned();
    tmp.push(format!(".stockade-{suffix}"));
    let fd = rustix::fs::openat(
        dir,
        tmp.as_os_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut f = std::fs::File::from(fd);
    let written = f.write_all(bytes).and_then(|()| f.sync_all());
    drop(f);
    let renamed = written.and_then(|()| {
        rustix::fs::renameat(dir, tmp.as_os_str(), dir, name).map_err(std::io::Error::from)
    });
    if renamed.is_err() {
        let _ = rustix::fs::unlinkat(dir, tmp.as_os_str(), rustix::fs::AtFlags::empty());
    }
    renamed
}

/// The login file for the worker's state directory: stand-ins, and the real login's
/// non-secret fields.
pub(crate) struct Inside {
    name: String,
    json: Zeroizing<String>,
}

/// Reads the host's login and makes the route, the login the proxy holds, and the file for
/// inside.
pub(crate) fn load(
    c: &Credential,
    file: &str,
    token_url: &str,
    ctx: &Context,
) -> Result<(Route, Login, Inside), Error> {
    let (path, host) = read_host(c, file, ctx)?;
    // A refresh spends the host's refresh token: a file the renewed login cannot be written
    // into would be left logged out, so it is checked before the run.
    open_host_rw(&path).map_err(|why| {
        unavailable(
            c,
            format!("the renewed login is written back into the host's file, and {why}"),
            format!(
                "make {} a file of your own you can write (chmod u+w; one name, no hard links), or log in again with `claude` on the host",
                path.display()
            ),
        )
    })?;
    let upstream = parse_upstream(&c.route.upstream)
        .map_err(|why| unavailable(c, why, "fix the route's `upstream` in the policy file"))?;
    let endpoint = parse_upstream(token_url)
        .map_err(|why| unavailable(c, why, "fix the source's `token_url`"))?;
    let scopes: Vec<String> = host
        .oauth
        .get("scopes")
        .and_then(|s| s.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let client_id = host
        .oauth
        .get("clientId")
        .and_then(|s| s.as_str())
        .unwrap_or(claude_login::CLIENT_ID)
        .to_owned();
    let secret = net::credential::Secret::new(host.tokens.access.clone())
        .map_err(|why| unavailable(c, why, "log in again with `claude` on the host"))?;
    let login = Login::new(
        c.name.clone(),
        (
            claude_login::TOKEN_HOST.to_owned(),
            claude_login::TOKEN_PORT,
            claude_login::TOKEN_PATH.to_owned(),
        ),
        endpoint,
        client_id,
        scopes,
        host.tokens,
        Box::new(HostFile { path }),
    )
    .map_err(|why| unavailable(c, why, "log in again with `claude` on the host"))?;
    // Claude Code's own calls to its API host (its profile after a refresh) go on the route.
    let mut login = login;
    login.api_host = Some((claude_login::API_HOST.to_owned(), claude_login::API_PORT));
    let (access, refresh) = login.first_standins();
    let mut oauth = serde_json::Map::new();
    oauth.insert("accessToken".into(), access.as_str().into());
    oauth.insert("refreshToken".into(), refresh.as_str().into());
    for k in COPIED {
        if let Some(v) = host.oauth.get(*k) {
            oauth.insert((*k).to_owned(), v.clone());
        }
    }
    let json = Zeroizing::new(serde_json::json!({ "claudeAiOauth": oauth }).to_string());
    // The route's own stand-in is not used (the login's are); the route needs one.
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::Io {
        what: "make a credential stand-in".into(),
        cause: std::io::Error::other(e.to_string()),
    })?;
    let route = Route {
        name: c.name.clone(),
        upstream,
        inject: c.route.inject.clone(),
        token: Token::from_random(bytes),
        secret,
        deny_paths: c.route.deny_paths.clone(),
    };
    Ok((
        route,
        login,
        Inside {
            name: c.name.clone(),
            json,
        },
    ))
}

/// The variable naming the worker's Claude Code state directory.
const CONFIG_DIR_ENV: &str = "CLAUDE_CONFIG_DIR";

/// Puts the stand-in login in the worker's state directory (`CLAUDE_CONFIG_DIR` of the run's
/// environment, in a writable root).
pub(crate) fn place(
    inside: &Inside,
    env: &[(String, String)],
    writable_roots: &[PathBuf],
) -> Result<(), Error> {
    let refuse = |reason: String, hint: &str| Error::Credential {
        name: inside.name.clone(),
        source_text: "claude-login".into(),
        reason,
        hint: hint.into(),
    };
    let hint = "run Claude Code with a state directory of its own: --agent claude-code, or --allow-write DIR --env CLAUDE_CONFIG_DIR=DIR";
    let Some((_, dir)) = env.iter().find(|(k, _)| k == CONFIG_DIR_ENV) else {
        return Err(refuse(
            "the login goes in the worker's Claude Code state directory, and the run sets no CLAUDE_CONFIG_DIR".into(),
            hint,
        ));
    };
    let dir = PathBuf::from(dir);
    if !dir.is_absolute() || policy::normalize_lexically(&dir) != dir {
        return Err(refuse(
            format!(
                "CLAUDE_CONFIG_DIR={} is not a plain absolute path",
                dir.display()
            ),
            hint,
        ));
    }
    let Some(root) = writable_roots
        .iter()
        .filter(|r| policy::is_within(&dir, r))
        .max_by_key(|r| r.as_os_str().len())
    else {
        return Err(refuse(
            format!(
                "CLAUDE_CONFIG_DIR={} is not in a writable path: Claude Code could not keep its login there",
                dir.display()
            ),
            hint,
        ));
    };
    let io = |what: String, e: std::io::Error| refuse(format!("{what}: {e}"), hint);
    // The root through no link at all: a run in a wider root (the home as workspace) can
    // swap the state directory for a link between the plan's check and this open.
    let mut fd = rustix::fs::openat2(
        rustix::fs::CWD,
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| {
        io(
            format!(
                "open {} through no link (is a part of it a link?)",
                root.display()
            ),
            e.into(),
        )
    })?;
    // Below the root the sandbox decides what is there: no link is followed.
    let below = dir.strip_prefix(root).unwrap_or(Path::new(""));
    for part in below.components() {
        let Component::Normal(name) = part else {
            return Err(refuse(
                format!("{} has an odd component", dir.display()),
                hint,
            ));
        };
        fd = rustix::fs::openat(
            &fd,
            name,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            io(
                format!(
                    "open {} without following a link (is a part of it a link, or missing?)",
                    dir.display()
                ),
                e.into(),
            )
        })?;
    }
    replace(&fd, Path::new(".credentials.json"), inside.json.as_bytes()).map_err(|e| {
        refuse(
            format!("write {}/.credentials.json: {e}", dir.display()),
            &format!(
                "remove or move {}/.credentials.json (something that is not a file is in the way: stockade puts the run's login there), then run again",
                dir.display()
            ),
        )
    })
}

/// `--agent claude-code` with the preset's key source (`ANTHROPIC_API_KEY`) unset in the
/// caller's environment: the host's Claude Code login, when there is one
/// (`$CLAUDE_CONFIG_DIR/.credentials.json` as the caller sets it, else
/// `~/.claude/.credentials.json`), so that a subscription user needs no flag. `None`: the
/// policy as it is (a key is set, the source was chosen, or no Claude Code preset). With
/// neither a key nor a login the refusal names both fixes. Chosen before the masks are made,
/// so the login file is masked as a named one is.
pub(crate) fn choose(
    policy: &policy::Policy,
    caller_env: &[(std::ffi::OsString, std::ffi::OsString)],
    home: &Path,
) -> Result<Option<policy::Policy>, Error> {
    const KEY: &str = "ANTHROPIC_API_KEY";
    if !policy.presets.iter().any(|p| p == "claude-code") {
        return Ok(None);
    }
    let Some(at) = policy.credentials.iter().position(|c| {
        c.name == "anthropic" && c.source == policy::credentials::Source::Env(KEY.into())
    }) else {
        return Ok(None);
    };
    let set = |name: &str| {
        caller_env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    if set(KEY).is_some() {
        return Ok(None);
    }
    let file = match set("CLAUDE_CONFIG_DIR") {
        Some(dir) if Path::new(&dir).is_absolute() => Path::new(&dir)
            .join(".credentials.json")
            .display()
            .to_string(),
        _ => home.join(".claude/.credentials.json").display().to_string(),
    };
    let c = &policy.credentials[at];
    if std::fs::symlink_metadata(&file).is_err() {
        return Err(Error::Credential {
            name: c.name.clone(),
            source_text: c.source.describe(),
            reason: format!(
                "`{KEY}` is not set in your environment, and there is no Claude Code login on this host ({file})"
            ),
            hint: "export ANTHROPIC_API_KEY, or log in with `claude` on the host (a subscription: the worker then uses that login, its tokens kept on the host), or name the login file: --credential anthropic=claude-login:PATH".into(),
        });
    }
    let mut chosen = policy.clone();
    let c = &mut chosen.credentials[at];
    c.source = policy::credentials::Source::ClaudeLogin {
        file,
        token_url: claude_login::TOKEN_URL.to_owned(),
    };
    claude_login::adapt(c);
    Ok(Some(chosen))
}

/// Refuses a sandbox environment or command line holding a real token of a login.
pub(crate) fn refuse_inside(
    env: &[(String, String)],
    argv: &[String],
    routes: &Routes,
) -> Result<(), Error> {
    for login in routes.logins.iter() {
        for value in login.held_values() {
            let holds = |v: &str| v.contains(value.as_str());
            if let Some((name, _)) = env.iter().find(|(_, v)| holds(v)) {
                return Err(Error::Usage {
                    message: format!(
                        "the environment passed inside holds a real token of credential `{}` (in `{name}`)",
                        login.route
                    ),
                    hint: format!("drop `{name}` from --env/[env]: the login inside holds stand-ins"),
                });
            }
            if let Some(i) = argv.iter().position(|a| holds(a)) {
                return Err(Error::Usage {
                    message: format!(
                        "the command line holds a real token of credential `{}` (argument {i})",
                        login.route
                    ),
                    hint: "leave the login's tokens out of the command line".into(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stand_in_login_replaces_a_planted_link_and_never_follows_one() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = std::fs::canonicalize(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let state = root.join("state");
        let victim = root.join("victim.json");
        std::fs::create_dir(&state).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&victim, "host file").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&victim, state.join(".credentials.json"))
            .unwrap_or_else(|e| panic!("{e}"));
        let inside = Inside {
            name: "anthropic".into(),
            json: Zeroizing::new("{\"claudeAiOauth\":{}}".into()),
        };
        let env = vec![(CONFIG_DIR_ENV.to_owned(), state.display().to_string())];
        place(&inside, &env, std::slice::from_ref(&root)).unwrap_or_else(|e| panic!("{e}"));
        // The link was replaced by the file; what it pointed at is untouched.
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap_or_default(),
            "host file"
        );
        let meta = std::fs::symlink_metadata(state.join(".credentials.json"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(meta.is_file());
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
            0o600
        );
        // A link on the way to the state directory: refused, nothing written.
        let elsewhere = root.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap_or_else(|e| panic!("{e}"));
        let linked = root.join("linked");
        std::os::unix::fs::symlink(&elsewhere, &linked).unwrap_or_else(|e| panic!("{e}"));
        let env = vec![(CONFIG_DIR_ENV.to_owned(), linked.display().to_string())];
        assert!(place(&inside, &env, std::slice::from_ref(&root)).is_err());
        assert!(!elsewhere.join(".credentials.json").exists());
        // Control: the same directory, not through the link, is written.
        let env = vec![(CONFIG_DIR_ENV.to_owned(), elsewhere.display().to_string())];
        place(&inside, &env, std::slice::from_ref(&root)).unwrap_or_else(|e| panic!("{e}"));
        assert!(elsewhere.join(".credentials.json").is_file());
        // Outside every writable root, or no CLAUDE_CONFIG_DIR: refused.
        assert!(place(&inside, &env, &[]).is_err());
        assert!(place(&inside, &[], std::slice::from_ref(&root)).is_err());
    }

    #[test]
    fn the_preset_without_a_key_takes_the_host_login_and_without_either_names_both() {
        use std::ffi::OsString;
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut p = policy::profile("workspace-write").unwrap_or_else(|e| panic!("{e}"));
        // No Claude Code preset: nothing chosen.
        assert!(matches!(choose(&p, &[], home.path()), Ok(None)));
        policy::presets::apply(&mut p, &["claude-code".into()]).unwrap_or_else(|e| panic!("{e}"));
        // Neither a key nor a login: refused, naming both fixes.
        let Err(e) = choose(&p, &[], home.path()) else {
            panic!("chose without a login");
        };
        assert_eq!(e.code(), "E_CREDENTIAL_UNAVAILABLE");
        assert!(
            e.hint().contains("export ANTHROPIC_API_KEY"),
            "{}",
            e.hint()
        );
        assert!(e.hint().contains("log in with `claude`"), "{}", e.hint());
        // A login: taken, its file named; a key: the policy as it is.
        let login = home.path().join(".claude/.credentials.json");
        std::fs::create_dir_all(home.path().join(".claude")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&login, "{}").unwrap_or_else(|e| panic!("{e}"));
        let chosen = choose(&p, &[], home.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("the login was not chosen"));
        assert_eq!(
            chosen.credentials[0].source,
            policy::credentials::Source::ClaudeLogin {
                file: login.display().to_string(),
                token_url: claude_login::TOKEN_URL.into()
            }
        );
        let key = [(
            OsString::from("ANTHROPIC_API_KEY"),
            OsString::from("sk-ant-k"),
        )];
        assert!(matches!(choose(&p, &key, home.path()), Ok(None)));
        // The caller's CLAUDE_CONFIG_DIR is where the host's Claude Code keeps it.
        let other = home.path().join("cc");
        let env = [(
            OsString::from("CLAUDE_CONFIG_DIR"),
            other.clone().into_os_string(),
        )];
        assert!(choose(&p, &env, home.path()).is_err());
        std::fs::create_dir_all(&other).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(other.join(".credentials.json"), "{}").unwrap_or_else(|e| panic!("{e}"));
        let chosen = choose(&p, &env, home.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("the login was not chosen"));
        assert!(chosen.credentials[0]
            .source
            .describe()
            .contains("/cc/.credentials.json"));
    }

    #[test]
    fn refreshed_tokens_are_saved_on_the_host_only_over_the_refresh_token_used() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(".credentials.json");
        let original = serde_json::json!({
            "claudeAiOauth": {"accessToken": "A1", "refreshToken": "R1", "expiresAt": 5,
                "scopes": ["user:inference"], "subscriptionType": "max"},
            "mcpOAuth": {"x": {"accessToken": "M"}}
        });
        std::fs::write(&path, original.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let store = HostFile { path: path.clone() };
        let tokens = |a: &str, r: &str| Tokens {
            access: Zeroizing::new(a.into()),
            refresh: Zeroizing::new(r.into()),
            expires_at_ms: 99,
            scopes: None,
        };
        store
            .save(&tokens("A2", "R2"), "R1")
            .unwrap_or_else(|e| panic!("{e}"));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_default())
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v["claudeAiOauth"]["accessToken"], "A2");
        assert_eq!(v["claudeAiOauth"]["refreshToken"], "R2");
        assert_eq!(v["claudeAiOauth"]["expiresAt"], 99);
        assert_eq!(v["claudeAiOauth"]["subscriptionType"], "max");
        assert_eq!(v["mcpOAuth"]["x"]["accessToken"], "M");
        // The host renewed meanwhile (R2 is not what it holds now): left as it is.
        store
            .save(&tokens("A3", "R3"), "R1")
            .unwrap_or_else(|e| panic!("{e}"));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_default())
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v["claudeAiOauth"]["accessToken"], "A2");
        let loaded = store.load().unwrap_or_else(|| panic!("no login"));
        assert_eq!(loaded.refresh.as_str(), "R2");
    }

    #[test]
    fn the_write_back_keeps_the_inode_its_owner_and_mode_and_refuses_odd_files() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(".credentials.json");
        let login = r#"{"claudeAiOauth":{"accessToken":"A1","refreshToken":"R1","expiresAt":5},"pad":"a longer file than the one written back, cut to its length"}"#;
        std::fs::write(&path, login).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o640))
            .unwrap_or_else(|e| panic!("{e}"));
        let before = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{e}"));
        // A reader holding the file open (as a mount on its inode holds it) sees the renewed
        // login: the file it has is the file written.
        let held = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let store = HostFile { path: path.clone() };
        let tokens = Tokens {
            access: Zeroizing::new("A2".into()),
            refresh: Zeroizing::new("R2".into()),
            expires_at_ms: 99,
            scopes: None,
        };
        store.save(&tokens, "R1").unwrap_or_else(|e| panic!("{e}"));
        let after = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((before.dev(), before.ino()), (after.dev(), after.ino()));
        assert_eq!((before.uid(), before.mode()), (after.uid(), after.mode()));
        let mut seen = String::new();
        (&held)
            .read_to_string(&mut seen)
            .unwrap_or_else(|e| panic!("{e}"));
        let v: serde_json::Value =
            serde_json::from_str(&seen).unwrap_or_else(|e| panic!("{e}: {seen}"));
        assert_eq!(v["claudeAiOauth"]["refreshToken"], "R2");
        assert_eq!(
            v["pad"],
            "a longer file than the one written back, cut to its length"
        );
        // Control: the previous write-back (a new file renamed over the name) leaves the held
        // inode with the old login and puts another inode at the name.
        let dirfd = rustix::fs::open(dir.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty())
            .unwrap_or_else(|e| panic!("{e}"));
        replace(&dirfd, Path::new(".credentials.json"), b"{}").unwrap_or_else(|e| panic!("{e}"));
        let renamed = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(after.ino(), renamed.ino());
        // A hard link (a second name, perhaps inside the run), a FIFO (never blocks), a
        // symbolic link, a directory: refused, before the run and at a write-back.
        std::fs::hard_link(&path, dir.path().join("other")).unwrap_or_else(|e| panic!("{e}"));
        let e = open_host_rw(&path).err().unwrap_or_default();
        assert!(e.contains("hard links"), "{e}");
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(open_host_rw(&fifo).is_err());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("fifo"), &link)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(open_host_rw(&link).is_err());
        assert!(open_host_rw(dir.path()).is_err());
        // Control: a plain file of the caller's opens.
        let plain = dir.path().join("plain.json");
        std::fs::write(&plain, "{}").unwrap_or_else(|e| panic!("{e}"));
        assert!(open_host_rw(&plain).is_ok());
    }

    #[test]
    fn a_state_directory_root_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let base = std::fs::canonicalize(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let victim = base.join("victim");
        std::fs::create_dir(&victim).unwrap_or_else(|e| panic!("{e}"));
        // The writable root itself swapped for a link (a run with a wider root did it).
        let root = base.join("state");
        std::os::unix::fs::symlink(&victim, &root).unwrap_or_else(|e| panic!("{e}"));
        let inside = Inside {
            name: "anthropic".into(),
            json: Zeroizing::new("{}".into()),
        };
        let env = vec![(CONFIG_DIR_ENV.to_owned(), root.display().to_string())];
        let e = place(&inside, &env, std::slice::from_ref(&root))
            .err()
            .unwrap_or_else(|| panic!("placed through a link"));
        assert!(e.to_string().contains("through no link"), "{e}");
        assert!(!victim.join(".credentials.json").exists());
        // A link on the way to the root too.
        std::fs::create_dir(victim.join("s")).unwrap_or_else(|e| panic!("{e}"));
        let via = root.join("s");
        let env = vec![(CONFIG_DIR_ENV.to_owned(), via.display().to_string())];
        assert!(place(&inside, &env, std::slice::from_ref(&via)).is_err());
        assert!(!victim.join("s/.credentials.json").exists());
        // Control: the directory itself as the root is written.
        std::fs::remove_file(&root).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(&root).unwrap_or_else(|e| panic!("{e}"));
        let env = vec![(CONFIG_DIR_ENV.to_owned(), root.display().to_string())];
        place(&inside, &env, std::slice::from_ref(&root)).unwrap_or_else(|e| panic!("{e}"));
        assert!(root.join(".credentials.json").is_file());
        // Something that is not a file at the login's name: the hint says to move it.
        std::fs::remove_file(root.join(".credentials.json")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join(".credentials.json/x")).unwrap_or_else(|e| panic!("{e}"));
        let e = place(&inside, &env, std::slice::from_ref(&root))
            .err()
            .unwrap_or_else(|| panic!("placed over a directory"));
        assert!(e.hint().contains("remove or move"), "{}", e.hint());
    }
}
