//! The credentials stage: each credential's real value is read on the host from its source,
//! a per-run stand-in is made for it, and the spec's environment gets the stand-ins and the
//! routes' URLs at the proxy. The real values go to the proxy only (see [`net::credential`]).
//!
//! A source the command could have changed is refused: a file in a writable root (the
//! command could put its own key there and read the user's requests in its own account), a
//! `command` whose program lies in one. Once a real value is held, this process is made not
//! dumpable (no core file, no `/proc/<pid>/mem` for same-user processes) as soon as the sandbox's
//! first process exists.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use net::credential::{Masked, Route, Routes, Secret, Token};
use policy::credentials::{parse_upstream, Credential, Source, ROUTE_PREFIX};
use zeroize::Zeroizing;

use crate::Error;

/// Outputs of `command` sources, reused until their TTL ends. One per process that runs
/// several runs (a library user, a server); each `stockade run` starts with an empty one.
#[derive(Default)]
pub struct SourceCache {
    entries: Mutex<Vec<Cached>>,
}

struct Cached {
    argv: Vec<String>,
    until: Instant,
    value: Zeroizing<String>,
}

impl std::fmt::Debug for SourceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SourceCache(<redacted>)")
    }
}

/// How long a `command` source may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// What the run gets: the routes for the proxy, the variables for the spec, and the
/// directory holding the per-run CA's certificate (removed after the run).
pub(crate) struct Loaded {
    pub routes: Routes,
    pub env: Vec<(String, String)>,
    pub ca_dir: Option<CaDir>,
    /// Claude Code logins of stand-ins, for the worker's state directory.
    pub login_files: Vec<crate::claude_login::Inside>,
}

/// The per-run CA's certificate on disk, for the sandbox's trust stores: `ca.pem` (the CA
/// alone) and `bundle.pem` (the system's roots and the CA). Public data; removed on drop.
pub(crate) struct CaDir {
    pub dir: PathBuf,
}

impl Drop for CaDir {
    fn drop(&mut self) {
        // Does not follow a link put in its place.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where the system's roots are (Debian, Fedora, Alpine, SUSE spellings).
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// Variables that make clients trust a bundle file (the whole set of roots).
const BUNDLE_ENV: &[&str] = &[
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "CARGO_HTTP_CAINFO",
    "PIP_CERT",
    "npm_config_cafile",
];

/// Writes the CA for the sandbox, in a new directory under `/var/tmp` (the sandbox's `/tmp`
/// is its own), and returns the variables that point clients at it.
fn write_ca(pem: &str) -> Result<(CaDir, Vec<(String, String)>), Error> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let io = |what: &str, e: std::io::Error| Error::Io {
        what: what.into(),
        cause: e,
    };
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).map_err(|e| {
        io(
            "name the CA directory",
            std::io::Error::other(e.to_string()),
        )
    })?;
    let name: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let dir = PathBuf::from(format!("/var/tmp/stockade-ca-{name}"));
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&dir)
        .map_err(|e| io("create the per-run CA directory in /var/tmp", e))?;
    let ca_dir = CaDir { dir: dir.clone() };
    let system = SYSTEM_BUNDLES
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    for (file, text) in [
        ("ca.pem", pem.to_owned()),
        ("bundle.pem", format!("{system}\n{pem}")),
    ] {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dir.join(file))
            .map_err(|e| io("write the per-run CA", e))?;
        std::io::Write::write_all(&mut f, text.as_bytes())
            .map_err(|e| io("write the per-run CA", e))?;
    }
    let bundle = dir.join("bundle.pem").display().to_string();
    let mut env: Vec<(String, String)> = BUNDLE_ENV
        .iter()
        .map(|v| (v.to_string(), bundle.clone()))
        .collect();
    env.push((
        "NODE_EXTRA_CA_CERTS".into(),
        dir.join("ca.pem").display().to_string(),
    ));
    Ok((ca_dir, env))
}

/// A sentinel for a real value: as long, random letters and digits.
fn sentinel(len: usize) -> Result<Zeroizing<String>, Error> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = Zeroizing::new(vec![0u8; len]);
    getrandom::fill(&mut bytes).map_err(|e| Error::Io {
        what: "make a credential sentinel".into(),
        cause: std::io::Error::other(e.to_string()),
    })?;
    Ok(Zeroizing::new(
        bytes
            .iter()
            .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
            .collect(),
    ))
}

