//! The caller's terminal (issue 15, item 1): nothing in the sandbox can open, read or write
//! the terminal of the user who runs stockade, by any path — `/dev/tty` with any flags (an
//! `O_CREAT` open is performed by the init through mediated creation, and the init used to
//! hold the caller's controlling terminal), the init's descriptors through `/proc/1/fd`
//! (mediated opens resolve them in the init), descriptors the caller passed beyond 0–2 — while
//! interactive use (the command's stdin and stdout on the terminal, Ctrl-C) keeps working.
//!
//! Every test runs under a real pseudo-terminal made by a small python3 harness
//! ([`PTY_HARNESS`]): it becomes the controlling terminal of a new session in which
//! `stockade run` (or, for the controls, the same snippet without stockade) runs, and what
//! reaches the terminal (its master side) is captured to a file the test reads.

use std::path::{Path, PathBuf};
use std::time::Duration;

use attacks::{python3, read_text, sh_quote, Cmd, Fixture};

/// `terminal_harness.py CAPTURE MODE WAIT_FOR SEND_HEX ARGV...`: runs ARGV in a new session whose
/// controlling terminal is a fresh pty, and writes to CAPTURE everything written to the
/// terminal. MODE says where ARGV's descriptors point: `away` (stdin `/dev/null`, stdout and
/// stderr inherited: away from the terminal), `fd5` (as `away`, plus the terminal as fd 5),
/// `on` (0, 1 and 2 on the terminal, as in an interactive shell). Once the terminal showed
/// WAIT_FOR (at once when empty), the bytes of SEND_HEX are typed into it (none when empty).
/// ARGV's exit code is the harness's. ARGV starts with SIGINT and SIGQUIT at their defaults, as
/// in a login's terminal: a suite started as a shell's background job inherits them ignored,
/// and stockade, as the kernel does across `exec`, leaves a signal its caller ignores ignored
/// for the command (Ctrl-C then reached nothing, natively as under the engines: the NOT YET
/// of root callers' container engines, whose by-hand suite runs were background jobs).
const PTY_HARNESS: &str = r#"
import os, sys, pty, fcntl, termios, select, time, signal
cap, mode, wait_for, send = sys.argv[1], sys.argv[2], sys.argv[3].encode(), bytes.fromhex(sys.argv[4])
argv = sys.argv[5:]
m, s = pty.openpty()
pid = os.fork()
if pid == 0:
    os.close(m)
    os.setsid()
    fcntl.ioctl(s, termios.TIOCSCTTY, 0)
    if mode == "on":
        for fd in (0, 1, 2):
            os.dup2(s, fd)
    else:
        n = os.open("/dev/null", os.O_RDWR)
        os.dup2(n, 0)
        os.close(n)
        if mode == "fd5":
            os.dup2(s, 5)
    if s > 2 and s != 5:
        os.close(s)
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    os.execvp(argv[0], argv)
got, sent, status = b"", not send, None
deadline = time.time() + 60
while time.time() < deadline:
    r, _, _ = select.select([m], [], [], 0.05)
    if r:
        try:
            got += os.read(m, 65536)
        except OSError:
            pass
    if not sent and wait_for in got:
        os.write(m, send)
        sent = True
    if status is None:
        p, st = os.waitpid(pid, os.WNOHANG)
        if p:
            status = st
            deadline = min(deadline, time.time() + 0.5)
if status is None:
    os.kill(pid, 9)
    status = os.waitpid(pid, 0)[1]
with open(cap, "wb") as f:
    f.write(got)
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"#;

/// The harness, written into the fixture, and python3 to run it.
struct Pty {
    python: PathBuf,
    script: PathBuf,
    capture: PathBuf,
}

impl Pty {
    fn new(fx: &Fixture, what: &str) -> Option<Pty> {
        let python = python3(what)?;
        Some(Pty {
            python,
            script: fx.script("terminal_harness.py", PTY_HARNESS),
            capture: fx.out_file("pty-capture"),
        })
    }

    /// `cmd` under the harness; returns what reached the terminal and the finished run.
    fn run(&self, cmd: Cmd, mode: &str, wait_for: &str, send: &[u8]) -> (String, attacks::Run) {
        let _ = std::fs::remove_file(&self.capture);
        let hex: String = send.iter().map(|b| format!("{b:02x}")).collect();
        let run = cmd
            .under(&[
                self.python.as_os_str(),
                self.script.as_os_str(),
                self.capture.as_os_str(),
                mode.as_ref(),
                wait_for.as_ref(),
                hex.as_ref(),
            ])
            .timeout(Duration::from_secs(90))
            .run();
        let seen = read_text(&self.capture).unwrap_or_default();
        (seen, run)
    }
}

