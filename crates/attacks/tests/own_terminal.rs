//! A terminal of the run's own (issue 18, item 1): a run attached to a terminal gets a new
//! pseudo-terminal inside the sandbox, which stockade relays. `/dev/tty`, `tty`, job control,
//! window size and the signal keys (Ctrl-C, Ctrl-Z, Ctrl-\) are the command's, inside; the
//! caller's terminal is never in the sandbox, and the run ends when the command does.
//!
//! Each test drives `stockade run` under a real pseudo-terminal made by a python3 harness
//! ([`HARNESS`]) that plays a script of steps: wait for text, type bytes, resize the window.
//! Runs as root and as an unprivileged user alike (the harness opens its own terminal), under
//! both backends (gVisor's terminal is one runsc makes, see [`attacks::na::HOST_TTY`] for
//! what differs).

use std::path::PathBuf;
use std::time::Duration;

use attacks::{python3, read_text, Cmd, Fixture};

/// `harness.py CAPTURE STEPS_JSON ARGV...`: runs ARGV in a new session whose controlling
/// terminal is a fresh pty (its stdin, stdout and stderr on it, as in an interactive shell),
/// plays STEPS (`{"wait": TEXT}` waits up to 30 s for TEXT to appear after what the previous
/// wait matched, `{"send": HEX}` types bytes, `{"resize": [ROWS, COLS]}` resizes the window,
/// `{"sleep": SECS}`, `{"raw": true}` waits up to 30 s for the terminal to be made raw), and
/// writes everything the terminal showed to CAPTURE, and the device
/// of its terminal (`st_dev st_rdev`) to CAPTURE.dev. A wait that times out is written into
/// the capture as `HARNESS-TIMEOUT` and ends the run. ARGV's exit code is the harness's. With
/// `HARNESS_NOCTTY=1` the pty is ARGV's stdio but not its controlling terminal (as a harness
/// that starts a tool in a session of its own leaves it). ARGV starts with SIGINT and SIGQUIT
/// at their defaults, as in a login's terminal (see terminal.rs, `PTY_HARNESS`: a suite run as
/// a background job inherits them ignored, and the command would too).
const HARNESS: &str = r#"
import os, sys, pty, fcntl, termios, select, time, json, struct, signal
cap, steps, argv = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
m, s = pty.openpty()
fcntl.ioctl(m, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
st = os.fstat(s)
with open(cap + ".dev", "w") as f:
    f.write(f"{st.st_dev} {st.st_rdev}")
pid = os.fork()
if pid == 0:
    os.close(m)
    os.setsid()
    if os.environ.get("HARNESS_NOCTTY") != "1":
        fcntl.ioctl(s, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2):
        os.dup2(s, fd)
    if s > 2:
        os.close(s)
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    os.execvp(argv[0], argv)
os.close(s)
got, pos, status = b"", 0, None
def pump(t):
    global got, status
    r, _, _ = select.select([m], [], [], t)
    if r:
        try:
            got += os.read(m, 65536)
        except OSError:
            pass
    if status is None:
        p, st = os.waitpid(pid, os.WNOHANG)
        if p:
            status = st
for step in steps:
    if "wait" in step:
        want, deadline = step["wait"].encode(), time.time() + 30
        while want not in got[pos:] and time.time() < deadline:
            pump(0.05)
            if status is not None:
                end = time.time() + 0.5
                while want not in got[pos:] and time.time() < end:
                    pump(0.02)
                break
        i = got.find(want, pos)
        if i < 0:
            got += b"\nHARNESS-TIMEOUT waiting for " + want + b"\n"
            break
        pos = i + len(want)
    elif "raw" in step:
        # Until the caller's terminal is raw (ISIG off: stockade has taken the keyboard; the
        # caller's readline at its prompt keeps ISIG).
        deadline = time.time() + 30
        while termios.tcgetattr(m)[3] & termios.ISIG and time.time() < deadline:
            pump(0.05)
        if termios.tcgetattr(m)[3] & termios.ISIG:
            got += b"\nHARNESS-TIMEOUT waiting for a raw terminal\n"
            break
    elif "send" in step:
        os.write(m, bytes.fromhex(step["send"]))
    elif "resize" in step:
        rows, cols = step["resize"]
        fcntl.ioctl(m, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    elif "sleep" in step:
        end = time.time() + step["sleep"]
        while time.time() < end:
            pump(0.02)
deadline = time.time() + 30
while status is None and time.time() < deadline:
    pump(0.05)
end = time.time() + 0.5
while time.time() < end:
    pump(0.02)
if status is None:
    os.kill(pid, 9)
    status = os.waitpid(pid, 0)[1]
    got += b"\nHARNESS-KILLED\n"
with open(cap, "wb") as f:
    f.write(got)
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"#;

/// One step of what the person at the terminal does.
enum Step<'a> {
    Wait(&'a str),
    /// Until the caller's terminal is raw: the run has taken the keyboard.
    Raw,
    Type(&'a [u8]),
    Resize(u16, u16),
    Sleep(f64),
}

struct Pty {
    python: PathBuf,
    script: PathBuf,
    capture: PathBuf,
}

/// What the terminal showed, and the finished run.
struct Seen {
    text: String,
    /// `st_dev st_rdev` of the harness's terminal (the caller's).
    device: String,
    run: attacks::Run,
}

impl Seen {
    fn describe(&self) -> String {
        format!("terminal showed: {:?}\n{}", self.text, self.run.describe())
    }

    fn assert_shows(&self, needle: &str) -> &Self {
        assert!(
            self.text.contains(needle),
            "expected {needle:?} on the terminal\n{}",
            self.describe()
        );
        self
    }

    fn assert_lacks(&self, needle: &str) -> &Self {
        assert!(
            !self.text.contains(needle),
            "{needle:?} reached the terminal\n{}",
            self.describe()
        );
        self
    }

    fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(self.run.code(), code, "{}", self.describe());
        self.assert_lacks("HARNESS-")
    }
}

impl Pty {
    fn new(fx: &Fixture, what: &str) -> Option<Pty> {
        let python = python3(what)?;
        Some(Pty {
            python,
            script: fx.script("own_terminal_harness.py", HARNESS),
            capture: fx.out_file("pty-capture"),
        })
    }

    fn play(&self, cmd: Cmd, steps: &[Step<'_>]) -> Seen {
        let _ = std::fs::remove_file(&self.capture);
        let json: Vec<String> = steps
            .iter()
            .map(|s| match s {
                Step::Wait(t) => format!("{{\"wait\": {}}}", json_string(t)),
                Step::Raw => "{\"raw\": true}".to_owned(),
                Step::Type(b) => {
                    let hex: String = b.iter().map(|b| format!("{b:02x}")).collect();
                    format!("{{\"send\": \"{hex}\"}}")
                }
                Step::Resize(r, c) => format!("{{\"resize\": [{r}, {c}]}}"),
                Step::Sleep(s) => format!("{{\"sleep\": {s}}}"),
            })
            .collect();
        let json = format!("[{}]", json.join(", "));
        let run = cmd
            .under(&[
                self.python.as_os_str(),
                self.script.as_os_str(),
                self.capture.as_os_str(),
                json.as_ref(),
            ])
            .timeout(Duration::from_secs(120))
            .run();
        let mut dev = self.capture.clone().into_os_string();
        dev.push(".dev");
        Seen {
            text: read_text(&self.capture).unwrap_or_default(),
            device: read_text(&PathBuf::from(dev)).unwrap_or_default(),
            run,
        }
    }
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// What `stat` says of the command's terminal streams and of `/dev/tty` opened three ways
/// (`<>` is `O_RDWR|O_CREAT` and `>` is `O_WRONLY|O_CREAT|O_TRUNC`, both performed by the init
/// through mediated creation; `<` is the command's own open), as `NAME=DEV MAJOR:MINOR`, and
/// the name `tty` gives.
const WHICH_TERMINAL: &str = "for f in 0 1 2; do echo \"fd$f=$(stat -L -c '%d %t:%T' /proc/$$/fd/$f)\"; done; \
     for how in '<>' '>' '<'; do echo \"devtty$how=$( (eval \"exec 3${how}/dev/tty\" && stat -L -c '%d %t:%T' /proc/self/fd/3) 2>&1)\"; done; \
     echo \"name=$(tty)\"; echo done-checking";

/// `st_dev st_rdev` (decimal, as python prints them) in `stat -c '%d %t:%T'` form.
fn stat_form(device: &str) -> String {
    let mut parts = device.split_whitespace();
    let dev = parts.next().unwrap_or_default();
    let rdev: u64 = parts.next().and_then(|r| r.parse().ok()).unwrap_or(0);
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    format!("{dev} {major:x}:{minor:x}")
}

/// The command's stdin, stdout, stderr and `/dev/tty` are one new terminal, `/dev/pts/0` of
/// the sandbox's own devpts: not the caller's, which nothing inside holds. With `--no-tty`
/// there is no terminal at all (stdin is `/dev/null`, `/dev/tty` does not open). Control: the
/// same check on the host shows the caller's device on every stream: the check sees the
/// caller's terminal where it is.
#[test]
fn the_command_gets_a_terminal_of_its_own() {
    if attacks::not_applicable(&attacks::na::HOST_TTY) {
        return;
    }
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "terminal of its own") else {
        return;
    };
    let seen = pty.play(
        fx.sandbox(&[], WHICH_TERMINAL),
        &[Step::Wait("done-checking")],
    );
    seen.assert_code(0).assert_shows("name=/dev/pts/0");
    let caller = stat_form(&seen.device);
    assert!(caller.len() > 4, "no device from the harness: {caller:?}");
    let inner = seen
        .text
        .lines()
        .find_map(|l| l.trim().strip_prefix("fd0="))
        .unwrap_or_default()
        .to_owned();
    assert!(!inner.is_empty() && inner != caller, "{}", seen.describe());
    for f in ["fd1", "fd2"] {
        seen.assert_shows(&format!("{f}={inner}"));
    }
    // Opened by the init for the command (`O_CREAT`): the terminal's own node; by the
    // command itself: the `/dev/tty` node, standing for the same terminal. (In a container,
    // `/dev/tty` is a node of the container's own `/dev`, which the stat shows: it opens,
    // below, and the streams are the container's terminal.)
    if !attacks::is_container_backend() {
        for how in ["<>", ">"] {
            seen.assert_shows(&format!("devtty{how}={inner}\r\n"));
        }
    }
    seen.assert_lacks("cannot");
    seen.assert_lacks(&caller);

    let control = pty.play(
        fx.sandbox(&["--no-tty"], WHICH_TERMINAL),
        &[Step::Wait("done-checking")],
    );
    control
        .assert_code(0)
        .assert_shows("fd0=")
        .assert_lacks(&stat_form(&control.device))
        .assert_shows("cannot create /dev/tty: No such device or address")
        .assert_shows("cannot open /dev/tty: No such device or address");
    // (Each play opens a terminal of its own: compare with the one this play had.)
    let host = pty.play(fx.host(WHICH_TERMINAL), &[Step::Wait("done-checking")]);
    let caller = stat_form(&host.device);
    for f in ["fd0", "fd1", "fd2"] {
        host.assert_shows(&format!("{f}={caller}"));
    }
}

/// Under every backend: the command's stdin, stdout and stderr are one terminal (a size set
/// through stdin shows through stdout and stderr) that is not the caller's (no stream has the
/// caller's device). Controls: with `--no-tty` none of them is a terminal; on the host the
/// same check finds the caller's device on every stream.
#[test]
fn the_commands_streams_are_one_terminal_not_the_callers() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "one terminal of its own") else {
        return;
    };
    let script = format!(
        "for f in 0 1 2; do [ -t $f ] && echo \"fd$f-is-a-terminal\"; done; \
         stty rows 11 cols 22 2>/dev/null; stty size <&1; stty size <&2; \
         {} -c 'import os\nfor f in (0, 1, 2): st = os.fstat(f); print(f\"fd{{f}}={{st.st_dev}} {{st.st_rdev}}\")'; \
         echo done-checking",
        attacks::sh_quote(&pty.python)
    );
    let steps = [Step::Wait("done-checking")];
    let seen = pty.play(fx.sandbox(&[], &script), &steps);
    seen.assert_code(0);
    for f in ["fd0", "fd1", "fd2"] {
        seen.assert_shows(&format!("{f}-is-a-terminal"));
        assert!(seen.device.len() > 2, "no device from the harness");
        seen.assert_lacks(&format!("{f}={}\r\n", seen.device));
    }
    assert_eq!(
        seen.text.matches("11 22\r\n").count(),
        2,
        "{}",
        seen.describe()
    );

    let control = pty.play(fx.sandbox(&["--no-tty"], &script), &steps);
    control.assert_code(0).assert_lacks("is-a-terminal");
    let host = pty.play(fx.host(&script), &steps);
    for f in ["fd0", "fd1", "fd2"] {
        host.assert_shows(&format!("{f}={}\r\n", host.device));
    }
}

/// Under every backend, a stream the caller redirected away from its terminal stays where it
/// was sent: `> file` gets the command's output and the terminal does not, `2> file` its
/// errors, and `< file` is what the command reads (not the keyboard). gVisor gave the command
/// a terminal of its own for all three streams as soon as one was the caller's terminal: the
/// output went to the terminal and the file stayed empty, and `read` waited for keys. The
/// streams that are the caller's terminal are the run's own terminal (the keyboard reaches a
/// command whose output goes to a file), natively and under the engines (each redirected
/// stream a FIFO of the run's, `container::flags::STREAMS`; before, no terminal at all);
/// under gVisor, whose terminal is all three streams or none, none is. Control: the same
/// redirections on the host.
#[test]
fn a_redirected_stream_keeps_its_output_and_input() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "redirected streams") else {
        return;
    };
    let m = fx.marker("redirected");
    let input = fx.out_file("redirected-input");
    attacks::write_file(&input, format!("{m}-from-the-file\n"), 0o644);
    let ttys = |to: &str| {
        format!("for f in 0 1 2; do [ -t $f ] && echo \"fd$f-is-a-terminal\"{to}; done; ")
    };
    let both = format!("echo {m}-out; echo {m}-err >&2; ");
    // (file name, redirection, script, what goes to the file, what to the terminal, the
    // streams that are the terminal)
    let cases = [
        (
            "out",
            ">",
            format!(
                "{}{both}echo ready-to-read >&2; read -r x; echo \"got=$x\"; echo done-checking >&2",
                ttys(" >&2")
            ),
            "-out",
            "-err",
            [0, 2],
        ),
        (
            "err",
            "2>",
            format!("{}{both}echo done-checking", ttys("")),
            "-err",
            "-out",
            [0, 1],
        ),
        (
            "in",
            "<",
            format!(
                "{}read -r line; echo \"read=$line\"; echo done-checking",
                ttys("")
            ),
            "",
            "",
            [1, 2],
        ),
    ];
    for (name, how, script, in_file, on_terminal, terminals) in cases {
        let file = fx.out_file(&format!("redirected-{name}"));
        let target = if name == "in" { &input } else { &file };
        let wrapper = format!("exec \"$@\" {how}{}", attacks::sh_quote(target));
        let steps: &[Step<'_>] = if name == "out" {
            &[
                Step::Wait("ready-to-read"),
                Step::Type(b"typed-line\r"),
                Step::Wait("done-checking"),
            ]
        } else {
            &[Step::Wait("done-checking")]
        };
        for (cmd, partial) in [
            (fx.sandbox(&[], &script), attacks::backend() != "gvisor"),
            (fx.host(&script), true),
        ] {
            let _ = std::fs::remove_file(&file);
            let seen = pty.play(cmd.under(&["/bin/sh", "-c", &wrapper, "sh"]), steps);
            seen.assert_code(0);
            for f in 0..3 {
                let said = format!("fd{f}-is-a-terminal");
                if partial && terminals.contains(&f) {
                    seen.assert_shows(&said);
                } else {
                    seen.assert_lacks(&said);
                }
            }
            if name == "in" {
                seen.assert_shows(&format!("read={m}-from-the-file"));
                continue;
            }
            let written = read_text(&file).unwrap_or_default();
            assert!(
                written.contains(&format!("{m}{in_file}")),
                "{how} file got {written:?}\n{}",
                seen.describe()
            );
            seen.assert_lacks(&format!("{m}{in_file}"))
                .assert_shows(&format!("{m}{on_terminal}"));
            if name == "out" {
                let got = if partial {
                    "got=typed-line\n"
                } else {
                    "got=\n"
                };
                assert!(
                    written.contains(got),
                    "{how} file got {written:?}, not {got:?}\n{}",
                    seen.describe()
                );
            }
        }
    }
}

