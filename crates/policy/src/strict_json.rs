//! Strict JSON: a document is refused when an object repeats a key, and (through
//! `#[serde(deny_unknown_fields)]` on the target type) when it holds a key the type does not
//! know. Errors name the key path (`network.allowedDomains`, `filesystem.denyRead[2]`) and
//! the line and column.
//!
//! `serde_json` keeps the last of two equal keys without a word when it fills a map or a
//! [`serde_json::Value`] (derived structs refuse a repeated field, but flattened, map-typed
//! and `Value` fields do not): `{"allowedDomains": [], "allowedDomains": ["x.com"]}` would
//! quietly mean the second list, a false success. So every document is first walked by a
//! small visitor over `serde_json`'s own parser that records where each key path starts and
//! fails on a repeat; then it is deserialized into the target type through
//! `serde_path_to_error`, which names the path of a type error or unknown key. Neither
//! `serde_json` nor a maintained companion crate offers the duplicate check, hence the small
//! walker here.
//!
//! ```
//! #[derive(Debug, serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct Doc {
//!     #[allow(dead_code)]
//!     tags: std::collections::BTreeMap<String, u32>,
//! }
//!
//! let err = policy::strict_json::from_str::<Doc>("{\"tags\": {\"a\": 1,\n \"a\": 2}}").unwrap_err();
//! assert_eq!(err.to_string(), "line 2, column 2: duplicate key `tags.a`");
//! let err = policy::strict_json::from_str::<Doc>("{\"tags\": {}, \"tag\": 1}").unwrap_err();
//! assert_eq!(err.path.as_deref(), Some("tag"));
//! assert!(err.to_string().starts_with("line 1, column 14: unknown key `tag`"));
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess};

use crate::error::Location;

/// Why a JSON document was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrictJsonError {
    /// The key path the problem is about (`network.allowedDomains[1]`), when there is one.
    pub path: Option<String>,
    /// Where the problem is (1-based line, column in characters), when known.
    pub location: Option<Location>,
    /// What is wrong, naming the key.
    pub message: String,
    /// How to fix it, when there is something to say.
    pub hint: Option<String>,
}

impl fmt::Display for StrictJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(loc) => write!(f, "{loc}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for StrictJsonError {}

/// Where each key path of a document starts: the opening quote of an object key, or the
/// first character of an array element that is a plain string. Paths are written as
/// `serde_path_to_error` writes them: keys joined by `.`, array indices as `[N]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyIndex {
    offsets: BTreeMap<String, usize>,
    top_level: Vec<String>,
}

impl KeyIndex {
    /// Walks `text`, refusing invalid JSON and repeated keys.
    ///
    /// # Errors
    ///
    /// [`StrictJsonError`] for a syntax error (with serde_json's message and position), or a
    /// key that appears twice in one object (naming its path, located at the second one).
    pub fn new(text: &str) -> Result<KeyIndex, StrictJsonError> {
        let mut walk = Walk {
            text_start: text.as_ptr() as usize,
            text_len: text.len(),
            index: KeyIndex::default(),
            duplicate: None,
        };
        let mut de = serde_json::Deserializer::from_str(text);
        let walked = Node {
            walk: &mut walk,
            path: String::new(),
            depth: 0,
        }
        .deserialize(&mut de)
        .and_then(|()| de.end());
        if let Some((path, offset)) = walk.duplicate {
            return Err(StrictJsonError {
                message: format!("duplicate key `{path}`"),
                location: offset.map(|o| location(text, o)),
                path: Some(path),
                hint: Some("each key may appear only once in an object; remove one of them".into()),
            });
        }
        walked.map_err(|err| syntax_error(text, &err))?;
        Ok(walk.index)
    }

    /// Where the key (or string element) at `path` starts, as a byte offset into the text.
    pub fn offset(&self, path: &str) -> Option<usize> {
        self.offsets.get(path).copied()
    }

