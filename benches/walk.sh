#!/usr/bin/env bash
# How long `stockade run -- true` takes in a workspace of N entries (default 1,000,000: 1000
# directories of 999 empty files), against an empty workspace, with the release build. The
# planner walks every writable root for dotenv files and protected paths (no entry limit since
# issue 15: a run that creates many files must not make later runs fail), and the sweep lists
# again only the directories whose ctime moved.
#
#   bash benches/walk.sh [N]        # prints the medians; docs/benchmarks.md records them
#
# Not a test: nothing here asserts a time. The tree is made under /var/tmp and removed.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-1000000}"
runs="${RUNS:-5}"
bin=$(cargo build --release -q -p stockade-cli --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "stockade" and msg.get("executable"):
        print(msg["executable"])
')
tree=$(mktemp -d /var/tmp/stockade-walk.XXXXXX)
empty=$(mktemp -d /var/tmp/stockade-walk-empty.XXXXXX)
trap 'rm -rf "$tree" "$empty"' EXIT
python3 - "$tree" "$n" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
per = 999
made = 0
d = 0
while made < n:
    p = os.path.join(root, f"d{d:05d}")
    os.mkdir(p)
    made += 1
    for f in range(min(per, n - made)):
        open(os.path.join(p, f"f{f:04d}"), "w").close()
        made += 1
    d += 1
PY
echo "entries: $(find "$tree" | wc -l) (plus the root)"
python3 - "$bin" "$runs" "$empty" "$tree" <<'PY'
import statistics, subprocess, sys, time
bin, runs, dirs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for label, ws in zip(["empty workspace", "large workspace"], dirs):
    times = []
    for _ in range(runs):
        start = time.monotonic()
        subprocess.run([bin, "run", "--workspace", ws, "--", "true"], check=True)
        times.append(time.monotonic() - start)
    print(f"{label}: median {statistics.median(times):.3f} s over {runs} runs")
PY
