"""One hash over the simulator's traces of a range of seeds, to show a change moved nothing.

    PYTHONPATH=../pin-COMMIT/src python scripts/trace_hashes.py 1 1000   # at COMMIT
    python scripts/trace_hashes.py 1 1000                       # this checkout

Each seed is drawn with every kind and run on SQLite (``--store URL``: on a PostgreSQL server);
its trace (every statement's turn and text, every process step) and its final rows (sorted:
PostgreSQL reads them in no set order) are hashed in order. The same hash from two trees: the
change left every run as it was, statement for statement. Prints the hash, the seeds, and the
code it ran (``cronlab.__file__``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os

os.environ["PYTHONHASHSEED"] = "0"

import cronlab
from cronlab.sim import postgres
from cronlab.sim import scenario as sc
from cronlab.sim.run import simulate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("first", type=int)
    p.add_argument("last", type=int)
    p.add_argument("--store", default=None, help="a PostgreSQL server's URL (default: SQLite)")
    args = p.parse_args()
    digest = hashlib.sha256()
    scratch = postgres.scratch_run(args.store) if args.store else contextlib.nullcontext()
    with scratch:
        for seed in range(args.first, args.last + 1):
            out = simulate(sc.draw(seed, sc.KINDS), args.store)
            rows = sorted(map(repr, out.tasks)), sorted(map(repr, out.effects))  # (unordered reads)
            digest.update(repr((seed, out.trace, rows)).encode())
    print(digest.hexdigest(), f"seeds {args.first}-{args.last}", os.path.dirname(cronlab.__file__))


if __name__ == "__main__":
    main()
