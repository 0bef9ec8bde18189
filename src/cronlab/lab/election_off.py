"""No election — the documented anti-pattern (``--election off``).

Every replica believes it leads, the way cron running on every app replica does: nobody
claims anything, so every replica dispatches its own copy of what falls due. There is no
fencing epoch; the scheduler dispatches with ``Store.read_due`` + ``enqueue_copies``.
"""

from __future__ import annotations

from cronlab.ports import Clock, Lease

FOREVER_MS = 2**62


class NoElection:
    """``ports.LeaseElector`` that grants every caller a lease (epoch 0) forever."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def acquire_or_renew(self, owner: str, ttl_ms: int) -> Lease | None:
        return Lease(holder=owner, epoch=0, expires_ms=FOREVER_MS)

    def release(self, owner: str) -> None:
        """Nothing to give up."""

    def current(self) -> Lease | None:
        return None
