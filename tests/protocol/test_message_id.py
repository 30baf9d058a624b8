"""The host part of a message id: the host's IPv4 address, or upstream's stand-in from the time."""

from __future__ import annotations

import pytest

from protocol.message import MessageIdGenerator, id_ip


def test_the_ip_part_is_the_hosts_ipv4_address():
    assert id_ip("192.168.7.9", 0) == bytes([192, 168, 7, 9])
    ids = MessageIdGenerator.for_host("10.0.0.1", pid=1234, salt=0x12345678, now_ms=0)
    assert ids.next_id(1_700_000_000_000).startswith("0A00000104D212345678")


def test_without_an_address_the_ip_part_is_the_low_four_bytes_of_the_time_as_upstreams():
    assert id_ip(None, 0x0123_4567_89AB_CDEF) == bytes([0x89, 0xAB, 0xCD, 0xEF])
    ids = MessageIdGenerator.for_host(None, pid=1, salt=2, now_ms=0x0102_0304)
    assert ids.next_id(1_700_000_000_000).startswith("01020304")


@pytest.mark.parametrize("text", ["::1", "10.0.0", "host", ""])
def test_an_address_that_is_not_ipv4_is_refused(text):
    with pytest.raises(ValueError):
        id_ip(text, 0)
