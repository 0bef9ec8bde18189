"""A web request's ``defer``: one task at a time, on PostgreSQL — this checkout's ``Task.defer``
beside an older commit's and Procrastinate's, in the same run.

Each form defers ``--calls`` tasks one call at a time (no key: a fresh one each, as a request
handler's ``defer`` is), from one thread on a connection pool it opened first, into a scratch
database of its own; the figure is calls per second, each form run ``--rounds`` times in
turn in a process of its own (the median shown). Procrastinate 3 is used as its docs show a
synchronous caller: ``SyncPsycopgConnector``, ``app.open()``, ``task.defer(...)`` — one
stored-procedure call a job. The server's floor, in the same run: the bare one-row autocommit
``INSERT`` loop on one connection.

    python bench/defer_one.py --baseline ../wt-base/src [--calls 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("CRONLAB_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")

# Each prints calls/s; argv: calls, the server's admin URL, the tests folder (scratch dbs).
CRONLAB = """
import sys, time
sys.path.insert(0, sys.argv[3])
import cronlab
from contract.dist_servers import pg_database
calls = int(sys.argv[1])
with pg_database(sys.argv[2]) as url:
    app = cronlab.App(url)

    @app.task(name="receipt")
    def receipt(ctx, n: int) -> None: ...

    receipt.defer(n=-1)  # the store opened and migrated
    started = time.perf_counter()
    for n in range(calls):
        receipt.defer(n=n)
    print(calls / (time.perf_counter() - started))
    app.close()
"""

PROCRASTINATE = """
import sys, time
sys.path.insert(0, sys.argv[3])
import procrastinate
from contract.dist_servers import pg_database
calls = int(sys.argv[1])
with pg_database(sys.argv[2]) as url:
    schema = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    with schema.open():
        schema.schema_manager.apply_schema()
    app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=url))

    @app.task(name="receipt")
    def receipt(n: int) -> None: ...

    with app.open():
        receipt.defer(n=-1)
        started = time.perf_counter()
        for n in range(calls):
            receipt.defer(n=n)
        print(calls / (time.perf_counter() - started))
"""

BARE = """
import sys, time
sys.path.insert(0, sys.argv[3])
import psycopg
from contract.dist_servers import pg_database
calls = int(sys.argv[1])
with pg_database(sys.argv[2]) as url, psycopg.connect(url, autocommit=True) as c:
    c.execute("CREATE TABLE bare (id BIGSERIAL PRIMARY KEY, key TEXT UNIQUE, payload TEXT)")
    started = time.perf_counter()
    for n in range(calls):
        c.execute("INSERT INTO bare (key, payload) VALUES (%s, %s)", (f"k{n}", '{"n": 1}'))
    print(calls / (time.perf_counter() - started))
"""


def rate(script: str, calls: int, src: Path | None) -> float:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    done = subprocess.run(
        [sys.executable, "-c", script, str(calls), PG, str(ROOT / "tests")],
        env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"a form failed: {done.stderr.strip().splitlines()[-1:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="an older commit's src folder")
    ap.add_argument("--calls", type=int, default=3_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    forms = {
        "cronlab, this checkout": (CRONLAB, ROOT / "src"),
        f"cronlab, baseline {args.baseline}": (CRONLAB, Path(args.baseline)),
        "Procrastinate (SyncPsycopgConnector)": (PROCRASTINATE, None),
        "bare one-row INSERT, autocommit": (BARE, None),
    }
    found: dict[str, list[float]] = {name: [] for name in forms}
    for _ in range(args.rounds):
        for name, (script, src) in forms.items():
            found[name].append(rate(script, args.calls, src))
    mine = statistics.median(found["cronlab, this checkout"])
    table = Table(
        "defer, one task a call", "calls/s (median)", "runs", "this checkout ÷ it",
        title=f"{args.calls:,} calls a run, {args.rounds} rounds",
    )  # fmt: skip
    for name, rates in found.items():
        mid = statistics.median(rates)
        table.add_row(name, f"{mid:,.0f}", " ".join(f"{r:,.0f}" for r in rates),
                      f"{mine / mid:.2f}×")  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
