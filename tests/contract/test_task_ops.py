"""An operator's actions on one task (issue 27 item 4: ``cronlab task cancel|retry ID``, the
console): cancel settles a task that has not run as SKIPPED (``cancelled``) and no message of
it runs; retry runs a FAILED task once more; both refuse every other status and change
nothing, and both are events — on every backend."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from cronlab import execution
from cronlab.exceptions import ConflictError, NotFoundError
from cronlab.handlers import Context, Registry
from cronlab.lab.store import LabSqlStore
from cronlab.ports import Batch, Message, NewTask, Retry, RunQuery
from cronlab.queues.store import StoreQueue
from cronlab.stores.sqlite import SqliteStore

from .conftest import Backend
from .ops_lab import MIN, OpsLab, minute, ops_lab
from .test_alerts import Hook, armed
from .test_store import lead

BY = "cli ops@host"


class Jobs:
    """A ``job`` handler that counts its runs and fails while ``failing`` is set."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.failing = False
        self.registry = Registry()

        @self.registry.handler("job")
        def job(ctx: Context, payload: dict[str, object]) -> None:
            self.ran.append(ctx.idempotency_key)
            if self.failing:
                raise RuntimeError("vendor API down")


def add(b: Backend, key: str = "job-1", delay_ms: int = 0) -> int:
    now = b.clock.now_ms()
    task = NewTask(idempotency_key=key, task="job", trigger_ms=now + delay_ms, payload="{}")
    assert b.store.add_tasks([task]) == 1
    return b.store.task_by_key(key).id


def claim(b: Backend) -> list[Message]:
    return StoreQueue(b.store, b.clock).claim("w", 100, 30_000)


def execute(b: Backend, jobs: Jobs, messages: list[Message]) -> dict[str, int]:
    work = Batch(
        worker="w",
        messages=messages,
        run=jobs.registry.runner(b.clock.now_ms),
        retry=Retry(max_attempts=1),
        now=b.clock.now_ms,
    )
    return execution.execute(work, b.store)


def dispatch(b: Backend) -> int:
    return b.store.dispatch_due(b.clock.now_ms(), 100, lead(b))


def events(b: Backend, kind: str) -> list[dict[str, object]]:
    return [dict(e.detail) for e in b.store.events() if e.kind == kind]


def test_a_pending_task_cancelled_is_skipped_and_never_runs(backend: Backend) -> None:
    jobs = Jobs()
    task_id = add(backend, delay_ms=5_000)
    info = backend.store.cancel_task(task_id, backend.clock.now_ms(), by=BY)
    assert (info.status, info.last_error) == ("SKIPPED", "cancelled")
    assert backend.status(task_id) == "SKIPPED"
    backend.clock.advance(10_000)
    assert dispatch(backend) == 0
    assert execute(backend, jobs, claim(backend)) == dict.fromkeys(
        ("ok", "noop", "error", "failed", "stale"), 0
    )
    assert jobs.ran == []
    rows = backend.store.runs(RunQuery(), backend.clock.now_ms())
    assert [(r.task_id, r.outcome, r.error) for r in rows] == [(task_id, "skipped", "cancelled")]
    assert events(backend, "cancelled") == [
        {"task": task_id, "key": "job-1", "was": "PENDING", "by": BY}
    ]


def test_a_queued_task_cancelled_leaves_the_queue_and_never_runs(backend: Backend) -> None:
    jobs = Jobs()
    task_id = add(backend)
    assert dispatch(backend) == 1
    assert backend.store.queue_depth() == 1
    info = backend.store.cancel_task(task_id, backend.clock.now_ms(), by=BY)
    assert info.status == "SKIPPED"
    assert backend.store.queue_depth() == 0  # its message is gone with it
    assert claim(backend) == []
    assert jobs.ran == []


def test_a_task_cancelled_out_of_a_shared_envelope_leaves_the_others_to_run(
    backend: Backend,
) -> None:
    jobs = Jobs()
    ids = [add(backend, f"job-{i}") for i in range(3)]
    assert dispatch(backend) == 3  # one envelope of three
    backend.store.cancel_task(ids[1], backend.clock.now_ms(), by=BY)
    assert backend.store.queue_depth() == 2
    messages = claim(backend)
    assert [m.task_id for m in messages] == [ids[0], ids[2]]
    assert execute(backend, jobs, messages)["ok"] == 2
    assert backend.store.queue_depth() == 0
    assert jobs.ran == ["job-0", "job-2"]


