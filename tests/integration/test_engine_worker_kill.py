"""A worker SIGKILLed mid-batch: its deliveries come back after the visibility timeout and run
again; the invoice key keeps the effect exactly once, and the report counts them as
redelivered, not duplicated (issue 29, item 9: it counted each twice — a duplicate and a
redelivery — where the lab's model, for effects in ctx.tx, shows none)."""

from __future__ import annotations

import pytest

from cronlab.clock import SystemClock
from cronlab.lab import chaos

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
                store.own(
                    "SELECT worker FROM queue WHERE receives > 0 AND invisible_until_ms > ? LIMIT 1"
                ),
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
    abandoned = store.query(store.own("SELECT sum(receive - 1) FROM executions"))[0][0]
    assert abandoned > 0
    lost = store.query(store.own("SELECT count(*) FROM executions WHERE error LIKE 'LostRun%'"))[0][
        0
    ]
    assert lost == abandoned
    assert r["abandoned_deliveries"] == abandoned == r["redelivered"]
    assert r["duplicates"] == 0 and r["executed"] == 300


def test_a_lab_worker_asked_to_die_mid_batch_holds_its_batch_and_it_comes_back(url: str) -> None:
    """``cronlab chaos kill-worker --mid-batch`` (what the lab's live page sends): the worker of
    a lab cluster kills itself right after it claims a batch, so the kill lands where the
    lesson says; a plain SIGKILL mostly lands between batches (the lab measured 0 redelivered
    against its model's 60). Every task it held is redelivered, none duplicated."""
    flags = ("--replicas", "1", "--workers", "1", "--worker-batch", "40", "--visibility", "2")
    with running_cluster(url, *flags, "--restart-after", "1", lab=True):
        wait_until(lambda: scanned_by_all(url, 1), 30, "the cluster to come up")
        cli("invoices", "seed", "--store", url, "--count", "300", "--at", "+0", "--work-ms", "5")
        store, clock = store_of(url), SystemClock()
        event = chaos.kill_worker(store, clock, 0, mid_batch=True)
        assert event.detail["mid_batch"] is True
        (died,) = [e for e in store.events() if e.kind == "killed_mid_batch"]
        held = int(died.detail["held"])
        assert held > 0
        wait_until(lambda: settled(url, 300), 60, "every task to finish")  # (restarted: 1 s)
    r = cli_json("report", "--store", url)
    assert r["tasks"]["DONE"] == 300 and r["duplicate_invoices"] == 0
    assert (r["redelivered"], r["duplicates"], r["executed"]) == (held, 0, 300)
