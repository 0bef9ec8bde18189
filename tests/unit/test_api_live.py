"""Live mode through the API against the real engine: real processes, SQLite in a temp folder."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from cronlab.web.app import LabConfig, create_app
from cronlab.web.live import Live

pytestmark = pytest.mark.integration
SMALL = {"replicas": 3, "workers": 2, "ttl": 3, "count": 600, "drain_s": 5, "lead_s": 3}


@pytest.fixture
def client() -> Iterator[TestClient]:
    live = Live(poll_s=0.5)
    with TestClient(create_app(LabConfig(), live), base_url="http://127.0.0.1") as c:
        yield c
    live.close()


def wait_for(what: str, check: Callable[[], Any], deadline_s: float = 45.0) -> Any:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_live_run_measures_crashes_and_cleans_up(client: TestClient) -> None:
    started = client.post("/api/live/start", json=SMALL)
    assert started.status_code == 201, started.text
    assert started.json()["config"]["worker_rate"] == 60  # 600 / (2 pods × 5 s)
    again = client.post("/api/live/start", json=SMALL)
    assert again.status_code == 409
    assert "already going" in again.json()["error"]

    with client.stream("GET", "/api/live/events") as events:
        first = next(events.iter_lines())
    assert first == "event: snapshot"

    snap = lambda: client.get("/api/live").json()  # noqa: E731
    wait_for("a leader", lambda: (snap().get("status") or {}).get("leader"))
    crash = client.post("/api/live/chaos", json={"action": "crash-leader"})
    assert crash.status_code == 200, crash.text
    done = wait_for("every invoice executed", lambda: _executed(snap(), 600))
    assert done["report"]["missed"] == 0
    assert done["prediction"]["totals"]["due"] == 600
    wait_for("a takeover", lambda: [e for e in snap()["events"] if "epoch 2" in e["text"]])
    pause = client.post("/api/live/chaos", json={"action": "pause-leader", "for": 5})
    assert pause.status_code == 200 and pause.json()["sent"] == "pause-leader"
    wait_for("a takeover from the paused leader", lambda: _event(snap(), "epoch 3"))
    wait_for("the paused leader resumed", lambda: _event(snap(), "pause-leader: "))
    metrics = client.get("/metrics").text
    assert "cronlab_live_running 1.0" in metrics
    assert "cronlab_live_executed_total 600.0" in metrics

    pids = [p["pid"] for p in snap()["status"]["processes"]]
    folder = client.app.state.lab.live._run.folder  # type: ignore[attr-defined]
    stopped = client.post("/api/live/stop", json={})
    assert stopped.status_code == 200 and stopped.json()["folder_removed"]
    assert not os.path.exists(folder)
    wait_for("every engine process gone", lambda: not any(alive(p) for p in pids), 15)
    assert client.get("/api/live").json()["running"] is False
    assert client.post("/api/live/stop", json={}).status_code == 404


def _executed(snap: dict[str, Any], count: int) -> dict[str, Any] | None:
    report = snap.get("report") or {}
    return snap if report.get("executed") == count and report.get("dispatched") == count else None


def _event(snap: dict[str, Any], text: str) -> bool:
    return any(text in e["text"] for e in snap["events"])
