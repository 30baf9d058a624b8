"""The Prometheus families: ``rocketmq_namesrv_*`` read from ``NameServer.stats()``, the
tick-duration histogram, and the gate a metrics request's head must pass.

One custom collector turns the server's existing counters into metric families at scrape time,
so nothing on the request path is instrumented twice. Counters the collector does not know by
name still appear, as ``rocketmq_namesrv_events_total{event=...}``, so a new counter is never
lost to the scrape.

The endpoint never reads a request body. Each request is judged on its head, as soon as the
head is complete (:class:`MetricsGate`): a method other than GET or HEAD is answered 405, a
head that announces a body (``Content-Length`` above 0, or any ``Transfer-Encoding`` that frames
one) 413, and, when credentials are configured (a bearer token or basic-auth credentials), a
head without them 401; each then closes the connection unread. The listener that serves the
page is ``namesrv.net.metrics_http``.
"""

from __future__ import annotations

import base64
import hmac
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import fields
from typing import Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from namesrv.config import MetricsConfig, NamesrvConfig, SuppressionConfig
from namesrv.ops.clock import Clock

P = "rocketmq_namesrv_"

TICK_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Upper bounds in seconds; a tick past the last one lands in +Inf."""


class DurationHistogram:
    """Tick durations in fixed buckets (constant memory): counts per bucket (not cumulative),
    their sum and total, as Prometheus needs them."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = TICK_BUCKETS_S) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.count += 1
        self.sum += seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """(upper bound, observations at or below it) pairs, ending with ``+Inf``."""
        out: list[tuple[str, int]] = []
        running = 0
        for bound, n in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out


_GAUGES = {
    "brokers": "Broker addresses registered.",
    "topics": "Topics with a route.",
    "connections": "Connections open now.",
    "subscriptions": "(connection, topic) route-push subscriptions.",
    "subscribed_connections": "Connections with at least one subscription.",
    "degraded": "1 while route push is held back by CPU or memory pressure.",
    "warming_up": "1 during the start-up window (server.wait_for_service_ms): a lookup of a "
    "topic not heard of yet is answered 'not ready'.",
    "uptime_ms": "Milliseconds since the name server started.",
    "deleted_topics": "Topics deleted in this epoch and remembered as deleted "
    "(push.deleted_topics_remembered).",
    "push_pending_connections": "Connections owed a notification (push debt).",
    "push_pending_topics": "(connection, topic) notifications owed (push debt).",
    "buffered_input_bytes": "Bytes of partial requests held across all connections.",
    "route_cache_bytes": "Bytes held by the route response cache.",
    "kv_config_bytes": "Bytes the KV config occupies, as registry.max_kv_config_bytes counts them.",
    "register_chunk_cache_bytes": "Register-table chunks cached, charged at their JSON size.",
}
_COUNTERS = {
    "connections_opened": "Connections accepted.",
    "connections_closed": "Connections closed.",
    "notifications_sent": "Route-change notification frames sent.",
    "notification_bytes": "Bytes of notification frames sent.",
    "slow_subscriber_skips": "Ticks that skipped a connection owed frames: its output was full.",
    "kept_requests_dropped": "Requests left unanswered by a connection closed while its "
    "output was full.",
    "frames_refused": "Connections closed for an undecodable or oversize frame.",
    "degradation_transitions": "Entries into and exits from degraded mode.",
    "brokers_expired": "Broker addresses removed after missing heartbeats.",
    "responses_ignored": "Response frames received from peers and ignored.",
    "oneways_declined": "Oneway frames a client without the extension answered with "
    "REQUEST_CODE_NOT_SUPPORTED (normal for stock clients, not an error).",
    "timer_errors": "Periodic tasks that raised.",
    "deleted_topics_forgotten": "Deleted topics forgotten at push.deleted_topics_remembered "
    "(the oldest first).",
    "headers_refused": "Requests whose header failed to decode, answered with an error.",
    "input_bound_closes": "Connections closed: buffered input past its bound.",
    "frame_timeouts": "Connections closed: a frame not completed in time.",
    "idle_closes": "Connections closed for idleness.",
    "accept_failures": "Accepts that failed (e.g. out of file descriptors).",
    "route_cache_resets": "Times the route response cache was emptied at its byte bound.",
    "route_cache_hits": "Route lookups answered from the response cache.",
    "ticks": "Change-detection ticks run.",
    "expedited_ticks": "Ticks brought forward after a master arrived in a broker name "
    "(push.master_arrival_tick_ms).",
    "suppressed_changes": "Route changes whose every cause is suppressed by config.",
    "register_chunk_cache_hits": "Register-table chunks found read already (not decoded again).",
    "register_chunk_cache_misses": "Register-table chunks decoded.",
    "register_table_cache_hits": "Large register bodies whose whole table was found read already "
    "(a master and its slaves send the same body).",
    "register_tables_shared": "Registers after which the broker holds the very table object of "
    "another broker with an equal table (copied again before either is written).",
    "register_topics_skipped": "Topics of registers skipped: the broker's table held their chunk.",
    "settle_deferrals": "Ticks that settled only subscribed topics while registers were pending.",
    "metrics_connections_evicted": "Metrics connections closed to admit a new one: "
    "metrics.max_connections were open (the one served longest ago goes).",
    "metrics_idle_closes": "Metrics connections closed: no request completed in "
    "metrics.idle_timeout_ms.",
    "metrics_auth_failures": "Scrapes answered 401: missing or wrong credentials.",
    "metrics_refused_method": "Metrics requests answered 405: a method other than GET or HEAD.",
    "metrics_refused_body": "Metrics requests answered 413: they announced a body.",
}
_LABELLED_COUNTERS = {
    # stats prefix: (family, label, help)
    "suppressed.": (
        "notifications_suppressed",
        "rule",
        "Route changes not notified, by the push.suppress rule that silenced them.",
    ),
    "rejected.": ("rejections", "kind", "Requests and connections refused, by kind."),
    "tls.": ("tls_connections", "kind", "Connections on the TLS port, by how they were served."),
    "decode_failures.": ("decode_failures", "kind", "Frames that failed to decode, by kind."),
    "connections_refused.": (
        "connections_refused",
        "bound",
        "Connections refused or closed at accept, by the bound they hit.",
    ),
}


