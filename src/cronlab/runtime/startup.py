"""Waiting at start-up: a backend that is busy (a lock not free in time, as right after a big
seed) is waited out — with a bound, and one line saying so — as an outage is later in the run
(``outage.py``); only what is still not there after the bound, or a configuration mistake,
ends the start-up. A cluster's child waits out a backend that does not answer too: its cluster
has just reached it, so that is an outage, not a wrong URL."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from cronlab.exceptions import BackendBusy, BackendUnavailable
from cronlab.ports import Clock
from cronlab.runtime import reports

T = TypeVar("T")
WAIT_S = 60.0  # the longest a process waits for its backends at start-up
FIRST_S, MAX_S = 0.1, 5.0


def patiently(
    step: Callable[[], T],
    who: str,
    clock: Clock,
    *,
    transient: type[BackendUnavailable] = BackendBusy,
    wait_s: float = WAIT_S,
    say: Callable[[str], None] = reports.stderr,
) -> T:
    """``step()``, tried again with backoff (0.1 s doubling to 5 s) while it raises
    ``transient``, for at most ``wait_s``; the first such failure is said once, naming
    ``who``. Past the bound, the last failure is raised."""
    deadline, delay, said = clock.monotonic_ms() + wait_s * 1000, FIRST_S, False
    while True:
        try:
            return step()
        except transient as exc:
            if clock.monotonic_ms() + delay * 1000 > deadline:
                raise
            if not said:
                say(f"cronlab: {who}: {exc}; waiting up to {wait_s:g} s for it at start-up")
                said = True
            clock.sleep(delay)
            delay = min(MAX_S, delay * 2)
