"""The LeaseElector contract over the store's lease row — every backend."""

from __future__ import annotations

from cronlab.election.store import StoreElector

from .conftest import Backend

TTL = 3_000


def test_one_holder_at_a_time_and_epochs_only_grow(backend: Backend) -> None:
    e = StoreElector(backend.store, backend.clock)
    a = e.acquire_or_renew("a", TTL)
    assert a is not None and a.epoch == 1
    assert e.acquire_or_renew("b", TTL) is None
    backend.clock.advance(TTL - 1)
    assert e.acquire_or_renew("b", TTL) is None
    backend.clock.advance(1)
    b = e.acquire_or_renew("b", TTL)
    assert b is not None and (b.holder, b.epoch) == ("b", 2)
    current = e.current()
    assert current is not None and current.holder == "b"


def test_renewal_extends_without_a_new_epoch(backend: Backend) -> None:
    e = StoreElector(backend.store, backend.clock)
    e.acquire_or_renew("a", TTL)
    backend.clock.advance(TTL // 3)
    r = e.acquire_or_renew("a", TTL)
    assert r is not None and r.epoch == 1
    assert r.expires_ms == backend.clock.now_ms() + TTL


def test_release_lets_the_next_take_over_at_once(backend: Backend) -> None:
    e = StoreElector(backend.store, backend.clock)
    e.acquire_or_renew("a", TTL)
    e.release("b")
    assert e.acquire_or_renew("b", TTL) is None
    e.release("a")
    assert e.current() is None
    b = e.acquire_or_renew("b", TTL)
    assert b is not None and b.epoch == 2