_KNOWN_LABELS = {
    # Series present from the first scrape, so rate() and alerts see a zero, not a gap.
    "suppressed.": tuple(f.name for f in fields(SuppressionConfig)),
    "rejected.": (
        "acl_unsigned",
        "acl_bad_signature",
        "acl_unknown_key",
        "acl_denied",
        "acl_broker_taken",
        "acl_bound",
        "acl_addr_taken",
        "acl_unclassified",
        "acl_form_refused",
        "acl_stale",
        "acl_replayed",
        "acl_wrong_server",
        "tls_plaintext",
    ),
}


_BOUNDS = {
    # stats key -> the config bound whose reaching it counts
    "connections_refused.max_connections": "server.max_connections",
    "connections_refused.max_connections_per_host": "server.max_connections_per_host",
    "decode_failures.frame_too_large": "server.max_frame_size",
    "decode_failures.header_too_large": "server.max_header_size",
    "input_bound_closes": "server.max_buffered_input_bytes",
    "frame_timeouts": "server.frame_timeout_ms",
    "idle_closes": "server.idle_timeout_ms",
    "slow_subscriber_skips": "server.output_buffer_bytes",
    "route_cache_resets": "server.route_cache_bytes",
    "journal_suppressed_records": "journal.max_records_per_second",
    "rejected.acl_bound": "acl.max_bound_brokers",
    "deleted_topics_forgotten": "push.deleted_topics_remembered",
    "metrics_connections_evicted": "metrics.max_connections",
    "metrics_idle_closes": "metrics.idle_timeout_ms",
}
"""Read before the other families take their keys, so a count shows under both names."""


class MetricsSource(Protocol):
    """What the metrics read of a server: its stats, tick durations, config, clock and the
    counters the ``/metrics`` gate counts its refusals in."""

    @property
    def config(self) -> NamesrvConfig: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def counters(self) -> Counter[str]: ...
    @property
    def tick_durations(self) -> DurationHistogram: ...
    def stats(self) -> Mapping[str, int]: ...


