//! Unit tests of the run's streams: the FIFO relays' end and stop, the stdin copy's release.
#![allow(clippy::unwrap_used, reason = "a test: panicking is how it fails")]

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::Duration;

use super::relay_pipe;
use super::streams::Redirected;

fn redirected(which: &[usize]) -> (tempfile::TempDir, Redirected) {
    use rustix::fs::{FileType, Mode, CWD};
    let dir = tempfile::tempdir().unwrap();
    for i in which {
        let p = dir.path().join(i.to_string());
        rustix::fs::mknodat(CWD, &p, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    }
    let r = Redirected {
        which: which.to_vec(),
        dir: dir.path().to_path_buf(),
        mount: String::new(),
    };
    (dir, r)
}

/// An output FIFO's relay (as the run starts it: `relay_to_sink_until`) passes what the
/// command wrote, sees no end while the write end is held though a writer came and went
/// (a command that opens it late loses nothing), ends when every writer has gone, and
/// ends at the stop, after what the FIFO holds, though a writer outside holds it open
/// (red team: a process of the command's id kept the run going past its time limit).
#[test]
fn an_output_fifo_relay_ends_at_its_end_or_at_the_stop() {
    for outsider in [false, true] {
        let (_dir, r) = redirected(&[1]);
        let (read, hold) = r.open_output(1).unwrap();
        let (stop_r, stop_w) = relay_pipe().unwrap();
        let (mut sink_r, sink_w) = std::io::pipe().unwrap();
        let relay = std::thread::spawn(move || {
            let sink = sandbox::Sink::Fd(sink_w.into());
            stream::relay::relay_to_sink_until(read, sink, None, "stdout", false, stop_r)
        });
        let open = || {
            std::fs::OpenOptions::new()
                .write(true)
                .open(r.dir.join("1"))
                .unwrap()
        };
        let mut command = open();
        command.write_all(b"first\n").unwrap();
        drop(command);
        std::thread::sleep(Duration::from_millis(200));
        assert!(!relay.is_finished(), "ended while the write end was held");
        let mut late = open();
        late.write_all(b"late\n").unwrap();
        drop(late);
        let kept = outsider.then(open);
        drop(hold);
        if outsider {
            std::thread::sleep(Duration::from_millis(200));
            assert!(!relay.is_finished(), "ended though a writer holds it");
            drop(stop_w);
        }
        let relayed = relay.join().unwrap();
        let mut got = Vec::new();
        sink_r.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"first\nlate\n");
        assert_eq!(relayed.summary.total, 11);
        drop(kept);
    }
}

/// A stdin FIFO's copy waiting for a reader that never came (the run ended before the
/// command) is let go.
#[test]
fn a_waiting_stdin_copy_is_let_go() {
    let (_dir, r) = redirected(&[0]);
    let path = r.dir.join("0");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let opened = std::fs::OpenOptions::new().write(true).open(path);
        tx.send(opened.is_ok()).unwrap();
    });
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    r.release_input();
    assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap());
}