    /// The keys of the top-level object, in document order (empty if it is not an object).
    pub fn top_level_keys(&self) -> &[String] {
        &self.top_level
    }
}

/// Parses `text` as a `T`, strictly: repeated keys anywhere are refused, and so is whatever
/// `T`'s `Deserialize` refuses (use `#[serde(deny_unknown_fields)]`), naming the key path.
///
/// # Errors
///
/// [`StrictJsonError`] naming the path, line and column of the first problem.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, StrictJsonError> {
    let index = KeyIndex::new(text)?;
    from_str_indexed(text, &index)
}

/// [`from_str`] for a text whose [`KeyIndex`] was already built (which checked it for repeated
/// keys); locates errors through the index.
///
/// # Errors
///
/// As [`from_str`], except that repeated keys are not looked for again.
pub fn from_str_indexed<T: DeserializeOwned>(
    text: &str,
    index: &KeyIndex,
) -> Result<T, StrictJsonError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        typed_error(text, index, path, err.inner())
    })?;
    de.end().map_err(|err| syntax_error(text, &err))?;
    Ok(value)
}

/// Turns a typed-deserialization error into one naming the key path, located at the key when
/// the index knows it.
fn typed_error(
    text: &str,
    index: &KeyIndex,
    path: String,
    err: &serde_json::Error,
) -> StrictJsonError {
    let message = bare_message(err);
    let fallback = serde_location(text, err);
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (key, expected) = rest.split_once('`').unwrap_or((rest, ""));
        // The path already ends with the unknown key (serde_path_to_error records it before
        // the key is refused).
        let full = if path == "." {
            key.to_owned()
        } else {
            path.clone()
        };
        let hint = match expected.find("expected ") {
            Some(at) => {
                let known = &expected[at + "expected ".len()..];
                let known = known.strip_prefix("one of ").unwrap_or(known);
                format!("known keys here: {known}")
            }
            None => "this object accepts no keys; remove it".to_owned(),
        };
        return StrictJsonError {
            message: format!("unknown key `{full}`"),
            location: index.offset(&full).map(|o| location(text, o)).or(fallback),
            path: Some(full),
            hint: Some(hint),
        };
    }
    if message.starts_with("missing field `") {
        let shown = if path == "." { "the top level" } else { &path };
        return StrictJsonError {
            message: format!("{message}, in `{shown}`"),
            location: index.offset(&path).map(|o| location(text, o)).or(fallback),
            path: (path != ".").then_some(path),
            hint: None,
        };
    }
    if path == "." {
        return StrictJsonError {
            message,
            location: fallback,
            path: None,
            hint: None,
        };
    }
    StrictJsonError {
        message: format!("{message}, in `{path}`"),
        location: index.offset(&path).map(|o| location(text, o)).or(fallback),
        path: Some(path),
        hint: None,
    }
}

fn syntax_error(text: &str, err: &serde_json::Error) -> StrictJsonError {
    StrictJsonError {
        path: None,
        location: serde_location(text, err),
        message: bare_message(err),
        hint: Some("the file must hold one JSON object".to_owned()),
    }
}

/// serde_json's message without its " at line L column C" suffix.
fn bare_message(err: &serde_json::Error) -> String {
    let shown = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    shown.strip_suffix(&suffix).unwrap_or(&shown).to_owned()
}

/// serde_json's position (its column counts bytes) as a [`Location`] in characters.
fn serde_location(text: &str, err: &serde_json::Error) -> Option<Location> {
    if err.line() == 0 {
        return None;
    }
    let line_start = if err.line() == 1 {
        0
    } else {
        text.match_indices('\n')
            .nth(err.line() - 2)
            .map_or(text.len(), |(i, _)| i + 1)
    };
    // serde_json reports the column of the last byte it read; point at that byte.
    Some(location(text, line_start + err.column().saturating_sub(1)))
}

