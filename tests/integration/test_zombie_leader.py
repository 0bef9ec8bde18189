"""A zombie leader on the real engine (issue 15): real processes, the leader caught by a real
SIGSTOP between reading its batch and writing it, resumed after its lease is gone.

With fencing (the engine as it ships) the store refuses its write: the batch it held shows as
fenced writes and nothing runs twice. With ``--fencing off`` (the anti-pattern flag) its write
goes through and workers run it: a duplicate execution of every task it held — the model's
number, min(batch, due)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cronlab.clock import SystemClock

from .conftest import cli_json, running_cluster, store_of, wait_until
from .test_engine_cluster import leader_of, scanned_by_all, settled

pytestmark = pytest.mark.integration

COUNT, TTL_S, PAUSE_S = 2_000, 2, 5


def zombie_run(url: str, *flags: str) -> dict[str, object]:
    # (a lab cluster: its schedulers honour mid-dispatch pause requests)
    cluster = running_cluster(
        url, "--replicas", "2", "--workers", "2", "--lease-ttl", str(TTL_S), *flags, lab=True
    )
    with cluster:
        wait_until(lambda: scanned_by_all(url, 2), 30, "the cluster to come up")
        wait_until(lambda: leader_of(url), 30, "a leader")
        seeded = cli_json("invoices", "seed", "--store", url, "--count", str(COUNT), "--at", "+2")
        pause = subprocess.run(
            [
                sys.executable,
                "-m",
                "cronlab",
                "chaos",
                "pause-leader",
                "--store",
                url,
                "--for",
                str(PAUSE_S),
                "--mid-dispatch",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert pause.returncode == 0, pause.stderr
        wait_until(lambda: settled(url, COUNT), 60, "every invoice to run")
        assert SystemClock().now_ms() > seeded["trigger_ms"]
    return cli_json("report", "--store", url)


def test_with_fencing_the_zombies_write_is_refused_and_nothing_runs_twice(url: str) -> None:
    r = zombie_run(url)
    assert (r["duplicates"], r["fenced_writes"], r["duplicate_invoices"]) == (0, COUNT, 0)
    assert r["dispatched"] == COUNT and len(r["takeover_delays_s"]) == 1
    kinds = [e.kind for e in store_of(url).events()]
    assert "paused_mid_dispatch" in kinds and "fenced" in kinds


def test_without_fencing_the_zombie_publishes_its_batch_and_it_runs_again(url: str) -> None:
    r = zombie_run(url, "--fencing", "off", "--no-idempotency")
    # the standby dispatched all COUNT; the zombie wrote the COUNT it held: each ran twice
    assert (r["dispatched"], r["duplicates"], r["fenced_writes"]) == (2 * COUNT, COUNT, 0)
    assert r["duplicate_invoices"] == COUNT
