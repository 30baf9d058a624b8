"""Register tables read in content-cut chunks: the chunk cache and the registry's memo of the
chunks a broker's table holds (what lets a 100,000-topic re-register skip what did not change).

Every figure asserted is a counter or a value read back from the registry; no durations.
"""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import replace
from typing import Any

import pytest
from support import register_oracle
from support.register_bodies import compressed_body, plain_body, topic_names
from twisted.internet.task import Clock

from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.register_request import RegisterRequest
from namesrv.routes.registry import RouteRegistry
from protocol.codes import Perm
from protocol.register.read import ChunkCache, register_body_steps
from protocol.register.table import RegisterTable, TablePart
from protocol.route_model import DataVersion

CHUNK = 16 * 1024
"""Bytes per chunk in these tests: a 10,000-topic table is about a hundred chunks."""


def read(body: bytes, cache: ChunkCache | None = None) -> RegisterTable:
    steps = register_body_steps(
        body, False, 500, topics_per_step=1_000, bytes_per_step=CHUNK, chunk_cache=cache
    )
    while True:
        try:
            next(steps)
        except StopIteration as done:
            table: RegisterTable = done.value
            return table


class Heard:
    def __init__(self) -> None:
        self.topics: list[str] = []

    def __call__(self, topics: Any, cause: ChangeCause) -> None:
        self.topics.extend(topics)


def registry(slice_topics: int = 1_000) -> tuple[RouteRegistry, Heard]:
    heard = Heard()
    return RouteRegistry(Clock(), listener=heard, slice_topics=slice_topics), heard


def submit(
    reg: RouteRegistry,
    table: RegisterTable | None,
    version: int,
    *,
    name: str = "broker-a",
    broker_id: int = 0,
    addr: str = "10.0.0.1:10911",
    acting: bool = False,
) -> Any:
    """REGISTER_BROKER of ``table`` (None: the heartbeat, the very body of the last one)."""
    return reg.register_broker(
        RegisterRequest(
            cluster_name="C1",
            broker_addr=addr,
            broker_name=name,
            broker_id=broker_id,
            ha_server_addr="10.0.0.1:10912",
            topic_configs=None if table is None else table.topic_queues,
            data_version=DataVersion(0, version, version),
            filter_server_list=[],
            heartbeat_timeout_ms=None,
            enable_acting_master=acting,
            channel=addr,
            topic_queue_mapping_info={},
            table_parts=None if table is None else table.parts,
        )
    )


def register(reg: RouteRegistry, table: RegisterTable, version: int, **kw: Any) -> None:
    """:func:`submit`, with its table applied to the end."""
    result = submit(reg, table, version, **kw)
    while result.job is not None and not result.job.done:
        reg.run_jobs()


def perm_of(reg: RouteRegistry, topic: str, name: str = "broker-a") -> int:
    route = reg.get_route(topic)
    assert route is not None
    return next(q.perm for q in route.queue_datas if q.broker_name == name)


# -- the reader ----------------------------------------------------------------------------------


def test_a_table_is_read_in_parts_that_list_every_topic_once_in_order():
    names = topic_names(10_000)
    table = read(plain_body(names, 1))
    assert table.parts is not None and len(table.parts) > 20
    assert [n for part in table.parts for n in part.names] == names
    assert table == register_oracle.read_register_body(plain_body(names, 1), False, 500)


def test_adding_one_topic_changes_only_the_chunks_near_it():
    names = topic_names(10_000)
    before = read(plain_body(names, 1)).parts
    grown = [*names[:5_000], "Inserted", *names[5_000:]]
    after = read(plain_body(grown, 2)).parts
    assert before is not None and after is not None
    changed = {p.key for p in after} - {p.key for p in before}
    assert 1 <= len(changed) <= 2  # the inserted topic's chunk (and at most its neighbour)


def test_a_cached_read_equals_a_fresh_one_and_decodes_nothing_again():
    cache = ChunkCache(64 << 20)
    body = plain_body(topic_names(10_000), 1)
    first = read(body, cache)
    assert first.parts is not None
    misses = cache.misses
    again = read(plain_body(topic_names(10_000), 7), cache)  # another version, same table
    assert again == register_oracle.read_register_body(
        plain_body(topic_names(10_000), 7), False, 500
    )
    assert cache.misses == misses and cache.hits == len(first.parts)


def test_the_chunk_cache_holds_at_most_its_bytes_oldest_out_first():
    cache = ChunkCache(100 * 1024)
    for i in range(50):  # 50 distinct tables of ~2 chunks each, nothing in common
        read(plain_body([f"B{i}-{n}" for n in topic_names(150)], 1), cache)
        assert cache.bytes <= cache.max_bytes
    assert 0 < len(cache) < 50
    oldest = plain_body([f"B0-{n}" for n in topic_names(150)], 1)
    misses = cache.misses
    read(oldest, cache)
    assert cache.misses > misses  # evicted long ago: decoded again