/// `stockade run -- CMD | PAGER`: the pager reads the keyboard (a line typed while the run is
/// going reaches it) and the caller's terminal is cooked again when both have ended. A run
/// with a terminal of its own for stdin took the keys raw beside the pager and left the
/// terminal raw (red team of the redirected streams: `| less`, `-icanon -echo` after it quit,
/// natively and, with the FIFOs, under the engines); a run whose output is a pipe reads no
/// keys, and says so. Control: the same pipeline on the host.
#[test]
fn a_pager_after_a_pipe_gets_the_keyboard() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "a pager beside a run") else {
        return;
    };
    let script = "echo run-ready >&2; sleep 3; echo run-done";
    let pager = "\"$@\" | { read -r k </dev/tty; echo \"pager-got=$k\"; cat; }; \
                 stty -a | grep -o -- '-\\?icanon'; echo all-done";
    for (cmd, sandboxed) in [(fx.sandbox(&[], script), true), (fx.host(script), false)] {
        let seen = pty.play(
            cmd.under(&["/bin/sh", "-c", pager, "sh"]),
            &[
                Step::Wait("run-ready"),
                Step::Type(b"typed-line\r"),
                Step::Wait("all-done"),
            ],
        );
        seen.assert_code(0)
            .assert_shows("pager-got=typed-line")
            .assert_shows("run-done")
            .assert_shows("icanon")
            .assert_lacks("-icanon");
        if sandboxed {
            seen.assert_shows("this run reads no keys: its output goes to a pipe");
        }
    }
}

