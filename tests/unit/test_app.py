"""``cronlab.App``: tasks by name, declared schedules written by ``sync``, ``--app`` loading."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import cronlab
from cronlab.app import load
from cronlab.clock import FakeClock
from cronlab.core.policy import Schedule
from cronlab.exceptions import ConfigError, ConflictError
from cronlab.handlers import Context
from cronlab.ports import SyncReport
from cronlab.stores.memory import MemoryStore
from cronlab.stores.sqlite import SqliteStore

T0 = 1_780_000_000_000


def module_level(ctx: Context) -> None:
    """A task named after its module and qualname."""


def app_on(path: Path) -> tuple[cronlab.App, cronlab.Task[..., None]]:
    app = cronlab.App(f"sqlite:///{path}", clock=FakeClock(T0))

    @app.task(name="bill")
    def bill(ctx: Context, plan: str = "basic") -> None:
        """A user's task."""

    return app, bill


def test_a_declared_schedule_is_written_by_sync_with_its_next_occurrence(tmp_path: Path) -> None:
    app, bill = app_on(tmp_path / "cron.db")
    app.cron(
        "0 0 1 * *",
        name="monthly-invoices",
        tz="Europe/Berlin",
        catchup="all",
        overlap="skip",
        args={"plan": "pro"},
    )(bill)
    assert not (tmp_path / "cron.db").exists()  # declaring writes nothing
    assert app.sync() == SyncReport(added=("monthly-invoices",))
    store = SqliteStore(tmp_path / "cron.db", create=False)
    (info,) = store.list_schedules()
    assert info.schedule.payload == {"plan": "pro"} and info.schedule.catchup == "all"
    assert info.app == __name__ and store.counts()["PENDING"] == 1  # the default name
    keys = store.query(store.own("SELECT idempotency_key FROM tasks"))
    assert keys == [(f"schedule:monthly-invoices:{info.next_fire_ms}",)]
    store.close()


def test_syncing_the_same_app_twice_changes_nothing(tmp_path: Path) -> None:
    first, bill = app_on(tmp_path / "cron.db")
    first.cron("0 6 * * *", name="daily")(bill)
    first.sync()
    again, bill2 = app_on(tmp_path / "cron.db")
    again.cron("0 6 * * *", name="daily")(bill2)
    assert again.sync() == SyncReport()
    store = SqliteStore(tmp_path / "cron.db", create=False)
    assert store.query(store.own("SELECT count(*) FROM tasks")) == [(1,)]
    store.close()


def test_sync_changes_and_removes_only_its_own_schedules(tmp_path: Path) -> None:
    app, bill = app_on(tmp_path / "cron.db")
    app.cron("0 6 * * *", name="daily")(bill)
    app.cron("0 7 * * *", name="later")(bill)
    app.sync()
    store = SqliteStore(tmp_path / "cron.db", create=False)
    by_hand = Schedule(name="by-hand", cron="0 8 * * *", task="bill")
    store.put_schedule(by_hand, T0, replace=False)
    other = cronlab.App(store=store, clock=FakeClock(T0), name="billing")
    other.task(name="bill")(lambda ctx: None)
    other.cron("0 9 * * *", name="theirs")(other.tasks["bill"])
    other.sync()
    redeploy, bill2 = app_on(tmp_path / "cron.db")
    redeploy.cron("30 6 * * *", name="daily")(bill2)  # changed; "later" is gone from the code
    report = redeploy.sync()
    assert report == SyncReport(changed=("daily",), removed=("later",))
    names = [i.schedule.name for i in store.list_schedules()]
    assert names == ["by-hand", "daily", "theirs"]  # by hand, and another app's, stay
    clash, bill3 = app_on(tmp_path / "cron.db")
    clash.cron("0 9 * * *", name="theirs")(bill3)
    with pytest.raises(ConflictError, match="declared by app 'billing'"):
        clash.sync()
    store.close()


