//! A run ends when its command does, whatever its stdin is, and the command reads what comes
//! there. Claude Code gives the commands it runs (through `CLAUDE_CODE_SHELL_PREFIX`) a
//! connected socket as stdin and keeps it open and silent: a backend that relays stdin must
//! not wait for that socket's end. Each kind is held open by the test for the whole run (a
//! socket's peer, a pipe's writer), so nothing but the command's own end can end the run.
//!
//! Under every backend (`STOCKADE_TEST_BACKEND`), as root and unprivileged. This is a liveness
//! property: the deadline of each run is the control (the gVisor backend before its stdin relay
//! waited in `poll(2)` never ended the socket runs: its `std::io::copy` spliced from the socket
//! into the command's pipe holding the pipe's lock, and closing the pipe after the run waited
//! for it; the unit tests `stream::relay::tests` show that kernel behaviour; measured: the
//! binary before that fix fails both tests here under gVisor, root and unprivileged, at their
//! first socket, and passes them under native). Terminals as stdin are covered by
//! `terminal.rs` and `own_terminal.rs`.

// Test helpers may panic: a failed spawn is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use attacks::Fixture;

/// How long a run that should end at once may take on a loaded machine (a gVisor start takes
/// about a second there).
const DEADLINE: Duration = Duration::from_secs(60);

/// What a run printed and how it ended.
struct Ended {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `stockade run -- sh -c SCRIPT` (the backend under test) with `stdin`, which the caller keeps
/// open elsewhere; fails the test when the run is not over within [`DEADLINE`].
fn run_with_stdin(fx: &Fixture, what: &str, stdin: OwnedFd, script: &str) -> Ended {
    let (argv, env, cwd) = fx.sandbox_argv(&[], &["sh", "-c", script]).parts();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(env)
        .current_dir(cwd)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start stockade");
    let read = |mut from: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = from.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > DEADLINE {
            // runsc ends with stockade (it dies with its parent).
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what}: the run did not end within {DEADLINE:?} though its command ended at once\n\
                 argv: {argv:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ended {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// A connected stream socket pair (Claude Code's kind), a connected TCP socket on loopback,
/// and a pipe: the first is the command's stdin, the second the test's end, kept open.
fn open_kinds() -> Vec<(&'static str, OwnedFd, Box<dyn Write + Send>)> {
    let (peer, ours) = UnixStream::pair().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (tcp_peer, _) = listener.accept().unwrap();
    let (pipe_r, pipe_w) = std::io::pipe().unwrap();
    vec![
        ("a Unix socket pair", OwnedFd::from(ours), Box::new(peer)),
        (
            "a TCP socket on loopback",
            OwnedFd::from(tcp),
            Box::new(tcp_peer),
        ),
        ("a pipe", OwnedFd::from(pipe_r), Box::new(pipe_w)),
    ]
}

/// A command that does not read its stdin ends the run at once, with its own output and exit
/// code, though its stdin stays open (a socket, a pipe) or is a file or /dev/null.
#[test]
fn a_run_ends_with_its_command_whatever_its_stdin() {
    let fx = Fixture::new();
    let script = "echo out-marker; echo err-marker >&2; exit 7";
    let mut held = Vec::new();
    let mut kinds: Vec<(&str, OwnedFd)> = Vec::new();
    for (what, stdin, peer) in open_kinds() {
        kinds.push((what, stdin));
        held.push(peer);
    }
    let file = fx.root.join("stdin-file");
    attacks::write_file(&file, "from a file\n", 0o644);
    kinds.push(("a file", std::fs::File::open(&file).unwrap().into()));
    kinds.push((
        "/dev/null",
        std::fs::File::open("/dev/null").unwrap().into(),
    ));
    for (what, stdin) in kinds {
        let ended = run_with_stdin(&fx, what, stdin, script);
        assert_eq!(ended.code, Some(7), "{what}: {}", ended.stderr);
        assert_eq!(ended.stdout, "out-marker\n", "{what}: {}", ended.stderr);
        assert!(
            ended.stderr.contains("err-marker"),
            "{what}: {}",
            ended.stderr
        );
    }
    // The peers were open all along (the runs did not end for want of input).
    drop(held);
}

/// The command reads what comes on its stdin: one line from a socket (or pipe) still open
/// ends the run once read; all of it up to the end when the peer closes its side (and only
/// then: the end reaches the command).
#[test]
fn the_command_reads_what_comes_on_a_socket_as_stdin() {
    let fx = Fixture::new();
    let line = fx.marker("line");
    for (what, stdin, mut peer) in open_kinds() {
        peer.write_all(format!("{line}\nnot read\n").as_bytes())
            .unwrap();
        let ended = run_with_stdin(&fx, what, stdin, "read l; echo \"got:$l\"");
        assert_eq!(ended.code, Some(0), "{what}: {}", ended.stderr);
        assert_eq!(
            ended.stdout,
            format!("got:{line}\n"),
            "{what}: {}",
            ended.stderr
        );
        drop(peer);
    }
    // All of it, its end included: the peer sends, then closes its side after a while (the
    // command has started and waits), and `wc -c` counts every byte.
    for (what, stdin, mut peer) in open_kinds() {
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let chunk = vec![b'z'; 100_000];
            for _ in 0..3 {
                peer.write_all(&chunk).unwrap();
            }
            drop(peer);
        });
        let ended = run_with_stdin(&fx, what, stdin, "wc -c");
        sender.join().unwrap();
        assert_eq!(ended.code, Some(0), "{what}: {}", ended.stderr);
        assert_eq!(ended.stdout.trim(), "300000", "{what}: {}", ended.stderr);
    }
}
