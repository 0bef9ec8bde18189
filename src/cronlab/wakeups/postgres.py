"""Wake-ups through PostgreSQL's ``LISTEN``/``NOTIFY``.

A notify is a ``NOTIFY`` inside the transaction that made the news, so it is delivered when
(and only if) that transaction commits; one per channel and transaction however many rows
it wrote. A waiter holds a connection of its own that ``LISTEN``s; a connection lost is
opened again at the next wait after ``RETRY_S`` (meanwhile the wait just sleeps).
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from cronlab.ports import Channel

CHANNELS: dict[Channel, str] = {"due": "cronlab_due", "queued": "cronlab_queued"}
RETRY_S = 5.0


def notify_sql(channel: Channel) -> str:
    """The statement that wakes ``channel``'s waiters when its transaction commits."""
    return f"NOTIFY {CHANNELS[channel]}"


class PostgresWaiter:
    """``ports.Waiter`` on a ``LISTEN`` connection of its own."""

    def __init__(self, url: str, channel: Channel) -> None:
        self.url, self.channel = url, channel
        self.conn: psycopg.Connection[Any] | None = None
        self.failed_at = -RETRY_S
        self._connect()

    def _connect(self) -> None:
        try:
            self.conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5)
            self.conn.execute(f"LISTEN {CHANNELS[self.channel]}")
        except psycopg.Error:
            self._lost()

    def _lost(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn, self.failed_at = None, time.monotonic()

    def wait(self, timeout_s: float) -> bool:
        if self.conn is None and time.monotonic() - self.failed_at >= RETRY_S:
            self._connect()
        if self.conn is None:
            time.sleep(max(0.0, timeout_s))
            return False
        try:
            got = any(True for _ in self.conn.notifies(timeout=max(0.0, timeout_s), stop_after=1))
            if got:  # the rest that came meanwhile: one wake-up for all
                for _ in self.conn.notifies(timeout=0):
                    pass
        except psycopg.Error:
            self._lost()
            return False
        return got

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
