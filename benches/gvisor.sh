#!/usr/bin/env bash
# The gVisor backend's start-up cost beside its anchor, in one run on this machine:
# `runsc do true` (gVisor alone, ptrace platform) against `stockade run --backend gvisor --
# true` (the same plus stockade's plan, bundle, checks, relays and sweep), with the native
# backend's `stockade run -- true` for scale. Optionally (OLD=<stockade binary>) the gVisor and
# native runs of an earlier build beside this one (the previous binary beside the new one).
#
#   bash benches/gvisor.sh                 # prints a markdown table of medians and ratios
#   OLD=/path/to/old/stockade bash benches/gvisor.sh
#
# Not a test: nothing here asserts a time.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-40}"
command -v hyperfine >/dev/null || { echo "benches/gvisor.sh: needs hyperfine (apt-get install hyperfine)" >&2; exit 1; }
runsc=/usr/bin/runsc
[ -x "$runsc" ] || { echo "benches/gvisor.sh: needs runsc (apt-get install runsc)" >&2; exit 1; }
bin=${BIN:-$(cargo build --release -q -p stockade-cli --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "stockade" and msg.get("executable"):
        print(msg["executable"])
')}
ws="$(mktemp -d /var/tmp/stockade-bench-gvisor.XXXXXX)"
# A git workspace too (a clone's shape: one commit), beside the empty one (inside it, its git
# dir would be staged in every row): the gVisor backend stages a git dir's top level for each
# run (crates/gvisor/src/gitstage.rs).
git_ws="$(mktemp -d /var/tmp/stockade-bench-gvisor-git.XXXXXX)"
trap 'rm -rf "$ws" "$git_ws"' EXIT
chmod 755 "$ws" "$git_ws"
git -C "$git_ws" init -q
printf 'x\n' >"$git_ws/file"
git -C "$git_ws" add file
git -C "$git_ws" -c user.name=b -c user.email=b@example.com commit -qm one
cd "$ws"
# The platform stockade chose (cached on the first run).
"$bin" run --backend gvisor -- true </dev/zero | cat
platform=$("$bin" doctor --backend gvisor --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print([c["detail"] for c in d["checks"] if c["name"]=="runsc runs a command"][0].split("=")[1].split(" ")[0].rstrip("`"))')
# runsc started as root gives its standard streams to `nobody`: hyperfine's /dev/null must
# never be one of them. Every row runs the same way, its streams pipes: `: | CMD 2>&1 | cat`.
piped() { printf "sh -c ': | %s 2>&1 | cat'" "$1"; }
args=(
  -n "runsc do true ($platform)" "$(piped "$runsc --network=none --platform=$platform do true")"
  -n "stockade run --backend gvisor -- true" "$(piped "$bin run --backend gvisor -- true")"
  -n "stockade run --backend gvisor -- true (git workspace)" "$(piped "$bin run --backend gvisor --workspace $git_ws -- true")"
  -n "stockade run -- true (native)" "$(piped "$bin run -- true")"
)
if [ -n "${OLD:-}" ]; then
  args+=(-n "stockade run --backend gvisor -- true ($OLD)" "$(piped "$OLD run --backend gvisor -- true")")
  args+=(-n "stockade run --backend gvisor -- true (git workspace, $OLD)" "$(piped "$OLD run --backend gvisor --workspace $git_ws -- true")")
  args+=(-n "stockade run -- true (native, $OLD)" "$(piped "$OLD run -- true")")
fi
hyperfine -N --warmup 3 --runs "$runs" --export-json "$ws/result.json" "${args[@]}" >&2
python3 - "$ws/result.json" <<'PY'
import json, sys
rs = json.load(open(sys.argv[1]))["results"]
base = rs[0]["median"]
print("| command | median | vs runsc do true |")
print("|---|---|---|")
for r in rs:
    print(f"| {r['command']} | {r['median']*1000:.1f} ms | {r['median']/base:.2f}x |")
PY
