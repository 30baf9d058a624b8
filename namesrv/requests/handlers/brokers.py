"""Broker requests: unregister, heartbeat, data-version query and member group."""

from __future__ import annotations

from namesrv.ops.audit_events import BrokerLeft
from namesrv.requests.context import Connection, Services, audit, ok
from protocol import bodies, headers, register_body
from protocol.frame import RemotingCommand


class BrokerHandlers:
    """The requests by which a broker leaves, keeps its entry and asks after its group (its
    register has a wing of its own: ``namesrv.requests.register``)."""

    def __init__(self, services: Services) -> None:
        self.s = services

    def unregister_broker(
        self, conn: Connection, req: RemotingCommand, h: headers.UnregisterBrokerRequestHeader
    ) -> RemotingCommand:
        departed = self.s.registry.unregister_broker(
            cluster_name=h.cluster_name,
            broker_addr=h.broker_addr,
            broker_name=h.broker_name,
            broker_id=h.broker_id,
        )
        for event in departed:
            audit(self.s, BrokerLeft.of(event), conn, req)
        return ok(req)

    def broker_heartbeat(
        self, conn: Connection, req: RemotingCommand, h: headers.BrokerHeartbeatRequestHeader
    ) -> RemotingCommand:
        self.s.registry.broker_heartbeat(cluster_name=h.cluster_name, broker_addr=h.broker_addr)
        return ok(req)

    def query_data_version(
        self, conn: Connection, req: RemotingCommand, h: headers.QueryDataVersionRequestHeader
    ) -> RemotingCommand:
        version = register_body.decode_data_version(req.body)
        changed = self.s.registry.query_data_version_changed(
            cluster_name=h.cluster_name, broker_addr=h.broker_addr, data_version=version
        )
        return ok(req, headers.QueryDataVersionResponseHeader(changed=changed).to_wire())

    def get_broker_member_group(
        self, conn: Connection, req: RemotingCommand, h: headers.GetBrokerMemberGroupRequestHeader
    ) -> RemotingCommand:
        addrs = self.s.registry.broker_member_group(h.cluster_name, h.broker_name)
        return ok(req, body=bodies.encode_broker_member_group(h.cluster_name, h.broker_name, addrs))
