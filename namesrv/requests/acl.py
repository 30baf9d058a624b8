"""Access control for requests signed as upstream's ``AclClientRPCHook`` signs them.

A signed request carries ``AccessKey`` and ``Signature`` (and optionally ``SecurityToken``) in
its extFields. The signature is Base64(HMAC-SHA1(secret key, content)), where the content is the
UTF-8 values of every extField other than ``Signature``, in key order, followed by the body
bytes, as upstream's ``AclUtils.combineRequestContent``. The header's own fields (code, version,
opaque, remark) are not covered, as upstream.

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

import base64
import hashlib
import hmac
from collections import Counter
from collections.abc import Mapping
from enum import StrEnum
from typing import NamedTuple

from namesrv.config import AclAccount, AclConfig
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.push_events import BrokerChangeKind

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
ANY_BROKER = "*"


class AccessClass(StrEnum):
    """What a request's signature must allow; every served command declares its class."""

    BROKER = "broker"
    ADMIN = "admin"
    READ = "read"


def signature_content(ext_fields: Mapping[str, str], body: bytes) -> bytes:
    """The bytes a signature covers: sorted extField values without ``Signature``, then body."""
    values = "".join(str(ext_fields[k]) for k in sorted(ext_fields) if k != SIGNATURE)
    return values.encode("utf-8") + (body or b"")


def compute_signature(ext_fields: Mapping[str, str], body: bytes, secret_key: str) -> str:
    digest = hmac.new(
        secret_key.encode("utf-8"), signature_content(ext_fields, body), hashlib.sha1
    ).digest()
    return base64.b64encode(digest).decode("ascii")


def sign_ext_fields(
    ext_fields: Mapping[str, str],
    body: bytes,
    access_key: str,
    secret_key: str,
    security_token: str | None = None,
) -> dict[str, str]:
    """``ext_fields`` plus ``AccessKey`` (and ``SecurityToken``) and their ``Signature``."""
    out = dict(ext_fields)
    out[ACCESS_KEY] = access_key
    if security_token is not None:
        out[SECURITY_TOKEN] = security_token
    out[SIGNATURE] = compute_signature(out, body, secret_key)
    return out


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

    def __init__(self, config: AclConfig) -> None:
        self.config = config
        self._accounts = {a.access_key: a for a in config.accounts}
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
        expected = compute_signature(ext, body, account.secret_key)
        if not hmac.compare_digest(expected.encode(), str(signature).encode("utf-8")):
            self._deny(
                "bad_signature", f"signature of {code_name} with AccessKey {access_key!r} is wrong"
            )
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
        return account.access_key

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
