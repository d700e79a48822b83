//! Where each list entry of a TOML policy file was written: its line, by key path and entry
//! (`filesystem.deny_read`, `~/notes.txt` → 3). `stockade why` names the line of the rule that
//! decided; JSON settings files (srt, Claude Code) carry no lines.
//!
//! ```
//! let file = policy::parse_policy_file("[filesystem]\n\ndeny_read = [\"~/a\"]\n", "x.toml")?;
//! assert_eq!(file.lines.line("filesystem.deny_read", "~/a"), Some(3));
//! assert_eq!(file.lines.line("filesystem.deny_read", "~/b"), None);
//! # Ok::<(), policy::PolicyError>(())
//! ```

use std::collections::BTreeMap;

/// The 1-based line of each list entry of a policy file, by `(key path, entry as written)`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EntryLines(BTreeMap<(String, String), usize>);

impl EntryLines {
    /// Records that `entry` of the list `key` (a dotted key path) starts at byte `offset` of
    /// `text`. The first place an entry is written is kept.
    pub(crate) fn record(&mut self, text: &str, key: &str, entry: &str, offset: usize) {
        let line = crate::strict_json::location(text, offset).line;
        self.0
            .entry((key.to_owned(), entry.to_owned()))
            .or_insert(line);
    }

    /// Records every entry of a spanned list and returns the entries.
    pub(crate) fn take(
        &mut self,
        text: &str,
        key: &str,
        entries: Vec<toml::Spanned<String>>,
    ) -> Vec<String> {
        entries
            .into_iter()
            .map(|spanned| {
                self.record(text, key, spanned.get_ref(), spanned.span().start);
                spanned.into_inner()
            })
            .collect()
    }

    /// Takes the lines of a file layered on top of this one: its entries' lines win.
    pub(crate) fn layer(&mut self, over: EntryLines) {
        self.0.extend(over.0);
    }

    /// The line `entry` (as written) of the list `key` is on, if the file wrote it.
    pub fn line(&self, key: &str, entry: &str) -> Option<usize> {
        self.0.get(&(key.to_owned(), entry.to_owned())).copied()
    }

    /// The first entry of the list `key` for which `same` holds, with its line.
    pub fn find(&self, key: &str, same: impl Fn(&str) -> bool) -> Option<(&str, usize)> {
        self.0
            .iter()
            .filter(|((k, _), _)| k == key)
            .find(|((_, e), _)| same(e))
            .map(|((_, e), line)| (e.as_str(), *line))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn filesystem_and_network_entries_keep_their_lines_and_hints_is_a_key() {
        let text = "hints = true\n[filesystem]\nallow_write = [\"/a\",\n  \"/b\"]\nunprotect = [\".vscode\"]\n[network]\ndeny_domains = [\"x.example\"]\n";
        let file = crate::parse_policy_file(text, "t.toml").unwrap();
        assert_eq!(file.hints, Some(true));
        let l = &file.lines;
        assert_eq!(l.line("filesystem.allow_write", "/a"), Some(3));
        assert_eq!(l.line("filesystem.allow_write", "/b"), Some(4));
        assert_eq!(l.line("filesystem.unprotect", ".vscode"), Some(5));
        assert_eq!(l.line("network.deny_domains", "x.example"), Some(7));
        assert_eq!(crate::parse_policy_file("", "t.toml").unwrap().hints, None);
        assert!(crate::parse_policy_file("hints = 1\n", "t.toml").is_err());
    }
}
