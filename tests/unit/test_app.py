"""``cronlab.App``: handlers by name, ``cron`` as an idempotent upsert, ``--app`` loading."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import cronlab
from cronlab.app import load
from cronlab.exceptions import ConfigError
from cronlab.handlers import Context
from cronlab.runtime.clock import FakeClock
from cronlab.stores.memory import MemoryStore
from cronlab.stores.sqlite import SqliteStore

T0 = 1_780_000_000_000


def bill(ctx: Context, payload: dict[str, Any]) -> None:
    """A user's handler."""


def app_on(path: Path) -> cronlab.App:
    app = cronlab.App(f"sqlite:///{path}", clock=FakeClock(T0))
    app.handler("bill")(bill)
    return app


def test_cron_writes_the_schedule_and_its_next_occurrence(tmp_path: Path) -> None:
    app = app_on(tmp_path / "cron.db")
    app.cron(
        "monthly-invoices",
        "0 0 1 * *",
        handler="bill",
        tz="Europe/Berlin",
        catchup="all",
        overlap="skip",
        payload={"plan": "pro"},
    )
    store = SqliteStore(tmp_path / "cron.db", create=False)
    (info,) = store.list_schedules()
    assert info.schedule.payload == {"plan": "pro"} and info.schedule.catchup == "all"
    assert store.counts()["PENDING"] == 1
    keys = store.query("SELECT idempotency_key FROM tasks")
    assert keys == [(f"schedule:monthly-invoices:{info.next_fire_ms}",)]
    store.close()


def test_deploying_the_same_app_twice_changes_nothing(tmp_path: Path) -> None:
    first = app_on(tmp_path / "cron.db")
    first.cron("daily", "0 6 * * *", handler="bill")
    again = app_on(tmp_path / "cron.db")
    again.cron("daily", "0 6 * * *", handler="bill")
    assert again.deploy(again.store()) == 0
    store = SqliteStore(tmp_path / "cron.db", create=False)
    assert store.query("SELECT count(*) FROM tasks") == [(1,)]
    store.close()


@pytest.mark.parametrize(
    ("expr", "kw", "words"),
    [
        ("0 6 * * *", {"handler": "nope"}, ("unknown handler 'nope'", "'daily'")),
        ("0 6 * *", {"handler": "bill"}, ("bad cron expression",)),
        ("0 6 * * *", {"handler": "bill", "tz": "Europe/Nowhere"}, ("'Europe/Nowhere'",)),
        ("0 6 * * *", {"handler": "bill", "catchup": "some"}, ("bad catchup 'some'",)),
        ("0 6 * * *", {"handler": "bill", "catchup_window": 60}, ("catchup_window",)),
    ],
)
def test_a_bad_schedule_raises_and_writes_nothing(
    tmp_path: Path, expr: str, kw: dict[str, Any], words: tuple[str, ...]
) -> None:
    app = app_on(tmp_path / "cron.db")
    with pytest.raises(ConfigError) as err:
        app.cron("daily", expr, **kw)
    assert all(w in str(err.value) for w in words), str(err.value)
    assert not (tmp_path / "cron.db").exists() and app.schedules == {}


def test_handler_names_are_unique_and_none_is_reserved_by_the_engine() -> None:
    app = cronlab.App(store=MemoryStore())
    assert app.registry.names() == []
    app.handler("bill")(bill)
    with pytest.raises(ConfigError, match="'bill'"):
        app.handler("bill")(bill)
    app.handler("invoice")(bill)  # the lab's workload is an app of its own
    assert app.registry.names() == ["bill", "invoice"]


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


def test_a_window_is_kept_in_milliseconds() -> None:
    app = cronlab.App(store=MemoryStore(), clock=FakeClock(T0))
    app.handler("bill")(bill)
    s = app.cron("q", "*/15 * * * *", handler="bill", catchup_window=timedelta(minutes=90))
    assert s.catchup_window_ms == 5_400_000


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
