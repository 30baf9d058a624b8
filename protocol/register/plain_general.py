"""The general read of a plain register body not in the usual form (which
:mod:`protocol.register.plain_fast` reads): the C scanner value by value, the topic table a
chunk of members at a time where the chunks' cuts parse, member by member where they do not,
and a body the C scanner refuses (fastjson's bare integer keys) whole by
:func:`protocol.fastjson.loads`. It reads exactly as the full decoder does, errors included.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator
from typing import Any

from protocol import fastjson
from protocol.errors import BodyError, LimitError
from protocol.json_fields import as_object, load_object, or_empty
from protocol.peer_text import has_surrogate_escape
from protocol.register import plain_fast
from protocol.register.read_table import (
    NO_LIMITS,
    ReadLimits,
    RegisterTable,
    TopicQueueSpec,
    add_specs,
    check_topic_count,
    checked_table,
)


class _NotPlain(Exception):
    """The body is not standard JSON of the expected shape: read it the general way."""


_WS = re.compile(r"[ \t\n\r]*")


_SCANNER: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder(
    parse_constant=fastjson.refuse_constant
).scan_once  # type: ignore[attr-defined]


"""The C scanner's entry point: one JSON value at a position, to the position after it."""


scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def _value(text: str, pos: int) -> tuple[Any, int]:
    try:
        return _SCANNER(text, pos)
    except (ValueError, StopIteration, RecursionError):
        raise _NotPlain from None


def _members(
    text: str, pos: int, *, at_member: bool = False
) -> Generator[tuple[str, int], int, int]:
    """The keys of the JSON object at ``pos`` (or, ``at_member``, of the object whose next
    member starts at ``pos``), each with the position of its value. The consumer reads the
    value and sends back (``.send``) the position after it; returns the position after the
    object."""
    if not at_member:
        if pos >= len(text) or text[pos] != "{":
            raise _NotPlain
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        if text.startswith("}", pos):
            return pos + 1
    while True:
        if not text.startswith('"', pos):
            raise _NotPlain
        try:
            key, pos = scanstring(text, pos + 1)
        except ValueError:
            raise _NotPlain from None
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if not text.startswith(":", pos):
            raise _NotPlain
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        pos = yield key, pos
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if text.startswith("}", pos):
            return pos + 1
        if not text.startswith(",", pos):
            raise _NotPlain
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]


_ENTRY_CUT = re.compile(r'\},"[^"\\]*":\{')


"""Where one topic config likely ends and the next begins (fastjson writes ``attributes``
first, so a nested object never precedes a key whose value is an object)."""


CHARS_PER_TOPIC = 128


"""A topic config's usual size in the plain body: turns ``topics_per_step`` into text."""


def _table_steps(
    text: str, pos: int, sink: plain_fast.TableSink, topics_per_step: int
) -> Generator[None, None, int]:
    """Read the topicConfigTable object at ``pos`` into ``sink``, a chunk of members at a
    time (see :func:`_chunk_steps`), the rest member by member when the chunks' cuts fail;
    returns the position after it."""
    start = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text.startswith("}", start):
        return start + 1
    start, end = yield from _chunk_steps(text, start, sink, topics_per_step)
    if end >= 0:
        return end
    # Unusual text: the rest member by member (a failure there reads the body the slow way).
    entries = _members(text, start, at_member=True)
    count = 0
    try:
        name, vat = next(entries)
        while True:
            tc, vend = _value(text, vat)
            sink.add_parsed({name: tc})
            count += 1
            if count % topics_per_step == 0:
                yield
            name, vat = entries.send(vend)
    except StopIteration as stop:
        end_pos: int = stop.value
    return end_pos


def _chunk_steps(
    text: str, start: int, sink: plain_fast.TableSink, topics_per_step: int
) -> Generator[None, None, tuple[int, int]]:
    """The table's members from ``start``, a chunk at a time: (where reading stopped, the
    position after the table), the latter -1 when a chunk's cut could not be found.

    A chunk ends where :data:`_ENTRY_CUT` guesses a member ends, and is parsed whole by the
    C parser as ``{chunk}``. The guess needs no trust: a chunk that parses as an object is a
    prefix of the members ending outside any string at depth zero, so the comma after it
    separates members of the table. A guess that does not parse is retried further on; after
    a few, the caller reads the rest member by member.
    """
    chunk_chars = max(1, topics_per_step) * CHARS_PER_TOPIC
    size = len(text)
    while True:
        if size - start <= 2 * chunk_chars:  # the last chunk: up to the table's own end
            try:
                parsed, end = _SCANNER("{" + text[start:], 0)
            except (ValueError, StopIteration, RecursionError):
                return start, -1
            sink.add_parsed(parsed)
            return start, start - 1 + end
        cut = -1
        search_from = start + chunk_chars
        for _ in range(4):
            found = _ENTRY_CUT.search(text, search_from)
            if found is None:
                break
            try:
                parsed = json.loads(
                    "{" + text[start : found.start() + 1] + "}",
                    parse_constant=fastjson.refuse_constant,
                )
            except (ValueError, RecursionError):
                search_from = found.start() + 1
                continue
            cut = found.start() + 1  # the comma between two members
            break
        if cut < 0:
            return start, -1
        sink.add_parsed(parsed)
        start = cut + 1
        yield


