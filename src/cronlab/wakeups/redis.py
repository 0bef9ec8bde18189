"""Wake-ups through Redis pub/sub (the Redis queue): the relay publishes on
``<prefix>:wake`` after it put messages on the stream; a waiter holds a subscription (its
connection buffers what came while it was busy). A lost connection is subscribed again at
the next wait after ``retrying.RETRY_S``; meanwhile the wait just sleeps.
"""

from __future__ import annotations

from typing import Any

import redis

from cronlab.wakeups.retrying import Reconnecting


def channel(prefix: str) -> str:
    return f"{prefix}:wake"


class RedisWaiter(Reconnecting[Any]):
    """``ports.Waiter`` on a pub/sub subscription of its own."""

    errors = (redis.RedisError,)

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client, self.name = client, channel(prefix)
        super().__init__()

    def connect(self) -> None:
        client: Any = self.client  # (redis < 8.2 leaves pubsub untyped)
        self.conn = client.pubsub(ignore_subscribe_messages=True)
        self.conn.subscribe(self.name)

    def receive(self, conn: Any, timeout_s: float) -> bool:
        got = conn.get_message(timeout=timeout_s) is not None
        while got and conn.get_message(timeout=0) is not None:
            pass  # the rest that came meanwhile: one wake-up for all
        return got
