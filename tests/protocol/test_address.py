"""HOST:PORT, the one parser every door uses."""

from __future__ import annotations

import pytest

from protocol.address import AddressError, split_host_port


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9876", ("127.0.0.1", 9876)),
        ("ns.example:1", ("ns.example", 1)),
        ("[::1]:9876", ("::1", 9876)),
        ("[fe80::1%eth0]:65535", ("fe80::1%eth0", 65535)),
    ],
)
def test_an_address_to_connect_to(text: str, expected: tuple[str, int]) -> None:
    assert split_host_port(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "9876",
        "host",
        "host:",
        ":9876",
        "host:0",
        "host:65536",
        "host:-1",
        "host:\uff19\uff18",
        "h:1\u00b2",
    ],
)
def test_anything_else_is_refused_naming_the_text(text: str) -> None:
    with pytest.raises(AddressError, match=r"HOST:PORT|port out of range|no host") as caught:
        split_host_port(text)
    assert repr(text) in str(caught.value)


def test_a_listening_address_may_leave_the_host_empty_and_ask_for_any_port() -> None:
    assert split_host_port(":0", listening=True) == ("0.0.0.0", 0)
    assert split_host_port("[::]:9876", listening=True) == ("::", 9876)
    with pytest.raises(AddressError):
        split_host_port(":65536", listening=True)
