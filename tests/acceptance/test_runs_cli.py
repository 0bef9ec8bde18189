"""``cronlab runs`` and the operator's schedule commands (issue 16) as a user runs them: the
history printed agrees with the store row for row; bad input is one line, exit 2, nothing
written."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from shell import cronlab

from cronlab import App, Context
from cronlab.clock import FakeClock
from cronlab.core.policy import to_ms
from cronlab.ports import Retry
from cronlab.runtime import embedded
from cronlab.stores.sqlite import SqliteStore

pytestmark = pytest.mark.acceptance
T0 = to_ms(datetime(2026, 6, 1, 9, 0, 30, tzinfo=UTC))


def history(path: Path, minutes: int = 12) -> None:
    """Three schedules run ``minutes`` on a fake clock; one always fails, one is paused and
    resumed, one-off tasks run too: every kind of row."""
    store = SqliteStore(path)
    clock = FakeClock(T0)
    app = App(store=store, clock=clock)

    @app.cron("* * * * *", name="ok-every-minute")
    @app.cron("*/2 * * * *", name="fails", alert_on_failures=2)
    @app.task(name="job", retries=1)
    def job(ctx: Context, fail: bool = False) -> None:
        if ctx.idempotency_key.startswith("schedule:fails:"):
            raise RuntimeError("no such table: invoices")

    engine = embedded.start(app, concurrency=4)
    engine.worker.cfg = type(engine.worker.cfg)(index=0, retry=Retry(max_attempts=2, base_ms=10))
    job.defer()
    for _ in range(minutes * 60):
        clock.advance(1_000)
        engine.scheduler.step()
        while engine.worker.step() == 0:
            pass
    engine.stop()
    store.close()


def store_rows(path: Path) -> list[tuple[Any, ...]]:
    """The history straight from the tables, independently of `runs`' query."""
    store = SqliteStore(path)
    executed = store.query(
        store.own(
            "SELECT t.id, t.trigger_ms, e.attempt, e.worker, e.start_ms, e.end_ms, e.outcome,"
            " e.error FROM executions e JOIN tasks t ON t.id = e.task_id"
        )
    )
    unrun = store.query(
        store.own(
            "SELECT t.id, t.trigger_ms, t.attempts, NULL, NULL, NULL, t.status, t.last_error"
            " FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM executions e WHERE e.task_id = t.id)"
        )
    )  # (the fake clock is months behind the CLI's: every PENDING task is due to it)
    store.close()
    unrun = [(*r[:6], unrun_outcome(r[6], r[7]), r[7]) for r in unrun]
    return sorted(tuple(r) for r in executed + unrun)


def unrun_outcome(status: str, reason: str | None) -> str:
    if status == "SKIPPED":
        return "missed" if (reason or "").startswith("catchup=") else "skipped"
    return {"PENDING": "due", "DISPATCHED": "queued", "MISSED": "missed"}[status]


def test_runs_json_agrees_with_the_store_row_for_row(tmp_path: Path) -> None:
    history(tmp_path / "h.db")
    url = f"sqlite:///{tmp_path / 'h.db'}"
    out = cronlab("runs", "--store", url, "--json", "--limit", "100000")
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)["runs"]
    printed = sorted(
        (
            r["task_id"], r["occurrence_ms"], r["attempt"], r["worker"], r["start_ms"],
            r["end_ms"], r["outcome"], r["error"],
        )
        for r in runs
    )  # fmt: skip
    assert printed == store_rows(tmp_path / "h.db")
    assert len(runs) > 20
    outcomes = {r["outcome"] for r in runs}
    assert {"ok", "error", "failed"} <= outcomes
    order = [(r["occurrence_ms"], r["task_id"]) for r in runs]
    assert order == sorted(order, reverse=True)
    for r in runs:
        if r["start_ms"] is not None:
            assert r["lateness_ms"] == r["start_ms"] - r["occurrence_ms"] >= 0
            assert r["duration_ms"] == r["end_ms"] - r["start_ms"] >= 0