/// How many bytes at the end of a stand-in are [`stand_in_tail`]: its last 20 characters.
const STAND_IN_TAIL_BYTES: usize = 10;

/// The last 20 characters of route `route`'s stand-ins, as bytes: the same in every run of the
/// user whose home is `home` (a hash of the two), while the 176 bits before them are new in
/// every run. Claude Code remembers which API keys its user approved by their last 20
/// characters (`customApiKeyResponses` in its `.claude.json`), so with a tail that stays it
/// asks once, or never when the approval is in the state directory stockade made (see
/// `created_roots`); a stand-in of an earlier run still differs from this run's and is refused.
/// The tail is not a secret: whoever holds a stand-in sees it, and it names nothing but the
/// route.
pub(crate) fn stand_in_tail(home: &Path, route: &str) -> [u8; STAND_IN_TAIL_BYTES] {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(b"stockade stand-in tail 1\0");
    hash.update(home.as_os_str().as_encoded_bytes());
    hash.update(b"\0");
    hash.update(route.as_bytes());
    let digest = hash.finalize();
    let mut tail = [0u8; STAND_IN_TAIL_BYTES];
    tail.copy_from_slice(&digest[..STAND_IN_TAIL_BYTES]);
    tail
}

/// [`stand_in_tail`] as it ends the stand-in: 20 lower-case hex digits.
pub(crate) fn stand_in_tail_hex(home: &Path, route: &str) -> String {
    stand_in_tail(home, route)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Where a source is read from, for the refusal rules.
pub(crate) struct Context<'a> {
    pub caller_env: &'a [(OsString, OsString)],
    pub home: &'a Path,
    pub writable_roots: &'a [PathBuf],
    pub cache: &'a SourceCache,
}

/// A credential that cannot be used: its name, where it was read from, why, and what to do.
pub(crate) fn unavailable(
    c: &Credential,
    reason: impl Into<String>,
    hint: impl Into<String>,
) -> Error {
    Error::Credential {
        name: c.name.clone(),
        source_text: c.source.describe(),
        reason: reason.into(),
        hint: hint.into(),
    }
}

