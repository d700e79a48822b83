#!/usr/bin/env bash
# The floor under mediated creation (docs/benchmarks.md, "Mediated creation: tar"): µs per
# open(O_CREAT) of 20,000 files on a tmpfs, bare, with a seccomp notification answered
# "continue", with the least a safe mediator does, and with what stockade's init does for a
# dirfd-relative creation minus its rules (benches/notif_floor.c, modes 0-5). Medians of
# RUNS (default 9) runs per row, with and without SYNC_WAKE_UP. Needs cc. Not a test.
#
#   bash benches/notif_floor.sh          # a markdown table for docs/benchmarks.md
#   bash benches/notif_floor.sh --raw    # "<mode> <sync> <µs per file>" lines (benches/extract.sh)
#   CPU=1 bash benches/notif_floor.sh    # CPU time (user + system, both processes) per file
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-9}"
raw=""
[ "${1:-}" = --raw ] && raw=1
work="$(mktemp -d /dev/shm/stockade-floor.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/notif_floor" benches/notif_floor.c
mkdir "$work/d"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
if [ -z "$raw" ]; then
  echo "| row | µs per file (median of $runs) | extra vs bare |"
  echo "|---|---:|---:|"
fi
bare=""
for sync in "" 1; do
  for mode in 0 1 2 3 4 5; do
    [ "$mode" = 0 ] && [ -n "$sync" ] && continue
    t=$(for _ in $(seq "$runs"); do
      rm -rf "$work/d" && mkdir "$work/d"
      SYNC=$sync "$work/notif_floor" "$mode" "$work/d" 20000
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
    esac
    [ -n "$sync" ] && name="$name, SYNC_WAKE_UP"
    echo "| $name | $t | $(awk -v a="$t" -v b="$bare" 'BEGIN {printf "%+.1f", a - b}') |"
  done
done