def test_runs_filters_by_schedule_failure_and_time(tmp_path: Path) -> None:
    history(tmp_path / "h.db", minutes=6)
    url = f"sqlite:///{tmp_path / 'h.db'}"

    def runs(*flags: str) -> list[dict[str, Any]]:
        out = cronlab("runs", "--store", url, "--json", *flags)
        assert out.returncode == 0, out.stderr
        rows: list[dict[str, Any]] = json.loads(out.stdout)["runs"]
        return rows

    assert {r["schedule"] for r in runs("--schedule", "fails")} == {"fails"}
    failed = runs("--failed")
    assert failed and {r["outcome"] for r in failed} == {"error", "failed"}
    assert all(r["error"] == "RuntimeError: no such table: invoices" for r in failed)
    since = datetime.fromtimestamp((T0 + 3 * 60_000) / 1000, UTC).isoformat()
    assert all(r["occurrence_ms"] >= T0 + 3 * 60_000 for r in runs("--since", since))
    assert len(runs("--limit", "2")) == 2
    text = cronlab("runs", "--store", url, "--schedule", "fails", "--failed", "--limit", "1")
    assert "failed" in text.stdout and "no such table" in text.stdout


def one_line_error(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.startswith("cronlab: error: ") and out.stderr.count("\n") == 1
    for word in words:
        assert word in out.stderr, out.stderr


def test_bad_runs_input_is_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    one_line_error(cronlab("runs", "--store", url), "no store")
    SqliteStore(tmp_path / "s.db").close()
    url = f"sqlite:///{tmp_path / 's.db'}"
    one_line_error(cronlab("runs", "--store", url, "--since", "yesterday"), "--since")
    one_line_error(cronlab("runs", "--store", url, "--limit", "0"), "--limit")


def test_pause_with_a_note_backfill_and_their_mistakes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    add = cronlab(
        "schedule", "add", "hourly", "0 * * * *", "--handler", "invoice", "--store", url,
        "--alert-after", "10m", "--alert-on-failures", "3",
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    pause = cronlab("schedule", "pause", "hourly", "--note", "vendor outage", "--store", url)
    assert pause.returncode == 0 and pause.stdout == "paused hourly\n"
    shown = json.loads(cronlab("schedule", "show", "hourly", "--store", url, "--json").stdout)
    assert (shown["paused_note"], shown["alert_after_ms"], shown["alert_on_failures"]) == (
        "vendor outage",
        600_000,
        3,
    )
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, end = (now - timedelta(hours=5)).isoformat(), (now - timedelta(hours=2)).isoformat()
    before = SqliteStore(tmp_path / "c.db").counts()
    for bad, words in [
        ((end, start), ("--from must be before --to",)),
        ((start, (now + timedelta(days=1)).isoformat()), ("in the future",)),
        (((now - timedelta(days=60)).isoformat(), end), ("more than 1,000",)),
        (("yesterday", end), ("bad time",)),
    ]:
        out = cronlab("schedule", "backfill", "hourly", "--from", bad[0], "--to", bad[1],
                      "--store", url)  # fmt: skip
        one_line_error(out, *words)
    assert SqliteStore(tmp_path / "c.db").counts() == before
    out = cronlab("schedule", "backfill", "hourly", "--from", start, "--to", end, "--store", url)
    # Issue 27 ("also seen"): under overlap=skip the output said "3 added" when one would run
    assert out.stdout == (
        "backfilled hourly: 3 added, 0 already there\n"
        "hourly skips overlaps: the 3 fall due together, so each one due while an earlier one "
        "runs is skipped (only the first is sure to run; overlap=allow runs them all)\n"
    ), out.stderr
    one_line_error(
        cronlab("schedule", "pause", "hourly", "--note", "x" * 501, "--store", url), "500"
    )
    one_line_error(
        cronlab("schedule", "add", "h2", "0 * * * *", "--handler", "invoice", "--store", url,
                "--alert-on-failures", "0"),
        "--alert-on-failures",
    )  # fmt: skip