@pytest.mark.parametrize(
    ("expr", "kw", "words"),
    [
        ("0 6 * *", {}, ("bad cron expression",)),
        ("0 6 * * *", {"tz": "Europe/Nowhere"}, ("'Europe/Nowhere'",)),
        ("0 6 * * *", {"catchup": "some"}, ("bad catchup 'some'",)),
        ("0 6 * * *", {"catchup_window": 60}, ("catchup_window",)),
        ("0 6 * * *", {"args": {"nope": 1}}, ("unexpected argument 'nope'",)),
    ],
)
def test_a_bad_schedule_raises_and_writes_nothing(
    tmp_path: Path, expr: str, kw: dict[str, Any], words: tuple[str, ...]
) -> None:
    app, bill = app_on(tmp_path / "cron.db")
    with pytest.raises(ConfigError) as err:
        app.cron(expr, name="daily", **kw)(bill)
    assert all(w in str(err.value) for w in words), str(err.value)
    assert not (tmp_path / "cron.db").exists() and app.schedules == {}


def test_cron_goes_on_a_task() -> None:
    app = cronlab.App(store=MemoryStore())
    with pytest.raises(ConfigError, match=r"goes on an @app\.task"):
        app.cron("0 6 * * *")(lambda ctx: None)  # type: ignore[arg-type]


def test_task_names_are_unique_and_none_is_reserved_by_the_engine() -> None:
    app = cronlab.App(store=MemoryStore())
    assert app.registry.names() == []

    def bill(ctx: Context) -> None: ...

    app.task(name="bill")(bill)
    with pytest.raises(ConfigError, match="'bill'"):
        app.task(name="bill")(bill)
    app.task(name="invoice")(bill)  # the lab's workload is an app of its own
    assert app.registry.names() == ["bill", "invoice"]
    here = test_task_names_are_unique_and_none_is_reserved_by_the_engine.__name__
    assert app.task(bill).name == f"{__name__}.{here}.bill"
    with pytest.raises(ConfigError, match="give it a name"):
        app.task(lambda ctx: None)
    assert app.task(module_level).name == f"{__name__}.module_level"


def test_the_retired_forms_are_gone(tmp_path: Path) -> None:
    """``@app.handler(name)`` and ``app.cron(name, expr, handler=...)``, deprecated before,
    are retired: an app uses ``@app.task`` and stacks ``@app.cron(expr)`` on it."""
    app = cronlab.App(f"sqlite:///{tmp_path / 'cron.db'}", clock=FakeClock(T0))
    assert not hasattr(app, "handler")
    with pytest.raises(TypeError):
        app.cron("q", "*/15 * * * *", handler="bill")  # type: ignore[call-arg]

    @app.cron("*/15 * * * *", name="q", catchup_window=timedelta(minutes=90))
    @app.task(name="bill")
    def bill(ctx: Context) -> None: ...

    assert app.schedules["q"].catchup_window_ms == 5_400_000
    assert app.sync() == SyncReport(added=("q",))


def test_a_store_url_or_a_store_not_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRONLAB_STORE", raising=False)
    with pytest.raises(ConfigError, match="no store"):
        cronlab.App().store()
    monkeypatch.setenv("CRONLAB_STORE", "sqlite:///from-env.db")
    assert cronlab.App().store_url == "sqlite:///from-env.db"
    with pytest.raises(ConfigError, match="store"):
        cronlab.App("sqlite:///x.db", store=MemoryStore())
    with pytest.raises(ConfigError, match="'mysql'"):
        cronlab.App("mysql://db")


def test_load_imports_the_users_module_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "myjobs_for_load.py").write_text(
        "import cronlab\nfrom cronlab.stores.memory import MemoryStore\n"
        "app = cronlab.App(store=MemoryStore())\nnot_an_app = 3\n"
    )
    monkeypatch.chdir(tmp_path)
    # load() itself puts the working directory on the path, as ``python -m`` would.
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert isinstance(load("myjobs_for_load:app"), cronlab.App)
    with pytest.raises(ConfigError, match=r"not a cronlab\.App"):
        load("myjobs_for_load:not_an_app")
    with pytest.raises(ConfigError, match="cannot import 'no_such_module_x'"):
        load("no_such_module_x:app")
    with pytest.raises(ConfigError, match="module:attribute"):
        load("myjobs_for_load")


