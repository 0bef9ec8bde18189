"""A password typed on the command line (issue 28, item 9): ``cronlab cluster --store
postgresql://u:PASSWORD@…`` kept it in the parent's own ``/proc/PID/cmdline`` for as long as
the cluster ran (``ps -ef`` showed it to every user of the host; its children were clean).

cronlab refuses it, with the variable that carries it instead: a title rewritten after start-up
leaves it readable until then, and to anything that records each exec's argv (audit logs,
process monitors) for good. Given in the environment, no process's argv holds it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from contract.dist_servers import pg_database

from .conftest import stop_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""


def children(pid: int) -> list[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in found.read_text().split()] if found.exists() else []


def with_password(url: str, secret: str) -> str:
    """The test server trusts local connections: a password is carried, not checked."""
    return url.replace("//postgres@", f"//postgres:{secret}@")


@pytest.mark.parametrize(
    ("flag", "variable"),
    [
        ("--store", "CRONLAB_STORE"),
        ("--queue", "CRONLAB_QUEUE"),
    ],
)
def test_a_password_typed_on_the_command_line_is_refused_naming_the_variable(
    flag: str, variable: str, tmp_path: Path
) -> None:
    secret = f"hunter2-{uuid.uuid4().hex[:8]}"
    typed = {
        "--store": "postgresql://postgres:{}@127.0.0.1:5432/x",
        "--queue": "redis://:{}@127.0.0.1:6379/0",
    }[flag].format(secret)
    with pg_database() as url:
        store = with_password(url, secret) if flag == "--store" else url
        argv = ["cluster", "--replicas", "1", "--workers", "1", "--store", store]
        if flag != "--store":
            argv += [flag, typed]
        proc = subprocess.Popen(
            [sys.executable, "-m", "cronlab", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            shown = cmdline(proc.pid)
            stop_cluster(proc)  # type: ignore[arg-type]
            assert secret.encode() not in shown, f"the password stays in ps: {shown!r}"
            raise
    assert proc.returncode == 2 and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0] and "ps" in lines[0], err
    assert secret not in err


def test_a_password_in_the_environment_reaches_no_process_title(tmp_path: Path) -> None:
    secret = f"hunter2-{uuid.uuid4().hex[:8]}"
    with pg_database() as url:
        env = {**os.environ, "CRONLAB_STORE": with_password(url, secret)}
        argv = [sys.executable, "-m", "cronlab", "cluster", "--replicas", "1", "--workers", "1"]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            kids = wait_until(lambda: len(children(proc.pid)) == 2 and children(proc.pid), 30, "2")
            time.sleep(1)
            assert proc.poll() is None
            for pid in [proc.pid, *kids]:
                assert b"cronlab" in cmdline(pid) and secret.encode() not in cmdline(pid)
        finally:
            stop_cluster(proc)
