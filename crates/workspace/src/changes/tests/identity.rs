//! A file's identity is a function of its bytes (issue 30 red team, F3 and F6), and a file
//! with many names is read once (F2, finish side).

use std::os::unix::fs::FileExt;

use rustix::fs::FallocateFlags;
use sha2::Digest;

use super::*;
use crate::changes::read::{copy_file, has_hole, hash_file, hex, BYTES_READ};

fn identity(path: &Path) -> (String, bool) {
    let h = hash_file(&mut std::fs::File::open(path).unwrap(), true).unwrap();
    (h.sha256, h.sparse)
}

/// `bytes` written whole (no hole: every block data).
fn dense(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

/// The holes of `path` made by punching every block of zeros (same bytes, other layout);
/// `false` when this filesystem punches none (said on stderr).
fn punch_zeros(path: &Path) -> bool {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let size = f.metadata().unwrap().len();
    let mut buf = vec![0u8; 4096];
    let mut off = 0;
    while off + 4096 <= size {
        f.read_exact_at(&mut buf, off).unwrap();
        if buf.iter().all(|&b| b == 0)
            && rustix::fs::fallocate(
                &f,
                FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
                off,
                4096,
            )
            .is_err()
        {
            eprintln!("skipped: this filesystem punches no hole");
            return false;
        }
        off += 4096;
    }
    f.sync_all().unwrap();
    if !has_hole(&f, size).unwrap() {
        eprintln!("skipped: {} keeps no holes", path.display());
        return false;
    }
    true
}

/// The same bytes through every layout (written whole, holes punched where the zeros are,
/// unwritten extents from `fallocate` with data written over part of them, copied by
/// `copy_file`) have one identity; one byte more or other, another.
#[test]
fn the_same_bytes_have_one_identity_whatever_their_layout() {
    let t = tempfile::tempdir().unwrap();
    let mut bytes = vec![b'A'; 4096];
    bytes.extend(vec![0u8; 3 * 4096]);
    bytes.extend(b"tail");
    let a = t.path().join("dense");
    dense(&a, &bytes);
    let (ia, sa) = identity(&a);
    assert!(!sa);
    let b = t.path().join("punched");
    dense(&b, &bytes);
    if !punch_zeros(&b) {
        return;
    }
    let (ib, sb) = identity(&b);
    assert!(sb, "the punched file reads as one with holes");
    assert_eq!(ia, ib);
    // fallocate: unwritten extents, then the data written over part of them.
    let c = t.path().join("fallocated");
    {
        let f = std::fs::File::create(&c).unwrap();
        rustix::fs::fallocate(&f, FallocateFlags::empty(), 0, bytes.len() as u64).unwrap();
        f.write_all_at(&bytes[..4096], 0).unwrap();
        f.write_all_at(b"tail", 4 * 4096).unwrap();
    }
    assert_eq!(identity(&c).0, ia);
    // copy_file gives the identity of what it copied, and a copy of either layout has it.
    for from in [&a, &b] {
        let to = t.path().join("copy");
        let _ = std::fs::remove_file(&to);
        let out = std::fs::File::create(&to).unwrap();
        let got = copy_file(&std::fs::File::open(from).unwrap(), &out).unwrap();
        assert_eq!(got, ia);
        assert_eq!(std::fs::read(&to).unwrap(), bytes);
        assert_eq!(identity(&to).0, ia);
    }
    // Controls: other bytes, another identity.
    let mut other = bytes.clone();
    other[4096 + 17] = 1;
    let d = t.path().join("other");
    dense(&d, &other);
    assert_ne!(identity(&d).0, ia);
    let e = t.path().join("longer");
    dense(&e, &[bytes.as_slice(), b"\0"].concat());
    assert_ne!(identity(&e).0, ia);
    let f = t.path().join("shorter");
    dense(&f, &bytes[..bytes.len() - 1]);
    assert_ne!(identity(&f).0, ia);
    let empty = t.path().join("empty");
    dense(&empty, b"");
    let zero = t.path().join("zero");
    dense(&zero, b"\0");
    assert_ne!(identity(&empty).0, identity(&zero).0);
}

/// The tag format 1 opened a sparse file's hash with.
const OLD_TAG: &[u8] = b"stockade sparse file v1\0";

/// F6: format 1 named a file without holes by the SHA-256 of its bytes and a file with holes
/// by SHA-256 over a tag, its blocks and its size, in one domain: a file whose bytes were
/// that preimage had the identity of another file. Now every file has one kind of identity,
/// and the two differ.
#[test]
fn a_file_holding_another_files_block_encoding_is_another_file() {
    let t = tempfile::tempdir().unwrap();
    let preimage = [
        OLD_TAG,
        &0u64.to_le_bytes(),
        &[b'A'; 4096],
        &8192u64.to_le_bytes(),
    ]
    .concat();
    let d = t.path().join("d");
    dense(&d, &preimage);
    let s = t.path().join("s");
    {
        let f = std::fs::File::create(&s).unwrap();
        f.write_all_at(&[b'A'; 4096], 0).unwrap();
        f.set_len(8192).unwrap();
    }
    // Control: these are the colliding pair of format 1 (the dense file's plain SHA-256 is
    // the old sparse hash of the other).
    let mut old = sha2::Sha256::new();
    old.update(OLD_TAG);
    old.update(0u64.to_le_bytes());
    old.update([b'A'; 4096]);
    old.update(8192u64.to_le_bytes());
    assert_eq!(hex(&old.finalize()), hex(&sha2::Sha256::digest(&preimage)));
    assert_ne!(identity(&d).0, identity(&s).0);
    // Nor is any identity the plain SHA-256 of some bytes.
    assert_ne!(identity(&d).0, hex(&sha2::Sha256::digest(&preimage)));
}

/// F6 as a run: the workspace holds the preimage, the run replaces it by the file it encoded
/// (and changes the mode of a second copy): both are content changes, neither dropped as
/// unchanged nor shown as a mode change only.
#[test]
fn a_run_replacing_the_preimage_by_its_file_is_a_change() {
    let fx = Fx::new();
    let preimage = [
        OLD_TAG,
        &0u64.to_le_bytes(),
        &[b'A'; 4096],
        &8192u64.to_le_bytes(),
    ]
    .concat();
    for n in ["blob1.bin", "blob2.bin"] {
        dense(&fx.ws.join(n), &preimage);
        chmod(&fx.ws.join(n), 0o644);
    }
    let mut run = fx.start("collide");
    for n in ["blob1.bin", "blob2.bin"] {
        let f = std::fs::File::create(run.upper().join(n)).unwrap();
        f.write_all_at(&[b'A'; 4096], 0).unwrap();
        f.set_len(8192).unwrap();
    }
    chmod(&run.upper().join("blob1.bin"), 0o644);
    chmod(&run.upper().join("blob2.bin"), 0o600);
    let set = run.finish(&FlagRules::default()).unwrap();
    assert_eq!(
        kinds(&set),
        [
            ("blob1.bin".to_string(), ChangeKind::Modified),
            ("blob2.bin".to_string(), ChangeKind::Modified)
        ]
    );
}

/// F3: the layout of a run's file changes after `finish` (ext4 reports `fallocate`'s
/// unwritten extents as data while their pages are cached, as holes after; here the holes
/// are punched, and the pages dropped): the bytes are the same, so the change set is the
/// same, not "tampered". Control: other bytes are.
#[test]
fn a_layout_changed_after_finish_is_not_tampering() {
    let fx = Fx::new();
    let mut run = fx.start("layout");
    let f = run.upper().join("f");
    let g = run.upper().join("g");
    {
        let file = std::fs::File::create(&f).unwrap();
        rustix::fs::fallocate(&file, FallocateFlags::empty(), 0, 1 << 20).unwrap();
        // Read it: its pages are cached (ext4 then reports them as data).
        std::fs::read(&f).unwrap();
    }
    let mut bytes = vec![b'x'; 4096];
    bytes.extend(vec![0u8; 8192]);
    dense(&g, &bytes);
    let rules = FlagRules::default();
    let set = run.finish(&rules).unwrap();
    assert_eq!(set.entries.len(), 2);
    // The pages of f leave the cache (what drop_caches does to every file).
    {
        let file = std::fs::File::open(&f).unwrap();
        file.sync_all().unwrap();
        let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
    }
    if !punch_zeros(&g) {
        return;
    }
    let again = fx.store.find(Some("layout"), None).unwrap();
    assert_eq!(again.changes(&rules).unwrap(), set);
    // Control: one byte other, tampered.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&g)
        .unwrap()
        .write_all_at(b"y", 0)
        .unwrap();
    let e = again.changes(&rules).unwrap_err();
    assert!(matches!(e, ChangesError::Tampered { .. }), "{e}");
}

/// F3 at apply: the workspace's file a change replaces gets holes where its zeros were
/// (same bytes) after `finish`: no conflict, applied. Control: a byte of it changed is one.
#[test]
fn a_workspace_file_whose_layout_changed_is_no_conflict() {
    let fx = Fx::new();
    let mut bytes = vec![b'x'; 4096];
    bytes.extend(vec![0u8; 8192]);
    let w = fx.ws.join("w.bin");
    dense(&w, &bytes);
    let v = fx.ws.join("v.bin");
    dense(&v, &bytes);
    let mut run = fx.start("wslayout");
    dense(&run.upper().join("w.bin"), b"new\n");
    dense(&run.upper().join("v.bin"), b"new\n");
    let rules = FlagRules::default();
    run.finish(&rules).unwrap();
    if !punch_zeros(&w) || !punch_zeros(&v) {
        return;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&v)
        .unwrap()
        .write_all_at(b"y", 0)
        .unwrap();
    let e = run.apply(&accept_all(), &rules).unwrap_err();
    match &e {
        ChangesError::Conflict(list) => {
            let paths: Vec<_> = list.iter().map(|(p, _)| p.clone()).collect();
            assert_eq!(paths, [p("v.bin")], "{e}");
        }
        _ => panic!("{e}"),
    }
    let opts = ApplyOptions {
        exclude: vec![p("v.bin")],
        ..accept_all()
    };
    run.apply(&opts, &rules).unwrap();
    assert_eq!(std::fs::read(&w).unwrap(), b"new\n");
}

/// F2, finish side: a run's file with 1000 more names (hard links) is read once (the bytes
/// read are counted), each name recorded as an entry flagged `hard-link`, and refused
/// unaccepted. Control: a file with one name is not flagged and is applied.
#[test]
fn a_file_with_many_names_is_read_once_and_flagged() {
    let fx = Fx::new();
    let mut run = fx.start("links");
    let size = 64 << 10;
    let f0 = run.upper().join("f0");
    dense(&f0, &b"a line of text\n".repeat(size / 15 + 1)[..size]);
    std::fs::create_dir(run.upper().join("l")).unwrap();
    for i in 1..=1000 {
        std::fs::hard_link(&f0, run.upper().join(format!("l/f{i}"))).unwrap();
    }
    up(&run, "single.txt", "one name\n");
    let rules = FlagRules::default();
    BYTES_READ.with(|c| c.set(0));
    let set = run.finish(&rules).unwrap();
    let read = BYTES_READ.with(|c| c.get());
    assert!(
        read < 2 * size as u64 + 4096,
        "finish read {read} bytes of a {size}-byte file with 1001 names"
    );
    assert_eq!(set.entries.len(), 1003);
    for e in &set.entries {
        let c: Vec<&str> = e.flags.iter().map(|f| f.code).collect();
        match e.path.to_str().unwrap() {
            "l" => assert!(c.is_empty(), "{c:?}"),
            "single.txt" => assert!(c.is_empty(), "{c:?}"),
            _ => {
                assert_eq!(c, ["hard-link"], "{}", e.path.display());
                let why = &e.flags[0].reason;
                assert!(why.contains("1001 names"), "{why}");
            }
        }
    }
    // Reading the change set again (`changes` checks the digest) reads the file once too.
    let again = fx.store.find(Some("links"), None).unwrap();
    BYTES_READ.with(|c| c.set(0));
    assert_eq!(again.changes(&rules).unwrap(), set);
    assert!(BYTES_READ.with(|c| c.get()) < 2 * size as u64 + 4096);
    // Unaccepted: refused, nothing written.
    let e = run.apply(&ApplyOptions::default(), &rules).unwrap_err();
    match &e {
        ChangesError::Flagged(list) => assert_eq!(list.len(), 1001),
        _ => panic!("{e}"),
    }
    assert!(!fx.ws.join("f0").exists() && !fx.ws.join("single.txt").exists());
    // Control: the file with one name is applied.
    let only = ApplyOptions {
        only: vec![p("single.txt")],
        ..ApplyOptions::default()
    };
    run.apply(&only, &rules).unwrap();
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("single.txt")).unwrap(),
        "one name\n"
    );
    assert!(!fx.ws.join("f0").exists());
}