def test_a_message_a_worker_holds_when_its_task_is_cancelled_runs_nothing_and_is_acked(
    backend: Backend,
) -> None:
    jobs = Jobs()
    ids = [add(backend, f"job-{i}") for i in range(3)]
    assert dispatch(backend) == 3
    held = claim(backend)  # one envelope of three, held by the worker
    backend.store.cancel_task(ids[1], backend.clock.now_ms(), by=BY)
    assert backend.store.queue_depth() == 3  # a held message is left to its worker
    counts = execute(backend, jobs, held)
    assert (counts["ok"], counts["stale"]) == (2, 1)
    assert jobs.ran == ["job-0", "job-2"]
    assert backend.store.queue_depth() == 0
    assert [backend.status(i) for i in ids] == ["DONE", "SKIPPED", "DONE"]


def test_a_copy_of_election_off_cancelled_while_held_runs_nothing(backend: Backend) -> None:
    """``--election off`` copies run whatever their task's status (every replica's copy runs:
    the anti-pattern), except one an operator cancelled."""
    jobs = Jobs()
    task_id = add(backend)
    now = backend.clock.now_ms()
    lab = LabSqlStore(backend.store)  # the lab's reads and writes
    lab.enqueue_copies(lab.read_due(now, 10), now)
    held = claim(backend)
    backend.store.cancel_task(task_id, now, by=BY)
    assert execute(backend, jobs, held)["stale"] == 1
    assert jobs.ran == []
    assert backend.status(task_id) == "SKIPPED"


def test_a_task_waiting_for_its_retry_can_be_cancelled(backend: Backend) -> None:
    jobs = Jobs()
    task_id = add(backend)
    dispatch(backend)
    jobs.failing = True
    work = Batch(
        worker="w",
        messages=claim(backend),
        run=jobs.registry.runner(backend.clock.now_ms),
        retry=Retry(max_attempts=3, base_ms=60_000),
        now=backend.clock.now_ms,
    )
    assert execution.execute(work, backend.store)["error"] == 1
    assert backend.status(task_id) == "DISPATCHED"  # its retry waits in the queue
    backend.store.cancel_task(task_id, backend.clock.now_ms(), by=BY)
    backend.clock.advance(120_000)
    assert claim(backend) == []
    assert jobs.ran == ["job-1"]
    assert backend.store.task_info(task_id).last_error == "cancelled"


@pytest.mark.parametrize("failing", [False, True])
def test_a_finished_task_is_not_cancelled_and_nothing_changes(
    backend: Backend, failing: bool
) -> None:
    jobs = Jobs()
    jobs.failing = failing
    task_id = add(backend)
    dispatch(backend)
    execute(backend, jobs, claim(backend))
    before = backend.store.task_info(task_id)
    status = "FAILED" if failing else "DONE"
    assert before.status == status
    with pytest.raises(ConflictError, match=f"task {task_id} is {status}"):
        backend.store.cancel_task(task_id, backend.clock.now_ms(), by=BY)
    assert backend.store.task_info(task_id) == before
    assert events(backend, "cancelled") == []


def test_a_failed_task_retried_runs_once_more_and_ends_done(backend: Backend) -> None:
    jobs = Jobs()
    task_id = add(backend)
    dispatch(backend)
    jobs.failing = True
    assert execute(backend, jobs, claim(backend))["failed"] == 1
    jobs.failing = False
    info = backend.store.retry_task(task_id, backend.clock.now_ms(), by=BY)
    assert (info.status, info.attempts) == ("DISPATCHED", 1)
    assert info.last_error == "RuntimeError: vendor API down"  # kept until the run ends
    messages = claim(backend)
    assert [(m.task_id, m.attempt) for m in messages] == [(task_id, 2)]
    assert execute(backend, jobs, messages)["ok"] == 1
    assert execute(backend, jobs, claim(backend))["ok"] == 0
    assert jobs.ran == ["job-1", "job-1"]
    done = backend.store.task_info(task_id)
    assert (done.status, done.attempts) == ("DONE", 2)
    rows = backend.store.runs(RunQuery(), backend.clock.now_ms())
    assert [(r.attempt, r.outcome) for r in rows] == [(2, "ok"), (1, "failed")]
    assert events(backend, "retried") == [
        {"task": task_id, "key": "job-1", "was": "FAILED", "by": BY, "attempt": 2}
    ]


def test_a_retried_task_that_fails_again_is_failed_again_after_one_run(backend: Backend) -> None:
    jobs = Jobs()
    jobs.failing = True
    task_id = add(backend)
    dispatch(backend)
    execute(backend, jobs, claim(backend))
    backend.store.retry_task(task_id, backend.clock.now_ms(), by=BY)
    assert execute(backend, jobs, claim(backend))["failed"] == 1
    assert backend.store.task_info(task_id).status == "FAILED"
    assert claim(backend) == []
    assert len(jobs.ran) == 2


