"""Lease election on etcd (``--election etcd://host:2379[/prefix]``).

The leader key ``<prefix>/leader`` holds the owner's name and is attached to an etcd lease of
TTL seconds. Leadership is one transaction that creates the key only if it is absent
(``create_revision == 0``); the key's create revision is the fencing epoch. Revisions only
grow in an etcd cluster, so every new acquisition gets a higher epoch than any before it; the
store keeps the highest epoch it has seen and refuses a dispatch that carries a lower one
(``fencing="epoch"`` stores).

Renewal is a keep-alive of the lease plus a check that the key is still ours. Expiry is judged
by etcd's clock (it deletes the key when the lease runs out); this replica's own ``expires_ms``
starts counting BEFORE the request, so the replica believes it leads no longer than etcd does.
Talks to etcd's HTTP gateway (``etcd3gw``): ``/v3/`` (etcd 3.4 and later; the only one from
3.5), else ``/v3beta/`` (etcd 3.3), whichever the server answers first.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import Any

from cronlab import urls
from cronlab.exceptions import BackendUnavailable, ConfigError

try:
    import etcd3gw
    import requests
    from etcd3gw.exceptions import Etcd3Exception
    from etcd3gw.lease import Lease as EtcdLease
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ConfigError("etcd:// election needs the etcd extra: pip install 'cronlab[etcd]'") from exc
from cronlab.ports import Clock, Lease
from cronlab.urls import Url

API_PATHS = ("/v3/", "/v3beta/")
DEFAULT_PREFIX = "/cronlab"
REQUEST_TIMEOUT_S = 2.0


@dataclass(frozen=True, kw_only=True)
class EtcdUrl(Url):
    """``etcd://host:port[/prefix]`` parsed; the leader key is ``prefix + "/leader"``."""

    host: str
    port: int
    prefix: str

    @property
    def leader_key(self) -> str:
        return f"{self.prefix}/leader"


def parse_url(text: str) -> EtcdUrl:
    """Parse ``--election etcd://…``; ConfigError names a malformed URL."""
    parts, port = urls.split(text, "etcd")
    if parts.scheme != "etcd" or not parts.hostname:
        shown = urls.redact(text)
        raise ConfigError(f"malformed etcd URL {shown!r}: expected etcd://host:2379[/prefix]")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            f"etcd URL {urls.redact(text)!r}: cronlab's etcd client does not authenticate, so "
            "it would not send these credentials; use an etcd reachable without them "
            "(loopback, or a network of the cluster's own), or the store's lease"
        )
    prefix = parts.path.rstrip("/") or DEFAULT_PREFIX
    return EtcdUrl(host=parts.hostname, port=port or 2379, prefix=prefix, text=text)


@dataclass(frozen=True, kw_only=True)
class _Held:
    """What this process holds: the etcd lease and the leader key's create revision."""

    lease: EtcdLease
    epoch: int