/// `holder.py MARK`: as the user of the sandboxed process whose command line holds MARK and
/// whose stdout is a FIFO (a root caller's holder takes that user's ids first: the attacker is
/// a process of the command's user on the host, not root), opens that FIFO through
/// `/proc/PID/fd/1`, says `holder-has-it uid=UID` on stderr, writes `injected-during-MARK`
/// into it, and holds it until killed; once the process has gone it keeps writing
/// `injected-late-MARK` (what an unbounded relay would carry into the run's output), for 60 s.
const FIFO_HOLDER: &str = r#"
import os, sys, time, stat
mark, me = sys.argv[1].encode(), os.getpid()
def field(status, name):
    return int([l for l in status.splitlines() if l.startswith(name)][0].split()[1])
deadline, target = time.time() + 90, None
while target is None and time.time() < deadline:
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if mark not in f.read():
                    continue
            link = os.readlink(f"/proc/{d}/fd/1")
            if not stat.S_ISFIFO(os.stat(f"/proc/{d}/fd/1").st_mode) or link.startswith("pipe:"):
                continue
            with open(f"/proc/{d}/status") as f:
                st = f.read()
            target = (d, field(st, "Uid:"), field(st, "Gid:"))
            break
        except (OSError, IndexError, ValueError):
            continue
    time.sleep(0.05)
if target is None:
    sys.exit("holder: no process of the run's with a FIFO for stdout")
pid, uid, gid = target
if os.getuid() == 0:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
fd = os.open(f"/proc/{pid}/fd/1", os.O_WRONLY | os.O_NONBLOCK)
sys.stderr.write(f"holder-has-it uid={os.getuid()}\n")
sys.stderr.flush()
os.write(fd, b"injected-during-" + mark + b"\n")
until = time.time() + 60
while time.time() < until:
    time.sleep(0.2)
    if not os.path.exists(f"/proc/{pid}"):
        try:
            os.write(fd, b"injected-late-" + mark + b"\n")
        except OSError:
            pass
"#;

