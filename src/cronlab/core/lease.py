"""Lease rules with fencing epochs, as pure functions: no I/O, time is an argument.

A lease is one row: ``holder`` (or None), ``epoch`` (the fencing token) and ``expires_ms``
(integer epoch milliseconds). The rules every backend implements:

* **acquire**: a free or expired lease goes to the caller and its epoch increases by one —
  every new acquisition, even by the previous holder after expiry, gets a fresh epoch;
* **renew**: the current holder of an unexpired lease extends ``expires_ms`` to ``now + ttl``
  and keeps its epoch;
* **refuse**: an unexpired lease held by someone else is not changed;
* **fence**: a write carrying ``epoch`` is allowed only while that epoch holds an unexpired lease.
"""

from __future__ import annotations

from dataclasses import dataclass

from cronlab.exceptions import ConfigError


@dataclass(frozen=True, kw_only=True)
class LeaseState:
    """The lease row. ``holder`` is None when released or never taken."""

    holder: str | None = None
    epoch: int = 0
    expires_ms: int = 0

    def live(self, now_ms: int) -> bool:
        """True when someone holds the lease at ``now_ms``."""
        return self.holder is not None and now_ms < self.expires_ms


FREE = LeaseState()


def acquire_or_renew(state: LeaseState, owner: str, now_ms: int, ttl_ms: int) -> LeaseState | None:
    """The new state after ``owner`` asks for the lease, or None when another holds it."""
    if ttl_ms <= 0:
        raise ConfigError(f"lease TTL must be > 0 ms, got {ttl_ms}")
    if state.live(now_ms):
        if state.holder != owner:
            return None
        return LeaseState(holder=owner, epoch=state.epoch, expires_ms=now_ms + ttl_ms)
    return LeaseState(holder=owner, epoch=state.epoch + 1, expires_ms=now_ms + ttl_ms)


def release(state: LeaseState, owner: str) -> LeaseState:
    """Free the lease if ``owner`` holds it (epoch kept, so the next acquisition increments it)."""
    if state.holder != owner:
        return state
    return LeaseState(holder=None, epoch=state.epoch, expires_ms=0)


def holds(state: LeaseState, epoch: int, now_ms: int) -> bool:
    """The fencing check: may a write carrying ``epoch`` proceed at ``now_ms``?"""
    return state.live(now_ms) and state.epoch == epoch