/// A change set sealed by an older stockade (format 1: files named by the SHA-256 of their
/// bytes) is listed and can be discarded, but neither shown nor applied: refused, saying so.
#[test]
fn a_change_set_of_the_older_format_is_refused_clearly() {
    let fx = Fx::new();
    let mut run = fx.start("old");
    up(&run, "a.txt", "a\n");
    let rules = FlagRules::default();
    run.finish(&rules).unwrap();
    let meta = run.path().join("meta.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["format"], 2);
    v["format"] = serde_json::json!(1);
    std::fs::write(&meta, serde_json::to_vec(&v).unwrap()).unwrap();
    let old = fx.store.find(Some("old"), None).unwrap();
    for e in [
        old.changes(&rules).unwrap_err(),
        old.diff(&[]).unwrap_err(),
        fx.store
            .find(Some("old"), None)
            .unwrap()
            .apply(&accept_all(), &rules)
            .unwrap_err(),
    ] {
        assert!(
            matches!(&e, ChangesError::Unsupported { reason, .. } if reason.contains("format 1")),
            "{e}"
        );
    }
    assert!(!fx.ws.join("a.txt").exists());
    let runs = fx.store.runs().unwrap();
    assert!(runs[0].problem.is_none(), "{:?}", runs[0].problem);
    fx.store.find(Some("old"), None).unwrap().discard().unwrap();
    // Control: a format this stockade does not know is not read at all.
    let mut run = fx.start("future");
    up(&run, "b.txt", "b\n");
    run.finish(&rules).unwrap();
    let meta = run.path().join("meta.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    v["format"] = serde_json::json!(3);
    std::fs::write(&meta, serde_json::to_vec(&v).unwrap()).unwrap();
    assert!(matches!(
        fx.store.find(Some("future"), None).unwrap_err(),
        ChangesError::Corrupt { .. }
    ));
}
