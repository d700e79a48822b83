#!/usr/bin/env bash
# The container backends' start-up cost beside their anchors, in one run on this machine: the
# bare `ENGINE run` of the same image with the same flags (the arguments stockade gave, from a
# run record, with `true` as the command instead of stockade's check script) against
# `stockade run --backend ENGINE -- true` (the same plus stockade's plan, the image lookup, the
# check script read back inside, relays and sweep), for Podman and Docker, with the native
# backend's `stockade run -- true` for scale. Optionally (OLD=<stockade binary>) the runs of an
# earlier build beside this one's. The bare run keeps the container's init when stockade's run
# has one (`/run/stockade-init -- true`).
#
#   bash benches/containers.sh             # prints a markdown table of medians and ratios
#
# As root the workspace belongs to `stockade-test` (a root caller's command runs as the
# workspace's owner). Not a test: nothing here asserts a time.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-30}"
command -v hyperfine >/dev/null || { echo "benches/containers.sh: needs hyperfine (apt-get install hyperfine)" >&2; exit 1; }
bin=${BIN:-$(cargo build --release -q -p stockade-cli --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "stockade" and msg.get("executable"):
        print(msg["executable"])
')}
ws="$(mktemp -d /var/tmp/stockade-bench-containers.XXXXXX)"
trap 'rm -rf "$ws"' EXIT
chmod 755 "$ws"
mkdir "$ws/ws" "$ws/masks"
: >"$ws/masks/empty"
: >"$ws/masks/unreadable"
chmod 444 "$ws/masks/empty"
chmod 000 "$ws/masks/unreadable"
# The run's gate (bound at /run/stockade under --net none and proxy): the bare run mounts an
# empty directory there (nothing waits at it without stockade's check).
mkdir -p "$ws/masks/proxy/gate"
# The bare runs' environment file (empty) and seccomp profile: the run's own are gone with it;
# Podman's default profile stands in (a profile of the same kind, larger than stockade's).
: >"$ws/masks/env"
cp /usr/share/containers/seccomp.json "$ws/masks/seccomp.json" 2>/dev/null ||
  { echo "benches/containers.sh: needs /usr/share/containers/seccomp.json (apt-get install podman)" >&2; exit 1; }
if [ "$(id -u)" = 0 ]; then chown -R stockade-test: "$ws/ws"; fi
cd "$ws/ws"
args=()
for engine in podman docker; do
  if ! "$bin" doctor --backend "$engine" --json >/dev/null 2>&1; then
    echo "skipped $engine: \`stockade doctor --backend $engine\` fails" >&2
    continue
  fi
  "$bin" run --backend "$engine" --report "$ws/$engine.json" -- true
  # The bare run: the same engine arguments up to the image, then `true`; no name (each run
  # would need its own), the mask files, environment file and seccomp profile from this
  # bench's directory.
  bare=$(python3 - "$ws/$engine.json" "$ws/masks" <<'PY'
import json, re, shlex, sys
c = json.load(open(sys.argv[1]))["container"]
a = c["args"]
out, i = [c["engine_binary"]], 0
while i < len(a):
    if a[i] == "--name":
        i += 2
        continue
    if a[i] == "--env":
        i += 2
        continue
    out.append(re.sub(r"/tmp/stockade-container-[^/]+", sys.argv[2], a[i]))
    if a[i] == c["image"]:
        break
    i += 1
# The container's init, as stockade starts it (`INIT -- COMMAND`), when the run had one.
if i + 2 < len(a) and a[i + 1].startswith("/run/stockade-init") and a[i + 2] == "--":
    out += [a[i + 1], "--"]
out.append("true")
print(" ".join(shlex.quote(x) for x in out))
PY
)
  args+=(-n "bare $engine run (same image, same flags) true" "$bare")
  args+=(-n "stockade run --backend $engine -- true" "$bin run --backend $engine -- true")
  if [ -n "${OLD:-}" ]; then
    args+=(-n "stockade run --backend $engine -- true ($OLD)" "$OLD run --backend $engine -- true")
  fi
done
args+=(-n "stockade run -- true (native)" "$bin run -- true")
if [ -n "${OLD:-}" ]; then
  args+=(-n "stockade run -- true (native, $OLD)" "$OLD run -- true")
fi
hyperfine -N --warmup 3 --runs "$runs" --export-json "$ws/result.json" "${args[@]}" >&2
python3 - "$ws/result.json" <<'PY'
import json, sys
rs = json.load(open(sys.argv[1]))["results"]
print("| command | median | vs the bare engine run |")
print("|---|---|---|")
base = None
for r in rs:
    if r["command"].startswith("bare "):
        base = r["median"]
    ratio = f"{r['median']/base:.2f}x" if base and "native" not in r["command"] else ""
    print(f"| {r['command']} | {r['median']*1000:.1f} ms | {ratio} |")
PY
