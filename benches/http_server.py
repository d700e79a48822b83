"""A small HTTP server for the proxy's latency benchmark: every response leaves in one write,
as production servers send a small response (python's http.server writes the head and the body
separately and spends ~300 µs per request, more than the proxy's whole cost, so its run-to-run
noise hides what is measured).

    python3 http_server.py PORT close   # HTTP/1.0: one request per connection, then close
    python3 http_server.py PORT keep    # HTTP/1.1 keep-alive
"""
import selectors
import socket
import sys

port, mode = int(sys.argv[1]), sys.argv[2]
body = b"hello\n"
version = b"HTTP/1.0" if mode == "close" else b"HTTP/1.1"
response = version + b" 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

sel = selectors.DefaultSelector()
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(128)
listener.setblocking(False)
sel.register(listener, selectors.EVENT_READ)
pending = {}


def drop(s):
    sel.unregister(s)
    pending.pop(s, None)
    s.close()


while True:
    for key, _ in sel.select():
        s = key.fileobj
        if s is listener:
            c, _ = listener.accept()
            c.setblocking(False)
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sel.register(c, selectors.EVENT_READ)
            pending[c] = b""
            continue
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if not data:
            drop(s)
            continue
        buf = pending[s] + data
        closed = False
        while b"\r\n\r\n" in buf:
            _, buf = buf.split(b"\r\n\r\n", 1)
            s.sendall(response)
            if mode == "close":
                drop(s)
                closed = True
                break
        if not closed:
            pending[s] = buf