/// Reads every credential's value and makes its stand-in.
pub(crate) fn load(credentials: &[Credential], ctx: &Context) -> Result<Loaded, Error> {
    let mut routes = Vec::new();
    let mut masked = Vec::new();
    let mut env = Vec::new();
    let mut logins = Vec::new();
    let mut login_files = Vec::new();
    for c in credentials {
        // The host's Claude Code login: its stand-ins go in a file inside, not in variables.
        if let Source::ClaudeLogin { file, token_url } = &c.source {
            let (route, login, inside) = crate::claude_login::load(c, file, token_url, ctx)?;
            let url = format!("http://{}{ROUTE_PREFIX}{}", sandbox::PROXY_ADDR, c.name);
            for v in &c.route.base_url_env {
                env.push((v.clone(), url.clone()));
            }
            routes.push(route);
            logins.push(login);
            login_files.push(inside);
            continue;
        }
        let value = read(c, ctx)?;
        let secret = Secret::new(value).map_err(|why| {
            unavailable(
                c,
                why,
                "check what the source holds (one line, the key alone)",
            )
        })?;
        if !c.route.is_masked() && secret.expose().len() < 8 {
            return Err(unavailable(
                c,
                "a route's value must be at least 8 characters: answers are masked for it, and a shorter one could not be told from other text",
                "if the upstream really takes a key this short, pass it with --env (then it is visible inside)",
            ));
        }
        if c.route.is_masked() {
            if secret.expose().len() < 16 {
                return Err(unavailable(
                    c,
                    "a masked credential's value must be at least 16 characters (its sentinel, as long, must not match other text by chance)",
                    "use a route (upstream + header) for short values",
                ));
            }
            let hosts = c
                .route
                .hosts
                .iter()
                .map(|h| policy::credentials::parse_host_port(h))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|why| unavailable(c, why, "fix the credential's `hosts`"))?;
            let api_prefix = parse_upstream(&c.route.upstream)
                .map(|u| u.path)
                .unwrap_or_default();
            let sentinel = sentinel(secret.expose().len())?;
            for v in &c.route.token_env {
                env.push((v.clone(), sentinel.to_string()));
            }
            masked.push(Masked {
                name: c.name.clone(),
                hosts,
                api_prefix,
                sentinel,
                secret,
                deny_paths: c.route.deny_paths.clone(),
            });
            continue;
        }
        let upstream = parse_upstream(&c.route.upstream)
            .map_err(|why| unavailable(c, why, "fix the route's `upstream` in the policy file"))?;
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| Error::Io {
            what: "make a credential stand-in".into(),
            cause: std::io::Error::other(e.to_string()),
        })?;
        bytes[32 - STAND_IN_TAIL_BYTES..].copy_from_slice(&stand_in_tail(ctx.home, &c.name));
        let token = Token::from_random(bytes);
        for v in &c.route.token_env {
            env.push((v.clone(), token.as_str().to_owned()));
        }
        let url = format!("http://{}{ROUTE_PREFIX}{}", sandbox::PROXY_ADDR, c.name);
        for v in &c.route.base_url_env {
            env.push((v.clone(), url.clone()));
        }
        routes.push(Route {
            name: c.name.clone(),
            upstream,
            inject: c.route.inject.clone(),
            token,
            secret,
            deny_paths: c.route.deny_paths.clone(),
        });
    }
    forbid_core_files()?;
    let routes = Routes::with_logins(routes, masked, logins).map_err(|reason| Error::Usage {
        message: format!("cannot verify the credential routes' upstreams: {reason}"),
        hint: "install the system's CA certificates (ca-certificates) or point SSL_CERT_FILE at a bundle".into(),
    })?;
    let ca_dir = match &routes.ca {
        Some(ca) => {
            let (dir, vars) = write_ca(ca.pem())?;
            env.extend(vars);
            Some(dir)
        }
        None => None,
    };
    Ok(Loaded {
        routes,
        env,
        ca_dir,
        login_files,
    })
}

/// No core file of this process from now on: it holds real values.
fn forbid_core_files() -> Result<(), Error> {
    let hard = rustix::process::getrlimit(rustix::process::Resource::Core).maximum;
    rustix::process::setrlimit(
        rustix::process::Resource::Core,
        rustix::process::Rlimit {
            current: Some(0),
            maximum: hard,
        },
    )
    .map_err(|e| Error::Io {
        what: "turn core files off while stockade holds credentials".into(),
        cause: std::io::Error::from_raw_os_error(e.raw_os_error()),
    })
}

/// This process not dumpable: no core file whatever the limit, and its memory and `/proc`
/// files closed to other processes of the same user. Called once the sandbox's first process
/// exists (its id maps are written through `/proc/<pid>`, which a process forked from a
/// non-dumpable one would close to us).
pub(crate) fn forbid_dumps() -> Result<(), String> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| format!("make stockade not dumpable while it holds credentials: {e}"))
}

fn read(c: &Credential, ctx: &Context) -> Result<Zeroizing<String>, Error> {
    let value = match &c.source {
        Source::Env(name) => {
            let found = ctx.caller_env.iter().find(|(k, _)| k == name.as_str());
            let Some((_, v)) = found else {
                return Err(unavailable(
                    c,
                    format!("`{name}` is not set in your environment"),
                    format!(
                        "export {name}, or give the source: --credential {}=file:PATH",
                        c.name
                    ),
                ));
            };
            let Some(v) = v.to_str() else {
                return Err(unavailable(
                    c,
                    format!("`{name}` is not UTF-8"),
                    "check the variable's value",
                ));
            };
            Zeroizing::new(v.to_owned())
        }
        Source::File(spelled) => {
            let path = match spelled.strip_prefix("~/") {
                Some(rest) => ctx.home.join(rest),
                None => PathBuf::from(spelled),
            };
            refuse_writable(c, &path, ctx)?;
            let mut f = std::fs::File::open(&path).map_err(|e| {
                unavailable(
                    c,
                    format!("cannot open {}: {e}", path.display()),
                    "check the path and its permissions",
                )
            })?;
            let mut text = Zeroizing::new(String::new());
            f.read_to_string(&mut text).map_err(|e| {
                unavailable(
                    c,
                    format!("cannot read {}: {e}", path.display()),
                    "the file must hold the key as UTF-8 text",
                )
            })?;
            text
        }
        Source::Keyring { service, account } => keyring(c, service, account, ctx)?,
        Source::Command { argv, ttl } => command(c, argv, Duration::from_secs(*ttl), ctx)?,
        Source::ClaudeLogin { file, .. } => crate::claude_login::read_access(c, file, ctx)?,
    };
    let trimmed = value.trim_end_matches(['\n', '\r']);
    if trimmed.is_empty() {
        return Err(unavailable(
            c,
            "the source gave an empty value",
            "put the key in the source",
        ));
    }
    Ok(Zeroizing::new(trimmed.to_owned()))
}

