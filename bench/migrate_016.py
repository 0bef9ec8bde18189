"""What migration 016 (SQLite's tasks and queue made again with AUTOINCREMENT) costs a store
at upgrade, beside the time the older commit took to fill that store.

An older commit's code (``--baseline SRC``, a ``src`` folder at schema 15) makes a store of
``--count`` PENDING tasks; this checkout then opens it, which migrates it. Printed: the
older code's fill time (the baseline), the migration's time and the file's size before and
after (the old table's pages stay in the file, free, until SQLite reuses them).

    python bench/migrate_016.py --baseline ../wt838/src [--count 1000000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FILL = """
import sys, time
from cronlab.ports import NewTask
from cronlab.stores.sqlite import SqliteStore
count, path = int(sys.argv[1]), sys.argv[2]
store = SqliteStore(path)
assert store.schema_versions()[-1] < 16, "the baseline must be older than migration 016"
started = time.perf_counter()
for first in range(0, count, 100_000):
    store.add_tasks(NewTask(idempotency_key=f"k{i}", task="t", trigger_ms=1_800_000_000_000 + i)
                    for i in range(first, min(count, first + 100_000)))
print(time.perf_counter() - started)
store.close()
"""

OPEN = """
import sys, time
from cronlab.stores.sqlite import SqliteStore
started = time.perf_counter()
store = SqliteStore(sys.argv[1])
took = time.perf_counter() - started
assert store.schema_versions()[-1] >= 16 and store.counts()["PENDING"] == int(sys.argv[2])
store.close()
print(took)
"""


def timed(code: str, src: Path, *args: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**os.environ, "PYTHONPATH": str(src)},
        capture_output=True, text=True, check=True, timeout=3600,
    )  # fmt: skip
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="an older commit's src folder")
    ap.add_argument("--count", type=int, default=1_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cronlab-bench-") as folder:
        path = str(Path(folder) / "s.db")
        fill = timed(FILL, Path(args.baseline), str(args.count), path)
        before = os.path.getsize(path)
        migrate = timed(OPEN, ROOT / "src", path, str(args.count))
        after = os.path.getsize(path)
    print(f"{args.count:,} tasks: filled by the baseline in {fill:.1f} s; migration 016 took "
          f"{migrate:.1f} s ({migrate / fill:.2f}× the fill); the file {before / 1e6:.0f} → "
          f"{after / 1e6:.0f} MB")  # fmt: skip


if __name__ == "__main__":
    main()
