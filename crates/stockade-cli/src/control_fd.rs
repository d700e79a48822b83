//! `--control-fd N` (`run`, `mcp`): JSON lines on descriptor N change the live policy, each
//! answered by one JSON line on the same descriptor when it is a socket (else on stderr): `{"ok":true,"applied":{"network":"now","filesystem":"next run"}}` or
//! `{"ok":false,"error":{...}}`. Every change, applied or refused, goes to the audit log.
//!
//! A line is an object of lists, each replacing the current one: `allow_domains`,
//! `deny_domains`, `allow_hosts` (the running proxy's rules, at once), `allow_write`,
//! `allow_read`, `deny_read`, `deny_write` (the sandbox of the runs started after it).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;

use stockade::{Change, Error, LivePolicy};

use crate::output::errln;

/// The reply to one line.
fn reply(line: &str, live: &LivePolicy, audit: Option<&PathBuf>) -> serde_json::Value {
    let change: Change = match serde_json::from_str(line) {
        Ok(c) => c,
        Err(e) => {
            return serde_json::json!({ "ok": false, "error": {
                "code": sandbox::Code::PolicyInvalid.as_str(),
                "message": format!("not a policy change: {e}"),
                "hint": "one JSON object per line with any of allow_domains, deny_domains, allow_hosts, allow_write, allow_read, deny_read, deny_write (lists of strings)",
            }});
        }
    };
    let result = live.apply(&change);
    if let Some(path) = audit {
        if let Err(e) = stockade::audit_policy_change(path, "control-fd", &change, &result) {
            errln!("stockade: control: the audit log could not be written: {e}");
        }
    }
    match result {
        Ok(applied) => serde_json::json!({ "ok": true, "applied": applied }),
        Err(e) => serde_json::json!({ "ok": false, "error": {
            "code": e.code(), "message": e.to_string(), "hint": e.hint(),
        }}),
    }
}

/// Read changes from `fd` on a thread of their own until it ends.
pub fn start(fd: i32, live: LivePolicy, audit: Option<PathBuf>) -> Result<(), Error> {
    let owned = stockade::adopt_inherited_fd(fd).map_err(|e| Error::Usage {
        message: format!("--control-fd {fd}: {e}"),
        hint: "pass a descriptor this process inherits open, e.g. `3<control.fifo` or a socket"
            .into(),
    })?;
    let file = std::fs::File::from(owned);
    // Replies go back on a socket only: on a FIFO opened for reading and writing (`3<>fifo`,
    // which keeps it open between writers) a reply would come back as the next line.
    use std::os::unix::fs::FileTypeExt;
    let socket = file.metadata().is_ok_and(|m| m.file_type().is_socket());
    let mut writer = if socket { file.try_clone().ok() } else { None };
    std::thread::Builder::new()
        .name("stockade-control".into())
        .spawn(move || {
            for line in BufReader::new(file).lines() {
                let Ok(line) = line else { break };
                if line.trim().is_empty() {
                    continue;
                }
                let answer = reply(&line, &live, audit.as_ref());
                let text = format!("{answer}\n");
                let written = writer
                    .as_mut()
                    .is_some_and(|w| w.write_all(text.as_bytes()).is_ok());
                if !written {
                    writer = None;
                    errln!("stockade: control: {answer}");
                }
            }
        })
        .map_err(|e| Error::Io {
            what: "start the control thread".into(),
            cause: e,
        })?;
    Ok(())
}
