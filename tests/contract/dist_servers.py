"""Real servers for the distributed backends' tests: reachability, and a fresh database each.

A test of an unreachable server skips with the command that starts it; under CI=true it fails.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest

from cronlab.exceptions import BackendUnavailable
from cronlab.testing import scratch_database

PG_ADMIN = os.environ.get("CRONLAB_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("CRONLAB_TEST_REDIS", "redis://127.0.0.1:6379")
ETCD = os.environ.get("CRONLAB_TEST_ETCD", "etcd://127.0.0.1:2379")
START_PG = 'pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start'
START_REDIS = "redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save ''"
START_ETCD = "bash scripts/etcd.sh start"


def need(check: Callable[[], object], how: str) -> None:
    """Skip when the server is down (saying how to start it); fail instead under CI=true."""
    try:
        check()
    except (BackendUnavailable, psycopg.OperationalError) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{exc} (CI=true: the server must be up)")
        pytest.skip(f"{exc}; start it with: {how}")


def _admin() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)


@contextmanager
def pg_database(admin: str = PG_ADMIN) -> Iterator[str]:
    """A fresh, empty database; its URL. Dropped (connections forced out) afterwards."""
    need(lambda: _admin().close(), START_PG)
    with scratch_database(admin, "cronlab_t") as url:
        yield url
