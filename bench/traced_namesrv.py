"""Run the ``namesrv`` command with tracemalloc on, for benchmarks that ask where memory lives.

Each SIGUSR1 writes a tracemalloc snapshot to the next numbered file in ``--snapshot-dir``
(``snapshot-1.pickle``, ...) and then a ``.done`` marker beside it, so the bench can wait for
the dump to be complete. The remaining arguments go to ``namesrv`` unchanged. Only benchmarks
use this: the product never traces its allocations.

    python bench/traced_namesrv.py --snapshot-dir /tmp/snaps --frames 8 -- --listen 127.0.0.1:9876
"""

from __future__ import annotations

import argparse
import itertools
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from namesrv.cli import main as namesrv_main


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--snapshot-dir", type=Path, required=True)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("namesrv_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    rest = args.namesrv_args[1:] if args.namesrv_args[:1] == ["--"] else args.namesrv_args
    args.snapshot_dir.mkdir(parents=True, exist_ok=True)
    numbers = itertools.count(1)

    def dump(signum: int, frame: FrameType | None) -> None:
        path = args.snapshot_dir / f"snapshot-{next(numbers)}.pickle"
        tracemalloc.take_snapshot().dump(str(path))
        path.with_suffix(".done").touch()

    tracemalloc.start(args.frames)
    signal.signal(signal.SIGUSR1, dump)
    return namesrv_main(rest)


if __name__ == "__main__":
    sys.exit(main())