/// Converts a byte offset into a 1-based line and column (columns count characters).
pub(crate) fn location(text: &str, offset: usize) -> Location {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Location {
        line: before.matches('\n').count() + 1,
        column: before[line_start..].chars().count() + 1,
    }
}

/// Walk state shared by every node.
struct Walk {
    /// Address of the text, to turn borrowed slices into offsets.
    text_start: usize,
    text_len: usize,
    index: KeyIndex,
    /// The first repeated key: its path and (when it was written without escapes) offset.
    duplicate: Option<(String, Option<usize>)>,
}

impl Walk {
    /// The byte offset of `slice` in the text, when it is a slice of the text.
    fn offset_of(&self, slice: &str) -> Option<usize> {
        let at = (slice.as_ptr() as usize).checked_sub(self.text_start)?;
        (at <= self.text_len).then_some(at)
    }

    fn record(&mut self, path: &str, offset: Option<usize>) {
        if let Some(offset) = offset {
            self.index.offsets.entry(path.to_owned()).or_insert(offset);
        }
    }
}

/// One JSON value at `path`.
struct Node<'w> {
    walk: &'w mut Walk,
    path: String,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> de::Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<(), E> {
        // The opening quote sits just before the borrowed contents.
        let offset = self.walk.offset_of(value).map(|o| o.saturating_sub(1));
        self.walk.record(&self.path, offset);
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let node = Node {
                path: format!("{}[{i}]", self.path),
                walk: &mut *self.walk,
                depth: self.depth + 1,
            };
            if seq.next_element_seed(node)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let (name, borrowed) = match key {
                Key::Borrowed(k) => (k.to_owned(), Some(k)),
                Key::Owned(k) => (k, None),
            };
            let offset = borrowed
                .and_then(|k| self.walk.offset_of(k))
                .map(|o| o.saturating_sub(1));
            let path = if self.path.is_empty() {
                name.clone()
            } else {
                format!("{}.{name}", self.path)
            };
            if !seen.insert(name.clone()) {
                self.walk.duplicate = Some((path, offset));
                return Err(de::Error::custom("duplicate key"));
            }
            if self.depth == 0 {
                self.walk.index.top_level.push(name);
            }
            self.walk.record(&path, offset);
            map.next_value_seed(Node {
                walk: &mut *self.walk,
                path,
                depth: self.depth + 1,
            })?;
        }
        Ok(())
    }
}

