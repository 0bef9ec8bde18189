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
    app = create_console(ConsoleConfig(store_url="sqlite:///x.db"), opener=opener)
    c = TestClient(app, base_url="http://127.0.0.1:8100")
    assert c.post("/api/schedules/tick/pause", json={"note": "n"}).status_code == 200
    assert lab.store.get_schedule("tick").paused_note == "n"
    assert c.get("/api/console").json()["schedules"][0]["paused"] is True
    assert c.post("/api/schedules/tick/resume", json={}).json()["changed"] is True
    runs = c.get("/api/runs?schedule=tick").json()["runs"]
    assert [r["outcome"] for r in runs] == [
        "due"
    ]  # (the console's clock is months ahead of the fake one)


def test_a_process_not_heard_of_for_an_hour_is_counted_not_listed(backend: Backend) -> None:
    """Issue 31: dead processes stayed listed as "silent" for ever (a restarted cluster's old
    ones among them). Alive, exited or silent within the hour: listed; older: counted."""
    from cronlab.ports import ProcessInfo

    now = 1_800_000_000_000
    hour = board.GONE_MS

    def process(i: int, started: int, beat: int | None, exited: int | None = None) -> None:
        info = ProcessInfo(role="worker", index=i, pid=100 + i, owner=f"w{i}", started_ms=started)
        backend.store.register_process(info)
        if beat is not None:
            backend.store.heartbeat(info, beat)
        if exited is not None:
            backend.store.process_exited(info.owner, exited)

    process(0, now - 10_000, now - 1_000)  # alive
    process(1, now - 2 * hour, now - hour + 60_000)  # silent for 59 minutes: listed
    process(2, now - 3 * hour, now - 2 * hour)  # silent for two hours: counted
    process(3, now - 3 * hour, now - 2 * hour, exited=now - 2 * hour)  # exited long ago
    process(4, now - 3 * hour, None, exited=now - 30 * 60_000)  # exited half an hour ago
    data = board.snapshot(backend.store, now, board.Fires())
    listed = {p["owner"]: p["alive"] for p in data["processes"]}
    assert listed == {"w0": True, "w1": False, "w4": False}
    assert data["processes_gone"] == 2
