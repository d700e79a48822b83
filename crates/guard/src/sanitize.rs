//! The sanitizer: removes from text headed to a model (or a person's terminal) what neither
//! can see but both obey — invisible and direction-changing code points, Unicode Tag
//! characters, and terminal control sequences — over-stripping rather than under-stripping.
//!
//! Streaming: [`Sanitizer::push`] takes input in chunks of any size (a UTF-8 sequence or an
//! escape sequence may be split between chunks) and holds at most a few bytes between calls,
//! so memory stays constant on unbounded input. Invalid UTF-8 becomes U+FFFD, never a panic.
//!
//! Hand-written rather than a regex chain: one pass over the bytes, with a fast path that
//! copies runs of printable ASCII unchanged.

use serde::Serialize;

/// What was removed, by class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Zero-width spaces and joiners, word joiner, BOM, soft hyphen, fillers, invisible math
    /// operators and the other default-ignorable code points.
    Invisible,
    /// Bidi embeddings, overrides, isolates and marks.
    Bidi,
    /// Unicode Tag characters (U+E0000–E007F): can spell ASCII no one sees.
    Tag,
    /// Variation selectors (U+FE00–FE0F, U+E0100–E01EF).
    VariationSelector,
    /// Interlinear annotation characters (U+FFF9–FFFB).
    Annotation,
    /// The spaces of U+2000–200A (the seed's list strips the whole U+2000–200F block).
    OddSpace,
    /// Terminal escape sequences: CSI, OSC (hyperlinks, titles), DCS, APC, PM, SOS, and the
    /// other ESC sequences.
    Escape,
    /// C0 controls other than `\n`, `\r`, `\t`; DEL; C1 controls (U+0080–009F).
    Control,
    /// Bytes that were not valid UTF-8 (replaced by U+FFFD, not removed).
    InvalidUtf8,
}

impl Class {
    pub const ALL: [Class; 9] = [
        Class::Invisible,
        Class::Bidi,
        Class::Tag,
        Class::VariationSelector,
        Class::Annotation,
        Class::OddSpace,
        Class::Escape,
        Class::Control,
        Class::InvalidUtf8,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// Per class: how many were removed (escape sequences count once each) and the byte offset
/// of the first in the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Found {
    pub count: u64,
    pub first_offset: Option<u64>,
}

/// What a sanitizer removed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Report {
    /// Bytes read.
    pub bytes_in: u64,
    /// Bytes written.
    pub bytes_out: u64,
    /// By class; classes never seen are left out.
    pub found: std::collections::BTreeMap<Class, Found>,
    /// Text spelled by Tag characters (U+E0020–E007E map to ASCII), as it was hidden. Kept up
    /// to [`HIDDEN_MAX`] bytes.
    pub hidden_text: String,
}

impl Report {
    /// Whether anything was removed or replaced.
    pub fn is_clean(&self) -> bool {
        self.found.values().all(|f| f.count == 0)
    }

    pub fn count(&self, class: Class) -> u64 {
        self.found.get(&class).map_or(0, |f| f.count)
    }
}

/// Hidden text kept in the report at most.
pub const HIDDEN_MAX: usize = 4096;

/// The class of a code point to remove, if it is one.
pub fn classify(c: char) -> Option<Class> {
    let u = c as u32;
    Some(match u {
        0x00..=0x08 | 0x0B | 0x0C | 0x0E..=0x1F | 0x7F | 0x80..=0x9F => Class::Control,
        0x00AD
        | 0x034F
        | 0x115F
        | 0x1160
        | 0x17B4
        | 0x17B5
        | 0x180B..=0x180F
        | 0x3164
        | 0xFFA0
        | 0xFEFF
        | 0x200B..=0x200D
        | 0x2060..=0x2064
        | 0x206A..=0x206F
        | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A
        | 0xE0080..=0xE00FF
        | 0xE01F0..=0xE0FFF => Class::Invisible,
        0x061C | 0x200E | 0x200F | 0x202A..=0x202E | 0x2066..=0x2069 => Class::Bidi,
        0xE0000..=0xE007F => Class::Tag,
        0xFE00..=0xFE0F | 0xE0100..=0xE01EF => Class::VariationSelector,
        0xFFF9..=0xFFFB => Class::Annotation,
        0x2000..=0x200A => Class::OddSpace,
        _ => return None,
    })
}

/// Where the escape-sequence parser is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Esc {
    /// Plain text.
    None,
    /// After ESC.
    Start,
    /// Inside a CSI: parameters and intermediates until a final byte 0x40–0x7E.
    Csi,
    /// Inside a string (OSC, DCS, APC, PM, SOS) until BEL (OSC) or ST (ESC \ or U+009C).
    Str,
    /// ESC inside a string: `\` ends it.
    StrEscape,
    /// After ESC and intermediate bytes (0x20–0x2F): until a final byte 0x30–0x7E.
    Intermediate,
}

