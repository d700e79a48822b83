//! The JSON settings reader (`policy::parse_settings_json`: srt's and Claude Code's sandbox
//! settings) and the strict JSON walker under it (`policy::strict_json`), on arbitrary text.
//!
//! Invariants: nothing panics; the strict walker never accepts what `serde_json` refuses,
//! and the offsets it records lie on character boundaries of the text; a settings file the
//! reader accepts resolves into a policy whose network rules compile.
#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use policy::strict_json::KeyIndex;
use policy::SettingsContext;

fuzz_target!(|text: &str| {
    if let Ok(index) = KeyIndex::new(text) {
        assert!(
            serde_json::from_str::<serde_json::Value>(text).is_ok(),
            "the strict walker accepted invalid JSON"
        );
        for key in index.top_level_keys() {
            if let Some(at) = index.offset(key) {
                assert!(text.is_char_boundary(at), "offset {at} of `{key}`");
            }
        }
    }
    let contexts = [
        SettingsContext::default(),
        SettingsContext {
            cwd: Some(PathBuf::from("/ws")),
            home: Some(PathBuf::from("/home/u")),
            file: Some(PathBuf::from("/ws/.claude/settings.json")),
        },
        SettingsContext {
            cwd: Some(PathBuf::from("/ws")),
            home: Some(PathBuf::from("/home/u")),
            file: Some(PathBuf::from("/home/u/.claude/settings.json")),
        },
    ];
    for ctx in &contexts {
        let Ok(file) = policy::parse_settings_json(text, "fuzz.json", ctx) else {
            continue;
        };
        match policy::resolve(Some(file), &policy::Overrides::default()) {
            Ok(resolved) => {
                if let Err(e) = policy::NetRules::new(&resolved.network) {
                    panic!("resolved network rules do not compile: {e}");
                }
            }
            Err(e) => panic!("accepted settings do not resolve: {e}"),
        }
    }
});
