#!/usr/bin/env bash
# How long `stockade run -- true` takes in a workspace of N entries (directories of 999 empty
# files), against an empty workspace and against bwrap in the same workspace, with the release
# build: cold (no walk cache: the planner lists every directory) and warm (the walk cache of
# the previous run: one stat per directory, issue 32 item 1). Since issue 15 the walk has no
# entry limit; the sweep lists again only the directories whose ctime moved.
#
#   bash benches/walk.sh [N...]          # default: 10000 100000 1000000
#   BIN=path/to/stockade BASE=path/to/previous/stockade bash benches/walk.sh 1000000
#   PER=9 bash benches/walk.sh 1000000   # 100,000 directories of 9 files: the cost per directory
#
# BIN: the binary to measure (default: a release build of this tree). BASE (optional): a
# second binary measured beside it (the previous one: warm with its own section of the cache
# file if it has a cache, as each binary keys its own). One hyperfine run (`-N`, medians); the
# cold runs remove the cache file before each run. The ratios are what count (a shared
# machine). Then, per binary, what does not depend on the machine's load: the CPU time
# (`perf stat` task-clock, all processes of the run, medians of runs taking turns) of a warm
# run and of a run in the empty workspace, and the system calls of each (`strace -f -c`).
# Not a test: nothing here asserts a time. The trees are made under /var/tmp and removed.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(10000 100000 1000000)
runs="${RUNS:-10}"
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
base="${BASE:-}"
state="${XDG_STATE_HOME:-$HOME/.local/state}/stockade/journal"
empty=$(mktemp -d /var/tmp/stockade-walk-empty.XXXXXX)
trees=()
cleanup() { rm -rf "$empty" "${trees[@]}"; }
trap cleanup EXIT
# The cache file of a workspace (see workspace::walk_cache::file_name).
cache_of() {
  python3 -c 'import hashlib,os,sys; print("walk-"+hashlib.sha256(os.fsencode(sys.argv[1])).hexdigest()[:32]+"-"+str(os.geteuid())+".cache")' "$1"
}
for n in "${sizes[@]}"; do
  tree=$(mktemp -d /var/tmp/stockade-walk.XXXXXX)
  trees+=("$tree")
  python3 - "$tree" "$n" "${PER:-999}" <<'PY'
import os, sys
root, n, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
made = 0
d = 0
while made < n:
    p = os.path.join(root, f"d{d // 1000:03d}", f"d{d:06d}") if n // (per + 1) > 5000 else os.path.join(root, f"d{d:05d}")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    os.mkdir(p)
    made += 1
    for f in range(min(per, n - made)):
        open(os.path.join(p, f"f{f:04d}"), "w").close()
        made += 1
    d += 1
PY
  tree=$(realpath "$tree")
  echo "== $n entries ($(find "$tree" -type d | wc -l) directories), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  # Settled: the walk caches only directories whose ctime is 3 s old.
  sleep 4
  cache="$state/$(cache_of "$tree")"
  # One --prepare per command, in order: the cold runs start without the cache file, the warm
  # ones with it (written by one run when missing).
  prep=(--prepare true --prepare true --prepare "rm -f $cache"
        --prepare "sh -c 'test -e $cache || $bin run --workspace $tree -- true'")
  cmds=(-n "bwrap (same workspace)" "bwrap --unshare-all --ro-bind / / --bind $tree $tree true"
        -n "stockade, empty workspace" "$bin run --workspace $empty -- true"
        -n "stockade, cold (no cache)" "$bin run --workspace $tree -- true"
        -n "stockade, warm (cache)" "$bin run --workspace $tree -- true")
  if [ -n "$base" ]; then
    prep+=(--prepare true)
    cmds+=(-n "BASE binary (warm if it caches)" "$base run --workspace $tree -- true")
  fi
  hyperfine -N -w 2 -r "$runs" --style none --export-json "/var/tmp/stockade-walk-$n.json" \
    "${prep[@]}" "${cmds[@]}" >/dev/null
  python3 - "/var/tmp/stockade-walk-$n.json" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
med = {r["command"]: r["median"] for r in res}
empty = med["stockade, empty workspace"]
bw = med["bwrap (same workspace)"]
for name, m in med.items():
    print(f"  {name:30s} median {m*1e3:9.2f} ms   {m/bw:6.2f}x bwrap   +{(m-empty)*1e3:8.2f} ms over empty")
PY
  # CPU time and system calls, warm against empty, the binaries taking turns (each has written
  # its section of the cache above).
  if command -v perf >/dev/null && command -v strace >/dev/null; then
    bins=("$bin")
    [ -n "$base" ] && bins+=("$base")
    tc=$(mktemp)
    for _ in $(seq "$runs"); do
      for b in "${bins[@]}"; do
        for ws in "$empty" "$tree"; do
          t=$(perf stat -x, -e task-clock "$b" run --workspace "$ws" -- true 2>&1 >/dev/null |
            awk -F, '/task-clock/ {print $1}')
          echo "$b $([ "$ws" = "$tree" ] && echo warm || echo empty) $t" >>"$tc"
        done
      done
    done
    for b in "${bins[@]}"; do
      calls() {
        strace -f -c -o "$tc.s" "$b" run --workspace "$1" -- true >/dev/null 2>&1
        awk '$NF == "total" {print $(NF-2)}' "$tc.s"
      }
      echo "$b syscalls $(calls "$empty") $(calls "$tree")" >>"$tc"
    done
    python3 - "$tc" <<'PY'
import statistics, sys
cpu, calls = {}, {}
for line in open(sys.argv[1]):
    b, what, *v = line.split()
    if what == "syscalls":
        calls[b] = v
    elif v:
        cpu.setdefault((b, what), []).append(float(v[0]))
for b in dict.fromkeys(k[0] for k in cpu):
    e, w = statistics.median(cpu[(b, "empty")]), statistics.median(cpu[(b, "warm")])
    ce, cw = calls.get(b, ["?", "?"])
    print(f"  {b}: task-clock empty {e:.2f} ms, warm {w:.2f} ms (+{w - e:.2f} ms); "
          f"syscalls empty {ce}, warm {cw}")
PY
    rm -f "$tc" "$tc.s"
  fi
  rm -rf "$tree" "$cache"
done
