"""The lease row and the fence (``ports.LeaseTable``): the election's compare-and-set, and the
check every leader write makes in its own transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cronlab.core import lease as rules
from cronlab.exceptions import ConfigError, FencedError
from cronlab.stores import Fencing
from cronlab.stores.sql.dialect import Conn, Dialect
from cronlab.stores.sql.part import Part


class SqlLease(Part):
    """``fencing="lease"``: a fenced write must carry the epoch of the unexpired lease row in
    this store. ``"epoch"``: the lease lives elsewhere (etcd); a fenced write must carry an
    epoch no lower than the highest one seen. Both raise the stored ``max_epoch``."""

    def __init__(self, db: Dialect, fencing: Fencing) -> None:
        super().__init__(db)
        self.fencing = fencing

    def cas(self, owner: str, now_ms: int, ttl_ms: int) -> rules.LeaseState | None:
        """Take or renew the lease for ``owner`` (the store's clock where it has one); None
        when another holds it unexpired."""
        if ttl_ms <= 0:
            raise ConfigError(f"lease TTL must be > 0 ms, got {ttl_ms}")

        def cas(c: Conn) -> Any:
            args = {"owner": owner, "now": self.db.now(c, now_ms), "ttl": ttl_ms}
            return c.execute(self.queries["lease_cas"], args).fetchone()

        got = self.db.transaction(cas)
        return None if got is None else state(got)

    def release(self, owner: str) -> None:
        self.db.transaction(lambda c: c.execute(self.queries["lease_release"], {"owner": owner}))

    def read(self) -> rules.LeaseState:
        return state(self.named("lease_read")[0])

    def fence(self, c: Conn, epoch: int, now_ms: int) -> None:
        """In ``c``'s transaction: raise ``FencedError`` (and write nothing) unless ``epoch``
        still may write — the check every dispatch makes, and the leader's other duties."""
        (max_epoch,) = c.execute(self.queries["fence_lock"], {"kind": self.fencing}).fetchone()
        held = None
        if self.fencing == "lease":
            held = state(c.execute(self.queries["lease_read_locked"]).fetchone())
        self.checked(epoch, max_epoch, held, now_ms)
        c.execute(self.queries["fence_raise"], {"epoch": epoch, "kind": self.fencing})

    def fenced_now(self, c: Conn, epoch: int, caller_ms: int) -> int:
        """``fence`` at the store's clock (``Dialect.now``), which it returns: where the dialect
        has ``fence_at_once`` (PostgreSQL), one statement that locks and raises the fence row,
        locks the lease row and reads the clock once it holds both — a fenced epoch's
        ``FencedError`` rolls the raise back with the rest of the transaction."""
        at_once = self.queries.get("fence_at_once")
        if at_once is None:
            now = self.db.now(c, caller_ms)
            self.fence(c, epoch, now)
            return now
        args = {"epoch": epoch, "kind": self.fencing, "now": self.db.given_now(caller_ms)}
        max_epoch, *lease, now = c.execute(at_once, args).fetchone()
        self.checked(epoch, max_epoch, state(lease) if self.fencing == "lease" else None, now)
        return int(now)

    def checked(
        self, epoch: int, max_epoch: int, held: rules.LeaseState | None, now_ms: int
    ) -> None:
        """Raise ``FencedError`` unless ``epoch`` may write: no lower than the fence's highest
        epoch and, with ``fencing="lease"``, the epoch of ``held``, unexpired at ``now_ms``."""
        if held is None:
            if epoch < max_epoch:
                raise FencedError(epoch, max_epoch)
        else:
            if epoch < max_epoch or not rules.holds(held, epoch, now_ms):
                raise FencedError(epoch, held.epoch)


def state(r: Sequence[Any]) -> rules.LeaseState:
    """A lease row ``(holder, epoch, expires_ms)`` as a value."""
    return rules.LeaseState(holder=r[0], epoch=int(r[1]), expires_ms=int(r[2]))
