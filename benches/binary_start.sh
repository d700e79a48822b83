#!/usr/bin/env bash
# What one start of the stockade binary costs, for two or more release builds side by side:
# size, relocations, the relocation table, page faults and user instructions of `--version`
# (the cheapest subcommand: exec, self-relocation of the static-pie, clap's command tree), and
# its time with hyperfine in both orders (min and p10: a deterministic start measured on a
# shared machine; medians move with the load).
#
#   bash benches/binary_start.sh NAME=PATH [NAME=PATH ...]
#
# `run -- true` execs the binary once (the supervisor); the init is a fork (clone without
# CLONE_VM) of the relocated supervisor, so it pays no second start. Every binary is copied
# into one directory and its page cache dropped and read back before measuring: a binary the
# linker has just written faults differently (other folio sizes) from one read back, which
# alone moved `--version` by about 10 page faults and 0.1 ms.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 NAME=PATH [NAME=PATH ...]" >&2; exit 2; }
for tool in hyperfine perf readelf python3; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
dir=$(mktemp -d /var/tmp/binary-start.XXXXXX)
trap 'rm -rf "$dir"' EXIT
names=()
for spec in "$@"; do
  name=${spec%%=*}
  install -m 755 "${spec#*=}" "$dir/$name"
  names+=("$name")
done
python3 - "$dir" "${names[@]}" <<'PY'
import os, sys
for n in sys.argv[2:]:
    p = os.path.join(sys.argv[1], n)
    fd = os.open(p, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    with open(p, "rb") as f:
        while f.read(1 << 20):
            pass
PY
echo "| binary | size (MB) | relative relocations | relocation table (KB) | .data.rel.ro (KB) | page faults of --version | user instructions of --version |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for n in "${names[@]}"; do
  b="$dir/$n"
  size=$(stat -c %s "$b")
  dyn=$(readelf -d "$b")
  relacount=$(awk '/RELACOUNT/ {print $3}' <<<"$dyn")
  relasz=$(awk '/\(RELASZ\)/ {print $3}' <<<"$dyn")
  relrsz=$(awk '/\(RELRSZ\)/ {print $3}' <<<"$dyn")
  relative=$(readelf -r "$b" | grep -c R_X86_64_RELATIVE || true)
  if [ -n "$relrsz" ]; then
    # binutils 2.40's readelf does not list RELR entries: count them (an even word is one
    # address, an odd word a bitmap of up to 63 more; the table is in the first segment, whose
    # file offsets are its addresses).
    relr=$(readelf -d "$b" | awk '/\(RELR\)/ {print $3}')
    relative="$(python3 - "$b" "$relr" "$relrsz" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
off, size = int(sys.argv[2], 16), int(sys.argv[3])
words = struct.unpack_from(f"<{size // 8}Q", data, off)
print(sum(1 if w & 1 == 0 else bin(w >> 1).count("1") for w in words), end="")
PY
) (RELR)"
  fi
  [ -n "$relacount$relrsz" ] || relative="none (static, not PIE)"
  drr=$(readelf -S -W "$b" | awk '$2 == ".data.rel.ro" {print $6}')
  faults=$(perf stat -r 50 -x, -e page-faults "$b" --version 2>&1 >/dev/null | awk -F, '/page-faults/ {print $1}')
  instr=-
  if command -v valgrind >/dev/null; then
    instr=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$b" --version 2>&1 >/dev/null |
      awk '/Collected/ {print $4}')
  fi
  printf '| %s | %.2f | %s | %.1f | %.0f | %s | %s |\n' "$n" "$(echo "$size / 1000000" | bc -l)" \
    "$relative" "$(echo "(${relasz:-0} + ${relrsz:-0}) / 1024" | bc -l)" "$(echo "$((16#${drr:-0})) / 1024" | bc -l)" \
    "$faults" "$instr"
done
for order in forward reverse; do
  args=()
  list=("${names[@]}")
  if [ "$order" = reverse ]; then
    list=()
    for ((i = ${#names[@]} - 1; i >= 0; i--)); do list+=("${names[i]}"); done
  fi
  for n in "${list[@]}"; do args+=(-n "$n" "$dir/$n --version"); done
  hyperfine -N --warmup 50 --runs 1000 --export-json "$dir/$order.json" "${args[@]}" >/dev/null 2>&1
  python3 - "$dir/$order.json" "$order" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    t = sorted(r["times"])
    print(f"{sys.argv[2]}: {r['command']}: min {t[0]*1e3:.3f} ms, p10 {t[len(t)//10]*1e3:.3f} ms, median {r['median']*1e3:.3f} ms")
PY
done
