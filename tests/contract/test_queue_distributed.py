"""The queue contract on real time, against the store queue (SQLite) and Redis Streams; then
what Redis adds: the outbox relay, re-publishing after a leader died before publishing, and
worker batches acked on the stream only once the store committed them."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cronlab import execution
from cronlab.clock import SystemClock
from cronlab.election.store import StoreElector
from cronlab.exceptions import BackendUnavailable, ConfigError, FencedError
from cronlab.handlers import Context, Registry
from cronlab.ports import Batch, NewTask, Queue, Retry
from cronlab.queues.redis import RedisQueue, connect, parse_url
from cronlab.queues.store import StoreQueue
from cronlab.stores.postgres import PostgresStore
from cronlab.stores.sqlite import SqliteStore

from .dist_servers import REDIS, START_REDIS, need, pg_database

CLOCK = SystemClock()
VIS = 400  # ms: short so redelivery is quick; generous deadlines below


@dataclass
class Setup:
    store: SqliteStore
    queue: Callable[[], Queue]  # a new client per call, as if in another process
    publish: Callable[[], None]  # what the leader does after a dispatch (the relay for Redis)


@pytest.fixture(params=["store", pytest.param("redis", marks=pytest.mark.redis)])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    store = SqliteStore(tmp_path / "q.db")
    if request.param == "store":
        yield Setup(store, lambda: StoreQueue(store, CLOCK), lambda: None)
    else:
        url = parse_url(f"{REDIS}?prefix=cronlab-test-{uuid.uuid4().hex[:10]}")
        need(lambda: connect(url).close(), START_REDIS)
        made: list[RedisQueue] = []

        def queue() -> RedisQueue:
            made.append(RedisQueue(url, store, CLOCK))
            return made[-1]

        relay = queue()

        def publish() -> None:
            relay.relay()

        yield Setup(store, queue, publish)
        relay.drop()
        for q in made:
            q.close()
    store.close()


def fill(s: Setup, n: int, handler: str = "ok") -> int:
    now = CLOCK.now_ms()
    s.store.add_tasks(
        NewTask(idempotency_key=f"k{i}", task=handler, trigger_ms=now, payload=json.dumps({}))
        for i in range(n)
    )
    lease = StoreElector(s.store, CLOCK).acquire_or_renew("leader", 60_000)
    assert lease is not None
    s.store.dispatch_due(now, n, lease.epoch)
    s.publish()
    return lease.epoch


def test_a_claimed_message_is_invisible_to_others(setup: Setup) -> None:
    fill(setup, 3)
    q1, q2 = setup.queue(), setup.queue()
    first, second = q1.claim("w1", 2, 5_000), q2.claim("w2", 10, 5_000)
    assert len(first) == 2 and len(second) == 1
    assert {m.task_id for m in first}.isdisjoint(m.task_id for m in second)
    assert q2.claim("w2", 10, 5_000) == []
    assert q1.depth() == 3


def test_an_unacked_message_comes_back_after_the_timeout(setup: Setup) -> None:
    fill(setup, 1)
    q1, q2 = setup.queue(), setup.queue()
    (m,) = q1.claim("w1", 10, VIS)
    assert q2.claim("w2", 10, VIS) == []
    (again,) = poll(lambda: q2.claim("w2", 10, VIS))
    assert again.task_id == m.task_id and again.receives == m.receives + 1
    assert again.attempt == m.attempt  # a delivery abandoned is not a retry after an error


def test_a_stale_delivery_cannot_ack(setup: Setup) -> None:
    fill(setup, 1)
    q1, q2 = setup.queue(), setup.queue()
    (m,) = q1.claim("w1", 10, VIS)
    (again,) = poll(lambda: q2.claim("w2", 10, VIS))
    assert q1.ack([m]) == 0
    assert q2.depth() == 1
    assert q2.ack([again]) == 1
    assert q2.depth() == 0


def test_an_ack_settles_only_the_messages_given(setup: Setup) -> None:
    fill(setup, 3)
    q1, q2 = setup.queue(), setup.queue()
    claimed = q1.claim("w1", 10, VIS)
    assert q1.ack(claimed[:1]) == 1 and q1.depth() == 2
    again = poll(lambda: q2.claim("w2", 10, VIS))
    assert sorted(m.task_id for m in again) == sorted(m.task_id for m in claimed[1:])
    assert all(m.receives == 2 for m in again)
    assert q1.ack(claimed[1:]) == 0  # stale deliveries settle nothing
    assert q2.ack(again) == 2 and q2.depth() == 0


def test_claims_take_exactly_their_limit_across_a_large_dispatch(setup: Setup) -> None:
    fill(setup, 1_234)
    q = setup.queue()
    sizes = [len(q.claim("w", n, 60_000)) for n in (700, 1, 333, 1_000)]
    assert sizes == [700, 1, 333, 200]
    assert q.claim("w", 10, 60_000) == [] and q.depth() == 1_234


def test_every_task_is_delivered_once_and_a_split_tail_keeps_its_receives(setup: Setup) -> None:
    fill(setup, 1_001)
    q1, q2 = setup.queue(), setup.queue()
    first = q1.claim("w1", 499, VIS)  # part of the first envelope; its tail stays visible
    got = [*q2.claim("w2", 2, VIS), *q2.claim("w2", 1_000, VIS)]
    assert all(m.receives == 1 for m in got) and q2.ack(got) == 502
    again = poll(lambda: q2.claim("w2", 1_000, VIS))  # w1 never acked: its part comes back
    assert sorted(m.task_id for m in again) == sorted(m.task_id for m in first)
    assert all(m.receives == 2 for m in again)
    assert len({m.task_id for m in [*got, *again]}) == 1_001 == len(got) + len(again)
    assert q2.ack(again) == 499 and q2.depth() == 0


def registry() -> Registry:
    r = Registry()

    @r.handler("ok")
    def ok(ctx: Context, payload: dict[str, Any]) -> None:
        return None

    @r.handler("boom")
    def boom(ctx: Context, payload: dict[str, Any]) -> None:
        raise RuntimeError("boom")

    return r


@pytest.fixture(
    params=["sqlite-outbox", pytest.param("postgres-outbox", marks=pytest.mark.postgres)]
)
def redis_setup(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Any, Callable[[], RedisQueue]]]:
    """Redis queues whose outbox is a SQLite store (claim/publish/delete) or a PostgreSQL store
    (``outbox_take``: read, publish, then delete)."""
    with ExitStack() as stack:
        if request.param == "sqlite-outbox":
            store: Any = SqliteStore(tmp_path / "outbox.db")
        else:
            store = PostgresStore(stack.enter_context(pg_database()))
        yield from _redis_queues(store)


def _redis_queues(store: Any) -> Iterator[tuple[Any, Callable[[], RedisQueue]]]:
    url = parse_url(f"{REDIS}?prefix=cronlab-test-{uuid.uuid4().hex[:10]}")
    need(lambda: connect(url).close(), START_REDIS)
    made: list[RedisQueue] = []

    def queue() -> RedisQueue:
        made.append(RedisQueue(url, store, CLOCK))
        return made[-1]

    yield store, queue
    if made:
        made[0].drop()
    for q in made:
        q.close()
    store.close()


@pytest.mark.redis
def test_a_dispatch_that_never_reached_the_stream_is_published_by_the_next_leader(
    redis_setup: tuple[Any, Callable[[], RedisQueue]],
) -> None:
    store, queue = redis_setup
    now = CLOCK.now_ms()
    store.add_tasks(NewTask(idempotency_key=f"k{i}", task="ok", trigger_ms=now) for i in range(5))
    lease = StoreElector(store, CLOCK).acquire_or_renew("old", 60_000)
    assert lease is not None
    store.dispatch_due(now, 5, lease.epoch)  # committed, then the leader "dies": no relay
    q = queue()
    assert q.claim("w", 10, 5_000) == [] and q.depth() == 5  # all in the outbox
    store.lease_release("old")
    new = StoreElector(store, CLOCK).acquire_or_renew("new", 60_000)
    assert new is not None
    dispatched(store, queue(), 100, new.epoch)
    got = q.claim("w", 10, 5_000)
    assert sorted(m.idempotency_key for m in got) == [f"k{i}" for i in range(5)]
    assert store.queue_depth() == 0  # the outbox is empty


@pytest.mark.redis
def test_worker_batches_are_acked_on_the_stream_after_the_store_commits(
    redis_setup: tuple[Any, Callable[[], RedisQueue]],
) -> None:
    store, queue = redis_setup
    now = CLOCK.now_ms()
    store.add_tasks([NewTask(idempotency_key=f"k{i}", task="ok", trigger_ms=now) for i in range(3)])
    store.add_tasks([NewTask(idempotency_key="b", task="boom", trigger_ms=now)])
    lease = StoreElector(store, CLOCK).acquire_or_renew("l", 60_000)
    assert lease is not None
    q = queue()
    dispatched(store, q, 100, lease.epoch)
    batch = q.claim("w", 10, VIS)
    run = registry().runner(CLOCK.now_ms)
    retry = Retry(max_attempts=2, base_ms=BACKOFF_MS)
    failed_at = CLOCK.now_ms()
    work = Batch(worker="w", messages=batch, run=run, retry=retry, now=CLOCK.now_ms)
    assert execution.execute(work, store, q)["ok"] == 3
    # every delivery is acked; the failing one waits in the outbox for its backoff
    assert store.counts()["DONE"] == 3 and q.depth() == 1 == store.queue_depth()
    assert q.claim("w2", 10, VIS) == [] and dispatched(store, q, 100, lease.epoch) == 0
    assert q.claim("w2", 10, VIS) == []  # not due: the relay left it in the outbox
    (again,) = poll(lambda: [*relayed(store, q, lease.epoch), *q.claim("w2", 10, VIS)])
    assert CLOCK.now_ms() - failed_at >= BACKOFF_MS
    assert again.idempotency_key == "b" and again.attempt == 2
    work = Batch(worker="w2", messages=[again], run=run, retry=retry, now=CLOCK.now_ms)
    assert execution.execute(work, store, q)["failed"] == 1
    assert store.counts()["FAILED"] == 1 and q.depth() == 0


@pytest.mark.redis
def test_a_task_whose_stream_entry_was_lost_is_enqueued_again_once(
    redis_setup: tuple[Any, Callable[[], RedisQueue]],
) -> None:
    """Risk: a stream entry lost after the relay (AOF ``everysec``, a failover) left its tasks
    DISPATCHED for ever. The leader's fenced reconcile relays them again; a task whose entry
    waits or is in flight is left alone."""
    store, queue = redis_setup
    now = CLOCK.now_ms()
    store.add_tasks(NewTask(idempotency_key=f"k{i}", task="ok", trigger_ms=now) for i in range(4))
    lease = StoreElector(store, CLOCK).acquire_or_renew("l", 60_000)
    assert lease is not None
    q = queue()
    assert dispatched(store, q, 100, lease.epoch) == 4
    in_flight = q.claim("w", 1, 600_000)  # k0 claimed; k1..k3 split off into a new entry
    waiting = q.claim("w", 1, 600_000) and None  # k1 claimed; k2, k3 in the newest entry
    client = connect(q.url)
    newest = client.xrevrange(q.stream, count=1)[0][0]
    assert client.xdel(q.stream, newest) == 1  # k2, k3: lost
    assert q.reconcile(CLOCK.now_ms(), lease.epoch) == 0  # too recent to judge
    store.write(
        lambda tx: tx.execute(store.own("UPDATE tasks SET dispatched_ms = dispatched_ms - 11000"))
    )
    assert q.reconcile(CLOCK.now_ms(), lease.epoch) == 2
    assert q.reconcile(CLOCK.now_ms(), lease.epoch) == 0  # once
    again = q.claim("w2", 10, 60_000)
    assert sorted(m.idempotency_key for m in again) == ["k2", "k3"]
    assert [m.attempt for m in again] == [1, 1]
    assert [m.idempotency_key for m in in_flight] == ["k0"] and waiting is None
    store.lease_release("l")
    assert StoreElector(store, CLOCK).acquire_or_renew("m", 60_000) is not None
    store.write(
        lambda tx: tx.execute(store.own("UPDATE tasks SET dispatched_ms = dispatched_ms - 11000"))
    )
    client.xdel(q.stream, *[e for e, _ in client.xrange(q.stream)])
    with pytest.raises(FencedError):
        q.reconcile(CLOCK.now_ms(), lease.epoch)
    client.close()


@pytest.mark.redis
def test_a_held_delivery_is_not_received_again_however_long_its_batch_runs(
    redis_setup: tuple[Any, Callable[[], RedisQueue]],
) -> None:
    """Risk: a handler longer than the visibility timeout was received again while it ran.
    The worker holds its deliveries (``Queue.holding``: a heartbeat that resets their idle
    time); once it stops, an unacked delivery comes back after the timeout."""
    store, queue = redis_setup
    vis = 1_000
    store.add_tasks([NewTask(idempotency_key="k", task="ok", trigger_ms=CLOCK.now_ms())])
    lease = StoreElector(store, CLOCK).acquire_or_renew("l", 60_000)
    assert lease is not None
    a, b = queue(), queue()
    dispatched(store, a, 10, lease.epoch)
    batch = a.claim("a", 10, vis)
    with a.holding([batch], vis):
        time.sleep(2.5 * vis / 1000)
        assert b.claim("b", 10, vis) == []
    again = poll(lambda: b.claim("b", 10, vis))
    assert [(m.idempotency_key, m.receives) for m in again] == [("k", 2)]


def test_a_relay_publishing_holds_no_write_lock(tmp_path: Path) -> None:
    """Risk: on SQLite the relay published inside the write transaction, so a Redis outage
    (retried for a minute) held every other writer of the store for that long."""
    store = SqliteStore(tmp_path / "outbox.db")
    other = SqliteStore(tmp_path / "outbox.db", lock_wait_s=0.2)
    now = CLOCK.now_ms()
    store.add_tasks([NewTask(idempotency_key="k", task="ok", trigger_ms=now)])
    lease = StoreElector(store, CLOCK).acquire_or_renew("l", 60_000)
    assert lease is not None
    store.dispatch_due(now, 10, lease.epoch)
    store.write(lambda tx: tx.execute("CREATE TABLE cronlab_probe (x INT)"))
    wrote: list[int] = []

    def publish(envelopes: list[Any]) -> None:  # Redis hangs here; others write meanwhile
        wrote.append(other.write(lambda tx: tx.execute("INSERT INTO cronlab_probe VALUES (1)")))

    assert store.queue.outbox_take(10, CLOCK.now_ms(), publish) == 1
    assert wrote == [1] and store.queue_depth() == 0
    store.close()
    other.close()


# The failed run's backoff: long enough that the steps between its failure and the "not due"
# claim take less on a slow, loaded machine (300 ms did not, on a 2-core run of the suite).
BACKOFF_MS = 2_000


def dispatched(store: Any, queue: RedisQueue, limit: int, epoch: int) -> int:
    """A leader's dispatch: claim what is due, then relay it (``Scheduler.dispatch``)."""
    n = int(store.dispatch_due(CLOCK.now_ms(), limit, epoch))
    queue.relay()
    return n


