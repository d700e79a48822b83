//! Throw-away fixtures: a directory under `/var/tmp` (not `/tmp`, which the sandbox replaces)
//! holding a fake `home/` full of credentials that carry a unique marker, a `workspace/` that
//! is a git repository with `.env` files, and — when a case names them — loopback listeners,
//! a host process and SysV IPC objects. Everything is removed on drop.

use std::collections::BTreeSet;
use std::fs;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where fixtures live.
pub const FIXTURE_PARENT: &str = "/var/tmp";

/// Where a case's `{{HOST_TMP}}` directory lives: the host's `/tmp`.
pub const HOST_TMP_PARENT: &str = "/tmp";

/// `PATH` of every command the runner starts: system directories only, so a root caller and
/// an unprivileged one find the same tools.
pub const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A fixture could not be built.
#[derive(Debug, thiserror::Error)]
#[error("selftest fixture: {what}: {cause}")]
pub struct FixtureError {
    pub what: String,
    #[source]
    pub cause: std::io::Error,
}

fn err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> FixtureError {
    let what = what.into();
    move |cause| FixtureError { what, cause }
}

/// A token unique to this process and call (also the attack suite's, for markers and names).
pub fn unique() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{:x}{:08x}{:x}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn write(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), FixtureError> {
    if let Some(parent) = path.parent() {
        mkdir(parent)?;
    }
    fs::write(path, contents).map_err(err(format!("write {}", path.display())))?;
    chmod(path, 0o644)
}

fn mkdir(path: &Path) -> Result<(), FixtureError> {
    if path.is_dir() {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        mkdir(parent)?;
    }
    fs::create_dir(path).map_err(err(format!("mkdir {}", path.display())))?;
    chmod(path, 0o755)
}

fn chmod(path: &Path, mode: u32) -> Result<(), FixtureError> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(err(format!("chmod {}", path.display())))
}

/// What a fixture needs beyond files, from the placeholders its case uses.
#[derive(Debug, Default, Clone, Copy)]
pub struct Needs {
    pub listeners: bool,
    pub host_process: bool,
    pub shm: bool,
    pub msg: bool,
    pub sem: bool,
    /// A directory below the host's `/tmp` (`{{HOST_TMP}}`).
    pub host_tmp: bool,
}

impl Needs {
    pub fn from_placeholders(names: &BTreeSet<String>, listener_signals: bool) -> Self {
        let has = |n: &str| names.contains(n);
        Self {
            listeners: listener_signals
                || [
                    "TCP_PORT",
                    "TCP2_PORT",
                    "TCP6_PORT",
                    "UDP_PORT",
                    "UNIX_SOCK",
                    "UNIX_DGRAM",
                    "ABSTRACT",
                ]
                .iter()
                .any(|n| has(n)),
            host_process: has("HOST_PID"),
            shm: has("SHM_ID"),
            msg: has("MSG_ID"),
            sem: has("SEM_ID"),
            host_tmp: has("HOST_TMP"),
        }
    }
}

