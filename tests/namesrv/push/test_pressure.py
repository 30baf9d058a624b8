from __future__ import annotations

import logging

import pytest

from namesrv.config import PressureConfig
from namesrv.push.pressure import PressureMonitor, PsutilSampler, Sample

CONFIG = PressureConfig(
    cpu_high_percent=90.0, cpu_low_percent=75.0, memory_high_percent=90.0, memory_low_percent=85.0
)


class FakeSampler:
    def __init__(self) -> None:
        self.next = Sample(0.0, 0.0)
        self.calls = 0

    def __call__(self) -> Sample:
        self.calls += 1
        return self.next


def monitor(config: PressureConfig = CONFIG) -> tuple[PressureMonitor, FakeSampler, list]:
    sampler = FakeSampler()
    seen: list[tuple[bool, Sample]] = []
    mon = PressureMonitor(sampler, config, on_transition=lambda d, s: seen.append((d, s)))
    return mon, sampler, seen


def feed(mon: PressureMonitor, sampler: FakeSampler, cpu: float, mem: float) -> bool:
    sampler.next = Sample(cpu, mem)
    return mon.sample_now()


def test_starts_healthy_with_no_sample() -> None:
    mon, _, _ = monitor()
    assert not mon.degraded
    assert mon.last_sample is None
    assert mon.transitions == 0


@pytest.mark.parametrize(("cpu", "mem"), [(95.0, 10.0), (10.0, 95.0), (95.0, 95.0)])
def test_either_resource_over_its_high_mark_degrades(cpu: float, mem: float) -> None:
    mon, sampler, seen = monitor()
    assert feed(mon, sampler, cpu, mem) is True
    assert mon.degraded
    assert seen == [(True, Sample(cpu, mem))]
    assert mon.transitions == 1


def test_exactly_at_high_mark_is_not_over_it() -> None:
    mon, sampler, _ = monitor()
    assert feed(mon, sampler, 90.0, 90.0) is False


def test_recovers_only_when_both_are_below_their_low_marks() -> None:
    mon, sampler, seen = monitor()
    feed(mon, sampler, 95.0, 95.0)
    assert feed(mon, sampler, 50.0, 88.0) is True  # memory still between the marks
    assert feed(mon, sampler, 80.0, 50.0) is True  # cpu still between the marks
    assert feed(mon, sampler, 75.0, 50.0) is True  # at the low mark is not below it
    assert feed(mon, sampler, 74.9, 84.9) is False
    assert [d for d, _ in seen] == [True, False]
    assert mon.transitions == 2


def test_between_the_marks_keeps_the_current_state() -> None:
    mon, sampler, seen = monitor()
    for _ in range(3):
        assert feed(mon, sampler, 85.0, 87.0) is False
    feed(mon, sampler, 91.0, 0.0)
    for _ in range(3):
        assert feed(mon, sampler, 85.0, 87.0) is True
    assert len(seen) == 1


def test_last_sample_is_kept() -> None:
    mon, sampler, _ = monitor()
    feed(mon, sampler, 12.5, 40.0)
    assert mon.last_sample == Sample(12.5, 40.0)


def test_disabled_monitor_samples_but_never_degrades() -> None:
    mon, sampler, seen = monitor(PressureConfig(enabled=False))
    assert feed(mon, sampler, 100.0, 100.0) is False
    assert not mon.degraded
    assert mon.last_sample == Sample(100.0, 100.0)
    assert seen == []


def test_sampler_failure_keeps_state_and_is_counted() -> None:
    def broken() -> Sample:
        raise OSError("proc unreadable")

    mon = PressureMonitor(broken, CONFIG)
    assert mon.sample_now() is False
    assert mon.sample_errors == 1
    assert mon.last_sample is None


def test_psutil_sampler_returns_percentages() -> None:
    sample = PsutilSampler()()
    assert sample.cpu_percent >= 0.0
    assert 0.0 <= sample.memory_percent <= 100.0


def test_a_failing_sampler_logs_once_per_episode_not_once_per_sample(caplog) -> None:
    failing = [True]

    def sampler() -> Sample:
        if failing[0]:
            raise OSError(24, "Too many open files")
        return Sample(1.0, 1.0)

    mon = PressureMonitor(sampler, CONFIG)
    with caplog.at_level(logging.DEBUG, logger="namesrv.push.pressure"):
        for _ in range(50):
            mon.sample_now()
        failing[0] = False
        mon.sample_now()
        failing[0] = True
        mon.sample_now()
    lines = [r for r in caplog.records if r.name == "namesrv.push.pressure"]
    assert [r.levelname for r in lines] == ["ERROR", "WARNING", "ERROR"]
    assert "Too many open files" in lines[0].getMessage() and lines[0].exc_info is None
    assert "after 50 failed samples" in lines[1].getMessage()
    assert mon.sample_errors == 51
