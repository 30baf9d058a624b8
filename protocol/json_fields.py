"""Reading fields of a decoded JSON body, each failure a :class:`BodyError` naming the field."""

from __future__ import annotations

import re
from typing import Any

from protocol import fastjson
from protocol.errors import BodyError

DECIMAL = re.compile(r"[+-]?[0-9]{1,19}")


def as_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BodyError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def or_empty(value: Any) -> Any:
    """A missing or null optional object reads as ``{}``; any other value is checked after."""
    return {} if value is None else value


def as_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyError(f"{what} must be a JSON array, got {type(value).__name__}")
    return value


def int_field(doc: dict[str, Any], key: str, what: str, default: int = 0) -> int:
    value = doc.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and DECIMAL.fullmatch(value):
            return int(value)
        raise BodyError(f"{what}.{key} must be an integer, got {value!r}")
    return value


def str_field(doc: dict[str, Any], key: str, what: str, default: str | None = None) -> str | None:
    value = doc.get(key, default)
    if value is None or isinstance(value, str):
        return value
    raise BodyError(f"{what}.{key} must be a string, got {value!r}")


def bool_field(doc: dict[str, Any], key: str, what: str) -> bool:
    value = doc.get(key, False)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise BodyError(f"{what}.{key} must be true or false, got {value!r}")


def load_object(body: bytes, what: str) -> dict[str, Any]:
    if not body:
        raise BodyError(f"{what} body is empty")
    return as_object(fastjson.loads(body), what)