/// Red team of the redirected streams, finding 1: under a container engine a stream that is
/// not the terminal (`cmd > file` at a terminal) reaches stockade through a FIFO of the run's,
/// and a process of the command's user on the host may open that FIFO through
/// `/proc/PID/fd/1` while the command runs. Holding it open kept the relay waiting for end of
/// file: `stockade run` returned only when the holder let go, past `--timeout`, and what the
/// holder wrote after the container had gone landed in the run's output. The run ends when
/// the container does: the relays stop once it has gone (after what the FIFO held then).
/// Controls: the holder opened the FIFO as the command's user (`holder-has-it`), what it wrote
/// while the command ran reached the file (the FIFO it holds is the run's output), and it was
/// still holding the FIFO when the run returned (the wrapper's `kill` found it).
#[test]
fn a_host_process_holding_a_redirected_streams_fifo_does_not_keep_the_run() {
    if attacks::not_applicable(&attacks::na::STREAM_FIFOS) {
        return;
    }
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "a redirected stream's FIFO held outside") else {
        return;
    };
    let m = fx.marker("fifo-holder");
    let holder = fx.script("fifo_holder.py", FIFO_HOLDER);
    let file = fx.out_file("held-out");
    let script = format!("echo {m}-ready >&2; sleep 8; echo {m}-out-end");
    // The holder lets go after 60 s (it is killed at the end): a run that waited for it took
    // that long.
    let wrapper = format!(
        "{py} {holder} {m} & h=$!; start=$(date +%s); \"$@\" > {file}; rc=$?; \
         echo \"took=$(( $(date +%s) - start )) rc=$rc\"; \
         kill $h 2>/dev/null && echo holder-was-holding; wait $h; echo done-checking",
        py = attacks::sh_quote(&pty.python),
        holder = attacks::sh_quote(&holder),
        file = attacks::sh_quote(&file),
    );
    let seen = pty.play(
        fx.sandbox(&["--timeout", "40"], &script)
            .under(&["/bin/sh", "-c", &wrapper, "sh"]),
        &[Step::Wait("holder-has-it"), Step::Wait("done-checking")],
    );
    seen.assert_code(0)
        .assert_shows("rc=0")
        .assert_shows("holder-was-holding");
    if attacks::is_root() {
        seen.assert_lacks("holder-has-it uid=0\r");
    }
    let took: u64 = seen
        .text
        .split("took=")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|t| t.parse().ok())
        .unwrap_or(u64::MAX);
    assert!(
        took < 30,
        "the run took {took} s beside a holder of its FIFO (its command: 8 s)\n{}",
        seen.describe()
    );
    let written = read_text(&file).unwrap_or_default();
    assert!(
        written.contains(&format!("{m}-out-end"))
            && written.contains(&format!("injected-during-{m}")),
        "the file got {written:?}\n{}",
        seen.describe()
    );
}

/// Ctrl-Z stops the foreground job of an interactive shell inside, `jobs` lists it, Ctrl-C
/// interrupts the next one and Ctrl-\ quits the one after: each reaches the job, the shell and
/// the run go on, and the run ends with the shell's exit code. Control: without a terminal of
/// its own (`--no-tty`) the shell has no job control.
#[test]
fn job_control_and_signal_keys_stay_inside() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "job control") else {
        return;
    };
    // The prompt is `$ ` for every uid (uid 0 inside `runsc --rootless` would show `# `).
    let shell = ["--", "env", "PS1=$ ", "bash", "--norc", "--noprofile", "-i"];
    let steps = [
        Step::Wait("$ "),
        Step::Type(b"sleep 60\r"),
        Step::Sleep(0.5),
        Step::Type(b"\x1a"),
        Step::Wait("Stopped"),
        Step::Type(b"jobs; echo jobs-listed\r"),
        Step::Wait("jobs-listed\r\n"),
        // The key must come once bash has made `sleep` the terminal's foreground: a root
        // caller's Docker run (the client, the daemon, the shim) took longer than half a
        // second for it on a loaded machine, and the key went to bash.
        Step::Type(b"kill %1; sleep 60\r"),
        Step::Sleep(1.5),
        Step::Type(b"\x03"),
        Step::Type(b"echo after-int=$?\r"),
        Step::Wait("after-int=130"),
        Step::Type(b"sleep 60\r"),
        Step::Sleep(1.5),
        Step::Type(b"\x1c"),
        Step::Type(b"echo after-quit=$?\r"),
        Step::Wait("after-quit=131"),
        Step::Type(b"exit 7\r"),
    ];
    let mut argv: Vec<&str> = vec!["run", "--workspace"];
    let ws = fx.ws.to_string_lossy().into_owned();
    argv.push(&ws);
    argv.extend(shell);
    let seen = pty.play(fx.stockade(&argv), &steps);
    seen.assert_code(7)
        .assert_shows("[1]+  Stopped")
        .assert_shows("sleep 60");

    let mut argv: Vec<&str> = vec!["run", "--no-tty", "--workspace", &ws];
    argv.extend(shell);
    let control = pty.play(
        fx.stockade(&argv),
        &[Step::Wait("$ "), Step::Type(b"exit 3\n")],
    );
    control.assert_shows("no job control");
}

/// The run's window follows the caller's: the size at the start, and a resize while it runs
/// (SIGWINCH inside). Control: the window the harness set is what the host sees.
#[test]
fn window_size_follows_the_callers() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "window size") else {
        return;
    };
    let script =
        "stty size; trap 'echo resized; stty size; exit 0' WINCH; echo waiting-for-resize; \
                  i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo never-resized";
    let steps = [
        Step::Wait("waiting-for-resize"),
        Step::Resize(41, 132),
        Step::Wait("resized"),
    ];
    let seen = pty.play(fx.sandbox(&[], script), &steps);
    seen.assert_code(0)
        .assert_shows("24 80\r\n")
        .assert_shows("41 132\r\n")
        .assert_lacks("never-resized");
    let host = pty.play(fx.host(script), &steps);
    host.assert_shows("41 132\r\n");
}

/// A password prompt reads `/dev/tty` with echo off: what is typed is read and never shown.
/// Control: the same prompt with echo on shows it.
#[test]
fn password_prompts_read_the_terminal_without_echo() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "password prompt") else {
        return;
    };
    let secret = fx.marker("typed-password");
    let typed = format!("{secret}\r");
    let prompt = |echo: bool| {
        let ask = if echo { "input" } else { "getpass.getpass" };
        format!(
            "{} -c 'import getpass\np = {ask}(\"password: \")\n\
             print(\"read\", len(p), \"chars\", p == {secret:?})'",
            pty.python.display(),
        )
    };
    let steps = [Step::Wait("password: "), Step::Type(typed.as_bytes())];
    let seen = pty.play(fx.sandbox(&[], &prompt(false)), &steps);
    seen.assert_code(0)
        .assert_shows(&format!("read {} chars True", secret.len()))
        .assert_lacks(&secret);
    let control = pty.play(fx.sandbox(&[], &prompt(true)), &steps);
    control.assert_code(0).assert_shows(&secret);
}

/// The relayed terminal still goes through `--sanitize-output` and the output limit: an
/// escape sequence written to the terminal (fd 1, fd 0, `/dev/tty`) does not reach the
/// caller's, and a flood is cut with the marker. Control: without the flags both arrive.
#[test]
fn sanitizer_and_output_limit_apply_to_the_terminal() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "sanitized terminal") else {
        return;
    };
    let marker = fx.marker("title");
    // Under gVisor /dev/tty does not open (the writes through fd 0 and 1 still count).
    let ways: &[&str] = if attacks::not_applicable(&attacks::na::HOST_TTY) {
        &["fd1", "fd0"]
    } else {
        &["fd1", "fd0", "tty"]
    };
    let script = format!(
        "printf '\\033]0;{marker} fd1\\007\\n'; printf '\\033]0;{marker} fd0\\007\\n' >&0; \
         {} echo printed-titles",
        if ways.contains(&"tty") {
            format!("printf '\\033]0;{marker} tty\\007\\n' >/dev/tty;")
        } else {
            String::new()
        }
    );
    let steps = [Step::Wait("printed-titles")];
    let seen = pty.play(fx.sandbox(&["--sanitize-output"], &script), &steps);
    seen.assert_code(0).assert_lacks(&marker);
    let control = pty.play(fx.sandbox(&[], &script), &steps);
    for how in ways {
        control.assert_shows(&format!("\x1b]0;{marker} {how}"));
    }

    let flood = "head -c 300000 /dev/zero | tr '\\0' x; echo; echo flood-done";
    let seen = pty.play(
        fx.sandbox(&["--output-limit", "64K"], flood),
        &[Step::Wait("flood-done")],
    );
    seen.assert_code(0)
        .assert_shows("[stockade: output limit reached");
    assert!(
        seen.text.len() < 100_000,
        "{} bytes passed",
        seen.text.len()
    );
    let control = pty.play(fx.sandbox(&[], flood), &[Step::Wait("flood-done")]);
    assert!(control.text.len() >= 300_000, "{}", control.run.describe());
}

