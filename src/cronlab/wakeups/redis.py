"""Wake-ups through Redis pub/sub (the Redis queue): the relay publishes on
``<prefix>:wake`` after it put messages on the stream; a waiter holds a subscription (its
connection buffers what came while it was busy). A lost connection is subscribed again at
the next wait after ``RETRY_S``; meanwhile the wait just sleeps.
"""

from __future__ import annotations

import time
from typing import Any

import redis

RETRY_S = 5.0


def channel(prefix: str) -> str:
    return f"{prefix}:wake"


class RedisWaiter:
    """``ports.Waiter`` on a pub/sub subscription of its own."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client, self.name = client, channel(prefix)
        self.pubsub: Any = None
        self.failed_at = -RETRY_S
        self._subscribe()

    def _subscribe(self) -> None:
        try:
            self.pubsub = self.client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
            self.pubsub.subscribe(self.name)
        except redis.RedisError:
            self._lost()

    def _lost(self) -> None:
        if self.pubsub is not None:
            self.pubsub.close()
        self.pubsub, self.failed_at = None, time.monotonic()

    def wait(self, timeout_s: float) -> bool:
        if self.pubsub is None and time.monotonic() - self.failed_at >= RETRY_S:
            self._subscribe()
        if self.pubsub is None:
            time.sleep(max(0.0, timeout_s))
            return False
        try:
            got = self.pubsub.get_message(timeout=max(0.0, timeout_s)) is not None
            while got and self.pubsub.get_message(timeout=0) is not None:
                pass  # the rest that came meanwhile: one wake-up for all
        except redis.RedisError:
            self._lost()
            return False
        return got

    def close(self) -> None:
        if self.pubsub is not None:
            self.pubsub.close()
            self.pubsub = None
