"""A name server on loopback whose timers run on a fake clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import reactor, task

from namesrv.config import IN_MEMORY, NamesrvConfig, from_mapping
from namesrv.push.pressure import Sample
from namesrv.server import NameServer


@dataclass
class FakeSampler:
    cpu: float = 1.0
    memory: float = 1.0

    def __call__(self) -> Sample:
        return Sample(cpu_percent=self.cpu, memory_percent=self.memory)


@dataclass
class Running:
    server: NameServer
    port: int
    clock: task.Clock
    sampler: FakeSampler


def isolated_config(raw: dict[str, Any] | None = None) -> NamesrvConfig:
    """``from_mapping(raw)`` with the KV config and the replay record in memory unless ``raw``
    names files: a test never reads or writes the state files of the home directory (the
    default paths)."""
    raw = {section: dict(values) for section, values in (raw or {}).items()}
    raw.setdefault("registry", {}).setdefault("kv_config_path", IN_MEMORY)
    raw.setdefault("acl", {}).setdefault("replay_record_path", IN_MEMORY)
    return from_mapping(raw)


def world_config(listen: str, overrides: dict[str, Any]) -> NamesrvConfig:
    """The config of a name server in a world of tests on one clock: listening on ``listen``,
    the start-up window off (a fresh server answers TOPIC_NOT_EXIST for a topic no broker
    registered, as it does once warm), brokers that never expire and no pressure sampling,
    unless ``overrides`` (config sections) say otherwise."""
    raw: dict[str, Any] = {
        "server": {"listen": listen, "shutdown_grace_ms": 0, "wait_for_service_ms": 0},
        "registry": {"broker_expiry_ms": 100_000_000},
        "pressure": {"enabled": False},
    }
    for section, values in overrides.items():
        raw.setdefault(section, {}).update(values)
    return isolated_config(raw)


def plain_server_config(overrides: dict[str, Any] | None = None) -> NamesrvConfig:
    """A test server's config: on 127.0.0.1, port 0, with ``overrides`` (config sections).

    The start-up window is off unless a test is about it: a fresh test server answers
    TOPIC_NOT_EXIST for a topic no broker registered, as it does once warm."""
    raw: dict[str, Any] = {
        "server": {"listen": "127.0.0.1:0", "shutdown_grace_ms": 0, "wait_for_service_ms": 0}
    }
    for section, values in (overrides or {}).items():
        raw.setdefault(section, {}).update(values)
    return isolated_config(raw)


def running_server(overrides: dict[str, Any] | None = None) -> Iterator[Running]:
    clock = task.Clock()
    sampler = FakeSampler()
    # The timer stands still: per-turn time budgets never run out, so slices are decided by
    # counts alone and what a tick sends does not depend on how loaded the machine is.
    server = NameServer(
        plain_server_config(overrides),
        reactor,
        clock=clock,
        sampler=sampler,
        epoch="e1",
        timer=lambda: 0.0,
    )
    port = server.listen().getHost().port  # type: ignore[attr-defined]
    try:
        yield Running(server, port, clock, sampler)
    finally:
        pytest_twisted.blockon(server.stop(grace_ms=0))


@pytest.fixture
def make_server() -> Iterator[Callable[..., Running]]:
    """Start servers with config overrides from inside a test; all are stopped afterwards."""
    started: list[Iterator[Running]] = []

    def make(overrides: dict[str, Any] | None = None) -> Running:
        servers = running_server(overrides)
        running = next(servers)
        started.append(servers)
        return running

    yield make
    for servers in started:
        next(servers, None)
