//! README's layout section names every crate of the workspace, and nothing that is not one
//! (issue 16, item 9): a crate added, moved or removed without the README fails here.

use std::fs;
use std::path::Path;

#[test]
fn readme_layout_names_exactly_the_crates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let start = readme
        .find("## Layout")
        .expect("README has a Layout section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let mut named: Vec<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("crates/"))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    named.sort();
    let mut crates: Vec<String> = fs::read_dir(root.join("crates"))
        .expect("crates/")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    assert_eq!(
        named, crates,
        "README's layout section and crates/ differ: list each crate once, as `crates/NAME  what it is`"
    );
}