/// The python snippet that opens `path` with each of `flags` and writes `marker` into it;
/// prints what happened.
fn open_and_write(py: &Path, path: &str, flags: &[&str], marker: &str) -> String {
    let code = format!(
        "import os\n\
         for name in {flags:?}:\n\
         \x20   fl = eval(name)\n\
         \x20   try:\n\
         \x20       fd = os.open({path:?}, fl)\n\
         \x20       os.write(fd, ({marker:?} + ' via ' + name + '\\r\\n').encode())\n\
         \x20       print('opened', {path:?}, name)\n\
         \x20   except OSError as e:\n\
         \x20       print('refused', {path:?}, name, e)\n"
    );
    format!("{} -c {}", sh_quote(py), sh_quote(code))
}

const TTY_FLAGS: [&str; 5] = [
    "os.O_RDWR",
    "os.O_WRONLY",
    "os.O_RDWR|os.O_CREAT",
    "os.O_WRONLY|os.O_CREAT|os.O_TRUNC",
    "os.O_RDWR|os.O_CREAT|os.O_NOCTTY",
];

/// `/dev/tty` with every flag set (a mediated `O_CREAT` open used to be performed by the init,
/// which held the caller's controlling terminal), from python and from the shell's own
/// redirections (`>` is `O_WRONLY|O_CREAT|O_TRUNC`, `<>` is `O_RDWR|O_CREAT`), and reading
/// what the user types. Control: the same snippet without stockade reaches the terminal.
#[test]
fn dev_tty_does_not_reach_the_callers_terminal() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "terminal: /dev/tty") else {
        return;
    };
    let marker = fx.marker("tty");
    let typed = fx.marker("typed");
    let script = format!(
        "{py}\n\
         echo {marker} via-echo >/dev/tty\n\
         (exec 3<>/dev/tty && echo {marker} via-rdwr >&3)\n\
         (exec 3<>/dev/tty && read -r line <&3 && echo \"read: $line\")\n\
         echo \"pid 1 terminal: $(cut -d' ' -f7 /proc/1/stat)\"\n\
         true",
        py = open_and_write(&pty.python, "/dev/tty", &TTY_FLAGS, &marker),
    );
    // Typed at once: the terminal holds the line until something reads it.
    let line = format!("{typed}\n");
    let (seen, run) = pty.run(fx.attack(&[], &script), "away", "", line.as_bytes());
    let outcome = run.outcome();
    outcome.assert_ok();
    assert!(
        !seen.contains(&marker),
        "the sandbox wrote onto the caller's terminal: {seen:?}\n{}",
        outcome.run.describe()
    );
    outcome.assert_lacks(&format!("read: {typed}"));
    // The init (pid 1 inside) has no controlling terminal (`tty_nr` 0 in its stat).
    outcome.assert_output_contains("pid 1 terminal: 0\n");
    for flags in TTY_FLAGS {
        outcome.assert_output_contains(&format!("refused /dev/tty {flags}"));
    }

    let (seen, run) = pty.run(fx.control(&script), "away", "", line.as_bytes());
    let control = run.outcome();
    assert!(
        seen.contains(&format!("{marker} via os.O_RDWR|os.O_CREAT"))
            && seen.contains(&format!("{marker} via-echo"))
            && seen.contains(&format!("{marker} via-rdwr")),
        "control: the snippet did not reach the terminal: {seen:?}\n{}",
        control.run.describe()
    );
    control.assert_output_contains(&format!("read: {typed}"));
}

