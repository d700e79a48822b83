#!/usr/bin/env bash
# The floor under `stockade run -- true` (issue 32, item 3;
# docs/benchmarks.md, "The floor: the same kernel work without stockade"):
# benches/startup_floor.c does the kernel work of stockade's default run and nothing else. Its
# rows take turns, run by run (benches/turns.py), beside bwrap (with stockade's policy as far
# as bwrap expresses it, and --unshare-all) and stockade, then again in the reverse order; root,
# then unprivileged (BENCH_USER, default stockade-test). Each "floor without X" row leaves one
# piece out, so floor − row is what X costs; the warm row asks a sandbox made ahead (as issue 34
# would) to run the command. Not a test: nothing asserts a time.
#
#   bash benches/startup_floor.sh [STOCKADE]    # default /var/tmp/bench/s41/stockade
#   RUNS=100 ORDERS=2 ...                        # runs per row and pass; passes (2: both orders)
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
bin="${1:-/var/tmp/bench/s41/stockade}"
runs="${RUNS:-100}"
orders="${ORDERS:-2}"
user="${BENCH_USER:-stockade-test}"
[ -x "$bin" ] || { echo "startup_floor.sh: no stockade binary at $bin" >&2; exit 1; }
work="$(mktemp -d /var/tmp/stockade-startup-floor.XXXXXX)"
serve_pid=""
cleanup() { [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
chmod 755 "$work"
cc -O2 -static -o "$work/floor" benches/startup_floor.c
install -m 755 "$bin" "$work/stockade"
# benches/turns.py, also recording each run's CPU time (user + system of the launcher and every
# process it waited for, from wait4's rusage): on this shared 2-core machine wall time is mostly
# waiting for a core, CPU time much less so. The warm row's CPU is the client's only (the work
# is done by the sandbox made ahead), so only its wall time counts.
cat > "$work/turns.py" <<'PY'
import json, os, shlex, statistics, subprocess, sys, time
out, runs = sys.argv[1], int(sys.argv[2])
variants = {sys.argv[i]: shlex.split(sys.argv[i + 1]) for i in range(4, len(sys.argv), 2)}
def once(cmd):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime, p.returncode
wall = {k: [] for k in variants}; cpu = {k: [] for k in variants}; failed = {k: 0 for k in variants}
for _ in range(10):
    for cmd in variants.values():
        once(cmd)
for _ in range(runs):
    for k, cmd in variants.items():
        w, c, rc = once(cmd)
        wall[k].append(w); cpu[k].append(c); failed[k] += rc != 0
results = [{"command": k, "median": statistics.median(wall[k]), "cpu": statistics.median(cpu[k]),
            "failed": failed[k], "times": wall[k]} for k in variants]
json.dump({"results": results}, open(out, "w"))
PY
# Masked paths of the floor's own (stockade masks the credential files it finds in $HOME).
masks="$work/masks"
mkdir -p "$masks" && for i in 0 1 2 3; do : > "$masks/m$i"; done && for i in 4 5 6 7 8 9; do mkdir "$masks/m$i"; done
chmod -R a+rX "$masks"

# bwrap given stockade's default policy as far as bwrap can express it (as benches/startup.sh).
bwrap_equivalent() {
  "$@" policy show --json | python3 "$repo/benches/bwrap_equivalent.py"
}

# One caller's pass: the rows, in the order given and then reversed, taking turns.
# $1: root|unpriv; then NAME COMMAND pairs. Commands run from the workspace $ws.
measure() {
  local who=$1 ws=$2; shift 2
  local -a rows=("$@") rev=()
  for ((i = ${#rows[@]} - 2; i >= 0; i -= 2)); do rev+=("${rows[i]}" "${rows[i + 1]}"); done
  for ((o = 1; o <= orders; o++)); do
    local -a these=("${rows[@]}")
    ((o % 2 == 0)) && these=("${rev[@]}")
    if [ "$who" = root ]; then
      (cd "$ws" && python3 "$work/turns.py" "$work/$who.$o.json" "$runs" null "${these[@]}")
    else
      (cd "$ws" && runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/ \
        python3 "$work/turns.py" "$work/$who.$o.json" "$runs" null "${these[@]}")
    fi
  done
}

floor_rows() { # the floor and the floor without each piece; $1: root|unpriv
  local f="$work/floor maskdir=$masks"
  rows=(
    "floor" "$f"
    "floor without the network namespace" "$f no-net"
    "floor without the pid namespace (and so proc)" "$f no-pid"
    "floor without ipc, uts, cgroup namespaces" "$f no-ipc no-uts no-cgns"
    "floor without proc (and its 3 read-only binds)" "$f no-proc"
    "floor without the private /dev (tmpfs, 6 nodes, devpts, shm)" "$f no-dev"
    "floor without any mount (mount namespace only)" "$f no-mounts"
    "floor without Landlock" "$f no-landlock"
    "floor without seccomp (and its listener)" "$f no-seccomp"
    "floor without the bounding-set drops" "$f no-capdrop"
  )
  if [ "$1" = root ]; then
    rows+=(
      "floor without the user namespace" "$f no-user"
      "floor without the masks (7)" "$f masks=0"
      "floor without idmapped mounts" "$f no-idmap"
      "floor without cgroups (v1 memory, pids)" "$f no-cgroup"
      "floor with 12 Landlock rules (not 60)" "$f rules=12"
    )
  fi
  rows+=("warm: a sandbox made ahead runs the command" "$work/floor client $work/warm-$1.sock")
}

# --- root ---
ws="$work/ws"
mkdir -p "$ws"
eq=$(cd "$ws" && bwrap_equivalent "$work/stockade")
floor_rows root
(cd "$ws" && exec "$work/floor" serve "$work/warm-root.sock" "maskdir=$masks") &
serve_pid=$!
sleep 0.5
measure root "$ws" \
  "bwrap --unshare-all" "bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true" \
  "bwrap, stockade's policy" "$eq" \
  "stockade run -- true" "$work/stockade run -- true" \
  "${rows[@]}"
kill "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null || true; serve_pid=""

# --- unprivileged ---
if [ "$(id -u)" = 0 ] && id "$user" >/dev/null 2>&1; then
  uws="$work/uws"
  mkdir -p "$uws" && chown "$user" "$uws"
  ueq=$(cd "$uws" && runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/ bash -c "repo=$repo; $(declare -f bwrap_equivalent); bwrap_equivalent $work/stockade")
  floor_rows unpriv
  chown "$user" "$work"
  (cd "$uws" && exec runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME=/ "$work/floor" serve "$work/warm-unpriv.sock") 2>/dev/null &
  serve_pid=$!
  sleep 0.5
  measure unpriv "$uws" \
    "bwrap --unshare-all" "bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true" \
    "bwrap, stockade's policy" "$ueq" \
    "stockade run -- true" "$work/stockade run -- true" \
    "${rows[@]}"
  kill "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null || true; serve_pid=""
fi

python3 - "$work" "$orders" "$(uptime | sed 's/.*load average: //')" <<'PY'
import json, os, sys
work, orders, load = sys.argv[1], int(sys.argv[2]), sys.argv[3]
eq = "bwrap, stockade's policy"
for who, title in (("root", "root"), ("unpriv", "unprivileged (HOME=/)")):
    passes = [json.load(open(f"{work}/{who}.{o}.json"))["results"] for o in range(1, orders + 1) if os.path.exists(f"{work}/{who}.{o}.json")]
    if not passes:
        continue
    wall = [{r["command"]: r["median"] * 1000 for r in p} for p in passes]
    cpu = [{r["command"]: r["cpu"] * 1000 for r in p} for p in passes]
    failed = {r["command"]: sum(q["failed"] for p in passes for q in p if q["command"] == r["command"]) for r in passes[0]}
    names = [r["command"] for r in passes[0]]
    rng = lambda xs, f: " – ".join(f(x) for x in xs)
    print(f"\n#### {title}: medians of {len(passes[0][0]['times'])} runs per row and pass, {len(passes)} passes (rows reversed in the second); load {load}\n")
    print("| row | wall (ms) | wall / bwrap with stockade's policy | wall − floor (ms) | CPU (ms) | CPU / bwrap with stockade's policy | CPU − floor (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for n in names:
        cells = [
            rng(wall, lambda m: f"{m[n]:.2f}"), rng(wall, lambda m: f"{m[n] / m[eq]:.2f}×"), rng(wall, lambda m: f"{m[n] - m['floor']:+.2f}"),
            rng(cpu, lambda m: f"{m[n]:.2f}"), rng(cpu, lambda m: f"{m[n] / m[eq]:.2f}×"), rng(cpu, lambda m: f"{m[n] - m['floor']:+.2f}"),
        ]
        flag = f" ({failed[n]} failed)" if failed[n] else ""
        print(f"| {n}{flag} | " + " | ".join(cells) + " |")
PY
