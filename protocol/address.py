"""Addresses as RocketMQ writes them: ``HOST:PORT``, an IPv6 host in brackets.

One parser for every door an address comes through (config keys, command lines, a broker's
advertised addresses, a client's name-server list); each door words its own refusal.
"""

from __future__ import annotations


class AddressError(ValueError):
    """Not a ``HOST:PORT`` address; the message says which part is wrong."""


def split_host_port(text: str, *, listening: bool = False) -> tuple[str, int]:
    """``text`` as (host, port).

    An address to connect to needs a host and a port in 1..65535. An address to listen on
    (``listening``) may leave the host empty, meaning every interface (``0.0.0.0``), and may
    ask for port 0, any free port.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isascii() or not port_text.isdigit():
        raise AddressError(f"expected HOST:PORT, got {text!r}")
    port = int(port_text)
    if not (0 if listening else 1) <= port <= 65535:
        raise AddressError(f"port out of range in {text!r}")
    host = host.strip("[]")
    if not host:
        if not listening:
            raise AddressError(f"no host in {text!r}")
        host = "0.0.0.0"
    return host, port
