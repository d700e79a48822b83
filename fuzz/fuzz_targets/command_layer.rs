//! The command layer (`guard::command::check`): arbitrary shell command strings, parsed by
//! brush-parser and checked under the argv-only policy against a small real workspace (a
//! file, a directory, an executable script, a symlink out of the workspace and a symlink
//! loop). The same words also go through `check_argv`. Nothing is ever executed.
//!
//! Invariants: nothing panics (the layer already refuses inputs known to crash the parser;
//! this target looks for more); an accepted command has a non-empty argv whose program is an
//! absolute path outside the workspace; a refusal carries the stable code and a hint.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use guard::command::{self, Context, E_SANDBOX_VIOLATION};
use libfuzzer_sys::fuzz_target;

/// The workspace lives in the fuzz build directory (created once, reused by every run).
const WORKSPACE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/target/command-layer-workspace"
);

fn context() -> &'static Context {
    static CONTEXT: OnceLock<Context> = OnceLock::new();
    CONTEXT.get_or_init(|| {
        let ws = PathBuf::from(WORKSPACE);
        let created = (|| -> std::io::Result<()> {
            std::fs::create_dir_all(ws.join("src"))?;
            std::fs::create_dir_all(ws.join("home"))?;
            std::fs::write(ws.join("notes.txt"), "notes\n")?;
            std::fs::write(ws.join("src/main.rs"), "fn main() {}\n")?;
            std::fs::write(ws.join("build.sh"), "#!/bin/sh\n")?;
            std::fs::set_permissions(
                ws.join("build.sh"),
                std::os::unix::fs::PermissionsExt::from_mode(0o755),
            )?;
            for (link, to) in [("escape", "/etc"), ("loop", "loop"), ("up", "..")] {
                if std::fs::symlink_metadata(ws.join(link)).is_err() {
                    std::os::unix::fs::symlink(to, ws.join(link))?;
                }
            }
            Ok(())
        })();
        if let Err(e) = created {
            panic!("cannot set up the workspace {}: {e}", ws.display());
        }
        match Context::new(&ws) {
            Ok(ctx) => ctx.with_home(Some(ws.join("home"))),
            Err(e) => panic!("cannot make a context for {}: {e}", ws.display()),
        }
    })
}

// brush-parser 0.3.0 panics on a here-document inside `$(` (`$((<<()` + newline + `)`),
// allocates without bound on `x` + newline + `<<` + CR + ` x `, and slows down exponentially
// on unbalanced `(`: found here; the layer now refuses `<<` and more than `MAX_PARENS` `(`
// outside single quotes before parsing.
fuzz_target!(|text: &str| {
    let ctx = context();
    if let Ok(checked) = check(command::check(text, ctx), ctx) {
        // A shell string with a NUL byte must not become an argv that `execve` cuts short.
        assert!(
            checked.argv.iter().all(|a| !a.contains('\0')),
            "an argument holds a NUL byte: {checked:?}"
        );
    }
    // check_argv refuses NUL itself (a real argv cannot hold one).
    let argv: Vec<String> = text
        .split(char::is_whitespace)
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    let _ = check(command::check_argv(&argv, ctx), ctx);
});

fn check(
    result: Result<command::Checked, command::Refusal>,
    ctx: &Context,
) -> Result<command::Checked, command::Refusal> {
    match &result {
        Ok(checked) => {
            let Some(program) = checked.argv.first() else {
                panic!("accepted an empty argv: {checked:?}");
            };
            assert!(Path::new(program).is_absolute(), "{checked:?}");
            assert!(checked.program.is_absolute(), "{checked:?}");
            assert!(
                !checked.program.starts_with(ctx.workspace()),
                "runs a program from the workspace: {checked:?}"
            );
        }
        Err(refusal) => {
            assert_eq!(refusal.code(), E_SANDBOX_VIOLATION);
            assert!(!refusal.hint().is_empty(), "{refusal:?}");
        }
    }
    result
}
