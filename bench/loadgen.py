"""A closed-loop request generator: N connections, one request in flight on each.

It sends pre-encoded request bytes and counts whole response frames by their length prefix
only, so it spends far less per request than any server under test: the figure it prints is
the server's, not its own.
"""

from __future__ import annotations

import selectors
import socket
import struct
import time


def run(
    host: str, port: int, request: bytes, *, connections: int, seconds: float, warmup: float = 0.5
) -> float:
    """Responses per second over ``seconds`` after ``warmup``."""
    sel = selectors.DefaultSelector()
    buffers: dict[socket.socket, bytearray] = {}
    for _ in range(connections):
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ)
        buffers[sock] = bytearray()
        sock.send(request)
    count = 0
    start = time.perf_counter()
    measure_from = start + warmup
    counted_from: float | None = None
    end = measure_from + seconds
    unpack = struct.unpack_from
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        if counted_from is None and now >= measure_from:
            counted_from, count = now, 0
        for key, _ in sel.select(timeout=0.1):
            sock = key.fileobj  # type: ignore[assignment]
            data = sock.recv(65536)  # type: ignore[union-attr]
            if not data:
                raise ConnectionError("server closed a benchmark connection")
            buf = buffers[sock]  # type: ignore[index]
            buf += data
            done = 0
            while len(buf) >= 4:
                length = unpack(">I", buf, 0)[0]
                if len(buf) < 4 + length:
                    break
                del buf[: 4 + length]
                done += 1
            if done:
                count += done
                sock.send(request * done)  # type: ignore[union-attr]
    elapsed = time.perf_counter() - (counted_from or start)
    for sock in buffers:
        sock.close()
    return count / elapsed