/// One throw-away fixture.
pub struct Fixture {
    /// Removed on drop (after [`make_removable`]).
    dir: Option<tempfile::TempDir>,
    pub root: PathBuf,
    pub home: PathBuf,
    pub ws: PathBuf,
    /// `MARKER-<id>`: every fake secret holds `<kind>-MARKER-<id>`; markers appear only in
    /// file contents, environment values and listener replies, never in paths.
    pub marker: String,
    listeners: Option<Listeners>,
    host_process: Option<Child>,
    ipc: Vec<(&'static str, String)>,
    /// `{{HOST_TMP}}`: a directory of this fixture below the host's `/tmp` (the sandbox's
    /// `/tmp` is private, so what lies here is the host's, outside the run), removed on drop.
    host_tmp: Option<tempfile::TempDir>,
    stockade: PathBuf,
}

impl Fixture {
    /// Builds a fresh fixture.
    pub fn new(needs: Needs, stockade: &Path) -> Result<Self, FixtureError> {
        let dir = tempfile::Builder::new()
            .prefix("stockade-selftest-")
            .tempdir_in(FIXTURE_PARENT)
            .map_err(err(format!("create a directory in {FIXTURE_PARENT}")))?;
        let root = dir.path().to_path_buf();
        chmod(&root, 0o755)?;
        let id = unique();
        let mut fx = Self {
            home: root.join("home"),
            ws: root.join("workspace"),
            root,
            dir: Some(dir),
            marker: format!("MARKER-{id}"),
            listeners: None,
            host_process: None,
            ipc: Vec::new(),
            host_tmp: None,
            stockade: stockade.to_path_buf(),
        };
        fx.populate_home()?;
        fx.populate_workspace()?;
        mkdir(&fx.root.join("outside"))?;
        mkdir(&fx.root.join("mnt"))?;
        if needs.listeners {
            fx.listeners = Some(Listeners::start(&fx.root, &fx.marker)?);
        }
        if needs.host_tmp {
            let dir = tempfile::Builder::new()
                .prefix("stockade-selftest-")
                .tempdir_in(HOST_TMP_PARENT)
                .map_err(err(format!("create a directory in {HOST_TMP_PARENT}")))?;
            // Left at mktemp's 0700, as a CI checkout below /tmp is: a root caller's sandbox
            // runs as an id that could not enter it on the host.
            fx.host_tmp = Some(dir);
        }
        if needs.host_process {
            fx.host_process = Some(fx.start_host_process()?);
        }
        for (wanted, kind, flag) in [
            (needs.shm, "m", "-M"),
            (needs.msg, "q", "-Q"),
            (needs.sem, "s", "-S"),
        ] {
            if wanted {
                let id = ipcmk(flag)?;
                fx.ipc.push((kind, id));
            }
        }
        Ok(fx)
    }

    fn secret(&self, kind: &str) -> String {
        format!("{kind}-{}", self.marker)
    }

    fn populate_home(&self) -> Result<(), FixtureError> {
        let files: Vec<(&str, String)> = vec![
            (
                ".ssh/id_rsa",
                format!(
                    "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
                    self.secret("ssh")
                ),
            ),
            (
                ".ssh/config",
                format!("# {}\nHost *\n", self.secret("sshconfig")),
            ),
            (
                ".ssh/known_hosts",
                "example.invalid ssh-ed25519 AAAA\n".into(),
            ),
            (
                ".aws/credentials",
                format!(
                    "[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = {}\n",
                    self.secret("aws")
                ),
            ),
            (
                ".azure/accessTokens.json",
                format!("[{{\"accessToken\": \"{}\"}}]\n", self.secret("azure")),
            ),
            (
                ".config/gcloud/application_default_credentials.json",
                format!("{{\"refresh_token\": \"{}\"}}\n", self.secret("gcloud")),
            ),
            (
                ".kube/config",
                format!("users:\n- user:\n    token: {}\n", self.secret("kube")),
            ),
            (
                ".docker/config.json",
                format!(
                    "{{\"auths\": {{\"r.invalid\": {{\"auth\": \"{}\"}}}}}}\n",
                    self.secret("docker")
                ),
            ),
            (
                ".netrc",
                format!(
                    "machine example.invalid login u password {}\n",
                    self.secret("netrc")
                ),
            ),
            (
                ".npmrc",
                format!(
                    "//registry.example.invalid/:_authToken={}\n",
                    self.secret("npmrc")
                ),
            ),
            (
                ".pypirc",
                format!(
                    "[pypi]\nusername = __token__\npassword = {}\n",
                    self.secret("pypirc")
                ),
            ),
            (
                ".git-credentials",
                format!("https://u:{}@example.invalid\n", self.secret("gitcred")),
            ),
            (
                ".cargo/credentials.toml",
                format!("[registry]\ntoken = \"{}\"\n", self.secret("cargo")),
            ),
            (
                ".config/gh/hosts.yml",
                format!("github.com:\n  oauth_token: {}\n", self.secret("gh")),
            ),
            (".vault-token", format!("{}\n", self.secret("vault"))),
            (
                ".password-store/email.gpg",
                format!("{}\n", self.secret("pass")),
            ),
            (
                ".local/share/keyrings/login.keyring",
                format!("{}\n", self.secret("keyring")),
            ),
            (
                ".gnupg/private-keys-v1.d/key.key",
                format!("{}\n", self.secret("gnupg")),
            ),
            (
                ".bash_history",
                format!("export GITHUB_TOKEN={}\n", self.secret("history")),
            ),
            (
                ".zsh_history",
                format!(
                    ": 1:0;export OPENAI_API_KEY={}\n",
                    self.secret("zshhistory")
                ),
            ),
            (
                ".python_history",
                format!("token = '{}'\n", self.secret("pyhistory")),
            ),
            (
                ".mozilla/firefox/abc.default/logins.json",
                format!("{{\"logins\": [\"{}\"]}}\n", self.secret("firefox")),
            ),
            (
                ".config/google-chrome/Default/Cookies",
                format!("{}\n", self.secret("chrome")),
            ),
            (
                ".bashrc",
                format!(
                    "# bashrc of the selftest fixture\nexport SELFTEST_TOKEN={}\n",
                    self.secret("bashrc")
                ),
            ),
            (
                ".profile",
                format!(
                    "# profile of the selftest fixture\nexport SELFTEST_PROFILE_TOKEN={}\n",
                    self.secret("profile")
                ),
            ),
            (".env", format!("API_KEY={}\n", self.secret("homeenv"))),
            (
                ".pgpass",
                format!("db.invalid:5432:*:u:{}\n", self.secret("pgpass")),
            ),
            (
                ".config/rclone/rclone.conf",
                format!("[s3]\nsecret_access_key = {}\n", self.secret("rclone")),
            ),
            (".config/op/config", format!("{}\n", self.secret("op"))),
            (".pki/nssdb/key4.db", format!("{}\n", self.secret("pki"))),
            (".gitconfig", "[user]\n\tname = selftest\n".into()),
            ("notes.txt", "not a secret\n".into()),
        ];
        for (path, contents) in files {
            write(&self.home.join(path), contents)?;
        }
        Ok(())
    }

