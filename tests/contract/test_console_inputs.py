"""Text the console's API cannot store (issue 28, item 11), on every backend: a lone surrogate
in a pause note (500 on both stores), a NUL in a note, a schedule name in the path or a
``/api/runs`` filter (500 on PostgreSQL, whose text refuses NUL). Each is a 422 naming its
field, and nothing is written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from cronlab.core.policy import Schedule
from cronlab.stores.sqlite import SqliteStore
from cronlab.web.console import ConsoleConfig, create_console

from .conftest import Backend

JSON = {"content-type": "application/json"}


def client(backend: Backend) -> TestClient:
    backend.store.put_schedule(
        Schedule(name="nightly", cron="0 0 * * *", task="h"),
        backend.clock.now_ms(),
        replace=False,
    )
    store = backend.store
    opener = (lambda: SqliteStore(store.path)) if isinstance(store, SqliteStore) else lambda: store
    app = create_console(ConsoleConfig(store_url="sqlite:///unused.db"), opener=opener)
    return TestClient(app, base_url="http://127.0.0.1:8100", raise_server_exceptions=False)


def post(c: TestClient, path: str, body: dict[str, Any]) -> Any:
    # ensure_ascii: "\ud800" travels as the JSON escape it would be in a hostile request
    return c.post(path, content=json.dumps(body).encode(), headers=JSON)


@pytest.mark.parametrize(
    "note", ["\ud800", "a\udfffb", "nul\x00inside", "\x00"], ids=["high", "low", "nul", "nul-only"]
)
def test_a_pause_note_no_store_can_hold_is_a_422(backend: Backend, note: str) -> None:
    c = client(backend)
    before = backend.store.get_schedule("nightly")
    res = post(c, "/api/schedules/nightly/pause", {"note": note})
    assert (res.status_code, res.json()["field"]) == (422, "note"), res.text
    assert backend.store.get_schedule("nightly") == before


@pytest.mark.parametrize("action", ["pause", "resume", "trigger", "backfill"])
def test_a_schedule_name_with_a_nul_is_a_422(backend: Backend, action: str) -> None:
    span = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z"}
    body = span if action == "backfill" else {}
    res = post(client(backend), f"/api/schedules/night%00ly/{action}", body)
    assert (res.status_code, res.json()["field"]) == (422, "name"), res.text


@pytest.mark.parametrize(
    ("query", "field"),
    [("schedule=a%00b", "schedule"), ("task=%00", "task"), ("schedule=%ED%A0%80x", "schedule")],
)
def test_a_runs_filter_with_a_nul_is_a_422(backend: Backend, query: str, field: str) -> None:
    res = client(backend).get(f"/api/runs?{query}")
    if field == "schedule" and "%ED" in query:  # not UTF-8: read as U+FFFD, a plain filter
        assert res.status_code == 200, res.text
        return
    assert (res.status_code, res.json()["field"]) == (422, field), res.text


def test_a_console_filter_with_a_nul_is_a_422(backend: Backend) -> None:
    res = client(backend).get("/api/console?q=a%00b")
    assert (res.status_code, res.json()["field"]) == (422, "q"), res.text