/// A source in a writable root is the command's to rewrite.
pub(crate) fn refuse_writable(c: &Credential, path: &Path, ctx: &Context) -> Result<(), Error> {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| policy::normalize_lexically(path));
    let spelled = policy::normalize_lexically(path);
    let inside = ctx
        .writable_roots
        .iter()
        .find(|r| policy::is_within(&real, r) || policy::is_within(&spelled, r));
    match inside {
        None => Ok(()),
        Some(root) => Err(unavailable(
            c,
            format!(
                "{} lies in {}, which the command can write: it could put its own value there",
                path.display(),
                root.display()
            ),
            "keep the credential's source outside the workspace and every --allow-write directory",
        )),
    }
}

/// The item's secret from the Secret Service, through libsecret's `secret-tool` (its
/// reference client: no D-Bus stack inside stockade).
fn keyring(
    c: &Credential,
    service: &str,
    account: &str,
    ctx: &Context,
) -> Result<Zeroizing<String>, Error> {
    let has_bus = ctx
        .caller_env
        .iter()
        .any(|(k, v)| k == "DBUS_SESSION_BUS_ADDRESS" && !v.is_empty());
    if !has_bus {
        return Err(unavailable(
            c,
            "no desktop keyring here: DBUS_SESSION_BUS_ADDRESS is not set (no Secret Service session)",
            format!("use another source here: --credential {}=env:VAR or =file:PATH", c.name),
        ));
    }
    let argv = [
        "secret-tool",
        "lookup",
        "service",
        service,
        "account",
        account,
    ]
    .map(String::from);
    command(c, &argv, Duration::ZERO, ctx)
}

