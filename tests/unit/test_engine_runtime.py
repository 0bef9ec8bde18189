"""Scheduler and worker loops on the memory store and a fake clock (no processes, no I/O)."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path
from typing import Any

from cronlab.clock import FakeClock
from cronlab.election.store import StoreElector
from cronlab.exceptions import BackendUnavailable
from cronlab.handlers import Context, Registry
from cronlab.lab.election_off import NoElection
from cronlab.lab.scheduler import LabScheduler, Modes
from cronlab.ports import NewTask, Retry
from cronlab.queues.store import StoreQueue
from cronlab.runtime.scheduler import Scheduler, SchedulerConfig
from cronlab.runtime.worker import TokenBucket, Worker, WorkerConfig
from cronlab.stores.memory import MemoryStore
from cronlab.stores.sqlite import SqliteStore

T0 = 1_700_000_000_000


def seed(store: MemoryStore, n: int, at: int) -> None:
    store.add_tasks(NewTask(idempotency_key=f"k{i}", task="ok", trigger_ms=at) for i in range(n))


def replica(store: MemoryStore, clock: FakeClock, i: int, **kw: Any) -> Scheduler:
    """The engine's scheduler; the lab's (``LabScheduler``) when an anti-pattern is asked
    for (``election``, ``timers``, ``fencing``)."""
    modes = Modes(**{k: kw.pop(k) for k in ("election", "timers", "fencing") if k in kw})
    cfg = SchedulerConfig(replica=i, ttl_ms=3_000, batch=kw.pop("batch", 100), **kw)
    elector = NoElection(clock) if modes.election == "off" else StoreElector(store, clock)
    queue = StoreQueue(store, clock)
    parts: dict[str, Any] = dict(store=store, queue=queue, elector=elector, clock=clock)
    if modes.plain():
        return Scheduler(cfg, owner=f"r{i}", **parts)
    return LabScheduler(cfg, modes=modes, owner=f"r{i}", **parts)


def test_only_the_leader_dispatches_and_in_batches() -> None:
    clock, store = FakeClock(T0), MemoryStore()
    seed(store, 250, T0)
    a, b = replica(store, clock, 0), replica(store, clock, 1)
    assert a.step() == 0  # full batch: scan again at once
    b.step()
    a.step()
    a.step()
    assert (a.dispatched, b.dispatched) == (250, 0)
    assert store.queue_depth() == 250
    assert [e.kind for e in store.events()] == ["acquire"]


def test_a_leader_whose_wall_clock_is_set_back_keeps_scanning() -> None:
    """Before the fix the next scan waited for the wall clock to come round again (sim seed
    82: a minute's step back, nothing dispatched for a minute)."""
    clock, store = FakeClock(T0), MemoryStore()
    a = replica(store, clock, 0)
    clock.sleep(a.step() / 1000)
    clock.jump(-60_000)
    seed(store, 3, clock.now_ms())
    while a.dispatched < 3 and clock.monotonic_ms() - T0 < 60_000:
        clock.sleep(a.step() / 1000)
    assert a.dispatched == 3
    assert clock.monotonic_ms() - T0 <= 2_000


def test_leader_stops_by_itself_when_it_cannot_renew() -> None:
    clock, store = FakeClock(T0), MemoryStore()
    a = replica(store, clock, 0)
    a.step()
    assert a.leading()
    store.lease_cas("intruder", clock.now_ms() + 3_000, 60_000)  # a's lease expired, taken
    clock.advance(3_000)
    seed(store, 5, clock.now_ms())
    a.step()
    assert not a.leading() and a.dispatched == 0


def test_stale_leader_is_fenced_and_records_it() -> None:
    clock, store = FakeClock(T0), MemoryStore()
    a = replica(store, clock, 0)
    a.step()
    clock.advance(3_000)
    b = replica(store, clock, 1)
    b.step()  # b takes over with epoch 2
    seed(store, 5, clock.now_ms())
    a.next_renew_ms = clock.monotonic_ms() + 10_000  # a woke up believing its old lease holds
    assert a.lease is not None
    a.lease = type(a.lease)(holder="r0", epoch=1, expires_ms=clock.now_ms() + 1)
    a.deadline_ms = clock.monotonic_ms() + 1
    a.step()
    assert a.dispatched == 0 and store.counts()["PENDING"] == 5
    fenced = [e for e in store.events() if e.kind == "fenced"]
    assert fenced and fenced[0].epoch == 1 and fenced[0].detail["current"] == 2


def test_election_off_replicas_scanning_in_one_second_each_send_a_copy() -> None:
    clock, store = FakeClock(T0), MemoryStore()
    seed(store, 40, T0)
    replicas = [replica(store, clock, i, election="off") for i in range(3)]
    for r in replicas:
        r.step()
        clock.advance(10)  # same second, one after another
    assert [r.dispatched for r in replicas] == [40, 40, 40]
    assert store.queue_depth() == 40 * 3
    clock.advance(1_000)
    for r in replicas:
        r.step()  # next second: nothing new is due, nothing copied again
    assert store.queue_depth() == 40 * 3


def test_election_off_a_replica_scanning_in_a_later_second_still_sends_its_copy_once() -> None:
    """Cron on every replica copies regardless of what the others did (issue 15): before, a
    replica whose scan slipped into the next second copied nothing (10 dispatched, not 20),
    and one scanning twice in a second copied again."""
    clock, store = FakeClock(T0), MemoryStore()
    a, b = (replica(store, clock, i, election="off") for i in range(2))
    seed(store, 10, T0 + 500)
    clock.advance(999)
    a.step()
    clock.advance(1)
    a.step()  # the same second again: nothing new fell due
    clock.advance(1_000)
    b.step()  # the next second
    clock.advance(1_000)
    a.step()
    b.step()
    assert (a.dispatched, b.dispatched) == (10, 10)
    assert store.queue_depth() == 20


def test_in_memory_timers_new_leader_misses_what_fell_due_before() -> None:
    clock, store = FakeClock(T0), MemoryStore()
    a = replica(store, clock, 0, timers="in-memory")
    a.step()
    seed(store, 7, clock.now_ms() + 500)  # falls due while a is dead
    clock.advance(3_000)
    b = replica(store, clock, 1, timers="in-memory")
    b.step()
    assert store.counts()["MISSED"] == 7 and b.dispatched == 0


def test_durable_timers_new_leader_dispatches_the_gap() -> None:
    clock, store = FakeClock(T0), MemoryStore()
    replica(store, clock, 0).step()
    seed(store, 7, clock.now_ms() + 500)
    clock.advance(3_000)
    b = replica(store, clock, 1)
    b.step()
    assert store.counts()["MISSED"] == 0 and b.dispatched == 7


def ok_registry() -> Registry:
    r = Registry()

    @r.handler("ok")
    def ok(ctx: Context, payload: dict[str, Any]) -> None:
        return None

    return r


def test_worker_runs_what_the_leader_dispatched() -> None:
    clock, store = FakeClock(T0), MemoryStore()
    seed(store, 30, T0)
    replica(store, clock, 0).step()
    w = Worker(
        WorkerConfig(index=0, batch=8, retry=Retry()),
        store=store,
        queue=StoreQueue(store, clock),
        registry=ok_registry(),
        clock=clock,
        name="w0",
    )
    while w.step() == 0:
        pass
    assert w.totals["ok"] == 30 and store.counts()["DONE"] == 30


def test_rate_cap_limits_a_worker_to_x_tasks_per_second() -> None:
    clock, store = FakeClock(T0), MemoryStore()
    seed(store, 100, T0)
    replica(store, clock, 0).step()
    w = Worker(
        WorkerConfig(index=0, rate=20),
        store=store,
        queue=StoreQueue(store, clock),
        registry=ok_registry(),
        clock=clock,
        name="w0",
    )
    while clock.now_ms() < T0 + 2_000:
        clock.sleep(w.step() / 1000)
    assert 38 <= w.totals["ok"] <= 41


def test_token_bucket_never_saves_more_than_a_second() -> None:
    bucket = TokenBucket(10, 0)
    assert bucket.available(60_000) == 10
    bucket.take(10)
    assert bucket.available(60_000) == 0
    assert bucket.wait_ms() > 0


def test_a_rate_below_one_a_second_still_runs_a_task_every_one_over_rate_seconds() -> None:
    """Before, a bucket capped at one second's worth (0.5 tokens at --rate 0.5) never held a
    whole token: a worker with a rate below 1/s ran nothing, for ever."""
    bucket = TokenBucket(0.5, 0)  # (it starts with half a token)
    assert bucket.available(0) == 0
    assert bucket.available(1_000) == 1
    bucket.take(1)
    assert bucket.available(2_000) == 0
    assert bucket.available(3_000) == 1
    assert bucket.available(600_000) == 1  # idle for ten minutes: still one token at most


def batch_sizes(per_task_ms: int, n: int, max_batch: int) -> list[int]:
    """The sizes of a worker's batches over ``n`` tasks whose handler takes ``per_task_ms``."""
    clock, store = FakeClock(T0), MemoryStore()
    seed(store, n, T0)
    replica(store, clock, 0, batch=n).step()
    r = Registry()

    @r.handler("ok")
    def ok(ctx: Context, payload: dict[str, Any]) -> None:
        clock.advance(per_task_ms)

    w = Worker(
        WorkerConfig(index=0, batch=max_batch),
        store=store,
        queue=StoreQueue(store, clock),
        registry=r,
        clock=clock,
        name="w0",
    )
    sizes = []
    while store.counts()["DONE"] < n:
        before = store.counts()["DONE"]
        clock.sleep(w.step() / 1000)
        sizes.append(store.counts()["DONE"] - before)
    return sizes


def test_fast_handlers_grow_the_batch_to_its_cap() -> None:
    sizes = batch_sizes(0, 3_000, max_batch=1_000)
    assert sizes[:4] == [10, 20, 40, 80]  # slow start: doubles while batches are quick
    assert max(sizes) == 1_000 and sum(sizes) == 3_000


def test_slow_handlers_shrink_the_batch_to_what_fits_in_the_target() -> None:
    sizes = batch_sizes(400, 40, max_batch=1_000)  # 0.4 s a task: 2 fit in one second
    assert sizes[0] == 10 and sizes[1:4] == [2, 2, 2]


class SkewedClock(FakeClock):
    """A replica's wall clock ``offset`` ms off the store's; its monotonic clock ticks true."""

    def __init__(self, base: FakeClock, offset: int) -> None:
        super().__init__()
        self.base, self.offset = base, offset

    def now_ms(self) -> int:
        return self.base.now_ms() + self.offset

    def monotonic_ms(self) -> int:
        return self.base.now_ms()

    def sleep(self, seconds: float) -> None:
        self.base.sleep(seconds)


def test_a_replica_with_its_clock_a_ttl_ahead_of_the_store_leads_and_dispatches_on_time(
    tmp_path: Any,
) -> None:
    """Bug 3: the lease expiry came from the store's clock and was compared with the replica's
    wall clock; a replica a TTL ahead held the lease for ever and dispatched nothing."""
    from cronlab.stores.sqlite import Seams, SqliteStore

    server = FakeClock(T0)
    store = SqliteStore(tmp_path / "s.db", seams=Seams(clock=server))
    ahead = SkewedClock(server, 3_500)  # TTL is 3,000 ms
    a = Scheduler(
        SchedulerConfig(replica=0, ttl_ms=3_000, batch=100),
        store=store,
        queue=StoreQueue(store, ahead),
        elector=StoreElector(store, ahead),
        clock=ahead,
        owner="ahead",
    )
    seed(store, 5, T0 + 2_000)  # due in two seconds by the store's clock
    for _ in range(40):
        server.sleep(a.step() / 1000)
        if a.dispatched:
            break
    assert a.dispatched == 5
    assert server.now_ms() - (T0 + 2_000) <= 1_000  # on time by the store's clock, not early
    assert all(not e.detail for e in store.events() if e.kind == "fenced")


def test_replicas_started_alike_get_different_identities(monkeypatch: Any) -> None:
    """Bug 4: the name was ``scheduler-0@1`` in every pod (PID 1, no --replica): two replicas
    shared one lease and both dispatched at epoch 1."""
    from cronlab.runtime.cluster import NONCE_ENV, identity

    monkeypatch.delenv(NONCE_ENV, raising=False)
    a, b = (identity("scheduler", 0, host="pod", pid=1) for _ in range(2))
    assert a != b and a.startswith("scheduler-0@pod:1:")
    monkeypatch.setenv(NONCE_ENV, "given")  # a supervisor names the process it starts
    assert identity("scheduler", 0, host="h", pid=7) == "scheduler-0@h:7:given"


def test_two_replicas_with_one_identity_would_both_lead_and_distinct_ones_do_not() -> None:
    clock, store = FakeClock(T0), MemoryStore()
    same = [replica(store, clock, i) for i in range(2)]
    for r in same:
        r.owner = "scheduler-0@1"  # what every pod was called before
        r.step()
    assert all(r.leading() for r in same)  # the hazard the identity fix removes
    store2 = MemoryStore()
    distinct = [replica(store2, clock, i) for i in range(2)]
    for r in distinct:
        r.step()
    assert [r.leading() for r in distinct] == [True, False]


class Flaky:
    """A store that is unreachable while ``down`` (every call raises ``BackendUnavailable``)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store, self.down = store, False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise BackendUnavailable("store unreachable (test)")
            return attr(*args, **kwargs)

        return call


def test_a_scheduler_and_a_worker_stay_up_through_an_outage_and_say_so() -> None:
    """Risk: an outage took the processes down, restarted only by the supervisor."""
    clock, memory = FakeClock(T0), MemoryStore()
    store = Flaky(memory)
    said: list[str] = []
    elector = StoreElector(store, clock)  # type: ignore[arg-type]
    queue = StoreQueue(store, clock)  # type: ignore[arg-type]
    cfg = SchedulerConfig(replica=0, ttl_ms=3_000, batch=100)
    s = Scheduler(cfg, store=store, queue=queue, elector=elector, clock=clock, owner="r0")  # type: ignore[arg-type]
    w = Worker(
        WorkerConfig(index=0, batch=8, retry=Retry()),
        store=store,  # type: ignore[arg-type]
        queue=queue,
        registry=ok_registry(),
        clock=clock,
        name="w0",
    )
    s.outage.say = w.outage.say = said.append
    s.step()
    store.down = True
    s_waits, w_waits = [], []
    for _ in range(8):
        s_waits.append(s.step())
        w_waits.append(w.step())
        clock.advance(min(s_waits[-1], w_waits[-1]))
    assert w_waits == [100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000]  # backoff, capped
    assert all(0 < ms <= 5_000 for ms in s_waits)
    clock.advance(10_000)
    assert len(said) == 2 and all("staying up" in line for line in said)
    store.down = False
    seed(memory, 5, clock.now_ms())
    s.step()
    while w.step() == 0:
        pass
    assert s.dispatched == 5 and w.totals["ok"] == 5
    assert [e.kind for e in memory.events()][-1] == "backend_down"
    assert memory.events()[-1].detail["lasted_ms"] >= 10_000
    assert sum("reachable again" in line for line in said) == 2


class DownElector:
    """The election backend (etcd) unreachable while ``down``; the store answers."""

    def __init__(self, inner: StoreElector) -> None:
        self.inner, self.down = inner, False

    def acquire_or_renew(self, owner: str, ttl_ms: int) -> Any:
        if self.down:
            raise BackendUnavailable("etcd etcd://127.0.0.1:2379 unreachable (test)")
        return self.inner.acquire_or_renew(owner, ttl_ms)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_status_lists_a_backend_that_is_down_until_it_is_back() -> None:
    """Issue 12 asks that ``status`` shows the backend as down: a scheduler that cannot reach
    its election (the store answers) says so in the store's log, and again once it is back."""
    from cronlab.cli.observe import status

    clock, store = FakeClock(T0), MemoryStore()
    elector = DownElector(StoreElector(store, clock))
    cfg = SchedulerConfig(replica=0, ttl_ms=3_000, batch=100)
    s = Scheduler(
        cfg, store=store, queue=StoreQueue(store, clock), elector=elector, clock=clock, owner="r0"
    )  # type: ignore[arg-type]
    s.outage.say = lambda line: None
    s.step()
    assert status(store)["backends_down"] == []
    elector.down = True
    for _ in range(3):
        clock.advance(s.step())
    (down,) = status(store)["backends_down"]
    assert down["holder"] == "r0" and "etcd" in down["error"]
    elector.down = False
    clock.advance(s.step())
    assert status(store)["backends_down"] == []
    assert [e.kind for e in store.events()].count("backend_unreachable") == 1


def test_a_writer_paused_inside_its_transaction_makes_others_wait_a_bounded_time(
    tmp_path: Path,
) -> None:
    """Risk: the SQLite writer lock had no deadline: a standby blocked until the paused leader
    resumed. Now a write gives up after ``lock_wait_s`` with a one-line error."""
    SqliteStore(tmp_path / "s.db").close()
    paused = os.open(f"{tmp_path / 's.db'}.writer", os.O_RDWR)
    fcntl.flock(paused, fcntl.LOCK_EX)  # the paused leader's hold
    store = SqliteStore(tmp_path / "s.db", lock_wait_s=0.2)
    outcome: list[BaseException | None] = []

    def write() -> None:
        try:
            store.add_tasks([NewTask(idempotency_key="k", task="ok", trigger_ms=T0)])
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    writer = threading.Thread(target=write, daemon=True)  # a thread polls
    writer.start()
    writer.join(5)
    write()  # the main thread blocks in the kernel, cut short by its timer
    fcntl.flock(paused, fcntl.LOCK_UN)
    os.close(paused)
    assert len(outcome) == 2 and all(isinstance(o, BackendUnavailable) for o in outcome)
    assert all("write lock was not free within 0.2 s" in str(o) for o in outcome)
    assert store.counts()["PENDING"] == 0
    store.add_tasks([NewTask(idempotency_key="k", task="ok", trigger_ms=T0)])
    assert store.counts()["PENDING"] == 1
    store.close()
