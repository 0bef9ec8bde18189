"""A process says it is alive: its row in the store's process registry gets ``heartbeat_ms``
every ``HEARTBEAT_MS`` (the console shows how long ago; a row whose beat is older than three
of them is a process that stopped or hangs)."""

from __future__ import annotations

import contextlib
from typing import Protocol

from cronlab.exceptions import BackendUnavailable
from cronlab.ports import Clock, ProcessInfo

HEARTBEAT_MS = 5_000


class Beating(Protocol):
    """A store that keeps heartbeats (``SqlProcesses.heartbeat``)."""

    def heartbeat(self, info: ProcessInfo, now_ms: int) -> None: ...


class Heartbeat:
    """``beat()`` on every loop round writes at most once per ``every_ms``."""

    def __init__(
        self, store: Beating, clock: Clock, info: ProcessInfo, every_ms: int = HEARTBEAT_MS
    ) -> None:
        self.store, self.clock, self.info, self.every_ms = store, clock, info, every_ms
        self.next_ms = 0  # monotonic

    def beat(self) -> None:
        """Write the heartbeat if it is time; a store that does not answer is the loop's
        business (its own round says so), not the heartbeat's."""
        mono = self.clock.monotonic_ms()
        if mono < self.next_ms:
            return
        self.next_ms = mono + self.every_ms
        with contextlib.suppress(BackendUnavailable):
            self.store.heartbeat(self.info, self.clock.now_ms())
