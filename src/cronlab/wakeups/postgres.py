"""Wake-ups through PostgreSQL's ``LISTEN``/``NOTIFY``.

A notify is a ``NOTIFY`` inside the transaction that made the news, so it is delivered when
(and only if) that transaction commits; one per channel and transaction however many rows
it wrote. A waiter holds a connection of its own that ``LISTEN``s; a connection lost is
opened again at the next wait after ``retrying.RETRY_S`` (meanwhile the wait just sleeps).
"""

from __future__ import annotations

from typing import Any

import psycopg

from cronlab.ports import Channel
from cronlab.wakeups.retrying import Reconnecting

# (postgresql/queries.sql's enqueue_dispatched names cronlab_queued too: pg_notify)
CHANNELS: dict[Channel, str] = {"due": "cronlab_due", "queued": "cronlab_queued"}


def notify_sql(channel: Channel) -> str:
    """The statement that wakes ``channel``'s waiters when its transaction commits."""
    return f"NOTIFY {CHANNELS[channel]}"


class PostgresWaiter(Reconnecting["psycopg.Connection[Any]"]):
    """``ports.Waiter`` on a ``LISTEN`` connection of its own."""

    errors = (psycopg.Error,)

    def __init__(self, url: str, channel: Channel) -> None:
        self.url, self.channel = url, channel
        super().__init__()

    def connect(self) -> None:
        self.conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5)
        self.conn.execute(f"LISTEN {CHANNELS[self.channel]}")

    def receive(self, conn: psycopg.Connection[Any], timeout_s: float) -> bool:
        got = any(True for _ in conn.notifies(timeout=timeout_s, stop_after=1))
        if got:  # the rest that came meanwhile: one wake-up for all
            for _ in conn.notifies(timeout=0):
                pass
        return got