def test_a_chunk_larger_than_the_cache_is_read_but_not_kept():
    cache = ChunkCache(1024)
    table = read(plain_body(topic_names(1_000), 1), cache)
    assert len(table.topic_queues) == 1_000 and len(cache) == 0 and cache.bytes == 0


def test_a_table_listing_a_topic_twice_or_an_unusual_chunk_has_no_parts():
    names = topic_names(2_000)
    doc = json.loads(plain_body(names, 1))
    text = json.dumps(doc, separators=(",", ":"))
    first = '"T000000":' + json.dumps(
        doc["topicConfigSerializeWrapper"]["topicConfigTable"]["T000000"], separators=(",", ":")
    )
    end = text.index('},"topicQueueMappingInfoMap"')  # the end of the table
    twice = text[:end] + "," + first + text[end:]
    # The first chunk lists it and the last again (the later wins, as in one decode).
    table = read(twice.encode())
    assert table.parts is None and len(table.topic_queues) == 2_000
    doc["topicConfigSerializeWrapper"]["topicConfigTable"]["T001000"]["perm"] = "6"  # quoted
    unusual = read(json.dumps(doc, separators=(",", ":")).encode())
    assert unusual.parts is None and unusual.topic_queues["T001000"].perm == 6


# -- the registry's memo -------------------------------------------------------------------------


def test_a_new_data_version_with_the_same_table_skips_every_chunk_and_reports_nothing():
    reg, heard = registry()
    names = topic_names(10_000)
    register(reg, read(plain_body(names, 1)), 1)
    writes, heard.topics = reg.stats.topic_writes, []
    register(reg, read(plain_body(names, 2)), 2)
    assert reg.stats.topic_writes == writes  # no topic visited
    assert reg.stats.topics_skipped == 10_000
    assert heard.topics == []
    assert reg.route_exists(names[-1])


def test_one_changed_topic_applies_only_its_chunk_and_reports_only_it():
    reg, heard = registry()
    names = topic_names(10_000)
    register(reg, read(plain_body(names, 1)), 1)
    writes, heard.topics = reg.stats.topic_writes, []
    register(reg, read(plain_body(names, 2, perms={"T004321": 4})), 2)
    assert heard.topics == ["T004321"]
    assert 0 < reg.stats.topic_writes - writes < 1_000  # its chunk, not the table
    assert perm_of(reg, "T004321") == 4


@pytest.mark.parametrize("outside", ["wipe", "delete", "register_topic"])
def test_a_write_outside_registers_makes_the_next_register_apply_everything(outside):
    reg, _ = registry()
    names = topic_names(5_000)
    register(reg, read(plain_body(names, 1)), 1)
    if outside == "wipe":
        reg.wipe_write_perm("broker-a")
        assert perm_of(reg, "T000007") == Perm.READ
    elif outside == "delete":
        reg.delete_topic("T000007")
        assert not reg.route_exists("T000007")
    else:
        route = reg.get_route("T000007")
        assert route is not None
        qd = route.queue_datas[0]
        reg.register_topic("T000007", [type(qd)(qd.broker_name, 1, 1, qd.perm, 0)])
    skipped = reg.stats.topics_skipped
    register(reg, read(plain_body(names, 2)), 2)
    assert reg.stats.topics_skipped == skipped  # the memo was forgotten
    route = reg.get_route("T000007")
    assert route is not None and route.queue_datas[0].read_queue_nums == 8
    assert perm_of(reg, "T000007") == 6


def test_a_broker_that_left_and_returns_applies_its_whole_table():
    reg, _ = registry()
    names = topic_names(3_000)
    register(reg, read(plain_body(names, 1)), 1)
    reg.unregister_broker(
        cluster_name="C1", broker_addr="10.0.0.1:10911", broker_name="broker-a", broker_id=0
    )
    while reg.pending_jobs:
        reg.run_jobs()
    assert not reg.route_exists(names[0])
    register(reg, read(plain_body(names, 1)), 1)
    assert reg.route_exists(names[0]) and reg.route_exists(names[-1])


def test_a_superseded_register_leaves_no_memo_behind():
    reg, _ = registry(slice_topics=500)
    names = topic_names(5_000)
    submit(reg, read(plain_body(names, 1)), 1)
    reg.run_jobs()  # one slice of ten, then a newer register of the same table arrives
    register(reg, read(plain_body(names, 2)), 2)
    assert reg.stats.topics_skipped == 0
    assert all(reg.route_exists(n) for n in names)


