"""``status`` tells the truth about what the registry and the lease say (issue 13): the leader
by the lease's holder even when the registry does not list it, and no liveness guessed for a
process on another host."""

from __future__ import annotations

import os
import socket

import pytest

from cronlab.cli import observe
from cronlab.clock import SystemClock
from cronlab.ports import ProcessInfo
from cronlab.runtime import cluster
from cronlab.stores.memory import MemoryStore


def test_a_leader_the_registry_does_not_list_is_named_by_its_holder(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: "leader: replica None (pid None)"."""
    store = MemoryStore()
    holder = cluster.identity("scheduler", 2, host="elsewhere", pid=777, nonce="ab12")
    assert store.lease_cas(holder, SystemClock().now_ms(), 60_000) is not None
    data = observe.status(store)
    assert {k: data["leader"][k] for k in ("holder", "replica", "pid", "registered")} == {
        "holder": holder,
        "replica": 2,
        "pid": 777,
        "registered": False,
    }
    observe._print_status(data)
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("leader: replica 2 (pid 777), epoch 1") and "None" not in line


def test_a_holder_of_another_shape_is_shown_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    store = MemoryStore()
    assert store.lease_cas("my-own-scheduler", SystemClock().now_ms(), 60_000) is not None
    observe._print_status(observe.status(store))
    assert capsys.readouterr().out.startswith("leader: my-own-scheduler, epoch 1")


def test_a_process_on_another_host_is_not_judged_by_this_hosts_pids() -> None:
    store = MemoryStore()
    here = socket.gethostname()
    for host in (here, "elsewhere"):
        owner = cluster.identity("worker", 0, host=host, pid=os.getpid(), nonce="x")
        store.register_process(
            ProcessInfo(role="worker", index=0, pid=os.getpid(), owner=owner, started_ms=1)
        )
    rows = {p["host"]: p["alive"] for p in observe.status(store)["processes"]}
    assert rows == {here: False, "elsewhere": None}  # here, this pid is pytest: not cronlab


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("scheduler-0@vm:12:ab", cluster.Identity(role="scheduler", index=0, host="vm", pid=12)),
        ("worker-3@h:o:st:9:n", cluster.Identity(role="worker", index=3, host="h:o:st", pid=9)),
        ("worker-0@42", None),  # cronlab 0.1's names
        ("leader", None),
        ("worker-²@h:1:n", None),
    ],
)
def test_parse_identity(name: str, parsed: cluster.Identity | None) -> None:
    assert cluster.parse_identity(name) == parsed
