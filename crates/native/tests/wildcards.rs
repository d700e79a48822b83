//! stockade has two hand-written matchers for `*` and `?` within one path component, in crates
//! that must not depend on each other: policy's bulk glob matcher (`GlobList`, which finds the
//! files to mask and protect when the writable roots are walked) and sys's
//! (`protect::wildcard_match`, which mediated creation checks names with after fork,
//! allocation-free). They must agree with each other and with globset, which the policy
//! compiles every glob with. Checked exhaustively on short patterns and names, including
//! names that contain `*` and `?` themselves (policy's once took a `*` in a name for the
//! pattern's wildcard, which left a file named `.env.*x` unmasked).

use std::path::{Path, PathBuf};

use policy::{GlobList, PathContext, PathPattern};

/// Every string of 1..=max characters over `alphabet`.
fn words(alphabet: &[char], max: usize) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    let mut last = vec![String::new()];
    for _ in 0..max {
        last = last
            .iter()
            .flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}")))
            .collect();
        all.extend(last.iter().cloned());
    }
    all
}

#[test]
fn policy_sys_and_globset_agree_on_one_component() {
    let ctx = PathContext {
        home: PathBuf::from("/h"),
        workspace: PathBuf::from("/ws"),
        writable_roots: vec![PathBuf::from("/ws")],
    };
    let alphabet = ['a', 'b', '.', '*', '?'];
    let names: Vec<String> = words(&alphabet, 4)
        .into_iter()
        .filter(|n| n != "." && n != "..")
        .collect();
    let mut compared = 0usize;
    for pattern in words(&alphabet, 3) {
        let Ok(expanded) = policy::expand(&pattern, &ctx) else {
            continue;
        };
        // A relative pattern matches a name anywhere below the writable root: `/ws/**/PAT`.
        let globs: Vec<_> = expanded
            .into_iter()
            .filter_map(|p| match p {
                PathPattern::Glob(g) => Some(g),
                PathPattern::Exact(_) => None,
            })
            .collect();
        let [glob] = globs.as_slice() else {
            continue;
        };
        if glob.pattern() != format!("/ws/**/{pattern}") {
            continue; // `.` and `..` are normalized away: not a one-component pattern
        }
        let Ok(list) = GlobList::new(&globs) else {
            panic!("{pattern}: GlobList refused it");
        };
        for name in &names {
            let path = format!("/ws/d/{name}");
            let path = Path::new(&path);
            let globset = glob.is_match(path);
            let bulk = !list.matches(path).is_empty();
            let sys = protect::wildcard_match(pattern.as_bytes(), name.as_bytes());
            assert_eq!(
                bulk, globset,
                "GlobList vs globset: {pattern:?} on {name:?}"
            );
            assert_eq!(sys, globset, "protect vs globset: {pattern:?} on {name:?}");
            compared += 1;
        }
    }
    assert!(compared > 100_000, "only {compared} comparisons");
}
