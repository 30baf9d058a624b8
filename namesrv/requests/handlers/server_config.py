"""The name server's own config: read as upstream's properties text, never written remotely."""

from __future__ import annotations

import dataclasses
from typing import Any

from namesrv.config import NamesrvConfig
from namesrv.requests.context import Connection, Services, ok
from protocol.codes import ResponseCode
from protocol.frame import RemotingCommand


class ServerConfigHandlers:
    def __init__(self, services: Services) -> None:
        self.s = services

    def get_namesrv_config(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        return ok(req, body=config_properties(self.s.config).encode())

    def update_namesrv_config(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        return req.make_response(
            ResponseCode.NO_PERMISSION,
            "this name server takes config from its TOML file at start-up; "
            "edit the file and restart instead of UPDATE_NAMESRV_CONFIG",
        )


def config_properties(config: NamesrvConfig) -> str:
    """The config as upstream's properties text (``key=value`` lines), sections dotted."""
    lines: list[str] = []

    def walk(prefix: str, obj: Any) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                walk(f"{prefix}{f.name}.", value)
            elif f.metadata.get("item") is not None:
                # Accounts carry secrets: only their access keys leave the server.
                keys = ",".join(getattr(item, "access_key", "") for item in value)
                lines.append(f"{prefix}{f.name}={keys}")
            else:
                text = ",".join(value) if isinstance(value, list) else str(value)
                lines.append(f"{prefix}{f.name}={text}")

    walk("", config)
    return "\n".join(lines) + "\n"
