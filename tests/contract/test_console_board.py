"""What the console reads (issue 16), on every backend — PostgreSQL as well as SQLite: the
snapshot's schedules, next fires, recent runs, processes, lateness and alerts, and its
controls through the store's operator methods."""

from __future__ import annotations

from starlette.testclient import TestClient

from cronlab.runtime.alerts import Alerter
from cronlab.stores.sqlite import SqliteStore
from cronlab.web import board
from cronlab.web.console import ConsoleConfig, create_console

from .conftest import Backend
from .ops_lab import MIN, minute, ops_lab


def test_the_snapshot_on_every_backend(backend: Backend) -> None:
    lab = ops_lab(backend.store)
    lab.cron("tick")
    lab.cron("flaky", alert_on_failures=2)
    alerter = Alerter(lab.store, lab.clock, "scheduler-0", None, say=lambda _: None)
    lab.start(duties=[alerter])
    lab.run_for(3 * MIN)
    lab.failing = True
    lab.run_for(3 * MIN)
    now = lab.clock.now_ms()
    data = board.snapshot(lab.store, now, board.Fires())
    by_name = {s["name"]: s for s in data["schedules"]}
    assert list(by_name) == ["flaky", "tick"] and data["total"] == 2
    tick = by_name["tick"]
    assert len(tick["next"]) == 10 and tick["next"][0].endswith("+00:00")
    codes = data["codes"]
    outcomes = [codes[r[1]] for r in tick["runs"]]
    assert outcomes == ["failed"] * 3 + ["ok"] * 3  # newest first
    assert [r[0] for r in tick["runs"]] == [minute(k) for k in range(6, 0, -1)]
    assert tick["runs"][0][5] == f"RuntimeError: boom at {minute(6)}"
    assert data["lateness"]["runs"] and all(n == 2 for n in data["lateness"]["runs"])
    assert [(a["kind"], a["schedule"]) for a in data["alerts"]] == [("failing", "flaky")]
    assert data["leader"] is not None and data["leader"]["holder"] == "scheduler-0"
    assert data["queue_depth"] == 0


def test_the_console_api_on_every_backend(backend: Backend) -> None:
    lab = ops_lab(backend.store)
    lab.cron("tick")
    store = lab.store
    opener = (
        (lambda: SqliteStore(store.path, create=False))
        if isinstance(store, SqliteStore)
        else (
            lambda: store  # a :memory: store or PostgreSQL's pool: one for every thread
        )
    )
    app = create_console(ConsoleConfig(store_url="sqlite:///x.db"), open_store=opener)
    c = TestClient(app, base_url="http://127.0.0.1:8100")
    assert c.post("/api/schedules/tick/pause", json={"note": "n"}).status_code == 200
    assert lab.store.get_schedule("tick").paused_note == "n"
    assert c.get("/api/console").json()["schedules"][0]["paused"] is True
    assert c.post("/api/schedules/tick/resume", json={}).json()["changed"] is True
    runs = c.get("/api/runs?schedule=tick").json()["runs"]
    assert [r["outcome"] for r in runs] == [
        "due"
    ]  # (the console's clock is months ahead of the fake one)
