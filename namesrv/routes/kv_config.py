"""The name server's KV config (namespace → key → value), as upstream's ``KVConfigManager``.

Admin tools write it with PUT/DELETE_KV_CONFIG; the ORDER_TOPIC_CONFIG namespace feeds the
``orderTopicConf`` of routes. When a path is set the table persists as upstream's
``kvConfig.json`` (``{"configTable": {namespace: {key: value}}}``), rewritten whole by a thread
of its own after changes (:class:`~namesrv.ops.state_file.StateFile`: coalesced, atomic, never
on the event loop).

The bound counts what the table occupies, not only its text: each entry is charged the memory
of its key and value strings and a dict slot, each namespace its string and dict, so many tiny
entries cost what they hold. A namespace's listing is encoded once per change of it and shared
by every answer until the next.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path

import msgspec

from namesrv.ops.state_file import StateFile, write_atomically
from protocol.bodies import encode_kv_table

log = logging.getLogger(__name__)

ENTRY_SLOT_BYTES = 80
"""What a key's slot in its namespace's dict costs beyond its two strings: the entry, its
index and the table's room to grow (a dict is at most two thirds full, and doubles)."""
NAMESPACE_BYTES = 240
"""What a namespace costs beyond its name: its own (small) dict and its slot in the table."""
_WRITE_CHUNK_ENTRIES = 2_000
"""Entries the writer encodes per piece of the file: each piece holds the interpreter lock
for well under a millisecond."""


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
        """``max_bytes`` (0: no bound) caps what the table occupies (see the module's note): a
        put past it is refused, since any client may send PUT_KV_CONFIG."""
        self._table: dict[str, dict[str, str]] = {}
        self._max_bytes = max_bytes
        self._bytes = 0
        self._on_change = on_change
        self._listings: dict[str, bytes] = {}
        """namespace -> its encoded KVTable body, until the namespace changes."""
        self.listing_builds = 0
        """Listings encoded: once per change of a namespace that is listed."""
        self.path: str | None = None
        self._file: StateFile | None = None
        if path:
            self.load(path)

    def put(self, namespace: str, key: str, value: str) -> bool:
        """PUT_KV_CONFIG; False when the key held that value already. ValueError when the
        namespace or key is empty or the bound is passed."""
        if not namespace or not key:
            raise ValueError(
                "KV config namespace and key must not be empty "
                f"(namespace={namespace!r}, key={key!r})"
            )
        entries = self._table.get(namespace)
        old = entries.get(key) if entries is not None else None
        if old == value:
            return False
        if old is not None:
            cost = sys.getsizeof(value) - sys.getsizeof(old)
        else:
            cost = _entry_bytes(key, value)
            if entries is None:
                cost += _namespace_bytes(namespace)
        if self._max_bytes and cost > 0 and self._bytes + cost > self._max_bytes:
            raise ValueError(
                f"KV config would occupy {self._bytes + cost} bytes, over "
                f"registry.max_kv_config_bytes={self._max_bytes} (each entry counts its key and "
                f"value strings and {ENTRY_SLOT_BYTES} bytes of slot)"
            )
        if entries is None:
            entries = self._table[namespace] = {}
        entries[key] = value
        self._bytes += cost
        self._changed(namespace, key)
        return True

    @property
    def size_bytes(self) -> int:
        """What the table occupies, as ``max_bytes`` counts it."""
        return self._bytes

    @property
    def entry_count(self) -> int:
        return sum(map(len, self._table.values()))

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> bool:
        """DELETE_KV_CONFIG; deleting what is absent changes nothing (False). An emptied
        namespace goes."""
        entries = self._table.get(namespace)
        if entries is None or key not in entries:
            return False
        self._bytes -= _entry_bytes(key, entries.pop(key))
        if not entries:
            del self._table[namespace]
            self._bytes -= _namespace_bytes(namespace)
        self._changed(namespace, key)
        return True

    def list_namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of the namespace's table, or None when the namespace has no entry."""
        entries = self._table.get(namespace)
        return dict(entries) if entries else None

    def keys_of(self, namespace: str) -> list[str]:
        """The namespace's keys (a copy: the table may change while the caller walks it)."""
        return list(self._table.get(namespace, ()))

    def listing(self, namespace: str) -> bytes | None:
        """The namespace as a KVTable body (upstream's ``{"table": {...}}``), encoded once per
        change of the namespace; None when it has no entry."""
        body = self._listings.get(namespace)
        if body is None:
            entries = self._table.get(namespace)
            if not entries:
                return None
            body = self._listings[namespace] = encode_kv_table(entries)
            self.listing_builds += 1
        return body

    def load(self, path: str) -> None:
        """Replace the table with ``path``'s and persist there from now on.

        A missing file is an empty table; an unreadable or malformed one raises
        :class:`KVConfigError` naming the path (the server must not start and later overwrite it).
        """
        try:
            raw = Path(path).read_bytes()
        except FileNotFoundError:
            table: dict[str, dict[str, str]] = {}
        except OSError as exc:
            raise KVConfigError(f"KV config file {path} cannot be read: {exc.strerror}") from None
        else:
            try:
                table = _parse(raw)
            except (ValueError, RecursionError) as exc:
                raise KVConfigError(f"KV config file {path} is corrupt: {exc}") from None
        self._table = table
        self._listings.clear()
        self._bytes = sum(
            _namespace_bytes(ns) + sum(_entry_bytes(key, value) for key, value in entries.items())
            for ns, entries in table.items()
        )
        self.path = path
        self._file = StateFile(path, self._render)

    def save(self, path: str | None = None) -> None:
        """Write the table to ``path`` (default: the loaded path) now, on this thread, via a
        temp file and rename."""
        target = path or self.path
        if target:
            write_atomically(target, self._render())

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every change so far is in the file; False on timeout."""
        return self._file.flush(timeout) if self._file is not None else True

    def close(self, timeout: float | None = None) -> bool:
        """Write what is owed to the file and stop its writer (at shutdown)."""
        return self._file.close(timeout) if self._file is not None else True

    @property
    def persist_failures(self) -> int:
        """Writes of the file that failed (each one is logged; the change holds in memory)."""
        return self._file.failures if self._file is not None else 0

    @property
    def file_writes(self) -> int:
        return self._file.writes if self._file is not None else 0

    def _render(self) -> Iterator[bytes]:
        """The file's bytes in pieces, from a copy of each namespace taken by one C call (this
        runs on the writer's thread while the event loop changes the table)."""
        namespaces = list(self._table.items())
        yield b'{"configTable": {'
        for i, (namespace, live) in enumerate(namespaces):
            entries = live.copy()
            yield (b",\n  " if i else b"\n  ") + msgspec.json.encode(namespace) + b": {"
            items = iter(entries.items())
            first = True
            while chunk := dict(islice(items, _WRITE_CHUNK_ENTRIES)):
                yield (b"" if first else b",") + msgspec.json.encode(chunk)[1:-1]
                first = False
            yield b"}"
        yield b"\n}}\n"

    def _changed(self, namespace: str, key: str) -> None:
        self._listings.pop(namespace, None)
        if self._file is not None:
            self._file.changed()
        if self._on_change is not None:
            self._on_change(namespace, key)


def _entry_bytes(key: str, value: str) -> int:
    return sys.getsizeof(key) + sys.getsizeof(value) + ENTRY_SLOT_BYTES


def _namespace_bytes(namespace: str) -> int:
    return sys.getsizeof(namespace) + NAMESPACE_BYTES


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
