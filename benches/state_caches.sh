#!/usr/bin/env bash
# `run -- true` with other workspaces' walk caches in the caller's state directory, beside the
# same with none: every run lists its journal directory for journals to recover, and until
# issue 32's tenth round the walk caches of every workspace ever run in lay there (this
# machine's /root held 384). PREVIOUS keeps them in the journal directory, NEW in
# `journal/walk/` (each binary given its own layout); a binary from before the move given the
# new layout, or the reverse, measures nothing. Medians of one hyperfine run (-N), rows
# interleaved by hyperfine's order; ratios to each binary's own row without caches.
#
#   bash benches/state_caches.sh PREVIOUS NEW     # N (default 400) caches, RUNS (default 300)
#
# Not a test: nothing here asserts a time.
set -euo pipefail
old="${1:?PREVIOUS binary}"
new="${2:?NEW binary}"
n="${N:-400}"
runs="${RUNS:-300}"
command -v hyperfine >/dev/null || { echo "needs hyperfine" >&2; exit 2; }
r="$(mktemp -d /var/tmp/stockade-caches.XXXXXX)"
trap 'rm -rf "$r"' EXIT
mkdir -p "$r/ws"
for s in old0 new0 oldN newN; do
  mkdir -p "$r/$s/stockade/journal/walk"
  chmod 700 "$r/$s/stockade/journal/walk"
done
for i in $(seq "$n"); do
  h="$(printf '%032x' "$i")"
  head -c 2000 /dev/urandom > "$r/oldN/stockade/journal/walk-$h-0.cache"
  head -c 2000 /dev/urandom > "$r/newN/stockade/journal/walk/walk-$h-0.cache"
done
cd "$r/ws"
row() { echo "env XDG_STATE_HOME=$r/$1 $2 run --workspace $r/ws -- true"; }
hyperfine -N --warmup 20 --runs "$runs" --export-json "$r/h.json" \
  -n "previous, no caches" "$(row old0 "$old")" \
  -n "new, no caches" "$(row new0 "$new")" \
  -n "previous, $n caches" "$(row oldN "$old")" \
  -n "new, $n caches" "$(row newN "$new")" >/dev/null
python3 - "$r/h.json" "$n" <<'PY'
import json, statistics, sys
rows = {x["command"]: statistics.median(x["times"]) * 1000 for x in json.load(open(sys.argv[1]))["results"]}
n = sys.argv[2]
print("| row | median (ms) | ÷ the same binary without caches |")
print("|---|---:|---:|")
for who in ("previous", "new"):
    base = rows[f"{who}, no caches"]
    for what in ("no caches", f"{n} caches"):
        t = rows[f"{who}, {what}"]
        print(f"| {who}, {what} | {t:.2f} | {t / base:.3f}× |")
PY
