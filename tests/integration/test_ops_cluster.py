"""Issue 16 on a real cluster (real processes, a real SQLite file, a real HTTP receiver): the
alert fires, signed, once, when the handler keeps failing and when every worker is down; the
lateness histogram scraped from the cluster's one metrics port agrees with the run history."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cronlab.metrics.prometheus import LATENESS_BUCKETS

from .conftest import cli, stop_cluster, store_of, wait_until

pytestmark = pytest.mark.integration
SECRET = "s3cret-for-the-test"

APP = """
from datetime import timedelta
import cronlab

app = cronlab.App(name="ops")

@app.cron("* * * * * */2", name="flaky", alert_on_failures=2)
@app.task(name="flaky", retries=0)
def flaky(ctx: cronlab.Context) -> None:
    raise RuntimeError("upstream is down")

@app.cron("* * * * * *", name="tick", alert_after=timedelta(seconds=10))
@app.task(name="tick")
def tick(ctx: cronlab.Context) -> None:
    pass
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Receiver:
    """A local webhook: every POST's headers and body."""

    def __init__(self) -> None:
        self.posts: list[tuple[dict[str, str], bytes]] = []
        received = self.posts

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append((dict(self.headers.items()), body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def bodies(self, kind: str) -> list[dict[str, Any]]:
        found = [json.loads(b) for _, b in self.posts]
        return [b for b in found if b["kind"] == kind]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


@contextmanager
def cluster(tmp_path: Path, url: str, *flags: str) -> Iterator[Path]:
    """``cronlab cluster --app ops_app:app`` in ``tmp_path``; yields the file of its stderr."""
    (tmp_path / "ops_app.py").write_text(APP)
    log = tmp_path / "cluster.err"
    env = {**os.environ, "CRONLAB_ALERT_SECRET": SECRET}
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cronlab", "cluster", "--store", url, "--app", "ops_app:app",
             "--lease-ttl", "3", *flags],
            stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path, env=env,
        )  # fmt: skip
        try:
            yield log
        finally:
            stop_cluster(proc)


def opened(url: str) -> Any:
    """The cluster's store, once the cluster has made it."""
    path = Path(url.removeprefix("sqlite:///"))
    wait_until(lambda: path.exists() and os.path.getsize(path) > 0, 30, "the store")
    return wait_until(lambda: _try(url), 30, "a migrated store")


def _try(url: str) -> Any:
    try:
        store = store_of(url)
        store.counts()
        return store
    except Exception:
        return None


def signed(headers: dict[str, str], body: bytes) -> bool:
    mac = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers["X-Cronlab-Signature"], f"sha256={mac}")


def test_a_handler_that_keeps_failing_alerts_once_signed(
    tmp_path: Path, url: str, receiver: Receiver
) -> None:
    with cluster(tmp_path, url, "--replicas", "2", "--workers", "1",
                 "--alert-webhook", receiver.url) as log:  # fmt: skip
        wait_until(lambda: receiver.bodies("failing"), 60, "the failing alert")
        store = opened(url)
        wait_until(lambda: store.counts()["FAILED"] >= 6, 60, "more failed runs")
        store.close()
    (alert,) = receiver.bodies("failing")
    assert alert["schedule"] == "flaky" and "2 runs in a row failed" in alert["message"]
    assert "RuntimeError: upstream is down" in alert["message"]
    headers, body = next(p for p in receiver.posts if json.loads(p[1])["kind"] == "failing")
    assert signed(headers, body) and headers["Content-Type"] == "application/json"
    assert SECRET not in log.read_text()
    assert f"cronlab: alert {alert['id']}: {alert['message']}" in log.read_text()
    store = store_of(url)
    kinds = [e.detail.get("kind") for e in store.events() if e.kind == "alert"]
    store.close()
    assert kinds.count("failing") == 1