fn command(
    c: &Credential,
    argv: &[String],
    ttl: Duration,
    ctx: &Context,
) -> Result<Zeroizing<String>, Error> {
    if let Ok(entries) = ctx.cache.entries.lock() {
        let now = Instant::now();
        if let Some(hit) = entries.iter().find(|e| e.argv == argv && e.until > now) {
            return Ok(hit.value.clone());
        }
    }
    let Some(program) = argv.first() else {
        return Err(unavailable(c, "no program", "give the command as a list"));
    };
    let path = find_program(program, ctx.caller_env).ok_or_else(|| {
        unavailable(
            c,
            format!("`{program}` is not found"),
            if program == "secret-tool" {
                "install libsecret's secret-tool (Debian: apt install libsecret-tools)".to_owned()
            } else {
                "give the program's path, or install it".to_owned()
            },
        )
    })?;
    refuse_writable(c, &path, ctx)?;
    // An argument naming a file the command could rewrite (a script, a config) would run its
    // code here: refused like the program. Any `=`-joined value is looked at as well.
    for arg in &argv[1..] {
        for part in std::iter::once(arg.as_str()).chain(arg.split_once('=').map(|(_, v)| v)) {
            if part.contains('/') || part.starts_with('~') {
                let spelled = match part.strip_prefix("~/") {
                    Some(rest) => ctx.home.join(rest),
                    None => Path::new("/").join(part),
                };
                refuse_writable(c, &spelled, ctx)?;
            }
        }
    }
    let mut child = std::process::Command::new(&path)
        .args(&argv[1..])
        // Not in the workspace: tools that read code or configuration from their current
        // directory (`python3 -m`, `npx`, `git`) would read what the command planted there.
        .current_dir("/")
        .env("PYTHONSAFEPATH", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| {
            unavailable(
                c,
                format!("cannot start `{program}`: {e}"),
                "check the command",
            )
        })?;
    let mut out = Zeroizing::new(Vec::new());
    let mut err = Vec::new();
    let (mut so, mut se) = (child.stdout.take(), child.stderr.take());
    let reader = std::thread::spawn(move || {
        let mut e = Vec::new();
        if let Some(se) = se.as_mut() {
            let _ = se.take(64 * 1024).read_to_end(&mut e);
        }
        e
    });
    if let Some(so) = so.as_mut() {
        let _ = so.take(1024 * 1024).read_to_end(&mut out);
    }
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if started.elapsed() < COMMAND_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(5))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(unavailable(
                    c,
                    format!("`{program}` did not finish in 30 s"),
                    "check the command",
                ));
            }
        }
    };
    if let Ok(e) = reader.join() {
        err = e;
    }
    if !status.success() {
        let said = String::from_utf8_lossy(&err);
        let said = said
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect::<String>();
        return Err(unavailable(
            c,
            format!(
                "`{program}` failed ({status}){}",
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                }
            ),
            "run the command yourself to see why",
        ));
    }
    let value = Zeroizing::new(String::from_utf8(std::mem::take(&mut *out)).map_err(|_| {
        unavailable(
            c,
            format!("`{program}` printed something that is not UTF-8"),
            "the command must print the key alone",
        )
    })?);
    if !ttl.is_zero() {
        if let Ok(mut entries) = ctx.cache.entries.lock() {
            entries.retain(|e| e.argv != argv);
            entries.push(Cached {
                argv: argv.to_vec(),
                until: Instant::now() + ttl,
                value: value.clone(),
            });
        }
    }
    Ok(value)
}

