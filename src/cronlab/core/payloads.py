"""A task's arguments as they are stored (a JSON object, bounded), and the keys of the
follow-ups a run defers: pure, the same in every process that computes them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from cronlab.exceptions import TaskArgumentError

MAX_ARGUMENTS_BYTES = 64 * 1024  # as the CLI's --payload
MAX_KEY = 500  # characters of an idempotency key, everywhere
# One encoder for every call: ``json.dumps`` with arguments of its own builds a new one each time.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def encode(name: str, arguments: Mapping[str, Any]) -> str:
    """The arguments as the stored JSON object; TaskArgumentError for what JSON cannot hold."""
    try:
        text = _ENCODER.encode(arguments)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TaskArgumentError(f"{name}: arguments must be JSON ({exc})") from None
    if len(text) > MAX_ARGUMENTS_BYTES:
        raise TaskArgumentError(
            f"{name}: arguments are {len(text):,} bytes of JSON (at most {MAX_ARGUMENTS_BYTES:,})"
        )
    return text


def follow_up_key(parent: str, task: str, n: int) -> str:
    """The key of the ``n``-th follow-up a run of ``parent`` defers: the same for a duplicate
    execution, and within ``MAX_KEY`` however long a chain grows (a digest past it)."""
    key = f"{parent}/then/{task}/{n}"
    return (
        key
        if len(key) <= MAX_KEY
        else f"then:{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()}"
    )
