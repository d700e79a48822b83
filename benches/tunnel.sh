#!/usr/bin/env bash
# The CONNECT tunnel beside one-hop relays, in one run on this machine (issue 32, item 4).
#
# A local nginx serves a 1 GiB file, in the clear (sendfile) and over TLS. curl downloads it
#   - direct, from the host;
#   - direct from inside a run (`--net host`, no relay): what the sandbox around curl costs on
#     its own, the most a tunnel to a sandboxed client can reach;
#   - through the CONNECT tunnel: curl inside `stockade run --net proxy --allow-host`, over the
#     run's proxy (`curl -p` for the clear file, which makes curl tunnel plain HTTP too);
#   - through socat (`-b 262144`, fork) and haproxy (`mode tcp`), one hop in plain TCP on the
#     host, the client on the host: what "one hop" costs with the relays installable here;
#   - through benches/splice_relay.c, a relay that does nothing but splice(2) both ways
#     (the floor of a hop for a relay in user space: no parsing, no rules, no accounting).
# Rows take turns, the order reversed every round; ROUNDS (default 5) rounds; medians, the range,
# and the ratio to direct and to the best one-hop relay. Each relay's CPU (user + system, of its
# process and its waited-for children, from /proc/PID/stat) per GB moved: for stockade that is
# the whole supervisor, which runs the proxy (its start-up and output relay included).
#
#   bash benches/tunnel.sh                      # builds the release binary
#   BIN=/path/to/stockade OLD=/path/to/old/stockade bash benches/tunnel.sh
#
# OLD adds the tunnel of another binary as a row of its own. Not a test: nothing here asserts
# a time.
#
# Every client runs in a session of its own (setsid), as a run's command does: see measure().
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
bin=${BIN:-$(cargo build --release -q -p stockade-cli --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "stockade" and msg.get("executable"):
        print(msg["executable"])
')}
old=${OLD:-}
rounds=${ROUNDS:-5}
size=${SIZE:-$((1 << 30))}
dir="$(mktemp -d /var/tmp/stockade-bench-tunnel.XXXXXX)"
chmod 755 "$dir"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$dir"' EXIT
cd "$dir"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=bench-ca \
  -addext basicConstraints=critical,CA:TRUE 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout key.pem -out leaf.csr -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >ext
openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cert.pem -days 1 -extfile ext 2>/dev/null
chmod 644 ./*.pem
mkdir www ws
head -c "$size" /dev/zero >www/big
cc -O2 -o splice_relay "$repo/benches/splice_relay.c" -lpthread

# The upstream: nginx, one worker, clear and TLS.
http=$(free_port)
https=$(free_port)
cat >nginx.conf <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/nginx.log;
events { worker_connections 64; }
http {
  access_log off;
  sendfile on;
  client_body_temp_path $dir/nginx-body;
  proxy_temp_path $dir/nginx-proxy;
  server {
    listen 127.0.0.1:$http;
    listen 127.0.0.1:$https ssl;
    ssl_certificate $dir/cert.pem;
    ssl_certificate_key $dir/key.pem;
    root $dir/www;
  }
}
CONF
nginx -c "$dir/nginx.conf" &
pids+=($!)

# One-hop relays in plain TCP, each for both upstream ports.
declare -A relay_pid relay_port
start_relay() { # NAME UPSTREAM-PORT PORT COMMAND...
  local name=$1 up=$2 p=$3
  shift 3
  "$@" &
  relay_pid[$name-$up]=$!
  relay_port[$name-$up]=$p
  pids+=($!)
}
for up in $http $https; do
  p=$(free_port)
  start_relay socat "$up" "$p" socat -b 262144 "TCP-LISTEN:$p,bind=127.0.0.1,reuseaddr,fork" "TCP:127.0.0.1:$up"
  p=$(free_port)
  cat >"haproxy-$up.cfg" <<CONF
global
  nbthread 1
defaults
  mode tcp
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend f
  bind 127.0.0.1:$p
  default_backend b
backend b
  server s 127.0.0.1:$up
CONF
  start_relay haproxy "$up" "$p" haproxy -f "haproxy-$up.cfg"
  p=$(free_port)
  start_relay splice "$up" "$p" ./splice_relay "$p" "$up"
done
sleep 1

cpu_of() { # PID [self]: user + system (+ its waited-for children's unless self), in clock ticks
  if [ "${2:-}" = self ]; then
    awk '{print $14 + $15}' "/proc/$1/stat"
  else
    awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"
  fi
}
tick=$(getconf CLK_TCK)
: >results.txt
measure() { # KIND ROW: one download of the KIND (clear|tls) file by ROW; appends "KIND ROW MB/s CPU-s"
  local kind=$1 row=$2 port url speed before after cpu=""
  if [ "$kind" = clear ]; then port=$http; else port=$https; fi
  url_for() { if [ "$kind" = clear ]; then echo "http://127.0.0.1:$1/big"; else echo "https://127.0.0.1:$1/big"; fi; }
  local curl=(curl -sS --cacert "$dir/ca.pem" -o /dev/null -w '%{speed_download}')
  # The host's clients run in a session of their own, as a run's command does (a sandbox is a
  # session of its own): with the scheduler's autogroups (sched_autogroup_enabled=1, here and
  # on most desktops) a client in the same session as the server and the relay is scheduled
  # with them as one group, which on a loaded machine is up to 2x faster than the same client
  # in another session, and would measure the session, not the relay.
  local host=(setsid -w "${curl[@]}")
  case $row in
    direct)
      speed=$("${host[@]}" "$(url_for "$port")") ;;
    inside)
      "$bin" run --workspace ws --net host --timeout 0 -- \
        sh -c "cd $dir/ws; $(printf '%q ' "${curl[@]}") $(url_for "$port") >speed" >/dev/null
      speed=$(cat ws/speed) ;;
    tunnel | tunnel-old)
      local b=$bin
      [ "$row" = tunnel-old ] && b=$old
      local p=()
      [ "$kind" = clear ] && p=(-p)
      # The run's supervisor serves the proxy: its CPU (its own threads, not the sandbox's
      # processes) is read when the command is about to start curl and when curl is done; the
      # command waits for the host each time.
      rm -f ws/start ws/go ws/done ws/read ws/speed
      "$b" run --workspace ws --net proxy --allow-host "127.0.0.1:$port" --timeout 0 -- \
        sh -c "cd $dir/ws; touch start; while [ ! -e go ]; do sleep 0.01; done; $(printf '%q ' "${curl[@]}" "${p[@]}") $(url_for "$port") >speed; touch done; while [ ! -e read ]; do sleep 0.01; done" \
        >/dev/null &
      local run=$!
      while [ ! -e ws/start ]; do sleep 0.01; done
      before=$(cpu_of "$run" self)
      touch ws/go
      while [ ! -e ws/done ]; do sleep 0.01; done
      after=$(cpu_of "$run" self)
      cpu=$((after - before))
      touch ws/read
      wait "$run"
      rm -f ws/start ws/go ws/done ws/read
      speed=$(cat ws/speed) ;;
    *)
      local pid=${relay_pid[$row-$port]}
      before=$(cpu_of "$pid")
      speed=$("${host[@]}" "$(url_for "${relay_port[$row-$port]}")")
      sleep 0.05
      after=$(cpu_of "$pid")
      cpu=$((after - before)) ;;
  esac
  [ -n "$cpu" ] && cpu=$(echo "$cpu $tick" | awk '{printf "%.3f", $1 / $2}')
  echo "$kind $row $speed ${cpu:--}" >>results.txt
}
rows=(direct inside tunnel socat haproxy splice)
[ -n "$old" ] && rows+=(tunnel-old)
for kind in clear tls; do
  for ((r = 0; r < rounds; r++)); do
    order=("${rows[@]}")
    if ((r % 2)); then
      order=()
      for ((i = ${#rows[@]} - 1; i >= 0; i--)); do order+=("${rows[i]}"); done
    fi
    for row in "${order[@]}"; do measure "$kind" "$row"; done
  done
done
python3 - "$size" results.txt <<'PY'
import statistics, sys
size = int(sys.argv[1])
names = {
    "direct": "direct (curl on the host)",
    "inside": "direct from inside a run (--net host: no relay, the sandbox's own cost)",
    "tunnel": "stockade CONNECT tunnel (curl inside, --net proxy)",
    "tunnel-old": "the same, OLD binary",
    "socat": "socat -b 262144 (one hop, plain TCP)",
    "haproxy": "haproxy, mode tcp, 1 thread (one hop)",
    "splice": "benches/splice_relay.c (splice only: the floor of a hop)",
}
rows = {}
for line in open(sys.argv[2]):
    kind, row, speed, cpu = line.split()
    rows.setdefault((kind, row), []).append((float(speed), None if cpu == "-" else float(cpu)))
med = statistics.median
for kind in ("clear", "tls"):
    print(f"\n| 1 GiB {'in the clear' if kind == 'clear' else 'over TLS'} | median | range (MB/s) | vs direct | vs best one-hop relay | relay CPU per GB |")
    print("|---|---:|---|---:|---:|---:|")
    d = med(s for s, _ in rows[(kind, "direct")])
    best = max(med(s for s, _ in rows[(kind, r)]) for r in ("socat", "haproxy") if (kind, r) in rows)
    for row, name in names.items():
        if (kind, row) not in rows:
            continue
        xs = rows[(kind, row)]
        m = med(s for s, _ in xs)
        cpus = [c for _, c in xs if c is not None]
        cpu = f"{med(cpus) / (size / 1e9):.2f} core-s" if cpus else "-"
        lo, hi = min(s for s, _ in xs), max(s for s, _ in xs)
        print(f"| {name} | {m / 1e6:.0f} MB/s | {lo / 1e6:.0f}–{hi / 1e6:.0f} | {m / d:.2f}× | {m / best:.2f}× | {cpu} |")
print(f"\n({len(rows[('clear', 'direct')])} rounds, rows taking turns; CPU from /proc/PID/stat, 10 ms ticks)")
PY
