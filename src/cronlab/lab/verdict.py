"""``cronlab check``: the checker's verdict on a run, from the store's ledger (what was due, what
took effect), in the simulator's words (``sim/checker.py``):

* **lost**: due, and will not take effect — MISSED or FAILED, or, once the run is over
  (``final``), anything due that is not DONE;
* **duplicated**: took effect more than once (executions that completed, ok or noop, beyond the
  first of a task);
* **unexpected**: took effect before it was due (a run that started before its trigger);
* **late**: first took effect more than ``late_s`` after the same-rank task would have in a
  calm run at ``capacity`` tasks/s (tasks run oldest first; without ``capacity``, after its
  trigger);
* **stuck**: DISPATCHED with no message anywhere in the queue — nothing will move it but a
  reconcile.

Each with its count and up to ``SAMPLES`` task keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cronlab.stores.sql import SqlStore

SAMPLES = 3
LATE_S = 60.0
KINDS = ("lost", "duplicated", "unexpected", "late", "stuck")


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """Counts and sample task keys per kind; ``ok`` when every count is 0."""

    counts: dict[str, int]
    samples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "counts": self.counts, "samples": self.samples}


def check(
    store: SqlStore,
    now_ms: int,
    *,
    final: bool = False,
    capacity: float | None = None,
    late_s: float = LATE_S,
) -> Verdict:
    """The verdict as of ``now_ms``; ``final``: the run is over, nothing more will run."""
    found = {
        "lost": _keys(store, "check_lost_final" if final else "check_lost", now_ms),
        "duplicated": _keys(store, "check_duplicated", now_ms),
        "unexpected": _keys(store, "check_unexpected", now_ms),
        "late": _late(store, capacity, late_s),
        "stuck": _keys(store, "check_stuck", now_ms),
    }
    counts = {k: sum(n for _, n in rows) for k, rows in found.items()}
    samples = {k: [key for key, _ in rows[:SAMPLES]] for k, rows in found.items() if rows}
    return Verdict(counts=counts, samples=samples)


def _keys(store: SqlStore, query: str, now_ms: int) -> list[tuple[str, int]]:
    return [(str(r[0]), int(r[1])) for r in store.named(query, {"now": now_ms})]


def _late(store: SqlStore, capacity: float | None, late_s: float) -> list[tuple[str, int]]:
    """First effects behind the calm run's same-rank one by more than ``late_s``."""
    rows = store.named("check_first_effects")  # (key, trigger_ms, first end_ms), by end
    calm = sorted(r[1] for r in rows)
    gap_ms = 0.0 if capacity is None else 1000.0 / capacity
    out, expected = [], float("-inf")
    for (key, _, end), trigger in zip(rows, calm, strict=True):
        expected = max(float(trigger), expected + gap_ms) if gap_ms else float(trigger)
        if end - expected > late_s * 1000:
            out.append((str(key), 1))
    return out