class EtcdElector:
    """``ports.LeaseElector`` over an etcd leader key bound to an etcd lease."""

    def __init__(self, url: EtcdUrl, clock: Clock, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.url = url
        self._clock = clock
        self._timeout_s = timeout_s
        self._gateway: Any = None
        self._key = _b64(url.leader_key)
        self._held: _Held | None = None

    @property
    def _client(self) -> Any:
        """The gateway client, at the API path the server answers (found on first use)."""
        if self._gateway is None:
            path = api_path(self.url, self._timeout_s)
            self._gateway = etcd3gw.client(
                host=self.url.host, port=self.url.port, api_path=path, timeout=self._timeout_s
            )
        return self._gateway

    def acquire_or_renew(self, owner: str, ttl_ms: int) -> Lease | None:
        """Renew our key's lease, or create the key if absent; None when another holds it."""
        if ttl_ms <= 0:
            raise ConfigError(f"lease TTL must be > 0 ms, got {ttl_ms}")
        started = self._clock.now_ms()
        epoch = self._call(self._renew, owner) if self._held else None
        if epoch is None:
            epoch = self._call(self._acquire, owner, ttl_ms)
        if epoch is None:
            return None
        return Lease(holder=owner, epoch=epoch, expires_ms=started + ttl_ms)

    def release(self, owner: str) -> None:
        """Delete the key if ``owner`` holds it and revoke our lease (a standby takes over)."""
        held, self._held = self._held, None
        if held is None:
            return
        self._call(self._delete_if, owner, held.epoch)
        self._call(held.lease.revoke)

    def current(self) -> Lease | None:
        """The leader key's holder and epoch; expiry from its lease's remaining TTL."""
        now = self._clock.now_ms()
        kv = self._call(self._read)
        if kv is None:
            return None
        ttl_s = self._call(self._ttl, int(kv.get("lease", 0)))
        if ttl_s <= 0:
            return None
        holder = base64.b64decode(kv["value"]).decode()
        return Lease(holder=holder, epoch=int(kv["create_revision"]), expires_ms=now + ttl_s * 1000)

    # -- etcd requests ----------------------------------------------------------------------

    def _acquire(self, owner: str, ttl_ms: int) -> int | None:
        lease = self._client.lease(ttl=max(1, math.ceil(ttl_ms / 1000)))
        put = {"key": self._key, "value": _b64(owner), "lease": lease.id}
        result = self._txn([_created(self._key, 0)], [{"request_put": put}])
        if not result.get("succeeded"):
            lease.revoke()  # unused: do not let it linger until its TTL
            return None
        # The key was created by this transaction, so its create revision is the txn's.
        epoch = int(result["header"]["revision"])
        self._held = _Held(lease=lease, epoch=epoch)
        return epoch

    def _renew(self, owner: str) -> int | None:
        assert self._held is not None
        held = self._held
        if held.lease.refresh() <= 0 or not self._still_ours(owner, held.epoch):
            self._held = None  # expired or taken: the next acquisition is a new epoch
            return None
        return held.epoch

    def _still_ours(self, owner: str, epoch: int) -> bool:
        compare = [_created(self._key, epoch), _value_is(self._key, owner)]
        return bool(self._txn(compare, []).get("succeeded"))

    def _delete_if(self, owner: str, epoch: int) -> None:
        compare = [_created(self._key, epoch), _value_is(self._key, owner)]
        self._txn(compare, [{"request_delete_range": {"key": self._key}}])

    def _read(self) -> dict[str, Any] | None:
        result = self._client.post(self._client.get_url("/kv/range"), json={"key": self._key})
        kvs = result.get("kvs") or []
        return dict(kvs[0]) if kvs else None

    def _ttl(self, lease_id: int) -> int:
        """Seconds left on a lease; -1 when it has expired (etcd then omits the TTL)."""
        url = self._client.get_url("/kv/lease/timetolive")
        return int(self._client.post(url, json={"ID": lease_id}).get("TTL", -1))

    def _txn(self, compare: list[dict[str, Any]], success: list[dict[str, Any]]) -> dict[str, Any]:
        txn = {"compare": compare, "success": success, "failure": []}
        return dict(self._client.transaction(txn))

    def _call(self, fn: Any, *args: Any) -> Any:
        """Run one etcd request; an unreachable server becomes ``BackendUnavailable``."""
        try:
            return fn(*args)
        except (Etcd3Exception, requests.RequestException) as exc:
            raise BackendUnavailable(f"etcd {self.url.shown} unreachable: {_reason(exc)}") from exc


def ping(url: EtcdUrl, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
    """Raise ``BackendUnavailable`` naming the server unless etcd answers a status request."""
    api_path(url, timeout_s)


def api_path(url: EtcdUrl, timeout_s: float = REQUEST_TIMEOUT_S) -> str:
    """The first of ``API_PATHS`` where the server answers a status request;
    ``BackendUnavailable`` names the server when it is unreachable or answers on neither."""
    for path in API_PATHS:
        status = f"http://{url.host}:{url.port}{path}maintenance/status"
        try:
            answer = requests.post(status, json={}, timeout=timeout_s)
        except requests.RequestException as exc:
            raise BackendUnavailable(f"etcd {url.shown} unreachable: {_reason(exc)}") from exc
        if answer.status_code == 200:
            return path
    tried = " or ".join(API_PATHS)
    raise BackendUnavailable(f"etcd {url.shown}: no v3 HTTP gateway at {tried}")


def _reason(exc: Exception) -> str:
    """The useful end of a requests/etcd3gw error: ``[Errno 111] Connection refused`` …"""
    text = getattr(exc, "detail_text", None) or str(exc) or type(exc).__name__
    if (at := text.rfind("[Errno")) >= 0:
        return text[at:].split("'")[0].split('"')[0].rstrip(")")
    return text.splitlines()[0][:200]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _created(key: str, revision: int) -> dict[str, Any]:
    return {"key": key, "result": "EQUAL", "target": "CREATE", "create_revision": revision}


def _value_is(key: str, owner: str) -> dict[str, Any]:
    return {"key": key, "result": "EQUAL", "target": "VALUE", "value": _b64(owner)}
