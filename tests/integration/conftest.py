"""Helpers for process tests: the CLI as a real subprocess, a cluster that is always stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cronlab.stores.sqlite import SqliteStore


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -m cronlab ARGS`` as a real process."""
    done = subprocess.run(
        [sys.executable, "-m", "cronlab", *args], capture_output=True, text=True, timeout=120
    )
    if check and done.returncode != 0:
        raise AssertionError(f"cronlab {' '.join(args)} failed: {done.stderr}")
    return done


def cli_json(*args: str) -> Any:
    return json.loads(cli(*args, "--json").stdout)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``predicate`` until truthy (a liveness deadline, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@contextmanager
def running_cluster(url: str, *flags: str, lab: bool = False) -> Iterator[subprocess.Popen[bytes]]:
    """``cronlab cluster`` (``lab``: ``cronlab lab cluster``, which takes the anti-patterns'
    flags) in the background; SIGINT and wait on exit (SIGKILL as a last resort)."""
    command = ["lab", "cluster"] if lab else ["cluster"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronlab", *command, "--store", url, *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        stop_cluster(proc)
        _reap_children(url)


def stop_cluster(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT the cluster and wait for its clean stop; SIGKILL only as a last resort."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _reap_children(url: str) -> None:
    # The cluster stops its children; if it could not, never leave them running.
    if not Path(url.removeprefix("sqlite:///")).exists():
        return
    store = SqliteStore(Path(url.removeprefix("sqlite:///")), create=False)
    for p in store.processes():
        try:
            if b"cronlab" in Path(f"/proc/{p.pid}/cmdline").read_bytes():
                os.kill(p.pid, signal.SIGKILL)
        except OSError:
            pass
    store.close()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'engine.db'}"


def store_of(url: str) -> SqliteStore:
    return SqliteStore(Path(url.removeprefix("sqlite:///")), create=False)
