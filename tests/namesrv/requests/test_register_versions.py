"""A register whose body differs from the broker's last one only in its data version: the new
version is taken without reading the table, unless the table written from the last body is no
longer whole (a wipe, a deleted topic), in which case the body is read and the table restored.

Over the wire against the real server in the deterministic world (``support.memory_world``)."""

from __future__ import annotations

import pytest
import pytest_twisted
from support.memory_world import connect
from support.register_bodies import plain_body, register, topic_names

from protocol.codes import Perm, RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.route_model import DataVersion

KEY = ("DefaultCluster", "10.0.0.1:10911")


@pytest.fixture
def ns(make_world_server):
    return make_world_server()


async def send(conn, request: RemotingCommand):
    resp = await conn.request(request)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp


async def registered(ns, conn, body: bytes):
    """Send a register, answered once the world has run the server's slices."""
    resp = await conn.request(register(body))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def counts(ns) -> tuple[int, int, int]:
    stages = ns.server.processor.registers.stages
    return (
        stages.bodies_read,
        stages.versions_only,
        ns.server.registry.stats.topic_writes,
    )


def version(ns) -> DataVersion:
    return ns.server.registry.tables.live[KEY].data_version


@pytest.mark.parametrize("topics", [1_000, 10_000], ids=["small", "sliced"])
@pytest_twisted.ensureDeferred
async def test_a_new_version_of_the_same_table_is_taken_without_reading_it(ns, topics):
    names = topic_names(topics)
    conn = await connect(ns.port)
    await registered(ns, conn, plain_body(names, 1))
    ns.clock.advance(1.0)
    bumped = ns.server.detector.stats.versions_bumped
    assert counts(ns) == (1, 0, topics)

    await registered(ns, conn, plain_body(names, 2))
    assert counts(ns) == (1, 1, topics)
    assert version(ns) == DataVersion(0, 2, 2)
    await registered(ns, conn, plain_body(names, 2))  # the heartbeat of the new version
    await registered(ns, conn, plain_body(names, 10))  # a version one digit longer
    assert counts(ns) == (1, 2, topics)
    assert version(ns) == DataVersion(0, 10, 10)
    ns.clock.advance(1.0)
    assert ns.server.detector.stats.versions_bumped == bumped, "a route changed"
    assert ns.server.registry.topic_count == topics


@pytest_twisted.ensureDeferred
async def test_a_new_version_after_a_write_perm_wipe_reads_the_table_and_restores_it(ns):
    names = topic_names(100)
    conn = await connect(ns.port)
    await registered(ns, conn, plain_body(names, 1))
    wipe = RemotingCommand.request(
        RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}
    )
    await send(conn, wipe)
    table = ns.server.registry.tables.tables["broker-a"]
    assert not table["T000000"].perm & Perm.WRITE

    await registered(ns, conn, plain_body(names, 2))
    assert counts(ns)[:2] == (2, 0)
    assert ns.server.registry.tables.tables["broker-a"]["T000000"].perm == 6
    await registered(ns, conn, plain_body(names, 3))  # whole again: the next one is not read
    assert counts(ns)[:2] == (2, 1)


@pytest_twisted.ensureDeferred
async def test_a_new_version_after_a_topic_was_deleted_reads_the_table_and_puts_it_back(ns):
    names = topic_names(100)
    conn = await connect(ns.port)
    await registered(ns, conn, plain_body(names, 1))
    delete = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T000003"})
    await send(conn, delete)
    assert not ns.server.registry.route_exists("T000003")

    await registered(ns, conn, plain_body(names, 2))
    assert counts(ns)[:2] == (2, 0)
    assert ns.server.registry.route_exists("T000003")


@pytest_twisted.ensureDeferred
async def test_a_new_version_with_one_topic_changed_is_read(ns):
    names = topic_names(100)
    conn = await connect(ns.port)
    await registered(ns, conn, plain_body(names, 1))
    await registered(ns, conn, plain_body(names, 2, perms={"T000007": 4}))
    assert counts(ns)[:2] == (2, 0)
    assert ns.server.registry.tables.tables["broker-a"]["T000007"].perm == 4


@pytest_twisted.ensureDeferred
async def test_bodies_the_cut_cannot_trust_are_read_every_time(ns):
    conn = await connect(ns.port)
    # A topic named like the key: its name is a second "dataVersion" in the body.
    names = [*topic_names(10), "dataVersion"]
    for v in (1, 2, 3):
        await registered(ns, conn, plain_body(names, v))
    assert counts(ns)[:2] == (3, 0)
    assert version(ns) == DataVersion(0, 3, 3)


@pytest_twisted.ensureDeferred
async def test_a_slave_taking_a_new_version_leaves_the_masters_table_alone(ns):
    names = topic_names(50)
    conn = await connect(ns.port)
    await registered(ns, conn, plain_body(names, 1))
    slave_body = plain_body(names[:10], 1)

    def as_slave(body: bytes) -> RemotingCommand:
        return register(body, addr="10.0.0.9:10911", broker_id=1)

    await send(conn, as_slave(slave_body))
    await send(conn, as_slave(plain_body(names[:10], 2)))
    assert counts(ns)[:2] == (2, 1)
    live = ns.server.registry.tables.live[("DefaultCluster", "10.0.0.9:10911")]
    assert live.data_version == DataVersion(0, 2, 2)
    assert len(ns.server.registry.tables.tables["broker-a"]) == 50