/// A streaming sanitizer. Feed it with [`Sanitizer::push`], end with [`Sanitizer::finish`].
#[derive(Debug, Clone)]
pub struct Sanitizer {
    /// An incomplete UTF-8 sequence carried to the next chunk.
    pending: [u8; 4],
    pending_len: usize,
    esc: Esc,
    offset: u64,
    found: [Found; 9],
    report: Report,
}

impl Default for Sanitizer {
    fn default() -> Self {
        Sanitizer::new()
    }
}

impl Sanitizer {
    pub fn new() -> Sanitizer {
        Sanitizer {
            pending: [0; 4],
            pending_len: 0,
            esc: Esc::None,
            offset: 0,
            found: [Found::default(); 9],
            report: Report::default(),
        }
    }

    fn note(&mut self, class: Class, at: u64) {
        let f = &mut self.found[class.index()];
        f.count += 1;
        f.first_offset.get_or_insert(at);
    }

    /// Sanitize `input`, appending the result to `out`.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let before = out.len();
        self.report.bytes_in += input.len() as u64;
        if self.pending_len > 0 {
            // A UTF-8 sequence split by the chunk boundary (rare): join it to this chunk.
            let mut joined = Vec::with_capacity(self.pending_len + input.len());
            joined.extend_from_slice(&self.pending[..self.pending_len]);
            joined.extend_from_slice(input);
            let start = self.offset - self.pending_len as u64;
            self.pending_len = 0;
            self.step(&joined, start, out);
        } else {
            self.step(input, self.offset, out);
        }
        self.offset += input.len() as u64;
        self.report.bytes_out += (out.len() - before) as u64;
    }

    /// Process `input`, whose first byte is at input offset `start`. An incomplete UTF-8
    /// sequence at its end is kept in `pending`.
    fn step(&mut self, input: &[u8], start: u64, out: &mut Vec<u8>) {
        let mut i = 0;
        while i < input.len() {
            // Fast path: printable ASCII, tab and newlines in plain text.
            if self.esc == Esc::None {
                let run = plain_prefix(&input[i..]);
                if run > 0 {
                    out.extend_from_slice(&input[i..i + run]);
                    i += run;
                    continue;
                }
            }
            let b = input[i];
            let at = start + i as u64;
            if b < 0x80 {
                self.ascii(b, at, out);
                i += 1;
                continue;
            }
            let need = match b {
                0xC2..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF4 => 4,
                _ => 1,
            };
            if need == 1 {
                self.invalid(at, out);
                i += 1;
                continue;
            }
            let end = (i + need).min(input.len());
            match std::str::from_utf8(&input[i..end]) {
                Ok(s) => {
                    if let Some(c) = s.chars().next() {
                        self.char(c, at, &input[i..end], out);
                    }
                    i = end;
                }
                // One replacement per maximal invalid subpart, as `from_utf8_lossy` does.
                Err(e) => match e.error_len() {
                    Some(n) => {
                        self.invalid(at, out);
                        i += n.max(1);
                    }
                    // A valid prefix cut by the end of the chunk: the rest may come next.
                    None => {
                        let tail = &input[i..];
                        self.pending[..tail.len()].copy_from_slice(tail);
                        self.pending_len = tail.len();
                        return;
                    }
                },
            }
        }
    }

    fn invalid(&mut self, at: u64, out: &mut Vec<u8>) {
        self.note(Class::InvalidUtf8, at);
        if self.esc == Esc::None {
            out.extend_from_slice("\u{FFFD}".as_bytes());
        }
    }

    /// One ASCII byte outside the fast path (or inside an escape sequence).
    fn ascii(&mut self, b: u8, at: u64, out: &mut Vec<u8>) {
        match self.esc {
            Esc::None => match b {
                0x1B => {
                    self.note(Class::Escape, at);
                    self.esc = Esc::Start;
                }
                b'\n' | b'\r' | b'\t' | 0x20..=0x7E => out.push(b),
                _ => self.note(Class::Control, at),
            },
            Esc::Start => {
                self.esc = match b {
                    b'[' => Esc::Csi,
                    b']' | b'P' | b'_' | b'^' | b'X' => Esc::Str,
                    0x20..=0x2F => Esc::Intermediate,
                    // A second ESC starts a new sequence (and is counted as one).
                    0x1B => {
                        self.note(Class::Escape, at);
                        Esc::Start
                    }
                    // Two-byte sequences (ESC 7, ESC c, ESC =, ...) end here; so does any
                    // other byte, which is swallowed with the ESC.
                    _ => Esc::None,
                };
            }
            Esc::Csi => {
                if (0x40..=0x7E).contains(&b) {
                    self.esc = Esc::None;
                } else if b == 0x1B {
                    self.note(Class::Escape, at);
                    self.esc = Esc::Start;
                } else if !(0x20..=0x3F).contains(&b) {
                    // Not part of a CSI: the sequence is cut short; the byte is a control.
                    self.esc = Esc::None;
                    self.ascii(b, at, out);
                }
            }
            Esc::Str => match b {
                0x07 => self.esc = Esc::None,
                0x1B => self.esc = Esc::StrEscape,
                _ => {}
            },
            Esc::StrEscape => {
                self.esc = if b == b'\\' { Esc::None } else { Esc::Str };
            }
            Esc::Intermediate => {
                if (0x30..=0x7E).contains(&b) {
                    self.esc = Esc::None;
                } else if !(0x20..=0x2F).contains(&b) {
                    self.esc = Esc::None;
                    self.ascii(b, at, out);
                }
            }
        }
    }

    /// One non-ASCII code point, `bytes` its UTF-8.
    fn char(&mut self, c: char, at: u64, bytes: &[u8], out: &mut Vec<u8>) {
        let u = c as u32;
        if self.esc != Esc::None {
            // Inside a string sequence everything up to its end goes; U+009C (ST) ends it.
            match self.esc {
                Esc::Str | Esc::StrEscape if u == 0x9C => self.esc = Esc::None,
                Esc::Str | Esc::StrEscape => {}
                _ => {
                    // Anything else cuts a CSI or an ESC short.
                    self.esc = Esc::None;
                    self.char(c, at, bytes, out);
                }
            }
            return;
        }
        // 8-bit forms of CSI, OSC, DCS, APC, PM, SOS start a sequence as ESC would.
        match u {
            0x9B => {
                self.note(Class::Escape, at);
                self.esc = Esc::Csi;
                return;
            }
            0x9D | 0x90 | 0x9F | 0x9E | 0x98 => {
                self.note(Class::Escape, at);
                self.esc = Esc::Str;
                return;
            }
            _ => {}
        }
        match classify(c) {
            Some(class) => {
                self.note(class, at);
                if class == Class::Tag
                    && (0xE0020..=0xE007E).contains(&u)
                    && self.report.hidden_text.len() < HIDDEN_MAX
                {
                    self.report.hidden_text.push((u - 0xE0000) as u8 as char);
                }
            }
            None => out.extend_from_slice(bytes),
        }
    }

    /// End of input: an incomplete UTF-8 sequence becomes U+FFFD; an unfinished escape
    /// sequence is dropped. Returns the report.
    pub fn finish(mut self, out: &mut Vec<u8>) -> Report {
        let before = out.len();
        if self.pending_len > 0 {
            let at = self.offset - self.pending_len as u64;
            self.esc = Esc::None;
            self.invalid(at, out);
            self.pending_len = 0;
        }
        self.report.bytes_out += (out.len() - before) as u64;
        self.report.found = Class::ALL
            .iter()
            .map(|c| (*c, self.found[c.index()]))
            .filter(|(_, f)| f.count > 0)
            .collect();
        self.report
    }
}

