"""What the chunks of ``scripts/verify_chunks.sh`` found, per store: seeds, seconds, the
seed ranges run, how many seeds each kind was in, and every violation.

    python scripts/verify_summary.py docs/history/verify-COMMIT
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def ranges(starts: list[tuple[int, int]]) -> str:
    """'1–4,400, 10,001–12,200' from (first seed, how many) pairs."""
    out: list[list[int]] = []
    for first, n in sorted(starts):
        if out and out[-1][1] + 1 == first:
            out[-1][1] = first + n - 1
        else:
            out.append([first, first + n - 1])
    return ", ".join(f"{a:,}–{b:,}" for a, b in out)


def main(folder: Path) -> int:
    for prefix, store in (("sq", "SQLite"), ("pg", "PostgreSQL")):
        files = sorted(folder.glob(f"{prefix}_*.json"))
        if not files:
            continue
        seeds, seconds, kinds = 0, 0.0, Counter[str]()
        starts, violations = [], []
        for f in files:
            d = json.loads(f.read_text())
            first = int(f.stem.split("_")[1])
            starts.append((first, d["seeds"]))
            seeds += d["seeds"]
            seconds += d["seconds"]
            for kind, row in d["by_fault"].items():
                kinds[kind] += row["seeds"]
            violations += d["violations"]
        took = f"{seconds:,.0f} s of one job's wall time (beside other work)"
        print(f"{store}: {seeds:,} seeds ({ranges(starts)}), {took}")
        bad = sorted({v["seed"] for v in violations})
        print(f"  violations: {len(violations)}, in {len(bad)} seeds {bad}")
        for v in violations:
            print(f"    {json.dumps(v)[:300]}")
        low, high = min(kinds.values()), max(kinds.values())
        print(f"  every kind in {low:,}–{high:,} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