@pytest.mark.parametrize("state", ["PENDING", "DISPATCHED", "DONE", "SKIPPED"])
def test_only_a_failed_task_is_retried(backend: Backend, state: str) -> None:
    jobs = Jobs()
    task_id = add(backend)
    if state != "PENDING":
        dispatch(backend)
    if state == "DONE":
        execute(backend, jobs, claim(backend))
    if state == "SKIPPED":
        backend.store.cancel_task(task_id, backend.clock.now_ms(), by=BY)
    before = backend.store.task_info(task_id), backend.store.queue_depth()
    assert before[0].status == state
    with pytest.raises(ConflictError, match=f"task {task_id} is {state}"):
        backend.store.retry_task(task_id, backend.clock.now_ms(), by=BY)
    assert (backend.store.task_info(task_id), backend.store.queue_depth()) == before
    assert events(backend, "retried") == []


def test_an_unknown_task_is_not_found(backend: Backend) -> None:
    now = backend.clock.now_ms()
    for act in (backend.store.cancel_task, backend.store.retry_task):
        with pytest.raises(NotFoundError, match="no task with id 404"):
            act(404, now, by=BY)
    with pytest.raises(NotFoundError, match="no task with id 404"):
        backend.store.task_info(404)


@pytest.fixture
def lab(backend: Backend) -> OpsLab:
    return ops_lab(backend.store)


def test_cancelling_a_schedules_next_occurrence_skips_that_one_and_the_schedule_goes_on(
    lab: OpsLab,
) -> None:
    lab.cron()
    lab.start()
    lab.run_for(MIN)
    nxt = lab.store.task_by_key(f"schedule:tick:{minute(2)}")
    assert nxt.status == "PENDING"
    lab.store.cancel_task(nxt.id, lab.clock.now_ms(), by=BY)
    lab.run_for(2 * MIN)
    assert lab.ran == [minute(1), minute(3)]
    info = lab.store.get_schedule("tick")
    assert info.next_fire_ms == minute(4)
    rows = lab.store.runs(RunQuery(schedule="tick"), lab.clock.now_ms())
    assert [(r.occurrence_ms, r.outcome, r.error) for r in rows] == [
        (minute(3), "ok", None),
        (minute(2), "skipped", "cancelled"),
        (minute(1), "ok", None),
    ]


def test_a_schedules_dispatched_occurrence_cancelled_is_skipped_and_not_alerted_late(
    lab: OpsLab,
) -> None:
    lab.cron(alert_after=timedelta(seconds=30))
    armed(lab, Hook())
    lab.run_for(35_000, work=False)  # minute 1 dispatched 5 s ago; no worker yet
    due = lab.store.task_by_key(f"schedule:tick:{minute(1)}")
    assert due.status == "DISPATCHED"
    lab.store.cancel_task(due.id, lab.clock.now_ms(), by=BY)
    lab.run_for(40_000, work=False)  # past its alert_after: cancelled, it expects no run
    assert lab.store.alerts.recent(10) == []
    lab.run_for(MIN)
    assert lab.ran == [minute(2)]
    assert lab.store.task_info(due.id).status == "SKIPPED"


def test_a_cancel_while_the_task_runs_waits_for_the_run_and_is_refused(
    backend: Backend, tmp_path: Path
) -> None:
    """Never both run and cancelled: the cancel is one transaction that waits for the batch
    running the task (SQLite: the write lock it holds; PostgreSQL: the task row it locked),
    then finds it DONE."""
    if backend.name == "memory":
        pytest.skip("one in-process connection: no second writer to wait")
    jobs, running = Jobs(), threading.Event()
    jobs.registry.handler("slow")(lambda ctx, payload: (running.set(), time.sleep(0.5)))
    now = backend.clock.now_ms()
    backend.store.add_tasks([NewTask(idempotency_key="slow-1", task="slow", trigger_ms=now)])
    task_id = backend.store.task_by_key("slow-1").id
    dispatch(backend)
    refused: list[BaseException] = []

    def cancel() -> None:
        running.wait(10)
        other = SqliteStore(tmp_path / "contract.db") if backend.name == "sqlite" else backend.store
        try:
            other.cancel_task(task_id, now, by=BY)
        except ConflictError as exc:
            refused.append(exc)

    operator = threading.Thread(target=cancel)
    operator.start()
    assert execute(backend, jobs, claim(backend))["ok"] == 1
    operator.join(20)
    assert [str(e) for e in refused] == [
        f"task {task_id} is DONE: only a task that is PENDING or DISPATCHED can be cancelled; "
        "nothing changed"
    ]
    assert backend.status(task_id) == "DONE"
