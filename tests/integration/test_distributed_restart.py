"""Restarting PostgreSQL in the middle of a run loses nothing: the processes reconnect (with
backoff) and carry on, every invoice exactly once.

The test runs a PostgreSQL server of its own (initdb under /tmp, its own port) so restarting it
cannot disturb anything else on the machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from contract.dist_servers import ETCD, REDIS, START_ETCD, START_REDIS, need
from cronlab.clock import SystemClock
from cronlab.election.etcd import parse_url, ping
from cronlab.election.store import StoreElector
from cronlab.ports import NewTask
from cronlab.queues.redis import RedisQueue, connect, stream_keys
from cronlab.queues.redis import parse_url as parse_redis
from cronlab.stores.sqlite import SqliteStore

from .test_distributed_chaos import (
    Dist,
    assert_every_invoice_once,
    cluster,
    cronlab,
    done,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.etcd, pytest.mark.redis]
BIN = Path("/usr/lib/postgresql/15/bin")


class OwnPostgres:
    """A throwaway PostgreSQL cluster run as the ``postgres`` user on a free loopback port."""

    def __init__(self, addresses: str = "127.0.0.1") -> None:
        self.addresses = addresses
        self.dir = Path(tempfile.mkdtemp(prefix="cronlab-pg-"))
        shutil.chown(self.dir, "postgres")
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._pg("initdb", "-D", str(self.dir / "data"), "-U", "postgres", "--auth=trust")
        with (self.dir / "data" / "pg_hba.conf").open("a") as hba:
            hba.write("host all all 10.0.0.0/8 trust\n")  # the network-namespace test's links

    def _pg(self, tool: str, *args: str) -> None:
        cmd = ["runuser", "-u", "postgres", "--", str(BIN / tool), *args]
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses={self.addresses} -c fsync=off"
        self._pg(
            "pg_ctl",
            "-D",
            str(self.dir / "data"),
            "-o",
            opts,
            "-l",
            str(self.dir / "log"),
            "-w",
            "start",
        )

    def stop(self) -> None:
        self._pg("pg_ctl", "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def own_pg() -> Iterator[OwnPostgres]:
    if os.geteuid() != 0 or not (BIN / "initdb").exists() or not shutil.which("runuser"):
        pytest.skip("needs root, runuser and PostgreSQL 15's initdb to run a private server")
    pg = OwnPostgres()
    pg.start()
    yield pg
    pg.remove()


def test_a_postgres_restart_mid_run_loses_nothing(own_pg: OwnPostgres) -> None:
    tag = uuid.uuid4().hex[:10]
    etcd_url, redis_url = f"{ETCD}/cronlab-it-{tag}", f"{REDIS}?prefix=cronlab-it-{tag}"
    need(lambda: ping(parse_url(etcd_url)), START_ETCD)
    need(lambda: connect(parse_redis(redis_url)).close(), START_REDIS)
    d = Dist(own_pg.url, etcd_url, redis_url)
    cronlab("invoices", "seed", "--store", d.store_url, "--count", "3000", "--at", "+3")
    cronlab("invoices", "seed", "--store", d.store_url, "--count", "3000", "--at", "+10")
    store = d.store()
    with cluster(d, "--lease-ttl", "3", "--replicas", "2", "--workers", "2", "--visibility", "5"):
        wait_until(lambda: store.counts()["DONE"] >= 3000, 30, "the first bucket")
        own_pg.stop()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(own_pg.url, connect_timeout=2).close()  # it really is down
        time.sleep(3)
        own_pg.start()
        wait_until(lambda: done(store, 6000), 60, "every invoice after the restart")
    assert_every_invoice_once(store, 6000)
    store.close()
    connect(parse_redis(redis_url)).delete(*stream_keys(f"cronlab-it-{tag}"))


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Starts a private, persistent (AOF) Redis on a free port; each call starts it again."""
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed: bash scripts/setup.sh")
    port, procs = _free_port(), []

    def start() -> subprocess.Popen[bytes]:
        args = ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path)]
        proc = subprocess.Popen(
            ["redis-server", *args, "--appendonly", "yes", "--save", ""], stdout=subprocess.DEVNULL
        )
        procs.append(proc)
        wait_until(lambda: _pong(port), 10, "the private Redis")
        return proc

    start.port = port  # type: ignore[attr-defined]
    yield start
    for p in procs:
        p.terminate()
        p.wait(10)


def _pong(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port, socket_timeout=1).ping())
    except redis.RedisError:
        return False


def test_a_redis_restart_mid_claim_is_retried_and_loses_nothing(
    own_redis: Callable[[], subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    server = own_redis()
    store = SqliteStore(tmp_path / "outbox.db")
    now = SystemClock().now_ms()
    store.add_tasks(NewTask(idempotency_key=f"k{i}", task="ok", trigger_ms=now) for i in range(20))
    lease = StoreElector(store, SystemClock()).acquire_or_renew("l", 60_000)
    assert lease is not None
    url = parse_redis(f"redis://127.0.0.1:{own_redis.port}?prefix=restart")  # type: ignore[attr-defined]
    queue = RedisQueue(url, store, SystemClock(), retry_s=30)
    store.dispatch_due(now, 100, lease.epoch)
    queue.relay()
    server.terminate()  # Redis writes its append-only file and exits
    server.wait(10)
    restarting = threading.Event()  # the store is this thread's: Redis restarts in another
    restart = threading.Timer(1.5, lambda: (restarting.set(), own_redis()))
    restart.start()
    got = queue.claim("w", 100, 30_000)  # retried while Redis is down
    assert restarting.is_set()
    restart.join()
    assert sorted(m.idempotency_key for m in got) == sorted(f"k{i}" for i in range(20))
    assert queue.ack(got) == 20 and queue.depth() == 0
    queue.close()
    store.close()
