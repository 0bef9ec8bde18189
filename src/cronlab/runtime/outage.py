"""Staying up through a backend outage: a process that cannot reach its store, queue or
election backs off (0.1 s doubling to 5 s) and tries again, instead of exiting and waiting for
its supervisor. The outage is said once on stderr when it starts and once when it ends, and
recorded in the store's event log: ``backend_unreachable`` when it starts (if the store itself
answers: the queue or the election is what is down), ``backend_down`` with how long it lasted
once it is back. ``cronlab status`` lists the processes whose latest such event is the first.
"""

from __future__ import annotations

from collections.abc import Callable

from cronlab.exceptions import BackendUnavailable
from cronlab.ports import Clock
from cronlab.runtime import reports

FIRST_MS, MAX_MS = 100, 5_000


class Outage:
    """One process's view of its backends: up, or down since a monotonic instant."""

    def __init__(self, clock: Clock, who: str, say: Callable[[str], None] = reports.stderr) -> None:
        self.clock, self.who, self.say = clock, who, say
        self.since_ms: int | None = None
        self.error = ""
        self.fresh = False
        self._delay_ms = FIRST_MS

    @property
    def down(self) -> bool:
        return self.since_ms is not None

    def failed(self, exc: BackendUnavailable) -> int:
        """Note a failed round; milliseconds to wait before the next. ``fresh`` says whether
        this round began the outage."""
        self.fresh = self.since_ms is None
        if self.since_ms is None:
            self.since_ms, self.error = self.clock.monotonic_ms(), str(exc)
            self.say(f"{self.who}: {exc}; staying up, retrying with backoff")
        delay, self._delay_ms = self._delay_ms, min(MAX_MS, self._delay_ms * 2)
        return delay

    def recovered(self) -> int | None:
        """After a round that worked: how long the outage lasted (ms), or None if none."""
        if self.since_ms is None:
            return None
        lasted = self.clock.monotonic_ms() - self.since_ms
        self.since_ms, self._delay_ms = None, FIRST_MS
        self.say(f"{self.who}: backends reachable again after {lasted / 1000:.1f} s")
        return lasted
