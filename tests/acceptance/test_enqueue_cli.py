"""``cronlab enqueue HANDLER --in|--at`` as a subprocess: a durable one-off timer."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from shell import cronlab

from cronlab.stores.sqlite import SqliteStore

pytestmark = pytest.mark.acceptance
DAY_MS = 86_400_000


def test_in_three_days_is_a_pending_task_due_then(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cron.db'}"
    before = time.time_ns() // 1_000_000
    out = cronlab(
        "enqueue",
        "invoice",
        "--payload",
        '{"customer": "c"}',
        "--in",
        "3d",
        "--store",
        url,
        "--json",
    )
    after = time.time_ns() // 1_000_000
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert before + 3 * DAY_MS <= data["due_ms"] <= after + 3 * DAY_MS and data["added"]
    store = SqliteStore(tmp_path / "cron.db", create=False)
    rows = store.query("SELECT idempotency_key, handler, payload, trigger_ms, status FROM tasks")
    assert rows == [(data["key"], "invoice", '{"customer": "c"}', data["due_ms"], "PENDING")]
    store.close()


def test_at_an_instant_and_a_key_make_a_retry_add_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cron.db'}"
    args = ("enqueue", "fail", "--at", "2026-11-01T09:00:00+01:00", "--key", "k1", "--store", url)
    first = json.loads(cronlab(*args, "--json").stdout)
    second = cronlab(*args)
    assert first == {
        "key": "k1",
        "handler": "fail",
        "due": "2026-11-01T08:00:00+00:00",
        "due_ms": 1_793_520_000_000,
        "added": True,
    }
    assert second.returncode == 0 and second.stdout.startswith("already there: k1")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("invoice",), ("exactly one of --in",)),
        (("invoice", "--in", "3d", "--at", "2026-11-01T09:00Z"), ("exactly one of --in",)),
        (("invoice", "--in", "3 days"), ("bad delay", "'3 days'")),
        (("invoice", "--at", "2026-11-01T09:00"), ("no UTC offset",)),
        (("invoice", "--in", "1h", "--payload", "{nope"), ("--payload", "not JSON")),
        (("bill", "--in", "1h"), ("unknown handler 'bill'",)),
    ],
)
def test_mistakes_are_one_line_and_write_nothing(
    tmp_path: Path, args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    out = cronlab("enqueue", *args, "--store", f"sqlite:///{tmp_path / 'cron.db'}")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("cronlab: error: ")
    for word in words:
        assert word in out.stderr
    assert not (tmp_path / "cron.db").exists()
