"""A name server that serves one topic's route honestly and then turns on the clients that
subscribed: floods of NOTIFY frames naming topics nobody uses, forged log lines in GO_AWAY
reasons, frames far over any sane size. Blocking sockets on threads, for tests that drive real
Java applications (no reactor needed).
"""

from __future__ import annotations

import socket
import threading
from collections import Counter

from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, encode_command
from protocol.push_codec import decode_subscribe, encode_go_away, encode_subscribe_ack


class HostileNamesrv:
    """Answers GET_ROUTEINFO_BY_TOPIC of ``topic`` with ``route_body`` (TOPIC_NOT_EXIST for any
    other topic) and SUBSCRIBE with every topic at version 1; counts lookups per topic."""

    def __init__(self, topic: str, route_body: bytes, epoch: str = "hostile") -> None:
        self.topic = topic
        self.route_body = route_body
        self.epoch = epoch
        self.lookups: Counter[str] = Counter()
        self.subscribers: list[socket.socket] = []
        self.sequence = 0
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder(1 << 24)
        try:
            while data := conn.recv(65536):
                for cmd in decoder.feed(data):
                    if cmd.is_response or cmd.is_oneway:
                        continue
                    self._send(conn, self._answer(conn, cmd))
        except OSError:
            pass

    def _answer(self, conn: socket.socket, cmd: RemotingCommand) -> RemotingCommand:
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            topic = cmd.ext_fields.get("topic", "")
            with self._lock:
                self.lookups[topic] += 1
            if topic == self.topic:
                return cmd.make_response(ResponseCode.SUCCESS, body=self.route_body)
            return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, f"no route of {topic}")
        if cmd.code == RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED:
            topics = list(decode_subscribe(cmd.body).topics)
            with self._lock:
                if conn not in self.subscribers:
                    self.subscribers.append(conn)
            acks = [(t, 1, t == self.topic) for t in topics]
            return cmd.make_response(
                ResponseCode.SUCCESS, body=encode_subscribe_ack(acks, self.epoch)
            )
        return cmd.make_response(ResponseCode.SUCCESS)

    def _send(self, conn: socket.socket, cmd: RemotingCommand) -> None:
        data = encode_command(cmd)
        with self._lock:
            conn.sendall(data)

    def push(self, code: int, body: bytes) -> int:
        """A oneway frame to every subscriber; how many it reached."""
        frame = encode_command(RemotingCommand.request(code, body=body, oneway=True))
        with self._lock:
            conns = list(self.subscribers)
        for conn in conns:
            with self._lock:
                conn.sendall(frame)
        return len(conns)

    def go_away(self, reason: str) -> int:
        return self.push(int(RequestCode.GO_AWAY), encode_go_away(5_000, [], reason))

    def close(self) -> None:
        self._server.close()
        for conn in self.subscribers:
            conn.close()
