"""Measures a link of the multi-host harness (tools/multihost.sh): one host receives, another
sends a number of bytes over TCP; the receiver prints the bytes and the seconds from the
first byte to the end as one JSON line.

    tools/multihost.sh exec ID h1 python tools/linkprobe.py recv PORT
    tools/multihost.sh exec ID h0 python tools/linkprobe.py send ADDR PORT BYTES

`recv` listens on every address and takes one connection; start it first (`send` retries
the connection for a few seconds).
"""

from __future__ import annotations

import json
import socket
import sys
import time

CHUNK = 1 << 20


def recv(port: int) -> None:
    with socket.create_server(("", port)) as srv:
        conn, _ = srv.accept()
        with conn:
            buf = bytearray(CHUNK)
            n = conn.recv_into(buf)
            t0 = time.perf_counter()
            total = n
            while n:
                n = conn.recv_into(buf)
                total += n
            seconds = time.perf_counter() - t0
    print(json.dumps({"bytes": total, "seconds": seconds}), flush=True)


def send(addr: str, port: int, count: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            sock = socket.create_connection((addr, port), timeout=60)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with sock:
        chunk = bytes(CHUNK)
        left = count
        while left:
            left -= sock.send(memoryview(chunk)[:min(left, CHUNK)])
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1)  # the receiver closes once it has everything


if __name__ == "__main__":
    if sys.argv[1:2] == ["recv"] and len(sys.argv) == 3:
        recv(int(sys.argv[2]))
    elif sys.argv[1:2] == ["send"] and len(sys.argv) == 5:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)
