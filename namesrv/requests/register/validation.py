"""What a broker may register: topic names, queue counts, perms and addresses, checked up front.

As upstream's ``TopicValidator`` for names (``protocol.topic_name``); queue counts are bounded by
config because every client builds one queue object per queue it is told about. A broker's
register that names a topic upstream's broker could never have created has that topic dropped
(:func:`bad_topic_names`; the register stages count and log it): refusing the whole register
would refuse every later one of that broker too, until its routes expired. Any other failed
check refuses the register whole with INVALID_PARAMETER and a remark naming the field, and
nothing of it is applied.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Generator, Iterable, Mapping
from dataclasses import replace
from itertools import chain
from typing import Any

from namesrv.push.subscriptions import SubscriptionError, validate_topic_name
from protocol.address import AddressError, split_host_port
from protocol.codes import Perm, ResponseCode
from protocol.errors import LimitError, ProtocolError
from protocol.register.table import RegisterTable
from protocol.route_model import QueueData, TopicConfig
from protocol.topic_name import TOPIC_NAME_CHARS, TOPIC_NAME_MAX_LENGTH, topic_name_problem

ALL_PERM_BITS = Perm.INHERIT | Perm.WRITE | Perm.READ | Perm.PRIORITY
ADDRESS_MAX_LENGTH = 255
ADDRESSES_REMEMBERED = 4096
"""Addresses whose check is remembered (each at most ``ADDRESS_MAX_LENGTH`` characters): a
cluster's brokers and their HA ports fit many times over."""
_WHITESPACE = re.compile(r"\s")
"""What ``str.isspace`` calls a space: refused anywhere in an address."""


class RegisterError(ProtocolError):
    """A register (broker or topic) that cannot be applied; nothing of it was."""

    def __init__(self, remark: str) -> None:
        super().__init__(remark, ResponseCode.INVALID_PARAMETER)


def check_address(field: str, addr: str, *, required: bool = True) -> None:
    """``HOST:PORT`` with a port in 1..65535, as a broker advertises its addresses."""
    if not addr and not required:
        return
    if not _is_address(addr):
        raise RegisterError(f"{field} must be HOST:PORT, got {addr[:ADDRESS_MAX_LENGTH]!r}")


@functools.lru_cache(maxsize=ADDRESSES_REMEMBERED)
def _is_address(addr: str) -> bool:
    """Remembered: every register and heartbeat of a broker names the same addresses."""
    if len(addr) > ADDRESS_MAX_LENGTH or _WHITESPACE.search(addr) is not None:
        return False
    try:
        split_host_port(addr)
    except AddressError:
        return False
    return True


def check_topic(field: str, topic: str) -> None:
    try:
        validate_topic_name(topic)
    except SubscriptionError as exc:
        raise RegisterError(f"{field}: {exc.remark}") from None


def check_queues(field: str, read: int, write: int, perm: int, max_queue_nums: int) -> None:
    for name, value in (("readQueueNums", read), ("writeQueueNums", write)):
        if not 0 <= value <= max_queue_nums:
            raise RegisterError(
                f"{field}.{name} is {value}, outside 0..{max_queue_nums} (registry.max_queue_nums)"
            )
    if perm & ~ALL_PERM_BITS or perm < 0:
        raise RegisterError(f"{field}.perm is {perm}, not a combination of the bits 1, 2, 4, 8")


def check_topic_configs(topic_configs: Mapping[str, TopicConfig], max_queue_nums: int) -> None:
    for name, tc in topic_configs.items():
        field = f"topicConfigTable[{name[:130]!r}]"
        check_topic(field, name)
        if tc.topic_name and tc.topic_name != name:
            raise RegisterError(f"{field}.topicName {tc.topic_name[:130]!r} differs from its key")
        check_queues(field, tc.read_queue_nums, tc.write_queue_nums, tc.perm, max_queue_nums)


@functools.cache
def _names_pattern(max_bytes: int) -> re.Pattern[str]:
    name = rf"[{TOPIC_NAME_CHARS}]{{1,{max_bytes}}}"
    return re.compile(rf"(?:{name}\n)*{name}")