/// A command that ignores Ctrl-C keeps running when it is typed (the keys are the command's),
/// and `~.` at the start of a line ends the run (as in ssh), which leaves the caller's
/// terminal as it was. Control: the same keys without the escape leave the command running
/// to its end.
#[test]
fn the_escape_ends_a_run_whose_command_ignores_ctrl_c() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "escape") else {
        return;
    };
    let script = "trap '' INT; echo ignoring-ctrl-c; sleep 4; echo ran-to-the-end";
    let seen = pty.play(
        fx.sandbox(&[], script),
        &[
            Step::Wait("ignoring-ctrl-c"),
            Step::Type(b"\x03"),
            Step::Sleep(0.3),
            Step::Type(b"\r~."),
        ],
    );
    seen.assert_lacks("ran-to-the-end").assert_lacks("HARNESS-");
    assert_ne!(seen.run.code(), 0, "{}", seen.describe());
    let control = pty.play(
        fx.sandbox(&[], script),
        &[
            Step::Wait("ignoring-ctrl-c"),
            Step::Type(b"\x03"),
            Step::Sleep(0.3),
            Step::Type(b"\r~~"),
        ],
    );
    control.assert_code(0).assert_shows("ran-to-the-end");
}

/// Two runs on one terminal at once (`make -j`, an agent's parallel tools): the first takes
/// the keyboard, the second shows its output only, and afterwards the terminal has its own
/// settings back (echo, canonical input, Ctrl-C), whichever ends first.
#[test]
fn runs_sharing_a_terminal_leave_it_as_it_was() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "shared terminal") else {
        return;
    };
    let bin = attacks::sh_quote(attacks::stockade_bin());
    let ws = attacks::sh_quote(&fx.ws);
    let flags = attacks::backend_flags();
    let script = format!(
        "{bin} run {flags} --workspace {ws} -- sleep 1 & sleep 0.3; \
         {bin} run {flags} --workspace {ws} -- sh -c 'stty -a | tr \" \" \"\\n\" | grep -x -e icanon -e echo -e isig | tr \"\\n\" \" \"; echo inner-done; sleep 2'; \
         wait; echo; stty -a | tr ' ' '\\n' | grep -x -e -icanon -e -echo -e -isig -e icanon -e echo -e isig | tr '\\n' ' '; echo outer-done"
    );
    let seen = pty.play(fx.host(&script), &[Step::Wait("outer-done")]);
    seen.assert_code(0)
        .assert_shows("isig icanon echo inner-done")
        .assert_shows("isig icanon echo outer-done");
}

/// Keys reach a run whose terminal is its stdio but not its controlling terminal (a harness
/// that started it in a session of its own): no job control applies there.
#[test]
fn keys_reach_a_run_on_a_terminal_that_is_not_its_controlling_terminal() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "not the controlling terminal") else {
        return;
    };
    let seen = pty.play(
        fx.sandbox(&[], "echo ready-to-read; read -r x; echo \"got=$x\"")
            .env("HARNESS_NOCTTY", "1"),
        &[Step::Wait("ready-to-read"), Step::Type(b"typed-line\r")],
    );
    seen.assert_code(0).assert_shows("got=typed-line");
}

/// Under `--sanitize-output` a shell's line editing still shows: a backspace typed at the
/// prompt erases on screen (bash echoes `\b`, with an erase of the line's rest), while a title
/// sequence the same session prints is still removed. (Without line editing kept, the
/// sanitizer removed the backspaces and the screen kept the typo; its unit tests hold both
/// modes.)
#[test]
fn line_editing_shows_under_the_sanitizer() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "line editing under the sanitizer") else {
        return;
    };
    let marker = fx.marker("title");
    let title = format!("printf '\\033]0;{marker}\\007'; exit\r");
    let steps = [
        Step::Wait("$ "),
        Step::Type(b"echo typoX"),
        Step::Type(b"\x7f"),
        Step::Type(b"ed-fixed\r"),
        Step::Wait("typoed-fixed\r\n"),
        Step::Type(title.as_bytes()),
    ];
    let seen = pty.play(
        fx.sandbox(
            &["--sanitize-output"],
            "PS1='$ ' exec bash --norc --noprofile -i",
        ),
        &steps,
    );
    seen.assert_code(0)
        .assert_shows("typoX\x08 \x08ed-fixed")
        .assert_shows("removed 1 escape")
        .assert_lacks(&format!("\x1b]0;{marker}"));
}

/// Job control of `stockade run` itself, from the caller's shell: a run started in the
/// background (`&`) takes the keyboard when brought to the foreground (`fg`), and a run
/// stopped from outside (SIGTSTP) gives the caller's terminal its settings back before it
/// stops, then takes them again on `fg`: the shell inside echoes what is typed, once.
/// Control: the caller's own shell, typed the same way, shows each line once.
#[test]
fn a_run_in_the_background_takes_the_keyboard_on_fg_and_gives_it_back_on_stop() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "job control of stockade run") else {
        return;
    };
    // The run is typed into a shell: the fixture is given to its owner here.
    fx.give_out();
    let run = format!(
        "{} run {} --workspace {} -- bash --norc --noprofile -i",
        attacks::stockade_bin().display(),
        attacks::backend_flags(),
        fx.ws.display()
    );
    let background = format!("{run} &\r");
    let outer = "PS1='H$ ' exec bash --norc --noprofile -i";
    let steps = [
        Step::Wait("H$ "),
        Step::Type(background.as_bytes()),
        Step::Wait("$ "),
        Step::Sleep(1.0),
        // A SIGTSTP from outside (as `kill -TSTP` from another terminal) in a few seconds.
        Step::Type(b"S=$!; (sleep 4; kill -TSTP $S) & fg %1\r"),
        // Typed before the run has the keyboard, the caller's terminal echoes too (a gVisor
        // start beside another pass took longer than a fixed second).
        Step::Raw,
        // And typed before the shell inside is at its prompt, the terminal inside echoes it
        // (still cooked) before readline does: wait for bash's own prompt (`bash-5.2# `).
        Step::Wait("bash-"),
        Step::Type(b"echo in-$((6*7))\r"),
        Step::Wait("in-42\r\n"),
        Step::Wait("Stopped"),
        Step::Wait("H$ "),
        Step::Type(b"echo host-$((6*7))\r"),
        Step::Wait("host-42\r\n"),
        Step::Type(b"fg %1\r"),
        Step::Raw,
        Step::Type(b"echo again-$((6*7))\r"),
        Step::Wait("again-42\r\n"),
        Step::Type(b"exit\r"),
        Step::Wait("H$ "),
        Step::Type(b"echo after-$((6*7))\r"),
        Step::Wait("after-42\r\n"),
        Step::Type(b"exit\r"),
    ];
    let seen = pty.play(fx.host(outer), &steps);
    seen.assert_code(0)
        // Typed inside, echoed by the shell inside once (not also by the caller's terminal).
        .assert_shows("echo in-$((6*7))\r\n")
        .assert_shows("echo again-$((6*7))\r\n");
    for line in ["echo in-", "echo host-", "echo again-", "echo after-"] {
        assert_eq!(
            seen.text.matches(line).count(),
            1,
            "{line} echoed other than once: {:?}",
            seen.text
        );
    }
}

