"""What the engine's processes measure about themselves (``Metrics``), and where it goes:
nowhere (``NO_METRICS``, the default) or Prometheus (``metrics/prometheus.py``, imported only
when ``--metrics-port`` asks for it: ``import cronlab`` stays lean)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from cronlab.ports import Ended


class Metrics(Protocol):
    """A process's instruments. Every call is cheap and never raises."""

    def dispatched(self, n: int) -> None:
        """The leader enqueued ``n`` tasks."""
        ...

    def leading(self, epoch: int | None) -> None:
        """This replica leads under ``epoch`` (None: it does not lead)."""
        ...

    def executed(self, counts: Mapping[str, int]) -> None:
        """A worker batch committed runs with these outcome counts."""
        ...

    def ended(self, runs: Sequence[Ended]) -> None:
        """These runs' records committed: their lateness and durations."""
        ...


class NoMetrics:
    """Measures nothing."""

    def dispatched(self, n: int) -> None:
        pass

    def leading(self, epoch: int | None) -> None:
        pass

    def executed(self, counts: Mapping[str, int]) -> None:
        pass

    def ended(self, runs: Sequence[Ended]) -> None:
        pass


NO_METRICS: Metrics = NoMetrics()
