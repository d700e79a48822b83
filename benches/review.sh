#!/usr/bin/env bash
# Review mode (issue 19), with the release build:
#  1. `stockade run -- true` against `stockade run --review -- true` (and --ephemeral) in a
#     workspace of 100,000 files (100 directories of 1,000 empty files): the view is one
#     overlay mount, not a copy;
#  2. `stockade changes` of a change set of 10,000 changed files;
#  3. `stockade apply` of 1 GB of changes (64 files of 16 MiB) against `cp -a` of the same
#     files into a copy of the workspace.
# Run as root and as a regular user (`runuser -u USER -- bash benches/review.sh` after a
# build by root: BIN=path/to/stockade). Prints medians; docs/benchmarks.md records them.
#
#   bash benches/review.sh
#
# Not a test: nothing here asserts a time. Trees are made under /var/tmp and removed.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-9}"
bin="${BIN:-}"
if [ -z "$bin" ]; then
    bin=$(cargo build --release -q -p stockade-cli --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "stockade" and msg.get("executable"):
        print(msg["executable"])
')
fi
work=$(mktemp -d /var/tmp/stockade-review.XXXXXX)
trap 'rm -rf "$work"' EXIT
export HOME="$work/home" XDG_STATE_HOME="$work/state"
mkdir -p "$HOME" "$XDG_STATE_HOME"
ws="$work/ws"
python3 - "$ws" <<'PY'
import os, sys
root = sys.argv[1]
os.mkdir(root)
for d in range(100):
    p = os.path.join(root, f"d{d:03d}")
    os.mkdir(p)
    for f in range(1000):
        open(os.path.join(p, f"f{f:04d}"), "w").close()
PY
# Settle the tree's ctimes (the sweep trusts directories changed more than 3 s ago).
sleep 4
echo "workspace: $(find "$ws" | wc -l) entries; caller uid $(id -u)"
python3 - "$bin" "$runs" "$ws" "$work" <<'PY'
import json, os, shutil, statistics, subprocess, sys, time
bin, runs, ws, work = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def median(argv, cwd=None, setup=None):
    times = []
    for _ in range(runs):
        if setup:
            setup()
        start = time.monotonic()
        subprocess.run(argv, check=True, cwd=cwd, stdout=subprocess.DEVNULL)
        times.append(time.monotonic() - start)
    return statistics.median(times) * 1000

direct = median([bin, "run", "--workspace", ws, "--", "true"])
review = median([bin, "run", "--review", "--workspace", ws, "--", "true"])
ephemeral = median([bin, "run", "--ephemeral", "--workspace", ws, "--", "true"])
print(f"run -- true, 100k files: direct {direct:.1f} ms, --review {review:.1f} ms (+{review - direct:.1f}), --ephemeral {ephemeral:.1f} ms (+{ephemeral - direct:.1f})")

# 10,000 changed files: one review run writes them; `changes` reads the set.
small = os.path.join(work, "small")
os.mkdir(small)
report = os.path.join(work, "report.json")
subprocess.run([bin, "run", "--review", "--report", report, "--workspace", small, "--shell",
                "for d in $(seq 0 99); do mkdir d$d; for f in $(seq 0 99); do echo $d.$f > d$d/f$f; done; done"],
               check=True, stdout=subprocess.DEVNULL, cwd=small)
run_id = json.load(open(report))["review"]["run_id"]
changes = median([bin, "changes", run_id, "--json"], cwd=small)
print(f"changes of 10,000 added files: {changes:.1f} ms")
subprocess.run([bin, "discard", run_id], check=True, stdout=subprocess.DEVNULL)

# 1 GB of changes: 64 files of 16 MiB written by a review run, then applied; against cp -a.
big = os.path.join(work, "big")
os.mkdir(big)
applied, copied = [], []
for _ in range(min(runs, 3)):
    shutil.rmtree(big)
    os.mkdir(big)
    subprocess.run([bin, "run", "--review", "--report", report, "--workspace", big, "--shell",
                    "for i in $(seq 1 64); do head -c 16777216 /dev/urandom > blob$i; done"],
                   check=True, stdout=subprocess.DEVNULL, cwd=big)
    run_id = json.load(open(report))["review"]["run_id"]
    upper = os.path.join(os.environ["XDG_STATE_HOME"], "stockade", "changes", run_id, "upper")
    target = os.path.join(work, "cp-target")
    shutil.rmtree(target, ignore_errors=True)
    os.mkdir(target)
    subprocess.run(["sync"], check=True)
    start = time.monotonic()
    subprocess.run(["cp", "-a", upper + "/.", target], check=True)
    subprocess.run(["sync"], check=True)
    copied.append(time.monotonic() - start)
    shutil.rmtree(target)
    start = time.monotonic()
    subprocess.run([bin, "apply", run_id, "--accept-flagged"], check=True,
                   stdout=subprocess.DEVNULL, cwd=big)
    subprocess.run(["sync"], check=True)
    applied.append(time.monotonic() - start)
a, c = statistics.median(applied), statistics.median(copied)
print(f"apply of 1 GiB (64 x 16 MiB): {a:.2f} s; cp -a + sync: {c:.2f} s; speed ratio {c / a:.2f}x of cp -a")
PY
