"""``cronlab check``'s verdict (lab/verdict.py) on stores whose ledger shows each kind."""

from __future__ import annotations

from cronlab import execution
from cronlab.clock import FakeClock
from cronlab.election.store import StoreElector
from cronlab.handlers import Context, Registry
from cronlab.lab.verdict import check
from cronlab.ports import Batch, NewTask, Retry
from cronlab.queues.store import StoreQueue
from cronlab.stores.memory import MemoryStore

T0 = 1_780_000_000_000


def registry() -> Registry:
    r = Registry()

    @r.handler("ok")
    def ok(ctx: Context, payload: dict[str, object]) -> None: ...

    return r


def run_all(store: MemoryStore, clock: FakeClock, checked: bool = True) -> list[object]:
    messages = StoreQueue(store, clock).claim("w", 1_000, 30_000)
    work = Batch(
        worker="w",
        messages=messages,
        run=registry().runner(clock.now_ms),
        retry=Retry(),
        now=clock.now_ms,
        checked=checked,
    )
    execution.execute(work, store)
    return list(messages)


def setup(n: int) -> tuple[MemoryStore, FakeClock, int]:
    clock, store = FakeClock(T0), MemoryStore()
    store.add_tasks(NewTask(idempotency_key=f"k{i}", task="ok", trigger_ms=T0) for i in range(n))
    lease = StoreElector(store, clock).acquire_or_renew("s", 10_000)
    assert lease is not None
    return store, clock, lease.epoch


def test_a_clean_run_is_ok() -> None:
    store, clock, epoch = setup(5)
    store.dispatch_due(clock.now_ms(), 100, epoch)
    run_all(store, clock)
    v = check(store, clock.now_ms(), final=True, capacity=1_000)
    assert v.ok and v.counts == dict.fromkeys(v.counts, 0)


def test_each_kind_is_counted_with_samples() -> None:
    store, clock, epoch = setup(4)
    store.dispatch_due(clock.now_ms(), 100, epoch)
    first = StoreQueue(store, clock).claim("w", 1, 30_000)  # k0 alone
    work = Batch(
        worker="w",
        messages=first,
        run=registry().runner(clock.now_ms),
        retry=Retry(),
        now=clock.now_ms,
    )
    execution.execute(work, store)
    again = Batch(
        worker="w",
        messages=first,
        run=registry().runner(clock.now_ms),
        retry=Retry(),
        now=clock.now_ms,
        checked=False,
    )
    execution.execute(
        again, store
    )  # a stale delivery run anyway (--fencing off): k0 took effect twice
    store.write(
        lambda tx: tx.execute(store.own("DELETE FROM queue"))
    )  # k1..k3 lost with their messages
    clock.advance(120_000)
    v = check(store, clock.now_ms(), final=True)
    assert v.counts == {"lost": 3, "duplicated": 1, "unexpected": 0, "late": 0, "stuck": 3}
    assert v.samples["duplicated"] == ["k0"] and v.samples["stuck"] == ["k1", "k2", "k3"]
    assert not check(store, clock.now_ms()).counts["lost"]  # not final: they may still run


def test_late_is_measured_against_a_calm_run_at_the_fleets_pace() -> None:
    store, clock, epoch = setup(3)
    store.dispatch_due(clock.now_ms(), 100, epoch)
    clock.advance(90_000)  # everything runs 90 s after its trigger
    run_all(store, clock)
    assert check(store, clock.now_ms(), capacity=1).counts["late"] == 3  # calm: at 0, 1, 2 s
    assert check(store, clock.now_ms(), capacity=0.02).counts["late"] == 1  # calm: 0, 50, 100 s
