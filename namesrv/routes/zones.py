"""Zone-mode routes: a lookup that names its zone sees the broker groups of that zone.

Upstream applies the rule to every GET_ROUTEINFO_BY_TOPIC answer (its ``ZoneRouteRPCHook``),
and so does this server:

- a request is in zone mode when its ``__ZONE_MODE`` field reads "true" in any letter case and
  its ``__ZONE_NAME`` field is not blank; any other value leaves the route whole;
- a broker group is kept when its zone name equals the requested one ignoring letter case, or
  when it has no master at the moment (reading from a slave beats reading nothing); groups that
  declared no zone are dropped;
- the queue datas of dropped groups go with them, and so do their addresses' filter servers;
- a topic found only in other zones still answers SUCCESS, with empty lists.
"""

from __future__ import annotations

import dataclasses

from namesrv.routes.tables import MASTER_ID
from protocol.route_model import TopicRouteData


def requested_zone(zone_mode: str | None, zone_name: str | None) -> str | None:
    """The zone a lookup asks for, or None when it asks for the whole route."""
    if zone_mode is None or zone_mode.lower() != "true":
        return None
    if zone_name is None or not zone_name.strip():
        return None
    return zone_name


def same_zone(declared: str | None, requested: str) -> bool:
    """Zone names compared ignoring letter case, character by character (so a character whose
    upper case is two characters never equals those two)."""
    if declared is None or len(declared) != len(requested):
        return False
    return all(
        a == b or a.upper() == b.upper() or a.lower() == b.lower()
        for a, b in zip(declared, requested, strict=True)
    )


def filter_by_zone(route: TopicRouteData, zone: str) -> TopicRouteData:
    """``route`` as a lookup in zone ``zone`` sees it."""
    kept = []
    dropped_addrs: set[str] = set()
    dropped_names: set[str] = set()
    for broker in route.broker_datas:
        if MASTER_ID not in broker.broker_addrs or same_zone(broker.zone_name, zone):
            kept.append(broker)
        else:
            dropped_names.add(broker.broker_name)
            dropped_addrs.update(broker.broker_addrs.values())
    if not dropped_names:
        return route
    return dataclasses.replace(
        route,
        broker_datas=kept,
        queue_datas=[q for q in route.queue_datas if q.broker_name not in dropped_names],
        filter_server_table={
            addr: servers
            for addr, servers in route.filter_server_table.items()
            if addr not in dropped_addrs
        },
    )