/// The init's descriptors through `/proc/1/fd/N`: a plain open is refused by the kernel (the
/// init is not dumpable), but an `O_CREAT` open was performed by the init itself, which may
/// open its own descriptors: the caller's stdout and stderr (a terminal, or the agent's
/// pipes) even when the command's output goes through the supervisor's sanitizing pipes,
/// the report pipe, whatever the supervisor held. Tried with the caller's output on pipes
/// and on a terminal. Control: without stockade, the same snippet aimed at the descriptors of
/// the shell that runs it (`/proc/$$/fd`, the caller's pipes or terminal) reaches the caller.
#[test]
fn init_descriptors_are_out_of_reach() {
    if attacks::not_applicable(&attacks::na::PID1) {
        return;
    }
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "terminal: /proc/1/fd") else {
        return;
    };
    let marker = fx.marker("initfd");
    let code = format!(
        "import os, sys\n\
         for n in range(64):\n\
         \x20   for fl in (os.O_WRONLY|os.O_CREAT, os.O_RDWR|os.O_CREAT, os.O_WRONLY|os.O_CREAT|os.O_APPEND):\n\
         \x20       try:\n\
         \x20           fd = os.open('%s/%d' % (sys.argv[1], n), fl|os.O_NONBLOCK)\n\
         \x20       except OSError:\n\
         \x20           continue\n\
         \x20       try:\n\
         \x20           os.write(fd, b'\\x1b]0;{marker}\\x07 {marker} through fd %d\\r\\n' % n)\n\
         \x20       except OSError:\n\
         \x20           pass\n\
         \x20       break\n"
    );
    let script = |dir: &str| {
        format!(
            "{} -c {} {dir} >/dev/null 2>&1; ls -l /proc/1/fd/ >/dev/null 2>&1; echo done-trying",
            sh_quote(&pty.python),
            sh_quote(&code)
        )
    };
    let attack = script("/proc/1/fd");
    let run = fx.attack(&["--sanitize-output"], &attack).run();
    let outcome = run.outcome();
    outcome.assert_ok().assert_lacks(&marker);
    let (seen, run) = pty.run(fx.attack(&["--sanitize-output"], &attack), "on", "", b"");
    assert!(
        !seen.contains(&marker) && seen.contains("done-trying"),
        "the sandbox wrote through the init's descriptors: {seen:?}\n{}",
        run.describe()
    );

    let control = script("/proc/$$/fd");
    fx.control(&control)
        .outcome()
        .assert_ok()
        .assert_output_contains(&marker);
    let (seen, run) = pty.run(fx.control(&control), "on", "", b"");
    assert!(
        seen.contains(&marker),
        "control: the shell's descriptors did not reach the terminal: {seen:?}\n{}",
        run.describe()
    );
}

/// A terminal descriptor the caller passed above 2 (fd 5): closed for the command, and out of
/// reach through `/proc/self/fd/5` and `/proc/1/fd/5` (mediated or not). Control: without
/// stockade the same snippet writes onto the terminal through fd 5.
#[test]
fn inherited_terminal_descriptor_is_closed() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "terminal: inherited fd") else {
        return;
    };
    let marker = fx.marker("fd5");
    let flags = ["os.O_WRONLY", "os.O_WRONLY|os.O_CREAT"];
    let script = format!(
        "echo {marker} via-fd5 >&5\n{}\n{}\ntrue",
        open_and_write(&pty.python, "/proc/self/fd/5", &flags, &marker),
        open_and_write(&pty.python, "/proc/1/fd/5", &flags, &marker),
    );
    let (seen, run) = pty.run(fx.attack(&[], &script), "fd5", "", b"");
    let outcome = run.outcome();
    outcome.assert_ok();
    assert!(
        !seen.contains(&marker),
        "the sandbox wrote through an inherited descriptor: {seen:?}\n{}",
        outcome.run.describe()
    );
    let (seen, run) = pty.run(fx.control(&script), "fd5", "", b"");
    assert!(
        seen.contains(&format!("{marker} via-fd5")),
        "control: fd 5 did not reach the terminal: {seen:?}\n{}",
        run.describe()
    );
}

/// Interactive use keeps working with the init in a session of its own: the command reads
/// what the user types on its stdin and writes on its stdout (both the terminal), and a
/// Ctrl-C typed on the terminal reaches it (the terminal signals the supervisor's process
/// group; the supervisor forwards to the init, the init to the command). Control: the same
/// under a plain shell.
#[test]
fn interactive_terminal_use_keeps_working() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "terminal: interactive") else {
        return;
    };
    let typed = fx.marker("typed");
    let script = "echo prompt-ready; read -r x; echo \"got: $x\"";
    let line = format!("{typed}\n");
    for cmd in [fx.sandbox(&[], script), fx.host(script)] {
        let (seen, run) = pty.run(cmd, "on", "prompt-ready", line.as_bytes());
        assert!(
            seen.contains(&format!("got: {typed}")),
            "the command did not read the terminal: {seen:?}\n{}",
            run.describe()
        );
        assert_eq!(run.code(), 0, "{seen:?}\n{}", run.describe());
    }
    let script = "trap 'echo caught-interrupt; exit 3' INT; echo waiting-for-ctrl-c; \
                  i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; echo not-interrupted";
    for cmd in [fx.sandbox(&[], script), fx.host(script)] {
        let (seen, run) = pty.run(cmd, "on", "waiting-for-ctrl-c", b"\x03");
        assert!(
            seen.contains("caught-interrupt") && !seen.contains("not-interrupted"),
            "Ctrl-C on the terminal did not reach the command: {seen:?}\n{}",
            run.describe()
        );
        assert_eq!(run.code(), 3, "{seen:?}\n{}", run.describe());
    }
}

