#!/usr/bin/env bash
# The credential route's cost beside the direct connection, in one run on this machine: one
# keep-alive client (benches/credential_client.py) against a local HTTPS upstream
# (benches/credential_upstream.py), once straight to it, once through `stockade run
# --credential` (plain HTTP to the proxy, which checks the stand-in, puts the real value on
# and goes on over TLS). Reports p50 of small requests, time to the first server-sent event,
# and 100 MB response throughput, with the differences and ratios.
#
#   bash benches/credentials.sh
#
# Not a test: nothing here asserts a time.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
bin=$(cargo build --release -q -p cli --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "stockade" and msg.get("executable"):
        print(msg["executable"])
')
dir="$(mktemp -d /var/tmp/stockade-bench-cred.XXXXXX)"
chmod 755 "$dir"
upstream=""
trap '[ -n "$upstream" ] && kill "$upstream" 2>/dev/null; rm -rf "$dir"' EXIT
cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=bench-ca \
  -addext basicConstraints=critical,CA:TRUE 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout key.pem -out leaf.csr -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >ext
openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cert.pem -days 1 -extfile ext 2>/dev/null
chmod 644 ./*.pem
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$repo/benches/credential_upstream.py" "$port" cert.pem key.pem &
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
OUT=direct.json python3 client.py direct "$port" ca.pem
REAL_BENCH_KEY=bench-real-value SSL_CERT_FILE="$dir/ca.pem" "$bin" run --workspace ws --policy policy.toml \
  --timeout 0 --env OUT="$dir/ws/route.json" -- python3 "$dir/client.py" route
python3 - direct.json ws/route.json <<'PY'
import json, statistics, sys
d, r = (json.load(open(p)) for p in sys.argv[1:3])
med = statistics.median
us = lambda xs: med(xs) * 1e6
print("| measure | direct | through the route | difference | ratio |")
print("|---|---:|---:|---:|---:|")
print(f"| small request, p50 | {us(d['small']):.0f} µs | {us(r['small']):.0f} µs | {us(r['small'])-us(d['small']):+.0f} µs | {med(r['small'])/med(d['small']):.2f}× |")
print(f"| first SSE byte, p50 | {us(d['sse']):.0f} µs | {us(r['sse']):.0f} µs | {us(r['sse'])-us(d['sse']):+.0f} µs | {med(r['sse'])/med(d['sse']):.2f}× |")
mb = lambda xs: med(xs) / 1e6
print(f"| 100 MB response | {mb(d['big']):.0f} MB/s | {mb(r['big']):.0f} MB/s | | {med(r['big'])/med(d['big']):.2f}× |")
print(f"\n(small: {len(d['small'])} requests each; SSE: {len(d['sse'])}; 100 MB: {len(d['big'])} runs each, median)")
PY
