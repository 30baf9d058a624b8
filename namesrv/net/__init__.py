"""Connections: reading frames and writing answers, the bounds on what a client may hold
(connections per host, buffered input, unfinished frames, idle time), TLS, the reactor, and
what starts and stops a server (ports, timers, shutdown).
A connection talks up only through ``connection.ConnectionOwner``.
"""
