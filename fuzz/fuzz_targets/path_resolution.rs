//! Path pattern expansion (`policy::expand`), lexical normalization and the glob matchers of
//! `policy::paths`, on arbitrary patterns and paths (nothing here touches the filesystem).
//!
//! Input: lines `path PATH` (a path to match); every other line is a pattern.
//!
//! Invariants: nothing panics; normalization is idempotent and a normalized path is within
//! itself; an expanded exact path is absolute and normal, a glob's base is absolute, normal
//! and a prefix of everything the glob matches; the bulk matcher (`GlobList`, which matches
//! common shapes without a regex) gives exactly the globs that match one by one.
#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use policy::{GlobList, PathContext, PathPattern};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let ctx = PathContext {
        home: PathBuf::from("/home/u"),
        workspace: PathBuf::from("/ws"),
        writable_roots: vec![PathBuf::from("/ws"), PathBuf::from("/tmp/cache dir")],
    };
    let mut globs = Vec::new();
    let mut paths = Vec::new();
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("path ") {
            paths.push(path);
            continue;
        }
        let Ok(expanded) = policy::expand(line, &ctx) else {
            continue;
        };
        for pattern in expanded {
            match pattern {
                PathPattern::Exact(p) => {
                    assert!(p.is_absolute(), "{line:?} -> {p:?}");
                    assert_eq!(policy::normalize_lexically(&p), p, "{line:?}");
                }
                PathPattern::Glob(g) => {
                    assert!(g.pattern().starts_with('/'), "{line:?} -> {g:?}");
                    assert!(g.base().is_absolute());
                    assert_eq!(policy::normalize_lexically(g.base()), g.base());
                    globs.push(g);
                }
            }
        }
    }
    let list = GlobList::new(globs.iter()).ok();
    for path in paths {
        let normal = policy::normalize_lexically(Path::new(path));
        assert_eq!(policy::normalize_lexically(&normal), normal, "{path:?}");
        assert!(policy::is_within(&normal, &normal));
        assert!(policy::is_within(Path::new(path), Path::new(path)));
        let one_by_one: Vec<usize> = globs
            .iter()
            .enumerate()
            .filter(|(_, g)| g.is_match(&normal))
            .map(|(i, _)| i)
            .collect();
        for &i in &one_by_one {
            assert!(
                normal.starts_with(globs[i].base()),
                "{path:?} {:?}",
                globs[i]
            );
        }
        if let Some(list) = &list {
            assert_eq!(list.matches(&normal), one_by_one, "{path:?} {globs:?}");
            assert_eq!(list.is_match(&normal), !one_by_one.is_empty(), "{path:?}");
        }
    }
});
