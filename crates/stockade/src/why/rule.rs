//! Which entry of the policy decided about a path, and where that entry came from.

use std::path::{Path, PathBuf};

use policy::origin::{Field, Origin, Origins, Setting};
use policy::{PathContext, PathPattern, Policy};

use super::Rule;

/// Names the origin of the policy's entries and settings (profile, preset, policy file and
/// line, flag).
pub struct RuleFinder<'a> {
    origins: &'a Origins<'a>,
    file: Option<&'a Path>,
}

impl<'a> RuleFinder<'a> {
    /// `origins` of the resolved policy; `file` the policy file's path (`--policy`).
    pub fn new(origins: &'a Origins<'a>, file: Option<&'a Path>) -> Self {
        RuleFinder { origins, file }
    }

    /// The rule that `entry` of `field` is, described by `text`.
    pub fn entry(&self, field: Field, entry: &str, text: String) -> Rule {
        let origin = self.origins.entry(field, entry);
        let layer = self
            .origins
            .entry_layer(field, entry)
            .map(|l| l.path.as_path());
        let (file, line) = self.file_and_line(origin, layer, self.origins.file_line(field, entry));
        Rule {
            text,
            entry: Some(entry.to_owned()),
            key: field.file_key(),
            origin: origin.to_string(),
            file,
            line,
        }
    }

    /// The rule that the setting `setting` (under `key`) is, described by `text`.
    pub fn setting(&self, setting: Setting, key: &'static str, text: String) -> Rule {
        let origin = self.origins.setting(setting);
        let layer = self
            .origins
            .setting_layer(setting)
            .map(|l| l.path.as_path());
        let (file, line) = self.file_and_line(origin, layer, None);
        Rule {
            text,
            entry: None,
            key: Some(key),
            origin: origin.to_string(),
            file,
            line,
        }
    }

    /// Where the entry came from: `origin`.
    pub fn origin(&self, field: Field, entry: &str) -> Origin {
        self.origins.entry(field, entry)
    }

    /// The file (`layer`: the one of several policy files that gave it, when known) and line.
    fn file_and_line(
        &self,
        origin: Origin,
        layer: Option<&Path>,
        line: Option<usize>,
    ) -> (Option<PathBuf>, Option<usize>) {
        match origin {
            Origin::PolicyFile => (layer.or(self.file).map(Path::to_path_buf), line),
            _ => (None, None),
        }
    }

    /// `` (FILE line N)`` for an entry of the policy file, or nothing.
    pub fn place(&self, rule: &Rule) -> String {
        match (&rule.file, rule.line) {
            (Some(f), Some(l)) => format!(" ({} line {l})", f.display()),
            (Some(f), None) => format!(" ({})", f.display()),
            _ => String::new(),
        }
    }
}

/// The first entry of `entries` (path patterns of the policy) that covers `path`: an exact
/// path it lies in (as written or with links resolved), or a glob matching it or one of its
/// ancestors.
pub fn entry_for<'e>(entries: &'e [String], ctx: &PathContext, path: &Path) -> Option<&'e str> {
    entries.iter().map(String::as_str).find(|entry| {
        let Ok(patterns) = policy::expand(entry, ctx) else {
            return false;
        };
        patterns.iter().any(|p| match p {
            PathPattern::Exact(e) => {
                policy::is_within(path, e)
                    || policy::canonicalize_existing(e).is_some_and(|c| policy::is_within(path, &c))
            }
            PathPattern::Glob(g) => path.ancestors().any(|a| g.is_match(a)),
        })
    })
}

/// The protected-path entry (`filesystem.deny_write`) that covers `path`, as a rule, with
/// what would allow changing it (`None`: nothing can, the change is for the host).
pub fn protected_rule(
    policy: &Policy,
    finder: &RuleFinder<'_>,
    ctx: &PathContext,
    path: &Path,
) -> Option<(Rule, Option<String>)> {
    let entry = entry_for(&policy.filesystem.deny_write, ctx, path)?;
    let origin = finder.origin(Field::DenyWrite, entry);
    let core = policy::CORE_PROTECTED.contains(&entry);
    let catalogue = policy::host_exec_entry(entry);
    let what = match (origin, core, catalogue) {
        (Origin::Profile, true, _) => {
            "git's hooks and config and stockade's own configuration are protected in every policy"
                .to_owned()
        }
        (Origin::Profile, _, Some(c)) => format!("catalogue: {}: {}", c.tool, c.why),
        _ => "a protected path".to_owned(),
    };
    let rule = finder.entry(
        Field::DenyWrite,
        entry,
        format!("`{entry}` in filesystem.deny_write ({what})"),
    );
    let place = finder.place(&rule);
    let allow = match origin {
        Origin::Profile if core => None,
        Origin::Profile if catalogue.is_some() => Some(format!(
            "`unprotect = [\"{entry}\"]` under [filesystem] in the policy file (`--policy FILE`)"
        )),
        Origin::Flag => Some(format!("drop `--protect {entry}`")),
        Origin::PolicyFile => Some(format!(
            "remove `{entry}` from deny_write in the policy file{place}"
        )),
        _ => None,
    };
    Some((rule, allow))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> PathContext {
        PathContext {
            home: "/h".into(),
            workspace: "/w".into(),
            writable_roots: vec!["/w".into()],
        }
    }

    #[test]
    fn exact_entries_cover_what_lies_in_them_and_globs_match_an_ancestor() {
        let entries = ["~/.ssh".to_owned(), ".env".to_owned(), ".vscode".to_owned()];
        let c = ctx();
        assert_eq!(
            entry_for(&entries, &c, Path::new("/h/.ssh/id_rsa")),
            Some("~/.ssh")
        );
        assert_eq!(entry_for(&entries, &c, Path::new("/h/.sshx")), None);
        assert_eq!(
            entry_for(&entries, &c, Path::new("/w/app/.env")),
            Some(".env")
        );
        assert_eq!(
            entry_for(&entries, &c, Path::new("/w/a/.vscode/tasks.json")),
            Some(".vscode")
        );
        assert_eq!(entry_for(&entries, &c, Path::new("/w/a/main.rs")), None);
    }

    #[test]
    fn protected_entries_say_what_allows_them_by_origin() {
        let flags = policy::Overrides {
            deny_write: vec!["secret-dir".into()],
            ..Default::default()
        };
        let policy = policy::resolve(None, &flags).unwrap();
        let origins = Origins::new(None, &flags);
        let finder = RuleFinder::new(&origins, None);
        let c = ctx();
        let (rule, allow) =
            protected_rule(&policy, &finder, &c, Path::new("/w/.vscode/x")).unwrap();
        assert_eq!(rule.origin, "profile");
        assert!(rule.text.contains("VS Code"), "{}", rule.text);
        assert_eq!(
            allow.as_deref(),
            Some("`unprotect = [\".vscode\"]` under [filesystem] in the policy file (`--policy FILE`)")
        );
        let (rule, allow) =
            protected_rule(&policy, &finder, &c, Path::new("/w/.git/hooks/pre-commit")).unwrap();
        assert_eq!(rule.entry.as_deref(), Some(".git/hooks"));
        assert_eq!(allow, None);
        let (rule, allow) =
            protected_rule(&policy, &finder, &c, Path::new("/w/secret-dir")).unwrap();
        assert_eq!(rule.origin, "flag");
        assert_eq!(allow.as_deref(), Some("drop `--protect secret-dir`"));
        assert!(protected_rule(&policy, &finder, &c, Path::new("/w/src/main.rs")).is_none());
    }
}