/// Length of the leading run of printable ASCII, tabs and newlines: eight bytes at a time
/// while none is below 0x20 or above 0x7E (a tab or newline ends the word-wise scan, and the
/// byte-wise one takes over), then byte by byte.
fn plain_prefix(s: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let plain = |b: u8| matches!(b, 0x20..=0x7E | b'\n' | b'\t' | b'\r');
    let mut i = 0;
    while i + 8 <= s.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&s[i..i + 8]);
        let w = u64::from_le_bytes(word);
        // Some byte below 0x20, or some byte at or above 0x7F (false alarms only cost speed).
        let below = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
        let above = (w.wrapping_add(ONES) | w) & HIGH;
        if below | above != 0 {
            // A tab or a newline keeps the run going; anything else ends it.
            if let Some(k) = word.iter().position(|&b| !plain(b)) {
                return i + k;
            }
        }
        i += 8;
    }
    while i < s.len() && plain(s[i]) {
        i += 1;
    }
    i
}

/// Sanitize a whole text at once.
pub fn sanitize(input: &[u8]) -> (String, Report) {
    let mut s = Sanitizer::new();
    let mut out = Vec::with_capacity(input.len());
    s.push(input, &mut out);
    let report = s.finish(&mut out);
    // Every byte written is either copied from a valid sequence or U+FFFD.
    let text = String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    (text, report)
}
