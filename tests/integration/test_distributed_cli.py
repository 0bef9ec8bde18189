"""The CLI with distributed backends: an unreachable or unknown server is one line, exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.acceptance


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cronlab", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (
            ["status", "--store", "postgresql://postgres:pw@127.0.0.1:1/x"],
            "postgresql://postgres@127.0.0.1:1/x unreachable",
        ),
        (
            ["scheduler", "--store", "sqlite:///{tmp}/s.db", "--election", "etcd://127.0.0.1:1"],
            "etcd etcd://127.0.0.1:1 unreachable",
        ),
        (
            ["worker", "--store", "sqlite:///{tmp}/s.db", "--queue", "redis://127.0.0.1:1"],
            "redis redis://127.0.0.1:1 unreachable",
        ),
        (
            ["scheduler", "--store", "sqlite:///{tmp}/s.db", "--election", "zk://h:2181"],
            "--election 'zk://h:2181'",
        ),
        (
            ["worker", "--store", "sqlite:///{tmp}/s.db", "--queue", "amqp://h"],
            "--queue 'amqp://h'",
        ),
        (["status", "--store", "mysql://h/db"], "unknown store scheme 'mysql'"),
    ],
)
def test_a_bad_or_unreachable_backend_is_one_line_naming_it(
    args: list[str], named: str, tmp_path: object
) -> None:
    done = run(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert done.returncode == 2
    assert done.stderr.startswith("cronlab: error: ") and named in done.stderr
    assert done.stderr.count("\n") == 1 and "pw" not in done.stderr
    assert "Traceback" not in done.stderr