/// The test user of this machine (the unprivileged half of a root pass), if there is one and
/// it may use the backend under test (else the line saying why is printed).
fn test_user() -> Option<&'static str> {
    if attacks::not_applicable(&attacks::na::ENGINE_USERS) {
        return None;
    }
    let ok = std::process::Command::new("id")
        .arg("stockade-test")
        .output()
        .is_ok_and(|o| o.status.success());
    if !(ok && attacks::which("runuser").is_some()) {
        println!("skipped: no user stockade-test or no runuser");
        return None;
    }
    Some("stockade-test")
}

/// Prints `NAME=ok` when this process may open its terminal again through `/proc/self/fd/0`
/// (what stockade does first), else `NAME=` and the errno's name.
fn reopen_check(py: &std::path::Path, name: &str) -> String {
    format!(
        "{} -c 'import os, errno\ntry:\n    os.open(\"/proc/self/fd/0\", os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)\n    print(\"{name}=ok\")\nexcept OSError as e:\n    print(\"{name}=\" + errno.errorcode[e.errno])'",
        attacks::sh_quote(py)
    )
}

/// The caller's terminal after the run, as the shell that started it sees it: its settings
/// (`icanon echo isig` when given back) and whether its description was left non-blocking.
fn terminal_after(py: &std::path::Path) -> String {
    format!(
        "stty -a | tr ' ' '\\n' | grep -x -e -icanon -e -echo -e -isig -e icanon -e echo -e isig | tr '\\n' ' '; echo settings-after; \
         {} -c 'import os, fcntl; print(\"nonblock=%d\" % bool(fcntl.fcntl(0, fcntl.F_GETFL) & os.O_NONBLOCK))'",
        attacks::sh_quote(py)
    )
}

/// `runuser -u USER -- env -i PATH HOME sh SCRIPT` on the harness's terminal, which root owns:
/// the script runs as the user, in a terminal it may use but not open again.
fn as_user(fx: &Fixture, user: &str, script: &std::path::Path) -> attacks::Cmd {
    give_to(fx, user);
    attacks::Cmd::new("runuser", &fx.ws).args([
        "-u".as_ref(),
        user.as_ref(),
        "--".as_ref(),
        "env".as_ref(),
        "-i".as_ref(),
        format!("PATH={}", attacks::PATH).as_ref(),
        format!("HOME={}", fx.home.display()).as_ref(),
        "TERM=xterm".as_ref(),
        "sh".as_ref(),
        script.as_os_str(),
    ])
}

/// The fixture's home and workspace, made `user`'s.
fn give_to(fx: &Fixture, user: &str) {
    let status = std::process::Command::new("chown")
        .args([
            "-R",
            &format!("{0}:{0}", user),
            &fx.home.display().to_string(),
            &fx.ws.display().to_string(),
        ])
        .status();
    assert!(status.is_ok_and(|s| s.success()), "chown to {user} failed");
}

/// A shell line of root's: `su USER -s /bin/sh -c 'env -i PATH HOME TERM stockade run
/// --backend B --workspace WS OPTS -- bash SCRIPT'`, which runs the user's run in a session of
/// its own (`su -c`): root's terminal is its stdio, not its controlling terminal.
fn su_c_run(fx: &Fixture, user: &str, opts: &str, script: &std::path::Path) -> String {
    give_to(fx, user);
    let run = format!(
        "env -i PATH={} HOME={} TERM=xterm {} run {} --workspace {} {opts} -- bash {}",
        attacks::PATH,
        attacks::sh_quote(&fx.home),
        attacks::sh_quote(fx.stockade_inside()),
        attacks::backend_flags(),
        attacks::sh_quote(&fx.ws),
        attacks::sh_quote(script),
    );
    format!("su {user} -s /bin/sh -c {}", attacks::sh_quote(run))
}

/// Issue 31, item 3: a regular user in a terminal root owns (`runuser` in root's tmux) may not
/// open it again (`EACCES` on `/proc/self/fd/0`, which stockade tried first and took for
/// "another run has the keyboard", silently: nothing typed reached the run). The run reads
/// the keys through the descriptor it holds: a line typed reaches `read`, the window size
/// follows (at the start and on a resize), Ctrl-C reaches the command; afterwards the
/// caller's terminal has its settings back and its description (its shell's too) is not left
/// non-blocking. Controls: root may open the same terminal again and the user may not (the
/// run took the other way); a second run of the user's at the same time says on stderr that
/// it does not read the keyboard, and the keys still go to the first.
#[test]
fn a_regular_user_in_a_terminal_root_owns_gets_the_keyboard() {
    if attacks::skip_unless_root("a terminal of root's, used by another user") {
        return;
    }
    let Some(user) = test_user() else {
        return;
    };
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "someone else's terminal") else {
        return;
    };
    let bin = attacks::sh_quote(fx.stockade_inside());
    let run = format!(
        "{bin} run {} --workspace {}",
        attacks::backend_flags(),
        attacks::sh_quote(&fx.ws)
    );
    let inner = fx.script(
        "inner.sh",
        "stty size; echo ready-to-read; read -r x; echo \"got=$x\"\n\
         trap 'echo \"resized $(stty size)\"' WINCH\n\
         trap 'echo got-ctrl-c; exit 0' INT\n\
         echo waiting-for-keys\n\
         i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo never-interrupted\n",
    );
    let user_script = fx.script(
        "as-user.sh",
        &format!(
            "{}\nexec 3<&0\n(sleep 1; {run} -- sh -c 'echo second-ran' <&3) &\n\
             {run} -- sh {}\necho run-exit=$?\nwait\n{}\necho outer-done\n",
            reopen_check(&pty.python, "user-reopen"),
            attacks::sh_quote(&inner),
            terminal_after(&pty.python)
        ),
    );
    let cmd = as_user(&fx, user, &user_script);
    let seen = pty.play(
        cmd,
        &[
            Step::Wait("ready-to-read"),
            Step::Sleep(1.5),
            Step::Type(b"typed-line\r"),
            Step::Wait("got=typed-line"),
            Step::Wait("waiting-for-keys"),
            Step::Resize(41, 132),
            Step::Wait("resized 41 132"),
            Step::Type(b"\x03"),
            Step::Wait("got-ctrl-c"),
            Step::Wait("outer-done"),
        ],
    );
    seen.assert_code(0)
        .assert_shows("user-reopen=EACCES")
        .assert_shows("24 80\r\n")
        .assert_shows("run-exit=0")
        .assert_shows("second-ran")
        .assert_shows("this terminal's keyboard claim is taken")
        .assert_shows("isig icanon echo settings-after")
        .assert_shows("nonblock=0")
        .assert_lacks("never-interrupted");
    assert_eq!(
        seen.text.matches("keyboard claim is taken").count(),
        1,
        "{}",
        seen.describe()
    );
    // Control: root opens the same kind of terminal again (the check tells the two apart).
    let root = pty.play(
        fx.host(&reopen_check(&pty.python, "root-reopen")),
        &[Step::Wait("root-reopen=")],
    );
    root.assert_code(0).assert_shows("root-reopen=ok");
}

