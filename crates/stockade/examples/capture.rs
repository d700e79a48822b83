//! Run a command under a policy with stockade as a library: capture its output, then read
//! what the run was refused and what it used.
//!
//!     cargo run -p stockade --example capture [-- PROGRAM ARGS...]
//!
//! Without arguments it runs a shell snippet that reads a masked file, writes outside the
//! workspace and prints something, in a throw-away workspace under /var/tmp.

use std::io::Read;

use stockade::{Cancel, RunIo, RunRequest};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let argv = if argv.is_empty() {
        vec![
            "/bin/sh".into(),
            "-c".into(),
            "echo hello from the sandbox; cat ~/.ssh/id_rsa; echo x > /etc/stockade-example; \
             touch .envrc; echo done"
                .into(),
        ]
    } else {
        argv
    };
    let workspace = tempfile::Builder::new()
        .prefix("stockade-example.")
        .tempdir_in("/var/tmp")?;

    // The policy: the default profile, as `stockade run` resolves it without a policy file.
    let policy = policy::resolve(None, &policy::Overrides::default())?;
    let request = RunRequest::new(argv, Some(workspace.path().to_path_buf()))?;

    // The run's own output: pipes read on threads while it runs.
    let (mut out_r, out_w) = std::io::pipe()?;
    let (mut err_r, err_w) = std::io::pipe()?;
    let readers = [
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out_r.read_to_string(&mut s);
            s
        }),
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err_r.read_to_string(&mut s);
            s
        }),
    ];
    let io = RunIo::captured(out_w.into(), err_w.into(), Cancel::new());
    let result = stockade::run_with_io(&policy, &request, io)?;
    let [out, err] = readers.map(|r| r.join().unwrap_or_default());

    println!("exit code: {}", result.exit_code);
    println!("stdout:\n{out}");
    println!("stderr:\n{err}");
    println!("violations:");
    for v in &result.violations {
        println!("  {} {}: {}", v.code, v.path.display(), v.action);
    }
    let usage = &result.outcome.usage;
    println!(
        "usage: {} ms, peak memory {:?} bytes, CPU {:?} us",
        result.outcome.duration.as_millis(),
        usage.memory_peak,
        usage.cpu_usec
    );
    Ok(())
}
