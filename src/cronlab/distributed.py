"""Choosing backends by URL: ``--store``, ``--election`` and ``--queue`` in any combination.

* store: ``sqlite:///PATH`` or ``postgresql://user@host:port/db``;
* election: ``lease`` (the lease row in the store), ``off`` (the anti-pattern) or
  ``etcd://host:2379[/prefix]`` (the store then fences by the highest epoch it has seen);
* queue: the store's own queue (default) or ``redis://host:6379[?prefix=NAME]`` (the store's
  queue table becomes the transactional outbox the leader relays to the stream).

An unreachable server is a one-line ``BackendUnavailable`` naming it — never a silent
fallback to SQLite.
"""

from __future__ import annotations

from typing import Any, Literal

from cronlab import urls
from cronlab.election import etcd
from cronlab.election.off import NoElection
from cronlab.election.store import StoreElector
from cronlab.exceptions import ConfigError
from cronlab.ports import Clock, LeaseElector, Queue, Store
from cronlab.queues import redis as redis_queue
from cronlab.queues.store import StoreQueue
from cronlab.stores import postgres
from cronlab.stores.sqlite import SqliteStore

Mode = Literal["lease", "off"]
Fencing = Literal["lease", "epoch"]
ELECTIONS = "lease, off or etcd://host:2379"


def open_store(url: str, *, create: bool, election: str = "lease") -> Any:
    """The store behind ``--store`` (a SQLite or PostgreSQL store object)."""
    fencing: Fencing = "epoch" if election.startswith("etcd://") else "lease"
    scheme = url.partition("://")[0]
    if scheme in postgres.SCHEMES:
        return postgres.PostgresStore(url, create=create, fencing=fencing)
    return SqliteStore(urls.parse(url).path, create=create, fencing=fencing)


def check_election(text: str) -> str:
    """Validate ``--election``; ConfigError names a value that is none of the three."""
    if text in ("lease", "off"):
        return text
    if text.startswith("etcd://"):
        etcd.parse_url(text)
        return text
    raise ConfigError(f"--election {text!r}: expected {ELECTIONS}")


def open_elector(election: str, store: Any, clock: Clock) -> tuple[LeaseElector, Mode]:
    """The elector for ``--election`` and the scheduler mode it implies."""
    if election == "off":
        return NoElection(clock), "off"
    if election.startswith("etcd://"):
        url = etcd.parse_url(election)
        etcd.ping(url)
        return etcd.EtcdElector(url, clock), "lease"
    return StoreElector(store, clock), "lease"


def observer(election: str, clock: Clock) -> LeaseElector | None:
    """What ``status`` and ``chaos`` ask for the leader: etcd's elector, or None when the
    lease row in the store is the truth (``lease``; ``off`` has no leader at all)."""
    if not election.startswith("etcd://"):
        return None
    return etcd.EtcdElector(etcd.parse_url(election), clock)


def open_queue(queue_url: str | None, store: Any, clock: Clock) -> tuple[Queue, Store]:
    """The queue for ``--queue`` and the store the processes should use with it."""
    if not queue_url or queue_url == "store":
        return StoreQueue(store, clock), store
    if queue_url.partition("://")[0] not in ("redis", "rediss"):
        raise ConfigError(f"--queue {queue_url!r}: expected store or redis://host:6379")
    queue = redis_queue.RedisQueue(redis_queue.parse_url(queue_url), store, clock)
    return queue, redis_queue.RelayStore(store, queue)