def test_workers_all_down_alert_that_the_schedule_did_not_start(
    tmp_path: Path, url: str, receiver: Receiver
) -> None:
    with cluster(tmp_path, url, "--replicas", "2", "--workers", "1", "--restart-after", "never",
                 "--alert-webhook", receiver.url):  # fmt: skip
        store = opened(url)
        wait_until(lambda: store.counts()["DONE"] >= 2, 60, "tick running")
        assert receiver.bodies("late") == []
        beating = lambda: all(p.heartbeat_ms for p in store.processes())  # noqa: E731
        wait_until(beating, 30, "a heartbeat from every process")
        (worker,) = [p for p in store.processes() if p.role == "worker"]
        os.kill(worker.pid, signal.SIGKILL)
        late = wait_until(lambda: receiver.bodies("late"), 60, "the late alert")
        done = store.counts()["DONE"]
        skipped = store.counts()["SKIPPED"]
        wait_until(lambda: store.counts()["SKIPPED"] >= skipped + 6, 60, "six more occurrences")
        store.close()
    (alert,) = [a for a in late if a["schedule"] == "tick"]
    assert "started within 10 s" in alert["message"] and alert["detail"]["alert_after_ms"] == 10_000
    assert all(signed(h, b) for h, b in receiver.posts)
    assert len([a for a in receiver.bodies("late") if a["schedule"] == "tick"]) == 1  # one outage
    assert store_of(url).counts()["DONE"] == done  # nothing ran after the kill


def scrape(port: int) -> dict[str, list[Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as res:
        text = res.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def value(samples: list[Any], name: str, **labels: str) -> float:
    return sum(s.value for s in samples if s.name == name and labels.items() <= s.labels.items())


def test_the_lateness_scraped_from_a_cluster_agrees_with_the_run_history(
    tmp_path: Path, url: str
) -> None:
    port = free_port()
    with cluster(tmp_path, url, "--replicas", "2", "--workers", "2", "--metrics-port", str(port)):
        store = opened(url)
        wait_until(lambda: store.counts()["DONE"] >= 15, 90, "fifteen runs")
        for name in ("tick", "flaky"):
            cli("schedule", "pause", name, "--store", url)
        wait_until(
            lambda: store.queue_depth() == 0 and store.pending_due(10**15) == 0, 60, "a drain"
        )
        wait_until(lambda: store.counts()["DISPATCHED"] == 0, 60, "every run recorded")
        got = scrape(port)
        first = store.query(
            store.own(
                "SELECT e.start_ms - t.trigger_ms FROM executions e"
                " JOIN tasks t ON t.id = e.task_id WHERE e.attempt = 1"
            )
        )
        outcomes = dict(
            store.query(store.own("SELECT outcome, count(*) FROM executions GROUP BY outcome"))
        )
        dispatched = store.query(store.own("SELECT value FROM counters WHERE name = 'dispatched'"))[
            0
        ][0]
        store.close()
    lateness = [r[0] / 1000 for r in first]
    hist = got["cronlab_trigger_lateness_seconds"]
    assert value(hist, "cronlab_trigger_lateness_seconds_count") == len(lateness) >= 15
    assert math.isclose(value(hist, "cronlab_trigger_lateness_seconds_sum"), sum(lateness))
    for bound in LATENESS_BUCKETS:
        le = f"{float(bound)}"
        assert value(hist, "cronlab_trigger_lateness_seconds_bucket", le=le) == sum(
            1 for x in lateness if x <= bound
        ), le
    executed = got["cronlab_tasks_executed"]
    for outcome, n in outcomes.items():
        assert value(executed, "cronlab_tasks_executed_total", outcome=outcome) == n
    runs = value(got["cronlab_handler_duration_seconds"], "cronlab_handler_duration_seconds_count")
    assert runs == sum(outcomes.values())
    assert value(got["cronlab_tasks_dispatched"], "cronlab_tasks_dispatched_total") == dispatched
    assert value(got["cronlab_is_leader"], "cronlab_is_leader") == 1
    assert value(got["cronlab_lease_epoch"], "cronlab_lease_epoch") >= 1
    assert value(got["cronlab_queue_depth"], "cronlab_queue_depth") == 0
    assert value(got["cronlab_pending_due"], "cronlab_pending_due") == 0
    assert {s.labels["schedule"] for s in got["cronlab_schedule_missed"]} == {"flaky", "tick"}
