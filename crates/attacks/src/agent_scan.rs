//! What the agent-integration tests have a real agent's tool call do: search everything the
//! tool can reach for API keys, and print what it found (`FOUND <key>` lines, and a `SCAN`
//! line counting the agent processes, memory regions and files it read).

/// An agent's tool call that searches for keys (`python3 scan.py AGENT ROOTS...`): key-shaped
/// (`sk-...`) strings in every process's environ and cmdline, the
/// agent's anonymous memory, and the files under the roots given.
pub const SCAN: &str = r#"
import os, re, sys
pat = re.compile(rb"sk-[A-Za-z0-9_-]{8,}")
agent = sys.argv[1].encode()
found, agents, regions, files, denied = set(), 0, 0, 0, 0
pids = [p for p in os.listdir("/proc") if p.isdigit()]
for p in pids:
    for f in ("environ", "cmdline"):
        try:
            found.update(pat.findall(open(f"/proc/{p}/{f}", "rb").read()))
        except OSError:
            pass
for p in pids:
    try:
        argv0 = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")[0]
    except OSError:
        continue
    if not argv0.endswith(agent):
        continue
    agents += 1
    try:
        maps, mem = open(f"/proc/{p}/maps"), open(f"/proc/{p}/mem", "rb")
    except OSError:
        denied += 1
        continue
    try:
        with maps, mem:
            for line in maps:
                parts = line.split()
                if "r" not in parts[1] or (len(parts) > 5 and parts[5].startswith("/")):
                    continue
                start, end = (int(x, 16) for x in parts[0].split("-"))
                if end - start > 1 << 30:
                    continue
                try:
                    mem.seek(start)
                    found.update(pat.findall(mem.read(end - start)))
                    regions += 1
                except (OSError, ValueError, OverflowError):
                    pass
    except OSError:
        pass
for root in sys.argv[2:]:
    for d, _, names in os.walk(root):
        for n in names:
            path = os.path.join(d, n)
            try:
                if os.path.islink(path) or os.path.getsize(path) > 16 << 20:
                    continue
                found.update(pat.findall(open(path, "rb").read()))
                files += 1
            except OSError:
                pass
print("SCAN agents=%d regions=%d denied=%d files=%d" % (agents, regions, denied, files))
for f in sorted(found):
    print("FOUND", f.decode())
"#;

/// The keys a scan's output lists.
pub fn found(output: &str) -> Vec<&str> {
    output
        .lines()
        .filter_map(|l| l.split_once("FOUND ").map(|(_, k)| k.trim()))
        .collect()
}
