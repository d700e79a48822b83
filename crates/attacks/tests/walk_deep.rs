//! The planner's walk where it cannot list (issue 32, red team on the walk cache, scripts
//! 01, 02 and 04 of `walk-cache`): a directory deeper than `PATH_MAX` (a path the kernel
//! refuses with `ENAMETOOLONG`), a secret a run buries there for the next run, the sweep's
//! quarantine, and an overlayfs workspace whose lower layer changes between runs. Each test
//! makes the tree, lets it settle (the walk trusts only directories whose ctime is older than
//! `workspace::SETTLED`, 3 s), and runs the attack; the controls run the same script on the
//! host (the secret is there and reachable by that path) and show the sandbox walks the same
//! tree down to where the protection starts.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: panicking with a message is how it reports a failure"
)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use attacks::{read_text, write_file, Cmd, Fixture, Run};

/// Longer than `workspace::SETTLED` (3 s).
const SETTLE: Duration = Duration::from_millis(3500);

/// `L`: a 250-character directory name, defined at the start of every script here.
const LONG: &str = "L=$(printf 'x%.0s' $(seq 1 250))";

/// `/bin/bash -c SCRIPT` on the host in the workspace (bash: `cd` goes on below `PATH_MAX`).
fn host_bash(fx: &Fixture, script: &str) -> Run {
    Cmd::new("/bin/bash", &fx.ws)
        .env("HOME", &fx.home)
        .arg("-c")
        .arg(script)
        .run()
}

/// The same script in the sandbox, under bash, with the walk's debug lines on stderr.
fn sandbox_bash(fx: &Fixture, script: &str) -> attacks::Outcome {
    fx.sandbox_argv(&[], &["/bin/bash", "-c", &attacks::wrap(script)])
        .env("STOCKADE_LOG", "debug")
        .outcome()
}

