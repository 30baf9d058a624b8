"""Shared fixtures: a name server on loopback with fake-clock timers.

The tests run on the reactor ``namesrv`` runs on in production (installed here, before
pytest-twisted installs its default one, which accepts it as the epoll reactor it is).
"""

from namesrv import lean_reactor

lean_reactor.install()

pytest_plugins = ["server_fixtures", "route_cluster", "spark_fixtures"]
