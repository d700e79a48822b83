"""The credential benchmark's upstream: HTTPS on loopback (certificate and key given), HTTP/1.1
keep-alive, every small response in one write.

    python3 credential_upstream.py PORT CERT KEY

  /small      a 16-byte JSON body
  /sse        server-sent events: the first at once, the second 20 ms later (chunked)
  /big/N      N bytes
"""
import socket
import ssl
import sys
import threading
import time

port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
small = b'{"ok":true,"n":1}'
chunk = b"x" * (1 << 20)


def serve(conn):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            target = lines[0].split()[1].decode()
            length = 0
            for line in lines[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            while len(buf) < length:
                buf += conn.recv(65536)
            buf = buf[length:]
            if target.startswith("/sse"):
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                ev = b"event: a\ndata: {}\n\n"
                conn.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
                time.sleep(0.02)
                conn.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(ev), ev))
            elif target.startswith("/big/"):
                n = int(target.rsplit("/", 1)[1])
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % n)
                while n > 0:
                    k = min(n, len(chunk))
                    conn.sendall(chunk[:k])
                    n -= k
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(small), small))
    except (OSError, ssl.SSLError):
        pass
    finally:
        conn.close()


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(64)
while True:
    raw, _ = listener.accept()
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        conn = ctx.wrap_socket(raw, server_side=True)
    except (OSError, ssl.SSLError):
        raw.close()
        continue
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
