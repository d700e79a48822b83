//! Where every subcommand prints: [`out!`]/[`outln!`] for standard output, [`errln!`] for
//! standard error. `println!` panics when its reader has gone away (`stockade selftest --list |
//! head -1`: `EPIPE`, since Rust programs ignore `SIGPIPE`), so nothing here uses it (the crate
//! denies `clippy::print_stdout` and `clippy::print_stderr`).
//!
//! A standard output whose reader went away ends stockade at once, quietly, with status 141
//! (128 + `SIGPIPE`): what a shell shows for coreutils' `yes | head -1`, which `SIGPIPE` kills
//! without a message. `SIGPIPE` itself stays ignored: the output relay of a run needs `EPIPE`
//! (see `stream::relay`). Any other failure to write standard output is an `E_INTERNAL`
//! error (exit 125). A standard error that cannot be written is let be: there is nowhere left
//! to say so, and a run's exit code must stay the command's.

use std::fmt;
use std::io::{self, Write};

/// Exit status after the reader of standard output went away: 128 + `SIGPIPE`.
pub const EXIT_BROKEN_PIPE: u8 = 141;

/// Ends stockade after a failed write to standard output: quietly with
/// [`EXIT_BROKEN_PIPE`] when its reader went away, else with the error printed and 125.
pub fn stdout_failed(cause: io::Error) -> ! {
    if cause.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(EXIT_BROKEN_PIPE));
    }
    let e = stockade::Error::Io {
        what: "write standard output".into(),
        cause,
    };
    crate::print_error(&e, false);
    std::process::exit(i32::from(crate::EXIT_REFUSED));
}

/// Writes `args` to standard output and flushes it (see the module documentation).
pub fn stdout(args: fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        stdout_failed(e);
    }
}

/// Writes `bytes` to standard output and flushes it (see the module documentation).
pub fn stdout_bytes(bytes: &[u8]) {
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        stdout_failed(e);
    }
}

/// Writes `args` to standard error, [`shown`]; a failure is ignored (see the module
/// documentation).
pub fn stderr(args: fmt::Arguments<'_>) {
    let line = args.to_string();
    let _ = io::stderr().lock().write_all(shown(&line).as_bytes());
}

/// `text` with what a terminal would act on, or a reader not see, written out as `\u{...}`:
/// control characters other than newline and tab (escape sequences), and the invisible,
/// direction-changing and Tag characters the sanitizer removes. stockade's own lines carry
/// names the sandbox chose (a file it created, a host it asked for): they must not set the
/// caller's window title or hide text, `--sanitize-output` or not.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    let acts =
        |c: char| (c.is_control() && c != '\n' && c != '\t') || sanitize::classify(c).is_some();
    if !text.chars().any(acts) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if acts(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// [`shown`] for text that must stay on one line (a name, an error message): newlines and
/// tabs are written out too, so that a name the sandbox chose cannot start a line of its own
/// that looks like stockade's.
pub fn shown_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(['\n', '\t']) {
        return shown(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c == '\n' || c == '\t' {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(shown(&out).into_owned())
}

/// `print!` to standard output, ending quietly with 141 when its reader went away.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::stdout(format_args!($($arg)*))
    };
}

/// `println!` to standard output, ending quietly with 141 when its reader went away.
macro_rules! outln {
    () => {
        $crate::output::stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that never panics.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {errln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_terminal_acts_on_is_written_out() {
        assert_eq!(shown("plain\n  hint: x\t"), "plain\n  hint: x\t");
        assert_eq!(
            shown("/w/.git/hooks/\u{1b}]0;PWNED\u{7}x"),
            "/w/.git/hooks/\\u{1b}]0;PWNED\\u{7}x"
        );
        assert_eq!(shown("a\u{202e}b\u{9b}c"), "a\\u{202e}b\\u{9b}c");
    }
}
