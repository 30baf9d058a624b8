"""Client configuration: every timer and bound of the route client, with upstream's defaults."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from protocol.address import AddressError, split_host_port
from protocol.signing import check_server_identity

MIB = 1024 * 1024


class ClientConfigError(ValueError):
    """A client setting is not acceptable; the message names the setting and the value."""


def parse_namesrv_addrs(text: str) -> tuple[str, ...]:
    """``HOST:PORT;HOST:PORT`` (upstream's ``namesrvAddr`` form) to a tuple of addresses."""
    addrs = tuple(part.strip() for part in text.split(";") if part.strip())
    if not addrs:
        raise ClientConfigError(f"no name-server address in {text!r}")
    for addr in addrs:
        split_addr(addr)
    return addrs


def split_addr(addr: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 hosts in brackets) to (host, port)."""
    try:
        return split_host_port(addr)
    except AddressError:
        raise ClientConfigError(f"name-server address must be HOST:PORT, got {addr!r}") from None


def positive(default: int) -> Any:
    """A field whose value must be above 0: declared where the field is, checked at
    construction."""
    return field(default=default, metadata={"positive": True})


@dataclass(frozen=True, slots=True)
class ClientConfig:
    namesrv_addrs: tuple[str, ...]
    poll_interval_ms: int = positive(30_000)
    """Route poll period while push is off or unsupported (upstream's pollNameServerInterval)."""
    poll_interval_with_push_ms: int = positive(120_000)
    """Full-refetch poll period while push is healthy: a safety net behind the version check."""
    version_check_interval_ms: int = positive(30_000)
    """While push is healthy, held topics are re-subscribed this often: the ack's versions show
    any change push did not deliver (suppressed, held by a degraded server, a skipped frame), so
    a change is never learned later than upstream's 30 s poll would, for one request per
    ``subscribe_batch_size`` topics instead of one per topic."""
    departure_confirm_delay_ms: int = 1_000
    """After a broker departure applied locally, confirming refetches start this much later."""
    departure_confirm_window_ms: int = positive(10_000)
    """... and are spread over this window (jittered, coalesced)."""
    confirm_exact_departures: bool = True
    """Also confirm topics whose departure step was exact (their route is provably the
    server's); False confirms only the topics the step could not be applied to exactly."""
    arrival_refetch_window_ms: int = positive(10_000)
    """Topics a broker arrival changed are refetched spread over this window (jittered)."""
    topic_idle_expiry_ms: int = positive(300_000)
    """A topic not looked up for this long is dropped and unsubscribed."""
    expiry_check_interval_ms: int = positive(10_000)
    negative_ttl_ms: int = 30_000
    """How long TOPIC_NOT_EXIST is believed without asking again; only ever for a
    topic the client holds no route for, and never from a name server warming up."""
    untrusted_retry_initial_ms: int = positive(1_000)
    """A held topic whose route answer cannot be trusted (SYSTEM_ERROR, a failed request, an
    absence from a name server warming up) keeps its route, marked stale, and is asked again
    after this long, doubling per answer up to ``untrusted_retry_max_ms``."""
    untrusted_retry_max_ms: int = positive(30_000)
    """The longest pause between two such retries of one topic (the poll interval: never
    rarer than the poll would ask)."""
    warm_move_interval_ms: int = positive(10_000)
    """With several name servers, a client whose server says it is warming up moves to one
    that has been up longer at most once per this long (two servers that keep restarting, or
    keep claiming short uptimes, cannot make it move on every answer)."""
    request_timeout_ms: int = positive(3_000)
    reconnect_initial_ms: int = positive(200)
    reconnect_max_ms: int = positive(10_000)
    max_frame_size: int = positive(16 * MIB)
    """Frames announcing more than this close the connection (upstream's frameMaxLength)."""
    max_route_body_bytes: int = positive(1 * MIB)
    """A route answer (or an inline route) with a body larger than this is refused before it is
    decoded (the lookup fails with ``RouteClientError``): decoding runs on the event loop, and
    this bounds how long one route can hold it (docs/client-runtime.md gives the measured cost)."""
    max_requests_in_flight: int = positive(10_000)
    """Requests sent on one name-server connection and not answered yet; one more fails at
    once with ``RequestsInFlightError`` (so do requests waiting for a connection past it)."""
    max_request_bytes_in_flight: int = positive(64 * MIB)
    """The encoded bytes of those requests, the ones held back from a peer that does not read
    included; one more past it fails at once the same way."""
    write_buffer_bytes: int = positive(256 * 1024)
    """A connection's transport buffer above this means the peer is not reading: nothing more
    is written to it until it drains."""
    max_unprocessed_input_bytes: int = positive(4 * MIB)
    """Bytes received from the name server and not yet handled above which the connection is
    not read until they are: a server flooding frames costs the client this, one read and one
    partial frame (``max_frame_size``) at most."""
    close_timeout_ms: int = positive(3_000)
    """``stop``/``close`` returns within this: a connection whose peer has not let it close by
    then (say, one that does not read) is aborted."""
    max_queue_nums: int = positive(1_024)
    """A route with a broker's queue count above this fails its lookup (RouteClientError):
    the client builds one object per queue and will not do so for an absurd number."""
    max_route_queues: int = positive(65_536)
    """A route naming more queues than this in total fails its lookup the same way."""
    subscribe_batch_size: int = positive(1_000)
    """Topics per SUBSCRIBE/UNSUBSCRIBE request; the server bounds topics per request."""
    telemetry_path: str = ""
    """JSON-lines file of route refetches (docs/telemetry.md); empty turns telemetry off."""
    telemetry_memory_bytes: int = positive(16 * MIB)
    """Telemetry remembers each topic's last record to mark the records that are news; past
    this many bytes (a topic costs its name plus about 128) it leaves the field out."""
    client_id: str = ""
    """Sent in SUBSCRIBE for the server's logs; empty picks host@pid."""
    inline_routes: bool = True
    """Ask in SUBSCRIBE for the new route inside each notification: a change then costs no
    GET_ROUTEINFO round trip when the server sends it. Servers that do not know the field (and
    changes the server sends plain) take the refetch path, as with False."""
    tls: bool = False
    """Connect to name servers with TLS (as upstream's ``-Dtls.enable=true``)."""
    tls_ca_file: str = ""
    """With ``tls``: verify servers against this PEM CA; empty encrypts without verifying, as
    upstream clients' default ``tls.test.mode.enable``."""
    access_key: str = ""
    """Non-empty (with ``secret_key``): every request to a name server is signed with this
    account, for name servers with access control on."""
    secret_key: str = field(default="", repr=False)
    signature: str = "strong"
    """The signed form: ``"strong"`` (bound to the request code, a timestamp and a nonce, so a
    captured request cannot be replayed) or ``"upstream"`` (``AclClientRPCHook``'s, for name
    servers that know only that form)."""
    server_identity: str = ""
    """The strong form names the name server a request is for: the identity
    (``acl.server_identity``) shared by the name servers of ``namesrv_addrs``. Needed with
    credentials in the strong form."""

    def __post_init__(self) -> None:
        addrs = self.namesrv_addrs
        if isinstance(addrs, str):  # upstream's "a:9876;b:9876" form is accepted as well
            addrs = parse_namesrv_addrs(addrs)
        object.__setattr__(self, "namesrv_addrs", tuple(addrs))
        if not self.namesrv_addrs:
            raise ClientConfigError("namesrv_addrs must name at least one name server")
        for addr in self.namesrv_addrs:
            split_addr(addr)
        for f in fields(self):
            value = getattr(self, f.name)
            if f.metadata.get("positive") and value <= 0:
                raise ClientConfigError(f"{f.name} must be positive, got {value}")
        if self.departure_confirm_delay_ms < 0:
            raise ClientConfigError(
                "departure_confirm_delay_ms must not be negative, "
                f"got {self.departure_confirm_delay_ms}"
            )
        if self.negative_ttl_ms < 0:
            raise ClientConfigError(
                f"negative_ttl_ms must not be negative, got {self.negative_ttl_ms}"
            )
        self._check_credentials()
        if self.untrusted_retry_max_ms < self.untrusted_retry_initial_ms:
            raise ClientConfigError(
                f"untrusted_retry_max_ms ({self.untrusted_retry_max_ms}) must be at least "
                f"untrusted_retry_initial_ms ({self.untrusted_retry_initial_ms})"
            )
        if self.reconnect_max_ms < self.reconnect_initial_ms:
            raise ClientConfigError(
                f"reconnect_max_ms ({self.reconnect_max_ms}) must be at least "
                f"reconnect_initial_ms ({self.reconnect_initial_ms})"
            )

    def _check_credentials(self) -> None:
        """Signing needs both keys, a known form and, in the strong form, the servers' identity."""
        if bool(self.access_key) != bool(self.secret_key):
            raise ClientConfigError("access_key and secret_key go together")
        if self.signature not in ("strong", "upstream"):
            raise ClientConfigError(
                f"signature must be 'strong' or 'upstream', got {self.signature!r}"
            )
        if self.access_key and self.signature == "strong":
            if not self.server_identity:
                raise ClientConfigError(
                    "server_identity is needed to sign in the strong form: the name servers' "
                    "acl.server_identity"
                )
            try:
                check_server_identity(self.server_identity)
            except ValueError as exc:
                raise ClientConfigError(f"server_identity: {exc}") from None
