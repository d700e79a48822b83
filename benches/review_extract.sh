#!/usr/bin/env bash
# Creation under a review run's view (issue 32, item 2): `tar -xf` of 20,000 files (100 bytes
# each, 200 directories; the tree and the script of benches/extract.sh) into a workspace
# seen through `--review` or `--ephemeral`, against bwrap writing to the same kind of
# filesystem as the view's upper:
#  - tmpfs: the workspace on a tmpfs; `--ephemeral --disk 512m` and `--review --disk 512m`
#    put the upper on a tmpfs too; bwrap binds the tmpfs workspace;
#  - disk: the workspace on the disk (/var/tmp); the upper in the change store,
#    XDG_STATE_HOME on the same disk; bwrap binds the disk workspace.
# The mechanism's floor is beside them too: bwrap writing through an overlay mounted here
# the way stockade mounts the view (an empty lower of its own, upper on a tmpfs or the disk,
# redirect_dir=nofollow, metacopy=off, index=off): what the view costs with nothing of
# stockade around it (OVERLAY=0 leaves it out).
# A direct run of each binary is beside them (MODES). One hyperfine run per table, so the
# rows are measured side by side; REVERSE=1 lists them the other way round (run it both
# ways: a drift of the machine's load favours neither).
#
#   bash benches/review_extract.sh NEW_BINARY [PREVIOUS_BINARY ...]
#   RUNS (9), DISK_RUNS (3), FS ("tmpfs disk"), MODES ("ephemeral review direct"), REVERSE (0)
#
# Each run's change set is empty (the script removes what it extracted): nothing is kept.
# Run as root (the tmpfs is mounted here). Not a test: nothing here asserts a time.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-9}"
disk_runs="${DISK_RUNS:-3}"
filesystems="${FS:-tmpfs disk}"
modes="${MODES:-ephemeral review direct}"
reverse="${REVERSE:-0}"
overlay="${OVERLAY:-1}"
command -v hyperfine >/dev/null && command -v bwrap >/dev/null || {
  echo "benches/review_extract.sh: needs hyperfine and bwrap" >&2
  exit 1
}
(($# > 0)) || {
  echo "usage: bash benches/review_extract.sh NEW_BINARY [PREVIOUS_BINARY ...]" >&2
  exit 1
}
base="$(mktemp -d /var/tmp/stockade-review-extract.XXXXXX)"
chmod 755 "$base"
mkdir -p "$base/tmpfs" "$base/disk" "$base/state" "$base/uppers" "$base/ovl-tmpfs" "$base/ovl-disk"
mount -t tmpfs -o size=512m tmpfs "$base/tmpfs"
mount -t tmpfs -o size=512m tmpfs "$base/uppers"
mkdir -p "$base/uppers/l" "$base/uppers/u" "$base/uppers/w" "$base/state/ovl/l" "$base/state/ovl/u" "$base/state/ovl/w"
trap 'umount "$base/ovl-tmpfs" "$base/ovl-disk" "$base/uppers" "$base/tmpfs" 2>/dev/null; rm -rf "$base"' EXIT
chmod 755 "$base/tmpfs" "$base/disk"
export XDG_STATE_HOME="$base/state"
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
cat >"$base/x.sh" <<SH
d=\$(mktemp -d -p "\$1") && tar -xf "$base/tree.tar" -C "\$d" && rm -rf "\$d"
SH
opts=redirect_dir=nofollow,metacopy=off,index=off
mount -t overlay overlay -o "lowerdir=$base/uppers/l,upperdir=$base/uppers/u,workdir=$base/uppers/w,$opts" "$base/ovl-tmpfs"
mount -t overlay overlay -o "lowerdir=$base/state/ovl/l,upperdir=$base/state/ovl/u,workdir=$base/state/ovl/w,$opts" "$base/ovl-disk"
chmod 755 "$base/ovl-tmpfs" "$base/ovl-disk"
# The workspaces' ctimes settled (the sweep trusts directories changed more than 3 s ago).
sleep 4
for fs in $filesystems; do
  ws="$base/$fs"
  bound=""
  [ "$fs" = tmpfs ] && bound=" --disk 512m"
  rows=("bwrap, $fs" "bwrap --unshare-all --uid 1000 --gid 1000 --ro-bind / / --bind $ws $ws --dev /dev --proc /proc sh $base/x.sh $ws")
  o="$base/ovl-$fs"
  [ "$overlay" = 1 ] && rows+=("bwrap through an overlay, upper on $fs" "bwrap --unshare-all --uid 1000 --gid 1000 --ro-bind / / --bind $o $o --dev /dev --proc /proc sh $base/x.sh $o")
  for mode in $modes; do
    for bin in "$@"; do
      name="stockade $(basename "$(dirname "$bin")")/$(basename "$bin")"
      case $mode in
        direct) rows+=("$name, $fs" "$bin run --workspace $ws -- sh $base/x.sh $ws") ;;
        review | ephemeral) rows+=("$name --$mode$bound, $fs" "$bin run --$mode$bound --workspace $ws -- sh $base/x.sh $ws") ;;
        *)
          echo "benches/review_extract.sh: unknown mode $mode" >&2
          exit 1
          ;;
      esac
    done
  done
  args=()
  for ((i = 0; i < ${#rows[@]}; i += 2)); do
    if [ "$reverse" = 1 ]; then
      args=(-n "${rows[i]}" "${rows[i + 1]}" "${args[@]}")
    else
      args+=(-n "${rows[i]}" "${rows[i + 1]}")
    fi
  done
  n=$runs
  [ "$fs" = disk ] && n=$disk_runs
  hyperfine -N --warmup 1 --runs "$n" --export-json "$base/$fs.json" "${args[@]}" >&2
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
python3 - "$base" $filesystems <<'PY'
import json, os, sys
base, filesystems = sys.argv[1], sys.argv[2:]
print("| command | median (s) | σ (s) | ratio to bwrap (same fs) | extra per file vs bwrap (µs) |")
print("|---|---:|---:|---:|---:|")
for fs in filesystems:
    rows = json.load(open(os.path.join(base, f"{fs}.json")))["results"]
    bw = next(r for r in rows if r["command"] == f"bwrap, {fs}")["median"]
    for r in rows:
        m = r["median"]
        print(f"| {r['command']} | {m:.3f} | {r['stddev']:.3f} | {m / bw:.2f}× | {(m - bw) / 20000 * 1e6:+.0f} |")
PY
