"""The leader's retention duty: run history older than ``--keep`` (30 days by default) is
deleted in small batches (``SqlStore.prune_history``, fenced), once a minute while there is
nothing left to delete and at every scan while there is."""

from __future__ import annotations

from typing import Protocol

from cronlab.core import delays
from cronlab.exceptions import ConfigError
from cronlab.ports import Clock
from cronlab.stores.sql.history import DEFAULT_KEEP_MS, MIN_KEEP_MS, PRUNE_BATCH

PRUNE_EVERY_MS = 60_000
DEFAULT_KEEP = "30d"


class Pruning(Protocol):
    """A store with a retention (``SqlStore``)."""

    def prune_history(self, keep_ms: int, now_ms: int, limit: int, epoch: int) -> int: ...


def parse_keep(text: str) -> int:
    """``--keep``: a delay (``30d``, ``12h``) of at least an hour, in ms."""
    keep = delays.parse_delay(text)
    if keep < MIN_KEEP_MS:
        raise ConfigError(f"--keep {text!r}: keep the history at least 1h")
    return keep


class Retention:
    """``Duty``: prune a batch when it is time; another at the next scan if it was full."""

    def __init__(
        self,
        store: Pruning,
        clock: Clock,
        keep_ms: int = DEFAULT_KEEP_MS,
        batch: int = PRUNE_BATCH,
        every_ms: int = PRUNE_EVERY_MS,
    ) -> None:
        self.store, self.clock, self.keep_ms = store, clock, keep_ms
        self.batch, self.every_ms = batch, every_ms
        self.next_ms = 0  # monotonic
        self.pruned = 0

    def run(self, now_ms: int, epoch: int) -> None:
        mono = self.clock.monotonic_ms()
        if mono < self.next_ms:
            return
        gone = self.store.prune_history(self.keep_ms, now_ms, self.batch, epoch)
        self.pruned += gone
        self.next_ms = mono if gone >= self.batch else mono + self.every_ms
