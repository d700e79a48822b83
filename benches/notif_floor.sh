#!/usr/bin/env bash
# The floor under mediated creation (docs/benchmarks.md, "Mediated creation, direct mode"): µs per
# open(O_CREAT) of 20,000 files on a tmpfs, bare, with a seccomp notification answered
# "continue", with the least a safe mediator does, and with what stockade's init does for a
# dirfd-relative creation minus its rules (benches/notif_floor.c, modes 0-5). Medians of
# RUNS (default 9) runs per row, with and without SYNC_WAKE_UP. Needs cc. Not a test.
#
# With STOCKADE=<a stockade binary> (as root), also the fair floor's modes 6-8, with
# SYNC_WAKE_UP: mode 5 with the child under that binary's own seccomp program (222
# instructions at daed243), + the child in a Landlock domain of its default run's shape (the
# plan's rules, the domain taken twice as the command's is), + the supervisor in the outer
# domain (as stockade's init is), + paths with directories made the careful way (mode 9: the
# same as 8 for this loop, whose names are single; it differs under benches/extract.sh's tar).
# Their files come from a real run (see --fair below).
#
#   bash benches/notif_floor.sh          # a markdown table for docs/benchmarks.md
#   bash benches/notif_floor.sh --raw    # "<mode> <sync> <µs per file>" lines (benches/extract.sh)
#   CPU=1 bash benches/notif_floor.sh    # CPU time (user + system, both processes) per file
#   bash benches/notif_floor.sh --fair BIN DIR OUT   # (root) prepare the fair floor in OUT:
#       OUT/notif_floor built; OUT/filter.bpf the seccomp program of a real `BIN run`'s command
#       (dumped from the running command by PTRACE_SECCOMP_GET_FILTER); OUT/landlock.rules
#       the Landlock rules of BIN's default plan (`policy show --json`: host rules, then the
#       init's), the workspace's rule moved to DIR (benches/extract.sh uses this)
set -euo pipefail
cd "$(dirname "$0")/.."

# --fair BIN DIR OUT: see above.
fair() {
  local bin=$1 dir=$2 out=$3 planws tag run pid p
  cc -O2 -o "$out/notif_floor" benches/notif_floor.c
  planws="$(mktemp -d /var/tmp/stockade-floor-plan.XXXXXX)"
  (cd "$planws" && "$bin" policy show --json --workspace "$planws") >"$out/plan.json"
  python3 - "$out/plan.json" "$planws" "$dir" >"$out/landlock.rules" <<'PY'
import json, sys
plan, ws, dir_ = json.load(open(sys.argv[1]))["plan"]["landlock"], sys.argv[2], sys.argv[3]
# The bits of each kind of rule, as crates/native/src/launch.rs's access_bits (the program
# masks them with the rights the kernel's ABI handles, as stockade does).
X, W, R, D, T, I = 1, 2, 4, 8, 1 << 14, 1 << 15
bits = {"read": X | R | D, "list": D, "full": (1 << 64) - 1, "device": R | W | T | I | D,
        "read_write_files": X | R | D | W | T}
for rule in plan["host_rules"] + plan["child_rules"]:
    b = bits[rule["access"]]
    if not rule["dir"]:
        b &= X | W | R | T | I
    print(hex(b), dir_ if rule["path"] == ws else rule["path"])
PY
  # A real run whose command waits, found by its unique argument among the host's tasks.
  tag="1000.$$$RANDOM"
  "$bin" run --workspace "$planws" -- sleep "$tag" </dev/null >/dev/null 2>&1 &
  run=$!
  pid=""
  for _ in $(seq 200); do
    for p in /proc/[0-9]*; do
      [ "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" = "sleep $tag " ] && pid=${p#/proc/} && break 2
    done
    sleep 0.05
  done
  [ -n "$pid" ] || { echo "notif_floor.sh: the run's command was not seen" >&2; exit 1; }
  "$out/notif_floor" dump "$pid" >"$out/filter.bpf" 2>"$out/filter.txt"
  kill "$pid"
  wait "$run" || true
  rmdir "$planws"
  echo "notif_floor.sh: $(cat "$out/filter.txt"); $(wc -l <"$out/landlock.rules") Landlock rules" >&2
}
if [ "${1:-}" = --fair ]; then
  fair "$2" "$3" "$4"
  exit 0
fi

runs="${RUNS:-9}"
raw=""
[ "${1:-}" = --raw ] && raw=1
work="$(mktemp -d /dev/shm/stockade-floor.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/notif_floor" benches/notif_floor.c
mkdir "$work/d"
fair_modes=""
if [ -n "${STOCKADE:-}" ]; then
  fair "$STOCKADE" "$work/d" "$work"
  fair_modes="6 7 8 9"
fi
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
if [ -z "$raw" ]; then
  echo "| row | µs per file (median of $runs) | extra vs bare |"
  echo "|---|---:|---:|"
fi
bare=""
for sync in "" 1; do
  for mode in 0 1 2 3 4 5 $fair_modes; do
    [ "$mode" = 0 ] && [ -n "$sync" ] && continue
    [ "$mode" -ge 6 ] && [ -z "$sync" ] && continue
    t=$(for _ in $(seq "$runs"); do
      rm -rf "$work/d" && mkdir "$work/d"
      SYNC=$sync FILTER="$work/filter.bpf" LANDLOCK="$work/landlock.rules" "$work/notif_floor" "$mode" "$work/d" 20000
    done | median)
    [ "$mode" = 0 ] && bare=$t
    if [ -n "$raw" ]; then
      echo "$mode ${sync:-0} $t"
      continue
    fi
    case $mode in
      0) name="bare" ;;
      1) name="notification answered \"continue\"" ;;
      2) name="notification, the open made by the supervisor" ;;
      3) name="the same, the path read by process_vm_readv + ID_VALID" ;;
      4) name="the same, with a poll of the listener and the child's pidfd before each RECV" ;;
      5) name="the same relative to the child's dirfd: pidfd_getfd, fchdir + getcwd, openat2" ;;
      6) name="the same, the child under stockade's seccomp program" ;;
      7) name="the same, the child in a Landlock domain of a default run's shape (two layers)" ;;
      8) name="the same, the supervisor in the outer layer (as stockade's init)" ;;
      9) name="the same, a path with directories the careful way (none here: the loop's names are single)" ;;
    esac
    [ -n "$sync" ] && name="$name, SYNC_WAKE_UP"
    echo "| $name | $t | $(awk -v a="$t" -v b="$bare" 'BEGIN {printf "%+.1f", a - b}') |"
  done
done
