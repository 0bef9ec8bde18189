"""Start-up (issue 17): from launching ``cronlab cluster`` to its first task's handler start,
for a task that is due already, on SQLite or PostgreSQL; five runs each.

The baseline, measured in the same run: the same interpreter starting and exiting
(``python -c pass``) and ``cronlab cluster --help`` (the interpreter plus the CLI's imports),
each the median of five — the floor under a cluster whose parent and children each start one.

cronlab's modules are compiled to bytecode first, as ``pip install`` leaves a wheel: an
editable checkout on a machine that sets ``PYTHONDONTWRITEBYTECODE`` (this one does) would
otherwise compile about a hundred modules from source in every process it starts.

    .venv/bin/python bench/startup.py [--store sqlite|postgresql] [--runs 5] [--replicas 1]
"""

from __future__ import annotations

import argparse
import compileall
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cronlab
from cronlab import stores
from cronlab.lab.invoices import tasks as invoice_tasks
from cronlab.testing import scratch_database

ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def first_run(url: str, replicas: int, workers: int) -> float:
    """Seconds from the cluster's launch to the handler start of a task due before it."""
    store = stores.open_store(url, create=True)
    store.add_tasks(invoice_tasks(1, int(time.time() * 1000) - 1))
    cmd = [sys.executable, "-m", "cronlab", "cluster", "--store", url, "--restart-after", "never"]
    cmd += ["--replicas", str(replicas), "--workers", str(workers)]
    launched_ms = time.time() * 1000
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (rows := store.query(store.own("SELECT min(start_ms) FROM executions")))[0][0]:
            if time.monotonic() > deadline:
                raise SystemExit("no task ran within 60 s")
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
        store.close()
    return (int(rows[0][0]) - launched_ms) / 1000


def runs(kind: str, n: int, one: Callable[[str], float]) -> list[float]:
    out = []
    for _ in range(n):
        if kind == "sqlite":
            with tempfile.TemporaryDirectory(prefix="cronlab-startup-") as d:
                out.append(one(f"sqlite:///{d}/store.db"))
        else:
            with scratch_database(ADMIN, "cronlab_bench") as url:
                out.append(one(url))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    compileall.compile_dir(Path(cronlab.__file__).parent, quiet=1)
    bare = statistics.median(timed([sys.executable, "-c", "pass"]) for _ in range(5))
    cli = statistics.median(
        timed([sys.executable, "-m", "cronlab", "cluster", "--help"]) for _ in range(5)
    )
    print(
        f"baseline: python -c pass {bare * 1000:.0f} ms · "
        f"cronlab cluster --help {cli * 1000:.0f} ms"
    )
    got = runs(args.store, args.runs, lambda url: first_run(url, args.replicas, args.workers))
    med = statistics.median(got)
    shown = ", ".join(f"{s * 1000:.0f}" for s in got)
    print(
        f"{args.store}, {args.replicas} scheduler(s), {args.workers} worker(s): first task ran "
        f"{shown} ms after the launch · median {med * 1000:.0f} ms (goal 500) · "
        f"{med / cli:.1f}× one cronlab start-up"
    )


if __name__ == "__main__":
    main()
