//! The streaming sanitizer (`guard::Sanitizer`) on arbitrary bytes, whole and cut into
//! chunks: one byte at a time, and at pseudo-random points derived from the first byte.
//!
//! Invariants: nothing panics; the output is valid UTF-8 holding no code point `classify`
//! says is removed; how the input is chunked changes neither the output nor the report. The
//! line-editing mode (a run's own terminal) holds the same, except that its output may also
//! hold backspace, BEL and whole CSIs `ESC [ <digits and ;, at most 8> <one of @CDGKPX>`,
//! and with those taken out it is the default mode's output.
#![no_main]

use guard::{classify, sanitize, Sanitizer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (whole, report) = sanitize(data);
    for c in whole.chars() {
        assert_eq!(
            classify(c),
            None,
            "{c:?} (U+{:04X}) left in the output",
            c as u32
        );
    }
    assert_eq!(report.bytes_in, data.len() as u64);
    assert_eq!(report.bytes_out, whole.len() as u64);

    line_editing(data, &whole);

    let seed = data.first().copied().unwrap_or(0);
    for cuts in [Cuts::Every(1), Cuts::Random(u32::from(seed) | 1)] {
        let mut s = Sanitizer::new();
        let mut out = Vec::new();
        let mut rest = data;
        let mut cuts = cuts;
        while !rest.is_empty() {
            let n = cuts.next().min(rest.len());
            let (chunk, tail) = rest.split_at(n);
            s.push(chunk, &mut out);
            rest = tail;
        }
        s.push(&[], &mut out);
        let chunked_report = s.finish(&mut out);
        let chunked = match String::from_utf8(out) {
            Ok(text) => text,
            Err(e) => panic!("chunked output is not UTF-8: {e}"),
        };
        assert_eq!(chunked, whole, "chunking changed the output ({cuts:?})");
        assert_eq!(
            chunked_report, report,
            "chunking changed the report ({cuts:?})"
        );
    }
});

/// The line-editing sanitizer on `data`, one byte at a time: only the kept controls and
/// sequences are added to `default` (the default mode's output).
fn line_editing(data: &[u8], default: &str) {
    let mut s = Sanitizer::line_editing();
    let mut out = Vec::new();
    for b in data.chunks(1) {
        s.push(b, &mut out);
    }
    s.finish(&mut out);
    let mut rest = out.as_slice();
    let mut plain = Vec::new();
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        match b {
            0x07 | 0x08 => {}
            0x1B => {
                let Some(tail) = rest.strip_prefix(b"[") else {
                    panic!("a bare ESC left in {out:?}");
                };
                let params = tail
                    .iter()
                    .take_while(|b| b.is_ascii_digit() || **b == b';')
                    .count();
                assert!(params <= 8, "a CSI with {params} parameter bytes in {out:?}");
                let Some(&last) = tail.get(params) else {
                    panic!("an unfinished CSI in {out:?}");
                };
                assert!(b"@CDGKPX".contains(&last), "CSI final {last:#x} in {out:?}");
                rest = &tail[params + 1..];
            }
            _ => plain.push(b),
        }
    }
    assert_eq!(plain, default.as_bytes(), "line editing kept more than its controls");
}

/// Chunk lengths: all equal, or from a small xorshift generator (1 to 16 bytes).
#[derive(Debug, Clone, Copy)]
enum Cuts {
    Every(usize),
    Random(u32),
}

impl Cuts {
    fn next(&mut self) -> usize {
        match self {
            Cuts::Every(n) => *n,
            Cuts::Random(state) => {
                *state ^= *state << 13;
                *state ^= *state >> 17;
                *state ^= *state << 5;
                (*state % 16) as usize + 1
            }
        }
    }
}
