#!/usr/bin/env bash
# The cost of judging write-opens (issue 32, sixth round): since then the native creation
# guard also mediates opening an existing file for writing (`O_WRONLY`, `O_RDWR`, `O_TRUNC`),
# so that a protected file someone else makes during a run is not written by it. A small C
# program opens each of 2,000 existing files (on tmpfs) for writing and closes it, 5 times:
# 10,000 write-opens. The same program with read-only opens is the control (mediated by
# neither binary). Rows: bwrap with an equivalent writable bind, and each stockade binary
# given (e.g. the previous commit's beside the new one). Prints hyperfine's table and the
# extra per write-open over bwrap, in CPU time (`perf stat -e task-clock`, every task of the
# row) and wall time (medians), and that extra's ratio to the floor of a mediated open measured
# just before and just after the rows (benches/notif_floor.sh's "the open made by the
# supervisor", SYNC_WAKE_UP, over a bare open; FLOOR=0 leaves it out): what any mediator that
# makes the open itself pays per call here.
#
#   bash benches/write_open.sh NEW [PREVIOUS ...]
#
#   RUNS (10)  runs per row
#
# Run as root (the tmpfs is mounted for the run). Not a test: nothing here asserts a time.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-10}"
command -v hyperfine >/dev/null && command -v bwrap >/dev/null && command -v cc >/dev/null || {
  echo "benches/write_open.sh: needs hyperfine, bwrap and cc" >&2
  exit 1
}
(($# > 0)) || {
  echo "usage: bash benches/write_open.sh NEW [PREVIOUS ...]" >&2
  exit 2
}
base="$(mktemp -d /var/tmp/stockade-write-open.XXXXXX)"
chmod 755 "$base"
trap 'umount -l "$base/ws" 2>/dev/null || true; rm -rf "$base"' EXIT
mkdir "$base/ws"
mount -t tmpfs -o size=64m,mode=0777 tmpfs "$base/ws"
ws="$base/ws"
cat > "$base/opens.c" <<'EOF'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
/* opens [w|r] N ROUNDS: opens f0..f(N-1) of the cwd N*ROUNDS times, for writing or reading. */
int main(int argc, char **argv) {
    int flags = argv[1][0] == 'w' ? O_WRONLY | O_APPEND : O_RDONLY;
    int n = atoi(argv[2]), rounds = atoi(argv[3]);
    char name[32];
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n; i++) {
            snprintf(name, sizeof name, "f%d", i);
            int fd = open(name, flags);
            if (fd < 0) { perror(name); return 1; }
            close(fd);
        }
    return 0;
}
EOF
cc -O2 -o "$base/opens" "$base/opens.c"
n=2000
rounds=5
(cd "$ws" && for i in $(seq 0 $((n - 1))); do : > "f$i"; done)
cpu_perf=0
command -v perf >/dev/null && perf stat -e task-clock true 2>/dev/null && cpu_perf=1
names=()
cmds=()
for mode in w r; do
  names+=("bwrap, $mode")
  cmds+=("bwrap --unshare-all --uid 1000 --gid 1000 --ro-bind / / --bind $ws $ws --dev /dev --proc /proc --chdir $ws $base/opens $mode $n $rounds")
  for bin in "$@"; do
    names+=("$bin, $mode")
    cmds+=("$bin run --workspace $ws -- $base/opens $mode $n $rounds")
  done
done
args=()
for i in "${!cmds[@]}"; do
  c="${cmds[$i]}"
  ((cpu_perf)) && c="perf stat -x, -e task-clock -o $base/cpu.$i.\$\$ -- $c"
  args+=(-n "${names[$i]}" "sh -c '$c'")
done
floor() { # "<mode> <sync> <µs>" lines of notif_floor.sh, wall then CPU time
  [ "${FLOOR:-1}" = 0 ] && return
  RUNS=5 bash benches/notif_floor.sh --raw >>"$base/floor" || echo "write_open.sh: notif_floor.sh failed" >&2
  CPU=1 RUNS=5 bash benches/notif_floor.sh --raw >>"$base/floorcpu" || echo "write_open.sh: notif_floor.sh failed" >&2
}
floor
(cd "$ws" && hyperfine -N -w 2 -r "$runs" --export-json "$base/h.json" "${args[@]}" >/dev/null)
floor
python3 - "$base" "$n" "$rounds" "$cpu_perf" "${names[@]}" <<'EOF'
import glob, json, os, statistics, sys
base, n, rounds, cpu_perf = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
names = sys.argv[5:]
def floor_of(path):
    # mode 2 with SYNC_WAKE_UP over mode 0, the median of the before and after measurements
    if not os.path.exists(path):
        return None
    got = {}
    for line in open(path):
        mode, sync, t = line.split()
        got.setdefault((mode, sync), []).append(float(t))
    if ("2", "1") not in got or ("0", "0") not in got:
        return None
    return statistics.median(got[("2", "1")]) - statistics.median(got[("0", "0")])
fw, fc = floor_of(f"{base}/floor"), floor_of(f"{base}/floorcpu")
res = json.load(open(f"{base}/h.json"))["results"]
opens = n * rounds
def cpu(i):
    vals = []
    for f in glob.glob(f"{base}/cpu.{i}.*"):
        for line in open(f):
            parts = line.split(",")
            if len(parts) > 2 and parts[2].startswith("task-clock"):
                vals.append(float(parts[0]) / 1000)
    return statistics.median(vals) if vals else None
rows = {names[i]: (statistics.median(r["times"]), cpu(i) if cpu_perf else None) for i, r in enumerate(res)}
print(f"| row ({opens} opens) | wall, median | CPU, median | extra per open over bwrap: wall | CPU | ÷ the floor: wall | CPU |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, (wall, c) in rows.items():
    mode = name.rsplit(", ", 1)[1]
    bw_wall, bw_cpu = rows[f"bwrap, {mode}"]
    ew = (wall - bw_wall) / opens * 1e6
    ec = (c - bw_cpu) / opens * 1e6 if c is not None and bw_cpu is not None else float("nan")
    cs = f"{c * 1000:.1f} ms" if c is not None else "n/a"
    rw = f"{ew / fw:.2f}×" if fw and mode == "w" and not name.startswith("bwrap") else ""
    rc = f"{ec / fc:.2f}×" if fc and mode == "w" and not name.startswith("bwrap") else ""
    print(f"| {name} | {wall * 1000:.1f} ms | {cs} | {ew:+.1f} µs | {ec:+.1f} µs | {rw} | {rc} |")
if fw is not None:
    print(f"| the floor: a notification whose open the supervisor makes, SYNC_WAKE_UP, over a bare open | | | {fw:+.1f} µs | {fc:+.1f} µs | 1.00× | 1.00× |" if fc is not None else f"| the floor | | | {fw:+.1f} µs | | 1.00× | |")
EOF