class NamesrvCollector:
    """Reads one ``stats()`` snapshot per scrape and yields every family."""

    def __init__(self, server: MetricsSource) -> None:
        self._server = server

    def describe(self) -> list[Metric]:
        return []  # families are created per scrape; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        server = self._server
        stats: dict[str, int] = dict(server.stats())
        bounds = CounterMetricFamily(
            P + "bounds_reached",
            "Times a configured bound refused, closed or skipped something, by the bound.",
            labels=["bound"],
        )
        for key, bound in _BOUNDS.items():
            bounds.add_metric([bound], stats.get(key, 0))
        yield bounds
        yield from _requests(stats)
        lookups = CounterMetricFamily(
            P + "lookups", "GET_ROUTEINFO_BY_TOPIC requests answered (cache hits included)."
        )
        lookups.add_metric([], stats.get("handled.GET_ROUTEINFO_BY_TOPIC", 0))
        yield lookups
        for name, help_text in _GAUGES.items():
            g = GaugeMetricFamily(P + name, help_text)
            g.add_metric([], stats.pop(name, 0))
            yield g
        for name, help_text in _COUNTERS.items():
            c = CounterMetricFamily(P + name, help_text)
            c.add_metric([], stats.pop(name, 0))
            yield c
        labelled: dict[str, CounterMetricFamily] = {}
        for prefix, (family, label, help_text) in _LABELLED_COUNTERS.items():
            fam = labelled.get(family)
            if fam is None:
                fam = labelled[family] = CounterMetricFamily(P + family, help_text, labels=[label])
            found = {k[len(prefix) :]: stats.pop(k) for k in list(stats) if k.startswith(prefix)}
            for label_value in _KNOWN_LABELS.get(prefix, ()):
                found.setdefault(label_value, 0)
            for label_value, count in sorted(found.items()):
                fam.add_metric([label_value], count)
        unsupported = stats.pop("refused.unsupported", 0)
        labelled["rejections"].add_metric(["unsupported_code"], unsupported)
        yield from labelled.values()
        hist = server.tick_durations
        tick = HistogramMetricFamily(
            P + "tick_duration_seconds", "Wall time of one change-detection tick."
        )
        tick.add_metric([], hist.cumulative(), hist.sum)
        yield tick
        events = CounterMetricFamily(
            P + "events", "Other server counters, by their stats() name.", labels=["event"]
        )
        for key, value in sorted(stats.items()):
            if not key.startswith(("handled.", "refused.")):
                events.add_metric([key], value)
        yield events


def _requests(stats: Mapping[str, int]) -> Iterator[Metric]:
    family = CounterMetricFamily(
        P + "requests",
        "Requests processed, by request code and result (handled or refused with an error).",
        labels=["code", "result"],
    )
    for key, value in sorted(stats.items()):
        kind, _, code = key.partition(".")
        if kind == "handled":
            family.add_metric([code, "handled"], value)
        elif kind == "refused" and code != "unsupported":
            family.add_metric([code, "refused"], value)
    yield family


ALLOWED_METHODS = (b"GET", b"HEAD")


class MetricsGate:
    """What a request's head must show before anything else is done for it.

    With credentials configured, a request must carry one of them (the bearer token or the basic
    user and password); each is compared in constant time, so the answer's timing does not tell
    how much of a guess was right.
    """

    def __init__(self, config: MetricsConfig, counters: Counter[str]) -> None:
        self.counters = counters
        accepted: list[bytes] = []
        challenges: list[bytes] = []
        if config.bearer_token:
            accepted.append(b"Bearer " + config.bearer_token.encode())
            challenges.append(b'Bearer realm="metrics"')
        if config.basic_auth_user:
            pair = f"{config.basic_auth_user}:{config.basic_auth_password}".encode()
            accepted.append(b"Basic " + base64.b64encode(pair))
            challenges.append(b'Basic realm="metrics"')
        self._accepted = accepted
        self._challenges = challenges

    def _authorized(self, authorization: bytes) -> bool:
        # Every configured credential is compared, matched or not: no early exit to time.
        matched = False
        for expected in self._accepted:
            matched |= hmac.compare_digest(authorization, expected)
        return matched

    def refusal(self, method: bytes, body_length: int | None, authorization: bytes) -> bytes:
        """The whole answer refusing a request with this head, or b"" when it may proceed.

        ``body_length`` is the length the head announces: 0 for none, None for a body framed by
        its transfer encoding."""
        if method not in ALLOWED_METHODS:
            self.counters["metrics_refused_method"] += 1
            return _answer(b"405 Method Not Allowed", [b"Allow: GET, HEAD"], b"GET or HEAD only")
        if body_length != 0:
            self.counters["metrics_refused_body"] += 1
            return _answer(b"413 Content Too Large", [], b"a request body is never read here")
        if self._accepted and not self._authorized(authorization):
            self.counters["metrics_auth_failures"] += 1
            challenges = [b"WWW-Authenticate: " + c for c in self._challenges]
            return _answer(b"401 Unauthorized", challenges, b"credentials required")
        return b""


def _answer(status: bytes, headers: list[bytes], text: bytes) -> bytes:
    body = text + b"\n"
    head = [
        b"HTTP/1.1 " + status,
        *headers,
        b"Content-Type: text/plain; charset=utf-8",
        b"Content-Length: %d" % len(body),
        b"Connection: close",
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + body