    fn populate_workspace(&self) -> Result<(), FixtureError> {
        let ws = &self.ws;
        write(&ws.join("README.md"), "# selftest workspace\n")?;
        write(&ws.join("src/main.sh"), "echo hello\n")?;
        write(
            &ws.join(".env"),
            format!("API_KEY={}\n", self.secret("dotenv")),
        )?;
        write(
            &ws.join(".env.local"),
            format!("DB_PASSWORD={}\n", self.secret("dotenvlocal")),
        )?;
        write(
            &ws.join("app/.env.production"),
            format!("SECRET={}\n", self.secret("dotenvprod")),
        )?;
        // A `*` in the name: `.env.*` must match it as any other character.
        write(
            &ws.join("app/.env.*staging"),
            format!("SECRET={}\n", self.secret("dotenvstar")),
        )?;
        // A minimal git repository written by hand instead of running `git init`: it is
        // faster, does not depend on git being installed, and is the same on every machine.
        let git = ws.join(".git");
        write(&git.join("HEAD"), "ref: refs/heads/main\n")?;
        write(
            &git.join("config"),
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n",
        )?;
        write(&git.join("description"), "selftest\n")?;
        write(&git.join("hooks/pre-commit.sample"), "#!/bin/sh\nexit 0\n")?;
        mkdir(&git.join("objects/info"))?;
        mkdir(&git.join("objects/pack"))?;
        mkdir(&git.join("refs/heads"))?;
        mkdir(&git.join("refs/tags"))?;
        mkdir(&git.join("info"))?;
        Ok(())
    }

