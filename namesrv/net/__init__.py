"""Connections: reading frames and writing answers, the bounds on what a client may hold
(connections per host, buffered input, unfinished frames, idle time), TLS and the reactor.
A connection talks up only through ``connection.ConnectionOwner``.
"""
