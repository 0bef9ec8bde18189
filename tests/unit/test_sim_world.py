"""The simulator's own parts its searches rely on: a pause that strikes where a process holds
no lock, a world that stops when time never passes, and the ``stale`` kind's scenario —
drawn from a stream of its own, so every seed without it runs as it did before."""

from __future__ import annotations

import dataclasses

import pytest

from cronlab.sim import scenario as sc
from cronlab.sim.world import LIVELOCK_STEPS, Deadlock, Proc, World

T0 = 1_000_000


def test_a_pause_that_names_a_label_strikes_there_and_lasts_until_its_instant() -> None:
    world = World(seed=1, start_ms=T0, switch_p=0.0)
    passed: list[tuple[str, int]] = []

    def body(proc: Proc) -> None:
        for label in ("SELECT", "COMMIT", "LOCK", "SELECT"):
            world.point(label)
            passed.append((label, world.now_ms))
            world.sleep(100)

    proc = world.spawn("worker-0", body)
    proc.pause_at.append((T0, 0, 0, "LOCK", T0 + 5_000))  # not at SELECT nor COMMIT
    world.run_until(T0 + 10_000)
    assert passed == [("SELECT", T0), ("COMMIT", T0 + 100), ("LOCK", T0 + 5_000),
                      ("SELECT", T0 + 5_100)]  # fmt: skip
    assert any("stopped at LOCK" in line for _, line in world.trace)


def test_a_world_whose_processes_never_let_time_pass_is_stuck() -> None:
    world = World(seed=1, start_ms=T0)

    def spin(proc: Proc) -> None:
        while True:
            world.point("SELECT")

    world.spawn("scheduler-0", spin)
    with pytest.raises(Deadlock, match="time never passes"):
        world.run_until(T0 + 1_000)
    assert LIVELOCK_STEPS >= 10_000  # far above what a run takes at one instant (under 1,000)


def stale_seeds(count: int) -> list[int]:
    return [seed for seed in range(1, count) if _has(seed)]


def _has(seed: int) -> bool:
    s = sc.draw(seed)
    return s.api is not None and any(c.at_ms > sc.WORK_END_MS for c in s.api.calls)


def test_a_seed_without_the_stale_kind_draws_what_it_drew_before_it() -> None:
    without = [seed for seed in range(1, 200) if not _has(seed)]
    assert len(without) > 50
    for seed in without:
        now, before = sc.draw(seed), sc.draw(seed, sc.BEFORE_STALE)
        assert dataclasses.replace(now, kinds=before.kinds) == before


def test_the_stale_kind_freezes_one_worker_past_the_late_batch_and_the_others_as_it_comes() -> None:
    seeds = stale_seeds(200)
    assert len(seeds) > 50  # about half the seeds
    for seed in seeds:
        s = sc.draw(seed)
        (late,) = [c for c in s.api.calls if c.at_ms > sc.WORK_END_MS]  # type: ignore[union-attr]
        assert late.op == "many" and sc.STALE_BATCH[0] <= len(late.keys) <= sc.STALE_BATCH[1]
        removals_end = sc.WORK_END_MS + 500 + 1_000 * len(s.schedule_names())
        assert late.at_ms > removals_end  # the store has gone quiet
        assert s.workers >= 2 and s.duties is not None and s.duties.keep_ms <= 2_000
        (frozen,) = [f for f in s.faults if f.unlocked]
        workers = {f"worker-{i}" for i in range(s.workers)}
        assert frozen.target in workers and frozen.at_ms < sc.WORK_END_MS
        assert late.at_ms < frozen.until_ms <= late.at_ms + 2_000
        others = [f for f in s.faults if f.kind == "pause" and f.at_ms == late.at_ms - 500]
        assert {f.target for f in others} == workers - {frozen.target}
        assert all(f.at_ms + f.ms > frozen.until_ms for f in others)
