//! The streaming sanitizer (`guard::Sanitizer`) on arbitrary bytes, whole and cut into
//! chunks: one byte at a time, and at pseudo-random points derived from the first byte.
//!
//! Invariants: nothing panics; the output is valid UTF-8 holding no code point `classify`
//! says is removed; how the input is chunked changes neither the output nor the report.
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
