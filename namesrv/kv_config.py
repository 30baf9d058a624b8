"""The name server's KV config (namespace → key → value), as upstream's ``KVConfigManager``.

Admin tools write it with PUT/DELETE_KV_CONFIG; the ORDER_TOPIC_CONFIG namespace feeds the
``orderTopicConf`` of routes. When a path is set the table persists as upstream's
``kvConfig.json`` (``{"configTable": {namespace: {key: value}}}``), written atomically.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)


class KVConfig:
    def __init__(
        self, on_change: Callable[[str, str], None] | None = None, path: str | None = None
    ) -> None:
        self._table: dict[str, dict[str, str]] = {}
        self._on_change = on_change
        self.path = path

    def put(self, namespace: str, key: str, value: str) -> None:
        if not namespace or not key:
            raise ValueError(
                f"KV config namespace and key must not be empty (namespace={namespace!r}, "
                f"key={key!r})"
            )
        entries = self._table.setdefault(namespace, {})
        if entries.get(key) == value:
            return
        entries[key] = value
        self._changed(namespace, key)

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        entries = self._table.get(namespace)
        if entries is None or key not in entries:
            return
        del entries[key]
        if not entries:
            del self._table[namespace]
        self._changed(namespace, key)

    def list_namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of the namespace's table, or None when it has no entry."""
        entries = self._table.get(namespace)
        return dict(entries) if entries else None

    def load(self, path: str) -> None:
        """Read ``path`` (a missing file is an empty table) and persist there from now on."""
        self.path = path
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        try:
            doc = json.loads(text)
            table = doc.get("configTable", {}) if isinstance(doc, dict) else None
            if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
                raise ValueError("configTable must map namespaces to objects")
        except ValueError as exc:
            raise ValueError(f"KV config file {path} is corrupt: {exc}") from None
        self._table = {
            str(ns): {str(k): str(v) for k, v in entries.items()}
            for ns, entries in table.items()
            if entries
        }

    def save(self, path: str | None = None) -> None:
        target = path or self.path
        if not target:
            return
        directory = os.path.dirname(os.path.abspath(target))
        os.makedirs(directory, exist_ok=True)
        data = json.dumps({"configTable": self._table}, indent=2, sort_keys=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".kvConfig.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _changed(self, namespace: str, key: str) -> None:
        if self.path:
            try:
                self.save()
            except OSError as exc:  # the change holds in memory; the operator must see why
                log.error("could not persist KV config to %s: %s", self.path, exc)
        if self._on_change is not None:
            self._on_change(namespace, key)