/// `program` as the caller's `PATH` finds it (a path as it is).
fn find_program(program: &str, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Refuses a sandbox environment or command line that holds a real value (`--env NAME=<key>`,
/// a passed variable that happens to hold it, `sh -c "... $KEY"` expanded by the caller's
/// shell). Values shorter than 8 characters are compared whole (a substring would match by
/// chance).
pub(crate) fn refuse_real_values_inside(
    env: &[(String, String)],
    argv: &[String],
    routes: &Routes,
) -> Result<(), Error> {
    let all = (routes.routes.iter().map(|r| (&r.name, &r.secret)))
        .chain(routes.masked.iter().map(|m| (&m.name, &m.secret)));
    for (name_of, secret) in all {
        let secret = secret.expose();
        let holds = |v: &str| {
            if secret.len() >= 8 {
                v.contains(secret)
            } else {
                v == secret
            }
        };
        if let Some((name, _)) = env.iter().find(|(_, v)| holds(v)) {
            return Err(Error::Usage {
                message: format!(
                    "the environment passed inside holds the real value of credential `{}` (in `{name}`)",
                    name_of
                ),
                hint: format!("drop `{name}` from --env/[env]: the route gives the command a stand-in"),
            });
        }
        if let Some(i) = argv.iter().position(|a| holds(a)) {
            return Err(Error::Usage {
                message: format!(
                    "the command line holds the real value of credential `{}` (argument {i}; did your shell expand the key variable?)",
                    name_of
                ),
                hint: "quote the command so the variable is expanded inside (`sh -c '... $KEY'`), where it holds the stand-in".into(),
            });
        }
    }
    Ok(())
}

/// Each `file` source's path, absolute and (when it resolves) canonical: masked inside the
/// run, since the command runs as the caller and could read the file the value comes from.
/// A path with glob characters cannot be masked exactly and is refused.
pub(crate) fn file_source_masks(
    credentials: &[Credential],
    home: &Path,
) -> Result<Vec<String>, Error> {
    let mut masks: Vec<String> = Vec::new();
    for c in credentials {
        let spelled = match &c.source {
            Source::File(spelled) => spelled,
            // The host's Claude Code login file, as any other source file.
            Source::ClaudeLogin { file, .. } => file,
            _ => continue,
        };
        let path = match spelled.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => PathBuf::from(spelled),
        };
        for p in [
            Some(policy::normalize_lexically(&path)),
            std::fs::canonicalize(&path).ok(),
        ]
        .into_iter()
        .flatten()
        {
            let Some(text) = p
                .to_str()
                .filter(|t| !t.contains(['*', '?', '[', ']', '{', '}']))
            else {
                return Err(unavailable(
                    c,
                    format!("{} cannot be hidden from the command (its name is not UTF-8 or holds glob characters)", p.display()),
                    "move the key to a plainly named file",
                ));
            };
            if !masks.iter().any(|m| m == text) {
                masks.push(text.to_owned());
            }
        }
    }
    Ok(masks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(source: Source) -> Credential {
        let mut c = policy::credentials::builtin("anthropic")
            .map(|b| b.credential())
            .unwrap_or_else(|| unreachable!());
        c.source = source;
        c
    }

    #[test]
    fn a_command_source_runs_once_per_ttl_and_a_missing_keyring_is_named() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let counter = dir.path().join("runs");
        let script = dir.path().join("key.sh");
        std::fs::write(
            &script,
            format!(
                "echo x >> {}\necho sk-from-command-source\n",
                counter.display()
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let c = credential(Source::Command {
            argv: vec!["/bin/sh".into(), script.display().to_string()],
            ttl: 60,
        });
        let cache = SourceCache::default();
        let ctx = Context {
            caller_env: &[],
            home: dir.path(),
            writable_roots: &[],
            cache: &cache,
        };
        for _ in 0..3 {
            let v = read(&c, &ctx)
                .map(|v| v.to_string())
                .map_err(|e| e.to_string());
            assert_eq!(v, Ok("sk-from-command-source".to_owned()));
        }
        let runs = std::fs::read_to_string(&counter).unwrap_or_default();
        assert_eq!(
            runs.lines().count(),
            1,
            "the output is reused within its TTL"
        );
        // A fresh cache (another process) runs it again.
        let other = SourceCache::default();
        let ctx = Context {
            cache: &other,
            ..ctx
        };
        assert!(read(&c, &ctx).is_ok());
        let runs = std::fs::read_to_string(&counter).unwrap_or_default();
        assert_eq!(runs.lines().count(), 2);
        // No session bus: the keyring source says so, with another source to use.
        let k = credential(Source::Keyring {
            service: "s".into(),
            account: "a".into(),
        });
        let e = read(&k, &ctx).map_err(|e| (e.code(), e.to_string(), e.hint()));
        let Err((code, message, hint)) = e else {
            panic!("a keyring without a session bus gave a value")
        };
        assert_eq!(code, "E_CREDENTIAL_UNAVAILABLE");
        assert!(message.contains("DBUS_SESSION_BUS_ADDRESS"), "{message}");
        assert!(hint.contains("=env:"), "{hint}");
    }

    #[test]
    fn a_stand_in_ends_the_same_in_every_run_and_differs_before() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let c = credential(Source::Env("K".into()));
        let env = [(OsString::from("K"), OsString::from("sk-ant-api03-real-key"))];
        let cache = SourceCache::default();
        let ctx = Context {
            caller_env: &env,
            home: home.path(),
            writable_roots: &[],
            cache: &cache,
        };
        let stand_in = || {
            let loaded = load(std::slice::from_ref(&c), &ctx).unwrap_or_else(|e| panic!("{e}"));
            let token = loaded.routes.routes[0].token.as_str().to_owned();
            token
        };
        let (one, two) = (stand_in(), stand_in());
        let tail = stand_in_tail_hex(home.path(), "anthropic");
        assert_eq!(tail.len(), 20);
        assert!(
            one.ends_with(&tail) && two.ends_with(&tail),
            "{one} {two} {tail}"
        );
        // The rest is new in each run: 176 random bits, so an earlier run's stand-in is refused.
        assert_ne!(one, two);
        assert_eq!(one.len(), net::credential::TOKEN_PREFIX.len() + 64);
        // Another route, or another user's home, ends otherwise.
        assert_ne!(stand_in_tail_hex(home.path(), "openai"), tail);
        assert_ne!(
            stand_in_tail_hex(Path::new("/home/other"), "anthropic"),
            tail
        );
    }
}
