"""The name server's KV config (namespace → key → value), as upstream's ``KVConfigManager``.

Admin tools write it with PUT/DELETE_KV_CONFIG; the ORDER_TOPIC_CONFIG namespace feeds the
``orderTopicConf`` of routes. When a path is set the table persists as upstream's
``kvConfig.json`` (``{"configTable": {namespace: {key: value}}}``), rewritten atomically after
every change.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)


class KVConfigError(ValueError):
    """The persisted KV file cannot be read or parsed; the server must not start over it."""


class KVConfig:
    """In-memory KV table, optionally persisted to ``path``.

    ``on_change(namespace, key)`` is called after a put or delete that changed something. A
    ``path`` given here is loaded at once (as :meth:`load` would), so a first put never
    overwrites a file it has not read.
    """

    def __init__(
        self,
        on_change: Callable[[str, str], None] | None = None,
        path: str | None = None,
        max_bytes: int = 0,
    ) -> None:
        """``max_bytes`` (0: no bound) caps the namespaces, keys and values together: a put
        past it is refused, since any client may send PUT_KV_CONFIG."""
        self._table: dict[str, dict[str, str]] = {}
        self._max_bytes = max_bytes
        self._bytes = 0
        self._on_change = on_change
        self.path: str | None = None
        self.persist_failures = 0
        """Changes kept in memory whose write to ``path`` failed (each one is logged)."""
        if path:
            self.load(path)

    def put(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG. ValueError when the namespace or key is empty."""
        if not namespace or not key:
            raise ValueError(
                "KV config namespace and key must not be empty "
                f"(namespace={namespace!r}, key={key!r})"
            )
        entries = self._table.get(namespace, {})
        old = entries.get(key)
        if old == value:
            return
        cost = len(value) - len(old) if old is not None else _entry_bytes(namespace, key, value)
        if self._max_bytes and self._bytes + cost > self._max_bytes:
            raise ValueError(
                f"KV config would hold {self._bytes + cost} bytes, over "
                f"registry.max_kv_config_bytes={self._max_bytes}"
            )
        self._table.setdefault(namespace, entries)[key] = value
        self._bytes += cost
        self._changed(namespace, key)

    @property
    def size_bytes(self) -> int:
        """Namespaces, keys and values held, as ``max_bytes`` counts them."""
        return self._bytes

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG; deleting what is absent changes nothing. An emptied namespace goes."""
        entries = self._table.get(namespace)
        if entries is None or key not in entries:
            return
        self._bytes -= _entry_bytes(namespace, key, entries.pop(key))
        if not entries:
            del self._table[namespace]
        self._changed(namespace, key)

    def list_namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of the namespace's table, or None when the namespace has no entry."""
        entries = self._table.get(namespace)
        return dict(entries) if entries else None

    def load(self, path: str) -> None:
        """Replace the table with ``path``'s and persist there from now on.

        A missing file is an empty table; an unreadable or malformed one raises
        :class:`KVConfigError` naming the path (the server must not start and later overwrite it).
        """
        try:
            raw = Path(path).read_bytes()
        except FileNotFoundError:
            self._table = {}
            self._bytes = 0
            self.path = path
            return
        except OSError as exc:
            raise KVConfigError(f"KV config file {path} cannot be read: {exc.strerror}") from None
        try:
            table = _parse(raw)
        except (ValueError, RecursionError) as exc:
            raise KVConfigError(f"KV config file {path} is corrupt: {exc}") from None
        self._table = table
        self._bytes = sum(
            _entry_bytes(ns, key, value)
            for ns, entries in table.items()
            for key, value in entries.items()
        )
        self.path = path

    def save(self, path: str | None = None) -> None:
        """Write the table to ``path`` (default: the loaded path) via a temp file and rename."""
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
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _changed(self, namespace: str, key: str) -> None:
        if self.path:
            try:
                self.save()
            except OSError as exc:  # the change holds in memory; the operator must see why
                self.persist_failures += 1
                log.error("could not persist KV config to %s: %s", self.path, exc)
        if self._on_change is not None:
            self._on_change(namespace, key)


def _entry_bytes(namespace: str, key: str, value: str) -> int:
    return len(namespace) + len(key) + len(value)


def _parse(raw: bytes) -> dict[str, dict[str, str]]:
    """The configTable of a kvConfig.json document; ValueError saying what is wrong."""
    doc = json.loads(raw.decode("utf-8"))  # UnicodeDecodeError and JSONDecodeError: ValueError
    if not isinstance(doc, dict):
        raise ValueError("the document is not a JSON object")
    table = doc.get("configTable", {})
    if not isinstance(table, dict):
        raise ValueError("configTable is not an object")
    out: dict[str, dict[str, str]] = {}
    for namespace, entries in table.items():
        if not isinstance(entries, dict):
            raise ValueError(f"configTable[{namespace!r}] is not an object")
        for key, value in entries.items():
            if not isinstance(value, str):
                raise ValueError(f"configTable[{namespace!r}][{key!r}] is not a string")
        if entries:
            out[namespace] = dict(entries)
    return out
