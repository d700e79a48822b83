"""The credential benchmark's client: one keep-alive connection, timings in JSON in $OUT.

    python3 credential_client.py direct PORT CAFILE   # HTTPS straight to the upstream
    python3 credential_client.py tunnel PORT CAFILE   # the same through $HTTPS_PROXY (CONNECT)
    python3 credential_client.py route                # plain HTTP to $BENCH_BASE_URL, key
                                                      # in $BENCH_KEY (the route, or a relay)
Env: SMALL (requests, default 2000), SSE (default 200), BIG (bytes, default 100 MB), BIGRUNS (3).
"""
import http.client
import json
import os
import ssl
import sys
import time
import urllib.parse

mode = sys.argv[1]
if mode in ("direct", "tunnel"):
    ctx = ssl.create_default_context(cafile=sys.argv[3])
    if mode == "direct":
        conn = http.client.HTTPSConnection("127.0.0.1", int(sys.argv[2]), context=ctx)
    else:
        # Inside `stockade run --net proxy`: TLS to the upstream through the proxy's CONNECT.
        proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
        conn = http.client.HTTPSConnection(proxy.hostname, proxy.port, context=ctx)
        conn.set_tunnel("127.0.0.1", int(sys.argv[2]))
    prefix, headers = "", {"x-api-key": "direct"}
else:
    url = urllib.parse.urlsplit(os.environ["BENCH_BASE_URL"])
    conn = http.client.HTTPConnection(url.hostname, url.port)
    prefix, headers = url.path, {"x-api-key": os.environ["BENCH_KEY"]}
body = b'{"model":"m","max_tokens":1}'


def request(path, read=True):
    start = time.perf_counter()
    conn.request("POST", prefix + path, body=body, headers=headers)
    r = conn.getresponse()
    if path == "/sse":
        r.read1(1)
        first = time.perf_counter() - start
        r.read()
        return first
    n = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        n += len(b)
    assert r.status == 200, r.status
    return time.perf_counter() - start, n


for _ in range(50):
    request("/small")
small = [request("/small")[0] for _ in range(int(os.environ.get("SMALL", 2000)))]
sse = [request("/sse") for _ in range(int(os.environ.get("SSE", 200)))]
size = int(os.environ.get("BIG", 100 << 20))
big = []
cpu = sum(os.times()[:2])
for _ in range(int(os.environ.get("BIGRUNS", 3))):
    t, n = request("/big/%d" % size)
    assert n == size, n
    big.append(size / t)
# The client's own CPU time (user + system) over the large responses.
cpu = sum(os.times()[:2]) - cpu
with open(os.environ.get("OUT", "/dev/stdout"), "w") as f:
    json.dump({"small": small, "sse": sse, "big": big, "size": size, "cpu": cpu}, f)
