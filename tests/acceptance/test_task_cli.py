"""``cronlab task show|cancel|retry ID`` as an operator runs it (issue 27 item 4): a task not
run yet is cancelled and shows in ``cronlab runs`` as skipped, reason cancelled; a failed one
runs once more; every mistake is one line, exit 2, nothing changed."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from shell import cronlab

from cronlab import App, Context
from cronlab.clock import FakeClock
from cronlab.core.policy import to_ms
from cronlab.stores.sqlite import SqliteStore

pytestmark = pytest.mark.acceptance
T0 = to_ms(datetime(2026, 6, 1, 9, 0, 30, tzinfo=UTC))


def shop(path: Path) -> tuple[App, FakeClock, dict[str, int]]:
    """A charge that failed its only attempt, and a receipt due tomorrow: their task ids."""
    clock = FakeClock(T0)
    app = App(store=SqliteStore(path), clock=clock)

    @app.task(name="charge", retries=0)
    def charge(ctx: Context, fail: bool) -> None:
        if fail:
            raise RuntimeError("card declined")

    @app.task(name="receipt")
    def receipt(ctx: Context) -> None:
        pass

    ids = {
        "charge": charge.defer(fail=True).id,
        "receipt": receipt.defer(delay=timedelta(days=1)).id,
    }
    app.run_until_idle()
    return app, clock, ids


def one_line_error(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode == 2, out
    assert out.stderr.startswith("cronlab: error: ") and out.stderr.count("\n") == 1, out.stderr
    for word in words:
        assert word in out.stderr, out.stderr


def runs(url: str) -> dict[int, list[tuple[str, str | None]]]:
    out = cronlab("runs", "--store", url, "--json", "--since", "2026-01-01T00:00Z")
    assert out.returncode == 0, out.stderr
    found: dict[int, list[tuple[str, str | None]]] = {}
    for r in json.loads(out.stdout)["runs"]:
        found.setdefault(r["task_id"], []).append((r["outcome"], r["error"]))
    return found


def test_a_task_not_run_yet_is_cancelled_and_shows_as_skipped(tmp_path: Path) -> None:
    path = tmp_path / "shop.db"
    _, _, ids = shop(path)
    url, receipt = f"sqlite:///{path}", str(ids["receipt"])
    shown = cronlab("task", "show", receipt, "--store", url, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "PENDING"
    out = cronlab("task", "cancel", receipt, "--store", url)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"cancelled task {receipt} (")
    data = json.loads(cronlab("task", "show", receipt, "--store", url, "--json").stdout)
    assert (data["status"], data["last_error"], data["task"]) == ("SKIPPED", "cancelled", "receipt")
    text = cronlab("task", "show", receipt, "--store", url).stdout
    assert "status: SKIPPED" in text and "last_error: cancelled" in text
    again = cronlab("task", "cancel", receipt, "--store", url)
    one_line_error(again, f"task {receipt} is SKIPPED", "nothing changed")
    done = cronlab("task", "cancel", str(ids["charge"]), "--store", url)
    one_line_error(done, f"task {ids['charge']} is FAILED")
    store = SqliteStore(path, create=False)
    (event,) = [e for e in store.events() if e.kind == "cancelled"]
    assert event.detail["task"] == ids["receipt"] and str(event.detail["by"]).startswith("cli ")
    store.close()


def test_a_failed_task_is_retried_once_and_its_run_shows_in_the_history(tmp_path: Path) -> None:
    path = tmp_path / "shop.db"
    app, _, ids = shop(path)
    url, charge = f"sqlite:///{path}", str(ids["charge"])
    assert runs(url)[ids["charge"]] == [("failed", "RuntimeError: card declined")]
    refused = cronlab("task", "retry", str(ids["receipt"]), "--store", url)
    one_line_error(refused, f"task {ids['receipt']} is PENDING", "FAILED")
    out = cronlab("task", "retry", charge, "--store", url)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("attempt 2 queued")
    data = json.loads(cronlab("task", "show", charge, "--store", url, "--json").stdout)
    assert (data["status"], data["last_error"]) == ("DISPATCHED", "RuntimeError: card declined")
    one_line_error(cronlab("task", "retry", charge, "--store", url), "is DISPATCHED")
    assert app.run_until_idle()["failed"] == 1  # the card is still declined: one more run
    assert runs(url)[ids["charge"]] == [("failed", "RuntimeError: card declined")] * 2


@pytest.mark.parametrize(
    ("task_id", "words"),
    [
        ("0", ("a task id is an integer 1..",)),
        ("abc", ("a task id is an integer", "'abc'")),
        ("1.5", ("a task id is an integer",)),
        ("99999999999999999999", ("a task id is an integer",)),
        ("9" * 5000, ("a task id is an integer",)),  # past int()'s 4,300 digits: a traceback
        ("٣", ("a task id is an integer",)),  # a digit, not an ASCII one
        ("424242", ("no task with id 424242",)),
    ],
)
def test_bad_ids_are_one_line_and_change_nothing(
    tmp_path: Path, task_id: str, words: tuple[str, ...]
) -> None:
    path = tmp_path / "shop.db"
    shop(path)
    url = f"sqlite:///{path}"
    before = contents(path)
    for action in ("show", "cancel", "retry"):
        one_line_error(cronlab("task", action, task_id, "--store", url), *words)
    assert contents(path) == before


def contents(path: Path) -> list[object]:
    """What an action could change: the tasks, the queue and the event log."""
    store = SqliteStore(path, create=False)
    tables = ("tasks", "queue", "events")
    found = [store.query(store.own(f"SELECT * FROM {t} ORDER BY 1")) for t in tables]
    store.close()
    return found


def test_a_missing_store_is_one_line_and_not_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    one_line_error(cronlab("task", "cancel", "1", "--store", url), "no store")
    assert not (tmp_path / "none.db").exists()


def test_the_help_says_what_each_action_takes() -> None:
    out = cronlab("task", "cancel", "--help")
    assert out.returncode == 0
    assert "PENDING" in out.stdout and "DISPATCHED" in out.stdout and "cancelled" in out.stdout
    assert "FAILED" in cronlab("task", "retry", "--help").stdout
