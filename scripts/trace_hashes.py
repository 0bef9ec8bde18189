"""One hash over the simulator's traces of a range of seeds, to show a change moved nothing.

    PYTHONPATH=../pin-COMMIT/src python scripts/trace_hashes.py 1 1000   # at COMMIT
    python scripts/trace_hashes.py 1 1000                       # this checkout

Each seed is drawn with every kind and run on SQLite (``--store URL``: on a PostgreSQL server);
its trace (every statement's turn and text, every process step) and its final rows (sorted:
PostgreSQL reads them in no set order) are hashed in order. The same hash from two trees: the
change left every run as it was, statement for statement. Prints the hash, the seeds, and the
code it ran (``cronlab.__file__``).

``--bare``: cronlab's own names read bare in the trace (``cronlab_tasks``, ``cronlab.tasks``
→ ``tasks``) and statement excerpts cut to 30 characters, to compare a tree from before its
tables stood beside the application's with one from after: the same hash then says only the
names moved. ``--rename OLD=NEW`` (with ``--bare``): ``OLD`` read as ``NEW`` in the trace
before the excerpts are cut (migration 015's column: ``--rename handler=task``).
``--traces-only``: the traces and the tasks' rows, not the effects (whose fifth field, the
effect's task, became the simulator's row number at e6882d6).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re

os.environ["PYTHONHASHSEED"] = "0"

import cronlab
from cronlab.sim import postgres
from cronlab.sim import scenario as sc
from cronlab.sim.run import simulate

# cronlab's schema or prefix, wherever it stands (an excerpt may end inside a table's name).
QUALIFIED = re.compile(r"\bcronlab[._]")


# A statement's excerpt in a trace line (its first 40 or 60 characters: a bare one shows 8
# more), cut to 30 alike; the line's own closing parenthesis kept.
EXCERPTS = [
    re.compile(r"^(  \(.+? stopped at )(.{0,30}).*(\))$", re.S),
    re.compile(r"^(kill .+? at )(.{0,30}).*()$", re.S),
    re.compile(r"^(.+?: the server raises \S+ at )(.{0,30}).*()$", re.S),
    re.compile(r"^(  .+? waits for a lock at )(.{0,30}).*()$", re.S),
]


def bare(entry: object, renames: tuple[tuple[str, str], ...] = ()) -> object:
    """A trace line as a tree from before the move would write it, excerpts cut alike."""
    if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], str)):
        return entry
    text = QUALIFIED.sub("", entry[1])
    for old, new in renames:
        text = text.replace(old, new)
    for pattern in EXCERPTS:
        text = pattern.sub(r"\1\2\3", text)
    return (entry[0], text)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("first", type=int)
    p.add_argument("last", type=int)
    p.add_argument("--store", default=None, help="a PostgreSQL server's URL (default: SQLite)")
    p.add_argument("--bare", action="store_true", help="hash cronlab's names bare")
    p.add_argument("--rename", action="append", default=[], metavar="OLD=NEW",
                   help="with --bare: read OLD as NEW in the trace")  # fmt: skip
    p.add_argument("--traces-only", action="store_true", help="leave the effects out")
    args = p.parse_args()
    renames = tuple(tuple(r.split("=", 1)) for r in args.rename)
    if any(len(r) != 2 for r in renames) or (renames and not args.bare):
        p.error("--rename takes OLD=NEW, and only with --bare")
    digest = hashlib.sha256()
    scratch = postgres.scratch_run(args.store) if args.store else contextlib.nullcontext()
    with scratch:
        for seed in range(args.first, args.last + 1):
            out = simulate(sc.draw(seed, sc.KINDS), args.store)
            effects = [] if args.traces_only else sorted(map(repr, out.effects))
            rows = sorted(map(repr, out.tasks)), effects  # (sorted: unordered reads)
            trace = [bare(e, renames) for e in out.trace] if args.bare else out.trace
            digest.update(repr((seed, trace, rows)).encode())
    print(digest.hexdigest(), f"seeds {args.first}-{args.last}", os.path.dirname(cronlab.__file__))


if __name__ == "__main__":
    main()