/// An object key: borrowed from the text when written without escapes (so its position is
/// known), owned otherwise.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Key<'de>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> de::Visitor<'de> for KeySeed {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Key<'de>, E> {
        Ok(Key::Borrowed(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Key<'de>, E> {
        Ok(Key::Owned(value.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[allow(dead_code, reason = "only deserialized")]
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Net {
        #[serde(default)]
        allowed_domains: Vec<String>,
        #[serde(default)]
        reasons: BTreeMap<String, String>,
        #[serde(default)]
        port: Option<u16>,
    }

    #[allow(dead_code, reason = "only deserialized")]
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        #[serde(default)]
        network: Option<Net>,
        #[serde(default)]
        anything: Option<serde_json::Value>,
    }

    fn err(text: &str) -> StrictJsonError {
        from_str::<Doc>(text).unwrap_err()
    }

    fn at(e: &StrictJsonError) -> (usize, usize) {
        let loc = e.location.expect("located");
        (loc.line, loc.column)
    }

    #[test]
    fn accepts_a_clean_document() {
        let doc: Doc = from_str(
            r#"{"network": {"allowedDomains": ["a.test"], "reasons": {"a": "b"}}, "anything": {"x": [1, {"y": null}]}}"#,
        )
        .unwrap();
        assert_eq!(doc.network.unwrap().allowed_domains, ["a.test"]);
    }

    #[test]
    fn duplicate_top_level_key() {
        let e = err("{\"network\": {},\n  \"network\": {}}");
        assert_eq!(e.message, "duplicate key `network`");
        assert_eq!(e.path.as_deref(), Some("network"));
        assert_eq!(at(&e), (2, 3));
        assert!(e.hint.is_some());
    }

    #[test]
    fn duplicate_nested_key_in_a_struct_field() {
        let e = err(r#"{"network":{"allowedDomains":[],"allowedDomains":["x.com"]}}"#);
        assert_eq!(e.message, "duplicate key `network.allowedDomains`");
        assert_eq!(at(&e), (1, 33));
    }

    #[test]
    fn duplicate_key_in_a_map_field_which_serde_json_alone_would_keep() {
        // Without the walk, serde_json keeps the last value of a map key silently.
        let text = r#"{"network": {"reasons": {"a": "1", "a": "2"}}}"#;
        let plain: Doc = serde_json::from_str(text).unwrap();
        assert_eq!(plain.network.unwrap().reasons["a"], "2");
        let e = err(text);
        assert_eq!(e.message, "duplicate key `network.reasons.a`");
    }

    #[test]
    fn duplicate_key_inside_a_value_field_and_an_array() {
        let e = err(r#"{"anything": [{"k": 1}, {"k": 1, "k": 2}]}"#);
        assert_eq!(e.message, "duplicate key `anything[1].k`");
        assert_eq!(at(&e), (1, 34));
    }

    #[test]
    fn duplicate_escaped_key_is_found_without_a_position() {
        // `\u0061` is `a`: the same key spelled two ways.
        let e = err(r#"{"anything": {"a": 1, "\u0061": 2}}"#);
        assert_eq!(e.message, "duplicate key `anything.a`");
    }

    #[test]
    fn unknown_key_names_its_path_and_position() {
        let e = err("{\"network\": {\n  \"allowedDomain\": []}}");
        assert_eq!(e.message, "unknown key `network.allowedDomain`");
        assert_eq!(e.path.as_deref(), Some("network.allowedDomain"));
        assert_eq!(at(&e), (2, 3));
        assert_eq!(
            e.hint.as_deref(),
            Some("known keys here: `allowedDomains`, `reasons`, `port`")
        );
        let e = err("{\"netwrk\": 1}");
        assert_eq!(e.message, "unknown key `netwrk`");
        assert_eq!(at(&e), (1, 2));
    }

    #[test]
    fn wrong_type_names_the_path() {
        let e = err("{\"network\": {\"allowedDomains\": [\"a\", 7]}}");
        assert_eq!(
            e.message,
            "invalid type: integer `7`, expected a string, in `network.allowedDomains[1]`"
        );
        assert_eq!(at(&e).0, 1);
        let e = err("{\"network\": {\"port\": 70000}}");
        assert!(e.message.ends_with("in `network.port`"), "{}", e.message);
        assert_eq!(at(&e), (1, 14));
    }

    #[test]
    fn syntax_errors_and_trailing_text() {
        let e = err("{\"network\": {,}}");
        assert_eq!(at(&e), (1, 14));
        assert!(e.path.is_none());
        let e = err("{} {}");
        assert!(e.message.contains("trailing characters"), "{}", e.message);
        assert!(KeyIndex::new("[1, 2").is_err());
    }

    #[test]
    fn index_records_keys_and_string_elements() {
        let text = "{\"a\": {\"b\": [\"x\", 1, \"y\"]}, \"c\": 2}";
        let index = KeyIndex::new(text).unwrap();
        assert_eq!(index.offset("a"), Some(1));
        assert_eq!(index.offset("a.b"), Some(7));
        assert_eq!(index.offset("a.b[0]"), Some(13));
        assert_eq!(index.offset("a.b[1]"), None);
        assert_eq!(index.offset("a.b[2]"), Some(21));
        assert_eq!(index.top_level_keys(), ["a", "c"]);
    }

    #[test]
    fn columns_count_characters() {
        let e = err("{\"anything\": {\"é\": 1, \"é\": 2}}");
        assert_eq!(at(&e), (1, 23));
    }
}
