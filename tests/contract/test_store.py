"""The Store contract: tasks, fenced dispatch, executions, registry, events — every backend."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cronlab import execution
from cronlab.election.store import StoreElector
from cronlab.exceptions import FencedError
from cronlab.handlers import Context, Registry
from cronlab.lab import report
from cronlab.lab.store import LabSqlStore
from cronlab.ports import Batch, Event, NewTask, ProcessInfo, Retry
from cronlab.queues.store import StoreQueue

from .conftest import Backend

TTL = 10_000


def tasks(n: int, at: int, handler: str = "ok", prefix: str = "k") -> list[NewTask]:
    return [
        NewTask(
            idempotency_key=f"{prefix}{i}",
            task=handler,
            trigger_ms=at + i,
            payload=json.dumps({"i": i}),
        )
        for i in range(n)
    ]


def lead(b: Backend, owner: str = "a") -> int:
    lease = StoreElector(b.store, b.clock).acquire_or_renew(owner, TTL)
    assert lease is not None
    return lease.epoch


def test_duplicate_keys_are_ignored_and_counted(backend: Backend) -> None:
    now = backend.clock.now_ms()
    assert backend.store.add_tasks(tasks(5, now)) == 5
    assert backend.store.add_tasks(tasks(7, now)) == 2
    assert backend.store.counts()["PENDING"] == 7


AUDIT = {  # a trigger of the application's own on cronlab's tasks table, in each dialect
    "prefix": """
CREATE TABLE app_audit (task_id INTEGER);
CREATE TRIGGER app_audit AFTER INSERT ON tasks BEGIN INSERT INTO app_audit VALUES (new.id); END;
""",
    "schema": """
