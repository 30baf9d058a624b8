"""The sandbox's fleet without a name server: its bound on brokers and its command errors."""

from __future__ import annotations

import pytest_twisted
from twisted.internet import reactor

from namesrv_sandbox.fleet import MAX_BROKERS, Fleet


@pytest_twisted.ensureDeferred
async def test_the_fleet_holds_at_most_max_brokers_and_names_what_it_cannot_do():
    fleet = Fleet(reactor, [], "DefaultCluster", {"T": 1})
    try:
        for i in range(MAX_BROKERS):
            answer = await fleet.command(f"start b{i}")
            assert answer["state"] == "running"
        assert await fleet.command("start one-more") == {
            "error": f"a sandbox holds at most {MAX_BROKERS} brokers"
        }
        assert await fleet.command("start b0") == {"error": "broker b0 is running"}
        assert await fleet.command("slow b0 x") == {
            "error": "expected a number of milliseconds, got 'x'"
        }
        assert (await fleet.command("bogus"))["error"] == "unknown command 'bogus'; try help"
        stopped = await fleet.command("stop")
        assert {b["state"] for b in stopped["brokers"]} == {"stopped"}
        assert await fleet.command("fail") == {"error": "no broker is running"}
        assert (await fleet.command("start b0"))["state"] == "running"  # a stopped one: again
        port = fleet.slots["b0"].port
        restarted = await fleet.command("restart b0")
        assert [(b["state"], b["addr"]) for b in restarted["brokers"]] == [
            ("running", f"127.0.0.1:{port}")
        ]
    finally:
        await fleet.stop_all()
