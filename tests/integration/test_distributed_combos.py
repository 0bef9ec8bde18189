"""Any combination of store, election and queue runs a real cluster to the same result: every
invoice exactly once, nothing left PENDING, nothing left in the queue."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from contract.dist_servers import ETCD, REDIS, START_ETCD, START_REDIS, need, pg_database
from cronlab import distributed
from cronlab.clock import SystemClock
from cronlab.election.etcd import parse_url, ping
from cronlab.lab import report
from cronlab.queues.redis import connect, stream_keys
from cronlab.queues.redis import parse_url as parse_redis

from .test_distributed_chaos import Dist, cluster, cronlab, wait_until

pytestmark = pytest.mark.integration
COMBOS = [
    pytest.param(("sqlite", "etcd", "redis"), marks=[pytest.mark.etcd, pytest.mark.redis]),
    pytest.param(("sqlite", "lease", "redis"), marks=pytest.mark.redis),
    pytest.param(("postgres", "lease", "store"), marks=pytest.mark.postgres),
    pytest.param(("postgres", "lease", "redis"), marks=[pytest.mark.postgres, pytest.mark.redis]),
    pytest.param(("postgres", "etcd", "store"), marks=[pytest.mark.postgres, pytest.mark.etcd]),
]


@pytest.fixture
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    store, election, queue = request.param
    tag = uuid.uuid4().hex[:10]
    election_url = f"{ETCD}/cronlab-it-{tag}" if election == "etcd" else "lease"
    queue_url = f"{REDIS}?prefix=cronlab-it-{tag}" if queue == "redis" else ""
    if election == "etcd":
        need(lambda: ping(parse_url(election_url)), START_ETCD)
    if queue_url:
        need(lambda: connect(parse_redis(queue_url)).close(), START_REDIS)
    with ExitStack() as stack:
        store_url = (
            stack.enter_context(pg_database())
            if store == "postgres"
            else f"sqlite:///{tmp_path / 'combo.db'}"
        )
        yield store_url, election_url, queue_url
    if queue_url:
        connect(parse_redis(queue_url)).delete(*stream_keys(f"cronlab-it-{tag}"))


def open_reader(url: str) -> Any:
    return distributed.store_for(url, create=False)


@pytest.mark.parametrize("urls", COMBOS, indirect=True)
def test_every_combination_runs_every_invoice_once(urls: tuple[str, str, str]) -> None:
    store_url, election_url, queue_url = urls
    cronlab("invoices", "seed", "--store", store_url, "--count", "1500", "--at", "+2")
    store = open_reader(store_url)
    d = Dist(store_url, election_url, queue_url)
    flags = ["--replicas", "2", "--workers", "2", "--lease-ttl", "3"]
    with cluster(d, *flags):
        wait_until(lambda: store.counts()["DONE"] == 1500, 60, "every invoice")
        if queue_url:
            wait_until(
                lambda: (
                    connect(parse_redis(queue_url)).xlen(f"{parse_redis(queue_url).prefix}:tasks")
                    == 0
                ),
                20,
                "an empty stream",
            )
    r = report.measure(store, SystemClock().now_ms())
    assert (r.tasks["DONE"], r.tasks["PENDING"], r.duplicate_invoices) == (1500, 0, 0)
    assert r.executed == 1500 and store.queue_depth() == 0
    store.close()