    fn start_host_process(&self) -> Result<Child, FixtureError> {
        Command::new("/bin/sleep")
            .arg0(format!("hostproc-{}", self.marker))
            .arg("120")
            .env_clear()
            .env("PATH", PATH)
            .env("HOSTPROC_SECRET", format!("hostenv-{}", self.marker))
            .current_dir(self.home.join(".ssh"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(err("start the host process (/bin/sleep)"))
    }

    /// Has the host process been killed (by the control or the attack)? A signal is
    /// delivered when the target next runs, which on a busy machine can be a while after
    /// `kill` returned: wait up to half a second for it to end before saying no.
    pub fn host_process_killed(&mut self) -> bool {
        let Some(child) = &mut self.host_process else {
            return false;
        };
        let until = std::time::Instant::now() + std::time::Duration::from_millis(500);
        loop {
            if !matches!(child.try_wait(), Ok(None)) {
                return true;
            }
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The value of a placeholder.
    fn value(&self, name: &str) -> Option<String> {
        let l = self.listeners.as_ref();
        let ipc = |kind: &str| {
            self.ipc
                .iter()
                .find(|(k, _)| *k == kind)
                .map(|(_, id)| id.clone())
        };
        Some(match name {
            "ROOT" => self.root.display().to_string(),
            "HOME" => self.home.display().to_string(),
            "WORKSPACE" => self.ws.display().to_string(),
            "MARKER" => self.marker.clone(),
            "STOCKADE" => self.stockade.display().to_string(),
            "TCP_PORT" => l?.tcp.to_string(),
            "TCP2_PORT" => l?.tcp2.to_string(),
            "TCP6_PORT" => l?.tcp6?.to_string(),
            "UDP_PORT" => l?.udp.to_string(),
            "UNIX_SOCK" => l?.unix.display().to_string(),
            "UNIX_DGRAM" => l?.unix_dgram.display().to_string(),
            "ABSTRACT" => l?.abstract_name.clone(),
            "HOST_PID" => self.host_process.as_ref()?.id().to_string(),
            "SHM_ID" => ipc("m")?,
            "MSG_ID" => ipc("q")?,
            "SEM_ID" => ipc("s")?,
            "HOST_TMP" => self.host_tmp.as_ref()?.path().display().to_string(),
            _ => return None,
        })
    }

    /// `text` with every known `{{NAME}}` replaced.
    pub fn substitute(&self, text: &str) -> String {
        let mut out = text.to_string();
        for name in crate::corpus::PLACEHOLDERS {
            let key = format!("{{{{{name}}}}}");
            if out.contains(&key) {
                if let Some(v) = self.value(name) {
                    out = out.replace(&key, &v);
                }
            }
        }
        out
    }

    /// Waits (up to `limit`) until the datagram listeners (UDP, the Unix datagram socket)
    /// have read every datagram sent to them before this call: each is sent a barrier, which
    /// its socket queues after them and its thread reads after them, and is not a hit. After
    /// it, [`Fixture::listener_log`] holds every datagram a finished snippet sent, however
    /// loaded the machine (a fixed wait did not: a control went vacuous in CI). Whether every
    /// barrier arrived in time.
    pub fn flush_datagrams(&self, limit: Duration) -> bool {
        let Some(l) = &self.listeners else {
            return true;
        };
        let barrier = [BARRIER, unique().to_string().as_bytes()].concat();
        if let Ok(s) = UdpSocket::bind("127.0.0.1:0") {
            let _ = s.send_to(&barrier, ("127.0.0.1", l.udp));
        }
        if let Ok(s) = UnixDatagram::unbound() {
            let _ = s.send_to(&barrier, &l.unix_dgram);
        }
        let want = |name: &str| (name.to_string(), barrier.clone());
        let start = std::time::Instant::now();
        loop {
            let arrived = l.log.lock().is_ok_and(|log| {
                log.barriers.contains(&want("udp")) && log.barriers.contains(&want("unix-dgram"))
            });
            if arrived {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Which listeners were reached, and everything they received.
    pub fn listener_log(&self) -> (BTreeSet<String>, Vec<u8>) {
        match &self.listeners {
            Some(l) => match l.log.lock() {
                Ok(log) => (log.hits.clone(), log.seen.clone()),
                Err(_) => (BTreeSet::new(), Vec::new()),
            },
            None => (BTreeSet::new(), Vec::new()),
        }
    }

    /// Is an IPv6 loopback listener running?
    pub fn has_ipv6(&self) -> bool {
        self.listeners.as_ref().is_some_and(|l| l.tcp6.is_some())
    }

    /// A snapshot of a path relative to the root, or absolute (for `host_changed`). A
    /// directory on the way that its owner cannot search or list (a run's `chmod 000`) is
    /// opened for the look and given its mode back, so an unprivileged caller sees what lies
    /// beneath as root does.
    pub fn snapshot(&self, rel: &str) -> PathState {
        let path = self.root.join(rel);
        let opened = open_way(&path);
        let state = PathState::of(&path);
        for (dir, mode) in opened.into_iter().rev() {
            let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(mode));
        }
        state
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(mut child) = self.host_process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        for (kind, id) in self.ipc.drain(..) {
            let _ = Command::new("ipcrm")
                .arg(format!("-{kind}"))
                .arg(&id)
                .env_clear()
                .env("PATH", PATH)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        self.listeners.take();
        if let Some(dir) = self.host_tmp.take() {
            make_removable(dir.path());
            let _ = dir.close();
        }
        if let Some(dir) = self.dir.take() {
            make_removable(dir.path());
            let _ = dir.close();
        }
    }
}

/// Makes every directory below `dir` writable and traversable by its owner, so a run that
/// left read-only directories (a fresh `.git/hooks`, a `chmod 555`) cannot keep the fixture
/// on disk.
pub fn make_removable(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let _ = fs::set_permissions(&d, fs::Permissions::from_mode(0o755));
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
}

/// Gives `dir` and everything below it to `uid` (and the group of the same number), links
/// themselves and never what they point to.
pub fn give_to(dir: &Path, uid: u32) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let _ = std::os::unix::fs::lchown(&p, Some(uid), Some(uid));
        let is_dir = p.symlink_metadata().is_ok_and(|m| m.is_dir());
        let Ok(entries) = fs::read_dir(&p)
            .map_err(|_| ())
            .and_then(|e| is_dir.then_some(e).ok_or(()))
        else {
            continue;
        };
        stack.extend(entries.flatten().map(|e| e.path()));
    }
}

/// Gives the owner read and search on each directory on the way to `path` (not `path`
/// itself) that lacks them, as far as the owner may; returns what it changed with the old
/// modes, outermost first. Links on the way are not followed.
fn open_way(path: &Path) -> Vec<(PathBuf, u32)> {
    let mut opened = Vec::new();
    let Some(parent) = path.parent() else {
        return opened;
    };
    let mut way = PathBuf::new();
    for part in parent.components() {
        way.push(part);
        let Ok(meta) = way.symlink_metadata() else {
            break;
        };
        if !meta.is_dir() {
            break;
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o500 != 0o500
            && fs::set_permissions(&way, fs::Permissions::from_mode(mode | 0o500)).is_ok()
        {
            opened.push((way.clone(), mode));
        }
    }
    opened
}

fn ipcmk(flag: &str) -> Result<String, FixtureError> {
    let mut cmd = Command::new("ipcmk");
    cmd.env_clear().env("PATH", PATH).arg(flag);
    if flag == "-M" {
        cmd.arg("4096");
    } else if flag == "-S" {
        cmd.arg("1");
    }
    let out = cmd.output().map_err(err(format!("ipcmk {flag}")))?;
    // "Shared memory id: 32768", "Message queue id: 1", "Semaphore id: 2"
    String::from_utf8_lossy(&out.stdout)
        .rsplit(':')
        .next()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()))
        .ok_or_else(|| FixtureError {
            what: format!("ipcmk {flag} printed no id"),
            cause: std::io::Error::other(String::from_utf8_lossy(&out.stderr).into_owned()),
        })
}

/// The state of a host path, compared before and after a run.
#[derive(Debug, PartialEq, Eq)]
pub enum PathState {
    Absent,
    File { mode: u32, contents: Vec<u8> },
    Dir { mode: u32, names: Vec<String> },
    Link { target: PathBuf },
    Other,
}

impl PathState {
    fn of(path: &Path) -> Self {
        let Ok(meta) = path.symlink_metadata() else {
            return Self::Absent;
        };
        let mode = meta.permissions().mode();
        if meta.file_type().is_symlink() {
            Self::Link {
                target: fs::read_link(path).unwrap_or_default(),
            }
        } else if meta.is_dir() {
            let mut names: Vec<String> = fs::read_dir(path)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            Self::Dir { mode, names }
        } else if meta.is_file() {
            let mut contents = Vec::new();
            if let Ok(f) = fs::File::open(path) {
                let _ = f.take(1 << 20).read_to_end(&mut contents);
            }
            Self::File { mode, contents }
        } else {
            Self::Other
        }
    }
}

#[derive(Default)]
struct ListenerLog {
    hits: BTreeSet<String>,
    seen: Vec<u8>,
    /// The datagram listeners' barriers received ([`Fixture::flush_datagrams`]), by
    /// listener: not hits.
    barriers: BTreeSet<(String, Vec<u8>)>,
}

/// How a barrier datagram begins ([`Fixture::flush_datagrams`]).
const BARRIER: &[u8] = b"stockade-selftest-barrier-";

impl ListenerLog {
    /// Records a datagram `data` that `name` received: a hit, or a barrier.
    fn record_datagram(&mut self, name: &str, data: &[u8]) {
        if data.starts_with(BARRIER) {
            self.barriers.insert((name.to_string(), data.to_vec()));
        } else {
            self.record(name, data);
        }
    }

    fn record(&mut self, name: &str, data: &[u8]) {
        self.hits.insert(name.to_string());
        if self.seen.len() < (1 << 20) {
            self.seen.extend_from_slice(data);
            self.seen.push(b'\n');
        }
    }
}

/// Loopback listeners of one fixture: TCP (an HTTP responder), a second TCP one (a redirect
/// target), TCP on `::1` when the host has IPv6 loopback, UDP, a Unix stream socket and a Unix
/// datagram socket (`unix-dgram`, a `/dev/log` stand-in: it only records) under the fixture,
/// and an abstract Unix socket. They answer with `listener-<name>-MARKER-<id>` and record who
/// reached them; they stop on drop.
struct Listeners {
    tcp: u16,
    tcp2: u16,
    tcp6: Option<u16>,
    udp: u16,
    unix: PathBuf,
    unix_dgram: PathBuf,
    abstract_name: String,
    log: Arc<Mutex<ListenerLog>>,
    stop: Arc<AtomicBool>,
}

impl Listeners {
    fn start(root: &Path, marker: &str) -> Result<Self, FixtureError> {
        let log = Arc::new(Mutex::new(ListenerLog::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let tcp = TcpListener::bind("127.0.0.1:0").map_err(err("bind 127.0.0.1:0"))?;
        let tcp2 = TcpListener::bind("127.0.0.1:0").map_err(err("bind 127.0.0.1:0"))?;
        let tcp6 = TcpListener::bind("[::1]:0").ok();
        let udp = UdpSocket::bind("127.0.0.1:0").map_err(err("bind udp 127.0.0.1:0"))?;
        let port = |l: &TcpListener| l.local_addr().map(|a| a.port()).map_err(err("local_addr"));
        let (p, p2) = (port(&tcp)?, port(&tcp2)?);
        let p6 = match &tcp6 {
            Some(l) => Some(port(l)?),
            None => None,
        };
        let udp_port = udp
            .local_addr()
            .map(|a| a.port())
            .map_err(err("local_addr"))?;
        let unix = root.join("host.sock");
        let unix_listener =
            UnixListener::bind(&unix).map_err(err(format!("bind {}", unix.display())))?;
        chmod(&unix, 0o777)?;
        let unix_dgram = root.join("host-dgram.sock");
        let dgram = UnixDatagram::bind(&unix_dgram)
            .map_err(err(format!("bind {}", unix_dgram.display())))?;
        chmod(&unix_dgram, 0o777)?;
        let abstract_name = format!("stockade-selftest-{}", unique());
        let abstract_listener = {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
                .map_err(err("abstract socket address"))?;
            UnixListener::bind_addr(&addr).map_err(err("bind an abstract unix socket"))?
        };
        let reply = |name: &str| format!("listener-{name}-{marker}");
        let redirect_to = p2;
        let serve_tcp = |l: TcpListener, name: &'static str| {
            let (log, stop, body) = (log.clone(), stop.clone(), reply(name));
            thread::spawn(move || {
                for stream in l.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (log, body) = (log.clone(), body.clone());
                    thread::spawn(move || serve_stream(stream, name, &log, &body, redirect_to));
                }
            });
        };
        serve_tcp(tcp, "tcp");
        serve_tcp(tcp2, "tcp2");
        if let Some(l) = tcp6 {
            serve_tcp(l, "tcp6");
        }
        for (l, name) in [(unix_listener, "unix"), (abstract_listener, "abstract")] {
            let (log, stop, body) = (log.clone(), stop.clone(), reply(name));
            thread::spawn(move || {
                for stream in l.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (log, body) = (log.clone(), body.clone());
                    thread::spawn(move || serve_stream(stream, name, &log, &body, 0));
                }
            });
        }
        {
            let (log, stop) = (log.clone(), stop.clone());
            thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while let Ok(n) = dgram.recv(&mut buf) {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(mut log) = log.lock() {
                        log.record_datagram("unix-dgram", &buf[..n]);
                    }
                }
            });
        }
        {
            let (log, stop, body) = (log.clone(), stop.clone(), reply("udp"));
            thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while let Ok((n, from)) = udp.recv_from(&mut buf) {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(mut log) = log.lock() {
                        log.record_datagram("udp", &buf[..n]);
                    }
                    // The fixture's own barrier is not answered.
                    if !buf[..n].starts_with(BARRIER) {
                        let _ = udp.send_to(body.as_bytes(), from);
                    }
                }
            });
        }
        Ok(Self {
            tcp: p,
            tcp2: p2,
            tcp6: p6,
            udp: udp_port,
            unix,
            unix_dgram,
            abstract_name,
            log,
            stop,
        })
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake every accept/recv so its thread sees `stop` and ends.
        let timeout = Duration::from_millis(200);
        for port in [self.tcp, self.tcp2] {
            let _ = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), timeout);
        }
        if let Some(port) = self.tcp6 {
            let addr = std::net::SocketAddr::new(std::net::Ipv6Addr::LOCALHOST.into(), port);
            let _ = TcpStream::connect_timeout(&addr, timeout);
        }
        if let Ok(s) = UdpSocket::bind("127.0.0.1:0") {
            let _ = s.send_to(b"stop", ("127.0.0.1", self.udp));
        }
        let _ = UnixStream::connect(&self.unix);
        if let Ok(s) = UnixDatagram::unbound() {
            let _ = s.send_to(b"stop", &self.unix_dgram);
        }
        {
            use std::os::linux::net::SocketAddrExt;
            if let Ok(addr) =
                std::os::unix::net::SocketAddr::from_abstract_name(self.abstract_name.as_bytes())
            {
                let _ = UnixStream::connect_addr(&addr);
            }
        }
    }
}

