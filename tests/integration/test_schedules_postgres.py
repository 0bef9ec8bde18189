"""Schedules on PostgreSQL: the SQLite store's semantics on a fresh database per test.

The store judges time by the caller's fake clock (``time_source="caller"``); dispatches go
through the real fenced ``dispatch_due`` and the real queue table.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from contract.dist_servers import pg_database
from cronlab.core.policy import Schedule, to_ms
from cronlab.exceptions import ConflictError, FencedError, NotFoundError
from cronlab.stores.postgres import PostgresStore

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

T0 = to_ms(datetime(2026, 6, 1, 9, 0, 30, tzinfo=UTC))
MIN = 60_000
TTL = 10_000


def minute(k: int) -> int:
    return T0 - 30_000 + k * MIN


@pytest.fixture
def store() -> Iterator[PostgresStore]:
    with pg_database() as url:
        s = PostgresStore(url, time_source="caller")
        yield s
        s.close()


def tick(**kw: object) -> Schedule:
    return Schedule(name="tick", cron="* * * * *", task="invoice", **kw)  # type: ignore[arg-type]


def statuses(store: PostgresStore) -> dict[int, str]:
    rows = store.query(store.own("SELECT trigger_ms, status FROM tasks WHERE schedule = 'tick'"))
    return {int(t): s for t, s in rows}


def lead(store: PostgresStore, owner: str, now: int, ttl: int = TTL) -> int:
    state = store.lease_cas(owner, now, ttl)
    assert state is not None
    return state.epoch


def test_put_materialises_once_and_a_redeploy_changes_nothing(store: PostgresStore) -> None:
    assert store.put_schedule(tick(), T0, replace=True) is True
    assert store.put_schedule(tick(), T0 + 5, replace=True) is False
    assert statuses(store) == {minute(1): "PENDING"}
    with pytest.raises(ConflictError, match="'tick'"):
        store.put_schedule(tick(), T0, replace=False)
    assert store.get_schedule("tick").next_fire_ms == minute(1)


def test_catchup_all_after_downtime_dispatches_every_missed_fire_in_one_transaction(
    store: PostgresStore,
) -> None:
    store.put_schedule(tick(catchup="all", overlap="allow"), T0, replace=True)
    now = minute(10) + 1_000
    assert store.dispatch_due(now, 100, lead(store, "a", now)) == 10
    dispatched = [ms for ms, status in statuses(store).items() if status == "DISPATCHED"]
    assert sorted(dispatched) == [minute(k) for k in range(1, 11)]
    assert store.queue_depth() == 10
    assert statuses(store)[minute(11)] == "PENDING"
    assert store.get_schedule("tick").last_fire_ms == minute(10)


def test_overlap_skip_is_recorded_and_takes_the_message_back(store: PostgresStore) -> None:
    store.put_schedule(tick(overlap="skip"), T0, replace=True)
    epoch = lead(store, "a", minute(1), ttl=5 * MIN)
    assert store.dispatch_due(minute(1), 100, epoch) == 1
    assert store.dispatch_due(minute(2), 100, epoch) == 0
    assert statuses(store) == {minute(1): "DISPATCHED", minute(2): "SKIPPED", minute(3): "PENDING"}
    assert store.queue_depth() == 1
    assert store.query(store.own("SELECT value FROM counters WHERE name = 'dispatched'")) == [(1,)]
    info = store.get_schedule("tick")
    assert info.last_reason == "overlap" and info.last_outcome == "SKIPPED"


def test_a_stale_leader_writes_nothing(store: PostgresStore) -> None:
    store.put_schedule(tick(), T0, replace=True)
    old = lead(store, "old", T0)
    later = minute(1) + TTL
    new = lead(store, "new", later)
    with pytest.raises(FencedError):
        store.dispatch_due(later, 100, old)
    assert statuses(store) == {minute(1): "PENDING"}
    store.dispatch_due(later, 100, new)
    assert statuses(store) == {minute(1): "DISPATCHED", minute(2): "PENDING"}


def test_pause_resume_trigger_remove(store: PostgresStore) -> None:
    store.put_schedule(tick(), T0, replace=True)
    assert store.pause_schedule("tick", T0) is True and statuses(store) == {}
    key = store.trigger_schedule("tick", T0)
    assert store.resume_schedule("tick", minute(5)) is True
    assert statuses(store) == {T0: "PENDING", minute(6): "PENDING"} and key.startswith("trigger:")
    store.remove_schedule("tick", minute(5))
    assert statuses(store) == {T0: "PENDING"}
    with pytest.raises(NotFoundError, match="'tick'"):
        store.get_schedule("tick")
