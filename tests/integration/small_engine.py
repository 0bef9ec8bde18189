"""``cronlab`` with a live run scaled down: whatever the lab asks for, a few invoices, one
replica and one worker. The lab runs it as its engine command (``Live(cronlab=…)``), so the
schemathesis test drives the real CLI, store and processes at a cost of seconds per run."""

from __future__ import annotations

import sys

from cronlab.cli import main

SMALL = {"--count": "20", "--replicas": "1", "--workers": "1"}


def shrink(argv: list[str]) -> list[str]:
    """``argv`` with each option of ``SMALL`` given its small value."""
    out = list(argv)
    for i, arg in enumerate(out[:-1]):
        if arg in SMALL:
            out[i + 1] = SMALL[arg]
    return out


if __name__ == "__main__":
    sys.exit(main(shrink(sys.argv[1:])))