CREATE TABLE app_audit (task_id BIGINT);
CREATE FUNCTION app_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO app_audit VALUES (NEW.id); RETURN NEW; END $$;
CREATE TRIGGER app_audit AFTER INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION app_audit();
""",
}


def test_a_trigger_on_the_tasks_table_leaves_the_count_of_added_tasks(backend: Backend) -> None:
    """What a trigger writes is not a task added (found by the simulator's own trigger: SQLite
    counted every change in the transaction, so ``defer_many`` said "added 4, existing -2")."""
    db = backend.store.db
    db.transaction(lambda c: db.run_script(c, db.space.sql(AUDIT[db.space.kind])))
    now = backend.clock.now_ms()
    assert backend.store.add_tasks(tasks(5, now)) == 5
    assert backend.store.add_tasks(tasks(7, now)) == 2
    assert backend.store.counts()["PENDING"] == 7


def test_dispatch_claims_due_rows_oldest_first_and_enqueues_them(backend: Backend) -> None:
    now = backend.clock.now_ms()
    backend.store.add_tasks(tasks(10, now))
    epoch = lead(backend)
    queue = StoreQueue(backend.store, backend.clock)
    assert backend.store.dispatch_due(now + 4, 3, epoch) == 3
    assert [m.idempotency_key for m in queue.claim("w", 100, 60_000)] == ["k0", "k1", "k2"]
    assert backend.store.dispatch_due(now + 4, 100, epoch) == 2
    assert [m.idempotency_key for m in queue.claim("w", 100, 60_000)] == ["k3", "k4"]
    assert backend.store.counts() | {} == {
        "PENDING": 5,
        "DISPATCHED": 5,
        "DONE": 0,
        "FAILED": 0,
        "MISSED": 0,
        "SKIPPED": 0,
    }
    assert backend.store.queue_depth() == 5


def test_stale_epoch_writes_nothing(backend: Backend) -> None:
    now = backend.clock.now_ms()
    backend.store.add_tasks(tasks(4, now))
    old = lead(backend, "a")
    backend.clock.advance(TTL)
    new = lead(backend, "b")
    assert new == old + 1
    with pytest.raises(FencedError):
        backend.store.dispatch_due(backend.clock.now_ms(), 100, old)
    assert backend.store.counts()["PENDING"] == 4
    assert backend.store.queue_depth() == 0


def test_an_earlier_election_kind_does_not_fence_the_next(backend: Backend) -> None:
    """Bug 6: after an etcd-elected leader (epoch = a revision, 5,000) the store's own lease
    starts at epoch 1, and every dispatch was refused for ever."""
    now = backend.clock.now_ms()
    backend.store.add_tasks(tasks(4, now))
    backend.store.lease.fencing = "epoch"  # the same database, as an etcd-elected leader used it
    assert backend.store.dispatch_due(now, 1, 5_000) == 1
    backend.store.lease.fencing = "lease"
    epoch = lead(backend)
    assert epoch < 5_000
    assert backend.store.dispatch_due(now + 3, 100, epoch) == 3
    backend.store.lease.fencing = "epoch"  # and back: the revision fence still stands
    with pytest.raises(FencedError):
        backend.store.dispatch_due(now + 3, 100, 4_999)


def test_expired_lease_refuses_its_own_epoch(backend: Backend) -> None:
    now = backend.clock.now_ms()
    backend.store.add_tasks(tasks(2, now))
    epoch = lead(backend)
    with pytest.raises(FencedError):
        backend.store.dispatch_due(now + TTL, 100, epoch)
    assert backend.store.counts()["PENDING"] == 2


def test_unclaimed_reads_let_every_reader_enqueue_a_copy(backend: Backend) -> None:
    now = backend.clock.now_ms()
    lab = LabSqlStore(backend.store)  # the lab's reads and writes
    backend.store.add_tasks(tasks(3, now))
    seen = [lab.read_due(now + 10, 100) for _ in range(2)]
    for batch in seen:
        lab.enqueue_copies(batch, now + 10)
    assert backend.store.queue_depth() == 6
    assert backend.store.counts()["DISPATCHED"] == 3


def test_read_due_includes_what_fell_due_since_the_given_scan_and_others_copied(
    backend: Backend,
) -> None:
    """``--election off``: a replica whose last scan was at ``since`` copies everything that
    fell due after it, whoever copied it first (issue 15: not only in the same second)."""
    now = backend.clock.now_ms()
    lab = LabSqlStore(backend.store)  # the lab's reads and writes
    backend.store.add_tasks(tasks(3, now))
    lab.enqueue_copies(lab.read_due(now + 10, 100), now + 10)
    again = lab.read_due(now + 5_000, 100, copied_since_ms=now - 1)
    assert sorted(t.idempotency_key for t in again) == ["k0", "k1", "k2"]
    last = max(t.trigger_ms for t in again)
    assert lab.read_due(now + 5_000, 100, copied_since_ms=last) == []  # due before
    backend.store.add_tasks([NewTask(idempotency_key="led", task="ok", trigger_ms=last + 1)])
    backend.store.dispatch_due(now + 20, 100, lead(backend))  # fenced dispatches never count
    assert lab.read_due(now + 5_000, 100, copied_since_ms=last) == []


def test_mark_missed_touches_only_pending_rows_before_the_instant(backend: Backend) -> None:
    now = backend.clock.now_ms()
    lab = LabSqlStore(backend.store)  # the lab's reads and writes
    backend.store.add_tasks(tasks(5, now))
    backend.store.dispatch_due(now, 1, lead(backend))
    assert lab.mark_missed(now + 3, now + 3) == 2
    assert backend.store.counts()["MISSED"] == 2


def registry() -> Registry:
    r = Registry()

    @r.handler("ok")
    def ok(ctx: Context, payload: dict[str, Any]) -> None:
        return None

    @r.handler("boom")
    def boom(ctx: Context, payload: dict[str, Any]) -> None:
        raise RuntimeError(f"boom {payload['i']}")

    @r.handler("chain")
    def chain(ctx: Context, payload: dict[str, Any]) -> None:
        ctx.defer("ok", {"i": 99})

    return r


DEFAULT_RETRY = Retry()


def run_batch(b: Backend, retry: Retry = DEFAULT_RETRY) -> dict[str, int]:
    messages = StoreQueue(b.store, b.clock).claim("w", 100, 30_000)
    return execution.execute(
        Batch(
            worker="w",
            messages=messages,
            run=registry().runner(b.clock.now_ms),
            retry=retry,
            now=b.clock.now_ms,
        ),
        b.store,
    )


def test_successful_runs_are_done_and_acked(backend: Backend) -> None:
    now = backend.clock.now_ms()
    backend.store.add_tasks(tasks(3, now))
    backend.store.dispatch_due(now + 5, 100, lead(backend))
    assert run_batch(backend)["ok"] == 3
    assert backend.store.counts()["DONE"] == 3
    assert backend.store.queue_depth() == 0


def test_one_failing_handler_does_not_undo_the_others(backend: Backend) -> None:
    now = backend.clock.now_ms()
    backend.store.add_tasks(tasks(2, now) + tasks(1, now, "boom", prefix="b"))
    backend.store.dispatch_due(now + 5, 100, lead(backend))
    counts = run_batch(backend)
    assert counts["ok"] == 2 and counts["error"] == 1
    assert backend.store.counts()["DONE"] == 2
    assert backend.store.queue_depth() == 1


def test_failing_handler_retries_with_backoff_then_fails_with_error_kept(
    backend: Backend,
) -> None:
    now = backend.clock.now_ms()
    backend.store.add_tasks(tasks(1, now, "boom"))
    backend.store.dispatch_due(now, 100, lead(backend))
    retry = Retry(max_attempts=3, base_ms=1_000)
    assert run_batch(backend, retry)["error"] == 1
    assert run_batch(backend, retry) == {"ok": 0, "noop": 0, "error": 0, "failed": 0, "stale": 0}
    backend.clock.advance(1_000)
    assert run_batch(backend, retry)["error"] == 1
    backend.clock.advance(1_999)
    assert sum(run_batch(backend, retry).values()) == 0
    backend.clock.advance(1)
    assert run_batch(backend, retry)["failed"] == 1
    assert backend.status(1) == "FAILED"
    assert backend.last_error(1) == "RuntimeError: boom 0"
    assert backend.store.queue_depth() == 0
    # issue 13: report counted a retried task as -2 duplicates and -2 abandoned deliveries
    measured = report.measure(backend.store, backend.clock.now_ms())
    assert (measured.duplicates, measured.abandoned_deliveries) == (0, 0)


def test_follow_up_task_is_added_in_the_same_run_once(backend: Backend) -> None:
    now = backend.clock.now_ms()
    backend.store.add_tasks(tasks(1, now, "chain"))
    backend.store.dispatch_due(now, 100, lead(backend))
    run_batch(backend)
    assert backend.store.counts()["PENDING"] == 1
    assert (
        backend.store.add_tasks(
            [NewTask(idempotency_key="k0/then/ok/1", task="ok", trigger_ms=now)]
        )
        == 0
    )


def test_two_processes_in_one_slot_are_both_listed_and_a_restart_replaces_the_exited_one(
    backend: Backend,
) -> None:
    """Issue 13: two clusters on one store each start a replica 0; the second's row replaced
    the first's, so ``status`` showed one cluster and not the leader the other held."""
    a, b, a2 = (
        ProcessInfo(role="scheduler", index=0, pid=n, owner=f"scheduler-0@h:{n}:x", started_ms=t)
        for n, t in ((10, 1), (20, 2), (11, 3))
    )
    backend.store.register_process(a)
    backend.store.register_process(b)
    assert backend.store.processes() == [a, b]
    backend.store.process_exited(a.owner, 3)
    backend.store.register_process(a2)  # a's cluster restarts its replica 0
    assert backend.store.processes() == [b, a2]


