"""Lease election on a lease row kept in the store (``ports.LeaseTable``).

Acquire and renew are one atomic conditional update; every new acquisition increments the
epoch, the fencing token that ``Store.dispatch_due`` checks in its own transaction.
"""

from __future__ import annotations

from cronlab.ports import Clock, Lease, LeaseTable


class StoreElector:
    """``ports.LeaseElector`` over a store's lease row."""

    def __init__(self, table: LeaseTable, clock: Clock) -> None:
        self._table = table
        self._clock = clock

    def acquire_or_renew(self, owner: str, ttl_ms: int) -> Lease | None:
        state = self._table.lease_cas(owner, self._clock.now_ms(), ttl_ms)
        if state is None or state.holder is None:
            return None
        return Lease(holder=state.holder, epoch=state.epoch, expires_ms=state.expires_ms)

    def release(self, owner: str) -> None:
        self._table.lease_release(owner)

    def current(self) -> Lease | None:
        state = self._table.lease_read()
        if state.holder is None or not state.live(self._clock.now_ms()):
            return None
        return Lease(holder=state.holder, epoch=state.epoch, expires_ms=state.expires_ms)
