"""Whether the process is under enough pressure to stop pushing notifications.

Push switches itself off while resources are tight. Two thresholds per resource give
hysteresis, so a load hovering around one threshold does not flap push on and off every
sample.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from namesrv.config import PressureConfig
from namesrv.ops.clock import Every

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Sample:
    cpu_percent: float
    """This process's CPU use; 100 is one core fully busy."""
    memory_percent: float
    """The host's memory in use."""


class PsutilSampler:
    """Samples the real process and host, without blocking the reactor.

    Process CPU is measured since the previous call, so the constructor primes the counter and
    each sample covers one sampling interval. One core is the meaningful limit: the reactor
    runs on one thread, so 100% means notifications compete with request handling.
    """

    def __init__(self) -> None:
        self._process = psutil.Process()
        self._process.cpu_percent(None)

    def __call__(self) -> Sample:
        return Sample(
            cpu_percent=self._process.cpu_percent(None),
            memory_percent=psutil.virtual_memory().percent,
        )


class PressureMonitor:
    """Degrades when CPU or memory passes its high mark; recovers when both are below the low."""

    def __init__(
        self,
        sampler: Callable[[], Sample],
        config: PressureConfig,
        on_transition: Callable[[bool, Sample], None] | None = None,
    ) -> None:
        self._sampler = sampler
        self._config = config
        self._on_transition = on_transition
        self._degraded = False
        self._last: Sample | None = None
        self.transitions = 0
        self.sample_errors = 0
        self._failing = 0
        """Consecutive failed samples: the current failing episode."""

    def figures(self) -> dict[str, int]:
        """The monitor's figures for the server's stats."""
        return {"degraded": int(self._degraded), "pressure_sample_errors": self.sample_errors}

    @property
    def degraded(self) -> bool:
        return self._degraded

    @property
    def last_sample(self) -> Sample | None:
        return self._last

    def start(self, every: Every) -> None:
        """With ``pressure.enabled``, sample every ``pressure.sample_interval_ms`` on ``every``."""
        if self._config.enabled:
            every(self._config.sample_interval_ms, self.sample_now)

    def sample_now(self) -> bool:
        """Take one sample and return whether the process is degraded after it.

        A sampler failure keeps the current state (logged and counted): the monitor must never
        stop the timer that drives it. With ``config.enabled`` False samples are still taken, for
        observability, but the monitor never degrades.
        """
        try:
            sample = self._sampler()
        except Exception as exc:
            # Logged once per failing episode: out of file descriptors, psutil fails on every
            # sample and a line per second would bury the cause.
            self.sample_errors += 1
            self._failing += 1
            if self._failing == 1:
                log.error(
                    "pressure sampling failed (%s: %s); keeping degraded=%s until it works again",
                    type(exc).__name__,
                    exc,
                    self._degraded,
                )
            return self._degraded
        if self._failing:
            log.warning("pressure sampling works again after %d failed samples", self._failing)
            self._failing = 0
        self._last = sample
        if not self._config.enabled:
            return self._degraded
        cfg = self._config
        if self._degraded:
            relieved = (
                sample.cpu_percent < cfg.cpu_low_percent
                and sample.memory_percent < cfg.memory_low_percent
            )
            if relieved:
                self._transition(False, sample)
        else:
            pressed = (
                sample.cpu_percent > cfg.cpu_high_percent
                or sample.memory_percent > cfg.memory_high_percent
            )
            if pressed:
                self._transition(True, sample)
        return self._degraded

    def _transition(self, degraded: bool, sample: Sample) -> None:
        self._degraded = degraded
        self.transitions += 1
        log.info(
            "pressure %s: cpu %.1f%%, memory %.1f%%",
            "high, degrading" if degraded else "relieved, recovering",
            sample.cpu_percent,
            sample.memory_percent,
        )
        if self._on_transition is not None:
            self._on_transition(degraded, sample)
