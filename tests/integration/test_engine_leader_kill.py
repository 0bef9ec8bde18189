"""The leader SIGKILLed while it dispatches 20,000 invoices (TTL 10 s): every invoice once."""

from __future__ import annotations

import pytest

from cronlab.clock import SystemClock
from cronlab.lab import chaos

from .conftest import cli, cli_json, running_cluster, store_of, wait_until
from .test_engine_cluster import leader_of, scanned_by_all, settled

pytestmark = pytest.mark.integration


def test_leader_killed_while_dispatching_every_invoice_once(url: str) -> None:
    ttl = 10
    flags = ("--lease-ttl", str(ttl), "--restart-after", "never", "--scan-batch", "200")
    with running_cluster(url, *flags):
        wait_until(lambda: scanned_by_all(url, 3), 30, "the cluster to come up")
        first = leader_of(url)
        assert first is not None
        cli("invoices", "seed", "--store", url, "--count", "20000", "--at", "+3")
        store, clock = store_of(url), SystemClock()

        seen: list[int] = []

        def dispatching() -> dict[str, int] | None:
            c = store.counts()
            seen.append(c["PENDING"])
            return c if c["PENDING"] < 20_000 and c["PENDING"] > 0 else None

        try:
            at_kill = wait_until(dispatching, 40, "the leader to be mid-dispatch")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; PENDING seen: {sorted(set(seen))}") from None
        chaos.crash_leader(store, clock)
        second = wait_until(
            lambda: (lead := leader_of(url)) and lead["epoch"] != first["epoch"] and lead,
            40,
            "a takeover",
        )
        wait_until(lambda: settled(url, 20_000), 60, "every task to finish")
    r = cli_json("report", "--store", url)
    assert 0 < at_kill["PENDING"] < 20_000
    assert second["replica"] != first["replica"]
    assert r["tasks"]["DONE"] == 20_000 and r["tasks"]["PENDING"] == 0
    assert (r["executed"], r["duplicates"], r["duplicate_invoices"]) == (20_000, 0, 0)
    assert store.query("SELECT count(DISTINCT customer || period) FROM invoices")[0][0] == 20_000
    epochs = dict(store.query(store.own("SELECT epoch, count(*) FROM tasks GROUP BY epoch")))
    assert set(epochs) == {first["epoch"], second["epoch"]}
    (delay,) = r["takeover_delays_s"]
    assert 0 < delay <= ttl + 2
