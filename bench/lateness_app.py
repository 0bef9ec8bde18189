"""The app ``bench/lateness.py`` runs: one no-op task, fired by CRONLAB_BENCH_SCHEDULES
schedules of CRONLAB_BENCH_CRON (each its own name), on CRONLAB_STORE."""

from __future__ import annotations

import os

import cronlab

app = cronlab.App(name="lateness")


@app.task(name="tick")
def tick(ctx: cronlab.Context) -> None:
    """Nothing: the lateness measured is the engine's, from trigger to the handler's start."""


for _i in range(int(os.environ.get("CRONLAB_BENCH_SCHEDULES", "0"))):
    app.cron(os.environ.get("CRONLAB_BENCH_CRON", "* * * * * *"), name=f"tick-{_i}")(tick)
