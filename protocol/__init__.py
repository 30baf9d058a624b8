"""RocketMQ remoting wire format, without I/O.

Nothing in this package imports Twisted or touches sockets or clocks: bytes go in,
typed commands and bodies come out, and the reverse.
"""
