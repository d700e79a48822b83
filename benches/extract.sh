#!/usr/bin/env bash
# The cost of mediated creation on a real workload: a tarball of 20,000 files in 200
# directories (100 bytes each) extracted with `tar -xf` into a workspace on tmpfs and on the
# disk (/var/tmp), bare, under bwrap with an equivalent writable bind (the command's uid 1000,
# so tar behaves the same: no chown, no chmod per file) and under `stockade run`. Prints a
# markdown table for docs/benchmarks.md ("Mediated creation, direct mode").
#
#   bash benches/extract.sh [stockade binary ...]   # default: cargo build --release -p stockade-cli
#
# On tmpfs each stockade row also gets its extra cost per file over bwrap as a ratio to the
# floor (benches/notif_floor.sh: a notification whose open the supervisor makes, extra over a
# bare open), measured in the same run just before and just after the tmpfs rows.
#
# The fair floor (FAIR=1, the default with the floor): the same extraction run by
# benches/notif_floor.c's supervisor instead of stockade, in the same hyperfine run as the
# tmpfs rows, each layer a row of its own (all in a user namespace as uid 1000, like bwrap's
# row, SYNC_WAKE_UP): mode 0 (no filter: the baseline of the floor's rows), mode 5 (the
# design's calls without rules: the old floor), 6 (+ the first binary's own seccomp program
# on the command), 7 (+ a Landlock domain of its default run's shape on the command, two
# layers), 8 (+ the supervisor in the outer layer, as stockade's init: the fair floor), 9 (+ a
# path with directories made the careful way, stockade's 13 calls for tar's creations). Each
# stockade row's extra over bwrap is divided by the floor rows' extra over mode 0, in CPU
# time and in wall time (medians). Needs unshare.
#
# CPU time: every row runs under `perf stat -e task-clock` (when perf works here), whose
# count covers every task the row starts; hyperfine's user + system (wait4's rusage, used
# without perf) miss what a command does not reap itself, and bwrap's sandbox is that: its
# row showed about 0 s of CPU for a whole extraction, so "CPU extra over bwrap" counted
# tar's and rm's own CPU as stockade's (before 2026-11-29: docs/benchmarks.md).
# The environment:
#   RUNS (10), DISK_RUNS (RUNS)  runs per row;  FLOOR_RUNS (9) runs per floor row
#   FS="tmpfs disk"              which filesystems (FS=tmpfs: the extraction on tmpfs only)
#   ROUNDS (1)                   repeat floor + tmpfs rows, every other round in reverse order
#   FLOOR=0                      no floor (and no ratio to it)
#   FAIR=0                       not the fair floor's rows (FLOOR=0 FAIR=1: only them)
#   KEEP=DIR                     keep hyperfine's JSON and the CPU counts there
#
# Run as root (the tmpfs is mounted for the run). Not a test: nothing here asserts a time.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-10}"
disk_runs="${DISK_RUNS:-$runs}"
floor_runs="${FLOOR_RUNS:-9}"
filesystems="${FS:-tmpfs disk}"
rounds="${ROUNDS:-1}"
floor="${FLOOR:-1}"
fair="${FAIR:-$floor}"
cpu_perf=0
command -v perf >/dev/null && perf stat -e task-clock true 2>/dev/null && cpu_perf=1
command -v hyperfine >/dev/null && command -v bwrap >/dev/null || {
  echo "benches/extract.sh: needs hyperfine and bwrap" >&2
  exit 1
}
if (($# == 0)); then
  cargo build --release -q -p stockade-cli
  set -- "$PWD/target/x86_64-unknown-linux-gnu/release/stockade"
fi
base="$(mktemp -d /var/tmp/stockade-extract.XXXXXX)"
chmod 755 "$base"
mkdir -p "$base/tmpfs" "$base/disk"
mount -t tmpfs -o size=512m tmpfs "$base/tmpfs"
trap 'umount "$base/tmpfs" 2>/dev/null || true; { [ -z "${KEEP:-}" ] || { mkdir -p "$KEEP" && cp "$base"/*.json "$base"/cpu.* "$base"/floor* "$KEEP"/; }; } 2>/dev/null || true; rm -rf "$base"' EXIT
chmod 755 "$base/tmpfs" "$base/disk"
python3 - "$base/src/tree" <<'PY'
import os, sys
for d in range(200):
    p = os.path.join(sys.argv[1], f"d{d // 20}", f"e{d}")
    os.makedirs(p)
    for f in range(100):
        with open(os.path.join(p, f"f{f}.txt"), "w") as fh:
            fh.write("x" * 99 + "\n")
PY
tar -cf "$base/tree.tar" -C "$base/src" tree
# One run: a fresh directory (one mediated mkdir), the extraction, the removal (unlink and
# rmdir are not mediated: the same for all rows).
cat >"$base/x.sh" <<SH
d=\$(mktemp -d -p "\$1") && tar -xf "$base/tree.tar" -C "\$d" && rm -rf "\$d"
SH
if [ "$fair" = 1 ]; then
  # The fair floor's program, the first binary's seccomp program and its plan's Landlock rules.
  mkdir "$base/fair"
  bash benches/notif_floor.sh --fair "$1" "$base/tmpfs" "$base/fair"
fi
floor() { # "<mode> <sync> <µs>" lines for the floor's rows, once (wall, then CPU time)
  RUNS=$floor_runs bash benches/notif_floor.sh --raw >>"$base/floor.$1" ||
    echo "benches/extract.sh: notif_floor.sh failed (round $1)" >&2
  CPU=1 RUNS=$floor_runs bash benches/notif_floor.sh --raw >>"$base/floorcpu.$1" ||
    echo "benches/extract.sh: notif_floor.sh failed (round $1)" >&2
}
for round in $(seq "$rounds"); do
  for fs in $filesystems; do
    [ "$fs" = disk ] && [ "$round" -gt 1 ] && continue
    ws="$base/$fs"
    rows=("bwrap, $fs" "bwrap --unshare-all --uid 1000 --gid 1000 --ro-bind / / --bind $ws $ws --dev /dev --proc /proc sh $base/x.sh $ws")
    [ "$round" = 1 ] && rows=("bare, $fs" "sh $base/x.sh $ws" "${rows[@]}")
    if [ "$fs" = tmpfs ] && [ "$fair" = 1 ]; then
      for mode in 0 5 6 7 8 9; do
        rows+=("floor mode $mode, $fs" "unshare --map-user=1000 --map-group=1000 env SYNC=1 FILTER=$base/fair/filter.bpf LANDLOCK=$base/fair/landlock.rules $base/fair/notif_floor $mode $ws 0 sh $base/x.sh $ws")
      done
    fi
    for bin in "$@"; do
      rows+=("stockade $(basename "$(dirname "$bin")")/$(basename "$bin"), $fs" "$bin run --workspace $ws -- sh $base/x.sh $ws")
    done
    args=()
    for ((i = 0; i < ${#rows[@]}; i += 2)); do
      # The CPU time of every task the row starts, by perf stat (task-clock, inherited by
      # every descendant): hyperfine's user + system come from wait4's rusage, which misses
      # whatever its command does not reap itself (bwrap's sandbox: about 0 s of CPU for a
      # whole extraction).
      if [ "$cpu_perf" = 1 ]; then
        out="$base/cpu.$fs.$round.$((i / 2))"
        echo "${rows[i]}" >"$out.name"
        rows[i + 1]="perf stat -x, -e task-clock --append -o $out -- ${rows[i + 1]}"
      fi
      # Every other round the other way round: a drift in the machine's load favours neither.
      if ((round % 2 == 0)); then
        args=(-n "${rows[i]}" "${rows[i + 1]}" "${args[@]}")
      else
        args+=(-n "${rows[i]}" "${rows[i + 1]}")
      fi
    done
    n=$runs; [ "$fs" = disk ] && n=$disk_runs
    [ "$fs" = tmpfs ] && [ "$floor" = 1 ] && floor "$round"
    hyperfine -N --warmup 1 --runs "$n" --export-json "$base/$fs.$round.json" "${args[@]}" >&2
    [ "$fs" = tmpfs ] && [ "$floor" = 1 ] && floor "$round"
  done
done
python3 - "$base" "$rounds" "$floor" "$fair" $filesystems <<'PY'
import json, os, statistics, sys
base, rounds, floor, fair, filesystems = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1", sys.argv[5:]
def floor_of(r, name="floor"):
    """Extras over bare in µs of mode 2, mode 2 with SYNC_WAKE_UP, and modes 3, 4 and 5 with it:
    medians of the floor's runs before and after the tmpfs rows of round r."""
    rows = {}
    for line in open(os.path.join(base, f"{name}.{r}")):
        mode, sync, us = line.split()
        rows.setdefault((mode, sync), []).append(float(us))
    m = {k: statistics.median(v) for k, v in rows.items()}
    for mode in "02345":
        for sync in "01":
            m.setdefault((mode, sync), float("nan"))  # a failed notif_floor.sh
    bare = m[("0", "0")]
    return (m[("2", "0")] - bare, m[("2", "1")] - bare, m[("3", "1")] - bare,
            m[("4", "1")] - bare, m[("5", "1")] - bare)
def cpu_of(fs, r, rows, name):
    """CPU seconds of the row whose name starts with `name` in round r: the median of perf
    stat's task-clock over its runs (the warm-up left out), else hyperfine's user + system
    (means; they miss what a command does not reap itself)."""
    i = 0
    while os.path.exists(os.path.join(base, f"cpu.{fs}.{r}.{i}.name")):
        if open(os.path.join(base, f"cpu.{fs}.{r}.{i}.name")).read().startswith(name):
            ms = [float(l.split(",")[0]) for l in open(os.path.join(base, f"cpu.{fs}.{r}.{i}"))
                  if ",task-clock" in l]
            return statistics.median(ms[1:] or ms) / 1000
        i += 1
    x = next(x for x in rows if x["command"].startswith(name))
    return x["user"] + x["system"]
print("| round | command | median (s) | σ (s) | ratio to bwrap | extra per file vs bwrap (µs) | ratio to the floor (SYNC_WAKE_UP floor; notif_floor's mode 5: the design's calls without rules) |")
print("|---|---|---:|---:|---:|---:|---:|")
for fs in filesystems:
    for r in range(1, rounds + 1):
        path = os.path.join(base, f"{fs}.{r}.json")
        if not os.path.exists(path):
            continue
        rows = json.load(open(path))["results"]
        bw = next(x for x in rows if x["command"].startswith("bwrap"))["median"]
        fl = floor_of(r) if floor and fs == "tmpfs" else None
        for x in rows:
            m = x["median"]
            extra = (m - bw) / 20000 * 1e6
            ratio = ""
            if fl and x["command"].startswith("stockade"):
                ratio = f"{extra / fl[0]:.2f}× ({extra / fl[1]:.2f}× SYNC; {extra / fl[4]:.2f}× mode 5)"
            print(f"| {r} | {x['command']} | {m:.3f} | {x['stddev']:.3f} | {m / bw:.2f}× | {extra:+.0f} | {ratio} |")
        if fl:
            # CPU time (less swayed by the machine's other load than the wall clock).
            fc = floor_of(r, "floorcpu")
            bwc = cpu_of(fs, r, rows, "bwrap")
            for x in rows:
                if x["command"].startswith("stockade"):
                    c = cpu_of(fs, r, rows, x["command"])
                    e = (c - bwc) / 20000 * 1e6
                    print(f"| {r} | CPU time: {x['command']} | {c:.3f} | | | {e:+.0f} | {e / fc[1]:.2f}× SYNC floor; {e / fc[4]:.2f}× mode 5 |")
            print(f"| {r} | CPU time: floor (as below) | | | | {fc[0]:+.0f}; {fc[1]:+.0f}; {fc[2]:+.0f}; {fc[3]:+.0f}; {fc[4]:+.0f} | 1.00× |")
            print(f"| {r} | floor (notif_floor.sh, extra over bare: open by the supervisor; with SYNC_WAKE_UP; process_vm_readv + ID_VALID, SYNC; + poll; + dirfd by pidfd_getfd, getcwd, openat2) | | | | {fl[0]:+.0f}; {fl[1]:+.0f}; {fl[2]:+.0f}; {fl[3]:+.0f}; {fl[4]:+.0f} | 1.00× |")
if fair and "tmpfs" in filesystems:
    # The fair floor: per round, extra µs per created file of each stockade row over bwrap,
    # of each floor row over the floor's mode 0, and their ratios (CPU time; wall time).
    # The CPU time of bwrap and of mode 0 side by side first: the two baselines.
    print()
    print("| round | row | CPU extra per file (µs) | wall extra per file (µs) | stockade ÷ mode 5 (CPU; wall) | stockade ÷ mode 8, the fair floor (CPU; wall) | stockade ÷ mode 9, its calls (CPU; wall) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in range(1, rounds + 1):
        path = os.path.join(base, f"tmpfs.{r}.json")
        if not os.path.exists(path):
            continue
        rows = {x["command"]: x for x in json.load(open(path))["results"]}
        name = lambda x: next(k for k in rows if k.startswith(x))
        cpu = lambda x: cpu_of("tmpfs", r, list(rows.values()), x)
        per = lambda a, b: (a - b) / 20000 * 1e6
        floors = {int(k.split()[2].rstrip(",")): k for k in rows if k.startswith("floor mode ")}
        bw = name("bwrap")
        extra = {m: (per(cpu(k), cpu(floors[0])), per(rows[k]["median"], rows[floors[0]]["median"]))
                 for m, k in floors.items()}
        print(f"| {r} | CPU of the baselines, bwrap; floor mode 0 (s) | {cpu(bw):.3f}; {cpu(floors[0]):.3f} | | | | |")
        for m in sorted(extra):
            if m:
                print(f"| {r} | floor mode {m} | {extra[m][0]:+.1f} | {extra[m][1]:+.1f} | | | |")
        for k in rows:
            if k.startswith("stockade"):
                e = (per(cpu(k), cpu(bw)), per(rows[k]["median"], rows[bw]["median"]))
                print(f"| {r} | {k} | {e[0]:+.1f} | {e[1]:+.1f} | "
                      + " | ".join(f"{e[0] / extra[m][0]:.2f}×; {e[1] / extra[m][1]:.2f}×" for m in (5, 8, 9)) + " |")
PY
