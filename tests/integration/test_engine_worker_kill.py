"""A worker SIGKILLed mid-batch: its deliveries come back after the visibility timeout and run
again; the invoice key keeps the effect exactly once."""

from __future__ import annotations

import pytest

from cronlab.runtime import chaos
from cronlab.runtime.clock import SystemClock

from .conftest import cli, cli_json, running_cluster, store_of, wait_until
from .test_engine_cluster import scanned_by_all, settled

pytestmark = pytest.mark.integration


def test_worker_killed_mid_batch_its_tasks_run_again_exactly_once_in_effect(url: str) -> None:
    flags = (
        "--replicas",
        "1",
        "--workers",
        "2",
        "--worker-batch",
        "40",
        "--visibility",
        "2",
        "--restart-after",
        "never",
    )
    with running_cluster(url, *flags):
        wait_until(lambda: scanned_by_all(url, 1), 30, "the cluster to come up")
        cli("invoices", "seed", "--store", url, "--count", "300", "--at", "+0", "--work-ms", "20")
        store, clock = store_of(url), SystemClock()

        def busy_worker() -> int | None:
            # A worker holding claimed, unacked messages is mid-batch.
            rows = store.query(
                "SELECT worker FROM queue WHERE receives > 0 AND invisible_until_ms > ? LIMIT 1",
                (clock.now_ms(),),
            )
            return int(rows[0][0].split("@")[0].split("-")[1]) + 1 if rows else None

        index = wait_until(busy_worker, 30, "a worker mid-batch") - 1
        event = chaos.kill_worker(store, clock, index)
        wait_until(lambda: settled(url, 300), 60, "every task to finish")
    r = cli_json("report", "--store", url)
    assert event.kind == "kill-worker"
    assert r["tasks"]["DONE"] == 300 and r["duplicate_invoices"] == 0
    assert store.query("SELECT count(*) FROM invoices")[0][0] == 300
    # The killed worker's batch was delivered again: each delivery that came back is recorded
    # as the lost attempt it stands for (LostRun), and its retry ran.
    abandoned = store.query("SELECT sum(receive - 1) FROM executions")[0][0]
    assert abandoned > 0
    lost = store.query("SELECT count(*) FROM executions WHERE error LIKE 'LostRun%'")[0][0]
    assert lost == abandoned
    assert r["abandoned_deliveries"] == abandoned
    assert r["duplicates"] == abandoned and r["executed"] == 300
