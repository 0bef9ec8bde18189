"""``cronlab`` as a user runs it from a shell: a subprocess, its output captured."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

PG = os.environ.get("CRONLAB_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def cronlab(
    *args: str, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cronlab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )


def need_pg(url: str = PG) -> None:
    """Skip when the PostgreSQL server is down; fail instead under CI=true (as tests/contract
    does)."""
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{exc} (CI=true: the server must be up)")
        pytest.skip(f"PostgreSQL is down: {exc}")


def run_until(
    args: Sequence[str], cwd: Path, done: Callable[[], bool], timeout_s: float = 30
) -> tuple[int, str]:
    """``cronlab ARGS`` in ``cwd`` until ``done()`` holds (polled; ``timeout_s`` at most), then
    SIGTERM: its exit code and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronlab", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not done():
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err