/// 18 directories of 250 characters below `deep`, then `sec/` with a dotenv file, an
/// `.envrc` and a plain file: their paths are longer than `PATH_MAX` (4096).
fn deep_tree(fx: &Fixture) {
    let made = host_bash(
        fx,
        &format!(
            "{LONG}; mkdir deep && cd deep || exit 1
             for i in $(seq 1 18); do mkdir $L && cd $L || exit 1
               [ $i = 3 ] && echo shallow-plain > shallow.txt; done
             mkdir sec && printf 'A=%s\\n' {m} > sec/.env && echo 'echo hi' > sec/.envrc
             echo deep-plain > sec/plain.txt && chmod 644 sec/* && echo made",
            m = fx.marker("deep")
        ),
    );
    made.assert_success().assert_stdout_contains("made");
}

/// The script that goes down `deep` as far as it can, reads the dotenv file and appends to
/// the `.envrc`. By descriptors (python's `dir_fd`), not `cd`: under gVisor bash aborts
/// below `PATH_MAX` (the Sentry's `getcwd`), which would hide a leak there.
fn go_deep() -> String {
    format!("{LONG}; cd deep; cat $L/$L/$L/shallow.txt; /usr/bin/python3 -c \"{DEEP_PY}\"")
}

/// [`go_deep`]'s python: `depth=N`, then the dotenv file, then whether the append worked.
const DEEP_PY: &str = "import os
fd = os.open('.', os.O_RDONLY)
d = 0
while True:
    try:
        n = os.open('x' * 250, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    except OSError:
        break
    os.close(fd); fd = n; d += 1
print('depth=%d' % d, flush=True)
try:
    print(os.read(os.open('sec/.env', os.O_RDONLY, dir_fd=fd), 200).decode(), flush=True)
except OSError as e:
    print('read:', e, flush=True)
try:
    os.write(os.open('sec/.envrc', os.O_WRONLY | os.O_APPEND, dir_fd=fd), b'pwned')
    print('appended', flush=True)
except OSError as e:
    print('append:', e, flush=True)
";

/// The search of run N+1 (see the test that uses it): `c1`, then 14 directories of 250
/// characters, `c2`, 4 more, `conf/.env`, from the workspace and from every quarantine.
const SEARCH_PY: &str = "import os, glob
names = ['y' * 250] * 14 + ['c2'] + ['y' * 250] * 4
for top in ['c1'] + glob.glob('.stockade/quarantine/*/c1'):
    try:
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
        for n in names:
            nfd = os.open(n, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd); fd = nfd
        print(os.read(os.open('conf/.env', os.O_RDONLY, dir_fd=fd), 200).decode(), flush=True)
    except OSError as e:
        print(top[:40], e.strerror, flush=True)
";

/// What the host reads at `deep/.../sec/NAME`.
fn host_deep(fx: &Fixture, name: &str) -> String {
    host_bash(
        fx,
        &format!("{LONG}; cd deep; for i in $(seq 1 18); do cd $L || exit 1; done; cat sec/{name}"),
    )
    .stdout
}

/// A dotenv file whose path is longer than `PATH_MAX` (18 directories of 250 characters):
/// the planner's walk gets `ENAMETOOLONG` listing the first directory beyond it. Before the
/// fix it dropped that directory silently (only a refusal by permission counted as closed),
/// so nothing below was masked or protected: the command read the secret and wrote the
/// `.envrc`. Now the deepest directory a mask can name (the parent of the first one beyond
/// `PATH_MAX`) is masked whole, in every run (the second takes the rest from the walk cache).
/// And the sweep no longer quarantines the user's untouched deep tree as an "uninspectable
/// directory" after every run (the other red team's finding): it was there before and masked.
/// Controls: the same script on the host reads the secret and reaches depth 18; inside, the
/// command goes down the same chain (a plain file at depth 3, depth 15 reached).
#[test]
fn a_dotenv_below_path_max_is_masked_and_the_tree_left_in_place() {
    let fx = Fixture::new();
    deep_tree(&fx);
    std::thread::sleep(SETTLE);
    let marker = fx.marker("deep");
    if attacks::is_container_backend() {
        // The engines cannot mount that deep: refused, typed, before the engine runs
        // (`container::flags::ENGINE_PATH_LIMIT`), and nothing runs.
        let out = sandbox_bash(&fx, &format!("echo ran; {}", go_deep()));
        out.run
            .assert_code(125)
            .assert_stderr_contains("error[E_PROTECTION_UNAVAILABLE]")
            .assert_stderr_contains("bytes long")
            .assert_stderr_contains("--backend native or gvisor");
        assert!(
            !out.run.stdout.contains("ran") && !out.run.stdout.contains(&marker),
            "{}",
            out.run.describe()
        );
        let control = host_bash(&fx, &go_deep());
        assert!(control.stdout.contains(&marker), "{}", control.describe());
        return;
    }
    for run in 1..=2 {
        let out = sandbox_bash(&fx, &go_deep());
        out.assert_hidden(&marker);
        out.run.assert_stdout_contains("shallow-plain");
        // Down to the masked directory (the parent of the first one beyond `PATH_MAX`).
        let depth = (out.run.stdout.split("depth=").nth(1))
            .and_then(|r| r.split_whitespace().next()?.parse::<usize>().ok());
        assert!(
            depth.is_some_and(|d| (14..18).contains(&d)),
            "run {run}:\n{}",
            out.run.describe()
        );
        assert!(
            !out.run.stderr.contains("uninspectable"),
            "run {run}: the sweep took the user's untouched tree:\n{}",
            out.run.describe()
        );
        assert_eq!(host_deep(&fx, ".envrc"), "echo hi\n", "run {run}");
        assert!(
            host_deep(&fx, ".env").contains(&marker),
            "run {run}: the user's tree was moved"
        );
        assert!(
            !fx.ws.join(".stockade/quarantine").exists(),
            "run {run}: something was quarantined:\n{}",
            out.run.describe()
        );
    }
    // Control: the same script on the host.
    let control = host_bash(&fx, &go_deep());
    assert!(
        control.stdout.contains(&marker) && control.stdout.contains("depth=18"),
        "{}",
        control.describe()
    );
}

/// Run N moves the user's `conf/` (its `.env` masked) below `PATH_MAX`: two chains of
/// 250-character directories (14 and 4 deep: mediated `mkdir` refuses a path beyond
/// `PATH_MAX`) joined by one rename. The sweep after it quarantines the deep directory it
/// cannot list into `.stockade/quarantine/<run>/...`, still deeper than `PATH_MAX`. Run N+1
/// looks for the secret in both places. Before the fix it read it (its walk dropped the
/// directory it could not list); now the deep directory's maskable parent is masked, and the
/// quarantine is masked whole (a protected path that is also unreadable to every run).
/// Controls: the same search on the host finds the secret, and lists the quarantine; run N's
/// moves succeed (the attack is real).
#[test]
fn a_secret_buried_below_path_max_by_a_run_stays_masked_in_the_next() {
    let fx = Fixture::new();
    let marker = fx.marker("buried");
    write_file(
        &fx.ws.join("conf/.env"),
        format!("DOTENV={marker}\n"),
        0o644,
    );
    std::thread::sleep(SETTLE);
    let bury = sandbox_bash(
        &fx,
        "L=$(printf 'y%.0s' $(seq 1 250)); W=$PWD
         mkdir c1 c2; (cd c1; for i in $(seq 1 14); do mkdir $L; cd $L; done)
         (cd c2; for i in $(seq 1 4); do mkdir $L; cd $L; done; mv \"$W/conf\" . ; echo mvconf=$?)
         cd c1; for i in $(seq 1 14); do cd $L; done; mv \"$W/c2\" . ; echo mvc2=$?
         cd c2; for i in $(seq 1 4); do cd $L; done; cat conf/.env",
    );
    bury.assert_hidden(&marker);
    bury.run
        .assert_stdout_contains("mvconf=0")
        .assert_stdout_contains("mvc2=0");
    // By descriptors (see `go_deep`), from the chain and from every run's quarantine; the
    // quarantine's entries by the shell's glob (Debian's runsc answers `ls`'s statx with EINVAL).
    let search = format!("/usr/bin/python3 -c \"{SEARCH_PY}\"; set -- .stockade/quarantine/*; [ -e \"$1\" ] && echo quarantined=$# || echo quarantined=0");
    let search = search.as_str();
    for run in 1..=2 {
        let out = sandbox_bash(&fx, search);
        out.assert_hidden(&marker);
        out.run.assert_stdout_contains("quarantined=0");
        assert!(!out.run.stderr.contains("uninspectable"), "run N+{run}");
    }
    // Control: on the host the same search finds the secret, in the quarantine.
    let control = host_bash(&fx, search);
    assert!(
        control.stdout.contains(&marker) && !control.stdout.contains("quarantined=0"),
        "{}",
        control.describe()
    );
}

/// Root only: a workspace on overlayfs (root mounts it; the runs are the test user's, as
/// root's need idmapped mounts, which overlayfs refuses). A merged directory's stamp is its
/// upper directory's, while a dotenv file added to its lower layer out of band shows through
/// it without moving that stamp: the walk cache reused the old listing and missed the file.
/// Now overlayfs is not a filesystem whose ctimes the cache trusts: run 2 lists every
/// directory (`0 dirs from cache`) and masks the file. Controls: run 2 sees the file's name
/// (it is in the sandbox's view, only masked), and the host reads the secret through
/// the merged directory.
#[test]
fn a_dotenv_added_to_an_overlay_lower_layer_between_runs_is_masked() {
    if attacks::skip_unless_root("mount overlayfs") {
        return;
    }
    let user = "stockade-test";
    let uid = std::process::Command::new("id").args(["-u", user]).output();
    let Some(uid) = uid.ok().filter(|o| o.status.success()).and_then(|o| {
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse::<u32>()
            .ok()
    }) else {
        println!("skipped: no user {user}");
        return;
    };
    if attacks::which("runuser").is_none() {
        println!("skipped: no runuser");
        return;
    }
    let fx = Fixture::without_git();
    let layers = fx.root.join("layers");
    for d in ["lower/sub", "upper/sub", "work"] {
        attacks::mkdir(&layers.join(d));
    }
    for d in 1..=50 {
        attacks::mkdir(&layers.join(format!("lower/t{d}")));
    }
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        layers.join("lower").display(),
        layers.join("upper").display(),
        layers.join("work").display()
    );
    let mounted = std::process::Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o", &opts])
        .arg(&fx.ws)
        .status()
        .unwrap();
    if !mounted.success() {
        println!("skipped: mount -t overlay failed here ({mounted})");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(fx.ws.clone());
    let chown = |p: &Path| {
        let s = std::process::Command::new("chown")
            .args(["-R", &format!("{uid}:{uid}")])
            .arg(p)
            .status()
            .unwrap();
        assert!(s.success());
    };
    chown(&fx.home);
    chown(&fx.ws);
    let bin = fx.stockade_inside();
    let as_user = |script: &str| {
        let mut cmd = Cmd::new("runuser", &fx.ws)
            .args(["-u", user, "--", "env", "STOCKADE_LOG=debug"])
            .arg(format!("HOME={}", fx.home.display()))
            .arg(&bin)
            .arg("run");
        if attacks::backend() != "native" {
            cmd = cmd.args(["--backend", attacks::backend()]);
        }
        cmd.arg("--workspace")
            .arg(&fx.ws)
            .args(["--shell", script])
            .run()
    };
    std::thread::sleep(SETTLE);
    as_user("true").assert_success();
    let marker = fx.marker("lower");
    write_file(
        &layers.join("lower/sub/.env"),
        format!("L={marker}\n"),
        0o644,
    );
    // The names by the shell's glob, not `ls` (Debian's runsc answers its statx with EINVAL).
    let run = as_user("cat sub/.env; echo sub/.*");
    assert!(
        !run.stdout.contains(&marker) && run.stdout.contains("sub/.env"),
        "{}",
        run.describe()
    );
    assert!(
        run.stderr.contains("walk: 0 dirs from cache"),
        "overlayfs must not be taken from the walk cache:\n{}",
        run.describe()
    );
    // Control: the host reads it through the merged directory.
    assert!(read_text(&fx.ws.join("sub/.env")).is_some_and(|t| t.contains(&marker)));
}

/// Unprivileged only (root lists any directory): run 1 closes its own workspace root
/// (`chmod 0311`: Landlock does not govern `chmod`). Run 2's walk cannot list the root: before
/// the fix the root was the "closed" directory, its mask was skipped (it holds a writable
/// root), nothing else was found, and the command `chmod`ed it back, read `.env` and appended
/// to `.envrc` unreported. Now run 2 is refused with `E_PROTECTION_UNAVAILABLE`, naming the
/// root and `chmod u+rx`. Controls: run 1's `chmod` works (the attack is real), the host reads
/// the secret with run 2's script, and once the root is listable again a run masks `.env`.
#[test]
fn a_workspace_root_closed_by_a_run_refuses_the_next() {
    if attacks::is_root() {
        println!("skipped as root: root lists any directory; the unprivileged pass runs this");
        return;
    }
    let fx = Fixture::new();
    let marker = fx.marker("rootclosed");
    write_file(&fx.ws.join(".env"), format!("K={marker}\n"), 0o644);
    write_file(&fx.ws.join(".envrc"), "echo hi\n", 0o644);
    std::thread::sleep(SETTLE);
    let ws = fx.ws.display().to_string();
    let close = sandbox_bash(&fx, &format!("chmod 0311 '{ws}' && echo closed-root"));
    close.run.assert_stdout_contains("closed-root");
    let script =
        format!("chmod 755 '{ws}'; cat '{ws}/.env'; echo x >> '{ws}/.envrc' && echo appended");
    let out = sandbox_bash(&fx, &script);
    let closed = std::fs::read_dir(&fx.ws).is_err();
    // Control: run 2's script on the host (it opens the root again).
    let control = host_bash(&fx, &format!("{script}; : > /dev/null"));
    let _ = std::fs::write(fx.ws.join(".envrc"), "echo hi\n");
    assert!(
        closed,
        "run 1 did not close the root:\n{}",
        close.run.describe()
    );
    out.run.assert_lacks(&marker);
    assert!(
        !out.run.stdout.contains("appended")
            && out.run.stderr.contains("E_PROTECTION_UNAVAILABLE")
            && out.run.stderr.contains(&format!("chmod u+rx {ws}")),
        "{}",
        out.run.describe()
    );
    assert!(control.stdout.contains(&marker), "{}", control.describe());
    // Listable again: the run goes ahead and `.env` is masked.
    let again = sandbox_bash(&fx, "cat .env; echo ran");
    again.assert_hidden(&marker);
    again.run.assert_stdout_contains("ran");
}

/// Descends `d` by descriptors (one subdirectory per level), prints `depth=N`, reads `.env`
/// and appends to `.envrc` in the deepest directory it can open (see [`DEEP_PY`]).
const DESCEND_PY: &str = "import os
fd = os.open('d', os.O_RDONLY | os.O_DIRECTORY)
d = 0
while True:
    try:
        subs = [n for n in os.listdir(fd) if os.path.isdir(os.path.join('/proc/self/fd/%d' % fd, n))]
        n = os.open(subs[0], os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    except (OSError, IndexError):
        break
    os.close(fd); fd = n; d += 1
print('depth=%d' % d, flush=True)
try:
    print(os.read(os.open('.env', os.O_RDONLY, dir_fd=fd), 200).decode(), flush=True)
except OSError as e:
    print('read:', e, flush=True)
try:
    os.write(os.open('.envrc', os.O_WRONLY | os.O_APPEND, dir_fd=fd), b'pwned')
    print('appended', flush=True)
except OSError as e:
    print('append:', e, flush=True)
";

/// Makes `d/.../END` of exactly 4092 bytes (250-character directories, then one of the
/// rest) with `.env` (4097 bytes: beyond what a mount can name) and `.envrc`, and a plain
/// file in the directory above; prints `len=4092`.
fn just_beyond(fx: &Fixture) {
    let made = host_bash(
        fx,
        &format!(
            "{LONG}; p=$PWD/d; mkdir d && cd d || exit 1
             while [ $((4092 - ${{#p}})) -gt 252 ]; do mkdir $L && cd $L && p=$p/$L || exit 1; done
             echo above-plain > plain.txt
             n=$(printf 'z%.0s' $(seq 1 $((4092 - ${{#p}} - 1)))); mkdir $n && cd $n && p=$p/$n || exit 1
             printf 'A=%s\\n' {m} > .env && echo 'echo hi' > .envrc && chmod 644 .env .envrc
             echo len=${{#p}}",
            m = fx.marker("beyond")
        ),
    );
    made.assert_success().assert_stdout_contains("len=4092");
}

/// Root and unprivileged: a directory of 4092 bytes the walk lists, and in it a `.env` of
/// 4097 bytes and an `.envrc`: before the fix their mask and read-only protection were
/// dropped silently (`ENAMETOOLONG` in canonicalize/stat) and the command read the secret and
/// appended to the `.envrc`. Now the deepest directory a mount can name (the 4092-byte one)
/// is masked whole, in both runs (the second from the walk cache). Controls: the same script
/// on the host reads the secret and appends; inside, the command goes down to the directory
/// above (its plain file is readable).
#[test]
fn a_dotenv_just_beyond_path_max_in_a_listable_dir_is_masked() {
    if attacks::not_applicable(&attacks::na::DEEP_MASK) {
        return;
    }
    let fx = Fixture::new();
    just_beyond(&fx);
    std::thread::sleep(SETTLE);
    let marker = fx.marker("beyond");
    let script = format!(
        "/usr/bin/python3 -c \"{DESCEND_PY}\"; find d -name plain.txt -exec cat {{}} + 2>/dev/null"
    );
    for run in 1..=2 {
        let out = sandbox_bash(&fx, &script);
        out.assert_hidden(&marker);
        out.run.assert_stdout_contains("above-plain");
        assert!(
            !out.run.stdout.contains("appended"),
            "run {run}:\n{}",
            out.run.describe()
        );
    }
    let control = host_bash(&fx, &script);
    assert!(
        control.stdout.contains(&marker) && control.stdout.contains("appended"),
        "{}",
        control.describe()
    );
}

/// Unprivileged only (root lists any directory): a directory `C` at mode 0311 (searchable, not
/// listable) holding `.env`, and a read exception `--allow-read C/pub` inside it. Before the
/// fix the mask's split around the exception listed `C`, failed, and masked nothing: the
/// command read `C/.env` by name. Now a directory that cannot be split is masked whole (the
/// exception is lost with it). Control: the host reads `C/.env` by name.
#[test]
fn a_read_exception_inside_an_unlistable_dir_masks_it_whole() {
    if attacks::is_root() {
        println!("skipped as root: root lists any directory; the unprivileged pass runs this");
        return;
    }
    let fx = Fixture::new();
    let marker = fx.marker("allowin");
    write_file(&fx.ws.join("C/.env"), format!("K={marker}\n"), 0o644);
    attacks::mkdir(&fx.ws.join("C/pub"));
    host_bash(&fx, "chmod 0311 C").assert_success();
    std::thread::sleep(SETTLE);
    let grant = fx.ws.join("C/pub").display().to_string();
    let out = fx
        .sandbox_argv(
            &["--allow-read", &grant],
            &["/bin/sh", "-c", &attacks::wrap("cat C/.env; echo ran")],
        )
        .outcome();
    let control = host_bash(&fx, "cat C/.env");
    host_bash(&fx, "chmod 0755 C").assert_success();
    out.run.assert_lacks(&marker);
    // runsc --rootless cannot mask a directory the caller cannot read: it refuses the run
    // (its own fail-closed rule), which blocks the read too.
    if !(attacks::backend() == "gvisor" && out.run.stderr.contains("E_PROTECTION_UNAVAILABLE")) {
        out.assert_hidden(&marker);
        out.run.assert_stdout_contains("ran");
    }
    assert!(control.stdout.contains(&marker), "{}", control.describe());
}

/// Root and unprivileged: a directory `P` as deep as a mount can name (`d/` then
/// 250-character directories), a child of it beyond `PATH_MAX` holding `sec/.env`, and a read
/// exception `--allow-read P/pub`. The walk masks `P` for its child it cannot list; before
/// the fix the mask's split around the exception could not resolve that child
/// (`ENAMETOOLONG`) and dropped it: the command read the deep secret. Now a directory that
/// cannot be split is masked whole (the exception is lost with it). Control: the same script
/// on the host reads the secret.
#[test]
fn a_read_exception_beside_a_child_beyond_path_max_masks_the_parent_whole() {
    if attacks::not_applicable(&attacks::na::DEEP_MASK) {
        return;
    }
    let fx = Fixture::new();
    let marker = fx.marker("deepallow");
    let made = host_bash(
        &fx,
        &format!(
            "{LONG}; p=$PWD/d; mkdir d && cd d || exit 1
             while [ $((${{#p}} + 251)) -le 4095 ]; do mkdir $L && cd $L && p=$p/$L || exit 1; done
             mkdir pub $L && echo x > pub/x && mkdir $L/sec || exit 1
             printf 'A=%s\\n' {marker} > $L/sec/.env && echo 'echo hi' > $L/sec/.envrc
             chmod 644 $L/sec/.env $L/sec/.envrc && echo P=$p"
        ),
    );
    made.assert_success();
    let p = (made.stdout.split("P=").nth(1))
        .map(|r| r.trim().to_string())
        .expect("P");
    std::thread::sleep(SETTLE);
    let script = format!("cd d; /usr/bin/python3 -c \"{DEEP_PY}\"");
    let grant = format!("{p}/pub");
    let out = fx
        .sandbox_argv(
            &["--allow-read", &grant],
            &["/bin/bash", "-c", &attacks::wrap(&script)],
        )
        .outcome();
    out.assert_hidden(&marker);
    assert!(
        !out.run.stdout.contains("appended") && out.run.stdout.contains("depth="),
        "{}",
        out.run.describe()
    );
    let control = host_bash(&fx, &script);
    assert!(
        control.stdout.contains(&marker) && control.stdout.contains("appended"),
        "{}",
        control.describe()
    );
}

/// Root and unprivileged: run 1 cannot read the user's masked `conf/.env`, so it moves `conf`
/// to the end of a chain it builds (`d/` and 250-character directories) where the directory
/// is 4092 bytes (listable by the walk and the sweep: nothing is "closed") and `.env` 4097.
/// Before the fix run 2's planner found `.env`, could not name it for a mount and dropped its
/// mask silently: run 2 read it. Now the moved directory is masked whole. Controls: run 1's
/// move succeeds (the attack is real), and the host reads the secret at its new place by run
/// 2's script.
#[test]
fn a_secret_a_run_moves_just_beyond_path_max_stays_masked() {
    if attacks::not_applicable(&attacks::na::DEEP_MASK) {
        return;
    }
    let fx = Fixture::new();
    let marker = fx.marker("moved");
    write_file(&fx.ws.join("conf/.env"), format!("K={marker}\n"), 0o644);
    std::thread::sleep(SETTLE);
    let mover = sandbox_bash(
        &fx,
        &format!(
            "{LONG}; W=$PWD; p=$PWD/d; mkdir d && cd d || exit 1
             while [ $((4092 - ${{#p}})) -gt 252 ]; do mkdir $L && cd $L && p=$p/$L || exit 1; done
             last=$(printf 'q%.0s' $(seq 1 $((4092 - ${{#p}} - 1))))
             cat \"$W/conf/.env\"; mv \"$W/conf\" \"$last\" && echo moved=$((${{#p}} + 1 + ${{#last}}))"
        ),
    );
    mover.assert_hidden(&marker);
    mover.run.assert_stdout_contains("moved=4092");
    std::thread::sleep(SETTLE);
    let script = format!("/usr/bin/python3 -c \"{DESCEND_PY}\"");
    for run in 1..=2 {
        let out = sandbox_bash(&fx, &script);
        out.assert_hidden(&marker);
        assert!(
            !out.run.stderr.contains("uninspectable"),
            "run {run}:\n{}",
            out.run.describe()
        );
    }
    let control = host_bash(&fx, &script);
    assert!(control.stdout.contains(&marker), "{}", control.describe());
}

/// Root and unprivileged: a workspace root of 3900 bytes with a child beyond
/// `PATH_MAX` below it: the deepest directory a mount can name for that child is the
/// workspace root itself, which cannot be masked (the command writes there). Before the fix
/// the mask was skipped silently and nothing in the root was checked: the command read its
/// `.env`. Now the run is refused with `E_PROTECTION_UNAVAILABLE`, naming the directory.
/// Controls: the host reads the secret; once the deep child is gone the same run goes ahead
/// (and its `.env` is masked).
#[test]
fn a_workspace_root_whose_child_is_beyond_path_max_refuses_the_run() {
    if attacks::not_applicable(&attacks::na::DEEP_MASK) {
        return;
    }
    let fx = Fixture::new();
    let marker = fx.marker("deeproot");
    let made = host_bash(
        &fx,
        &format!(
            "{LONG}; p=$PWD/w; mkdir w && cd w || exit 1
             while [ $((${{#p}} + 251)) -le 3900 ]; do mkdir $L && cd $L && p=$p/$L || exit 1; done
             k=$((3900 - ${{#p}} - 1)); if [ $k -gt 0 ]; then
               n=$(printf 'y%.0s' $(seq 1 $k)); mkdir $n && cd $n && p=$p/$n || exit 1; fi
             printf 'A=%s\\n' {marker} > .env && chmod 644 .env && mkdir -p $L/$L && echo W=$p"
        ),
    );
    made.assert_success();
    let w = (made.stdout.split("W=").nth(1))
        .map(|r| r.trim().to_string())
        .expect("W");
    std::thread::sleep(SETTLE);
    let script = format!("cat '{w}/.env'; echo ran");
    let run = || {
        let mut args = vec!["run".to_string()];
        if attacks::backend() != "native" {
            args.extend(["--backend".to_string(), attacks::backend().to_string()]);
        }
        args.extend(["--workspace", &w, "--", "/bin/sh", "-c", &script].map(String::from));
        fx.stockade(args).run()
    };
    let out = run();
    out.assert_lacks(&marker);
    assert!(
        !out.stdout.contains("ran")
            && out.stderr.contains("E_PROTECTION_UNAVAILABLE")
            && out.stderr.contains("PATH_MAX"),
        "{}",
        out.describe()
    );
    let control = host_bash(&fx, &script);
    assert!(control.stdout.contains(&marker), "{}", control.describe());
    host_bash(&fx, &format!("cd '{w}' && rm -r x*")).assert_success();
    std::thread::sleep(SETTLE);
    let again = run();
    again.assert_lacks(&marker);
    assert!(again.stdout.contains("ran"), "{}", again.describe());
}