def test_the_default_name_is_the_module_that_makes_the_app(tmp_path: Path) -> None:
    """Issue 28: every App was named "app", so two services syncing one store removed each
    other's schedules. A script run as ``python jobs.py`` is named as ``--app jobs:app``."""
    assert cronlab.App(store=MemoryStore()).name == __name__
    assert cronlab.App(store=MemoryStore(), name="billing").name == "billing"
    (tmp_path / "jobs.py").write_text("import cronlab\nprint(cronlab.App().name)\n")
    env = {k: v for k, v in os.environ.items() if k != "CRONLAB_STORE"}
    ran = subprocess.run(
        [sys.executable, "jobs.py"], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert (ran.returncode, ran.stdout) == (0, "jobs\n"), ran.stderr


def test_schedules_synced_under_the_old_default_name_are_adopted_and_never_removed(
    tmp_path: Path,
) -> None:
    """A store whose schedules an App synced as "app" (the old default, which every service
    shared): the app that declares one adopts it; one no app declares stays (whose was it?)."""
    app, bill = app_on(tmp_path / "cron.db")
    store = app.store()
    old = [Schedule(name=n, cron="0 6 * * *", task="bill") for n in ("mine", "theirs")]
    store.sync_schedules("app", old, T0)
    app.cron("0 6 * * *", name="mine")(bill)
    assert app.sync() == SyncReport()
    owners = {i.schedule.name: i.app for i in store.list_schedules()}
    assert owners == {"mine": app.name, "theirs": "app"}
    still_app = cronlab.App(store=store, clock=FakeClock(T0), name="app")
    assert still_app.sync() == SyncReport()  # declares nothing, removes nothing
    assert len(store.list_schedules()) == 2


@pytest.mark.parametrize("tz", ["localtime", "posixrules", "Factory", "right/UTC"])
def test_a_zone_that_depends_on_the_host_is_refused_in_code_and_by_the_store(tz: str) -> None:
    """Issue 28: ``@app.cron(tz="localtime")`` fired at each replica's own 09:00."""
    app = cronlab.App(store=MemoryStore(), clock=FakeClock(T0))
    bill = app.task(name="bill")(lambda ctx: None)
    with pytest.raises(ConfigError, match=f"time zone '{tz}'"):
        app.cron("0 9 * * *", name="daily", tz=tz)(bill)
    schedule = Schedule(name="daily", cron="0 9 * * *", task="bill", tz=tz)
    with pytest.raises(ConfigError, match=f"time zone '{tz}'"):
        app.store().put_schedule(schedule, T0, replace=False)
    with pytest.raises(ConfigError, match=f"time zone '{tz}'"):
        app.store().sync_schedules("app", [schedule], T0)
    assert app.store().list_schedules() == []


def test_a_stored_schedule_in_such_a_zone_still_reads_and_fires() -> None:
    """One an older cronlab stored is left to its owner to fix (the next deploy refuses it):
    the leader does not stop on it."""
    store = MemoryStore()
    store.put_schedule(Schedule(name="daily", cron="0 9 * * *", task="bill"), T0, replace=False)
    store.write(lambda tx: tx.execute(store.own("UPDATE schedules SET tz = 'localtime'")))
    (info,) = store.list_schedules()
    assert info.schedule.tz == "localtime"
    assert info.next_fire_ms is not None
    now = info.next_fire_ms
    lease = store.lease_cas("me", now, 10_000)
    assert lease is not None
    assert store.dispatch_due(now, 10, lease.epoch) == 1
    assert store.counts()["PENDING"] == 1  # the next occurrence, planned
