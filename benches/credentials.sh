#!/usr/bin/env bash
# The credential route's cost beside the direct connection, in one run on this machine: one
# keep-alive client (benches/credential_client.py) against a local HTTPS upstream
# (benches/credential_upstream.py), once straight to it, once through `stockade run
# --credential` (plain HTTP to the proxy, which checks the stand-in, puts the real value on
# and goes on over TLS). Reports p50 of small requests, time to the first server-sent event,
# and 100 MB response throughput, with the differences and ratios.
#
# Then the 100 MB response side by side (BIGRUNS runs each, default 5): the sandboxed client
# with the real key inside going out through the proxy's CONNECT tunnel (`--net proxy`, the
# alternative to a route), and, where installed, other relays on the host that put one hop
# between the client and the upstream: nginx and haproxy (TLS to the upstream, plain HTTP to
# the client, no buffering), socat relaying TLS, and socat copying the client's own TLS bytes
# (a hop that does no cryptography; `apt-get install nginx-light haproxy socat`). Each hop's
# CPU time per GB beside it (user + system from /proc/PID/stat: stockade's supervisor, whose
# threads run the proxy, without the sandboxed client; a relay's processes), and the direct
# client's own: the relays that terminate TLS are the floor of such a hop on this machine,
# measured in the same run. With perf, the proxy's CPU time per GB on the route over 3 GiB.
#
# The clients on the host run in a session of their own (setsid), as a run's command does (a
# sandbox is a session of its own): with the scheduler's autogroups (sched_autogroup_enabled=1)
# a client in the same session as the upstream and the relays is scheduled with them as one
# group, which on a loaded 2-core machine made "direct" up to 2x faster than the same client
# anywhere else (benches/tunnel.sh, docs/benchmarks.md "The CONNECT tunnel beside one-hop relays"). For the same reason the
# upstream and the relays run in sessions of their own: a real upstream is not on this machine,
# and in the benchmark's session the upstream would share one group with the route's proxy
# (the supervisor starts there) and with no other hop.
#
#   bash benches/credentials.sh
#   BIN=/path/to/stockade bash benches/credentials.sh   # a binary built elsewhere
#   OLD=/path/to/previous/stockade bash benches/credentials.sh   # its route and tunnel beside
#
# Not a test: nothing here asserts a time.
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
dir="$(mktemp -d /var/tmp/stockade-bench-cred.XXXXXX)"
chmod 755 "$dir"
upstream=""
relays=()
trap 'kill "${relays[@]}" $upstream 2>/dev/null; rm -rf "$dir"' EXIT
cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=bench-ca \
  -addext basicConstraints=critical,CA:TRUE 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout key.pem -out leaf.csr -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >ext
openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cert.pem -days 1 -extfile ext 2>/dev/null
chmod 644 ./*.pem
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
setsid python3 "$repo/benches/credential_upstream.py" "$port" cert.pem key.pem &
upstream=$!
sleep 0.5
cat >policy.toml <<TOML
[credentials.bench]
upstream = "https://127.0.0.1:$port"
header = "x-api-key"
token_env = ["BENCH_KEY"]
base_url_env = ["BENCH_BASE_URL"]
source = { env = "REAL_BENCH_KEY" }
TOML
cp "$repo/benches/credential_client.py" client.py
mkdir ws
OUT=direct.json setsid -w python3 client.py direct "$port" ca.pem
REAL_BENCH_KEY=bench-real-value SSL_CERT_FILE="$dir/ca.pem" "$bin" run --workspace ws --policy policy.toml \
  --timeout 0 --env OUT="$dir/ws/route.json" -- python3 "$dir/client.py" route
prev_route=()
if [ -n "$old" ]; then
  REAL_BENCH_KEY=bench-real-value SSL_CERT_FILE="$dir/ca.pem" "$old" run --workspace ws --policy policy.toml \
    --timeout 0 --env OUT="$dir/ws/route-prev.json" -- python3 "$dir/client.py" route
  prev_route=(ws/route-prev.json)
fi
python3 - direct.json ws/route.json "${prev_route[@]}" <<'PY'
import json, statistics, sys
d, r = (json.load(open(p)) for p in sys.argv[1:3])
o = json.load(open(sys.argv[3])) if len(sys.argv) > 3 else None
med = statistics.median
us = lambda xs: med(xs) * 1e6
prev = lambda k, f: f" {f(o[k])} ({med(r[k])/med(o[k]):.2f}×) |" if o else ""
head = " previous binary's route (new ÷ previous) |" if o else ""
print(f"| measure | direct | through the route | difference | ratio |{head}")
print("|---|---:|---:|---:|---:|" + ("---:|" if o else ""))
print(f"| small request, p50 | {us(d['small']):.0f} µs | {us(r['small']):.0f} µs | {us(r['small'])-us(d['small']):+.0f} µs | {med(r['small'])/med(d['small']):.2f}× |" + prev("small", lambda x: f"{us(x):.0f} µs"))
print(f"| first SSE byte, p50 | {us(d['sse']):.0f} µs | {us(r['sse']):.0f} µs | {us(r['sse'])-us(d['sse']):+.0f} µs | {med(r['sse'])/med(d['sse']):.2f}× |" + prev("sse", lambda x: f"{us(x):.0f} µs"))
mb = lambda xs: med(xs) / 1e6
print(f"| 100 MB response | {mb(d['big']):.0f} MB/s | {mb(r['big']):.0f} MB/s | | {med(r['big'])/med(d['big']):.2f}× |" + (f" {mb(o['big']):.0f} MB/s ({med(o['big'])/med(r['big']):.2f}× time) |" if o else ""))
print(f"\n(small: {len(d['small'])} requests each; SSE: {len(d['sse'])}; 100 MB: {len(d['big'])} runs each, median)")
PY

# The 100 MB response side by side.
export SMALL=0 SSE=0 BIGRUNS="${BIGRUNS:-5}"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ticks() { # CPU clock ticks (user + system) of PID and its children, waited-for ones included
  local t=0 c
  for c in "$1" $(pgrep -P "$1"); do
    t=$((t + $(awk '{print $14+$15+$16+$17}' "/proc/$c/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
hopped() { # OUT CMD...: run a stockade CMD; its supervisor's own CPU ticks (not the sandbox's) to OUT
  local out=$1 last=0 t0 t run
  shift
  "$@" &
  run=$!
  t0=$(awk '{print $14+$15}' "/proc/$run/stat")
  while t=$(awk '{print $14+$15}' "/proc/$run/stat" 2>/dev/null); do last=$t; sleep 0.05; done
  wait "$run"
  echo $((last - t0)) >"$out"
}
big=(direct big-direct.json)
OUT=big-direct.json setsid -w python3 client.py direct "$port" ca.pem
REAL_BENCH_KEY=bench-real-value SSL_CERT_FILE="$dir/ca.pem" hopped ws/big-route.ticks "$bin" run --workspace ws --policy policy.toml \
  --timeout 0 --env OUT="$dir/ws/big-route.json" --env SMALL --env SSE --env BIGRUNS -- python3 "$dir/client.py" route
big+=("stockade route (--credential)" ws/big-route.json)
hopped ws/big-tunnel.ticks "$bin" run --workspace ws --net proxy --allow-host "127.0.0.1:$port" --timeout 0 \
  --env OUT="$dir/ws/big-tunnel.json" --env SMALL --env SSE --env BIGRUNS -- python3 "$dir/client.py" tunnel "$port" "$dir/ca.pem"
big+=("stockade CONNECT tunnel (--net proxy, key inside)" ws/big-tunnel.json)
if [ -n "$old" ]; then
  REAL_BENCH_KEY=bench-real-value SSL_CERT_FILE="$dir/ca.pem" hopped ws/big-route-prev.ticks "$old" run --workspace ws --policy policy.toml \
    --timeout 0 --env OUT="$dir/ws/big-route-prev.json" --env SMALL --env SSE --env BIGRUNS -- python3 "$dir/client.py" route
  big+=("previous binary: stockade route" ws/big-route-prev.json)
  hopped ws/big-tunnel-prev.ticks "$old" run --workspace ws --net proxy --allow-host "127.0.0.1:$port" --timeout 0 \
    --env OUT="$dir/ws/big-tunnel-prev.json" --env SMALL --env SSE --env BIGRUNS -- python3 "$dir/client.py" tunnel "$port" "$dir/ca.pem"
  big+=("previous binary: stockade CONNECT tunnel" ws/big-tunnel-prev.json)
fi
relay() { # NAME PORT PID: the client in plain HTTP through a relay listening on PORT
  local name=$1 p=$2 t0
  sleep 0.5
  t0=$(ticks "$3")
  BENCH_BASE_URL="http://127.0.0.1:$p" BENCH_KEY=x OUT="big-$p.json" setsid -w python3 client.py route
  sleep 0.2
  echo $(($(ticks "$3") - t0)) >"big-$p.ticks"
  big+=("$name" "big-$p.json")
}
if command -v nginx >/dev/null; then
  p=$(free_port)
  cat >nginx.conf <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/nginx.log;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path $dir/nginx-body;
  proxy_temp_path $dir/nginx-proxy;
  server {
    listen 127.0.0.1:$p;
    location / {
      proxy_pass https://127.0.0.1:$port;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_ssl_verify on;
      proxy_ssl_trusted_certificate $dir/ca.pem;
    }
  }
}
CONF
  setsid nginx -c "$dir/nginx.conf" & relays+=($!)
  relay "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///') (TLS to the upstream)" "$p" "${relays[-1]}"
fi
if command -v haproxy >/dev/null; then
  p=$(free_port)
  cat >haproxy.cfg <<CONF
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend f
  bind 127.0.0.1:$p
  default_backend b
backend b
  server s 127.0.0.1:$port ssl verify required ca-file $dir/ca.pem
CONF
  setsid haproxy -f haproxy.cfg & relays+=($!)
  relay "haproxy $(haproxy -v | sed -n '1s/^HAProxy version \([^ ]*\).*/\1/p') (TLS to the upstream)" "$p" "${relays[-1]}"
