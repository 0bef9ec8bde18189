"""Two clusters on one store (issue 13): ``status`` showed one cluster's processes (the second
had overwritten the registry's rows, keyed by role and index) and "leader: replica None (pid
None)" when the leader was the first cluster's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cronlab.runtime.proc import alive

from .conftest import cli, running_cluster, wait_until

pytestmark = pytest.mark.integration
SMALL = ("--replicas", "2", "--workers", "1", "--lease-ttl", "3")


def test_status_shows_both_clusters_and_the_leader_it_holds(url: str) -> None:
    with running_cluster(url, *SMALL) as first:
        lead = wait_until(lambda: status(url).get("leader"), 30, "the first cluster's leader")
        with running_cluster(url, *SMALL) as second:
            wait_until(lambda: len(live(url)) == 6, 30, "both clusters' 6 processes listed")
            data = status(url)
            assert data["leader"]["holder"] == lead["holder"]
            leader = next(p for p in data["processes"] if p["owner"] == lead["holder"])
            assert (data["leader"]["replica"], data["leader"]["pid"]) == (
                leader["index"],
                leader["pid"],
            )
            slots = sorted((p["role"], p["index"]) for p in live(url))
            assert slots == [("scheduler", 0)] * 2 + [("scheduler", 1)] * 2 + [("worker", 0)] * 2
            assert {first.pid, second.pid} == {_parent(p["pid"]) for p in live(url)}
            text = cli("status", "--store", url).stdout
            assert f"leader: replica {leader['index']} (pid {leader['pid']}" in text
            assert "None" not in text, text


def status(url: str) -> dict[str, Any]:
    """``status --json``; empty until the first cluster has created the store."""
    done = cli("status", "--store", url, "--json", check=False)
    data: dict[str, Any] = json.loads(done.stdout) if done.returncode == 0 else {}
    return data


def live(url: str) -> list[dict[str, Any]]:
    return [p for p in status(url).get("processes", []) if p["alive"] and alive(p["pid"])]


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def test_a_sigkilled_clusters_processes_are_not_listed_after_the_next_one_starts(url: str) -> None:
    """Nobody records the exits of a SIGKILLed cluster's children (they die by PDEATHSIG): the
    next cluster on this host marks them exited, and its own start replaces their rows."""
    with running_cluster(url, *SMALL) as first:
        wait_until(lambda: len(live(url)) == 3, 30, "the first cluster's 3 processes")
        first.kill()
        wait_until(lambda: not live(url), 15, "the first cluster's children gone")
    with running_cluster(url, *SMALL):
        wait_until(lambda: len(live(url)) == 3, 30, "the second cluster's 3 processes")
        assert len(status(url)["processes"]) == 3, status(url)["processes"]
