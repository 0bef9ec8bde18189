"""The metrics endpoint under the lab's and the console's rules (issue 28, item 10): it answered
any ``Host`` header (a DNS-rebinding page could read it) and ``--metrics-host 0.0.0.0`` needed
no token. Bound to loopback it answers loopback names only; anywhere else it needs
``CRONLAB_METRICS_TOKEN`` (Prometheus sends it as a bearer token); it serves GET /metrics and
nothing else, with the security headers."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from shell import cronlab

pytestmark = pytest.mark.acceptance
TOKEN = "s3cret-metrics-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch(
    port: int, host: str, *, method: str = "GET", path: str = "/metrics", **headers: str
) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.putrequest(method, path, skip_host=True)
        conn.putheader("Host", host)
        for name, value in headers.items():
            conn.putheader(name.replace("_", "-"), value)
        conn.endheaders()
        res = conn.getresponse()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, res.read().decode()
    finally:
        conn.close()


@contextmanager
def serving(tmp_path: Path, *args: str, token: str | None = None) -> Iterator[int]:
    """``cronlab ARGS --metrics-port P`` in the background until its port answers; P."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "CRONLAB_METRICS_TOKEN"}
    if token is not None:
        env["CRONLAB_METRICS_TOKEN"] = token
    store = f"sqlite:///{tmp_path / 's.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronlab", *args, "--store", store, "--metrics-port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1]
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)


@pytest.mark.parametrize("command", [["worker"], ["cluster", "--replicas", "1", "--workers", "1"]])
def test_a_loopback_metrics_port_answers_loopback_names_only(
    command: list[str], tmp_path: Path
) -> None:
    with serving(tmp_path, *command) as port:
        deadline = time.monotonic() + 30  # (a cluster binds its port before its store exists)
        while True:
            status, headers, body = fetch(port, f"127.0.0.1:{port}")
            assert status == 200, body
            if "cronlab_queue_depth" in body or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert "cronlab_queue_depth" in body
        assert headers["x-content-type-options"] == "nosniff"
        assert fetch(port, f"localhost:{port}")[0] == 200
        assert fetch(port, "localhost")[0] == 200
        for rebound in (f"evil.example:{port}", "evil.example", "127.0.0.1.evil.example", ""):
            status, _, body = fetch(port, rebound)
            assert status == 400 and "cronlab_" not in body, (rebound, status)
        assert fetch(port, f"127.0.0.1:{port}", method="POST")[0] == 405
        assert fetch(port, f"127.0.0.1:{port}", path="/")[0] == 404


def test_a_metrics_port_off_loopback_needs_a_token(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    env = {k: v for k, v in os.environ.items() if k != "CRONLAB_METRICS_TOKEN"}
    argv = ["worker", "--store", f"sqlite:///{db}", "--metrics-host", "0.0.0.0"]
    done = subprocess.run(
        [sys.executable, "-m", "cronlab", *argv, "--metrics-port", str(free_port())],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == "", done.stderr[-500:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "CRONLAB_METRICS_TOKEN" in lines[0], done.stderr[-500:]
    assert not db.exists()


def test_with_a_token_every_scrape_must_carry_it(tmp_path: Path) -> None:
    with serving(tmp_path, "worker", "--metrics-host", "0.0.0.0", token=TOKEN) as port:
        here = f"127.0.0.1:{port}"
        assert fetch(port, here)[0] == 403
        assert fetch(port, here, Authorization="Bearer nope")[0] == 403
        status, _, body = fetch(port, here, Authorization=f"Bearer {TOKEN}")
        assert status == 200 and "cronlab_queue_depth" in body
        assert fetch(port, f"metrics.example:{port}", X_Cronlab_Token=TOKEN)[0] == 200
        assert TOKEN not in fetch(port, here)[2]


def test_the_help_names_the_token_variable() -> None:
    done = cronlab("worker", "--help")
    assert "CRONLAB_METRICS_TOKEN" in " ".join(done.stdout.split())
