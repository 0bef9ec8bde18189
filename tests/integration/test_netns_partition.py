"""Replicas on separate "hosts": the leader runs in a network namespace of its own, reaching
PostgreSQL and etcd over two veth links. Cutting its etcd link (PostgreSQL still reachable):
a standby takes over with a higher epoch, and a write carrying the cut-off leader's epoch is
refused by the store (fenced). Every invoice exactly once.

Needs root and ``ip netns``; skips with the reason when the machine does not allow it.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cronlab.clock import SystemClock
from cronlab.election.etcd import EtcdElector, parse_url
from cronlab.stores.postgres import PostgresStore

from .test_distributed_chaos import cronlab, done, wait_until
from .test_distributed_restart import OwnPostgres

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.etcd]
CLOCK = SystemClock()


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@dataclass
class Host:
    """A namespace with a link to PostgreSQL (10.77.N.0/30) and one to etcd (10.78.N.0/30)."""

    ns: str
    n: int

    @property
    def pg_addr(self) -> str:
        return f"10.77.{self.n}.1"

    @property
    def etcd_addr(self) -> str:
        return f"10.78.{self.n}.1"

    def link(self, net: int, tag: str) -> None:
        outer, inner = f"cl{tag}{self.n}a", f"cl{tag}{self.n}b"
        ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        ip("link", "set", inner, "netns", self.ns)
        ip("addr", "add", f"10.{net}.{self.n}.1/30", "dev", outer)
        ip("link", "set", outer, "up")
        ip("-n", self.ns, "addr", "add", f"10.{net}.{self.n}.2/30", "dev", inner)
        ip("-n", self.ns, "link", "set", inner, "up")

    def cut_etcd(self) -> None:
        ip("-n", self.ns, "link", "set", f"cle{self.n}b", "down")

    def run(self, *cmd: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *cmd]


@pytest.fixture
def host() -> Iterator[Host]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("network namespaces need root and iproute2")
    h = Host(ns=f"cronlab-{uuid.uuid4().hex[:6]}", n=random.randint(1, 250))
    try:
        ip("netns", "add", h.ns)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"ip netns add is not allowed here: {exc.stderr.decode().strip()}")
    try:
        ip("-n", h.ns, "link", "set", "lo", "up")
        h.link(77, "p")
        h.link(78, "e")
        yield h
    finally:
        subprocess.run(["ip", "netns", "del", h.ns], capture_output=True, timeout=10)


@pytest.fixture
def pg(host: Host) -> Iterator[OwnPostgres]:
    pg = OwnPostgres(addresses=f"127.0.0.1,{host.pg_addr}")
    pg.start()
    yield pg
    pg.remove()


@pytest.fixture
def etcd(host: Host, tmp_path: Path) -> Iterator[str]:
    if not shutil.which("etcd"):
        pytest.skip("etcd is not installed: bash scripts/setup.sh")
    client, peer = f"http://{host.etcd_addr}:2379", f"http://127.0.0.1:{20000 + host.n}"
    proc = subprocess.Popen(
        [
            "etcd",
            "--name",
            "ns",
            "--data-dir",
            str(tmp_path / "etcd"),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            f"ns={peer}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"etcd://{host.etcd_addr}:2379/netns"
    try:
        wait_until(lambda: _etcd_up(url), 20, "the namespace etcd")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _etcd_up(url: str) -> bool:
    try:
        EtcdElector(parse_url(url), CLOCK, timeout_s=1).current()
    except Exception:
        return False
    return True


FENCED_WRITE = """
import sys
from cronlab.exceptions import FencedError
from cronlab.stores.postgres import PostgresStore
store = PostgresStore(sys.argv[1], fencing="epoch")
try:
    store.dispatch_due(10**15, 100, int(sys.argv[2]))
    print("written")
except FencedError as exc:
    print("fenced:", exc)
"""


def test_a_leader_cut_off_from_etcd_is_replaced_and_fenced(
    host: Host, pg: OwnPostgres, etcd: str
) -> None:
    store_url = f"postgresql://postgres@{host.pg_addr}:{pg.port}/postgres"
    cronlab("invoices", "seed", "--store", store_url, "--count", "2000", "--at", "+3")
    cronlab("invoices", "seed", "--store", store_url, "--count", "2000", "--at", "+14")
    cronlab("invoices", "seed", "--store", store_url, "--count", "100", "--at", "+100000")
    common = ["--store", store_url, "--election", etcd, "--lease-ttl", "3"]
    py = [sys.executable, "-m", "cronlab"]
    leader = subprocess.Popen(host.run(*py, "scheduler", *common, "--replica", "0"))
    procs = [leader]
    try:
        elector = EtcdElector(parse_url(etcd), CLOCK)
        first = wait_until(elector.current, 20, "the namespaced replica to lead")
        assert "scheduler-0@" in first.holder
        procs.append(subprocess.Popen([*py, "scheduler", *common, "--replica", "1"]))
        procs.append(subprocess.Popen([*py, "worker", "--store", store_url, "--visibility", "5"]))
        store = PostgresStore(store_url, fencing="epoch")
        wait_until(lambda: store.counts()["DONE"] >= 2000, 30, "the first bucket")
        host.cut_etcd()
        second = wait_until(
            lambda: (c := elector.current()) and c.epoch > first.epoch and c, 20, "a takeover"
        )
        assert "scheduler-1@" in second.holder
        wait_until(lambda: done(store, 4000), 40, "the second bucket under the new leader")
        attempt = subprocess.run(
            host.run(sys.executable, "-c", FENCED_WRITE, store_url, str(first.epoch)),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert attempt.stdout.startswith("fenced:"), attempt.stdout + attempt.stderr
        assert leader.poll() is None  # the cut-off leader is alive, just no longer leading
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    counts = store.counts()
    assert (counts["DONE"], counts["PENDING"]) == (4000, 100)  # the fenced write claimed none
    second_bucket = store.query(
        store.own(
            "SELECT DISTINCT epoch FROM tasks WHERE status = 'DONE' AND trigger_ms > "
            "(SELECT min(trigger_ms) + 5000 FROM tasks)"
        )
    )
    assert second_bucket == [(second.epoch,)]
    assert store.query("SELECT count(DISTINCT (customer, period)) FROM invoices")[0][0] == 4000
    assert store.query("SELECT count(*) FROM invoices")[0][0] == 4000
    store.close()