def plain_steps(
    text: str, topics_per_step: int, limits: ReadLimits
) -> Generator[None, None, RegisterTable]:
    pos = _WS.match(text).end()  # type: ignore[union-attr]
    top: dict[str, Any] = {}
    wrapper: dict[str, Any] = {}
    table: dict[str, TopicQueueSpec] = {}
    specs: dict[TopicQueueSpec, TopicQueueSpec] = {}
    renamed: dict[str, str] = {}
    sink = plain_fast.TableSink(
        table, specs, renamed, max_attributes_bytes=limits.max_attributes_bytes
    )
    members = _members(text, pos)
    end = -1
    try:
        key, at = next(members)
        while True:
            if key == "topicConfigSerializeWrapper" and text.startswith("{", at):
                inner = _members(text, at)
                try:
                    wkey, wat = next(inner)
                    while True:
                        if wkey == "topicConfigTable" and text.startswith("{", wat):
                            table.clear()
                            renamed.clear()
                            wend = yield from _table_steps(text, wat, sink, topics_per_step)
                            wrapper.pop("topicConfigTable", None)
                        else:
                            value, wend = _value(text, wat)
                            wrapper[wkey] = value
                        wkey, wat = inner.send(wend)
                except StopIteration as stop:
                    vend = stop.value
                top.pop("topicConfigSerializeWrapper", None)
            else:
                value, vend = _value(text, at)
                top[key] = value
            key, at = members.send(vend)
    except StopIteration as stop:
        end = stop.value
    if end < 0 or _WS.match(text, end).end() != len(text):  # type: ignore[union-attr]
        raise _NotPlain
    if "topicConfigSerializeWrapper" in top:  # present but not an object: the precise error
        top["topicConfigSerializeWrapper"] = as_object(
            or_empty(top["topicConfigSerializeWrapper"]), "topicConfigSerializeWrapper"
        )
    if "topicConfigTable" in wrapper:
        as_object(or_empty(wrapper["topicConfigTable"]), "topicConfigTable")
    return checked_table(
        table,
        specs,
        renamed,
        wrapper.get("dataVersion"),
        wrapper.get("topicQueueMappingInfoMap"),
        top.get("filterServerList"),
    )


def _table_from_doc(doc: dict[str, Any], limits: ReadLimits = NO_LIMITS) -> RegisterTable:
    what = "topicConfigSerializeWrapper"
    wrapper_doc = as_object(or_empty(doc.get(what)), what)
    table_doc = as_object(or_empty(wrapper_doc.get("topicConfigTable")), "topicConfigTable")
    mapping = or_empty(wrapper_doc.get("topicQueueMappingInfoMap"))
    if not isinstance(mapping, dict):
        raise BodyError("topicQueueMappingInfoMap must be a JSON object")
    specs: dict[TopicQueueSpec, TopicQueueSpec] = {}
    table: dict[str, TopicQueueSpec] = {}
    renamed: dict[str, str] = {}
    parsed = {str(name): tc for name, tc in table_doc.items()}
    add_specs(table, specs, renamed, parsed, limits.max_attributes_bytes)
    return checked_table(
        table,
        specs,
        renamed,
        wrapper_doc.get("dataVersion"),
        mapping,
        doc.get("filterServerList"),
    )


def general_plain_steps(
    data: bytes, topics_per_step: int, limits: ReadLimits
) -> Generator[None, None, RegisterTable]:
    """A plain body not in the usual form: the C scanner value by value, or, for a body it
    refuses, the whole document by :func:`fastjson.loads`; only up to
    ``limits.max_general_bytes``."""
    if len(data) > limits.max_general_bytes:
        raise LimitError(
            f"RegisterBrokerBody of {len(data)} bytes is not in the usual form (standard JSON "
            f"as upstream brokers write it), which is read only up to {limits.max_general_bytes}"
            " bytes (registry.register_read_slice_bytes)",
            "register_read_slice_bytes",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"JSON body is not valid UTF-8 (byte {exc.start})") from exc
    if not text.strip():
        raise BodyError("RegisterBrokerBody body is empty")
    try:
        if has_surrogate_escape(text):
            raise _NotPlain  # read whole, so a string that cannot be encoded is refused
        table = yield from plain_steps(text, topics_per_step, limits)
    except _NotPlain:
        doc = load_object(data, "RegisterBrokerBody")  # fastjson's form, or the precise error
        table = _table_from_doc(doc, limits)
    check_topic_count(len(table.topic_queues), limits)
    return table
