"""The judgement of a claimed batch of occurrences (``core/planning.py``), with no store: what
runs, what is skipped and why, what is planned next, in the order one at a time would."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cronlab.core import occurrences
from cronlab.core.planning import Planning, Stored, backfill_twins, judge
from cronlab.core.policy import occurrence_key, to_ms

T0 = to_ms(datetime(2026, 6, 1, 9, 0, tzinfo=UTC))
MIN = 60_000


def stored(name: str, **changes: Any) -> Stored:
    """A ``* * * * *`` schedule whose next occurrence is at ``T0``."""
    values: dict[str, Any] = {
        "name": name,
        "cron": "* * * * *",
        "tz": "UTC",
        "task": "h",
        "payload": "{}",
        "catchup": "latest",
        "catchup_window_ms": 3_600_000,
        "overlap": "skip",
        "paused": 0,
        "next_fire_ms": T0,
    }
    return Stored(**{**values, **changes})


def claimed(task_id: int, key: str) -> tuple[int, str, int, int]:
    return (task_id, key, 0, T0)


def planning(*schedules: Stored, running: dict[str, dict[int, int]] | None = None) -> Planning:
    return Planning(now_ms=T0, stored={s.name: s for s in schedules}, running=running or {})


def run(batch: Planning, rows: list[tuple[int, str, int, int]]) -> list[int]:
    targets = [occurrences.planned_target(r[1]) for r in rows]
    return [int(r[0]) for r in judge(batch, rows, targets)]


def test_an_occurrence_due_now_runs_and_plans_the_next_one() -> None:
    batch = planning(stored("a"))
    assert run(batch, [claimed(1, occurrence_key("a", T0))]) == [1]
    assert batch.writes.skips == []
    assert [row[0] for row in batch.writes.added] == [occurrence_key("a", T0 + MIN)]
    assert batch.writes.fired[0]["next"] == T0 + MIN


def test_a_task_that_is_no_occurrence_runs_unplanned() -> None:
    batch = planning()
    assert run(batch, [claimed(7, "invoice-42")]) == [7]
    assert batch.writes.fired == [] and batch.writes.added == []


def test_the_occurrence_of_a_removed_schedule_is_skipped() -> None:
    batch = Planning(now_ms=T0, stored={"gone": None}, running={})
    assert run(batch, [claimed(1, occurrence_key("gone", T0))]) == []
    assert batch.writes.skips == [{"id": 1, "reason": "removed"}]
    assert batch.writes.added == []


def test_a_paused_schedule_skips_and_plans_nothing() -> None:
    batch = planning(stored("a", paused=1))
    assert run(batch, [claimed(1, occurrence_key("a", T0))]) == []
    assert batch.writes.skips == [{"id": 1, "reason": "paused"}]
    assert batch.writes.added == [] and batch.next_fire == {"a": None}


def test_an_earlier_run_still_going_skips_an_overlap_and_plans_the_next() -> None:
    batch = planning(stored("a"), running={"a": {99: T0 - MIN}})
    assert run(batch, [claimed(1, occurrence_key("a", T0))]) == []
    assert batch.writes.skips == [{"id": 1, "reason": "overlap"}]
    assert [row[0] for row in batch.writes.added] == [occurrence_key("a", T0 + MIN)]
    assert batch.writes.fired[0]["skipped"] == 1


def test_overlap_allowed_runs_beside_the_earlier_run() -> None:
    batch = planning(stored("a", overlap="allow"), running={"a": {99: T0 - MIN}})
    assert run(batch, [claimed(1, occurrence_key("a", T0))]) == [1]


def test_an_occurrence_whose_backfill_exists_does_not_run_again() -> None:
    key = occurrence_key("a", T0)
    batch = planning(stored("a"))
    batch.backfilled = {key}
    assert run(batch, [claimed(1, key)]) == []
    assert batch.writes.skips == [{"id": 1, "reason": "backfilled"}]
    assert [row[0] for row in batch.writes.added] == [occurrence_key("a", T0 + MIN)]


def test_a_backfill_is_judged_by_the_overlap_policy_alone() -> None:
    batch = planning(stored("a", next_fire_ms=T0 + MIN))
    rows = [claimed(1, occurrences.backfill_key("a", T0 - 5 * MIN))]
    assert run(batch, rows) == [1]
    assert batch.writes.added == [] and batch.writes.fired == []


def test_a_skipped_predecessor_no_longer_counts_as_running() -> None:
    """Two occurrences of one schedule in one batch: the first is skipped as removed from the
    running set, so the second is not skipped for overlapping it."""
    batch = planning(stored("a"), running={"a": {1: T0 - MIN}})
    batch.backfilled = {occurrence_key("a", T0 - MIN)}
    rows = [
        (1, occurrence_key("a", T0 - MIN), 0, T0 - MIN),
        (2, occurrence_key("a", T0), 0, T0),
    ]
    assert run(batch, rows) == [2]
    assert batch.writes.skips == [{"id": 1, "reason": "backfilled"}]


def test_schedules_of_one_rule_share_one_plan() -> None:
    batch = planning(stored("a"), stored("b"))
    rows = [claimed(1, occurrence_key("a", T0)), claimed(2, occurrence_key("b", T0))]
    assert run(batch, rows) == [1, 2]
    assert len(batch.plans) == 1 and len(batch.rules) == 1


def test_catch_up_all_plans_every_missed_fire_as_already_due() -> None:
    batch = Planning(now_ms=T0 + 3 * MIN, stored={"a": stored("a", catchup="all")}, running={})
    assert run(batch, [claimed(1, occurrence_key("a", T0))]) == [1]
    keys = [row[0] for row in batch.writes.added]
    assert keys == [occurrence_key("a", T0 + k * MIN) for k in (1, 2, 3, 4)]
    assert batch.writes.catch_ups == 3


def test_backfill_twins_pairs_each_occurrence_key_with_its_backfill_key() -> None:
    keys = [occurrence_key("a", T0), "invoice-1", occurrences.backfill_key("b", T0)]
    assert backfill_twins(keys) == {occurrences.backfill_key("a", T0): occurrence_key("a", T0)}


def test_only_an_exact_occurrence_or_backfill_key_is_planned() -> None:
    """Failed first: ``schedule:bill:…/then/send_receipt/1`` (a cron-fired task's follow-up)
    raised ``not a schedule occurrence key`` inside every dispatch (issue 27)."""
    assert occurrences.planned_target(f"schedule:bill:{T0}") == ("bill", T0)
    assert occurrences.planned_target(f"backfill:bill:{T0}") == ("bill", T0)
    for key in (
        f"schedule:bill:{T0}/then/send_receipt/1",
        f"backfill:bill:{T0}/then/x:5/2",
        "schedule:",
        "schedule:bill",
        "schedule:bill:soon",
        f"schedule:a/b:{T0}",
        f"trigger:bill:{T0}",
        "welcome:ada",
    ):
        assert occurrences.planned_target(key) is None, key


def test_a_follow_up_in_a_claimed_batch_runs_as_it_is() -> None:
    batch = planning(stored("bill"))
    follow_up = claimed(2, f"schedule:bill:{T0}/then/send_receipt/1")
    rows = [claimed(1, occurrence_key("bill", T0)), follow_up]
    targets = [occurrences.planned_target(str(r[1])) for r in rows]
    assert judge(batch, rows, targets) == rows
