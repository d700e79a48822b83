//! The sanitizer: removes from text headed to a model (or a person's terminal) what neither
//! can see but both obey — invisible and direction-changing code points, Unicode Tag
//! characters, and terminal control sequences — over-stripping rather than under-stripping.
//!
//! Streaming: [`Sanitizer::push`] takes input in chunks of any size (a UTF-8 sequence or an
//! escape sequence may be split between chunks) and holds at most a few bytes between calls,
//! so memory stays constant on unbounded input. Invalid UTF-8 becomes U+FFFD, never a panic.
//!
//! Hand-written rather than a regex chain: UTF-8 validation (`simdutf8`), then one
//! scan that copies whole runs of what is kept. The scan tests 32 bytes at a time for
//! printable ASCII, and otherwise stops only at a byte that may start something to remove
//! (`STOP`: ASCII controls, and the few lead bytes of removed code points, and then only
//! with one of the few second bytes that can follow them), so most non-ASCII text is copied
//! without being decoded.

#![forbid(unsafe_code)]

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

/// Everything removed: sorted, disjoint, inclusive ranges of scalar values with their class.
/// [`classify`] searches it, and the scan tables ([`STOP`], [`REMOVED_SECOND`]) are derived
/// from it at compile time.
const REMOVED: [(u32, u32, Class); 28] = [
    (0x00, 0x08, Class::Control),
    (0x0B, 0x0C, Class::Control),
    (0x0E, 0x1F, Class::Control),
    // DEL and the C1 controls (which include the 8-bit escape introducers).
    (0x7F, 0x9F, Class::Control),
    (0x00AD, 0x00AD, Class::Invisible),
    (0x034F, 0x034F, Class::Invisible),
    (0x061C, 0x061C, Class::Bidi),
    (0x115F, 0x1160, Class::Invisible),
    (0x17B4, 0x17B5, Class::Invisible),
    (0x180B, 0x180F, Class::Invisible),
    (0x2000, 0x200A, Class::OddSpace),
    (0x200B, 0x200D, Class::Invisible),
    (0x200E, 0x200F, Class::Bidi),
    (0x202A, 0x202E, Class::Bidi),
    (0x2060, 0x2064, Class::Invisible),
    (0x2066, 0x2069, Class::Bidi),
    (0x206A, 0x206F, Class::Invisible),
    (0x3164, 0x3164, Class::Invisible),
    (0xFE00, 0xFE0F, Class::VariationSelector),
    (0xFEFF, 0xFEFF, Class::Invisible),
    (0xFFA0, 0xFFA0, Class::Invisible),
    (0xFFF9, 0xFFFB, Class::Annotation),
    (0x1BCA0, 0x1BCA3, Class::Invisible),
    (0x1D173, 0x1D17A, Class::Invisible),
    (0xE0000, 0xE007F, Class::Tag),
    (0xE0080, 0xE00FF, Class::Invisible),
    (0xE0100, 0xE01EF, Class::VariationSelector),
    (0xE01F0, 0xE0FFF, Class::Invisible),
];

/// The class of a code point to remove, if it is one.
pub fn classify(c: char) -> Option<Class> {
    class_of(c as u32)
}

/// [`classify`] on a scalar value: a binary search of [`REMOVED`].
const fn class_of(u: u32) -> Option<Class> {
    let (mut low, mut high) = (0, REMOVED.len());
    while low < high {
        let mid = (low + high) / 2;
        let (first, last, class) = REMOVED[mid];
        if u < first {
            high = mid;
        } else if u > last {
            low = mid + 1;
        } else {
            return Some(class);
        }
    }
    None
}

/// Per byte value: whether the scan of plain text (valid UTF-8) must stop there and look
/// closer: the ASCII bytes that are removed (ESC among them), and the lead bytes of the
/// UTF-8 encodings of the non-ASCII code points that are. Never a continuation byte. Every
/// other lead byte starts a code point that is kept, so the scan goes past it undecoded.
pub(crate) static STOP: [bool; 256] = scan_tables().0;