def relayed(store: Any, queue: RedisQueue, epoch: int) -> list[Any]:
    """The leader's round: dispatch (nothing new here) and relay what is due."""
    dispatched(store, queue, 100, epoch)
    return []


@pytest.mark.redis
def test_an_unreachable_redis_is_a_one_line_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable, match=r"redis redis://127\.0\.0\.1:1") as e:
        RedisQueue(parse_url("redis://127.0.0.1:1"), SqliteStore(tmp_path / "x.db"), CLOCK)
    assert "\n" not in str(e.value)


@pytest.mark.redis
def test_an_entry_an_older_release_wrote_is_a_one_line_error_naming_the_fix(
    redis_setup: tuple[Any, Callable[[], RedisQueue]],
) -> None:
    _, queue = redis_setup
    q = queue()
    q._redis.xadd(q.stream, {"m": json.dumps([1, 2, "k", "ok", "{}", 0, 1])})  # one task an entry
    with pytest.raises(ConfigError, match="holds no envelope") as e:
        q.claim("w", 10, 5_000)
    assert "\n" not in str(e.value) and "drain the stream or use another ?prefix=" in str(e.value)


def poll(fn: Callable[[], list[Any]], deadline_s: float = 10.0) -> list[Any]:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if got := fn():
            return got
        time.sleep(0.05)
    raise AssertionError(f"nothing within {deadline_s} s")


