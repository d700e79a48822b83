#!/usr/bin/env bash
# Regenerates the ClientHello fixtures used by `sni` tests: real first flights of real TLS
# clients, captured by a throwaway listener on 127.0.0.1 (nothing leaves the machine; the
# handshake never completes, the listener just records the bytes and closes).
#
#   bash crates/net/testdata/capture-client-hello.sh
#
# Needs python3, openssl and curl. The fixtures are committed; rerun only to refresh them.
set -euo pipefail
cd "$(dirname "$0")"

capture() { # capture OUTFILE CLIENT-COMMAND... ('{port}' in the command is the listener's port)
    local out=$1; shift
    local portfile; portfile=$(mktemp)
    python3 - "$out" "$portfile" <<'PY' &
import socket, sys
out, portfile = sys.argv[1], sys.argv[2]
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
open(portfile, "w").write(str(srv.getsockname()[1]))
srv.settimeout(10)
conn, _ = srv.accept()
conn.settimeout(5)
buf = b""
# Read whole records until the handshake message (type + 24-bit length) is complete.
def complete(b):
    body, i = b"", 0
    while i + 5 <= len(b):
        n = int.from_bytes(b[i + 3:i + 5], "big")
        if i + 5 + n > len(b):
            return False
        body += b[i + 5:i + 5 + n]
        i += 5 + n
        if len(body) >= 4 and len(body) >= 4 + int.from_bytes(body[1:4], "big"):
            return i
    return False
while not complete(buf):
    chunk = conn.recv(65536)
    if not chunk:
        break
    buf += chunk
end = complete(buf)
open(out, "wb").write(buf[:end] if end else buf)
conn.close()
PY
    local listener=$!
    local port=""
    for _ in $(seq 50); do port=$(cat "$portfile"); [ -n "$port" ] && break; sleep 0.1; done
    rm -f "$portfile"
    local cmd=("${@//\{port\}/$port}")
    timeout 10 "${cmd[@]}" </dev/null >/dev/null 2>&1 || true
    wait "$listener"
    echo "$out: $(stat -c %s "$out") bytes"
}

capture openssl-sni.bin openssl s_client -connect "127.0.0.1:{port}" -servername X.Test
capture openssl-nosni.bin openssl s_client -connect "127.0.0.1:{port}" -noservername
capture openssl-tls12-sni.bin openssl s_client -connect "127.0.0.1:{port}" -tls1_2 -servername allowed.test
capture curl-sni.bin curl -s --max-time 5 --resolve "allowed.test:{port}:127.0.0.1" "https://allowed.test:{port}/"
# A ClientHello that a real client splits across several records: a long ALPN list makes it
# ~1.3 KB and -max_send_frag 512 makes OpenSSL send it in 512-byte records.
alpn=$(printf 'proto-%02d-padding-padding-padding,' $(seq 1 30)); alpn=${alpn%,}
capture openssl-fragmented.bin openssl s_client -connect "127.0.0.1:{port}" -servername frag.allowed.test -max_send_frag 512 -alpn "$alpn"
