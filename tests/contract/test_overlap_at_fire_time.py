"""``overlap="skip"`` is judged at the occurrence's fire time, whatever the dispatch waited for
(issue 27, bug 6). On SQLite a run's handler holds the write lock, so the leader's dispatch
of the next occurrence waits for the run to commit: it found the run DONE and ran the
occurrence that fell due during it, and recorded the instant it began to wait as its
dispatch time (6.0 s for a dispatch at 10 s). Failed first on SQLite."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from cronlab import execution
from cronlab.clock import FakeClock
from cronlab.core.policy import Schedule
from cronlab.election.store import StoreElector
from cronlab.handlers import Context, Registry
from cronlab.ports import Batch, Retry
from cronlab.queues.store import StoreQueue
from cronlab.runtime.scheduler import Scheduler, SchedulerConfig
from cronlab.stores.sqlite import SqliteStore

T0 = 1_767_225_600_000  # a whole minute: the schedule fires at T0, T0 + 5 s, ...


def test_an_occurrence_due_while_the_previous_run_ran_is_skipped_though_its_dispatch_waited(
    tmp_path: Path,
) -> None:
    path, clock = tmp_path / "cron.db", FakeClock(T0 - 1_000)
    leader_store = SqliteStore(path)
    every5 = Schedule(name="every5", cron="* * * * * */5", task="slow", overlap="skip")
    leader_store.put_schedule(every5, clock.now_ms(), replace=True)
    clock.advance(1_000)
    owner = "leader"
    leader = Scheduler(
        SchedulerConfig(replica=0),
        store=leader_store,
        queue=StoreQueue(leader_store, clock),
        elector=StoreElector(leader_store, clock),
        clock=clock,
        owner=owner,
    )
    leader.step()  # leads, dispatches the occurrence at T0
    running, waiting = threading.Event(), threading.Event()

    def slow(ctx: Context, payload: dict[str, Any]) -> None:
        clock.advance(6_000)  # the next occurrence (T0 + 5 s) falls due while this runs
        running.set()
        waiting.wait(5)  # the leader's dispatch is queued on the write lock meanwhile
        time.sleep(0.3)
        clock.advance(4_000)  # the run ends at T0 + 10 s

    registry = Registry()
    registry.handler("slow")(slow)
    claimed: list[str] = []

    def work() -> None:  # a worker process of its own: its own connection, in its thread
        store = SqliteStore(path)
        messages = StoreQueue(store, clock).claim("w", 10, 60_000)
        claimed.extend(m.idempotency_key for m in messages)
        run = registry.runner(clock.now_ms)
        execution.execute(
            Batch(worker="w", messages=messages, run=run, retry=Retry(), now=clock.now_ms), store
        )
        store.close()

    worker = threading.Thread(target=work)
    worker.start()
    assert running.wait(5) and claimed == [f"schedule:every5:{T0}"]
    waiting.set()
    leader.wake()
    leader.step()  # waits for the write lock until the run commits, then dispatches
    worker.join(10)
    second = f"schedule:every5:{T0 + 5_000}"
    (status, reason, dispatched_ms) = leader_store.query(
        leader_store.own(
            "SELECT status, last_error, dispatched_ms FROM tasks WHERE idempotency_key = ?"
        ),
        (second,),
    )[0]
    assert (status, reason) == ("SKIPPED", "overlap")
    assert dispatched_ms == T0 + 10_000  # when it was dispatched, after the lock was free
    leader_store.close()
