"""Issue 16's flags as a user runs them: `cronlab run --metrics-port` serves the engine's
metrics and keeps a heartbeat; bad `--keep`, `--alert-webhook`, `--metrics-port` and console
options are one line, exit 2; `cronlab console` runs on PostgreSQL as on SQLite."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from shell import cronlab, need_pg

from cronlab.testing import scratch_database

pytestmark = pytest.mark.acceptance
PG_ADMIN = os.environ.get("CRONLAB_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")

JOBS = """
import cronlab

app = cronlab.App("sqlite:///cron.db", name="jobs")


@app.cron("* * * * * *", catchup="none")
@app.task(name="tick")
def tick(ctx: cronlab.Context) -> None:
    pass
"""


EXPORTED = (
    "cronlab_trigger_lateness_seconds_bucket",
    "cronlab_tasks_dispatched_total",
    "cronlab_queue_depth",
    "cronlab_pending_due",
    "cronlab_lease_epoch",
    "cronlab_handler_duration_seconds_count",
    'cronlab_schedule_missed_total{schedule="tick"}',
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as res:
            return str(res.read().decode())
    except OSError:
        return None


def one_line_error(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode == 2, out
    assert out.stderr.startswith("cronlab: error: ") and out.stderr.count("\n") == 1, out.stderr
    for word in words:
        assert word in out.stderr, out.stderr


def test_run_serves_its_metrics_and_keeps_a_heartbeat(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(JOBS)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronlab", "run", "--app", "jobs:app", "--metrics-port", str(port)],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline, text = time.monotonic() + 40, ""
        while time.monotonic() < deadline:
            text = get(f"http://127.0.0.1:{port}/metrics") or ""
            if (
                'cronlab_tasks_executed_total{outcome="ok"}' in text
                and "cronlab_is_leader 1.0" in text
            ):
                break
            time.sleep(0.3)
        with sqlite3.connect(tmp_path / "cron.db") as c:
            beats = c.execute("SELECT role, heartbeat_ms FROM cronlab_processes").fetchall()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert 'cronlab_tasks_executed_total{outcome="ok"}' in text, text
    for name in EXPORTED:
        assert name in text, name
    assert [r[0] for r in beats] == ["embedded"] and beats[0][1] is not None
    assert proc.returncode == 0, err


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (("--keep", "10m"), ("at least 1h",)),
        (("--keep", "forever"), ("bad delay",)),
        (("--alert-webhook", "ftp://example.com/x"), ("--alert-webhook", "http")),
        (("--metrics-port", "0"), ("--metrics-port",)),
    ],
)
def test_bad_operations_flags_are_one_line(
    tmp_path: Path, flags: tuple[str, ...], words: tuple[str, ...]
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    one_line_error(cronlab("scheduler", "--store", url, *flags), *words)
    assert not (tmp_path / "s.db").exists()


def test_a_metrics_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        url = f"sqlite:///{tmp_path / 's.db'}"
        out = cronlab("worker", "--store", url, "--metrics-port", str(port), timeout=30)
    one_line_error(out, f"--metrics-port {port}")


def test_console_mistakes_are_one_line(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    one_line_error(cronlab("console", "--store", missing, "--no-open"), "no store")
    open_host = cronlab("console", "--store", missing, "--host", "0.0.0.0", "--no-open")
    one_line_error(open_host, "give --token")


@contextmanager
def console(url: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronlab", "console", "--store", url, "--port", str(port),
         "--no-open"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while get(base + "/openapi.json") is None and time.monotonic() < deadline:
            time.sleep(0.2)
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


@pytest.mark.postgres
def test_the_console_runs_on_postgresql() -> None:
    need_pg(PG_ADMIN)
    with scratch_database(PG_ADMIN, "cronlab_console") as url:
        add = cronlab("schedule", "add", "nightly", "0 3 * * *", "--handler", "invoice",
                      "--store", url)  # fmt: skip
        assert add.returncode == 0, add.stderr
        with console(url) as base:
            data = json.loads(get(base + "/api/console") or "{}")
            assert [s["name"] for s in data["schedules"]] == ["nightly"]
            assert len(data["schedules"][0]["next"]) == 10
            req = urllib.request.Request(
                base + "/api/schedules/nightly/pause", data=b'{"note": "pg"}', method="POST",
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            with urllib.request.urlopen(req, timeout=5) as res:
                assert json.loads(res.read())["paused"] is True
            shown = cronlab("schedule", "show", "nightly", "--store", url, "--json")
            assert json.loads(shown.stdout)["paused_note"] == "pg"
