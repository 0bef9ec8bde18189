"""Choosing backends by URL: ``--store``, ``--election`` and ``--queue`` in any combination.

* store: ``sqlite:///PATH`` or ``postgresql://user@host:port/db``;
* election: ``lease`` (the lease row in the store) or ``etcd://host:2379[/prefix]`` (the
  store then fences by the highest epoch it has seen); ``off``, the anti-pattern, is the
  lab's alone (``cronlab lab cluster --election off``);
* queue: the store's own queue (default) or ``redis://host:6379[?prefix=NAME]`` (the store's
  queue table becomes the transactional outbox the leader relays to the stream).

An unreachable server is a one-line ``BackendUnavailable`` naming it — never a silent
fallback to SQLite. Each backend's client library is imported only when its URL is used, and
a missing one is a one-line ``ConfigError`` naming the extra to install.
"""

from __future__ import annotations

from cronlab import stores
from cronlab.election.store import StoreElector
from cronlab.exceptions import ConfigError
from cronlab.ports import Clock, Lease, LeaseElector, Queue
from cronlab.queues.store import StoreQueue
from cronlab.stores.sql import SqlStore
from cronlab.urls import redact

ELECTIONS = "lease or etcd://host:2379"


def store_for(
    url: str,
    *,
    create: bool,
    read_only: bool = False,
    election: str = "lease",
    lock_wait_s: float | None = None,
) -> SqlStore:
    """The store behind ``--store``, fenced as ``--election`` needs (``stores.open_store``)."""
    fencing: stores.Fencing = "epoch" if election.startswith("etcd://") else "lease"
    return stores.open_store(
        url, create=create, read_only=read_only, fencing=fencing, lock_wait_s=lock_wait_s
    )


def check_election(text: str, *, off: bool = False) -> str:
    """Validate ``--election``; ConfigError names a value that is none of them. ``off`` (the
    anti-pattern) only where ``off`` is True: the lab's commands, and those that observe."""
    if text == "lease" or (off and text == "off"):
        return text
    if text == "off":
        raise ConfigError(
            "--election off is the anti-pattern the lab teaches (every replica dispatches): "
            "run it as cronlab lab cluster --election off"
        )
    if text.startswith("etcd://"):
        from cronlab.election import etcd

        etcd.parse_url(text)
        return text
    raise ConfigError(f"--election {redact(text)!r}: expected {ELECTIONS}")


def check_queue(text: str | None) -> str | None:
    """Validate ``--queue``; ConfigError names a value that is neither the store nor Redis."""
    if not text or text == "store":
        return text
    if text.partition("://")[0] not in ("redis", "rediss"):
        raise ConfigError(f"--queue {redact(text)!r}: expected store or redis://host:6379")
    from cronlab.queues import redis as redis_queue

    redis_queue.parse_url(text)
    return text


def reach(election: str, queue_url: str | None) -> None:
    """BackendUnavailable naming an etcd or Redis server that does not answer: asked before
    the store is created, so a process that cannot start writes nothing."""
    if election.startswith("etcd://"):
        from cronlab.election import etcd

        etcd.ping(etcd.parse_url(election))
    if check_queue(queue_url) not in (None, "", "store"):
        from cronlab.queues import redis as redis_queue

        redis_queue.connect(redis_queue.parse_url(queue_url or "")).close()


def open_elector(election: str, store: SqlStore, clock: Clock) -> LeaseElector:
    """The elector for ``--election``: the store's lease row, or etcd."""
    if election.startswith("etcd://"):
        from cronlab.election import etcd

        url = etcd.parse_url(election)
        etcd.ping(url)
        return etcd.EtcdElector(url, clock)
    return StoreElector(store, clock)


def observer(election: str, clock: Clock) -> LeaseElector | None:
    """What ``status`` and ``chaos`` ask for the leader: etcd's elector, or None when the
    lease row in the store is the truth (``lease``; ``off`` has no leader at all)."""
    if not election.startswith("etcd://"):
        return None
    from cronlab.election import etcd

    return etcd.EtcdElector(etcd.parse_url(election), clock)


def open_queue(queue_url: str | None, store: SqlStore, clock: Clock) -> Queue:
    """The queue for ``--queue``: the store's own, or a Redis stream the store's outbox feeds."""
    if not queue_url or check_queue(queue_url) == "store":
        return StoreQueue(store, clock)
    from cronlab.queues import redis as redis_queue

    return redis_queue.RedisQueue(redis_queue.parse_url(queue_url), store, clock)


def current_lease(
    store: SqlStore, clock: Clock, elector: LeaseElector | None = None
) -> Lease | None:
    """The unexpired lease: the elector's when given (etcd's), else the store's lease row."""
    if elector is not None:
        return elector.current()
    state = store.lease_read()
    if state.holder is None or not state.live(clock.now_ms()):
        return None
    return Lease(holder=state.holder, epoch=state.epoch, expires_ms=state.expires_ms)
