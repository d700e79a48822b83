//! The registry is the one place codes are spelled (issue 16, item 3): README's table is
//! exactly [`Code::markdown_table`], and no crate's code writes a code as a string literal
//! (they name a [`Code`]). Test code may spell codes: it checks what stockade prints.

use std::fs;
use std::path::{Path, PathBuf};

use sandbox::{Code, Notice};

const BEGIN: &str =
    "<!-- codes: made from sandbox::Code (crates/sandbox/src/codes.rs); checked by crates/sandbox/tests/registry.rs -->\n";
const END: &str = "<!-- /codes -->";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn readme_table_is_the_registry() {
    let readme = fs::read_to_string(root().join("README.md")).expect("README.md");
    let start = readme.find(BEGIN).expect("README has the codes markers") + BEGIN.len();
    let end = start
        + readme[start..]
            .find(END)
            .expect("README closes the codes table");
    assert_eq!(
        &readme[start..end],
        Code::markdown_table(),
        "README's table of codes differs from sandbox::Code; replace it with Code::markdown_table()"
    );
}

#[test]
fn codes_are_distinct_and_parse_back() {
    for (i, a) in Code::ALL.iter().enumerate() {
        assert_eq!(Code::parse(a.as_str()), Some(*a));
        assert!(a.as_str().starts_with("E_"), "{a}");
        for b in &Code::ALL[i + 1..] {
            assert_ne!(a.as_str(), b.as_str());
        }
    }
}

/// Every code of the registry, printed as stockade prints a refusal, carries a `hint:` line
/// that names what would change the outcome (a flag, a policy line or a command, in
/// backquotes): a code added without one fails here (issue 18, item 10).
#[test]
fn every_code_renders_with_a_hint() {
    for c in Code::ALL {
        let text = Notice::new("error", *c, "what happened").to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.first().copied(),
            Some(format!("stockade: error[{c}]: what happened").as_str())
        );
        let hint = lines.get(1).and_then(|l| l.strip_prefix("  hint: "));
        assert!(
            hint.is_some_and(|h| h.trim().len() > 20 && h.contains('`')),
            "{c} prints no hint naming a flag, policy line or command:\n{text}"
        );
        // A notice's own hint replaces the code's; an empty one does not.
        let own = Notice::new("limit", *c, "m").with_hint(Some("use `--x`"));
        assert!(own.to_string().ends_with("\n  hint: use `--x`"), "{own}");
        let empty = Notice::new("limit", *c, "m").with_hint(Some(" "));
        assert_eq!(empty.hint(), c.hint());
    }
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A string literal that is a whole code: `"E_` then capitals and `_`, then `"`.
fn literal_codes(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("\"E_") {
        let after = &rest[i + 1..];
        let len = after
            .bytes()
            .take_while(|b| b.is_ascii_uppercase() || *b == b'_')
            .count();
        if len > 2 && after.as_bytes().get(len) == Some(&b'"') {
            found.push(after[..len].to_owned());
        }
        rest = &rest[i + 1..];
    }
    found
}

#[test]
fn no_crate_spells_a_code_outside_the_registry() {
    let crates = root().join("crates");
    let mut files = Vec::new();
    for e in fs::read_dir(&crates).expect("crates/").flatten() {
        let name = e.file_name();
        // The registry itself; the attack harness checks what stockade prints.
        if name == "sandbox" || name == "attacks" {
            continue;
        }
        rust_files(&e.path().join("src"), &mut files);
    }
    assert!(files.len() > 20, "found the sources: {}", files.len());
    let mut spelled = Vec::new();
    for f in files {
        // Unit tests (a `#[cfg(test)]` module closes each file here, or a `tests.rs` of its
        // own) and comments, doc examples included, may spell codes.
        if f.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = fs::read_to_string(&f).unwrap_or_default();
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for c in literal_codes(&code) {
            spelled.push(format!("{}: \"{c}\"", f.display()));
        }
    }
    assert!(
        spelled.is_empty(),
        "codes spelled outside sandbox::Code (use Code::X.as_str()):\n{}",
        spelled.join("\n")
    );
}

#[test]
fn the_literal_finder_finds_codes() {
    assert_eq!(
        literal_codes(r#"let a = "E_TIMEOUT"; let b = "E_"; let c = "\"code\":\"E_"; "E_X_Y""#),
        ["E_TIMEOUT", "E_X_Y"]
    );
}