/// The escape `~.` ends a run that reads the keys through the caller's own descriptor (a
/// regular user in root's terminal), which leaves the terminal as it was. Control: `~~`
/// leaves the command running to its end.
#[test]
fn the_escape_works_for_a_regular_user_in_a_terminal_root_owns() {
    if attacks::skip_unless_root("a terminal of root's, used by another user") {
        return;
    }
    let Some(user) = test_user() else {
        return;
    };
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "escape in someone else's terminal") else {
        return;
    };
    let bin = attacks::sh_quote(fx.stockade_inside());
    let script = fx.script(
        "escape.sh",
        &format!(
            "{bin} run {} --workspace {} -- sh -c \"trap '' INT; echo ignoring-ctrl-c; sleep 4; echo ran-to-the-end\"\necho run-exit=$?\n{}\necho outer-done\n",
            attacks::backend_flags(),
            attacks::sh_quote(&fx.ws),
            terminal_after(&pty.python)
        ),
    );
    let steps = |keys: &'static [u8]| {
        [
            Step::Wait("ignoring-ctrl-c"),
            Step::Type(b"\x03"),
            Step::Sleep(0.3),
            Step::Type(keys),
            Step::Wait("outer-done"),
        ]
    };
    let seen = pty.play(as_user(&fx, user, &script), &steps(b"\r~."));
    seen.assert_code(0)
        .assert_lacks("ran-to-the-end")
        .assert_lacks("run-exit=0")
        .assert_shows("isig icanon echo settings-after")
        .assert_shows("nonblock=0");
    let control = pty.play(as_user(&fx, user, &script), &steps(b"\r~~"));
    control
        .assert_code(0)
        .assert_shows("ran-to-the-end")
        .assert_shows("run-exit=0");
}

/// A run that cannot take the keyboard says so on stderr, once (it used to show its output
/// and read nothing, silently): here a second run on a terminal whose keys a first run holds.
/// The keys still reach the first. Control: the first alone says nothing of the kind.
#[test]
fn a_run_that_cannot_take_the_keyboard_says_so_on_stderr() {
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "keyboard held by another run") else {
        return;
    };
    let run = format!(
        "{} run {} --workspace {}",
        attacks::sh_quote(attacks::stockade_bin()),
        attacks::backend_flags(),
        attacks::sh_quote(&fx.ws)
    );
    let err = fx.out_file("second-stderr");
    // The second run in a workspace of its own: a root caller's gVisor runs on one workspace
    // take turns (crates/stockade/src/workspace_lock.rs), and these two must overlap.
    let ws2 = fx.out_file("ws2");
    attacks::mkdir(&ws2);
    let second = format!(
        "{} run {} --workspace {} -- sh -c 'echo second-ran'",
        attacks::sh_quote(attacks::stockade_bin()),
        attacks::backend_flags(),
        attacks::sh_quote(&ws2)
    );
    let first = format!("{run} -- sh -c 'echo first-ready; read -r x; echo \"first-got=$x\"'");
    let script = format!(
        "exec 3<&0\n(sleep 1; {second} <&3 2>{err}; echo second-done) &\n\
         {first}\nwait\necho \"second-stderr: $(cat {err})\"\necho outer-done\n",
        err = attacks::sh_quote(&err)
    );
    let steps = [
        Step::Wait("first-ready"),
        Step::Wait("second-done"),
        Step::Type(b"typed-line\r"),
        Step::Wait("first-got=typed-line"),
        Step::Wait("outer-done"),
    ];
    let seen = pty.play(fx.host(&script), &steps);
    // A gVisor run with its errors in a file gets no terminal (runsc's is all three streams
    // at once), and says that instead.
    let said = if attacks::backend() == "gvisor" {
        "gives the command a terminal only when"
    } else {
        "keyboard claim is taken"
    };
    seen.assert_code(0)
        .assert_shows("second-ran")
        .assert_shows("second-stderr: stockade: note: ")
        .assert_shows(said);
    assert_eq!(seen.text.matches(said).count(), 1, "{}", seen.describe());
    let control = pty.play(
        fx.host(&format!("{first}\necho outer-done\n")),
        &[
            Step::Wait("first-ready"),
            Step::Type(b"typed-line\r"),
            Step::Wait("outer-done"),
        ],
    );
    control
        .assert_code(0)
        .assert_shows("first-got=typed-line")
        .assert_lacks("keyboard");
}

/// As `su -c` leaves it (a session of its own, the terminal its stdio but not its controlling
/// terminal): a regular user in root's terminal still gets the keys through the descriptor it
/// holds. Control: the user may not open the terminal again.
#[test]
fn a_regular_user_in_root_s_terminal_that_is_not_its_controlling_terminal_gets_the_keys() {
    if attacks::skip_unless_root("a terminal of root's, used by another user") {
        return;
    }
    let Some(user) = test_user() else {
        return;
    };
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "someone else's terminal, not the controlling one") else {
        return;
    };
    let script = fx.script(
        "nocontrol.sh",
        &format!(
            "{}\n{} run {} --workspace {} -- sh -c 'echo ready-to-read; read -r x; echo \"got=$x\"'\necho outer-done\n",
            reopen_check(&pty.python, "user-reopen"),
            attacks::sh_quote(fx.stockade_inside()),
            attacks::backend_flags(),
            attacks::sh_quote(&fx.ws),
        ),
    );
    let seen = pty.play(
        as_user(&fx, user, &script).env("HARNESS_NOCTTY", "1"),
        &[
            Step::Wait("ready-to-read"),
            Step::Type(b"typed-line\r"),
            Step::Wait("outer-done"),
        ],
    );
    seen.assert_code(0)
        .assert_shows("user-reopen=EACCES")
        .assert_shows("got=typed-line");
}

