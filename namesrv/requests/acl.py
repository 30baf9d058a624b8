"""Access control for signed requests, in upstream's form or the strong one.

A signed request carries ``AccessKey`` and ``Signature`` (and optionally ``SecurityToken``) in
its extFields, in one of the two forms of :mod:`protocol.signing`: upstream's
(``AclClientRPCHook``: the extField values and the body, not the request code, and nothing
against a repeat) or the strong form (the request code, every extField and the body, with the
destination server's identity, a timestamp and a nonce). Each account names the forms it
accepts (``signature``: ``"upstream"``, ``"strong"`` or ``"either"``). A strong-form request
must name this server (``SignServer`` equal to ``acl.server_identity``; a server without an
identity takes no strong request) and be fresh: stamped within ``acl.signature_skew_ms`` of the
server's clock, newer than the server's start and than what its key had accepted before a
restart (:mod:`namesrv.requests.replay_record`), and its nonce not seen before for its key
(:mod:`namesrv.requests.replay_cache`), so a request of an account that accepts only the strong
form cannot be replayed, under its own code or another, here or at another server, before or
after a restart or a clock step.

The order of the checks keeps one key from costing another anything: the signature is verified,
then the key's right to make the request, and only then is the nonce remembered, in the key's
own part of the replay cache. A key without the right stores nothing, and no key's stamps can
make another key's requests stale.

Requests fall in three classes, each request's declared with its command
(``namesrv.requests.commands``): broker requests (register, unregister, heartbeat, data-version
query), admin requests (perm, topics, KV writes, config, push status) and reads (lookups, lists,
KV reads, subscriptions). With ACL on, broker and admin requests need a signature from an
account allowed to make them; reads are open unless ``acl.authenticate_reads``; a request with
no access class is refused, whatever its signature, for an undeclared class must never pass for
a read. A broker name registered under one access key stays bound to it for the life of the
process: another key cannot register, unregister or heartbeat it.

A broker address is bound to the broker name (and so the key) live at it: while it is live, a
broker request for that address under another broker name or cluster is refused, so a broker
key cannot move another broker's address into its own group or unregister it. The binding is
made when the registry reports the address arriving and ends when it reports it departing
(unregister, expiry, closed connection): a moved broker takes its address once the old one is
gone. Both bindings are bounded by ``acl.max_bound_brokers``.

Pure: no I/O; the processor calls :meth:`AccessControl.check` before a handler and
:meth:`AccessControl.accepted` after it succeeded; the register handler calls
:meth:`AccessControl.check_address` again just before it applies a register (a large one is
applied turns after its check); the server tells :meth:`AccessControl.broker_changed` of the
registry's broker arrivals and departures.
"""

from __future__ import annotations

import hmac
import time
from collections import Counter
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import NamedTuple

from namesrv.config import AclAccount, AclConfig
from namesrv.requests.replay_cache import ReplayCache
from namesrv.requests.replay_record import ReplayRecord
from protocol import signing
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.push_events import BrokerChangeKind

ACCESS_KEY = signing.ACCESS_KEY
SIGNATURE = signing.SIGNATURE
ANY_BROKER = "*"

# The upstream form's helpers under the names this module's callers know.
compute_signature = signing.upstream_signature
sign_ext_fields = signing.sign_upstream
signature_content = signing.upstream_content


class AccessClass(StrEnum):
    """What a request's signature must allow; every served command declares its class."""

    BROKER = "broker"
    ADMIN = "admin"
    READ = "read"


class AclDenied(ProtocolError):
    """A request refused by access control; ``kind`` names why, for the counters."""

    def __init__(self, kind: str, remark: str) -> None:
        super().__init__(remark, ResponseCode.NO_PERMISSION)
        self.kind = kind


class AddrHolder(NamedTuple):
    """The broker live at an address: its cluster, broker name and broker id."""

    cluster: str
    broker_name: str
    broker_id: int