def test_process_registry_and_event_log(backend: Backend) -> None:
    info = ProcessInfo(
        role="worker", index=0, pid=42, owner="worker-0@42", started_ms=1, place="b00t:4026:99"
    )
    backend.store.register_process(info)
    backend.store.process_exited("worker-0@41", 5)  # another process: ignored
    assert backend.store.processes() == [info]
    backend.store.process_exited("worker-0@42", 5)
    assert backend.store.processes()[0].exited_ms == 5
    backend.store.record_event(Event(kind="crash", at_ms=9, pid=42, detail={"x": 1}))
    backend.store.record_event(Event(kind="acquire", at_ms=3, epoch=2))
    assert [(e.kind, e.at_ms) for e in backend.store.events()] == [("acquire", 3), ("crash", 9)]
    assert backend.store.events()[1].detail == {"x": 1}


def test_unknown_handler_fails_its_message_only(backend: Backend) -> None:
    now = backend.clock.now_ms()
    backend.store.add_tasks(tasks(1, now) + tasks(1, now, "nope", prefix="n"))
    backend.store.dispatch_due(now, 100, lead(backend))
    counts = run_batch(backend, Retry(max_attempts=1))
    assert (counts["ok"], counts["failed"]) == (1, 1)
    assert backend.last_error(2) == "NotFoundError: no handler named 'nope'"


def test_a_task_whose_message_was_lost_is_enqueued_again_once(backend: Backend) -> None:
    """Risk: a lost queue message left its task DISPATCHED for ever (and, with overlap skip,
    silenced its schedule). The leader's fenced reconcile enqueues it again; a task whose
    message waits or is in flight is left alone."""
    now = backend.clock.now_ms()
    backend.store.add_tasks(tasks(3, now))
    epoch = lead(backend)
    queue = StoreQueue(backend.store, backend.clock)
    assert backend.store.dispatch_due(now + 3, 100, epoch) == 3
    in_flight = queue.claim("w", 1, 600_000)  # k0: claimed, not acked
    backend.store.write(
        lambda tx: tx.execute(backend.store.own("DELETE FROM queue WHERE size = 2"))
    )  # k1, k2
    assert queue.reconcile(backend.clock.now_ms(), epoch) == 0  # too recent to judge
    backend.clock.advance(11_000)
    epoch = lead(backend)
    assert queue.reconcile(backend.clock.now_ms(), epoch) == 2
    assert queue.reconcile(backend.clock.now_ms(), epoch) == 0  # once
    again = queue.claim("w", 10, 60_000)
    assert sorted(m.idempotency_key for m in again) == ["k1", "k2"]
    assert [m.attempt for m in again] == [1, 1]
    assert [m.idempotency_key for m in in_flight] == ["k0"]
    backend.store.write(lambda tx: tx.execute(backend.store.own("DELETE FROM queue")))  # lost again
    backend.clock.advance(max(TTL, 11_000))
    lead(backend, "b")
    with pytest.raises(FencedError):  # a stale leader finds them, and writes nothing
        queue.reconcile(backend.clock.now_ms(), epoch)
    assert backend.store.queue_depth() == 0
