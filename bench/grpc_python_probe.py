"""The Python gRPC SDK (``rocketmq-python-client`` from PyPI) sending through a 5.x proxy, for
``bench/proxy_failover.py --sdk python``: the same contract as ``tests/interop/GrpcProbe.java``.

    PYTHON_WITH_THE_SDK bench/grpc_python_probe.py ENDPOINT TOPIC INTERVAL_MS

Starts one send to TOPIC every INTERVAL_MS on a worker pool (a slow or failing send does not
hold the next), the SDK's defaults otherwise. Prints ``started START_MS`` once the producer
runs, then one line per send: ``OK SEQ START_MS END_MS TOPIC MESSAGE_ID QUEUE_ID OFFSET`` or
``FAIL SEQ START_MS END_MS TOPIC EXCEPTION: WHY``. Each line read from stdin names a topic for
one more send; it stops at EOF of stdin.

Runs on the interpreter that has the SDK (its own virtual environment: the SDK pins its own
gRPC and protobuf), so it imports nothing of this project.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from rocketmq import ClientConfiguration, Credentials, Message, Producer

BODY = b"\0" * 128
WORKERS = 64
_print_lock = threading.Lock()
_seq = itertools.count(1)


def now_ms() -> int:
    return int(time.time() * 1000)


def emit(line: str) -> None:
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def send(producer: Producer, topic: str) -> None:
    n, t0 = next(_seq), now_ms()
    try:
        message = Message()
        message.topic = topic
        message.body = BODY
        receipt = producer.send(message)
        queue = getattr(receipt.message_queue, "_MessageQueue__queue_id", "-")
        emit(f"OK {n} {t0} {now_ms()} {topic} {receipt.message_id} {queue} {receipt.offset}")
    except Exception as exc:  # every failure is a line: the bench counts them
        why = str(exc).replace("\n", " ")[:200]
        emit(f"FAIL {n} {t0} {now_ms()} {topic} {type(exc).__name__}: {why}")


def main() -> None:
    endpoint, topic, interval_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
    started = now_ms()
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
    producer.startup()
    emit(f"started {started}")
    pool = ThreadPoolExecutor(max_workers=WORKERS)
    stopping = threading.Event()

    def tick() -> None:
        next_at = time.monotonic()
        while not stopping.is_set():
            pool.submit(send, producer, topic)
            next_at += interval_ms / 1000
            stopping.wait(max(0.0, next_at - time.monotonic()))

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    for line in sys.stdin:
        if line.strip():
            pool.submit(send, producer, line.strip())
    stopping.set()
    ticker.join()
    pool.shutdown(wait=True, cancel_futures=True)
    producer.shutdown()


if __name__ == "__main__":
    main()
