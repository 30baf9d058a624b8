"""Run the ``namesrv`` command so that a benchmark can profile a window of its life.

SIGUSR1 starts cProfile; SIGUSR2 stops it, writes the profile to ``--out`` and then a ``.done``
marker beside it, so the bench can wait for the file to be complete. Start-up and idle time
before the first signal stay out of the profile. The remaining arguments go to ``namesrv``
unchanged; the name server is the working directory's checkout. Only benchmarks use this.

    python bench/profiled_namesrv.py --out /tmp/lookup.prof -- --listen 127.0.0.1:9876
"""

from __future__ import annotations

import argparse
import cProfile
import os
import signal
import sys
from pathlib import Path
from types import FrameType

# The checkout to run is the working directory's (as with ``python -m``), so that a bench can run
# another checkout's name server with this script.
sys.path.insert(0, os.getcwd())

from namesrv.cli import main as namesrv_main


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("namesrv_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    rest = args.namesrv_args[1:] if args.namesrv_args[:1] == ["--"] else args.namesrv_args
    profiler = cProfile.Profile()

    def start(signum: int, frame: FrameType | None) -> None:
        profiler.enable()

    def stop(signum: int, frame: FrameType | None) -> None:
        profiler.disable()
        profiler.dump_stats(str(args.out))
        args.out.with_suffix(".done").touch()

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    return namesrv_main(rest)


if __name__ == "__main__":
    sys.exit(main())