fi
if command -v socat >/dev/null; then
  p=$(free_port)
  setsid socat -b 262144 "TCP-LISTEN:$p,bind=127.0.0.1,reuseaddr,fork" "OPENSSL:127.0.0.1:$port,cafile=ca.pem" & relays+=($!)
  relay "socat (TLS to the upstream)" "$p" "${relays[-1]}"
  p=$(free_port)
  setsid socat -b 262144 "TCP-LISTEN:$p,bind=127.0.0.1,reuseaddr,fork" "TCP:127.0.0.1:$port" & relays+=($!)
  sleep 0.5
  t0=$(ticks "${relays[-1]}")
  OUT=big-copy.json setsid -w python3 client.py direct "$p" ca.pem
  sleep 0.2
  echo $(($(ticks "${relays[-1]}") - t0)) >big-copy.ticks
  big+=("socat copying the client's TLS (no cryptography)" big-copy.json)
fi
python3 - "${big[@]}" <<'PY'
import json, os, statistics, sys
rows = list(zip(sys.argv[1::2], sys.argv[2::2]))
med = lambda p: statistics.median(json.load(open(p))["big"])
base = med(rows[0][1])
hz = os.sysconf("SC_CLK_TCK")
def per_gb(p):
    got = json.load(open(p))
    moved = len(got["big"]) * got["size"] / 1e9
    ticks = p[:-len(".json")] + ".ticks"
    if p == rows[0][1]:
        return got["cpu"] / moved  # the direct client's own
    return int(open(ticks).read()) / hz / moved if os.path.exists(ticks) else None
client = per_gb(rows[0][1])
print("\n| 100 MB response, one hop | median | runs (MB/s) | vs direct | CPU per GB (core-s) | ÷ the client's own |")
print("|---|---:|---|---:|---:|---:|")
for name, p in rows:
    runs = json.load(open(p))["big"]
    c = per_gb(p)
    cpu = "" if c is None else f"{c:.2f} | {c / client:.2f}×"
    print(f"| {name} | {med(p)/1e6:.0f} MB/s | {', '.join('%.0f' % (x/1e6) for x in runs)} | {med(p)/base:.2f}× | {cpu or ' | '} |")
print("\n(CPU per GB: the direct row is the client's own (TLS and HTTP in Python); the hops' rows the")
print("hop's, without the client's; 10 ms ticks, 100 MB runs: about ±0.02 core-s.)")
PY
if command -v perf >/dev/null; then
  # The proxy's CPU time per GB on the route (the supervisor, whose threads run the proxy),
  # beside the direct client's own (which does the decryption the proxy does on the route).
  export BIG=$((1 << 30)) BIGRUNS=3
  perf stat -x, -e task-clock -o cpu-direct.txt -- env OUT=cpu-direct.json setsid -w python3 client.py direct "$port" ca.pem
  REAL_BENCH_KEY=bench-real-value SSL_CERT_FILE="$dir/ca.pem" "$bin" run --workspace ws --policy policy.toml \
    --timeout 0 --env OUT="$dir/ws/cpu-route.json" --env SMALL --env SSE --env BIG --env BIGRUNS \
    -- sh -c "sleep 1 && exec python3 $dir/client.py route" &
  run=$!
  sleep 0.5
  perf stat -x, -e task-clock -p "$run" -o cpu-proxy.txt -- sleep 30 &
  stat=$!
  wait "$run"
  kill -INT "$stat" 2>/dev/null || true
  wait "$stat" || true
  python3 - cpu-direct.txt cpu-proxy.txt <<'PY'
import sys
gb = 3 * (1 << 30) / 1e9
ms = lambda p: next(float(l.split(",")[0]) for l in open(p) if "task-clock" in l)
d, r = ms(sys.argv[1]) / 1e3 / gb, ms(sys.argv[2]) / 1e3 / gb
print(f"\nCPU per GB (3 x 1 GiB): direct client {d:.2f} core-s; the route's proxy {r:.2f} core-s ({r / d:.2f}x the client's own TLS)")
PY
fi
