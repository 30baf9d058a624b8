"""Shared fixtures: a name server on loopback with fake-clock timers.

The tests run on the reactor ``namesrv`` runs on in production (installed here, before
pytest-twisted installs its default one, which accepts it as the epoll reactor it is).
"""

from namesrv.net import lean_reactor

lean_reactor.install()

pytest_plugins = [
    "support.server_fixtures",
    "support.route_cluster",
    "support.spark_fixtures",
    "support.aio_loop",
]
