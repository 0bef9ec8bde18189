"""Clocks: ``SystemClock`` for processes, ``FakeClock`` (advanced by hand) for tests."""

from __future__ import annotations

import time


class SystemClock:
    """Wall time in epoch milliseconds; ``sleep`` really sleeps."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock that only moves when told: ``sleep`` and ``advance`` move both clocks on;
    ``jump`` steps the wall clock alone, either way (as NTP does)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._offset = 0

    def now_ms(self) -> int:
        return self._now + self._offset

    def monotonic_ms(self) -> int:
        return self._now

    def sleep(self, seconds: float) -> None:
        self.advance(int(seconds * 1000))

    def advance(self, ms: int) -> None:
        self._now += max(0, ms)

    def jump(self, ms: int) -> None:
        self._offset += ms
