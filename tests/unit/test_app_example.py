"""examples/jobs.py (the README's App example) syncs its schedule and its task runs."""

from __future__ import annotations

import importlib.util
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

import cronlab
from cronlab.clock import SystemClock
from cronlab.election.store import StoreElector
from cronlab.queues.store import StoreQueue
from cronlab.runtime.worker import Worker, WorkerConfig
from cronlab.stores.sqlite import SqliteStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jobs.py"


def load_example() -> cronlab.App:
    spec = importlib.util.spec_from_file_location("jobs_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    app = module.app
    assert isinstance(app, cronlab.App)
    return app


def test_the_example_deploys_a_monthly_berlin_schedule_and_bills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # its store is sqlite:///cron.db, relative to here
    app = load_example()
    assert not (tmp_path / "cron.db").exists()  # importing it writes nothing
    assert app.sync().added == ("bill",)
    assert load_example().sync() == cronlab.SyncReport()  # syncing twice changes nothing
    store = SqliteStore(tmp_path / "cron.db", create=False)
    (info,) = store.list_schedules()
    assert info.next_fire_ms is not None and store.counts()["PENDING"] == 1
    berlin = datetime.fromtimestamp(info.next_fire_ms / 1000, ZoneInfo("Europe/Berlin"))
    assert (berlin.day, berlin.hour, berlin.minute) == (1, 0, 0)
    clock = SystemClock()
    store.trigger_schedule("bill", clock.now_ms())
    lease = StoreElector(store, clock).acquire_or_renew("s", 10_000)
    assert lease is not None
    assert store.dispatch_due(clock.now_ms(), 10, lease.epoch) == 1
    worker = Worker(
        WorkerConfig(index=0),
        store=store,
        queue=StoreQueue(store, clock),
        registry=app.registry,
        clock=clock,
        name="w",
    )
    worker.step()
    assert capsys.readouterr().out.startswith("billing pro for ")
    assert store.get_schedule("bill").last_outcome == "DONE"
    store.close()
