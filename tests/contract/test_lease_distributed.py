"""The lease contract on real time, run against the store lease (SQLite file) and real etcd.

The same tests, the same expectations: acquire, refuse, renew, release, expiry with a higher
epoch, and the store refusing a dispatch that carries a superseded epoch (fencing).
"""

from __future__ import annotations

import http.server
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from cronlab.clock import SystemClock
from cronlab.election.etcd import EtcdElector, api_path, parse_url, ping
from cronlab.election.store import StoreElector
from cronlab.exceptions import BackendUnavailable, FencedError
from cronlab.ports import LeaseElector, NewTask
from cronlab.stores.sqlite import SqliteStore

ETCD = os.environ.get("CRONLAB_TEST_ETCD", "etcd://127.0.0.1:2379")
TTL_MS = 2_000
CLOCK = SystemClock()
Factory = Callable[[], LeaseElector]
T = TypeVar("T")


def need(check: Callable[[], None], how: str) -> None:
    """Skip when the server is down (saying how to start it); fail instead under CI=true."""
    try:
        check()
    except BackendUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{exc} (CI=true: the server must be up)")
        pytest.skip(f"{exc}; start it with: {how}")


@pytest.fixture(params=["store", pytest.param("etcd", marks=pytest.mark.etcd)])
def electors(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """A factory of electors that contend for ONE lease (each as if in its own process)."""
    if request.param == "store":
        path = tmp_path / "lease.db"
        SqliteStore(path).close()
        yield lambda: StoreElector(SqliteStore(path), CLOCK)
        return
    url = parse_url(f"{ETCD}/cronlab-test-{uuid.uuid4().hex[:10]}")
    need(lambda: ping(url), "bash scripts/etcd.sh start")
    yield lambda: EtcdElector(url, CLOCK)


def test_a_free_lease_is_acquired_with_a_positive_epoch(electors: Factory) -> None:
    lease = electors().acquire_or_renew("a", TTL_MS)
    assert lease is not None and lease.holder == "a" and lease.epoch > 0
    assert lease.expires_ms <= CLOCK.now_ms() + TTL_MS


def test_a_held_lease_is_refused_to_another(electors: Factory) -> None:
    a, b = electors(), electors()
    assert a.acquire_or_renew("a", TTL_MS) is not None
    assert b.acquire_or_renew("b", TTL_MS) is None


def test_renewal_keeps_the_epoch_and_extends(electors: Factory) -> None:
    a = electors()
    first = a.acquire_or_renew("a", TTL_MS)
    time.sleep(0.05)
    again = a.acquire_or_renew("a", TTL_MS)
    assert first is not None and again is not None
    assert again.epoch == first.epoch and again.expires_ms > first.expires_ms


def test_current_names_the_holder_and_epoch(electors: Factory) -> None:
    a, watcher = electors(), electors()
    assert watcher.current() is None
    lease = a.acquire_or_renew("a", TTL_MS)
    seen = watcher.current()
    assert lease is not None and seen is not None
    assert (seen.holder, seen.epoch) == ("a", lease.epoch)


def test_release_hands_over_with_a_higher_epoch(electors: Factory) -> None:
    a, b = electors(), electors()
    first = a.acquire_or_renew("a", TTL_MS)
    a.release("a")
    second = b.acquire_or_renew("b", TTL_MS)
    assert first is not None and second is not None
    assert second.holder == "b" and second.epoch > first.epoch


def test_release_by_a_non_holder_changes_nothing(electors: Factory) -> None:
    a, b = electors(), electors()
    lease = a.acquire_or_renew("a", TTL_MS)
    b.release("b")
    seen = b.current()
    assert lease is not None and seen is not None and seen.epoch == lease.epoch


def test_an_unrenewed_lease_expires_and_goes_to_another_with_a_higher_epoch(
    electors: Factory,
) -> None:
    a, b = electors(), electors()
    first = a.acquire_or_renew("a", TTL_MS)
    assert first is not None
    second = _poll(lambda: b.acquire_or_renew("b", TTL_MS), deadline_s=TTL_MS / 1000 + 5)
    assert second.holder == "b" and second.epoch > first.epoch
    assert a.acquire_or_renew("a", TTL_MS) is None  # the old holder cannot renew into it


def test_the_store_fences_a_superseded_epoch(electors: Factory, tmp_path: Path) -> None:
    """A dispatch with the old leader's epoch is refused once a newer epoch has dispatched."""
    store = SqliteStore(tmp_path / "fenced.db", fencing="epoch")
    store.add_tasks([NewTask(idempotency_key=f"k{i}", task="h", trigger_ms=0) for i in range(4)])
    a, b = electors(), electors()
    old = a.acquire_or_renew("a", TTL_MS)
    assert old is not None and store.dispatch_due(CLOCK.now_ms(), 1, old.epoch) == 1
    a.release("a")
    new = b.acquire_or_renew("b", TTL_MS)
    assert new is not None and store.dispatch_due(CLOCK.now_ms(), 1, new.epoch) == 1
    with pytest.raises(FencedError):
        store.dispatch_due(CLOCK.now_ms(), 10, old.epoch)
    assert store.counts()["PENDING"] == 2  # the fenced dispatch wrote nothing


@pytest.mark.etcd
def test_an_unreachable_etcd_is_a_one_line_backend_error() -> None:
    elector = EtcdElector(parse_url("etcd://127.0.0.1:1/x"), CLOCK, timeout_s=1)
    with pytest.raises(BackendUnavailable, match=r"etcd etcd://127\.0\.0\.1:1/x") as info:
        elector.acquire_or_renew("a", TTL_MS)
    assert "\n" not in str(info.value)


def _poll(fn: Callable[[], T | None], deadline_s: float) -> T:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if (got := fn()) is not None:
            return got
        time.sleep(0.1)
    raise AssertionError(f"nothing within {deadline_s} s")


@pytest.mark.etcd
def test_the_gateway_path_is_the_one_the_server_answers() -> None:
    """Bug 10: the path was fixed at /v3beta/, which etcd 3.5 and later no longer serve."""
    url = parse_url(ETCD)
    need(lambda: ping(url), "bash scripts/etcd.sh start")
    assert api_path(url) == "/v3/"


@pytest.mark.parametrize(("served", "found"), [("/v3beta/", "/v3beta/"), ("/v2/", None)])
def test_an_older_gateway_is_found_and_none_is_a_one_line_error(
    served: str, found: str | None
) -> None:
    """A stand-in HTTP server for paths no etcd here serves: /v3beta/ only (etcd 3.3), or no
    v3 gateway at all."""

    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            ok = self.path == f"{served}maintenance/status"
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = parse_url(f"etcd://127.0.0.1:{server.server_port}/x")
    try:
        if found is not None:
            assert api_path(url) == found
        else:
            with pytest.raises(BackendUnavailable, match="no v3 HTTP gateway") as info:
                api_path(url)
            assert "\n" not in str(info.value)
    finally:
        server.shutdown()
        server.server_close()
