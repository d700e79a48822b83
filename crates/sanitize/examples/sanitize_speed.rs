//! The sanitizer library alone, in memory: `cargo run --release -p sanitize --example
//! sanitize_speed -- FILE...` prints the throughput of the best and the median of eleven passes over each
//! file (the best is the one least disturbed by other work on the machine),
//! fed in 64 KiB chunks as `stockade sanitize` does (`CHUNK=bytes` to change that).

use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let chunk: usize = std::env::var("CHUNK")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(64 << 10);
    for path in std::env::args().skip(1) {
        if path == "-" {
            return relay(chunk);
        }
        let input = std::fs::read(&path)?;
        let mut out = Vec::with_capacity(chunk * 3 + 16);
        let mut times = Vec::new();
        let mut written = 0;
        for _ in 0..11 {
            let started = Instant::now();
            let mut s = sanitize::Sanitizer::new();
            for piece in input.chunks(chunk.max(1)) {
                out.clear();
                s.push(piece, &mut out);
            }
            out.clear();
            written = s.finish(&mut out).bytes_out;
            times.push(started.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let rate = |t: f64| input.len() as f64 / t / 1e6;
        let (best, median) = (times[0], times[times.len() / 2]);
        println!(
            "{path}: best {:.0} MB/s, median {:.0} MB/s ({} bytes in, {written} out)",
            rate(best),
            rate(median),
            input.len(),
        );
    }
    Ok(())
}

/// `-`: standard input to standard output as `stockade sanitize` does, to try buffer sizes.
fn relay(chunk: usize) -> Result<(), Box<dyn std::error::Error>> {
    use std::io::{Read, Write};
    let (mut input, mut output) = (std::io::stdin().lock(), std::io::stdout().lock());
    let mut s = sanitize::Sanitizer::new();
    let mut buf = vec![0u8; chunk.max(1)];
    let mut out = Vec::with_capacity(buf.len() + 64);
    loop {
        let n = input.read(&mut buf)?;
        if n == 0 {
            break;
        }
        out.clear();
        s.push(&buf[..n], &mut out);
        output.write_all(&out)?;
    }
    out.clear();
    let report = s.finish(&mut out);
    output.write_all(&out)?;
    eprintln!("{report:?}");
    Ok(())
}