/// A stream that can time out its reads and be written and shut down.
trait Conn: Read + Write {
    fn read_timeout(&self, t: Duration);
    fn close(&self);
}

impl Conn for TcpStream {
    fn read_timeout(&self, t: Duration) {
        let _ = self.set_read_timeout(Some(t));
    }
    fn close(&self) {
        let _ = self.shutdown(Shutdown::Both);
    }
}

impl Conn for UnixStream {
    fn read_timeout(&self, t: Duration) {
        let _ = self.set_read_timeout(Some(t));
    }
    fn close(&self) {
        let _ = self.shutdown(Shutdown::Both);
    }
}

/// Reads what the client sends first (up to the end of an HTTP head, or 300 ms of silence
/// for clients that only listen), records it, and answers: a redirect to the second TCP
/// listener for `GET /redirect`, else an HTTP response whose body is the listener's marker.
fn serve_stream(
    mut s: impl Conn,
    name: &str,
    log: &Mutex<ListenerLog>,
    body: &str,
    redirect_to: u16,
) {
    s.read_timeout(Duration::from_millis(300));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < 65536 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
        }
    }
    if let Ok(mut log) = log.lock() {
        log.record(name, &got);
    }
    let response = if got.starts_with(b"GET /redirect") && redirect_to != 0 {
        format!(
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{redirect_to}/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    } else {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}\n",
            body.len() + 1
        )
    };
    let _ = s.write_all(response.as_bytes());
    s.close();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]
    use super::*;

    /// A file below directories closed to their owner (000 and 311) is seen as it is, and
    /// the directories keep their modes.
    #[test]
    fn a_snapshot_looks_through_closed_directories_and_gives_their_modes_back() {
        let fx = Fixture::new(Needs::default(), Path::new("/bin/true")).unwrap();
        let (a, b) = (fx.ws.join("a"), fx.ws.join("a/b"));
        write(&b.join("f"), "x").unwrap();
        chmod(&b, 0o311).unwrap();
        chmod(&a, 0o000).unwrap();
        assert!(matches!(
            fx.snapshot("workspace/a/b/f"),
            PathState::File { .. }
        ));
        assert!(matches!(fx.snapshot("workspace/a/b/g"), PathState::Absent));
        let mode = |p: &Path| p.symlink_metadata().unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&a), 0o000);
        chmod(&a, 0o700).unwrap();
        assert_eq!(mode(&b), 0o311);
    }
}
