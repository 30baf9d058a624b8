"""The proxy's own cost under steady sending, for ``bench/proxy_failover.py --steady-seconds N``:
its JVM's CPU time and resident memory, sampled with psutil once a second over a leg.

A leg's mean CPU is the CPU time the process used over the leg divided by the leg's wall time
(100 % = one core); the per-second figures give its spread. CPU time is the process's own, so
other work on the machine slows it less than it slows latencies; the machine's load average and
total CPU are recorded beside it all the same.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import psutil

MIB = 1024 * 1024


@dataclass
class Leg:
    mode: str
    seconds: float
    cpu_pct_mean: float
    """The process's CPU time over the leg per wall second, in % of one core."""
    cpu_pct_p10: float
    cpu_pct_p90: float
    """Of the per-second CPU figures."""
    rss_mib_median: float
    rss_mib_max: float
    sends_ok: int
    sends_failed: int
    machine_cpu_pct: float
    """All cores together, 100 % = every core busy."""
    load_average: tuple[float, float, float]

    def line(self) -> str:
        return (
            f"{self.mode} {self.seconds:.0f} s: proxy CPU mean {self.cpu_pct_mean:.1f} % "
            f"(per second p10 {self.cpu_pct_p10:.1f}, p90 {self.cpu_pct_p90:.1f}), RSS median "
            f"{self.rss_mib_median:.0f} MiB, max {self.rss_mib_max:.0f} MiB; sends "
            f"{self.sends_ok} ok, {self.sends_failed} failed; machine CPU "
            f"{self.machine_cpu_pct:.0f} %, load average {self.load_average[0]:.1f}"
        )


def sample(
    pid: int,
    seconds: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[float, list[float], list[int]]:
    """Samples process ``pid`` once a second for ``seconds``: its mean CPU % over the whole
    span, the CPU % of each second, and each sample's RSS in bytes. Ticks are on an absolute
    schedule, so a late sample does not push the later ones back."""
    proc = psutil.Process(pid)

    def cpu() -> float:
        times = proc.cpu_times()
        return times.user + times.system

    start_t, start_cpu = clock(), cpu()
    last_t, last_cpu = start_t, start_cpu
    per_second: list[float] = []
    rss: list[int] = [proc.memory_info().rss]
    for tick in range(1, int(seconds) + 1):
        sleep(max(0.0, start_t + tick - clock()))
        now, used = clock(), cpu()
        rss.append(proc.memory_info().rss)
        if now > last_t:
            per_second.append((used - last_cpu) / (now - last_t) * 100)
        last_t, last_cpu = now, used
    mean = (last_cpu - start_cpu) / (last_t - start_t) * 100 if last_t > start_t else 0.0
    return mean, per_second, rss


def measure_leg(mode: str, pid: int, seconds: float, sends: Callable[[], tuple[int, int]]) -> Leg:
    """One leg: samples ``pid`` for ``seconds``; ``sends()`` counts (ok, failed) sends so far."""
    ok0, failed0 = sends()
    psutil.cpu_percent()
    mean, per_second, rss = sample(pid, seconds)
    machine = psutil.cpu_percent()
    ok1, failed1 = sends()
    deciles = statistics.quantiles(per_second, n=10) if len(per_second) >= 2 else [mean] * 9
    load = psutil.getloadavg()
    return Leg(
        mode=mode,
        seconds=seconds,
        cpu_pct_mean=round(mean, 2),
        cpu_pct_p10=round(deciles[0], 1),
        cpu_pct_p90=round(deciles[-1], 1),
        rss_mib_median=round(statistics.median(rss) / MIB, 1),
        rss_mib_max=round(max(rss) / MIB, 1),
        sends_ok=ok1 - ok0,
        sends_failed=failed1 - failed0,
        machine_cpu_pct=round(machine, 1),
        load_average=(round(load[0], 2), round(load[1], 2), round(load[2], 2)),
    )


def summary(legs: list[dict[str, Any]]) -> str:
    """Each leg's line, then per mode the mean CPU over its legs with their range, and the
    RSS medians' range and the highest RSS."""
    lines = [Leg(**leg).line() for leg in legs]
    for mode in dict.fromkeys(leg["mode"] for leg in legs):
        mine = [Leg(**leg) for leg in legs if leg["mode"] == mode]
        cpu = [leg.cpu_pct_mean for leg in mine]
        rss = [leg.rss_mib_median for leg in mine]
        lines.append(
            f"{mode}: {len(mine)} legs, proxy CPU mean {statistics.mean(cpu):.1f} % "
            f"(legs {min(cpu):.1f}-{max(cpu):.1f}), RSS median {min(rss):.0f}-{max(rss):.0f} MiB, "
            f"max {max(leg.rss_mib_max for leg in mine):.0f} MiB"
        )
    return "\n".join(lines)


def as_dict(leg: Leg) -> dict[str, Any]:
    return asdict(leg)
