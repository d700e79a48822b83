#!/usr/bin/env bash
# Where a `stockade run -- true` spends its time, stage by stage: the spans stockade logs at
# debug level (`STOCKADE_LOG=debug`: each span's busy time when it closes), for two or more
# binaries taking turns run by run in one empty workspace, as the caller running this script.
# Prints, per span, the median busy time of each binary and each binary's ratio to the first;
# spans a binary does not have are left empty. Issue 32, item 3: "the stages' spans show where
# the time goes, before and after".
#
#   bash benches/spans.sh NAME=PATH [NAME=PATH ...]     # RUNS (default 60) runs per binary
#
# Busy time is wall time inside the span on its thread (a span that waits, such as
# `supervise:wait`, counts the wait). Nested spans are inside their parents. Not a test:
# nothing here asserts a time.
set -euo pipefail
runs="${RUNS:-60}"
[ $# -ge 1 ] || { echo "usage: bash benches/spans.sh NAME=PATH [NAME=PATH ...]" >&2; exit 2; }
ws="$(mktemp -d /var/tmp/stockade-spans.XXXXXX)"
trap 'rm -rf "$ws"' EXIT
cd "$ws"
python3 - "$runs" "$@" <<'PY'
import os, re, statistics, subprocess, sys
runs = int(sys.argv[1])
bins = [a.split("=", 1) for a in sys.argv[2:]]
env = dict(os.environ, STOCKADE_LOG="debug", NO_COLOR="1")
line = re.compile(r"DEBUG (\S+?): \S+: close time\.busy=([0-9.]+)(ns|µs|us|ms|s) ")
scale = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1e3}
spans = {name: {} for name, _ in bins}
order = []
for i in range(runs + 5):
    for name, path in bins:
        out = subprocess.run([path, "run", "--", "true"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True).stderr
        if i < 5:
            continue  # warm-up
        for m in line.finditer(out):
            # run{id=...}:launch{backend="native"}:prepare -> run:launch:prepare
            key = re.sub(r"\{[^}]*\}", "", m.group(1))
            spans[name].setdefault(key, []).append(float(m.group(2)) * scale[m.group(3)])
            if key not in order:
                order.append(key)
first = bins[0][0]
head = "| span | " + " | ".join(f"{n} (ms)" for n, _ in bins) + " | " + " | ".join(f"{n} ÷ {first}" for n, _ in bins[1:]) + " |"
print(head)
print("|---|" + "---:|" * (2 * len(bins) - 1))
for key in order:
    meds = [statistics.median(spans[n][key]) if key in spans[n] else None for n, _ in bins]
    cells = [f"{m:.3f}" if m is not None else "" for m in meds]
    ratios = [f"{m / meds[0]:.2f}×" if m is not None and meds[0] else "" for m in meds[1:]]
    print(f"| `{key}` | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
print(f"\n({runs} runs per binary, taking turns, after 5 warm-up rounds; medians of each span's busy time)")
PY