def test_parts_applied_read_only_are_not_skipped_for_a_master():
    reg, _ = registry()
    names = topic_names(3_000)
    # A prime slave (acting master on, no master): its queue data is applied read-only.
    register(reg, read(plain_body(names, 1)), 1, broker_id=1, addr="10.0.0.2:10911", acting=True)
    assert perm_of(reg, names[0]) == Perm.READ
    register(reg, read(plain_body(names, 1)), 1, acting=True)
    assert perm_of(reg, names[0]) == 6
    assert reg.stats.topics_skipped == 0


def test_parts_are_typed_for_the_registry():
    table = read(plain_body(topic_names(100), 1))
    assert table.parts is not None and isinstance(table.parts[0], TablePart)


def test_a_heartbeat_between_two_registers_keeps_the_memo():
    reg, heard = registry()
    names = topic_names(5_000)
    register(reg, read(plain_body(names, 1)), 1)
    # The heartbeat: the very body of the last register, handed over as no table at all.
    result = submit(reg, None, 1)
    assert result.job is None
    heard.topics = []
    register(reg, read(plain_body(names, 2, perms={"T000042": 4})), 2)
    assert heard.topics == ["T000042"]
    assert reg.stats.topics_skipped > 4_000


# -- compressed bodies -----------------------------------------------------------------------------


def compressed_read(body: bytes, cache: ChunkCache | None = None) -> RegisterTable:
    steps = register_body_steps(body, True, 479, topics_per_step=500, chunk_cache=cache)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            table: RegisterTable = done.value
            return table


def registry_state(reg: RouteRegistry) -> dict[str, Any]:
    """Every topic's route as a lookup answers it."""
    routes = {}
    for topic in sorted(reg.all_topics()):
        route = reg.get_route(topic)
        assert route is not None
        routes[topic] = (route.queue_datas, route.broker_datas)
    return routes


def random_compressed_body(rng: random.Random, version: int) -> bytes:
    """A 5.x broker's compressed body (or, one time in three, a 4.x one's) of a random table."""
    v4 = rng.random() < 1 / 3
    specs = [
        (rng.choice((1, 4, 8, 16)), rng.choice((1, 4, 8)), rng.choice((2, 4, 6))) for _ in "ab"
    ]
    names = rng.sample(topic_names(3_000), rng.randint(0, 3_000))
    out = bytearray(dv_chunk(version) + int32(len(names)))
    for name in names:
        read, write, perm = rng.choice(specs)
        attrs = "" if v4 else rng.choice((" {}", " {}", ' {"+message.type":"NORMAL"}'))
        text = f"{name} {read} {write} {perm} {rng.choice(('SINGLE_TAG', 'MULTI_TAG'))}{attrs}"
        out += int32(len(text)) + text.encode()
    out += int32(2) + b"[]" + (b"" if v4 else int32(0))
    return zlib.compress(bytes(out))


def int32(value: int) -> bytes:
    return value.to_bytes(4, "big", signed=True)


def dv_chunk(version: int) -> bytes:
    doc = json.dumps({"counter": version, "stateVersion": 0, "timestamp": version}).encode()
    return int32(len(doc)) + doc


@pytest.mark.parametrize("seed", range(12))
def test_compressed_registers_leave_the_state_the_general_reader_would(seed):
    """Registers of random compressed tables (some topics kept, some dropped, some changed,
    in chunks found in the cache or not) leave every route as the same registers read by the
    general per-topic reader do."""
    rng = random.Random(seed)
    cache = ChunkCache(256 * 1024)
    fast_reg, _ = registry()
    general_reg, _ = registry()
    for version in range(1, 6):
        for name in ("broker-a", "broker-b"):
            body = (
                compressed_body(topic_names(2_000), version)
                if rng.random() < 0.3
                else (random_compressed_body(rng, version))
            )
            addr = "10.0.0.1:10911" if name == "broker-a" else "10.0.0.2:10911"
            fast = compressed_read(body, cache)
            general = register_oracle.read_compressed_general(body, 479)
            assert fast == general
            register(fast_reg, fast, version, name=name, addr=addr)
            register(general_reg, replace(general, parts=None), version, name=name, addr=addr)
            assert registry_state(fast_reg) == registry_state(general_reg)


def test_a_compressed_re_register_with_a_new_version_skips_every_chunk():
    reg, heard = registry()
    cache = ChunkCache(64 << 20)
    names = topic_names(10_000)
    register(reg, compressed_read(compressed_body(names, 1), cache), 1)
    writes, heard.topics = reg.stats.topic_writes, []
    again = compressed_read(compressed_body(names, 2), cache)
    assert again.parts is not None and len(again.parts) > 5
    register(reg, again, 2)
    assert reg.stats.topic_writes == writes  # no topic visited
    assert reg.stats.topics_skipped == 10_000
    assert heard.topics == []