/// Per lead byte: which second bytes (by their low six bits) can continue it into a code
/// point that is removed; after any other, the code point is kept without decoding it.
pub(crate) static REMOVED_SECOND: [u64; 256] = scan_tables().1;

/// One bit per code point of the Basic Multilingual Plane: whether it is removed. The scan
/// looks up three-byte sequences here instead of decoding and classifying them (common
/// punctuation such as U+2014 and U+201C shares its first two bytes with removed ones).
pub(crate) static REMOVED_BMP: [u64; 1024] = removed_bmp();

const fn removed_bmp() -> [u64; 1024] {
    let mut bits = [0u64; 1024];
    let mut k = 0;
    while k < REMOVED.len() {
        let (mut u, last, _) = REMOVED[k];
        while u <= last && u <= 0xFFFF {
            bits[(u >> 6) as usize] |= 1 << (u & 0x3F);
            u += 1;
        }
        k += 1;
    }
    bits
}

/// [`STOP`] and [`REMOVED_SECOND`], from every code point of [`REMOVED`] (a few thousand).
const fn scan_tables() -> ([bool; 256], [u64; 256]) {
    let mut stop = [false; 256];
    let mut second = [0u64; 256];
    let mut k = 0;
    while k < REMOVED.len() {
        let (mut u, last, _) = REMOVED[k];
        while u <= last {
            let (lead, next) = match u {
                0..=0x7F => (u, 0),
                0x80..=0x7FF => (0xC0 | u >> 6, 0x80 | (u & 0x3F)),
                0x800..=0xFFFF => (0xE0 | u >> 12, 0x80 | (u >> 6 & 0x3F)),
                _ => (0xF0 | u >> 18, 0x80 | (u >> 12 & 0x3F)),
            };
            stop[lead as usize] = true;
            if u >= 0x80 {
                second[lead as usize] |= 1 << (next & 0x3F);
            }
            u += 1;
        }
        k += 1;
    }
    (stop, second)
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

/// A CSI held by a line-editing sanitizer until its final byte says whether it is kept.
#[derive(Debug, Clone, Copy)]
struct HeldCsi {
    /// Where its ESC was.
    at: u64,
    params: [u8; CSI_PARAMS_MAX],
    len: usize,
}

/// The parameter bytes a kept CSI may have at most (`ESC [ 1 2 3 4 ; 5 6 7 D` is plenty for
/// line editing).
const CSI_PARAMS_MAX: usize = 8;

/// The final bytes of the CSIs a line-editing sanitizer keeps, each acting on the cursor's
/// line only: insert (`@`) and delete (`P`) characters, cursor forward (`C`), back (`D`) and to
/// a column (`G`), erase in the line (`K`) and characters (`X`). Nothing that moves to another
/// line, redraws the screen, sets colours (concealed or same-colour text), modes, titles or
/// the clipboard, or asks the terminal to answer.
const LINE_EDITING_FINALS: &[u8] = b"@CDGKPX";

/// A streaming sanitizer. Feed it with [`Sanitizer::push`], end with [`Sanitizer::finish`].
#[derive(Debug, Clone)]
pub struct Sanitizer {
    /// An incomplete UTF-8 sequence carried to the next chunk.
    pending: [u8; 4],
    pending_len: usize,
    esc: Esc,
    /// Keep backspace, BEL and the line-editing CSIs ([`Sanitizer::line_editing`]).
    line_editing: bool,
    /// In line-editing mode, the CSI being read.
    held: Option<HeldCsi>,
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
            line_editing: false,
            held: None,
            offset: 0,
            found: [Found::default(); 9],
            report: Report::default(),
        }
    }

    /// A sanitizer for what a terminal of the run's own shows a person: as [`Sanitizer::new`],
    /// but backspace, BEL and the CSIs that edit the cursor's line ([`LINE_EDITING_FINALS`],
    /// numeric parameters only) are kept, so that a shell's line editing (backspace, a
    /// history recall, a completion) shows as typed. Like `\r`, which every mode keeps, they
    /// can only change what the current line shows; full-screen programs do not draw.
    pub fn line_editing() -> Sanitizer {
        Sanitizer {
            line_editing: true,
            ..Sanitizer::new()
        }
    }

    /// An escape sequence starts at `at`: counted at once, or in line-editing mode when it
    /// turns out not to be a kept CSI.
    fn escape_starts(&mut self, at: u64) {
        if self.line_editing {
            self.held = Some(HeldCsi {
                at,
                params: [0; CSI_PARAMS_MAX],
                len: 0,
            });
        } else {
            self.note(Class::Escape, at);
        }
    }

    /// The held sequence (if any) is removed after all: count it.
    fn drop_held(&mut self) {
        if let Some(held) = self.held.take() {
            self.note(Class::Escape, held.at);
        }
    }

    /// The final byte `b` of a CSI: in line-editing mode a held CSI that qualifies is written
    /// out whole; any other is counted as removed.
    fn csi_ends(&mut self, b: u8, out: &mut Vec<u8>) {
        match self.held.take() {
            Some(held) if LINE_EDITING_FINALS.contains(&b) => {
                out.extend_from_slice(b"\x1b[");
                out.extend_from_slice(&held.params[..held.len]);
                out.push(b);
            }
            Some(held) => self.note(Class::Escape, held.at),
            None => {}
        }
    }

    /// A parameter byte of a held CSI: kept while it is a digit or `;` and there is room,
    /// otherwise the sequence will be removed.
    fn csi_param(&mut self, b: u8) {
        let Some(held) = self.held.as_mut() else {
            return;
        };
        if (b.is_ascii_digit() || b == b';') && held.len < CSI_PARAMS_MAX {
            held.params[held.len] = b;
            held.len += 1;
        } else {
            self.drop_held();
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
        let rest = if self.pending_len > 0 {
            self.complete_pending(input, out)
        } else {
            input
        };
        if self.pending_len == 0 {
            let at = self.offset + (input.len() - rest.len()) as u64;
            self.step(rest, at, out);
        }
        self.offset += input.len() as u64;
        self.report.bytes_out += (out.len() - before) as u64;
    }

    /// The UTF-8 sequence cut by the end of the previous chunk, completed with (or found
    /// invalid by) the first bytes of `input`; returns the rest of `input`. Only the few bytes
    /// the sequence needs are copied, not the chunk.
    fn complete_pending<'a>(&mut self, input: &'a [u8], out: &mut Vec<u8>) -> &'a [u8] {
        let have = self.pending_len;
        let take = input.len().min(4 - have);
        let mut joined = [0u8; 4];
        joined[..have].copy_from_slice(&self.pending[..have]);
        joined[have..have + take].copy_from_slice(&input[..take]);
        let joined = &joined[..have + take];
        let at = self.offset - have as u64;
        self.pending_len = 0;
        let parsed = simdutf8::compat::from_utf8(joined);
        let valid = match parsed {
            Ok(s) => s,
            Err(e) => simdutf8::basic::from_utf8(&joined[..e.valid_up_to()]).unwrap_or_default(),
        };
        if let Some(c) = valid.chars().next() {
            // The sequence is complete (`have` < its length, since it was incomplete).
            let len = c.len_utf8();
            self.valid(&valid[..len], at, out);
            return input.get(len - have..).unwrap_or_default();
        }
        match parsed.map_err(|e| e.error_len()) {
            // Invalid: one replacement for the maximal invalid subpart, which holds all of
            // the carried bytes (they were a valid prefix).
            Err(Some(n)) => {
                self.invalid(at, out);
                input.get(n.saturating_sub(have)..).unwrap_or_default()
            }
            // Still incomplete: `input` was too short to finish it, and all of it is carried.
            _ => {
                self.pending[..joined.len()].copy_from_slice(joined);
                self.pending_len = joined.len();
                input.get(take..).unwrap_or_default()
            }
        }
    }

    /// Process `input`, whose first byte is at input offset `start`: its valid UTF-8 runs
    /// through [`Sanitizer::valid`], each maximal invalid subpart becomes U+FFFD (as
    /// `String::from_utf8_lossy` does), and an incomplete sequence at its end is kept in
    /// `pending`.
    fn step(&mut self, input: &[u8], start: u64, out: &mut Vec<u8>) {
        let mut rest = input;
        let mut at = start;
        while !rest.is_empty() {
            let error = match simdutf8::compat::from_utf8(rest) {
                Ok(s) => return self.valid(s, at, out),
                Err(e) => e,
            };
            let (good, bad) = rest.split_at(error.valid_up_to());
            // Valid, so this second look cannot fail (it costs a pass over `good`, paid only
            // when invalid bytes follow it).
            self.valid(
                simdutf8::basic::from_utf8(good).unwrap_or_default(),
                at,
                out,
            );
            at += good.len() as u64;
            match error.error_len() {
                Some(n) => {
                    self.invalid(at, out);
                    at += n as u64;
                    rest = bad.get(n..).unwrap_or_default();
                }
                // A valid prefix cut by the end of the chunk (at most 3 bytes): the rest of
                // the sequence may come next.
                None => {
                    let kept = bad.len().min(self.pending.len());
                    self.pending[..kept].copy_from_slice(&bad[..kept]);
                    self.pending_len = kept;
                    return;
                }
            }
        }
    }

    /// Process `text`, whose first byte is at input offset `start`. In plain text, the runs
    /// kept as they are (everything up to a [`STOP`] byte that starts something to remove)
    /// are copied whole; what is removed, and escape sequences, go code point by code point.
    fn valid(&mut self, text: &str, start: u64, out: &mut Vec<u8>) {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if self.esc == Esc::None {
                let run = i;
                i = next_removed(text, i);
                copy_run(&bytes[run..i], out);
            } else if self.esc == Esc::Str {
                // Everything in a string sequence is dropped up to BEL, ESC or U+009C (whose
                // lead byte is 0xC2): skip to the next of those.
                i += bytes[i..]
                    .iter()
                    .position(|&b| matches!(b, 0x07 | 0x1B | 0xC2))
                    .unwrap_or(bytes.len() - i);
            }
            let Some(c) = text.get(i..).and_then(|t| t.chars().next()) else {
                break;
            };
            let at = start + i as u64;
            if c.is_ascii() {
                self.ascii(c as u8, at, out);
            } else {
                self.char(c, at, &bytes[i..i + c.len_utf8()], out);
            }
            i += c.len_utf8();
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
                    self.escape_starts(at);
                    self.esc = Esc::Start;
                }
                b'\n' | b'\r' | b'\t' | 0x20..=0x7E => out.push(b),
                0x07 | 0x08 if self.line_editing => out.push(b),
                _ => self.note(Class::Control, at),
            },
            Esc::Start => {
                // Only a CSI may be kept.
                if b != b'[' {
                    self.drop_held();
                }
                self.esc = match b {
                    b'[' => Esc::Csi,
                    b']' | b'P' | b'_' | b'^' | b'X' => Esc::Str,
                    0x20..=0x2F => Esc::Intermediate,
                    // A second ESC starts a new sequence (and is counted as one).
                    0x1B => {
                        self.escape_starts(at);
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
                    self.csi_ends(b, out);
                } else if b == 0x1B {
                    self.drop_held();
                    self.escape_starts(at);
                    self.esc = Esc::Start;
                } else if (0x20..=0x3F).contains(&b) {
                    self.csi_param(b);
                } else {
                    // Not part of a CSI: the sequence is cut short; the byte is a control.
                    self.drop_held();
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
                    self.drop_held();
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
        self.drop_held();
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

/// Append a run of kept text to `out`, in pieces of at most [`COPY_PIECE`] bytes: glibc's
/// `memcpy` moves larger ones with `rep movsb`, which on some CPUs (this AMD EPYC) runs at a
/// few GB/s instead of tens for some alignments of source against destination (measured:
/// 2.8 against 45 GB/s; a third of `stockade sanitize`'s time on ASCII text).
fn copy_run(run: &[u8], out: &mut Vec<u8>) {
    out.reserve(run.len());
    for piece in run.chunks(COPY_PIECE) {
        out.extend_from_slice(piece);
    }
}

/// Well below glibc's threshold for `rep movsb` (2 KiB times the vector width over 16 bytes).
const COPY_PIECE: usize = 1024;

/// Bytes the plain-text scan looks at in one step.
const BLOCK: usize = 32;

/// Where the next code point that is removed starts in `text` (plain text), at or after
/// `from` (a character boundary); `text.len()` if none does. Every [`STOP`] byte in a block is
/// looked at in turn (the bits of a mask, no branch per byte): an ASCII one is removed; a
/// lead byte is passed when its second byte cannot make it something removed, and otherwise
/// decided by the second byte (two-byte sequences), [`REMOVED_BMP`] (three) or [`classify`].
fn next_removed(text: &str, from: usize) -> usize {
    let bytes = text.as_bytes();
    let removed = |k: usize| {
        let lead = bytes[k];
        if lead.is_ascii() {
            return true;
        }
        let low6 = |at: usize| usize::from(bytes.get(at).map_or(0, |b| b & 0x3F));
        let second = low6(k + 1);
        if REMOVED_SECOND[usize::from(lead)] >> second & 1 == 0 {
            return false;
        }
        match lead {
            // Two bytes: the lead and the second byte are the whole code point.
            0x80..=0xDF => true,
            // Three: its bit in the BMP table.
            0xE0..=0xEF => {
                let block = usize::from(lead & 0x0F) << 6 | second;
                REMOVED_BMP[block] >> low6(k + 2) & 1 != 0
            }
            _ => text
                .get(k..)
                .and_then(|t| t.chars().next())
                .is_some_and(|c| classify(c).is_some()),
        }
    };
    let mut i = from;
    while let Some(block) = bytes.get(i..i + BLOCK) {
        let mut stops = stop_mask(block);
        while stops != 0 {
            let k = i + stops.trailing_zeros() as usize;
            if removed(k) {
                return k;
            }
            stops &= stops - 1;
        }
        i += BLOCK;
    }
    while i < bytes.len() {
        if STOP[usize::from(bytes[i])] && removed(i) {
            return i;
        }
        i += 1;
    }
    bytes.len()
}

/// Bit k set when `block[k]` is a [`STOP`] byte. Plain ASCII (tested branch-free over the
/// block, which the compiler vectorizes) has none; otherwise a table lookup per byte, still
/// without a branch. (Hand-written: `guard` has no `unsafe` for SIMD intrinsics, and the
/// portable SIMD of the `wide` crate, tried here, was only 4% faster on mixed text.)
fn stop_mask(block: &[u8]) -> u32 {
    if plain_ascii(block) {
        return 0;
    }
    block.iter().enumerate().fold(0, |mask, (k, &b)| {
        mask | u32::from(STOP[usize::from(b)]) << k
    })
}

/// Whether every byte of `block` is printable ASCII, a tab or a newline.
fn plain_ascii(block: &[u8]) -> bool {
    block.iter().fold(true, |all, &b| {
        all & ((b.wrapping_sub(0x20) < 0x5F) | (b == b'\n') | (b == b'\t') | (b == b'\r'))
    })
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

#[cfg(test)]
mod tests;
