"""The Queue contract: visibility timeout, redelivery, stale acks — every backend."""

from __future__ import annotations

from cronlab.election.store import StoreElector
from cronlab.ports import NewTask
from cronlab.queues.store import StoreQueue

from .conftest import Backend


def fill(b: Backend, n: int) -> StoreQueue:
    now = b.clock.now_ms()
    b.store.add_tasks(
        NewTask(idempotency_key=f"k{i}", handler="ok", trigger_ms=now) for i in range(n)
    )
    lease = StoreElector(b.store, b.clock).acquire_or_renew("a", 10_000)
    assert lease is not None
    b.store.dispatch_due(now, n, lease.epoch)
    return StoreQueue(b.store, b.clock)


def test_a_claimed_message_is_invisible_to_others(backend: Backend) -> None:
    q = fill(backend, 3)
    first = q.claim("w1", 2, 5_000)
    second = q.claim("w2", 10, 5_000)
    assert len(first) == 2 and len(second) == 1
    assert {m.id for m in first}.isdisjoint(m.id for m in second)
    assert q.claim("w3", 10, 5_000) == []
    assert q.depth() == 3


def test_unacked_message_comes_back_after_the_timeout(backend: Backend) -> None:
    q = fill(backend, 1)
    (m,) = q.claim("w1", 10, 5_000)
    backend.clock.advance(4_999)
    assert q.claim("w2", 10, 5_000) == []
    backend.clock.advance(1)
    (again,) = q.claim("w2", 10, 5_000)
    assert again.id == m.id and again.receives == m.receives + 1


def test_a_stale_delivery_cannot_ack(backend: Backend) -> None:
    q = fill(backend, 1)
    (m,) = q.claim("w1", 10, 1_000)
    backend.clock.advance(1_000)
    (again,) = q.claim("w2", 10, 1_000)
    assert q.ack([m]) == 0
    assert q.depth() == 1
    assert q.ack([again]) == 1
    assert q.depth() == 0
