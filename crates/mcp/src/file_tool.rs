//! The file tools' side inside the sandbox: `stockade file-tool` reads one [`Request`] as JSON
//! on stdin and writes one [`Reply`] on stdout.
//!
//! Every file tool runs as a sandboxed run of its own, so the sandbox's own rules apply to it
//! unchanged: masks (a masked file reads as the sandbox shows it), protected paths and the
//! host-executed catalogue (a write there is refused by the kernel or the mediator and shows
//! up among the run's violations), Landlock, seccomp. On top of that, every path is resolved
//! beneath the workspace (cap-std: `..` and symlinks may not leave it), which the sandbox alone
//! would not do (it may read the system's files).

use std::io::{Read, Write};

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use crate::file_ops;

/// One file operation, relative to the workspace (the run's working directory).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Lines `offset..offset+limit` (1-based) of a text file.
    Read {
        path: String,
        offset: Option<usize>,
        limit: Option<usize>,
    },
    /// Replace (or create) a file, with missing parent directories.
    Write { path: String, content: String },
    /// Replace `old` by `new` in a file: exactly once, or everywhere with `all`.
    Edit {
        path: String,
        old: String,
        new: String,
        all: bool,
    },
    /// A directory's entries.
    Ls { path: String },
    /// Paths beneath `path` matching a glob.
    Glob { pattern: String, path: String },
    /// Lines matching a regular expression in the files beneath `path` (or `path` itself).
    Grep {
        pattern: String,
        path: String,
        glob: Option<String>,
        ignore_case: bool,
    },
}

/// What a file operation gave.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    Done { text: String },
    Failed { kind: FailureKind, message: String },
}

/// Why a file operation failed.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The path leads outside the workspace (`..`, an absolute path, a symlink out of it).
    OutsideWorkspace,
    /// The sandbox refused it: a masked or unreadable path, a read-only (protected) one.
    Refused,
    /// No such file or directory.
    NotFound,
    /// The request cannot be done as asked (not unique, not text, bad pattern, too large).
    Invalid,
    /// Any other error.
    Failed,
}

impl Reply {
    pub(crate) fn failed(kind: FailureKind, message: impl Into<String>) -> Reply {
        Reply::Failed {
            kind,
            message: message.into(),
        }
    }
}

/// The largest request read from stdin (a `write_file` of this much content at most).
pub const MAX_REQUEST: u64 = 64 << 20;

/// `stockade file-tool`: one request from stdin, its reply on stdout. Exit status 0 when a
/// reply was written (whatever it says).
pub fn serve_stdio() -> std::io::Result<()> {
    let mut input = Vec::new();
    std::io::stdin()
        .take(MAX_REQUEST + 1)
        .read_to_end(&mut input)?;
    let reply = if input.len() as u64 > MAX_REQUEST {
        Reply::failed(FailureKind::Invalid, "the request is larger than 64 MiB")
    } else {
        match serde_json::from_slice::<Request>(&input) {
            Ok(request) => handle(&request),
            Err(e) => Reply::failed(FailureKind::Invalid, format!("bad request: {e}")),
        }
    };
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &reply)?;
    out.flush()
}

/// Do `request` in the current directory (the workspace).
pub fn handle(request: &Request) -> Reply {
    let root = match Dir::open_ambient_dir(".", cap_std::ambient_authority()) {
        Ok(d) => d,
        Err(e) => return file_ops::io_failure("open the workspace", e),
    };
    match request {
        Request::Read {
            path,
            offset,
            limit,
        } => file_ops::read(&root, path, *offset, *limit),
        Request::Write { path, content } => file_ops::write(&root, path, content),
        Request::Edit {
            path,
            old,
            new,
            all,
        } => file_ops::edit(&root, path, old, new, *all),
        Request::Ls { path } => file_ops::ls(&root, path),
        Request::Glob { pattern, path } => file_ops::glob(&root, pattern, path),
        Request::Grep {
            pattern,
            path,
            glob,
            ignore_case,
        } => file_ops::grep(&root, pattern, path, glob.as_deref(), *ignore_case),
    }
}