class AccessControl:
    """Checks signatures and permissions; remembers which key owns which broker name and which
    broker holds which live address."""

    def __init__(
        self,
        config: AclConfig,
        wall_clock_ms: Callable[[], int] | None = None,
        record: ReplayRecord | None = None,
    ) -> None:
        """``wall_clock_ms`` is the server's clock in milliseconds since the epoch, against
        which strong-form timestamps are judged (the system clock by default). Strong-form
        requests stamped before this moment are refused, and so are those stamped at or before
        what ``record`` (the previous runs' highest accepted stamps) holds for their key; the
        record hears each new highest stamp."""
        self.config = config
        self._accounts = {a.access_key: a for a in config.accounts}
        self._strong_keys = {
            a.access_key: signing.strong_key(a.secret_key)
            for a in config.accounts
            if a.signature != signing.SignatureForm.UPSTREAM
        }
        self._wall_clock_ms = wall_clock_ms or _system_ms
        self.started_ms = self._wall_clock_ms()
        self.record = record
        self.replays = ReplayCache(
            config.signature_skew_ms,
            config.replay_cache_max_entries,
            config.replay_cache_max_entries_per_key,
            self._strong_keys,
            start_floor_ms=self.started_ms - 1,
            floors=record.floors() if record is not None else None,
            on_accepted=record.accepted if record is not None else None,
        )
        self._owner_of_name: dict[str, str] = {}
        self._holder_of_addr: dict[str, AddrHolder] = {}
        self._bound_of_name: dict[str, dict[int, str]] = {}
        """Broker name -> id -> address, for the bound addresses: what a group holds."""
        self.rejections: Counter[str] = Counter()

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def check(
        self,
        klass: AccessClass | None,
        code: int,
        code_name: str,
        ext: Mapping[str, str],
        body: bytes,
    ) -> str | None:
        """The access key the request is signed with (None when unsigned and open).

        ``klass`` is the access class the request's command declares. Raises
        :class:`AclDenied` when the request may not proceed.
        """
        if not self.config.enabled:
            return None
        account = self._signer(klass, code_name, ext)
        if account is None:
            return None
        signature = str(ext.get(SIGNATURE))
        strong: signing.StrongFields | None = None
        if signing.is_strong(ext):
            strong = self._verify_strong(account, code, code_name, ext, body, signature)
        else:
            self._verify_upstream(account, code_name, ext, body, signature)
        self._check_permission(account, klass, code, code_name, ext)
        if strong is not None:
            self._admit_nonce(account.access_key, code_name, strong)
        return account.access_key

    def _signer(
        self, klass: AccessClass | None, code_name: str, ext: Mapping[str, str]
    ) -> AclAccount | None:
        """The account a request of access class ``klass`` is signed with; None when it is
        unsigned and may be (a read, when reads need no authentication)."""
        if not isinstance(klass, AccessClass):
            self._deny(
                "unclassified",
                f"{code_name} has no access class on this name server: refused while access "
                "control is on",
            )
        access_key = ext.get(ACCESS_KEY)
        signature = ext.get(SIGNATURE)
        if access_key is None and signature is None:
            if klass is AccessClass.READ and not self.config.authenticate_reads:
                return None
            self._deny(
                "unsigned",
                f"{code_name} needs a signed request (AccessKey, Signature): "
                "access control is on in this name server",
            )
        if not access_key or not signature:
            self._deny("unsigned", f"{code_name} carries AccessKey or Signature but not both")
        account = self._accounts.get(access_key)  # type: ignore[arg-type]
        if account is None:
            self._deny("unknown_key", f"no account with AccessKey {access_key!r}")
        assert account is not None
        return account

    def _verify_upstream(
        self,
        account: AclAccount,
        code_name: str,
        ext: Mapping[str, str],
        body: bytes,
        signature: str,
    ) -> None:
        """An upstream-form signature: the account takes the form and the signature holds."""
        access_key = account.access_key
        if account.signature == signing.SignatureForm.STRONG:
            self._deny(
                "form_refused",
                f"AccessKey {access_key!r} accepts only strong signatures "
                f"({signing.SIGNATURE_FORM}={signing.STRONG_V1}); {code_name} is signed in "
                "upstream's form",
            )
        expected = signing.upstream_signature(ext, body, account.secret_key)
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8")):
            self._deny(
                "bad_signature",
                f"signature of {code_name} with AccessKey {access_key!r} is wrong",
            )

    def _check_permission(
        self,
        account: AclAccount,
        klass: AccessClass | None,
        code: int,
        code_name: str,
        ext: Mapping[str, str],
    ) -> None:
        """The account may make a request of this access class (a broker's: for this broker)."""
        access_key = account.access_key
        if klass is AccessClass.READ:
            if not (account.read or account.admin):
                self._deny("denied", f"AccessKey {access_key!r} may not read ({code_name})")
        elif klass is AccessClass.ADMIN:
            if not account.admin:
                self._deny(
                    "denied", f"AccessKey {access_key!r} may not make admin request {code_name}"
                )
        else:
            self._check_broker(account, code, code_name, ext)

    def _verify_strong(
        self,
        account: AclAccount,
        code: int,
        code_name: str,
        ext: Mapping[str, str],
        body: bytes,
        signature: str,
    ) -> signing.StrongFields:
        """A strong-form request's fields: the account takes the form, the signature covers
        this code, and the request names this server."""
        key = account.access_key
        strong_key = self._strong_keys.get(key)
        if strong_key is None:
            self._deny(
                "form_refused",
                f"AccessKey {key!r} accepts only upstream's signature form; {code_name} is "
                "signed in the strong form",
            )
        assert strong_key is not None
        identity = self.config.server_identity
        if not identity:
            self._deny(
                "form_refused",
                f"{code_name} with AccessKey {key!r} is signed in the strong form, but this name "
                "server has no acl.server_identity for it to name: it takes upstream's form only",
            )
        fields = signing.StrongFields(ext)
        if fields.error:
            self._deny("bad_signature", f"{code_name} with AccessKey {key!r}: {fields.error}")
        expected = signing.strong_signature(code, ext, body, strong_key)
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8")):
            self._deny(
                "bad_signature",
                f"strong signature of {code_name} with AccessKey {key!r} is wrong (it covers "
                "the request code, every extField and the body)",
            )
        if fields.server != identity:
            self._deny(
                "wrong_server",
                f"{code_name} with AccessKey {key!r} is signed for name server "
                f"{fields.server!r}; this one is {identity!r} (acl.server_identity)",
            )
        return fields

    def _admit_nonce(self, key: str, code_name: str, fields: signing.StrongFields) -> None:
        """The request is fresh for its key: its stamp in the window and above the key's
        floor, its nonce new (and then remembered)."""
        now = self._wall_clock_ms()
        refusal = self.replays.admit(key, fields.nonce, fields.timestamp_ms, now)
        if refusal == "stale":
            self._deny(
                "stale",
                f"{code_name} with AccessKey {key!r} is stamped {fields.timestamp_ms}, "
                f"{fields.timestamp_ms - now:+d} ms from this server's clock: outside "
                f"acl.signature_skew_ms={self.config.signature_skew_ms}, or not newer than "
                "this key's requests accepted before (by an earlier run of this server too, "
                "or whose nonces have been forgotten) or than this server's start: sign it "
                "again",
            )
        if refusal == "replayed":
            self._deny(
                "replayed",
                f"{code_name} with AccessKey {key!r} repeats nonce {fields.nonce!r}: "
                "a replayed request",
            )

    def _check_broker(
        self, account: AclAccount, code: int, code_name: str, ext: Mapping[str, str]
    ) -> None:
        key = account.access_key
        name = ext.get("brokerName")
        cluster = ext.get("clusterName", "")
        addr = ext.get("brokerAddr", "")
        if not name:
            # A heartbeat may omit the name: the key of the broker live at the address must send it.
            holder = self._holder_of_addr.get(addr)
            if holder is None:
                if not account.brokers:
                    self._deny("denied", f"AccessKey {key!r} may not act for brokers")
                return
            owner = self._owner_of_name.get(holder.broker_name)
            if owner is None:  # its first register is being applied: an account of the name may
                may = ANY_BROKER in account.brokers or holder.broker_name in account.brokers
                owner = key if may else None
            if owner != key or holder.cluster != cluster:
                self._deny(
                    "broker_taken",
                    f"broker address {addr} is live under broker {holder.broker_name!r} of "
                    f"cluster {holder.cluster!r}: only that broker's AccessKey, in that cluster, "
                    f"may {code_name} it, not {key!r} in cluster {cluster!r}",
                )
            return
        if ANY_BROKER not in account.brokers and name not in account.brokers:
            self._deny("denied", f"AccessKey {key!r} may not act for broker {name!r}")
        owner = self._owner_of_name.get(name)
        if owner is not None and owner != key:
            self._deny(
                "broker_taken",
                f"broker {name!r} is registered under another AccessKey; "
                f"{key!r} may not {code_name} it",
            )
        if (
            owner is None
            and code == RequestCode.REGISTER_BROKER
            and len(self._owner_of_name) >= self.config.max_bound_brokers
        ):
            self._deny(
                "bound",
                f"acl.max_bound_brokers={self.config.max_bound_brokers} broker names are "
                f"already bound to keys; {name!r} cannot be registered",
            )
        self.check_address(code, code_name, cluster, name, addr)

    def check_address(
        self, code: int, code_name: str, cluster: str, broker_name: str, addr: str
    ) -> None:
        """Raises :class:`AclDenied` when ``addr`` is live under another broker name or cluster,
        or when a register would bind a new address past ``acl.max_bound_brokers``."""
        holder = self._holder_of_addr.get(addr)
        if holder is None:
            if (
                code == RequestCode.REGISTER_BROKER
                and len(self._holder_of_addr) >= self.config.max_bound_brokers
            ):
                self._deny(
                    "bound",
                    f"acl.max_bound_brokers={self.config.max_bound_brokers} live broker "
                    f"addresses are bound; {addr} cannot be registered",
                )
            return
        if holder.broker_name != broker_name or holder.cluster != cluster:
            self._deny(
                "addr_taken",
                f"broker address {addr} is live under broker {holder.broker_name!r} of cluster "
                f"{holder.cluster!r}; broker {broker_name!r} of cluster {cluster!r} may not "
                f"{code_name} it until that broker unregisters, expires or disconnects",
            )

    def broker_changed(
        self,
        kind: BrokerChangeKind,
        cluster: str,
        broker_name: str,
        addrs: tuple[tuple[int, str], ...],
    ) -> None:
        """The registry's report of addresses arriving at or departing from a broker name.

        An arrival binds each address to the broker (within the bound) and ends the binding
        of the address it replaces: one id of a broker name has one address, so an id
        registered at a new address moves the old one out of the group without a departure.
        A departure ends the binding of each address the broker held."""
        if not self.config.enabled:
            return
        holders = self._holder_of_addr
        if kind is BrokerChangeKind.DEPARTED:
            for _, addr in addrs:
                holder = holders.get(addr)
                if holder is not None and holder.broker_name == broker_name:
                    self._release(addr)
            return
        for broker_id, addr in addrs:
            ids = self._bound_of_name.get(broker_name)
            replaced = ids.get(broker_id) if ids is not None else None
            if replaced is not None and replaced != addr:
                self._release(replaced)
            if addr in holders:
                self._release(addr)
            if len(holders) < self.config.max_bound_brokers:
                holders[addr] = AddrHolder(cluster, broker_name, broker_id)
                self._bound_of_name.setdefault(broker_name, {})[broker_id] = addr

    def _release(self, addr: str) -> None:
        holder = self._holder_of_addr.pop(addr)
        ids = self._bound_of_name[holder.broker_name]
        del ids[holder.broker_id]
        if not ids:
            del self._bound_of_name[holder.broker_name]

    def holder_of(self, addr: str) -> AddrHolder | None:
        """The broker live at ``addr``, as the registry reported it; None when none is."""
        return self._holder_of_addr.get(addr)

    def accepted(self, code: int, access_key: str | None, ext: Mapping[str, str]) -> None:
        """A checked request succeeded: a register binds its broker name to the key."""
        if access_key is None or code != RequestCode.REGISTER_BROKER:
            return
        name = ext.get("brokerName")
        if not name:
            return
        self._owner_of_name.setdefault(name, access_key)

    def owner_of(self, broker_name: str) -> str | None:
        return self._owner_of_name.get(broker_name)

    def _deny(self, kind: str, remark: str) -> None:
        self.rejections[kind] += 1
        raise AclDenied(kind, remark)


def _system_ms() -> int:
    return time.time_ns() // 1_000_000
