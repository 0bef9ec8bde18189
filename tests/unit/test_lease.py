"""Lease rules (pure) and the store elector on a fake clock: acquire, renew, expiry, epochs."""

from __future__ import annotations

import pytest

from cronlab.clock import FakeClock
from cronlab.core import lease
from cronlab.election.store import StoreElector
from cronlab.exceptions import ConfigError, FencedError
from cronlab.stores.memory import MemoryStore

TTL = 10_000


def test_free_lease_is_acquired_with_epoch_one() -> None:
    s = lease.acquire_or_renew(lease.FREE, "a", 1_000, TTL)
    assert s == lease.LeaseState(holder="a", epoch=1, expires_ms=11_000)


def test_holder_renews_and_keeps_its_epoch() -> None:
    s = lease.acquire_or_renew(lease.FREE, "a", 0, TTL)
    assert s is not None
    renewed = lease.acquire_or_renew(s, "a", 5_000, TTL)
    assert renewed == lease.LeaseState(holder="a", epoch=1, expires_ms=15_000)


def test_live_lease_of_another_is_refused() -> None:
    s = lease.acquire_or_renew(lease.FREE, "a", 0, TTL)
    assert s is not None
    assert lease.acquire_or_renew(s, "b", TTL - 1, TTL) is None


def test_expired_lease_goes_to_another_with_a_higher_epoch() -> None:
    s = lease.acquire_or_renew(lease.FREE, "a", 0, TTL)
    assert s is not None
    taken = lease.acquire_or_renew(s, "b", TTL, TTL)
    assert taken == lease.LeaseState(holder="b", epoch=2, expires_ms=2 * TTL)


def test_reacquiring_own_expired_lease_still_increments_the_epoch() -> None:
    s = lease.acquire_or_renew(lease.FREE, "a", 0, TTL)
    assert s is not None
    again = lease.acquire_or_renew(s, "a", TTL + 1, TTL)
    assert again is not None and again.epoch == 2


def test_release_frees_only_for_the_holder() -> None:
    s = lease.acquire_or_renew(lease.FREE, "a", 0, TTL)
    assert s is not None
    assert lease.release(s, "b") == s
    freed = lease.release(s, "a")
    assert freed.holder is None and freed.epoch == 1
    assert lease.acquire_or_renew(freed, "b", 1, TTL) == lease.LeaseState(
        holder="b", epoch=2, expires_ms=1 + TTL
    )


def test_holds_is_false_for_a_stale_epoch_or_after_expiry() -> None:
    s = lease.acquire_or_renew(lease.FREE, "a", 0, TTL)
    assert s is not None
    assert lease.holds(s, 1, TTL - 1)
    assert not lease.holds(s, 1, TTL)
    assert not lease.holds(s, 0, 1)


def test_non_positive_ttl_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="-5"):
        lease.acquire_or_renew(lease.FREE, "a", 0, -5)


def test_store_elector_on_fake_clock() -> None:
    clock, store = FakeClock(0), MemoryStore()
    elector = StoreElector(store, clock)
    first = elector.acquire_or_renew("a", TTL)
    assert first is not None and first.epoch == 1
    assert elector.acquire_or_renew("b", TTL) is None
    clock.advance(TTL // 3)
    renewed = elector.acquire_or_renew("a", TTL)
    assert renewed is not None and renewed.expires_ms == TTL // 3 + TTL
    clock.advance(TTL)
    assert elector.current() is None
    second = elector.acquire_or_renew("b", TTL)
    assert second is not None and second.epoch == 2 and second.holder == "b"


def test_stale_epoch_is_refused_by_the_store() -> None:
    clock, store = FakeClock(0), MemoryStore()
    elector = StoreElector(store, clock)
    old = elector.acquire_or_renew("a", TTL)
    clock.advance(TTL)
    new = elector.acquire_or_renew("b", TTL)
    assert old is not None and new is not None
    with pytest.raises(FencedError) as err:
        store.dispatch_due(clock.now_ms(), 10, old.epoch)
    assert err.value.epoch == 1 and err.value.current == 2
    assert store.dispatch_due(clock.now_ms(), 10, new.epoch) == 0
