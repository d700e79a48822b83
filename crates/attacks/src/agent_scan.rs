//! What the agent-integration tests have a real agent's tool call do: search everything the
//! tool can reach for API keys, and print what it found (`FOUND <key>` lines, and a `SCAN`
//! line counting the agent processes, memory regions and files it read), and the checks of
//! what it found.

use crate::upstream::Seen;

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

/// One agent test's fixture, its keys and the scan's files: `real` is the key the caller
/// holds, `decoy` a key-shaped value passed into the run on purpose (the scan must find it,
/// or it proves nothing), `state` the agent's state directory.
pub struct AgentCase {
    pub fx: crate::Fixture,
    pub real: String,
    pub decoy: String,
    pub state: std::path::PathBuf,
    scan: std::path::PathBuf,
    agent: &'static str,
}

impl AgentCase {
    /// For the agent whose processes' `argv[0]` ends with `agent`; its real key starts with
    /// `real_prefix`.
    pub fn new(agent: &'static str, real_prefix: &str) -> AgentCase {
        let fx = crate::Fixture::new();
        let real = format!("{real_prefix}-real-{}", fx.id);
        let decoy = format!("sk-decoy-{}", fx.id);
        let scan = fx.script("scan.py", SCAN);
        let state = fx.root.join(format!("{agent}-state"));
        crate::mkdir(&state);
        AgentCase {
            fx,
            real,
            decoy,
            state,
            scan,
            agent,
        }
    }

    /// The tool call's command: the scan of the agent's processes and of these directories.
    pub fn tool(&self, roots: &[&std::path::Path]) -> String {
        let roots: Vec<String> = roots.iter().map(crate::sh_quote).collect();
        format!(
            "/usr/bin/python3 {} {} {}",
            crate::sh_quote(&self.scan),
            self.agent,
            roots.join(" ")
        )
    }

    /// The tool call's command inside a run: the workspace, the home, the state and `/tmp`.
    pub fn tool_inside(&self) -> String {
        let tmp = std::path::Path::new("/tmp");
        self.tool(&[&self.fx.ws, &self.fx.home, &self.state, tmp])
    }

    /// Checks a run's scan: it ran (it found the agent, and read its memory or was refused
    /// it), it found the decoy, and the real key appears nowhere: not in what it found, not in
    /// the run's output, not in a file the agent wrote. `marker` names the request that
    /// carried the tool's output back to the model.
    pub fn assert_held(&self, seen: &[Seen], marker: &str, run: &crate::Run) {
        let result = tool_output(seen, marker);
        let counts = result
            .lines()
            .find(|l| l.contains("SCAN agents="))
            .unwrap_or_else(|| panic!("the scan did not run:\n{result}\n{seen:#?}"));
        assert!(
            !(counts.contains("agents=0")
                || counts.contains("regions=0") && counts.contains("denied=0")),
            "{counts}"
        );
        let keys = found(&result);
        assert!(
            keys.iter().any(|k| k.starts_with(&self.decoy)),
            "the scan finds keys: {keys:?}"
        );
        assert!(
            !result.contains(&self.real),
            "the tool found the real key:\n{result}"
        );
        assert!(!run.stdout.contains(&self.real) && !run.stderr.contains(&self.real));
        let written = crate::walk(&self.state, &|_| false)
            .into_iter()
            .chain(crate::walk(&self.fx.ws, &|_| false));
        for f in written {
            let bytes = crate::read_bytes(&f).unwrap_or_default();
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains(&self.real),
                "{} holds the real key",
                f.display()
            );
        }
    }

    /// The control's check: the same scan on the host found the real key.
    pub fn assert_found(&self, seen: &[Seen], marker: &str) {
        let result = tool_output(seen, marker);
        assert!(
            result.contains(&self.real),
            "the scan finds the key when it is there:\n{result}"
        );
    }
}

/// The body of the request that carried the tool's output (holding `marker`) back to the
/// model, JSON's `\n` read as line breaks.
pub fn tool_output(seen: &[Seen], marker: &str) -> String {
    seen.iter()
        .map(|s| String::from_utf8_lossy(&s.body).into_owned())
        .find(|b| b.contains(marker))
        .unwrap_or_default()
        .replace("\\n", "\n")
}
