"""The cluster as real OS processes on a real SQLite file, hit with real signals.

Timing-robust by construction: workloads are seeded once the cluster is up, and faults are
triggered on observed state (a leader exists, dispatching has begun), not on sleeps.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cronlab.clock import SystemClock
from cronlab.exceptions import ConfigError
from cronlab.runtime.proc import alive

from .conftest import cli, cli_json, running_cluster, store_of, wait_until

pytestmark = pytest.mark.integration


def leader_of(url: str) -> dict[str, object] | None:
    lead: dict[str, object] | None = cli_json("status", "--store", url)["leader"]
    return lead


def counts(url: str) -> dict[str, int]:
    # Polled in-process: a CLI process per poll would steal the cluster's two cores.
    store = store_of(url)
    try:
        return store.counts() | {"queue": store.queue_depth()}
    finally:
        store.close()


def settled(url: str, total: int) -> bool:
    c = counts(url)
    return c["DONE"] + c["FAILED"] + c["MISSED"] == total and c["queue"] == 0


def scanned_by_all(url: str, replicas: int) -> bool:
    """Every replica is up (the leader, or every replica with --election off, samples)."""
    try:
        store = store_of(url)
    except ConfigError:  # the cluster has not created (or not yet migrated) its store
        return False
    try:
        procs = [p for p in store.processes() if p.role == "scheduler" and alive(p.pid)]
        return (
            len(procs) == replicas
            and store.query(store.own("SELECT count(*) FROM samples"))[0][0] > 0
        )
    finally:
        store.close()


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_paused_leader_resumes_fenced_without_duplicate_dispatch(url: str) -> None:
    ttl = 2
    with running_cluster(url, "--lease-ttl", str(ttl), "--replicas", "2", "--workers", "2"):
        wait_until(lambda: scanned_by_all(url, 2), 30, "the cluster to come up")
        first = leader_of(url)
        assert first is not None
        pause = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cronlab",
                "chaos",
                "pause-leader",
                "--for",
                "5",
                "--store",
                url,
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            wait_until(lambda: _stopped(int(str(first["pid"]))), 20, "the leader to stop")
            cli("invoices", "seed", "--store", url, "--count", "3000", "--at", "+0.5")
            wait_until(lambda: counts(url)["DONE"] == 3000, 30, "the standby to dispatch")
            assert pause.wait(timeout=30) == 0
        finally:
            pause.kill()
            pause.wait()
        wait_until(lambda: settled(url, 3000), 30, "every task to finish")
        after = wait_until(lambda: leader_of(url), 10, "a leader after the resume")
    store = store_of(url)
    r = cli_json("report", "--store", url)
    assert (r["dispatched"], r["duplicates"], r["duplicate_invoices"]) == (3000, 0, 0)
    assert after["epoch"] > first["epoch"]
    assert store.query(store.own("SELECT DISTINCT epoch FROM tasks")) == [(first["epoch"] + 1,)]
    acquires = [e for e in store.events() if e.kind == "acquire"]
    assert [e.epoch for e in acquires] == list(range(1, len(acquires) + 1))
    (delay,) = r["takeover_delays_s"]
    assert delay <= ttl + 2


def test_election_off_duplicates_and_no_idempotency_duplicates_invoices(url: str) -> None:
    lab = ("--election", "off", "--no-idempotency", "--workers", "2")
    with running_cluster(url, *lab, lab=True):
        wait_until(lambda: scanned_by_all(url, 3), 30, "the cluster to come up")
        seeded = cli_json("invoices", "seed", "--store", url, "--count", "3000", "--at", "+1")
        clock = SystemClock()
        # Every replica sends its own copy at its first scan after the trigger; then the queue.
        wait_until(lambda: clock.now_ms() > seeded["trigger_ms"] + 2_500, 10, "the copy window")
        wait_until(lambda: settled(url, 3000), 60, "every copy to run")
    r = cli_json("report", "--store", url)
    # Cron on every replica: each of the three copies every task, whatever the others did —
    # exactly due × (replicas − 1), the model's number (it was 3,000..6,000 before, by timing).
    assert (r["dispatched"], r["duplicates"]) == (3 * 3000, 2 * 3000)
    assert r["duplicate_invoices"] == r["duplicates"]


def test_in_memory_timers_miss_what_falls_due_in_the_takeover_gap(url: str) -> None:
    flags = (
        "--timers",
        "in-memory",
        "--lease-ttl",
        "4",
        "--replicas",
        "2",
        "--workers",
        "1",
        "--restart-after",
        "never",
    )
    with running_cluster(url, *flags, lab=True):
        wait_until(lambda: scanned_by_all(url, 2), 30, "the cluster to come up")
        cli("chaos", "crash-leader", "--store", url)
        cli("invoices", "seed", "--store", url, "--count", "500", "--at", "+0.5")
        wait_until(lambda: settled(url, 500), 30, "the new leader to settle the bucket")
    r = cli_json("report", "--store", url)
    assert r["missed"] == 500 and r["executed"] == 0
    assert any(e.kind == "missed" for e in store_of(url).events())


def test_a_crashed_replica_is_restarted_after_restart_after(url: str) -> None:
    with running_cluster(url, "--replicas", "2", "--workers", "1", "--restart-after", "1"):
        wait_until(lambda: scanned_by_all(url, 2), 30, "the cluster to come up")
        store = store_of(url)
        (old,) = [p for p in store.processes() if (p.role, p.index) == ("scheduler", 1)]
        cli("chaos", "crash-replica", "1", "--store", url)

        def restarted() -> bool:
            (now,) = [p for p in store.processes() if (p.role, p.index) == ("scheduler", 1)]
            return now.pid != old.pid and now.exited_ms is None and alive(now.pid)

        wait_until(restarted, 20, "replica 1 to be started again")
    kinds = [e.kind for e in store.events()]
    assert "crash" in kinds and "exit" in kinds


def test_the_children_die_with_a_cluster_killed_outright(url: str) -> None:
    """Issue 13: SIGKILL of the cluster left its schedulers and workers running, orphaned."""
    with running_cluster(url, "--replicas", "2", "--workers", "1") as proc:
        wait_until(lambda: scanned_by_all(url, 2), 30, "the cluster to come up")
        pids = [p.pid for p in store_of(url).processes() if p.exited_ms is None]
        assert len(pids) == 3 and all(alive(pid) for pid in pids)
        proc.kill()
        proc.wait()
        wait_until(lambda: not any(alive(pid) for pid in pids), 15, "the children to exit")


def test_a_cluster_whose_store_file_is_deleted_stops_and_says_so(url: str) -> None:
    """Issue 13: the store file deleted under a running cluster, it ran on silently."""
    path = Path(url.removeprefix("sqlite:///"))
    with running_cluster(url, "--replicas", "1", "--workers", "1") as proc:
        wait_until(lambda: scanned_by_all(url, 1), 30, "the cluster to come up")
        pids = [p.pid for p in store_of(url).processes() if p.exited_ms is None]
        for f in path.parent.glob(path.name + "*"):
            f.unlink()
        wait_until(lambda: proc.poll() is not None, 15, "the cluster to stop")
        assert proc.returncode == 2
        assert not any(alive(pid) for pid in pids)