/// Issue 31, item 3 (red team 08, 09): `su USER -c 'stockade run ...' &` in root's terminal
/// runs in a session of its own, where `tcgetpgrp` says nothing (`ENOTTY`); that was taken for
/// "in the foreground", and the run in the background set root's terminal raw and read what
/// root typed next at its own prompt (a password) into the sandboxed command. Now the run
/// looks at `su` (its ancestor in root's session): in the background, it takes no keys, leaves
/// root's terminal as it is and says so; root's own `read` gets every line. Control: the same
/// `su -c` in the foreground gets the keys (and a line typed reaches the command).
#[test]
fn a_users_run_started_by_su_c_in_the_background_does_not_read_root_s_keys() {
    if attacks::skip_unless_root("a terminal of root's, used by another user") {
        return;
    }
    let Some(user) = test_user() else {
        return;
    };
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "su -c in the background of root's terminal") else {
        return;
    };
    // One `read` for the whole wait: bash reads a terminal a byte at a time, and a timeout that
    // ends between two bytes of a line keeps the first ones in its variable and fails (a loop
    // of `read -t 1` with the control's line typed about a second in lost its first byte under
    // load: `SANDBOX-READ=<yped-line>`).
    let reader = fx.script(
        "reader.sh",
        "echo reader-started; if read -t 12 -r x; then echo \"SANDBOX-READ=<$x>\"; exit 0; fi; echo reader-end\n",
    );
    let su = su_c_run(&fx, user, "", &reader);
    // Root's shell with job control (as at a prompt): the `&` job is a process group of its
    // own, in the background.
    let root = format!(
        "set -m\n{su} &\nsleep 3\n{settings}\nfor i in 1 2; do read -r pw; echo \"ROOT-GOT=<$pw>\"; done\nwait\necho outer-done\n",
        settings = terminal_after(&pty.python),
    );
    let seen = pty.play(
        fx.host(&format!("exec bash -c {}", attacks::sh_quote(&root))),
        &[
            Step::Wait("reader-started"),
            Step::Wait("settings-after"),
            Step::Type(b"hunter2\r"),
            Step::Wait("ROOT-GOT=<hunter2>"),
            Step::Type(b"s3cret\r"),
            Step::Wait("ROOT-GOT=<s3cret>"),
            Step::Wait("outer-done"),
        ],
    );
    seen.assert_code(0)
        .assert_shows("reader-end")
        .assert_shows("not in its terminal's foreground")
        .assert_shows("isig icanon echo settings-after")
        .assert_lacks("SANDBOX-READ");

    // Control: the same su -c in the foreground of root's shell reads the keys.
    let root = format!("set -m\n{su}\necho outer-done\n");
    let control = pty.play(
        fx.host(&format!("exec bash -c {}", attacks::sh_quote(&root))),
        &[
            Step::Wait("reader-started"),
            Step::Sleep(1.0),
            Step::Type(b"typed-line\r"),
            Step::Wait("outer-done"),
        ],
    );
    control
        .assert_code(0)
        .assert_shows("SANDBOX-READ=<typed-line>")
        .assert_lacks("foreground");
}

/// Issue 31, item 3 (red team 12): root's own run starts while a user's run (`su -c`, reading
/// root's terminal through the shared description) holds the terminal in its raw mode. Root's
/// run used to save that raw mode as "the settings from before" and put it back at its end,
/// after the user's run had restored the terminal: root's shell was left raw. Now it finds the
/// keyboard taken (the user's claim, the terminal in a shared raw mode), leaves the settings
/// alone and says so; after both, root's shell has its terminal cooked. Control (the attack's
/// precondition): while both run, the terminal is raw with reads that return at once.
#[test]
fn a_root_run_beside_a_users_run_leaves_root_s_terminal_cooked() {
    if attacks::skip_unless_root("a terminal of root's, used by another user") {
        return;
    }
    let Some(user) = test_user() else {
        return;
    };
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "two runs on root's terminal") else {
        return;
    };
    let sleeper = fx.script("sleeper.sh", "echo user-run-started; sleep 5\n");
    let su = su_c_run(&fx, user, "", &sleeper);
    // Root's run in a workspace of its own (a root caller's gVisor runs on one take turns).
    let ws2 = fx.out_file("ws2");
    attacks::mkdir(&ws2);
    let during = fx.out_file("during");
    let root = format!(
        "exec 3<&0\n{su} <&3 &\nsleep 2\n(sleep 1; stty -a <&3 > {during}) &\n{} run {} --workspace {} -- sh -c 'echo root-run-started; sleep 8'\nwait\n{}\necho \"during: $(tr '\\n' ' ' < {during})\"\necho outer-done\n",
        attacks::sh_quote(attacks::stockade_bin()),
        attacks::backend_flags(),
        attacks::sh_quote(&ws2),
        terminal_after(&pty.python),
        during = attacks::sh_quote(&during),
    );
    let seen = pty.play(
        fx.host(&root),
        &[
            Step::Wait("user-run-started"),
            Step::Wait("root-run-started"),
            Step::Wait("outer-done"),
        ],
    );
    seen.assert_code(0)
        .assert_shows("keyboard claim is taken")
        .assert_shows("isig icanon echo settings-after")
        .assert_shows("nonblock=0");
    let during = seen
        .text
        .lines()
        .find(|l| l.starts_with("during: "))
        .unwrap_or_default();
    assert!(
        during.contains(" -icanon ") && during.contains("min = 0;"),
        "the user's run did not hold the terminal raw while root's started: {during:?}\n{}",
        seen.describe()
    );
}

/// Red team 05: another local user (`nobody`) binds the name a run claims root's terminal's
/// keyboard by (anyone may bind an abstract name) before a user's run there: the run reads no
/// keys while the name is taken, and its note says the claim is taken by another run or
/// another user (it used to say another run holds the keyboard, when none did); once the
/// squatter is gone the run takes the keys and a line typed meanwhile reaches it. Control:
/// without the squatter the note is not given.
#[test]
fn a_keyboard_claim_squatted_by_another_user_is_named_as_taken() {
    if attacks::skip_unless_root("a terminal of root's, used by other users") {
        return;
    }
    let Some(user) = test_user() else {
        return;
    };
    let fx = Fixture::new();
    let Some(pty) = Pty::new(&fx, "a squatted keyboard claim") else {
        return;
    };
    let reader = fx.script(
        "reader.sh",
        "echo ready-to-read; read -r x; echo \"got=$x\"\n",
    );
    let user_run = fx.script(
        "as-user.sh",
        &format!(
            "{} run {} --workspace {} -- sh {}\necho outer-done\n",
            attacks::sh_quote(fx.stockade_inside()),
            attacks::backend_flags(),
            attacks::sh_quote(&fx.ws),
            attacks::sh_quote(&reader),
        ),
    );
    give_to(&fx, user);
    let squat = format!(
        "runuser -u nobody -- {} -c 'import socket, os, time\nst = os.fstat(1)\ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\ns.bind(b\"\\0stockade/keyboard/%d/%d\" % (st.st_dev, st.st_rdev))\nprint(\"squatted\", flush=True)\ntime.sleep(5)' &\nsleep 1\n",
        attacks::sh_quote(&pty.python)
    );
    let user = format!(
        "runuser -u {user} -- env -i PATH={} HOME={} TERM=xterm sh {}\nwait\n",
        attacks::PATH,
        attacks::sh_quote(&fx.home),
        attacks::sh_quote(&user_run)
    );
    let steps = [
        Step::Wait("ready-to-read"),
        Step::Sleep(0.5),
        Step::Type(b"typed-line\r"),
        Step::Wait("got=typed-line"),
        Step::Wait("outer-done"),
    ];
    let seen = pty.play(fx.host(&format!("{squat}{user}")), &steps);
    seen.assert_code(0)
        .assert_shows("squatted")
        .assert_shows("keyboard claim is taken (by another run or another user)")
        .assert_shows("got=typed-line");
    let control = pty.play(fx.host(&user), &steps);
    control
        .assert_code(0)
        .assert_shows("got=typed-line")
        .assert_lacks("claim is taken");
}