/// The init's other procfs files through an `O_CREAT` open, which the init performs with its
/// own identity: its memory map (the supervisor's layout: the init is a clone of it without
/// `execve`) and its descriptor directory, both refused to the command by the kernel.
/// Control: the command's own (`/proc/self/maps`) opens the same way.
#[test]
fn init_process_files_are_out_of_reach() {
    if attacks::not_applicable(&attacks::na::PID1) {
        return;
    }
    let fx = Fixture::new();
    let Some(py) = python3("init's procfs files") else {
        return;
    };
    let code = "import os, sys\n\
                for p in sys.argv[1:]:\n\
                \x20   try:\n\
                \x20       fd = os.open(p, os.O_RDONLY | os.O_CREAT)\n\
                \x20       print('opened', p, len(os.read(fd, 65536)) > 0 or list(os.scandir(fd))[:1])\n\
                \x20   except OSError as e:\n\
                \x20       print('refused', p, e.errno)\n";
    let script = |paths: &str| format!("{} -c {} {paths}", sh_quote(&py), sh_quote(code));
    let attack = fx
        .attack(&[], &script("/proc/1/maps /proc/1/fd /proc/1/task/1/maps"))
        .outcome();
    attack.assert_ok().assert_lacks("opened");
    for p in ["/proc/1/maps", "/proc/1/fd", "/proc/1/task/1/maps"] {
        attack.assert_output_contains(&format!("refused {p} 13"));
    }
    fx.attack(&[], &script("/proc/self/maps /proc/thread-self/maps"))
        .outcome()
        .assert_ok()
        .assert_output_contains("opened /proc/self/maps True")
        .assert_output_contains("opened /proc/thread-self/maps True");
}

/// `--sanitize-output` with the caller's terminal on stdin: a terminal is open for reading and
/// writing, so the command wrote escape sequences to its fd 0 (or reopened it for writing
/// through `/proc/self/fd/0` or `/dev/stdin`) past the sanitizer. Under `--sanitize-output`
/// the command's stdin is a read-only descriptor of the same terminal: reading what the user
/// types and `isatty` keep working. Control: the same snippet without stockade.
#[test]
fn sanitize_output_holds_with_a_terminal_on_stdin() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "terminal: stdin past the sanitizer") else {
        return;
    };
    let marker = fx.marker("stdin");
    let typed = fx.marker("typed");
    let osc = |how: &str| format!("\\033]0;{marker} {how}\\007\\n");
    let script = format!(
        "printf '{fd0}' >&0\n\
         printf '{creat}' >/proc/self/fd/0\n\
         printf '{devstdin}' >>/dev/stdin\n\
         {py} -c \"import os; os.write(os.open('/proc/self/fd/0', os.O_WRONLY), b'\\x1b]0;{marker} wronly\\x07')\"\n\
         test -t 0 && echo stdin-is-a-terminal\n\
         echo ready-to-read; read -r line; echo \"read: $line\"",
        fd0 = osc("fd0"),
        creat = osc("creat"),
        devstdin = osc("devstdin"),
        py = sh_quote(&pty.python),
    );
    let line = format!("{typed}\n");
    let (seen, run) = pty.run(
        fx.sandbox(&["--sanitize-output"], &script),
        "on",
        "ready-to-read",
        line.as_bytes(),
    );
    assert!(
        !seen.contains(&marker),
        "escape sequences reached the terminal past --sanitize-output: {seen:?}\n{}",
        run.describe()
    );
    assert!(
        seen.contains("stdin-is-a-terminal") && seen.contains(&format!("read: {typed}")),
        "interactive input stopped working: {seen:?}\n{}",
        run.describe()
    );
    let (seen, run) = pty.run(fx.host(&script), "on", "ready-to-read", line.as_bytes());
    assert!(
        seen.contains(&format!("\x1b]0;{marker} fd0")),
        "control: fd 0 did not reach the terminal: {seen:?}\n{}",
        run.describe()
    );
}
