"""Every scheduler and worker says it is alive (issue 16): a heartbeat every 5 s, at most, in
its row of the process registry — which a process nobody registered makes for itself."""

from __future__ import annotations

from cronlab.clock import FakeClock
from cronlab.exceptions import BackendUnavailable
from cronlab.ports import ProcessInfo
from cronlab.runtime.heartbeat import HEARTBEAT_MS, Heartbeat
from cronlab.stores.memory import MemoryStore

INFO = ProcessInfo(role="scheduler", index=2, pid=41, owner="scheduler-2@pod:1:ab", started_ms=0)


def beats(store: MemoryStore) -> list[tuple[str, int, int | None]]:
    return [(p.owner, p.pid, p.heartbeat_ms) for p in store.processes()]


def test_a_process_beats_every_few_seconds_and_registers_itself() -> None:
    store, clock = MemoryStore(), FakeClock(1_000_000)
    beat = Heartbeat(store, clock, INFO)
    beat.beat()
    assert beats(store) == [(INFO.owner, 41, 1_000_000)]
    clock.advance(HEARTBEAT_MS - 1)
    beat.beat()  # too soon: nothing written
    assert beats(store) == [(INFO.owner, 41, 1_000_000)]
    clock.advance(1)
    beat.beat()
    assert beats(store) == [(INFO.owner, 41, 1_000_000 + HEARTBEAT_MS)]


def test_a_registered_process_keeps_its_row() -> None:
    store, clock = MemoryStore(), FakeClock(5_000)
    store.register_process(INFO)
    Heartbeat(store, clock, INFO).beat()
    assert beats(store) == [(INFO.owner, 41, 5_000)]
    (p,) = store.processes()
    assert p.started_ms == 0 and p.exited_ms is None


def test_a_store_that_does_not_answer_is_not_the_heartbeats_business() -> None:
    class Down:
        def heartbeat(self, info: ProcessInfo, now_ms: int) -> None:
            raise BackendUnavailable("sqlite: the write lock was not free")

    Heartbeat(Down(), FakeClock(0), INFO).beat()  # no exception
