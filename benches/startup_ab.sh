#!/usr/bin/env bash
# Start-up A/B: `stockade run -- true` in an empty workspace, two builds side by side in one
# hyperfine run, with both bwrap anchors beside them (`bwrap --unshare-all` and bwrap given
# stockade's default policy as far as bwrap expresses it, built from `policy show --json` as
# benches/startup.sh does), as root and, when run as root, as the unprivileged user
# stockade-test (its own bwrap rows, its own policy). Each caller's series runs twice, the
# rows in one order then reversed (the machine drifts over a series). Prints the medians and
# each stockade row's ratio to both bwrap rows of the same caller and series.
#
#   BIN=target/x86_64-unknown-linux-gnu/release/stockade OLD=/var/tmp/bench/base32/stockade \
#     bash benches/startup_ab.sh
#
# OLD is optional (then only BIN is measured). RUNS (default 100) runs per row. Not a test:
# nothing here asserts a time.
set -euo pipefail
bin="${BIN:?BIN=path of the stockade binary to measure}"
old="${OLD:-}"
runs="${RUNS:-100}"
user="${BENCH_USER:-stockade-test}"
benches="$(cd "$(dirname "$0")" && pwd)"
dir="$(mktemp -d /var/tmp/stockade-ab.XXXXXX)"
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
install -m 755 "$bin" "$dir/new"
[ -n "$old" ] && install -m 755 "$old" "$dir/old"

# bwrap given the plan's uid, gid, hostname, private /tmp and /dev/shm, writable roots,
# credential masks and environment (benches/startup.sh's row of the same name).
equivalent() {
  "$dir/new" policy show --json | python3 "$benches/bwrap_equivalent.py"
}

# One caller's two series (as this process's user, in the current directory).
series() {
  local tag=$1 eq
  eq=$(equivalent)
  local -a names=("bwrap --unshare-all" "bwrap, stockade's policy" "stockade (BIN)")
  local -a cmds=("bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true" "$eq" "$dir/new run -- true")
  if [ -e "$dir/old" ]; then
    names+=("stockade (OLD)")
    cmds+=("$dir/old run -- true")
  fi
  for order in forward reverse; do
    local -a args=()
    local n=${#cmds[@]}
    for ((k = 0; k < n; k++)); do
      local i=$k
      [ "$order" = reverse ] && i=$((n - 1 - k))
      args+=(-n "${names[$i]}" "${cmds[$i]}")
    done
    hyperfine -N --warmup 20 --runs "$runs" --export-json "$dir/$tag-$order.json" "${args[@]}" >/dev/null 2>&1 || true
  done
}

mkdir -p "$dir/root-ws"
(cd "$dir/root-ws" && series root)
if [ "$(id -u)" = 0 ] && id "$user" >/dev/null 2>&1; then
  mkdir -p "$dir/unpriv-ws" && chown "$user" "$dir/unpriv-ws" "$dir" && chmod 755 "$dir"
  (cd "$dir/unpriv-ws" && runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/ \
    bash -c "$(declare -f equivalent series); dir='$dir' runs='$runs' benches='$benches'; series unpriv") || true
fi

python3 - "$dir" <<'PY'
import json, os, sys, datetime
d = sys.argv[1]
print(f"start-up A/B, {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.1f}")
print(f"{'caller, order':18s} {'row':28s} {'median ms':>10s} {'p10 ms':>8s} {'/ bwrap':>8s} {'/ bwrap+policy':>15s}")
for tag in ("root", "unpriv"):
    for order in ("forward", "reverse"):
        path = os.path.join(d, f"{tag}-{order}.json")
        if not os.path.exists(path):
            continue
        rows = {r["command"]: r for r in json.load(open(path))["results"]}
        med = lambda n: rows[n]["median"] * 1000 if n in rows else None
        b, e = med("bwrap --unshare-all"), med("bwrap, stockade's policy")
        for name in ("bwrap --unshare-all", "bwrap, stockade's policy", "stockade (BIN)", "stockade (OLD)"):
            if name not in rows:
                continue
            m = med(name)
            times = sorted(rows[name]["times"])
            p10 = times[len(times) // 10] * 1000
            print(f"{tag + ', ' + order:18s} {name:28s} {m:10.2f} {p10:8.2f} {m / b:7.2f}x {m / e:14.2f}x")
PY
