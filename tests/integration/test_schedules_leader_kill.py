"""An every-second schedule on a real cluster keeps firing exactly once per slot across a
leader SIGKILL: no slot twice, and the slots that fell due during the takeover are caught up.

Real processes: ``cronlab cluster --app jobs:app`` (2 scheduler replicas, 1 worker, 2 s lease)
started from a directory holding the user's ``jobs.py``; the handler writes each run in the
worker's transaction, so the ``fires`` table is exactly what ran.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cronlab.clock import SystemClock
from cronlab.lab import chaos
from cronlab.stores.sqlite import SqliteStore

from .conftest import _reap_children, stop_cluster, wait_until

pytestmark = pytest.mark.integration

JOBS = """
import cronlab

app = cronlab.App("{url}")


@app.cron("* * * * * *", name="every-second", catchup="all", overlap="allow")
@app.task(name="tick")
def tick(ctx):
    ctx.tx.execute("INSERT INTO fires (fire_ms, run_ms) VALUES (?, ?)",
                   (ctx.scheduled_ms, ctx.now_ms))
"""


@contextmanager
def cluster_in(workdir: Path, url: str, *flags: str) -> Iterator[subprocess.Popen[bytes]]:
    """``cronlab cluster --app jobs:app`` started in ``workdir``; always stopped."""
    log = (workdir / "cluster.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronlab", "cluster", "--store", url, "--app", "jobs:app", *flags],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        yield proc
    finally:
        log.close()
        stop_cluster(proc)
        _reap_children(url)


def fires(store: SqliteStore) -> list[int]:
    return [r[0] for r in store.query("SELECT fire_ms FROM fires ORDER BY fire_ms")]


def test_every_second_schedule_fires_once_per_slot_across_a_leader_kill(tmp_path: Path) -> None:
    db = tmp_path / "cron.db"
    url = f"sqlite:///{db}"
    store = SqliteStore(db)
    store.query("CREATE TABLE fires (fire_ms INTEGER NOT NULL, run_ms INTEGER NOT NULL)")
    (tmp_path / "jobs.py").write_text(JOBS.format(url=url))
    flags = ("--replicas", "2", "--workers", "1", "--lease-ttl", "2", "--scan-interval", "0.2")
    with cluster_in(tmp_path, url, *flags, "--restart-after", "never") as proc:
        wait_until(lambda: len(fires(store)) >= 3 or proc.poll() is not None, 40, "three fires")
        assert proc.poll() is None, (tmp_path / "cluster.log").read_text()
        killed = chaos.crash_leader(store, SystemClock())  # returns once the leader is dead
        killed_ms = killed.at_ms
        dead_ms = time.time_ns() // 1_000_000
        wait_until(lambda: fires(store)[-1] >= killed_ms + 6_000, 40, "fires after the takeover")
        leaders = [e for e in store.events() if e.kind == "acquire"]
    ran = fires(store)
    twice = {f: n for f, n in Counter(ran).items() if n > 1}
    assert twice == {}, f"slots that ran twice: {twice}"
    slots = list(range(ran[0], ran[-1] + 1, 1_000))
    assert ran == slots, f"slots missing: {sorted(set(slots) - set(ran))}"
    assert ran[0] < killed_ms and ran[-1] > killed_ms + 5_000  # the takeover gap is inside
    assert len({e.epoch for e in leaders}) >= 2 and killed.pid not in {None, os.getpid()}
    taken = min(e.at_ms for e in leaders if e.epoch > killed.epoch)
    # Every slot due after the old leader died waited for the new leader, then ran: the
    # takeover gap (dead → acquire) was caught up, not skipped.
    gap = store.query("SELECT min(run_ms) FROM fires WHERE fire_ms > ?", (dead_ms,))
    assert gap[0][0] >= taken
    info = store.get_schedule("every-second")
    assert info.last_outcome in ("DONE", "DISPATCHED") and info.schedule.catchup == "all"
    store.close()
