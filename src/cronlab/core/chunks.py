"""A stream cut into lists of a bounded size (the store's bulk inserts, ``defer_many``'s
transactions), never all in memory at once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` at most, never all in memory at once."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