def test_a_delivery_whose_task_the_retention_deleted_is_dropped(setup: Setup) -> None:
    """Found by ``cronlab verify`` (kinds duties and duplicate, seed 73): a task ran, the
    retention deleted its finished row, then a second copy of its message came (a relay that
    published twice). Every claim raised KeyError in ``queue_messages``: the worker died,
    and again after each restart, while the rest of the queue waited behind it. Such a
    delivery is now acked and dropped: nothing is left to run."""
    epoch = fill(setup, 1)
    q = setup.queue()
    (m,) = q.claim("w1", 10, VIS)
    run = registry().runner(CLOCK.now_ms)
    batch = Batch(worker="w1", messages=[m], run=run, retry=Retry(), now=CLOCK.now_ms)
    assert execution.execute(batch, setup.store)["ok"] == 1
    q.ack([m])
    now = CLOCK.now_ms()
    setup.store.db.transaction(lambda c: setup.store.db.enqueue(c, [(m.task_id, 1)], now, now))
    setup.publish()
    assert setup.store.prune_history(1, CLOCK.now_ms() + 30_000, 100, epoch) >= 1
    assert setup.store.counts()["DONE"] == 0  # the row is gone; its second copy is queued
    assert q.claim("w2", 10, VIS) == []
    time.sleep(2 * VIS / 1000)
    assert q.claim("w3", 10, VIS) == [] and q.depth() == 0  # acked, not only passed over
