"""What the PostgreSQL and Redis waiters share: a connection of their own that may be lost,
opened again at the next wait after ``RETRY_S`` (meanwhile a wait just sleeps)."""

from __future__ import annotations

import time
from typing import Generic, Protocol, TypeVar

RETRY_S = 5.0


class Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class Reconnecting(Generic[C]):
    """``ports.Waiter`` on ``conn``: ``connect`` opens it (into ``self.conn``, then subscribes),
    ``receive`` waits on it for a notice and takes the rest that came meanwhile (one wake-up
    for all); ``errors`` are what a lost connection raises."""

    errors: tuple[type[Exception], ...] = ()

    def __init__(self) -> None:
        self.conn: C | None = None
        self.failed_at = -RETRY_S
        self._open()

    def connect(self) -> None:
        raise NotImplementedError

    def receive(self, conn: C, timeout_s: float) -> bool:
        raise NotImplementedError

    def _open(self) -> None:
        try:
            self.connect()
        except self.errors:
            self._lost()

    def _lost(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn, self.failed_at = None, time.monotonic()

    def wait(self, timeout_s: float) -> bool:
        if self.conn is None and time.monotonic() - self.failed_at >= RETRY_S:
            self._open()
        if self.conn is None:
            time.sleep(max(0.0, timeout_s))
            return False
        try:
            return self.receive(self.conn, max(0.0, timeout_s))
        except self.errors:
            self._lost()
            return False

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
