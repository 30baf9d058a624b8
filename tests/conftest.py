"""Shared fixtures: a name server on loopback with fake-clock timers."""

pytest_plugins = ["server_fixtures", "route_cluster", "spark_fixtures"]
