"""The console's HTTP API through Starlette's TestClient on a memory store: what it returns,
its bounds, and the lab's rules (token off loopback, Host check, JSON only, body limit,
security headers)."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from cronlab import execution
from cronlab.clock import SystemClock
from cronlab.core.policy import Schedule
from cronlab.exceptions import ConfigError
from cronlab.handlers import Context, Registry
from cronlab.ports import Batch, NewTask, Retry
from cronlab.stores.memory import MemoryStore
from cronlab.web.console import ConsoleConfig, create_console

LOOPBACK = "http://127.0.0.1:8100"
JSON = {"content-type": "application/json"}


@pytest.fixture
def store() -> MemoryStore:
    s = MemoryStore()
    now = SystemClock().now_ms()
    for name in ("alpha", "beta", "gamma"):
        s.put_schedule(Schedule(name=name, cron="*/5 * * * *", task="job"), now, replace=False)
    return s


def client(store: MemoryStore, **cfg: str) -> TestClient:
    config = ConsoleConfig(store_url="sqlite:///unused.db", **cfg)  # type: ignore[arg-type]
    return TestClient(create_console(config, opener=lambda: store), base_url=LOOPBACK)


def test_the_snapshot_lists_schedules_with_ten_next_fires_a_page_at_a_time(
    store: MemoryStore,
) -> None:
    data = client(store).get("/api/console").json()
    assert [s["name"] for s in data["schedules"]] == ["alpha", "beta", "gamma"]
    assert all(len(s["next"]) == 10 for s in data["schedules"])
    assert (data["total"], data["matching"], data["pages"]) == (3, 3, 1)
    page = client(store).get("/api/console?q=a&size=1&page=1").json()
    assert [s["name"] for s in page["schedules"]] == ["beta"]
    assert (page["matching"], page["pages"], page["page"]) == (3, 3, 1)
    assert data["codes"] == ["ok", "noop", "error", "failed", "skipped", "missed", "due", "queued"]


@pytest.mark.parametrize(
    ("query", "field"),
    [("size=0", "size"), ("size=501", "size"), ("page=x", "page"), ("evil=1", "evil"),
     ("q=" + "x" * 101, "q")],
)  # fmt: skip
def test_snapshot_inputs_are_bounded(store: MemoryStore, query: str, field: str) -> None:
    res = client(store).get(f"/api/console?{query}")
    assert res.status_code == 422 and res.json()["field"] == field


def test_actions_change_the_store_through_its_operator_methods(store: MemoryStore) -> None:
    c = client(store)
    res = c.post("/api/schedules/alpha/pause", json={"note": "maintenance"})
    assert res.status_code == 200 and res.json() == {
        "schedule": "alpha",
        "paused": True,
        "changed": True,
    }
    assert store.get_schedule("alpha").paused_note == "maintenance"
    assert c.post("/api/schedules/alpha/resume", json={}).json()["changed"] is True
    key = c.post("/api/schedules/beta/trigger", json={}).json()["key"]
    assert store.task_by_key(key).task == "job"
    res = c.post(
        "/api/schedules/gamma/backfill",
        json={"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z"},
    )
    assert res.json() == {"schedule": "gamma", "added": 12, "existing": 0}


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        ("/api/schedules/nope/pause", {}, 404, "name"),
        ("/api/schedules/alpha/pause", {"note": 5}, 422, "note"),
        ("/api/schedules/alpha/pause", {"note": "x" * 501}, 422, "note"),
        ("/api/schedules/alpha/trigger", {"extra": "1"}, 422, "extra"),
        ("/api/schedules/alpha/backfill", {"from": "2026-01-01T00:00:00Z"}, 422, "from"),
        ("/api/schedules/alpha/backfill", {"from": "2026-01-02T00:00:00Z",
                                           "to": "2026-01-01T00:00:00Z"}, 422, "body"),
        ("/api/schedules/alpha/backfill", {"from": "2020-01-01T00:00:00Z",
                                           "to": "2026-01-01T00:00:00Z"}, 422, "body"),
        # what the document's pattern leaves out (it said "body", after parsing)
        ("/api/schedules/alpha/backfill", {"from": "2026-01-01 00:00Z",
                                           "to": "2026-01-02T00:00:00Z"}, 422, "from"),
        ("/api/schedules/alpha/backfill", {"from": "2026-01-01T00:00:00Z",
                                           "to": "2026-01-02"}, 422, "to"),
    ],
)  # fmt: skip
def test_bad_actions_are_refused_and_write_nothing(
    store: MemoryStore, path: str, body: dict[str, object], status: int, field: str
) -> None:
    before = store.counts(), store.get_schedule("alpha")
    res = client(store).post(path, json=body)
    assert (res.status_code, res.json()["field"]) == (status, field), res.json()
    assert (store.counts(), store.get_schedule("alpha")) == before


def test_state_changes_are_json_only_bounded_and_not_cross_site(store: MemoryStore) -> None:
    c = client(store)
    form = c.post(
        "/api/schedules/alpha/pause", content=b"{}", headers={"content-type": "text/plain"}
    )
    assert form.status_code == 415
    big = c.post(
        "/api/schedules/alpha/pause", content=b"{}", headers={**JSON, "content-length": "70000"}
    )
    assert big.status_code == 413
    other = c.post("/api/schedules/alpha/pause", json={}, headers={"origin": "http://evil.example"})
    assert other.status_code == 403 and other.json()["field"] == "origin"
    assert "is not this console" in other.json()["error"]  # it said "this lab"
    site = c.post("/api/schedules/alpha/pause", json={}, headers={"sec-fetch-site": "cross-site"})
    assert site.status_code == 403
    assert not store.get_schedule("alpha").schedule.paused


def test_a_foreign_host_header_is_refused_on_loopback(store: MemoryStore) -> None:
    res = client(store).get("/api/console", headers={"host": "attacker.example"})
    assert res.status_code == 400


def test_off_loopback_needs_a_token_for_every_api_request(store: MemoryStore) -> None:
    with pytest.raises(ConfigError, match="give --token"):
        ConsoleConfig(store_url="sqlite:///x.db", host="0.0.0.0")
    c = client(store, host="0.0.0.0", token="s3cret")
    assert c.get("/api/console").status_code == 403
    assert c.get("/api/runs").status_code == 403
    assert c.get("/api/console", headers={"x-cronlab-token": "s3cret"}).status_code == 200
    bearer = {"authorization": "Bearer s3cret"}
    assert c.post("/api/schedules/alpha/pause", json={}, headers=bearer).status_code == 200
    assert c.get("/").status_code == 200  # the page itself holds nothing


def test_the_page_and_the_api_carry_the_security_headers(store: MemoryStore) -> None:
    c = client(store)
    page = c.get("/")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert "http" not in page.text.split("<body>")[0].replace('name="viewport"', "")
    api = c.get("/api/console")
    assert api.headers["content-security-policy"].startswith("default-src 'none'")
    for asset in ("/static/console/console.js", "/static/vendor/uPlot.iife.min.js"):
        assert c.get(asset).status_code == 200


def test_runs_and_openapi(store: MemoryStore) -> None:
    c = client(store)
    store.trigger_schedule("alpha", SystemClock().now_ms() - 1000)
    runs = c.get("/api/runs?schedule=alpha&limit=5").json()["runs"]
    assert [r["outcome"] for r in runs] == ["due"]
    assert c.get("/api/runs?limit=0").status_code == 422
    assert c.get("/api/runs?failed=maybe").status_code == 422
    doc = c.get("/openapi.json").json()
    assert set(doc["paths"]) >= {"/api/console", "/api/runs", "/api/schedules/{name}/backfill"}
    json.dumps(doc)


def failed_task(store: MemoryStore) -> int:
    """A task that failed its only attempt (dispatched, claimed and run by hand)."""
    clock = SystemClock()
    now = clock.now_ms()
    store.add_tasks([NewTask(idempotency_key="charge-1", task="charge", trigger_ms=now)])
    lease = store.lease_cas("leader", now, 10_000)
    assert lease is not None
    store.dispatch_due(now, 10, lease.epoch)
    registry = Registry()

    @registry.handler("charge")
    def charge(ctx: Context, payload: dict[str, object]) -> None:
        raise RuntimeError("card declined")

    messages = store.queue_claim("w", 10, 30_000, now)
    work = Batch(worker="w", messages=messages, run=registry.runner(clock.now_ms),
                 retry=Retry(max_attempts=1), now=clock.now_ms)  # fmt: skip
    assert execution.execute(work, store)["failed"] == 1
    return store.task_by_key("charge-1").id


def test_task_actions_cancel_and_retry_through_the_store(store: MemoryStore) -> None:
    c = client(store)
    due = store.task_by_key(f"schedule:alpha:{store.get_schedule('alpha').next_fire_ms}").id
    shown = c.get(f"/api/tasks/{due}")
    assert shown.status_code == 200
    assert (shown.json()["status"], shown.json()["task"]) == ("PENDING", "job")
    res = c.post(f"/api/tasks/{due}/cancel", json={})
    assert res.status_code == 200, res.json()
    assert (res.json()["id"], res.json()["status"], res.json()["last_error"]) == (
        due, "SKIPPED", "cancelled")  # fmt: skip
    assert store.task(due).status == "SKIPPED"
    again = c.post(f"/api/tasks/{due}/cancel", json={})
    assert (again.status_code, again.json()["field"]) == (409, "id")
    assert f"task {due} is SKIPPED" in again.json()["error"]
    failed = failed_task(store)
    retried = c.post(f"/api/tasks/{failed}/retry", json={})
    assert retried.status_code == 200, retried.json()
    assert (retried.json()["status"], retried.json()["attempts"]) == ("DISPATCHED", 1)
    assert store.task(failed).status == "DISPATCHED"
    by = [str(e.detail["by"]) for e in store.events() if e.kind in ("cancelled", "retried")]
    assert len(by) == 2 and all(b.startswith("console ") for b in by)


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        ("/api/tasks/0/cancel", {}, 422, "id"),
        ("/api/tasks/-3/retry", {}, 422, "id"),
        ("/api/tasks/abc/cancel", {}, 422, "id"),
        ("/api/tasks/99999999999999999999/cancel", {}, 422, "id"),
        ("/api/tasks/" + "9" * 5000 + "/cancel", {}, 422, "id"),
        ("/api/tasks/424242/cancel", {}, 404, "id"),
        ("/api/tasks/424242/retry", {}, 404, "id"),
        ("/api/tasks/1/cancel", {"reason": "x"}, 422, "reason"),
        ("/api/tasks/1/retry", {}, 409, "id"),  # PENDING: only a FAILED task is retried
    ],
)
def test_bad_task_actions_are_refused_and_change_nothing(
    store: MemoryStore, path: str, body: dict[str, object], status: int, field: str
) -> None:
    before = store.counts(), store.queue_depth(), store.events()
    res = client(store).post(path, json=body)
    assert (res.status_code, res.json()["field"]) == (status, field), res.json()
    assert (store.counts(), store.queue_depth(), store.events()) == before
    assert client(store).get("/api/tasks/x").status_code == 422
    assert client(store).get("/api/tasks/424242").status_code == 404


def test_task_actions_are_json_only_and_not_cross_site(store: MemoryStore) -> None:
    c = client(store)
    pending = store.counts()["PENDING"]
    other = c.post("/api/tasks/1/cancel", json={}, headers={"origin": "http://evil.example"})
    assert other.status_code == 403 and other.json()["field"] == "origin"
    assert "is not this console" in other.json()["error"]
    site = c.post("/api/tasks/1/cancel", json={}, headers={"sec-fetch-site": "cross-site"})
    assert site.status_code == 403
    form = c.post("/api/tasks/1/cancel", content=b"{}", headers={"content-type": "text/plain"})
    assert form.status_code == 415
    assert c.get("/api/tasks/1", headers={"origin": "http://evil.example"}).status_code == 200
    assert store.counts()["PENDING"] == pending  # nothing was cancelled
    locked = client(store, host="0.0.0.0", token="s3cret")
    assert locked.post("/api/tasks/1/cancel", json={}).status_code == 403
    assert locked.get("/api/tasks/1").status_code == 403
    assert store.counts()["PENDING"] == pending


def test_the_page_gets_each_runs_task_id_and_the_document_lists_the_task_actions(
    store: MemoryStore,
) -> None:
    c = client(store)
    key = store.trigger_schedule("alpha", SystemClock().now_ms() - 1000)
    data = c.get("/api/console?q=alpha").json()
    assert [r[6] for r in data["schedules"][0]["runs"]] == [store.task_by_key(key).id]
    paths = c.get("/openapi.json").json()["paths"]
    assert {"/api/tasks/{id}", "/api/tasks/{id}/cancel", "/api/tasks/{id}/retry"} <= set(paths)
    assert "409" in paths["/api/tasks/{id}/cancel"]["post"]["responses"]
