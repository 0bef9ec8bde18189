"""The console's page load with a full history (issue 16's "must show").

A store with 1,000 schedules firing every minute and 10 minutes of their runs — either a real
cluster run for that long (``--cluster``: 3 schedulers, 2 workers, the real clock), or the same
engine code (scheduler and worker loops, the SQL store) stepped on a fake clock through 10
minutes (the default: seconds instead of minutes; a failing task and a paused schedule add
every outcome). Then ``cronlab console`` on it, and Chromium loads the page ``--loads`` times:
navigation start to fully rendered (the table of every schedule with its next 10 fires and
last 10 runs, the processes, the alerts and the lateness chart drawn), read from the page's
own ``performance.now()`` when it says it rendered. Printed: median and p90, against the same
page on an empty store measured in the same run (the baseline), and against the goal of 300 ms.
Also checked: ``cronlab runs --json`` agrees with the store row for row.

    .venv/bin/python bench/console_load.py [--schedules 1000] [--minutes 10] [--loads 15]
        [--cluster] [--store sqlite:///PATH] [--screenshot docs/console.png]
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
GOAL_MS = 300.0


def seed_fake(path: Path, schedules: int, minutes: int) -> None:
    """``schedules`` every-minute schedules run ``minutes`` on a fake clock (the real engine)."""
    from cronlab import App, Context
    from cronlab.clock import FakeClock
    from cronlab.core.policy import to_ms
    from cronlab.runtime import embedded
    from cronlab.runtime.duties import Operations
    from cronlab.stores.sqlite import SqliteStore

    now = datetime.now(UTC).replace(second=30, microsecond=0)
    clock = FakeClock(to_ms(now) - minutes * 60_000)
    store = SqliteStore(path)
    app = App(store=store, clock=clock, name="bench")

    @app.task(name="report", retries=1)
    def report(ctx: Context, n: int) -> None:
        if n % 97 == 0:
            raise RuntimeError(f"report {n}: upstream answered 503")

    for n in range(schedules):
        app.cron("* * * * *", name=f"job-{n:04d}", args={"n": n}, alert_on_failures=3)(report)
    engine = embedded.start(app, concurrency=10, ops=Operations())
    for _ in range(minutes * 60):
        clock.advance(1_000)
        engine.scheduler.step()
        while engine.worker.step() == 0:
            pass
    store.pause_schedule("job-0001", clock.now_ms(), note="vendor maintenance until Friday")
    engine.stop()
    store.close()


def seed_cluster(url: str, schedules: int, minutes: int, workdir: Path) -> None:
    """A real cluster runs ``schedules`` every-minute schedules for ``minutes`` minutes."""
    (workdir / "bench_app.py").write_text(
        "import cronlab\n"
        "app = cronlab.App(name='bench')\n"
        "@app.task(name='report', retries=1)\n"
        "def report(ctx: cronlab.Context, n: int) -> None:\n"
        "    if n % 97 == 0:\n"
        "        raise RuntimeError(f'report {n}: upstream answered 503')\n"
        f"for n in range({schedules}):\n"
        "    app.cron('* * * * *', name=f'job-{n:04d}', args={'n': n},\n"
        "             alert_on_failures=3)(report)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronlab", "cluster", "--store", url, "--app", "bench_app:app",
         "--replicas", "3", "--workers", "2"],
        cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(minutes * 60 + 20)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronlab", "console", "--store", url, "--port", str(port),
         "--no-open"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(base + "/openapi.json", timeout=2).close()
            return proc, base
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the console did not start")


def page_loads(base: str, loads: int, screenshot: Path | None = None) -> list[float]:
    """Navigation start → rendered, in ms, for each of ``loads`` fresh page loads."""
    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        for i in range(loads + 1):  # the first warms the console's caches and Chromium's
            page.goto(base + "/")
            page.wait_for_function("() => window.cronlabConsole && window.cronlabConsole.loads > 0")
            if i:
                times.append(float(page.evaluate("window.cronlabConsole.rendered")))
        if screenshot is not None:
            page.wait_for_timeout(300)
            page.screenshot(path=str(screenshot), full_page=False)
        browser.close()
    return times


def runs_agree(url: str, path: Path) -> int:
    """``cronlab runs --json`` against the tables, row for row; returns the rows compared."""
    import sqlite3

    out = subprocess.run(
        [sys.executable, "-m", "cronlab", "runs", "--store", url, "--json", "--limit", "100000"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    printed = sorted(
        (r["task_id"], r["attempt"], r["start_ms"], r["end_ms"], r["worker"], r["error"])
        for r in json.loads(out.stdout)["runs"]
        if r["start_ms"] is not None
    )
    db = sqlite3.connect(path)
    stored = sorted(
        db.execute(
            "SELECT task_id, attempt, start_ms, end_ms, worker, error FROM cronlab_executions"
        )
    )
    db.close()
    if printed != stored:
        raise SystemExit(f"cronlab runs disagrees with the store: {len(printed)} vs {len(stored)}")
    return len(stored)


def figure(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[max(0, int(len(ordered) * 0.9) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schedules", type=int, default=1000)
    ap.add_argument("--minutes", type=int, default=10)
    ap.add_argument("--loads", type=int, default=15)
    ap.add_argument("--cluster", action="store_true", help="a real cluster run, in real time")
    ap.add_argument("--store", default=None, help="an existing store (seeds nothing)")
    ap.add_argument("--screenshot", type=Path, default=None)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cronlab-console-bench-"))
    path = folder / "console.db"
    url = args.store or f"sqlite:///{path}"
    started = time.monotonic()
    if args.store:
        path = Path(args.store.removeprefix("sqlite:///"))
    elif args.cluster:
        seed_cluster(url, args.schedules, args.minutes, folder)
    else:
        seed_fake(path, args.schedules, args.minutes)
    seeded = time.monotonic() - started
    empty = folder / "empty.db"
    from cronlab.stores.sqlite import SqliteStore

    SqliteStore(empty).close()
    rows = runs_agree(url, path)
    counts = SqliteStore(path, create=False).counts()
    results: dict[str, Any] = {}
    for label, target in (("baseline (empty store)", f"sqlite:///{empty}"), ("full", url)):
        proc, base = serve(target)
        try:
            shot = args.screenshot if label == "full" else None
            results[label] = figure(page_loads(base, args.loads, shot))
            with urllib.request.urlopen(base + "/api/console") as res:
                results[label + " api bytes"] = len(res.read())
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=20)
    full, base = results["full"], results["baseline (empty store)"]
    source = "an existing store" if args.store else "real cluster" if args.cluster else "fake clock"
    print(f"store: {args.schedules:,} schedules, {args.minutes} min of history "
          f"({source}; seeded in {seeded:.1f} s), "
          f"tasks {counts}, {rows:,} run records")  # fmt: skip
    print(f"cronlab runs --json agrees with the store: {rows:,} rows")
    print(f"/api/console: {results['full api bytes']:,} bytes")
    print(
        f"page load, navigation to rendered, {args.loads} loads: median {full[0]:.0f} ms, "
        f"p90 {full[1]:.0f} ms"
    )
    print(
        f"baseline (empty store): median {base[0]:.0f} ms, p90 {base[1]:.0f} ms; "
        f"ratio {full[0] / base[0]:.2f}"
    )
    print(
        f"goal {GOAL_MS:.0f} ms: median / goal = {full[0] / GOAL_MS:.2f}, "
        f"{'met' if full[1] < GOAL_MS else 'NOT met'} at p90"
    )
    print(f"store kept at {path}")


if __name__ == "__main__":
    main()
