"""The Queue contract: visibility timeout, redelivery, stale acks — every backend."""

from __future__ import annotations

from cronlab.election.store import StoreElector
from cronlab.ports import NewTask
from cronlab.queues.store import StoreQueue

from .conftest import Backend


def fill(b: Backend, n: int) -> StoreQueue:
    now = b.clock.now_ms()
    b.store.add_tasks(NewTask(idempotency_key=f"k{i}", task="ok", trigger_ms=now) for i in range(n))
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


def test_an_ack_settles_only_the_messages_given(backend: Backend) -> None:
    q = fill(backend, 3)
    claimed = q.claim("w1", 10, 1_000)
    assert q.ack(claimed[:1]) == 1
    assert q.depth() == 2
    backend.clock.advance(1_000)
    again = q.claim("w2", 10, 1_000)
    assert sorted(m.task_id for m in again) == sorted(m.task_id for m in claimed[1:])
    assert all(m.receives == 2 for m in again)
    assert q.ack(claimed[1:]) == 0  # stale deliveries settle nothing
    assert q.ack(again) == 2 and q.depth() == 0


def test_claims_take_exactly_their_limit_across_a_large_dispatch(backend: Backend) -> None:
    q = fill(backend, 1_234)
    sizes = [len(q.claim("w", n, 60_000)) for n in (700, 1, 333, 1_000)]
    assert sizes == [700, 1, 333, 200]
    assert q.claim("w", 10, 60_000) == []
    assert q.depth() == 1_234


def test_every_task_is_delivered_once_per_dispatch(backend: Backend) -> None:
    q = fill(backend, 1_001)
    got = [m for n in (499, 2, 600) for m in q.claim("w", n, 60_000)]
    assert len({m.task_id for m in got}) == 1_001 == len(got)
    assert q.ack(got) == 1_001 and q.depth() == 0


def test_a_split_envelope_keeps_its_place_in_the_queue(backend: Backend) -> None:
    """A claim that takes part of an envelope leaves the rest where it was: FIFO. Before, the
    rest became a new envelope at the back, behind everything queued since (found by the lab's
    simulated run: under election off, first copies ran after the other replicas' copies)."""
    q = fill(backend, 1_000)  # two envelopes: tasks 1-500 and 501-1000
    first = q.claim("w1", 10, 5_000)
    rest = q.claim("w2", 1_000, 5_000)
    assert [m.task_id for m in first] == list(range(1, 11))
    assert [m.task_id for m in rest] == list(range(11, 1_001))