def bad_topic_names(names: list[str], max_bytes: int = TOPIC_NAME_MAX_LENGTH) -> dict[str, str]:
    """The names of a slice of a register's table keys that are no topic names (name -> why),
    each name at most ``max_bytes`` long (``registry.max_topic_name_bytes``; the characters
    allowed are ASCII). The usual slice, all good, is checked in one C regex match."""
    if not names:
        return {}
    joined = "\n".join(names)
    pattern = _names_pattern(max_bytes)
    if joined.count("\n") == len(names) - 1 and pattern.fullmatch(joined) is not None:
        return {}
    bad = {}
    for name in names:
        problem = topic_name_problem(name, max_bytes)
        if problem is not None:
            if len(name) > max_bytes and max_bytes < TOPIC_NAME_MAX_LENGTH:
                problem += " (registry.max_topic_name_bytes)"
            bad[name] = problem
    return bad


def check_name_length(field: str, name: str, max_bytes: int) -> None:
    if len(name) > max_bytes:
        raise LimitError(
            f"{field}: topic name is {len(name)} bytes, longer than {max_bytes} "
            "(registry.max_topic_name_bytes)",
            "max_topic_name_bytes",
        )


def check_total_topics(topic_count: int, unknown: int, max_total: int) -> None:
    """A register that adds ``unknown`` topics to the registry's ``topic_count`` may not take
    it past ``max_total`` (``registry.max_total_topics``)."""
    if unknown and topic_count + unknown > max_total:
        raise LimitError(
            f"the register would add {unknown} topics to the {topic_count} the name server "
            f"holds, more than {max_total} in all (registry.max_total_topics)",
            "max_total_topics",
        )


def check_topic_specs(
    topic_queues: Mapping[str, Any], specs: Iterable[Any], max_queue_nums: int
) -> None:
    """:func:`check_queues` once per distinct (queues, perm) of a register's table; a bad one
    is reported with the first topic that has it."""
    for spec in specs:
        try:
            check_queues("", spec.read_queue_nums, spec.write_queue_nums, spec.perm, max_queue_nums)
        except RegisterError:
            name = next(n for n, s in topic_queues.items() if s == spec)
            field = f"topicConfigTable[{name[:130]!r}]"
            check_queues(
                field, spec.read_queue_nums, spec.write_queue_nums, spec.perm, max_queue_nums
            )
            raise


def check_queue_datas(topic: str, queue_datas: Iterable[QueueData], max_queue_nums: int) -> None:
    check_topic("topic", topic)
    for qd in queue_datas:
        field = f"queueDatas[{qd.broker_name[:130]!r}]"
        check_queues(field, qd.read_queue_nums, qd.write_queue_nums, qd.perm, max_queue_nums)


def unchecked_names(table: RegisterTable) -> list[str]:
    """The topic names of a register's table not known to pass the checks, in order: those of
    its chunks that passed before are not checked again."""
    if table.parts is None:
        return list(table.topic_queues)
    return list(chain.from_iterable(p.names for p in table.parts if not p.passed[0]))


def bad_names_steps(
    names: list[str], per_step: int, max_bytes: int
) -> Generator[None, None, dict[str, str]]:
    """:func:`bad_topic_names` of ``names``, ``per_step`` names a step."""
    bad: dict[str, str] = {}
    for start in range(0, len(names), per_step):
        if start:
            yield None
        bad.update(bad_topic_names(names[start : start + per_step], max_bytes))
    return bad


def without(table: RegisterTable, names: Collection[str]) -> RegisterTable:
    """The table less the topics ``names``: with no chunks (those read hold them), so the
    registry applies it whole and none of its chunks is taken as checked."""
    queues = {n: spec for n, spec in table.topic_queues.items() if n not in names}
    return replace(
        table,
        topic_queues=queues,
        specs=tuple(set(queues.values())),
        renamed={n: o for n, o in table.renamed.items() if n not in names},
        parts=None,
    )


def check_table(table: RegisterTable, max_queue_nums: int) -> None:
    """Keys against names, queue counts and perms once per spec, the filter servers'
    addresses; once all pass, the table's chunks are marked checked."""
    for name, other in table.renamed.items():
        field = f"topicConfigTable[{name[:130]!r}]"
        raise RegisterError(f"{field}.topicName {other[:130]!r} differs from its key")
    check_topic_specs(table.topic_queues, table.specs, max_queue_nums)
    for i, addr in enumerate(table.filter_server_list):
        check_address(f"filterServerList[{i}]", addr)
    for part in table.parts or ():
        part.passed[0] = True
