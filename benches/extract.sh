#!/usr/bin/env bash
# The cost of mediated creation on a real workload: a tarball of 20,000 files in 200
# directories (100 bytes each) extracted with `tar -xf` into a workspace on tmpfs and on the
# disk (/var/tmp), bare, under bwrap with an equivalent writable bind (the command's uid 1000,
# so tar behaves the same: no chown, no chmod per file) and under `stockade run`. Prints a
# markdown table for docs/benchmarks.md ("Mediated creation: tar").
#
#   bash benches/extract.sh [stockade binary ...]   # default: cargo build --release -p stockade-cli
#
# Run as root (the tmpfs is mounted for the run). Not a test: nothing here asserts a time.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-10}"
disk_runs="${DISK_RUNS:-$runs}"
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
trap 'umount "$base/tmpfs" 2>/dev/null; rm -rf "$base"' EXIT
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
for fs in tmpfs disk; do
  ws="$base/$fs"
  args=(-n "bare, $fs" "sh $base/x.sh $ws"
    -n "bwrap, $fs" "bwrap --unshare-all --uid 1000 --gid 1000 --ro-bind / / --bind $ws $ws --dev /dev --proc /proc sh $base/x.sh $ws")
  for bin in "$@"; do
    args+=(-n "stockade $(basename "$bin"), $fs" "$bin run --workspace $ws -- sh $base/x.sh $ws")
  done
  n=$runs; [ "$fs" = disk ] && n=$disk_runs
  hyperfine -N --warmup 1 --runs "$n" --export-json "$base/$fs.json" "${args[@]}" >&2
done
python3 - "$base/tmpfs.json" "$base/disk.json" <<'PY'
import json, sys
print("| command | median (s) | σ (s) | ratio to bwrap | extra per file vs bwrap (µs) |")
print("|---|---:|---:|---:|---:|")
for f in sys.argv[1:]:
    rows = json.load(open(f))["results"]
    bw = next(r for r in rows if r["command"].startswith("bwrap"))["median"]
    for r in rows:
        m = r["median"]
        print(f"| {r['command']} | {m:.3f} | {r['stddev']:.3f} | {m / bw:.2f}× | {(m - bw) / 20000 * 1e6:+.0f} |")
PY
